//! Fuzz the audit log's rendering of requests
//! (`csi_proxy_server::audit::fields`) against prost, the decoder that
//! runs the calls: the first two input bytes pick a group/version and a
//! method, the rest is the request message.
//!
//! The audit line renders the request as the route's generated code
//! (prost) decoded it, encoded again (`VersionedService::canonical`).
//! Checks: whatever prost decodes is rendered (never `null`: a call that
//! ran is never logged without its request), as one JSON object; what
//! prost refuses (nothing ran) is `null`; prost's canonical form is a
//! fixed point (decoding it again gives the same bytes, so the line shows
//! the value the handler used).
#![no_main]

use csi_proxy_api::API_VERSIONS;
use csi_proxy_server::audit::fields::Schemas;
use csi_proxy_server::dispatch::VersionedService;
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

fn services() -> &'static Vec<VersionedService> {
    static S: OnceLock<Vec<VersionedService>> = OnceLock::new();
    S.get_or_init(|| {
        let policy = csi_proxy_host::path::PathPolicy::new(
            csi_proxy_host::path::Flavor::NATIVE,
            ["/var/lib/kubelet"],
        )
        .unwrap();
        let (host, _) = csi_proxy_host::Host::fake(policy);
        API_VERSIONS
            .iter()
            .map(|v| csi_proxy_server::service(&host, *v, false))
            .collect()
    })
}

fuzz_target!(|data: &[u8]| {
    let [v, m, message @ ..] = data else { return };
    let i = usize::from(*v) % API_VERSIONS.len();
    let api = API_VERSIONS[i];
    let methods = api.methods();
    let method = methods[usize::from(*m) % methods.len()];
    let path = format!("/{}/{method}", api.service());
    let seen = services()[i]
        .canonical(&path, message)
        .expect("every method is routed");
    let mut out = String::new();
    Schemas::default().request(&mut out, api, method, seen.as_deref());
    match &seen {
        None => assert_eq!(out, "null"),
        Some(c) => {
            assert!(
                out.starts_with('{') && out.ends_with('}'),
                "{path}: prost decoded {message:?} but the audit renders {out}"
            );
            let again = services()[i].canonical(&path, c).unwrap();
            assert_eq!(again.as_deref(), Some(&c[..]), "{path}");
        }
    }
});
