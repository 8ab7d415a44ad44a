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

// tests/scm names its paths with pipes::spelling.
mod pipes;
mod scm;

use csi_proxy_api::filesystem::v1::{MkdirRequest, PathExistsRequest, PathExistsResponse};
use csi_proxy_client::Client;
use csi_proxy_http2::client::{RequestEncoder, Shape};
use csi_proxy_http2::frame;
use prost::Message;
use scm::{one_at_a_time, wait_for, Installed};
use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use windows_service::service::{ServiceAccess, ServiceExitCode, ServiceStartType, ServiceState};

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

#[test]
fn install_start_call_stop_with_a_call_in_flight_uninstall() {
    let _turn = one_at_a_time();
    let s = Installed::new("life");
    let warnings = s.install("filesystem", &["-shutdown-timeout=30s"]);

    let svc = s.open(
        ServiceAccess::QUERY_CONFIG
            | ServiceAccess::QUERY_STATUS
            | ServiceAccess::START
            | ServiceAccess::STOP,
    );
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
    // Wine's SCM accepts failure actions but cannot report them; only
    // real Windows can show them (`real_windows_services`).
    if !scm::restart_on_failure_reported(&svc, &warnings) {
        eprintln!("note: this SCM does not report failure actions; {warnings}");
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
    s.uninstall_ok();
    let again = s.uninstall();
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("no such service"));
}

#[test]
fn a_start_failure_stops_the_service_with_a_specific_exit_code() {
    let _turn = one_at_a_time();
    let s = Installed::new("fail");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    s.install(
        "filesystem",
        &[&format!("-metrics-bind-address=127.0.0.1:{port}")],
    );
    let svc = s.open(ServiceAccess::QUERY_STATUS | ServiceAccess::START);
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
