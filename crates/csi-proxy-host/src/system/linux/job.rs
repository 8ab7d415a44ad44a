//! Waiting for systemd's jobs: `StartUnit`/`StopUnit` queue a job and
//! return its object path; systemd announces its end with the manager's
//! `JobRemoved` signal (id, job path, unit, result). The signal is
//! subscribed to before the job is queued, so its end cannot be missed,
//! and every end seen is kept, so a job that ends while another one is
//! waited for is found afterwards (a forced stop waits for its
//! dependents' jobs after its own).
//!
//! Only the owner of `org.freedesktop.systemd1` can send what arrives here:
//! the proxy's match rule names that sender, and the bus checks it.

use super::bus::Link;
use crate::{Error, Result};
use std::collections::HashMap;
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};
use zbus::export::futures_core::Stream;
use zbus_systemd::systemd1::JobRemovedStream;

/// What a job's end means for the call: `result` as systemd names it
/// (`JobRemoved`'s last argument).
pub fn job_result(what: &str, unit: &str, result: &str) -> Result<()> {
    let fail = |why: &str| {
        Err(Error::FailedPrecondition(format!(
            "{what}: systemd's job for {unit} ended with \"{result}\": {why}"
        )))
    };
    match result {
        "done" => Ok(()),
        // Nothing to do in the unit's state (systemd skips such a job).
        "skipped" => Ok(()),
        "canceled" => Err(Error::Aborted(format!(
            "{what}: systemd's job for {unit} was canceled (another job for the unit replaced it, or it was stopped meanwhile); retry"
        ))),
        "failed" => fail("the unit failed (see its journal)"),
        "dependency" => fail("a unit it requires failed"),
        "timeout" => fail("systemd's own timeout for the job passed (JobTimeoutSec=)"),
        "assert" => fail("an Assert...= of the unit does not hold"),
        "unsupported" => fail("the unit type does not support it"),
        "invalid" => fail("the job does not apply to the unit"),
        "frozen" => fail("the unit is frozen"),
        _ => fail("not a success"),
    }
}

/// How long a job is waited for: the earlier of the overall limit and the
/// caller's deadline.
#[derive(Clone, Copy, Debug)]
pub struct Until {
    pub at: Instant,
    /// `at` is the caller's deadline (not the limit).
    pub caller: bool,
    pub limit: Duration,
}

impl Until {
    pub fn new(limit: Duration, caller: Option<Instant>) -> Until {
        let by_limit = Instant::now() + limit;
        match caller {
            Some(d) if d < by_limit => Until {
                at: d,
                caller: true,
                limit,
            },
            _ => Until {
                at: by_limit,
                caller: false,
                limit,
            },
        }
    }

    fn expired(&self, what: &str, unit: &str) -> Error {
        if self.caller {
            Error::DeadlineExceeded(format!(
                "{what}: the call's deadline passed while systemd's job for {unit} was still running (the job goes on)"
            ))
        } else {
            Error::FailedPrecondition(format!(
                "{what}: systemd's job for {unit} is still running after {} s",
                self.limit.as_secs()
            ))
        }
    }
}

/// `JobRemoved` signals, from before a job was queued on.
///
/// zbus queues a signal stream's messages up to a bound, and the
/// connection reads nothing more (no reply either) while a queue is full.
/// So the stream is read whenever this call waits for anything on the
/// connection ([`Jobs::meanwhile`]), and only the ends of the jobs asked
/// for are kept.
pub struct Jobs {
    stream: JobRemovedStream,
    /// The jobs waited for (object path) → their result once ended.
    wanted: HashMap<String, Option<String>>,
}

impl Jobs {
    /// Subscribe to `JobRemoved` on `link`, and have systemd send its
    /// signals while any call waits ([`Jobs::close`] ends that): without
    /// `Subscribe` it announces a job's end only to the client that queued
    /// it, not the ends of the jobs its transaction added (a forced stop's
    /// dependents).
    pub async fn watch(link: &Link, what: &str) -> Result<Jobs> {
        let err = |e| super::dbus_error::call_error(&link.address, what, e);
        let stream = link.manager.receive_job_removed().await.map_err(err)?;
        let mut jobs = Jobs {
            stream,
            wanted: HashMap::new(),
        };
        let mut waiters = jobs.meanwhile(link.waiters.lock()).await;
        if *waiters == 0 {
            match jobs.meanwhile(link.manager.subscribe()).await {
                Ok(()) => {}
                Err(e)
                    if super::dbus_error::remote_name(&e).as_deref()
                        == Some(ALREADY_SUBSCRIBED) => {}
                Err(e) => return Err(err(e)),
            }
        }
        *waiters += 1;
        drop(waiters);
        Ok(jobs)
    }

    /// Done waiting: the last call to stop waiting unsubscribes (systemd
    /// sends no signals for nothing).
    pub async fn close(self, link: &Link) {
        drop(self.stream);
        let mut waiters = link.waiters.lock().await;
        *waiters = waiters.saturating_sub(1);
        if *waiters == 0 {
            if let Err(e) = link.manager.unsubscribe().await {
                tracing::debug!("systemd Unsubscribe: {e}");
            }
        }
    }

    /// Keep the end of the job at `job` when it comes.
    pub fn want(&mut self, job: &str) {
        self.wanted.entry(job.to_string()).or_default();
    }

    fn record(&mut self, signal: &zbus_systemd::systemd1::JobRemoved) {
        // A signal that does not parse is not one of systemd's.
        if let Ok(a) = signal.args() {
            if let Some(slot) = self.wanted.get_mut(a.job.as_str()) {
                *slot = Some(a.result.to_string());
            }
        }
    }

    /// Await `f` (a call on the same connection) while reading the
    /// signals that arrive meanwhile.
    pub async fn meanwhile<T>(&mut self, f: impl std::future::Future<Output = T>) -> T {
        let mut f = std::pin::pin!(f);
        std::future::poll_fn(|cx| {
            if let Poll::Ready(r) = f.as_mut().poll(cx) {
                return Poll::Ready(r);
            }
            // The stream's waker is registered again by its last Pending
            // (a closed stream: the call fails on its own).
            while let Poll::Ready(Some(s)) = Pin::new(&mut self.stream).poll_next(cx) {
                self.record(&s);
            }
            Poll::Pending
        })
        .await
    }

    /// Wait until the job at `job` (of `unit`) ended; its result.
    pub async fn ended(
        &mut self,
        what: &str,
        unit: &str,
        job: &str,
        until: Until,
    ) -> Result<String> {
        self.want(job);
        let wait = std::future::poll_fn(|cx| loop {
            if let Some(Some(r)) = self.wanted.get(job) {
                return Poll::Ready(Ok(r.clone()));
            }
            match Pin::new(&mut self.stream).poll_next(cx) {
                Poll::Ready(Some(s)) => self.record(&s),
                // (Which of the two: the retry on a new connection says.)
                Poll::Ready(None) => {
                    return Poll::Ready(Err(Error::Internal(format!(
                    "{what}: the D-Bus connection closed, or systemd left the bus, while its job for {unit} ran"
                ))))
                }
                Poll::Pending => return Poll::Pending,
            }
        });
        match tokio::time::timeout_at(tokio::time::Instant::from_std(until.at), wait).await {
            Ok(r) => r,
            Err(_) => Err(until.expired(what, unit)),
        }
    }
}

const ALREADY_SUBSCRIBED: &str = "org.freedesktop.systemd1.AlreadySubscribed";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_results_map_to_kinds() {
        for ok in ["done", "skipped"] {
            job_result("start service a", "a.service", ok).unwrap();
        }
        let e = job_result("start service a", "a.service", "canceled").unwrap_err();
        assert!(matches!(e, Error::Aborted(_)), "{e}");
        for (r, why) in [
            ("failed", "the unit failed"),
            ("dependency", "a unit it requires failed"),
            ("timeout", "JobTimeoutSec="),
            ("assert", "Assert"),
            ("unsupported", "does not support"),
            ("invalid", "does not apply"),
            ("frozen", "frozen"),
            ("collected", "not a success"),
            ("", "not a success"),
        ] {
            let e = job_result("start service a", "a.service", r).unwrap_err();
            assert!(matches!(e, Error::FailedPrecondition(_)), "{r}: {e}");
            let m = e.to_string();
            assert!(m.starts_with("start service a: "), "{m}");
            assert!(
                m.contains(&format!("\"{r}\"")) && m.contains(why),
                "{r}: {m}"
            );
        }
    }

    #[test]
    fn the_earlier_of_limit_and_deadline_bounds_the_wait() {
        let limit = Duration::from_secs(30);
        let u = Until::new(limit, None);
        assert!(!u.caller);
        let e = u.expired("stop service a", "a.service");
        assert!(
            matches!(e, Error::FailedPrecondition(ref m) if m.contains("after 30 s")),
            "{e}"
        );
        let soon = Instant::now() + Duration::from_secs(1);
        let u = Until::new(limit, Some(soon));
        assert!(u.caller && u.at == soon);
        assert!(matches!(
            u.expired("w", "a.service"),
            Error::DeadlineExceeded(_)
        ));
        let late = Instant::now() + Duration::from_secs(3600);
        assert!(!Until::new(limit, Some(late)).caller);
    }
}
