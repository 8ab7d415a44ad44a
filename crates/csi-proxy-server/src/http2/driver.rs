//! The async side of a connection: move bytes between the socket or pipe and
//! the [`Connection`] state machine, run handlers, enforce deadlines, and
//! close idle connections that never sent the HTTP/2 preface.
//!
//! One task per connection does everything; cheap handlers run right here,
//! so a typical call costs one read and one write, with no hand-off between
//! tasks. Blocking handlers run on tokio's blocking pool and come back
//! through a channel.

use super::conn::{Connection, Limits};
use crate::dispatch::{Outcome, Reply, VersionedService};
use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tonic::Code;

/// A connected byte stream that can be used through a shared reference with
/// readiness notifications (Unix sockets and named pipes both can), so one
/// task can wait for "readable or writable" at once.
pub trait Io: Send + Sync + 'static {
    fn readable(&self) -> impl Future<Output = io::Result<()>> + Send;
    fn writable(&self) -> impl Future<Output = io::Result<()>> + Send;
    fn try_read(&self, buf: &mut [u8]) -> io::Result<usize>;
    fn try_write(&self, buf: &[u8]) -> io::Result<usize>;
}

macro_rules! impl_io {
    ($t:ty) => {
        impl Io for $t {
            fn readable(&self) -> impl Future<Output = io::Result<()>> + Send {
                <$t>::readable(self)
            }
            fn writable(&self) -> impl Future<Output = io::Result<()>> + Send {
                <$t>::writable(self)
            }
            fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
                <$t>::try_read(self, buf)
            }
            fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
                <$t>::try_write(self, buf)
            }
        }
    };
}

#[cfg(unix)]
impl_io!(tokio::net::UnixStream);
#[cfg(windows)]
impl_io!(tokio::net::windows::named_pipe::NamedPipeServer);

/// Connection settings.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    pub limits: Limits,
    /// How long a connection may stay open without sending the HTTP/2
    /// preface.
    pub preface_timeout: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            limits: Limits::default(),
            preface_timeout: Duration::from_secs(120),
        }
    }
}

/// Read granularity; the buffer grows only while a frame is incomplete.
const READ_CHUNK: usize = 32 << 10;
/// Stop reading while this much output is waiting for a slow reader.
const MAX_PENDING_OUTPUT: usize = 1 << 20;

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
pub async fn serve<I: Io>(
    io: I,
    service: VersionedService,
    options: Options,
    shutdown: CancellationToken,
) {
    let preface_deadline = Instant::now() + options.preface_timeout;
    // A fresh socket may report readiness before any byte arrived; only a
    // read tells, so the first bytes go through a small buffer.
    let mut first = [0u8; 64];
    let n = loop {
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep_until(preface_deadline) => {
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

async fn serve_active<I: Io>(
    io: I,
    first: Vec<u8>,
    service: VersionedService,
    options: Options,
    shutdown: CancellationToken,
    preface_deadline: Instant,
) {
    let mut conn = Connection::new(options.limits);
    let mut chunk: Vec<u8> = vec![0; READ_CHUNK];
    let (tx, mut rx) = mpsc::unbounded_channel::<(u32, Reply)>();
    let mut state = State {
        input: Vec::new(),
        service,
        in_flight: HashMap::new(),
        max_jobs: options.limits.max_streams as usize,
        tx,
    };
    state.take_in(&mut conn, &first);
    let service = state.service.clone();
    let mut eof = false;
    let mut draining = false;
    loop {
        if !conn.output().is_empty() {
            if let Err(e) = write_some(&io, conn.output()) {
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
        let next_deadline = state
            .in_flight
            .values()
            .filter(|f| !f.answered)
            .filter_map(|f| f.deadline)
            .min();
        let want_read = !eof && pending < MAX_PENDING_OUTPUT;
        tokio::select! {
            biased;
            _ = shutdown.cancelled(), if !draining => {
                draining = true;
                conn.go_away();
            }
            Some((stream, reply)) = rx.recv() => {
                if let Some(f) = state.in_flight.remove(&stream) {
                    if !f.answered {
                        log(&service, &f.path, f.start, reply.code);
                        conn.respond(stream, &reply);
                    }
                }
            }
            _ = tokio::time::sleep_until(next_deadline.unwrap_or(preface_deadline)),
                if next_deadline.is_some() => {
                let now = Instant::now();
                let expired: Vec<u32> = state.in_flight
                    .iter()
                    .filter(|(_, f)| !f.answered && f.deadline.is_some_and(|d| d <= now))
                    .map(|(&id, _)| id)
                    .collect();
                for id in expired {
                    if let Some(f) = state.in_flight.get_mut(&id) {
                        f.answered = true;
                        log(&service, &f.path, f.start, Code::DeadlineExceeded);
                        let reply = Reply::error(
                            Code::DeadlineExceeded,
                            format!("{} did not finish within the deadline", f.path),
                        );
                        conn.respond(id, &reply);
                    }
                }
            }
            _ = tokio::time::sleep_until(preface_deadline), if !conn.preface_received() => {
                tracing::debug!("closing a connection that never sent the HTTP/2 preface");
                return;
            }
            ready = io.readable(), if want_read => {
                if let Err(e) = ready {
                    tracing::debug!(error = %e, "connection read failed");
                    return;
                }
                let n = match io.try_read(&mut chunk) {
                    Ok(0) => {
                        eof = true;
                        continue;
                    }
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    Err(e) => {
                        tracing::debug!(error = %e, "connection read failed");
                        return;
                    }
                };
                state.take_in(&mut conn, &chunk[..n]);
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

/// What the driver keeps besides the connection.
struct State {
    /// Bytes of an incomplete frame.
    input: Vec<u8>,
    service: VersionedService,
    in_flight: HashMap<u32, InFlight>,
    /// At most this many blocking jobs per connection.
    max_jobs: usize,
    tx: mpsc::UnboundedSender<(u32, Reply)>,
}

impl State {
    /// Feed received bytes to the connection and start every request that
    /// became complete.
    fn take_in(&mut self, conn: &mut Connection, bytes: &[u8]) {
        // Usually whole frames arrive and nothing needs copying.
        let result = if self.input.is_empty() {
            conn.receive(bytes)
                .map(|used| self.input.extend_from_slice(&bytes[used..]))
        } else {
            self.input.extend_from_slice(bytes);
            conn.receive(&self.input).map(|used| {
                self.input.drain(..used);
            })
        };
        if let Err(e) = result {
            tracing::debug!(error = %e, "closing the connection");
            self.input.clear();
        }
        while let Some(req) = conn.next_request() {
            let start = Instant::now();
            let service = &self.service;
            let outcome = catch_unwind(AssertUnwindSafe(|| service.call(&req.path, &req.message)))
                .unwrap_or_else(|_| Outcome::Done(panicked()));
            match outcome {
                Outcome::Done(reply) => {
                    log(service, &req.path, start, reply.code);
                    conn.respond(req.stream, &reply);
                }
                Outcome::Blocking(_) if self.in_flight.len() >= self.max_jobs => {
                    // Jobs whose callers gave up (deadline) still run; they
                    // count too, so no client can pile up blocked threads.
                    let reply = Reply::error(
                        Code::ResourceExhausted,
                        "too many operations in progress on this connection",
                    );
                    log(service, &req.path, start, reply.code);
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
}

fn panicked() -> Reply {
    Reply::error(Code::Internal, "the host operation panicked")
}

fn log(service: &VersionedService, path: &str, start: Instant, code: Code) {
    if service.log_requests() {
        tracing::info!(
            method = %path,
            duration_us = start.elapsed().as_micros() as u64,
            code = ?code,
            "request"
        );
    }
}

/// Write as much of `out` as the peer takes now.
fn write_some<I: Io>(io: &I, out: &mut Vec<u8>) -> io::Result<()> {
    let mut written = 0;
    while written < out.len() {
        match io.try_write(&out[written..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => written += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) => return Err(e),
        }
    }
    out.drain(..written);
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use crate::groups::testing::service_for;
    use crate::http2::client::{RawClient, Shape};
    use csi_proxy_api::Group;
    use csi_proxy_host::filesystem::*;
    use csi_proxy_host::Result;
    use prost::Message;
    use std::sync::Arc;

    /// CreateSymlink (a blocking operation) takes 600 ms; everything else
    /// is instant.
    struct SlowSymlink;

    impl FilesystemApi for SlowSymlink {
        fn path_exists(&self, _: PathExistsRequest) -> Result<PathExistsResponse> {
            Ok(PathExistsResponse { exists: true })
        }
        fn mkdir(&self, _: MkdirRequest) -> Result<MkdirResponse> {
            Ok(MkdirResponse {})
        }
        fn rmdir(&self, _: RmdirRequest) -> Result<RmdirResponse> {
            Ok(RmdirResponse {})
        }
        fn rmdir_contents(&self, _: RmdirContentsRequest) -> Result<RmdirContentsResponse> {
            Ok(RmdirContentsResponse {})
        }
        fn create_symlink(&self, _: CreateSymlinkRequest) -> Result<CreateSymlinkResponse> {
            std::thread::sleep(Duration::from_millis(600));
            Ok(CreateSymlinkResponse {})
        }
        fn is_symlink(&self, _: IsSymlinkRequest) -> Result<IsSymlinkResponse> {
            Ok(IsSymlinkResponse { is_symlink: false })
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn deadlines_are_answered_and_abandoned_jobs_still_count() {
        let svc = service_for(Group::Filesystem, "v1", |h| {
            h.filesystem = Arc::new(SlowSymlink);
        });
        let (a, b) = tokio::net::UnixStream::pair().unwrap();
        let options = Options {
            limits: Limits {
                max_streams: 2,
                ..Limits::default()
            },
            ..Options::default()
        };
        let token = CancellationToken::new();
        let server = tokio::spawn(serve(a, svc, options, token.clone()));
        let b = b.into_std().unwrap();
        b.set_nonblocking(false).unwrap();
        let client = tokio::task::spawn_blocking(move || {
            let mut c = RawClient::new(b, Shape::default()).unwrap();
            let mkdir = csi_proxy_api::filesystem::v1::CreateSymlinkRequest {
                source_path: "/x".into(),
                target_path: "/y".into(),
            }
            .encode_to_vec();
            let exists = csi_proxy_api::filesystem::v1::PathExistsRequest { path: "/x".into() }
                .encode_to_vec();
            let call = |c: &mut RawClient<_>, method: &str, msg: &[u8], timeout: &[u8]| {
                let block = c.request_block(method, None, &[(b"grpc-timeout", timeout)]);
                let t = std::time::Instant::now();
                let r = c.call_with_block(&block, msg).unwrap();
                (r.grpc_status, t.elapsed())
            };
            // Two calls give up after 100 ms; their jobs keep running.
            for _ in 0..2 {
                let (code, took) = call(&mut c, "/v1.Filesystem/CreateSymlink", &mkdir, b"100m");
                assert_eq!(code, Some(Code::DeadlineExceeded as i32));
                assert!(took < Duration::from_millis(500), "{took:?}");
            }
            // A third blocking call is refused while both still run...
            let (code, _) = call(&mut c, "/v1.Filesystem/CreateSymlink", &mkdir, b"5S");
            assert_eq!(code, Some(Code::ResourceExhausted as i32));
            // ...inline calls still work...
            let (code, _) = call(&mut c, "/v1.Filesystem/PathExists", &exists, b"5S");
            assert_eq!(code, Some(0));
            // ...and once the jobs are done, blocking calls work again.
            std::thread::sleep(Duration::from_millis(700));
            let (code, took) = call(&mut c, "/v1.Filesystem/CreateSymlink", &mkdir, b"5S");
            assert_eq!(code, Some(0));
            assert!(took >= Duration::from_millis(600), "{took:?}");
        });
        client.await.unwrap();
        token.cancel();
        tokio::time::timeout(Duration::from_secs(5), server)
            .await
            .expect("the connection ends after shutdown")
            .unwrap();
    }
}
