//! Without a caller policy or audit log, a caller's budgets are still its
//! pod's (red team 43mount G1: the pod was read only when a guard was
//! set, so every root pod and host root were one caller, and one pod's
//! calls stuck in a hung mount refused another's there at once).
//!
//! This test moves its own process between two kubepods-shaped cgroups,
//! so it is alone in its file.
#![cfg(target_os = "linux")]

mod common;
mod hung_mount;

use common::Proxy;
use csi_proxy_api::filesystem::v1 as fs;
use hung_mount::{fuse_tests_run, HungMount};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A cgroup v2 directory shaped like kubelet's systemd driver with
/// containerd; this process moved back to where it was, and the
/// directories removed, on drop.
struct Pod {
    dirs: Vec<PathBuf>,
    home: PathBuf,
}

impl Pod {
    fn enter(v2: &Path, pod_uid: &str) -> Pod {
        let parts = [
            "kubepods.slice".to_string(),
            "kubepods-besteffort.slice".to_string(),
            format!("kubepods-besteffort-pod{}.slice", pod_uid.replace('-', "_")),
            format!("cri-containerd-{}.scope", "ab".repeat(32)),
        ];
        let mut dirs = Vec::new();
        let mut at = v2.to_path_buf();
        for part in parts {
            at = at.join(part);
            if !at.exists() {
                std::fs::create_dir(&at).unwrap();
                dirs.push(at.clone());
            }
        }
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
        let rel = own
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .unwrap()
            .trim_start_matches('/')
            .to_string();
        std::fs::write(at.join("cgroup.procs"), std::process::id().to_string()).unwrap();
        Pod {
            dirs,
            home: v2.join(rel),
        }
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        let _ = std::fs::write(
            self.home.join("cgroup.procs"),
            std::process::id().to_string(),
        );
        for d in self.dirs.iter().rev() {
            let _ = std::fs::remove_dir(d);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_guard_each_pod_has_its_own_budget() {
    if !fuse_tests_run() {
        return;
    }
    let v2 = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
        .into_iter()
        .map(Path::new)
        .find(|p| p.join("cgroup.procs").exists() && p.join("cgroup.controllers").exists());
    let Some(v2) = v2 else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must run this test: no cgroup v2"
        );
        eprintln!("SKIPPED: needs a cgroup v2 hierarchy");
        return;
    };
    let p = Proxy::start(&[]);
    let hung = p.kubelet.join("pods/hung-pods");
    let _hung = HungMount::at(&hung);
    let call = |ch, name: &str, timeout| {
        let mut f = fs::filesystem_client::FilesystemClient::new(ch);
        let path = hung.join(name).display().to_string();
        async move {
            let mut req = tonic::Request::new(fs::PathExistsRequest { path });
            req.set_timeout(timeout);
            f.path_exists(req).await
        }
    };
    // Pod A: 12 calls stuck in the hung mount.
    {
        let _a = Pod::enter(v2, "0a0a0a0a-0000-4000-8000-00000000000a");
        let ch = p.channel("filesystem-v1").await;
        let calls: Vec<_> = (0..12)
            .map(|i| tokio::spawn(call(ch.clone(), &format!("a{i}"), Duration::from_secs(1))))
            .collect();
        for c in calls {
            assert!(c.await.unwrap().is_err());
        }
        // Pod A itself is now refused there at once.
        let ch = p.channel("filesystem-v1").await;
        let st = call(ch, "a-again", Duration::from_secs(5))
            .await
            .unwrap_err();
        assert_eq!(st.code(), tonic::Code::Unavailable, "{st:?}");
    }
    // Pod B, also root: its call goes in (and waits), not refused for A's.
    let _b = Pod::enter(v2, "0b0b0b0b-0000-4000-8000-00000000000b");
    let ch = p.channel("filesystem-v1").await;
    let st = call(ch, "b", Duration::from_secs(1)).await.unwrap_err();
    eprintln!("pod B beside pod A's 12 stuck calls: {st:?}");
    assert_ne!(st.code(), tonic::Code::Unavailable, "{st:?}");
}
