//! The one mechanism that serves every versioned gRPC service.
//!
//! A [`VersionedService`] is a routing table from method name to a handler
//! built by [`Routes::unary`]: decode the versioned request, convert it to the
//! version-free request ([`Wire`]), run the blocking host operation on the
//! blocking pool, convert the response back, encode. The per-group tables
//! (`groups/*.rs`) only list methods and message conversions.
//!
//! A service answers only the paths of its own `<package>.<Service>`; any
//! other path on its endpoint gets `Unimplemented` (least privilege per
//! endpoint).

use crate::status;
use crate::wire::Wire;
use csi_proxy_api::ApiVersion;
use http::{Request, Response};
use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;
use tonic::body::Body;
use tonic::server::Grpc;
use tonic::{Code, Status};
use tonic_prost::ProstCodec;

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;
type Handler = Arc<dyn Fn(Request<Body>) -> BoxFuture<Response<Body>> + Send + Sync>;

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
        let handler: Handler = Arc::new(move |req: Request<Body>| {
            let api = api.clone();
            Box::pin(async move {
                let svc = tower::service_fn(move |req: tonic::Request<Req>| {
                    let api = api.clone();
                    async move {
                        let areq: AReq = req.into_inner().wire()?;
                        let aresp = match placement {
                            Placement::Inline => call(&api, areq),
                            Placement::Blocking => {
                                tokio::task::spawn_blocking(move || call(&api, areq))
                                    .await
                                    .map_err(|e| {
                                        Status::internal(format!("host operation failed: {e}"))
                                    })?
                            }
                        }
                        .map_err(status::from_host)?;
                        Ok::<_, Status>(tonic::Response::new(aresp.wire()?))
                    }
                });
                Grpc::new(ProstCodec::<Resp, Req>::default())
                    .unary(svc, req)
                    .await
            })
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

struct Inner {
    service: String,
    handlers: HashMap<String, Handler>,
    log_requests: bool,
}

/// One versioned gRPC service (e.g. `v1.Filesystem`), as a tower service
/// over HTTP/2 requests.
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

    fn unimplemented(&self, path: &str) -> Response<Body> {
        Status::unimplemented(format!(
            "unknown method {path}: this endpoint serves only {}",
            self.inner.service
        ))
        .into_http()
    }
}

/// The gRPC code of a response: a trailers-only response carries it in the
/// headers; a normal one will carry 0 in its trailers.
fn response_code(resp: &Response<Body>) -> Code {
    resp.headers()
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i32>().ok())
        .map(Code::from_i32)
        .unwrap_or(Code::Ok)
}

impl<B> tower::Service<Request<B>> for VersionedService
where
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let path = req.uri().path().to_string();
        let Some(handler) = self.inner.handlers.get(&path).cloned() else {
            let resp = self.unimplemented(&path);
            tracing::debug!(method = %path, "unknown method");
            return Box::pin(async move { Ok(resp) });
        };
        let log = self.inner.log_requests;
        let req = req.map(Body::new);
        Box::pin(async move {
            let start = Instant::now();
            let resp = handler(req).await;
            if log {
                let code = response_code(&resp);
                tracing::info!(
                    method = %path,
                    duration_us = start.elapsed().as_micros() as u64,
                    code = ?code,
                    "request"
                );
            }
            Ok(resp)
        })
    }
}
