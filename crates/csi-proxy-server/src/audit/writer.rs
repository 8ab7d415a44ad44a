//! The writer thread: formats queued lines, writes them in batches,
//! rotates the file.
//!
//! Durability:
//! - every batch is written with one `write` as soon as it is taken from
//!   the queue (it is then in the OS cache: it survives a crash of the
//!   proxy, not of the node). In best-effort mode the writer then rests
//!   [`LINGER`] before it takes the next batch: calls meanwhile only push
//!   to the queue, without waking it (one wake-up and one `write` per
//!   batch instead of per call), so a line reaches the file at most
//!   `LINGER` after its call was answered;
//! - best-effort mode: the file is synced (`fdatasync`/`FlushFileBuffers`)
//!   at most once a second while lines arrive (with it the files rotated
//!   out since the last sync) and at shutdown, by a thread of its own
//!   ([`Syncer`]): a sync that waits seconds for a slow disk or a busy
//!   journal never stops the writer, so lines go on reaching the page
//!   cache and none is dropped for it (seen in CI after a large build;
//!   `audit::tests::a_sync_that_waits_does_not_stop_the_writer`). Where
//!   the file system's sync holds the file's lock (FUSE), or the kernel
//!   makes writes wait for a slow disk, writes wait too, and past the
//!   queue lines are dropped (counted);
//! - blocking mode: each batch is synced before the calls in it are
//!   answered (group commit: calls that arrive together share one sync);
//! - standard error (`-audit-log=-`) is never synced.
//!
//! A write that fails part-way is cut back to the last whole line, so the
//! file holds only whole lines.

use super::{fields::Schemas, json, Entry, Msg, Sink};
use crate::metrics::go_code_name;
use prometheus_client::metrics::counter::Counter;
use std::fmt::Write as _;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Most lines written by one `write`.
const BATCH: usize = 256;
/// Files rotated out and not yet synced, kept open at most.
const MAX_RETIRED: usize = 4;
/// Best-effort mode: the rest between batches.
pub const LINGER: Duration = Duration::from_millis(10);
/// Best-effort mode syncs at most this often.
const SYNC_EVERY: Duration = Duration::from_secs(1);
/// Summary lines of refused calls past their budget are written this often.
const SUMMARY_EVERY: Duration = Duration::from_secs(1);
/// At most one warning about failed writes per this long.
const WARN_EVERY: Duration = Duration::from_secs(30);

pub(super) enum Output {
    Stderr,
    File(RotatingFile),
}

pub(super) struct RotatingFile {
    path: PathBuf,
    max_bytes: u64,
    max_backups: u32,
    /// `None` after a failed reopen; retried on the next write.
    file: Option<File>,
    size: u64,
    /// Files rotated out, not yet synced: the writer hands them on.
    retired: Vec<File>,
}

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

impl Output {
    pub(super) fn open(sink: &Sink) -> io::Result<Output> {
        match sink {
            Sink::Stderr => Ok(Output::Stderr),
            Sink::File {
                path,
                max_bytes,
                max_backups,
            } => {
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    fs::create_dir_all(dir)?;
                }
                let file = open_append(path)?;
                let size = file.metadata()?.len();
                Ok(Output::File(RotatingFile {
                    path: path.clone(),
                    max_bytes: *max_bytes,
                    max_backups: *max_backups,
                    file: Some(file),
                    size,
                    retired: Vec::new(),
                }))
            }
        }
    }

    fn write(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Output::Stderr => io::stderr().lock().write_all(buf),
            Output::File(f) => f.write(buf),
        }
    }

    fn sync(&mut self) -> io::Result<()> {
        match self {
            Output::Stderr => Ok(()),
            Output::File(f) => {
                for r in f.retired.drain(..) {
                    r.sync_data()?;
                }
                f.file.as_ref().map_or(Ok(()), File::sync_data)
            }
        }
    }

    /// What a sync has to sync, for another thread: the files rotated out
    /// since the last call, then (a second handle of) the current file.
    fn files_to_sync(&mut self) -> Vec<File> {
        match self {
            Output::Stderr => Vec::new(),
            Output::File(f) => {
                let mut v: Vec<File> = f.retired.drain(..).collect();
                v.extend(f.file.as_ref().and_then(|f| f.try_clone().ok()));
                v
            }
        }
    }
}

impl RotatingFile {
    fn backup(&self, n: u32) -> PathBuf {
        let mut name = self.path.clone().into_os_string();
        name.push(format!(".{n}"));
        PathBuf::from(name)
    }

    fn write(&mut self, buf: &[u8]) -> io::Result<()> {
        let len = buf.len() as u64;
        if self.max_bytes > 0 && self.size > 0 && self.size.saturating_add(len) > self.max_bytes {
            self.rotate()?;
        }
        if self.file.is_none() {
            let file = open_append(&self.path)?;
            self.size = file.metadata()?.len();
            self.file = Some(file);
        }
        let Some(file) = self.file.as_mut() else {
            return Err(io::Error::other("no audit file"));
        };
        match file.write_all(buf) {
            Ok(()) => {
                self.size = self.size.saturating_add(len);
                Ok(())
            }
            Err(e) => {
                // Cut a partial line off; reopen on the next write.
                let _ = file.set_len(self.size);
                self.file = None;
                Err(e)
            }
        }
    }

    /// `<file>` becomes `<file>.1`, `.1` becomes `.2`, ... the oldest past
    /// `max_backups` is replaced (with no backups the file is removed).
    fn rotate(&mut self) -> io::Result<()> {
        // Synced by the writer's next sync, which in best-effort mode runs
        // on the syncer's thread. While a sync hangs, at most a few are
        // kept open (red team 40mount: every file rotated out stayed
        // open); older ones are closed unsynced (written, in the OS cache).
        self.retired.extend(self.file.take());
        while self.retired.len() > MAX_RETIRED {
            self.retired.remove(0);
        }
        if self.max_backups == 0 {
            fs::remove_file(&self.path)?;
        } else {
            for n in (1..self.max_backups).rev() {
                let from = self.backup(n);
                if from.exists() {
                    fs::rename(&from, self.backup(n + 1))?;
                }
            }
            fs::rename(&self.path, self.backup(1))?;
        }
        self.size = 0;
        Ok(())
    }
}

pub(super) struct Writer {
    pub(super) out: Output,
    pub(super) sync_each_batch: bool,
    pub(super) dropped: Counter,
    pub(super) healthy: Arc<AtomicBool>,
    pub(super) limiter: Arc<super::limit::Limiter>,
    /// Lines queued or promised (`AuditLog::places`): one given back per
    /// line taken.
    pub(super) places: Arc<std::sync::atomic::AtomicUsize>,
    /// Tests: syncs on the sync thread wait while it is closed.
    pub(super) sync_gate: Option<Arc<SyncGate>>,
}

/// Tests hold the sync thread's syncs with it (as a disk whose syncs take
/// seconds would); unused otherwise.
#[derive(Default)]
pub struct SyncGate {
    closed: std::sync::Mutex<bool>,
    opened: std::sync::Condvar,
}

impl SyncGate {
    /// Syncs wait from now on.
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn close(&self) {
        *self.closed.lock().unwrap_or_else(|p| p.into_inner()) = true;
    }

    /// Syncs go on.
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn open(&self) {
        *self.closed.lock().unwrap_or_else(|p| p.into_inner()) = false;
        self.opened.notify_all();
    }

    fn pass(&self) {
        let mut g = self.closed.lock().unwrap_or_else(|p| p.into_inner());
        while *g {
            g = self.opened.wait(g).unwrap_or_else(|p| p.into_inner());
        }
    }
}

impl Writer {
    pub(super) fn run(mut self, rx: Receiver<Msg>) {
        // Best-effort mode into a file syncs on its own thread; blocking
        // mode syncs each batch before its calls are answered, here.
        let syncer = match (&self.out, self.sync_each_batch) {
            (Output::File(_), false) => Syncer::start(self.healthy.clone(), self.sync_gate.clone()),
            _ => None,
        };
        let mut schemas = Schemas::default();
        let mut buf = String::with_capacity(64 << 10);
        let mut unsynced = false;
        let mut last_sync = Instant::now();
        let mut last_warn: Option<Instant> = None;
        let mut last_summary = Instant::now();
        loop {
            let first = match rx.recv_timeout(SUMMARY_EVERY) {
                Ok(m) => Some(m),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => break,
            };
            let mut batch: Vec<Msg> = first.into_iter().collect();
            while !batch.is_empty() && batch.len() < BATCH {
                match rx.try_recv() {
                    Ok(m) => batch.push(m),
                    Err(_) => break,
                }
            }
            buf.clear();
            let mut acks = Vec::new();
            let mut flushes = Vec::new();
            let mut lines = 0u64;
            for m in batch {
                match m {
                    Msg::Line(entry, ack) => {
                        // Its place in the queue is free again.
                        self.places
                            .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
                        format_line(&mut buf, &entry, &mut schemas);
                        lines += 1;
                        acks.extend(ack);
                    }
                    Msg::Flush(ack) => flushes.push(ack),
                }
            }
            if last_summary.elapsed() >= SUMMARY_EVERY {
                last_summary = Instant::now();
                for s in self.limiter.summaries(last_summary) {
                    format_summary(&mut buf, &s);
                    lines += 1;
                }
            }
            if lines == 0 && flushes.is_empty() {
                // Idle: sync what the last batches left.
                if unsynced
                    && last_sync.elapsed() >= SYNC_EVERY
                    && self.sync_by(syncer.as_ref(), None).is_some()
                {
                    unsynced = false;
                    last_sync = Instant::now();
                }
                continue;
            }
            let mut result = if buf.is_empty() {
                Ok(())
            } else {
                self.out.write(buf.as_bytes())
            };
            if result.is_ok() && lines > 0 {
                unsynced = true;
                if self.sync_each_batch || last_sync.elapsed() >= SYNC_EVERY {
                    if let Some(r) = self.sync_by(syncer.as_ref(), None) {
                        result = r;
                        unsynced = false;
                        last_sync = Instant::now();
                    }
                }
            }
            let flushed = !flushes.is_empty();
            for ack in flushes {
                // Answered once what it waits for is synced (in best-effort
                // mode by the syncer, which answers it).
                if self.sync_by(syncer.as_ref(), Some(ack)).is_some() {
                    unsynced = false;
                    last_sync = Instant::now();
                }
            }
            match &result {
                Ok(()) => {
                    if !self.healthy.swap(true, Ordering::Relaxed) {
                        tracing::info!("audit log written again");
                    }
                }
                Err(e) => {
                    self.dropped.inc_by(lines);
                    self.healthy.store(false, Ordering::Relaxed);
                    if last_warn.is_none_or(|t| t.elapsed() >= WARN_EVERY) {
                        last_warn = Some(Instant::now());
                        tracing::warn!(error = %e, lines, dropped_total = self.dropped.get(), "cannot write the audit log; lines dropped");
                    }
                }
            }
            let answer = result.map_err(|e| e.to_string());
            for ack in acks {
                let _ = ack.send(answer.clone());
            }
            if !self.sync_each_batch && !flushed {
                std::thread::sleep(LINGER);
            }
        }
        match syncer {
            Some(s) => s.finish(self.out.files_to_sync()),
            None => {
                let _ = self.out.sync();
            }
        }
    }

    /// Sync what was written: here, or by `syncer` when there is one (its
    /// answer is then `Ok`; `None`: it is still busy with the last sync,
    /// and this one waits for a later call, unless `ack` asks for it).
    /// `ack` is answered once synced.
    fn sync_by(
        &mut self,
        syncer: Option<&Syncer>,
        ack: Option<SyncSender<()>>,
    ) -> Option<io::Result<()>> {
        match syncer {
            None => {
                if let Some(g) = &self.sync_gate {
                    g.pass();
                }
                let r = self.out.sync();
                if let Some(a) = ack {
                    let _ = a.send(());
                }
                Some(r)
            }
            Some(s) => {
                if ack.is_none() && s.busy.swap(true, Ordering::AcqRel) {
                    return None;
                }
                s.busy.store(true, Ordering::Release);
                s.send(self.out.files_to_sync(), ack);
                Some(Ok(()))
            }
        }
    }
}

/// Best-effort mode's sync thread: syncs the files it is handed, in order,
/// and answers a flush once its files are synced.
struct Syncer {
    tx: Sender<SyncJob>,
    /// A sync is queued or running.
    busy: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

type SyncJob = (Vec<File>, Option<SyncSender<()>>);

impl Syncer {
    fn start(healthy: Arc<AtomicBool>, gate: Option<Arc<SyncGate>>) -> Option<Syncer> {
        let (tx, rx) = mpsc::channel::<SyncJob>();
        let busy = Arc::new(AtomicBool::new(false));
        let b = busy.clone();
        let thread = std::thread::Builder::new()
            .name("csi-proxy-audit-sync".into())
            .spawn(move || {
                let mut last_warn: Option<Instant> = None;
                for (files, ack) in rx {
                    if let Some(g) = &gate {
                        g.pass();
                    }
                    for f in files {
                        if let Err(e) = f.sync_data() {
                            healthy.store(false, Ordering::Relaxed);
                            if last_warn.is_none_or(|t| t.elapsed() >= WARN_EVERY) {
                                last_warn = Some(Instant::now());
                                tracing::warn!(error = %e, "cannot sync the audit log");
                            }
                        }
                    }
                    b.store(false, Ordering::Release);
                    if let Some(a) = ack {
                        let _ = a.send(());
                    }
                }
            });
        match thread {
            Ok(thread) => Some(Syncer { tx, busy, thread }),
            Err(e) => {
                tracing::warn!(error = %e, "no audit sync thread: the writer syncs itself");
                None
            }
        }
    }

    fn send(&self, files: Vec<File>, ack: Option<SyncSender<()>>) {
        if let Err(mpsc::SendError((files, ack))) = self.tx.send((files, ack)) {
            // The thread is gone (it cannot be while we hold `tx`): sync here.
            for f in files {
                let _ = f.sync_data();
            }
            if let Some(a) = ack {
                let _ = a.send(());
            }
        }
    }

    /// The last sync, then the thread's end.
    fn finish(self, files: Vec<File>) {
        self.send(files, None);
        drop(self.tx);
        let _ = self.thread.join();
    }
}

/// Append the summary line of a caller's refused (or rejected as invalid)
/// calls past its budget.
fn format_summary(out: &mut String, s: &super::limit::Summary) {
    out.push_str("{\"ts\":");
    json::timestamp(out, std::time::SystemTime::now());
    let _ = write!(
        out,
        ",\"code\":\"{}\",\"summary\":\"{} more calls by {} refused, or rejected as invalid before they changed anything, past the budget of such lines, not recorded one by one\",\"refused\":{},\"caller\":",
        go_code_name(s.code),
        s.refused,
        if s.caller.is_some() {
            "this caller"
        } else if s.unidentified {
            "callers not identified (their pod is not known: they share one budget)"
        } else {
            "callers beyond the table of tracked callers (not named: they are many)"
        },
        s.refused
    );
    match &s.caller {
        Some(c) => c.write_json(out),
        None => out.push_str("null"),
    }
    out.push_str("}\n");
}

/// Append one JSON line for `e`.
pub(super) fn format_line(out: &mut String, e: &Entry, schemas: &mut Schemas) {
    let start = out.len();
    out.push_str("{\"ts\":");
    json::timestamp(out, e.time);
    out.push_str(",\"group\":");
    json::string(out, e.api.group.as_str());
    out.push_str(",\"version\":");
    json::string(out, e.api.version);
    out.push_str(",\"method\":");
    json::string(out, e.method);
    let _ = write!(out, ",\"code\":\"{}\",\"message\":", go_code_name(e.code));
    let message_at = out.len();
    let _ = write!(
        out,
        ",\"duration_us\":{},\"caller\":",
        e.duration.as_micros()
    );
    e.caller.write_json(out);
    out.push_str(",\"request\":");
    let secrets = schemas.request(out, e.api, e.method, e.request.as_deref());
    out.push_str("}\n");
    // The message goes in last: it may have to be scrubbed of the secrets
    // the request carried (an error that quotes its input).
    let mut message = e.message.clone();
    for s in &secrets {
        message = message.replace(s.as_str(), csi_proxy_api::secrets::REDACTED);
    }
    let mut m = String::new();
    json::string(&mut m, &message);
    out.insert_str(message_at, &m);
    debug_assert!(out[start..].ends_with('\n'));
}
