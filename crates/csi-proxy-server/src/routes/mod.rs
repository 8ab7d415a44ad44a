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

/// `<group>_table!(routing!())` (a table of [`crate::catalog`]): the
/// group's `routes(api, version)`, the [`Routes`] of the version with
/// their message conversions, or `None` for a version the table does not
/// list. Where each route runs and whether it is cached is the catalog's;
/// a cached route asks the API's `token` operation (see
/// [`crate::dispatch::Token`]).
macro_rules! routing {
    (() $trait:ident, inline $inline:tt; $(cached($token:ident) $cached:tt;)? $( [$($ver:ident),+ $(,)?] $methods:tt )+) => {
        pub(super) fn routes(api: &Arc<dyn $trait>, version: csi_proxy_api::ApiVersion) -> Option<Routes<dyn $trait>> {
            let catalog = $crate::catalog::routes(version)?;
            let token: Option<$crate::dispatch::Token<dyn $trait>> =
                $crate::routes::routing!(@token $trait $(, $token)?);
            match version.version {
                $( $( stringify!($ver) => Some($crate::routes::routing!(@one api, catalog, token, $trait, $ver, $methods)), )+ )+
                _ => None,
            }
        }
    };
    (@token $trait:ident) => { None };
    (@token $trait:ident, $token:ident) => { Some(<dyn $trait>::$token) };
    (@one $api:expr, $catalog:expr, $token:expr, $trait:path, $ver:ident, { $($method:ident($req:ident, $resp:ident) => $op:ident),* $(,)? }) => {
        Routes::new($api.clone())
            $(.unary::<$ver::$req, $ver::$resp, _, _>(
                $crate::catalog::route($catalog, stringify!($method)),
                <dyn $trait>::$op,
                $token,
            ))*
    };
}
pub(crate) use routing;

/// The service of one group/version over the host's APIs.
///
/// # Panics
/// If `version` is not one of [`csi_proxy_api::API_VERSIONS`].
pub fn service(host: &Host, version: ApiVersion, log_requests: bool) -> VersionedService {
    let v = version;
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
    // Beside its own methods every endpoint answers the health service.
    service
        .unwrap_or_else(|| panic!("no routing table for {}", version.service()))
        .with_plain(crate::health::ROUTES)
}

/// An allowed root in the native path flavour, for tests.
#[cfg(test)]
pub(crate) const TEST_ROOT: &str = if cfg!(windows) {
    r"C:\var\lib\kubelet"
} else {
    "/var/lib/kubelet"
};

/// Helpers for the tests of the group tables: calls through the real
/// dispatcher with gRPC-framed bodies, and a host over the recording fakes.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;
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

    /// A host over the recording fakes ([`Host::fake`]: the real API
    /// layers over them), its one allowed root a fresh directory, removed
    /// when dropped: drop the services over it first (they may hold the
    /// root open, and Windows removes no open directory).
    pub(crate) struct FakeHost {
        pub(crate) host: Host,
        pub(crate) fakes: csi_proxy_host::Fakes,
        /// The allowed root (it exists).
        pub(crate) root: String,
        _dir: tempfile::TempDir,
    }

    impl FakeHost {
        pub(crate) fn new() -> FakeHost {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path().join("kubelet");
            std::fs::create_dir(&root).unwrap();
            let root = root.to_str().unwrap().to_string();
            let policy = csi_proxy_host::path::PathPolicy::new(
                csi_proxy_host::path::Flavor::NATIVE,
                [root.as_str()],
            )
            .unwrap();
            let (host, fakes) = Host::fake(policy);
            FakeHost {
                host,
                fakes,
                root,
                _dir: dir,
            }
        }

        /// `rel` (`/`-separated) below the root, in the native flavour.
        pub(crate) fn path(&self, rel: &str) -> String {
            let sep = if cfg!(windows) { "\\" } else { "/" };
            format!("{}{sep}{}", self.root, rel.replace('/', sep))
        }

        /// The service of `group`/`version` over this host.
        pub(crate) fn service(&self, group: Group, version: &str) -> VersionedService {
            let v = csi_proxy_api::find(group, version)
                .unwrap_or_else(|| panic!("no such version {group}/{version}"));
            service(&self.host, v, false)
        }
    }

    /// The SHA-256 of a secret, as the recording fakes keep it.
    pub(crate) fn sha256(secret: &str) -> Vec<u8> {
        use sha2::Digest;
        sha2::Sha256::digest(secret.as_bytes()).to_vec()
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog;

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
            let ops = catalog::routes(v).unwrap_or_else(|| panic!("{}", v.service()));
            let mut paths: Vec<String> = ops
                .iter()
                .map(|r| format!("/{}/{}", v.service(), r.method))
                .collect();
            paths.sort();
            assert_eq!(paths, service(&host, v, false).paths(), "{}", v.service());
            for catalog::Route {
                method: m,
                operation: op,
                ..
            } in ops
            {
                let first = *by_name.entry((v.group, m)).or_insert(op);
                assert_eq!(first, *op, "{} {m}: one name, two operations", v.service());
                assert_eq!(catalog::operation_of(v.group, m), Some(*op));
            }
        }
        assert_eq!(
            catalog::operation_of(Group::Filesystem, "LinkPath"),
            Some("create_symlink")
        );
        assert_eq!(
            catalog::operation_of(Group::Volume, "DismountVolume"),
            Some("unmount_volume")
        );
        assert_eq!(catalog::operation_of(Group::Filesystem, "Nope"), None);
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
