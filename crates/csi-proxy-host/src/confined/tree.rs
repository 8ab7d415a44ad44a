//! Iterative removal of a directory tree over directory handles, the same
//! algorithm on every OS ([`TreeOps`] is the OS part).
//!
//! No recursion: the path from the top directory to the one being emptied
//! is an explicit stack of frames (the directory's identity, its name in
//! its parent, and its handle while it is among the [`TreeOps::WINDOW`]
//! deepest). A directory is listed from its start, its non-directory
//! entries are unlinked, and the first subdirectory is descended into; an
//! empty directory is removed from its parent and the walk goes back up.
//! A parent whose handle was closed is reopened from the child
//! ([`TreeOps::parent`]) and must have the identity recorded on the way
//! down, so a tree moved during the walk stops it ([`TreeError::Moved`]).
//!
//! Bounds ([`Limits`]): depth, bytes of names held on the stack, entries
//! processed (against a client that keeps adding entries while it is
//! emptied); and open handles ([`TreeOps::WINDOW`] + 1). Entries are never followed: a link is
//! unlinked as a file, and a subdirectory that is a mount point stops the
//! walk ([`TreeError::MountPoint`]) before anything inside it is touched.

use std::io;

/// Bounds of one removal.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Deepest level descended into.
    pub depth: usize,
    /// Entries processed before giving up.
    pub ops: u64,
    /// Bytes of entry names the stack may hold (depth × name length).
    pub name_bytes: usize,
}

impl Limits {
    /// What the server uses.
    pub const DEFAULT: Limits = Limits {
        depth: super::MAX_TREE_DEPTH,
        ops: 1 << 24,
        name_bytes: 8 << 20,
    };
}

/// Names read per listing.
const BATCH: usize = 128;

/// Listings in a row that find again the first entry the one before
/// removed, before the removal stops: an entry whose delete takes effect
/// only when the last handle closes (Windows' classic disposition: wine,
/// Windows before 1809, FAT) stays listed while another process holds it.
const STALLED_LISTINGS: u32 = 8;

/// What a listing says about an entry before it is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hint {
    Dir,
    NotDir,
    Unknown,
}

/// A subdirectory opened for removal.
pub enum Sub<D> {
    Dir(D),
    /// Not a directory (a file or a link: unlink it).
    NotADir,
    /// Nothing of that name any more.
    Gone,
    /// A mount point (or a Windows volume mount point): never crossed.
    MountPoint,
}

/// Why a removal stopped.
#[derive(Debug)]
pub enum TreeError {
    TooDeep,
    TooMuchWork,
    Moved,
    MountPoint,
    /// An OS call failed on `entry`: the components below the top
    /// directory of the entry it was about (empty: the top itself).
    Io {
        op: &'static str,
        entry: Vec<String>,
        err: io::Error,
    },
}

/// The names of the directories from below the top down to the deepest.
fn stack_names<D, N>(stack: &[Frame<D, N>], show: impl Fn(&N) -> String) -> Vec<String> {
    stack
        .iter()
        .filter_map(|f| f.name.as_ref())
        .map(show)
        .collect()
}

/// An error of `op` on the entry `name` of the deepest directory (`None`:
/// that directory itself).
fn io_at<'a, O: TreeOps>(
    op: &'static str,
    stack: &'a [Frame<O::Dir, O::Name>],
    name: Option<&'a O::Name>,
) -> impl FnOnce(io::Error) -> TreeError + 'a {
    move |err| {
        let mut entry = stack_names(stack, O::show);
        entry.extend(name.map(O::show));
        TreeError::Io { op, entry, err }
    }
}

/// The OS operations of a removal, all relative to open directory handles.
pub trait TreeOps {
    type Dir;
    type Name: Clone + PartialEq;

    /// How many of the deepest directories stay open; shallower ones are
    /// closed and reopened with [`TreeOps::parent`] on the way back up.
    /// `None`: all stay open (the OS cannot reopen a parent).
    const WINDOW: Option<usize>;

    /// Identity of an open directory (device and inode, or volume serial
    /// and file id).
    fn id(&self, dir: &Self::Dir) -> io::Result<(u64, u64)>;
    /// Up to `max` entries of `dir` from its start (`.` and `..` left out).
    fn list(
        &self,
        dir: &mut Self::Dir,
        out: &mut Vec<(Self::Name, Hint)>,
        max: usize,
    ) -> io::Result<()>;
    /// Remove the non-directory entry `name`: `Ok(true)` when it is gone
    /// (removed now or already), `Ok(false)` when it is a directory.
    fn unlink(&self, dir: &Self::Dir, name: &Self::Name) -> io::Result<bool>;
    /// Open the subdirectory `name` without following a link or crossing a
    /// mount.
    fn open_subdir(&self, dir: &Self::Dir, name: &Self::Name) -> io::Result<Sub<Self::Dir>>;
    /// Remove the empty subdirectory `name`.
    fn rmdir(&self, dir: &Self::Dir, name: &Self::Name) -> io::Result<()>;
    /// Open the directory that contains `dir` now.
    fn parent(&self, dir: &Self::Dir) -> io::Result<Self::Dir>;
    /// Bytes a name takes.
    fn name_len(name: &Self::Name) -> usize;
    /// A name as text, for messages (lossy).
    fn show(name: &Self::Name) -> String;
}

struct Frame<D, N> {
    dir: Option<D>,
    id: (u64, u64),
    /// The name in the parent (none for the top directory).
    name: Option<N>,
}

/// Remove everything inside `top`, keeping `top` itself.
pub fn remove_contents<O: TreeOps>(ops: &O, top: O::Dir, limits: &Limits) -> Result<(), TreeError> {
    let id = ops.id(&top).map_err(io_at::<O>("stat", &[], None))?;
    let mut stack: Vec<Frame<O::Dir, O::Name>> = vec![Frame {
        dir: Some(top),
        id,
        name: None,
    }];
    let mut batch: Vec<(O::Name, Hint)> = Vec::with_capacity(BATCH);
    let mut work: u64 = 0;
    let mut name_bytes: usize = 0;
    // The first entry of the last listing, all of whose entries were
    // removed, and how many listings in a row found it again.
    let mut stalled: Option<(O::Name, u32)> = None;
    loop {
        let (frame, above) = stack
            .split_last_mut()
            .expect("the top frame is never popped");
        let dir = frame.dir.as_mut().expect("the deepest frame is open");
        // An entry of the deepest directory (`None`: that directory), for
        // an error's message.
        let at = |name: Option<&O::Name>| {
            let mut entry = stack_names(above, O::show);
            entry.extend(frame.name.as_ref().map(O::show));
            entry.extend(name.map(O::show));
            entry
        };
        batch.clear();
        if let Err(err) = ops.list(dir, &mut batch, BATCH) {
            let entry = at(None);
            return Err(TreeError::Io {
                op: "list",
                entry,
                err,
            });
        }
        let listed = !batch.is_empty();
        let first = batch.first().map(|(n, _)| n.clone());
        let mut unlinked_all = true;
        let mut descend = None;
        for (name, hint) in batch.drain(..) {
            work += 1;
            if work > limits.ops {
                return Err(TreeError::TooMuchWork);
            }
            let unlinked = match hint {
                Hint::Dir => false,
                _ => ops.unlink(dir, &name).map_err(|err| TreeError::Io {
                    op: "unlink",
                    entry: at(Some(&name)),
                    err,
                })?,
            };
            if unlinked {
                continue;
            }
            unlinked_all = false;
            let sub = ops.open_subdir(dir, &name).map_err(|err| TreeError::Io {
                op: "open",
                entry: at(Some(&name)),
                err,
            })?;
            match sub {
                Sub::Gone => {}
                // Swapped for a file or link since it was listed: the next
                // listing sees it again and unlinks it.
                Sub::NotADir => {}
                Sub::MountPoint => return Err(TreeError::MountPoint),
                Sub::Dir(d) => {
                    descend = Some((d, name));
                    break;
                }
            }
        }
        stalled = match (first, unlinked_all && descend.is_none()) {
            (Some(f), true) => match stalled {
                Some((s, n)) if s == f => {
                    if n + 1 >= STALLED_LISTINGS {
                        return Err(TreeError::Io {
                            op: "unlink",
                            entry: at(Some(&f)),
                            err: io::Error::new(
                                io::ErrorKind::ResourceBusy,
                                "deleted, but still there: another process has it open; try again once it is closed",
                            ),
                        });
                    }
                    Some((s, n + 1))
                }
                _ => Some((f, 1)),
            },
            _ => None,
        };
        if let Some((d, name)) = descend {
            if stack.len() > limits.depth {
                return Err(TreeError::TooDeep);
            }
            name_bytes += O::name_len(&name);
            if name_bytes > limits.name_bytes {
                return Err(TreeError::TooDeep);
            }
            let id = ops
                .id(&d)
                .map_err(io_at::<O>("stat", &stack, Some(&name)))?;
            stack.push(Frame {
                dir: Some(d),
                id,
                name: Some(name),
            });
            if let Some(w) = O::WINDOW {
                if stack.len() > w {
                    let i = stack.len() - w - 1;
                    stack[i].dir = None;
                }
            }
            continue;
        }
        if listed {
            // Everything listed was removed: list again until empty.
            continue;
        }
        // The deepest directory is empty.
        if stack.len() == 1 {
            return Ok(());
        }
        let child = stack.pop().expect("more than one frame");
        let child_name = child.name.expect("only the top frame has no name");
        name_bytes -= O::name_len(&child_name);
        let parent = stack.len() - 1;
        if stack[parent].dir.is_none() {
            let child_dir = child.dir.as_ref().expect("the deepest frame is open");
            let p = ops
                .parent(child_dir)
                .map_err(io_at::<O>("open parent", &stack, None))?;
            if ops.id(&p).map_err(io_at::<O>("stat", &stack, None))? != stack[parent].id {
                return Err(TreeError::Moved);
            }
            stack[parent].dir = Some(p);
        }
        drop(child.dir);
        let parent_dir = stack[parent].dir.as_ref().expect("just reopened");
        match ops.rmdir(parent_dir, &child_name) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            // Refilled meanwhile: the next listing finds it and descends again.
            Err(e) if e.kind() == io::ErrorKind::DirectoryNotEmpty => {}
            Err(e) => return Err(io_at::<O>("rmdir", &stack, Some(&child_name))(e)),
        }
        work += 1;
        if work > limits.ops {
            return Err(TreeError::TooMuchWork);
        }
    }
}

#[cfg(test)]
mod tests {
    //! The algorithm over an in-memory tree: deep trees, mount points, moved
    //! directories, a tree that keeps refilling, and the handle window.

    use super::*;
    use std::cell::{Cell, RefCell};
    use std::collections::BTreeMap;
    use std::rc::Rc;

    #[derive(Default)]
    struct Node {
        children: BTreeMap<String, Rc<RefCell<Node>>>,
        is_dir: bool,
        is_mount: bool,
        /// Cannot be removed (held by another process).
        stuck: bool,
        /// Its delete is accepted but it stays (pending until another
        /// process closes it).
        pending: bool,
        id: u64,
        parent: Option<std::rc::Weak<RefCell<Node>>>,
    }

    type OnList = Box<dyn FnMut(&Rc<RefCell<Node>>)>;

    struct Mem {
        next_id: Cell<u64>,
        max_open: Cell<usize>,
        /// Called after every listing (the attacker's move).
        on_list: RefCell<OnList>,
    }

    struct H(Rc<RefCell<Node>>, Rc<Cell<usize>>);
    impl Drop for H {
        fn drop(&mut self) {
            self.1.set(self.1.get() - 1);
        }
    }

    impl Mem {
        fn new() -> (Mem, Rc<RefCell<Node>>) {
            let m = Mem {
                next_id: Cell::new(1),
                max_open: Cell::new(0),
                on_list: RefCell::new(Box::new(|_| {})),
            };
            let root = m.node(true, None);
            (m, root)
        }
        fn node(&self, is_dir: bool, parent: Option<&Rc<RefCell<Node>>>) -> Rc<RefCell<Node>> {
            let id = self.next_id.get();
            self.next_id.set(id + 1);
            Rc::new(RefCell::new(Node {
                is_dir,
                id,
                parent: parent.map(Rc::downgrade),
                ..Node::default()
            }))
        }
        fn add(&self, dir: &Rc<RefCell<Node>>, name: &str, is_dir: bool) -> Rc<RefCell<Node>> {
            let n = self.node(is_dir, Some(dir));
            dir.borrow_mut().children.insert(name.into(), n.clone());
            n
        }
        fn handle(&self, n: Rc<RefCell<Node>>, count: &Rc<Cell<usize>>) -> H {
            count.set(count.get() + 1);
            self.max_open.set(self.max_open.get().max(count.get()));
            H(n, count.clone())
        }
    }

    thread_local! {
        static OPEN: Rc<Cell<usize>> = Rc::new(Cell::new(0));
    }
    fn open_count() -> Rc<Cell<usize>> {
        OPEN.with(|c| c.clone())
    }

    impl TreeOps for Mem {
        type Dir = H;
        type Name = String;
        const WINDOW: Option<usize> = Some(4);

        fn id(&self, dir: &H) -> io::Result<(u64, u64)> {
            Ok((1, dir.0.borrow().id))
        }
        fn list(&self, dir: &mut H, out: &mut Vec<(String, Hint)>, max: usize) -> io::Result<()> {
            for (name, n) in dir.0.borrow().children.iter().take(max) {
                let hint = if n.borrow().is_dir {
                    Hint::Dir
                } else {
                    Hint::NotDir
                };
                out.push((name.clone(), hint));
            }
            (self.on_list.borrow_mut())(&dir.0);
            Ok(())
        }
        fn unlink(&self, dir: &H, name: &String) -> io::Result<bool> {
            let mut d = dir.0.borrow_mut();
            match d.children.get(name) {
                None => Ok(true),
                Some(n) if n.borrow().is_dir => Ok(false),
                Some(n) if n.borrow().stuck => Err(io::ErrorKind::ResourceBusy.into()),
                Some(n) if n.borrow().pending => Ok(true),
                Some(_) => {
                    d.children.remove(name);
                    Ok(true)
                }
            }
        }
        fn open_subdir(&self, dir: &H, name: &String) -> io::Result<Sub<H>> {
            let d = dir.0.borrow();
            Ok(match d.children.get(name) {
                None => Sub::Gone,
                Some(n) if n.borrow().is_mount => Sub::MountPoint,
                Some(n) if n.borrow().is_dir => Sub::Dir(self.handle(n.clone(), &open_count())),
                Some(_) => Sub::NotADir,
            })
        }
        fn rmdir(&self, dir: &H, name: &String) -> io::Result<()> {
            let mut d = dir.0.borrow_mut();
            match d.children.get(name) {
                None => Err(io::ErrorKind::NotFound.into()),
                Some(n) if !n.borrow().children.is_empty() => {
                    Err(io::ErrorKind::DirectoryNotEmpty.into())
                }
                Some(n) if n.borrow().stuck => Err(io::ErrorKind::ResourceBusy.into()),
                Some(_) => {
                    d.children.remove(name);
                    Ok(())
                }
            }
        }
        fn parent(&self, dir: &H) -> io::Result<H> {
            let p = dir.0.borrow().parent.as_ref().and_then(|w| w.upgrade());
            let p = p.ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
            Ok(self.handle(p, &open_count()))
        }
        fn name_len(name: &String) -> usize {
            name.len()
        }
        fn show(name: &String) -> String {
            name.clone()
        }
    }

    fn top(m: &Mem, root: &Rc<RefCell<Node>>) -> H {
        m.handle(root.clone(), &open_count())
    }

    #[test]
    fn an_entry_that_stays_is_named() {
        let (m, root) = Mem::new();
        let b = m.add(&m.add(&root, "a", true), "b", true);
        m.add(&b, "f", false);
        m.add(&b, "held", false).borrow_mut().stuck = true;
        let entry = |r: Result<(), TreeError>| match r {
            Err(TreeError::Io { op, entry, err }) => {
                assert_eq!(err.kind(), io::ErrorKind::ResourceBusy);
                (op, entry)
            }
            other => panic!("{other:?}"),
        };
        let got = entry(remove_contents(&m, top(&m, &root), &Limits::DEFAULT));
        assert_eq!(got, ("unlink", vec!["a".into(), "b".into(), "held".into()]));
        // An empty directory that stays: named by its parent's walk.
        b.borrow_mut().children.clear();
        b.borrow_mut().stuck = true;
        let got = entry(remove_contents(&m, top(&m, &root), &Limits::DEFAULT));
        assert_eq!(got, ("rmdir", vec!["a".into(), "b".into()]));
        // Deleted but still listed: named after a few listings, not listed
        // again until the work limit.
        b.borrow_mut().stuck = false;
        m.add(&b, "pending", false).borrow_mut().pending = true;
        let got = entry(remove_contents(&m, top(&m, &root), &Limits::DEFAULT));
        assert_eq!(
            got,
            ("unlink", vec!["a".into(), "b".into(), "pending".into()])
        );
    }

    const SMALL: Limits = Limits {
        depth: 60_000,
        ops: 1_000_000,
        name_bytes: 1 << 20,
    };

    #[test]
    fn removes_a_wide_and_deep_tree_with_few_handles() {
        let (m, root) = Mem::new();
        let mut d = root.clone();
        for i in 0..50_000 {
            for f in 0..2 {
                m.add(&d, &format!("f{f}"), false);
            }
            if i % 1000 == 0 {
                let side = m.add(&d, "side", true);
                m.add(&side, "x", false);
            }
            d = m.add(&d, &format!("d{i}"), true);
        }
        remove_contents(&m, top(&m, &root), &SMALL).unwrap();
        assert!(root.borrow().children.is_empty());
        // The window (4) plus one reopened parent.
        assert!(m.max_open.get() <= 5, "{} handles open", m.max_open.get());
        assert_eq!(open_count().get(), 0);
    }

    #[test]
    fn a_mount_point_stops_the_walk_before_entering_it() {
        let (m, root) = Mem::new();
        let a = m.add(&root, "a", true);
        let mnt = m.add(&a, "mnt", true);
        mnt.borrow_mut().is_mount = true;
        m.add(&mnt, "precious", false);
        assert!(matches!(
            remove_contents(&m, top(&m, &root), &SMALL),
            Err(TreeError::MountPoint)
        ));
        assert!(mnt.borrow().children.contains_key("precious"));
    }

    #[test]
    fn a_directory_moved_during_the_walk_stops_it() {
        let (m, root) = Mem::new();
        let mut d = root.clone();
        let mut chain = vec![];
        for i in 0..20 {
            d = m.add(&d, &format!("d{i}"), true);
            chain.push(d.clone());
        }
        m.add(&d, "leaf", false);
        // When the deepest directory is listed, move d5 (now closed) under a
        // new parent elsewhere.
        let elsewhere = m.node(true, None);
        let d5 = chain[5].clone();
        let d4 = chain[4].clone();
        let moved = Cell::new(false);
        *m.on_list.borrow_mut() = Box::new(move |n| {
            if !moved.get() && n.borrow().children.contains_key("leaf") {
                moved.set(true);
                d4.borrow_mut().children.remove("d5");
                elsewhere
                    .borrow_mut()
                    .children
                    .insert("d5".into(), d5.clone());
                d5.borrow_mut().parent = Some(Rc::downgrade(&elsewhere));
                std::mem::forget(elsewhere.clone());
            }
        });
        assert!(matches!(
            remove_contents(&m, top(&m, &root), &SMALL),
            Err(TreeError::Moved)
        ));
    }

    #[test]
    fn a_tree_that_keeps_refilling_is_bounded() {
        let (m, root) = Mem::new();
        let a = m.add(&root, "a", true);
        let n = Cell::new(0u64);
        *m.on_list.borrow_mut() = Box::new(move |dir| {
            let i = n.get();
            n.set(i + 1);
            let node = Rc::new(RefCell::new(Node {
                is_dir: false,
                id: 1_000_000 + i,
                ..Node::default()
            }));
            dir.borrow_mut().children.insert(format!("new{i}"), node);
        });
        m.add(&a, "x", false);
        assert!(matches!(
            remove_contents(&m, top(&m, &root), &SMALL),
            Err(TreeError::TooMuchWork)
        ));
    }

    #[test]
    fn too_deep_is_refused() {
        let (m, root) = Mem::new();
        let mut d = root.clone();
        for i in 0..SMALL.depth + 5 {
            d = m.add(&d, if i % 2 == 0 { "a" } else { "b" }, true);
        }
        assert!(matches!(
            remove_contents(&m, top(&m, &root), &SMALL),
            Err(TreeError::TooDeep)
        ));
        // Dropping a very deep Rc chain recursively would overflow the test's
        // own stack: unlink it level by level.
        let mut cur = root.borrow_mut().children.pop_first().map(|(_, n)| n);
        while let Some(n) = cur {
            cur = n.borrow_mut().children.pop_first().map(|(_, n)| n);
        }
    }
}
