//! SMB API group: version-free types and the API trait.
//!
//! The password of [`NewSmbGlobalMappingRequest`] is a secret: its `Debug`
//! output redacts it, and nothing may log it. No host backend exists yet:
//! [`NoSmbBackend`] answers every operation with [`Error::Unimplemented`].

use crate::{Error, Result};
use std::fmt;

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

/// The version-free SMB API. Every versioned gRPC service of the group is
/// adapted onto this trait.
pub trait SmbApi: Send + Sync {
    fn new_smb_global_mapping(
        &self,
        req: NewSmbGlobalMappingRequest,
    ) -> Result<NewSmbGlobalMappingResponse>;
    fn remove_smb_global_mapping(
        &self,
        req: RemoveSmbGlobalMappingRequest,
    ) -> Result<RemoveSmbGlobalMappingResponse>;
}

/// The SMB API before a host backend exists: every operation fails with
/// [`Error::Unimplemented`] naming the group and the method.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoSmbBackend;

const GROUP: &str = "smb";

impl SmbApi for NoSmbBackend {
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
mod tests {
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
