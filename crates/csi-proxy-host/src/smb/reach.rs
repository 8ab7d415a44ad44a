//! "Does the mapped share answer?", bounded.
//!
//! Both backends ask the share itself whether it is reachable (Windows a
//! `metadata` of the UNC root, Linux a `statfs` of the CIFS mount). A host
//! that accepts the connection and never answers would hold that call, and
//! the blocking-pool thread under it, for as long as the SMB client waits.
//! So the probe runs on a thread of its own and the caller waits until its
//! call's deadline ([`crate::deadline`]), or [`BOUND`] without one: past
//! it the call answers `DeadlineExceeded` naming the share, and the probe
//! is left to finish on its own. Probes left behind are counted: at most
//! [`PER_SHARE`] per share and [`IN_ALL`] in all; past that a check is
//! `Unavailable` at once, naming the share, without a new thread.

use super::validate::ShareRoot;
use crate::{deadline, Error, Result};
use std::collections::HashMap;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a probe is waited for when the call has no deadline.
pub const BOUND: Duration = Duration::from_secs(30);
/// Probes of one share that may be out at once (stuck ones included).
pub const PER_SHARE: usize = 2;
/// Probes of all shares that may be out at once.
pub const IN_ALL: usize = 16;

/// The probes still out, per share root.
#[derive(Debug, Default)]
pub struct Reach {
    out: Arc<Mutex<HashMap<ShareRoot, usize>>>,
}

/// Gives a probe's slot back when its thread ends (or was never started).
struct Slot {
    out: Arc<Mutex<HashMap<ShareRoot, usize>>>,
    root: ShareRoot,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = out.get_mut(&self.root) {
            *n -= 1;
            if *n == 0 {
                out.remove(&self.root);
            }
        }
    }
}

impl Reach {
    pub fn new() -> Self {
        Self::default()
    }

    /// Probes still out for `root` (tests).
    pub fn out(&self, root: &ShareRoot) -> usize {
        let out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        out.get(root).copied().unwrap_or(0)
    }

    fn take(&self, root: &ShareRoot) -> Result<Slot> {
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        let all: usize = out.values().sum();
        let mine = out.get(root).copied().unwrap_or(0);
        if mine >= PER_SHARE || all >= IN_ALL {
            return Err(Error::Unavailable(format!(
                "the share {root} has not answered earlier checks of whether it is reachable \
                 ({mine} still waiting, {all} for all shares); try again later"
            )));
        }
        *out.entry(root.clone()).or_insert(0) += 1;
        Ok(Slot {
            out: self.out.clone(),
            root: root.clone(),
        })
    }

    /// Runs `probe` (true: the share answers) on a thread of its own and
    /// waits for it until the call's deadline, or [`BOUND`].
    pub fn check<F>(&self, root: &ShareRoot, probe: F) -> Result<bool>
    where
        F: FnOnce() -> bool + Send + 'static,
    {
        let until = deadline::current().unwrap_or_else(|| Instant::now() + BOUND);
        if Instant::now() >= until {
            return Err(self.late(root, "was not checked: the call's deadline had passed"));
        }
        let slot = self.take(root)?;
        let (tx, rx) = mpsc::sync_channel(1);
        std::thread::Builder::new()
            .name("smb-reach".into())
            .spawn(move || {
                let answer = probe();
                // The slot is free before the answer is: a caller that has
                // its answer never sees its own check still counted.
                drop(slot);
                let _ = tx.send(answer);
            })
            .map_err(|e| Error::Unavailable(format!("check whether {root} answers: {e}")))?;
        match rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok(answer) => Ok(answer),
            Err(mpsc::RecvTimeoutError::Timeout) => Err(self.late(
                root,
                "did not answer before the call's deadline (the check goes on in the background)",
            )),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(Error::Internal(format!(
                "the check of whether {root} answers ended without an answer"
            ))),
        }
    }

    fn late(&self, root: &ShareRoot, what: &str) -> Error {
        Error::DeadlineExceeded(format!("the SMB share {root} {what}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::smb::RemotePath;

    fn root(s: &str) -> ShareRoot {
        RemotePath::parse(s).unwrap().root()
    }

    fn within<R>(d: Duration, f: impl FnOnce() -> R) -> R {
        deadline::run(Some(Instant::now() + d), f)
    }

    #[test]
    fn answers_pass_through() {
        let r = Reach::new();
        let a = root(r"\\srv\a");
        assert!(within(Duration::from_secs(5), || r.check(&a, || true)).unwrap());
        assert!(!r.check(&a, || false).unwrap());
        assert_eq!(r.out(&a), 0);
    }

    /// A share whose check never returns holds the call only until its
    /// deadline, then only its own budget: other shares are still checked.
    #[test]
    fn a_share_that_never_answers_costs_only_its_deadline_and_its_budget() {
        let r = Reach::new();
        let stuck = root(r"\\stuck.example\share");
        let (release, gate) = mpsc::channel::<()>();
        let gate = Arc::new(Mutex::new(gate));
        let hang = || {
            let g = gate.clone();
            move || {
                let _ = g.lock().unwrap().recv();
                true
            }
        };
        for _ in 0..PER_SHARE {
            let t = Instant::now();
            let e = within(Duration::from_millis(200), || r.check(&stuck, hang())).unwrap_err();
            let waited = t.elapsed();
            assert!(matches!(e, Error::DeadlineExceeded(_)), "{e}");
            assert!(e.to_string().contains(r"\\stuck.example\share"), "{e}");
            assert!(waited >= Duration::from_millis(200), "{waited:?}");
            assert!(waited < Duration::from_secs(2), "{waited:?}");
        }
        // Its budget is spent: refused at once, no new thread.
        let t = Instant::now();
        let e = within(Duration::from_secs(30), || r.check(&stuck, hang())).unwrap_err();
        assert!(matches!(e, Error::Unavailable(_)), "{e}");
        assert!(e.to_string().contains(r"\\stuck.example\share"), "{e}");
        assert!(t.elapsed() < Duration::from_secs(1));
        assert_eq!(r.out(&stuck), PER_SHARE);
        // Another share is still checked.
        assert!(r.check(&root(r"\\other\share"), || true).unwrap());
        // A deadline already passed: nothing started.
        let e = deadline::run(Some(Instant::now()), || r.check(&root(r"\\x\y"), || true));
        assert!(matches!(e, Err(Error::DeadlineExceeded(_))), "{e:?}");
        // Released: the slots come back.
        for _ in 0..PER_SHARE {
            release.send(()).unwrap();
        }
        let t = Instant::now();
        while r.out(&stuck) > 0 {
            assert!(t.elapsed() < Duration::from_secs(5));
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(r.check(&stuck, || true).unwrap());
    }

    #[test]
    fn all_shares_together_are_bounded() {
        let r = Reach::new();
        let (_release, gate) = mpsc::channel::<()>();
        let gate = Arc::new(Mutex::new(gate));
        for i in 0..IN_ALL {
            let g = gate.clone();
            let e = within(Duration::from_millis(20), || {
                r.check(&root(&format!(r"\\h{i}\s")), move || {
                    let _ = g.lock().unwrap().recv();
                    true
                })
            })
            .unwrap_err();
            assert!(matches!(e, Error::DeadlineExceeded(_)), "{e}");
        }
        let e = r.check(&root(r"\\fresh\s"), || true).unwrap_err();
        assert!(matches!(e, Error::Unavailable(_)), "{e}");
    }
}
