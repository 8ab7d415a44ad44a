//! Calls a server may try on an async worker first.
//!
//! A list or lookup answered from memory (the disk inventory) costs less
//! than handing it to a thread pool, but the same call sometimes has to
//! read a device first (events to apply, an unknown id to scan for), and
//! device I/O must never run on an async worker: a hung disk would stall
//! every connection of that worker. So the server runs such a call inside
//! [`run`]; code that would block checks [`active`] and answers
//! [`would_block`] instead (leaving what it drained for the next call), and
//! the server runs the call again on its blocking pool
//! ([`is_would_block`]).

use crate::Error;
use std::cell::Cell;
use std::io;

thread_local! {
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
}

/// What [`would_block`] puts in [`Error::Io::op`].
const OP: &str = "answer without blocking";

/// Runs `f` as an inline attempt: [`active`] is true inside it.
pub fn run<R>(f: impl FnOnce() -> R) -> R {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            ACTIVE.with(|a| a.set(self.0));
        }
    }
    let _reset = Reset(ACTIVE.with(|a| a.replace(true)));
    f()
}

/// Whether the current call is an inline attempt, which must not block.
pub fn active() -> bool {
    ACTIVE.with(Cell::get)
}

/// The answer of an inline attempt that would have to block; `why` says
/// what it would wait for.
pub fn would_block(why: &str) -> Error {
    Error::Io {
        op: OP,
        path: why.to_string(),
        source: io::Error::from(io::ErrorKind::WouldBlock),
    }
}

/// Whether `e` is [`would_block`]'s answer (run the call again where it
/// may block).
pub fn is_would_block(e: &Error) -> bool {
    matches!(e, Error::Io { op, source, .. } if *op == OP && source.kind() == io::ErrorKind::WouldBlock)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_inside_run_and_reset_after_a_panic() {
        assert!(!active());
        assert!(run(active));
        assert!(!active());
        let r = std::panic::catch_unwind(|| run(|| panic!("boom")));
        assert!(r.is_err());
        assert!(!active(), "reset after a panic");
        // Nested attempts keep the outer state.
        run(|| {
            run(|| assert!(active()));
            assert!(active());
        });
        assert!(!active());
    }

    #[test]
    fn would_block_is_recognised_and_nothing_else_is() {
        assert!(is_would_block(&would_block("events to apply")));
        let eagain = Error::io("read", "/x", io::Error::from(io::ErrorKind::WouldBlock));
        assert!(!is_would_block(&eagain));
        assert!(!is_would_block(&Error::NotFound("x".into())));
    }
}
