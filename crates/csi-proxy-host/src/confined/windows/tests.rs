//! The Windows confined filesystem under wine (and on Windows): what wine
//! can run of it. Wine cannot create symlinks or junctions (its
//! CreateSymbolicLinkW is a stub, FSCTL_SET_REPARSE_POINT fails), so the
//! link cases are proven on Linux and, for Windows, need real Windows
//! (docs/security.md lists them).

use super::super::{Confined, Kind};
use crate::path::{Flavor, PathPolicy};
use std::fs;

fn setup() -> (tempfile::TempDir, Confined, String) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fs::create_dir_all(root.join(r"a\b")).unwrap();
    fs::write(root.join(r"a\file"), b"f").unwrap();
    let root = root.to_str().unwrap().to_string();
    let policy = PathPolicy::new(Flavor::Windows, [root.as_str()]).unwrap();
    (dir, Confined::new(policy), root)
}

#[test]
fn full_dir_information_layout() {
    use super::super::winfmt::*;
    use windows_sys::Win32::Storage::FileSystem::FILE_FULL_DIR_INFO;
    assert_eq!(
        std::mem::offset_of!(FILE_FULL_DIR_INFO, FileAttributes),
        FULL_DIR_ATTRIBUTES
    );
    assert_eq!(
        std::mem::offset_of!(FILE_FULL_DIR_INFO, FileNameLength),
        FULL_DIR_NAME_LENGTH
    );
    assert_eq!(
        std::mem::offset_of!(FILE_FULL_DIR_INFO, EaSize),
        FULL_DIR_EA_SIZE
    );
    assert_eq!(
        std::mem::offset_of!(FILE_FULL_DIR_INFO, FileName),
        FULL_DIR_NAME
    );
}

#[test]
fn kinds_and_existence() {
    let (_d, fs, root) = setup();
    let at = |rel: &str| fs.locate(&format!(r"{root}\{rel}")).unwrap();
    assert!(fs.exists(&at("a")).unwrap());
    assert!(fs.exists(&at(r"a\b")).unwrap());
    assert!(
        fs.exists(&at(r"A\B")).unwrap(),
        "names are case-insensitive"
    );
    assert!(!fs.exists(&at(r"a\missing")).unwrap());
    assert!(!fs.exists(&at(r"missing\x")).unwrap());
    assert!(!fs.exists(&at(r"a\file\below")).unwrap());
    assert_eq!(fs.kind(&at("a")).unwrap(), Some(Kind::Dir));
    assert_eq!(fs.kind(&at(r"a\file")).unwrap(), Some(Kind::File));
    assert_eq!(fs.kind(&at("nothing")).unwrap(), None);
    assert!(fs.exists(&fs.locate(&root).unwrap()).unwrap());
    assert_eq!(fs.link_destination(&at("a")).unwrap(), None);
}

#[test]
fn mkdir_remove_and_trees() {
    let (_d, fs, root) = setup();
    let at = |rel: &str| fs.locate(&format!(r"{root}\{rel}")).unwrap();
    fs.mkdir_all(&at(r"x\y\z")).unwrap();
    fs.mkdir_all(&at(r"x\y\z")).unwrap();
    assert!(std::path::Path::new(&format!(r"{root}\x\y\z")).is_dir());
    assert!(fs.mkdir_all(&at(r"a\file\x")).is_err());
    // A tree with files at several levels.
    let mut p = format!(r"{root}\t");
    for i in 0..40 {
        p.push_str(&format!(r"\d{i}"));
        fs::create_dir_all(&p).unwrap();
        fs::write(format!(r"{p}\f"), b"x").unwrap();
    }
    fs.remove_contents(&at("t")).unwrap();
    assert_eq!(fs::read_dir(format!(r"{root}\t")).unwrap().count(), 0);
    fs::create_dir_all(format!(r"{root}\t\u\v")).unwrap();
    fs.remove_all(&at("t")).unwrap();
    assert!(!std::path::Path::new(&format!(r"{root}\t")).exists());
    fs.remove_all(&at(r"t\gone")).unwrap();
    // Remove: a file, an empty directory; a full one is refused.
    assert!(fs.remove(&at("a")).is_err());
    fs.remove(&at(r"a\file")).unwrap();
    fs.remove(&at(r"a\b")).unwrap();
    fs.remove(&at("a")).unwrap();
    assert!(fs.remove(&at("a")).is_err());
}

#[test]
fn directories_for_mounts() {
    let (_d, fs, root) = setup();
    let at = |rel: &str| fs.locate(&format!(r"{root}\{rel}")).unwrap();
    let d = fs.create_dir(&at(r"a\target")).unwrap();
    assert!(d.is_empty().unwrap());
    assert!(!d.is_mount_point());
    assert!(d.mounted_volume().unwrap().is_none());
    let path = d.final_path().unwrap();
    assert!(
        path.to_ascii_lowercase().ends_with(r"\root\a\target"),
        "{path}"
    );
    assert!(d.volume_path().unwrap().starts_with(r"\\?\Volume{"));
    let b = fs.open_dir(&at("a")).unwrap();
    assert!(!b.is_empty().unwrap());
    assert!(fs.open_dir(&at(r"a\file")).is_err());
    assert!(fs.open_dir(&at(r"a\none")).is_err());
    let (parent, name) = fs.open_parent(&at(r"a\b")).unwrap();
    assert_eq!(name, "b");
    assert!(!parent.is_empty().unwrap());
    let n = fs.open_nearest_dir(&at(r"a\b\c\d")).unwrap();
    assert!(n
        .final_path()
        .unwrap()
        .to_ascii_lowercase()
        .ends_with(r"\a\b"));
}

#[test]
fn symlinks_are_verified() {
    let (_d, fs, root) = setup();
    let at = |rel: &str| fs.locate(&format!(r"{root}\{rel}")).unwrap();
    let src = fs.policy().check(&format!(r"{root}\a")).unwrap();
    match fs.symlink(&src, &at(r"a\link")) {
        // Real Windows: a link that the confined layer sees as one.
        Ok(()) => assert_eq!(fs.kind(&at(r"a\link")).unwrap(), Some(Kind::Link)),
        // Wine's CreateSymbolicLinkW reports success and creates nothing.
        Err(e) => assert!(e.to_string().contains("no link exists"), "{e}"),
    }
}

#[test]
fn sharing_violations_are_busy_not_internal() {
    // STATUS_SHARING_VIOLATION, STATUS_FILE_LOCK_CONFLICT: another process
    // (a client renaming a directory) holds the entry.
    for status in [0xC000_0043_u32 as i32, 0xC000_0054_u32 as i32] {
        let e = super::nt::status_error(status);
        assert_eq!(e.kind(), std::io::ErrorKind::ResourceBusy, "{e}");
        assert!(e.to_string().contains("another process"), "{e}");
    }
    let e = super::nt::status_error(0xC000_0034_u32 as i32);
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{e}");
}
