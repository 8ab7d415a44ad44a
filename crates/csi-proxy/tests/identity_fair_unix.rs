//! Many uids hashing at once do not refuse a caller a rule names (red
//! team 41ident N1): 12 uids outside pods, each running its own 200 MB
//! executable, touch it and reconnect on the Volume socket (whose rule is
//! on a digest alone, so every caller there is hashed). The victim, this
//! test process (uid 0, named with its digest by the Filesystem rule),
//! touches its own executable before each call, so it must be hashed each
//! time. Before, the line for the hashing place was ordered by budget
//! left: the 12 uids, each hashing slowly with a full bucket, went first,
//! and the victim was refused (0 of 8). Now the victim's hash goes ahead
//! of those of callers no rule names by uid or pod.
#![cfg(target_os = "linux")]

mod common;

use common::Proxy;
use csi_proxy_api::filesystem::v1::{filesystem_client::FilesystemClient, PathExistsRequest};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

/// Touch our own executable and reconnect every 0.3 s, 8 connections held.
const ATTACKER: &str = r#"
import os, socket, sys, time
sock, uid, hold = sys.argv[1:4]
os.setgid(int(uid))
os.setuid(int(uid))
held = []
end = time.time() + float(hold)
n = 0
while time.time() < end:
    n += 1
    os.utime(sys.executable, (1000000 + n, 1000000 + n))
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(sock)
        held.append(s)
    except OSError:
        pass
    if len(held) > 8:
        held.pop(0).close()
    time.sleep(0.3)
"#;

/// Set in a victim run: the socket directory and the path to look up.
const VICTIM_DIR: &str = "IDENTITY_FAIR_SOCKET_DIR";
const VICTIM_PATH: &str = "IDENTITY_FAIR_PATH";

/// A victim run of a padded copy of this test binary (a no-op otherwise):
/// one PathExists on a fresh connection; exits 0 when served.
#[test]
fn victim_process() {
    let (Ok(dir), Ok(path)) = (std::env::var(VICTIM_DIR), std::env::var(VICTIM_PATH)) else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let served = rt.block_on(async {
        let client = csi_proxy_client::Client::builder()
            .socket_dir(&dir)
            .build()
            .unwrap();
        let ch = client
            .connect_version(csi_proxy_client::Group::Filesystem, "v1")
            .await
            .unwrap();
        let mut c = FilesystemClient::new(ch);
        c.path_exists(PathExistsRequest { path }).await.is_ok()
    });
    std::process::exit(if served { 0 } else { 1 });
}

/// A victim whose executable (128 MB) takes longer to hash than its
/// identification's 2 s under its fair share among 30 uids, and which
/// retries half a second after each refusal, is served: its hash goes on
/// for a retry to take it up (red team 42ident F2: each retry started
/// again, 0 of 29 served in 70 s; here, before, 39 s; now about 15 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_takes_up_the_hash_its_first_attempt_started() {
    let _one = ONE_AT_A_TIME.lock().await;
    if !nix::unistd::geteuid().is_root() {
        assert!(std::env::var_os("CI").is_none(), "CI must run this test");
        eprintln!("SKIPPED: needs root to run the attackers as other users");
        return;
    }
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let d = dir.path();
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    let victim = d.join("victim");
    std::fs::copy(std::env::current_exe().unwrap(), &victim).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&victim)
        .unwrap()
        .set_len(128 << 20)
        .unwrap();
    let out = std::process::Command::new("sha256sum")
        .arg(&victim)
        .output()
        .unwrap();
    let digest = String::from_utf8(out.stdout).unwrap()[..64].to_string();
    let policy = d.join("policy.json");
    std::fs::write(
        &policy,
        format!(
            r#"{{"filesystem": [{{"exe_sha256": "{digest}"}}], "volume": [{{"exe_sha256": "{}"}}]}}"#,
            "0".repeat(64)
        ),
    )
    .unwrap();
    let p = Proxy::start_on_tmpfs(&[
        &format!("-caller-policy={}", policy.display()),
        "-socket-mode=0666",
    ]);
    std::fs::set_permissions(p.root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let run_victim = || {
        let t = Instant::now();
        let ok = std::process::Command::new(&victim)
            .args(["--exact", "victim_process", "--test-threads=1", "-q"])
            .env(VICTIM_DIR, &p.socket_dir)
            .env(VICTIM_PATH, p.kubelet.display().to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap()
            .success();
        (t.elapsed(), ok)
    };
    let (quiet, ok) = run_victim();
    assert!(ok, "the victim was refused on a quiet machine ({quiet:?})");
    // Touched: its digest must be computed again under the crowd.
    let t = nix::sys::time::TimeVal::new(2_000_000, 0);
    nix::sys::stat::utimes(&victim, &t, &t).unwrap();
    let _attackers = attackers(&p, d, 30);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let start = Instant::now();
    let mut tries = 0;
    loop {
        tries += 1;
        let (took, ok) = run_victim();
        if ok {
            eprintln!(
                "victim (128 MB, not named): quiet {quiet:?}; under 30 uids served at try {tries}, {:?} after the first ({took:?})",
                start.elapsed()
            );
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the victim was refused {tries} times in {:?}",
            start.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Both touch executables the proxy hashes: one at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uids_hashing_together_do_not_refuse_a_caller_a_rule_names() {
    crowd(true, 12).await;
}

/// 100 uids hashing hold no more than 96 hash threads: the last 32 are for
/// callers a rule names by uid or pod (red team 42ident: 64 hash threads
/// out refused a named victim until they ended).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hash_threads_of_100_uids_leave_a_caller_a_rule_names_its_own() {
    crowd(true, 100).await;
}

/// The same with a victim no rule names by uid (an entry on its digest
/// alone): it is in line with the 12 uids, and gets its fair share of the
/// hashing place (one buffer in 13), not less.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uids_hashing_together_leave_any_caller_its_share() {
    crowd(false, 12).await;
}

async fn crowd(named: bool, uids: u32) {
    let _one = ONE_AT_A_TIME.lock().await;
    if !nix::unistd::geteuid().is_root() {
        assert!(std::env::var_os("CI").is_none(), "CI must run this test");
        eprintln!("SKIPPED: needs root to run the attackers as other users");
        return;
    }
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let d = dir.path();
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    let me = std::env::current_exe().unwrap();
    let out = std::process::Command::new("sha256sum")
        .arg(&me)
        .output()
        .unwrap();
    let mine = String::from_utf8(out.stdout).unwrap()[..64].to_string();
    let policy = d.join("policy.json");
    std::fs::write(
        &policy,
        format!(
            r#"{{"filesystem": [{{{}"exe_sha256": "{mine}"}}], "volume": [{{"exe_sha256": "{}"}}]}}"#,
            if named { r#""uid": 0, "# } else { "" },
            "0".repeat(64)
        ),
    )
    .unwrap();
    let p = Proxy::start_on_tmpfs(&[
        &format!("-caller-policy={}", policy.display()),
        "-socket-mode=0666",
    ]);
    std::fs::set_permissions(p.root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = p.kubelet.display().to_string();
    let victim = || {
        let (p, path, me) = (&p, path.clone(), me.clone());
        async move {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap();
            let t = nix::sys::time::TimeVal::new(now.as_secs() as i64, now.subsec_micros() as i64);
            nix::sys::stat::utimes(&me, &t, &t).unwrap();
            let t = Instant::now();
            let mut c = FilesystemClient::new(p.channel("filesystem-v1").await);
            let r = tokio::time::timeout(
                Duration::from_secs(10),
                c.path_exists(PathExistsRequest { path }),
            )
            .await
            .expect("PathExists hung");
            (t.elapsed(), r.map(|_| ()))
        }
    };
    // Warm up, then quiet.
    let deadline = Instant::now() + Duration::from_secs(30);
    while victim().await.1.is_err() {
        assert!(Instant::now() < deadline, "the victim was never identified");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let mut quiet = Duration::ZERO;
    for _ in 0..3 {
        let (t, r) = victim().await;
        r.expect("a quiet call");
        quiet = quiet.max(t);
    }

    let attackers = attackers(&p, d, uids);
    // Their hashes in line.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut took = Vec::new();
    let pid = p.child.as_ref().unwrap().id();
    if uids > 96 {
        // At the bound: others wait for a hash thread.
        let t = Instant::now();
        while hash_threads(pid) < 96 {
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "{} hash threads",
                hash_threads(pid)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    for _ in 0..8 {
        let (t, r) = victim().await;
        if let Err(s) = r {
            panic!("the victim was refused after {t:?} while {uids} uids hashed: {s:?}");
        }
        took.push(t);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let hashing = hash_threads(p.child.as_ref().unwrap().id());
    drop(attackers);
    eprintln!(
        "victim (named: {named}; touch, connect, PathExists): quiet {quiet:?}, while {uids} uids hash {took:?}; {hashing} hash threads out"
    );
    let worst = *took.iter().max().unwrap();
    let mut sorted = took.clone();
    sorted.sort();
    let median = sorted[sorted.len() / 2];
    // Every call served well within the 2 s identification time (each
    // before was refused at 2 s). Named: ahead of them all, its median
    // near its quiet time; a single call may wait behind the 2 CPUs these
    // processes share (one of 40 took 0.46 s in CI). Not named: one buffer
    // of the place in 13 (each ~0.5 ms), its 14 MB in a few hundred ms.
    // With 100 uids, their 100 processes and 96 hash threads share the CPUs.
    assert!(
        worst < Duration::from_millis(1500),
        "worst {worst:?}, quiet {quiet:?}"
    );
    if named && uids <= 12 {
        let limit = quiet * 3 + Duration::from_millis(100);
        assert!(median < limit, "median {median:?}, quiet {quiet:?}");
    }
}

/// The proxy's hash threads out.
fn hash_threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|c| c.trim() == "csi-exe-hash")
        .count()
}

/// Processes that kill their attackers when dropped.
struct Attackers(Vec<std::process::Child>);

impl Drop for Attackers {
    fn drop(&mut self) {
        for a in &mut self.0 {
            let _ = a.kill();
            let _ = a.wait();
        }
    }
}

/// `uids` uids outside pods, each running its own copy of the interpreter
/// grown to 200 MB (sparse: zeros hash as slowly as any bytes), touching
/// it and reconnecting on the Volume socket.
fn attackers(p: &Proxy, d: &std::path::Path, uids: u32) -> Attackers {
    let python = std::path::Path::new("/usr/bin/python3");
    let mut attackers = Attackers(Vec::new());
    for i in 0..uids {
        let uid = 62_000 + i;
        let exe = d.join(format!("python-{i}"));
        std::fs::copy(python, &exe).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&exe)
            .unwrap()
            .set_len(200 << 20)
            .unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        nix::unistd::chown(&exe, Some(uid.into()), Some(uid.into())).unwrap();
        let a = std::process::Command::new(&exe)
            .args(["-c", ATTACKER])
            .arg(p.socket_dir.join("csi-proxy-volume-v1.sock"))
            .args([uid.to_string(), "40".into()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        attackers.0.push(a);
    }
    attackers
}
