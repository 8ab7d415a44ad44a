//! `identify` and the write-span check on arbitrary bytes and sizes: no
//! panic, offsets inside the device, and answers that depend only on the
//! bytes read.

use super::super::*;
use proptest::prelude::*;

fn check(head: &[u8], tail: &[u8], size: u64) {
    let dev = Device::new(head, tail, size);
    for f in identify(&dev) {
        assert!(f.offset < size.max(1), "{f:?} beyond {size}");
    }
    if let Some(o) = first_nonzero_in_write_span(&dev) {
        assert!(o < size);
    }
    let _ = describe(&identify(&dev));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn identify_never_panics_on_arbitrary_regions(
        head in proptest::collection::vec(any::<u8>(), 0..20_000),
        tail in proptest::collection::vec(any::<u8>(), 0..20_000),
        size in prop_oneof![
            0u64..140_000,
            Just(u64::MAX),
            (1u64 << 20)..(1u64 << 40),
        ],
    ) {
        check(&head, &tail, size);
    }

    /// Signature bytes sprinkled over a small device: every probe runs
    /// into magic numbers at odd places, at both ends.
    #[test]
    fn identify_never_panics_on_magic_soup(
        picks in proptest::collection::vec((0usize..MAGICS.len(), 0u64..600_000), 0..40),
        size in 0u64..600_000,
    ) {
        let mut bytes = vec![0u8; size as usize];
        for (m, at) in picks {
            let m = MAGICS[m];
            let at = at as usize;
            if at + m.len() <= bytes.len() {
                bytes[at..at + m.len()].copy_from_slice(m);
            }
        }
        let (head, tail) = read_regions(size, |off, buf| {
            buf.copy_from_slice(&bytes[off as usize..off as usize + buf.len()]);
            Ok(())
        })
        .unwrap();
        check(&head, &tail, size);
    }
}

const MAGICS: &[&[u8]] = &[
    b"EFI PART",
    b"\x55\xAA",
    b"\xfc\x4e\x2b\xa9\x01\x00\x00\x00",
    b"\xa9\x2b\x4e\xfc",
    b"\x11\xde\x11\xde",
    b"\xde\x11\xde\x11",
    b"NVIDIA  \x1e\x00\x00\x00",
    b"JM",
    b"\x55\xaa\x01",
    b"BEA01",
    b"NSR03",
    b"CD001",
    b"\x02\x00",
    b"\x34\x34\x00\x04",
    b"\x7f\x13",
    b"\x5a\x4d",
    b"\x83\x74\x02\x6b",
    b"\x83\x74\x02\x6d",
    b"BFS1",
    b"\xfe\xed\xba\xbe",
    b"H+\x00\x04",
    b"BD",
    b"\x00\x00\x10\x00",
    b"\xff\xff\xff\xff",
    b"LABELONE",
    b"LVM2 001",
    b"\x00\xba\xb1\x0c",
];

#[test]
fn read_regions_on_tiny_and_odd_sizes() {
    for size in [0u64, 1, 511, 512, 4097, (1 << 20) + 1, (5 << 20) - 1] {
        let bytes = vec![7u8; size as usize];
        let (head, tail) = read_regions(size, |off, buf| {
            buf.copy_from_slice(&bytes[off as usize..off as usize + buf.len()]);
            Ok(())
        })
        .unwrap();
        assert_eq!(head.len() as u64, size.min(HEAD_LEN as u64));
        assert_eq!(tail.len() as u64, size.min(TAIL_LEN as u64));
        check(&head, &tail, size);
    }
}
