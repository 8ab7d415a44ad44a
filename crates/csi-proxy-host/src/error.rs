//! The one error type of the host library.
//!
//! Variants name the *kind* of failure; the gRPC layer maps each kind to a
//! status code in exactly one place (`csi_proxy_server::status`).

use std::io;

/// Result of every host operation.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A failed host operation.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request itself is malformed (bad path syntax, bad id, bad number).
    #[error("{0}")]
    InvalidArgument(String),
    /// The request is well-formed but not allowed (outside the allowed roots,
    /// escapes through a link, touches an allowed root itself).
    #[error("{0}")]
    PermissionDenied(String),
    /// A named object (path, disk, volume, service) does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The object to create exists already and is not what was asked for.
    #[error("{0}")]
    AlreadyExists(String),
    /// The host is not in a state where the operation can be done.
    #[error("{0}")]
    FailedPrecondition(String),
    /// The operation is not available (no backend on this OS, or not yet built).
    #[error("{0}")]
    Unimplemented(String),
    /// Another operation on the same disk or volume is in progress (the
    /// CSI convention for "operation in progress": retry later).
    #[error("{0}")]
    Aborted(String),
    /// The caller's deadline passed before its operation finished (the
    /// operation itself goes on; a retry joins it or finds it done).
    #[error("{0}")]
    DeadlineExceeded(String),
    /// The object is there but does not answer now (a disk whose reads
    /// hang): retry later; nothing else waits for it.
    #[error("{0}")]
    Unavailable(String),
    /// An unexpected failure of the host.
    #[error("{0}")]
    Internal(String),
    /// An OS call failed; `op` names the operation, `path` its subject.
    #[error("{op} {}: {source}", quote(.path))]
    Io {
        op: &'static str,
        path: String,
        #[source]
        source: io::Error,
    },
}

/// A copy of the same kind and message, for an answer shared by several
/// callers (one operation joined by identical calls). An I/O error keeps
/// its OS error code, or else its kind and text.
impl Clone for Error {
    fn clone(&self) -> Self {
        match self {
            Error::InvalidArgument(m) => Error::InvalidArgument(m.clone()),
            Error::PermissionDenied(m) => Error::PermissionDenied(m.clone()),
            Error::NotFound(m) => Error::NotFound(m.clone()),
            Error::AlreadyExists(m) => Error::AlreadyExists(m.clone()),
            Error::FailedPrecondition(m) => Error::FailedPrecondition(m.clone()),
            Error::Unimplemented(m) => Error::Unimplemented(m.clone()),
            Error::Aborted(m) => Error::Aborted(m.clone()),
            Error::DeadlineExceeded(m) => Error::DeadlineExceeded(m.clone()),
            Error::Unavailable(m) => Error::Unavailable(m.clone()),
            Error::Internal(m) => Error::Internal(m.clone()),
            Error::Io { op, path, source } => Error::Io {
                op,
                path: path.clone(),
                source: match source.raw_os_error() {
                    Some(code) => io::Error::from_raw_os_error(code),
                    None => io::Error::new(source.kind(), source.to_string()),
                },
            },
        }
    }
}

impl Error {
    /// An [`Error::Io`] for `op` on `path`.
    pub fn io(op: &'static str, path: impl Into<String>, source: io::Error) -> Self {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// The operation is not implemented by this host backend.
    pub fn unimplemented(group: &str, method: &str) -> Self {
        Error::Unimplemented(format!(
            "{group} API: {method} is not implemented by this csi-proxy host backend yet"
        ))
    }
}

/// A path (or name) for a message, in double quotes, as written: a
/// Windows path keeps single backslashes (`C:\var\lib\kubelet` is shown
/// `"C:\var\lib\kubelet"`, where `{:?}` doubles every separator),
/// so drivers matching upstream's texts (`\S+`) and people reading logs
/// see the path they sent. Characters that could end the quotes, break a
/// line or hide text are escaped ([`escaped`]): a `"` inside is
/// `\u{22}`, so the first `"` after the opening one always closes it (a
/// path ending in `\` reads unambiguously).
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    escape_into(&mut out, s, Spaces::Keep);
    out.push('"');
    out
}

/// What [`escaped`] does with a space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spaces {
    /// Shown as it is.
    Keep,
    /// Shown as `\u{20}`: the text holds no whitespace at all (a `\S+` in
    /// a driver's expression spans it whole, and it can never supply the
    /// spaces of a phrase a driver looks for).
    Escape,
}

/// `s` as messages show it, without quotes: backslashes single, `'` as
/// it is; a `"`, control, separator, other non-printable and every
/// [`crate::invisible`] character (U+202E, U+2028, zero-width ones,
/// U+2800, U+3164, tags, ...) as `\n`, `\t`,
/// `\0` or `\u{..}`, so the text can neither break a line nor hide or
/// reorder what follows.
pub fn escaped(s: &str, spaces: Spaces) -> String {
    let mut out = String::with_capacity(s.len());
    escape_into(&mut out, s, spaces);
    out
}

fn escape_into(out: &mut String, s: &str, spaces: Spaces) {
    use std::fmt::Write;
    for c in s.chars() {
        match c {
            '\\' | '\'' => out.push(c),
            '"' => out.push_str("\\u{22}"),
            ' ' if spaces == Spaces::Escape => out.push_str("\\u{20}"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\0' => out.push_str("\\0"),
            c if c.is_control()
                || crate::invisible::is_invisible(c)
                || c.escape_debug().nth(1).is_some() =>
            {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c if c.is_whitespace() && spaces == Spaces::Escape => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
}

/// `no_backend! { /// doc
/// Name: Trait, "group", { op(Request) -> Response = "Method", ... } }`:
/// the API `Trait` without a host backend, every operation failing with
/// [`Error::unimplemented`] naming the group and the method. The one stub
/// of every group (`NoDiskBackend`, `NoVolumeBackend`, ...).
macro_rules! no_backend {
    ($(#[$doc:meta])* $name:ident: $trait:ident, $group:literal, { $($op:ident($req:ty) -> $resp:ty = $method:literal),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default)]
        pub struct $name;

        impl $trait for $name {
            $(
                fn $op(&self, _: $req) -> $crate::Result<$resp> {
                    Err($crate::Error::unimplemented($group, $method))
                }
            )*
        }
    };
}
pub(crate) use no_backend;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_paths_keep_single_backslashes_and_escape_the_rest() {
        assert_eq!(quote(r"C:\var\lib\kubelet"), r#""C:\var\lib\kubelet""#);
        assert_eq!(quote("a\"b"), r#""a\u{22}b""#);
        // `'` as written; a final `\` cannot be read as escaping the quote.
        assert_eq!(quote(r"C:\k\o'brien"), r#""C:\k\o'brien""#);
        assert_eq!(quote(r"C:\k\"), r#""C:\k\""#);
        assert_eq!(quote("C:\\k\" x"), r#""C:\k\u{22} x""#);
        assert_eq!(quote("a\nb\0c\u{202e}d"), r#""a\nb\0c\u{202e}d""#);
        assert_eq!(quote("/var/lib/é"), "\"/var/lib/é\"");
        assert_eq!(
            escaped("a b\u{a0}c\u{200b}\u{2028}'\\", Spaces::Escape),
            r"a\u{20}b\u{a0}c\u{200b}\u{2028}'\"
        );
        assert_eq!(escaped("a b", Spaces::Keep), "a b");
        let e = Error::io("mkdir", r"C:\k\x", io::Error::other("boom"));
        assert_eq!(e.to_string(), r#"mkdir "C:\k\x": boom"#);
    }

    #[test]
    fn a_clone_keeps_kind_message_and_os_code() {
        let e = Error::io("open", "/dev/x", io::Error::from_raw_os_error(16));
        let c = e.clone();
        assert_eq!(c.to_string(), e.to_string());
        assert!(
            matches!(&c, Error::Io { op: "open", path, source } if path == "/dev/x" && source.raw_os_error() == Some(16))
        );
        let e = Error::io("read", "x", io::Error::new(io::ErrorKind::TimedOut, "slow"));
        let c = e.clone();
        assert_eq!(c.to_string(), e.to_string());
        assert!(matches!(&c, Error::Io { source, .. } if source.kind() == io::ErrorKind::TimedOut));
        let c = Error::Aborted("busy".into()).clone();
        assert!(matches!(c, Error::Aborted(m) if m == "busy"));
    }
}
