//! The driver over real connected streams: call deadlines and the job
//! limit, the idle timeout, keepalive, stalled request bodies, and a client
//! that floods without reading.
#![cfg(unix)]

mod common;

use common::Server;
use csi_proxy_http2::client::{code_number, RawClient, Shape};
use csi_proxy_http2::frame::{self, ErrorCode};
use csi_proxy_http2::{Code, Limits, Options};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

fn echo(c: &mut RawClient<UnixStream>, msg: &[u8]) {
    let r = c.call("/t.S/Echo", None, msg).unwrap();
    assert_eq!(r.grpc_status, Some(0), "{r:?}");
    assert_eq!(r.message.as_deref(), Some(msg));
}

/// Read frames until the server closes; the kinds and GOAWAY codes seen.
/// (A close with our own frames still unread by the server may surface as
/// a reset after the data.)
fn read_to_close(s: &mut UnixStream) -> Vec<(u8, u32)> {
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => all.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("the server does not close the connection: {e}"),
        }
    }
    let mut seen = Vec::new();
    let mut rest = &all[..];
    while let Some((h, p, used)) = frame::split(rest, frame::MAX_MAX_FRAME_SIZE).unwrap() {
        let code = if h.kind == frame::GOAWAY {
            frame::u31(&p[4..8])
        } else {
            0
        };
        seen.push((h.kind, code));
        rest = &rest[used..];
    }
    seen
}

#[test]
fn deadlines_are_answered_and_abandoned_jobs_still_count() {
    let server = Server::new(Options {
        limits: Limits {
            max_streams: 2,
            ..Limits::default()
        },
        ..Options::default()
    });
    let mut c = RawClient::new(server.connect(), Shape::default()).unwrap();
    let call = |c: &mut RawClient<_>, path: &str, timeout: &[u8]| {
        let block = c.request_block(path, None, &[(b"grpc-timeout", timeout)]);
        let t = Instant::now();
        let r = c.call_with_block(&block, b"x").unwrap();
        (r.grpc_status, t.elapsed())
    };
    // Two calls give up after 100 ms; their jobs keep running.
    for _ in 0..2 {
        let (code, took) = call(&mut c, "/t.S/Slow", b"100m");
        assert_eq!(code, Some(Code::DeadlineExceeded as i32));
        assert!(took < Duration::from_millis(500), "{took:?}");
    }
    // A third blocking call is refused while both still run...
    let (code, _) = call(&mut c, "/t.S/Slow", b"5S");
    assert_eq!(code, Some(Code::Unavailable as i32));
    // ...inline calls still work...
    echo(&mut c, b"inline");
    // ...and once the jobs are done, blocking calls work again.
    std::thread::sleep(Duration::from_millis(700));
    let (code, took) = call(&mut c, "/t.S/Slow", b"5S");
    assert_eq!(code, Some(0));
    assert!(took >= Duration::from_millis(600), "{took:?}");
}

#[test]
fn idle_connections_are_sent_goaway_and_closed() {
    let server = Server::new(Options {
        idle_timeout: Duration::from_millis(300),
        ..Options::default()
    });
    // A call that runs longer than the idle timeout keeps the connection.
    let mut c = RawClient::new(server.connect(), Shape::default()).unwrap();
    echo(&mut c, b"1");
    let r = c.call("/t.S/Slow", None, b"").unwrap();
    assert_eq!(r.grpc_status, Some(0), "{r:?}");
    echo(&mut c, b"2");
    // Then nothing for longer than the timeout: GOAWAY NO_ERROR, close.
    let t = Instant::now();
    let seen = read_to_close(&mut c.into_inner());
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    assert_eq!(
        seen.last(),
        Some(&(frame::GOAWAY, code_number(ErrorCode::NoError)))
    );
    // A connection that only trickles bytes of a header block is idle too.
    let mut s = server.connect();
    let mut hello = frame::PREFACE.to_vec();
    frame::put_settings(&mut hello, &[]);
    frame::put_frame(&mut hello, frame::HEADERS, 0, 1, &[0x83]);
    s.write_all(&hello).unwrap();
    let mut trickle = s.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        for _ in 0..20 {
            std::thread::sleep(Duration::from_millis(50));
            let mut f = Vec::new();
            frame::put_frame(&mut f, frame::CONTINUATION, 0, 1, &[]);
            if trickle.write_all(&f).is_err() {
                break;
            }
        }
    });
    let seen = read_to_close(&mut s);
    assert_eq!(
        seen.last(),
        Some(&(frame::GOAWAY, code_number(ErrorCode::NoError)))
    );
    writer.join().unwrap();
}

#[test]
fn silent_clients_are_pinged_and_dropped() {
    let server = Server::new(Options {
        keepalive_time: Duration::from_millis(200),
        keepalive_timeout: Duration::from_millis(300),
        idle_timeout: Duration::ZERO,
        ..Options::default()
    });
    // A client that keeps talking keeps its connection, even if it reads
    // (and answers) a PING only with its next call.
    let mut c = RawClient::new(server.connect(), Shape::default()).unwrap();
    echo(&mut c, b"1");
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(350));
        echo(&mut c, b"2");
    }
    assert!(c.received.contains(&frame::PING), "no keepalive PING");
    // Silent for long: a PING arrives, nothing goes back, the server closes.
    let mut s = c.into_inner();
    let t = Instant::now();
    let seen = read_to_close(&mut s);
    assert!(seen.iter().any(|&(k, _)| k == frame::PING), "{seen:?}");
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_secs(3),
        "{took:?}"
    );
}

#[test]
fn stalled_request_bodies_are_answered_after_the_receive_timeout() {
    let server = Server::new(Options {
        limits: Limits {
            receive_timeout: Duration::from_millis(300),
            ..Limits::default()
        },
        ..Options::default()
    });
    let mut c = RawClient::new(server.connect(), Shape::default()).unwrap();
    echo(&mut c, b"warm");
    // Headers and the first 5 bytes of a 1000-byte message, then nothing.
    let block = c.request_block("/t.S/Echo", None, &[]);
    let id = c.reserve_stream();
    let mut f = Vec::new();
    frame::put_frame(&mut f, frame::HEADERS, frame::END_HEADERS, id, &block);
    frame::put_frame(&mut f, frame::DATA, 0, id, &[0, 0, 0, 0x03, 0xe8]);
    c.send_raw(&f).unwrap();
    let t = Instant::now();
    let r = c.response(id).unwrap();
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    assert_eq!(r.grpc_status, Some(Code::DeadlineExceeded as i32), "{r:?}");
    // The connection goes on.
    echo(&mut c, b"after");
}

#[test]
fn a_client_that_floods_without_reading_is_not_read_and_others_are_served() {
    let server = Server::new(Options::default());
    let flooder = server.connect();
    flooder.set_nonblocking(true).unwrap();
    let mut flooder = flooder;
    let mut ping = Vec::new();
    for _ in 0..4096 {
        frame::put_frame(&mut ping, frame::PING, 0, 0, b"12345678");
    }
    let mut hello = frame::PREFACE.to_vec();
    frame::put_settings(&mut hello, &[]);
    flooder.write_all(&hello).unwrap();
    // Write PINGs (each answered with a PING ACK nobody reads) until the
    // server stops taking them.
    let mut sent = 0usize;
    let start = Instant::now();
    let mut stalled_since = None;
    while start.elapsed() < Duration::from_secs(20) {
        // Whole frames only: a partial write continues where it stopped.
        let at = sent % ping.len();
        match flooder.write(&ping[at..]) {
            Ok(n) => {
                sent += n;
                stalled_since = None;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                let s = *stalled_since.get_or_insert_with(Instant::now);
                if s.elapsed() > Duration::from_millis(500) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert!(
        stalled_since.is_some(),
        "the server kept reading {sent} bytes of PINGs from a client that never reads"
    );
    // What it took is bounded by the output cap and the socket buffers
    // (PING and its ACK are the same size).
    assert!(sent < 8 << 20, "{sent} bytes taken in");
    // Meanwhile another client is served.
    let mut c = RawClient::new(server.connect(), Shape::default()).unwrap();
    for i in 0..100u8 {
        echo(&mut c, &[i]);
    }
    // Everything the server wrote to the flooder is whole PING ACKs.
    flooder.set_nonblocking(false).unwrap();
    flooder
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut got = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    while let Ok(n) = flooder.read(&mut buf) {
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    let mut rest = &got[..];
    let mut acks = 0;
    while let Some((h, _, used)) = frame::split(rest, frame::MAX_MAX_FRAME_SIZE).unwrap() {
        if h.kind == frame::PING {
            assert_eq!(h.flags, frame::ACK);
            acks += 1;
        }
        rest = &rest[used..];
    }
    assert!(
        acks > 0 && acks * 17 <= sent + 17,
        "{acks} acks for {sent} bytes"
    );
}

#[test]
fn a_finished_connection_whose_client_does_not_read_is_closed_after_the_linger() {
    let server = Server::new(Options {
        idle_timeout: Duration::from_millis(200),
        linger: Duration::from_millis(500),
        ..Options::default()
    });
    let mut s = server.connect();
    s.set_nonblocking(true).unwrap();
    let mut flood = frame::PREFACE.to_vec();
    frame::put_settings(&mut flood, &[]);
    for _ in 0..200_000 {
        frame::put_frame(&mut flood, frame::PING, 0, 0, b"12345678");
    }
    // PINGs until the server stops reading (its output waits for us).
    let mut sent = 0;
    let start = Instant::now();
    while sent < flood.len() && start.elapsed() < Duration::from_secs(10) {
        match s.write(&flood[sent..]) {
            Ok(n) => sent += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
                if start.elapsed() > Duration::from_secs(1) {
                    break;
                }
            }
            // Closed already (idle, then the linger).
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => break,
            Err(e) => panic!("{e}"),
        }
    }
    // Idle (no stream): GOAWAY is queued behind output nobody reads; after
    // the linger the server closes anyway.
    std::thread::sleep(Duration::from_secs(2));
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let seen = read_to_close(&mut s);
    // Closed with its output unsent: far fewer PING ACKs arrive than PINGs
    // were sent (a server still waiting would answer every one once we
    // read, then send its GOAWAY).
    let acks = seen.iter().filter(|&&(k, _)| k == frame::PING).count();
    assert!(
        acks * 17 + (128 << 10) < sent,
        "{acks} PING ACKs for {sent} bytes of PINGs"
    );
    assert!(
        !seen.iter().any(|&(k, _)| k == frame::GOAWAY),
        "the server waited for the client to read its GOAWAY"
    );
}
