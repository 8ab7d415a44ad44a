//! The validating System API: every name is checked (and the allow-list
//! applied) before the backend sees it.

use super::validate::{ServiceName, ServicePolicy};
use super::{
    GetBiosSerialNumberRequest, GetBiosSerialNumberResponse, GetServiceRequest, GetServiceResponse,
    StartServiceRequest, StartServiceResponse, StopServiceRequest, StopServiceResponse, SystemApi,
};
use crate::path::Flavor;
use crate::Result;

/// What a host must provide for the System API; every name it gets has
/// passed [`ServiceName::parse`] and the allow-list.
pub trait SystemBackend: Send + Sync {
    /// The BIOS (SMBIOS system) serial number.
    fn bios_serial(&self) -> Result<String>;
    /// Display name, start type and state of a service (`NotFound` if it
    /// does not exist).
    fn get_service(&self, name: &ServiceName) -> Result<GetServiceResponse>;
    /// Start a service and wait (bounded) until it runs; already running is
    /// success.
    fn start_service(&self, name: &ServiceName) -> Result<()>;
    /// Stop a service and wait (bounded) until it stopped; already stopped
    /// is success. Running dependent services are stopped first with
    /// `force`, and make the call fail (`FailedPrecondition`) without.
    fn stop_service(&self, name: &ServiceName, force: bool) -> Result<()>;
}

/// The System API over a backend.
pub struct System<B> {
    backend: B,
    policy: ServicePolicy,
    flavor: Flavor,
}

impl<B: SystemBackend> System<B> {
    /// Names follow the rules of `flavor`; `policy` limits Start/Stop.
    pub fn new(backend: B, policy: ServicePolicy, flavor: Flavor) -> Self {
        System {
            backend,
            policy,
            flavor,
        }
    }

    /// The backend (tests inspect fakes through it).
    pub fn backend(&self) -> &B {
        &self.backend
    }

    fn name(&self, name: &str) -> Result<ServiceName> {
        ServiceName::parse(name, self.flavor)
    }
}

impl<B: SystemBackend> SystemApi for System<B> {
    fn get_bios_serial_number(
        &self,
        _: GetBiosSerialNumberRequest,
    ) -> Result<GetBiosSerialNumberResponse> {
        Ok(GetBiosSerialNumberResponse {
            serial_number: self.backend.bios_serial()?,
        })
    }

    fn start_service(&self, req: StartServiceRequest) -> Result<StartServiceResponse> {
        let name = self.name(&req.name)?;
        self.policy.check(&name, "start")?;
        self.backend.start_service(&name)?;
        Ok(StartServiceResponse {})
    }

    fn stop_service(&self, req: StopServiceRequest) -> Result<StopServiceResponse> {
        let name = self.name(&req.name)?;
        self.policy.check(&name, "stop")?;
        self.backend.stop_service(&name, req.force)?;
        Ok(StopServiceResponse {})
    }

    fn get_service(&self, req: GetServiceRequest) -> Result<GetServiceResponse> {
        let name = self.name(&req.name)?;
        self.backend.get_service(&name)
    }
}
