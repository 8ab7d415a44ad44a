//! Every conformance case against the driver itself (the real binary runs
//! them too: csi-proxy's `http2_unix` and `http2_pipes` tests).

mod common;

use common::{echo_target, Server};
use csi_proxy_http2::conformance::{run_all, CASES};
use csi_proxy_http2::Options;

#[test]
fn every_conformance_case_passes() {
    let server = Server::new(Options::default());
    let failures = run_all(|| server.duplex(), &echo_target());
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        CASES.len(),
        failures
            .iter()
            .map(|(id, e)| format!("{id}: {e}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}
