//! Who is calling: the identity of the process at the other end of a
//! connection, taken once when the connection is accepted.
//!
//! - Linux: `SO_PEERCRED` (pid, uid, gid); from `/proc/<pid>`: the
//!   executable and the cgroup, from which the Kubernetes pod UID and the
//!   container id are read ([`cgroup`]).
//! - Windows: `GetNamedPipeClientProcessId`; from the process: its token's
//!   user SID, its image path, its session id, and whether it runs inside
//!   a job object (every process of a Windows container does).
//!
//! Whatever cannot be read is absent; identity never fails a call by
//! itself (a caller policy may refuse a caller whose identity it needs).
//! Identification runs in the connection's task on the blocking pool,
//! bounded in time ([`pending`]), never in the accept loop; the digest of
//! the executable has a cache and a budget per caller ([`digest`]).
//!
//! The pid is the one the client had when it connected. The rest is read
//! right after accept: if the client exited in between and its pid was
//! reused, the exe, SID and cgroup would be the new process's. So the pid
//! is bound to its process's start time ([`started`]): taken at accept on
//! Windows and compared when the reads open the pid again, checked
//! against the accept time and across the reads on Linux, where on 6.5+ a
//! pidfd of the peer closes the window too (`linux.rs`). A mismatch makes
//! the caller unknown. What stays open is the time from `connect` to
//! accept: a client that wants to be misattributed must hand its
//! connection to another process and exit before the accept; see
//! docs/security.md.

pub mod budget;
pub mod cgroup;
pub mod digest;
pub mod jobs;
#[cfg(target_os = "linux")]
mod linux;
pub mod pending;
mod slots;
pub mod started;
#[cfg(windows)]
mod windows;

use std::fmt::Write as _;
use std::sync::RwLock;

/// A kernel identity a policy entry names along with `exe_sha256`: its uid
/// and pod (at least one).
pub type NamedBy = (Option<u32>, Option<String>);

/// Whether callers' executables are hashed (`exe_sha256`): only while a
/// caller policy in force matches on it (the policy file says so on each
/// load); and the kernel identities its entries on a digest name.
static HASHING: RwLock<(bool, Vec<NamedBy>)> = RwLock::new((false, Vec::new()));

/// Hash callers' executables from now on (or stop); `named`: the kernel
/// identities entries on a digest name (their callers' hashes go first,
/// [`budget::Class::Named`]).
pub fn set_hash_executables(on: bool, named: Vec<NamedBy>) {
    *HASHING.write().unwrap_or_else(|p| p.into_inner()) = (on, named);
}

#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn hashes_executables() -> bool {
    HASHING.read().unwrap_or_else(|p| p.into_inner()).0
}

/// Where the hash of a caller with `uid` in `pod` stands in line: first
/// when an entry on a digest also names its pod, or, for a caller outside
/// pods, its uid (only a caller of that kernel identity can be there; red
/// team 41ident N1: uids nobody names, hashing together, refused a victim
/// a rule named). A uid does not name a caller in a pod: every container
/// running as root is uid 0, and 40 root pods shared the first place with
/// a host caller an entry named by uid 0 (red team 42ident F3).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn hash_class(uid: Option<u32>, pod: &Option<String>) -> budget::Class {
    let g = HASHING.read().unwrap_or_else(|p| p.into_inner());
    let named = named_by(&g.1, uid, pod);
    if named {
        budget::Class::Named
    } else {
        budget::Class::Other
    }
}

/// Whether one of `named` names a caller with `uid` in `pod` (see
/// [`hash_class`]).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn named_by(named: &[NamedBy], uid: Option<u32>, pod: &Option<String>) -> bool {
    named.iter().any(|(u, p)| match (p, pod) {
        (Some(p), Some(q)) => p.eq_ignore_ascii_case(q) && u.is_none_or(|u| uid == Some(u)),
        (None, None) => u.is_some_and(|u| uid == Some(u)),
        _ => false,
    })
}

/// The identity of one connection's client. Every field is optional.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Caller {
    pub pid: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    /// Windows: the user SID of the client process's token (`S-1-5-18`).
    pub sid: Option<String>,
    /// The client's executable (Linux `/proc/<pid>/exe`, Windows the image
    /// path).
    pub exe: Option<String>,
    /// Linux: SHA-256 (lowercase hex) of the file `/proc/<pid>/exe` names,
    /// which the process can set (`prctl(PR_SET_MM)`; docs/security.md) (read through `/proc/<pid>/exe`, whatever mount
    /// namespace it lives in); only while a caller policy matches on it.
    pub exe_sha256: Option<String>,
    /// Linux: whether the process shares the proxy's mount namespace (only
    /// then does `exe` name a file the proxy sees at that path).
    pub own_mount_ns: Option<bool>,
    /// The Kubernetes pod UID, from the cgroup (Linux).
    pub pod_uid: Option<String>,
    /// The 64-hex container id, from the cgroup (Linux).
    pub container_id: Option<String>,
    /// Windows: the client's session id.
    pub session_id: Option<u32>,
    /// Windows: whether the client runs inside a job object.
    pub in_job: Option<bool>,
    /// Why part of the identity is missing although it was wanted (not
    /// identified in time, hashing budget spent): logged as `incomplete`.
    pub incomplete: Option<&'static str>,
}

impl Caller {
    /// Append the caller as a JSON object (absent fields left out).
    pub fn write_json(&self, out: &mut String) {
        out.push('{');
        let mut first = true;
        let mut key = |out: &mut String, k: &str| {
            if !first {
                out.push(',');
            }
            first = false;
            let _ = write!(out, "\"{k}\":");
        };
        for (k, v) in [
            ("pid", self.pid),
            ("uid", self.uid),
            ("gid", self.gid),
            ("session_id", self.session_id),
        ] {
            if let Some(v) = v {
                key(out, k);
                let _ = write!(out, "{v}");
            }
        }
        for (k, v) in [
            ("sid", &self.sid),
            ("exe", &self.exe),
            ("exe_sha256", &self.exe_sha256),
            ("pod_uid", &self.pod_uid),
            ("container_id", &self.container_id),
        ] {
            if let Some(v) = v {
                key(out, k);
                crate::audit::json::string(out, v);
            }
        }
        if let Some(v) = self.incomplete {
            key(out, "incomplete");
            crate::audit::json::string(out, v);
        }
        for (k, v) in [("in_job", self.in_job), ("own_mount_ns", self.own_mount_ns)] {
            if let Some(v) = v {
                key(out, k);
                let _ = write!(out, "{v}");
            }
        }
        out.push('}');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uid_names_callers_outside_pods_and_a_pod_its_own() {
        let named: Vec<NamedBy> = vec![(Some(0), None), (None, Some("Pod-A".into()))];
        let pod = |p: &str| Some(p.to_string());
        assert!(named_by(&named, Some(0), &None));
        // Root in any pod is uid 0: not named by it (red team 42ident F3).
        assert!(!named_by(&named, Some(0), &pod("pod-b")));
        assert!(named_by(&named, Some(1234), &pod("pod-a")));
        assert!(!named_by(&named, Some(5), &None));
        let both: Vec<NamedBy> = vec![(Some(7), Some("p".into()))];
        assert!(named_by(&both, Some(7), &pod("P")));
        assert!(!named_by(&both, Some(8), &pod("p")));
        assert!(!named_by(&both, Some(7), &None));
    }

    #[test]
    fn json_leaves_absent_fields_out() {
        let mut s = String::new();
        Caller::default().write_json(&mut s);
        assert_eq!(s, "{}");
        let c = Caller {
            pid: Some(42),
            uid: Some(0),
            exe: Some("/usr/bin/x \"y\"".into()),
            pod_uid: Some("0b4f6a2e-1c3d-4e5f-8a9b-0c1d2e3f4a5b".into()),
            in_job: Some(false),
            ..Caller::default()
        };
        let mut s = String::new();
        c.write_json(&mut s);
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["pid"], 42);
        assert_eq!(v["uid"], 0);
        assert_eq!(v["exe"], "/usr/bin/x \"y\"");
        assert_eq!(v["in_job"], false);
        assert!(v.get("gid").is_none() && v.get("sid").is_none());
        assert!(v.get("incomplete").is_none());
        // A caller not identified in time says so in its audit line.
        let late = Caller {
            uid: Some(1000),
            incomplete: Some(pending::TIMED_OUT),
            ..Caller::default()
        };
        let mut s = String::new();
        late.write_json(&mut s);
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["incomplete"], pending::TIMED_OUT);
        assert_eq!(v["uid"], 1000);
    }
}
