//! Raw HTTP/2 checks shared by the Unix-socket and named-pipe tiers: the
//! `:authority` forms real gRPC clients send, several requests per
//! connection (so that later requests refer to the HPACK dynamic table),
//! and unusual but legal framing.
#![allow(dead_code)]

use csi_proxy_api::filesystem::v1::{PathExistsRequest, PathExistsResponse};
use csi_proxy_api::filesystem::v1alpha1::PathExistsResponse as OldPathExistsResponse;
use csi_proxy_http2::client::{RawClient, Shape};
use csi_proxy_http2::conformance::{Target, CASES};
use prost::Message;
use std::io::{Read, Write};

/// Every `:authority` form: none, a host name, the pipe path raw (single
/// and doubled backslashes, as upstream's Go client builds it) and
/// percent-encoded (newer grpc-go), the socket path and a unix: URI.
pub fn authority_forms(endpoint: &str, socket: &str) -> Vec<Option<Vec<u8>>> {
    let raw = format!(r"\\.\pipe\{endpoint}");
    let doubled = format!(r"\\.\\pipe\\{endpoint}");
    let pct = |s: &str| s.replace('\\', "%5C");
    vec![
        None,
        Some(b"localhost".to_vec()),
        Some(raw.clone().into_bytes()),
        Some(doubled.clone().into_bytes()),
        Some(pct(&raw).into_bytes()),
        Some(pct(&doubled).into_bytes()),
        Some(socket.as_bytes().to_vec()),
        Some(format!("unix://{socket}").into_bytes()),
    ]
}

/// Framing variants a client may legally use.
pub fn shapes() -> Vec<Shape> {
    vec![
        Shape::default(),
        Shape {
            padding: Some(17),
            priority: true,
            ..Shape::default()
        },
        Shape {
            fragment: Some(5),
            ..Shape::default()
        },
        Shape {
            no_indexing: true,
            ..Shape::default()
        },
        Shape {
            huffman: true,
            ..Shape::default()
        },
    ]
}

/// On one connection: `rounds` pairs of PathExists calls (an existing and a
/// missing path) on `service` (e.g. `v1.Filesystem`), then one with a path
/// outside the allowed roots. Every answer must be right.
pub fn exercise<S: Read + Write>(
    client: &mut RawClient<S>,
    service: &str,
    authority: Option<&[u8]>,
    existing: &str,
    missing: &str,
    outside: &str,
    rounds: usize,
) {
    let method = format!("/{service}/PathExists");
    let call = |client: &mut RawClient<S>, path: &str| {
        let msg = PathExistsRequest { path: path.into() }.encode_to_vec();
        client
            .call(&method, authority, &msg)
            .unwrap_or_else(|e| panic!("{method} {path} with {authority:?}: {e}"))
    };
    for _ in 0..rounds {
        for (path, want) in [(existing, true), (missing, false)] {
            let resp = call(client, path);
            assert_eq!(resp.http_status, 200, "{resp:?}");
            assert_eq!(
                resp.grpc_status,
                Some(0),
                "{method} {path} with {authority:?}: {resp:?}"
            );
            let bytes = resp.message.expect("a message");
            // v1alpha1 and v1beta1 carry an (unused) error string first.
            let exists = if service.starts_with("v1alpha1.") || service.starts_with("v1beta1.") {
                OldPathExistsResponse::decode(&bytes[..]).unwrap().exists
            } else {
                PathExistsResponse::decode(&bytes[..]).unwrap().exists
            };
            assert_eq!(exists, want, "{method} {path} with {authority:?}");
        }
    }
    let resp = call(client, outside);
    assert_eq!(resp.grpc_status, Some(7), "{resp:?}"); // PermissionDenied
    assert!(
        resp.grpc_message.contains("outside the allowed roots"),
        "{resp:?}"
    );
}

/// A PathExists call of `path` on `v1.Filesystem`, for the conformance
/// cases.
pub fn path_exists_target(path: &str) -> Target {
    Target {
        path: "/v1.Filesystem/PathExists".into(),
        message: PathExistsRequest { path: path.into() }.encode_to_vec(),
    }
}

/// Fail with every failed conformance case, by id.
pub fn assert_no_failures(failures: &[(&str, String)]) {
    assert!(
        failures.is_empty(),
        "{} of {} conformance cases failed:\n{}",
        failures.len(),
        CASES.len(),
        failures
            .iter()
            .map(|(id, e)| format!("{id}: {e}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// On one connection: PathExists requests that do not decode (a path whose
/// bytes are not UTF-8, a truncated field, a bad wire type) are answered
/// `InvalidArgument` without echoing the bytes; the connection stays usable.
pub fn undecodable_requests<S: Read + Write>(
    client: &mut RawClient<S>,
    service: &str,
    inside: &str,
) {
    let method = format!("/{service}/PathExists");
    // Field 1 (path), length-delimited: `<inside>/secret-\xff\xfe`.
    let mut path = format!("{inside}/secret-").into_bytes();
    path.extend_from_slice(b"\xff\xfe");
    let mut not_utf8 = vec![0x0a];
    put_varint(&mut not_utf8, path.len());
    not_utf8.extend_from_slice(&path);
    let truncated = b"\x0a\x40/var".to_vec();
    let bad_wire_type = b"\x0f".to_vec();
    for (what, msg) in [
        ("non-UTF-8 path", not_utf8),
        ("truncated", truncated),
        ("bad wire type", bad_wire_type),
    ] {
        let resp = client
            .call(&method, None, &msg)
            .unwrap_or_else(|e| panic!("{method} {what}: {e}"));
        assert_eq!(resp.http_status, 200, "{what}: {resp:?}");
        assert_eq!(resp.grpc_status, Some(3), "{what}: {resp:?}"); // InvalidArgument
        assert!(
            resp.grpc_message
                .starts_with("the request message does not decode: "),
            "{what}: {resp:?}"
        );
        assert!(!resp.grpc_message.contains("secret"), "{what}: {resp:?}");
    }
    // The same connection still answers a good request.
    let ok = PathExistsRequest {
        path: inside.into(),
    }
    .encode_to_vec();
    let resp = client.call(&method, None, &ok).unwrap();
    assert_eq!(resp.grpc_status, Some(0), "{resp:?}");
}

fn put_varint(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}
