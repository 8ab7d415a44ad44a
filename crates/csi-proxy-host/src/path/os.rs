//! [`OsLinks`]: the real filesystem behind [`LinkReader`], and the
//! platform-neutral decision of what a Windows reparse point is.

use std::io;

use super::{Link, LinkReader};

/// Reparse tag of an NTFS symbolic link.
pub const IO_REPARSE_TAG_SYMLINK: u32 = 0xA000_000C;
/// Reparse tag of a junction or a volume mount point.
pub const IO_REPARSE_TAG_MOUNT_POINT: u32 = 0xA000_0003;
/// The "name surrogate" bit (`IsReparseTagNameSurrogate`): the reparse point
/// stands for another named entity.
const NAME_SURROGATE_BIT: u32 = 0x2000_0000;

/// What a Windows reparse point with `tag` is. `read_target` (the stored
/// target, e.g. from `std::fs::read_link`) is called only for symlinks and
/// junctions.
///
/// Tags are identified with `==`, never by masking: upstream's
/// `tag & IO_REPARSE_TAG_MOUNT_POINT != 0` counts every symlink as a mount
/// point. A junction whose target is a volume (`\??\Volume{...}`) is a
/// [`Link::MountPoint`]; any other junction is a directory link and is
/// reported as [`Link::Symlink`]. A leading `\??\` or `\\?\` is stripped from
/// drive-letter targets (other prefixed targets are kept whole so the
/// resolver can refuse them). Any other tag marked as a name surrogate (a
/// link of a kind we cannot follow, e.g. WSL symlinks) is an error, so the
/// caller fails closed; remaining tags (dedup, cloud files, ...) are plain
/// files or directories.
pub fn classify_reparse_point(
    tag: u32,
    read_target: impl FnOnce() -> io::Result<String>,
) -> io::Result<Link> {
    if tag == IO_REPARSE_TAG_SYMLINK {
        Ok(Link::Symlink(strip_drive_prefix(read_target()?)))
    } else if tag == IO_REPARSE_TAG_MOUNT_POINT {
        let target = read_target()?;
        if is_volume_target(&target) {
            Ok(Link::MountPoint)
        } else {
            Ok(Link::Symlink(strip_drive_prefix(target)))
        }
    } else if tag & NAME_SURROGATE_BIT != 0 {
        // Only the documented name-surrogate *flag* is tested with a mask;
        // the kind of link is decided above by equality.
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("unsupported link-like reparse point (tag 0x{tag:08X})"),
        ))
    } else {
        Ok(Link::NotALink)
    }
}

/// `\??\Volume{` or `\\?\Volume{` (case-insensitive).
fn is_volume_target(target: &str) -> bool {
    super::resolve::strip_nt_prefix(target).is_some_and(|rest| {
        rest.len() >= 7 && rest.as_bytes()[..7].eq_ignore_ascii_case(b"Volume{")
    })
}

/// `\??\C:\x` and `\\?\C:\x` become `C:\x`; everything else is unchanged.
fn strip_drive_prefix(target: String) -> String {
    match super::resolve::strip_nt_prefix(&target) {
        Some(rest) => {
            let b = rest.as_bytes();
            if b.len() >= 2
                && b[0].is_ascii_alphabetic()
                && b[1] == b':'
                && (b.len() == 2 || b[2] == b'\\' || b[2] == b'/')
            {
                rest.to_string()
            } else {
                target
            }
        }
        None => target,
    }
}

/// The real filesystem: Unix via `symlink_metadata` + `read_link`; Windows
/// via `symlink_metadata` + the reparse tag from `FindFirstFileW` +
/// `read_link`.
#[derive(Debug, Clone, Copy, Default)]
pub struct OsLinks;

impl LinkReader for OsLinks {
    fn read_link(&self, path: &str) -> io::Result<Link> {
        read_link_os(path)
    }

    /// Linux: one `openat2(O_PATH, RESOLVE_NO_SYMLINKS)`, which fails with
    /// ELOOP on any symlink in the path and with ENOENT on a missing
    /// component. Any failure (including an old kernel without openat2)
    /// just means "not known".
    #[cfg(target_os = "linux")]
    fn is_link_free(&self, path: &str) -> bool {
        use nix::fcntl::{openat2, OFlag, OpenHow, ResolveFlag, AT_FDCWD};
        let how = OpenHow::new()
            // No O_NOFOLLOW: with O_PATH it would return the final link itself.
            .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
            .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS);
        openat2(AT_FDCWD, path, how).is_ok()
    }
}

/// A missing path, or one under a non-directory.
#[cfg(any(unix, windows))]
fn is_not_found(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

#[cfg(any(unix, windows))]
fn target_string(target: std::path::PathBuf) -> io::Result<String> {
    target.into_os_string().into_string().map_err(|t| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("link target {t:?} is not valid Unicode"),
        )
    })
}

#[cfg(unix)]
fn read_link_os(path: &str) -> io::Result<Link> {
    match std::fs::symlink_metadata(path) {
        Err(e) if is_not_found(&e) => Ok(Link::NotFound),
        Err(e) => Err(e),
        Ok(md) if md.file_type().is_symlink() => {
            Ok(Link::Symlink(target_string(std::fs::read_link(path)?)?))
        }
        Ok(_) => Ok(Link::NotALink),
    }
}

#[cfg(windows)]
fn read_link_os(path: &str) -> io::Result<Link> {
    use std::os::windows::fs::MetadataExt;
    use windows_sys::Win32::Storage::FileSystem::FILE_ATTRIBUTE_REPARSE_POINT;

    let md = match std::fs::symlink_metadata(path) {
        Err(e) if is_not_found(&e) => return Ok(Link::NotFound),
        Err(e) => return Err(e),
        Ok(md) => md,
    };
    if md.file_attributes() & FILE_ATTRIBUTE_REPARSE_POINT == 0 {
        return Ok(Link::NotALink);
    }
    match win::reparse_tag(path) {
        Err(e) if is_not_found(&e) => Ok(Link::NotFound),
        Err(e) => Err(e),
        Ok(None) => Ok(Link::NotALink),
        Ok(Some(tag)) => classify_reparse_point(tag, || target_string(std::fs::read_link(path)?)),
    }
}

#[cfg(not(any(unix, windows)))]
fn read_link_os(_path: &str) -> io::Result<Link> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "link inspection is not supported on this OS",
    ))
}

#[cfg(windows)]
mod win {
    use std::io;

    use windows_sys::Win32::Foundation::{HANDLE, INVALID_HANDLE_VALUE};
    use windows_sys::Win32::Storage::FileSystem::{
        FindClose, FindFirstFileW, FILE_ATTRIBUTE_REPARSE_POINT, WIN32_FIND_DATAW,
    };

    /// Owns a find handle and closes it exactly once.
    struct FindHandle(HANDLE);

    impl Drop for FindHandle {
        fn drop(&mut self) {
            // SAFETY: the handle came from a successful FindFirstFileW and is
            // closed only here, once.
            unsafe {
                FindClose(self.0);
            }
        }
    }

    /// The reparse tag of `path` (`None` when it is not a reparse point).
    pub(super) fn reparse_tag(path: &str) -> io::Result<Option<u32>> {
        if path.contains(['*', '?']) {
            // FindFirstFileW would expand wildcards.
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "path contains a wildcard character",
            ));
        }
        // Like std: long paths need the verbatim prefix (the path is already
        // absolute and normalised).
        let long = path.len() >= 248 && !path.starts_with(r"\\");
        let wide: Vec<u16> = if long { r"\\?\" } else { "" }
            .encode_utf16()
            .chain(path.encode_utf16())
            .chain(std::iter::once(0))
            .collect();
        let mut data = WIN32_FIND_DATAW::default();
        // SAFETY: `wide` is a NUL-terminated UTF-16 string and `data` a
        // writable WIN32_FIND_DATAW, both alive for the whole call; the
        // returned handle is owned by `FindHandle` right after the check.
        let handle = unsafe { FindFirstFileW(wide.as_ptr(), &mut data) };
        if handle == INVALID_HANDLE_VALUE {
            return Err(io::Error::last_os_error());
        }
        let _guard = FindHandle(handle);
        if data.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT == 0 {
            return Ok(None);
        }
        Ok(Some(data.dwReserved0))
    }
}
