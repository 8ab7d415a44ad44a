//! The calls measured: in-process, through the raw client, through tonic.

use crate::fixture::Fixture;
use csi_proxy_api::disk::{v1 as dk, v1alpha1 as dk1};
use csi_proxy_api::filesystem::v1 as fsv;
use csi_proxy_api::volume::v2alpha1 as vl;
use csi_proxy_host::disk::{self, DiskApi};
use csi_proxy_host::storage::linux::LinuxStorage;
use csi_proxy_host::storage::Storage;
use csi_proxy_host::volume::{self, VolumeApi};
use csi_proxy_http2::client::{RawClient, Shape};
use prost::Message;
use std::os::unix::net::UnixStream;
use std::path::Path;

/// Every call measured; PathExists is the baseline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Call {
    PathExists,
    ListDiskLocations,
    ListDiskIDs,
    GetDiskNumberByName,
    GetDiskStats,
    GetDiskState,
    ListVolumesOnDisk,
    GetDiskNumberFromVolumeID,
    IsVolumeFormatted,
    GetVolumeStats,
    GetVolumeIDFromTargetPath,
    GetClosestVolumeIDFromTargetPath,
}

pub const ALL: [Call; 12] = [
    Call::PathExists,
    Call::ListDiskLocations,
    Call::ListDiskIDs,
    Call::GetDiskNumberByName,
    Call::GetDiskStats,
    Call::GetDiskState,
    Call::ListVolumesOnDisk,
    Call::GetDiskNumberFromVolumeID,
    Call::IsVolumeFormatted,
    Call::GetVolumeStats,
    Call::GetVolumeIDFromTargetPath,
    Call::GetClosestVolumeIDFromTargetPath,
];

impl Call {
    pub fn name(self) -> String {
        format!("{self:?}")
    }
    /// The calls the targets are about: lists over every disk.
    pub fn is_list(self) -> bool {
        matches!(
            self,
            Call::ListDiskLocations
                | Call::ListDiskIDs
                | Call::GetDiskNumberByName
                | Call::ListVolumesOnDisk
        )
    }
}

/// One direct call.
pub fn direct(st: &Storage<LinuxStorage>, fx: &Fixture, call: Call, i: usize) {
    let k = fx.numbers.len();
    let m = fx.targets.len();
    match call {
        Call::PathExists => {}
        Call::ListDiskLocations => {
            let r = st
                .list_disk_locations(disk::ListDiskLocationsRequest {})
                .unwrap();
            assert!(r.disk_locations.len() >= k);
        }
        Call::ListDiskIDs => {
            let r = st.list_disk_ids(disk::ListDiskIdsRequest {}).unwrap();
            assert!(r.disk_ids.len() >= k);
        }
        Call::GetDiskNumberByName => {
            let r = st.get_disk_number_by_name(disk::GetDiskNumberByNameRequest {
                disk_name: "no-such-page83-id".into(),
            });
            assert!(r.is_err());
        }
        Call::GetDiskStats => {
            st.get_disk_stats(disk::GetDiskStatsRequest {
                disk_number: fx.numbers[i % k],
            })
            .unwrap();
        }
        Call::GetDiskState => {
            st.get_disk_state(disk::GetDiskStateRequest {
                disk_number: fx.numbers[i % k],
            })
            .unwrap();
        }
        Call::ListVolumesOnDisk => {
            let r = st
                .list_volumes_on_disk(volume::ListVolumesOnDiskRequest {
                    disk_number: fx.numbers[i % k],
                    partition_number: 0,
                })
                .unwrap();
            assert_eq!(r.volume_ids, [fx.vols[i % k].clone()]);
        }
        Call::GetDiskNumberFromVolumeID => {
            let r = st
                .get_disk_number_from_volume_id(volume::GetDiskNumberFromVolumeIdRequest {
                    volume_id: fx.vols[i % k].clone(),
                })
                .unwrap();
            assert_eq!(r.disk_number, fx.numbers[i % k]);
        }
        Call::IsVolumeFormatted => {
            st.is_volume_formatted(volume::IsVolumeFormattedRequest {
                volume_id: fx.vols[i % m].clone(),
            })
            .unwrap();
        }
        Call::GetVolumeStats => {
            st.get_volume_stats(volume::GetVolumeStatsRequest {
                volume_id: fx.vols[i % m].clone(),
            })
            .unwrap();
        }
        Call::GetVolumeIDFromTargetPath => {
            let r = st
                .get_volume_id_from_target_path(volume::GetVolumeIdFromTargetPathRequest {
                    target_path: fx.targets[i % m].clone(),
                })
                .unwrap();
            assert_eq!(r.volume_id, fx.vols[i % m]);
        }
        Call::GetClosestVolumeIDFromTargetPath => {
            st.get_closest_volume_id_from_target_path(
                volume::GetClosestVolumeIdFromTargetPathRequest {
                    target_path: format!("{}/pod/sub", fx.targets[i % m]),
                },
            )
            .unwrap();
        }
    }
}

pub struct Clients {
    pub fs: csi_proxy_api::filesystem::v1::filesystem_client::FilesystemClient<
        csi_proxy_client::ProxyChannel,
    >,
    pub d: dk::disk_client::DiskClient<csi_proxy_client::ProxyChannel>,
    pub d1: dk1::disk_client::DiskClient<csi_proxy_client::ProxyChannel>,
    pub v: vl::volume_client::VolumeClient<csi_proxy_client::ProxyChannel>,
    pub root: String,
}

/// One call through gRPC.
pub async fn grpc(c: &mut Clients, fx: &Fixture, call: Call, i: usize) {
    let k = fx.numbers.len();
    let m = fx.targets.len();
    match call {
        Call::PathExists => {
            let r =
                c.fs.path_exists(fsv::PathExistsRequest {
                    path: c.root.clone(),
                })
                .await
                .unwrap();
            assert!(r.into_inner().exists);
        }
        Call::ListDiskLocations => {
            let r =
                c.d.list_disk_locations(dk::ListDiskLocationsRequest {})
                    .await
                    .unwrap();
            assert!(r.into_inner().disk_locations.len() >= k);
        }
        Call::ListDiskIDs => {
            let r = c.d.list_disk_i_ds(dk::ListDiskIDsRequest {}).await.unwrap();
            assert!(r.into_inner().disk_i_ds.len() >= k);
        }
        Call::GetDiskNumberByName => {
            let r =
                c.d1.get_disk_number_by_name(dk1::GetDiskNumberByNameRequest {
                    disk_name: "no-such-page83-id".into(),
                })
                .await;
            assert_eq!(r.unwrap_err().code(), tonic::Code::NotFound);
        }
        Call::GetDiskStats => {
            c.d.get_disk_stats(dk::GetDiskStatsRequest {
                disk_number: fx.numbers[i % k],
            })
            .await
            .unwrap();
        }
        Call::GetDiskState => {
            c.d.get_disk_state(dk::GetDiskStateRequest {
                disk_number: fx.numbers[i % k],
            })
            .await
            .unwrap();
        }
        Call::ListVolumesOnDisk => {
            let r =
                c.v.list_volumes_on_disk(vl::ListVolumesOnDiskRequest {
                    disk_number: fx.numbers[i % k],
                    partition_number: 0,
                })
                .await
                .unwrap();
            assert_eq!(r.into_inner().volume_ids, [fx.vols[i % k].clone()]);
        }
        Call::GetDiskNumberFromVolumeID => {
            let r =
                c.v.get_disk_number_from_volume_id(vl::GetDiskNumberFromVolumeIdRequest {
                    volume_id: fx.vols[i % k].clone(),
                })
                .await
                .unwrap();
            assert_eq!(r.into_inner().disk_number, fx.numbers[i % k]);
        }
        Call::IsVolumeFormatted => {
            c.v.is_volume_formatted(vl::IsVolumeFormattedRequest {
                volume_id: fx.vols[i % m].clone(),
            })
            .await
            .unwrap();
        }
        Call::GetVolumeStats => {
            c.v.get_volume_stats(vl::GetVolumeStatsRequest {
                volume_id: fx.vols[i % m].clone(),
            })
            .await
            .unwrap();
        }
        Call::GetVolumeIDFromTargetPath => {
            let r =
                c.v.get_volume_id_from_target_path(vl::GetVolumeIdFromTargetPathRequest {
                    target_path: fx.targets[i % m].clone(),
                })
                .await
                .unwrap();
            assert_eq!(r.into_inner().volume_id, fx.vols[i % m]);
        }
        Call::GetClosestVolumeIDFromTargetPath => {
            c.v.get_closest_volume_id_from_target_path(
                vl::GetClosestVolumeIdFromTargetPathRequest {
                    target_path: format!("{}/pod/sub", fx.targets[i % m]),
                },
            )
            .await
            .unwrap();
        }
    }
}

/// One raw connection per endpoint.
pub struct Raw {
    pub fs: RawClient<UnixStream>,
    pub d: RawClient<UnixStream>,
    pub d1: RawClient<UnixStream>,
    pub v: RawClient<UnixStream>,
    pub root: String,
}

impl Raw {
    pub fn connect(sock: &Path, root: &str) -> Raw {
        let c = |ep: &str| {
            let s = UnixStream::connect(sock.join(format!("csi-proxy-{ep}.sock"))).unwrap();
            RawClient::new(s, Shape::default()).unwrap()
        };
        Raw {
            fs: c("filesystem-v1"),
            d: c("disk-v1"),
            d1: c("disk-v1alpha1"),
            v: c("volume-v2alpha1"),
            root: root.to_string(),
        }
    }
}

/// One call through the raw client: the status is checked, the message
/// is not decoded. Returns the answer's size.
pub fn raw(r: &mut Raw, fx: &Fixture, call: Call, i: usize) -> usize {
    let k = fx.numbers.len();
    let m = fx.targets.len();
    let disk = fx.numbers[i % k];
    let vol = fx.vols[i % k].clone();
    let mounted = fx.vols[i % m].clone();
    let target = fx.targets[i % m].clone();
    let (conn, path, msg, want) = match call {
        Call::PathExists => {
            let path = r.root.clone();
            let m = fsv::PathExistsRequest { path }.encode_to_vec();
            (&mut r.fs, "/v1.Filesystem/PathExists", m, 0)
        }
        Call::ListDiskLocations => {
            let m = dk::ListDiskLocationsRequest {}.encode_to_vec();
            (&mut r.d, "/v1.Disk/ListDiskLocations", m, 0)
        }
        Call::ListDiskIDs => {
            let m = dk::ListDiskIDsRequest {}.encode_to_vec();
            (&mut r.d, "/v1.Disk/ListDiskIDs", m, 0)
        }
        Call::GetDiskNumberByName => {
            let disk_name = "no-such-page83-id".to_string();
            let m = dk1::GetDiskNumberByNameRequest { disk_name }.encode_to_vec();
            // NotFound.
            (&mut r.d1, "/v1alpha1.Disk/GetDiskNumberByName", m, 5)
        }
        Call::GetDiskStats => {
            let m = dk::GetDiskStatsRequest { disk_number: disk }.encode_to_vec();
            (&mut r.d, "/v1.Disk/GetDiskStats", m, 0)
        }
        Call::GetDiskState => {
            let m = dk::GetDiskStateRequest { disk_number: disk }.encode_to_vec();
            (&mut r.d, "/v1.Disk/GetDiskState", m, 0)
        }
        Call::ListVolumesOnDisk => {
            let m = vl::ListVolumesOnDiskRequest {
                disk_number: disk,
                partition_number: 0,
            }
            .encode_to_vec();
            (&mut r.v, "/v2alpha1.Volume/ListVolumesOnDisk", m, 0)
        }
        Call::GetDiskNumberFromVolumeID => {
            let m = vl::GetDiskNumberFromVolumeIdRequest { volume_id: vol }.encode_to_vec();
            (&mut r.v, "/v2alpha1.Volume/GetDiskNumberFromVolumeID", m, 0)
        }
        Call::IsVolumeFormatted => {
            let m = vl::IsVolumeFormattedRequest { volume_id: mounted }.encode_to_vec();
            (&mut r.v, "/v2alpha1.Volume/IsVolumeFormatted", m, 0)
        }
        Call::GetVolumeStats => {
            let m = vl::GetVolumeStatsRequest { volume_id: mounted }.encode_to_vec();
            (&mut r.v, "/v2alpha1.Volume/GetVolumeStats", m, 0)
        }
        Call::GetVolumeIDFromTargetPath => {
            let m = vl::GetVolumeIdFromTargetPathRequest {
                target_path: target,
            }
            .encode_to_vec();
            (&mut r.v, "/v2alpha1.Volume/GetVolumeIDFromTargetPath", m, 0)
        }
        Call::GetClosestVolumeIDFromTargetPath => {
            let m = vl::GetClosestVolumeIdFromTargetPathRequest {
                target_path: format!("{target}/pod/sub"),
            }
            .encode_to_vec();
            let p = "/v2alpha1.Volume/GetClosestVolumeIDFromTargetPath";
            (&mut r.v, p, m, 0)
        }
    };
    let resp = conn.call(path, None, &msg).unwrap();
    assert_eq!(resp.grpc_status, Some(want), "{call:?}: {resp:?}");
    resp.message.map_or(0, |b| b.len())
}
