//! Filesystems.

use super::{Image, MIB};
use crate::storage::parse::content::Class;
use crate::storage::parse::crc::crc32_raw;

#[test]
fn ext_generations_and_the_journal_device() {
    let ext = |compat: u32, incompat: u32, ro: u32| {
        let mut img = Image::new(8 * MIB);
        img.u16_le(1024 + 0x38, 0xEF53)
            .u32_le(1024 + 0x5C, compat)
            .u32_le(1024 + 0x60, incompat)
            .u32_le(1024 + 0x64, ro);
        img
    };
    ext(0, 0x2, 0x1).is("ext2", 1080);
    ext(0x4, 0x2, 0x1).is("ext3", 1080);
    ext(0x4, 0x2 | 0x40, 0x1).is("ext4", 1080);
    ext(0x4, 0x2, 0x1 | 0x8).is("ext4", 1080);
    ext(0, 0x8, 0).is("jbd", 1080);
    // A block size beyond ext's (log 7): not ext.
    let mut img = ext(0, 0, 0);
    img.u32_le(1024 + 0x18, 7);
    img.is_nothing();
}

#[test]
fn xfs_btrfs_and_friends_at_their_offsets() {
    let mut img = Image::new(8 * MIB);
    img.put(0, b"XFSB").u32_be(4, 4096);
    img.is("xfs", 0);
    img.u32_be(4, 4095);
    img.is_nothing();

    let mut img = Image::new(8 * MIB);
    img.put(0x10040, b"_BHRfS_M");
    img.is("btrfs", 0x10040);
    let mut img = Image::new(8 * MIB);
    img.put(0x10000, b"_BHRfS_M");
    img.is_nothing();
}

#[test]
fn boot_sector_filesystems() {
    let bpb = |img: &mut Image| {
        img.u16_le(11, 512)
            .put(13, &[8])
            .put(16, &[2])
            .put(510, &[0x55, 0xAA]);
    };
    let mut img = Image::new(8 * MIB);
    bpb(&mut img);
    img.put(54, b"FAT16   ");
    img.is("vfat", 54);
    let mut img = Image::new(8 * MIB);
    bpb(&mut img);
    img.put(82, b"FAT32   ");
    img.is("vfat", 82);
    // No FAT, or a bytes-per-sector that is no power of two.
    let mut img = Image::new(8 * MIB);
    bpb(&mut img);
    img.put(54, b"FAT16   ").put(16, &[0]);
    assert!(!img.names().contains(&"vfat"));
    let mut img = Image::new(8 * MIB);
    bpb(&mut img);
    img.put(54, b"FAT16   ").u16_le(11, 500);
    assert!(!img.names().contains(&"vfat"));

    // The OEM name alone: exFAT as libblkid 2.38 may name it, refused
    // content, not a filesystem to replace; with a sane boot sector, one.
    let mut img = Image::new(8 * MIB);
    img.put(3, b"EXFAT   ");
    img.is("exfat", 3);
    assert_eq!(img.identify()[0].class, Class::Other);
    img.put(108, &[9, 3, 1]).u32_le(88, 2048).u32_le(96, 4);
    img.is("exfat", 3);
    assert_eq!(img.identify()[0].class, Class::Filesystem);
    let mut img = Image::new(8 * MIB);
    img.put(4, b"EXFAT   ");
    img.is_nothing();

    let mut img = Image::new(8 * MIB);
    img.put(0, b"\0\0\0ReFS\0");
    img.is("ReFS", 0);
    let mut img = Image::new(8 * MIB);
    img.put(0, b"\0\0\0ReFX\0");
    img.is_nothing();
}

#[test]
fn apple_filesystems() {
    let mut img = Image::new(8 * MIB);
    img.put(32, b"NXSB");
    img.is("apfs", 32);
    let mut img = Image::new(8 * MIB);
    img.put(0, b"NXSB");
    img.is_nothing();

    for (sig, version) in [(b"H+", 4u16), (b"HX", 5)] {
        let mut img = Image::new(8 * MIB);
        img.put(1024, sig)
            .u16_be(1026, version)
            .u32_be(1024 + 40, 4096);
        img.is("hfsplus", 1024);
        img.u16_be(1026, version + 1);
        img.is_nothing();
    }
    // HFS, and an HFS wrapper around HFS+ (reported as HFS+).
    let mut img = Image::new(8 * MIB);
    img.put(1024, b"BD").u32_be(1024 + 0x14, 4096);
    img.is("hfs", 1024);
    img.put(1024 + 0x7c, b"H+");
    img.is("hfsplus", 1024);
    let mut img = Image::new(8 * MIB);
    img.put(1024, b"BD").u32_be(1024 + 0x14, 1000);
    img.is_nothing();
}

#[test]
fn udf_for_every_block_size() {
    for bs in [512u64, 1024, 2048, 4096] {
        let stride = bs.max(2048);
        let mut img = Image::new(8 * MIB);
        img.put(32768 + 1, b"BEA01")
            .put(32768 + stride + 1, b"NSR03")
            .put(32768 + 2 * stride + 1, b"TEA01")
            .u16_le(256 * bs, 2)
            .u32_le(256 * bs + 12, 256);
        img.is("udf", 32768 + stride + 1);
        // Without the anchor: a recognition sequence alone is not UDF.
        img.u16_le(256 * bs, 0);
        img.is_nothing();
    }
    // The anchor at block 512 (unclosed write-once media).
    let mut img = Image::new(8 * MIB);
    img.put(32768 + 1, b"BEA01")
        .put(32768 + 2049, b"NSR02")
        .u16_le(512 * 2048, 2)
        .u32_le(512 * 2048 + 12, 512);
    img.is("udf", 32768 + 2049);
    // An unknown descriptor ends the sequence before the NSR.
    let mut img = Image::new(8 * MIB);
    img.put(32768 + 1, b"XXX01")
        .put(32768 + 2049, b"NSR02")
        .u16_le(256 * 2048, 2)
        .u32_le(256 * 2048 + 12, 256);
    img.is_nothing();
}

#[test]
fn iso9660_and_high_sierra() {
    let mut img = Image::new(8 * MIB);
    img.put(32769, b"CD001");
    img.is("iso9660", 32769);
    let mut img = Image::new(8 * MIB);
    img.put(32777, b"CDROM");
    img.is("iso9660", 32777);
    let mut img = Image::new(8 * MIB);
    img.put(32768, b"CD001");
    img.is_nothing();
}

#[test]
fn ufs_at_each_superblock_offset_in_both_byte_orders() {
    for sb in [0u64, 8192, 65536, 262144] {
        for magic in [0x1954_0119u32, 0x0001_1954] {
            let mut img = Image::new(8 * MIB);
            img.u32_le(sb + 0x55c, magic);
            img.is("ufs", sb + 0x55c);
            let mut img = Image::new(8 * MIB);
            img.u32_be(sb + 0x55c, magic);
            img.is("ufs", sb + 0x55c);
        }
    }
    let mut img = Image::new(8 * MIB);
    img.u32_le(16384 + 0x55c, 0x1954_0119);
    img.is_nothing();
}

#[test]
fn flash_and_read_only_filesystems() {
    let mut img = Image::new(8 * MIB);
    img.u32_le(1024, 0xF2F5_2010);
    img.is("f2fs", 1024);
    let mut img = Image::new(8 * MIB);
    img.u32_le(1024, 0xE0F5_E1E2);
    img.is("erofs", 1024);
    let mut img = Image::new(8 * MIB);
    img.u32_le(1024, 0xE0F5_E1E3);
    img.is_nothing();

    let mut img = Image::new(8 * MIB);
    img.put(0, b"hsqs").u16_le(28, 4);
    img.is("squashfs", 0);
    img.u16_le(28, 3);
    img.is("squashfs3", 0);
    let mut img = Image::new(8 * MIB);
    img.put(0, b"sqsh").u16_be(28, 3);
    img.is("squashfs3", 0);
    img.u16_be(28, 4);
    img.is_nothing();

    for magic in [&b"\x45\x3d\xcd\x28"[..], b"\x28\xcd\x3d\x45"] {
        let mut img = Image::new(8 * MIB);
        img.put(0, magic);
        img.is("cramfs", 0);
    }
    let mut img = Image::new(8 * MIB);
    img.put(0, b"-rom1fs-");
    img.is("romfs", 0);
    let mut img = Image::new(8 * MIB);
    img.put(0, b"-rom1fs_");
    img.is_nothing();

    let mut img = Image::new(8 * MIB);
    img.u32_le(0, 0x0610_1831);
    img.is("ubifs", 0);
    let mut img = Image::new(8 * MIB);
    img.u32_le(0, 0x1BAD_FACE);
    img.is("bfs", 0);
    let mut img = Image::new(8 * MIB);
    img.put(0, b"SFOZ");
    img.is("zonefs", 0);
}

#[test]
fn journaling_filesystems_of_other_systems() {
    let mut img = Image::new(8 * MIB);
    img.put(32768, b"JFS1");
    img.is("jfs", 32768);
    let mut img = Image::new(8 * MIB);
    img.put(32769, b"JFS1");
    img.is_nothing();

    for (at, magic) in [
        (65536 + 52, &b"ReIsEr2Fs"[..]),
        (65536 + 52, b"ReIsEr3Fs"),
        (65536 + 52, b"ReIsErFs"),
        (8192 + 52, b"ReIsErFs"),
    ] {
        let mut img = Image::new(8 * MIB);
        img.put(at, magic);
        img.is("reiserfs", at);
    }
    let mut img = Image::new(8 * MIB);
    img.put(8192 + 52, b"ReIsEr2Fs");
    img.is_nothing();
    let mut img = Image::new(8 * MIB);
    img.put(65536, b"ReIsEr4");
    img.is("reiser4", 65536);

    let mut img = Image::new(8 * MIB);
    img.u32_le(1024, 0xA501_FCF5);
    img.is("vxfs", 1024);
    let mut img = Image::new(8 * MIB);
    img.u32_be(8192, 0xA501_FCF5);
    img.is("vxfs", 8192);
    let mut img = Image::new(8 * MIB);
    img.u32_be(1024, 0xA501_FCF5);
    img.is_nothing();

    let mut img = Image::new(8 * MIB);
    img.u32_le(0x2000, 0xF995_E849).u32_le(0x2200, 0xF991_1849);
    img.is("hpfs", 0x2000);
    img.u32_le(0x2200, 0);
    img.is_nothing();

    let mut img = Image::new(8 * MIB);
    img.put(4096, b"SPB5");
    img.is("nss", 4096);
}

fn nilfs_sb(img: &mut Image, at: u64) {
    img.u16_le(at + 6, 0x3434)
        .u16_le(at + 8, 1024)
        .u32_le(at + 12, 0x1234_5678);
    let b = img.get(at, 1024).to_vec();
    let crc = crc32_raw(0x1234_5678, &b[..16]);
    let crc = crc32_raw(crc32_raw(crc, &[0; 4]), &b[20..]);
    img.u32_le(at + 16, crc);
}

#[test]
fn nilfs2_primary_or_secondary_superblock_with_its_crc() {
    let mut img = Image::new(8 * MIB);
    nilfs_sb(&mut img, 1024);
    img.is("nilfs2", 1030);
    let size = 8 * MIB + 1000;
    let mut img = Image::new(size);
    let at = (size / 512 - 8) * 512;
    nilfs_sb(&mut img, at);
    img.is("nilfs2", at + 6);
    // The magic alone ("44"): a common pair of bytes, not nilfs2.
    let mut img = Image::new(8 * MIB);
    nilfs_sb(&mut img, 1024);
    img.put(1024 + 100, &[1]);
    img.is_nothing();
}

#[test]
fn minix_versions_and_the_ext_collision() {
    let v12 = |magic: u16, big: bool| {
        let mut img = Image::new(8 * MIB);
        let put16 = |img: &mut Image, o: u64, v: u16| {
            if big {
                img.u16_be(1024 + o, v);
            } else {
                img.u16_le(1024 + o, v);
            }
        };
        put16(&mut img, 0, 64); // inodes
        put16(&mut img, 2, 1000); // zones
        put16(&mut img, 4, 1); // inode map blocks
        put16(&mut img, 6, 1); // zone map blocks
        put16(&mut img, 8, 10); // first data zone
        put16(&mut img, 0x10, magic);
        put16(&mut img, 0x12, 1); // state: valid
        img
    };
    for magic in [0x137Fu16, 0x138F] {
        v12(magic, false).is("minix", 1024 + 0x10);
        v12(magic, true).is("minix", 1024 + 0x10);
    }
    let mut v3 = Image::new(8 * MIB);
    v3.u32_le(1024, 64)
        .u16_le(1024 + 6, 1)
        .u16_le(1024 + 8, 1)
        .u16_le(1024 + 10, 10)
        .u32_le(1024 + 20, 1000)
        .u16_le(1024 + 0x18, 0x4D5A)
        .u16_le(1024 + 28, 1024);
    v3.is("minix", 1024 + 0x18);
    // The same bytes in an ext superblock: its free inode count.
    let mut img = v12(0x137F, false);
    img.u16_le(1024 + 0x38, 0xEF53);
    assert!(!img.names().contains(&"minix"));
    // Too few inode map blocks for its inodes.
    let mut img = v12(0x2468, false);
    img.u16_le(1024, 60000);
    img.is_nothing();
}

#[test]
fn cluster_filesystems() {
    let gfs = |fs: u32, multi: u32| {
        let mut img = Image::new(8 * MIB);
        img.u32_be(65536, 0x0116_1970)
            .u32_be(65536 + 4, 1)
            .u32_be(65536 + 24, fs)
            .u32_be(65536 + 28, multi);
        img
    };
    gfs(1801, 1900).is("gfs2", 65536);
    gfs(1309, 1401).is("gfs", 65536);
    gfs(1700, 1900).is_nothing();

    for at in [1024u64, 2048, 4096, 8192] {
        let mut img = Image::new(8 * MIB);
        img.put(at, b"OCFSV2");
        img.is("ocfs2", at);
    }
    let mut img = Image::new(8 * MIB);
    img.put(3072, b"OCFSV2");
    img.is_nothing();
    let mut img = Image::new(8 * MIB);
    img.put(8192, b"OracleCFS");
    img.is("ocfs", 8192);
    let mut img = Image::new(8 * MIB);
    img.put(8193, b"OracleCFS");
    img.is_nothing();
}

#[test]
fn befs_in_both_byte_orders() {
    for big in [false, true] {
        for sb in [0u64, 512] {
            let mut img = Image::new(8 * MIB);
            let w = |img: &mut Image, o: u64, v: u32| {
                if big {
                    img.u32_be(sb + o, v);
                } else {
                    img.u32_le(sb + o, v);
                }
            };
            w(&mut img, 32, 0x4246_5331);
            w(&mut img, 36, 0x4249_4745);
            w(&mut img, 40, 2048);
            w(&mut img, 44, 11);
            w(&mut img, 68, 0xDD12_1031);
            w(&mut img, 112, 0x15B6_830E);
            img.is("befs", sb + 32);
            w(&mut img, 40, 4096);
            img.is_nothing();
        }
    }
}

#[test]
fn bcachefs_superblock() {
    const MAGIC: [u8; 16] = [
        0xc6, 0x85, 0x73, 0xf6, 0x66, 0xce, 0x90, 0xa9, 0xd9, 0x6a, 0x60, 0xcf, 0x80, 0x3d, 0xf7,
        0xef,
    ];
    let mut img = Image::new(8 * MIB);
    img.u16_le(4096 + 16, 0x400)
        .put(4096 + 24, &MAGIC)
        .u64_le(4096 + 104, 8);
    img.is("bcachefs", 4096 + 24);
    img.u64_le(4096 + 104, 0);
    img.is_nothing();
}

#[test]
fn vmfs_filesystem() {
    let mut img = Image::new(8 * MIB);
    img.u32_le(0x200000, 0x2FAB_F15E);
    img.is("VMFS", 0x200000);
    let mut img = Image::new(8 * MIB);
    img.u32_le(0x200004, 0x2FAB_F15E);
    img.is_nothing();
}

#[test]
fn exfs_like_xfs() {
    let mut img = Image::new(8 * MIB);
    img.put(0, b"EXFS").u32_be(4, 4096);
    img.is("exfs", 0);
    // A block size that is not a power of two: not EXFS.
    img.u32_be(4, 4095);
    img.is_nothing();
}

#[test]
fn sysv_at_each_of_its_blocks_in_either_byte_order() {
    for block in [0u64, 9, 15, 18] {
        let at = block * 1024 + 1016;
        let mut img = Image::new(MIB);
        img.u32_le(at, 0xFD18_7E20);
        img.is("sysv", at);
        let mut img = Image::new(MIB);
        img.u32_be(at, 0xFD18_7E20);
        img.is("sysv", at);
        // Four bytes off, or in a block libblkid does not look at.
        let mut img = Image::new(MIB);
        img.u32_le(at + 4, 0xFD18_7E20);
        img.is_nothing();
    }
    let mut img = Image::new(MIB);
    img.u32_le(10 * 1024 + 1016, 0xFD18_7E20);
    img.is_nothing();
    let mut img = Image::new(MIB);
    img.u32_le(1016, 0xFD18_7E21);
    img.is_nothing();
}

#[test]
fn xenix_three_bytes_at_2048() {
    for magic in [[0x2b, 0x55, 0x44], [0x44, 0x55, 0x2b]] {
        let mut img = Image::new(MIB);
        img.put(2048, &magic);
        img.is("xenix", 2048);
    }
    let mut img = Image::new(MIB);
    img.put(2048, &[0x2b, 0x55, 0x45]);
    img.is_nothing();
    let mut img = Image::new(MIB);
    img.put(2049, &[0x2b, 0x55, 0x44]);
    img.is_nothing();
}

/// An NTFS boot sector as mkntfs writes one on an 8 MiB volume: 512 B
/// sectors, 4 KiB clusters, 1 KiB MFT records, the MFT at cluster 4 with
/// records 0 and 3 (`FILE`).
pub(super) fn ntfs_image() -> Image {
    let mut img = Image::new(8 * MIB);
    img.put(3, b"NTFS    ")
        .u16_le(11, 512)
        .put(13, &[8])
        .u64_le(0x28, 8 * MIB / 512 - 1)
        .u64_le(0x30, 4)
        .u64_le(0x38, 2)
        .put(0x40, &[0xf6])
        .put(4 * 4096, b"FILE")
        .put(4 * 4096 + 3 * 1024, b"FILE");
    img
}

#[test]
fn ntfs_is_named_under_libblkids_conditions_only() {
    ntfs_image().is("ntfs", 3);
    // The OEM name alone, or at another offset, is no NTFS.
    let mut img = Image::new(8 * MIB);
    img.put(3, b"NTFS    ");
    img.is_nothing();
    let mut img = Image::new(8 * MIB);
    img.put(4, b"NTFS    ");
    img.is_nothing();
    // Each of libblkid's conditions, broken one at a time.
    let breaks: [&dyn Fn(&mut Image); 10] = [
        &|i| {
            i.u16_le(11, 128);
        },
        &|i| {
            i.u16_le(11, 8192);
        },
        &|i| {
            i.put(13, &[3]);
        },
        &|i| {
            i.u16_le(11, 4096).put(13, &[0xf5]); // 4 KiB x 2^11 = 8 MiB clusters
        },
        &|i| {
            i.u16_le(14, 1);
        },
        &|i| {
            i.put(16, &[2]);
        },
        &|i| {
            i.u32_le(32, 1);
        },
        &|i| {
            i.put(0x40, &[3]);
        },
        &|i| {
            i.u64_le(0x30, u64::MAX / 2);
        },
        &|i| {
            i.put(4 * 4096 + 3 * 1024, b"FILF");
        },
    ];
    for (n, b) in breaks.iter().enumerate() {
        let mut img = ntfs_image();
        b(&mut img);
        assert!(
            img.identify().iter().all(|f| f.class != Class::Filesystem),
            "break {n}: {:?}",
            img.identify()
        );
    }
}

#[test]
fn an_ntfs_whose_mft_was_not_read_is_refused_content_not_a_filesystem() {
    // A 64 MiB volume whose MFT is at 16 MiB: in neither region read.
    let mut img = Image::new(64 * MIB);
    img.put(0, ntfs_image().get(0, 512))
        .u64_le(0x28, 64 * MIB / 512 - 1)
        .u64_le(0x30, 4096);
    let found = img.identify();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!((found[0].name, found[0].class), ("ntfs", Class::Other));
}
