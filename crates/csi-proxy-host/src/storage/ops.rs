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
//!   it answers [`Error::DeadlineExceeded`] while the operation goes on. An
//!   operation that finishes after the deadline of its caller, or of a
//!   caller that joined it, keeps its result for [`KEEP`]: the first
//!   identical call collects it instead of running the operation (and its
//!   tools) a second time; any other call on the target discards it. A
//!   host-wide Rescan is never kept (a later one asks for the state now). Only
//!   a caller that missed the result (by [`crate::on_behalf`] key) may
//!   collect or discard it: another caller's identical call gets the
//!   result and leaves it kept, a different one is answered
//!   [`Error::Aborted`] while it is kept.
//! * Kept results belong to their target and are charged to the caller
//!   that ran the operation ([`crate::on_behalf`]): at most
//!   [`MAX_KEPT_PER_CALLER`] per caller and [`MAX_KEPT`] in all. Past
//!   either bound a new result is not kept; a kept result is never pushed
//!   out by calls on other targets or from other callers (only its
//!   target's next call, or [`KEEP`], ends it).
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

/// At most this many such results are kept per caller, so calls with
/// deadlines too short to be answered cannot grow the table without bound;
/// past it the caller's new results are not kept (its own older ones, and
/// everyone else's, stay).
pub const MAX_KEPT_PER_CALLER: usize = 256;

/// At most this many results are kept in all (many callers' worth).
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

struct Entry {
    id: u64,
    op: Operation,
    started: Instant,
    cell: Arc<Cell>,
    /// Set when the run finished and a caller missed its result: when.
    kept_since: Option<Instant>,
    /// The callers (keys of [`crate::on_behalf`]) whose deadline passed
    /// before the result: only they may collect or discard a kept result.
    missed: Vec<Option<Arc<str>>>,
    /// Who ran it (whose budget a kept result is charged to).
    owner: Option<Arc<str>>,
}

#[derive(Default)]
struct Table {
    next_id: u64,
    entries: HashMap<Target, Entry>,
}

impl Table {
    /// Drops results kept too long.
    fn expire(&mut self, now: Instant) {
        self.entries
            .retain(|_, e| e.kept_since.is_none_or(|t| now.duration_since(t) < KEEP));
    }

    /// Whether one more result of `owner` may be kept.
    fn may_keep(&mut self, owner: &Option<Arc<str>>, now: Instant) -> bool {
        self.expire(now);
        let kept = self.entries.values().filter(|e| e.kept_since.is_some());
        let (mut all, mut own) = (0, 0);
        for e in kept {
            all += 1;
            own += usize::from(e.owner == *owner);
        }
        all < MAX_KEPT && own < MAX_KEPT_PER_CALLER
    }

    /// Removes the entry of run `id` of `target`, if it is still there.
    fn remove_run(&mut self, target: &Target, id: u64) {
        if self.entries.get(target).is_some_and(|e| e.id == id) {
            self.entries.remove(target);
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
        self.table()
            .entries
            .get(target)
            .filter(|e| e.kept_since.is_none())
            .map(|e| e.op.clone())
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
                // A kept result is its missing callers' own: another
                // caller's identical call is answered with it (as if it had
                // joined) and leaves it kept; another caller's different
                // call neither discards it nor runs (the retry would run
                // the operation again).
                Some(e) if e.kept_since.is_some() && !e.missed.contains(&me) && e.op == op => {
                    Step::Collected(e.cell.wait(None).unwrap_or(Ok(())))
                }
                Some(e) if e.kept_since.is_some() && !e.missed.contains(&me) => {
                    let msg = format!(
                        "{target}: the result of {} is kept for the retry of the caller that missed it (for up to {:.0} s more); retry later",
                        e.op,
                        e.kept_since
                            .map_or(KEEP, |k| KEEP.saturating_sub(now.duration_since(k)))
                            .as_secs_f64()
                    );
                    drop(t);
                    self.count(|c| c.aborted += 1);
                    return Err(Error::Aborted(msg));
                }
                Some(e) if e.kept_since.is_some() && e.op == op => {
                    let r = e.cell.wait(None).unwrap_or(Ok(()));
                    t.entries.remove(&target);
                    Step::Collected(r)
                }
                // A kept result of another operation: that caller gave up,
                // and this call changes the target again.
                Some(e) if e.kept_since.is_some() => {
                    t.entries.remove(&target);
                    self.start(&mut t, &target, op.clone(), now)
                }
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
                None => self.start(&mut t, &target, op.clone(), now),
            }
        };
        match step {
            Step::Collected(r) => {
                self.count(|c| c.collected += 1);
                tracing::info!(%target, %op, "answered with the result of the same operation, which finished after its caller's deadline");
                r
            }
            Step::Join(id, cell, op) => {
                self.count(|c| c.joined += 1);
                tracing::debug!(%target, %op, "joining the same operation in progress");
                match cell.wait(deadline::current()) {
                    Some(r) => {
                        // Received: not kept for this caller any more (nor
                        // at all, unless another caller missed it).
                        let me = crate::on_behalf::current();
                        let mut t = self.table();
                        if let Some(e) = t.entries.get_mut(&target).filter(|e| e.id == id) {
                            e.missed.retain(|m| *m != me);
                            if e.missed.is_empty() {
                                t.entries.remove(&target);
                            }
                        }
                        r
                    }
                    None => {
                        if let Some(e) = self.table().entries.get_mut(&target) {
                            if e.id == id {
                                e.missed.push(crate::on_behalf::current());
                            }
                        }
                        Err(Error::DeadlineExceeded(format!(
                        "{op} on {target} did not finish within the deadline; it goes on, and a retry joins it or receives its result"
                    )))
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
                kept_since: None,
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
        this.cell.finish(r);
        let passed = deadline::passed();
        if passed {
            if let Some(e) = t.entries.get_mut(this.target).filter(|e| e.id == this.id) {
                e.missed.push(e.owner.clone());
            }
        }
        // A host-wide Rescan is never kept: a later Rescan asks for the
        // state now, not for what an earlier one saw (red team 39r2: a
        // Rescan kept for one caller answered another's after a disk grew,
        // and the growth was not seen).
        let missed = t
            .entries
            .get(this.target)
            .filter(|e| e.id == this.id && *this.target != Target::Host)
            .map(|e| (!e.missed.is_empty(), e.owner.clone()));
        if let Some((true, owner)) = missed {
            let now = Instant::now();
            let keep = t.may_keep(&owner, now);
            if let Some(e) = t.entries.get_mut(this.target).filter(|e| e.id == this.id) {
                if keep {
                    e.kept_since = Some(now);
                    tracing::info!(target = %this.target, op = %e.op, "finished after a caller's deadline; the result is kept for a retry");
                    return;
                }
                tracing::warn!(target = %this.target, op = %e.op, caller = owner.as_deref().unwrap_or("unknown"), "finished after a caller's deadline; not kept: this caller has as many kept results as it may");
            }
        }
        t.remove_run(this.target, this.id);
    }
}

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
