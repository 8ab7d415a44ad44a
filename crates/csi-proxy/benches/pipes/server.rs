//! A proxy under test: ours or upstream's `csi-proxy.exe`, started in a
//! temp dir of its own with a kubelet dir holding the bench's paths, ready
//! once its Filesystem v1 pipe accepts connections; killed and its dir
//! removed on drop.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Which binary, and so which flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// Ours: every API group (as upstream serves them), under pipe names of
    /// this run only.
    Ours,
    /// Upstream's: its only flag that matters here is `-kubelet-path`; it
    /// always serves the default pipe names `\\.\pipe\csi-proxy-<group>-<version>`.
    Upstream,
}

impl Flavor {
    pub fn name(self) -> &'static str {
        match self {
            Flavor::Ours => "ours",
            Flavor::Upstream => "upstream",
        }
    }
}

pub const DEFAULT_PIPE_PREFIX: &str = r"\\.\pipe\csi-proxy-";

pub struct Server {
    pub child: Child,
    pub root: PathBuf,
    /// `<kubelet>\pods\uid\volumes\kubernetes.io~csi\pvc\mount`: exists.
    pub target: PathBuf,
    /// The Filesystem v1 pipe.
    pub endpoint: String,
    /// Its `-kubelet-path=...` argument: unique to this server.
    pub kubelet_arg: String,
}

impl Server {
    /// Starts `exe` as `flavor` with `extra` flags after the kubelet path;
    /// `tag` names its temp dir.
    pub fn start(exe: &Path, flavor: Flavor, tag: &str, extra: &[String]) -> Server {
        let root = std::env::temp_dir().join(format!(
            "csi-proxy-bench-{tag}-{}-{}",
            flavor.name(),
            std::process::id()
        ));
        let kubelet = root.join("kubelet");
        let target = kubelet.join(r"pods\uid\volumes\kubernetes.io~csi\pvc\mount");
        std::fs::create_dir_all(&target).unwrap();
        let log = root.join("stderr.log");
        let prefix = match flavor {
            Flavor::Ours => format!(r"\\.\pipe\csi-proxy-bench-{}-", std::process::id()),
            Flavor::Upstream => DEFAULT_PIPE_PREFIX.to_string(),
        };
        let endpoint = format!("{prefix}filesystem-v1");
        assert!(
            !pipe_exists(&endpoint),
            "{endpoint} is already served (a csiproxy service?): stop it first; \
             upstream's csi-proxy.exe cannot serve other pipe names"
        );
        let kubelet_arg = format!("-kubelet-path={}", kubelet.display());
        let mut cmd = Command::new(exe);
        cmd.arg(&kubelet_arg);
        if flavor == Flavor::Ours {
            cmd.arg(format!("-pipe-prefix={prefix}"));
        }
        let child = cmd
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", exe.display()));
        let mut server = Server {
            child,
            root,
            target,
            endpoint,
            kubelet_arg,
        };
        let deadline = Instant::now() + Duration::from_secs(120);
        while !pipe_exists(&server.endpoint) {
            if let Some(status) = server.child.try_wait().unwrap() {
                panic!(
                    "{} exited with {status}:\n{}",
                    exe.display(),
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            assert!(
                Instant::now() < deadline,
                "{} not serving {} after 120 s",
                exe.display(),
                server.endpoint
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Whether a server has an instance of pipe `name` waiting for a client
/// (WaitNamedPipeW: connects nothing, takes no instance).
pub fn pipe_exists(name: &str) -> bool {
    use windows_sys::Win32::System::Pipes::WaitNamedPipeW;
    let wide: Vec<u16> = name.encode_utf16().chain(Some(0)).collect();
    // SAFETY: a NUL-terminated UTF-16 name that outlives the call.
    unsafe { WaitNamedPipeW(wide.as_ptr(), 100) != 0 }
}
