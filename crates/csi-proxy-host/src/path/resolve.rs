//! Bounded link resolution (the realpath algorithm over a [`LinkReader`]).
//!
//! Components are walked left to right on top of a fully resolved prefix.
//! Each existing component is asked about: a plain entry or a mount point is
//! appended; a symlink restarts from its target (absolute) or from the link's
//! parent joined with the target (relative), followed by the components not
//! yet walked. `..` in link targets is applied lexically to the resolved
//! prefix, which is correct because that prefix contains no links. Once a
//! component does not exist the rest is appended without asking (until a
//! `..` climbs back above the missing component). At most
//! [`MAX_LINK_HOPS`] links are followed.

use std::collections::VecDeque;
use std::io;

use super::rules;
use super::{
    shown, CheckedPath, Flavor, Link, LinkReader, PathPolicy, ResolvedPath, MAX_LINK_HOPS,
};
use crate::error::{Error, Result};

/// Why a walk stopped.
#[derive(Debug)]
enum WalkError {
    TooManyLinks,
    /// A link whose target leaves the local filesystem tree (UNC share,
    /// volume GUID path, device, drive-relative).
    Escape {
        link: String,
        target: String,
        kind: &'static str,
    },
    EmptyTarget {
        link: String,
    },
    Io {
        path: String,
        source: io::Error,
    },
}

impl WalkError {
    fn into_error(self, original: &str) -> Error {
        match self {
            WalkError::TooManyLinks => Error::InvalidArgument(format!(
                "path {} has too many levels of links (more than {MAX_LINK_HOPS})",
                shown(original)
            )),
            WalkError::Escape { link, target, kind } => Error::PermissionDenied(format!(
                "path {} escapes the allowed roots through a link to {kind} ({} -> {})",
                shown(original),
                shown(&link),
                shown(&target)
            )),
            WalkError::EmptyTarget { link } => Error::InvalidArgument(format!(
                "path {} goes through a link with an empty target ({})",
                shown(original),
                shown(&link)
            )),
            WalkError::Io { path, source } => Error::io("read link", path, source),
        }
    }
}

/// A link target, parsed.
#[derive(Debug, PartialEq, Eq)]
enum Target {
    /// Absolute: a new prefix (`C:` or empty) and components.
    Absolute(String, Vec<String>),
    /// Windows `\dir`: the root of the current drive.
    Rooted(Vec<String>),
    /// Relative to the link's parent.
    Relative(Vec<String>),
}

fn target_components(flavor: Flavor, s: &str) -> Vec<String> {
    let is_sep = |c: char| match flavor {
        Flavor::Windows => c == '\\' || c == '/',
        Flavor::Unix => c == '/',
    };
    s.split(is_sep)
        .filter(|c| !c.is_empty() && *c != ".")
        .map(str::to_string)
        .collect()
}

fn is_win_sep(b: u8) -> bool {
    b == b'\\' || b == b'/'
}

/// `X:\...` (or `X:/...`).
fn is_drive_absolute(b: &[u8]) -> bool {
    b.len() >= 3 && b[0].is_ascii_alphabetic() && b[1] == b':' && is_win_sep(b[2])
}

/// The rest after a `\??\` or `\\?\` prefix.
pub(super) fn strip_nt_prefix(t: &str) -> Option<&str> {
    let b = t.as_bytes();
    let nt = b.len() >= 4
        && is_win_sep(b[0])
        && (b[1] == b'?' || is_win_sep(b[1]))
        && b[2] == b'?'
        && is_win_sep(b[3]);
    // The first four bytes are ASCII, so index 4 is a char boundary.
    nt.then(|| &t[4..])
}

fn starts_with_ci(s: &str, prefix: &str) -> bool {
    s.len() >= prefix.len() && s.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

fn parse_target(flavor: Flavor, target: &str) -> std::result::Result<Target, &'static str> {
    if flavor == Flavor::Unix {
        return Ok(match target.strip_prefix('/') {
            Some(rest) => Target::Absolute(String::new(), target_components(flavor, rest)),
            None => Target::Relative(target_components(flavor, target)),
        });
    }
    if let Some(rest) = strip_nt_prefix(target) {
        let b = rest.as_bytes();
        if is_drive_absolute(b) {
            return Ok(Target::Absolute(
                rest[..2].to_string(),
                target_components(flavor, &rest[3..]),
            ));
        }
        if starts_with_ci(rest, "UNC\\") || starts_with_ci(rest, "UNC/") {
            return Err("a UNC network share");
        }
        if starts_with_ci(rest, "Volume{") {
            return Err("a volume GUID path");
        }
        return Err("a device or NT namespace path");
    }
    let b = target.as_bytes();
    if b.len() >= 2 && is_win_sep(b[0]) && is_win_sep(b[1]) {
        if b.get(2) == Some(&b'.') && b.get(3).copied().is_some_and(is_win_sep) {
            return Err("a device path");
        }
        return Err("a UNC network share");
    }
    if b.first().copied().is_some_and(is_win_sep) {
        return Ok(Target::Rooted(target_components(flavor, &target[1..])));
    }
    if b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':' {
        if is_drive_absolute(b) {
            return Ok(Target::Absolute(
                target[..2].to_string(),
                target_components(flavor, &target[3..]),
            ));
        }
        return Err("a drive-relative path");
    }
    Ok(Target::Relative(target_components(flavor, target)))
}

/// Resolves the links in `start` (a normalised path). Returns the resolved
/// path, not yet checked against anything.
fn walk(
    flavor: Flavor,
    start: &str,
    links: &dyn LinkReader,
    follow_final: bool,
) -> std::result::Result<String, WalkError> {
    let (mut prefix, comps) = rules::split(flavor, start);
    // Fast path: if the OS proves that every component the walk would ask
    // about exists and is not a link, the walk would return the path as it is.
    if !comps.iter().any(|c| c == "." || c == "..") {
        let asked = if follow_final {
            comps.len()
        } else {
            comps.len().saturating_sub(1)
        };
        if links.is_link_free(&rules::join(flavor, &prefix, &comps[..asked])) {
            return Ok(rules::join(flavor, &prefix, &comps));
        }
    }
    let mut queue: VecDeque<String> = comps.into();
    let mut done: Vec<String> = Vec::new();
    // Index in `done` of the first component that does not exist.
    let mut missing_at: Option<usize> = None;
    let mut hops = 0usize;

    while let Some(comp) = queue.pop_front() {
        if comp == "." {
            continue;
        }
        if comp == ".." {
            done.pop();
            if missing_at.is_some_and(|m| done.len() <= m) {
                missing_at = None;
            }
            continue;
        }
        let last = queue.is_empty();
        if missing_at.is_some() || (last && !follow_final) {
            done.push(comp);
            continue;
        }
        done.push(comp);
        let candidate = rules::join(flavor, &prefix, &done);
        let link = links
            .read_link(&candidate)
            .map_err(|source| WalkError::Io {
                path: candidate.clone(),
                source,
            })?;
        match link {
            Link::NotALink | Link::MountPoint => {}
            Link::NotFound => missing_at = Some(done.len() - 1),
            Link::Symlink(target) => {
                hops += 1;
                if hops > MAX_LINK_HOPS {
                    return Err(WalkError::TooManyLinks);
                }
                if target.is_empty() {
                    return Err(WalkError::EmptyTarget { link: candidate });
                }
                // The link itself is replaced by its target.
                done.pop();
                let comps = match parse_target(flavor, &target) {
                    Ok(Target::Absolute(p, comps)) => {
                        prefix = p;
                        done.clear();
                        comps
                    }
                    Ok(Target::Rooted(comps)) => {
                        done.clear();
                        comps
                    }
                    Ok(Target::Relative(comps)) => comps,
                    Err(kind) => {
                        return Err(WalkError::Escape {
                            link: candidate,
                            target,
                            kind,
                        })
                    }
                };
                for c in comps.into_iter().rev() {
                    queue.push_front(c);
                }
            }
        }
    }
    Ok(rules::join(flavor, &prefix, &done))
}

/// The allowed roots with their links resolved (following a final link). A
/// root that does not exist stays as written; a root whose resolution fails
/// is skipped (fail closed) with a warning.
fn resolved_roots(policy: &PathPolicy, links: &dyn LinkReader) -> Vec<String> {
    let flavor = policy.flavor();
    policy
        .roots()
        .iter()
        .filter_map(|root| {
            let resolved = match walk(flavor, root, links, true) {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(root = %root, error = %e.into_error(root), "allowed root cannot be resolved; ignoring it");
                    return None;
                }
            };
            match rules::normalize(flavor, &resolved, false) {
                Ok(n) => Some(n),
                Err(v) => {
                    tracing::warn!(root = %root, resolved = %resolved, rule = %v, "allowed root resolves to an invalid path; ignoring it");
                    None
                }
            }
        })
        .collect()
}

pub(super) fn resolve(
    policy: &PathPolicy,
    original: &str,
    checked: &CheckedPath,
    links: &dyn LinkReader,
    follow_final: bool,
) -> Result<ResolvedPath> {
    let flavor = policy.flavor();
    let resolved =
        walk(flavor, checked.as_str(), links, follow_final).map_err(|e| e.into_error(original))?;
    // Link targets are not bound by the syntax rules, but the path the backend
    // will use must be (a device name, a stream, a trailing dot reached
    // through a link are as dangerous as typed ones). Only the whole-length
    // limit is lifted.
    let resolved = rules::normalize(flavor, &resolved, false).map_err(|v| {
        Error::PermissionDenied(format!(
            "path {} resolves through links to {}, which {v}",
            shown(original),
            shown(&resolved)
        ))
    })?;
    let roots = resolved_roots(policy, links);
    // A root as written is accepted too, but only exactly: this is the root
    // link itself when the final component is not followed (and `is_root`
    // makes callers refuse to delete it). Anything below a root that is a
    // link has been resolved through it.
    let inside = roots.iter().any(|r| rules::within(flavor, &resolved, r))
        || policy
            .roots()
            .iter()
            .any(|r| rules::same_path(flavor, r, &resolved));
    if !inside {
        let shown_roots = if roots.is_empty() {
            "none resolvable".to_string()
        } else {
            roots.join(", ")
        };
        return Err(Error::PermissionDenied(format!(
            "path {} escapes the allowed roots through a link (resolves to {}; allowed roots: {shown_roots})",
            shown(original),
            shown(&resolved)
        )));
    }
    let is_root = roots
        .iter()
        .chain(policy.roots())
        .any(|r| rules::same_path(flavor, r, &resolved));
    Ok(ResolvedPath {
        path: resolved,
        is_root,
    })
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn parse_windows_targets() {
        let w = Flavor::Windows;
        let abs = |p: &str, c: &[&str]| {
            Ok(Target::Absolute(
                p.to_string(),
                c.iter().map(|s| s.to_string()).collect(),
            ))
        };
        assert_eq!(parse_target(w, r"\??\C:\data\x"), abs("C:", &["data", "x"]));
        assert_eq!(parse_target(w, r"\\?\D:\"), abs("D:", &[]));
        assert_eq!(parse_target(w, r"e:/a/./b"), abs("e:", &["a", "b"]));
        assert_eq!(
            parse_target(w, r"..\x"),
            Ok(Target::Relative(vec!["..".into(), "x".into()]))
        );
        assert_eq!(parse_target(w, r"\x"), Ok(Target::Rooted(vec!["x".into()])));
        assert_eq!(
            parse_target(w, r"\\?\UNC\srv\share"),
            Err("a UNC network share")
        );
        assert_eq!(
            parse_target(w, r"\??\unc\srv\share"),
            Err("a UNC network share")
        );
        assert_eq!(
            parse_target(w, r"\\srv\share\x"),
            Err("a UNC network share")
        );
        assert_eq!(parse_target(w, r"//srv/share"), Err("a UNC network share"));
        assert_eq!(
            parse_target(w, r"\\?\Volume{01234567-89ab-cdef-0123-456789abcdef}\"),
            Err("a volume GUID path")
        );
        assert_eq!(parse_target(w, r"\\.\PhysicalDrive0"), Err("a device path"));
        assert_eq!(
            parse_target(w, r"\??\GLOBALROOT\Device\HarddiskVolume1"),
            Err("a device or NT namespace path")
        );
        assert_eq!(parse_target(w, "C:"), Err("a drive-relative path"));
        assert_eq!(parse_target(w, "C:x"), Err("a drive-relative path"));
    }

    #[test]
    fn parse_unix_targets() {
        let u = Flavor::Unix;
        assert_eq!(
            parse_target(u, "/data//kubelet/"),
            Ok(Target::Absolute(
                String::new(),
                vec!["data".into(), "kubelet".into()]
            ))
        );
        assert_eq!(
            parse_target(u, "../a\\b"),
            Ok(Target::Relative(vec!["..".into(), "a\\b".into()]))
        );
        assert_eq!(
            parse_target(u, "/"),
            Ok(Target::Absolute(String::new(), vec![]))
        );
    }
}
