//! `REG_MULTI_SZ`-style string lists as Win32 returns them (e.g.
//! `GetVolumePathNamesForVolumeNameW`): UTF-16 strings, each ended by a
//! NUL, the list ended by an empty string.

use super::error::ParseError;

/// The strings of a NUL-separated, double-NUL-terminated UTF-16 list. Stops
/// at the first empty string or at the end of the buffer (a last string
/// without its NUL is truncated). Strings that are not valid UTF-16 are
/// invalid.
pub fn parse_multi_sz(buf: &[u16]) -> Result<Vec<String>, ParseError> {
    const WHAT: &str = "NUL-separated string list";
    let mut out = Vec::new();
    let mut rest = buf;
    while !rest.is_empty() {
        let Some(end) = rest.iter().position(|&c| c == 0) else {
            return Err(ParseError::truncated(WHAT, buf.len() + 1, buf.len()));
        };
        if end == 0 {
            break;
        }
        let s = String::from_utf16(&rest[..end])
            .map_err(|_| ParseError::invalid(WHAT, "a string is not valid UTF-16"))?;
        out.push(s);
        rest = &rest[end + 1..];
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn w(s: &str) -> Vec<u16> {
        s.encode_utf16().collect()
    }

    #[test]
    fn lists() {
        assert_eq!(
            parse_multi_sz(&w("C:\\\0D:\\mnt\\x\\\0\0")).unwrap(),
            ["C:\\", "D:\\mnt\\x\\"]
        );
        assert!(parse_multi_sz(&w("\0")).unwrap().is_empty());
        assert!(parse_multi_sz(&[]).unwrap().is_empty());
        // Anything after the terminating empty string is ignored.
        assert_eq!(parse_multi_sz(&w("a\0\0b\0\0")).unwrap(), ["a"]);
        // A missing final NUL after the last string.
        assert!(matches!(
            parse_multi_sz(&w("a\0b")),
            Err(ParseError::Truncated { .. })
        ));
        assert!(matches!(
            parse_multi_sz(&[0xD800, 0, 0]),
            Err(ParseError::Invalid { .. })
        ));
    }

    proptest! {
        #[test]
        fn never_panics_and_round_trips(v in proptest::collection::vec("[a-zA-Z:\\\\é]{1,12}", 0..6), junk in proptest::collection::vec(any::<u16>(), 0..40)) {
            let mut buf = Vec::new();
            for s in &v { buf.extend(s.encode_utf16()); buf.push(0); }
            buf.push(0);
            prop_assert_eq!(parse_multi_sz(&buf).unwrap(), v);
            let _ = parse_multi_sz(&junk);
        }
    }
}
