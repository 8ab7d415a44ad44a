//! Linux (and other Unix) filesystem backend over std.

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
        if fs::symlink_metadata(path)?.is_dir() {
            fs::remove_dir(path)
        } else {
            fs::remove_file(path)
        }
    }

    fn remove_all(&self, path: &str) -> io::Result<()> {
        if fs::symlink_metadata(path)?.is_dir() {
            fs::remove_dir_all(path)
        } else {
            fs::remove_file(path)
        }
    }

    fn remove_contents(&self, path: &str) -> io::Result<()> {
        for entry in fs::read_dir(path)? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                fs::remove_dir_all(entry.path())?;
            } else {
                fs::remove_file(entry.path())?;
            }
        }
        Ok(())
    }

    fn symlink_dir(&self, points_to: &str, link: &str) -> io::Result<()> {
        std::os::unix::fs::symlink(points_to, link)
    }

    fn is_link_to_existing(&self, path: &str) -> io::Result<bool> {
        match fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => Ok(fs::metadata(path).is_ok()),
            Ok(_) => Ok(false),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }
}
