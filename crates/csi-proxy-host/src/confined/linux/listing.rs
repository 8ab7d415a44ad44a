//! Directory listings (`getdents64` through `rustix::fs::RawDir`) and the
//! tree-removal operations over directory descriptors.

use super::sys::{self, beneath};
use crate::confined::tree::{Hint, Sub, TreeOps};
use nix::errno::Errno;
use nix::fcntl::{OFlag, ResolveFlag};
use nix::unistd::UnlinkatFlags;
use rustix::fs::FileType;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// Directories kept open by a tree removal.
const TREE_WINDOW: usize = 32;

/// Up to `max` entries of the directory `fd`, from its start: rustix's
/// `getdents64` reader over the descriptor itself (no path is resolved
/// again). A type the kernel does not give (`DT_UNKNOWN`, or one rustix
/// does not know) is [`Hint::Unknown`]: the walk finds out by opening it.
pub(super) fn list(
    fd: BorrowedFd<'_>,
    out: &mut Vec<(CString, Hint)>,
    max: usize,
) -> io::Result<()> {
    let room = max.saturating_sub(out.len());
    sys::list(fd, room, |name, kind| {
        let hint = match kind {
            Some(FileType::Directory) => Hint::Dir,
            None => Hint::Unknown,
            Some(_) => Hint::NotDir,
        };
        out.push((name, hint));
    })
}

/// [`TreeOps`] over directory descriptors.
pub(super) struct LinuxTree;

impl TreeOps for LinuxTree {
    type Dir = OwnedFd;
    type Name = CString;
    const WINDOW: Option<usize> = Some(TREE_WINDOW);

    fn id(&self, dir: &OwnedFd) -> io::Result<(u64, u64)> {
        // statx, not fstat: its inode number is 64-bit on every target
        // (32-bit fstat fails with EOVERFLOW on a large one).
        let stx = sys::statx_empty_path(dir.as_fd())?;
        let dev = (u64::from(stx.stx_dev_major) << 32) | u64::from(stx.stx_dev_minor);
        Ok((dev, stx.stx_ino))
    }

    fn list(
        &self,
        dir: &mut OwnedFd,
        out: &mut Vec<(CString, Hint)>,
        max: usize,
    ) -> io::Result<()> {
        list(dir.as_fd(), out, max)
    }

    fn unlink(&self, dir: &OwnedFd, name: &CString) -> io::Result<bool> {
        match sys::unlinkat(dir.as_fd(), name.as_c_str(), UnlinkatFlags::NoRemoveDir) {
            Ok(()) | Err(Errno::ENOENT) => Ok(true),
            Err(Errno::EISDIR) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    fn open_subdir(&self, dir: &OwnedFd, name: &CString) -> io::Result<Sub<OwnedFd>> {
        let fd = beneath(
            dir.as_fd(),
            name.as_c_str(),
            OFlag::O_RDONLY | OFlag::O_DIRECTORY,
            ResolveFlag::RESOLVE_NO_XDEV,
        );
        Ok(match fd {
            Ok(fd) => Sub::Dir(fd),
            Err(Errno::ENOENT) => Sub::Gone,
            Err(Errno::ENOTDIR) | Err(Errno::ELOOP) => Sub::NotADir,
            Err(Errno::EXDEV) => Sub::MountPoint,
            Err(e) => return Err(e.into()),
        })
    }

    fn rmdir(&self, dir: &OwnedFd, name: &CString) -> io::Result<()> {
        sys::unlinkat(dir.as_fd(), name.as_c_str(), UnlinkatFlags::RemoveDir).map_err(Into::into)
    }

    fn parent(&self, dir: &OwnedFd) -> io::Result<OwnedFd> {
        sys::openat(
            dir.as_fd(),
            "..",
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW,
        )
        .map_err(Into::into)
    }

    fn name_len(name: &CString) -> usize {
        name.as_bytes().len()
    }

    fn show(name: &CString) -> String {
        name.to_string_lossy().into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn names(fd: BorrowedFd<'_>, max: usize) -> Vec<(String, Hint)> {
        let mut out = Vec::new();
        list(fd, &mut out, max).unwrap();
        let mut got: Vec<(String, Hint)> = out
            .into_iter()
            .map(|(n, h)| (n.into_string().unwrap(), h))
            .collect();
        got.sort_by(|a, b| a.0.cmp(&b.0));
        got
    }

    #[test]
    fn lists_entries_with_hints_without_dot_entries() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir(t.path().join("d")).unwrap();
        std::fs::write(t.path().join("file"), b"x").unwrap();
        symlink("d", t.path().join("l")).unwrap();
        let dir = std::fs::File::open(t.path()).unwrap();
        let got = names(dir.as_fd(), usize::MAX);
        let kinds: Vec<(&str, bool)> = got
            .iter()
            .map(|(n, h)| (n.as_str(), matches!(h, Hint::Dir)))
            .collect();
        // A link is not a directory (never entered); "." and ".." are left out.
        assert_eq!(kinds, [("d", true), ("file", false), ("l", false)]);
        // Listed again from the start, and cut at `max`.
        assert_eq!(names(dir.as_fd(), usize::MAX).len(), 3);
        assert_eq!(names(dir.as_fd(), 2).len(), 2);
    }

    #[test]
    fn lists_more_entries_than_one_buffer_holds() {
        let t = tempfile::tempdir().unwrap();
        // Names of 200 bytes: 16 KiB of records holds fewer than 80.
        let long = "n".repeat(196);
        for i in 0..300 {
            std::fs::write(t.path().join(format!("{long}{i:03}")), b"").unwrap();
        }
        let dir = std::fs::File::open(t.path()).unwrap();
        let got = names(dir.as_fd(), usize::MAX);
        assert_eq!(got.len(), 300);
        assert!(got
            .iter()
            .all(|(n, h)| n.len() == 199 && matches!(h, Hint::NotDir)));
    }
}
