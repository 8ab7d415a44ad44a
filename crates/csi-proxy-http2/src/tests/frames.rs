//! Raw frames into the state machine: message framing, limits, flow
//! control, stream limits and resets, protocol errors, chunking.

use super::*;
use crate::client::RawClient;
use proptest::prelude::*;

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
        conn.take_all(&request_frames(id, &body, true)).unwrap();
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
    conn.take_all(&request_frames(1, &framed(&[1; 20]), false))
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
    conn.take_all(&more).unwrap();
    assert!(conn.next_request().is_none());
    assert!(!conn.is_done());
}

#[test]
fn flow_control_holds_replies_until_the_window_opens() {
    let mut conn = Connection::new(Limits::default());
    let mut start = frame::PREFACE.to_vec();
    frame::put_settings(&mut start, &[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 10)]);
    conn.take_all(&start).unwrap();
    conn.output().clear();
    conn.take_all(&request_frames(1, &framed(b"x"), true))
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
    conn.take_all(&wu).unwrap();
    assert_eq!(frames(&conn.output().take()), [(frame::DATA, 0, 1)]);
    let mut wu = Vec::new();
    frame::put_window_update(&mut wu, 1, 100);
    conn.take_all(&wu).unwrap();
    assert_eq!(
        frames(&conn.output().take()),
        [
            (frame::DATA, 0, 1),
            (frame::HEADERS, frame::END_STREAM | frame::END_HEADERS, 1)
        ]
    );
    assert_eq!(conn.open_streams(), 0);
    // Changing the initial window shifts open streams (and can go negative).
    conn.take_all(&request_frames(3, &framed(b"x"), true))
        .unwrap();
    let req = conn.next_request().unwrap();
    let mut s = Vec::new();
    frame::put_settings(&mut s, &[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 0)]);
    conn.take_all(&s).unwrap();
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
    conn.take_all(&s).unwrap();
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
        conn.take_all(&request_frames(id, &framed(b"x"), true))
            .unwrap();
    }
    assert_eq!(frames(&conn.output().take()), [(frame::RST_STREAM, 0, 5)]);
    let reqs: Vec<u32> = std::iter::from_fn(|| conn.next_request())
        .map(|r| r.stream)
        .collect();
    assert_eq!(reqs, [1, 3]);
    conn.go_away();
    assert!(!conn.is_done());
    conn.take_all(&request_frames(7, &framed(b"x"), true))
        .unwrap();
    assert!(conn.next_request().is_none());
    conn.respond(1, &Reply::ok(vec![]));
    // The client resets stream 3: it still counts until its handler is
    // done, then nothing is left and nothing is sent for it.
    let mut rst = Vec::new();
    frame::put_rst(&mut rst, 3, ErrorCode::Cancel);
    conn.take_all(&rst).unwrap();
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
fn graceful_goaway_serves_calls_sent_before_the_client_saw_it() {
    let mut conn = open_conn(Limits::default());
    assert!(!conn.opened_streams());
    assert!(conn.go_away_gracefully());
    assert!(conn.draining());
    let out = conn.output().take();
    assert_eq!(
        frames(&out),
        [(frame::GOAWAY, 0, 0), (frame::PING, 0, 0)],
        "first GOAWAY and the drain PING"
    );
    // The first GOAWAY names the largest stream id: nothing is refused yet.
    assert_eq!(&out[9..13], &frame::MAX_STREAM_ID.to_be_bytes());
    let ping = out[out.len() - 8..].to_vec();
    // A call the client sent before it read the GOAWAY is served.
    conn.take_all(&request_frames(1, &framed(b"x"), true))
        .unwrap();
    assert!(conn.opened_streams());
    assert_eq!(conn.next_request().map(|r| r.stream), Some(1));
    assert!(!conn.is_done());
    // A keepalive-style ACK with other data changes nothing.
    let mut other = Vec::new();
    frame::put_frame(
        &mut other,
        frame::PING,
        frame::ACK,
        0,
        &[0, 0, 0, 0, 0, 0, 0, 1],
    );
    conn.take_all(&other).unwrap();
    assert!(conn.draining());
    // The ACK of the drain PING: the final GOAWAY names stream 1, and a
    // later stream is refused.
    let mut ack = Vec::new();
    frame::put_frame(&mut ack, frame::PING, frame::ACK, 0, &ping);
    conn.take_all(&ack).unwrap();
    assert!(!conn.draining());
    conn.take_all(&request_frames(3, &framed(b"x"), true))
        .unwrap();
    assert!(conn.next_request().is_none());
    let out = conn.output().take();
    assert_eq!(
        frames(&out),
        [(frame::GOAWAY, 0, 0), (frame::RST_STREAM, 0, 3)]
    );
    assert_eq!(&out[9..13], &1u32.to_be_bytes());
    conn.respond(1, &Reply::ok(vec![]));
    assert!(conn.is_done());
}

#[test]
fn graceful_goaway_waits_for_the_preface() {
    let mut conn = Connection::new(Limits::default());
    assert!(!conn.go_away_gracefully());
    assert!(!conn.draining());
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
        conn.take_all(&request_frames(id, &framed(b"x"), true))
            .unwrap();
        started.extend(std::iter::from_fn(|| conn.next_request()).map(|r| r.stream));
        let mut rst = Vec::new();
        frame::put_rst(&mut rst, id, ErrorCode::Cancel);
        conn.take_all(&rst).unwrap();
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
    conn.take_all(&f).unwrap();
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
    conn.take_all(&ping).unwrap();
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
        let err = conn.take_all(&input).unwrap_err();
        assert_eq!(err.code, code, "{err}");
        assert!(conn.is_done());
        let out = frames(&conn.output().take());
        assert_eq!(out.last().unwrap().0, frame::GOAWAY);
    }
    // Not HTTP/2 at all: closed without a word.
    let mut conn = Connection::new(Limits::default());
    assert!(conn.take_all(b"GET / HTTP/1.1\r\n").is_err());
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
            let used = conn.take_all(&pending).unwrap();
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
