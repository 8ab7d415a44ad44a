//! Directory listings and the tree-removal operations over directory
//! handles.

use super::nt::open_for_delete;
use super::{classify, dir_open, is_missing, nt, STATUS_NOT_A_DIRECTORY};
use crate::confined::tree::{Hint, Sub, TreeOps};
use crate::confined::winfmt::{self, ATTR_DIRECTORY, ATTR_REPARSE_POINT};
use crate::confined::Kind;
use std::io;
use std::os::windows::io::{AsRawHandle, OwnedHandle};
use windows_sys::Wdk::Storage::FileSystem::FILE_OPEN;
use windows_sys::Win32::Foundation::HANDLE;
use windows_sys::Win32::Storage::FileSystem::{VOLUME_NAME_DOS, VOLUME_NAME_GUID};

/// [`TreeOps`] over directory handles. Windows cannot reopen a parent from
/// a child, so every directory on the way stays open (bounded by the
/// depth limit); each is held without delete sharing, so the tree cannot
/// be rearranged under the walk. Every entry opened is proven to be the
/// one named in its directory (its final path), as the path walked to the
/// top was: a system that hides a link (wine shows a host symlink as the
/// file or directory it leads to) is caught before the entry is deleted or
/// entered.
pub(super) struct WinTree;

/// A directory of the tree and its final path (the parent of the entries
/// proven in it).
pub(super) struct TreeDir {
    handle: OwnedHandle,
    path: String,
}

impl TreeDir {
    /// `handle`, whose path the caller has proven.
    pub(super) fn new(handle: OwnedHandle) -> io::Result<TreeDir> {
        let path = final_path(&handle)?;
        Ok(TreeDir { handle, path })
    }

    fn raw(&self) -> HANDLE {
        self.handle.as_raw_handle() as HANDLE
    }

    /// Is `h`, opened as `name` in this directory, that entry? Its final
    /// path if so.
    fn prove(&self, h: &OwnedHandle, name: &[u16]) -> io::Result<String> {
        let expected = format!("{}\\{}", self.path, String::from_utf16_lossy(name));
        let path = final_path(h)?;
        if winfmt::same_final_path(&path, &expected) {
            return Ok(path);
        }
        Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "the entry opened is not the one named (a link the system does not show as one); not removed",
        ))
    }
}

/// The final path of `h`; on a volume without a DOS path (entered through
/// a mount point), its volume GUID path (the same for its entries).
fn final_path(h: &OwnedHandle) -> io::Result<String> {
    let f = nt::final_path(h, VOLUME_NAME_DOS).or_else(|_| nt::final_path(h, VOLUME_NAME_GUID))?;
    let f = f.strip_prefix(r"\\?\").unwrap_or(&f);
    Ok(f.strip_suffix('\\').unwrap_or(f).to_string())
}

impl TreeOps for WinTree {
    type Dir = TreeDir;
    type Name = Vec<u16>;
    const WINDOW: Option<usize> = None;

    fn id(&self, dir: &TreeDir) -> io::Result<(u64, u64)> {
        nt::file_id(&dir.handle)
    }

    fn list(
        &self,
        dir: &mut TreeDir,
        out: &mut Vec<(Vec<u16>, Hint)>,
        max: usize,
    ) -> io::Result<()> {
        let mut buf = vec![0u8; 16 * 1024];
        let mut restart = true;
        while out.len() < max {
            let n = nt::query_dir(&dir.handle, &mut buf, restart)?;
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

    fn unlink(&self, dir: &TreeDir, name: &Vec<u16>) -> io::Result<bool> {
        let h = match open_for_delete(dir.raw(), name) {
            Ok(h) => h,
            Err(s) if is_missing(s) => return Ok(true),
            Err(s) => return Err(nt::status_error(s)),
        };
        match classify(&h)? {
            // Real directories and mount points are for open_subdir.
            Kind::Dir | Kind::MountPoint => Ok(false),
            _ => {
                dir.prove(&h, name)?;
                nt::delete(&h).map(|()| true)
            }
        }
    }

    fn open_subdir(&self, dir: &TreeDir, name: &Vec<u16>) -> io::Result<Sub<TreeDir>> {
        let h = match nt::open_relative_units(dir.raw(), name, &dir_open(FILE_OPEN, 0)) {
            Ok(h) => h,
            Err(s) if is_missing(s) => return Ok(Sub::Gone),
            Err(STATUS_NOT_A_DIRECTORY) => return Ok(Sub::NotADir),
            Err(s) => return Err(nt::status_error(s)),
        };
        Ok(match classify(&h)? {
            Kind::Dir => {
                let path = dir.prove(&h, name)?;
                Sub::Dir(TreeDir { handle: h, path })
            }
            Kind::MountPoint => Sub::MountPoint,
            _ => Sub::NotADir,
        })
    }

    fn rmdir(&self, dir: &TreeDir, name: &Vec<u16>) -> io::Result<()> {
        let h = open_for_delete(dir.raw(), name).map_err(nt::status_error)?;
        dir.prove(&h, name)?;
        nt::delete(&h)
    }

    fn parent(&self, _: &TreeDir) -> io::Result<TreeDir> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "parents are kept open on Windows",
        ))
    }

    fn name_len(name: &Vec<u16>) -> usize {
        name.len() * 2
    }

    fn show(name: &Vec<u16>) -> String {
        String::from_utf16_lossy(name)
    }
}
