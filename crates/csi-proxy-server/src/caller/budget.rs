//! Who pays for a hash of an executable, and who hashes next.
//!
//! - Each spender (its pod, or outside pods its uid: [`Spender`]) has a
//!   budget of bytes hashed: a token bucket of [`BUDGET_BYTES`], refilled
//!   over [`BUDGET_REFILL`], paid as hashed ([`Budget::release`]). Past it
//!   its digest is not computed ([`Refused::Budget`]).
//! - One hash at a time per spender; the whole process hashes at most
//!   [`hashing_at_once`] buffers at a time, and a hash holds a place only
//!   while it hashes a buffer, never while it reads one.
//! - The line for those places ([`Budget::acquire`]) is by [`Class`]
//!   first: a caller a rule names by a kernel identity (uid or pod) as
//!   well as by `exe_sha256` goes ahead of callers only a rule on the
//!   digest alone could allow, and hashes nobody waits for any more go
//!   last. Within a class, places are shared fairly between spenders
//!   (start-time fair queueing: each buffer is tagged when it joins the
//!   line with the later of the line's virtual time and the end of the
//!   spender's previous buffer, and the smallest tag goes first): a
//!   spender that has not hashed lately starts level with the others,
//!   never behind them, and its own buffers never demote it below
//!   spenders hashing at the same time (red team 41ident N1: a line
//!   ordered by budget left put a victim behind 12 uids hashing slowly,
//!   each with a full bucket, and it was refused).
//! - Every change of the line is counted ([`Budget::generation`]): a
//!   waiter that looked away re-checks before it waits, so no wake-up is
//!   lost and no place stays idle while someone is in line.

use std::collections::HashMap;
use std::time::{Duration, Instant};

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

/// A hash that made no progress (no open or look-up returned, less than a
/// buffer read) for this long is stalled: it stops counting against
/// [`HASHING_AT_ONCE`], and no identification waits for it any more.
pub const STALL: Duration = Duration::from_secs(1);

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
    /// [`HASHING_AT_ONCE`] (or the hash threads), until the
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

/// Where a hash stands in line, first first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    /// A rule names the caller by uid or pod as well as by `exe_sha256`:
    /// only callers of that kernel identity are in this class.
    Named,
    /// Only a rule on the digest (and process-chosen fields) could allow
    /// it: any uid can be here.
    Other,
    /// No identification waits for it any more (its caller gave up or is
    /// gone): it runs on only to keep the digest for a retry, when nobody
    /// else is in line (a named caller's until it ends, any other for a
    /// few seconds, `digest::RETRY_WITHIN`).
    Unwanted,
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
    /// Its hash's class.
    class: Class,
    /// Where its last buffer ended, in the line's virtual time.
    finish: u64,
}

/// What a spender's hash may do now ([`Budget::acquire`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turn {
    /// It holds a hashing place: read and hash.
    Go,
    /// It is in line for a place: wait for the line to change
    /// ([`Budget::generation`]) and ask again.
    Wait,
}

/// One buffer waiting for a place.
#[derive(Debug)]
struct Waiting {
    who: Spender,
    /// Woken when it may take a place ([`Budget::next_up`]): only those
    /// are, not the whole line (red team 42ident F5: waking every waiter
    /// at each buffer tripled a buffer's cost with 62 in line).
    wake: std::sync::Arc<std::sync::Condvar>,
    /// Its start tag in the line's virtual time.
    tag: u64,
    /// Arrival order, for equal tags.
    seq: u64,
}

/// Every spender's bucket, and the line for the hashing places.
#[derive(Debug)]
pub struct Budget {
    buckets: HashMap<Spender, Bucket>,
    /// Hashes at once for the whole process ([`hashing_at_once`]).
    at_once: usize,
    line: Vec<Waiting>,
    /// The line's virtual time: the tag of the last buffer given a place.
    vtime: u64,
    seq: u64,
    /// Counts every change of the line or the places.
    generation: u64,
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
            line: Vec::new(),
            vtime: 0,
            seq: 0,
            generation: 0,
        }
    }

    /// How many times the line or the places changed: a waiter that saw
    /// this number waits only while it stays the same.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    fn changed(&mut self) {
        self.generation = self.generation.wrapping_add(1);
    }

    /// Take `bytes` from `who`'s bucket at `now` for a hash, and a place
    /// now if one is free ([`Refused::Busy`] if not: tests).
    #[cfg(test)]
    pub fn spend(&mut self, who: &Spender, bytes: u64, now: Instant) -> Result<(), Refused> {
        self.start(who, bytes, Class::Other, now)?;
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

    /// Check that `who`'s bucket at `now` can pay `bytes` for a hash of
    /// `class` (one at a time per spender); the caller must call
    /// [`Budget::done`] with the same `who` afterwards. The hash then
    /// takes a place for each buffer it hashes ([`Budget::acquire`],
    /// [`Budget::release`]), and pays for it then.
    pub fn start(
        &mut self,
        who: &Spender,
        bytes: u64,
        class: Class,
        now: Instant,
    ) -> Result<(), Refused> {
        if self.buckets.len() >= MAX_SPENDERS {
            self.buckets
                .retain(|_, b| b.hashing.is_some() || refilled(b, now) < BUDGET_BYTES);
        }
        let b = self.buckets.entry(who.clone()).or_insert(Bucket {
            bytes: BUDGET_BYTES,
            at: now,
            hashing: None,
            turn: None,
            class,
            finish: 0,
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
        b.class = class;
        Ok(())
    }

    /// `who`'s hash is now of `class` (its waiters left: [`Class::Unwanted`]);
    /// whether that changed the line.
    pub fn reclass(&mut self, who: &Spender, class: Class) -> bool {
        match self.buckets.get_mut(who) {
            Some(b) if b.class != class => {
                b.class = class;
                self.changed();
                true
            }
            _ => false,
        }
    }

    /// A place for `who` to hash one buffer: taken if one is free and
    /// nobody ranks ahead of it for it, else `who` is (or stays) in line.
    /// Places are held only while hashing, never while reading: a file
    /// read slowly holds none (red team 39r2 F5). The line is ranked by
    /// [`Class`], then by start tag (fair queueing, see the module's
    /// documentation), then by arrival.
    pub fn acquire(&mut self, who: &Spender, now: Instant) -> Turn {
        if let Some(b) = self.buckets.get_mut(who) {
            // Waiting in line is progress of its own.
            b.hashing = Some(now);
        }
        if !self.line.iter().any(|w| w.who == *who) {
            let finish = self.buckets.get(who).map_or(0, |b| b.finish);
            self.seq += 1;
            self.line.push(Waiting {
                who: who.clone(),
                wake: Default::default(),
                tag: finish.max(self.vtime),
                seq: self.seq,
            });
            self.changed();
        }
        if !self.ranked(now).any(|w| w.who == *who) {
            return Turn::Wait;
        }
        let i = self
            .line
            .iter()
            .position(|w| w.who == *who)
            .expect("in line");
        let tag = self.line.swap_remove(i).tag;
        self.vtime = self.vtime.max(tag);
        if let Some(b) = self.buckets.get_mut(who) {
            b.turn = Some(now);
            b.finish = tag + 1;
        }
        self.changed();
        Turn::Go
    }

    /// The waiters that may take the places free at `now`, first first.
    fn ranked(&self, now: Instant) -> impl Iterator<Item = &Waiting> {
        let free = self.at_once.max(1).saturating_sub(self.hashing(now));
        let class = |w: &Spender| self.buckets.get(w).map_or(Class::Other, |b| b.class);
        let mut ranked: Vec<&Waiting> = self.line.iter().collect();
        ranked.sort_unstable_by_key(|w| (class(&w.who), w.tag, w.seq));
        ranked.into_iter().take(free)
    }

    /// Wake the waiters that may take a place now (after a change).
    pub fn wake(&self, now: Instant) {
        for w in self.ranked(now) {
            w.wake.notify_one();
        }
    }

    /// What `who` waits on while in line.
    pub fn waker(&self, who: &Spender) -> Option<std::sync::Arc<std::sync::Condvar>> {
        self.line
            .iter()
            .find(|w| w.who == *who)
            .map(|w| w.wake.clone())
    }

    /// `who` gives up waiting for a place.
    pub fn done_waiting(&mut self, who: &Spender) {
        self.line.retain(|w| w.who != *who);
        self.changed();
    }

    /// `who` has hashed a buffer of `bytes` (paid now): the place is free.
    pub fn release(&mut self, who: &Spender, bytes: u64, now: Instant) {
        if let Some(b) = self.buckets.get_mut(who) {
            b.turn = None;
            b.bytes = refilled(b, now).saturating_sub(bytes);
            b.at = now;
        }
        self.changed();
    }

    /// Hashes that count against [`HASHING_AT_ONCE`] at `now`: those that
    /// hold a place and made progress less than [`STALL`] ago. A stuck
    /// hash (an executable on a hung file system, a read that never
    /// returns) keeps only its own spender busy.
    pub fn hashing(&self, now: Instant) -> usize {
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
        self.line.retain(|w| w.who != *who);
        self.changed();
    }

    /// Whether `who` waits in line (tests).
    #[cfg(test)]
    pub fn in_line(&self, who: &Spender) -> bool {
        self.line.iter().any(|w| w.who == *who)
    }

    /// What `who` has left (tests).
    #[cfg(test)]
    pub fn left(&self, who: &Spender) -> u64 {
        self.buckets[who].bytes
    }
}

/// A bucket's bytes at `now`.
fn refilled(b: &Bucket, now: Instant) -> u64 {
    let elapsed = now.saturating_duration_since(b.at).as_secs_f64();
    let gained = (BUDGET_BYTES as f64 * elapsed / BUDGET_REFILL.as_secs_f64()) as u64;
    b.bytes.saturating_add(gained).min(BUDGET_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(uid: u32) -> Spender {
        (Some(uid), None)
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
            b.start(&who(n), 1, Class::Other, t).unwrap();
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
        assert!((0..3).all(|n| !b.in_line(&who(n))));
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

    /// One buffer of `who` through the line at `t`, if it goes.
    fn one(b: &mut Budget, who: &Spender, t: Instant) -> bool {
        if b.acquire(who, t) == Turn::Go {
            b.release(who, 256 << 10, t);
            true
        } else {
            false
        }
    }

    #[test]
    fn a_victim_gets_its_share_whatever_the_others_have_left() {
        // Red team 41ident N1: 12 uids hashing slowly, each with a full
        // bucket, were all ranked ahead of a victim that had hashed 110 MB
        // lately (and its own buffers demoted it further): it was refused.
        let mut b = Budget::with_at_once(1);
        let t = Instant::now();
        let victim = who(0);
        b.start(&victim, 110 << 20, Class::Other, t).unwrap();
        b.release(&victim, 110 << 20, t);
        b.done(&victim);
        let crowd: Vec<Spender> = (1..=12).map(who).collect();
        for c in &crowd {
            b.start(c, 200 << 20, Class::Other, t).unwrap();
        }
        // The crowd hashes for a while: each waits in line for each buffer.
        for _ in 0..50 {
            for c in &crowd {
                one(&mut b, c, t);
            }
        }
        b.start(&victim, 8 << 20, Class::Other, t).unwrap();
        // Everyone asks for a buffer at once, over and over: the victim
        // gets one buffer in 13, not fewer, however much it hashes.
        let mut got = 0;
        for _ in 0..13 * 32 {
            for w in crowd.iter().chain([&victim]) {
                if one(&mut b, w, t) && *w == victim {
                    got += 1;
                }
            }
        }
        assert!(got >= 31, "victim got {got} buffers of 416");
        // And the budget was paid as hashed.
        assert_eq!(
            b.left(&victim),
            BUDGET_BYTES - (110 << 20) - got * (256 << 10)
        );
    }

    #[test]
    fn callers_a_rule_names_go_first_and_unwanted_hashes_last() {
        let mut b = Budget::with_at_once(1);
        let t = Instant::now();
        let crowd: Vec<Spender> = (1..=63).map(who).collect();
        for c in &crowd {
            b.start(c, 1 << 20, Class::Other, t).unwrap();
            assert_eq!(
                b.acquire(c, t),
                if *c == who(1) { Turn::Go } else { Turn::Wait }
            );
        }
        let gone = who(99);
        b.start(&gone, 1 << 20, Class::Unwanted, t).unwrap();
        assert_eq!(b.acquire(&gone, t), Turn::Wait);
        let victim = who(0);
        b.start(&victim, 8 << 20, Class::Named, t).unwrap();
        assert_eq!(b.acquire(&victim, t), Turn::Wait, "the place is taken");
        b.release(&who(1), 1, t);
        // Each of its buffers goes ahead of 62 others waiting since before
        // it came.
        for _ in 0..32 {
            assert_eq!(b.acquire(&victim, t), Turn::Go);
            for c in &crowd[1..] {
                assert_eq!(b.acquire(c, t), Turn::Wait);
            }
            b.release(&victim, 256 << 10, t);
        }
        b.done(&victim);
        // The unwanted hash goes after every other.
        for c in &crowd[1..] {
            assert_eq!(b.acquire(&gone, t), Turn::Wait);
            assert_eq!(b.acquire(c, t), Turn::Go);
            b.release(c, 1, t);
            b.done(c);
        }
        assert_eq!(b.acquire(&gone, t), Turn::Go);
        // A waiter that wakes finds the line changed since it looked.
        let seen = b.generation();
        b.release(&gone, 1, t);
        assert_ne!(b.generation(), seen);
    }
}
