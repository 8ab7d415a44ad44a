//! The policy file's grammar, parsed strictly with serde: a caller entry
//! is a derived struct with `deny_unknown_fields` (serde refuses a field
//! given twice), and the top-level object is read by a visitor that
//! refuses a key given twice. Every error is serde_json's, so it names the
//! key and its line: `duplicate key "filesystem" at line 3 column 15`.
//!
//! To add a key to a caller entry: a field in [`AllowedSpec`] and in
//! [`Allowed`] (and its check in `TryFrom`).

use super::{Allowed, PolicyError, SERVICES_KEY};
use csi_proxy_api::Group;
use csi_proxy_host::path::Flavor;
use csi_proxy_host::system::ServicePolicy;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

/// The rules of a file, by `(group, None)` or `(group, Some(operation))`.
pub(super) type Rules = HashMap<(Group, Option<&'static str>), Vec<Allowed>>;

/// The `"system/services"` rule: per caller entry, the services it may
/// start or stop.
pub(super) type ServicesRule = Vec<(Allowed, Arc<ServicePolicy>)>;

/// A whole file, parsed.
pub(super) struct Parsed {
    pub rules: Rules,
    pub services: Option<ServicesRule>,
}

pub(super) fn parse(text: &str) -> Result<Parsed, PolicyError> {
    let file: PolicyFileSpec = serde_json::from_str(text)?;
    Ok(file.0)
}

/// One caller entry as written, the one list of caller keys: in a method or
/// group rule, or with its `services` in the `"system/services"` rule
/// (serde's `flatten` does not combine with `deny_unknown_fields`, so the
/// two share this struct and each refuses the other's use of `services`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AllowedSpec {
    #[serde(default, deserialize_with = "uid")]
    uid: Option<u32>,
    #[serde(default, deserialize_with = "text")]
    sid: Option<String>,
    #[serde(default, deserialize_with = "text")]
    exe: Option<String>,
    #[serde(default, deserialize_with = "text")]
    exe_sha256: Option<String>,
    #[serde(default, deserialize_with = "text")]
    pod_uid: Option<String>,
    /// Only in the `"system/services"` rule.
    #[serde(default)]
    services: Option<Vec<String>>,
}

impl TryFrom<AllowedSpec> for Allowed {
    type Error = String;

    fn try_from(s: AllowedSpec) -> Result<Allowed, String> {
        if s.services.is_some() {
            return Err(format!(
                "unknown field `services`: only the {SERVICES_KEY:?} rule lists services"
            ));
        }
        Allowed::caller(s)
    }
}

impl Allowed {
    /// The caller an entry matches (its `services`, if any, are the
    /// caller's business).
    fn caller(s: AllowedSpec) -> Result<Allowed, String> {
        let exe_sha256 = match s.exe_sha256 {
            Some(h) if h.len() != 64 || !h.bytes().all(|b| b.is_ascii_hexdigit()) => {
                return Err("\"exe_sha256\" must be 64 hex digits (a SHA-256)".into())
            }
            h => h.map(|h| h.to_ascii_lowercase()),
        };
        let a = Allowed {
            uid: s.uid,
            sid: s.sid,
            exe: s.exe,
            exe_sha256,
            pod_uid: s.pod_uid,
        };
        if a == Allowed::default() {
            return Err("a caller entry is empty (it would match everyone)".into());
        }
        Ok(a)
    }
}

/// A `"system/services"` entry: the caller it matches and its list.
struct ServiceEntry(Allowed, Arc<ServicePolicy>);

impl<'de> Deserialize<'de> for ServiceEntry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut s = AllowedSpec::deserialize(d)?;
        let Some(list) = s.services.take() else {
            return Err(de::Error::missing_field("services"));
        };
        let in_rule = |e: String| de::Error::custom(format!("{SERVICES_KEY:?}: {e}"));
        let caller = Allowed::caller(s).map_err(in_rule)?;
        let services =
            ServicePolicy::exactly(&list, Flavor::NATIVE).map_err(|e| in_rule(e.to_string()))?;
        Ok(ServiceEntry(caller, Arc::new(services)))
    }
}

fn uid<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    v.as_u64()
        .and_then(|u| u32::try_from(u).ok())
        .map(Some)
        .ok_or_else(|| de::Error::custom("\"uid\" must be a number in 0..=4294967295"))
}

fn text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    match serde_json::Value::deserialize(d)? {
        serde_json::Value::String(s) if !s.is_empty() => Ok(Some(s)),
        _ => Err(de::Error::custom("must be a non-empty string")),
    }
}

/// The whole file: an object of group or group/Method to caller lists.
struct PolicyFileSpec(Parsed);

impl<'de> Deserialize<'de> for PolicyFileSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(TopLevel)
    }
}

struct TopLevel;

impl<'de> Visitor<'de> for TopLevel {
    type Value = PolicyFileSpec;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the top level must be an object of group or group/Method to caller lists")
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<PolicyFileSpec, M::Error> {
        let mut rules = Rules::new();
        let mut services = None;
        let mut keys: HashMap<(Group, Option<&'static str>), String> = HashMap::new();
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(de::Error::custom(format!("duplicate key {key:?}")));
            }
            if key == SERVICES_KEY {
                let list: Vec<ServiceEntry> = map.next_value()?;
                services = Some(list.into_iter().map(|e| (e.0, e.1)).collect());
                continue;
            }
            let slot = slot_of(&key).map_err(de::Error::custom)?;
            let list: CallerList = map.next_value()?;
            if let Some(other) = keys.insert(slot, key.clone()) {
                return Err(de::Error::custom(format!(
                    "{key:?} and {other:?} name the same operation ({}): keep one",
                    slot.1.unwrap_or_default()
                )));
            }
            rules.insert(slot, list.0);
        }
        Ok(PolicyFileSpec(Parsed { rules, services }))
    }
}

/// A key's rule slot: its group and, for `group/Method`, the operation.
fn slot_of(key: &str) -> Result<(Group, Option<&'static str>), String> {
    let (g, method) = match key.split_once('/') {
        Some((g, m)) => (g, Some(m)),
        None => (key, None),
    };
    let Some(group) = Group::parse(g).filter(|p| p.as_str() == g) else {
        return Err(format!(
            "{key:?}: unknown API group (known: disk, filesystem, iscsi, smb, system, volume)"
        ));
    };
    let operation = match method {
        None => None,
        Some(m) => match crate::catalog::operation_of(group, m) {
            Some(op) => Some(op),
            None => {
                return Err(format!(
                    "{key:?}: no version of {} has a method {m:?}",
                    group.as_str()
                ))
            }
        },
    };
    Ok((group, operation))
}

/// A list of caller entries.
struct CallerList(Vec<Allowed>);

impl<'de> Deserialize<'de> for CallerList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = CallerList;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of callers, e.g. [{\"uid\": 0}]")
            }
            fn visit_seq<S: de::SeqAccess<'de>>(self, mut seq: S) -> Result<CallerList, S::Error> {
                let mut out = Vec::new();
                while let Some(a) = seq.next_element::<Allowed>()? {
                    out.push(a);
                }
                Ok(CallerList(out))
            }
        }
        d.deserialize_seq(V)
    }
}
