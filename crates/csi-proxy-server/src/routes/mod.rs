//! The routing tables of every API group: which versioned method goes to
//! which version-free operation, and how each versioned message converts.

use crate::dispatch::VersionedService;
use csi_proxy_api::{ApiVersion, Group};
use csi_proxy_host::Host;

mod disk;
mod filesystem;
mod iscsi;
mod smb;
mod system;
mod volume;

/// `table!(api, Trait, version, inline [op, ...]; [cached(token) [op, ...];] [v1, v2] { Method(Req, Resp) => op, ... } ...)`:
/// the routes of the named version, or `None` for a version the table does
/// not list. Operations named in `inline` are cheap and read-only and run on
/// the async worker; all others run on the blocking pool. Operations named
/// in `cached` keep their last encoded answer while the API's `token`
/// operation gives the same number (see [`crate::dispatch::Token`]).
macro_rules! table {
    ($api:expr, $trait:path, $version:expr, inline $inline:tt; cached($token:ident) $cached:tt; $( [$($ver:ident),+ $(,)?] $methods:tt )+) => {
        match $version {
            $( $( stringify!($ver) => Some($crate::routes::table!(@one $api, $trait, $ver, $inline, (Some(<dyn $trait>::$token)), $cached, $methods)), )+ )+
            _ => None,
        }
    };
    ($api:expr, $trait:path, $version:expr, inline $inline:tt; $( [$($ver:ident),+ $(,)?] $methods:tt )+) => {
        match $version {
            $( $( stringify!($ver) => Some($crate::routes::table!(@one $api, $trait, $ver, $inline, (None), [], $methods)), )+ )+
            _ => None,
        }
    };
    (@ops $version:expr, inline $inline:tt; $(cached($token:ident) $cached:tt;)? $( [$($ver:ident),+ $(,)?] $methods:tt )+) => {
        match $version {
            $( $( stringify!($ver) => Some($crate::routes::table!(@oplist $methods)), )+ )+
            _ => None,
        }
    };
    (@oplist { $($method:ident($req:ident, $resp:ident) => $op:ident),* $(,)? }) => {
        &[$((stringify!($method), stringify!($op))),*]
    };
    (@one $api:expr, $trait:path, $ver:ident, [$($inline:ident),* $(,)?], ($token:expr), [$($cached:ident),* $(,)?], { $($method:ident($req:ident, $resp:ident) => $op:ident),* $(,)? }) => {{
        let inline: &[&str] = &[$(stringify!($inline)),*];
        let placement = |op: &str| {
            if inline.contains(&op) {
                $crate::dispatch::Placement::Inline
            } else {
                $crate::dispatch::Placement::Blocking
            }
        };
        let cached: &[&str] = &[$(stringify!($cached)),*];
        let token: Option<$crate::dispatch::Token<dyn $trait>> = $token;
        let memo = |op: &str| token.filter(|_| cached.contains(&op));
        $crate::dispatch::Routes::new($api.clone())
            $(.unary::<$ver::$req, $ver::$resp, _, _>(stringify!($method), stringify!($op), <dyn $trait>::$op, placement(stringify!($op)), memo(stringify!($op))))*
    }};
}
pub(crate) use table;

/// `routing!(Trait, <the rest of a table! invocation>)`: a group's
/// `routes(api, version)` (the [`table!`]) and `operations(version)`, the
/// same table as `(method, operation)` pairs without an API object (the
/// caller policy keys its rules by operation with it).
macro_rules! routing {
    ($trait:ident, $($table:tt)*) => {
        pub(super) fn routes(api: &Arc<dyn $trait>, version: &str) -> Option<Routes<dyn $trait>> {
            $crate::routes::table!(api, $trait, version, $($table)*)
        }

        pub(super) fn operations(version: &str) -> Option<&'static [(&'static str, &'static str)]> {
            $crate::routes::table!(@ops version, $($table)*)
        }
    };
}
pub(crate) use routing;

/// Every `(method, operation)` pair of `version` (`None` for a version
/// the group's table does not list): the routing table itself, read
/// without a host.
pub fn operations(version: ApiVersion) -> Option<&'static [(&'static str, &'static str)]> {
    let v = version.version;
    match version.group {
        Group::Disk => disk::operations(v),
        Group::Filesystem => filesystem::operations(v),
        Group::Iscsi => iscsi::operations(v),
        Group::Smb => smb::operations(v),
        Group::System => system::operations(v),
        Group::Volume => volume::operations(v),
    }
}

/// The operation `method` of `group` routes to in any version (`None`
/// when no version has it). Every version that has the method routes it
/// to the same operation (a test checks it).
pub fn operation_of(group: Group, method: &str) -> Option<&'static str> {
    csi_proxy_api::API_VERSIONS
        .iter()
        .filter(|v| v.group == group)
        .filter_map(|v| operations(*v))
        .flat_map(|ops| ops.iter())
        .find(|(m, _)| *m == method)
        .map(|(_, op)| *op)
}

/// The service of one group/version over the host's APIs.
///
/// # Panics
/// If `version` is not one of [`csi_proxy_api::API_VERSIONS`].
pub fn service(host: &Host, version: ApiVersion, log_requests: bool) -> VersionedService {
    let v = version.version;
    let service = match version.group {
        Group::Disk => disk::routes(&host.disk, v).map(|r| r.build(version, log_requests)),
        Group::Filesystem => {
            filesystem::routes(&host.filesystem, v).map(|r| r.build(version, log_requests))
        }
        Group::Iscsi => iscsi::routes(&host.iscsi, v).map(|r| r.build(version, log_requests)),
        Group::Smb => smb::routes(&host.smb, v).map(|r| r.build(version, log_requests)),
        Group::System => system::routes(&host.system, v).map(|r| r.build(version, log_requests)),
        Group::Volume => volume::routes(&host.volume, v).map(|r| r.build(version, log_requests)),
    };
    service.unwrap_or_else(|| panic!("no routing table for {}", version.service()))
}

/// Helpers for the tests of the group tables: calls through the real
/// dispatcher with gRPC-framed bodies, and a recorder of the version-free
/// requests a test implementation receives.
/// An allowed root in the native path flavour, for tests.
#[cfg(test)]
pub(crate) const TEST_ROOT: &str = if cfg!(windows) {
    r"C:\var\lib\kubelet"
} else {
    "/var/lib/kubelet"
};

#[cfg(test)]
pub(crate) mod testing {
    use super::*;
    use std::any::Any;
    use std::sync::Mutex;
    use tonic::{Code, Status};

    /// A host over fakes, changed by `f`, serving `group`/`version`.
    pub(crate) fn service_for(
        group: Group,
        version: &str,
        f: impl FnOnce(&mut Host),
    ) -> VersionedService {
        let v = csi_proxy_api::find(group, version)
            .unwrap_or_else(|| panic!("no such version {group}/{version}"));
        let policy = csi_proxy_host::path::PathPolicy::new(
            csi_proxy_host::path::Flavor::NATIVE,
            [TEST_ROOT],
        )
        .unwrap();
        let (mut host, _) = Host::fake(policy);
        f(&mut host);
        service(&host, v, false)
    }

    /// Call `path` on `svc` with `req` (blocking jobs run on this thread);
    /// decode the response or return the status of the call.
    pub(crate) async fn call<Req, Resp>(
        svc: &VersionedService,
        path: &str,
        req: Req,
    ) -> Result<Resp, Status>
    where
        Req: prost::Message,
        Resp: prost::Message + Default,
    {
        let reply = svc.call(path, &req.encode_to_vec()).wait();
        if reply.code != Code::Ok {
            return Err(Status::new(reply.code, reply.message));
        }
        Ok(Resp::decode(&reply.body[..]).expect("response decodes"))
    }

    /// The version-free requests a test implementation received, in order.
    #[derive(Default)]
    pub(crate) struct Recorder {
        calls: Mutex<Vec<Box<dyn Any + Send>>>,
    }

    impl Recorder {
        pub(crate) fn record<T: Any + Send>(&self, req: T) {
            self.calls.lock().unwrap().push(Box::new(req));
        }

        /// Take every recorded request.
        pub(crate) fn take(&self) -> Vec<Box<dyn Any + Send>> {
            std::mem::take(&mut *self.calls.lock().unwrap())
        }

        /// Take the one recorded request, which must be a `T`.
        pub(crate) fn only<T: Any>(&self) -> T {
            let mut calls = self.take();
            assert_eq!(calls.len(), 1, "expected exactly one call");
            *calls
                .pop()
                .unwrap()
                .downcast::<T>()
                .unwrap_or_else(|_| panic!("the call was not a {}", std::any::type_name::<T>()))
        }

        pub(crate) fn is_empty(&self) -> bool {
            self.calls.lock().unwrap().is_empty()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_host() -> Host {
        let policy = csi_proxy_host::path::PathPolicy::new(
            csi_proxy_host::path::Flavor::NATIVE,
            [TEST_ROOT],
        )
        .unwrap();
        Host::fake(policy).0
    }

    #[test]
    fn every_version_routes_exactly_its_methods() {
        let host = fake_host();
        let mut total = 0;
        for v in csi_proxy_api::API_VERSIONS {
            let svc = service(&host, v, false);
            let mut want: Vec<String> = v
                .methods()
                .iter()
                .map(|m| format!("/{}/{m}", v.service()))
                .collect();
            want.sort();
            assert!(!want.is_empty(), "{}", v.service());
            assert_eq!(svc.paths(), want, "{}", v.service());
            total += want.len();
        }
        assert_eq!(csi_proxy_api::API_VERSIONS.len(), 23);
        assert_eq!(total, 139);
    }

    #[test]
    fn operations_are_the_routing_table_and_one_per_method_name() {
        let host = fake_host();
        let mut by_name: std::collections::BTreeMap<(Group, &str), &str> = Default::default();
        for v in csi_proxy_api::API_VERSIONS {
            let ops = operations(v).unwrap_or_else(|| panic!("{}", v.service()));
            let mut paths: Vec<String> = ops
                .iter()
                .map(|(m, _)| format!("/{}/{m}", v.service()))
                .collect();
            paths.sort();
            assert_eq!(paths, service(&host, v, false).paths(), "{}", v.service());
            for (m, op) in ops {
                let first = *by_name.entry((v.group, m)).or_insert(op);
                assert_eq!(first, *op, "{} {m}: one name, two operations", v.service());
                assert_eq!(operation_of(v.group, m), Some(*op));
            }
        }
        assert_eq!(
            operation_of(Group::Filesystem, "LinkPath"),
            Some("create_symlink")
        );
        assert_eq!(
            operation_of(Group::Volume, "DismountVolume"),
            Some("unmount_volume")
        );
        assert_eq!(operation_of(Group::Filesystem, "Nope"), None);
    }

    /// The catalog (`crate::catalog`) classifies every routed operation
    /// and lists no operation that nothing routes to.
    #[test]
    fn every_routed_operation_is_in_the_catalog_and_only_those() {
        let mut routed = std::collections::BTreeSet::new();
        for v in csi_proxy_api::API_VERSIONS {
            for (m, op) in operations(v).unwrap() {
                assert!(
                    crate::catalog::effect(op).is_some(),
                    "{} {m}: {op} is not in the catalog",
                    v.service()
                );
                routed.insert(*op);
            }
        }
        let listed: std::collections::BTreeSet<&str> = crate::catalog::OPERATIONS
            .iter()
            .map(|(op, _)| *op)
            .collect();
        assert_eq!(routed, listed);
    }

    #[test]
    fn the_audit_write_level_covers_exactly_the_mutating_methods() {
        let host = fake_host();
        let mut all = std::collections::BTreeSet::new();
        for v in csi_proxy_api::API_VERSIONS {
            all.extend(service(&host, v, false).write_methods());
        }
        let want = [
            "AddTargetPortal",
            "ConnectTarget",
            "CreateSymlink",
            "DisconnectTarget",
            "DiscoverTargetPortal",
            "DismountVolume",
            "FormatVolume",
            "LinkPath",
            "Mkdir",
            "MountVolume",
            "NewSmbGlobalMapping",
            "PartitionDisk",
            "RemoveSmbGlobalMapping",
            "RemoveTargetPortal",
            "Rescan",
            "ResizeVolume",
            "Rmdir",
            "RmdirContents",
            "SetAttachState",
            "SetDiskState",
            "SetMutualChapSecret",
            "StartService",
            "StopService",
            "UnmountVolume",
            "WriteVolumeCache",
        ];
        assert_eq!(all.into_iter().collect::<Vec<_>>(), want);
    }
}
