//! Calls stuck in a file system that hangs are counted where they wait,
//! however they reach it (red team 41mount): through a mount a later
//! mount hides, through a link, or into several hung file systems at
//! once. Each time the caller's calls in its healthy kubelet dir are
//! still served. The real binary, real FUSE mounts, root.
#![cfg(target_os = "linux")]

mod common;
mod hung_mount;

use common::Proxy;
use csi_proxy_api::filesystem::v1 as fs;
use hung_mount::{fuse_tests_run, Bind, HungMount};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

type Calls = Vec<tokio::task::JoinHandle<Result<(), tonic::Status>>>;

/// `paths`' calls (PathExists, or Mkdir with `mkdir`), at once, 16 per new
/// connection, each given up after `timeout`.
async fn start(p: &Proxy, paths: &[PathBuf], mkdir: bool, timeout: Duration) -> Calls {
    let mut calls = Vec::new();
    for chunk in paths.chunks(16) {
        let ch = p.channel("filesystem-v1").await;
        for path in chunk {
            let mut f = fs::filesystem_client::FilesystemClient::new(ch.clone());
            let path = path.display().to_string();
            calls.push(tokio::spawn(async move {
                if mkdir {
                    let mut req = tonic::Request::new(fs::MkdirRequest { path });
                    req.set_timeout(timeout);
                    f.mkdir(req).await.map(|_| ())
                } else {
                    let mut req = tonic::Request::new(fs::PathExistsRequest { path });
                    req.set_timeout(timeout);
                    f.path_exists(req).await.map(|_| ())
                }
            }));
        }
    }
    calls
}

/// A Mkdir in the caller's healthy kubelet dir, on a fresh connection.
async fn healthy_mkdir(p: &Proxy, name: &str) -> (Duration, Result<(), tonic::Status>) {
    let mut f = fs::filesystem_client::FilesystemClient::new(p.channel("filesystem-v1").await);
    let mut req = tonic::Request::new(fs::MkdirRequest {
        path: p
            .kubelet
            .join("pods/healthy")
            .join(name)
            .display()
            .to_string(),
    });
    req.set_timeout(Duration::from_secs(5));
    let t = Instant::now();
    let r = f.mkdir(req).await.map(|_| ());
    (t.elapsed(), r)
}

fn under(dir: &Path, prefix: &str, n: usize) -> Vec<PathBuf> {
    (0..n).map(|i| dir.join(format!("{prefix}{i}"))).collect()
}

/// 12 calls stuck below a mount that a hung FUSE mount hides: before,
/// they were charged to the hidden mount's file system (the kubelet
/// dir's), and the caller was refused in its whole kubelet dir.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_under_a_hidden_mount_count_in_the_mount_that_hides_it() {
    if !fuse_tests_run() {
        return;
    }
    let p = Proxy::start(&[]);
    let sh = p.kubelet.join("pods/sh");
    let other = p.kubelet.join("pods/other");
    std::fs::create_dir_all(&other).unwrap();
    // pods/sh/sub: the kubelet dir's own file system; then the hung mount
    // over pods/sh hides it (dropped in reverse: the FUSE mount first).
    let _sub = Bind::at(&other, &sh.join("sub"));
    let _hung = HungMount::at(&sh);
    let stuck = start(
        &p,
        &under(&sh.join("sub"), "x", 12),
        false,
        Duration::from_secs(1),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (took, r) = healthy_mkdir(&p, "a").await;
    eprintln!("Mkdir beside 12 calls stuck under a hidden mount: {took:?} {r:?}");
    r.expect("the caller's Mkdir in its kubelet dir is served");
    // The next call under the hidden mount is refused at once, naming the
    // mount that hides it.
    let again = start(&p, &[sh.join("sub/again")], false, Duration::from_secs(5)).await;
    for c in again {
        let st = c
            .await
            .unwrap()
            .expect_err("a lookup in the hung mount answered");
        assert_eq!(st.code(), tonic::Code::Unavailable, "{st:?}");
        assert!(st.message().contains("pods/sh\" does not answer"), "{st:?}");
    }
    for c in stuck {
        c.abort();
    }
}

/// 12 Mkdir calls on links (planted by anyone who can write there) into a
/// hung mount: before, they were charged to where the links are (the
/// kubelet dir), and the caller was refused there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mkdir_through_a_link_counts_where_the_link_leads() {
    if !fuse_tests_run() {
        return;
    }
    let p = Proxy::start(&[]);
    let hung = p.kubelet.join("pods/hung-links");
    let links = p.kubelet.join("pods/links");
    std::fs::create_dir_all(&links).unwrap();
    let _hung = HungMount::at(&hung);
    let at = under(&links, "l", 12);
    for (i, l) in at.iter().enumerate() {
        std::os::unix::fs::symlink(hung.join(format!("t{i}")), l).unwrap();
    }
    let stuck = start(&p, &at, true, Duration::from_secs(1)).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (took, r) = healthy_mkdir(&p, "b").await;
    eprintln!("Mkdir beside 12 Mkdir stuck through links: {took:?} {r:?}");
    r.expect("the caller's Mkdir in its kubelet dir is served");
    for c in stuck {
        c.abort();
    }
}

/// Bursts into four hung file systems at once (each gets 16 of the
/// caller's jobs): the caller's 64 live jobs are all taken for a moment,
/// and 2 s later its healthy calls are served again (red team 41mount
/// N1: two hung file systems held them until their 600 s deadlines).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bursts_into_several_hung_file_systems_leave_the_caller_its_healthy_one() {
    if !fuse_tests_run() {
        return;
    }
    let p = Proxy::start(&[]);
    let dirs: Vec<PathBuf> = (0..4)
        .map(|i| p.kubelet.join(format!("pods/hung-{i}")))
        .collect();
    let _hung: Vec<HungMount> = dirs.iter().map(|d| HungMount::at(d)).collect();
    let mut stuck = Vec::new();
    for d in &dirs {
        stuck.extend(start(&p, &under(d, "x", 20), false, Duration::from_secs(600)).await);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, r) = healthy_mkdir(&p, "during").await;
    eprintln!("Mkdir during the bursts: {r:?}");
    tokio::time::sleep(Duration::from_millis(2200)).await;
    let (took, r) = healthy_mkdir(&p, "after").await;
    eprintln!("Mkdir 2.5 s after bursts into four hung file systems: {took:?} {r:?}");
    r.expect("the caller's Mkdir in its kubelet dir is served");
    for c in stuck {
        c.abort();
    }
}

/// The kubelet dir bound over itself after the proxy opened it (red team
/// 42mount F1): the proxy's lookups still start on the mount it opened,
/// where the hung mount is; 12 calls stuck there were charged to the
/// kubelet dir's file system, and the caller was refused in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mount_over_the_root_after_it_was_opened_does_not_move_the_key() {
    if !fuse_tests_run() {
        return;
    }
    let p = Proxy::start(&[]);
    let (took, r) = healthy_mkdir(&p, "first").await;
    r.unwrap_or_else(|e| panic!("the first Mkdir: {took:?} {e:?}"));
    let hung = p.kubelet.join("pods/hung-under");
    let _hung = HungMount::at(&hung);
    // Dropped first: the hung mount is unmounted by its path, which the
    // bind hides.
    let _over = Bind::at(&p.kubelet, &p.kubelet);
    let stuck = start(&p, &under(&hung, "x", 12), false, Duration::from_secs(1)).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (took, r) = healthy_mkdir(&p, "c").await;
    eprintln!("Mkdir beside 12 calls stuck in a mount the root's bind hides: {took:?} {r:?}");
    r.expect("the caller's Mkdir in its kubelet dir is served");
    for c in stuck {
        c.abort();
    }
}
