//! What the Windows Service Control Manager's configuration means for a
//! start or stop, as pure functions (unit-tested on every OS; the SCM
//! calls that read the values are in `windows/scm.rs`):
//!
//! - the service type: kernel and file system drivers are never acted on;
//! - failure actions (`SERVICE_CONFIG_FAILURE_ACTIONS`, and the
//!   `FailureActions` registry value the SCM keeps them in): a service
//!   whose failure reboots the node or runs a command carries an action;
//! - `+Group` dependencies: the SCM starts every member of the load-order
//!   group, so a start plan takes them all in;
//! - what a plan cannot follow ([`unmodelled`]): a driver anywhere in the
//!   plan, a service with trigger-start information (the SCM itself starts
//!   or stops it on device, network, policy... events).

/// `SERVICE_KERNEL_DRIVER`.
pub const KERNEL_DRIVER: u32 = 0x1;
/// `SERVICE_FILE_SYSTEM_DRIVER`.
pub const FILE_SYSTEM_DRIVER: u32 = 0x2;
/// `SC_ACTION_REBOOT`.
pub const ACTION_REBOOT: u32 = 2;
/// `SC_ACTION_RUN_COMMAND`.
pub const ACTION_RUN_COMMAND: u32 = 3;
/// `SC_GROUP_IDENTIFIERW`: a dependency on a load-order group.
pub const GROUP_PREFIX: char = '+';

/// Why a service of `service_type` (`dwServiceType`) is not one the API
/// may act on; `None` for Win32 services.
pub fn not_a_service(service_type: u32) -> Option<String> {
    if service_type & KERNEL_DRIVER != 0 {
        Some("it is a kernel driver (SERVICE_KERNEL_DRIVER)".to_string())
    } else if service_type & FILE_SYSTEM_DRIVER != 0 {
        Some("it is a file system driver (SERVICE_FILE_SYSTEM_DRIVER)".to_string())
    } else {
        None
    }
}

/// Why a plan cannot tell what starting or stopping a service of
/// `service_type` with `triggers` trigger-start entries
/// (`SERVICE_CONFIG_TRIGGER_INFO`) does: a kernel or file system driver
/// (pulled in as a dependency or `+Group` member as much as named), a
/// service the SCM starts or stops on its own events. Empty for a plain
/// Win32 service.
pub fn unmodelled(service_type: u32, triggers: u32) -> Vec<String> {
    let mut why: Vec<String> = not_a_service(service_type).into_iter().collect();
    if triggers > 0 {
        why.push(format!(
            "it has {triggers} trigger-start entries (SERVICE_CONFIG_TRIGGER_INFO): the SCM starts or stops it on events of its own"
        ));
    }
    why
}

/// The failure actions (`SC_ACTION.Type`, in order) that act on the node:
/// a reboot, a command run. Restarting the service itself does not.
pub fn node_actions(types: &[u32]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in types {
        let a = match *t {
            ACTION_REBOOT => "failure action: reboot the computer (SC_ACTION_REBOOT)",
            ACTION_RUN_COMMAND => "failure action: run a command (SC_ACTION_RUN_COMMAND)",
            _ => continue,
        };
        if !out.iter().any(|o| o == a) {
            out.push(a.to_string());
        }
    }
    out
}

/// The action types of a `FailureActions` registry value, the SCM's own
/// copy of `SERVICE_FAILURE_ACTIONS`: five 32-bit fields (reset period,
/// three pointer placeholders around the action count at offset 12),
/// then `count` pairs of (type, delay). A value too short for the count
/// it claims yields the actions it holds.
pub fn parse_failure_actions_value(value: &[u8]) -> Vec<u32> {
    let word = |at: usize| {
        value
            .get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let Some(count) = word(12) else {
        return Vec::new();
    };
    (0..count as usize)
        .map_while(|i| word(20 + i * 8))
        .collect()
}

/// `deps` (a service's dependency list) with every `+Group` entry
/// replaced by the members `members` names for the group (matched
/// without case by the caller, as the SCM does), each once.
pub fn expand_groups(deps: &[String], mut members: impl FnMut(&str) -> Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let push = |n: String, out: &mut Vec<String>| {
        if !out.iter().any(|o| o.eq_ignore_ascii_case(&n)) {
            out.push(n);
        }
    };
    for d in deps {
        match d.strip_prefix(GROUP_PREFIX) {
            Some(group) if !group.is_empty() => {
                for m in members(group) {
                    push(m, &mut out);
                }
            }
            Some(_) => {}
            None => push(d.clone(), &mut out),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drivers_are_not_services() {
        assert!(not_a_service(KERNEL_DRIVER)
            .unwrap()
            .contains("kernel driver"));
        assert!(not_a_service(FILE_SYSTEM_DRIVER)
            .unwrap()
            .contains("file system driver"));
        // SERVICE_WIN32_OWN_PROCESS, SHARE_PROCESS, with INTERACTIVE, user services.
        for t in [0x10, 0x20, 0x110, 0x50, 0x60] {
            assert_eq!(not_a_service(t), None, "{t:#x}");
        }
    }

    #[test]
    fn drivers_and_trigger_started_services_are_unmodelled() {
        assert!(unmodelled(0x10, 0).is_empty());
        assert!(unmodelled(0x20, 0).is_empty());
        let d = unmodelled(KERNEL_DRIVER, 0);
        assert_eq!(d.len(), 1);
        assert!(d[0].contains("kernel driver"), "{d:?}");
        assert!(unmodelled(FILE_SYSTEM_DRIVER, 0)[0].contains("file system driver"));
        let t = unmodelled(0x10, 2);
        assert_eq!(t.len(), 1);
        assert!(t[0].contains("trigger-start"), "{t:?}");
        assert_eq!(unmodelled(KERNEL_DRIVER, 1).len(), 2);
    }

    #[test]
    fn reboot_and_run_command_are_node_actions() {
        assert!(node_actions(&[0, 1, 1]).is_empty());
        let a = node_actions(&[1, 2, 3, 2]);
        assert_eq!(a.len(), 2, "{a:?}");
        assert!(a[0].contains("reboot") && a[1].contains("run a command"));
    }

    #[test]
    fn the_registry_value_is_read_to_its_count() {
        let mut v = Vec::new();
        for w in [86400u32, 0, 0, 3, 0, 1, 60000, 1, 60000, 2, 1000] {
            v.extend(w.to_le_bytes());
        }
        assert_eq!(parse_failure_actions_value(&v), [1, 1, 2]);
        // Truncated: what is there; nonsense counts stop at the end.
        assert_eq!(parse_failure_actions_value(&v[..36]), [1, 1]);
        let mut huge = v.clone();
        huge[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(parse_failure_actions_value(&huge), [1, 1, 2]);
        assert!(parse_failure_actions_value(&[]).is_empty());
        assert!(parse_failure_actions_value(&[1, 2, 3]).is_empty());
    }

    #[test]
    fn groups_expand_to_their_members() {
        let deps = vec![
            "Tcpip".to_string(),
            "+NetworkProvider".to_string(),
            "+".to_string(),
            "tcpip".to_string(),
        ];
        let got = expand_groups(&deps, |g| {
            assert_eq!(g, "NetworkProvider");
            vec![
                "LanmanWorkstation".into(),
                "TCPIP".into(),
                "WebClient".into(),
            ]
        });
        assert_eq!(got, ["Tcpip", "LanmanWorkstation", "WebClient"]);
    }
}
