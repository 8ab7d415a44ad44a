//! SMB request validation: the remote path grammar, user names and
//! passwords, checked before anything touches the host. Every failure is
//! `InvalidArgument` naming the rule; messages never contain a password.
//!
//! Remote path (after `/` → `\`, as upstream): `\\<host>\<share>[\<segment>...][\]`
//! * host: a DNS name (labels of letters, digits and `-`, not starting or
//!   ending with `-`, at most 63 characters each, 253 in all), an IPv4
//!   address, or a bracket-free IPv6 literal; never `?` or `.` (the `\\?\`
//!   and `\\.\` device forms) and nothing else;
//! * share and segments: 1 to 80 (share) / 255 (segment) characters, none
//!   of `\ / : * ? " < > |`, no control characters, not `.` or `..`, not
//!   ending in `.` or space; no empty segment (`\\h\s\\x`); no control or
//!   invisible characters ([`crate::invisible`]);
//! * at most [`MAX_REMOTE_PATH`] bytes.

use crate::{Error, Result};
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use zeroize::Zeroizing;

/// Longest remote path accepted, in bytes.
pub const MAX_REMOTE_PATH: usize = 1024;
/// Longest share name (the Windows limit).
pub const MAX_SHARE: usize = 80;
/// Longest user name (`DOMAIN\user` or `user@domain`).
pub const MAX_USERNAME: usize = 256;
/// Longest password.
pub const MAX_PASSWORD: usize = 1024;

/// Characters never allowed in a share name or path segment.
const FORBIDDEN: [char; 9] = ['\\', '/', ':', '*', '?', '"', '<', '>', '|'];

/// The host part of a remote path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Host {
    Dns(String),
    V4(Ipv4Addr),
    V6(Ipv6Addr),
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Dns(s) => f.write_str(s),
            Host::V4(a) => write!(f, "{a}"),
            Host::V6(a) => write!(f, "{a}"),
        }
    }
}

/// A remote path that passed the grammar.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemotePath {
    host: Host,
    /// As given (case kept).
    host_text: String,
    share: String,
    segments: Vec<String>,
}

/// The `\\host\share` a mapping is made for, so every subdirectory of a
/// share shares one mapping. The share keeps the request's spelling (that
/// is what is sent to the server and what links name: never a folded
/// name); two roots are the same mapping when their hosts are equal
/// ignoring ASCII case and their shares are equal under the NTFS/SMB rule
/// of [`crate::path::case`] (upstream compares lower-cased, it does not
/// send a lower-cased name either).
#[derive(Clone, Debug)]
pub struct ShareRoot {
    /// ASCII lower case (DNS names and address literals only).
    host: String,
    /// As given.
    share: String,
    /// `share` upper-cased unit by unit with [`crate::path::case::upcase`]:
    /// what roots are compared, hashed and ordered by.
    key: String,
}

impl PartialEq for ShareRoot {
    fn eq(&self, other: &Self) -> bool {
        self.host == other.host && self.key == other.key
    }
}
impl Eq for ShareRoot {}
impl std::hash::Hash for ShareRoot {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.host.hash(h);
        self.key.hash(h);
    }
}
impl PartialOrd for ShareRoot {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for ShareRoot {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (&self.host, &self.key).cmp(&(&other.host, &other.key))
    }
}

impl ShareRoot {
    /// `\\host\share` (the share as the request spelt it).
    pub fn unc(&self) -> String {
        format!(r"\\{}\{}", self.host, self.share)
    }
    /// `//host/share` (the CIFS source on Linux).
    pub fn slashed(&self) -> String {
        format!("//{}/{}", self.host, self.share)
    }
    pub fn host(&self) -> &str {
        &self.host
    }
    /// The share as the request spelt it.
    pub fn share(&self) -> &str {
        &self.share
    }
    /// The share as roots are compared (NTFS upper case): one name for
    /// every spelling of one share (the Linux mount directory).
    pub fn share_key(&self) -> &str {
        &self.key
    }
}

impl fmt::Display for ShareRoot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.unc())
    }
}

/// Where the local link of a mapping points: produced only by this module
/// (from a validated [`RemotePath`]), consumed by
/// `Confined::smb_link`. Windows: `\\?\UNC\host\share\path\`; Linux: the
/// path below the directory the share is mounted on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmbLinkTarget(String);

impl SmbLinkTarget {
    /// The target as stored in the link.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn invalid(rule: impl fmt::Display) -> Error {
    Error::InvalidArgument(format!("remote_path: {rule}"))
}

impl RemotePath {
    /// Check `raw` against the grammar.
    pub fn parse(raw: &str) -> Result<RemotePath> {
        let shown = crate::path::shown(raw);
        if raw.is_empty() {
            return Err(invalid("must not be empty"));
        }
        if raw.len() > MAX_REMOTE_PATH {
            return Err(invalid(format!(
                "{shown} is longer than {MAX_REMOTE_PATH} bytes"
            )));
        }
        if let Some(c) = raw
            .chars()
            .find(|c| c.is_control() || crate::invisible::is_invisible(*c))
        {
            return Err(invalid(format!(
                "{shown} contains control or formatting character U+{:04X}",
                c as u32
            )));
        }
        let p = raw.replace('/', "\\");
        let Some(rest) = p.strip_prefix(r"\\") else {
            return Err(invalid(format!(
                r"{shown} is not a UNC path \\host\share[\path]"
            )));
        };
        let rest = rest.strip_suffix('\\').unwrap_or(rest);
        let mut parts = rest.split('\\');
        let host_text = parts.next().unwrap_or_default();
        let host = parse_host(host_text).map_err(|why| invalid(format!("{shown}: host {why}")))?;
        let share = parts
            .next()
            .ok_or_else(|| invalid(format!(r"{shown} has no share name (\\host\share)")))?;
        check_name(share, MAX_SHARE)
            .map_err(|why| invalid(format!("{shown}: share name {why}")))?;
        let mut segments = Vec::new();
        for s in parts {
            check_name(s, 255).map_err(|why| invalid(format!("{shown}: path segment {why}")))?;
            segments.push(s.to_string());
        }
        Ok(RemotePath {
            host,
            host_text: host_text.to_string(),
            share: share.to_string(),
            segments,
        })
    }

    pub fn host(&self) -> &Host {
        &self.host
    }

    /// The share and path segments below the host.
    pub fn segments(&self) -> &[String] {
        &self.segments
    }

    /// The mapping root `\\host\share` (see [`ShareRoot`]).
    pub fn root(&self) -> ShareRoot {
        let units: Vec<u16> = self
            .share
            .encode_utf16()
            .map(crate::path::case::upcase)
            .collect();
        ShareRoot {
            host: self.host_text.to_ascii_lowercase(),
            share: self.share.clone(),
            // upcase maps a surrogate only to itself: still valid UTF-16.
            key: String::from_utf16_lossy(&units),
        }
    }

    /// The long-form link target of the whole remote path,
    /// `\\?\UNC\host\share\path\` (Windows).
    pub fn unc_link_target(&self) -> SmbLinkTarget {
        let mut s = format!(r"\\?\UNC\{}\{}\", self.host_text, self.share);
        for seg in &self.segments {
            s.push_str(seg);
            s.push('\\');
        }
        SmbLinkTarget(s)
    }

    /// The link target below `mount_dir`, where the share root is mounted
    /// (Linux): `<mount_dir>/<segments...>`.
    pub fn mounted_link_target(&self, mount_dir: &str) -> SmbLinkTarget {
        let mut s = mount_dir.trim_end_matches('/').to_string();
        for seg in &self.segments {
            s.push('/');
            s.push_str(seg);
        }
        SmbLinkTarget(s)
    }
}

fn parse_host(h: &str) -> std::result::Result<Host, String> {
    if h.is_empty() {
        return Err("is empty".into());
    }
    if h == "?" || h == "." {
        return Err(format!(
            r"{h:?}: device paths (\\?\, \\.\) are not SMB shares"
        ));
    }
    if let Ok(a) = h.parse::<Ipv4Addr>() {
        return Ok(Host::V4(a));
    }
    if h.contains(':') {
        return h
            .parse::<Ipv6Addr>()
            .map(Host::V6)
            .map_err(|_| format!("{h:?} is not an IPv6 literal (no brackets, no zone)"));
    }
    if h.len() > 253 {
        return Err("is longer than 253 characters".into());
    }
    let labels: Vec<&str> = h.split('.').collect();
    for l in &labels {
        if l.is_empty() || l.len() > 63 {
            return Err(format!("{h:?}: each DNS label has 1 to 63 characters"));
        }
        if !l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
            return Err(format!(
                "{h:?}: a DNS name has letters, digits, '-' and '.' only"
            ));
        }
        if l.starts_with('-') || l.ends_with('-') {
            return Err(format!("{h:?}: a DNS label must not start or end with '-'"));
        }
    }
    // All-numeric dotted names that are not IPv4 addresses (e.g. 1.2.3.999).
    if labels.iter().all(|l| l.bytes().all(|b| b.is_ascii_digit())) {
        return Err(format!("{h:?} is neither an IPv4 address nor a DNS name"));
    }
    Ok(Host::Dns(h.to_string()))
}

fn check_name(s: &str, max: usize) -> std::result::Result<(), String> {
    if s.is_empty() {
        return Err("is empty (doubled separator?)".into());
    }
    if s == "." || s == ".." {
        return Err(format!("{s:?} is not allowed"));
    }
    if s.chars().count() > max {
        return Err(format!("is longer than {max} characters"));
    }
    if let Some(c) = s.chars().find(|c| FORBIDDEN.contains(c)) {
        return Err(format!("{s:?} contains {c:?}"));
    }
    if s.ends_with(['.', ' ']) {
        return Err(format!("{s:?} ends with '.' or a space"));
    }
    Ok(())
}

/// A user name and password for a mapping; the password is wiped when
/// dropped and never shown.
#[derive(Clone)]
pub struct Credential {
    user: String,
    password: Zeroizing<String>,
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credential")
            .field("user", &self.user)
            .field("password", &format_args!("<redacted>"))
            .finish()
    }
}

impl Credential {
    /// Check `user` and `password`: `None` for an empty user (no
    /// credential, as upstream). The password is moved in, never copied.
    pub fn parse(user: &str, password: Zeroizing<String>) -> Result<Option<Credential>> {
        if user.is_empty() {
            if !password.is_empty() {
                return Err(Error::InvalidArgument(
                    "password: given without a username".into(),
                ));
            }
            return Ok(None);
        }
        check_user(user)?;
        if password.len() > MAX_PASSWORD {
            return Err(Error::InvalidArgument(format!(
                "password: longer than {MAX_PASSWORD} bytes"
            )));
        }
        if password.chars().any(|c| c.is_control()) {
            return Err(Error::InvalidArgument(
                "password: contains a control character (not shown)".into(),
            ));
        }
        Ok(Some(Credential {
            user: user.to_string(),
            password,
        }))
    }

    /// `DOMAIN\user`, `user@domain` or `user`.
    pub fn user(&self) -> &str {
        &self.user
    }

    /// The domain and the bare user name (`DOMAIN\user` → (`DOMAIN`,
    /// `user`), `user@domain` → (`domain`, `user`)).
    pub fn domain_and_user(&self) -> (Option<&str>, &str) {
        if let Some((d, u)) = self.user.split_once('\\') {
            (Some(d), u)
        } else if let Some((u, d)) = self.user.split_once('@') {
            (Some(d), u)
        } else {
            (None, &self.user)
        }
    }

    /// The password (secret: never log it).
    pub fn password(&self) -> &str {
        &self.password
    }
}

/// Characters Windows forbids in user names (and `:` `%`, which break the
/// credential string or a mount option).
const USER_FORBIDDEN: [char; 15] = [
    '"', '/', '[', ']', ':', ';', '|', '=', ',', '+', '*', '?', '<', '>', '%',
];

fn check_user(user: &str) -> Result<()> {
    let bad = |why: String| {
        Err(Error::InvalidArgument(format!(
            "username {}: {why}",
            crate::path::shown(user)
        )))
    };
    if user.chars().count() > MAX_USERNAME {
        return bad(format!("longer than {MAX_USERNAME} characters"));
    }
    if let Some(c) = user.chars().find(|c| c.is_control()) {
        return bad(format!("contains control character U+{:04X}", c as u32));
    }
    // "No user" means no visible user: a name of invisible characters
    // would pass as a user and show as empty in every log line.
    if let Some(c) = user.chars().find(|c| crate::invisible::is_invisible(*c)) {
        return bad(format!("contains invisible character U+{:04X}", c as u32));
    }
    if let Some(c) = user.chars().find(|c| USER_FORBIDDEN.contains(c)) {
        return bad(format!("contains {c:?}"));
    }
    let backslashes = user.matches('\\').count();
    let ats = user.matches('@').count();
    if backslashes > 1 || ats > 1 || (backslashes == 1 && ats == 1) {
        return bad(r"use DOMAIN\user, user@domain or user".into());
    }
    let (d, u) = if let Some((d, u)) = user.split_once('\\') {
        (Some(d), u)
    } else if let Some((u, d)) = user.split_once('@') {
        (Some(d), u)
    } else {
        (None, user)
    };
    if u.is_empty() || u.trim() != u {
        return bad("the user name is empty or has leading/trailing spaces".into());
    }
    if let Some(d) = d {
        if d.is_empty()
            || !d
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        {
            return bad("the domain has letters, digits, '.', '-' and '_' only".into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;

/// The hostile remote paths of the unit tests, for other test modules.
#[cfg(all(test, target_os = "linux"))]
pub(crate) fn tests_hostile() -> &'static [&'static str] {
    tests::HOSTILE_REMOTE
}
