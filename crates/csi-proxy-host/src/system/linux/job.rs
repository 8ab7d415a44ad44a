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
pub struct Jobs {
    stream: JobRemovedStream,
    /// Ended jobs seen so far: job path → result.
    ended: HashMap<String, String>,
}

impl Jobs {
    /// Subscribe to `JobRemoved` on `link`, and have systemd send its
    /// signals while any call waits ([`Jobs::close`] ends that): without
    /// `Subscribe` it announces a job's end only to the client that queued
    /// it, not the ends of the jobs its transaction added (a forced stop's
    /// dependents).
    pub async fn watch(link: &Link, what: &str) -> Result<Jobs> {
        let err = |e| super::systemd::call_error(&link.address, what, e);
        let stream = link.manager.receive_job_removed().await.map_err(err)?;
        let mut waiters = link.waiters.lock().await;
        if *waiters == 0 {
            match link.manager.subscribe().await {
                Ok(()) => {}
                Err(e)
                    if super::systemd::remote_name(&e).as_deref() == Some(ALREADY_SUBSCRIBED) => {}
                Err(e) => return Err(err(e)),
            }
        }
        *waiters += 1;
        Ok(Jobs {
            stream,
            ended: HashMap::new(),
        })
    }

    /// Done waiting: the last call to stop waiting unsubscribes (systemd
    /// sends no signals for nothing).
    pub async fn close(self, link: &Link) {
        let mut waiters = link.waiters.lock().await;
        *waiters = waiters.saturating_sub(1);
        if *waiters == 0 {
            if let Err(e) = link.manager.unsubscribe().await {
                tracing::debug!("systemd Unsubscribe: {e}");
            }
        }
    }

    /// Wait until the job at `job` (of `unit`) ended; its result.
    pub async fn ended(
        &mut self,
        what: &str,
        unit: &str,
        job: &str,
        until: Until,
    ) -> Result<String> {
        let deadline = tokio::time::Instant::from_std(until.at);
        loop {
            if let Some(r) = self.ended.remove(job) {
                return Ok(r);
            }
            let next =
                std::future::poll_fn(|cx| std::pin::Pin::new(&mut self.stream).poll_next(cx));
            let signal = match tokio::time::timeout_at(deadline, next).await {
                Err(_) => return Err(until.expired(what, unit)),
                Ok(None) => {
                    return Err(Error::Internal(format!(
                    "{what}: the D-Bus connection to systemd closed while its job for {unit} ran"
                )))
                }
                Ok(Some(s)) => s,
            };
            // A signal that does not parse is not one of systemd's.
            if let Ok(a) = signal.args() {
                self.ended.insert(a.job.to_string(), a.result.to_string());
            }
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
