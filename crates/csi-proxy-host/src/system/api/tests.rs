//! The protected set through the System API over the recording fake: what
//! reaches the backend and what is refused before it.

use super::*;
use crate::system::fake::{Call, RecordingSystem};
use crate::system::{ServiceStatus, StartServiceRequest, StopServiceRequest};

type Api = System<Arc<RecordingSystem>>;

/// Running services: `kubelet`, `base` (the kubelet depends on it), the
/// throwaway `free` (with its dependent `freedep`), `csinode` (depends on
/// `helper`) and `iscsid`.
fn api(flavor: Flavor, protection: Protection) -> (Api, Arc<RecordingSystem>) {
    let fake = Arc::new(
        RecordingSystem::new()
            .with_service("kubelet", &[])
            .with_service("base", &["kubelet"])
            .with_service("free", &["freedep"])
            .with_service("freedep", &[])
            .with_service("csinode", &[])
            .with_service("helper", &["csinode"])
            .with_service("iscsid", &[]),
    );
    for n in [
        "kubelet", "base", "free", "freedep", "csinode", "helper", "iscsid",
    ] {
        fake.services.lock().unwrap().get_mut(n).unwrap().status = ServiceStatus::Running;
    }
    let api =
        System::new(fake.clone(), ServicePolicy::allow_all(), flavor).with_protection(protection);
    (api, fake)
}

fn stop(api: &Api, name: &str, force: bool) -> Result<StopServiceResponse> {
    api.stop_service(StopServiceRequest {
        name: name.into(),
        force,
    })
}

fn status(fake: &RecordingSystem, name: &str) -> ServiceStatus {
    fake.services.lock().unwrap()[name].status
}

#[test]
fn protected_names_are_refused_before_any_lookup_existing_or_not() {
    let (api, fake) = api(Flavor::Windows, Protection::builtin(Flavor::Windows));
    // `kubelet` exists in the fake, `containerd` does not: same answer.
    for n in ["kubelet", "containerd", "WINMGMT", "LanmanWorkstation"] {
        for force in [false, true] {
            let e = stop(&api, n, force).unwrap_err();
            assert!(matches!(e, Error::PermissionDenied(_)), "{n}: {e}");
        }
    }
    assert!(fake.calls().is_empty(), "{:?}", fake.calls());
    assert_eq!(status(&fake, "kubelet"), ServiceStatus::Running);
    // A remote-access service is refused a start too.
    let e = api
        .start_service(StartServiceRequest {
            name: "TermService".into(),
        })
        .unwrap_err();
    assert!(matches!(e, Error::PermissionDenied(_)), "{e}");
    assert!(fake.calls().is_empty(), "{:?}", fake.calls());
    // Everything else still works.
    stop(&api, "free", true).unwrap();
    assert_eq!(status(&fake, "free"), ServiceStatus::Stopped);
}

#[test]
fn a_forced_stop_never_takes_a_protected_dependent_down() {
    let (api, fake) = api(Flavor::Windows, Protection::builtin(Flavor::Windows));
    // `base` is not protected, but stopping it with force would stop the
    // kubelet that depends on it: refused, nothing stopped.
    let e = stop(&api, "base", true).unwrap_err();
    assert!(matches!(e, Error::PermissionDenied(_)), "{e}");
    assert!(e.to_string().contains("kubelet"), "{e}");
    assert!(e.to_string().contains("as a dependent"), "{e}");
    assert_eq!(status(&fake, "base"), ServiceStatus::Running);
    assert_eq!(status(&fake, "kubelet"), ServiceStatus::Running);
    // Without force too: a stopped kubelet could be started before the
    // stop runs.
    let e = stop(&api, "base", false).unwrap_err();
    assert!(matches!(e, Error::PermissionDenied(_)), "{e}");
    // Without force, running unprotected dependents: FailedPrecondition.
    let e = stop(&api, "free", false).unwrap_err();
    assert!(matches!(e, Error::FailedPrecondition(_)), "{e}");
}

/// The bypass: a forced stop of a dependency of a dependency of the
/// kubelet stopped it (only direct dependents were checked); and starting
/// a service started what it depends on unchecked.
#[test]
fn chains_are_followed_transitively_both_ways() {
    let fake = Arc::new(
        RecordingSystem::new()
            .with_service("kubelet", &[])
            .with_service("mid", &["kubelet"])
            .with_service("low", &["mid"])
            .with_service("WinRM", &["wants-winrm"])
            .with_service("wants-winrm", &[]),
    );
    for n in ["kubelet", "mid", "low"] {
        fake.services.lock().unwrap().get_mut(n).unwrap().status = ServiceStatus::Running;
    }
    let api = System::new(fake.clone(), ServicePolicy::allow_all(), Flavor::Windows)
        .with_protection(Protection::builtin(Flavor::Windows));
    for force in [true, false] {
        let e = stop(&api, "low", force).unwrap_err();
        assert!(matches!(e, Error::PermissionDenied(_)), "{e}");
        assert!(e.to_string().contains("kubelet"), "{e}");
    }
    assert_eq!(status(&fake, "kubelet"), ServiceStatus::Running);
    assert_eq!(status(&fake, "low"), ServiceStatus::Running);
    // Starting what needs WinRM would start WinRM.
    let e = api
        .start_service(StartServiceRequest {
            name: "wants-winrm".into(),
        })
        .unwrap_err();
    assert!(matches!(e, Error::PermissionDenied(_)), "{e}");
    assert!(e.to_string().contains("it would start"), "{e}");
    assert!(!fake
        .calls()
        .iter()
        .any(|c| matches!(c, Call::Stop(..) | Call::Start(..))));
}

#[test]
fn the_own_service_and_what_it_depends_on_are_protected() {
    let p = Protection::builtin(Flavor::Windows)
        .own_service("csinode")
        .unwrap();
    let (api, fake) = api(Flavor::Windows, p);
    let e = stop(&api, "csinode", false).unwrap_err();
    assert!(e.to_string().contains("own service"), "{e}");
    // The dependency closure is read from the service manager once.
    let e = stop(&api, "helper", false).unwrap_err();
    assert!(matches!(e, Error::PermissionDenied(_)), "{e}");
    assert!(e.to_string().contains("depends on it"), "{e}");
    stop(&api, "freedep", false).unwrap();
    assert_eq!(
        fake.calls(),
        vec![
            Call::Dependencies("csinode".into()),
            Call::Dependencies("helper".into()),
            Call::Stop("freedep".into(), false)
        ]
    );
    assert_eq!(status(&fake, "helper"), ServiceStatus::Running);
}

#[test]
fn a_failure_to_read_the_dependencies_fails_closed() {
    // The fake answers NotFound for an own service it does not have (a
    // foreground run): nothing to add, calls go on.
    let p = Protection::none(Flavor::Windows)
        .own_service("notinstalled")
        .unwrap();
    let (api, _) = api(Flavor::Windows, p);
    stop(&api, "free", true).unwrap();
}

#[test]
fn the_allow_list_still_applies_after_protection() {
    let (api, fake) = api(Flavor::Windows, Protection::builtin(Flavor::Windows));
    let api = System {
        policy: ServicePolicy::allow_only(["free", "kubelet"], Flavor::Windows).unwrap(),
        ..api
    };
    // Allowed by the list, refused by protection.
    let e = stop(&api, "kubelet", false).unwrap_err();
    assert!(e.to_string().contains("protected"), "{e}");
    // Not protected, not on the list.
    let e = stop(&api, "freedep", false).unwrap_err();
    assert!(e.to_string().contains("-allowed-services"), "{e}");
    stop(&api, "free", true).unwrap();
    assert_eq!(fake.calls(), vec![Call::Stop("free".into(), true)]);
}

#[test]
fn the_iscsi_daemon_stops_only_without_sessions() {
    let sessions = Arc::new(Mutex::new(vec![
        "iqn.2003-01.org.example:disk1 at 192.0.2.10:3260".to_string(),
    ]));
    let s = sessions.clone();
    // The fake keys services by OS name: systemd units here.
    let fake2 = Arc::new(RecordingSystem::new().with_service("iscsid.service", &[]));
    fake2
        .services
        .lock()
        .unwrap()
        .get_mut("iscsid.service")
        .unwrap()
        .status = ServiceStatus::Running;
    let api = System::new(fake2.clone(), ServicePolicy::allow_all(), Flavor::Unix)
        .with_iscsi_sessions(Arc::new(move || s.lock().unwrap().clone()));
    let e = stop(&api, "iscsid", false).unwrap_err();
    assert!(matches!(e, Error::FailedPrecondition(_)), "{e}");
    assert!(
        e.to_string().contains("iqn.2003-01.org.example:disk1"),
        "{e}"
    );
    assert!(fake2.calls().is_empty(), "{:?}", fake2.calls());
    sessions.lock().unwrap().clear();
    stop(&api, "iscsid", false).unwrap();
    assert_eq!(
        fake2.calls(),
        vec![Call::Stop("iscsid.service".into(), false)]
    );
}

#[test]
fn a_caller_list_narrows_the_allow_list_and_never_widens_it() {
    use crate::system::narrow;
    let (api, fake) = api(Flavor::Windows, Protection::none(Flavor::Windows));
    let api = System {
        policy: ServicePolicy::allow_only(["free", "base"], Flavor::Windows).unwrap(),
        ..api
    };
    let only_base = Arc::new(ServicePolicy::allow_only(["base", "dep"], Flavor::Windows).unwrap());
    narrow::run(Some(only_base), || {
        let e = stop(&api, "free", false).unwrap_err();
        assert!(matches!(e, Error::PermissionDenied(_)), "{e}");
        assert!(e.to_string().contains("caller policy"), "{e}");
        // On the caller's list, not on -allowed-services: still refused.
        let e = stop(&api, "dep", false).unwrap_err();
        assert!(e.to_string().contains("-allowed-services"), "{e}");
        stop(&api, "base", true).unwrap();
    });
    stop(&api, "free", true).unwrap();
    assert_eq!(
        fake.calls(),
        vec![
            Call::Stop("base".into(), true),
            Call::Stop("free".into(), true)
        ]
    );
}

/// A backend where a dependent appears between the plan and the stop.
struct LateDependent(Arc<RecordingSystem>);

impl SystemBackend for LateDependent {
    fn bios_serial(&self) -> Result<String> {
        self.0.bios_serial()
    }
    fn get_service(&self, name: &ServiceName) -> Result<GetServiceResponse> {
        self.0.get_service(name)
    }
    fn start_service(&self, name: &ServiceName) -> Result<()> {
        self.0.start_service(name)
    }
    fn stop_service(&self, name: &ServiceName, force: bool, guard: DependentGuard) -> Result<()> {
        {
            let mut s = self.0.services.lock().unwrap();
            s.get_mut("free").unwrap().dependents.push("late".into());
            let mut late = s["freedep"].clone();
            late.dependents.clear();
            s.insert("late".into(), late);
        }
        self.0.stop_service(name, force, guard)
    }
    fn dependencies(&self, name: &str) -> Result<Vec<String>> {
        self.0.dependencies(name)
    }
    fn plan(&self, name: &ServiceName, op: Op) -> Result<Plan> {
        self.0.plan(name, op)
    }
}

#[test]
fn a_dependent_the_plan_did_not_hold_is_refused() {
    // The fake's names are Windows names.
    {
        let flavor = Flavor::Windows;
        let (_, fake) = api(flavor, Protection::none(flavor));
        let api = System::new(
            LateDependent(fake.clone()),
            ServicePolicy::allow_all(),
            flavor,
        )
        .with_protection(Protection::none(flavor));
        let e = api
            .stop_service(StopServiceRequest {
                name: "free".into(),
                force: true,
            })
            .unwrap_err();
        let m = e.to_string();
        assert!(matches!(e, Error::PermissionDenied(_)), "{m}");
        assert!(m.contains("stop service") && m.contains("late"), "{m}");
        assert!(m.contains("did not hold"), "{m}");
        assert_eq!(status(&fake, "late"), ServiceStatus::Running);
        assert_eq!(status(&fake, "free"), ServiceStatus::Running);
    }
}

/// A backend that cannot read dependencies.
struct NoDependencies(Arc<RecordingSystem>);

impl SystemBackend for NoDependencies {
    fn bios_serial(&self) -> Result<String> {
        self.0.bios_serial()
    }
    fn get_service(&self, name: &ServiceName) -> Result<GetServiceResponse> {
        self.0.get_service(name)
    }
    fn start_service(&self, name: &ServiceName) -> Result<()> {
        self.0.start_service(name)
    }
    fn stop_service(&self, name: &ServiceName, force: bool, guard: DependentGuard) -> Result<()> {
        self.0.stop_service(name, force, guard)
    }
    fn dependencies(&self, _: &str) -> Result<Vec<String>> {
        Err(Error::Internal("the bus went away".into()))
    }
    fn plan(&self, name: &ServiceName, op: Op) -> Result<Plan> {
        self.0.plan(name, op)
    }
}

#[test]
fn a_failed_read_of_the_own_dependencies_names_the_call() {
    let flavor = Flavor::Windows;
    let (_, fake) = api(flavor, Protection::none(flavor));
    let api = System::new(
        NoDependencies(fake.clone()),
        ServicePolicy::allow_all(),
        flavor,
    )
    .with_protection(Protection::none(flavor).own_service("self").unwrap());
    let e = api
        .start_service(StartServiceRequest {
            name: "free".into(),
        })
        .unwrap_err();
    let m = e.to_string();
    assert!(matches!(e, Error::FailedPrecondition(_)), "{m}");
    assert!(m.starts_with("start service \"free\": refused"), "{m}");
    assert!(
        m.contains("\"self\"") && m.contains("the bus went away"),
        "{m}"
    );
    assert!(!fake.calls().iter().any(|c| matches!(c, Call::Start(_))));
}
