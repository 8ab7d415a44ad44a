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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uids_hashing_together_do_not_refuse_a_caller_a_rule_names() {
    crowd(true, 12).await;
}

/// 64 uids hashing hold no more than 48 hash threads: the last 16 are for
/// callers a rule names by uid or pod (red team 42ident: 64 hash threads
/// out refused a named victim until they ended).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hash_threads_of_64_uids_leave_a_caller_a_rule_names_its_own() {
    crowd(true, 64).await;
}

/// The same with a victim no rule names by uid (an entry on its digest
/// alone): it is in line with the 12 uids, and gets its fair share of the
/// hashing place (one buffer in 13), not less.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uids_hashing_together_leave_any_caller_its_share() {
    crowd(false, 12).await;
}

async fn crowd(named: bool, uids: u32) {
    // Both touch this test binary: one at a time.
    static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _one = ONE_AT_A_TIME.lock().await;
    if !nix::unistd::geteuid().is_root() {
        assert!(std::env::var_os("CI").is_none(), "CI must run this test");
        eprintln!("SKIPPED: needs root to run the attackers as other users");
        return;
    }
    let python = std::path::Path::new("/usr/bin/python3");
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

    // `uids` uids, each its own copy of the interpreter grown to 200 MB
    // (sparse: zeros hash as slowly as any bytes).
    struct Attackers(Vec<std::process::Child>);
    impl Drop for Attackers {
        fn drop(&mut self) {
            for a in &mut self.0 {
                let _ = a.kill();
                let _ = a.wait();
            }
        }
    }
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
    // Their hashes in line.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut took = Vec::new();
    let pid = p.child.as_ref().unwrap().id();
    if uids > 48 {
        // At the bound: others wait for a hash thread.
        let t = Instant::now();
        while hash_threads(pid) < 48 {
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
    // Named: ahead of them all. Not named: one buffer of the place in 13
    // (each ~0.5 ms), its 14 MB in well under the 2 s identification
    // time.
    // With 64 uids, their 64 processes and 48 hash threads share the 2
    // CPUs with it: served, in well under the 2 s identification time.
    let limit = if named && uids <= 12 {
        quiet * 3 + Duration::from_millis(300)
    } else {
        Duration::from_millis(1500)
    };
    assert!(worst < limit, "worst {worst:?}, quiet {quiet:?}");
}

/// The proxy's hash threads out.
fn hash_threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|c| c.trim() == "csi-exe-hash")
        .count()
}
