//! Volume operations over the Win32 volume-management API and I/O controls
//! on `\\?\Volume{GUID}` (no WMI).
//!
//! Trailing backslashes: `GetVolumeInformationW`, `GetDiskFreeSpaceExW`
//! and the volume argument of `SetVolumeMountPointW` take the id with its
//! `\` ([`VolumeId::as_str`]); `CreateFileW` takes the device path without
//! it ([`VolumeId::device_path`]); mount-point arguments end with `\`.

use windows_sys::Win32::Storage::FileSystem::IOCTL_VOLUME_GET_VOLUME_DISK_EXTENTS;

use super::disk::{self, bad_answer};
use super::errors::{self, win32};
use super::win32::{self as w, Handle, GENERIC_READ, GENERIC_WRITE};
use crate::storage::parse::extents;
use crate::storage::{VolumeId, VolumeStats};
use crate::{Error, Result};

/// `FILE_DEVICE_DISK`: the device type of a volume on a disk (not a CD-ROM,
/// whose device numbers are counted separately and would collide).
const FILE_DEVICE_DISK: u32 = 7;
/// ERROR_UNRECOGNIZED_VOLUME: no filesystem on the volume.
const ERROR_UNRECOGNIZED_VOLUME: u32 = 1005;
pub(super) fn no_volume(v: &VolumeId) -> String {
    format!("volume {v} does not exist")
}

/// Opens the volume device; an unknown volume is [`Error::NotFound`].
fn open_volume(v: &VolumeId, access: u32) -> Result<Handle> {
    w::open_device(v.device_path(), access)
        .map_err(|e| errors::win32_or_missing("CreateFileW", v.as_str(), e, &no_volume(v)))
}

/// Every volume of the host.
pub fn all_volumes() -> Result<Vec<VolumeId>> {
    let mut out = Vec::new();
    let iter = w::Volumes::new().map_err(|e| win32("FindFirstVolumeW", "volumes", e))?;
    for name in iter {
        let name = name.map_err(|e| win32("FindNextVolumeW", "volumes", e))?;
        match VolumeId::parse(&name) {
            Ok(v) => out.push(v),
            Err(_) => tracing::debug!("skipping volume with an unexpected name {name:?}"),
        }
    }
    Ok(out)
}

/// Where a volume lives: from `IOCTL_STORAGE_GET_DEVICE_NUMBER` (one
/// partition of one disk), else from its disk extents (spanned volumes).
pub enum Placement {
    Partition {
        disk: u32,
        partition: u32,
    },
    Extents(Vec<u32>),
    /// Not on a disk (CD-ROM, virtual), or gone.
    Elsewhere,
}

fn extents_of(h: &Handle, v: &VolumeId) -> Result<Vec<extents::DiskExtent>> {
    let out = w::ioctl::<()>(h, IOCTL_VOLUME_GET_VOLUME_DISK_EXTENTS, None, 256)
        .map_err(|e| win32("IOCTL_VOLUME_GET_VOLUME_DISK_EXTENTS", v.as_str(), e))?;
    extents::parse_volume_disk_extents(&out)
        .map_err(|e| bad_answer("IOCTL_VOLUME_GET_VOLUME_DISK_EXTENTS", v.as_str(), e))
}

/// Where volume `v` lives.
pub fn placement(v: &VolumeId) -> Placement {
    let Ok(h) = w::open_device(v.device_path(), 0) else {
        return Placement::Elsewhere;
    };
    match disk::device_number(&h, v.as_str()) {
        Ok(n) if n.device_type == FILE_DEVICE_DISK => Placement::Partition {
            disk: n.device_number,
            partition: n.partition_number,
        },
        Ok(_) => Placement::Elsewhere,
        Err(_) => match extents_of(&h, v) {
            Ok(ext) if !ext.is_empty() => {
                Placement::Extents(ext.iter().map(|e| e.disk_number).collect())
            }
            _ => Placement::Elsewhere,
        },
    }
}

/// Every disk a volume lies on (none when it is not on a disk, or gone).
pub fn volume_disks(v: &VolumeId) -> Result<Vec<u32>> {
    Ok(match placement(v) {
        Placement::Partition { disk, .. } => vec![disk],
        Placement::Extents(disks) => disks,
        Placement::Elsewhere => Vec::new(),
    })
}

/// The disk of a volume: the first extent's disk (`Extents[0]`, as
/// upstream; a volume spanning several disks is reported by its first),
/// or, when the volume reports no extents (wine), its device number.
pub fn volume_disk(v: &VolumeId) -> Result<u32> {
    let h = open_volume(v, 0)?;
    let ext = extents_of(&h, v)?;
    if let Some(first) = ext.first() {
        if ext.len() > 1 {
            tracing::debug!(
                "volume {v} spans {} extents; reporting the disk of the first",
                ext.len()
            );
        }
        return Ok(first.disk_number);
    }
    let n = disk::device_number(&h, v.as_str())?;
    if n.device_type != FILE_DEVICE_DISK {
        return Err(Error::FailedPrecondition(format!(
            "volume {v} is not on a disk (device type {})",
            n.device_type
        )));
    }
    Ok(n.device_number)
}

/// Whether the volume carries a filesystem Windows recognises.
pub fn is_formatted(v: &VolumeId) -> Result<bool> {
    match w::volume_information(v.as_str()) {
        Ok(info) => Ok(!info.filesystem.is_empty() && !info.filesystem.eq_ignore_ascii_case("RAW")),
        Err(e) if w::code(&e) == Some(ERROR_UNRECOGNIZED_VOLUME) => Ok(false),
        Err(e) => Err(errors::win32_or_missing(
            "GetVolumeInformationW",
            v.as_str(),
            e,
            &no_volume(v),
        )),
    }
}

/// Total and used bytes of the volume's filesystem (`GetDiskFreeSpaceExW`;
/// used = total − free bytes of the whole filesystem, not the caller's
/// quota).
pub fn volume_stats(v: &VolumeId) -> Result<VolumeStats> {
    let (total, free) = w::disk_free_space(v.as_str()).map_err(|e| {
        errors::win32_or_missing("GetDiskFreeSpaceExW", v.as_str(), e, &no_volume(v))
    })?;
    Ok(VolumeStats {
        total_bytes: total,
        used_bytes: total.saturating_sub(free),
    })
}

/// Flushes the volume's write cache (`FlushFileBuffers` on the volume
/// device opened for read and write; needs administrator rights).
pub fn flush(v: &VolumeId) -> Result<()> {
    let h = open_volume(v, GENERIC_READ | GENERIC_WRITE)?;
    w::flush(&h).map_err(|e| win32("FlushFileBuffers", v.as_str(), e))
}
