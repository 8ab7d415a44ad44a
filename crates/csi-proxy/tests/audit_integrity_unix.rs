//! What the audit log records is what ran, and the proxy's own
//! configuration cannot be turned against the node (issue 41), against the
//! real binary: requests a second decoder read otherwise than the server
//! (an unknown group field, a field sent twice; raw HTTP/2), discovery
//! audited as a change, a caller that changes its gid per connection
//! sharing one budget of refused-call lines, a policy file with a key given
//! twice, a state dir inside the roots, and a planted link or record in
//! the state dir (real loop devices). Red team 41: blocking mode losing
//! lines when job bounds are full, a state dir reaching a root through
//! `..` or bind mounts, the shared budget's summary naming a caller, and
//! floods of calls that changed nothing.
#![cfg(target_os = "linux")]

mod audit;
mod common;
mod storage;

use audit::{lines, wait_line};
use common::Proxy;
use csi_proxy_http2::client::{RawClient, Response, Shape};
use prost::Message as _;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

fn raw(p: &Proxy, endpoint: &str) -> RawClient<UnixStream> {
    RawClient::new(
        UnixStream::connect(p.socket(endpoint)).unwrap(),
        Shape::default(),
    )
    .unwrap()
}

fn ok(r: &Response) -> bool {
    r.grpc_status == Some(0)
}

/// A proxy on tmpfs writing its audit log in a temporary directory under
/// the caller policy `policy` (JSON), with `extra` flags: the proxy, the
/// directory and the log's path.
fn audited_with_policy(policy: &str, extra: &[&str]) -> (Proxy, tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let file = dir.path().join("policy.json");
    std::fs::write(&file, policy).unwrap();
    let mut flags = vec![
        format!("-audit-log={}", log.display()),
        format!("-caller-policy={}", file.display()),
    ];
    flags.extend(extra.iter().map(|f| f.to_string()));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    (Proxy::start_on_tmpfs(&flags), dir, log)
}

/// An unknown field of the group wire type: prost skips it and runs the
/// call; the audit's own decoder gave up and logged `"request": null`.
/// Mkdir and Rmdir(force) ran, and their lines carried no path.
#[test]
fn a_request_with_an_unknown_group_field_is_logged_as_it_ran() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let p = Proxy::start_on_tmpfs(&[&format!("-audit-log={}", log.display())]);
    let target = p.kubelet.join("grouped");
    let path = target.display().to_string();
    let mut c = raw(&p, "filesystem-v1");
    // Field 9 as an empty group (start, end), after the path.
    let group = [0x4b, 0x4c];
    let mut mkdir =
        csi_proxy_api::filesystem::v1::MkdirRequest { path: path.clone() }.encode_to_vec();
    mkdir.extend(group);
    let r = c.call("/v1.Filesystem/Mkdir", None, &mkdir).unwrap();
    assert!(ok(&r), "{r:?}");
    assert!(target.is_dir(), "the Mkdir ran");
    let mut rmdir = csi_proxy_api::filesystem::v1::RmdirRequest {
        path: path.clone(),
        force: true,
    }
    .encode_to_vec();
    rmdir.extend(group);
    let r = c.call("/v1.Filesystem/Rmdir", None, &rmdir).unwrap();
    assert!(ok(&r), "{r:?}");
    assert!(!target.exists(), "the Rmdir ran");
    for method in ["Mkdir", "Rmdir"] {
        let v = wait_line(&log, |v| v["method"] == method);
        assert_eq!(v["request"]["path"], path.as_str(), "{v}");
    }
    let v = wait_line(&log, |v| v["method"] == "Rmdir");
    assert_eq!(v["request"]["force"], true, "{v}");
}

/// iSCSI AddTargetPortal with `target_portal` sent twice (the address,
/// then the port): the server merges the two parts and adds
/// 127.0.0.1:3261; the audit's own decoder showed `target_address: ""`.
/// Whatever the initiator answers here, the line shows what the server
/// decoded.
#[test]
fn a_field_sent_twice_is_logged_merged_as_the_server_read_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let p = Proxy::start_on_tmpfs(&[&format!("-audit-log={}", log.display())]);
    let mut c = raw(&p, "iscsi-v1alpha2");
    let first = csi_proxy_api::iscsi::v1alpha2::TargetPortal {
        target_address: "127.0.0.1".into(),
        target_port: 0,
    }
    .encode_to_vec();
    let second = csi_proxy_api::iscsi::v1alpha2::TargetPortal {
        target_address: String::new(),
        target_port: 3261,
    }
    .encode_to_vec();
    let mut req = Vec::new();
    for part in [first, second] {
        req.push(0x0a);
        req.push(part.len() as u8);
        req.extend(part);
    }
    let r = c
        .call("/v1alpha2.Iscsi/AddTargetPortal", None, &req)
        .unwrap();
    let v = wait_line(&log, |v| v["method"] == "AddTargetPortal");
    assert_eq!(
        v["request"]["target_portal"],
        serde_json::json!({"target_address": "127.0.0.1", "target_port": 3261}),
        "{v}"
    );
    if ok(&r) {
        // Leave open-iscsi's database as it was.
        let portal = csi_proxy_api::iscsi::v1alpha2::RemoveTargetPortalRequest {
            target_portal: Some(csi_proxy_api::iscsi::v1alpha2::TargetPortal {
                target_address: "127.0.0.1".into(),
                target_port: 3261,
            }),
        };
        let _ = c.call(
            "/v1alpha2.Iscsi/RemoveTargetPortal",
            None,
            &portal.encode_to_vec(),
        );
    }
}

/// DiscoverTargetPortal runs `iscsiadm --mode discovery`, which writes
/// node records: a change, recorded at the default `-audit-level=write`
/// (it was not, in either version).
#[test]
fn discovery_is_audited_at_write_level() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let p = Proxy::start_on_tmpfs(&[
        &format!("-audit-log={}", log.display()),
        "-audit-level=write",
    ]);
    // A port nothing listens on: the discovery fails, quickly.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    for (endpoint, path) in [
        ("iscsi-v1alpha1", "/v1alpha1.Iscsi/DiscoverTargetPortal"),
        ("iscsi-v1alpha2", "/v1alpha2.Iscsi/DiscoverTargetPortal"),
    ] {
        let req = csi_proxy_api::iscsi::v1alpha2::DiscoverTargetPortalRequest {
            target_portal: Some(csi_proxy_api::iscsi::v1alpha2::TargetPortal {
                target_address: "127.0.0.1".into(),
                target_port: u32::from(port),
            }),
        };
        let r = raw(&p, endpoint)
            .call(path, None, &req.encode_to_vec())
            .unwrap();
        assert!(r.grpc_status.is_some(), "{r:?}");
        let version = endpoint.strip_prefix("iscsi-").unwrap();
        let v = wait_line(&log, |v| {
            v["method"] == "DiscoverTargetPortal" && v["version"] == version
        });
        assert_eq!(
            v["request"]["target_portal"]["target_port"],
            u32::from(port),
            "{v}"
        );
    }
}

/// Connect to `socket` with this thread's gid set to `gid` (the raw
/// system call changes only the calling thread's credentials, which the
/// kernel records as the socket's peer), then take root's gid back.
fn connect_as_gid(socket: &Path, gid: u32) -> UnixStream {
    // SAFETY: setresgid has no memory preconditions; run on a thread of
    // the test's own.
    let set = |g: u32| unsafe { libc::syscall(libc::SYS_setresgid, g, g, g) };
    assert_eq!(set(gid), 0, "setresgid({gid})");
    let s = UnixStream::connect(socket);
    assert_eq!(set(0), 0, "setresgid(0)");
    s.unwrap()
}

/// The bypass: a caller that calls `setgid()` before each connection got
/// a fresh budget of refused-call lines every time (320 gids x 20 refused
/// calls rotated an earlier real Mkdir's line out of the log). Now its
/// budget is its uid's: after 320 gids x 20 refused calls, the lines of
/// refused calls stay within one caller's budget, and the Mkdir's line is
/// still there.
#[tokio::test]
async fn a_caller_changing_its_gid_per_connection_has_one_budget() {
    if !is_root() {
        eprintln!("skipped: needs root (setresgid)");
        return;
    }
    let (p, dir, log) = audited_with_policy(
        r#"{"filesystem": [{"uid": 0}], "filesystem/CreateSymlink": [{"uid": 4242}]}"#,
        &["-audit-log-max-size=1", "-audit-log-max-backups=1"],
    );
    let real = p.kubelet.join("the-real-write");
    audit::mkdir(p.channel("filesystem-v1").await, &real)
        .await
        .unwrap();
    wait_line(&log, |v| audit::is_call(v, "Mkdir", &real));
    let socket = p.socket("filesystem-v1");
    let link = csi_proxy_api::filesystem::v1::CreateSymlinkRequest {
        source_path: p.kubelet.join("s").display().to_string(),
        target_path: p.kubelet.join("t").display().to_string(),
    }
    .encode_to_vec();
    let started = Instant::now();
    let refused = std::thread::spawn(move || {
        let mut refused = 0u64;
        for gid in 1000..1320 {
            let s = connect_as_gid(&socket, gid);
            let mut c = RawClient::new(s, Shape::default()).unwrap();
            for _ in 0..20 {
                let r = c.call("/v1.Filesystem/CreateSymlink", None, &link).unwrap();
                assert_eq!(r.grpc_status, Some(7), "{r:?}");
                refused += 1;
            }
        }
        refused
    })
    .join()
    .unwrap();
    let elapsed = started.elapsed();
    assert_eq!(refused, 320 * 20);
    std::thread::sleep(Duration::from_millis(1500));
    let mut all = lines(&dir.path().join("audit.log.1"));
    all.extend(lines(&log));
    let own = all
        .iter()
        .filter(|v| v["method"] == "CreateSymlink")
        .count() as f64;
    // The burst (20) and 5 a second, and a second of slack.
    let budget = 20.0 + 5.0 * (elapsed.as_secs_f64() + 1.0);
    assert!(
        own <= budget,
        "{own} lines of refused calls in {elapsed:?} (one caller's budget: {budget})"
    );
    assert!(
        all.iter().any(|v| audit::is_call(v, "Mkdir", &real)),
        "the Mkdir's line was pushed out"
    );
}

/// Run the binary with `args`; it must exit at once with an error whose
/// text is returned (a binary still running after 15 s accepted them).
fn refuses_to_start(args: &[String]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let stderr = dir.path().join("stderr");
    let mut child = Command::new(common::bin())
        .arg(format!(
            "--socket-dir={}",
            dir.path().join("sock").display()
        ))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(!status.success(), "exited 0");
            return std::fs::read_to_string(&stderr).unwrap();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "started with {args:?}: {}",
                std::fs::read_to_string(&stderr).unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A key given twice in the policy file was taken silently (the last one
/// won), at the top level and inside a caller entry. Now the proxy refuses
/// the file at start-up, naming the key and its line.
#[test]
fn a_policy_with_a_key_given_twice_is_refused_naming_the_key_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let kubelet = dir.path().join("kubelet");
    std::fs::create_dir_all(&kubelet).unwrap();
    let policy = dir.path().join("policy.json");
    for (text, want) in [
        (
            "{\"filesystem\": [{\"uid\": 0}],\n \"filesystem\": [{\"uid\": 1000}]}",
            "duplicate key \"filesystem\" at line 2",
        ),
        (
            "{\"filesystem\": [\n  {\"uid\": 0, \"uid\": 1000}]}",
            "duplicate field `uid` at line 2",
        ),
    ] {
        std::fs::write(&policy, text).unwrap();
        let err = refuses_to_start(&[
            format!("-kubelet-path={}", kubelet.display()),
            format!("-state-dir={}", dir.path().join("state").display()),
            format!("-caller-policy={}", policy.display()),
        ]);
        assert!(err.contains(want), "{text}: {err}");
    }
}

/// A state dir inside an allowed root, as written or through a link, is
/// refused at start-up: a plugin could plant records or links there.
#[test]
fn a_state_dir_inside_the_roots_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let kubelet = dir.path().join("kubelet");
    std::fs::create_dir_all(kubelet.join("plugins")).unwrap();
    let link = dir.path().join("state-link");
    std::os::unix::fs::symlink(kubelet.join("plugins"), &link).unwrap();
    for state in [kubelet.join("csi-proxy-state"), link.join("csi-proxy")] {
        let err = refuses_to_start(&[
            format!("-kubelet-path={}", kubelet.display()),
            format!("-state-dir={}", state.display()),
        ]);
        assert!(err.contains("is inside the allowed root"), "{err}");
        assert!(!state.exists(), "{}", state.display());
    }
}

/// The bypasses (red team 41 F2): the check compared text. A state dir
/// written `out/link/../state`, with `link` into the root, was read as
/// `out/state` while the kernel resolves it to `kubelet/state`; one below
/// the bind-mount source of the root, or bind-mounted into the root, was
/// never seen. Now the directory is compared by identity (device and
/// inode walking `..` from its handle; its filesystem's mounts under the
/// roots) and refused, without being created.
#[test]
fn a_state_dir_reaching_a_root_through_dotdot_or_a_bind_mount_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let kubelet = dir.path().join("kubelet");
    std::fs::create_dir_all(kubelet.join("pods")).unwrap();
    std::fs::create_dir_all(dir.path().join("out")).unwrap();
    let link = dir.path().join("out/link");
    std::os::unix::fs::symlink(kubelet.join("pods"), &link).unwrap();
    let err = refuses_to_start(&[
        format!("-kubelet-path={}", kubelet.display()),
        format!("-state-dir={}/../state", link.display()),
    ]);
    assert!(err.contains("is inside the allowed root"), "{err}");
    assert!(!kubelet.join("state").exists(), "the refused dir was made");
    if !is_root() {
        eprintln!("skipped the bind mounts: need root");
        return;
    }
    // The root is a bind mount of data/kubelet; the state dir is below
    // its source.
    let data = dir.path().join("data");
    let source = data.join("kubelet");
    std::fs::create_dir_all(&source).unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let bind = |from: &Path, to: &Path| {
        let ok = Command::new("mount")
            .arg("--bind")
            .arg(from)
            .arg(to)
            .status()
            .unwrap()
            .success();
        assert!(ok, "mount --bind {} {}", from.display(), to.display());
    };
    struct Unmount(Vec<std::path::PathBuf>);
    impl Drop for Unmount {
        fn drop(&mut self) {
            for p in self.0.iter().rev() {
                let _ = Command::new("umount").arg("-l").arg(p).status();
            }
        }
    }
    let mut mounted = Unmount(Vec::new());
    bind(&source, &root);
    mounted.0.push(root.clone());
    let err = refuses_to_start(&[
        format!("-kubelet-path={}", root.display()),
        format!("-state-dir={}", source.join("state").display()),
    ]);
    assert!(err.contains("is inside the allowed root"), "{err}");
    // The state dir bind-mounted into the root.
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::create_dir_all(kubelet.join("x")).unwrap();
    bind(&state, &kubelet.join("x"));
    mounted.0.push(kubelet.join("x"));
    let err = refuses_to_start(&[
        format!("-kubelet-path={}", kubelet.display()),
        format!("-state-dir={}", state.display()),
    ]);
    assert!(err.contains("is inside the allowed root"), "{err}");
    drop(mounted);
}

/// The record's name in the state dir: the volume id's GUID.
fn record_of(state: &Path, volume_id: &str) -> std::path::PathBuf {
    let guid = volume_id
        .split(['{', '}'])
        .nth(1)
        .unwrap()
        .to_ascii_lowercase();
    state.join("formatting").join(guid)
}

async fn partitioned(p: &Proxy, disk_number: u32) -> String {
    use csi_proxy_api::{disk, volume};
    let c = p.client();
    c.connect_disk_v1()
        .await
        .unwrap()
        .partition_disk(disk::v1::PartitionDiskRequest { disk_number })
        .await
        .unwrap();
    c.connect_volume_v1()
        .await
        .unwrap()
        .list_volumes_on_disk(volume::v1::ListVolumesOnDiskRequest {
            disk_number,
            partition_number: 0,
        })
        .await
        .unwrap()
        .into_inner()
        .volume_ids
        .remove(0)
}

async fn format(p: &Proxy, id: &str) -> Result<(), tonic::Status> {
    p.client()
        .connect_volume_v1()
        .await
        .unwrap()
        .format_volume(csi_proxy_api::volume::v1::FormatVolumeRequest {
            volume_id: id.to_string(),
        })
        .await
        .map(drop)
}

/// A link planted as `formatting/<guid>` to a host file: FormatVolume
/// created its record through it and truncated the file, as root. Now
/// the record is created beneath the directory's handle with `O_EXCL |
/// O_NOFOLLOW`: the file keeps its bytes, the format goes on, and its
/// record is gone after it.
#[tokio::test(flavor = "multi_thread")]
async fn a_planted_link_in_the_state_dir_is_never_written_through() {
    if !storage::can_run() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let p = Proxy::start(&[&format!("-state-dir={}", state.path().display())]);
    let d = storage::LoopDisk::new(p.root.path(), 64 * storage::MIB);
    let id = partitioned(&p, d.number).await;
    let host_file = p.outside.join("sentinel");
    let before = std::fs::read(&host_file).unwrap();
    assert!(!before.is_empty());
    let record = record_of(state.path(), &id);
    std::fs::create_dir_all(record.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&host_file, &record).unwrap();
    format(&p, &id).await.unwrap();
    assert_eq!(
        std::fs::read(&host_file).unwrap(),
        before,
        "the host file was written"
    );
    assert!(
        std::fs::symlink_metadata(&record).is_err(),
        "the record stays"
    );
}

/// A planted empty record let FormatVolume write over unidentified bytes
/// without `-overwrite-unidentified-content`. Now only a record the proxy
/// wrote counts: the format is refused and the bytes stay.
#[tokio::test(flavor = "multi_thread")]
async fn a_planted_record_does_not_let_a_format_write_over_unidentified_bytes() {
    if !storage::can_run() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let p = Proxy::start(&[&format!("-state-dir={}", state.path().display())]);
    let d = storage::LoopDisk::new(p.root.path(), 64 * storage::MIB);
    let id = partitioned(&p, d.number).await;
    let node = storage::partition_node(&d);
    let mut noise = vec![0u8; storage::MIB as usize];
    for (i, b) in noise.iter_mut().enumerate() {
        *b = (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[3] | 1;
    }
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(&node).unwrap();
        f.write_all_at(&noise, 0).unwrap();
        f.sync_all().unwrap();
    }
    let record = record_of(state.path(), &id);
    std::fs::create_dir_all(record.parent().unwrap()).unwrap();
    for planted in [&b""[..], b"csi-proxy format record\n"] {
        std::fs::write(&record, planted).unwrap();
        let e = format(&p, &id).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e:?}");
        assert!(
            e.message().contains("-overwrite-unidentified-content"),
            "{}",
            e.message()
        );
        let mut head = vec![0u8; noise.len()];
        {
            use std::os::unix::fs::FileExt;
            std::fs::File::open(&node)
                .unwrap()
                .read_exact_at(&mut head, 0)
                .unwrap();
        }
        assert!(head == noise, "the unidentified bytes were written over");
    }
}

/// Send `calls` (method path, request) on one new connection without
/// waiting for any answer (HTTP/2 pipelining); return the client and the
/// last stream's id.
fn pipelined(p: &Proxy, endpoint: &str, calls: &[(&str, Vec<u8>)]) -> (RawClient<UnixStream>, u32) {
    let mut c = raw(p, endpoint);
    let mut enc = csi_proxy_http2::client::RequestEncoder::new(Shape::default());
    let (mut out, mut last) = (Vec::new(), 0);
    for (path, message) in calls {
        let block = enc.request_block(path, None, &[]);
        last = enc.put_request(&mut out, &block, message);
    }
    c.send_raw(&out).unwrap();
    (c, last)
}

/// The lines of `log` and its backup `backup` once `n` calls made after
/// the first line are all there, one by one or counted in summaries
/// (written once a second), or after 10 s.
fn settled(backup: &Path, log: &Path, n: u64) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut all = lines(backup);
        all.extend(lines(log));
        let counted: u64 = all
            .iter()
            .map(|v| v.get("refused").and_then(|r| r.as_u64()).unwrap_or(1))
            .sum();
        if counted > n || Instant::now() > deadline {
            return all;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn mkdir_request(path: &Path) -> Vec<u8> {
    csi_proxy_api::filesystem::v1::MkdirRequest {
        path: path.display().to_string(),
    }
    .encode_to_vec()
}

/// The breach (red team 41 F1): in blocking mode Mkdir ran inline on the
/// async worker, and only the wait for its line became a blocking job;
/// 120 pipelined Mkdirs filled the connection's 32 job slots, the rest
/// were turned down after their directory was made: 120 directories, 32
/// lines. Now every directory made has its line, whatever the bounds turn
/// down.
#[test]
fn in_blocking_mode_no_call_runs_without_its_line_when_job_slots_are_full() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let p = Proxy::start_on_tmpfs(&[
        &format!("-audit-log={}", log.display()),
        "-audit-mode=blocking",
    ]);
    let paths: Vec<_> = (0..120)
        .map(|i| p.kubelet.join(format!("d{i:03}")))
        .collect();
    let calls: Vec<_> = paths
        .iter()
        .map(|d| ("/v1.Filesystem/Mkdir", mkdir_request(d)))
        .collect();
    let (mut c, last) = pipelined(&p, "filesystem-v1", &calls);
    c.response(last).unwrap();
    let created: Vec<_> = paths.iter().filter(|d| d.is_dir()).collect();
    assert!(!created.is_empty());
    for d in &created {
        wait_line(&log, |v| audit::is_call(v, "Mkdir", d));
    }
}

/// The other half (red team 41 F1b): in blocking mode a call refused by
/// the policy handed back a job to wait for its line; with the
/// connection's job slots full the job was dropped, and the refused calls
/// left no line and no summary. A refused call's line no longer waits in a
/// job.
#[test]
fn in_blocking_mode_a_refused_calls_line_is_not_dropped_with_a_job() {
    let (p, _dir, log) = audited_with_policy(
        r#"{"filesystem": [{"uid": 0}], "filesystem/Rmdir": [{"uid": 4242}]}"#,
        &["-audit-mode=blocking"],
    );
    let mut calls: Vec<_> = (0..40)
        .map(|i| {
            let d = p.kubelet.join(format!("m{i:02}"));
            ("/v1.Filesystem/Mkdir", mkdir_request(&d))
        })
        .collect();
    let rmdir = csi_proxy_api::filesystem::v1::RmdirRequest {
        path: p.kubelet.join("m00").display().to_string(),
        force: false,
    }
    .encode_to_vec();
    calls.extend((0..15).map(|_| ("/v1.Filesystem/Rmdir", rmdir.clone())));
    let (mut c, last) = pipelined(&p, "filesystem-v1", &calls);
    let r = c.response(last).unwrap();
    assert_eq!(r.grpc_status, Some(7), "{r:?}");
    // Each refused Rmdir has its line, or is counted in a summary line:
    // the Mkdir calls the connection's job bound turned down are refused
    // calls too, recorded within the same budget of 20 lines at once.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let all = lines(&log);
        let refused = all
            .iter()
            .filter(|v| v["method"] == "Rmdir" && v["code"] == "PermissionDenied")
            .count();
        let summarised: u64 = all.iter().filter_map(|v| v["refused"].as_u64()).sum();
        if refused == 15 || (refused as u64 + summarised >= 15 && summarised > 0) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{refused} lines of 15 refused Rmdir calls, {summarised} in summaries"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The flood (red team 41 F4): calls that ran had no budget of lines, so
/// a caller sending Mkdir with a path the host rejects (InvalidArgument,
/// nothing touched) wrote one long line each and rotated the other
/// callers' lines out of the log. Such calls now share the budget of
/// refused calls: past it they are counted in summary lines, and the
/// earlier line of a real change stays.
#[test]
fn calls_rejected_as_invalid_are_budgeted_like_refused_calls() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let p = Proxy::start_on_tmpfs(&[
        &format!("-audit-log={}", log.display()),
        "-audit-log-max-size=1",
        "-audit-log-max-backups=1",
    ]);
    let real = p.kubelet.join("the-real-write");
    let mut c = raw(&p, "filesystem-v1");
    let r = c
        .call("/v1.Filesystem/Mkdir", None, &mkdir_request(&real))
        .unwrap();
    assert!(ok(&r), "{r:?}");
    wait_line(&log, |v| audit::is_call(v, "Mkdir", &real));
    // A path with a NUL: invalid wherever it points.
    let bad = csi_proxy_api::filesystem::v1::MkdirRequest {
        path: format!("{}/{}\0", p.kubelet.display(), "x".repeat(3800)),
    }
    .encode_to_vec();
    let started = Instant::now();
    let n = 600;
    for _ in 0..n {
        let r = c.call("/v1.Filesystem/Mkdir", None, &bad).unwrap();
        assert_eq!(r.grpc_status, Some(3), "{r:?}");
    }
    let elapsed = started.elapsed();
    let all = settled(&dir.path().join("audit.log.1"), &log, n);
    let own = all
        .iter()
        .filter(|v| v["method"] == "Mkdir" && v["code"] == "InvalidArgument")
        .count() as f64;
    let budget = 20.0 + 5.0 * (elapsed.as_secs_f64() + 1.0);
    assert!(
        own <= budget,
        "{own} lines of {n} invalid calls in {elapsed:?} (one caller's budget: {budget})"
    );
    let summarised: u64 = all
        .iter()
        .filter_map(|v| v.get("refused").and_then(|r| r.as_u64()))
        .sum();
    assert_eq!(
        own as u64 + summarised,
        n,
        "every call is a line or counted"
    );
    assert!(
        all.iter().any(|v| audit::is_call(v, "Mkdir", &real)),
        "the Mkdir's line was pushed out"
    );
}

/// The red team's own flood (41 F4): Mkdir of a long path that exists
/// answers `OK` and changes nothing; 570 a second rotated an earlier line
/// out. The host now says when a Mkdir found its directory there, and
/// such calls share the refused calls' budget; the Mkdir that made the
/// directory has its own line.
#[test]
fn calls_that_changed_nothing_are_budgeted_like_refused_calls() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let p = Proxy::start_on_tmpfs(&[
        &format!("-audit-log={}", log.display()),
        "-audit-log-max-size=1",
        "-audit-log-max-backups=1",
    ]);
    let long = (0..15).fold(p.kubelet.clone(), |d, _| d.join("x".repeat(250)));
    let mut c = raw(&p, "filesystem-v1");
    let real = p.kubelet.join("the-real-write");
    let r = c
        .call("/v1.Filesystem/Mkdir", None, &mkdir_request(&real))
        .unwrap();
    assert!(ok(&r), "{r:?}");
    let started = Instant::now();
    let n = 600;
    for _ in 0..n {
        let r = c
            .call("/v1.Filesystem/Mkdir", None, &mkdir_request(&long))
            .unwrap();
        assert!(ok(&r), "{r:?}");
    }
    let elapsed = started.elapsed();
    let all = settled(&dir.path().join("audit.log.1"), &log, n);
    let own = all
        .iter()
        .filter(|v| audit::is_call(v, "Mkdir", &long))
        .count() as u64;
    let budget = 20.0 + 5.0 * (elapsed.as_secs_f64() + 1.0);
    assert!(
        (own as f64) <= budget,
        "{own} lines of {n} calls that changed nothing in {elapsed:?} (budget: {budget})"
    );
    let summarised: u64 = all
        .iter()
        .filter_map(|v| v.get("refused").and_then(|r| r.as_u64()))
        .sum();
    assert_eq!(own + summarised, n, "every call is a line or counted");
    assert!(
        all.iter().any(|v| audit::is_call(v, "Mkdir", &real)),
        "the Mkdir's line was pushed out"
    );
}

/// Connect to `socket` with this thread's effective uid set to `uid` (the
/// kernel records it as the socket's peer) and its filesystem uid kept 0
/// (the socket is root's), then take root's uid back.
fn connect_as_euid(socket: &Path, uid: u32) -> UnixStream {
    // SAFETY: setresuid and setfsuid have no memory preconditions; they
    // change only the calling thread's credentials (raw system calls), on
    // a thread of the test's own; the saved uid stays 0.
    let set = |u: u32| unsafe { libc::syscall(libc::SYS_setresuid, -1i32, u, 0) };
    assert_eq!(set(uid), 0, "seteuid({uid})");
    // SAFETY: as above.
    unsafe { libc::syscall(libc::SYS_setfsuid, 0) };
    let s = UnixStream::connect(socket);
    assert_eq!(set(0), 0, "seteuid(0)");
    s.unwrap()
}

/// The misattribution (red team 41 F3): once 4096 callers (here, one
/// process changing its euid per connection) filled the table of
/// budgets, the callers beyond shared one budget whose summary named the
/// first of them, so a victim's refused calls were summarised under the
/// attacker's uid. The summary of that shared budget now names no caller.
#[test]
fn refusals_beyond_the_table_of_callers_are_summarised_under_no_caller() {
    if !is_root() {
        eprintln!("skipped: needs root (setresuid)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let policy = dir.path().join("policy.json");
    std::fs::write(&policy, r#"{"filesystem": [{"uid": 0}]}"#).unwrap();
    let p = Proxy::start_on_tmpfs(&[
        &format!("-audit-log={}", log.display()),
        &format!("-caller-policy={}", policy.display()),
    ]);
    let socket = p.socket("filesystem-v1");
    let req = mkdir_request(&p.kubelet.join("refused"));
    std::thread::spawn(move || {
        let call = |uid: u32, n: usize| {
            let mut c = RawClient::new(connect_as_euid(&socket, uid), Shape::default()).unwrap();
            for _ in 0..n {
                let r = c.call("/v1.Filesystem/Mkdir", None, &req).unwrap();
                assert_eq!(r.grpc_status, Some(7), "{r:?}");
            }
        };
        // 4096 callers fill the table, then one more drains the shared
        // budget; the victim's refusals land in it.
        for uid in 100_000..104_096 {
            call(uid, 1);
        }
        call(104_096, 30);
        call(4242, 60);
    })
    .join()
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let summaries = loop {
        let s: Vec<_> = lines(&log)
            .into_iter()
            .filter(|v| v.get("summary").is_some())
            .collect();
        let counted: u64 = s.iter().filter_map(|v| v["refused"].as_u64()).sum();
        if counted >= 60 || Instant::now() > deadline {
            break s;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(!summaries.is_empty(), "no summary line");
    for s in &summaries {
        assert!(
            s["caller"].is_null() || s["caller"]["uid"] == 4242,
            "a summary names a caller for calls it did not all make: {s}"
        );
    }
}

/// Blocking mode: a recorded call whose deadline passed before its job
/// started is refused without running, and its line says so (red team
/// 40async B1: such calls left no line at all).
#[test]
fn in_blocking_mode_a_call_past_its_deadline_before_it_runs_has_a_line() {
    let (p, _dir, log) =
        audited_with_policy(r#"{"filesystem": [{"uid": 0}]}"#, &["-audit-mode=blocking"]);
    let d = p.kubelet.join("never-made");
    let mut c = raw(&p, "filesystem-v1");
    let block = c.request_block("/v1.Filesystem/Mkdir", None, &[(b"grpc-timeout", b"1n")]);
    let r = c.call_with_block(&block, &mkdir_request(&d)).unwrap();
    assert_ne!(r.grpc_status, Some(0), "{r:?}");
    assert!(!d.exists());
    let line = wait_line(&log, |v| {
        v["method"] == "Mkdir"
            && v["code"] == "DeadlineExceeded"
            && v["request"]["path"] == d.display().to_string()
    });
    assert!(
        line["message"].as_str().unwrap().contains("before it ran"),
        "{line}"
    );
}
