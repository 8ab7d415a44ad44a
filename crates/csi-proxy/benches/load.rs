//! Load test (loopback only, bounded): 1000 idle connections that never send
//! the HTTP/2 preface (as grpc-go's endpoint probe does) are held open on the
//! real `csi-proxy` binary while 16 clients make PathExists calls; then every
//! connection is closed. Fails (non-zero exit) on any call error or if the
//! proxy's open descriptors do not return to their starting count.
//!
//! Run: `cargo bench -p csi-proxy --bench load` (IDLE=n idle connections,
//! default 1000; CALLS=n calls per client, default 100000).

#[cfg(target_os = "linux")]
fn main() {
    linux::main();
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("this load test needs Linux (/proc)");
}

#[cfg(target_os = "linux")]
mod linux {
    use csi_proxy_api::filesystem::v1::{PathExistsRequest, PathExistsResponse};
    use csi_proxy_http2::client::{RawClient, Shape};
    use prost::Message;
    use std::os::unix::net::UnixStream;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    fn env(name: &str, default: usize) -> usize {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    }

    fn fds(pid: u32) -> usize {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .count()
    }

    fn rss_kib(pid: u32) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }

    fn raise_own_fd_limit(want: u64) {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit/setrlimit read/write only the struct passed.
        unsafe {
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
            if lim.rlim_cur < want {
                lim.rlim_cur = want.min(lim.rlim_max);
                libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
            }
        }
    }

    pub fn main() {
        let idle_count = env("IDLE", 1000);
        let calls = env("CALLS", 100_000);
        let clients = 16;
        raise_own_fd_limit(idle_count as u64 + 256);
        let dir = tempfile::tempdir().unwrap();
        let kubelet = dir.path().join("kubelet");
        let target = kubelet.join("pods/uid/volumes/kubernetes.io~csi/pvc/mount");
        std::fs::create_dir_all(&target).unwrap();
        let sockets = dir.path().join("sock");
        let mut child = Command::new(env!("CARGO_BIN_EXE_csi-proxy"))
            .arg(format!("-kubelet-path={}", kubelet.display()))
            .arg(format!("-socket-dir={}", sockets.display()))
            // Room for every idle connection, the clients and the probes.
            .arg(format!(
                "-max-connections-per-endpoint={}",
                idle_count + clients + 16
            ))
            .stderr(Stdio::null())
            .spawn()
            .expect("start csi-proxy");
        let pid = child.id();
        let sock = sockets.join("csi-proxy-filesystem-v1.sock");
        let deadline = Instant::now() + Duration::from_secs(20);
        while UnixStream::connect(&sock).is_err() {
            assert!(Instant::now() < deadline, "csi-proxy did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(200));
        let fds_start = fds(pid);
        let rss_start = rss_kib(pid);

        let idle: Vec<UnixStream> = (0..idle_count)
            .map(|_| UnixStream::connect(&sock).expect("idle connection"))
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        let fds_idle = fds(pid);
        let rss_idle = rss_kib(pid);

        let path = target.display().to_string();
        let msg = PathExistsRequest { path }.encode_to_vec();
        let start = Instant::now();
        let threads: Vec<_> = (0..clients)
            .map(|_| {
                let sock = sock.clone();
                let msg = msg.clone();
                std::thread::spawn(move || {
                    let s = UnixStream::connect(&sock).unwrap();
                    let mut c = RawClient::new(s, Shape::default()).unwrap();
                    let mut errors = 0usize;
                    let mut lat = Vec::with_capacity(calls);
                    for _ in 0..calls {
                        let t = Instant::now();
                        let ok = match c.call(
                            "/v1.Filesystem/PathExists",
                            Some(br"\\.\pipe\csi-proxy-filesystem-v1"),
                            &msg,
                        ) {
                            Ok(r) => {
                                r.grpc_status == Some(0)
                                    && r.message.as_deref().is_some_and(|m| {
                                        PathExistsResponse::decode(m).is_ok_and(|m| m.exists)
                                    })
                            }
                            Err(_) => false,
                        };
                        lat.push(t.elapsed());
                        if !ok {
                            errors += 1;
                        }
                    }
                    (errors, lat)
                })
            })
            .collect();
        let mut errors = 0;
        let mut lat = Vec::new();
        for t in threads {
            let (e, l) = t.join().unwrap();
            errors += e;
            lat.extend(l);
        }
        let wall = start.elapsed();
        let fds_busy = fds(pid);
        drop(idle);
        let deadline = Instant::now() + Duration::from_secs(10);
        while fds(pid) != fds_start && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let fds_end = fds(pid);
        let rss_end = rss_kib(pid);
        let _ = child.kill();
        let _ = child.wait();

        lat.sort();
        let at = |q: f64| lat[((lat.len() as f64 * q) as usize).min(lat.len() - 1)];
        println!(
            "{idle_count} idle preface-less connections, {clients} clients x {calls} PathExists calls"
        );
        println!(
            "calls: {} in {:.2} s = {:.0} calls/s; p50 {:.1} us, p99 {:.1} us, max {:.1} us; errors: {errors}",
            lat.len(),
            wall.as_secs_f64(),
            lat.len() as f64 / wall.as_secs_f64(),
            at(0.5).as_secs_f64() * 1e6,
            at(0.99).as_secs_f64() * 1e6,
            lat.last().unwrap().as_secs_f64() * 1e6,
        );
        println!(
            "proxy descriptors: start {fds_start}, with idle {fds_idle}, after the calls {fds_busy}, end {fds_end}"
        );
        println!(
            "proxy RSS: start {rss_start} KiB, with idle {rss_idle} KiB ({:.1} KiB per idle connection), end {rss_end} KiB",
            (rss_idle.saturating_sub(rss_start)) as f64 / idle_count.max(1) as f64
        );
        assert_eq!(errors, 0, "calls failed");
        assert_eq!(fds_end, fds_start, "descriptors not released");
        println!("ok");
    }
}
