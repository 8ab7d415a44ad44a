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
use csi_proxy_api::volume::v1 as vol;
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
    let k = &proxy.kubelet;

    // A mounted loop volume, and a chain of two links to it (published ->
    // b -> staging): upstream follows the links to the volume.
    let loopd = LoopDisk::new(proxy.root.path(), 64 * MIB);
    let id = common::partition_and_format(&proxy.client(), loopd.number).await;
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

/// Whether the mount table lists a mount point at `path`.
fn listed(path: &Path) -> bool {
    let want = s(path)
        .replace('\\', "\\134")
        .replace(' ', "\\040")
        .replace('\t', "\\011");
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(want.as_str()))
}

/// The answer for a target with a mount hidden at it: an error no driver
/// reads as "not mounted".
async fn assert_not_not_mounted(v: &mut VolumeClient, staging: &Path) {
    assert!(listed(staging), "the hidden mount is in the table");
    let e = lookup(v, &s(staging)).await.unwrap_err();
    assert_eq!(
        matching(e.message()),
        Vec::<&str>::new(),
        "mounted (hidden) at {staging:?}, yet: {:?} {}",
        e.code(),
        e.message()
    );
    assert_eq!(e.code(), Code::FailedPrecondition, "{}", e.message());
}

/// A mount hidden at the staging path by an empty mount over its parent:
/// the path is missing (Missing), yet the table lists the mount; no
/// phrase (red team 43b, finding 1a). Names with a space and a backslash
/// exercise the table's escapes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mount_hidden_under_a_mount_over_the_parent_is_not_missing() {
    if !can_run() {
        return;
    }
    let (proxy, mut v) = start().await;
    let parent = proxy.kubelet.join("plugins/e b\\s/hidden");
    let staging = parent.join("global mount");
    std::fs::create_dir_all(&staging).unwrap();
    let _under = Tmpfs::mount(&staging).expect("mount a tmpfs");
    let _over = Tmpfs::mount(&parent).expect("mount a tmpfs over its parent");
    assert_not_not_mounted(&mut v, &staging).await;
}

/// The same under a mount over the grandparent, and with a file
/// bind-mounted over the parent (MissingParent; finding 1b).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mount_hidden_under_a_mount_over_the_grandparent_is_not_missing() {
    if !can_run() {
        return;
    }
    let (proxy, mut v) = start().await;
    let grand = proxy.kubelet.join("plugins/ebs2");
    let staging = grand.join("vol/globalmount");
    std::fs::create_dir_all(&staging).unwrap();
    let _under = Tmpfs::mount(&staging).expect("mount a tmpfs");
    {
        let _over = Tmpfs::mount(&grand).expect("mount a tmpfs over the grandparent");
        assert_not_not_mounted(&mut v, &staging).await;
        // Below the target: the mount is at or below a missing path.
        let vol_dir = grand.join("vol");
        let e = lookup(&mut v, &s(&vol_dir)).await.unwrap_err();
        assert_eq!(matching(e.message()), Vec::<&str>::new(), "{}", e.message());
    }
    // The upper mount holds a file where the parent directory was.
    let _over = Tmpfs::mount(&grand).expect("mount a tmpfs over the grandparent");
    std::fs::write(grand.join("vol"), b"").unwrap();
    assert_not_not_mounted(&mut v, &staging).await;
}

/// A decoy directory with the staging name in the mount over the parent,
/// renamed away and back meanwhile: no answer ever carries a phrase while
/// the hidden mount sits at the target (finding 1c: the handle's path was
/// read once, after the open). Bounded: 1000 calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renamed_decoy_over_a_hidden_mount_is_never_not_mounted() {
    if !can_run() {
        return;
    }
    let (proxy, mut v) = start().await;
    let parent = proxy.kubelet.join("plugins/ebs3");
    let staging = parent.join("globalmount");
    std::fs::create_dir_all(&staging).unwrap();
    let _under = Tmpfs::mount(&staging).expect("mount a tmpfs");
    let _over = Tmpfs::mount(&parent).expect("mount a tmpfs over its parent");
    std::fs::create_dir(&staging).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let renamer = {
        let (a, b, stop) = (staging.clone(), parent.join("gm2"), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = std::fs::rename(&a, &b);
                let _ = std::fs::rename(&b, &a);
            }
        })
    };
    let mut phrases = Vec::new();
    for _ in 0..1000 {
        if let Err(e) = lookup(&mut v, &s(&staging)).await {
            if !matching(e.message()).is_empty() {
                phrases.push(e.message().to_string());
            }
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    renamer.join().unwrap();
    let _ = std::fs::rename(parent.join("gm2"), &staging);
    assert!(
        phrases.is_empty(),
        "{} of 1000 answers read as not mounted, e.g. {:?}",
        phrases.len(),
        phrases.first()
    );
}

/// A real "nothing mounted" keeps its phrase whole through the transport's
/// cut (2048 bytes of grpc-message): a missing path of 4-byte characters,
/// one of invisible characters (escaped 8 bytes each), and CJK reached
/// through a link (finding 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_path_of_wide_characters_still_matches() {
    if !can_run() {
        return;
    }
    let (proxy, mut v) = start().await;
    let wide = "\u{20000}".repeat(60);
    let zw = "\u{200b}".repeat(80);
    for missing in [
        format!("plugins/{wide}/{wide}/{wide}/{wide}/{wide}/globalmount"),
        format!("plugins/{zw}/{zw}/{zw}/{zw}/globalmount"),
    ] {
        let missing = proxy.kubelet.join(missing);
        let e = lookup(&mut v, &s(&missing)).await.unwrap_err();
        assert_eq!(e.code(), Code::NotFound, "{}", e.message());
        assert_eq!(matching(e.message()).len(), 2, "{}", e.message());
        assert!(e.message().len() <= compat::MAX_MESSAGE_BYTES);
    }
    let cjk = "\u{4e2d}".repeat(80);
    let from = proxy.kubelet.join(format!("pods/{cjk}/{cjk}/mount"));
    std::fs::create_dir_all(from.parent().unwrap()).unwrap();
    let to = proxy
        .kubelet
        .join(format!("plugins/{cjk}/{cjk}/{cjk}/globalmount"));
    std::os::unix::fs::symlink(&to, &from).unwrap();
    let e = lookup(&mut v, &s(&from)).await.unwrap_err();
    assert_eq!(matching(e.message()).len(), 2, "{}", e.message());
    // A plain directory there: the other phrase, whole too.
    std::fs::create_dir_all(&to).unwrap();
    let e = lookup(&mut v, &s(&from)).await.unwrap_err();
    assert_eq!(matching(e.message()).len(), 2, "{}", e.message());
}
