//! Partition tables.

use super::fs::{ntfs, ntfs_unverified, vfat};
use super::{be16, be32, Device};

const SECTOR_SIZES: [u64; 2] = [512, 4096];

/// A GPT header at LBA 1, for 512- and 4096-byte sectors.
pub fn gpt_primary(d: &Device<'_>) -> Option<u64> {
    SECTOR_SIZES
        .iter()
        .copied()
        .find(|&ss| d.has(ss, b"EFI PART"))
}

/// A GPT header in the last sector (the backup), for 512- and 4096-byte
/// sectors: a disk whose primary table is gone still holds partitions.
pub fn gpt_backup(d: &Device<'_>) -> Option<u64> {
    SECTOR_SIZES.iter().find_map(|&ss| {
        let o = d.size().checked_sub(ss)?;
        d.has(o, b"EFI PART").then_some(o)
    })
}

/// A protective MBR alone: the boot signature and a GPT entry (`0xEE`)
/// but no GPT header where [`gpt_primary`] and [`gpt_backup`] look (with
/// one, the disk is GPT's and named so).
pub fn pmbr(d: &Device<'_>) -> Option<u64> {
    if !d.has(510, &[0x55, 0xAA]) || gpt_primary(d).is_some() || gpt_backup(d).is_some() {
        return None;
    }
    let entries = d.at(446, 64)?;
    entries.chunks(16).any(|e| e[4] == 0xEE).then_some(510)
}

/// An AIX disk: its magic (`IBMA` in EBCDIC) at 0.
pub fn aix(d: &Device<'_>) -> Option<u64> {
    d.has(0, b"\xC9\xC2\xD4\xC1").then_some(0)
}

/// An Ultrix disk label: magic `0x032957` and a valid flag of 1 (32-bit
/// words, little-endian as libblkid reads them on x86) at the end of
/// sector 31, 72 bytes before 16 KiB.
pub fn ultrix(d: &Device<'_>) -> Option<u64> {
    const AT: u64 = 16384 - 72;
    (d.u32_le(AT) == Some(0x0003_2957) && d.u32_le(AT + 4) == Some(1)).then_some(AT)
}

/// A UnixWare disk label on a device larger than a floppy (1440 KiB): the
/// VTOC magic `0x600DDEEE` 156 bytes into sector 29, with the label's
/// magic `0xCAE5600D` 4 bytes into that sector or where libblkid 2.38
/// looks for it (byte 29174, its offset macro counts kilobytes as bytes).
pub fn unixware(d: &Device<'_>) -> Option<u64> {
    const SECTOR29: u64 = 29 * 512;
    if d.size() <= 1440 * 1024 || d.u32_le(SECTOR29 + 156) != Some(0x600D_DEEE) {
        return None;
    }
    [SECTOR29 + 4, 29174]
        .iter()
        .copied()
        .find(|&o| d.u32_le(o) == Some(0xCAE5_600D))
}

/// A Solaris x86 VTOC: its sanity word `0x600DDEEE` 12 bytes into
/// sector 1, and layout version 1 after it.
pub fn solaris(d: &Device<'_>) -> Option<u64> {
    (d.u32_le(524) == Some(0x600D_DEEE) && d.u32_le(528) == Some(1)).then_some(524)
}

/// An MBR: the boot signature, every entry's boot flag 0 or 0x80 (an
/// empty table counts: it is a table), none of them GPT's protective entry
/// (`0xEE`: the disk is GPT's), and not the boot sector of a FAT/NTFS/exFAT
/// filesystem (which carries the same signature). An NTFS boot sector is
/// one that passes libblkid's NTFS checks, as libblkid 2.38 skips only
/// those: a broken one with `55AA` is a DOS table to both.
pub fn dos(d: &Device<'_>) -> Option<u64> {
    if !d.has(510, &[0x55, 0xAA])
        || ntfs(d).is_some()
        || ntfs_unverified(d).is_some()
        || d.has(3, b"EXFAT   ")
        || vfat(d).is_some()
    {
        return None;
    }
    let entries = d.at(446, 64)?;
    entries
        .chunks(16)
        .all(|e| (e[0] == 0 || e[0] == 0x80) && e[4] != 0xEE)
        .then_some(510)
}

/// An Apple partition map: the driver descriptor `ER` in block 0 with a
/// block size that holds a map entry, and the first map entry (`PM`, or
/// the old `TS`) in block 1.
pub fn mac(d: &Device<'_>) -> Option<u64> {
    if !d.has(0, b"ER") {
        return None;
    }
    let bs = u64::from(d.u16_be(2)?);
    (bs >= 136 && (d.has(bs, b"PM") || d.has(bs, b"TS"))).then_some(0)
}

/// A BSD disklabel: its magic (little-endian) at the start of sector 1,
/// or 64 or 128 bytes into sector 0, repeated 132 bytes further on.
pub fn bsd(d: &Device<'_>) -> Option<u64> {
    const MAGIC: u32 = 0x8256_4557;
    [512u64, 64, 128]
        .iter()
        .copied()
        .find(|&o| d.u32_le(o) == Some(MAGIC) && d.u32_le(o + 132) == Some(MAGIC))
}

/// A Sun (SPARC) disk label: `0xDABE` at 508 and its 16-bit words XOR to
/// zero.
pub fn sun(d: &Device<'_>) -> Option<u64> {
    let b = d.at(0, 512)?;
    if be16(b, 508) != 0xDABE {
        return None;
    }
    let x = (0..256).fold(0u16, |x, i| x ^ be16(b, i * 2));
    (x == 0).then_some(508)
}

/// An SGI volume header: its magic at 0 and its big-endian 32-bit words
/// summing to zero.
pub fn sgi(d: &Device<'_>) -> Option<u64> {
    let b = d.at(0, 512)?;
    if be32(b, 0) != 0x0BE5_A941 {
        return None;
    }
    let sum = (0..128).fold(0u32, |s, i| s.wrapping_add(be32(b, i * 4)));
    (sum == 0).then_some(0)
}

/// An Atari (AHDI) root sector: the disk size it records fits the device,
/// a sane bad-sector list, and at least one active primary entry with an
/// alphanumeric id and extent inside the disk.
pub fn atari(d: &Device<'_>) -> Option<u64> {
    let sectors = d.size() / 512;
    let b = d.at(0, 512)?;
    let disk = u64::from(be32(b, 0x1C2));
    if disk < 2 || disk > sectors || sectors > i32::MAX as u64 {
        return None;
    }
    let fits = |start: u64, len: u64| start > 0 && len > 0 && start + len <= disk;
    let (bsl_start, bsl_len) = (u64::from(be32(b, 0x1F6)), u64::from(be32(b, 0x1FA)));
    if (bsl_start != 0 || bsl_len != 0) && !fits(bsl_start, bsl_len) {
        return None;
    }
    // Linux's isalnum, which the kernel's Atari parser uses: ASCII letters
    // and digits, and the Latin-1 letters.
    let alnum = |c: u8| c.is_ascii_alphanumeric() || (c >= 0xC0 && c != 0xD7 && c != 0xF7);
    (0..4).find_map(|i| {
        let o = 0x1C6 + i * 12;
        let e = &b[o..o + 12];
        let ok = e[0] & 1 == 1
            && e[1..4].iter().all(|&c| alnum(c))
            && fits(be32(e, 4).into(), be32(e, 8).into());
        ok.then_some(o as u64)
    })
}
