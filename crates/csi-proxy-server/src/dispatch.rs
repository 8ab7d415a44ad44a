//! The one mechanism that serves every versioned gRPC service.
//!
//! A [`VersionedService`] is a routing table from method path to a handler
//! built by [`Routes::unary`]: decode the versioned request, convert it to the
//! version-free request ([`Wire`]), run the host operation, convert the
//! response back, encode. The per-group tables (`groups/*.rs`) only list
//! methods and message conversions. The handler knows nothing of HTTP/2: it
//! takes the request message bytes and gives back a [`Reply`], either at once
//! ([`Outcome::Done`], for cheap read-only operations) or as a job for the
//! blocking pool ([`Outcome::Blocking`]).
//!
//! A service answers only the paths of its own `<package>.<Service>`; any
//! other path on its endpoint gets `Unimplemented` (least privilege per
//! endpoint).

use crate::status;
use crate::wire::Wire;
use csi_proxy_api::ApiVersion;
pub use csi_proxy_http2::{Code, Job, Outcome, Reply};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

type Handler = Arc<dyn Fn(&[u8]) -> Outcome + Send + Sync>;

/// Where a host operation runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// On the async worker that decoded the request: for cheap read-only
    /// operations (a few local syscalls), where a thread hop would cost more
    /// than the work itself.
    Inline,
    /// On tokio's blocking pool: for everything that mutates the host or may
    /// take long (removing a tree, formatting, WMI calls).
    Blocking,
}

/// Builds the routing table of one versioned service over an API object `A`.
pub struct Routes<A: ?Sized> {
    api: Arc<A>,
    handlers: HashMap<&'static str, Handler>,
}

impl<A: ?Sized + Send + Sync + 'static> Routes<A> {
    pub fn new(api: Arc<A>) -> Self {
        Routes {
            api,
            handlers: HashMap::new(),
        }
    }

    /// Route `method` to the version-free operation `call`, run where
    /// `placement` says: `Req` and `Resp` are the versioned wire messages,
    /// `AReq`/`AResp` the API's.
    pub fn unary<Req, Resp, AReq, AResp>(
        mut self,
        method: &'static str,
        call: fn(&A, AReq) -> csi_proxy_host::Result<AResp>,
        placement: Placement,
    ) -> Self
    where
        Req: prost::Message + Default + Wire<AReq> + Send + 'static,
        Resp: prost::Message + Send + 'static,
        AReq: Send + 'static,
        AResp: Wire<Resp> + Send + 'static,
    {
        let api = self.api.clone();
        let handler: Handler = Arc::new(move |bytes: &[u8]| {
            let areq: AReq = match Req::decode(bytes) {
                Ok(req) => match req.wire() {
                    Ok(r) => r,
                    Err(status) => return Outcome::Done(status.into()),
                },
                Err(e) => {
                    return Outcome::Done(Reply::error(
                        Code::Internal,
                        format!("cannot decode the request message: {e}"),
                    ))
                }
            };
            match placement {
                Placement::Inline => Outcome::Done(finish::<Resp, AResp>(call(&api, areq))),
                Placement::Blocking => {
                    let api = api.clone();
                    Outcome::Blocking(Box::new(move || finish::<Resp, AResp>(call(&api, areq))))
                }
            }
        });
        assert!(
            self.handlers.insert(method, handler).is_none(),
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
            .map(|(m, h)| (format!("/{service}/{m}"), h))
            .collect();
        VersionedService {
            inner: Arc::new(Inner {
                service,
                handlers,
                log_requests,
            }),
        }
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
    handlers: HashMap<String, Handler>,
    log_requests: bool,
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

    /// Whether one line per request should be logged.
    pub fn log_requests(&self) -> bool {
        self.inner.log_requests
    }

    /// Call the method at `path` (`/<package>.<Service>/<Method>`) with the
    /// encoded request `message`.
    pub fn call(&self, path: &str, message: &[u8]) -> Outcome {
        match self.inner.handlers.get(path) {
            Some(handler) => handler(message),
            // The path is the client's: shown capped, never echoed whole.
            None => Outcome::Done(Reply::error(
                Code::Unimplemented,
                format!(
                    "unknown method {}: this endpoint serves only {}",
                    csi_proxy_http2::hpack::quote(path.as_bytes()),
                    self.inner.service
                ),
            )),
        }
    }
}

impl csi_proxy_http2::Service for VersionedService {
    fn call(&self, path: &str, message: &[u8]) -> Outcome {
        VersionedService::call(self, path, message)
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
