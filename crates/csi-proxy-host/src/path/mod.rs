//! Path security: the one gate every client-supplied local path passes
//! through before anything touches the host.
//!
//! The logic works on strings with an explicit [`Flavor`], so both the Windows
//! and the Unix rules are unit-tested on any OS; only [`OsLinks`] talks to the
//! real filesystem.
//!
//! [`PathPolicy::check`] is lexical only: the syntax rules of the flavour
//! (listed below) and membership in an allowed root on a component
//! boundary. It touches nothing. Everything that touches the filesystem goes
//! through [`crate::confined`], which opens each root once and resolves the
//! rest of a checked path beneath that root handle, never following a link
//! in the parent chain; [`PathPolicy::link_destination`] decides, lexically,
//! where a final-component link may be followed to.
//!
//! Syntax violations are [`Error::InvalidArgument`]; leaving the allowed roots,
//! lexically or through a link, is [`Error::PermissionDenied`]. Every message
//! names the rule and the (truncated, escaped) path.
//!
//! Windows rules (stricter than upstream csi-proxy, see
//! `upstream-contract.md` section 9): non-empty, at most 260 bytes, no control
//! characters, no leading `\` (UNC, `\\?\`, `\\.\`, rooted), must start with
//! `X:\`, none of `/ " * ? | < >`, no `:` after the drive (alternate data
//! streams), no `..` anywhere, no `.` or empty components (one trailing `\`
//! is accepted and dropped), no component ending in `.` or space, no DOS
//! device name in any component (with or without extension), components at
//! most 255 bytes. Root membership ignores case as NTFS does ([`case`]:
//! one upper-casing table, never Unicode case folding, which would equate
//! e.g. the Kelvin sign with `k`).
//!
//! Unix rules: non-empty, at most 4096 bytes, components at most 255 bytes,
//! no control characters, must start with `/`, no `..` anywhere, no `.` or
//! empty components (one trailing `/` is accepted and dropped). Root
//! membership is case-sensitive.

use std::fmt;

use crate::error::{Error, Result};

pub mod case;
#[cfg(all(test, windows))]
mod long_names_tests;
mod reparse;
mod rules;
mod spelling;
mod target;
#[cfg(test)]
mod tests;

pub use reparse::{classify_reparse_point, IO_REPARSE_TAG_MOUNT_POINT, IO_REPARSE_TAG_SYMLINK};
pub use spelling::long_root;

/// Characters of a path shown in an error message before it is truncated.
const SHOWN_CHARS: usize = 300;

/// Which OS's path rules apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flavor {
    /// `C:\dir\file`: drive letter, `\` separator, case-insensitive.
    Windows,
    /// `/dir/file`: `/` separator, case-sensitive.
    Unix,
}

impl Flavor {
    /// The flavour of the OS this binary was built for.
    pub const NATIVE: Flavor = if cfg!(windows) {
        Flavor::Windows
    } else {
        Flavor::Unix
    };

    /// The component separator.
    pub const fn separator(self) -> char {
        match self {
            Flavor::Windows => '\\',
            Flavor::Unix => '/',
        }
    }

    /// Maximum length of a whole client-supplied path, in UTF-8 bytes.
    pub const fn max_path_bytes(self) -> usize {
        match self {
            Flavor::Windows => 260,
            Flavor::Unix => 4096,
        }
    }
}

/// A path that passed the lexical checks: syntax rules and inside an allowed
/// root. A single trailing separator has been dropped (except for a drive or
/// filesystem root such as `C:\` or `/`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CheckedPath {
    path: String,
    is_root: bool,
}

impl CheckedPath {
    /// The normalised path.
    pub fn as_str(&self) -> &str {
        &self.path
    }

    /// The normalised path, by value.
    pub fn into_string(self) -> String {
        self.path
    }

    /// Whether the path is one of the allowed roots itself (callers refuse to
    /// delete or empty a root).
    pub fn is_root(&self) -> bool {
        self.is_root
    }

    /// A prefix of a checked path, cut at a component boundary: checked by
    /// construction (the confined filesystem walks up from a checked path).
    pub(crate) fn new_unchecked(path: String, is_root: bool) -> CheckedPath {
        CheckedPath { path, is_root }
    }
}

impl AsRef<str> for CheckedPath {
    fn as_ref(&self) -> &str {
        &self.path
    }
}

impl fmt::Display for CheckedPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.path)
    }
}

/// What a Windows reparse point is ([`classify_reparse_point`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Link {
    /// Not a link (no reparse point, or one of a kind that is a plain file
    /// or directory, such as deduplication or cloud files).
    NotALink,
    /// A symbolic link (or a directory junction) with its target as stored;
    /// it may be relative to the link's parent.
    Symlink(String),
    /// A volume mount point (a junction to `\??\Volume{...}\`).
    MountPoint,
}

/// The allowed roots (kubelet path and working dirs) and the flavour of paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathPolicy {
    flavor: Flavor,
    roots: Vec<String>,
}

impl PathPolicy {
    /// A policy allowing paths equal to or below any of `roots`.
    ///
    /// Roots come from flags; each must itself pass the syntax rules
    /// (absolute, etc.); trailing separators are dropped. At least one root
    /// is required.
    pub fn new(flavor: Flavor, roots: impl IntoIterator<Item = impl Into<String>>) -> Result<Self> {
        let mut out: Vec<String> = Vec::new();
        for root in roots {
            let root: String = root.into();
            let sep = flavor.separator();
            let mut trimmed = root.as_str();
            while trimmed.ends_with(sep) && !rules::is_fs_root(flavor, trimmed) {
                trimmed = &trimmed[..trimmed.len() - sep.len_utf8()];
            }
            let normal = rules::normalize(flavor, trimmed, true).map_err(|v| {
                Error::InvalidArgument(format!("invalid allowed root: path {} {v}", shown(&root)))
            })?;
            if !out.iter().any(|r| rules::same_path(flavor, r, &normal)) {
                out.push(normal);
            }
        }
        if out.is_empty() {
            return Err(Error::InvalidArgument(
                "no allowed roots configured: at least one root (the kubelet path) is required"
                    .to_string(),
            ));
        }
        Ok(PathPolicy { flavor, roots: out })
    }

    /// The flavour of paths this policy checks.
    pub fn flavor(&self) -> Flavor {
        self.flavor
    }

    /// The allowed roots, normalised, as written.
    pub fn roots(&self) -> &[String] {
        &self.roots
    }

    /// Lexical checks only: syntax rules, and inside a root on a component
    /// boundary. Touches nothing.
    pub fn check(&self, path: &str) -> Result<CheckedPath> {
        let normal = rules::normalize(self.flavor, path, true)
            .map_err(|v| Error::InvalidArgument(format!("path {} {v}", shown(path))))?;
        if !self
            .roots
            .iter()
            .any(|r| rules::within(self.flavor, &normal, r))
        {
            return Err(Error::PermissionDenied(format!(
                "path {} is outside the allowed roots ({})",
                shown(path),
                self.roots_list()
            )));
        }
        let is_root = self
            .roots
            .iter()
            .any(|r| rules::same_path(self.flavor, r, &normal));
        Ok(CheckedPath {
            path: normal,
            is_root,
        })
    }

    fn roots_list(&self) -> String {
        self.roots.join(", ")
    }
}

/// A path for an error message: quoted as written ([`crate::error::quote`]:
/// single backslashes, control characters escaped) and truncated to
/// [`SHOWN_CHARS`] characters.
pub(crate) fn shown(path: &str) -> String {
    use crate::error::quote;
    match path.char_indices().nth(SHOWN_CHARS) {
        None => quote(path),
        Some((cut, _)) => format!("{}... ({} bytes)", quote(&path[..cut]), path.len()),
    }
}
