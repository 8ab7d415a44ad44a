//! The kernel's partitions of a disk made to match its partition table.

use super::devices::{self, DiskTable};
use super::sysfs::{BlockDisk, Sysfs};
use super::{from_io, no_disk, sys};
use crate::storage::parse::gpt;
use crate::{Error, Result};
use std::os::fd::OwnedFd;
use std::path::Path;

/// [`LinuxStorage::sync_partitions`], with only what it needs (Rescan runs
/// it on a reader thread of its own).
pub(super) fn sync_partitions(
    sysfs: &Sysfs,
    dev_dir: &Path,
    d: &BlockDisk,
    fd: &OwnedFd,
) -> Result<BlockDisk> {
    {
        let shown = d.name.as_str();
        if !d.partscan && d.name.starts_with("loop") {
            // A loop device attached without partition scanning: turn it on
            // (as `losetup -P` would).
            sys::loop_enable_partscan(fd).map_err(|e| from_io("LOOP_SET_STATUS64", shown, e))?;
        }
        if d.partitions.is_empty() {
            match sys::reread_partitions(fd) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                    return Err(Error::FailedPrecondition(format!(
                        "disk {} ({shown}) does not support partitions",
                        d.number
                    )))
                }
                // In use: the kernel keeps its view; add what is missing below.
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {}
                Err(e) => return Err(from_io("BLKRRPART", shown, e)),
            }
        }
        let DiskTable {
            table,
            sector_size: ss,
            ..
        } = devices::table(d, fd)?;
        let ss = u64::from(ss);
        let wanted: Vec<(u32, u64, u64)> = match &table {
            gpt::Table::Gpt(g) => g
                .partitions
                .iter()
                .map(|p| (p.number, p.first_lba * ss, p.sectors() * ss))
                .collect(),
            gpt::Table::Mbr { partitions, .. } => partitions
                .iter()
                // Extended partitions are containers, not volumes.
                .filter(|p| !matches!(p.type_byte, 0x05 | 0x0f | 0x85))
                .map(|p| (u32::from(p.number), p.start_lba * ss, p.sectors * ss))
                .collect(),
            gpt::Table::Raw => Vec::new(),
        };
        let now = sysfs
            .disk(&d.name)
            .map_err(|e| from_io("read", shown, e))?
            .ok_or_else(|| no_disk(d.number))?;
        for (number, start, len) in wanted {
            if now.partitions.iter().any(|p| p.number == number) {
                continue;
            }
            tracing::info!(
                disk = shown,
                number,
                start,
                len,
                "registering partition with the kernel"
            );
            match sys::add_partition(fd, number, start, len) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {}
                Err(e) => return Err(from_io("BLKPG add partition", shown, e)),
            }
        }
        let now = sysfs
            .disk(&d.name)
            .map_err(|e| from_io("read", shown, e))?
            .ok_or_else(|| no_disk(d.number))?;
        for p in &now.partitions {
            devices::node(dev_dir, &p.name, p.major, p.minor)?;
        }
        Ok(now)
    }
}
