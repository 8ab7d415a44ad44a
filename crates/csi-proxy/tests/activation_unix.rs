//! Socket activation: the real binary serving sockets systemd handed over.
//!
//! - Under a real systemd (`systemd --user` on a private bus, see
//!   `tests/systemd`), with deploy/linux's `csi-proxy@.socket` and
//!   `csi-proxy.service` (paths rewritten into a temp dir): clients call in
//!   a loop while the service is restarted several times; no call may fail
//!   (a call queued when a GOAWAY arrived is sent again by csi-proxy-client
//!   itself, not by the test), and the longest wait of a call is printed.
//!   Needs root.
//! - With `systemd-socket-activate` (no root): a handed socket serves its
//!   endpoint and the other endpoints get sockets of their own; a socket
//!   named after no endpoint, or one that is not a listening stream socket,
//!   stops the proxy at start-up with a message naming it.
#![cfg(target_os = "linux")]

mod systemd;

use csi_proxy_api::filesystem::{v1, v1beta2};
use csi_proxy_client::{Client, Group};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use systemd::Systemd;

/// The endpoints given a `.socket` unit; the others bind their own.
const HANDED: &[&str] = &["filesystem-v1", "filesystem-v1beta1", "disk-v1"];
const RESTARTS: usize = 5;

fn repo_file(rel: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// deploy/linux's units, pointed at `root` and this build's binary.
fn units(root: &Path) -> Vec<(String, String)> {
    let sockets = root.join("sockets");
    let socket = repo_file("deploy/linux/csi-proxy@.socket")
        .replace("/run/csi-proxy", &sockets.display().to_string())
        .replace(
            "Service=csi-proxy.service",
            "Service={prefix}-csi-proxy.service",
        );
    let exec = format!(
        "ExecStart={} -kubelet-path={} -socket-dir={} -state-dir={} -shutdown-timeout=5s -v=2\n\
         StandardOutput=append:{log}\nStandardError=append:{log}",
        env!("CARGO_BIN_EXE_csi-proxy"),
        root.join("kubelet").display(),
        sockets.display(),
        root.join("state").display(),
        log = root.join("proxy.log").display(),
    );
    let service: String = repo_file("deploy/linux/csi-proxy.service")
        .lines()
        .filter(|l| !l.starts_with("StateDirectory="))
        .map(|l| match l.starts_with("ExecStart=") {
            true => exec.clone(),
            false => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(service.contains("Type=notify"), "{service}");
    // Six starts in a few seconds are over systemd's default start rate
    // limit (5 in 10 s), which would refuse the last restart.
    let service = service.replacen("[Unit]\n", "[Unit]\nStartLimitIntervalSec=0\n", 1);
    vec![
        ("{prefix}-csi-proxy@.socket".into(), socket),
        ("{prefix}-csi-proxy.service".into(), service + "\n"),
    ]
}

fn ok(out: std::process::Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn main_pid(sd: &Systemd, service: &str) -> u32 {
    ok(
        sd.systemctl(&["show", "-p", "MainPID", "--value", service]),
        "systemctl show MainPID",
    )
    .parse()
    .unwrap()
}

/// One call's outcome: when it started, how long it took, its error.
struct Call {
    start: Instant,
    took: Duration,
    error: Option<String>,
}

/// PathExists on filesystem v1 over a new connection (a client that
/// dials for each call, as a driver's first call after a restart does).
async fn call_fresh(client: &Client, kubelet: &str) -> Result<(), String> {
    let channel = client
        .connect_version(Group::Filesystem, "v1")
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let r = v1::filesystem_client::FilesystemClient::new(channel)
        .path_exists(v1::PathExistsRequest {
            path: kubelet.into(),
        })
        .await
        .map_err(|s| format!("{:?}: {}", s.code(), s.message()))?;
    match r.into_inner().exists {
        true => Ok(()),
        false => Err("PathExists said the kubelet dir does not exist".into()),
    }
}

#[test]
fn restarts_under_systemd_drop_no_call() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: needs root (a private mount namespace for systemd --user)");
        return;
    }
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("kubelet")).unwrap();
    let unit_files = units(root.path());
    let refs: Vec<(&str, &str)> = unit_files
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_str()))
        .collect();
    let sd = Systemd::start_with_units(&refs);
    let service = sd.unit("csi-proxy.service");
    let socket_units: Vec<String> = HANDED
        .iter()
        .map(|e| sd.unit(&format!("csi-proxy@{e}.socket")))
        .collect();
    let sockets = root.path().join("sockets");
    let mut start = vec!["start"];
    start.extend(socket_units.iter().map(String::as_str));
    ok(sd.systemctl(&start), "start the sockets");
    for e in HANDED {
        let p = sockets.join(format!("csi-proxy-{e}.sock"));
        let m = std::fs::symlink_metadata(&p).unwrap();
        assert!(m.file_type().is_socket(), "{}", p.display());
        assert_eq!(m.permissions().mode() & 0o777, 0o600, "{}", p.display());
    }
    ok(sd.systemctl(&["start", &service]), "start the service");
    let log = root.path().join("proxy.log");
    let proxy_log = || std::fs::read_to_string(&log).unwrap_or_default();
    systemd::wait_for(
        || std::fs::read_dir(&sockets).map(|d| d.count()).unwrap_or(0) == 23,
        "23 sockets",
    );
    assert!(
        proxy_log().contains("serving the sockets systemd handed over"),
        "{}",
        proxy_log()
    );

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let client = Client::builder()
        .socket_dir(&sockets)
        .timeout(Duration::from_secs(60))
        .connect_timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let kubelet = root.path().join("kubelet").display().to_string();

    // An endpoint without a .socket unit is served on a socket of the
    // proxy's own.
    runtime.block_on(async {
        let channel = client
            .connect_version(Group::Filesystem, "v1beta2")
            .await
            .unwrap();
        let r = v1beta2::filesystem_client::FilesystemClient::new(channel)
            .path_exists(v1beta2::PathExistsRequest {
                path: kubelet.clone(),
            })
            .await
            .unwrap();
        assert!(r.into_inner().exists);
    });
    call_fresh_blocking(&runtime, &client, &kubelet).unwrap();

    // Callers in a loop while the service restarts.
    let stop = Arc::new(AtomicBool::new(false));
    let mut callers = Vec::new();
    for _ in 0..4 {
        let (client, kubelet, stop) = (client.clone(), kubelet.clone(), stop.clone());
        callers.push(runtime.spawn(async move {
            let mut calls = Vec::new();
            // Bounded even if the test fails before it says stop.
            let give_up = Instant::now() + Duration::from_secs(120);
            while !stop.load(Ordering::Relaxed) && Instant::now() < give_up {
                let start = Instant::now();
                let error = call_fresh(&client, &kubelet).await.err();
                calls.push(Call {
                    start,
                    took: start.elapsed(),
                    error,
                });
            }
            calls
        }));
    }
    // And one that keeps its channel: after the GOAWAY of a stopping
    // process, the channel connects again (to the socket systemd holds).
    // A call queued when the GOAWAY arrived is cancelled by hyper before
    // it is sent; csi-proxy-client sends it again (as grpc-go does), so
    // this caller does not retry anything.
    {
        let (client, kubelet, stop) = (client.clone(), kubelet.clone(), stop.clone());
        callers.push(runtime.spawn(async move {
            let mut calls = Vec::new();
            let channel = client
                .connect_version(Group::Filesystem, "v1")
                .await
                .unwrap();
            let mut fs = v1::filesystem_client::FilesystemClient::new(channel);
            let give_up = Instant::now() + Duration::from_secs(120);
            while !stop.load(Ordering::Relaxed) && Instant::now() < give_up {
                let start = Instant::now();
                let r = fs
                    .path_exists(v1::PathExistsRequest {
                        path: kubelet.clone(),
                    })
                    .await;
                let error = match r {
                    Ok(r) if r.get_ref().exists => None,
                    Ok(_) => Some("PathExists said no".to_string()),
                    Err(s) => Some(format!("kept channel: {:?}: {}", s.code(), s.message())),
                };
                calls.push(Call {
                    start,
                    took: start.elapsed(),
                    error,
                });
            }
            calls
        }));
    }
    let mut pids = vec![main_pid(&sd, &service)];
    let mut windows = Vec::new();
    for _ in 0..RESTARTS {
        std::thread::sleep(Duration::from_millis(300));
        let t0 = Instant::now();
        ok(sd.systemctl(&["restart", &service]), "restart the service");
        windows.push((t0, Instant::now()));
        pids.push(main_pid(&sd, &service));
    }
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let calls: Vec<Call> = runtime.block_on(async {
        let mut all = Vec::new();
        for c in callers {
            all.extend(c.await.unwrap());
        }
        all
    });

    let mut distinct = pids.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(
        distinct.len(),
        RESTARTS + 1,
        "a new process each time: {pids:?}"
    );
    let failed: Vec<String> = calls.iter().filter_map(|c| c.error.clone()).collect();
    assert!(
        failed.is_empty(),
        "{} of {} calls failed across the restarts, e.g. {:?}\n{}",
        failed.len(),
        calls.len(),
        &failed[..failed.len().min(5)],
        proxy_log()
    );
    let longest = calls.iter().map(|c| c.took).max().unwrap();
    for (i, (t0, t1)) in windows.iter().enumerate() {
        let during: Vec<&Call> = calls
            .iter()
            .filter(|c| c.start >= *t0 && c.start <= *t1)
            .collect();
        assert!(
            !during.is_empty(),
            "restart {i}: no call was made while it ran (it took {:?})",
            *t1 - *t0
        );
        let worst = during.iter().map(|c| c.took).max().unwrap();
        eprintln!(
            "restart {i}: systemctl restart took {:?}; {} calls started during it, the longest waited {worst:?}",
            *t1 - *t0,
            during.len()
        );
    }
    eprintln!(
        "{} calls over {RESTARTS} restarts, none failed; longest wait of a call: {longest:?}",
        calls.len()
    );

    // Stopped, the service leaves systemd's sockets in place (its own are
    // gone), and a call to one starts it again.
    ok(sd.systemctl(&["stop", &service]), "stop the service");
    assert!(sockets.join("csi-proxy-filesystem-v1.sock").exists());
    assert!(!sockets.join("csi-proxy-filesystem-v1beta2.sock").exists());
    let t = Instant::now();
    call_fresh_blocking(&runtime, &client, &kubelet).unwrap();
    eprintln!(
        "a call to the stopped service started it and was answered in {:?}",
        t.elapsed()
    );
    assert_eq!(
        ok(sd.systemctl(&["is-active", &service]), "is-active"),
        "active"
    );
    ok(sd.systemctl(&["stop", &service]), "stop the service");
}

fn call_fresh_blocking(
    runtime: &tokio::runtime::Runtime,
    client: &Client,
    kubelet: &str,
) -> Result<(), String> {
    runtime.block_on(call_fresh(client, kubelet))
}

/// The proxy started by `systemd-socket-activate` with the sockets
/// `listen` (path, name, datagram?), once something connects to the first
/// one; returns its exit status and output.
fn activate_and_fail(dir: &Path, listen: &[(PathBuf, &str, bool)]) -> (bool, String) {
    let sockets = dir.join("sockets");
    std::fs::create_dir_all(dir.join("kubelet")).unwrap();
    let mut cmd = Command::new("systemd-socket-activate");
    for (path, name, datagram) in listen {
        if *datagram {
            cmd.arg("--datagram");
        }
        cmd.arg(format!("--listen={}", path.display()))
            .arg(format!("--fdname={name}"));
    }
    let out = dir.join("out.log");
    let mut child = cmd
        .arg(env!("CARGO_BIN_EXE_csi-proxy"))
        .arg(format!("-kubelet-path={}", dir.join("kubelet").display()))
        .arg(format!("-socket-dir={}", sockets.display()))
        .arg(format!("-state-dir={}", dir.join("state").display()))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(dir.join("err.log")).unwrap())
        .spawn()
        .expect("systemd-socket-activate (package systemd)");
    systemd::wait_for(|| listen[0].0.exists(), "the first socket");
    let (first, _, datagram) = &listen[0];
    if *datagram {
        let d = std::os::unix::net::UnixDatagram::unbound().unwrap();
        d.send_to(b"x", first).unwrap();
    } else {
        // The socket's file is made by bind(), before listen(): until
        // then a connect is refused (it failed so in CI).
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match std::os::unix::net::UnixStream::connect(first) {
                Ok(c) => break drop(c),
                Err(e)
                    if e.kind() == std::io::ErrorKind::ConnectionRefused
                        && Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(10))
                }
                Err(e) => panic!("connect {}: {e}", first.display()),
            }
        }
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!(
                "the proxy did not stop: {}",
                std::fs::read_to_string(dir.join("err.log")).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (
        status.success(),
        std::fs::read_to_string(dir.join("err.log")).unwrap_or_default(),
    )
}

#[test]
fn unknown_names_and_wrong_sockets_are_refused_at_start_up() {
    // (socket file, FileDescriptorName=, datagram?) per socket; what the
    // error must say.
    type Listen<'a> = &'a [(&'a str, &'a str, bool)];
    let cases: &[(Listen, &str)] = &[
        (
            &[
                (
                    "csi-proxy-filesystem-v1.sock",
                    "csi-proxy-filesystem-v1",
                    false,
                ),
                ("other.sock", "csi-proxy-bogus-v1", false),
            ],
            "handed over as \"csi-proxy-bogus-v1\"",
        ),
        (
            &[(
                "csi-proxy-filesystem-v1.sock",
                "csi-proxy-filesystem-v1",
                true,
            )],
            "not a stream socket",
        ),
        (
            &[("elsewhere.sock", "csi-proxy-filesystem-v1", false)],
            "make ListenStream= and -socket-dir agree",
        ),
    ];
    for (listen, says) in cases {
        let dir = tempfile::tempdir().unwrap();
        let sockets = dir.path().join("sockets");
        std::fs::create_dir(&sockets).unwrap();
        std::fs::set_permissions(&sockets, std::fs::Permissions::from_mode(0o755)).unwrap();
        let listen: Vec<(PathBuf, &str, bool)> = listen
            .iter()
            .map(|(f, n, d)| (sockets.join(f), *n, *d))
            .collect();
        let (success, log) = activate_and_fail(dir.path(), &listen);
        assert!(!success, "{listen:?}: the proxy started: {log}");
        assert!(log.contains(says), "{listen:?}: wanted {says:?} in: {log}");
        // Nothing of its own was left bound.
        let own: Vec<_> = std::fs::read_dir(&sockets)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| {
                !listen
                    .iter()
                    .any(|(p, _, _)| p.file_name().unwrap() == n.as_str())
            })
            .collect();
        assert!(own.is_empty(), "{listen:?}: left {own:?}");
    }
}

#[test]
fn a_handed_socket_serves_its_endpoint_and_the_others_get_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let sockets = dir.path().join("sockets");
    let kubelet = dir.path().join("kubelet");
    std::fs::create_dir_all(&kubelet).unwrap();
    std::fs::create_dir(&sockets).unwrap();
    std::fs::set_permissions(&sockets, std::fs::Permissions::from_mode(0o755)).unwrap();
    let handed = sockets.join("csi-proxy-filesystem-v1.sock");
    let mut child = Command::new("systemd-socket-activate")
        .arg(format!("--listen={}", handed.display()))
        .arg("--fdname=csi-proxy-filesystem-v1")
        .arg(env!("CARGO_BIN_EXE_csi-proxy"))
        .arg(format!("-kubelet-path={}", kubelet.display()))
        .arg(format!("-socket-dir={}", sockets.display()))
        .arg(format!("-state-dir={}", dir.path().join("state").display()))
        .arg("-api-groups=filesystem-v1,filesystem-v1beta2")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("err.log")).unwrap())
        .spawn()
        .expect("systemd-socket-activate (package systemd)");
    let log = || std::fs::read_to_string(dir.path().join("err.log")).unwrap_or_default();
    systemd::wait_for(|| handed.exists(), "the handed socket");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let client = Client::builder()
        .socket_dir(&sockets)
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let path = kubelet.display().to_string();
    // The first connection starts the proxy on the handed socket.
    call_fresh_blocking(&runtime, &client, &path).unwrap_or_else(|e| panic!("{e}: {}", log()));
    let own = sockets.join("csi-proxy-filesystem-v1beta2.sock");
    systemd::wait_for(|| own.exists(), "the proxy's own socket");
    runtime.block_on(async {
        let channel = client
            .connect_version(Group::Filesystem, "v1beta2")
            .await
            .unwrap();
        let r = v1beta2::filesystem_client::FilesystemClient::new(channel)
            .path_exists(v1beta2::PathExistsRequest { path: path.clone() })
            .await
            .unwrap();
        assert!(r.into_inner().exists);
    });
    let text = log();
    assert!(
        text.contains("serving the socket handed over by systemd")
            && text.contains("csi-proxy-filesystem-v1.sock"),
        "{text}"
    );
    // SIGTERM: the proxy removes its own socket, not the handed one.
    // SAFETY: kill(2) with a pid we own (systemd-socket-activate execs the
    // proxy in place) and a valid signal number.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}: {}", log());
    assert!(!own.exists(), "the proxy's own socket is removed");
    assert!(
        handed.exists(),
        "the handed socket's file is left to systemd"
    );
}
