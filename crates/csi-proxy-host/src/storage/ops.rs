//! One operation per disk or volume, on every OS.
//!
//! [`Storage`](super::Storage) runs each host-changing call (PartitionDisk,
//! InitializeDisk, CreateBasicPartition, SetDiskState, Rescan, FormatVolume,
//! ResizeVolume, MountVolume, UnmountVolume) through [`Operations::run`],
//! keyed by its target (a disk number, a volume id, or the host for
//! Rescan). An operation is its method and arguments ([`Operation`]).
//!
//! * A call identical to the operation running on its target joins it: it
//!   waits for that operation's result instead of doing the work again.
//! * A different call on that target is answered at once with
//!   [`Error::Aborted`], naming the running operation (what CSI drivers
//!   know as "operation in progress": they retry later).
//! * The caller's deadline ([`crate::deadline`]) bounds a joiner's wait:
//!   it answers [`Error::DeadlineExceeded`] while the operation goes on. A
//!   successful operation that finishes after the deadline of its caller,
//!   or of a caller that joined it (or within half a second of it: the
//!   answer would come too late), keeps its result for [`KEEP`]: the retry
//!   of a caller that missed it (by [`crate::on_behalf`] key) collects it,
//!   once, instead of running the operation (and its tools) a second time.
//!   A failed operation's result is not kept (its retry runs it again), nor
//!   is a host-wide Rescan's (a later one asks for the state now).
//! * A kept result is only ever given to a caller that missed it, never to
//!   another caller, and it never holds its target: any other call runs as
//!   usual (red team 39r2: a kept result that answered every different
//!   call `Aborted` let a caller hold another's disk for minutes). Once
//!   another operation has run on the target, a caller that missed it is
//!   answered [`Error::Aborted`] once, naming its result and the method
//!   that ran since, and its retry is never answered by running the
//!   operation a second time unasked.
//! * Kept results are charged to the callers that missed them: at most
//!   [`MAX_KEPT_PER_CALLER`] per caller (past it a caller's new results are
//!   not kept for it; its older ones stay) and [`MAX_KEPT`] in all (past it
//!   the caller with the most kept loses its oldest): callers that flood
//!   the table push out only their own.
//!
//! Read-only calls are not registered and never wait. Operations on
//! different targets run at the same time; what a backend shares between
//! them (a disk's partition table under two of its volumes) is its own to
//! serialise.

use crate::{deadline, Error, Result};
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::VolumeId;

/// How long a result nobody received is kept for a retry.
pub const KEEP: Duration = Duration::from_secs(10 * 60);

/// At most this many such results are kept per caller (charged to the
/// callers that missed them), so calls with deadlines too short to be
/// answered cannot grow the table without bound; past it the caller's new
/// results are not kept (its own older ones, and everyone else's, stay).
pub const MAX_KEPT_PER_CALLER: usize = 256;

/// At most this many results are kept in all (many callers' worth); past
/// it the caller with the most kept loses its oldest.
pub const MAX_KEPT: usize = 4096;

/// What an operation changes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    Disk(u32),
    Volume(VolumeId),
    /// The whole host (Rescan).
    Host,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Disk(n) => write!(f, "disk {n}"),
            Target::Volume(v) => write!(f, "volume {v}"),
            Target::Host => f.write_str("the host"),
        }
    }
}

/// A host-changing call: its method and arguments (besides the target).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operation {
    method: &'static str,
    args: String,
}

impl Operation {
    /// `method` (e.g. `FormatVolume`) with no argument but its target.
    pub fn new(method: &'static str) -> Self {
        Operation {
            method,
            args: String::new(),
        }
    }

    /// `method` with further arguments, as they are shown in messages
    /// (`target /var/lib/kubelet/...`, `size 1073741824`).
    pub fn with_args(method: &'static str, args: impl Into<String>) -> Self {
        Operation {
            method,
            args: args.into(),
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.args.is_empty() {
            f.write_str(self.method)
        } else {
            write!(f, "{} ({})", self.method, self.args)
        }
    }
}

/// One run of an operation: its result once it is done, shared by the
/// caller that runs it and every caller that joined it.
#[derive(Default)]
struct Cell {
    result: Mutex<Option<Result<()>>>,
    done: Condvar,
}

impl Cell {
    fn lock(&self) -> MutexGuard<'_, Option<Result<()>>> {
        self.result.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn finish(&self, r: Result<()>) {
        *self.lock() = Some(r);
        self.done.notify_all();
    }

    /// The result, waiting for it until `deadline` (none: until it comes).
    fn wait(&self, deadline: Option<Instant>) -> Option<Result<()>> {
        let mut g = self.lock();
        loop {
            if let Some(r) = g.as_ref() {
                return Some(r.clone());
            }
            match deadline {
                None => g = self.done.wait(g).unwrap_or_else(|p| p.into_inner()),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return None;
                    }
                    g = self
                        .done
                        .wait_timeout(g, d - now)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
            }
        }
    }

    fn is_done(&self) -> bool {
        self.lock().is_some()
    }
}

/// Whose call it is: the [`crate::on_behalf`] key.
type Key = Option<Arc<str>>;

/// An operation running on its target.
struct Entry {
    id: u64,
    op: Operation,
    started: Instant,
    cell: Arc<Cell>,
    /// The callers whose deadline passed before the result (each once).
    missed: Vec<Key>,
    /// Who ran it.
    owner: Key,
}

impl Entry {
    fn missed_by(&mut self, who: Key) {
        if !self.missed.contains(&who) {
            self.missed.push(who);
        }
    }
}

/// The successful result of a finished run that callers missed, kept for
/// their retries. It does not hold its target: other operations run there.
/// Only a caller that missed it ever gets it (each once), never another
/// caller (red team 40kept: a kept result shared with other callers
/// answered them after the state had changed through another target).
struct Kept {
    /// The run it is the result of.
    id: u64,
    op: Operation,
    since: Instant,
    /// The callers that may collect it, each charged one of its
    /// [`MAX_KEPT_PER_CALLER`] while it is kept.
    missed: Vec<Key>,
    /// The operation that ran on the target after this one, if any: then
    /// the result no longer says what the target is like, and the callers
    /// that missed it are told so (once) instead of getting it.
    changed_by: Option<&'static str>,
}

#[derive(Default)]
struct Table {
    next_id: u64,
    entries: HashMap<Target, Entry>,
    kept: HashMap<Target, Vec<Kept>>,
}

impl Table {
    /// Drops results kept too long.
    fn expire(&mut self, now: Instant) {
        self.kept.retain(|_, v| {
            v.retain(|k| now.duration_since(k.since) < KEEP);
            !v.is_empty()
        });
    }

    /// Results kept for `who`.
    fn kept_for(&self, who: &Key) -> usize {
        self.kept
            .values()
            .flatten()
            .filter(|k| k.missed.contains(who))
            .count()
    }

    fn kept_len(&self) -> usize {
        self.kept.values().map(Vec::len).sum()
    }

    /// Keep the result of run `id` (`op` on `target`) for the callers in
    /// `missed`: those with [`MAX_KEPT_PER_CALLER`] kept already get none
    /// (their own older ones stay); past [`MAX_KEPT`] in all, the caller
    /// for whom the most are kept loses its oldest, so that callers
    /// flooding the table push out only their own (red team 40kept: 16
    /// callers filled the table, and a victim's result was not kept).
    fn keep(&mut self, target: &Target, id: u64, op: Operation, missed: Vec<Key>, now: Instant) {
        self.expire(now);
        let missed: Vec<Key> = missed
            .into_iter()
            .filter(|w| {
                let ok = self.kept_for(w) < MAX_KEPT_PER_CALLER;
                if !ok {
                    tracing::warn!(%target, %op, caller = w.as_deref().unwrap_or("unknown"), "finished after a caller's deadline; not kept for it: it has as many kept results as it may");
                }
                ok
            })
            .collect();
        if missed.is_empty() {
            return;
        }
        while self.kept_len() >= MAX_KEPT {
            if !self.evict_from_largest() {
                return;
            }
        }
        tracing::info!(%target, %op, "finished after a caller's deadline; the result is kept for a retry");
        self.kept.entry(target.clone()).or_default().push(Kept {
            id,
            op,
            since: now,
            missed,
            changed_by: None,
        });
    }

    /// The caller for whom the most results are kept loses its oldest.
    fn evict_from_largest(&mut self) -> bool {
        let mut counts: HashMap<&Key, usize> = HashMap::new();
        for k in self.kept.values().flatten() {
            for w in &k.missed {
                *counts.entry(w).or_default() += 1;
            }
        }
        let Some(largest) = counts
            .into_iter()
            .max_by_key(|(_, n)| *n)
            .map(|(w, _)| w.clone())
        else {
            return false;
        };
        let oldest = self
            .kept
            .iter()
            .flat_map(|(t, v)| v.iter().map(move |k| (t, k)))
            .filter(|(_, k)| k.missed.contains(&largest))
            .min_by_key(|(_, k)| k.since)
            .map(|(t, k)| (t.clone(), k.id));
        let Some((target, id)) = oldest else {
            return false;
        };
        self.forget(&target, &largest, |k| k.id == id);
        true
    }

    /// Removes the entry of run `id` of `target`, if it is still there.
    fn remove_run(&mut self, target: &Target, id: u64) {
        if self.entries.get(target).is_some_and(|e| e.id == id) {
            self.entries.remove(target);
        }
    }

    /// The answer to `me`'s `op` on `target` from a result kept for it
    /// (`None`: there is none; the call runs).
    fn answer_from_kept(&mut self, target: &Target, op: &Operation, me: &Key) -> Option<Step> {
        let list = self.kept.get_mut(target)?;
        let i = list
            .iter()
            .position(|k| k.op == *op && k.missed.contains(me))?;
        // The retry of a caller that missed it: once.
        let k = &mut list[i];
        k.missed.retain(|m| m != me);
        let step = match k.changed_by {
            None => Step::Collected(Ok(())),
            Some(other) => Step::Changed(format!(
                "{target}: {op} finished (OK) after this caller's deadline, and {other} has run on the target since; its result is not given for a target that changed: check the target's state (the next call runs {op} again)"
            )),
        };
        if k.missed.is_empty() {
            list.remove(i);
        }
        if list.is_empty() {
            self.kept.remove(target);
        }
        Some(step)
    }

    /// `op` of `me` runs on `target`: the results kept there no longer
    /// describe it (`me`'s own are ended: it changes the target itself).
    fn changing(&mut self, target: &Target, op: &Operation, me: &Key) {
        if let Some(list) = self.kept.get_mut(target) {
            for k in list.iter_mut() {
                k.changed_by.get_or_insert(op.method);
            }
        }
        self.forget(target, me, |_| true);
    }

    /// `who` no longer collects the results kept on `target` for which
    /// `which` holds; results nobody may collect any more are dropped.
    fn forget(&mut self, target: &Target, who: &Key, which: impl Fn(&Kept) -> bool) {
        if let Some(list) = self.kept.get_mut(target) {
            for k in list.iter_mut().filter(|k| which(k)) {
                k.missed.retain(|m| m != who);
            }
            list.retain(|k| !k.missed.is_empty());
            if list.is_empty() {
                self.kept.remove(target);
            }
        }
    }

    /// `who`, waiting for run `id` of `op` on `target`, gave up at its
    /// deadline: its retry is to get the result, whether the run is still
    /// going, has just finished and was kept for others, or has just
    /// finished and was kept for nobody (red team 40kept: a deadline that
    /// passed as the run ended left the waiter with nothing kept).
    fn missed_run(&mut self, target: &Target, id: u64, op: &Operation, cell: &Cell, who: Key) {
        if let Some(e) = self.entries.get_mut(target).filter(|e| e.id == id) {
            e.missed_by(who);
            return;
        }
        if let Some(k) = self
            .kept
            .get_mut(target)
            .and_then(|v| v.iter_mut().find(|k| k.id == id))
        {
            if !k.missed.contains(&who) {
                k.missed.push(who);
            }
            return;
        }
        // Finished and kept for nobody: only a success is kept.
        if matches!(cell.lock().as_ref(), Some(Ok(()))) {
            self.keep(target, id, op.clone(), vec![who], Instant::now());
        }
    }
}

/// What became of a call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Calls that ran their operation.
    pub ran: u64,
    /// Calls that joined a running operation.
    pub joined: u64,
    /// Calls that collected a kept result.
    pub collected: u64,
    /// Calls refused because another operation was running.
    pub aborted: u64,
}

/// The operations running (and results kept) per target.
#[derive(Default)]
pub struct Operations {
    table: Mutex<Table>,
    counters: Mutex<Counters>,
}

/// What a call does, decided under the table's lock.
enum Step {
    Run(u64, Arc<Cell>),
    Join(u64, Arc<Cell>, Operation),
    Collected(Result<()>),
    /// A kept result of this caller's, whose target changed since.
    Changed(String),
}

impl Operations {
    pub fn new() -> Self {
        Self::default()
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn count(&self, f: impl FnOnce(&mut Counters)) {
        f(&mut self.counters.lock().unwrap_or_else(|p| p.into_inner()));
    }

    /// What this registry's calls did so far.
    pub fn counters(&self) -> Counters {
        *self.counters.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The operation running on `target`, if any.
    pub fn running(&self, target: &Target) -> Option<Operation> {
        self.table().entries.get(target).map(|e| e.op.clone())
    }

    /// Runs `f` as `op` on `target`, or joins the identical operation
    /// running there, or collects its kept result; a different operation
    /// running there is answered with [`Error::Aborted`].
    pub fn run(&self, target: Target, op: Operation, f: impl FnOnce() -> Result<()>) -> Result<()> {
        let step = {
            let mut t = self.table();
            let now = Instant::now();
            t.expire(now);
            let me = crate::on_behalf::current();
            match t.entries.get(&target) {
                Some(e) if e.op == op => Step::Join(e.id, e.cell.clone(), e.op.clone()),
                Some(e) => {
                    let msg = format!(
                        "{target}: {} is in progress (for {:.1} s); retry when it has finished",
                        e.op,
                        now.duration_since(e.started).as_secs_f64()
                    );
                    drop(t);
                    self.count(|c| c.aborted += 1);
                    return Err(Error::Aborted(msg));
                }
                // Nothing runs there: a kept result answers the call, or
                // the call runs (which a kept result never holds up).
                None => match t.answer_from_kept(&target, &op, &me) {
                    Some(step) => step,
                    None => {
                        t.changing(&target, &op, &me);
                        self.start(&mut t, &target, op.clone(), now)
                    }
                },
            }
        };
        match step {
            Step::Changed(msg) => {
                self.count(|c| c.aborted += 1);
                Err(Error::Aborted(msg))
            }
            Step::Collected(r) => {
                self.count(|c| c.collected += 1);
                tracing::info!(%target, %op, "answered with the result of the same operation, which finished after its caller's deadline");
                r
            }
            Step::Join(id, cell, op) => {
                self.count(|c| c.joined += 1);
                tracing::debug!(%target, %op, "joining the same operation in progress");
                let me = crate::on_behalf::current();
                match cell.wait(deadline::current()) {
                    // Received in time: not kept for this caller any more
                    // (nor at all, unless another caller missed it).
                    Some(r) if !late() => {
                        let mut t = self.table();
                        if let Some(e) = t.entries.get_mut(&target).filter(|e| e.id == id) {
                            e.missed.retain(|m| *m != me);
                        }
                        t.forget(&target, &me, |k| k.op == op);
                        r
                    }
                    // Too late for the client (or past the deadline): the
                    // retry receives it.
                    late_or_none => {
                        self.table().missed_run(&target, id, &op, &cell, me);
                        match late_or_none {
                            Some(r) => r,
                            None => Err(Error::DeadlineExceeded(format!(
                                "{op} on {target} did not finish within the deadline; it goes on, and a retry joins it or receives its result"
                            ))),
                        }
                    }
                }
            }
            Step::Run(id, cell) => {
                self.count(|c| c.ran += 1);
                let guard = RunGuard {
                    ops: self,
                    target: &target,
                    id,
                    cell: &cell,
                };
                let r = f();
                guard.finish(r.clone());
                r
            }
        }
    }

    fn start(&self, t: &mut Table, target: &Target, op: Operation, now: Instant) -> Step {
        t.next_id += 1;
        let id = t.next_id;
        let cell = Arc::new(Cell::default());
        t.entries.insert(
            target.clone(),
            Entry {
                id,
                op,
                started: now,
                cell: cell.clone(),
                missed: Vec::new(),
                owner: crate::on_behalf::current(),
            },
        );
        Step::Run(id, cell)
    }
}

/// Ends a run: its result to the joiners, its entry removed (or kept when
/// its caller's deadline has passed). A panicking operation ends with
/// [`Error::Internal`] for the joiners and keeps nothing.
struct RunGuard<'a> {
    ops: &'a Operations,
    target: &'a Target,
    id: u64,
    cell: &'a Cell,
}

impl RunGuard<'_> {
    fn finish(self, r: Result<()>) {
        let this = std::mem::ManuallyDrop::new(self);
        let mut t = this.ops.table();
        this.cell.finish(r.clone());
        if t.entries.get(this.target).is_none_or(|e| e.id != this.id) {
            return;
        }
        let Some(mut e) = t.entries.remove(this.target) else {
            return;
        };
        if late() {
            e.missed_by(e.owner.clone());
        }
        // Only a success is kept: a failed operation's retry runs it again
        // (red team 40kept: errors of calls on disks that do not exist
        // filled the table, and a kept error answered others after the
        // state had changed). A host-wide Rescan is never kept: a later
        // Rescan asks for the state now (red team 39r2).
        if e.missed.is_empty() || r.is_err() || *this.target == Target::Host {
            return;
        }
        t.keep(this.target, this.id, e.op, e.missed, Instant::now());
    }
}

/// Whether the current call's answer is too late for its client: its
/// deadline has passed, or comes within [`LATE_MARGIN`] (the client's own
/// clock runs ahead of ours by the time a request takes to arrive, and the
/// answer takes as long to go back).
fn late() -> bool {
    deadline::current().is_some_and(|d| Instant::now() + LATE_MARGIN >= d)
}

/// See [`late`].
const LATE_MARGIN: Duration = Duration::from_millis(500);

impl Drop for RunGuard<'_> {
    fn drop(&mut self) {
        // Only reached when the operation panicked.
        let mut t = self.ops.table();
        if !self.cell.is_done() {
            self.cell.finish(Err(Error::Internal(
                "the operation this call joined failed (it panicked)".into(),
            )));
        }
        t.remove_run(self.target, self.id);
    }
}

#[cfg(test)]
mod tests;
