//! Volume operations over the Win32 volume-management API and I/O controls
//! on `\\?\Volume{GUID}` (no WMI).
//!
//! Trailing backslashes: `GetVolumeInformationW`, `GetDiskFreeSpaceExW`
//! and the volume argument of `SetVolumeMountPointW` take the id with its
//! `\` ([`VolumeId::as_str`]); `CreateFileW` takes the device path without
//! it ([`VolumeId::device_path`]); mount-point arguments end with `\`.

use std::io;
use std::sync::Mutex;

use windows_sys::Win32::Storage::FileSystem::IOCTL_VOLUME_GET_VOLUME_DISK_EXTENTS;

use super::disk::{self, bad_answer};
use super::errors::{self, win32};
use super::win32::{self as w, Handle, GENERIC_READ, GENERIC_WRITE};
use crate::path::{Link, LinkReader, OsLinks, ResolvedPath};
use crate::storage::parse::{extents, multi_sz};
use crate::storage::{VolumeId, VolumeStats};
use crate::{Error, Result};

/// `FILE_DEVICE_DISK`: the device type of a volume on a disk (not a CD-ROM,
/// whose device numbers are counted separately and would collide).
const FILE_DEVICE_DISK: u32 = 7;
/// ERROR_UNRECOGNIZED_VOLUME: no filesystem on the volume.
const ERROR_UNRECOGNIZED_VOLUME: u32 = 1005;
/// ERROR_DIR_NOT_EMPTY.
const ERROR_DIR_NOT_EMPTY: u32 = 145;
/// Steps [`closest_volume`] takes up a path at most.
const MAX_WALK: usize = 256;

fn no_volume(v: &VolumeId) -> String {
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

/// The directories (not drive letters) where the volume is mounted.
pub fn directory_mounts(v: &VolumeId) -> Result<Vec<String>> {
    let raw = w::volume_path_names_raw(v.as_str()).map_err(|e| {
        errors::win32_or_missing(
            "GetVolumePathNamesForVolumeNameW",
            v.as_str(),
            e,
            &no_volume(v),
        )
    })?;
    let names = multi_sz::parse_multi_sz(&raw)
        .map_err(|e| bad_answer("GetVolumePathNamesForVolumeNameW", v.as_str(), e))?;
    Ok(names.into_iter().filter(|n| n.len() > 3).collect())
}

/// `dir` with one trailing backslash: the form mount-point calls want.
fn mount_point(dir: &str) -> String {
    let mut s = dir.trim_end_matches('\\').to_string();
    s.push('\\');
    s
}

/// The volume mounted at directory `dir`, if it is a volume mount point.
fn mounted_volume(dir: &str) -> Result<Option<VolumeId>> {
    match w::volume_name_for_mount_point(&mount_point(dir)) {
        Ok(name) => VolumeId::parse(&name).map(Some).map_err(|_| {
            Error::Internal(format!(
                "GetVolumeNameForVolumeMountPointW {dir:?}: unexpected volume name {name:?}"
            ))
        }),
        // Not a mount point (or not a directory) answers with an error.
        Err(_) => Ok(None),
    }
}

fn link_state(path: &str) -> Result<Link> {
    OsLinks
        .read_link(path)
        .map_err(|e| win32("reading the reparse point of", path, e))
}

/// Mounts and unmounts are serialised: each is a check followed by a change.
#[derive(Default)]
pub struct Mounts {
    lock: Mutex<()>,
}

impl Mounts {
    fn guard(&self) -> std::sync::MutexGuard<'_, ()> {
        self.lock.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Mounts `v` at directory `target` (`SetVolumeMountPointW`). A missing
    /// target directory is created (with its missing parents, inside the
    /// allowed roots the path was checked against); an existing one must
    /// be an empty plain directory. Mounting the same volume again is a
    /// no-op; a target holding another volume is [`Error::AlreadyExists`].
    pub fn mount(&self, v: &VolumeId, target: &ResolvedPath) -> Result<()> {
        let _g = self.guard();
        let t = target.as_str();
        match link_state(t)? {
            Link::NotFound => std::fs::create_dir_all(t)
                .map_err(|e| Error::io("create mount target directory", t, e))?,
            Link::MountPoint => {
                return match mounted_volume(t)? {
                    Some(m) if &m == v => Ok(()),
                    Some(m) => Err(Error::AlreadyExists(format!(
                        "target {t:?} is the mount point of another volume ({m})"
                    ))),
                    None => Err(Error::FailedPrecondition(format!(
                        "target {t:?} is a mount point whose volume cannot be read"
                    ))),
                };
            }
            Link::Symlink(_) => {
                return Err(Error::FailedPrecondition(format!(
                    "target {t:?} is a symbolic link or junction; a volume is mounted on an empty directory"
                )))
            }
            Link::NotALink => {
                let md = std::fs::metadata(t).map_err(|e| Error::io("stat", t, e))?;
                if !md.is_dir() {
                    return Err(Error::FailedPrecondition(format!(
                        "target {t:?} is a file; a volume is mounted on an empty directory"
                    )));
                }
            }
        }
        let mp = mount_point(t);
        match w::set_volume_mount_point(&mp, v.as_str()) {
            Ok(()) => match mounted_volume(t)? {
                // Never trust the BOOL alone.
                Some(m) if &m == v => Ok(()),
                other => Err(Error::Internal(format!(
                    "SetVolumeMountPointW {mp:?} {v} reported success, but the target holds {other:?}"
                ))),
            },
            Err(e) if w::code(&e) == Some(ERROR_DIR_NOT_EMPTY) => match mounted_volume(t)? {
                Some(m) if &m == v => Ok(()),
                Some(m) => Err(Error::AlreadyExists(format!(
                    "target {t:?} is the mount point of another volume ({m})"
                ))),
                None => Err(Error::FailedPrecondition(format!(
                    "target directory {t:?} is not empty; a volume is mounted on an empty directory"
                ))),
            },
            Err(e) => Err(errors::win32_or_missing(
                "SetVolumeMountPointW",
                &format!("{mp:?} {v}"),
                e,
                &no_volume(v),
            )),
        }
    }

    /// Flushes `v`, then removes its mount at `target`
    /// (`DeleteVolumeMountPointW`; the directory stays). A target that is
    /// not a mount point (or does not exist) is already unmounted: Ok. A
    /// target holding another volume is [`Error::FailedPrecondition`].
    pub fn unmount(&self, v: &VolumeId, target: &ResolvedPath) -> Result<()> {
        let _g = self.guard();
        let t = target.as_str();
        match link_state(t)? {
            Link::MountPoint => {}
            Link::NotFound | Link::NotALink | Link::Symlink(_) => return Ok(()),
        }
        match mounted_volume(t)? {
            Some(m) if &m == v => {}
            Some(m) => {
                return Err(Error::FailedPrecondition(format!(
                    "target {t:?} is the mount point of volume {m}, not of {v}"
                )))
            }
            None => return Ok(()),
        }
        match flush(v) {
            Ok(()) => {}
            // A device without a flush still unmounts.
            Err(Error::Unimplemented(m)) => tracing::warn!("unmount of {v}: {m}"),
            Err(e) => return Err(e),
        }
        let mp = mount_point(t);
        w::delete_volume_mount_point(&mp)
            .map_err(|e| win32("DeleteVolumeMountPointW", &format!("{mp:?}"), e))
    }
}

/// The volume mounted at `target`, which must be a volume mount point (a
/// reparse point with tag `IO_REPARSE_TAG_MOUNT_POINT` to a volume);
/// anything else is [`Error::NotFound`].
pub fn volume_at(target: &ResolvedPath) -> Result<VolumeId> {
    let t = target.as_str();
    match link_state(t)? {
        Link::MountPoint => mounted_volume(t)?.ok_or_else(|| {
            Error::NotFound(format!("{t:?} is a mount point without a readable volume"))
        }),
        Link::NotFound => Err(Error::NotFound(format!("{t:?} does not exist"))),
        _ => Err(Error::NotFound(format!(
            "{t:?} is not a volume mount point"
        ))),
    }
}

/// The parent directory of an absolute Windows path (`None` at a drive
/// root), by std's path rules.
fn parent(p: &str) -> Option<String> {
    std::path::Path::new(p)
        .parent()
        .map(|d| d.to_string_lossy().into_owned())
}

/// The volume whose filesystem holds `target` (already resolved, links
/// followed): `GetVolumePathNameW` gives the mount point (a drive root or a
/// mount-point directory) and `GetVolumeNameForVolumeMountPointW` its
/// volume; when that fails (the path does not exist, or the mount point is
/// not a volume's), the walk goes on from the parent, at most 256 steps.
pub fn closest_volume(target: &ResolvedPath) -> Result<VolumeId> {
    let mut path = target.as_str().to_string();
    let mut last: Option<io::Error> = None;
    for _ in 0..MAX_WALK {
        match w::volume_path_name(&path) {
            Ok(mp) => {
                if let Some(v) = mounted_volume(&mp)? {
                    return Ok(v);
                }
                // Continue above this mount point.
                match parent(&mp) {
                    Some(p) => path = p,
                    None => break,
                }
            }
            Err(e) => {
                last = Some(e);
                match parent(&path) {
                    Some(p) => path = p,
                    None => break,
                }
            }
        }
    }
    let why = last.map(|e| format!(": {e}")).unwrap_or_default();
    Err(Error::NotFound(format!(
        "no volume found for {:?}{why}",
        target.as_str()
    )))
}
