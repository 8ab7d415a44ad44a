//! Header blocks in: HPACK decoding one field representation at a time, so
//! that decoding stops as soon as the decoded header list passes its limit
//! (a block of one-byte references to a large dynamic-table entry decodes
//! to thousands of times its size), and the RFC 9113 §8 checks of request
//! headers and trailers.
//!
//! The tables live in [`hpack::Decoder`], which hands out one field at a
//! time.

use crate::hpack;
use crate::hpack::Decoder;
use std::time::Duration;

/// Why a header block could not be taken in. Either way the decoder state
/// can no longer be trusted and the connection must end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BlockError {
    /// Not valid HPACK: COMPRESSION_ERROR.
    Compression(String),
    /// The decoded list passed the limit; decoding stopped there.
    TooLarge,
}

/// Decode `block` with `decoder`, giving each field to `field`, and stop
/// with [`BlockError::TooLarge`] once the decoded size (name + value + 32
/// per field, as SETTINGS_MAX_HEADER_LIST_SIZE counts) passes `limit`.
pub fn decode_block(
    decoder: &mut Decoder,
    block: &[u8],
    limit: usize,
    mut field: impl FnMut(&[u8], &[u8]),
) -> Result<(), BlockError> {
    let mut size = 0usize;
    let complete = decoder
        .decode(block, |n, v| {
            size = size.saturating_add(n.len() + v.len() + 32);
            if size > limit {
                return false;
            }
            field(n, v);
            true
        })
        .map_err(|e| BlockError::Compression(e.to_string()))?;
    if complete {
        Ok(())
    } else {
        Err(BlockError::TooLarge)
    }
}

/// Which block a [`HeaderCheck`] reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockKind {
    /// The header block that opens a request.
    Request,
    /// A header block after the request's DATA (trailers).
    Trailers,
}

/// The fields of a request header block the server uses, and the first
/// RFC 9113 §8 rule the block breaks, if any. `:authority` is checked like
/// any field and then ignored: a pipe path there is as good as a host name.
///
/// Only `:path` is copied; the other fields the server uses are classified
/// as they are decoded.
#[derive(Debug)]
pub struct HeaderCheck {
    kind: BlockKind,
    pub method: Option<Method>,
    pub path: Option<Vec<u8>>,
    /// Whether the first `content-type` names gRPC.
    pub grpc: Option<bool>,
    /// The first `grpc-timeout`, parsed (`Some(None)`: malformed).
    pub timeout: Option<Option<Duration>>,
    pub content_length: Option<u64>,
    scheme: bool,
    authority: bool,
    regular_seen: bool,
    /// Why the block is malformed: the first problem found.
    pub malformed: Option<&'static str>,
}

impl HeaderCheck {
    pub fn new(kind: BlockKind) -> Self {
        HeaderCheck {
            kind,
            method: None,
            path: None,
            grpc: None,
            timeout: None,
            content_length: None,
            scheme: false,
            authority: false,
            regular_seen: false,
            malformed: None,
        }
    }

    /// Take one decoded field. Once the block is malformed the rest is only
    /// decoded (for the HPACK state), not looked at.
    pub fn field(&mut self, name: &[u8], value: &[u8]) {
        if self.malformed.is_none() {
            if let Err(why) = self.check(name, value) {
                self.malformed = Some(why);
            }
        }
    }

    fn check(&mut self, name: &[u8], value: &[u8]) -> Result<(), &'static str> {
        if value.iter().any(|&b| b == 0 || b == b'\r' || b == b'\n') {
            return Err("a field value holds NUL, CR or LF");
        }
        if let Some(pseudo) = name.strip_prefix(b":") {
            if self.kind == BlockKind::Trailers {
                return Err("a pseudo-header field in trailers");
            }
            if self.regular_seen {
                return Err("a pseudo-header field after a regular field");
            }
            let fresh = match pseudo {
                b"method" => self
                    .method
                    .replace(match value {
                        b"POST" => Method::Post,
                        b"CONNECT" => Method::Connect,
                        _ => Method::Other,
                    })
                    .is_none(),
                b"path" => set_once(&mut self.path, value),
                b"scheme" => !std::mem::replace(&mut self.scheme, true),
                b"authority" => !std::mem::replace(&mut self.authority, true),
                b"status" => return Err("a response pseudo-header field in a request"),
                _ => return Err("an unknown pseudo-header field"),
            };
            return if fresh {
                Ok(())
            } else {
                Err("a duplicated pseudo-header field")
            };
        }
        self.regular_seen = true;
        if name.is_empty()
            || name
                .iter()
                .any(|&b| b <= 0x20 || b.is_ascii_uppercase() || b >= 0x7f || b == b':')
        {
            return Err("a field name with uppercase or invalid characters");
        }
        match name {
            b"connection" | b"keep-alive" | b"proxy-connection" | b"transfer-encoding"
            | b"upgrade" => return Err("a connection-specific header field"),
            b"te" if value != b"trailers" => return Err("te other than \"trailers\""),
            b"content-length" => {
                let n = parse_length(value).ok_or("a malformed content-length")?;
                if self.content_length.is_some_and(|m| m != n) {
                    return Err("conflicting content-length values");
                }
                self.content_length = Some(n);
            }
            _ if self.kind == BlockKind::Trailers => {}
            b"content-type" => {
                self.grpc.get_or_insert_with(|| {
                    value == b"application/grpc"
                        || value.starts_with(b"application/grpc+")
                        || value.starts_with(b"application/grpc;")
                });
            }
            b"grpc-timeout" => {
                self.timeout
                    .get_or_insert_with(|| hpack::parse_timeout(value));
            }
            _ => {}
        }
        Ok(())
    }

    /// After the last field: a request must carry `:method`, `:scheme` and
    /// a non-empty `:path`, each once (CONNECT aside, which is refused
    /// later anyway).
    pub fn finish(&mut self) {
        if self.malformed.is_some() || self.kind == BlockKind::Trailers {
            return;
        }
        let connect = self.method == Some(Method::Connect);
        self.malformed = match () {
            _ if self.method.is_none() => Some("no :method"),
            _ if connect => None,
            _ if !self.scheme => Some("no :scheme"),
            _ if self.path.as_deref().is_none_or(<[u8]>::is_empty) => Some("no or an empty :path"),
            _ => None,
        };
    }
}

/// The request method, as far as this server cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Post,
    Connect,
    Other,
}

/// Keep the first value; false if there was one already.
fn set_once(slot: &mut Option<Vec<u8>>, value: &[u8]) -> bool {
    if slot.is_some() {
        return false;
    }
    *slot = Some(value.to_vec());
    true
}

fn parse_length(value: &[u8]) -> Option<u64> {
    if value.is_empty() || value.len() > 19 || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(value).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hpack::{put_field, put_int, put_str};

    fn check(kind: BlockKind, fields: &[(&str, &str)]) -> HeaderCheck {
        let mut c = HeaderCheck::new(kind);
        for (n, v) in fields {
            c.field(n.as_bytes(), v.as_bytes());
        }
        c.finish();
        c
    }

    const GOOD: [(&str, &str); 6] = [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/v1.Disk/ListDiskIDs"),
        (":authority", r"\\.\pipe\csi-proxy-disk-v1"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ];

    #[test]
    fn a_grpc_request_is_well_formed() {
        let c = check(BlockKind::Request, &GOOD);
        assert_eq!(c.malformed, None);
        assert_eq!(c.path.as_deref(), Some(&b"/v1.Disk/ListDiskIDs"[..]));
        assert_eq!(c.method, Some(Method::Post));
        assert_eq!(c.grpc, Some(true));
        assert_eq!(c.timeout, None);
        let c = check(
            BlockKind::Request,
            &[
                GOOD.as_slice(),
                &[("grpc-timeout", "5S"), ("grpc-timeout", "x")],
            ]
            .concat(),
        );
        assert_eq!(c.timeout, Some(Some(Duration::from_secs(5))));
        let c = check(
            BlockKind::Request,
            &[GOOD.as_slice(), &[("grpc-timeout", "soon")]].concat(),
        );
        assert_eq!(c.timeout, Some(None));
        let c = check(
            BlockKind::Trailers,
            &[("x-extra", "1"), ("content-type", "ignored")],
        );
        assert_eq!(c.malformed, None);
        assert_eq!(c.grpc, None);
    }

    #[test]
    fn every_rule_of_rfc_9113_section_8() {
        let with = |extra: &[(&'static str, &'static str)], at: usize| {
            let mut f: Vec<(&str, &str)> = GOOD.to_vec();
            for (i, e) in extra.iter().enumerate() {
                f.insert(at + i, *e);
            }
            check(BlockKind::Request, &f).malformed
        };
        let without = |name: &str| {
            let f: Vec<(&str, &str)> = GOOD.iter().copied().filter(|(n, _)| *n != name).collect();
            check(BlockKind::Request, &f).malformed
        };
        let cases: Vec<(Option<&str>, &str)> = vec![
            (with(&[("X-Upper", "1")], 6), "uppercase"),
            (with(&[(":foo", "1")], 0), "unknown pseudo"),
            (with(&[(":status", "200")], 0), "response pseudo"),
            (with(&[(":method", "POST")], 6), "pseudo after regular"),
            (with(&[("connection", "keep-alive")], 6), "connection"),
            (with(&[("keep-alive", "1")], 6), "keep-alive"),
            (
                with(&[("transfer-encoding", "chunked")], 6),
                "transfer-encoding",
            ),
            (with(&[("upgrade", "h2c")], 6), "upgrade"),
            (with(&[("proxy-connection", "x")], 6), "proxy-connection"),
            (with(&[("te", "trailers, deflate")], 6), "te"),
            (with(&[(":method", "POST")], 1), "duplicated :method"),
            (with(&[(":scheme", "http")], 1), "duplicated :scheme"),
            (with(&[(":path", "/x")], 1), "duplicated :path"),
            (with(&[(":authority", "x")], 1), "duplicated :authority"),
            (without(":method"), "no :method"),
            (without(":scheme"), "no :scheme"),
            (without(":path"), "no :path"),
            (with(&[("x-nul", "a\0b")], 6), "NUL in a value"),
            (with(&[("x-crlf", "a\r\nb")], 6), "CRLF in a value"),
            (with(&[("bad name", "1")], 6), "space in a name"),
            (with(&[("content-length", "1x")], 6), "bad content-length"),
            (
                with(&[("content-length", "1"), ("content-length", "2")], 6),
                "conflicting content-length",
            ),
        ];
        for (malformed, what) in cases {
            assert!(malformed.is_some(), "{what} was accepted");
        }
        let mut empty_path: Vec<(&str, &str)> = GOOD.to_vec();
        empty_path[2].1 = "";
        assert!(check(BlockKind::Request, &empty_path).malformed.is_some());
        // Trailers carry no pseudo-header fields.
        let t = check(BlockKind::Trailers, &[(":path", "/x")]);
        assert!(t.malformed.is_some());
        // Equal repeated content-length values are one value.
        let c = with(&[("content-length", "7"), ("content-length", "7")], 6);
        assert_eq!(c, None);
        // CONNECT has no :scheme or :path (and is refused later).
        let c = check(
            BlockKind::Request,
            &[(":method", "CONNECT"), (":authority", "x")],
        );
        assert_eq!(c.malformed, None);
    }

    #[test]
    fn fields_of_every_representation_and_clean_errors() {
        let mut block = Vec::new();
        put_int(&mut block, 0x20, 5, 4096); // size update
        put_int(&mut block, 0x80, 7, 3); // :method POST
        block.push(0x40); // literal, incremental indexing, new name
        put_str(&mut block, b"x-a");
        put_str(&mut block, &[b'v'; 200]);
        put_field(&mut block, b"x-b", b"w");
        put_int(&mut block, 0x80, 7, 62); // the x-a entry
        let mut got = Vec::new();
        let mut d = Decoder::new(4096);
        decode_block(&mut d, &block, 1 << 20, |n, v| {
            got.push((n.to_vec(), v.len()))
        })
        .unwrap();
        assert_eq!(
            got,
            [
                (b":method".to_vec(), 4),
                (b"x-a".to_vec(), 200),
                (b"x-b".to_vec(), 1),
                (b"x-a".to_vec(), 200)
            ]
        );
        // Truncated anywhere: a compression error, never a panic.
        for n in 1..block.len() {
            let mut d = Decoder::new(4096);
            let r = decode_block(&mut d, &block[..n], 1 << 20, |_, _| {});
            assert!(r.is_ok() || matches!(r, Err(BlockError::Compression(_))));
        }
        // A size update after a field.
        let mut late = vec![0x83];
        put_int(&mut late, 0x20, 5, 0);
        late.push(0x83);
        let r = decode_block(&mut Decoder::new(4096), &late, 1 << 20, |_, _| {});
        assert!(matches!(r, Err(BlockError::Compression(_))), "{r:?}");
    }

    #[test]
    fn decoding_stops_at_the_limit() {
        // One 4000-byte entry, then thousands of one-byte references to it.
        let mut d = Decoder::new(4096);
        let mut first = vec![0x40];
        put_str(&mut first, b"x-big");
        put_str(&mut first, &[b'a'; 4000]);
        decode_block(&mut d, &first, 65_536, |_, _| {}).unwrap();
        let refs = vec![0x80 | 62; 16_000];
        let mut seen = 0;
        let r = decode_block(&mut d, &refs, 65_536, |_, _| seen += 1);
        assert_eq!(r, Err(BlockError::TooLarge));
        assert_eq!(seen, 16, "fields past the limit are not delivered");
    }
}
