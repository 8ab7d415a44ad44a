//! The routing tables of every API group: which versioned method goes to
//! which version-free operation, and how each versioned message converts.

use crate::dispatch::{Routes, VersionedService};
use csi_proxy_api::{ApiVersion, Group};
use csi_proxy_host::Host;

mod filesystem;

/// `table!(api: Trait, version; [v1, v2] { Method(Req, Resp) => op, ... } ...)`:
/// the routes of the named version, or `None` for a version the table does
/// not list.
macro_rules! table {
    ($api:expr, $trait:path, $version:expr; $( [$($ver:ident),+ $(,)?] $methods:tt )+) => {
        match $version {
            $( $( stringify!($ver) => Some($crate::groups::table!(@one $api, $trait, $ver, $methods)), )+ )+
            _ => None,
        }
    };
    (@one $api:expr, $trait:path, $ver:ident, { $($method:ident($req:ident, $resp:ident) => $op:ident),* $(,)? }) => {
        $crate::dispatch::Routes::new($api.clone())
            $(.unary::<$ver::$req, $ver::$resp, _, _>(stringify!($method), <dyn $trait>::$op))*
    };
}
pub(crate) use table;

/// The service of one group/version over the host's APIs.
pub fn service(host: &Host, version: ApiVersion, log_requests: bool) -> VersionedService {
    let routes = match version.group {
        Group::Filesystem => filesystem::routes(&host.filesystem, version.version),
        other => unimplemented_group(other),
    };
    routes
        .unwrap_or_else(|| panic!("no routing table for {}", version.service()))
        .build(version, log_requests)
}

/// Groups whose tables are not written yet serve no method at all (every
/// call gets Unimplemented from the dispatcher).
fn unimplemented_group<A: ?Sized + Send + Sync + 'static>(_g: Group) -> Option<Routes<A>> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_version_routes_exactly_its_methods() {
        let policy = csi_proxy_host::path::PathPolicy::new(csi_proxy_host::path::Flavor::NATIVE, ["/var/lib/kubelet"]).unwrap();
        let (host, _) = Host::fake(policy);
        for v in csi_proxy_api::API_VERSIONS {
            if v.group != Group::Filesystem {
                continue;
            }
            let svc = service(&host, v, false);
            let mut want: Vec<String> = v
                .methods()
                .iter()
                .map(|m| format!("/{}/{m}", v.service()))
                .collect();
            want.sort();
            assert_eq!(svc.paths(), want, "{}", v.service());
        }
    }
}
