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
//!   never while it reads one, and waits for it in line, first come first
//!   served ([`Budget::acquire`]), so a file read slowly holds no place.
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
use std::time::{Duration, Instant};

/// Executables larger than this are not hashed (`exe_sha256` left out).
pub const MAX_HASHED: u64 = 512 << 20;

/// Bytes one spender may hash at once (a full bucket).
pub const BUDGET_BYTES: u64 = 1 << 30;

/// How long an empty bucket takes to fill up again.
pub const BUDGET_REFILL: Duration = Duration::from_secs(600);

/// Files hashed at the same time by the whole process, at most: 2.
pub const HASHING_AT_ONCE: usize = 2;

/// Files hashed at the same time here: at most half the CPUs (at least
/// one, at most [`HASHING_AT_ONCE`]), so that hashing, which is all CPU,
/// always leaves CPUs to the calls (on 2 CPUs, two hashes at once doubled
/// another endpoint's PathExists p99 in `identity_stall_unix`).
pub fn hashing_at_once() -> usize {
    static AT_ONCE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *AT_ONCE.get_or_init(|| {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        (cpus / 2).clamp(1, HASHING_AT_ONCE)
    })
}

/// How long a hash may run: a hash that takes longer stops (no digest).
pub const HASH_WITHIN: Duration = Duration::from_secs(30);

/// A hash that made no progress (no open or look-up returned, less than
/// [`PROGRESS_BYTES`] read) for this long is stalled: it stops counting against [`HASHING_AT_ONCE`],
/// and no identification waits for it any more.
pub const STALL: Duration = Duration::from_secs(1);

/// Bytes read that count as progress of a hash: a hash reading slower
/// than this per [`STALL`] is stalled (red team 39caller A: an executable
/// served one byte every 0.9 s held the only hashing place for 30 s).
pub const PROGRESS_BYTES: usize = 256 << 10;

/// Hash threads out at once (stuck ones included), one per spender.
pub const HASH_THREADS: usize = 64;

/// Who pays for a hash: the caller's pod when it is in one (whatever uid
/// it runs as: root in a container may take any uid, so a budget per uid
/// and pod gave one pod as many shares of the hashing places as it liked,
/// red team 40ident), else its uid.
pub type Spender = (Option<u32>, Option<String>);

/// The [`Spender`] of a caller with `uid` in `pod`.
pub fn spender(uid: Option<u32>, pod: &Option<String>) -> Spender {
    match pod {
        Some(p) => (None, Some(p.to_ascii_lowercase())),
        None => (uid, None),
    }
}

/// Why a digest was not computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// The spender's budget cannot pay for this file now.
    Budget,
    /// The spender already had a hash running, or the process had
    /// [`HASHING_AT_ONCE`] (or [`HASH_THREADS`]), until the
    /// identification's time was up.
    Busy,
    /// The spender's hash made no progress for [`STALL`] (its executable's
    /// file system does not answer).
    Stalled,
}

impl Refused {
    pub fn reason(self) -> &'static str {
        match self {
            Refused::Budget => "exe_sha256 not computed: this caller's hashing budget is spent",
            Refused::Busy => {
                "exe_sha256 not computed: other hashes ran until the identification's time was up"
            }
            Refused::Stalled => {
                "exe_sha256 not computed: reading this caller's executable made no progress (its file system does not answer)"
            }
        }
    }
}

#[derive(Debug)]
struct Bucket {
    bytes: u64,
    at: Instant,
    /// When this spender's hash last made progress (`None`: not hashing).
    hashing: Option<Instant>,
    /// When its hash took the hashing place this turn (`None`: it holds
    /// none: not hashing, or waiting in line for its next turn).
    turn: Option<Instant>,
}

/// What a spender's hash may do now ([`Budget::acquire`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turn {
    /// It holds a hashing place: read and hash.
    Go,
    /// It is in line for a place: wait (for [`HASH_ENDED`]) and ask again.
    Wait,
}

/// Every spender's bucket, and the line for the hashing places.
#[derive(Debug)]
pub struct Budget {
    buckets: HashMap<Spender, Bucket>,
    /// Hashes at once for the whole process ([`hashing_at_once`]).
    at_once: usize,
    /// Spenders waiting for a place, first come first served.
    line: std::collections::VecDeque<Spender>,
}

impl Default for Budget {
    fn default() -> Self {
        Budget::with_at_once(hashing_at_once())
    }
}

/// Buckets kept at most; full buckets go first (they carry no debt).
const MAX_SPENDERS: usize = 4096;

impl Budget {
    /// A budget that lets `at_once` files be hashed at the same time.
    pub fn with_at_once(at_once: usize) -> Self {
        Budget {
            buckets: HashMap::new(),
            at_once,
            line: std::collections::VecDeque::new(),
        }
    }

    /// Take `bytes` from `who`'s bucket at `now` for a hash, and a place
    /// now if one is free ([`Refused::Busy`] if not: tests).
    pub fn spend(&mut self, who: &Spender, bytes: u64, now: Instant) -> Result<(), Refused> {
        self.start(who, bytes, now)?;
        match self.acquire(who, now) {
            Turn::Go => {
                // All of it at once.
                if let Some(b) = self.buckets.get_mut(who) {
                    b.bytes = b.bytes.saturating_sub(bytes);
                }
                Ok(())
            }
            Turn::Wait => {
                self.done(who);
                Err(Refused::Busy)
            }
        }
    }

    /// Take `bytes` from `who`'s bucket at `now` for a hash (one at a time
    /// per spender); the caller must call [`Budget::done`] with the same
    /// `who` afterwards. The hash then takes a place for each buffer it
    /// hashes ([`Budget::acquire`], [`Budget::release`]).
    pub fn start(&mut self, who: &Spender, bytes: u64, now: Instant) -> Result<(), Refused> {
        if self.buckets.len() >= MAX_SPENDERS {
            self.buckets
                .retain(|_, b| b.hashing.is_some() || refilled(b, now) < BUDGET_BYTES);
        }
        let b = self.buckets.entry(who.clone()).or_insert(Bucket {
            bytes: BUDGET_BYTES,
            at: now,
            hashing: None,
            turn: None,
        });
        b.bytes = refilled(b, now);
        b.at = now;
        // A spender that cannot pay is refused at once, never left waiting
        // (holding its identification slots) for others' hashes to end.
        if b.bytes < bytes {
            return Err(Refused::Budget);
        }
        if b.hashing.is_some() {
            return Err(Refused::Busy);
        }
        // Paid as it is hashed, buffer by buffer ([`Budget::release`]): a
        // hash cut short costs only what it hashed (red team 40ident).
        b.hashing = Some(now);
        Ok(())
    }

    /// A place for `who` to hash one buffer: taken if one is free and
    /// nobody waits ahead of it, else `who` is (or stays) in line. Places
    /// are held only while hashing, never while reading: a file read
    /// slowly holds none (red team 39r2 F5: executables served just fast
    /// enough to count as progress held the only place, and a victim that
    /// needed a hash waited past its deadline). The line is ordered by
    /// what each spender has left of its budget, most first (then by
    /// arrival): a spender that has hashed little lately goes ahead of
    /// ones that keep hashing (red team 40ident: with places taken in
    /// turns, a victim among N spenders hashing got one buffer in N+1).
    pub fn acquire(&mut self, who: &Spender, now: Instant) -> Turn {
        if !self.line.contains(who) {
            self.line.push_back(who.clone());
        }
        let left = |w: &Spender| {
            self.buckets
                .get(w)
                .map_or(BUDGET_BYTES, |b| refilled(b, now))
        };
        let mut ranked: Vec<(usize, u64, &Spender)> = self
            .line
            .iter()
            .enumerate()
            .map(|(i, w)| (i, left(w), w))
            .collect();
        ranked.sort_by_key(|(i, left, _)| (std::cmp::Reverse(*left), *i));
        let first = ranked
            .iter()
            .take(self.at_once.max(1))
            .any(|(_, _, w)| *w == who);
        if let Some(b) = self.buckets.get_mut(who) {
            // Waiting in line is progress of its own.
            b.hashing = Some(now);
        }
        if !first || self.hashing(now) >= self.at_once {
            return Turn::Wait;
        }
        self.line.retain(|w| w != who);
        if let Some(b) = self.buckets.get_mut(who) {
            b.turn = Some(now);
        }
        Turn::Go
    }

    /// `who` gives up waiting for a place.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    fn done_waiting(&mut self, who: &Spender) {
        self.line.retain(|w| w != who);
    }

    /// `who` has hashed a buffer of `bytes` (paid now): the place is free.
    pub fn release(&mut self, who: &Spender, bytes: u64, now: Instant) {
        if let Some(b) = self.buckets.get_mut(who) {
            b.turn = None;
            b.bytes = refilled(b, now).saturating_sub(bytes);
            b.at = now;
        }
    }

    /// Hashes that count against [`HASHING_AT_ONCE`] at `now`: those that
    /// hold a place and made progress less than [`STALL`] ago. A stuck
    /// hash (an executable on a hung file system, a read that never
    /// returns) keeps only its own spender busy.
    fn hashing(&self, now: Instant) -> usize {
        self.buckets
            .values()
            .filter(|b| b.turn.is_some())
            .filter_map(|b| b.hashing)
            .filter(|at| now.saturating_duration_since(*at) < STALL)
            .count()
    }

    /// `who`'s hash made progress at `now`.
    pub fn progress(&mut self, who: &Spender, now: Instant) {
        if let Some(b) = self.buckets.get_mut(who) {
            if b.hashing.is_some() {
                b.hashing = Some(now);
            }
        }
    }

    /// The hash `who` started is over (or gave up waiting).
    pub fn done(&mut self, who: &Spender) {
        if let Some(b) = self.buckets.get_mut(who) {
            b.hashing = None;
            b.turn = None;
        }
        self.line.retain(|w| w != who);
    }
}

/// A bucket's bytes at `now`.
fn refilled(b: &Bucket, now: Instant) -> u64 {
    let elapsed = now.saturating_duration_since(b.at).as_secs_f64();
    let gained = (BUDGET_BYTES as f64 * elapsed / BUDGET_REFILL.as_secs_f64()) as u64;
    b.bytes.saturating_add(gained).min(BUDGET_BYTES)
}

/// The process's hashing budget, and a wake-up when a hash ends.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
static BUDGET: std::sync::LazyLock<Mutex<Budget>> =
    std::sync::LazyLock::new(|| Mutex::new(Budget::default()));
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
static HASH_ENDED: std::sync::Condvar = std::sync::Condvar::new();

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
            .as_ref()
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
/// executable.
#[derive(Debug)]
pub struct Kept<K> {
    by: HashMap<Spender, Vec<(K, String)>>,
    len: usize,
}

impl<K: PartialEq> Default for Kept<K> {
    fn default() -> Self {
        Kept {
            by: HashMap::new(),
            len: 0,
        }
    }
}

impl<K: PartialEq> Kept<K> {
    /// The digest kept for `key`, by any spender.
    pub fn find(&self, key: &K) -> Option<String> {
        self.by
            .values()
            .flat_map(|v| v.iter())
            .find(|(k, _)| k == key)
            .map(|(_, d)| d.clone())
    }

    /// Keep `who`'s digest of `key`.
    pub fn insert(&mut self, who: &Spender, key: K, digest: String) {
        let own = self.by.entry(who.clone()).or_default();
        if let Some(i) = own.iter().position(|(k, _)| *k == key) {
            own.remove(i);
            self.len -= 1;
        } else if own.len() >= KEPT_PER_SPENDER {
            own.remove(0);
            self.len -= 1;
        }
        own.push((key, digest));
        self.len += 1;
        while self.len > KEPT_IN_ALL {
            let Some(largest) = self
                .by
                .iter()
                .max_by_key(|(_, v)| v.len())
                .map(|(w, _)| w.clone())
            else {
                break;
            };
            let v = self.by.get_mut(&largest).expect("just found");
            v.remove(0);
            self.len -= 1;
            if v.is_empty() {
                self.by.remove(&largest);
            }
        }
    }
}

/// The hash threads out, per spender: when each last made progress.
#[cfg(target_os = "linux")]
static OUT: Mutex<Option<HashMap<Spender, Instant>>> = Mutex::new(None);
#[cfg(target_os = "linux")]
static OUT_CHANGED: tokio::sync::Notify = tokio::sync::Notify::const_new();

#[cfg(target_os = "linux")]
fn out() -> std::sync::MutexGuard<'static, Option<HashMap<Spender, Instant>>> {
    OUT.lock().unwrap_or_else(|p| p.into_inner())
}

/// `who`'s hash thread made progress.
#[cfg(target_os = "linux")]
fn progress(who: &Spender) {
    let now = Instant::now();
    if let Some(at) = out().get_or_insert_with(HashMap::new).get_mut(who) {
        *at = now;
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
/// [`HASH_THREADS`] in all), waited for until `until` while it makes
/// progress: a file system that does not answer costs this caller
/// [`STALL`] and a thread of its own, and nobody else anything. While the
/// spender has a hash out already, waits for it (it may be this very
/// file) the same way. The waits hold no thread (39caller B: an
/// identification that waited for its hash on the blocking pool held one
/// of the 64 identification slots, and victims whose digest was cached
/// queued behind 64 such waits).
#[cfg(target_os = "linux")]
pub async fn exe_digest(exe: Exe, who: Spender, until: Instant) -> Result<Option<String>, Refused> {
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
            match map.get(&who).copied() {
                None if map.len() < HASH_THREADS => {
                    map.insert(who.clone(), now);
                    break;
                }
                None => return Err(Refused::Busy),
                Some(at) if stalled(at) => return Err(Refused::Stalled),
                Some(_) if now >= until => return Err(Refused::Busy),
                Some(_) => {}
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
            let r = hash_file(&exe, &w, until);
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
                let at = out().as_ref().and_then(|m| m.get(&who).copied());
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
/// leaves the line, [`Refused::Busy`].
#[cfg(target_os = "linux")]
fn wait_turn(
    who: &Spender,
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
            return Err(Refused::Busy);
        }
        // (`acquire` counted the wait as progress of the budget's; the
        // identification's stall watch is told too.)
        drop(g);
        progress(who);
        if found.is_some_and(|f| f().is_some()) {
            return Ok(false);
        }
        g = budget();
        g = HASH_ENDED
            .wait_timeout(g, (until - now).min(STALL / 4))
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
}

/// The hash itself, on its thread (see [`exe_digest`]).
#[cfg(target_os = "linux")]
fn hash_file(exe: &Exe, who: &Spender, until: Instant) -> Result<Option<String>, Refused> {
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
            .as_ref()
            .and_then(|c| c.find(&key))
    };
    if let Some(d) = kept() {
        return Ok(Some(d));
    }
    budget().start(who, m.len(), Instant::now())?;
    struct Done<'a>(&'a Spender);
    impl Drop for Done<'_> {
        fn drop(&mut self) {
            budget().done(self.0);
            HASH_ENDED.notify_all();
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
        if !wait_turn(who, until, found)? {
            return Ok(kept());
        }
        h.update(&buf[..n]);
        budget().release(who, n as u64, Instant::now());
        HASH_ENDED.notify_all();
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
    fn a_spender_past_its_budget_is_refused_and_others_are_not() {
        let mut b = Budget::with_at_once(HASHING_AT_ONCE);
        let t = Instant::now();
        let big = 500 << 20;
        // Touching one's own executable: a new key each time, so a new hash.
        b.spend(&who(1000), big, t).unwrap();
        b.done(&who(1000));
        b.spend(&who(1000), big, t).unwrap();
        b.done(&who(1000));
        assert_eq!(b.spend(&who(1000), big, t), Err(Refused::Budget));
        // Another uid, or the same uid in a pod, pays from its own bucket.
        b.spend(&who(0), big, t).unwrap();
        b.done(&who(0));
        let in_pod = (Some(1000), Some("pod-a".to_string()));
        b.spend(&in_pod, big, t).unwrap();
        b.done(&in_pod);
        // The bucket refills over time.
        let later = t + BUDGET_REFILL / 2;
        b.spend(&who(1000), big, later).unwrap();
        b.done(&who(1000));
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
        // Many spenders past the total: the largest lose theirs first.
        for i in 0..(KEPT_IN_ALL as u64 * 2) {
            k.insert(&who(2000 + (i % 512) as u32), 10_000 + i, "x".into());
        }
        assert!(k.len <= KEPT_IN_ALL);
        assert_eq!(k.find(&7).as_deref(), Some("victim"));
        // A spender's own inserts evict its own oldest.
        for i in 0..KEPT_PER_SPENDER as u64 {
            k.insert(&who(0), 50 + i, "own".into());
        }
        assert_eq!(k.find(&7), None);
    }

    #[test]
    fn one_hash_per_spender_and_a_bound_for_the_process() {
        let mut b = Budget::with_at_once(HASHING_AT_ONCE);
        let t = Instant::now();
        b.spend(&who(1), 1, t).unwrap();
        assert_eq!(b.spend(&who(1), 1, t), Err(Refused::Busy));
        b.spend(&who(2), 1, t).unwrap();
        assert_eq!(b.spend(&who(3), 1, t), Err(Refused::Busy));
        // A spender that cannot pay is told so at once, not "busy".
        assert_eq!(b.spend(&who(4), BUDGET_BYTES + 1, t), Err(Refused::Budget));
        b.done(&who(1));
        b.spend(&who(3), 1, t).unwrap();
        b.done(&who(1));
        b.done(&who(2));
        b.done(&who(3));
        assert_eq!(b.hashing(t), 0);
    }

    #[test]
    fn places_are_held_only_to_hash_a_buffer_first_come_first_served() {
        // Red team 39r2 F5: two spenders whose executables are read just
        // fast enough to count as progress held the places; a victim that
        // needed a hash waited past its deadline.
        let mut b = Budget::with_at_once(1);
        let t = Instant::now();
        for n in [1, 2, 0] {
            b.start(&who(n), 1, t).unwrap();
        }
        // 1 and 2 are reading (slowly): they hold no place, so the victim
        // takes it at once.
        assert_eq!(b.acquire(&who(0), t), Turn::Go);
        // While it hashes a buffer, the others wait in line, in order.
        assert_eq!(b.acquire(&who(2), t), Turn::Wait);
        assert_eq!(b.acquire(&who(1), t), Turn::Wait);
        b.release(&who(0), 0, t);
        // The victim's next buffer goes behind them.
        assert_eq!(b.acquire(&who(0), t), Turn::Wait);
        assert_eq!(b.acquire(&who(1), t), Turn::Wait, "2 came first");
        assert_eq!(b.acquire(&who(2), t), Turn::Go);
        b.release(&who(2), 0, t);
        assert_eq!(b.acquire(&who(1), t), Turn::Go);
        b.release(&who(1), 0, t);
        assert_eq!(b.acquire(&who(0), t), Turn::Go);
        b.release(&who(0), 0, t);
        for n in [0, 1, 2] {
            b.done(&who(n));
        }
        assert_eq!(b.hashing(t), 0);
        assert!(b.line.is_empty());
    }

    #[test]
    fn a_hash_pays_what_it_hashed_and_spenders_with_more_left_go_first() {
        // Red team 40ident: with turns, a victim among N spenders hashing
        // got one buffer in N+1 and was refused at 2 s; a hash cut short
        // had been charged its whole size.
        let mut b = Budget::with_at_once(1);
        let t = Instant::now();
        for n in 0..=3 {
            b.start(&who(n), 300 << 20, t).unwrap();
        }
        // 1 hashed 200 MiB, 2 hashed 100 MiB; 3 holds the place now.
        assert_eq!(b.acquire(&who(1), t), Turn::Go);
        b.release(&who(1), 200 << 20, t);
        assert_eq!(b.acquire(&who(2), t), Turn::Go);
        b.release(&who(2), 100 << 20, t);
        assert_eq!(b.acquire(&who(3), t), Turn::Go);
        // 1, 2 and then the victim (0) wait, in that order.
        for n in [1, 2, 0] {
            assert_eq!(b.acquire(&who(n), t), Turn::Wait);
        }
        b.release(&who(3), 1, t);
        // The victim goes first: it has hashed nothing lately; then 2
        // (100 MiB), then 1 (200 MiB).
        assert_eq!(b.acquire(&who(1), t), Turn::Wait);
        assert_eq!(b.acquire(&who(2), t), Turn::Wait);
        assert_eq!(b.acquire(&who(0), t), Turn::Go);
        b.release(&who(0), 8 << 20, t);
        assert_eq!(b.acquire(&who(1), t), Turn::Wait);
        assert_eq!(b.acquire(&who(2), t), Turn::Go);
        b.release(&who(2), 1, t);
        // A hash cut short paid only what it hashed.
        b.done(&who(1));
        assert_eq!(b.buckets[&who(1)].bytes, BUDGET_BYTES - (200 << 20));
        assert!(!b.line.contains(&who(1)));
    }

    #[test]
    fn a_stuck_hash_keeps_only_its_own_spender_busy() {
        let mut b = Budget::with_at_once(HASHING_AT_ONCE);
        let t = Instant::now();
        // Two executables on a hung file system: their reads never return.
        b.spend(&who(1), 1, t).unwrap();
        b.spend(&who(2), 1, t).unwrap();
        assert_eq!(b.spend(&who(3), 1, t), Err(Refused::Busy));
        // A hash that makes progress keeps counting; stalled ones do not.
        let later = t + STALL;
        b.progress(&who(1), later - STALL / 2);
        b.progress(&who(2), later - STALL / 2);
        assert_eq!(b.spend(&who(3), 1, later), Err(Refused::Busy));
        b.progress(&who(2), t);
        b.spend(&who(3), 1, later).unwrap();
        assert_eq!(b.spend(&who(1), 1, later), Err(Refused::Busy));
    }
}
