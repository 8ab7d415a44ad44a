//! [`ProxyChannel`]: a tonic channel to one endpoint that sends the client's
//! default deadline as `grpc-timeout`.

use crate::status::{from_error, never_sent};
use csi_proxy_api::ApiVersion;
use http::header::{HeaderName, HeaderValue};
use http_body_util::{BodyExt as _, Full};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tonic::body::Body;
use tonic::transport::Channel;
use tonic::Status;
use tower::Service;

/// The gRPC deadline header.
pub(crate) const GRPC_TIMEOUT: HeaderName = HeaderName::from_static("grpc-timeout");

/// A connection to one csi-proxy endpoint, usable with the generated
/// clients (`FilesystemClient::new(channel)`) and `tonic::client::Grpc`.
///
/// Cheap to clone; clones share the connection (tonic multiplexes calls
/// over it and reconnects when it breaks). When the client was built with
/// [`Builder::timeout`](crate::Builder::timeout), every request that does
/// not carry a deadline yet gets that one as its `grpc-timeout` header: the
/// server then abandons the call at the deadline and answers
/// `DEADLINE_EXCEEDED`, and tonic gives up on the client side at the same
/// time (`Cancelled`, "Timeout expired"), whichever comes first. A deadline
/// set on a single request with `tonic::Request::set_timeout` wins.
///
/// Its errors are `tonic::Status` values, and a call the connection lost
/// (broken pipe, reset, EOF or GOAWAY before the whole answer) fails
/// `Unavailable`, the code drivers retry, where tonic's channel says
/// `Unknown` ("transport error"). A call the server never received (still
/// queued when its connection closed, or refused with `REFUSED_STREAM`, as a
/// restarting proxy does) is sent once more on a new connection first.
#[derive(Clone, Debug)]
pub struct ProxyChannel {
    channel: Channel,
    api: ApiVersion,
    endpoint: PathBuf,
    timeout: Option<(Duration, HeaderValue)>,
}

impl ProxyChannel {
    pub(crate) fn new(
        channel: Channel,
        api: ApiVersion,
        endpoint: PathBuf,
        timeout: Option<Duration>,
    ) -> ProxyChannel {
        let timeout = timeout.map(|d| {
            let v = HeaderValue::from_str(&grpc_timeout_value(d))
                .expect("a grpc-timeout value is ASCII digits and a unit");
            (d, v)
        });
        ProxyChannel {
            channel,
            api,
            endpoint,
            timeout,
        }
    }

    /// The group/version this channel is connected to.
    #[must_use]
    pub fn api(&self) -> ApiVersion {
        self.api
    }

    /// The socket path (Unix) or pipe name (Windows) it is connected to.
    #[must_use]
    pub fn endpoint(&self) -> &Path {
        &self.endpoint
    }

    /// The default deadline of calls on this channel, if any.
    #[must_use]
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout.as_ref().map(|t| t.0)
    }

    /// The underlying tonic channel, which does not add deadlines.
    #[must_use]
    pub fn channel(&self) -> &Channel {
        &self.channel
    }

    /// The underlying tonic channel, which does not add deadlines.
    #[must_use]
    pub fn into_channel(self) -> Channel {
        self.channel
    }
}

/// The answer of a call on a [`ProxyChannel`].
pub type ResponseFuture =
    Pin<Box<dyn Future<Output = Result<http::Response<Body>, Status>> + Send + 'static>>;

impl Service<http::Request<Body>> for ProxyChannel {
    type Response = http::Response<Body>;
    type Error = Status;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Service::<http::Request<Body>>::poll_ready(&mut self.channel, cx).map_err(from_error)
    }

    fn call(&mut self, mut request: http::Request<Body>) -> Self::Future {
        if let Some((_, value)) = &self.timeout {
            if !request.headers().contains_key(GRPC_TIMEOUT) {
                request.headers_mut().insert(GRPC_TIMEOUT, value.clone());
            }
        }
        // The handle poll_ready made ready goes with the call; a clone
        // takes its place for the next one.
        let fresh = self.channel.clone();
        let mut channel = std::mem::replace(&mut self.channel, fresh);
        Box::pin(async move {
            // A unary request is one small message: kept, so a call the
            // transport never sent can go again.
            let (parts, body) = request.into_parts();
            let bytes = body.collect().await.map_err(from_error)?.to_bytes();
            let build = |bytes: bytes::Bytes| {
                http::Request::from_parts(parts.clone(), Body::new(Full::new(bytes)))
            };
            let response = match channel.call(build(bytes.clone())).await {
                // Sent nowhere (the connection closed with the request
                // still queued, or the server refused the stream before
                // reading it, as one does at a GOAWAY when it restarts):
                // once more, on a new connection, as grpc-go does.
                Err(e) if never_sent(&e) => {
                    let ready = tower::ServiceExt::ready(&mut channel)
                        .await
                        .map_err(from_error)?;
                    ready.call(build(bytes)).await
                }
                other => other,
            };
            let response = response.map_err(from_error)?;
            // The connection can also break while the answer's body or
            // trailers are on the way.
            Ok(response.map(|body| Body::new(body.map_err(from_error))))
        })
    }
}

/// A `grpc-timeout` header value: at most 8 digits and a unit (`n`, `u`,
/// `m`, `S`, `M`, `H`), the finest unit that fits, rounded up so the
/// deadline is never earlier than asked. Durations beyond 99999999 hours
/// are capped there.
#[must_use]
pub fn grpc_timeout_value(d: Duration) -> String {
    const MAX: u128 = 99_999_999;
    const UNITS: [(char, u128); 6] = [
        ('n', 1),
        ('u', 1_000),
        ('m', 1_000_000),
        ('S', 1_000_000_000),
        ('M', 60_000_000_000),
        ('H', 3_600_000_000_000),
    ];
    let nanos = d.as_nanos();
    for (unit, per) in UNITS {
        let n = nanos.div_ceil(per);
        if n <= MAX {
            return format!("{n}{unit}");
        }
    }
    format!("{MAX}H")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_values() {
        let cases = [
            (Duration::ZERO, "0n"),
            (Duration::from_nanos(1), "1n"),
            (Duration::from_nanos(99_999_999), "99999999n"),
            (Duration::from_millis(100), "100000u"),
            (Duration::from_nanos(100_000_001), "100001u"),
            (Duration::from_secs(1), "1000000u"),
            (Duration::from_secs(5), "5000000u"),
            (Duration::from_secs(100), "100000m"),
            (Duration::from_millis(99_999_999), "99999999m"),
            (Duration::from_secs(100_000), "100000S"),
            (Duration::from_secs(99_999_999), "99999999S"),
            (Duration::from_secs(100_000_000), "1666667M"),
            (Duration::from_secs(6_000_000_000), "1666667H"),
            (Duration::MAX, "99999999H"),
        ];
        for (d, want) in cases {
            assert_eq!(grpc_timeout_value(d), want, "{d:?}");
        }
        // Never shorter than asked, never more than 8 digits.
        for ms in [1u64, 7, 999, 1_001, 86_400_000, 1 << 40] {
            let d = Duration::from_millis(ms) + Duration::from_nanos(1);
            let v = grpc_timeout_value(d);
            let (digits, unit) = v.split_at(v.len() - 1);
            assert!(digits.len() <= 8, "{v}");
            let per: u128 = match unit {
                "n" => 1,
                "u" => 1_000,
                "m" => 1_000_000,
                "S" => 1_000_000_000,
                "M" => 60_000_000_000,
                "H" => 3_600_000_000_000,
                _ => unreachable!(),
            };
            let back = digits.parse::<u128>().unwrap() * per;
            assert!(
                back >= d.as_nanos() && back - d.as_nanos() < per,
                "{d:?} -> {v}"
            );
        }
    }
}
