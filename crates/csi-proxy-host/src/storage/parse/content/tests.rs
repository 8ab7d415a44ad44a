use super::*;

const MIB: u64 = 1 << 20;

/// A device image of `size` bytes, all zero, to write signatures into.
pub(super) struct Image {
    pub bytes: Vec<u8>,
}

impl Image {
    pub fn new(size: u64) -> Image {
        Image {
            bytes: vec![0; size as usize],
        }
    }

    pub fn put(&mut self, off: u64, v: &[u8]) -> &mut Self {
        self.bytes[off as usize..off as usize + v.len()].copy_from_slice(v);
        self
    }

    /// The regions [`read_regions`] reads, then what [`identify`] finds.
    pub fn identify(&self) -> Vec<Found> {
        let size = self.bytes.len() as u64;
        let (head, tail) = read_regions(size, |off, buf| {
            buf.copy_from_slice(&self.bytes[off as usize..off as usize + buf.len()]);
            Ok(())
        })
        .unwrap();
        identify(&Device::new(&head, &tail, size))
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.identify().iter().map(|f| f.name).collect()
    }
}

#[test]
fn a_zero_device_holds_nothing() {
    for size in [0, 1, 512, 4096, MIB, 8 * MIB] {
        let img = Image::new(size);
        assert!(img.identify().is_empty(), "{size}");
        let (head, tail) = (img.bytes.clone(), img.bytes.clone());
        assert_eq!(
            first_nonzero_in_write_span(&Device::new(&head, &tail, size)),
            None
        );
    }
}

#[test]
fn reads_outside_what_was_read_are_none() {
    let head = vec![1u8; 4096];
    let tail = vec![2u8; 4096];
    let d = Device::new(&head, &tail, 100 * MIB);
    assert_eq!(d.at(0, 4), Some(&[1u8; 4][..]));
    assert_eq!(d.at(4094, 4), None, "across the end of the head");
    assert_eq!(d.at(MIB, 4), None, "between head and tail");
    assert_eq!(d.from_end(4, 4), Some(&[2u8; 4][..]));
    assert_eq!(d.from_end(2, 4), None, "past the end");
    assert_eq!(d.at(u64::MAX - 1, 4), None);
}

#[test]
fn the_write_span_check_finds_the_first_nonzero_byte_at_either_end() {
    let mut img = Image::new(8 * MIB);
    img.put(8 * MIB - 3, &[7]);
    let size = 8 * MIB;
    let t = &img.bytes[7 << 20..].to_vec();
    let h = &img.bytes[..HEAD_LEN.min(8 << 20)];
    assert_eq!(
        first_nonzero_in_write_span(&Device::new(h, t, size)),
        Some(8 * MIB - 3)
    );
    img.put(600_000, &[1]);
    let h = &img.bytes[..HEAD_LEN.min(8 << 20)];
    assert_eq!(
        first_nonzero_in_write_span(&Device::new(h, t, size)),
        Some(600_000)
    );
    // Past the first MiB it is not written over, so not checked.
    let mut img = Image::new(8 * MIB);
    img.put(MIB + 1, &[1]).put(7 * MIB - 1, &[1]);
    let (h, t) = (&img.bytes[..HEAD_LEN], &img.bytes[7 << 20..]);
    assert_eq!(first_nonzero_in_write_span(&Device::new(h, t, size)), None);
}

#[test]
fn members_at_the_end_are_found() {
    let size = 64 * MIB + 12345;
    // md 0.90: the last 64 KiB-aligned 64 KiB block.
    let mut img = Image::new(size);
    let o = (size & !0xffff) - 0x10000;
    img.put(o, &MD_MAGIC_LE);
    assert_eq!(img.names(), ["linux_raid_member"]);
    // md 1.0: 8 KiB before the end, 4 KiB aligned, with version 1.
    let mut img = Image::new(size);
    let o = (size - 8192) & !4095;
    img.put(o, &MD_MAGIC_LE).put(o + 4, &1u32.to_le_bytes());
    assert_eq!(img.names(), ["linux_raid_member"]);
    // ZFS: an uberblock in label 3 only.
    let mut img = Image::new(size);
    let label3 = (size & !(256 * 1024 - 1)) - 256 * 1024;
    img.put(label3 + 128 * 1024 + 5 * 1024, &0x00bab10cu64.to_be_bytes());
    assert_eq!(img.names(), ["zfs_member"]);
    // A lone backup GPT header.
    let mut img = Image::new(size - 12345);
    img.put(64 * MIB - 512, b"EFI PART");
    assert_eq!(img.names(), ["gpt"]);
}

const MD_MAGIC_LE: [u8; 4] = 0xa92b_4efcu32.to_le_bytes();

#[test]
fn members_at_the_start_are_found() {
    let mut img = Image::new(8 * MIB);
    img.put(512, b"LABELONE").put(512 + 24, b"LVM2 001");
    assert_eq!(img.names(), ["LVM2_member"]);
    let mut img = Image::new(8 * MIB);
    img.put(4096, &MD_MAGIC_LE).put(4100, &1u32.to_le_bytes());
    assert_eq!(img.names(), ["linux_raid_member"]);
    let mut img = Image::new(8 * MIB);
    img.put(0, b"LUKS\xba\xbe");
    assert_eq!(img.names(), ["crypto_LUKS"]);
}

#[test]
fn a_boot_sector_filesystem_is_not_an_mbr() {
    let mut img = Image::new(8 * MIB);
    img.put(3, b"NTFS    ")
        .put(510, &[0x55, 0xAA])
        .put(446 + 4, &[7]);
    assert_eq!(img.names(), ["ntfs"]);
    let mut img = Image::new(8 * MIB);
    img.put(510, &[0x55, 0xAA]).put(446 + 4, &[0x83]);
    assert_eq!(img.names(), ["dos"]);
}

#[test]
fn describe_names_what_and_where() {
    let mut img = Image::new(8 * MIB);
    img.put(512, b"LABELONE").put(512 + 24, b"LVM2 001");
    assert_eq!(
        describe(&img.identify()),
        "LVM2_member (volume-manager, RAID or pool member) at byte 512"
    );
}
