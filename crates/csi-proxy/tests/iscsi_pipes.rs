//! The iSCSI API, every version (v1alpha1, v1alpha2), over the real
//! `csi-proxy.exe`'s named pipes (Windows build; CI runs it under wine);
//! one test body run against each version through `versions::iscsi::Iscsi`.
//!
//! Every hostile portal, name and CHAP field must be refused by every call
//! that takes it with nothing changed, everywhere. Wine has no iSCSI
//! initiator WMI classes (`MSFT_iSCSI*`): there every call with valid
//! values must fail with the clear FailedPrecondition. Real Windows has
//! them: valid calls are not sent there (they would add a real portal;
//! real portals, logins and disks are `real_windows_smb_iscsi`'s). No CHAP
//! secret in an answer or the log.
#![cfg(windows)]

mod pipes;
mod real_windows;
mod versions;

use csi_proxy_api::Group;
use pipes::Proxy;
use tonic::Status;
use versions::iscsi::{Iscsi, Login, Portal, IQN};

/// 16 bytes: the Windows maximum.
const CHAP: &str = "Wine-Chap-Secret";

async fn hostile_refused_and_valid_fail_clearly_without_the_iscsi_provider<C: Iscsi>() {
    let v = C::VERSION;
    let p = Proxy::start_unique(&format!("iscsi-{v}"), "iscsi", &["-v=10"]);
    let mut c = C::new(p.channel(Group::Iscsi, v).await);
    let portal = Portal::new("127.0.0.1", 3260);

    let before = p.snapshot();
    let n = versions::iscsi::refuses_hostile(&mut c, &portal, CHAP).await;
    assert!(n >= 30, "{n}");

    // Valid values, only where the classes are missing (wine): every call
    // reaches WMI and fails clearly.
    if !real_windows::under_wine() {
        assert_eq!(p.snapshot(), before, "{v}: the tree changed");
        assert!(
            !p.log_text().contains(CHAP),
            "{v}: a CHAP secret is in the log"
        );
        return;
    }
    let login = Login::new(&portal, IQN, 1, "chapuser", CHAP);
    let mut answers: Vec<(&str, Result<(), Status>)> = vec![
        ("AddTargetPortal", c.add_target_portal(&portal).await),
        (
            "DiscoverTargetPortal",
            c.discover_target_portal(&portal).await.map(|_| ()),
        ),
        ("RemoveTargetPortal", c.remove_target_portal(&portal).await),
        (
            "ListTargetPortals",
            c.list_target_portals().await.map(|_| ()),
        ),
        ("ConnectTarget", c.connect_target(&login).await),
        ("DisconnectTarget", c.disconnect_target(&portal, IQN).await),
        (
            "GetTargetDisks",
            c.get_target_disks(&portal, IQN).await.map(|_| ()),
        ),
    ];
    if let Some(r) = c.set_mutual_chap_secret("Wine-Mutual-1234").await {
        answers.push(("SetMutualChapSecret", r));
    }
    for (rpc, r) in answers {
        pipes::assert_unavailable(&format!("{v} {rpc}"), r, CHAP);
    }
    assert_eq!(p.snapshot(), before, "{v}: the tree changed");

    let log = p.log_text();
    assert!(log.contains("ConnectTarget"), "{v}: nothing logged");
    assert!(
        !log.contains(CHAP) && !log.contains("Wine-Mutual-1234"),
        "{v}: a CHAP secret is in the log"
    );
}

versions::every_version!(iscsi:
    hostile_refused_and_valid_fail_clearly_without_the_iscsi_provider,
);
