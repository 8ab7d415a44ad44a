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
//!   unidentified non-zero bytes unless allowed.
//! * IsVolumeFormatted is true for any identified content: drivers format
//!   whatever is reported unformatted.

use super::parse::content::{self, Class, Device, Found, Regions};
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
        let n = head.len().min(512);
        head[..n].fill(0);
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
/// formatted; anything else is refused.
pub fn check_format(volume: &VolumeId, dev: &Regions, allow: Overwrite) -> Result<()> {
    let found = &dev.found;
    let others: Vec<Found> = found
        .iter()
        .copied()
        .filter(|f| f.class != Class::Filesystem)
        .collect();
    if !others.is_empty() {
        return Err(Error::FailedPrecondition(format!(
            "volume {volume} holds {}, which is not a filesystem; refusing to format it ({HOW_TO_CLEAR})",
            content::describe(&others)
        )));
    }
    if !found.is_empty() || allow.unidentified {
        return Ok(());
    }
    match content::first_nonzero_in_write_span(&dev.device()) {
        None => Ok(()),
        Some(at) => Err(Error::FailedPrecondition(format!(
            "volume {volume} is not empty (the first non-zero byte is at {at}), but no known format explains \
             its content; refusing to format it ({HOW_TO_CLEAR}, or start csi-proxy with \
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
            let e = check_format(&vol(), &dev(&b), allow).unwrap_err();
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
        assert!(check_format(&vol(), &dev(&b), Overwrite::default()).is_err());
        check_format(&vol(), &dev(&b), Overwrite { unidentified: true }).unwrap();
        assert!(dev(&b).found.is_empty());
    }

    #[test]
    fn zeros_are_partitioned_and_formatted_and_filesystems_replaced() {
        let b = vec![0u8; 4 * MIB];
        check_partition(3, &dev(&b), false, Overwrite::default()).unwrap();
        check_format(&vol(), &dev(&b), Overwrite::default()).unwrap();
        let mut x = vec![0u8; 4 * MIB];
        x[..4].copy_from_slice(b"XFSB");
        x[4..8].copy_from_slice(&4096u32.to_be_bytes()); // block size
        check_format(&vol(), &dev(&x), Overwrite::default()).unwrap();
        assert!(!dev(&x).found.is_empty());
        assert_eq!(filesystem(&dev(&x).found), Some("xfs"));
        // But a filesystem on a disk without a table is not partitioned.
        assert!(check_partition(3, &dev(&x), false, Overwrite::default()).is_err());
    }

    #[test]
    fn an_empty_mbr_sector_is_replaced() {
        let mut b = vec![0u8; 4 * MIB];
        b[0..3].copy_from_slice(&[0xeb, 0x63, 0x90]);
        b[510] = 0x55;
        b[511] = 0xAA;
        check_partition(3, &dev(&b), true, Overwrite::default()).unwrap();
        assert!(check_partition(3, &dev(&b), false, Overwrite::default()).is_err());
        b[600] = 1;
        assert!(check_partition(3, &dev(&b), true, Overwrite::default()).is_err());
    }
}
