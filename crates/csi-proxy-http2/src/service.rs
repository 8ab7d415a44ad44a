//! The boundary between the HTTP/2 layer and whoever answers calls: a
//! [`Service`] takes a method path and the request message bytes (the gRPC
//! length prefix removed) and gives back a [`Reply`], at once or as a job
//! for the blocking pool. The HTTP/2 layer knows nothing of protobuf or of
//! the API; the service knows nothing of frames, streams or windows.

use std::time::{Duration, Instant};
pub use tonic::Code;

/// The result of one call: a status and, when the status is OK, the encoded
/// response message (without the gRPC length prefix).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    pub code: Code,
    pub message: String,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn ok(body: Vec<u8>) -> Self {
        Reply {
            code: Code::Ok,
            message: String::new(),
            body,
        }
    }

    pub fn error(code: Code, message: impl Into<String>) -> Self {
        Reply {
            code,
            message: message.into(),
            body: Vec::new(),
        }
    }
}

impl From<tonic::Status> for Reply {
    fn from(s: tonic::Status) -> Self {
        Reply::error(s.code(), s.message())
    }
}

/// A job for the blocking pool.
pub type Job = Box<dyn FnOnce() -> Reply + Send + 'static>;

thread_local! {
    static REFUSAL: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Drop `job` unrun because a bound on blocking jobs turned it down, with
/// the `reason` its caller is answered. A job that must account for not
/// running (its audit line) reads the reason in its `Drop` ([`refusal`]).
pub fn refuse(job: Job, reason: &str) {
    REFUSAL.with(|r| *r.borrow_mut() = Some(reason.to_string()));
    drop(job);
    REFUSAL.with(|r| *r.borrow_mut() = None);
}

/// Inside a job's `Drop`: why it is dropped unrun, when a bound refused it
/// ([`refuse`]); `None`: dropped for another reason (the runtime stopped).
pub fn refusal() -> Option<String> {
    REFUSAL.with(|r| r.borrow().clone())
}

/// What a service gives back for one call.
pub enum Outcome {
    /// The reply, computed on the calling thread.
    Done(Reply),
    /// Work to run on the blocking pool; it yields the reply.
    Blocking(Job),
}

impl Outcome {
    /// Run a blocking job on the current thread (tests, library use).
    pub fn wait(self) -> Reply {
        match self {
            Outcome::Done(r) => r,
            Outcome::Blocking(job) => job(),
        }
    }
}

/// Answers the calls of one endpoint.
pub trait Service: Clone + Send + Sync + 'static {
    /// Call the method at `path` (`/<package>.<Service>/<Method>`, as the
    /// client sent it) with the request `message`. Runs on the connection's
    /// task: cheap work is done here, anything slow goes into
    /// [`Outcome::Blocking`].
    fn call(&self, path: &str, message: &[u8]) -> Outcome;

    /// [`Service::call`] for a client that gives up at `deadline` (its
    /// `grpc-timeout`, when it sent one): past it the driver has answered
    /// DEADLINE_EXCEEDED and a blocking job's reply goes nowhere, so the
    /// service may bound its waits by it. By default it is not looked at.
    fn call_by(&self, path: &str, message: &[u8], deadline: Option<Instant>) -> Outcome {
        let _ = deadline;
        self.call(path, message)
    }

    /// A call was answered with `code` after `elapsed` (request logs,
    /// metrics). Called once per call that reached [`Service::call`],
    /// including calls answered DEADLINE_EXCEEDED while their job runs on.
    fn answered(&self, path: &str, elapsed: Duration, code: Code) {
        let _ = (path, elapsed, code);
    }
}
