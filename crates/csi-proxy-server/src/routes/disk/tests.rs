//! The Disk tables over `Host::fake`: the real `Storage` layer over the
//! host's `FakeStorage`. What each version converts is asserted as what
//! reaches the fake backend (its recorded calls) or what it answers.

use super::*;
use crate::routes::testing::{call, service_for, FakeHost};
use csi_proxy_api::Group;
use csi_proxy_host::storage::fake::FakeDisk;
use std::collections::BTreeMap;
use tonic::Code;

/// The disks of the fixture: every number a test names, the largest u32
/// (a valid disk number) among them.
const DISKS: [u32; 9] = [1, 3, 4, 5, 7, 9, 12, 42, u32::MAX];

/// The one disk with a location (the others have none, as a disk without
/// a SCSI address): every field distinct.
const LOCATED: u32 = 7;

/// The one disk that starts offline.
const OFFLINE: u32 = 5;

fn location() -> disk::DiskLocation {
    disk::DiskLocation {
        adapter: "a".into(),
        bus: "b".into(),
        target: "t".into(),
        lun_id: "l".into(),
    }
}

/// Page-0x83 id and serial of disk `n`.
fn ids(n: u32) -> disk::DiskIds {
    disk::DiskIds {
        page83: format!("p83-{n}"),
        serial_number: format!("sn-{n}"),
    }
}

/// The size of disk `n`: past 32 bits, and its own.
fn size(n: u32) -> u64 {
    (1 << 40) + u64::from(n)
}

/// The fixture's disks as ListDiskIDs answers them.
fn all_ids() -> BTreeMap<u32, disk::DiskIds> {
    DISKS.iter().map(|&n| (n, ids(n))).collect()
}

/// A host over the fake storage holding [`DISKS`], served as one version.
struct T {
    /// Dropped before the host (it may hold the root open).
    svc: crate::dispatch::VersionedService,
    host: FakeHost,
}

impl T {
    fn new(version: &str) -> T {
        let host = FakeHost::new();
        for n in DISKS {
            host.fakes.storage.insert_disk(
                n,
                FakeDisk {
                    size: size(n),
                    online: n != OFFLINE,
                    location: (n == LOCATED).then(location),
                    ids: ids(n),
                    ..FakeDisk::default()
                },
            );
        }
        let svc = host.service(Group::Disk, version);
        T { svc, host }
    }

    fn fake(&self) -> &csi_proxy_host::storage::fake::FakeStorage {
        &self.host.fakes.storage
    }

    /// The backend calls since the last look.
    fn calls(&self) -> Vec<String> {
        self.fake().take_calls()
    }
}

/// Inline operations are tried on the calling thread; one that would
/// block runs again as a blocking job, and only a real answer (never
/// "would block") reaches the client.
#[tokio::test]
async fn inline_attempts_fall_back_to_the_blocking_pool() {
    use crate::dispatch::Outcome;
    use prost::Message;
    let t = T::new("v1");
    let req = v1::GetDiskStatsRequest { disk_number: 3 }.encode_to_vec();
    match t.svc.call("/v1.Disk/GetDiskStats", &req) {
        Outcome::Done(r) => assert_eq!(r.code, Code::Ok),
        Outcome::Blocking(_) => panic!("answered inline"),
    }
    assert_eq!(t.fake().inline_calls(), 1);
    assert_eq!(t.calls(), ["disk_size 3"]);
    t.fake().set_block_inline(true);
    let job = match t.svc.call("/v1.Disk/GetDiskStats", &req) {
        Outcome::Blocking(job) => job,
        Outcome::Done(r) => panic!("no fallback: {r:?}"),
    };
    assert_eq!(t.fake().inline_calls(), 2);
    assert!(t.calls().is_empty(), "the blocked attempt did nothing");
    assert!(!csi_proxy_host::inline::active());
    let reply = job();
    assert_eq!(reply.code, Code::Ok, "{reply:?}");
    let resp = v1::GetDiskStatsResponse::decode(&reply.body[..]).unwrap();
    assert_eq!(resp.total_bytes, size(3) as i64);
    assert_eq!(t.fake().inline_calls(), 2, "the job is not inline");
    assert_eq!(t.calls(), ["disk_size 3"]);
    // Mutating operations never run inline.
    let req = v1::PartitionDiskRequest { disk_number: 3 }.encode_to_vec();
    assert!(matches!(
        t.svc.call("/v1.Disk/PartitionDisk", &req),
        Outcome::Blocking(_)
    ));
    assert_eq!(t.fake().inline_calls(), 2);
}

/// ListDiskLocations and ListDiskIDs send their last encoded answer
/// again while the inventory generation stays the same; every other
/// call, a new generation, no generation, or a failure to get one,
/// asks the API.
#[tokio::test]
async fn list_answers_are_reused_within_one_inventory_generation() {
    let t = T::new("v1");
    let ids = || async {
        call::<_, v1::ListDiskIDsResponse>(
            &t.svc,
            "/v1.Disk/ListDiskIDs",
            v1::ListDiskIDsRequest {},
        )
        .await
    };
    let listed = |r: v1::ListDiskIDsResponse| -> BTreeMap<u32, disk::DiskIds> {
        r.disk_i_ds
            .into_iter()
            .map(|(n, i)| {
                let i = disk::DiskIds {
                    page83: i.page83,
                    serial_number: i.serial_number,
                };
                (n, i)
            })
            .collect()
    };
    const GEN: &str = "inventory_generation";
    const IDS: &str = "disk_ids";
    // No generation: every call asks the API.
    for _ in 0..3 {
        assert_eq!(listed(ids().await.unwrap()), all_ids());
    }
    assert_eq!(t.calls(), [GEN, IDS, GEN, IDS, GEN, IDS]);
    t.fake().set_inventory_generation(Some(5));
    let first = ids().await.unwrap();
    // A disk the fake gains without a new generation is not seen: the
    // answer is the one kept.
    t.fake().insert_disk(2, FakeDisk::default());
    for _ in 0..4 {
        assert_eq!(ids().await.unwrap(), first);
    }
    assert_eq!(
        t.calls(),
        [GEN, IDS, GEN, GEN, GEN, GEN],
        "one answer for generation 5"
    );
    // Locations have their own answer.
    for _ in 0..2 {
        let _: v1::ListDiskLocationsResponse = call(
            &t.svc,
            "/v1.Disk/ListDiskLocations",
            v1::ListDiskLocationsRequest {},
        )
        .await
        .unwrap();
    }
    assert_eq!(t.calls(), [GEN, "disk_locations", GEN]);
    t.fake().set_inventory_generation(Some(6));
    let sixth = ids().await.unwrap();
    assert_eq!(ids().await.unwrap(), sixth);
    assert_eq!(t.calls(), [GEN, IDS, GEN], "one answer for generation 6");
    let mut want = all_ids();
    want.insert(2, disk::DiskIds::default());
    assert_eq!(listed(sixth), want, "generation 6 sees the new disk");
    // A failing generation fails the call without asking the API.
    t.fake().fail_inventory_generation("scripted");
    assert_eq!(ids().await.unwrap_err().code(), Code::Internal);
    assert_eq!(t.calls(), [GEN]);
    // Calls that are not cached never ask for the generation.
    let _: v1::GetDiskStatsResponse = call(
        &t.svc,
        "/v1.Disk/GetDiskStats",
        v1::GetDiskStatsRequest { disk_number: 1 },
    )
    .await
    .unwrap();
    assert_eq!(t.calls(), ["disk_size 1"]);
}

#[tokio::test]
async fn old_string_disk_ids_parse_to_numbers() {
    for version in ["v1alpha1", "v1beta1", "v1beta2"] {
        let t = T::new(version);
        let path = format!("/{version}.Disk/PartitionDisk");
        // The three versions share the message shape; encode v1beta2's.
        let _: v1beta2::PartitionDiskResponse = call(
            &t.svc,
            &path,
            v1beta2::PartitionDiskRequest {
                disk_id: "7".into(),
            },
        )
        .await
        .unwrap();
        assert_eq!(t.calls(), ["partition_disk 7"], "{version}");
    }
}

#[tokio::test]
async fn bad_string_disk_ids_are_rejected_before_the_api() {
    let t = T::new("v1beta2");
    for bad in ["abc", "-1", "4294967296", "", " 7", "7 "] {
        let err = call::<_, v1beta2::PartitionDiskResponse>(
            &t.svc,
            "/v1beta2.Disk/PartitionDisk",
            v1beta2::PartitionDiskRequest {
                disk_id: bad.into(),
            },
        )
        .await
        .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{bad:?}: {err:?}");
        let err = call::<_, v1beta2::DiskStatsResponse>(
            &t.svc,
            "/v1beta2.Disk/DiskStats",
            v1beta2::DiskStatsRequest {
                disk_id: bad.into(),
            },
        )
        .await
        .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{bad:?}");
        let err = call::<_, v1beta2::SetAttachStateResponse>(
            &t.svc,
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
            &t.svc,
            "/v1beta2.Disk/GetAttachState",
            v1beta2::GetAttachStateRequest {
                disk_id: bad.into(),
            },
        )
        .await
        .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{bad:?}");
    }
    assert!(t.calls().is_empty(), "the API must not be called");
    // The largest u32 is a valid disk number.
    let _: v1beta2::PartitionDiskResponse = call(
        &t.svc,
        "/v1beta2.Disk/PartitionDisk",
        v1beta2::PartitionDiskRequest {
            disk_id: "4294967295".into(),
        },
    )
    .await
    .unwrap();
    assert_eq!(t.calls(), [format!("partition_disk {}", u32::MAX)]);
}

#[tokio::test]
async fn old_versions_get_string_map_keys() {
    let t = T::new("v1alpha1");
    let resp: v1alpha1::ListDiskLocationsResponse = call(
        &t.svc,
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

    let t = T::new("v1beta1");
    let resp: v1beta1::ListDiskIDsResponse = call(
        &t.svc,
        "/v1beta1.Disk/ListDiskIDs",
        v1beta1::ListDiskIDsRequest {},
    )
    .await
    .unwrap();
    let ids = &resp.disk_i_ds["3"];
    assert_eq!(ids.identifiers.len(), 2);
    assert_eq!(ids.identifiers["page83"], "p83-3");
    assert_eq!(ids.identifiers["serialNumber"], "sn-3");
    // Every disk, keyed by its number in decimal.
    let mut keys: Vec<&str> = resp.disk_i_ds.keys().map(String::as_str).collect();
    keys.sort_by_key(|k| k.parse::<u32>().unwrap());
    let want: Vec<String> = DISKS.iter().map(u32::to_string).collect();
    assert_eq!(keys, want);
}

#[tokio::test]
async fn new_versions_use_numbers() {
    for version in ["v1beta3", "v1"] {
        let t = T::new(version);
        // v1beta3 and v1 share the message shapes; encode v1's.
        let resp: v1::ListDiskLocationsResponse = call(
            &t.svc,
            &format!("/{version}.Disk/ListDiskLocations"),
            v1::ListDiskLocationsRequest {},
        )
        .await
        .unwrap();
        assert_eq!(resp.disk_locations[&7].lunid, "l");
        let resp: v1::ListDiskIDsResponse = call(
            &t.svc,
            &format!("/{version}.Disk/ListDiskIDs"),
            v1::ListDiskIDsRequest {},
        )
        .await
        .unwrap();
        assert_eq!(
            resp.disk_i_ds[&3],
            v1::DiskIDs {
                page83: "p83-3".into(),
                serial_number: "sn-3".into()
            }
        );
        let resp: v1::GetDiskStatsResponse = call(
            &t.svc,
            &format!("/{version}.Disk/GetDiskStats"),
            v1::GetDiskStatsRequest { disk_number: 9 },
        )
        .await
        .unwrap();
        assert_eq!(resp.total_bytes, size(9) as i64);
        let _: v1::SetDiskStateResponse = call(
            &t.svc,
            &format!("/{version}.Disk/SetDiskState"),
            v1::SetDiskStateRequest {
                disk_number: 5,
                is_online: true,
            },
        )
        .await
        .unwrap();
        assert!(t.fake().disk(5).unwrap().online);
        let mut calls = t.calls();
        // The lists ask the inventory generation first (none here).
        calls.retain(|c| c != "inventory_generation");
        assert_eq!(
            calls,
            [
                "disk_locations",
                "disk_ids",
                "disk_size 9",
                "set_disk_online 5 true"
            ],
            "{version}"
        );
    }
}

#[tokio::test]
async fn renamed_methods_and_fields() {
    let t = T::new("v1beta2");
    let resp: v1beta2::DiskStatsResponse = call(
        &t.svc,
        "/v1beta2.Disk/DiskStats",
        v1beta2::DiskStatsRequest {
            disk_id: "12".into(),
        },
    )
    .await
    .unwrap();
    assert_eq!(resp.disk_size, size(12) as i64);
    assert_eq!(t.calls(), ["disk_size 12"]);

    let _: v1beta2::SetAttachStateResponse = call(
        &t.svc,
        "/v1beta2.Disk/SetAttachState",
        v1beta2::SetAttachStateRequest {
            disk_id: "3".into(),
            is_online: true,
        },
    )
    .await
    .unwrap();
    assert_eq!(t.calls(), ["set_disk_online 3 true"]);

    let resp: v1beta2::GetAttachStateResponse = call(
        &t.svc,
        "/v1beta2.Disk/GetAttachState",
        v1beta2::GetAttachStateRequest {
            disk_id: "4".into(),
        },
    )
    .await
    .unwrap();
    assert!(resp.is_online);
    assert_eq!(t.calls(), ["disk_online 4"]);

    let t = T::new("v1alpha1");
    let resp: v1alpha1::GetDiskNumberByNameResponse = call(
        &t.svc,
        "/v1alpha1.Disk/GetDiskNumberByName",
        v1alpha1::GetDiskNumberByNameRequest {
            disk_name: "p83-42".into(),
        },
    )
    .await
    .unwrap();
    assert_eq!(resp.disk_number, "42");
    // The name reached the backend's look-up (by page-0x83 id: over the
    // ids of every disk).
    assert_eq!(t.calls(), ["disk_ids"]);
    let err = call::<_, v1alpha1::GetDiskNumberByNameResponse>(
        &t.svc,
        "/v1alpha1.Disk/GetDiskNumberByName",
        v1alpha1::GetDiskNumberByNameRequest {
            disk_name: "p83-43".into(),
        },
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
    assert!(err.message().contains("\"p83-43\""), "{}", err.message());
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
