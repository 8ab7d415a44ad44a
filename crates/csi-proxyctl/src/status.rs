//! `status`: for every group/version, whether its endpoint accepts a
//! connection and what `grpc.health.v1.Health/Check` says about its
//! service.

use crate::Failure;
use csi_proxy_api::health::v1::health_check_response::ServingStatus;
use csi_proxy_api::health::v1::{health_client::HealthClient, HealthCheckRequest};
use csi_proxy_api::API_VERSIONS;
use csi_proxy_client::Client;
use serde_json::{json, Value};

/// The status of every endpoint, and whether all of them are serving.
pub async fn status(client: &Client) -> Result<(Value, bool), Failure> {
    let mut rows = Vec::new();
    let (mut reachable, mut serving) = (0, 0);
    for api in API_VERSIONS {
        let address = client.endpoint(api).display().to_string();
        let (state, health) = match client.connect(api).await {
            Err(e) if e.is_not_served() => ("not served".to_string(), String::new()),
            Err(e) => (format!("unreachable: {e}"), String::new()),
            Ok(channel) => {
                reachable += 1;
                let mut h = HealthClient::new(channel);
                let health = match h
                    .check(HealthCheckRequest {
                        service: api.service(),
                    })
                    .await
                {
                    Ok(r) => {
                        let s = r.into_inner().status();
                        if s == ServingStatus::Serving {
                            serving += 1;
                        }
                        s.as_str_name().to_string()
                    }
                    Err(e) => format!("{:?}: {}", e.code(), e.message()),
                };
                ("reachable".to_string(), health)
            }
        };
        rows.push(json!({
            "group": api.group.as_str(),
            "version": api.version,
            "service": api.service(),
            "endpoint": address,
            "state": state,
            "health": health,
        }));
    }
    if reachable == 0 {
        return Err(Failure::Unreachable(format!(
            "no csi-proxy endpoint accepts connections (first: {}); is the proxy running, \
             and is --socket-dir / --pipe-prefix right?",
            client.endpoint(API_VERSIONS[0]).display()
        )));
    }
    let all = serving == API_VERSIONS.len();
    Ok((json!({ "endpoints": rows }), all))
}
