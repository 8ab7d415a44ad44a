//! Links the system does not show as links, and read-only entries, under
//! wine (where both happen): a host (Unix) symlink inside wine's drive is a
//! plain file or directory to every Windows API, and opening it opens what
//! it leads to. Only the final-path proof tells it apart, so every
//! operation must prove the last component (and every entry of a tree it
//! removes) as it proves the parents; a canary outside the root must
//! survive each of them. On real Windows the host has no such links (the
//! real links are reparse points: `real_windows_confinement`), and these
//! tests report themselves skipped.

use super::super::Confined;
use crate::filesystem::{
    Filesystem, FilesystemApi, IsSymlinkRequest, MkdirRequest, PathExistsRequest, PathValidRequest,
    RmdirContentsRequest, RmdirRequest,
};
use crate::path::{Flavor, PathPolicy};
use crate::Error;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Wine's view of `/bin/ln` (drive Z: is the host's `/`).
const HOST_LN: &str = r"Z:\bin\ln";

/// Makes the host symlink `dir\name` storing `target` (relative, Unix
/// separators) with the host's `ln -s`; wine starts a Unix program but
/// gives no handle to wait on, so the link is polled for. `false` (after
/// printing why) where there is no host to do it: real Windows.
fn host_symlink(dir: &Path, name: &str, target: &str) -> bool {
    if !Path::new(HOST_LN).exists() {
        println!("SKIPPED (needs wine: host symlinks): no {HOST_LN}");
        return false;
    }
    // Wine reports "invalid handle" for a Unix child it started: ignored,
    // the link itself is what counts.
    let _ = std::process::Command::new(HOST_LN)
        .args(["-s", target, name])
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    let start = Instant::now();
    while fs::symlink_metadata(dir.join(name)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{HOST_LN} made no link {name} in {}",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// `tmp\root` (the allowed root, with `a\`), `tmp\outside` with a canary
/// file and a directory holding a file.
struct Env {
    // Dropped first: the root's handle is closed before the directory goes.
    fs: Confined,
    root: PathBuf,
    outside: PathBuf,
    _tmp: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        let outside = tmp.path().join("outside");
        fs::create_dir_all(root.join("a")).unwrap();
        fs::create_dir_all(outside.join("sub")).unwrap();
        fs::write(outside.join("canary"), b"keep").unwrap();
        fs::write(outside.join(r"sub\f"), b"keep").unwrap();
        let policy = PathPolicy::new(Flavor::Windows, [root.to_str().unwrap()]).unwrap();
        Env {
            _tmp: tmp,
            root,
            outside,
            fs: Confined::new(policy),
        }
    }

    fn path(&self, rel: &str) -> String {
        format!(r"{}\{rel}", self.root.display())
    }

    fn at(&self, rel: &str) -> super::super::Located {
        self.fs.locate(&self.path(rel)).unwrap()
    }

    fn api(&self) -> Filesystem<Confined> {
        let policy = self.fs.policy().clone();
        Filesystem::new(policy.clone(), Confined::new(policy))
    }

    /// Nothing outside changed.
    fn canary_kept(&self, after: &str) {
        for f in ["canary", r"sub\f"] {
            assert_eq!(
                fs::read(self.outside.join(f)).ok().as_deref(),
                Some(&b"keep"[..]),
                "{f} outside the root, after {after}"
            );
        }
        assert!(
            !self.outside.join("new").exists(),
            "created outside, after {after}"
        );
    }
}

fn refused<T: std::fmt::Debug>(what: &str, r: Result<T, Error>) {
    match r {
        Err(Error::PermissionDenied(m)) => assert!(
            !m.contains("outside"),
            "{what}: the message names where the link leads: {m}"
        ),
        other => panic!("{what}: want PermissionDenied, got {other:?}"),
    }
}

/// Refused, or (a directory operation on a link to a file: opening it as a
/// directory fails before there is a handle to prove) "not a directory";
/// either way nothing was touched.
fn refused_or_not_a_dir<T: std::fmt::Debug>(what: &str, file_link: bool, r: Result<T, Error>) {
    match r {
        Err(Error::FailedPrecondition(m)) | Err(Error::AlreadyExists(m))
            if file_link && m.contains("not a directory") => {}
        other => refused(what, other),
    }
}

#[test]
fn a_host_symlink_at_the_last_component_is_never_acted_through() {
    let e = Env::new();
    let a = e.root.join("a");
    if !host_symlink(&a, "dlink", "../../outside")
        || !host_symlink(&a, "flink", "../../outside/canary")
    {
        return;
    }
    // Wine shows them as what they lead to: the proof is all there is.
    assert!(a.join("dlink").is_dir() && a.join("flink").is_file());
    let fs = &e.fs;
    for link in [r"a\dlink", r"a\flink"] {
        let p = e.at(link);
        refused(&format!("exists {link}"), fs.exists(&p));
        refused(&format!("kind {link}"), fs.kind(&p));
        refused(&format!("link_destination {link}"), fs.link_destination(&p));
        let file = link.ends_with("flink");
        refused_or_not_a_dir(&format!("open_dir {link}"), file, fs.open_dir(&p));
        refused_or_not_a_dir(&format!("create_dir {link}"), file, fs.create_dir(&p));
        refused_or_not_a_dir(&format!("mkdir_all {link}"), file, fs.mkdir_all(&p));
        refused(&format!("remove {link}"), fs.remove(&p));
        refused(&format!("remove_all {link}"), fs.remove_all(&p));
        refused_or_not_a_dir(
            &format!("remove_contents {link}"),
            file,
            fs.remove_contents(&p),
        );
        e.canary_kept(link);
    }
    // Below it: the parent proof (and the slow mkdir path, which creates
    // the missing components one by one).
    for rel in [r"a\dlink\new", r"a\dlink\new\deeper"] {
        let p = e.at(rel);
        refused(&format!("mkdir_all {rel}"), fs.mkdir_all(&p));
        refused(&format!("open_parent {rel}"), fs.open_parent(&p));
        refused(&format!("open_nearest_dir {rel}"), fs.open_nearest_dir(&p));
        refused(&format!("create_dir {rel}"), fs.create_dir(&p));
        e.canary_kept(rel);
    }
    // The same through the Filesystem API, as the pipe and the DLL call it.
    let api = e.api();
    for link in [r"a\dlink", r"a\flink"] {
        let path = e.path(link);
        refused(
            "PathExists",
            api.path_exists(PathExistsRequest { path: path.clone() }),
        );
        refused(
            "PathValid",
            api.path_valid(PathValidRequest { path: path.clone() }),
        );
        refused(
            "IsSymlink",
            api.is_symlink(IsSymlinkRequest { path: path.clone() }),
        );
        let file = link.ends_with("flink");
        refused_or_not_a_dir(
            "Mkdir",
            file,
            api.mkdir(MkdirRequest { path: path.clone() }),
        );
        refused_or_not_a_dir(
            "RmdirContents",
            file,
            api.rmdir_contents(RmdirContentsRequest { path: path.clone() }),
        );
        for force in [false, true] {
            refused(
                &format!("Rmdir force={force}"),
                api.rmdir(RmdirRequest {
                    path: path.clone(),
                    force,
                }),
            );
        }
        e.canary_kept(link);
    }
    // The links themselves are still there, untouched.
    assert!(fs::symlink_metadata(a.join("dlink")).is_ok());
    assert!(fs::symlink_metadata(a.join("flink")).is_ok());
}

#[test]
fn a_host_symlink_inside_a_tree_stops_its_removal_and_is_named() {
    let e = Env::new();
    let deep = e.root.join(r"t\x\y");
    fs::create_dir_all(&deep).unwrap();
    fs::write(e.root.join(r"t\plain"), b"x").unwrap();
    if !host_symlink(&deep, "dlink", "../../../../outside") {
        return;
    }
    let t = e.at("t");
    for (what, r) in [
        ("remove_contents", e.fs.remove_contents(&t)),
        ("remove_all", e.fs.remove_all(&t)),
    ] {
        let err = r.expect_err(what).to_string();
        assert!(err.contains(r"t\x\y\dlink"), "{what}: {err}");
        e.canary_kept(what);
    }
    let flinks = e.root.join(r"u\v");
    fs::create_dir_all(&flinks).unwrap();
    assert!(host_symlink(&flinks, "flink", "../../../outside/canary"));
    let err = e.fs.remove_contents(&e.at("u")).unwrap_err().to_string();
    assert!(err.contains(r"u\v\flink"), "{err}");
    e.canary_kept("remove_contents of a tree with a file link");
}

/// Makes `path` read-only (the attribute; wine keeps it as the mode).
fn read_only(path: &Path) {
    let mut perm = fs::metadata(path).unwrap().permissions();
    perm.set_readonly(true);
    fs::set_permissions(path, perm).unwrap();
}

#[test]
fn read_only_entries_are_removed() {
    let e = Env::new();
    let t = e.root.join("t");
    fs::create_dir_all(t.join(r"d\e")).unwrap();
    for f in [r"top", r"d\mid", r"d\e\low"] {
        fs::write(t.join(f), b"x").unwrap();
        read_only(&t.join(f));
    }
    read_only(&t.join(r"d\e"));
    e.fs.remove_contents(&e.at("t")).unwrap();
    assert_eq!(fs::read_dir(&t).unwrap().count(), 0);

    fs::create_dir_all(t.join("d")).unwrap();
    fs::write(t.join(r"d\f"), b"x").unwrap();
    read_only(&t.join(r"d\f"));
    read_only(&t.join("d"));
    e.fs.remove_all(&e.at("t")).unwrap();
    assert!(!t.exists());

    // One entry: a read-only file (Rmdir without force, as upstream's
    // os.Remove does).
    fs::write(e.root.join("ro"), b"x").unwrap();
    read_only(&e.root.join("ro"));
    e.fs.remove(&e.at("ro")).unwrap();
    assert!(!e.root.join("ro").exists());
}

#[test]
fn an_entry_that_cannot_be_removed_is_named() {
    use std::os::windows::fs::OpenOptionsExt;
    let e = Env::new();
    let sub = e.root.join(r"t\sub");
    fs::create_dir_all(&sub).unwrap();
    fs::write(sub.join("held"), b"x").unwrap();
    fs::write(e.root.join(r"t\other"), b"x").unwrap();
    // Held open without delete sharing: nobody can delete it meanwhile.
    let held = fs::OpenOptions::new()
        .read(true)
        .share_mode(0)
        .open(sub.join("held"))
        .unwrap();
    let err = e.fs.remove_contents(&e.at("t")).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains(r"t\sub\held"), "{msg}");
    assert!(
        !matches!(err, Error::Internal(_)),
        "a held entry is the host's state, not a fault: {err:?}"
    );
    drop(held);
    e.fs.remove_contents(&e.at("t")).unwrap();
    assert_eq!(fs::read_dir(e.root.join("t")).unwrap().count(), 0);

    // Held with delete sharing: the delete is accepted, but where it takes
    // effect only when the last handle closes (wine, the classic
    // disposition) the name stays listed; named, not listed again forever.
    fs::create_dir_all(&sub).unwrap();
    fs::write(sub.join("shared"), b"x").unwrap();
    let shared = fs::OpenOptions::new()
        .read(true)
        .share_mode(7)
        .open(sub.join("shared"))
        .unwrap();
    let start = std::time::Instant::now();
    match e.fs.remove_contents(&e.at("t")) {
        // POSIX semantics: the name went at once.
        Ok(()) => {}
        Err(err) => assert!(err.to_string().contains(r"t\sub\shared"), "{err}"),
    }
    assert!(start.elapsed() < Duration::from_secs(30));
    drop(shared);
    e.fs.remove_contents(&e.at("t")).unwrap();
    assert_eq!(fs::read_dir(e.root.join("t")).unwrap().count(), 0);
}
