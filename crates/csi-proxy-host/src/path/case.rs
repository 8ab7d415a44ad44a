//! Windows path names compared the way NTFS compares them: each UTF-16
//! code unit upper-cased by one table, then compared unit for unit. Every
//! case-insensitive comparison of Windows paths goes through here.
//!
//! On Windows the table is the system's own: `CompareStringOrdinal(a, b,
//! TRUE)` (kernel32), which upper-cases with the same NLS table
//! (`RtlUpcaseUnicodeChar`) that `format` writes into a new NTFS volume's
//! `$UpCase`. Elsewhere (the Windows rules unit-tested on Linux) [`upcase`]
//! stands in for it: the Unicode simple uppercase mapping of each code
//! unit, kept only when it is one BMP character, except the Turkish
//! dotless ı (U+0131) and dotted İ (U+0130), which Windows' table leaves
//! alone. So, as NTFS: É = é, Σ = σ = ς, Ж = ж; but ß ≠ SS (no mapping to
//! one character), ı ≠ I, İ ≠ i, and characters outside the BMP only
//! equal themselves. Known differences from a given volume: a volume
//! formatted by an older Windows keeps that version's table, and
//! characters Unicode added since the table was made are not folded there;
//! a directory marked case-sensitive compares exactly. Either way the
//! answer is "not the same name", never a wrong "same".

/// `u` upper-cased as the stand-in for the Windows table (see the module).
pub fn upcase(u: u16) -> u16 {
    if u < 0x80 {
        return (u as u8).to_ascii_uppercase() as u16;
    }
    if u == 0x0130 || u == 0x0131 {
        return u;
    }
    let Some(c) = char::from_u32(u32::from(u)) else {
        // A surrogate: the table maps each half to itself.
        return u;
    };
    let mut up = c.to_uppercase();
    match (up.next(), up.next()) {
        (Some(x), None) => u16::try_from(u32::from(x)).unwrap_or(u),
        _ => u,
    }
}

/// Do `a` and `b` (UTF-16) name the same file under [`upcase`]?
pub fn eq_units_portable(a: &[u16], b: &[u16]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| upcase(*x) == upcase(*y))
}

/// [`eq_units_portable`] of two strings.
pub fn eq_portable(a: &str, b: &str) -> bool {
    if a.is_ascii() && b.is_ascii() {
        return a.eq_ignore_ascii_case(b);
    }
    a.encode_utf16()
        .map(upcase)
        .eq(b.encode_utf16().map(upcase))
}

/// Do `a` and `b` name the same file on Windows (case ignored as NTFS
/// ignores it)? On Windows the system's table decides; elsewhere
/// [`eq_portable`].
pub fn eq_ignore_case(a: &str, b: &str) -> bool {
    if a.is_ascii() && b.is_ascii() {
        return a.eq_ignore_ascii_case(b);
    }
    #[cfg(windows)]
    {
        os::eq(a, b)
    }
    #[cfg(not(windows))]
    {
        eq_portable(a, b)
    }
}

/// `s` without `prefix` when `s` starts with it, case ignored as by
/// [`eq_ignore_case`]. Folding keeps the number of UTF-16 units and maps
/// a surrogate only to itself, so a match spans as many characters of `s`
/// as `prefix` has (not as many bytes: `ſ` matches `S`).
pub fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    if s.is_ascii() && prefix.is_ascii() {
        let head = s.get(..prefix.len())?;
        return head.eq_ignore_ascii_case(prefix).then(|| &s[prefix.len()..]);
    }
    let n = prefix.chars().count();
    let end = match s.char_indices().nth(n) {
        Some((i, _)) => i,
        None if s.chars().count() == n => s.len(),
        None => return None,
    };
    eq_ignore_case(&s[..end], prefix).then(|| &s[end..])
}

#[cfg(windows)]
pub mod os {
    //! `CompareStringOrdinal` (kernel32).
    use windows_sys::Win32::Globalization::{CompareStringOrdinal, CSTR_EQUAL};

    /// `CompareStringOrdinal(a, b, TRUE) == CSTR_EQUAL`.
    pub fn eq_units(a: &[u16], b: &[u16]) -> bool {
        let (Ok(la), Ok(lb)) = (i32::try_from(a.len()), i32::try_from(b.len())) else {
            return false;
        };
        // SAFETY: both pointers are valid for the lengths given (the
        // slices'), which are passed explicitly, so no terminator is read;
        // the function only reads them.
        let r = unsafe { CompareStringOrdinal(a.as_ptr(), la, b.as_ptr(), lb, 1) };
        r == CSTR_EQUAL
    }

    /// [`eq_units`] of two strings.
    pub fn eq(a: &str, b: &str) -> bool {
        let a: Vec<u16> = a.encode_utf16().collect();
        let b: Vec<u16> = b.encode_utf16().collect();
        eq_units(&a, &b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pairs NTFS takes for one name, and pairs it keeps apart.
    pub const SAME: &[(&str, &str)] = &[
        ("kubelet", "KUBELET"),
        ("Élan", "éLAN"),
        ("ÀÉÎÕÜÇÑ", "àéîõüçñ"),
        ("ΣΊΣΥΦΟΣ", "σίσυφος"),
        ("Σ", "ς"),
        ("σ", "ς"),
        ("ЖУРНАЛ", "журнал"),
        ("Ёж", "ёЖ"),
        ("ŁÓDŹ", "łódź"),
        ("ſ", "S"),
        ("𝐀", "𝐀"),
    ];
    pub const APART: &[(&str, &str)] = &[
        ("straße", "STRASSE"),
        ("ß", "SS"),
        ("ı", "I"),
        ("ı", "i"),
        ("İ", "i"),
        ("İ", "I"),
        ("é", "e"),
        ("Σ", "S"),
        // Outside the BMP nothing is folded (Deseret 𐐀 / 𐐨).
        ("𐐀", "𐐨"),
        ("a", "aa"),
    ];

    #[test]
    fn folds_as_ntfs_does() {
        for (a, b) in SAME {
            assert!(eq_portable(a, b), "{a} = {b}");
            assert!(eq_portable(b, a), "{b} = {a}");
            assert!(eq_ignore_case(a, b), "{a} = {b}");
        }
        for (a, b) in APART {
            assert!(!eq_portable(a, b), "{a} != {b}");
            assert!(!eq_portable(b, a), "{b} != {a}");
            assert!(!eq_ignore_case(a, b), "{a} != {b}");
        }
        assert_eq!(upcase(0xD801), 0xD801);
        assert_eq!(upcase(u16::from(b'z')), u16::from(b'Z'));
        assert_eq!(upcase(0x00DF), 0x00DF, "ß has no one-character uppercase");
    }

    #[test]
    fn prefixes_by_characters_not_bytes() {
        assert_eq!(
            strip_prefix_ignore_case(r"C:\DONNÉES\Kubelet\x", r"c:\données\kubelet"),
            Some(r"\x")
        );
        // ſ (2 bytes) folds to S (1 byte).
        assert_eq!(strip_prefix_ignore_case("ſtore\\x", "STORE"), Some("\\x"));
        assert_eq!(strip_prefix_ignore_case("STORE\\x", "ſtore"), Some("\\x"));
        assert_eq!(strip_prefix_ignore_case("Straße", "STRASSE"), None);
        assert_eq!(strip_prefix_ignore_case("éé", "ÉÉ"), Some(""));
        assert_eq!(strip_prefix_ignore_case("é", "ÉÉ"), None);
        assert_eq!(strip_prefix_ignore_case("abc", "ABCD"), None);
        assert_eq!(strip_prefix_ignore_case("abcd", "ABC"), Some("d"));
    }

    proptest::proptest! {
        /// Folding never changes the UTF-16 length, is idempotent, and
        /// agrees with the ASCII rule on ASCII.
        #[test]
        fn fold_properties(s in "\\PC{0,16}", t in "[ -~]{0,8}") {
            let up: Vec<u16> = s.encode_utf16().map(upcase).collect();
            proptest::prop_assert_eq!(up.len(), s.encode_utf16().count());
            let again: Vec<u16> = up.iter().copied().map(upcase).collect();
            proptest::prop_assert_eq!(&again, &up);
            let lower = t.to_ascii_lowercase();
            proptest::prop_assert!(eq_portable(&t, &lower));
            proptest::prop_assert_eq!(eq_portable(&t, &s), eq_portable(&s, &t));
        }
    }
}
