//! The validating SMB API over the recording fake and a real confined
//! filesystem on a temporary directory (Linux).

use super::fake::{Call, RecordingSmb};
use super::*;
use crate::confined::Confined;
use crate::path::{Flavor, PathPolicy};
use crate::Error;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::sync::Arc;

const SECRET: &str = "Sup3r-Secret-PW";

struct T {
    dir: tempfile::TempDir,
    kubelet: String,
    fake: Arc<RecordingSmb>,
    api: Smb<Arc<RecordingSmb>>,
}

fn setup() -> T {
    let dir = tempfile::tempdir().unwrap();
    let kubelet = dir.path().join("kubelet");
    std::fs::create_dir_all(kubelet.join("pods/p1")).unwrap();
    std::fs::create_dir_all(dir.path().join("outside")).unwrap();
    let kubelet = kubelet.display().to_string();
    let policy = PathPolicy::new(Flavor::Unix, [kubelet.clone()]).unwrap();
    let fake = Arc::new(RecordingSmb::new().with_mount_base("/run/test-smb"));
    let api = Smb::new(fake.clone(), Arc::new(Confined::new(policy)), true);
    T {
        dir,
        kubelet,
        fake,
        api,
    }
}

fn req(remote: &str, local: &str) -> NewSmbGlobalMappingRequest {
    NewSmbGlobalMappingRequest {
        remote_path: remote.into(),
        local_path: local.into(),
        username: r"DOM\user".into(),
        password: SECRET.into(),
    }
}

fn sha256(s: &str) -> Vec<u8> {
    use sha2::Digest;
    sha2::Sha256::digest(s.as_bytes()).to_vec()
}

fn no_secret(e: &Error) {
    assert!(!e.to_string().contains(SECRET), "{e}");
    assert!(!format!("{e:?}").contains(SECRET), "{e:?}");
}

#[test]
fn maps_the_root_once_and_links_the_full_path() {
    let t = setup();
    let local = format!("{}/pods/p1/vol", t.kubelet);
    t.api
        .new_smb_global_mapping(req(r"\\Srv\Share\pvc-1", &local))
        .unwrap();
    assert_eq!(
        std::fs::read_link(&local).unwrap(),
        Path::new("/run/test-smb/srv/SHARE/pvc-1")
    );
    assert_eq!(
        t.fake.calls(),
        vec![
            Call::Mapping(r"\\srv\Share".into()),
            Call::Map {
                root: r"\\srv\Share".into(),
                user: Some(r"DOM\user".into()),
                password_sha256: Some(sha256(SECRET)),
                require_privacy: true
            }
        ]
    );
    // Again, and another subdirectory of the same share: no second mapping.
    t.api
        .new_smb_global_mapping(req(r"\\Srv\Share\pvc-1", &local))
        .unwrap();
    let local2 = format!("{}/pods/p1/vol2", t.kubelet);
    t.api
        .new_smb_global_mapping(req(r"//srv/share/pvc-2", &local2))
        .unwrap();
    assert_eq!(
        std::fs::read_link(&local2).unwrap(),
        Path::new("/run/test-smb/srv/SHARE/pvc-2")
    );
    let maps = t
        .fake
        .calls()
        .iter()
        .filter(|c| matches!(c, Call::Map { .. }))
        .count();
    assert_eq!(maps, 1);
    // An empty local path maps only.
    t.api.new_smb_global_mapping(req(r"\\other\s", "")).unwrap();
    t.api
        .remove_smb_global_mapping(RemoveSmbGlobalMappingRequest {
            remote_path: r"\\SRV\share\whatever".into(),
        })
        .unwrap();
    assert!(t.fake.calls().contains(&Call::Unmap(r"\\srv\share".into())));
}

#[test]
fn an_unreachable_mapping_is_made_again() {
    let t = setup();
    let root = RemotePath::parse(r"\\srv\share").unwrap().root();
    t.fake
        .mappings
        .lock()
        .unwrap()
        .insert(root, MappingState::Unreachable);
    t.api
        .new_smb_global_mapping(req(r"\\srv\share", ""))
        .unwrap();
    let calls = t.fake.calls();
    assert_eq!(calls[1], Call::Unmap(r"\\srv\share".into()));
    assert!(matches!(calls[2], Call::Map { .. }));
}

#[test]
fn a_bad_local_path_is_refused_before_anything_is_mapped() {
    let t = setup();
    let k = &t.kubelet;
    let outside = t.dir.path().join("outside").display().to_string();
    symlink(&outside, format!("{k}/escape")).unwrap();
    std::fs::create_dir(format!("{k}/pods/p1/existing-dir")).unwrap();
    symlink("/elsewhere", format!("{k}/pods/p1/other-link")).unwrap();
    for local in [
        format!("{outside}/x"),
        "/etc/x".to_string(),
        k.clone(),
        format!("{k}/../outside/x"),
        format!("{k}/escape/x"),
        format!("{k}/pods/p1/existing-dir"),
        format!("{k}/pods/p1/other-link"),
        format!("{k}/no/such/parent/x"),
        format!("{k}/pods/p1/a\0b"),
        "relative/x".to_string(),
    ] {
        let e = t
            .api
            .new_smb_global_mapping(req(r"\\srv\share", &local))
            .unwrap_err();
        no_secret(&e);
        assert!(
            !matches!(e, Error::Internal(_) | Error::Io { .. }),
            "{local}: {e:?}"
        );
    }
    assert!(t.fake.calls().is_empty(), "{:?}", t.fake.calls());
    assert!(!Path::new(&outside).join("x").exists());
}

#[test]
fn hostile_remote_paths_and_users_never_reach_the_backend() {
    let t = setup();
    let local = format!("{}/pods/p1/vol", t.kubelet);
    for &r in super::validate::tests_hostile() {
        let e = t.api.new_smb_global_mapping(req(r, &local)).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{r:?}: {e}");
        no_secret(&e);
        let e = t
            .api
            .remove_smb_global_mapping(RemoveSmbGlobalMappingRequest {
                remote_path: r.to_string(),
            })
            .unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{r:?}: {e}");
    }
    for user in ["a:b", "x\ny", r"a\b\c"] {
        let mut q = req(r"\\srv\share", &local);
        q.username = user.into();
        let e = t.api.new_smb_global_mapping(q).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        no_secret(&e);
    }
    assert!(t.fake.calls().is_empty());
    assert!(std::fs::symlink_metadata(&local).is_err());
}

#[test]
fn a_failed_mapping_leaves_no_link() {
    let t = setup();
    *t.fake.fail_map.lock().unwrap() = Some("no way".into());
    let local = format!("{}/pods/p1/vol", t.kubelet);
    let e = t
        .api
        .new_smb_global_mapping(req(r"\\srv\share", &local))
        .unwrap_err();
    assert!(matches!(e, Error::FailedPrecondition(_)), "{e}");
    no_secret(&e);
    assert!(std::fs::symlink_metadata(&local).is_err());
}

/// Without a user name the host would sign in as itself to whatever host
/// the plugin names: refused by default, before the backend is asked
/// anything or a link made; allowed by the operator's flag.
#[test]
fn a_mapping_without_a_user_is_refused_unless_allowed() {
    let t = setup();
    let local = format!("{}/pods/p1/vol", t.kubelet);
    let anonymous = NewSmbGlobalMappingRequest {
        remote_path: r"\\Attacker.Example\Share\pvc".into(),
        local_path: local.clone(),
        username: String::new(),
        password: String::new(),
    };
    let e = t.api.new_smb_global_mapping(anonymous.clone()).unwrap_err();
    assert!(matches!(e, Error::PermissionDenied(_)), "{e}");
    let msg = e.to_string();
    assert!(msg.contains(r"\\attacker.example\Share"), "{msg}");
    assert!(msg.contains(ALLOW_NO_CREDENTIALS_FLAG), "{msg}");
    assert!(t.fake.calls().is_empty(), "{:?}", t.fake.calls());
    assert!(std::fs::symlink_metadata(&local).is_err());

    let allowed = Smb::new(
        t.fake.clone(),
        Arc::new(Confined::new(
            PathPolicy::new(Flavor::Unix, [t.kubelet.clone()]).unwrap(),
        )),
        true,
    )
    .allowing_no_credentials(true);
    allowed.new_smb_global_mapping(anonymous).unwrap();
    assert_eq!(
        t.fake.calls(),
        vec![
            Call::Mapping(r"\\attacker.example\Share".into()),
            Call::Map {
                root: r"\\attacker.example\Share".into(),
                user: None,
                password_sha256: None,
                require_privacy: true
            }
        ]
    );
    assert!(std::fs::symlink_metadata(&local).is_ok());
}
