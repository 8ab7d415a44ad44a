//! The iSCSI operations over the Windows storage provider's classes
//! (`MSFT_iSCSITargetPortal`, `MSFT_iSCSITarget`, `MSFT_iSCSISession`,
//! `MSFT_iSCSIConnection`, `MSFT_Disk` and their associations), as upstream
//! does them, written against a small [`Cim`] trait so that the walks,
//! parameters and return-code handling are tested on every OS with an
//! in-memory model; `windows.rs` implements the trait on the WMI worker.

use super::validate::{Auth, Iqn, Portal, Secret};
use super::TargetPortal;
use crate::storage::parse::msft;
use crate::{Error, Result};
use std::collections::BTreeMap;
use zeroize::Zeroizing;

pub const PORTAL: &str = "MSFT_iSCSITargetPortal";
pub const TARGET: &str = "MSFT_iSCSITarget";
pub const SESSION: &str = "MSFT_iSCSISession";
pub const CONNECTION: &str = "MSFT_iSCSIConnection";
pub const DISK: &str = "MSFT_Disk";
pub const TARGET_TO_PORTAL: &str = "MSFT_iSCSITargetToiSCSITargetPortal";
pub const TARGET_TO_SESSION: &str = "MSFT_iSCSITargetToiSCSISession";
pub const TARGET_TO_CONNECTION: &str = "MSFT_iSCSITargetToiSCSIConnection";
pub const CONNECTION_TO_DISK: &str = "MSFT_iSCSIConnectionToDisk";

/// The properties the walks read (the WMI adapter reads only these).
pub const PROPERTIES: [&str; 8] = [
    "TargetPortalAddress",
    "TargetPortalPortNumber",
    "NodeAddress",
    "IsConnected",
    "IsPersistent",
    "SessionIdentifier",
    "Number",
    "ReturnValue",
];

/// A property value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CimValue {
    Str(String),
    U32(u32),
    Bool(bool),
    Null,
}

/// An instance (or a method's out-parameters): its object path and the
/// properties of [`PROPERTIES`] it has.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Row {
    pub path: String,
    pub props: BTreeMap<String, CimValue>,
}

impl Row {
    fn str(&self, k: &str) -> Option<&str> {
        match self.props.get(k) {
            Some(CimValue::Str(s)) => Some(s),
            _ => None,
        }
    }
    fn u32(&self, k: &str) -> Option<u32> {
        match self.props.get(k) {
            Some(CimValue::U32(n)) => Some(*n),
            _ => None,
        }
    }
    fn bool(&self, k: &str) -> bool {
        matches!(self.props.get(k), Some(CimValue::Bool(true)))
    }
}

/// A method argument.
#[derive(Clone, PartialEq, Eq)]
pub enum Arg {
    Str(String),
    U32(u32),
    /// A CHAP secret: wiped when dropped, never shown.
    Secret(Zeroizing<String>),
}

impl std::fmt::Debug for Arg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Arg::Str(s) => write!(f, "{s:?}"),
            Arg::U32(n) => write!(f, "{n}"),
            Arg::Secret(_) => f.write_str("<redacted>"),
        }
    }
}

/// What the walks need from WMI.
pub trait Cim {
    /// Instances of `class` whose properties equal `filter`.
    fn instances(&self, class: &str, filter: &[(&str, CimValue)]) -> Result<Vec<Row>>;
    /// `ASSOCIATORS OF {path} WHERE AssocClass = assoc ResultClass = result`.
    fn associators(&self, path: &str, assoc: &str, result: &str) -> Result<Vec<Row>>;
    /// Call `method` of `class` on `path` (the class name for a static
    /// method); returns the out-parameters.
    fn call(
        &self,
        path: &str,
        class: &str,
        method: &str,
        args: Vec<(&'static str, Arg)>,
    ) -> Result<Row>;
}

/// A method's ReturnValue: 0 is success; anything else is an error in the
/// storage provider's numbering (one mapping for all MSFT classes).
fn check(out: &Row, class: &str, method: &str, subject: &str) -> Result<()> {
    match out.u32("ReturnValue") {
        None | Some(0) => Ok(()),
        Some(code) => Err(msft::method_error(
            &format!("{class}.{method}"),
            subject,
            code,
            None,
        )),
    }
}

fn portal_filter(p: &Portal) -> [(&'static str, CimValue); 2] {
    [
        (
            "TargetPortalAddress",
            CimValue::Str(p.address().to_string()),
        ),
        ("TargetPortalPortNumber", CimValue::U32(p.port().into())),
    ]
}

/// The portal's instance; `NotFound` when the initiator does not have it.
pub fn portal_row(c: &dyn Cim, p: &Portal) -> Result<Row> {
    c.instances(PORTAL, &portal_filter(p))?
        .into_iter()
        .next()
        .ok_or_else(|| {
            Error::NotFound(format!(
                "target portal {p} is not in the initiator's list (AddTargetPortal first)"
            ))
        })
}

pub fn add_portal(c: &dyn Cim, p: &Portal) -> Result<()> {
    if !c.instances(PORTAL, &portal_filter(p))?.is_empty() {
        return Ok(());
    }
    let out = c.call(
        PORTAL,
        PORTAL,
        "New",
        vec![
            ("TargetPortalAddress", Arg::Str(p.address().to_string())),
            ("TargetPortalPortNumber", Arg::U32(p.port().into())),
        ],
    )?;
    check(&out, PORTAL, "New", &p.to_string())
}

pub fn discover(c: &dyn Cim, p: &Portal) -> Result<Vec<String>> {
    let portal = portal_row(c, p)?;
    Ok(c.associators(&portal.path, TARGET_TO_PORTAL, TARGET)?
        .iter()
        .filter_map(|t| t.str("NodeAddress").map(str::to_string))
        .collect())
}

pub fn remove_portal(c: &dyn Cim, p: &Portal) -> Result<()> {
    let portal = portal_row(c, p)?;
    let out = c.call(
        &portal.path,
        PORTAL,
        "Remove",
        vec![
            ("TargetPortalAddress", Arg::Str(p.address().to_string())),
            ("TargetPortalPortNumber", Arg::U32(p.port().into())),
        ],
    )?;
    check(&out, PORTAL, "Remove", &p.to_string())
}

pub fn list_portals(c: &dyn Cim) -> Result<Vec<TargetPortal>> {
    Ok(c.instances(PORTAL, &[])?
        .iter()
        .filter_map(|r| {
            Some(TargetPortal {
                target_address: r.str("TargetPortalAddress")?.to_string(),
                target_port: r.u32("TargetPortalPortNumber")?,
            })
        })
        .collect())
}

/// The target `iqn` behind portal `p`; `NotFound` when the portal does not
/// offer it.
pub fn target_row(c: &dyn Cim, p: &Portal, iqn: &Iqn) -> Result<Row> {
    let portal = portal_row(c, p)?;
    c.associators(&portal.path, TARGET_TO_PORTAL, TARGET)?
        .into_iter()
        .find(|t| {
            t.str("NodeAddress")
                .is_some_and(|n| n.eq_ignore_ascii_case(iqn.as_str()))
        })
        .ok_or_else(|| Error::NotFound(format!("target {iqn} is not offered by portal {p}")))
}

pub fn connect(c: &dyn Cim, p: &Portal, iqn: &Iqn, auth: &Auth) -> Result<()> {
    let target = target_row(c, p, iqn)?;
    if target.bool("IsConnected") {
        return Ok(());
    }
    let mut args = vec![
        ("NodeAddress", Arg::Str(iqn.as_str().to_string())),
        ("TargetPortalAddress", Arg::Str(p.address().to_string())),
        ("TargetPortalPortNumber", Arg::U32(p.port().into())),
        ("AuthenticationType", Arg::Str(auth.wmi_name().to_string())),
    ];
    match auth {
        Auth::None => {}
        Auth::OneWay { user, secret } | Auth::Mutual { user, secret } => {
            if !user.is_empty() {
                args.push(("ChapUsername", Arg::Str(user.clone())));
            }
            args.push((
                "ChapSecret",
                Arg::Secret(Zeroizing::new(secret.expose().to_string())),
            ));
        }
    }
    let out = c.call(TARGET, TARGET, "Connect", args)?;
    check(&out, TARGET, "Connect", &format!("{iqn} via {p}"))
}

pub fn disconnect(c: &dyn Cim, p: &Portal, iqn: &Iqn) -> Result<()> {
    let target = match target_row(c, p, iqn) {
        Err(Error::NotFound(_)) => return Ok(()),
        other => other?,
    };
    if !target.bool("IsConnected") {
        return Ok(());
    }
    for s in c.associators(&target.path, TARGET_TO_SESSION, SESSION)? {
        let subject = format!("{iqn} via {p}");
        // A persistent (favorite) login would come back at boot: forget it.
        if s.bool("IsPersistent") {
            let out = c.call(&s.path, SESSION, "Unregister", vec![])?;
            check(&out, SESSION, "Unregister", &subject)?;
        }
        let id = s.str("SessionIdentifier").unwrap_or_default().to_string();
        let out = c.call(
            &target.path,
            TARGET,
            "Disconnect",
            vec![("SessionIdentifier", Arg::Str(id))],
        )?;
        check(&out, TARGET, "Disconnect", &subject)?;
    }
    Ok(())
}

pub fn target_disks(c: &dyn Cim, p: &Portal, iqn: &Iqn) -> Result<Vec<u32>> {
    let target = target_row(c, p, iqn)?;
    if !target.bool("IsConnected") {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for conn in c.associators(&target.path, TARGET_TO_CONNECTION, CONNECTION)? {
        for d in c.associators(&conn.path, CONNECTION_TO_DISK, DISK)? {
            if let Some(n) = d.u32("Number") {
                if !out.contains(&n) {
                    out.push(n);
                }
            }
        }
    }
    out.sort_unstable();
    Ok(out)
}

pub fn set_mutual_chap_secret(c: &dyn Cim, secret: Option<&Secret>) -> Result<()> {
    let value = Zeroizing::new(secret.map(|s| s.expose().to_string()).unwrap_or_default());
    let out = c.call(
        SESSION,
        SESSION,
        "SetCHAPSecret",
        vec![("ChapSecret", Arg::Secret(value))],
    )?;
    check(&out, SESSION, "SetCHAPSecret", "the initiator")
}

#[cfg(test)]
mod tests;
