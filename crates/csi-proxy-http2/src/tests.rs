//! Tests of the connection state machine through the raw client, over an
//! in-memory loopback (no sockets, no runtime).

use super::client::{RawClient, Response, Shape};
use super::conn::{Connection, Limits, Request};
use super::frame::{self, ErrorCode};
use crate::service::Reply;
use proptest::prelude::*;
use std::io::{self, Read, Write};
use tonic::Code;

/// The server side of the loopback: answers `/echo` with the request,
/// `/fail` with NotFound, `/big` with `n` bytes, anything else Unimplemented.
fn handle(req: &Request) -> Reply {
    match req.path.as_str() {
        "/t.S/Echo" => Reply::ok(req.message.clone()),
        "/t.S/Fail" => Reply::error(Code::NotFound, "no such disk: 7 \u{e9}%"),
        "/t.S/Big" => Reply::ok(vec![7; 100_000]),
        p => Reply::error(Code::Unimplemented, format!("unknown method {p}")),
    }
}

struct Loopback {
    conn: Connection,
    to_server: Vec<u8>,
    from_server: Vec<u8>,
    /// Answer requests (false: leave them pending).
    answer: bool,
    pending: Vec<Request>,
    error: Option<frame::ConnError>,
}

impl Loopback {
    fn new(limits: Limits) -> Self {
        Loopback {
            conn: Connection::new(limits),
            to_server: Vec::new(),
            from_server: Vec::new(),
            answer: true,
            pending: Vec::new(),
            error: None,
        }
    }

    fn pump(&mut self) {
        match self.conn.receive(&self.to_server) {
            Ok(used) => {
                self.to_server.drain(..used);
            }
            Err(e) => {
                self.to_server.clear();
                self.error = Some(e);
            }
        }
        while let Some(req) = self.conn.next_request() {
            if self.answer {
                let reply = handle(&req);
                self.conn.respond(req.stream, &reply);
            } else {
                self.pending.push(req);
            }
        }
        self.from_server.extend(self.conn.output().take());
    }
}

impl Write for Loopback {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.to_server.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Read for Loopback {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.from_server.is_empty() {
            self.pump();
        }
        let n = buf.len().min(self.from_server.len());
        buf[..n].copy_from_slice(&self.from_server[..n]);
        self.from_server.drain(..n);
        Ok(n)
    }
}

fn client(shape: Shape) -> RawClient<Loopback> {
    RawClient::new(Loopback::new(Limits::default()), shape).unwrap()
}

fn ok(resp: &Response, body: &[u8]) {
    assert_eq!(resp.http_status, 200, "{resp:?}");
    assert_eq!(resp.grpc_status, Some(0), "{resp:?}");
    assert_eq!(resp.message.as_deref(), Some(body), "{resp:?}");
}

/// Every `:authority` a real client sends.
const AUTHORITIES: [Option<&[u8]>; 7] = [
    None,
    Some(b"localhost"),
    Some(br"\\.\pipe\csi-proxy-disk-v1"),
    Some(br"\\.\\pipe\\csi-proxy-disk-v1"),
    Some(b"%5C%5C.%5Cpipe%5Ccsi-proxy-disk-v1"),
    Some(b"/run/csi-proxy/csi-proxy-disk-v1.sock"),
    Some(b"unix:///run/csi-proxy/csi-proxy-disk-v1.sock"),
];

#[test]
fn every_authority_form_works_on_repeated_requests() {
    for authority in AUTHORITIES {
        let mut c = client(Shape::default());
        for i in 0..5u8 {
            let resp = c.call("/t.S/Echo", authority, &[i; 3]).unwrap();
            ok(&resp, &[i; 3]);
        }
        // The later requests referred to the dynamic table.
        assert!(!c.get_ref().conn.is_done());
    }
}

#[test]
fn padding_priority_and_continuation_frames() {
    let shapes = [
        Shape {
            padding: Some(7),
            ..Shape::default()
        },
        Shape {
            priority: true,
            ..Shape::default()
        },
        Shape {
            fragment: Some(3),
            ..Shape::default()
        },
        Shape {
            padding: Some(255),
            priority: true,
            fragment: Some(1),
            no_indexing: false,
        },
        Shape {
            no_indexing: true,
            ..Shape::default()
        },
    ];
    for shape in shapes {
        let mut c = client(shape.clone());
        for authority in AUTHORITIES {
            let resp = c.call("/t.S/Echo", authority, b"hello").unwrap();
            ok(&resp, b"hello");
        }
    }
}

#[test]
fn large_header_blocks_span_continuations() {
    let mut c = client(Shape {
        fragment: Some(16_000),
        ..Shape::default()
    });
    let big = vec![b'x'; 40_000];
    for _ in 0..2 {
        let block = c.request_block("/t.S/Echo", Some(b"localhost"), &[(b"x-big", &big)]);
        assert!(block.len() > 40_000 || block.len() < 100);
        ok(&c.call_with_block(&block, b"m").unwrap(), b"m");
    }
    // Above the limit: the connection fails cleanly.
    let huge = vec![b'y'; 70_000];
    let block = c.request_block("/t.S/Echo", None, &[(b"x-huge", &huge)]);
    let err = c.call_with_block(&block, b"m").unwrap_err();
    assert!(err.to_string().contains("GOAWAY code 11"), "{err}");
}

#[test]
fn dynamic_table_size_updates_are_honoured() {
    let mut c = client(Shape::default());
    ok(&c.call("/t.S/Echo", Some(b"a"), b"1").unwrap(), b"1");
    // A block that first shrinks the table to 0 (evicting everything), then
    // restores 4096, then carries literal fields only.
    let mut block = vec![0x20, 0x3f, 0xe1, 0x1f];
    let mut fresh = RawClient::new(Loopback::new(Limits::default()), Shape::default()).unwrap();
    block.extend(fresh.request_block("/t.S/Echo", Some(b"b"), &[]));
    ok(&c.call_with_block(&block, b"2").unwrap(), b"2");
    // A size above what we allow is a compression error.
    let mut bad = vec![0x3f, 0xe1, 0x3f];
    bad.extend(fresh.request_block("/t.S/Echo", None, &[]));
    let err = c.call_with_block(&bad, b"3").unwrap_err();
    assert!(err.to_string().contains("GOAWAY code 9"), "{err}");
}

#[test]
fn errors_are_trailers_only_responses() {
    let mut c = client(Shape::default());
    let resp = c.call("/t.S/Fail", Some(b"x"), b"").unwrap();
    assert_eq!(resp.grpc_status, Some(Code::NotFound as i32));
    assert_eq!(resp.grpc_message, "no such disk: 7 \u{e9}%");
    assert_eq!(resp.message, None);
    ok(&c.call("/t.S/Echo", None, b"after").unwrap(), b"after");
}

#[test]
fn large_responses_are_split_into_frames() {
    let mut c = client(Shape::default());
    let resp = c.call("/t.S/Big", None, b"").unwrap();
    ok(&resp, &[7; 100_000]);
    let data_frames = c.received.iter().filter(|&&k| k == frame::DATA).count();
    assert!(data_frames >= 7, "{data_frames}");
}

#[test]
fn requests_that_are_not_grpc() {
    let mut c = client(Shape::default());
    // Same fields, but GET.
    let mut get = RawClient::new(Loopback::new(Limits::default()), Shape::default()).unwrap();
    let blk = block(b"GET", b"/t.S/Echo", &[GRPC]);
    assert_eq!(get.call_with_block(&blk, b"").unwrap().http_status, 405);
    let blk = block(
        b"POST",
        b"/t.S/Echo",
        &[(b"content-type", b"application/json")],
    );
    assert_eq!(get.call_with_block(&blk, b"").unwrap().http_status, 415);
    let blk = block(
        b"POST",
        b"t.S/Echo",
        &[(b"content-type", b"application/grpc+proto")],
    );
    let resp = get.call_with_block(&blk, b"").unwrap();
    assert_eq!(resp.grpc_status, Some(Code::Unimplemented as i32));
    let timeout = c.request_block("/t.S/Echo", None, &[(b"grpc-timeout", b"soon")]);
    let resp = c.call_with_block(&timeout, b"").unwrap();
    assert_eq!(resp.grpc_status, Some(Code::InvalidArgument as i32));
    ok(&c.call("/t.S/Echo", None, b"ok").unwrap(), b"ok");
}

/// Raw frames on a connection past its preface.
fn open_conn(limits: Limits) -> Connection {
    let mut conn = Connection::new(limits);
    let mut start = frame::PREFACE.to_vec();
    frame::put_settings(&mut start, &[]);
    assert_eq!(conn.receive(&start).unwrap(), start.len());
    conn.output().clear();
    conn
}

/// A literal-only request header block: `:method`, `:scheme`, `:path`,
/// then `extra`.
fn block(method: &[u8], path: &[u8], extra: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut blk = Vec::new();
    super::hpack::put_field(&mut blk, b":method", method);
    super::hpack::put_field(&mut blk, b":scheme", b"http");
    super::hpack::put_field(&mut blk, b":path", path);
    for (n, v) in extra {
        super::hpack::put_field(&mut blk, n, v);
    }
    blk
}

const GRPC: (&[u8], &[u8]) = (b"content-type", b"application/grpc");

fn request_frames(id: u32, body: &[u8], end: bool) -> Vec<u8> {
    let blk = block(b"POST", b"/t.S/Echo", &[GRPC]);
    let mut out = Vec::new();
    frame::put_frame(&mut out, frame::HEADERS, frame::END_HEADERS, id, &blk);
    let flags = if end { frame::END_STREAM } else { 0 };
    frame::put_frame(&mut out, frame::DATA, flags, id, body);
    out
}

fn framed(msg: &[u8]) -> Vec<u8> {
    let mut v = vec![0];
    v.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    v.extend_from_slice(msg);
    v
}

/// The frames (type, flags, stream) in `bytes`.
fn frames(bytes: &[u8]) -> Vec<(u8, u8, u32)> {
    let mut rest = bytes;
    let mut v = Vec::new();
    while let Some((h, _, used)) = frame::split(rest, frame::MAX_MAX_FRAME_SIZE).unwrap() {
        v.push((h.kind, h.flags, h.stream));
        rest = &rest[used..];
    }
    assert!(rest.is_empty());
    v
}

#[test]
fn malformed_messages_get_grpc_errors() {
    let mut conn = open_conn(Limits::default());
    let mut two = framed(b"a");
    two.extend(framed(b"b"));
    let mut compressed = framed(b"a");
    compressed[0] = 1;
    for (id, body) in [
        (1, two),
        (3, compressed),
        (5, vec![0, 0]),
        (7, framed(b"ok")),
    ] {
        conn.receive(&request_frames(id, &body, true)).unwrap();
    }
    let reqs: Vec<u32> = std::iter::from_fn(|| conn.next_request())
        .map(|r| r.stream)
        .collect();
    assert_eq!(reqs, [7]);
    let out = frames(&conn.output().take());
    // Three trailers-only answers.
    assert_eq!(
        out,
        [
            (frame::HEADERS, frame::END_STREAM | frame::END_HEADERS, 1),
            (frame::HEADERS, frame::END_STREAM | frame::END_HEADERS, 3),
            (frame::HEADERS, frame::END_STREAM | frame::END_HEADERS, 5),
        ]
    );
}

#[test]
fn oversized_requests_are_refused_without_waiting_for_them() {
    let limits = Limits {
        max_request: 10,
        ..Limits::default()
    };
    let mut conn = open_conn(limits);
    conn.receive(&request_frames(1, &framed(&[1; 20]), false))
        .unwrap();
    let out = frames(&conn.output().take());
    assert_eq!(
        out,
        [
            (frame::HEADERS, frame::END_STREAM | frame::END_HEADERS, 1),
            (frame::RST_STREAM, 0, 1)
        ]
    );
    // Late DATA of that stream is ignored.
    let mut more = Vec::new();
    frame::put_frame(&mut more, frame::DATA, frame::END_STREAM, 1, b"zz");
    conn.receive(&more).unwrap();
    assert!(conn.next_request().is_none());
    assert!(!conn.is_done());
}

#[test]
fn flow_control_holds_replies_until_the_window_opens() {
    let mut conn = Connection::new(Limits::default());
    let mut start = frame::PREFACE.to_vec();
    frame::put_settings(&mut start, &[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 10)]);
    conn.receive(&start).unwrap();
    conn.output().clear();
    conn.receive(&request_frames(1, &framed(b"x"), true))
        .unwrap();
    let req = conn.next_request().unwrap();
    conn.respond(req.stream, &Reply::ok(vec![9; 30]));
    let out = frames(&conn.output().take());
    assert_eq!(
        out,
        [(frame::HEADERS, frame::END_HEADERS, 1), (frame::DATA, 0, 1)]
    );
    let mut wu = Vec::new();
    frame::put_window_update(&mut wu, 1, 20);
    conn.receive(&wu).unwrap();
    assert_eq!(frames(&conn.output().take()), [(frame::DATA, 0, 1)]);
    let mut wu = Vec::new();
    frame::put_window_update(&mut wu, 1, 100);
    conn.receive(&wu).unwrap();
    assert_eq!(
        frames(&conn.output().take()),
        [
            (frame::DATA, 0, 1),
            (frame::HEADERS, frame::END_STREAM | frame::END_HEADERS, 1)
        ]
    );
    assert_eq!(conn.open_streams(), 0);
    // Changing the initial window shifts open streams (and can go negative).
    conn.receive(&request_frames(3, &framed(b"x"), true))
        .unwrap();
    let req = conn.next_request().unwrap();
    let mut s = Vec::new();
    frame::put_settings(&mut s, &[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 0)]);
    conn.receive(&s).unwrap();
    conn.respond(req.stream, &Reply::ok(vec![1; 3]));
    let out = frames(&conn.output().take());
    assert_eq!(
        out,
        [
            (frame::SETTINGS, frame::ACK, 0),
            (frame::HEADERS, frame::END_HEADERS, 3)
        ]
    );
    let mut s = Vec::new();
    frame::put_settings(&mut s, &[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 100)]);
    conn.receive(&s).unwrap();
    let out = frames(&conn.output().take());
    assert_eq!(out.len(), 3, "{out:?}");
}

#[test]
fn streams_beyond_the_limit_are_refused_and_goaway_drains() {
    let limits = Limits {
        max_streams: 2,
        ..Limits::default()
    };
    let mut conn = open_conn(limits);
    for id in [1, 3, 5] {
        conn.receive(&request_frames(id, &framed(b"x"), true))
            .unwrap();
    }
    assert_eq!(frames(&conn.output().take()), [(frame::RST_STREAM, 0, 5)]);
    let reqs: Vec<u32> = std::iter::from_fn(|| conn.next_request())
        .map(|r| r.stream)
        .collect();
    assert_eq!(reqs, [1, 3]);
    conn.go_away();
    assert!(!conn.is_done());
    conn.receive(&request_frames(7, &framed(b"x"), true))
        .unwrap();
    assert!(conn.next_request().is_none());
    conn.respond(1, &Reply::ok(vec![]));
    // The client resets stream 3: it still counts until its handler is
    // done, then nothing is left and nothing is sent for it.
    let mut rst = Vec::new();
    frame::put_rst(&mut rst, 3, ErrorCode::Cancel);
    conn.receive(&rst).unwrap();
    assert_eq!(conn.open_streams(), 1);
    assert!(!conn.is_done());
    conn.respond(3, &Reply::ok(vec![1]));
    assert!(conn.is_done());
    let out = frames(&conn.output().take());
    assert_eq!(out[0], (frame::GOAWAY, 0, 0));
    assert_eq!(out[1], (frame::RST_STREAM, 0, 7));
    assert_eq!(out.len(), 5, "{out:?}"); // + HEADERS, DATA, trailers of 1
}

#[test]
fn resets_do_not_free_slots_of_running_handlers() {
    let limits = Limits {
        max_streams: 2,
        ..Limits::default()
    };
    let mut conn = open_conn(limits);
    let mut id = 1;
    let mut started = Vec::new();
    // Open streams whose handlers start (as the driver starts them after
    // each read) and reset them much faster than the handlers finish.
    for _ in 0..10 {
        conn.receive(&request_frames(id, &framed(b"x"), true))
            .unwrap();
        started.extend(std::iter::from_fn(|| conn.next_request()).map(|r| r.stream));
        let mut rst = Vec::new();
        frame::put_rst(&mut rst, id, ErrorCode::Cancel);
        conn.receive(&rst).unwrap();
        id += 2;
    }
    assert_eq!(started, [1, 3], "only as many handlers as the limit");
    assert_eq!(conn.open_streams(), 2);
    conn.respond(1, &Reply::ok(vec![]));
    conn.respond(3, &Reply::ok(vec![]));
    assert_eq!(conn.open_streams(), 0);
    let out = frames(&conn.output().take());
    assert!(out.iter().all(|f| f.0 == frame::RST_STREAM), "{out:?}");
}

#[test]
fn requests_reset_before_their_handler_starts_never_run() {
    let mut conn = open_conn(Limits::default());
    let mut f = Vec::new();
    for id in [1, 3, 5] {
        f.extend(request_frames(id, &framed(b"x"), true));
        if id != 3 {
            frame::put_rst(&mut f, id, ErrorCode::Cancel);
        }
    }
    conn.receive(&f).unwrap();
    let started: Vec<u32> = std::iter::from_fn(|| conn.next_request())
        .map(|r| r.stream)
        .collect();
    assert_eq!(started, [3]);
    assert_eq!(conn.open_streams(), 1);
}

#[test]
fn pings_are_answered_and_protocol_errors_close_the_connection() {
    let mut conn = open_conn(Limits::default());
    let mut ping = Vec::new();
    frame::put_frame(&mut ping, frame::PING, 0, 0, b"12345678");
    conn.receive(&ping).unwrap();
    assert_eq!(
        frames(&conn.output().take()),
        [(frame::PING, frame::ACK, 0)]
    );
    let bad: Vec<(Vec<u8>, ErrorCode)> = vec![
        (
            {
                let mut f = Vec::new();
                frame::put_frame(&mut f, frame::DATA, 0, 0, b"x");
                f
            },
            ErrorCode::Protocol,
        ),
        (
            {
                let mut f = Vec::new();
                frame::put_frame(&mut f, frame::PING, 0, 0, b"123");
                f
            },
            ErrorCode::FrameSize,
        ),
        (
            {
                let mut f = Vec::new();
                frame::put_frame(&mut f, frame::HEADERS, 0, 1, &[0x80 | 70]);
                frame::put_frame(&mut f, frame::PING, 0, 0, b"12345678");
                f
            },
            ErrorCode::Protocol,
        ),
        (
            {
                let mut f = Vec::new();
                frame::put_frame(&mut f, frame::HEADERS, frame::END_HEADERS, 1, &[0x80 | 70]);
                f
            },
            ErrorCode::Compression,
        ),
        (
            {
                let mut f = Vec::new();
                frame::put_frame(&mut f, frame::HEADERS, frame::END_HEADERS, 2, &[0x82]);
                f
            },
            ErrorCode::Protocol,
        ),
        (
            {
                let mut f = Vec::new();
                frame::put_window_update(&mut f, 0, frame::MAX_WINDOW);
                f
            },
            ErrorCode::FlowControl,
        ),
        (
            {
                let mut f = Vec::new();
                frame::put_settings(&mut f, &[(frame::SETTINGS_MAX_FRAME_SIZE, 10)]);
                f
            },
            ErrorCode::Protocol,
        ),
        (vec![0, 0x40, 1, 0, 0, 0, 0, 0, 1], ErrorCode::FrameSize),
    ];
    for (input, code) in bad {
        let mut conn = open_conn(Limits::default());
        let err = conn.receive(&input).unwrap_err();
        assert_eq!(err.code, code, "{err}");
        assert!(conn.is_done());
        let out = frames(&conn.output().take());
        assert_eq!(out.last().unwrap().0, frame::GOAWAY);
    }
    // Not HTTP/2 at all: closed without a word.
    let mut conn = Connection::new(Limits::default());
    assert!(conn.receive(b"GET / HTTP/1.1\r\n").is_err());
    assert!(conn.is_done() && conn.output().is_empty());
}

fn request_stream(n: usize) -> Vec<u8> {
    let mut c = RawClient::new(io::Cursor::new(Vec::<u8>::new()), Shape::default()).unwrap();
    for i in 0..n {
        let block = c.request_block("/t.S/Echo", Some(br"\\.\pipe\x"), &[]);
        let id = 1 + 2 * i as u32;
        let mut f = Vec::new();
        frame::put_frame(&mut f, frame::HEADERS, frame::END_HEADERS, id, &block);
        frame::put_frame(
            &mut f,
            frame::DATA,
            frame::END_STREAM,
            id,
            &framed(&[i as u8]),
        );
        c.send_raw(&f).unwrap();
    }
    c.into_inner().into_inner()
}

proptest! {
    /// However the bytes are split into reads, the same requests come out.
    #[test]
    fn chunking_does_not_matter(cuts in proptest::collection::vec(1usize..40, 1..60)) {
        let bytes = request_stream(4);
        let mut conn = Connection::new(Limits::default());
        let mut pending = Vec::new();
        let mut pos = 0;
        let mut cut = cuts.iter().cycle();
        while pos < bytes.len() {
            let n = (*cut.next().unwrap()).min(bytes.len() - pos);
            pending.extend_from_slice(&bytes[pos..pos + n]);
            pos += n;
            let used = conn.receive(&pending).unwrap();
            pending.drain(..used);
        }
        prop_assert!(pending.is_empty());
        let got: Vec<Vec<u8>> = std::iter::from_fn(|| conn.next_request()).map(|r| r.message).collect();
        prop_assert_eq!(got, vec![vec![0], vec![1], vec![2], vec![3]]);
    }

    /// Garbage after a valid start never panics; the connection either
    /// goes on or fails with a GOAWAY.
    #[test]
    fn garbage_never_panics(tail in proptest::collection::vec(any::<u8>(), 0..400)) {
        let mut bytes = request_stream(1);
        bytes.extend_from_slice(&tail);
        let mut conn = Connection::new(Limits::default());
        let _ = conn.receive(&bytes);
        while let Some(r) = conn.next_request() {
            conn.respond(r.stream, &Reply::ok(r.message));
        }
    }
}
