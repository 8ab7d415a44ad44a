//! A connection that breaks under a call fails the call `Unavailable`, the
//! code drivers retry, on real Unix sockets (Linux) and named pipes
//! (Windows).
//!
//! The fake here speaks just enough HTTP/2 by hand to break a connection at
//! a chosen point of a call: it reads the client's frames up to the call's
//! HEADERS, then closes the connection, or sends a GOAWAY that refuses the
//! call, or answers the response headers and closes before the body and
//! trailers.

use csi_proxy_api::filesystem::v1::filesystem_client::FilesystemClient;
use csi_proxy_api::filesystem::v1::PathExistsRequest;
use csi_proxy_client::ProxyChannel;
use std::error::Error as _;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tonic::Code;

/// Where the fake breaks the connection.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Break {
    /// Closes it once the call's HEADERS arrived.
    Close,
    /// Sends SETTINGS and a GOAWAY (NO_ERROR, last stream 0) that refuses
    /// the call, then waits for the client to close.
    GoAway,
    /// Answers `:status 200` and `content-type: application/grpc` on the
    /// call's stream, then closes (no message, no trailers).
    CloseAfterHeaders,
}

const ALL: [Break; 3] = [Break::Close, Break::GoAway, Break::CloseAfterHeaders];

/// An empty SETTINGS frame (the server's preface).
const SETTINGS: [u8; 9] = [0, 0, 0, 4, 0, 0, 0, 0, 0];

/// GOAWAY on stream 0: last stream 0, error NO_ERROR.
const GOAWAY: [u8; 17] = [0, 0, 8, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];

/// HEADERS on stream 1, END_HEADERS: `:status 200` (static index 8) and
/// `content-type: application/grpc` (a literal of static name 31).
fn response_headers() -> Vec<u8> {
    let mut block = vec![0x88, 0x0f, 0x10, 16];
    block.extend_from_slice(b"application/grpc");
    let mut frame = vec![0, 0, block.len() as u8, 1, 0x4, 0, 0, 0, 1];
    frame.extend_from_slice(&block);
    frame
}

/// Reads the client preface and then frames until a HEADERS frame (the
/// call) has arrived.
async fn read_until_call<I: AsyncRead + Unpin>(io: &mut I) -> std::io::Result<()> {
    let mut preface = [0u8; 24];
    io.read_exact(&mut preface).await?;
    assert_eq!(&preface, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    loop {
        let mut head = [0u8; 9];
        io.read_exact(&mut head).await?;
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let mut payload = vec![0; len];
        io.read_exact(&mut payload).await?;
        if head[3] == 1 {
            return Ok(());
        }
    }
}

/// Serves one connection and breaks it as `how` says.
async fn break_connection<I>(mut io: I, how: Break)
where
    I: AsyncRead + AsyncWrite + Unpin,
{
    if read_until_call(&mut io).await.is_err() {
        return;
    }
    match how {
        Break::Close => {}
        Break::GoAway => {
            let _ = io.write_all(&SETTINGS).await;
            let _ = io.write_all(&GOAWAY).await;
            let _ = io.flush().await;
            // The client closes once it has read the GOAWAY; the refusal,
            // not an EOF, must be what fails the call.
            let mut rest = Vec::new();
            let _ = tokio::time::timeout(Duration::from_secs(10), io.read_to_end(&mut rest)).await;
        }
        Break::CloseAfterHeaders => {
            let _ = io.write_all(&SETTINGS).await;
            let _ = io.write_all(&response_headers()).await;
            let _ = io.flush().await;
            // Let the client read the headers before the EOF.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// One call on a connection the fake breaks as `how` says: `Unavailable`,
/// from the transport (not an answer of a server).
async fn call_is_unavailable(mut c: FilesystemClient<ProxyChannel>, how: Break) {
    let st = c
        .path_exists(PathExistsRequest { path: "/x".into() })
        .await
        .unwrap_err();
    assert_eq!(st.code(), Code::Unavailable, "{how:?}: {st:?}");
    assert!(
        st.message()
            .starts_with("the connection to csi-proxy failed: "),
        "{how:?}: {st:?}"
    );
    if how == Break::GoAway {
        let mut source = st.source();
        let mut go_away = false;
        while let Some(e) = source {
            go_away |= e
                .downcast_ref::<h2::Error>()
                .is_some_and(h2::Error::is_go_away);
            source = e.source();
        }
        assert!(go_away, "not failed by the GOAWAY: {st:?}");
    }
}

/// RST_STREAM on stream 1: REFUSED_STREAM (the server did not process it).
#[cfg(unix)]
const REFUSED: [u8; 13] = [0, 0, 4, 3, 0, 0, 0, 0, 1, 0, 0, 0, 7];

/// A whole answer on stream 1: the response headers, a DATA frame holding
/// `PathExistsResponse { exists: true }` and the trailers `grpc-status: 0`
/// (a literal with a new name) ending the stream.
#[cfg(unix)]
fn path_exists_answer() -> Vec<u8> {
    let mut out = response_headers();
    let message = [0u8, 0, 0, 0, 2, 0x08, 0x01];
    out.extend_from_slice(&[0, 0, message.len() as u8, 0, 0, 0, 0, 0, 1]);
    out.extend_from_slice(&message);
    let mut block = vec![0x00, 11];
    block.extend_from_slice(b"grpc-status");
    block.extend_from_slice(&[1, b'0']);
    out.extend_from_slice(&[0, 0, block.len() as u8, 1, 0x4 | 0x1, 0, 0, 0, 1]);
    out.extend_from_slice(&block);
    out
}

#[cfg(unix)]
mod unix {
    use super::*;
    use csi_proxy_client::Client;
    use tokio::net::UnixListener;

    #[tokio::test]
    async fn a_connection_lost_under_a_call_is_unavailable() {
        for how in ALL {
            let dir = tempfile::tempdir().unwrap();
            let listener =
                UnixListener::bind(dir.path().join("csi-proxy-filesystem-v1.sock")).unwrap();
            tokio::spawn(async move {
                loop {
                    let (s, _) = listener.accept().await.unwrap();
                    tokio::spawn(break_connection(s, how));
                }
            });
            let client = Client::builder()
                .socket_dir(dir.path())
                .timeout(Duration::from_secs(20))
                .build()
                .unwrap();
            let c = client.connect_filesystem_v1().await.unwrap();
            call_is_unavailable(c, how).await;
        }
    }

    /// A call the server refused unread (REFUSED_STREAM, as a restarting
    /// server does) is sent again once on a new connection and answered;
    /// the caller sees only the answer.
    #[tokio::test]
    async fn a_refused_call_is_sent_again_once() {
        let dir = tempfile::tempdir().unwrap();
        let listener = UnixListener::bind(dir.path().join("csi-proxy-filesystem-v1.sock")).unwrap();
        let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = calls.clone();
        tokio::spawn(async move {
            loop {
                let (mut s, _) = listener.accept().await.unwrap();
                let n = seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::spawn(async move {
                    if read_until_call(&mut s).await.is_err() {
                        return;
                    }
                    let _ = s.write_all(&SETTINGS).await;
                    if n == 0 {
                        let _ = s.write_all(&REFUSED).await;
                        let _ = s.write_all(&GOAWAY).await;
                    } else {
                        let _ = s.write_all(&path_exists_answer()).await;
                    }
                    let _ = s.flush().await;
                    let mut rest = Vec::new();
                    let _ = tokio::time::timeout(Duration::from_secs(2), s.read_to_end(&mut rest))
                        .await;
                });
            }
        });
        let client = Client::builder()
            .socket_dir(dir.path())
            .timeout(Duration::from_secs(20))
            .build()
            .unwrap();
        let mut c = client.connect_filesystem_v1().await.unwrap();
        let answer = c
            .path_exists(PathExistsRequest { path: "/x".into() })
            .await
            .unwrap();
        assert!(answer.get_ref().exists);
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 2);
    }
}

#[cfg(windows)]
#[path = "common/owned_pipe.rs"]
mod owned_pipe;

#[cfg(windows)]
mod windows {
    use super::owned_pipe;
    use super::*;
    use csi_proxy_client::Client;

    #[tokio::test]
    async fn a_connection_lost_under_a_call_is_unavailable() {
        for how in ALL {
            let prefix = format!(
                r"\\.\pipe\csi-proxy-client-broken-{}-{how:?}-",
                std::process::id()
            );
            let name = format!("{prefix}filesystem-v1");
            let mut server = owned_pipe::create(&name, true).unwrap();
            tokio::spawn(async move {
                loop {
                    server.connect().await.unwrap();
                    let next = owned_pipe::create(&name, false).unwrap();
                    tokio::spawn(break_connection(std::mem::replace(&mut server, next), how));
                }
            });
            let client = Client::builder()
                .pipe_prefix(&prefix)
                .timeout(Duration::from_secs(20))
                .build()
                .unwrap();
            let c = client.connect_filesystem_v1().await.unwrap();
            call_is_unavailable(c, how).await;
        }
    }
}
