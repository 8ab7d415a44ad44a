//! A byte queue for a connection's input and output: appended at the back,
//! consumed from the front by moving an offset (no memmove per write),
//! compacted only when the consumed part is the larger half.

/// See the module docs.
#[derive(Debug, Default)]
pub struct Buffer {
    buf: Vec<u8>,
    start: usize,
}

/// Below this much consumed space compaction is not worth a move.
const COMPACT_AT: usize = 16 << 10;
/// An empty buffer keeps at most this much capacity.
const KEEP: usize = 16 << 10;

impl Buffer {
    /// Bytes waiting.
    pub fn len(&self) -> usize {
        self.buf.len() - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes waiting.
    pub fn pending(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    /// Drop `n` bytes from the front.
    pub fn consume(&mut self, n: usize) {
        debug_assert!(n <= self.len());
        self.start += n.min(self.len());
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
            if self.buf.capacity() > KEEP {
                self.buf = Vec::new();
            }
        } else if self.start >= COMPACT_AT && self.start * 2 >= self.buf.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
    }

    /// Append at the back.
    pub fn extend(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The back, for frame writers (append only).
    pub(crate) fn back(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// Take everything waiting.
    pub fn take(&mut self) -> Vec<u8> {
        let mut v = std::mem::take(&mut self.buf);
        v.drain(..self.start);
        self.start = 0;
        v
    }

    pub fn clear(&mut self) {
        self.buf = Vec::new();
        self.start = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consumed_from_the_front_without_losing_bytes() {
        let mut b = Buffer::default();
        let data: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        b.extend(&data);
        let mut seen = Vec::new();
        while !b.is_empty() {
            let n = b.len().min(7_777);
            seen.extend_from_slice(&b.pending()[..n]);
            b.consume(n);
            if seen.len() % 3 == 0 {
                b.extend(&[1, 2, 3]);
                seen.extend_from_slice(&[]);
            }
        }
        assert_eq!(&seen[..data.len()], &data[..]);
        assert!(b.buf.capacity() <= KEEP);
        b.extend(b"abc");
        b.consume(1);
        assert_eq!(b.take(), b"bc");
        assert!(b.is_empty());
    }
}
