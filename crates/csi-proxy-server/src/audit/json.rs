//! The few JSON pieces the audit log writes by hand: strings and the
//! RFC 3339 timestamp (formatted by `csi_proxy_host::time_format`).

use std::fmt::Write as _;
use std::time::SystemTime;

/// Append `s` as a JSON string.
pub fn string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{2028}' || c == '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Append `t` as RFC 3339 UTC with microseconds, quoted:
/// `"2026-11-27T04:01:15.123456Z"`.
pub fn timestamp(out: &mut String, t: SystemTime) {
    out.push('"');
    csi_proxy_host::time_format::rfc3339_micros(out, t);
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn strings_round_trip_through_a_json_parser() {
        for s in [
            "plain",
            "q\"uote\\back",
            "ctl\u{1}\n\t\r",
            "é ✓ \u{2028}",
            "",
        ] {
            let mut out = String::new();
            string(&mut out, s);
            let back: String = serde_json::from_str(&out).unwrap();
            assert_eq!(back, s);
        }
    }

    #[test]
    fn timestamps() {
        let mut out = String::new();
        timestamp(
            &mut out,
            UNIX_EPOCH + Duration::from_micros(1_709_251_198_000_007),
        );
        assert_eq!(out, "\"2024-02-29T23:59:58.000007Z\"");
    }
}
