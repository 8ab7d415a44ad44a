//! The audit log on a disk whose writes are slow (a loop disk with ext4,
//! its writes throttled by the block layer): in best-effort mode a sync
//! that takes seconds must not stop lines from being written, so none is
//! dropped while the page cache can take them. Seen in CI: after a large
//! build, `fdatasync` of the log waited seconds for the journal, the
//! writer stood still, its queue filled and lines were dropped.
#![cfg(target_os = "linux")]

mod audit;
mod common;
mod storage;

use audit::lines;
use common::Proxy;
use csi_proxy_api::filesystem::v1::{filesystem_client::FilesystemClient, MkdirRequest};
use std::process::Command;
use storage::{can_run, can_throttle, tool, LoopDisk, Throttle, MIB};

/// Writes to the log's disk: a sync of a few hundred KiB takes seconds.
const BPS: u64 = 64 * 1024;
const CALLS: usize = 12000;

#[tokio::test]
async fn a_slow_sync_drops_no_line_in_best_effort_mode() {
    if !can_run() || !can_throttle() {
        return;
    }
    let Some(mkfs) = tool("mkfs.ext4") else {
        eprintln!("skipping: mkfs.ext4 is not installed");
        return;
    };
    // What the claim needs: an OS cache that takes writes. With much dirty
    // data on the node (CI runs this right after a build) the kernel makes
    // every writer wait for the slowest disk it writes to (dirty page
    // throttling), and then the writer stands still whatever it does
    // (lines are dropped and counted, as best-effort mode says). Flush
    // first.
    nix::unistd::sync();
    let dir = tempfile::tempdir().unwrap();
    let disk = LoopDisk::new(dir.path(), 256 * MIB);
    let st = Command::new(mkfs)
        .args(["-q", "-F", &disk.dev])
        .status()
        .unwrap();
    assert!(st.success());
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let st = Command::new("mount")
        .arg(&disk.dev)
        .arg(&mnt)
        .status()
        .unwrap();
    assert!(st.success());
    let log = mnt.join("audit.log");
    let throttle = Throttle::at(&disk, BPS);
    let mut p = Proxy::start_on_tmpfs(&[
        &format!("-audit-log={}", log.display()),
        "-audit-log-max-size=1",
        "-audit-log-max-backups=9",
    ]);
    let mut c = FilesystemClient::new(p.channel("filesystem-v1").await);
    let base = p.kubelet.join("r".repeat(200));
    for i in 0..CALLS {
        let path = format!("{}{i:05}", base.display());
        c.mkdir(MkdirRequest { path }).await.unwrap();
    }
    // Let the shutdown's last sync through.
    drop(throttle);
    assert!(p.terminate().success());
    let stderr = std::fs::read_to_string(&p.stderr_path).unwrap_or_default();
    assert!(
        !stderr.contains("audit lines dropped") && !stderr.contains("lines dropped"),
        "{stderr}"
    );
    let mut files: Vec<_> = (1..=9)
        .rev()
        .map(|n| mnt.join(format!("audit.log.{n}")))
        .filter(|f| f.exists())
        .collect();
    files.push(log);
    assert!(files.len() > 1, "no rotation");
    let all: Vec<String> = files
        .iter()
        .flat_map(|f| lines(f))
        .map(|v| v["request"]["path"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(all.len(), CALLS, "lines written of {CALLS}");
    for (k, path) in all.iter().enumerate() {
        assert_eq!(path[path.len() - 5..].parse::<usize>().unwrap(), k);
    }
    let _ = Command::new("umount").arg(&mnt).status();
}
