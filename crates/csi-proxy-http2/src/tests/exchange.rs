//! Calls through the raw client: authorities, framing shapes, header
//! blocks, errors, large replies, requests that are not gRPC.

use super::*;
use crate::client::RawClient;

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
            huffman: true,
        },
        Shape {
            no_indexing: true,
            ..Shape::default()
        },
        Shape {
            huffman: true,
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
