//! A narrower allow-list for the current call: the services one caller may
//! start or stop, as a caller-policy rule names them. The server runs the
//! host call inside [`run`] (like [`crate::deadline::run`]);
//! [`super::System`] then requires the service, as resolved by the service
//! manager, to be on both `-allowed-services` and this list. A list can
//! only narrow: a name on it that `-allowed-services` lacks stays refused.

use super::validate::ServicePolicy;
use std::cell::RefCell;
use std::sync::Arc;

thread_local! {
    static NARROW: RefCell<Option<Arc<ServicePolicy>>> = const { RefCell::new(None) };
}

/// Runs `f` with `list` (`None`: no narrowing) as the current caller's
/// list of services.
pub fn run<R>(list: Option<Arc<ServicePolicy>>, f: impl FnOnce() -> R) -> R {
    struct Reset(Option<Arc<ServicePolicy>>);
    impl Drop for Reset {
        fn drop(&mut self) {
            NARROW.with(|n| *n.borrow_mut() = self.0.take());
        }
    }
    let _reset = Reset(NARROW.with(|n| n.replace(list)));
    f()
}

/// The current caller's list, if a rule narrows it.
pub fn current() -> Option<Arc<ServicePolicy>> {
    NARROW.with(|n| n.borrow().clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::Flavor;

    #[test]
    fn set_only_inside_run_and_reset_after_a_panic() {
        assert!(current().is_none());
        let l = Arc::new(ServicePolicy::allow_only(["iscsid"], Flavor::Unix).unwrap());
        run(Some(l.clone()), || {
            assert!(current().unwrap().allows("iscsid.service"));
            run(None, || assert!(current().is_none()));
            assert!(current().is_some());
        });
        assert!(current().is_none());
        let r = std::panic::catch_unwind(|| run(Some(l.clone()), || panic!("boom")));
        assert!(r.is_err());
        assert!(current().is_none(), "reset after a panic");
    }
}
