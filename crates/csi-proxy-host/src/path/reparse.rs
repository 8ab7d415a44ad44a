//! The platform-neutral decision of what a Windows reparse point is (used by
//! the Windows confined filesystem, unit-tested everywhere).

use std::io;

use super::Link;

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
    super::target::strip_nt_prefix(target).is_some_and(|rest| {
        rest.len() >= 7 && rest.as_bytes()[..7].eq_ignore_ascii_case(b"Volume{")
    })
}

/// `\??\C:\x` and `\\?\C:\x` become `C:\x`; everything else is unchanged.
fn strip_drive_prefix(target: String) -> String {
    match super::target::strip_nt_prefix(&target) {
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
