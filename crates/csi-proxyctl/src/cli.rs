//! The command line: global options, then `status` or a group and one of
//! its RPCs (newest version of each group: disk v1, filesystem v2alpha1,
//! volume v2alpha1, smb v1, iscsi v1alpha2, system v1alpha1).
//!
//! Secrets never go on the command line (other users can read it): the SMB
//! password and CHAP secrets are read from environment variables.

use clap::{Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

/// Environment variable holding the SMB password for `smb map`.
pub const SMB_PASSWORD_ENV: &str = "CSI_PROXYCTL_SMB_PASSWORD";
/// Environment variable holding the CHAP secret for `iscsi connect` and
/// `iscsi set-mutual-chap-secret`.
pub const CHAP_SECRET_ENV: &str = "CSI_PROXYCTL_CHAP_SECRET";

/// Look at a running csi-proxy and run one storage call by hand.
#[derive(Debug, Parser)]
#[command(
    name = "csi-proxyctl",
    version,
    max_term_width = 100,
    after_help = "Exit codes: 0 ok, 1 other failure, 2 usage, 3 endpoint not served or \
                  unreachable, 4 status: some endpoint not serving, 10+N a call failed with \
                  gRPC code N (13 InvalidArgument, 15 NotFound, 17 PermissionDenied, \
                  22 Unimplemented)."
)]
pub struct Cli {
    /// Directory of the proxy's Unix sockets (its -socket-dir; Unix).
    #[arg(long, global = true, value_name = "DIR")]
    pub socket_dir: Option<PathBuf>,

    /// Prefix of the proxy's pipe names (its -pipe-prefix; Windows).
    #[arg(long, global = true, value_name = "PREFIX", default_value = csi_proxy_client::DEFAULT_PIPE_PREFIX)]
    pub pipe_prefix: String,

    /// Deadline of each call, in seconds (sent as grpc-timeout).
    #[arg(long, global = true, value_name = "SECONDS", default_value_t = 30.0)]
    pub timeout: f64,

    /// Output format.
    #[arg(short, long, global = true, value_enum, default_value_t = Output::Table)]
    pub output: Output,

    #[command(subcommand)]
    pub command: Command,
}

/// Output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Tables and lists for people.
    Table,
    /// JSON for scripts (the response messages, field names as in the protos).
    Json,
}

impl Cli {
    /// The client for the configured endpoints.
    pub fn client(&self) -> Result<csi_proxy_client::Client, String> {
        if !(self.timeout.is_finite() && self.timeout > 0.0) {
            return Err(format!(
                "--timeout {}: must be a positive number of seconds",
                self.timeout
            ));
        }
        let mut b = csi_proxy_client::Client::builder()
            .pipe_prefix(self.pipe_prefix.clone())
            .timeout(Duration::from_secs_f64(self.timeout))
            .connect_timeout(Duration::from_secs(5));
        if let Some(dir) = &self.socket_dir {
            b = b.socket_dir(dir);
        }
        b.build().map_err(|e| e.to_string())
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Every endpoint: reachable, served group/version, health.
    Status,
    /// Disks (disk/v1).
    #[command(subcommand)]
    Disk(Disk),
    /// Files and directories under the kubelet path (filesystem/v2alpha1).
    #[command(subcommand, name = "fs")]
    Fs(Fs),
    /// Volumes (volume/v2alpha1).
    #[command(subcommand)]
    Volume(Volume),
    /// SMB global mappings (smb/v1).
    #[command(subcommand)]
    Smb(Smb),
    /// iSCSI portals and targets (iscsi/v1alpha2).
    #[command(subcommand)]
    Iscsi(Iscsi),
    /// BIOS serial number and Windows services (system/v1alpha1).
    #[command(subcommand)]
    System(System),
}

#[derive(Debug, Subcommand)]
pub enum Disk {
    /// ListDiskLocations: adapter, bus, target and LUN of every disk.
    List,
    /// ListDiskIDs: page 83 id and serial number of every disk.
    Ids,
    /// GetDiskStats: the size of a disk.
    Stats { disk: u32 },
    /// PartitionDisk: initialise a disk (GPT) and create one partition.
    Partition { disk: u32 },
    /// Rescan: look for new disks.
    Rescan,
    /// GetDiskState: whether a disk is online.
    State { disk: u32 },
    /// SetDiskState: bring a disk online or take it offline.
    SetState { disk: u32, state: DiskState },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DiskState {
    Online,
    Offline,
}

#[derive(Debug, Subcommand)]
pub enum Fs {
    /// PathExists.
    Exists { path: String },
    /// Mkdir (with parents).
    Mkdir { path: String },
    /// Rmdir: remove a directory; --force removes its contents too.
    Rmdir {
        path: String,
        #[arg(long)]
        force: bool,
    },
    /// RmdirContents: remove everything inside a directory.
    RmdirContents { path: String },
    /// CreateSymlink: create a link at TARGET pointing to SOURCE.
    Symlink { source: String, target: String },
    /// IsSymlink.
    IsSymlink { path: String },
}

#[derive(Debug, Subcommand)]
pub enum Volume {
    /// ListVolumesOnDisk: the volume ids on a disk (partition 0 = all).
    List {
        disk: u32,
        #[arg(long, default_value_t = 0)]
        partition: u32,
    },
    /// MountVolume at a target path.
    Mount { volume_id: String, target: String },
    /// UnmountVolume from a target path.
    Unmount { volume_id: String, target: String },
    /// IsVolumeFormatted.
    IsFormatted { volume_id: String },
    /// FormatVolume.
    Format { volume_id: String },
    /// ResizeVolume to SIZE bytes (0 = as large as possible).
    Resize { volume_id: String, size_bytes: i64 },
    /// GetVolumeStats: total and used bytes.
    Stats { volume_id: String },
    /// GetDiskNumberFromVolumeID.
    DiskNumber { volume_id: String },
    /// GetVolumeIDFromTargetPath.
    IdFromTarget { target: String },
    /// GetClosestVolumeIDFromTargetPath.
    ClosestId { target: String },
    /// WriteVolumeCache: flush a volume's cache.
    Flush { volume_id: String },
}

#[derive(Debug, Subcommand)]
pub enum Smb {
    /// NewSmbGlobalMapping (password from $CSI_PROXYCTL_SMB_PASSWORD).
    Map {
        remote_path: String,
        local_path: String,
        #[arg(long, default_value = "")]
        username: String,
    },
    /// RemoveSmbGlobalMapping.
    Unmap { remote_path: String },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Auth {
    None,
    OneWayChap,
    MutualChap,
}

#[derive(Debug, clap::Args)]
pub struct Portal {
    /// Portal address.
    pub address: String,
    /// Portal port (0 = 3260).
    #[arg(long, default_value_t = 0)]
    pub port: u32,
}

#[derive(Debug, Subcommand)]
pub enum Iscsi {
    /// AddTargetPortal.
    AddPortal {
        #[command(flatten)]
        portal: Portal,
    },
    /// DiscoverTargetPortal: the target IQNs a portal offers.
    Discover {
        #[command(flatten)]
        portal: Portal,
    },
    /// RemoveTargetPortal.
    RemovePortal {
        #[command(flatten)]
        portal: Portal,
    },
    /// ListTargetPortals.
    ListPortals,
    /// ConnectTarget (CHAP secret from $CSI_PROXYCTL_CHAP_SECRET).
    Connect {
        #[command(flatten)]
        portal: Portal,
        iqn: String,
        #[arg(long, value_enum, default_value_t = Auth::None)]
        auth: Auth,
        #[arg(long, default_value = "")]
        chap_username: String,
    },
    /// DisconnectTarget.
    Disconnect {
        #[command(flatten)]
        portal: Portal,
        iqn: String,
    },
    /// GetTargetDisks: the disk numbers of a connected target.
    Disks {
        #[command(flatten)]
        portal: Portal,
        iqn: String,
    },
    /// SetMutualChapSecret (from $CSI_PROXYCTL_CHAP_SECRET).
    SetMutualChapSecret,
}

#[derive(Debug, Subcommand)]
pub enum System {
    /// GetBIOSSerialNumber.
    BiosSerial,
    /// GetService: display name, start type and status of a service.
    Service { name: String },
    /// StartService.
    StartService { name: String },
    /// StopService; --force stops dependent services too.
    StopService {
        name: String,
        #[arg(long)]
        force: bool,
    },
}
