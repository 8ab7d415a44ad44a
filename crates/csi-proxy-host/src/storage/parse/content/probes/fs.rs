//! Filesystems.

use super::members::{BCACHE_MAGIC, BCACHE_SB};
use super::{at_any, be16, be32, le16, le32, Device, SECTOR};
use crate::storage::parse::crc::crc32_raw;

fn pow2_in(v: u64, lo: u64, hi: u64) -> bool {
    v.is_power_of_two() && (lo..=hi).contains(&v)
}

/// XFS: `XFSB` at 0 with a power-of-two block size (512 B to 64 KiB).
pub fn xfs(d: &Device<'_>) -> Option<u64> {
    (d.has(0, b"XFSB") && pow2_in(d.u32_be(4)?.into(), 512, 65536)).then_some(0)
}

/// EXFS (an XFS variant): `EXFS` at 0 with a power-of-two block size
/// (512 B to 64 KiB), as for XFS.
pub fn exfs(d: &Device<'_>) -> Option<u64> {
    (d.has(0, b"EXFS") && pow2_in(d.u32_be(4)?.into(), 512, 65536)).then_some(0)
}

/// Btrfs: the superblock at 64 KiB, its magic 0x40 bytes in.
pub fn btrfs(d: &Device<'_>) -> Option<u64> {
    d.has(0x10040, b"_BHRfS_M").then_some(0x10040)
}

/// bcachefs: the superblock at 4 KiB (or a copy at 2 MiB or in the last
/// KiB), with the
/// bcachefs magic UUID, or the bcache one with a bcachefs version (above
/// bcache's 0 to 6), recording its own sector (104 bytes in).
pub fn bcachefs(d: &Device<'_>) -> Option<u64> {
    const MAGIC: [u8; 16] = [
        0xc6, 0x85, 0x73, 0xf6, 0x66, 0xce, 0x90, 0xa9, 0xd9, 0x6a, 0x60, 0xcf, 0x80, 0x3d, 0xf7,
        0xef,
    ];
    let last = d.size().checked_sub(1024)?;
    [BCACHE_SB, 2 << 20, last].iter().find_map(|&sb| {
        let ours = d.has(sb + 24, &MAGIC)
            || (d.has(sb + 24, &BCACHE_MAGIC) && u64::from(d.u16_le(sb + 16)?) > 6);
        (ours && d.u64_le(sb + 104) == Some(sb / SECTOR)).then_some(sb + 24)
    })
}

/// The BIOS parameter block's bytes per sector (a power of two, 256 B to
/// 4 KiB) and sectors per cluster (a power of two), which FAT, NTFS and
/// their relatives share.
fn bpb_sane(d: &Device<'_>) -> Option<bool> {
    let bps = d.u16_le(11)?;
    let spc = d.at(13, 1)?[0];
    Some(pow2_in(bps.into(), 256, 4096) && spc != 0 && spc.is_power_of_two())
}

/// NTFS, under the conditions libblkid sets (a filesystem FormatVolume
/// may replace must be no looser than `blkid -p`): `NTFS    ` as the OEM
/// name; a sector of 256 B to 4 KiB; sectors per cluster a power of two
/// up to 128 (or 240..=249 for 2^(256-n)), a cluster of at most 2 MiB;
/// the BPB fields NTFS leaves unused zero; an MFT record size of 1 to 64
/// clusters or 2^-n bytes (n in 0xe1..=0xf7 as a signed byte), at least 4;
/// the MFT and its mirror inside the volume's clusters; and `FILE` at the
/// start of the MFT's records 0 and 3 ($MFT, $Volume), which must lie in
/// the bytes read ([`ntfs_unverified`] names an NTFS boot sector whose MFT
/// was not read).
pub fn ntfs(d: &Device<'_>) -> Option<u64> {
    let (mft, record) = ntfs_boot(d)?;
    let file = |n: u64| {
        d.has(mft.checked_add(n.checked_mul(record)?)?, b"FILE")
            .then_some(())
    };
    file(0)?;
    file(3)?;
    Some(3)
}

/// An NTFS boot sector that passes every check of [`ntfs`] but whose MFT
/// records lie beyond the bytes read (a volume formatted by Windows keeps
/// its MFT gigabytes in): content that is refused (never replaced), as
/// it cannot be told from a near miss without reading further.
pub fn ntfs_unverified(d: &Device<'_>) -> Option<u64> {
    let (mft, record) = ntfs_boot(d)?;
    let read = |n: u64| {
        n.checked_mul(record)
            .and_then(|o| o.checked_add(mft))
            .and_then(|o| d.at(o, 4))
            .is_some()
    };
    (!(read(0) && read(3))).then_some(3)
}

/// libblkid's checks of an NTFS boot sector: the MFT's byte offset and
/// its record size when they pass.
fn ntfs_boot(d: &Device<'_>) -> Option<(u64, u64)> {
    if !d.has(3, b"NTFS    ") {
        return None;
    }
    let ss = u64::from(d.u16_le(11)?);
    if !(256..=4096).contains(&ss) {
        return None;
    }
    let spc = match d.at(13, 1)?[0] {
        n @ (1 | 2 | 4 | 8 | 16 | 32 | 64 | 128) => u64::from(n),
        n @ 240..=249 => 1u64 << (256 - u32::from(n)),
        _ => return None,
    };
    let cluster = ss * spc;
    if cluster > 2 << 20 {
        return None;
    }
    let unused_zero = d.u16_le(14)? == 0
        && d.at(16, 1)?[0] == 0
        && d.u16_le(17)? == 0
        && d.u16_le(19)? == 0
        && d.u16_le(22)? == 0
        && d.u32_le(32)? == 0;
    if !unused_zero {
        return None;
    }
    let cpmr = d.at(0x40, 1)?[0];
    let record = match cpmr {
        1 | 2 | 4 | 8 | 16 | 32 | 64 => u64::from(cpmr) * cluster,
        0xe1..=0xf7 => 1u64 << (256 - u32::from(cpmr)),
        _ => return None,
    };
    let clusters = d.u64_le(0x28)? / spc;
    let (mft, mirror) = (d.u64_le(0x30)?, d.u64_le(0x38)?);
    if mft > clusters || mirror > clusters || record < 4 {
        return None;
    }
    Some((mft.checked_mul(cluster)?, record))
}

/// exFAT, as a filesystem FormatVolume may replace: `EXFAT   ` as the
/// OEM name and a boot sector libblkid would read without fault: a
/// sector of 512 B to 4 KiB (`block_bits` 9..=12 at 108), a cluster of at
/// most 32 MiB (`bpc_bits` at 109), one or two FATs (110), and the root
/// directory cluster (at 96, 2..=0xffffff6) inside the device. Looser
/// than that, the OEM name alone is [`exfat_unverified`].
pub fn exfat(d: &Device<'_>) -> Option<u64> {
    if !d.has(3, b"EXFAT   ") {
        return None;
    }
    let b = d.at(108, 3)?;
    let (block_bits, bpc_bits, fats) = (u64::from(b[0]), u64::from(b[1]), b[2]);
    if !(9..=12).contains(&block_bits) || block_bits + bpc_bits > 25 || !(1..=2).contains(&fats) {
        return None;
    }
    let root = u64::from(d.u32_le(96)?);
    if !(2..=0xfff_fff6).contains(&root) {
        return None;
    }
    let block = u64::from(d.u32_le(88)?) + ((root - 2) << bpc_bits);
    let end = (block << block_bits).checked_add(32)?;
    (end <= d.size()).then_some(3)
}

/// The exFAT OEM name on a boot sector [`exfat`] does not accept (libblkid
/// may still name it `exfat`): content that is refused, never replaced.
pub fn exfat_unverified(d: &Device<'_>) -> Option<u64> {
    (d.has(3, b"EXFAT   ") && exfat(d).is_none()).then_some(3)
}

/// A FAT12/16/32 boot sector: the boot signature, the filesystem type
/// string of a FAT12/16 or a FAT32 BPB, a sane BPB and at least one FAT.
pub fn vfat(d: &Device<'_>) -> Option<u64> {
    if !d.has(510, &[0x55, 0xAA]) || !bpb_sane(d)? || d.at(16, 1)?[0] == 0 {
        return None;
    }
    if d.has(54, b"FAT") {
        return Some(54);
    }
    d.has(82, b"FAT32").then_some(82)
}

/// ReFS: its volume boot record's signature at 0.
pub fn refs(d: &Device<'_>) -> Option<u64> {
    d.has(0, b"\0\0\0ReFS\0").then_some(0)
}

/// APFS: the container superblock's `NXSB` at 32.
pub fn apfs(d: &Device<'_>) -> Option<u64> {
    d.has(32, b"NXSB").then_some(32)
}

const HFS_SB: u64 = 1024;

/// HFS+ and HFSX: `H+` (version 4) or `HX` (version 5) at 1 KiB with a
/// power-of-two block size, or an HFS wrapper embedding one.
pub fn hfsplus(d: &Device<'_>) -> Option<u64> {
    if d.has(HFS_SB, b"BD") {
        let embedded = d.has(HFS_SB + 0x7c, b"H+") || d.has(HFS_SB + 0x7c, b"HX");
        return embedded.then_some(HFS_SB);
    }
    let version = match d.at(HFS_SB, 2)? {
        b"H+" => 4,
        b"HX" => 5,
        _ => return None,
    };
    (d.u16_be(HFS_SB + 2)? == version && pow2_in(d.u32_be(HFS_SB + 40)?.into(), 512, 1 << 30))
        .then_some(HFS_SB)
}

/// HFS (the original Mac OS format): `BD` at 1 KiB, an allocation block
/// size that is a non-zero multiple of 512, and no embedded HFS+.
pub fn hfs(d: &Device<'_>) -> Option<u64> {
    if !d.has(HFS_SB, b"BD") || d.has(HFS_SB + 0x7c, b"H+") || d.has(HFS_SB + 0x7c, b"HX") {
        return None;
    }
    let block = d.u32_be(HFS_SB + 0x14)?;
    (block != 0 && block % 512 == 0).then_some(HFS_SB)
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

fn has_ext_magic(d: &Device<'_>) -> bool {
    d.u16_le(EXT_SB + 0x38) == Some(EXT_MAGIC)
}

/// The ext superblock's generation: `Some(2|3|4)`, `Some(0)` for an
/// external journal device, `None` for no ext superblock.
fn ext_generation(d: &Device<'_>) -> Option<u8> {
    if !has_ext_magic(d) || d.u32_le(EXT_SB + 0x18)? > 6 {
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

pub fn ext4(d: &Device<'_>) -> Option<u64> {
    (ext_generation(d)? == 4).then_some(EXT_SB + 0x38)
}

pub fn ext3(d: &Device<'_>) -> Option<u64> {
    (ext_generation(d)? == 3).then_some(EXT_SB + 0x38)
}

pub fn ext2(d: &Device<'_>) -> Option<u64> {
    (ext_generation(d)? == 2).then_some(EXT_SB + 0x38)
}

pub fn ext_journal(d: &Device<'_>) -> Option<u64> {
    (ext_generation(d)? == 0).then_some(EXT_SB + 0x38)
}

const VRS: u64 = 32 * 1024;

/// UDF (ECMA-167): a volume recognition sequence at 32 KiB (descriptors
/// of 2 KiB, or of the block size above that) holding an `NSR02` or
/// `NSR03` descriptor, and an anchor volume descriptor pointer (tag 2
/// recording its own block) at block 256 or 512, for blocks of 512 B to
/// 4 KiB.
pub fn udf(d: &Device<'_>) -> Option<u64> {
    const KNOWN: [&[u8]; 5] = [b"BEA01", b"BOOT2", b"CD001", b"CDW02", b"TEA01"];
    let nsr = |stride: u64| {
        (0..64u64).find_map(|i| {
            let o = VRS + i * stride;
            let id = d.at(o + 1, 5)?;
            if id == b"NSR02" || id == b"NSR03" {
                Some(Some(o + 1))
            } else if KNOWN.contains(&id) {
                None
            } else {
                Some(None)
            }
        })?
    };
    [512u64, 1024, 2048, 4096].iter().find_map(|&bs| {
        let found = nsr(bs.max(2048))?;
        let anchor = [256u64, 512]
            .iter()
            .any(|&n| d.u16_le(n * bs) == Some(2) && d.u32_le(n * bs + 12) == Some(n as u32));
        anchor.then_some(found)
    })
}

/// ISO 9660 (`CD001` in the first volume descriptor at 32 KiB) and its
/// High Sierra predecessor (`CDROM`).
pub fn iso9660(d: &Device<'_>) -> Option<u64> {
    at_any(d, &[VRS + 1], b"CD001").or_else(|| at_any(d, &[VRS + 9], b"CDROM"))
}

/// UFS 1 and 2 (BSD, Solaris, ...): the superblock's magic 0x55c bytes in,
/// at any of the standard superblock offsets, either byte order.
pub fn ufs(d: &Device<'_>) -> Option<u64> {
    const MAGICS: [u32; 6] = [
        0x1954_0119, // UFS2
        0x0001_1954, // UFS1
        0x0019_5612, // with fs_featurebits
        0x0009_5014, // long file names
        0x0061_2195, // security extensions
        0x0523_1994, // 4 GiB files
    ];
    [0u64, 8192, 65536, 262144].iter().find_map(|&sb| {
        let o = sb + 0x55c;
        let (le, be) = (d.u32_le(o)?, d.u32_be(o)?);
        (MAGICS.contains(&le) || MAGICS.contains(&be)).then_some(o)
    })
}

/// F2FS: its magic at 1 KiB.
pub fn f2fs(d: &Device<'_>) -> Option<u64> {
    (d.u32_le(1024) == Some(0xF2F5_2010)).then_some(1024)
}

/// SquashFS 4 (little-endian `hsqs` with major version 4 or later).
pub fn squashfs(d: &Device<'_>) -> Option<u64> {
    (d.has(0, b"hsqs") && d.u16_le(28)? >= 4).then_some(0)
}

/// SquashFS 1 to 3, either byte order.
pub fn squashfs3(d: &Device<'_>) -> Option<u64> {
    let old = if d.has(0, b"sqsh") {
        d.u16_be(28)? < 4
    } else {
        d.has(0, b"hsqs") && d.u16_le(28)? < 4
    };
    old.then_some(0)
}

/// cramfs, either byte order.
pub fn cramfs(d: &Device<'_>) -> Option<u64> {
    at_any(d, &[0], b"\x45\x3d\xcd\x28").or_else(|| at_any(d, &[0], b"\x28\xcd\x3d\x45"))
}

/// romfs.
pub fn romfs(d: &Device<'_>) -> Option<u64> {
    d.has(0, b"-rom1fs-").then_some(0)
}

/// EROFS: its magic at 1 KiB.
pub fn erofs(d: &Device<'_>) -> Option<u64> {
    (d.u32_le(1024) == Some(0xE0F5_E1E2)).then_some(1024)
}

/// JFS: `JFS1` at 32 KiB.
pub fn jfs(d: &Device<'_>) -> Option<u64> {
    d.has(32768, b"JFS1").then_some(32768)
}

/// ReiserFS 3.5 (superblock at 8 or 64 KiB), 3.6 and the journal
/// relocation variant (at 64 KiB): the magic 52 bytes into the superblock.
pub fn reiserfs(d: &Device<'_>) -> Option<u64> {
    const SB: u64 = 64 * 1024;
    at_any(d, &[SB + 52], b"ReIsEr2Fs")
        .or_else(|| at_any(d, &[SB + 52], b"ReIsEr3Fs"))
        .or_else(|| at_any(d, &[SB + 52, 8192 + 52, 8192 + 20], b"ReIsErFs"))
}

/// Reiser4: `ReIsEr4` at 64 KiB.
pub fn reiser4(d: &Device<'_>) -> Option<u64> {
    d.has(65536, b"ReIsEr4").then_some(65536)
}

/// NILFS2: the primary superblock at 1 KiB, or the secondary one in the
/// last 4 KiB (the size rounded down to sectors), with the magic `0x3434`
/// and a valid CRC over the superblock's first `s_bytes` bytes.
pub fn nilfs2(d: &Device<'_>) -> Option<u64> {
    let valid = |o: u64| {
        let b = d.at(o, 1024)?;
        let bytes = usize::from(le16(b, 8));
        if le16(b, 6) != 0x3434 || !(20..=1024).contains(&bytes) {
            return None;
        }
        let crc = crc32_raw(le32(b, 12), &b[..16]);
        let crc = crc32_raw(crc32_raw(crc, &[0; 4]), &b[20..bytes]);
        (crc == le32(b, 16)).then_some(o + 6)
    };
    valid(1024).or_else(|| valid((d.size() / SECTOR).checked_sub(8)? * SECTOR))
}

/// Minix v1, v2 (magic at 1 KiB + 0x10) and v3 (at + 0x18), either byte
/// order, with the superblock's sizes consistent (as fsck.minix checks)
/// and no ext or EROFS superblock overlapping it.
pub fn minix(d: &Device<'_>) -> Option<u64> {
    const SB: u64 = 1024;
    let b = d.at(SB, 32)?;
    let v12 = |m: u16| match m {
        0x137F | 0x138F => Some(1),
        0x2468 | 0x2478 => Some(2),
        _ => None,
    };
    let (version, swap, magic_at) = if let Some(v) = v12(le16(b, 0x10)) {
        (v, false, 0x10)
    } else if let Some(v) = v12(be16(b, 0x10)) {
        (v, true, 0x10)
    } else if le16(b, 0x18) == 0x4D5A {
        (3, false, 0x18)
    } else if be16(b, 0x18) == 0x4D5A {
        (3, true, 0x18)
    } else {
        return None;
    };
    let u16_ = |o: usize| u64::from(if swap { be16(b, o) } else { le16(b, o) });
    let u32_ = |o: usize| u64::from(if swap { be32(b, o) } else { le32(b, o) });
    let (zones, ninodes, imaps, zmaps, firstz, log_zone) = if version == 3 {
        (u32_(20), u32_(0), u16_(6), u16_(8), u16_(10), u16_(12))
    } else {
        let state = u16_(18);
        if state & !3 != 0 {
            return None;
        }
        let zones = if version == 2 { u32_(20) } else { u16_(2) };
        (zones, u16_(0), u16_(4), u16_(6), u16_(8), u16_(10))
    };
    let bits = 1024 * 8;
    if log_zone != 0
        || ninodes == 0
        || ninodes == u64::from(u32::MAX)
        || imaps * bits < ninodes + 1
        || firstz > zones
        || zmaps * bits < zones - firstz + 1
        || has_ext_magic(d)
        || d.u32_le(SB) == Some(0xE0F5_E1E2)
    {
        return None;
    }
    Some(SB + magic_at)
}

const GFS_SB: u64 = 64 * 1024;

/// The GFS/GFS2 superblock at 64 KiB: its magic, the superblock type and
/// the filesystem and multihost format numbers.
fn gfs_formats(d: &Device<'_>) -> Option<(u32, u32)> {
    if d.u32_be(GFS_SB)? != 0x0116_1970 || d.u32_be(GFS_SB + 4)? != 1 {
        return None;
    }
    Some((d.u32_be(GFS_SB + 24)?, d.u32_be(GFS_SB + 28)?))
}

/// GFS (format 1309, multihost 1401).
pub fn gfs(d: &Device<'_>) -> Option<u64> {
    (gfs_formats(d)? == (1309, 1401)).then_some(GFS_SB)
}

/// GFS2 (formats 18xx, multihost 19xx).
pub fn gfs2(d: &Device<'_>) -> Option<u64> {
    let (fs, multi) = gfs_formats(d)?;
    ((1800..1900).contains(&fs) && (1900..2000).contains(&multi)).then_some(GFS_SB)
}

/// OCFS2: `OCFSV2` at the start of block 2 for blocks of 512 B to 4 KiB.
pub fn ocfs2(d: &Device<'_>) -> Option<u64> {
    at_any(d, &[1024, 2048, 4096, 8192], b"OCFSV2")
}

/// OCFS (version 1): `OracleCFS` in the volume label at 8 KiB.
pub fn ocfs(d: &Device<'_>) -> Option<u64> {
    d.has(8192, b"OracleCFS").then_some(8192)
}

/// zonefs: `SFOZ` at 0.
pub fn zonefs(d: &Device<'_>) -> Option<u64> {
    d.has(0, b"SFOZ").then_some(0)
}

/// HPFS (OS/2): the superblock's magic at 8 KiB and the spare block's at
/// 8.5 KiB.
pub fn hpfs(d: &Device<'_>) -> Option<u64> {
    (d.u32_le(0x2000)? == 0xF995_E849 && d.u32_le(0x2200)? == 0xF991_1849).then_some(0x2000)
}

/// Novell Storage Services: `SPB5` at 4 KiB.
pub fn nss(d: &Device<'_>) -> Option<u64> {
    d.has(4096, b"SPB5").then_some(4096)
}

/// VxFS: its magic little-endian at 1 KiB, or big-endian at 8 KiB (HP-UX).
pub fn vxfs(d: &Device<'_>) -> Option<u64> {
    const MAGIC: u32 = 0xA501_FCF5;
    if d.u32_le(1024) == Some(MAGIC) {
        return Some(1024);
    }
    (d.u32_be(8192) == Some(MAGIC)).then_some(8192)
}

/// BeFS: the superblock at 0 or 512 with its three magics and byte-order
/// mark in one byte order, and a block size of 1 to 8 KiB matching its
/// shift.
pub fn befs(d: &Device<'_>) -> Option<u64> {
    [0u64, 512].iter().find_map(|&sb| {
        let b = d.at(sb, 120)?;
        [false, true].iter().find_map(|&big| {
            let r = |o: usize| if big { be32(b, o) } else { le32(b, o) };
            let ok = r(32) == 0x4246_5331
                && r(36) == 0x4249_4745
                && r(68) == 0xDD12_1031
                && r(112) == 0x15B6_830E
                && (10..=13).contains(&r(44))
                && r(40) == 1 << r(44);
            ok.then_some(sb + 32)
        })
    })
}

/// SCO BFS (the boot filesystem): its magic at 0.
pub fn bfs(d: &Device<'_>) -> Option<u64> {
    (d.u32_le(0) == Some(0x1BAD_FACE)).then_some(0)
}

/// UBIFS: the node magic at 0.
pub fn ubifs(d: &Device<'_>) -> Option<u64> {
    (d.u32_le(0) == Some(0x0610_1831)).then_some(0)
}

/// VMFS (the VMware filesystem): its magic at 2 MiB.
pub fn vmfs(d: &Device<'_>) -> Option<u64> {
    (d.u32_le(0x200000) == Some(0x2FAB_F15E)).then_some(0x200000)
}

/// System V: the superblock's magic `0xFD187E20` (either byte order) 504
/// bytes into the second half of 1 KiB block 0, 9, 15 or 18 (where the
/// SysV, Coherent and Xenix-derived layouts put it).
pub fn sysv(d: &Device<'_>) -> Option<u64> {
    const MAGIC: u32 = 0xFD18_7E20;
    [0u64, 9, 15, 18].iter().find_map(|&block| {
        let o = block * 1024 + 512 + 504;
        let m = d.u32_le(o)?;
        (m == MAGIC || m == MAGIC.swap_bytes()).then_some(o)
    })
}

/// Xenix: its 3-byte magic (either byte order) at 2048, the superblock's
/// `s_magic` in the second KiB.
pub fn xenix(d: &Device<'_>) -> Option<u64> {
    at_any(d, &[2048], b"\x2b\x55\x44").or_else(|| at_any(d, &[2048], b"\x44\x55\x2b"))
}

/// The bytes a filesystem found on `d` says it covers from the device's
/// start (its recorded size), for the formats whose size this code reads:
/// ext2/3/4 (blocks count × block size), XFS (data blocks × block size),
/// Btrfs (total bytes) and NTFS (sectors × sector size, and the backup
/// boot sector after them). `None` for every other format, or when the
/// fields are not read or overflow.
pub fn extent(name: &str, d: &Device<'_>) -> Option<u64> {
    match name {
        "ext2" | "ext3" | "ext4" => {
            const INCOMPAT_64BIT: u32 = 0x80;
            let lo = u64::from(d.u32_le(EXT_SB + 4)?);
            let hi = if d.u32_le(EXT_SB + 0x60)? & INCOMPAT_64BIT != 0 {
                u64::from(d.u32_le(EXT_SB + 0x150)?)
            } else {
                0
            };
            let bs = 1024u64.checked_shl(d.u32_le(EXT_SB + 0x18)?)?;
            ((hi << 32) | lo).checked_mul(bs)
        }
        "xfs" => d.u64_be(8)?.checked_mul(d.u32_be(4)?.into()),
        "btrfs" => d.u64_le(0x10070),
        "ntfs" => d
            .u64_le(0x28)?
            .checked_add(1)?
            .checked_mul(d.u16_le(11)?.into()),
        _ => None,
    }
}
