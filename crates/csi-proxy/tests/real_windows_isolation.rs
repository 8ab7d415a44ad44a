//! The real-Windows tier, isolation (issue 39): a plugin that holds an
//! oplock in its pod directory and never acknowledges its break holds up
//! only its own call: RmdirContents of that directory ends at its deadline
//! (the confined filesystem opens with `FILE_COMPLETE_IF_OPLOCKED` and
//! retries until then), and calls on other directories answer meanwhile.
//! Wine has no oplocks: skipped there with the reason.
#![cfg(windows)]

mod pipes;
mod real_windows;

use csi_proxy_api::filesystem::v2alpha1 as fs;
use csi_proxy_client::Group;
use pipes::Proxy;
use real_windows::require;
use real_windows::win32::HeldOplock;
use std::time::{Duration, Instant};

#[tokio::test]
async fn real_windows_an_unacknowledged_oplock_holds_up_only_its_own_call() {
    let Some(_w) = require("oplocks (FSCTL_REQUEST_OPLOCK), which wine does not implement") else {
        return;
    };
    let p = Proxy::start_unique("rw-oplock", "filesystem", &[]);
    let pod = p.kubelet.join(r"pods\p\volumes\v");
    std::fs::create_dir_all(pod.join("deep")).unwrap();
    let held = pod.join(r"deep\held");
    std::fs::write(&held, b"x").unwrap();
    let _oplock = HeldOplock::take(&held).expect("an oplock on a file we created");

    let channel = p.channel(Group::Filesystem, "v2alpha1").await;
    let mut c = fs::filesystem_client::FilesystemClient::new(channel.clone());
    let stuck = tokio::spawn({
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
    // Another directory is removed meanwhile, at once.
    for i in 0..5 {
        let other = p.kubelet.join(format!(r"pods\q\volumes\v{i}"));
        std::fs::create_dir_all(other.join("sub")).unwrap();
        std::fs::write(other.join(r"sub\f"), b"x").unwrap();
        let t = Instant::now();
        c.rmdir_contents(fs::RmdirContentsRequest {
            path: other.display().to_string(),
        })
        .await
        .unwrap();
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    }
    let (r, took) = stuck.await.unwrap();
    assert!(
        took < Duration::from_secs(8),
        "RmdirContents waited {took:?} on the oplock holder"
    );
    eprintln!("RmdirContents beside an unacknowledged oplock: {r:?} after {took:?}");
}
