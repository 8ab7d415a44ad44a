//! Real-Windows tier: library mode's finer partitioning and SMB steps
//! through csi_proxy's C ABI, which need the Storage Management and SMB WMI
//! providers (wine has neither). Under wine only what wine can answer runs:
//! unknown disks are NotFound before WMI is asked.
#![cfg(windows)]

#[path = "../../csi-proxy-ffi/tests/ffi/mod.rs"]
mod ffi;
mod real_windows;
mod spelling;

use csi_proxy::extras::{BoolResponse, DiskNumberRequest, EmptyResponse, RemotePathRequest};
use csi_proxy_api::volume::v2alpha1 as vol;

fn disk(n: u32) -> DiskNumberRequest {
    DiskNumberRequest { disk_number: n }
}

#[test]
fn finer_steps_on_the_system_disk_read_and_refuse() {
    let dir = tempfile::tempdir().unwrap();
    let kubelet = dir.path().join("kubelet");
    std::fs::create_dir(&kubelet).unwrap();
    // The library takes the root in its long form; %TEMP% may be short.
    let kubelet = spelling::long_path(&kubelet);
    let lib = ffi::Lib::open(&ffi::options(&kubelet.display().to_string())).unwrap();
    for method in ["IsDiskInitialized", "BasicPartitionsExist"] {
        let r = lib.ok::<_, BoolResponse>("disk", method, &disk(4000));
        assert_eq!(r.unwrap_err().0, 5, "{method} 4000");
    }
    assert_eq!(
        lib.ok::<_, EmptyResponse>("disk", "InitializeDisk", &disk(4000))
            .unwrap_err()
            .0,
        5
    );

    let Some(_win) = real_windows::require(
        "the Storage Management API (MSFT_Disk, MSFT_Partition) and the SMB WMI provider",
    ) else {
        return;
    };
    // The disk of the kubelet directory's volume: initialised, partitioned,
    // and never changed through csi-proxy (it holds the host's volumes).
    let closest: vol::GetClosestVolumeIdFromTargetPathResponse = lib
        .ok(
            "volume",
            "GetClosestVolumeIDFromTargetPath",
            &vol::GetClosestVolumeIdFromTargetPathRequest {
                target_path: kubelet.display().to_string(),
            },
        )
        .unwrap();
    let number: vol::GetDiskNumberFromVolumeIdResponse = lib
        .ok(
            "volume",
            "GetDiskNumberFromVolumeID",
            &vol::GetDiskNumberFromVolumeIdRequest {
                volume_id: closest.volume_id,
            },
        )
        .unwrap();
    let n = number.disk_number;
    for method in ["IsDiskInitialized", "BasicPartitionsExist"] {
        let r: BoolResponse = lib.ok("disk", method, &disk(n)).unwrap();
        assert!(r.value, "{method} {n}");
    }
    for method in ["InitializeDisk", "CreateBasicPartition"] {
        let r = lib.ok::<_, EmptyResponse>("disk", method, &disk(n));
        assert_eq!(r.unwrap_err().0, 9, "{method} of the host's disk {n}");
    }
    // A share nobody mapped.
    let mapped: BoolResponse = lib
        .ok(
            "smb",
            "IsSMBMapped",
            &RemotePathRequest {
                remote_path: r"\\csi-proxy-no-such-host\share".into(),
            },
        )
        .unwrap();
    assert!(!mapped.value);
}
