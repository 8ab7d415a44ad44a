//! The confined filesystem: every operation on a client-supplied local path,
//! for every API group (Filesystem, the Volume mount targets and lookups,
//! the SMB local link).
//!
//! A path is first checked lexically by the [`PathPolicy`] (syntax, inside an
//! allowed root). Then it is split into the root it lies in and the
//! components below it ([`Located`]). Each allowed root is opened once (on
//! first use, so a root created later is picked up) and kept open; every
//! operation resolves the components *beneath that root handle*, one
//! kernel-checked step at a time, and acts relative to the handle of the
//! parent directory it reached:
//!
//! * a link (symlink, junction, or any other reparse point on Windows) in
//!   the parent chain is never followed: the operation fails with
//!   `PermissionDenied` whatever the link points to;
//! * a final-component link is never followed by destructive operations
//!   (the link itself is removed); where an API needs to follow it (Mkdir
//!   and RmdirContents on a link, IsSymlink's target check, the Volume
//!   lookups), [`Confined::link_destination`] follows exactly one hop, and
//!   only to a path that is itself inside the roots by the lexical rules,
//!   which is then resolved beneath its root like any client path;
//! * tree removal ([`Confined::remove_all`], [`Confined::remove_contents`])
//!   is iterative over directory handles, holds a bounded number of them,
//!   never crosses a mount point and is bounded in depth and work;
//! * answers never depend on anything outside the roots: nothing outside is
//!   opened, stat'ed or probed, and messages show only the client's path.
//!
//! Linux uses `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
//! RESOLVE_NO_MAGICLINKS)` and the `*at` calls; Windows opens each component
//! relative to its parent's handle with `FILE_OPEN_REPARSE_POINT` and
//! refuses reparse points in the chain (see `docs/security.md` for what each
//! OS guarantees).

use crate::error::{Error, Result};
use crate::path::{shown, CheckedPath, Flavor, PathPolicy};
use std::io;
use std::sync::OnceLock;

#[cfg(target_os = "linux")]
mod linux;
pub mod stuck;
#[cfg(target_os = "linux")]
use linux as os;
#[cfg(target_os = "linux")]
pub use linux::Dir;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
use windows as os;
#[cfg(all(windows, feature = "bench-internals"))]
pub use windows::bench::Way as BenchWay;
#[cfg(windows)]
pub use windows::Dir;

pub(crate) mod tree;
pub mod winfmt;

/// Deepest directory tree [`Confined::remove_all`] and
/// [`Confined::remove_contents`] descend into; deeper trees are refused
/// with `FailedPrecondition` (whatever was removed until then stays
/// removed, as with `rm -r`).
pub const MAX_TREE_DEPTH: usize = 1 << 17;

/// A client path that passed the lexical checks, split into the allowed
/// root it lies in and the part below that root (no allocation: the part
/// below is a suffix of the checked path, with the OS's separators).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Located {
    path: CheckedPath,
    root: usize,
    /// Where the part below the root starts in `path` (`path.len()` for
    /// the root itself).
    rel_start: usize,
    sep: char,
}

impl Located {
    /// The checked client path (what error messages show).
    pub fn path(&self) -> &str {
        self.path.as_str()
    }

    /// The checked client path.
    pub fn checked(&self) -> &CheckedPath {
        &self.path
    }

    /// Is this an allowed root itself?
    pub fn is_root(&self) -> bool {
        self.rel_str().is_empty()
    }

    /// The part below the root, components separated by the OS separator
    /// (empty for the root).
    pub fn rel_str(&self) -> &str {
        &self.path.as_str()[self.rel_start..]
    }

    /// The components below the root.
    pub fn components(&self) -> impl DoubleEndedIterator<Item = &str> {
        let rel = self.rel_str();
        rel.split(self.sep).filter(move |_| !rel.is_empty())
    }

    /// The components below the root, collected.
    pub fn rel(&self) -> Vec<&str> {
        self.components().collect()
    }

    /// The last component (`None` for a root).
    pub fn name(&self) -> Option<&str> {
        self.components().next_back()
    }

    /// The part below the root without the last component (empty right
    /// below the root; `None` for a root).
    pub fn parent_rel(&self) -> Option<&str> {
        let rel = self.rel_str();
        if rel.is_empty() {
            return None;
        }
        Some(rel.rfind(self.sep).map_or("", |i| &rel[..i]))
    }

    /// The path for messages: escaped and truncated.
    pub fn shown(&self) -> String {
        shown(self.path.as_str())
    }

    /// The parent directory (`None` for a root).
    pub fn parent(&self) -> Option<Located> {
        let parent_rel = self.parent_rel()?;
        let p = self.path.as_str();
        let end = if parent_rel.is_empty() {
            // The root itself: the path up to where the part below starts,
            // without the separator (kept for a filesystem root: `/`, `C:\`).
            let cut = self.rel_start;
            let root = &p[..cut];
            if root.len() > 1
                && root.ends_with(self.sep)
                && !root.ends_with(&format!(":{}", self.sep))
            {
                cut - 1
            } else {
                cut
            }
        } else {
            self.rel_start + parent_rel.len()
        };
        let path = p[..end].to_string();
        let rel_start = self.rel_start.min(path.len());
        Some(Located {
            path: CheckedPath::new_unchecked(path, parent_rel.is_empty()),
            root: self.root,
            rel_start,
            sep: self.sep,
        })
    }
}

/// What a path names, without following a final link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File,
    /// A symbolic link, or on Windows a junction or other name-surrogate
    /// reparse point that is not a volume mount point.
    Link,
    /// A Windows volume mount point (a junction to a volume).
    MountPoint,
    /// A device, socket, FIFO.
    Other,
}

/// One allowed root: its path as configured and its handle, opened once.
struct Root {
    path: String,
    handle: OnceLock<os::RootHandle>,
}

/// The confined filesystem over the allowed roots of a [`PathPolicy`].
pub struct Confined {
    policy: PathPolicy,
    roots: Vec<Root>,
}

impl std::fmt::Debug for Confined {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Confined")
            .field("roots", &self.policy.roots())
            .finish()
    }
}

impl Confined {
    /// The confined filesystem of `policy`'s roots. Nothing is opened yet.
    pub fn new(policy: PathPolicy) -> Confined {
        let roots = policy
            .roots()
            .iter()
            .map(|r| Root {
                path: r.clone(),
                handle: OnceLock::new(),
            })
            .collect();
        Confined { policy, roots }
    }

    /// The policy whose roots this confines to.
    pub fn policy(&self) -> &PathPolicy {
        &self.policy
    }

    /// Check `path` lexically and split it below the most specific root it
    /// lies in.
    pub fn locate(&self, path: &str) -> Result<Located> {
        locate(&self.policy, path)
    }

    fn split(&self, checked: CheckedPath) -> Located {
        split(&self.policy, checked)
    }

    /// Enter a blocking operation on `p` ([`stuck`]): refused at once while
    /// this caller has [`stuck::STUCK_PER_MOUNT`] operations stuck in a
    /// file system a lookup of `p` passes through. Inline attempts never
    /// block: not counted.
    fn enter(&self, p: &Located) -> Result<stuck::Guard> {
        if crate::inline::active() {
            return Ok(stuck::Guard::none());
        }
        #[cfg(target_os = "linux")]
        {
            let slot = &self.roots[p.root];
            // The root's real location (its path may be a link: red team
            // 41mount), opened here if no call has yet.
            let handle = slot.handle.get().or_else(|| self.root(p, false).ok());
            let base = handle
                .and_then(|h| h.real_path().ok())
                .unwrap_or_else(|| std::path::PathBuf::from(&slot.path));
            let full = p.components().fold(base.clone(), |b, c| b.join(c));
            // A table that cannot be read counts every operation of the
            // caller as one (bounded, never let in uncounted). The lookup
            // starts on the mount the root's handle is on.
            let charged = linux::charged(handle.and_then(|h| h.mount_id()), &base, &full)
                .unwrap_or_else(|| vec![(base, stuck::UNKNOWN_DEVICE)]);
            stuck::enter(&charged)
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = p;
            Ok(stuck::Guard::none())
        }
    }

    /// The handle of root `i`, opened on first use. With `create`, a root
    /// that does not exist yet is created first (its path is configuration,
    /// not client input).
    fn root(&self, p: &Located, create: bool) -> Result<&os::RootHandle> {
        let slot = &self.roots[p.root];
        if let Some(h) = slot.handle.get() {
            return Ok(h);
        }
        // Opening a root by its path is a lookup like any other.
        if crate::inline::active() {
            return Err(crate::inline::would_block("opening an allowed root"));
        }
        let opened = match os::RootHandle::open(&slot.path) {
            Err(e) if create && e.kind() == io::ErrorKind::NotFound => {
                std::fs::create_dir_all(&slot.path)
                    .map_err(|e| Error::io("create allowed root", &slot.path, e))?;
                os::RootHandle::open(&slot.path)
            }
            other => other,
        };
        let h = opened.map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => Error::NotFound(format!(
                "path {}: the allowed root {} does not exist",
                p.shown(),
                shown(&slot.path)
            )),
            _ => Error::io("open allowed root", &slot.path, e),
        })?;
        // Two threads may race to open it; one handle wins, the other closes.
        let _ = slot.handle.set(h);
        Ok(slot.handle.get().expect("just set"))
    }

    /// Does anything exist at `p` (a link counts, whatever it points to)?
    pub fn exists(&self, p: &Located) -> Result<bool> {
        let _entered = self.enter(p)?;
        let root = match self.root(p, false) {
            Err(Error::NotFound(_)) => return Ok(false),
            other => other?,
        };
        os::exists(root, p)
    }

    /// One open of `p` the way `way` says (for the bench of the fast
    /// path, `benches/confined_fast_path.rs`): whether it succeeded.
    #[cfg(all(windows, feature = "bench-internals"))]
    pub fn bench_open(&self, p: &Located, way: BenchWay) -> Result<bool> {
        windows::bench::open(self.root(p, false)?, p, way)
    }

    /// What `p` is (`None` if nothing exists there); a final link is not
    /// followed.
    pub fn kind(&self, p: &Located) -> Result<Option<Kind>> {
        let _entered = self.enter(p)?;
        let root = match self.root(p, false) {
            Err(Error::NotFound(_)) => return Ok(None),
            other => other?,
        };
        os::kind(root, p)
    }

    /// If `p` is a link, where it leads when followed one hop: `Some` only
    /// for a destination inside the allowed roots (by the lexical rules; it
    /// is not opened here). `Ok(None)` when `p` is not a link or leads
    /// elsewhere.
    pub fn link_destination(&self, p: &Located) -> Result<Option<Located>> {
        let _entered = self.enter(p)?;
        let root = self.root(p, false)?;
        let Some(target) = os::read_link(root, p)? else {
            return Ok(None);
        };
        Ok(self
            .policy
            .link_destination(&p.path, &target)
            .map(|c| self.split(c)))
    }

    /// Create `p` and its missing parents (mode 0755 on Linux). An existing
    /// directory is fine; an existing final link is fine when it leads to a
    /// directory inside the roots.
    pub fn mkdir_all(&self, p: &Located) -> Result<()> {
        let _entered = self.enter(p)?;
        let root = self.root(p, true)?;
        match os::mkdir_all(root, p)? {
            MkdirOutcome::Done => Ok(()),
            MkdirOutcome::FinalIsLink => match self.link_destination(p)? {
                Some(d) if matches!(self.kind(&d)?, Some(Kind::Dir | Kind::MountPoint)) => Ok(()),
                _ => Err(not_a_dir_link(p)),
            },
        }
    }

    /// Remove one entry: an empty directory, a file, or a link itself.
    pub fn remove(&self, p: &Located) -> Result<()> {
        let _entered = self.enter(p)?;
        refuse_root(p, "remove")?;
        os::remove(self.root(p, false)?, p)
    }

    /// Remove `p` and everything below it. A link is removed, never
    /// followed; a mount point at or below `p` is refused before anything
    /// under it is touched. Nothing at `p` is success.
    pub fn remove_all(&self, p: &Located) -> Result<()> {
        let _entered = self.enter(p)?;
        refuse_root(p, "remove")?;
        let root = match self.root(p, false) {
            Err(Error::NotFound(_)) => return Ok(()),
            other => other?,
        };
        os::remove_all(root, p)
    }

    /// Remove everything inside the directory `p`, keeping `p`. Mount points
    /// below `p` are refused.
    pub fn remove_contents(&self, p: &Located) -> Result<()> {
        let _entered = self.enter(p)?;
        let root = self.root(p, false)?;
        os::remove_contents(root, p)
    }

    /// Create a directory link at `link` that stores `points_to`.
    pub fn symlink(&self, points_to: &CheckedPath, link: &Located) -> Result<()> {
        let _entered = self.enter(link)?;
        refuse_root(link, "create a link at")?;
        os::symlink(self.root(link, false)?, points_to.as_str(), link)
    }

    /// Create the directory link of an SMB mapping at `link`, storing
    /// `target` (a remote path checked by the SMB validator: `\\?\UNC\...`
    /// on Windows, the share's mount directory on Linux). Like
    /// [`symlink`](Self::symlink), the parent is reached beneath the root
    /// (Linux: `symlinkat` on the parent's handle; Windows: the parent chain
    /// held without delete sharing while `CreateSymbolicLinkW` runs on it);
    /// then the link is read back through the parent and must store exactly
    /// `target`. An existing link that stores `target` already is success.
    pub fn smb_link(
        &self,
        target: &crate::smb::validate::SmbLinkTarget,
        link: &Located,
    ) -> Result<()> {
        refuse_root(link, "create a link at")?;
        let root = self.root(link, false)?;
        let _entered = self.enter(link)?;
        let same =
            |stored: &str| normalize_link_target(stored) == normalize_link_target(target.as_str());
        match os::read_link(root, link)? {
            Some(stored) if same(&stored) => return Ok(()),
            Some(_) => {
                return Err(Error::AlreadyExists(format!(
                    "path {} is a link to something else; remove it first",
                    link.shown()
                )))
            }
            None => {}
        }
        os::symlink(root, target.as_str(), link)?;
        match os::read_link(root, link)? {
            Some(stored) if same(&stored) => Ok(()),
            _ => {
                // Not what was asked (replaced in between?): undo, never
                // leave a link we did not mean.
                let _ = os::remove(root, link);
                Err(Error::Internal(format!(
                    "create SMB link {}: the link read back does not store the remote path",
                    link.shown()
                )))
            }
        }
    }

    /// Is `link` a link that stores `target` already?
    pub fn smb_link_matches(
        &self,
        target: &crate::smb::validate::SmbLinkTarget,
        link: &Located,
    ) -> Result<bool> {
        let root = self.root(link, false)?;
        let _entered = self.enter(link)?;
        Ok(os::read_link(root, link)?.is_some_and(|stored| {
            normalize_link_target(&stored) == normalize_link_target(target.as_str())
        }))
    }

    /// Open the directory `p` (no link anywhere, the final component
    /// included).
    pub fn open_dir(&self, p: &Located) -> Result<Dir> {
        let _entered = self.enter(p)?;
        os::open_dir(self.root(p, false)?, p)
    }

    /// Open the parent directory of `p` (not a root), and `p`'s last
    /// component.
    pub fn open_parent(&self, p: &Located) -> Result<(Dir, String)> {
        let _entered = self.enter(p)?;
        refuse_root(p, "open the parent of")?;
        let dir = os::open_parent_dir(self.root(p, false)?, p)?;
        Ok((dir, p.name().expect("not a root").to_string()))
    }

    /// The nearest existing directory at or above `p` (up to its root), for
    /// "which volume holds this path". A link in the chain is refused.
    pub fn open_nearest_dir(&self, p: &Located) -> Result<Dir> {
        let mut cur = p.clone();
        loop {
            match self.open_dir(&cur) {
                Err(Error::NotFound(_)) | Err(Error::FailedPrecondition(_)) if !cur.is_root() => {
                    cur = cur.parent().expect("not a root");
                }
                other => return other,
            }
        }
    }

    /// The real paths of the allowed roots that exist (Linux: as the kernel
    /// names them in mount tables).
    #[cfg(target_os = "linux")]
    pub fn real_roots(&self) -> Vec<std::path::PathBuf> {
        (0..self.roots.len())
            .filter_map(|i| {
                let path = self.policy.check(&self.roots[i].path).ok()?;
                let p = Located {
                    rel_start: path.as_str().len(),
                    path,
                    root: i,
                    sep: self.policy.flavor().separator(),
                };
                self.root(&p, false).ok()?.real_path().ok()
            })
            .collect()
    }

    /// Create the directory `p` (and its missing parents) if it does not
    /// exist, and open it; a link or non-directory there is refused.
    pub fn create_dir(&self, p: &Located) -> Result<Dir> {
        let _entered = self.enter(p)?;
        refuse_root(p, "create")?;
        let root = self.root(p, true)?;
        match os::create_dir(root, p) {
            Err(Error::NotFound(_)) => {
                // Whatever the parent's creation says of itself, this call
                // creates `p` (`crate::effect`: its mark is contained).
                crate::effect::observe(|| self.mkdir_all(&p.parent().expect("not a root"))).0?;
                os::create_dir(root, p)
            }
            other => other,
        }
    }
}

/// A stored link target in one spelling: Windows keeps `\\?\` targets as
/// `\??\` in the reparse point.
fn normalize_link_target(t: &str) -> std::borrow::Cow<'_, str> {
    match t.strip_prefix(r"\??\") {
        Some(rest) => format!(r"\\?\{rest}").into(),
        None => t.into(),
    }
}

/// Check `path` lexically against `policy` and split it below the most
/// specific root it lies in (the root index follows `policy.roots()`).
pub fn locate(policy: &PathPolicy, path: &str) -> Result<Located> {
    Ok(split(policy, policy.check(path)?))
}

fn split(policy: &PathPolicy, checked: CheckedPath) -> Located {
    let flavor = policy.flavor();
    let p = checked.as_str();
    let (root, rel) = policy
        .roots()
        .iter()
        .enumerate()
        .filter_map(|(i, r)| relative_to(flavor, p, r).map(|rel| (i, r.len(), rel)))
        .max_by_key(|(_, len, _)| *len)
        .map(|(i, _, rel)| (i, rel))
        .expect("a checked path lies inside a root");
    let rel_start = p.len() - rel.len();
    Located {
        path: checked,
        root,
        rel_start,
        sep: flavor.separator(),
    }
}

/// What [`os::mkdir_all`] found.
pub(crate) enum MkdirOutcome {
    Done,
    /// Every parent exists and the final component is a link.
    FinalIsLink,
}

/// `path` relative to `root` if it is equal to or below it.
fn relative_to<'a>(flavor: Flavor, path: &'a str, root: &str) -> Option<&'a str> {
    let sep = flavor.separator();
    let rest = match flavor {
        Flavor::Windows => crate::path::case::strip_prefix_ignore_case(path, root)?,
        Flavor::Unix => path.strip_prefix(root)?,
    };
    if rest.is_empty() {
        Some("")
    } else if root.ends_with(sep) {
        Some(rest)
    } else {
        rest.strip_prefix(sep)
    }
}

fn refuse_root(p: &Located, what: &str) -> Result<()> {
    if p.is_root() {
        return Err(Error::PermissionDenied(format!(
            "path {}: refusing to {what} an allowed root directory itself",
            p.shown()
        )));
    }
    Ok(())
}

fn not_a_dir_link(p: &Located) -> Error {
    Error::AlreadyExists(format!(
        "path {} exists and is a link that does not lead to a directory inside the allowed roots",
        p.shown()
    ))
}

/// A link in the parent chain: refused, whatever it points to.
pub(crate) fn link_in_chain(p: &Located) -> Error {
    Error::PermissionDenied(format!(
        "path {} goes through a link below its allowed root; links are only followed as the last component",
        p.shown()
    ))
}

/// A mount point met inside a tree that is being removed.
pub(crate) fn mount_in_tree(p: &Located) -> Error {
    Error::FailedPrecondition(format!(
        "path {}: a mount point is at or below it; unmount it first (removal never crosses a mount point)",
        p.shown()
    ))
}

/// An OS error on `p`, with only the client's path in the message.
/// In an inline attempt, `EAGAIN` is a lookup the caches could not answer
/// (`RESOLVE_CACHED`): "would block", run again where it may.
pub(crate) fn io_err(op: &'static str, p: &Located, e: io::Error) -> Error {
    if crate::inline::active() && e.kind() == io::ErrorKind::WouldBlock {
        return crate::inline::would_block("a lookup the kernel's caches cannot answer");
    }
    Error::io(op, p.path(), e)
}

/// Why a tree removal stopped early.
pub(crate) fn tree_err(p: &Located, e: tree::TreeError) -> Error {
    match e {
        tree::TreeError::TooDeep => Error::FailedPrecondition(format!(
            "path {}: the tree is deeper than {MAX_TREE_DEPTH} levels; removed what was reached",
            p.shown()
        )),
        tree::TreeError::TooMuchWork => Error::FailedPrecondition(format!(
            "path {}: the tree kept changing during removal; gave up after {} operations",
            p.shown(),
            tree::Limits::DEFAULT.ops
        )),
        tree::TreeError::Moved => Error::FailedPrecondition(format!(
            "path {}: a directory was moved while its tree was being removed; stopped",
            p.shown()
        )),
        tree::TreeError::MountPoint => mount_in_tree(p),
        tree::TreeError::Io { op, entry, err } if entry.is_empty() => io_err(op, p, err),
        tree::TreeError::Io { op, entry, err } => Error::io(op, entry_path(p, &entry), err),
    }
}

/// The path of an entry below `p` (`entry`: its components), for a message
/// that names what could not be removed. A deep one keeps its last
/// component only.
fn entry_path(p: &Located, entry: &[String]) -> String {
    const MAX: usize = 1024;
    let sep = p.sep;
    let full = entry.iter().fold(p.path().to_string(), |mut s, c| {
        s.push(sep);
        s.push_str(c);
        s
    });
    match entry.last() {
        Some(last) if full.len() > MAX && entry.len() > 1 => {
            format!("{}{sep}...{sep}{last}", p.path())
        }
        _ => full,
    }
}

#[cfg(test)]
mod tests;
