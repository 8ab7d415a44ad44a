//! The lexical syntax rules of both flavours, and root membership.

use std::fmt;

use super::Flavor;

/// Maximum length of one path component, in UTF-8 bytes.
pub(super) const MAX_COMPONENT_BYTES: usize = 255;

/// DOS device names, reserved in every directory, with or without an
/// extension. Compared ASCII-case-insensitively.
const RESERVED_DEVICES: &[&str] = &[
    "CON",
    "PRN",
    "AUX",
    "NUL",
    "CONIN$",
    "CONOUT$",
    "COM0",
    "COM1",
    "COM2",
    "COM3",
    "COM4",
    "COM5",
    "COM6",
    "COM7",
    "COM8",
    "COM9",
    "COM\u{b9}",
    "COM\u{b2}",
    "COM\u{b3}",
    "LPT0",
    "LPT1",
    "LPT2",
    "LPT3",
    "LPT4",
    "LPT5",
    "LPT6",
    "LPT7",
    "LPT8",
    "LPT9",
    "LPT\u{b9}",
    "LPT\u{b2}",
    "LPT\u{b3}",
];

/// A broken rule: the tail of a message `path "..." <violation>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Violation(String);

impl Violation {
    fn new(text: impl Into<String>) -> Self {
        Violation(text.into())
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Applies the syntax rules of `flavor` and returns the normalised path (one
/// trailing separator dropped, except for a drive/filesystem root).
/// `limit_total` enforces the whole-path length limit (client-supplied paths
/// and roots); resolved paths only get the component limit.
pub(super) fn normalize(
    flavor: Flavor,
    path: &str,
    limit_total: bool,
) -> Result<String, Violation> {
    if path.is_empty() {
        return Err(Violation::new("is empty"));
    }
    let max = flavor.max_path_bytes();
    if limit_total && path.len() > max {
        return Err(Violation::new(format!(
            "is longer than {max} bytes ({} bytes)",
            path.len()
        )));
    }
    check_control(path)?;
    match flavor {
        Flavor::Windows => normalize_windows(path),
        Flavor::Unix => normalize_unix(path),
    }
}

fn check_control(path: &str) -> Result<(), Violation> {
    if path.contains('\0') {
        return Err(Violation::new("contains a NUL character"));
    }
    if let Some(c) = path.chars().find(|c| c.is_control()) {
        return Err(Violation::new(format!(
            "contains a control character (U+{:04X})",
            c as u32
        )));
    }
    Ok(())
}

fn is_sep_byte(b: u8) -> bool {
    b == b'\\' || b == b'/'
}

/// Which kind of path starts with a separator, for the message.
fn windows_leading_separator(b: &[u8]) -> Violation {
    let sep_at = |i: usize| b.get(i).copied().is_some_and(is_sep_byte);
    let kind = if sep_at(1) && b.get(2) == Some(&b'?') && sep_at(3) {
        r"\\?\ extended-length or device prefix"
    } else if sep_at(1) && b.get(2) == Some(&b'.') && sep_at(3) {
        r"\\.\ device namespace"
    } else if b.get(1) == Some(&b'?') && b.get(2) == Some(&b'?') && sep_at(3) {
        r"\??\ NT object namespace"
    } else if sep_at(1) {
        r"\\server\share network share"
    } else {
        "rooted at the current drive, without a drive letter"
    };
    Violation::new(format!("is a UNC or device path ({kind})"))
}

fn normalize_windows(path: &str) -> Result<String, Violation> {
    let b = path.as_bytes();
    if is_sep_byte(b[0]) {
        return Err(windows_leading_separator(b));
    }
    if !(b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':') {
        return Err(Violation::new(
            r"is not absolute (must start with a drive letter, ':' and '\', e.g. C:\)",
        ));
    }
    match b.get(2) {
        Some(b'\\') => {}
        Some(b'/') => {
            return Err(Violation::new(r"contains '/' (only '\' is a separator)"));
        }
        _ => {
            return Err(Violation::new(
                r"is drive-relative (the drive letter and ':' must be followed by '\')",
            ));
        }
    }
    // The first three bytes are ASCII, so index 3 is a char boundary.
    let rest = &path[3..];
    for c in rest.chars() {
        match c {
            '/' => return Err(Violation::new(r"contains '/' (only '\' is a separator)")),
            ':' => return Err(Violation::new("contains an alternate data stream (':')")),
            '"' | '*' | '?' | '|' | '<' | '>' => {
                return Err(Violation::new(format!(
                    "contains a forbidden character ('{c}')"
                )));
            }
            _ => {}
        }
    }
    let body = components(Flavor::Windows, rest)?;
    Ok(format!("{}{body}", &path[..3]))
}

fn normalize_unix(path: &str) -> Result<String, Violation> {
    let Some(rest) = path.strip_prefix('/') else {
        return Err(Violation::new("is not absolute (must start with '/')"));
    };
    let body = components(Flavor::Unix, rest)?;
    Ok(format!("/{body}"))
}

/// Checks the part after the root (`C:\` or `/`); returns it with one
/// trailing separator dropped.
fn components(flavor: Flavor, rest: &str) -> Result<&str, Violation> {
    let sep = flavor.separator();
    if rest.split(sep).any(|c| c == "..") {
        return Err(Violation::new(r#"contains a ".." component"#));
    }
    if rest.contains("..") {
        return Err(Violation::new(
            r#"contains ".." (rejected anywhere, even inside a name)"#,
        ));
    }
    let body = rest.strip_suffix(sep).unwrap_or(rest);
    if body.is_empty() {
        if rest.is_empty() {
            return Ok(body);
        }
        // `C:\\` or `//`.
        return Err(empty_component(flavor));
    }
    for comp in body.split(sep) {
        check_component(flavor, comp)?;
    }
    Ok(body)
}

fn empty_component(flavor: Flavor) -> Violation {
    let sep = flavor.separator();
    Violation::new(format!(
        "contains an empty component (doubled separator '{sep}{sep}')"
    ))
}

fn check_component(flavor: Flavor, comp: &str) -> Result<(), Violation> {
    if comp.is_empty() {
        return Err(empty_component(flavor));
    }
    if comp == "." {
        return Err(Violation::new(r#"contains a "." component"#));
    }
    if comp == ".." {
        return Err(Violation::new(r#"contains a ".." component"#));
    }
    if comp.len() > MAX_COMPONENT_BYTES {
        return Err(Violation::new(format!(
            "has a component longer than {MAX_COMPONENT_BYTES} bytes ({} bytes)",
            comp.len()
        )));
    }
    if flavor == Flavor::Windows {
        if comp.ends_with('.') {
            return Err(Violation::new(format!(
                "has a component ending in '.' ({})",
                super::shown(comp)
            )));
        }
        if comp.ends_with(' ') {
            return Err(Violation::new(format!(
                "has a component ending in a space ({})",
                super::shown(comp)
            )));
        }
        if let Some(dev) = reserved_device(comp) {
            return Err(Violation::new(format!("names a reserved device ({dev})")));
        }
    }
    Ok(())
}

/// The DOS device `comp` names, if any: its part before the first `.`, with
/// trailing spaces dropped, compared case-insensitively.
pub(super) fn reserved_device(comp: &str) -> Option<&'static str> {
    let base = comp.split('.').next().unwrap_or(comp).trim_end_matches(' ');
    RESERVED_DEVICES
        .iter()
        .copied()
        .find(|dev| dev.eq_ignore_ascii_case(base))
}

/// `C:\` or `/`: a root with nothing below it.
pub(super) fn is_fs_root(flavor: Flavor, path: &str) -> bool {
    match flavor {
        Flavor::Unix => path == "/",
        Flavor::Windows => {
            let b = path.as_bytes();
            b.len() == 3 && b[0].is_ascii_alphabetic() && b[1] == b':' && b[2] == b'\\'
        }
    }
}

/// Two normalised paths name the same file (Windows: case ignored as NTFS
/// ignores it, [`super::case`]).
pub(super) fn same_path(flavor: Flavor, a: &str, b: &str) -> bool {
    match flavor {
        Flavor::Windows => super::case::eq_ignore_case(a, b),
        Flavor::Unix => a == b,
    }
}

/// `path` equals `root` or lies below it on a component boundary (both
/// normalised). Windows: case ignored as NTFS ignores it ([`super::case`]:
/// one upper-case table per UTF-16 unit, no other Unicode folding).
pub(super) fn within(flavor: Flavor, path: &str, root: &str) -> bool {
    let rest = match flavor {
        Flavor::Windows => super::case::strip_prefix_ignore_case(path, root),
        Flavor::Unix => path.strip_prefix(root),
    };
    let sep = flavor.separator();
    rest.is_some_and(|rest| rest.is_empty() || root.ends_with(sep) || rest.starts_with(sep))
}

/// Splits a normalised path into its root prefix (`C:` or empty) and its
/// components.
pub(super) fn split(flavor: Flavor, normal: &str) -> (String, Vec<String>) {
    let (prefix, rest) = match flavor {
        Flavor::Windows => (&normal[..2], &normal[3..]),
        Flavor::Unix => ("", &normal[1..]),
    };
    let comps = rest
        .split(flavor.separator())
        .filter(|c| !c.is_empty())
        .map(str::to_string)
        .collect();
    (prefix.to_string(), comps)
}

/// The inverse of [`split`].
pub(super) fn join(flavor: Flavor, prefix: &str, comps: &[String]) -> String {
    let sep = flavor.separator();
    let mut s = String::from(prefix);
    if comps.is_empty() {
        s.push(sep);
    }
    for c in comps {
        s.push(sep);
        s.push_str(c);
    }
    s
}
