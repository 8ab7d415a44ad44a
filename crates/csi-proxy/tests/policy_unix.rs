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
use csi_proxy_api::filesystem::v1::{
    filesystem_client::FilesystemClient, MkdirRequest, PathExistsRequest,
};
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
    let mut c = FilesystemClient::new(p.channel("filesystem-v1").await);
    c.mkdir(MkdirRequest {
        path: path.display().to_string(),
    })
    .await
    .map(|_| ())
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
        s.p.log().contains(r#""uid" must be a number"#),
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
