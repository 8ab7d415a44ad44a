//! Windows path names compared the way NTFS compares them: each UTF-16
//! code unit upper-cased by one table, then compared unit for unit. Every
//! case-insensitive comparison of Windows paths goes through here.
//!
//! On Windows the table is the system's own: `CompareStringOrdinal(a, b,
//! TRUE)` (kernel32), which upper-cases with the NLS table
//! (`RtlUpcaseUnicodeChar`) that `format` writes into a new NTFS volume's
//! `$UpCase`. Elsewhere (the Windows rules unit-tested on Linux) [`upcase`]
//! stands in for it: a code unit maps to the Unicode simple uppercase of
//! its character only when that is a BMP character whose own lowercase
//! is the unit again (a round trip), and not for the case pairs Unicode
//! 16 added ([`NEWER_THAN_THE_TABLE`]). That is the table as wine's
//! `CompareStringOrdinal` has it, checked unit by unit under wine
//! (`os_tests`), and against Windows' by `real_windows_case`. So: É = é,
//! Σ = σ, Ж = ж; but ς ≠ σ and ſ ≠ s (their uppercase lowercases to
//! another letter), ß ≠ SS (no one-character uppercase), ı ≠ I and İ ≠ i
//! (no round trip), ǅ ≠ Ǆ (titlecase), and nothing outside the BMP folds.
//! Known differences from a given volume: one formatted by an older
//! Windows keeps that version's table, and a directory marked
//! case-sensitive compares exactly; the proofs of the confined filesystem
//! then fail and the call is refused, never answered for another name.

/// Case pairs (lower, upper) that Unicode 16.0 added, which the tables of
/// today's Windows and wine predate: not folded.
pub const NEWER_THAN_THE_TABLE: &[(u16, u16)] = &[
    (0x019B, 0xA7DC),
    (0x0264, 0xA7CB),
    (0x1C8A, 0x1C89),
    (0xA7CD, 0xA7CC),
    (0xA7CF, 0xA7CE),
    (0xA7D3, 0xA7D2),
    (0xA7D5, 0xA7D4),
    (0xA7DB, 0xA7DA),
];

/// `u` upper-cased as the stand-in for the Windows table (see the module).
pub fn upcase(u: u16) -> u16 {
    if u < 0x80 {
        return (u as u8).to_ascii_uppercase() as u16;
    }
    let Some(c) = char::from_u32(u32::from(u)) else {
        // A surrogate: the table maps each half to itself.
        return u;
    };
    let Some(up) = simple_uppercase(c) else {
        return u;
    };
    let Ok(up16) = u16::try_from(u32::from(up)) else {
        return u;
    };
    let round_trip = single(up.to_lowercase()) == Some(c);
    if up16 == u || !round_trip || NEWER_THAN_THE_TABLE.contains(&(u, up16)) {
        return u;
    }
    up16
}

/// The simple (one-character) uppercase mapping of `c`: std gives the
/// full one, which differs only where SpecialCasing lists more than one
/// character; of those, only the Greek letters with ypogegrammeni have a
/// simple mapping (their titlecase form: ᾀ → ᾈ).
fn simple_uppercase(c: char) -> Option<char> {
    if let Some(up) = single(c.to_uppercase()) {
        return Some(up);
    }
    let u = u32::from(c);
    let up = match u {
        0x1F80..=0x1F87 | 0x1F90..=0x1F97 | 0x1FA0..=0x1FA7 => u + 8,
        0x1FB3 | 0x1FC3 | 0x1FF3 => u + 9,
        _ => return None,
    };
    char::from_u32(up)
}

fn single(mut it: impl Iterator<Item = char>) -> Option<char> {
    match (it.next(), it.next()) {
        (Some(c), None) => Some(c),
        _ => None,
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
/// as `prefix` has (not as many bytes: `ɐ` matches `Ɐ`).
pub fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    if s.is_ascii() && prefix.is_ascii() {
        let head = s.get(..prefix.len())?;
        return head
            .eq_ignore_ascii_case(prefix)
            .then(|| &s[prefix.len()..]);
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
        ("ΣΟΦΊΑ", "σοφία"),
        ("Σ", "σ"),
        ("ЖУРНАЛ", "журнал"),
        ("Ёж", "ёЖ"),
        ("ŁÓDŹ", "łódź"),
        ("ǆ", "Ǆ"),
        ("ᾀ", "ᾈ"),
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
        ("ς", "Σ"),
        ("ς", "σ"),
        ("ſ", "S"),
        ("µ", "Μ"),
        ("ǅ", "Ǆ"),
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
        // ɐ (2 bytes in UTF-8) upper-cases to Ɐ (3 bytes).
        assert_eq!(strip_prefix_ignore_case("ɐb\\x", "ⱯB"), Some("\\x"));
        assert_eq!(strip_prefix_ignore_case("ⱯB\\x", "ɐb"), Some("\\x"));
        // The Kelvin sign is not k: no table maps one to the other.
        assert_eq!(strip_prefix_ignore_case("\u{212A}ey", "KEY"), None);
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

/// The stand-in against the `CompareStringOrdinal` of the system the tests
/// run on (wine here; real Windows in the tier), every BMP code unit.
#[cfg(all(test, windows))]
mod os_tests {
    use super::*;

    #[test]
    fn the_portable_fold_is_the_system_table() {
        let mut differ = Vec::new();
        for u in 0x80..=u16::MAX {
            let up = upcase(u);
            if up != u && !os::eq_units(&[u], &[up]) {
                differ.push(format!("U+{u:04X} ~ U+{up:04X}: joined here only"));
            }
            // Everything the system might join u with: its case mappings.
            let c = char::from_u32(u32::from(u));
            let related = c
                .into_iter()
                .flat_map(|c| c.to_lowercase().chain(c.to_uppercase()))
                .filter_map(|r| u16::try_from(u32::from(r)).ok())
                .filter(|&r| r != u);
            for r in related {
                if os::eq_units(&[u], &[r]) != (upcase(u) == upcase(r)) {
                    differ.push(format!("U+{u:04X} ~ U+{r:04X}"));
                }
            }
        }
        assert!(
            differ.is_empty(),
            "{} differences: {differ:?}",
            differ.len()
        );
    }
}
