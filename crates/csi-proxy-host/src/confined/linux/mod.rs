//! The confined filesystem on Linux: `openat2` beneath the root's handle
//! with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`,
//! then the `*at` calls on the parent directory reached.

use super::tree;
use super::{io_err, link_in_chain, mount_in_tree, tree_err, Kind, Located, MkdirOutcome};
use crate::error::{Error, Result};
use nix::errno::Errno;
use nix::fcntl::{OFlag, ResolveFlag};
use nix::sys::stat::SFlag;
use nix::unistd::UnlinkatFlags;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use sys::{beneath, statx_empty_path};

/// Directories created by Mkdir.
const DIR_MODE: u32 = 0o755;
/// Mount targets created by MountVolume.
const MOUNT_DIR_MODE: u32 = 0o750;

/// An allowed root, opened once (`O_PATH`; links in the configured root
/// path itself are followed: it is configuration).
pub struct RootHandle(OwnedFd);

impl RootHandle {
    pub fn open(path: &str) -> io::Result<RootHandle> {
        Ok(RootHandle(sys::open_root(path)?))
    }

    /// The root's path as the kernel names it now.
    pub fn real_path(&self) -> io::Result<std::path::PathBuf> {
        sys::fd_path(self.0.as_fd())
    }

    /// The id of the mount the handle is on.
    pub fn mount_id(&self) -> Option<u32> {
        sys::mount_id(self.0.as_fd()).ok()
    }
}

/// An open directory inside the roots (an `O_PATH` handle).
#[derive(Debug)]
pub struct Dir(OwnedFd);

/// Whether a directory handle is the root of a mount, and of which device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MountState {
    pub mount_root: bool,
    pub major: u32,
    pub minor: u32,
}

impl Dir {
    /// `/proc/self/fd/N`: names exactly this directory (mount and dentry)
    /// for calls that only take a path (mount, umount).
    pub fn proc_path(&self) -> String {
        format!("/proc/self/fd/{}", self.0.as_raw_fd())
    }

    /// A readable descriptor of the same directory (for `syncfs`, listing).
    pub fn open_readable(&self) -> io::Result<OwnedFd> {
        Ok(sys::openat(
            self.0.as_fd(),
            ".",
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        )?)
    }

    /// Does the directory hold no entries?
    pub fn is_empty(&self) -> io::Result<bool> {
        let fd = sys::openat(
            self.0.as_fd(),
            ".",
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        )?;
        let mut names = Vec::new();
        list(fd.as_fd(), &mut names, 1)?;
        Ok(names.is_empty())
    }

    /// Is this directory the root of a mount (something is mounted here),
    /// and the device of the filesystem it is on.
    pub fn mount_state(&self) -> io::Result<MountState> {
        let stx = statx_empty_path(self.0.as_fd())?;
        let known = stx.stx_attributes_mask & libc::STATX_ATTR_MOUNT_ROOT as u64 != 0;
        if !known {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the kernel does not report mount roots (statx STATX_ATTR_MOUNT_ROOT, Linux 5.8)",
            ));
        }
        Ok(MountState {
            mount_root: stx.stx_attributes & libc::STATX_ATTR_MOUNT_ROOT as u64 != 0,
            major: stx.stx_dev_major,
            minor: stx.stx_dev_minor,
        })
    }
}

impl AsFd for Dir {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

fn rel_of(p: &Located) -> &str {
    p.rel_str()
}

fn cname(s: &str) -> CString {
    // Components passed the path rules: no NUL.
    CString::new(s).expect("a checked path component has no NUL")
}

/// The parent directory of `p` (the root's handle itself when `p` is right
/// below it).
enum Parent<'a> {
    Root(BorrowedFd<'a>),
    Open(OwnedFd),
}

impl AsFd for Parent<'_> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Parent::Root(fd) => *fd,
            Parent::Open(fd) => fd.as_fd(),
        }
    }
}

/// Open the parent of `p` beneath the root; `p` is not a root.
fn open_parent<'a>(root: &'a RootHandle, p: &Located) -> Result<(Parent<'a>, CString)> {
    let parents = p.parent_rel().expect("not a root");
    let name = cname(p.name().expect("not a root"));
    if parents.is_empty() {
        return Ok((Parent::Root(root.0.as_fd()), name));
    }
    match beneath(
        root.0.as_fd(),
        parents,
        OFlag::O_PATH | OFlag::O_DIRECTORY,
        ResolveFlag::empty(),
    ) {
        Ok(fd) => Ok((Parent::Open(fd), name)),
        Err(Errno::ELOOP) => Err(link_in_chain(p)),
        Err(Errno::ENOENT) => Err(Error::NotFound(format!(
            "path {}: its parent directory does not exist",
            p.shown()
        ))),
        Err(Errno::ENOTDIR) => Err(Error::FailedPrecondition(format!(
            "path {}: a parent component is not a directory",
            p.shown()
        ))),
        Err(e) => Err(io_err("open parent of", p, e.into())),
    }
}

fn kind_of(mode: u32) -> Kind {
    match SFlag::from_bits_truncate(mode & SFlag::S_IFMT.bits()) {
        SFlag::S_IFDIR => Kind::Dir,
        SFlag::S_IFREG => Kind::File,
        SFlag::S_IFLNK => Kind::Link,
        _ => Kind::Other,
    }
}

/// The entry at `p` itself (a final link is the link).
fn open_entry(root: &RootHandle, p: &Located) -> Result<Option<OwnedFd>> {
    match beneath(
        root.0.as_fd(),
        rel_of(p),
        OFlag::O_PATH | OFlag::O_NOFOLLOW,
        ResolveFlag::empty(),
    ) {
        Ok(fd) => Ok(Some(fd)),
        Err(Errno::ENOENT) | Err(Errno::ENOTDIR) => Ok(None),
        // O_PATH | O_NOFOLLOW opens a final link itself: ELOOP is the chain.
        Err(Errno::ELOOP) => Err(link_in_chain(p)),
        Err(e) => Err(io_err("stat", p, e.into())),
    }
}

pub fn exists(root: &RootHandle, p: &Located) -> Result<bool> {
    Ok(open_entry(root, p)?.is_some())
}

pub fn kind(root: &RootHandle, p: &Located) -> Result<Option<Kind>> {
    let Some(fd) = open_entry(root, p)? else {
        return Ok(None);
    };
    let st = statx_empty_path(fd.as_fd()).map_err(|e| io_err("stat", p, e))?;
    Ok(Some(kind_of(st.stx_mode.into())))
}

pub fn read_link(root: &RootHandle, p: &Located) -> Result<Option<String>> {
    let Some(fd) = open_entry(root, p)? else {
        return Ok(None);
    };
    // Reading a link is not answered from a cache the kernel can be asked
    // to keep to: never in an inline attempt (`sys::readlinkat`; red team
    // 39r2: IsSymlink of a link whose server hung froze the async workers).
    if crate::inline::active() {
        return Err(crate::inline::would_block("reading a link"));
    }
    let st = statx_empty_path(fd.as_fd()).map_err(|e| io_err("stat", p, e))?;
    if kind_of(st.stx_mode.into()) != Kind::Link {
        return Ok(None);
    }
    let target = sys::readlinkat(fd.as_fd()).map_err(|e| io_err("read link", p, e.into()))?;
    // A target that is not UTF-8 cannot name a checked path: not followed.
    Ok(target.into_string().ok())
}

fn not_a_dir(p: &Located) -> Error {
    Error::AlreadyExists(format!(
        "path {}: it, or one of its parents, exists and is not a directory",
        p.shown()
    ))
}

pub fn mkdir_all(root: &RootHandle, p: &Located) -> Result<MkdirOutcome> {
    if p.is_root() {
        return Ok(MkdirOutcome::Done);
    }
    let dir_flags = OFlag::O_PATH | OFlag::O_DIRECTORY;
    // The common case in two calls: the parent exists, the directory is
    // made in it (or is there already).
    match open_parent(root, p) {
        Ok((parent, name)) => {
            match sys::mkdirat(parent.as_fd(), name.as_c_str(), DIR_MODE) {
                Ok(()) => return Ok(MkdirOutcome::Done),
                Err(Errno::EEXIST) => {
                    return match beneath(
                        parent.as_fd(),
                        name.as_c_str(),
                        dir_flags,
                        ResolveFlag::empty(),
                    ) {
                        Ok(_) => {
                            // The directory was there: nothing made.
                            crate::effect::nothing_changed();
                            Ok(MkdirOutcome::Done)
                        }
                        Err(Errno::ELOOP) => Ok(MkdirOutcome::FinalIsLink),
                        Err(Errno::ENOTDIR) => Err(not_a_dir(p)),
                        Err(e) => Err(io_err("mkdir", p, e.into())),
                    };
                }
                Err(e) => return Err(io_err("mkdir", p, e.into())),
            }
        }
        Err(Error::NotFound(_)) => {}
        Err(Error::FailedPrecondition(_)) => return Err(not_a_dir(p)),
        Err(e) => return Err(e),
    }
    // Parents missing: one component at a time, each created (if missing)
    // and opened relative to the handle of its parent.
    let mut cur = Parent::Root(root.0.as_fd());
    let count = p.components().count();
    for (i, comp) in p.components().enumerate() {
        let name = cname(comp);
        let mut created = false;
        let next = loop {
            match beneath(cur.as_fd(), comp, dir_flags, ResolveFlag::empty()) {
                Ok(fd) => break fd,
                Err(Errno::ENOENT) if !created => {
                    match sys::mkdirat(cur.as_fd(), name.as_c_str(), DIR_MODE) {
                        Ok(()) | Err(Errno::EEXIST) => created = true,
                        Err(e) => return Err(io_err("mkdir", p, e.into())),
                    }
                }
                Err(Errno::ELOOP) if i + 1 == count => return Ok(MkdirOutcome::FinalIsLink),
                Err(Errno::ELOOP) => return Err(link_in_chain(p)),
                Err(Errno::ENOTDIR) => return Err(not_a_dir(p)),
                Err(e) => return Err(io_err("mkdir", p, e.into())),
            }
        };
        cur = Parent::Open(next);
    }
    Ok(MkdirOutcome::Done)
}

pub fn remove(root: &RootHandle, p: &Located) -> Result<()> {
    let (parent, name) = open_parent(root, p)?;
    match sys::unlinkat(parent.as_fd(), name.as_c_str(), UnlinkatFlags::NoRemoveDir) {
        Ok(()) => Ok(()),
        Err(Errno::EISDIR) => {
            sys::unlinkat(parent.as_fd(), name.as_c_str(), UnlinkatFlags::RemoveDir)
                .map_err(|e| io_err("rmdir", p, e.into()))
        }
        Err(e) => Err(io_err("remove", p, e.into())),
    }
}

pub fn remove_all(root: &RootHandle, p: &Located) -> Result<()> {
    let (parent, name) = match open_parent(root, p) {
        Err(Error::NotFound(_)) => return Ok(()),
        other => other?,
    };
    // A file or a link goes at once; a directory is emptied first. A client
    // that swaps the entry meanwhile gets at most a few more rounds.
    for _ in 0..8 {
        match sys::unlinkat(parent.as_fd(), name.as_c_str(), UnlinkatFlags::NoRemoveDir) {
            Ok(()) | Err(Errno::ENOENT) => return Ok(()),
            Err(Errno::EISDIR) => {}
            Err(e) => return Err(io_err("remove", p, e.into())),
        }
        let dir = match beneath(
            parent.as_fd(),
            name.as_c_str(),
            OFlag::O_RDONLY | OFlag::O_DIRECTORY,
            ResolveFlag::RESOLVE_NO_XDEV,
        ) {
            Ok(fd) => fd,
            Err(Errno::ENOENT) => return Ok(()),
            Err(Errno::ELOOP) | Err(Errno::ENOTDIR) => continue,
            Err(Errno::EXDEV) => return Err(mount_in_tree(p)),
            Err(e) => return Err(io_err("open", p, e.into())),
        };
        tree::remove_contents(&LinuxTree, dir, &tree::Limits::DEFAULT)
            .map_err(|e| tree_err(p, e))?;
        match sys::unlinkat(parent.as_fd(), name.as_c_str(), UnlinkatFlags::RemoveDir) {
            Ok(()) | Err(Errno::ENOENT) => return Ok(()),
            Err(Errno::ENOTEMPTY) => continue,
            Err(e) => return Err(io_err("rmdir", p, e.into())),
        }
    }
    Err(Error::FailedPrecondition(format!(
        "path {}: it kept changing while it was being removed",
        p.shown()
    )))
}

pub fn remove_contents(root: &RootHandle, p: &Located) -> Result<()> {
    let dir = match beneath(
        root.0.as_fd(),
        rel_of(p),
        OFlag::O_RDONLY | OFlag::O_DIRECTORY,
        ResolveFlag::empty(),
    ) {
        Ok(fd) => fd,
        Err(Errno::ELOOP) => return Err(link_in_chain(p)),
        Err(Errno::ENOENT) => {
            return Err(Error::NotFound(format!(
                "path {} does not exist",
                p.shown()
            )))
        }
        Err(e) => return Err(io_err("open", p, e.into())),
    };
    tree::remove_contents(&LinuxTree, dir, &tree::Limits::DEFAULT).map_err(|e| tree_err(p, e))
}

pub fn symlink(root: &RootHandle, points_to: &str, link: &Located) -> Result<()> {
    let (parent, name) = open_parent(root, link)?;
    sys::symlinkat(points_to, parent.as_fd(), name.as_c_str())
        .map_err(|e| io_err("create symlink", link, e.into()))
}

/// After `ELOOP` on `p`: a link at the final component, or in the chain?
fn loop_error(root: &RootHandle, p: &Located) -> Error {
    if p.is_root() {
        return link_in_chain(p);
    }
    match open_parent(root, p) {
        Ok(_) => {
            Error::FailedPrecondition(format!("path {} is a link, not a directory", p.shown()))
        }
        Err(e) => e,
    }
}

pub fn open_parent_dir(root: &RootHandle, p: &Located) -> Result<Dir> {
    match open_parent(root, p)?.0 {
        Parent::Root(fd) => fd
            .try_clone_to_owned()
            .map(Dir)
            .map_err(|e| io_err("open parent of", p, e)),
        Parent::Open(fd) => Ok(Dir(fd)),
    }
}

pub fn open_dir(root: &RootHandle, p: &Located) -> Result<Dir> {
    match beneath(
        root.0.as_fd(),
        rel_of(p),
        OFlag::O_PATH | OFlag::O_DIRECTORY,
        ResolveFlag::empty(),
    ) {
        Ok(fd) => Ok(Dir(fd)),
        Err(Errno::ELOOP) => Err(loop_error(root, p)),
        Err(Errno::ENOENT) => Err(Error::NotFound(format!(
            "path {} does not exist",
            p.shown()
        ))),
        Err(Errno::ENOTDIR) => Err(Error::FailedPrecondition(format!(
            "path {} is not a directory",
            p.shown()
        ))),
        Err(e) => Err(io_err("open", p, e.into())),
    }
}

pub fn create_dir(root: &RootHandle, p: &Located) -> Result<Dir> {
    let (parent, name) = open_parent(root, p)?;
    match sys::mkdirat(parent.as_fd(), name.as_c_str(), MOUNT_DIR_MODE) {
        Ok(()) | Err(Errno::EEXIST) => {}
        Err(e) => return Err(io_err("mkdir", p, e.into())),
    }
    match beneath(
        parent.as_fd(),
        name.as_c_str(),
        OFlag::O_PATH | OFlag::O_DIRECTORY,
        ResolveFlag::empty(),
    ) {
        Ok(fd) => Ok(Dir(fd)),
        Err(Errno::ELOOP) => Err(Error::FailedPrecondition(format!(
            "path {} is a link, not a directory",
            p.shown()
        ))),
        Err(Errno::ENOTDIR) => Err(Error::FailedPrecondition(format!(
            "path {} is not a directory",
            p.shown()
        ))),
        Err(e) => Err(io_err("open", p, e.into())),
    }
}

mod listing;
mod sys;

use listing::{list, LinuxTree};

/// The file systems an operation at `full` (its real location, absolute)
/// under the allowed root whose real location is `root`, its handle on
/// the mount `root_mount` when known, is counted in
/// ([`super::stuck::Tree::charged_below`], else
/// [`super::stuck::Tree::charged`]), from this process's mount table
/// ([`sys::mount_table`]). `None` when the table cannot be read or has
/// nothing there.
pub fn charged(
    root_mount: Option<u32>,
    root: &std::path::Path,
    full: &std::path::Path,
) -> Option<Vec<(std::path::PathBuf, u64)>> {
    let table = sys::mount_table().ok()?;
    root_mount
        .and_then(|id| table.charged_below(id, root, full))
        .or_else(|| Some(table.charged(root, full)))
        .filter(|c| !c.is_empty())
}
