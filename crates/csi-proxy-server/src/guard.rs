//! Audit and caller policy around every call: the [`Hook`] the dispatcher
//! ([`crate::dispatch::VersionedService::call_as`]) runs for each of the
//! 139 methods when `-audit-log` or `-caller-policy` is set.
//!
//! Order: the policy is asked first (a refused call never reaches the
//! host); in blocking audit mode a call is refused before it runs while the
//! audit log cannot be written; then the call runs and its line is handed
//! to the audit log ([`AuditLog::settle`]). In blocking mode a recorded
//! call runs whole in one blocking job (the call, then the wait for its
//! line), never inline: a job bound that turns the job down means nothing
//! ran, and the dropped job records that refusal ([`Unrun`]). A refused
//! call's line is queued at once, never left to a job.
//! Calls answered `InvalidArgument` (nothing touched) share the refused
//! calls' budget of lines ([`crate::audit::limit`]).

use crate::audit::{AuditLog, Entry, Mode, Place};
use crate::caller::Caller;
use crate::dispatch::{Call, GuardedCall, Hook, Seen};
use crate::policy::PolicyFile;
use csi_proxy_api::ApiVersion;
use csi_proxy_host::effect;
use csi_proxy_host::system::{narrow, ServicePolicy};
use csi_proxy_http2::{Code, Outcome, Reply};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

/// What guards calls: either or both may be set.
#[derive(Clone, Debug, Default)]
pub struct Guard {
    pub audit: Option<Arc<AuditLog>>,
    pub policy: Option<Arc<PolicyFile>>,
}

impl Guard {
    /// Whether anything needs the caller's identity.
    pub fn needs_caller(&self) -> bool {
        self.audit.is_some() || self.policy.is_some()
    }

    /// Run `call` under the policy and the audit log. `call` puts the
    /// request as its handler decoded it in the slot it is given: the
    /// audit line renders that, never a parse of its own.
    pub(crate) fn run(
        &self,
        c: Call<'_>,
        call: impl FnOnce(Option<&mut Seen>) -> Outcome + Send + 'static,
    ) -> Outcome {
        let group = c.api.group.as_str();
        if let Some(p) = &self.policy {
            if !p.current().allows(c.api.group, c.operation, c.caller) {
                let reply = Reply::error(
                    Code::PermissionDenied,
                    format!(
                        "the caller policy does not allow this caller to call {group}/{}",
                        c.method
                    ),
                );
                // A caller refused in a loop gets summary lines past its
                // budget (audit::limit).
                let own_line = self.audit.as_ref().is_none_or(|a| {
                    !a.records(false, true) || a.admit_refusal(c.caller, Code::PermissionDenied)
                });
                if !own_line {
                    return Outcome::Done(reply);
                }
                return self.refused(
                    Started::now(&c).entry(&reply, (c.canonical)(c.request)),
                    reply,
                    true,
                );
            }
        }
        let narrow = self.services_for(&c);
        let call = move |seen: Option<&mut Seen>| narrowed(narrow, || call(seen));
        let Some(audit) = self.audit.as_ref() else {
            return call(None);
        };
        let recorded = audit.records(c.write, false);
        if audit.mode() == Mode::Blocking && !audit.healthy() {
            let reply = Reply::error(
                Code::Unavailable,
                "the audit log cannot be written (-audit-mode=blocking): call refused before it ran",
            );
            let request = recorded.then(|| (c.canonical)(c.request)).flatten();
            return self.refused(Started::now(&c).entry(&reply, request), reply, recorded);
        }
        if !recorded {
            return call(None);
        }
        // Only a recorded call pays for its clocks, caller and request.
        let started = Started::now(&c);
        let (log, deadline) = (audit.clone(), c.deadline);
        // The call, its answer (a panicking operation is answered Internal,
        // as the HTTP/2 driver would, and recorded so) and its request as
        // decoded.
        // Whether the host said it changed nothing is observed on the
        // thread the operation runs on (`csi_proxy_host::effect`).
        let run = move || {
            let mut seen: Seen = None;
            let (outcome, unchanged) = effect::observe(|| {
                catch_unwind(AssertUnwindSafe(|| call(Some(&mut seen))))
                    .unwrap_or_else(|_| Outcome::Done(panicked()))
            });
            (outcome, seen, unchanged)
        };
        let job = |job: Box<dyn FnOnce() -> Reply + Send>| {
            effect::observe(|| catch_unwind(AssertUnwindSafe(job)).unwrap_or_else(|_| panicked()))
        };
        match audit.mode() {
            // Blocking mode: nothing recorded runs before its line can be
            // waited for. The whole call is one blocking job, the line
            // settled in it: a job turned down by a bound (the connection's,
            // the caller's) means nothing ran. An inline placement would run
            // on the async worker and leave only the wait for the line to a
            // job that a bound may drop after the host changed.
            Mode::Blocking => {
                let unrun = Unrun::new(
                    &log,
                    started,
                    Request::Bytes(c.canonical, c.request.to_vec()),
                );
                Outcome::Blocking(Box::new(move || {
                    // The line's place in the queue is taken before the call
                    // runs: a full queue, or a client that gave up already,
                    // refuses the call before it changed anything; the
                    // refusal is recorded (red team 40async: it left no
                    // line).
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        return unrun.refused(Reply::error(
                            Code::DeadlineExceeded,
                            "the call's deadline passed before it ran (-audit-mode=blocking)",
                        ));
                    }
                    let Some(place) = log.reserve() else {
                        return unrun.refused(Reply::error(
                            Code::Unavailable,
                            "the audit queue is full (-audit-mode=blocking): call refused before it ran",
                        ));
                    };
                    let (started, request) = unrun.disarm();
                    let _running = log.running(unfinished(&started, request));
                    let (outcome, seen, unchanged) = run();
                    let (reply, unchanged) = match outcome {
                        Outcome::Done(reply) => (reply, unchanged),
                        Outcome::Blocking(j) => job(j),
                    };
                    settle(&log, Some(place), started, seen, reply, unchanged, deadline)
                }))
            }
            Mode::BestEffort => match run() {
                (Outcome::Done(reply), seen, unchanged) => Outcome::Done(settle(
                    &log, None, started, seen, reply, unchanged, deadline,
                )),
                (Outcome::Blocking(j), seen, _) => {
                    let unrun = Unrun::new(&log, started, Request::Seen(seen));
                    Outcome::Blocking(Box::new(move || {
                        let (started, request) = unrun.disarm();
                        let seen = match request {
                            Request::Seen(s) => s,
                            Request::Bytes(..) => None,
                        };
                        let _running =
                            log.running(unfinished(&started, Request::Seen(seen.clone())));
                        let (reply, unchanged) = job(j);
                        settle(&log, None, started, seen, reply, unchanged, deadline)
                    }))
                }
            },
        }
    }

    /// The caller policy's `"system/services"` list for a StartService or
    /// StopService call (`None`: no narrowing).
    fn services_for(&self, c: &Call<'_>) -> Option<Arc<ServicePolicy>> {
        let p = self.policy.as_ref()?;
        let service_call = c.api.group == csi_proxy_api::Group::System
            && matches!(c.operation, "start_service" | "stop_service");
        service_call
            .then(|| p.current().services_for(c.caller))
            .flatten()
    }

    /// A call answered without running: record it if `record`. The line is
    /// queued without waiting, in both modes: nothing ran, so there is
    /// nothing to hold back, and a job that waited for it could be turned
    /// down by a job bound (the connection's, the caller's) and the line
    /// lost with it.
    fn refused(&self, entry: Entry, reply: Reply, record: bool) -> Outcome {
        match self
            .audit
            .as_ref()
            .filter(|a| record && a.records(false, true))
        {
            None => Outcome::Done(reply),
            Some(a) => {
                a.submit(entry);
                Outcome::Done(reply)
            }
        }
    }
}

impl Hook for Guard {
    fn needs_caller(&self) -> bool {
        Guard::needs_caller(self)
    }

    fn run(&self, c: Call<'_>, call: GuardedCall) -> Outcome {
        Guard::run(self, c, call)
    }
}

/// The reply of a call that ran, after its line ([`AuditLog::settle_by`]).
/// A call that was rejected before the host did anything (answered
/// `InvalidArgument`: the request does not decode or fails validation), or
/// that the host says changed nothing (`unchanged`:
/// [`csi_proxy_host::effect`], e.g. Mkdir of a directory that exists), is
/// budgeted like a refused call ([`AuditLog::admit_refusal`]): past the
/// caller's budget it is counted in a summary line, so that a caller
/// cannot push other callers' lines out through rotation with invalid
/// calls. Every other answer gets its own line.
fn settle(
    log: &AuditLog,
    place: Option<Place>,
    started: Started,
    seen: Seen,
    reply: Reply,
    unchanged: bool,
    deadline: Option<Instant>,
) -> Reply {
    if (unchanged || touched_nothing(reply.code)) && !log.admit_refusal(&started.caller, reply.code)
    {
        return reply;
    }
    let entry = started.entry(&reply, seen);
    match place {
        Some(place) => log.settle_in(place, entry, reply, deadline),
        None => log.settle_by(entry, reply, deadline),
    }
}

/// The answers after which the host changed nothing: `InvalidArgument`,
/// which the dispatcher gives for a request that does not decode and the
/// host for one that fails validation, before it acts.
pub(crate) fn touched_nothing(code: Code) -> bool {
    code == Code::InvalidArgument
}

/// The answer to a call whose operation panicked (the HTTP/2 driver's).
fn panicked() -> Reply {
    Reply::error(Code::Internal, "the host operation panicked")
}

/// Runs `call` (and the blocking job it may hand back) with `list` as the
/// caller's list of services ([`csi_proxy_host::system::narrow`]).
fn narrowed(list: Option<Arc<ServicePolicy>>, call: impl FnOnce() -> Outcome) -> Outcome {
    if list.is_none() {
        return call();
    }
    match narrow::run(list.clone(), call) {
        Outcome::Blocking(job) => Outcome::Blocking(Box::new(move || narrow::run(list, job))),
        done => done,
    }
}

/// What is known of a call when it starts; its audit entry once answered.
/// The line of a recorded call still running when the proxy stops.
fn unfinished(started: &Started, request: Request) -> crate::audit::Unfinished {
    let started = started.clone();
    Box::new(move || {
        let reply = Reply::error(
            Code::Unknown,
            "still running when the proxy stopped: its result is not known",
        );
        let seen = match request {
            Request::Seen(s) => s,
            Request::Bytes(decode, bytes) => decode(&bytes),
        };
        started.entry(&reply, seen)
    })
}

/// The request of a call not run yet, for its line if it never runs.
enum Request {
    /// As its handler decoded it.
    Seen(Seen),
    /// As received, with the route's decoder (decoded only if needed).
    Bytes(crate::dispatch::Canonical, Vec<u8>),
}

/// A recorded call's blocking job that has not run: dropped unrun (a
/// bound on blocking jobs turned it down, `csi_proxy_http2::refuse`), it
/// records the refusal, within the caller's budget of refused lines, as
/// any refused call (red team 39caller D: such refusals left no line).
struct Unrun {
    log: Arc<AuditLog>,
    armed: Option<(Started, Request)>,
}

impl Unrun {
    fn new(log: &Arc<AuditLog>, started: Started, request: Request) -> Unrun {
        Unrun {
            log: log.clone(),
            armed: Some((started, request)),
        }
    }

    /// The job runs: its line is the call's own.
    fn disarm(mut self) -> (Started, Request) {
        self.armed.take().expect("armed until disarmed")
    }

    /// The job refuses the call before it runs: its line says so (within
    /// the caller's budget of refused lines); the reply is given back.
    fn refused(mut self, reply: Reply) -> Reply {
        if let Some((started, request)) = self.armed.take() {
            self.record(started, request, &reply);
        }
        reply
    }

    fn record(&self, started: Started, request: Request, reply: &Reply) {
        if !self.log.records(false, true) || !self.log.admit_refusal(&started.caller, reply.code) {
            return;
        }
        let seen = match request {
            Request::Seen(s) => s,
            Request::Bytes(decode, bytes) => decode(&bytes),
        };
        self.log.submit(started.entry(reply, seen));
    }
}

impl Drop for Unrun {
    fn drop(&mut self) {
        let Some((started, request)) = self.armed.take() else {
            return;
        };
        let why = csi_proxy_http2::refusal()
            .unwrap_or_else(|| "not run: dropped before it started (the proxy is stopping)".into());
        self.record(started, request, &Reply::error(Code::Unavailable, why));
    }
}

#[derive(Clone)]
struct Started {
    time: SystemTime,
    at: Instant,
    api: ApiVersion,
    method: &'static str,
    caller: Arc<Caller>,
}

impl Started {
    fn now(c: &Call<'_>) -> Started {
        Started {
            time: SystemTime::now(),
            at: Instant::now(),
            api: c.api,
            method: c.method,
            caller: c.caller.clone(),
        }
    }

    fn entry(self, reply: &Reply, request: Seen) -> Entry {
        Entry {
            time: self.time,
            api: self.api,
            method: self.method,
            code: reply.code,
            message: reply.message.clone(),
            duration: self.at.elapsed(),
            caller: self.caller,
            request,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{Config, Level, Sink};
    use std::time::Duration;

    fn audited(mode: Mode) -> (tempfile::TempDir, Arc<AuditLog>, Guard) {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::open(
            &Config {
                sink: Sink::File {
                    path: dir.path().join("audit.log"),
                    max_bytes: 0,
                    max_backups: 0,
                },
                level: Level::Write,
                mode,
            },
            None,
        )
        .unwrap();
        let guard = Guard {
            audit: Some(log.clone()),
            policy: None,
        };
        (dir, log, guard)
    }

    /// The bypass: an operation that panics was never audited.
    #[test]
    fn a_panicking_operation_is_audited_as_internal() {
        for mode in [Mode::BestEffort, Mode::Blocking] {
            for blocking_job in [false, true] {
                let (dir, log, guard) = audited(mode);
                let caller = Arc::new(Caller {
                    uid: Some(0),
                    ..Caller::default()
                });
                let call = Call {
                    api: csi_proxy_api::find(csi_proxy_api::Group::Filesystem, "v1").unwrap(),
                    method: "Mkdir",
                    operation: "mkdir",
                    write: true,
                    caller: &caller,
                    request: &[],
                    canonical: |_| Some(Vec::new()),
                    deadline: None,
                };
                let outcome = guard.run(call, move |_| {
                    if blocking_job {
                        Outcome::Blocking(Box::new(|| panic!("the host operation broke")))
                    } else {
                        panic!("the host operation broke")
                    }
                });
                let reply = outcome.wait();
                assert_eq!(reply.code, Code::Internal, "{mode:?} {blocking_job}");
                log.close(Duration::from_secs(5));
                let text = std::fs::read_to_string(dir.path().join("audit.log")).unwrap();
                let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
                assert_eq!(v["code"], "Internal", "{text}");
                assert_eq!(v["method"], "Mkdir");
                assert!(
                    v["message"].as_str().unwrap().contains("panicked"),
                    "{text}"
                );
            }
        }
    }
}
