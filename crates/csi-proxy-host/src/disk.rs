//! Disk API group: version-free types and the API trait.
//!
//! The types mirror the newest version (`v1`); disk numbers are `u32`, sizes
//! are bytes as `i64` (as on the wire). No host backend exists yet:
//! [`NoDiskBackend`] answers every operation with [`crate::Error::Unimplemented`].

use crate::Result;
use std::collections::HashMap;

/// Location of every disk the host enumerates.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListDiskLocationsRequest {}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListDiskLocationsResponse {
    /// Disk number → location.
    pub disk_locations: HashMap<u32, DiskLocation>,
}

/// Where a disk sits: `<Adapter, Bus, Target, LUN ID>`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DiskLocation {
    pub adapter: String,
    pub bus: String,
    pub target: String,
    pub lun_id: String,
}

/// Initialize a disk with a GPT partition table and one basic partition
/// (unless it is partitioned already).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartitionDiskRequest {
    pub disk_number: u32,
}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartitionDiskResponse {}

/// The finer steps of PartitionDisk, one call each (library mode's
/// `IsDiskInitialized`, `InitializeDisk`, `BasicPartitionsExist`,
/// `CreateBasicPartition`; no proto methods). Has the disk a partition
/// table (GPT or MBR)?
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IsDiskInitializedRequest {
    pub disk_number: u32,
}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IsDiskInitializedResponse {
    pub initialized: bool,
}

/// Give a raw disk an empty GPT (an initialised disk is kept as it is).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InitializeDiskRequest {
    pub disk_number: u32,
}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InitializeDiskResponse {}

/// Has the disk a data partition (any but Microsoft reserved ones)?
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BasicPartitionsExistRequest {
    pub disk_number: u32,
}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BasicPartitionsExistResponse {
    pub exist: bool,
}

/// Create one basic data partition over the free space of an initialised
/// disk, unless it has a data partition (a raw disk: FailedPrecondition).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CreateBasicPartitionRequest {
    pub disk_number: u32,
}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CreateBasicPartitionResponse {}

/// Refresh the host's storage cache.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RescanRequest {}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RescanResponse {}

/// Identifiers of every disk.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListDiskIdsRequest {}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListDiskIdsResponse {
    /// Disk number → identifiers.
    pub disk_ids: HashMap<u32, DiskIds>,
}

/// The identifiers of one disk.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DiskIds {
    /// SCSI page 0x83 device identifier.
    pub page83: String,
    pub serial_number: String,
}

/// Size of a disk.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetDiskStatsRequest {
    pub disk_number: u32,
}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetDiskStatsResponse {
    pub total_bytes: i64,
}

/// Bring a disk online or take it offline.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SetDiskStateRequest {
    pub disk_number: u32,
    pub is_online: bool,
}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SetDiskStateResponse {}

/// Is a disk online?
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetDiskStateRequest {
    pub disk_number: u32,
}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetDiskStateResponse {
    pub is_online: bool,
}

/// The number of the disk whose page-0x83 identifier is `disk_name`
/// (only `v1alpha1` has this method).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetDiskNumberByNameRequest {
    pub disk_name: String,
}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetDiskNumberByNameResponse {
    pub disk_number: u32,
}

/// The version-free Disk API. Every versioned gRPC service of the group is
/// adapted onto this trait.
pub trait DiskApi: Send + Sync {
    fn list_disk_locations(
        &self,
        req: ListDiskLocationsRequest,
    ) -> Result<ListDiskLocationsResponse>;
    fn partition_disk(&self, req: PartitionDiskRequest) -> Result<PartitionDiskResponse>;
    fn is_disk_initialized(
        &self,
        req: IsDiskInitializedRequest,
    ) -> Result<IsDiskInitializedResponse>;
    fn initialize_disk(&self, req: InitializeDiskRequest) -> Result<InitializeDiskResponse>;
    fn basic_partitions_exist(
        &self,
        req: BasicPartitionsExistRequest,
    ) -> Result<BasicPartitionsExistResponse>;
    fn create_basic_partition(
        &self,
        req: CreateBasicPartitionRequest,
    ) -> Result<CreateBasicPartitionResponse>;
    fn rescan(&self, req: RescanRequest) -> Result<RescanResponse>;
    fn list_disk_ids(&self, req: ListDiskIdsRequest) -> Result<ListDiskIdsResponse>;
    fn get_disk_stats(&self, req: GetDiskStatsRequest) -> Result<GetDiskStatsResponse>;
    fn set_disk_state(&self, req: SetDiskStateRequest) -> Result<SetDiskStateResponse>;
    fn get_disk_state(&self, req: GetDiskStateRequest) -> Result<GetDiskStateResponse>;
    fn get_disk_number_by_name(
        &self,
        req: GetDiskNumberByNameRequest,
    ) -> Result<GetDiskNumberByNameResponse>;

    /// A number that changes whenever the host's disks or volumes change
    /// (the generation of the backend's inventory), taken after every
    /// change already announced is applied; `None` when the backend keeps
    /// no inventory. While it stays the same, ListDiskLocations and
    /// ListDiskIDs answer the same, so a server may send its last encoded
    /// answer again.
    fn inventory_generation(&self) -> Result<Option<u64>> {
        Ok(None)
    }
}

crate::error::no_backend! {
    /// The Disk API before a host backend exists: every operation fails with
    /// [`crate::Error::Unimplemented`] naming the group and the method.
    NoDiskBackend: DiskApi, "disk", {
        list_disk_locations(ListDiskLocationsRequest) -> ListDiskLocationsResponse = "ListDiskLocations",
        is_disk_initialized(IsDiskInitializedRequest) -> IsDiskInitializedResponse = "IsDiskInitialized",
        initialize_disk(InitializeDiskRequest) -> InitializeDiskResponse = "InitializeDisk",
        basic_partitions_exist(BasicPartitionsExistRequest) -> BasicPartitionsExistResponse = "BasicPartitionsExist",
        create_basic_partition(CreateBasicPartitionRequest) -> CreateBasicPartitionResponse = "CreateBasicPartition",
        partition_disk(PartitionDiskRequest) -> PartitionDiskResponse = "PartitionDisk",
        rescan(RescanRequest) -> RescanResponse = "Rescan",
        list_disk_ids(ListDiskIdsRequest) -> ListDiskIdsResponse = "ListDiskIDs",
        get_disk_stats(GetDiskStatsRequest) -> GetDiskStatsResponse = "GetDiskStats",
        set_disk_state(SetDiskStateRequest) -> SetDiskStateResponse = "SetDiskState",
        get_disk_state(GetDiskStateRequest) -> GetDiskStateResponse = "GetDiskState",
        get_disk_number_by_name(GetDiskNumberByNameRequest) -> GetDiskNumberByNameResponse = "GetDiskNumberByName",
    }
}
