//! The bundle of every API group's implementation that a server (or an
//! in-process user) works with.

use crate::filesystem::{self, fake::RecordingFilesystem, Filesystem, FilesystemApi};
use crate::path::PathPolicy;
use std::sync::Arc;

/// Every API group, version-free.
#[derive(Clone)]
pub struct Host {
    pub filesystem: Arc<dyn FilesystemApi>,
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
            filesystem: Arc::new(Filesystem::new(policy, filesystem::OsFilesystem)),
        }
    }

    /// A host over recording fakes (for tests of the layers above).
    pub fn fake(policy: PathPolicy) -> (Host, Fakes) {
        let fs = Arc::new(RecordingFilesystem::new());
        let host = Host {
            filesystem: Arc::new(Filesystem::new(policy, fs.clone())),
        };
        (host, Fakes { filesystem: fs })
    }
}
