//! Directory listings and the tree-removal operations over directory
//! handles.

use super::{classify, delete_open, dir_open, is_missing, nt, STATUS_NOT_A_DIRECTORY};
use crate::confined::tree::{Hint, Sub, TreeOps};
use crate::confined::winfmt::{self, ATTR_DIRECTORY, ATTR_REPARSE_POINT};
use crate::confined::Kind;
use std::io;
use std::os::windows::io::{AsRawHandle, OwnedHandle};
use windows_sys::Wdk::Storage::FileSystem::FILE_OPEN;
use windows_sys::Win32::Foundation::HANDLE;

/// [`TreeOps`] over directory handles. Windows cannot reopen a parent from
/// a child, so every directory on the way stays open (bounded by the
/// depth limit); each is held without delete sharing, so the tree cannot
/// be rearranged under the walk.
pub(super) struct WinTree;

impl TreeOps for WinTree {
    type Dir = OwnedHandle;
    type Name = Vec<u16>;
    const WINDOW: Option<usize> = None;

    fn id(&self, dir: &OwnedHandle) -> io::Result<(u64, u64)> {
        nt::file_id(dir)
    }

    fn list(
        &self,
        dir: &mut OwnedHandle,
        out: &mut Vec<(Vec<u16>, Hint)>,
        max: usize,
    ) -> io::Result<()> {
        let mut buf = vec![0u8; 16 * 1024];
        let mut restart = true;
        while out.len() < max {
            let n = nt::query_dir(dir, &mut buf, restart)?;
            restart = false;
            if n == 0 {
                break;
            }
            for e in winfmt::parse_full_dir_info(&buf[..n]) {
                if winfmt::is_dot(&e.name) {
                    continue;
                }
                let hint = if e.attributes & ATTR_REPARSE_POINT != 0 {
                    // A link or mount point: opened as itself, then decided.
                    Hint::Unknown
                } else if e.attributes & ATTR_DIRECTORY != 0 {
                    Hint::Dir
                } else {
                    Hint::NotDir
                };
                out.push((e.name, hint));
                if out.len() == max {
                    break;
                }
            }
        }
        Ok(())
    }

    fn unlink(&self, dir: &OwnedHandle, name: &Vec<u16>) -> io::Result<bool> {
        let h = match nt::open_relative_units(dir.as_raw_handle() as HANDLE, name, &delete_open()) {
            Ok(h) => h,
            Err(s) if is_missing(s) => return Ok(true),
            Err(s) => return Err(nt::status_error(s)),
        };
        match classify(&h)? {
            // Real directories and mount points are for open_subdir.
            Kind::Dir | Kind::MountPoint => Ok(false),
            _ => nt::delete(&h).map(|()| true),
        }
    }

    fn open_subdir(&self, dir: &OwnedHandle, name: &Vec<u16>) -> io::Result<Sub<OwnedHandle>> {
        let h = match nt::open_relative_units(
            dir.as_raw_handle() as HANDLE,
            name,
            &dir_open(FILE_OPEN, 0),
        ) {
            Ok(h) => h,
            Err(s) if is_missing(s) => return Ok(Sub::Gone),
            Err(STATUS_NOT_A_DIRECTORY) => return Ok(Sub::NotADir),
            Err(s) => return Err(nt::status_error(s)),
        };
        Ok(match classify(&h)? {
            Kind::Dir => Sub::Dir(h),
            Kind::MountPoint => Sub::MountPoint,
            _ => Sub::NotADir,
        })
    }

    fn rmdir(&self, dir: &OwnedHandle, name: &Vec<u16>) -> io::Result<()> {
        let h = nt::open_relative_units(dir.as_raw_handle() as HANDLE, name, &delete_open())
            .map_err(nt::status_error)?;
        nt::delete(&h)
    }

    fn parent(&self, _: &OwnedHandle) -> io::Result<OwnedHandle> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "parents are kept open on Windows",
        ))
    }

    fn name_len(name: &Vec<u16>) -> usize {
        name.len() * 2
    }
}
