//! Removal on Windows: one entry, a tree, a directory's contents. Every
//! entry is opened relative to its proven parent and proven itself before
//! it is deleted or emptied.

use super::listing::{TreeDir, WinTree};
use super::nt::open_for_delete;
use super::{
    classify, dir_open, is_missing, last_raw, nt, open_dir, parent_handle, prove_final,
    walk_parents, RootHandle, DIR_ACCESS,
};
use crate::confined::{io_err, mount_in_tree, tree, tree_err, Kind, Located};
use crate::error::{Error, Result};
use std::os::windows::io::OwnedHandle;
use windows_sys::Wdk::Storage::FileSystem::{
    FILE_DIRECTORY_FILE, FILE_OPEN, FILE_OPEN_REPARSE_POINT,
};

fn units(p: &Located, s: &str) -> Result<Vec<u16>> {
    crate::wide::units(s).map_err(|e| io_err("remove", p, e.into()))
}

fn refuse_mount_point(p: &Located) -> Error {
    Error::FailedPrecondition(format!(
        "path {} is a volume mount point; unmount it first",
        p.shown()
    ))
}

pub fn remove(root: &RootHandle, p: &Located) -> Result<()> {
    let parent = parent_handle(root, p)?;
    let name = units(p, p.name().expect("not a root"))?;
    let h = match open_for_delete(parent.raw(root), &name) {
        Ok(h) => h,
        Err(s) if is_missing(s) => {
            return Err(Error::NotFound(format!(
                "path {} does not exist",
                p.shown()
            )))
        }
        Err(s) => return Err(io_err("remove", p, nt::status_error(s))),
    };
    prove_final(root, &h, p)?;
    if classify(&h).map_err(|e| io_err("stat", p, e))? == Kind::MountPoint {
        return Err(refuse_mount_point(p));
    }
    nt::delete(&h).map_err(|e| io_err("remove", p, e))
}

pub fn remove_all(root: &RootHandle, p: &Located) -> Result<()> {
    let parent_dir = match parent_handle(root, p) {
        Err(Error::NotFound(_)) => return Ok(()),
        other => other?,
    };
    let parent = parent_dir.raw(root);
    let name = p.name().expect("not a root");
    let listing = nt::Open {
        access: DIR_ACCESS,
        share: nt::SHARE_PIN,
        disposition: FILE_OPEN,
        options: FILE_OPEN_REPARSE_POINT,
        dont_reparse: false,
    };
    let h = match nt::open_relative(parent, name, &listing) {
        Ok(h) => h,
        Err(s) if is_missing(s) => return Ok(()),
        Err(s) => return Err(io_err("open", p, nt::status_error(s))),
    };
    // Proven before anything below it is touched; the entry deleted
    // afterwards is proven again (it may have been swapped meanwhile).
    prove_final(root, &h, p)?;
    match classify(&h).map_err(|e| io_err("stat", p, e))? {
        Kind::MountPoint => return Err(mount_in_tree(p)),
        Kind::Dir => empty(h, p)?,
        _ => drop(h),
    }
    match open_for_delete(parent, &units(p, name)?) {
        Ok(h) => {
            prove_final(root, &h, p)?;
            nt::delete(&h).map_err(|e| io_err("remove", p, e))
        }
        Err(s) if is_missing(s) => Ok(()),
        Err(s) => Err(io_err("remove", p, nt::status_error(s))),
    }
}

pub fn remove_contents(root: &RootHandle, p: &Located) -> Result<()> {
    if !p.is_root() {
        if let Ok(Some(h)) = root.open_proven(p.rel_str(), &dir_open(FILE_OPEN, 0)) {
            // Anything unclear here takes the walk below.
            if classify(&h).ok() == Some(Kind::Dir) {
                return empty(h, p);
            }
        }
    }
    let dir = open_dir(root, p)?;
    let h = if dir.mount_point {
        // Emptying a mounted volume is what was asked for: its root,
        // reached through the mount point held open in `dir`.
        let chain = walk_parents(root, p)?;
        let enter = nt::Open {
            options: FILE_DIRECTORY_FILE,
            ..dir_open(FILE_OPEN, 0)
        };
        let name = p.name().expect("not a root");
        nt::open_relative(last_raw(root, &chain), name, &enter)
            .map_err(|s| io_err("open", p, nt::status_error(s)))?
    } else {
        dir.handle
    };
    empty(h, p)
}

/// Remove everything inside the directory `h`, proven to be `p`.
fn empty(h: OwnedHandle, p: &Located) -> Result<()> {
    let top = TreeDir::new(h).map_err(|e| io_err("open", p, e))?;
    tree::remove_contents(&WinTree, top, &tree::Limits::DEFAULT).map_err(|e| tree_err(p, e))
}
