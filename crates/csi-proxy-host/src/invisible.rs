//! "Invisible" characters: the one home of the predicate every check and
//! every message uses (user names, remote paths, the escaper of
//! `error::quote`/`escaped` and so `compat::phrase_path`). A name made of
//! them shows as nothing, or shows differently from what it is.
//!
//! The set: Unicode General_Category Cf (format: soft hyphen, Arabic letter
//! mark, zero-width ones, bidirectional embeddings/overrides/isolates, BOM,
//! interlinear annotations, tags, musical format marks, ...), the other
//! Default_Ignorable_Code_Points (combining grapheme joiner, Hangul
//! fillers, Khmer inherent vowels, Mongolian free variation selectors,
//! variation selectors, the ignorable planes-14 range) and the blank
//! Braille pattern U+2800.

/// Is `c` invisible (see the module doc)?
pub fn is_invisible(c: char) -> bool {
    matches!(
        c as u32,
        // Cf
        0x00AD
            | 0x0600..=0x0605
            | 0x061C
            | 0x06DD
            | 0x070F
            | 0x0890..=0x0891
            | 0x08E2
            | 0x180E
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x206F
            | 0xFEFF
            | 0xFFF9..=0xFFFB
            | 0x110BD
            | 0x110CD
            | 0x13430..=0x1343F
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            // Other default-ignorable code points
            | 0x034F
            | 0x115F..=0x1160
            | 0x17B4..=0x17B5
            | 0x180B..=0x180F
            | 0x3164
            | 0xFE00..=0xFE0F
            | 0xFFA0
            | 0xE0000..=0xE0FFF
            // Blank Braille pattern
            | 0x2800
    )
}

#[cfg(test)]
mod tests {
    use super::is_invisible;

    #[test]
    fn the_listed_characters_are_invisible_and_letters_are_not() {
        for c in [
            '\u{00AD}',
            '\u{034F}',
            '\u{061C}',
            '\u{115F}',
            '\u{1160}',
            '\u{180E}',
            '\u{200B}',
            '\u{200D}',
            '\u{200F}',
            '\u{202A}',
            '\u{202E}',
            '\u{2060}',
            '\u{2066}',
            '\u{206F}',
            '\u{2800}',
            '\u{3164}',
            '\u{FE0F}',
            '\u{FEFF}',
            '\u{FFA0}',
            '\u{FFF9}',
            '\u{FFFB}',
            '\u{E0000}',
            '\u{E0020}',
            '\u{E007F}',
            '\u{E0100}',
            '\u{1D173}',
        ] {
            assert!(is_invisible(c), "U+{:04X}", c as u32);
        }
        for c in [
            'a', 'Z', '0', 'é', 'Σ', 'ж', '\u{212A}', '-', '_', '.', ' ', '\u{2801}',
        ] {
            assert!(!is_invisible(c), "U+{:04X}", c as u32);
        }
    }
}
