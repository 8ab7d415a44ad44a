//! Where a link points, lexically: the one hop a final-component link is
//! followed (a mount target that is a link to the staging directory, an
//! `IsSymlink` whose target must exist). The target text is turned into a
//! client-style path without touching anything, and that path must pass the
//! same checks as a path a client sent (syntax, inside a root); otherwise the
//! link is simply not followed. Nothing here reads the filesystem, so no
//! answer can depend on what exists outside the roots.

use super::rules;
use super::{CheckedPath, Flavor, PathPolicy};

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

impl PathPolicy {
    /// The path a link at `link` leads to when its stored target is
    /// `target`, if that path lies inside the allowed roots and passes the
    /// syntax rules. Relative targets are taken from the link's parent;
    /// `..` in a target is applied lexically. UNC, device, volume-GUID and
    /// drive-relative targets are never followed (`None`).
    pub fn link_destination(&self, link: &CheckedPath, target: &str) -> Option<CheckedPath> {
        let flavor = self.flavor();
        if target.is_empty() {
            return None;
        }
        let (link_prefix, link_comps) = rules::split(flavor, link.as_str());
        let (prefix, comps) = match parse_target(flavor, target).ok()? {
            Target::Absolute(p, comps) => (p, comps),
            Target::Rooted(comps) => (link_prefix, comps),
            Target::Relative(comps) => {
                let mut all = link_comps[..link_comps.len().saturating_sub(1)].to_vec();
                all.extend(comps);
                (link_prefix, all)
            }
        };
        let mut out: Vec<String> = Vec::with_capacity(comps.len());
        for c in comps {
            if c == ".." {
                out.pop();
            } else {
                out.push(c);
            }
        }
        self.check(&rules::join(flavor, &prefix, &out)).ok()
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn destinations() {
        let u = PathPolicy::new(Flavor::Unix, ["/k", "/w"]).unwrap();
        let link = u.check("/k/pods/a/mount").unwrap();
        let dest = |t: &str| u.link_destination(&link, t).map(|c| c.as_str().to_string());
        assert_eq!(dest("/w/staging").as_deref(), Some("/w/staging"));
        assert_eq!(dest("staging").as_deref(), Some("/k/pods/a/staging"));
        assert_eq!(dest("../../b/./x/").as_deref(), Some("/k/b/x"));
        assert_eq!(dest("../b").as_deref(), Some("/k/pods/b"));
        assert_eq!(dest("../../../../etc"), None);
        assert_eq!(dest("/etc/passwd"), None);
        assert_eq!(dest("/k"), Some("/k".to_string()));
        assert_eq!(dest(""), None);
        assert_eq!(dest("/kX/y"), None);
        let w = PathPolicy::new(Flavor::Windows, [r"C:\var\lib\kubelet"]).unwrap();
        let link = w.check(r"C:\var\lib\kubelet\pods\m").unwrap();
        let dest = |t: &str| w.link_destination(&link, t).map(|c| c.as_str().to_string());
        assert_eq!(
            dest(r"\??\C:\var\lib\kubelet\plugins\s").as_deref(),
            Some(r"C:\var\lib\kubelet\plugins\s")
        );
        assert_eq!(
            dest(r"\var\lib\kubelet\x").as_deref(),
            Some(r"C:\var\lib\kubelet\x")
        );
        assert_eq!(dest(r"..\s").as_deref(), Some(r"C:\var\lib\kubelet\s"));
        assert_eq!(dest(r"\\?\UNC\srv\share"), None);
        assert_eq!(dest(r"\\srv\share\x"), None);
        assert_eq!(
            dest(r"\??\Volume{01234567-89ab-cdef-0123-456789abcdef}\"),
            None
        );
        assert_eq!(dest(r"D:\var\lib\kubelet"), None);
        assert_eq!(dest(r"C:\var\lib\kubelet\CON"), None);
    }

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
