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
//! [`PER_SHARE`] per share (compared as [`ShareRoot`]s are), [`PER_SERVER`]
//! per server (the host the caller named, ASCII case ignored) and
//! [`IN_ALL`] in all; past one of them a check is `Unavailable` at once,
//! naming the limit that was hit, without a new thread. `PER_SERVER` is a
//! quarter of `IN_ALL`: one server that never answers, whatever share
//! names it is asked for, leaves three quarters of the budget to the
//! shares of other servers.

use super::validate::ShareRoot;
use crate::{deadline, Error, Result};
use std::collections::HashMap;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a probe is waited for when the call has no deadline.
pub const BOUND: Duration = Duration::from_secs(30);
/// Probes of one share that may be out at once (stuck ones included).
pub const PER_SHARE: usize = 2;
/// Probes of the shares of one server that may be out at once.
pub const PER_SERVER: usize = 4;
/// Probes of all shares that may be out at once.
pub const IN_ALL: usize = 16;

/// The probes still out, per share root and per server.
#[derive(Debug, Default)]
struct Out {
    shares: HashMap<ShareRoot, usize>,
    servers: HashMap<String, usize>,
    all: usize,
}

fn release<K: std::hash::Hash + Eq>(m: &mut HashMap<K, usize>, k: &K) {
    if let Some(n) = m.get_mut(k) {
        *n -= 1;
        if *n == 0 {
            m.remove(k);
        }
    }
}

/// The probes still out.
#[derive(Debug, Default)]
pub struct Reach {
    out: Arc<Mutex<Out>>,
}

/// Gives a probe's slot back when its thread ends (or was never started).
struct Slot {
    out: Arc<Mutex<Out>>,
    root: ShareRoot,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        release(&mut out.shares, &self.root);
        release(&mut out.servers, &self.root.host().to_string());
        out.all -= 1;
    }
}

impl Reach {
    pub fn new() -> Self {
        Self::default()
    }

    /// Probes still out for `root` (tests).
    pub fn out(&self, root: &ShareRoot) -> usize {
        let out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        out.shares.get(root).copied().unwrap_or(0)
    }

    fn take(&self, root: &ShareRoot) -> Result<Slot> {
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        let mine = out.shares.get(root).copied().unwrap_or(0);
        let server = out.servers.get(root.host()).copied().unwrap_or(0);
        let all = out.all;
        let why = if mine >= PER_SHARE {
            format!(
                "the share {root} has not answered {mine} earlier requests (reachability checks, \
                 name lookups)"
            )
        } else if server >= PER_SERVER {
            format!(
                "the server {} has not answered {server} earlier requests for its shares \
                 (reachability checks, name lookups)",
                root.host()
            )
        } else if all >= IN_ALL {
            format!(
                "{all} earlier requests to SMB servers (reachability checks, name lookups; {server} \
                 of them to {}) have not been answered",
                root.host()
            )
        } else {
            String::new()
        };
        if !why.is_empty() {
            return Err(Error::Unavailable(format!(
                "{why}; {root} was not checked: try again later"
            )));
        }
        *out.shares.entry(root.clone()).or_insert(0) += 1;
        *out.servers.entry(root.host().to_string()).or_insert(0) += 1;
        out.all += 1;
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
        self.run(root, "check of whether it answers", probe)
    }

    /// Runs `work` (a step that waits on the server of `root`: its
    /// reachability, its name's resolution) on a thread of its own,
    /// counted in the budgets of `root`'s share and server, and waits for
    /// it until the call's deadline, or [`BOUND`].
    pub fn run<T, F>(&self, root: &ShareRoot, what: &str, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let until = deadline::current().unwrap_or_else(|| Instant::now() + BOUND);
        if Instant::now() >= until {
            return Err(self.late(
                root,
                &format!("was not reached ({what}): the call's deadline had passed"),
            ));
        }
        let slot = self.take(root)?;
        let (tx, rx) = mpsc::sync_channel(1);
        std::thread::Builder::new()
            .name("smb-reach".into())
            .spawn(move || {
                let answer = work();
                // The slot is free before the answer is: a caller that has
                // its answer never sees its own check still counted.
                drop(slot);
                let _ = tx.send(answer);
            })
            .map_err(|e| Error::Unavailable(format!("{what} of {root}: {e}")))?;
        match rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok(answer) => Ok(answer),
            Err(mpsc::RecvTimeoutError::Timeout) => Err(self.late(
                root,
                &format!(
                    "did not answer before the call's deadline ({what}; it goes on in the \
                     background)"
                ),
            )),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(Error::Internal(format!(
                "the {what} of {root} ended without an answer"
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

    /// One server that never answers, asked for any number of share
    /// names, spends only its own budget: another server's share is still
    /// checked, and the refusal names the server, not the other share.
    #[test]
    fn one_server_cannot_spend_the_budget_of_other_servers() {
        let r = Reach::new();
        let (_release, gate) = mpsc::channel::<()>();
        let gate = Arc::new(Mutex::new(gate));
        let mut refused = 0;
        for i in 0..IN_ALL {
            for _ in 0..PER_SHARE {
                let g = gate.clone();
                let e = within(Duration::from_millis(20), || {
                    r.check(&root(&format!(r"\\evil.example\s{i}")), move || {
                        let _ = g.lock().unwrap().recv();
                        true
                    })
                })
                .unwrap_err();
                if matches!(e, Error::Unavailable(_)) {
                    assert!(e.to_string().contains("server evil.example"), "{e}");
                    refused += 1;
                }
            }
        }
        assert_eq!(refused, IN_ALL * PER_SHARE - PER_SERVER);
        // The other tenant's share on another server is still checked.
        assert!(within(Duration::from_secs(5), || r
            .check(&root(r"\\filer.example\share"), || true))
        .unwrap());
    }

    /// The share's case is compared as NTFS compares it: one budget for
    /// every spelling of one share.
    #[test]
    fn spellings_of_one_share_share_one_budget() {
        let r = Reach::new();
        let (_release, gate) = mpsc::channel::<()>();
        let gate = Arc::new(Mutex::new(gate));
        for s in ["\\\\h\\\u{391}\u{3A3}", "\\\\H\\\u{3B1}\u{3C3}"] {
            let g = gate.clone();
            let _ = within(Duration::from_millis(20), || {
                r.check(&root(s), move || {
                    let _ = g.lock().unwrap().recv();
                    true
                })
            });
        }
        assert_eq!(r.out(&root("\\\\h\\\u{3b1}\u{3c3}")), PER_SHARE);
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
