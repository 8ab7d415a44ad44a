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
    use crate::routes::testing::{call, service_for, Recorder};
    use csi_proxy_api::Group;
    use tonic::Code;

    const VOL: &str = r"\\?\Volume{01234567-89ab-cdef-0123-456789abcdef}\";
    const TARGET: &str = r"C:\var\lib\kubelet\pods\x\volumes\v";

    /// Records every request and answers with fixed responses.
    #[derive(Default)]
    struct TestVolume {
        rec: Recorder,
    }

    type R<T> = csi_proxy_host::Result<T>;

    impl VolumeApi for TestVolume {
        fn list_volumes_on_disk(
            &self,
            req: vol::ListVolumesOnDiskRequest,
        ) -> R<vol::ListVolumesOnDiskResponse> {
            self.rec.record(req);
            Ok(vol::ListVolumesOnDiskResponse {
                volume_ids: vec![VOL.into(), "second".into()],
            })
        }
        fn mount_volume(&self, req: vol::MountVolumeRequest) -> R<vol::MountVolumeResponse> {
            self.rec.record(req);
            Ok(vol::MountVolumeResponse {})
        }
        fn unmount_volume(&self, req: vol::UnmountVolumeRequest) -> R<vol::UnmountVolumeResponse> {
            self.rec.record(req);
            Ok(vol::UnmountVolumeResponse {})
        }
        fn is_volume_formatted(
            &self,
            req: vol::IsVolumeFormattedRequest,
        ) -> R<vol::IsVolumeFormattedResponse> {
            self.rec.record(req);
            Ok(vol::IsVolumeFormattedResponse { formatted: true })
        }
        fn format_volume(&self, req: vol::FormatVolumeRequest) -> R<vol::FormatVolumeResponse> {
            self.rec.record(req);
            Ok(vol::FormatVolumeResponse {})
        }
        fn resize_volume(&self, req: vol::ResizeVolumeRequest) -> R<vol::ResizeVolumeResponse> {
            self.rec.record(req);
            Ok(vol::ResizeVolumeResponse {})
        }
        fn get_volume_stats(
            &self,
            req: vol::GetVolumeStatsRequest,
        ) -> R<vol::GetVolumeStatsResponse> {
            self.rec.record(req);
            Ok(vol::GetVolumeStatsResponse {
                total_bytes: 1000,
                used_bytes: 250,
            })
        }
        fn get_disk_number_from_volume_id(
            &self,
            req: vol::GetDiskNumberFromVolumeIdRequest,
        ) -> R<vol::GetDiskNumberFromVolumeIdResponse> {
            self.rec.record(req);
            Ok(vol::GetDiskNumberFromVolumeIdResponse {
                disk_number: u32::MAX,
            })
        }
        fn get_volume_id_from_target_path(
            &self,
            req: vol::GetVolumeIdFromTargetPathRequest,
        ) -> R<vol::GetVolumeIdFromTargetPathResponse> {
            self.rec.record(req);
            Ok(vol::GetVolumeIdFromTargetPathResponse {
                volume_id: VOL.into(),
            })
        }
        fn get_closest_volume_id_from_target_path(
            &self,
            req: vol::GetClosestVolumeIdFromTargetPathRequest,
        ) -> R<vol::GetClosestVolumeIdFromTargetPathResponse> {
            self.rec.record(req);
            Ok(vol::GetClosestVolumeIdFromTargetPathResponse {
                volume_id: VOL.into(),
            })
        }
        fn write_volume_cache(
            &self,
            req: vol::WriteVolumeCacheRequest,
        ) -> R<vol::WriteVolumeCacheResponse> {
            self.rec.record(req);
            Ok(vol::WriteVolumeCacheResponse {})
        }
    }

    fn setup(version: &str) -> (Arc<TestVolume>, crate::dispatch::VersionedService) {
        let api = Arc::new(TestVolume::default());
        let svc = service_for(Group::Volume, version, |h| h.volume = api.clone());
        (api, svc)
    }

    #[tokio::test]
    async fn old_list_volumes_parses_the_disk_id_and_lists_all_partitions() {
        for version in ["v1alpha1", "v1beta1", "v1beta2"] {
            let (api, svc) = setup(version);
            let path = format!("/{version}.Volume/ListVolumesOnDisk");
            let resp: v1beta2::ListVolumesOnDiskResponse = call(
                &svc,
                &path,
                v1beta2::ListVolumesOnDiskRequest {
                    disk_id: "7".into(),
                },
            )
            .await
            .unwrap();
            assert_eq!(resp.volume_ids, vec![VOL.to_string(), "second".into()]);
            assert_eq!(
                api.rec.only::<vol::ListVolumesOnDiskRequest>(),
                vol::ListVolumesOnDiskRequest {
                    disk_number: 7,
                    partition_number: 0
                }
            );
            for bad in ["abc", "-1", "4294967296"] {
                let err = call::<_, v1beta2::ListVolumesOnDiskResponse>(
                    &svc,
                    &path,
                    v1beta2::ListVolumesOnDiskRequest {
                        disk_id: bad.into(),
                    },
                )
                .await
                .unwrap_err();
                assert_eq!(err.code(), Code::InvalidArgument, "{bad:?}");
            }
            assert!(api.rec.is_empty(), "the API must not be called");
        }
    }

    #[tokio::test]
    async fn new_list_volumes_passes_the_partition() {
        let (api, svc) = setup("v1");
        let _: v1::ListVolumesOnDiskResponse = call(
            &svc,
            "/v1.Volume/ListVolumesOnDisk",
            v1::ListVolumesOnDiskRequest {
                disk_number: 2,
                partition_number: 3,
            },
        )
        .await
        .unwrap();
        assert_eq!(
            api.rec.only::<vol::ListVolumesOnDiskRequest>(),
            vol::ListVolumesOnDiskRequest {
                disk_number: 2,
                partition_number: 3
            }
        );
    }

    #[tokio::test]
    async fn old_path_and_size_fields() {
        let (api, svc) = setup("v1alpha1");
        let _: v1alpha1::MountVolumeResponse = call(
            &svc,
            "/v1alpha1.Volume/MountVolume",
            v1alpha1::MountVolumeRequest {
                volume_id: VOL.into(),
                path: TARGET.into(),
            },
        )
        .await
        .unwrap();
        assert_eq!(
            api.rec.only::<vol::MountVolumeRequest>(),
            vol::MountVolumeRequest {
                volume_id: VOL.into(),
                target_path: TARGET.into()
            }
        );
        let _: v1alpha1::DismountVolumeResponse = call(
            &svc,
            "/v1alpha1.Volume/DismountVolume",
            v1alpha1::DismountVolumeRequest {
                volume_id: VOL.into(),
                path: TARGET.into(),
            },
        )
        .await
        .unwrap();
        assert_eq!(
            api.rec.only::<vol::UnmountVolumeRequest>(),
            vol::UnmountVolumeRequest {
                volume_id: VOL.into(),
                target_path: TARGET.into()
            }
        );
        let _: v1alpha1::ResizeVolumeResponse = call(
            &svc,
            "/v1alpha1.Volume/ResizeVolume",
            v1alpha1::ResizeVolumeRequest {
                volume_id: VOL.into(),
                size: 5 << 30,
            },
        )
        .await
        .unwrap();
        assert_eq!(
            api.rec.only::<vol::ResizeVolumeRequest>(),
            vol::ResizeVolumeRequest {
                volume_id: VOL.into(),
                size_bytes: 5 << 30
            }
        );
    }

    #[tokio::test]
    async fn old_stats_disk_number_and_mount_lookup() {
        for version in ["v1beta1", "v1beta2"] {
            let (api, svc) = setup(version);
            let resp: v1beta1::VolumeStatsResponse = call(
                &svc,
                &format!("/{version}.Volume/VolumeStats"),
                v1beta1::VolumeStatsRequest {
                    volume_id: VOL.into(),
                },
            )
            .await
            .unwrap();
            assert_eq!((resp.volume_size, resp.volume_used_size), (1000, 250));
            assert_eq!(
                api.rec.only::<vol::GetVolumeStatsRequest>(),
                vol::GetVolumeStatsRequest {
                    volume_id: VOL.into()
                }
            );

            let resp: v1beta1::VolumeDiskNumberResponse = call(
                &svc,
                &format!("/{version}.Volume/GetVolumeDiskNumber"),
                v1beta1::VolumeDiskNumberRequest {
                    volume_id: VOL.into(),
                },
            )
            .await
            .unwrap();
            assert_eq!(resp.disk_number, i64::from(u32::MAX));
            api.rec.only::<vol::GetDiskNumberFromVolumeIdRequest>();

            let resp: v1beta1::VolumeIdFromMountResponse = call(
                &svc,
                &format!("/{version}.Volume/GetVolumeIDFromMount"),
                v1beta1::VolumeIdFromMountRequest {
                    mount: TARGET.into(),
                },
            )
            .await
            .unwrap();
            assert_eq!(resp.volume_id, VOL);
            assert_eq!(
                api.rec.only::<vol::GetVolumeIdFromTargetPathRequest>(),
                vol::GetVolumeIdFromTargetPathRequest {
                    target_path: TARGET.into()
                }
            );
        }
    }

    #[tokio::test]
    async fn new_versions() {
        let (api, svc) = setup("v2alpha1");
        let resp: v2alpha1::GetVolumeStatsResponse = call(
            &svc,
            "/v2alpha1.Volume/GetVolumeStats",
            v2alpha1::GetVolumeStatsRequest {
                volume_id: VOL.into(),
            },
        )
        .await
        .unwrap();
        assert_eq!((resp.total_bytes, resp.used_bytes), (1000, 250));
        let resp: v2alpha1::GetDiskNumberFromVolumeIdResponse = call(
            &svc,
            "/v2alpha1.Volume/GetDiskNumberFromVolumeID",
            v2alpha1::GetDiskNumberFromVolumeIdRequest {
                volume_id: VOL.into(),
            },
        )
        .await
        .unwrap();
        assert_eq!(resp.disk_number, u32::MAX);
        let resp: v2alpha1::GetClosestVolumeIdFromTargetPathResponse = call(
            &svc,
            "/v2alpha1.Volume/GetClosestVolumeIDFromTargetPath",
            v2alpha1::GetClosestVolumeIdFromTargetPathRequest {
                target_path: TARGET.into(),
            },
        )
        .await
        .unwrap();
        assert_eq!(resp.volume_id, VOL);
        let _: v2alpha1::ResizeVolumeResponse = call(
            &svc,
            "/v2alpha1.Volume/ResizeVolume",
            v2alpha1::ResizeVolumeRequest {
                volume_id: VOL.into(),
                size_bytes: -1,
            },
        )
        .await
        .unwrap();
        assert_eq!(api.rec.take().len(), 4);
        // v1beta3 shares v1's shapes.
        let (api, svc) = setup("v1beta3");
        let _: v1beta3::UnmountVolumeResponse = call(
            &svc,
            "/v1beta3.Volume/UnmountVolume",
            v1beta3::UnmountVolumeRequest {
                volume_id: VOL.into(),
                target_path: TARGET.into(),
            },
        )
        .await
        .unwrap();
        assert_eq!(
            api.rec.only::<vol::UnmountVolumeRequest>().target_path,
            TARGET
        );
    }

    #[tokio::test]
    async fn no_backend_answers_unimplemented() {
        let svc = service_for(Group::Volume, "v1beta1", |_| {});
        let err = call::<_, v1beta1::VolumeStatsResponse>(
            &svc,
            "/v1beta1.Volume/VolumeStats",
            v1beta1::VolumeStatsRequest {
                volume_id: VOL.into(),
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
