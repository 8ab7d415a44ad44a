//! Whether a call changed the host, as far as the host can tell.
//!
//! The audit log budgets the lines of calls that changed nothing (so that
//! an allowed caller repeating them cannot rotate other callers' lines
//! out), and must log every call that changed something. Only the host
//! knows which: an operation that finds it has nothing to do (Mkdir of a
//! directory that exists) says so with [`nothing_changed`]; every other
//! call counts as a change. The server runs a call inside [`observe`], on
//! the thread the operation runs on. A mark is contained by the innermost
//! [`observe`]: a step that marks itself unchanged inside a larger
//! operation is observed by that operation, which decides for itself
//! (`filesystem::api` Mkdir passes the mark on; `Confined::create_dir`
//! does not).

use std::cell::Cell;

thread_local! {
    static UNCHANGED: Cell<bool> = const { Cell::new(false) };
}

/// The operation running on this thread found nothing to change and
/// changed nothing. Call it only where that is certain.
pub fn nothing_changed() {
    UNCHANGED.with(|u| u.set(true));
}

/// Runs `f`; also returns whether it said it changed nothing.
pub fn observe<R>(f: impl FnOnce() -> R) -> (R, bool) {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            UNCHANGED.with(|u| u.set(self.0));
        }
    }
    let _reset = Reset(UNCHANGED.with(|u| u.replace(false)));
    let r = f();
    (r, UNCHANGED.with(Cell::get))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_says_so_is_unchanged() {
        assert_eq!(observe(|| 1), (1, false));
        assert_eq!(observe(nothing_changed), ((), true));
        // Nested: the outer call sees its own mark only.
        let ((inner, outer_before), outer) = observe(|| {
            let i = observe(nothing_changed).1;
            (i, UNCHANGED.with(Cell::get))
        });
        assert!(inner && !outer_before && !outer);
    }
}
