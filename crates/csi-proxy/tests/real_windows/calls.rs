//! The Disk and Volume calls the storage tests of the tier repeat, over
//! the real binary's pipes (the channels come from `pipes::Proxy`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use csi_proxy_api::disk::v1 as dk;
use csi_proxy_api::volume::v2alpha1 as vl;
use csi_proxy_client::ProxyChannel;
use tonic::Status;

pub type DiskClient = dk::disk_client::DiskClient<ProxyChannel>;
pub type VolumeClient = vl::volume_client::VolumeClient<ProxyChannel>;

/// Disk v1 and Volume v2alpha1 clients of one proxy.
pub struct Calls {
    pub disk: DiskClient,
    pub volume: VolumeClient,
}

/// Volume ids compare without case (the GUID's hex digits).
pub fn same_volume(a: &str, b: &str) -> bool {
    a.trim_end_matches('\\')
        .eq_ignore_ascii_case(b.trim_end_matches('\\'))
}

impl Calls {
    pub fn new(disk: ProxyChannel, volume: ProxyChannel) -> Calls {
        Calls {
            disk: DiskClient::new(disk),
            volume: VolumeClient::new(volume),
        }
    }

    pub async fn partition_disk(&mut self, disk_number: u32) -> Result<(), Status> {
        self.disk
            .partition_disk(dk::PartitionDiskRequest { disk_number })
            .await
            .map(drop)
    }

    pub async fn volumes_on(&mut self, disk_number: u32) -> Result<Vec<String>, Status> {
        self.volume
            .list_volumes_on_disk(vl::ListVolumesOnDiskRequest {
                disk_number,
                partition_number: 0,
            })
            .await
            .map(|r| r.into_inner().volume_ids)
    }

    /// PartitionDisk, then the one volume ListVolumesOnDisk finds on it
    /// (waited for: the volume arrives shortly after its partition).
    pub async fn partitioned_volume(&mut self, disk_number: u32) -> String {
        self.partition_disk(disk_number).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match self.volumes_on(disk_number).await {
                Ok(v) if v.len() == 1 => return v[0].clone(),
                Ok(v) if v.len() > 1 => panic!("disk {disk_number}: volumes {v:?}"),
                other => assert!(
                    Instant::now() < deadline,
                    "disk {disk_number}: no volume after PartitionDisk: {other:?}"
                ),
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    pub async fn format(&mut self, volume_id: &str) -> Result<(), Status> {
        self.volume
            .format_volume(vl::FormatVolumeRequest {
                volume_id: volume_id.into(),
            })
            .await
            .map(drop)
    }

    /// PartitionDisk + FormatVolume: the NTFS volume of a fresh disk.
    pub async fn formatted_volume(&mut self, disk_number: u32) -> String {
        let v = self.partitioned_volume(disk_number).await;
        self.format(&v).await.unwrap();
        assert!(self.is_formatted(&v).await.unwrap(), "{v}");
        v
    }

    pub async fn is_formatted(&mut self, volume_id: &str) -> Result<bool, Status> {
        self.volume
            .is_volume_formatted(vl::IsVolumeFormattedRequest {
                volume_id: volume_id.into(),
            })
            .await
            .map(|r| r.into_inner().formatted)
    }

    /// Total and used bytes.
    pub async fn stats(&mut self, volume_id: &str) -> Result<(i64, i64), Status> {
        self.volume
            .get_volume_stats(vl::GetVolumeStatsRequest {
                volume_id: volume_id.into(),
            })
            .await
            .map(|r| {
                let r = r.into_inner();
                (r.total_bytes, r.used_bytes)
            })
    }

    pub async fn disk_of(&mut self, volume_id: &str) -> Result<u32, Status> {
        self.volume
            .get_disk_number_from_volume_id(vl::GetDiskNumberFromVolumeIdRequest {
                volume_id: volume_id.into(),
            })
            .await
            .map(|r| r.into_inner().disk_number)
    }

    pub async fn mount(&mut self, volume_id: &str, target: &str) -> Result<(), Status> {
        self.volume
            .mount_volume(vl::MountVolumeRequest {
                volume_id: volume_id.into(),
                target_path: target.into(),
            })
            .await
            .map(drop)
    }

    pub async fn unmount(&mut self, volume_id: &str, target: &str) -> Result<(), Status> {
        self.volume
            .unmount_volume(vl::UnmountVolumeRequest {
                volume_id: volume_id.into(),
                target_path: target.into(),
            })
            .await
            .map(drop)
    }

    pub async fn volume_at(&mut self, target: &str) -> Result<String, Status> {
        self.volume
            .get_volume_id_from_target_path(vl::GetVolumeIdFromTargetPathRequest {
                target_path: target.into(),
            })
            .await
            .map(|r| r.into_inner().volume_id)
    }

    pub async fn closest_volume(&mut self, target: &str) -> Result<String, Status> {
        self.volume
            .get_closest_volume_id_from_target_path(vl::GetClosestVolumeIdFromTargetPathRequest {
                target_path: target.into(),
            })
            .await
            .map(|r| r.into_inner().volume_id)
    }

    pub async fn resize(&mut self, volume_id: &str, size_bytes: i64) -> Result<(), Status> {
        self.volume
            .resize_volume(vl::ResizeVolumeRequest {
                volume_id: volume_id.into(),
                size_bytes,
            })
            .await
            .map(drop)
    }

    pub async fn flush(&mut self, volume_id: &str) -> Result<(), Status> {
        self.volume
            .write_volume_cache(vl::WriteVolumeCacheRequest {
                volume_id: volume_id.into(),
            })
            .await
            .map(drop)
    }

    pub async fn disk_ids(&mut self) -> Result<BTreeMap<u32, dk::DiskIDs>, Status> {
        self.disk
            .list_disk_i_ds(dk::ListDiskIDsRequest {})
            .await
            .map(|r| r.into_inner().disk_i_ds.into_iter().collect())
    }

    pub async fn disk_size(&mut self, disk_number: u32) -> Result<i64, Status> {
        self.disk
            .get_disk_stats(dk::GetDiskStatsRequest { disk_number })
            .await
            .map(|r| r.into_inner().total_bytes)
    }

    pub async fn online(&mut self, disk_number: u32) -> Result<bool, Status> {
        self.disk
            .get_disk_state(dk::GetDiskStateRequest { disk_number })
            .await
            .map(|r| r.into_inner().is_online)
    }

    pub async fn set_online(&mut self, disk_number: u32, is_online: bool) -> Result<(), Status> {
        self.disk
            .set_disk_state(dk::SetDiskStateRequest {
                disk_number,
                is_online,
            })
            .await
            .map(drop)
    }

    pub async fn rescan(&mut self) -> Result<(), Status> {
        self.disk.rescan(dk::RescanRequest {}).await.map(drop)
    }

    /// The volume of `C:\` (asked of the OS) and its disk (asked of the
    /// proxy).
    pub async fn system_volume(&mut self) -> (String, u32) {
        let v = super::links::volume_at(std::path::Path::new("C:\\")).unwrap();
        let n = self.disk_of(&v).await.unwrap();
        (v, n)
    }
}

/// Polls `f` every 200 ms until it answers `Some`, at most `secs` seconds.
pub async fn eventually<T, F, Fut>(secs: u64, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(t) = f().await {
            return t;
        }
        assert!(Instant::now() < deadline, "{what}: not within {secs} s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
