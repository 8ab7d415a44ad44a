//! The Kubernetes pod UID and container id in a process's cgroup paths
//! (`/proc/<pid>/cgroup`), only where kubelet's own layout puts them,
//! **anchored at the cgroup root**: a process that may create cgroups
//! below its own (a delegated subtree) can name a directory `pod<uid>`
//! anywhere there, but never below the kubepods cgroup.
//!
//! - The kubepods cgroup: `/kubepods.slice` (systemd driver) or
//!   `/kubepods` (cgroupfs driver) at the root, or what
//!   `-kubepods-cgroup` names where the node differs (kind and other
//!   custom cgroup roots: `/kubelet.slice/kubelet-kubepods.slice`).
//! - The systemd driver, below `<K>.slice`: `<K>-<qos>.slice/
//!   <K>-<qos>-pod<uid, '-' written '_'>.slice/<scope>`, Guaranteed pods
//!   `<K>-pod<uid>.slice/<scope>` (`<qos>` besteffort or burstable).
//! - The cgroupfs driver, below `<K>`: `<qos>/pod<uid>/<id>`, Guaranteed
//!   `pod<uid>/<id>`.
//! - Container scopes right below the pod: containerd
//!   `cri-containerd-<id>.scope`, CRI-O `crio-<id>.scope`, Docker
//!   `docker-<id>.scope`, or the bare 64-hex id (cgroupfs). CRI-O's
//!   `crio-conmon-<id>.scope` is its monitor, not the container. A
//!   container's own sub-cgroups below its scope are still its.
//! - Lines: the cgroup v2 one (`0::`) and v1 hierarchies of real
//!   controllers or `name=systemd`; other named v1 hierarchies are not
//!   kubelet's and are ignored. The first line that places the process in
//!   a pod wins, one with the container preferred.

use std::sync::RwLock;

/// The default kubepods cgroups.
pub const DEFAULT_ROOTS: [&str; 2] = ["/kubepods.slice", "/kubepods"];

static ROOTS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Use `roots` (absolute cgroup paths of kubepods cgroups) instead of
/// [`DEFAULT_ROOTS`] (`-kubepods-cgroup`); an empty list restores them.
/// An invalid path is refused with the reason.
pub fn set_kubepods_roots(roots: &[String]) -> Result<(), String> {
    for r in roots {
        let last = r.rsplit('/').next().unwrap_or_default();
        if !r.starts_with('/') || r.ends_with('/') || r.contains("//") || last.is_empty() {
            return Err(format!(
                "{r:?}: a kubepods cgroup is an absolute cgroup path such as /kubepods.slice"
            ));
        }
        if r.split('/').any(|c| c == "." || c == "..") {
            return Err(format!("{r:?}: no . or .. components"));
        }
    }
    *ROOTS.write().unwrap_or_else(|p| p.into_inner()) = roots.to_vec();
    Ok(())
}

/// The kubepods cgroups in force.
pub fn kubepods_roots() -> Vec<String> {
    let r = ROOTS.read().unwrap_or_else(|p| p.into_inner());
    if r.is_empty() {
        DEFAULT_ROOTS.iter().map(|s| s.to_string()).collect()
    } else {
        r.clone()
    }
}

/// What a process's cgroup says about its pod and container.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodInfo {
    pub pod_uid: Option<String>,
    pub container_id: Option<String>,
}

/// Parse the contents of `/proc/<pid>/cgroup` against the kubepods
/// cgroups `roots`.
pub fn parse(contents: &str, roots: &[String]) -> PodInfo {
    let mut best = PodInfo::default();
    for line in contents.lines() {
        // hierarchy-id:controllers:path; the path may itself hold ':'.
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(ctl), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let kubelets = if id == "0" {
            ctl.is_empty()
        } else {
            !ctl.is_empty() && (ctl == "name=systemd" || !ctl.starts_with("name="))
        };
        if !kubelets {
            continue;
        }
        let Some(info) = roots.iter().find_map(|r| parse_path(path, r)) else {
            continue;
        };
        if best.pod_uid.is_none() || (best.container_id.is_none() && info.container_id.is_some()) {
            let complete = info.container_id.is_some();
            best = info;
            if complete {
                break;
            }
        }
    }
    best
}

/// The pod and container of `path` when it lies in kubelet's layout below
/// the kubepods cgroup `root`.
pub fn parse_path(path: &str, root: &str) -> Option<PodInfo> {
    let rest = path.strip_prefix(root)?;
    let rest = rest.strip_prefix('/')?;
    let mut segs = rest.split('/');
    let last = root.rsplit('/').next()?;
    let (pod_uid, after) = match last.strip_suffix(".slice") {
        Some(k) => systemd_pod(k, &mut segs)?,
        None => cgroupfs_pod(&mut segs)?,
    };
    let container_id = after.and_then(|seg| container_segment(seg, last.ends_with(".slice")));
    Some(PodInfo {
        pod_uid: Some(pod_uid),
        container_id,
    })
}

/// `<k>-<qos>.slice/<k>-<qos>-pod<uid_>.slice` or `<k>-pod<uid_>.slice`:
/// the pod UID and the segment after the pod.
fn systemd_pod<'a>(
    k: &str,
    segs: &mut impl Iterator<Item = &'a str>,
) -> Option<(String, Option<&'a str>)> {
    let first = segs.next()?;
    let pod = if let Some(uid) = first
        .strip_prefix(k)
        .and_then(|s| s.strip_prefix("-pod"))
        .and_then(|s| s.strip_suffix(".slice"))
    {
        uid
    } else {
        let qos = first
            .strip_prefix(k)?
            .strip_prefix('-')?
            .strip_suffix(".slice")?;
        if qos != "besteffort" && qos != "burstable" {
            return None;
        }
        let second = segs.next()?;
        second
            .strip_prefix(k)?
            .strip_prefix('-')?
            .strip_prefix(qos)?
            .strip_prefix("-pod")?
            .strip_suffix(".slice")?
    };
    let uid = pod.replace('_', "-");
    is_uid(&uid).then(|| (uid.to_ascii_lowercase(), segs.next()))
}

/// `<qos>/pod<uid>` or `pod<uid>`: the pod UID and the segment after it.
fn cgroupfs_pod<'a>(segs: &mut impl Iterator<Item = &'a str>) -> Option<(String, Option<&'a str>)> {
    let mut seg = segs.next()?;
    if seg == "besteffort" || seg == "burstable" {
        seg = segs.next()?;
    }
    let uid = seg.strip_prefix("pod")?;
    is_uid(uid).then(|| (uid.to_ascii_lowercase(), segs.next()))
}

/// A container scope (systemd driver) or a bare id (cgroupfs).
fn container_segment(seg: &str, systemd: bool) -> Option<String> {
    if !systemd {
        return is_container_id(seg).then(|| seg.to_ascii_lowercase());
    }
    let scope = seg.strip_suffix(".scope")?;
    if scope.starts_with("crio-conmon-") {
        return None;
    }
    let id = ["cri-containerd-", "crio-", "docker-"]
        .iter()
        .find_map(|p| scope.strip_prefix(p))?;
    is_container_id(id).then(|| id.to_ascii_lowercase())
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

    fn roots() -> Vec<String> {
        DEFAULT_ROOTS.iter().map(|s| s.to_string()).collect()
    }

    fn p(c: &str) -> PodInfo {
        parse(c, &roots())
    }

    #[test]
    fn v2_systemd_containerd() {
        let c = format!("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice/cri-containerd-{ID}.scope\n");
        assert_eq!(p(&c), both(UID, ID));
        // The container's own sub-cgroups are still its.
        let c = format!("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice/cri-containerd-{ID}.scope/init\n");
        assert_eq!(p(&c), both(UID, ID));
    }

    #[test]
    fn v2_systemd_crio_guaranteed_and_burstable() {
        let c = format!("0::/kubepods.slice/kubepods-pod{UID_}.slice/crio-{ID}.scope\n");
        assert_eq!(p(&c), both(UID, ID));
        let c = format!("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/crio-{ID}.scope\n");
        assert_eq!(p(&c), both(UID, ID));
        // The monitor of a CRI-O container is not the container.
        let c = format!("0::/kubepods.slice/kubepods-pod{UID_}.slice/crio-conmon-{ID}.scope\n");
        assert_eq!(p(&c).container_id, None);
        assert_eq!(p(&c).pod_uid.as_deref(), Some(UID));
    }

    #[test]
    fn v1_cgroupfs_and_named_hierarchies() {
        let c = format!(
            "12:pids:/kubepods/burstable/pod{UID}/{ID}\n\
             1:name=systemd:/kubepods/burstable/pod{UID}/{ID}\n0::/\n"
        );
        assert_eq!(p(&c), both(UID, ID));
        let c = format!("3:cpu,cpuacct:/kubepods/pod{UID}/{ID}\n");
        assert_eq!(p(&c), both(UID, ID));
        // Hybrid: the named systemd hierarchy places the process.
        let c = format!(
            "9:name=systemd:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice/docker-{ID}.scope\n\
             4:memory:/\n0::/\n"
        );
        assert_eq!(p(&c), both(UID, ID));
        // Another named hierarchy is anyone's to mount and fill.
        let c = format!("5:name=mine:/kubepods/pod{UID}/{ID}\n0::/user.slice\n");
        assert_eq!(p(&c), PodInfo::default());
    }

    #[test]
    fn a_pod_directory_in_a_delegated_subtree_is_nobodys_pod() {
        // The bypass: a process in a subtree delegated to it makes its own
        // pod<uid> directory (and a scope below it).
        for c in [
            format!("0::/user.slice/user-1000.slice/user@1000.service/pod{UID}/{ID}\n"),
            format!("0::/user.slice/user-1000.slice/user@1000.service/kubepods.slice/kubepods-pod{UID_}.slice/cri-containerd-{ID}.scope\n"),
            format!("0::/system.slice/x.service/kubepods/pod{UID}\n"),
            // Inside a real pod's container, a deeper fake pod.
            format!("0::/kubepods.slice/kubepods-pod{UID_}.slice/cri-containerd-{ID}.scope/kubepods-pod{}.slice\n", UID_.replace('0', "1")),
            format!("0::/kubepods/pod{UID}/{ID}/pod{}\n", UID.replace('0', "1")),
        ] {
            let got = p(&c);
            assert_ne!(got.pod_uid.as_deref(), Some(UID.replace('0', "1").as_str()), "{c}");
            if c.contains("user.slice") || c.contains("system.slice") {
                assert_eq!(got, PodInfo::default(), "{c}");
            }
        }
        // A qos or pod level out of place.
        for c in [
            format!("0::/kubepods.slice/kubepods-guaranteed.slice/kubepods-guaranteed-pod{UID_}.slice\n"),
            format!("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-burstable-pod{UID_}.slice\n"),
            format!("0::/kubepods.slice/x/kubepods-pod{UID_}.slice\n"),
            format!("0::/kubepods/x/pod{UID}\n"),
            format!("0::/kubepodsX/pod{UID}\n"),
        ] {
            assert_eq!(p(&c), PodInfo::default(), "{c}");
        }
    }

    #[test]
    fn a_custom_kubepods_cgroup_names_kinds_layout() {
        // kind (--cgroup-root=/kubelet, systemd driver): the slices carry
        // the root's name.
        let c = format!("0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod{UID_}.slice/cri-containerd-{ID}.scope\n");
        assert_eq!(p(&c), PodInfo::default());
        let r = vec!["/kubelet.slice/kubelet-kubepods.slice".to_string()];
        assert_eq!(parse(&c, &r), both(UID, ID));
        // Without a cgroup namespace: the node container's own scope above.
        let c = format!("0::/system.slice/docker-{ID}.scope/kubelet.slice/kubepods.slice/kubepods-pod{UID_}.slice/cri-containerd-{}.scope\n", ID.replace('4', "5"));
        assert_eq!(p(&c), PodInfo::default());
        let r = vec![format!(
            "/system.slice/docker-{ID}.scope/kubelet.slice/kubepods.slice"
        )];
        assert_eq!(parse(&c, &r), both(UID, &ID.replace('4', "5")));
        for bad in ["kubepods", "/kubepods/", "/a//b", "/a/../b", ""] {
            assert!(set_kubepods_roots(&[bad.to_string()]).is_err(), "{bad}");
        }
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
            assert_eq!(p(c), PodInfo::default(), "{c}");
        }
        // A container outside any pod is no pod's.
        let c = format!("0::/system.slice/docker-{ID}.scope\n");
        assert_eq!(p(&c), PodInfo::default());
    }

    #[test]
    fn never_panics_on_arbitrary_input() {
        use proptest::prelude::*;
        proptest!(|(s in ".{0,300}")| {
            let _ = p(&s);
        });
    }
}
