//! The Linux storage backend: real block devices.
//!
//! The mapping of the Windows model onto Linux is documented in
//! `docs/linux-storage.md`. In short: a disk number is the kernel's
//! `diskseq`; a volume is a partition, named `\\?\Volume{GUID}\` after its
//! GPT unique partition GUID; "offline" is the block layer's read-only flag;
//! a volume mount point is a mount of the partition's filesystem on a
//! directory. Reads come from sysfs, `/proc/self/mountinfo`, the partition
//! table and superblocks (parsed by our own code in `storage::parse`);
//! only format and resize run tools (`mkfs.*`, `resize2fs`, ...), with fixed
//! argv. Device nodes missing from `/dev` (no udev) are created from sysfs.

mod devices;
mod format_record;
mod grow;
pub mod in_use;
#[cfg(test)]
mod in_use_tests;
mod intents;
mod layout;
mod locks;
mod lookup;
pub mod mountinfo;
mod mounts;
mod partitions;
mod reads;
mod rescan;
mod scan;
mod sys;
mod sysfs;
#[cfg(test)]
mod tests_hung_ids;
pub mod tools;
mod usage;

use super::content::{self, Overwrite};
use super::inventory::netlink;
use super::parse::content::Regions;
use super::parse::{ext, gpt};
use super::{At, ResizeTarget, StorageBackend, VolumeId, VolumeStats};
use crate::confined::{Confined, Located};
use crate::disk::{DiskIds, DiskLocation};
use crate::{Error, Result};
use devices::DiskTable;
use lookup::{inventory, Events, LinuxInventory};
use mountinfo::Mount;
use std::collections::BTreeMap;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use sys::Access;
use sysfs::{BlockDisk, BlockPartition, Sysfs};

pub use devices::opens as device_opens;
pub use grow::can_grow_mounted_ext;
use grow::filesystem_lags;
use partitions::sync_partitions;
use reads::{quick_found, read_content, read_scanned};
pub use sysfs::reads as sysfs_reads;
pub use tools::spawned as spawned_processes;

/// Filesystems FormatVolume can create.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsType {
    Ext2,
    Ext3,
    Ext4,
    Xfs,
}

impl FsType {
    /// Every supported type, by name.
    pub const ALL: [FsType; 4] = [FsType::Ext2, FsType::Ext3, FsType::Ext4, FsType::Xfs];

    /// `ext4`, `xfs`, ...
    pub fn name(self) -> &'static str {
        match self {
            FsType::Ext2 => "ext2",
            FsType::Ext3 => "ext3",
            FsType::Ext4 => "ext4",
            FsType::Xfs => "xfs",
        }
    }

    /// Parses a name given on the command line.
    pub fn parse(s: &str) -> Option<FsType> {
        Self::ALL.into_iter().find(|t| t.name() == s)
    }
}

/// The Linux backend.
pub struct LinuxStorage {
    sysfs: Sysfs,
    dev_dir: PathBuf,
    fs_type: FsType,
    /// What PartitionDisk and FormatVolume may write over.
    overwrite: Overwrite,
    /// Formats started and not seen to finish (see [`intents`]).
    intents: intents::FormatIntents,
    /// One lock per disk, held by whatever changes it or its volumes.
    locks: locks::DiskLocks,
    /// The disks and volumes, kept current by the kernel's uevents.
    inventory: LinuxInventory,
    /// Disk identifiers read so far (see [`LinuxStorage::known_ids`]).
    ids: KnownIds,
}

impl Default for LinuxStorage {
    fn default() -> Self {
        Self::new(FsType::Ext4)
    }
}

/// A volume found on the host.
#[derive(Clone, Debug)]
struct Found {
    disk: BlockDisk,
    part: BlockPartition,
}

fn from_io(op: &'static str, subject: &str, e: io::Error) -> Error {
    match e.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::ENXIO) | Some(libc::ENODEV) => {
            Error::NotFound(format!("{op} {subject}: the device is gone ({e})"))
        }
        Some(libc::EBUSY) => Error::FailedPrecondition(format!(
            "{op} {subject}: the device is in use (mounted, or held by another program): {e}"
        )),
        Some(libc::EROFS) | Some(libc::EACCES) => Error::FailedPrecondition(format!(
            "{op} {subject}: the device is read-only (offline): {e}"
        )),
        Some(libc::EPERM) => Error::PermissionDenied(format!(
            "{op} {subject}: not permitted (csi-proxy needs root / CAP_SYS_ADMIN): {e}"
        )),
        _ => Error::io(op, subject, e),
    }
}

fn no_disk(disk: u32) -> Error {
    Error::NotFound(format!("disk {disk} does not exist"))
}

fn random_guid() -> Result<gpt::Guid> {
    let mut b = [0u8; 16];
    sys::random_bytes(&mut b).map_err(|e| Error::io("getrandom", "", e))?;
    Ok(gpt::Guid::from_random_bytes(b))
}

impl LinuxStorage {
    /// The backend; FormatVolume creates `fs_type`.
    pub fn new(fs_type: FsType) -> Self {
        let sysfs = Sysfs::default();
        let dev_dir = PathBuf::from("/dev");
        LinuxStorage {
            inventory: inventory(&sysfs, &dev_dir, Events::Kernel(netlink::DEFAULT_BUFFER)),
            sysfs,
            dev_dir,
            fs_type,
            overwrite: Overwrite::default(),
            intents: intents::FormatIntents::default(),
            locks: locks::DiskLocks::default(),
            ids: KnownIds::default(),
        }
    }

    /// Lets PartitionDisk and FormatVolume write over what `overwrite`
    /// allows (by default nothing but zeros and, for FormatVolume, a
    /// filesystem).
    pub fn with_overwrite(mut self, overwrite: Overwrite) -> Self {
        self.overwrite = overwrite;
        self
    }

    /// Keeps records of formats in progress under `state_dir`, so that the
    /// retry of a format cut short may format over its remains; beneath
    /// `handle` (the state dir as opened at start-up) when given.
    pub fn with_state_dir(
        mut self,
        state_dir: Option<&Path>,
        handle: Option<std::sync::Arc<std::fs::File>>,
    ) -> Self {
        self.intents = intents::FormatIntents::new(state_dir).with_handle(handle);
        self
    }

    /// The device node of `name`, created from sysfs if missing.
    fn node(&self, name: &str, major: u32, minor: u32) -> Result<PathBuf> {
        devices::node(&self.dev_dir, name, major, minor)
    }

    /// Opens disk `d`, checking through the fd that it is that disk (see
    /// [`devices::open`]).
    fn open_disk(&self, d: &BlockDisk, access: Access) -> Result<(PathBuf, OwnedFd)> {
        devices::open(&self.dev_dir, &d.name, d.major, d.minor, d.number, access)
    }

    /// Opens partition `p` of disk `d`, checking through the fd that it is
    /// a partition of that disk.
    fn open_part(
        &self,
        d: &BlockDisk,
        p: &BlockPartition,
        access: Access,
    ) -> Result<(PathBuf, OwnedFd)> {
        devices::open(&self.dev_dir, &p.name, p.major, p.minor, d.number, access)
    }

    /// The partition table of a disk, with its geometry and the bytes it
    /// was parsed from.
    fn table(&self, d: &BlockDisk, fd: &OwnedFd) -> Result<DiskTable> {
        devices::table(d, fd)
    }

    /// Makes the kernel's partitions of `d` match its partition table:
    /// first `BLKRRPART` (kernels with a parser for the table), then every
    /// partition still missing is added with `BLKPG` (kernels built without
    /// partition-table parsers, as some VM kernels are). Partitions the
    /// kernel has but the table lacks are left alone.
    fn sync_partitions(&self, d: &BlockDisk, fd: &OwnedFd) -> Result<BlockDisk> {
        sync_partitions(&self.sysfs, &self.dev_dir, d, fd)
    }
}

impl LinuxStorage {
    /// Can the device be claimed exclusively right now? `false` means the
    /// kernel says it is in use somewhere: mounted in any mount namespace,
    /// held by device-mapper/md, used as swap, or opened exclusively.
    fn claimable(&self, name: &str, major: u32, minor: u32) -> Result<bool> {
        let path = self.node(name, major, minor)?;
        match sys::open_block(&path, Access::Exclusive) {
            Ok(_) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => Ok(false),
            Err(e) => Err(from_io("open", &path.display().to_string(), e)),
        }
    }

    /// Refuses to change a device (`what`, e.g. "format volume X") while
    /// anything uses it, saying what does.
    fn refuse_if_in_use(&self, name: &str, major: u32, minor: u32, what: &str) -> Result<()> {
        if self.claimable(name, major, minor)? {
            return Ok(());
        }
        let u = usage::of(name, major, minor, &[]);
        Err(Error::FailedPrecondition(format!(
            "cannot {what}: {name} is {}",
            u.describe()
        )))
    }

    fn mounts() -> Result<Vec<Mount>> {
        mountinfo::read().map_err(|e| Error::io("read", "/proc/self/mountinfo", e))
    }

    /// Runs `read`, reads of disk `disk` (its kernel name) that may hang,
    /// on the inventory's bounded readers: the disk's own budget of
    /// threads, waited for at most the read timeout. A read that does not
    /// return in time marks the disk unresponsive: this call and every
    /// later one on the disk answer `Unavailable` naming it (the later
    /// ones at once), until the read left behind returns. `read` gets the
    /// device directory.
    fn read_bounded<T: Send + 'static>(
        &self,
        disk: &str,
        read: impl FnOnce(&Path) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let dev_dir = self.dev_dir.clone();
        self.inventory
            .read_disk(&disk.to_string(), move || read(&dev_dir))
    }

    /// What partition `p` of disk `disk` holds, read on a bounded reader
    /// ([`LinuxStorage::read_bounded`]).
    fn content_bounded(&self, d: &BlockDisk, p: &BlockPartition) -> Result<Regions> {
        let (p, seq) = (p.clone(), d.number);
        self.read_bounded(&d.name, move |dev| {
            let (_, fd) = devices::open(dev, &p.name, p.major, p.minor, seq, Access::Read)?;
            read_content(&fd, &p.name)
        })
    }
}

/// Refuses to change a volume whose disk is offline (read-only).
fn ensure_online(f: &Found, volume: &VolumeId) -> Result<()> {
    if f.disk.read_only {
        return Err(Error::FailedPrecondition(format!(
            "volume {volume} is on disk {}, which is offline",
            f.disk.number
        )));
    }
    Ok(())
}

/// Which disk identifiers were read for: its kernel name, number (its
/// `diskseq`, new at every attach or media change) and `major:minor`.
type IdsKey = (String, u32, u32, u32);

/// The identifiers read so far, per disk instance.
#[derive(Default)]
struct KnownIds(std::sync::Mutex<BTreeMap<IdsKey, DiskIds>>);

impl KnownIds {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<IdsKey, DiskIds>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn ids_key(number: u32, d: &scan::LinuxDisk) -> IdsKey {
    (d.disk.name.clone(), number, d.disk.major, d.disk.minor)
}

impl LinuxStorage {
    /// The identifiers of every disk that answers (a disk that does not
    /// answer is listed only if they were read before). They are read
    /// outside the inventory lock (reading them may ask the device:
    /// virtio-blk's `serial` does), every missing disk at once on the
    /// inventory's bounded readers, once per disk instance ([`IdsKey`]);
    /// a disk that does not answer in time is marked unresponsive. Only
    /// the copy of the list is made under the lock. In an inline attempt,
    /// "would block" while identifiers are missing.
    fn known_ids(&self) -> Result<BTreeMap<u32, DiskIds>> {
        let (present, missing) = {
            let view = self.view()?;
            let known = self.ids.lock();
            let mut present = Vec::new();
            let mut missing = Vec::new();
            for (n, d) in view.disks() {
                let k = ids_key(n, d);
                if !known.contains_key(&k) && !view.is_unresponsive(n) {
                    missing.push(k.clone());
                }
                present.push(k);
            }
            (present, missing)
        };
        if !missing.is_empty() {
            if crate::inline::active() {
                return Err(crate::inline::would_block("reading disk identifiers"));
            }
            let sysfs = self.sysfs.clone();
            let names = missing.iter().map(|k| k.0.clone()).collect();
            let read = self
                .inventory
                .read_disks(names, move |name| Ok(scan::ids(&sysfs, name)));
            let mut known = self.ids.lock();
            for (k, (_, r)) in missing.into_iter().zip(read) {
                if let Ok(ids) = r {
                    known.insert(k, ids);
                }
            }
        }
        let mut known = self.ids.lock();
        // Disks gone (or re-attached) since: forgotten.
        let now: std::collections::BTreeSet<&IdsKey> = present.iter().collect();
        known.retain(|k, _| now.contains(k));
        Ok(present
            .iter()
            .filter_map(|k| known.get(k).map(|i| (k.1, i.clone())))
            .collect())
    }
}

impl StorageBackend for LinuxStorage {
    fn disk_locations(&self) -> Result<BTreeMap<u32, DiskLocation>> {
        Ok(self
            .view()?
            .disks()
            .filter_map(|(n, d)| d.location.clone().map(|l| (n, l)))
            .collect())
    }

    fn disk_ids(&self) -> Result<BTreeMap<u32, DiskIds>> {
        self.known_ids()
    }

    fn inventory_generation(&self) -> Result<Option<u64>> {
        // Without events every call scans: nothing stays the same.
        if !self.follows_events() {
            return Ok(None);
        }
        Ok(Some(self.view()?.generation()))
    }

    fn disk_by_page83(&self, page83: &str) -> Result<Option<u32>> {
        Ok(self
            .known_ids()?
            .into_iter()
            .find(|(_, i)| i.page83 == page83)
            .map(|(n, _)| n))
    }

    fn disk_size(&self, disk: u32) -> Result<u64> {
        let mut v = self.view()?;
        v.disk(disk)?
            .map(|d| d.disk.size)
            .ok_or_else(|| no_disk(disk))
    }

    /// The read-only flag is read now: `BLKROSET` announces nothing.
    fn disk_online(&self, disk: u32) -> Result<bool> {
        let name = self.disk_name(disk)?;
        match self.sysfs.read_only(&name) {
            Ok(ro) => Ok(!ro),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(no_disk(disk)),
            Err(e) => Err(from_io("read", &name, e)),
        }
    }

    fn set_disk_online(&self, disk: u32, online: bool) -> Result<()> {
        let _g = self.lock_disk(disk)?;
        let d = self.disk(disk)?;
        if d.read_only != online {
            return Ok(());
        }
        // Offline: the disk claimed exclusively, and the flag set through
        // that fd while the claim still holds (nothing can be mounted or
        // claimed in between); the same question as DisconnectTarget's
        // (`in_use`).
        let (opened, claim);
        let fd = if online {
            opened = self.open_disk(&d, Access::Read)?.1;
            &opened
        } else {
            claim = match in_use::claim(&self.dev_dir, &d)? {
                Ok(c) => c,
                Err(uses) => {
                    return Err(Error::FailedPrecondition(format!(
                        "disk {disk} is in use ({uses}); release it before taking the disk offline"
                    )))
                }
            };
            #[cfg(test)]
            in_use::hooks::claimed(&d.name);
            claim.fd()
        };
        self.inventory.touch(d.name.clone());
        sys::set_read_only(fd, !online).map_err(|e| from_io("BLKROSET", &d.name, e))
    }

    fn partition_disk(&self, disk: u32) -> Result<()> {
        self.partition(disk, crate::storage::PartitionStep::Both)
    }

    fn disk_layout(&self, disk: u32) -> Result<crate::storage::DiskLayout> {
        self.layout(disk)
    }

    fn initialize_disk(&self, disk: u32) -> Result<()> {
        self.partition(disk, crate::storage::PartitionStep::Initialize)
    }

    fn create_basic_partition(&self, disk: u32) -> Result<()> {
        self.partition(disk, crate::storage::PartitionStep::Partition)
    }

    fn rescan(&self) -> Result<()> {
        self.rescan_all()
    }

    fn volumes_on_disk(&self, disk: u32, partition: Option<u32>) -> Result<Vec<VolumeId>> {
        let mut view = self.view()?;
        let vols = view.volumes_on(disk)?.ok_or_else(|| no_disk(disk))?;
        let out: Vec<VolumeId> = vols
            .iter()
            .filter(|v| partition.is_none_or(|n| v.partition == Some(n)))
            .map(|v| v.id.clone())
            .collect();
        if let (Some(n), true) = (partition, out.is_empty()) {
            return Err(Error::NotFound(format!("disk {disk} has no partition {n}")));
        }
        Ok(out)
    }

    fn volume_disk(&self, volume: &VolumeId) -> Result<u32> {
        Ok(self.locate(volume)?.disk.number)
    }

    fn is_formatted(&self, volume: &VolumeId) -> Result<bool> {
        let f = self.locate(volume)?;
        let (p, seq) = (f.part, f.disk.number);
        self.read_bounded(&f.disk.name, move |dev| {
            let (_, fd) = devices::open(dev, &p.name, p.major, p.minor, seq, Access::Read)?;
            if quick_found(&fd, &p.name)? {
                return Ok(true);
            }
            // Anything identified counts: drivers format what is reported
            // unformatted.
            Ok(!read_content(&fd, &p.name)?.found.is_empty())
        })
    }

    fn format(&self, volume: &VolumeId) -> Result<()> {
        self.format_volume(volume)
    }

    fn volume_stats(&self, volume: &VolumeId) -> Result<VolumeStats> {
        let f = self.locate(volume)?;
        let mounts = Self::mounts()?;
        if let Some(m) = mountinfo::of_device(&mounts, f.part.major, f.part.minor).next() {
            let (total, free) = sys::fs_bytes(m.path())
                .map_err(|e| from_io("statvfs", &m.path().to_string_lossy(), e))?;
            return Ok(VolumeStats {
                total_bytes: total,
                used_bytes: total.saturating_sub(free),
            });
        }
        let c = self.content_bounded(&f.disk, &f.part)?;
        match ext::ext_usage(&c.head) {
            Some(u) => {
                let bs = u64::from(u.block_size);
                let total = u.blocks_total.saturating_mul(bs);
                Ok(VolumeStats {
                    total_bytes: total,
                    used_bytes: total.saturating_sub(u.blocks_free.saturating_mul(bs)),
                })
            }
            None => Err(Error::FailedPrecondition(format!(
                "volume {volume} {} and is not mounted; stats of unmounted volumes are read only from ext filesystems",
                content::holds(&c.found)
            ))),
        }
    }

    fn resize(&self, volume: &VolumeId, target: ResizeTarget) -> Result<()> {
        self.resize_volume(volume, target)
    }

    fn flush(&self, volume: &VolumeId) -> Result<()> {
        let f = self.locate(volume)?;
        for m in mountinfo::of_device(&Self::mounts()?, f.part.major, f.part.minor).take(1) {
            let shown = m.path().to_string_lossy();
            let dir = std::fs::File::open(m.path()).map_err(|e| from_io("open", &shown, e))?;
            sys::syncfs(&OwnedFd::from(dir)).map_err(|e| from_io("syncfs", &shown, e))?;
        }
        let (node, fd) = self.open_part(&f.disk, &f.part, Access::Read)?;
        sys::fsync(&fd).map_err(|e| from_io("fsync", &node.display().to_string(), e))
    }

    fn mount(&self, volume: &VolumeId, fs: &Confined, target: &Located) -> Result<()> {
        self.mount_on(volume, fs, target)
    }

    fn unmount(&self, volume: &VolumeId, fs: &Confined, target: &Located) -> Result<()> {
        self.unmount_from(volume, fs, target)
    }

    fn volume_at(&self, fs: &Confined, target: &Located) -> Result<At> {
        self.volume_mounted_at(fs, target)
    }

    fn closest_volume(&self, fs: &Confined, target: &Located) -> Result<VolumeId> {
        self.volume_holding(fs, target)
    }
}
