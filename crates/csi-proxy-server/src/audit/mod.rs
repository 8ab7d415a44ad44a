//! The audit log: one JSON object per line for every call that can change
//! the host (`-audit-level=write`) or every call (`all`), with who called
//! (the connection's [`Caller`]), what was asked (the request's fields by
//! proto name, secrets redacted: [`fields`]) and how it ended (gRPC code,
//! message, duration).
//!
//! A call hands its line to a bounded queue ([`QUEUE_LINES`]) and goes on;
//! one thread ([`writer`]) formats and writes the lines. With
//! [`Mode::BestEffort`] a full queue or a failed write drops lines (counted
//! in `csi_proxy_audit_dropped_total`) and calls are answered as usual.
//! With [`Mode::Blocking`] a call's reply waits until its line is written
//! (and synced): a line that cannot be written turns the reply into
//! `Unavailable`, and while writes fail, calls are refused before they run.
//! What is synced when: see [`writer`].
//!
//! Refused calls are recorded within a budget per caller ([`limit`]): a
//! caller refused in a loop gets one summary line per second instead of a
//! line per call. Dropped lines are warned about in the log, at most once
//! every [`DROP_WARN_EVERY`].

pub mod fields;
pub mod json;
pub mod limit;
mod writer;

use crate::caller::Caller;
use crate::metrics::Metrics;
use csi_proxy_api::ApiVersion;
use csi_proxy_http2::{Code, Reply};
use prometheus_client::metrics::counter::Counter;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// Lines that may wait for the writer.
pub const QUEUE_LINES: usize = 4096;
/// How long a call waits for its line in blocking mode: to queue it and
/// to have it written.
pub const BLOCKING_WAIT: Duration = Duration::from_secs(10);
/// At most one warning about lines dropped from a full queue per this long.
pub const DROP_WARN_EVERY: Duration = Duration::from_secs(10);

/// Which calls are recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    None,
    /// Calls that can change the host, and every refused call.
    Write,
    All,
}

/// What happens when a line cannot be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Drop it (counted), answer the call as usual: fail open.
    BestEffort,
    /// Answer `Unavailable`: fail closed.
    Blocking,
}

/// Where the lines go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sink {
    Stderr,
    /// A file, rotated at `max_bytes` (0: never) keeping `max_backups`
    /// older files `<file>.1` (newest) ... `<file>.N`.
    File {
        path: PathBuf,
        max_bytes: u64,
        max_backups: u32,
    },
}

/// The audit log's settings.
#[derive(Clone, Debug)]
pub struct Config {
    pub sink: Sink,
    pub level: Level,
    pub mode: Mode,
}

/// Opening the audit log failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot open the audit log {path}: {source}")]
pub struct OpenError {
    path: String,
    #[source]
    source: std::io::Error,
}

/// One call, as recorded.
pub struct Entry {
    pub time: SystemTime,
    pub api: ApiVersion,
    pub method: &'static str,
    pub code: Code,
    pub message: String,
    pub duration: Duration,
    pub caller: Arc<Caller>,
    /// The request as the server decoded it, encoded again
    /// ([`crate::dispatch::Seen`]; `None`: it could not be decoded and
    /// nothing ran).
    pub request: Option<Vec<u8>>,
}

enum Msg {
    /// A line; it holds one of the [`QUEUE_LINES`] places until the writer
    /// takes it.
    Line(Box<Entry>, Option<SyncSender<Result<(), String>>>),
    /// Write and sync what is queued, then answer.
    Flush(SyncSender<()>),
}

/// The audit log of the process; cheap to share.
pub struct AuditLog {
    tx: Mutex<Option<SyncSender<Msg>>>,
    /// Lines queued or promised a place ([`Place`]): at most
    /// [`QUEUE_LINES`]. The writer gives a place back as it takes a line.
    places: Arc<AtomicUsize>,
    level: Level,
    mode: Mode,
    dropped: Counter,
    /// The last write succeeded.
    healthy: Arc<AtomicBool>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    limiter: Arc<limit::Limiter>,
    /// When a full queue was last warned about.
    drop_warned: Mutex<Option<Instant>>,
    /// Recorded calls running now: their line, should the proxy stop
    /// before they end ([`AuditLog::running`]).
    running: Mutex<(u64, std::collections::HashMap<u64, Unfinished>)>,
}

/// The line of a call still running when the proxy stops.
pub type Unfinished = Box<dyn FnOnce() -> Entry + Send>;

/// A recorded call running ([`AuditLog::running`]); ends on drop.
#[must_use]
pub struct Running<'a> {
    log: &'a AuditLog,
    id: u64,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        let mut g = self.log.running.lock().unwrap_or_else(|p| p.into_inner());
        g.1.remove(&self.id);
    }
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditLog")
            .field("level", &self.level)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl AuditLog {
    /// Open the sink and start the writer thread. Dropped lines are counted
    /// in `metrics`' `csi_proxy_audit_dropped_total` when given.
    pub fn open(config: &Config, metrics: Option<&Metrics>) -> Result<Arc<AuditLog>, OpenError> {
        Self::open_with(config, metrics, None)
    }

    fn open_with(
        config: &Config,
        metrics: Option<&Metrics>,
        sync_gate: Option<Arc<writer::SyncGate>>,
    ) -> Result<Arc<AuditLog>, OpenError> {
        let dropped = metrics.map_or_else(Counter::default, Metrics::audit_dropped);
        let sink = writer::Output::open(&config.sink).map_err(|source| OpenError {
            path: match &config.sink {
                Sink::Stderr => "-".into(),
                Sink::File { path, .. } => path.display().to_string(),
            },
            source,
        })?;
        // Room for every place, and a few flushes besides.
        let (tx, rx) = mpsc::sync_channel(QUEUE_LINES + 64);
        let places = Arc::new(AtomicUsize::new(0));
        let healthy = Arc::new(AtomicBool::new(true));
        let limiter = Arc::new(limit::Limiter::default());
        let w = writer::Writer {
            out: sink,
            sync_each_batch: config.mode == Mode::Blocking,
            dropped: dropped.clone(),
            healthy: healthy.clone(),
            limiter: limiter.clone(),
            places: places.clone(),
            sync_gate,
        };
        let thread = std::thread::Builder::new()
            .name("csi-proxy-audit".into())
            .spawn(move || w.run(rx))
            .map_err(|source| OpenError {
                path: "(writer thread)".into(),
                source,
            })?;
        Ok(Arc::new(AuditLog {
            tx: Mutex::new(Some(tx)),
            places,
            level: config.level,
            mode: config.mode,
            dropped,
            healthy,
            thread: Mutex::new(Some(thread)),
            limiter,
            drop_warned: Mutex::new(None),
            running: Mutex::new((0, std::collections::HashMap::new())),
        }))
    }

    /// Whether a refused call of `caller` gets its own line now; if not it
    /// is counted in the caller's next summary line.
    pub fn admit_refusal(&self, caller: &Arc<Caller>, code: Code) -> bool {
        self.limiter.admit(caller, code, Instant::now())
    }

    fn drop_one(&self, why: &str) {
        self.dropped.inc();
        let mut last = self.drop_warned.lock().unwrap_or_else(|p| p.into_inner());
        if last.is_none_or(|t| t.elapsed() >= DROP_WARN_EVERY) {
            *last = Some(Instant::now());
            tracing::warn!(
                dropped_total = self.dropped.get(),
                "audit lines dropped: {why} (csi_proxy_audit_dropped_total counts them)"
            );
        }
    }

    /// Whether a call is recorded: `write` says whether it can change the
    /// host, `refused` whether a policy refused it.
    pub fn records(&self, write: bool, refused: bool) -> bool {
        match self.level {
            Level::None => false,
            Level::Write => write || refused,
            Level::All => true,
        }
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Whether the last write succeeded (blocking mode refuses calls
    /// before they run while it did not).
    pub fn healthy(&self) -> bool {
        self.healthy.load(Ordering::Relaxed)
    }

    /// Lines dropped so far.
    pub fn dropped(&self) -> u64 {
        self.dropped.get()
    }

    fn sender(&self) -> Option<SyncSender<Msg>> {
        self.tx.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Queue a line without waiting; a full queue drops it (counted and
    /// warned about).
    pub fn submit(&self, entry: Entry) {
        match self.reserve() {
            Some(place) => {
                if self.send(place, entry, None).is_err() {
                    self.drop_one("the audit log is closed");
                }
            }
            None => self.drop_one("the queue of lines waiting for the writer is full"),
        }
    }

    /// One of the queue's places for a line, taken now (`None`: the queue
    /// is full). Blocking mode takes it before a call runs, so that the
    /// call's line is never refused a place after the host changed.
    pub fn reserve(&self) -> Option<Place> {
        let taken = self
            .places
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < QUEUE_LINES).then_some(n + 1)
            })
            .is_ok();
        taken.then(|| Place {
            places: self.places.clone(),
        })
    }

    /// Queue `entry` in `place` (never waits: the place is there).
    fn send(
        &self,
        place: Place,
        entry: Entry,
        ack: Option<SyncSender<Result<(), String>>>,
    ) -> Result<(), String> {
        let Some(tx) = self.sender() else {
            return Err("the audit log is closed".into());
        };
        // The writer gives the place back when it takes the line.
        std::mem::forget(place);
        tx.try_send(Msg::Line(Box::new(entry), ack)).map_err(|_| {
            self.places.fetch_sub(1, Ordering::AcqRel);
            "the audit log is closed".to_string()
        })
    }

    /// [`AuditLog::settle_by`] for a call that took its `place` before it
    /// ran: the line is queued at once, then waited for.
    pub fn settle_in(
        &self,
        place: Place,
        entry: Entry,
        reply: Reply,
        deadline: Option<Instant>,
    ) -> Reply {
        match self.mode {
            Mode::BestEffort => {
                let _ = self.send(place, entry, None);
                reply
            }
            Mode::Blocking => {
                let deadline = wait_limit(deadline);
                let (ack, done) = mpsc::sync_channel(1);
                let r = self
                    .send(place, entry, Some(ack))
                    .and_then(|()| wait(&done, deadline));
                match r {
                    Ok(()) => reply,
                    Err(e) => {
                        self.dropped.inc();
                        ran_unrecorded(&e)
                    }
                }
            }
        }
    }

    /// Queue a line and wait until it is written and synced (blocking
    /// mode; call it off the async workers), all within [`BLOCKING_WAIT`].
    /// The error says why not.
    pub fn commit(&self, entry: Entry) -> Result<(), String> {
        self.commit_by(entry, None)
    }

    /// [`AuditLog::commit`], waiting no longer than `deadline` either (the
    /// call's, when its client sent one).
    pub fn commit_by(&self, entry: Entry, deadline: Option<Instant>) -> Result<(), String> {
        let deadline = wait_limit(deadline);
        let (ack, done) = mpsc::sync_channel(1);
        if self.sender().is_none() {
            self.dropped.inc();
            return Err("the audit log is closed".into());
        }
        // Waits while the queue is full (back-pressure, not loss), but no
        // longer than the call may wait.
        let sent = self
            .place_within(deadline)
            .and_then(|place| self.send(place, entry, Some(ack)));
        if let Err(e) = sent {
            self.dropped.inc();
            return Err(e);
        }
        wait(&done, deadline)
    }

    /// A place, waiting for one while the queue is full, until `deadline`.
    fn place_within(&self, deadline: Instant) -> Result<Place, String> {
        let mut pause = Duration::from_micros(50);
        loop {
            if let Some(p) = self.reserve() {
                return Ok(p);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(
                    "the audit line could not be queued within the call's deadline (at most 10 s; the writer is behind)".into(),
                );
            }
            std::thread::sleep(pause.min(deadline - now));
            pause = (pause * 2).min(Duration::from_millis(10));
        }
    }

    /// The reply of a call that ran, after its line: in blocking mode a
    /// line that cannot be written makes it `Unavailable`.
    pub fn settle(&self, entry: Entry, reply: Reply) -> Reply {
        self.settle_by(entry, reply, None)
    }

    /// [`AuditLog::settle`] for a call whose client gives up at `deadline`.
    pub fn settle_by(&self, entry: Entry, reply: Reply, deadline: Option<Instant>) -> Reply {
        match self.mode {
            Mode::BestEffort => {
                self.submit(entry);
                reply
            }
            Mode::Blocking => match self.commit_by(entry, deadline) {
                Ok(()) => reply,
                Err(e) => ran_unrecorded(&e),
            },
        }
    }

    /// Write and sync everything queued so far (waits at most `timeout`).
    pub fn flush(&self, timeout: Duration) {
        let (ack, done) = mpsc::sync_channel(1);
        if let Some(tx) = self.sender() {
            if tx.send(Msg::Flush(ack)).is_ok() {
                let _ = done.recv_timeout(timeout);
            }
        }
    }

    /// A recorded call starts running: should the proxy stop before it
    /// ends, [`AuditLog::close`] writes `unfinished`'s line for it (red
    /// team 40async: a call stuck in a hung mount at shutdown left no line).
    pub fn running(&self, unfinished: Unfinished) -> Running<'_> {
        let mut g = self.running.lock().unwrap_or_else(|p| p.into_inner());
        g.0 += 1;
        let id = g.0;
        g.1.insert(id, unfinished);
        Running { log: self, id }
    }

    /// Write what is queued, sync, and stop the writer (at shutdown).
    /// Waits at most `timeout` in all: a sync that never returns (a hung
    /// disk under the log) does not keep the process from stopping (red
    /// team 40mount: SIGTERM never finished); the lines are written, maybe
    /// not synced, and the log says so.
    pub fn close(&self, timeout: Duration) {
        let until = Instant::now() + timeout;
        // Calls still running: their lines say so.
        let unfinished: Vec<Unfinished> = {
            let mut g = self.running.lock().unwrap_or_else(|p| p.into_inner());
            g.1.drain().map(|(_, u)| u).collect()
        };
        for u in unfinished {
            self.submit(u());
        }
        self.flush(timeout);
        drop(self.tx.lock().unwrap_or_else(|p| p.into_inner()).take());
        if let Some(t) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            while !t.is_finished() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(10));
            }
            if t.is_finished() {
                let _ = t.join();
            } else {
                tracing::warn!(
                    "the audit log's last sync did not return in time: its lines are written, maybe not synced"
                );
            }
        }
    }
}

/// Queue `msg`, waiting while the queue is full, until `deadline`.
/// A place in the queue for one line ([`AuditLog::reserve`]); given back
/// if dropped unused.
#[must_use]
pub struct Place {
    places: Arc<AtomicUsize>,
}

impl Drop for Place {
    fn drop(&mut self) {
        self.places.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The call's deadline, and [`BLOCKING_WAIT`] from now at most.
fn wait_limit(deadline: Option<Instant>) -> Instant {
    let limit = Instant::now() + BLOCKING_WAIT;
    deadline.map_or(limit, |d| d.min(limit))
}

/// Wait for the writer's answer about a line until `deadline`.
fn wait(done: &mpsc::Receiver<Result<(), String>>, deadline: Instant) -> Result<(), String> {
    match done.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        Ok(r) => r,
        Err(_) => {
            Err("the audit line was not written within the call's deadline (at most 10 s)".into())
        }
    }
}

/// The reply of a call that ran and whose line could not be written.
fn ran_unrecorded(e: &str) -> Reply {
    Reply::error(
        Code::Unavailable,
        format!("the call ran but its audit line could not be written (-audit-mode=blocking): {e}"),
    )
}

#[cfg(test)]
mod tests;
