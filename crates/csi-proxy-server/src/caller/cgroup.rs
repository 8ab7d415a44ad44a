//! The Kubernetes pod UID and container id in a process's cgroup paths
//! (`/proc/<pid>/cgroup`), for the layouts kubelet and the container
//! runtimes create:
//!
//! - cgroup v2 (`0::<path>`) and v1 hierarchies, named (`1:name=systemd:`)
//!   or not (`4:memory:`): every line is looked at, the first that names a
//!   pod wins;
//! - the systemd driver: `.../kubepods.slice/kubepods-<qos>.slice/
//!   kubepods-<qos>-pod<uid, '-' written '_'>.slice/<scope>` (Guaranteed
//!   pods have no QoS part: `kubepods-pod<uid>.slice`);
//! - the cgroupfs driver: `.../kubepods/<qos>/pod<uid>/<id>` (Guaranteed:
//!   `.../kubepods/pod<uid>/<id>`);
//! - container scopes: containerd `cri-containerd-<id>.scope`, CRI-O
//!   `crio-<id>.scope`, Docker `docker-<id>.scope`, or the bare 64-hex id
//!   (cgroupfs driver). CRI-O's `crio-conmon-<id>.scope` is its monitor
//!   process, not the container, and gives no container id.

/// What a process's cgroup says about its pod and container.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodInfo {
    pub pod_uid: Option<String>,
    pub container_id: Option<String>,
}

/// Parse the contents of `/proc/<pid>/cgroup`.
pub fn parse(contents: &str) -> PodInfo {
    let mut best = PodInfo::default();
    for line in contents.lines() {
        // hierarchy-id:controllers:path; the path may itself hold ':'.
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(_), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let info = parse_path(path);
        if info.pod_uid.is_some() && (best.pod_uid.is_none() || best.container_id.is_none()) {
            let complete = info.container_id.is_some();
            best = info;
            if complete {
                break;
            }
        } else if best.container_id.is_none() && info.container_id.is_some() {
            best.container_id = info.container_id;
        }
    }
    best
}

/// The pod and container named by one cgroup path.
pub fn parse_path(path: &str) -> PodInfo {
    let mut info = PodInfo::default();
    let mut after_pod = false;
    for seg in path.split('/').filter(|s| !s.is_empty()) {
        if let Some(uid) = pod_segment(seg) {
            info.pod_uid = Some(uid);
            // Only a container below the pod is the pod's (a node that is
            // itself a container, as kind's, has its own scope above).
            info.container_id = None;
            after_pod = true;
            continue;
        }
        if let Some(id) = container_segment(seg, after_pod) {
            info.container_id = Some(id);
        }
    }
    info
}

/// `kubepods[-<qos>]-pod<uid_>.slice` (systemd) or `pod<uid>` (cgroupfs).
fn pod_segment(seg: &str) -> Option<String> {
    let uid = if let Some(slice) = seg.strip_suffix(".slice") {
        let rest = slice.strip_prefix("kubepods-")?;
        let at = rest.find("pod")?;
        let qos = &rest[..at];
        if !(qos.is_empty() || qos == "besteffort-" || qos == "burstable-") {
            return None;
        }
        rest[at + 3..].replace('_', "-")
    } else {
        seg.strip_prefix("pod")?.to_string()
    };
    is_uid(&uid).then(|| uid.to_ascii_lowercase())
}

/// A container scope, or (below a pod, cgroupfs driver) a bare id.
fn container_segment(seg: &str, after_pod: bool) -> Option<String> {
    if let Some(scope) = seg.strip_suffix(".scope") {
        if scope.starts_with("crio-conmon-") {
            return None;
        }
        let id = ["cri-containerd-", "crio-", "docker-"]
            .iter()
            .find_map(|p| scope.strip_prefix(p))?;
        return is_container_id(id).then(|| id.to_ascii_lowercase());
    }
    (after_pod && is_container_id(seg)).then(|| seg.to_ascii_lowercase())
}

fn is_container_id(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A UUID in its 8-4-4-4-12 text form.
fn is_uid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "0b4f6a2e-1c3d-4e5f-8a9b-0c1d2e3f4a5b";
    const UID_: &str = "0b4f6a2e_1c3d_4e5f_8a9b_0c1d2e3f4a5b";
    const ID: &str = "4c1f0e6a8b9d2c3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e";

    fn both(pod: &str, id: &str) -> PodInfo {
        PodInfo {
            pod_uid: Some(pod.into()),
            container_id: Some(id.into()),
        }
    }

    #[test]
    fn v2_systemd_containerd() {
        let c = format!("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice/cri-containerd-{ID}.scope\n");
        assert_eq!(parse(&c), both(UID, ID));
    }

    #[test]
    fn v2_systemd_crio_guaranteed_and_burstable() {
        let c = format!("0::/kubepods.slice/kubepods-pod{UID_}.slice/crio-{ID}.scope\n");
        assert_eq!(parse(&c), both(UID, ID));
        let c = format!("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/crio-{ID}.scope\n");
        assert_eq!(parse(&c), both(UID, ID));
        // The monitor of a CRI-O container is not the container.
        let c = format!("0::/kubepods.slice/kubepods-pod{UID_}.slice/crio-conmon-{ID}.scope\n");
        assert_eq!(parse(&c).container_id, None);
        assert_eq!(parse(&c).pod_uid.as_deref(), Some(UID));
    }

    #[test]
    fn v1_cgroupfs_and_named_hierarchies() {
        let c = format!(
            "12:pids:/kubepods/burstable/pod{UID}/{ID}\n\
             1:name=systemd:/kubepods/burstable/pod{UID}/{ID}\n0::/\n"
        );
        assert_eq!(parse(&c), both(UID, ID));
        let c = format!("3:cpu,cpuacct:/kubepods/pod{UID}/{ID}\n");
        assert_eq!(parse(&c), both(UID, ID));
        // Hybrid: only the named systemd hierarchy places the process.
        let c = format!(
            "9:name=systemd:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice/docker-{ID}.scope\n\
             4:memory:/\n0::/\n"
        );
        assert_eq!(parse(&c), both(UID, ID));
    }

    #[test]
    fn nested_under_a_node_container_and_a_pod_without_container() {
        // kind / minikube: the node's own cgroup comes first.
        let c = format!("0::/system.slice/docker-{ID}.scope/kubelet.slice/kubepods.slice/kubepods-pod{UID_}.slice\n");
        let p = parse(&c);
        assert_eq!(p.pod_uid.as_deref(), Some(UID));
        // The node container's scope above the pod is not the caller's.
        assert_eq!(p.container_id, None);
        let c = format!("0::/system.slice/docker-{ID}.scope/kubelet.slice/kubepods.slice/kubepods-pod{UID_}.slice/cri-containerd-{}.scope\n", &ID.replace('4', "5"));
        assert_eq!(parse(&c), both(UID, &ID.replace('4', "5")));
    }

    #[test]
    fn not_kubernetes() {
        for c in [
            "0::/\n",
            "0::/user.slice/user-1000.slice/session-2.scope\n",
            "9:name=systemd:/system.slice/containerd.service\n",
            "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podnot_a_uid.slice/x.scope\n",
            "0::/pod1234/abc\n",
            "garbage\n",
            "",
        ] {
            let p = parse(c);
            assert_eq!(p.pod_uid, None, "{c}");
        }
        // A container outside any pod: its id alone.
        let c = format!("0::/system.slice/docker-{ID}.scope\n");
        assert_eq!(parse(&c).container_id.as_deref(), Some(ID));
        assert_eq!(parse(&c).pod_uid, None);
    }

    #[test]
    fn never_panics_on_arbitrary_input() {
        use proptest::prelude::*;
        proptest!(|(s in ".{0,300}")| {
            let _ = parse(&s);
        });
    }
}
