//! Members, containers and swap.

use super::{Image, MIB};
use crate::storage::parse::crc::{crc32_raw, crc32c};

#[test]
fn luks_both_versions_and_the_secondary_luks2_header() {
    for v in [1u16, 2] {
        let mut img = Image::new(8 * MIB);
        img.put(0, b"LUKS\xba\xbe").u16_be(6, v);
        img.is("crypto_LUKS", 0);
    }
    for o in [0x4000u64, 0x8000, 0x200000] {
        let mut img = Image::new(8 * MIB);
        img.put(o, b"SKUL\xba\xbe").u16_be(o + 6, 2);
        img.is("crypto_LUKS", o);
    }
    // The furthest (after 4 MiB of primary metadata) lies past HEAD_LEN:
    // found only where the tail covers it.
    let mut img = Image::new(4 * MIB + 512 * 1024);
    img.put(0x400000, b"SKUL\xba\xbe").u16_be(0x400006, 2);
    img.is("crypto_LUKS", 0x400000);
    // Near misses: an unknown version; a secondary header off its places.
    let mut img = Image::new(8 * MIB);
    img.put(0, b"LUKS\xba\xbe").u16_be(6, 7);
    img.is_nothing();
    let mut img = Image::new(8 * MIB);
    img.put(0x5000, b"SKUL\xba\xbe").u16_be(0x5006, 2);
    img.is_nothing();
}

const BITLOCKER_GUID: [u8; 16] = [
    0x3b, 0xd6, 0x67, 0x49, 0x29, 0x2e, 0xd8, 0x4a, 0x83, 0x99, 0xf6, 0xa3, 0x39, 0xe3, 0xd0, 0x01,
];

#[test]
fn bitlocker_vista_windows_7_and_to_go() {
    let mut img = Image::new(8 * MIB);
    img.put(0, b"\xeb\x52\x90-FVE-FS-");
    img.is("BitLocker", 0);
    // Windows 7: the FVE metadata block it points at.
    let mut img = Image::new(8 * MIB);
    img.put(0, b"\xeb\x58\x90-FVE-FS-")
        .u64_le(176, 0x20000)
        .put(0x20000, b"-FVE-FS-");
    img.is("BitLocker", 0);
    // To Go: a FAT-looking boot sector with the GUID, its metadata beyond
    // what is read.
    let mut img = Image::new(8 * MIB);
    img.put(0, b"\xeb\x58\x90MSWIN4.1")
        .put(424, &BITLOCKER_GUID)
        .u64_le(440, 0x2100000);
    img.is("BitLocker", 0);
    // Near misses: a plain MSWIN4.1 OEM name; a Windows 7 header whose
    // metadata pointer is unaligned and carries no GUID.
    let mut img = Image::new(8 * MIB);
    img.put(0, b"\xeb\x58\x90MSWIN4.1").u64_le(440, 0x20000);
    img.is_nothing();
    let mut img = Image::new(8 * MIB);
    img.put(0, b"\xeb\x58\x90-FVE-FS-")
        .u64_le(176, 0x20001)
        .put(0x20001, b"-FVE-FS-");
    img.is_nothing();
}

#[test]
fn core_storage_filevault2() {
    let mut img = Image::new(8 * MIB);
    img.u16_le(8, 1)
        .u16_le(10, 0x10)
        .put(88, b"CS")
        .u32_le(90, 1);
    img.is("cs_fvault2", 88);
    img.u16_le(10, 0x11);
    img.is_nothing();
}

#[test]
fn device_mapper_targets_with_metadata() {
    for (magic, name) in [
        (&b"integrt\0"[..], "DM_integrity"),
        (b"verity\0\0", "DM_verity_hash"),
        (b"SnAp", "DM_snapshot_cow"),
    ] {
        let mut img = Image::new(MIB);
        img.put(0, magic);
        img.is(name, 0);
        let mut img = Image::new(MIB);
        img.put(1, magic);
        img.is_nothing();
    }
}

#[test]
fn lvm_physical_volumes() {
    for sector in 0..4u64 {
        let mut img = Image::new(8 * MIB);
        img.put(sector * 512, b"LABELONE")
            .put(sector * 512 + 24, b"LVM2 001");
        img.is("LVM2_member", sector * 512);
    }
    // The label in the fifth sector, or without its type, is not a PV.
    let mut img = Image::new(8 * MIB);
    img.put(2048, b"LABELONE").put(2048 + 24, b"LVM2 001");
    img.is_nothing();
    let mut img = Image::new(8 * MIB);
    img.put(512, b"LABELONE").put(512 + 24, b"LVM1 001");
    img.is_nothing();
    let mut img = Image::new(8 * MIB);
    img.put(0, b"HM").u16_le(2, 2);
    img.is("LVM1_member", 0);
    img.u16_le(2, 3);
    img.is_nothing();
}

const MD_MAGIC: u32 = 0xa92b_4efc;

fn md1(img: &mut Image, at: u64) {
    img.u32_le(at, MD_MAGIC)
        .u32_le(at + 4, 1)
        .u64_le(at + 144, at / 512);
}

#[test]
fn md_superblocks_1_x() {
    // 1.1 at 0, 1.2 at 4 KiB.
    for at in [0u64, 4096] {
        let mut img = Image::new(8 * MIB);
        md1(&mut img, at);
        img.is("linux_raid_member", at);
    }
    // 1.0: 8 KiB before the end, the end rounded down to 4 KiB (mdadm:
    // (sectors - 16) & ~7).
    for size in [16 * MIB, 16 * MIB + 512, 16 * MIB + 4095] {
        let mut img = Image::new(size);
        let at = ((size / 512 - 16) & !7) * 512;
        md1(&mut img, at);
        img.is("linux_raid_member", at);
    }
    // Near misses: a superblock not recording its own place; version 2.
    let mut img = Image::new(8 * MIB);
    img.u32_le(4096, MD_MAGIC)
        .u32_le(4100, 1)
        .u64_le(4096 + 144, 0);
    img.is_nothing();
    let mut img = Image::new(8 * MIB);
    md1(&mut img, 4096);
    img.u32_le(4100, 2);
    img.is_nothing();
}

#[test]
fn md_superblock_0_90_either_byte_order() {
    // mdadm: ((sectors & ~127) - 128) sectors, the last 64 KiB-aligned
    // 64 KiB block.
    let size = 16 * MIB + 12345;
    let at = ((size / 512) & !127) * 512 - 65536;
    let mut img = Image::new(size);
    img.u32_le(at, MD_MAGIC);
    img.is("linux_raid_member", at);
    let mut img = Image::new(size);
    img.u32_be(at, MD_MAGIC);
    img.is("linux_raid_member", at);
    // 4 KiB off is not where 0.90 looks.
    let mut img = Image::new(size);
    img.u32_le(at - 4096, MD_MAGIC);
    img.is_nothing();
}

fn ddf_anchor(img: &mut Image, at: u64) {
    img.u32_be(at, 0xDE11_DE11)
        .put(at + 8, b"csi-proxy-ddf-guid......");
    let h = img.get(at, 512).to_vec();
    let crc = crc32_raw(crc32_raw(crc32_raw(0, &h[..4]), &[0xff; 4]), &h[8..]);
    img.u32_be(at + 4, crc);
}

#[test]
fn ddf_anchor_in_the_last_sector_or_257_before() {
    let size = 16 * MIB + 512;
    for n in [1u64, 257] {
        let mut img = Image::new(size);
        let at = size - n * 512;
        ddf_anchor(&mut img, at);
        img.is("ddf_raid_member", at);
        // A corrupt header (its CRC no longer matches) is not one.
        img.put(at + 100, &[1]);
        img.is_nothing();
    }
}

#[test]
fn firmware_raid_signatures_at_the_end() {
    let size = 16 * MIB;
    let last = size - 512;
    // IMSM: the second-to-last sector, 512 B or 4 KiB sectors.
    for at in [size - 1024, size - 8192] {
        let mut img = Image::new(size);
        img.put(at, b"Intel Raid ISM Cfg Sig. 1.0.00");
        img.is("isw_raid_member", at);
    }
    let mut img = Image::new(size);
    img.put(last, b"Intel Raid ISM Cfg Sig. 1.0.00");
    img.is_nothing();

    // NVIDIA: 30 words summing to zero.
    let at = size - 1024;
    let mut img = Image::new(size);
    img.put(at, b"NVIDIA  ")
        .u32_le(at + 8, 30)
        .u16_le(at + 16, 100);
    let sum = (0..30).fold(0u32, |s, i| {
        let b = img.get(at + i * 4, 4);
        s.wrapping_add(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    });
    img.u32_le(at + 12, sum.wrapping_neg());
    img.is("nvidia_raid_member", at);
    img.u32_le(at + 12, sum.wrapping_neg() ^ 1);
    img.is_nothing();

    // Promise: one of its sectors from the end; not a sector in between.
    for n in [63u64, 16, 974] {
        let mut img = Image::new(size);
        img.put(size - n * 512, b"Promise Technology, Inc.");
        img.is("promise_fasttrack_raid_member", size - n * 512);
    }
    let mut img = Image::new(size);
    img.put(size - 64 * 512, b"Promise Technology, Inc.");
    img.is_nothing();

    // Silicon Image: magic, disk number, checksum of the first 0x13E bytes.
    let sil = |disk: u8| {
        let mut img = Image::new(size);
        img.u32_le(last + 0x60, 0x2F00_0000)
            .put(last + 0x116, &[disk]);
        let sum = (0..0x13E / 2).fold(0u16, |s, i| {
            let b = img.get(last + i * 2, 2);
            s.wrapping_add(u16::from_le_bytes([b[0], b[1]]))
        });
        img.u16_le(last + 0x13E, sum.wrapping_neg());
        img
    };
    sil(1).is("silicon_medley_raid_member", last + 0x60);
    sil(8).is_nothing();

    // VIA: byte sum of the first 50 bytes.
    let via = |version: u8| {
        let mut img = Image::new(size);
        img.u16_le(last, 0xAA55).put(last + 2, &[version, 3, 0, 7]);
        let sum = img
            .get(last, 50)
            .iter()
            .fold(0u8, |s, &x| s.wrapping_add(x));
        img.put(last + 50, &[sum]);
        img
    };
    via(1).is("via_raid_member", last);
    via(3).is_nothing();

    // JMicron: 64 words summing to 0 or 1, a RAID mode up to 5.
    let jm = |mode: u8| {
        let mut img = Image::new(size);
        img.put(last, b"JM")
            .u16_le(last + 2, 0x0100)
            .put(last + 0x30, &[mode]);
        let sum = (0..64).fold(0u16, |s, i| {
            let b = img.get(last + i * 2, 2);
            s.wrapping_add(u16::from_le_bytes([b[0], b[1]]))
        });
        img.u16_le(last + 4, sum.wrapping_neg());
        img
    };
    jm(1).is("jmicron_raid_member", last);
    jm(6).is_nothing();

    let mut img = Image::new(size);
    img.put(last, b"$XIDE$");
    img.is("lsi_mega_raid_member", last);
    img.put(last, b"$XIDE#");
    img.is_nothing();

    let mut img = Image::new(size);
    img.u32_be(last, 0x37FC_4D1E).put(last + 256, b"DPTM");
    img.is("adaptec_raid_member", last);
    img.put(last + 256, b"DPTX");
    img.is_nothing();

    let at = size - 11 * 512;
    let mut img = Image::new(size);
    img.u32_le(at, 0x5a78_16f3);
    img.is("hpt45x_raid_member", at);
    img.u32_le(at, 0x5a78_16f4);
    img.is_nothing();

    let mut img = Image::new(size);
    img.u32_le(9 * 512 + 32, 0x5a78_16f0);
    img.is("hpt37x_raid_member", 9 * 512 + 32);
    img.u32_le(9 * 512 + 32, 0x5a78_16f1);
    img.is_nothing();
}

#[test]
fn firmware_raid_is_not_looked_for_on_tiny_devices() {
    let mut img = Image::new(32 * 1024);
    img.put(32 * 1024 - 512, b"$XIDE$");
    img.is_nothing();
}

#[test]
fn zfs_uberblocks_in_any_of_the_four_labels() {
    let size = 16 * MIB + 12345;
    let aligned = size & !(256 * 1024 - 1);
    for label in [0, 256 * 1024, aligned - 512 * 1024, aligned - 256 * 1024] {
        let at = label + 128 * 1024 + 5 * 1024;
        let mut img = Image::new(size);
        img.put(at, &0x00bab10cu64.to_be_bytes());
        img.is("zfs_member", at);
        let mut img = Image::new(size);
        img.put(at, &0x00bab10cu64.to_le_bytes());
        img.is("zfs_member", at);
    }
    // Outside the uberblock ring (the label's first half: the nvlist).
    let mut img = Image::new(size);
    img.put(64 * 1024, &0x00bab10cu64.to_le_bytes());
    img.is_nothing();
}

const BCACHE_MAGIC: [u8; 16] = [
    0xc6, 0x85, 0x73, 0xf6, 0x4e, 0x1a, 0x45, 0xca, 0x82, 0x65, 0xf5, 0x7f, 0x48, 0xba, 0x6d, 0x81,
];

#[test]
fn bcache_backing_and_cache_devices() {
    for version in [0u64, 1, 3, 4, 6] {
        let mut img = Image::new(8 * MIB);
        img.u64_le(4096 + 8, 8)
            .u64_le(4096 + 16, version)
            .put(4096 + 24, &BCACHE_MAGIC);
        img.is("bcache", 4096 + 24);
    }
    // The superblock not recording its own sector.
    let mut img = Image::new(8 * MIB);
    img.u64_le(4096 + 8, 0).put(4096 + 24, &BCACHE_MAGIC);
    img.is_nothing();
}

#[test]
fn single_signature_members() {
    for (at, magic, name) in [
        (0u64, &b"dmvdo001"[..], "vdo"),
        (0, b"bluestore block device", "ceph_bluestore"),
        (0, b"UBI#", "ubi"),
        (0, b"mpoolDev", "mpool"),
        (0, b"$DRBDmgr=q", "drbdmanage_control_volume"),
        (32, b"ORCLDISK", "oracleasm"),
        (0x100000, b"\x0d\xd0\x01\xc0", "VMFS_volume_member"),
    ] {
        let mut img = Image::new(8 * MIB);
        img.put(at, magic);
        img.is(name, at);
        let mut img = Image::new(8 * MIB);
        img.put(at + 512, magic);
        img.is_nothing();
    }
}

fn drbd(img: &mut Image, magic: u32, bytes_per_bit: u32) -> u64 {
    let at = img.size() - 4096;
    img.u64_le(at, 1 << 20)
        .u32_be(at + 60, magic)
        .u32_be(at + 64, 8)
        .u32_be(at + 80, bytes_per_bit);
    at + 60
}

#[test]
fn drbd_metadata_at_the_end() {
    for magic in [0x8374_026bu32, 0x8374_026c, 0x8374_026d] {
        let mut img = Image::new(16 * MIB + 1);
        let at = drbd(&mut img, magic, 4096);
        img.is("drbd", at);
    }
    let mut img = Image::new(16 * MIB);
    drbd(&mut img, 0x8374_026b, 512);
    img.is_nothing();
    // Bytes after the 8.x structure: not its metadata block.
    let mut img = Image::new(16 * MIB);
    drbd(&mut img, 0x8374_026b, 4096);
    img.put(16 * MIB - 100, &[1]);
    img.is_nothing();
}

#[test]
fn stratis_signature_block_in_sector_1_or_9() {
    const MAGIC: &[u8] = b"!Stra0tis\x86\xff\x02^\x41rh";
    for sector in [1u64, 9] {
        let at = sector * 512;
        let mut img = Image::new(8 * MIB);
        img.put(at + 4, MAGIC).u64_le(at + 20, 16384);
        let crc = crc32c(img.get(at + 4, 508));
        img.u32_le(at, crc);
        img.is("stratis", at + 4);
        img.u32_le(at, crc ^ 1);
        img.is_nothing();
    }
}

#[test]
fn xfs_external_log() {
    let rec = |img: &mut Image, at: u64| {
        img.u32_be(at, 0xFEED_BABE)
            .u32_be(at + 8, 2)
            .u32_be(at + 12, 512)
            .u32_be(at + 300, 1);
    };
    let mut img = Image::new(8 * MIB);
    rec(&mut img, 1024);
    img.is("xfs_external_log", 1024);
    // An XFS filesystem before it: its own log, not an external one.
    img.put(512, b"XFSB");
    assert!(!img.names().contains(&"xfs_external_log"));
    let mut img = Image::new(8 * MIB);
    rec(&mut img, 1024);
    img.u32_be(1024 + 300, 9);
    img.is_nothing();
}

#[test]
fn swap_and_hibernation_images_for_every_page_size() {
    for page in [4096u64, 8192, 16384, 32768, 65536] {
        for magic in [&b"SWAPSPACE2"[..], b"SWAP-SPACE"] {
            let mut img = Image::new(MIB);
            img.put(page - 10, magic);
            img.is("swap", page - 10);
        }
        for magic in [&b"S1SUSPEND"[..], b"S2SUSPEND", b"ULSUSPEND", b"LINHIB0001"] {
            let mut img = Image::new(MIB);
            img.put(page - 10, magic);
            img.is("swsuspend", page - 10);
        }
    }
    let mut img = Image::new(MIB);
    img.put(0, b"\xed\xc3\x02\xe9\x98\x56\xe5\x0c");
    img.is("swsuspend", 0);
    // Not at the end of a page.
    let mut img = Image::new(MIB);
    img.put(4096 - 11, b"SWAPSPACE2");
    img.is_nothing();
}

#[test]
fn drbd_proxy_data_log() {
    let mut img = Image::new(MIB);
    img.put(0, b"DRBDdlh*");
    img.is("drbdproxy_datalog", 0);
    // libblkid's minimum size.
    let mut img = Image::new(16 * 1024 - 512);
    img.put(0, b"DRBDdlh*");
    img.is_nothing();
    let mut img = Image::new(MIB);
    img.put(0, b"DRBDdlh+");
    img.is_nothing();
}
