//! A server of the crate's own driver over real connected byte streams
//! (Unix socket pairs; named pipes on Windows), with a small test service:
//! the layer on its own, without csi-proxy's dispatch.
#![allow(dead_code)]

use csi_proxy_http2::conformance::{Duplex, Target};
use csi_proxy_http2::hpack::quote;
use csi_proxy_http2::{serve, Code, Options, Outcome, Reply, Service};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// `/t.S/Echo` answers the request; `/t.S/Slow` runs 600 ms on the
/// blocking pool; anything else is Unimplemented.
#[derive(Clone, Default)]
pub struct TestService {
    /// Calls that reached the service.
    pub calls: Arc<AtomicUsize>,
}

impl Service for TestService {
    fn call(&self, path: &str, message: &[u8]) -> Outcome {
        self.calls.fetch_add(1, Ordering::Relaxed);
        match path {
            "/t.S/Echo" => Outcome::Done(Reply::ok(message.to_vec())),
            "/t.S/Slow" => Outcome::Blocking(Box::new(|| {
                std::thread::sleep(Duration::from_millis(600));
                Reply::ok(Vec::new())
            })),
            _ => Outcome::Done(Reply::error(
                Code::Unimplemented,
                format!("unknown method {}", quote(path.as_bytes())),
            )),
        }
    }
}

pub fn echo_target() -> Target {
    Target {
        path: "/t.S/Echo".into(),
        message: b"hello".to_vec(),
    }
}

/// The driver on a runtime of its own.
pub struct Server {
    pub rt: tokio::runtime::Runtime,
    pub options: Options,
    pub service: TestService,
    pub shutdown: CancellationToken,
    count: AtomicUsize,
}

impl Server {
    pub fn new(options: Options) -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        Server {
            rt,
            options,
            service: TestService::default(),
            shutdown: CancellationToken::new(),
            count: AtomicUsize::new(0),
        }
    }

    /// A new connection served by the driver: the client side, blocking,
    /// with a 10 s read timeout where the transport has one.
    #[cfg(unix)]
    pub fn connect(&self) -> std::os::unix::net::UnixStream {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let _guard = self.rt.enter();
        let a = tokio::net::UnixStream::from_std(a).unwrap();
        self.rt.spawn(serve(
            a,
            self.service.clone(),
            self.options.clone(),
            self.shutdown.clone(),
        ));
        b.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        b
    }

    /// A new connection served by the driver over a named pipe: the
    /// client side, blocking.
    #[cfg(windows)]
    pub fn connect(&self) -> std::fs::File {
        use tokio::net::windows::named_pipe::ServerOptions;
        let n = self.count.fetch_add(1, Ordering::Relaxed);
        let name = format!(
            r"\\.\pipe\csi-proxy-http2-test-{}-{:p}-{n}",
            std::process::id(),
            self
        );
        let _guard = self.rt.enter();
        let pipe = ServerOptions::new()
            .first_pipe_instance(true)
            .create(&name)
            .unwrap();
        let (service, options, token) = (
            self.service.clone(),
            self.options.clone(),
            self.shutdown.clone(),
        );
        self.rt.spawn(async move {
            if pipe.connect().await.is_ok() {
                serve(pipe, service, options, token).await;
            }
        });
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&name)
            .unwrap()
    }

    pub fn duplex(&self) -> Box<dyn Duplex> {
        Box::new(self.connect())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}
