//! The per-endpoint connection cap on named pipes (Windows build; CI runs
//! it under wine). One proxy for the whole file: pipe names are
//! machine-global.
#![cfg(windows)]

mod pipes;

use csi_proxy_api::filesystem::v1::{PathExistsRequest, PathExistsResponse};
use csi_proxy_http2::client::{RawClient, Shape};
use pipes::Proxy;
use prost::Message;
use std::fs::{File, OpenOptions};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const PIPE: &str = r"\\.\pipe\csi-proxy-filesystem-v1";
const ERROR_PIPE_BUSY: i32 = 231;
const PATIENCE: Duration = Duration::from_secs(60);

fn open() -> File {
    let deadline = Instant::now() + PATIENCE;
    loop {
        match OpenOptions::new().read(true).write(true).open(PIPE) {
            Ok(f) => return f,
            Err(e) if e.raw_os_error() == Some(ERROR_PIPE_BUSY) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10))
            }
            Err(e) => panic!("open {PIPE}: {e}"),
        }
    }
}

/// PathExists(`path`) on a connection, in a thread: `None` if no answer
/// came within `wait` (the thread is left behind).
fn path_exists(pipe: File, path: String, wait: Duration) -> Option<std::io::Result<bool>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let r = RawClient::new(pipe, Shape::default()).and_then(|mut c| {
            let msg = PathExistsRequest { path }.encode_to_vec();
            let resp = c.call("/v1.Filesystem/PathExists", None, &msg)?;
            assert_eq!(resp.grpc_status, Some(0), "{resp:?}");
            Ok(PathExistsResponse::decode(&resp.message.unwrap()[..])
                .unwrap()
                .exists)
        });
        let _ = tx.send(r);
    });
    rx.recv_timeout(wait).ok()
}

#[test]
fn connections_over_the_cap_are_closed_on_named_pipes() {
    const CAP: usize = 4;
    let p = Proxy::start_with(
        "limits-pipes",
        "filesystem-v1",
        &[&format!("-max-connections-per-endpoint={CAP}")],
    );
    let existing = p.kubelet.display().to_string();
    // The server accepts in arrival order: these take every slot.
    let mut held: Vec<File> = (0..CAP).map(|_| open()).collect();
    for i in 0..3 {
        match path_exists(open(), existing.clone(), PATIENCE) {
            Some(Err(_)) => {}
            other => panic!("connection {} over the cap: {other:?}", CAP + i),
        }
    }
    let log = p.log_text();
    assert!(
        log.contains("connection limit reached") && log.contains("limit=4"),
        "{log}"
    );
    // A connection holding a slot is served; once it ends, a new one is.
    let first = held.remove(0);
    assert!(matches!(
        path_exists(first, existing.clone(), PATIENCE),
        Some(Ok(true))
    ));
    let deadline = Instant::now() + PATIENCE;
    loop {
        match path_exists(open(), existing.clone(), PATIENCE) {
            Some(Ok(true)) => break,
            Some(Err(e)) if Instant::now() < deadline => {
                eprintln!("not yet served again: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
            other => panic!("not served again: {other:?}"),
        }
    }
    drop(held);
    assert!(!p.log_text().contains("panicked"));
}
