//! `exe_sha256`: the digest of a caller's executable, with a cache and a
//! hashing budget per caller.
//!
//! - Hashed with `sha2` (RustCrypto; SHA-NI / ARMv8 SHA where the CPU has
//!   them), only on the blocking pool (see [`super::pending`]).
//! - Cached by the file's kernel identity and change times: (device,
//!   inode, size, mtime, ctime). A file rewritten in place, or touched
//!   (`utime`), gets a new key and is hashed again.
//! - A caller may change that key on its own executable as often as it
//!   likes, so each caller (its pod, or outside pods its uid: [`Spender`])
//!   has a budget of
//!   bytes hashed ([`Budget`]): a token bucket of [`BUDGET_BYTES`], refilled
//!   over [`BUDGET_REFILL`]. Past it the caller's digest is not computed
//!   (left out: a rule on `exe_sha256` refuses it, and the audit line says
//!   why, [`super::Caller::incomplete`]); every other caller's budget is
//!   untouched. The cache is kept per spender ([`Kept`]): filling it
//!   evicts only the filler's own digests. One file is hashed at a time
//!   per spender, and at most [`HASHING_AT_ONCE`] buffers at a time by the
//!   whole process: a hash holds a place only while it hashes a buffer,
//!   never while it reads one, so a file read slowly holds no place, and
//!   waits for it in line: callers a rule names by uid or pod first, a
//!   fair share within a class, hashes nobody waits for any more last
//!   ([`super::budget`]).
//! - The file is opened, looked up and read on a thread of its own, one
//!   per spender and [`HASH_THREADS`] in all: an executable on a hung file
//!   system (an open or read that never returns) keeps only that thread
//!   and its spender busy. The identification waits for it while it makes
//!   progress, until its deadline; one that made none for [`STALL`] is
//!   given up at once ([`Refused::Stalled`]), and the spender's next
//!   connections are told so at once while it is still out. A hash
//!   counts against [`HASHING_AT_ONCE`] only while it makes progress.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;
#[cfg(target_os = "linux")]
use std::time::Instant;

pub use super::budget::{
    hashing_at_once, spender, Budget, Class, Refused, Spender, Turn, BUDGET_BYTES, BUDGET_REFILL,
    HASHING_AT_ONCE, STALL,
};

/// Executables larger than this are not hashed (`exe_sha256` left out).
pub const MAX_HASHED: u64 = 512 << 20;

/// How long a hash may run: a hash that takes longer stops (no digest).
pub const HASH_WITHIN: Duration = Duration::from_secs(30);

/// Bytes read that count as progress of a hash: a hash reading slower
/// than this per [`STALL`] is stalled (red team 39caller A: an executable
/// served one byte every 0.9 s held the only hashing place for 30 s).
pub const PROGRESS_BYTES: usize = 256 << 10;

/// How long a hash nobody waits for any more goes on (last in line) for a
/// retry of its caller to come and take it up again (red team 42ident F2:
/// a victim whose hash takes longer than its identification's time under
/// its fair share retried, and each retry started again).
pub const RETRY_WITHIN: Duration = Duration::from_secs(5);

/// Hash threads out at once (stuck ones included), one per spender: a
/// thread reads its file (which may hang) and waits for places in line,
/// and costs little while it waits. Enough that the fair share, not the
/// threads, is what bounds a caller among many hashing (red team 43ident:
/// with 64, 48 spenders hashing refused every other caller outright).
pub const HASH_THREADS: usize = 128;

/// Of [`HASH_THREADS`], those only callers a rule names by uid or pod
/// ([`Class::Named`]) may take: 64 uids nobody names, with hashes out,
/// refused a named victim for 20 s (red team 42ident).
pub const NAMED_THREADS: usize = 32;

/// The process's hashing budget and line (each waiter woken on its own
/// when it may take a place, [`Budget::wake`]).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
static BUDGET: std::sync::LazyLock<Mutex<Budget>> =
    std::sync::LazyLock::new(|| Mutex::new(Budget::default()));

/// The cache key: (device, inode, size, mtime s/ns, ctime s/ns).
#[cfg(target_os = "linux")]
type Key = (u64, u64, u64, i64, i64, i64, i64);

/// The executable a process runs, taken once at identification: its
/// `/proc/<pid>/exe` link opened `O_PATH` (the file itself, whatever
/// namespace it lives in; no open of the file is sent to its file system,
/// so this never waits on a FUSE or network server), and its cache key
/// from the attributes the kernel holds (`AT_STATX_DONT_SYNC`). The digest
/// is of this file (red team 40async: a hash thread that opened
/// `/proc/<pid>/exe` later hashed the program the process had exec'd
/// since), and a digest kept for its key answers at once, with no hash
/// thread (red team 40async: 64 stuck hash threads refused even callers
/// whose digest was cached).
#[cfg(target_os = "linux")]
pub struct Exe {
    fd: std::os::fd::OwnedFd,
    key: Key,
}

#[cfg(target_os = "linux")]
impl Exe {
    /// The executable `proc_exe` (`/proc/<pid>/exe`) names now; `None` if
    /// it cannot be opened or is not a regular file.
    pub fn of(proc_exe: &std::path::Path) -> Option<Exe> {
        use nix::fcntl::OFlag;
        let fd = nix::fcntl::open(
            proc_exe,
            OFlag::O_PATH | OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .ok()?;
        let key = cached_key(&fd)?;
        Some(Exe { fd, key })
    }

    /// Its device and inode.
    pub fn id(&self) -> (u64, u64) {
        (self.key.0, self.key.1)
    }

    /// The digest kept for this file as it is, if any.
    pub fn kept(&self) -> Option<String> {
        DIGESTS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_mut()
            .and_then(|c| c.find(&self.key))
    }
}

/// The cache key of a regular file from the attributes the kernel holds
/// (no request to a network or FUSE server).
#[cfg(target_os = "linux")]
fn cached_key(fd: &std::os::fd::OwnedFd) -> Option<Key> {
    use std::os::fd::AsRawFd;
    let mut stx = std::mem::MaybeUninit::<libc::statx>::zeroed();
    // SAFETY: an empty NUL-terminated path with AT_EMPTY_PATH on an open
    // descriptor; `stx` is writable memory of the right size, zeroed, that
    // the kernel fills on success.
    let r = unsafe {
        libc::statx(
            fd.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH | libc::AT_STATX_DONT_SYNC,
            libc::STATX_BASIC_STATS,
            stx.as_mut_ptr(),
        )
    };
    if r != 0 {
        return None;
    }
    // SAFETY: statx succeeded and filled it (zeroed before).
    let stx = unsafe { stx.assume_init() };
    if u32::from(stx.stx_mode) & libc::S_IFMT != libc::S_IFREG {
        return None;
    }
    Some((
        libc::makedev(stx.stx_dev_major, stx.stx_dev_minor),
        stx.stx_ino,
        stx.stx_size,
        stx.stx_mtime.tv_sec,
        i64::from(stx.stx_mtime.tv_nsec),
        stx.stx_ctime.tv_sec,
        i64::from(stx.stx_ctime.tv_nsec),
    ))
}

#[cfg(target_os = "linux")]
static DIGESTS: Mutex<Option<Kept<Key>>> = Mutex::new(None);

/// Digests kept per spender: a spender's inserts evict only its own.
pub const KEPT_PER_SPENDER: usize = 8;

/// Digests kept in all; past it the spender keeping the most loses its
/// oldest (never a spender keeping fewer than the largest).
pub const KEPT_IN_ALL: usize = 1024;

/// The digest cache, kept per spender: whoever hashed a file keeps its
/// digest; a lookup finds any spender's (a digest is a fact about the
/// file), but filling the cache evicts only the filler's own entries, so
/// another caller cannot make a victim re-hash (and pay for) its
/// executable. Past [`KEPT_IN_ALL`], the entry used least lately goes,
/// whoever keeps it (red team 42ident: 1030 uids keeping one each evicted
/// a victim's digest, which it then re-hashed on every call until its
/// budget was spent; 43ident: evicting among the spenders keeping most
/// picked the victim keeping two; a digest a caller uses stays).
#[derive(Debug)]
pub struct Kept<K> {
    by: HashMap<Spender, Vec<(K, String, u64)>>,
    len: usize,
    /// Counts lookups and inserts: an entry's last use.
    tick: u64,
}

impl<K: PartialEq> Default for Kept<K> {
    fn default() -> Self {
        Kept {
            by: HashMap::new(),
            len: 0,
            tick: 0,
        }
    }
}

impl<K: PartialEq> Kept<K> {
    /// The digest kept for `key`, by any spender (a use of it).
    pub fn find(&mut self, key: &K) -> Option<String> {
        self.tick += 1;
        let tick = self.tick;
        self.by
            .values_mut()
            .flat_map(|v| v.iter_mut())
            .find(|(k, _, _)| k == key)
            .map(|(_, d, used)| {
                *used = tick;
                d.clone()
            })
    }

    /// Keep `who`'s digest of `key`.
    pub fn insert(&mut self, who: &Spender, key: K, digest: String) {
        self.tick += 1;
        let own = self.by.entry(who.clone()).or_default();
        if let Some(i) = own.iter().position(|(k, _, _)| *k == key) {
            own.remove(i);
            self.len -= 1;
        } else if own.len() >= KEPT_PER_SPENDER {
            if let Some(i) = least_used(own) {
                own.remove(i);
                self.len -= 1;
            }
        }
        own.push((key, digest, self.tick));
        self.len += 1;
        while self.len > KEPT_IN_ALL {
            let Some((who, i)) = self
                .by
                .iter()
                .filter_map(|(w, v)| least_used(v).map(|i| (w, i, v[i].2)))
                .min_by_key(|(_, _, used)| *used)
                .map(|(w, i, _)| (w.clone(), i))
            else {
                break;
            };
            let v = self.by.get_mut(&who).expect("just found");
            v.remove(i);
            self.len -= 1;
            if v.is_empty() {
                self.by.remove(&who);
            }
        }
    }
}

/// The entry of `v` used least lately.
fn least_used<K>(v: &[(K, String, u64)]) -> Option<usize> {
    (0..v.len()).min_by_key(|&i| v[i].2)
}

/// A hash thread out.
#[cfg(target_os = "linux")]
#[derive(Clone, Copy, Debug)]
struct Out {
    /// When it last made progress.
    progress: Instant,
    /// Until when an identification waits for it (the latest deadline of
    /// those that do): past it, nobody does ([`Class::Unwanted`]).
    wanted: Instant,
}

/// The hash threads out, per spender.
#[cfg(target_os = "linux")]
static OUT: Mutex<Option<HashMap<Spender, Out>>> = Mutex::new(None);
#[cfg(target_os = "linux")]
static OUT_CHANGED: tokio::sync::Notify = tokio::sync::Notify::const_new();

#[cfg(target_os = "linux")]
fn out() -> std::sync::MutexGuard<'static, Option<HashMap<Spender, Out>>> {
    OUT.lock().unwrap_or_else(|p| p.into_inner())
}

/// `who`'s hash thread made progress.
#[cfg(target_os = "linux")]
fn progress(who: &Spender) {
    let now = Instant::now();
    if let Some(o) = out().get_or_insert_with(HashMap::new).get_mut(who) {
        o.progress = now;
    }
    budget().progress(who, now);
}

/// SHA-256 of the file the process's `/proc/<pid>/exe` names (a link the
/// process can set with `prctl(PR_SET_MM)`: it proves no program): the
/// `/proc/<pid>/exe` link is opened (the file itself, in whatever mount
/// namespace, even deleted), never its path text. `Ok(None)`: not a
/// regular file, too large, unreadable, or changed while read.
///
/// The file is opened and read on a thread of its own (one per spender,
/// [`HASH_THREADS`] in all, of which only a caller of [`Class::Named`] may
/// take the last [`NAMED_THREADS`]), waited for until `until` while it makes
/// progress: a file system that does not answer costs this caller
/// [`STALL`] and a thread of its own, and nobody else anything. While the
/// spender has a hash out already, waits for it (it may be this very
/// file) the same way. The waits hold no thread (39caller B: an
/// identification that waited for its hash on the blocking pool held one
/// of the 64 identification slots, and victims whose digest was cached
/// queued behind 64 such waits).
#[cfg(target_os = "linux")]
pub async fn exe_digest(
    exe: Exe,
    who: Spender,
    class: Class,
    until: Instant,
) -> Result<Option<String>, Refused> {
    if let Some(d) = exe.kept() {
        return Ok(Some(d));
    }
    let stalled = |at: Instant| at.elapsed() >= STALL;
    loop {
        // Registered before the map is looked at: a hash that ends in
        // between still wakes this wait.
        let changed = OUT_CHANGED.notified();
        {
            let now = Instant::now();
            let mut g = out();
            let map = g.get_or_insert_with(HashMap::new);
            let room = map.len()
                < if class == Class::Named {
                    HASH_THREADS
                } else {
                    HASH_THREADS - NAMED_THREADS
                };
            match map.get_mut(&who) {
                None if room => {
                    map.insert(
                        who.clone(),
                        Out {
                            progress: now,
                            wanted: until,
                        },
                    );
                    break;
                }
                // Every thread it may take is out: wait for one until its
                // deadline (hashes nobody waits for stop, and give theirs
                // back), never refused at once (red team 42ident F1).
                None if now >= until => return Err(Refused::Busy),
                None => {}
                Some(o) if stalled(o.progress) => return Err(Refused::Stalled),
                Some(_) if now >= until => return Err(Refused::Busy),
                // Waits for the spender's hash out: it is wanted till then.
                Some(o) => o.wanted = o.wanted.max(until),
            }
        }
        let wait = until
            .saturating_duration_since(Instant::now())
            .min(STALL / 4);
        let _ = tokio::time::timeout(wait, changed).await;
    }
    let (tx, mut rx) = tokio::sync::oneshot::channel();
    let w = who.clone();
    let spawned = std::thread::Builder::new()
        .name("csi-exe-hash".into())
        .spawn(move || {
            let r = hash_file(&exe, &w, class, until);
            if let Some(m) = out().as_mut() {
                m.remove(&w);
            }
            OUT_CHANGED.notify_waiters();
            let _ = tx.send(r);
        });
    if spawned.is_err() {
        if let Some(m) = out().as_mut() {
            m.remove(&who);
        }
        return Ok(None);
    }
    loop {
        let wait = until
            .saturating_duration_since(Instant::now())
            .min(STALL / 4);
        match tokio::time::timeout(wait, &mut rx).await {
            Ok(Ok(r)) => return r,
            Ok(Err(_)) => return Ok(None),
            Err(_) => {
                if Instant::now() >= until {
                    return Err(Refused::Busy);
                }
                let at = out().as_ref().and_then(|m| m.get(&who).map(|o| o.progress));
                if at.is_some_and(stalled) {
                    return Err(Refused::Stalled);
                }
            }
        }
    }
}

#[cfg(target_os = "linux")]
fn budget() -> std::sync::MutexGuard<'static, Budget> {
    BUDGET.lock().unwrap_or_else(|p| p.into_inner())
}

/// Waits, in line, for `who`'s turn at a hashing place until `until`:
/// `Ok(true)` when it has one; `Ok(false)` when `found` finds the digest
/// meanwhile (another spender hashed the same file). Past `until` it
/// leaves the line, [`Refused::Busy`]. Each time it looks, its class is
/// taken again ([`wanted`]: a retry may have come for a hash nobody
/// waited for, or its callers left). It sleeps only while the line has
/// not changed since it last looked (red team 41ident N1: a wake-up sent
/// while it looked away was lost, and the place stayed idle).
#[cfg(target_os = "linux")]
fn wait_turn(
    who: &Spender,
    class: Class,
    until: Instant,
    found: Option<&dyn Fn() -> Option<String>>,
) -> Result<bool, Refused> {
    let mut g = budget();
    loop {
        let now = Instant::now();
        if g.acquire(who, now) == Turn::Go {
            return Ok(true);
        }
        if now >= until {
            g.done_waiting(who);
            g.wake(now);
            return Err(Refused::Busy);
        }
        let seen = g.generation();
        // (`acquire` counted the wait as progress of the budget's; the
        // identification's stall watch is told too.)
        drop(g);
        progress(who);
        if found.is_some_and(|f| f().is_some()) {
            return Ok(false);
        }
        // A retry may have come for it meanwhile, or its callers left.
        let Some(now_class) = wanted(who, class) else {
            return Err(Refused::Busy);
        };
        g = budget();
        if g.reclass(who, now_class) {
            g.wake(Instant::now());
            continue;
        }
        let Some(wake) = g.waker(who) else { continue };
        g = wake
            .wait_timeout_while(g, (until - now).min(STALL / 4), |b| b.generation() == seen)
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
}

/// Whether an identification still waits for `who`'s hash: its class if
/// so, [`Class::Unwanted`] if not; `None` when nobody has for
/// [`RETRY_WITHIN`] and it is not a named caller's: it stops.
#[cfg(target_os = "linux")]
fn wanted(who: &Spender, class: Class) -> Option<Class> {
    let wanted = out().as_ref().and_then(|m| m.get(who).map(|o| o.wanted));
    let now = Instant::now();
    match wanted {
        Some(w) if now < w => Some(class),
        Some(w) if class == Class::Named || now < w + RETRY_WITHIN => Some(Class::Unwanted),
        _ => None,
    }
}

/// The hash itself, on its thread (see [`exe_digest`]).
#[cfg(target_os = "linux")]
fn hash_file(
    exe: &Exe,
    who: &Spender,
    class: Class,
    until: Instant,
) -> Result<Option<String>, Refused> {
    use sha2::Digest;
    use std::io::Read;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;
    // The file taken at identification, opened for reading now (on this
    // thread: the open may wait on its file system).
    let Ok(mut f) = std::fs::File::open(format!("/proc/self/fd/{}", exe.fd.as_raw_fd())) else {
        return Ok(None);
    };
    progress(who);
    let Ok(m) = f.metadata() else {
        return Ok(None);
    };
    progress(who);
    if !m.is_file() || m.len() > MAX_HASHED || (m.dev(), m.ino()) != (exe.key.0, exe.key.1) {
        return Ok(None);
    }
    let stamp = |m: &std::fs::Metadata| {
        (
            m.len(),
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec(),
        )
    };
    let (len, mt, mtn, ct, ctn) = stamp(&m);
    let key = (m.dev(), m.ino(), len, mt, mtn, ct, ctn);
    let kept = || {
        DIGESTS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_mut()
            .and_then(|c| c.find(&key))
    };
    if let Some(d) = kept() {
        return Ok(Some(d));
    }
    budget().start(who, m.len(), class, Instant::now())?;
    struct Done<'a>(&'a Spender);
    impl Drop for Done<'_> {
        fn drop(&mut self) {
            let mut g = budget();
            g.done(self.0);
            g.wake(Instant::now());
        }
    }
    let _done = Done(who);
    let mut h = sha2::Sha256::new();
    let mut buf = vec![0u8; PROGRESS_BYTES];
    let mut total = 0u64;
    let mut unmarked = 0usize;
    let started = Instant::now();
    let mut first = true;
    loop {
        if started.elapsed() >= HASH_WITHIN {
            return Ok(None);
        }
        // Read without a place: a slow file system keeps nobody else from
        // hashing.
        let Ok(n) = f.read(&mut buf) else {
            return Ok(None);
        };
        // Progress is a buffer's worth read (or the end), not any read
        // that returns: a file system that hands out a byte at a time
        // (a read returning just before each STALL) is stalled too.
        unmarked += n;
        if n == 0 || unmarked >= PROGRESS_BYTES {
            progress(who);
            unmarked = 0;
        }
        if n == 0 {
            break;
        }
        total += n as u64;
        if total > MAX_HASHED {
            return Ok(None);
        }
        // A place to hash this buffer, in line. The first wait ends at the
        // identification's deadline (or when another spender's hash of
        // this very file is kept); later ones at the hash's own.
        let (until, found): (Instant, Option<&dyn Fn() -> Option<String>>) = if first {
            (until, Some(&kept))
        } else {
            (started + HASH_WITHIN, None)
        };
        first = false;
        // Nobody waits for it any more (its callers gave up or are gone):
        // it goes on, to keep the digest for a retry, only when nobody
        // else is in line, and only for RETRY_WITHIN unless a named
        // caller's (red team 41ident N2: 64 hashes of callers that had
        // left held every hash thread for 20 s).
        let Some(now_class) = wanted(who, class) else {
            return Ok(None);
        };
        {
            let mut g = budget();
            if g.reclass(who, now_class) {
                g.wake(Instant::now());
            }
        }
        if !wait_turn(who, class, until, found)? {
            return Ok(kept());
        }
        h.update(&buf[..n]);
        {
            let mut g = budget();
            let now = Instant::now();
            g.release(who, n as u64, now);
            g.wake(now);
        }
    }
    // Changed while read: no digest rather than one of a mixture.
    if f.metadata().ok().map(|a| stamp(&a)) != Some(stamp(&m)) {
        return Ok(None);
    }
    let d = hex(&h.finalize());
    let mut all = DIGESTS.lock().unwrap_or_else(|p| p.into_inner());
    all.get_or_insert_with(Kept::default)
        .insert(who, key, d.clone());
    // Before `_done` wakes the waiters: they find it kept.
    drop(all);
    Ok(Some(d))
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(uid: u32) -> Spender {
        (Some(uid), None)
    }

    #[test]
    fn sha2_matches_the_known_digests() {
        use sha2::Digest;
        assert_eq!(
            hex(&sha2::Sha256::digest(b"")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            hex(&sha2::Sha256::digest(b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn other_spenders_cannot_evict_a_callers_digest() {
        // The red-team's attack: 8 uids insert 70 digests of their own
        // small files between two connections of the victim.
        let mut k = Kept::default();
        k.insert(&who(0), 7u64, "victim".into());
        for i in 0..70u64 {
            k.insert(&who(1000 + (i % 8) as u32), 100 + i, format!("d{i}"));
        }
        assert_eq!(k.find(&7).as_deref(), Some("victim"));
        // Many spenders past the total, the victim using its digest now
        // and then (each connection): the entries used least lately go.
        for i in 0..(KEPT_IN_ALL as u64 * 2) {
            k.insert(&who(2000 + (i % 512) as u32), 10_000 + i, "x".into());
            if i % 500 == 0 {
                assert_eq!(k.find(&7).as_deref(), Some("victim"));
            }
        }
        assert!(k.len <= KEPT_IN_ALL);
        assert_eq!(k.find(&7).as_deref(), Some("victim"));
        // Many spenders keeping one each, past the total, the victim
        // keeping two: the entries used least lately go, not the digests
        // its caller keeps using.
        k.insert(&who(0), 8u64, "victim-b".into());
        for i in 0..(KEPT_IN_ALL as u64 * 3) {
            k.insert(&who(100_000 + i as u32), 1_000_000 + i, "y".into());
            assert_eq!(k.find(&7).as_deref(), Some("victim"));
            if i % 100 == 0 {
                assert_eq!(k.find(&8).as_deref(), Some("victim-b"));
            }
        }
        // A spender's own inserts evict its own oldest.
        for i in 0..KEPT_PER_SPENDER as u64 {
            k.insert(&who(0), 50 + i, "own".into());
        }
        assert_eq!(k.find(&7), None);
    }
}
