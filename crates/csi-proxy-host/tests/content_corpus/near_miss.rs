//! The reverse direction, on near misses: whenever `identify` names a
//! filesystem (a result FormatVolume may replace), `blkid -p` names the
//! same filesystem. Near misses are real images with one of libblkid's
//! conditions broken, and random bytes carrying a filesystem's magic.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use csi_proxy_host::storage::parse::content::{identify, read_regions, Class, Device};

use super::ctx::find_tool;
use super::{blkid_names, run};

/// The filesystems `identify` names on `target`.
fn our_filesystems(target: &Path) -> BTreeSet<String> {
    let mut f = File::open(target).unwrap();
    let size = f.seek(SeekFrom::End(0)).unwrap();
    let (head, tail) = read_regions(size, |off, buf| f.read_exact_at(buf, off)).unwrap();
    identify(&Device::new(&head, &tail, size))
        .iter()
        .filter(|found| found.class == Class::Filesystem)
        .map(|found| found.name.to_string())
        .collect()
}

/// A sparse file of `mib` MiB, removed on drop.
struct Img(PathBuf);

impl Img {
    fn new(tag: &str, mib: u64) -> Img {
        let p = std::env::temp_dir().join(format!("near-miss-{}-{tag}", std::process::id()));
        File::create(&p).unwrap().set_len(mib << 20).unwrap();
        Img(p)
    }

    fn put(&self, off: u64, bytes: &[u8]) {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&self.0)
            .unwrap();
        f.write_all_at(bytes, off).unwrap();
    }
}

impl Drop for Img {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn random(n: usize) -> Vec<u8> {
    let mut b = vec![0u8; n];
    File::open("/dev/urandom")
        .unwrap()
        .read_exact(&mut b)
        .unwrap();
    b
}

/// Checks one image; returns a line for each filesystem we name and
/// blkid does not.
fn check(what: &str, img: &Img, bad: &mut Vec<String>) {
    let ours = our_filesystems(&img.0);
    let theirs = match blkid_names(&img.0) {
        Ok(t) => t,
        Err(e) => return bad.push(format!("{what}: {e}")),
    };
    for fs in ours.difference(&theirs) {
        bad.push(format!("{what}: we name {fs}, blkid -p names {theirs:?}"));
    }
}

#[test]
fn a_filesystem_we_name_on_a_near_miss_is_blkids_too() {
    if find_tool("blkid").is_none() {
        eprintln!("skipped: blkid not found");
        return;
    }
    let mut bad = Vec::new();
    // Random bytes with each weak magic in place.
    for (tag, off, magic) in [
        ("ntfs-oem", 3u64, &b"NTFS    "[..]),
        ("exfat-oem", 3, b"EXFAT   "),
        ("xfs", 0, b"XFSB"),
        ("btrfs", 0x10040, b"_BHRfS_M"),
    ] {
        for _ in 0..8 {
            let img = Img::new(tag, 8);
            img.put(0, &random(8 << 20));
            img.put(off, magic);
            check(tag, &img, &mut bad);
        }
    }
    // A real NTFS with one of libblkid's conditions broken at a time.
    if find_tool("mkfs.ntfs").is_some() {
        let breaks: [(&str, u64, &[u8]); 7] = [
            ("sector size 128", 11, &[0x80, 0x00]),
            ("sectors per cluster 3", 13, &[3]),
            ("reserved sectors", 14, &[1, 0]),
            ("fats", 16, &[2]),
            ("large sectors", 32, &[1, 0, 0, 0]),
            ("MFT record clusters 3", 0x40, &[3]),
            (
                "MFT past the volume",
                0x30,
                &[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0],
            ),
        ];
        for (what, off, bytes) in breaks {
            let img = Img::new("ntfs", 64);
            let path = img.0.to_str().unwrap().to_string();
            run("mkfs.ntfs", &["-q", "-F", "-f", &path], &[], "").unwrap();
            img.put(off, bytes);
            check(what, &img, &mut bad);
        }
    } else {
        eprintln!("near misses of a real NTFS skipped: mkfs.ntfs not found");
    }
    assert!(bad.is_empty(), "{bad:#?}");
}
