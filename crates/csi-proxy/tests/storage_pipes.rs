//! The Disk and Volume APIs over the real binary's named pipes (Windows
//! build; CI runs it under wine). One proxy serves the whole file, because
//! pipe names are machine-global.
//!
//! Wine has volumes for C: and Z: and a `\\.\PhysicalDrive0`, but no mount
//! points, no flush, no disk attributes and no `MSFT_*` classes: this file
//! covers the read-only calls that work there, and the validation of every
//! request before it reaches the host. The state-changing life cycle
//! (partition, format, mount, resize) needs a real Windows run (see
//! docs/windows-storage.md).
#![cfg(windows)]

use csi_proxy_api::{disk, volume};
use csi_proxy_client::Client;
use std::path::Path;
use tonic::Code;

mod pipes;
use pipes::{assert_code, Proxy};

const UNKNOWN_VOLUME: &str = "\\\\?\\Volume{0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0}\\";

/// The volume id of drive C:, asked of the OS directly.
fn c_volume() -> String {
    use windows_sys::Win32::Storage::FileSystem::GetVolumeNameForVolumeMountPointW;
    let mount: Vec<u16> = "C:\\\0".encode_utf16().collect();
    let mut buf = [0u16; 128];
    // SAFETY: `mount` is NUL-terminated; `buf` is writable for its length.
    let ok = unsafe {
        GetVolumeNameForVolumeMountPointW(mount.as_ptr(), buf.as_mut_ptr(), buf.len() as u32)
    };
    assert_ne!(ok, 0, "{}", std::io::Error::last_os_error());
    let end = buf.iter().position(|&c| c == 0).unwrap();
    let name = String::from_utf16(&buf[..end]).unwrap();
    // The form the API answers with (lower-case GUID, trailing backslash).
    csi_proxy_host::storage::VolumeId::parse(&name)
        .unwrap()
        .as_str()
        .to_string()
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// Volume ids every call must refuse before touching the host.
fn hostile_volume_ids() -> Vec<String> {
    vec![
        String::new(),
        "C:\\".into(),
        "C:".into(),
        "\\\\.\\PhysicalDrive0".into(),
        "\\\\?\\GLOBALROOT\\Device\\HarddiskVolume1".into(),
        "\\\\.\\Volume{0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0}\\".into(),
        "\\\\?\\Volume{0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0}\\..\\..\\x".into(),
        "\\\\?\\Volume{0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0}\\\\".into(),
        "\\\\?\\Volume{0b1c2d3e-4f50-6172-8394-a5b6c7d8e9fg}\\".into(),
        "\\\\?\\Volume{0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0'}\\".into(),
        "\\\\?\\Volume{' OR 1=1 --}\\".into(),
        "\\\\?\\Volume{0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0}\0".into(),
        "$(Format-Volume -DriveLetter C)".into(),
        "\\\\?\\Volume{0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0}\\".repeat(40),
    ]
}

#[tokio::test]
async fn disk_and_volume_apis_over_named_pipes() {
    let proxy = Proxy::start("storage-pipes", "disk,volume");
    std::fs::create_dir_all(proxy.kubelet.join("pods\\uid\\volumes")).unwrap();
    let client = Client::new();
    let c = c_volume();
    let mut v1 = client.connect_volume_v1().await.unwrap();
    let mut v2 = client.connect_volume_v2alpha1().await.unwrap();
    let mut d1 = client.connect_disk_v1().await.unwrap();

    // Volume stats and formatted check of C:, by its id with and without
    // the trailing backslash.
    for id in [c.clone(), c.trim_end_matches('\\').to_string()] {
        let st = v1
            .get_volume_stats(volume::v1::GetVolumeStatsRequest {
                volume_id: id.clone(),
            })
            .await
            .unwrap()
            .into_inner();
        assert!(
            st.total_bytes > 0 && st.used_bytes >= 0 && st.used_bytes <= st.total_bytes,
            "{st:?}"
        );
        assert!(
            v1.is_volume_formatted(volume::v1::IsVolumeFormattedRequest { volume_id: id })
                .await
                .unwrap()
                .into_inner()
                .formatted
        );
    }

    // The closest volume of a directory under the kubelet path is C:'s,
    // also for a path that does not exist yet.
    for p in [
        proxy.kubelet.join("pods\\uid\\volumes"),
        proxy.kubelet.join("pods\\uid\\volumes\\not\\yet"),
    ] {
        let got = v2
            .get_closest_volume_id_from_target_path(
                volume::v2alpha1::GetClosestVolumeIdFromTargetPathRequest { target_path: s(&p) },
            )
            .await
            .unwrap()
            .into_inner()
            .volume_id;
        assert_eq!(got, c, "{p:?}");
    }
    // A plain directory is not a mount point.
    assert_code(
        v2.get_volume_id_from_target_path(volume::v2alpha1::GetVolumeIdFromTargetPathRequest {
            target_path: s(&proxy.kubelet.join("pods")),
        })
        .await,
        Code::NotFound,
        "GetVolumeIDFromTargetPath of a plain directory",
    );

    // The disk of C: holds C:, and has a size.
    let n = v2
        .get_disk_number_from_volume_id(volume::v2alpha1::GetDiskNumberFromVolumeIdRequest {
            volume_id: c.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .disk_number;
    let on = v2
        .list_volumes_on_disk(volume::v2alpha1::ListVolumesOnDiskRequest {
            disk_number: n,
            partition_number: 0,
        })
        .await
        .unwrap()
        .into_inner()
        .volume_ids;
    assert!(on.contains(&c), "{on:?}");
    for disk_number in [0, n] {
        let st = d1
            .get_disk_stats(disk::v1::GetDiskStatsRequest { disk_number })
            .await
            .unwrap()
            .into_inner();
        assert!(st.total_bytes > 0, "disk {disk_number}: {st:?}");
    }

    // Unknown disks and volumes: NotFound.
    assert_code(
        d1.get_disk_stats(disk::v1::GetDiskStatsRequest { disk_number: 4000 })
            .await,
        Code::NotFound,
        "GetDiskStats 4000",
    );
    assert_code(
        d1.get_disk_state(disk::v1::GetDiskStateRequest { disk_number: 4000 })
            .await,
        Code::NotFound,
        "GetDiskState 4000",
    );
    assert_code(
        v2.list_volumes_on_disk(volume::v2alpha1::ListVolumesOnDiskRequest {
            disk_number: 4000,
            partition_number: 0,
        })
        .await,
        Code::NotFound,
        "ListVolumesOnDisk 4000",
    );
    assert_code(
        v1.get_volume_stats(volume::v1::GetVolumeStatsRequest {
            volume_id: UNKNOWN_VOLUME.into(),
        })
        .await,
        Code::NotFound,
        "GetVolumeStats unknown",
    );
    assert_code(
        v1.is_volume_formatted(volume::v1::IsVolumeFormattedRequest {
            volume_id: UNKNOWN_VOLUME.into(),
        })
        .await,
        Code::NotFound,
        "IsVolumeFormatted unknown",
    );
    assert_code(
        v2.get_disk_number_from_volume_id(volume::v2alpha1::GetDiskNumberFromVolumeIdRequest {
            volume_id: UNKNOWN_VOLUME.into(),
        })
        .await,
        Code::NotFound,
        "GetDiskNumberFromVolumeID unknown",
    );

    // Hostile input: refused before the host is touched.
    let before = proxy.snapshot();
    let target = s(&proxy.kubelet.join("pods\\uid\\volumes\\mnt"));
    for id in hostile_volume_ids() {
        let what = |call: &str| format!("{call} {:?}", id.chars().take(60).collect::<String>());
        assert_code(
            v1.get_volume_stats(volume::v1::GetVolumeStatsRequest {
                volume_id: id.clone(),
            })
            .await,
            Code::InvalidArgument,
            &what("GetVolumeStats"),
        );
        assert_code(
            v1.is_volume_formatted(volume::v1::IsVolumeFormattedRequest {
                volume_id: id.clone(),
            })
            .await,
            Code::InvalidArgument,
            &what("IsVolumeFormatted"),
        );
        assert_code(
            v1.format_volume(volume::v1::FormatVolumeRequest {
                volume_id: id.clone(),
            })
            .await,
            Code::InvalidArgument,
            &what("FormatVolume"),
        );
        assert_code(
            v1.resize_volume(volume::v1::ResizeVolumeRequest {
                volume_id: id.clone(),
                size_bytes: 0,
            })
            .await,
            Code::InvalidArgument,
            &what("ResizeVolume"),
        );
        assert_code(
            v1.mount_volume(volume::v1::MountVolumeRequest {
                volume_id: id.clone(),
                target_path: target.clone(),
            })
            .await,
            Code::InvalidArgument,
            &what("MountVolume"),
        );
        assert_code(
            v1.write_volume_cache(volume::v1::WriteVolumeCacheRequest {
                volume_id: id.clone(),
            })
            .await,
            Code::InvalidArgument,
            &what("WriteVolumeCache"),
        );
        assert_code(
            v2.get_disk_number_from_volume_id(volume::v2alpha1::GetDiskNumberFromVolumeIdRequest {
                volume_id: id.clone(),
            })
            .await,
            Code::InvalidArgument,
            &what("GetDiskNumberFromVolumeID"),
        );
    }
    assert_code(
        v1.resize_volume(volume::v1::ResizeVolumeRequest {
            volume_id: c.clone(),
            size_bytes: -1,
        })
        .await,
        Code::InvalidArgument,
        "ResizeVolume negative",
    );
    let k = s(&proxy.kubelet);
    for (p, code) in [
        (String::new(), Code::InvalidArgument),
        ("relative\\path".to_string(), Code::InvalidArgument),
        (format!("{k}\\..\\outside"), Code::InvalidArgument),
        (format!("\\\\?\\{k}\\x"), Code::InvalidArgument),
        ("\\\\server\\share\\x".to_string(), Code::InvalidArgument),
        (format!("{k}\\a:stream"), Code::InvalidArgument),
        (format!("{k}\\CON"), Code::InvalidArgument),
        (format!("{k}\\a\0b"), Code::InvalidArgument),
        ("C:\\Windows\\System32".to_string(), Code::PermissionDenied),
        (format!("{k}X\\x"), Code::PermissionDenied),
    ] {
        assert_code(
            v2.get_closest_volume_id_from_target_path(
                volume::v2alpha1::GetClosestVolumeIdFromTargetPathRequest {
                    target_path: p.clone(),
                },
            )
            .await,
            code,
            &format!("GetClosestVolumeIDFromTargetPath {p:?}"),
        );
        assert_code(
            v1.mount_volume(volume::v1::MountVolumeRequest {
                volume_id: c.clone(),
                target_path: p.clone(),
            })
            .await,
            code,
            &format!("MountVolume {p:?}"),
        );
        assert_code(
            v1.unmount_volume(volume::v1::UnmountVolumeRequest {
                volume_id: c.clone(),
                target_path: p.clone(),
            })
            .await,
            code,
            &format!("UnmountVolume {p:?}"),
        );
    }
    // The kubelet path itself is never a mount target.
    assert_code(
        v1.mount_volume(volume::v1::MountVolumeRequest {
            volume_id: c.clone(),
            target_path: k.clone(),
        })
        .await,
        Code::PermissionDenied,
        "MountVolume on the root",
    );
    assert_eq!(
        proxy.snapshot(),
        before,
        "a rejected request changed the host"
    );
}
