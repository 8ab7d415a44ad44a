//! Tests of the connection state machine without sockets or a runtime:
//! through the raw client over an in-memory loopback (`exchange`), with raw
//! frames (`frames`), and of its bounds (`bounds`).

mod bounds;
mod exchange;
mod frames;

use crate::client::{RawClient, Response, Shape};
use crate::conn::{Connection, Limits, Request};
use crate::frame::{self, ErrorCode};
use crate::service::Reply;
use std::io::{self, Read, Write};
use tonic::Code;

/// The server side of the loopback: answers `/echo` with the request,
/// `/fail` with NotFound, `/big` with `n` bytes, anything else Unimplemented.
pub(super) fn handle(req: &Request) -> Reply {
    match req.path.as_str() {
        "/t.S/Echo" => Reply::ok(req.message.clone()),
        "/t.S/Fail" => Reply::error(Code::NotFound, "no such disk: 7 \u{e9}%"),
        "/t.S/Big" => Reply::ok(vec![7; 100_000]),
        p => Reply::error(Code::Unimplemented, format!("unknown method {p}")),
    }
}

pub(super) struct Loopback {
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
        match self.conn.take_all(&self.to_server) {
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

pub(super) fn client(shape: Shape) -> RawClient<Loopback> {
    RawClient::new(Loopback::new(Limits::default()), shape).unwrap()
}

pub(super) fn ok(resp: &Response, body: &[u8]) {
    assert_eq!(resp.http_status, 200, "{resp:?}");
    assert_eq!(resp.grpc_status, Some(0), "{resp:?}");
    assert_eq!(resp.message.as_deref(), Some(body), "{resp:?}");
}

/// Every `:authority` a real client sends.
pub(super) const AUTHORITIES: [Option<&[u8]>; 7] = [
    None,
    Some(b"localhost"),
    Some(br"\\.\pipe\csi-proxy-disk-v1"),
    Some(br"\\.\\pipe\\csi-proxy-disk-v1"),
    Some(b"%5C%5C.%5Cpipe%5Ccsi-proxy-disk-v1"),
    Some(b"/run/csi-proxy/csi-proxy-disk-v1.sock"),
    Some(b"unix:///run/csi-proxy/csi-proxy-disk-v1.sock"),
];

/// Raw frames on a connection past its preface.
pub(super) fn open_conn(limits: Limits) -> Connection {
    let mut conn = Connection::new(limits);
    let mut start = frame::PREFACE.to_vec();
    frame::put_settings(&mut start, &[]);
    assert_eq!(conn.take_all(&start).unwrap(), start.len());
    conn.output().clear();
    conn
}

/// A literal-only request header block: `:method`, `:scheme`, `:path`,
/// then `extra`.
pub(super) fn block(method: &[u8], path: &[u8], extra: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut blk = Vec::new();
    crate::hpack::put_field(&mut blk, b":method", method);
    crate::hpack::put_field(&mut blk, b":scheme", b"http");
    crate::hpack::put_field(&mut blk, b":path", path);
    for (n, v) in extra {
        crate::hpack::put_field(&mut blk, n, v);
    }
    blk
}

pub(super) const GRPC: (&[u8], &[u8]) = (b"content-type", b"application/grpc");

pub(super) fn request_frames(id: u32, body: &[u8], end: bool) -> Vec<u8> {
    let blk = block(b"POST", b"/t.S/Echo", &[GRPC]);
    let mut out = Vec::new();
    frame::put_frame(&mut out, frame::HEADERS, frame::END_HEADERS, id, &blk);
    let flags = if end { frame::END_STREAM } else { 0 };
    frame::put_frame(&mut out, frame::DATA, flags, id, body);
    out
}

pub(super) fn framed(msg: &[u8]) -> Vec<u8> {
    let mut v = vec![0];
    v.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    v.extend_from_slice(msg);
    v
}

/// The frames (type, flags, stream) in `bytes`.
pub(super) fn frames(bytes: &[u8]) -> Vec<(u8, u8, u32)> {
    let mut rest = bytes;
    let mut v = Vec::new();
    while let Some((h, _, used)) = frame::split(rest, frame::MAX_MAX_FRAME_SIZE).unwrap() {
        v.push((h.kind, h.flags, h.stream));
        rest = &rest[used..];
    }
    assert!(rest.is_empty());
    v
}

/// Take bytes in as the driver does: batch after batch while whole frames
/// are left.
pub(super) trait TakeAll {
    fn take_all(&mut self, bytes: &[u8]) -> Result<usize, crate::frame::ConnError>;
}

impl TakeAll for Connection {
    fn take_all(&mut self, bytes: &[u8]) -> Result<usize, crate::frame::ConnError> {
        let mut used = self.receive(bytes)?;
        while self.paused() {
            used += self.receive(&bytes[used..])?;
        }
        Ok(used)
    }
}
