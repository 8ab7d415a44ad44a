use super::*;
use std::collections::{BTreeMap, HashSet};

/// Generated client sources, to check the gRPC paths the clients use.
const CLIENT_SOURCES: [(&str, &str, &str); 23] = [
    (
        "disk",
        "v1alpha1",
        include_str!(concat!(env!("OUT_DIR"), "/disk/v1alpha1/v1alpha1.rs")),
    ),
    (
        "disk",
        "v1beta1",
        include_str!(concat!(env!("OUT_DIR"), "/disk/v1beta1/v1beta1.rs")),
    ),
    (
        "disk",
        "v1beta2",
        include_str!(concat!(env!("OUT_DIR"), "/disk/v1beta2/v1beta2.rs")),
    ),
    (
        "disk",
        "v1beta3",
        include_str!(concat!(env!("OUT_DIR"), "/disk/v1beta3/v1beta3.rs")),
    ),
    (
        "disk",
        "v1",
        include_str!(concat!(env!("OUT_DIR"), "/disk/v1/v1.rs")),
    ),
    (
        "filesystem",
        "v1alpha1",
        include_str!(concat!(env!("OUT_DIR"), "/filesystem/v1alpha1/v1alpha1.rs")),
    ),
    (
        "filesystem",
        "v1beta1",
        include_str!(concat!(env!("OUT_DIR"), "/filesystem/v1beta1/v1beta1.rs")),
    ),
    (
        "filesystem",
        "v1beta2",
        include_str!(concat!(env!("OUT_DIR"), "/filesystem/v1beta2/v1beta2.rs")),
    ),
    (
        "filesystem",
        "v1",
        include_str!(concat!(env!("OUT_DIR"), "/filesystem/v1/v1.rs")),
    ),
    (
        "filesystem",
        "v2alpha1",
        include_str!(concat!(env!("OUT_DIR"), "/filesystem/v2alpha1/v2alpha1.rs")),
    ),
    (
        "iscsi",
        "v1alpha1",
        include_str!(concat!(env!("OUT_DIR"), "/iscsi/v1alpha1/v1alpha1.rs")),
    ),
    (
        "iscsi",
        "v1alpha2",
        include_str!(concat!(env!("OUT_DIR"), "/iscsi/v1alpha2/v1alpha2.rs")),
    ),
    (
        "smb",
        "v1alpha1",
        include_str!(concat!(env!("OUT_DIR"), "/smb/v1alpha1/v1alpha1.rs")),
    ),
    (
        "smb",
        "v1beta1",
        include_str!(concat!(env!("OUT_DIR"), "/smb/v1beta1/v1beta1.rs")),
    ),
    (
        "smb",
        "v1beta2",
        include_str!(concat!(env!("OUT_DIR"), "/smb/v1beta2/v1beta2.rs")),
    ),
    (
        "smb",
        "v1",
        include_str!(concat!(env!("OUT_DIR"), "/smb/v1/v1.rs")),
    ),
    (
        "system",
        "v1alpha1",
        include_str!(concat!(env!("OUT_DIR"), "/system/v1alpha1/v1alpha1.rs")),
    ),
    (
        "volume",
        "v1alpha1",
        include_str!(concat!(env!("OUT_DIR"), "/volume/v1alpha1/v1alpha1.rs")),
    ),
    (
        "volume",
        "v1beta1",
        include_str!(concat!(env!("OUT_DIR"), "/volume/v1beta1/v1beta1.rs")),
    ),
    (
        "volume",
        "v1beta2",
        include_str!(concat!(env!("OUT_DIR"), "/volume/v1beta2/v1beta2.rs")),
    ),
    (
        "volume",
        "v1beta3",
        include_str!(concat!(env!("OUT_DIR"), "/volume/v1beta3/v1beta3.rs")),
    ),
    (
        "volume",
        "v1",
        include_str!(concat!(env!("OUT_DIR"), "/volume/v1/v1.rs")),
    ),
    (
        "volume",
        "v2alpha1",
        include_str!(concat!(env!("OUT_DIR"), "/volume/v2alpha1/v2alpha1.rs")),
    ),
];

#[test]
fn version_order() {
    let ordered = [
        "v1alpha1",
        "v1alpha2",
        "v1alpha10",
        "v1beta1",
        "v1beta2",
        "v1beta3",
        "v1",
        "v2alpha1",
        "v2beta1",
        "v2",
        "v10alpha1",
        "v10",
    ];
    for (i, a) in ordered.iter().enumerate() {
        for (j, b) in ordered.iter().enumerate() {
            assert_eq!(compare_versions(a, b), i.cmp(&j), "{a} vs {b}");
        }
    }
}

#[test]
fn invalid_versions_sort_first() {
    for bad in [
        "",
        "v",
        "1",
        "x1",
        "v1gamma1",
        "v1alpha",
        "v1beta",
        "v1alpha1x",
        "V1",
        "v1 ",
    ] {
        assert_eq!(compare_versions(bad, "v1alpha1"), Ordering::Less, "{bad:?}");
        assert_eq!(
            compare_versions("v1alpha1", bad),
            Ordering::Greater,
            "{bad:?}"
        );
    }
    assert_eq!(compare_versions("abc", "abd"), Ordering::Less);
    assert_eq!(compare_versions("abc", "abc"), Ordering::Equal);
}

#[test]
fn table_shape() {
    assert_eq!(API_VERSIONS.len(), 23);
    let total: usize = API_VERSIONS.iter().map(|a| a.methods().len()).sum();
    assert_eq!(total, 139);

    let mut per_group = BTreeMap::new();
    for a in API_VERSIONS {
        *per_group.entry(a.group).or_insert(0) += a.methods().len();
    }
    let expected = BTreeMap::from([
        (Group::Disk, 30),
        (Group::Filesystem, 26),
        (Group::Iscsi, 15),
        (Group::Smb, 8),
        (Group::System, 4),
        (Group::Volume, 56),
    ]);
    assert_eq!(per_group, expected);
}

#[test]
fn table_order_and_uniqueness() {
    // Sorted by group, then by version.
    for pair in API_VERSIONS.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        assert!(
            a.group < b.group
                || (a.group == b.group && compare_versions(a.version, b.version).is_lt()),
            "{a} before {b}"
        );
    }
    let pipes: HashSet<String> = API_VERSIONS.iter().map(ApiVersion::pipe_name).collect();
    assert_eq!(pipes.len(), 23);
}

#[test]
fn table_matches_build_script() {
    let built: Vec<(&str, &str)> = generated::COMPILED.iter().map(|c| (c.0, c.1)).collect();
    let listed: Vec<(&str, &str)> = API_VERSIONS
        .iter()
        .map(|a| (a.group.as_str(), a.version))
        .collect();
    assert_eq!(built, listed);
    for a in API_VERSIONS {
        assert!(!a.methods().is_empty(), "{a}");
        assert!(!a.file_descriptor_set().is_empty(), "{a}");
    }
}

#[test]
fn names() {
    let fs = find(Group::Filesystem, "v1").unwrap();
    assert_eq!(fs.service(), "v1.Filesystem");
    assert_eq!(fs.endpoint_name(), "csi-proxy-filesystem-v1");
    assert_eq!(fs.pipe_name(), r"\\.\pipe\csi-proxy-filesystem-v1");
    assert_eq!(fs.grpc_path("PathExists"), "/v1.Filesystem/PathExists");
    assert_eq!(fs.to_string(), "filesystem/v1");
    assert_eq!(
        fs.methods(),
        ["PathExists", "Mkdir", "Rmdir", "CreateSymlink", "IsSymlink"]
    );
    let iscsi = find(Group::Iscsi, "v1alpha2").unwrap();
    assert_eq!(iscsi.service(), "v1alpha2.Iscsi");
    assert_eq!(iscsi.methods().last(), Some(&"SetMutualChapSecret"));
    assert_eq!(find(Group::System, "v1"), None);
    assert_eq!(find(Group::Disk, "V1"), None);

    let unknown = ApiVersion {
        group: Group::Smb,
        version: "v9",
    };
    assert!(unknown.methods().is_empty());
    assert!(unknown.file_descriptor_set().is_empty());
}

#[test]
fn groups() {
    for g in Group::ALL {
        assert_eq!(Group::parse(g.as_str()), Some(g));
        assert_eq!(Group::parse(&g.as_str().to_uppercase()), Some(g));
        assert_eq!(g.service_name().to_lowercase(), g.as_str());
        assert_eq!(g.to_string(), g.as_str());
    }
    assert_eq!(Group::parse("volumes"), None);
    assert_eq!(Group::parse(""), None);
    let mut sorted = Group::ALL;
    sorted.sort();
    assert_eq!(sorted, Group::ALL);
}

#[test]
fn generated_clients_use_the_contract_paths() {
    for (a, (group, version, source)) in API_VERSIONS.iter().zip(CLIENT_SOURCES) {
        assert_eq!((a.group.as_str(), a.version), (group, version));
        // prettyplease may wrap long calls (adding a trailing comma):
        // compare without whitespace and trailing commas.
        let compact: String = source.chars().filter(|c| !c.is_whitespace()).collect();
        let compact = compact.replace(",)", ")");
        for m in a.methods() {
            let path = format!("\"{}\"", a.grpc_path(m));
            assert_eq!(source.matches(&path).count(), 1, "{a}: client path {path}");
            let method = format!("GrpcMethod::new(\"{}\",\"{m}\")", a.service());
            assert!(compact.contains(&method), "{a}: {method}");
        }
        let client = format!("pub struct {}Client<T>", a.group.service_name());
        assert!(source.contains(&client), "{a}: {client}");
        assert!(
            !source.contains("_server"),
            "{a}: server code was generated"
        );
    }
}

#[test]
fn client_types_exist() {
    fn is_client<T>() {}
    type C = tonic::transport::Channel;
    is_client::<disk::v1alpha1::disk_client::DiskClient<C>>();
    is_client::<disk::v1beta1::disk_client::DiskClient<C>>();
    is_client::<disk::v1beta2::disk_client::DiskClient<C>>();
    is_client::<disk::v1beta3::disk_client::DiskClient<C>>();
    is_client::<disk::v1::disk_client::DiskClient<C>>();
    is_client::<filesystem::v1alpha1::filesystem_client::FilesystemClient<C>>();
    is_client::<filesystem::v1beta1::filesystem_client::FilesystemClient<C>>();
    is_client::<filesystem::v1beta2::filesystem_client::FilesystemClient<C>>();
    is_client::<filesystem::v1::filesystem_client::FilesystemClient<C>>();
    is_client::<filesystem::v2alpha1::filesystem_client::FilesystemClient<C>>();
    is_client::<iscsi::v1alpha1::iscsi_client::IscsiClient<C>>();
    is_client::<iscsi::v1alpha2::iscsi_client::IscsiClient<C>>();
    is_client::<smb::v1alpha1::smb_client::SmbClient<C>>();
    is_client::<smb::v1beta1::smb_client::SmbClient<C>>();
    is_client::<smb::v1beta2::smb_client::SmbClient<C>>();
    is_client::<smb::v1::smb_client::SmbClient<C>>();
    is_client::<system::v1alpha1::system_client::SystemClient<C>>();
    is_client::<volume::v1alpha1::volume_client::VolumeClient<C>>();
    is_client::<volume::v1beta1::volume_client::VolumeClient<C>>();
    is_client::<volume::v1beta2::volume_client::VolumeClient<C>>();
    is_client::<volume::v1beta3::volume_client::VolumeClient<C>>();
    is_client::<volume::v1::volume_client::VolumeClient<C>>();
    is_client::<volume::v2alpha1::volume_client::VolumeClient<C>>();
}
