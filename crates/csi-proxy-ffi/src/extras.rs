//! The operations of library mode beyond the proto methods: the finer
//! steps of upstream's library host API, served through the same dispatch
//! as the proto methods (`csi_proxy_server::dispatch::Routes`), under the
//! bare group name (`csi_proxy_call(host, "disk", "IsDiskInitialized", ...)`).
//!
//! Their messages are defined here (proto3; field numbers are the wire
//! contract, see `docs/library-mode.md`):
//!
//! | group | method | request | response |
//! |---|---|---|---|
//! | disk | IsDiskInitialized | [`DiskNumberRequest`] | [`BoolResponse`] |
//! | disk | InitializeDisk | [`DiskNumberRequest`] | [`EmptyResponse`] |
//! | disk | BasicPartitionsExist | [`DiskNumberRequest`] | [`BoolResponse`] |
//! | disk | CreateBasicPartition | [`DiskNumberRequest`] | [`EmptyResponse`] |
//! | smb | IsSMBMapped | [`RemotePathRequest`] | [`BoolResponse`] |
//! | smb | NewSMBLink | [`NewSmbLinkRequest`] | [`EmptyResponse`] |
//! | filesystem | PathValid | [`PathRequest`] | [`BoolResponse`] |

use csi_proxy_api::{newest, Group};
use csi_proxy_host::disk::{self, DiskApi};
use csi_proxy_host::filesystem::{self as fs, FilesystemApi};
use csi_proxy_host::smb::{self, SmbApi};
use csi_proxy_host::Host;
use csi_proxy_server::catalog::{library_routes, route};
use csi_proxy_server::dispatch::{Reply, Routes, VersionedService};
use csi_proxy_server::wire::Wire;
use std::collections::HashMap;
use tonic::Status;

/// `uint32 disk_number = 1;`
#[derive(Clone, PartialEq, prost::Message)]
pub struct DiskNumberRequest {
    #[prost(uint32, tag = "1")]
    pub disk_number: u32,
}

/// `string remote_path = 1;`
#[derive(Clone, PartialEq, prost::Message)]
pub struct RemotePathRequest {
    #[prost(string, tag = "1")]
    pub remote_path: String,
}

/// `string remote_path = 1; string local_path = 2;`
#[derive(Clone, PartialEq, prost::Message)]
pub struct NewSmbLinkRequest {
    #[prost(string, tag = "1")]
    pub remote_path: String,
    #[prost(string, tag = "2")]
    pub local_path: String,
}

/// `string path = 1;`
#[derive(Clone, PartialEq, prost::Message)]
pub struct PathRequest {
    #[prost(string, tag = "1")]
    pub path: String,
}

/// `bool value = 1;`
#[derive(Clone, PartialEq, prost::Message)]
pub struct BoolResponse {
    #[prost(bool, tag = "1")]
    pub value: bool,
}

/// No fields.
#[derive(Clone, PartialEq, prost::Message)]
pub struct EmptyResponse {}

/// `impl Wire<Api> for Msg` by moving the named fields across.
macro_rules! convert {
    ($from:ty => $to:path { $($field:ident $(= $src:ident)?),* }) => {
        impl Wire<$to> for $from {
            fn wire(self) -> Result<$to, Status> {
                Ok(convert!(@build $to, self, { $($field $(= $src)?),* }))
            }
        }
    };
    (@build $to:path, $s:ident, { $($field:ident $(= $src:ident)?),* }) => {{
        type T = $to;
        T { $($field: convert!(@pick $s, $field $(, $src)?)),* }
    }};
    (@pick $s:ident, $field:ident) => { $s.$field };
    (@pick $s:ident, $field:ident, $src:ident) => { $s.$src };
}

convert!(DiskNumberRequest => disk::IsDiskInitializedRequest { disk_number });
convert!(DiskNumberRequest => disk::InitializeDiskRequest { disk_number });
convert!(DiskNumberRequest => disk::BasicPartitionsExistRequest { disk_number });
convert!(DiskNumberRequest => disk::CreateBasicPartitionRequest { disk_number });
convert!(RemotePathRequest => smb::IsSmbMappedRequest { remote_path });
convert!(NewSmbLinkRequest => smb::NewSmbLinkRequest { remote_path, local_path });
convert!(PathRequest => fs::PathValidRequest { path });
convert!(disk::IsDiskInitializedResponse => BoolResponse { value = initialized });
convert!(disk::BasicPartitionsExistResponse => BoolResponse { value = exist });
convert!(smb::IsSmbMappedResponse => BoolResponse { value = mapped });
convert!(fs::PathValidResponse => BoolResponse { value = valid });
convert!(disk::InitializeDiskResponse => EmptyResponse {});
convert!(disk::CreateBasicPartitionResponse => EmptyResponse {});
convert!(smb::NewSmbLinkResponse => EmptyResponse {});

/// The extra operations of every group that has some: a service per group
/// (named as the group's newest version); the methods are the catalog's
/// (`csi_proxy_server::catalog::library_routes`).
pub struct Extras {
    groups: HashMap<Group, VersionedService>,
}

impl Extras {
    pub fn new(host: &Host) -> Extras {
        let (d, s, f) = (
            library_routes(Group::Disk),
            library_routes(Group::Smb),
            library_routes(Group::Filesystem),
        );
        let disk = Routes::new(host.disk.clone())
            .unary::<DiskNumberRequest, BoolResponse, _, _>(
                route(d, "IsDiskInitialized"),
                <dyn DiskApi>::is_disk_initialized,
                None,
            )
            .unary::<DiskNumberRequest, EmptyResponse, _, _>(
                route(d, "InitializeDisk"),
                <dyn DiskApi>::initialize_disk,
                None,
            )
            .unary::<DiskNumberRequest, BoolResponse, _, _>(
                route(d, "BasicPartitionsExist"),
                <dyn DiskApi>::basic_partitions_exist,
                None,
            )
            .unary::<DiskNumberRequest, EmptyResponse, _, _>(
                route(d, "CreateBasicPartition"),
                <dyn DiskApi>::create_basic_partition,
                None,
            )
            .build(newest(Group::Disk), false);
        let smb = Routes::new(host.smb.clone())
            .unary::<RemotePathRequest, BoolResponse, _, _>(
                route(s, "IsSMBMapped"),
                <dyn SmbApi>::is_smb_mapped,
                None,
            )
            .unary::<NewSmbLinkRequest, EmptyResponse, _, _>(
                route(s, "NewSMBLink"),
                <dyn SmbApi>::new_smb_link,
                None,
            )
            .build(newest(Group::Smb), false);
        let filesystem = Routes::new(host.filesystem.clone())
            .unary::<PathRequest, BoolResponse, _, _>(
                route(f, "PathValid"),
                <dyn FilesystemApi>::path_valid,
                None,
            )
            .build(newest(Group::Filesystem), false);
        let groups = HashMap::from([
            (Group::Disk, disk),
            (Group::Smb, smb),
            (Group::Filesystem, filesystem),
        ]);
        Extras { groups }
    }

    /// The reply of extra operation `method` of `group`; `None` when the
    /// group has no such operation.
    pub fn call(&self, group: Group, method: &str, request: &[u8]) -> Option<Reply> {
        let service = self.groups.get(&group)?;
        if !library_routes(group).iter().any(|r| r.method == method) {
            return None;
        }
        let path = format!("/{}/{method}", service.name());
        Some(service.call(&path, request).wait())
    }
}
