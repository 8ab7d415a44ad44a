//! The boundary with hosts the options cannot make: a panic in a host
//! operation is answered Internal through the extern functions.

#[path = "../tests/ffi/mod.rs"]
mod ffi;

use crate::library::Library;
use crate::CsiProxyHost;
use csi_proxy_host::path::{Flavor, PathPolicy};
use csi_proxy_host::system::{DependentGuard, ServiceName, ServicePolicy, System, SystemBackend};
use csi_proxy_host::Host;
use std::sync::Arc;

/// A system backend whose every operation panics.
struct Panicking;

impl SystemBackend for Panicking {
    fn bios_serial(&self) -> csi_proxy_host::Result<String> {
        panic!("bios_serial panicked")
    }
    fn get_service(
        &self,
        _: &ServiceName,
    ) -> csi_proxy_host::Result<csi_proxy_host::system::GetServiceResponse> {
        panic!("get_service panicked")
    }
    fn start_service(&self, _: &ServiceName) -> csi_proxy_host::Result<()> {
        panic!("start_service panicked")
    }
    fn stop_service(
        &self,
        _: &ServiceName,
        _: bool,
        _: DependentGuard,
    ) -> csi_proxy_host::Result<()> {
        panic!("stop_service panicked")
    }
    fn dependencies(&self, _: &str) -> csi_proxy_host::Result<Vec<String>> {
        panic!("dependencies panicked")
    }
    fn plan(
        &self,
        _: &ServiceName,
        _: csi_proxy_host::system::protect::Op,
    ) -> csi_proxy_host::Result<csi_proxy_host::system::plan::Plan> {
        panic!("plan panicked")
    }
}

#[test]
fn a_panicking_operation_answers_internal_and_the_host_keeps_serving() {
    let root = if cfg!(windows) { r"C:\k" } else { "/k" };
    let (mut host, _) = Host::fake(PathPolicy::new(Flavor::NATIVE, [root]).unwrap());
    host.system = Arc::new(System::new(
        Panicking,
        ServicePolicy::allow_all(),
        Flavor::NATIVE,
    ));
    // SAFETY: a fresh host of the library, freed once when dropped.
    let handle = unsafe { ffi::Lib::from_raw(CsiProxyHost::boxed(Library::over(&host))) };
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let (code, message) = handle.call("system", "GetBIOSSerialNumber", &[]);
    std::panic::set_hook(previous);
    assert_eq!(code, 13, "{}", String::from_utf8_lossy(&message));
    assert_eq!(message, b"panic in the host operation");
    // The same handle still answers (the fake filesystem group).
    let (code, _) = handle.call("filesystem", "PathExists", &[]);
    assert_eq!(code, 3, "an empty path is refused, not a panic");
}

/// A fake host whose disk group is the storage layer over fake disks.
fn fake_storage_host() -> ffi::Lib {
    let root = if cfg!(windows) { r"C:\k" } else { "/k" };
    let policy = PathPolicy::new(Flavor::NATIVE, [root]).unwrap();
    let (mut host, _) = Host::fake(policy.clone());
    let disks = csi_proxy_host::storage::fake::FakeStorage::new();
    disks.add_disk(2, 1 << 30, "p83-2");
    let storage = Arc::new(csi_proxy_host::storage::Storage::new(policy, disks));
    host.disk = storage.clone();
    host.volume = storage;
    // SAFETY: a fresh host of the library, freed once when dropped.
    unsafe { ffi::Lib::from_raw(CsiProxyHost::boxed(Library::over(&host))) }
}

#[test]
fn the_finer_disk_steps_are_operations_of_the_disk_group() {
    use crate::extras::{BoolResponse, DiskNumberRequest};
    use prost::Message;
    let handle = fake_storage_host();
    let disk = |n| DiskNumberRequest { disk_number: n }.encode_to_vec();
    let ask = |method: &str, n: u32| {
        let (code, body) = handle.call("disk", method, &disk(n));
        assert_eq!(code, 0, "{method}: {}", String::from_utf8_lossy(&body));
        BoolResponse::decode(&body[..]).unwrap().value
    };
    assert!(!ask("IsDiskInitialized", 2));
    assert!(!ask("BasicPartitionsExist", 2));
    // A raw disk gets no partition: it must be initialised first.
    let (code, message) = handle.call("disk", "CreateBasicPartition", &disk(2));
    assert_eq!(code, 9, "{}", String::from_utf8_lossy(&message));
    assert_eq!(handle.call("disk", "InitializeDisk", &disk(2)), (0, vec![]));
    assert!(ask("IsDiskInitialized", 2));
    assert!(!ask("BasicPartitionsExist", 2));
    assert_eq!(
        handle.call("disk", "CreateBasicPartition", &disk(2)),
        (0, vec![])
    );
    assert!(ask("BasicPartitionsExist", 2));
    // Again: nothing more is created.
    assert_eq!(
        handle.call("disk", "CreateBasicPartition", &disk(2)),
        (0, vec![])
    );
    // The partition's volume is there (v2alpha1 ListVolumesOnDisk: disk 1).
    let (code, body) = handle.call("volume", "ListVolumesOnDisk", &disk(2));
    assert_eq!(code, 0);
    let listed =
        csi_proxy_api::volume::v2alpha1::ListVolumesOnDiskResponse::decode(&body[..]).unwrap();
    assert_eq!(listed.volume_ids.len(), 1);
    // A disk that does not exist, a request that does not decode.
    assert_eq!(handle.call("disk", "IsDiskInitialized", &disk(9)).0, 5);
    assert_eq!(handle.call("disk", "InitializeDisk", b"\x08").0, 3);
    // The extra operations answer under the bare group name only.
    assert_eq!(handle.call("disk/v1", "InitializeDisk", &disk(2)).0, 12);
}
