//! What a destructive storage operation may write over, decided the same
//! way on every OS from the bytes the backend read through the handle it
//! holds (see [`parse::content`] for what is identified).
//!
//! * PartitionDisk on a disk without a partition table goes ahead only if
//!   nothing is identified on it and the spans a table is written over
//!   (its first and last MiB) are all zero; non-zero bytes that no probe
//!   explains are refused too unless the operator allowed them
//!   (`-overwrite-unidentified-content`). Identified content never is.
//! * FormatVolume replaces a filesystem, or formats an empty volume; every
//!   other identified content (volume-manager, RAID and pool members,
//!   encrypted containers, swap, partition tables) is refused, and so are
//!   unidentified non-zero bytes in the volume's zero-check spans (its
//!   first 64 MiB, 4 KiB every 4 GiB, its last MiB) unless allowed; over a
//!   filesystem, the spans past the extent it records (all of them when
//!   its size is not read): a filesystem found is never "the rest is
//!   nothing".
//! * PartitionDisk, whatever the table (none, an empty DOS table, a GPT
//!   without data partitions), checks the region the partition it creates
//!   will cover: nothing identified there, with or without the flag, and
//!   its zero-check spans zero unless allowed. An empty DOS table's disk
//!   signature and entries are replaced; its boot code is content.
//! * IsVolumeFormatted is true for any identified content: drivers format
//!   whatever is reported unformatted.

use super::parse::content::{self, Class, Device, Found, Regions, Scanned};
use super::VolumeId;
use crate::{Error, Result};

/// Whether content that no probe identifies may be overwritten.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Overwrite {
    /// `-overwrite-unidentified-content`: non-zero bytes that no probe
    /// explains may be written over. Identified content never is.
    pub unidentified: bool,
}

const HOW_TO_CLEAR: &str = "if it is really unused, clear it first (for example with wipefs -a on Linux, or Clear-Disk on Windows)";

/// Where sector 0's disk signature and partition entries begin: the bytes
/// before are an MBR's boot code.
const MBR_TABLE_START: usize = 440;

/// PartitionDisk's check of a disk without a partition table (a raw disk,
/// or one whose MBR has no partition: then `skip_mbr_sector`, as that
/// sector is the empty table being replaced).
pub fn check_partition(
    disk: u32,
    dev: &Regions,
    skip_mbr_sector: bool,
    allow: Overwrite,
) -> Result<()> {
    let found: Vec<Found> = dev
        .found
        .iter()
        .copied()
        .filter(|f| !(skip_mbr_sector && f.name == "dos"))
        .collect();
    if !found.is_empty() {
        return Err(Error::FailedPrecondition(format!(
            "disk {disk} has no partition table but holds {}; refusing to partition it ({HOW_TO_CLEAR})",
            content::describe(&found)
        )));
    }
    if allow.unidentified {
        return Ok(());
    }
    let nonzero = if skip_mbr_sector {
        let mut head = dev.head.clone();
        // The empty table (disk signature, entries, 55AA) is replaced;
        // boot code before it is content like any other byte.
        let n = head.len().min(512);
        head[n.min(MBR_TABLE_START)..n].fill(0);
        content::first_nonzero_in_write_span(&Device::new(&head, &dev.tail, dev.size))
    } else {
        content::first_nonzero_in_write_span(&dev.device())
    };
    match nonzero {
        None => Ok(()),
        Some(at) => Err(Error::FailedPrecondition(format!(
            "disk {disk} has no partition table, and the bytes a table would be written over are not all zero \
             (the first non-zero byte is at {at}), but no known format explains them; refusing to partition it \
             ({HOW_TO_CLEAR}, or start csi-proxy with -overwrite-unidentified-content)"
        ))),
    }
}

/// FormatVolume's check: a filesystem may be replaced, an empty volume
/// formatted; anything else is refused. Empty means: every byte of the
/// volume's [`content::zero_check_spans`] is zero; over a filesystem, every
/// byte of those spans past the extent the filesystem records (all of
/// them when this code does not read its size; see
/// [`content::zero_check_from`]).
pub fn check_format(volume: &VolumeId, dev: &Scanned, allow: Overwrite) -> Result<()> {
    check_region(&format!("volume {volume}"), "format", dev, allow, true)
}

/// PartitionDisk's check of the region a partition it creates will cover
/// (`first..first + dev size` on disk `disk`), whatever table it goes in:
/// nothing identified there (a filesystem there would become the new
/// volume's content, readable by whoever gets it), with or without the
/// flag, and every byte of its zero-check spans zero unless allowed.
pub fn check_new_partition(disk: u32, first: u64, dev: &Scanned, allow: Overwrite) -> Result<()> {
    let end = first + dev.regions.size;
    let subject =
        format!("the region of disk {disk} a new partition would cover (bytes {first} to {end})");
    check_region(&subject, "partition over", dev, allow, false)
}

fn check_region(
    subject: &str,
    verb: &str,
    dev: &Scanned,
    allow: Overwrite,
    filesystem_replaced: bool,
) -> Result<()> {
    let found = &dev.regions.found;
    let others: Vec<Found> = found
        .iter()
        .copied()
        .filter(|f| !(filesystem_replaced && f.class == Class::Filesystem))
        .collect();
    if !others.is_empty() {
        let what = if filesystem_replaced {
            ", which is not a filesystem"
        } else {
            ""
        };
        return Err(Error::FailedPrecondition(format!(
            "{subject} holds {}{what}; refusing to {verb} it ({HOW_TO_CLEAR})",
            content::describe(&others)
        )));
    }
    if allow.unidentified {
        return Ok(());
    }
    let past = match filesystem(found) {
        Some(fs) => format!(" past what its {fs} filesystem records it covers"),
        None => String::new(),
    };
    match dev.nonzero {
        None => Ok(()),
        Some(at) => Err(Error::FailedPrecondition(format!(
            "{subject} is not empty (the first non-zero byte{past} is at {at}), but no known format explains \
             it; refusing to {verb} it ({HOW_TO_CLEAR}, or start csi-proxy with \
             -overwrite-unidentified-content)"
        ))),
    }
}

/// The first filesystem identified, by blkid's name.
pub fn filesystem(found: &[Found]) -> Option<&'static str> {
    found
        .iter()
        .find(|f| f.class == Class::Filesystem)
        .map(|f| f.name)
}

/// "holds nothing known" / "holds LVM2_member (...) at byte 512" for
/// messages about a volume.
pub fn holds(found: &[Found]) -> String {
    if found.is_empty() {
        "holds no filesystem or other known content".to_string()
    } else {
        format!("holds {}", content::describe(found))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    fn dev(bytes: &[u8]) -> Regions {
        Regions::read(bytes.len() as u64, |off, buf| {
            buf.copy_from_slice(&bytes[off as usize..off as usize + buf.len()]);
            Ok(())
        })
        .unwrap()
    }

    fn scanned(bytes: &[u8]) -> Scanned {
        Scanned::read(bytes.len() as u64, |off, buf| {
            buf.copy_from_slice(&bytes[off as usize..off as usize + buf.len()]);
            Ok(())
        })
        .unwrap()
    }

    fn vol() -> VolumeId {
        VolumeId::parse("\\\\?\\Volume{01234567-89ab-cdef-0123-456789abcdef}\\").unwrap()
    }

    fn lvm() -> Vec<u8> {
        let mut b = vec![0u8; 4 * MIB];
        b[512..520].copy_from_slice(b"LABELONE");
        b[536..544].copy_from_slice(b"LVM2 001");
        b
    }

    #[test]
    fn identified_content_is_never_partitioned_or_formatted() {
        let b = lvm();
        for allow in [Overwrite::default(), Overwrite { unidentified: true }] {
            let e = check_partition(3, &dev(&b), false, allow).unwrap_err();
            assert!(
                matches!(&e, Error::FailedPrecondition(m) if m.contains("LVM2_member") && m.contains("byte 512")),
                "{e}"
            );
            let e = check_format(&vol(), &scanned(&b), allow).unwrap_err();
            assert!(
                matches!(&e, Error::FailedPrecondition(m) if m.contains("LVM2_member")),
                "{e}"
            );
        }
        assert!(!dev(&b).found.is_empty());
    }

    #[test]
    fn unidentified_bytes_are_refused_unless_allowed() {
        let mut b = vec![0u8; 4 * MIB];
        b[4 * MIB - 100] = 0x42;
        let e = check_partition(3, &dev(&b), false, Overwrite::default()).unwrap_err();
        assert!(
            matches!(&e, Error::FailedPrecondition(m) if m.contains("-overwrite-unidentified-content"))
        );
        check_partition(3, &dev(&b), false, Overwrite { unidentified: true }).unwrap();
        assert!(check_format(&vol(), &scanned(&b), Overwrite::default()).is_err());
        check_format(&vol(), &scanned(&b), Overwrite { unidentified: true }).unwrap();
        assert!(dev(&b).found.is_empty());
    }

    #[test]
    fn zeros_are_partitioned_and_formatted_and_filesystems_replaced() {
        let b = vec![0u8; 4 * MIB];
        check_partition(3, &dev(&b), false, Overwrite::default()).unwrap();
        check_format(&vol(), &scanned(&b), Overwrite::default()).unwrap();
        let mut x = vec![0u8; 4 * MIB];
        x[..4].copy_from_slice(b"XFSB");
        x[4..8].copy_from_slice(&4096u32.to_be_bytes()); // block size
        x[8..16].copy_from_slice(&1024u64.to_be_bytes()); // 4 MiB of blocks
        check_format(&vol(), &scanned(&x), Overwrite::default()).unwrap();
        // A filesystem found is not "the rest is nothing": past the 1 MiB
        // it records, the spans are checked; with no size, all of them.
        x[8..16].copy_from_slice(&256u64.to_be_bytes());
        check_format(&vol(), &scanned(&x), Overwrite::default()).unwrap();
        x[2 * MIB] = 7;
        let e = check_format(&vol(), &scanned(&x), Overwrite::default()).unwrap_err();
        assert!(
            matches!(&e, Error::FailedPrecondition(m) if m.contains("xfs filesystem records") && m.contains("at 2097152")),
            "{e}"
        );
        check_format(&vol(), &scanned(&x), Overwrite { unidentified: true }).unwrap();
        x[8..16].copy_from_slice(&0u64.to_be_bytes());
        x[2 * MIB] = 0;
        assert!(check_format(&vol(), &scanned(&x), Overwrite::default()).is_err());
        // PartitionDisk refuses a filesystem in its new partition's region,
        // with or without the flag.
        x[8..16].copy_from_slice(&1024u64.to_be_bytes());
        for allow in [Overwrite::default(), Overwrite { unidentified: true }] {
            let e = check_new_partition(3, MIB as u64, &scanned(&x), allow).unwrap_err();
            assert!(
                matches!(&e, Error::FailedPrecondition(m) if m.contains("holds xfs")),
                "{e}"
            );
        }
        assert!(!dev(&x).found.is_empty());
        assert_eq!(filesystem(&dev(&x).found), Some("xfs"));
        // But a filesystem on a disk without a table is not partitioned.
        assert!(check_partition(3, &dev(&x), false, Overwrite::default()).is_err());
    }

    #[test]
    fn an_empty_mbr_table_is_replaced_but_its_boot_code_is_content() {
        let mut b = vec![0u8; 4 * MIB];
        b[440..444].copy_from_slice(&[1, 2, 3, 4]); // disk signature
        b[510] = 0x55;
        b[511] = 0xAA;
        check_partition(3, &dev(&b), true, Overwrite::default()).unwrap();
        assert!(check_partition(3, &dev(&b), false, Overwrite::default()).is_err());
        let mut boot = b.clone();
        boot[0..3].copy_from_slice(&[0xeb, 0x63, 0x90]);
        let e = check_partition(3, &dev(&boot), true, Overwrite::default()).unwrap_err();
        assert!(
            matches!(&e, Error::FailedPrecondition(m) if m.contains("byte is at 0")),
            "{e}"
        );
        check_partition(3, &dev(&boot), true, Overwrite { unidentified: true }).unwrap();
        b[600] = 1;
        assert!(check_partition(3, &dev(&b), true, Overwrite::default()).is_err());
    }
}

#[cfg(test)]
mod region_tests {
    use super::*;
    use crate::storage::parse::content::{
        zero_check_spans, ZERO_HEAD, ZERO_SAMPLE, ZERO_SAMPLE_EVERY,
    };
    use std::cell::RefCell;

    const MIB: u64 = 1 << 20;

    fn vol() -> VolumeId {
        VolumeId::parse("\\\\?\\Volume{01234567-89ab-cdef-0123-456789abcdef}\\").unwrap()
    }

    /// A sparse device: zero but for `data` (offset, bytes); counts the
    /// bytes read.
    struct Sparse {
        size: u64,
        data: Vec<(u64, Vec<u8>)>,
        read: RefCell<u64>,
    }

    impl Sparse {
        fn scan(&self) -> Scanned {
            Scanned::read(self.size, |off, buf| {
                *self.read.borrow_mut() += buf.len() as u64;
                buf.fill(0);
                for (o, d) in &self.data {
                    for (i, b) in d.iter().enumerate() {
                        let at = o + i as u64;
                        if at >= off && at < off + buf.len() as u64 {
                            buf[(at - off) as usize] = *b;
                        }
                    }
                }
                Ok(())
            })
            .unwrap()
        }
    }

    #[test]
    fn the_spans_are_the_head_the_samples_and_the_tail() {
        assert_eq!(zero_check_spans(0), []);
        assert_eq!(zero_check_spans(63 * MIB), [(0, 63 * MIB)]);
        assert_eq!(zero_check_spans(65 * MIB), [(0, 65 * MIB)]);
        assert_eq!(
            zero_check_spans(100 * MIB),
            [(0, ZERO_HEAD), (99 * MIB, MIB)]
        );
        let e = ZERO_SAMPLE_EVERY;
        assert_eq!(zero_check_spans(e), [(0, ZERO_HEAD), (e - MIB, MIB)]);
        assert_eq!(
            zero_check_spans(4 * e),
            [
                (0, ZERO_HEAD),
                (e, ZERO_SAMPLE),
                (2 * e, ZERO_SAMPLE),
                (3 * e, ZERO_SAMPLE),
                (4 * e - MIB, MIB)
            ]
        );
        let tib = 1 << 40;
        let samples = tib / e - 1;
        let spans = zero_check_spans(tib);
        assert_eq!(spans.len() as u64, 1 + samples + 1);
        let bytes: u64 = spans.iter().map(|s| s.1).sum();
        assert_eq!(bytes, ZERO_HEAD + samples * ZERO_SAMPLE + MIB);
        for size in [1, 511, 4097, e + 1, e + 4095, 3 * e + 7] {
            let spans = zero_check_spans(size);
            for w in spans.windows(2) {
                assert!(w[0].0 + w[0].1 < w[1].0, "{size}: {spans:?}");
            }
            let last = spans.last().unwrap();
            assert_eq!(last.0 + last.1, size, "{size}: {spans:?}");
        }
    }

    #[test]
    fn data_in_the_middle_of_a_small_volume_is_refused() {
        // 6 MiB of data at 2 MiB of a 63 MiB volume, its first and last
        // MiB zero: past what the probes read, inside the first 64 MiB.
        let d = Sparse {
            size: 63 * MIB,
            data: vec![(2 * MIB + 3 * MIB, vec![0x5a; 4096])],
            read: RefCell::new(0),
        };
        let s = d.scan();
        assert!(s.regions.found.is_empty());
        assert_eq!(s.nonzero, Some(5 * MIB));
        let e = check_format(&vol(), &s, Overwrite::default()).unwrap_err();
        assert!(
            matches!(&e, Error::FailedPrecondition(m) if m.contains("at 5242880")),
            "{e}"
        );
        check_format(&vol(), &s, Overwrite { unidentified: true }).unwrap();
        let e = check_new_partition(2, MIB, &s, Overwrite::default()).unwrap_err();
        assert!(
            matches!(&e, Error::FailedPrecondition(m) if m.contains("bytes 1048576 to")),
            "{e}"
        );
    }

    #[test]
    fn samples_see_data_on_their_blocks_and_not_between() {
        let every = ZERO_SAMPLE_EVERY;
        let gib = every / 4;
        let at = |off: u64| Sparse {
            size: 16 * gib,
            data: vec![(off, vec![1])],
            read: RefCell::new(0),
        };
        assert_eq!(at(3 * every + 4095).scan().nonzero, Some(3 * every + 4095));
        assert_eq!(at(3 * every + 4096).scan().nonzero, None, "between samples");
        assert_eq!(at(ZERO_HEAD - 1).scan().nonzero, Some(ZERO_HEAD - 1));
        assert_eq!(at(ZERO_HEAD).scan().nonzero, None, "past the head");
        assert_eq!(at(16 * gib - MIB).scan().nonzero, Some(16 * gib - MIB));
        // What the probes read is not read twice: the head past HEAD_LEN,
        // the samples, nothing of the last MiB.
        let d = at(16 * gib - 1);
        let s = d.scan();
        let regions = (content::HEAD_LEN + content::TAIL_LEN) as u64;
        let extra = *d.read.borrow() - regions;
        assert!(extra <= ZERO_HEAD - 4 * MIB + 15 * ZERO_SAMPLE, "{extra}");
        assert_eq!(s.nonzero, Some(16 * gib - 1));
    }

    #[test]
    fn identified_content_is_not_scanned() {
        let mut lvm = vec![0u8; 32];
        lvm[..8].copy_from_slice(b"LABELONE");
        lvm[24..].copy_from_slice(b"LVM2 001");
        let d = Sparse {
            size: 8 * 1024 * MIB,
            data: vec![(512, lvm), (10 * MIB, vec![1])],
            read: RefCell::new(0),
        };
        let s = d.scan();
        assert_eq!(s.nonzero, None);
        assert_eq!(
            *d.read.borrow(),
            (content::HEAD_LEN + content::TAIL_LEN) as u64
        );
        assert!(check_format(&vol(), &s, Overwrite { unidentified: true }).is_err());
    }
}
