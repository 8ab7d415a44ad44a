//! Disk v1alpha1, v1beta1, v1beta2, v1beta3, v1.

use super::routing;
use crate::dispatch::Routes;
use crate::wire::{request, response, Wire};
use csi_proxy_api::disk::{v1, v1alpha1, v1beta1, v1beta2, v1beta3};
use csi_proxy_host::disk::{self as disk, DiskApi};
use std::collections::HashMap;
use std::sync::Arc;
use tonic::Status;

// The lists and lookups are answered from the disk inventory: tried
// inline, they move to the blocking pool when the host would have to
// read a device first.
crate::catalog::disk_table!(routing!());

// Requests. v1alpha1..v1beta2 carry disk numbers as decimal strings
// (`diskID`): `Wire<u32> for String` parses them strictly.
request!([v1alpha1, v1beta1, v1beta2, v1beta3, v1] ListDiskLocationsRequest => disk::ListDiskLocationsRequest {});
request!([v1alpha1, v1beta1, v1beta2] PartitionDiskRequest => disk::PartitionDiskRequest { disk_number = disk_id });
request!([v1beta3, v1] PartitionDiskRequest => disk::PartitionDiskRequest { disk_number });
request!([v1alpha1, v1beta1, v1beta2, v1beta3, v1] RescanRequest => disk::RescanRequest {});
request!([v1alpha1] GetDiskNumberByNameRequest => disk::GetDiskNumberByNameRequest { disk_name });
request!([v1beta1, v1beta2, v1beta3, v1] ListDiskIDsRequest => disk::ListDiskIdsRequest {});
request!([v1beta1, v1beta2] DiskStatsRequest => disk::GetDiskStatsRequest { disk_number = disk_id });
request!([v1beta3, v1] GetDiskStatsRequest => disk::GetDiskStatsRequest { disk_number });
request!([v1beta2] SetAttachStateRequest => disk::SetDiskStateRequest { disk_number = disk_id, is_online });
request!([v1beta3, v1] SetDiskStateRequest => disk::SetDiskStateRequest { disk_number, is_online });
request!([v1beta2] GetAttachStateRequest => disk::GetDiskStateRequest { disk_number = disk_id });
request!([v1beta3, v1] GetDiskStateRequest => disk::GetDiskStateRequest { disk_number });

// Responses. Map keys (disk numbers) become decimal strings where the old
// versions want strings; the map conversion does that per key.
response!([v1alpha1, v1beta1, v1beta2, v1beta3, v1] disk::DiskLocation => DiskLocation { adapter, bus, target, lunid = lun_id } exact);
response!([v1alpha1, v1beta1, v1beta2, v1beta3, v1] disk::ListDiskLocationsResponse => ListDiskLocationsResponse { disk_locations } exact);
response!([v1alpha1, v1beta1, v1beta2, v1beta3, v1] disk::PartitionDiskResponse => PartitionDiskResponse {} exact);
response!([v1alpha1, v1beta1, v1beta2, v1beta3, v1] disk::RescanResponse => RescanResponse {} exact);
response!([v1alpha1] disk::GetDiskNumberByNameResponse => GetDiskNumberByNameResponse { disk_number } exact);
response!([v1beta3, v1] disk::DiskIds => DiskIDs { page83, serial_number } exact);
response!([v1beta1, v1beta2, v1beta3, v1] disk::ListDiskIdsResponse => ListDiskIDsResponse { disk_i_ds = disk_ids } exact);
response!([v1beta1, v1beta2] disk::GetDiskStatsResponse => DiskStatsResponse { disk_size = total_bytes } exact);
response!([v1beta3, v1] disk::GetDiskStatsResponse => GetDiskStatsResponse { total_bytes } exact);
response!([v1beta2] disk::SetDiskStateResponse => SetAttachStateResponse {} exact);
response!([v1beta3, v1] disk::SetDiskStateResponse => SetDiskStateResponse {} exact);
response!([v1beta2] disk::GetDiskStateResponse => GetAttachStateResponse { is_online } exact);
response!([v1beta3, v1] disk::GetDiskStateResponse => GetDiskStateResponse { is_online } exact);

/// v1beta1/v1beta2 `DiskIDs` is a map of identifiers; upstream fills exactly
/// the keys `page83` and `serialNumber`.
fn identifiers(ids: disk::DiskIds) -> HashMap<String, String> {
    HashMap::from([
        ("page83".to_string(), ids.page83),
        ("serialNumber".to_string(), ids.serial_number),
    ])
}

impl Wire<v1beta1::DiskIDs> for disk::DiskIds {
    fn wire(self) -> Result<v1beta1::DiskIDs, Status> {
        Ok(v1beta1::DiskIDs {
            identifiers: identifiers(self),
        })
    }
}

impl Wire<v1beta2::DiskIDs> for disk::DiskIds {
    fn wire(self) -> Result<v1beta2::DiskIDs, Status> {
        Ok(v1beta2::DiskIDs {
            identifiers: identifiers(self),
        })
    }
}

#[cfg(test)]
mod tests;
