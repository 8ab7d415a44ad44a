//! What a filesystem found in a region does not excuse (issue 37's red
//! team, F1 to F3), on real loop devices through the real binary:
//! PartitionDisk refuses a deleted partition's filesystem in the region its
//! new partition would cover, on a GPT and on an empty DOS table alike; an
//! MBR's boot code is content; FormatVolume over a filesystem still checks
//! the zero-check spans past the filesystem's recorded size; and an NTFS
//! OEM name without libblkid's other conditions is no filesystem.
#![cfg(target_os = "linux")]

mod common;
mod storage;

use common::{only_volume, partition, Proxy};
use csi_proxy_api::volume;
use csi_proxy_host::storage::parse::gpt;
use std::io::Read;
use storage::{can_run, read_dev, write_dev, LoopDisk, MIB};
use tonic::Code;

const SIZE: u64 = 64 * MIB;

fn random(n: usize) -> Vec<u8> {
    let mut b = vec![0u8; n];
    std::fs::File::open("/dev/urandom")
        .unwrap()
        .read_exact(&mut b)
        .unwrap();
    b
}

/// An ext4 of `n` bytes made by mkfs.ext4 (a sparse file, read back and
/// removed).
fn ext4_image(n: u64) -> Vec<u8> {
    let p = std::env::temp_dir().join(format!("i37-ext4-{}", std::process::id()));
    std::fs::File::create(&p).unwrap().set_len(n).unwrap();
    let st = std::process::Command::new("mkfs.ext4")
        .args(["-q", "-F", "-L", "victim"])
        .arg(&p)
        .status()
        .unwrap();
    assert!(st.success());
    let b = std::fs::read(&p).unwrap();
    std::fs::remove_file(&p).unwrap();
    b
}

async fn format(proxy: &Proxy, volume_id: &str) -> Result<(), tonic::Status> {
    let mut v = proxy.client().connect_volume_v1().await.unwrap();
    v.format_volume(volume::v1::FormatVolumeRequest {
        volume_id: volume_id.to_string(),
    })
    .await
    .map(|_| ())
}

/// The partition node of a loop disk.
fn part1(d: &LoopDisk) -> String {
    let p = format!("/dev/{}p1", d.name);
    for _ in 0..500 {
        if std::path::Path::new(&p).exists() {
            return p;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("{p} did not appear");
}

/// A deleted partition's ext4 at the new partition's start, under an
/// empty GPT or an empty DOS table (with or without boot code): refused
/// with and without the flag, nothing written. An empty DOS table over
/// zeros is replaced; its boot code needs the flag.
#[tokio::test(flavor = "multi_thread")]
async fn a_deleted_partitions_filesystem_is_never_partitioned_over() {
    if !can_run() {
        return;
    }
    let ext4 = ext4_image(8 * MIB);
    let mut mbr = vec![0u8; 512];
    mbr[440..444].copy_from_slice(&[9, 8, 7, 6]);
    mbr[510] = 0x55;
    mbr[511] = 0xAA;
    let mut boot = mbr.clone();
    boot[..440].copy_from_slice(&random(440));
    // (what, the writes that make the table: offset, bytes)
    type Table<'a> = (&'a str, Vec<(u64, Vec<u8>)>);
    let tables: [Table; 3] = [
        (
            "an empty GPT",
            gpt::create_empty(512, SIZE / 512, gpt::Guid::from_windows_bytes([0x44; 16]))
                .unwrap()
                .into_iter()
                .map(|w| (w.offset, w.bytes))
                .collect(),
        ),
        ("an empty DOS table", vec![(0, mbr.clone())]),
        ("an empty DOS table with boot code", vec![(0, boot.clone())]),
    ];
    for (what, writes) in &tables {
        for args in [&[][..], &["-overwrite-unidentified-content"][..]] {
            let proxy = Proxy::start(args);
            let d = LoopDisk::new(proxy.root.path(), SIZE);
            for (off, b) in writes {
                write_dev(&d.dev, *off, b);
            }
            write_dev(&d.dev, MIB, &ext4);
            let (head, tail) = (
                read_dev(&d.dev, 0, MIB as usize),
                read_dev(&d.dev, SIZE - MIB, MIB as usize),
            );
            let err = partition(&proxy, d.number)
                .await
                .expect_err(&format!("{what} {args:?}"));
            assert_eq!(err.code(), Code::FailedPrecondition, "{what}: {err:?}");
            // Boot code without the flag is refused first, as content.
            let named = if what.contains("boot code") && args.is_empty() {
                "-overwrite-unidentified-content"
            } else {
                "a new partition would cover (bytes 1048576 to"
            };
            assert!(
                err.message().contains(named)
                    && (named.starts_with('-')
                        || err.message().contains("holds ext4 (filesystem)")),
                "{what} {args:?}: {}",
                err.message()
            );
            assert!(
                read_dev(&d.dev, 0, MIB as usize) == head,
                "{what}: the table changed"
            );
            assert!(
                read_dev(&d.dev, SIZE - MIB, MIB as usize) == tail,
                "{what}: the backup changed"
            );
            assert!(
                read_dev(&d.dev, MIB, ext4.len()) == ext4,
                "{what}: the ext4 changed"
            );
        }
    }
    // No ext4: the empty table over zeros is replaced; boot code before it
    // is unidentified content, written over only with the flag.
    for (table, args, ok) in [
        (&mbr, &[][..], true),
        (&boot, &[][..], false),
        (&boot, &["-overwrite-unidentified-content"][..], true),
    ] {
        let proxy = Proxy::start(args);
        let d = LoopDisk::new(proxy.root.path(), SIZE);
        write_dev(&d.dev, 0, table);
        let r = partition(&proxy, d.number).await;
        assert_eq!(r.is_ok(), ok, "boot code {} {args:?}: {r:?}", table[0] != 0);
        if let Err(e) = r {
            assert!(
                e.message().contains("-overwrite-unidentified-content"),
                "{}",
                e.message()
            );
            assert_eq!(read_dev(&d.dev, 0, 512), table[..], "the boot code changed");
        }
    }
}

/// FormatVolume over a filesystem smaller than its volume: unidentified
/// bytes past the filesystem's recorded size, inside the zero-check spans,
/// are refused without the flag; a filesystem that covers its volume is
/// replaced.
#[tokio::test(flavor = "multi_thread")]
async fn a_filesystem_found_is_not_the_rest_is_nothing() {
    if !can_run() {
        return;
    }
    let proxy = Proxy::start(&[]);
    let d = LoopDisk::new(proxy.root.path(), SIZE);
    partition(&proxy, d.number).await.unwrap();
    let id = only_volume(&proxy, d.number).await;
    let node = part1(&d);
    let ext4 = ext4_image(8 * MIB);
    write_dev(&node, 0, &ext4);
    let secret = random(4096);
    write_dev(&node, 20 * MIB, &secret);
    let err = format(&proxy, &id).await.expect_err("data past the ext4");
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(
        err.message().contains("ext4 filesystem records")
            && err.message().contains(&(20 * MIB).to_string()),
        "{}",
        err.message()
    );
    assert_eq!(read_dev(&node, 20 * MIB, 4096), secret);
    assert_eq!(read_dev(&node, 0, ext4.len()), ext4);
    // Zeroed again: the small ext4 alone is replaced, and the ext4 mkfs
    // made over the whole volume is replaced again.
    write_dev(&node, 20 * MIB, &[0u8; 4096]);
    format(&proxy, &id).await.unwrap();
    format(&proxy, &id).await.unwrap();
}

/// Random bytes whose OEM name reads `NTFS    ` (blkid -p: nothing) are
/// unidentified: IsVolumeFormatted is false and FormatVolume refuses them
/// without the flag.
#[tokio::test(flavor = "multi_thread")]
async fn an_ntfs_oem_name_alone_is_no_filesystem() {
    if !can_run() {
        return;
    }
    let proxy = Proxy::start(&[]);
    let d = LoopDisk::new(proxy.root.path(), SIZE);
    partition(&proxy, d.number).await.unwrap();
    let id = only_volume(&proxy, d.number).await;
    let node = part1(&d);
    let mut data = random(8 * MIB as usize);
    data[3..11].copy_from_slice(b"NTFS    ");
    write_dev(&node, 0, &data);
    let blkid = std::process::Command::new("blkid")
        .args(["-p", "-o", "value", "-s", "TYPE", &node])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&blkid.stdout).trim(), "", "blkid");
    let mut v = proxy.client().connect_volume_v1().await.unwrap();
    let formatted = v
        .is_volume_formatted(volume::v1::IsVolumeFormattedRequest {
            volume_id: id.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .formatted;
    assert!(!formatted);
    let err = format(&proxy, &id).await.expect_err("random bytes");
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert_eq!(read_dev(&node, 0, data.len()), data);
}
