//! Opens that never wait on a lease holder (issue 39): a process that
//! holds a write lease (`fcntl(F_SETLEASE, F_WRLCK)`) on a file inside a
//! pod directory would make any open of that file wait up to
//! `lease-break-time` (45 s) for it. The confined filesystem opens only
//! with `O_PATH` or `O_DIRECTORY` (neither breaks a lease), so
//! RmdirContents of that directory ends well within its deadline, and
//! other calls meanwhile are unaffected. (This guards the property; the
//! code before issue 39 already had it on Linux.)
#![cfg(target_os = "linux")]

mod common;

use common::Proxy;
use csi_proxy_api::filesystem::v2alpha1 as fs;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_held_in_a_pod_directory_holds_up_nothing() {
    let p = Proxy::start(&[]);
    let pod = p.kubelet.join("pods/p/volumes/v");
    std::fs::create_dir_all(pod.join("deep")).unwrap();
    let leased = pod.join("deep/leased");
    std::fs::write(&leased, b"held").unwrap();
    // A broken lease signals its holder (SIGIO by default, which ends it).
    // SAFETY: setting a signal's disposition to ignore.
    unsafe { libc::signal(libc::SIGIO, libc::SIG_IGN) };
    let f = std::fs::File::open(&leased).unwrap();
    // SAFETY: fcntl on a descriptor `f` owns.
    let r = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETLEASE, libc::F_WRLCK) };
    if r != 0 {
        eprintln!(
            "SKIPPED: cannot take a lease here: {}",
            std::io::Error::last_os_error()
        );
        return;
    }

    let mut c =
        fs::filesystem_client::FilesystemClient::new(p.channel("filesystem-v2alpha1").await);
    let remove = tokio::spawn({
        let mut c = c.clone();
        let path = pod.display().to_string();
        async move {
            let mut req = tonic::Request::new(fs::RmdirContentsRequest { path });
            req.set_timeout(Duration::from_secs(5));
            let t = Instant::now();
            let r = c.rmdir_contents(req).await;
            (r, t.elapsed())
        }
    });
    // Other calls meanwhile.
    for i in 0..20 {
        let t = Instant::now();
        c.path_exists(fs::PathExistsRequest {
            path: p.kubelet.join(format!("nothing-{i}")).display().to_string(),
        })
        .await
        .unwrap();
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    }
    let (r, took) = remove.await.unwrap();
    assert!(took < Duration::from_secs(6), "RmdirContents took {took:?}");
    r.unwrap();
    assert!(!leased.exists(), "the leased file was removed");
    // The lease was never broken: it is still held on the (unlinked) file.
    // SAFETY: fcntl on a descriptor `f` owns.
    let held = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GETLEASE) };
    assert_eq!(held, libc::F_WRLCK, "the removal broke the lease");
}
