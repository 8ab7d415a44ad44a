//! Escaping for the klog text line, so that what a client sends (a method
//! path, a volume path) can neither end the line and start a fake one, nor
//! add a `key=value` pair to it, nor hide or reorder the text around it.
//!
//! Values are written as they are when nothing in them needs care, else
//! quoted the way Go's `strconv.Quote` (and so klog's and logr's text
//! formats) quote a string. Messages are not quoted, only escaped.

use std::fmt::Write as _;

/// Characters written escaped: the C0 controls, DEL and the C1 controls,
/// every white space but the space (line and paragraph separators among
/// them), and the invisible format characters that hide or reorder text
/// (soft hyphen, bidi marks and overrides, zero-width characters, BOM).
fn escaped(c: char) -> bool {
    c.is_control()
        || (c.is_whitespace() && c != ' ')
        || matches!(
            c as u32,
            0xAD | 0x61C
                | 0x180E
                | 0x200B..=0x200F
                | 0x202A..=0x202E
                | 0x2060..=0x206F
                | 0xFEFF
                | 0xFFF9..=0xFFFB
        )
}

/// Go's escape of `c`: `\a \b \f \n \r \t \v`, else `\xhh` below 0x80
/// and `\uhhhh` above (every [`escaped`] character is in the BMP).
fn push_escaped(out: &mut String, c: char) {
    let short = match c {
        '\u{7}' => "\\a",
        '\u{8}' => "\\b",
        '\u{c}' => "\\f",
        '\n' => "\\n",
        '\r' => "\\r",
        '\t' => "\\t",
        '\u{b}' => "\\v",
        _ => "",
    };
    if !short.is_empty() {
        out.push_str(short);
    } else if (c as u32) < 0x80 {
        let _ = write!(out, "\\x{:02x}", c as u32);
    } else {
        let _ = write!(out, "\\u{:04x}", c as u32);
    }
}

/// Appends the message `s` with its [`escaped`] characters escaped (a
/// backslash stays as it is: a message is not quoted).
pub(super) fn message(out: &mut String, s: &str) {
    for c in s.chars() {
        if escaped(c) {
            push_escaped(out, c);
        } else {
            out.push(c);
        }
    }
}

/// Whether a value has to be quoted: empty, or holding a space, `=`, `"`
/// or an [`escaped`] character.
fn needs_quotes(s: &str) -> bool {
    s.is_empty()
        || s.chars()
            .any(|c| c == ' ' || c == '=' || c == '"' || escaped(c))
}

/// Appends the value `s`: as it is, or quoted, with `"` and `\` escaped
/// besides the [`escaped`] characters.
pub(super) fn value(out: &mut String, s: &str) {
    if !needs_quotes(s) {
        out.push_str(s);
        return;
    }
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if escaped(c) => push_escaped(out, c),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> String {
        let mut out = String::new();
        value(&mut out, s);
        out
    }

    fn m(s: &str) -> String {
        let mut out = String::new();
        message(&mut out, s);
        out
    }

    #[test]
    fn plain_values_stay_as_they_are() {
        for s in [
            "Mount",
            "/var/lib/kubelet/pods/x",
            r"C:\var\lib",
            "1.5",
            "é-ü",
            "a\u{301}",
        ] {
            assert_eq!(v(s), s);
        }
    }

    #[test]
    fn values_that_could_add_a_pair_or_a_line_are_quoted() {
        assert_eq!(v(""), r#""""#);
        assert_eq!(v("a b"), r#""a b""#);
        assert_eq!(v("a=b"), r#""a=b""#);
        assert_eq!(v(r#"say "hi""#), r#""say \"hi\"""#);
        assert_eq!(v("x\ny=z"), r#""x\ny=z""#);
        assert_eq!(v(r"C:\a b"), r#""C:\\a b""#);
        assert_eq!(
            v("/p\n\" a=b"),
            r#""/p\n\" a=b""#,
            "a newline, a quote and a pair"
        );
    }

    /// The escapes are Go's `strconv.Quote`'s.
    #[test]
    fn control_characters_are_escaped_like_go() {
        assert_eq!(v("\u{7}\u{8}\u{c}\n\r\t\u{b}"), r#""\a\b\f\n\r\t\v""#);
        assert_eq!(v("\0\u{1b}[31m\u{7f}"), r#""\x00\x1b[31m\x7f""#);
        assert_eq!(v("\u{85}\u{9b}"), r#""\u0085\u009b""#, "C1");
        assert_eq!(
            v("\u{2028}\u{2029}\u{a0}"),
            r#""\u2028\u2029\u00a0""#,
            "separators and other spaces"
        );
        assert_eq!(
            v("a\u{202e}b\u{200b}\u{feff}"),
            r#""a\u202eb\u200b\ufeff""#,
            "bidi override, zero width, BOM"
        );
    }

    #[test]
    fn every_escaped_character_is_quoted_and_leaves_no_raw_control() {
        for c in (0..=0x10ffffu32)
            .filter_map(char::from_u32)
            .filter(|&c| escaped(c))
        {
            let s = format!("a{c}b");
            let q = v(&s);
            assert!(q.starts_with('"') && q.ends_with('"'), "{q}");
            assert!(q.chars().all(|c| !escaped(c)), "{c:?}: {q:?}");
            assert!(m(&s).chars().all(|c| !escaped(c)), "{c:?}");
        }
    }

    #[test]
    fn messages_are_escaped_not_quoted() {
        assert_eq!(m("hello world a=b \"x\""), "hello world a=b \"x\"");
        assert_eq!(
            m("one\nI0101 00:00:00.000000 1 fake.go:1] two"),
            r"one\nI0101 00:00:00.000000 1 fake.go:1] two"
        );
        assert_eq!(m("tab\there\r\u{1b}"), r"tab\there\r\x1b");
        assert_eq!(m(r"C:\dir"), r"C:\dir");
    }
}
