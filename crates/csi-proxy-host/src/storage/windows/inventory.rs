//! The Windows backend's inventory: disk numbers (SetupDi or
//! `PhysicalDriveN` probing) with their identifiers read on first use, and
//! every volume's place (`IOCTL_STORAGE_GET_DEVICE_NUMBER`, else its disk
//! extents), scanned in full whenever a disk or volume interface arrives or
//! goes (`CM_Register_Notification`), and the WMI disk locations kept per
//! inventory generation. Without notifications (wine) every call scans, as
//! before.

use super::{disk, volume, WindowsStorage};
use crate::disk::{DiskIds, DiskLocation};
use crate::inline;
use crate::storage::inventory::notify::DeviceEvents;
use crate::storage::inventory::{DiskVolume, Inventory, Scan, Scanned, View};
use crate::storage::parse::nvme::merge_nvme_locations;
use crate::storage::VolumeId;
use crate::{Error, Result};
use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

/// What the inventory keeps of one Windows disk.
#[derive(Debug, Default)]
pub struct WinDisk {
    ids: OnceLock<DiskIds>,
}

/// The Windows scanner.
pub struct WinScan;

pub type WinInventory = Inventory<WinScan, DeviceEvents>;
type WinView<'a> = View<'a, WinScan, DeviceEvents>;

impl Scan for WinScan {
    type Key = u32;
    type Disk = WinDisk;

    fn scan_all(&self) -> Result<Vec<Scanned<u32, WinDisk>>> {
        let mut disks: BTreeMap<u32, Vec<DiskVolume>> = disk::disk_numbers()?
            .into_iter()
            .map(|n| (n, Vec::new()))
            .collect();
        for v in volume::all_volumes()? {
            let places: Vec<(u32, Option<u32>)> = match volume::placement(&v) {
                volume::Placement::Partition { disk, partition } => {
                    vec![(disk, Some(partition))]
                }
                volume::Placement::Extents(on) => on.into_iter().map(|d| (d, None)).collect(),
                volume::Placement::Elsewhere => Vec::new(),
            };
            for (extent, (disk, partition)) in places.into_iter().enumerate() {
                // A disk that appeared after the disk list was taken is
                // scanned with the next notification.
                if let Some(vols) = disks.get_mut(&disk) {
                    vols.push(DiskVolume {
                        id: v.clone(),
                        partition,
                        extent: extent as u32,
                    });
                }
            }
        }
        Ok(disks
            .into_iter()
            .map(|(n, volumes)| Scanned {
                key: n,
                number: n,
                disk: WinDisk::default(),
                volumes,
            })
            .collect())
    }

    /// Notifications do not say which disk changed: every change scans
    /// everything, so this is never asked for (and an error makes the
    /// inventory scan everything anyway).
    fn scan_one(&self, disk: &u32) -> Result<Option<Scanned<u32, WinDisk>>> {
        Err(Error::Internal(format!(
            "disk {disk}: the Windows inventory scans only in full"
        )))
    }
}

/// A test hook: reads of one disk's identifiers wait while it is set (as
/// a hung `\\.\PhysicalDriveN` would).
#[cfg(test)]
pub(super) mod hang {
    use std::sync::{Condvar, Mutex};

    #[derive(Default)]
    pub struct Hang {
        disks: Mutex<Vec<u32>>,
        released: Condvar,
    }

    impl Hang {
        /// Makes reads of disk `n`'s identifiers wait (`None`: release).
        pub fn set(&self, n: Option<u32>) {
            self.set_all(n.as_slice());
        }

        /// Makes reads of each of `disks`' identifiers wait (and only
        /// theirs).
        pub fn set_all(&self, disks: &[u32]) {
            *self.disks.lock().unwrap() = disks.to_vec();
            self.released.notify_all();
        }

        pub(crate) fn wait(&self, n: u32) {
            let mut h = self.disks.lock().unwrap();
            while h.contains(&n) {
                h = self.released.wait(h).unwrap();
            }
        }
    }
}

/// The inventory, listening for notifications first.
pub fn new_inventory() -> WinInventory {
    Inventory::new(WinScan, DeviceEvents::register())
}

/// The WMI disk locations of one inventory generation.
#[derive(Default)]
pub struct Locations(Mutex<Option<(u64, BTreeMap<u32, DiskLocation>)>>);

impl WindowsStorage {
    fn view(&self) -> Result<WinView<'_>> {
        self.inventory.view()
    }

    /// The identifiers of every disk, read where not yet known (an inline
    /// attempt would block instead: they are IOCTLs). Each disk's read runs
    /// outside the inventory lock, bounded in time ([`Inventory::read_disk`]);
    /// a disk that does not answer is left out (and its own calls answer
    /// `Unavailable`).
    fn with_ids<T>(&self, f: impl FnOnce(Vec<(u32, &DiskIds)>) -> T) -> Result<T> {
        let missing: Vec<u32> = {
            let view = self.view()?;
            view.disks()
                .filter(|(n, d)| d.ids.get().is_none() && !view.is_unresponsive(*n))
                .map(|(n, _)| n)
                .collect()
        };
        if !missing.is_empty() && inline::active() {
            return Err(inline::would_block("reading disk identifiers"));
        }
        // All at once, each on a thread of its own, waited for until one
        // deadline: several new disks that hang cost the call one read
        // timeout, not one each.
        #[cfg(test)]
        let hang = self.hang.clone();
        let mut read = Vec::new();
        for (n, r) in self.inventory.read_disks(missing, move |n| {
            #[cfg(test)]
            hang.wait(*n);
            disk::disk_ids(*n)
        }) {
            match r {
                Ok(ids) => read.push((n, ids)),
                // Removed since it was listed: the notification follows.
                Err(Error::NotFound(_)) => {}
                // Not answering: answered from what is known.
                Err(Error::Unavailable(m)) => tracing::warn!("{m}"),
                Err(e) => return Err(e),
            }
        }
        let view = self.view()?;
        for (n, ids) in read {
            if let Some(d) = view.snapshot().disk(n) {
                let _ = d.ids.set(ids);
            }
        }
        let known = view
            .disks()
            .filter_map(|(n, d)| d.ids.get().map(|ids| (n, ids)))
            .collect();
        Ok(f(known))
    }

    /// Page-0x83 id and serial number of every disk.
    pub(super) fn inventory_disk_ids(&self) -> Result<BTreeMap<u32, DiskIds>> {
        self.with_ids(|all| all.into_iter().map(|(n, ids)| (n, ids.clone())).collect())
    }

    /// The disk whose page-0x83 id is `page83`.
    pub(super) fn inventory_disk_by_page83(&self, page83: &str) -> Result<Option<u32>> {
        self.with_ids(|all| {
            all.into_iter()
                .find(|(_, ids)| ids.page83 == page83)
                .map(|(n, _)| n)
        })
    }

    /// The volumes on `disk` (on `partition` only, when given). An unknown
    /// disk, or a partition number with no volume, is [`Error::NotFound`]. A
    /// volume spanning several disks is listed for each of them when no
    /// partition is asked for.
    pub(super) fn inventory_volumes_on_disk(
        &self,
        disk: u32,
        partition: Option<u32>,
    ) -> Result<Vec<VolumeId>> {
        let mut view = self.view()?;
        let vols = view
            .volumes_on(disk)?
            .ok_or_else(|| Error::NotFound(format!("disk {disk} does not exist")))?;
        let out: Vec<VolumeId> = vols
            .iter()
            .filter(|v| partition.is_none_or(|p| v.partition == Some(p)))
            .map(|v| v.id.clone())
            .collect();
        match partition {
            Some(p) if out.is_empty() => Err(Error::NotFound(format!(
                "disk {disk} has no volume on partition {p}"
            ))),
            _ => Ok(out),
        }
    }

    /// The location of every disk, once per inventory generation: WMI's
    /// `MSFT_Disk.Location`, and for NVMe disks their SCSI address as
    /// stornvme reports it (`parse::nvme::merge_nvme_locations`).
    pub(super) fn inventory_disk_locations(&self) -> Result<BTreeMap<u32, DiskLocation>> {
        let view = self.view()?;
        let generation = view.generation();
        // A disk that does not answer keeps its WMI location only.
        let numbers: Vec<u32> = view
            .disks()
            .map(|(n, _)| n)
            .filter(|n| !view.is_unresponsive(*n))
            .collect();
        drop(view);
        {
            let cache = self.locations.0.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((g, locs)) = &*cache {
                if *g == generation {
                    return Ok(locs.clone());
                }
            }
        }
        if inline::active() {
            return Err(inline::would_block("asking WMI for the disk locations"));
        }
        // Read with no lock held (the cache's lock is every call's): WMI on
        // its pool, each disk's address on its bounded reader.
        let wmi = super::stor::disk_locations(&self.wmi)?;
        let mut nvme = Vec::new();
        for n in numbers {
            match self.inventory.read_disk(&n, move || disk::nvme_address(n)) {
                Ok(Some(a)) => {
                    let Some(l) = a.nvme_location() else {
                        continue;
                    };
                    nvme.push((
                        n,
                        DiskLocation {
                            adapter: l.adapter,
                            bus: l.bus,
                            target: l.target,
                            lun_id: l.lun_id,
                        },
                    ));
                }
                Ok(None) => {}
                // Removed since it was listed: the notification follows.
                Err(Error::NotFound(_)) => {}
                // Not answering: listed with its WMI location.
                Err(Error::Unavailable(m)) => tracing::warn!("{m}"),
                Err(e) => tracing::debug!("disk {n}: no NVMe address: {e}"),
            }
        }
        let (locs, clashing) = merge_nvme_locations(wmi, &nvme);
        for n in clashing {
            tracing::warn!(
                "disk {n}: its NVMe address is another disk's too; it is listed with its WMI location, if any"
            );
        }
        *self.locations.0.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((generation, locs.clone()));
        Ok(locs)
    }

    /// The inventory generation, when notifications keep it current.
    pub(super) fn generation(&self) -> Result<Option<u64>> {
        if !self.inventory.has_events() {
            return Ok(None);
        }
        Ok(Some(self.view()?.generation()))
    }
}
