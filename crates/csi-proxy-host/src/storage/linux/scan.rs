//! How the inventory reads Linux disks: sysfs for the disk and its
//! partitions, the partition table for the volume ids, the `device` link for
//! the location. Identifiers (VPD pages, [`ids`]) are read only when a call
//! asks for them, once per disk (`LinuxStorage::known_ids`).

use super::devices;
use super::sysfs::{self, BlockDisk, Sysfs};
use crate::disk::{DiskIds, DiskLocation};
use crate::storage::inventory::{uevent, DiskVolume, Scan, Scanned};
use crate::storage::parse::{device_id, nvme};
use crate::{Error, Result};
use std::io;
use std::path::PathBuf;

/// What the inventory keeps of one Linux disk.
#[derive(Debug)]
pub struct LinuxDisk {
    pub disk: BlockDisk,
    pub location: Option<DiskLocation>,
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
            },
        }
    }
}

impl Scan for LinuxScan {
    type Key = String;
    type Disk = LinuxDisk;

    /// The names in `/sys/block` (no device is asked): each disk is then
    /// read on its own, bounded in time.
    fn keys(&self) -> Option<Result<Vec<String>>> {
        Some(
            self.sysfs
                .names()
                .map_err(|e| Error::io("read", "/sys/block", e)),
        )
    }

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

/// The page-0x83 id and serial number of a disk, from its VPD pages; for an
/// NVMe namespace (no VPD pages) the NGUID, else the EUI-64, in the form the
/// Windows backend gives them (`parse::nvme`); else the `wwid` attribute.
/// The serial from page 0x80, else the `serial` attributes (an NVMe
/// namespace's `device` is its controller). Empty for loop devices.
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
        .or_else(|| nvme_page83(sysfs, name))
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

/// The NGUID or EUI-64 of an NVMe namespace (`nguid`, `eui`; the kernel
/// shows only those the namespace reports).
fn nvme_page83(sysfs: &Sysfs, name: &str) -> Option<String> {
    if !name.starts_with("nvme") {
        return None;
    }
    let attr = |file: &str| {
        sysfs
            .read_disk_file(name, file)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    };
    let ids = nvme::NamespaceIds {
        nguid: attr("nguid")
            .and_then(|t| nvme::parse_sysfs_nguid(&t))
            .unwrap_or_default(),
        eui64: attr("eui")
            .and_then(|t| nvme::parse_sysfs_eui(&t))
            .unwrap_or_default(),
    };
    ids.page83()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;
    use std::path::Path;

    /// `block/<name>` with `files`, its `device` a link to
    /// `devices/<device>` holding `device_files`.
    fn disk(
        root: &Path,
        name: &str,
        files: &[(&str, &[u8])],
        device: &str,
        device_files: &[(&str, &[u8])],
    ) {
        let dev = root.join("devices").join(device);
        fs::create_dir_all(&dev).unwrap();
        for (f, v) in device_files {
            fs::write(dev.join(f), v).unwrap();
        }
        let dir = root.join("block").join(name);
        fs::create_dir_all(&dir).unwrap();
        for (f, v) in files {
            fs::write(dir.join(f), v).unwrap();
        }
        symlink(&dev, dir.join("device")).unwrap();
    }

    #[test]
    fn nvme_namespaces_get_their_nguid_eui_and_controller_serial() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        let serial: &[u8] = b"8f0a1b2c3d4e        \n";
        disk(
            root,
            "nvme0n2",
            &[
                ("nguid", b"e6d86642-50d8-47bd-916e-af1b00112233\n" as &[u8]),
                ("eui", b"00 25 38 b5 71 b0 1a 2b\n"),
                ("wwid", b"eui.e6d8664250d847bd916eaf1b00112233\n"),
                ("nsid", b"2\n"),
            ],
            "pci0000:00/0000:00:04.0/nvme/nvme0",
            &[("serial", serial)],
        );
        // Only an EUI-64 (the kernel hides a zero NGUID).
        disk(
            root,
            "nvme1n1",
            &[
                ("eui", b"00 25 38 b5 71 b0 1a 2b\n" as &[u8]),
                ("nsid", b"1\n"),
            ],
            "pci0000:00/0000:00:05.0/nvme/nvme1",
            &[("serial", b"S2\n")],
        );
        // Neither, or all zero: the wwid, as before.
        disk(
            root,
            "nvme2n1",
            &[
                ("nguid", b"00000000-0000-0000-0000-000000000000\n" as &[u8]),
                ("wwid", b"nvme.1b36-3132-51454d55-00000001\n"),
                ("nsid", b"1\n"),
            ],
            "pci0000:00/0000:00:06.0/nvme/nvme2",
            &[],
        );
        let sysfs = Sysfs::at(root);
        let ids = super::ids(&sysfs, "nvme0n2");
        assert_eq!(ids.page83, "e6d8664250d847bd916eaf1b00112233");
        assert_eq!(ids.serial_number, "8f0a1b2c3d4e");
        assert_eq!(super::ids(&sysfs, "nvme1n1").page83, "002538b571b01a2b");
        assert_eq!(super::ids(&sysfs, "nvme1n1").serial_number, "S2");
        let plain = super::ids(&sysfs, "nvme2n1");
        assert_eq!(plain.page83, "nvme.1b36-3132-51454d55-00000001");
        assert_eq!(plain.serial_number, "");
        // The location: the controller as adapter, the namespace as target.
        let loc = location(&sysfs, "nvme0n2").unwrap();
        assert_eq!(
            (
                loc.adapter.as_str(),
                loc.bus.as_str(),
                loc.target.as_str(),
                loc.lun_id.as_str()
            ),
            ("nvme0", "0", "2", "0")
        );
    }

    #[test]
    fn scsi_disks_keep_page_83_before_anything_else() {
        let t = tempfile::tempdir().unwrap();
        // A SCSI disk whose name is not nvme*: nguid/eui files are never read.
        let vpd83 = crate::storage::parse::fixtures::vpd_page83(&[(1, 0, 3, &[0x60, 0x0a][..])]);
        let vpd80 = crate::storage::parse::fixtures::vpd_page80(b"SER1");
        disk(
            t.path(),
            "sdb",
            &[("nguid", b"e6d86642-50d8-47bd-916e-af1b00112233\n" as &[u8])],
            "host2/target2:0:1/2:0:1:3",
            &[("vpd_pg83", &vpd83), ("vpd_pg80", &vpd80)],
        );
        let sysfs = Sysfs::at(t.path());
        let ids = super::ids(&sysfs, "sdb");
        assert_eq!(
            (ids.page83.as_str(), ids.serial_number.as_str()),
            ("600a", "SER1")
        );
        let loc = location(&sysfs, "sdb").unwrap();
        assert_eq!(
            (
                loc.adapter.as_str(),
                loc.target.as_str(),
                loc.lun_id.as_str()
            ),
            ("2", "1", "3")
        );
    }
}
