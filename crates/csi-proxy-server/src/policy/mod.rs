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
//!   routes to (the server's own routing table, [`crate::groups`]), so it
//!   holds whatever version or older name a call arrives by:
//!   `filesystem/CreateSymlink` also decides for v1alpha1 `LinkPath`. Two
//!   entries naming one operation make the file invalid.
//! - A caller entry matches when every key it has matches (`uid`, `sid`,
//!   `exe`, `exe_sha256`, `pod_uid`); a field of the caller's identity
//!   that could not be read matches nothing. SIDs, pod UIDs and digests
//!   compare case-insensitively, executables exactly on Linux and
//!   case-insensitively on Windows. On Linux `exe` matches only a caller
//!   in the proxy's own mount namespace (elsewhere the path is the
//!   caller's to make up); `exe_sha256` is the digest of the file the
//!   kernel maps, whatever its path.
//! - Unknown groups, methods or keys make the file invalid (a typo must not
//!   silently refuse or allow).
//!
//! [`PolicyFile`] keeps the current policy and re-reads the file on demand
//! (SIGHUP, a change on disk: [`watch`]).

mod watch;

use crate::caller::Caller;
use csi_proxy_api::Group;
use csi_proxy_host::path::Flavor;
use csi_proxy_host::system::ServicePolicy;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

pub use watch::{watch, PolicyFile};

/// Why a policy file is invalid.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PolicyError {
    #[error("not valid JSON: {0}")]
    Json(String),
    #[error("the top level must be an object of group or group/Method to caller lists")]
    NotAnObject,
    #[error("{key:?}: unknown API group (known: disk, filesystem, iscsi, smb, system, volume)")]
    UnknownGroup { key: String },
    #[error("{key:?}: no version of {group} has a method {method:?}")]
    UnknownMethod {
        key: String,
        group: String,
        method: String,
    },
    #[error("{key:?}: {what}")]
    BadEntry { key: String, what: String },
    #[error("{key:?} and {other:?} name the same operation ({operation}): keep one")]
    SameOperation {
        key: String,
        other: String,
        operation: String,
    },
}

/// One allowed caller: every given field must match.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
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
    /// ([`parse_services_rule`]).
    services: Option<Vec<(Allowed, Arc<ServicePolicy>)>>,
    /// Whether an entry matches on `exe_sha256` (callers' executables are
    /// hashed only then).
    hashes: bool,
}

impl Policy {
    /// Parse a policy file's text.
    pub fn parse(text: &str) -> Result<Policy, PolicyError> {
        let v: Value = serde_json::from_str(text).map_err(|e| PolicyError::Json(e.to_string()))?;
        let Value::Object(map) = v else {
            return Err(PolicyError::NotAnObject);
        };
        let mut rules = HashMap::new();
        let mut keys: HashMap<(Group, Option<&'static str>), String> = HashMap::new();
        let mut services = None;
        for (key, list) in map {
            if key == SERVICES_KEY {
                services = Some(parse_services_rule(&key, &list)?);
                continue;
            }
            let (g, method) = match key.split_once('/') {
                Some((g, m)) => (g, Some(m)),
                None => (key.as_str(), None),
            };
            let Some(group) = Group::parse(g).filter(|p| p.as_str() == g) else {
                return Err(PolicyError::UnknownGroup { key });
            };
            let operation = match method {
                None => None,
                Some(m) => match crate::groups::operation_of(group, m) {
                    Some(op) => Some(op),
                    None => {
                        return Err(PolicyError::UnknownMethod {
                            group: group.as_str().into(),
                            method: m.into(),
                            key,
                        })
                    }
                },
            };
            let allowed = parse_list(&key, &list)?;
            if let Some(other) = keys.insert((group, operation), key.clone()) {
                return Err(PolicyError::SameOperation {
                    key,
                    other,
                    operation: operation.unwrap_or_default().into(),
                });
            }
            rules.insert((group, operation), allowed);
        }
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

    /// How many keys the policy has.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

/// The key of the rule that narrows `-allowed-services` per caller.
pub const SERVICES_KEY: &str = "system/services";

/// The `"system/services"` rule: a list of callers as for any key, each
/// with a `"services"` list of the services that caller may start or stop
/// (checked against `-allowed-services` too, after the service manager
/// resolved the name: a list only narrows):
///
/// ```json
/// "system/services": [{"uid": 0, "services": ["iscsid", "multipathd"]},
///                     {"pod_uid": "7d3c...", "services": []}]
/// ```
///
/// The first entry that matches a caller decides; a caller no entry
/// matches may start or stop no service.
fn parse_services_rule(
    key: &str,
    list: &Value,
) -> Result<Vec<(Allowed, Arc<ServicePolicy>)>, PolicyError> {
    let bad = |what: String| PolicyError::BadEntry {
        key: key.to_string(),
        what,
    };
    let Value::Array(items) = list else {
        return Err(bad(
            "must be a list of callers with their services, e.g. [{\"uid\": 0, \"services\": [\"iscsid\"]}]".into(),
        ));
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let Value::Object(fields) = item else {
            return Err(bad(format!("caller #{i} must be an object")));
        };
        let mut caller = fields.clone();
        let names = match caller.remove("services") {
            Some(Value::Array(names)) => names
                .iter()
                .map(|n| {
                    n.as_str().map(str::to_string).ok_or_else(|| {
                        bad(format!("caller #{i}: \"services\" must be a list of names"))
                    })
                })
                .collect::<Result<Vec<String>, _>>()?,
            _ => {
                return Err(bad(format!(
                    "caller #{i}: \"services\" (a list of service names) is required"
                )))
            }
        };
        let services = ServicePolicy::exactly(&names, Flavor::NATIVE)
            .map_err(|e| bad(format!("caller #{i}: {e}")))?;
        let mut allowed =
            parse_list(key, &Value::Array(vec![Value::Object(caller)])).map_err(|e| match e {
                PolicyError::BadEntry { key, what } => PolicyError::BadEntry {
                    key,
                    what: what.replacen("caller #0", &format!("caller #{i}"), 1),
                },
                e => e,
            })?;
        out.push((allowed.remove(0), Arc::new(services)));
    }
    Ok(out)
}

fn parse_list(key: &str, list: &Value) -> Result<Vec<Allowed>, PolicyError> {
    let bad = |what: String| PolicyError::BadEntry {
        key: key.to_string(),
        what,
    };
    let Value::Array(items) = list else {
        return Err(bad("must be a list of callers, e.g. [{\"uid\": 0}]".into()));
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let Value::Object(fields) = item else {
            return Err(bad(format!("caller #{i} must be an object")));
        };
        if fields.is_empty() {
            return Err(bad(format!(
                "caller #{i} is empty (it would match everyone)"
            )));
        }
        let mut a = Allowed::default();
        for (k, v) in fields {
            let text = || {
                v.as_str()
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .ok_or_else(|| bad(format!("caller #{i}: {k:?} must be a non-empty string")))
            };
            match k.as_str() {
                "uid" => {
                    let uid = v.as_u64().and_then(|u| u32::try_from(u).ok());
                    a.uid = Some(uid.ok_or_else(|| {
                        bad(format!(
                            "caller #{i}: \"uid\" must be a number in 0..=4294967295"
                        ))
                    })?);
                }
                "sid" => a.sid = Some(text()?),
                "exe" => a.exe = Some(text()?),
                "exe_sha256" => {
                    let h = text()?;
                    if h.len() != 64 || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
                        return Err(bad(format!(
                            "caller #{i}: \"exe_sha256\" must be 64 hex digits (a SHA-256)"
                        )));
                    }
                    a.exe_sha256 = Some(h.to_ascii_lowercase());
                }
                "pod_uid" => a.pod_uid = Some(text()?),
                other => {
                    return Err(bad(format!(
                        "caller #{i}: unknown key {other:?} (known: uid, sid, exe, exe_sha256, pod_uid)"
                    )))
                }
            }
        }
        out.push(a);
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
