//! The caller policy (`-caller-policy=FILE`): which callers may call which
//! API group or method.
//!
//! The file is a JSON object from a group (`"filesystem"`) or a method of a
//! group (`"volume/FormatVolume"`, any version) to the callers allowed:
//!
//! ```json
//! { "filesystem": [{"uid": 0}, {"pod_uid": "0b4f6a2e-..."}],
//!   "volume": [{"uid": 0}],
//!   "volume/FormatVolume": [{"exe": "/usr/bin/csi-node"}],
//!   "system": [{"sid": "S-1-5-18"}] }
//! ```
//!
//! - A method entry, when there is one, decides for that method; otherwise
//!   the group's entry decides; a group the file does not name is refused
//!   to everyone.
//! - A method entry is kept by the version-free operation the method
//!   routes to (the routing catalog, [`crate::catalog`]), so it
//!   holds whatever version or older name a call arrives by:
//!   `filesystem/CreateSymlink` also decides for v1alpha1 `LinkPath`. Two
//!   entries naming one operation make the file invalid.
//! - A caller entry matches when every key it has matches (`uid`, `sid`,
//!   `exe`, `exe_sha256`, `pod_uid`); a field of the caller's identity
//!   that could not be read matches nothing. SIDs, pod UIDs and digests
//!   compare case-insensitively, executables exactly on Linux and
//!   case-insensitively on Windows. On Linux `exe` matches only a caller
//!   in the proxy's own mount namespace (elsewhere the path is the
//!   caller's to make up); `exe_sha256` is the digest of the file
//!   `/proc/<pid>/exe` names, whatever its path. Both are the process's
//!   to set (`prctl(PR_SET_MM)`): a guard against mistakes, not a
//!   boundary (docs/security.md).
//! - Unknown groups, methods or keys, and a key given twice at any level,
//!   make the file invalid (a typo must not silently refuse or allow); the
//!   error names the key and its line ([`file`]).
//!
//! [`PolicyFile`] keeps the current policy and re-reads the file on demand
//! (SIGHUP, a change on disk: [`watch`]).

mod file;
mod watch;

use crate::caller::Caller;
use csi_proxy_api::Group;
use csi_proxy_host::path::Flavor;
use csi_proxy_host::system::ServicePolicy;
use serde::Deserialize;
use std::collections::HashMap;
use std::sync::Arc;

pub use watch::{watch, PolicyFile};

/// Why a policy file is invalid: serde's message, which names the line
/// and column (`... at line 3 column 17`).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PolicyError {
    #[error("not valid JSON: {0}")]
    Json(String),
    #[error("{0}")]
    Invalid(String),
}

impl From<serde_json::Error> for PolicyError {
    fn from(e: serde_json::Error) -> Self {
        match e.classify() {
            serde_json::error::Category::Data => PolicyError::Invalid(e.to_string()),
            _ => PolicyError::Json(e.to_string()),
        }
    }
}

/// One allowed caller: every given field must match.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "file::AllowedSpec")]
pub struct Allowed {
    pub uid: Option<u32>,
    pub sid: Option<String>,
    pub exe: Option<String>,
    /// Lowercase hex.
    pub exe_sha256: Option<String>,
    pub pod_uid: Option<String>,
}

impl Allowed {
    fn matches(&self, c: &Caller) -> bool {
        let eq_ci = |want: &Option<String>, got: &Option<String>| {
            want.as_ref()
                .is_none_or(|w| got.as_ref().is_some_and(|g| g.eq_ignore_ascii_case(w)))
        };
        let exe_ok = self.exe.as_ref().is_none_or(|w| {
            // A path read in another mount namespace is whatever that
            // namespace mounts there.
            let own_view = cfg!(windows) || c.own_mount_ns == Some(true);
            own_view
                && c.exe.as_ref().is_some_and(|g| {
                    if cfg!(windows) {
                        g.eq_ignore_ascii_case(w)
                    } else {
                        g == w
                    }
                })
        });
        self.uid.is_none_or(|u| c.uid == Some(u))
            && eq_ci(&self.sid, &c.sid)
            && eq_ci(&self.pod_uid, &c.pod_uid)
            && eq_ci(&self.exe_sha256, &c.exe_sha256)
            && exe_ok
    }
}

/// A parsed policy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    /// Keys `(group, None)` or `(group, Some(operation))`.
    rules: HashMap<(Group, Option<&'static str>), Vec<Allowed>>,
    /// The `"system/services"` rule, if the file has one
    /// ([`SERVICES_KEY`]).
    services: Option<Vec<(Allowed, Arc<ServicePolicy>)>>,
    /// Whether an entry matches on `exe_sha256` (callers' executables are
    /// hashed only then).
    hashes: bool,
}

impl Policy {
    /// Parse a policy file's text (strictly: [`file`]).
    pub fn parse(text: &str) -> Result<Policy, PolicyError> {
        let file::Parsed { rules, services } = file::parse(text)?;
        let hashes = rules
            .values()
            .flatten()
            .chain(services.iter().flatten().map(|(a, _)| a))
            .any(|a| a.exe_sha256.is_some());
        Ok(Policy {
            rules,
            services,
            hashes,
        })
    }

    /// Whether `caller` may call the version-free `operation` of `group`
    /// (whatever method name and version the call arrived by).
    pub fn allows(&self, group: Group, operation: &'static str, caller: &Caller) -> bool {
        let specific = self.rules.get(&(group, Some(operation)));
        match specific.or_else(|| self.rules.get(&(group, None))) {
            Some(list) => list.iter().any(|a| a.matches(caller)),
            None => false,
        }
    }

    /// The services `caller` may start or stop, when the file has a
    /// `"system/services"` rule: the list of the first entry that matches
    /// the caller, none when no entry does; `None` without the rule.
    pub fn services_for(&self, caller: &Caller) -> Option<Arc<ServicePolicy>> {
        let rule = self.services.as_ref()?;
        Some(
            rule.iter()
                .find(|(a, _)| a.matches(caller))
                .map(|(_, l)| l.clone())
                .unwrap_or_else(|| {
                    Arc::new(
                        ServicePolicy::exactly(Vec::<String>::new(), Flavor::NATIVE)
                            .expect("an empty list is valid"),
                    )
                }),
        )
    }

    /// Whether an entry needs the digest of callers' executables.
    pub fn hashes_executables(&self) -> bool {
        self.hashes
    }

    /// The kernel identities (uid, pod) entries on `exe_sha256` name along
    /// with it (entries naming neither are left out).
    pub fn digest_named(&self) -> Vec<crate::caller::NamedBy> {
        let mut out: Vec<crate::caller::NamedBy> = Vec::new();
        let entries = self
            .rules
            .values()
            .flatten()
            .chain(self.services.iter().flatten().map(|(a, _)| a));
        for a in entries {
            if a.exe_sha256.is_some() && (a.uid.is_some() || a.pod_uid.is_some()) {
                let id = (a.uid, a.pod_uid.clone());
                if !out.contains(&id) {
                    out.push(id);
                }
            }
        }
        out
    }

    /// How many keys the policy has.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

/// The key of the rule that narrows `-allowed-services` per caller: a
/// list of callers as for any key, each with a `"services"` list of the
/// services that caller may start or stop (checked against
/// `-allowed-services` too, after the service manager resolved the name:
/// a list only narrows):
///
/// ```json
/// "system/services": [{"uid": 0, "services": ["iscsid", "multipathd"]},
///                     {"pod_uid": "7d3c...", "services": []}]
/// ```
///
/// The first entry that matches a caller decides; a caller no entry
/// matches may start or stop no service.
pub const SERVICES_KEY: &str = "system/services";

#[cfg(test)]
mod tests;
