//! Service mode under the Service Control Manager (Windows build; CI runs
//! it under wine, whose services.exe implements the SCM): `install-service`
//! from a directory with spaces, start through the SCM, the Filesystem API
//! over the service's pipes, stop through the SCM while a call is in
//! flight (the call completes, then the service reports Stopped with exit
//! code 0), `uninstall-service`; a start failure ends the service with a
//! service-specific exit code and a log line saying why.
//!
//! Service and pipe names carry this process's id: other test runs may
//! use the same wine prefix at the same time.
#![cfg(windows)]

use csi_proxy_api::filesystem::v1::{MkdirRequest, PathExistsRequest, PathExistsResponse};
use csi_proxy_client::Client;
use csi_proxy_http2::client::{RequestEncoder, Shape};
use csi_proxy_http2::frame;
use prost::Message;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use windows_service::service::{
    ServiceAccess, ServiceActionType, ServiceExitCode, ServiceFailureResetPeriod, ServiceStartType,
    ServiceState,
};
use windows_service::service_manager::{ServiceManager, ServiceManagerAccess};

/// Wine's SCM tells a starting service process which control pipe is its
/// own through machine-wide state, so two service starts (or a
/// `-windows-service` process outside the SCM) at the same time can swap
/// connections. The tests of this file take turns.
static SCM: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    SCM.lock().unwrap_or_else(|p| p.into_inner())
}

/// A copy of csi-proxy.exe in `%TEMP%\csi proxy svc <tag> <pid>\bin dir\`.
struct Setup {
    root: PathBuf,
    exe: PathBuf,
    kubelet: PathBuf,
    log: PathBuf,
    name: String,
    prefix: String,
}

impl Setup {
    fn new(tag: &str) -> Setup {
        let pid = std::process::id();
        let root = std::env::temp_dir().join(format!("csi proxy svc {tag} {pid}"));
        let bin = root.join("bin dir");
        let kubelet = root.join("kubelet");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&kubelet).unwrap();
        let exe = bin.join("csi-proxy.exe");
        std::fs::copy(env!("CARGO_BIN_EXE_csi-proxy"), &exe).unwrap();
        Setup {
            log: root.join("csi-proxy.log"),
            root,
            exe,
            kubelet,
            name: format!("csiproxytest{tag}{pid}"),
            prefix: format!(r"\\.\pipe\csi-proxy-svc-{tag}-{pid}-"),
        }
    }

    fn run(&self, args: &[String]) -> std::process::Output {
        Command::new(&self.exe).args(args).output().unwrap()
    }

    /// Install; returns install-service's warnings (stderr).
    fn install(&self, extra: &[&str]) -> String {
        let mut args = vec![
            "install-service".to_string(),
            format!("-service-name={}", self.name),
            format!("-pipe-prefix={}", self.prefix),
            format!("-kubelet-path={}", self.kubelet.display()),
            "-api-groups=filesystem".into(),
            "-logtostderr=false".into(),
            format!("-log_file={}", self.log.display()),
            "-v=2".into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let out = self.run(&args);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            out.status.success(),
            "install-service: {}{err}",
            String::from_utf8_lossy(&out.stdout),
        );
        err
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Setup {
    /// Best effort: stop and delete the service if a test failed half-way.
    fn drop(&mut self) {
        if let Ok(m) = ServiceManager::local_computer(None::<&str>, ServiceManagerAccess::CONNECT) {
            if let Ok(s) = m.open_service(
                &self.name,
                ServiceAccess::STOP | ServiceAccess::DELETE | ServiceAccess::QUERY_STATUS,
            ) {
                let _ = s.stop();
                let _ = s.delete();
            }
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn wait_for(
    svc: &windows_service::service::Service,
    state: ServiceState,
    what: &str,
    log: impl Fn() -> String,
) -> windows_service::service::ServiceStatus {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = svc.query_status().unwrap();
        if s.current_state == state {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: still {:?}; log:\n{}",
            s.current_state,
            log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A pipe client that holds one PathExists call open: HEADERS sent,
/// DATA (with END_STREAM) not yet.
struct HalfCall {
    pipe: std::fs::File,
    rest: Vec<u8>,
}

impl HalfCall {
    fn open(pipe_name: &str, path: &Path) -> HalfCall {
        let mut pipe = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(pipe_name)
            .unwrap_or_else(|e| panic!("open {pipe_name}: {e}"));
        let mut enc = RequestEncoder::new(Shape::default());
        let block = enc.request_block("/v1.Filesystem/PathExists", Some(pipe_name.as_bytes()), &[]);
        let msg = PathExistsRequest {
            path: path.display().to_string(),
        }
        .encode_to_vec();
        let mut frames = Vec::new();
        enc.put_request(&mut frames, &block, &msg);
        // The first frame is HEADERS (END_HEADERS only); DATA follows.
        let len =
            usize::from(frames[0]) << 16 | usize::from(frames[1]) << 8 | usize::from(frames[2]);
        assert_eq!(frames[3], frame::HEADERS);
        let rest = frames.split_off(9 + len);
        let mut hello = RequestEncoder::preface();
        hello.extend_from_slice(&frames);
        pipe.write_all(&hello).unwrap();
        HalfCall { pipe, rest }
    }

    /// Send the DATA frame and read until the server closes the pipe;
    /// returns the response message and the trailers' raw block.
    fn finish(mut self) -> (PathExistsResponse, Vec<u8>) {
        self.pipe.write_all(&self.rest).unwrap();
        let mut input = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match self.pipe.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => input.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => break,
                Err(e) => panic!("read: {e}"),
            }
        }
        let (mut message, mut trailers) = (None, None);
        let mut rest = &input[..];
        while let Some((head, payload, used)) =
            frame::split(rest, frame::MAX_MAX_FRAME_SIZE).unwrap()
        {
            if head.stream == 1 && head.kind == frame::DATA {
                message = Some(PathExistsResponse::decode(&payload[5..]).unwrap());
            }
            if head.stream == 1
                && head.kind == frame::HEADERS
                && head.flags & frame::END_STREAM != 0
            {
                trailers = Some(payload.to_vec());
            }
            rest = &rest[used..];
        }
        (
            message.expect("a response message"),
            trailers.expect("trailers"),
        )
    }
}

/// ERROR_INVALID_LEVEL: the SCM does not know this configuration level.
fn invalid_level<T>(r: &windows_service::Result<T>) -> bool {
    matches!(r, Err(windows_service::Error::Winapi(e)) if e.raw_os_error() == Some(124))
}

#[test]
fn install_start_call_stop_with_a_call_in_flight_uninstall() {
    let _turn = one_at_a_time();
    let s = Setup::new("life");
    let warnings = s.install(&["-shutdown-timeout=30s"]);

    let manager =
        ServiceManager::local_computer(None::<&str>, ServiceManagerAccess::CONNECT).unwrap();
    let svc = manager
        .open_service(
            &s.name,
            ServiceAccess::QUERY_CONFIG
                | ServiceAccess::QUERY_STATUS
                | ServiceAccess::START
                | ServiceAccess::STOP,
        )
        .unwrap();
    let config = svc.query_config().unwrap();
    assert_eq!(config.start_type, ServiceStartType::AutoStart);
    let command = config.executable_path.display().to_string();
    // The path has spaces: it must be quoted.
    assert!(
        command.starts_with(&format!("\"{}\" -windows-service ", s.exe.display())),
        "{command}"
    );
    assert!(
        command.contains(&format!("-service-name={}", s.name)),
        "{command}"
    );
    // Wine's SCM accepts failure actions but cannot report them
    // (QueryServiceConfig2W answers ERROR_INVALID_LEVEL); only real
    // Windows can show them.
    let queried = svc.get_failure_actions();
    if warnings.contains("cannot store the failure actions (restart") || invalid_level(&queried) {
        eprintln!("note: this SCM does not report failure actions; {warnings}");
    } else {
        let actions = queried.unwrap();
        let restarts = actions.actions.unwrap_or_default();
        assert_eq!(restarts.len(), 3, "{restarts:?}");
        for a in &restarts {
            assert_eq!(a.action_type, ServiceActionType::Restart);
            assert_eq!(a.delay, Duration::from_secs(10));
        }
        assert_eq!(
            actions.reset_period,
            ServiceFailureResetPeriod::After(Duration::from_secs(86400))
        );
    }
    let flag = svc.get_failure_actions_on_non_crash_failures();
    if !warnings.contains("non-crash failures") && !invalid_level(&flag) {
        assert!(flag.unwrap());
    }

    // Start through the SCM; Running only once the pipes are bound.
    svc.start::<&str>(&[]).unwrap();
    wait_for(&svc, ServiceState::Running, "start", || s.log_text());
    let log = s.log_text();
    assert!(log.contains("csi-proxy ready"), "{log}");
    assert!(log.contains("commit="), "{log}");

    // The Filesystem API over the service's pipes.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let made = s.kubelet.join("made");
    rt.block_on(async {
        let client = Client::builder().pipe_prefix(&s.prefix).build().unwrap();
        let mut fs = client.connect_filesystem_v1().await.unwrap();
        fs.mkdir(MkdirRequest {
            path: made.display().to_string(),
        })
        .await
        .unwrap();
        let r = fs
            .path_exists(PathExistsRequest {
                path: made.display().to_string(),
            })
            .await
            .unwrap();
        assert!(r.into_inner().exists);
    });
    assert!(made.is_dir());

    // Stop with a call in flight: the service drains and stays StopPending
    // until the call is answered.
    let pipe = format!("{}filesystem-v1", s.prefix);
    let call = HalfCall::open(&pipe, &made);
    std::thread::sleep(Duration::from_millis(300));
    svc.stop().unwrap();
    let pending = wait_for(&svc, ServiceState::StopPending, "stop pending", || {
        s.log_text()
    });
    assert!(pending.wait_hint >= Duration::from_secs(30), "{pending:?}");
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(
        svc.query_status().unwrap().current_state,
        ServiceState::StopPending
    );
    let (resp, trailers) = call.finish();
    assert!(resp.exists);
    assert!(
        trailers.windows(13).any(|w| w == b"grpc-status\x010"),
        "{trailers:?}"
    );
    let stopped = wait_for(&svc, ServiceState::Stopped, "stop", || s.log_text());
    assert_eq!(stopped.exit_code, ServiceExitCode::Win32(0));
    let log = s.log_text();
    assert!(log.contains("draining in-flight calls"), "{log}");
    assert!(log.contains("service stopped"), "{log}");
    drop(svc);

    // Uninstall.
    let out = s.run(&[
        "uninstall-service".into(),
        format!("-service-name={}", s.name),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let gone = manager.open_service(&s.name, ServiceAccess::QUERY_STATUS);
    assert!(gone.is_err(), "the service still exists");
    let again = s.run(&[
        "uninstall-service".into(),
        format!("-service-name={}", s.name),
    ]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("no such service"));
}

#[test]
fn a_start_failure_stops_the_service_with_a_specific_exit_code() {
    let _turn = one_at_a_time();
    let s = Setup::new("fail");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    s.install(&[&format!("-metrics-bind-address=127.0.0.1:{port}")]);
    let manager =
        ServiceManager::local_computer(None::<&str>, ServiceManagerAccess::CONNECT).unwrap();
    let svc = manager
        .open_service(&s.name, ServiceAccess::QUERY_STATUS | ServiceAccess::START)
        .unwrap();
    svc.start::<&str>(&[]).unwrap();
    let stopped = wait_for(&svc, ServiceState::Stopped, "failed start", || s.log_text());
    assert_eq!(
        stopped.exit_code,
        ServiceExitCode::ServiceSpecific(1),
        "{}",
        s.log_text()
    );
    let log = s.log_text();
    assert!(log.contains("-metrics-bind-address"), "{log}");
    assert!(!log.contains("csi-proxy ready"), "{log}");
    drop(taken);
}

#[test]
fn windows_service_outside_the_scm_fails_at_once() {
    let _turn = one_at_a_time();
    let out = Command::new(env!("CARGO_BIN_EXE_csi-proxy"))
        .args(["-windows-service", "-service-name=csiproxytestnoscm"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Service Control Manager"), "{err}");
}
