//! How the inventory reads Linux disks: sysfs for the disk and its
//! partitions, the partition table for the volume ids, the `device` link for
//! the location. Identifiers (VPD pages) are read only when a call asks for
//! them, once per disk until the disk changes.

use super::devices;
use super::sysfs::{self, BlockDisk, Sysfs};
use crate::disk::{DiskIds, DiskLocation};
use crate::storage::inventory::{uevent, DiskVolume, Scan, Scanned};
use crate::storage::parse::device_id;
use crate::{Error, Result};
use std::io;
use std::path::PathBuf;
use std::sync::OnceLock;

/// What the inventory keeps of one Linux disk.
#[derive(Debug)]
pub struct LinuxDisk {
    pub disk: BlockDisk,
    pub location: Option<DiskLocation>,
    ids: OnceLock<DiskIds>,
}

impl LinuxDisk {
    /// The page-0x83 id and serial number, read on first use.
    pub fn ids(&self, sysfs: &Sysfs) -> &DiskIds {
        self.ids.get_or_init(|| ids(sysfs, &self.disk.name))
    }

    /// Whether the identifiers were read already (reading them may ask the
    /// device: virtio-blk's `serial` does).
    pub fn ids_known(&self) -> bool {
        self.ids.get().is_some()
    }
}

/// The Linux scanner: `/sys/block` and the device nodes in `dev_dir`.
pub struct LinuxScan {
    pub sysfs: Sysfs,
    pub dev_dir: PathBuf,
}

impl LinuxScan {
    fn describe(&self, disk: BlockDisk) -> Scanned<String, LinuxDisk> {
        let volumes = match devices::volumes_of(&self.dev_dir, &disk) {
            Ok(v) => v
                .into_iter()
                .map(|(p, id)| DiskVolume {
                    id,
                    partition: Some(p.number),
                    extent: 0,
                })
                .collect(),
            Err(e) => {
                tracing::debug!(disk = disk.name, error = %e, "partition table unreadable; no volumes listed");
                Vec::new()
            }
        };
        Scanned {
            key: disk.name.clone(),
            number: disk.number,
            volumes,
            disk: LinuxDisk {
                location: location(&self.sysfs, &disk.name),
                disk,
                ids: OnceLock::new(),
            },
        }
    }
}

impl Scan for LinuxScan {
    type Key = String;
    type Disk = LinuxDisk;

    fn scan_all(&self) -> Result<Vec<Scanned<String, LinuxDisk>>> {
        let names = self
            .sysfs
            .names()
            .map_err(|e| Error::io("read", "/sys/block", e))?;
        let mut out = Vec::new();
        for name in names {
            match self.sysfs.disk(&name) {
                Ok(Some(d)) => out.push(self.describe(d)),
                Ok(None) => {}
                // The disk went away while we read it.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::debug!(disk = name, error = %e, "skipping unreadable block device");
                }
            }
        }
        Ok(out)
    }

    fn scan_one(&self, name: &String) -> Result<Option<Scanned<String, LinuxDisk>>> {
        if !uevent::valid_name(name) || sysfs::ignored(name) {
            return Ok(None);
        }
        match self.sysfs.disk(name) {
            Ok(d) => Ok(d.map(|d| self.describe(d))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io("read", format!("/sys/block/{name}"), e)),
        }
    }
}

/// Where a disk sits: SCSI host:channel:target:lun, NVMe, virtio or loop.
pub fn location(sysfs: &Sysfs, name: &str) -> Option<DiskLocation> {
    let loc = |adapter: &str, bus: &str, target: &str, lun: &str| DiskLocation {
        adapter: adapter.into(),
        bus: bus.into(),
        target: target.into(),
        lun_id: lun.into(),
    };
    if let Some(n) = name.strip_prefix("loop") {
        return Some(loc("loop", "0", "0", n));
    }
    let dev = sysfs.device_link(name)?;
    let base = dev.file_name()?.to_str()?;
    // SCSI: .../host2/target2:0:1/2:0:1:3 = host:channel:target:lun.
    let hctl: Vec<&str> = base.split(':').collect();
    if hctl.len() == 4
        && hctl
            .iter()
            .all(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
    {
        return Some(loc(hctl[0], hctl[1], hctl[2], hctl[3]));
    }
    // NVMe: .../nvme/nvme0 with the namespace id as the target.
    if let Some(ctrl) = base.strip_prefix("nvme") {
        let nsid = sysfs.read_disk_file(name, "nsid")?;
        let nsid = String::from_utf8_lossy(&nsid).trim().to_string();
        return Some(loc(&format!("nvme{ctrl}"), "0", &nsid, "0"));
    }
    // virtio-blk: .../virtio3.
    if let Some(n) = base.strip_prefix("virtio") {
        return Some(loc("virtio", "0", "0", n));
    }
    None
}

/// The page-0x83 id and serial number of a disk, from its VPD pages (or the
/// `wwid` / `serial` attributes); empty for loop devices.
pub fn ids(sysfs: &Sysfs, name: &str) -> DiskIds {
    // Loop devices have no identifiers; skip the file lookups.
    if name.starts_with("loop") {
        return DiskIds::default();
    }
    let text = |b: Vec<u8>| {
        String::from_utf8_lossy(&b)
            .trim()
            .trim_matches('\0')
            .to_string()
    };
    let page83 = sysfs
        .read_disk_file(name, "device/vpd_pg83")
        .and_then(|b| device_id::parse_scsi_vpd_page83(&b).ok())
        .and_then(|ids| device_id::page83_id(&ids))
        .or_else(|| sysfs.read_disk_file(name, "wwid").map(text))
        .or_else(|| sysfs.read_disk_file(name, "device/wwid").map(text))
        .unwrap_or_default();
    let serial_number = sysfs
        .read_disk_file(name, "device/vpd_pg80")
        .and_then(|b| device_id::parse_scsi_vpd_page80(&b).ok())
        .or_else(|| sysfs.read_disk_file(name, "device/serial").map(text))
        .or_else(|| sysfs.read_disk_file(name, "serial").map(text))
        .unwrap_or_default();
    DiskIds {
        page83,
        serial_number,
    }
}
