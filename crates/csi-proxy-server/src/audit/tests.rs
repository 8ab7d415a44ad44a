use super::*;
use crate::caller::Caller;
use csi_proxy_api::{find, Group};
use prost::Message as _;

fn entry(path: &str, code: Code) -> Entry {
    let api = find(Group::Filesystem, "v1").unwrap();
    Entry {
        time: SystemTime::now(),
        api,
        method: "Mkdir",
        code,
        message: String::new(),
        duration: Duration::from_micros(42),
        caller: Arc::new(Caller {
            pid: Some(7),
            uid: Some(0),
            ..Caller::default()
        }),
        request: Some(
            csi_proxy_api::filesystem::v1::MkdirRequest { path: path.into() }.encode_to_vec(),
        ),
    }
}

fn config(path: &std::path::Path, max_bytes: u64, max_backups: u32, mode: Mode) -> Config {
    Config {
        sink: Sink::File {
            path: path.to_path_buf(),
            max_bytes,
            max_backups,
        },
        level: Level::Write,
        mode,
    }
}

fn lines(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

#[test]
fn a_line_has_every_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.log");
    let log = AuditLog::open(&config(&path, 0, 0, Mode::BestEffort), None).unwrap();
    let mut e = entry("/var/lib/kubelet/a", Code::NotFound);
    e.message = "no such directory".into();
    log.submit(e);
    log.close(Duration::from_secs(5));
    let l = lines(&path);
    assert_eq!(l.len(), 1);
    let v = &l[0];
    assert_eq!(v["group"], "filesystem");
    assert_eq!(v["version"], "v1");
    assert_eq!(v["method"], "Mkdir");
    assert_eq!(v["code"], "NotFound");
    assert_eq!(v["message"], "no such directory");
    assert_eq!(v["duration_us"], 42);
    assert_eq!(v["caller"]["pid"], 7);
    assert_eq!(v["request"]["path"], "/var/lib/kubelet/a");
    let ts = v["ts"].as_str().unwrap();
    assert!(
        ts.len() == 27 && ts.ends_with('Z') && ts.as_bytes()[10] == b'T',
        "{ts}"
    );
}

#[test]
fn rotation_keeps_max_backups() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.log");
    let log = AuditLog::open(&config(&path, 2000, 2, Mode::Blocking), None).unwrap();
    for i in 0..60 {
        log.commit(entry(&format!("/var/lib/kubelet/{i:04}"), Code::Ok))
            .unwrap();
    }
    log.close(Duration::from_secs(5));
    let b1 = dir.path().join("audit.log.1");
    let b2 = dir.path().join("audit.log.2");
    assert!(b1.exists() && b2.exists());
    assert!(!dir.path().join("audit.log.3").exists());
    for p in [&path, &b1, &b2] {
        assert!(
            std::fs::metadata(p).unwrap().len() <= 2000,
            "{}",
            p.display()
        );
    }
    // The newest lines are in the file, then .1, then .2, in order.
    let all: Vec<String> = [&b2, &b1, &path]
        .iter()
        .flat_map(|p| lines(p))
        .map(|v| v["request"]["path"].as_str().unwrap().to_string())
        .collect();
    let mut sorted = all.clone();
    sorted.sort();
    assert_eq!(all, sorted);
    assert_eq!(all.last().unwrap(), "/var/lib/kubelet/0059");
}

#[test]
fn levels() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(&dir.path().join("a"), 0, 0, Mode::BestEffort);
    let log = AuditLog::open(&c, None).unwrap();
    assert!(log.records(true, false) && log.records(false, true) && !log.records(false, false));
    c.level = Level::All;
    assert!(AuditLog::open(&c, None).unwrap().records(false, false));
    c.level = Level::None;
    assert!(!AuditLog::open(&c, None).unwrap().records(true, true));
}

#[test]
fn a_closed_log_counts_drops_and_blocking_mode_says_unavailable() {
    let dir = tempfile::tempdir().unwrap();
    let log = AuditLog::open(&config(&dir.path().join("a"), 0, 0, Mode::Blocking), None).unwrap();
    log.close(Duration::from_secs(5));
    let reply = log.settle(entry("/x", Code::Ok), Reply::ok(Vec::new()));
    assert_eq!(reply.code, Code::Unavailable);
    assert!(reply.message.contains("the call ran"), "{}", reply.message);
    assert_eq!(log.dropped(), 1);
    log.submit(entry("/y", Code::Ok));
    assert_eq!(log.dropped(), 2);
}

#[test]
fn a_message_quoting_a_secret_is_scrubbed_and_drops_reach_the_metric() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.log");
    let metrics = Metrics::new(&crate::metrics::BuildInfo {
        version: "v".into(),
        commit: "c".into(),
        target: "t".into(),
    });
    let log = AuditLog::open(&config(&path, 0, 0, Mode::BestEffort), Some(&metrics)).unwrap();
    let mut e = entry("/x", Code::Internal);
    e.api = find(Group::Smb, "v1").unwrap();
    e.method = "NewSmbGlobalMapping";
    e.request = Some(
        csi_proxy_api::smb::v1::NewSmbGlobalMappingRequest {
            remote_path: r"\\srv\share".into(),
            local_path: String::new(),
            username: "u".into(),
            password: "Pa55-in-a-message".into(),
        }
        .encode_to_vec(),
    );
    e.message = "backend said: bad password Pa55-in-a-message".into();
    log.submit(e);
    log.close(Duration::from_secs(5));
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains("Pa55"), "{text}");
    assert_eq!(
        lines(&path)[0]["message"],
        "backend said: bad password <redacted>"
    );
    // Closed: further lines are dropped and counted in the metric.
    log.submit(entry("/y", Code::Ok));
    let scrape = metrics.encode(crate::metrics::Format::Prometheus);
    assert!(
        scrape.contains("csi_proxy_audit_dropped_total 1"),
        "{scrape}"
    );
}

/// In blocking mode, a line that cannot be queued in time is an error,
/// not an endless wait; a place taken before a call runs is its line's
/// (the queue never refuses it), and a place dropped unused is free again.
#[test]
fn queueing_waits_no_longer_than_its_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let log = AuditLog::open(
        &config(&dir.path().join("audit.log"), 0, 0, Mode::Blocking),
        None,
    )
    .unwrap();
    let held: Vec<Place> = (0..QUEUE_LINES).map_while(|_| log.reserve()).collect();
    assert_eq!(held.len(), QUEUE_LINES);
    assert!(log.reserve().is_none(), "the queue is full");
    let t = Instant::now();
    let e = log
        .commit_by(entry("/x", Code::Ok), Some(t + Duration::from_millis(200)))
        .unwrap_err();
    let waited = t.elapsed();
    assert!(e.contains("could not be queued"), "{e}");
    assert!(
        waited >= Duration::from_millis(200) && waited < Duration::from_secs(3),
        "{waited:?}"
    );
    // A held place always takes its line.
    let mut held = held;
    let place = held.pop().unwrap();
    let r = log.settle_in(place, entry("/y", Code::Ok), Reply::ok(Vec::new()), None);
    assert_eq!(r.code, Code::Ok, "{r:?}");
    drop(held);
    assert!(log.reserve().is_some(), "places dropped unused are free");
    log.close(Duration::from_secs(5));
    let e = log.commit_by(entry("/z", Code::Ok), None).unwrap_err();
    assert!(e.contains("closed"), "{e}");
}

/// A caller refused in a loop: past its budget, summary lines.
#[test]
fn refusals_past_the_budget_become_summary_lines() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.log");
    let log = AuditLog::open(&config(&path, 0, 0, Mode::BestEffort), None).unwrap();
    let caller = Arc::new(Caller {
        pid: Some(9),
        uid: Some(65534),
        ..Caller::default()
    });
    let mut own = 0;
    for _ in 0..500 {
        if log.admit_refusal(&caller, Code::PermissionDenied) {
            own += 1;
            let mut e = entry("/var/lib/kubelet/x", Code::PermissionDenied);
            e.caller = caller.clone();
            log.submit(e);
        }
    }
    assert!(own <= limit::BURST as usize + 2, "{own}");
    // The writer writes the summary within about a second.
    std::thread::sleep(Duration::from_millis(2300));
    log.close(Duration::from_secs(5));
    let l = lines(&path);
    let summaries: Vec<_> = l.iter().filter(|v| v.get("summary").is_some()).collect();
    assert_eq!(summaries.len(), 1, "{l:?}");
    assert_eq!(summaries[0]["refused"], 500 - own as u64);
    assert_eq!(summaries[0]["caller"]["uid"], 65534);
    assert_eq!(summaries[0]["code"], "PermissionDenied");
    assert_eq!(l.len(), own + 1);
}

/// Lines dropped are counted and warned about, the warning rate-limited.
#[test]
fn drops_are_counted_and_warned_about_once_per_period() {
    let dir = tempfile::tempdir().unwrap();
    let log = AuditLog::open(
        &config(&dir.path().join("audit.log"), 0, 0, Mode::BestEffort),
        None,
    )
    .unwrap();
    log.close(Duration::from_secs(5));
    assert!(log.drop_warned.lock().unwrap().is_none());
    log.submit(entry("/var/lib/kubelet/a", Code::Ok));
    let first = log.drop_warned.lock().unwrap().expect("warned");
    log.submit(entry("/var/lib/kubelet/b", Code::Ok));
    assert_eq!(log.dropped(), 2);
    assert_eq!(
        *log.drop_warned.lock().unwrap(),
        Some(first),
        "warned again at once"
    );
}

/// Blocking mode with a writer stuck (its file a FIFO nobody reads): a
/// call's line that cannot be queued by the call's deadline is an error
/// at that deadline, not a wait of its own.
#[cfg(unix)]
#[test]
fn a_line_that_cannot_be_queued_by_the_calls_deadline_fails_then() {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.fifo");
    nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    // A reader that never reads: the writer's writes block once the pipe
    // is full.
    let reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&path)
        .unwrap();
    let log = AuditLog::open(&config(&path, 0, 0, Mode::Blocking), None).unwrap();
    let long = format!("/var/lib/kubelet/{}", "x".repeat(3000));
    for _ in 0..(QUEUE_LINES + 1000) {
        log.submit(entry(&long, Code::Ok));
    }
    let t = Instant::now();
    let e = log
        .commit_by(entry(&long, Code::Ok), Some(t + Duration::from_millis(300)))
        .unwrap_err();
    let waited = t.elapsed();
    // Either the queue was still full at the deadline, or the writer took
    // one line (freeing a place) and then blocked on the pipe: both end at
    // the call's deadline, which is what is asked here.
    assert!(
        e.contains("could not be queued within the call's deadline")
            || e.contains("was not written within the call's deadline"),
        "{e}"
    );
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    // Drain the pipe so that the writer finishes (a FIFO without a reader
    // would block its reopening).
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let drain = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            use std::io::Read;
            let mut reader = reader;
            let mut buf = vec![0u8; 1 << 16];
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if !matches!(reader.read(&mut buf), Ok(n) if n > 0) {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        })
    };
    log.close(Duration::from_secs(30));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    drain.join().unwrap();
}

/// One decode: the audit line shows the request as the dispatcher decoded
/// and ran it. The bypasses: an unknown field of the group wire type made
/// the audit's own decoder write `"request": null` while prost skipped it
/// and ran the call; a message field sent twice is merged by prost, while
/// the audit's decoder showed the last part only.
#[test]
fn the_line_shows_the_request_as_the_server_decoded_it() {
    use crate::guard::Guard;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.log");
    let log = AuditLog::open(&config(&path, 0, 0, Mode::BestEffort), None).unwrap();
    let guard = Arc::new(Guard {
        audit: Some(log.clone()),
        policy: None,
    });
    let caller = Arc::new(Caller {
        uid: Some(0),
        ..Caller::default()
    });
    let fs = crate::routes::testing::service_for(Group::Filesystem, "v1", |_| {})
        .with_guard(guard.clone());
    let grouped = format!(
        "{}{}grouped",
        crate::routes::TEST_ROOT,
        std::path::MAIN_SEPARATOR
    );
    let mut mkdir = csi_proxy_api::filesystem::v1::MkdirRequest {
        path: grouped.clone(),
    }
    .encode_to_vec();
    // Field 9, an empty group: start and end.
    mkdir.extend([0x4b, 0x4c]);
    let reply = fs.call_as("/v1.Filesystem/Mkdir", &mkdir, &caller).wait();
    assert_eq!(reply.code, Code::Ok, "{}", reply.message);
    let iscsi =
        crate::routes::testing::service_for(Group::Iscsi, "v1alpha2", |_| {}).with_guard(guard);
    let mut twice = Vec::new();
    // target_portal (1) sent twice: the address, then the port.
    let first = b"\x0a\x09127.0.0.1";
    twice.extend([0x0a, first.len() as u8]);
    twice.extend(first);
    twice.extend([0x0a, 0x03, 0x10, 0xbd, 0x19]);
    let reply = iscsi
        .call_as("/v1alpha2.Iscsi/AddTargetPortal", &twice, &caller)
        .wait();
    assert_eq!(reply.code, Code::Ok, "{}", reply.message);
    log.close(Duration::from_secs(5));
    let all = lines(&path);
    let m = all
        .iter()
        .find(|v| v["method"] == "Mkdir")
        .expect("a Mkdir line");
    assert_eq!(m["request"]["path"], grouped.as_str(), "{m}");
    let a = all
        .iter()
        .find(|v| v["method"] == "AddTargetPortal")
        .expect("an AddTargetPortal line");
    assert_eq!(
        a["request"]["target_portal"],
        serde_json::json!({"target_address": "127.0.0.1", "target_port": 3261}),
        "{a}"
    );
}

/// Every method of every version through the real dispatcher at
/// `-audit-level=write` (fake host, empty requests): exactly the methods
/// whose operation the catalog calls a change get a line, whatever their
/// answer, and each line carries its request (never `null`: an empty
/// message decodes).
#[test]
fn at_write_level_exactly_the_changing_methods_are_recorded() {
    use crate::guard::Guard;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.log");
    let log = AuditLog::open(&config(&path, 0, 0, Mode::BestEffort), None).unwrap();
    let guard = Arc::new(Guard {
        audit: Some(log.clone()),
        policy: None,
    });
    let mut want = std::collections::BTreeSet::new();
    let mut uid = 0;
    for v in csi_proxy_api::API_VERSIONS {
        let svc = crate::routes::testing::service_for(v.group, v.version, |_| {})
            .with_guard(guard.clone());
        for crate::catalog::Route {
            method,
            operation: op,
            ..
        } in crate::catalog::routes(v).unwrap()
        {
            // A caller per call: calls answered InvalidArgument share the
            // budget of refused calls' lines (audit::limit).
            uid += 1;
            let caller = Arc::new(Caller {
                uid: Some(uid),
                ..Caller::default()
            });
            let _ = svc
                .call_as(&format!("/{}/{method}", v.service()), &[], &caller)
                .wait();
            if crate::catalog::changes_host(op) {
                want.insert((v.service(), method.to_string()));
            }
        }
    }
    log.close(Duration::from_secs(10));
    let got: std::collections::BTreeSet<(String, String)> = lines(&path)
        .iter()
        .map(|l| {
            assert!(l["request"].is_object(), "{l}");
            let service = find(
                Group::parse(l["group"].as_str().unwrap()).unwrap(),
                l["version"].as_str().unwrap(),
            )
            .unwrap()
            .service();
            (service, l["method"].as_str().unwrap().to_string())
        })
        .collect();
    assert_eq!(got, want);
    assert!(want.contains(&(
        "v1alpha2.Iscsi".to_string(),
        "DiscoverTargetPortal".to_string()
    )));
}

/// Best-effort mode: while syncs take seconds (here: held), the writer goes
/// on writing, and no line is dropped (CI: after a large build, a sync on
/// the writer's own thread stood still for seconds, the queue filled and
/// 327 lines were dropped).
#[test]
fn a_sync_that_waits_does_not_stop_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.log");
    let gate = Arc::new(writer::SyncGate::default());
    gate.close();
    let log = AuditLog::open_with(
        &config(&path, 1 << 20, 9, Mode::BestEffort),
        None,
        Some(gate.clone()),
    )
    .unwrap();
    // More than the queue holds, over several seconds' worth of syncs and
    // rotations.
    let n = QUEUE_LINES * 3;
    let deadline = Instant::now() + Duration::from_secs(30);
    for i in 0..n {
        log.submit(entry(&format!("/var/lib/kubelet/{i:06}"), Code::Ok));
        // No faster than the writer takes lines (256 per LINGER): only a
        // writer that stands still fills the queue.
        if i % 128 == 0 {
            std::thread::sleep(writer::LINGER);
        }
    }
    let count = || {
        let base = dir.path().join("audit.log");
        let mut all = 0;
        for k in 1..=9 {
            all += lines(&base.with_extension(format!("log.{k}"))).len();
        }
        all + lines(&base).len()
    };
    while count() < n {
        assert!(
            Instant::now() < deadline,
            "{} of {n} lines written, {} dropped",
            count(),
            log.dropped()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(log.dropped(), 0);
    gate.open();
    log.close(Duration::from_secs(5));
}
