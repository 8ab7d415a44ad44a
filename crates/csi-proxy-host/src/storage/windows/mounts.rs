//! Volume mount points on Windows, through the confined filesystem, and
//! the rule that keeps host volumes out of the roots.
//!
//! The target directory is reached beneath its root with every directory
//! above it held open without delete sharing (see `confined::windows`), so
//! the path handed to `SetVolumeMountPointW`/`DeleteVolumeMountPointW`
//! names that very directory; the effect is then checked through the
//! directory's own handle, and a mount that landed anywhere else is undone.
//!
//! A volume the host uses outside the roots (a drive letter such as `C:`,
//! or a mount folder elsewhere) is never mounted inside them, formatted,
//! or taken offline with its disk; neither is the disk of the Windows
//! directory.

use std::io;
use std::sync::Mutex;

use super::errors::{self, win32};
use super::volume::{self, no_volume};
use super::win32 as w;
use crate::confined::{Confined, Located};
use crate::error::quote;
use crate::path::PathPolicy;
use crate::storage::parse::multi_sz;
use crate::storage::{At, NotMounted, VolumeId};
use crate::{Error, Result};

/// ERROR_DIR_NOT_EMPTY.
const ERROR_DIR_NOT_EMPTY: u32 = 145;
/// Steps [`closest_volume`] takes up a path at most.
const MAX_WALK: usize = 256;

/// Every path where a volume is reachable: drive roots (`E:\`) and mount
/// folders (`C:\dir\`).
pub fn access_paths(v: &VolumeId) -> Result<Vec<String>> {
    let raw = w::volume_path_names_raw(v.as_str()).map_err(|e| {
        errors::win32_or_missing(
            "GetVolumePathNamesForVolumeNameW",
            v.as_str(),
            e,
            &no_volume(v),
        )
    })?;
    multi_sz::parse_multi_sz(&raw)
        .map_err(|e| super::disk::bad_answer("GetVolumePathNamesForVolumeNameW", v.as_str(), e))
}

/// The access paths that are not strictly below an allowed root (`roots`
/// absent: all of them).
pub fn outside(paths: &[String], roots: Option<&PathPolicy>) -> Vec<String> {
    paths
        .iter()
        .filter(|p| {
            let trimmed = if p.len() > 3 {
                p.trim_end_matches('\\')
            } else {
                p.as_str()
            };
            match roots.map(|r| r.check(trimmed)) {
                Some(Ok(c)) => c.is_root(),
                _ => true,
            }
        })
        .cloned()
        .collect()
}

/// Refuses `what` for a volume reachable outside the roots.
pub fn refuse_host_volume(v: &VolumeId, roots: Option<&PathPolicy>, what: &str) -> Result<()> {
    let out = outside(&access_paths(v)?, roots);
    if out.is_empty() {
        return Ok(());
    }
    Err(Error::FailedPrecondition(format!(
        "cannot {what}: volume {v} is in use by the host outside the allowed roots (reachable at {}); \
         remove that drive letter or mount folder first (e.g. mountvol <path> /D)",
        out.join(", ")
    )))
}

/// The disks that hold the volume of the Windows directory.
pub fn system_disks() -> Vec<u32> {
    let Some(windir) = w::windows_directory() else {
        return Vec::new();
    };
    let Ok(mp) = w::volume_path_name(&windir) else {
        return Vec::new();
    };
    let Ok(name) = w::volume_name_for_mount_point(&mp) else {
        return Vec::new();
    };
    VolumeId::parse(&name)
        .ok()
        .and_then(|v| volume::volume_disks(&v).ok())
        .unwrap_or_default()
}

/// Refuses `what` on a disk that holds the Windows directory or one of
/// `volumes` (the disk's) that the host uses outside the roots.
pub fn refuse_host_disk(
    disk: u32,
    volumes: &[VolumeId],
    roots: Option<&PathPolicy>,
    what: &str,
) -> Result<()> {
    if system_disks().contains(&disk) {
        return Err(Error::FailedPrecondition(format!(
            "cannot {what}: disk {disk} holds the Windows system volume"
        )));
    }
    for v in volumes {
        refuse_host_volume(v, roots, what)?;
    }
    Ok(())
}

/// `dir` with one trailing backslash: the form mount-point calls want.
fn mount_point(dir: &str) -> String {
    let mut s = dir.trim_end_matches('\\').to_string();
    s.push('\\');
    s
}

fn parse_volume(api: &str, name: String) -> Result<VolumeId> {
    VolumeId::parse(&name)
        .map_err(|_| Error::Internal(format!("{api}: unexpected volume name {name:?}")))
}

/// Mounts and unmounts of one target directory are serialised: each is a
/// check followed by a change. The hold is per directory (its file id, a
/// kernel identity no spelling of the path can alias) and is taken after
/// the walk to the target and, for an unmount, after the flush: no walk of
/// a plugin-writable tree and no device I/O on one volume waits for, or
/// holds up, a mount or unmount elsewhere. A call on the same volume is
/// serialised before this (`storage::ops`); a call on the same target
/// waits at most until its deadline.
#[derive(Default)]
pub struct Mounts {
    held: Mutex<std::collections::HashSet<(u64, u64)>>,
    freed: std::sync::Condvar,
}

/// One target directory held; released on drop.
struct Held<'a> {
    mounts: &'a Mounts,
    id: (u64, u64),
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let mut g = self.mounts.held.lock().unwrap_or_else(|p| p.into_inner());
        g.remove(&self.id);
        self.mounts.freed.notify_all();
    }
}

impl Mounts {
    fn hold(&self, dir: &crate::confined::Dir, target: &Located) -> Result<Held<'_>> {
        let id = dir
            .file_id()
            .map_err(|e| Error::io("read the file id of", target.path(), e))?;
        let mut g = self.held.lock().unwrap_or_else(|p| p.into_inner());
        while g.contains(&id) {
            let wait = match crate::deadline::current() {
                None => None,
                Some(d) => match d.checked_duration_since(std::time::Instant::now()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => {
                        return Err(Error::Aborted(format!(
                            "another mount or unmount of target {} is in progress; retry",
                            target.shown()
                        )))
                    }
                },
            };
            g = match wait {
                None => self.freed.wait(g).unwrap_or_else(|p| p.into_inner()),
                Some(left) => {
                    self.freed
                        .wait_timeout(g, left)
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
            };
        }
        g.insert(id);
        Ok(Held { mounts: self, id })
    }

    /// Mounts `v` at the directory `target` (created if missing; an existing
    /// one must be an empty plain directory). The same volume again is a
    /// no-op; another volume there is [`Error::AlreadyExists`].
    pub fn mount(&self, v: &VolumeId, fs: &Confined, target: &Located) -> Result<()> {
        refuse_host_volume(v, Some(fs.policy()), "mount it inside the allowed roots")?;
        let dir = fs.create_dir(target)?;
        let _held = self.hold(&dir, target)?;
        let t = target.shown();
        let here = |dir: &crate::confined::Dir| {
            dir.mounted_volume()
                .map_err(|e| Error::io("read the mount point", target.path(), e))?
                .map(|n| parse_volume("FSCTL_GET_REPARSE_POINT", n))
                .transpose()
        };
        if dir.is_mount_point() {
            return match here(&dir)? {
                Some(m) if &m == v => Ok(()),
                Some(m) => Err(Error::AlreadyExists(format!(
                    "target {t} is the mount point of another volume ({m})"
                ))),
                None => Err(Error::FailedPrecondition(format!(
                    "target {t} is a mount point whose volume cannot be read"
                ))),
            };
        }
        if !dir
            .is_empty()
            .map_err(|e| Error::io("list", target.path(), e))?
        {
            return Err(Error::FailedPrecondition(format!(
                "target directory {t} is not empty; a volume is mounted on an empty directory"
            )));
        }
        // Every directory above the target is held open: this path is the
        // one reached beneath the root.
        let mp = mount_point(
            &dir.final_path()
                .map_err(|e| Error::io("GetFinalPathNameByHandleW", target.path(), e))?,
        );
        let set = w::set_volume_mount_point(&mp, v.as_str());
        // Whatever the call said, the handle says what happened to our
        // directory.
        match (set, here(&dir)?) {
            (Ok(()), Some(m)) if &m == v => Ok(()),
            (Ok(()), other) => {
                // The mount went somewhere else (or nowhere): undo it there.
                let undo = w::delete_volume_mount_point(&mp);
                Err(Error::Internal(format!(
                    "SetVolumeMountPointW {} {v} reported success, but the target directory holds {other:?}; \
                     the mount point was removed again ({undo:?})",
                    quote(&mp)
                )))
            }
            (Err(e), _) if w::code(&e) == Some(ERROR_DIR_NOT_EMPTY) => {
                Err(Error::FailedPrecondition(format!(
                    "target directory {t} is not empty; a volume is mounted on an empty directory"
                )))
            }
            (Err(e), _) => Err(errors::win32_or_missing(
                "SetVolumeMountPointW",
                &format!("{} {v}", quote(&mp)),
                e,
                &no_volume(v),
            )),
        }
    }

    /// Flushes `v`, then removes its mount at `target` (the directory
    /// stays). A target that is not a mount point (or does not exist) is
    /// already unmounted: Ok. Another volume there is
    /// [`Error::FailedPrecondition`].
    pub fn unmount(&self, v: &VolumeId, fs: &Confined, target: &Located) -> Result<()> {
        let t = target.shown();
        let dir = match fs.open_dir(target) {
            Ok(d) => d,
            // Nothing there, a link or a file: no mount point to remove.
            Err(Error::NotFound(_)) | Err(Error::FailedPrecondition(_)) => return Ok(()),
            Err(e) => return Err(e),
        };
        if !dir.is_mount_point() {
            return Ok(());
        }
        let mounted = dir
            .mounted_volume()
            .map_err(|e| Error::io("read the mount point", target.path(), e))?;
        match mounted
            .map(|n| parse_volume("FSCTL_GET_REPARSE_POINT", n))
            .transpose()?
        {
            Some(m) if &m == v => {}
            Some(m) => {
                return Err(Error::FailedPrecondition(format!(
                    "target {t} is the mount point of volume {m}, not of {v}"
                )))
            }
            None => return Ok(()),
        }
        // Device I/O, outside any hold: a hung volume holds up only its own
        // unmount.
        match volume::flush(v) {
            Ok(()) => {}
            // A device without a flush still unmounts.
            Err(Error::Unimplemented(m)) => tracing::warn!("unmount of {v}: {m}"),
            Err(e) => return Err(e),
        }
        let _held = self.hold(&dir, target)?;
        // Checked again under the hold: still this volume's mount point.
        match dir
            .mounted_volume()
            .map_err(|e| Error::io("read the mount point", target.path(), e))?
            .map(|n| parse_volume("FSCTL_GET_REPARSE_POINT", n))
            .transpose()?
        {
            Some(m) if &m == v => {}
            Some(m) => {
                return Err(Error::FailedPrecondition(format!(
                    "target {t} is the mount point of volume {m}, not of {v}"
                )))
            }
            None => return Ok(()),
        }
        let mp = mount_point(
            &dir.final_path()
                .map_err(|e| Error::io("GetFinalPathNameByHandleW", target.path(), e))?,
        );
        w::delete_volume_mount_point(&mp)
            .map_err(|e| win32("DeleteVolumeMountPointW", &quote(&mp), e))?;
        match dir.mounted_volume() {
            Ok(None) => Ok(()),
            other => Err(Error::Internal(format!(
                "DeleteVolumeMountPointW {} reported success, but the target still holds {other:?}",
                quote(&mp)
            ))),
        }
    }
}

/// What is mounted at `target` ([`At`]): the volume of a volume mount
/// point; nothing, for a missing path, a directory that is no volume mount
/// point (no reparse point, or one that is no name surrogate), or a file
/// (Windows mounts volumes on empty directories only). A link (met here
/// only if swapped in after the hops were followed) and a mount point
/// whose volume cannot be read are errors, never "not mounted". An
/// allowed root is opened following reparse points: when it is a volume
/// mount point, its handle is that volume's root directory, and the answer
/// is that volume (as on Linux, where the root's own mount is read).
pub fn volume_at(fs: &Confined, target: &Located) -> Result<At> {
    let t = target.shown();
    let dir = match fs.open_dir(target) {
        Ok(d) => d,
        Err(e @ (Error::NotFound(_) | Error::FailedPrecondition(_))) => {
            return crate::storage::target::absent(fs, target, e)
        }
        Err(e) => return Err(e),
    };
    if target.is_root() {
        let on = dir
            .volume_path()
            .map_err(|e| Error::io("GetFinalPathNameByHandleW", target.path(), e))?;
        if let Some(v) = volume_root(&on) {
            return parse_volume("GetFinalPathNameByHandleW", v).map(At::Volume);
        }
    }
    if !dir.is_mount_point() {
        return Ok(At::NotMounted(NotMounted::PlainDirectory));
    }
    let name = dir
        .mounted_volume()
        .map_err(|e| Error::io("read the mount point", target.path(), e))?
        .ok_or_else(|| {
            Error::FailedPrecondition(format!(
                "{t} is a volume mount point whose volume could not be read (changed meanwhile?)"
            ))
        })?;
    parse_volume("FSCTL_GET_REPARSE_POINT", name).map(At::Volume)
}

/// `\\?\Volume{GUID}\` when `guid_path` (a handle's final path by
/// volume GUID) is a volume's root directory itself; `None` for a
/// directory below it.
fn volume_root(guid_path: &str) -> Option<String> {
    let rest = guid_path.strip_prefix(r"\\?\Volume{")?;
    let rest = rest.strip_suffix('\\').unwrap_or(rest);
    let guid = rest.strip_suffix('}')?;
    if guid.is_empty() || guid.contains(['\\', '{', '}']) {
        return None;
    }
    Some(format!(r"\\?\Volume{{{guid}}}\"))
}

/// The parent directory of an absolute Windows path (`None` at a drive
/// root).
fn parent(p: &str) -> Option<String> {
    std::path::Path::new(p)
        .parent()
        .map(|d| d.to_string_lossy().into_owned())
}

/// The volume whose filesystem holds `target`: the nearest existing
/// directory at or above it, reached beneath its root and held open; a
/// mount point there answers with its volume, otherwise the volume that
/// holds that directory (`GetVolumePathNameW`, then the volume mounted
/// there, walking up past mount points that are not volumes').
pub fn closest_volume(fs: &Confined, target: &Located) -> Result<VolumeId> {
    let dir = fs.open_nearest_dir(target)?;
    if dir.is_mount_point() {
        if let Ok(Some(n)) = dir.mounted_volume() {
            return parse_volume("FSCTL_GET_REPARSE_POINT", n);
        }
    }
    let mut path = dir
        .final_path()
        .map_err(|e| Error::io("GetFinalPathNameByHandleW", target.path(), e))?;
    let mut last: Option<io::Error> = None;
    for _ in 0..MAX_WALK {
        match w::volume_path_name(&path) {
            Ok(mp) => {
                if let Ok(name) = w::volume_name_for_mount_point(&mount_point(&mp)) {
                    return parse_volume("GetVolumeNameForVolumeMountPointW", name);
                }
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
        "no volume found for {}{why}",
        target.shown()
    )))
}

#[cfg(test)]
mod unit {
    use super::*;
    use crate::path::Flavor;

    #[test]
    fn a_volume_root_is_told_from_a_directory_on_it() {
        let g = "{0a1b2c3d-0000-1111-2222-333344445555}";
        let v = format!(r"\\?\Volume{g}\");
        assert_eq!(volume_root(&v).as_deref(), Some(v.as_str()));
        assert_eq!(volume_root(&v[..v.len() - 1]).as_deref(), Some(v.as_str()));
        assert_eq!(volume_root(&format!(r"{v}kubelet")), None);
        assert_eq!(volume_root(&format!(r"{v}kubelet\")), None);
        assert_eq!(volume_root(r"\\?\Volume{}\"), None);
        assert_eq!(volume_root(r"C:\var\lib\kubelet"), None);
        assert!(parse_volume("t", volume_root(&v).unwrap()).is_ok());
    }

    #[test]
    fn access_paths_outside_the_roots() {
        let roots = PathPolicy::new(Flavor::Windows, [r"C:\var\lib\kubelet"]).unwrap();
        let paths: Vec<String> = [
            r"C:\",
            r"E:\",
            r"C:\var\lib\kubelet\plugins\x\globalmount\",
            r"C:\var\lib\kubelet\",
            r"C:\mnt\data\",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            outside(&paths, Some(&roots)),
            vec![r"C:\", r"E:\", r"C:\var\lib\kubelet\", r"C:\mnt\data\"]
        );
        assert_eq!(outside(&paths, None).len(), 5);
        assert!(outside(&[], Some(&roots)).is_empty());
    }
}
