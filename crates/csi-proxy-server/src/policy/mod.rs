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
//! - A caller entry matches when every key it has matches (`uid`, `sid`,
//!   `exe`, `pod_uid`); a field of the caller's identity that could not be
//!   read matches nothing. SIDs and pod UIDs compare case-insensitively,
//!   executables exactly on Linux and case-insensitively on Windows.
//! - Unknown groups, methods or keys make the file invalid (a typo must not
//!   silently refuse or allow).
//!
//! [`PolicyFile`] keeps the current policy and re-reads the file on demand
//! (SIGHUP, a change on disk: [`watch`]).

mod watch;

use crate::caller::Caller;
use csi_proxy_api::{Group, API_VERSIONS};
use serde_json::Value;
use std::collections::HashMap;

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
}

/// One allowed caller: every given field must match.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Allowed {
    pub uid: Option<u32>,
    pub sid: Option<String>,
    pub exe: Option<String>,
    pub pod_uid: Option<String>,
}

impl Allowed {
    fn matches(&self, c: &Caller) -> bool {
        let eq_ci = |want: &Option<String>, got: &Option<String>| {
            want.as_ref()
                .is_none_or(|w| got.as_ref().is_some_and(|g| g.eq_ignore_ascii_case(w)))
        };
        let exe_ok = self.exe.as_ref().is_none_or(|w| {
            c.exe.as_ref().is_some_and(|g| {
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
            && exe_ok
    }
}

/// A parsed policy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    /// Keys `group` or `group/Method`.
    rules: HashMap<String, Vec<Allowed>>,
}

impl Policy {
    /// Parse a policy file's text.
    pub fn parse(text: &str) -> Result<Policy, PolicyError> {
        let v: Value = serde_json::from_str(text).map_err(|e| PolicyError::Json(e.to_string()))?;
        let Value::Object(map) = v else {
            return Err(PolicyError::NotAnObject);
        };
        let mut rules = HashMap::new();
        for (key, list) in map {
            let (g, method) = match key.split_once('/') {
                Some((g, m)) => (g, Some(m)),
                None => (key.as_str(), None),
            };
            let Some(group) = Group::parse(g).filter(|p| p.as_str() == g) else {
                return Err(PolicyError::UnknownGroup { key });
            };
            if let Some(m) = method {
                let known = API_VERSIONS
                    .iter()
                    .filter(|a| a.group == group)
                    .any(|a| a.methods().contains(&m));
                if !known {
                    return Err(PolicyError::UnknownMethod {
                        group: group.as_str().into(),
                        method: m.into(),
                        key,
                    });
                }
            }
            let allowed = parse_list(&key, &list)?;
            rules.insert(key, allowed);
        }
        Ok(Policy { rules })
    }

    /// Whether `caller` may call `method` of `group`.
    pub fn allows(&self, group: &str, method: &str, caller: &Caller) -> bool {
        let specific = self.rules.get(&format!("{group}/{method}"));
        match specific.or_else(|| self.rules.get(group)) {
            Some(list) => list.iter().any(|a| a.matches(caller)),
            None => false,
        }
    }

    /// How many keys the policy has.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
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
                "pod_uid" => a.pod_uid = Some(text()?),
                other => {
                    return Err(bad(format!(
                        "caller #{i}: unknown key {other:?} (known: uid, sid, exe, pod_uid)"
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
