//! The iSCSI API, every version (v1alpha1, v1alpha2), over the real
//! binary's Unix sockets, against open-iscsi and a userspace target
//! (Debian's `tgt`) on 127.0.0.1. One test body per scenario, run against
//! each version through `versions::iscsi::Iscsi`.
//!
//! What this machine allows is run for real: portals are added, listed and
//! removed in open-iscsi's own database. Discovery and login need the
//! kernel's `iscsi_tcp` transport and a running `iscsid`; where they are
//! missing (this VM, CI) the answers must be the clear FailedPrecondition,
//! and a failed login must leave no node record (and so no CHAP secret)
//! behind. Hostile inputs are refused with nothing changed.
#![cfg(target_os = "linux")]

mod common;
mod versions;

use common::Proxy;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio::sync::Mutex;
use tonic::Code;
use versions::iscsi::{Iscsi, Login, Portal, IQN};

/// The tests share open-iscsi's database (`/etc/iscsi`): one at a time.
static ISCSI_DB: Mutex<()> = Mutex::const_new(());

const CHAP: &str = "Chap-Secret-0042";
const MUTUAL: &str = "Mutual-Secret-77";

/// tgtd serving one target with a 16 MiB LUN on 127.0.0.1:`port`.
struct Target {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Target {
    fn start() -> Target {
        assert!(
            Path::new("/usr/sbin/tgtd").exists(),
            "tgtd is missing: scripts/setup.sh installs the tgt package"
        );
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("lun.img");
        std::fs::File::create(&img)
            .unwrap()
            .set_len(16 << 20)
            .unwrap();
        // tgtd's control-socket number has a small range.
        let ctl = (1000 + port % 1000).to_string();
        let child = Command::new("/usr/sbin/tgtd")
            .args([
                "-f",
                "--iscsi",
                &format!("portal=127.0.0.1:{port}"),
                "-C",
                &ctl,
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let adm = |args: &[&str]| {
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let ok = Command::new("tgtadm")
                    .args(["-C", &ctl, "--lld", "iscsi"])
                    .args(args)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .unwrap()
                    .success();
                if ok {
                    return;
                }
                assert!(Instant::now() < deadline, "tgtadm {args:?} failed");
                std::thread::sleep(Duration::from_millis(50));
            }
        };
        adm(&[
            "--mode",
            "target",
            "--op",
            "new",
            "--tid",
            "1",
            "--targetname",
            IQN,
        ]);
        adm(&[
            "--mode",
            "logicalunit",
            "--op",
            "new",
            "--tid",
            "1",
            "--lun",
            "1",
            "-b",
            img.to_str().unwrap(),
        ]);
        adm(&[
            "--mode", "target", "--op", "bind", "--tid", "1", "-I", "ALL",
        ]);
        Target {
            child,
            port,
            _dir: dir,
        }
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Everything in open-iscsi's database, for "nothing changed" checks.
fn iscsi_db() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![std::path::PathBuf::from("/etc/iscsi")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((
                    p.display().to_string(),
                    std::fs::read_to_string(&p).unwrap_or_default(),
                ));
            }
        }
    }
    out.sort();
    out
}

async fn client<C: Iscsi>(p: &Proxy) -> C {
    C::new(p.channel(&format!("iscsi-{}", C::VERSION)).await)
}

/// Portals added, listed (also through the other version: both
/// see the same initiator) and removed for real; discovery and a CHAP
/// login answer for real or with the clear FailedPrecondition; a failed
/// login leaves no secret on disk; nothing secret in the log.
async fn portals_in_open_iscsi_and_clear_errors_where_the_kernel_lacks_iscsi<C: Iscsi>() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: needs root (open-iscsi's database)");
        return;
    }
    let v = C::VERSION;
    let _db = ISCSI_DB.lock().await;
    let t = Target::start();
    let p = Proxy::start(&["-v=10"]);
    let mut c: C = client(&p).await;
    let portal = Portal::new("127.0.0.1", t.port.into());

    c.add_target_portal(&portal).await.unwrap();
    // Idempotent.
    c.add_target_portal(&portal).await.unwrap();
    let list = c.list_target_portals().await.unwrap();
    assert!(list.contains(&portal), "{v}: {list:?}");
    let mut other: C::Other = client(&p).await;
    let list = other.list_target_portals().await.unwrap();
    assert!(
        list.contains(&portal),
        "{v} seen by {}: {list:?}",
        C::Other::VERSION
    );

    let kernel_iscsi = Path::new("/sys/class/iscsi_transport/tcp").exists();
    match c.discover_target_portal(&portal).await {
        Ok(iqns) => assert_eq!(iqns, vec![IQN.to_string()], "{v}"),
        Err(e) => {
            assert!(!kernel_iscsi, "{v}: discovery failed with iscsi_tcp: {e:?}");
            assert_eq!(e.code(), Code::FailedPrecondition, "{v}: {e:?}");
            let m = e.message();
            assert!(m.contains("iscsi_tcp") || m.contains("iscsid"), "{v}: {m}");
        }
    }

    // Login with CHAP: mutual where the version can set the initiator's
    // secret, one-way otherwise.
    let auth = match c.set_mutual_chap_secret(MUTUAL).await {
        Some(r) => {
            r.unwrap();
            2
        }
        None => 1,
    };
    let login = Login::new(&portal, IQN, auth, "chapuser", CHAP);
    let connected = match c.connect_target(&login).await {
        Ok(()) => true,
        Err(e) => {
            assert_eq!(e.code(), Code::FailedPrecondition, "{v}: {e:?}");
            let m = e.message();
            assert!(m.contains("iscsid") || m.contains("iscsi_tcp"), "{v}: {m}");
            assert!(!m.contains(CHAP) && !m.contains(MUTUAL), "{v}: {m}");
            false
        }
    };
    let mut disks = c.get_target_disks(&portal, IQN).await.unwrap();
    if connected {
        // The kernel scans the new session's LUN asynchronously.
        let deadline = Instant::now() + Duration::from_secs(10);
        while disks.is_empty() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
            disks = c.get_target_disks(&portal, IQN).await.unwrap();
        }
        assert!(!disks.is_empty(), "{v}: a logged-in target without disks");
    } else {
        // A failed login leaves no record, so no secret on disk.
        for (path, text) in iscsi_db() {
            assert!(
                !text.contains(CHAP) && !text.contains(MUTUAL),
                "{v}: {path} keeps a CHAP secret"
            );
        }
        assert!(disks.is_empty(), "{v}: {disks:?}");
    }
    c.disconnect_target(&portal, IQN).await.unwrap();
    // Not connected: success (idempotent).
    c.disconnect_target(&portal, IQN).await.unwrap();
    assert!(c.get_target_disks(&portal, IQN).await.unwrap().is_empty());

    c.remove_target_portal(&portal).await.unwrap();
    let list = c.list_target_portals().await.unwrap();
    assert!(!list.contains(&portal), "{v}: {list:?}");
    let e = c.remove_target_portal(&portal).await.unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{v}: {e:?}");

    // No secret in the log at the highest verbosity.
    let log = p.log();
    assert!(!log.is_empty());
    assert!(!log.contains(CHAP) && !log.contains(MUTUAL), "{v}: {log}");
}

/// Every hostile portal, name and CHAP field to every call that takes it:
/// refused, open-iscsi's database unchanged, no secret in the log.
async fn hostile_requests_are_refused_and_change_nothing<C: Iscsi>() {
    let _db = ISCSI_DB.lock().await;
    let p = Proxy::start(&["-v=10"]);
    let mut c: C = client(&p).await;
    let before = iscsi_db();
    let n = versions::iscsi::refuses_hostile(&mut c, &Portal::new("127.0.0.1", 3260), CHAP).await;
    assert!(n >= 30, "{n}");
    assert_eq!(
        iscsi_db(),
        before,
        "{}: a refused request changed open-iscsi's database",
        C::VERSION
    );
    assert!(!p.log().contains(CHAP));
}

versions::every_version!(iscsi:
    portals_in_open_iscsi_and_clear_errors_where_the_kernel_lacks_iscsi,
    hostile_requests_are_refused_and_change_nothing,
);
