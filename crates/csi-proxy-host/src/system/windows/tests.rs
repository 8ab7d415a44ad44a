//! The SCM wrappers against the real OS (CI runs them under wine).

use super::scm;
use super::*;
use crate::system::scm_rules;

/// One test of the service manager at a time. Under wine, two threads of
/// one process calling the service manager at once sometimes get "Invalid
/// handle" from OpenSCManagerW/CreateServiceW, an incomplete dependency
/// scan, or a hang (about 1 run in 5 with the two tests below in parallel,
/// 0 in 12 one after the other): wine's client side of the service manager,
/// not the code under test. Real Windows runs them the same way.
static SCM: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn config_lists_dependencies_and_the_scan_finds_dependents() {
    let _one = SCM.lock().unwrap_or_else(|e| e.into_inner());
    let pid = std::process::id();
    let base = format!("csiproxyunitbase{pid}");
    let dep = format!("csiproxyunitdep{pid}");
    let hb = scm::testing::create(&base, r"C:\windows\system32\notepad.exe", &[]).unwrap();
    let hd = scm::testing::create(&dep, r"C:\windows\system32\notepad.exe", &[&base]).unwrap();
    let (start, display, mut deps) = scm::config(&hd).unwrap();
    // Wine leaves lpDependencies empty; the registry has them.
    if deps.is_empty() {
        deps = super::registry::dependencies(&dep);
    }
    let (_, _, none) = scm::config(&hb).unwrap();
    let all = scm::Enumerator::open().unwrap().all_services().unwrap();
    scm::testing::delete(&hd);
    scm::testing::delete(&hb);
    assert_eq!(start, 3);
    assert_eq!(display, dep);
    assert_eq!(deps, vec![base.clone()]);
    assert!(none.is_empty());
    assert!(all.iter().any(|s| s.eq_ignore_ascii_case(&dep)), "{all:?}");
    let mut order = Vec::new();
    collect_dependents(
        &base,
        &[
            (dep.clone(), vec![base.clone()]),
            ("x".into(), vec![dep.clone()]),
        ],
        &mut order,
        0,
    );
    assert_eq!(order, vec!["x".to_string(), dep]);
}

/// A display name resolves to its service key name, and the plan of a
/// stop names both and finds the dependent (through the scan under wine).
#[test]
fn display_names_resolve_to_key_names_and_plans_find_dependents() {
    let _one = SCM.lock().unwrap_or_else(|e| e.into_inner());
    let pid = std::process::id();
    let base = format!("csiproxyplanbase{pid}");
    let dep = format!("csiproxyplandep{pid}");
    let hb = scm::testing::create(&base, r"C:\windows\system32\notepad.exe", &[]).unwrap();
    let hd = scm::testing::create(&dep, r"C:\windows\system32\notepad.exe", &[&base]).unwrap();
    let m = scm::open_manager().unwrap();
    let (_, display, _) = scm::config(&hb).unwrap();
    let resolved = scm::key_name(&m, &display);
    let missing = scm::key_name(&m, "csi-proxy no such display name");
    let sys = WindowsSystem::new(Arc::new(WmiWorker::new(CIMV2_NAMESPACE)));
    let name = ServiceName::parse(&base, crate::path::Flavor::Windows).unwrap();
    let plan = sys.plan(&name, Op::Stop);
    let start_plan = sys.plan(
        &ServiceName::parse(&dep, crate::path::Flavor::Windows).unwrap(),
        Op::Start,
    );
    scm::testing::delete(&hd);
    scm::testing::delete(&hb);
    assert!(resolved.unwrap().eq_ignore_ascii_case(&base));
    assert!(missing.is_err());
    let plan = plan.unwrap();
    assert!(plan.target[0].eq_ignore_ascii_case(&base), "{plan:?}");
    assert!(
        plan.stopped
            .iter()
            .any(|u| u.names[0].eq_ignore_ascii_case(&dep)),
        "{plan:?}"
    );
    let start_plan = start_plan.unwrap();
    assert!(
        start_plan
            .started
            .iter()
            .any(|u| u.names[0].eq_ignore_ascii_case(&base)),
        "{start_plan:?}"
    );
}

/// A `+Group` dependency: the start plan takes in every member of the
/// load-order group (the SCM starts them all), found by the group each
/// service has (`lpLoadOrderGroup`, or the registry's `Group` under wine).
#[test]
fn a_start_plan_expands_group_dependencies_to_their_members() {
    let _one = SCM.lock().unwrap_or_else(|e| e.into_inner());
    let pid = std::process::id();
    let group = format!("csiproxygroup{pid}");
    let member = format!("csiproxygroupmember{pid}");
    let other = format!("csiproxygroupother{pid}");
    let svc = format!("csiproxygroupuser{pid}");
    let exe = r"C:\windows\system32\notepad.exe";
    let own = windows_sys::Win32::System::Services::SERVICE_WIN32_OWN_PROCESS;
    let hm = scm::testing::create_with(&member, exe, &[], Some(&group), own).unwrap();
    let ho = scm::testing::create_with(&other, exe, &[], Some("csiproxyelsewhere"), own).unwrap();
    let plus = format!("+{group}");
    let hs = scm::testing::create(&svc, exe, &[&plus]).unwrap();
    let sys = WindowsSystem::new(Arc::new(WmiWorker::new(CIMV2_NAMESPACE)));
    let plan = sys.plan(
        &ServiceName::parse(&svc, crate::path::Flavor::Windows).unwrap(),
        Op::Start,
    );
    let deps = sys.dependencies(&svc);
    for h in [&hs, &hm, &ho] {
        scm::testing::delete(h);
    }
    let plan = plan.unwrap();
    let started: Vec<String> = plan.started.iter().map(|u| u.names[0].clone()).collect();
    assert!(
        started.iter().any(|s| s.eq_ignore_ascii_case(&member)),
        "{plan:?}"
    );
    assert!(
        !started.iter().any(|s| s.eq_ignore_ascii_case(&other)),
        "{plan:?}"
    );
    assert!(!started.iter().any(|s| s.starts_with('+')), "{plan:?}");
    let deps = deps.unwrap();
    assert!(
        deps.iter().any(|d| d.eq_ignore_ascii_case(&member)),
        "{deps:?}"
    );
}

/// Failure actions that reboot or run a command are read (through
/// `QueryServiceConfig2W`, or the `FailureActions` value wine keeps) for
/// the service and what a start pulls in, and refuse the plan; a restart
/// action does not.
#[test]
fn failure_actions_that_reboot_or_run_a_command_refuse_the_plan() {
    use windows_sys::Win32::System::Services::{
        SC_ACTION_REBOOT, SC_ACTION_RESTART, SC_ACTION_RUN_COMMAND,
    };
    let _one = SCM.lock().unwrap_or_else(|e| e.into_inner());
    let pid = std::process::id();
    let exe = r"C:\windows\system32\notepad.exe";
    let reboot = format!("csiproxyfareboot{pid}");
    let restart = format!("csiproxyfarestart{pid}");
    let user = format!("csiproxyfauser{pid}");
    let hr = scm::testing::create(&reboot, exe, &[]).unwrap();
    let hx = scm::testing::create(&restart, exe, &[]).unwrap();
    let hu = scm::testing::create(&user, exe, &[&reboot]).unwrap();
    let mut via = "ChangeServiceConfig2W";
    for (h, n, t) in [
        (&hr, &reboot, vec![SC_ACTION_RESTART, SC_ACTION_REBOOT]),
        (&hx, &restart, vec![SC_ACTION_RESTART]),
    ] {
        let set = scm::testing::set_failure_actions(h, &t);
        let read = scm::failure_actions(h, n).unwrap_or_default();
        if !set || read.is_empty() {
            // Wine does not keep them: the value the SCM keeps instead.
            via = "the FailureActions value";
            let t: Vec<u32> = t.iter().map(|t| *t as u32).collect();
            assert!(super::registry::testing::write_failure_actions_value(n, &t));
        }
    }
    let run = format!("csiproxyfarun{pid}");
    let hc = scm::testing::create(&run, exe, &[]).unwrap();
    if !scm::testing::set_failure_actions(&hc, &[SC_ACTION_RUN_COMMAND])
        || scm::failure_actions(&hc, &run)
            .unwrap_or_default()
            .is_empty()
    {
        assert!(super::registry::testing::write_failure_actions_value(
            &run,
            &[SC_ACTION_RUN_COMMAND as u32]
        ));
    }
    let sys = WindowsSystem::new(Arc::new(WmiWorker::new(CIMV2_NAMESPACE)));
    let name = |n: &str| ServiceName::parse(n, crate::path::Flavor::Windows).unwrap();
    let plans: Vec<_> = [&reboot, &restart, &user, &run]
        .into_iter()
        .map(|n| sys.plan(&name(n), Op::Start))
        .collect();
    for h in [&hu, &hr, &hx, &hc] {
        scm::testing::delete(h);
    }
    let plans: Vec<Plan> = plans.into_iter().map(|p| p.unwrap()).collect();
    eprintln!("failure actions set through {via}");
    let e = plans[0].refuse_actions(&reboot, Op::Start).unwrap_err();
    assert!(e.to_string().contains("reboot"), "{e}");
    plans[1].refuse_actions(&restart, Op::Start).unwrap();
    let e = plans[2].refuse_actions(&user, Op::Start).unwrap_err();
    assert!(e.to_string().contains("would start"), "{e}");
    let e = plans[3].refuse_actions(&run, Op::Start).unwrap_err();
    assert!(e.to_string().contains("run a command"), "{e}");
}

/// Kernel and file system drivers are no services: the plan says so (the
/// System API refuses them whatever the allow-list says).
#[test]
fn drivers_are_not_services() {
    let _one = SCM.lock().unwrap_or_else(|e| e.into_inner());
    let pid = std::process::id();
    let k = format!("csiproxykdriver{pid}");
    let f = format!("csiproxyfsdriver{pid}");
    let s = format!("csiproxynotdriver{pid}");
    let sys_file = r"C:\windows\system32\drivers\null.sys";
    let hk = scm::testing::create_with(&k, sys_file, &[], None, scm_rules::KERNEL_DRIVER).unwrap();
    let hf =
        scm::testing::create_with(&f, sys_file, &[], None, scm_rules::FILE_SYSTEM_DRIVER).unwrap();
    let hs = scm::testing::create(&s, r"C:\windows\system32\notepad.exe", &[]).unwrap();
    let sys = WindowsSystem::new(Arc::new(WmiWorker::new(CIMV2_NAMESPACE)));
    let name = |n: &str| ServiceName::parse(n, crate::path::Flavor::Windows).unwrap();
    let plans: Vec<_> = [&k, &f, &s]
        .into_iter()
        .map(|n| (sys.plan(&name(n), Op::Stop), sys.plan(&name(n), Op::Start)))
        .collect();
    for h in [&hk, &hf, &hs] {
        scm::testing::delete(h);
    }
    for (i, (stop, start)) in plans.into_iter().enumerate() {
        for p in [stop.unwrap(), start.unwrap()] {
            match i {
                0 => assert!(p.not_a_service.unwrap().contains("kernel driver")),
                1 => assert!(p.not_a_service.unwrap().contains("file system driver")),
                _ => assert_eq!(p.not_a_service, None),
            }
        }
    }
}

/// A driver pulled in by a start, as a dependency or as a member of a
/// `+Group` the service depends on, makes the plan refused: the type is
/// checked over the whole plan, not only for the service named.
#[test]
fn a_driver_pulled_in_by_a_start_is_refused() {
    let _one = SCM.lock().unwrap_or_else(|e| e.into_inner());
    let pid = std::process::id();
    let sys_file = r"C:\windows\system32\drivers\null.sys";
    let exe = r"C:\windows\system32\notepad.exe";
    let group = format!("csiproxydrvgroup{pid}");
    let k = format!("csiproxydepkdriver{pid}");
    let f = format!("csiproxygrpfsdriver{pid}");
    let by_dep = format!("csiproxyneedsdriver{pid}");
    let by_group = format!("csiproxyneedsgroup{pid}");
    let plain = format!("csiproxyneedsnothing{pid}");
    let hk = scm::testing::create_with(&k, sys_file, &[], None, scm_rules::KERNEL_DRIVER).unwrap();
    let hf = scm::testing::create_with(
        &f,
        sys_file,
        &[],
        Some(&group),
        scm_rules::FILE_SYSTEM_DRIVER,
    )
    .unwrap();
    let hd = scm::testing::create(&by_dep, exe, &[&k]).unwrap();
    let plus = format!("+{group}");
    let hg = scm::testing::create(&by_group, exe, &[&plus]).unwrap();
    let hp = scm::testing::create(&plain, exe, &[]).unwrap();
    let sys = WindowsSystem::new(Arc::new(WmiWorker::new(CIMV2_NAMESPACE)));
    let name = |n: &str| ServiceName::parse(n, crate::path::Flavor::Windows).unwrap();
    let plans: Vec<_> = [&by_dep, &by_group, &plain]
        .into_iter()
        .map(|n| sys.plan(&name(n), Op::Start))
        .collect();
    for h in [&hd, &hg, &hp, &hk, &hf] {
        scm::testing::delete(h);
    }
    let plans: Vec<Plan> = plans.into_iter().map(|p| p.unwrap()).collect();
    for (p, asked, driver, kind) in [
        (&plans[0], &by_dep, &k, "kernel driver"),
        (&plans[1], &by_group, &f, "file system driver"),
    ] {
        assert_eq!(p.not_a_service, None, "{asked}: the service itself is one");
        let e = p.refuse_unmodelled(asked, Op::Start).unwrap_err();
        let m = e.to_string();
        assert!(matches!(e, Error::PermissionDenied(_)), "{m}");
        assert!(m.starts_with("start service"), "{m}");
        assert!(
            m.to_ascii_lowercase()
                .contains(&driver.to_ascii_lowercase())
                && m.contains(kind),
            "{m}"
        );
    }
    plans[2].refuse_unmodelled(&plain, Op::Start).unwrap();
}
