//! Shared harness: start the real `csi-proxy` binary in a temp dir and
//! connect gRPC clients to its Unix sockets (with `csi-proxy-client`).
#![allow(dead_code)]

use csi_proxy_client::{Client, Group, ProxyChannel};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub struct Proxy {
    pub child: Option<Child>,
    pub root: tempfile::TempDir,
    pub socket_dir: PathBuf,
    pub kubelet: PathBuf,
    pub work: PathBuf,
    pub outside: PathBuf,
    pub stderr_path: PathBuf,
}

/// `r` must be an error with one of `codes` and a non-empty message.
pub fn assert_code<T: std::fmt::Debug>(
    r: Result<T, tonic::Status>,
    codes: &[tonic::Code],
    what: &str,
) {
    match r {
        Ok(v) => panic!("{what}: expected an error, got {v:?}"),
        Err(st) => {
            assert!(
                codes.contains(&st.code()),
                "{what}: got {:?} {}",
                st.code(),
                st.message()
            );
            assert!(!st.message().is_empty(), "{what}: empty message");
        }
    }
}

/// The binary under test; `CSI_PROXY_BIN` points the tests at another
/// build (e.g. an older commit, to show that a test catches its bugs).
pub fn bin() -> String {
    std::env::var("CSI_PROXY_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_csi-proxy").to_string())
}

impl Proxy {
    /// Start the proxy with a fresh kubelet dir, a working dir, a directory
    /// outside both (with a sentinel file) and `extra` flags.
    pub fn start(extra: &[&str]) -> Proxy {
        Proxy::start_with(extra, |_| {})
    }

    /// [`Proxy::start`], with `customize` applied to the command before it
    /// is spawned (e.g. resource limits in a `pre_exec` hook).
    pub fn start_with(extra: &[&str], customize: impl FnOnce(&mut Command)) -> Proxy {
        Self::start_in(tempfile::tempdir().unwrap(), extra, customize)
    }

    /// [`Proxy::start`] with every directory on tmpfs (`/dev/shm`) where
    /// there is one: tests that create and remove many directories would
    /// otherwise wait for the disk (this machine's is mounted with
    /// `discard`).
    pub fn start_on_tmpfs(extra: &[&str]) -> Proxy {
        let root = if Path::new("/dev/shm").is_dir() {
            tempfile::tempdir_in("/dev/shm").unwrap()
        } else {
            tempfile::tempdir().unwrap()
        };
        Self::start_in(root, extra, |_| {})
    }

    fn start_in(
        root: tempfile::TempDir,
        extra: &[&str],
        customize: impl FnOnce(&mut Command),
    ) -> Proxy {
        let kubelet = root.path().join("kubelet");
        let work = root.path().join("work");
        let outside = root.path().join("outside");
        let socket_dir = root.path().join("sock");
        for d in [&kubelet, &work, &outside] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(outside.join("sentinel"), b"keep me").unwrap();
        let stderr_path = root.path().join("stderr.log");
        let mut proxy = Proxy {
            child: None,
            root,
            socket_dir,
            kubelet,
            work,
            outside,
            stderr_path,
        };
        proxy.spawn(extra, customize);
        proxy.wait_ready(extra);
        proxy
    }

    pub fn command(&self, extra: &[&str]) -> Command {
        let mut cmd = Command::new(bin());
        cmd.arg(format!("-kubelet-path={}", self.kubelet.display()))
            .arg("-working-dir")
            .arg(&self.work)
            .arg(format!("--socket-dir={}", self.socket_dir.display()))
            .arg("-v=2");
        // Format records stay in the test's own tree, not the host's
        // /var/lib/csi-proxy.
        if !extra.iter().any(|a| a.contains("state-dir")) {
            cmd.arg(format!(
                "-state-dir={}",
                self.root.path().join("state").display()
            ));
        }
        cmd.args(extra).stdin(Stdio::null());
        cmd
    }

    fn spawn(&mut self, extra: &[&str], customize: impl FnOnce(&mut Command)) {
        let log = std::fs::File::create(&self.stderr_path).unwrap();
        let mut cmd = self.command(extra);
        customize(&mut cmd);
        let child = cmd
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start csi-proxy");
        self.child = Some(child);
    }

    fn expected_sockets(&self, extra: &[&str]) -> usize {
        if extra.iter().any(|a| a.contains("api-groups")) {
            1
        } else {
            23
        }
    }

    fn wait_ready(&mut self, extra: &[&str]) {
        let want = self.expected_sockets(extra);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let n = std::fs::read_dir(&self.socket_dir)
                .map(|d| d.count())
                .unwrap_or(0);
            if n >= want && self.log().contains("csi-proxy ready") {
                return;
            }
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("csi-proxy exited early with {status}: {}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "csi-proxy not ready: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// The number of threads of the running proxy (Linux, `/proc`).
    pub fn threads(&self) -> usize {
        let pid = self.child.as_ref().expect("running").id();
        let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        s.lines()
            .find_map(|l| l.strip_prefix("Threads:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap()
    }

    pub fn socket(&self, endpoint: &str) -> PathBuf {
        self.socket_dir.join(format!("csi-proxy-{endpoint}.sock"))
    }

    /// A client for this proxy's socket directory.
    pub fn client(&self) -> Client {
        Client::builder()
            .socket_dir(&self.socket_dir)
            .build()
            .unwrap()
    }

    /// A channel to the endpoint `<group>-<version>`, e.g. `"filesystem-v1"`.
    pub async fn channel(&self, endpoint: &str) -> ProxyChannel {
        let (group, version) = endpoint.split_once('-').expect("<group>-<version>");
        let group = Group::parse(group).expect("a group");
        let channel = self
            .client()
            .connect_version(group, version)
            .await
            .unwrap_or_else(|e| panic!("connect to {endpoint}: {e}"));
        assert_eq!(channel.endpoint(), self.socket(endpoint));
        channel
    }

    /// SIGTERM, then wait for the exit status.
    pub fn terminate(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        // SAFETY: kill(2) with a pid we own and a valid signal number.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(s) = child.try_wait().unwrap() {
                return s;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("csi-proxy did not stop on SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL (no shutdown code runs, as in a crash), then the same
    /// binary started again on the same directories.
    pub fn kill_and_restart(&mut self, extra: &[&str]) {
        let mut child = self.child.take().expect("running");
        let _ = child.kill();
        let _ = child.wait();
        // The sockets of the killed process stay behind; the new one
        // replaces them.
        self.spawn(extra, |_| {});
        self.wait_ready(extra);
    }

    /// A full listing of the temp tree (paths, kinds, link targets, file
    /// contents), to prove that rejected requests changed nothing.
    pub fn snapshot(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        walk(self.root.path(), self.root.path(), &mut out);
        out
    }
}

fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let p = e.path();
        let rel = p.strip_prefix(base).unwrap().display().to_string();
        if rel == "sock" || rel == "stderr.log" || rel == "state" {
            continue;
        }
        let m = std::fs::symlink_metadata(&p).unwrap();
        let desc = if m.file_type().is_symlink() {
            format!("link -> {}", std::fs::read_link(&p).unwrap().display())
        } else if m.is_dir() {
            walk(base, &p, out);
            "dir".to_string()
        } else {
            format!("file {:?}", std::fs::read(&p).unwrap())
        };
        out.insert(rel, desc);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// PartitionDisk of `disk_number` over gRPC (disk v1).
pub async fn partition(proxy: &Proxy, disk_number: u32) -> Result<(), tonic::Status> {
    proxy
        .client()
        .connect_disk_v1()
        .await
        .unwrap()
        .partition_disk(csi_proxy_api::disk::v1::PartitionDiskRequest { disk_number })
        .await
        .map(|_| ())
}

/// The one volume of `disk_number` (volume v1 ListVolumesOnDisk; there
/// must be exactly one).
pub async fn only_volume(proxy: &Proxy, disk_number: u32) -> String {
    let mut v = proxy.client().connect_volume_v1().await.unwrap();
    let mut ids = v
        .list_volumes_on_disk(csi_proxy_api::volume::v1::ListVolumesOnDiskRequest {
            disk_number,
            partition_number: 0,
        })
        .await
        .unwrap()
        .into_inner()
        .volume_ids;
    assert_eq!(ids.len(), 1, "{ids:?}");
    ids.remove(0)
}

/// Partitions `disk_number` and gives its one volume.
pub async fn partitioned_volume(proxy: &Proxy, disk_number: u32) -> String {
    partition(proxy, disk_number).await.unwrap();
    only_volume(proxy, disk_number).await
}

/// Partition disk `disk_number` (one GPT partition) and format its volume
/// through the v1 Disk and Volume APIs; the volume id.
pub async fn partition_and_format(c: &Client, disk_number: u32) -> String {
    use csi_proxy_api::{disk, volume};
    c.connect_disk_v1()
        .await
        .unwrap()
        .partition_disk(disk::v1::PartitionDiskRequest { disk_number })
        .await
        .unwrap();
    let mut v = c.connect_volume_v1().await.unwrap();
    let id = v
        .list_volumes_on_disk(volume::v1::ListVolumesOnDiskRequest {
            disk_number,
            partition_number: 0,
        })
        .await
        .unwrap()
        .into_inner()
        .volume_ids
        .remove(0);
    v.format_volume(volume::v1::FormatVolumeRequest {
        volume_id: id.clone(),
    })
    .await
    .unwrap();
    id
}
