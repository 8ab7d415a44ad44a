//! The COM worker threads of one WMI worker, and the caller's bounded wait.
//!
//! Each thread initialises COM (multi-threaded apartment) once and keeps its
//! own warm connections ([`Wmi`]). A call is a closure sent down one queue
//! with its deadline; the caller waits for the answer until that deadline
//! (plus [`GRACE`], so the thread's own timeout, which names the WMI call,
//! usually answers first) and then answers [`Error::DeadlineExceeded`].
//!
//! A call nobody waits for any more is never started: the thread that takes
//! it skips it. A thread still inside a call whose caller gave up (a
//! provider that ignores the semisynchronous timeouts, or a synchronous
//! `GetObject` or `ConnectServer` that hangs) is *overdue*: it no longer
//! counts towards the pool's size, so the next call starts a thread in its
//! place. At most [`WmiWorker::with_max_threads`] threads are overdue at a
//! time; past that, calls wait in the queue and end at their deadline.
//! When an overdue call finally returns, its answer goes to a channel
//! nobody reads (dropped with it) and the thread takes jobs again.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use windows::Win32::System::Com::{CoInitializeEx, CoUninitialize, COINIT_MULTITHREADED};

use super::{init_security, Wmi};
use crate::win::errors;
use crate::{deadline, Error, Result};

type Job = Box<dyn FnOnce(&Wmi) + Send + 'static>;

/// How many WMI threads a worker runs at most, unless told otherwise.
pub const DEFAULT_THREADS: usize = 8;

/// A thread beyond the first ends after this long without a job.
pub const IDLE_EXIT: Duration = Duration::from_secs(60);

/// The bound of a call whose caller has no deadline (library mode, a
/// client that sends no `grpc-timeout`): long enough for an SMB mapping
/// or an iSCSI login against a slow server, short enough that a stuck
/// provider does not hold a caller for good.
pub const DEFAULT_BOUND: Duration = Duration::from_secs(120);

/// How much longer than its deadline a caller waits for the thread's own
/// answer.
pub const GRACE: Duration = Duration::from_millis(250);

// The life of one call, in its ticket.
const QUEUED: u8 = 0;
const RUNNING: u8 = 1;
const DONE: u8 = 2;
/// The caller gave up before a thread took it: never started.
const ABANDONED: u8 = 3;
/// The caller gave up while a thread runs it: that thread is overdue.
const OVERDUE: u8 = 4;

struct Ticket {
    state: AtomicU8,
    deadline: Instant,
}

struct Queued {
    ticket: Arc<Ticket>,
    run: Job,
}

/// What the worker's threads share: the job queue and how many threads run,
/// wait and are overdue.
struct Shared {
    name: String,
    jobs: Mutex<mpsc::Receiver<Queued>>,
    threads: AtomicUsize,
    idle: AtomicUsize,
    overdue: AtomicUsize,
}

struct Pool {
    sender: mpsc::Sender<Queued>,
    shared: Arc<Shared>,
}

/// The handle to the COM worker threads of one group (SMB, iSCSI, System,
/// storage: each has its own, so a stuck call in one group never holds up
/// another). Cheap to create: the first thread (and COM) starts with the
/// first [`call`](Self::call).
pub struct WmiWorker {
    name: String,
    namespace: String,
    max_threads: usize,
    pool: Mutex<Option<Pool>>,
    /// Test hook: the next job first blocks here, as a provider call that
    /// ignores every timeout would (only in this crate's unit tests).
    #[cfg(test)]
    hang: Mutex<Option<mpsc::Receiver<()>>>,
}

impl WmiWorker {
    /// A worker whose [`Wmi::query`] and [`Wmi::exec_method`] use
    /// `namespace` (e.g. [`super::STORAGE_NAMESPACE`]), with at most
    /// [`DEFAULT_THREADS`] threads.
    pub fn new(namespace: impl Into<String>) -> WmiWorker {
        WmiWorker {
            name: "wmi".into(),
            namespace: namespace.into(),
            max_threads: DEFAULT_THREADS,
            pool: Mutex::new(None),
            #[cfg(test)]
            hang: Mutex::new(None),
        }
    }

    /// Names the worker's group (in thread names, logs and errors).
    pub fn named(mut self, name: &str) -> WmiWorker {
        self.name = name.into();
        self
    }

    /// At most `n` working threads (at least one): with one, every call
    /// waits for the one before it. Up to `n` more may be overdue.
    pub fn with_max_threads(mut self, n: usize) -> WmiWorker {
        self.max_threads = n.max(1);
        self
    }

    /// Runs `job` on a worker thread and returns its result, waiting until
    /// the current call's deadline ([`crate::deadline`]), or
    /// [`DEFAULT_BOUND`] without one; the job's WMI waits end then too
    /// ([`Wmi::deadline`]). Past it: [`Error::DeadlineExceeded`]. A job
    /// that panics is answered with [`Error::Internal`]; the worker
    /// survives it.
    pub fn call<T, F>(&self, job: F) -> Result<T>
    where
        F: FnOnce(&Wmi) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let until = deadline::current().unwrap_or_else(|| Instant::now() + DEFAULT_BOUND);
        self.call_until(until, job)
    }

    /// [`call`](Self::call) bounded by `limit` from now, whatever the
    /// caller's deadline: for a storage operation, which goes on past its
    /// caller's deadline and keeps its result for the retry
    /// (`storage::ops`).
    pub fn call_within<T, F>(&self, limit: Duration, job: F) -> Result<T>
    where
        F: FnOnce(&Wmi) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        self.call_until(Instant::now() + limit, job)
    }

    fn call_until<T, F>(&self, until: Instant, job: F) -> Result<T>
    where
        F: FnOnce(&Wmi) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        if Instant::now() >= until {
            return Err(Error::DeadlineExceeded(format!(
                "the {} WMI call was not started: its deadline had passed",
                self.name
            )));
        }
        let ticket = Arc::new(Ticket {
            state: AtomicU8::new(QUEUED),
            deadline: until,
        });
        let (reply_tx, reply_rx) = mpsc::sync_channel::<Result<T>>(1);
        #[cfg(test)]
        let hang = self.hang.lock().unwrap_or_else(|p| p.into_inner()).take();
        let run: Job = Box::new(move |wmi| {
            #[cfg(test)]
            if let Some(h) = hang {
                let _ = h.recv();
            }
            // The caller may have gone: the answer is dropped with the
            // channel.
            let _ = reply_tx.send(job(wmi));
        });
        let (sender, shared) = self.sender()?;
        sender
            .send(Queued {
                ticket: ticket.clone(),
                run,
            })
            .map_err(|_| Error::Internal("the WMI worker threads have stopped".into()))?;
        let wait = (until + GRACE).saturating_duration_since(Instant::now());
        match reply_rx.recv_timeout(wait) {
            Ok(r) => r,
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(self.no_answer(&ticket)),
            Err(mpsc::RecvTimeoutError::Timeout) => self.give_up(&ticket, &shared, &reply_rx),
        }
    }

    /// The job dropped its reply channel: skipped (its deadline passed in
    /// the queue) or panicked.
    fn no_answer(&self, ticket: &Ticket) -> Error {
        if ticket.state.load(Ordering::Acquire) == ABANDONED {
            Error::DeadlineExceeded(format!(
                "the {} WMI call was not started before its deadline (every thread of the group was busy)",
                self.name
            ))
        } else {
            Error::Internal("the WMI job failed without an answer (it panicked)".into())
        }
    }

    /// The caller's deadline passed: the job is abandoned (not started
    /// yet) or its thread marked overdue (running), unless it has just
    /// answered.
    fn give_up<T>(
        &self,
        ticket: &Ticket,
        shared: &Shared,
        reply: &mpsc::Receiver<Result<T>>,
    ) -> Result<T> {
        let st = &ticket.state;
        if st
            .compare_exchange(QUEUED, ABANDONED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            return Err(self.no_answer(ticket));
        }
        if st
            .compare_exchange(RUNNING, OVERDUE, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            let overdue = shared.overdue.fetch_add(1, Ordering::AcqRel) + 1;
            tracing::warn!(
                group = %self.name,
                overdue,
                "a WMI call did not return by its caller's deadline; its thread is set aside and the group goes on without it"
            );
            return Err(Error::DeadlineExceeded(format!(
                "the {} WMI call did not answer within its deadline (it may still take effect)",
                self.name
            )));
        }
        // Done between the timeout and here: the answer is in the channel.
        reply
            .try_recv()
            .unwrap_or_else(|_| Err(self.no_answer(ticket)))
    }

    /// Whether a worker thread has been started.
    pub fn started(&self) -> bool {
        self.pool
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// How many worker threads run now (overdue ones included).
    pub fn threads(&self) -> usize {
        self.count(|s| &s.threads)
    }

    /// How many threads are inside a call whose caller gave up.
    pub fn overdue(&self) -> usize {
        self.count(|s| &s.overdue)
    }

    fn count(&self, f: impl Fn(&Shared) -> &AtomicUsize) -> usize {
        self.pool
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map_or(0, |p| f(&p.shared).load(Ordering::Acquire))
    }

    /// Test hook: the next job blocks (before its WMI work) until
    /// `release` receives or is dropped, ignoring its deadline.
    #[cfg(test)]
    pub(crate) fn hang_next_job(&self, release: mpsc::Receiver<()>) {
        *self.hang.lock().unwrap_or_else(|p| p.into_inner()) = Some(release);
    }

    /// The queue to the running threads, starting the first, or another
    /// when none is idle and fewer than the pool's size are working (an
    /// overdue thread does not count; at most as many again may be
    /// overdue).
    fn sender(&self) -> Result<(mpsc::Sender<Queued>, Arc<Shared>)> {
        let mut guard = self.pool.lock().unwrap_or_else(|p| p.into_inner());
        let pool = match guard.as_mut() {
            Some(p) => p,
            None => {
                let (tx, rx) = mpsc::channel::<Queued>();
                guard.insert(Pool {
                    sender: tx,
                    shared: Arc::new(Shared {
                        name: self.name.clone(),
                        jobs: Mutex::new(rx),
                        threads: AtomicUsize::new(0),
                        idle: AtomicUsize::new(0),
                        overdue: AtomicUsize::new(0),
                    }),
                })
            }
        };
        let shared = &pool.shared;
        let threads = shared.threads.load(Ordering::Acquire);
        let working = threads.saturating_sub(shared.overdue.load(Ordering::Acquire));
        let idle = shared.idle.load(Ordering::Acquire);
        if threads == 0
            || (idle == 0 && working < self.max_threads && threads < 2 * self.max_threads)
        {
            shared.threads.fetch_add(1, Ordering::AcqRel);
            let (namespace, s) = (self.namespace.clone(), shared.clone());
            let spawned = std::thread::Builder::new()
                .name(format!("csi-proxy-wmi-{}", self.name))
                .spawn(move || worker_main(namespace, s));
            if let Err(e) = spawned {
                shared.threads.fetch_sub(1, Ordering::AcqRel);
                if threads == 0 {
                    return Err(Error::Internal(format!(
                        "cannot start the WMI worker thread: {e}"
                    )));
                }
                // The running threads take the job.
                tracing::warn!("cannot start another WMI worker thread: {e}");
            }
        }
        Ok((pool.sender.clone(), pool.shared.clone()))
    }
}

/// Takes the next job: waits for one (a thread beyond the first gives up
/// after [`IDLE_EXIT`]); `None` when the worker is gone or the thread is
/// to end.
fn next_job(shared: &Shared) -> Option<Queued> {
    shared.idle.fetch_add(1, Ordering::AcqRel);
    let job = {
        let jobs = shared.jobs.lock().unwrap_or_else(|p| p.into_inner());
        match jobs.recv_timeout(IDLE_EXIT) {
            Ok(job) => Some(job),
            Err(mpsc::RecvTimeoutError::Disconnected) => None,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                // The last thread stays for the next call.
                let others =
                    shared
                        .threads
                        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                            (n > 1).then(|| n - 1)
                        });
                if others.is_ok() {
                    shared.idle.fetch_sub(1, Ordering::AcqRel);
                    return None;
                }
                drop(jobs);
                shared.idle.fetch_sub(1, Ordering::AcqRel);
                return next_job(shared);
            }
        }
    };
    shared.idle.fetch_sub(1, Ordering::AcqRel);
    if job.is_none() {
        shared.threads.fetch_sub(1, Ordering::AcqRel);
    }
    job
}

/// Runs one job unless its caller gave up or its deadline passed before it
/// started; a thread that was overdue counts as working again afterwards.
fn run_job(wmi: &Wmi, shared: &Shared, q: Queued) {
    let Queued { ticket, run } = q;
    if Instant::now() >= ticket.deadline {
        // Too late to start: the caller answers DeadlineExceeded (the
        // reply channel is dropped unused).
        let _ =
            ticket
                .state
                .compare_exchange(QUEUED, ABANDONED, Ordering::AcqRel, Ordering::Acquire);
        return;
    }
    if ticket
        .state
        .compare_exchange(QUEUED, RUNNING, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return;
    }
    wmi.set_deadline(ticket.deadline);
    // A panicking job drops its reply sender: the caller gets an error, the
    // worker goes on.
    let _ = catch_unwind(AssertUnwindSafe(|| run(wmi)));
    if ticket.state.swap(DONE, Ordering::AcqRel) == OVERDUE {
        shared.overdue.fetch_sub(1, Ordering::AcqRel);
        tracing::warn!(
            group = %shared.name,
            late_ms = Instant::now()
                .saturating_duration_since(ticket.deadline)
                .as_millis() as u64,
            "an overdue WMI call returned after its caller's deadline; its answer was discarded"
        );
    }
}

/// The body of a worker thread: COM up, jobs until the queue closes (or
/// the thread is idle too long), COM objects released, COM down.
fn worker_main(namespace: String, shared: Arc<Shared>) {
    // SAFETY: initialises COM for this thread (multi-threaded apartment);
    // balanced by CoUninitialize below when it succeeded.
    let init = unsafe { CoInitializeEx(None, COINIT_MULTITHREADED) };
    init_security();
    {
        let wmi = Wmi::new(
            namespace,
            init.ok()
                .map_err(|e| errors::hresult("CoInitializeEx", "the WMI worker thread", &e)),
        );
        while let Some(job) = next_job(&shared) {
            run_job(&wmi, &shared, job);
        }
    }
    if init.is_ok() {
        // SAFETY: balances the successful CoInitializeEx above; every COM
        // object of this thread was released when `wmi` was dropped.
        unsafe { CoUninitialize() };
    }
}
