//! The Filesystem API of every version over the real binary's named pipes
//! (Windows build; CI runs it under wine). One proxy serves the whole file,
//! because pipe names are machine-global.
//!
//! Wine fakes CreateSymbolicLinkW (success, nothing created): the backend
//! detects that and reports an error, so link creation is checked only where
//! links really exist.
#![cfg(windows)]

use csi_proxy_api::filesystem::{v1, v1alpha1, v1beta1, v1beta2, v2alpha1};
use csi_proxy_client::{Client, Group, ProxyChannel};
use std::path::Path;
use tokio::net::windows::named_pipe::ClientOptions;
use tonic::Code;

mod pipes;
use pipes::{assert_code, Proxy};

/// A channel to the filesystem pipe of `version` (the client retries while
/// every pipe instance is busy).
async fn connect(version: &str) -> ProxyChannel {
    let channel = Client::new()
        .connect_version(Group::Filesystem, version)
        .await
        .expect("connect to pipe");
    assert_eq!(
        channel.endpoint(),
        Path::new(&format!("\\\\.\\pipe\\csi-proxy-filesystem-{version}"))
    );
    channel
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn hostile(p: &Proxy) -> Vec<(String, Code)> {
    let k = s(&p.kubelet);
    let o = s(&p.outside);
    vec![
        (String::new(), Code::InvalidArgument),
        ("relative\\path".into(), Code::InvalidArgument),
        ("C:relative".into(), Code::InvalidArgument),
        (format!("{k}\\..\\outside"), Code::InvalidArgument),
        (format!("{k}X\\x"), Code::PermissionDenied),
        (format!("{o}\\sentinel"), Code::PermissionDenied),
        ("C:\\Windows\\System32".into(), Code::PermissionDenied),
        (format!("\\\\?\\{k}\\x"), Code::InvalidArgument),
        (format!("\\\\.\\{k}\\x"), Code::InvalidArgument),
        ("\\\\server\\share\\x".into(), Code::InvalidArgument),
        (format!("{k}\\a:stream"), Code::InvalidArgument),
        (format!("{k}\\CON"), Code::InvalidArgument),
        (format!("{k}\\nul.txt"), Code::InvalidArgument),
        (format!("{k}\\trailing."), Code::InvalidArgument),
        (format!("{k}\\trailing "), Code::InvalidArgument),
        (format!("{k}\\a<b"), Code::InvalidArgument),
        (format!("{k}/forward"), Code::InvalidArgument),
        (format!("{k}\\a\0b"), Code::InvalidArgument),
        (format!("{k}\\{}", "a".repeat(300)), Code::InvalidArgument),
    ]
}

/// CreateSymlink either made a real link or (wine) failed without leaving
/// anything behind. Returns whether links work here.
fn link_result<T>(r: Result<T, tonic::Status>, link: &Path) -> bool {
    match r {
        Ok(_) => {
            assert!(std::fs::symlink_metadata(link)
                .unwrap()
                .file_type()
                .is_symlink());
            true
        }
        Err(st) => {
            assert!(st.message().contains("no link exists"), "{st:?}");
            assert!(
                std::fs::symlink_metadata(link).is_err(),
                "a failed link left something behind"
            );
            false
        }
    }
}

macro_rules! modern {
    ($proxy:ident, $ver:ident) => {{
        use $ver::filesystem_client::FilesystemClient;
        use $ver::*;
        let mut c = FilesystemClient::new(connect(stringify!($ver)).await);
        let dir = $proxy.kubelet.join(format!(
            "pods\\uid\\volumes\\kubernetes.io~csi\\{}",
            stringify!($ver)
        ));
        let d = s(&dir);
        assert!(
            !c.path_exists(PathExistsRequest { path: d.clone() })
                .await
                .unwrap()
                .into_inner()
                .exists
        );
        c.mkdir(MkdirRequest { path: d.clone() }).await.unwrap();
        assert!(dir.is_dir());
        assert!(
            c.path_exists(PathExistsRequest { path: d.clone() })
                .await
                .unwrap()
                .into_inner()
                .exists
        );
        // Case-insensitive root match, as on every Windows path.
        let upper = d.to_uppercase();
        assert!(
            c.path_exists(PathExistsRequest { path: upper })
                .await
                .unwrap()
                .into_inner()
                .exists
        );
        assert!(
            !c.is_symlink(IsSymlinkRequest { path: d.clone() })
                .await
                .unwrap()
                .into_inner()
                .is_symlink
        );

        let link = dir.join("mount");
        if link_result(
            c.create_symlink(CreateSymlinkRequest {
                source_path: d.clone(),
                target_path: s(&link),
            })
            .await,
            &link,
        ) {
            assert!(
                c.is_symlink(IsSymlinkRequest { path: s(&link) })
                    .await
                    .unwrap()
                    .into_inner()
                    .is_symlink
            );
        }
        std::fs::write(dir.join("f"), b"1").unwrap();
        assert_code(
            c.rmdir(RmdirRequest {
                path: d.clone(),
                force: false,
            })
            .await,
            Code::FailedPrecondition,
            "rmdir non-empty",
        );
        c.rmdir(RmdirRequest {
            path: d.clone(),
            force: true,
        })
        .await
        .unwrap();
        assert!(!dir.exists());
        assert_code(
            c.rmdir(RmdirRequest {
                path: s(&$proxy.kubelet),
                force: true,
            })
            .await,
            Code::PermissionDenied,
            "rmdir root",
        );

        let before = $proxy.snapshot();
        for (p, code) in hostile(&$proxy) {
            assert_code(
                c.path_exists(PathExistsRequest { path: p.clone() }).await,
                code,
                &format!("PathExists {p:?}"),
            );
            assert_code(
                c.mkdir(MkdirRequest { path: p.clone() }).await,
                code,
                &format!("Mkdir {p:?}"),
            );
            assert_code(
                c.rmdir(RmdirRequest {
                    path: p.clone(),
                    force: true,
                })
                .await,
                code,
                &format!("Rmdir {p:?}"),
            );
            assert_code(
                c.is_symlink(IsSymlinkRequest { path: p.clone() }).await,
                code,
                &format!("IsSymlink {p:?}"),
            );
            assert_code(
                c.create_symlink(CreateSymlinkRequest {
                    source_path: p.clone(),
                    target_path: d.clone(),
                })
                .await,
                code,
                &format!("CreateSymlink {p:?}"),
            );
        }
        assert_eq!(
            $proxy.snapshot(),
            before,
            "a rejected request changed the host"
        );
        c
    }};
}

macro_rules! old {
    ($proxy:ident, $ver:ident) => {{
        use $ver::filesystem_client::FilesystemClient;
        use $ver::*;
        let mut c = FilesystemClient::new(connect(stringify!($ver)).await);
        let dir = $proxy
            .kubelet
            .join(format!("plugins\\{}", stringify!($ver)));
        let d = s(&dir);
        let ctx = PathContext::Plugin as i32;
        let r = c
            .path_exists(PathExistsRequest {
                path: d.clone(),
                context: ctx,
            })
            .await
            .unwrap()
            .into_inner();
        assert!(!r.exists && r.error.is_empty());
        c.mkdir(MkdirRequest {
            path: d.clone(),
            context: ctx,
        })
        .await
        .unwrap();
        assert!(dir.is_dir());
        let r = c
            .is_mount_point(IsMountPointRequest { path: d.clone() })
            .await
            .unwrap()
            .into_inner();
        assert!(!r.is_mount_point && r.error.is_empty());
        let link = dir.join("link");
        link_result(
            c.link_path(LinkPathRequest {
                source_path: d.clone(),
                target_path: s(&link),
            })
            .await,
            &link,
        );
        c.rmdir(RmdirRequest {
            path: d.clone(),
            context: ctx,
            force: true,
        })
        .await
        .unwrap();
        assert!(!dir.exists());
        let before = $proxy.snapshot();
        for (p, code) in hostile(&$proxy) {
            assert_code(
                c.mkdir(MkdirRequest {
                    path: p.clone(),
                    context: ctx,
                })
                .await,
                code,
                &format!("Mkdir {p:?}"),
            );
            assert_code(
                c.is_mount_point(IsMountPointRequest { path: p.clone() })
                    .await,
                code,
                &format!("IsMountPoint {p:?}"),
            );
        }
        assert_eq!(
            $proxy.snapshot(),
            before,
            "a rejected request changed the host"
        );
    }};
}

#[tokio::test]
async fn filesystem_api_over_named_pipes_every_version() {
    let proxy = Proxy::start("pipes", "filesystem,disk-v1");
    old!(proxy, v1alpha1);
    old!(proxy, v1beta1);
    modern!(proxy, v1beta2);
    modern!(proxy, v1);
    let mut c = modern!(proxy, v2alpha1);

    // RmdirContents (v2alpha1 only).
    let d = proxy.kubelet.join("plugins\\contents");
    std::fs::create_dir_all(d.join("a\\b")).unwrap();
    std::fs::write(d.join("f"), b"x").unwrap();
    c.rmdir_contents(v2alpha1::RmdirContentsRequest { path: s(&d) })
        .await
        .unwrap();
    assert!(d.is_dir());
    assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0);
    assert_code(
        c.rmdir_contents(v2alpha1::RmdirContentsRequest {
            path: s(&proxy.kubelet),
        })
        .await,
        Code::PermissionDenied,
        "empty a root",
    );

    // Least privilege: the filesystem pipe serves no other service, and
    // unselected groups have no pipe at all.
    let mut grpc = tonic::client::Grpc::new(connect("v1").await);
    grpc.ready().await.unwrap();
    let st = grpc
        .unary(
            tonic::Request::new(()),
            http::uri::PathAndQuery::from_static("/v1.Disk/ListDiskLocations"),
            tonic_prost::ProstCodec::<(), ()>::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(st.code(), Code::Unimplemented, "{st:?}");
    assert!(ClientOptions::new()
        .open("\\\\.\\pipe\\csi-proxy-volume-v1")
        .is_err());
    // Version fallback over the pipes: filesystem v1 is picked; no volume
    // version is served.
    let client = Client::new();
    let (api, _) = client.connect_newest(Group::Filesystem).await.unwrap();
    assert_eq!(api.version, "v1");
    let e = client.connect_newest(Group::Volume).await.unwrap_err();
    assert!(e.is_not_served(), "{e}");
    assert!(ClientOptions::new()
        .open("\\\\.\\pipe\\csi-proxy-disk-v1")
        .is_ok());

    // The pipes carry the protected DACL (wine stores it but does not enforce it).
    let aces = csi_proxy_server::transport::windows::pipe_dacl_ace_count(
        "\\\\.\\pipe\\csi-proxy-filesystem-v1",
    )
    .unwrap();
    assert_eq!(aces, 2);
    // Request lines at -v=2.
    assert!(
        proxy
            .log_text()
            .contains("/v2alpha1.Filesystem/RmdirContents"),
        "{}",
        proxy.log_text()
    );
}
