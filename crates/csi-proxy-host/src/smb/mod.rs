//! SMB API group: version-free types and the API trait.
//!
//! The password of [`NewSmbGlobalMappingRequest`] is a secret: its `Debug`
//! output redacts it, nothing logs it, and it is wiped from memory once
//! used (`zeroize`).
//!
//! Layout: the types and [`SmbApi`] here; [`Smb`] (`api.rs`) validates every
//! argument ([`validate`]: remote path grammar, user, password, the local
//! path through the confined filesystem) before anything is mapped, keeps
//! upstream's flow (map `\\host\share` once, remap when the mapping exists
//! but the share is unreachable, link `local_path` to the full remote path
//! with `Confined::smb_link`) and drives an [`SmbBackend`]: `windows.rs`
//! (`MSFT_SmbGlobalMapping` over the group's own WMI worker), `linux/` (kernel
//! CIFS mounts through `fsopen`/`fsconfig`), and the recording [`fake`].
//! A mapping without a user name is refused unless the operator allows it
//! (`-smb-allow-no-credentials`); whether a mapped share answers is asked
//! on a thread of its own, bounded by the call's deadline ([`reach`]).

use crate::{Error, Result};
use std::fmt;

mod api;
pub mod fake;
#[cfg(target_os = "linux")]
pub mod linux;
pub mod reach;
pub mod validate;
#[cfg(windows)]
pub mod windows;
pub mod wmi_params;

#[cfg(all(test, target_os = "linux"))]
mod tests;

pub use api::{MappingState, Smb, SmbBackend, ALLOW_NO_CREDENTIALS_FLAG};
pub use validate::{Credential, RemotePath, ShareRoot, SmbLinkTarget};

/// Map the share `remote_path` host-wide (SMB global mapping) and link it at
/// `local_path`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct NewSmbGlobalMappingRequest {
    pub remote_path: String,
    pub local_path: String,
    pub username: String,
    /// Secret: never logged, redacted by `Debug`.
    pub password: String,
}

impl fmt::Debug for NewSmbGlobalMappingRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NewSmbGlobalMappingRequest")
            .field("remote_path", &self.remote_path)
            .field("local_path", &self.local_path)
            .field("username", &self.username)
            .field("password", &format_args!("<redacted>"))
            .finish()
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NewSmbGlobalMappingResponse {}

/// Remove the host-wide mapping of the share `remote_path`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RemoveSmbGlobalMappingRequest {
    pub remote_path: String,
}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RemoveSmbGlobalMappingResponse {}

/// Is the share of `remote_path` mapped host-wide and reachable (library
/// mode's `IsSMBMapped`; no proto method)?
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IsSmbMappedRequest {
    pub remote_path: String,
}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IsSmbMappedResponse {
    pub mapped: bool,
}

/// Create the local link `local_path` to `remote_path` (the last step of
/// NewSmbGlobalMapping on its own: library mode's `NewSMBLink`; no proto
/// method).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NewSmbLinkRequest {
    pub remote_path: String,
    pub local_path: String,
}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NewSmbLinkResponse {}

/// The version-free SMB API. Every versioned gRPC service of the group is
/// adapted onto this trait.
pub trait SmbApi: Send + Sync {
    fn is_smb_mapped(&self, req: IsSmbMappedRequest) -> Result<IsSmbMappedResponse>;
    fn new_smb_link(&self, req: NewSmbLinkRequest) -> Result<NewSmbLinkResponse>;
    fn new_smb_global_mapping(
        &self,
        req: NewSmbGlobalMappingRequest,
    ) -> Result<NewSmbGlobalMappingResponse>;
    fn remove_smb_global_mapping(
        &self,
        req: RemoveSmbGlobalMappingRequest,
    ) -> Result<RemoveSmbGlobalMappingResponse>;
}

/// An SMB API without a host backend (other OSes): every operation fails
/// with [`Error::Unimplemented`] naming the group and the method.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoSmbBackend;

const GROUP: &str = "smb";

impl SmbApi for NoSmbBackend {
    fn is_smb_mapped(&self, _: IsSmbMappedRequest) -> Result<IsSmbMappedResponse> {
        Err(Error::unimplemented(GROUP, "IsSMBMapped"))
    }
    fn new_smb_link(&self, _: NewSmbLinkRequest) -> Result<NewSmbLinkResponse> {
        Err(Error::unimplemented(GROUP, "NewSMBLink"))
    }
    fn new_smb_global_mapping(
        &self,
        _: NewSmbGlobalMappingRequest,
    ) -> Result<NewSmbGlobalMappingResponse> {
        Err(Error::unimplemented(GROUP, "NewSmbGlobalMapping"))
    }
    fn remove_smb_global_mapping(
        &self,
        _: RemoveSmbGlobalMappingRequest,
    ) -> Result<RemoveSmbGlobalMappingResponse> {
        Err(Error::unimplemented(GROUP, "RemoveSmbGlobalMapping"))
    }
}

#[cfg(test)]
mod debug_tests {
    use super::*;

    #[test]
    fn debug_redacts_the_password() {
        let req = NewSmbGlobalMappingRequest {
            remote_path: r"\\server\share".into(),
            local_path: r"C:\var\lib\kubelet\x".into(),
            username: r"DOMAIN\user".into(),
            password: "hunter2-secret".into(),
        };
        for s in [format!("{req:?}"), format!("{req:#?}")] {
            assert!(!s.contains("hunter2-secret"), "{s}");
            assert!(s.contains("<redacted>"), "{s}");
            assert!(s.contains(r"DOMAIN\\user"), "{s}");
        }
    }
}
