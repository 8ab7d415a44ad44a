//! The caller's deadline, where the transport knows one.
//!
//! A gRPC call may carry `grpc-timeout`; the server answers
//! DEADLINE_EXCEEDED when it passes while the host operation runs on (an
//! operation is never cut off half-way). The server runs the host call
//! inside [`run`] so that code that waits for another operation
//! (`storage::ops`) stops waiting when nobody is left to answer, and knows
//! whether a result it produced reached its caller. Without a deadline
//! (library mode, a client that sends none) callers wait until the end.

use std::cell::Cell;
use std::time::Instant;

thread_local! {
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Runs `f` with `deadline` as the current call's deadline.
pub fn run<R>(deadline: Option<Instant>, f: impl FnOnce() -> R) -> R {
    struct Reset(Option<Instant>);
    impl Drop for Reset {
        fn drop(&mut self) {
            DEADLINE.with(|d| d.set(self.0));
        }
    }
    let _reset = Reset(DEADLINE.with(|d| d.replace(deadline)));
    f()
}

/// The current call's deadline, if it has one.
pub fn current() -> Option<Instant> {
    DEADLINE.with(Cell::get)
}

/// Whether the current call's deadline has passed.
pub fn passed() -> bool {
    current().is_some_and(|d| Instant::now() >= d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn set_only_inside_run_and_reset_after_a_panic() {
        assert_eq!(current(), None);
        let d = Instant::now() + Duration::from_secs(60);
        assert_eq!(run(Some(d), current), Some(d));
        assert!(!run(Some(d), passed));
        assert!(run(Some(Instant::now()), passed));
        assert_eq!(current(), None);
        let r = std::panic::catch_unwind(|| run(Some(d), || panic!("boom")));
        assert!(r.is_err());
        assert_eq!(current(), None, "reset after a panic");
        run(Some(d), || {
            run(None, || assert_eq!(current(), None));
            assert_eq!(current(), Some(d));
        });
    }
}
