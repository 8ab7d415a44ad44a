//! Shared by the audit and caller-policy tests: reading the audit file,
//! and a client in another process (this test binary run again with
//! `AUDIT_CLIENT_*` set), which a test can start as another user or move
//! into a cgroup before it connects.
#![allow(dead_code)]

use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// The lines of an audit file (rotated files not included).
pub fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect()
}

/// Wait until `path` holds a line for which `want` holds; return it.
pub fn wait_line(path: &Path, want: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(v) = lines(path).into_iter().find(|v| want(v)) {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "no such audit line in {}:\n{}",
            path.display(),
            std::fs::read_to_string(path).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A line for `method` whose request `path` is `p`.
pub fn is_call(v: &Value, method: &str, p: &Path) -> bool {
    v["method"] == method && v["request"]["path"] == p.display().to_string()
}

/// The environment variable naming the socket directory of a client run.
pub const CLIENT_DIR: &str = "AUDIT_CLIENT_SOCKET_DIR";
/// The directory a client run creates (filesystem v1 Mkdir).
pub const CLIENT_MKDIR: &str = "AUDIT_CLIENT_MKDIR";

/// A client process, waiting on its standard input before it connects.
pub struct ClientProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl ClientProcess {
    /// Start this test binary's `test_name` test as a client of the proxy
    /// at `socket_dir` that will create `dir`; `customize` may set the
    /// user, groups, ...
    pub fn start(
        test_name: &str,
        socket_dir: &Path,
        dir: &Path,
        customize: impl FnOnce(&mut Command),
    ) -> ClientProcess {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args(["--exact", test_name, "--nocapture", "--test-threads=1"])
            .env(CLIENT_DIR, socket_dir)
            .env(CLIENT_MKDIR, dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        customize(&mut cmd);
        let mut child = cmd.spawn().expect("start the client process");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut c = ClientProcess {
            child,
            stdin,
            stdout,
        };
        // It says when it waits.
        let line = c.read_line();
        assert!(line.contains("CLIENT-READY"), "{line}");
        c
    }

    fn read_line(&mut self) -> String {
        loop {
            let mut line = String::new();
            let n = self.stdout.read_line(&mut line).unwrap();
            assert!(n > 0, "client process ended early");
            // The test harness may have written "test name ... " first.
            if let Some(at) = line.find("CLIENT-") {
                return line[at..].to_string();
            }
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Let it connect and call; returns the gRPC code name it got.
    pub fn go(mut self) -> String {
        let mut stdin = self.stdin.take().unwrap();
        writeln!(stdin, "go").unwrap();
        drop(stdin);
        let line = self.read_line();
        let code = line
            .trim()
            .strip_prefix("CLIENT-RESULT ")
            .unwrap_or_else(|| panic!("{line}"))
            .to_string();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "client process: {status}");
        code
    }
}

/// The body of a client run (call it from a `#[test]` named in
/// [`ClientProcess::start`]); does nothing outside a client run.
pub fn client_main() {
    let Some(dir) = std::env::var_os(CLIENT_DIR) else {
        return;
    };
    let target = PathBuf::from(std::env::var_os(CLIENT_MKDIR).unwrap());
    println!("CLIENT-READY");
    let mut go = String::new();
    std::io::stdin().read_line(&mut go).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let code = rt.block_on(async move {
        use csi_proxy_api::filesystem::v1::{filesystem_client::FilesystemClient, MkdirRequest};
        let client = csi_proxy_client::Client::builder()
            .socket_dir(PathBuf::from(dir))
            .build()
            .unwrap();
        let channel = client
            .connect_version(csi_proxy_client::Group::Filesystem, "v1")
            .await
            .expect("connect");
        let mut c = FilesystemClient::new(channel);
        let r = c
            .mkdir(MkdirRequest {
                path: target.display().to_string(),
            })
            .await;
        match r {
            Ok(_) => "OK".to_string(),
            Err(s) => format!("{:?}", s.code()),
        }
    });
    println!("CLIENT-RESULT {code}");
}
