//! The caller policy (`-caller-policy`) against the real binary over its
//! Unix sockets: allowed and refused callers, a group the policy does not
//! name, a method entry, refusals changing nothing and being audited, the
//! reloads (SIGHUP, file change, a bad file keeping the old policy) and a
//! bad file at start-up.
#![cfg(target_os = "linux")]

mod audit;
mod common;

use audit::{is_call, wait_line, ClientProcess};
use common::{bin, Proxy};
use csi_proxy_api::disk::v1::{disk_client::DiskClient, ListDiskIDsRequest};
use csi_proxy_api::filesystem::v1::{filesystem_client::FilesystemClient, PathExistsRequest};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::time::{Duration, Instant};
use tonic::Code;

/// Run as a client process by the tests below (a no-op otherwise).
#[test]
fn client_process() {
    audit::client_main();
}

fn me() -> u32 {
    nix::unistd::geteuid().as_raw()
}

struct Setup {
    p: Proxy,
    policy: std::path::PathBuf,
    log: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

fn start(policy: &str, extra: &[&str]) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = dir.path().join("policy.json");
    std::fs::write(&path, policy).unwrap();
    let log = dir.path().join("audit.log");
    let mut args = vec![
        format!("-caller-policy={}", path.display()),
        format!("-audit-log={}", log.display()),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    Setup {
        p: Proxy::start_on_tmpfs(&a),
        policy: path,
        log,
        _dir: dir,
    }
}

async fn mkdir(p: &Proxy, path: &Path) -> Result<(), tonic::Status> {
    audit::mkdir(p.channel("filesystem-v1").await, path).await
}

async fn list_disks(p: &Proxy) -> Result<(), tonic::Status> {
    let mut c = DiskClient::new(p.channel("disk-v1").await);
    c.list_disk_i_ds(ListDiskIDsRequest {}).await.map(|_| ())
}

#[tokio::test]
async fn allowed_refused_and_unnamed_groups() {
    let s = start(&format!(r#"{{"filesystem": [{{"uid": {}}}]}}"#, me()), &[]);
    let ok = s.p.kubelet.join("allowed");
    mkdir(&s.p, &ok).await.unwrap();
    assert!(ok.is_dir());
    // A group the policy does not name is refused to everyone, audited.
    let e = list_disks(&s.p).await.unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    assert!(e.message().contains("caller policy"), "{}", e.message());
    let v = wait_line(&s.log, |v| v["method"] == "ListDiskIDs");
    assert_eq!(v["code"], "PermissionDenied");
    assert_eq!(v["caller"]["uid"], me());
}

#[tokio::test]
async fn a_method_entry_overrides_its_group_and_a_refusal_changes_nothing() {
    let s = start(
        &format!(
            r#"{{"filesystem": [{{"uid": {}}}], "filesystem/Mkdir": [{{"uid": 4242}}]}}"#,
            me()
        ),
        &[],
    );
    let mut c = FilesystemClient::new(s.p.channel("filesystem-v1").await);
    c.path_exists(PathExistsRequest {
        path: s.p.kubelet.display().to_string(),
    })
    .await
    .unwrap();
    let before = s.p.snapshot();
    let target = s.p.kubelet.join("refused");
    let e = mkdir(&s.p, &target).await.unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    assert!(!target.exists());
    assert_eq!(s.p.snapshot(), before);
    let v = wait_line(&s.log, |v| is_call(v, "Mkdir", &target));
    assert_eq!(v["code"], "PermissionDenied");
}

#[tokio::test]
async fn another_user_is_refused_where_only_root_is_allowed() {
    if me() != 0 {
        eprintln!("SKIPPED: needs root to start a client as another user");
        return;
    }
    let s = start(r#"{"filesystem": [{"uid": 0}]}"#, &["-socket-mode=0666"]);
    std::fs::set_permissions(s.p.root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let target = s.p.kubelet.join("by-nobody");
    let client = ClientProcess::start("client_process", &s.p.socket_dir, &target, |c| {
        c.uid(65534).gid(65534);
    });
    assert_eq!(client.go(), "PermissionDenied");
    assert!(!target.exists());
    let v = wait_line(&s.log, |v| is_call(v, "Mkdir", &target));
    assert_eq!(v["caller"]["uid"], 65534);
    assert_eq!(v["code"], "PermissionDenied");
}

/// Wait until `mkdir` of fresh directories gives `want`.
async fn wait_for(p: &Proxy, want: Code, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut n = 0;
    loop {
        n += 1;
        let target = p.kubelet.join(format!("probe-{n}"));
        let got = match mkdir(p, &target).await {
            Ok(()) => Code::Ok,
            Err(e) => e.code(),
        };
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: still {got:?}\n{}",
            p.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Rewrite the file in place with same-length contents and its old
/// modification time: only SIGHUP can tell.
fn rewrite_unnoticed(path: &Path, text: &str) {
    let old = std::fs::read(path).unwrap();
    assert_eq!(old.len(), text.len());
    let mtime = std::fs::metadata(path).unwrap().modified().unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    use std::io::Write;
    (&f).write_all(text.as_bytes()).unwrap();
    f.set_modified(mtime).unwrap();
}

#[tokio::test]
async fn reload_on_sighup_on_change_and_a_bad_file_keeps_the_old_policy() {
    let allow_me = format!(r#"{{"filesystem": [{{"uid": {:>10}}}]}}"#, me());
    let allow_other = format!(r#"{{"filesystem": [{{"uid": {:>10}}}]}}"#, 4242);
    let s = start(&allow_me, &[]);
    wait_for(&s.p, Code::Ok, "start").await;
    // SIGHUP: a change the poller cannot see.
    rewrite_unnoticed(&s.policy, &allow_other);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    wait_for(&s.p, Code::Ok, "not reloaded without a signal").await;
    let pid = s.p.child.as_ref().unwrap().id() as i32;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGHUP,
    )
    .unwrap();
    wait_for(&s.p, Code::PermissionDenied, "after SIGHUP").await;
    assert!(s.p.log().contains("reason=SIGHUP"), "{}", s.p.log());
    // A change on disk, no signal.
    std::fs::write(&s.policy, &allow_me).unwrap();
    wait_for(&s.p, Code::Ok, "after the file changed").await;
    assert!(
        s.p.log().contains("reason=\"file changed\""),
        "{}",
        s.p.log()
    );
    // A bad file: the policy in force stays, the log says why.
    std::fs::write(&s.policy, r#"{"filesystem": [{"uid": "root"}]}"#).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !s.p.log().contains("caller policy NOT reloaded") {
        assert!(Instant::now() < deadline, "{}", s.p.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        // In the quoted error value, its quotes escaped.
        s.p.log().contains(r#"\"uid\" must be a number"#),
        "{}",
        s.p.log()
    );
    wait_for(&s.p, Code::Ok, "old policy after a bad reload").await;
}

#[test]
fn a_bad_file_at_start_up_is_exit_1_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.json");
    std::fs::write(
        &path,
        r#"{"filesystem": [{"uid": 0}], "volume/Format": []}"#,
    )
    .unwrap();
    let sock = dir.path().join("sock");
    let out = std::process::Command::new(bin())
        .arg(format!("-caller-policy={}", path.display()))
        .arg(format!("-socket-dir={}", sock.display()))
        .arg(format!("-kubelet-path={}", dir.path().display()))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("invalid caller policy")
            && err.contains("no version of volume has a method \"Format\""),
        "{err}"
    );
    let out = std::process::Command::new(bin())
        .arg(format!(
            "-caller-policy={}",
            dir.path().join("missing.json").display()
        ))
        .arg(format!("-socket-dir={}", sock.display()))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read the caller policy"));
}

/// The bypass: a method rule was looked up by the name the call arrived
/// with. With `filesystem/CreateSymlink` given to another uid only, this
/// caller's v1beta1 and v1alpha1 `LinkPath` are refused too, and no link
/// is made.
#[tokio::test]
async fn a_method_rule_holds_under_the_methods_older_names() {
    use csi_proxy_api::filesystem::{v1alpha1, v1beta1};
    let s = start(
        &format!(
            r#"{{"filesystem": [{{"uid": {}}}], "filesystem/CreateSymlink": [{{"uid": 4242}}]}}"#,
            me()
        ),
        &[],
    );
    let src = s.p.kubelet.join("src");
    mkdir(&s.p, &src).await.unwrap();
    let (source_path, target_path) = (
        src.display().to_string(),
        s.p.kubelet.join("link").display().to_string(),
    );
    let mut b =
        v1beta1::filesystem_client::FilesystemClient::new(s.p.channel("filesystem-v1beta1").await);
    let e = b
        .link_path(v1beta1::LinkPathRequest {
            source_path: source_path.clone(),
            target_path: target_path.clone(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    let mut a = v1alpha1::filesystem_client::FilesystemClient::new(
        s.p.channel("filesystem-v1alpha1").await,
    );
    let e = a
        .link_path(v1alpha1::LinkPathRequest {
            source_path,
            target_path: target_path.clone(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    assert!(std::fs::symlink_metadata(&target_path).is_err());
    let v = wait_line(&s.log, |v| {
        v["method"] == "LinkPath" && v["version"] == "v1alpha1"
    });
    assert_eq!(v["code"], "PermissionDenied");
}

/// The bypass: `exe` was matched against the path inside the caller's own
/// mount namespace. A client in a mount namespace of its own (where it
/// could pivot_root into a tmpfs holding any file at that path) no longer
/// matches `exe`; `exe_sha256`, the digest of the file the kernel maps,
/// matches it wherever it runs, and a different file's digest does not.
#[tokio::test]
async fn exe_is_not_satisfied_from_a_private_mount_namespace() {
    if me() != 0 {
        eprintln!("SKIPPED: needs root for a private mount namespace");
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let own_ns = |c: &mut std::process::Command| {
        // SAFETY: between fork and exec only unshare(2).
        unsafe {
            c.pre_exec(|| {
                if libc::unshare(libc::CLONE_NEWNS) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    };
    let s = start(
        &format!(r#"{{"filesystem": [{{"exe": "{}"}}]}}"#, exe.display()),
        &[],
    );
    let here = s.p.kubelet.join("same-namespace");
    let client = ClientProcess::start("client_process", &s.p.socket_dir, &here, |_| {});
    assert_eq!(client.go(), "OK");
    let there = s.p.kubelet.join("own-namespace");
    let client = ClientProcess::start("client_process", &s.p.socket_dir, &there, own_ns);
    assert_eq!(client.go(), "PermissionDenied");
    assert!(!there.exists());
    let v = wait_line(&s.log, |v| is_call(v, "Mkdir", &there));
    assert_eq!(v["caller"]["own_mount_ns"], false, "{v}");
    assert_eq!(v["caller"]["exe"], exe.display().to_string(), "{v}");

    let digest = String::from_utf8(
        std::process::Command::new("sha256sum")
            .arg(&exe)
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()[..64]
        .to_string();
    let s = start(
        &format!(r#"{{"filesystem": [{{"exe_sha256": "{digest}"}}]}}"#),
        &[],
    );
    let there = s.p.kubelet.join("own-namespace-by-digest");
    let client = ClientProcess::start("client_process", &s.p.socket_dir, &there, own_ns);
    assert_eq!(client.go(), "OK");
    let v = wait_line(&s.log, |v| is_call(v, "Mkdir", &there));
    assert_eq!(v["caller"]["exe_sha256"], digest.as_str(), "{v}");
    let s = start(
        &format!(
            r#"{{"filesystem": [{{"exe_sha256": "{}"}}]}}"#,
            "0".repeat(64)
        ),
        &[],
    );
    let other = s.p.kubelet.join("another-digest");
    let client = ClientProcess::start("client_process", &s.p.socket_dir, &other, |_| {});
    assert_eq!(client.go(), "PermissionDenied");
}

/// The bypass: a policy file swapped for a link to a FIFO blocked the
/// reloader for good (and `/dev/zero` grew the process to gigabytes).
/// Now each is refused and logged, the policy in force stays, and a later
/// stricter policy still takes effect on SIGHUP.
#[tokio::test]
async fn a_fifo_or_a_device_in_the_policys_place_never_blocks_the_reloader() {
    let allow_me = format!(r#"{{"filesystem": [{{"uid": {}}}]}}"#, me());
    let s = start(&allow_me, &[]);
    wait_for(&s.p, Code::Ok, "start").await;
    let dir = s.policy.parent().unwrap().to_path_buf();
    let fifo = dir.join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let pid = nix::unistd::Pid::from_raw(s.p.child.as_ref().unwrap().id() as i32);
    let hup = || nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).unwrap();
    for (target, why) in [
        (fifo.as_path(), "a FIFO"),
        (Path::new("/dev/zero"), "a device"),
    ] {
        std::fs::remove_file(&s.policy).unwrap();
        std::os::unix::fs::symlink(target, &s.policy).unwrap();
        hup();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !s.p.log().contains(why) {
            assert!(Instant::now() < deadline, "{why}: {}", s.p.log());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        wait_for(&s.p, Code::Ok, "the old policy stays").await;
    }
    // A stricter policy, on SIGHUP: the reloader still works.
    std::fs::remove_file(&s.policy).unwrap();
    std::fs::write(&s.policy, r#"{"filesystem": [{"uid": 4242}]}"#).unwrap();
    hup();
    wait_for(&s.p, Code::PermissionDenied, "the stricter policy").await;
}
