//! Values as WMI delivers them, and WQL literals built from our own data.
//!
//! Through the scripting (`IDispatch`) interface a CIM `uint64` property
//! (e.g. `MSFT_Disk.Size`) arrives as a `BSTR` holding the decimal number,
//! because automation has no unsigned 64-bit variant type. [`cim_u64`] and
//! [`cim_u32`] read such strings strictly: ASCII digits only, at least one,
//! no sign, no space, no overflow.
//!
//! [`wql_string_literal`] quotes a value for a WQL `WHERE X = '<value>'`
//! clause. WQL has no escape for the quote characters, so instead of trying
//! to escape them the function refuses values containing `'` or `"`; it
//! also refuses control characters (NUL included), and doubles `\`, the
//! escape character of WQL string literals.

use super::error::ParseError;

/// A CIM `uint64` delivered as a decimal string.
pub fn cim_u64(v: &str) -> Result<u64, ParseError> {
    const WHAT: &str = "CIM uint64";
    if v.is_empty() {
        return Err(ParseError::invalid(WHAT, "empty string"));
    }
    let mut acc: u64 = 0;
    for c in v.bytes() {
        if !c.is_ascii_digit() {
            return Err(ParseError::invalid(
                WHAT,
                format!("{} is not a decimal number", shown(v)),
            ));
        }
        acc = acc
            .checked_mul(10)
            .and_then(|a| a.checked_add(u64::from(c - b'0')))
            .ok_or_else(|| ParseError::invalid(WHAT, format!("{} overflows", shown(v))))?;
    }
    Ok(acc)
}

/// A CIM `uint32` delivered as a decimal string (same rules as [`cim_u64`]).
pub fn cim_u32(v: &str) -> Result<u32, ParseError> {
    let n = cim_u64(v).map_err(|e| match e {
        ParseError::Invalid { detail, .. } => ParseError::invalid("CIM uint32", detail),
        other => other,
    })?;
    u32::try_from(n)
        .map_err(|_| ParseError::invalid("CIM uint32", format!("{} overflows", shown(v))))
}

/// `value` as a quoted WQL string literal, e.g. `C:\x` → `'C:\\x'`.
pub fn wql_string_literal(value: &str) -> Result<String, ParseError> {
    const WHAT: &str = "WQL string value";
    let mut out = String::with_capacity(value.len().saturating_add(2));
    out.push('\'');
    for c in value.chars() {
        match c {
            '\'' | '"' => {
                return Err(ParseError::invalid(
                    WHAT,
                    format!("quote character {c:?} is not allowed"),
                ))
            }
            c if c.is_control() => {
                return Err(ParseError::invalid(
                    WHAT,
                    format!("control character {c:?} is not allowed"),
                ))
            }
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('\'');
    Ok(out)
}

/// `v` for an error message: debug-quoted, cut after 40 characters.
fn shown(v: &str) -> String {
    const MAX: usize = 40;
    if v.chars().count() <= MAX {
        format!("{v:?}")
    } else {
        let head: String = v.chars().take(MAX).collect();
        format!("{head:?}...")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn u64_accepts_plain_decimal() {
        assert_eq!(cim_u64("0"), Ok(0));
        assert_eq!(cim_u64("137438953472"), Ok(137_438_953_472));
        assert_eq!(cim_u64("007"), Ok(7));
        assert_eq!(cim_u64("18446744073709551615"), Ok(u64::MAX));
    }

    #[test]
    fn u64_rejects() {
        for bad in [
            "",
            " 1",
            "1 ",
            "+1",
            "-1",
            "1.0",
            "1e3",
            "0x10",
            "18446744073709551616",
            "99999999999999999999999",
            "\u{0661}",
            "1\0",
        ] {
            assert!(cim_u64(bad).is_err(), "{bad:?}");
        }
        let long = "9".repeat(100);
        let msg = cim_u64(&long).unwrap_err().to_string();
        assert!(msg.ends_with("\"... overflows"), "{msg}");
    }

    #[test]
    fn u32_bounds() {
        assert_eq!(cim_u32("4294967295"), Ok(u32::MAX));
        assert!(cim_u32("4294967296").is_err());
        assert_eq!(
            cim_u32("x").unwrap_err(),
            ParseError::invalid("CIM uint32", "\"x\" is not a decimal number")
        );
    }

    #[test]
    fn wql_literals() {
        assert_eq!(wql_string_literal(""), Ok("''".to_string()));
        assert_eq!(
            wql_string_literal(r"\\?\Volume{e3c9e316-0b5c-4db8-817d-f92df00215ae}\"),
            Ok(r"'\\\\?\\Volume{e3c9e316-0b5c-4db8-817d-f92df00215ae}\\'".to_string())
        );
        assert_eq!(
            wql_string_literal(r"\\server\share"),
            Ok(r"'\\\\server\\share'".to_string())
        );
        assert_eq!(wql_string_literal("disk é"), Ok("'disk é'".to_string()));
        for bad in [
            "'",
            "a' OR 'a'='a",
            "\"",
            "a\0b",
            "a\nb",
            "\u{7f}",
            "\u{85}",
        ] {
            assert!(wql_string_literal(bad).is_err(), "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn u64_round_trips(n in any::<u64>()) {
            prop_assert_eq!(cim_u64(&n.to_string()), Ok(n));
        }

        #[test]
        fn u32_round_trips(n in any::<u32>()) {
            prop_assert_eq!(cim_u32(&n.to_string()), Ok(n));
        }

        #[test]
        fn u64_never_panics_and_agrees_with_std(s in any::<String>()) {
            let ours = cim_u64(&s).ok();
            let std_ok = if s.bytes().all(|c| c.is_ascii_digit()) { s.parse::<u64>().ok() } else { None };
            prop_assert_eq!(ours, std_ok);
        }

        #[test]
        fn wql_literal_is_quoted_and_unescapes_back(s in any::<String>()) {
            if let Ok(lit) = wql_string_literal(&s) {
                prop_assert!(lit.starts_with('\'') && lit.ends_with('\'') && lit.len() >= 2);
                let inner = &lit[1..lit.len() - 1];
                prop_assert!(!inner.contains('\'') && !inner.contains('"'));
                prop_assert!(!inner.chars().any(char::is_control));
                prop_assert_eq!(inner.replace("\\\\", "\\"), s);
            } else {
                prop_assert!(s.chars().any(|c| c == '\'' || c == '"' || c.is_control()));
            }
        }
    }
}
