//! System API group: version-free types and the API trait.
//!
//! The service enums use the Win32 numbering (`SERVICE_STATUS.dwCurrentState`
//! and `dwStartType`), which is also the proto numbering.
//!
//! Layout: the types and [`SystemApi`] here; [`System`] (`api.rs`) validates
//! every request ([`validate`]: service names, the optional allow-list;
//! [`protect`]: the node-critical services Start/Stop refuse, checked
//! first) and hands typed values to a [`SystemBackend`]: `windows/` (the Service
//! Control Manager, `Win32_BIOS` over the group's own WMI worker), `linux/`
//! (systemd over its D-Bus API, SMBIOS from sysfs), and the recording
//! [`fake`].

use crate::Result;

mod api;
pub mod codes;
pub mod fake;
#[cfg(target_os = "linux")]
pub mod linux;
pub mod narrow;
pub mod plan;
pub mod protect;
pub mod scm_rules;
pub mod validate;
pub mod wait;
#[cfg(windows)]
pub mod windows;

pub use api::{DependentGuard, IscsiSessions, System, SystemBackend};
pub use protect::Protection;
pub use validate::{ServiceName, ServicePolicy};

/// How a Windows service starts (`dwStartType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StartType {
    Boot = 0,
    System = 1,
    Automatic = 2,
    Manual = 3,
    Disabled = 4,
}

impl StartType {
    /// Every value, in numeric order.
    pub const ALL: [StartType; 5] = [
        StartType::Boot,
        StartType::System,
        StartType::Automatic,
        StartType::Manual,
        StartType::Disabled,
    ];

    /// The Win32 (and proto) number.
    pub fn to_i32(self) -> i32 {
        self as i32
    }

    /// Inverse of [`StartType::to_i32`]; `None` for unknown values.
    pub fn from_i32(v: i32) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.to_i32() == v)
    }
}

/// State of a Windows service (`dwCurrentState`; 0 = unknown).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ServiceStatus {
    #[default]
    Unknown = 0,
    Stopped = 1,
    StartPending = 2,
    StopPending = 3,
    Running = 4,
    ContinuePending = 5,
    PausePending = 6,
    Paused = 7,
}

impl ServiceStatus {
    /// Every value, in numeric order.
    pub const ALL: [ServiceStatus; 8] = [
        ServiceStatus::Unknown,
        ServiceStatus::Stopped,
        ServiceStatus::StartPending,
        ServiceStatus::StopPending,
        ServiceStatus::Running,
        ServiceStatus::ContinuePending,
        ServiceStatus::PausePending,
        ServiceStatus::Paused,
    ];

    /// The Win32 (and proto) number.
    pub fn to_i32(self) -> i32 {
        self as i32
    }

    /// Inverse of [`ServiceStatus::to_i32`]; `None` for unknown values.
    pub fn from_i32(v: i32) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.to_i32() == v)
    }
}

/// The BIOS serial number of the host.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetBiosSerialNumberRequest {}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetBiosSerialNumberResponse {
    pub serial_number: String,
}

/// Start a Windows service.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StartServiceRequest {
    pub name: String,
}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StartServiceResponse {}

/// Stop a Windows service; with `force`, its dependent services too.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StopServiceRequest {
    pub name: String,
    pub force: bool,
}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StopServiceResponse {}

/// Display name, start type and state of a Windows service.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetServiceRequest {
    pub name: String,
}
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GetServiceResponse {
    pub display_name: String,
    pub start_type: StartType,
    pub status: ServiceStatus,
}

/// The version-free System API. Every versioned gRPC service of the group is
/// adapted onto this trait.
pub trait SystemApi: Send + Sync {
    fn get_bios_serial_number(
        &self,
        req: GetBiosSerialNumberRequest,
    ) -> Result<GetBiosSerialNumberResponse>;
    fn start_service(&self, req: StartServiceRequest) -> Result<StartServiceResponse>;
    fn stop_service(&self, req: StopServiceRequest) -> Result<StopServiceResponse>;
    fn get_service(&self, req: GetServiceRequest) -> Result<GetServiceResponse>;
}

crate::error::no_backend! {
    /// A System API without a host backend (other OSes): every operation fails
    /// with [`crate::Error::Unimplemented`] naming the group and the method.
    NoSystemBackend: SystemApi, "system", {
        get_bios_serial_number(GetBiosSerialNumberRequest) -> GetBiosSerialNumberResponse = "GetBIOSSerialNumber",
        start_service(StartServiceRequest) -> StartServiceResponse = "StartService",
        stop_service(StopServiceRequest) -> StopServiceResponse = "StopService",
        get_service(GetServiceRequest) -> GetServiceResponse = "GetService",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn win32_numbering() {
        assert_eq!(StartType::Boot.to_i32(), 0);
        assert_eq!(StartType::Disabled.to_i32(), 4);
        assert_eq!(ServiceStatus::Unknown.to_i32(), 0);
        assert_eq!(ServiceStatus::Stopped.to_i32(), 1);
        assert_eq!(ServiceStatus::Running.to_i32(), 4);
        assert_eq!(ServiceStatus::Paused.to_i32(), 7);
        for (i, t) in StartType::ALL.into_iter().enumerate() {
            assert_eq!(StartType::from_i32(i as i32), Some(t));
        }
        for (i, s) in ServiceStatus::ALL.into_iter().enumerate() {
            assert_eq!(ServiceStatus::from_i32(i as i32), Some(s));
        }
        assert_eq!(StartType::from_i32(5), None);
        assert_eq!(StartType::from_i32(-1), None);
        assert_eq!(ServiceStatus::from_i32(8), None);
        assert_eq!(ServiceStatus::from_i32(-1), None);
    }
}
