//! The C ABI through its extern functions, over the real host of this OS
//! (Linux; Windows under wine): creating hosts, calls that succeed, hostile
//! paths refused with the pipe's codes, unknown groups and methods, the ABI
//! version, calls from many threads.

mod ffi;

use csi_proxy::{csi_proxy_abi_version, CSI_PROXY_ABI_VERSION};
use csi_proxy_api::filesystem::v2alpha1 as fs;
use ffi::{options, Lib};
use prost::Message;

#[test]
fn the_abi_version_is_the_header_constant() {
    assert_eq!(csi_proxy_abi_version(), CSI_PROXY_ABI_VERSION);
    assert_eq!(CSI_PROXY_ABI_VERSION, 1);
}

#[test]
fn bad_options_are_refused_with_invalid_argument_and_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().display().to_string();
    type Change = Box<dyn Fn(&mut ffi::Owned)>;
    let cases: Vec<(&str, Change)> = vec![
        ("ABI version", Box::new(|o| o.abi_version = 2)),
        ("no roots", Box::new(|o| o.kubelet_path = String::new())),
        ("relative root", Box::new(|o| o.kubelet_path = "k".into())),
        ("require_privacy", Box::new(|o| o.require_privacy = 7)),
        (
            "protected service name",
            Box::new(|o| o.protected_services = vec!["bad\\name".into()]),
        ),
    ];
    for (what, change) in cases {
        let mut o = options(&root);
        change(&mut o);
        let err = Lib::open(&o)
            .err()
            .unwrap_or_else(|| panic!("{what}: opened"));
        assert_eq!(err.0, 3, "{what}: {}", err.1);
        assert!(!err.1.is_empty(), "{what}");
    }
    #[cfg(target_os = "linux")]
    {
        let mut o = options(&root);
        o.volume_fs_type = "vfat".into();
        let err = Lib::open(&o).err().expect("vfat refused");
        assert_eq!(err.0, 3, "{}", err.1);
        assert!(err.1.contains("vfat"), "{}", err.1);
    }
}

#[test]
fn null_arguments_are_refused_not_dereferenced() {
    let mut host = std::ptr::null_mut();
    // SAFETY: NULL options are part of the contract's checks.
    let code =
        unsafe { csi_proxy::csi_proxy_host_new(std::ptr::null(), &mut host, std::ptr::null_mut()) };
    assert_eq!(code, 3);
    assert!(host.is_null());
    let mut out = csi_proxy::CsiProxyBuffer {
        ptr: std::ptr::null_mut(),
        len: 0,
    };
    // SAFETY: a NULL host is checked; out is valid.
    let code = unsafe {
        csi_proxy::csi_proxy_call(
            std::ptr::null(),
            std::ptr::null(),
            0,
            std::ptr::null(),
            0,
            std::ptr::null(),
            0,
            &mut out,
        )
    };
    assert_eq!(code, 3);
    // SAFETY: the buffer just stored.
    unsafe { csi_proxy::csi_proxy_buffer_free(out.ptr, out.len) };
}

#[test]
fn a_null_request_with_a_length_is_invalid_not_an_empty_request() {
    let dir = tempfile::tempdir().unwrap();
    let lib = Lib::open(&options(&dir.path().display().to_string())).unwrap();
    for (group, method) in [("disk", "GetDiskStats"), ("filesystem", "PathExists")] {
        let mut out = csi_proxy::CsiProxyBuffer {
            ptr: std::ptr::null_mut(),
            len: 0,
        };
        // SAFETY: a live host; group and method valid; the NULL request
        // with a length is what is checked.
        let code = unsafe {
            csi_proxy::csi_proxy_call(
                lib.raw(),
                group.as_ptr(),
                group.len(),
                method.as_ptr(),
                method.len(),
                std::ptr::null(),
                5,
                &mut out,
            )
        };
        // SAFETY: the buffer just stored, valid for its length.
        let message = unsafe { std::slice::from_raw_parts(out.ptr, out.len) }.to_vec();
        // SAFETY: freed once.
        unsafe { csi_proxy::csi_proxy_buffer_free(out.ptr, out.len) };
        assert_eq!(code, 3, "{group}/{method}");
        let message = String::from_utf8(message).unwrap();
        assert!(
            message.contains("request is NULL with a length"),
            "{message}"
        );
    }
}

#[test]
fn a_directory_life_cycle_under_the_kubelet_path() {
    let dir = tempfile::tempdir().unwrap();
    let lib = Lib::open(&options(&dir.path().display().to_string())).unwrap();
    let target = dir.path().join("pods").join("uid").join("vol");
    let t = target.display().to_string();
    let exists = |p: &str| {
        let r: fs::PathExistsResponse = lib
            .ok(
                "filesystem",
                "PathExists",
                &fs::PathExistsRequest { path: p.into() },
            )
            .unwrap();
        r.exists
    };
    assert!(!exists(&t));
    let _: fs::MkdirResponse = lib
        .ok("filesystem", "Mkdir", &fs::MkdirRequest { path: t.clone() })
        .unwrap();
    assert!(target.is_dir());
    assert!(exists(&t));
    std::fs::write(target.join("data"), b"x").unwrap();
    let _: fs::RmdirContentsResponse = lib
        .ok(
            "filesystem",
            "RmdirContents",
            &fs::RmdirContentsRequest { path: t.clone() },
        )
        .unwrap();
    assert!(target.is_dir() && std::fs::read_dir(&target).unwrap().next().is_none());
    let _: fs::RmdirResponse = lib
        .ok(
            "filesystem",
            "Rmdir",
            &fs::RmdirRequest {
                path: t.clone(),
                force: false,
            },
        )
        .unwrap();
    assert!(!target.exists());
    // An older version by name: v1's PathExists is the same message.
    let (code, body) = lib.call(
        "filesystem/v1",
        "PathExists",
        &fs::PathExistsRequest { path: t }.encode_to_vec(),
    );
    assert_eq!(code, 0);
    assert!(!fs::PathExistsResponse::decode(&body[..]).unwrap().exists);
}

#[test]
fn hostile_paths_are_refused_with_the_pipes_codes_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let kubelet = dir.path().join("kubelet");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&kubelet).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("sentinel"), b"keep").unwrap();
    let k = kubelet.display().to_string();
    let o = outside.display().to_string();
    let lib = Lib::open(&options(&k)).unwrap();
    let sep = std::path::MAIN_SEPARATOR;
    // The codes the pipe and socket tiers assert for the same paths.
    let cases = [
        (String::new(), 3),
        ("relative".to_string(), 3),
        (format!("{k}{sep}..{sep}outside{sep}sentinel"), 3),
        (format!("{k}{sep}a{sep}..{sep}..{sep}outside"), 3),
        (format!("{k}X{sep}x"), 7),
        (format!("{o}{sep}sentinel"), 7),
        (format!("{k}{sep}a\0b"), 3),
    ];
    for (path, want) in &cases {
        for (method, req) in [
            (
                "Mkdir",
                fs::MkdirRequest { path: path.clone() }.encode_to_vec(),
            ),
            (
                "Rmdir",
                fs::RmdirRequest {
                    path: path.clone(),
                    force: true,
                }
                .encode_to_vec(),
            ),
            (
                "RmdirContents",
                fs::RmdirContentsRequest { path: path.clone() }.encode_to_vec(),
            ),
        ] {
            let (code, message) = lib.call("filesystem", method, &req);
            assert_eq!(
                code,
                *want,
                "{method} {path:?}: {}",
                String::from_utf8_lossy(&message)
            );
        }
    }
    assert_eq!(std::fs::read(outside.join("sentinel")).unwrap(), b"keep");
    // A request that does not decode is the caller's fault, as on the pipe.
    let (code, _) = lib.call("filesystem", "Mkdir", b"\x0a\x05/k");
    assert_eq!(code, 3);
}

#[test]
fn unknown_groups_versions_and_methods_are_unimplemented() {
    let dir = tempfile::tempdir().unwrap();
    let lib = Lib::open(&options(&dir.path().display().to_string())).unwrap();
    for (group, method) in [
        ("nosuch", "PathExists"),
        ("filesystem/v9", "PathExists"),
        ("filesystem", "NoSuchMethod"),
        ("filesystem", "../Disk/Rescan"),
        ("disk", "PathExists"),
    ] {
        let (code, message) = lib.call(group, method, &[]);
        assert_eq!(
            code,
            12,
            "{group} {method}: {}",
            String::from_utf8_lossy(&message)
        );
    }
    // Names that are not UTF-8 are refused before any lookup.
    let (code, _) = lib.call_bytes(b"file\xffsystem", b"PathExists", &[]);
    assert_eq!(code, 3);
}

#[test]
fn one_host_serves_many_threads_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let lib = Lib::open(&options(&dir.path().display().to_string())).unwrap();
    std::thread::scope(|s| {
        for t in 0..8 {
            let (lib, dir) = (&lib, dir.path());
            s.spawn(move || {
                for i in 0..25 {
                    let p = dir.join(format!("t{t}")).join(format!("d{i}"));
                    let req = fs::MkdirRequest {
                        path: p.display().to_string(),
                    };
                    let _: fs::MkdirResponse = lib.ok("filesystem", "Mkdir", &req).unwrap();
                    assert!(p.is_dir());
                }
            });
        }
    });
    let made: usize = (0..8)
        .map(|t| {
            std::fs::read_dir(dir.path().join(format!("t{t}")))
                .unwrap()
                .count()
        })
        .sum();
    assert_eq!(made, 200);
}

#[test]
fn path_valid_follows_the_pipes_rules() {
    use csi_proxy::extras::{BoolResponse, PathRequest};
    let dir = tempfile::tempdir().unwrap();
    let k = dir.path().join("kubelet");
    std::fs::create_dir_all(k.join("here")).unwrap();
    let lib = Lib::open(&options(&k.display().to_string())).unwrap();
    let valid = |p: std::path::PathBuf| {
        lib.ok::<_, BoolResponse>(
            "filesystem",
            "PathValid",
            &PathRequest {
                path: p.display().to_string(),
            },
        )
    };
    assert!(valid(k.join("here")).unwrap().value);
    assert!(!valid(k.join("missing")).unwrap().value);
    assert_eq!(valid(dir.path().join("outside")).unwrap_err().0, 7);
    assert_eq!(
        valid(std::path::PathBuf::from("relative")).unwrap_err().0,
        3
    );
}

#[test]
fn smb_links_and_mappings_are_checked_as_over_the_pipe() {
    use csi_proxy::extras::{BoolResponse, EmptyResponse, NewSmbLinkRequest, RemotePathRequest};
    let dir = tempfile::tempdir().unwrap();
    let lib = Lib::open(&options(&dir.path().display().to_string())).unwrap();
    let mapped = lib.ok::<_, BoolResponse>(
        "smb",
        "IsSMBMapped",
        &RemotePathRequest {
            remote_path: "not a share".into(),
        },
    );
    assert_eq!(mapped.unwrap_err().0, 3);
    let share = if cfg!(windows) {
        r"\\server\share"
    } else {
        "//server/share"
    };
    let link = |local: String| {
        lib.ok::<_, EmptyResponse>(
            "smb",
            "NewSMBLink",
            &NewSmbLinkRequest {
                remote_path: share.into(),
                local_path: local,
            },
        )
    };
    assert_eq!(link(String::new()).unwrap_err().0, 3);
    let outside = dir.path().parent().unwrap().join("elsewhere");
    assert_eq!(link(outside.display().to_string()).unwrap_err().0, 7);
}
