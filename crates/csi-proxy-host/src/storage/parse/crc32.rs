//! CRC-32 as used by GPT (UEFI spec, "CRC32" of headers and entry arrays):
//! the IEEE 802.3 polynomial in reflected form (0xEDB88320), initial value
//! and final XOR 0xFFFFFFFF.

/// Remainder of each byte value, computed at compile time.
const TABLE: [u32; 256] = build_table();

const fn build_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut bit = 0;
        while bit < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
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
    let mut c = !crc;
    for &byte in data {
        c = TABLE[((c ^ u32::from(byte)) & 0xFF) as usize] ^ (c >> 8);
    }
    !c
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
    }

    /// Bit-by-bit reference without the table.
    fn slow(data: &[u8]) -> u32 {
        let mut c = 0xFFFF_FFFFu32;
        for &b in data {
            c ^= u32::from(b);
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    (c >> 1) ^ 0xEDB8_8320
                } else {
                    c >> 1
                };
            }
        }
        !c
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
    }
}
