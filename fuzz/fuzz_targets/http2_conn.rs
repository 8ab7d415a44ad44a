//! Fuzz the HTTP/2 connection state machine (frame parsing, HPACK decoding,
//! header checks, flow control, stream states, bounds): arbitrary bytes
//! after a valid preface, delivered in arbitrary chunks, taken in batches as
//! the driver takes them, with every request answered and, on request, the
//! clock moved past every receive deadline. It must never panic; every byte
//! it emits must be whole, well-formed frames; once it reports itself done
//! it must stay done; and once it is dropped it must hold no request bytes
//! against the shared budget.
#![no_main]

use csi_proxy_http2::frame;
use csi_proxy_http2::{BodyBudget, Code, Connection, Limits, Reply};
use libfuzzer_sys::fuzz_target;
use std::time::{Duration, Instant};

fuzz_target!(|data: &[u8]| {
    let Some((&ctl, body)) = data.split_first() else {
        return;
    };
    let limits = Limits {
        max_streams: 4,
        max_request: 256,
        max_header_block: 2048,
        max_continuations: 8,
        conn_window: 65_535 * 2,
        max_output: 4096,
        batch_frames: 16,
        batch_bytes: 4096,
        receive_timeout: Duration::from_secs(30),
    };
    let budget = BodyBudget::new(1024);
    let mut conn = Connection::with_budget(limits, budget.clone());
    let start = Instant::now();
    conn.advance_clock(start);
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
    for (i, piece) in input.chunks(chunk).enumerate() {
        pending.extend_from_slice(piece);
        let was_done = conn.is_done();
        loop {
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
            out.extend(conn.output().take());
            if !conn.paused() {
                break;
            }
        }
        if was_done {
            assert!(conn.is_done(), "a finished connection came back to life");
        }
        while let Some(req) = conn.next_request() {
            answered += 1;
            let reply = match answered % 3 {
                0 => Reply::error(code(answered), "nope \u{e9}%"),
                1 => Reply::ok(req.message.clone()),
                _ => Reply::ok(vec![0xab; 40_000]),
            };
            conn.respond(req.stream, &reply);
        }
        if ctl & 0x40 != 0 && answered > 0 {
            conn.go_away();
        }
        if ctl & 0x20 != 0 && i % 7 == 6 {
            conn.advance_clock(start + Duration::from_secs(3600));
            conn.expire_receives();
        }
        out.extend(conn.output().take());
    }
    // Everything emitted parses as frames of legal size.
    let mut rest = &out[..];
    while let Some((_, _, used)) =
        frame::split(rest, frame::MAX_MAX_FRAME_SIZE).expect("emitted frame too large")
    {
        rest = &rest[used..];
    }
    assert!(rest.is_empty(), "a partial frame was emitted");
    drop(conn);
    assert_eq!(budget.held(), 0, "request bytes still counted after the connection");
});

fn code(n: u32) -> Code {
    match n % 4 {
        0 => Code::NotFound,
        1 => Code::Internal,
        2 => Code::InvalidArgument,
        _ => Code::PermissionDenied,
    }
}
