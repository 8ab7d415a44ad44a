//! Raw HTTP/2 against the real binary over named pipes (Windows build; CI
//! runs it under wine): every `:authority` form real clients send, repeated
//! requests on one connection, framing variants, idle connections that
//! never send the preface, and the conformance cases h2spec found
//! (`csi_proxy_http2::conformance`). One proxy for the whole file, because pipe names
//! are machine-global.
#![cfg(windows)]

mod pipes;
mod raw;

use csi_proxy_http2::client::{RawClient, Shape};
use csi_proxy_http2::conformance;
use pipes::Proxy;
use std::fs::{File, OpenOptions};
use std::time::{Duration, Instant};

const ERROR_PIPE_BUSY: i32 = 231;

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
    let p = Proxy::start("h2pipes", "filesystem");
    let existing = p.kubelet.join("pods\\uid\\volumes");
    std::fs::create_dir_all(&existing).unwrap();
    let existing = existing.display().to_string();
    let missing = p.kubelet.join("pods\\uid\\missing").display().to_string();
    let outside = p.outside.join("x").display().to_string();

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
    // Requests that do not decode (a path that is not UTF-8, ...) are the
    // client's fault.
    let mut c = RawClient::new(open(pipe), Shape::default()).unwrap();
    raw::undecodable_requests(&mut c, "v1.Filesystem", &existing);
    let target = raw::path_exists_target(&existing);
    let failures = conformance::run_all(|| Box::new(open(pipe)), &target);
    raw::assert_no_failures(&failures);
    drop(idle);
    assert!(!p.log_text().contains("panicked"), "{}", p.log_text());
}
