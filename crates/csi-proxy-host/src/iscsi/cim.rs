//! The iSCSI operations over the Windows storage provider's classes
//! (`MSFT_iSCSITargetPortal`, `MSFT_iSCSITarget`, `MSFT_iSCSISession`,
//! `MSFT_iSCSIConnection`, `MSFT_Disk` and their associations), as upstream
//! does them, written against a small [`Cim`] trait so that the walks,
//! parameters and return-code handling are tested on every OS with an
//! in-memory model; `windows.rs` implements the trait on the WMI worker.

use super::validate::{Auth, Iqn, Portal, Secret};
use super::TargetPortal;
use crate::storage::parse::msft;
use crate::wmi_schema::names::{
    disk, iscsi_connection, iscsi_connection_to_disk, iscsi_session, iscsi_target,
    iscsi_target_portal as portal, iscsi_target_to_connection, iscsi_target_to_portal,
    iscsi_target_to_session, RETURN_VALUE,
};
use crate::wmi_schema::queries::{self, Cond};
use crate::wmi_schema::{Param, Prop};
use crate::{Error, Result};
use std::collections::BTreeMap;
use zeroize::Zeroizing;

pub const PORTAL: &str = portal::CLASS.name;
pub const TARGET: &str = iscsi_target::CLASS.name;
pub const SESSION: &str = iscsi_session::CLASS.name;
pub const CONNECTION: &str = iscsi_connection::CLASS.name;
pub const DISK: &str = disk::CLASS.name;
pub const TARGET_TO_PORTAL: &str = iscsi_target_to_portal::CLASS.name;
pub const TARGET_TO_SESSION: &str = iscsi_target_to_session::CLASS.name;
pub const TARGET_TO_CONNECTION: &str = iscsi_target_to_connection::CLASS.name;
pub const CONNECTION_TO_DISK: &str = iscsi_connection_to_disk::CLASS.name;

/// The properties the walks read (the WMI adapter reads only these).
pub const PROPERTIES: [&str; 8] = [
    portal::TARGET_PORTAL_ADDRESS.name,
    portal::TARGET_PORTAL_PORT_NUMBER.name,
    iscsi_target::NODE_ADDRESS.name,
    iscsi_target::IS_CONNECTED.name,
    iscsi_session::IS_PERSISTENT.name,
    iscsi_session::SESSION_IDENTIFIER.name,
    disk::NUMBER.name,
    RETURN_VALUE.name,
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
    fn str(&self, p: &Prop<String>) -> Option<&str> {
        match self.props.get(p.name) {
            Some(CimValue::Str(s)) => Some(s),
            _ => None,
        }
    }
    fn u32(&self, p: &Prop<u32>) -> Option<u32> {
        match self.props.get(p.name) {
            Some(CimValue::U32(n)) => Some(*n),
            _ => None,
        }
    }
    fn bool(&self, p: &Prop<bool>) -> bool {
        matches!(self.props.get(p.name), Some(CimValue::Bool(true)))
    }
    fn return_value(&self) -> Option<u32> {
        match self.props.get(RETURN_VALUE.name) {
            Some(CimValue::U32(n)) => Some(*n),
            _ => None,
        }
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

impl From<String> for Arg {
    fn from(s: String) -> Arg {
        Arg::Str(s)
    }
}
impl From<u16> for Arg {
    fn from(n: u16) -> Arg {
        Arg::U32(n.into())
    }
}
impl From<Zeroizing<String>> for Arg {
    fn from(s: Zeroizing<String>) -> Arg {
        Arg::Secret(s)
    }
}

impl<T: Into<Arg>> Param<T> {
    /// This in-parameter with value `v`.
    pub fn arg(&self, v: T) -> (&'static str, Arg) {
        (self.name, v.into())
    }
}

/// The WQL of [`Cim::instances`]: `SELECT * FROM class [WHERE k = v AND ...]`.
pub fn instances_query(class: &str, filter: &[(&str, CimValue)]) -> Result<String> {
    let conds = filter
        .iter()
        .map(|(k, v)| match v {
            CimValue::Str(s) => {
                Cond::string(k, s).map_err(|e| Error::InvalidArgument(format!("{k}: {e}")))
            }
            CimValue::U32(n) => Ok(Cond::int(k, (*n).into())),
            CimValue::Bool(b) => Ok(Cond::bool(k, *b)),
            CimValue::Null => Ok(Cond::null(k)),
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(queries::select(class, &[], &conds))
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
    match out.return_value() {
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
            portal::TARGET_PORTAL_ADDRESS.name,
            CimValue::Str(p.address().to_string()),
        ),
        (
            portal::TARGET_PORTAL_PORT_NUMBER.name,
            CimValue::U32(p.port().into()),
        ),
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
    use portal::new::{METHOD, TARGET_PORTAL_ADDRESS, TARGET_PORTAL_PORT_NUMBER};
    let out = c.call(
        PORTAL,
        PORTAL,
        METHOD.name,
        vec![
            TARGET_PORTAL_ADDRESS.arg(p.address().to_string()),
            TARGET_PORTAL_PORT_NUMBER.arg(p.port()),
        ],
    )?;
    check(&out, PORTAL, METHOD.name, &p.to_string())
}

pub fn discover(c: &dyn Cim, p: &Portal) -> Result<Vec<String>> {
    let portal = portal_row(c, p)?;
    Ok(c.associators(&portal.path, TARGET_TO_PORTAL, TARGET)?
        .iter()
        .filter_map(|t| t.str(&iscsi_target::NODE_ADDRESS).map(str::to_string))
        .collect())
}

pub fn remove_portal(c: &dyn Cim, p: &Portal) -> Result<()> {
    let portal = portal_row(c, p)?;
    use portal::remove::{METHOD, TARGET_PORTAL_ADDRESS, TARGET_PORTAL_PORT_NUMBER};
    let out = c.call(
        &portal.path,
        PORTAL,
        METHOD.name,
        vec![
            TARGET_PORTAL_ADDRESS.arg(p.address().to_string()),
            TARGET_PORTAL_PORT_NUMBER.arg(p.port()),
        ],
    )?;
    check(&out, PORTAL, METHOD.name, &p.to_string())
}

pub fn list_portals(c: &dyn Cim) -> Result<Vec<TargetPortal>> {
    Ok(c.instances(PORTAL, &[])?
        .iter()
        .filter_map(|r| {
            Some(TargetPortal {
                target_address: r.str(&portal::TARGET_PORTAL_ADDRESS)?.to_string(),
                target_port: r.u32(&portal::TARGET_PORTAL_PORT_NUMBER)?,
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
            t.str(&iscsi_target::NODE_ADDRESS)
                .is_some_and(|n| n.eq_ignore_ascii_case(iqn.as_str()))
        })
        .ok_or_else(|| Error::NotFound(format!("target {iqn} is not offered by portal {p}")))
}

pub fn connect(c: &dyn Cim, p: &Portal, iqn: &Iqn, auth: &Auth) -> Result<()> {
    let target = target_row(c, p, iqn)?;
    if target.bool(&iscsi_target::IS_CONNECTED) {
        return Ok(());
    }
    use iscsi_target::connect as m;
    let mut args = vec![
        m::NODE_ADDRESS.arg(iqn.as_str().to_string()),
        m::TARGET_PORTAL_ADDRESS.arg(p.address().to_string()),
        m::TARGET_PORTAL_PORT_NUMBER.arg(p.port()),
        m::AUTHENTICATION_TYPE.arg(auth.wmi_name().to_string()),
    ];
    match auth {
        Auth::None => {}
        Auth::OneWay { user, secret } | Auth::Mutual { user, secret } => {
            if !user.is_empty() {
                args.push(m::CHAP_USERNAME.arg(user.clone()));
            }
            args.push(m::CHAP_SECRET.arg(Zeroizing::new(secret.expose().to_string())));
        }
    }
    let out = c.call(TARGET, TARGET, m::METHOD.name, args)?;
    check(&out, TARGET, m::METHOD.name, &format!("{iqn} via {p}"))
}

pub fn disconnect(c: &dyn Cim, p: &Portal, iqn: &Iqn) -> Result<()> {
    let target = match target_row(c, p, iqn) {
        Err(Error::NotFound(_)) => return Ok(()),
        other => other?,
    };
    if !target.bool(&iscsi_target::IS_CONNECTED) {
        return Ok(());
    }
    use iscsi_session::unregister;
    use iscsi_target::disconnect;
    for s in c.associators(&target.path, TARGET_TO_SESSION, SESSION)? {
        let subject = format!("{iqn} via {p}");
        // A persistent (favorite) login would come back at boot: forget it.
        if s.bool(&iscsi_session::IS_PERSISTENT) {
            let out = c.call(&s.path, SESSION, unregister::METHOD.name, vec![])?;
            check(&out, SESSION, unregister::METHOD.name, &subject)?;
        }
        let id = s
            .str(&iscsi_session::SESSION_IDENTIFIER)
            .unwrap_or_default()
            .to_string();
        let out = c.call(
            &target.path,
            TARGET,
            disconnect::METHOD.name,
            vec![disconnect::SESSION_IDENTIFIER.arg(id)],
        )?;
        check(&out, TARGET, disconnect::METHOD.name, &subject)?;
    }
    Ok(())
}

pub fn target_disks(c: &dyn Cim, p: &Portal, iqn: &Iqn) -> Result<Vec<u32>> {
    let target = target_row(c, p, iqn)?;
    if !target.bool(&iscsi_target::IS_CONNECTED) {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for conn in c.associators(&target.path, TARGET_TO_CONNECTION, CONNECTION)? {
        for d in c.associators(&conn.path, CONNECTION_TO_DISK, DISK)? {
            if let Some(n) = d.u32(&disk::NUMBER) {
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
    use iscsi_session::set_chap_secret as m;
    let out = c.call(
        SESSION,
        SESSION,
        m::METHOD.name,
        vec![m::CHAP_SECRET.arg(value)],
    )?;
    check(&out, SESSION, m::METHOD.name, "the initiator")
}

#[cfg(test)]
mod tests;
