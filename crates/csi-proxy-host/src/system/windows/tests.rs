//! The SCM wrappers against the real OS (CI runs them under wine).

use super::scm;
use super::*;

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
        deps = scm::registry_dependencies(&dep);
    }
    let (_, _, none) = scm::config(&hb).unwrap();
    let all = scm::all_services(&scm::open_manager().unwrap()).unwrap();
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
