//! Accept-loop pacing: the per-endpoint connection cap, and the back-off
//! after a failed accept (e.g. out of file descriptors).
//!
//! - Over the cap a new connection is accepted and closed at once, rather
//!   than left waiting in the listen queue: queued connections would take
//!   the slots freed later ahead of clients that arrive then, and their
//!   calls would hang until the client's deadline instead of failing fast
//!   (gRPC clients see `Unavailable` and reconnect with back-off).
//! - After a failed accept the loop sleeps, 5 ms doubling up to 1 s (as Go's
//!   `net/http` does), and tries again; the connections already open are
//!   served meanwhile. An accept that fails for lack of descriptors leaves
//!   the client in the listen queue, so it is served once descriptors are
//!   free again.
//!
//! Both log once when trouble starts (then at most every [`LOG_EVERY`]) and
//! once when it is over, never once per connection.

use crate::status::out_of_descriptors;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The first pause after a failed accept.
pub const FIRST_DELAY: Duration = Duration::from_millis(5);
/// The longest pause after failed accepts.
pub const MAX_DELAY: Duration = Duration::from_secs(1);
/// At most one warning per this long while trouble lasts.
const LOG_EVERY: Duration = Duration::from_secs(30);

/// Pauses between failed accepts.
#[derive(Debug, Default)]
pub struct Backoff {
    delay: Option<Duration>,
    failures: u64,
    last_log: Option<Instant>,
}

impl Backoff {
    /// An accept failed with `err`: how long to pause before the next one.
    pub fn failed(&mut self, endpoint: &str, err: &io::Error) -> Duration {
        self.failures += 1;
        let delay = self.delay.map_or(FIRST_DELAY, |d| (d * 2).min(MAX_DELAY));
        self.delay = Some(delay);
        if self.last_log.is_none_or(|t| t.elapsed() >= LOG_EVERY) {
            self.last_log = Some(Instant::now());
            let hint = if out_of_descriptors(err) {
                "out of file descriptors: open connections are still served; raise the \
                 open-file limit or lower -max-connections-per-endpoint"
            } else {
                "open connections are still served"
            };
            tracing::warn!(
                endpoint,
                error = %err,
                failures = self.failures,
                retry_in = ?delay,
                "accept failed; retrying with back-off ({hint})"
            );
        } else {
            tracing::debug!(endpoint, error = %err, retry_in = ?delay, "accept failed");
        }
        delay
    }

    /// An accept succeeded: the next failure starts over from the first delay.
    pub fn succeeded(&mut self, endpoint: &str) {
        if self.failures > 0 {
            tracing::info!(
                endpoint,
                failed_accepts = self.failures,
                "accepting connections again"
            );
        }
        *self = Backoff::default();
    }
}

/// The connection cap of one endpoint.
#[derive(Debug)]
pub struct Cap {
    limit: usize,
    slots: Arc<Semaphore>,
    refused: u64,
    last_log: Option<Instant>,
}

impl Cap {
    /// At most `limit` (at least 1) connections at a time.
    pub fn new(limit: usize) -> Self {
        let limit = limit.clamp(1, Semaphore::MAX_PERMITS);
        Cap {
            limit,
            slots: Arc::new(Semaphore::new(limit)),
            refused: 0,
            last_log: None,
        }
    }

    /// A slot for a new connection, held until the connection ends; `None`
    /// (and a rate-limited warning) when the endpoint is at its cap.
    pub fn admit(&mut self, endpoint: &str) -> Option<OwnedSemaphorePermit> {
        match self.slots.clone().try_acquire_owned() {
            Ok(slot) => {
                if self.refused > 0 && self.slots.available_permits() * 2 >= self.limit {
                    tracing::info!(
                        endpoint,
                        refused = self.refused,
                        "connections accepted again below the cap"
                    );
                    self.refused = 0;
                }
                Some(slot)
            }
            Err(_) => {
                self.refused += 1;
                if self.last_log.is_none_or(|t| t.elapsed() >= LOG_EVERY) {
                    self.last_log = Some(Instant::now());
                    tracing::warn!(
                        endpoint,
                        limit = self.limit,
                        refused = self.refused,
                        "connection limit reached (-max-connections-per-endpoint): new \
                         connections are closed at once until some end"
                    );
                }
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_bound_and_reset_on_success() {
        let mut b = Backoff::default();
        let err = io::Error::from(io::ErrorKind::ConnectionAborted);
        let delays: Vec<Duration> = (0..12).map(|_| b.failed("e", &err)).collect();
        assert_eq!(delays[0], FIRST_DELAY);
        assert_eq!(delays[1], FIRST_DELAY * 2);
        assert!(delays.windows(2).all(|w| w[0] <= w[1]), "{delays:?}");
        assert_eq!(*delays.last().unwrap(), MAX_DELAY);
        assert!(delays.iter().all(|d| *d <= MAX_DELAY));
        b.succeeded("e");
        assert_eq!(b.failed("e", &err), FIRST_DELAY);
    }

    #[test]
    fn cap_admits_up_to_the_limit_and_again_when_a_slot_is_freed() {
        let mut cap = Cap::new(3);
        let mut held: Vec<_> = (0..3).map(|_| cap.admit("e").expect("a slot")).collect();
        assert!(cap.admit("e").is_none());
        assert!(cap.admit("e").is_none());
        assert_eq!(cap.refused, 2);
        held.pop();
        assert!(cap.admit("e").is_some());
        assert_eq!(Cap::new(0).limit, 1, "a cap of 0 would refuse everyone");
    }
}
