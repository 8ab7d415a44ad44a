//! What a disk or a volume holds, read through a handle of ours: before
//! PartitionDisk initialises a RAW disk and before FormatVolume, and for
//! IsVolumeFormatted and GetVolumeStats where Windows recognises no
//! filesystem (an ext4, LVM or ZFS partition is RAW to Windows). The
//! decisions are the platform-neutral ones of [`crate::storage::content`].

use windows_sys::Win32::System::Ioctl::IOCTL_DISK_GET_LENGTH_INFO;

use super::disk::{self, bad_answer, Pinned};
use super::errors::{self, win32};
use super::win32::{self as w, Handle, GENERIC_READ};
use crate::storage::parse::content::{self as identify, Regions, Scanned};
use crate::storage::parse::{extents, gpt};
use crate::storage::VolumeId;
use crate::Result;

fn read(h: &Handle, size: u64, subject: &str) -> Result<Regions> {
    Regions::read(size, |off, buf| w::read_at(h, off, buf))
        .map_err(|e| win32("ReadFile", subject, e))
}

/// The disk held as `pin`, read through its handle, and whether it has a
/// partition table Windows will keep (then PartitionDisk initialises
/// nothing). A table that does not parse counts as none: the check then
/// finds what is there.
pub fn of_disk(pin: &Pinned) -> Result<(Regions, bool)> {
    let subject = format!("disk {}", pin.identity.number);
    let h = pin.handle();
    let (size, ss) = disk::geometry(h, &subject)?;
    let c = read(h, size, &subject)?;
    let table = has(&c.head, ss, size);
    Ok((c, table))
}

/// Whether the disk held as `pin` has a partition table now (its first
/// sectors read again through its handle).
pub fn has_table(pin: &Pinned) -> Result<bool> {
    let subject = format!("disk {}", pin.identity.number);
    let h = pin.handle();
    let (size, ss) = disk::geometry(h, &subject)?;
    let mut head = vec![0u8; gpt::head_len(ss)];
    w::read_at(h, 0, &mut head).map_err(|e| win32("ReadFile", &subject, e))?;
    Ok(has(&head, ss, size))
}

fn has(head: &[u8], ss: u32, size: u64) -> bool {
    matches!(
        gpt::parse_table(head, ss, size / u64::from(ss)),
        Ok(gpt::Table::Gpt(_) | gpt::Table::Mbr { .. })
    )
}

/// Volume `v` (its partition's bytes, through the volume device).
pub fn of_volume(v: &VolumeId) -> Result<Regions> {
    let (h, size) = open_volume(v)?;
    read(&h, size, v.as_str())
}

/// Volume `v` as FormatVolume checks it: its regions and, when nothing is
/// identified, its zero-check spans (the same as on Linux).
pub fn scan_volume(v: &VolumeId) -> Result<Scanned> {
    let (h, size) = open_volume(v)?;
    Scanned::read(size, |off, buf| w::read_at(&h, off, buf))
        .map_err(|e| win32("ReadFile", v.as_str(), e))
}

/// Whether anything is identified on volume `v`: its first bytes first (a
/// formatted volume costs only those), then the whole regions.
pub fn volume_holds_anything(v: &VolumeId) -> Result<bool> {
    let (h, size) = open_volume(v)?;
    if identify::quick_found(size, |off, buf| w::read_at(&h, off, buf))
        .map_err(|e| win32("ReadFile", v.as_str(), e))?
    {
        return Ok(true);
    }
    Ok(!read(&h, size, v.as_str())?.found.is_empty())
}

/// The volume device of `v`, open for reading, and its size.
fn open_volume(v: &VolumeId) -> Result<(Handle, u64)> {
    let h = w::open_device(v.device_path(), GENERIC_READ).map_err(|e| {
        errors::win32_or_missing("CreateFileW", v.as_str(), e, &super::volume::no_volume(v))
    })?;
    let out = w::ioctl::<()>(&h, IOCTL_DISK_GET_LENGTH_INFO, None, 8)
        .map_err(|e| win32("IOCTL_DISK_GET_LENGTH_INFO", v.as_str(), e))?;
    let size = extents::parse_length_info(&out)
        .map_err(|e| bad_answer("IOCTL_DISK_GET_LENGTH_INFO", v.as_str(), e))?
        as u64;
    Ok((h, size))
}
