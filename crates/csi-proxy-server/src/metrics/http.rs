//! The `/metrics` HTTP endpoint (`-metrics-bind-address`), served with
//! hyper's HTTP/1 server: `GET` or `HEAD /metrics` answers the scrape in
//! the format the scraper asks for ([`Format::negotiate`]); any other path
//! is 404 and any other method 405.

use super::{Format, Metrics};
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::io;
use std::net::{SocketAddr, TcpListener as StdListener, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// At most this many scrape connections at once; more wait to be accepted.
const MAX_CONNECTIONS: usize = 32;
/// A client must send its request headers within this time.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// The bound metrics listener.
pub struct MetricsListener {
    listener: StdListener,
    addr: SocketAddr,
}

/// Bind `address` (`host:port`; `:port` means every IPv4 interface, as
/// Go's listener does for the empty host). Call before reporting ready: a
/// failure must stop start-up.
pub fn bind(address: &str) -> io::Result<MetricsListener> {
    let address = match address.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => address.to_string(),
    };
    let candidates: Vec<SocketAddr> = address.to_socket_addrs()?.collect();
    let listener = StdListener::bind(&candidates[..])?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    Ok(MetricsListener { listener, addr })
}

impl MetricsListener {
    /// The address actually bound (with the port chosen for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serve scrapes until `shutdown` is cancelled. Must run inside a tokio
    /// runtime.
    pub async fn serve(self, metrics: Arc<Metrics>, shutdown: CancellationToken) -> io::Result<()> {
        let listener = TcpListener::from_std(self.listener)?;
        let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        loop {
            let permit = tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                p = slots.clone().acquire_owned() => p.expect("the semaphore is never closed"),
            };
            let stream = tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        tracing::warn!(error = %e, "metrics: accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            let metrics = metrics.clone();
            let token = shutdown.clone();
            tokio::spawn(async move {
                let _permit = permit;
                let service = hyper::service::service_fn(move |req| {
                    let metrics = metrics.clone();
                    // Encoding reads /proc (process metrics): on the
                    // blocking pool, never on an async worker.
                    let (uri, method) = (req.uri().clone(), req.method().clone());
                    let accept = req.headers().get(hyper::header::ACCEPT).cloned();
                    async move {
                        let r = tokio::task::spawn_blocking(move || {
                            answer(&metrics, uri.path(), &method, accept.as_ref())
                        })
                        .await
                        .unwrap_or_else(|_| {
                            let mut r = Response::new(Full::new(Bytes::new()));
                            *r.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
                            r
                        });
                        Ok::<_, std::convert::Infallible>(r)
                    }
                });
                let conn = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(HEADER_TIMEOUT)
                    .keep_alive(true)
                    .serve_connection(TokioIo::new(stream), service);
                tokio::pin!(conn);
                tokio::select! {
                    r = conn.as_mut() => {
                        if let Err(e) = r {
                            tracing::debug!(error = %e, "metrics: connection ended with an error");
                        }
                    }
                    _ = token.cancelled() => conn.as_mut().graceful_shutdown(),
                }
            });
        }
    }
}

fn answer(
    metrics: &Metrics,
    path: &str,
    method: &Method,
    accept: Option<&hyper::header::HeaderValue>,
) -> Response<Full<Bytes>> {
    let plain = |status: StatusCode, text: &'static str| {
        let mut r = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
        *r.status_mut() = status;
        r.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        r
    };
    if path != "/metrics" {
        return plain(
            StatusCode::NOT_FOUND,
            "not found: metrics are at /metrics\n",
        );
    }
    if method != Method::GET && method != Method::HEAD {
        let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "use GET\n");
        r.headers_mut().insert(
            hyper::header::ALLOW,
            hyper::header::HeaderValue::from_static("GET, HEAD"),
        );
        return r;
    }
    let format = Format::negotiate(accept.and_then(|v| v.to_str().ok()));
    let body = if method == Method::HEAD {
        Bytes::new()
    } else {
        Bytes::from(metrics.encode(format))
    };
    let mut r = Response::new(Full::new(body));
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(format.content_type()),
    );
    r
}
