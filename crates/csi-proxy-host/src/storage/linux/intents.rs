//! Records of the formats this node started and has not seen finish, so
//! that the retry of a format cut short (the proxy and its `mkfs` killed,
//! as a service stop kills the whole control group, or the node lost)
//! may format over what the cut-short `mkfs` left: group descriptors and
//! bitmaps without a superblock, which no probe identifies and which would
//! otherwise be refused as content in doubt.
//!
//! One file per volume, `<state dir>/formatting/<volume GUID>`, created
//! (`O_CREAT | O_EXCL | O_NOFOLLOW` beneath a handle of its directory,
//! itself opened beneath the state directory without following a link) with a content of ours and
//! synced before `mkfs` starts, and removed once it succeeded. Only a
//! regular file of ours with that content counts as a record: a planted
//! link or empty file is none (and is replaced when a format starts).
//! The state directory must not be inside an allowed root (checked at
//! start-up): a plugin cannot write there.
//! The volume id is the partition's random GPT GUID, which a clone of the
//! disk carries too: the record also names the disk and the partition's
//! place on it ([`FormatRecord`], in `format_record.rs`), and a record
//! that does not match the disk the volume is on now is ignored and
//! removed ([`FormatIntents::pending`]). Without a state directory (library mode,
//! tests of the library) nothing is recorded and a cut-short format is
//! refused on retry until an operator clears the volume.

use std::fs::File;
use std::io::{self, Read as _, Write as _};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nix::errno::Errno;
use nix::fcntl::{open, openat, OFlag};
use nix::sys::stat::{fstat, mkdirat, Mode, SFlag};
use nix::unistd::{unlinkat, UnlinkatFlags};

use super::format_record::FormatRecord;
use crate::storage::VolumeId;

/// The directory of the records, below the state directory.
const DIR: &str = "formatting";

/// Where format records live (`None`: nowhere).
#[derive(Debug, Default)]
pub struct FormatIntents {
    state_dir: Option<PathBuf>,
    /// The state directory as opened at start-up (`-state-dir`, checked
    /// there by identity): records are kept beneath it, never beneath
    /// whatever the path names later.
    handle: Option<Arc<File>>,
}

/// A recorded format: removed by [`Intent::finished`], kept if dropped
/// (the format failed or was cut short: a retry may format over its
/// remains).
#[must_use]
pub struct Intent {
    /// The records' directory and the record's name.
    record: Option<(OwnedFd, String)>,
}

/// What a record holds: written by [`FormatIntents::begin`] and checked by
/// [`FormatIntents::pending`], so that a file we did not write (an empty
/// file, a copy of another volume's record) is no record, and a record of
/// ours made on another disk (a clone with the same partition GUID) or at
/// another place is not this one.
fn content(guid: &str, record: &FormatRecord) -> String {
    format!("{}{}", header(guid), record.encode())
}

/// The first lines of a record: ours, and of which volume.
fn header(guid: &str) -> String {
    format!("csi-proxy format record\nvolume {guid}\n")
}

fn errno(e: Errno) -> io::Error {
    io::Error::from_raw_os_error(e as i32)
}

const DIR_FLAGS: OFlag = OFlag::O_DIRECTORY
    .union(OFlag::O_NOFOLLOW)
    .union(OFlag::O_CLOEXEC)
    .union(OFlag::O_RDONLY);

/// The records' directory, opened beneath the state directory's handle
/// without following a link (created with `create`). The state directory
/// is the operator's path, checked at start-up to lie outside the allowed
/// roots with its links resolved: a link there is the operator's.
fn open_dir(state_dir: &Path, handle: Option<&File>, create: bool) -> io::Result<OwnedFd> {
    let state = match handle {
        Some(h) => h.as_fd().try_clone_to_owned()?,
        None => {
            if create {
                std::fs::create_dir_all(state_dir)?;
            }
            open(
                state_dir,
                DIR_FLAGS.difference(OFlag::O_NOFOLLOW),
                Mode::empty(),
            )
            .map_err(errno)?
        }
    };
    if create {
        match mkdirat(&state, DIR, Mode::from_bits_truncate(0o700)) {
            Ok(()) | Err(Errno::EEXIST) => {}
            Err(e) => return Err(errno(e)),
        }
    }
    openat(&state, DIR, DIR_FLAGS, Mode::empty()).map_err(errno)
}

/// Whether `name` in `dir` is a record we wrote for `guid`: a regular
/// file (not a link: `O_NOFOLLOW`), ours, with one name, holding exactly
/// [`content`].
fn is_record(dir: &OwnedFd, name: &str, record: &FormatRecord) -> bool {
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    let Ok(fd) = openat(dir, name, flags, Mode::empty()) else {
        return false;
    };
    let Ok(st) = fstat(&fd) else { return false };
    let want = content(name, record);
    if SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) != SFlag::S_IFREG
        || st.st_uid != nix::unistd::geteuid().as_raw()
        || st.st_nlink != 1
        || u64::try_from(st.st_size).ok() != Some(want.len() as u64)
    {
        return false;
    }
    let mut got = Vec::with_capacity(want.len());
    let read = File::from(fd)
        .take(want.len() as u64 + 1)
        .read_to_end(&mut got);
    read.is_ok()
        && got
            .strip_prefix(header(name).as_bytes())
            .is_some_and(|rest| record.matches(rest))
}

impl FormatIntents {
    /// Records in `<state_dir>/formatting`.
    pub fn new(state_dir: Option<&Path>) -> FormatIntents {
        FormatIntents {
            state_dir: state_dir.map(Path::to_path_buf),
            handle: None,
        }
    }

    /// Keep the records beneath `handle`, the state directory as opened
    /// at start-up.
    pub fn with_handle(mut self, handle: Option<Arc<File>>) -> FormatIntents {
        self.handle = handle;
        self
    }

    /// The record's name: the volume's GUID (`\\?\Volume{...}\` is no
    /// file name).
    fn name(volume: &VolumeId) -> Option<String> {
        let id = volume.as_str();
        Some(id.split(['{', '}']).nth(1)?.to_ascii_lowercase())
    }

    /// Whether a format of `volume`, on the disk and at the place `record`
    /// names, was started here and never finished: a record we wrote for
    /// it is there. Anything else in its place (a record naming another
    /// disk or place, an older or damaged record, a planted file or link)
    /// is not, and is removed by name, with a warning.
    pub fn pending(&self, volume: &VolumeId, record: &FormatRecord) -> bool {
        let (Some(state), Some(name)) = (&self.state_dir, Self::name(volume)) else {
            return false;
        };
        let Ok(dir) = open_dir(state, self.handle.as_deref(), false) else {
            return false;
        };
        if is_record(&dir, &name, record) {
            return true;
        }
        match unlinkat(&dir, name.as_str(), UnlinkatFlags::NoRemoveDir) {
            Err(Errno::ENOENT) => {}
            removed => tracing::warn!(
                record = %state.join(DIR).join(&name).display(),
                now = %record.encode().escape_debug(),
                removed = removed.is_ok(),
                "a format record of this volume names another disk or another place on it, \
                 or is none of ours: ignored and removed; what a cut-short format left is content in doubt"
            ),
        }
        false
    }

    /// Records that a format of `volume` starts. A record that cannot be
    /// written is logged and the format goes ahead unrecorded: its retry,
    /// if it is cut short, will be refused rather than unsafe.
    pub fn begin(&self, volume: &VolumeId, record: &FormatRecord) -> Intent {
        let (Some(state), Some(name)) = (&self.state_dir, Self::name(volume)) else {
            return Intent { record: None };
        };
        match write_record(state, self.handle.as_deref(), &name, record) {
            Ok(dir) => Intent {
                record: Some((dir, name)),
            },
            Err(e) => {
                tracing::warn!(
                    record = %state.join(DIR).join(&name).display(),
                    error = %e,
                    "cannot record the format; a retry after it is cut short will be refused"
                );
                Intent { record: None }
            }
        }
    }
}

/// Create the record `name` beneath the records' directory handle with
/// `O_EXCL | O_NOFOLLOW` (a planted link or file is never written
/// through); whatever else is in its place (not a record of ours) is
/// removed first, by name, without following it.
fn write_record(
    state: &Path,
    handle: Option<&File>,
    name: &str,
    record: &FormatRecord,
) -> io::Result<OwnedFd> {
    let dir = open_dir(state, handle, true)?;
    if is_record(&dir, name, record) {
        return Ok(dir);
    }
    let flags =
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let mode = Mode::from_bits_truncate(0o600);
    let fd = match openat(&dir, name, flags, mode) {
        Err(Errno::EEXIST) => {
            tracing::warn!(
                record = %state.join(DIR).join(name).display(),
                "a file that is no format record of ours is in the record's place: removed"
            );
            match unlinkat(&dir, name, UnlinkatFlags::NoRemoveDir) {
                Ok(()) | Err(Errno::ENOENT) => {}
                Err(e) => return Err(errno(e)),
            }
            openat(&dir, name, flags, mode).map_err(errno)?
        }
        r => r.map_err(errno)?,
    };
    let mut f = File::from(fd);
    f.write_all(content(name, record).as_bytes())?;
    f.sync_all()?;
    nix::unistd::fsync(dir.as_fd()).map_err(errno)?;
    Ok(dir)
}

impl Intent {
    /// The format succeeded: its record goes (by name, beneath the
    /// directory handle it was made in).
    pub fn finished(self) {
        let Some((dir, name)) = self.record else {
            return;
        };
        let removed = unlinkat(&dir, name.as_str(), UnlinkatFlags::NoRemoveDir)
            .and_then(|()| nix::unistd::fsync(dir.as_fd()))
            .map_err(errno);
        if let Err(e) = removed {
            tracing::warn!(record = %name, error = %e, "cannot remove the format record");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vol(n: u8) -> VolumeId {
        VolumeId::parse(&format!(
            "\\\\?\\Volume{{0123456{n}-89AB-cdef-0123-456789abcdef}}\\"
        ))
        .unwrap()
    }

    fn rec(seq: u64) -> FormatRecord {
        FormatRecord::new(
            &crate::disk::DiskIds::default(),
            ("boot", seq),
            1 << 20,
            63 << 20,
        )
    }

    #[test]
    fn a_record_for_another_disk_is_ignored_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let i = FormatIntents::new(Some(dir.path()));
        drop(i.begin(&vol(1), &rec(1)));
        let file = dir
            .path()
            .join("formatting/01234561-89ab-cdef-0123-456789abcdef");
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            content("01234561-89ab-cdef-0123-456789abcdef", &rec(1))
        );
        // The same GUID on another disk: not this record's, and it goes.
        assert!(!i.pending(&vol(1), &rec(2)));
        assert!(!file.exists());
        assert!(!i.pending(&vol(1), &rec(1)));
        // An empty record (made before records named their disk) too.
        std::fs::write(&file, b"").unwrap();
        assert!(!i.pending(&vol(1), &rec(1)));
        assert!(!file.exists());
    }

    #[test]
    fn a_record_lives_from_begin_until_finished() {
        let dir = tempfile::tempdir().unwrap();
        let i = FormatIntents::new(Some(dir.path()));
        assert!(!i.pending(&vol(1), &rec(1)));
        let a = i.begin(&vol(1), &rec(1));
        assert!(i.pending(&vol(1), &rec(1)));
        assert!(!i.pending(&vol(2), &rec(1)), "one volume's record only");
        let record = dir
            .path()
            .join("formatting/01234561-89ab-cdef-0123-456789abcdef");
        assert!(record.is_file());
        assert_eq!(
            std::fs::read_to_string(&record).unwrap(),
            content("01234561-89ab-cdef-0123-456789abcdef", &rec(1))
        );
        a.finished();
        assert!(!i.pending(&vol(1), &rec(1)));
        // Dropped unfinished (failed or cut short): kept for the retry.
        drop(i.begin(&vol(2), &rec(1)));
        assert!(FormatIntents::new(Some(dir.path())).pending(&vol(2), &rec(1)));
    }

    #[test]
    fn without_a_state_dir_nothing_is_recorded() {
        let i = FormatIntents::new(None);
        let a = i.begin(&vol(1), &rec(1));
        assert!(!i.pending(&vol(1), &rec(1)));
        a.finished();
    }

    #[test]
    fn an_unwritable_dir_records_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("not-a-dir");
        std::fs::write(&file, b"x").unwrap();
        let i = FormatIntents::new(Some(&file));
        drop(i.begin(&vol(1), &rec(1)));
        assert!(!i.pending(&vol(1), &rec(1)));
    }

    /// The bypasses: a planted empty file counted as a record (a format
    /// over unidentified data without `-overwrite-unidentified-content`),
    /// and a planted link was followed and truncated. Neither is a record;
    /// starting a format replaces either without touching the link's
    /// target.
    #[test]
    fn planted_files_and_links_are_no_records_and_are_never_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let i = FormatIntents::new(Some(dir.path()));
        let guid = "01234561-89ab-cdef-0123-456789abcdef";
        let formatting = dir.path().join("formatting");
        std::fs::create_dir_all(&formatting).unwrap();
        let record = formatting.join(guid);
        // An empty file, a file with other content, a copy of another
        // volume's record: none counts.
        for planted in [
            String::new(),
            "x".into(),
            content("01234562-89ab-cdef-0123-456789abcdef", &rec(1)),
        ] {
            std::fs::write(&record, planted).unwrap();
            assert!(!i.pending(&vol(1), &rec(1)));
        }
        // (pending removed the last one: none of ours.)
        assert!(!record.exists());
        // A link to a host file, even to a file holding a record's text.
        let host_file = dir.path().join("host-file");
        std::fs::write(&host_file, content(guid, &rec(1))).unwrap();
        std::os::unix::fs::symlink(&host_file, &record).unwrap();
        assert!(!i.pending(&vol(1), &rec(1)));
        let a = i.begin(&vol(1), &rec(1));
        assert_eq!(
            std::fs::read_to_string(&host_file).unwrap(),
            content(guid, &rec(1))
        );
        assert!(!std::fs::symlink_metadata(&record).unwrap().is_symlink());
        assert!(i.pending(&vol(1), &rec(1)));
        a.finished();
        assert!(!i.pending(&vol(1), &rec(1)));
        assert!(host_file.is_file(), "the link's target stays");
        // The records' directory itself a link: not followed.
        std::fs::remove_dir(&formatting).unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), &formatting).unwrap();
        drop(i.begin(&vol(1), &rec(1)));
        assert!(!i.pending(&vol(1), &rec(1)));
        assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
    }
}
