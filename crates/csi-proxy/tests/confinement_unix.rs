//! Confinement of the real binary against a hostile plugin that plants
//! links and deep trees inside the roots (Linux): no answer depends on
//! what lies outside the roots, no message shows where a link leads, a
//! 100,000-level tree does not kill the proxy. The storage safety rules
//! are in `storage_safety_unix.rs`.
#![cfg(target_os = "linux")]

mod common;

use common::Proxy;
use csi_proxy_api::filesystem;
use std::path::Path;
use tonic::Code;

fn s(p: &Path) -> String {
    p.display().to_string()
}

#[tokio::test]
async fn links_to_the_outside_answer_the_same_whether_or_not_their_target_exists() {
    let proxy = Proxy::start(&[]);
    let k = &proxy.kubelet;
    std::os::unix::fs::symlink(&proxy.outside, k.join("to-existing")).unwrap();
    std::os::unix::fs::symlink(proxy.outside.join("no-such"), k.join("to-missing")).unwrap();
    std::fs::create_dir_all(k.join("inside/dir")).unwrap();
    std::os::unix::fs::symlink(k.join("inside/dir"), k.join("to-inside")).unwrap();
    std::os::unix::fs::symlink(k.join("inside/gone"), k.join("to-inside-missing")).unwrap();
    let mut c = filesystem::v1::filesystem_client::FilesystemClient::new(
        proxy.channel("filesystem-v1").await,
    );
    use filesystem::v1::*;
    let outside = s(&proxy.outside);
    let mut answers = Vec::new();
    for link in ["to-existing", "to-missing"] {
        // Through the link: refused, without looking at the target.
        for below in ["sentinel", "no-such-either"] {
            let p = s(&k.join(link).join(below));
            let e = c
                .path_exists(PathExistsRequest { path: p.clone() })
                .await
                .unwrap_err();
            assert_eq!(e.code(), Code::PermissionDenied, "{p}");
            assert!(!e.message().contains(&outside), "{p}: {}", e.message());
            let e2 = c
                .is_symlink(IsSymlinkRequest { path: p.clone() })
                .await
                .unwrap_err();
            assert_eq!(e2.code(), Code::PermissionDenied);
            assert!(!e2.message().contains(&outside), "{}", e2.message());
            answers.push((
                e.message().replace(link, "L"),
                e2.message().replace(link, "L"),
            ));
        }
        // The link itself: exists, and is a link, whatever it points to.
        let p = s(&k.join(link));
        assert!(
            c.path_exists(PathExistsRequest { path: p.clone() })
                .await
                .unwrap()
                .into_inner()
                .exists
        );
        assert!(
            c.is_symlink(IsSymlinkRequest { path: p.clone() })
                .await
                .unwrap()
                .into_inner()
                .is_symlink
        );
        // Mkdir on or below it: refused the same way.
        for p in [p.clone(), format!("{p}/new")] {
            let e = c.mkdir(MkdirRequest { path: p.clone() }).await.unwrap_err();
            assert!(!e.message().contains(&outside), "{}", e.message());
        }
    }
    assert_eq!(answers[0], answers[2], "an existence oracle: {answers:?}");
    assert_eq!(answers[1], answers[3], "an existence oracle: {answers:?}");
    // Links inside the roots keep upstream's meaning: a link whose target
    // is gone is not counted as one.
    assert!(
        c.is_symlink(IsSymlinkRequest {
            path: s(&k.join("to-inside"))
        })
        .await
        .unwrap()
        .into_inner()
        .is_symlink
    );
    assert!(
        !c.is_symlink(IsSymlinkRequest {
            path: s(&k.join("to-inside-missing"))
        })
        .await
        .unwrap()
        .into_inner()
        .is_symlink
    );
    // IsSymlink of nothing is NotFound, as upstream answers an error.
    let e = c
        .is_symlink(IsSymlinkRequest {
            path: s(&k.join("nothing")),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(!std::fs::read_dir(&proxy.outside)
        .unwrap()
        .any(|e| e.unwrap().file_name() == "new"));
}

/// `depth` nested directories below `top`, made with *at calls.
fn deep_tree(top: &Path, depth: usize) {
    use nix::fcntl::{openat, OFlag};
    use nix::sys::stat::{mkdirat, Mode};
    std::fs::create_dir_all(top).unwrap();
    let mut fd =
        nix::fcntl::open(top, OFlag::O_RDONLY | OFlag::O_DIRECTORY, Mode::empty()).unwrap();
    for _ in 0..depth {
        mkdirat(&fd, "d", Mode::from_bits_truncate(0o755)).unwrap();
        fd = openat(
            &fd,
            "d",
            OFlag::O_RDONLY | OFlag::O_DIRECTORY,
            Mode::empty(),
        )
        .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_100000_level_tree_is_answered_and_the_proxy_stays_up() {
    let proxy = Proxy::start_on_tmpfs(&[]);
    let a = proxy.kubelet.join("deep-a");
    let b = proxy.kubelet.join("deep-b");
    deep_tree(&a, 100_000);
    deep_tree(&b, 100_000);
    let mut c = filesystem::v2alpha1::filesystem_client::FilesystemClient::new(
        proxy.channel("filesystem-v2alpha1").await,
    );
    use filesystem::v2alpha1::*;
    let r = c
        .rmdir(RmdirRequest {
            path: s(&a),
            force: true,
        })
        .await;
    match &r {
        Ok(_) => assert!(!a.exists()),
        Err(e) => assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}"),
    }
    let r = c.rmdir_contents(RmdirContentsRequest { path: s(&b) }).await;
    match &r {
        Ok(_) => assert_eq!(std::fs::read_dir(&b).unwrap().count(), 0),
        Err(e) => assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}"),
    }
    // Still up and answering.
    assert!(
        c.path_exists(PathExistsRequest {
            path: s(&proxy.kubelet)
        })
        .await
        .unwrap()
        .into_inner()
        .exists
    );
}
