//! Names compared as NTFS compares them, through the real binary over its
//! pipes: a path spelled in another case than it is stored, beyond ASCII
//! (É/é, Greek, Cyrillic), is the same path for every proof of the
//! confined filesystem (`same_final_path`, now `CompareStringOrdinal`);
//! before, only ASCII case was ignored and such a path was refused as
//! "could not be proven". Wine finds names case-insensitively too and has
//! `CompareStringOrdinal`, so that part runs under wine. What only NTFS
//! can show (names its upcase table keeps apart) needs real Windows; the
//! portable stand-in against the system's table, every BMP unit, is
//! `csi-proxy-host`'s `path::case::os_tests` (wine, and natively in the
//! tier).
#![cfg(windows)]

mod pipes;
mod real_windows;

use csi_proxy_api::filesystem::v1::{
    filesystem_client::FilesystemClient, MkdirRequest, PathExistsRequest, RmdirRequest,
};
use csi_proxy_api::Group;
use csi_proxy_client::ProxyChannel;
use pipes::Proxy;
use std::path::Path;

fn s(p: &Path) -> String {
    p.display().to_string()
}

async fn exists(c: &mut FilesystemClient<ProxyChannel>, p: &Path) -> Result<bool, tonic::Status> {
    Ok(c.path_exists(PathExistsRequest { path: s(p) })
        .await?
        .into_inner()
        .exists)
}

#[tokio::test]
async fn a_non_ascii_name_in_another_case_is_the_same_path() {
    let p = Proxy::start_unique("case", "filesystem", &[]);
    let mut c = FilesystemClient::new(p.channel(Group::Filesystem, "v1").await);
    let stored = p.kubelet.join(r"pods\élan\журнал\σοφία");
    std::fs::create_dir_all(&stored).unwrap();
    let asked = p.kubelet.join(r"PODS\ÉLAN\ЖУРНАЛ\ΣΟΦΊΑ");
    assert!(exists(&mut c, &asked).await.unwrap(), "{asked:?}");
    assert!(exists(&mut c, &asked.join("vol")).await.is_ok_and(|e| !e));

    // Made and removed through the other spelling, inside the stored one.
    c.mkdir(MkdirRequest {
        path: s(&asked.join("vol")),
    })
    .await
    .unwrap();
    assert!(stored.join("vol").is_dir());
    c.rmdir(RmdirRequest {
        path: s(&asked.join("VOL")),
        force: false,
    })
    .await
    .unwrap();
    assert!(!stored.join("vol").exists());
    assert!(stored.is_dir());

    let Some(_win) = real_windows::require("NTFS's upcase table") else {
        return;
    };
    // Names NTFS keeps apart stay apart: no match, no error.
    for (made, other) in [
        ("straße", "STRASSE"),
        ("ıd", "ID"),
        ("ix", "İX"),
        ("λόγος", "ΛΌΓΟΣ"),
    ] {
        std::fs::create_dir_all(p.kubelet.join(made)).unwrap();
        assert!(
            !exists(&mut c, &p.kubelet.join(other)).await.unwrap(),
            "{made} / {other}"
        );
    }
}
