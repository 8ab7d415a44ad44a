//! The one catalog of operations: every version-free operation the group
//! tables route to (`groups/*.rs`), classified as reading the host or
//! changing it. The dispatcher marks its routes with it, the audit log
//! records the changing ones at `-audit-level=write`, and the caller policy
//! names operations through the same routing tables. A route to an
//! operation missing here panics when its table is built (a test builds
//! every table), so a new RPC cannot go unclassified.
//!
//! A leaf module: it imports nothing of the crate.

/// What an operation does to the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Only reads (the answer may come from the proxy's memory).
    Read,
    /// Can change the host: disks, volumes, files, mappings, sessions,
    /// services, or state a tool keeps on disk.
    Change,
}

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
}
