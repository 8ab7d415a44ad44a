//! The harness: a fresh proxy per attack, the well-behaved client, the
//! server's RSS and CPU from /proc, and the report.

use crate::attacks::{self, Attack, Bytes};
use csi_proxy_api::filesystem::v1::{PathExistsRequest, PathExistsResponse};
use csi_proxy_http2::client::{RawClient, Shape};
use prost::Message;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub struct Proxy {
    child: Child,
    pub pid: u32,
    pub sock: PathBuf,
    pub target: String,
    _dir: tempfile::TempDir,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn binary() -> PathBuf {
    std::env::var_os("CSI_PROXY_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_csi-proxy")))
}

fn start_proxy() -> Proxy {
    let dir = tempfile::tempdir().unwrap();
    let kubelet = dir.path().join("kubelet");
    let target = kubelet.join("pods/uid/volumes/kubernetes.io~csi/pvc/mount");
    std::fs::create_dir_all(&target).unwrap();
    let sockets = dir.path().join("sock");
    let child = Command::new(binary())
        .arg(format!("-kubelet-path={}", kubelet.display()))
        .arg(format!("-socket-dir={}", sockets.display()))
        .arg("-api-groups=filesystem-v1")
        .stderr(Stdio::null())
        .spawn()
        .expect("start csi-proxy");
    let sock = sockets.join("csi-proxy-filesystem-v1.sock");
    let deadline = Instant::now() + Duration::from_secs(20);
    while UnixStream::connect(&sock).is_err() {
        assert!(Instant::now() < deadline, "csi-proxy did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    Proxy {
        pid: child.id(),
        child,
        sock,
        target: target.display().to_string(),
        _dir: dir,
    }
}

fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// User + system CPU seconds of `pid`.
fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are the
    // 14th and 15th fields of the line.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0)
        + f.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    ticks as f64 / hz
}

fn raise_fd_limit(want: u64) {
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

/// The well-behaved client: sequential PathExists calls on one connection,
/// a 5 s read timeout per call; a failed call counts and the client
/// reconnects.
struct Good {
    sock: PathBuf,
    msg: Vec<u8>,
    client: Option<RawClient<UnixStream>>,
}

impl Good {
    fn new(proxy: &Proxy) -> Self {
        Good {
            sock: proxy.sock.clone(),
            msg: PathExistsRequest {
                path: proxy.target.clone(),
            }
            .encode_to_vec(),
            client: None,
        }
    }

    fn call(&mut self) -> Result<Duration, String> {
        let t = Instant::now();
        if self.client.is_none() {
            let s = UnixStream::connect(&self.sock).map_err(|e| e.to_string())?;
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            self.client = Some(RawClient::new(s, Shape::default()).map_err(|e| e.to_string())?);
        }
        let c = self.client.as_mut().unwrap();
        let r = c
            .call(
                "/v1.Filesystem/PathExists",
                Some(br"\\.\pipe\csi-proxy-filesystem-v1"),
                &self.msg,
            )
            .map_err(|e| e.to_string());
        let ok = match &r {
            Ok(resp) if resp.grpc_status == Some(0) => resp
                .message
                .as_deref()
                .and_then(|m| PathExistsResponse::decode(m).ok())
                .is_some_and(|m| m.exists),
            _ => false,
        };
        if !ok {
            self.client = None;
            return Err(format!("{r:?}"));
        }
        Ok(t.elapsed())
    }

    /// Calls until `stop`: latencies, failures, the first failure.
    fn run(&mut self, stop: &AtomicBool) -> (Vec<Duration>, usize, Option<String>) {
        let mut lat = Vec::new();
        let mut failures = 0;
        let mut first = None;
        while !stop.load(Ordering::Relaxed) {
            match self.call() {
                Ok(d) => lat.push(d),
                Err(e) => {
                    failures += 1;
                    first.get_or_insert(e);
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        }
        (lat, failures, first)
    }
}

fn p99(mut lat: Vec<Duration>) -> Duration {
    if lat.is_empty() {
        return Duration::ZERO;
    }
    lat.sort();
    lat[((lat.len() as f64 * 0.99) as usize).min(lat.len() - 1)]
}

struct Row {
    name: &'static str,
    peak_mib: f64,
    growth_mib: f64,
    cpu: f64,
    cpu_after: f64,
    bytes: Bytes,
    failures: usize,
    first_failure: Option<String>,
    calls: usize,
    p99: Duration,
    base_p99: Duration,
}

fn run_attack(attack: &Attack, secs: f64) -> Row {
    let proxy = start_proxy();
    let mut good = Good::new(&proxy);
    // Baseline: the same client on the same proxy for 3 s just before.
    for _ in 0..200 {
        let _ = good.call();
    }
    let stop = AtomicBool::new(false);
    let base = std::thread::scope(|s| {
        let h = s.spawn(|| good.run(&stop));
        std::thread::sleep(Duration::from_secs(3));
        stop.store(true, Ordering::Relaxed);
        h.join().unwrap()
    });
    let rss_before = status_kib(proxy.pid, "VmRSS:");
    let cpu_before = cpu_secs(proxy.pid);
    let good_stop = AtomicBool::new(false);
    let (bytes, during) = std::thread::scope(|s| {
        let g = s.spawn(|| good.run(&good_stop));
        let bytes = (attack.run)(&proxy.sock, Duration::from_secs_f64(secs));
        good_stop.store(true, Ordering::Relaxed);
        (bytes, g.join().unwrap())
    });
    let cpu_during = cpu_secs(proxy.pid) - cpu_before;
    let peak = status_kib(proxy.pid, "VmHWM:");
    // The attackers are gone (their connections closed): nothing should
    // keep running.
    std::thread::sleep(Duration::from_secs(1));
    let cpu_after = cpu_secs(proxy.pid) - cpu_before - cpu_during;
    let (lat, failures, first_failure) = during;
    Row {
        name: attack.name,
        peak_mib: peak as f64 / 1024.0,
        growth_mib: peak.saturating_sub(rss_before) as f64 / 1024.0,
        cpu: cpu_during,
        cpu_after,
        bytes,
        failures: failures + base.1,
        first_failure: first_failure.or(base.2),
        calls: lat.len(),
        p99: p99(lat),
        base_p99: p99(base.0),
    }
}

pub fn main() {
    raise_fd_limit(12_000);
    let secs: f64 = std::env::var("ATTACK_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5.0);
    let only = std::env::var("ONLY").ok();
    println!(
        "hostile clients vs {} ({secs} s per attack, fresh proxy each)",
        binary().display()
    );
    println!(
        "{:<28} {:>9} {:>9} {:>7} {:>9} {:>14} {:>9} {:>8} {:>7} {:>10} {:>10} {:>6}",
        "attack",
        "peak MiB",
        "grow MiB",
        "CPU s",
        "CPU after",
        "out / in",
        "out/in",
        "calls",
        "fails",
        "p99 us",
        "base p99",
        "x base"
    );
    let mut missed = Vec::new();
    for attack in attacks::ALL {
        if only.as_deref().is_some_and(|o| o != attack.name) {
            continue;
        }
        let r = run_attack(attack, secs);
        let ratio = r.bytes.out as f64 / r.bytes.inp.max(1) as f64;
        let slow = r.p99.as_secs_f64() / r.base_p99.as_secs_f64().max(1e-9);
        println!(
            "{:<28} {:>9.1} {:>9.1} {:>7.2} {:>9.2} {:>14} {:>9.2} {:>8} {:>7} {:>10.0} {:>10.0} {:>6.1}",
            r.name,
            r.peak_mib,
            r.growth_mib,
            r.cpu,
            r.cpu_after,
            format!("{}/{}", human(r.bytes.out), human(r.bytes.inp)),
            ratio,
            r.calls,
            r.failures,
            r.p99.as_secs_f64() * 1e6,
            r.base_p99.as_secs_f64() * 1e6,
            slow
        );
        if let Some(f) = &r.first_failure {
            println!("    first failure: {f}");
        }
        if ratio > 16.0 {
            missed.push(format!("{}: bytes out/in {ratio:.1} > 16", r.name));
        }
        if r.name == "body-hoarding-4" && r.growth_mib > 64.0 {
            missed.push(format!("{}: RSS grew {:.1} MiB > 64", r.name, r.growth_mib));
        }
        if r.failures > 0 {
            missed.push(format!("{}: {} failed calls", r.name, r.failures));
        }
        if slow > 10.0 {
            missed.push(format!("{}: p99 {slow:.1}x baseline > 10x", r.name));
        }
    }
    if missed.is_empty() {
        println!("ok");
    } else {
        println!("missed:\n  {}", missed.join("\n  "));
        std::process::exit(1);
    }
}

fn human(n: u64) -> String {
    match n {
        _ if n >= 10 << 20 => format!("{}M", n >> 20),
        _ if n >= 10 << 10 => format!("{}K", n >> 10),
        _ => n.to_string(),
    }
}
