//! The header side of gRPC over HTTP/2.
//!
//! Encoding (here) is deliberately minimal: every field the server sends is
//! a literal "without indexing" and no Huffman coding is used, so the
//! encoder keeps no state and any decoder understands it, whatever table
//! size the peer announced (`put_huffman_str` serves the test client,
//! which codes its requests as grpc-go does). Decoding ([`Decoder`]: static
//! and dynamic tables, Huffman codes, table size updates) is in
//! `decoder.rs`, `huffman.rs` and `tables.rs`.

use std::time::Duration;

mod decoder;
mod huffman;
mod tables;

pub use decoder::{DecodeError, Decoder};

/// The dynamic table size both sides of a connection use: the initial
/// SETTINGS_HEADER_TABLE_SIZE (RFC 9113 §6.5.2), which neither changes.
pub const DEFAULT_TABLE_SIZE: usize = 4096;
pub use huffman::HuffmanError;

/// Append an HPACK integer with an `n`-bit prefix; `first` holds the bits
/// above the prefix.
pub fn put_int(out: &mut Vec<u8>, first: u8, n: u8, mut value: usize) {
    let max = (1usize << n) - 1;
    if value < max {
        out.push(first | value as u8);
        return;
    }
    out.push(first | max as u8);
    value -= max;
    while value >= 128 {
        out.push((value % 128) as u8 | 0x80);
        value /= 128;
    }
    out.push(value as u8);
}

/// Append a string literal (no Huffman coding).
pub fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    put_int(out, 0, 7, s.len());
    out.extend_from_slice(s);
}

/// Append a Huffman-coded string literal.
pub fn put_huffman_str(out: &mut Vec<u8>, s: &[u8]) {
    let coded = huffman::encode(s);
    put_int(out, 0x80, 7, coded.len());
    out.extend_from_slice(&coded);
}

/// Append a literal field without indexing whose name is given as text.
pub fn put_field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.push(0x00);
    put_str(out, name);
    put_str(out, value);
}

/// Append a literal field without indexing whose name is entry `index` of
/// the static table.
pub fn put_field_static_name(out: &mut Vec<u8>, index: usize, value: &[u8]) {
    put_int(out, 0x00, 4, index);
    put_str(out, value);
}

/// Static table entries used by the server.
const STATUS_200: u8 = 0x80 | 8;
const NAME_STATUS: usize = 8;
const NAME_CONTENT_TYPE: usize = 31;

/// The response headers of a gRPC response: `:status: 200` and
/// `content-type: application/grpc`.
pub fn put_response_head(out: &mut Vec<u8>) {
    out.push(STATUS_200);
    put_field_static_name(out, NAME_CONTENT_TYPE, b"application/grpc");
}

/// The longest grpc-message text sent (before percent-encoding); longer
/// messages are cut on a character boundary. Messages name operations and
/// host paths, never anything near this long.
pub const MAX_MESSAGE: usize = 2048;

/// The gRPC status fields: `grpc-status` and, if not empty, the
/// percent-encoded `grpc-message` (at most [`MAX_MESSAGE`] bytes of text).
pub fn put_grpc_status(out: &mut Vec<u8>, code: i32, message: &str) {
    let mut digits = [0u8; 11];
    put_field(out, b"grpc-status", format_int(code, &mut digits));
    if !message.is_empty() {
        let mut end = message.len().min(MAX_MESSAGE);
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        let text = &message[..end];
        out.push(0x00);
        put_str(out, b"grpc-message");
        let escaped = text.bytes().filter(|&b| needs_escape(b)).count();
        put_int(out, 0, 7, text.len() + 2 * escaped);
        percent_encode_into(out, text);
    }
}

/// A plain HTTP response head with status `status` (for requests that are
/// not gRPC at all).
pub fn put_http_status(out: &mut Vec<u8>, status: u16) {
    let mut digits = [0u8; 11];
    put_field_static_name(out, NAME_STATUS, format_int(i32::from(status), &mut digits));
}

/// The decimal digits of `n` in `buf`, without allocating.
fn format_int(n: i32, buf: &mut [u8; 11]) -> &[u8] {
    let mut v = n.unsigned_abs();
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    if n < 0 {
        i -= 1;
        buf[i] = b'-';
    }
    &buf[i..]
}

/// Percent-encode a grpc-message value as the gRPC spec asks: every byte
/// outside printable ASCII, and `%` itself.
pub fn percent_encode(message: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len());
    percent_encode_into(&mut out, message);
    out
}

fn percent_encode_into(out: &mut Vec<u8>, message: &str) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let bytes = message.as_bytes();
    let mut plain = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if !needs_escape(b) {
            continue;
        }
        out.extend_from_slice(&bytes[plain..i]);
        out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xf)]]);
        plain = i + 1;
    }
    out.extend_from_slice(&bytes[plain..]);
}

fn needs_escape(b: u8) -> bool {
    !(0x20..=0x7e).contains(&b) || b == b'%'
}

/// The most of a client-supplied value that [`quote`] shows.
pub const QUOTE_MAX: usize = 64;

/// A client-supplied value made safe to put in a message: at most
/// [`QUOTE_MAX`] bytes of it, printable ASCII kept and every other byte
/// shown as `?`, with `...` when cut. Replies must never grow with what a
/// client can make the server repeat (a header value stored once in the
/// HPACK table can be referred to by one byte).
pub fn quote(value: &[u8]) -> String {
    let shown = &value[..value.len().min(QUOTE_MAX)];
    let mut s: String = shown
        .iter()
        .map(|&b| {
            if (0x20..=0x7e).contains(&b) {
                b as char
            } else {
                '?'
            }
        })
        .collect();
    if value.len() > QUOTE_MAX {
        s.push_str("...");
    }
    s
}

/// Decode a percent-encoded grpc-message (for clients and tests); invalid
/// escapes are kept as they are.
pub fn percent_decode(value: &[u8]) -> String {
    let mut out = Vec::with_capacity(value.len());
    let mut i = 0;
    while i < value.len() {
        if value[i] == b'%' && i + 2 < value.len() {
            let hex = std::str::from_utf8(&value[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            if let Some(b) = hex {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(value[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parse a `grpc-timeout` value: at most 8 digits and a unit
/// (`H`, `M`, `S`, `m`, `u`, `n`).
pub fn parse_timeout(value: &[u8]) -> Option<Duration> {
    let (&unit, digits) = value.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(match unit {
        b'H' => Duration::from_secs(n * 3600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(block: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
        Decoder::new(DEFAULT_TABLE_SIZE).decode_all(block).unwrap()
    }

    #[test]
    fn integers_follow_rfc_7541_examples() {
        let mut out = Vec::new();
        put_int(&mut out, 0, 5, 10);
        assert_eq!(out, [10]);
        out.clear();
        put_int(&mut out, 0, 5, 1337);
        assert_eq!(out, [31, 154, 10]);
        out.clear();
        put_int(&mut out, 0, 8, 42);
        assert_eq!(out, [42]);
        out.clear();
        put_int(&mut out, 0x80, 7, 127);
        assert_eq!(out, [0xff, 0]);
    }

    #[test]
    fn response_blocks_decode_with_a_real_decoder() {
        let mut b = Vec::new();
        put_response_head(&mut b);
        put_grpc_status(&mut b, 5, "no such path: /x%y\u{e9}");
        let long = "m".repeat(300);
        put_field(&mut b, b"x-long", long.as_bytes());
        let got = decode(&b);
        assert_eq!(
            got,
            [
                (b":status".to_vec(), b"200".to_vec()),
                (b"content-type".to_vec(), b"application/grpc".to_vec()),
                (b"grpc-status".to_vec(), b"5".to_vec()),
                (
                    b"grpc-message".to_vec(),
                    b"no such path: /x%25y%C3%A9".to_vec()
                ),
                (b"x-long".to_vec(), long.into_bytes()),
            ]
        );
        let mut h = Vec::new();
        put_http_status(&mut h, 415);
        assert_eq!(decode(&h), [(b":status".to_vec(), b"415".to_vec())]);
    }

    #[test]
    fn percent_coding_round_trips() {
        for s in ["", "plain", "100% done", "é\n\t\u{1F600}", "%%", "%4"] {
            assert_eq!(percent_decode(&percent_encode(s)), s, "{s:?}");
        }
        assert_eq!(percent_decode(b"%zz%4"), "%zz%4");
    }

    #[test]
    fn messages_are_capped_and_client_values_quoted_short() {
        let mut b = Vec::new();
        put_grpc_status(&mut b, 13, &"é".repeat(5000));
        let got = decode(&b);
        assert_eq!(got[0], (b"grpc-status".to_vec(), b"13".to_vec()));
        let text = percent_decode(&got[1].1);
        assert_eq!(text, "é".repeat(MAX_MESSAGE / 2));
        assert!(b.len() < 3 * MAX_MESSAGE + 64, "{}", b.len());
        assert_eq!(quote(b"/v1.Disk/X"), "/v1.Disk/X");
        assert_eq!(quote(b"a\0\n\xffb"), "a???b");
        let long = quote(&[b'x'; 4000]);
        assert_eq!(long.len(), QUOTE_MAX + 3);
        assert!(long.ends_with("..."));
    }

    #[test]
    fn timeouts() {
        assert_eq!(parse_timeout(b"1S"), Some(Duration::from_secs(1)));
        assert_eq!(parse_timeout(b"2H"), Some(Duration::from_secs(7200)));
        assert_eq!(
            parse_timeout(b"99999999n"),
            Some(Duration::from_nanos(99_999_999))
        );
        assert_eq!(parse_timeout(b"250m"), Some(Duration::from_millis(250)));
        for bad in [&b""[..], b"S", b"1", b"123456789S", b"1x", b"-1S", b"1 S"] {
            assert_eq!(parse_timeout(bad), None, "{bad:?}");
        }
    }
}
