//! The System API's calls over a pipe, as the SCM tiers make them.

use csi_proxy_api::system::v1alpha1 as sys;
use csi_proxy_client::ProxyChannel;

/// The System API client (v1alpha1, its only version).
pub type SysClient = sys::system_client::SystemClient<ProxyChannel>;

pub async fn bios_serial(c: &mut SysClient) -> String {
    let r = c.get_bios_serial_number(sys::GetBiosSerialNumberRequest {});
    r.await.unwrap().into_inner().serial_number
}

pub async fn get(c: &mut SysClient, name: &str) -> Result<sys::GetServiceResponse, tonic::Status> {
    c.get_service(sys::GetServiceRequest { name: name.into() })
        .await
        .map(|r| r.into_inner())
}

pub async fn start(c: &mut SysClient, name: &str) -> Result<(), tonic::Status> {
    c.start_service(sys::StartServiceRequest { name: name.into() })
        .await
        .map(|_| ())
}

pub async fn stop(c: &mut SysClient, name: &str, force: bool) -> Result<(), tonic::Status> {
    c.stop_service(sys::StopServiceRequest {
        name: name.into(),
        force,
    })
    .await
    .map(|_| ())
}
