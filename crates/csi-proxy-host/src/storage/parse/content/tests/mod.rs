//! Unit tests of the probes on synthesized images: for every format a
//! minimal image carrying its signature, and a near miss that must not
//! match. Real images made by the formats' tools are compared with
//! `blkid -p` in tests/content_corpus.rs.

use super::*;

mod fs;
mod members;
mod parity;
mod robustness;
mod tables;

pub(super) const MIB: u64 = 1 << 20;

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

    pub fn u16_le(&mut self, off: u64, v: u16) -> &mut Self {
        self.put(off, &v.to_le_bytes())
    }

    pub fn u16_be(&mut self, off: u64, v: u16) -> &mut Self {
        self.put(off, &v.to_be_bytes())
    }

    pub fn u32_le(&mut self, off: u64, v: u32) -> &mut Self {
        self.put(off, &v.to_le_bytes())
    }

    pub fn u32_be(&mut self, off: u64, v: u32) -> &mut Self {
        self.put(off, &v.to_be_bytes())
    }

    pub fn u64_le(&mut self, off: u64, v: u64) -> &mut Self {
        self.put(off, &v.to_le_bytes())
    }

    pub fn size(&self) -> u64 {
        self.bytes.len() as u64
    }

    pub fn get(&self, off: u64, len: usize) -> &[u8] {
        &self.bytes[off as usize..off as usize + len]
    }

    /// Asserts the image holds exactly `name`, at `offset`.
    #[track_caller]
    pub fn is(&self, name: &str, offset: u64) {
        let found = self.identify();
        assert_eq!(
            found.iter().map(|f| (f.name, f.offset)).collect::<Vec<_>>(),
            [(name, offset)],
            "{found:?}"
        );
    }

    /// Asserts nothing is identified.
    #[track_caller]
    pub fn is_nothing(&self) {
        let found = self.identify();
        assert!(found.is_empty(), "{found:?}");
    }
}

#[test]
fn a_quick_look_finds_only_what_the_whole_regions_show() {
    let mut img = Image::new(8 * MIB);
    let read = |img: &Image| {
        quick_found(img.bytes.len() as u64, |off, buf| {
            buf.copy_from_slice(&img.bytes[off as usize..off as usize + buf.len()]);
            Ok(())
        })
        .unwrap()
    };
    assert!(!read(&img), "zeros");
    img.put(512, b"LABELONE").put(512 + 24, b"LVM2 001");
    assert!(read(&img));
    // Something only the tail shows: the quick look says nothing, the
    // whole regions do.
    let mut img = Image::new(8 * MIB);
    img.put(8 * MIB - 512, b"EFI PART");
    assert!(!read(&img));
    assert!(!img.identify().is_empty());
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
fn a_boot_sector_filesystem_is_not_an_mbr() {
    let mut img = fs::ntfs_image();
    img.put(510, &[0x55, 0xAA]).put(446 + 4, &[7]);
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
