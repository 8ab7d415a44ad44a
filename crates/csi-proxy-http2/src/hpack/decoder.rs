//! HPACK decoding (RFC 7541): integers, string literals (raw or Huffman),
//! the static and dynamic tables, and dynamic table size updates.
//!
//! Fields are handed out one at a time, as slices into the block, the
//! tables or two scratch buffers, so the caller can stop at a size limit
//! before anything more is decoded, and a call allocates nothing but the
//! entries it adds to the dynamic table.

use super::huffman::{self, HuffmanError};
use super::tables::STATIC_TABLE;
use std::collections::VecDeque;
use std::fmt;

/// Why a header block is not valid HPACK (a COMPRESSION_ERROR). After one,
/// the decoder's tables can no longer be trusted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// The block ends inside a representation.
    Truncated,
    /// An integer longer than this decoder accepts (far beyond any block).
    IntegerTooLarge,
    /// Index 0, or past the end of the static and dynamic tables.
    BadIndex(usize),
    /// A dynamic table size update above the size this side announced.
    TableSizeTooLarge(usize),
    /// A dynamic table size update after a field of the same block.
    LateSizeUpdate,
    /// A block that ends with a dynamic table size update, no field after.
    SizeUpdateAtEnd,
    /// A Huffman-coded literal that is not valid.
    Huffman(HuffmanError),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Truncated => write!(f, "a truncated header field representation"),
            DecodeError::IntegerTooLarge => write!(f, "an HPACK integer too large"),
            DecodeError::BadIndex(i) => write!(f, "HPACK index {i} is not in the tables"),
            DecodeError::TableSizeTooLarge(n) => {
                write!(
                    f,
                    "a dynamic table size update to {n}, above the announced size"
                )
            }
            DecodeError::LateSizeUpdate => {
                write!(f, "a dynamic table size update after a header field")
            }
            DecodeError::SizeUpdateAtEnd => {
                write!(
                    f,
                    "a dynamic table size update with no header field after it"
                )
            }
            DecodeError::Huffman(HuffmanError::Eos) => {
                write!(f, "a Huffman-coded literal holds EOS")
            }
            DecodeError::Huffman(HuffmanError::Padding) => {
                write!(f, "a Huffman-coded literal is badly padded")
            }
        }
    }
}

impl std::error::Error for DecodeError {}

/// A decoded field, owned: name and value.
pub type Field = (Vec<u8>, Vec<u8>);

/// A dynamic table entry: name and value.
type Entry = (Box<[u8]>, Box<[u8]>);

/// Scratch buffers (Huffman-decoded literals) larger than this are freed
/// after each block.
const SCRATCH_KEPT: usize = 1024;

/// Per-entry overhead in the table size (RFC 7541 §4.1).
const ENTRY_OVERHEAD: usize = 32;

/// The decoding side of one connection's HPACK context.
#[derive(Debug)]
pub struct Decoder {
    /// Newest first (index 62 is the front).
    table: VecDeque<Entry>,
    /// Sum of the entries' sizes.
    size: usize,
    /// The limit in force (the last size update, else `max_allowed`).
    max_size: usize,
    /// SETTINGS_HEADER_TABLE_SIZE as this side announced it.
    max_allowed: usize,
    name: Vec<u8>,
    value: Vec<u8>,
}

impl Decoder {
    /// A decoder whose peer may use a dynamic table of up to `max_allowed`
    /// bytes (what this side announces; 4096 by default in HTTP/2).
    pub fn new(max_allowed: usize) -> Decoder {
        Decoder {
            table: VecDeque::new(),
            size: 0,
            max_size: max_allowed,
            max_allowed,
            name: Vec::new(),
            value: Vec::new(),
        }
    }

    /// Decode the whole of `block`, giving each field to `field` in order.
    /// `field` returns false to stop: then `Ok(false)` comes back at once
    /// and the rest of the block is not looked at.
    pub fn decode(
        &mut self,
        block: &[u8],
        field: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<bool, DecodeError> {
        let result = self.decode_fields(block, field);
        // A large literal must not stay allocated on an idle connection.
        for scratch in [&mut self.name, &mut self.value] {
            if scratch.capacity() > SCRATCH_KEPT {
                *scratch = Vec::new();
            }
        }
        result
    }

    fn decode_fields(
        &mut self,
        block: &[u8],
        mut field: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<bool, DecodeError> {
        let mut pos = 0;
        let mut fields_seen = false;
        while pos < block.len() {
            let buf = &block[pos..];
            let b = buf[0];
            if b & 0x80 != 0 {
                // Indexed field.
                let (index, n) = int(buf, 7)?;
                pos += n;
                fields_seen = true;
                let (name, value) = entry(&self.table, index)?;
                if !field(name, value) {
                    return Ok(false);
                }
            } else if b & 0xe0 == 0x20 {
                // Dynamic table size update.
                if fields_seen {
                    return Err(DecodeError::LateSizeUpdate);
                }
                let (size, n) = int(buf, 5)?;
                pos += n;
                if size > self.max_allowed {
                    return Err(DecodeError::TableSizeTooLarge(size));
                }
                self.max_size = size;
                self.evict_to(size);
                if pos == block.len() {
                    return Err(DecodeError::SizeUpdateAtEnd);
                }
            } else {
                // A literal: with incremental indexing (01), or without
                // (0000) or never indexed (0001).
                let indexing = b & 0x40 != 0;
                let (index, mut n) = int(buf, if indexing { 6 } else { 4 })?;
                fields_seen = true;
                let name: &[u8] = if index == 0 {
                    let (s, used) = string(&buf[n..], &mut self.name)?;
                    n += used;
                    s
                } else {
                    entry(&self.table, index)?.0
                };
                let (value, used) = string(&buf[n..], &mut self.value)?;
                n += used;
                pos += n;
                let go_on = field(name, value);
                if indexing {
                    let entry = (Box::from(name), Box::from(value));
                    self.insert(entry);
                }
                if !go_on {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// Decode the whole of `block` into owned fields (clients and tests).
    pub fn decode_all(&mut self, block: &[u8]) -> Result<Vec<Field>, DecodeError> {
        let mut fields = Vec::new();
        self.decode(block, |n, v| {
            fields.push((n.to_vec(), v.to_vec()));
            true
        })?;
        Ok(fields)
    }

    fn evict_to(&mut self, limit: usize) {
        while self.size > limit {
            let (n, v) = self.table.pop_back().expect("size counts the entries");
            self.size -= n.len() + v.len() + ENTRY_OVERHEAD;
        }
    }

    fn insert(&mut self, entry: Entry) {
        let size = entry.0.len() + entry.1.len() + ENTRY_OVERHEAD;
        if size > self.max_size {
            // Larger than the whole table: it empties the table and is not
            // added (§4.4).
            self.table.clear();
            self.size = 0;
            return;
        }
        self.evict_to(self.max_size - size);
        self.size += size;
        self.table.push_front(entry);
    }
}

/// The field at `index` (1-61 static, 62 on dynamic, newest first).
fn entry(table: &VecDeque<Entry>, index: usize) -> Result<(&[u8], &[u8]), DecodeError> {
    match index {
        1..=61 => Ok(STATIC_TABLE[index - 1]),
        _ if index > 61 => table
            .get(index - 62)
            .map(|(n, v)| (&n[..], &v[..]))
            .ok_or(DecodeError::BadIndex(index)),
        _ => Err(DecodeError::BadIndex(index)),
    }
}

/// An HPACK integer with a `prefix`-bit prefix at the start of `buf`: its
/// value and length. Values past 2^28 are refused (no block comes close).
fn int(buf: &[u8], prefix: u8) -> Result<(usize, usize), DecodeError> {
    let max = (1usize << prefix) - 1;
    let first = usize::from(*buf.first().ok_or(DecodeError::Truncated)?) & max;
    if first < max {
        return Ok((first, 1));
    }
    let mut value = max;
    for (i, &b) in buf.iter().enumerate().skip(1) {
        let shift = 7 * (i - 1);
        if shift > 21 {
            return Err(DecodeError::IntegerTooLarge);
        }
        value += usize::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok((value, i + 1));
        }
    }
    Err(DecodeError::Truncated)
}

/// A string literal at the start of `buf`: raw, as a slice of `buf`, or
/// Huffman-coded, decoded into `scratch`; and the bytes it took.
fn string<'a>(buf: &'a [u8], scratch: &'a mut Vec<u8>) -> Result<(&'a [u8], usize), DecodeError> {
    let (len, n) = int(buf, 7)?;
    let raw = buf.get(n..n + len).ok_or(DecodeError::Truncated)?;
    if buf[0] & 0x80 == 0 {
        return Ok((raw, n + len));
    }
    scratch.clear();
    huffman::decode(raw, scratch).map_err(DecodeError::Huffman)?;
    Ok((&scratch[..], n + len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hpack::{put_huffman_str, put_int, put_str};
    use proptest::prelude::*;

    /// A string literal, Huffman-coded when `huff`.
    fn put_lit(out: &mut Vec<u8>, s: &[u8], huff: bool) {
        if huff {
            put_huffman_str(out, s);
        } else {
            put_str(out, s);
        }
    }

    /// One representation of a generated block.
    #[derive(Clone, Debug)]
    enum Rep {
        Indexed(usize),
        Literal {
            indexing: u8,
            name_index: usize,
            name: Vec<u8>,
            value: Vec<u8>,
            huff: (bool, bool),
        },
        SizeUpdate(usize),
    }

    fn rep() -> impl Strategy<Value = Rep> {
        let bytes = proptest::collection::vec(any::<u8>(), 0..40);
        prop_oneof![
            (1usize..80).prop_map(Rep::Indexed),
            (
                0u8..3,
                0usize..70,
                bytes.clone(),
                bytes,
                any::<(bool, bool)>()
            )
                .prop_map(|(indexing, name_index, name, value, huff)| Rep::Literal {
                    indexing,
                    name_index,
                    name,
                    value,
                    huff,
                }),
            (0usize..5000).prop_map(Rep::SizeUpdate),
        ]
    }

    fn encode(reps: &[Rep]) -> Vec<u8> {
        let mut out = Vec::new();
        for r in reps {
            match r {
                Rep::Indexed(i) => put_int(&mut out, 0x80, 7, *i),
                Rep::SizeUpdate(n) => put_int(&mut out, 0x20, 5, *n),
                Rep::Literal {
                    indexing,
                    name_index,
                    name,
                    value,
                    huff,
                } => {
                    match indexing {
                        0 => put_int(&mut out, 0x40, 6, *name_index),
                        1 => put_int(&mut out, 0x00, 4, *name_index),
                        _ => put_int(&mut out, 0x10, 4, *name_index),
                    }
                    if *name_index == 0 {
                        put_lit(&mut out, name, huff.0);
                    }
                    put_lit(&mut out, value, huff.1);
                }
            }
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// The same blocks, one after the other on one connection, decode
        /// to the same fields as an independent decoder, or both refuse.
        #[test]
        fn agrees_with_an_independent_decoder(
            blocks in proptest::collection::vec(proptest::collection::vec(rep(), 0..12), 1..6)
        ) {
            let mut ours = Decoder::new(4096);
            let mut theirs = loona_hpack::Decoder::new();
            theirs.set_max_allowed_table_size(4096);
            for reps in &blocks {
                // The other decoder accepts a size update anywhere; ours
                // only before the first field, as RFC 7541 §4.2 says.
                let late = reps.iter().skip_while(|r| matches!(r, Rep::SizeUpdate(_)))
                    .any(|r| matches!(r, Rep::SizeUpdate(_)));
                let block = encode(reps);
                let a = ours.decode_all(&block);
                if late {
                    prop_assert!(a.is_err());
                    break;
                }
                let b = theirs.decode(&block);
                match (&a, &b) {
                    (Ok(x), Ok(y)) => prop_assert_eq!(x, y),
                    (Err(_), Err(_)) => break,
                    _ => prop_assert!(false, "ours {:?}, theirs {:?}", a, b),
                }
            }
        }

        /// Any bytes at all: fields or an error, never a panic.
        #[test]
        fn arbitrary_bytes_never_panic(block in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = Decoder::new(4096).decode_all(&block);
        }
    }

    #[test]
    fn rfc_7541_c4_requests_share_one_table() {
        // C.4: three requests with Huffman coding on one connection. The
        // dynamic table ends as §C.4.3 shows.
        let c4: [&[u8]; 3] = [
            &[
                0x82, 0x86, 0x84, 0x41, 0x8c, 0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab,
                0x90, 0xf4, 0xff,
            ],
            &[
                0x82, 0x86, 0x84, 0xbe, 0x58, 0x86, 0xa8, 0xeb, 0x10, 0x64, 0x9c, 0xbf,
            ],
            &[
                0x82, 0x87, 0x85, 0xbf, 0x40, 0x88, 0x25, 0xa8, 0x49, 0xe9, 0x5b, 0xa9, 0x7d, 0x7f,
                0x89, 0x25, 0xa8, 0x49, 0xe9, 0x5b, 0xb8, 0xe8, 0xb4, 0xbf,
            ],
        ];
        let mut d = Decoder::new(4096);
        let got: Vec<_> = c4.iter().map(|b| d.decode_all(b).unwrap()).collect();
        let f = |n: &str, v: &str| (n.as_bytes().to_vec(), v.as_bytes().to_vec());
        assert_eq!(
            got[0],
            [
                f(":method", "GET"),
                f(":scheme", "http"),
                f(":path", "/"),
                f(":authority", "www.example.com")
            ]
        );
        assert_eq!(got[1][4], f("cache-control", "no-cache"));
        assert_eq!(got[2][1], f(":scheme", "https"));
        assert_eq!(got[2][2], f(":path", "/index.html"));
        assert_eq!(got[2][4], f("custom-key", "custom-value"));
        // Table: custom-key, cache-control, :authority; 164 bytes.
        assert_eq!(d.size, 164);
        assert_eq!(&d.table[0].0[..], b"custom-key");
        assert_eq!(&d.table[2].1[..], b"www.example.com");
    }

    #[test]
    fn bad_input_is_a_clean_error() {
        let mut d = Decoder::new(4096);
        assert_eq!(d.decode_all(&[0x80]), Err(DecodeError::BadIndex(0)));
        assert_eq!(d.decode_all(&[0xbe]), Err(DecodeError::BadIndex(62)));
        assert_eq!(
            d.decode_all(&[0x3f, 0xe2, 0x1f]),
            Err(DecodeError::TableSizeTooLarge(4097))
        );
        assert_eq!(
            d.decode_all(&[0x82, 0x20]),
            Err(DecodeError::LateSizeUpdate)
        );
        assert_eq!(d.decode_all(&[0x20]), Err(DecodeError::SizeUpdateAtEnd));
        assert_eq!(
            d.decode_all(&[0x00, 0x05, b'a']),
            Err(DecodeError::Truncated)
        );
        assert_eq!(
            d.decode_all(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01]),
            Err(DecodeError::IntegerTooLarge)
        );
        // A Huffman literal value badly padded ("a" padded with zeros).
        assert_eq!(
            d.decode_all(&[0x00, 0x01, b'x', 0x81, 0x18]),
            Err(DecodeError::Huffman(HuffmanError::Padding))
        );
    }

    #[test]
    fn large_literals_leave_no_buffer_behind() {
        let mut d = Decoder::new(4096);
        let mut block = vec![0x00];
        put_huffman_str(&mut block, b"x-big");
        put_huffman_str(&mut block, &[b'a'; 20_000]);
        let fields = d.decode_all(&block).unwrap();
        assert_eq!(fields[0].1.len(), 20_000);
        assert!(d.name.capacity() <= SCRATCH_KEPT && d.value.capacity() <= SCRATCH_KEPT);
    }

    #[test]
    fn size_updates_evict_and_oversized_entries_empty_the_table() {
        let mut d = Decoder::new(4096);
        let mut block = vec![0x40];
        put_str(&mut block, b"a");
        put_str(&mut block, &[b'x'; 100]);
        d.decode_all(&block).unwrap();
        assert_eq!(d.size, 133);
        // Down to 100: the entry goes.
        d.decode_all(&[0x3f, 0x45, 0x82]).unwrap();
        assert_eq!((d.size, d.table.len()), (0, 0));
        d.decode_all(&block).unwrap();
        assert_eq!(
            d.table.len(),
            0,
            "an entry larger than the table is not added"
        );
    }
}
