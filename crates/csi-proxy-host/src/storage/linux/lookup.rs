//! The Linux backend's inventory and its lookups: disk numbers, volume ids
//! and device numbers resolved in memory (`storage::inventory`), kept
//! current by the kernel's uevents; the disk or volume read again from
//! sysfs where an operation is about to change it.

use super::devices;
use super::scan::LinuxScan;
use super::sysfs::{BlockDisk, Sysfs};
use super::{from_io, no_disk, Found, LinuxStorage};
use crate::storage::inventory::{netlink, Inventory, View};
use crate::storage::VolumeId;
use crate::{Error, Result};
use std::io;
use std::path::{Path, PathBuf};

pub(super) type LinuxInventory = Inventory<LinuxScan, netlink::Uevents>;
pub(super) type LinuxView<'a> = View<'a, LinuxScan, netlink::Uevents>;

/// How the inventory learns about changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Events {
    /// Kernel uevents, with a receive buffer of this many bytes.
    Kernel(usize),
    /// None: every call scans every disk.
    None,
}

/// The inventory over `sysfs` and `dev_dir`, listening for uevents first.
pub(super) fn inventory(sysfs: &Sysfs, dev_dir: &Path, events: Events) -> LinuxInventory {
    let source = match events {
        Events::None => None,
        Events::Kernel(_) if !netlink::in_initial_user_namespace() => {
            tracing::warn!("not in the initial user namespace, where the kernel sends block device events; every disk and volume list call scans the host");
            None
        }
        Events::Kernel(buffer) => match netlink::Uevents::open(buffer) {
            Ok(u) => Some(u),
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for block device events; every disk and volume list call scans the host");
                None
            }
        },
    };
    Inventory::new(
        LinuxScan {
            sysfs: sysfs.clone(),
            dev_dir: dev_dir.to_path_buf(),
        },
        source,
    )
}

/// Refuses a volume id seen in more than one place (a cloned disk carries
/// the same partition GUIDs): no operation may pick one of them.
fn unique(v: &VolumeId, places: &[(u32, String, u32)]) -> Result<()> {
    if places.len() > 1 {
        let at: Vec<String> = places
            .iter()
            .map(|(n, name, p)| format!("disk {n} ({name}) partition {p}"))
            .collect();
        return Err(Error::FailedPrecondition(format!(
            "volume id {v} is ambiguous: it is on {} (a cloned disk?); detach or re-initialise one of them",
            at.join(" and on ")
        )));
    }
    Ok(())
}

impl LinuxStorage {
    pub(super) fn events(&self) -> Events {
        if self.inventory.has_events() {
            Events::Kernel(netlink::DEFAULT_BUFFER)
        } else {
            Events::None
        }
    }

    /// Creates (and looks up) device nodes in `dir` instead of `/dev`.
    pub fn with_dev_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.dev_dir = dir.into();
        self.inventory = inventory(&self.sysfs, &self.dev_dir, self.events());
        self
    }

    /// Listens for uevents with a receive buffer of `bytes` (tests: a tiny
    /// buffer overflows, and the inventory must recover by scanning).
    pub fn with_event_buffer(mut self, bytes: usize) -> Self {
        self.inventory = inventory(&self.sysfs, &self.dev_dir, Events::Kernel(bytes));
        self
    }

    /// Reads `/sys` from `root` instead (tests: a made-up sysfs), following
    /// no events.
    #[cfg(test)]
    pub(super) fn with_sysfs(mut self, root: impl Into<PathBuf>) -> Self {
        self.sysfs = Sysfs::at(root);
        self.inventory = inventory(&self.sysfs, &self.dev_dir, Events::None);
        self
    }

    /// Follows no events: every call scans every disk (what a call costs
    /// without the inventory; the reference "fresh scan" of the tests).
    pub fn without_events(mut self) -> Self {
        self.inventory = inventory(&self.sysfs, &self.dev_dir, Events::None);
        self
    }

    /// Whether the inventory follows the kernel's uevents.
    pub fn follows_events(&self) -> bool {
        self.inventory.has_events()
    }

    pub(super) fn view(&self) -> Result<LinuxView<'_>> {
        self.inventory.view()
    }

    /// The kernel name of disk `number` (from the inventory).
    pub(super) fn disk_name(&self, number: u32) -> Result<String> {
        let mut v = self.view()?;
        if !v.knows_disk(number)? {
            return Err(no_disk(number));
        }
        v.key(number).cloned().ok_or_else(|| no_disk(number))
    }

    /// Disk `number` as sysfs shows it now (for operations that change it):
    /// found through the inventory, then read again.
    pub(super) fn disk(&self, number: u32) -> Result<BlockDisk> {
        let name = self.disk_name(number)?;
        match self.sysfs.disk(&name) {
            Ok(Some(d)) if d.number == number => Ok(d),
            // Detached or re-attached since the inventory saw it: the next
            // call sees the change.
            Ok(_) => {
                self.inventory.touch(name);
                Err(no_disk(number))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(no_disk(number)),
            Err(e) => Err(from_io("read", &name, e)),
        }
    }

    /// Where the inventory has a volume: its disk (as last scanned) and
    /// partition. No I/O unless the id is unknown (one full scan). A volume
    /// id seen on two disks is refused.
    pub(super) fn locate(&self, v: &VolumeId) -> Result<Found> {
        let mut view = self.view()?;
        let places = view.volume(v)?;
        let mut found = Vec::new();
        for p in &places {
            let Some(d) = view.snapshot().disk(p.disk) else {
                continue;
            };
            let part = p
                .partition
                .and_then(|n| d.disk.partitions.iter().find(|q| q.number == n));
            if let Some(part) = part {
                found.push(Found {
                    disk: d.disk.clone(),
                    part: part.clone(),
                });
            }
        }
        let named: Vec<(u32, String, u32)> = found
            .iter()
            .map(|f| (f.disk.number, f.disk.name.clone(), f.part.number))
            .collect();
        unique(v, &named)?;
        found
            .pop()
            .ok_or_else(|| Error::NotFound(format!("volume {v} does not exist")))
    }

    /// A volume for an operation that changes it: located through the
    /// inventory, then its disk read again from sysfs and its partition
    /// table checked to still give this id (a table rewritten behind the
    /// kernel's back announces nothing); a mismatch scans everything once.
    pub(super) fn find(&self, v: &VolumeId) -> Result<Found> {
        for attempt in 0..2 {
            let f = self.locate(v)?;
            if let Ok(Some(d)) = self.sysfs.disk(&f.disk.name) {
                if d.number == f.disk.number {
                    // The first read of the call: bounded, so a disk that
                    // hangs is marked within the read timeout.
                    let dd = d.clone();
                    let vols =
                        self.read_bounded(&d.name, move |dev| devices::volumes_of(dev, &dd))?;
                    let here: Vec<(u32, String, u32)> = vols
                        .iter()
                        .filter(|(_, id)| id == v)
                        .map(|(p, _)| (d.number, d.name.clone(), p.number))
                        .collect();
                    unique(v, &here)?;
                    if let Some((part, _)) = vols.into_iter().find(|(_, id)| id == v) {
                        return Ok(Found { disk: d, part });
                    }
                }
            }
            if attempt == 0 {
                tracing::info!(volume = %v, disk = f.disk.name, "the inventory was stale for this volume; scanning every disk");
                self.inventory.touch(f.disk.name.clone());
                self.view()?.rescan_now()?;
            }
        }
        Err(Error::NotFound(format!("volume {v} does not exist")))
    }

    /// The volume of the partition `major:minor` (from the inventory).
    pub(super) fn volume_of_dev(&self, major: u32, minor: u32, subject: &str) -> Result<VolumeId> {
        let not_volume = || {
            Error::NotFound(format!(
                "{subject} is not on a disk volume (device {major}:{minor} is not a partition with a volume id)"
            ))
        };
        let lookup = |view: &LinuxView<'_>| {
            view.disks().find_map(|(n, d)| {
                let p = d
                    .disk
                    .partitions
                    .iter()
                    .find(|p| (p.major, p.minor) == (major, minor))?;
                let vols = view.snapshot().volumes_on(n)?;
                Some(
                    vols.iter()
                        .find(|v| v.partition == Some(p.number))
                        .map(|v| v.id.clone()),
                )
            })
        };
        let mut view = self.view()?;
        let found = match lookup(&view) {
            Some(id) => id,
            // Not a block device (tmpfs, overlay, ...): nothing to scan for.
            None if major == 0 => None,
            None => {
                view.fall_back()?;
                lookup(&view).flatten()
            }
        };
        found.ok_or_else(not_volume)
    }
}
