//! iSCSI request validation, before anything runs. Every failure is
//! `InvalidArgument` naming the rule; messages never contain a CHAP secret.
//!
//! * portal address: an IPv4 address, a bracket-free IPv6 literal or a DNS
//!   name (the SMB host rules); port 1–65535, 0 meaning 3260;
//! * target names (RFC 3720 §3.2.6.3): `iqn.YYYY-MM.<reversed domain>[:<id>]`,
//!   `eui.` + 16 hex digits, or `naa.` + 16 or 32 hex digits; at most 223
//!   bytes; letters, digits, `-`, `.`, `:` only (compared lower case, as
//!   iSCSI names are case-insensitive);
//! * CHAP: with `NONE`, no user name or secret; with CHAP, a secret of 12 to
//!   16 bytes (the Microsoft initiator's limits; 12 to 255 on Linux) of
//!   printable ASCII; a user name of at most 256 printable ASCII characters.

use super::{AuthenticationType, TargetPortal};
use crate::path::Flavor;
use crate::{Error, Result};
use std::fmt;
use zeroize::Zeroizing;

/// The default iSCSI port.
pub const DEFAULT_PORT: u16 = 3260;
/// Longest iSCSI name (RFC 3720).
pub const MAX_NAME: usize = 223;
/// Shortest CHAP secret (RFC 3720 §8.2.1 asks for 96 bits).
pub const MIN_CHAP_SECRET: usize = 12;
/// Longest CHAP user name.
pub const MAX_CHAP_USER: usize = 256;

/// A checked portal address and port.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Portal {
    address: String,
    port: u16,
}

impl Portal {
    /// Check a wire portal.
    pub fn parse(p: &TargetPortal) -> Result<Portal> {
        let port = match p.target_port {
            0 => DEFAULT_PORT,
            n @ 1..=65535 => n as u16,
            n => {
                return Err(Error::InvalidArgument(format!(
                    "target_portal.target_port: {n} is not in 1..=65535 (0 means 3260)"
                )))
            }
        };
        check_address(&p.target_address)?;
        Ok(Portal {
            address: p.target_address.clone(),
            port,
        })
    }

    pub fn address(&self) -> &str {
        &self.address
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `address:port`, IPv6 in brackets (iscsiadm's portal syntax).
    pub fn host_port(&self) -> String {
        if self.address.contains(':') {
            format!("[{}]:{}", self.address, self.port)
        } else {
            format!("{}:{}", self.address, self.port)
        }
    }

    /// The wire form.
    pub fn to_wire(&self) -> TargetPortal {
        TargetPortal {
            target_address: self.address.clone(),
            target_port: self.port.into(),
        }
    }
}

impl fmt::Display for Portal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.host_port())
    }
}

fn check_address(a: &str) -> Result<()> {
    let bad = |why: &str| {
        Err(Error::InvalidArgument(format!(
            "target_portal.target_address {}: {why}",
            crate::path::shown(a)
        )))
    };
    if a.is_empty() {
        return bad("must not be empty");
    }
    if a.parse::<std::net::Ipv4Addr>().is_ok() {
        return Ok(());
    }
    if a.contains(':') {
        return match a.parse::<std::net::Ipv6Addr>() {
            Ok(_) => Ok(()),
            Err(_) => bad("not an IPv6 literal (no brackets, no zone, no port)"),
        };
    }
    if a.len() > 253 {
        return bad("longer than 253 characters");
    }
    let labels: Vec<&str> = a.split('.').collect();
    for l in &labels {
        if l.is_empty()
            || l.len() > 63
            || !l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            || l.starts_with('-')
            || l.ends_with('-')
        {
            return bad("not an IPv4 address, IPv6 literal or DNS name");
        }
    }
    if labels.iter().all(|l| l.bytes().all(|b| b.is_ascii_digit())) {
        return bad("not an IPv4 address, IPv6 literal or DNS name");
    }
    Ok(())
}

/// A checked iSCSI target name, lower case.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Iqn(String);

impl Iqn {
    pub fn parse(name: &str) -> Result<Iqn> {
        let bad = |why: &str| {
            Err(Error::InvalidArgument(format!(
                "iqn {}: {why}",
                crate::path::shown(name)
            )))
        };
        if name.is_empty() {
            return bad("must not be empty");
        }
        if name.len() > MAX_NAME {
            return bad("longer than 223 bytes");
        }
        if !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b':'))
        {
            return bad("only letters, digits, '-', '.' and ':' are allowed");
        }
        let lower = name.to_ascii_lowercase();
        let hex = |s: &str| s.bytes().all(|b| b.is_ascii_hexdigit());
        if let Some(rest) = lower.strip_prefix("eui.") {
            if rest.len() != 16 || !hex(rest) {
                return bad("eui. names have exactly 16 hex digits");
            }
        } else if let Some(rest) = lower.strip_prefix("naa.") {
            if !(rest.len() == 16 || rest.len() == 32) || !hex(rest) {
                return bad("naa. names have 16 or 32 hex digits");
            }
        } else if let Some(rest) = lower.strip_prefix("iqn.") {
            // iqn.YYYY-MM.reversed.domain[:anything]
            let (date, after) = rest.split_at(rest.len().min(7));
            let b = date.as_bytes();
            let date_ok = b.len() == 7
                && b[..4].iter().all(u8::is_ascii_digit)
                && b[4] == b'-'
                && b[5..].iter().all(u8::is_ascii_digit)
                && (1..=12).contains(&((b[5] - b'0') * 10 + (b[6] - b'0')));
            if !date_ok {
                return bad("iqn. names continue with a date YYYY-MM");
            }
            let Some(after) = after.strip_prefix('.') else {
                return bad("iqn. names need '.<reversed domain>' after the date");
            };
            let domain = after.split(':').next().unwrap_or_default();
            if domain.is_empty()
                || domain.split('.').any(|l| {
                    l.is_empty() || l.starts_with('-') || l.ends_with('-') || l.contains(':')
                })
            {
                return bad("the naming authority must be a reversed domain name");
            }
        } else {
            return bad("not an iqn., eui. or naa. name (RFC 3720)");
        }
        Ok(Iqn(lower))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Iqn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A CHAP secret: checked, never shown, wiped when dropped.
#[derive(Clone)]
pub struct Secret(Zeroizing<String>);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl Secret {
    /// Check `s` (moved in) as a CHAP secret for `flavor`; `what` names the
    /// field in messages.
    pub fn parse(s: Zeroizing<String>, flavor: Flavor, what: &str) -> Result<Secret> {
        let max = match flavor {
            Flavor::Windows => 16,
            Flavor::Unix => 255,
        };
        if s.len() < MIN_CHAP_SECRET || s.len() > max {
            return Err(Error::InvalidArgument(format!(
                "{what}: must have {MIN_CHAP_SECRET} to {max} bytes (it has {})",
                s.len()
            )));
        }
        if !s.bytes().all(|b| (0x20..0x7f).contains(&b)) {
            return Err(Error::InvalidArgument(format!(
                "{what}: printable ASCII only (the offending character is not shown)"
            )));
        }
        Ok(Secret(s))
    }

    /// The secret (never log it).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

/// Checked authentication of a ConnectTarget.
#[derive(Clone, Debug)]
pub enum Auth {
    None,
    OneWay { user: String, secret: Secret },
    Mutual { user: String, secret: Secret },
}

impl Auth {
    /// Check the CHAP fields of a ConnectTarget against `auth_type`.
    pub fn parse(
        auth_type: AuthenticationType,
        user: &str,
        secret: Zeroizing<String>,
        flavor: Flavor,
    ) -> Result<Auth> {
        if user.chars().count() > MAX_CHAP_USER {
            return Err(Error::InvalidArgument(format!(
                "chap_username: longer than {MAX_CHAP_USER} characters"
            )));
        }
        if !user.bytes().all(|b| (0x21..0x7f).contains(&b)) {
            return Err(Error::InvalidArgument(format!(
                "chap_username {}: printable ASCII without spaces only",
                crate::path::shown(user)
            )));
        }
        match auth_type {
            AuthenticationType::None => {
                if !user.is_empty() || !secret.is_empty() {
                    return Err(Error::InvalidArgument(
                        "auth_type NONE: chap_username and chap_secret must be empty".into(),
                    ));
                }
                Ok(Auth::None)
            }
            AuthenticationType::OneWayChap => Ok(Auth::OneWay {
                user: user.to_string(),
                secret: Secret::parse(secret, flavor, "chap_secret")?,
            }),
            AuthenticationType::MutualChap => Ok(Auth::Mutual {
                user: user.to_string(),
                secret: Secret::parse(secret, flavor, "chap_secret")?,
            }),
        }
    }

    /// The WMI `AuthenticationType` string.
    pub fn wmi_name(&self) -> &'static str {
        match self {
            Auth::None => "NONE",
            Auth::OneWay { .. } => "ONEWAYCHAP",
            Auth::Mutual { .. } => "MUTUALCHAP",
        }
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
pub(crate) fn tests_hostile_iqns() -> &'static [&'static str] {
    tests::HOSTILE_IQNS
}

#[cfg(test)]
pub(crate) fn tests_hostile_addresses() -> &'static [&'static str] {
    tests::HOSTILE_ADDRESSES
}
