//! `grpc.health.v1.Health`, served as plain routes beside each endpoint's
//! own service ([`ROUTES`], unguarded and unmeasured): `Check` with service `""`
//! (the endpoint as a whole) or the endpoint's own service name (e.g.
//! `v1.Filesystem`) answers `SERVING`; any other name is `NotFound`, as the
//! health protocol specifies; `Watch` is `Unimplemented`. This is what
//! `grpc_health_probe` and kubelet's gRPC probes call.

use csi_proxy_api::health::v1::health_check_response::ServingStatus;
use csi_proxy_api::health::v1::{HealthCheckRequest, HealthCheckResponse};
use csi_proxy_api::health::{CHECK_PATH, WATCH_PATH};
use csi_proxy_http2::{Code, Reply};
use prost::Message;

/// An answer to a request message, given the endpoint's own service name.
type Answer = fn(&[u8], &str) -> Reply;

/// The health routes: path and answer (`crate::dispatch::Plain`).
pub(crate) const ROUTES: &[(&str, Answer)] = &[(CHECK_PATH, check), (WATCH_PATH, watch)];

fn watch(_: &[u8], _: &str) -> Reply {
    Reply::error(
        Code::Unimplemented,
        "grpc.health.v1.Health/Watch is not supported: poll Check",
    )
}

fn check(message: &[u8], own_service: &str) -> Reply {
    let req = match HealthCheckRequest::decode(message) {
        Ok(r) => r,
        Err(e) => {
            return Reply::error(
                Code::InvalidArgument,
                format!("cannot decode the health check request: {e}"),
            )
        }
    };
    if !req.service.is_empty() && req.service != own_service {
        return Reply::error(
            Code::NotFound,
            format!(
                "unknown service {:?}: this endpoint serves {own_service}",
                req.service
            ),
        );
    }
    let resp = HealthCheckResponse {
        status: ServingStatus::Serving as i32,
    };
    Reply::ok(resp.encode_to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The health answer for `path`, as the dispatcher finds it among the
    /// plain routes (`None`: not a health method).
    fn answer(path: &str, message: &[u8], own_service: &str) -> Option<Reply> {
        ROUTES
            .iter()
            .find(|(p, _)| *p == path)
            .map(|(_, f)| f(message, own_service))
    }

    fn check(service: &str) -> Reply {
        let msg = HealthCheckRequest {
            service: service.into(),
        }
        .encode_to_vec();
        answer(CHECK_PATH, &msg, "v1.Filesystem").expect("a health path")
    }

    #[test]
    fn check_watch_and_others() {
        for s in ["", "v1.Filesystem"] {
            let r = check(s);
            assert_eq!(r.code, Code::Ok, "{s:?}");
            let resp = HealthCheckResponse::decode(&r.body[..]).unwrap();
            assert_eq!(resp.status(), ServingStatus::Serving);
        }
        for s in ["v1.Disk", "v1beta1.Filesystem", "grpc.health.v1.Health"] {
            assert_eq!(check(s).code, Code::NotFound, "{s:?}");
        }
        assert_eq!(
            answer(WATCH_PATH, &[], "v1.Disk").unwrap().code,
            Code::Unimplemented
        );
        assert_eq!(
            answer(CHECK_PATH, &[0xff, 0xff], "v1.Disk").unwrap().code,
            Code::InvalidArgument
        );
        assert!(answer("/v1.Disk/Rescan", &[], "v1.Disk").is_none());
    }
}
