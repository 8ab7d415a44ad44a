//! A recording in-memory SMB backend: mappings by root, the calls that
//! reached it (a refused request never does), and switches to simulate an
//! unreachable share or a failing host.

use super::api::{MappingState, SmbBackend};
use super::validate::{Credential, RemotePath, ShareRoot, SmbLinkTarget};
use crate::{Error, Result};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// A call that reached the backend (user names; passwords by their
/// SHA-256 only).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    Mapping(String),
    Map {
        root: String,
        user: Option<String>,
        /// The SHA-256 of the password (of the empty one too).
        password_sha256: Option<Vec<u8>>,
        require_privacy: bool,
    },
    Unmap(String),
}

/// The recording fake. Link targets are `\\?\UNC\...` (Windows form) unless
/// `mount_base` is set, then `<mount_base>/<host>/<share>/...`.
#[derive(Debug, Default)]
pub struct RecordingSmb {
    pub mappings: Mutex<BTreeMap<ShareRoot, MappingState>>,
    pub calls: Mutex<Vec<Call>>,
    /// Every `map` fails with this (FailedPrecondition) when set.
    pub fail_map: Mutex<Option<String>>,
    pub mount_base: Option<String>,
}

impl RecordingSmb {
    pub fn new() -> Self {
        Self::default()
    }

    /// Link targets below `base` (Linux-style mounts).
    pub fn with_mount_base(mut self, base: &str) -> Self {
        self.mount_base = Some(base.to_string());
        self
    }

    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    fn record(&self, c: Call) {
        self.calls.lock().unwrap().push(c);
    }
}

impl SmbBackend for RecordingSmb {
    fn mapping(&self, root: &ShareRoot) -> Result<Option<MappingState>> {
        self.record(Call::Mapping(root.unc()));
        Ok(self.mappings.lock().unwrap().get(root).copied())
    }

    fn map(
        &self,
        root: &ShareRoot,
        credential: Option<&Credential>,
        require_privacy: bool,
    ) -> Result<()> {
        self.record(Call::Map {
            root: root.unc(),
            user: credential.map(|c| c.user().to_string()),
            password_sha256: credential.map(|c| {
                use sha2::Digest;
                sha2::Sha256::digest(c.password().as_bytes()).to_vec()
            }),
            require_privacy,
        });
        if let Some(m) = self.fail_map.lock().unwrap().clone() {
            return Err(Error::FailedPrecondition(m));
        }
        self.mappings
            .lock()
            .unwrap()
            .insert(root.clone(), MappingState::Ok);
        Ok(())
    }

    fn unmap(&self, root: &ShareRoot) -> Result<()> {
        self.record(Call::Unmap(root.unc()));
        self.mappings.lock().unwrap().remove(root);
        Ok(())
    }

    fn link_target(&self, remote: &RemotePath) -> Result<SmbLinkTarget> {
        Ok(match &self.mount_base {
            None => remote.unc_link_target(),
            Some(base) => {
                let r = remote.root();
                remote.mounted_link_target(&format!("{base}/{}/{}", r.host(), r.share_key()))
            }
        })
    }
}

impl SmbBackend for std::sync::Arc<RecordingSmb> {
    fn mapping(&self, root: &ShareRoot) -> Result<Option<MappingState>> {
        (**self).mapping(root)
    }
    fn map(&self, root: &ShareRoot, c: Option<&Credential>, p: bool) -> Result<()> {
        (**self).map(root, c, p)
    }
    fn unmap(&self, root: &ShareRoot) -> Result<()> {
        (**self).unmap(root)
    }
    fn link_target(&self, remote: &RemotePath) -> Result<SmbLinkTarget> {
        (**self).link_target(remote)
    }
}
