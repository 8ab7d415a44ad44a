//! `csi-proxy-client` against the real binary over Unix sockets: version
//! fallback, errors when nothing is served, custom endpoints, deadlines.
#![cfg(unix)]

mod common;

use common::Proxy;
use csi_proxy_api::filesystem::{v1, v1beta2, v2alpha1};
use csi_proxy_api::API_VERSIONS;
use csi_proxy_client::{
    AnyDiskClient, AnyFilesystemClient, Client, Error, Group, ProxyChannel, VersionPreference,
};
use std::time::{Duration, Instant};
use tonic::Code;

/// Calls a method by its full path with an empty protobuf message.
async fn raw_call(channel: ProxyChannel, path: String) -> tonic::Status {
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    grpc.unary(
        tonic::Request::new(()),
        http::uri::PathAndQuery::try_from(path).unwrap(),
        tonic_prost::ProstCodec::<(), ()>::default(),
    )
    .await
    .err()
    .unwrap_or_else(|| tonic::Status::ok(""))
}

#[tokio::test]
async fn fallback_picks_v1_when_every_version_is_served() {
    let proxy = Proxy::start(&[]);
    let client = proxy.client();
    let (api, channel) = client.connect_newest(Group::Filesystem).await.unwrap();
    assert_eq!(api.version, "v1");
    assert_eq!(channel.endpoint(), proxy.socket("filesystem-v1"));

    let kubelet = proxy.kubelet.display().to_string();
    let AnyFilesystemClient::V1(mut c) = client.connect_filesystem().await.unwrap() else {
        panic!("not v1")
    };
    assert!(
        c.path_exists(v1::PathExistsRequest {
            path: kubelet.clone()
        })
        .await
        .unwrap()
        .into_inner()
        .exists
    );

    // Opting in to the newest version picks v2alpha1, whose RmdirContents works.
    let newest = Client::builder()
        .socket_dir(&proxy.socket_dir)
        .version_preference(VersionPreference::Newest)
        .build()
        .unwrap();
    let AnyFilesystemClient::V2alpha1(mut c) = newest.connect_filesystem().await.unwrap() else {
        panic!("not v2alpha1")
    };
    let dir = proxy.kubelet.join("plugins/contents");
    std::fs::create_dir_all(dir.join("a")).unwrap();
    c.rmdir_contents(v2alpha1::RmdirContentsRequest {
        path: dir.display().to_string(),
    })
    .await
    .unwrap();
    assert!(dir.is_dir() && std::fs::read_dir(&dir).unwrap().next().is_none());

    // Every group: the most stable version; only alpha versions for iSCSI
    // and System.
    for (group, want) in [
        (Group::Disk, "v1"),
        (Group::Filesystem, "v1"),
        (Group::Iscsi, "v1alpha2"),
        (Group::Smb, "v1"),
        (Group::System, "v1alpha1"),
        (Group::Volume, "v1"),
    ] {
        let (api, _) = client.connect_newest(group).await.unwrap();
        assert_eq!((api.group, api.version), (group, want));
    }
    let AnyDiskClient::V1(_) = client.connect_disk().await.unwrap() else {
        panic!("not disk v1")
    };

    // Every one of the 23 endpoints: the channel reaches the right server,
    // which answers (its first method with an empty message) instead of a
    // transport error.
    for api in API_VERSIONS {
        let channel = client.connect(api).await.unwrap();
        assert_eq!(channel.api(), api);
        let method = api.methods()[0];
        let st = raw_call(channel, api.grpc_path(method)).await;
        assert!(
            matches!(
                st.code(),
                Code::Ok
                    | Code::InvalidArgument
                    | Code::Unimplemented
                    | Code::PermissionDenied
                    | Code::NotFound
            ),
            "{api} {method}: {st:?}"
        );
        if st.code() == Code::Unimplemented {
            // A group without a backend says so; it is not a routing error.
            assert!(
                st.message().contains(api.group.as_str()) && st.message().contains(method),
                "{api}: {st:?}"
            );
            assert!(!st.message().contains("serves only"), "{api}: {st:?}");
        }
    }
}

#[tokio::test]
async fn fallback_picks_v1beta2_of_the_served_subset() {
    let proxy = Proxy::start(&["-api-groups=filesystem-v1beta2,filesystem-v1alpha1"]);
    let mut names: Vec<String> = std::fs::read_dir(&proxy.socket_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "csi-proxy-filesystem-v1alpha1.sock",
            "csi-proxy-filesystem-v1beta2.sock"
        ]
    );
    for preference in [VersionPreference::Stable, VersionPreference::Newest] {
        let client = Client::builder()
            .socket_dir(&proxy.socket_dir)
            .version_preference(preference)
            .build()
            .unwrap();
        let (api, channel) = client.connect_newest(Group::Filesystem).await.unwrap();
        assert_eq!(api.version, "v1beta2", "{preference:?}");
        assert_eq!(channel.endpoint(), proxy.socket("filesystem-v1beta2"));
        let AnyFilesystemClient::V1beta2(mut c) = client.connect_filesystem().await.unwrap() else {
            panic!("not v1beta2")
        };
        let dir = proxy.kubelet.join("made-by-v1beta2");
        c.mkdir(v1beta2::MkdirRequest {
            path: dir.display().to_string(),
        })
        .await
        .unwrap();
        assert!(dir.is_dir());
    }
    // The versions that are not served are reported as such.
    let client = proxy.client();
    let e = client.connect_filesystem_v1().await.unwrap_err();
    assert!(matches!(e, Error::NotServed { .. }), "{e}");
    assert!(e.is_not_served());
}

#[tokio::test]
async fn no_filesystem_endpoint_is_a_clear_error() {
    let proxy = Proxy::start(&["-api-groups=disk-v1"]);
    let client = proxy.client();
    let e = client.connect_newest(Group::Filesystem).await.unwrap_err();
    assert!(e.is_not_served(), "{e}");
    let Error::NoVersionServed { group, attempts } = &e else {
        panic!("{e}")
    };
    assert_eq!(*group, Group::Filesystem);
    assert_eq!(attempts.len(), 5);
    let msg = e.to_string();
    assert!(
        msg.starts_with("no filesystem endpoint of csi-proxy accepts connections: "),
        "{msg}"
    );
    for v in ["v1", "v1beta2", "v1beta1", "v2alpha1", "v1alpha1"] {
        let sock = proxy.socket(&format!("filesystem-{v}"));
        assert!(
            msg.contains(&format!(
                "filesystem/{v} is not served: no endpoint {}",
                sock.display()
            )),
            "{msg}"
        );
    }
    let e = client.connect_filesystem().await.unwrap_err();
    assert!(matches!(e, Error::NoVersionServed { .. }), "{e}");
    // The group that is served still works.
    let (api, _) = client.connect_newest(Group::Disk).await.unwrap();
    assert_eq!(api.version, "v1");
}

#[tokio::test]
async fn a_custom_socket_dir_and_endpoint_path_work() {
    let proxy = Proxy::start(&[]);
    // The harness runs the proxy with -socket-dir=<temp>/sock.
    assert!(proxy.socket_dir.starts_with(proxy.root.path()));
    let client = Client::builder()
        .socket_dir(&proxy.socket_dir)
        .build()
        .unwrap();
    let mut c = client.connect_filesystem_v1().await.unwrap();
    let r = c
        .path_exists(v1::PathExistsRequest {
            path: proxy.kubelet.join("nope").display().to_string(),
        })
        .await
        .unwrap();
    assert!(!r.into_inner().exists);

    // One version at a path of its own (a link to the real socket); the
    // socket directory holds nothing.
    let elsewhere = proxy.root.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let link = elsewhere.join("fs.sock");
    std::os::unix::fs::symlink(proxy.socket("filesystem-v1beta2"), &link).unwrap();
    let client = Client::builder()
        .socket_dir(proxy.root.path().join("empty"))
        .endpoint_path(Group::Filesystem, "v1beta2", &link)
        .build()
        .unwrap();
    let (api, channel) = client.connect_newest(Group::Filesystem).await.unwrap();
    assert_eq!(
        (api.version, channel.endpoint()),
        ("v1beta2", link.as_path())
    );
    let mut c = client.connect_filesystem_v1beta2().await.unwrap();
    let r = c
        .path_exists(v1beta2::PathExistsRequest {
            path: proxy.kubelet.display().to_string(),
        })
        .await
        .unwrap();
    assert!(r.into_inner().exists);
    assert!(client
        .connect_filesystem_v1()
        .await
        .unwrap_err()
        .is_not_served());
}

#[tokio::test]
async fn the_default_deadline_reaches_the_server() {
    let proxy = Proxy::start(&[]);
    // A slow call: removing a large tree takes far longer than 20 ms.
    let big = proxy.kubelet.join("big");
    for d in 0..20 {
        let sub = big.join(format!("d{d}"));
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..500 {
            std::fs::write(sub.join(format!("f{f}")), b"").unwrap();
        }
    }
    let client = Client::builder()
        .socket_dir(&proxy.socket_dir)
        .timeout(Duration::from_millis(20))
        .build()
        .unwrap();
    let mut c = client.connect_filesystem_v1().await.unwrap();
    let start = Instant::now();
    let st = c
        .rmdir(v1::RmdirRequest {
            path: big.display().to_string(),
            force: true,
        })
        .await
        .unwrap_err();
    // Whichever side gives up first: the server (DEADLINE_EXCEEDED) or
    // tonic on the client side (CANCELLED "Timeout expired").
    assert!(
        matches!(st.code(), Code::DeadlineExceeded | Code::Cancelled),
        "{st:?}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    // The server got the deadline: it abandoned the call at that deadline
    // and logged it (-v=2 request lines), although the removal itself goes
    // on in the background.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let log = proxy.log();
        if log
            .lines()
            .any(|l| l.contains("/v1.Filesystem/Rmdir") && l.contains("DeadlineExceeded"))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no DeadlineExceeded logged: {log}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // A generous deadline does not get in the way.
    let client = Client::builder()
        .socket_dir(&proxy.socket_dir)
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let mut c = client.connect_filesystem_v1().await.unwrap();
    let r = c
        .path_exists(v1::PathExistsRequest {
            path: proxy.kubelet.display().to_string(),
        })
        .await
        .unwrap();
    assert!(r.into_inner().exists);
}
