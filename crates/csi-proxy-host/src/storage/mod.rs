//! Disk and Volume storage: the one implementation of [`DiskApi`] and
//! [`VolumeApi`] that validates every argument, over an OS backend.
//!
//! [`Storage`] checks what a request carries before the backend sees it:
//! volume ids must be `\\?\Volume{GUID}\` ([`VolumeId`]), target paths are
//! checked by the [`PathPolicy`] and located below their root for the
//! confined filesystem ([`Confined`]; never an allowed root itself), sizes
//! must not be negative. Existence (an unknown disk number or volume)
//! is the backend's answer: [`Error::NotFound`]. Every call that changes
//! the host then runs as the one operation of its disk or volume
//! ([`ops`]): an identical call joins it, a different one is
//! [`Error::Aborted`].
//!
//! Backends implement [`StorageBackend`] over already-validated values:
//! `linux` (sysfs, block-device ioctls, our own GPT code, `mkfs`/`resize2fs`
//! with fixed argv), `windows` (IOCTLs and Win32 volume calls; WMI on one COM
//! worker thread where Windows has no other API) and [`fake::FakeStorage`]
//! (an in-memory model for tests of the layers above).

pub mod budget;
pub mod content;
pub mod disk_use;
pub mod fake;
pub mod identity;
pub mod inventory;
#[cfg(target_os = "linux")]
pub mod linux;
pub mod ops;
pub mod parse;
pub mod target;
#[cfg(windows)]
pub mod windows;

pub use parse::guid::VolumeId;
pub use target::{At, NotMounted};

use crate::compat;
use crate::confined::{Confined, Located};
use crate::disk::{self, DiskApi, DiskIds, DiskLocation};
use crate::path::PathPolicy;
use crate::volume::{self, VolumeApi};
use crate::{Error, Result};
use ops::{Operation, Operations, Target};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Growth smaller than this is skipped by ResizeVolume (as upstream does).
pub const MIN_RESIZE_GROWTH: u64 = 100 * 1024 * 1024;

/// Size and usage of a volume, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VolumeStats {
    pub total_bytes: u64,
    pub used_bytes: u64,
}

/// What ResizeVolume asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResizeTarget {
    /// The largest size the volume can have (request size 0).
    Maximum,
    /// This many bytes.
    Bytes(u64),
}

/// What a backend should do for a resize, given the volume's current and
/// maximum sizes: [`plan_resize`] decides the same way on every OS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResizePlan {
    /// Nothing to do (already that size, or growth under
    /// [`MIN_RESIZE_GROWTH`]).
    Skip,
    /// Grow to this many bytes.
    Grow(u64),
    /// Shrink to this many bytes.
    Shrink(u64),
}

/// The resize rule shared by every backend: `Maximum` means `max_bytes`; a
/// size above `max_bytes` is refused (FailedPrecondition); growth below
/// [`MIN_RESIZE_GROWTH`] is skipped.
pub fn plan_resize(current_bytes: u64, max_bytes: u64, target: ResizeTarget) -> Result<ResizePlan> {
    let want = match target {
        ResizeTarget::Maximum => max_bytes.max(current_bytes),
        ResizeTarget::Bytes(b) => b,
    };
    if want > max_bytes.max(current_bytes) {
        return Err(Error::FailedPrecondition(format!(
            "requested size {want} bytes exceeds the maximum size of the volume ({max_bytes} bytes)"
        )));
    }
    Ok(if want >= current_bytes {
        if want - current_bytes < MIN_RESIZE_GROWTH {
            ResizePlan::Skip
        } else {
            ResizePlan::Grow(want)
        }
    } else {
        ResizePlan::Shrink(want)
    })
}

/// What PartitionDisk's finer steps look at.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskLayout {
    /// The disk has a partition table (GPT or MBR).
    pub initialized: bool,
    /// It has a partition other than Microsoft reserved ones.
    pub has_data: bool,
}

/// What a partitioning call of a backend does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartitionStep {
    /// Give a raw disk an empty GPT (InitializeDisk).
    Initialize,
    /// Add a basic data partition to an initialised disk without data
    /// partitions (CreateBasicPartition).
    Partition,
    /// Both, as one operation (PartitionDisk).
    Both,
}

/// The refusal of CreateBasicPartition on a raw disk.
pub fn not_initialized(disk: u32) -> Error {
    Error::FailedPrecondition(format!(
        "disk {disk} has no partition table: initialize it (InitializeDisk) first"
    ))
}

/// Host storage operations on validated arguments. Disk numbers and volume
/// ids that do not exist are answered with [`Error::NotFound`].
pub trait StorageBackend: Send + Sync {
    /// Location of every disk that has one.
    fn disk_locations(&self) -> Result<BTreeMap<u32, DiskLocation>>;
    /// Page-0x83 id and serial number of every disk.
    fn disk_ids(&self) -> Result<BTreeMap<u32, DiskIds>>;
    /// The generation of the backend's inventory (see
    /// [`DiskApi::inventory_generation`]); `None`: no inventory.
    fn inventory_generation(&self) -> Result<Option<u64>> {
        Ok(None)
    }
    /// The number of the disk whose page-0x83 id is `page83`, if any.
    fn disk_by_page83(&self, page83: &str) -> Result<Option<u32>> {
        Ok(self
            .disk_ids()?
            .into_iter()
            .find(|(_, ids)| ids.page83 == page83)
            .map(|(n, _)| n))
    }
    /// Size of a disk in bytes.
    fn disk_size(&self, disk: u32) -> Result<u64>;
    /// Is the disk online?
    fn disk_online(&self, disk: u32) -> Result<bool>;
    /// Bring the disk online or take it offline (a no-op if it already is).
    fn set_disk_online(&self, disk: u32, online: bool) -> Result<()>;
    /// GPT-initialise a raw disk and create one basic data partition spanning
    /// it unless a data partition exists. Idempotent.
    fn partition_disk(&self, disk: u32) -> Result<()>;
    /// Whether the disk has a partition table and a data partition.
    fn disk_layout(&self, disk: u32) -> Result<DiskLayout>;
    /// Give a raw disk an empty GPT; an initialised disk is kept as it is.
    fn initialize_disk(&self, disk: u32) -> Result<()>;
    /// Create one basic data partition over the free space of an
    /// initialised disk unless it has a data partition (as the second half
    /// of [`StorageBackend::partition_disk`]); a raw disk is
    /// [`not_initialized`].
    fn create_basic_partition(&self, disk: u32) -> Result<()>;
    /// Refresh the host's view of disks (new disks, changed sizes).
    fn rescan(&self) -> Result<()>;

    /// The volumes of a disk; `partition` `None` means all partitions.
    fn volumes_on_disk(&self, disk: u32, partition: Option<u32>) -> Result<Vec<VolumeId>>;
    /// The disk that holds a volume.
    fn volume_disk(&self, volume: &VolumeId) -> Result<u32>;
    /// Does the volume carry a filesystem?
    fn is_formatted(&self, volume: &VolumeId) -> Result<bool>;
    /// Put a fresh filesystem on the volume (refused while it is mounted).
    fn format(&self, volume: &VolumeId) -> Result<()>;
    /// Total and used bytes of the volume's filesystem.
    fn volume_stats(&self, volume: &VolumeId) -> Result<VolumeStats>;
    /// Resize the partition and its filesystem (see [`plan_resize`]).
    fn resize(&self, volume: &VolumeId, target: ResizeTarget) -> Result<()>;
    /// Flush the volume's write cache to the device.
    fn flush(&self, volume: &VolumeId) -> Result<()>;
    /// Mount the volume at `target` (a directory inside the allowed roots;
    /// idempotent for the same volume).
    fn mount(&self, volume: &VolumeId, fs: &Confined, target: &Located) -> Result<()>;
    /// Flush, then remove the mount of `volume` at `target`.
    fn unmount(&self, volume: &VolumeId, fs: &Confined, target: &Located) -> Result<()>;
    /// The volume mounted at `target` (reached without following links),
    /// or the reason nothing is mounted there, proven by the backend
    /// ([`target`]: only such an answer carries the phrases drivers
    /// match). Anything it cannot prove is an error.
    fn volume_at(&self, fs: &Confined, target: &Located) -> Result<At>;
    /// The volume whose filesystem holds `target`.
    fn closest_volume(&self, fs: &Confined, target: &Located) -> Result<VolumeId>;
}

/// The Disk and Volume APIs over a backend, with every argument validated.
pub struct Storage<B> {
    fs: Arc<Confined>,
    backend: B,
    ops: Operations,
    budget: budget::DiskBudget,
}

impl<B: StorageBackend> Storage<B> {
    /// Storage over `backend`, with target paths confined to `policy`'s
    /// roots.
    pub fn new(policy: PathPolicy, backend: B) -> Self {
        Self::with_confined(Arc::new(Confined::new(policy)), backend)
    }

    /// Storage sharing a confined filesystem (and its root handles) with
    /// the other groups.
    pub fn with_confined(fs: Arc<Confined>, backend: B) -> Self {
        Storage {
            fs,
            backend,
            ops: Operations::new(),
            budget: budget::DiskBudget::default(),
        }
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The operations running on disks and volumes.
    pub fn operations(&self) -> &Operations {
        &self.ops
    }

    /// Runs `f` as the one operation `op` of disk `n`.
    fn on_disk(&self, n: u32, op: Operation, f: impl FnOnce() -> Result<()>) -> Result<()> {
        let _permit = self.budget.enter(n, &op.to_string())?;
        self.ops.run(Target::Disk(n), op, f)
    }

    /// Runs `f` as the one operation `op` of volume `v`.
    fn on_volume(&self, v: &VolumeId, op: Operation, f: impl FnOnce() -> Result<()>) -> Result<()> {
        let _permit = self
            .budget
            .enter(self.backend.volume_disk(v)?, &op.to_string())?;
        self.ops.run(Target::Volume(v.clone()), op, f)
    }

    /// Runs `f`, a call that does I/O on disk `n`, within the disk's
    /// budget of calls in flight ([`budget`]).
    fn reading_disk<T>(&self, n: u32, what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let _permit = self.budget.enter(n, what)?;
        f()
    }

    /// [`Storage::reading_disk`] for the disk of volume `v`.
    fn reading_volume<T>(
        &self,
        v: &VolumeId,
        what: &str,
        f: impl FnOnce() -> Result<T>,
    ) -> Result<T> {
        let _permit = self.budget.enter(self.backend.volume_disk(v)?, what)?;
        f()
    }

    /// Calls in flight on disk `n` (tests).
    pub fn calls_in_flight(&self, n: u32) -> usize {
        self.budget.in_flight(n)
    }

    /// A target path for a mount or unmount: inside the roots, never a root
    /// itself; the backend opens it beneath its root (a link anywhere in it
    /// is refused there).
    fn mount_target(&self, path: &str) -> Result<Located> {
        let p = self.fs.locate(path)?;
        if p.is_root() {
            return Err(Error::PermissionDenied(format!(
                "target path {} is an allowed root itself; mount below it",
                p.shown()
            )));
        }
        Ok(p)
    }

    /// A path to look up: inside the roots; a final link (a published
    /// target linked to its staging directory) is followed, hop by hop,
    /// to destinations inside the roots only ([`target::follow`]).
    fn lookup_target(&self, path: &str) -> Result<target::Followed> {
        target::follow(&self.fs, path)
    }
}

/// A client-supplied volume id, validated: exactly `\\?\Volume{GUID}` with
/// or without the trailing `\` (GUID hex in any case); anything else is
/// [`Error::InvalidArgument`].
pub fn volume_id(s: &str) -> Result<VolumeId> {
    VolumeId::parse(s).map_err(|e| {
        let shown: String = s.chars().take(80).collect();
        Error::InvalidArgument(format!(
            "volume id {shown:?}: {e}; expected \\\\?\\Volume{{xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx}}\\"
        ))
    })
}

fn size_i64(bytes: u64) -> i64 {
    i64::try_from(bytes).unwrap_or(i64::MAX)
}

impl<B: StorageBackend> DiskApi for Storage<B> {
    fn list_disk_locations(
        &self,
        _: disk::ListDiskLocationsRequest,
    ) -> Result<disk::ListDiskLocationsResponse> {
        Ok(disk::ListDiskLocationsResponse {
            disk_locations: self.backend.disk_locations()?.into_iter().collect(),
        })
    }
    fn partition_disk(
        &self,
        req: disk::PartitionDiskRequest,
    ) -> Result<disk::PartitionDiskResponse> {
        let n = req.disk_number;
        self.on_disk(n, Operation::new("PartitionDisk"), || {
            self.backend.partition_disk(n)
        })?;
        Ok(disk::PartitionDiskResponse {})
    }
    fn is_disk_initialized(
        &self,
        req: disk::IsDiskInitializedRequest,
    ) -> Result<disk::IsDiskInitializedResponse> {
        Ok(disk::IsDiskInitializedResponse {
            initialized: self
                .reading_disk(req.disk_number, "IsDiskInitialized", || {
                    self.backend.disk_layout(req.disk_number)
                })?
                .initialized,
        })
    }
    fn initialize_disk(
        &self,
        req: disk::InitializeDiskRequest,
    ) -> Result<disk::InitializeDiskResponse> {
        let n = req.disk_number;
        self.on_disk(n, Operation::new("InitializeDisk"), || {
            self.backend.initialize_disk(n)
        })?;
        Ok(disk::InitializeDiskResponse {})
    }
    fn basic_partitions_exist(
        &self,
        req: disk::BasicPartitionsExistRequest,
    ) -> Result<disk::BasicPartitionsExistResponse> {
        Ok(disk::BasicPartitionsExistResponse {
            exist: self
                .reading_disk(req.disk_number, "BasicPartitionsExist", || {
                    self.backend.disk_layout(req.disk_number)
                })?
                .has_data,
        })
    }
    fn create_basic_partition(
        &self,
        req: disk::CreateBasicPartitionRequest,
    ) -> Result<disk::CreateBasicPartitionResponse> {
        let n = req.disk_number;
        self.on_disk(n, Operation::new("CreateBasicPartition"), || {
            self.backend.create_basic_partition(n)
        })?;
        Ok(disk::CreateBasicPartitionResponse {})
    }
    fn rescan(&self, _: disk::RescanRequest) -> Result<disk::RescanResponse> {
        self.ops.run(Target::Host, Operation::new("Rescan"), || {
            self.backend.rescan()
        })?;
        Ok(disk::RescanResponse {})
    }
    fn list_disk_ids(&self, _: disk::ListDiskIdsRequest) -> Result<disk::ListDiskIdsResponse> {
        Ok(disk::ListDiskIdsResponse {
            disk_ids: self.backend.disk_ids()?.into_iter().collect(),
        })
    }
    fn get_disk_stats(&self, req: disk::GetDiskStatsRequest) -> Result<disk::GetDiskStatsResponse> {
        Ok(disk::GetDiskStatsResponse {
            total_bytes: size_i64(self.backend.disk_size(req.disk_number)?),
        })
    }
    fn set_disk_state(&self, req: disk::SetDiskStateRequest) -> Result<disk::SetDiskStateResponse> {
        let (n, online) = (req.disk_number, req.is_online);
        let op = Operation::with_args("SetDiskState", format!("online {online}"));
        self.on_disk(n, op, || self.backend.set_disk_online(n, online))?;
        Ok(disk::SetDiskStateResponse {})
    }
    fn get_disk_state(&self, req: disk::GetDiskStateRequest) -> Result<disk::GetDiskStateResponse> {
        Ok(disk::GetDiskStateResponse {
            is_online: self.backend.disk_online(req.disk_number)?,
        })
    }
    fn get_disk_number_by_name(
        &self,
        req: disk::GetDiskNumberByNameRequest,
    ) -> Result<disk::GetDiskNumberByNameResponse> {
        let name = req.disk_name.as_str();
        if name.is_empty() || name.len() > 1024 || name.chars().any(char::is_control) {
            return Err(Error::InvalidArgument(format!(
                "disk name {:?} must be a non-empty page-0x83 id of at most 1024 bytes without control characters",
                name.chars().take(80).collect::<String>()
            )));
        }
        self.backend
            .disk_by_page83(name)?
            .map(|disk_number| disk::GetDiskNumberByNameResponse { disk_number })
            .ok_or_else(|| Error::NotFound(format!("no disk has the page-0x83 id {name:?}")))
    }
    fn inventory_generation(&self) -> Result<Option<u64>> {
        self.backend.inventory_generation()
    }
}

impl<B: StorageBackend> VolumeApi for Storage<B> {
    fn list_volumes_on_disk(
        &self,
        req: volume::ListVolumesOnDiskRequest,
    ) -> Result<volume::ListVolumesOnDiskResponse> {
        let partition = (req.partition_number != 0).then_some(req.partition_number);
        let ids = self.backend.volumes_on_disk(req.disk_number, partition)?;
        Ok(volume::ListVolumesOnDiskResponse {
            volume_ids: ids.into_iter().map(|v| v.as_str().to_string()).collect(),
        })
    }
    fn mount_volume(&self, req: volume::MountVolumeRequest) -> Result<volume::MountVolumeResponse> {
        let v = volume_id(&req.volume_id)?;
        let target = self.mount_target(&req.target_path)?;
        let op = Operation::with_args("MountVolume", format!("target {}", target.shown()));
        self.on_volume(&v, op, || self.backend.mount(&v, &self.fs, &target))?;
        Ok(volume::MountVolumeResponse {})
    }
    fn unmount_volume(
        &self,
        req: volume::UnmountVolumeRequest,
    ) -> Result<volume::UnmountVolumeResponse> {
        let v = volume_id(&req.volume_id)?;
        let target = self.mount_target(&req.target_path)?;
        let op = Operation::with_args("UnmountVolume", format!("target {}", target.shown()));
        self.on_volume(&v, op, || self.backend.unmount(&v, &self.fs, &target))?;
        Ok(volume::UnmountVolumeResponse {})
    }
    fn is_volume_formatted(
        &self,
        req: volume::IsVolumeFormattedRequest,
    ) -> Result<volume::IsVolumeFormattedResponse> {
        let v = volume_id(&req.volume_id)?;
        Ok(volume::IsVolumeFormattedResponse {
            formatted: self
                .reading_volume(&v, "IsVolumeFormatted", || self.backend.is_formatted(&v))?,
        })
    }
    fn format_volume(
        &self,
        req: volume::FormatVolumeRequest,
    ) -> Result<volume::FormatVolumeResponse> {
        let v = volume_id(&req.volume_id)?;
        self.on_volume(&v, Operation::new("FormatVolume"), || {
            self.backend.format(&v)
        })?;
        Ok(volume::FormatVolumeResponse {})
    }
    fn resize_volume(
        &self,
        req: volume::ResizeVolumeRequest,
    ) -> Result<volume::ResizeVolumeResponse> {
        let v = volume_id(&req.volume_id)?;
        let target = match req.size_bytes {
            0 => ResizeTarget::Maximum,
            n if n < 0 => {
                return Err(Error::InvalidArgument(format!(
                    "size_bytes {n} is negative: give a size in bytes, or 0 for the maximum"
                )))
            }
            n => ResizeTarget::Bytes(n as u64),
        };
        let op = Operation::with_args(
            "ResizeVolume",
            match target {
                ResizeTarget::Maximum => "size maximum".to_string(),
                ResizeTarget::Bytes(n) => format!("size {n}"),
            },
        );
        self.on_volume(&v, op, || self.backend.resize(&v, target))?;
        Ok(volume::ResizeVolumeResponse {})
    }
    fn get_volume_stats(
        &self,
        req: volume::GetVolumeStatsRequest,
    ) -> Result<volume::GetVolumeStatsResponse> {
        let v = volume_id(&req.volume_id)?;
        let s = self.reading_volume(&v, "GetVolumeStats", || self.backend.volume_stats(&v))?;
        Ok(volume::GetVolumeStatsResponse {
            total_bytes: size_i64(s.total_bytes),
            used_bytes: size_i64(s.used_bytes),
        })
    }
    fn get_disk_number_from_volume_id(
        &self,
        req: volume::GetDiskNumberFromVolumeIdRequest,
    ) -> Result<volume::GetDiskNumberFromVolumeIdResponse> {
        // aws-ebs runs its "not mounted" expression on this call's errors
        // too: none of them may match it.
        let v = volume_id(&req.volume_id).map_err(compat::neutralise)?;
        Ok(volume::GetDiskNumberFromVolumeIdResponse {
            disk_number: self.backend.volume_disk(&v).map_err(compat::neutralise)?,
        })
    }
    fn get_volume_id_from_target_path(
        &self,
        req: volume::GetVolumeIdFromTargetPathRequest,
    ) -> Result<volume::GetVolumeIdFromTargetPathResponse> {
        // One function for every version and the library: the phrases
        // drivers match only for a proven reason, every other error
        // neutralised (no catalog expression matches it).
        let followed = self
            .lookup_target(&req.target_path)
            .map_err(compat::neutralise)?;
        match self.backend.volume_at(&self.fs, &followed.to) {
            Ok(At::Volume(v)) => Ok(volume::GetVolumeIdFromTargetPathResponse {
                volume_id: v.as_str().to_string(),
            }),
            Ok(At::NotMounted(reason)) => Err(target::not_mounted(reason, &followed)),
            Err(e) => Err(compat::neutralise(e)),
        }
    }
    fn get_closest_volume_id_from_target_path(
        &self,
        req: volume::GetClosestVolumeIdFromTargetPathRequest,
    ) -> Result<volume::GetClosestVolumeIdFromTargetPathResponse> {
        let target = self.lookup_target(&req.target_path)?.to;
        Ok(volume::GetClosestVolumeIdFromTargetPathResponse {
            volume_id: self
                .backend
                .closest_volume(&self.fs, &target)?
                .as_str()
                .to_string(),
        })
    }
    fn write_volume_cache(
        &self,
        req: volume::WriteVolumeCacheRequest,
    ) -> Result<volume::WriteVolumeCacheResponse> {
        let v = volume_id(&req.volume_id)?;
        self.reading_volume(&v, "WriteVolumeCache", || self.backend.flush(&v))?;
        Ok(volume::WriteVolumeCacheResponse {})
    }
}

#[cfg(all(test, unix))]
mod tests;
