//! Process-level behaviour of the real binary on Unix sockets: every
//! endpoint, least privilege, start-up failures, graceful shutdown.
#![cfg(unix)]

mod common;

use common::{bin, Proxy};
use csi_proxy_api::API_VERSIONS;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::process::Command;
use tonic::Code;

#[tokio::test]
async fn serves_all_23_versions_each_on_its_own_socket_with_mode_0600() {
    let mut proxy = Proxy::start(&[]);
    for v in API_VERSIONS {
        let p = proxy.socket(&format!("{}-{}", v.group.as_str(), v.version));
        let m = std::fs::metadata(&p).unwrap_or_else(|_| panic!("missing {}", p.display()));
        assert!(m.file_type().is_socket());
        assert_eq!(m.permissions().mode() & 0o777, 0o600, "{}", p.display());
    }
    assert_eq!(std::fs::read_dir(&proxy.socket_dir).unwrap().count(), 23);
    assert!(proxy.terminate().success());
    assert_eq!(
        std::fs::read_dir(&proxy.socket_dir).unwrap().count(),
        0,
        "sockets are removed on shutdown"
    );
}

/// Calls a method by its full path with an empty protobuf message.
async fn raw_call(channel: csi_proxy_client::ProxyChannel, path: &'static str) -> tonic::Status {
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let codec = tonic_prost::ProstCodec::<(), ()>::default();
    grpc.unary(
        tonic::Request::new(()),
        http::uri::PathAndQuery::from_static(path),
        codec,
    )
    .await
    .err()
    .unwrap_or_else(|| tonic::Status::ok(""))
}

#[tokio::test]
async fn an_endpoint_serves_only_its_own_service() {
    let proxy = Proxy::start(&[]);
    let fs = proxy.channel("filesystem-v1").await;
    // Another group's method, another version's method, garbage.
    for path in [
        "/v1.Disk/ListDiskLocations",
        "/v1beta1.Filesystem/PathExists",
        "/v1.Filesystem/Nope",
        "/x",
    ] {
        let st = raw_call(fs.clone(), path).await;
        assert_eq!(st.code(), Code::Unimplemented, "{path}: {st:?}");
        assert!(
            st.message().contains("only v1.Filesystem"),
            "{path}: {}",
            st.message()
        );
    }
    // The filesystem-v1 method itself works on its endpoint ...
    let st = raw_call(fs.clone(), "/v1.Filesystem/PathExists").await;
    assert_eq!(
        st.code(),
        Code::InvalidArgument,
        "empty path is rejected: {st:?}"
    );
    // ... and not on the disk endpoint.
    let disk = proxy.channel("disk-v1").await;
    let st = raw_call(disk, "/v1.Filesystem/PathExists").await;
    assert_eq!(st.code(), Code::Unimplemented);
}

#[tokio::test]
async fn smb_iscsi_and_system_answer_from_their_backends() {
    let proxy = Proxy::start(&[]);
    // Empty requests: refused by the validation of each backend.
    let st = raw_call(proxy.channel("smb-v1").await, "/v1.Smb/NewSmbGlobalMapping").await;
    assert_eq!(st.code(), Code::InvalidArgument, "{st:?}");
    assert!(st.message().contains("remote_path"), "{}", st.message());
    let st = raw_call(
        proxy.channel("iscsi-v1alpha2").await,
        "/v1alpha2.Iscsi/DisconnectTarget",
    )
    .await;
    assert_eq!(st.code(), Code::InvalidArgument, "{st:?}");
    let st = raw_call(
        proxy.channel("system-v1alpha1").await,
        "/v1alpha1.System/GetService",
    )
    .await;
    assert_eq!(st.code(), Code::InvalidArgument, "{st:?}");
    assert!(st.message().contains("service name"), "{}", st.message());
}

#[tokio::test]
async fn api_groups_flag_serves_a_subset() {
    let mut proxy = Proxy::start(&["-api-groups=filesystem-v1"]);
    let names: Vec<String> = std::fs::read_dir(&proxy.socket_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["csi-proxy-filesystem-v1.sock"]);
    assert!(proxy.terminate().success());
}

#[test]
fn a_second_proxy_does_not_steal_the_sockets() {
    let proxy = Proxy::start(&[]);
    let out = proxy.command(&[]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("another csi-proxy"), "{err}");
    // The first one still serves.
    assert!(std::os::unix::net::UnixStream::connect(proxy.socket("filesystem-v1")).is_ok());
}

#[test]
fn start_up_failures_exit_non_zero_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let not_a_dir = dir.path().join("file");
    std::fs::write(&not_a_dir, b"x").unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![format!("-socket-dir={}", not_a_dir.display())],
            "socket directory",
        ),
        (vec!["-api-groups=nope".into()], "unknown API group"),
        (vec!["-kubelet-path=relative".into()], "kubelet-path"),
        (vec!["-no-such-flag".into()], "no-such-flag"),
    ];
    for (args, want) in cases {
        // The default socket dir first: the last occurrence of a flag wins.
        let out = Command::new(bin())
            .arg(format!("-socket-dir={}", dir.path().join("s").display()))
            .args(&args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} succeeded");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn help_and_version() {
    let out = Command::new(bin()).arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "kubelet-path",
        "working-dir",
        "windows-service",
        "require-privacy",
        "metrics-bind-address",
        "socket-dir",
        "pipe-sddl",
        "api-groups",
        "log_file",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}");
    }
    let out = Command::new(bin()).arg("-version").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains(env!("CARGO_PKG_VERSION")));
}

#[tokio::test]
async fn sigterm_drains_in_flight_calls_and_exits_zero() {
    use csi_proxy_api::filesystem::v1::{PathExistsRequest, RmdirRequest};
    let mut proxy = Proxy::start(&[]);
    // A slow call: removing a large tree takes far longer than the delay
    // before SIGTERM below, so it is in flight when the signal arrives.
    let big = proxy.kubelet.join("big");
    for d in 0..40 {
        let sub = big.join(format!("d{d}"));
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..500 {
            std::fs::write(sub.join(format!("f{f}")), b"").unwrap();
        }
    }
    let c = proxy.client().connect_filesystem_v1().await.unwrap();
    let slow = {
        let mut c = c.clone();
        let path = big.display().to_string();
        tokio::spawn(async move { c.rmdir(RmdirRequest { path, force: true }).await })
    };
    // And a burst of quick calls racing with the signal.
    let path = proxy.kubelet.display().to_string();
    let mut burst = Vec::new();
    for _ in 0..50 {
        let mut c = c.clone();
        let path = path.clone();
        burst.push(tokio::spawn(async move {
            c.path_exists(PathExistsRequest { path }).await
        }));
    }
    tokio::time::sleep(std::time::Duration::from_millis(30)).await;
    let (status, proxy) = tokio::task::spawn_blocking(move || (proxy.terminate(), proxy))
        .await
        .unwrap();
    assert!(status.success(), "exit status {status:?}: {}", proxy.log());

    // The call in flight at SIGTERM completed, and did its whole job.
    slow.await
        .unwrap()
        .expect("in-flight Rmdir must complete during the drain");
    assert!(!big.exists());
    // Racing calls either completed or were refused (GOAWAY) before they
    // started; none hangs.
    for call in burst {
        let r = tokio::time::timeout(std::time::Duration::from_secs(10), call)
            .await
            .unwrap()
            .unwrap();
        if let Ok(r) = r {
            assert!(r.into_inner().exists);
        }
    }
    let log = proxy.log();
    assert!(log.contains("SIGTERM"), "{log}");
    // Request lines at -v=2: method, duration and code.
    assert!(
        log.contains("/v1.Filesystem/Rmdir") && log.contains("duration_us"),
        "{log}"
    );
    assert_eq!(std::fs::read_dir(&proxy.socket_dir).unwrap().count(), 0);
}

/// Runs the binary with `-socket-dir=<dir>` and `-api-groups=filesystem-v1`
/// and waits (generously) for it either to exit or to log "csi-proxy
/// ready". Returns the exit code (`None` if it started; it is then killed)
/// and stderr.
fn start_with_socket_dir(dir: &std::path::Path) -> (Option<i32>, String) {
    let log_dir = tempfile::tempdir().unwrap();
    let log_path = log_dir.path().join("stderr.log");
    let mut child = Command::new(bin())
        .arg(format!("-kubelet-path={}", log_dir.path().display()))
        .arg(format!("-socket-dir={}", dir.display()))
        .arg("-api-groups=filesystem-v1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        if let Some(status) = child.try_wait().unwrap() {
            return (status.code(), log);
        }
        if log.contains("csi-proxy ready") {
            let sock = dir.join("csi-proxy-filesystem-v1.sock");
            assert!(
                std::os::unix::net::UnixStream::connect(&sock).is_ok(),
                "ready but {} does not answer",
                sock.display()
            );
            let _ = child.kill();
            let _ = child.wait();
            return (None, log);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("neither ready nor exited: {log}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn chmod(p: &std::path::Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A private (0700) temp dir, so that only the modes set by a test matter.
fn private_tempdir() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    chmod(t.path(), 0o700);
    t
}

#[test]
fn socket_dir_writable_by_group_or_others_is_refused_sticky_or_not() {
    let t = private_tempdir();
    let dir = t.path().join("sock");
    std::fs::create_dir(&dir).unwrap();
    for mode in [0o777, 0o1777, 0o775, 0o770, 0o757] {
        chmod(&dir, mode);
        let (code, log) = start_with_socket_dir(&dir);
        assert_eq!(code, Some(1), "mode {mode:o} was accepted: {log}");
        assert!(
            log.contains(&format!(
                "socket directory {} is writable by group or others",
                dir.display()
            )),
            "{mode:o}: {log}"
        );
        assert!(log.contains(&format!("mode {mode:04o}")), "{mode:o}: {log}");
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            0,
            "{mode:o}: a socket was bound"
        );
    }
    for mode in [0o700, 0o755] {
        chmod(&dir, mode);
        let (code, log) = start_with_socket_dir(&dir);
        assert_eq!(code, None, "mode {mode:o} was refused: {log}");
    }
}

#[test]
fn socket_dir_owned_by_another_user_is_refused() {
    let t = private_tempdir();
    let me = nix::unistd::geteuid();
    let dir = if me.is_root() {
        // Mode 0755, owned by nobody.
        let d = t.path().join("sock");
        std::fs::create_dir(&d).unwrap();
        chmod(&d, 0o755);
        nix::unistd::chown(&d, Some(65534.into()), Some(65534.into())).unwrap();
        d
    } else {
        // Not root: a directory of root's (0755) is another user's.
        std::path::PathBuf::from("/usr")
    };
    let owner = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&dir).unwrap());
    assert_ne!(owner, me.as_raw());
    let (code, log) = start_with_socket_dir(&dir);
    assert_eq!(code, Some(1), "{log}");
    assert!(
        log.contains(&format!(
            "socket directory {} is owned by uid {owner}, not by the proxy's user (uid {me})",
            dir.display()
        )),
        "{log}"
    );
}

#[test]
fn the_way_to_the_socket_dir_is_checked_too() {
    let t = private_tempdir();
    let parent = t.path().join("parent");
    let dir = parent.join("sock");
    std::fs::create_dir_all(&dir).unwrap();
    chmod(&dir, 0o755);
    // Anyone may rename `sock` away and put their own in its place.
    chmod(&parent, 0o777);
    let (code, log) = start_with_socket_dir(&dir);
    assert_eq!(code, Some(1), "{log}");
    assert!(
        log.contains(&format!(
            "{} (on the way to the socket directory) is writable by group or others without the \
             sticky bit (mode 0777)",
            parent.display()
        )),
        "{log}"
    );
    // Nor through a link: `link` -> `parent` is followed, and `parent` is
    // still checked.
    let link = t.path().join("link");
    std::os::unix::fs::symlink(&parent, &link).unwrap();
    let (code, log) = start_with_socket_dir(&link.join("sock"));
    assert_eq!(code, Some(1), "{log}");
    assert!(
        log.contains("(on the way to the socket directory)"),
        "{log}"
    );
    // Like /tmp: with the sticky bit only the owner of `sock` may rename it.
    chmod(&parent, 0o1777);
    let (code, log) = start_with_socket_dir(&dir);
    assert_eq!(code, None, "{log}");
    let (code, log) = start_with_socket_dir(&link.join("sock"));
    assert_eq!(code, None, "{log}");
}

/// systemd `Type=notify`: READY=1 once every socket is bound, STOPPING=1 on
/// SIGTERM, sent to `$NOTIFY_SOCKET` (here a datagram socket of the test's,
/// as systemd would hold it).
#[test]
fn readiness_and_stopping_are_notified_to_systemd() {
    use std::os::unix::net::UnixDatagram;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notify.sock");
    let sock = UnixDatagram::bind(&path).unwrap();
    sock.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    let notify = path.clone();
    let mut proxy = Proxy::start_with(&[], move |cmd| {
        cmd.env("NOTIFY_SOCKET", &notify);
    });
    let mut buf = [0u8; 256];
    let n = sock.recv(&mut buf).expect("a readiness message");
    let ready = String::from_utf8_lossy(&buf[..n]).to_string();
    assert!(ready.lines().any(|l| l == "READY=1"), "{ready:?}");
    // Every endpoint existed when READY=1 was sent.
    assert_eq!(std::fs::read_dir(&proxy.socket_dir).unwrap().count(), 23);
    assert!(proxy.terminate().success());
    let n = sock.recv(&mut buf).expect("a stopping message");
    let stopping = String::from_utf8_lossy(&buf[..n]).to_string();
    assert!(stopping.lines().any(|l| l == "STOPPING=1"), "{stopping:?}");
}
