//! Every system call of the confined filesystem on Linux, in one place, each
//! either safe in an inline attempt or refused there.
//!
//! Inline attempts ([`crate::inline`]) run on an async worker, so they must
//! never wait for a device, a network or a FUSE server. Two calls can be
//! made so: a lookup answered from the kernel's caches only
//! ([`beneath`], `RESOLVE_CACHED`) and a `statx` of an open file that takes
//! the attributes the kernel holds ([`statx_empty_path`],
//! `AT_STATX_DONT_SYNC`). Every other call here answers `EAGAIN` at once in
//! an inline attempt (the caller turns it into "would block", and the call
//! runs again on the blocking pool) and is made only on a blocking thread.
//!
//! This is an allow-list, not a list of what was found to block (red team
//! 39r2: `readlinkat` slipped into an inline path and a FUSE server that
//! never sent a link's text froze the workers): the rest of
//! `confined/linux` calls the system only through this module, which a
//! test checks ([`tests::the_backend_calls_the_system_only_through_here`]).

use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::Mode;
use nix::unistd::UnlinkatFlags;
use std::ffi::{CStr, CString, OsString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

/// `EAGAIN` in an inline attempt: the calls below that may wait.
fn blocking_only() -> nix::Result<()> {
    if crate::inline::active() {
        Err(Errno::EAGAIN)
    } else {
        Ok(())
    }
}

/// `openat2` beneath `dir`: no links, no magic links, never above `dir`.
/// In an inline attempt the lookup is answered from the kernel's caches
/// only (`RESOLVE_CACHED`): a lookup that would read a device (a directory
/// not cached on a mounted volume whose disk may hang) or ask a network or
/// FUSE filesystem fails with `EAGAIN`.
pub(super) fn beneath<P: ?Sized + nix::NixPath>(
    dir: BorrowedFd<'_>,
    rel: &P,
    flags: OFlag,
    extra: ResolveFlag,
) -> nix::Result<OwnedFd> {
    let cached = crate::inline::active();
    let only_cached = if cached {
        ResolveFlag::from_bits_retain(libc::RESOLVE_CACHED)
    } else {
        ResolveFlag::empty()
    };
    let how = OpenHow::new().flags(flags | OFlag::O_CLOEXEC).resolve(
        ResolveFlag::RESOLVE_BENEATH
            | ResolveFlag::RESOLVE_NO_SYMLINKS
            | ResolveFlag::RESOLVE_NO_MAGICLINKS
            | only_cached
            | extra,
    );
    // EAGAIN: the lookup raced with a rename or mount; it is safe to retry
    // (from the caches only: the lookup needs more than they hold).
    let mut tries = 0;
    loop {
        let r = if rel.is_empty() {
            nix::fcntl::openat2(dir, ".", how)
        } else {
            nix::fcntl::openat2(dir, rel, how)
        };
        match r {
            Err(Errno::EAGAIN) if cached => return Err(Errno::EAGAIN),
            Err(Errno::EAGAIN) if tries < 16 => tries += 1,
            other => return other,
        }
    }
}

/// `statx` of the open file itself (not what a link there names): unlike
/// `fstat`, its inode number and sizes are 64-bit on every target.
/// In an inline attempt the attributes the kernel holds are taken as they
/// are (`AT_STATX_DONT_SYNC`: a network or FUSE filesystem is not asked;
/// an inline attempt reads only the type, which never changes).
pub(super) fn statx_empty_path(fd: BorrowedFd<'_>) -> io::Result<libc::statx> {
    let dont_sync = if crate::inline::active() {
        libc::AT_STATX_DONT_SYNC
    } else {
        0
    };
    let mut stx = std::mem::MaybeUninit::<libc::statx>::zeroed();
    // SAFETY: the path is a NUL-terminated empty string, `fd` is an open
    // descriptor, and `stx` points to writable memory of the right size that
    // the kernel fills on success (it was zeroed before).
    let r = unsafe {
        libc::statx(
            fd.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW | dont_sync,
            libc::STATX_BASIC_STATS,
            stx.as_mut_ptr(),
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: statx succeeded and filled the structure (zeroed before).
    Ok(unsafe { stx.assume_init() })
}

/// The id of the mount `fd` is on (`statx` `STATX_MNT_ID`, Linux 5.8+:
/// the id of `/proc/self/mountinfo`'s first field). Blocking only.
pub(super) fn mount_id(fd: BorrowedFd<'_>) -> io::Result<u32> {
    const STATX_MNT_ID: u32 = 0x1000;
    blocking_only()?;
    let mut stx = std::mem::MaybeUninit::<libc::statx>::zeroed();
    // SAFETY: as in `statx_empty_path`: an empty NUL-terminated path on an
    // open descriptor, `stx` writable, zeroed, of the right size.
    let r = unsafe {
        libc::statx(
            fd.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW | libc::AT_STATX_DONT_SYNC,
            STATX_MNT_ID,
            stx.as_mut_ptr(),
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: statx succeeded and filled the structure (zeroed before).
    let stx = unsafe { stx.assume_init() };
    if stx.stx_mask & STATX_MNT_ID == 0 {
        return Err(io::Error::from(io::ErrorKind::Unsupported));
    }
    u32::try_from(stx.stx_mnt_id).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))
}

/// Opens a configured root by its path (links in it followed: it is
/// configuration). Blocking only.
pub(super) fn open_root(path: &str) -> io::Result<OwnedFd> {
    blocking_only()?;
    Ok(nix::fcntl::open(
        path,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?)
}

/// The path the kernel gives an open descriptor now (`/proc/self/fd/N`).
/// Blocking only.
pub(super) fn fd_path(fd: BorrowedFd<'_>) -> io::Result<std::path::PathBuf> {
    blocking_only()?;
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// `openat` relative to `dir` (only "." and ".." are opened so).
/// Blocking only.
pub(super) fn openat(dir: BorrowedFd<'_>, name: &str, flags: OFlag) -> nix::Result<OwnedFd> {
    blocking_only()?;
    nix::fcntl::openat(dir, name, flags, Mode::empty())
}

/// The text of the link `fd` (opened `O_PATH | O_NOFOLLOW`) stores.
/// Blocking only: a network or FUSE server is asked, a long link on a disk
/// is a block read.
pub(super) fn readlinkat(fd: BorrowedFd<'_>) -> nix::Result<OsString> {
    blocking_only()?;
    nix::fcntl::readlinkat(fd, "")
}

/// Blocking only.
pub(super) fn mkdirat(dir: BorrowedFd<'_>, name: &CStr, mode: u32) -> nix::Result<()> {
    blocking_only()?;
    nix::sys::stat::mkdirat(dir, name, Mode::from_bits_truncate(mode))
}

/// Blocking only.
pub(super) fn unlinkat(dir: BorrowedFd<'_>, name: &CStr, flags: UnlinkatFlags) -> nix::Result<()> {
    blocking_only()?;
    nix::unistd::unlinkat(dir, name, flags)
}

/// Blocking only.
pub(super) fn symlinkat(points_to: &str, dir: BorrowedFd<'_>, name: &CStr) -> nix::Result<()> {
    blocking_only()?;
    nix::unistd::symlinkat(points_to, dir, name)
}

/// Up to `max` entries of the directory `fd` (open for reading), from its
/// start, with the type the kernel gives (`None`: not given): rustix's
/// `getdents64` reader over the descriptor itself (no path is resolved
/// again). Blocking only.
pub(super) fn list(
    fd: BorrowedFd<'_>,
    max: usize,
    mut each: impl FnMut(CString, Option<rustix::fs::FileType>),
) -> io::Result<()> {
    blocking_only()?;
    nix::unistd::lseek(fd, 0, nix::unistd::Whence::SeekSet)?;
    let mut buf = Vec::with_capacity(16 * 1024);
    let mut dir = rustix::fs::RawDir::new(fd, buf.spare_capacity_mut());
    let mut n = 0;
    while n < max {
        let Some(entry) = dir.next() else { break };
        let entry = entry?;
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        let kind = match entry.file_type() {
            rustix::fs::FileType::Unknown => None,
            t => Some(t),
        };
        each(name.to_owned(), kind);
        n += 1;
    }
    Ok(())
}

/// This process's mount table as a tree, read again only when the kernel
/// says it changed (`poll` on `/proc/self/mountinfo` reports `POLLPRI`
/// after a mount or unmount: a mount made a moment ago is never missed,
/// red team 40mount). Blocking only.
pub(super) fn mount_table() -> io::Result<std::sync::Arc<super::super::stuck::Tree>> {
    use super::super::stuck::{MountRow, Tree};
    use std::io::{Seek, SeekFrom};
    use std::sync::{Arc, Mutex};
    blocking_only()?;
    static TABLE: Mutex<Option<(std::fs::File, Arc<Tree>)>> = Mutex::new(None);
    let mut g = TABLE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((f, t)) = g.as_ref() {
        let mut pfd = libc::pollfd {
            fd: f.as_raw_fd(),
            events: libc::POLLPRI,
            revents: 0,
        };
        // SAFETY: one valid pollfd for an open descriptor, no wait.
        let n = unsafe { libc::poll(&mut pfd, 1, 0) };
        if n == 0 {
            return Ok(t.clone());
        }
    }
    let mut f = match g.take() {
        Some((f, _)) => f,
        None => std::fs::File::open("/proc/self/mountinfo")?,
    };
    f.seek(SeekFrom::Start(0))?;
    let mut rows = Vec::new();
    let mut budget = u64::MAX;
    crate::storage::linux::mountinfo::scan(&f, &mut budget, |m| {
        rows.push(MountRow {
            id: m.id,
            parent: m.parent,
            point: m.path().to_path_buf(),
            dev: libc::makedev(m.major, m.minor),
        });
    })?;
    let t = Arc::new(Tree::new(rows));
    *g = Some((f, t.clone()));
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The calls that reach the system, by name, as they would be written
    /// outside this module.
    const CALLS: &[&str] = &[
        "openat2(",
        "openat(",
        "readlinkat(",
        "readlink(",
        "read_link(",
        "mkdirat(",
        "unlinkat(",
        "symlinkat(",
        "renameat",
        "linkat(",
        "lseek(",
        "statx(",
        "fstat(",
        "fstatat(",
        "RawDir::new(",
        "libc::syscall(",
        "nix::fcntl::open(",
        "std::fs::",
        "mountinfo::read(",
    ];

    /// The backend's other files, without their tests.
    fn backend() -> Vec<(&'static str, &'static str)> {
        [
            ("mod.rs", include_str!("mod.rs")),
            ("listing.rs", include_str!("listing.rs")),
        ]
        .into_iter()
        .map(|(n, t)| (n, t.split("#[cfg(test)]").next().unwrap_or(t)))
        .collect()
    }

    #[test]
    fn the_backend_calls_the_system_only_through_here() {
        for (file, text) in backend() {
            for (no, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                for call in CALLS {
                    let mut from = 0;
                    while let Some(i) = code[from..].find(call) {
                        let at = from + i;
                        let before = &code[..at];
                        // `sys::openat(`: through here; `fn read_link(`:
                        // our own function; a longer name is another one.
                        let ok = before.ends_with("sys::")
                            || before.ends_with("fn ")
                            || before.ends_with('_')
                            || before.chars().last().is_some_and(|c| c.is_alphanumeric());
                        assert!(ok, "{file}:{}: `{call}` outside sys.rs: {line}", no + 1);
                        from = at + call.len();
                    }
                }
            }
        }
    }

    #[test]
    fn calls_that_may_wait_answer_would_block_inline() {
        let dir = tempfile::tempdir().unwrap();
        let fd = nix::fcntl::open(
            dir.path(),
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .unwrap();
        use std::os::fd::AsFd;
        let d = fd.as_fd();
        crate::inline::run(|| {
            assert_eq!(mkdirat(d, c"x", 0o755), Err(Errno::EAGAIN));
            assert_eq!(
                unlinkat(d, c"x", UnlinkatFlags::NoRemoveDir),
                Err(Errno::EAGAIN)
            );
            assert_eq!(symlinkat("y", d, c"l"), Err(Errno::EAGAIN));
            assert_eq!(readlinkat(d), Err(Errno::EAGAIN));
            assert_eq!(openat(d, "..", OFlag::O_RDONLY).err(), Some(Errno::EAGAIN));
            assert!(list(d, 10, |_, _| ()).is_err());
            assert!(open_root("/").is_err());
            assert!(fd_path(d).is_err());
            assert!(mount_table().is_err());
            assert!(mount_id(d).is_err());
            // The two that may run inline do.
            assert!(statx_empty_path(d).is_ok());
            assert!(beneath(d, "", OFlag::O_PATH, ResolveFlag::empty()).is_ok());
        });
        assert!(!dir.path().join("x").exists());
        // Outside an inline attempt they run.
        mkdirat(d, c"x", 0o755).unwrap();
        assert!(dir.path().join("x").is_dir());
    }
}
