//! Who the current call is for, where the server knows: a key of the
//! caller's kernel identity (uid and pod, or user SID), set by the server
//! around each blocking job as [`crate::deadline`] is. Host state that a
//! caller can make grow (results kept for a retry, `storage::ops`) is
//! budgeted per key, so one caller's calls never push out another's.
//! Library use and calls without a known caller share the key `None`.

use std::cell::RefCell;
use std::sync::Arc;

thread_local! {
    static OWNER: RefCell<Option<Arc<str>>> = const { RefCell::new(None) };
}

/// Runs `f` on behalf of `owner`.
pub fn run<R>(owner: Option<Arc<str>>, f: impl FnOnce() -> R) -> R {
    struct Reset(Option<Arc<str>>);
    impl Drop for Reset {
        fn drop(&mut self) {
            OWNER.with(|o| *o.borrow_mut() = self.0.take());
        }
    }
    let _reset = Reset(OWNER.with(|o| o.replace(owner)));
    f()
}

/// The current call's owner, if known.
pub fn current() -> Option<Arc<str>> {
    OWNER.with(|o| o.borrow().clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_only_inside_run() {
        assert_eq!(current(), None);
        let a: Arc<str> = Arc::from("uid=1");
        run(Some(a.clone()), || {
            assert_eq!(current(), Some(a.clone()));
            run(None, || assert_eq!(current(), None));
            assert_eq!(current(), Some(a.clone()));
        });
        assert_eq!(current(), None);
    }
}
