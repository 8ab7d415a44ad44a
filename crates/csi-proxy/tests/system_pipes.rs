//! The System API for real over the named pipe (Windows build; CI runs it
//! under wine, whose services.exe implements the SCM): throwaway services
//! created by the test through the SCM (copies of csi-proxy.exe in service
//! mode, the second depending on the first) are queried, started and
//! stopped through GetService/StartService/StopService, including a stop
//! with a running dependent (refused without force, both stopped with
//! it); the BIOS serial from Win32_BIOS. (The SMB and iSCSI endpoints
//! under wine: `smb_pipes.rs`, `iscsi_pipes.rs`.)
//!
//! Service and pipe names carry this process's id: other test runs may
//! use the same wine prefix at the same time.
#![cfg(windows)]

mod pipes;

use csi_proxy_api::system::v1alpha1 as sys;
use csi_proxy_api::Group;
use csi_proxy_client::ProxyChannel;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tonic::Code;
use windows_service::service::{
    ServiceAccess, ServiceDependency, ServiceErrorControl, ServiceInfo, ServiceStartType,
    ServiceState, ServiceType,
};
use windows_service::service_manager::{ServiceManager, ServiceManagerAccess};

/// Three throwaway services (`base`, `dep` depending on it, and `free`);
/// deleted on drop.
struct Services {
    root: PathBuf,
    base: String,
    dep: String,
    free: String,
}

impl Services {
    /// `tag` keeps the services of parallel tests apart.
    fn create(tag: &str) -> Services {
        let pid = std::process::id();
        let root = std::env::temp_dir().join(format!("csi-proxy-system-svc-{tag}-{pid}"));
        std::fs::create_dir_all(root.join("kubelet")).unwrap();
        let exe = root.join("csi-proxy.exe");
        std::fs::copy(env!("CARGO_BIN_EXE_csi-proxy"), &exe).unwrap();
        let s = Services {
            base: format!("csiproxy{tag}base{pid}"),
            dep: format!("csiproxy{tag}dep{pid}"),
            free: format!("csiproxy{tag}free{pid}"),
            root,
        };
        let m = ServiceManager::local_computer(
            None::<&str>,
            ServiceManagerAccess::CONNECT | ServiceManagerAccess::CREATE_SERVICE,
        )
        .unwrap();
        for (name, deps) in [
            (&s.base, vec![]),
            (&s.dep, vec![s.base.clone()]),
            (&s.free, vec![]),
        ] {
            let args: Vec<OsString> = vec![
                "-windows-service".into(),
                format!("-service-name={name}").into(),
                format!(r"-pipe-prefix=\\.\pipe\csi-proxy-{name}-").into(),
                "-api-groups=filesystem-v1".into(),
                format!("-kubelet-path={}", s.root.join("kubelet").display()).into(),
                "-logtostderr=false".into(),
                format!("-log_file={}", s.root.join(format!("{name}.log")).display()).into(),
            ];
            let info = ServiceInfo {
                name: name.into(),
                display_name: format!("csi-proxy test {name}").into(),
                service_type: ServiceType::OWN_PROCESS,
                start_type: ServiceStartType::OnDemand,
                error_control: ServiceErrorControl::Normal,
                executable_path: exe.clone(),
                launch_arguments: args,
                dependencies: deps
                    .into_iter()
                    .map(|d| ServiceDependency::Service(d.into()))
                    .collect(),
                account_name: None,
                account_password: None,
            };
            m.create_service(&info, ServiceAccess::QUERY_STATUS)
                .unwrap_or_else(|e| panic!("create service {name}: {e}"));
        }
        s
    }

    fn state(&self, name: &str) -> ServiceState {
        let m =
            ServiceManager::local_computer(None::<&str>, ServiceManagerAccess::CONNECT).unwrap();
        m.open_service(name, ServiceAccess::QUERY_STATUS)
            .unwrap()
            .query_status()
            .unwrap()
            .current_state
    }
}

impl Drop for Services {
    fn drop(&mut self) {
        if let Ok(m) = ServiceManager::local_computer(None::<&str>, ServiceManagerAccess::CONNECT) {
            for name in [&self.dep, &self.base, &self.free] {
                if let Ok(s) = m.open_service(
                    name,
                    ServiceAccess::STOP | ServiceAccess::DELETE | ServiceAccess::QUERY_STATUS,
                ) {
                    let _ = s.stop();
                    let deadline = Instant::now() + Duration::from_secs(20);
                    while s
                        .query_status()
                        .map(|x| x.current_state != ServiceState::Stopped)
                        .unwrap_or(false)
                        && Instant::now() < deadline
                    {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    let _ = s.delete();
                }
            }
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

type SysClient = sys::system_client::SystemClient<ProxyChannel>;

async fn bios_serial(c: &mut SysClient) -> String {
    let r = c.get_bios_serial_number(sys::GetBiosSerialNumberRequest {});
    r.await.unwrap().into_inner().serial_number
}

async fn get(c: &mut SysClient, name: &str) -> Result<sys::GetServiceResponse, tonic::Status> {
    c.get_service(sys::GetServiceRequest { name: name.into() })
        .await
        .map(|r| r.into_inner())
}

async fn start(c: &mut SysClient, name: &str) -> Result<(), tonic::Status> {
    c.start_service(sys::StartServiceRequest { name: name.into() })
        .await
        .map(|_| ())
}

async fn stop(c: &mut SysClient, name: &str, force: bool) -> Result<(), tonic::Status> {
    c.stop_service(sys::StopServiceRequest {
        name: name.into(),
        force,
    })
    .await
    .map(|_| ())
}

#[tokio::test]
async fn system_over_named_pipes() {
    let p = pipes::Proxy::start_unique("system", "system", &["-v=10"]);
    let mut c = SysClient::new(p.channel(Group::System, "v1alpha1").await);

    // The BIOS serial from Win32_BIOS (wine fills it from the host's
    // SMBIOS when it has one, else a constant of its own).
    let serial = bios_serial(&mut c).await;
    assert!(
        !serial.contains('\0') && serial.trim() == serial,
        "{serial:?}"
    );
    assert_eq!(serial, bios_serial(&mut c).await);

    // Throwaway services through the SCM.
    let s = Services::create("sys");
    let g = get(&mut c, &s.base).await.unwrap();
    assert_eq!(g.display_name, format!("csi-proxy test {}", s.base));
    assert_eq!(g.start_type, sys::StartType::Manual as i32);
    assert_eq!(g.status, sys::ServiceStatus::Stopped as i32);

    start(&mut c, &s.base).await.unwrap();
    assert_eq!(s.state(&s.base), ServiceState::Running);
    assert_eq!(
        get(&mut c, &s.base).await.unwrap().status,
        sys::ServiceStatus::Running as i32
    );
    // Already running: success.
    start(&mut c, &s.base).await.unwrap();
    start(&mut c, &s.dep).await.unwrap();
    assert_eq!(s.state(&s.dep), ServiceState::Running);

    // A running dependent: refused without force, nothing stopped.
    let e = stop(&mut c, &s.base, false).await.unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(
        e.message().to_lowercase().contains(&s.dep),
        "{}",
        e.message()
    );
    assert_eq!(s.state(&s.base), ServiceState::Running);
    assert_eq!(s.state(&s.dep), ServiceState::Running);
    // With force the dependent is stopped first, then the service.
    stop(&mut c, &s.base, true).await.unwrap();
    assert_eq!(s.state(&s.dep), ServiceState::Stopped);
    assert_eq!(s.state(&s.base), ServiceState::Stopped);
    // Already stopped: success.
    stop(&mut c, &s.base, false).await.unwrap();

    let e = get(&mut c, "csiproxynosuchservice").await.unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e:?}");
    // Hostile names: refused by all three calls before the SCM is asked.
    for bad in ["", "a/b", r"a\b", "svc;x", "svc\n", "$(x)", "svc*"] {
        for (what, r) in [
            ("get", get(&mut c, bad).await.map(|_| ())),
            ("start", start(&mut c, bad).await),
            ("stop", stop(&mut c, bad, true).await),
        ] {
            let e = r.unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument, "{what} {bad:?}: {e:?}");
        }
    }

    assert!(p.log_text().contains("StopService"), "nothing logged");
}

/// The protected set over the pipe (`-service-name`, what the own service
/// depends on, `-protected-services`, `-unprotect-services`, the built-in
/// Windows names): refused by name before the SCM is asked, existing or
/// not, and nothing changes state.
#[tokio::test]
async fn protected_services_over_named_pipes() {
    let s = Services::create("prot");
    let own = format!("-service-name={}", s.dep);
    let extra = format!("-protected-services={}", s.free);
    let p = pipes::Proxy::start_unique(
        "sysprot",
        "system",
        &[&own, &extra, "-unprotect-services=CalicoConfd"],
    );
    let mut c = SysClient::new(p.channel(Group::System, "v1alpha1").await);

    // Every built-in name: Stop refused, whether or not this host has the
    // service, and its state (or absence) unchanged.
    let builtin = csi_proxy_host::system::protect::WINDOWS;
    let before: Vec<_> = service_states(&mut c, builtin).await;
    for b in builtin {
        if b.name == "CalicoConfd" {
            continue;
        }
        for force in [false, true] {
            let e = stop(&mut c, b.name, force).await.unwrap_err();
            assert_eq!(e.code(), Code::PermissionDenied, "{}: {e:?}", b.name);
            assert!(e.message().contains(b.why), "{}", e.message());
        }
    }
    for n in ["WinRM", "TermService", "sshd", "RemoteRegistry"] {
        let e = start(&mut c, n).await.unwrap_err();
        assert_eq!(e.code(), Code::PermissionDenied, "{n}: {e:?}");
    }
    assert_eq!(service_states(&mut c, builtin).await, before);
    // Taken out by -unprotect-services: asked of the SCM (absent here).
    let e = stop(&mut c, "CalicoConfd", false).await.unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e:?}");

    // The own service, what it depends on, and the operator's name.
    for n in [&s.base, &s.dep, &s.free] {
        start(&mut c, n).await.unwrap();
    }
    for (n, why) in [
        (&s.dep, "own service"),
        (&s.base, "depends on it"),
        (&s.free, "-protected-services"),
    ] {
        let e = stop(&mut c, n, true).await.unwrap_err();
        assert_eq!(e.code(), Code::PermissionDenied, "{n}: {e:?}");
        assert!(e.message().contains(why), "{n}: {}", e.message());
        assert!(
            e.message().to_lowercase().contains(n.as_str()),
            "{}",
            e.message()
        );
    }
    for n in [&s.base, &s.dep, &s.free] {
        assert_eq!(s.state(n), ServiceState::Running, "{n} changed");
    }

    // A forced stop that would stop a protected dependent: refused, and
    // nothing stopped.
    let guard = format!("-protected-services={}", s.dep);
    let p2 = pipes::Proxy::start_unique("sysprot2", "system", &[&guard]);
    let mut c2 = SysClient::new(p2.channel(Group::System, "v1alpha1").await);
    let e = stop(&mut c2, &s.base, true).await.unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    assert!(e.message().contains("dependent"), "{}", e.message());
    assert_eq!(s.state(&s.base), ServiceState::Running);
    assert_eq!(s.state(&s.dep), ServiceState::Running);
    // An unprotected throwaway service still stops.
    stop(&mut c2, &s.free, false).await.unwrap();
    assert_eq!(s.state(&s.free), ServiceState::Stopped);
}

/// GetService of each name: its state, or the error code when it does
/// not exist here.
async fn service_states(
    c: &mut SysClient,
    names: &[csi_proxy_host::system::protect::Builtin],
) -> Vec<Result<i32, Code>> {
    let mut out = Vec::new();
    for b in names {
        out.push(get(c, b.name).await.map(|r| r.status).map_err(|e| e.code()));
    }
    out
}
