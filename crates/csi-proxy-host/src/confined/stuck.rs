//! Calls waiting in a file system that does not answer, bounded per caller
//! and mount.
//!
//! A path operation inside a mount whose server or disk hangs (a dead NFS
//! server, a FUSE daemon that stopped, a volume whose LUN lost its paths)
//! blocks its thread until the file system answers, and nothing can cancel
//! it. The server bounds such threads per caller (`caller/jobs.rs`: 64
//! live and 64 past their deadline), but a driver that retries calls into
//! one hung mount would spend that whole budget there, and then be locked
//! out of its other volumes too (red team 39r2 F4).
//!
//! So every blocking confined operation is entered here, keyed by its
//! caller ([`crate::on_behalf`]) and the file systems its lookup passes
//! through ([`Tree::charged`]): the mounts a lookup of the path's real
//! location reaches, taken from the mount *tree* (at each level the
//! mount on top, never one a later mount hides: red team 41mount N2),
//! below the mount of its allowed root. It is counted in each file system
//! of that chain other than the root's own (the root's own only when the
//! path stays in it): an operation that hangs in a mount over part of
//! the kubelet dir is charged to that mount, never to the kubelet dir,
//! whatever is mounted below it. Bind mounts of one file system are one
//! key (the device; red team 40mount).
//!
//! A caller may have [`RUNNING_PER_FS`] operations running in one file
//! system; an operation still running [`SLOW_AFTER`] after it started, or
//! past its call's deadline, counts as stuck, and while
//! [`STUCK_PER_MOUNT`] are stuck there, the caller's next operations there
//! are answered [`Error::Unavailable`] at once, naming the mount, without
//! touching it. Its other file systems, and every other caller, are not
//! affected (the server also moves a job running [`SLOW_AFTER`] out of the
//! caller's live budget, `caller/jobs.rs`: calls stuck in a few hung file
//! systems leave the caller its healthy ones, red team 41mount N1).
//!
//! An operation that follows a final link into another file system (a
//! Mkdir on a link, which looks at the link's destination) is moved to
//! that file system's keys while it works there, and back after: it is
//! counted where it waits, not where the link is (red team 41mount N3).
//! Nested operations on the same file systems are one entry.

use crate::error::{Error, Result};
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// An operation running this long counts as stuck (path operations take
/// milliseconds; a long tree removal counts, but only eight of one caller
/// at once in one mount refuse the next).
pub const SLOW_AFTER: Duration = Duration::from_secs(2);

/// Stuck operations of one caller in one file system before its next ones
/// there are refused at once.
pub const STUCK_PER_MOUNT: usize = 8;

/// Operations of one caller running in one file system at once, at most:
/// a quarter of a caller's live jobs (`caller/jobs.rs`), so a burst into
/// file systems that hang (all in before any counts as stuck, red team
/// 40mount) leaves it half of them with two such file systems, and
/// [`SLOW_AFTER`] later all of them (the server then counts those jobs as
/// stuck).
pub const RUNNING_PER_FS: usize = 16;

/// Operations stuck (as [`STUCK_PER_MOUNT`] counts them) in all file
/// systems for all callers together, past which no caller may start one
/// more in a file system where one of its own is stuck: half of the jobs
/// the server admits in all (`caller/jobs.rs` `ADMIT_ALL`), so callers
/// that each stay within their own bounds, paced (a pod may hold 128
/// threads in eight hung file systems), cannot together take the
/// admission every other caller needs (red team 43mount G2). A caller
/// with nothing stuck there is let in: a file system is never refused to
/// everyone on one caller's slow operations (44final). Bursts that enter
/// before anything counts as stuck are bounded per caller only.
pub const STUCK_IN_ALL: usize = 176;

/// The device standing for "not known" when the mount table cannot be
/// read: every operation of the caller is then one key (bounded, not
/// let in uncounted).
pub const UNKNOWN_DEVICE: u64 = u64::MAX;

/// One mount of a mount table, as [`Tree`] needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountRow {
    pub id: u32,
    /// The mount it is mounted on.
    pub parent: u32,
    /// Its mount point.
    pub point: PathBuf,
    /// Its file system's device (bind mounts of one file system share it).
    pub dev: u64,
}

/// A mount table as the tree the kernel walks.
#[derive(Debug, Default)]
pub struct Tree {
    rows: Vec<MountRow>,
    /// Mounts whose parent is not in the table (the namespace's top).
    top: Vec<usize>,
    children: Vec<Vec<usize>>,
}

impl Tree {
    /// The tree of `rows` (in mount-table order).
    pub fn new(rows: Vec<MountRow>) -> Tree {
        let at: HashMap<u32, usize> = rows.iter().enumerate().map(|(i, r)| (r.id, i)).collect();
        let mut children = vec![Vec::new(); rows.len()];
        let mut top = Vec::new();
        for (i, r) in rows.iter().enumerate() {
            match at.get(&r.parent) {
                Some(&p) if p != i => children[p].push(i),
                _ => top.push(i),
            }
        }
        Tree {
            rows,
            top,
            children,
        }
    }

    /// The mounts a lookup of `path` (absolute, without links) passes
    /// through, top first: at each level, of the mounts on the one
    /// reached whose mount point is at or above `path` (by whole
    /// components), the shallowest (a mount hides those mounted under its
    /// mount point before it), of several at one point the last.
    pub fn chain(&self, path: &Path) -> Vec<&MountRow> {
        self.descend(Vec::new(), &self.top, path, None)
    }

    /// [`Tree::chain`] from the mount `out` ends on (whose mounts are
    /// `level`), those at `skip` left out at the first level.
    fn descend<'a>(
        &'a self,
        mut out: Vec<&'a MountRow>,
        mut level: &'a Vec<usize>,
        path: &Path,
        mut skip: Option<&Path>,
    ) -> Vec<&'a MountRow> {
        let mut seen = 0;
        loop {
            let next = level
                .iter()
                .copied()
                .filter(|&i| path.starts_with(&self.rows[i].point))
                .filter(|&i| skip.is_none_or(|s| !s.starts_with(&self.rows[i].point)))
                .min_by_key(|&i| (self.rows[i].point.components().count(), usize::MAX - i));
            skip = None;
            let Some(i) = next else { break };
            // A mount on the same point covers the one reached: the
            // lookup goes straight to the top one.
            if out
                .last()
                .is_some_and(|m: &&MountRow| m.point == self.rows[i].point)
            {
                out.pop();
            }
            out.push(&self.rows[i]);
            level = &self.children[i];
            seen += 1;
            if seen > self.rows.len() {
                break;
            }
        }
        out
    }

    /// The file systems an operation at `full` (the real location,
    /// absolute, without links) under the allowed root whose real location
    /// is `root` is counted in: each of the chain's below the root's mount
    /// other than the root's own file system; the root's own when there is
    /// none. With each, the mount point it is named by. Empty when the
    /// table has nothing at or above `full`.
    pub fn charged(&self, root: &Path, full: &Path) -> Vec<(PathBuf, u64)> {
        let chain = self.chain(full);
        let Some(base) = chain.iter().rposition(|m| root.starts_with(&m.point)) else {
            return chain
                .last()
                .map(|m| vec![(m.point.clone(), m.dev)])
                .unwrap_or_default();
        };
        Self::count(&chain, base)
    }

    /// [`Tree::charged`] for a root whose handle is on the mount of id
    /// `root_mount`: the lookup starts there, whatever has been mounted
    /// over the root (or a parent of it) since the handle was opened (red
    /// team 42mount F1: a bind over the kubelet dir hid the mount the
    /// handle is on, and a text walk from the top missed the hung mount
    /// below it). Mounts at or above the root on that mount are not
    /// crossed by a lookup from the handle. `None`: no such mount.
    pub fn charged_below(
        &self,
        root_mount: u32,
        root: &Path,
        full: &Path,
    ) -> Option<Vec<(PathBuf, u64)>> {
        let i = self.rows.iter().position(|r| r.id == root_mount)?;
        let chain = self.descend(vec![&self.rows[i]], &self.children[i], full, Some(root));
        Some(Self::count(&chain, 0))
    }

    /// What `chain` charges below its mount `base`, the root's.
    fn count(chain: &[&MountRow], base: usize) -> Vec<(PathBuf, u64)> {
        let own = chain[base].dev;
        let mut out: Vec<(PathBuf, u64)> = Vec::new();
        for m in &chain[base + 1..] {
            if m.dev != own && !out.iter().any(|(_, d)| *d == m.dev) {
                out.push((m.point.clone(), m.dev));
            }
        }
        if out.is_empty() {
            out.push((chain[base].point.clone(), own));
        }
        out
    }
}

type Key = (Option<Arc<str>>, u64);

#[derive(Default)]
struct Table {
    next: u64,
    /// Per caller and file system: each operation's id and when it counts
    /// as stuck.
    running: HashMap<Key, Vec<(u64, Instant)>>,
}

/// Why an entry was refused: which of its keys, and how many operations
/// are stuck there.
type Refused = (usize, usize);

impl Table {
    /// May one more operation enter each of `keys` at `now`? `Err`: the
    /// first that refuses it.
    fn check(&self, keys: &[Key], now: Instant) -> Result<(), Refused> {
        let stuck_in_all: usize = self
            .running
            .values()
            .map(|l| l.iter().filter(|(_, at)| *at <= now).count())
            .sum();
        for (i, key) in keys.iter().enumerate() {
            let Some(list) = self.running.get(key) else {
                continue;
            };
            let stuck = list.iter().filter(|(_, at)| *at <= now).count();
            if stuck >= STUCK_PER_MOUNT || list.len() >= RUNNING_PER_FS {
                return Err((i, stuck));
            }
            // Past the bound for all, a caller with an operation stuck
            // here starts no other here; one with none is let in (red team
            // 44final: one caller's slow tree removal in the kubelet dir
            // had it refused to every caller).
            if stuck > 0 && stuck_in_all >= STUCK_IN_ALL {
                return Err((i, usize::MAX));
            }
        }
        Ok(())
    }

    /// Enter `keys` at `now`; an operation past `deadline` (or
    /// [`SLOW_AFTER`]) is stuck.
    fn enter(
        &mut self,
        keys: &[Key],
        now: Instant,
        deadline: Option<Instant>,
    ) -> Result<(u64, Instant), Refused> {
        self.check(keys, now)?;
        self.next += 1;
        let slow = now + SLOW_AFTER;
        let at = deadline.map_or(slow, |d| d.min(slow));
        for key in keys {
            self.running
                .entry(key.clone())
                .or_default()
                .push((self.next, at));
        }
        Ok((self.next, at))
    }

    fn leave(&mut self, keys: &[Key], id: u64) {
        for key in keys {
            if let Some(list) = self.running.get_mut(key) {
                list.retain(|(i, _)| *i != id);
                if list.is_empty() {
                    self.running.remove(key);
                }
            }
        }
    }

    /// Move operation `id` from `from` to `to` (checked against `to`'s
    /// bounds when `check`).
    fn shift(
        &mut self,
        from: &[Key],
        to: &[Key],
        id: u64,
        at: Instant,
        check: Option<Instant>,
    ) -> Result<(), Refused> {
        let new: Vec<Key> = to.iter().filter(|k| !from.contains(k)).cloned().collect();
        if let Some(now) = check {
            self.check(&new, now)
                .map_err(|(i, n)| (to.iter().position(|k| *k == new[i]).unwrap_or(0), n))?;
        }
        let gone: Vec<Key> = from.iter().filter(|k| !to.contains(k)).cloned().collect();
        self.leave(&gone, id);
        for key in new {
            self.running.entry(key).or_default().push((id, at));
        }
        Ok(())
    }
}

fn table() -> std::sync::MutexGuard<'static, Table> {
    static TABLE: std::sync::LazyLock<Mutex<Table>> =
        std::sync::LazyLock::new(|| Mutex::new(Table::default()));
    TABLE.lock().unwrap_or_else(|p| p.into_inner())
}

/// The entry this thread is working under.
struct Active {
    keys: Vec<Key>,
    id: u64,
    at: Instant,
}

thread_local! {
    static ACTIVE: RefCell<Option<Active>> = const { RefCell::new(None) };
}

enum Entered {
    None,
    Outer(Vec<Key>, u64),
    /// A nested operation moved the entry from the first keys to the
    /// second.
    Moved(Vec<Key>, Vec<Key>, u64, Instant),
}

/// An operation entered ([`enter`]); leaves (or moves back) on drop.
#[must_use]
pub struct Guard(Entered);

impl Guard {
    /// No entry (an inline attempt, a nested operation, no mount known).
    pub fn none() -> Guard {
        Guard(Entered::None)
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        match std::mem::replace(&mut self.0, Entered::None) {
            Entered::None => {}
            Entered::Outer(keys, id) => {
                table().leave(&keys, id);
                ACTIVE.with(|a| *a.borrow_mut() = None);
            }
            Entered::Moved(from, to, id, at) => {
                let _ = table().shift(&to, &from, id, at, None);
                ACTIVE.with(|a| {
                    if let Some(a) = a.borrow_mut().as_mut() {
                        a.keys = from;
                    }
                });
            }
        }
    }
}

/// Enter an operation counted in the file systems `charged` (mount point
/// and device, [`Tree::charged`]; empty: not counted) for the current
/// caller; refused while [`STUCK_PER_MOUNT`] of its operations are stuck
/// in one of them, or [`RUNNING_PER_FS`] run there. Inside another
/// operation of this thread: one entry, moved to these file systems
/// while this one runs when they differ.
pub fn enter(charged: &[(PathBuf, u64)]) -> Result<Guard> {
    if charged.is_empty() {
        return Ok(Guard::none());
    }
    let who = crate::on_behalf::current();
    let keys: Vec<Key> = charged.iter().map(|(_, d)| (who.clone(), *d)).collect();
    let now = Instant::now();
    let outer = ACTIVE.with(|a| a.borrow().as_ref().map(|a| (a.keys.clone(), a.id, a.at)));
    let entered = match outer {
        Some((from, _, _)) if same(&from, &keys) => return Ok(Guard::none()),
        Some((from, id, at)) => {
            let mut t = table();
            t.shift(&from, &keys, id, at, Some(now))
                .map(|()| Entered::Moved(from, keys.clone(), id, at))
        }
        None => {
            let mut t = table();
            t.enter(&keys, now, crate::deadline::current())
                .map(|(id, at)| {
                    ACTIVE.with(|a| {
                        *a.borrow_mut() = Some(Active {
                            keys: keys.clone(),
                            id,
                            at,
                        })
                    });
                    Entered::Outer(keys.clone(), id)
                })
        }
    };
    match entered {
        Ok(e) => {
            if matches!(e, Entered::Moved(..)) {
                ACTIVE.with(|a| {
                    if let Some(a) = a.borrow_mut().as_mut() {
                        a.keys = keys;
                    }
                });
            }
            Ok(Guard(e))
        }
        Err((i, stuck)) => {
            let shown = crate::path::shown(&charged[i].0.to_string_lossy());
            Err(Error::Unavailable(if stuck == usize::MAX {
                format!(
                    "the file system mounted at {shown} does not answer, and calls stuck in file systems that do not answer have reached the proxy's bound ({STUCK_IN_ALL}); retry later"
                )
            } else if stuck < STUCK_PER_MOUNT {
                format!(
                    "the file system mounted at {shown} has {RUNNING_PER_FS} calls of this caller in progress; retry when some have finished"
                )
            } else {
                format!(
                    "the file system mounted at {shown} does not answer: {stuck} earlier calls of this caller are still waiting in it; retry later"
                )
            }))
        }
    }
}

fn same(a: &[Key], b: &[Key]) -> bool {
    a.len() == b.len() && a.iter().all(|k| b.contains(k))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(who: &str, dev: u64) -> Vec<Key> {
        vec![(Some(Arc::from(who)), dev)]
    }

    fn id(t: &mut Table, k: &[Key], now: Instant) -> u64 {
        t.enter(k, now, None).unwrap().0
    }

    #[test]
    fn a_caller_stuck_in_one_mount_is_refused_there_only() {
        let mut t = Table::default();
        let now = Instant::now();
        let hung = key("driver", 77);
        let mut ids = Vec::new();
        for _ in 0..STUCK_PER_MOUNT {
            ids.push(id(&mut t, &hung, now));
        }
        // Not stuck yet: more may start.
        let extra = id(&mut t, &hung, now);
        t.leave(&hung, extra);
        let later = now + SLOW_AFTER;
        assert_eq!(t.enter(&hung, later, None), Err((0, STUCK_PER_MOUNT)));
        // Its other mounts, and other callers in this one, are not held.
        id(&mut t, &key("driver", 8), later);
        id(&mut t, &key("other", 77), later);
        // One answers: the next may go in.
        t.leave(&hung, ids.pop().unwrap());
        id(&mut t, &hung, later);
    }

    #[test]
    fn callers_together_stop_at_the_process_bound_in_file_systems_that_hang() {
        // Red team 43mount G2: three pods, each within its own bounds (16
        // in each of eight hung file systems), took the whole admission.
        let mut t = Table::default();
        let now = Instant::now();
        let past = Some(now);
        let mut n = 0;
        'fill: for pod in 0..10 {
            for dev in 0..8 {
                for _ in 0..STUCK_PER_MOUNT {
                    if n == STUCK_IN_ALL {
                        break 'fill;
                    }
                    t.enter(&key(&format!("pod{pod}"), 100 + dev), now, past)
                        .unwrap();
                    n += 1;
                }
            }
        }
        // A caller with one stuck there starts no other there...
        t.running
            .entry(key("pod0", 200).remove(0))
            .or_default()
            .push((u64::MAX, now));
        assert_eq!(t.enter(&key("pod0", 200), now, None), Err((0, usize::MAX)));
        // ...while a caller with nothing stuck there is let in, there and
        // in the kubelet dir's file system where another's slow operation
        // counts as stuck (red team 44final).
        t.enter(&key("late", 100), now, None).unwrap();
        t.enter(&key("late", 200), now, None).unwrap();
        t.enter(&key("late", 5), now, None).unwrap();
    }

    #[test]
    fn a_deadline_sooner_than_slow_after_makes_it_stuck_sooner() {
        let mut t = Table::default();
        let now = Instant::now();
        let k = key("d", 5);
        let soon = Some(now + Duration::from_millis(10));
        for _ in 0..STUCK_PER_MOUNT {
            t.enter(&k, now, soon).unwrap();
        }
        assert!(t.enter(&k, now + Duration::from_millis(10), None).is_err());
    }

    #[test]
    fn a_burst_into_one_file_system_is_bounded_before_anything_is_stuck() {
        // Red team 40mount F1: 90 calls at once all went in (64 threads in
        // a hung mount) before any counted as stuck.
        let mut t = Table::default();
        let now = Instant::now();
        let hung = key("driver", 77);
        for _ in 0..RUNNING_PER_FS {
            id(&mut t, &hung, now);
        }
        assert_eq!(t.enter(&hung, now, None), Err((0, 0)));
        id(&mut t, &key("driver", 8), now);
    }

    #[test]
    fn an_entry_in_two_file_systems_is_refused_by_either() {
        let mut t = Table::default();
        let now = Instant::now();
        let hung = key("driver", 77);
        for _ in 0..STUCK_PER_MOUNT {
            t.enter(&hung, now, Some(now)).unwrap();
        }
        let both = vec![key("driver", 5).remove(0), hung[0].clone()];
        assert_eq!(t.enter(&both, now, None), Err((1, STUCK_PER_MOUNT)));
        // Refused entries hold nothing.
        assert!(!t.running.contains_key(&both[0]));
    }

    fn row(id: u32, parent: u32, point: &str, dev: u64) -> MountRow {
        MountRow {
            id,
            parent,
            point: PathBuf::from(point),
            dev,
        }
    }

    fn devs(tree: &Tree, root: &str, p: &str) -> Vec<u64> {
        tree.charged(Path::new(root), Path::new(p))
            .into_iter()
            .map(|(_, d)| d)
            .collect()
    }

    const K: &str = "/var/lib/kubelet";

    #[test]
    fn the_mount_reached_by_whole_components() {
        let tree = Tree::new(vec![
            row(1, 0, "/", 1),
            row(2, 1, K, 2),
            row(3, 2, "/var/lib/kubelet/pods/a/volumes/v", 3),
            row(4, 2, "/var/lib/kubelet/pods/a/volumes/vv", 4),
        ]);
        assert_eq!(devs(&tree, K, "/var/lib/kubelet/pods/a/volumes/v/x"), [3]);
        assert_eq!(devs(&tree, K, "/var/lib/kubelet/pods/a/volumes/vvv"), [2]);
        assert_eq!(devs(&tree, K, K), [2]);
        // Mounts above the root are not counted: its lookups start below.
        assert_eq!(
            devs(&tree, "/var/lib/kubelet/pods", "/var/lib/kubelet/pods/b"),
            [2]
        );
    }

    #[test]
    fn stacked_mounts_the_one_on_top() {
        // A mount on a mount point is a child of the one it covers.
        let tree = Tree::new(vec![
            row(1, 0, "/", 1),
            row(2, 1, "/m", 2),
            row(3, 2, "/m", 3),
        ]);
        assert_eq!(devs(&tree, "/", "/m/x"), [3]);
    }

    #[test]
    fn a_mount_hidden_by_a_later_mount_above_it_is_never_the_key() {
        // Red team 41mount N2: pods/sh/sub a bind of the kubelet fs, then
        // a hung FUSE over pods/sh: a call at pods/sh/sub/x waits in the
        // FUSE, and was charged to the kubelet fs.
        let tree = Tree::new(vec![
            row(1, 0, "/", 1),
            row(20, 1, "/var/lib/kubelet/pods/sh/sub", 1),
            row(21, 1, "/var/lib/kubelet/pods/sh", 40),
        ]);
        assert_eq!(devs(&tree, K, "/var/lib/kubelet/pods/sh/sub/x"), [40]);
        assert_eq!(devs(&tree, K, "/var/lib/kubelet/pods/mine"), [1]);
    }

    #[test]
    fn a_mount_under_a_hung_one_is_charged_to_both_never_to_the_root() {
        // A bind of the kubelet fs mounted inside a FUSE: its lookups pass
        // through the FUSE (which may ask its daemon), so they count there.
        let tree = Tree::new(vec![
            row(1, 0, "/", 1),
            row(21, 1, "/var/lib/kubelet/pods/h", 40),
            row(22, 21, "/var/lib/kubelet/pods/h/sub", 1),
            row(23, 21, "/var/lib/kubelet/pods/h/other", 7),
        ]);
        assert_eq!(devs(&tree, K, "/var/lib/kubelet/pods/h/sub/x"), [40]);
        assert_eq!(devs(&tree, K, "/var/lib/kubelet/pods/h/other/x"), [40, 7]);
    }

    #[test]
    fn a_lookup_starts_on_the_mount_the_roots_handle_is_on() {
        // Red team 42mount F1: the handle was opened, then the kubelet dir
        // bound over itself: the tree's top path at it no longer holds
        // the hung mount below, but lookups from the handle reach it.
        let tree = Tree::new(vec![
            row(27, 1, "/", 1),
            row(43, 27, "/var/lib/kubelet/pods/hung", 40),
            row(44, 27, K, 1),
        ]);
        let hung = Path::new("/var/lib/kubelet/pods/hung/x");
        let below = |p: &str| {
            tree.charged_below(27, Path::new(K), Path::new(p))
                .unwrap()
                .into_iter()
                .map(|(_, d)| d)
                .collect::<Vec<_>>()
        };
        assert_eq!(below(hung.to_str().unwrap()), [40]);
        assert_eq!(below("/var/lib/kubelet/pods/mine"), [1]);
        // By the text from the top, the bind hides it.
        assert_eq!(devs(&tree, K, hung.to_str().unwrap()), [1]);
        // A handle on the bind itself sees what the bind holds.
        assert!(tree.charged_below(44, Path::new(K), hung).unwrap() == vec![(PathBuf::from(K), 1)]);
        assert_eq!(tree.charged_below(99, Path::new(K), hung), None);
    }

    #[test]
    fn a_table_without_the_path_charges_nothing_and_the_caller_uses_the_unknown_key() {
        let tree = Tree::new(vec![row(1, 0, "/elsewhere", 1)]);
        assert!(devs(&tree, K, "/var/lib/kubelet/x").is_empty());
    }

    #[test]
    fn a_parent_cycle_ends() {
        let tree = Tree::new(vec![row(1, 2, "/", 1), row(2, 1, "/", 2)]);
        assert!(tree.chain(Path::new("/x")).len() <= 2);
    }

    #[test]
    fn nested_operations_are_one_entry_and_a_hop_into_another_file_system_moves_it() {
        let m = |dev| vec![(PathBuf::from("/nested-test-mount"), dev)];
        let count = |dev| {
            table()
                .running
                .iter()
                .filter(|((_, d), _)| *d == dev)
                .map(|(_, l)| l.len())
                .sum::<usize>()
        };
        let g = enter(&m(4_000_001)).unwrap();
        assert!(matches!(g.0, Entered::Outer(..)));
        let inner = enter(&m(4_000_001)).unwrap();
        assert!(matches!(inner.0, Entered::None));
        drop(inner);
        // A hop into another file system: counted there, not here, while
        // it works there (red team 41mount N3).
        let hop = enter(&m(4_000_002)).unwrap();
        assert_eq!((count(4_000_001), count(4_000_002)), (0, 1));
        drop(hop);
        assert_eq!((count(4_000_001), count(4_000_002)), (1, 0));
        drop(g);
        assert!(ACTIVE.with(|a| a.borrow().is_none()));
        assert_eq!((count(4_000_001), count(4_000_002)), (0, 0));
    }

    #[test]
    fn a_hop_into_a_file_system_where_the_caller_is_stuck_is_refused() {
        let m = |dev| vec![(PathBuf::from("/hop-test-mount"), dev)];
        let past = Instant::now() - Duration::from_millis(1);
        let hung = vec![(crate::on_behalf::current(), 4_000_012)];
        {
            let mut t = table();
            for _ in 0..STUCK_PER_MOUNT {
                t.enter(&hung, past, Some(past)).unwrap();
            }
        }
        let g = enter(&m(4_000_011)).unwrap();
        assert!(matches!(enter(&m(4_000_012)), Err(Error::Unavailable(_))));
        drop(g);
        table().running.remove(&hung[0]);
    }
}
