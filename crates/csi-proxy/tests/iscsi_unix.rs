//! The iSCSI API (v1alpha1, v1alpha2) over the real binary's Unix sockets,
//! against open-iscsi and a userspace target (Debian's `tgt`) on 127.0.0.1.
//!
//! What this machine allows is run for real: portals are added, listed and
//! removed in open-iscsi's own database. Discovery and login need the
//! kernel's `iscsi_tcp` transport and a running `iscsid`; where they are
//! missing (this VM, CI) the answers must be the clear FailedPrecondition,
//! and a failed login must leave no node record (and so no CHAP secret)
//! behind. Hostile inputs are refused with nothing changed.
#![cfg(target_os = "linux")]

mod common;

use common::Proxy;
use csi_proxy_api::iscsi::{v1alpha1, v1alpha2};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio::sync::Mutex;
use tonic::Code;
use v1alpha2::iscsi_client::IscsiClient;

/// The tests share open-iscsi's database (`/etc/iscsi`): one at a time.
static ISCSI_DB: Mutex<()> = Mutex::const_new(());

const IQN: &str = "iqn.2026-01.io.csi-proxy.test:disk1";
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

fn portal2(port: u32) -> v1alpha2::TargetPortal {
    v1alpha2::TargetPortal {
        target_address: "127.0.0.1".into(),
        target_port: port,
    }
}

async fn client(p: &Proxy) -> IscsiClient<csi_proxy_client::ProxyChannel> {
    IscsiClient::new(p.channel("iscsi-v1alpha2").await)
}

#[tokio::test]
async fn portals_in_open_iscsi_and_clear_errors_where_the_kernel_lacks_iscsi() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: needs root (open-iscsi's database)");
        return;
    }
    let _db = ISCSI_DB.lock().await;
    let t = Target::start();
    let p = Proxy::start(&["-v=10"]);
    let mut c = client(&p).await;
    let portal = portal2(t.port.into());

    c.add_target_portal(v1alpha2::AddTargetPortalRequest {
        target_portal: Some(portal.clone()),
    })
    .await
    .unwrap();
    // Idempotent.
    c.add_target_portal(v1alpha2::AddTargetPortalRequest {
        target_portal: Some(portal.clone()),
    })
    .await
    .unwrap();
    let list = c
        .list_target_portals(v1alpha2::ListTargetPortalsRequest {})
        .await
        .unwrap()
        .into_inner()
        .target_portals;
    assert!(list.contains(&portal), "{list:?}");
    // The v1alpha1 endpoint sees the same initiator.
    let mut c1 = v1alpha1::iscsi_client::IscsiClient::new(p.channel("iscsi-v1alpha1").await);
    let list1 = c1
        .list_target_portals(v1alpha1::ListTargetPortalsRequest {})
        .await
        .unwrap()
        .into_inner()
        .target_portals;
    assert!(
        list1.iter().any(|x| x.target_port == u32::from(t.port)),
        "{list1:?}"
    );

    let kernel_iscsi = Path::new("/sys/class/iscsi_transport/tcp").exists();
    match c
        .discover_target_portal(v1alpha2::DiscoverTargetPortalRequest {
            target_portal: Some(portal.clone()),
        })
        .await
    {
        Ok(r) => assert_eq!(r.into_inner().iqns, vec![IQN.to_string()]),
        Err(e) => {
            assert!(
                !kernel_iscsi,
                "discovery failed with iscsi_tcp loaded: {e:?}"
            );
            assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
            assert!(
                e.message().contains("iscsi_tcp") || e.message().contains("iscsid"),
                "{}",
                e.message()
            );
        }
    }

    // Login with CHAP (a mutual secret set first).
    c.set_mutual_chap_secret(v1alpha2::SetMutualChapSecretRequest {
        mutual_chap_secret: MUTUAL.into(),
    })
    .await
    .unwrap();
    let connect = c
        .connect_target(v1alpha2::ConnectTargetRequest {
            target_portal: Some(portal.clone()),
            iqn: IQN.into(),
            auth_type: v1alpha2::AuthenticationType::MutualChap as i32,
            chap_username: "chapuser".into(),
            chap_secret: CHAP.into(),
        })
        .await;
    let connected = match connect {
        Ok(_) => true,
        Err(e) => {
            assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
            assert!(!e.message().contains(CHAP) && !e.message().contains(MUTUAL));
            false
        }
    };
    if !connected {
        // A failed login leaves no record, so no secret on disk.
        for (path, text) in iscsi_db() {
            assert!(
                !text.contains(CHAP) && !text.contains(MUTUAL),
                "{path} keeps a CHAP secret"
            );
        }
        let disks = c
            .get_target_disks(v1alpha2::GetTargetDisksRequest {
                target_portal: Some(portal.clone()),
                iqn: IQN.into(),
            })
            .await
            .unwrap()
            .into_inner()
            .disk_i_ds;
        assert!(disks.is_empty(), "{disks:?}");
    }
    c.disconnect_target(v1alpha2::DisconnectTargetRequest {
        target_portal: Some(portal.clone()),
        iqn: IQN.into(),
    })
    .await
    .unwrap();

    c.remove_target_portal(v1alpha2::RemoveTargetPortalRequest {
        target_portal: Some(portal.clone()),
    })
    .await
    .unwrap();
    let list = c
        .list_target_portals(v1alpha2::ListTargetPortalsRequest {})
        .await
        .unwrap()
        .into_inner()
        .target_portals;
    assert!(!list.contains(&portal), "{list:?}");
    let e = c
        .remove_target_portal(v1alpha2::RemoveTargetPortalRequest {
            target_portal: Some(portal.clone()),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e:?}");

    // No secret in the log at the highest verbosity.
    let log = p.log();
    assert!(!log.is_empty());
    assert!(!log.contains(CHAP) && !log.contains(MUTUAL), "{log}");
}

/// Hostile portals, names and CHAP fields.
fn hostile() -> Vec<v1alpha2::ConnectTargetRequest> {
    let ok_portal = portal2(3260);
    let req = |portal: v1alpha2::TargetPortal, iqn: &str, auth: i32, user: &str, secret: &str| {
        v1alpha2::ConnectTargetRequest {
            target_portal: Some(portal),
            iqn: iqn.into(),
            auth_type: auth,
            chap_username: user.into(),
            chap_secret: secret.into(),
        }
    };
    let addr = |a: &str| v1alpha2::TargetPortal {
        target_address: a.into(),
        target_port: 3260,
    };
    let mut v = Vec::new();
    for a in [
        "",
        "10.0.0.1:3260",
        "[::1]",
        "fe80::1%eth0",
        "10.0.0.256",
        "host;reboot",
        "$(id)",
        "-p",
        "a..b",
        "host\n",
        "host/x",
        "höst",
    ] {
        v.push(req(addr(a), IQN, 0, "", ""));
    }
    v.push(req(portal2(65536), IQN, 0, "", ""));
    for n in [
        "",
        "target",
        "iqn.2001-13.com.example",
        "iqn.2001-01.com.example:t 1",
        "iqn.2001-01.com.example;reboot",
        "iqn.2001-01.com.example:$(id)",
        "eui.0123",
        "naa.zz23456789abcdef",
        "--help",
        "iqn.2001-01.com.example/../x",
    ] {
        v.push(req(ok_portal.clone(), n, 0, "", ""));
    }
    v.push(req(ok_portal.clone(), IQN, 1, "user", "short"));
    v.push(req(ok_portal.clone(), IQN, 1, "user", &"s".repeat(300)));
    v.push(req(ok_portal.clone(), IQN, 1, "user", "Chap-Secret\n0042"));
    v.push(req(ok_portal.clone(), IQN, 2, "us er", CHAP));
    v.push(req(ok_portal.clone(), IQN, 0, "", CHAP));
    v.push(req(ok_portal.clone(), IQN, 0, "user", ""));
    v.push(req(ok_portal.clone(), IQN, 7, "", ""));
    v.push(req(ok_portal, IQN, -1, "", ""));
    v
}

#[tokio::test]
async fn hostile_requests_are_refused_and_change_nothing() {
    let _db = ISCSI_DB.lock().await;
    let p = Proxy::start(&["-v=10"]);
    let mut c = client(&p).await;
    let before = iscsi_db();
    let cases = hostile();
    assert!(cases.len() >= 30, "{}", cases.len());
    for r in cases {
        let shown = format!("{:?} {:?} {}", r.target_portal, r.iqn, r.auth_type);
        let e = c.connect_target(r.clone()).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{shown}: {e:?}");
        assert!(!e.message().contains(CHAP), "{}", e.message());
        // The portal and name checks guard every method.
        if r.chap_secret.is_empty() && r.chap_username.is_empty() && r.auth_type == 0 {
            let e = c
                .disconnect_target(v1alpha2::DisconnectTargetRequest {
                    target_portal: r.target_portal.clone(),
                    iqn: r.iqn.clone(),
                })
                .await
                .unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument, "{shown}: {e:?}");
        }
    }
    let e = c
        .set_mutual_chap_secret(v1alpha2::SetMutualChapSecretRequest {
            mutual_chap_secret: "tiny".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(
        iscsi_db(),
        before,
        "a refused request changed open-iscsi's database"
    );
    assert!(!p.log().contains(CHAP));
}
