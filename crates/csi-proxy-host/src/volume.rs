//! Volume API group: version-free types and the API trait.
//!
//! The types mirror the newest version (`v2alpha1`); disk and partition
//! numbers are `u32`, sizes are bytes as `i64` (as on the wire). Volume IDs
//! are `\\?\Volume{GUID}\` strings. No host backend exists yet:
//! [`NoVolumeBackend`] answers every operation with [`crate::Error::Unimplemented`].

use crate::Result;

/// The volumes on a disk.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListVolumesOnDiskRequest {
    pub disk_number: u32,
    /// 0 means all partitions of the disk.
    pub partition_number: u32,
}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListVolumesOnDiskResponse {
    pub volume_ids: Vec<String>,
}

/// Mount a volume at `target_path`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MountVolumeRequest {
    pub volume_id: String,
    pub target_path: String,
}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MountVolumeResponse {}

/// Unmount a volume from `target_path`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UnmountVolumeRequest {
    pub volume_id: String,
    pub target_path: String,
}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UnmountVolumeResponse {}

/// Does the volume carry a filesystem?
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IsVolumeFormattedRequest {
    pub volume_id: String,
}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IsVolumeFormattedResponse {
    pub formatted: bool,
}

/// Format the volume with NTFS.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FormatVolumeRequest {
    pub volume_id: String,
}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FormatVolumeResponse {}

/// Resize the volume to `size_bytes` (0 = the maximum supported size).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResizeVolumeRequest {
    pub volume_id: String,
    pub size_bytes: i64,
}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResizeVolumeResponse {}

/// Size and usage of the volume.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetVolumeStatsRequest {
    pub volume_id: String,
}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetVolumeStatsResponse {
    pub total_bytes: i64,
    pub used_bytes: i64,
}

/// The disk that holds the volume.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetDiskNumberFromVolumeIdRequest {
    pub volume_id: String,
}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetDiskNumberFromVolumeIdResponse {
    pub disk_number: u32,
}

/// The volume mounted at `target_path`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetVolumeIdFromTargetPathRequest {
    pub target_path: String,
}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetVolumeIdFromTargetPathResponse {
    pub volume_id: String,
}

/// The volume that holds `target_path` (following links up the tree).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetClosestVolumeIdFromTargetPathRequest {
    pub target_path: String,
}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetClosestVolumeIdFromTargetPathResponse {
    pub volume_id: String,
}

/// Flush the volume's write cache to disk.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteVolumeCacheRequest {
    pub volume_id: String,
}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteVolumeCacheResponse {}

/// The version-free Volume API. Every versioned gRPC service of the group is
/// adapted onto this trait.
pub trait VolumeApi: Send + Sync {
    fn list_volumes_on_disk(
        &self,
        req: ListVolumesOnDiskRequest,
    ) -> Result<ListVolumesOnDiskResponse>;
    fn mount_volume(&self, req: MountVolumeRequest) -> Result<MountVolumeResponse>;
    fn unmount_volume(&self, req: UnmountVolumeRequest) -> Result<UnmountVolumeResponse>;
    fn is_volume_formatted(
        &self,
        req: IsVolumeFormattedRequest,
    ) -> Result<IsVolumeFormattedResponse>;
    fn format_volume(&self, req: FormatVolumeRequest) -> Result<FormatVolumeResponse>;
    fn resize_volume(&self, req: ResizeVolumeRequest) -> Result<ResizeVolumeResponse>;
    fn get_volume_stats(&self, req: GetVolumeStatsRequest) -> Result<GetVolumeStatsResponse>;
    fn get_disk_number_from_volume_id(
        &self,
        req: GetDiskNumberFromVolumeIdRequest,
    ) -> Result<GetDiskNumberFromVolumeIdResponse>;
    fn get_volume_id_from_target_path(
        &self,
        req: GetVolumeIdFromTargetPathRequest,
    ) -> Result<GetVolumeIdFromTargetPathResponse>;
    fn get_closest_volume_id_from_target_path(
        &self,
        req: GetClosestVolumeIdFromTargetPathRequest,
    ) -> Result<GetClosestVolumeIdFromTargetPathResponse>;
    fn write_volume_cache(&self, req: WriteVolumeCacheRequest) -> Result<WriteVolumeCacheResponse>;
}

crate::error::no_backend! {
    /// The Volume API before a host backend exists: every operation fails with
    /// [`crate::Error::Unimplemented`] naming the group and the method.
    NoVolumeBackend: VolumeApi, "volume", {
        list_volumes_on_disk(ListVolumesOnDiskRequest) -> ListVolumesOnDiskResponse = "ListVolumesOnDisk",
        mount_volume(MountVolumeRequest) -> MountVolumeResponse = "MountVolume",
        unmount_volume(UnmountVolumeRequest) -> UnmountVolumeResponse = "UnmountVolume",
        is_volume_formatted(IsVolumeFormattedRequest) -> IsVolumeFormattedResponse = "IsVolumeFormatted",
        format_volume(FormatVolumeRequest) -> FormatVolumeResponse = "FormatVolume",
        resize_volume(ResizeVolumeRequest) -> ResizeVolumeResponse = "ResizeVolume",
        get_volume_stats(GetVolumeStatsRequest) -> GetVolumeStatsResponse = "GetVolumeStats",
        get_disk_number_from_volume_id(GetDiskNumberFromVolumeIdRequest) -> GetDiskNumberFromVolumeIdResponse = "GetDiskNumberFromVolumeID",
        get_volume_id_from_target_path(GetVolumeIdFromTargetPathRequest) -> GetVolumeIdFromTargetPathResponse = "GetVolumeIDFromTargetPath",
        get_closest_volume_id_from_target_path(GetClosestVolumeIdFromTargetPathRequest) -> GetClosestVolumeIdFromTargetPathResponse = "GetClosestVolumeIDFromTargetPath",
        write_volume_cache(WriteVolumeCacheRequest) -> WriteVolumeCacheResponse = "WriteVolumeCache",
    }
}
