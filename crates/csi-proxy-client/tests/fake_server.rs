//! The client against a minimal fake gRPC server (hyper's HTTP/2) on real
//! Unix sockets (Linux) or named pipes (Windows): endpoints, fallback,
//! errors, the `grpc-timeout` header, reconnecting, busy pipes.
//!
//! The fake answers every call with a trailers-only status `NOT_FOUND` whose
//! message describes the request it received:
//! `path=<grpc path> grpc-timeout=<header or none> conn=<connection number>`.

use csi_proxy_api::filesystem::v1::PathExistsRequest;
use csi_proxy_client::{AnyFilesystemClient, Client, Error, Group};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tonic::Code;

/// What the fake saw, as it reported it in the status message.
#[derive(Debug, PartialEq)]
struct Seen {
    path: String,
    timeout: String,
    conn: usize,
}

fn seen(st: &tonic::Status) -> Seen {
    assert_eq!(st.code(), Code::NotFound, "not the fake's answer: {st:?}");
    let mut path = None;
    let mut timeout = None;
    let mut conn = None;
    for kv in st.message().split(' ') {
        let (k, v) = kv.split_once('=').unwrap();
        match k {
            "path" => path = Some(v.to_string()),
            "grpc-timeout" => timeout = Some(v.to_string()),
            "conn" => conn = Some(v.parse().unwrap()),
            _ => panic!("{kv}"),
        }
    }
    Seen {
        path: path.unwrap(),
        timeout: timeout.unwrap(),
        conn: conn.unwrap(),
    }
}

/// Serve one accepted connection with HTTP/2. With `close_after_first`,
/// the connection is dropped shortly after its first answer.
async fn serve_connection<I>(io: I, conn: usize, close_after_first: bool)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (answered, mut answered_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let service = hyper::service::service_fn(move |req: http::Request<Incoming>| {
        let timeout = req
            .headers()
            .get("grpc-timeout")
            .map_or("none".to_string(), |v| v.to_str().unwrap().to_string());
        let message = format!(
            "path={} grpc-timeout={timeout} conn={conn}",
            req.uri().path()
        );
        let _ = answered.send(());
        async move {
            let resp = http::Response::builder()
                .header("content-type", "application/grpc")
                .header("grpc-status", "5")
                .header("grpc-message", message)
                .body(tonic::body::Body::empty())
                .unwrap();
            Ok::<_, Infallible>(resp)
        }
    });
    let connection = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
        .serve_connection(TokioIo::new(io), service);
    if close_after_first {
        tokio::select! {
            _ = connection => {}
            _ = async {
                answered_rx.recv().await;
                tokio::time::sleep(Duration::from_millis(100)).await;
            } => {}
        }
    } else {
        let _ = connection.await;
    }
}

/// Calls PathExists on a filesystem v1 client and returns what the fake saw.
async fn path_exists_v1(
    c: &mut csi_proxy_api::filesystem::v1::filesystem_client::FilesystemClient<
        csi_proxy_client::ProxyChannel,
    >,
    timeout: Option<Duration>,
) -> Seen {
    let mut req = tonic::Request::new(PathExistsRequest { path: "/x".into() });
    if let Some(t) = timeout {
        req.set_timeout(t);
    }
    seen(&c.path_exists(req).await.unwrap_err())
}

#[cfg(unix)]
mod unix {
    use super::*;
    use csi_proxy_client::VersionPreference;
    use std::path::{Path, PathBuf};
    use tokio::net::UnixListener;

    /// A fake endpoint at `path`; returns the number of accepted connections.
    fn serve(path: &Path, close_after_first: bool) -> Arc<AtomicUsize> {
        let listener = UnixListener::bind(path).unwrap();
        let count = Arc::new(AtomicUsize::new(0));
        let c = count.clone();
        tokio::spawn(async move {
            loop {
                let (s, _) = listener.accept().await.unwrap();
                let n = c.fetch_add(1, Ordering::SeqCst) + 1;
                tokio::spawn(serve_connection(s, n, close_after_first));
            }
        });
        count
    }

    fn sock(dir: &Path, endpoint: &str) -> PathBuf {
        dir.join(format!("csi-proxy-{endpoint}.sock"))
    }

    #[tokio::test]
    async fn the_default_deadline_is_sent_as_grpc_timeout() {
        let dir = tempfile::tempdir().unwrap();
        serve(&sock(dir.path(), "filesystem-v1"), false);
        let client = Client::builder()
            .socket_dir(dir.path())
            .timeout(Duration::from_millis(250))
            .build()
            .unwrap();
        let mut c = client.connect_filesystem_v1().await.unwrap();
        let s = path_exists_v1(&mut c, None).await;
        assert_eq!(s.path, "/v1.Filesystem/PathExists");
        assert_eq!(s.timeout, "250000u");
        // A deadline set on the request wins.
        let s = path_exists_v1(&mut c, Some(Duration::from_secs(3))).await;
        assert_eq!(s.timeout, "3000000u");
        // Without a default deadline no header is sent.
        let client = Client::builder().socket_dir(dir.path()).build().unwrap();
        let mut c = client.connect_filesystem_v1().await.unwrap();
        assert_eq!(path_exists_v1(&mut c, None).await.timeout, "none");
        // The raw channel carries the deadline too.
        let ch = Client::builder()
            .socket_dir(dir.path())
            .timeout(Duration::from_secs(7))
            .build()
            .unwrap()
            .connect_version(Group::Filesystem, "v1")
            .await
            .unwrap();
        assert_eq!(ch.timeout(), Some(Duration::from_secs(7)));
        let mut grpc = tonic::client::Grpc::new(ch);
        grpc.ready().await.unwrap();
        let st = grpc
            .unary(
                tonic::Request::new(()),
                http::uri::PathAndQuery::from_static("/v1.Disk/Anything"),
                tonic_prost::ProstCodec::<(), ()>::default(),
            )
            .await
            .unwrap_err();
        let s = seen(&st);
        assert_eq!(
            (s.path.as_str(), s.timeout.as_str()),
            ("/v1.Disk/Anything", "7000000u")
        );
    }

    #[tokio::test]
    async fn fallback_follows_the_version_preference() {
        let dir = tempfile::tempdir().unwrap();
        for v in ["v1beta1", "v2alpha1", "v1alpha1"] {
            serve(&sock(dir.path(), &format!("filesystem-{v}")), false);
        }
        let stable = Client::builder().socket_dir(dir.path()).build().unwrap();
        let (api, ch) = stable.connect_newest(Group::Filesystem).await.unwrap();
        assert_eq!(api.version, "v1beta1");
        assert_eq!(ch.api(), api);
        assert_eq!(ch.endpoint(), sock(dir.path(), "filesystem-v1beta1"));
        let any = stable.connect_filesystem().await.unwrap();
        assert_eq!(any.api().version, "v1beta1");
        assert!(matches!(any, AnyFilesystemClient::V1beta1(_)));

        let newest = Client::builder()
            .socket_dir(dir.path())
            .version_preference(VersionPreference::Newest)
            .build()
            .unwrap();
        let (api, _) = newest.connect_newest(Group::Filesystem).await.unwrap();
        assert_eq!(api.version, "v2alpha1");
        match newest.connect_filesystem().await.unwrap() {
            AnyFilesystemClient::V2alpha1(mut c) => {
                let st = c
                    .rmdir_contents(csi_proxy_api::filesystem::v2alpha1::RmdirContentsRequest {
                        path: "/p".into(),
                    })
                    .await
                    .unwrap_err();
                assert_eq!(seen(&st).path, "/v2alpha1.Filesystem/RmdirContents");
            }
            other => panic!("picked {}", other.api()),
        }
    }

    #[tokio::test]
    async fn a_stale_socket_is_skipped_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        // Bound and closed: the file stays, nobody listens.
        drop(std::os::unix::net::UnixListener::bind(sock(dir.path(), "filesystem-v1")).unwrap());
        serve(&sock(dir.path(), "filesystem-v1beta2"), false);
        let client = Client::builder().socket_dir(dir.path()).build().unwrap();
        let (api, _) = client.connect_newest(Group::Filesystem).await.unwrap();
        assert_eq!(api.version, "v1beta2");
        let e = client.connect_filesystem_v1().await.unwrap_err();
        match &e {
            Error::Connect { source, .. } => {
                assert_eq!(source.kind(), std::io::ErrorKind::ConnectionRefused)
            }
            other => panic!("{other}"),
        }
        assert!(!e.is_not_served());
        assert!(
            e.to_string()
                .starts_with("cannot connect to filesystem/v1 at "),
            "{e}"
        );
    }

    #[tokio::test]
    async fn nothing_served_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        serve(&sock(dir.path(), "disk-v1"), false);
        let client = Client::builder().socket_dir(dir.path()).build().unwrap();
        let e = client.connect_newest(Group::Filesystem).await.unwrap_err();
        assert!(e.is_not_served(), "{e}");
        let Error::NoVersionServed { group, attempts } = &e else {
            panic!("{e}")
        };
        assert_eq!(*group, Group::Filesystem);
        let tried: Vec<&str> = attempts.iter().map(|a| a.api().unwrap().version).collect();
        assert_eq!(tried, ["v1", "v1beta2", "v1beta1", "v2alpha1", "v1alpha1"]);
        let msg = e.to_string();
        assert!(
            msg.starts_with("no filesystem endpoint of csi-proxy accepts connections: filesystem/v1 is not served: no endpoint "),
            "{msg}"
        );
        assert!(msg.contains("csi-proxy-filesystem-v1alpha1.sock"), "{msg}");
        let e = client.connect_filesystem_v1().await.unwrap_err();
        assert!(matches!(e, Error::NotServed { .. }), "{e}");
        // A missing socket directory is the same.
        let client = Client::builder()
            .socket_dir(dir.path().join("nope"))
            .build()
            .unwrap();
        assert!(client.connect_disk().await.unwrap_err().is_not_served());
    }

    #[tokio::test]
    async fn an_endpoint_path_override_is_used() {
        let dir = tempfile::tempdir().unwrap();
        let custom = dir.path().join("elsewhere.sock");
        serve(&custom, false);
        let client = Client::builder()
            .socket_dir(dir.path().join("empty"))
            .endpoint_path(Group::Filesystem, "v1", &custom)
            .timeout(Duration::from_secs(1))
            .build()
            .unwrap();
        let mut c = client.connect_filesystem_v1().await.unwrap();
        assert_eq!(path_exists_v1(&mut c, None).await.timeout, "1000000u");
        let (api, ch) = client.connect_newest(Group::Filesystem).await.unwrap();
        assert_eq!((api.version, ch.endpoint()), ("v1", custom.as_path()));
    }

    #[tokio::test]
    async fn a_broken_connection_is_redialed() {
        let dir = tempfile::tempdir().unwrap();
        let count = serve(&sock(dir.path(), "filesystem-v1"), true);
        let client = Client::builder().socket_dir(dir.path()).build().unwrap();
        let mut c = client.connect_filesystem_v1().await.unwrap();
        assert_eq!(path_exists_v1(&mut c, None).await.conn, 1);
        // The fake drops the connection after its first answer; the channel
        // dials again (a call racing with the close may fail Unavailable).
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            match c.path_exists(PathExistsRequest { path: "/x".into() }).await {
                Err(st) if st.code() == Code::NotFound && seen(&st).conn == 2 => break,
                Err(st) if st.code() == Code::NotFound => {}
                Err(st) => assert_eq!(st.code(), Code::Unavailable, "{st:?}"),
                Ok(r) => panic!("{r:?}"),
            }
            assert!(tokio::time::Instant::now() < deadline, "no reconnect");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(count.load(Ordering::SeqCst), 2);
    }
}

#[cfg(windows)]
#[path = "common/owned_pipe.rs"]
mod owned_pipe;

#[cfg(windows)]
mod windows {
    use super::owned_pipe;
    use super::*;
    use std::path::PathBuf;

    /// A pipe prefix no other test process uses.
    fn prefix(test: &str) -> String {
        format!(
            r"\\.\pipe\csi-proxy-client-test-{}-{test}-",
            std::process::id()
        )
    }

    /// A fake endpoint on pipe `name` that creates the next instance right
    /// after a client connected (`next_instance_delay` later).
    fn serve(name: PathBuf, next_instance_delay: Duration) -> Arc<AtomicUsize> {
        let mut server = owned_pipe::create(&name, true).unwrap();
        let count = Arc::new(AtomicUsize::new(0));
        let c = count.clone();
        tokio::spawn(async move {
            loop {
                server.connect().await.unwrap();
                let n = c.fetch_add(1, Ordering::SeqCst) + 1;
                tokio::spawn(serve_connection(server, n, false));
                tokio::time::sleep(next_instance_delay).await;
                server = owned_pipe::create(&name, false).unwrap();
            }
        });
        count
    }

    #[tokio::test]
    async fn pipes_deadlines_and_fallback() {
        let p = prefix("basic");
        serve(
            PathBuf::from(format!("{p}filesystem-v1beta2")),
            Duration::ZERO,
        );
        let client = Client::builder()
            .pipe_prefix(&p)
            .timeout(Duration::from_millis(1500))
            .build()
            .unwrap();
        let (api, ch) = client.connect_newest(Group::Filesystem).await.unwrap();
        assert_eq!(api.version, "v1beta2");
        assert_eq!(
            ch.endpoint(),
            PathBuf::from(format!("{p}filesystem-v1beta2"))
        );
        let mut c = match client.connect_filesystem().await.unwrap() {
            AnyFilesystemClient::V1beta2(c) => c,
            other => panic!("picked {}", other.api()),
        };
        let st = c
            .path_exists(csi_proxy_api::filesystem::v1beta2::PathExistsRequest {
                path: "C:\\x".into(),
            })
            .await
            .unwrap_err();
        let s = seen(&st);
        assert_eq!(
            (s.path.as_str(), s.timeout.as_str()),
            ("/v1beta2.Filesystem/PathExists", "1500000u")
        );

        let e = client.connect_filesystem_v1().await.unwrap_err();
        assert!(matches!(e, Error::NotServed { .. }), "{e}");
        let e = client.connect_newest(Group::Disk).await.unwrap_err();
        assert!(e.is_not_served(), "{e}");

        // A custom pipe name for one version.
        let custom = PathBuf::from(format!("{p}custom"));
        serve(custom.clone(), Duration::ZERO);
        let client = Client::builder()
            .pipe_prefix(&p)
            .endpoint_path(Group::Filesystem, "v1", &custom)
            .build()
            .unwrap();
        let mut c = client.connect_filesystem_v1().await.unwrap();
        assert_eq!(path_exists_v1(&mut c, None).await.timeout, "none");
    }

    #[tokio::test]
    async fn a_busy_pipe_is_retried_until_an_instance_is_free() {
        let p = prefix("busy");
        let name = PathBuf::from(format!("{p}filesystem-v1"));
        // The next instance appears 500 ms after each connection.
        let count = serve(name.clone(), Duration::from_millis(500));
        let client = Client::builder().pipe_prefix(&p).build().unwrap();
        let mut first = client.connect_filesystem_v1().await.unwrap();
        let start = std::time::Instant::now();
        let mut second = client.connect_filesystem_v1().await.unwrap();
        let waited = start.elapsed();
        assert!(
            waited >= Duration::from_millis(250),
            "{waited:?}: was the pipe busy?"
        );

        // Busy for longer than the connect timeout: a clear error.
        let impatient = Client::builder()
            .pipe_prefix(&p)
            .connect_timeout(Duration::from_millis(100))
            .build()
            .unwrap();
        let e = impatient.connect_filesystem_v1().await.unwrap_err();
        match &e {
            Error::PipeBusy {
                attempts, waited, ..
            } => assert!(
                *attempts > 1 && *waited >= Duration::from_millis(100),
                "{e}"
            ),
            other => panic!("{other}"),
        }
        assert!(e.to_string().contains("stayed busy"), "{e}");

        assert_eq!(path_exists_v1(&mut first, None).await.conn, 1);
        assert_eq!(path_exists_v1(&mut second, None).await.conn, 2);
        assert_eq!(count.load(Ordering::SeqCst), 2);
    }
}
