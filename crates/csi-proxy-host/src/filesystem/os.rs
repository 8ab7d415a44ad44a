//! The real filesystem backend: the confined filesystem, on every OS.

use super::FilesystemBackend;
use crate::confined::{Confined, Kind, Located};
use crate::path::CheckedPath;
use crate::{Error, Result};

impl FilesystemBackend for Confined {
    fn exists(&self, p: &Located) -> Result<bool> {
        Confined::exists(self, p)
    }

    fn mkdir_all(&self, p: &Located) -> Result<()> {
        Confined::mkdir_all(self, p)
    }

    fn remove(&self, p: &Located) -> Result<()> {
        Confined::remove(self, p)
    }

    fn remove_all(&self, p: &Located) -> Result<()> {
        Confined::remove_all(self, p)
    }

    fn remove_contents(&self, p: &Located) -> Result<()> {
        if Confined::kind(self, p)? != Some(Kind::Link) {
            return Confined::remove_contents(self, p);
        }
        match self.link_destination(p)? {
            Some(d) if !d.is_root() => Confined::remove_contents(self, &d),
            _ => Err(Error::PermissionDenied(format!(
                "rmdir contents {}: it is a link that does not lead to a directory inside the allowed roots (and not to a root itself)",
                p.shown()
            ))),
        }
    }

    fn symlink(&self, points_to: &CheckedPath, link: &Located) -> Result<()> {
        Confined::symlink(self, points_to, link)
    }

    fn valid(&self, p: &Located) -> Result<bool> {
        match Confined::kind(self, p)? {
            None => Ok(false),
            Some(Kind::Link) => match self.link_destination(p)? {
                Some(d) => Confined::exists(self, &d),
                None => Ok(true),
            },
            Some(_) => Ok(true),
        }
    }

    fn is_symlink(&self, p: &Located) -> Result<bool> {
        match Confined::kind(self, p)? {
            None => Err(Error::NotFound(format!(
                "path {} does not exist",
                p.shown()
            ))),
            Some(Kind::MountPoint) => Ok(true),
            Some(Kind::Link) => match self.link_destination(p)? {
                // A destination inside the roots must exist (as upstream
                // asks of every link); it is looked up beneath its root, and
                // one that cannot be looked at there counts as existing.
                // (An inline attempt that would block says so: run again.)
                Some(d) => match Confined::exists(self, &d) {
                    Err(e) if crate::inline::is_would_block(&e) => Err(e),
                    r => Ok(r.unwrap_or(true)),
                },
                // Anywhere else: a link, without looking at where it leads.
                None => Ok(true),
            },
            Some(_) => Ok(false),
        }
    }
}
