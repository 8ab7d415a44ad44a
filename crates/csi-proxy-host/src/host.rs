//! The bundle of every API group's implementation that a server (or an
//! in-process user) works with.

use crate::disk::{DiskApi, NoDiskBackend};
use crate::filesystem::{self, fake::RecordingFilesystem, Filesystem, FilesystemApi};
use crate::iscsi::{IscsiApi, NoIscsiBackend};
use crate::path::PathPolicy;
use crate::smb::{NoSmbBackend, SmbApi};
use crate::system::{NoSystemBackend, SystemApi};
use crate::volume::{NoVolumeBackend, VolumeApi};
use std::sync::Arc;

/// Every API group, version-free. Disk, iSCSI, SMB, system and volume have
/// no host backend yet: their `No*Backend` answers Unimplemented.
#[derive(Clone)]
pub struct Host {
    pub disk: Arc<dyn DiskApi>,
    pub filesystem: Arc<dyn FilesystemApi>,
    pub iscsi: Arc<dyn IscsiApi>,
    pub smb: Arc<dyn SmbApi>,
    pub system: Arc<dyn SystemApi>,
    pub volume: Arc<dyn VolumeApi>,
}

/// The recording fakes behind [`Host::fake`], for tests to inspect.
#[derive(Clone)]
pub struct Fakes {
    pub filesystem: Arc<RecordingFilesystem>,
}

impl Host {
    /// The real host of this OS, with `policy` guarding every path.
    pub fn os(policy: PathPolicy) -> Host {
        Host {
            disk: Arc::new(NoDiskBackend),
            filesystem: Arc::new(Filesystem::new(policy, filesystem::OsFilesystem)),
            iscsi: Arc::new(NoIscsiBackend),
            smb: Arc::new(NoSmbBackend),
            system: Arc::new(NoSystemBackend),
            volume: Arc::new(NoVolumeBackend),
        }
    }

    /// A host over recording fakes (for tests of the layers above).
    pub fn fake(policy: PathPolicy) -> (Host, Fakes) {
        let fs = Arc::new(RecordingFilesystem::new());
        let host = Host {
            disk: Arc::new(NoDiskBackend),
            filesystem: Arc::new(Filesystem::new(policy, fs.clone())),
            iscsi: Arc::new(NoIscsiBackend),
            smb: Arc::new(NoSmbBackend),
            system: Arc::new(NoSystemBackend),
            volume: Arc::new(NoVolumeBackend),
        };
        (host, Fakes { filesystem: fs })
    }
}
