//! Waiting for a service to reach a state, the way the SCM documents it:
//! poll while the state is pending, sleep a tenth of the service's wait
//! hint (clamped), give up when the checkpoint stops advancing for longer
//! than the wait hint, and never wait longer than an overall limit. Pure
//! logic over a query and a clock, so the state machine is tested with
//! fakes on every OS.

use super::ServiceStatus;
use crate::{Error, Result};
use std::time::Duration;

/// Overall limit of StartService and StopService (upstream: 30 s).
pub const DEFAULT_LIMIT: Duration = Duration::from_secs(30);

/// One observation of a service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    pub state: ServiceStatus,
    /// `dwCheckPoint`: advances while a pending operation makes progress.
    pub checkpoint: u32,
    /// `dwWaitHint` in milliseconds.
    pub wait_hint_ms: u32,
}

/// Shortest and longest sleep between polls.
const MIN_POLL: Duration = Duration::from_millis(25);
const MAX_POLL: Duration = Duration::from_millis(1000);

/// Poll `query` until the service is in `target`. `pending` is the state
/// that means "on its way" (StartPending for a start, StopPending for a
/// stop); any other state than these two fails at once. `elapsed` tells the
/// time since the wait began, `sleep` waits.
pub fn wait_for(
    what: &str,
    target: ServiceStatus,
    pending: ServiceStatus,
    limit: Duration,
    mut query: impl FnMut() -> Result<Progress>,
    mut elapsed: impl FnMut() -> Duration,
    mut sleep: impl FnMut(Duration),
) -> Result<()> {
    let mut last_checkpoint = None;
    let mut progress_at = elapsed();
    loop {
        let p = query()?;
        if p.state == target {
            return Ok(());
        }
        let now = elapsed();
        if p.state != pending {
            return Err(Error::FailedPrecondition(format!(
                "{what}: the service is {:?}, not {:?}",
                p.state, target
            )));
        }
        if last_checkpoint != Some(p.checkpoint) {
            last_checkpoint = Some(p.checkpoint);
            progress_at = now;
        } else if now.saturating_sub(progress_at) > Duration::from_millis(p.wait_hint_ms.into())
            && now.saturating_sub(progress_at) > MAX_POLL
        {
            return Err(Error::FailedPrecondition(format!(
                "{what}: the service stopped making progress ({:?}, checkpoint {} for {} ms, wait hint {} ms)",
                p.state,
                p.checkpoint,
                now.saturating_sub(progress_at).as_millis(),
                p.wait_hint_ms
            )));
        }
        if now >= limit {
            return Err(Error::FailedPrecondition(format!(
                "{what}: the service is still {:?} after {} s",
                p.state,
                limit.as_secs()
            )));
        }
        let nap = (Duration::from_millis(p.wait_hint_ms.into()) / 10).clamp(MIN_POLL, MAX_POLL);
        sleep(nap.min(limit.saturating_sub(now)).max(MIN_POLL));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn run(
        states: &[(ServiceStatus, u32, u32)],
        target: ServiceStatus,
        pending: ServiceStatus,
        limit: Duration,
    ) -> (Result<()>, usize, Duration) {
        let clock = Cell::new(Duration::ZERO);
        let polls = Cell::new(0usize);
        let r = wait_for(
            "start service x",
            target,
            pending,
            limit,
            || {
                let i = polls.get().min(states.len() - 1);
                polls.set(polls.get() + 1);
                let (state, checkpoint, wait_hint_ms) = states[i];
                Ok(Progress {
                    state,
                    checkpoint,
                    wait_hint_ms,
                })
            },
            || clock.get(),
            |d| clock.set(clock.get() + d),
        );
        (r, polls.get(), clock.get())
    }

    use ServiceStatus::*;

    #[test]
    fn reaches_the_target() {
        let (r, polls, _) = run(
            &[
                (StartPending, 1, 2000),
                (StartPending, 2, 2000),
                (Running, 0, 0),
            ],
            Running,
            StartPending,
            DEFAULT_LIMIT,
        );
        r.unwrap();
        assert_eq!(polls, 3);
        let (r, polls, _) = run(&[(Stopped, 0, 0)], Stopped, StopPending, DEFAULT_LIMIT);
        r.unwrap();
        assert_eq!(polls, 1);
    }

    #[test]
    fn sleeps_a_tenth_of_the_wait_hint() {
        let (r, _, t) = run(
            &[(StartPending, 1, 3000), (Running, 0, 0)],
            Running,
            StartPending,
            DEFAULT_LIMIT,
        );
        r.unwrap();
        assert_eq!(t, Duration::from_millis(300));
        let (_, _, t) = run(
            &[(StartPending, 1, 0), (Running, 0, 0)],
            Running,
            StartPending,
            DEFAULT_LIMIT,
        );
        assert_eq!(t, MIN_POLL);
        let (_, _, t) = run(
            &[(StartPending, 1, 600_000), (Running, 0, 0)],
            Running,
            StartPending,
            DEFAULT_LIMIT,
        );
        assert_eq!(t, MAX_POLL);
    }

    #[test]
    fn another_state_fails_at_once() {
        let (r, polls, _) = run(
            &[(StartPending, 1, 1000), (Stopped, 0, 0)],
            Running,
            StartPending,
            DEFAULT_LIMIT,
        );
        let e = r.unwrap_err();
        assert!(matches!(e, Error::FailedPrecondition(_)), "{e}");
        assert!(e.to_string().contains("Stopped"), "{e}");
        assert_eq!(polls, 2);
    }

    #[test]
    fn a_stuck_checkpoint_gives_up_after_the_wait_hint() {
        let (r, _, t) = run(
            &[(StopPending, 7, 2000)],
            Stopped,
            StopPending,
            DEFAULT_LIMIT,
        );
        let e = r.unwrap_err();
        assert!(e.to_string().contains("stopped making progress"), "{e}");
        assert!(
            t > Duration::from_millis(2000) && t < Duration::from_millis(3000),
            "{t:?}"
        );
    }

    #[test]
    fn the_overall_limit_holds_while_the_checkpoint_advances() {
        let states: Vec<_> = (0..100_000u32).map(|i| (StartPending, i, 10_000)).collect();
        let (r, _, t) = run(&states, Running, StartPending, Duration::from_secs(5));
        let e = r.unwrap_err();
        assert!(
            e.to_string().contains("still StartPending after 5 s"),
            "{e}"
        );
        assert!(t <= Duration::from_secs(6), "{t:?}");
    }
}
