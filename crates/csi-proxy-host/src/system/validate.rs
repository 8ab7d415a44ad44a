//! Service names and the service allow-list, checked before anything runs.
//!
//! A [`ServiceName`] exists only after [`ServiceName::parse`] accepted it,
//! so a backend cannot be handed an unchecked name.
//!
//! Rules (every failure is `InvalidArgument` naming the rule):
//! * 1 to 256 characters (the Windows limit);
//! * printable ASCII only: no control characters, no NUL, nothing outside
//!   ASCII (no look-alike or bidirectional characters);
//! * never `/` or `\` (Windows forbids them in service names);
//! * letters, digits and `_ - . $ @ + ~ # { }`, and spaces inside a name on
//!   Windows; nothing that a shell, WQL or a command line would read as
//!   syntax (quotes, `; | & < > * ? % ( ) [ ] ! ' "` and backquote);
//! * no leading `-` or `.`, no leading or trailing space;
//! * Linux (systemd units): letters, digits and `_ - . @` only; a name
//!   without a suffix means `<name>.service`; any other unit type (`.socket`,
//!   `.target`, ...) and uninstantiated templates (`foo@.service`) are
//!   refused.

use crate::path::Flavor;
use crate::{Error, Result};
use std::collections::BTreeSet;
use std::fmt;

/// Longest service name Windows accepts.
pub const MAX_SERVICE_NAME: usize = 256;

/// Unit types that are not services (Linux).
const OTHER_UNIT_TYPES: [&str; 10] = [
    ".socket",
    ".target",
    ".mount",
    ".automount",
    ".timer",
    ".path",
    ".slice",
    ".scope",
    ".device",
    ".swap",
];

/// A service name that passed the rules of its OS.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServiceName {
    /// As the client sent it.
    given: String,
    /// The name the OS knows: as given on Windows, `<name>.service` on
    /// Linux.
    os: String,
}

impl fmt::Debug for ServiceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.os)
    }
}

impl fmt::Display for ServiceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.given)
    }
}

fn invalid(name: &str, rule: &str) -> Error {
    Error::InvalidArgument(format!("service name {}: {rule}", crate::path::shown(name)))
}

impl ServiceName {
    /// Check `name` against the rules of `flavor`.
    pub fn parse(name: &str, flavor: Flavor) -> Result<ServiceName> {
        if name.is_empty() {
            return Err(invalid(name, "must not be empty"));
        }
        if name.len() > MAX_SERVICE_NAME {
            return Err(invalid(
                name,
                &format!("longer than {MAX_SERVICE_NAME} characters"),
            ));
        }
        if let Some(c) = name.chars().find(|c| !c.is_ascii() || c.is_ascii_control()) {
            return Err(invalid(
                name,
                &format!(
                    "character U+{:04X} is not allowed (printable ASCII only)",
                    c as u32
                ),
            ));
        }
        if name.contains(['/', '\\']) {
            return Err(invalid(
                name,
                "'/' and '\\' are not allowed in service names",
            ));
        }
        let extra: &[char] = match flavor {
            Flavor::Windows => &['_', '-', '.', '$', '@', '+', '~', '#', '{', '}', ' '],
            Flavor::Unix => &['_', '-', '.', '@'],
        };
        if let Some(c) = name
            .chars()
            .find(|c| !c.is_ascii_alphanumeric() && !extra.contains(c))
        {
            return Err(invalid(
                name,
                &format!("character {c:?} is not allowed (letters, digits and {extra:?} only)"),
            ));
        }
        if name.starts_with(['-', '.']) {
            return Err(invalid(name, "must not start with '-' or '.'"));
        }
        if name.starts_with(' ') || name.ends_with(' ') {
            return Err(invalid(name, "must not start or end with a space"));
        }
        let os = match flavor {
            Flavor::Windows => name.to_string(),
            Flavor::Unix => unit_name(name)?,
        };
        Ok(ServiceName {
            given: name.to_string(),
            os,
        })
    }

    /// The name the OS knows (`<name>.service` for systemd).
    pub fn os_name(&self) -> &str {
        &self.os
    }

    /// The name as the client sent it.
    pub fn as_str(&self) -> &str {
        &self.given
    }
}

/// The systemd unit of a service name.
fn unit_name(name: &str) -> Result<String> {
    let lower = name.to_ascii_lowercase();
    if let Some(t) = OTHER_UNIT_TYPES.iter().find(|t| lower.ends_with(*t)) {
        return Err(invalid(
            name,
            &format!("names a {} unit, not a service", &t[1..]),
        ));
    }
    let unit = if name.ends_with(".service") {
        name.to_string()
    } else {
        format!("{name}.service")
    };
    let stem = &unit[..unit.len() - ".service".len()];
    if stem.is_empty() {
        return Err(invalid(name, "has no name before .service"));
    }
    if stem.ends_with('@') {
        return Err(invalid(
            name,
            "is a template without an instance (foo@.service); name an instance (foo@bar)",
        ));
    }
    if stem.starts_with('@') {
        return Err(invalid(name, "must not start with '@'"));
    }
    if unit.len() > 255 {
        return Err(invalid(name, "the unit name is longer than 255 characters"));
    }
    Ok(unit)
}

/// Which services StartService and StopService may act on: all (the
/// default, as upstream), or only those on an allow-list
/// (`-allowed-services`). Windows compares names case-insensitively, as the
/// SCM does; Linux compares unit names exactly.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServicePolicy {
    allowed: Option<BTreeSet<String>>,
    flavor: Option<Flavor>,
}

impl ServicePolicy {
    /// Every service may be started and stopped.
    pub fn allow_all() -> ServicePolicy {
        ServicePolicy::default()
    }

    /// Only the services in `names` (each must be a valid name for
    /// `flavor`). An empty list allows all.
    pub fn allow_only<I, S>(names: I, flavor: Flavor) -> Result<ServicePolicy>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut set = BTreeSet::new();
        for n in names {
            let n = ServiceName::parse(n.as_ref(), flavor)
                .map_err(|e| Error::InvalidArgument(format!("-allowed-services: {e}")))?;
            set.insert(key(&n, flavor));
        }
        if set.is_empty() {
            return Ok(ServicePolicy::allow_all());
        }
        Ok(ServicePolicy {
            allowed: Some(set),
            flavor: Some(flavor),
        })
    }

    /// Is every service allowed?
    pub fn allows_all(&self) -> bool {
        self.allowed.is_none()
    }

    /// `PermissionDenied` unless `name` may be started or stopped.
    pub fn check(&self, name: &ServiceName, what: &str) -> Result<()> {
        match (&self.allowed, self.flavor) {
            (Some(set), Some(flavor)) if !set.contains(&key(name, flavor)) => {
                Err(Error::PermissionDenied(format!(
                    "{what} service {}: not in this csi-proxy's -allowed-services list",
                    crate::path::shown(name.as_str())
                )))
            }
            _ => Ok(()),
        }
    }
}

fn key(name: &ServiceName, flavor: Flavor) -> String {
    match flavor {
        Flavor::Windows => name.os_name().to_ascii_lowercase(),
        Flavor::Unix => name.os_name().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hostile and malformed names: refused on both OSes.
    pub(crate) const HOSTILE: &[&str] = &[
        "",
        " ",
        "  svc",
        "svc ",
        "a/b",
        "a\\b",
        "..",
        "../etc/passwd",
        ".hidden",
        "-H",
        "--help",
        "svc\0",
        "s\0vc",
        "svc\n",
        "svc\r\nx",
        "svc\t",
        "\u{1b}[31m",
        "svc;reboot",
        "svc|x",
        "svc&x",
        "svc&&x",
        "$(reboot)",
        "`id`",
        "svc'x",
        "svc\"x",
        "svc%PATH%",
        "svc*",
        "svc?",
        "svc<x",
        "svc>x",
        "svc!",
        "svc(x)",
        "svc[0]",
        "sérvice",
        "svc\u{202e}cod",
        "svc\u{ff0f}x",
        "C:\\Windows",
        "\\\\server\\svc",
        "x:y",
        "a=b",
        "a,b",
    ];

    #[test]
    fn hostile_names_are_refused_on_both_oses() {
        let mut long = "a".repeat(MAX_SERVICE_NAME + 1);
        let mut all: Vec<&str> = HOSTILE.to_vec();
        all.push(&long);
        assert!(all.len() >= 30, "{}", all.len());
        for flavor in [Flavor::Windows, Flavor::Unix] {
            for name in &all {
                let e = ServiceName::parse(name, flavor).unwrap_err();
                assert!(
                    matches!(e, Error::InvalidArgument(_)),
                    "{flavor:?} {name:?}: {e:?}"
                );
                assert!(e.to_string().starts_with("service name "), "{e}");
            }
        }
        long.truncate(MAX_SERVICE_NAME);
        ServiceName::parse(&long, Flavor::Windows).unwrap();
    }

    #[test]
    fn real_service_names_pass() {
        for n in [
            "wuauserv",
            "MSSQL$SQLEXPRESS",
            "csiproxy",
            "W32Time",
            "kubelet",
            "containerd",
            "Sense",
            "{D1E5C7A0-1234-4DCE-9ABC-0123456789AB}",
            "Spooler",
            "my svc",
            "a.b-c_d@e+f~g#h",
        ] {
            let s = ServiceName::parse(n, Flavor::Windows).unwrap();
            assert_eq!(s.os_name(), n);
            assert_eq!(s.as_str(), n);
        }
        for (n, unit) in [
            ("kubelet", "kubelet.service"),
            ("containerd.service", "containerd.service"),
            ("getty@tty1", "getty@tty1.service"),
            ("systemd-journald", "systemd-journald.service"),
        ] {
            assert_eq!(ServiceName::parse(n, Flavor::Unix).unwrap().os_name(), unit);
        }
    }

    #[test]
    fn linux_refuses_other_unit_types_and_templates() {
        for n in [
            "dbus.socket",
            "multi-user.target",
            "tmp.mount",
            "x.timer",
            "user.slice",
            "foo@.service",
            "foo@",
            ".service",
            "@x",
            "my svc",
            "MSSQL$SQLEXPRESS",
            "{GUID}",
        ] {
            let e = ServiceName::parse(n, Flavor::Unix).unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(_)), "{n}: {e}");
        }
    }

    #[test]
    fn allow_list() {
        let all = ServicePolicy::allow_all();
        let w = |n| ServiceName::parse(n, Flavor::Windows).unwrap();
        let u = |n| ServiceName::parse(n, Flavor::Unix).unwrap();
        assert!(all.allows_all());
        all.check(&w("anything"), "start").unwrap();
        let p = ServicePolicy::allow_only(["W32Time", "csi-node"], Flavor::Windows).unwrap();
        p.check(&w("w32time"), "start").unwrap();
        p.check(&w("CSI-NODE"), "stop").unwrap();
        let e = p.check(&w("wuauserv"), "stop").unwrap_err();
        assert!(matches!(e, Error::PermissionDenied(_)), "{e}");
        assert!(e.to_string().contains("-allowed-services"), "{e}");
        let p = ServicePolicy::allow_only(["kubelet"], Flavor::Unix).unwrap();
        p.check(&u("kubelet.service"), "start").unwrap();
        assert!(p.check(&u("Kubelet"), "start").is_err());
        assert!(ServicePolicy::allow_only(["a;b"], Flavor::Unix).is_err());
        assert!(
            ServicePolicy::allow_only(Vec::<String>::new(), Flavor::Unix)
                .unwrap()
                .allows_all()
        );
    }
}
