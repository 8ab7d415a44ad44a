//! System v1alpha1.

use super::routing;
use crate::dispatch::Routes;
use crate::wire::{request, response, Wire};
use csi_proxy_api::system::v1alpha1;
use csi_proxy_host::system::{self as sys, ServiceStatus, StartType, SystemApi};
use std::sync::Arc;
use tonic::Status;

crate::catalog::system_table!(routing!());

request!([v1alpha1] GetBiosSerialNumberRequest => sys::GetBiosSerialNumberRequest {});
request!([v1alpha1] StartServiceRequest => sys::StartServiceRequest { name });
request!([v1alpha1] StopServiceRequest => sys::StopServiceRequest { name, force });
request!([v1alpha1] GetServiceRequest => sys::GetServiceRequest { name });

response!([v1alpha1] sys::GetBiosSerialNumberResponse => GetBiosSerialNumberResponse { serial_number } exact);
response!([v1alpha1] sys::StartServiceResponse => StartServiceResponse {} exact);
response!([v1alpha1] sys::StopServiceResponse => StopServiceResponse {} exact);
response!([v1alpha1] sys::GetServiceResponse => GetServiceResponse { display_name, start_type, status } exact);

// The service enums in Win32 numbering, which is also the proto numbering.
// Only the API → wire direction is used by the service; the wire → API
// direction rejects unknown values.
impl Wire<i32> for StartType {
    fn wire(self) -> Result<i32, Status> {
        Ok(self.to_i32())
    }
}

impl Wire<StartType> for i32 {
    fn wire(self) -> Result<StartType, Status> {
        StartType::from_i32(self).ok_or_else(|| {
            Status::invalid_argument(format!(
                "start_type {self} is not a known service start type (0..=4)"
            ))
        })
    }
}

impl Wire<i32> for ServiceStatus {
    fn wire(self) -> Result<i32, Status> {
        Ok(self.to_i32())
    }
}

impl Wire<ServiceStatus> for i32 {
    fn wire(self) -> Result<ServiceStatus, Status> {
        ServiceStatus::from_i32(self).ok_or_else(|| {
            Status::invalid_argument(format!(
                "status {self} is not a known service status (0..=7)"
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes::testing::{call, service_for, FakeHost};
    use csi_proxy_api::Group;
    use csi_proxy_host::system::fake::{Call, FakeService};
    use tonic::Code;

    /// The name the OS knows a service by (a systemd unit on Linux).
    fn os_name(name: &str) -> String {
        if cfg!(windows) {
            name.to_string()
        } else {
            format!("{name}.service")
        }
    }

    /// A host whose service manager has `svc`, `a` and `b`, and a BIOS
    /// serial number.
    fn setup() -> (FakeHost, crate::dispatch::VersionedService) {
        let host = FakeHost::new();
        let fake = &host.fakes.system;
        *fake.serial.lock().unwrap() = Some("SN-123".into());
        let mut services = fake.services.lock().unwrap();
        for name in ["svc", "a", "b"] {
            services.insert(
                os_name(name),
                FakeService {
                    display_name: "Display".into(),
                    start_type: StartType::Manual,
                    status: ServiceStatus::Unknown,
                    dependents: Vec::new(),
                },
            );
        }
        drop(services);
        let svc = host.service(Group::System, "v1alpha1");
        (host, svc)
    }

    /// The calls that reached the backend since the last look.
    fn calls(host: &FakeHost) -> Vec<Call> {
        std::mem::take(&mut *host.fakes.system.calls.lock().unwrap())
    }

    #[tokio::test]
    async fn get_service_uses_the_win32_numbering() {
        let (host, svc) = setup();
        for start_type in StartType::ALL {
            for status in ServiceStatus::ALL {
                {
                    let mut services = host.fakes.system.services.lock().unwrap();
                    let s = services.get_mut(&os_name("svc")).unwrap();
                    (s.start_type, s.status) = (start_type, status);
                }
                let resp: v1alpha1::GetServiceResponse = call(
                    &svc,
                    "/v1alpha1.System/GetService",
                    v1alpha1::GetServiceRequest { name: "svc".into() },
                )
                .await
                .unwrap();
                assert_eq!(resp.display_name, "Display");
                // The proto enum agrees with the host enum by name and number.
                let wire_start = v1alpha1::StartType::try_from(resp.start_type).unwrap();
                let wire_status = v1alpha1::ServiceStatus::try_from(resp.status).unwrap();
                assert_eq!(
                    wire_start.as_str_name().replace('_', ""),
                    format!("{start_type:?}").to_uppercase()
                );
                assert_eq!(
                    wire_status.as_str_name().replace('_', ""),
                    format!("{status:?}").to_uppercase()
                );
                // And back.
                assert_eq!(
                    Wire::<StartType>::wire(resp.start_type).unwrap(),
                    start_type
                );
                assert_eq!(Wire::<ServiceStatus>::wire(resp.status).unwrap(), status);
                assert_eq!(calls(&host), vec![Call::Get(os_name("svc"))]);
            }
        }
        assert_eq!(v1alpha1::ServiceStatus::Running as i32, 4);
        assert_eq!(v1alpha1::StartType::Disabled as i32, 4);
    }

    #[test]
    fn unknown_enum_values_are_rejected_from_the_wire() {
        for bad in [-1, 5, 100] {
            assert_eq!(
                Wire::<StartType>::wire(bad).unwrap_err().code(),
                Code::InvalidArgument
            );
        }
        for bad in [-1, 8, 100] {
            assert_eq!(
                Wire::<ServiceStatus>::wire(bad).unwrap_err().code(),
                Code::InvalidArgument
            );
        }
    }

    #[tokio::test]
    async fn the_other_methods() {
        let (host, svc) = setup();
        let resp: v1alpha1::GetBiosSerialNumberResponse = call(
            &svc,
            "/v1alpha1.System/GetBIOSSerialNumber",
            v1alpha1::GetBiosSerialNumberRequest {},
        )
        .await
        .unwrap();
        assert_eq!(resp.serial_number, "SN-123");
        assert_eq!(calls(&host), vec![Call::BiosSerial]);
        let _: v1alpha1::StartServiceResponse = call(
            &svc,
            "/v1alpha1.System/StartService",
            v1alpha1::StartServiceRequest { name: "a".into() },
        )
        .await
        .unwrap();
        assert_eq!(calls(&host), vec![Call::Start(os_name("a"))]);
        for force in [true, false] {
            let _: v1alpha1::StopServiceResponse = call(
                &svc,
                "/v1alpha1.System/StopService",
                v1alpha1::StopServiceRequest {
                    name: "b".into(),
                    force,
                },
            )
            .await
            .unwrap();
            assert_eq!(calls(&host), vec![Call::Stop(os_name("b"), force)]);
        }
    }

    #[tokio::test]
    async fn no_backend_answers_unimplemented() {
        let svc = service_for(Group::System, "v1alpha1", |h| {
            h.system = Arc::new(csi_proxy_host::system::NoSystemBackend)
        });
        let err = call::<_, v1alpha1::GetBiosSerialNumberResponse>(
            &svc,
            "/v1alpha1.System/GetBIOSSerialNumber",
            v1alpha1::GetBiosSerialNumberRequest {},
        )
        .await
        .unwrap_err();
        assert_eq!(err.code(), Code::Unimplemented);
        assert!(
            err.message().contains("system API: GetBIOSSerialNumber"),
            "{}",
            err.message()
        );
    }
}
