//! SMB "global mappings" on Linux: the share root `//host/share` is mounted
//! once by the kernel's CIFS client on a directory owned by csi-proxy
//! (`/run/csi-proxy-smb/<host>/<share>`, outside the kubelet dir), and
//! `local_path` links below it, as on Windows it links to the UNC path.
//!
//! The mount goes through `fsopen("cifs")` and one `fsconfig` call per
//! option (source, ip, username, domain, password, `seal` for
//! `-require-privacy`), so the password is never on a command line, in an
//! option string or in a file, and our copies are wiped. No helper is
//! spawned (`mount.cifs` is not needed): the host name is resolved here and
//! handed over as `ip`. A kernel without CIFS support answers
//! `FailedPrecondition`.
//!
//! A map is bounded by its call's deadline: the deadline is checked before
//! each step (name lookup, `fsopen`/`fsconfig`/create, attaching the
//! mount), the name lookup runs on a thread of its own counted in the
//! share's and server's budgets of [`Reach`], and one map of a share root
//! runs at a time ([`MapLocks`]): another map of that share waits for it
//! only until its own deadline, then finds the share mounted or maps it.
//! The mount directory is named by the share's compared spelling
//! ([`ShareRoot::share_key`]), the source sent to the server is the
//! request's spelling.

mod sys;

use super::api::{MappingState, SmbBackend};
use super::reach::Reach;
use super::validate::{Credential, Host, RemotePath, ShareRoot, SmbLinkTarget};
use crate::storage::linux::mountinfo;
use crate::{Error, Result};
use std::collections::HashSet;
use std::io;
use std::net::{IpAddr, ToSocketAddrs};
use std::os::fd::OwnedFd;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;
use zeroize::Zeroizing;

/// Where share roots are mounted.
pub const DEFAULT_MOUNT_BASE: &str = "/run/csi-proxy-smb";

/// Filesystem types a CIFS mount shows in mountinfo.
const CIFS_TYPES: [&str; 2] = ["cifs", "smb3"];

/// The kernel-CIFS SMB backend.
#[derive(Debug)]
pub struct LinuxSmb {
    base: PathBuf,
    reach: Reach,
    maps: MapLocks,
}

impl Default for LinuxSmb {
    fn default() -> Self {
        LinuxSmb {
            base: PathBuf::from(DEFAULT_MOUNT_BASE),
            reach: Reach::new(),
            maps: MapLocks::default(),
        }
    }
}

/// The share roots being mapped: one map per share root at a time. A
/// waiter gives up at its call's deadline (or [`super::reach::BOUND`]);
/// the lock itself is a mark in a set, never a mutex held over the map.
#[derive(Debug, Default)]
pub struct MapLocks {
    busy: Arc<(Mutex<HashSet<ShareRoot>>, Condvar)>,
}

/// One share root's map in progress; dropped, the next map may start.
pub struct MapGuard {
    busy: Arc<(Mutex<HashSet<ShareRoot>>, Condvar)>,
    root: ShareRoot,
}

impl Drop for MapGuard {
    fn drop(&mut self) {
        let (set, cv) = &*self.busy;
        set.lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.root);
        cv.notify_all();
    }
}

impl MapLocks {
    /// Waits until no other map of `root` runs, until the call's deadline.
    pub fn acquire(&self, root: &ShareRoot) -> Result<MapGuard> {
        let until =
            crate::deadline::current().unwrap_or_else(|| Instant::now() + super::reach::BOUND);
        let (set, cv) = &*self.busy;
        let mut busy = set.lock().unwrap_or_else(|p| p.into_inner());
        while busy.contains(root) {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::DeadlineExceeded(format!(
                    "map {root}: another map of this share was still running at the call's \
                     deadline"
                )));
            }
            busy = cv
                .wait_timeout(busy, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        busy.insert(root.clone());
        Ok(MapGuard {
            busy: self.busy.clone(),
            root: root.clone(),
        })
    }
}

/// Refuses to start `step` of mapping `root` once the call's deadline has
/// passed.
fn before(root: &ShareRoot, step: &str) -> Result<()> {
    if crate::deadline::passed() {
        return Err(Error::DeadlineExceeded(format!(
            "map {root}: not started {step}: the call's deadline had passed"
        )));
    }
    Ok(())
}

impl LinuxSmb {
    pub fn new() -> Self {
        Self::default()
    }

    /// Mount share roots below `base` instead of [`DEFAULT_MOUNT_BASE`].
    pub fn with_mount_base(mut self, base: impl Into<PathBuf>) -> Self {
        self.base = base.into();
        self
    }

    /// The directory the share root is mounted on (one for every
    /// spelling of the share).
    pub fn mount_dir(&self, root: &ShareRoot) -> PathBuf {
        self.base.join(root.host()).join(root.share_key())
    }

    /// Map locks (tests).
    pub fn map_locks(&self) -> &MapLocks {
        &self.maps
    }
}

/// The CIFS options of a mount, in the order they are handed to the kernel
/// (pure, so it is tested without a CIFS-capable kernel). Secret values are
/// marked; every value is wiped when dropped.
/// One CIFS option: key, value (`None` for a flag), secret?
pub type Opt = (&'static str, Option<Zeroizing<String>>, bool);

pub fn cifs_options(
    root: &ShareRoot,
    ip: IpAddr,
    credential: Option<&Credential>,
    require_privacy: bool,
) -> Vec<Opt> {
    let z = |s: String| Some(Zeroizing::new(s));
    let mut o: Vec<Opt> = vec![
        ("source", z(root.slashed()), false),
        ("ip", z(ip.to_string()), false),
    ];
    match credential {
        Some(c) => {
            let (domain, user) = c.domain_and_user();
            o.push(("username", z(user.to_string()), false));
            if let Some(d) = domain {
                o.push(("domain", z(d.to_string()), false));
            }
            o.push(("password", z(c.password().to_string()), true));
        }
        None => o.push(("guest", None, false)),
    }
    if require_privacy {
        o.push(("seal", None, false));
    }
    o
}

/// The address of `host`; a name is looked up on a thread of its own,
/// within the call's deadline and the server's budget.
fn resolve(reach: &Reach, root: &ShareRoot, host: &Host) -> Result<IpAddr> {
    match host {
        Host::V4(a) => Ok(IpAddr::V4(*a)),
        Host::V6(a) => Ok(IpAddr::V6(*a)),
        Host::Dns(name) => {
            let owned = name.clone();
            reach
                .run(root, "name lookup", move || {
                    (owned.as_str(), 445)
                        .to_socket_addrs()
                        .map(|mut a| a.next().map(|a| a.ip()))
                })?
                .map_err(|e| {
                    Error::FailedPrecondition(format!(
                        "map {root}: cannot resolve host {name:?}: {e}"
                    ))
                })?
                .ok_or_else(|| {
                    Error::FailedPrecondition(format!("map {root}: host {name:?} has no address"))
                })
        }
    }
}

fn cifs_mount_at(dir: &Path) -> io::Result<bool> {
    Ok(mountinfo::read()?
        .iter()
        .any(|m| m.path() == dir && CIFS_TYPES.contains(&m.fs_type.as_str())))
}

fn fail(root: &ShareRoot, step: &str, e: io::Error) -> Error {
    let text = e.to_string();
    match e.raw_os_error() {
        Some(libc::ENODEV) => Error::FailedPrecondition(format!(
            "map {root}: this kernel has no CIFS support (the cifs module is not loaded or not available): {text}"
        )),
        Some(libc::EACCES) | Some(libc::EPERM) => {
            Error::PermissionDenied(format!("map {root}: {step}: {text}"))
        }
        Some(libc::ENOSYS) => Error::FailedPrecondition(format!(
            "map {root}: this kernel lacks the mount API (fsopen): {text}"
        )),
        _ => Error::FailedPrecondition(format!("map {root}: {step}: {text}")),
    }
}

impl SmbBackend for LinuxSmb {
    fn mapping(&self, root: &ShareRoot) -> Result<Option<MappingState>> {
        let dir = self.mount_dir(root);
        if !cifs_mount_at(&dir).map_err(|e| Error::io("read", "/proc/self/mountinfo", e))? {
            return Ok(None);
        }
        // A server that never answers holds only this call, until its
        // deadline.
        let answers = self.reach.check(root, move || {
            // EOVERFLOW: the share answered with sizes that do not fit the
            // 32-bit statfs of 32-bit targets.
            matches!(
                nix::sys::statfs::statfs(&dir),
                Ok(_) | Err(nix::errno::Errno::EOVERFLOW)
            )
        })?;
        Ok(Some(if answers {
            MappingState::Ok
        } else {
            MappingState::Unreachable
        }))
    }

    fn map(
        &self,
        root: &ShareRoot,
        credential: Option<&Credential>,
        require_privacy: bool,
    ) -> Result<()> {
        // One map of a share root at a time: a second one would stack a
        // second mount on the directory.
        let _one = self.maps.acquire(root)?;
        let dir = self.mount_dir(root);
        if cifs_mount_at(&dir).map_err(|e| Error::io("read", "/proc/self/mountinfo", e))? {
            // Mapped meanwhile by the map this one waited for.
            return Ok(());
        }
        before(root, "fsopen")?;
        // The kernel's CIFS support first: nothing is created without it.
        let ctx = sys::fsopen("cifs").map_err(|e| fail(root, "fsopen(cifs)", e))?;
        let host = RemotePath::parse(&root.unc())?;
        before(root, "the name lookup")?;
        let ip = resolve(&self.reach, root, host.host())?;
        before(root, "the mount options")?;
        for (key, value, _secret) in cifs_options(root, ip, credential, require_privacy) {
            match &value {
                Some(v) => sys::set_string(&ctx, key, v),
                None => sys::set_flag(&ctx, key),
            }
            .map_err(|e| fail(root, &format!("option {key}"), e))?;
        }
        before(root, "the mount (contacting the server)")?;
        let mnt = sys::create_and_mount(&ctx).map_err(|e| fail(root, "mount", e))?;
        // Past the deadline the detached mount is dropped unattached: the
        // caller was told the map failed.
        before(root, "attaching the mount")?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(&dir)
            .map_err(|e| Error::io("create", dir.display().to_string(), e))?;
        let dirfd: OwnedFd = std::fs::File::open(&dir)
            .map_err(|e| Error::io("open", dir.display().to_string(), e))?
            .into();
        sys::attach(&mnt, &dirfd).map_err(|e| fail(root, "attach the mount", e))
    }

    fn unmap(&self, root: &ShareRoot) -> Result<()> {
        let dir = self.mount_dir(root);
        if cifs_mount_at(&dir).map_err(|e| Error::io("read", "/proc/self/mountinfo", e))? {
            nix::mount::umount2(&dir, nix::mount::MntFlags::MNT_DETACH)
                .map_err(|e| Error::FailedPrecondition(format!("unmap {root}: umount: {e}")))?;
        }
        let _ = std::fs::remove_dir(&dir);
        Ok(())
    }

    fn link_target(&self, remote: &RemotePath) -> Result<SmbLinkTarget> {
        let dir = self.mount_dir(&remote.root());
        Ok(remote.mounted_link_target(&dir.to_string_lossy()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_carry_each_value_separately() {
        let root = RemotePath::parse(r"\\Srv.Example\Share\x").unwrap().root();
        let c = Credential::parse(r"DOM\user", Zeroizing::new("p,w=d".into()))
            .unwrap()
            .unwrap();
        let o = cifs_options(&root, "10.0.0.5".parse().unwrap(), Some(&c), true);
        let keys: Vec<_> = o.iter().map(|(k, _, _)| *k).collect();
        assert_eq!(
            keys,
            ["source", "ip", "username", "domain", "password", "seal"]
        );
        assert_eq!(
            o[0].1.as_deref().map(String::as_str),
            Some("//srv.example/Share")
        );
        assert_eq!(o[4].1.as_deref().map(String::as_str), Some("p,w=d"));
        assert!(o[4].2 && !o[2].2);
        let o = cifs_options(&root, "::1".parse().unwrap(), None, false);
        let keys: Vec<_> = o.iter().map(|(k, _, _)| *k).collect();
        assert_eq!(keys, ["source", "ip", "guest"]);
    }

    #[test]
    fn mount_dirs_and_link_targets() {
        let s = LinuxSmb::new().with_mount_base("/run/x");
        let r = RemotePath::parse(r"\\Srv\Share\a\b").unwrap();
        assert_eq!(s.mount_dir(&r.root()), PathBuf::from("/run/x/srv/SHARE"));
        assert_eq!(s.link_target(&r).unwrap().as_str(), "/run/x/srv/SHARE/a/b");
        // Every spelling of one share, one directory; shares NTFS keeps
        // apart, two.
        let dir = |p: &str| s.mount_dir(&RemotePath::parse(p).unwrap().root());
        assert_eq!(dir("\\\\h\\\u{391}\u{3A3}"), dir("\\\\h\\\u{3B1}\u{3C3}"));
        assert_ne!(dir("\\\\h\\\u{212A}"), dir(r"\\h\k"));
    }

    /// The share sent to the server is the request's spelling, never a
    /// folded one (`K` Kelvin sign is not `k`, `İ` is not `i̇`).
    #[test]
    fn the_source_is_the_share_as_asked() {
        for share in ["\u{212A}", "\u{130}", "\u{391}\u{3A3}", "Share"] {
            let root = RemotePath::parse(&format!(r"\\h\{share}")).unwrap().root();
            let o = cifs_options(&root, "10.0.0.5".parse().unwrap(), None, false);
            assert_eq!(
                o[0].1.as_deref().map(String::as_str),
                Some(format!("//h/{share}").as_str())
            );
        }
    }

    /// A second map of one share waits for the first only until its own
    /// deadline; another share is not held.
    #[test]
    fn one_map_per_share_at_a_time_waiters_give_up_at_their_deadline() {
        use std::time::Duration;
        let s = LinuxSmb::new();
        let a = RemotePath::parse(r"\\h\share").unwrap().root();
        let a2 = RemotePath::parse(r"\\H\SHARE").unwrap().root();
        let held = s.map_locks().acquire(&a).unwrap();
        let t = Instant::now();
        let e = crate::deadline::run(Some(Instant::now() + Duration::from_millis(200)), || {
            s.map_locks().acquire(&a2).map(drop)
        })
        .unwrap_err();
        assert!(matches!(e, Error::DeadlineExceeded(_)), "{e}");
        assert!(t.elapsed() >= Duration::from_millis(200));
        assert!(t.elapsed() < Duration::from_secs(3));
        let other = RemotePath::parse(r"\\h\other").unwrap().root();
        drop(s.map_locks().acquire(&other).unwrap());
        drop(held);
        drop(s.map_locks().acquire(&a2).unwrap());
    }

    /// Past the deadline a map starts nothing (no lookup, no mount).
    #[test]
    fn a_map_past_its_deadline_starts_nothing() {
        let t = tempfile::tempdir().unwrap();
        let s = LinuxSmb::new().with_mount_base(t.path().join("base"));
        let root = RemotePath::parse(r"\\files.invalid\share").unwrap().root();
        let e =
            crate::deadline::run(Some(Instant::now()), || s.map(&root, None, false)).unwrap_err();
        assert!(matches!(e, Error::DeadlineExceeded(_)), "{e}");
        assert!(!t.path().join("base").exists());
    }

    /// A name lookup is bounded by the call's deadline: a name whose
    /// lookup hangs costs the call only until then.
    #[test]
    fn a_name_lookup_is_bounded_by_the_deadline() {
        use std::time::Duration;
        let reach = Reach::new();
        let root = RemotePath::parse(r"\\files.example\share").unwrap().root();
        let t = Instant::now();
        let r = crate::deadline::run(Some(Instant::now() + Duration::from_millis(100)), || {
            reach.run(&root, "name lookup", || {
                std::thread::sleep(Duration::from_secs(2));
            })
        });
        assert!(matches!(r, Err(Error::DeadlineExceeded(_))), "{r:?}");
        assert!(t.elapsed() < Duration::from_secs(1));
        assert_eq!(reach.out(&root), 1);
    }

    #[test]
    fn without_cifs_in_the_kernel_nothing_is_created() {
        let t = tempfile::tempdir().unwrap();
        let s = LinuxSmb::new().with_mount_base(t.path().join("base"));
        let root = RemotePath::parse(r"\\127.0.0.1\share").unwrap().root();
        assert_eq!(s.mapping(&root).unwrap(), None);
        let have_cifs = std::fs::read_to_string("/proc/filesystems")
            .unwrap_or_default()
            .lines()
            .any(|l| l.ends_with("\tcifs"));
        if !have_cifs {
            let e = s.map(&root, None, true).unwrap_err();
            assert!(
                matches!(e, Error::FailedPrecondition(_) | Error::PermissionDenied(_)),
                "{e}"
            );
            assert!(!t.path().join("base").exists());
        }
        s.unmap(&root).unwrap();
    }
}
