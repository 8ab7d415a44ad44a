//! What keeps a disk's volumes in use on Windows, read for
//! [`crate::storage::disk_use`]: SetDiskState(offline) and the iSCSI
//! backend's DisconnectTarget ask the same question here.
//!
//! A volume is in use when it has an access path (a drive letter or a
//! mount folder, inside the roots or not), or when Windows reports open
//! handles on it: `FSCTL_LOCK_VOLUME` succeeds only while no one else has
//! the volume (or a file on it) open, and the lock is released at once.

use windows_sys::Win32::System::Ioctl::{FSCTL_LOCK_VOLUME, FSCTL_UNLOCK_VOLUME};

use super::errors::{self, win32};
use super::mounts;
use super::volume::{self, Placement};
use super::win32::{self as w, GENERIC_READ, GENERIC_WRITE};
use crate::storage::disk_use::VolumeUse;
use crate::storage::VolumeId;
use crate::Result;

/// The volumes that live on disk `disk` (wholly or in part), found by
/// asking every volume of the host where it lives (no inventory: the iSCSI
/// backend asks too).
pub fn volumes_on(disk: u32) -> Result<Vec<VolumeId>> {
    Ok(volume::all_volumes()?
        .into_iter()
        .filter(|v| match volume::placement(v) {
            Placement::Partition { disk: d, .. } => d == disk,
            Placement::Extents(ds) => ds.contains(&disk),
            Placement::Elsewhere => false,
        })
        .collect())
}

/// Every use of `volumes`: each access path, and for a volume without one
/// whether it is held open. A volume gone meanwhile has no use.
pub fn uses_of(volumes: &[VolumeId]) -> Result<Vec<(VolumeId, VolumeUse)>> {
    let mut out = Vec::new();
    for v in volumes {
        let paths = match mounts::access_paths(v) {
            Ok(p) => p,
            Err(crate::Error::NotFound(_)) => continue,
            Err(e) => return Err(e),
        };
        if !paths.is_empty() {
            out.extend(
                paths
                    .into_iter()
                    .map(|p| (v.clone(), VolumeUse::Mounted(p))),
            );
        } else if held_open(v)? {
            out.push((v.clone(), VolumeUse::Open));
        }
    }
    Ok(out)
}

/// Whether Windows refuses to lock volume `v` because it is open
/// elsewhere. Where the lock is not supported (wine) nothing is known and
/// the answer is no; a volume gone meanwhile is not open.
fn held_open(v: &VolumeId) -> Result<bool> {
    let h = match w::open_device(v.device_path(), GENERIC_READ | GENERIC_WRITE) {
        Ok(h) => h,
        Err(e) if matches!(w::code(&e), Some(2 | 3)) => return Ok(false),
        // Opened for writing elsewhere without read/write sharing.
        Err(e) if w::code(&e) == Some(32) => return Ok(true),
        Err(e) => {
            return Err(errors::win32_or_missing(
                "CreateFileW",
                v.as_str(),
                e,
                &volume::no_volume(v),
            ))
        }
    };
    match w::ioctl_no_output::<()>(&h, FSCTL_LOCK_VOLUME, None) {
        Ok(()) => {
            // Released now (closing the handle would release it too).
            let _ = w::ioctl_no_output::<()>(&h, FSCTL_UNLOCK_VOLUME, None);
            Ok(false)
        }
        // ERROR_ACCESS_DENIED, ERROR_SHARING_VIOLATION: open elsewhere.
        Err(e) if matches!(w::code(&e), Some(5 | 32)) => Ok(true),
        // ERROR_INVALID_FUNCTION, ERROR_NOT_SUPPORTED.
        Err(e) if matches!(w::code(&e), Some(1 | 50)) => {
            tracing::debug!(
                "volume {v}: FSCTL_LOCK_VOLUME not supported ({e}); open handles unknown"
            );
            Ok(false)
        }
        Err(e) => Err(win32("FSCTL_LOCK_VOLUME", v.as_str(), e)),
    }
}
