//! Rescan on Linux: the SCSI hosts and NVMe controllers asked to scan, then
//! every disk refreshed (a loop device's capacity read again and its
//! partitions synced; a SCSI disk's `device/rescan`), each while its lock
//! is held. Disks that another operation holds come last, so a slow change
//! on one disk delays only that disk's refresh.

use super::sys::{self, Access};
use super::sysfs::BlockDisk;
use super::{from_io, LinuxStorage};
use crate::{Error, Result};
use std::io;

impl LinuxStorage {
    pub(super) fn rescan_all(&self) -> Result<()> {
        for entry in self.sysfs.class_entries("scsi_host") {
            if let Err(e) = std::fs::write(entry.join("scan"), "- - -") {
                tracing::warn!(host = %entry.display(), error = %e, "SCSI host scan failed");
            }
        }
        for entry in self.sysfs.class_entries("nvme") {
            let _ = std::fs::write(entry.join("rescan_controller"), "1");
        }
        let disks = self
            .sysfs
            .disks()
            .map_err(|e| Error::io("read", "/sys/block", e))?;
        let mut busy = Vec::new();
        for d in disks {
            match self.try_lock_dev((d.major, d.minor)) {
                Some(_g) => self.rescan_disk(&d),
                None => busy.push(d),
            }
        }
        for d in busy {
            let _g = self.lock_dev((d.major, d.minor));
            self.rescan_disk(&d);
        }
        self.inventory.invalidate();
        Ok(())
    }

    /// Refreshes one disk (held by the caller); a failure is logged.
    fn rescan_disk(&self, d: &BlockDisk) {
        let res = if d.name.starts_with("loop") {
            self.open_disk(d, Access::Read).and_then(|(p, fd)| {
                sys::loop_set_capacity(&fd)
                    .map_err(|e| from_io("LOOP_SET_CAPACITY", &p.display().to_string(), e))?;
                if d.partscan {
                    self.sync_partitions(d, &fd)?;
                }
                Ok(())
            })
        } else {
            let rescan = self.sysfs.disk_dir(&d.name).join("device/rescan");
            match std::fs::write(&rescan, "1") {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    Err(Error::io("write", rescan.display().to_string(), e))
                }
                _ => Ok(()),
            }
        };
        if let Err(e) = res {
            tracing::warn!(disk = d.name, error = %e, "rescan of disk failed");
        }
    }
}
