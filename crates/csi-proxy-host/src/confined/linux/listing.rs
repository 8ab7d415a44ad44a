//! Directory listings (`getdents64`) and the tree-removal operations over
//! directory descriptors.

use super::beneath;
use crate::confined::tree::{Hint, Sub, TreeOps};
use nix::errno::Errno;
use nix::fcntl::{openat, OFlag, ResolveFlag};
use nix::sys::stat::Mode;
use nix::unistd::{unlinkat, UnlinkatFlags};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

/// Directories kept open by a tree removal.
const TREE_WINDOW: usize = 32;

/// Up to `max` entries of the directory `fd`, from its start.
pub(super) fn list(
    fd: BorrowedFd<'_>,
    out: &mut Vec<(CString, Hint)>,
    max: usize,
) -> io::Result<()> {
    nix::unistd::lseek(fd, 0, nix::unistd::Whence::SeekSet)?;
    let mut buf = vec![0u8; 16 * 1024];
    while out.len() < max {
        // SAFETY: `buf` is writable memory of `buf.len()` bytes for the whole
        // call and `fd` is an open directory descriptor.
        let n = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                fd.as_raw_fd(),
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n == 0 {
            break;
        }
        for e in parse_dirents(&buf[..n as usize]) {
            if e.name == b"." || e.name == b".." {
                continue;
            }
            let hint = match e.kind {
                libc::DT_DIR => Hint::Dir,
                libc::DT_UNKNOWN => Hint::Unknown,
                _ => Hint::NotDir,
            };
            out.push((CString::new(e.name).expect("names have no NUL"), hint));
            if out.len() == max {
                break;
            }
        }
    }
    Ok(())
}

/// One `linux_dirent64` record.
struct Dirent<'a> {
    kind: u8,
    name: &'a [u8],
}

/// The records of a `getdents64` buffer (malformed tails are dropped).
fn parse_dirents(buf: &[u8]) -> impl Iterator<Item = Dirent<'_>> {
    let mut off = 0usize;
    std::iter::from_fn(move || {
        // d_ino u64, d_off i64, d_reclen u16, d_type u8, d_name[].
        let rec = buf.get(off..)?;
        if rec.len() < 19 {
            return None;
        }
        let reclen = u16::from_ne_bytes([rec[16], rec[17]]) as usize;
        if reclen < 20 || reclen > rec.len() {
            return None;
        }
        let raw = &rec[19..reclen];
        let len = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
        off += reclen;
        Some(Dirent {
            kind: rec[18],
            name: &raw[..len],
        })
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
        let stx = super::statx_empty_path(dir.as_fd())?;
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
        match unlinkat(dir.as_fd(), name.as_c_str(), UnlinkatFlags::NoRemoveDir) {
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
        unlinkat(dir.as_fd(), name.as_c_str(), UnlinkatFlags::RemoveDir).map_err(Into::into)
    }

    fn parent(&self, dir: &OwnedFd) -> io::Result<OwnedFd> {
        openat(
            dir.as_fd(),
            "..",
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW,
            Mode::empty(),
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

    #[test]
    fn dirent_records() {
        let mut buf = Vec::new();
        for (kind, name) in [
            (libc::DT_DIR, &b"."[..]),
            (libc::DT_REG, b"file"),
            (libc::DT_LNK, b"l"),
        ] {
            let reclen = (19 + name.len() + 1).div_ceil(8) * 8;
            let mut rec = vec![0u8; reclen];
            rec[16..18].copy_from_slice(&(reclen as u16).to_ne_bytes());
            rec[18] = kind;
            rec[19..19 + name.len()].copy_from_slice(name);
            buf.extend(rec);
        }
        let got: Vec<(u8, Vec<u8>)> = parse_dirents(&buf)
            .map(|d| (d.kind, d.name.to_vec()))
            .collect();
        assert_eq!(
            got,
            vec![
                (libc::DT_DIR, b".".to_vec()),
                (libc::DT_REG, b"file".to_vec()),
                (libc::DT_LNK, b"l".to_vec())
            ]
        );
        // A truncated or lying record ends the walk instead of reading past.
        assert_eq!(parse_dirents(&buf[..30]).count(), 1);
        let mut bad = buf.clone();
        bad[16..18].copy_from_slice(&5000u16.to_ne_bytes());
        assert_eq!(parse_dirents(&bad).count(), 0);
    }
}
