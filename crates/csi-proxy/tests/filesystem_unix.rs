//! The Filesystem API of every version, over the real binary's Unix sockets.
#![cfg(unix)]

mod common;

use common::{assert_code, Proxy};
use csi_proxy_api::filesystem::{v1, v1alpha1, v1beta1, v1beta2, v2alpha1};
use std::path::Path;
use tonic::Code;

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// Hostile paths: each must be rejected with one of the codes, touching nothing.
fn hostile(proxy: &Proxy) -> Vec<(String, Code)> {
    let k = s(&proxy.kubelet);
    let o = s(&proxy.outside);
    vec![
        (String::new(), Code::InvalidArgument),
        ("relative/path".into(), Code::InvalidArgument),
        (format!("{k}/../outside/sentinel"), Code::InvalidArgument),
        (format!("{k}/a/../../outside"), Code::InvalidArgument),
        (format!("{k}X/x"), Code::PermissionDenied),
        (format!("{o}/sentinel"), Code::PermissionDenied),
        ("/etc/passwd".into(), Code::PermissionDenied),
        ("/".into(), Code::PermissionDenied),
        (format!("{k}/a\0b"), Code::InvalidArgument),
        (format!("{k}//double"), Code::InvalidArgument),
        (format!("{k}/./x"), Code::InvalidArgument),
        (format!("{k}/line\nbreak"), Code::InvalidArgument),
        (format!("{k}/{}", "a".repeat(300)), Code::InvalidArgument),
        (format!("{k}/escape/inner"), Code::PermissionDenied),
        (format!("{k}/escape/sentinel"), Code::PermissionDenied),
    ]
}

/// Plant a link inside the kubelet dir that leads outside.
fn plant_escape(proxy: &Proxy) {
    let link = proxy.kubelet.join("escape");
    if !link.exists() {
        std::os::unix::fs::symlink(&proxy.outside, link).unwrap();
    }
}

macro_rules! modern_version_test {
    ($name:ident, $ver:ident, $endpoint:literal) => {
        #[tokio::test]
        async fn $name() {
            use $ver::filesystem_client::FilesystemClient;
            use $ver::*;
            let proxy = Proxy::start(&[]);
            let mut c = FilesystemClient::new(proxy.channel($endpoint).await);
            let dir = proxy
                .kubelet
                .join("pods/uid-1/volumes/kubernetes.io~csi/pvc-1");
            let d = s(&dir);

            // PathExists / Mkdir
            let exists = |c: &mut FilesystemClient<_>, p: String| {
                let mut c = c.clone();
                async move {
                    c.path_exists(PathExistsRequest { path: p })
                        .await
                        .unwrap()
                        .into_inner()
                        .exists
                }
            };
            assert!(!exists(&mut c, d.clone()).await);
            c.mkdir(MkdirRequest { path: d.clone() }).await.unwrap();
            assert!(dir.is_dir());
            assert!(exists(&mut c, d.clone()).await);
            c.mkdir(MkdirRequest { path: d.clone() })
                .await
                .expect("mkdir is idempotent");

            // CreateSymlink: the link is at target_path and points to source_path.
            let staging = proxy.work.join("staging");
            std::fs::create_dir_all(&staging).unwrap();
            std::fs::write(staging.join("data"), b"x").unwrap();
            let link = dir.join("mount");
            c.create_symlink(CreateSymlinkRequest {
                source_path: s(&staging),
                target_path: s(&link),
            })
            .await
            .unwrap();
            assert_eq!(std::fs::read_link(&link).unwrap(), staging);
            assert!(
                c.is_symlink(IsSymlinkRequest { path: s(&link) })
                    .await
                    .unwrap()
                    .into_inner()
                    .is_symlink
            );
            assert!(
                !c.is_symlink(IsSymlinkRequest { path: d.clone() })
                    .await
                    .unwrap()
                    .into_inner()
                    .is_symlink
            );
            let again = c
                .create_symlink(CreateSymlinkRequest {
                    source_path: s(&staging),
                    target_path: s(&link),
                })
                .await;
            assert_code(again, &[Code::AlreadyExists], "second CreateSymlink");

            // Rmdir of the link removes the link, never what it points to.
            c.rmdir(RmdirRequest {
                path: s(&link),
                force: true,
            })
            .await
            .unwrap();
            assert!(!link.exists() && staging.join("data").exists());

            // Rmdir without force: only empty directories.
            std::fs::write(dir.join("f"), b"1").unwrap();
            assert_code(
                c.rmdir(RmdirRequest {
                    path: d.clone(),
                    force: false,
                })
                .await,
                &[Code::FailedPrecondition],
                "rmdir non-empty",
            );
            c.rmdir(RmdirRequest {
                path: d.clone(),
                force: true,
            })
            .await
            .unwrap();
            assert!(!dir.exists());
            c.rmdir(RmdirRequest {
                path: d.clone(),
                force: true,
            })
            .await
            .expect("force rmdir of a missing path succeeds");
            assert_code(
                c.rmdir(RmdirRequest {
                    path: d.clone(),
                    force: false,
                })
                .await,
                &[Code::NotFound],
                "rmdir missing",
            );

            // The allowed roots themselves cannot be removed.
            assert_code(
                c.rmdir(RmdirRequest {
                    path: s(&proxy.kubelet),
                    force: true,
                })
                .await,
                &[Code::PermissionDenied],
                "rmdir root",
            );

            // Hostile input: clear errors, and nothing on disk changes.
            plant_escape(&proxy);
            let before = proxy.snapshot();
            let safe = s(&proxy.work.join("safe"));
            for (p, code) in hostile(&proxy) {
                let codes = [code];
                assert_code(
                    c.path_exists(PathExistsRequest { path: p.clone() }).await,
                    &codes,
                    &format!("PathExists {p:?}"),
                );
                assert_code(
                    c.mkdir(MkdirRequest { path: p.clone() }).await,
                    &codes,
                    &format!("Mkdir {p:?}"),
                );
                assert_code(
                    c.rmdir(RmdirRequest {
                        path: p.clone(),
                        force: true,
                    })
                    .await,
                    &codes,
                    &format!("Rmdir {p:?}"),
                );
                assert_code(
                    c.is_symlink(IsSymlinkRequest { path: p.clone() }).await,
                    &codes,
                    &format!("IsSymlink {p:?}"),
                );
                assert_code(
                    c.create_symlink(CreateSymlinkRequest {
                        source_path: p.clone(),
                        target_path: safe.clone(),
                    })
                    .await,
                    &codes,
                    &format!("CreateSymlink source {p:?}"),
                );
                assert_code(
                    c.create_symlink(CreateSymlinkRequest {
                        source_path: s(&staging),
                        target_path: p.clone(),
                    })
                    .await,
                    &codes,
                    &format!("CreateSymlink target {p:?}"),
                );
            }
            assert_eq!(
                proxy.snapshot(),
                before,
                "a rejected request changed the host"
            );
            extra_checks!($ver, c, proxy, before);
        }
    };
}

macro_rules! extra_checks {
    (v2alpha1, $c:ident, $proxy:ident, $before:ident) => {{
        use v2alpha1::RmdirContentsRequest;
        for (p, code) in hostile(&$proxy) {
            assert_code(
                $c.rmdir_contents(RmdirContentsRequest { path: p.clone() })
                    .await,
                &[code],
                &format!("RmdirContents {p:?}"),
            );
        }
        // Following a planted link to empty a directory outside is refused.
        assert_code(
            $c.rmdir_contents(RmdirContentsRequest {
                path: s(&$proxy.kubelet.join("escape")),
            })
            .await,
            &[Code::PermissionDenied],
            "RmdirContents through a link",
        );
        assert_code(
            $c.rmdir_contents(RmdirContentsRequest {
                path: s(&$proxy.kubelet),
            })
            .await,
            &[Code::PermissionDenied],
            "empty a root",
        );
        assert_eq!(
            $proxy.snapshot(),
            $before,
            "a rejected request changed the host"
        );
        let d = $proxy.kubelet.join("plugins/x/globalmount");
        std::fs::create_dir_all(d.join("sub/deeper")).unwrap();
        std::fs::write(d.join("file"), b"1").unwrap();
        std::os::unix::fs::symlink(&$proxy.outside, d.join("link-out")).unwrap();
        $c.rmdir_contents(RmdirContentsRequest { path: s(&d) })
            .await
            .unwrap();
        assert!(d.is_dir());
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0);
        assert!(
            $proxy.outside.join("sentinel").exists(),
            "a link inside was followed"
        );
    }};
    ($other:ident, $c:ident, $proxy:ident, $before:ident) => {};
}

modern_version_test!(filesystem_v1beta2, v1beta2, "filesystem-v1beta2");
modern_version_test!(filesystem_v1, v1, "filesystem-v1");
modern_version_test!(filesystem_v2alpha1, v2alpha1, "filesystem-v2alpha1");

macro_rules! old_version_test {
    ($name:ident, $ver:ident, $endpoint:literal) => {
        #[tokio::test]
        async fn $name() {
            use $ver::filesystem_client::FilesystemClient;
            use $ver::*;
            let proxy = Proxy::start(&[]);
            let mut c = FilesystemClient::new(proxy.channel($endpoint).await);
            let dir = proxy.kubelet.join("plugins/old");
            let d = s(&dir);
            let pod = PathContext::Pod as i32;
            let r = c
                .path_exists(PathExistsRequest {
                    path: d.clone(),
                    context: pod,
                })
                .await
                .unwrap()
                .into_inner();
            assert!(!r.exists);
            assert!(r.error.is_empty(), "the old error field is never set");
            let r = c
                .mkdir(MkdirRequest {
                    path: d.clone(),
                    context: PathContext::Plugin as i32,
                })
                .await
                .unwrap()
                .into_inner();
            assert!(r.error.is_empty());
            assert!(dir.is_dir());
            assert!(
                c.path_exists(PathExistsRequest {
                    path: d.clone(),
                    context: pod
                })
                .await
                .unwrap()
                .into_inner()
                .exists
            );

            // LinkPath = CreateSymlink; IsMountPoint = IsSymlink.
            let link = proxy.kubelet.join("plugins/link");
            c.link_path(LinkPathRequest {
                source_path: d.clone(),
                target_path: s(&link),
            })
            .await
            .unwrap();
            assert_eq!(std::fs::read_link(&link).unwrap(), dir);
            let r = c
                .is_mount_point(IsMountPointRequest { path: s(&link) })
                .await
                .unwrap()
                .into_inner();
            assert!(r.is_mount_point && r.error.is_empty());
            assert!(
                !c.is_mount_point(IsMountPointRequest { path: d.clone() })
                    .await
                    .unwrap()
                    .into_inner()
                    .is_mount_point
            );

            // Unknown PathContext numbers are ignored like every context value.
            c.rmdir(RmdirRequest {
                path: s(&link),
                context: 7,
                force: false,
            })
            .await
            .unwrap();
            assert!(dir.is_dir());
            c.rmdir(RmdirRequest {
                path: d.clone(),
                context: pod,
                force: true,
            })
            .await
            .unwrap();
            assert!(!dir.exists());

            plant_escape(&proxy);
            let before = proxy.snapshot();
            for (p, code) in hostile(&proxy) {
                let codes = [code];
                assert_code(
                    c.path_exists(PathExistsRequest {
                        path: p.clone(),
                        context: pod,
                    })
                    .await,
                    &codes,
                    &format!("PathExists {p:?}"),
                );
                assert_code(
                    c.mkdir(MkdirRequest {
                        path: p.clone(),
                        context: pod,
                    })
                    .await,
                    &codes,
                    &format!("Mkdir {p:?}"),
                );
                assert_code(
                    c.rmdir(RmdirRequest {
                        path: p.clone(),
                        context: pod,
                        force: true,
                    })
                    .await,
                    &codes,
                    &format!("Rmdir {p:?}"),
                );
                assert_code(
                    c.is_mount_point(IsMountPointRequest { path: p.clone() })
                        .await,
                    &codes,
                    &format!("IsMountPoint {p:?}"),
                );
                assert_code(
                    c.link_path(LinkPathRequest {
                        source_path: d.clone(),
                        target_path: p.clone(),
                    })
                    .await,
                    &codes,
                    &format!("LinkPath {p:?}"),
                );
            }
            assert_eq!(
                proxy.snapshot(),
                before,
                "a rejected request changed the host"
            );
        }
    };
}

old_version_test!(filesystem_v1alpha1, v1alpha1, "filesystem-v1alpha1");
old_version_test!(filesystem_v1beta1, v1beta1, "filesystem-v1beta1");
