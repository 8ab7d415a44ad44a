//! Partition tables.

use super::{Image, MIB};

#[test]
fn gpt_primary_for_both_sector_sizes_and_a_lone_backup() {
    for ss in [512u64, 4096] {
        let mut img = Image::new(8 * MIB);
        img.put(ss, b"EFI PART");
        img.is("gpt", ss);
        let mut img = Image::new(8 * MIB);
        img.put(8 * MIB - ss, b"EFI PART");
        img.is("gpt", 8 * MIB - ss);
    }
    let mut img = Image::new(8 * MIB);
    img.put(1024, b"EFI PART");
    img.is_nothing();
}

#[test]
fn mbr_empty_or_with_entries_but_not_protective_or_with_bad_flags() {
    let mut img = Image::new(8 * MIB);
    img.put(510, &[0x55, 0xAA]);
    img.is("dos", 510);
    img.put(446, &[0x80]).put(446 + 4, &[0x83]);
    img.is("dos", 510);
    // A GPT's protective MBR is not a DOS table (alone, it is PMBR).
    let mut img = Image::new(8 * MIB);
    img.put(510, &[0x55, 0xAA]).put(446 + 4, &[0xEE]);
    img.is("PMBR", 510);
    // A boot flag other than 0 or 0x80: boot code, not a table.
    let mut img = Image::new(8 * MIB);
    img.put(510, &[0x55, 0xAA]).put(446 + 16, &[0x12]);
    img.is_nothing();
}

#[test]
fn apple_partition_map() {
    let mut img = Image::new(8 * MIB);
    img.put(0, b"ER").u16_be(2, 512).put(512, b"PM");
    img.is("mac", 0);
    let mut img = Image::new(8 * MIB);
    img.put(0, b"ER").u16_be(2, 2048).put(2048, b"TS");
    img.is("mac", 0);
    let mut img = Image::new(8 * MIB);
    img.put(0, b"ER").u16_be(2, 512).put(1024, b"PM");
    img.is_nothing();
}

#[test]
fn bsd_disklabel() {
    for at in [512u64, 64, 128] {
        let mut img = Image::new(8 * MIB);
        img.u32_le(at, 0x8256_4557).u32_le(at + 132, 0x8256_4557);
        img.is("bsd", at);
        img.u32_le(at + 132, 0);
        img.is_nothing();
    }
}

#[test]
fn sun_label_with_its_xor_checksum() {
    let mut img = Image::new(8 * MIB);
    img.put(0, b"csi-proxy sun label").u16_be(508, 0xDABE);
    let x = (0..255).fold(0u16, |x, i| {
        let b = img.get(i * 2, 2);
        x ^ u16::from_be_bytes([b[0], b[1]])
    });
    img.u16_be(510, x);
    img.is("sun", 508);
    img.u16_be(510, x ^ 1);
    img.is_nothing();
}

#[test]
fn sgi_volume_header_with_its_checksum() {
    let mut img = Image::new(8 * MIB);
    img.u32_be(0, 0x0BE5_A941).put(100, b"csi-proxy sgi");
    let sum = (0..128).fold(0u32, |s, i| {
        let b = img.get(i * 4, 4);
        s.wrapping_add(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    });
    img.u32_be(20, sum.wrapping_neg());
    img.is("sgi", 0);
    img.u32_be(20, sum.wrapping_neg() ^ 1);
    img.is_nothing();
}

#[test]
fn atari_root_sector() {
    let size = 8 * MIB;
    let sectors = (size / 512) as u32;
    let mut img = Image::new(size);
    img.u32_be(0x1C2, sectors)
        .put(0x1C6, &[1])
        .put(0x1C7, b"GEM")
        .u32_be(0x1C6 + 4, 2)
        .u32_be(0x1C6 + 8, 1000);
    img.is("atari", 0x1C6);
    // Its extent past the disk size it records.
    img.u32_be(0x1C6 + 8, sectors);
    img.is_nothing();
    // A disk size larger than the device.
    let mut img = Image::new(size);
    img.u32_be(0x1C2, sectors + 1)
        .put(0x1C6, &[1])
        .put(0x1C7, b"GEM")
        .u32_be(0x1C6 + 4, 2)
        .u32_be(0x1C6 + 8, 1000);
    img.is_nothing();
}

#[test]
fn a_protective_mbr_without_a_gpt_header() {
    let mut img = Image::new(8 * MIB);
    img.put(510, &[0x55, 0xAA]).put(446 + 16 + 4, &[0xEE]);
    img.is("PMBR", 510);
    // With a GPT header, it is GPT's.
    img.put(512, b"EFI PART");
    img.is("gpt", 512);
    // Without the boot signature, nothing.
    let mut img = Image::new(8 * MIB);
    img.put(510, &[0x55, 0xAB]).put(446 + 4, &[0xEE]);
    img.is_nothing();
}

#[test]
fn aix_magic_at_0() {
    let mut img = Image::new(8 * MIB);
    img.put(0, b"\xC9\xC2\xD4\xC1");
    img.is("aix", 0);
    let mut img = Image::new(8 * MIB);
    img.put(0, b"\xC9\xC2\xD4\xC2");
    img.is_nothing();
    let mut img = Image::new(8 * MIB);
    img.put(512, b"\xC9\xC2\xD4\xC1");
    img.is_nothing();
}

#[test]
fn ultrix_label_with_its_valid_flag() {
    let mut img = Image::new(8 * MIB);
    img.u32_le(16312, 0x0003_2957).u32_le(16316, 1);
    img.is("ultrix", 16312);
    img.u32_le(16316, 0);
    img.is_nothing();
}

#[test]
fn unixware_label_and_vtoc() {
    for label in [29 * 512 + 4, 29174] {
        let mut img = Image::new(8 * MIB);
        img.u32_le(label, 0xCAE5_600D)
            .u32_le(29 * 512 + 156, 0x600D_DEEE);
        img.is("unixware", label);
        // Without the VTOC's magic, nothing.
        img.u32_le(29 * 512 + 156, 0x600D_DEEF);
        img.is_nothing();
    }
    // A floppy-sized device is not looked at.
    let mut img = Image::new(1440 * 1024);
    img.u32_le(29174, 0xCAE5_600D)
        .u32_le(29 * 512 + 156, 0x600D_DEEE);
    img.is_nothing();
}

#[test]
fn solaris_vtoc_version_1() {
    let mut img = Image::new(8 * MIB);
    img.u32_le(524, 0x600D_DEEE).u32_le(528, 1);
    img.is("solaris", 524);
    img.u32_le(528, 2);
    img.is_nothing();
}
