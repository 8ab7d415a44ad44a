//! The Windows storage backend: Disk and Volume operations over I/O
//! controls and the Win32 volume-management API, with WMI (on one COM
//! worker thread) only where Windows has no other public API: disk
//! locations, partitioning, rescan, format and resize.
//!
//! See `docs/windows-storage.md` for the mechanism of every operation and
//! what has run where.

mod disk;
mod mounts;
mod stor;
mod volume;
mod win32;

// Shared with the SMB and iSCSI backends (`crate::win`).
pub(crate) use crate::win::errors;
pub use crate::win::wmi;

use std::collections::BTreeMap;

use super::{ResizeTarget, StorageBackend, VolumeId, VolumeStats};
use crate::confined::{Confined, Located};
use crate::disk::{DiskIds, DiskLocation};
use crate::path::PathPolicy;
use crate::{Error, Result};

/// The storage of this Windows host. Creating it touches nothing; COM and
/// the WMI worker thread start with the first operation that needs WMI.
pub struct WindowsStorage {
    wmi: wmi::WmiWorker,
    mounts: mounts::Mounts,
    /// The allowed roots: a volume reachable anywhere else belongs to the
    /// host (none set: every access path counts as the host's).
    roots: Option<PathPolicy>,
}

impl Default for WindowsStorage {
    fn default() -> Self {
        Self::new()
    }
}

impl WindowsStorage {
    /// The backend; nothing starts until it is used.
    pub fn new() -> Self {
        WindowsStorage {
            wmi: wmi::WmiWorker::new(wmi::STORAGE_NAMESPACE),
            mounts: mounts::Mounts::default(),
            roots: None,
        }
    }

    /// Volumes reachable only below these roots are the pods'; any other
    /// access path (a drive letter, a folder elsewhere) makes a volume the
    /// host's, never formatted or mounted into the roots.
    pub fn with_roots(mut self, roots: PathPolicy) -> Self {
        self.roots = Some(roots);
        self
    }

    /// The WMI worker (for callers that need another WMI query on the same
    /// warm COM thread).
    pub fn wmi(&self) -> &wmi::WmiWorker {
        &self.wmi
    }

    /// Every volume of the host, as `FindFirstVolumeW` lists them.
    pub fn volumes(&self) -> Result<Vec<VolumeId>> {
        volume::all_volumes()
    }

    /// The numbers of the disks of the host.
    pub fn disks(&self) -> Result<Vec<u32>> {
        disk::disk_numbers()
    }
}

impl StorageBackend for WindowsStorage {
    fn disk_locations(&self) -> Result<BTreeMap<u32, DiskLocation>> {
        stor::disk_locations(&self.wmi)
    }

    fn disk_ids(&self) -> Result<BTreeMap<u32, DiskIds>> {
        let mut out = BTreeMap::new();
        for n in disk::disk_numbers()? {
            match disk::disk_ids(n) {
                Ok(ids) => {
                    out.insert(n, ids);
                }
                // Removed since it was listed.
                Err(Error::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    fn disk_size(&self, disk: u32) -> Result<u64> {
        disk::disk_size(disk)
    }

    fn disk_online(&self, disk: u32) -> Result<bool> {
        disk::disk_online(disk)
    }

    fn set_disk_online(&self, disk: u32, online: bool) -> Result<()> {
        if !online {
            mounts::refuse_host_disk(
                disk,
                self.roots.as_ref(),
                &format!("take disk {disk} offline"),
            )?;
        }
        disk::set_disk_online(disk, online)
    }

    fn partition_disk(&self, disk: u32) -> Result<()> {
        // The IOCTL open answers "no such disk" without starting WMI.
        drop(disk::open_disk(disk, 0)?);
        mounts::refuse_host_disk(disk, self.roots.as_ref(), &format!("partition disk {disk}"))?;
        stor::partition_disk(&self.wmi, disk)
    }

    fn rescan(&self) -> Result<()> {
        stor::rescan(&self.wmi)
    }

    fn volumes_on_disk(&self, disk: u32, partition: Option<u32>) -> Result<Vec<VolumeId>> {
        volume::volumes_on_disk(disk, partition)
    }

    fn volume_disk(&self, v: &VolumeId) -> Result<u32> {
        volume::volume_disk(v)
    }

    fn is_formatted(&self, v: &VolumeId) -> Result<bool> {
        volume::is_formatted(v)
    }

    /// Refused while the volume is reachable anywhere: mounted on a
    /// directory, or with a drive letter (then the host may be using it).
    fn format(&self, v: &VolumeId) -> Result<()> {
        if let Some(p) = mounts::access_paths(v)?.first() {
            return Err(Error::FailedPrecondition(format!(
                "volume {v} is mounted at {p:?}: unmount it (or remove the drive letter) before formatting"
            )));
        }
        stor::format(&self.wmi, v)
    }

    fn volume_stats(&self, v: &VolumeId) -> Result<VolumeStats> {
        volume::volume_stats(v)
    }

    fn resize(&self, v: &VolumeId, target: ResizeTarget) -> Result<()> {
        stor::resize(&self.wmi, v, target)
    }

    fn flush(&self, v: &VolumeId) -> Result<()> {
        volume::flush(v)
    }

    fn mount(&self, v: &VolumeId, fs: &Confined, target: &Located) -> Result<()> {
        self.mounts.mount(v, fs, target)
    }

    fn unmount(&self, v: &VolumeId, fs: &Confined, target: &Located) -> Result<()> {
        self.mounts.unmount(v, fs, target)
    }

    fn volume_at(&self, fs: &Confined, target: &Located) -> Result<VolumeId> {
        mounts::volume_at(fs, target)
    }

    fn closest_volume(&self, fs: &Confined, target: &Located) -> Result<VolumeId> {
        mounts::closest_volume(fs, target)
    }
}

#[cfg(test)]
mod tests;
