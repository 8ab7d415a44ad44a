//! Raw HTTP/2 against the real binary over named pipes (Windows build; CI
//! runs it under wine): every `:authority` form real clients send, repeated
//! requests on one connection, framing variants, and idle connections that
//! never send the preface. One proxy for the whole file, because pipe names
//! are machine-global.
#![cfg(windows)]

mod raw;

use csi_proxy_server::http2::client::{RawClient, Shape};
use std::fs::{File, OpenOptions};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const ERROR_PIPE_BUSY: i32 = 231;

struct Proxy {
    child: Child,
    root: PathBuf,
    log: PathBuf,
}

impl Proxy {
    fn start(kubelet: &std::path::Path, root: PathBuf) -> Proxy {
        let log = root.join("stderr.log");
        let child = Command::new(env!("CARGO_BIN_EXE_csi-proxy"))
            .arg(format!("-kubelet-path={}", kubelet.display()))
            .arg("-api-groups=filesystem")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&log).unwrap())
            .spawn()
            .expect("start csi-proxy.exe");
        let mut p = Proxy { child, root, log };
        let deadline = Instant::now() + Duration::from_secs(60);
        while !p.log_text().contains("csi-proxy ready") {
            if let Some(s) = p.child.try_wait().unwrap() {
                panic!("csi-proxy.exe exited with {s}: {}", p.log_text());
            }
            assert!(Instant::now() < deadline, "not ready: {}", p.log_text());
            std::thread::sleep(Duration::from_millis(50));
        }
        p
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Open a pipe as a plain blocking file, waiting while every instance is busy.
fn open(pipe: &str) -> File {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match OpenOptions::new().read(true).write(true).open(pipe) {
            Ok(f) => return f,
            Err(e) if e.raw_os_error() == Some(ERROR_PIPE_BUSY) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10))
            }
            Err(e) => panic!("open {pipe}: {e}"),
        }
    }
}

#[test]
fn raw_http2_over_named_pipes() {
    let root = std::env::temp_dir().join(format!("csi-proxy-h2pipes-{}", std::process::id()));
    let kubelet = root.join("kubelet");
    let existing = kubelet.join("pods\\uid\\volumes");
    std::fs::create_dir_all(&existing).unwrap();
    let outside = root.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let p = Proxy::start(&kubelet, root.clone());
    let existing = existing.display().to_string();
    let missing = kubelet.join("pods\\uid\\missing").display().to_string();
    let outside = outside.join("x").display().to_string();

    // Connections that never send anything are held open meanwhile.
    let idle: Vec<File> = (0..20)
        .map(|_| open(r"\\.\pipe\csi-proxy-filesystem-v1"))
        .collect();

    for v in ["v1alpha1", "v1beta1", "v1beta2", "v1", "v2alpha1"] {
        let endpoint = format!("csi-proxy-filesystem-{v}");
        let pipe = format!(r"\\.\pipe\{endpoint}");
        let service = format!("{v}.Filesystem");
        for authority in raw::authority_forms(&endpoint, &pipe) {
            let mut c = RawClient::new(open(&pipe), Shape::default()).unwrap();
            raw::exercise(
                &mut c,
                &service,
                authority.as_deref(),
                &existing,
                &missing,
                &outside,
                3,
            );
        }
    }
    let pipe = r"\\.\pipe\csi-proxy-filesystem-v1";
    for shape in raw::shapes() {
        let mut c = RawClient::new(open(pipe), shape).unwrap();
        for authority in raw::authority_forms("csi-proxy-filesystem-v1", pipe) {
            raw::exercise(
                &mut c,
                "v1.Filesystem",
                authority.as_deref(),
                &existing,
                &missing,
                &outside,
                1,
            );
        }
    }
    drop(idle);
    assert!(!p.log_text().contains("panicked"), "{}", p.log_text());
}
