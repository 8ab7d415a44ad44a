//! Windows filesystem backend over std and Win32.

use super::FilesystemBackend;
use crate::path::{Link, LinkReader, OsLinks};
use std::fs;
use std::io;

/// The real filesystem of this host.
#[derive(Clone, Copy, Debug, Default)]
pub struct OsFilesystem;

impl LinkReader for OsFilesystem {
    fn read_link(&self, path: &str) -> io::Result<Link> {
        OsLinks.read_link(path)
    }
    fn is_link_free(&self, path: &str) -> bool {
        OsLinks.is_link_free(path)
    }
}

/// A directory link (symlink or junction) is a directory entry with a
/// reparse point; it is removed with RemoveDirectoryW, never followed.
fn is_dir_entry(m: &fs::Metadata) -> bool {
    use std::os::windows::fs::MetadataExt;
    const FILE_ATTRIBUTE_DIRECTORY: u32 = 0x10;
    m.file_attributes() & FILE_ATTRIBUTE_DIRECTORY != 0
}

impl FilesystemBackend for OsFilesystem {
    fn exists(&self, path: &str) -> io::Result<bool> {
        match fs::symlink_metadata(path) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn create_dir_all(&self, path: &str) -> io::Result<()> {
        fs::create_dir_all(path)
    }

    fn remove(&self, path: &str) -> io::Result<()> {
        let m = fs::symlink_metadata(path)?;
        if is_dir_entry(&m) {
            fs::remove_dir(path)
        } else {
            fs::remove_file(path)
        }
    }

    fn remove_all(&self, path: &str) -> io::Result<()> {
        let m = fs::symlink_metadata(path)?;
        if m.file_type().is_symlink() {
            // A link (symlink, junction, mount point): remove the link only.
            return if is_dir_entry(&m) {
                fs::remove_dir(path)
            } else {
                fs::remove_file(path)
            };
        }
        if is_dir_entry(&m) {
            fs::remove_dir_all(path)
        } else {
            fs::remove_file(path)
        }
    }

    fn remove_contents(&self, path: &str) -> io::Result<()> {
        for entry in fs::read_dir(path)? {
            let entry = entry?;
            let p = entry.path();
            self.remove_all(&p.to_string_lossy())?;
        }
        Ok(())
    }

    fn symlink_dir(&self, points_to: &str, link: &str) -> io::Result<()> {
        std::os::windows::fs::symlink_dir(points_to, link)?;
        // Never trust the BOOL alone (wine's CreateSymbolicLinkW is a stub).
        match fs::symlink_metadata(link) {
            Ok(m) if m.file_type().is_symlink() => Ok(()),
            _ => Err(io::Error::other(
                "CreateSymbolicLinkW reported success but no link exists",
            )),
        }
    }

    fn is_link_to_existing(&self, path: &str) -> io::Result<bool> {
        match OsLinks.read_link(path) {
            Ok(Link::Symlink(_)) | Ok(Link::MountPoint) => Ok(fs::metadata(path).is_ok()),
            Ok(Link::NotFound) | Ok(Link::NotALink) => Ok(false),
            Err(e) => Err(e),
        }
    }
}
