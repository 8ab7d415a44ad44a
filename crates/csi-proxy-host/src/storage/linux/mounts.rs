//! Volume mount points on Linux: mounting a partition onto a directory
//! reached beneath an allowed root, unmounting the mount identified by that
//! directory, and which volume is mounted at or holds a path. Every target
//! is a directory handle from the confined filesystem, never a re-resolved
//! path string.

use super::{devices, ensure_online, from_io, sys, usage, LinuxStorage};
use crate::confined::{Confined, Dir, Located};
use crate::storage::target::{self, At, NotMounted};
use crate::storage::VolumeId;
use crate::{Error, Result};
use sys::Access;

impl LinuxStorage {
    pub(super) fn mount_on(
        &self,
        volume: &VolumeId,
        fs: &Confined,
        target: &Located,
    ) -> Result<()> {
        let _g = self.lock_volume(volume)?;
        let f = self.find(volume)?;
        ensure_online(&f, volume)?;
        let c = self.content_bounded(&f.disk, &f.part)?;
        let kind = crate::storage::content::filesystem(&c.found).ok_or_else(|| {
            Error::FailedPrecondition(format!(
                "volume {volume} {}; only a filesystem can be mounted",
                crate::storage::content::holds(&c.found)
            ))
        })?;
        // A volume the host uses anywhere outside the roots (any mount
        // namespace), or that is held or used as swap, is never mounted
        // inside them: Rmdir below it would edit the host's filesystem.
        if !self.claimable(&f.part.name, f.part.major, f.part.minor)? {
            let u = usage::of(&f.part.name, f.part.major, f.part.minor, &fs.real_roots());
            if u.outside_roots() || u.mounts.is_empty() {
                return Err(Error::FailedPrecondition(format!(
                    "volume {volume} is in use outside the allowed roots ({}); refusing to mount it inside them",
                    u.describe()
                )));
            }
        }
        // The target is created and opened beneath its root (no link
        // anywhere in it); the mount goes onto that very directory.
        let dir = fs.create_dir(target)?;
        let st = dir
            .mount_state()
            .map_err(|e| Error::io("statx", target.path(), e))?;
        if st.mount_root {
            return if (st.major, st.minor) == (f.part.major, f.part.minor) {
                Ok(())
            } else {
                Err(Error::AlreadyExists(format!(
                    "{} is already a mount point (of device {}:{})",
                    target.shown(),
                    st.major,
                    st.minor
                )))
            };
        }
        if !dir
            .is_empty()
            .map_err(|e| Error::io("read", target.path(), e))?
        {
            return Err(Error::FailedPrecondition(format!(
                "target {} is not empty; a volume is mounted only on an empty directory",
                target.shown()
            )));
        }
        // The fd, checked to be of disk `f.disk`, stays open across the
        // mount (the kernel opens the node by name again): the disk cannot
        // be detached and re-attached under that name meanwhile.
        let (node, held) = self.open_part(&f.disk, &f.part, Access::Read)?;
        use nix::mount::MsFlags;
        nix::mount::mount(
            Some(node.as_path()),
            dir.proc_path().as_str(),
            Some(kind),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            None::<&str>,
        )
        .map_err(|e| from_io("mount", target.path(), e.into()))?;
        devices::same_disk(&held, f.disk.number, &f.part.name, true)
    }

    pub(super) fn unmount_from(
        &self,
        volume: &VolumeId,
        fs: &Confined,
        target: &Located,
    ) -> Result<()> {
        let _g = self.lock_volume(volume)?;
        let f = self.find(volume)?;
        // Identify the mount by the directory reached beneath the root; the
        // parent is held open and the unmount names the last component
        // relative to it, without following a link.
        let (parent, name) = match fs.open_parent(target) {
            Err(Error::NotFound(_)) => return Ok(()),
            other => other?,
        };
        let dir = match fs.open_dir(target) {
            Err(Error::NotFound(_)) => return Ok(()),
            other => other?,
        };
        let st = dir
            .mount_state()
            .map_err(|e| Error::io("statx", target.path(), e))?;
        if !st.mount_root {
            return Ok(());
        }
        if (st.major, st.minor) != (f.part.major, f.part.minor) {
            return Err(Error::FailedPrecondition(format!(
                "{} is a mount of device {}:{}, not of volume {volume}",
                target.shown(),
                st.major,
                st.minor
            )));
        }
        let sync = dir
            .open_readable()
            .and_then(|d| sys::syncfs(&d))
            .map_err(|e| from_io("syncfs", target.path(), e));
        // The mount must not stay pinned by our own handle.
        drop(dir);
        sync?;
        let via = format!("{}/{name}", parent.proc_path());
        nix::mount::umount2(via.as_str(), nix::mount::MntFlags::UMOUNT_NOFOLLOW)
            .map_err(|e| from_io("umount", target.path(), e.into()))
    }

    /// What is mounted at `target` ([`At`]): the volume of the mount
    /// whose root the directory is; nothing, for a missing path, a
    /// directory that is no mount root, or a file, each only when the
    /// mount table lists no mount at or below the target either
    /// ([`no_mount_listed`]).
    pub(super) fn volume_mounted_at(&self, fs: &Confined, target: &Located) -> Result<At> {
        let at = match fs.open_dir(target) {
            Ok(dir) => {
                let st = dir
                    .mount_state()
                    .map_err(|e| Error::io("statx", target.path(), e))?;
                if st.mount_root {
                    return self
                        .volume_of_dev(st.major, st.minor, &target.shown())
                        .map(At::Volume);
                }
                At::NotMounted(NotMounted::PlainDirectory)
            }
            Err(e @ (Error::NotFound(_) | Error::FailedPrecondition(_))) => {
                target::absent(fs, target, e)?
            }
            Err(e) => return Err(e),
        };
        // Every "not mounted" answer: a mount hidden at or below the
        // target (under a mount over an ancestor, or on a file) is listed
        // in the mount table.
        no_mount_listed(fs, target)?;
        Ok(at)
    }

    pub(super) fn volume_holding(&self, fs: &Confined, target: &Located) -> Result<VolumeId> {
        let dir = fs.open_nearest_dir(target)?;
        let st = dir
            .mount_state()
            .map_err(|e| Error::io("statx", target.path(), e))?;
        self.volume_of_dev(st.major, st.minor, &target.shown())
    }
}

/// The proof's second half for "nothing is mounted at `target`": no entry
/// of this namespace's mount table has the target's real path, or a path
/// below it, as its mount point. The real path is that of the deepest
/// existing directory at or above the target, read from a handle held
/// across the table read (the same before and after it, and named by the
/// components it was opened by), joined with the components below it. A
/// listed mount (mounted meanwhile, or hidden by a mount above it) or a
/// handle renamed meanwhile is `FailedPrecondition`, never "not mounted".
fn no_mount_listed(fs: &Confined, target: &Located) -> Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let (dir, at, rest) = nearest_dir(fs, target)?;
    let io = |e| Error::io("readlink", target.path(), e);
    let before = std::fs::read_link(dir.proc_path()).map_err(io)?;
    let mounts = LinuxStorage::mounts()?;
    let after = std::fs::read_link(dir.proc_path()).map_err(io)?;
    let named = fs
        .real_roots()
        .iter()
        .any(|r| at.components().fold(r.clone(), |p, c| p.join(c)).as_path() == before.as_path());
    if before != after || !named {
        return Err(Error::FailedPrecondition(format!(
            "a directory on the way to {} was renamed or moved while it was checked; not answering \"not mounted\"",
            target.shown()
        )));
    }
    let real = rest.iter().fold(before, |p, c| p.join(c));
    let real = real.as_os_str().as_bytes();
    let at_or_below = |mp: &[u8]| {
        mp == real
            || (mp.len() > real.len()
                && mp.starts_with(real)
                && (real.ends_with(b"/") || mp[real.len()] == b'/'))
    };
    match mounts.iter().find(|m| at_or_below(&m.mount_point)) {
        None => Ok(()),
        Some(m) => Err(Error::FailedPrecondition(format!(
            "the mount table lists a mount of a {} filesystem (device {}:{}) at or below {}, which is not reached as one (mounted meanwhile, or hidden by another mount); not answering \"not mounted\"",
            crate::error::escaped(&m.fs_type, crate::error::Spaces::Keep),
            m.major,
            m.minor,
            target.shown(),
        ))),
    }
}

/// The deepest existing directory at or above `target` (held open), where
/// it is, and the components of `target` below it.
fn nearest_dir(fs: &Confined, target: &Located) -> Result<(Dir, Located, Vec<String>)> {
    let mut cur = target.clone();
    let mut rest = Vec::new();
    loop {
        match fs.open_dir(&cur) {
            Ok(d) => {
                rest.reverse();
                return Ok((d, cur, rest));
            }
            Err(Error::NotFound(_) | Error::FailedPrecondition(_)) if !cur.is_root() => {
                rest.push(cur.name().expect("not a root").to_string());
                cur = cur.parent().expect("not a root");
            }
            Err(e) => return Err(e),
        }
    }
}
