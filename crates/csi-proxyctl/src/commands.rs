//! One arm per RPC: connect to the group's newest version, build the
//! request from the arguments, call, and return the response as JSON.

use crate::cli::{self, Command};
use crate::Failure;
use csi_proxy_api::disk::v1 as disk;
use csi_proxy_api::filesystem::v2alpha1 as fs;
use csi_proxy_api::iscsi::v1alpha2 as iscsi;
use csi_proxy_api::smb::v1 as smb;
use csi_proxy_api::system::v1alpha1 as system;
use csi_proxy_api::volume::v2alpha1 as volume;
use csi_proxy_client::Client;
use serde_json::{json, Value};

/// Connect with `$connect`, call `$method` with `$req`, and turn the
/// response into JSON.
macro_rules! call {
    ($client:expr, $connect:ident, $method:ident, $name:literal, $req:expr) => {{
        let mut c = $client.$connect().await.map_err(connect_failure)?;
        let resp = c
            .$method($req)
            .await
            .map_err(|status| Failure::Rpc {
                what: $name.to_string(),
                status,
            })?
            .into_inner();
        serde_json::to_value(resp).map_err(|e| Failure::Other(e.to_string()))?
    }};
}

fn connect_failure(e: csi_proxy_client::Error) -> Failure {
    Failure::Unreachable(e.to_string())
}

fn env_secret(name: &str) -> String {
    std::env::var(name).unwrap_or_default()
}

fn portal(p: &cli::Portal) -> Option<iscsi::TargetPortal> {
    Some(iscsi::TargetPortal {
        target_address: p.address.clone(),
        target_port: p.port,
    })
}

/// Run one RPC subcommand.
pub async fn call(client: &Client, command: &Command) -> Result<Value, Failure> {
    Ok(match command {
        Command::Status => unreachable!("status is not an RPC"),
        Command::Disk(d) => match d {
            cli::Disk::List => call!(
                client,
                connect_disk_v1,
                list_disk_locations,
                "disk/v1 ListDiskLocations",
                disk::ListDiskLocationsRequest {}
            ),
            cli::Disk::Ids => call!(
                client,
                connect_disk_v1,
                list_disk_i_ds,
                "disk/v1 ListDiskIDs",
                disk::ListDiskIDsRequest {}
            ),
            cli::Disk::Stats { disk: n } => call!(
                client,
                connect_disk_v1,
                get_disk_stats,
                "disk/v1 GetDiskStats",
                disk::GetDiskStatsRequest { disk_number: *n }
            ),
            cli::Disk::Partition { disk: n } => call!(
                client,
                connect_disk_v1,
                partition_disk,
                "disk/v1 PartitionDisk",
                disk::PartitionDiskRequest { disk_number: *n }
            ),
            cli::Disk::Rescan => call!(
                client,
                connect_disk_v1,
                rescan,
                "disk/v1 Rescan",
                disk::RescanRequest {}
            ),
            cli::Disk::State { disk: n } => call!(
                client,
                connect_disk_v1,
                get_disk_state,
                "disk/v1 GetDiskState",
                disk::GetDiskStateRequest { disk_number: *n }
            ),
            cli::Disk::SetState { disk: n, state } => call!(
                client,
                connect_disk_v1,
                set_disk_state,
                "disk/v1 SetDiskState",
                disk::SetDiskStateRequest {
                    disk_number: *n,
                    is_online: *state == cli::DiskState::Online
                }
            ),
        },
        Command::Fs(f) => match f {
            cli::Fs::Exists { path } => call!(
                client,
                connect_filesystem_v2alpha1,
                path_exists,
                "filesystem/v2alpha1 PathExists",
                fs::PathExistsRequest { path: path.clone() }
            ),
            cli::Fs::Mkdir { path } => call!(
                client,
                connect_filesystem_v2alpha1,
                mkdir,
                "filesystem/v2alpha1 Mkdir",
                fs::MkdirRequest { path: path.clone() }
            ),
            cli::Fs::Rmdir { path, force } => call!(
                client,
                connect_filesystem_v2alpha1,
                rmdir,
                "filesystem/v2alpha1 Rmdir",
                fs::RmdirRequest {
                    path: path.clone(),
                    force: *force
                }
            ),
            cli::Fs::RmdirContents { path } => call!(
                client,
                connect_filesystem_v2alpha1,
                rmdir_contents,
                "filesystem/v2alpha1 RmdirContents",
                fs::RmdirContentsRequest { path: path.clone() }
            ),
            cli::Fs::Symlink { source, target } => call!(
                client,
                connect_filesystem_v2alpha1,
                create_symlink,
                "filesystem/v2alpha1 CreateSymlink",
                fs::CreateSymlinkRequest {
                    source_path: source.clone(),
                    target_path: target.clone()
                }
            ),
            cli::Fs::IsSymlink { path } => call!(
                client,
                connect_filesystem_v2alpha1,
                is_symlink,
                "filesystem/v2alpha1 IsSymlink",
                fs::IsSymlinkRequest { path: path.clone() }
            ),
        },
        Command::Volume(v) => match v {
            cli::Volume::List { disk: n, partition } => call!(
                client,
                connect_volume_v2alpha1,
                list_volumes_on_disk,
                "volume/v2alpha1 ListVolumesOnDisk",
                volume::ListVolumesOnDiskRequest {
                    disk_number: *n,
                    partition_number: *partition
                }
            ),
            cli::Volume::Mount { volume_id, target } => call!(
                client,
                connect_volume_v2alpha1,
                mount_volume,
                "volume/v2alpha1 MountVolume",
                volume::MountVolumeRequest {
                    volume_id: volume_id.clone(),
                    target_path: target.clone()
                }
            ),
            cli::Volume::Unmount { volume_id, target } => call!(
                client,
                connect_volume_v2alpha1,
                unmount_volume,
                "volume/v2alpha1 UnmountVolume",
                volume::UnmountVolumeRequest {
                    volume_id: volume_id.clone(),
                    target_path: target.clone()
                }
            ),
            cli::Volume::IsFormatted { volume_id } => call!(
                client,
                connect_volume_v2alpha1,
                is_volume_formatted,
                "volume/v2alpha1 IsVolumeFormatted",
                volume::IsVolumeFormattedRequest {
                    volume_id: volume_id.clone()
                }
            ),
            cli::Volume::Format { volume_id } => call!(
                client,
                connect_volume_v2alpha1,
                format_volume,
                "volume/v2alpha1 FormatVolume",
                volume::FormatVolumeRequest {
                    volume_id: volume_id.clone()
                }
            ),
            cli::Volume::Resize {
                volume_id,
                size_bytes,
            } => call!(
                client,
                connect_volume_v2alpha1,
                resize_volume,
                "volume/v2alpha1 ResizeVolume",
                volume::ResizeVolumeRequest {
                    volume_id: volume_id.clone(),
                    size_bytes: *size_bytes
                }
            ),
            cli::Volume::Stats { volume_id } => call!(
                client,
                connect_volume_v2alpha1,
                get_volume_stats,
                "volume/v2alpha1 GetVolumeStats",
                volume::GetVolumeStatsRequest {
                    volume_id: volume_id.clone()
                }
            ),
            cli::Volume::DiskNumber { volume_id } => call!(
                client,
                connect_volume_v2alpha1,
                get_disk_number_from_volume_id,
                "volume/v2alpha1 GetDiskNumberFromVolumeID",
                volume::GetDiskNumberFromVolumeIdRequest {
                    volume_id: volume_id.clone()
                }
            ),
            cli::Volume::IdFromTarget { target } => call!(
                client,
                connect_volume_v2alpha1,
                get_volume_id_from_target_path,
                "volume/v2alpha1 GetVolumeIDFromTargetPath",
                volume::GetVolumeIdFromTargetPathRequest {
                    target_path: target.clone()
                }
            ),
            cli::Volume::ClosestId { target } => call!(
                client,
                connect_volume_v2alpha1,
                get_closest_volume_id_from_target_path,
                "volume/v2alpha1 GetClosestVolumeIDFromTargetPath",
                volume::GetClosestVolumeIdFromTargetPathRequest {
                    target_path: target.clone()
                }
            ),
            cli::Volume::Flush { volume_id } => call!(
                client,
                connect_volume_v2alpha1,
                write_volume_cache,
                "volume/v2alpha1 WriteVolumeCache",
                volume::WriteVolumeCacheRequest {
                    volume_id: volume_id.clone()
                }
            ),
        },
        Command::Smb(s) => match s {
            cli::Smb::Map {
                remote_path,
                local_path,
                username,
            } => call!(
                client,
                connect_smb_v1,
                new_smb_global_mapping,
                "smb/v1 NewSmbGlobalMapping",
                smb::NewSmbGlobalMappingRequest {
                    remote_path: remote_path.clone(),
                    local_path: local_path.clone(),
                    username: username.clone(),
                    password: env_secret(cli::SMB_PASSWORD_ENV),
                }
            ),
            cli::Smb::Unmap { remote_path } => call!(
                client,
                connect_smb_v1,
                remove_smb_global_mapping,
                "smb/v1 RemoveSmbGlobalMapping",
                smb::RemoveSmbGlobalMappingRequest {
                    remote_path: remote_path.clone()
                }
            ),
        },
        Command::Iscsi(i) => match i {
            cli::Iscsi::AddPortal { portal: p } => call!(
                client,
                connect_iscsi_v1alpha2,
                add_target_portal,
                "iscsi/v1alpha2 AddTargetPortal",
                iscsi::AddTargetPortalRequest {
                    target_portal: portal(p)
                }
            ),
            cli::Iscsi::Discover { portal: p } => call!(
                client,
                connect_iscsi_v1alpha2,
                discover_target_portal,
                "iscsi/v1alpha2 DiscoverTargetPortal",
                iscsi::DiscoverTargetPortalRequest {
                    target_portal: portal(p)
                }
            ),
            cli::Iscsi::RemovePortal { portal: p } => call!(
                client,
                connect_iscsi_v1alpha2,
                remove_target_portal,
                "iscsi/v1alpha2 RemoveTargetPortal",
                iscsi::RemoveTargetPortalRequest {
                    target_portal: portal(p)
                }
            ),
            cli::Iscsi::ListPortals => call!(
                client,
                connect_iscsi_v1alpha2,
                list_target_portals,
                "iscsi/v1alpha2 ListTargetPortals",
                iscsi::ListTargetPortalsRequest {}
            ),
            cli::Iscsi::Connect {
                portal: p,
                iqn,
                auth,
                chap_username,
            } => call!(
                client,
                connect_iscsi_v1alpha2,
                connect_target,
                "iscsi/v1alpha2 ConnectTarget",
                iscsi::ConnectTargetRequest {
                    target_portal: portal(p),
                    iqn: iqn.clone(),
                    auth_type: match auth {
                        cli::Auth::None => iscsi::AuthenticationType::None,
                        cli::Auth::OneWayChap => iscsi::AuthenticationType::OneWayChap,
                        cli::Auth::MutualChap => iscsi::AuthenticationType::MutualChap,
                    } as i32,
                    chap_username: chap_username.clone(),
                    chap_secret: env_secret(cli::CHAP_SECRET_ENV),
                }
            ),
            cli::Iscsi::Disconnect { portal: p, iqn } => call!(
                client,
                connect_iscsi_v1alpha2,
                disconnect_target,
                "iscsi/v1alpha2 DisconnectTarget",
                iscsi::DisconnectTargetRequest {
                    target_portal: portal(p),
                    iqn: iqn.clone()
                }
            ),
            cli::Iscsi::Disks { portal: p, iqn } => call!(
                client,
                connect_iscsi_v1alpha2,
                get_target_disks,
                "iscsi/v1alpha2 GetTargetDisks",
                iscsi::GetTargetDisksRequest {
                    target_portal: portal(p),
                    iqn: iqn.clone()
                }
            ),
            cli::Iscsi::SetMutualChapSecret => call!(
                client,
                connect_iscsi_v1alpha2,
                set_mutual_chap_secret,
                "iscsi/v1alpha2 SetMutualChapSecret",
                iscsi::SetMutualChapSecretRequest {
                    mutual_chap_secret: env_secret(cli::CHAP_SECRET_ENV)
                }
            ),
        },
        Command::System(s) => match s {
            cli::System::BiosSerial => call!(
                client,
                connect_system_v1alpha1,
                get_bios_serial_number,
                "system/v1alpha1 GetBIOSSerialNumber",
                system::GetBiosSerialNumberRequest {}
            ),
            cli::System::Service { name } => {
                let v = call!(
                    client,
                    connect_system_v1alpha1,
                    get_service,
                    "system/v1alpha1 GetService",
                    system::GetServiceRequest { name: name.clone() }
                );
                named_service_enums(v)
            }
            cli::System::StartService { name } => call!(
                client,
                connect_system_v1alpha1,
                start_service,
                "system/v1alpha1 StartService",
                system::StartServiceRequest { name: name.clone() }
            ),
            cli::System::StopService { name, force } => call!(
                client,
                connect_system_v1alpha1,
                stop_service,
                "system/v1alpha1 StopService",
                system::StopServiceRequest {
                    name: name.clone(),
                    force: *force
                }
            ),
        },
    })
}

/// GetService's enums by their proto names (`RUNNING`, `AUTOMATIC`).
fn named_service_enums(mut v: Value) -> Value {
    let name = |field: &str, f: fn(i32) -> Option<&'static str>| {
        v.get(field)
            .and_then(Value::as_i64)
            .and_then(|n| i32::try_from(n).ok())
            .and_then(f)
    };
    let start = name("start_type", |n| {
        system::StartType::try_from(n).ok().map(|e| e.as_str_name())
    });
    let status = name("status", |n| {
        system::ServiceStatus::try_from(n)
            .ok()
            .map(|e| e.as_str_name())
    });
    if let Some(o) = v.as_object_mut() {
        if let Some(s) = start {
            o.insert("start_type".into(), json!(s));
        }
        if let Some(s) = status {
            o.insert("status".into(), json!(s));
        }
    }
    v
}
