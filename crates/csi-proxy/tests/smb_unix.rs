//! The SMB API, every version (v1alpha1, v1beta1, v1beta2, v1), over the
//! real binary's Unix sockets; one test body per scenario, run against
//! each version through `versions::smb::Smb`. This machine's kernel has no CIFS
//! client, so a valid mapping must fail with the clear FailedPrecondition
//! and leave nothing behind (no link, no mount directory); hostile inputs
//! are refused before anything is touched; the password never shows up in
//! an answer or the log, at the highest verbosity.
#![cfg(target_os = "linux")]

mod common;
mod versions;

use common::Proxy;
use tonic::Code;
use versions::smb::{Mapping, Smb};

const PASSWORD: &str = "Smb-Pa55word-Secret";

fn kernel_has_cifs() -> bool {
    std::fs::read_to_string("/proc/filesystems")
        .unwrap_or_default()
        .lines()
        .any(|l| l.trim_end().ends_with("cifs"))
}

async fn client<C: Smb>(p: &Proxy) -> C {
    C::new(p.channel(&format!("smb-{}", C::VERSION)).await)
}

/// Local paths outside the kubelet dir or otherwise unusable.
fn hostile_locals(p: &Proxy) -> Vec<String> {
    let k = p.kubelet.display().to_string();
    let o = p.outside.display().to_string();
    vec![
        format!("{o}/x"),
        "/etc/cron.d/x".to_string(),
        k.clone(),
        format!("{k}/../outside/x"),
        format!("{k}/escape/x"),
        format!("{k}/a\0b"),
        "relative/x".to_string(),
    ]
}

/// Every hostile request refused; the tree, `/run/csi-proxy-smb` and the
/// log unchanged by them.
async fn hostile_requests_are_refused_and_change_nothing<C: Smb>() {
    let p = Proxy::start(&["-v=10"]);
    std::os::unix::fs::symlink(&p.outside, p.kubelet.join("escape")).unwrap();
    let before = p.snapshot();
    let local = format!("{}/vol", p.kubelet.display());
    let cases = versions::smb::hostile_mappings(&local, &hostile_locals(&p), PASSWORD);
    let mut c: C = client(&p).await;
    let n = versions::smb::refuses_hostile(&mut c, &cases, PASSWORD).await;
    assert!(n >= 30, "{n}");
    let v = C::VERSION;
    assert_eq!(
        p.snapshot(),
        before,
        "{v}: a refused request changed the tree"
    );
    assert!(!std::path::Path::new("/run/csi-proxy-smb/server").exists());
    assert!(!p.log().contains(PASSWORD), "{v}");
}

/// A valid mapping fails with FailedPrecondition naming CIFS and leaves no
/// link; removing what is not mapped succeeds.
async fn a_valid_mapping_fails_cleanly_without_cifs<C: Smb>() {
    if kernel_has_cifs() {
        eprintln!("this kernel has CIFS: the no-CIFS answers are not checked here");
        return;
    }
    let v = C::VERSION;
    let p = Proxy::start(&["-v=10"]);
    let remote = r"\\127.0.0.1\csi-proxy-test-share\pvc-1";
    let mut c: C = client(&p).await;
    let local = p.kubelet.join(format!("vol-{v}"));
    let m = Mapping::new(
        remote,
        &local.display().to_string(),
        r"DOMAIN\user",
        PASSWORD,
    );
    let e = c.new_smb_global_mapping(&m).await.unwrap_err();
    // PermissionDenied where the test runs without CAP_SYS_ADMIN.
    assert!(
        matches!(e.code(), Code::FailedPrecondition | Code::PermissionDenied),
        "{v}: {e:?}"
    );
    let msg = e.message();
    assert!(msg.contains("CIFS") || msg.contains("cifs"), "{v}: {msg}");
    assert!(!msg.contains(PASSWORD), "{v}: {msg}");
    assert!(
        std::fs::symlink_metadata(&local).is_err(),
        "{v}: a link was left at {local:?}"
    );
    // Nothing mapped: removing is success (idempotent).
    c.remove_smb_global_mapping(remote).await.unwrap();
    assert!(!std::path::Path::new("/run/csi-proxy-smb/127.0.0.1").exists());
    let log = p.log();
    assert!(!log.is_empty());
    assert!(!log.contains(PASSWORD), "{v}: the password is in the log");
}

/// A mapping without a user name (a guest mount of any host the plugin
/// names) is refused by default, naming the share and the flag, before
/// anything is touched; with `-smb-allow-no-credentials` it gets past that
/// rule (and, without CIFS in this kernel, fails at the mount instead).
async fn a_mapping_without_a_user_is_refused_unless_allowed<C: Smb>() {
    let v = C::VERSION;
    let remote = r"\\Attacker.Example\Share\pvc";
    for allow in [false, true] {
        let args: &[&str] = if allow {
            &["-smb-allow-no-credentials"]
        } else {
            &[]
        };
        let p = Proxy::start(args);
        let mut c: C = client(&p).await;
        let local = p.kubelet.join(format!("vol-{v}"));
        let before = p.snapshot();
        let m = Mapping::new(remote, &local.display().to_string(), "", "");
        let e = c.new_smb_global_mapping(&m).await.unwrap_err();
        let refused =
            e.code() == Code::PermissionDenied && e.message().contains("-smb-allow-no-credentials");
        if allow {
            assert!(!refused, "{v}: refused with the flag: {e:?}");
            assert_ne!(e.code(), Code::InvalidArgument, "{v}: {e:?}");
        } else {
            assert!(refused, "{v}: {e:?}");
            assert!(
                e.message().contains(r"\\attacker.example\Share"),
                "{v}: {}",
                e.message()
            );
        }
        assert_eq!(p.snapshot(), before, "{v} allow={allow}: the tree changed");
        assert!(std::fs::symlink_metadata(&local).is_err(), "{v}: a link");
    }
}

/// Red team 42smb F1: a user name with no visible character is no user:
/// refused as an argument on every version, even with
/// `-smb-allow-no-credentials`, before anything is touched.
async fn invisible_user_names_are_refused<C: Smb>() {
    let v = C::VERSION;
    for args in [&[][..], &["-smb-allow-no-credentials"][..]] {
        let p = Proxy::start(args);
        let mut c: C = client(&p).await;
        let local = p.kubelet.join(format!("vol-{v}"));
        let before = p.snapshot();
        for user in [
            "\u{200B}",
            "\u{2800}",
            "DOM\\\u{2060}",
            "\u{3164}",
            "\u{200B}@dom",
        ] {
            let m = Mapping::new(
                r"\\192.0.2.7\share\pvc",
                &local.display().to_string(),
                user,
                "",
            );
            let e = c.new_smb_global_mapping(&m).await.unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument, "{v} {user:?}: {e:?}");
            assert!(e.message().contains("invisible"), "{v}: {}", e.message());
        }
        assert_eq!(p.snapshot(), before, "{v}: the tree changed");
        assert!(std::fs::symlink_metadata(&local).is_err(), "{v}: a link");
    }
}

versions::every_version!(smb:
    hostile_requests_are_refused_and_change_nothing,
    invisible_user_names_are_refused,
    a_valid_mapping_fails_cleanly_without_cifs,
    a_mapping_without_a_user_is_refused_unless_allowed,
);
