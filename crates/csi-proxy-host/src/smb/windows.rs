//! SMB global mappings on Windows: `MSFT_SmbGlobalMapping` in
//! `root\Microsoft\Windows\SMB` on the SMB group's own WMI worker (no Win32 API
//! creates *global* mappings; `WNetAddConnection2W` is per logon session).
//! The credential travels only as a method parameter ([`Value::Secret`]):
//! never in a query, a log line or an error.

use super::api::{MappingState, SmbBackend};
use super::reach::Reach;
use super::validate::{Credential, RemotePath, ShareRoot, SmbLinkTarget};
use super::wmi_params::{credential_string, mapping_query, mapping_state, CLASS};
use crate::win::wmi::{WmiWorker, SMB_NAMESPACE};
use crate::wmi_schema::names::{smb_global_mapping as mapping, RETURN_VALUE};
use crate::{Error, Result};
use std::sync::Arc;

/// The WMI-backed SMB backend.
pub struct WindowsSmb {
    wmi: Arc<WmiWorker>,
    reach: Reach,
}

impl WindowsSmb {
    pub fn new(wmi: Arc<WmiWorker>) -> Self {
        WindowsSmb {
            wmi,
            reach: Reach::new(),
        }
    }
}

/// A missing SMB namespace or class (wine, Server Core without the SMB
/// client's WMI provider) is a host that cannot do this.
fn unavailable(e: Error) -> Error {
    match e {
        Error::NotFound(m) => Error::FailedPrecondition(format!(
            "SMB global mappings are not available on this host (WMI {SMB_NAMESPACE}\\{CLASS}): {m}"
        )),
        other => other,
    }
}

impl SmbBackend for WindowsSmb {
    fn mapping(&self, root: &ShareRoot) -> Result<Option<MappingState>> {
        let query = mapping_query(root)?;
        let unc = root.unc();
        let state = self
            .wmi
            .call(move |w| {
                let rows = w.query_in(SMB_NAMESPACE, &query)?;
                match rows.first() {
                    None => Ok(None),
                    Some(r) => Ok(Some(mapping_state(r.read(&mapping::STATUS)?))),
                }
            })
            .map_err(unavailable)?;
        // Mapped and OK per WMI: is the share itself reachable (a rotated
        // password leaves an "OK" mapping that cannot open the share)? A
        // host that never answers holds only this call, until its deadline.
        Ok(match state {
            Some(MappingState::Ok) => {
                let share = format!(r"{unc}\");
                if self
                    .reach
                    .check(root, move || std::fs::metadata(share).is_ok())?
                {
                    Some(MappingState::Ok)
                } else {
                    Some(MappingState::Unreachable)
                }
            }
            s => s,
        })
    }

    fn map(
        &self,
        root: &ShareRoot,
        credential: Option<&Credential>,
        require_privacy: bool,
    ) -> Result<()> {
        use mapping::create;
        let mut args = vec![
            create::REMOTE_PATH.value(root.unc()),
            create::REQUIRE_PRIVACY.value(require_privacy),
        ];
        if let Some(c) = credential {
            args.push(create::CREDENTIAL.value(credential_string(c)));
        }
        let what = format!("create the SMB global mapping of {root}");
        self.wmi
            .call(move |w| {
                let out =
                    w.exec_method_in(SMB_NAMESPACE, CLASS, CLASS, create::METHOD.name, &args)?;
                drop(args);
                match out.any_out(&RETURN_VALUE)? {
                    None | Some(0) => Ok(()),
                    Some(code) => Err(Error::FailedPrecondition(format!(
                        "{what}: MSFT_SmbGlobalMapping.Create returned {code}"
                    ))),
                }
            })
            .map_err(unavailable)
    }

    fn unmap(&self, root: &ShareRoot) -> Result<()> {
        let query = mapping_query(root)?;
        let what = format!("remove the SMB global mapping of {root}");
        self.wmi
            .call(move |w| {
                let rows = w.query_in(SMB_NAMESPACE, &query)?;
                let Some(row) = rows.first() else {
                    return Ok(());
                };
                let path = row.path()?;
                let out = w.exec_method_in(
                    SMB_NAMESPACE,
                    &path,
                    CLASS,
                    mapping::remove::METHOD.name,
                    &[mapping::remove::FORCE.value(true)],
                )?;
                match out.any_out(&RETURN_VALUE)? {
                    None | Some(0) => Ok(()),
                    Some(code) => Err(Error::FailedPrecondition(format!(
                        "{what}: MSFT_SmbGlobalMapping.Remove returned {code}"
                    ))),
                }
            })
            .map_err(unavailable)
    }

    fn link_target(&self, remote: &RemotePath) -> Result<SmbLinkTarget> {
        Ok(remote.unc_link_target())
    }
}
