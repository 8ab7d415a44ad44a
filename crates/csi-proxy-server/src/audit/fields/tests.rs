use super::*;
use csi_proxy_api::{find, Group, API_VERSIONS};
use serde_json::Value;

fn decode(api: ApiVersion, method: &str, bytes: &[u8]) -> (Value, Secrets) {
    let mut out = String::new();
    let secrets = Schemas::default().request(&mut out, api, method, Some(bytes));
    (
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{out}: {e}")),
        secrets,
    )
}

#[test]
fn fields_by_proto_name_with_defaults() {
    let fs = find(Group::Filesystem, "v1").unwrap();
    let req = csi_proxy_api::filesystem::v1::RmdirRequest {
        path: "/var/lib/kubelet/x".into(),
        force: true,
    };
    let (v, s) = decode(fs, "Rmdir", &req.encode_to_vec());
    assert_eq!(
        v,
        serde_json::json!({"path": "/var/lib/kubelet/x", "force": true})
    );
    assert!(s.is_empty());
    // Disk 0 is not on the wire but is in the record.
    let disk = find(Group::Disk, "v1").unwrap();
    let req = csi_proxy_api::disk::v1::SetDiskStateRequest {
        disk_number: 0,
        is_online: false,
    };
    let (v, _) = decode(disk, "SetDiskState", &req.encode_to_vec());
    assert_eq!(v["disk_number"], 0);
    assert_eq!(v["is_online"], false);
}

#[test]
fn secrets_are_redacted_and_reported() {
    let smb = find(Group::Smb, "v1").unwrap();
    let req = csi_proxy_api::smb::v1::NewSmbGlobalMappingRequest {
        remote_path: r"\\srv\share".into(),
        local_path: String::new(),
        username: "DOMAIN\\user".into(),
        password: "hunter2-secret".into(),
    };
    let (v, s) = decode(smb, "NewSmbGlobalMapping", &req.encode_to_vec());
    assert_eq!(v["password"], REDACTED);
    assert_eq!(v["username"], "DOMAIN\\user");
    assert_eq!(s, ["hunter2-secret"]);
    let iscsi = find(Group::Iscsi, "v1alpha2").unwrap();
    let req = csi_proxy_api::iscsi::v1alpha2::ConnectTargetRequest {
        target_portal: Some(csi_proxy_api::iscsi::v1alpha2::TargetPortal {
            target_address: "10.0.0.1".into(),
            target_port: 3260,
        }),
        iqn: "iqn.2001-04.com.example:disk".into(),
        auth_type: 2,
        chap_username: "u".into(),
        chap_secret: "chap-secret-1234".into(),
    };
    let (v, s) = decode(iscsi, "ConnectTarget", &req.encode_to_vec());
    assert_eq!(v["target_portal"]["target_address"], "10.0.0.1");
    assert_eq!(v["target_portal"]["target_port"], 3260);
    assert_eq!(v["auth_type"], "MUTUAL_CHAP");
    assert_eq!(v["chap_secret"], REDACTED);
    assert_eq!(s, ["chap-secret-1234"]);
    let req = csi_proxy_api::iscsi::v1alpha2::SetMutualChapSecretRequest {
        mutual_chap_secret: "s3cret".into(),
    };
    let (v, _) = decode(iscsi, "SetMutualChapSecret", &req.encode_to_vec());
    assert_eq!(v["MutualChapSecret"], REDACTED);
}

#[test]
fn every_method_decodes_its_empty_request() {
    let mut n = 0;
    for api in API_VERSIONS {
        for m in api.methods() {
            let (v, _) = decode(api, m, &[]);
            assert!(v.is_object(), "{api} {m}: {v}");
            n += 1;
        }
    }
    assert_eq!(n, 139);
}

#[test]
fn garbage_is_null_and_long_strings_are_cut() {
    let fs = find(Group::Filesystem, "v1").unwrap();
    let (v, _) = decode(fs, "Mkdir", &[0x0a, 0x7f, 1]);
    assert_eq!(v, Value::Null);
    let (v, _) = decode(fs, "NoSuchMethod", &[]);
    assert_eq!(v, Value::Null);
    let long = "a".repeat(MAX_STRING * 3);
    let req = csi_proxy_api::filesystem::v1::MkdirRequest { path: long };
    let (v, _) = decode(fs, "Mkdir", &req.encode_to_vec());
    let s = v["path"].as_str().unwrap();
    assert!(
        s.len() < MAX_STRING + 64 && s.ends_with(&format!("[{} bytes in all]", MAX_STRING * 3)),
        "{}",
        s.len()
    );
}

#[test]
fn arbitrary_bytes_never_panic_and_stay_json() {
    use proptest::prelude::*;
    let iscsi = find(Group::Iscsi, "v1alpha2").unwrap();
    proptest!(|(b in proptest::collection::vec(any::<u8>(), 0..200))| {
        let mut out = String::new();
        Schemas::default().request(&mut out, iscsi, "ConnectTarget", Some(&b));
        prop_assert!(serde_json::from_str::<Value>(&out).is_ok(), "{}", out);
    });
}
