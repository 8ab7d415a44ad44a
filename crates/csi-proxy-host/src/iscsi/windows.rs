//! The Windows iSCSI backend: the walks of `cim.rs` on the iSCSI group's
//! own WMI worker, in `root\Microsoft\Windows\Storage`. Each operation runs
//! whole on one of its COM threads, bounded by the call's deadline. CHAP secrets are method parameters only
//! (`Value::Secret`): never in a query, a log line or an error.
//!
//! Missing classes (wine, SKUs without the iSCSI initiator's provider) make
//! every call `FailedPrecondition`. `iscsidsc.dll` is not used, so nothing
//! is imported at load time.

use super::api::IscsiBackend;
use super::cim::{self, Arg, Cim, CimValue, Row, PROPERTIES};
use super::validate::{Auth, Iqn, Portal, Secret};
use super::TargetPortal;
use crate::storage::disk_use;
use crate::storage::windows::in_use;
use crate::win::wmi::{Object, Value, Wmi, WmiWorker, STORAGE_NAMESPACE};
use crate::wmi_schema::{queries, PATH};
use crate::{Error, Result};
use std::sync::Arc;

/// The WMI-backed iSCSI backend.
pub struct WindowsIscsi {
    wmi: Arc<WmiWorker>,
}

impl WindowsIscsi {
    pub fn new(wmi: Arc<WmiWorker>) -> Self {
        WindowsIscsi { wmi }
    }

    fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&dyn Cim) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        self.wmi.call(move |w| f(&WmiCim(w))).map_err(|e| match e {
            Error::NotFound(m) if m.contains("WMI") || m.contains("class") => {
                Error::FailedPrecondition(format!(
                    "the iSCSI initiator's WMI classes are not available on this host: {m}"
                ))
            }
            other => other,
        })
    }
}

/// `Cim` over one WMI connection (on a COM thread of the worker).
struct WmiCim<'a>(&'a Wmi);

fn to_row(o: &Object) -> Result<Row> {
    let mut r = Row {
        path: o.string(PATH).ok().flatten().unwrap_or_default(),
        ..Row::default()
    };
    for p in PROPERTIES {
        // A class lacks most of these: skip what it does not have.
        let Ok(v) = o.get(p) else { continue };
        let value = if v.is_null() {
            CimValue::Null
        } else if let Some(s) = v.as_string() {
            CimValue::Str(s)
        } else if let Ok(Some(b)) = o.bool(p) {
            CimValue::Bool(b)
        } else if let Ok(Some(n)) = o.u32(p) {
            CimValue::U32(n)
        } else {
            continue;
        };
        r.props.insert(p.to_string(), value);
    }
    Ok(r)
}

/// A class missing from the namespace: wine answers 0 rows instead of an
/// error, so the class is checked when a lookup finds nothing.
fn class_exists(w: &Wmi, class: &str) -> Result<()> {
    w.get_object_in(STORAGE_NAMESPACE, class)
        .map(|_| ())
        .map_err(|e| {
            Error::FailedPrecondition(format!(
                "the iSCSI initiator's WMI class {class} is not available on this host: {e}"
            ))
        })
}

impl Cim for WmiCim<'_> {
    fn instances(&self, class: &str, filter: &[(&str, CimValue)]) -> Result<Vec<Row>> {
        let wql = cim::instances_query(class, filter)?;
        let rows = self.0.query_in(STORAGE_NAMESPACE, &wql)?;
        if rows.is_empty() {
            class_exists(self.0, class)?;
        }
        rows.iter().map(to_row).collect()
    }

    fn associators(&self, path: &str, assoc: &str, result: &str) -> Result<Vec<Row>> {
        let wql = queries::associators(path, assoc, Some(result));
        self.0
            .query_in(STORAGE_NAMESPACE, &wql)?
            .iter()
            .map(to_row)
            .collect()
    }

    fn call(
        &self,
        path: &str,
        class: &str,
        method: &str,
        args: Vec<(&'static str, Arg)>,
    ) -> Result<Row> {
        let args: Vec<(&str, Value)> = args
            .into_iter()
            .map(|(k, a)| {
                (
                    k,
                    match a {
                        Arg::Str(s) => Value::Str(s),
                        Arg::U32(n) => Value::U32(n),
                        Arg::Secret(s) => Value::Secret(s),
                    },
                )
            })
            .collect();
        // A static method of a class the host lacks fails NotFound with
        // WMI's bare HRESULT: say what is missing, as the queries do.
        let out = self
            .0
            .exec_method_in(STORAGE_NAMESPACE, path, class, method, &args)
            .map_err(|e| match e {
                Error::NotFound(_) => class_exists(self.0, class).err().unwrap_or(e),
                other => other,
            })?;
        drop(args);
        to_row(&out)
    }
}

impl IscsiBackend for WindowsIscsi {
    fn add_portal(&self, portal: &Portal) -> Result<()> {
        let p = portal.clone();
        self.run(move |c| cim::add_portal(c, &p))
    }
    fn discover(&self, portal: &Portal) -> Result<Vec<String>> {
        let p = portal.clone();
        self.run(move |c| cim::discover(c, &p))
    }
    fn remove_portal(&self, portal: &Portal) -> Result<()> {
        let p = portal.clone();
        self.run(move |c| cim::remove_portal(c, &p))
    }
    fn list_portals(&self) -> Result<Vec<TargetPortal>> {
        self.run(cim::list_portals)
    }
    fn connect(&self, portal: &Portal, iqn: &Iqn, auth: &Auth) -> Result<()> {
        let (p, i, a) = (portal.clone(), iqn.clone(), auth.clone());
        self.run(move |c| cim::connect(c, &p, &i, &a))
    }
    /// Refused while a disk of the target holds a mounted, open or
    /// unlockable volume (`storage::disk_use`, the same query and rule as
    /// SetDiskState offline). The volumes stay locked until Disconnect
    /// returns.
    fn disconnect(&self, portal: &Portal, iqn: &Iqn) -> Result<()> {
        let disks = match self.target_disks(portal, iqn) {
            Err(Error::NotFound(_)) => Vec::new(),
            other => other?,
        };
        let what = format!("disconnect {iqn} via {portal}");
        let mut claims = Vec::new();
        for n in disks {
            let (uses, claim) = in_use::claim(&in_use::volumes_on(n)?)?;
            disk_use::refuse(n, &uses, &what)?;
            claims.push(claim);
        }
        let (p, i) = (portal.clone(), iqn.clone());
        let r = self.run(move |c| cim::disconnect(c, &p, &i));
        drop(claims);
        r
    }
    fn target_disks(&self, portal: &Portal, iqn: &Iqn) -> Result<Vec<u32>> {
        let (p, i) = (portal.clone(), iqn.clone());
        self.run(move |c| cim::target_disks(c, &p, &i))
    }
    fn set_mutual_chap_secret(&self, secret: Option<&Secret>) -> Result<()> {
        let s = secret.cloned();
        self.run(move |c| cim::set_mutual_chap_secret(c, s.as_ref()))
    }
}
