use super::*;
use std::io::Write as _;

fn caller(uid: u32) -> Caller {
    Caller {
        pid: Some(10),
        uid: Some(uid),
        exe: Some("/usr/bin/csi-node".into()),
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
    assert!(p.allows("filesystem", "Mkdir", &caller(0)));
    assert!(p.allows("filesystem", "Mkdir", &caller(1000)));
    let mut other_pod = caller(1000);
    other_pod.pod_uid = None;
    assert!(!p.allows("filesystem", "Mkdir", &other_pod));
    // The method entry decides for its method, whatever the group says.
    assert!(p.allows("volume", "MountVolume", &caller(0)));
    assert!(!p.allows("volume", "FormatVolume", &caller(0)));
    assert!(p.allows("volume", "FormatVolume", &caller(1000)));
    let mut other_exe = caller(1000);
    other_exe.exe = Some("/usr/bin/evil".into());
    assert!(!p.allows("volume", "FormatVolume", &other_exe));
    // Groups not named: refused to everyone.
    assert!(!p.allows("disk", "ListDiskIDs", &caller(0)));
    assert!(!p.allows("smb", "NewSmbGlobalMapping", &caller(0)));
    // An identity that could not be read matches nothing.
    assert!(!p.allows("system", "GetService", &caller(0)));
    let sys = Caller {
        sid: Some("s-1-5-18".into()),
        ..Caller::default()
    };
    assert!(p.allows("system", "GetService", &sys));
    assert!(!Policy::parse("{}")
        .unwrap()
        .allows("filesystem", "PathExists", &caller(0)));
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
    assert!(err(r#"{"disk": {"uid": 0}}"#).contains("must be a list"));
    assert!(err(r#"{"disk": [{}]}"#).contains("match everyone"));
    assert!(err(r#"{"disk": [{"user": 0}]}"#).contains("unknown key \"user\""));
    assert!(err(r#"{"disk": [{"uid": -1}]}"#).contains("\"uid\" must be a number"));
    assert!(err(r#"{"disk": [{"sid": ""}]}"#).contains("non-empty string"));
    assert!(err(r#"{"disk": [7]}"#).contains("must be an object"));
}

#[test]
fn reload_keeps_the_old_policy_when_the_new_file_is_bad() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.json");
    std::fs::write(&path, r#"{"filesystem": [{"uid": 0}]}"#).unwrap();
    let f = PolicyFile::load(&path).unwrap();
    assert!(f.current().allows("filesystem", "Mkdir", &caller(0)));
    std::fs::write(&path, r#"{"filesystem": [{"uid": 1000}]}"#).unwrap();
    f.reload("test").unwrap();
    assert!(!f.current().allows("filesystem", "Mkdir", &caller(0)));
    assert!(f.current().allows("filesystem", "Mkdir", &caller(1000)));
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
    assert!(f.current().allows("filesystem", "Mkdir", &caller(1000)));
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
