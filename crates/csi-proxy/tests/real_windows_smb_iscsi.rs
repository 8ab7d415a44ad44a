//! The real-Windows tier of SMB and iSCSI, through the real binary over its
//! pipes: an SMB global mapping to a share of this host (`NetShareAdd`)
//! with a local user (`NetUserAdd`), its link in the kubelet dir read
//! through, the user's password rotated (`NetUserSetInfo`) and the share
//! remapped; iSCSI against the Windows iSCSI Target Server on this host
//! (a target and a VHDX disk made through its WMI provider): portals,
//! discovery, logins with and without CHAP, the target's disks, the
//! mutual CHAP secret.
//!
//! Under wine (no SMB client, no iSCSI initiator classes) the requests up
//! to `real_windows::require` run: the valid ones are answered with the
//! clear FailedPrecondition, hostile ones refused, nothing changed, no
//! secret in an answer or the log. On a Windows without the iSCSI Target
//! Server feature the iSCSI tests print a skip that says so.
#![cfg(windows)]

mod pipes;
mod real_windows;
// Only the clients and hostile cases: no test per version here.
#[allow(unused_macros, unused_imports)]
mod versions;

use csi_proxy_api::Group;
use csi_proxy_host::win::wmi::WmiWorker;
use pipes::{assert_unavailable, Proxy};
use real_windows::account::{computer_name, LocalUser};
use real_windows::iscsi_target::{self, Target};
use real_windows::smb::{end_sessions, Share};
use real_windows::{require, under_wine};
use tonic::Code;
use versions::iscsi::{self as vi, Iscsi, Login, Portal};
use versions::smb::{Mapping, Smb};

type SmbV1 = versions::smb::V1;
type IscsiV2 = versions::iscsi::V1alpha2;

const PASSWORD: &str = "Rw-Smb-Secret-1a!";
const ROTATED: &str = "Rw-Smb-Rotated-2b!";
const CONTENTS: &[u8] = b"read through the SMB link\n";

/// A proxy serving SMB v1 (`-v=10`) and its client, and the names of
/// this run's share, user (at most 20 characters) and shared directory
/// (on the system drive, whose ACL lets local users read).
struct SmbRun<C> {
    p: Proxy,
    c: C,
    share: String,
    user: String,
    dir: std::path::PathBuf,
    /// `\\host\share`.
    root: String,
    /// `host\user`.
    qualified: String,
}

async fn smb_run<C: Smb>(tag: &str) -> SmbRun<C> {
    let pid = std::process::id();
    let p = Proxy::start_unique(&format!("rwsmb{tag}"), "smb", &["-v=10"]);
    let c = C::new(p.channel(Group::Smb, "v1").await);
    let drive = std::env::var("SystemDrive").unwrap_or_else(|_| "C:".into());
    let (host, share, user) = (
        computer_name(),
        format!("csiproxy{tag}{pid}"),
        format!("csismb{tag}{pid}"),
    );
    SmbRun {
        p,
        c,
        root: format!(r"\\{host}\{share}"),
        qualified: format!(r"{host}\{user}"),
        share,
        user,
        dir: format!(r"{drive}\csi-proxy-smb-{tag}-{pid}").into(),
    }
}

fn no_secret_logged(p: &Proxy, secrets: &[&str]) {
    let log = p.log_text();
    for s in secrets {
        assert!(!log.contains(s), "a secret is in the log");
    }
}

/// A mapping to `\\<this host>\<share>\pvc` with a local user, read through
/// the link; then the user's password rotated and its server sessions
/// ended, so the old mapping no longer reaches the share: the next
/// NewSmbGlobalMapping with the new password remaps it; then removed.
#[tokio::test]
async fn smb_mapping_to_a_local_share_then_a_rotated_password() {
    smb_mapping_to_a_local_share_then_a_rotated_password_with::<SmbV1>().await;
}

async fn smb_mapping_to_a_local_share_then_a_rotated_password_with<C: Smb>() {
    let mut r = smb_run::<C>("map").await;
    let remote = format!(r"{}\pvc", r.root);
    let local = r.p.kubelet.join("smb-vol");
    let local_s = local.display().to_string();
    let qualified = r.qualified.clone();
    let m = Mapping::new(&remote, &local_s, &qualified, PASSWORD);
    if under_wine() {
        let before = r.p.snapshot();
        assert_unavailable(
            "NewSmbGlobalMapping",
            r.c.new_smb_global_mapping(&m).await,
            PASSWORD,
        );
        assert!(
            std::fs::symlink_metadata(&local).is_err(),
            "a link at {local_s}"
        );
        assert_eq!(r.p.snapshot(), before);
        // The helpers against wine's netapi32: users live in a list of its
        // own (NetUserAdd takes the USER_INFO_1 as Windows does), and there
        // is no SMB server: the share is refused and its directory removed
        // again.
        let user = LocalUser::create(&r.user, PASSWORD).unwrap();
        let e = Share::create(&r.share, &r.dir).err().expect("wine shares");
        assert!(e.to_string().contains("NetShareAdd"), "{e}");
        assert!(!r.dir.exists());
        drop(user);
    }
    let Some(_win) = require("an SMB share of this host and MSFT_SmbGlobalMapping") else {
        return;
    };
    let user = LocalUser::create(&r.user, PASSWORD).unwrap();
    let share = Share::create(&r.share, &r.dir).unwrap();
    std::fs::create_dir_all(share.dir.join("pvc")).unwrap();
    std::fs::write(share.dir.join(r"pvc\hello.txt"), CONTENTS).unwrap();

    r.c.new_smb_global_mapping(&m).await.unwrap();
    let meta = std::fs::symlink_metadata(&local).unwrap();
    assert!(meta.file_type().is_symlink(), "{meta:?}");
    assert_eq!(std::fs::read(local.join("hello.txt")).unwrap(), CONTENTS);
    // Again: the mapping and the link are there already.
    r.c.new_smb_global_mapping(&m).await.unwrap();

    // Rotate the password; the server drops the user's sessions.
    user.set_password(ROTATED).unwrap();
    end_sessions(&user.name).unwrap();
    let rotated = Mapping::new(&remote, &local_s, &qualified, ROTATED);
    r.c.new_smb_global_mapping(&rotated).await.unwrap();
    assert!(r.p.log_text().contains("remapping"), "{}", r.p.log_text());
    assert_eq!(std::fs::read(local.join("hello.txt")).unwrap(), CONTENTS);

    r.c.remove_smb_global_mapping(&remote).await.unwrap();
    r.c.remove_smb_global_mapping(&remote).await.unwrap();
    // Mapped again with the old password: refused by the server.
    std::fs::remove_file(&local)
        .or_else(|_| std::fs::remove_dir(&local))
        .unwrap();
    let e = r.c.new_smb_global_mapping(&m).await.unwrap_err();
    assert!(!e.message().contains(PASSWORD), "{e:?}");
    assert!(
        std::fs::symlink_metadata(&local).is_err(),
        "a link after a failed mapping"
    );
    no_secret_logged(&r.p, &[PASSWORD, ROTATED]);
    drop(share);
}

/// A wrong password for a real share and user: refused by the server,
/// answered with an error that does not carry it, and no link made.
#[tokio::test]
async fn smb_wrong_password_is_refused_without_a_link() {
    smb_wrong_password_is_refused_without_a_link_with::<SmbV1>().await;
}

async fn smb_wrong_password_is_refused_without_a_link_with<C: Smb>() {
    let mut r = smb_run::<C>("bad").await;
    let remote = r.root.clone();
    let local = r.p.kubelet.join("smb-bad");
    let wrong = "Rw-Wrong-Password-3c";
    let m = Mapping::new(&remote, &local.display().to_string(), &r.qualified, wrong);
    if under_wine() {
        assert_unavailable(
            "NewSmbGlobalMapping",
            r.c.new_smb_global_mapping(&m).await,
            wrong,
        );
    }
    let Some(_win) = require("an SMB share of this host and MSFT_SmbGlobalMapping") else {
        return;
    };
    let _user = LocalUser::create(&r.user, PASSWORD).unwrap();
    let _share = Share::create(&r.share, &r.dir).unwrap();
    let e = r.c.new_smb_global_mapping(&m).await.unwrap_err();
    assert_ne!(e.code(), Code::Ok);
    assert!(!e.message().contains(wrong), "{e:?}");
    assert!(
        std::fs::symlink_metadata(&local).is_err(),
        "a link after a failed mapping"
    );
    no_secret_logged(&r.p, &[wrong, PASSWORD]);
}

/// A mapping without a user name, to a real share of this host: by default
/// refused before anything is mapped (it would sign in as the computer
/// account), naming the share and the flag; with
/// `-smb-allow-no-credentials` the rule lets it through (the share's ACL
/// then decides; if it maps, it is removed again).
#[tokio::test]
async fn smb_mapping_without_a_user_is_refused_unless_allowed() {
    smb_mapping_without_a_user_is_refused_unless_allowed_with::<SmbV1>().await;
}

async fn smb_mapping_without_a_user_is_refused_unless_allowed_with<C: Smb>() {
    let mut r = smb_run::<C>("anon").await;
    let remote = format!(r"{}\pvc", r.root);
    let local = r.p.kubelet.join("smb-anon");
    let m = Mapping::new(&remote, &local.display().to_string(), "", "");
    let refused = |e: &tonic::Status| {
        e.code() == Code::PermissionDenied && e.message().contains("-smb-allow-no-credentials")
    };
    let before = r.p.snapshot();
    let e = r.c.new_smb_global_mapping(&m).await.unwrap_err();
    assert!(refused(&e), "{e:?}");
    assert!(e.message().contains("computer account"), "{e:?}");
    assert!(
        e.message().contains(&r.root.to_lowercase()),
        "{}",
        e.message()
    );
    assert_eq!(r.p.snapshot(), before, "a refused mapping changed the tree");
    let Some(_win) = require("an SMB share of this host and MSFT_SmbGlobalMapping") else {
        return;
    };
    let share = Share::create(&r.share, &r.dir).unwrap();
    std::fs::create_dir_all(share.dir.join("pvc")).unwrap();
    // Still refused with a share there: nothing was mapped.
    let e = r.c.new_smb_global_mapping(&m).await.unwrap_err();
    assert!(refused(&e), "{e:?}");
    assert!(std::fs::symlink_metadata(&local).is_err());

    let p = Proxy::start_unique(
        "rwsmbanonok",
        "smb",
        &["-v=10", "-smb-allow-no-credentials"],
    );
    let mut c = C::new(p.channel(Group::Smb, "v1").await);
    let local = p.kubelet.join("smb-anon");
    let m = Mapping::new(&remote, &local.display().to_string(), "", "");
    match c.new_smb_global_mapping(&m).await {
        Ok(()) => {
            assert!(std::fs::symlink_metadata(&local).is_ok());
            c.remove_smb_global_mapping(&remote).await.unwrap();
        }
        Err(e) => assert!(!refused(&e), "refused with the flag: {e:?}"),
    }
    drop(share);
}

/// Every hostile request the SMB tiers know, aimed at a real share of this
/// host with its user's right password: refused before anything is
/// mapped; afterwards a valid request still maps (nothing half-made).
#[tokio::test]
async fn smb_hostile_requests_for_a_real_share_are_refused() {
    smb_hostile_requests_for_a_real_share_are_refused_with::<SmbV1>().await;
}

async fn smb_hostile_requests_for_a_real_share_are_refused_with<C: Smb>() {
    let mut r = smb_run::<C>("hos").await;
    let local = r.p.kubelet.join("smb-vol").display().to_string();
    let (k, o) = (
        r.p.kubelet.display().to_string(),
        r.p.outside.display().to_string(),
    );
    let hostile_locals = vec![
        format!(r"{o}\v"),
        k.clone(),
        format!(r"{k}\..\outside\v"),
        format!(r"{k}\v:stream"),
        r"C:\Windows\x".to_string(),
    ];
    let before = r.p.snapshot();
    let cases = versions::smb::hostile_mappings(&local, &hostile_locals, PASSWORD);
    let n = versions::smb::refuses_hostile(&mut r.c, &cases, PASSWORD).await;
    assert!(n >= 30, "{n}");
    assert_eq!(r.p.snapshot(), before, "a refused request changed the tree");
    let Some(_win) = require("an SMB share of this host and MSFT_SmbGlobalMapping") else {
        return;
    };
    let _user = LocalUser::create(&r.user, PASSWORD).unwrap();
    let share = Share::create(&r.share, &r.dir).unwrap();
    std::fs::write(share.dir.join("hello.txt"), CONTENTS).unwrap();
    let remote = r.root.clone();
    let qualified = r.qualified.clone();
    for bad in &hostile_locals {
        let m = Mapping::new(&remote, bad, &qualified, PASSWORD);
        let e = r.c.new_smb_global_mapping(&m).await.unwrap_err();
        assert!(
            matches!(e.code(), Code::InvalidArgument | Code::PermissionDenied),
            "{bad}: {e:?}"
        );
    }
    assert_eq!(r.p.snapshot(), before, "a refused request changed the tree");
    let ok = Mapping::new(&remote, &local, &qualified, PASSWORD);
    r.c.new_smb_global_mapping(&ok).await.unwrap();
    assert_eq!(
        std::fs::read(std::path::Path::new(&local).join("hello.txt")).unwrap(),
        CONTENTS
    );
    r.c.remove_smb_global_mapping(&remote).await.unwrap();
    no_secret_logged(&r.p, &[PASSWORD]);
}

/// The portal of this host's iSCSI Target Server.
fn local_portal() -> Portal {
    Portal::new("127.0.0.1", 3260)
}

/// Under wine: the initiator calls answer FailedPrecondition, and the
/// Target Server's provider is absent too. On Windows: `Some(target)`,
/// or `None` after a skip line when the Target Server is not installed.
fn target_or_skip(tag: &str, chap: Option<(&str, &str)>) -> Option<Target> {
    let provider = iscsi_target::available(&WmiWorker::new(iscsi_target::NAMESPACE));
    if under_wine() {
        assert!(provider.is_err(), "wine has an iSCSI Target Server?");
    }
    require("the Microsoft iSCSI initiator and the iSCSI Target Server")?;
    if let Err(why) = provider {
        println!("SKIPPED (needs the iSCSI Target Server feature): {why}");
        eprintln!("SKIPPED (needs the iSCSI Target Server feature): {why}");
        return None;
    }
    iscsi_target::start_initiator().unwrap();
    Some(Target::create(tag, chap).unwrap())
}

/// Every initiator call with valid values: FailedPrecondition under wine.
async fn unavailable_under_wine<C: Iscsi>(c: &mut C, login: &Login, secret: &str) {
    if !under_wine() {
        return;
    }
    let portal = &login.portal;
    assert_unavailable("AddTargetPortal", c.add_target_portal(portal).await, secret);
    assert_unavailable(
        "DiscoverTargetPortal",
        c.discover_target_portal(portal).await.map(|_| ()),
        secret,
    );
    assert_unavailable("ConnectTarget", c.connect_target(login).await, secret);
    assert_unavailable(
        "GetTargetDisks",
        c.get_target_disks(portal, &login.iqn).await.map(|_| ()),
        secret,
    );
    assert_unavailable(
        "DisconnectTarget",
        c.disconnect_target(portal, &login.iqn).await,
        secret,
    );
    assert_unavailable(
        "RemoveTargetPortal",
        c.remove_target_portal(portal).await,
        secret,
    );
}

/// Whether `iqn` is among `found` (IQNs compare case-insensitively).
fn has_iqn(found: &[String], iqn: &str) -> bool {
    found.iter().any(|f| f.eq_ignore_ascii_case(iqn))
}

/// The target's disks after a login: its one virtual disk, a disk number.
async fn one_disk<C: Iscsi>(c: &mut C, portal: &Portal, iqn: &str) -> u32 {
    let disks = c.get_target_disks(portal, iqn).await.unwrap();
    assert_eq!(disks.len(), 1, "{disks:?}");
    disks[0].parse().unwrap()
}

/// No login: portal added and listed, the target discovered, connected
/// (twice: the second is a no-op), its disk listed, disconnected, the
/// portal removed.
#[tokio::test]
async fn iscsi_portal_discovery_login_disks_and_logout() {
    iscsi_portal_discovery_login_disks_and_logout_with::<IscsiV2>().await;
}

async fn iscsi_portal_discovery_login_disks_and_logout_with<C: Iscsi>() {
    let p = Proxy::start_unique("rwiscsi", "iscsi", &["-v=10"]);
    let mut c = C::new(p.channel(Group::Iscsi, "v1alpha2").await);
    let portal = local_portal();
    unavailable_under_wine(
        &mut c,
        &Login::new(&portal, vi::IQN, 0, "", ""),
        "Rw-No-Secret-00",
    )
    .await;
    let Some(t) = target_or_skip("none", None) else {
        return;
    };
    c.add_target_portal(&portal).await.unwrap();
    let listed = c.list_target_portals().await.unwrap();
    assert!(listed
        .iter()
        .any(|l| l.address == portal.address && l.port == portal.port));
    let found = c.discover_target_portal(&portal).await.unwrap();
    assert!(has_iqn(&found, &t.iqn), "{found:?} lacks {}", t.iqn);
    let login = Login::new(&portal, &t.iqn, 0, "", "");
    c.connect_target(&login).await.unwrap();
    c.connect_target(&login).await.unwrap();
    let disk = one_disk(&mut c, &portal, &t.iqn).await;
    assert!(disk > 0, "disk {disk} is the system disk");
    c.disconnect_target(&portal, &t.iqn).await.unwrap();
    let after = c.get_target_disks(&portal, &t.iqn).await;
    assert!(after.as_ref().map_or(true, |d| d.is_empty()), "{after:?}");
    c.disconnect_target(&portal, &t.iqn).await.unwrap();
    c.remove_target_portal(&portal).await.unwrap();
    let listed = c.list_target_portals().await.unwrap();
    assert!(!listed
        .iter()
        .any(|l| l.address == portal.address && l.port == portal.port));
}

/// One-way CHAP: a wrong secret is refused by the target (no session, no
/// disk), the right one logs in; no secret in an answer or the log.
#[tokio::test]
async fn iscsi_one_way_chap_login() {
    iscsi_one_way_chap_login_with::<IscsiV2>().await;
}

async fn iscsi_one_way_chap_login_with<C: Iscsi>() {
    const USER: &str = "csiproxychap";
    const SECRET: &str = "Rw-Chap-Secret-1";
    const WRONG: &str = "Rw-Chap-Wrong-22";
    let p = Proxy::start_unique("rwiscsichap", "iscsi", &["-v=10"]);
    let mut c = C::new(p.channel(Group::Iscsi, "v1alpha2").await);
    let portal = local_portal();
    unavailable_under_wine(
        &mut c,
        &Login::new(&portal, vi::IQN, 1, USER, SECRET),
        SECRET,
    )
    .await;
    let Some(t) = target_or_skip("chap", Some((USER, SECRET))) else {
        no_secret_logged(&p, &[SECRET]);
        return;
    };
    c.add_target_portal(&portal).await.unwrap();
    assert!(has_iqn(
        &c.discover_target_portal(&portal).await.unwrap(),
        &t.iqn
    ));
    let e = c
        .connect_target(&Login::new(&portal, &t.iqn, 1, USER, WRONG))
        .await
        .unwrap_err();
    assert!(!e.message().contains(WRONG), "{e:?}");
    let none = c.get_target_disks(&portal, &t.iqn).await;
    assert!(none.as_ref().map_or(true, |d| d.is_empty()), "{none:?}");
    // Without CHAP: refused too.
    assert!(c
        .connect_target(&Login::new(&portal, &t.iqn, 0, "", ""))
        .await
        .is_err());
    c.connect_target(&Login::new(&portal, &t.iqn, 1, USER, SECRET))
        .await
        .unwrap();
    one_disk(&mut c, &portal, &t.iqn).await;
    c.disconnect_target(&portal, &t.iqn).await.unwrap();
    c.remove_target_portal(&portal).await.unwrap();
    no_secret_logged(&p, &[SECRET, WRONG]);
}

/// SetMutualChapSecret: a secret outside 12..=16 bytes refused everywhere;
/// a valid one set on the initiator (on Windows), FailedPrecondition under
/// wine; never logged.
#[tokio::test]
async fn iscsi_set_mutual_chap_secret() {
    iscsi_set_mutual_chap_secret_with::<IscsiV2>().await;
}

async fn iscsi_set_mutual_chap_secret_with<C: Iscsi>() {
    const MUTUAL: &str = "Rw-Mutual-Sec-1";
    let p = Proxy::start_unique("rwiscsimutual", "iscsi", &["-v=10"]);
    let mut c = C::new(p.channel(Group::Iscsi, "v1alpha2").await);
    for bad in ["short-11chr", "seventeen-chars-1"] {
        let e = c.set_mutual_chap_secret(bad).await.unwrap().unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{bad}: {e:?}");
        assert!(!e.message().contains(bad), "{e:?}");
    }
    let r = c.set_mutual_chap_secret(MUTUAL).await.unwrap();
    if under_wine() {
        assert_unavailable("SetMutualChapSecret", r, MUTUAL);
        no_secret_logged(&p, &[MUTUAL]);
    }
    let Some(_win) = require("the Microsoft iSCSI initiator (MSFT_iSCSISession.SetCHAPSecret)")
    else {
        return;
    };
    iscsi_target::start_initiator().unwrap();
    c.set_mutual_chap_secret(MUTUAL).await.unwrap().unwrap();
    no_secret_logged(&p, &[MUTUAL]);
}

/// Semisynchronous WMI method calls (`ExecMethod` with
/// `WBEM_FLAG_RETURN_IMMEDIATELY`, then `IWbemCallResult`): one that
/// answers returns its out-parameters (`StdRegProv.GetStringValue`, read
/// only); `MSFT_SmbGlobalMapping.Create` of a share at an address nothing
/// answers at (TEST-NET-1) returns no later than its deadline, as
/// DeadlineExceeded unless the SMB client gave up first, and the worker
/// answers the next call at once.
#[test]
fn wmi_method_calls_end_at_their_deadline() {
    use csi_proxy_host::win::wmi::{Value, SMB_NAMESPACE};
    use csi_proxy_host::{deadline, Error};
    use std::time::{Duration, Instant};
    let Some(_win) = require(
        "semisynchronous ExecMethod (wine ignores WBEM_FLAG_RETURN_IMMEDIATELY) and MSFT_SmbGlobalMapping",
    ) else {
        return;
    };
    let reg = WmiWorker::new(r"root\default").named("rw-reg");
    let (code, name) = reg
        .call(|w| {
            let out = w.exec_method_in(
                r"root\default",
                "StdRegProv",
                "StdRegProv",
                "GetStringValue",
                &[
                    ("hDefKey", Value::U32(0x8000_0002)),
                    (
                        "sSubKeyName",
                        Value::Str(r"SOFTWARE\Microsoft\Windows NT\CurrentVersion".into()),
                    ),
                    ("sValueName", Value::Str("ProductName".into())),
                ],
            )?;
            Ok((out.u32("ReturnValue")?, out.string("sValue")?))
        })
        .unwrap();
    assert_eq!(code, Some(0));
    assert!(
        name.as_deref().is_some_and(|n| n.contains("Windows")),
        "{name:?}"
    );

    let smb = WmiWorker::new(SMB_NAMESPACE).named("rw-smb");
    // Connected first, so the deadline is the method's alone.
    smb.call(|w| {
        Ok(w.query_in(
            SMB_NAMESPACE,
            "SELECT RemotePath FROM MSFT_SmbGlobalMapping",
        )?
        .len())
    })
    .unwrap();
    let limit = Duration::from_secs(2);
    let t = Instant::now();
    let r = deadline::run(Some(t + limit), || {
        smb.call(|w| {
            let out = w.exec_method_in(
                SMB_NAMESPACE,
                "MSFT_SmbGlobalMapping",
                "MSFT_SmbGlobalMapping",
                "Create",
                &[
                    (
                        "RemotePath",
                        Value::Str(r"\\192.0.2.1\csi-proxy-unreachable".into()),
                    ),
                    ("RequirePrivacy", Value::Bool(true)),
                ],
            )?;
            out.u32("ReturnValue")
        })
    });
    let took = t.elapsed();
    assert!(
        took < limit + Duration::from_secs(1),
        "answered after {took:?}: {r:?}"
    );
    match &r {
        Err(Error::DeadlineExceeded(_)) => {}
        other => println!("the SMB client answered within the deadline: {other:?}"),
    }
    assert!(
        !matches!(r, Ok(Some(0))),
        "a mapping to TEST-NET-1 was created"
    );
    let t = Instant::now();
    smb.call(|w| {
        Ok(w.query_in(
            SMB_NAMESPACE,
            "SELECT RemotePath FROM MSFT_SmbGlobalMapping",
        )?
        .len())
    })
    .unwrap();
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
}
