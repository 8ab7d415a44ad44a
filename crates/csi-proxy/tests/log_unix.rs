//! The log cannot be spoofed by a client: at `-v=2` the proxy logs every
//! request's method path, which the client chooses. A path holding a quote,
//! spaces and `a=b` stays one quoted value of one line, in the text format
//! and in JSON; a path holding a newline is refused by HTTP/2 before it is
//! logged.
#![cfg(unix)]

mod common;

use common::Proxy;
use csi_proxy_http2::client::{RawClient, Shape};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// Printable, so the proxy logs it as sent: a quote that would end a
/// quoted value, then what would be two more fields of the line.
const HOSTILE: &str = "/v1.Filesystem/PathExists\" a=b code=OK";
/// A newline that would start a line of its own.
const NEWLINE: &str = "/v1.Filesystem/PathExists\nI0101 00:00:00.000000 1 forged.go:1] forged";

/// Sends one request on a fresh connection to `path`; returns the answer's
/// grpc-status (`None` when HTTP/2 refused the request itself).
fn call(p: &Proxy, path: &str) -> Option<i32> {
    let s = UnixStream::connect(p.socket("filesystem-v1")).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut c = RawClient::new(s, Shape::default()).unwrap();
    c.call(path, None, &[]).ok().and_then(|r| r.grpc_status)
}

/// The lines of the log holding `needle`, waiting up to 10 s for one (the
/// request line is written after the answer).
fn lines_with(p: &Proxy, needle: &str) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let found: Vec<String> = p
            .log()
            .lines()
            .filter(|l| l.contains(needle))
            .map(String::from)
            .collect();
        if !found.is_empty() || Instant::now() > deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The `key=value` pairs after the message of a klog line, with quoted
/// values unescaped (`\"` and `\\`; no other escape is expected here).
fn pairs(fields: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = fields.trim_start();
    while !rest.is_empty() {
        let (key, after) = rest.split_once('=').expect("key=value");
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = if after.starts_with('"') {
            chars.next();
            let mut end = after.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => value.push(chars.next().expect("escaped").1),
                    '"' => {
                        end = i + 1;
                        break;
                    }
                    c => value.push(c),
                }
            }
            end
        } else {
            let end = after.find(' ').unwrap_or(after.len());
            value.push_str(&after[..end]);
            end
        };
        out.push((key.to_string(), value));
        rest = after[end..].trim_start();
    }
    out
}

#[test]
fn a_hostile_method_path_is_one_quoted_value_of_one_line() {
    let p = Proxy::start(&["-api-groups=filesystem-v1"]);
    assert_eq!(call(&p, HOSTILE), Some(12), "Unimplemented");
    let lines = lines_with(&p, "a=b");
    assert_eq!(lines.len(), 1, "{}", p.log());
    let line = &lines[0];
    let (_, text) = line.split_once("] ").expect("klog header");
    let fields = text.strip_prefix("request").expect("the request line");
    let pairs = pairs(fields);
    let keys: Vec<&str> = pairs.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["method", "duration_us", "code"], "{line}");
    assert_eq!(pairs[0].1, HOSTILE, "{line}");
    assert_eq!(pairs[2].1, "Unimplemented", "{line}");
    assert!(
        line.contains(r#"method="/v1.Filesystem/PathExists\" a=b code=OK""#),
        "{line}"
    );

    // HTTP/2 refuses a newline in a field value: no answer, no line.
    assert_eq!(call(&p, NEWLINE), None);
    assert!(
        call(&p, "/v1.Filesystem/PathExists").is_some(),
        "still serving"
    );
    assert!(!p.log().contains("forged"), "{}", p.log());
}

#[test]
fn the_json_log_stays_valid_with_a_hostile_method_path() {
    let p = Proxy::start(&["-api-groups=filesystem-v1", "-logging-format=json"]);
    assert_eq!(call(&p, HOSTILE), Some(12), "Unimplemented");
    let lines = lines_with(&p, "a=b");
    assert_eq!(lines.len(), 1, "{}", p.log());
    for l in p.log().lines() {
        serde_json::from_str::<serde_json::Value>(l).unwrap_or_else(|e| panic!("{l}: {e}"));
    }
    let v: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(v["msg"], "request");
    assert_eq!(v["method"], HOSTILE);
    assert_eq!(v["code"], "Unimplemented");
    assert!(v.get("a").is_none(), "{v}");
}
