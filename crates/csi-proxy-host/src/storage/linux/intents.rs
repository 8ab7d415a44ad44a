//! Records of the formats this node started and has not seen finish, so
//! that the retry of a format cut short (the proxy and its `mkfs` killed,
//! as a service stop kills the whole control group, or the node lost)
//! may format over what the cut-short `mkfs` left: group descriptors and
//! bitmaps without a superblock, which no probe identifies and which would
//! otherwise be refused as content in doubt.
//!
//! One file per volume, `<state dir>/formatting/<volume GUID>`, created
//! and synced before `mkfs` starts and removed once it succeeded. The
//! volume id is the partition's random GPT GUID, which a clone of the disk
//! carries too: the file names the disk and the partition's place on it
//! ([`FormatRecord`], in `format_record.rs`), and a record that does not
//! match the disk the volume is on now is ignored and removed
//! ([`record_speaks_for`]). Without a state directory (library mode,
//! tests of the library) nothing is recorded and a cut-short format is
//! refused on retry until an operator clears the volume.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use super::format_record::FormatRecord;
use crate::storage::VolumeId;

/// Where format records live (`None`: nowhere).
#[derive(Debug, Default)]
pub struct FormatIntents {
    dir: Option<PathBuf>,
}

/// A recorded format: removed by [`Intent::finished`], kept if dropped
/// (the format failed or was cut short: a retry may format over its
/// remains).
#[must_use]
pub struct Intent {
    path: Option<PathBuf>,
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

impl FormatIntents {
    /// Records in `<state_dir>/formatting`.
    pub fn new(state_dir: Option<&Path>) -> FormatIntents {
        FormatIntents {
            dir: state_dir.map(|d| d.join("formatting")),
        }
    }

    fn path(&self, volume: &VolumeId) -> Option<PathBuf> {
        // The GUID alone: `\\?\Volume{...}\` is no file name.
        let id = volume.as_str();
        let guid = id.split(['{', '}']).nth(1)?.to_ascii_lowercase();
        Some(self.dir.as_ref()?.join(guid))
    }

    /// Whether a format of `volume`, on the disk and at the place `record`
    /// names, was started here and never finished. A record of `volume`
    /// that names another disk or place is removed.
    pub fn pending(&self, volume: &VolumeId, record: &FormatRecord) -> bool {
        self.path(volume).is_some_and(|p| {
            fs::symlink_metadata(&p).is_ok_and(|m| m.is_file()) && record_speaks_for(&p, record)
        })
    }

    /// Records that a format of `volume` starts. A record that cannot be
    /// written is logged and the format goes ahead unrecorded: its retry,
    /// if it is cut short, will be refused rather than unsafe.
    pub fn begin(&self, volume: &VolumeId, record: &FormatRecord) -> Intent {
        let Some(path) = self.path(volume) else {
            return Intent { path: None };
        };
        let write = || -> io::Result<()> {
            let dir = path.parent().expect("a record has a directory");
            fs::create_dir_all(dir)?;
            let mut f = File::create(&path)?;
            f.write_all(record.encode().as_bytes())?;
            f.sync_all()?;
            sync_dir(dir)
        };
        match write() {
            Ok(()) => Intent { path: Some(path) },
            Err(e) => {
                tracing::warn!(
                    record = %path.display(),
                    error = %e,
                    "cannot record the format; a retry after it is cut short will be refused"
                );
                Intent { path: None }
            }
        }
    }
}

/// Whether the record at `path` is `record` (see [`FormatRecord::matches`]);
/// one that is not (another disk with the same partition GUID, the
/// partition moved, an unreadable or older record) is removed, and said so
/// in the log.
fn record_speaks_for(path: &Path, record: &FormatRecord) -> bool {
    let mut stored = Vec::new();
    let read = File::open(path).and_then(|f| f.take(4096).read_to_end(&mut stored));
    if read.is_ok() && record.matches(&stored) {
        return true;
    }
    let removed = fs::remove_file(path)
        .and_then(|()| sync_dir(path.parent().expect("a record has a directory")));
    tracing::warn!(
        record = %path.display(),
        recorded = %String::from_utf8_lossy(&stored).escape_debug(),
        now = %record.encode().escape_debug(),
        removed = removed.is_ok(),
        "a format record of this volume names another disk or another place on it: ignored and removed; \
         what the cut-short format left is content in doubt"
    );
    false
}

impl Intent {
    /// The format succeeded: its record goes.
    pub fn finished(self) {
        let Some(path) = self.path else { return };
        let removed = fs::remove_file(&path)
            .and_then(|()| sync_dir(path.parent().expect("a record has a directory")));
        if let Err(e) = removed {
            tracing::warn!(record = %path.display(), error = %e, "cannot remove the format record");
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
        assert_eq!(std::fs::read_to_string(&file).unwrap(), rec(1).encode());
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
        assert!(dir
            .path()
            .join("formatting/01234561-89ab-cdef-0123-456789abcdef")
            .is_file());
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
}
