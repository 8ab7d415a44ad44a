//! The bounds of one connection: request bytes held only within the
//! connection window (given back as bodies are consumed or discarded) and
//! within the process-wide budget, work per `receive`, output cap,
//! CONTINUATION frames, and the memory of closed streams.

use super::*;
use crate::budget::BodyBudget;
use crate::frame::ConnError;

/// Connection-level WINDOW_UPDATE increments in `bytes`.
fn conn_updates(bytes: &[u8]) -> u64 {
    let mut rest = bytes;
    let mut total = 0;
    while let Some((h, p, used)) = frame::split(rest, frame::MAX_MAX_FRAME_SIZE).unwrap() {
        if h.kind == frame::WINDOW_UPDATE && h.stream == 0 {
            total += u64::from(frame::u31(p));
        }
        rest = &rest[used..];
    }
    total
}

/// HEADERS for a request on `id`, then `body` in DATA frames of at most
/// 16 KiB, the last one ending the stream if `end`.
fn request_in_frames(id: u32, body: &[u8], end: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let blk = block(b"POST", b"/t.S/Echo", &[GRPC]);
    frame::put_frame(&mut out, frame::HEADERS, frame::END_HEADERS, id, &blk);
    let chunks: Vec<&[u8]> = body.chunks(16_000).collect();
    for (i, c) in chunks.iter().enumerate() {
        let last = i + 1 == chunks.len();
        let flags = if last && end { frame::END_STREAM } else { 0 };
        frame::put_frame(&mut out, frame::DATA, flags, id, c);
    }
    out
}

fn small_window() -> Limits {
    Limits {
        conn_window: 100_000,
        max_request: 60_000,
        ..Limits::default()
    }
}

#[test]
fn the_connection_window_bounds_what_a_client_can_make_us_hold() {
    let mut conn = open_conn(small_window());
    // The server announced 100_000 bytes of connection window.
    let mut part = framed(&[1; 40_000]);
    part.truncate(40_000);
    conn.take_all(&request_in_frames(1, &part, false)).unwrap();
    conn.take_all(&request_in_frames(3, &part, false)).unwrap();
    // Nothing is given back while the bodies are held...
    assert_eq!(conn_updates(&conn.output().take()), 0);
    // ...so a third body cannot fit: the client overran the window.
    let err = conn
        .take_all(&request_in_frames(5, &part, false))
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::FlowControl, "{err}");
}

#[test]
fn the_window_comes_back_as_bodies_are_consumed_or_discarded() {
    let mut conn = open_conn(small_window());
    let body = framed(&[1; 39_995]);
    assert_eq!(body.len(), 40_000);
    conn.take_all(&request_in_frames(1, &body[..30_000], false))
        .unwrap();
    conn.take_all(&request_in_frames(3, &body[..30_000], false))
        .unwrap();
    assert_eq!(conn_updates(&conn.output().take()), 0);
    // Stream 1 completes: its 40_000 bytes are consumed and given back.
    let mut rest = Vec::new();
    frame::put_frame(
        &mut rest,
        frame::DATA,
        frame::END_STREAM,
        1,
        &body[30_000..],
    );
    conn.take_all(&rest).unwrap();
    assert_eq!(conn.next_request().unwrap().message.len(), 39_995);
    assert_eq!(conn_updates(&conn.output().take()), 40_000);
    conn.respond(1, &Reply::ok(vec![]));
    conn.output().clear();
    // The client resets stream 3: its bytes are discarded and given back.
    let mut rst = Vec::new();
    frame::put_rst(&mut rst, 3, ErrorCode::Cancel);
    conn.take_all(&rst).unwrap();
    assert_eq!(conn_updates(&conn.output().take()), 30_000);
    // DATA on closed streams is answered and given back at once.
    let mut late = Vec::new();
    for _ in 0..4 {
        frame::put_frame(&mut late, frame::DATA, 0, 1, &[0; 16_000]);
    }
    conn.take_all(&late).unwrap();
    let out = conn.output().take();
    assert_eq!(conn_updates(&out), 64_000);
    let rst: Vec<_> = frames(&out)
        .into_iter()
        .filter(|f| f.0 == frame::RST_STREAM)
        .collect();
    assert_eq!(rst, [(frame::RST_STREAM, 0, 1)], "one reset, then ignored");
    // A stalled body is answered at its deadline and given back too.
    conn.take_all(&request_in_frames(5, &body[..20_000], false))
        .unwrap();
    assert!(conn.next_receive_deadline().is_some());
    conn.advance_clock(std::time::Instant::now() + Limits::default().receive_timeout);
    conn.expire_receives();
    let out = conn.output().take();
    assert_eq!(conn_updates(&out), 20_000);
    assert_eq!(
        frames(&out)[..2],
        [
            (frame::HEADERS, frame::END_STREAM | frame::END_HEADERS, 5),
            (frame::RST_STREAM, 0, 5)
        ]
    );
    assert_eq!(conn.open_streams(), 0);
}

#[test]
fn held_bytes_count_against_the_shared_budget() {
    let budget = BodyBudget::new(50_000);
    let open = |budget: &BodyBudget| {
        let mut conn = Connection::with_budget(Limits::default(), budget.clone());
        let mut start = frame::PREFACE.to_vec();
        frame::put_settings(&mut start, &[]);
        conn.take_all(&start).unwrap();
        conn.output().clear();
        conn
    };
    let (mut a, mut b) = (open(&budget), open(&budget));
    let body = framed(&[2; 40_000]);
    a.take_all(&request_in_frames(1, &body[..40_000], false))
        .unwrap();
    assert_eq!(budget.held(), 40_000);
    // B cannot hold 20_000 more: answered RESOURCE_EXHAUSTED and reset.
    b.take_all(&request_in_frames(1, &body[..20_000], false))
        .unwrap();
    assert_eq!(
        frames(&b.output().take())[..2],
        [
            (frame::HEADERS, frame::END_STREAM | frame::END_HEADERS, 1),
            (frame::RST_STREAM, 0, 1)
        ]
    );
    assert_eq!(budget.held(), 40_000);
    // A whole message in one frame is never held: B still serves it.
    b.take_all(&request_frames(3, &framed(b"small"), true))
        .unwrap();
    assert_eq!(b.next_request().unwrap().message, b"small");
    // A's stream goes away (here: the connection): the budget is free.
    drop(a);
    assert_eq!(budget.held(), 0);
    b.take_all(&request_in_frames(5, &body[..20_000], false))
        .unwrap();
    assert_eq!(budget.held(), 20_000);
}

#[test]
fn a_receive_takes_a_batch_and_stops_at_the_output_cap() {
    let mut pings = Vec::new();
    for _ in 0..1000 {
        frame::put_frame(&mut pings, frame::PING, 0, 0, b"12345678");
    }
    let limits = Limits::default();
    let mut conn = open_conn(limits);
    let used = conn.receive(&pings).unwrap();
    assert_eq!(used, limits.batch_frames * 17, "one batch of frames");
    assert!(conn.paused());
    let mut conn = open_conn(Limits {
        max_output: 1000,
        batch_frames: 1000,
        ..limits
    });
    let mut pos = 0;
    let mut rounds = 0;
    while pos < pings.len() {
        pos += conn.receive(&pings[pos..]).unwrap();
        assert!(conn.output().len() < 1000 + 17);
        assert_eq!(conn.paused(), pos < pings.len());
        conn.output().clear();
        rounds += 1;
    }
    assert_eq!(rounds, 1000_usize.div_ceil(59));
    // A partial frame left over is not a pause.
    conn.receive(&pings[..20]).unwrap();
    assert!(!conn.paused());
}

#[test]
fn continuation_frames_per_block_are_capped() {
    let limits = Limits {
        max_continuations: 3,
        ..Limits::default()
    };
    let send = |n: usize| -> Result<Vec<(u8, u8, u32)>, ConnError> {
        let mut conn = open_conn(limits);
        let blk = block(b"POST", b"/t.S/Echo", &[GRPC]);
        let mut f = Vec::new();
        frame::put_frame(&mut f, frame::HEADERS, 0, 1, &blk);
        for i in 0..n {
            let flags = if i + 1 == n { frame::END_HEADERS } else { 0 };
            frame::put_frame(&mut f, frame::CONTINUATION, flags, 1, &[]);
        }
        conn.take_all(&f)?;
        Ok(frames(&conn.output().take()))
    };
    assert!(send(3).is_ok());
    assert_eq!(send(4).unwrap_err().code, ErrorCode::EnhanceYourCalm);
}

#[test]
fn closed_streams_are_remembered_then_forgotten() {
    let limits = Limits {
        max_streams: 2,
        ..Limits::default()
    };
    let mut conn = open_conn(limits);
    // Six streams opened and answered; the memory holds the last four.
    for id in [1, 3, 5, 7, 9, 11] {
        conn.take_all(&request_frames(id, &framed(b"x"), true))
            .unwrap();
        let req = conn.next_request().unwrap();
        conn.respond(req.stream, &Reply::ok(vec![]));
    }
    conn.output().clear();
    let headers = |id| {
        let mut f = Vec::new();
        let blk = block(b"POST", b"/t.S/Echo", &[GRPC]);
        frame::put_frame(&mut f, frame::HEADERS, frame::END_HEADERS, id, &blk);
        f
    };
    let mut recent = conn;
    assert_eq!(
        recent.take_all(&headers(11)).unwrap_err().code,
        ErrorCode::StreamClosed
    );
    let mut conn = open_conn(limits);
    for id in [1, 3, 5, 7, 9, 11] {
        conn.take_all(&request_frames(id, &framed(b"x"), true))
            .unwrap();
        let req = conn.next_request().unwrap();
        conn.respond(req.stream, &Reply::ok(vec![]));
    }
    assert_eq!(
        conn.take_all(&headers(1)).unwrap_err().code,
        ErrorCode::Protocol
    );
}
