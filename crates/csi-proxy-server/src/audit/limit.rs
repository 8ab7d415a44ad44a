//! The budget of refused-call lines per caller, so that a caller refused
//! in a loop cannot fill the disk or push earlier lines out through
//! rotation. Calls the host rejected as invalid before it did anything
//! (`InvalidArgument`, [`crate::guard`]) share it. Each caller, keyed on what it cannot change at will, may have [`BURST`] lines at
//! once and [`PER_SECOND`] more each second; past that, its refused calls
//! are counted, and the writer writes one summary line per second and
//! caller ("N more refused calls by ...").

use crate::caller::Caller;
use csi_proxy_http2::Code;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Lines a caller may have at once.
pub const BURST: f64 = 20.0;
/// Lines a caller gains each second.
pub const PER_SECOND: f64 = 5.0;
/// Callers tracked at once; beyond, the rest share one budget.
const MAX_CALLERS: usize = 4096;
/// A caller whose budget is full and that was not refused for this long
/// is forgotten.
const FORGET_AFTER: Duration = Duration::from_secs(60);

type Key = Option<(Option<u32>, Option<String>, Option<String>)>;

/// A caller in a pod is its pod (root in a container may `setuid()` and
/// `setgid()` to any id before each connection, and a pod has several
/// containers); outside a pod, its uid or SID. Never its pid, gid or
/// container, which a process changes at will (a fork, `setgid()` as
/// root: 320 gids got 320 budgets).
fn key_of(c: &Caller) -> Key {
    match &c.pod_uid {
        Some(pod) => Some((None, None, Some(pod.to_ascii_lowercase()))),
        // Not identified (gone before its pod was read, not in time, a
        // process changed): its uid is not a key it cannot change (root in
        // a container takes any uid, red team 40async). All such callers
        // share one budget.
        None if c.incomplete.is_some() => Some((None, Some(UNIDENTIFIED.into()), None)),
        None => Some((c.uid, c.sid.clone(), None)),
    }
}

/// The key of callers not identified (a SID never starts so).
const UNIDENTIFIED: &str = "(not identified)";

struct Budget {
    tokens: f64,
    last: Instant,
    /// Refused calls not recorded one by one since the last summary, by
    /// the code they were answered.
    held: Vec<(Code, u64)>,
    /// The caller whose budget this is; `None` for the budget shared by
    /// the callers beyond the table (it names none of them: the first
    /// there did not make the others' calls).
    caller: Option<Arc<Caller>>,
}

/// Refused calls not recorded one by one: one summary line per caller
/// and code.
pub struct Summary {
    /// `None`: the callers beyond the table of [`MAX_CALLERS`], or the
    /// callers not identified ([`Summary::unidentified`]).
    pub caller: Option<Arc<Caller>>,
    /// The budget shared by callers not identified.
    pub unidentified: bool,
    /// What the calls were answered.
    pub code: Code,
    pub refused: u64,
}

/// The per-caller budgets.
#[derive(Default)]
pub struct Limiter {
    budgets: Mutex<HashMap<Key, Budget>>,
}

impl Limiter {
    /// Whether the refused call of `caller` at `now`, answered `code`,
    /// gets its own line (otherwise it is counted for the next summary).
    pub fn admit(&self, caller: &Arc<Caller>, code: Code, now: Instant) -> bool {
        let mut all = self.budgets.lock().unwrap_or_else(|p| p.into_inner());
        let mut key = key_of(caller);
        if !all.contains_key(&key) && all.len() >= MAX_CALLERS {
            key = None;
        }
        let named = key
            .as_ref()
            .is_some_and(|k| k.1.as_deref() != Some(UNIDENTIFIED));
        let b = all.entry(key).or_insert_with(|| Budget {
            tokens: BURST,
            last: now,
            held: Vec::new(),
            caller: named.then(|| caller.clone()),
        });
        let gained = now.saturating_duration_since(b.last).as_secs_f64() * PER_SECOND;
        b.tokens = (b.tokens + gained).min(BURST);
        b.last = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            true
        } else {
            match b.held.iter_mut().find(|(c, _)| *c == code) {
                Some((_, n)) => *n += 1,
                None => b.held.push((code, 1)),
            }
            false
        }
    }

    /// The callers with held refusals (their counts reset), and callers
    /// idle long enough forgotten.
    pub fn summaries(&self, now: Instant) -> Vec<Summary> {
        let mut all = self.budgets.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = Vec::new();
        all.retain(|k, b| {
            if !b.held.is_empty() {
                let unidentified = k
                    .as_ref()
                    .is_some_and(|k| k.1.as_deref() == Some(UNIDENTIFIED));
                for (code, refused) in std::mem::take(&mut b.held) {
                    out.push(Summary {
                        caller: b.caller.clone(),
                        unidentified,
                        code,
                        refused,
                    });
                }
                return true;
            }
            now.saturating_duration_since(b.last) < FORGET_AFTER
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(uid: u32, pid: u32) -> Arc<Caller> {
        Arc::new(Caller {
            uid: Some(uid),
            pid: Some(pid),
            ..Caller::default()
        })
    }

    #[test]
    fn summaries_say_what_the_calls_were_answered_and_unidentified_callers_share_one() {
        // Red team 40async: every summary said PermissionDenied; callers
        // not identified were keyed on their uid (root in a container
        // takes any), so 200 uids wrote 200 budgets' worth.
        let l = Limiter::default();
        let t = Instant::now();
        for i in 0..(BURST as u32 + 3) {
            let code = if i % 2 == 0 {
                Code::Unavailable
            } else {
                Code::PermissionDenied
            };
            l.admit(&caller(7, 1), code, t);
        }
        let mut s = l.summaries(t);
        s.sort_by_key(|s| s.code as i32);
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].code, s[0].refused), (Code::PermissionDenied, 1));
        assert_eq!((s[1].code, s[1].refused), (Code::Unavailable, 2));
        let unidentified = |uid: u32| {
            Arc::new(Caller {
                uid: Some(uid),
                incomplete: Some("not identified in time"),
                ..Caller::default()
            })
        };
        let admitted = (0..200)
            .filter(|u| l.admit(&unidentified(6000 + u), Code::PermissionDenied, t))
            .count();
        assert_eq!(admitted, BURST as usize);
        let s = l.summaries(t);
        assert_eq!(s.len(), 1);
        assert!(s[0].unidentified && s[0].caller.is_none());
        assert_eq!(s[0].refused, 200 - BURST as u64);
    }

    #[test]
    fn a_burst_then_the_rate_then_summaries() {
        let l = Limiter::default();
        let t = Instant::now();
        // A new pid per call changes nothing: the budget is the caller's.
        let admitted = (0..100)
            .filter(|i| l.admit(&caller(65534, *i), Code::PermissionDenied, t))
            .count();
        assert_eq!(admitted, BURST as usize);
        // Another caller has its own budget.
        assert!(l.admit(&caller(0, 1), Code::PermissionDenied, t));
        let s = l.summaries(t);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].refused, 100 - BURST as u64);
        assert_eq!(s[0].caller.as_ref().unwrap().uid, Some(65534));
        assert!(l.summaries(t).is_empty(), "counts reset");
        // One second later: PER_SECOND more lines.
        let t1 = t + Duration::from_secs(1);
        let admitted = (0..100)
            .filter(|i| l.admit(&caller(65534, *i), Code::PermissionDenied, t1))
            .count();
        assert_eq!(admitted, PER_SECOND as usize);
    }

    /// The bypass: a root caller calling `setgid()` before each
    /// connection got a fresh budget; so would a pod's `setuid()` or its
    /// other containers.
    #[test]
    fn a_pod_is_one_budget_whatever_uid_gid_or_container() {
        let l = Limiter::default();
        let t = Instant::now();
        let admitted = (0..400u32)
            .filter(|i| {
                let c = Arc::new(Caller {
                    uid: Some(i % 7),
                    gid: Some(*i),
                    pod_uid: Some("pod".into()),
                    container_id: Some(format!("c{i}")),
                    ..Caller::default()
                });
                l.admit(&c, Code::PermissionDenied, t)
            })
            .count();
        assert_eq!(admitted, BURST as usize);
        // Outside a pod: the uid, whatever the gid.
        let admitted = (0..400u32)
            .filter(|i| {
                let c = Arc::new(Caller {
                    uid: Some(0),
                    gid: Some(*i),
                    ..Caller::default()
                });
                l.admit(&c, Code::PermissionDenied, t)
            })
            .count();
        assert_eq!(admitted, BURST as usize);
    }

    #[test]
    fn callers_are_bounded_and_forgotten() {
        let l = Limiter::default();
        let t = Instant::now();
        for uid in 0..(MAX_CALLERS as u32 + 10) {
            l.admit(&caller(uid, 1), Code::PermissionDenied, t);
        }
        assert!(l.budgets.lock().unwrap().len() <= MAX_CALLERS + 1);
        // The budget beyond the table names none of its callers: a victim's
        // refusals were summarised under the first caller that got there.
        let victim = caller(4242, 1);
        let admitted = (0..100)
            .filter(|_| l.admit(&victim, Code::PermissionDenied, t))
            .count();
        assert!(admitted < 100);
        let s = l.summaries(t);
        let beyond: Vec<_> = s.iter().filter(|s| s.caller.is_none()).collect();
        assert_eq!(
            beyond.len(),
            1,
            "one summary for the callers beyond the table"
        );
        assert!(
            s.iter().all(|s| s
                .caller
                .as_ref()
                .is_none_or(|c| c.uid != Some(MAX_CALLERS as u32))),
            "a summary names a caller for calls it did not make"
        );
        l.summaries(t + FORGET_AFTER);
        assert!(l.budgets.lock().unwrap().is_empty());
    }
}
