#[cfg(unix)]
use super::watch::MAX_BYTES;
use super::*;
use std::io::Write as _;
use std::sync::Arc;

/// Whether `p` allows `c` to call `method` of `group` (by the operation
/// the method routes to, as the guard asks).
fn allowed(p: &Policy, group: &str, method: &str, c: &Caller) -> bool {
    let g = Group::parse(group).unwrap();
    p.allows(g, crate::catalog::operation_of(g, method).unwrap(), c)
}

fn caller(uid: u32) -> Caller {
    Caller {
        pid: Some(10),
        uid: Some(uid),
        exe: Some("/usr/bin/csi-node".into()),
        own_mount_ns: Some(true),
        pod_uid: Some("0b4f6a2e-1c3d-4e5f-8a9b-0c1d2e3f4a5b".into()),
        ..Caller::default()
    }
}

#[test]
fn groups_methods_and_unnamed_groups() {
    let p = Policy::parse(
        r#"{"filesystem": [{"uid": 0}, {"pod_uid": "0B4F6A2E-1C3D-4E5F-8A9B-0C1D2E3F4A5B"}],
            "volume": [{"uid": 0}],
            "volume/FormatVolume": [{"exe": "/usr/bin/csi-node", "uid": 1000}],
            "system": [{"sid": "S-1-5-18"}]}"#,
    )
    .unwrap();
    assert_eq!(p.len(), 4);
    // Group entry: uid 0, or the pod (case-insensitively).
    assert!(allowed(&p, "filesystem", "Mkdir", &caller(0)));
    assert!(allowed(&p, "filesystem", "Mkdir", &caller(1000)));
    let mut other_pod = caller(1000);
    other_pod.pod_uid = None;
    assert!(!allowed(&p, "filesystem", "Mkdir", &other_pod));
    // The method entry decides for its method, whatever the group says.
    assert!(allowed(&p, "volume", "MountVolume", &caller(0)));
    assert!(!allowed(&p, "volume", "FormatVolume", &caller(0)));
    assert!(allowed(&p, "volume", "FormatVolume", &caller(1000)));
    let mut other_exe = caller(1000);
    other_exe.exe = Some("/usr/bin/evil".into());
    assert!(!allowed(&p, "volume", "FormatVolume", &other_exe));
    // Groups not named: refused to everyone.
    assert!(!allowed(&p, "disk", "ListDiskIDs", &caller(0)));
    assert!(!allowed(&p, "smb", "NewSmbGlobalMapping", &caller(0)));
    // An identity that could not be read matches nothing.
    assert!(!allowed(&p, "system", "GetService", &caller(0)));
    let sys = Caller {
        sid: Some("s-1-5-18".into()),
        ..Caller::default()
    };
    assert!(allowed(&p, "system", "GetService", &sys));
    assert!(!allowed(
        &Policy::parse("{}").unwrap(),
        "filesystem",
        "PathExists",
        &caller(0)
    ));
}

#[test]
fn bad_files_say_why() {
    let err = |t: &str| Policy::parse(t).unwrap_err().to_string();
    assert!(err("{").contains("not valid JSON"));
    assert!(err("[]").contains("top level"));
    assert!(err(r#"{"filesystems": []}"#).contains("unknown API group"));
    assert!(err(r#"{"Filesystem": []}"#).contains("unknown API group"));
    assert!(
        err(r#"{"volume/Format": []}"#).contains("no version of volume has a method \"Format\"")
    );
    assert!(err(r#"{"disk": {"uid": 0}}"#).contains("a list of callers"));
    assert!(err(r#"{"disk": [{}]}"#).contains("match everyone"));
    assert!(err(r#"{"disk": [{"user": 0}]}"#).contains("unknown field `user`"));
    // `services` is a caller key of the "system/services" rule only.
    assert!(err(r#"{"disk": [{"uid": 0, "services": ["iscsid"]}]}"#)
        .contains("unknown field `services`"));
    assert!(err(r#"{"disk": [{"uid": -1}]}"#).contains("\"uid\" must be a number"));
    assert!(err(r#"{"disk": [{"sid": ""}]}"#).contains("non-empty string"));
    assert!(err(r#"{"disk": [7]}"#).contains("expected struct"));
    // Every error names its line.
    assert!(err("{\n\"disk\": [{\"user\": 0}]}").contains("line 2"));
}

/// The bypass: a key given twice was taken silently (the last one won),
/// at the top level and in a caller entry. Now the file is refused,
/// naming the key and its line.
#[test]
fn a_key_given_twice_at_any_level_is_refused_with_its_line() {
    let err = |t: &str| Policy::parse(t).unwrap_err().to_string();
    let e = err("{\"filesystem\": [{\"uid\": 0}],\n \"filesystem\": [{\"uid\": 1000}]}");
    assert!(e.contains("duplicate key \"filesystem\" at line 2"), "{e}");
    let e = err("{\"filesystem\": [\n{\"uid\": 0, \"uid\": 1000}]}");
    assert!(e.contains("duplicate field `uid` at line 2"), "{e}");
    let e = err(r#"{"volume/FormatVolume": [{"uid": 0}], "volume/FormatVolume": [{"uid": 1}]}"#);
    assert!(e.contains("duplicate key \"volume/FormatVolume\""), "{e}");
    let e = err(r#"{"disk": [{"sid": "S-1-5-18", "exe": "/a", "sid": "S-1-5-19"}]}"#);
    assert!(e.contains("duplicate field `sid`"), "{e}");
}

#[test]
fn reload_keeps_the_old_policy_when_the_new_file_is_bad() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.json");
    std::fs::write(&path, r#"{"filesystem": [{"uid": 0}]}"#).unwrap();
    let f = PolicyFile::load(&path).unwrap();
    assert!(allowed(&f.current(), "filesystem", "Mkdir", &caller(0)));
    std::fs::write(&path, r#"{"filesystem": [{"uid": 1000}]}"#).unwrap();
    f.reload("test").unwrap();
    assert!(!allowed(&f.current(), "filesystem", "Mkdir", &caller(0)));
    assert!(allowed(&f.current(), "filesystem", "Mkdir", &caller(1000)));
    // A bad file: the error is returned and the policy in force stays.
    std::fs::File::create(&path)
        .unwrap()
        .write_all(b"{\"filesystem\": [")
        .unwrap();
    assert!(f
        .reload("test")
        .unwrap_err()
        .to_string()
        .contains("not valid JSON"));
    assert!(allowed(&f.current(), "filesystem", "Mkdir", &caller(1000)));
    // A change on disk is noticed without a signal.
    std::fs::write(
        &path,
        r#"{"filesystem": [{"uid": 0}], "disk": [{"uid": 0}]}"#,
    )
    .unwrap();
    f.reload_if_changed();
    assert_eq!(f.current().len(), 2);
    // At start-up a bad file is an error.
    std::fs::write(&path, "nope").unwrap();
    assert!(PolicyFile::load(&path)
        .unwrap_err()
        .to_string()
        .contains("invalid caller policy"));
    assert!(PolicyFile::load(&dir.path().join("missing")).is_err());
}

/// A policy file in a temporary directory (kept alive with it).
fn policy_file(text: &str) -> (tempfile::TempDir, Arc<PolicyFile>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.json");
    std::fs::write(&path, text).unwrap();
    let f = PolicyFile::load(&path).unwrap();
    (dir, f)
}

/// The bypass: a method rule looked up by the name a call arrived with.
/// For every method of every group (by any version's name), a policy that
/// gives the group to uid 0 and the method to uid 1000 only; then every
/// version's every method is called through the real dispatcher: each
/// method routed to the same operation is refused to uid 0 and let through
/// for uid 1000, whatever its name and version; every other method the
/// other way round.
#[test]
fn every_method_rule_holds_under_every_name_and_version() {
    let refused = |reply: &csi_proxy_http2::Reply| {
        reply.code == csi_proxy_http2::Code::PermissionDenied
            && reply.message.contains("caller policy does not allow")
    };
    let root = Arc::new(Caller {
        uid: Some(0),
        ..Caller::default()
    });
    let other = Arc::new(Caller {
        uid: Some(1000),
        ..Caller::default()
    });
    let mut rules = 0;
    let mut calls = 0;
    for group in [
        Group::Disk,
        Group::Filesystem,
        Group::Iscsi,
        Group::Smb,
        Group::System,
        Group::Volume,
    ] {
        let versions: Vec<_> = csi_proxy_api::API_VERSIONS
            .iter()
            .filter(|v| v.group == group)
            .collect();
        let mut methods: Vec<&str> = versions
            .iter()
            .flat_map(|v| v.methods().iter().copied())
            .collect();
        methods.sort_unstable();
        methods.dedup();
        let services: Vec<_> = versions
            .iter()
            .map(|v| crate::routes::testing::service_for(group, v.version, |_| {}))
            .collect();
        for rule in &methods {
            let (_dir, file) = policy_file(&format!(
                r#"{{"{g}": [{{"uid": 0}}], "{g}/{rule}": [{{"uid": 1000}}]}}"#,
                g = group.as_str()
            ));
            let op = crate::catalog::operation_of(group, rule).unwrap();
            let guard = Arc::new(crate::guard::Guard {
                audit: None,
                policy: Some(file),
            });
            rules += 1;
            for (v, svc) in versions.iter().zip(&services) {
                let svc = svc.with_guard(guard.clone());
                for crate::catalog::Route {
                    method,
                    operation: method_op,
                    ..
                } in crate::catalog::routes(**v).unwrap()
                {
                    let path = format!("/{}/{method}", v.service());
                    let as_root = svc.call_as(&path, &[], &root).wait();
                    let as_other = svc.call_as(&path, &[], &other).wait();
                    calls += 2;
                    let governed = *method_op == op;
                    assert_eq!(
                        refused(&as_root),
                        governed,
                        "rule {}/{rule}: uid 0 calling {path} ({method_op}): {:?} {}",
                        group.as_str(),
                        as_root.code,
                        as_root.message
                    );
                    assert_eq!(
                        refused(&as_other),
                        !governed,
                        "rule {}/{rule}: uid 1000 calling {path} ({method_op}): {:?} {}",
                        group.as_str(),
                        as_other.code,
                        as_other.message
                    );
                }
            }
        }
    }
    assert!(rules >= 45, "{rules}");
    assert!(calls > 1000, "{calls}");
}

#[test]
fn old_names_are_the_same_operation_and_two_keys_for_one_are_refused() {
    let p = Policy::parse(
        r#"{"filesystem": [{"uid": 65534}], "filesystem/CreateSymlink": [{"uid": 0}]}"#,
    )
    .unwrap();
    let nobody = Caller {
        uid: Some(65534),
        ..Caller::default()
    };
    for (g, m) in [("filesystem", "LinkPath"), ("filesystem", "CreateSymlink")] {
        assert!(!allowed(&p, g, m, &nobody), "{m}");
    }
    for (a, b) in [
        ("volume/DismountVolume", "volume/UnmountVolume"),
        ("disk/SetAttachState", "disk/SetDiskState"),
        ("volume/VolumeStats", "volume/GetVolumeStats"),
        ("filesystem/LinkPath", "filesystem/CreateSymlink"),
    ] {
        let e = Policy::parse(&format!(
            r#"{{"{a}": [{{"uid": 0}}], "{b}": [{{"uid": 0}}]}}"#
        ))
        .unwrap_err();
        assert!(
            e.to_string().contains("name the same operation"),
            "{a} {b}: {e}"
        );
        let g = Group::parse(a.split('/').next().unwrap()).unwrap();
        let (ma, mb) = (a.split('/').nth(1).unwrap(), b.split('/').nth(1).unwrap());
        assert_eq!(
            crate::catalog::operation_of(g, ma),
            crate::catalog::operation_of(g, mb)
        );
    }
}

#[test]
fn exe_matches_only_in_the_proxys_mount_namespace_and_exe_sha256_anywhere() {
    let digest = "ab".repeat(32);
    let p = Policy::parse(&format!(
        r#"{{"filesystem": [{{"exe": "/csi/node-plugin"}}], "volume": [{{"exe_sha256": "{}"}}]}}"#,
        digest.to_ascii_uppercase()
    ))
    .unwrap();
    assert!(p.hashes_executables());
    let mut c = Caller {
        exe: Some("/csi/node-plugin".into()),
        own_mount_ns: Some(true),
        ..Caller::default()
    };
    assert!(allowed(&p, "filesystem", "Mkdir", &c) || cfg!(windows));
    // The bypass: the same path inside a mount namespace of its own
    // (pivot_root into a tmpfs holding a copy) proves nothing.
    c.own_mount_ns = Some(false);
    assert_eq!(allowed(&p, "filesystem", "Mkdir", &c), cfg!(windows));
    c.own_mount_ns = None;
    assert_eq!(allowed(&p, "filesystem", "Mkdir", &c), cfg!(windows));
    // The digest holds in any namespace.
    assert!(!allowed(&p, "volume", "MountVolume", &c));
    c.exe_sha256 = Some(digest.clone());
    assert!(allowed(&p, "volume", "MountVolume", &c));
    c.exe_sha256 = Some("cd".repeat(32));
    assert!(!allowed(&p, "volume", "MountVolume", &c));
    for bad in ["abc", &"zz".repeat(32)] {
        let e = Policy::parse(&format!(r#"{{"disk": [{{"exe_sha256": "{bad}"}}]}}"#)).unwrap_err();
        assert!(e.to_string().contains("64 hex digits"), "{e}");
    }
    assert!(!Policy::parse(r#"{"disk": [{"uid": 0}]}"#)
        .unwrap()
        .hashes_executables());
}

/// The reloader reads regular files only, capped, and never blocks: a
/// FIFO, a device or an oversized file in the policy's place is refused
/// (the error says why), the policy in force stays, and later reloads
/// still work.
#[cfg(unix)]
#[test]
fn the_reloader_refuses_fifos_devices_and_huge_files_without_hanging() {
    let (dir, f) = policy_file(r#"{"filesystem": [{"uid": 0}]}"#);
    let path = f.path().to_path_buf();
    let fifo = dir.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let huge = dir.path().join("huge.json");
    std::fs::write(&huge, vec![b' '; (MAX_BYTES + 1) as usize]).unwrap();
    for (target, why) in [
        (fifo.as_path(), "FIFO"),
        (std::path::Path::new("/dev/zero"), "device"),
        (huge.as_path(), "more than"),
        (dir.path(), "directory"),
    ] {
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(target, &path).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let f2 = f.clone();
        std::thread::spawn(move || {
            let _ = tx.send(f2.reload("test").map_err(|e| e.to_string()));
        });
        let r = rx
            .recv_timeout(std::time::Duration::from_secs(5))
            .unwrap_or_else(|_| panic!("reload through a link to {target:?} hung"));
        let e = r.unwrap_err();
        assert!(e.contains(why), "{target:?}: {e}");
        assert!(allowed(&f.current(), "filesystem", "Mkdir", &caller(0)));
    }
    // A regular file again (through a link, as a ConfigMap mount has it).
    let real = dir.path().join("real.json");
    std::fs::write(&real, r#"{"filesystem": [{"uid": 1000}]}"#).unwrap();
    std::fs::remove_file(&path).unwrap();
    std::os::unix::fs::symlink(&real, &path).unwrap();
    f.reload("test").unwrap();
    assert!(!allowed(&f.current(), "filesystem", "Mkdir", &caller(0)));
}

/// `"system/services"`: per caller, the services it may start or stop
/// (the first matching entry decides; a caller no entry matches gets
/// none); without the rule nothing is narrowed. Bad entries make the file
/// invalid.
#[test]
fn the_services_rule_narrows_start_and_stop_per_caller() {
    let p = Policy::parse(
        r#"{"system": [{"uid": 0}, {"uid": 1000}],
            "system/services": [{"uid": 0, "services": ["iscsid", "multipathd"]},
                                {"uid": 1000, "services": []}]}"#,
    )
    .unwrap();
    let svc = |n: &str| {
        if cfg!(windows) {
            n.to_string()
        } else {
            format!("{n}.service")
        }
    };
    let root = p.services_for(&caller(0)).unwrap();
    assert!(root.allows(&svc("iscsid")) && root.allows(&svc("multipathd")));
    assert!(!root.allows(&svc("open-iscsi")));
    let none = p.services_for(&caller(1000)).unwrap();
    assert!(!none.allows(&svc("iscsid")));
    let unmatched = p.services_for(&caller(7)).unwrap();
    assert!(!unmatched.allows(&svc("iscsid")));
    assert_eq!(p.services_for(&caller(0)), Some(root));
    // Without the rule: no narrowing.
    let p = Policy::parse(r#"{"system": [{"uid": 0}]}"#).unwrap();
    assert_eq!(p.services_for(&caller(0)), None);
    for bad in [
        r#"{"system/services": {"uid": 0}}"#,
        r#"{"system/services": [{"uid": 0}]}"#,
        r#"{"system/services": [{"uid": 0, "services": "iscsid"}]}"#,
        r#"{"system/services": [{"uid": 0, "services": [1]}]}"#,
        r#"{"system/services": [{"uid": 0, "services": ["a/b"]}]}"#,
        r#"{"system/services": [{"services": ["iscsid"]}]}"#,
        r#"{"system/services": [{"uid": 0, "usr": 1, "services": []}]}"#,
    ] {
        let e = Policy::parse(bad).unwrap_err();
        assert!(matches!(e, PolicyError::Invalid(_)), "{bad}: {e}");
        assert!(e.to_string().contains("line 1"), "{bad}: {e}");
    }
}

#[test]
fn the_kernel_identities_entries_on_a_digest_name() {
    let d = "ab".repeat(32);
    let p = Policy::parse(&format!(
        r#"{{"filesystem": [{{"uid": 0, "exe_sha256": "{d}"}}, {{"exe_sha256": "{d}"}}, {{"uid": 7}}],
            "volume": [{{"pod_uid": "P-1", "exe_sha256": "{d}"}}, {{"uid": 0, "exe_sha256": "{d}"}}]}}"#
    ))
    .unwrap();
    let mut named = p.digest_named();
    named.sort();
    // An entry on the digest alone names nobody; one without a digest is
    // not about hashing; each identity once.
    assert_eq!(named, [(None, Some("P-1".to_string())), (Some(0), None)]);
}
