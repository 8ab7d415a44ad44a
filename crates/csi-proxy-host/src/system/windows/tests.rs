//! The SCM wrappers against the real OS (CI runs them under wine).

use super::scm;
use super::*;

#[test]
fn config_lists_dependencies_and_the_scan_finds_dependents() {
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
