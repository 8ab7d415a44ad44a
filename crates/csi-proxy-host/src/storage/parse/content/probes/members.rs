//! Volume-manager, RAID, cache and pool members, encrypted containers and
//! swap: what a filesystem is built on, or what holds data without being a
//! filesystem.

use super::{at_any, be32, le16, le32, sector_from_end, Device, SECTOR};
use crate::storage::parse::crc::{crc32_raw, crc32c};

// ---- Encrypted containers ---------------------------------------------------

/// LUKS1 and LUKS2: the primary header at 0 (version 1 or 2); a LUKS2
/// device whose primary header is gone keeps a secondary one at one of the
/// offsets LUKS2 allows.
pub fn luks(d: &Device<'_>) -> Option<u64> {
    if d.has(0, b"LUKS\xba\xbe") && matches!(d.u16_be(6), Some(1 | 2)) {
        return Some(0);
    }
    const SECONDARY: [u64; 9] = [
        0x4000, 0x8000, 0x10000, 0x20000, 0x40000, 0x80000, 0x100000, 0x200000, 0x400000,
    ];
    SECONDARY
        .iter()
        .copied()
        .find(|&o| d.has(o, b"SKUL\xba\xbe") && d.u16_be(o + 6) == Some(2))
}

/// The GUID BitLocker volumes carry in their boot sector
/// (4967d63b-2e29-4ad8-8399-f6a339e3d001, in its on-disk byte order).
const BITLOCKER_GUID: [u8; 16] = [
    0x3b, 0xd6, 0x67, 0x49, 0x29, 0x2e, 0xd8, 0x4a, 0x83, 0x99, 0xf6, 0xa3, 0x39, 0xe3, 0xd0, 0x01,
];

/// BitLocker: the Vista boot sector (`-FVE-FS-` with a Vista jump), the
/// Windows 7+ one (`-FVE-FS-`), and BitLocker To Go (a FAT boot sector with
/// the `MSWIN4.1` OEM name), the last two pointing at an FVE metadata
/// block. Where that block lies beyond what was read, the BitLocker GUID in
/// the boot sector stands for it.
pub fn bitlocker(d: &Device<'_>) -> Option<u64> {
    if d.has(0, b"\xeb\x52\x90-FVE-FS-") {
        return Some(0);
    }
    let (guid_at, meta_at) = if d.has(0, b"\xeb\x58\x90-FVE-FS-") {
        (160, 176)
    } else if d.has(0, b"\xeb\x58\x90MSWIN4.1") {
        (424, 440)
    } else {
        return None;
    };
    let meta = d.u64_le(meta_at)?;
    if meta != 0 && meta % 64 == 0 && d.has(meta, b"-FVE-FS-") {
        return Some(0);
    }
    d.has(guid_at, &BITLOCKER_GUID).then_some(0)
}

/// Apple Core Storage with FileVault 2: `CS` at 88 in a physical volume
/// header of version 1, CRC-32 checksums, block type 0x10.
pub fn cs_fvault2(d: &Device<'_>) -> Option<u64> {
    (d.has(88, b"CS") && d.u16_le(8)? == 1 && d.u16_le(10)? == 0x10 && d.u32_le(90)? == 1)
        .then_some(88)
}

/// dm-integrity's superblock.
pub fn dm_integrity(d: &Device<'_>) -> Option<u64> {
    d.has(0, b"integrt\0").then_some(0)
}

/// A dm-verity hash device's superblock.
pub fn dm_verity(d: &Device<'_>) -> Option<u64> {
    d.has(0, b"verity\0\0").then_some(0)
}

// ---- Volume managers ----------------------------------------------------------

/// An LVM2 physical volume: the label `LABELONE` in one of the first four
/// sectors, with the type `LVM2 001` 24 bytes into it.
pub fn lvm2(d: &Device<'_>) -> Option<u64> {
    (0..4u64)
        .map(|s| s * SECTOR)
        .find(|&o| d.has(o, b"LABELONE") && d.has(o + 24, b"LVM2 001"))
}

/// An LVM1 physical volume: `HM` at 0 with structure version 1 or 2.
pub fn lvm1(d: &Device<'_>) -> Option<u64> {
    (d.has(0, b"HM") && matches!(d.u16_le(2), Some(1 | 2))).then_some(0)
}

/// A device-mapper snapshot's exception store.
pub fn dm_snapshot_cow(d: &Device<'_>) -> Option<u64> {
    d.has(0, b"SnAp").then_some(0)
}

// ---- md and firmware RAID -------------------------------------------------------

const MD_MAGIC: u32 = 0xa92b_4efc;
/// md 0.90 keeps its superblock in the last 64 KiB-aligned 64 KiB.
const MD_RESERVED: u64 = 0x10000;

/// An md (Linux software RAID) member: superblock 1.1 at 0, 1.2 at 4 KiB,
/// 1.0 8 KiB before the end (4 KiB aligned), each recording its own sector
/// offset; 0.90 in the last 64 KiB block (64 KiB aligned), either byte
/// order.
pub fn md(d: &Device<'_>) -> Option<u64> {
    let v1 = |o: u64| {
        d.u32_le(o) == Some(MD_MAGIC)
            && d.u32_le(o + 4) == Some(1)
            && d.u64_le(o + 144) == Some(o / SECTOR)
    };
    let size = d.size();
    let mut at = vec![0, 4096];
    if size >= 3 * 4096 {
        at.push((size & !4095) - 8192);
    }
    if let Some(o) = at.into_iter().find(|&o| v1(o)) {
        return Some(o);
    }
    if size > MD_RESERVED {
        let o = (size & !(MD_RESERVED - 1)) - MD_RESERVED;
        if d.u32_le(o) == Some(MD_MAGIC) || d.u32_be(o) == Some(MD_MAGIC) {
            return Some(o);
        }
    }
    None
}

/// SNIA DDF: the anchor header (magic `0xDE11DE11`, CRC-32 over the
/// 512-byte header with its CRC field read as all ones) in the last
/// sector, or 257 sectors before the end.
pub fn ddf(d: &Device<'_>) -> Option<u64> {
    if d.size() < 0x30000 {
        return None;
    }
    [1, 257].iter().find_map(|&n| {
        let o = sector_from_end(d, n)?;
        let h = d.at(o, 512)?;
        if be32(h, 0) != 0xDE11_DE11 {
            return None;
        }
        let crc = crc32_raw(crc32_raw(crc32_raw(0, &h[..4]), &[0xff; 4]), &h[8..]);
        (crc == be32(h, 4)).then_some(o)
    })
}

/// Firmware RAID formats with their metadata in the last sectors are
/// looked for only on devices of at least 64 KiB, as libblkid does.
const FW_RAID_MIN: u64 = 0x10000;

fn last_sector<'a>(d: &Device<'a>, n: u64, len: usize) -> Option<(u64, &'a [u8])> {
    if d.size() < FW_RAID_MIN {
        return None;
    }
    let o = sector_from_end(d, n)?;
    Some((o, d.at(o, len)?))
}

/// Intel Matrix Storage (IMSM): its signature in the second-to-last
/// sector (512-byte or 4 KiB sectors).
pub fn isw(d: &Device<'_>) -> Option<u64> {
    const SIG: &[u8] = b"Intel Raid ISM Cfg Sig. ";
    if d.size() < FW_RAID_MIN {
        return None;
    }
    [SECTOR, 4096].iter().find_map(|&ss| {
        let o = (d.size() / ss).checked_sub(2)? * ss;
        d.has(o, SIG).then_some(o)
    })
}

/// NVIDIA MediaShield: `NVIDIA  ` in the second-to-last sector, a
/// 120-byte superblock whose 30 little-endian words sum to zero.
pub fn nvidia(d: &Device<'_>) -> Option<u64> {
    let (o, b) = last_sector(d, 2, 120)?;
    if &b[..8] != b"NVIDIA  " || le32(b, 8) != 30 {
        return None;
    }
    let sum = (0..30).fold(0u32, |s, i| s.wrapping_add(le32(b, i * 4)));
    (sum == 0).then_some(o)
}

/// Promise FastTrak: its signature in one of the sectors it may use near
/// the end. (The furthest, 3087 sectors back, lies beyond [`TAIL_LEN`]
/// and is not read.)
///
/// [`TAIL_LEN`]: super::super::TAIL_LEN
pub fn promise(d: &Device<'_>) -> Option<u64> {
    const BACK: [u64; 13] = [
        63, 255, 256, 16, 399, 591, 675, 735, 911, 974, 991, 951, 3087,
    ];
    if d.size() < 0x40000 {
        return None;
    }
    BACK.iter().find_map(|&n| {
        let o = sector_from_end(d, n)?;
        d.has(o, b"Promise Technology, Inc.").then_some(o)
    })
}

/// Silicon Image Medley: magic `0x2F000000` at 0x60 of the last sector, a
/// disk number below 8, and the 16-bit checksum of the first 0x13E bytes.
pub fn silicon(d: &Device<'_>) -> Option<u64> {
    let (o, b) = last_sector(d, 1, 512)?;
    if le32(b, 0x60) != 0x2F00_0000 || b[0x116] >= 8 {
        return None;
    }
    let sum = (0..0x13E / 2).fold(0u16, |s, i| s.wrapping_add(le16(b, i * 2)));
    (sum.wrapping_neg() == le16(b, 0x13E)).then_some(o + 0x60)
}

/// VIA V-RAID: `0xAA55` at the start of the last sector, version at most
/// 2, and the byte sum of the first 50 bytes in the 51st.
pub fn via(d: &Device<'_>) -> Option<u64> {
    let (o, b) = last_sector(d, 1, 51)?;
    if le16(b, 0) != 0xAA55 || b[2] > 2 {
        return None;
    }
    let sum = b[..50].iter().fold(0u8, |s, &x| s.wrapping_add(x));
    (sum == b[50]).then_some(o)
}

/// JMicron: `JM` at the start of the last sector, a RAID mode up to 5 at
/// 0x30 and the 128-byte header's 16-bit words summing to 0 or 1.
pub fn jmicron(d: &Device<'_>) -> Option<u64> {
    let (o, b) = last_sector(d, 1, 128)?;
    if &b[..2] != b"JM" || b[0x30] > 5 {
        return None;
    }
    let sum = (0..64).fold(0u16, |s, i| s.wrapping_add(le16(b, i * 2)));
    (sum <= 1).then_some(o)
}

/// LSI MegaRAID: `$XIDE$` at the start of the last sector.
pub fn lsi(d: &Device<'_>) -> Option<u64> {
    let (o, b) = last_sector(d, 1, 6)?;
    (b == b"$XIDE$").then_some(o)
}

/// Adaptec: `0x37FC4D1E` (big-endian) at the start of the last sector and
/// `DPTM` 256 bytes into it.
pub fn adaptec(d: &Device<'_>) -> Option<u64> {
    let (o, b) = last_sector(d, 1, 260)?;
    (be32(b, 0) == 0x37FC_4D1E && &b[256..260] == b"DPTM").then_some(o)
}

/// HighPoint RocketRAID 45x: its magic 11 sectors before the end.
pub fn hpt45x(d: &Device<'_>) -> Option<u64> {
    let (o, b) = last_sector(d, 11, 4)?;
    matches!(le32(b, 0), 0x5a78_16f3 | 0x5a78_16fd).then_some(o)
}

/// HighPoint 37x: its magic 32 bytes into sector 9.
pub fn hpt37x(d: &Device<'_>) -> Option<u64> {
    const O: u64 = 9 * SECTOR + 32;
    matches!(d.u32_le(O), Some(0x5a78_16f0 | 0x5a78_16fd)).then_some(O)
}

// ---- Pools, caches, replication -------------------------------------------------

const ZFS_UBERBLOCK_MAGIC: u64 = 0x00ba_b10c;
const ZFS_LABEL: u64 = 256 * 1024;

/// A ZFS pool member: an uberblock (magic `0x00bab10c`, either byte
/// order) in the uberblock ring of any of the four labels, two at the
/// start and two at the end (the end ones 256 KiB aligned).
pub fn zfs(d: &Device<'_>) -> Option<u64> {
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

/// The magic UUID of bcache superblocks (and of early bcachefs ones).
pub(super) const BCACHE_MAGIC: [u8; 16] = [
    0xc6, 0x85, 0x73, 0xf6, 0x4e, 0x1a, 0x45, 0xca, 0x82, 0x65, 0xf5, 0x7f, 0x48, 0xba, 0x6d, 0x81,
];
/// The superblock's sector, which it records.
pub(super) const BCACHE_SB: u64 = 4096;

/// A bcache backing or cache device: the superblock at 4 KiB recording
/// its own sector (8), a bcache version (0 to 6) and the magic UUID 24
/// bytes in.
pub fn bcache(d: &Device<'_>) -> Option<u64> {
    (d.has(BCACHE_SB + 24, &BCACHE_MAGIC)
        && d.u64_le(BCACHE_SB + 8) == Some(BCACHE_SB / SECTOR)
        && d.u64_le(BCACHE_SB + 16)? <= 6)
        .then_some(BCACHE_SB + 24)
}

/// VDO: `dmvdo001` at 0.
pub fn vdo(d: &Device<'_>) -> Option<u64> {
    d.has(0, b"dmvdo001").then_some(0)
}

/// DRBD internal metadata (8.x, 8.4 unclean, 9.x): the metadata block 4 KiB
/// before the end with its magic 60 bytes
/// in, a bitmap granularity of 4 KiB and zeros after the structure.
pub fn drbd(d: &Device<'_>) -> Option<u64> {
    if d.size() < 0x10000 {
        return None;
    }
    let o = d.size() - 4096;
    let b = d.at(o, 4096)?;
    let end = match be32(b, 60) {
        0x8374_026b | 0x8374_026c => 100,
        0x8374_026d => 1136,
        _ => return None,
    };
    (be32(b, 80) == 4096 && b[end..].iter().all(|&x| x == 0)).then_some(o + 60)
}

/// Stratis: the signature block in sector 1 or 9, its magic 4 bytes in,
/// with the CRC-32C of the rest of the sector in its first 4 bytes.
pub fn stratis(d: &Device<'_>) -> Option<u64> {
    const MAGIC: &[u8] = b"!Stra0tis\x86\xff\x02^\x41rh";
    [SECTOR, 9 * SECTOR].iter().find_map(|&o| {
        let b = d.at(o, 512)?;
        (&b[4..4 + MAGIC.len()] == MAGIC && crc32c(&b[4..]) == le32(b, 0)).then_some(o + 4)
    })
}

/// A Ceph BlueStore OSD's block device.
pub fn bluestore(d: &Device<'_>) -> Option<u64> {
    d.has(0, b"bluestore block device").then_some(0)
}

/// A VMFS volume (LVM) member: its magic at 1 MiB.
pub fn vmfs_volume(d: &Device<'_>) -> Option<u64> {
    (d.u32_le(0x100000) == Some(0xc001_d00d)).then_some(0x100000)
}

/// An Oracle ASM disk (ASMLib's label). libblkid counts it as a
/// filesystem; it holds a database's storage, so it is a member here.
pub fn oracleasm(d: &Device<'_>) -> Option<u64> {
    d.has(32, b"ORCLDISK").then_some(32)
}

/// An mpool (Micron object store) device.
pub fn mpool(d: &Device<'_>) -> Option<u64> {
    d.has(0, b"mpoolDev").then_some(0)
}

/// A drbdmanage control volume.
pub fn drbdmanage(d: &Device<'_>) -> Option<u64> {
    d.has(0, b"$DRBDmgr=q").then_some(0)
}

/// A DRBD proxy data log: `DRBDdlh*` at 0 on a device of 16 KiB or more.
pub fn drbdproxy_datalog(d: &Device<'_>) -> Option<u64> {
    (d.size() >= 16 * 1024 && d.has(0, b"DRBDdlh*")).then_some(0)
}

/// An XFS external log: a log record header (magic `0xFEEDBABE`, version
/// 1 or 2, a non-empty body, a known format) at the start of one of the
/// first 512 sectors, before any XFS superblock.
pub fn xfs_log(d: &Device<'_>) -> Option<u64> {
    for i in 0..512u64 {
        let o = i * SECTOR;
        let b = d.at(o, 304)?;
        if &b[..4] == b"XFSB" {
            return None;
        }
        let version = be32(b, 8);
        let len = be32(b, 12);
        if be32(b, 0) == 0xFEED_BABE
            && version != 0
            && version & !3 == 0
            && (1..=i32::MAX as u32).contains(&len)
            && (1..=3).contains(&be32(b, 300))
        {
            return Some(o);
        }
    }
    None
}

/// An UBI image (raw flash volume container).
pub fn ubi(d: &Device<'_>) -> Option<u64> {
    d.has(0, b"UBI#").then_some(0)
}

// ---- Swap and hibernation -------------------------------------------------------

/// The offsets of a signature in the last 10 bytes of the first page, for
/// every page size Linux uses (4 to 64 KiB).
const PAGE_END: [u64; 5] = [4086, 8182, 16374, 32758, 65526];

/// Linux swap (versions 0 and 1).
pub fn swap(d: &Device<'_>) -> Option<u64> {
    PAGE_END
        .iter()
        .find_map(|&o| at_any(d, &[o], b"SWAPSPACE2").or_else(|| at_any(d, &[o], b"SWAP-SPACE")))
}

/// A hibernation image written over swap: swsusp and uswsusp signatures
/// where the swap signature was, or TuxOnIce's header at 0.
pub fn swsuspend(d: &Device<'_>) -> Option<u64> {
    const MAGICS: [&[u8]; 4] = [b"S1SUSPEND", b"S2SUSPEND", b"ULSUSPEND", b"LINHIB0001"];
    if d.has(0, b"\xed\xc3\x02\xe9\x98\x56\xe5\x0c") {
        return Some(0);
    }
    PAGE_END
        .iter()
        .find_map(|&o| MAGICS.iter().find_map(|m| at_any(d, &[o], m)))
}
