//! The Windows storage backend: Disk and Volume operations over I/O
//! controls and the Win32 volume-management API, with WMI (on the storage
//! group's own pool of COM worker threads) only where Windows has no other public API: disk
//! locations, partitioning, rescan, format and resize.
//!
//! See `docs/windows-storage.md` for the mechanism of every operation and
//! what has run where.

mod content;
mod disk;
pub(crate) mod in_use;
mod inventory;
mod mounts;
mod stor;
mod volume;
mod win32;

// Shared with the SMB and iSCSI backends (`crate::win`).
pub(crate) use crate::win::errors;
pub use crate::win::wmi;

use std::collections::BTreeMap;

use super::content::{self as rules, Overwrite};
use super::parse::layout;
use super::{disk_use, identity};
use super::{DiskLayout, PartitionStep, ResizeTarget, StorageBackend, VolumeId, VolumeStats};
use crate::confined::{Confined, Located};
use crate::disk::{DiskIds, DiskLocation};
use crate::path::PathPolicy;
use crate::{Error, Result};

/// The storage of this Windows host. Creating it registers for device
/// notifications and touches nothing else; COM and the WMI worker thread
/// start with the first operation that needs WMI.
pub struct WindowsStorage {
    wmi: wmi::WmiWorker,
    mounts: mounts::Mounts,
    /// The allowed roots: a volume reachable anywhere else belongs to the
    /// host (none set: every access path counts as the host's).
    roots: Option<PathPolicy>,
    /// Disks and volumes, kept current by device notifications.
    inventory: inventory::WinInventory,
    locations: inventory::Locations,
    /// What PartitionDisk and FormatVolume may write over.
    overwrite: Overwrite,
    /// The rescan out, if any.
    rescans: stor::Rescans,
    /// Test hook: reads of one disk's identifiers hang.
    #[cfg(test)]
    hang: std::sync::Arc<inventory::hang::Hang>,
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
            inventory: inventory::new_inventory(),
            locations: inventory::Locations::default(),
            overwrite: Overwrite::default(),
            rescans: stor::Rescans::default(),
            #[cfg(test)]
            hang: Default::default(),
        }
    }

    /// Lets PartitionDisk and FormatVolume write over what `overwrite`
    /// allows (by default nothing but zeros and, for FormatVolume, a
    /// filesystem).
    pub fn with_overwrite(mut self, overwrite: Overwrite) -> Self {
        self.overwrite = overwrite;
        self
    }

    /// Volumes reachable only below these roots are the pods'; any other
    /// access path (a drive letter, a folder elsewhere) makes a volume the
    /// host's, never formatted or mounted into the roots.
    pub fn with_roots(mut self, roots: PathPolicy) -> Self {
        self.roots = Some(roots);
        self
    }

    /// Refuses `what` on a disk that holds the Windows system volume or a
    /// volume the host uses outside the roots.
    fn refuse_host_disk(&self, disk: u32, what: &str) -> Result<()> {
        let volumes = self.volumes_on_disk(disk, None)?;
        mounts::refuse_host_disk(disk, &volumes, self.roots.as_ref(), what)
    }

    /// Whether device notifications keep the inventory current (else every
    /// list call scans the host).
    pub fn follows_notifications(&self) -> bool {
        self.inventory.has_events()
    }

    /// The WMI worker (for callers that need another WMI query on the same
    /// warm COM threads).
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

/// In an inline attempt, "would block": the operation asks the device.
fn device_io(what: &str) -> Result<()> {
    if crate::inline::active() {
        return Err(crate::inline::would_block(what));
    }
    Ok(())
}

impl WindowsStorage {
    /// `step` of partitioning `disk` (`what` names it in refusals). The
    /// disk is held open (for reading and writing) from the first look to
    /// the last. Its content and table are read through that handle; a raw
    /// disk is initialised through it (`IOCTL_DISK_CREATE_DISK`, GPT, with
    /// a disk GUID we choose at random). The partition is then created by
    /// `MSFT_Disk` number, only on an `MSFT_Disk` that carries the table id
    /// read through the handle (`storage::identity::TableId`); afterwards
    /// the held disk must still be disk `disk` and carry its table.
    fn partition(&self, disk: u32, step: PartitionStep, what: &str) -> Result<()> {
        let what = format!("{what} disk {disk}");
        // The IOCTL open answers "no such disk" without starting WMI.
        let pin = disk::Pinned::open(disk, win32::GENERIC_READ | win32::GENERIC_WRITE)?;
        self.refuse_host_disk(disk, &what)?;
        if pin.is_offline()? {
            return Err(Error::FailedPrecondition(format!(
                "disk {disk} is offline: bring it online (SetDiskState) before partitioning"
            )));
        }
        let mut was_raw = false;
        if step != PartitionStep::Partition {
            let (c, has_table) = content::of_disk(&pin)?;
            if !has_table {
                rules::check_partition(disk, &c, false, self.overwrite)?;
                was_raw = true;
            }
        }
        // The volumes were looked up by number: the held disk still has it.
        pin.still_the_same(&what)?;
        let mut table = pin.layout()?;
        // A table Windows sees and our parse does not is kept, as
        // `Initialize` would keep it.
        if was_raw && table.style == layout::PartitionStyle::Raw {
            let id = win32::new_guid().map_err(|e| Error::Internal(format!("{what}: {e}")))?;
            let r = pin.create_gpt(id);
            self.inventory.invalidate();
            r?;
            table = pin.layout()?;
            identity::confirm_created(disk, id, &table.style, &what)?;
            if !content::has_table(&pin)? {
                return Err(Error::Internal(format!(
                    "{what}: IOCTL_DISK_CREATE_DISK answered success, but the disk's first \
                     sectors read back through the same handle hold no table"
                )));
            }
        }
        if step == PartitionStep::Initialize {
            return identity::confirm_written(&pin.identity, &pin.now()?, false, true, &what);
        }
        let id = identity::table_id(disk, &table.style, &what)?;
        let has_data = table.data_partitions().next().is_some();
        let r = if has_data {
            Ok(())
        } else {
            stor::create_partition(&self.wmi, disk, pin.identity.clone(), id)
        };
        // Do not wait for the volume's arrival notification.
        self.inventory.invalidate();
        r?;
        let table_now = pin.layout()?;
        let still = matches!(identity::table_id(disk, &table_now.style, &what), Ok(t) if t == id)
            && table_now.data_partitions().next().is_some();
        identity::confirm_written(&pin.identity, &pin.now()?, false, true, &what)?;
        if !still {
            return Err(Error::Internal(format!(
                "{what}: Windows answered success, but the disk held open since the check \
                 has no data partition (or another table) now"
            )));
        }
        Ok(())
    }
}

impl StorageBackend for WindowsStorage {
    fn disk_locations(&self) -> Result<BTreeMap<u32, DiskLocation>> {
        self.inventory_disk_locations()
    }

    fn disk_ids(&self) -> Result<BTreeMap<u32, DiskIds>> {
        self.inventory_disk_ids()
    }

    fn disk_by_page83(&self, page83: &str) -> Result<Option<u32>> {
        self.inventory_disk_by_page83(page83)
    }

    fn inventory_generation(&self) -> Result<Option<u64>> {
        self.generation()
    }

    fn disk_size(&self, disk: u32) -> Result<u64> {
        device_io("IOCTL_DISK_GET_DRIVE_GEOMETRY_EX")?;
        self.inventory.responsive(&disk, disk)?;
        disk::disk_size(disk)
    }

    fn disk_online(&self, disk: u32) -> Result<bool> {
        device_io("IOCTL_DISK_GET_DISK_ATTRIBUTES")?;
        self.inventory.responsive(&disk, disk)?;
        disk::disk_online(disk)
    }

    /// Offline: refused for the host's disks, and while any volume of the
    /// disk is mounted (inside the roots too), held open or not lockable
    /// (`storage::disk_use`; every volume of the host asked, as
    /// DisconnectTarget does, not the notification-fed inventory). The disk
    /// is held open from the check to the change, which goes through that
    /// handle (disk numbers are reused), and its volumes stay locked until
    /// the change returns.
    fn set_disk_online(&self, disk: u32, online: bool) -> Result<()> {
        let pin = disk::Pinned::open(disk, win32::GENERIC_READ | win32::GENERIC_WRITE)?;
        let mut claim = in_use::Claim::default();
        if !online {
            let what = format!("take disk {disk} offline");
            self.refuse_host_disk(disk, &what)?;
            let (uses, locked) = in_use::claim(&in_use::volumes_on(disk)?)?;
            disk_use::refuse(disk, &uses, &what)?;
            claim = locked;
            // The volumes were looked up by number: the held disk still has it.
            pin.still_the_same(&what)?;
        }
        let r = disk::set_disk_online(&pin, online);
        drop(claim);
        // Volumes come and go with the disk's state.
        self.inventory.invalidate();
        r
    }

    fn partition_disk(&self, disk: u32) -> Result<()> {
        self.partition(disk, PartitionStep::Both, "partition")
    }

    fn disk_layout(&self, disk: u32) -> Result<DiskLayout> {
        self.inventory.responsive(&disk, disk)?;
        drop(disk::open_disk(disk, 0)?);
        stor::disk_layout(&self.wmi, disk)
    }

    fn initialize_disk(&self, disk: u32) -> Result<()> {
        self.partition(disk, PartitionStep::Initialize, "initialize")
    }

    fn create_basic_partition(&self, disk: u32) -> Result<()> {
        self.partition(disk, PartitionStep::Partition, "create a partition on")
    }

    fn rescan(&self) -> Result<()> {
        let r = self.rescans.rescan(&self.wmi);
        self.inventory.invalidate();
        r
    }

    fn volumes_on_disk(&self, disk: u32, partition: Option<u32>) -> Result<Vec<VolumeId>> {
        self.inventory_volumes_on_disk(disk, partition)
    }

    fn volume_disk(&self, v: &VolumeId) -> Result<u32> {
        device_io("IOCTL_VOLUME_GET_VOLUME_DISK_EXTENTS")?;
        volume::volume_disk(v)
    }

    /// A filesystem Windows recognises, or (where it reports RAW or
    /// nothing) anything the volume's bytes are identified as.
    fn is_formatted(&self, v: &VolumeId) -> Result<bool> {
        if volume::is_formatted(v)? {
            return Ok(true);
        }
        content::volume_holds_anything(v)
    }

    /// Refused while the volume is reachable anywhere: mounted on a
    /// directory, or with a drive letter (then the host may be using it).
    fn format(&self, v: &VolumeId) -> Result<()> {
        if let Some(p) = mounts::access_paths(v)?.first() {
            return Err(Error::FailedPrecondition(format!(
                "volume {v} is mounted at {p:?}: unmount it (or remove the drive letter) before formatting"
            )));
        }
        rules::check_format(v, &content::scan_volume(v)?, self.overwrite)?;
        let r = stor::format(&self.wmi, v);
        self.inventory.invalidate();
        r
    }

    fn volume_stats(&self, v: &VolumeId) -> Result<VolumeStats> {
        match volume::volume_stats(v) {
            Ok(s) => Ok(s),
            // No filesystem Windows knows: say what the volume holds.
            Err(e) if matches!(volume::is_formatted(v), Ok(false)) => {
                let c = content::of_volume(v).map_err(|_| e)?;
                Err(Error::FailedPrecondition(format!(
                    "volume {v} {}; Windows recognises no filesystem on it",
                    rules::holds(&c.found)
                )))
            }
            Err(e) => Err(e),
        }
    }

    fn resize(&self, v: &VolumeId, target: ResizeTarget) -> Result<()> {
        let r = stor::resize(&self.wmi, v, target);
        self.inventory.invalidate();
        r
    }

    fn flush(&self, v: &VolumeId) -> Result<()> {
        volume::flush(v)
    }

    fn mount(&self, v: &VolumeId, fs: &Confined, target: &Located) -> Result<()> {
        let r = self.mounts.mount(v, fs, target);
        self.inventory.invalidate();
        r
    }

    fn unmount(&self, v: &VolumeId, fs: &Confined, target: &Located) -> Result<()> {
        let r = self.mounts.unmount(v, fs, target);
        self.inventory.invalidate();
        r
    }

    fn volume_at(&self, fs: &Confined, target: &Located) -> Result<super::At> {
        mounts::volume_at(fs, target)
    }

    fn closest_volume(&self, fs: &Confined, target: &Located) -> Result<VolumeId> {
        mounts::closest_volume(fs, target)
    }
}

#[cfg(test)]
mod tests;
