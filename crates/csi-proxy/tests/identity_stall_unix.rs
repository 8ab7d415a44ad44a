//! One caller stalls nothing else (issue 39): identifying a caller, which
//! with an `exe_sha256` rule hashes its executable, happens off the accept
//! loop and the async workers, bounded in time, and paid from the caller's
//! own hashing budget.
//!
//! The attack: two processes of another user, running a ~500 MB
//! executable, touch it (a new cache key each time) and reconnect on the
//! Volume and Disk sockets in a loop. Meanwhile PathExists on the
//! Filesystem socket keeps its quiet latency (p99 within 2x of the quiet
//! p99 measured just before, in the same test). Before the fix the hash ran
//! in the accept loop on an async worker: the PathExists calls stalled for
//! the whole attack.
#![cfg(target_os = "linux")]

mod common;

use common::Proxy;
use csi_proxy_api::filesystem::v1::{filesystem_client::FilesystemClient, PathExistsRequest};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Set in an attacker run: the socket directory to connect to.
const ATTACK_DIR: &str = "IDENTITY_STALL_SOCKET_DIR";
/// Set in an attacker run: the endpoint and for how long (ms).
const ATTACK_ENDPOINT: &str = "IDENTITY_STALL_ENDPOINT";
const ATTACK_FOR_MS: &str = "IDENTITY_STALL_FOR_MS";

/// An attacker run of this test binary (a no-op otherwise): touch our own
/// executable and reconnect, until the time is up.
#[test]
fn attacker_process() {
    let Ok(dir) = std::env::var(ATTACK_DIR) else {
        return;
    };
    let endpoint = std::env::var(ATTACK_ENDPOINT).unwrap();
    let ms: u64 = std::env::var(ATTACK_FOR_MS).unwrap().parse().unwrap();
    let exe = std::fs::read_link("/proc/self/exe").unwrap();
    let socket = Path::new(&dir).join(format!("csi-proxy-{endpoint}.sock"));
    let end = Instant::now() + Duration::from_millis(ms);
    let mut open = std::collections::VecDeque::new();
    let mut n = 0u64;
    while Instant::now() < end {
        // A new mtime and ctime: a new digest-cache key (the owner may
        // set any time on its own file, running or not).
        let t = nix::sys::time::TimeVal::new(1_000_000 + n as i64, 0);
        let _ = nix::sys::stat::utimes(&exe, &t, &t);
        n += 1;
        if let Ok(s) = std::os::unix::net::UnixStream::connect(&socket) {
            open.push_back(s);
            if open.len() > 8 {
                open.pop_front();
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn p99(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[(v.len() * 99 / 100).min(v.len() - 1)]
}

/// PathExists latencies over `window`.
async fn measure(p: &Proxy, window: Duration) -> Vec<Duration> {
    let mut c = FilesystemClient::new(p.channel("filesystem-v1").await);
    let path = p.kubelet.display().to_string();
    let end = Instant::now() + window;
    let mut took = Vec::new();
    while Instant::now() < end {
        let t = Instant::now();
        let r = tokio::time::timeout(
            Duration::from_secs(30),
            c.path_exists(PathExistsRequest { path: path.clone() }),
        )
        .await;
        took.push(t.elapsed());
        r.expect("PathExists hung").expect("PathExists failed");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    took
}

/// A copy of this test binary grown to ~500 MB, readable and writable by
/// the attackers' user.
fn big_executable(dir: &Path) -> PathBuf {
    let exe = dir.join("attacker");
    std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    let f = std::fs::File::options().write(true).open(&exe).unwrap();
    // An ELF runs with trailing bytes; zeros hash as slowly as any.
    f.set_len(500 << 20).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o777)).unwrap();
    nix::unistd::chown(&exe, Some(65534.into()), Some(65534.into())).unwrap();
    exe
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hashing_callers_do_not_stall_another_endpoint() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIPPED: needs root to run the attackers as another user");
        return;
    }
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let policy = dir.path().join("policy.json");
    // Every group but Filesystem asks for an executable's digest (nobody's).
    let zeros = "0".repeat(64);
    std::fs::write(
        &policy,
        format!(
            r#"{{"filesystem": [{{"uid": 0}}], "volume": [{{"exe_sha256": "{zeros}"}}], "disk": [{{"exe_sha256": "{zeros}"}}]}}"#
        ),
    )
    .unwrap();
    let p = Proxy::start_on_tmpfs(&[
        &format!("-caller-policy={}", policy.display()),
        "-socket-mode=0666",
    ]);
    std::fs::set_permissions(p.root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let exe = big_executable(dir.path());

    // Warm up (this connection's own identity, the first calls), then quiet.
    measure(&p, Duration::from_millis(500)).await;
    let quiet = p99(measure(&p, Duration::from_secs(3)).await);

    let attack = Duration::from_secs(10);
    let attackers: Vec<_> = ["volume-v1", "disk-v1"]
        .iter()
        .map(|endpoint| {
            std::process::Command::new(&exe)
                .args([
                    "--exact",
                    "attacker_process",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(ATTACK_DIR, &p.socket_dir)
                .env(ATTACK_ENDPOINT, endpoint)
                .env(ATTACK_FOR_MS, attack.as_millis().to_string())
                .uid(65534)
                .gid(65534)
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    // Let the first hashes start.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let during = measure(&p, attack - Duration::from_secs(1)).await;
    for mut a in attackers {
        assert!(a.wait().unwrap().success());
    }
    let worst = *during.iter().max().unwrap();
    let loaded = p99(during);
    eprintln!("PathExists p99: quiet {quiet:?}, under attack {loaded:?} (worst {worst:?})");
    assert!(
        loaded <= quiet * 2,
        "PathExists p99 went from {quiet:?} to {loaded:?} (worst {worst:?}) while two callers \
         made the proxy hash their executable"
    );
}
