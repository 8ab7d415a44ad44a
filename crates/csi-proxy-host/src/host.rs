//! The bundle of every API group's implementation that a server (or an
//! in-process user) works with.

use crate::confined::Confined;
use crate::disk::DiskApi;
use crate::filesystem::{fake::RecordingFilesystem, Filesystem, FilesystemApi};
use crate::iscsi::{fake::RecordingIscsi, Iscsi, IscsiApi};
use crate::path::PathPolicy;
use crate::smb::{fake::RecordingSmb, Smb, SmbApi};
use crate::storage::{fake::FakeStorage, Storage};
use crate::system::{fake::RecordingSystem, Protection, ServicePolicy, System, SystemApi};
use crate::volume::VolumeApi;
use std::sync::Arc;

/// Every API group, version-free.
#[derive(Clone)]
pub struct Host {
    pub disk: Arc<dyn DiskApi>,
    pub filesystem: Arc<dyn FilesystemApi>,
    pub iscsi: Arc<dyn IscsiApi>,
    pub smb: Arc<dyn SmbApi>,
    pub system: Arc<dyn SystemApi>,
    pub volume: Arc<dyn VolumeApi>,
}

/// The recording fakes behind [`Host::fake`], under the real API layers,
/// for tests to set up and inspect.
#[derive(Clone)]
pub struct Fakes {
    pub filesystem: Arc<RecordingFilesystem>,
    pub iscsi: Arc<RecordingIscsi>,
    pub smb: Arc<RecordingSmb>,
    pub system: Arc<RecordingSystem>,
    /// The disks and volumes behind both the Disk and the Volume API.
    pub storage: Arc<FakeStorage>,
}

/// Choices of the real host beyond the path policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostOptions {
    /// The filesystem FormatVolume creates on Linux (`ext4`, `ext3`,
    /// `ext2`, `xfs`). Windows always formats NTFS.
    pub volume_fs_type: String,
    /// Services StartService/StopService may act on (`-allowed-services`;
    /// empty: the default list of the OS,
    /// [`crate::system::validate::DEFAULT_LINUX`] / `DEFAULT_WINDOWS`; `*`:
    /// every service).
    pub allowed_services: Vec<String>,
    /// Create SMB global mappings with RequirePrivacy (SMB encryption;
    /// `-require-privacy`, default true).
    pub require_privacy: bool,
    /// NewSmbGlobalMapping may map a share without a user name (the
    /// computer account on Windows, a guest on Linux;
    /// `-smb-allow-no-credentials`, default false: refused).
    pub smb_allow_no_credentials: bool,
    /// Services StopService refuses beyond the built-in node-critical set
    /// (`-protected-services`; a trailing `*` makes a prefix).
    pub protected_services: Vec<String>,
    /// Names taken out of the built-in set (`-unprotect-services`).
    pub unprotected_services: Vec<String>,
    /// This csi-proxy's own service (`-service-name`): always protected,
    /// with everything it depends on. On Linux the unit the process runs
    /// under (from its cgroup) is protected too.
    pub service_name: Option<String>,
    /// PartitionDisk and FormatVolume may write over non-zero bytes that no
    /// probe identifies (`-overwrite-unidentified-content`; default false).
    /// Identified content is never written over.
    pub overwrite_unidentified_content: bool,
    /// Where the node agent keeps what must outlive it (Linux: records of
    /// formats in progress, so that the retry of one cut short completes;
    /// `-state-dir`). `None`: nothing is kept.
    pub state_dir: Option<std::path::PathBuf>,
    /// `state_dir` as opened (and checked) at start-up: the records are
    /// kept beneath this handle, whatever the path names later. `None`:
    /// the path is opened at each use (library mode, tests).
    pub state_dir_handle: Option<StateDirHandle>,
}

/// An open state directory, shared (compared by identity).
#[derive(Clone, Debug)]
pub struct StateDirHandle(pub std::sync::Arc<std::fs::File>);

impl PartialEq for StateDirHandle {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for StateDirHandle {}

impl Default for HostOptions {
    fn default() -> Self {
        HostOptions {
            volume_fs_type: "ext4".to_string(),
            allowed_services: Vec::new(),
            require_privacy: true,
            smb_allow_no_credentials: false,
            protected_services: Vec::new(),
            unprotected_services: Vec::new(),
            service_name: None,
            overwrite_unidentified_content: false,
            state_dir: None,
            state_dir_handle: None,
        }
    }
}

impl Host {
    /// The real host of this OS, with `policy` guarding every path. Panics
    /// where [`Host::os_with`] fails.
    pub fn os(policy: PathPolicy) -> Host {
        Self::os_with(policy, &HostOptions::default())
            .expect("the default host options are valid and the roots have a long form")
    }

    /// The real host of this OS with explicit options. The roots are taken
    /// in their long form first (`PathPolicy::with_os_long_roots`), so the
    /// roots opened and every comparison with them use one spelling.
    pub fn os_with(policy: PathPolicy, options: &HostOptions) -> crate::Result<Host> {
        let policy = policy.with_os_long_roots()?;
        // One confined filesystem (one set of root handles) for every group.
        let fs = Arc::new(Confined::new(policy.clone()));
        let shared = OsShared::new();
        let (disk, volume) = os_storage(&fs, options)?;
        Ok(Host {
            disk,
            filesystem: Arc::new(Filesystem::new(policy, fs.clone())),
            iscsi: os_iscsi(&shared),
            smb: os_smb(&fs, options, &shared),
            system: os_system(options, &shared)?,
            volume,
        })
    }

    /// A host over recording fakes (for tests of the layers above): every
    /// group's real API layer, which validates as on a real host, over its
    /// recording fake. Disk and Volume share one [`Storage`] over
    /// [`FakeStorage`], with target paths confined to `policy`'s roots.
    pub fn fake(policy: PathPolicy) -> (Host, Fakes) {
        let confined = Arc::new(Confined::new(policy.clone()));
        let fakes = Fakes {
            filesystem: Arc::new(RecordingFilesystem::new()),
            iscsi: Arc::new(RecordingIscsi::new()),
            smb: Arc::new(RecordingSmb::new()),
            system: Arc::new(RecordingSystem::new()),
            storage: Arc::new(FakeStorage::new()),
        };
        let storage = Arc::new(Storage::with_confined(
            confined.clone(),
            fakes.storage.clone(),
        ));
        let host = Host {
            disk: storage.clone(),
            filesystem: Arc::new(Filesystem::new(policy, fakes.filesystem.clone())),
            iscsi: Arc::new(Iscsi::new(fakes.iscsi.clone(), crate::path::Flavor::NATIVE)),
            smb: Arc::new(Smb::new(fakes.smb.clone(), confined, true)),
            system: Arc::new(System::new(
                fakes.system.clone(),
                ServicePolicy::allow_all(),
                crate::path::Flavor::NATIVE,
            )),
            volume: storage,
        };
        (host, fakes)
    }
}

type StoragePair = (Arc<dyn DiskApi>, Arc<dyn VolumeApi>);

#[cfg(any(target_os = "linux", windows))]
fn overwrite(options: &HostOptions) -> crate::storage::content::Overwrite {
    crate::storage::content::Overwrite {
        unidentified: options.overwrite_unidentified_content,
    }
}

#[cfg(target_os = "linux")]
fn os_storage(fs: &Arc<Confined>, options: &HostOptions) -> crate::Result<StoragePair> {
    use crate::storage::linux::{FsType, LinuxStorage};
    use crate::storage::Storage;
    let fs_type = FsType::parse(&options.volume_fs_type).ok_or_else(|| {
        crate::Error::InvalidArgument(format!(
            "unsupported volume filesystem type {:?} (supported: {})",
            options.volume_fs_type,
            FsType::ALL.map(FsType::name).join(", ")
        ))
    })?;
    let storage = Arc::new(Storage::with_confined(
        fs.clone(),
        LinuxStorage::new(fs_type)
            .with_overwrite(overwrite(options))
            .with_state_dir(
                options.state_dir.as_deref(),
                options.state_dir_handle.as_ref().map(|h| h.0.clone()),
            ),
    ));
    Ok((storage.clone(), storage))
}

#[cfg(windows)]
fn os_storage(fs: &Arc<Confined>, options: &HostOptions) -> crate::Result<StoragePair> {
    use crate::storage::windows::WindowsStorage;
    use crate::storage::Storage;
    // Creating the backend starts nothing: COM comes with the first WMI call.
    let backend = WindowsStorage::new()
        .with_roots(fs.policy().clone())
        .with_overwrite(overwrite(options));
    let storage = Arc::new(Storage::with_confined(fs.clone(), backend));
    Ok((storage.clone(), storage))
}

#[cfg(not(any(target_os = "linux", windows)))]
fn os_storage(_: &Arc<Confined>, _: &HostOptions) -> crate::Result<StoragePair> {
    Ok((
        Arc::new(crate::disk::NoDiskBackend),
        Arc::new(crate::volume::NoVolumeBackend),
    ))
}

fn service_policy(options: &HostOptions) -> crate::Result<ServicePolicy> {
    ServicePolicy::allow_only(&options.allowed_services, crate::path::Flavor::NATIVE)
}

/// The protected services of this node: the built-in set, less the
/// operator's removals, plus the operator's names and the own service.
pub fn service_protection(options: &HostOptions) -> crate::Result<Protection> {
    let mut p = Protection::builtin(crate::path::Flavor::NATIVE)
        .unprotect(&options.unprotected_services)?
        .protect(&options.protected_services)?;
    if let Some(name) = &options.service_name {
        p = p.own_service(name)?;
    }
    #[cfg(target_os = "linux")]
    if let Some(unit) = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|c| crate::system::protect::unit_of_cgroup(&c))
    {
        p = p.own_service(&unit)?;
    }
    Ok(p)
}

/// What the groups of one OS host hold apart: on Windows, one WMI worker
/// (its own COM threads, its own warm connections) per group, so a stuck
/// call in one group never holds up another (storage has its own in
/// `WindowsStorage`).
struct OsShared {
    #[cfg(windows)]
    smb: Arc<crate::win::wmi::WmiWorker>,
    #[cfg(windows)]
    iscsi: Arc<crate::win::wmi::WmiWorker>,
    #[cfg(windows)]
    system: Arc<crate::win::wmi::WmiWorker>,
}

/// Test only (Windows, run under wine): the groups' WMI workers apart.
#[cfg(all(test, windows))]
mod wmi_worker_tests;

/// How many WMI threads SMB, iSCSI and System each run at most.
#[cfg(windows)]
const GROUP_WMI_THREADS: usize = 4;

impl OsShared {
    fn new() -> Self {
        #[cfg(windows)]
        let worker = |name: &str, namespace: &str| {
            Arc::new(
                crate::win::wmi::WmiWorker::new(namespace)
                    .named(name)
                    .with_max_threads(GROUP_WMI_THREADS),
            )
        };
        OsShared {
            #[cfg(windows)]
            smb: worker("smb", crate::win::wmi::SMB_NAMESPACE),
            #[cfg(windows)]
            iscsi: worker("iscsi", crate::win::wmi::STORAGE_NAMESPACE),
            #[cfg(windows)]
            system: worker("system", crate::win::wmi::CIMV2_NAMESPACE),
        }
    }
}

#[cfg(target_os = "linux")]
fn os_iscsi(_: &OsShared) -> Arc<dyn IscsiApi> {
    Arc::new(Iscsi::new(
        crate::iscsi::linux::LinuxIscsi::new(),
        crate::path::Flavor::Unix,
    ))
}

#[cfg(windows)]
fn os_iscsi(shared: &OsShared) -> Arc<dyn IscsiApi> {
    Arc::new(Iscsi::new(
        crate::iscsi::windows::WindowsIscsi::new(shared.iscsi.clone()),
        crate::path::Flavor::Windows,
    ))
}

#[cfg(not(any(target_os = "linux", windows)))]
fn os_iscsi(_: &OsShared) -> Arc<dyn IscsiApi> {
    Arc::new(crate::iscsi::NoIscsiBackend)
}

#[cfg(target_os = "linux")]
fn os_system(options: &HostOptions, _: &OsShared) -> crate::Result<Arc<dyn SystemApi>> {
    use crate::system::linux::LinuxSystem;
    let sysfs = std::path::Path::new("/sys");
    Ok(Arc::new(
        System::new(
            LinuxSystem::new(),
            service_policy(options)?,
            crate::path::Flavor::Unix,
        )
        .with_protection(service_protection(options)?)
        .with_iscsi_sessions(Arc::new(move || {
            crate::iscsi::linux::logged_in_sessions(sysfs)
        })),
    ))
}

#[cfg(windows)]
fn os_system(options: &HostOptions, shared: &OsShared) -> crate::Result<Arc<dyn SystemApi>> {
    use crate::system::windows::WindowsSystem;
    Ok(Arc::new(
        System::new(
            WindowsSystem::new(shared.system.clone()),
            service_policy(options)?,
            crate::path::Flavor::Windows,
        )
        .with_protection(service_protection(options)?),
    ))
}

#[cfg(not(any(target_os = "linux", windows)))]
fn os_system(_: &HostOptions, _: &OsShared) -> crate::Result<Arc<dyn SystemApi>> {
    Ok(Arc::new(crate::system::NoSystemBackend))
}

#[cfg(target_os = "linux")]
fn os_smb(fs: &Arc<Confined>, options: &HostOptions, _: &OsShared) -> Arc<dyn SmbApi> {
    use crate::smb::linux::LinuxSmb;
    Arc::new(
        Smb::new(LinuxSmb::new(), fs.clone(), options.require_privacy)
            .allowing_no_credentials(options.smb_allow_no_credentials),
    )
}

#[cfg(windows)]
fn os_smb(fs: &Arc<Confined>, options: &HostOptions, shared: &OsShared) -> Arc<dyn SmbApi> {
    use crate::smb::windows::WindowsSmb;
    Arc::new(
        Smb::new(
            WindowsSmb::new(shared.smb.clone()),
            fs.clone(),
            options.require_privacy,
        )
        .allowing_no_credentials(options.smb_allow_no_credentials),
    )
}

#[cfg(not(any(target_os = "linux", windows)))]
fn os_smb(_: &Arc<Confined>, _: &HostOptions, _: &OsShared) -> Arc<dyn SmbApi> {
    Arc::new(crate::smb::NoSmbBackend)
}
