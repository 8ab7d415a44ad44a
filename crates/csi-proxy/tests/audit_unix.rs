//! The audit log against the real binary over its Unix sockets: the caller
//! of a call from root, from an unprivileged user and from a process in a
//! kubepods-shaped cgroup; secrets never in the file at any level; levels;
//! rotation; both audit modes with the file on a full tmpfs.
#![cfg(target_os = "linux")]

mod audit;
mod common;

use audit::{is_call, lines, wait_line, ClientProcess};
use common::Proxy;
use csi_proxy_api::filesystem::v1::{
    filesystem_client::FilesystemClient, MkdirRequest, PathExistsRequest,
};
use csi_proxy_api::iscsi::v1alpha2 as iscsi;
use csi_proxy_api::smb::v1 as smb;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tonic::Code;

const PASSWORD: &str = "Audit-Pa55word-NeverLogged";
const CHAP: &str = "Audit-Chap-Secret-NeverLogged";
const MUTUAL: &str = "Audit-Mutual-Secret-NeverLogged";

/// Run as a client process by the tests below (a no-op otherwise).
#[test]
fn client_process() {
    audit::client_main();
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

fn audit_args(path: &Path, extra: &[&str]) -> Vec<String> {
    let mut a = vec![format!("-audit-log={}", path.display())];
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

fn start(args: &[String]) -> Proxy {
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    Proxy::start_on_tmpfs(&a)
}

async fn mkdir(p: &Proxy, path: &Path) -> Result<(), tonic::Status> {
    audit::mkdir(p.channel("filesystem-v1").await, path).await
}

#[tokio::test]
async fn a_call_from_this_process_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let p = start(&audit_args(&log, &[]));
    let target = p.kubelet.join("pods/from-root");
    mkdir(&p, &target).await.unwrap();
    let v = wait_line(&log, |v| is_call(v, "Mkdir", &target));
    assert_eq!(v["group"], "filesystem");
    assert_eq!(v["version"], "v1");
    assert_eq!(v["code"], "OK");
    assert_eq!(v["message"], "");
    assert!(v["duration_us"].as_u64().is_some(), "{v}");
    let c = &v["caller"];
    assert_eq!(c["pid"], std::process::id(), "{v}");
    assert_eq!(c["uid"], nix::unistd::geteuid().as_raw(), "{v}");
    assert_eq!(c["gid"], nix::unistd::getegid().as_raw(), "{v}");
    assert_eq!(
        c["exe"],
        std::env::current_exe().unwrap().display().to_string(),
        "{v}"
    );
    // This process is in no pod.
    assert!(c.get("pod_uid").is_none(), "{v}");
    // A refused call is recorded with its code and message.
    let outside = p.outside.join("nope");
    let e = mkdir(&p, &outside).await.unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    let v = wait_line(&log, |v| is_call(v, "Mkdir", &outside));
    assert_eq!(v["code"], "PermissionDenied");
    assert_eq!(v["message"], e.message());
}

#[tokio::test]
async fn a_call_from_an_unprivileged_user_names_that_user() {
    if !is_root() {
        eprintln!("SKIPPED: needs root to start a client as another user");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let log = dir.path().join("audit.log");
    let p = start(&audit_args(&log, &["-socket-mode=0666"]));
    // Let the other user reach the sockets (the proxy's temp root is 0700).
    std::fs::set_permissions(p.root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let target = p.kubelet.join("from-nobody");
    let client = ClientProcess::start("client_process", &p.socket_dir, &target, |c| {
        c.uid(65534).gid(65534);
    });
    let pid = client.pid();
    assert_eq!(client.go(), "OK");
    let v = wait_line(&log, |v| is_call(v, "Mkdir", &target));
    let c = &v["caller"];
    assert_eq!(c["pid"], pid, "{v}");
    assert_eq!(c["uid"], 65534, "{v}");
    assert_eq!(c["gid"], 65534, "{v}");
    assert_eq!(
        c["exe"],
        std::env::current_exe().unwrap().display().to_string(),
        "{v}"
    );
}

/// A cgroup v2 directory shaped like kubelet's systemd driver with
/// containerd; removed on drop.
struct PodCgroup {
    dirs: Vec<PathBuf>,
}

impl PodCgroup {
    fn create(root: &Path, pod_uid: &str, container: &str) -> std::io::Result<PodCgroup> {
        let uid_ = pod_uid.replace('-', "_");
        let parts = [
            "kubepods.slice".to_string(),
            "kubepods-besteffort.slice".to_string(),
            format!("kubepods-besteffort-pod{uid_}.slice"),
            format!("cri-containerd-{container}.scope"),
        ];
        let mut dirs = Vec::new();
        let mut at = root.to_path_buf();
        for part in parts {
            at = at.join(part);
            if !at.exists() {
                std::fs::create_dir(&at)?;
                dirs.push(at.clone());
            }
        }
        Ok(PodCgroup { dirs })
    }

    fn scope(&self) -> &Path {
        self.dirs.last().unwrap()
    }
}

impl Drop for PodCgroup {
    fn drop(&mut self) {
        for d in self.dirs.iter().rev() {
            // Empty once the client process is gone; retry briefly.
            for _ in 0..100 {
                if std::fs::remove_dir(d).is_ok() || !d.exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    }
}

#[tokio::test]
async fn a_call_from_a_pod_cgroup_names_the_pod_and_container() {
    // Hybrid hosts mount v2 at /sys/fs/cgroup/unified, pure v2 hosts at
    // /sys/fs/cgroup.
    let v2 = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
        .into_iter()
        .map(Path::new)
        .find(|p| p.join("cgroup.procs").exists() && p.join("cgroup.controllers").exists());
    let Some(v2) = v2.filter(|_| is_root()) else {
        eprintln!("SKIPPED: needs root and a cgroup v2 hierarchy");
        return;
    };
    let pod_uid = "7d3c1f0a-5b2e-4c8d-9e6f-1a2b3c4d5e6f";
    let container = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    let cg = PodCgroup::create(v2, pod_uid, container).expect("create the pod cgroup");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let p = start(&audit_args(&log, &[]));
    let target = p.kubelet.join("from-pod");
    let client = ClientProcess::start("client_process", &p.socket_dir, &target, |_| {});
    let pid = client.pid();
    std::fs::write(cg.scope().join("cgroup.procs"), pid.to_string()).expect("move the client");
    assert_eq!(client.go(), "OK");
    let v = wait_line(&log, |v| is_call(v, "Mkdir", &target));
    let c = &v["caller"];
    assert_eq!(c["pid"], pid, "{v}");
    assert_eq!(c["pod_uid"], pod_uid, "{v}");
    assert_eq!(c["container_id"], container, "{v}");
    drop(cg);
}

/// The bypass: `pod_uid` was taken from any `pod<uid>` segment anywhere in
/// the cgroup path. A process in a subtree it may write (here a cgroup
/// below the root, standing for a delegated subtree) builds kubelet's
/// whole layout there and moves itself in: it is no pod's.
#[tokio::test]
async fn a_pod_layout_below_the_root_names_no_pod() {
    let v2 = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
        .into_iter()
        .map(Path::new)
        .find(|p| p.join("cgroup.procs").exists() && p.join("cgroup.controllers").exists());
    let Some(v2) = v2.filter(|_| is_root()) else {
        eprintln!("SKIPPED: needs root and a cgroup v2 hierarchy");
        return;
    };
    let delegated = v2.join(format!("csi-proxy-test-delegated-{}", std::process::id()));
    std::fs::create_dir(&delegated).unwrap();
    let pod_uid = "7d3c1f0a-5b2e-4c8d-9e6f-1a2b3c4d5e6f";
    let container = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    let cg = PodCgroup::create(&delegated, pod_uid, container).expect("create the fake pod cgroup");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let p = start(&audit_args(&log, &[]));
    let target = p.kubelet.join("from-a-fake-pod");
    let client = ClientProcess::start("client_process", &p.socket_dir, &target, |_| {});
    std::fs::write(cg.scope().join("cgroup.procs"), client.pid().to_string())
        .expect("move the client");
    assert_eq!(client.go(), "OK");
    let v = wait_line(&log, |v| is_call(v, "Mkdir", &target));
    assert!(v["caller"].get("pod_uid").is_none(), "{v}");
    assert!(v["caller"].get("container_id").is_none(), "{v}");
    drop(cg);
    for _ in 0..100 {
        if std::fs::remove_dir(&delegated).is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The bypass: one client refused in a loop wrote about 1 GB in 15 s, and
/// rotation dropped the line of an earlier real Mkdir. Now its refused
/// calls get a budget of lines and then one summary line per second:
/// after a 15 s flood of refused calls carrying 8 KiB of paths each, the
/// Mkdir's line is still there and the files stay under their rotation
/// budget.
#[tokio::test]
async fn a_flood_of_refused_calls_keeps_earlier_lines_and_the_budget() {
    use csi_proxy_api::filesystem::v2alpha1::{
        filesystem_client::FilesystemClient, CreateSymlinkRequest,
    };
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let policy = dir.path().join("policy.json");
    let me = nix::unistd::geteuid().as_raw();
    std::fs::write(
        &policy,
        format!(
            r#"{{"filesystem": [{{"uid": {me}}}], "filesystem/CreateSymlink": [{{"uid": 4242}}]}}"#
        ),
    )
    .unwrap();
    let p = start(&audit_args(
        &log,
        &[
            &format!("-caller-policy={}", policy.display()),
            "-audit-log-max-size=1",
            "-audit-log-max-backups=1",
        ],
    ));
    let real = p.kubelet.join("the-real-write");
    mkdir(&p, &real).await.unwrap();
    wait_line(&log, |v| is_call(v, "Mkdir", &real));
    let long = format!("{}/{}", p.kubelet.display(), "x".repeat(4000));
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let channel = p.channel("filesystem-v2alpha1").await;
        let long = long.clone();
        tasks.push(tokio::spawn(async move {
            let mut c = FilesystemClient::new(channel);
            let mut refused = 0u64;
            while Instant::now() < deadline {
                let e = c
                    .create_symlink(CreateSymlinkRequest {
                        source_path: long.clone(),
                        target_path: long.clone(),
                    })
                    .await
                    .unwrap_err();
                assert_eq!(e.code(), Code::PermissionDenied);
                refused += 1;
            }
            refused
        }));
    }
    let mut refused = 0;
    for t in tasks {
        refused += t.await.unwrap();
    }
    assert!(refused > 1000, "only {refused} refused calls");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let backup = dir.path().join("audit.log.1");
    let size = |f: &Path| std::fs::metadata(f).map_or(0, |m| m.len());
    let total = size(&log) + size(&backup);
    assert!(total <= 2 << 20, "{total} bytes for a budget of 2 MiB");
    let mut all = lines(&backup);
    all.extend(lines(&log));
    assert!(
        all.iter().any(|v| is_call(v, "Mkdir", &real)),
        "the Mkdir's line was pushed out"
    );
    let summarized: u64 = all
        .iter()
        .filter_map(|v| v.get("refused").and_then(|n| n.as_u64()))
        .sum();
    let own = all
        .iter()
        .filter(|v| v["method"] == "CreateSymlink")
        .count() as u64;
    assert!(own < 150, "{own} lines of refused calls");
    assert!(
        summarized > 0 && summarized + own <= refused,
        "{summarized} + {own} of {refused}"
    );
}

/// Calls with secrets (SMB password, CHAP secrets) and a read-only call.
async fn secret_calls(p: &Proxy) {
    let mut s = smb::smb_client::SmbClient::new(p.channel("smb-v1").await);
    let _ = s
        .new_smb_global_mapping(smb::NewSmbGlobalMappingRequest {
            remote_path: r"\\127.0.0.1\share".into(),
            local_path: p.kubelet.join("smb").display().to_string(),
            username: r"DOMAIN\user".into(),
            password: PASSWORD.into(),
        })
        .await;
    let mut i = iscsi::iscsi_client::IscsiClient::new(p.channel("iscsi-v1alpha2").await);
    let _ = i
        .set_mutual_chap_secret(iscsi::SetMutualChapSecretRequest {
            mutual_chap_secret: MUTUAL.into(),
        })
        .await;
    let _ = i
        .connect_target(iscsi::ConnectTargetRequest {
            target_portal: Some(iscsi::TargetPortal {
                target_address: "127.0.0.1".into(),
                target_port: 1,
            }),
            iqn: "iqn.2001-04.com.example:audit".into(),
            auth_type: 2,
            chap_username: "user".into(),
            chap_secret: CHAP.into(),
        })
        .await;
    let mut f = FilesystemClient::new(p.channel("filesystem-v1").await);
    f.path_exists(PathExistsRequest {
        path: p.kubelet.display().to_string(),
    })
    .await
    .unwrap();
    mkdir(p, &p.kubelet.join("last")).await.unwrap();
}

#[tokio::test]
async fn secrets_never_reach_the_audit_file_at_any_level() {
    for level in ["none", "write", "all"] {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("audit.log");
        let mut p = start(&audit_args(
            &log,
            &[&format!("-audit-level={level}"), "-v=10"],
        ));
        secret_calls(&p).await;
        assert!(p.terminate().success());
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        for secret in [PASSWORD, CHAP, MUTUAL] {
            assert!(
                !text.contains(secret),
                "{level}: {secret} in the audit file:\n{text}"
            );
            assert!(!p.log().contains(secret), "{level}: {secret} in the log");
        }
        let l = lines(&log);
        let methods: Vec<&str> = l.iter().map(|v| v["method"].as_str().unwrap()).collect();
        match level {
            "none" => assert!(l.is_empty(), "{text}"),
            "write" => assert_eq!(
                methods,
                [
                    "NewSmbGlobalMapping",
                    "SetMutualChapSecret",
                    "ConnectTarget",
                    "Mkdir"
                ],
                "{text}"
            ),
            _ => assert_eq!(
                methods,
                [
                    "NewSmbGlobalMapping",
                    "SetMutualChapSecret",
                    "ConnectTarget",
                    "PathExists",
                    "Mkdir"
                ],
                "{text}"
            ),
        }
        if level != "none" {
            assert_eq!(l[0]["request"]["password"], "<redacted>");
            assert_eq!(l[0]["request"]["username"], r"DOMAIN\user");
            assert_eq!(l[1]["request"]["MutualChapSecret"], "<redacted>");
            assert_eq!(l[2]["request"]["chap_secret"], "<redacted>");
            assert_eq!(l[2]["request"]["auth_type"], "MUTUAL_CHAP");
            assert_eq!(l[2]["request"]["target_portal"]["target_port"], 1);
        }
    }
}

#[tokio::test]
async fn the_file_rotates_keeping_max_backups() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let mut p = start(&audit_args(
        &log,
        &["-audit-log-max-size=1", "-audit-log-max-backups=2"],
    ));
    let mut c = FilesystemClient::new(p.channel("filesystem-v1").await);
    // ~450-byte lines: 1 MiB holds ~2300; 6000 calls fill two backups.
    let base = p.kubelet.join("r".repeat(200));
    for i in 0..6000 {
        let path = format!("{}{i:05}", base.display());
        c.mkdir(MkdirRequest { path }).await.unwrap();
    }
    assert!(p.terminate().success());
    // A gap below would be lines dropped: say why.
    let stderr = std::fs::read_to_string(&p.stderr_path).unwrap_or_default();
    assert!(!stderr.contains("lines dropped"), "{stderr}");
    let b1 = dir.path().join("audit.log.1");
    let b2 = dir.path().join("audit.log.2");
    assert!(b1.exists() && b2.exists(), "no rotation");
    assert!(!dir.path().join("audit.log.3").exists());
    let mut all = Vec::new();
    for f in [&b2, &b1, &log] {
        assert!(
            std::fs::metadata(f).unwrap().len() <= 1024 * 1024,
            "{}",
            f.display()
        );
        all.extend(
            lines(f)
                .into_iter()
                .map(|v| v["request"]["path"].as_str().unwrap().to_string()),
        );
    }
    // Newest last, in order, without gaps since the oldest kept.
    let first: usize = all[0][all[0].len() - 5..].parse().unwrap();
    for (k, p) in all.iter().enumerate() {
        assert_eq!(p[p.len() - 5..].parse::<usize>().unwrap(), first + k);
    }
    assert_eq!(first + all.len(), 6000);
}

/// A 1 MiB tmpfs, filled up; unmounted on drop.
struct FullTmpfs {
    dir: tempfile::TempDir,
}

impl FullTmpfs {
    fn mount() -> Option<FullTmpfs> {
        let dir = tempfile::tempdir().unwrap();
        let flags = nix::mount::MsFlags::empty();
        nix::mount::mount(
            Some("tmpfs"),
            dir.path(),
            Some("tmpfs"),
            flags,
            Some("size=1m,mode=0755"),
        )
        .ok()?;
        let t = FullTmpfs { dir };
        std::fs::File::create(t.audit()).unwrap();
        t.fill();
        Some(t)
    }

    fn audit(&self) -> PathBuf {
        self.dir.path().join("audit.log")
    }

    fn fill(&self) {
        use std::io::Write;
        let mut f = std::fs::File::create(self.dir.path().join("filler")).unwrap();
        let block = vec![0u8; 4096];
        while f.write_all(&block).is_ok() {}
        let _ = f.write_all(&[0]);
    }

    fn free(&self) {
        std::fs::remove_file(self.dir.path().join("filler")).unwrap();
    }
}

impl Drop for FullTmpfs {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(self.dir.path(), nix::mount::MntFlags::MNT_DETACH);
    }
}

#[tokio::test]
async fn best_effort_on_a_full_disk_drops_lines_and_answers() {
    let Some(fs) = FullTmpfs::mount().filter(|_| is_root()) else {
        eprintln!("SKIPPED: needs root to mount a tmpfs");
        return;
    };
    let mut p = start(&audit_args(&fs.audit(), &[]));
    for i in 0..3 {
        let target = p.kubelet.join(format!("best-effort-{i}"));
        mkdir(&p, &target).await.unwrap();
        assert!(target.is_dir());
    }
    assert!(p.terminate().success());
    assert_eq!(std::fs::metadata(fs.audit()).unwrap().len(), 0);
    let log = p.log();
    assert!(log.contains("cannot write the audit log"), "{log}");
    assert!(
        log.contains("audit lines were dropped during this run dropped=3"),
        "{log}"
    );
}

#[tokio::test]
async fn blocking_on_a_full_disk_answers_unavailable_then_recovers() {
    let Some(fs) = FullTmpfs::mount().filter(|_| is_root()) else {
        eprintln!("SKIPPED: needs root to mount a tmpfs");
        return;
    };
    let p = start(&audit_args(&fs.audit(), &["-audit-mode=blocking"]));
    // The call that finds the disk full has run: it says so.
    let first = p.kubelet.join("blocking-1");
    let e = mkdir(&p, &first).await.unwrap_err();
    assert_eq!(e.code(), Code::Unavailable);
    assert!(e.message().contains("the call ran"), "{}", e.message());
    // Later calls are refused before they run: nothing changes.
    let second = p.kubelet.join("blocking-2");
    let e = mkdir(&p, &second).await.unwrap_err();
    assert_eq!(e.code(), Code::Unavailable);
    assert!(
        e.message().contains("refused before it ran"),
        "{}",
        e.message()
    );
    assert!(!second.exists());
    assert_eq!(std::fs::metadata(fs.audit()).unwrap().len(), 0);
    // Space again: the next refusal's line is written, then calls run.
    fs.free();
    let third = p.kubelet.join("blocking-3");
    let mut answered = Vec::new();
    for _ in 0..3 {
        match mkdir(&p, &third).await {
            Ok(()) => break,
            Err(e) => answered.push(e.code()),
        }
    }
    assert!(third.is_dir(), "{answered:?}");
    let l = lines(&fs.audit());
    assert!(
        l.iter()
            .any(|v| is_call(v, "Mkdir", &third) && v["code"] == "OK"),
        "{l:?}"
    );
}

#[tokio::test]
async fn json_logs_and_audit_lines_on_stderr_are_one_json_object_per_line() {
    let mut p = start(&["-logging-format=json".into(), "-audit-log=-".into()]);
    let target = p.kubelet.join("json");
    mkdir(&p, &target).await.unwrap();
    assert!(p.terminate().success());
    let log = p.log();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect();
    let ready = lines
        .iter()
        .find(|v| v["msg"] == "csi-proxy ready")
        .expect("ready line");
    assert!(ready["ts"].is_f64() && ready["v"] == 0, "{ready}");
    assert!(
        ready["caller"].as_str().unwrap().starts_with("run.rs:"),
        "{ready}"
    );
    assert_eq!(ready["endpoints"], 23);
    let audit = lines
        .iter()
        .find(|v| is_call(v, "Mkdir", &target))
        .expect("audit line");
    assert_eq!(audit["caller"]["pid"], std::process::id());
    assert!(lines.iter().any(|v| v["msg"] == "csi-proxy stopped"));
}
