//! Path security: the one gate every client-supplied local path passes
//! through before anything touches the host.
//!
//! The logic works on strings with an explicit [`Flavor`], so both the Windows
//! and the Unix rules are unit-tested on any OS; only [`OsLinks`] talks to the
//! real filesystem.
//!
//! Two levels:
//!
//! * [`PathPolicy::check`]: lexical only. The syntax rules of the flavour
//!   (listed below) and membership in an allowed root on a component
//!   boundary. Touches nothing.
//! * [`PathPolicy::resolve`]: `check`, then every existing link in the chain
//!   is resolved (realpath, bounded to [`MAX_LINK_HOPS`] hops) and the result
//!   must still lie inside a (resolved) root. The returned [`ResolvedPath`] is
//!   what the backend must operate on.
//!
//! Resolution is a check at one point in time: a link planted between the
//! check and the operation is not seen, so backends should still refuse to
//! follow a final-component link when deleting and prefer handle-based
//! operations on the [`ResolvedPath`].
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
//! most 255 bytes. Root membership is ASCII-case-insensitive (never Unicode
//! folding, which would equate e.g. the Kelvin sign with `k`).
//!
//! Unix rules: non-empty, at most 4096 bytes, components at most 255 bytes,
//! no control characters, must start with `/`, no `..` anywhere, no `.` or
//! empty components (one trailing `/` is accepted and dropped). Root
//! membership is case-sensitive.

use std::fmt;

use crate::error::{Error, Result};

mod os;
mod resolve;
mod rules;
#[cfg(test)]
mod tests;

pub use os::{classify_reparse_point, OsLinks, IO_REPARSE_TAG_MOUNT_POINT, IO_REPARSE_TAG_SYMLINK};

/// Maximum number of links followed while resolving one path.
pub const MAX_LINK_HOPS: usize = 256;

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

/// A path whose links were resolved and whose result lies inside an allowed
/// (resolved) root: the path the backend must operate on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResolvedPath {
    path: String,
    is_root: bool,
}

impl ResolvedPath {
    /// The resolved path.
    pub fn as_str(&self) -> &str {
        &self.path
    }

    /// The resolved path, by value.
    pub fn into_string(self) -> String {
        self.path
    }

    /// Whether the resolved path is one of the allowed roots (as written or
    /// resolved) itself.
    pub fn is_root(&self) -> bool {
        self.is_root
    }
}

impl AsRef<str> for ResolvedPath {
    fn as_ref(&self) -> &str {
        &self.path
    }
}

impl fmt::Display for ResolvedPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.path)
    }
}

/// What one path names, as far as link resolution cares.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Link {
    /// Nothing exists at the path (or a parent is not a directory).
    NotFound,
    /// It exists and is not a link.
    NotALink,
    /// A symbolic link (or a Windows directory junction) with its target as
    /// stored; it may be relative to the link's parent.
    Symlink(String),
    /// A Windows volume mount point (a junction to `\??\Volume{...}\`): a
    /// mount, treated as a directory and not followed.
    MountPoint,
}

/// Reads links; [`OsLinks`] is the real filesystem, tests use fakes.
pub trait LinkReader {
    /// What `path` is, without following a link at `path` itself. Every
    /// parent of `path` has already been resolved.
    fn read_link(&self, path: &str) -> std::io::Result<Link>;

    /// A fast path: `true` only if the OS proves in one call that every
    /// component of `path` exists and none is a link, so that resolving it
    /// would change nothing. `false` means "not known"; the resolver then
    /// asks [`LinkReader::read_link`] component by component.
    fn is_link_free(&self, _path: &str) -> bool {
        false
    }
}

impl<T: LinkReader + ?Sized> LinkReader for &T {
    fn read_link(&self, path: &str) -> std::io::Result<Link> {
        (**self).read_link(path)
    }
    fn is_link_free(&self, path: &str) -> bool {
        (**self).is_link_free(path)
    }
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

    /// [`check`](Self::check), then ask the OS for a one-call proof that
    /// the whole path exists and that none of its components (the root's
    /// included) is a link ([`LinkReader::is_link_free`]). `Some` means the
    /// path exists, resolves to itself and is inside a root, with no further
    /// question asked; `None` means "not proven", and the caller takes the
    /// full [`resolve`](Self::resolve) route. This is how the polled
    /// read-only calls (PathExists, IsSymlink) stay at one system call.
    pub fn prove_link_free(
        &self,
        path: &str,
        links: &dyn LinkReader,
    ) -> Result<Option<CheckedPath>> {
        let checked = self.check(path)?;
        Ok(links.is_link_free(checked.as_str()).then_some(checked))
    }

    /// [`check`](Self::check), then resolve every existing link in the chain
    /// (all components but the last; the last too when `follow_final`), then
    /// verify the resolved path is still inside a (resolved) root.
    ///
    /// Returns the path the backend must operate on. With `follow_final ==
    /// false` a link at the final component is the object operated on (e.g.
    /// removing a link never removes its target).
    pub fn resolve(
        &self,
        path: &str,
        links: &dyn LinkReader,
        follow_final: bool,
    ) -> Result<ResolvedPath> {
        let checked = self.check(path)?;
        resolve::resolve(self, path, &checked, links, follow_final)
    }

    fn roots_list(&self) -> String {
        self.roots.join(", ")
    }
}

/// A path for an error message: escaped (`{:?}`) and truncated to
/// [`SHOWN_CHARS`] characters.
pub(crate) fn shown(path: &str) -> String {
    match path.char_indices().nth(SHOWN_CHARS) {
        None => format!("{path:?}"),
        Some((cut, _)) => format!("{:?}... ({} bytes)", &path[..cut], path.len()),
    }
}
