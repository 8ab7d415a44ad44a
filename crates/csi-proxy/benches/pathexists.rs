//! PathExists round trip through the real `csi-proxy` binary over a Unix
//! socket, with 1 and 16 concurrent clients, next to a raw Unix-socket echo
//! round trip of the same payload size measured in the same run.
//!
//! Two clients are measured: a minimal blocking HTTP/2 client (one thread
//! per connection, like the echo client, so the ratio measures the server),
//! and tonic's generated client on a direct hyper HTTP/2 connection (what a
//! Rust driver would use; its own overhead is included).
//!
//! Last, the cost of metrics: a second proxy with `-metrics-bind-address`
//! is measured against the first in interleaved rounds (async minimal
//! client, 1 client), and the ratio of their p50 latencies is printed.
//!
//! And the cost of the audit log: Mkdir+Rmdir through a proxy with
//! `-audit-log` (level write, best-effort) against one without, in
//! alternating rounds, with a second proxy without it as an A/A control
//! (the noise floor), and the ratios of their median p50 latencies.
//!
//! Run: `cargo bench -p csi-proxy --bench pathexists` (CALLS=n to change
//! the number of calls per client; default 20000; CSI_PROXY_BIN=path to
//! measure another build of the binary; ONLY=async for the 16-client async
//! echo comparison alone (also with grpc-go's header shape), in alternating
//! rounds with server CPU per call; ONLY=audit for the audit part alone;
//! ROUNDS=n for the number of rounds of either).

#[cfg(unix)]
fn main() {
    unix::main();
}

#[cfg(not(unix))]
fn main() {
    eprintln!("this benchmark needs Unix sockets");
}

#[cfg(unix)]
#[path = "../tests/procfs/mod.rs"]
mod procfs;

#[cfg(unix)]
mod unix {
    use super::procfs;
    use csi_proxy_api::filesystem::v1::filesystem_client::FilesystemClient;
    use csi_proxy_api::filesystem::v1::{PathExistsRequest, PathExistsResponse};
    use csi_proxy_http2::client::{RawClient, RequestEncoder, Shape};
    use csi_proxy_http2::frame;
    use prost::Message;
    use std::path::{Path, PathBuf};
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{UnixListener, UnixStream};
    use tonic::transport::{Channel, Endpoint};

    struct Stats {
        p50: Duration,
        p99: Duration,
        per_sec: f64,
    }

    fn stats(mut lat: Vec<Duration>, wall: Duration) -> Stats {
        lat.sort();
        let at = |q: f64| lat[((lat.len() as f64 * q) as usize).min(lat.len() - 1)];
        Stats {
            p50: at(0.50),
            p99: at(0.99),
            per_sec: lat.len() as f64 / wall.as_secs_f64(),
        }
    }

    async fn channel(path: &Path) -> Channel {
        let path = path.to_path_buf();
        Endpoint::from_static("http://localhost")
            .connect_with_connector(tower::service_fn(move |_| {
                let path = path.clone();
                async move {
                    Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(
                        UnixStream::connect(path).await?,
                    ))
                }
            }))
            .await
            .unwrap()
    }

    /// A gRPC transport straight on one hyper HTTP/2 connection (no
    /// buffer task between caller and connection, unlike `Channel`).
    #[derive(Clone)]
    struct Direct(hyper::client::conn::http2::SendRequest<tonic::body::Body>);

    impl tower::Service<http::Request<tonic::body::Body>> for Direct {
        type Response = http::Response<hyper::body::Incoming>;
        type Error = hyper::Error;
        type Future = std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<Self::Response, hyper::Error>> + Send>,
        >;
        fn poll_ready(
            &mut self,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Result<(), hyper::Error>> {
            self.0.poll_ready(cx)
        }
        fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
            Box::pin(self.0.send_request(req))
        }
    }

    async fn direct(path: &Path) -> Direct {
        let io = hyper_util::rt::TokioIo::new(UnixStream::connect(path).await.unwrap());
        let (send, conn) =
            hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
                .handshake(io)
                .await
                .unwrap();
        tokio::spawn(conn);
        Direct(send)
    }

    /// `clients` tasks, each on its own connection, `calls` round trips each.
    async fn grpc(sock: &Path, path: &str, clients: usize, calls: usize) -> Stats {
        let mut conns = Vec::new();
        for _ in 0..clients {
            if std::env::var_os("CHANNEL").is_some() {
                let _ = FilesystemClient::new(channel(sock).await);
            }
            conns.push(FilesystemClient::with_origin(
                direct(sock).await,
                http::Uri::from_static("http://localhost"),
            ));
        }
        // Warm up every connection.
        for c in &mut conns {
            for _ in 0..200 {
                c.path_exists(PathExistsRequest { path: path.into() })
                    .await
                    .unwrap();
            }
        }
        let start = Instant::now();
        let mut tasks = Vec::new();
        for mut c in conns {
            let path = path.to_string();
            tasks.push(tokio::spawn(async move {
                let mut lat = Vec::with_capacity(calls);
                for _ in 0..calls {
                    let t = Instant::now();
                    let r = c
                        .path_exists(PathExistsRequest { path: path.clone() })
                        .await
                        .unwrap();
                    assert!(r.into_inner().exists);
                    lat.push(t.elapsed());
                }
                lat
            }));
        }
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.unwrap());
        }
        stats(all, start.elapsed())
    }

    /// A raw echo server on its own runtime thread (the baseline).
    fn echo_server(sock: PathBuf) {
        let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        listener.set_nonblocking(true).unwrap();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .thread_name("echo-runtime")
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = UnixListener::from_std(listener).unwrap();
                loop {
                    let (mut s, _) = listener.accept().await.unwrap();
                    tokio::spawn(async move {
                        let mut buf = vec![0u8; 4096];
                        loop {
                            match s.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => {
                                    if s.write_all(&buf[..n]).await.is_err() {
                                        return;
                                    }
                                }
                            }
                        }
                    });
                }
            });
        });
    }

    async fn echo(sock: &Path, size: usize, clients: usize, calls: usize) -> Stats {
        let start = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..clients {
            let sock = sock.to_path_buf();
            tasks.push(tokio::spawn(async move {
                let mut s = UnixStream::connect(sock).await.unwrap();
                let msg = vec![7u8; size];
                let mut back = vec![0u8; size];
                for _ in 0..200 {
                    s.write_all(&msg).await.unwrap();
                    s.read_exact(&mut back).await.unwrap();
                }
                let mut lat = Vec::with_capacity(calls);
                for _ in 0..calls {
                    let t = Instant::now();
                    s.write_all(&msg).await.unwrap();
                    s.read_exact(&mut back).await.unwrap();
                    lat.push(t.elapsed());
                }
                lat
            }));
        }
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.unwrap());
        }
        stats(all, start.elapsed())
    }

    /// Run `calls` timed round trips of `round` on each of `clients`
    /// threads (after 200 warm-up trips).
    fn threads<C: Send + 'static>(
        clients: usize,
        calls: usize,
        connect: impl Fn() -> C,
        round: fn(&mut C),
    ) -> Stats {
        let conns: Vec<C> = (0..clients).map(|_| connect()).collect();
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(clients + 1));
        let handles: Vec<_> = conns
            .into_iter()
            .map(|mut c| {
                let barrier = barrier.clone();
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        round(&mut c);
                    }
                    barrier.wait();
                    let mut lat = Vec::with_capacity(calls);
                    for _ in 0..calls {
                        let t = Instant::now();
                        round(&mut c);
                        lat.push(t.elapsed());
                    }
                    lat
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        let mut all = Vec::new();
        for h in handles {
            all.extend(h.join().unwrap());
        }
        stats(all, start.elapsed())
    }

    /// The echo baseline with blocking clients.
    fn echo_blocking(sock: &Path, size: usize, clients: usize, calls: usize) -> Stats {
        use std::io::{Read, Write};
        struct Echo(std::os::unix::net::UnixStream, Vec<u8>, Vec<u8>);
        threads(
            clients,
            calls,
            || {
                let s = std::os::unix::net::UnixStream::connect(sock).unwrap();
                Echo(s, vec![7u8; size], vec![0u8; size])
            },
            |e| {
                e.0.write_all(&e.1).unwrap();
                e.0.read_exact(&mut e.2).unwrap();
            },
        )
    }

    /// PathExists through the minimal HTTP/2 client, sending the pipe-path
    /// `:authority` that grpc-go sends.
    fn raw_grpc(sock: &Path, path: &str, clients: usize, calls: usize) -> Stats {
        struct Raw(RawClient<std::os::unix::net::UnixStream>, Vec<u8>);
        threads(
            clients,
            calls,
            || {
                let s = std::os::unix::net::UnixStream::connect(sock).unwrap();
                let msg = PathExistsRequest { path: path.into() }.encode_to_vec();
                Raw(RawClient::new(s, Shape::default()).unwrap(), msg)
            },
            |r| {
                let resp =
                    r.0.call(
                        "/v1.Filesystem/PathExists",
                        Some(br"\\.\pipe\csi-proxy-filesystem-v1"),
                        &r.1,
                    )
                    .unwrap();
                assert_eq!(resp.grpc_status, Some(0), "{resp:?}");
                let m = PathExistsResponse::decode(&resp.message.unwrap()[..]).unwrap();
                assert!(m.exists);
            },
        )
    }

    /// A sequence of calls (method, message, expected grpc-status) per round
    /// through the minimal blocking client; the latency of the whole round.
    fn raw_sequence(sock: &Path, calls: usize, seq: Vec<(&'static str, Vec<u8>, i32)>) -> Stats {
        struct Raw(
            RawClient<std::os::unix::net::UnixStream>,
            Vec<(&'static str, Vec<u8>, i32)>,
        );
        threads(
            1,
            calls,
            || {
                let s = std::os::unix::net::UnixStream::connect(sock).unwrap();
                Raw(RawClient::new(s, Shape::default()).unwrap(), seq.clone())
            },
            |r| {
                for (method, msg, want) in &r.1 {
                    let resp =
                        r.0.call(method, Some(br"\\.\pipe\csi-proxy-filesystem-v1"), msg)
                            .unwrap();
                    assert_eq!(resp.grpc_status, Some(*want), "{method}: {resp:?}");
                }
            },
        )
    }

    /// PathExists through the minimal HTTP/2 request encoder on async
    /// tasks of the benchmark's current-thread runtime, exactly like the
    /// async echo client: write the request frames, read frames until the
    /// stream's trailers.
    async fn raw_async(sock: &Path, path: &str, clients: usize, calls: usize) -> Stats {
        raw_async_calls(sock, path, Calls::default(), clients, calls).await
    }

    /// What [`raw_async_calls`] sends.
    #[derive(Clone, Copy, Default)]
    struct Calls {
        /// The path is refused by the lexical check (answered
        /// PermissionDenied, nothing on disk touched); else it exists.
        refused: bool,
        /// Header blocks shaped as grpc-go's: Huffman-coded literals and a
        /// `grpc-timeout` that changes on every call (a new literal each
        /// time, as a deadline gives).
        grpc_go: bool,
    }

    /// [`raw_async`] of `calls` shaped as `kind` says.
    async fn raw_async_calls(
        sock: &Path,
        path: &str,
        kind: Calls,
        clients: usize,
        calls: usize,
    ) -> Stats {
        async fn round(
            s: &mut UnixStream,
            enc: &mut RequestEncoder,
            msg: &[u8],
            input: &mut Vec<u8>,
            kind: Calls,
            call: usize,
        ) {
            let refused = kind.refused;
            let timeout = kind
                .grpc_go
                .then(|| format!("{}u", 9_999_000 - call % 1000));
            let extra: &[(&[u8], &[u8])] = match &timeout {
                Some(t) => &[(b"grpc-timeout", t.as_bytes())],
                None => &[],
            };
            let block = enc.request_block(
                "/v1.Filesystem/PathExists",
                Some(br"\\.\pipe\csi-proxy-filesystem-v1"),
                extra,
            );
            let mut out = Vec::with_capacity(128);
            let id = enc.put_request(&mut out, &block, msg);
            s.write_all(&out).await.unwrap();
            let mut message = None;
            loop {
                while let Some((head, payload, used)) =
                    frame::split(input, frame::MAX_MAX_FRAME_SIZE).unwrap()
                {
                    let end = head.stream == id
                        && head.kind == frame::HEADERS
                        && head.flags & frame::END_STREAM != 0;
                    if head.stream == id && head.kind == frame::DATA {
                        message = Some(PathExistsResponse::decode(&payload[5..]).unwrap());
                    }
                    if end && refused {
                        // Trailers only, with grpc-status 7 (PermissionDenied).
                        let want = b"\x0bgrpc-status\x017";
                        assert!(payload.windows(want.len()).any(|w| w == want));
                    } else if end {
                        // The trailers: grpc-status 0, a literal of our encoder.
                        assert_eq!(payload, b"\x00\x0bgrpc-status\x010");
                    }
                    input.drain(..used);
                    if end {
                        assert!(refused || message.expect("a response message").exists);
                        return;
                    }
                }
                let mut buf = [0u8; 4096];
                let n = s.read(&mut buf).await.unwrap();
                assert!(n > 0, "the server closed the connection");
                input.extend_from_slice(&buf[..n]);
            }
        }
        let msg = PathExistsRequest { path: path.into() }.encode_to_vec();
        let start = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..clients {
            let sock = sock.to_path_buf();
            let msg = msg.clone();
            tasks.push(tokio::spawn(async move {
                let mut s = UnixStream::connect(sock).await.unwrap();
                let mut hello = RequestEncoder::preface();
                // Open the connection window for the whole run.
                frame::put_window_update(&mut hello, 0, frame::MAX_WINDOW - 65_535);
                s.write_all(&hello).await.unwrap();
                let mut enc = RequestEncoder::new(Shape {
                    huffman: kind.grpc_go,
                    ..Shape::default()
                });
                let mut input = Vec::new();
                for i in 0..200 {
                    round(&mut s, &mut enc, &msg, &mut input, kind, i).await;
                }
                let mut lat = Vec::with_capacity(calls);
                for i in 0..calls {
                    let t = Instant::now();
                    round(&mut s, &mut enc, &msg, &mut input, kind, i).await;
                    lat.push(t.elapsed());
                }
                lat
            }));
        }
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.unwrap());
        }
        stats(all, start.elapsed())
    }

    /// The `/proc` directories of a process's threads, of those whose name
    /// starts with `prefix` if given.
    fn task_dirs(pid: u32, prefix: Option<&str>) -> Vec<PathBuf> {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .filter_map(|t| {
                let t = t.ok()?.path();
                let comm = std::fs::read_to_string(t.join("comm")).ok()?;
                prefix.is_none_or(|p| comm.starts_with(p)).then_some(t)
            })
            .collect()
    }

    /// CPU time (user + system, clock ticks) of a process, or of its
    /// threads whose name starts with `thread_prefix`.
    fn cpu_ticks(pid: u32, thread_prefix: Option<&str>) -> u64 {
        match thread_prefix {
            None => {
                procfs::cpu_ticks(&std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap())
            }
            Some(_) => task_dirs(pid, thread_prefix)
                .iter()
                .filter_map(|t| std::fs::read_to_string(t.join("stat")).ok())
                .map(|s| procfs::cpu_ticks(&s))
                .sum(),
        }
    }

    /// Context switches (voluntary + involuntary) of the live threads of a
    /// process, or of those whose name starts with `thread_prefix`.
    fn switches(pid: u32, thread_prefix: Option<&str>) -> u64 {
        task_dirs(pid, thread_prefix)
            .iter()
            .filter_map(|t| std::fs::read_to_string(t.join("status")).ok())
            .flat_map(|status| {
                status
                    .lines()
                    .filter(|l| l.contains("ctxt_switches:"))
                    .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                    .collect::<Vec<_>>()
            })
            .sum()
    }

    /// `ONLY=async`: the 16-client comparison alone, in alternating rounds
    /// (ROUNDS, default 5; CLIENTS, default 16): async echo, PathExists of
    /// an existing path, PathExists refused by the lexical check
    /// (everything but the confined open), and the existing path with
    /// grpc-go's header shape (Huffman-coded literals, a new `grpc-timeout`
    /// on every call), all with the async minimal client. Prints per round
    /// the p50, the calls/s and the CPU per call of the server (the echo's
    /// runtime threads, our server process) and of the client (this
    /// process but the echo), in microseconds (clock ticks of 10 ms: use
    /// enough CALLS); then the medians and ratios.
    fn async_rounds(
        rt: &tokio::runtime::Runtime,
        echo_sock: &Path,
        sock: &Path,
        server: u32,
        path: &str,
        size: usize,
        calls: usize,
    ) {
        let clients: usize = std::env::var("CLIENTS")
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(16);
        let rounds: usize = std::env::var("ROUNDS")
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(5);
        let me = std::process::id();
        let n = (clients * calls) as f64;
        let per_call = |ticks: u64| ticks as f64 * 1e4 / n;
        let client_ticks = || cpu_ticks(me, None) - cpu_ticks(me, Some("echo-"));
        // The cases after the echo: name, path, what is sent.
        let ours = [
            ("PathExists existing", path, Calls::default()),
            (
                "PathExists refused",
                "/etc/hostname",
                Calls {
                    refused: true,
                    ..Calls::default()
                },
            ),
            (
                "existing, grpc-go",
                path,
                Calls {
                    grpc_go: true,
                    ..Calls::default()
                },
            ),
        ];
        let names: Vec<&str> = std::iter::once("echo")
            .chain(ours.iter().map(|c| c.0))
            .collect();
        // [case] -> per round (p50, server CPU/call, client CPU/call)
        let mut seen = vec![Vec::<(f64, f64, f64)>::new(); names.len()];
        for _ in 0..rounds {
            for (case, name) in names.iter().enumerate() {
                let (server_pid, thread) = match case {
                    0 => (me, Some("echo-")),
                    _ => (server, None),
                };
                let (s0, c0) = (cpu_ticks(server_pid, thread), client_ticks());
                let w0 = switches(server_pid, thread);
                let stats = match case {
                    0 => rt.block_on(echo(echo_sock, size, clients, calls)),
                    _ => {
                        let (_, path, kind) = ours[case - 1];
                        rt.block_on(raw_async_calls(sock, path, kind, clients, calls))
                    }
                };
                let (s1, c1) = (cpu_ticks(server_pid, thread), client_ticks());
                let w1 = switches(server_pid, thread);
                let row = (us(stats.p50), per_call(s1 - s0), per_call(c1 - c0));
                println!(
                    "{name:<20} p50 {:7.1} us {:9.0} calls/s  CPU/call: server {:5.2} us, client {:5.2} us; \
                     server context switches/call {:.3}",
                    row.0,
                    stats.per_sec,
                    row.1,
                    row.2,
                    (w1 - w0) as f64 / n
                );
                seen[case].push(row);
            }
        }
        let median = |case: usize, f: fn(&(f64, f64, f64)) -> f64| {
            let mut v: Vec<f64> = seen[case].iter().map(f).collect();
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        println!("{clients} clients, medians of {rounds} rounds:");
        let echo_p50 = median(0, |r| r.0);
        for (case, name) in names.iter().enumerate() {
            let p50 = median(case, |r| r.0);
            println!(
                "  {name:<20} p50 {p50:7.1} us ({:.2}x echo)  CPU/call: server {:5.2} us, client {:5.2} us",
                p50 / echo_p50,
                median(case, |r| r.1),
                median(case, |r| r.2)
            );
        }
    }

    fn us(d: Duration) -> f64 {
        d.as_secs_f64() * 1e6
    }

    pub fn main() {
        let calls: usize = std::env::var("CALLS")
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(20_000);
        let dir = tempfile::tempdir().unwrap();
        let kubelet = dir.path().join("kubelet");
        let target = kubelet.join("pods/uid/volumes/kubernetes.io~csi/pvc/mount");
        std::fs::create_dir_all(&target).unwrap();
        let (_child, sock) = start(&kubelet, &dir.path().join("sock"), &[]);
        let (_metered, metered_sock) = start(
            &kubelet,
            &dir.path().join("sock-metrics"),
            &["-metrics-bind-address=127.0.0.1:0"],
        );
        if std::env::var("ONLY").is_ok_and(|o| o == "audit") {
            audit_cost(&kubelet, dir.path(), &target, calls);
            return;
        }
        let echo_sock = dir.path().join("echo.sock");
        echo_server(echo_sock.clone());

        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let path = target.display().to_string();
        // The size of the gRPC request message on the wire, for the echo.
        let size = 5 + 2 + path.len();
        if std::env::var("ONLY").is_ok_and(|o| o == "async") {
            async_rounds(&rt, &echo_sock, &sock, _child.0.id(), &path, size, calls);
            return;
        }
        println!(
            "PathExists over a Unix socket vs raw echo of {size} bytes; {calls} calls per client"
        );
        println!(
            "{:<34} {:>10} {:>10} {:>12}",
            "", "p50 (us)", "p99 (us)", "calls/s"
        );
        let row = |name: String, s: &Stats| {
            println!(
                "{:<34} {:>10.1} {:>10.1} {:>12.0}",
                name,
                us(s.p50),
                us(s.p99),
                s.per_sec
            );
        };
        let ratio = |name: &str, a: &Stats, b: &Stats| {
            println!(
                "{:<34} {:>10.2} {:>10.2} {:>12.2}",
                name,
                us(a.p50) / us(b.p50),
                us(a.p99) / us(b.p99),
                a.per_sec / b.per_sec
            );
        };
        // CLIENTS=a,b: the client counts to run (default 1,16).
        let counts: Vec<usize> = std::env::var("CLIENTS")
            .ok()
            .map(|c| c.split(',').filter_map(|n| n.trim().parse().ok()).collect())
            .unwrap_or_else(|| vec![1, 16]);
        for clients in counts {
            // Async clients on this thread's current-thread runtime.
            let e = rt.block_on(echo(&echo_sock, size, clients, calls));
            let a = rt.block_on(raw_async(&sock, &path, clients, calls));
            let g = rt.block_on(grpc(&sock, &path, clients, calls));
            // Blocking clients, one thread per connection.
            let eb = echo_blocking(&echo_sock, size, clients, calls);
            let rb = raw_grpc(&sock, &path, clients, calls);
            row(format!("async echo, {clients} client(s)"), &e);
            row(format!("PathExists, {clients}, async minimal"), &a);
            row(format!("PathExists, {clients}, tonic"), &g);
            row(format!("blocking echo, {clients} client(s)"), &eb);
            row(format!("PathExists, {clients}, blocking minimal"), &rb);
            ratio("ratio async minimal/async echo", &a, &e);
            ratio("ratio tonic/async echo", &g, &e);
            ratio("ratio blocking minimal/blocking echo", &rb, &eb);
        }
        // Mutations and refusals, one blocking client: Mkdir + Rmdir of a
        // directory inside the kubelet dir, and a PathExists refused by the
        // lexical check alone (outside the roots: nothing is touched).
        let bench_dir = target.join("bench-dir").display().to_string();
        let enc = |p: &str| PathExistsRequest { path: p.into() }.encode_to_vec();
        let mkrm = raw_sequence(
            &sock,
            calls / 4,
            vec![
                ("/v1.Filesystem/Mkdir", enc(&bench_dir), 0),
                ("/v1.Filesystem/Rmdir", enc(&bench_dir), 0),
            ],
        );
        let refused = raw_sequence(
            &sock,
            calls,
            vec![("/v1.Filesystem/PathExists", enc("/etc/hostname"), 7)],
        );
        let existing = raw_sequence(
            &sock,
            calls,
            vec![("/v1.Filesystem/PathExists", enc(&path), 0)],
        );
        row("Mkdir+Rmdir, 1 blocking minimal".into(), &mkrm);
        row("PathExists refused (outside)".into(), &refused);
        row("PathExists existing".into(), &existing);
        ratio("ratio existing/refused", &existing, &refused);
        ratio("ratio Mkdir+Rmdir/refused", &mkrm, &refused);
        // Metrics on vs off: interleaved rounds, median p50 of each.
        let (mut off, mut on) = (Vec::new(), Vec::new());
        for _ in 0..5 {
            off.push(rt.block_on(raw_async(&sock, &path, 1, calls)).p50);
            on.push(rt.block_on(raw_async(&metered_sock, &path, 1, calls)).p50);
        }
        off.sort();
        on.sort();
        let (off, on) = (off[2], on[2]);
        println!(
            "PathExists p50, 1 async minimal client: metrics off {:.1} us, on {:.1} us, \
             ratio on/off {:.3}",
            us(off),
            us(on),
            us(on) / us(off)
        );
        audit_cost(&kubelet, dir.path(), &target, calls);
    }

    /// Mkdir+Rmdir p50 with the audit log on vs off, same run, rounds
    /// alternating between an unaudited proxy, an audited one and a second
    /// unaudited one (A/A control).
    fn audit_cost(kubelet: &Path, dir: &Path, target: &Path, calls: usize) {
        let audit_file = dir.join("audit.log");
        let audit_flag = format!("-audit-log={}", audit_file.display());
        let (_off, off_sock) = start(kubelet, &dir.join("sock-audit-off"), &[]);
        let (_on, on_sock) = start(kubelet, &dir.join("sock-audit-on"), &[&audit_flag]);
        let (_ctl, ctl_sock) = start(kubelet, &dir.join("sock-audit-ctl"), &[]);
        let d = target.join("audit-bench").display().to_string();
        let enc = PathExistsRequest { path: d }.encode_to_vec();
        let seq = vec![
            ("/v1.Filesystem/Mkdir", enc.clone(), 0),
            ("/v1.Filesystem/Rmdir", enc, 0),
        ];
        // ROUNDS=n: the number of rounds (default 21, sharing 7/8 of
        // CALLS pairs): many short rounds give a steadier median on a busy
        // machine.
        let rounds: usize = std::env::var("ROUNDS")
            .ok()
            .and_then(|r| r.parse().ok())
            .unwrap_or(21)
            .max(1);
        let per_round = (calls * 7 / 8 / rounds).max(100);
        let (mut off, mut on, mut ctl) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rounds {
            off.push(raw_sequence(&off_sock, per_round, seq.clone()).p50);
            on.push(raw_sequence(&on_sock, per_round, seq.clone()).p50);
            ctl.push(raw_sequence(&ctl_sock, per_round, seq.clone()).p50);
        }
        let raw = |v: &[Duration]| {
            v.iter()
                .map(|d| format!("{:.1}", us(*d)))
                .collect::<Vec<_>>()
                .join(" ")
        };
        println!("Mkdir+Rmdir p50 per round (us), {rounds} rounds x {per_round} pairs, 1 blocking minimal client:");
        println!("  audit off            {}", raw(&off));
        println!("  audit on             {}", raw(&on));
        println!("  audit off, control   {}", raw(&ctl));
        // The quietest round of each (least disturbed by other load on the
        // machine) beside the medians.
        let best = |v: &[Duration]| v.iter().min().copied().unwrap_or_default();
        let (b_off, b_on, b_ctl) = (best(&off), best(&on), best(&ctl));
        println!(
            "Mkdir+Rmdir best-round p50: audit off {:.1} us, on {:.1} us, control {:.1} us; \
             ratio on/off {:.3}, control/off {:.3}",
            us(b_off),
            us(b_on),
            us(b_ctl),
            us(b_on) / us(b_off),
            us(b_ctl) / us(b_off)
        );
        let median = |mut v: Vec<Duration>| {
            v.sort();
            v[v.len() / 2]
        };
        let (off, on, ctl) = (median(off), median(on), median(ctl));
        let lines = std::fs::read_to_string(&audit_file)
            .map(|t| t.lines().count())
            .unwrap_or(0);
        println!(
            "Mkdir+Rmdir p50: audit off {:.1} us, on {:.1} us, control {:.1} us; \
             ratio on/off {:.3}, control/off {:.3} ({lines} audit lines)",
            us(off),
            us(on),
            us(ctl),
            us(on) / us(off),
            us(ctl) / us(off)
        );
    }

    struct KillOnDrop(std::process::Child);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// Start a proxy serving filesystem/v1 in `sockets`; wait until its
    /// socket accepts connections.
    fn start(kubelet: &Path, sockets: &Path, extra: &[&str]) -> (KillOnDrop, PathBuf) {
        // CSI_PROXY_BIN=<path>: measure another build of the proxy (e.g.
        // an older commit) with this same client code.
        let bin = std::env::var_os("CSI_PROXY_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_csi-proxy")));
        let child = KillOnDrop(
            Command::new(&bin)
                .arg(format!("-kubelet-path={}", kubelet.display()))
                .arg(format!("-socket-dir={}", sockets.display()))
                .arg("-api-groups=filesystem-v1")
                .args(extra)
                // BENCH_LOG=<file>: run the proxy at -v=2 and keep its request
                // lines (handler durations) in <file>.
                .args(std::env::var_os("BENCH_LOG").map(|_| "-v=2"))
                .stderr(match std::env::var_os("BENCH_LOG") {
                    Some(f) => Stdio::from(std::fs::File::create(f).unwrap()),
                    None => Stdio::null(),
                })
                .spawn()
                .expect("start csi-proxy"),
        );
        let sock = sockets.join("csi-proxy-filesystem-v1.sock");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::os::unix::net::UnixStream::connect(&sock).is_err() {
            assert!(Instant::now() < deadline, "csi-proxy did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        (child, sock)
    }
}
