//! What FormatVolume's zero check costs (`parse::content::Scanned`): on an
//! empty 1 TiB sparse loop disk and on the format bench's 128 MiB disk,
//! unthrottled and with reads throttled to THROTTLE_BPS (8 MiB/s; cgroup
//! v1 blkio, skipped where it is missing), the page cache of the device
//! and of its image dropped before every read. Baseline: the check before
//! it (the probes' regions, 4 MiB and 4 KiB at the start, 2 MiB at the
//! end); then the adopted check (the first 64 MiB whole, 4 KiB every
//! 4 GiB, the last MiB) and a wider one (4 KiB every GiB) for
//! comparison. Medians of ROUNDS (5) rounds, the variants alternating.
//!
//! `ONLY=check cargo bench -p csi-proxy --bench storage` (as root).

use crate::linux::env;
use csi_proxy_host::storage::parse::content::{
    first_nonzero_in, zero_check_spans, Regions, Scanned, ZERO_SAMPLE,
};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const READ_THROTTLE: &str = "/sys/fs/cgroup/blkio/blkio.throttle.read_bps_device";

struct Disk {
    dev: String,
    key: String,
    img: File,
    throttled: bool,
}

impl Disk {
    fn new(dir: &Path, name: &str, size: u64) -> Disk {
        let path = dir.join(name);
        let img = File::create(&path).unwrap();
        img.set_len(size).unwrap();
        let out = Command::new("losetup")
            .args(["-f", "--show"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(out.status.success());
        let dev = String::from_utf8(out.stdout).unwrap().trim().to_string();
        let sys = dev.replace("/dev/", "/sys/block/") + "/dev";
        let key = std::fs::read_to_string(sys).unwrap().trim().to_string();
        Disk {
            dev,
            key,
            img,
            throttled: false,
        }
    }

    fn throttle(&mut self, bps: u64) -> bool {
        let ok = std::fs::write(READ_THROTTLE, format!("{} {bps}", self.key)).is_ok();
        self.throttled = ok && bps != 0;
        ok
    }

    /// Drops the cached pages of the device and of its image.
    fn drop_cache(&self) {
        let s = Command::new("blockdev")
            .args(["--flushbufs", &self.dev])
            .status()
            .unwrap();
        assert!(s.success());
        // SAFETY: fadvise on a descriptor we own; no memory is passed.
        unsafe { libc::posix_fadvise(self.img.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    }
}

impl Drop for Disk {
    fn drop(&mut self) {
        if self.throttled {
            self.throttle(0);
        }
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
    }
}

/// The check `variant` makes of `dev`, as the backend makes it (buffered
/// reads through one handle).
fn check(dev: &File, size: u64, variant: usize) -> Option<u64> {
    let read_at = |off: u64, buf: &mut [u8]| dev.read_exact_at(buf, off);
    match variant {
        0 => {
            let r = Regions::read(size, read_at).unwrap();
            (!r.found.is_empty()).then_some(0)
        }
        1 => Scanned::read(size, read_at).unwrap().nonzero,
        _ => {
            let r = Regions::read(size, read_at).unwrap();
            let mut spans = zero_check_spans(size);
            let mut at = 1 << 30;
            while at < size {
                spans.push((at, ZERO_SAMPLE.min(size - at)));
                at += 1 << 30;
            }
            spans.sort_unstable();
            first_nonzero_in(&r.device(), &spans, read_at).unwrap()
        }
    }
}

const VARIANTS: [&str; 3] = [
    "baseline (4 MiB + 4 KiB head, 2 MiB tail)",
    "adopted (64 MiB head, 4 KiB / 4 GiB, last MiB)",
    "wider (64 MiB head, 4 KiB / GiB, last MiB)",
];

fn measure(disk: &Disk, size: u64, rounds: usize) -> Vec<Duration> {
    let dev = File::open(&disk.dev).unwrap();
    let mut times = vec![Vec::new(); VARIANTS.len()];
    for _ in 0..rounds {
        for (v, t) in times.iter_mut().enumerate() {
            disk.drop_cache();
            let start = Instant::now();
            assert_eq!(check(&dev, size, v), None, "an empty disk");
            t.push(start.elapsed());
        }
    }
    times
        .into_iter()
        .map(|mut t| {
            t.sort();
            t[t.len() / 2]
        })
        .collect()
}

fn report(what: &str, medians: &[Duration]) {
    for (v, m) in medians.iter().enumerate() {
        let added = m.as_secs_f64() - medians[0].as_secs_f64();
        println!(
            "check {what:<30} {:<50} {:>9.1} ms (+{:.1} ms, x{:.2})",
            VARIANTS[v],
            m.as_secs_f64() * 1e3,
            added * 1e3,
            m.as_secs_f64() / medians[0].as_secs_f64()
        );
    }
}

pub fn run(dir: &Path) {
    let rounds = env("ROUNDS", 5);
    let bps = env("THROTTLE_BPS", 8 << 20) as u64;
    for (name, size) in [
        ("1 TiB sparse", 1u64 << 40),
        ("128 MiB (format bench)", 128 << 20),
    ] {
        let mut disk = Disk::new(dir, &format!("check-{size}.img"), size);
        report(name, &measure(&disk, size, rounds));
        if size > 1 << 30 {
            continue;
        }
        if !disk.throttle(bps) {
            println!("check {name}: no cgroup v1 blkio read throttle; throttled case skipped");
            continue;
        }
        report(
            &format!("{name} at {} MiB/s", bps >> 20),
            &measure(&disk, size, rounds.min(3)),
        );
    }
}
