//! The real-Windows tier, confinement: a hostile plugin plants real
//! directory symlinks, junctions and volume mount points in the kubelet
//! directory and names paths through them. Every such call is refused with
//! the documented code, no message shows where a link leads, and the tree
//! behind the link (outside the roots, or on another volume) is the same
//! afterwards. The same calls through a plain directory succeed (the
//! control: the refusal is the link's doing, not the call's); that part,
//! and the proof that wine cannot make links, runs under wine.
#![cfg(windows)]

mod pipes;
mod real_windows;

use csi_proxy_api::filesystem::v2alpha1 as fs;
use csi_proxy_client::{Group, ProxyChannel};
use pipes::{assert_code, tree, Proxy};
use real_windows::calls::{same_volume, Calls};
use real_windows::links;
use real_windows::require;
use real_windows::vhd::{Vhd, MIB};
use std::path::{Path, PathBuf};
use tonic::{Code, Status};

type Fs = fs::filesystem_client::FilesystemClient<ProxyChannel>;

fn s(p: &Path) -> String {
    p.display().to_string()
}

async fn start(tag: &str) -> (Proxy, Fs, Calls) {
    let p = Proxy::start_unique(tag, "filesystem,disk,volume", &[]);
    let f = Fs::new(p.channel(Group::Filesystem, "v2alpha1").await);
    let c = Calls::new(
        p.channel(Group::Disk, "v1").await,
        p.channel(Group::Volume, "v2alpha1").await,
    );
    (p, f, c)
}

/// What a hostile call finds behind the link: a file, an empty directory,
/// and directories with contents.
fn plant(dir: &Path) {
    std::fs::create_dir_all(dir.join("empty")).unwrap();
    std::fs::write(dir.join("precious"), b"precious").unwrap();
    for d in ["sub1", r"sub2\deep", r"sub3\x", "sub4"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
        std::fs::write(dir.join(d).join("f"), d.as_bytes()).unwrap();
    }
}

/// The Filesystem calls below `base` (each on its own planted entry), as
/// `(call, answer)`.
async fn calls_below(f: &mut Fs, base: &Path) -> Vec<(String, Result<String, Status>)> {
    let at = |rel: &str| s(&base.join(rel));
    let mut out = Vec::new();
    for rel in ["precious", "missing"] {
        let r = f.path_exists(fs::PathExistsRequest { path: at(rel) }).await;
        out.push((
            format!("PathExists {rel}"),
            r.map(|r| r.into_inner().exists.to_string()),
        ));
    }
    let r = f
        .is_symlink(fs::IsSymlinkRequest {
            path: at("precious"),
        })
        .await;
    out.push((
        "IsSymlink precious".into(),
        r.map(|r| r.into_inner().is_symlink.to_string()),
    ));
    for rel in ["new", r"sub1\new"] {
        let r = f.mkdir(fs::MkdirRequest { path: at(rel) }).await;
        out.push((format!("Mkdir {rel}"), r.map(|_| "ok".into())));
    }
    for (rel, force) in [("empty", false), ("sub2", true)] {
        let r = f
            .rmdir(fs::RmdirRequest {
                path: at(rel),
                force,
            })
            .await;
        out.push((format!("Rmdir {rel} {force}"), r.map(|_| "ok".into())));
    }
    let r = f
        .rmdir_contents(fs::RmdirContentsRequest { path: at("sub3") })
        .await;
    out.push(("RmdirContents sub3".into(), r.map(|_| "ok".into())));
    out
}

/// The control: through a plain directory every call works.
async fn plain_directory_control(p: &Proxy, f: &mut Fs) {
    let plain = p.kubelet.join("plain");
    plant(&plain);
    let answers = calls_below(f, &plain).await;
    let got: Vec<(String, String)> = answers
        .into_iter()
        .map(|(c, r)| {
            (
                c,
                r.unwrap_or_else(|e| format!("{:?} {}", e.code(), e.message())),
            )
        })
        .collect();
    let want: Vec<(String, String)> = [
        ("PathExists precious", "true"),
        ("PathExists missing", "false"),
        ("IsSymlink precious", "false"),
        ("Mkdir new", "ok"),
        (r"Mkdir sub1\new", "ok"),
        ("Rmdir empty false", "ok"),
        ("Rmdir sub2 true", "ok"),
        ("RmdirContents sub3", "ok"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(got, want);
    assert!(plain.join(r"sub1\new").is_dir() && !plain.join("sub2").exists());
    assert_eq!(std::fs::read_dir(plain.join("sub3")).unwrap().count(), 0);
}

/// Every call through `base` (whose chain holds a link) is refused with
/// PermissionDenied, without naming `hidden` (where the link leads).
async fn refused_below(f: &mut Fs, p: &Proxy, base: &Path, hidden: &str) {
    for (call, r) in calls_below(f, base).await {
        let e = r.expect_err(&call);
        assert_eq!(e.code(), Code::PermissionDenied, "{call}: {}", e.message());
        assert!(
            !e.message().to_lowercase().contains(&hidden.to_lowercase()),
            "{call}: {}",
            e.message()
        );
    }
    // A link made below it, or from a source below it: refused too.
    let src = p.kubelet.join("src");
    std::fs::create_dir_all(&src).unwrap();
    assert_code(
        f.create_symlink(fs::CreateSymlinkRequest {
            source_path: s(&src),
            target_path: s(&base.join("newlink")),
        })
        .await,
        Code::PermissionDenied,
        "CreateSymlink at a path through a link",
    );
    assert_code(
        f.create_symlink(fs::CreateSymlinkRequest {
            source_path: s(&base.join("sub4")),
            target_path: s(&p.kubelet.join("lnk")),
        })
        .await,
        Code::PermissionDenied,
        "CreateSymlink from a source through a link",
    );
    assert!(!p.kubelet.join("lnk").exists());
}

/// Wine before 10.20 makes no links; real Windows must.
fn links_or_skip(p: &Proxy, what: &str) -> Option<real_windows::RealWindows> {
    let status = links::status(&p.root);
    // Reparse points (CreateSymbolicLinkW) came with wine 10.20.
    if real_windows::wine_before(10, 20) {
        let why = status.clone().expect_err("wine makes no links");
        assert!(why.contains("symlink") && why.contains("junction"), "{why}");
    }
    let w = require(what)?;
    status.unwrap();
    Some(w)
}

async fn link_in_the_chain(tag: &str, junction: bool) {
    let (p, mut f, _c) = start(tag).await;
    plain_directory_control(&p, &mut f).await;
    let kind = if junction { "junction" } else { "symlink" };
    let Some(_w) = links_or_skip(&p, &format!("a directory {kind} in the kubelet dir")) else {
        return;
    };
    let victim = p.outside.join("victim");
    plant(&victim);
    let link = p.kubelet.join("evil");
    if junction {
        links::junction(&link, &victim).unwrap();
    } else {
        links::symlink_dir(&link, &victim).unwrap();
    }
    let before = tree(&p.outside);
    refused_below(&mut f, &p, &link, &s(&p.outside)).await;
    assert_eq!(tree(&p.outside), before, "the outside tree changed");
}

#[tokio::test]
async fn a_symlink_in_the_chain_is_refused() {
    link_in_the_chain("rw-conf-symlink", false).await;
}

#[tokio::test]
async fn a_junction_in_the_chain_is_refused() {
    link_in_the_chain("rw-conf-junction", true).await;
}

#[tokio::test]
async fn a_volume_mount_point_in_the_chain_is_refused() {
    let (p, mut f, mut c) = start("rw-conf-mountpoint").await;
    plain_directory_control(&p, &mut f).await;
    let Some(_w) = require("a volume mount point (VHDX) in the kubelet dir") else {
        return;
    };
    let v = Vhd::create(&p.root, "chain", 128 * MIB).unwrap();
    let vol = c.formatted_volume(v.disk()).await;
    let victim = PathBuf::from(format!("{vol}victim"));
    plant(&victim);
    // Mounted by the host (not by the plugin through the proxy).
    let mnt = p.kubelet.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    links::mount_volume(&mnt, &vol).unwrap();
    let before = tree(&victim);
    refused_below(&mut f, &p, &mnt.join("victim"), &vol).await;
    assert_eq!(tree(&victim), before, "the volume changed");
    // The mount point itself is a directory the plugin may name: not
    // removed, whether forced or not.
    for force in [false, true] {
        assert_code(
            f.rmdir(fs::RmdirRequest {
                path: s(&mnt),
                force,
            })
            .await,
            Code::FailedPrecondition,
            "Rmdir of a mount point",
        );
    }
    assert!(links::volume_at(&mnt).is_ok_and(|m| same_volume(&m, &vol)));
    assert_eq!(tree(&victim), before);
    links::unmount_volume(&mnt).unwrap();
}

#[tokio::test]
async fn final_links_to_the_outside_are_never_followed() {
    let (p, mut f, _c) = start("rw-conf-final").await;
    // A missing path is NotFound for IsSymlink and absent for PathExists.
    let nothing = s(&p.kubelet.join("nothing"));
    assert_code(
        f.is_symlink(fs::IsSymlinkRequest {
            path: nothing.clone(),
        })
        .await,
        Code::NotFound,
        "IsSymlink of nothing",
    );
    assert!(
        !f.path_exists(fs::PathExistsRequest { path: nothing })
            .await
            .unwrap()
            .into_inner()
            .exists
    );
    let Some(_w) = links_or_skip(&p, "symlinks and junctions to the outside") else {
        return;
    };
    let victim = p.outside.join("victim");
    plant(&victim);
    let missing = p.outside.join("no-such");
    let mut answers = Vec::new();
    for (name, target, junction) in [
        ("sym-existing", &victim, false),
        ("sym-missing", &missing, false),
        ("junc-existing", &victim, true),
        ("junc-missing", &missing, true),
    ] {
        let link = p.kubelet.join(name);
        if junction {
            links::junction(&link, target).unwrap();
        } else {
            links::symlink_dir(&link, target).unwrap();
        }
        let before = tree(&p.outside);
        let l = s(&link);
        assert!(
            f.path_exists(fs::PathExistsRequest { path: l.clone() })
                .await
                .unwrap()
                .into_inner()
                .exists
        );
        assert!(
            f.is_symlink(fs::IsSymlinkRequest { path: l.clone() })
                .await
                .unwrap()
                .into_inner()
                .is_symlink
        );
        let mkdir = f.mkdir(fs::MkdirRequest { path: l.clone() }).await;
        let contents = f
            .rmdir_contents(fs::RmdirContentsRequest { path: l.clone() })
            .await;
        let below = f
            .path_exists(fs::PathExistsRequest {
                path: s(&link.join("precious")),
            })
            .await;
        let shown = |r: Result<_, Status>| match r {
            Ok(_) => "ok".to_string(),
            Err(e) => format!("{:?} {}", e.code(), e.message().replace(name, "L")),
        };
        let row = (
            shown(mkdir.map(drop)),
            shown(contents.map(drop)),
            shown(below.map(drop)),
        );
        assert!(row.0.starts_with("AlreadyExists"), "{name}: {row:?}");
        assert!(row.1.starts_with("PermissionDenied"), "{name}: {row:?}");
        assert!(row.2.starts_with("PermissionDenied"), "{name}: {row:?}");
        for m in [&row.0, &row.1, &row.2] {
            assert!(
                !m.to_lowercase().contains(&s(&p.outside).to_lowercase()),
                "{m}"
            );
        }
        answers.push(row);
        assert_eq!(tree(&p.outside), before, "{name}");
        // Removing the link removes the link, never what it points to.
        f.rmdir(fs::RmdirRequest {
            path: l.clone(),
            force: true,
        })
        .await
        .unwrap();
        assert!(std::fs::symlink_metadata(&link).is_err(), "{name} removed");
        assert_eq!(tree(&p.outside), before, "{name}");
    }
    // No existence oracle: a link to something and to nothing answer alike.
    assert_eq!(answers[0], answers[1]);
    assert_eq!(answers[2], answers[3]);
}

#[tokio::test]
async fn a_mount_point_inside_a_tree_stops_its_removal() {
    let (p, mut f, mut c) = start("rw-conf-tree").await;
    plain_directory_control(&p, &mut f).await;
    let Some(_w) = require("a volume mount point (VHDX) inside a tree") else {
        return;
    };
    let v = Vhd::create(&p.root, "tree", 128 * MIB).unwrap();
    let vol = c.formatted_volume(v.disk()).await;
    let top = p.kubelet.join("pods").join("uid");
    let mnt = top.join(r"volumes\pv\mount");
    c.mount(&vol, &s(&mnt)).await.unwrap();
    std::fs::write(mnt.join("data"), b"pod data").unwrap();
    std::fs::write(top.join("beside"), b"b").unwrap();
    for (what, r) in [
        (
            "Rmdir force",
            f.rmdir(fs::RmdirRequest {
                path: s(&top),
                force: true,
            })
            .await
            .map(drop),
        ),
        (
            "RmdirContents",
            f.rmdir_contents(fs::RmdirContentsRequest { path: s(&top) })
                .await
                .map(drop),
        ),
    ] {
        assert_code(r, Code::FailedPrecondition, what);
        assert_eq!(
            std::fs::read(mnt.join("data")).unwrap(),
            b"pod data",
            "{what}"
        );
        assert!(
            links::volume_at(&mnt).is_ok_and(|m| same_volume(&m, &vol)),
            "{what}"
        );
    }
    // Named explicitly, the mounted volume may be emptied.
    f.rmdir_contents(fs::RmdirContentsRequest { path: s(&mnt) })
        .await
        .unwrap();
    assert!(std::fs::read(format!("{vol}data")).is_err());
    assert!(links::volume_at(&mnt).is_ok_and(|m| same_volume(&m, &vol)));
    c.unmount(&vol, &s(&mnt)).await.unwrap();
}

#[tokio::test]
async fn volume_calls_through_links_are_refused() {
    let (p, mut f, mut c) = start("rw-conf-volume").await;
    plain_directory_control(&p, &mut f).await;
    let Some(_w) = links_or_skip(&p, "a junction in the chain of a mount target") else {
        return;
    };
    let v = Vhd::create(&p.root, "through", 128 * MIB).unwrap();
    let vol = c.formatted_volume(v.disk()).await;
    let victim = p.outside.join("victim");
    std::fs::create_dir_all(victim.join("m")).unwrap();
    let link = p.kubelet.join("evil");
    links::junction(&link, &victim).unwrap();
    let before = tree(&p.outside);
    let t = s(&link.join("m"));
    assert_code(
        c.mount(&vol, &t).await,
        Code::PermissionDenied,
        "MountVolume",
    );
    assert!(
        links::volume_paths(&vol).unwrap().is_empty(),
        "mounted nowhere"
    );
    // The host mounts it outside; the plugin tries to unmount it there.
    links::mount_volume(&victim.join("m"), &vol).unwrap();
    let unmount = c.unmount(&vol, &t).await;
    let at = c.volume_at(&t).await;
    let closest = c.closest_volume(&s(&link.join(r"m\x"))).await;
    let still = links::volume_at(&victim.join("m"));
    links::unmount_volume(&victim.join("m")).unwrap();
    assert_code(unmount, Code::PermissionDenied, "UnmountVolume");
    assert_code(at, Code::PermissionDenied, "GetVolumeIDFromTargetPath");
    assert_code(
        closest,
        Code::PermissionDenied,
        "GetClosestVolumeIDFromTargetPath",
    );
    assert!(
        still.is_ok_and(|m| same_volume(&m, &vol)),
        "the host's mount stayed"
    );
    assert_eq!(tree(&p.outside), before);
}

#[tokio::test]
async fn links_inside_the_roots_keep_their_meaning() {
    let (p, mut f, mut c) = start("rw-conf-inside").await;
    let staging = p.kubelet.join(r"plugins\x\globalmount");
    std::fs::create_dir_all(&staging).unwrap();
    let publish = p.kubelet.join(r"pods\uid\volumes\pv\mount");
    std::fs::create_dir_all(publish.parent().unwrap()).unwrap();
    let r = f
        .create_symlink(fs::CreateSymlinkRequest {
            source_path: s(&staging),
            target_path: s(&publish),
        })
        .await
        .map(drop);
    if real_windows::wine_before(10, 20) {
        // Wine's CreateSymbolicLinkW creates nothing before 10.20: the
        // proxy says so and leaves nothing behind.
        assert_code(r.clone(), Code::Internal, "CreateSymlink under wine");
        assert!(std::fs::symlink_metadata(&publish).is_err());
    }
    let Some(_w) = require("a published link to a staging mount point") else {
        return;
    };
    r.unwrap();
    // Stored as given (read back without the `\\?\` form of the NT name).
    let stored = std::fs::read_link(&publish).unwrap();
    let stored = stored.to_string_lossy();
    assert!(
        stored
            .trim_start_matches(r"\\?\")
            .eq_ignore_ascii_case(&s(&staging)),
        "{stored}"
    );
    assert!(
        f.is_symlink(fs::IsSymlinkRequest { path: s(&publish) })
            .await
            .unwrap()
            .into_inner()
            .is_symlink
    );
    // Mkdir of a link to a directory inside the roots: fine, as upstream.
    f.mkdir(fs::MkdirRequest { path: s(&publish) })
        .await
        .unwrap();
    let v = Vhd::create(&p.root, "inside", 128 * MIB).unwrap();
    let vol = c.formatted_volume(v.disk()).await;
    c.mount(&vol, &s(&staging)).await.unwrap();
    // The published link is followed one hop, to the staging mount point.
    assert!(same_volume(&c.volume_at(&s(&publish)).await.unwrap(), &vol));
    assert!(same_volume(&c.volume_at(&s(&staging)).await.unwrap(), &vol));
    c.unmount(&vol, &s(&staging)).await.unwrap();
    f.rmdir(fs::RmdirRequest {
        path: s(&publish),
        force: false,
    })
    .await
    .unwrap();
    assert!(staging.is_dir(), "the link went, its target stayed");
}
