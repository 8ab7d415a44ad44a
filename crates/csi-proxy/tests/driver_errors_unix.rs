//! The phrases drivers match (docs/compatibility.md) only where nothing is
//! mounted, on the real binary over its Unix socket with real mounts
//! (needs root; skipped elsewhere with a message): a chain of links to a
//! mounted loop volume answers the volume (as upstream's getTarget, which
//! follows links), a tmpfs mounted at the target is no "not mounted", a
//! failure whose path holds a driver's phrase matches no driver
//! expression, and the path inside a phrase is escaped.
#![cfg(target_os = "linux")]

mod common;
mod storage;

use common::Proxy;
use csi_proxy_api::{disk, volume::v1 as vol};
use csi_proxy_host::compat;
use std::path::Path;
use std::process::Command;
use storage::{can_run, LoopDisk, MIB};
use tonic::Code;

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// The drivers (of the catalog) whose expression matches `message`: they
/// would take their "not mounted" branch.
fn matching(message: &str) -> Vec<&'static str> {
    compat::catalog()
        .into_iter()
        .filter(|(m, _)| regex::Regex::new(m.expression).unwrap().is_match(message))
        .map(|(m, _)| m.driver)
        .collect()
}

type VolumeClient = vol::volume_client::VolumeClient<csi_proxy_client::ProxyChannel>;

async fn lookup(v: &mut VolumeClient, path: &str) -> Result<String, tonic::Status> {
    v.get_volume_id_from_target_path(vol::GetVolumeIdFromTargetPathRequest {
        target_path: path.to_string(),
    })
    .await
    .map(|r| r.into_inner().volume_id)
}

/// Unmounts a tmpfs on drop (also when the test fails).
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(at: &Path) -> Option<Tmpfs> {
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1m", "driver-errors", &s(at)])
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(at.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// The proxy and a Volume v1 client.
async fn start() -> (Proxy, VolumeClient) {
    let proxy = Proxy::start(&[]);
    let v = proxy.client().connect_volume_v1().await.unwrap();
    (proxy, v)
}

/// A chain of two links to a mounted loop volume answers the volume, as
/// upstream's getTarget does (it follows links until it reaches the
/// volume); ours used to follow one hop and say "not mounted" on Windows
/// (FailedPrecondition on Linux).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_of_links_to_a_mounted_volume_answers_the_volume() {
    if !can_run() {
        return;
    }
    let (proxy, mut v) = start().await;
    let mut d = proxy.client().connect_disk_v1().await.unwrap();
    let k = &proxy.kubelet;

    // A mounted loop volume, and a chain of two links to it (published ->
    // b -> staging): upstream follows the links to the volume.
    let loopd = LoopDisk::new(proxy.root.path(), 64 * MIB);
    d.partition_disk(disk::v1::PartitionDiskRequest {
        disk_number: loopd.number,
    })
    .await
    .unwrap();
    let id = v
        .list_volumes_on_disk(vol::ListVolumesOnDiskRequest {
            disk_number: loopd.number,
            partition_number: 0,
        })
        .await
        .unwrap()
        .into_inner()
        .volume_ids
        .remove(0);
    v.format_volume(vol::FormatVolumeRequest {
        volume_id: id.clone(),
    })
    .await
    .unwrap();
    let staging = k.join("plugins/ebs/globalmount");
    std::fs::create_dir_all(staging.parent().unwrap()).unwrap();
    v.mount_volume(vol::MountVolumeRequest {
        volume_id: id.clone(),
        target_path: s(&staging),
    })
    .await
    .unwrap();
    let b = k.join("plugins/ebs/b");
    let published = k.join("pods/p/volumes/pv/mount");
    std::fs::create_dir_all(published.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&staging, &b).unwrap();
    std::os::unix::fs::symlink(&b, &published).unwrap();
    assert_eq!(lookup(&mut v, &s(&staging)).await.unwrap(), id);
    assert_eq!(lookup(&mut v, &s(&b)).await.unwrap(), id, "one hop");
    match lookup(&mut v, &s(&published)).await {
        Ok(got) => assert_eq!(got, id, "two hops"),
        Err(e) => panic!(
            "two links to a mounted volume: {:?} {} (drivers reading \"not mounted\": {:?})",
            e.code(),
            e.message(),
            matching(e.message())
        ),
    }

    v.unmount_volume(vol::UnmountVolumeRequest {
        volume_id: id,
        target_path: s(&staging),
    })
    .await
    .unwrap();
}

/// Something mounted that is no disk volume (a tmpfs): an error, but never
/// "not mounted" (the phrase used to be added to every NotFound, "not on
/// a disk volume" included).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tmpfs_at_the_target_is_not_read_as_not_mounted() {
    if !can_run() {
        return;
    }
    let (proxy, mut v) = start().await;
    let k = &proxy.kubelet;
    let tmp_target = k.join("plugins/ebs/tmpfs");
    std::fs::create_dir_all(&tmp_target).unwrap();
    let _tmpfs = Tmpfs::mount(&tmp_target).expect("mount a tmpfs");
    let e = lookup(&mut v, &s(&tmp_target)).await.unwrap_err();
    assert_eq!(
        matching(e.message()),
        Vec::<&str>::new(),
        "tmpfs at the target: {:?} {}",
        e.code(),
        e.message()
    );
}

/// Failures whose path holds a driver's phrase (outside the roots, a link
/// in the chain): no driver expression matches them; the proven
/// conditions still match.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_phrase_in_the_path_does_not_make_a_failure_read_as_not_mounted() {
    if !can_run() {
        return;
    }
    let (proxy, mut v) = start().await;
    let k = &proxy.kubelet;
    let staging = k.join("plugins/ebs/globalmount");
    std::fs::create_dir_all(&staging).unwrap();
    let chain = k.join("plugins/ebs/chain");
    std::os::unix::fs::symlink(&staging, &chain).unwrap();
    for path in [
        proxy.outside.join("because it does not exist"),
        proxy
            .outside
            .join("(Get-Item -Path x).Target, output: , error: <nil>"),
        chain.join("because it does not exist"),
    ] {
        let e = lookup(&mut v, &s(&path)).await.unwrap_err();
        assert!(
            matches!(e.code(), Code::PermissionDenied),
            "{path:?}: {:?} {}",
            e.code(),
            e.message()
        );
        assert_eq!(
            matching(e.message()),
            Vec::<&str>::new(),
            "{path:?}: {}",
            e.message()
        );
    }

    // Proven: a plain directory, a missing path, a file (upstream's
    // `(Get-Item).Target` prints nothing for a file too).
    let plain = k.join("plugins/ebs/plain");
    std::fs::create_dir_all(&plain).unwrap();
    let file = k.join("plugins/ebs/file");
    std::fs::write(&file, b"x").unwrap();
    for path in [plain.clone(), k.join("plugins/ebs/missing"), file] {
        let e = lookup(&mut v, &s(&path)).await.unwrap_err();
        assert_eq!(e.code(), Code::NotFound, "{path:?}: {}", e.message());
        assert!(
            !matching(e.message()).is_empty(),
            "{path:?}: {}",
            e.message()
        );
    }
}

/// The path inside the phrase is escaped like ours: no right-to-left
/// override, line separator or zero-width character gets through, and no
/// space (aws-ebs's `\S+` spans it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_path_in_the_phrase_is_escaped() {
    if !can_run() {
        return;
    }
    let (proxy, mut v) = start().await;
    let k = &proxy.kubelet;
    let bidi = k.join("plugins/ebs/x\u{202e}txt.exe\u{2028}INFO fake\u{200b}");
    let e = lookup(&mut v, &s(&bidi)).await.unwrap_err();
    let m = e.message();
    assert_eq!(e.code(), Code::NotFound, "{m}");
    assert!(!matching(m).is_empty(), "{m}");
    for c in ['\u{202e}', '\u{2028}', '\u{200b}'] {
        assert!(!m.contains(c), "raw {c:?} in {m:?}");
    }
    assert!(
        m.contains(r"x\u{202e}txt.exe\u{2028}INFO\u{20}fake\u{200b}' because it does not exist"),
        "{m:?}"
    );
}

/// The mount table is the proof's second half on Linux: a directory the
/// table lists as a mount point but that is not reached as one (here: a
/// mount hidden by another mounted over its parent) is no "not mounted".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_listed_as_a_mount_point_is_not_read_as_not_mounted() {
    if !can_run() {
        return;
    }
    let (proxy, mut v) = start().await;
    let parent = proxy.kubelet.join("plugins/ebs/hidden");
    let staging = parent.join("staging");
    std::fs::create_dir_all(&staging).unwrap();
    let _under = Tmpfs::mount(&staging).expect("mount a tmpfs");
    let _over = Tmpfs::mount(&parent).expect("mount a tmpfs over its parent");
    std::fs::create_dir(&staging).unwrap();
    let e = lookup(&mut v, &s(&staging)).await.unwrap_err();
    assert_eq!(
        e.code(),
        Code::FailedPrecondition,
        "{staging:?}: {}",
        e.message()
    );
    assert_eq!(matching(e.message()), Vec::<&str>::new(), "{}", e.message());
    drop(_over);
}
