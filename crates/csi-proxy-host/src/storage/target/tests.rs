//! The typed "nothing mounted here" answers and their phrases, over the
//! recording fake (its `volume_at` uses the same [`absent`] proof as the
//! real backends) on a real directory tree.

use super::*;
use crate::compat;
use crate::disk::DiskApi;
use crate::path::{Flavor, PathPolicy};
use crate::storage::fake::FakeStorage;
use crate::storage::Storage;
use crate::volume::*;
use std::os::unix::fs::symlink;

fn storage() -> (tempfile::TempDir, String, Storage<FakeStorage>) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("kubelet");
    std::fs::create_dir(&root).unwrap();
    let r = root.to_str().unwrap().to_string();
    let policy = PathPolicy::new(Flavor::NATIVE, [r.as_str()]).unwrap();
    let fake = FakeStorage::new();
    fake.add_disk(7, 1 << 30, "60022480abcdef0123456789abcdef01");
    (dir, r, Storage::new(policy, fake))
}

/// A volume of the fake's disk, mounted at `<root>/<name>`.
fn mounted(s: &Storage<FakeStorage>, r: &str, name: &str) -> String {
    s.partition_disk(crate::disk::PartitionDiskRequest { disk_number: 7 })
        .unwrap();
    let vol = s
        .list_volumes_on_disk(ListVolumesOnDiskRequest {
            disk_number: 7,
            partition_number: 0,
        })
        .unwrap()
        .volume_ids
        .remove(0);
    s.mount_volume(MountVolumeRequest {
        volume_id: vol.clone(),
        target_path: format!("{r}/{name}"),
    })
    .unwrap();
    vol
}

fn lookup(s: &Storage<FakeStorage>, p: &str) -> Result<String> {
    s.get_volume_id_from_target_path(GetVolumeIdFromTargetPathRequest {
        target_path: p.to_string(),
    })
    .map(|r| r.volume_id)
}

/// The catalog's expressions that match `m`.
fn matching(m: &str) -> Vec<&'static str> {
    compat::catalog()
        .into_iter()
        .filter(|(d, _)| regex::Regex::new(d.expression).unwrap().is_match(m))
        .map(|(d, _)| d.driver)
        .collect()
}

/// The condition a phrase carries, read back from the message: what a
/// driver would conclude.
fn phrase_condition(e: &Error) -> Option<compat::Condition> {
    let m = e.to_string();
    compat::PHRASES
        .iter()
        .find(|p| {
            let head = p.text.split("{path}").next().unwrap();
            m.contains(head)
        })
        .map(|p| p.condition)
}

#[test]
fn each_reason_maps_to_its_condition() {
    use compat::Condition::*;
    assert_eq!(NotMounted::Missing.condition(), TargetMissing);
    assert_eq!(NotMounted::MissingParent.condition(), TargetMissing);
    assert_eq!(NotMounted::PlainDirectory.condition(), NotAMountPoint);
    assert_eq!(NotMounted::File.condition(), NotAMountPoint);
}

/// The proven conditions, as the fake backend reports them through the
/// one shared proof.
#[test]
fn the_backend_proves_each_reason() {
    use crate::storage::StorageBackend;
    let (_d, r, s) = storage();
    std::fs::create_dir(format!("{r}/plain")).unwrap();
    std::fs::write(format!("{r}/file"), b"x").unwrap();
    symlink(format!("{r}/plain"), format!("{r}/link")).unwrap();
    let fs = &s.fs;
    let at = |p: &str| {
        s.backend()
            .volume_at(fs, &fs.locate(&format!("{r}/{p}")).unwrap())
    };
    assert_eq!(
        at("plain").unwrap(),
        At::NotMounted(NotMounted::PlainDirectory)
    );
    assert_eq!(at("file").unwrap(), At::NotMounted(NotMounted::File));
    assert_eq!(at("missing").unwrap(), At::NotMounted(NotMounted::Missing));
    assert_eq!(
        at("missing/x").unwrap(),
        At::NotMounted(NotMounted::MissingParent)
    );
    assert_eq!(
        at("file/x").unwrap(),
        At::NotMounted(NotMounted::MissingParent)
    );
    // A link is never a reason (the Storage layer follows it first).
    assert!(matches!(at("link"), Err(Error::FailedPrecondition(_))));
    // The shared proof gives back the error for what it cannot prove.
    let err = || Error::FailedPrecondition("x".into());
    for p in ["plain", "link"] {
        let l = fs.locate(&format!("{r}/{p}")).unwrap();
        assert!(
            matches!(absent(fs, &l, err()), Err(Error::FailedPrecondition(_))),
            "{p}"
        );
    }
}

/// Upstream's getTarget follows links until it reaches the volume: a chain
/// of two (and up to MAX_LINK_HOPS) links to a mounted volume answers its id,
/// never "not mounted" (red team 43, finding 1).
#[test]
fn links_are_followed_to_the_volume() {
    let (_d, r, s) = storage();
    let vol = mounted(&s, &r, "staging");
    let mut prev = format!("{r}/staging");
    for hop in 1..=MAX_LINK_HOPS {
        let link = format!("{r}/l{hop}");
        symlink(&prev, &link).unwrap();
        assert_eq!(lookup(&s, &link).unwrap(), vol, "{hop} hops");
        let closest = s
            .get_closest_volume_id_from_target_path(GetClosestVolumeIdFromTargetPathRequest {
                target_path: link.clone(),
            })
            .unwrap();
        assert_eq!(closest.volume_id, vol, "{hop} hops");
        prev = link;
    }
    // One more is refused, without a phrase.
    let link = format!("{r}/l{}", MAX_LINK_HOPS + 1);
    symlink(&prev, &link).unwrap();
    let e = lookup(&s, &link).unwrap_err();
    assert!(matches!(e, Error::FailedPrecondition(_)), "{e}");
    assert_eq!(matching(&e.to_string()), Vec::<&str>::new(), "{e}");
    // A cycle ends the same way.
    symlink(format!("{r}/c2"), format!("{r}/c1")).unwrap();
    symlink(format!("{r}/c1"), format!("{r}/c2")).unwrap();
    let e = lookup(&s, &format!("{r}/c1")).unwrap_err();
    assert!(matches!(e, Error::FailedPrecondition(_)), "{e}");
}

/// A link to a plain directory or to nothing answers as upstream does for
/// what the chain ends on (its getTarget ends there with the same text),
/// naming the path it reached.
#[test]
fn a_chain_ending_on_nothing_mounted_answers_for_its_end() {
    let (_d, r, s) = storage();
    std::fs::create_dir(format!("{r}/plain")).unwrap();
    symlink(format!("{r}/plain"), format!("{r}/b")).unwrap();
    symlink(format!("{r}/b"), format!("{r}/a")).unwrap();
    symlink(format!("{r}/gone"), format!("{r}/dangling")).unwrap();
    let e = lookup(&s, &format!("{r}/a")).unwrap_err();
    assert_eq!(
        phrase_condition(&e),
        Some(compat::Condition::NotAMountPoint),
        "{e}"
    );
    assert!(e.to_string().contains("through 2 links"), "{e}");
    let e = lookup(&s, &format!("{r}/dangling")).unwrap_err();
    assert_eq!(
        phrase_condition(&e),
        Some(compat::Condition::TargetMissing),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains(&format!("Cannot find path '{r}/gone' because")),
        "{e}"
    );
}

/// A link leading outside the roots, at any hop, is PermissionDenied
/// without a phrase.
#[test]
fn a_chain_leaving_the_roots_is_refused_without_a_phrase() {
    let (d, r, s) = storage();
    let outside = d.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    symlink(&outside, format!("{r}/b")).unwrap();
    symlink(format!("{r}/b"), format!("{r}/a")).unwrap();
    for p in ["a", "b"] {
        let e = lookup(&s, &format!("{r}/{p}")).unwrap_err();
        assert!(matches!(e, Error::PermissionDenied(_)), "{e}");
        assert_eq!(phrase_condition(&e), None, "{e}");
        assert_eq!(matching(&e.to_string()), Vec::<&str>::new(), "{e}");
    }
}

/// The path in a phrase is escaped as our own part is: format, separator
/// and invisible characters as `\u{..}`, spaces too (no whitespace), cut
/// like `shown` (red team 43, finding 3).
#[test]
fn the_phrase_shows_the_path_escaped_and_capped() {
    let (_d, r, s) = storage();
    let name = "x\u{202e}txt.exe\u{2028}INFO fake log line\u{200b}";
    let e = lookup(&s, &format!("{r}/{name}")).unwrap_err();
    let m = e.to_string();
    assert_eq!(
        phrase_condition(&e),
        Some(compat::Condition::TargetMissing),
        "{m}"
    );
    for c in ['\u{202e}', '\u{2028}', '\u{200b}'] {
        assert!(!m.contains(c), "{m:?}");
    }
    let phrase = m.split("said: ").nth(1).unwrap();
    assert!(
        phrase.contains(r"x\u{202e}txt.exe\u{2028}INFO\u{20}fake\u{20}log\u{20}line\u{200b}'"),
        "{phrase}"
    );
    for (driver, _) in compat::catalog() {
        let re = regex::Regex::new(driver.expression).unwrap();
        assert!(re.is_match(&m), "{m}");
    }

    let long = format!("{r}/{}/{}", "a".repeat(250), "b".repeat(250));
    let m = lookup(&s, &long).unwrap_err().to_string();
    assert!(!m.contains(&long), "{m}");
    let phrase = m.split("said: ").nth(1).unwrap();
    let shown = phrase
        .split('\'')
        .nth(1)
        .unwrap_or_else(|| panic!("{phrase}"));
    assert_eq!(shown.len(), compat::PHRASE_PATH_BYTES + 3, "{shown}");
    assert!(shown.ends_with("..."), "{shown}");
    assert!(
        m.len() <= compat::MAX_MESSAGE_BYTES,
        "{} bytes: {m}",
        m.len()
    );
}

/// Hostile path texts: every error of the call that is not a proven
/// condition matches no catalog expression, whatever the path holds (red
/// team 43, finding 4); a proven condition still matches.
#[test]
fn injected_catalog_text_never_makes_a_failure_read_as_not_mounted() {
    let (d, r, s) = storage();
    let vol = mounted(&s, &r, "staging");
    let outside = d.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    let payloads = [
        "because it does not exist",
        "(Get-Item -Path x).Target, output: , error: <nil>",
        "Get-Item -Path $Env:mountpath).Target, output: , error: <nil>",
        "x\"because it does not exist\"",
        "because\u{a0}it does not exist",
    ];
    let mut failures = 0;
    for payload in payloads {
        // Not proven: outside the roots; through a link in the chain; a
        // link leading outside; a chain too long; an invalid path.
        let dir = format!("{r}/{}", payload.replace('/', "_"));
        std::fs::create_dir_all(&dir).unwrap();
        symlink(&outside, format!("{dir}/out")).unwrap();
        let mut prev = format!("{r}/staging");
        for hop in 0..=MAX_LINK_HOPS {
            let l = format!("{dir}/h{hop}");
            symlink(&prev, &l).unwrap();
            prev = l;
        }
        std::fs::create_dir(format!("{dir}/real")).unwrap();
        symlink(format!("{dir}/real"), format!("{dir}/chain")).unwrap();
        let cases = [
            outside.join(payload).display().to_string(),
            format!("{dir}/chain/x"),
            format!("{dir}/out"),
            prev.clone(),
            format!("{dir}/../x"),
            format!("{dir}/a\0b"),
        ];
        for p in cases {
            let e = lookup(&s, &p).unwrap_err();
            assert_eq!(phrase_condition(&e), None, "{p}: {e}");
            assert_eq!(matching(&e.to_string()), Vec::<&str>::new(), "{p}: {e:?}");
            failures += 1;
        }
        // Proven: still the phrase, once, from the table only.
        for p in [dir.clone(), format!("{dir}/missing")] {
            let e = lookup(&s, &p).unwrap_err();
            assert!(phrase_condition(&e).is_some(), "{p}: {e}");
        }
        // And the volume through the chain's first hop.
        assert_eq!(lookup(&s, &format!("{dir}/h0")).unwrap(), vol);
    }
    assert_eq!(failures, payloads.len() * 6);
}

/// GetDiskNumberFromVolumeID: aws-ebs runs the same expression on its
/// errors; a hostile volume id cannot make them match.
#[test]
fn volume_id_errors_never_match_either() {
    let (_d, _r, s) = storage();
    for id in [
        "because it does not exist",
        r"\\?\Volume{x} (Get-Item -Path x).Target, output: , error: <nil>",
    ] {
        let e = s
            .get_disk_number_from_volume_id(GetDiskNumberFromVolumeIdRequest {
                volume_id: id.to_string(),
            })
            .unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        assert_eq!(matching(&e.to_string()), Vec::<&str>::new(), "{e}");
    }
}
