//! Read-only System calls through gRPC against the real binary, next to
//! PathExists (the baseline) in the same run, interleaved in rounds so
//! that drift hits all of them alike. p50/p99 and the ratio of each p50 to
//! PathExists's are printed.
//!
//! Linux (Unix sockets): GetService through systemd's D-Bus API (a real
//! `systemd --user` on a private bus, as in tests/system_unix.rs; needs
//! root) and GetBIOSSerialNumber (sysfs; NotFound on machines without DMI,
//! which is measured all the same). Windows (named pipes; CI runs it under
//! wine): GetService through the SCM and GetBIOSSerialNumber through
//! Win32_BIOS on the WMI worker.
//!
//! Run: `cargo bench -p csi-proxy --bench system` (add `--target
//! x86_64-pc-windows-gnu` for the wine figures; CALLS=n per call kind,
//! default 2000).

#[cfg(unix)]
#[path = "../tests/systemd/mod.rs"]
mod systemd;

use csi_proxy_api::filesystem::v1::{filesystem_client::FilesystemClient, PathExistsRequest};
use csi_proxy_api::system::v1alpha1::{
    system_client::SystemClient, GetBiosSerialNumberRequest, GetServiceRequest,
};
use csi_proxy_api::Group;
use csi_proxy_client::{Client, ProxyChannel};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Proxy {
    child: Child,
    root: PathBuf,
    client: Client,
    kubelet: PathBuf,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn start(env: &[(&str, String)]) -> Proxy {
    let root = std::env::temp_dir().join(format!("csi-proxy-bench-system-{}", std::process::id()));
    let kubelet = root.join("kubelet");
    std::fs::create_dir_all(kubelet.join("pod")).unwrap();
    let log = root.join("stderr.log");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_csi-proxy"));
    cmd.arg(format!("-kubelet-path={}", kubelet.display()))
        .arg("-api-groups=filesystem-v1,system")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let client = if cfg!(windows) {
        let prefix = format!(r"\\.\pipe\csi-proxy-bench-system-{}-", std::process::id());
        cmd.arg(format!("-pipe-prefix={prefix}"));
        Client::builder().pipe_prefix(&prefix).build().unwrap()
    } else {
        let dir = root.join("sock");
        cmd.arg(format!("-socket-dir={}", dir.display()));
        Client::builder().socket_dir(&dir).build().unwrap()
    };
    let child = cmd.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("csi-proxy ready")
    {
        assert!(Instant::now() < deadline, "the proxy did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    Proxy {
        child,
        root,
        client,
        kubelet,
    }
}

fn p(lat: &mut [Duration], q: f64) -> Duration {
    lat.sort();
    lat[((lat.len() as f64 * q) as usize).min(lat.len() - 1)]
}

async fn measure(proxy: &Proxy, service: &str, calls: usize) {
    let fs_ch: ProxyChannel = proxy
        .client
        .connect_version(Group::Filesystem, "v1")
        .await
        .unwrap();
    let sys_ch: ProxyChannel = proxy
        .client
        .connect_version(Group::System, "v1alpha1")
        .await
        .unwrap();
    let mut fs = FilesystemClient::new(fs_ch);
    let mut sys = SystemClient::new(sys_ch);
    let path = proxy.kubelet.join("pod").display().to_string();
    let (mut pe, mut gs, mut bios) = (Vec::new(), Vec::new(), Vec::new());
    let mut bios_answer = String::new();
    let mut get_answer = String::new();
    let rounds = 10;
    for _ in 0..rounds {
        for _ in 0..calls / rounds {
            let t = Instant::now();
            fs.path_exists(PathExistsRequest { path: path.clone() })
                .await
                .unwrap();
            pe.push(t.elapsed());
            let t = Instant::now();
            let r = sys
                .get_service(GetServiceRequest {
                    name: service.into(),
                })
                .await;
            gs.push(t.elapsed());
            if get_answer.is_empty() {
                get_answer = match r {
                    Ok(r) => format!("OK {:?}", r.into_inner().display_name),
                    Err(e) => format!("{:?}", e.code()),
                };
            }
            let t = Instant::now();
            let r = sys
                .get_bios_serial_number(GetBiosSerialNumberRequest {})
                .await;
            bios.push(t.elapsed());
            if bios_answer.is_empty() {
                bios_answer = match r {
                    Ok(_) => "OK".into(),
                    Err(e) => format!("{:?}", e.code()),
                };
            }
        }
    }
    let base = p(&mut pe, 0.5);
    println!(
        "{} calls each, {} ({})",
        pe.len(),
        if cfg!(windows) {
            "named pipe"
        } else {
            "Unix socket"
        },
        std::env::consts::OS
    );
    for (name, lat, answer) in [
        ("PathExists (baseline)", &mut pe, "OK".to_string()),
        (
            &format!("GetService {service}") as &str,
            &mut gs,
            get_answer,
        ),
        ("GetBIOSSerialNumber", &mut bios, bios_answer),
    ] {
        let p50 = p(lat, 0.5);
        let p99 = p(lat, 0.99);
        println!(
            "{name:<34} p50 {:>8.1} us  p99 {:>8.1} us  ratio {:>5.2}  answer {answer}",
            p50.as_secs_f64() * 1e6,
            p99.as_secs_f64() * 1e6,
            p50.as_secs_f64() / base.as_secs_f64()
        );
    }
}

fn calls() -> usize {
    std::env::var("CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000)
        .max(10)
}

#[cfg(unix)]
fn main() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("this benchmark needs root (systemd --user in a private mount namespace)");
        return;
    }
    let sd = systemd::Systemd::start();
    let proxy = start(&[("DBUS_SYSTEM_BUS_ADDRESS", sd.address())]);
    let unit = sd.unit("base");
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(measure(&proxy, &unit, calls()));
}

#[cfg(windows)]
fn main() {
    let proxy = start(&[]);
    // A service every Windows (and wine) has.
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(measure(&proxy, "PlugPlay", calls()));
}
