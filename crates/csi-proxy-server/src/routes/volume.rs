//! Volume v1alpha1, v1beta1, v1beta2, v1beta3, v1, v2alpha1.

use super::routing;
use crate::dispatch::Routes;
use crate::wire::{request, response, Wire};
use csi_proxy_api::volume::{v1, v1alpha1, v1beta1, v1beta2, v1beta3, v2alpha1};
use csi_proxy_host::volume::{self as vol, VolumeApi};
use std::sync::Arc;
use tonic::Status;

crate::catalog::volume_table!(routing!());

// Requests. v1alpha1..v1beta2: `path` is the target path, `size` the size in
// bytes, `mount` the target path; ListVolumesOnDisk takes the disk number as a
// decimal string and has no partition (see below).
request!([v1beta3, v1, v2alpha1] ListVolumesOnDiskRequest => vol::ListVolumesOnDiskRequest { disk_number, partition_number });
request!([v1alpha1, v1beta1, v1beta2] MountVolumeRequest => vol::MountVolumeRequest { volume_id, target_path = path });
request!([v1beta3, v1, v2alpha1] MountVolumeRequest => vol::MountVolumeRequest { volume_id, target_path });
request!([v1alpha1, v1beta1, v1beta2] DismountVolumeRequest => vol::UnmountVolumeRequest { volume_id, target_path = path });
request!([v1beta3, v1, v2alpha1] UnmountVolumeRequest => vol::UnmountVolumeRequest { volume_id, target_path });
request!([v1alpha1, v1beta1, v1beta2, v1beta3, v1, v2alpha1] IsVolumeFormattedRequest => vol::IsVolumeFormattedRequest { volume_id });
request!([v1alpha1, v1beta1, v1beta2, v1beta3, v1, v2alpha1] FormatVolumeRequest => vol::FormatVolumeRequest { volume_id });
request!([v1alpha1, v1beta1, v1beta2] ResizeVolumeRequest => vol::ResizeVolumeRequest { volume_id, size_bytes = size });
request!([v1beta3, v1, v2alpha1] ResizeVolumeRequest => vol::ResizeVolumeRequest { volume_id, size_bytes });
request!([v1beta1, v1beta2] VolumeStatsRequest => vol::GetVolumeStatsRequest { volume_id });
request!([v1beta3, v1, v2alpha1] GetVolumeStatsRequest => vol::GetVolumeStatsRequest { volume_id });
request!([v1beta1, v1beta2] VolumeDiskNumberRequest => vol::GetDiskNumberFromVolumeIdRequest { volume_id });
request!([v1beta3, v1, v2alpha1] GetDiskNumberFromVolumeIdRequest => vol::GetDiskNumberFromVolumeIdRequest { volume_id });
request!([v1beta1, v1beta2] VolumeIdFromMountRequest => vol::GetVolumeIdFromTargetPathRequest { target_path = mount });
request!([v1beta3, v1, v2alpha1] GetVolumeIdFromTargetPathRequest => vol::GetVolumeIdFromTargetPathRequest { target_path });
request!([v2alpha1] GetClosestVolumeIdFromTargetPathRequest => vol::GetClosestVolumeIdFromTargetPathRequest { target_path });
request!([v1beta2, v1beta3, v1, v2alpha1] WriteVolumeCacheRequest => vol::WriteVolumeCacheRequest { volume_id });

/// v1alpha1..v1beta2 `ListVolumesOnDisk(disk_id)`: a decimal string, parsed
/// strictly; there is no partition field, so all partitions (0).
macro_rules! list_volumes_by_disk_id {
    ($($ver:ident),+) => {$(
        impl Wire<vol::ListVolumesOnDiskRequest> for $ver::ListVolumesOnDiskRequest {
            fn wire(self) -> Result<vol::ListVolumesOnDiskRequest, Status> {
                Ok(vol::ListVolumesOnDiskRequest {
                    disk_number: self.disk_id.wire()?,
                    partition_number: 0,
                })
            }
        }
    )+};
}
list_volumes_by_disk_id!(v1alpha1, v1beta1, v1beta2);

// Responses. GetVolumeDiskNumber of v1beta1/v1beta2 answers an int64.
response!([v1alpha1, v1beta1, v1beta2, v1beta3, v1, v2alpha1] vol::ListVolumesOnDiskResponse => ListVolumesOnDiskResponse { volume_ids } exact);
response!([v1alpha1, v1beta1, v1beta2, v1beta3, v1, v2alpha1] vol::MountVolumeResponse => MountVolumeResponse {} exact);
response!([v1alpha1, v1beta1, v1beta2] vol::UnmountVolumeResponse => DismountVolumeResponse {} exact);
response!([v1beta3, v1, v2alpha1] vol::UnmountVolumeResponse => UnmountVolumeResponse {} exact);
response!([v1alpha1, v1beta1, v1beta2, v1beta3, v1, v2alpha1] vol::IsVolumeFormattedResponse => IsVolumeFormattedResponse { formatted } exact);
response!([v1alpha1, v1beta1, v1beta2, v1beta3, v1, v2alpha1] vol::FormatVolumeResponse => FormatVolumeResponse {} exact);
response!([v1alpha1, v1beta1, v1beta2, v1beta3, v1, v2alpha1] vol::ResizeVolumeResponse => ResizeVolumeResponse {} exact);
response!([v1beta1, v1beta2] vol::GetVolumeStatsResponse => VolumeStatsResponse { volume_size = total_bytes, volume_used_size = used_bytes } exact);
response!([v1beta3, v1, v2alpha1] vol::GetVolumeStatsResponse => GetVolumeStatsResponse { total_bytes, used_bytes } exact);
response!([v1beta1, v1beta2] vol::GetDiskNumberFromVolumeIdResponse => VolumeDiskNumberResponse { disk_number } exact);
response!([v1beta3, v1, v2alpha1] vol::GetDiskNumberFromVolumeIdResponse => GetDiskNumberFromVolumeIdResponse { disk_number } exact);
response!([v1beta1, v1beta2] vol::GetVolumeIdFromTargetPathResponse => VolumeIdFromMountResponse { volume_id } exact);
response!([v1beta3, v1, v2alpha1] vol::GetVolumeIdFromTargetPathResponse => GetVolumeIdFromTargetPathResponse { volume_id } exact);
response!([v2alpha1] vol::GetClosestVolumeIdFromTargetPathResponse => GetClosestVolumeIdFromTargetPathResponse { volume_id } exact);
response!([v1beta2, v1beta3, v1, v2alpha1] vol::WriteVolumeCacheResponse => WriteVolumeCacheResponse {} exact);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes::testing::{call, service_for, FakeHost};
    use csi_proxy_api::Group;
    use csi_proxy_host::storage::StorageBackend;
    use tonic::Code;

    /// The disk of the volume: the largest number, which the old versions'
    /// int64 GetVolumeDiskNumber must carry whole.
    const DISK: u32 = u32::MAX;

    /// A host with one formatted volume on disk [`DISK`], and a directory
    /// to mount it at, served as one version.
    struct T {
        /// Dropped before the host: it holds the root open, and Windows
        /// does not remove a directory that is open.
        svc: crate::dispatch::VersionedService,
        host: FakeHost,
        version: &'static str,
        /// The volume id.
        vol: String,
        /// A target path (an existing directory below the root).
        target: String,
    }

    impl T {
        fn new(version: &'static str) -> T {
            let host = FakeHost::new();
            let fake = &host.fakes.storage;
            fake.add_disk(DISK, 16 << 30, "page83-volume-tests");
            fake.partition_disk(DISK).unwrap();
            let id = fake.disk(DISK).unwrap().partitions[0].volume.clone();
            fake.format(&id).unwrap();
            let target = host.path("pods/x/volumes/v");
            std::fs::create_dir_all(&target).unwrap();
            let svc = host.service(Group::Volume, version);
            let t = T {
                host,
                version,
                svc,
                vol: id.as_str().to_string(),
                target,
            };
            t.calls();
            t
        }

        /// Call `method` of the version.
        async fn call<Req, Resp>(&self, method: &str, req: Req) -> Result<Resp, tonic::Status>
        where
            Req: prost::Message,
            Resp: prost::Message + Default,
        {
            let path = format!("/{}.Volume/{method}", self.version);
            call(&self.svc, &path, req).await
        }

        /// The backend calls since the last look.
        fn calls(&self) -> Vec<String> {
            self.host.fakes.storage.take_calls()
        }

        /// The backend calls of an operation on the volume: its disk is
        /// looked up first, then `op` runs with `args` after the volume.
        fn on_volume(&self, op: &str, args: &str) -> Vec<String> {
            let vol = &self.vol;
            vec![
                format!("volume_disk {vol}"),
                format!("{op} {vol}{args}").trim_end().to_string(),
            ]
        }

        /// Total and used bytes of the volume, as the fake has them.
        fn stats(&self) -> (i64, i64) {
            let p = &self.host.fakes.storage.disk(DISK).unwrap().partitions[0];
            (p.size as i64, p.used as i64)
        }
    }

    #[tokio::test]
    async fn old_list_volumes_parses_the_disk_id_and_lists_all_partitions() {
        for version in ["v1alpha1", "v1beta1", "v1beta2"] {
            let t = T::new(version);
            let list = |disk_id: &str| v1beta2::ListVolumesOnDiskRequest {
                disk_id: disk_id.into(),
            };
            let resp: v1beta2::ListVolumesOnDiskResponse = t
                .call("ListVolumesOnDisk", list(&DISK.to_string()))
                .await
                .unwrap();
            assert_eq!(resp.volume_ids, vec![t.vol.clone()]);
            // Disk number parsed, no partition: all of them.
            assert_eq!(t.calls(), vec![format!("volumes_on_disk {DISK} None")]);
            for bad in ["abc", "-1", "4294967296"] {
                let err = t
                    .call::<_, v1beta2::ListVolumesOnDiskResponse>("ListVolumesOnDisk", list(bad))
                    .await
                    .unwrap_err();
                assert_eq!(err.code(), Code::InvalidArgument, "{bad:?}");
            }
            assert_eq!(
                t.calls(),
                Vec::<String>::new(),
                "the backend must not be called"
            );
        }
    }

    #[tokio::test]
    async fn new_list_volumes_passes_the_partition() {
        let t = T::new("v1");
        let list = |partition_number| v1::ListVolumesOnDiskRequest {
            disk_number: DISK,
            partition_number,
        };
        let resp: v1::ListVolumesOnDiskResponse =
            t.call("ListVolumesOnDisk", list(1)).await.unwrap();
        assert_eq!(resp.volume_ids, vec![t.vol.clone()]);
        assert_eq!(t.calls(), vec![format!("volumes_on_disk {DISK} Some(1)")]);
        // A partition the disk does not have: the backend's NotFound.
        let err = t
            .call::<_, v1::ListVolumesOnDiskResponse>("ListVolumesOnDisk", list(3))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::NotFound, "{}", err.message());
        assert_eq!(t.calls(), vec![format!("volumes_on_disk {DISK} Some(3)")]);
    }

    #[tokio::test]
    async fn old_path_and_size_fields() {
        let t = T::new("v1alpha1");
        let (volume_id, path) = (t.vol.clone(), t.target.clone());
        let _: v1alpha1::MountVolumeResponse = t
            .call(
                "MountVolume",
                v1alpha1::MountVolumeRequest {
                    volume_id: volume_id.clone(),
                    path: path.clone(),
                },
            )
            .await
            .unwrap();
        let target = format!(" {}", t.target);
        assert_eq!(t.calls(), t.on_volume("mount", &target));
        let _: v1alpha1::DismountVolumeResponse = t
            .call(
                "DismountVolume",
                v1alpha1::DismountVolumeRequest {
                    volume_id: volume_id.clone(),
                    path,
                },
            )
            .await
            .unwrap();
        assert_eq!(t.calls(), t.on_volume("unmount", &target));
        let _: v1alpha1::ResizeVolumeResponse = t
            .call(
                "ResizeVolume",
                v1alpha1::ResizeVolumeRequest {
                    volume_id,
                    size: 5 << 30,
                },
            )
            .await
            .unwrap();
        let size = format!(" Bytes({})", 5u64 << 30);
        assert_eq!(t.calls(), t.on_volume("resize", &size));
    }

    #[tokio::test]
    async fn old_stats_disk_number_and_mount_lookup() {
        for version in ["v1beta1", "v1beta2"] {
            let t = T::new(version);
            let volume_id = t.vol.clone();
            let resp: v1beta1::VolumeStatsResponse = t
                .call(
                    "VolumeStats",
                    v1beta1::VolumeStatsRequest {
                        volume_id: volume_id.clone(),
                    },
                )
                .await
                .unwrap();
            let (total, used) = t.stats();
            assert_ne!(total, used);
            assert_eq!((resp.volume_size, resp.volume_used_size), (total, used));
            assert_eq!(t.calls(), t.on_volume("volume_stats", ""));

            let resp: v1beta1::VolumeDiskNumberResponse = t
                .call(
                    "GetVolumeDiskNumber",
                    v1beta1::VolumeDiskNumberRequest {
                        volume_id: volume_id.clone(),
                    },
                )
                .await
                .unwrap();
            assert_eq!(resp.disk_number, i64::from(u32::MAX));
            assert_eq!(t.calls(), vec![format!("volume_disk {}", t.vol)]);

            let mount = v1beta1::MountVolumeRequest {
                volume_id,
                path: t.target.clone(),
            };
            let _: v1beta1::MountVolumeResponse = t.call("MountVolume", mount).await.unwrap();
            t.calls();
            let resp: v1beta1::VolumeIdFromMountResponse = t
                .call(
                    "GetVolumeIDFromMount",
                    v1beta1::VolumeIdFromMountRequest {
                        mount: t.target.clone(),
                    },
                )
                .await
                .unwrap();
            assert_eq!(resp.volume_id, t.vol);
            assert_eq!(t.calls(), vec![format!("volume_at {}", t.target)]);
        }
    }

    #[tokio::test]
    async fn new_versions() {
        let t = T::new("v2alpha1");
        let volume_id = t.vol.clone();
        let resp: v2alpha1::GetVolumeStatsResponse = t
            .call(
                "GetVolumeStats",
                v2alpha1::GetVolumeStatsRequest {
                    volume_id: volume_id.clone(),
                },
            )
            .await
            .unwrap();
        assert_eq!((resp.total_bytes, resp.used_bytes), t.stats());
        assert_eq!(t.calls(), t.on_volume("volume_stats", ""));
        let resp: v2alpha1::GetDiskNumberFromVolumeIdResponse = t
            .call(
                "GetDiskNumberFromVolumeID",
                v2alpha1::GetDiskNumberFromVolumeIdRequest {
                    volume_id: volume_id.clone(),
                },
            )
            .await
            .unwrap();
        assert_eq!(resp.disk_number, u32::MAX);
        assert_eq!(t.calls(), vec![format!("volume_disk {}", t.vol)]);
        let mount = v2alpha1::MountVolumeRequest {
            volume_id: volume_id.clone(),
            target_path: t.target.clone(),
        };
        let _: v2alpha1::MountVolumeResponse = t.call("MountVolume", mount).await.unwrap();
        assert_eq!(t.calls(), t.on_volume("mount", &format!(" {}", t.target)));
        let resp: v2alpha1::GetClosestVolumeIdFromTargetPathResponse = t
            .call(
                "GetClosestVolumeIDFromTargetPath",
                v2alpha1::GetClosestVolumeIdFromTargetPathRequest {
                    target_path: t.target.clone(),
                },
            )
            .await
            .unwrap();
        assert_eq!(resp.volume_id, t.vol);
        assert_eq!(t.calls(), vec![format!("closest_volume {}", t.target)]);
        let resize = |size_bytes| v2alpha1::ResizeVolumeRequest {
            volume_id: volume_id.clone(),
            size_bytes,
        };
        let _: v2alpha1::ResizeVolumeResponse =
            t.call("ResizeVolume", resize(6 << 30)).await.unwrap();
        let size = format!(" Bytes({})", 6u64 << 30);
        assert_eq!(t.calls(), t.on_volume("resize", &size));
        // The size travels as it is: a negative one reaches the API, which
        // refuses it before the backend.
        let err = t
            .call::<_, v2alpha1::ResizeVolumeResponse>("ResizeVolume", resize(-1))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(err.message().contains("size_bytes -1"), "{}", err.message());
        assert_eq!(t.calls(), Vec::<String>::new());
        // v1beta3 shares v1's shapes.
        let t = T::new("v1beta3");
        let unmount = v1beta3::UnmountVolumeRequest {
            volume_id: t.vol.clone(),
            target_path: t.target.clone(),
        };
        let _: v1beta3::UnmountVolumeResponse = t.call("UnmountVolume", unmount).await.unwrap();
        assert_eq!(t.calls(), t.on_volume("unmount", &format!(" {}", t.target)));
    }

    #[tokio::test]
    async fn no_backend_answers_unimplemented() {
        let svc = service_for(Group::Volume, "v1beta1", |h| {
            h.volume = Arc::new(csi_proxy_host::volume::NoVolumeBackend)
        });
        let err = call::<_, v1beta1::VolumeStatsResponse>(
            &svc,
            "/v1beta1.Volume/VolumeStats",
            v1beta1::VolumeStatsRequest {
                volume_id: r"\\?\Volume{01234567-89ab-cdef-0123-456789abcdef}\".into(),
            },
        )
        .await
        .unwrap_err();
        assert_eq!(err.code(), Code::Unimplemented);
        assert!(
            err.message().contains("volume API: GetVolumeStats"),
            "{}",
            err.message()
        );
    }
}
