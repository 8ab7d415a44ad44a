//! The async side of a connection: move bytes between the socket or pipe and
//! the [`Connection`] state machine, run handlers, keep time (call
//! deadlines, receive timeouts, keepalive, idle timeout) and close
//! connections that never sent the HTTP/2 preface.
//!
//! One task per connection does everything; cheap handlers run right here,
//! so a typical call costs one read and one write, with no hand-off between
//! tasks. Blocking handlers run on tokio's blocking pool and come back
//! through a channel.
//!
//! Work per wake-up is bounded: the state machine takes a batch of frames at
//! a time; when frames are left over (a flood), the task yields to the
//! runtime before the next batch, and takes none while the output waits for
//! a client that does not read. Nothing more is read until those frames are
//! done.

mod clock;
mod stream;

pub use stream::Io;

use crate::budget::BodyBudget;
use crate::conn::{Connection, Limits};
use crate::hpack::quote;
use crate::service::{Code, Outcome, Reply, Service};
use clock::Clock;
use std::collections::HashMap;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;
use stream::{read_into, write_some, Read};

/// How long a shutdown waits for what a client may already be sending: the
/// first bytes of a connection accepted just before, or the answer to the
/// drain PING (after which every request sent before our GOAWAY is in).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(1);
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Blocking jobs one connection may hold at a time (jobs whose callers
/// gave up included: a thread stuck in I/O cannot be cancelled), so a few
/// stalled connections cannot drain tokio's blocking pool (512 threads)
/// for everyone else. The server bounds each caller as well
/// (`csi_proxy_server::caller::jobs`).
pub const MAX_JOBS_PER_CONNECTION: usize = 32;

/// Connection settings.
#[derive(Clone, Debug)]
pub struct Options {
    pub limits: Limits,
    /// How long a connection may stay open without sending the HTTP/2
    /// preface.
    pub preface_timeout: Duration,
    /// After the preface, a connection with no open stream for this long
    /// is sent GOAWAY and closed (clients reconnect transparently). Zero
    /// never closes.
    pub idle_timeout: Duration,
    /// Send a PING after this long without hearing from the client. Zero
    /// never pings.
    pub keepalive_time: Duration,
    /// Close the connection if nothing arrives this long after a PING.
    pub keepalive_timeout: Duration,
    /// Request bytes held between frames, shared by every connection given
    /// a clone of these options.
    pub budget: BodyBudget,
    /// How long a finished connection (failed, or GOAWAY sent with nothing
    /// left open) waits for a client to read its last frames before it is
    /// closed anyway.
    pub linger: Duration,
}

impl Options {
    pub const DEFAULT_PREFACE_TIMEOUT: Duration = Duration::from_secs(120);
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(15 * 60);
    pub const DEFAULT_KEEPALIVE_TIME: Duration = Duration::from_secs(2 * 3600);
    pub const DEFAULT_KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);
    pub const DEFAULT_BUDGET: usize = 64 << 20;
    pub const DEFAULT_LINGER: Duration = Duration::from_secs(10);
}

impl Default for Options {
    fn default() -> Self {
        Options {
            limits: Limits::default(),
            preface_timeout: Options::DEFAULT_PREFACE_TIMEOUT,
            idle_timeout: Options::DEFAULT_IDLE_TIMEOUT,
            keepalive_time: Options::DEFAULT_KEEPALIVE_TIME,
            keepalive_timeout: Options::DEFAULT_KEEPALIVE_TIMEOUT,
            budget: BodyBudget::new(Options::DEFAULT_BUDGET),
            linger: Options::DEFAULT_LINGER,
        }
    }
}

struct InFlight {
    path: String,
    start: Instant,
    deadline: Option<Instant>,
    /// Already answered (deadline exceeded); the job still runs and still
    /// counts against the limit.
    answered: bool,
}

/// Serve one connection until the client leaves, the connection fails, or
/// `shutdown` is cancelled and every open call has been answered.
///
/// Until the client sends its first bytes, the connection is only this
/// small future waiting for readability: grpc-go's probe connections, which
/// never send anything, cost a parked task and a descriptor until the
/// preface timeout closes them. The connection state is allocated when the
/// first bytes arrive.
pub async fn serve<I: Io, S: Service>(
    io: I,
    service: S,
    options: Options,
    shutdown: CancellationToken,
) {
    let preface_deadline = Instant::now() + options.preface_timeout;
    // A fresh socket may report readiness before any byte arrived; only a
    // read tells, so the first bytes go through a small buffer.
    let mut first = [0u8; 64];
    // A connection accepted just before shutdown may be a client that is
    // sending its call right now: it gets SHUTDOWN_GRACE to start.
    let mut deadline = preface_deadline;
    let mut shutting_down = false;
    let n = loop {
        tokio::select! {
            biased;
            _ = shutdown.cancelled(), if !shutting_down => {
                shutting_down = true;
                deadline = deadline.min(Instant::now() + SHUTDOWN_GRACE);
            }
            _ = tokio::time::sleep_until(deadline) => {
                tracing::debug!("closing a connection that never sent anything");
                return;
            }
            ready = io.readable() => {
                if ready.is_err() {
                    return;
                }
                match io.try_read(&mut first) {
                    Ok(0) => return,
                    Ok(n) => break n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    Err(e) => {
                        tracing::debug!(error = %e, "connection read failed");
                        return;
                    }
                }
            }
        }
    };
    let first = first[..n].to_vec();
    Box::pin(serve_active(
        io,
        first,
        service,
        options,
        shutdown,
        preface_deadline,
    ))
    .await
}

async fn serve_active<I: Io, S: Service>(
    io: I,
    first: Vec<u8>,
    service: S,
    options: Options,
    shutdown: CancellationToken,
    preface_deadline: Instant,
) {
    let limits = options.limits;
    let mut conn = Connection::with_budget(limits, options.budget.clone());
    let (tx, mut rx) = mpsc::unbounded_channel::<(u32, Reply)>();
    let mut state = State {
        input: crate::buf::Buffer::default(),
        backlog: false,
        service,
        in_flight: HashMap::new(),
        max_jobs: (limits.max_streams as usize).min(MAX_JOBS_PER_CONNECTION),
        tx,
    };
    let start = Instant::now();
    let mut clock = Clock::new(&options, start);
    conn.advance_clock(start.into_std());
    state.take_in(&mut conn, &first);
    let mut eof = false;
    let mut drain = Drain::Serving;
    // One timer and one shutdown wait for the whole connection: creating
    // them per loop turn would register and deregister them with the
    // runtime (shared by every connection) on every call. The timer is moved
    // only to an earlier deadline; a wake-up before a deadline that moved
    // later (keepalive, idle) just re-arms it.
    let far = || Instant::now() + Duration::from_secs(24 * 3600);
    let timer = tokio::time::sleep_until(far());
    tokio::pin!(timer);
    let cancelled = shutdown.cancelled();
    tokio::pin!(cancelled);
    loop {
        if !conn.output().is_empty() {
            if let Err(e) = write_some(&io, &mut conn) {
                tracing::debug!(error = %e, "connection write failed");
                return;
            }
        }
        let pending = conn.output().len();
        // After EOF nobody waits for the calls still running: their
        // replies are dropped when they finish.
        if pending == 0 && (conn.is_done() || eof) {
            return;
        }
        if eof && pending > 0 {
            // The client is gone; nothing more will be read.
            return;
        }
        drain = drain.step(&mut conn, Instant::now());
        let room = pending < limits.max_output;
        if state.backlog && room {
            // Frames left from a full batch: let other tasks run first.
            tokio::task::yield_now().await;
            conn.advance_clock(std::time::Instant::now());
            state.take_backlog(&mut conn);
            continue;
        }
        clock.update(&conn, Instant::now());
        let next = clock.next(&conn, &state, preface_deadline);
        if let Some(next) = [next, drain.deadline()].into_iter().flatten().min() {
            if next < timer.deadline() {
                timer.as_mut().reset(next);
            }
        }
        let want_read = !eof && !state.backlog && room;
        tokio::select! {
            biased;
            _ = &mut cancelled, if matches!(drain, Drain::Serving) => {
                drain = Drain::FirstCall(Instant::now() + SHUTDOWN_GRACE);
                continue;
            }
            Some((stream, reply)) = rx.recv() => {
                if let Some(f) = state.in_flight.remove(&stream) {
                    if !f.answered {
                        state.service.answered(&f.path, f.start.elapsed(), reply.code);
                        conn.respond(stream, &reply);
                    }
                }
            }
            _ = &mut timer => {
                let now = Instant::now();
                timer.as_mut().reset(far());
                conn.advance_clock(now.into_std());
                drain = drain.step(&mut conn, now);
                if !clock.fire(&mut conn, &mut state, preface_deadline, now) {
                    return;
                }
            }
            ready = io.readable(), if want_read => {
                if let Err(e) = ready {
                    tracing::debug!(error = %e, "connection read failed");
                    return;
                }
                match read_into(&io, &mut conn, &mut state) {
                    Read::Bytes => clock.heard(Instant::now()),
                    Read::Eof => eof = true,
                    Read::WouldBlock => {}
                    Read::Failed(e) => {
                        tracing::debug!(error = %e, "connection read failed");
                        return;
                    }
                }
            }
            ready = io.writable(), if pending > 0 => {
                if let Err(e) = ready {
                    tracing::debug!(error = %e, "connection write failed");
                    return;
                }
            }
        }
    }
}

/// Where a graceful shutdown of the connection is.
#[derive(Clone, Copy)]
enum Drain {
    /// No shutdown asked.
    Serving,
    /// Shutdown asked: a client that has not opened a stream yet may be
    /// about to (a connection made for one call, accepted just before);
    /// its first GOAWAY waits for that stream, until this instant. A
    /// client that gets a GOAWAY before it sent its queued call fails the
    /// call rather than retrying it elsewhere (tonic, hyper).
    FirstCall(Instant),
    /// First GOAWAY and drain PING sent; the final GOAWAY goes out with the
    /// PING's answer, or at this instant.
    Ping(Instant),
    /// Final GOAWAY sent.
    Done,
}

impl Drain {
    fn step(self, conn: &mut Connection, now: Instant) -> Drain {
        match self {
            Drain::FirstCall(until) if conn.opened_streams() || now >= until => {
                if conn.go_away_gracefully() {
                    Drain::Ping(now + SHUTDOWN_GRACE).step(conn, now)
                } else if now >= until {
                    // Still no preface: nothing to serve.
                    conn.go_away();
                    Drain::Done
                } else {
                    self
                }
            }
            Drain::Ping(_) if !conn.draining() => Drain::Done,
            Drain::Ping(until) if now >= until => {
                conn.go_away();
                Drain::Done
            }
            other => other,
        }
    }

    fn deadline(self) -> Option<Instant> {
        match self {
            Drain::FirstCall(t) | Drain::Ping(t) => Some(t),
            Drain::Serving | Drain::Done => None,
        }
    }
}

/// What the driver keeps besides the connection.
struct State<S> {
    /// Bytes of an incomplete frame, or frames left for the next batch.
    input: crate::buf::Buffer,
    /// `input` holds whole frames the connection has not taken yet.
    backlog: bool,
    service: S,
    in_flight: HashMap<u32, InFlight>,
    /// At most this many blocking jobs per connection.
    max_jobs: usize,
    tx: mpsc::UnboundedSender<(u32, Reply)>,
}

impl<S: Service> State<S> {
    /// Feed received bytes to the connection and start every request that
    /// became complete.
    fn take_in(&mut self, conn: &mut Connection, bytes: &[u8]) {
        // Usually whole frames arrive and nothing needs copying.
        let result = if self.input.is_empty() {
            conn.receive(bytes)
                .map(|used| self.input.extend(&bytes[used..]))
        } else {
            self.input.extend(bytes);
            conn.receive(self.input.pending())
                .map(|used| self.input.consume(used))
        };
        self.after_receive(conn, result);
    }

    /// Feed the next batch of frames already buffered.
    fn take_backlog(&mut self, conn: &mut Connection) {
        let result = conn
            .receive(self.input.pending())
            .map(|used| self.input.consume(used));
        self.after_receive(conn, result);
    }

    fn after_receive(
        &mut self,
        conn: &mut Connection,
        result: Result<(), crate::frame::ConnError>,
    ) {
        self.backlog = conn.paused();
        if let Err(e) = result {
            tracing::debug!(error = %e, "closing the connection");
            self.input.clear();
            self.backlog = false;
        }
        while let Some(req) = conn.next_request() {
            let start = Instant::now();
            let service = &self.service;
            let deadline = req.timeout.map(|t| start.into_std() + t);
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                service.call_by(&req.path, &req.message, deadline)
            }))
            .unwrap_or_else(|_| Outcome::Done(panicked()));
            match outcome {
                Outcome::Done(reply) => {
                    service.answered(&req.path, start.elapsed(), reply.code);
                    conn.respond(req.stream, &reply);
                }
                Outcome::Blocking(job) if self.in_flight.len() >= self.max_jobs => {
                    // Jobs whose callers gave up (deadline) still run; they
                    // count too, so no client can pile up blocked threads.
                    // Unavailable: a retry on this connection may succeed
                    // once they end.
                    let reply = Reply::error(
                        Code::Unavailable,
                        format!(
                            "too many operations in progress on this connection (at most {} \
                             blocking at a time); retry later",
                            self.max_jobs
                        ),
                    );
                    crate::service::refuse(job, &reply.message);
                    service.answered(&req.path, start.elapsed(), reply.code);
                    conn.respond(req.stream, &reply);
                }
                Outcome::Blocking(job) => {
                    self.in_flight.insert(
                        req.stream,
                        InFlight {
                            path: req.path,
                            start,
                            deadline: req.timeout.map(|t| start + t),
                            answered: false,
                        },
                    );
                    let tx = self.tx.clone();
                    let stream = req.stream;
                    tokio::task::spawn_blocking(move || {
                        let reply =
                            catch_unwind(AssertUnwindSafe(job)).unwrap_or_else(|_| panicked());
                        // The connection may be gone; then nobody waits.
                        let _ = tx.send((stream, reply));
                    });
                }
            }
        }
    }

    /// Answer DEADLINE_EXCEEDED for every call past its deadline; the jobs
    /// run on and keep counting.
    fn expire_calls(&mut self, conn: &mut Connection, now: Instant) {
        for (&id, f) in self.in_flight.iter_mut() {
            if !f.answered && f.deadline.is_some_and(|d| d <= now) {
                f.answered = true;
                self.service
                    .answered(&f.path, f.start.elapsed(), Code::DeadlineExceeded);
                let reply = Reply::error(
                    Code::DeadlineExceeded,
                    format!(
                        "{} did not finish within the deadline",
                        quote(f.path.as_bytes())
                    ),
                );
                conn.respond(id, &reply);
            }
        }
    }
}

fn panicked() -> Reply {
    Reply::error(Code::Internal, "the host operation panicked")
}
