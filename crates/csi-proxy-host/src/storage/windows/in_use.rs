//! What keeps a disk's volumes in use on Windows, read for
//! [`crate::storage::disk_use`]: SetDiskState(offline) and the iSCSI
//! backend's DisconnectTarget ask the same question here.
//!
//! A volume is in use when it has an access path (a drive letter or a
//! mount folder, inside the roots or not), or when Windows reports open
//! handles on it: `FSCTL_LOCK_VOLUME` succeeds only while no one else has
//! the volume (or a file on it) open. The lock is kept (the handle held,
//! [`Claim`]) until the caller's act returns, so the answer stays true
//! until then; a volume whose lock is not supported is not proven unused.
//!
//! Not seen here (no volume of the disk shows them): a raw handle on
//! `\\.\PhysicalDriveN` (a VM pass-through, a pod given the device), and
//! a Storage Spaces pool member (its volumes' extents name the virtual
//! disk). See `docs/windows-storage.md`.

use windows_sys::Win32::System::Ioctl::FSCTL_LOCK_VOLUME;

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

/// The volumes of a disk locked by [`claim`]: each `FSCTL_LOCK_VOLUME`
/// stays in force while its handle is open, so no one opens the volume
/// (or a file on it) between the check and the act (the offline, the
/// iSCSI logout). Dropping it closes the handles, which releases the locks.
#[derive(Default)]
pub struct Claim {
    locked: Vec<w::Handle>,
}

impl Claim {
    /// Whether no volume is locked.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.locked.is_empty()
    }
}

/// Every use of `volumes`: each access path, and for a volume without one
/// whether it is held open (or cannot be locked: not proven unused). A
/// volume gone meanwhile has no use. The volumes without a use are left
/// locked in the returned [`Claim`]: hold it until the act returns.
pub fn claim(volumes: &[VolumeId]) -> Result<(Vec<(VolumeId, VolumeUse)>, Claim)> {
    let mut out = Vec::new();
    let mut claim = Claim::default();
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
            continue;
        }
        match lock(v)? {
            Locked::Gone => {}
            Locked::Held(h) => claim.locked.push(h),
            Locked::Open => out.push((v.clone(), VolumeUse::Open)),
            Locked::Unknown(why) => out.push((v.clone(), VolumeUse::Unknown(why))),
        }
    }
    Ok((out, claim))
}

/// What locking one volume gave.
enum Locked {
    /// The volume is gone: no use.
    Gone,
    /// Locked: the lock lasts as long as this handle.
    Held(w::Handle),
    /// Open elsewhere.
    Open,
    /// The lock is not supported: whether it is open is not known.
    Unknown(String),
}

/// Locks volume `v` (`FSCTL_LOCK_VOLUME` on a read-write handle): it
/// succeeds only while no one else has the volume or a file on it open.
fn lock(v: &VolumeId) -> Result<Locked> {
    let h = match w::open_device(v.device_path(), GENERIC_READ | GENERIC_WRITE) {
        Ok(h) => h,
        Err(e) if matches!(w::code(&e), Some(2 | 3)) => return Ok(Locked::Gone),
        // Opened for writing elsewhere without read/write sharing.
        Err(e) if w::code(&e) == Some(32) => return Ok(Locked::Open),
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
        Ok(()) => Ok(Locked::Held(h)),
        // ERROR_ACCESS_DENIED, ERROR_SHARING_VIOLATION: open elsewhere.
        Err(e) if matches!(w::code(&e), Some(5 | 32)) => Ok(Locked::Open),
        // ERROR_INVALID_FUNCTION, ERROR_NOT_SUPPORTED.
        Err(e) if matches!(w::code(&e), Some(1 | 50)) => Ok(Locked::Unknown(format!(
            "FSCTL_LOCK_VOLUME is not supported ({e})"
        ))),
        Err(e) => Err(win32("FSCTL_LOCK_VOLUME", v.as_str(), e)),
    }
}
