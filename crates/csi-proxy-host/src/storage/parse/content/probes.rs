//! The probe table: one entry per format, each a function that returns
//! the byte offset of the format's signature if the device carries it.
//!
//! Offsets and magic numbers are those the formats document (on-disk
//! layout specifications, the formats' own headers); the order is the
//! order [`super::identify`] reports them in.

use super::{Class, Device};

/// One format.
pub struct Probe {
    /// `blkid -p`'s name for it.
    pub name: &'static str,
    pub class: Class,
    pub find: fn(&Device<'_>) -> Option<u64>,
}

const fn probe(name: &'static str, class: Class, find: fn(&Device<'_>) -> Option<u64>) -> Probe {
    Probe { name, class, find }
}

use Class::*;

/// Every format, filesystems and containers first, partition tables last.
pub static ALL: &[Probe] = &[
    // Encrypted containers and volume-manager / RAID members come first:
    // they often sit under a filesystem signature's offset.
    probe("crypto_LUKS", Crypto, luks),
    probe("LVM2_member", Member, lvm2),
    probe("linux_raid_member", Member, md),
    probe("zfs_member", Member, zfs),
    probe("bcache", Member, bcache),
    // Filesystems.
    probe("xfs", Filesystem, xfs),
    probe("btrfs", Filesystem, btrfs),
    probe("ntfs", Filesystem, ntfs),
    probe("exfat", Filesystem, exfat),
    probe("vfat", Filesystem, vfat),
    probe("ext4", Filesystem, ext4),
    probe("ext3", Filesystem, ext3),
    probe("ext2", Filesystem, ext2),
    probe("jbd", Other, ext_journal),
    probe("iso9660", Filesystem, iso9660),
    probe("swap", Other, swap),
    // Partition tables.
    probe("gpt", PartitionTable, gpt_primary),
    probe("gpt", PartitionTable, gpt_backup),
    probe("dos", PartitionTable, dos),
];

const SECTOR_SIZES: [u64; 2] = [512, 4096];

fn at_any(d: &Device<'_>, offsets: &[u64], magic: &[u8]) -> Option<u64> {
    offsets.iter().copied().find(|&o| d.has(o, magic))
}

// ---- Crypto and members -------------------------------------------------

/// LUKS1 and LUKS2 (the primary header at 0; a LUKS2 device whose primary
/// header is gone keeps a secondary one at one of the sizes LUKS2 allows).
fn luks(d: &Device<'_>) -> Option<u64> {
    if d.has(0, b"LUKS\xba\xbe") {
        return Some(0);
    }
    const SECONDARY: [u64; 9] = [
        0x4000, 0x8000, 0x10000, 0x20000, 0x40000, 0x80000, 0x100000, 0x200000, 0x400000,
    ];
    at_any(d, &SECONDARY, b"SKUL\xba\xbe")
}

/// An LVM2 physical volume: the label `LABELONE` in one of the first four
/// sectors, with the type `LVM2 001` 24 bytes into it.
fn lvm2(d: &Device<'_>) -> Option<u64> {
    (0..4u64)
        .map(|s| s * 512)
        .find(|&o| d.has(o, b"LABELONE") && d.has(o + 24, b"LVM2 001"))
}

const MD_MAGIC: u32 = 0xa92b_4efc;

/// An md (Linux software RAID) member: superblock 1.1 at 0, 1.2 at 4 KiB,
/// 1.0 8 KiB before the end (4 KiB aligned), 0.90 in the last 64 KiB
/// block (64 KiB aligned), either byte order.
fn md(d: &Device<'_>) -> Option<u64> {
    let v1 = |o: u64| d.u32_le(o) == Some(MD_MAGIC) && d.u32_le(o + 4) == Some(1);
    if v1(0) {
        return Some(0);
    }
    if v1(4096) {
        return Some(4096);
    }
    let size = d.size();
    if size >= 12 * 1024 {
        let o = (size - 8 * 1024) & !(4096 - 1);
        if v1(o) {
            return Some(o);
        }
    }
    if size >= 128 * 1024 {
        let o = (size & !(65536 - 1)) - 65536;
        if d.u32_le(o) == Some(MD_MAGIC) || d.u32_be(o) == Some(MD_MAGIC) {
            return Some(o);
        }
    }
    None
}

const ZFS_UBERBLOCK_MAGIC: u64 = 0x00ba_b10c;
const ZFS_LABEL: u64 = 256 * 1024;

/// A ZFS pool member: an uberblock (magic `0x00bab10c`, either byte
/// order) in the uberblock ring of any of the four labels, two at the
/// start and two at the end (the end ones 256 KiB aligned).
fn zfs(d: &Device<'_>) -> Option<u64> {
    let size = d.size();
    let mut labels = vec![0, ZFS_LABEL];
    let aligned = size & !(ZFS_LABEL - 1);
    if aligned >= 4 * ZFS_LABEL {
        labels.extend([aligned - 2 * ZFS_LABEL, aligned - ZFS_LABEL]);
    }
    for label in labels {
        // The uberblock ring: the second half of the label, in slots of
        // 1 KiB (or larger for ashift > 10; 1 KiB steps find those too).
        let ring = label + 128 * 1024;
        for slot in 0..128u64 {
            let o = ring + slot * 1024;
            if d.u64_le(o) == Some(ZFS_UBERBLOCK_MAGIC) || d.u64_be(o) == Some(ZFS_UBERBLOCK_MAGIC)
            {
                return Some(o);
            }
        }
    }
    None
}

/// A bcache backing or cache device: the bcache magic UUID 24 bytes into
/// the superblock at 4 KiB.
fn bcache(d: &Device<'_>) -> Option<u64> {
    const MAGIC: [u8; 16] = [
        0xc6, 0x85, 0x73, 0xf6, 0x4e, 0x1a, 0x45, 0xca, 0x82, 0x65, 0xf5, 0x7f, 0x48, 0xba, 0x6d,
        0x81,
    ];
    d.has(4096 + 24, &MAGIC).then_some(4096 + 24)
}

// ---- Filesystems ----------------------------------------------------------

fn xfs(d: &Device<'_>) -> Option<u64> {
    d.has(0, b"XFSB").then_some(0)
}

fn btrfs(d: &Device<'_>) -> Option<u64> {
    d.has(0x10040, b"_BHRfS_M").then_some(0x10040)
}

fn ntfs(d: &Device<'_>) -> Option<u64> {
    d.has(3, b"NTFS    ").then_some(3)
}

fn exfat(d: &Device<'_>) -> Option<u64> {
    d.has(3, b"EXFAT   ").then_some(3)
}

/// A FAT12/16/32 boot sector: the boot signature and the filesystem type
/// string of a FAT12/16 or a FAT32 BPB.
fn vfat(d: &Device<'_>) -> Option<u64> {
    if !d.has(510, &[0x55, 0xAA]) {
        return None;
    }
    if d.has(54, b"FAT") {
        return Some(54);
    }
    d.has(82, b"FAT32").then_some(82)
}

const EXT_SB: u64 = 1024;
const EXT_MAGIC: u16 = 0xEF53;
const EXT_COMPAT_HAS_JOURNAL: u32 = 0x4;
const EXT_INCOMPAT_JOURNAL_DEV: u32 = 0x8;
/// Incompatible features ext3 also knows: filetype, recover, meta_bg.
const EXT3_INCOMPAT: u32 = 0x2 | 0x4 | 0x10;
/// Read-only compatible features ext3 also knows: sparse_super,
/// large_file, btree_dir.
const EXT3_RO_COMPAT: u32 = 0x1 | 0x2 | 0x4;

/// The ext superblock's generation: `Some(2|3|4)`, `Some(0)` for an
/// external journal device, `None` for no ext superblock.
fn ext_generation(d: &Device<'_>) -> Option<u8> {
    if d.u16_le(EXT_SB + 0x38)? != EXT_MAGIC || d.u32_le(EXT_SB + 0x18)? > 6 {
        return None;
    }
    let compat = d.u32_le(EXT_SB + 0x5C)?;
    let incompat = d.u32_le(EXT_SB + 0x60)?;
    let ro_compat = d.u32_le(EXT_SB + 0x64)?;
    Some(if incompat & EXT_INCOMPAT_JOURNAL_DEV != 0 {
        0
    } else if incompat & !EXT3_INCOMPAT != 0 || ro_compat & !EXT3_RO_COMPAT != 0 {
        4
    } else if compat & EXT_COMPAT_HAS_JOURNAL != 0 {
        3
    } else {
        2
    })
}

fn ext4(d: &Device<'_>) -> Option<u64> {
    (ext_generation(d)? == 4).then_some(EXT_SB + 0x38)
}

fn ext3(d: &Device<'_>) -> Option<u64> {
    (ext_generation(d)? == 3).then_some(EXT_SB + 0x38)
}

fn ext2(d: &Device<'_>) -> Option<u64> {
    (ext_generation(d)? == 2).then_some(EXT_SB + 0x38)
}

fn ext_journal(d: &Device<'_>) -> Option<u64> {
    (ext_generation(d)? == 0).then_some(EXT_SB + 0x38)
}

fn iso9660(d: &Device<'_>) -> Option<u64> {
    d.has(0x8001, b"CD001").then_some(0x8001)
}

/// Linux swap (versions 0 and 1): the signature in the last 10 bytes of
/// the first page, for every page size Linux uses.
fn swap(d: &Device<'_>) -> Option<u64> {
    [4096u64, 8192, 16384, 65536].iter().find_map(|&page| {
        let o = page - 10;
        (d.has(o, b"SWAPSPACE2") || d.has(o, b"SWAP-SPACE")).then_some(o)
    })
}

// ---- Partition tables -------------------------------------------------------

/// A GPT header at LBA 1, for 512- and 4096-byte sectors.
fn gpt_primary(d: &Device<'_>) -> Option<u64> {
    SECTOR_SIZES
        .iter()
        .copied()
        .find(|&ss| d.has(ss, b"EFI PART"))
}

/// A GPT header in the last sector (the backup), for 512- and 4096-byte
/// sectors: a disk whose primary table is gone still holds partitions.
fn gpt_backup(d: &Device<'_>) -> Option<u64> {
    SECTOR_SIZES.iter().find_map(|&ss| {
        let o = d.size().checked_sub(ss)?;
        d.has(o, b"EFI PART").then_some(o)
    })
}

/// An MBR: the boot signature with at least one partition entry, and not
/// the boot sector of a FAT/NTFS/exFAT filesystem (which carries the same
/// signature).
fn dos(d: &Device<'_>) -> Option<u64> {
    if !d.has(510, &[0x55, 0xAA]) || ntfs(d).is_some() || exfat(d).is_some() || vfat(d).is_some() {
        return None;
    }
    let entries = d.at(446, 64)?;
    entries
        .chunks(16)
        .any(|e| e[4] != 0 && (e[0] == 0 || e[0] == 0x80))
        .then_some(510)
}
