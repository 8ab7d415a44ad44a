//! The one home of the CRCs our parsers check, table-driven (tables built
//! at compile time):
//!
//! - CRC-32 (IEEE 802.3, the polynomial 0xEDB88320 reflected, initial
//!   value and final XOR 0xFFFFFFFF): GPT headers and entry arrays (UEFI
//!   spec, "CRC32"); [`crc32`], [`update`];
//! - the same without the customary inversions, continued from any value:
//!   the form nilfs2 and DDF store; [`crc32_raw`];
//! - CRC-32C (Castagnoli, 0x82F63B78 reflected, inverted in and out):
//!   [`crc32c`].
//!
//! Kept rather than the `crc` crate: about 60 lines, no new crate in the
//! daemon's graph, and the raw continued form is one line here.

/// Remainder of each byte value, computed at compile time.
const TABLE: [u32; 256] = build_table(0xEDB8_8320);
/// The same for CRC-32C.
const TABLE_C: [u32; 256] = build_table(0x82F6_3B78);

const fn build_table(poly: u32) -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut bit = 0;
        while bit < 8 {
            c = if c & 1 != 0 { poly ^ (c >> 1) } else { c >> 1 };
            bit += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
}

/// CRC-32 of `data`.
pub(crate) fn crc32(data: &[u8]) -> u32 {
    update(0, data)
}

/// Continues the CRC-32 `crc` (of the bytes before `data`) over `data`:
/// `update(crc32(a), b) == crc32(a ++ b)`.
pub(crate) fn update(crc: u32, data: &[u8]) -> u32 {
    !crc32_raw(!crc, data)
}

/// CRC-32 (the IEEE polynomial, reflected) continued from `crc`, without
/// the customary inversions: the form nilfs2 and DDF store.
pub(crate) fn crc32_raw(crc: u32, data: &[u8]) -> u32 {
    raw(&TABLE, crc, data)
}

/// CRC-32C (Castagnoli), the usual form (inverted in and out).
pub(crate) fn crc32c(data: &[u8]) -> u32 {
    !raw(&TABLE_C, !0, data)
}

fn raw(table: &[u32; 256], mut c: u32, data: &[u8]) -> u32 {
    for &byte in data {
        c = table[((c ^ u32::from(byte)) & 0xFF) as usize] ^ (c >> 8);
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn check_values() {
        assert_eq!(crc32(b""), 0);
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(
            crc32(b"The quick brown fox jumps over the lazy dog"),
            0x414F_A339
        );
        assert_eq!(crc32(&[0u8; 32]), 0x190A_55AD);
        // The standard check values for "123456789".
        assert_eq!(!crc32_raw(!0, b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    /// Bit-by-bit reference without the table.
    fn slow(data: &[u8]) -> u32 {
        !slow_raw(0xEDB8_8320, 0xFFFF_FFFF, data)
    }

    /// Bit by bit, without inversions, from `c`.
    fn slow_raw(poly: u32, mut c: u32, data: &[u8]) -> u32 {
        for &b in data {
            c ^= u32::from(b);
            for _ in 0..8 {
                c = if c & 1 != 0 { (c >> 1) ^ poly } else { c >> 1 };
            }
        }
        c
    }

    proptest! {
        #[test]
        fn matches_bitwise_and_is_incremental(
            a in proptest::collection::vec(any::<u8>(), 0..300),
            b in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            let mut ab = a.clone();
            ab.extend_from_slice(&b);
            prop_assert_eq!(crc32(&ab), slow(&ab));
            prop_assert_eq!(update(crc32(&a), &b), crc32(&ab));
        }

        #[test]
        fn raw_and_castagnoli_match_bitwise(
            start in any::<u32>(),
            a in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            prop_assert_eq!(crc32_raw(start, &a), slow_raw(0xEDB8_8320, start, &a));
            prop_assert_eq!(crc32c(&a), !slow_raw(0x82F6_3B78, !0, &a));
        }
    }
}
