//! The one mechanism that serves every versioned gRPC service.
//!
//! A [`VersionedService`] is a routing table from method path to a handler
//! built by [`Routes::unary`]: decode the versioned request, convert it to the
//! version-free request ([`Wire`]), run the host operation, convert the
//! response back, encode. The per-group routes (`routes/*.rs`) only add
//! the message conversions to the catalog's tables. The handler knows nothing of HTTP/2: it
//! takes the request message bytes and gives back a [`Reply`], either at once
//! ([`Outcome::Done`], for cheap read-only operations) or as a job for the
//! blocking pool ([`Outcome::Blocking`]).
//!
//! An operation whose answer depends only on its request and on state the
//! API versions (the disk lists, by the disk inventory's generation: a
//! [`Token`]) keeps its last encoded answer: while the token and the request
//! stay the same, that answer is sent again without building, converting
//! and encoding it (a list of 256 disks costs ~100 µs to build and encode).
//!
//! Which methods a version has, the operation each goes to, where it runs
//! and whether it is cached are the routing catalog's ([`crate::catalog`]).
//!
//! A service answers only the paths of its own `<package>.<Service>` and,
//! beside them, its plain routes ([`VersionedService::with_plain`]: the
//! health service, unguarded and unmeasured); any other path on its
//! endpoint gets `Unimplemented` (least privilege per endpoint).
//!
//! This is also the one place calls are measured: a service built
//! [`VersionedService::with_metrics`] records every call of its table
//! ([`crate::metrics`]); without metrics nothing is recorded. And the one
//! place calls are guarded: a service built [`VersionedService::with_guard`]
//! runs its [`Hook`] around every call (`crate::guard`: the caller policy
//! and the audit log), with the identity of the connection's client
//! ([`VersionedService::for_caller`]).

use crate::caller::jobs::Jobs;
use crate::caller::Caller;
use crate::catalog::{self, Placement};
use crate::metrics::{HostTimer, MethodMetrics, Metrics};
use crate::status;
use crate::wire::Wire;
use csi_proxy_api::ApiVersion;
pub use csi_proxy_http2::{Code, Job, Outcome, Reply};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A method's handler; it times the host operation with the timer when
/// metrics are on, and when given a [`Seen`] slot puts there the request
/// as it decoded it.
type Handler = Arc<dyn Fn(&[u8], Option<&HostTimer>, Option<&mut Seen>) -> Outcome + Send + Sync>;

/// The request a handler decoded, encoded again by the same generated code
/// (prost's canonical form: unknown fields dropped, a field sent twice
/// merged as the handler merged it): what the audit log renders, so that
/// what is logged is what ran (`None`: not decodable, nothing ran).
pub type Seen = Option<Vec<u8>>;

/// A request decoded as its handler decodes it, in its canonical form
/// ([`Seen`]), for a call that is refused before it runs.
pub type Canonical = fn(&[u8]) -> Seen;

/// A route answered beside a service's own methods, unguarded and
/// unmeasured: its path and its answer to a request message, given the
/// endpoint's service name (the health service: `crate::health`).
pub type Plain = (&'static str, fn(&[u8], &str) -> Reply);

/// What runs around every call of a guarded service (the caller policy and
/// the audit log: `crate::guard` implements it).
pub trait Hook: Send + Sync {
    /// Whether calls need the identity of their caller.
    fn needs_caller(&self) -> bool;

    /// Run `call` as the hook decides; `call` puts the request as its
    /// handler decoded it in the slot it is given.
    fn run(&self, c: Call<'_>, call: GuardedCall) -> Outcome;
}

/// A call as a [`Hook`] runs it: it puts the request as its handler
/// decoded it in the slot it is given.
pub type GuardedCall = Box<dyn FnOnce(Option<&mut Seen>) -> Outcome + Send>;

/// One method call, as a [`Hook`] sees it.
pub struct Call<'a> {
    pub api: ApiVersion,
    pub method: &'static str,
    /// The version-free operation the method routes to (the caller
    /// policy's key).
    pub operation: &'static str,
    /// Whether the method can change the host.
    pub write: bool,
    pub caller: &'a Arc<Caller>,
    /// The encoded request as received.
    pub request: &'a [u8],
    /// How the route decodes it (for a call refused before it runs).
    pub canonical: Canonical,
    /// When the client gives up (its `grpc-timeout`): in blocking mode an
    /// audit line is waited for no longer.
    pub deadline: Option<std::time::Instant>,
}

fn canonical<Req: prost::Message + Default>(bytes: &[u8]) -> Seen {
    Req::decode(bytes).ok().map(|m| m.encode_to_vec())
}

/// One routed method.
#[derive(Clone)]
struct Route {
    handler: Handler,
    /// The method name, e.g. `PathExists`.
    method: &'static str,
    /// The version-free operation, e.g. `path_exists`.
    operation: &'static str,
    metrics: Option<MethodMetrics>,
    /// Whether the operation can change the host (audit level `write`):
    /// from [`crate::catalog`].
    write: bool,
    canonical: Canonical,
}

/// Asked before each call of a cached operation: a number that changes
/// whenever the operation's answer may change (`None`: do not reuse an
/// answer this time).
pub type Token<A> = fn(&A) -> csi_proxy_host::Result<Option<u64>>;

/// The last answer of a cached operation: its token, its request bytes and
/// its encoded response.
type Memo = Arc<Mutex<Option<(u64, Vec<u8>, Vec<u8>)>>>;

/// Decodes a versioned request and converts it to the API's; puts the
/// decoded request in `seen` when asked.
fn decode<Req, AReq>(bytes: &[u8], seen: Option<&mut Seen>) -> Result<AReq, Reply>
where
    Req: prost::Message + Default + Wire<AReq>,
{
    match Req::decode(bytes) {
        Ok(req) => {
            if let Some(seen) = seen {
                *seen = Some(req.encode_to_vec());
            }
            req.wire().map_err(Reply::from)
        }
        Err(e) => Err(status::undecodable_request(&e).into()),
    }
}

/// Builds the routing table of one versioned service over an API object `A`.
pub struct Routes<A: ?Sized> {
    api: Arc<A>,
    handlers: HashMap<&'static str, (Handler, &'static catalog::Route, Canonical)>,
}

impl<A: ?Sized + Send + Sync + 'static> Routes<A> {
    pub fn new(api: Arc<A>) -> Self {
        Routes {
            api,
            handlers: HashMap::new(),
        }
    }

    /// Route the catalog's `route` to the version-free operation `call`,
    /// run where the catalog says: `Req` and `Resp` are the versioned wire
    /// messages, `AReq`/`AResp` the API's. A route the catalog caches asks
    /// `token` (see [`Token`]).
    pub fn unary<Req, Resp, AReq, AResp>(
        mut self,
        route: &'static catalog::Route,
        call: fn(&A, AReq) -> csi_proxy_host::Result<AResp>,
        token: Option<Token<A>>,
    ) -> Self
    where
        Req: prost::Message + Default + Wire<AReq> + Send + 'static,
        Resp: prost::Message + Send + 'static,
        AReq: Send + 'static,
        AResp: Wire<Resp> + Send + 'static,
    {
        let (method, placement) = (route.method, route.placement);
        let answer = Answer::<A, AReq, AResp> {
            api: self.api.clone(),
            call,
            token: token.filter(|_| route.cached),
            memo: Arc::default(),
        };
        let handler: Handler = Arc::new(move |bytes: &[u8], timer: Option<&HostTimer>, seen| {
            let areq: AReq = match decode::<Req, AReq>(bytes, seen) {
                Ok(r) => r,
                Err(reply) => return Outcome::Done(reply),
            };
            // The request bytes key a cached answer.
            let key = || {
                if answer.token.is_some() {
                    bytes.to_vec()
                } else {
                    Vec::new()
                }
            };
            match placement {
                Placement::Inline => {
                    let attempt =
                        csi_proxy_host::inline::run(|| answer.give::<Resp>(bytes, areq, timer));
                    match attempt {
                        Some(reply) => Outcome::Done(reply),
                        // The host would have to block: run it again on the
                        // pool (the request is decoded again; it was moved).
                        None => {
                            let (answer, req, timer) =
                                (answer.clone(), bytes.to_vec(), timer.cloned());
                            Outcome::Blocking(Box::new(move || {
                                match decode::<Req, AReq>(&req, None) {
                                    Ok(areq) => {
                                        answer.give_blocking::<Resp>(&req, areq, timer.as_ref())
                                    }
                                    Err(reply) => reply,
                                }
                            }))
                        }
                    }
                }
                Placement::Blocking => {
                    let (answer, req, timer) = (answer.clone(), key(), timer.cloned());
                    Outcome::Blocking(Box::new(move || {
                        answer.give_blocking::<Resp>(&req, areq, timer.as_ref())
                    }))
                }
            }
        });
        assert!(
            self.handlers
                .insert(method, (handler, route, canonical::<Req>))
                .is_none(),
            "method {method} routed twice"
        );
        self
    }

    /// Finish the table as the service of `version`.
    pub fn build(self, version: ApiVersion, log_requests: bool) -> VersionedService {
        let service = version.service();
        let handlers = self
            .handlers
            .into_iter()
            .map(|(method, (handler, entry, canonical))| {
                let route = Route {
                    handler,
                    method,
                    operation: entry.operation,
                    metrics: None,
                    write: entry.write(),
                    canonical,
                };
                (format!("/{service}/{method}"), route)
            })
            .collect();
        VersionedService {
            inner: Arc::new(Inner {
                service,
                api: version,
                handlers,
                log_requests,
                guard: None,
                plain: &[],
            }),
        }
    }
}

/// How one route answers: the API operation, and for a cached operation
/// its token and last answer.
struct Answer<A: ?Sized, AReq, AResp> {
    api: Arc<A>,
    call: fn(&A, AReq) -> csi_proxy_host::Result<AResp>,
    token: Option<Token<A>>,
    memo: Memo,
}

impl<A: ?Sized, AReq, AResp> Clone for Answer<A, AReq, AResp> {
    fn clone(&self) -> Self {
        Answer {
            api: self.api.clone(),
            call: self.call,
            token: self.token,
            memo: self.memo.clone(),
        }
    }
}

impl<A: ?Sized, AReq, AResp> Answer<A, AReq, AResp> {
    /// The reply to `areq` (encoded as `req`); `None` when this is an
    /// inline attempt and the host would have to block. A cached
    /// operation answers with its last answer while the token and the
    /// request stay the same, and keeps each new OK answer.
    fn give<Resp>(&self, req: &[u8], areq: AReq, timer: Option<&HostTimer>) -> Option<Reply>
    where
        Resp: prost::Message,
        AResp: Wire<Resp>,
    {
        let blocked = |e: &csi_proxy_host::Error| {
            csi_proxy_host::inline::active() && csi_proxy_host::inline::is_would_block(e)
        };
        let lock = || self.memo.lock().unwrap_or_else(|p| p.into_inner());
        let now = match self.token.map(|t| t(&self.api)) {
            None => None,
            Some(Ok(t)) => t,
            Some(Err(e)) if blocked(&e) => return None,
            Some(Err(e)) => return Some(status::from_host(e).into()),
        };
        if let Some(t) = now {
            if let Some((last, last_req, body)) = &*lock() {
                if *last == t && last_req == req {
                    return Some(Reply::ok(body.clone()));
                }
            }
        }
        // Computed after the token: at least as new as what it names.
        let start = std::time::Instant::now();
        let result = (self.call)(&self.api, areq);
        if let Err(e) = &result {
            // Not an operation: it runs again (and is timed) where it may
            // block.
            if blocked(e) {
                return None;
            }
        }
        if let Some(t) = timer {
            t.observe_since(start);
        }
        let reply = finish::<Resp, AResp>(result);
        if let (Some(t), Code::Ok) = (now, reply.code) {
            *lock() = Some((t, req.to_vec(), reply.body.clone()));
        }
        Some(reply)
    }

    /// [`Answer::give`] where blocking is allowed.
    fn give_blocking<Resp>(&self, req: &[u8], areq: AReq, timer: Option<&HostTimer>) -> Reply
    where
        Resp: prost::Message,
        AResp: Wire<Resp>,
    {
        // Outside an inline attempt nothing answers "would block".
        self.give::<Resp>(req, areq, timer)
            .unwrap_or_else(|| Reply::error(Code::Internal, "blocked outside an inline attempt"))
    }
}

/// Convert and encode a host result.
fn finish<Resp: prost::Message, AResp: Wire<Resp>>(r: csi_proxy_host::Result<AResp>) -> Reply {
    match r.map_err(status::from_host).and_then(Wire::wire) {
        Ok(resp) => Reply::ok(resp.encode_to_vec()),
        Err(status) => status.into(),
    }
}

struct Inner {
    service: String,
    api: ApiVersion,
    handlers: HashMap<String, Route>,
    log_requests: bool,
    guard: Option<Arc<dyn Hook>>,
    plain: &'static [Plain],
}

/// One versioned gRPC service (e.g. `v1.Filesystem`): method paths to
/// handlers.
#[derive(Clone)]
pub struct VersionedService {
    inner: Arc<Inner>,
}

impl VersionedService {
    /// The gRPC service name, e.g. `v1.Filesystem`.
    pub fn name(&self) -> &str {
        &self.inner.service
    }

    /// The full paths this service answers, sorted.
    pub fn paths(&self) -> Vec<String> {
        let mut p: Vec<String> = self.inner.handlers.keys().cloned().collect();
        p.sort();
        p
    }

    /// The methods that can change the host (recorded at audit level
    /// `write`), sorted.
    pub fn write_methods(&self) -> Vec<&'static str> {
        let mut m: Vec<&'static str> = self
            .inner
            .handlers
            .values()
            .filter(|r| r.write)
            .map(|r| r.method)
            .collect();
        m.sort_unstable();
        m
    }

    /// The request `message` of the method at `path` as its handler
    /// decodes it, in the canonical form the audit log renders
    /// ([`Seen`]); `None` for a path this service does not route.
    pub fn canonical(&self, path: &str, message: &[u8]) -> Option<Seen> {
        self.inner
            .handlers
            .get(path)
            .map(|r| (r.canonical)(message))
    }

    /// Whether one line per request should be logged.
    pub fn log_requests(&self) -> bool {
        self.inner.log_requests
    }

    /// Call the method at `path` (`/<package>.<Service>/<Method>`) with the
    /// encoded request `message`, for a caller whose identity is unknown.
    pub fn call(&self, path: &str, message: &[u8]) -> Outcome {
        self.call_as(path, message, &unknown_caller())
    }

    /// [`VersionedService::call`] for `caller`.
    pub fn call_as(&self, path: &str, message: &[u8], caller: &Arc<Caller>) -> Outcome {
        self.call_as_by(path, message, caller, None)
    }

    /// [`VersionedService::call_as`] for a client that gives up at
    /// `deadline` (the guard waits for an audit line no longer).
    pub fn call_as_by(
        &self,
        path: &str,
        message: &[u8],
        caller: &Arc<Caller>,
        deadline: Option<std::time::Instant>,
    ) -> Outcome {
        let Some(route) = self.inner.handlers.get(path) else {
            if let Some((_, answer)) = self.inner.plain.iter().find(|(p, _)| *p == path) {
                return Outcome::Done(answer(message, &self.inner.service));
            }
            // The path is the client's: shown capped, never echoed whole.
            return Outcome::Done(Reply::error(
                Code::Unimplemented,
                format!(
                    "unknown method {}: this endpoint serves only {}",
                    csi_proxy_http2::hpack::quote(path.as_bytes()),
                    self.inner.service
                ),
            ));
        };
        // The call's deadline bounds waits for another caller's operation
        // (`csi_proxy_host::storage::ops`) in its blocking job.
        let with_deadline = |outcome: Outcome| match (outcome, deadline) {
            (Outcome::Blocking(job), Some(d)) => Outcome::Blocking(Box::new(move || {
                csi_proxy_host::deadline::run(Some(d), job)
            })),
            (outcome, _) => outcome,
        };
        match &self.inner.guard {
            None => with_deadline(Self::measured(route, message, None)),
            Some(guard) => {
                let call = Call {
                    api: self.inner.api,
                    method: route.method,
                    operation: route.operation,
                    write: route.write,
                    caller,
                    deadline,
                    request: message,
                    canonical: route.canonical,
                };
                // Owned: in blocking audit mode the call runs in a job.
                let (route, message) = (route.clone(), message.to_vec());
                with_deadline(guard.run(
                    call,
                    Box::new(move |seen| Self::measured(&route, &message, seen)),
                ))
            }
        }
    }

    /// Run a route, recording it in its metrics if it has them.
    fn measured(route: &Route, message: &[u8], seen: Option<&mut Seen>) -> Outcome {
        let Some(metrics) = &route.metrics else {
            return (route.handler)(message, None, seen);
        };
        // Dropped unfinished (a panic) it records Internal.
        let record = metrics.begin();
        match (route.handler)(message, Some(metrics.host()), seen) {
            Outcome::Done(reply) => {
                record.finish(reply.code);
                Outcome::Done(reply)
            }
            Outcome::Blocking(job) => Outcome::Blocking(Box::new(move || {
                let reply = job();
                record.finish(reply.code);
                reply
            })),
        }
    }

    /// The same service, recording every call of its table in `metrics`.
    #[must_use]
    pub fn with_metrics(&self, metrics: &Metrics) -> VersionedService {
        let inner = &self.inner;
        let handlers = inner
            .handlers
            .iter()
            .map(|(path, route)| {
                let group = inner.api.group.as_str();
                let m = metrics.method(&inner.service, route.method, group, route.operation);
                let route = Route {
                    metrics: Some(m),
                    ..route.clone()
                };
                (path.clone(), route)
            })
            .collect();
        VersionedService {
            inner: Arc::new(Inner {
                service: inner.service.clone(),
                api: inner.api,
                handlers,
                log_requests: inner.log_requests,
                guard: inner.guard.clone(),
                plain: inner.plain,
            }),
        }
    }

    /// The same service, guarded by `guard` (audit log, caller policy).
    #[must_use]
    pub fn with_guard(&self, guard: Arc<dyn Hook>) -> VersionedService {
        self.with(Some(guard), self.inner.plain)
    }

    /// The same service, answering `plain` beside its own methods.
    #[must_use]
    pub fn with_plain(&self, plain: &'static [Plain]) -> VersionedService {
        self.with(self.inner.guard.clone(), plain)
    }

    /// The same table with `guard` and `plain`.
    fn with(&self, guard: Option<Arc<dyn Hook>>, plain: &'static [Plain]) -> VersionedService {
        let inner = &self.inner;
        VersionedService {
            inner: Arc::new(Inner {
                service: inner.service.clone(),
                api: inner.api,
                handlers: inner.handlers.clone(),
                log_requests: inner.log_requests,
                guard,
                plain,
            }),
        }
    }

    /// Whether calls need the identity of their caller (a guard is set).
    pub fn needs_caller(&self) -> bool {
        self.inner.guard.as_ref().is_some_and(|g| g.needs_caller())
    }

    /// This service as one connection's client `caller` sees it.
    pub fn for_caller(&self, caller: Arc<Caller>) -> CallerService {
        CallerService {
            service: self.clone(),
            jobs: Jobs::of(&caller),
            owner: crate::caller::jobs::owner(&caller),
            caller,
        }
    }
}

/// The caller of a connection whose identity was not taken.
fn unknown_caller() -> Arc<Caller> {
    static UNKNOWN: std::sync::OnceLock<Arc<Caller>> = std::sync::OnceLock::new();
    UNKNOWN.get_or_init(Arc::default).clone()
}

/// A service bound to one connection's caller.
#[derive(Clone)]
pub struct CallerService {
    service: VersionedService,
    caller: Arc<Caller>,
    /// The caller's blocking-job budget, shared by its connections.
    jobs: Jobs,
    /// Whom the host charges what it keeps for this caller.
    owner: Arc<str>,
}

impl csi_proxy_http2::Service for CallerService {
    fn call(&self, path: &str, message: &[u8]) -> Outcome {
        self.service.call_as(path, message, &self.caller)
    }

    fn call_by(&self, path: &str, message: &[u8], deadline: Option<std::time::Instant>) -> Outcome {
        match self
            .service
            .call_as_by(path, message, &self.caller, deadline)
        {
            Outcome::Blocking(job) => match self.jobs.take(deadline) {
                // Held until the job ends, even after the client gave up.
                Ok(slot) => {
                    let owner = self.owner.clone();
                    Outcome::Blocking(Box::new(move || {
                        let _slot = slot;
                        csi_proxy_host::on_behalf::run(Some(owner), job)
                    }))
                }
                Err(why) => {
                    // Its audit line (if any) says so, from the job's drop.
                    csi_proxy_http2::refuse(job, why);
                    Outcome::Done(Reply::error(Code::Unavailable, why))
                }
            },
            done => done,
        }
    }

    fn answered(&self, path: &str, elapsed: Duration, code: Code) {
        csi_proxy_http2::Service::answered(&self.service, path, elapsed, code);
    }
}

impl csi_proxy_http2::Service for VersionedService {
    fn call(&self, path: &str, message: &[u8]) -> Outcome {
        VersionedService::call(self, path, message)
    }

    fn call_by(&self, path: &str, message: &[u8], deadline: Option<std::time::Instant>) -> Outcome {
        self.call_as_by(path, message, &unknown_caller(), deadline)
    }

    fn answered(&self, path: &str, elapsed: Duration, code: Code) {
        if self.inner.log_requests {
            tracing::info!(
                method = %csi_proxy_http2::hpack::quote(path.as_bytes()),
                duration_us = elapsed.as_micros() as u64,
                code = ?code,
                "request"
            );
        }
    }
}
