//! The SMB API, every version (v1alpha1, v1beta1, v1beta2, v1), over the
//! real `csi-proxy.exe`'s named pipes (Windows build; CI runs it under
//! wine); one test body run against each version through `versions::smb::Smb`.
//!
//! Hostile inputs must be refused with nothing changed, everywhere. Wine
//! has no SMB WMI provider (`root\Microsoft\Windows\SMB`): there valid
//! requests must fail with the clear FailedPrecondition, leaving no link.
//! Real Windows has the provider: valid requests are not sent there (a
//! real mapping is `real_windows_smb_iscsi`'s). The password never shows
//! up in an answer or the log.
#![cfg(windows)]

mod pipes;
mod real_windows;
mod versions;

use csi_proxy_api::Group;
use pipes::Proxy;
use versions::smb::{Mapping, Smb};

const PASSWORD: &str = "Wine-Smb-Secret-9";

/// Local paths outside the kubelet dir or otherwise unusable.
fn hostile_locals(p: &Proxy) -> Vec<String> {
    let k = p.kubelet.display().to_string();
    let o = p.outside.display().to_string();
    vec![
        format!(r"{o}\v"),
        k.clone(),
        r"C:\Windows\x".to_string(),
        format!(r"{k}\..\outside\v"),
        r"relative\x".to_string(),
        format!(r"{k}\v:stream"),
    ]
}

async fn hostile_refused_and_valid_fail_clearly_without_the_smb_provider<C: Smb>() {
    let v = C::VERSION;
    let p = Proxy::start_unique(&format!("smb-{v}"), "smb", &["-v=10"]);
    let mut c = C::new(p.channel(Group::Smb, v).await);
    let local = p.kubelet.join("smb-vol").display().to_string();

    // Hostile: refused, the tree unchanged.
    let before = p.snapshot();
    let cases = versions::smb::hostile_mappings(&local, &hostile_locals(&p), PASSWORD);
    let n = versions::smb::refuses_hostile(&mut c, &cases, PASSWORD).await;
    assert!(n >= 30, "{n}");
    assert_eq!(
        p.snapshot(),
        before,
        "{v}: a refused request changed the tree"
    );

    // Valid, only where the provider is missing (wine): the clear
    // FailedPrecondition, no link.
    if !real_windows::under_wine() {
        assert!(
            !p.log_text().contains(PASSWORD),
            "{v}: the password is in the log"
        );
        return;
    }
    let remote = r"\\127.0.0.1\share\pvc";
    let m = Mapping::new(remote, &local, r"DOM\user", PASSWORD);
    for (rpc, r) in [
        ("NewSmbGlobalMapping", c.new_smb_global_mapping(&m).await),
        (
            "RemoveSmbGlobalMapping",
            c.remove_smb_global_mapping(remote).await,
        ),
    ] {
        pipes::assert_unavailable(&format!("{v} {rpc}"), r, PASSWORD);
    }
    assert!(
        std::fs::symlink_metadata(&local).is_err(),
        "{v}: a link at {local}"
    );
    assert_eq!(
        p.snapshot(),
        before,
        "{v}: a failed mapping changed the tree"
    );

    let log = p.log_text();
    assert!(log.contains("NewSmbGlobalMapping"), "{v}: nothing logged");
    assert!(!log.contains(PASSWORD), "{v}: the password is in the log");
}

/// A mapping without a user name would sign in as the computer account:
/// refused by default, naming the share and the flag, with nothing
/// touched; with `-smb-allow-no-credentials` it gets past that rule (under
/// wine it then fails for want of the SMB provider). Real Windows: the
/// default refusal only (a mapping there is `real_windows_smb_iscsi`'s).
async fn a_mapping_without_a_user_is_refused_unless_allowed<C: Smb>() {
    let v = C::VERSION;
    let remote = r"\\Attacker.Example\Share\pvc";
    let runs: &[bool] = if real_windows::under_wine() {
        &[false, true]
    } else {
        &[false]
    };
    for &allow in runs {
        let args: &[&str] = if allow {
            &["-smb-allow-no-credentials"]
        } else {
            &[]
        };
        let p = Proxy::start_unique(&format!("smb-anon-{v}-{allow}"), "smb", args);
        let mut c = C::new(p.channel(Group::Smb, v).await);
        let local = p.kubelet.join("smb-anon").display().to_string();
        let before = p.snapshot();
        let m = Mapping::new(remote, &local, "", "");
        let e = c.new_smb_global_mapping(&m).await.unwrap_err();
        let refused = e.code() == tonic::Code::PermissionDenied
            && e.message().contains("-smb-allow-no-credentials");
        if allow {
            assert!(!refused, "{v}: refused with the flag: {e:?}");
            pipes::assert_unavailable(&format!("{v} allowed"), Err(e), PASSWORD);
        } else {
            assert!(refused, "{v}: {e:?}");
            let msg = e.message();
            assert!(msg.contains(r"\\attacker.example\Share"), "{v}: {msg}");
            assert!(msg.contains("computer account"), "{v}: {msg}");
        }
        assert_eq!(p.snapshot(), before, "{v} allow={allow}: the tree changed");
        assert!(std::fs::symlink_metadata(&local).is_err(), "{v}: a link");
    }
}

versions::every_version!(smb:
    hostile_refused_and_valid_fail_clearly_without_the_smb_provider,
    a_mapping_without_a_user_is_refused_unless_allowed,
);
