//! Fuzz the `/proc/<pid>/cgroup` parsers: the pod and container of a
//! caller (`csi_proxy_server::caller::cgroup`, against the default
//! kubepods cgroups or one the input's first line names, through
//! `set_kubepods_roots`' validation) and the service unit of a process
//! (`csi_proxy_host::system::protect::unit_of_cgroup`).
//!
//! Checks: nothing panics; a pod UID is a lower-case 8-4-4-4-12 UUID, a
//! container id 64 lower-case hex digits and only with a pod; a pod is
//! found only on a line whose path lies below a kubepods cgroup in force
//! (the anchoring rule); a unit is a `*.service` component of a path in
//! the input.
#![no_main]

use csi_proxy_host::system::protect::unit_of_cgroup;
use csi_proxy_server::caller::cgroup::{kubepods_roots, parse, set_kubepods_roots};
use libfuzzer_sys::fuzz_target;

fn is_uid(s: &str) -> bool {
    s.len() == 36
        && s.bytes().enumerate().all(|(i, b)| {
            if [8, 13, 18, 23].contains(&i) {
                b == b'-'
            } else {
                b.is_ascii_digit() || (b'a'..=b'f').contains(&b)
            }
        })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // "root\n" + contents, when the first line is a valid kubepods cgroup.
    let (contents, custom) = match text.split_once('\n') {
        Some((first, rest)) if first.starts_with('/') => {
            (rest, set_kubepods_roots(&[first.to_string()]).is_ok())
        }
        _ => (text, false),
    };
    let roots = kubepods_roots();
    if custom {
        set_kubepods_roots(&[]).unwrap();
    }
    let info = parse(contents, &roots);
    if let Some(uid) = &info.pod_uid {
        assert!(is_uid(uid), "{info:?}");
        // The UID's first group (no dash) is in that line's pod segment.
        let anchored = contents.lines().any(|l| {
            let path = l.splitn(3, ':').nth(2).unwrap_or_default();
            roots.iter().any(|r| {
                path.strip_prefix(r.as_str()).is_some_and(|rest| {
                    rest.starts_with('/') && rest.to_ascii_lowercase().contains(&uid[..8])
                })
            })
        });
        assert!(anchored, "{info:?} not below {roots:?}");
    } else {
        assert!(info.container_id.is_none(), "{info:?}");
    }
    if let Some(id) = &info.container_id {
        assert!(
            id.len() == 64
                && id
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
            "{info:?}"
        );
    }
    if let Some(unit) = unit_of_cgroup(contents) {
        assert!(unit.ends_with(".service") && !unit.contains('/'), "{unit}");
        assert!(contents.contains(unit.as_str()), "{unit}");
    }
});
