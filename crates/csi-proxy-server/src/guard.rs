//! Audit and caller policy around every call: the hook the dispatcher
//! ([`crate::dispatch::VersionedService::call_as`]) runs for each of the
//! 139 methods when `-audit-log` or `-caller-policy` is set.
//!
//! Order: the policy is asked first (a refused call never reaches the
//! host); in blocking audit mode a call is refused before it runs while the
//! audit log cannot be written; then the call runs and its line is handed
//! to the audit log ([`AuditLog::settle`]). In blocking mode waiting for the
//! line happens on the blocking pool, never on an async worker.

use crate::audit::{AuditLog, Entry, Mode};
use crate::caller::Caller;
use crate::policy::PolicyFile;
use csi_proxy_api::ApiVersion;
use csi_proxy_http2::{Code, Outcome, Reply};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

/// What guards calls: either or both may be set.
#[derive(Clone, Debug, Default)]
pub struct Guard {
    pub audit: Option<Arc<AuditLog>>,
    pub policy: Option<Arc<PolicyFile>>,
}

/// One method, as the guard sees it.
pub(crate) struct Call<'a> {
    pub api: ApiVersion,
    pub method: &'static str,
    /// Whether the method can change the host.
    pub write: bool,
    pub caller: &'a Arc<Caller>,
    pub request: &'a [u8],
}

impl Guard {
    /// Whether anything needs the caller's identity.
    pub fn needs_caller(&self) -> bool {
        self.audit.is_some() || self.policy.is_some()
    }

    /// Run `call` under the policy and the audit log.
    pub(crate) fn run(&self, c: Call<'_>, call: impl FnOnce() -> Outcome) -> Outcome {
        let group = c.api.group.as_str();
        if let Some(p) = &self.policy {
            if !p.current().allows(group, c.method, c.caller) {
                let reply = Reply::error(
                    Code::PermissionDenied,
                    format!(
                        "the caller policy does not allow this caller to call {group}/{}",
                        c.method
                    ),
                );
                return self.refused(
                    Started::now(&c).entry(&reply, c.request.to_vec()),
                    reply,
                    true,
                );
            }
        }
        let Some(audit) = self.audit.as_ref() else {
            return call();
        };
        let recorded = audit.records(c.write, false);
        if audit.mode() == Mode::Blocking && !audit.healthy() {
            let reply = Reply::error(
                Code::Unavailable,
                "the audit log cannot be written (-audit-mode=blocking): call refused before it ran",
            );
            return self.refused(
                Started::now(&c).entry(&reply, c.request.to_vec()),
                reply,
                recorded,
            );
        }
        if !recorded {
            return call();
        }
        // Only a recorded call pays for its clocks and caller.
        let started = Started::now(&c);
        let (log, request) = (audit.clone(), c.request.to_vec());
        let finish = move |reply: Reply| log.settle(started.entry(&reply, request), reply);
        match (call(), audit.mode()) {
            (Outcome::Done(reply), Mode::Blocking) => {
                Outcome::Blocking(Box::new(move || finish(reply)))
            }
            (Outcome::Done(reply), Mode::BestEffort) => Outcome::Done(finish(reply)),
            (Outcome::Blocking(job), _) => Outcome::Blocking(Box::new(move || finish(job()))),
        }
    }

    /// A call answered without running: record it if `record` (waiting for
    /// the line off the async workers in blocking mode).
    fn refused(&self, entry: Entry, reply: Reply, record: bool) -> Outcome {
        match self
            .audit
            .as_ref()
            .filter(|a| record && a.records(false, true))
        {
            None => Outcome::Done(reply),
            Some(a) if a.mode() == Mode::Blocking => {
                let a = a.clone();
                Outcome::Blocking(Box::new(move || {
                    let _ = a.commit(entry);
                    reply
                }))
            }
            Some(a) => {
                a.submit(entry);
                Outcome::Done(reply)
            }
        }
    }
}

/// What is known of a call when it starts; its audit entry once answered.
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

    fn entry(self, reply: &Reply, request: Vec<u8>) -> Entry {
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
