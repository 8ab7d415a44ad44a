//! The pool's bounded waits and the route around a stuck thread, against
//! wine's WMI (`root\cimv2`). A stuck provider is the test hook
//! [`WmiWorker::hang_next_job`]: the job's thread blocks before its WMI
//! work, ignoring every timeout, as a provider call that never returns.

use super::*;
use crate::deadline;
use std::sync::{mpsc, Arc};
use std::time::Duration;

fn os_rows(w: &WmiWorker) -> Result<usize> {
    w.call(|wmi| {
        Ok(wmi
            .query("SELECT Caption FROM Win32_OperatingSystem")?
            .len())
    })
}

fn within<T>(d: Duration, f: impl FnOnce() -> T) -> T {
    deadline::run(Some(Instant::now() + d), f)
}

/// Polls `f` until it holds (at most 10 s).
fn eventually(what: &str, f: impl Fn() -> bool) {
    let end = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < end, "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_job_sees_its_callers_deadline_or_the_default_bound() {
    let w = WmiWorker::new(CIMV2_NAMESPACE).named("t-bound");
    let d = Instant::now() + Duration::from_secs(30);
    let seen = deadline::run(Some(d), || w.call(|wmi| Ok(wmi.deadline()))).unwrap();
    assert_eq!(seen, d);
    let before = Instant::now();
    let seen = w.call(|wmi| Ok(wmi.deadline())).unwrap();
    assert!(seen >= before + DEFAULT_BOUND && seen <= Instant::now() + DEFAULT_BOUND);
    let limit = Duration::from_secs(700);
    let seen = deadline::run(Some(d), || w.call_within(limit, |wmi| Ok(wmi.deadline()))).unwrap();
    assert!(seen > d, "call_within is not cut to the caller's deadline");
    // A deadline that has passed: nothing is sent.
    let e = deadline::run(Some(Instant::now()), || os_rows(&w)).unwrap_err();
    assert!(matches!(e, Error::DeadlineExceeded(_)), "{e}");
}

#[test]
fn a_wmi_wait_after_the_deadline_is_deadline_exceeded_and_the_worker_goes_on() {
    let w = WmiWorker::new(CIMV2_NAMESPACE).named("t-wait");
    assert_eq!(os_rows(&w).unwrap(), 1);
    // The job outlives its deadline (inside the grace), then queries: the
    // query's wait ends at once.
    let t = Instant::now();
    let e = within(Duration::from_millis(300), || {
        w.call(|wmi| {
            std::thread::sleep(Duration::from_millis(400));
            Ok(wmi
                .query("SELECT Caption FROM Win32_OperatingSystem")?
                .len())
        })
    })
    .unwrap_err();
    assert!(
        matches!(e, Error::DeadlineExceeded(ref m) if m.contains("query")),
        "{e}"
    );
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert_eq!(os_rows(&w).unwrap(), 1);
    assert_eq!(w.overdue(), 0);
}

#[test]
fn a_stuck_call_ends_at_its_deadline_and_the_pool_routes_around_its_thread() {
    // One working thread: without the route around, the stuck one would
    // hold every later call.
    let w = Arc::new(
        WmiWorker::new(CIMV2_NAMESPACE)
            .named("t-stuck")
            .with_max_threads(1),
    );
    assert_eq!(os_rows(&w).unwrap(), 1);
    let (release, hang) = mpsc::channel::<()>();
    w.hang_next_job(hang);
    let t = Instant::now();
    let e = within(Duration::from_millis(1500), || os_rows(&w)).unwrap_err();
    let took = t.elapsed();
    assert!(matches!(e, Error::DeadlineExceeded(_)), "{e}");
    assert!(
        took >= Duration::from_millis(1500) && took < Duration::from_millis(1500) + GRACE * 4,
        "ended after {took:?}"
    );
    assert_eq!(w.overdue(), 1);
    // The next call gets a thread of its own, promptly.
    let t = Instant::now();
    assert_eq!(within(Duration::from_secs(10), || os_rows(&w)).unwrap(), 1);
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert_eq!(w.threads(), 2);

    // A second stuck thread: the pool is at its cap (twice its size), so a
    // call now waits in the queue, ends at its deadline and is never run.
    let (release2, hang2) = mpsc::channel::<()>();
    w.hang_next_job(hang2);
    let e = within(Duration::from_millis(800), || os_rows(&w)).unwrap_err();
    assert!(matches!(e, Error::DeadlineExceeded(_)), "{e}");
    assert_eq!(w.overdue(), 2);
    let ran = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = ran.clone();
    let t = Instant::now();
    let e = within(Duration::from_millis(800), || {
        w.call(move |_| {
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
            Ok(())
        })
    })
    .unwrap_err();
    assert!(
        matches!(e, Error::DeadlineExceeded(ref m) if m.contains("not started")),
        "{e}"
    );
    assert!(t.elapsed() < Duration::from_millis(800) + GRACE * 4);
    assert_eq!(w.threads(), 2, "no thread beyond the cap");

    // The providers return: their answers are discarded, the threads work
    // again, and the abandoned call is skipped, not run late.
    release.send(()).unwrap();
    drop(release2);
    eventually("the overdue threads come back", || w.overdue() == 0);
    assert_eq!(within(Duration::from_secs(10), || os_rows(&w)).unwrap(), 1);
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        !ran.load(std::sync::atomic::Ordering::SeqCst),
        "an abandoned call ran"
    );
}

#[test]
fn a_secret_parameter_is_lent_to_the_variant_and_read_back_whole() {
    for _ in 0..200 {
        let v = Var::from_value(&Value::Secret(zeroize::Zeroizing::new(
            "domain\\\\user:pä:ss".to_string(),
        )))
        .unwrap();
        assert_eq!(v.as_string().as_deref(), Some("domain\\\\user:pä:ss"));
        drop(v);
    }
    let v = Var::from_value(&Value::Str("plain".into())).unwrap();
    assert_eq!(v.as_string().as_deref(), Some("plain"));
}
