//! The real-Windows tier, ResizeVolume without the defragsvc service:
//! `MSFT_Partition.GetSupportedSize` needs it, and nodes often have it
//! disabled; the proxy computes the maximum from the disk's layout
//! instead. The service is stopped and disabled for the test and put back
//! as it was after it. Under wine (no `MSFT_*` classes) only the skip is
//! reported.
#![cfg(windows)]

mod pipes;
mod real_windows;

use csi_proxy_client::Group;
use real_windows::calls::{eventually, Calls};
use real_windows::disks::{self, BASIC_DATA};
use real_windows::require;
use real_windows::vhd::{Vhd, MIB};
use windows_service::service::{ServiceAccess, ServiceState};
use windows_service::service_manager::{ServiceManager, ServiceManagerAccess};
use windows_sys::Win32::System::Services::{
    ChangeServiceConfigW, SERVICE_DISABLED, SERVICE_NO_CHANGE,
};

/// defragsvc stopped and disabled while this lives; its start type is put
/// back on drop.
struct NoDefrag {
    service: windows_service::service::Service,
    start_type: u32,
}

fn set_start_type(s: &windows_service::service::Service, start_type: u32) {
    // SAFETY: a service handle opened with SERVICE_CHANGE_CONFIG; every
    // other field is SERVICE_NO_CHANGE or null (left as it is).
    let ok = unsafe {
        ChangeServiceConfigW(
            s.raw_handle(),
            SERVICE_NO_CHANGE,
            start_type,
            SERVICE_NO_CHANGE,
            std::ptr::null(),
            std::ptr::null(),
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_ne!(
        ok,
        0,
        "ChangeServiceConfigW: {}",
        std::io::Error::last_os_error()
    );
}

impl NoDefrag {
    fn new() -> NoDefrag {
        let m =
            ServiceManager::local_computer(None::<&str>, ServiceManagerAccess::CONNECT).unwrap();
        let service = m
            .open_service(
                "defragsvc",
                ServiceAccess::QUERY_STATUS
                    | ServiceAccess::QUERY_CONFIG
                    | ServiceAccess::CHANGE_CONFIG
                    | ServiceAccess::STOP,
            )
            .unwrap();
        let start_type = service.query_config().unwrap().start_type.to_raw();
        set_start_type(&service, SERVICE_DISABLED);
        if service.query_status().unwrap().current_state != ServiceState::Stopped {
            let _ = service.stop();
        }
        let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while service.query_status().unwrap().current_state != ServiceState::Stopped {
            assert!(std::time::Instant::now() < until, "defragsvc did not stop");
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        NoDefrag {
            service,
            start_type,
        }
    }
}

impl Drop for NoDefrag {
    fn drop(&mut self) {
        set_start_type(&self.service, self.start_type);
    }
}

#[tokio::test]
async fn resize_to_the_maximum_with_defragsvc_disabled() {
    let p = pipes::Proxy::start_unique("rw-resize-nodefrag", "disk,volume", &[]);
    let mut c = Calls::new(
        p.channel(Group::Disk, "v1").await,
        p.channel(Group::Volume, "v2alpha1").await,
    );
    let Some(_w) = require("MSFT_Partition.Resize with defragsvc stopped and disabled") else {
        return;
    };
    let mut v = Vhd::create(&p.root, "nodefrag", 256 * MIB).unwrap();
    let vol = c.formatted_volume(v.disk()).await;
    let data = |n: u32| {
        disks::layout(n)
            .unwrap()
            .partitions
            .into_iter()
            .find(|p| p.gpt_type == Some(BASIC_DATA))
            .unwrap()
    };
    let len0 = data(v.disk()).length;
    let _off = NoDefrag::new();
    let n = v.grow(512 * MIB).unwrap();
    c.rescan().await.unwrap();
    let vol = eventually(30, "the volume back after the disk grew", || {
        let mut c = c.volume.clone();
        let _ = &vol;
        async move {
            let r = c
                .list_volumes_on_disk(csi_proxy_api::volume::v2alpha1::ListVolumesOnDiskRequest {
                    disk_number: n,
                    partition_number: 0,
                })
                .await
                .ok()?;
            r.into_inner().volume_ids.into_iter().next()
        }
    })
    .await;
    c.resize(&vol, 0).await.unwrap();
    let grown = data(n);
    assert!(
        grown.length >= len0 + 200 * MIB,
        "grown: {len0} -> {}",
        grown.length
    );
    // At the maximum: the next resize to 0 changes nothing.
    c.resize(&vol, 0).await.unwrap();
    assert_eq!(data(n).length, grown.length);
}
