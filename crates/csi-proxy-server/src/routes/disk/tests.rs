use super::*;
use crate::routes::testing::{call, service_for, Recorder};
use csi_proxy_api::Group;
use tonic::Code;

/// Records every request and answers with fixed responses.
#[derive(Default)]
struct TestDisk {
    rec: Recorder,
    /// What `inventory_generation` answers (Err: an error).
    generation: std::sync::Mutex<Option<Result<u64, ()>>>,
    /// How often `inventory_generation` was asked.
    asked: std::sync::atomic::AtomicUsize,
    /// GetDiskStats answers "would block" in inline attempts.
    block_inline: std::sync::atomic::AtomicBool,
    /// Inline attempts seen by GetDiskStats.
    inline_attempts: std::sync::atomic::AtomicUsize,
}

impl DiskApi for TestDisk {
    fn list_disk_locations(
        &self,
        req: disk::ListDiskLocationsRequest,
    ) -> csi_proxy_host::Result<disk::ListDiskLocationsResponse> {
        self.rec.record(req);
        Ok(disk::ListDiskLocationsResponse {
            disk_locations: HashMap::from([(
                7,
                disk::DiskLocation {
                    adapter: "a".into(),
                    bus: "b".into(),
                    target: "t".into(),
                    lun_id: "l".into(),
                },
            )]),
        })
    }
    fn partition_disk(
        &self,
        req: disk::PartitionDiskRequest,
    ) -> csi_proxy_host::Result<disk::PartitionDiskResponse> {
        self.rec.record(req);
        Ok(disk::PartitionDiskResponse {})
    }
    fn is_disk_initialized(
        &self,
        req: disk::IsDiskInitializedRequest,
    ) -> csi_proxy_host::Result<disk::IsDiskInitializedResponse> {
        self.rec.record(req);
        Ok(disk::IsDiskInitializedResponse { initialized: true })
    }
    fn initialize_disk(
        &self,
        req: disk::InitializeDiskRequest,
    ) -> csi_proxy_host::Result<disk::InitializeDiskResponse> {
        self.rec.record(req);
        Ok(disk::InitializeDiskResponse {})
    }
    fn basic_partitions_exist(
        &self,
        req: disk::BasicPartitionsExistRequest,
    ) -> csi_proxy_host::Result<disk::BasicPartitionsExistResponse> {
        self.rec.record(req);
        Ok(disk::BasicPartitionsExistResponse { exist: true })
    }
    fn create_basic_partition(
        &self,
        req: disk::CreateBasicPartitionRequest,
    ) -> csi_proxy_host::Result<disk::CreateBasicPartitionResponse> {
        self.rec.record(req);
        Ok(disk::CreateBasicPartitionResponse {})
    }
    fn rescan(&self, req: disk::RescanRequest) -> csi_proxy_host::Result<disk::RescanResponse> {
        self.rec.record(req);
        Ok(disk::RescanResponse {})
    }
    fn list_disk_ids(
        &self,
        req: disk::ListDiskIdsRequest,
    ) -> csi_proxy_host::Result<disk::ListDiskIdsResponse> {
        self.rec.record(req);
        Ok(disk::ListDiskIdsResponse {
            disk_ids: HashMap::from([(
                3,
                disk::DiskIds {
                    page83: "p83".into(),
                    serial_number: "sn".into(),
                },
            )]),
        })
    }
    fn get_disk_stats(
        &self,
        req: disk::GetDiskStatsRequest,
    ) -> csi_proxy_host::Result<disk::GetDiskStatsResponse> {
        use std::sync::atomic::Ordering::SeqCst;
        if csi_proxy_host::inline::active() {
            self.inline_attempts.fetch_add(1, SeqCst);
            if self.block_inline.load(SeqCst) {
                return Err(csi_proxy_host::inline::would_block("test"));
            }
        }
        self.rec.record(req);
        Ok(disk::GetDiskStatsResponse {
            total_bytes: 1 << 40,
        })
    }
    fn set_disk_state(
        &self,
        req: disk::SetDiskStateRequest,
    ) -> csi_proxy_host::Result<disk::SetDiskStateResponse> {
        self.rec.record(req);
        Ok(disk::SetDiskStateResponse {})
    }
    fn get_disk_state(
        &self,
        req: disk::GetDiskStateRequest,
    ) -> csi_proxy_host::Result<disk::GetDiskStateResponse> {
        self.rec.record(req);
        Ok(disk::GetDiskStateResponse { is_online: true })
    }
    fn get_disk_number_by_name(
        &self,
        req: disk::GetDiskNumberByNameRequest,
    ) -> csi_proxy_host::Result<disk::GetDiskNumberByNameResponse> {
        self.rec.record(req);
        Ok(disk::GetDiskNumberByNameResponse { disk_number: 42 })
    }
    fn inventory_generation(&self) -> csi_proxy_host::Result<Option<u64>> {
        self.asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        match *self.generation.lock().unwrap() {
            None => Ok(None),
            Some(Ok(g)) => Ok(Some(g)),
            Some(Err(())) => Err(csi_proxy_host::Error::Internal("scripted".into())),
        }
    }
}

/// Inline operations are tried on the calling thread; one that would
/// block runs again as a blocking job, and only a real answer (never
/// "would block") reaches the client.
#[tokio::test]
async fn inline_attempts_fall_back_to_the_blocking_pool() {
    use crate::dispatch::Outcome;
    use prost::Message;
    use std::sync::atomic::Ordering::SeqCst;
    let (api, svc) = setup("v1");
    let req = v1::GetDiskStatsRequest { disk_number: 3 }.encode_to_vec();
    match svc.call("/v1.Disk/GetDiskStats", &req) {
        Outcome::Done(r) => assert_eq!(r.code, Code::Ok),
        Outcome::Blocking(_) => panic!("answered inline"),
    }
    assert_eq!(api.inline_attempts.load(SeqCst), 1);
    assert_eq!(api.rec.take().len(), 1);
    api.block_inline.store(true, SeqCst);
    let job = match svc.call("/v1.Disk/GetDiskStats", &req) {
        Outcome::Blocking(job) => job,
        Outcome::Done(r) => panic!("no fallback: {r:?}"),
    };
    assert_eq!(api.inline_attempts.load(SeqCst), 2);
    assert!(!csi_proxy_host::inline::active());
    let reply = job();
    assert_eq!(reply.code, Code::Ok, "{reply:?}");
    let resp = v1::GetDiskStatsResponse::decode(&reply.body[..]).unwrap();
    assert_eq!(resp.total_bytes, 1 << 40);
    assert_eq!(api.inline_attempts.load(SeqCst), 2, "the job is not inline");
    assert_eq!(
        api.rec.only::<disk::GetDiskStatsRequest>(),
        disk::GetDiskStatsRequest { disk_number: 3 }
    );
    // Mutating operations never run inline.
    let req = v1::PartitionDiskRequest { disk_number: 3 }.encode_to_vec();
    assert!(matches!(
        svc.call("/v1.Disk/PartitionDisk", &req),
        Outcome::Blocking(_)
    ));
}

/// ListDiskLocations and ListDiskIDs send their last encoded answer
/// again while the inventory generation stays the same; every other
/// call, a new generation, no generation, or a failure to get one,
/// asks the API.
#[tokio::test]
async fn list_answers_are_reused_within_one_inventory_generation() {
    let (api, svc) = setup("v1");
    let ids = |svc: &crate::dispatch::VersionedService| {
        let svc = svc.clone();
        async move {
            call::<_, v1::ListDiskIDsResponse>(
                &svc,
                "/v1.Disk/ListDiskIDs",
                v1::ListDiskIDsRequest {},
            )
            .await
        }
    };
    let calls = |api: &TestDisk| api.rec.take().len();
    // No generation: every call asks the API.
    for _ in 0..3 {
        assert_eq!(ids(&svc).await.unwrap().disk_i_ds.len(), 1);
    }
    assert_eq!(calls(&api), 3);
    *api.generation.lock().unwrap() = Some(Ok(5));
    let first = ids(&svc).await.unwrap();
    for _ in 0..4 {
        assert_eq!(ids(&svc).await.unwrap(), first);
    }
    assert_eq!(calls(&api), 1, "one answer for generation 5");
    // Locations have their own answer.
    for _ in 0..2 {
        let _: v1::ListDiskLocationsResponse = call(
            &svc,
            "/v1.Disk/ListDiskLocations",
            v1::ListDiskLocationsRequest {},
        )
        .await
        .unwrap();
    }
    assert_eq!(calls(&api), 1);
    *api.generation.lock().unwrap() = Some(Ok(6));
    ids(&svc).await.unwrap();
    ids(&svc).await.unwrap();
    assert_eq!(calls(&api), 1, "one answer for generation 6");
    // A failing generation fails the call without asking the API.
    *api.generation.lock().unwrap() = Some(Err(()));
    assert_eq!(ids(&svc).await.unwrap_err().code(), Code::Internal);
    assert_eq!(calls(&api), 0);
    // Calls that are not cached never ask for the generation.
    let asked = api.asked.load(std::sync::atomic::Ordering::SeqCst);
    let _: v1::GetDiskStatsResponse = call(
        &svc,
        "/v1.Disk/GetDiskStats",
        v1::GetDiskStatsRequest { disk_number: 1 },
    )
    .await
    .unwrap();
    assert_eq!(api.asked.load(std::sync::atomic::Ordering::SeqCst), asked);
}

fn setup(version: &str) -> (Arc<TestDisk>, crate::dispatch::VersionedService) {
    let api = Arc::new(TestDisk::default());
    let svc = service_for(Group::Disk, version, |h| h.disk = api.clone());
    (api, svc)
}

#[tokio::test]
async fn old_string_disk_ids_parse_to_numbers() {
    for version in ["v1alpha1", "v1beta1", "v1beta2"] {
        let (api, svc) = setup(version);
        let path = format!("/{version}.Disk/PartitionDisk");
        // The three versions share the message shape; encode v1beta2's.
        let _: v1beta2::PartitionDiskResponse = call(
            &svc,
            &path,
            v1beta2::PartitionDiskRequest {
                disk_id: "7".into(),
            },
        )
        .await
        .unwrap();
        assert_eq!(
            api.rec.only::<disk::PartitionDiskRequest>(),
            disk::PartitionDiskRequest { disk_number: 7 }
        );
    }
}

#[tokio::test]
async fn bad_string_disk_ids_are_rejected_before_the_api() {
    let (api, svc) = setup("v1beta2");
    for bad in ["abc", "-1", "4294967296", "", " 7", "7 "] {
        let err = call::<_, v1beta2::PartitionDiskResponse>(
            &svc,
            "/v1beta2.Disk/PartitionDisk",
            v1beta2::PartitionDiskRequest {
                disk_id: bad.into(),
            },
        )
        .await
        .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{bad:?}: {err:?}");
        let err = call::<_, v1beta2::DiskStatsResponse>(
            &svc,
            "/v1beta2.Disk/DiskStats",
            v1beta2::DiskStatsRequest {
                disk_id: bad.into(),
            },
        )
        .await
        .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{bad:?}");
        let err = call::<_, v1beta2::SetAttachStateResponse>(
            &svc,
            "/v1beta2.Disk/SetAttachState",
            v1beta2::SetAttachStateRequest {
                disk_id: bad.into(),
                is_online: true,
            },
        )
        .await
        .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{bad:?}");
        let err = call::<_, v1beta2::GetAttachStateResponse>(
            &svc,
            "/v1beta2.Disk/GetAttachState",
            v1beta2::GetAttachStateRequest {
                disk_id: bad.into(),
            },
        )
        .await
        .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{bad:?}");
    }
    assert!(api.rec.is_empty(), "the API must not be called");
    // The largest u32 is a valid disk number.
    let _: v1beta2::PartitionDiskResponse = call(
        &svc,
        "/v1beta2.Disk/PartitionDisk",
        v1beta2::PartitionDiskRequest {
            disk_id: "4294967295".into(),
        },
    )
    .await
    .unwrap();
    assert_eq!(
        api.rec.only::<disk::PartitionDiskRequest>().disk_number,
        u32::MAX
    );
}

#[tokio::test]
async fn old_versions_get_string_map_keys() {
    let (_, svc) = setup("v1alpha1");
    let resp: v1alpha1::ListDiskLocationsResponse = call(
        &svc,
        "/v1alpha1.Disk/ListDiskLocations",
        v1alpha1::ListDiskLocationsRequest {},
    )
    .await
    .unwrap();
    assert_eq!(
        resp.disk_locations,
        HashMap::from([(
            "7".to_string(),
            v1alpha1::DiskLocation {
                adapter: "a".into(),
                bus: "b".into(),
                target: "t".into(),
                lunid: "l".into(),
            }
        )])
    );

    let (_, svc) = setup("v1beta1");
    let resp: v1beta1::ListDiskIDsResponse = call(
        &svc,
        "/v1beta1.Disk/ListDiskIDs",
        v1beta1::ListDiskIDsRequest {},
    )
    .await
    .unwrap();
    let ids = &resp.disk_i_ds["3"];
    assert_eq!(ids.identifiers.len(), 2);
    assert_eq!(ids.identifiers["page83"], "p83");
    assert_eq!(ids.identifiers["serialNumber"], "sn");
}

#[tokio::test]
async fn new_versions_use_numbers() {
    for version in ["v1beta3", "v1"] {
        let (api, svc) = setup(version);
        // v1beta3 and v1 share the message shapes; encode v1's.
        let resp: v1::ListDiskLocationsResponse = call(
            &svc,
            &format!("/{version}.Disk/ListDiskLocations"),
            v1::ListDiskLocationsRequest {},
        )
        .await
        .unwrap();
        assert_eq!(resp.disk_locations[&7].lunid, "l");
        let resp: v1::ListDiskIDsResponse = call(
            &svc,
            &format!("/{version}.Disk/ListDiskIDs"),
            v1::ListDiskIDsRequest {},
        )
        .await
        .unwrap();
        assert_eq!(
            resp.disk_i_ds[&3],
            v1::DiskIDs {
                page83: "p83".into(),
                serial_number: "sn".into()
            }
        );
        let resp: v1::GetDiskStatsResponse = call(
            &svc,
            &format!("/{version}.Disk/GetDiskStats"),
            v1::GetDiskStatsRequest { disk_number: 9 },
        )
        .await
        .unwrap();
        assert_eq!(resp.total_bytes, 1 << 40);
        let _: v1::SetDiskStateResponse = call(
            &svc,
            &format!("/{version}.Disk/SetDiskState"),
            v1::SetDiskStateRequest {
                disk_number: 5,
                is_online: true,
            },
        )
        .await
        .unwrap();
        assert_eq!(api.rec.take().len(), 4);
    }
}

#[tokio::test]
async fn renamed_methods_and_fields() {
    let (api, svc) = setup("v1beta2");
    let resp: v1beta2::DiskStatsResponse = call(
        &svc,
        "/v1beta2.Disk/DiskStats",
        v1beta2::DiskStatsRequest {
            disk_id: "12".into(),
        },
    )
    .await
    .unwrap();
    assert_eq!(resp.disk_size, 1 << 40);
    assert_eq!(
        api.rec.only::<disk::GetDiskStatsRequest>(),
        disk::GetDiskStatsRequest { disk_number: 12 }
    );

    let _: v1beta2::SetAttachStateResponse = call(
        &svc,
        "/v1beta2.Disk/SetAttachState",
        v1beta2::SetAttachStateRequest {
            disk_id: "3".into(),
            is_online: true,
        },
    )
    .await
    .unwrap();
    assert_eq!(
        api.rec.only::<disk::SetDiskStateRequest>(),
        disk::SetDiskStateRequest {
            disk_number: 3,
            is_online: true
        }
    );

    let resp: v1beta2::GetAttachStateResponse = call(
        &svc,
        "/v1beta2.Disk/GetAttachState",
        v1beta2::GetAttachStateRequest {
            disk_id: "4".into(),
        },
    )
    .await
    .unwrap();
    assert!(resp.is_online);
    assert_eq!(
        api.rec.only::<disk::GetDiskStateRequest>(),
        disk::GetDiskStateRequest { disk_number: 4 }
    );

    let (api, svc) = setup("v1alpha1");
    let resp: v1alpha1::GetDiskNumberByNameResponse = call(
        &svc,
        "/v1alpha1.Disk/GetDiskNumberByName",
        v1alpha1::GetDiskNumberByNameRequest {
            disk_name: "page83-id".into(),
        },
    )
    .await
    .unwrap();
    assert_eq!(resp.disk_number, "42");
    assert_eq!(
        api.rec.only::<disk::GetDiskNumberByNameRequest>(),
        disk::GetDiskNumberByNameRequest {
            disk_name: "page83-id".into()
        }
    );
}

#[tokio::test]
async fn no_backend_answers_unimplemented() {
    let none =
        |h: &mut csi_proxy_host::Host| h.disk = Arc::new(csi_proxy_host::disk::NoDiskBackend);
    let svc = service_for(Group::Disk, "v1", none);
    let err = call::<_, v1::RescanResponse>(&svc, "/v1.Disk/Rescan", v1::RescanRequest {})
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented);
    assert!(
        err.message().contains("disk") && err.message().contains("Rescan"),
        "{}",
        err.message()
    );
    let svc = service_for(Group::Disk, "v1beta2", none);
    let err = call::<_, v1beta2::GetAttachStateResponse>(
        &svc,
        "/v1beta2.Disk/GetAttachState",
        v1beta2::GetAttachStateRequest {
            disk_id: "1".into(),
        },
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented);
    assert!(
        err.message().contains("disk API: GetDiskState"),
        "{}",
        err.message()
    );
}
