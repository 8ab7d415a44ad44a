//! The cases: h2spec's checks this server once failed (with h2spec's
//! numbering), then the bounds.

use super::{f, Case, Fields, Probe};
use crate::frame::{self, ErrorCode};
use crate::hpack::{put_int, put_str};

/// A request block with `fields` changed by `edit`.
fn with(p: &Probe, edit: impl FnOnce(&mut Fields)) -> Fields {
    let mut fields = p.common();
    edit(&mut fields);
    fields
}

/// Send a request on stream 1 whose headers `edit` made malformed: a stream
/// error PROTOCOL_ERROR.
fn malformed(p: &mut Probe, edit: impl FnOnce(&mut Fields)) -> Result<(), String> {
    let fields = with(p, edit);
    p.headers(1, &fields, true)?;
    p.expect_reset(1, ErrorCode::Protocol)
}

/// Every case. See the module docs of `conformance`.
pub const CASES: &[Case] = &[
    Case {
        id: "http2/5.1/5",
        title: "half closed (remote): DATA is a stream error STREAM_CLOSED",
        run: |p| {
            let fields = p.common();
            p.headers(1, &fields, true)?;
            p.data(1, b"test", true)?;
            p.expect_reset(1, ErrorCode::StreamClosed)
        },
    },
    Case {
        id: "http2/5.1/6",
        title: "half closed (remote): HEADERS is an error STREAM_CLOSED",
        run: |p| {
            let fields = p.common();
            p.headers(1, &fields, true)?;
            p.headers(1, &fields, true)?;
            p.expect_goaway(ErrorCode::StreamClosed)
        },
    },
    Case {
        id: "http2/5.1/8",
        title: "closed by RST_STREAM: DATA is a stream error STREAM_CLOSED",
        run: |p| {
            let fields = p.common();
            p.headers(1, &fields, false)?;
            p.rst(1)?;
            p.data(1, b"test", true)?;
            p.expect_reset(1, ErrorCode::StreamClosed)
        },
    },
    Case {
        id: "http2/5.1/9",
        title: "closed by RST_STREAM: HEADERS is an error STREAM_CLOSED",
        run: |p| {
            let fields = p.common();
            p.headers(1, &fields, false)?;
            p.rst(1)?;
            p.headers(1, &fields, true)?;
            p.expect_goaway(ErrorCode::StreamClosed)
        },
    },
    Case {
        id: "http2/5.1/11",
        title: "closed: DATA is a stream error STREAM_CLOSED",
        run: |p| {
            let fields = p.common();
            p.headers(1, &fields, true)?;
            p.expect_answer(1)?;
            p.data(1, b"test", true)?;
            p.expect_reset(1, ErrorCode::StreamClosed)
        },
    },
    Case {
        id: "http2/5.1/12",
        title: "closed: HEADERS is a connection error STREAM_CLOSED",
        run: |p| {
            let fields = p.common();
            p.headers(1, &fields, true)?;
            p.expect_answer(1)?;
            p.headers(1, &fields, true)?;
            p.expect_goaway(ErrorCode::StreamClosed)
        },
    },
    Case {
        id: "http2/5.1.1/2",
        title: "a stream id lower than one already used is a connection error PROTOCOL_ERROR",
        run: |p| {
            let fields = p.common();
            p.headers(5, &fields, true)?;
            p.headers(3, &fields, true)?;
            p.expect_goaway(ErrorCode::Protocol)
        },
    },
    Case {
        id: "http2/5.3.1/2",
        title: "PRIORITY making a stream depend on itself is a stream error PROTOCOL_ERROR",
        run: |p| {
            let mut out = Vec::new();
            frame::put_frame(&mut out, frame::PRIORITY, 0, 1, &[0, 0, 0, 1, 255]);
            p.send(&out)?;
            p.expect_reset(1, ErrorCode::Protocol)
        },
    },
    Case {
        id: "http2/6.1/2",
        title: "DATA on a stream that is not open is a stream error STREAM_CLOSED",
        run: |p| {
            let fields = p.common();
            p.headers(1, &fields, true)?;
            p.data(1, b"test", true)?;
            p.expect_reset(1, ErrorCode::StreamClosed)
        },
    },
    Case {
        id: "http2/8.1/1",
        title: "a second HEADERS without END_STREAM is a stream error PROTOCOL_ERROR",
        run: |p| {
            let fields = p.common();
            p.headers(1, &fields, false)?;
            p.data(1, b"test", false)?;
            p.headers(1, &vec![f("x-trailer", "1")], false)?;
            p.expect_reset(1, ErrorCode::Protocol)
        },
    },
    Case {
        id: "http2/8.1.2/1",
        title: "an uppercase field name is malformed",
        run: |p| malformed(p, |h| h.push(f("X-TEST", "ok"))),
    },
    Case {
        id: "http2/8.1.2.1/1",
        title: "an unknown pseudo-header field is malformed",
        run: |p| malformed(p, |h| h.push(f(":test", "ok"))),
    },
    Case {
        id: "http2/8.1.2.1/2",
        title: "a response pseudo-header field in a request is malformed",
        run: |p| malformed(p, |h| h.push(f(":status", "200"))),
    },
    Case {
        id: "http2/8.1.2.1/3",
        title: "a pseudo-header field in trailers is malformed",
        run: |p| {
            let fields = p.common();
            p.headers(1, &fields, false)?;
            p.data(1, b"test", false)?;
            p.headers(1, &vec![f(":method", "POST")], true)?;
            p.expect_reset(1, ErrorCode::Protocol)
        },
    },
    Case {
        id: "http2/8.1.2.1/4",
        title: "a pseudo-header field after a regular field is malformed",
        run: |p| malformed(p, |h| h.insert(0, f("x-test", "ok"))),
    },
    Case {
        id: "http2/8.1.2.2/1",
        title: "a connection-specific header field is malformed",
        run: |p| malformed(p, |h| h.push(f("connection", "keep-alive"))),
    },
    Case {
        id: "http2/8.1.2.2/2",
        title: "te other than \"trailers\" is malformed",
        run: |p| {
            malformed(p, |h| {
                h.push(f("trailers", "test"));
                h.push(f("te", "trailers, deflate"));
            })
        },
    },
    Case {
        id: "http2/8.1.2.3/1",
        title: "an empty :path is malformed",
        run: |p| malformed(p, |h| h[2].1.clear()),
    },
    Case {
        id: "http2/8.1.2.3/2",
        title: "a request without :method is malformed",
        run: |p| {
            malformed(p, |h| {
                h.remove(0);
            })
        },
    },
    Case {
        id: "http2/8.1.2.3/3",
        title: "a request without :scheme is malformed",
        run: |p| {
            malformed(p, |h| {
                h.remove(1);
            })
        },
    },
    Case {
        id: "http2/8.1.2.3/4",
        title: "a request without :path is malformed",
        run: |p| {
            malformed(p, |h| {
                h.remove(2);
            })
        },
    },
    Case {
        id: "http2/8.1.2.3/5",
        title: "a duplicated :method is malformed",
        run: |p| malformed(p, |h| h.push(f(":method", "POST"))),
    },
    Case {
        id: "http2/8.1.2.3/6",
        title: "a duplicated :scheme is malformed",
        run: |p| malformed(p, |h| h.push(f(":scheme", "http"))),
    },
    Case {
        id: "http2/8.1.2.3/7",
        title: "a duplicated :path is malformed",
        run: |p| {
            let path = p.target.path.clone();
            malformed(p, |h| h.push(f(":path", &path)))
        },
    },
    Case {
        id: "http2/8.1.2.6/1",
        title: "content-length unlike the DATA payload is malformed",
        run: |p| {
            let fields = with(p, |h| h.push(f("content-length", "1")));
            p.headers(1, &fields, false)?;
            p.data(1, b"test", true)?;
            p.expect_reset(1, ErrorCode::Protocol)
        },
    },
    Case {
        id: "http2/8.1.2.6/2",
        title: "content-length unlike the sum of the DATA payloads is malformed",
        run: |p| {
            let fields = with(p, |h| h.push(f("content-length", "1")));
            p.headers(1, &fields, false)?;
            p.data(1, b"test", false)?;
            p.data(1, b"test", true)?;
            p.expect_reset(1, ErrorCode::Protocol)
        },
    },
    Case {
        id: "bounds/content-length-matches",
        title: "a request whose content-length matches its body is served",
        run: |p| {
            let msg = p.framed();
            let fields = with(p, |h| h.push(f("content-length", &msg.len().to_string())));
            p.headers(1, &fields, false)?;
            p.data(1, &msg[..2], false)?;
            p.data(1, &msg[2..], true)?;
            p.expect_answer(1)?;
            p.expect_call_works()
        },
    },
    Case {
        id: "bounds/continuation-flood",
        title: "endless empty CONTINUATION frames end the connection",
        run: |p| {
            let fields = p.common();
            let mut out = Vec::new();
            frame::put_frame(&mut out, frame::HEADERS, 0, 1, &Probe::block(&fields));
            for _ in 0..1000 {
                frame::put_frame(&mut out, frame::CONTINUATION, 0, 1, &[]);
            }
            // The server may close before reading it all.
            let _ = p.send(&out);
            p.expect_goaway(ErrorCode::EnhanceYourCalm)
        },
    },
    Case {
        id: "bounds/header-list-references",
        title: "a header list past the limit by table references ends the connection",
        run: |p| {
            // A 4000-byte value stored once, then a block referring to it
            // 1000 times (4 MB decoded from 1 KB).
            let mut blk = Probe::block(&p.common());
            blk.push(0x40);
            put_str(&mut blk, b"x-big");
            put_str(&mut blk, &[b'a'; 4000]);
            let mut out = Vec::new();
            frame::put_frame(&mut out, frame::HEADERS, frame::END_HEADERS, 1, &blk);
            let mut refs = Probe::block(&p.common());
            for _ in 0..1000 {
                put_int(&mut refs, 0x80, 7, 62);
            }
            frame::put_frame(
                &mut out,
                frame::HEADERS,
                frame::END_HEADERS | frame::END_STREAM,
                3,
                &refs,
            );
            let _ = p.send(&out);
            p.expect_goaway(ErrorCode::EnhanceYourCalm)
        },
    },
    Case {
        id: "bounds/no-echo",
        title: "a reply never repeats a client-supplied header value",
        run: |p| {
            let long = "9".repeat(3900);
            let fields = with(p, |h| h.push(f("grpc-timeout", &long)));
            p.headers(1, &fields, true)?;
            let mut total = 0;
            loop {
                let fr = p.read()?;
                if fr.stream == 1 {
                    total += fr.payload.len() + frame::HEADER_LEN;
                    if fr.flags & frame::END_STREAM != 0 {
                        break;
                    }
                }
            }
            (total < 200)
                .then_some(())
                .ok_or(format!("{total} bytes answered a bad grpc-timeout"))?;
            p.expect_call_works()
        },
    },
];
