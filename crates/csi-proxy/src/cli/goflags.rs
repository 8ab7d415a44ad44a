//! Value parsers for Go-style flags: booleans as `strconv.ParseBool`,
//! durations as `time.ParseDuration`, klog severities, octal file modes,
//! and paths that may be empty (Go's "unset").

use std::path::PathBuf;
use std::time::Duration;

/// A `PathBuf` parser that, like Go, accepts an empty value (meaning unset).
pub fn path_allowing_empty() -> impl clap::builder::TypedValueParser<Value = PathBuf> {
    use clap::builder::TypedValueParser as _;
    clap::builder::OsStringValueParser::new().map(PathBuf::from)
}

/// Parses a file mode written in octal (`0600`, `600`, `0o660`), at most 0o777.
pub fn parse_octal_mode(s: &str) -> Result<u32, String> {
    let digits = s.strip_prefix("0o").unwrap_or(s);
    match u32::from_str_radix(digits, 8) {
        Ok(mode) if mode <= 0o777 && !digits.starts_with('+') => Ok(mode),
        _ => Err(format!(
            "invalid mode {s:?} (octal, e.g. 0600, at most 0777)"
        )),
    }
}

/// Parses a boolean the way Go's `strconv.ParseBool` does.
pub fn parse_go_bool(s: &str) -> Result<bool, String> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(format!(
            "invalid boolean {s:?} (use true/false, t/f, 1/0, TRUE/FALSE, True/False)"
        )),
    }
}

/// Parses a count of at least 1 (decimal).
pub fn parse_positive_count(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n >= 1 && !s.starts_with('+') => Ok(n),
        _ => Err(format!("invalid count {s:?} (a whole number, at least 1)")),
    }
}

/// Validates a klog severity (`INFO`, `WARNING`, `ERROR`, `FATAL`, any case,
/// or 0-3) and returns it unchanged.
pub fn parse_klog_severity(s: &str) -> Result<String, String> {
    const NAMES: [&str; 4] = ["INFO", "WARNING", "ERROR", "FATAL"];
    let valid = NAMES.iter().any(|n| n.eq_ignore_ascii_case(s))
        || s.parse::<u8>().is_ok_and(|n| usize::from(n) < NAMES.len());
    if valid {
        Ok(s.to_string())
    } else {
        Err(format!(
            "invalid severity {s:?} (use INFO, WARNING, ERROR, FATAL or 0-3)"
        ))
    }
}

/// Parses a Go duration (`time.ParseDuration`): a sequence of decimal numbers
/// with units `ns`, `us` (`µs`), `ms`, `s`, `m`, `h`, e.g. `1m30s`, `1.5h`,
/// `500ms`. A bare `0` is allowed. Negative durations are rejected.
pub fn parse_go_duration(input: &str) -> Result<Duration, String> {
    let err = |why: &str| format!("invalid duration {input:?}: {why}");
    let (negative, mut s) = match input.as_bytes().first() {
        Some(b'-') => (true, &input[1..]),
        Some(b'+') => (false, &input[1..]),
        _ => (false, input),
    };
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err(err("empty (use e.g. 10s, 1m30s, 500ms)"));
    }
    // Go's limit: the duration must fit in an i64 of nanoseconds.
    const MAX_NANOS: u128 = i64::MAX as u128;
    let mut total: u128 = 0;
    while !s.is_empty() {
        let int_len = s.bytes().take_while(u8::is_ascii_digit).count();
        let (int_part, rest) = s.split_at(int_len);
        let (frac_part, rest) = match rest.strip_prefix('.') {
            Some(after) => {
                let frac_len = after.bytes().take_while(u8::is_ascii_digit).count();
                after.split_at(frac_len)
            }
            None => ("", rest),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(err("expected a number"));
        }
        let unit_len = rest
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (unit, rest) = rest.split_at(unit_len);
        let unit_nanos: u128 = match unit {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60 * 1_000_000_000,
            "h" => 3_600 * 1_000_000_000,
            "" => return Err(err("missing unit (ns, us, ms, s, m, h)")),
            _ => return Err(err(&format!("unknown unit {unit:?} (ns, us, ms, s, m, h)"))),
        };
        let overflow = || err("too large");
        let mut value: u128 = 0;
        for d in int_part.bytes() {
            value = value
                .checked_mul(10)
                .and_then(|v| v.checked_add(u128::from(d - b'0')))
                .filter(|v| *v <= MAX_NANOS)
                .ok_or_else(overflow)?;
        }
        value = value
            .checked_mul(unit_nanos)
            .filter(|v| *v <= MAX_NANOS)
            .ok_or_else(overflow)?;
        // Fraction, truncated to whole nanoseconds; digits past 1e-9 of the
        // largest unit cannot matter, so at most 13 are used.
        let (mut frac, mut scale) = (0u128, 1u128);
        for d in frac_part.bytes().take(13) {
            frac = frac * 10 + u128::from(d - b'0');
            scale *= 10;
        }
        value += frac * unit_nanos / scale;
        total = total
            .checked_add(value)
            .filter(|v| *v <= MAX_NANOS)
            .ok_or_else(overflow)?;
        s = rest;
    }
    if negative && total > 0 {
        return Err(err("must not be negative"));
    }
    let nanos = u64::try_from(total).map_err(|_| err("too large"))?;
    Ok(Duration::from_nanos(nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        let ok_cases: &[(&str, Duration)] = &[
            ("0", Duration::ZERO),
            ("-0", Duration::ZERO),
            ("0s", Duration::ZERO),
            ("10s", Duration::from_secs(10)),
            ("+10s", Duration::from_secs(10)),
            ("1m30s", Duration::from_secs(90)),
            ("500ms", Duration::from_millis(500)),
            ("1.5h", Duration::from_secs(5400)),
            (".5s", Duration::from_millis(500)),
            ("1.s", Duration::from_secs(1)),
            ("1h2m3s4ms5us6ns", Duration::new(3723, 4_005_006)),
            ("3\u{b5}s", Duration::from_micros(3)),
            ("3\u{3bc}s", Duration::from_micros(3)),
            ("0.000000001s", Duration::from_nanos(1)),
            ("0.0000000019s", Duration::from_nanos(1)),
            (
                "2562047h47m16.854775807s",
                Duration::from_nanos(i64::MAX as u64),
            ),
        ];
        for (input, want) in ok_cases {
            assert_eq!(parse_go_duration(input), Ok(*want), "{input}");
        }
        for bad in [
            "",
            "s",
            "10",
            "1x",
            "-1s",
            ".s",
            "1..5s",
            "1s2",
            "2562047h47m16.854775808s",
            "9999999999999999999h",
            " 1s",
        ] {
            assert!(parse_go_duration(bad).is_err(), "{bad:?} should fail");
        }
        let msg = parse_go_duration("10").unwrap_err();
        assert!(msg.contains("missing unit"), "{msg}");
    }

    #[test]
    fn positive_counts() {
        assert_eq!(parse_positive_count("1"), Ok(1));
        assert_eq!(parse_positive_count("1024"), Ok(1024));
        for bad in ["0", "-1", "+5", "", "1k", "1.5", " 3"] {
            assert!(parse_positive_count(bad).is_err(), "{bad:?}");
        }
    }
}
