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

/// The services node plugins need StartService/StopService for, the
/// default of `-allowed-services` on Windows: the iSCSI initiator (the one
/// service csi-proxy's own iSCSI tests start; no public CSI driver calls
/// the System API's Start/Stop, see docs/security.md).
pub const DEFAULT_WINDOWS: &[&str] = &["MSiSCSI"];
/// The default of `-allowed-services` on Linux: the iSCSI daemon under its
/// two packaging names, and the multipath daemon.
pub const DEFAULT_LINUX: &[&str] = &["iscsid", "open-iscsi", "multipathd"];

/// Which services StartService and StopService may act on
/// (`-allowed-services`): a list (by default [`DEFAULT_WINDOWS`] or
/// [`DEFAULT_LINUX`]), or every service (`*`). A name is compared after the
/// service manager resolved it (the systemd unit id, the Windows service
/// key name), so an alias or display name reaches no other service.
/// Windows compares names case-insensitively, as the SCM does; Linux
/// compares unit names exactly. Protection and the plan are checked
/// whatever the list says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServicePolicy {
    /// `None`: every service.
    allowed: Option<BTreeSet<String>>,
    flavor: Flavor,
}

impl Default for ServicePolicy {
    fn default() -> Self {
        ServicePolicy::default_for(Flavor::NATIVE)
    }
}

impl ServicePolicy {
    /// Every service may be started and stopped (`-allowed-services=*`).
    pub fn allow_all() -> ServicePolicy {
        ServicePolicy {
            allowed: None,
            flavor: Flavor::NATIVE,
        }
    }

    /// The default list of `flavor`.
    pub fn default_for(flavor: Flavor) -> ServicePolicy {
        let defaults = match flavor {
            Flavor::Windows => DEFAULT_WINDOWS,
            Flavor::Unix => DEFAULT_LINUX,
        };
        ServicePolicy::allow_only(defaults, flavor).expect("the default list is valid")
    }

    /// Only the services in `names` (each must be a valid name for
    /// `flavor`); `*` among them allows every service; an empty list is
    /// the default list of `flavor`.
    pub fn allow_only<I, S>(names: I, flavor: Flavor) -> Result<ServicePolicy>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut set = BTreeSet::new();
        let mut all = false;
        for n in names {
            let n = n.as_ref().trim();
            if n == "*" {
                all = true;
                continue;
            }
            let n = ServiceName::parse(n, flavor)
                .map_err(|e| Error::InvalidArgument(format!("-allowed-services: {e}")))?;
            set.insert(key(n.os_name(), flavor));
        }
        if all {
            return Ok(ServicePolicy {
                allowed: None,
                flavor,
            });
        }
        if set.is_empty() {
            return Ok(ServicePolicy::default_for(flavor));
        }
        Ok(ServicePolicy {
            allowed: Some(set),
            flavor,
        })
    }

    /// Exactly the services in `names` (an empty list allows none; `*`
    /// allows every service): a caller-policy rule's list
    /// ([`super::narrow`]).
    pub fn exactly<I, S>(names: I, flavor: Flavor) -> Result<ServicePolicy>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let names: Vec<String> = names.into_iter().map(|n| n.as_ref().to_string()).collect();
        if names.is_empty() {
            return Ok(ServicePolicy {
                allowed: Some(BTreeSet::new()),
                flavor,
            });
        }
        ServicePolicy::allow_only(names, flavor)
    }

    /// Is every service allowed?
    pub fn allows_all(&self) -> bool {
        self.allowed.is_none()
    }

    /// The names allowed (OS names as compared), `None` for every service.
    pub fn names(&self) -> Option<impl Iterator<Item = &str>> {
        self.allowed.as_ref().map(|s| s.iter().map(String::as_str))
    }

    /// Is the service the manager resolved to `resolved` (a unit id, a
    /// service key name) on the list?
    pub fn allows(&self, resolved: &str) -> bool {
        match &self.allowed {
            None => true,
            Some(set) => set.contains(&key(resolved, self.flavor)),
        }
    }

    /// `PermissionDenied` naming the flag unless the service `asked`
    /// resolved to (`resolved`: the systemd unit id, the Windows key
    /// name) may be started or stopped (`what`).
    pub fn check(&self, asked: &ServiceName, resolved: &str, what: &str) -> Result<()> {
        if self.allows(resolved) {
            return Ok(());
        }
        let is = if key(resolved, self.flavor) == key(asked.os_name(), self.flavor) {
            String::new()
        } else {
            format!(" (it is {})", crate::path::shown(resolved))
        };
        Err(self.refusal(asked, what, &is))
    }

    /// The refusal of a name that is not on the list (also for one the
    /// service manager does not know).
    pub fn refusal(&self, asked: &ServiceName, what: &str, detail: &str) -> Error {
        Error::PermissionDenied(format!(
            "{what} service {}{detail}: not in this csi-proxy's -allowed-services list; an operator adds services with -allowed-services (docs/security.md)",
            crate::path::shown(asked.as_str())
        ))
    }
}

/// Comparison key: Windows names without case, Linux unit names exactly
/// (`<name>.service`).
fn key(os_name: &str, flavor: Flavor) -> String {
    match flavor {
        Flavor::Windows => os_name.to_ascii_lowercase(),
        Flavor::Unix if os_name.ends_with(".service") => os_name.to_string(),
        Flavor::Unix => format!("{os_name}.service"),
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
        let all = ServicePolicy::allow_only(["*"], Flavor::Windows).unwrap();
        let w = |n| ServiceName::parse(n, Flavor::Windows).unwrap();
        let u = |n| ServiceName::parse(n, Flavor::Unix).unwrap();
        assert!(all.allows_all());
        all.check(&w("anything"), "anything", "start").unwrap();
        let p = ServicePolicy::allow_only(["W32Time", "csi-node"], Flavor::Windows).unwrap();
        p.check(&w("w32time"), "W32Time", "start").unwrap();
        p.check(&w("CSI-NODE"), "csi-node", "stop").unwrap();
        let e = p.check(&w("wuauserv"), "wuauserv", "stop").unwrap_err();
        assert!(matches!(e, Error::PermissionDenied(_)), "{e}");
        assert!(e.to_string().contains("-allowed-services"), "{e}");
        assert!(e.to_string().starts_with("stop service"), "{e}");
        // A display name or alias counts for what it resolves to, both ways.
        p.check(&w("Windows Time"), "W32Time", "start").unwrap();
        let e = p.check(&w("W32Time"), "EvilSvc", "start").unwrap_err();
        assert!(e.to_string().contains("EvilSvc"), "{e}");
        let p = ServicePolicy::allow_only(["kubelet"], Flavor::Unix).unwrap();
        p.check(&u("kubelet.service"), "kubelet.service", "start")
            .unwrap();
        assert!(p.check(&u("Kubelet"), "Kubelet.service", "start").is_err());
        assert!(p.check(&u("kubelet"), "other.service", "start").is_err());
        assert!(ServicePolicy::allow_only(["a;b"], Flavor::Unix).is_err());
    }

    #[test]
    fn the_default_list_is_the_storage_services_of_each_os() {
        let d = ServicePolicy::allow_only(Vec::<String>::new(), Flavor::Unix).unwrap();
        assert!(!d.allows_all());
        for n in ["iscsid.service", "open-iscsi.service", "multipathd.service"] {
            assert!(d.allows(n), "{n}");
        }
        for n in ["kubelet.service", "sshd.service", "iscsid.socket"] {
            assert!(!d.allows(n), "{n}");
        }
        let d = ServicePolicy::allow_only(Vec::<String>::new(), Flavor::Windows).unwrap();
        assert!(d.allows("msiscsi") && d.allows("MSiSCSI"));
        assert!(!d.allows("W32Time") && !d.allows("winhid"));
        assert_eq!(d.names().unwrap().collect::<Vec<_>>(), ["msiscsi"]);
        // `*` anywhere allows all.
        assert!(ServicePolicy::allow_only(["a", "*"], Flavor::Unix)
            .unwrap()
            .allows_all());
    }
}
