//! The real-Windows tier, removal of read-only entries and of entries that
//! cannot go: RmdirContents, Rmdir with force and Rmdir of one entry
//! remove read-only files and directories (as upstream's `os.RemoveAll`
//! and `os.Remove` do), and an entry held open by another process is named
//! in the error. Windows 10 1809 and later delete with
//! `FILE_DISPOSITION_FLAG_IGNORE_READONLY_ATTRIBUTE`; wine refuses that
//! disposition, so under wine the same test proves the fallback (the
//! attribute cleared on the handle, then the classic disposition). Nothing
//! here needs a link, so nothing is skipped under wine.
#![cfg(windows)]

mod pipes;

use csi_proxy_api::filesystem::v2alpha1 as fs;
use csi_proxy_client::{Group, ProxyChannel};
use pipes::Proxy;
use std::path::Path;
use tonic::Code;

type Fs = fs::filesystem_client::FilesystemClient<ProxyChannel>;

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn read_only(path: &Path) {
    let mut perm = std::fs::metadata(path).unwrap().permissions();
    perm.set_readonly(true);
    std::fs::set_permissions(path, perm).unwrap();
}

/// Read-only files at three levels and a read-only directory.
fn plant_read_only(t: &Path) {
    std::fs::create_dir_all(t.join(r"d\e")).unwrap();
    for f in ["top", r"d\mid", r"d\e\low"] {
        std::fs::write(t.join(f), b"x").unwrap();
        read_only(&t.join(f));
    }
    read_only(&t.join(r"d\e"));
}

#[tokio::test]
async fn read_only_entries_are_removed() {
    let p = Proxy::start_unique("rw-readonly", "filesystem", &[]);
    let mut f = Fs::new(p.channel(Group::Filesystem, "v2alpha1").await);
    let t = p.kubelet.join("t");
    plant_read_only(&t);
    f.rmdir_contents(fs::RmdirContentsRequest { path: s(&t) })
        .await
        .expect("RmdirContents of a tree of read-only entries");
    assert_eq!(std::fs::read_dir(&t).unwrap().count(), 0);

    plant_read_only(&t);
    read_only(&t);
    f.rmdir(fs::RmdirRequest {
        path: s(&t),
        force: true,
    })
    .await
    .expect("Rmdir with force of a read-only tree");
    assert!(!t.exists());

    let one = p.kubelet.join("one");
    std::fs::write(&one, b"x").unwrap();
    read_only(&one);
    f.rmdir(fs::RmdirRequest {
        path: s(&one),
        force: false,
    })
    .await
    .expect("Rmdir of one read-only file");
    assert!(!one.exists());
    assert_eq!(
        std::fs::read(p.outside.join("sentinel")).unwrap(),
        b"keep".to_vec()
    );
}

#[tokio::test]
async fn an_entry_that_cannot_be_removed_is_named() {
    use std::os::windows::fs::OpenOptionsExt;
    let p = Proxy::start_unique("rw-held", "filesystem", &[]);
    let mut f = Fs::new(p.channel(Group::Filesystem, "v2alpha1").await);
    let t = p.kubelet.join("t");
    std::fs::create_dir_all(t.join("sub")).unwrap();
    std::fs::write(t.join(r"sub\held"), b"x").unwrap();
    std::fs::write(t.join("other"), b"x").unwrap();
    // Held without delete sharing, as another process would hold it.
    let held = std::fs::OpenOptions::new()
        .read(true)
        .share_mode(0)
        .open(t.join(r"sub\held"))
        .unwrap();
    for force in [None, Some(true)] {
        let r = match force {
            None => f
                .rmdir_contents(fs::RmdirContentsRequest { path: s(&t) })
                .await
                .map(|_| ()),
            Some(force) => f
                .rmdir(fs::RmdirRequest { path: s(&t), force })
                .await
                .map(|_| ()),
        };
        let e = r.expect_err("a held entry stays");
        assert_eq!(e.code(), Code::FailedPrecondition, "{}", e.message());
        assert!(
            e.message().contains(r"t\sub\held"),
            "the message names the entry: {}",
            e.message()
        );
        assert!(t.join(r"sub\held").exists());
    }
    drop(held);
    f.rmdir_contents(fs::RmdirContentsRequest { path: s(&t) })
        .await
        .expect("RmdirContents once nobody holds it");
    assert_eq!(std::fs::read_dir(&t).unwrap().count(), 0);
}
