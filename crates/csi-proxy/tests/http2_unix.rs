//! Raw HTTP/2 against the real binary over Unix sockets: every `:authority`
//! form real clients send, repeated requests on one connection, legal but
//! unusual framing, garbage, connections that never send the preface, the
//! conformance cases h2spec found (`csi_proxy_http2::conformance`), idle
//! connections after the preface, and stalled request bodies.
#![cfg(unix)]

mod common;
mod raw;

use common::Proxy;
use csi_proxy_http2::client::{RawClient, Shape};
use csi_proxy_http2::{conformance, frame};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

const FILESYSTEM_VERSIONS: [&str; 5] = ["v1alpha1", "v1beta1", "v1beta2", "v1", "v2alpha1"];

fn paths(p: &Proxy) -> (String, String, String) {
    let existing = p.kubelet.join("pods/uid/volumes");
    std::fs::create_dir_all(&existing).unwrap();
    (
        existing.display().to_string(),
        p.kubelet.join("pods/uid/missing").display().to_string(),
        p.outside.join("sentinel").display().to_string(),
    )
}

#[test]
fn every_authority_form_on_every_filesystem_version() {
    let p = Proxy::start(&[]);
    let (existing, missing, outside) = paths(&p);
    let before = p.snapshot();
    for v in FILESYSTEM_VERSIONS {
        let endpoint = format!("csi-proxy-filesystem-{v}");
        let socket = p.socket(&format!("filesystem-{v}"));
        let service = format!("{v}.Filesystem");
        for authority in raw::authority_forms(&endpoint, &socket.display().to_string()) {
            let s = UnixStream::connect(&socket).unwrap();
            let mut c = RawClient::new(s, Shape::default()).unwrap();
            raw::exercise(
                &mut c,
                &service,
                authority.as_deref(),
                &existing,
                &missing,
                &outside,
                5,
            );
        }
    }
    assert_eq!(p.snapshot(), before, "read-only calls changed the host");
}

#[test]
fn unusual_framing_and_mixed_authorities_on_one_connection() {
    let p = Proxy::start(&[]);
    let (existing, missing, outside) = paths(&p);
    let endpoint = "csi-proxy-filesystem-v1";
    let socket = p.socket("filesystem-v1");
    for shape in raw::shapes() {
        let s = UnixStream::connect(&socket).unwrap();
        let mut c = RawClient::new(s, shape.clone()).unwrap();
        // Alternate the forms on one connection: each new value is added to
        // the dynamic table, each repeat refers to it.
        for _ in 0..3 {
            for authority in raw::authority_forms(endpoint, &socket.display().to_string()) {
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
    }
}

#[test]
fn conformance_cases_against_the_real_binary() {
    let p = Proxy::start(&["-api-groups=filesystem-v1"]);
    let (existing, _, _) = paths(&p);
    let socket = p.socket("filesystem-v1");
    let target = raw::path_exists_target(&existing);
    let failures = conformance::run_all(
        || {
            let s = UnixStream::connect(&socket).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            Box::new(s)
        },
        &target,
    );
    raw::assert_no_failures(&failures);
    assert!(!p.log().contains("panicked"));
}

#[test]
fn garbage_closes_only_its_own_connection() {
    let p = Proxy::start(&[]);
    let (existing, missing, outside) = paths(&p);
    let socket = p.socket("filesystem-v1");
    let mut good = RawClient::new(UnixStream::connect(&socket).unwrap(), Shape::default()).unwrap();
    raw::exercise(
        &mut good,
        "v1.Filesystem",
        None,
        &existing,
        &missing,
        &outside,
        1,
    );
    let inputs: [&[u8]; 4] = [
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        // Preface, SETTINGS, then a header block referring to index 99.
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0\0\0\x01\x01\x05\0\0\0\x01\xe3",
        // A frame longer than the maximum frame size.
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0\xff\xff\xff\0\0\0\0\0\x01",
        // DATA on stream 0.
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0\0\0\x01\0\0\0\0\0\0x",
    ];
    for input in inputs {
        let mut s = UnixStream::connect(&socket).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(input).unwrap();
        // The server closes the connection (after a GOAWAY where HTTP/2
        // was spoken).
        let mut all = Vec::new();
        s.read_to_end(&mut all)
            .expect("the server closes the connection");
        if input.starts_with(b"PRI") {
            let mut rest = &all[..];
            let mut kinds = Vec::new();
            while let Some((head, _, used)) = frame::split(rest, frame::MAX_MAX_FRAME_SIZE).unwrap()
            {
                kinds.push(head.kind);
                rest = &rest[used..];
            }
            assert_eq!(kinds.last(), Some(&frame::GOAWAY), "{kinds:?}");
        } else {
            assert!(all.is_empty(), "{all:?}");
        }
    }
    // The good connection and the server are unaffected.
    raw::exercise(
        &mut good,
        "v1.Filesystem",
        None,
        &existing,
        &missing,
        &outside,
        1,
    );
    assert!(!p.log().contains("panicked"));
}

#[test]
fn undecodable_requests_are_invalid_argument_on_every_filesystem_version() {
    let p = Proxy::start(&[]);
    let (existing, _, _) = paths(&p);
    let before = p.snapshot();
    for v in FILESYSTEM_VERSIONS {
        let socket = p.socket(&format!("filesystem-{v}"));
        let mut c =
            RawClient::new(UnixStream::connect(&socket).unwrap(), Shape::default()).unwrap();
        raw::undecodable_requests(&mut c, &format!("{v}.Filesystem"), &existing);
    }
    assert_eq!(p.snapshot(), before);
    assert!(!p.log().contains("panicked"));
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

#[test]
fn idle_connections_without_preface_cost_nothing_and_time_out() {
    let p = Proxy::start(&["-preface-timeout=2s"]);
    let pid = p.child.as_ref().unwrap().id();
    let (existing, missing, outside) = paths(&p);
    let socket = p.socket("filesystem-v1");
    // Settle: one full call so lazily opened descriptors exist.
    let mut c = RawClient::new(UnixStream::connect(&socket).unwrap(), Shape::default()).unwrap();
    raw::exercise(
        &mut c,
        "v1.Filesystem",
        None,
        &existing,
        &missing,
        &outside,
        1,
    );
    drop(c);
    std::thread::sleep(Duration::from_millis(200));
    let start_fds = open_fds(pid);
    let idle: Vec<UnixStream> = (0..300)
        .map(|_| UnixStream::connect(&socket).unwrap())
        .collect();
    // A client arriving after them is served at once.
    let t = Instant::now();
    let mut c = RawClient::new(UnixStream::connect(&socket).unwrap(), Shape::default()).unwrap();
    raw::exercise(
        &mut c,
        "v1.Filesystem",
        None,
        &existing,
        &missing,
        &outside,
        20,
    );
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    drop(c);
    // Past the preface timeout every idle connection was closed by the server.
    std::thread::sleep(Duration::from_millis(2500));
    for mut s in idle {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut b = [0u8; 1];
        assert_eq!(s.read(&mut b).unwrap(), 0, "idle connection still open");
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while open_fds(pid) != start_fds && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(open_fds(pid), start_fds, "descriptors leaked");
}
