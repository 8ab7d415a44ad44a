//! Fuzz the HTTP/2 connection state machine (frame parsing, HPACK decoding,
//! flow control, stream states): arbitrary bytes after a valid preface,
//! delivered in arbitrary chunks, with every request answered. It must
//! never panic, every byte it emits must be whole, well-formed frames, and
//! once it reports itself done it must stay done.
#![no_main]

use csi_proxy_server::dispatch::Reply;
use csi_proxy_server::http2::frame;
use csi_proxy_server::http2::{Connection, Limits};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&ctl, body)) = data.split_first() else {
        return;
    };
    let limits = Limits {
        max_streams: 4,
        max_request: 256,
        max_header_block: 2048,
        conn_window: 65_535 * 2,
    };
    let mut conn = Connection::new(limits);
    // Usually a valid start, so the fuzzer spends its time on frames.
    let mut input = Vec::new();
    if ctl & 0x80 == 0 {
        input.extend_from_slice(frame::PREFACE);
        frame::put_settings(&mut input, &[]);
    }
    input.extend_from_slice(body);
    let chunk = usize::from(ctl & 0x0f) + 1;
    let mut pending: Vec<u8> = Vec::new();
    let mut out: Vec<u8> = Vec::new();
    let mut answered = 0u32;
    for piece in input.chunks(chunk) {
        pending.extend_from_slice(piece);
        let was_done = conn.is_done();
        match conn.receive(&pending) {
            Ok(used) => {
                assert!(used <= pending.len());
                pending.drain(..used);
            }
            Err(_) => {
                pending.clear();
                assert!(conn.is_done(), "an error must end the connection");
            }
        }
        if was_done {
            assert!(conn.is_done(), "a finished connection came back to life");
        }
        while let Some(req) = conn.next_request() {
            answered += 1;
            let reply = match answered % 3 {
                0 => Reply::error(tonic_code(answered), "nope \u{e9}%"),
                1 => Reply::ok(req.message.clone()),
                _ => Reply::ok(vec![0xab; 40_000]),
            };
            conn.respond(req.stream, &reply);
        }
        if ctl & 0x40 != 0 && answered > 0 {
            conn.go_away();
        }
        out.append(conn.output());
    }
    // Everything emitted parses as frames of legal size.
    let mut rest = &out[..];
    while let Some((_, _, used)) =
        frame::split(rest, frame::MAX_MAX_FRAME_SIZE).expect("emitted frame too large")
    {
        rest = &rest[used..];
    }
    assert!(rest.is_empty(), "a partial frame was emitted");
});

fn tonic_code(n: u32) -> csi_proxy_server::dispatch::Code {
    match n % 4 {
        0 => csi_proxy_server::dispatch::Code::NotFound,
        1 => csi_proxy_server::dispatch::Code::Internal,
        2 => csi_proxy_server::dispatch::Code::InvalidArgument,
        _ => csi_proxy_server::dispatch::Code::PermissionDenied,
    }
}
