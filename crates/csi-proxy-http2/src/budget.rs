//! The process-wide budget of request bytes held between frames.
//!
//! Each connection already bounds what it holds by its receive window, which
//! it gives back only as bodies are consumed or discarded. The budget bounds
//! the sum over all connections: a request body that must be held across
//! frames takes its bytes from it, and a stream that cannot is answered
//! RESOURCE_EXHAUSTED. A request whose whole message arrives in one DATA
//! frame (every ordinary call) is consumed at once and never held, so a full
//! budget does not stop small calls.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Shared by every connection of a process (clone it).
#[derive(Clone, Debug)]
pub struct BodyBudget {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    held: AtomicUsize,
    limit: usize,
}

impl BodyBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: usize) -> Self {
        BodyBudget {
            inner: Arc::new(Inner {
                held: AtomicUsize::new(0),
                limit,
            }),
        }
    }

    /// Bytes held now.
    pub fn held(&self) -> usize {
        self.inner.held.load(Ordering::Relaxed)
    }

    /// The limit.
    pub fn limit(&self) -> usize {
        self.inner.limit
    }

    fn try_take(&self, n: usize) -> bool {
        let limit = self.inner.limit;
        self.inner
            .held
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |h| {
                h.checked_add(n).filter(|&t| t <= limit)
            })
            .is_ok()
    }

    fn give_back(&self, n: usize) {
        if n > 0 {
            self.inner.held.fetch_sub(n, Ordering::AcqRel);
        }
    }
}

/// A request body being received: its bytes are counted against a budget
/// until it is taken or dropped. A body that never holds bytes across
/// frames never touches the (shared) budget.
#[derive(Default)]
pub(crate) struct Body {
    data: Vec<u8>,
    /// The gRPC length prefix's total (prefix included), once known: the
    /// buffer never grows past it.
    expected: Option<usize>,
    /// Set by the first `push`.
    budget: Option<BodyBudget>,
}

impl Body {
    pub(crate) fn len(&self) -> usize {
        self.data.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Append `bytes`, counted against `budget`, or `false` if the budget
    /// cannot hold them (nothing is appended then). The buffer grows by
    /// doubling, but never past the size the message's prefix announces.
    pub(crate) fn push(&mut self, bytes: &[u8], budget: &BodyBudget) -> bool {
        let budget = self.budget.get_or_insert_with(|| budget.clone());
        if !budget.try_take(bytes.len()) {
            return false;
        }
        let needed = self.data.len() + bytes.len();
        if needed > self.data.capacity() {
            let cap = self.data.capacity();
            let mut target = (cap * 2).max(needed).max(64);
            if let Some(e) = self.expected {
                target = target.min(e.max(needed));
            }
            self.data.reserve_exact(target - self.data.len());
        }
        self.data.extend_from_slice(bytes);
        if self.expected.is_none() && self.data.len() >= 5 {
            let d = &self.data;
            let len = u32::from_be_bytes([d[1], d[2], d[3], d[4]]) as usize;
            self.expected = Some(len.saturating_add(5));
        }
        true
    }

    /// The bytes received; the budget gets them back.
    pub(crate) fn take(&mut self) -> Vec<u8> {
        if let Some(b) = &self.budget {
            b.give_back(self.data.len());
        }
        self.expected = None;
        std::mem::take(&mut self.data)
    }
}

impl Drop for Body {
    fn drop(&mut self) {
        if let Some(b) = &self.budget {
            b.give_back(self.data.len());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_held_until_taken_or_dropped() {
        let budget = BodyBudget::new(100);
        let mut a = Body::default();
        assert!(a.push(&[0, 0, 0, 0, 60], &budget));
        assert!(a.push(&[1; 50], &budget));
        let mut b = Body::default();
        assert!(!b.push(&[2; 50], &budget), "over the limit");
        assert!(b.is_empty());
        assert!(b.push(&[2; 45], &budget));
        assert_eq!(budget.held(), 100);
        let taken = a.take();
        assert_eq!(taken.len(), 55);
        assert_eq!(budget.held(), 45);
        drop(b);
        assert_eq!(budget.held(), 0);
    }

    #[test]
    fn the_buffer_stops_at_the_announced_size() {
        let budget = BodyBudget::new(usize::MAX);
        let mut body = Body::default();
        body.push(&[0, 0, 0, 3, 0xe8], &budget); // 1000 bytes announced
        for _ in 0..10 {
            body.push(&[7; 100], &budget);
        }
        assert_eq!(body.len(), 1005);
        assert!(body.data.capacity() <= 1005, "{}", body.data.capacity());
    }
}
