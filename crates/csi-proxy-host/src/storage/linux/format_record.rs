//! What a format record says, and when it speaks for a volume: the
//! content of `<state dir>/formatting/<volume GUID>` (see [`super::intents`]
//! for where it lives and when it is written and removed).
//!
//! A volume id is the partition's GPT GUID, which a clone of the disk or
//! a restored snapshot carries too; so the record also names the disk it
//! was made on, by identities another disk cannot share, and the
//! partition's place on it:
//! - the disk's page-0x83 id and serial number, as ListDiskIDs gives them;
//! - for a disk with neither (a loop device, a virtual disk without a
//!   serial), the kernel's attachment of it instead: this boot's id and
//!   the disk's `diskseq`, which the kernel never gives twice in a boot (a
//!   disk without identities is then recognised until it is detached or
//!   the node restarts, no longer);
//! - the partition's first byte and size.
//!
//! A record speaks for a volume only if every line matches what the disk
//! shows now ([`FormatRecord::matches`]); one that does not is ignored and
//! removed by the caller. Windows keeps no record (a restart of the proxy
//! does not stop a format running in the storage service).

use crate::disk::DiskIds;

const MAGIC: &str = "csi-proxy format record 1";

/// What a format record names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FormatRecord {
    lines: Vec<(&'static str, String)>,
}

impl FormatRecord {
    /// The record of a format of the partition at `start` (bytes) of
    /// `size` bytes on a disk with identities `ids`; `attachment` (this
    /// boot's id, the disk's diskseq) names a disk without identities.
    pub fn new(ids: &DiskIds, attachment: (&str, u64), start: u64, size: u64) -> FormatRecord {
        let mut lines = Vec::new();
        if ids.page83.is_empty() && ids.serial_number.is_empty() {
            lines.push(("boot", attachment.0.trim().to_string()));
            lines.push(("diskseq", attachment.1.to_string()));
        } else {
            lines.push(("page83", ids.page83.clone()));
            lines.push(("serial", ids.serial_number.clone()));
        }
        lines.push(("start", start.to_string()));
        lines.push(("size", size.to_string()));
        FormatRecord { lines }
    }

    /// The file's content: a first line naming the format, then one
    /// `key value` line each, values escaped (no line break can end one
    /// early).
    pub fn encode(&self) -> String {
        let mut s = format!("{MAGIC}\n");
        for (k, v) in &self.lines {
            s.push_str(&format!("{k} {}\n", v.escape_default()));
        }
        s
    }

    /// Whether the record read from a file (`stored`) is this one: the
    /// same disk, the same place on it. Anything else (another disk, a
    /// partition moved or resized, an older record without a disk, a
    /// damaged file) is not.
    pub fn matches(&self, stored: &[u8]) -> bool {
        stored == self.encode().as_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(page83: &str, serial: &str) -> DiskIds {
        DiskIds {
            page83: page83.into(),
            serial_number: serial.into(),
        }
    }

    const BOOT: &str = "0b1d2c3e-0000-4000-8000-000000000001";

    #[test]
    fn a_record_matches_its_disk_and_place_only() {
        let r = FormatRecord::new(
            &ids("naa.5000c500a1b2c3d4", "S3Z1"),
            (BOOT, 7),
            1 << 20,
            63 << 20,
        );
        let stored = r.encode();
        assert!(r.matches(stored.as_bytes()));
        // Another boot or diskseq does not matter for a disk with ids: a
        // retry after the node restarted still finds its record.
        let same = FormatRecord::new(
            &ids("naa.5000c500a1b2c3d4", "S3Z1"),
            ("other", 9),
            1 << 20,
            63 << 20,
        );
        assert!(same.matches(stored.as_bytes()));
        for other in [
            FormatRecord::new(
                &ids("naa.5000c500a1b2c3d5", "S3Z1"),
                (BOOT, 7),
                1 << 20,
                63 << 20,
            ),
            FormatRecord::new(
                &ids("naa.5000c500a1b2c3d4", "S3Z2"),
                (BOOT, 7),
                1 << 20,
                63 << 20,
            ),
            FormatRecord::new(
                &ids("naa.5000c500a1b2c3d4", "S3Z1"),
                (BOOT, 7),
                2 << 20,
                63 << 20,
            ),
            FormatRecord::new(
                &ids("naa.5000c500a1b2c3d4", "S3Z1"),
                (BOOT, 7),
                1 << 20,
                62 << 20,
            ),
            FormatRecord::new(&ids("", ""), (BOOT, 7), 1 << 20, 63 << 20),
        ] {
            assert!(!other.matches(stored.as_bytes()), "{other:?}");
        }
        // An empty record (csi-proxy before the disk was named) or a
        // damaged one speaks for nothing.
        assert!(!r.matches(b""));
        assert!(!r.matches(&stored.as_bytes()[..stored.len() - 1]));
    }

    #[test]
    fn a_disk_without_ids_is_named_by_its_attachment() {
        let r = FormatRecord::new(&ids("", ""), (BOOT, 7), 1 << 20, 63 << 20);
        assert!(r.matches(r.encode().as_bytes()));
        assert!(r.encode().contains("diskseq 7\n"), "{}", r.encode());
        for other in [
            FormatRecord::new(&ids("", ""), (BOOT, 8), 1 << 20, 63 << 20),
            FormatRecord::new(&ids("", ""), ("another boot", 7), 1 << 20, 63 << 20),
        ] {
            assert!(!other.matches(r.encode().as_bytes()));
        }
    }

    #[test]
    fn values_cannot_forge_lines() {
        // A serial that carries a line break does not become two lines.
        let r = FormatRecord::new(&ids("x", "s\nstart 0"), (BOOT, 7), 1 << 20, 63 << 20);
        let text = r.encode();
        assert_eq!(text.lines().count(), 5, "{text}");
        assert!(!FormatRecord::new(&ids("x", "s"), (BOOT, 7), 0, 63 << 20).matches(text.as_bytes()));
    }
}
