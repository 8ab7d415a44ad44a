//! Huffman-coded string literals (RFC 7541 §5.2, Appendix B), decoded bit
//! by bit against tables built once: within one code length the codes of
//! Appendix B are consecutive, so a code of length `n` is a symbol exactly
//! when it lies in `[first[n], first[n] + count[n])`.

use super::tables::HUFFMAN_CODES;
use std::sync::OnceLock;

/// The longest code (EOS) has 30 bits.
const MAX_LEN: usize = 30;
const EOS: u16 = 256;

/// Why a Huffman-coded string is invalid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HuffmanError {
    /// The string holds the EOS symbol.
    Eos,
    /// The padding is longer than 7 bits or not a prefix of EOS (all ones).
    Padding,
}

struct Codes {
    /// The first code of each length (index = length in bits).
    first: [u32; MAX_LEN + 1],
    /// How many codes have that length.
    count: [u32; MAX_LEN + 1],
    /// Where that length's symbols start in `symbols`.
    offset: [u16; MAX_LEN + 1],
    /// Symbols ordered by (length, code).
    symbols: [u16; 257],
}

fn codes() -> &'static Codes {
    static CODES: OnceLock<Codes> = OnceLock::new();
    CODES.get_or_init(|| {
        let mut order: Vec<u16> = (0..257).collect();
        order.sort_by_key(|&s| {
            let (code, len) = HUFFMAN_CODES[usize::from(s)];
            (len, code)
        });
        let mut c = Codes {
            first: [0; MAX_LEN + 1],
            count: [0; MAX_LEN + 1],
            offset: [0; MAX_LEN + 1],
            symbols: [0; 257],
        };
        for (i, &s) in order.iter().enumerate() {
            let (code, len) = HUFFMAN_CODES[usize::from(s)];
            let len = usize::from(len);
            if c.count[len] == 0 {
                c.first[len] = code;
                c.offset[len] = i as u16;
            }
            // Consecutive within a length: checked by a test, relied on by
            // the range test in `decode`.
            debug_assert_eq!(code, c.first[len] + c.count[len]);
            c.count[len] += 1;
            c.symbols[i] = s;
        }
        c
    })
}

/// Append the decoding of `input` to `out`.
pub fn decode(input: &[u8], out: &mut Vec<u8>) -> Result<(), HuffmanError> {
    let c = codes();
    let mut code: u32 = 0;
    let mut len: usize = 0;
    for &byte in input {
        for shift in (0..8).rev() {
            code = (code << 1) | u32::from((byte >> shift) & 1);
            len += 1;
            let at = code.wrapping_sub(c.first[len]);
            if at < c.count[len] {
                let symbol = c.symbols[usize::from(c.offset[len]) + at as usize];
                if symbol == EOS {
                    return Err(HuffmanError::Eos);
                }
                out.push(symbol as u8);
                code = 0;
                len = 0;
            } else if len == MAX_LEN {
                // Every 30-bit string of ones is EOS; no other 30-bit
                // string without a shorter code in front exists.
                return Err(HuffmanError::Eos);
            }
        }
    }
    // What is left must be padding: fewer than 8 bits, all ones.
    if len > 7 || code != (1u32 << len) - 1 {
        return Err(HuffmanError::Padding);
    }
    Ok(())
}

/// The Huffman coding of `input` (the test client codes literals as
/// grpc-go does; the server's own encoder never uses it).
pub fn encode(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u64, 0u32);
    for &b in input {
        let (code, len) = HUFFMAN_CODES[usize::from(b)];
        acc = (acc << len) | u64::from(code);
        bits += u32::from(len);
        while bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    if bits > 0 {
        // Pad with the most significant bits of EOS (ones).
        out.push(((acc << (8 - bits)) as u8) | ((1u8 << (8 - bits)) - 1));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_consecutive_within_each_length_and_prefix_free() {
        let c = codes();
        assert_eq!(c.count.iter().sum::<u32>(), 257);
        for (s, &(code, len)) in HUFFMAN_CODES.iter().enumerate() {
            let len = usize::from(len);
            let at = code - c.first[len];
            assert!(at < c.count[len]);
            assert_eq!(
                usize::from(c.symbols[usize::from(c.offset[len]) + at as usize]),
                s
            );
        }
        // Prefix-free: no code is the start of a longer one.
        for &(a, la) in HUFFMAN_CODES.iter() {
            for &(b, lb) in HUFFMAN_CODES.iter() {
                if lb > la {
                    assert_ne!(b >> (lb - la), a, "{a:#x}/{la} prefixes {b:#x}/{lb}");
                }
            }
        }
    }

    #[test]
    fn rfc_7541_appendix_c_strings() {
        // C.4.1 and C.6.1: the Huffman-coded literals and their text.
        let cases: [(&[u8], &[u8]); 4] = [
            (
                &[
                    0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff,
                ],
                b"www.example.com",
            ),
            (&[0xa8, 0xeb, 0x10, 0x64, 0x9c, 0xbf], b"no-cache"),
            (
                &[0x25, 0xa8, 0x49, 0xe9, 0x5b, 0xa9, 0x7d, 0x7f],
                b"custom-key",
            ),
            (&[0x64, 0x02], b"302"),
        ];
        for (coded, text) in cases {
            let mut out = Vec::new();
            decode(coded, &mut out).unwrap();
            assert_eq!(out, text);
            assert_eq!(encode(text), coded);
        }
    }

    #[test]
    fn every_byte_round_trips() {
        let all: Vec<u8> = (0..=255).collect();
        for text in [
            &all[..],
            b"",
            b"a",
            b"/v1.Filesystem/PathExists",
            b"grpc-go/1.33.3",
        ] {
            let mut out = Vec::new();
            decode(&encode(text), &mut out).unwrap();
            assert_eq!(out, text);
        }
        // Every single byte, and every pair with a few neighbours.
        for a in 0..=255u8 {
            for b in [0u8, 1, 31, 48, 97, 127, 200, 255] {
                let text = [a, b, a];
                let mut out = Vec::new();
                decode(&encode(&text), &mut out).unwrap();
                assert_eq!(out, text);
            }
        }
    }

    #[test]
    fn bad_padding_and_eos_are_refused() {
        let mut out = Vec::new();
        // "a" (00011) padded with zeros instead of ones.
        assert_eq!(decode(&[0x18], &mut out), Err(HuffmanError::Padding));
        // A whole byte of padding after a complete symbol.
        let mut coded = encode(b"0"); // 00000 + 111
        coded.push(0xff);
        assert_eq!(decode(&coded, &mut out), Err(HuffmanError::Padding));
        // EOS itself (30 ones), padded to 32 bits.
        assert_eq!(
            decode(&[0xff, 0xff, 0xff, 0xff], &mut out),
            Err(HuffmanError::Eos)
        );
        // Any garbage: an error or some bytes, never a panic.
        for seed in 0u32..2000 {
            let bytes: Vec<u8> = (0..(seed % 13))
                .map(|i| (seed.wrapping_mul(2_654_435_761).rotate_left(i * 5) >> 7) as u8)
                .collect();
            out.clear();
            let _ = decode(&bytes, &mut out);
        }
    }
}
