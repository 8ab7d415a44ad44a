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
//!   caller that joined it, keeps its result for [`KEEP`]: the retry of a
//!   caller that missed it (by [`crate::on_behalf`] key) collects it, once,
//!   instead of running the operation (and its tools) a second time.
//! * A kept result never holds its target: any other call runs as usual
//!   (red team 39r2: a kept result that answered every different call
//!   `Aborted` let a caller hold another's disk for minutes). Once another
//!   operation has run on the target, the kept result no longer describes
//!   it: a caller that missed it is answered [`Error::Aborted`] once,
//!   naming the result and what ran since, and is never answered by
//!   running the operation a second time on that retry; another caller's
//!   identical call is answered with the result only while nothing has run
//!   on the target since. A host-wide Rescan is never kept (a later one
//!   asks for the state now).
//! * Kept results are charged to the caller that ran the operation: at
//!   most [`MAX_KEPT_PER_CALLER`] per caller and [`MAX_KEPT`] in all. Past
//!   either bound a new result is not kept; a kept result is never pushed
//!   out by calls on other targets or from other callers (only [`KEEP`]
//!   ends it, or its collection).
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

/// Whose call it is: the [`crate::on_behalf`] key.
type Key = Option<Arc<str>>;

/// An operation running on its target.
struct Entry {
    id: u64,
    op: Operation,
    started: Instant,
    cell: Arc<Cell>,
    /// The callers whose deadline passed before the result.
    missed: Vec<Key>,
    /// Who ran it (whose budget a kept result is charged to).
    owner: Key,
}

/// The result of a finished run that callers missed, kept for their
/// retries. It does not hold its target: other operations run there.
struct Kept {
    op: Operation,
    result: Result<()>,
    since: Instant,
    /// Only these callers may collect it (each once).
    missed: Vec<Key>,
    owner: Key,
    /// The operation that ran on the target after this one, if any: then
    /// the result no longer says what the target is like. The callers
    /// that missed it are told so (once) instead of getting it, and nobody
    /// else gets it.
    changed_by: Option<Operation>,
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

    /// Whether one more result of `owner` may be kept.
    fn may_keep(&mut self, owner: &Key, now: Instant) -> bool {
        self.expire(now);
        let (mut all, mut own) = (0, 0);
        for k in self.kept.values().flatten() {
            all += 1;
            own += usize::from(k.owner == *owner);
        }
        all < MAX_KEPT && own < MAX_KEPT_PER_CALLER
    }

    /// Removes the entry of run `id` of `target`, if it is still there.
    fn remove_run(&mut self, target: &Target, id: u64) {
        if self.entries.get(target).is_some_and(|e| e.id == id) {
            self.entries.remove(target);
        }
    }

    /// What a call of `me` gets from the results kept on `target` (`None`:
    /// nothing; it runs).
    fn answer_from_kept(&mut self, target: &Target, op: &Operation, me: &Key) -> Option<Step> {
        let list = self.kept.get_mut(target)?;
        let step = if let Some(i) = list
            .iter()
            .position(|k| k.op == *op && k.missed.contains(me))
        {
            // The retry of a caller that missed it: once.
            let k = &mut list[i];
            k.missed.retain(|m| m != me);
            let step = match &k.changed_by {
                None => Step::Collected(k.result.clone()),
                Some(other) => Step::Changed(format!(
                    "{target}: {op} finished ({}) after this caller's deadline, and {other} has run on the target since; its result is not given for a target that changed: check the target's state (the next call runs {op} again)",
                    match &k.result {
                        Ok(()) => "OK".to_string(),
                        Err(e) => format!("failed: {e}"),
                    }
                )),
            };
            if k.missed.is_empty() {
                list.remove(i);
            }
            Some(step)
        } else {
            // Another caller's identical call, while nothing has changed the
            // target since: answered with the result, which stays kept.
            list.iter()
                .find(|k| k.op == *op && k.changed_by.is_none())
                .map(|k| Step::Collected(k.result.clone()))
        };
        if list.is_empty() {
            self.kept.remove(target);
        }
        step
    }

    /// `op` of `me` runs on `target`: the results kept there no longer
    /// describe it (`me`'s own are ended: it changes the target itself).
    fn changing(&mut self, target: &Target, op: &Operation, me: &Key) {
        if let Some(list) = self.kept.get_mut(target) {
            for k in list.iter_mut() {
                k.missed.retain(|m| m != me);
                k.changed_by.get_or_insert_with(|| op.clone());
            }
            list.retain(|k| !k.missed.is_empty());
            if list.is_empty() {
                self.kept.remove(target);
            }
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
                match cell.wait(deadline::current()) {
                    Some(r) => {
                        // Received: not kept for this caller any more (nor
                        // at all, unless another caller missed it).
                        let me = crate::on_behalf::current();
                        let mut t = self.table();
                        if let Some(e) = t.entries.get_mut(&target).filter(|e| e.id == id) {
                            e.missed.retain(|m| *m != me);
                        }
                        if let Some(list) = t.kept.get_mut(&target) {
                            for k in list.iter_mut().filter(|k| k.op == op) {
                                k.missed.retain(|m| *m != me);
                            }
                            list.retain(|k| !k.missed.is_empty());
                            if list.is_empty() {
                                t.kept.remove(&target);
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
        if deadline::passed() {
            e.missed.push(e.owner.clone());
        }
        // A host-wide Rescan is never kept: a later Rescan asks for the
        // state now, not for what an earlier one saw (red team 39r2: a
        // Rescan kept for one caller answered another's after a disk grew,
        // and the growth was not seen).
        if e.missed.is_empty() || *this.target == Target::Host {
            return;
        }
        let now = Instant::now();
        if !t.may_keep(&e.owner, now) {
            tracing::warn!(target = %this.target, op = %e.op, caller = e.owner.as_deref().unwrap_or("unknown"), "finished after a caller's deadline; not kept: this caller has as many kept results as it may");
            return;
        }
        tracing::info!(target = %this.target, op = %e.op, "finished after a caller's deadline; the result is kept for a retry");
        t.kept.entry(this.target.clone()).or_default().push(Kept {
            op: e.op,
            result: r,
            since: now,
            missed: e.missed,
            owner: e.owner,
            changed_by: None,
        });
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
