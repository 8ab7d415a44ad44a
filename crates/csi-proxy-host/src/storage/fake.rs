//! An in-memory storage host that records every backend call: for unit tests
//! of the validation layer and of the gRPC layer above it. Never the only
//! test of a real backend.

use super::parse::nvme::{NamespaceIds, ScsiAddress};
use super::{
    plan_resize, At, DiskLayout, NotMounted, ResizePlan, ResizeTarget, StorageBackend, VolumeId,
    VolumeStats,
};
use crate::confined::{Confined, Kind, Located};
use crate::disk::{DiskIds, DiskLocation};
use crate::{Error, Result};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// One fake disk.
#[derive(Clone, Debug, Default)]
pub struct FakeDisk {
    pub size: u64,
    pub online: bool,
    pub location: Option<DiskLocation>,
    pub ids: DiskIds,
    /// It has a partition table (set by the first partitioning step).
    pub initialized: bool,
    pub partitions: Vec<FakePartition>,
}

/// One partition (= volume) of a fake disk.
#[derive(Clone, Debug)]
pub struct FakePartition {
    pub number: u32,
    pub volume: VolumeId,
    pub size: u64,
    pub formatted: bool,
    pub used: u64,
}

#[derive(Default)]
struct State {
    disks: BTreeMap<u32, FakeDisk>,
    mounts: BTreeMap<String, VolumeId>,
    calls: Vec<String>,
    next_guid: u64,
    /// What `inventory_generation` answers: `Err` fails it (internal).
    generation: Option<u64>,
    generation_error: Option<String>,
    /// Every call made in an inline attempt answers "would block".
    block_inline: bool,
    /// Calls made in an inline attempt ([`crate::inline::active`]).
    inline_calls: usize,
}

/// The fake storage host.
#[derive(Default)]
pub struct FakeStorage {
    state: Mutex<State>,
}

impl FakeStorage {
    /// An empty host.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a raw, online disk of `size` bytes.
    pub fn add_disk(&self, number: u32, size: u64, page83: &str) {
        let location = DiskLocation {
            adapter: "0".into(),
            bus: "0".into(),
            target: number.to_string(),
            lun_id: "0".into(),
        };
        let ids = DiskIds {
            page83: page83.into(),
            serial_number: format!("serial-{number}"),
        };
        self.insert_raw_disk(number, size, Some(location), ids);
    }

    /// Adds a raw, online NVMe namespace as the Windows backend reports it:
    /// located at the SCSI address stornvme gives it, identified by its
    /// NGUID or EUI-64 and its controller's serial.
    pub fn add_nvme_disk(
        &self,
        number: u32,
        size: u64,
        address: ScsiAddress,
        ids: NamespaceIds,
        controller_serial: &str,
    ) {
        let location = address.nvme_location().map(|l| DiskLocation {
            adapter: l.adapter,
            bus: l.bus,
            target: l.target,
            lun_id: l.lun_id,
        });
        let ids = DiskIds {
            page83: ids.page83().unwrap_or_default(),
            serial_number: controller_serial.into(),
        };
        self.insert_raw_disk(number, size, location, ids);
    }

    fn insert_raw_disk(
        &self,
        number: u32,
        size: u64,
        location: Option<DiskLocation>,
        ids: DiskIds,
    ) {
        self.lock().disks.insert(
            number,
            FakeDisk {
                size,
                online: true,
                location,
                ids,
                initialized: false,
                partitions: Vec::new(),
            },
        );
    }

    /// Adds (or replaces) disk `number` as given.
    pub fn insert_disk(&self, number: u32, disk: FakeDisk) {
        self.lock().disks.insert(number, disk);
    }

    /// What `inventory_generation` answers from now on: `Some` a
    /// generation (the layer above may reuse answers while it stays the
    /// same), `None` no inventory (the default).
    pub fn set_inventory_generation(&self, generation: Option<u64>) {
        let mut s = self.lock();
        s.generation = generation;
        s.generation_error = None;
    }

    /// `inventory_generation` fails with [`Error::Internal`]`(message)`
    /// until [`FakeStorage::set_inventory_generation`].
    pub fn fail_inventory_generation(&self, message: &str) {
        self.lock().generation_error = Some(message.to_string());
    }

    /// While `on`, every call made in an inline attempt
    /// ([`crate::inline::active`]) answers [`crate::inline::would_block`]
    /// and does nothing (it is not recorded), as the real inventory does
    /// when it would have to read a device first.
    pub fn set_block_inline(&self, on: bool) {
        self.lock().block_inline = on;
    }

    /// How many calls were made in an inline attempt (blocked or not).
    pub fn inline_calls(&self) -> usize {
        self.lock().inline_calls
    }

    /// Grows a disk (as a resized cloud disk would).
    pub fn set_disk_size(&self, number: u32, size: u64) {
        if let Some(d) = self.lock().disks.get_mut(&number) {
            d.size = size;
        }
    }

    /// The backend calls made so far, as `"method arg..."` strings.
    pub fn calls(&self) -> Vec<String> {
        self.lock().calls.clone()
    }

    /// Takes the backend calls made so far (the next [`FakeStorage::calls`]
    /// starts empty).
    pub fn take_calls(&self) -> Vec<String> {
        std::mem::take(&mut self.lock().calls)
    }

    /// The current mounts: target path → volume.
    pub fn mounts(&self) -> BTreeMap<String, VolumeId> {
        self.lock().mounts.clone()
    }

    /// A snapshot of a disk.
    pub fn disk(&self, number: u32) -> Option<FakeDisk> {
        self.lock().disks.get(&number).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records `call` (or, in an inline attempt while blocked, answers
    /// "would block").
    fn record(&self, call: String) -> Result<std::sync::MutexGuard<'_, State>> {
        let mut s = self.lock();
        if crate::inline::active() {
            s.inline_calls += 1;
            if s.block_inline {
                return Err(crate::inline::would_block("the fake storage blocks inline"));
            }
        }
        s.calls.push(call);
        Ok(s)
    }
}

fn no_disk(disk: u32) -> Error {
    Error::NotFound(format!("disk {disk} does not exist"))
}

fn no_volume(v: &VolumeId) -> Error {
    Error::NotFound(format!("volume {v} does not exist"))
}

impl State {
    fn part(&mut self, v: &VolumeId) -> Result<(u32, &mut FakePartition)> {
        for (n, d) in self.disks.iter_mut() {
            if let Some(p) = d.partitions.iter_mut().find(|p| &p.volume == v) {
                return Ok((*n, p));
            }
        }
        Err(no_volume(v))
    }
}

impl FakeStorage {
    /// One basic partition over a disk without one; a raw disk is
    /// initialised first when `initialize` (PartitionDisk), refused
    /// otherwise (CreateBasicPartition).
    fn partition(&self, call: String, disk: u32, initialize: bool) -> Result<()> {
        let mut s = self.record(call)?;
        s.next_guid += 1;
        let guid = crate::storage::parse::guid::Guid::from_u128(
            0x0000_0000_0000_4000_8000_0000_0000_0000 | u128::from(s.next_guid),
        );
        let d = s.disks.get_mut(&disk).ok_or_else(|| no_disk(disk))?;
        if !d.online {
            return Err(Error::FailedPrecondition(format!("disk {disk} is offline")));
        }
        if !d.initialized && !initialize {
            return Err(crate::storage::not_initialized(disk));
        }
        d.initialized = true;
        if d.partitions.is_empty() {
            let size = d.size.saturating_sub(2 << 20);
            d.partitions.push(FakePartition {
                number: 1,
                volume: VolumeId::from_guid(guid),
                size,
                formatted: false,
                used: 0,
            });
        }
        Ok(())
    }
}

impl StorageBackend for FakeStorage {
    fn disk_locations(&self) -> Result<BTreeMap<u32, DiskLocation>> {
        let s = self.record("disk_locations".into())?;
        Ok(s.disks
            .iter()
            .filter_map(|(n, d)| d.location.clone().map(|l| (*n, l)))
            .collect())
    }
    fn disk_ids(&self) -> Result<BTreeMap<u32, DiskIds>> {
        let s = self.record("disk_ids".into())?;
        Ok(s.disks.iter().map(|(n, d)| (*n, d.ids.clone())).collect())
    }
    fn inventory_generation(&self) -> Result<Option<u64>> {
        let s = self.record("inventory_generation".into())?;
        match &s.generation_error {
            Some(m) => Err(Error::Internal(m.clone())),
            None => Ok(s.generation),
        }
    }
    fn disk_size(&self, disk: u32) -> Result<u64> {
        let s = self.record(format!("disk_size {disk}"))?;
        s.disks
            .get(&disk)
            .map(|d| d.size)
            .ok_or_else(|| no_disk(disk))
    }
    fn disk_online(&self, disk: u32) -> Result<bool> {
        let s = self.record(format!("disk_online {disk}"))?;
        s.disks
            .get(&disk)
            .map(|d| d.online)
            .ok_or_else(|| no_disk(disk))
    }
    fn set_disk_online(&self, disk: u32, online: bool) -> Result<()> {
        let mut s = self.record(format!("set_disk_online {disk} {online}"))?;
        s.disks.get_mut(&disk).ok_or_else(|| no_disk(disk))?.online = online;
        Ok(())
    }
    fn partition_disk(&self, disk: u32) -> Result<()> {
        self.partition(format!("partition_disk {disk}"), disk, true)
    }
    fn disk_layout(&self, disk: u32) -> Result<DiskLayout> {
        let s = self.record(format!("disk_layout {disk}"))?;
        let d = s.disks.get(&disk).ok_or_else(|| no_disk(disk))?;
        Ok(DiskLayout {
            initialized: d.initialized,
            has_data: !d.partitions.is_empty(),
        })
    }
    fn initialize_disk(&self, disk: u32) -> Result<()> {
        let mut s = self.record(format!("initialize_disk {disk}"))?;
        let d = s.disks.get_mut(&disk).ok_or_else(|| no_disk(disk))?;
        if !d.online {
            return Err(Error::FailedPrecondition(format!("disk {disk} is offline")));
        }
        d.initialized = true;
        Ok(())
    }
    fn create_basic_partition(&self, disk: u32) -> Result<()> {
        self.partition(format!("create_basic_partition {disk}"), disk, false)
    }
    fn rescan(&self) -> Result<()> {
        drop(self.record("rescan".into())?);
        Ok(())
    }
    fn volumes_on_disk(&self, disk: u32, partition: Option<u32>) -> Result<Vec<VolumeId>> {
        let s = self.record(format!("volumes_on_disk {disk} {partition:?}"))?;
        let d = s.disks.get(&disk).ok_or_else(|| no_disk(disk))?;
        let out: Vec<VolumeId> = d
            .partitions
            .iter()
            .filter(|p| partition.is_none_or(|n| n == p.number))
            .map(|p| p.volume.clone())
            .collect();
        if let (Some(n), true) = (partition, out.is_empty()) {
            return Err(Error::NotFound(format!("disk {disk} has no partition {n}")));
        }
        Ok(out)
    }
    fn volume_disk(&self, volume: &VolumeId) -> Result<u32> {
        let mut s = self.record(format!("volume_disk {volume}"))?;
        Ok(s.part(volume)?.0)
    }
    fn is_formatted(&self, volume: &VolumeId) -> Result<bool> {
        let mut s = self.record(format!("is_formatted {volume}"))?;
        Ok(s.part(volume)?.1.formatted)
    }
    fn format(&self, volume: &VolumeId) -> Result<()> {
        let mut s = self.record(format!("format {volume}"))?;
        if s.mounts.values().any(|m| m == volume) {
            return Err(Error::FailedPrecondition(format!(
                "volume {volume} is mounted"
            )));
        }
        let p = s.part(volume)?.1;
        p.formatted = true;
        p.used = p.size / 100;
        Ok(())
    }
    fn volume_stats(&self, volume: &VolumeId) -> Result<VolumeStats> {
        let mut s = self.record(format!("volume_stats {volume}"))?;
        let p = s.part(volume)?.1;
        if !p.formatted {
            return Err(Error::FailedPrecondition(format!(
                "volume {volume} has no filesystem"
            )));
        }
        Ok(VolumeStats {
            total_bytes: p.size,
            used_bytes: p.used,
        })
    }
    fn resize(&self, volume: &VolumeId, target: ResizeTarget) -> Result<()> {
        let mut s = self.record(format!("resize {volume} {target:?}"))?;
        let (disk, _) = s.part(volume)?;
        let max = s.disks[&disk].size.saturating_sub(2 << 20);
        let p = s.part(volume)?.1;
        match plan_resize(p.size, max, target)? {
            ResizePlan::Skip => {}
            ResizePlan::Grow(n) | ResizePlan::Shrink(n) => p.size = n,
        }
        Ok(())
    }
    fn flush(&self, volume: &VolumeId) -> Result<()> {
        let mut s = self.record(format!("flush {volume}"))?;
        s.part(volume).map(|_| ())
    }
    fn mount(&self, volume: &VolumeId, fs: &Confined, target: &Located) -> Result<()> {
        // Like the real backends, reach the target through the confined
        // filesystem first (a link in its chain is refused there).
        fs.kind(target)?;
        let target = target.path();
        let mut s = self.record(format!("mount {volume} {target}"))?;
        s.part(volume)?;
        match s.mounts.get(target) {
            Some(m) if m == volume => Ok(()),
            Some(m) => Err(Error::AlreadyExists(format!("{target} is a mount of {m}"))),
            None => {
                s.mounts.insert(target.to_string(), volume.clone());
                Ok(())
            }
        }
    }
    fn unmount(&self, volume: &VolumeId, fs: &Confined, target: &Located) -> Result<()> {
        // Like the real backends, reach the target through the confined
        // filesystem first (a link in its chain is refused there).
        fs.kind(target)?;
        let target = target.path();
        let mut s = self.record(format!("unmount {volume} {target}"))?;
        s.part(volume)?;
        match s.mounts.get(target) {
            None => Ok(()),
            Some(m) if m == volume => {
                s.mounts.remove(target);
                Ok(())
            }
            Some(m) => Err(Error::FailedPrecondition(format!(
                "{target} is a mount of {m}, not of {volume}"
            ))),
        }
    }
    fn volume_at(&self, fs: &Confined, target: &Located) -> Result<At> {
        // Like the real backends: a link is an error; a mount (the fake's
        // own, in memory) answers its volume; else what a fresh look at the
        // directory tree proves.
        let kind = fs.kind(target)?;
        let path = target.path();
        let s = self.record(format!("volume_at {path}"))?;
        if kind == Some(Kind::Link) {
            return Err(Error::FailedPrecondition(format!(
                "path {} is a link, not a directory",
                target.shown()
            )));
        }
        if let Some(v) = s.mounts.get(path) {
            return Ok(At::Volume(v.clone()));
        }
        drop(s);
        if kind == Some(Kind::Dir) {
            return Ok(At::NotMounted(NotMounted::PlainDirectory));
        }
        let err = Error::FailedPrecondition(format!("path {} is not a directory", target.shown()));
        crate::storage::target::absent(fs, target, err)
    }
    fn closest_volume(&self, fs: &Confined, target: &Located) -> Result<VolumeId> {
        fs.kind(target)?;
        let target = target.path();
        let s = self.record(format!("closest_volume {target}"))?;
        s.mounts
            .iter()
            .filter(|(m, _)| {
                target == m.as_str()
                    || target
                        .strip_prefix(m.as_str())
                        .is_some_and(|r| r.starts_with(['/', '\\']))
            })
            .max_by_key(|(m, _)| m.len())
            .map(|(_, v)| v.clone())
            .ok_or_else(|| Error::NotFound(format!("no volume holds {target}")))
    }
}

impl StorageBackend for std::sync::Arc<FakeStorage> {
    fn disk_locations(&self) -> Result<BTreeMap<u32, DiskLocation>> {
        (**self).disk_locations()
    }
    fn disk_ids(&self) -> Result<BTreeMap<u32, DiskIds>> {
        (**self).disk_ids()
    }
    fn inventory_generation(&self) -> Result<Option<u64>> {
        (**self).inventory_generation()
    }
    fn disk_by_page83(&self, page83: &str) -> Result<Option<u32>> {
        (**self).disk_by_page83(page83)
    }
    fn disk_size(&self, disk: u32) -> Result<u64> {
        (**self).disk_size(disk)
    }
    fn disk_online(&self, disk: u32) -> Result<bool> {
        (**self).disk_online(disk)
    }
    fn set_disk_online(&self, disk: u32, online: bool) -> Result<()> {
        (**self).set_disk_online(disk, online)
    }
    fn partition_disk(&self, disk: u32) -> Result<()> {
        (**self).partition_disk(disk)
    }
    fn disk_layout(&self, disk: u32) -> Result<DiskLayout> {
        (**self).disk_layout(disk)
    }
    fn initialize_disk(&self, disk: u32) -> Result<()> {
        (**self).initialize_disk(disk)
    }
    fn create_basic_partition(&self, disk: u32) -> Result<()> {
        (**self).create_basic_partition(disk)
    }
    fn rescan(&self) -> Result<()> {
        (**self).rescan()
    }
    fn volumes_on_disk(&self, disk: u32, partition: Option<u32>) -> Result<Vec<VolumeId>> {
        (**self).volumes_on_disk(disk, partition)
    }
    fn volume_disk(&self, volume: &VolumeId) -> Result<u32> {
        (**self).volume_disk(volume)
    }
    fn is_formatted(&self, volume: &VolumeId) -> Result<bool> {
        (**self).is_formatted(volume)
    }
    fn format(&self, volume: &VolumeId) -> Result<()> {
        (**self).format(volume)
    }
    fn volume_stats(&self, volume: &VolumeId) -> Result<VolumeStats> {
        (**self).volume_stats(volume)
    }
    fn resize(&self, volume: &VolumeId, target: ResizeTarget) -> Result<()> {
        (**self).resize(volume, target)
    }
    fn flush(&self, volume: &VolumeId) -> Result<()> {
        (**self).flush(volume)
    }
    fn mount(&self, volume: &VolumeId, fs: &Confined, target: &Located) -> Result<()> {
        (**self).mount(volume, fs, target)
    }
    fn unmount(&self, volume: &VolumeId, fs: &Confined, target: &Located) -> Result<()> {
        (**self).unmount(volume, fs, target)
    }
    fn volume_at(&self, fs: &Confined, target: &Located) -> Result<At> {
        (**self).volume_at(fs, target)
    }
    fn closest_volume(&self, fs: &Confined, target: &Located) -> Result<VolumeId> {
        (**self).closest_volume(fs, target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_attempts_are_counted_and_blocked_only_when_switched_on() {
        let f = FakeStorage::new();
        f.add_disk(1, 1 << 30, "p");
        assert_eq!(crate::inline::run(|| f.disk_size(1)).unwrap(), 1 << 30);
        assert_eq!(f.disk_size(1).unwrap(), 1 << 30);
        assert_eq!(f.inline_calls(), 1, "only the inline one");
        f.set_block_inline(true);
        let e = crate::inline::run(|| f.set_disk_online(1, false)).unwrap_err();
        assert!(crate::inline::is_would_block(&e), "{e}");
        assert!(f.disk(1).unwrap().online, "a blocked call does nothing");
        assert_eq!(f.inline_calls(), 2);
        // Outside an inline attempt the switch changes nothing.
        f.set_disk_online(1, false).unwrap();
        assert!(!f.disk(1).unwrap().online);
        assert_eq!(
            f.take_calls(),
            ["disk_size 1", "disk_size 1", "set_disk_online 1 false"]
        );
    }

    #[test]
    fn the_inventory_generation_is_scripted() {
        let f = FakeStorage::new();
        assert_eq!(f.inventory_generation().unwrap(), None);
        f.set_inventory_generation(Some(3));
        assert_eq!(f.inventory_generation().unwrap(), Some(3));
        f.fail_inventory_generation("scripted");
        let e = f.inventory_generation().unwrap_err();
        assert!(matches!(&e, Error::Internal(m) if m == "scripted"), "{e}");
        f.set_inventory_generation(Some(4));
        assert_eq!(f.inventory_generation().unwrap(), Some(4));
        assert_eq!(f.take_calls(), ["inventory_generation"; 4]);
    }
}
