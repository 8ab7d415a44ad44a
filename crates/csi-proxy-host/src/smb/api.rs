//! The validating SMB API: every argument is checked, the local path
//! included, before any mapping is made; then upstream's flow.

use super::validate::{Credential, RemotePath, ShareRoot, SmbLinkTarget};
use super::{
    IsSmbMappedRequest, IsSmbMappedResponse, NewSmbGlobalMappingRequest,
    NewSmbGlobalMappingResponse, NewSmbLinkRequest, NewSmbLinkResponse,
    RemoveSmbGlobalMappingRequest, RemoveSmbGlobalMappingResponse, SmbApi,
};
use crate::confined::{Confined, Kind, Located};
use crate::{Error, Result};
use std::sync::Arc;
use zeroize::Zeroizing;

/// The state of an existing mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MappingState {
    /// Mapped and the share answers.
    Ok,
    /// Mapped, but the share cannot be reached (e.g. the password was
    /// rotated): it is removed and made again.
    Unreachable,
}

/// What a host must provide for the SMB API. Every value it gets has been
/// validated.
pub trait SmbBackend: Send + Sync {
    /// The mapping of `root`, if there is one.
    fn mapping(&self, root: &ShareRoot) -> Result<Option<MappingState>>;
    /// Map `root` host-wide. `credential` is `None` for an empty user.
    fn map(
        &self,
        root: &ShareRoot,
        credential: Option<&Credential>,
        require_privacy: bool,
    ) -> Result<()>;
    /// Remove the mapping of `root` (forced); no mapping is success.
    fn unmap(&self, root: &ShareRoot) -> Result<()>;
    /// Where the local link of `remote` points.
    fn link_target(&self, remote: &RemotePath) -> Result<SmbLinkTarget>;
}

/// The SMB API over a backend and the confined filesystem.
pub struct Smb<B> {
    backend: B,
    fs: Arc<Confined>,
    require_privacy: bool,
    allow_no_credentials: bool,
}

/// The flag that lets a mapping be made without a user name.
pub const ALLOW_NO_CREDENTIALS_FLAG: &str = "-smb-allow-no-credentials";

/// Who the host signs in as when a mapping names no user.
#[cfg(windows)]
const WITHOUT_USER: &str =
    "this node's computer account (the proxy runs as LocalSystem), to any host a plugin names";
#[cfg(not(windows))]
const WITHOUT_USER: &str = "a guest, to any host a plugin names";

impl<B: SmbBackend> Smb<B> {
    /// Mappings made with `require_privacy` (`-require-privacy`); local
    /// links confined to `fs`'s roots.
    pub fn new(backend: B, fs: Arc<Confined>, require_privacy: bool) -> Self {
        Smb {
            backend,
            fs,
            require_privacy,
            allow_no_credentials: false,
        }
    }

    /// Whether a mapping without a user name is made (`allow`: the
    /// operator's `-smb-allow-no-credentials`) or refused (the default).
    pub fn allowing_no_credentials(mut self, allow: bool) -> Self {
        self.allow_no_credentials = allow;
        self
    }

    /// The backend (tests inspect fakes through it).
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// Check the local path before anything is mapped: inside the roots,
    /// not a root, its parent an existing directory reached without links,
    /// and either free or already the link this request would make.
    fn check_local(&self, raw: &str, target: &SmbLinkTarget) -> Result<Option<Located>> {
        if raw.is_empty() {
            return Ok(None);
        }
        let p = self.fs.locate(raw)?;
        if p.is_root() {
            return Err(Error::PermissionDenied(format!(
                "local_path {}: refusing to create a link at an allowed root directory itself",
                p.shown()
            )));
        }
        // The parent must exist; a link in the chain is refused here.
        self.fs.open_parent(&p)?;
        match self.fs.kind(&p)? {
            None => {}
            Some(Kind::Link) => {
                // Fine only if it already stores this target (checked again
                // when linking); anything else is refused now.
                let fresh = self.fs.smb_link_matches(target, &p)?;
                if !fresh {
                    return Err(Error::AlreadyExists(format!(
                        "local_path {} is a link to something else; remove it first",
                        p.shown()
                    )));
                }
            }
            Some(_) => {
                return Err(Error::AlreadyExists(format!(
                    "local_path {} exists and is not a link",
                    p.shown()
                )))
            }
        }
        Ok(Some(p))
    }
}

impl<B: SmbBackend> SmbApi for Smb<B> {
    fn is_smb_mapped(&self, req: IsSmbMappedRequest) -> Result<IsSmbMappedResponse> {
        let remote = RemotePath::parse(&req.remote_path)?;
        let state = self.backend.mapping(&remote.root())?;
        Ok(IsSmbMappedResponse {
            mapped: state == Some(MappingState::Ok),
        })
    }

    fn new_smb_link(&self, req: NewSmbLinkRequest) -> Result<NewSmbLinkResponse> {
        if req.local_path.is_empty() {
            return Err(Error::InvalidArgument(
                "local_path is empty: NewSMBLink needs the link to create".into(),
            ));
        }
        let remote = RemotePath::parse(&req.remote_path)?;
        let target = self.backend.link_target(&remote)?;
        if let Some(local) = self.check_local(&req.local_path, &target)? {
            self.fs.smb_link(&target, &local)?;
        }
        Ok(NewSmbLinkResponse {})
    }

    fn new_smb_global_mapping(
        &self,
        req: NewSmbGlobalMappingRequest,
    ) -> Result<NewSmbGlobalMappingResponse> {
        let NewSmbGlobalMappingRequest {
            remote_path,
            local_path,
            username,
            password,
        } = req;
        // The password is wiped when this function returns, whatever path
        // it takes.
        let password = Zeroizing::new(password);
        let remote = RemotePath::parse(&remote_path)?;
        let credential = Credential::parse(&username, password)?;
        if credential.is_none() && !self.allow_no_credentials {
            // Default-deny: without a user the host signs in with its own
            // identity, wherever the plugin points it (NTLM coercion and
            // relay on Windows). Refused before anything is looked at.
            return Err(Error::PermissionDenied(format!(
                "NewSmbGlobalMapping of {}: a mapping without a user name is refused; it would \
                 sign in as {WITHOUT_USER}. Give the share's user and password, or start \
                 csi-proxy with {ALLOW_NO_CREDENTIALS_FLAG} to map with the node's own identity \
                 on purpose",
                remote.root()
            )));
        }
        let target = self.backend.link_target(&remote)?;
        let local = self.check_local(&local_path, &target)?;

        let root = remote.root();
        let state = self.backend.mapping(&root)?;
        if state == Some(MappingState::Unreachable) {
            tracing::info!(root = %root, "SMB mapping exists but the share is unreachable: remapping");
            self.backend.unmap(&root)?;
        }
        if state != Some(MappingState::Ok) {
            self.backend
                .map(&root, credential.as_ref(), self.require_privacy)?;
        }
        drop(credential);
        if let Some(local) = local {
            self.fs.smb_link(&target, &local)?;
        }
        Ok(NewSmbGlobalMappingResponse {})
    }

    fn remove_smb_global_mapping(
        &self,
        req: RemoveSmbGlobalMappingRequest,
    ) -> Result<RemoveSmbGlobalMappingResponse> {
        let remote = RemotePath::parse(&req.remote_path)?;
        self.backend.unmap(&remote.root())?;
        Ok(RemoveSmbGlobalMappingResponse {})
    }
}
