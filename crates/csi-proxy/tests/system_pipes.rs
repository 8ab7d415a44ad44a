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
mod scm;

use csi_proxy_api::system::v1alpha1 as sys;
use csi_proxy_api::Group;
use scm::system::{bios_serial, get, start, stop, SysClient};
use scm::Throwaway;
use tonic::Code;
use windows_service::service::ServiceState;

/// Three throwaway services: `base`, `dep` depending on it, and `free`.
fn three(tag: &str) -> Throwaway {
    Throwaway::create(tag, &[("base", &[]), ("dep", &["base"]), ("free", &[])])
}

#[tokio::test]
async fn system_over_named_pipes() {
    let p = pipes::Proxy::start_unique("system", "system", &["-v=10", "-allowed-services=*"]);
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
    let s = three("sys");
    let (base, dep) = (s.name("base"), s.name("dep"));
    let g = get(&mut c, base).await.unwrap();
    assert_eq!(g.display_name, format!("csi-proxy test {}", base));
    assert_eq!(g.start_type, sys::StartType::Manual as i32);
    assert_eq!(g.status, sys::ServiceStatus::Stopped as i32);

    start(&mut c, base).await.unwrap();
    assert_eq!(s.state(base), ServiceState::Running);
    assert_eq!(
        get(&mut c, base).await.unwrap().status,
        sys::ServiceStatus::Running as i32
    );
    // Already running: success.
    start(&mut c, base).await.unwrap();
    start(&mut c, dep).await.unwrap();
    assert_eq!(s.state(dep), ServiceState::Running);

    // A running dependent: refused without force, nothing stopped.
    let e = stop(&mut c, base, false).await.unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(e.message().to_lowercase().contains(dep), "{}", e.message());
    assert_eq!(s.state(base), ServiceState::Running);
    assert_eq!(s.state(dep), ServiceState::Running);
    // With force the dependent is stopped first, then the service.
    stop(&mut c, base, true).await.unwrap();
    assert_eq!(s.state(dep), ServiceState::Stopped);
    assert_eq!(s.state(base), ServiceState::Stopped);
    // Already stopped: success.
    stop(&mut c, base, false).await.unwrap();

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
    let s = three("prot");
    let (base, dep, free) = (s.name("base"), s.name("dep"), s.name("free"));
    let own = format!("-service-name={}", dep);
    let extra = format!("-protected-services={}", free);
    let p = pipes::Proxy::start_unique(
        "sysprot",
        "system",
        &[
            &own,
            &extra,
            "-unprotect-services=CalicoConfd",
            "-allowed-services=*",
        ],
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
    for n in [base, dep, free] {
        start(&mut c, n).await.unwrap();
    }
    for (n, why) in [
        (dep, "own service"),
        (base, "depends on it"),
        (free, "-protected-services"),
    ] {
        let e = stop(&mut c, n, true).await.unwrap_err();
        assert_eq!(e.code(), Code::PermissionDenied, "{n}: {e:?}");
        assert!(e.message().contains(why), "{n}: {}", e.message());
        assert!(e.message().to_lowercase().contains(n), "{}", e.message());
    }
    for n in [base, dep, free] {
        assert_eq!(s.state(n), ServiceState::Running, "{n} changed");
    }

    // A forced stop that would stop a protected dependent: refused, and
    // nothing stopped.
    let guard = format!("-protected-services={}", dep);
    let p2 = pipes::Proxy::start_unique("sysprot2", "system", &[&guard, "-allowed-services=*"]);
    let mut c2 = SysClient::new(p2.channel(Group::System, "v1alpha1").await);
    let e = stop(&mut c2, base, true).await.unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    assert!(e.message().contains("dependent"), "{}", e.message());
    assert_eq!(s.state(base), ServiceState::Running);
    assert_eq!(s.state(dep), ServiceState::Running);
    // An unprotected throwaway service still stops.
    stop(&mut c2, free, false).await.unwrap();
    assert_eq!(s.state(free), ServiceState::Stopped);
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
