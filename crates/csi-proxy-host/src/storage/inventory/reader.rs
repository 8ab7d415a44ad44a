//! Bounded device reads: each read of a disk runs on a thread of its own and
//! its caller waits for it at most a given time.
//!
//! A thread stuck in uninterruptible I/O (a loop disk over a frozen file
//! system, a multipath LUN queueing without a path, a hung virtio disk)
//! cannot be cancelled. The caller gives up at its deadline and leaves the
//! thread behind; the reader starts no new read of a disk while a read of
//! it that its caller gave up on is still out (it would only hang too, and
//! cost its caller the whole timeout again), and never more than
//! [`DISK_THREADS`] at once, so one hung disk holds a bounded number of
//! threads whatever the callers do, and its calls are answered at once.
//! When a read left behind finally returns, its disk is reported
//! ([`Readers::take_late`]) so that the inventory reads it again and
//! forgets that it was unresponsive.

use crate::{Error, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Reads of one disk that may run at once, stuck ones included.
pub const DISK_THREADS: usize = 2;

/// How long a read of one disk may take before the disk is taken as
/// unresponsive.
pub const READ_TIMEOUT: Duration = Duration::from_secs(2);

/// What a bounded read gave.
pub enum Read<T> {
    /// It returned in time.
    Done(Result<T>),
    /// It did not return in time (the thread goes on), or a read of the
    /// disk given up on is still out, or the disk's budget of threads
    /// stayed spent until the deadline: no read was started.
    Unresponsive,
}

/// Which disk a read is for; `None`: a full scan of a backend that cannot
/// read disk by disk (one budget for all of them).
type Slot<K> = Option<K>;

struct State<K> {
    in_flight: BTreeMap<Slot<K>, usize>,
    /// Reads in flight whose caller gave up on them.
    abandoned: BTreeMap<Slot<K>, usize>,
    late: BTreeSet<Slot<K>>,
}

/// The reads in flight, per disk.
pub struct Readers<K> {
    state: Mutex<State<K>>,
    /// Signalled when a read ends or is given up on: a read waiting for
    /// its disk's budget looks again.
    freed: Condvar,
}

impl<K: Ord + Clone + Send + 'static> Default for Readers<K> {
    fn default() -> Self {
        Readers {
            state: Mutex::new(State {
                in_flight: BTreeMap::new(),
                abandoned: BTreeMap::new(),
                late: BTreeSet::new(),
            }),
            freed: Condvar::new(),
        }
    }
}

/// One read's answer, handed from its thread to its caller.
struct Handoff<K, T> {
    key: Slot<K>,
    answer: Mutex<(Option<Result<T>>, bool)>,
    ready: Condvar,
}

impl<K: Ord + Clone + Send + Sync + 'static> Readers<K> {
    fn lock(&self) -> MutexGuard<'_, State<K>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Threads still reading disk `key` (`None`: full scans).
    pub fn in_flight(&self, key: Option<&K>) -> usize {
        let slot = key.cloned();
        self.lock().in_flight.get(&slot).copied().unwrap_or(0)
    }

    /// Disks (`None`: the full scan) whose reads returned after their
    /// caller gave up, since the last call.
    pub fn take_late(&self) -> BTreeSet<Option<K>> {
        std::mem::take(&mut self.lock().late)
    }

    /// Starts `read` for `key` on a thread of its own. `None`: not
    /// started, because a read of the disk that its caller gave up on is
    /// still out (the disk does not answer), or because the disk's budget
    /// stayed spent until `deadline` (reads of a healthy disk that run at
    /// once wait for each other, within the deadline).
    fn start<T: Send + 'static>(
        self: &Arc<Self>,
        key: Option<K>,
        deadline: Instant,
        read: impl FnOnce() -> Result<T> + Send + 'static,
    ) -> Option<Result<Arc<Handoff<K, T>>>> {
        {
            let mut st = self.lock();
            loop {
                if st.abandoned.get(&key).is_some_and(|n| *n > 0) {
                    return None;
                }
                let n = st.in_flight.entry(key.clone()).or_insert(0);
                if *n < DISK_THREADS {
                    *n += 1;
                    break;
                }
                let now = Instant::now();
                if now >= deadline {
                    return None;
                }
                st = self
                    .freed
                    .wait_timeout(st, deadline - now)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
        }
        let hand = Arc::new(Handoff {
            key: key.clone(),
            answer: Mutex::new((None, false)),
            ready: Condvar::new(),
        });
        let (h, me, k) = (hand.clone(), self.clone(), key.clone());
        let spawned = std::thread::Builder::new()
            .name("csi-disk-read".into())
            .spawn(move || {
                let r = read();
                // The thread counts as done before its caller sees the
                // answer: a caller that reads the same disk again at once
                // finds the budget free.
                let mut a = h.answer.lock().unwrap_or_else(|p| p.into_inner());
                {
                    let mut st = me.lock();
                    if let Some(n) = st.in_flight.get_mut(&k) {
                        *n -= 1;
                        if *n == 0 {
                            st.in_flight.remove(&k);
                        }
                    }
                    if a.1 {
                        if let Some(n) = st.abandoned.get_mut(&k) {
                            *n -= 1;
                            if *n == 0 {
                                st.abandoned.remove(&k);
                            }
                        }
                        st.late.insert(k);
                    }
                }
                if !a.1 {
                    a.0 = Some(r);
                }
                drop(a);
                h.ready.notify_all();
                me.freed.notify_all();
            });
        match spawned {
            Ok(_) => Some(Ok(hand)),
            Err(e) => {
                let mut st = self.lock();
                if let Some(n) = st.in_flight.get_mut(&key) {
                    *n -= 1;
                }
                drop(st);
                self.freed.notify_all();
                Some(Err(Error::io("start a disk read thread", "", e)))
            }
        }
    }

    /// Waits for a started read until `deadline`; a read not done by then
    /// is abandoned (its thread reports itself late when it returns).
    fn wait<T>(&self, hand: &Handoff<K, T>, deadline: Instant) -> Read<T> {
        let mut a = hand.answer.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(r) = a.0.take() {
                return Read::Done(r);
            }
            let now = Instant::now();
            if now >= deadline {
                // Counted under the answer's lock, which the thread holds
                // when it looks at `a.1`: it uncounts exactly what was
                // counted.
                a.1 = true;
                *self.lock().abandoned.entry(hand.key.clone()).or_insert(0) += 1;
                // Reads waiting for this disk's budget answer at once.
                self.freed.notify_all();
                return Read::Unresponsive;
            }
            a = hand
                .ready
                .wait_timeout(a, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Runs `read` for disk `key` (`None`: a full scan), waiting at most
    /// `timeout`.
    pub fn run<T: Send + 'static>(
        self: &Arc<Self>,
        key: Option<K>,
        timeout: Duration,
        read: impl FnOnce() -> Result<T> + Send + 'static,
    ) -> Read<T> {
        let deadline = Instant::now() + timeout;
        match self.start(key, deadline, read) {
            None => Read::Unresponsive,
            Some(Err(e)) => Read::Done(Err(e)),
            Some(Ok(h)) => self.wait(&h, deadline),
        }
    }

    /// Runs `read` for every key at once, each waited for until the same
    /// deadline `timeout` from now: one hung disk costs the whole scan at
    /// most `timeout`, not one timeout per disk.
    pub fn run_all<T: Send + 'static, F>(
        self: &Arc<Self>,
        keys: Vec<K>,
        timeout: Duration,
        read: F,
    ) -> Vec<(K, Read<T>)>
    where
        F: Fn(&K) -> Result<T> + Send + Sync + 'static,
    {
        let deadline = Instant::now() + timeout;
        let read = Arc::new(read);
        let started: Vec<_> = keys
            .into_iter()
            .map(|k| {
                let (r, kk) = (read.clone(), k.clone());
                let h = self.start(Some(k.clone()), deadline, move || r(&kk));
                (k, h)
            })
            .collect();
        started
            .into_iter()
            .map(|(k, h)| {
                let r = match h {
                    None => Read::Unresponsive,
                    Some(Err(e)) => Read::Done(Err(e)),
                    Some(Ok(h)) => self.wait(&h, deadline),
                };
                (k, r)
            })
            .collect()
    }
}
