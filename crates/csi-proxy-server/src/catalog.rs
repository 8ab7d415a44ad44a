//! The routing catalog, the one home of what the server knows about each
//! method: for every group and version, the methods it routes, the
//! version-free operation each goes to (the same in every version: a test
//! checks it), whether that operation reads or changes the host
//! ([`Effect`]), where it runs ([`Placement`]) and whether its answer is
//! cached. The dispatcher builds its routes from it (`routes/*.rs` add the
//! message conversions), the guard and the audit log mark the changing
//! calls with it, and the caller policy names operations through it.
//!
//! The tables are macros (`disk_table!` ...) handing their rows, message
//! type names included, to a callback: [`routes`] reads them here as data,
//! the route builders of `routes/*.rs` expand them with the message types.
//! An operation missing from [`OPERATIONS`] panics when its routes are
//! built (a test builds every table), so a new RPC cannot go unclassified.
//!
//! A leaf module: it imports nothing of the crate.

use csi_proxy_api::{ApiVersion, Group};

/// What an operation does to the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Only reads (the answer may come from the proxy's memory).
    Read,
    /// Can change the host: disks, volumes, files, mappings, sessions,
    /// services, or state a tool keeps on disk.
    Change,
}

/// Where a host operation runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// On the async worker that decoded the request, as an inline attempt
    /// (`csi_proxy_host::inline`): for cheap read-only operations (a few
    /// local syscalls, or an answer from memory), where a thread hop would
    /// cost more than the work itself. If the host answers that it would
    /// have to block (device I/O), the call runs again on the blocking pool.
    Inline,
    /// On tokio's blocking pool: for everything that mutates the host or may
    /// take long (removing a tree, formatting, WMI calls).
    Blocking,
}

/// One routed method of one version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    /// The method name, e.g. `PathExists`.
    pub method: &'static str,
    /// The version-free operation, e.g. `path_exists`.
    pub operation: &'static str,
    /// Where the operation runs: inline when its table lists it so.
    pub placement: Placement,
    /// Whether the answer is kept while the group's token stays the same
    /// (`crate::dispatch::Token`).
    pub cached: bool,
}

impl Route {
    const fn new(
        method: &'static str,
        operation: &'static str,
        inline: &[&str],
        cached: &[&str],
    ) -> Route {
        Route {
            method,
            operation,
            placement: if contains(inline, operation) {
                Placement::Inline
            } else {
                Placement::Blocking
            },
            cached: contains(cached, operation),
        }
    }

    /// What the operation does to the host.
    ///
    /// # Panics
    /// If the operation is not in [`OPERATIONS`].
    #[must_use]
    pub fn effect(&self) -> Effect {
        match effect(self.operation) {
            Some(e) => e,
            None => panic!(
                "operation {} is not in the catalog (catalog.rs)",
                self.operation
            ),
        }
    }

    /// Whether the operation can change the host (audit level `write`).
    #[must_use]
    pub fn write(&self) -> bool {
        self.effect() == Effect::Change
    }
}

const fn contains(list: &[&str], name: &str) -> bool {
    let mut i = 0;
    while i < list.len() {
        let (a, b) = (list[i].as_bytes(), name.as_bytes());
        if a.len() == b.len() {
            let mut k = 0;
            while k < a.len() && a[k] == b[k] {
                k += 1;
            }
            if k == a.len() {
                return true;
            }
        }
        i += 1;
    }
    false
}

/// `entries!(() <a table>)`: the table as a function from a version name
/// to its [`Route`]s (`None`: a version the table does not list).
macro_rules! entries {
    (() $trait:ident, inline $inline:tt; cached($token:ident) $cached:tt; $($rest:tt)+) => {
        entries!(@go $inline, $cached, $($rest)+)
    };
    (() $trait:ident, inline $inline:tt; $($rest:tt)+) => {
        entries!(@go $inline, [], $($rest)+)
    };
    (@go $inline:tt, $cached:tt, $( [$($ver:ident),+ $(,)?] $methods:tt )+) => {
        |version: &str| -> Option<&'static [Route]> {
            match version {
                $( $( stringify!($ver) => Some(entries!(@one $inline, $cached, $methods)), )+ )+
                _ => None,
            }
        }
    };
    (@one [$($inline:ident),* $(,)?], [$($cached:ident),* $(,)?], { $($method:ident($req:ident, $resp:ident) => $op:ident),* $(,)? }) => {{
        const INLINE: &[&str] = &[$(stringify!($inline)),*];
        const CACHED: &[&str] = &[$(stringify!($cached)),*];
        const ROUTES: &[Route] = &[$(Route::new(stringify!($method), stringify!($op), INLINE, CACHED)),*];
        ROUTES
    }};
}

/// The routes of `version` (`None`: a version no table lists).
#[must_use]
pub fn routes(version: ApiVersion) -> Option<&'static [Route]> {
    let v = version.version;
    match version.group {
        Group::Disk => (disk_table!(entries!()))(v),
        Group::Filesystem => (filesystem_table!(entries!()))(v),
        Group::Iscsi => (iscsi_table!(entries!()))(v),
        Group::Smb => (smb_table!(entries!()))(v),
        Group::System => (system_table!(entries!()))(v),
        Group::Volume => (volume_table!(entries!()))(v),
    }
}

/// The routes library mode adds to `group` beyond the proto methods
/// (upstream's finer library steps, `csi-proxy-ffi` `extras.rs`), routed
/// through the same dispatcher; their effects are [`LIBRARY_OPERATIONS`].
#[must_use]
pub fn library_routes(group: Group) -> &'static [Route] {
    const INLINE: &[&str] = &["path_valid"];
    const DISK: &[Route] = &[
        Route::new("IsDiskInitialized", "is_disk_initialized", INLINE, &[]),
        Route::new("InitializeDisk", "initialize_disk", INLINE, &[]),
        Route::new(
            "BasicPartitionsExist",
            "basic_partitions_exist",
            INLINE,
            &[],
        ),
        Route::new(
            "CreateBasicPartition",
            "create_basic_partition",
            INLINE,
            &[],
        ),
    ];
    const SMB: &[Route] = &[
        Route::new("IsSMBMapped", "is_smb_mapped", INLINE, &[]),
        Route::new("NewSMBLink", "new_smb_link", INLINE, &[]),
    ];
    const FILESYSTEM: &[Route] = &[Route::new("PathValid", "path_valid", INLINE, &[])];
    match group {
        Group::Disk => DISK,
        Group::Smb => SMB,
        Group::Filesystem => FILESYSTEM,
        Group::Iscsi | Group::System | Group::Volume => &[],
    }
}

/// The route of `method` among `routes`.
///
/// # Panics
/// If `routes` has no such method (the route builders and the catalog
/// expand the same table, so they cannot disagree).
#[must_use]
pub fn route(routes: &'static [Route], method: &str) -> &'static Route {
    routes
        .iter()
        .find(|r| r.method == method)
        .unwrap_or_else(|| panic!("method {method} is not in the catalog"))
}

/// The operation `method` of `group` routes to in any version (`None`
/// when no version has it). Every version that has the method routes it
/// to the same operation (a test checks it).
#[must_use]
pub fn operation_of(group: Group, method: &str) -> Option<&'static str> {
    csi_proxy_api::API_VERSIONS
        .iter()
        .filter(|v| v.group == group)
        .filter_map(|v| routes(*v))
        .flat_map(|r| r.iter())
        .find(|r| r.method == method)
        .map(|r| r.operation)
}

// The tables, one per group: `<group>_table!(callback!(args))` expands to
// `callback!((args) Trait, inline [ops]; [cached(token) [ops];] [versions]
// { Method(Request, Response) => operation, ... } ...)`. Operations named in
// `inline` are cheap and read-only and run on the async worker; all others
// on the blocking pool. Operations named in `cached` keep their last
// encoded answer while the group API's `token` operation gives the same
// number.

macro_rules! disk_table {
    ($cb:ident!($($args:tt)*)) => {
        $cb! {($($args)*) DiskApi,
            inline [list_disk_locations, list_disk_ids, get_disk_number_by_name, get_disk_stats, get_disk_state];
            cached(inventory_generation) [list_disk_locations, list_disk_ids];
            [v1alpha1] {
                ListDiskLocations(ListDiskLocationsRequest, ListDiskLocationsResponse) => list_disk_locations,
                PartitionDisk(PartitionDiskRequest, PartitionDiskResponse) => partition_disk,
                Rescan(RescanRequest, RescanResponse) => rescan,
                GetDiskNumberByName(GetDiskNumberByNameRequest, GetDiskNumberByNameResponse) => get_disk_number_by_name,
            }
            [v1beta1] {
                ListDiskLocations(ListDiskLocationsRequest, ListDiskLocationsResponse) => list_disk_locations,
                PartitionDisk(PartitionDiskRequest, PartitionDiskResponse) => partition_disk,
                Rescan(RescanRequest, RescanResponse) => rescan,
                ListDiskIDs(ListDiskIDsRequest, ListDiskIDsResponse) => list_disk_ids,
                DiskStats(DiskStatsRequest, DiskStatsResponse) => get_disk_stats,
            }
            [v1beta2] {
                ListDiskLocations(ListDiskLocationsRequest, ListDiskLocationsResponse) => list_disk_locations,
                PartitionDisk(PartitionDiskRequest, PartitionDiskResponse) => partition_disk,
                Rescan(RescanRequest, RescanResponse) => rescan,
                ListDiskIDs(ListDiskIDsRequest, ListDiskIDsResponse) => list_disk_ids,
                DiskStats(DiskStatsRequest, DiskStatsResponse) => get_disk_stats,
                SetAttachState(SetAttachStateRequest, SetAttachStateResponse) => set_disk_state,
                GetAttachState(GetAttachStateRequest, GetAttachStateResponse) => get_disk_state,
            }
            [v1beta3, v1] {
                ListDiskLocations(ListDiskLocationsRequest, ListDiskLocationsResponse) => list_disk_locations,
                PartitionDisk(PartitionDiskRequest, PartitionDiskResponse) => partition_disk,
                Rescan(RescanRequest, RescanResponse) => rescan,
                ListDiskIDs(ListDiskIDsRequest, ListDiskIDsResponse) => list_disk_ids,
                GetDiskStats(GetDiskStatsRequest, GetDiskStatsResponse) => get_disk_stats,
                SetDiskState(SetDiskStateRequest, SetDiskStateResponse) => set_disk_state,
                GetDiskState(GetDiskStateRequest, GetDiskStateResponse) => get_disk_state,
            }
        }
    };
}
pub(crate) use disk_table;

macro_rules! filesystem_table {
    ($cb:ident!($($args:tt)*)) => {
        $cb! {($($args)*) FilesystemApi,
            inline [path_exists, is_symlink];
            [v1alpha1, v1beta1] {
                PathExists(PathExistsRequest, PathExistsResponse) => path_exists,
                Mkdir(MkdirRequest, MkdirResponse) => mkdir,
                Rmdir(RmdirRequest, RmdirResponse) => rmdir,
                LinkPath(LinkPathRequest, LinkPathResponse) => create_symlink,
                IsMountPoint(IsMountPointRequest, IsMountPointResponse) => is_symlink,
            }
            [v1beta2, v1] {
                PathExists(PathExistsRequest, PathExistsResponse) => path_exists,
                Mkdir(MkdirRequest, MkdirResponse) => mkdir,
                Rmdir(RmdirRequest, RmdirResponse) => rmdir,
                CreateSymlink(CreateSymlinkRequest, CreateSymlinkResponse) => create_symlink,
                IsSymlink(IsSymlinkRequest, IsSymlinkResponse) => is_symlink,
            }
            [v2alpha1] {
                PathExists(PathExistsRequest, PathExistsResponse) => path_exists,
                Mkdir(MkdirRequest, MkdirResponse) => mkdir,
                Rmdir(RmdirRequest, RmdirResponse) => rmdir,
                RmdirContents(RmdirContentsRequest, RmdirContentsResponse) => rmdir_contents,
                CreateSymlink(CreateSymlinkRequest, CreateSymlinkResponse) => create_symlink,
                IsSymlink(IsSymlinkRequest, IsSymlinkResponse) => is_symlink,
            }
        }
    };
}
pub(crate) use filesystem_table;

macro_rules! iscsi_table {
    ($cb:ident!($($args:tt)*)) => {
        $cb! {($($args)*) IscsiApi,
            inline [];
            [v1alpha1] {
                AddTargetPortal(AddTargetPortalRequest, AddTargetPortalResponse) => add_target_portal,
                DiscoverTargetPortal(DiscoverTargetPortalRequest, DiscoverTargetPortalResponse) => discover_target_portal,
                RemoveTargetPortal(RemoveTargetPortalRequest, RemoveTargetPortalResponse) => remove_target_portal,
                ListTargetPortals(ListTargetPortalsRequest, ListTargetPortalsResponse) => list_target_portals,
                ConnectTarget(ConnectTargetRequest, ConnectTargetResponse) => connect_target,
                DisconnectTarget(DisconnectTargetRequest, DisconnectTargetResponse) => disconnect_target,
                GetTargetDisks(GetTargetDisksRequest, GetTargetDisksResponse) => get_target_disks,
            }
            [v1alpha2] {
                AddTargetPortal(AddTargetPortalRequest, AddTargetPortalResponse) => add_target_portal,
                DiscoverTargetPortal(DiscoverTargetPortalRequest, DiscoverTargetPortalResponse) => discover_target_portal,
                RemoveTargetPortal(RemoveTargetPortalRequest, RemoveTargetPortalResponse) => remove_target_portal,
                ListTargetPortals(ListTargetPortalsRequest, ListTargetPortalsResponse) => list_target_portals,
                ConnectTarget(ConnectTargetRequest, ConnectTargetResponse) => connect_target,
                DisconnectTarget(DisconnectTargetRequest, DisconnectTargetResponse) => disconnect_target,
                GetTargetDisks(GetTargetDisksRequest, GetTargetDisksResponse) => get_target_disks,
                SetMutualChapSecret(SetMutualChapSecretRequest, SetMutualChapSecretResponse) => set_mutual_chap_secret,
            }
        }
    };
}
pub(crate) use iscsi_table;

macro_rules! smb_table {
    ($cb:ident!($($args:tt)*)) => {
        $cb! {($($args)*) SmbApi,
            inline [];
            [v1alpha1, v1beta1, v1beta2, v1] {
                NewSmbGlobalMapping(NewSmbGlobalMappingRequest, NewSmbGlobalMappingResponse) => new_smb_global_mapping,
                RemoveSmbGlobalMapping(RemoveSmbGlobalMappingRequest, RemoveSmbGlobalMappingResponse) => remove_smb_global_mapping,
            }
        }
    };
}
pub(crate) use smb_table;

macro_rules! system_table {
    ($cb:ident!($($args:tt)*)) => {
        $cb! {($($args)*) SystemApi,
            inline [];
            [v1alpha1] {
                GetBIOSSerialNumber(GetBiosSerialNumberRequest, GetBiosSerialNumberResponse) => get_bios_serial_number,
                StartService(StartServiceRequest, StartServiceResponse) => start_service,
                StopService(StopServiceRequest, StopServiceResponse) => stop_service,
                GetService(GetServiceRequest, GetServiceResponse) => get_service,
            }
        }
    };
}
pub(crate) use system_table;

macro_rules! volume_table {
    ($cb:ident!($($args:tt)*)) => {
        $cb! {($($args)*) VolumeApi,
            inline [list_volumes_on_disk, get_disk_number_from_volume_id];
            [v1alpha1] {
                ListVolumesOnDisk(ListVolumesOnDiskRequest, ListVolumesOnDiskResponse) => list_volumes_on_disk,
                MountVolume(MountVolumeRequest, MountVolumeResponse) => mount_volume,
                DismountVolume(DismountVolumeRequest, DismountVolumeResponse) => unmount_volume,
                IsVolumeFormatted(IsVolumeFormattedRequest, IsVolumeFormattedResponse) => is_volume_formatted,
                FormatVolume(FormatVolumeRequest, FormatVolumeResponse) => format_volume,
                ResizeVolume(ResizeVolumeRequest, ResizeVolumeResponse) => resize_volume,
            }
            [v1beta1] {
                ListVolumesOnDisk(ListVolumesOnDiskRequest, ListVolumesOnDiskResponse) => list_volumes_on_disk,
                MountVolume(MountVolumeRequest, MountVolumeResponse) => mount_volume,
                DismountVolume(DismountVolumeRequest, DismountVolumeResponse) => unmount_volume,
                IsVolumeFormatted(IsVolumeFormattedRequest, IsVolumeFormattedResponse) => is_volume_formatted,
                FormatVolume(FormatVolumeRequest, FormatVolumeResponse) => format_volume,
                ResizeVolume(ResizeVolumeRequest, ResizeVolumeResponse) => resize_volume,
                VolumeStats(VolumeStatsRequest, VolumeStatsResponse) => get_volume_stats,
                GetVolumeDiskNumber(VolumeDiskNumberRequest, VolumeDiskNumberResponse) => get_disk_number_from_volume_id,
                GetVolumeIDFromMount(VolumeIdFromMountRequest, VolumeIdFromMountResponse) => get_volume_id_from_target_path,
            }
            [v1beta2] {
                ListVolumesOnDisk(ListVolumesOnDiskRequest, ListVolumesOnDiskResponse) => list_volumes_on_disk,
                MountVolume(MountVolumeRequest, MountVolumeResponse) => mount_volume,
                DismountVolume(DismountVolumeRequest, DismountVolumeResponse) => unmount_volume,
                IsVolumeFormatted(IsVolumeFormattedRequest, IsVolumeFormattedResponse) => is_volume_formatted,
                FormatVolume(FormatVolumeRequest, FormatVolumeResponse) => format_volume,
                ResizeVolume(ResizeVolumeRequest, ResizeVolumeResponse) => resize_volume,
                VolumeStats(VolumeStatsRequest, VolumeStatsResponse) => get_volume_stats,
                GetVolumeDiskNumber(VolumeDiskNumberRequest, VolumeDiskNumberResponse) => get_disk_number_from_volume_id,
                GetVolumeIDFromMount(VolumeIdFromMountRequest, VolumeIdFromMountResponse) => get_volume_id_from_target_path,
                WriteVolumeCache(WriteVolumeCacheRequest, WriteVolumeCacheResponse) => write_volume_cache,
            }
            [v1beta3, v1] {
                ListVolumesOnDisk(ListVolumesOnDiskRequest, ListVolumesOnDiskResponse) => list_volumes_on_disk,
                MountVolume(MountVolumeRequest, MountVolumeResponse) => mount_volume,
                UnmountVolume(UnmountVolumeRequest, UnmountVolumeResponse) => unmount_volume,
                IsVolumeFormatted(IsVolumeFormattedRequest, IsVolumeFormattedResponse) => is_volume_formatted,
                FormatVolume(FormatVolumeRequest, FormatVolumeResponse) => format_volume,
                ResizeVolume(ResizeVolumeRequest, ResizeVolumeResponse) => resize_volume,
                GetVolumeStats(GetVolumeStatsRequest, GetVolumeStatsResponse) => get_volume_stats,
                GetDiskNumberFromVolumeID(GetDiskNumberFromVolumeIdRequest, GetDiskNumberFromVolumeIdResponse) => get_disk_number_from_volume_id,
                GetVolumeIDFromTargetPath(GetVolumeIdFromTargetPathRequest, GetVolumeIdFromTargetPathResponse) => get_volume_id_from_target_path,
                WriteVolumeCache(WriteVolumeCacheRequest, WriteVolumeCacheResponse) => write_volume_cache,
            }
            [v2alpha1] {
                ListVolumesOnDisk(ListVolumesOnDiskRequest, ListVolumesOnDiskResponse) => list_volumes_on_disk,
                MountVolume(MountVolumeRequest, MountVolumeResponse) => mount_volume,
                UnmountVolume(UnmountVolumeRequest, UnmountVolumeResponse) => unmount_volume,
                IsVolumeFormatted(IsVolumeFormattedRequest, IsVolumeFormattedResponse) => is_volume_formatted,
                FormatVolume(FormatVolumeRequest, FormatVolumeResponse) => format_volume,
                ResizeVolume(ResizeVolumeRequest, ResizeVolumeResponse) => resize_volume,
                GetVolumeStats(GetVolumeStatsRequest, GetVolumeStatsResponse) => get_volume_stats,
                GetDiskNumberFromVolumeID(GetDiskNumberFromVolumeIdRequest, GetDiskNumberFromVolumeIdResponse) => get_disk_number_from_volume_id,
                GetVolumeIDFromTargetPath(GetVolumeIdFromTargetPathRequest, GetVolumeIdFromTargetPathResponse) => get_volume_id_from_target_path,
                GetClosestVolumeIDFromTargetPath(GetClosestVolumeIdFromTargetPathRequest, GetClosestVolumeIdFromTargetPathResponse) => get_closest_volume_id_from_target_path,
                WriteVolumeCache(WriteVolumeCacheRequest, WriteVolumeCacheResponse) => write_volume_cache,
            }
        }
    };
}
pub(crate) use volume_table;

/// Every operation and its effect, sorted by name.
pub const OPERATIONS: &[(&str, Effect)] = &[
    ("add_target_portal", Effect::Change),
    ("connect_target", Effect::Change),
    ("create_symlink", Effect::Change),
    ("disconnect_target", Effect::Change),
    // `iscsiadm --mode discovery` writes node records on Linux; the
    // iSCSI initiator on Windows keeps what it discovered too.
    ("discover_target_portal", Effect::Change),
    ("format_volume", Effect::Change),
    ("get_bios_serial_number", Effect::Read),
    ("get_closest_volume_id_from_target_path", Effect::Read),
    ("get_disk_number_by_name", Effect::Read),
    ("get_disk_number_from_volume_id", Effect::Read),
    ("get_disk_state", Effect::Read),
    ("get_disk_stats", Effect::Read),
    ("get_service", Effect::Read),
    ("get_target_disks", Effect::Read),
    ("get_volume_id_from_target_path", Effect::Read),
    ("get_volume_stats", Effect::Read),
    ("is_symlink", Effect::Read),
    ("is_volume_formatted", Effect::Read),
    ("list_disk_ids", Effect::Read),
    ("list_disk_locations", Effect::Read),
    ("list_target_portals", Effect::Read),
    ("list_volumes_on_disk", Effect::Read),
    ("mkdir", Effect::Change),
    ("mount_volume", Effect::Change),
    ("new_smb_global_mapping", Effect::Change),
    ("partition_disk", Effect::Change),
    ("path_exists", Effect::Read),
    ("remove_smb_global_mapping", Effect::Change),
    ("remove_target_portal", Effect::Change),
    ("rescan", Effect::Change),
    ("resize_volume", Effect::Change),
    ("rmdir", Effect::Change),
    ("rmdir_contents", Effect::Change),
    ("set_disk_state", Effect::Change),
    ("set_mutual_chap_secret", Effect::Change),
    ("start_service", Effect::Change),
    ("stop_service", Effect::Change),
    ("unmount_volume", Effect::Change),
    ("write_volume_cache", Effect::Change),
];

/// The operations library mode adds beyond the proto methods (upstream's
/// finer library steps, `csi-proxy-ffi` `extras.rs`), routed through the
/// same dispatcher; sorted by name.
pub const LIBRARY_OPERATIONS: &[(&str, Effect)] = &[
    ("basic_partitions_exist", Effect::Read),
    ("create_basic_partition", Effect::Change),
    ("initialize_disk", Effect::Change),
    ("is_disk_initialized", Effect::Read),
    ("is_smb_mapped", Effect::Read),
    ("new_smb_link", Effect::Change),
    ("path_valid", Effect::Read),
];

/// The effect of `operation` (`None`: not in the catalog).
#[must_use]
pub fn effect(operation: &str) -> Option<Effect> {
    [OPERATIONS, LIBRARY_OPERATIONS].iter().find_map(|table| {
        table
            .binary_search_by(|(op, _)| (*op).cmp(operation))
            .ok()
            .map(|i| table[i].1)
    })
}

/// Whether `operation` can change the host.
///
/// # Panics
/// If the operation is not in the catalog.
#[must_use]
pub fn changes_host(operation: &str) -> bool {
    match effect(operation) {
        Some(e) => e == Effect::Change,
        None => panic!("operation {operation} is not in the catalog (catalog.rs)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalog_is_sorted_and_has_no_duplicates() {
        for table in [OPERATIONS, LIBRARY_OPERATIONS] {
            assert!(table.windows(2).all(|w| w[0].0 < w[1].0));
        }
        assert!(LIBRARY_OPERATIONS
            .iter()
            .all(|(op, _)| OPERATIONS.iter().all(|(o, _)| o != op)));
        assert_eq!(effect("discover_target_portal"), Some(Effect::Change));
        assert_eq!(effect("path_exists"), Some(Effect::Read));
        assert_eq!(effect("nope"), None);
    }

    #[test]
    fn library_routes_are_the_library_operations() {
        let mut routed: Vec<&str> = [Group::Disk, Group::Smb, Group::Filesystem]
            .into_iter()
            .flat_map(library_routes)
            .map(|r| r.operation)
            .collect();
        routed.sort_unstable();
        let listed: Vec<&str> = LIBRARY_OPERATIONS.iter().map(|(op, _)| *op).collect();
        assert_eq!(routed, listed);
        assert_eq!(
            route(library_routes(Group::Filesystem), "PathValid").placement,
            Placement::Inline
        );
        assert_eq!(
            route(library_routes(Group::Disk), "InitializeDisk").placement,
            Placement::Blocking
        );
    }

    /// The catalog classifies every routed operation
    /// and lists no operation that nothing routes to.
    #[test]
    fn every_routed_operation_is_in_the_catalog_and_only_those() {
        let mut routed = std::collections::BTreeSet::new();
        for v in csi_proxy_api::API_VERSIONS {
            for Route {
                method: m,
                operation: op,
                ..
            } in routes(v).unwrap()
            {
                assert!(
                    effect(op).is_some(),
                    "{} {m}: {op} is not in the catalog",
                    v.service()
                );
                routed.insert(*op);
            }
        }
        let listed: std::collections::BTreeSet<&str> =
            OPERATIONS.iter().map(|(op, _)| *op).collect();
        assert_eq!(routed, listed);
    }
}
