//! Blocking jobs per caller: a caller whose calls hang (on a lease, a hung
//! disk, a tool that never exits) holds at most [`PER_CALLER`] threads of
//! the blocking pool, over all its connections; past that its calls are
//! answered `Unavailable` at once, and every other caller still has the
//! pool (each connection is bounded too:
//! `csi_proxy_http2::driver::MAX_JOBS_PER_CONNECTION`).
//!
//! The process admits at most [`ADMIT_ALL`] blocking jobs of all callers
//! together, and up to [`ADMIT_FEW`] for a caller holding at most
//! [`FEW`]: below tokio's pool ([`POOL`] threads, which also runs the
//! identification jobs, `super::slots::AT_ONCE`), so callers that each
//! stay within their own [`PER_CALLER`] cannot together queue everyone
//! else's calls behind theirs, and a caller with few jobs in progress
//! still gets a thread when many callers hang. Of that reserve a caller
//! holds at most [`RESERVE_PER_CALLER`] (its own count, checked before
//! the shared one): a set of callers drains it only with one identity per
//! slot, not [`FEW`] each.
//!
//! A job still running past its call's deadline (its client gave up: a
//! hung disk or mount, most often), or for [`SLOW_AFTER`] (when the
//! host's bound per file system counts it as stuck, `confined/stuck.rs`),
//! stops counting against the caller's [`PER_CALLER`] and counts against
//! [`STUCK_PER_CALLER`] instead: calls stuck on a few hung disks or file
//! systems (each within its own bound) cannot lock their caller out of
//! its healthy disks and other groups (red team 39disk F3; 41mount N1:
//! two hung file systems took all 64 live jobs until their 600 s
//! deadlines), and the threads one caller holds stay bounded by the sum.
//!
//! A caller is its pod whatever uid it runs as (root in a container may
//! take any uid: a budget per uid and pod gave one pod as many budgets as
//! it liked, red team 42mount, as for hashing, `super::budget::Spender`),
//! outside pods its uid (Linux), or its user SID (Windows): kernel
//! identities, taken when the connection is accepted. A caller with
//! none (a Windows pipe client without a guard) is its pid.

use super::Caller;
pub use csi_proxy_host::confined::stuck::SLOW_AFTER;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Blocking jobs one caller may hold at a time.
pub const PER_CALLER: usize = 64;

/// Jobs of one caller still running past their call's deadline, at most
/// (on top of its [`PER_CALLER`] live ones).
pub const STUCK_PER_CALLER: usize = 64;

/// Threads of tokio's blocking pool (its default `max_blocking_threads`,
/// which `csi-proxy` keeps).
pub const POOL: usize = 512;

/// Blocking jobs admitted for all callers together.
pub const ADMIT_ALL: usize = 352;

/// Blocking jobs admitted in all for a caller holding fewer than [`FEW`]:
/// the reserve past [`ADMIT_ALL`] is kept for callers with few jobs.
/// With the identification jobs (`super::slots::AT_ONCE`) this stays
/// below [`POOL`].
pub const ADMIT_FEW: usize = 416;

/// Jobs a caller may hold and still use the reserve.
pub const FEW: usize = 4;

/// Reserve slots (past [`ADMIT_ALL`]) one caller may hold at a time.
pub const RESERVE_PER_CALLER: usize = 1;

const _: () = assert!(ADMIT_FEW + super::slots::AT_ONCE < POOL);

/// Why a job was not admitted.
pub const CALLER_FULL: &str =
    "this caller has 64 operations in progress; retry when some have finished";
const _: () = assert!(PER_CALLER == 64);

/// Why a job was not admitted.
pub const STUCK_FULL: &str = "this caller has 64 operations still running past their deadline or for over 2 s (on a disk or mount that does not answer?); retry when some have finished";
const _: () = assert!(SLOW_AFTER.as_secs() == 2);
const _: () = assert!(STUCK_PER_CALLER == 64);

/// Why a job was not admitted.
pub const PROCESS_FULL: &str =
    "the proxy has too many operations in progress; retry when some have finished";

/// The count of blocking jobs admitted in all.
#[derive(Debug, Default)]
pub struct Admission(AtomicUsize);

impl Admission {
    /// Admit one more job; past [`ADMIT_ALL`] only when `reserve` (the
    /// caller may take a reserve slot). `Some((job, true))` when it took
    /// one.
    fn admit(&'static self, reserve: bool) -> Option<(Admitted, bool)> {
        let limit = if reserve { ADMIT_FEW } else { ADMIT_ALL };
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            })
            .ok()
            .map(|n| (Admitted(self), n >= ADMIT_ALL))
    }
}

/// One admitted job; given back when dropped.
#[derive(Debug)]
struct Admitted(&'static Admission);

impl Drop for Admitted {
    fn drop(&mut self) {
        self.0 .0.fetch_sub(1, Ordering::AcqRel);
    }
}

static ADMITTED: Admission = Admission(AtomicUsize::new(0));

/// One caller's jobs in progress: when each counts as stuck (its call's
/// deadline, or [`SLOW_AFTER`] after it was admitted).
#[derive(Debug, Default)]
struct Own {
    jobs: HashMap<u64, Instant>,
    next: u64,
}

impl Own {
    /// Jobs (live, stuck) at `now`.
    fn counts(&self, now: Instant) -> (usize, usize) {
        let stuck = self.jobs.values().filter(|at| **at <= now).count();
        (self.jobs.len() - stuck, stuck)
    }
}

type Owned = Arc<Mutex<Own>>;

fn lock(o: &Owned) -> std::sync::MutexGuard<'_, Own> {
    o.lock().unwrap_or_else(|p| p.into_inner())
}

/// A job's place among its caller's; given back when dropped.
#[derive(Debug)]
struct OwnJob(Owned, u64);

impl Drop for OwnJob {
    fn drop(&mut self) {
        lock(&self.0).jobs.remove(&self.1);
    }
}

/// A blocking job's slot: the caller's own and the process's, held until
/// the job ends.
#[derive(Debug)]
pub struct Slot {
    _own: OwnJob,
    _all: Admitted,
    /// The caller's reserve slot, when this job took one.
    _reserve: Option<OwnedSemaphorePermit>,
}

/// Who a budget belongs to.
type Key = (Option<u32>, Option<String>, Option<String>, Option<u32>);

fn key(c: &Caller) -> Key {
    let pod = c.pod_uid.as_ref().map(|p| p.to_ascii_lowercase());
    let uid = if pod.is_some() { None } else { c.uid };
    let pid = match (c.uid, &c.sid, &pod) {
        (None, None, None) => c.pid,
        _ => None,
    };
    (uid, pod, c.sid.clone(), pid)
}

/// The caller as host state keyed per caller sees it
/// (`csi_proxy_host::on_behalf`): the same identity as its job budget.
pub fn owner(c: &Caller) -> std::sync::Arc<str> {
    let (uid, pod, sid, pid) = key(c);
    let mut s = String::new();
    let parts = [
        ("uid", uid.map(|u| u.to_string())),
        ("pod", pod),
        ("sid", sid),
        ("pid", pid.map(|p| p.to_string())),
    ];
    for (k, v) in parts {
        if let Some(v) = v {
            if !s.is_empty() {
                s.push(' ');
            }
            s.push_str(&format!("{k}={v}"));
        }
    }
    if s.is_empty() {
        s.push_str("unknown");
    }
    std::sync::Arc::from(s)
}

/// One caller's slots: its own ([`PER_CALLER`]), its share of the reserve
/// ([`RESERVE_PER_CALLER`]), the process's.
#[derive(Clone, Debug)]
pub struct Jobs(Owned, Arc<Semaphore>, &'static Admission);

type Budget = (Owned, Arc<Semaphore>);

impl Jobs {
    /// The slots of `caller` (shared by all its connections).
    pub fn of(caller: &Caller) -> Jobs {
        static ALL: Mutex<Option<HashMap<Key, Budget>>> = Mutex::new(None);
        let mut g = ALL.lock().unwrap_or_else(|p| p.into_inner());
        let map = g.get_or_insert_with(HashMap::new);
        if map.len() >= 4096 {
            // Budgets no connection holds any more.
            map.retain(|_, (s, _)| Arc::strong_count(s) > 1);
        }
        let (own, reserve) = map
            .entry(key(caller))
            .or_insert_with(|| (Arc::default(), Arc::new(Semaphore::new(RESERVE_PER_CALLER))));
        Jobs(own.clone(), reserve.clone(), &ADMITTED)
    }

    /// A slot for one blocking job whose call gives up at `deadline`, held
    /// until the job ends; `Err` (why) when the caller holds all of its
    /// own live or stuck ones, or the process admits no more.
    pub fn take(&self, deadline: Option<Instant>) -> Result<Slot, &'static str> {
        self.take_at(deadline, Instant::now())
    }

    fn take_at(&self, deadline: Option<Instant>, now: Instant) -> Result<Slot, &'static str> {
        let (own, held) = {
            let mut o = lock(&self.0);
            let (live, stuck) = o.counts(now);
            // Stuck ones past their own budget count as live.
            let over = stuck.saturating_sub(STUCK_PER_CALLER);
            if live + over >= PER_CALLER {
                return Err(if over > 0 { STUCK_FULL } else { CALLER_FULL });
            }
            o.next += 1;
            let id = o.next;
            let slow = now + SLOW_AFTER;
            o.jobs.insert(id, deadline.map_or(slow, |d| d.min(slow)));
            // Every thread it holds counts for the reserve, stuck ones too
            // (red team 39r2: 64 stuck and none live took a reserve slot).
            (OwnJob(self.0.clone(), id), live + stuck + 1)
        };
        // The caller's own share of the reserve first, then the shared
        // count; a share taken but not needed goes back at once.
        let mut reserve = (held <= FEW)
            .then(|| self.1.clone().try_acquire_owned().ok())
            .flatten();
        let (all, took) = self.2.admit(reserve.is_some()).ok_or(PROCESS_FULL)?;
        if !took {
            reserve = None;
        }
        Ok(Slot {
            _own: own,
            _all: all,
            _reserve: reserve,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One instant per test thread for every job it takes: a test that
    /// holds jobs for 2 s of a busy machine is not changed by it.
    fn t0() -> Instant {
        thread_local!(static T0: Instant = Instant::now());
        T0.with(|t| *t)
    }

    #[test]
    fn a_caller_spends_only_its_own_slots() {
        let a = Caller {
            uid: Some(1000),
            ..Caller::default()
        };
        let b = Caller {
            uid: Some(1000),
            pod_uid: Some("p".into()),
            ..Caller::default()
        };
        let held: Vec<_> = (0..PER_CALLER)
            .map(|_| Jobs::of(&a).take_at(None, t0()).unwrap())
            .collect();
        assert!(Jobs::of(&a).take_at(None, t0()).is_err());
        assert!(Jobs::of(&b).take_at(None, t0()).is_ok());
        drop(held);
        assert!(Jobs::of(&a).take_at(None, t0()).is_ok());
    }

    #[test]
    fn a_pod_is_one_caller_whatever_uid_it_runs_as() {
        let as_uid = |uid| Caller {
            uid: Some(uid),
            pod_uid: Some("Sybil-Pod".into()),
            ..Caller::default()
        };
        let held: Vec<_> = (0..PER_CALLER as u32)
            .map(|u| Jobs::of(&as_uid(20_000 + u)).take_at(None, t0()).unwrap())
            .collect();
        assert_eq!(
            Jobs::of(&as_uid(30_000)).take_at(None, t0()).err(),
            Some(CALLER_FULL)
        );
        assert_eq!(owner(&as_uid(1)), owner(&as_uid(2)));
        drop(held);
    }

    #[test]
    fn callers_together_stay_below_the_pool_and_a_new_caller_still_gets_one() {
        let all: &'static Admission = Box::leak(Box::default());
        let jobs = |uid: u32| {
            let c = Caller {
                uid: Some(uid),
                pod_uid: Some(format!("admission-test-{uid}")),
                ..Caller::default()
            };
            let j = Jobs::of(&c);
            Jobs(j.0, j.1, all)
        };
        // Nine callers each fill their own PER_CALLER with jobs that hang:
        // 9 x 64 = 576 would be more than the pool.
        let mut held = Vec::new();
        for uid in 0..9 {
            let j = jobs(7_000 + uid);
            held.extend((0..PER_CALLER).filter_map(|_| j.take_at(None, t0()).ok()));
        }
        assert!(held.len() <= ADMIT_FEW, "{} admitted", held.len());
        assert!(held.len() + super::super::slots::AT_ONCE < POOL);
        // A caller with few jobs in progress still gets threads.
        let newcomer = jobs(7_100);
        let few: Vec<_> = (0..RESERVE_PER_CALLER)
            .map(|_| newcomer.take_at(None, t0()).unwrap())
            .collect();
        assert_eq!(newcomer.take_at(None, t0()).err(), Some(PROCESS_FULL));
        drop(few);
        drop(held);
        assert_eq!(all.0.load(Ordering::Acquire), 0);
    }

    #[test]
    fn callers_with_few_jobs_each_cannot_drain_the_reserve_together() {
        let all: &'static Admission = Box::leak(Box::default());
        let jobs = |uid: u32| {
            let c = Caller {
                uid: Some(uid),
                pod_uid: Some(format!("reserve-test-{uid}")),
                ..Caller::default()
            };
            let j = Jobs::of(&c);
            Jobs(j.0, j.1, all)
        };
        // Six callers fill what all callers share (6 x 64 > ADMIT_ALL).
        let mut held = Vec::new();
        for uid in 0..6 {
            let j = jobs(8_000 + uid);
            held.extend((0..PER_CALLER).filter_map(|_| j.take_at(None, t0()).ok()));
        }
        assert_eq!(held.len(), ADMIT_ALL);
        // Then 20 more callers each try FEW jobs: FEW each would take
        // 80 > the reserve's 64; one each takes 20.
        let mut refused = 0;
        for uid in 0..20 {
            let j = jobs(8_100 + uid);
            for _ in 0..FEW {
                match j.take_at(None, t0()) {
                    Ok(s) => held.push(s),
                    Err(why) => {
                        assert_eq!(why, PROCESS_FULL);
                        refused += 1;
                    }
                }
            }
        }
        assert_eq!(held.len(), ADMIT_ALL + 20 * RESERVE_PER_CALLER);
        assert_eq!(refused, 20 * (FEW - RESERVE_PER_CALLER));
        // A new caller is still served; its second job is not.
        let newcomer = jobs(8_200);
        let one = newcomer.take_at(None, t0()).unwrap();
        assert_eq!(newcomer.take_at(None, t0()).err(), Some(PROCESS_FULL));
        // Its reserve slot is back when the job ends.
        drop(one);
        let again = newcomer.take_at(None, t0()).unwrap();
        drop(again);
        drop(held);
        assert_eq!(all.0.load(Ordering::Acquire), 0);
    }

    #[test]
    fn jobs_past_their_deadline_leave_the_caller_its_live_budget() {
        // Red team 39disk F3: 8 hung disks x 8 calls each (every disk
        // within its own bound) held all 64 of the caller's slots, and it
        // was refused on its healthy disks and in other groups.
        let c = Caller {
            uid: Some(1001),
            pod_uid: Some("stuck-test".into()),
            ..Caller::default()
        };
        let j = Jobs::of(&c);
        let now = Instant::now();
        let past = Some(now - std::time::Duration::from_millis(1));
        let later = Some(now + std::time::Duration::from_secs(3600));
        let stuck: Vec<_> = (0..STUCK_PER_CALLER)
            .map(|_| j.take_at(past, t0()).unwrap())
            .collect();
        // Its live budget is whole.
        let live: Vec<_> = (0..PER_CALLER)
            .map(|_| j.take_at(later, t0()).unwrap())
            .collect();
        assert_eq!(j.take_at(later, t0()).err(), Some(CALLER_FULL));
        drop(live);
        // Stuck ones past the stuck budget count as live again.
        let more: Vec<_> = (0..PER_CALLER - 1)
            .map(|_| j.take_at(past, t0()).unwrap())
            .collect();
        assert!(j.take_at(later, t0()).is_ok());
        let _last = j.take_at(past, t0()).unwrap();
        assert_eq!(j.take_at(past, t0()).err(), Some(STUCK_FULL));
        assert_eq!(j.take_at(later, t0()).err(), Some(STUCK_FULL));
        drop(more);
        drop(stuck);
        assert!(j.take_at(None, t0()).is_ok());
    }

    #[test]
    fn jobs_running_for_two_seconds_leave_the_caller_its_live_budget() {
        // Red team 41mount N1: 32 calls into each of two hung file systems
        // (600 s deadlines) held all 64 live jobs until their deadlines.
        let c = Caller {
            uid: Some(1002),
            pod_uid: Some("slow-test".into()),
            ..Caller::default()
        };
        let j = Jobs::of(&c);
        let now = Instant::now();
        let later = Some(now + std::time::Duration::from_secs(600));
        let hung: Vec<_> = (0..PER_CALLER)
            .map(|_| j.take_at(later, now).unwrap())
            .collect();
        assert_eq!(j.take_at(later, now).err(), Some(CALLER_FULL));
        let after = now + SLOW_AFTER;
        let live: Vec<_> = (0..PER_CALLER)
            .map(|_| j.take_at(later, after).unwrap())
            .collect();
        assert_eq!(j.take_at(later, after).err(), Some(CALLER_FULL));
        drop(live);
        drop(hung);
    }

    #[test]
    fn stuck_jobs_count_for_the_reserve() {
        let all: &'static Admission = Box::leak(Box::default());
        let jobs = |uid: u32| {
            let c = Caller {
                uid: Some(uid),
                pod_uid: Some(format!("stuck-reserve-test-{uid}")),
                ..Caller::default()
            };
            let j = Jobs::of(&c);
            Jobs(j.0, j.1, all)
        };
        // A caller holding 64 threads, all past their deadline...
        let past = Some(Instant::now() - std::time::Duration::from_millis(1));
        let all_stuck = jobs(9_100);
        let mine: Vec<_> = (0..STUCK_PER_CALLER)
            .map(|_| all_stuck.take_at(past, t0()).unwrap())
            .collect();
        // ...then others fill what all callers share.
        let mut held = Vec::new();
        for uid in 0..6 {
            let j = jobs(9_000 + uid);
            held.extend((0..PER_CALLER).filter_map(|_| j.take_at(None, t0()).ok()));
        }
        // (The last of them, holding few, took its reserve slot.)
        assert_eq!(held.len() + mine.len(), ADMIT_ALL + RESERVE_PER_CALLER);
        // It is no caller with few jobs: no reserve slot for it, while a
        // newcomer still gets one.
        assert_eq!(all_stuck.take_at(None, t0()).err(), Some(PROCESS_FULL));
        let newcomer = jobs(9_200);
        let one = newcomer.take_at(None, t0()).unwrap();
        drop(one);
        drop(mine);
        drop(held);
        assert_eq!(all.0.load(Ordering::Acquire), 0);
    }
}
