//! The confined filesystem on Windows.
//!
//! Each component below a root is opened relative to the handle of its
//! parent (`NtCreateFile` with `RootDirectory`) with
//! `FILE_OPEN_REPARSE_POINT`, and its attributes are read from that handle:
//! a reparse point (symlink, junction, volume mount point, anything else)
//! in the parent chain is refused. The directories walked stay open with
//! sharing that forbids delete and rename ([`nt::SHARE_PIN`]), so the path
//! they spell cannot change while an API that only takes a path string
//! (`CreateSymbolicLinkW`, `SetVolumeMountPointW`) works on it; the result
//! is then verified through a handle.
//!
//! Read-only questions (PathExists, IsSymlink) first try one open of the
//! whole relative path with `OBJ_DONT_REPARSE` (no reparse point may be
//! crossed) and check the handle's final path against the expected one;
//! anything unproven falls back to the component walk, so no answer ever
//! depends on what a link points to. The walk proves the parent it reached
//! (and, before saying a component is missing, the directory it looked in)
//! the same way, and every operation proves the final entry it opened
//! ([`prove_final`]) before acting on it; tree removal proves each entry
//! against its directory (`listing.rs`). On Windows a link is a reparse
//! point anyway; the proof catches a system that hides one (wine shows a
//! host symlink as what it leads to). Removal is in `removal.rs`.

mod listing;
mod nt;
mod removal;

pub use removal::{remove, remove_all, remove_contents};

use super::winfmt::{self, ATTR_DIRECTORY, ATTR_REPARSE_POINT};
use super::{io_err, link_in_chain, Kind, Located, MkdirOutcome};
use crate::error::{Error, Result};
use crate::path::{classify_reparse_point, Link};
use std::io;
use std::os::windows::io::{AsRawHandle, OwnedHandle};
use windows_sys::Wdk::Storage::FileSystem::{
    FILE_DIRECTORY_FILE, FILE_OPEN, FILE_OPEN_IF, FILE_OPEN_REPARSE_POINT,
};
use windows_sys::Win32::Foundation::{HANDLE, NTSTATUS};
use windows_sys::Win32::Storage::FileSystem::{
    FILE_LIST_DIRECTORY, FILE_READ_ATTRIBUTES, FILE_TRAVERSE, VOLUME_NAME_DOS, VOLUME_NAME_GUID,
};

/// Access for walking and listing a directory (read access, so the
/// sharing mode is enforced against others).
const DIR_ACCESS: u32 = FILE_LIST_DIRECTORY | FILE_TRAVERSE | FILE_READ_ATTRIBUTES;

const STATUS_OBJECT_NAME_NOT_FOUND: NTSTATUS = 0xC000_0034_u32 as i32;
const STATUS_OBJECT_PATH_NOT_FOUND: NTSTATUS = 0xC000_003A_u32 as i32;
const STATUS_NOT_A_DIRECTORY: NTSTATUS = 0xC000_0103_u32 as i32;
const STATUS_DELETE_PENDING: NTSTATUS = 0xC000_0056_u32 as i32;
const STATUS_REPARSE_POINT_ENCOUNTERED: NTSTATUS = 0xC000_050B_u32 as i32;
const STATUS_FILE_IS_A_DIRECTORY: NTSTATUS = 0xC000_00BA_u32 as i32;

fn is_missing(s: NTSTATUS) -> bool {
    matches!(
        s,
        STATUS_OBJECT_NAME_NOT_FOUND | STATUS_OBJECT_PATH_NOT_FOUND | STATUS_DELETE_PENDING
    )
}

/// An allowed root, opened once (reparse points in its configured path are
/// followed: it is configuration), and its final path.
pub struct RootHandle {
    handle: OwnedHandle,
    final_path: String,
}

impl RootHandle {
    pub fn open(path: &str) -> io::Result<RootHandle> {
        let handle = nt::open_root(path)?;
        let f = nt::final_path(&handle, VOLUME_NAME_DOS)?;
        let final_path = f.strip_prefix(r"\\?\").unwrap_or(&f).to_string();
        Ok(RootHandle { handle, final_path })
    }

    fn raw(&self) -> HANDLE {
        self.handle.as_raw_handle() as HANDLE
    }

    /// `root final path\rel`.
    fn expected(&self, rel: &str) -> String {
        let mut s = self.final_path.clone();
        if !rel.is_empty() {
            if !s.ends_with('\\') {
                s.push('\\');
            }
            s.push_str(rel);
        }
        s
    }

    /// Does the open handle `h` name `rel` below this root, now?
    fn proves(&self, h: &OwnedHandle, rel: &str) -> bool {
        nt::final_path(h, VOLUME_NAME_DOS)
            .is_ok_and(|f| winfmt::same_final_path(&f, &self.expected(rel)))
    }

    /// One open of `rel` (several components) that may cross no reparse
    /// point (`OBJ_DONT_REPARSE`), proven by the handle's final path.
    /// `Ok(None)`: opened but not proven (a short name, a system that
    /// ignores the flag); the caller walks instead.
    fn open_proven(&self, rel: &str, how: &nt::Open) -> Result<Option<OwnedHandle>, NTSTATUS> {
        let how = nt::Open {
            dont_reparse: true,
            ..*how
        };
        let h = nt::open_relative(self.raw(), rel, &how)?;
        Ok(self.proves(&h, rel).then_some(h))
    }
}

/// An open directory inside the roots, with the directories above it (up
/// to the root) held open so that its path cannot change while it lives.
#[derive(Debug)]
pub struct Dir {
    handle: OwnedHandle,
    _pins: Vec<OwnedHandle>,
    mount_point: bool,
}

impl Dir {
    /// The raw handle, valid while `self` lives.
    pub fn raw(&self) -> HANDLE {
        self.handle.as_raw_handle() as HANDLE
    }

    /// Its kernel identity: (volume serial number, file index).
    pub fn file_id(&self) -> io::Result<(u64, u64)> {
        nt::file_id(&self.handle)
    }

    /// Is this directory a volume mount point (opened as the reparse point
    /// itself, not the volume behind it)?
    pub fn is_mount_point(&self) -> bool {
        self.mount_point
    }

    /// Its path now (`C:\...`), stable while `self` lives.
    pub fn final_path(&self) -> io::Result<String> {
        let f = nt::final_path(&self.handle, VOLUME_NAME_DOS)?;
        Ok(f.strip_prefix(r"\\?\").unwrap_or(&f).to_string())
    }

    /// `\\?\Volume{GUID}\...`: the volume the directory itself lies on.
    pub fn volume_path(&self) -> io::Result<String> {
        nt::final_path(&self.handle, VOLUME_NAME_GUID)
    }

    /// The volume mounted here (`\\?\Volume{GUID}\`), if this directory is
    /// a volume mount point now.
    pub fn mounted_volume(&self) -> io::Result<Option<String>> {
        let (attrs, tag) = nt::attr_tag(&self.handle)?;
        if attrs & ATTR_REPARSE_POINT == 0 || tag != winfmt::TAG_MOUNT_POINT {
            return Ok(None);
        }
        let data = nt::reparse_data(&self.handle)?;
        Ok(winfmt::reparse_target(&data).and_then(|(_, t)| {
            let rest = t.strip_prefix(r"\??\")?;
            rest.get(..7)
                .filter(|v| v.eq_ignore_ascii_case("Volume{"))
                .map(|_| format!(r"\\?\{rest}"))
        }))
    }

    /// Does the directory hold no entries?
    pub fn is_empty(&self) -> io::Result<bool> {
        let mut buf = vec![0u8; 4096];
        let mut restart = true;
        loop {
            let n = nt::query_dir(&self.handle, &mut buf, restart)?;
            restart = false;
            if n == 0 {
                return Ok(true);
            }
            if winfmt::parse_full_dir_info(&buf[..n])
                .iter()
                .any(|e| !winfmt::is_dot(&e.name))
            {
                return Ok(false);
            }
        }
    }
}

fn dir_open(disposition: u32, extra_options: u32) -> nt::Open {
    nt::Open {
        access: DIR_ACCESS,
        share: nt::SHARE_PIN,
        disposition,
        options: FILE_DIRECTORY_FILE | FILE_OPEN_REPARSE_POINT | extra_options,
        dont_reparse: false,
    }
}

fn probe_open() -> nt::Open {
    nt::Open {
        access: FILE_READ_ATTRIBUTES,
        share: nt::SHARE_ALL,
        disposition: FILE_OPEN,
        options: FILE_OPEN_REPARSE_POINT,
        dont_reparse: false,
    }
}

/// What an open entry is.
fn classify(h: &OwnedHandle) -> io::Result<Kind> {
    let (attrs, tag) = nt::attr_tag(h)?;
    if attrs & ATTR_REPARSE_POINT == 0 {
        return Ok(if attrs & ATTR_DIRECTORY != 0 {
            Kind::Dir
        } else {
            Kind::File
        });
    }
    let target = || {
        let data = nt::reparse_data(h)?;
        winfmt::reparse_target(&data)
            .map(|(_, t)| t)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "reparse data"))
    };
    Ok(match classify_reparse_point(tag, target) {
        Ok(Link::Symlink(_)) => Kind::Link,
        Ok(Link::MountPoint) => Kind::MountPoint,
        Ok(Link::NotALink) if attrs & ATTR_DIRECTORY != 0 => Kind::Dir,
        Ok(Link::NotALink) => Kind::File,
        // A link of a kind we cannot read: still a link, never followed.
        Err(_) => Kind::Link,
    })
}

/// The parent directories of `p`, opened one by one from the root, each
/// checked to be a plain directory, held with [`nt::SHARE_PIN`].
fn walk_parents(root: &RootHandle, p: &Located) -> Result<Vec<OwnedHandle>> {
    let parents = p.parent_rel().unwrap_or("");
    let mut chain: Vec<OwnedHandle> = Vec::new();
    // Where the part of `parents` walked so far ends.
    let mut end = 0;
    for comp in parents.split('\\').filter(|c| !c.is_empty()) {
        let parent = chain
            .last()
            .map_or(root.raw(), |h| h.as_raw_handle() as HANDLE);
        // What is missing, or not a directory, must be so below the root:
        // the directory it was looked for in is proven first.
        let proven_so_far = || chain.last().is_none_or(|h| root.proves(h, &parents[..end]));
        let h = match nt::open_relative(parent, comp, &dir_open(FILE_OPEN, 0)) {
            Ok(h) => h,
            Err(_) if !proven_so_far() => return Err(unproven(p)),
            Err(s) if is_missing(s) => {
                return Err(Error::NotFound(format!(
                    "path {}: its parent directory does not exist",
                    p.shown()
                )))
            }
            Err(STATUS_NOT_A_DIRECTORY) => {
                return Err(Error::FailedPrecondition(format!(
                    "path {}: a parent component is not a directory",
                    p.shown()
                )))
            }
            Err(s) => return Err(io_err("open parent of", p, nt::status_error(s))),
        };
        end += usize::from(end > 0) + comp.len();
        let (attrs, _) = nt::attr_tag(&h).map_err(|e| io_err("stat", p, e))?;
        if attrs & ATTR_REPARSE_POINT != 0 {
            return Err(link_in_chain(p));
        }
        chain.push(h);
    }
    // Belt and braces: the directory reached must be the one named (a
    // system that hides a link, as wine hides host symlinks, is caught).
    if let Some(last) = chain.last() {
        if !root.proves(last, parents) {
            return Err(unproven(p));
        }
    }
    Ok(chain)
}

/// A path whose directory reached is not the one named.
fn unproven(p: &Located) -> Error {
    Error::PermissionDenied(format!(
        "path {} could not be proven to stay beneath its allowed root (a link, or a short or differently-cased name, on the way)",
        p.shown()
    ))
}

/// The final entry `h`, opened relative to its parent, must be `p` itself:
/// the same proof as the parents' (a system that hides a link at the last
/// component, as wine hides a host symlink, opens what it leads to).
fn prove_final(root: &RootHandle, h: &OwnedHandle, p: &Located) -> Result<()> {
    if p.is_root() || root.proves(h, p.rel_str()) {
        Ok(())
    } else {
        Err(unproven(p))
    }
}

/// The parent of `p` as one proven open (no pin), or by the walk.
fn parent_handle(root: &RootHandle, p: &Located) -> Result<Parent> {
    let parents = p.parent_rel().expect("not a root");
    if parents.is_empty() {
        return Ok(Parent::Root);
    }
    match root.open_proven(parents, &dir_open(FILE_OPEN, 0)) {
        Ok(Some(h)) => return Ok(Parent::Open(vec![h])),
        Err(STATUS_REPARSE_POINT_ENCOUNTERED) => return Err(link_in_chain(p)),
        _ => {}
    }
    let chain = walk_parents(root, p)?;
    Ok(if chain.is_empty() {
        Parent::Root
    } else {
        Parent::Open(chain)
    })
}

/// A parent directory reached: the root itself, or opened handles (the
/// last is the parent; the others, if any, pin the way to it).
enum Parent {
    Root,
    Open(Vec<OwnedHandle>),
}

impl Parent {
    fn raw(&self, root: &RootHandle) -> HANDLE {
        match self {
            Parent::Root => root.raw(),
            Parent::Open(chain) => last_raw(root, chain),
        }
    }
}

fn last_raw(root: &RootHandle, chain: &[OwnedHandle]) -> HANDLE {
    chain
        .last()
        .map_or(root.raw(), |h| h.as_raw_handle() as HANDLE)
}

/// The final entry itself (a link is the link), or `None`.
fn open_entry(root: &RootHandle, p: &Located) -> Result<Option<OwnedHandle>> {
    if p.is_root() {
        return nt::open_relative(root.raw(), "", &probe_open())
            .map(Some)
            .map_err(|s| io_err("open", p, nt::status_error(s)));
    }
    // One proven open of the whole path (the common case).
    match root.open_proven(p.rel_str(), &probe_open()) {
        Ok(Some(h)) => return Ok(Some(h)),
        Err(STATUS_REPARSE_POINT_ENCOUNTERED) => return Err(link_in_chain(p)),
        _ => {}
    }
    // Not proven (missing, a short name, an old system): reach the parent
    // and look there, so that a missing answer is about the roots only.
    let parent = match parent_handle(root, p) {
        Err(Error::NotFound(_)) | Err(Error::FailedPrecondition(_)) => return Ok(None),
        other => other?,
    };
    let name = p.name().expect("not a root");
    match nt::open_relative(parent.raw(root), name, &probe_open()) {
        Ok(h) => prove_final(root, &h, p).map(|()| Some(h)),
        Err(s) if is_missing(s) || s == STATUS_NOT_A_DIRECTORY => Ok(None),
        Err(s) => Err(io_err("stat", p, nt::status_error(s))),
    }
}

pub fn exists(root: &RootHandle, p: &Located) -> Result<bool> {
    Ok(open_entry(root, p)?.is_some())
}

pub fn kind(root: &RootHandle, p: &Located) -> Result<Option<Kind>> {
    match open_entry(root, p)? {
        None => Ok(None),
        Some(h) => classify(&h).map(Some).map_err(|e| io_err("stat", p, e)),
    }
}

pub fn read_link(root: &RootHandle, p: &Located) -> Result<Option<String>> {
    let Some(h) = open_entry(root, p)? else {
        return Ok(None);
    };
    if classify(&h).map_err(|e| io_err("stat", p, e))? != Kind::Link {
        return Ok(None);
    }
    let data = nt::reparse_data(&h).map_err(|e| io_err("read link", p, e))?;
    Ok(winfmt::reparse_target(&data).and_then(|(tag, t)| {
        match classify_reparse_point(tag, || Ok(t)) {
            Ok(Link::Symlink(t)) => Some(t),
            _ => None,
        }
    }))
}

fn not_a_dir(p: &Located) -> Error {
    Error::AlreadyExists(format!(
        "path {}: it, or one of its parents, exists and is not a directory",
        p.shown()
    ))
}

fn classify_final(h: &OwnedHandle, p: &Located) -> Result<MkdirOutcome> {
    match classify(h).map_err(|e| io_err("stat", p, e))? {
        Kind::Dir | Kind::MountPoint => Ok(MkdirOutcome::Done),
        Kind::Link => Ok(MkdirOutcome::FinalIsLink),
        Kind::File | Kind::Other => Err(not_a_dir(p)),
    }
}

pub fn mkdir_all(root: &RootHandle, p: &Located) -> Result<MkdirOutcome> {
    if p.is_root() {
        return Ok(MkdirOutcome::Done);
    }
    // The common case: the parent exists; the directory is made in it (or
    // is there already).
    match parent_handle(root, p) {
        Ok(parent) => {
            let name = p.name().expect("not a root");
            return match nt::open_relative(parent.raw(root), name, &dir_open(FILE_OPEN_IF, 0)) {
                Ok(h) => {
                    prove_final(root, &h, p)?;
                    classify_final(&h, p)
                }
                Err(STATUS_NOT_A_DIRECTORY) => Err(not_a_dir(p)),
                Err(s) => Err(io_err("mkdir", p, nt::status_error(s))),
            };
        }
        Err(Error::NotFound(_)) => {}
        Err(Error::FailedPrecondition(_)) => return Err(not_a_dir(p)),
        Err(e) => return Err(e),
    }
    // Parents missing: one component at a time, each created (if missing),
    // opened relative to its parent's handle and proven to be the directory
    // named before anything is made in it.
    let mut chain: Vec<OwnedHandle> = Vec::new();
    let last = p.components().count().saturating_sub(1);
    let mut end = 0;
    for (i, comp) in p.components().enumerate() {
        let parent = last_raw(root, &chain);
        let h = match nt::open_relative(parent, comp, &dir_open(FILE_OPEN_IF, 0)) {
            Ok(h) => h,
            Err(STATUS_NOT_A_DIRECTORY) => return Err(not_a_dir(p)),
            Err(s) => return Err(io_err("mkdir", p, nt::status_error(s))),
        };
        end += usize::from(i > 0) + comp.len();
        if !root.proves(&h, &p.rel_str()[..end]) {
            return Err(unproven(p));
        }
        if i == last {
            return classify_final(&h, p);
        }
        match classify(&h).map_err(|e| io_err("stat", p, e))? {
            Kind::Dir => {}
            Kind::Link | Kind::MountPoint => return Err(link_in_chain(p)),
            Kind::File | Kind::Other => return Err(not_a_dir(p)),
        }
        chain.push(h);
    }
    Ok(MkdirOutcome::Done)
}

pub fn symlink(root: &RootHandle, points_to: &str, link: &Located) -> Result<()> {
    let chain = walk_parents(root, link)?;
    let parent = last_raw(root, &chain);
    let parent_path = match chain.last() {
        Some(h) => nt::final_path(h, VOLUME_NAME_DOS),
        None => nt::final_path(&root.handle, VOLUME_NAME_DOS),
    }
    .map_err(|e| io_err("create symlink", link, e))?;
    let name = link.name().expect("not a root");
    let sep = if parent_path.ends_with('\\') {
        ""
    } else {
        "\\"
    };
    // The parents are held without delete sharing: this path names exactly
    // the directory reached beneath the root.
    nt::create_dir_symlink(&format!("{parent_path}{sep}{name}"), points_to).map_err(|e| {
        if e.raw_os_error() == Some(183) {
            Error::AlreadyExists(format!("path {} already exists", link.shown()))
        } else {
            io_err("create symlink", link, e)
        }
    })?;
    // Never trust the BOOL alone (wine's CreateSymbolicLinkW creates nothing).
    match nt::open_relative(parent, name, &probe_open()) {
        Ok(h) if classify(&h).ok() == Some(Kind::Link) => Ok(()),
        _ => Err(Error::Internal(format!(
            "create symlink {}: CreateSymbolicLinkW reported success but no link exists",
            link.shown()
        ))),
    }
}

fn open_final(root: &RootHandle, p: &Located, disposition: u32) -> Result<Dir> {
    if p.is_root() {
        let handle = nt::open_relative(root.raw(), "", &dir_open(FILE_OPEN, 0))
            .map_err(|s| io_err("open", p, nt::status_error(s)))?;
        return Ok(Dir {
            handle,
            _pins: Vec::new(),
            mount_point: false,
        });
    }
    let chain = walk_parents(root, p)?;
    let name = p.name().expect("not a root");
    let handle = match nt::open_relative(last_raw(root, &chain), name, &dir_open(disposition, 0)) {
        Ok(h) => h,
        Err(s) if is_missing(s) => {
            return Err(Error::NotFound(format!(
                "path {} does not exist",
                p.shown()
            )))
        }
        Err(STATUS_NOT_A_DIRECTORY) | Err(STATUS_FILE_IS_A_DIRECTORY) => {
            return Err(Error::FailedPrecondition(format!(
                "path {} is not a directory",
                p.shown()
            )))
        }
        Err(s) => return Err(io_err("open", p, nt::status_error(s))),
    };
    prove_final(root, &handle, p)?;
    let mount_point = match classify(&handle).map_err(|e| io_err("stat", p, e))? {
        Kind::Dir => false,
        Kind::MountPoint => true,
        Kind::Link => {
            return Err(Error::FailedPrecondition(format!(
                "path {} is a link, not a directory",
                p.shown()
            )))
        }
        Kind::File | Kind::Other => {
            return Err(Error::FailedPrecondition(format!(
                "path {} is not a directory",
                p.shown()
            )))
        }
    };
    Ok(Dir {
        handle,
        _pins: chain,
        mount_point,
    })
}

pub fn open_dir(root: &RootHandle, p: &Located) -> Result<Dir> {
    open_final(root, p, FILE_OPEN)
}

pub fn create_dir(root: &RootHandle, p: &Located) -> Result<Dir> {
    open_final(root, p, FILE_OPEN_IF)
}

pub fn open_parent_dir(root: &RootHandle, p: &Located) -> Result<Dir> {
    let mut chain = walk_parents(root, p)?;
    let handle = match chain.pop() {
        Some(h) => h,
        None => nt::open_relative(root.raw(), "", &dir_open(FILE_OPEN, 0))
            .map_err(|s| io_err("open parent of", p, nt::status_error(s)))?,
    };
    Ok(Dir {
        handle,
        _pins: chain,
        mount_point: false,
    })
}

#[cfg(feature = "bench-internals")]
pub mod bench;

#[cfg(test)]
mod link_tests;
#[cfg(test)]
mod tests;
