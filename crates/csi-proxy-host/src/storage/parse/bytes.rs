//! Bounds-checked little- and big-endian reads used by the binary parsers.
//!
//! Every function takes the structure name for the error message and
//! returns [`ParseError::Truncated`] instead of panicking.

use super::error::ParseError;

/// `off + len`, saturated at `usize::MAX` (only used for error messages and
/// comparisons: a saturated end never fits in a real buffer).
pub(crate) fn end(off: usize, len: usize) -> usize {
    off.saturating_add(len)
}

/// Writes `bytes` at `at` (the test encoders': their buffers are sized
/// first).
#[cfg(test)]
pub(crate) fn put(buf: &mut [u8], at: usize, bytes: &[u8]) {
    buf[at..at + bytes.len()].copy_from_slice(bytes);
}

/// `buf[off..off + len]`, or `Truncated` naming `what`.
pub(crate) fn slice<'a>(
    buf: &'a [u8],
    off: usize,
    len: usize,
    what: &'static str,
) -> Result<&'a [u8], ParseError> {
    let stop = off
        .checked_add(len)
        .ok_or_else(|| ParseError::truncated(what, usize::MAX, buf.len()))?;
    buf.get(off..stop)
        .ok_or_else(|| ParseError::truncated(what, stop, buf.len()))
}

/// A fixed-size array at `off`.
pub(crate) fn array<const N: usize>(
    buf: &[u8],
    off: usize,
    what: &'static str,
) -> Result<[u8; N], ParseError> {
    let s = slice(buf, off, N, what)?;
    let mut out = [0u8; N];
    out.copy_from_slice(s);
    Ok(out)
}

pub(crate) fn u8_at(buf: &[u8], off: usize, what: &'static str) -> Result<u8, ParseError> {
    Ok(array::<1>(buf, off, what)?[0])
}

pub(crate) fn u16_le(buf: &[u8], off: usize, what: &'static str) -> Result<u16, ParseError> {
    array(buf, off, what).map(u16::from_le_bytes)
}

pub(crate) fn u16_be(buf: &[u8], off: usize, what: &'static str) -> Result<u16, ParseError> {
    array(buf, off, what).map(u16::from_be_bytes)
}

pub(crate) fn u32_le(buf: &[u8], off: usize, what: &'static str) -> Result<u32, ParseError> {
    array(buf, off, what).map(u32::from_le_bytes)
}

pub(crate) fn u64_le(buf: &[u8], off: usize, what: &'static str) -> Result<u64, ParseError> {
    array(buf, off, what).map(u64::from_le_bytes)
}

pub(crate) fn i64_le(buf: &[u8], off: usize, what: &'static str) -> Result<i64, ParseError> {
    array(buf, off, what).map(i64::from_le_bytes)
}

/// Requires `buf` to hold at least `len` bytes.
pub(crate) fn need(buf: &[u8], len: usize, what: &'static str) -> Result<(), ParseError> {
    if buf.len() < len {
        Err(ParseError::truncated(what, len, buf.len()))
    } else {
        Ok(())
    }
}

/// A 32-bit count or offset as `usize` (never fails on 32- and 64-bit
/// targets; on a 16-bit one it saturates, which then fails as truncated).
pub(crate) fn usize_from(v: u32) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_bounds_checked() {
        let b = [1u8, 2, 3, 4, 5];
        assert_eq!(u32_le(&b, 0, "x"), Ok(0x0403_0201));
        assert_eq!(u16_be(&b, 3, "x"), Ok(0x0405));
        assert_eq!(u32_le(&b, 2, "x"), Err(ParseError::truncated("x", 6, 5)));
        assert_eq!(
            slice(&b, usize::MAX, 2, "x"),
            Err(ParseError::truncated("x", usize::MAX, 5))
        );
        assert_eq!(slice(&b, 5, 0, "x"), Ok(&[][..]));
        assert_eq!(u8_at(&b, 5, "x"), Err(ParseError::truncated("x", 6, 5)));
        assert_eq!(end(usize::MAX, 1), usize::MAX);
        assert!(need(&b, 5, "x").is_ok());
        assert!(need(&b, 6, "x").is_err());
    }
}
