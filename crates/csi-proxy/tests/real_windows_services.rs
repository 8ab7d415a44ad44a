//! The real-Windows tier of the service: `csi-proxy.exe` installed with
//! its own `install-service` and driven through the SCM (stop with calls
//! in flight, uninstall of a running service, the restart-on-failure
//! actions after the process is killed), WMI answered inside the service
//! process (COM security set there), and the System API's StopService on
//! a real dependency chain and on the node-critical Windows services.
//!
//! Under wine (whose services.exe is an SCM) everything up to
//! `real_windows::require` runs for real; the rest prints
//! `SKIPPED (needs real Windows): ...`.
#![cfg(windows)]

mod pipes;
mod real_windows;
mod scm;

use csi_proxy_api::disk::v1 as dk;
use csi_proxy_api::filesystem::v1::PathExistsRequest;
use csi_proxy_api::system::v1alpha1 as sys;
use csi_proxy_api::Group;
use csi_proxy_client::Client;
use real_windows::{require, under_wine, win32};
use scm::system::{bios_serial, get, start, stop, SysClient};
use scm::{manager, one_at_a_time, wait_for, Installed, Throwaway};
use std::path::Path;
use std::time::{Duration, Instant};
use tonic::Code;
use windows_service::service::{ServiceAccess, ServiceExitCode, ServiceState};

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

const ALL: ServiceAccess = ServiceAccess::QUERY_CONFIG
    .union(ServiceAccess::QUERY_STATUS)
    .union(ServiceAccess::START)
    .union(ServiceAccess::STOP);

/// `csi-proxy.exe` installed as service `tag` serving `groups` (with
/// `extra` flags) and started: the service (all rights this file needs)
/// and its process id.
fn running(
    tag: &str,
    groups: &str,
    extra: &[&str],
) -> (Installed, windows_service::service::Service, u32) {
    let s = Installed::new(tag);
    s.install(groups, extra);
    let svc = s.open(ALL);
    let pid = service_pid(&s.start(&svc));
    (s, svc, pid)
}

/// The process id the SCM reports for a running service.
fn service_pid(status: &windows_service::service::ServiceStatus) -> u32 {
    status
        .process_id
        .expect("a running service has a process id")
}

/// PathExists of `dir` over the Filesystem pipe under `prefix`; a failed
/// connection is Unavailable.
async fn path_exists_at(prefix: &str, dir: &Path) -> Result<bool, tonic::Status> {
    let client = Client::builder().pipe_prefix(prefix).build().unwrap();
    let mut fs = client
        .connect_filesystem_v1()
        .await
        .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    fs.path_exists(PathExistsRequest {
        path: dir.display().to_string(),
    })
    .await
    .map(|r| r.into_inner().exists)
}

/// PathExists of the kubelet dir over the service's Filesystem pipe.
async fn path_exists(i: &Installed) -> Result<bool, tonic::Status> {
    path_exists_at(&i.prefix, &i.kubelet).await
}

/// The restart-on-failure actions `install-service` sets: wine's SCM takes
/// none (install-service warns), Windows' reports all of them.
#[test]
fn install_service_sets_restart_on_failure() {
    let _turn = one_at_a_time();
    let s = Installed::new("rwfa");
    let warnings = s.install("filesystem", &[]);
    let svc = s.open(ALL);
    let reported = scm::restart_on_failure_reported(&svc, &warnings);
    if under_wine() {
        // Wine's SCM takes the restart actions but cannot report them, and
        // refuses the non-crash flag.
        assert!(!reported);
        assert!(warnings.contains("non-crash failures"), "{warnings}");
    }
    let Some(_win) = require("an SCM that reports failure actions (wine's does not)") else {
        return;
    };
    assert!(reported, "no failure actions reported: {warnings}");
    assert!(warnings.is_empty(), "{warnings}");
}

/// What `win32::kill` falls back on to open the LocalSystem service's
/// process: an elevated administrator (the tier runs as one) can enable
/// SeDebugPrivilege; so can wine's default user.
#[test]
fn the_debug_privilege_can_be_enabled() {
    win32::enable_debug_privilege().unwrap();
}

/// Killed as a crash would end it: the SCM sees the process gone; on
/// Windows it starts the service again after 10 s, and the new process
/// serves the pipes.
#[test]
fn restart_on_failure_after_the_process_is_killed() {
    let _turn = one_at_a_time();
    let (s, svc, first) = running("rwkill", "filesystem", &[]);
    let pipe = format!("{}filesystem-v1", s.prefix);
    assert_eq!(win32::pipe_server_pid(&pipe).unwrap(), first);
    assert!(block_on(path_exists(&s)).unwrap());

    win32::kill(first).unwrap();
    // The process is gone: nobody serves the pipe, or another process.
    let deadline = Instant::now() + Duration::from_secs(30);
    while win32::pipe_server_pid(&pipe).is_ok_and(|p| p == first) {
        assert!(Instant::now() < deadline, "{first} still serves {pipe}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let Some(_win) = require(
        "an SCM that notices a killed service process and runs its restart actions \
         (wine's reports it Running still)",
    ) else {
        return;
    };
    // The SCM notices at once: not Running with that process any more.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let st = svc.query_status().unwrap();
        if st.current_state != ServiceState::Running || st.process_id != Some(first) {
            break;
        }
        assert!(Instant::now() < deadline, "still running as {first}");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Restart after 10 s (RESTART_DELAY): up again within 40 s, a new process.
    let deadline = Instant::now() + Duration::from_secs(40);
    let second = loop {
        let st = svc.query_status().unwrap();
        if st.current_state == ServiceState::Running && st.process_id.is_some_and(|p| p != first) {
            break service_pid(&st);
        }
        assert!(
            Instant::now() < deadline,
            "not restarted: {:?}; log:\n{}",
            st.current_state,
            s.log_text()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(win32::pipe_server_pid(&pipe).unwrap(), second);
    assert!(block_on(path_exists(&s)).unwrap());
    svc.stop().unwrap();
    let stopped = wait_for(&svc, ServiceState::Stopped, "stop", || s.log_text());
    assert_eq!(stopped.exit_code, ServiceExitCode::Win32(0));
}

/// A call that failed because the connection went away or was refused
/// (the server draining or gone), not an answer of the server's:
/// csi-proxy-client reports a connection closed under a call, and a GOAWAY
/// that refused it, as `Unavailable`.
fn clean_failure(e: &tonic::Status) -> bool {
    matches!(e.code(), Code::Unavailable | Code::Cancelled)
}

/// Four clients call without pause while the SCM stops the service: every
/// call is answered correctly or fails as unavailable (none hangs, none
/// gets a wrong answer), and the stop completes with exit code 0.
#[test]
fn stop_with_calls_in_flight_answers_or_fails_cleanly() {
    let _turn = one_at_a_time();
    let (s, svc, _) = running("rwbusy", "filesystem", &["-shutdown-timeout=10s"]);
    let s = std::sync::Arc::new(s);
    let stop_at = Instant::now() + Duration::from_millis(800);
    let clients: Vec<_> = (0..4)
        .map(|_| {
            let s = s.clone();
            std::thread::spawn(move || {
                block_on(async move {
                    let (mut ok, mut failed) = (0u32, Vec::new());
                    // Until the service is gone: 3 failures in a row.
                    while failed.len() < 3 || Instant::now() < stop_at {
                        match tokio::time::timeout(Duration::from_secs(30), path_exists(&s)).await {
                            Ok(Ok(exists)) => {
                                assert!(exists, "a wrong answer");
                                ok += 1;
                                failed.clear();
                            }
                            Ok(Err(e)) => failed.push(e),
                            Err(_) => panic!("a call hung for 30 s"),
                        }
                    }
                    (ok, failed)
                })
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(800));
    svc.stop().unwrap();
    let stopped = wait_for(&svc, ServiceState::Stopped, "stop", || s.log_text());
    assert_eq!(stopped.exit_code, ServiceExitCode::Win32(0));
    let (mut answered, mut refused) = (0, 0);
    for c in clients {
        let (ok, failed) = c.join().unwrap();
        answered += ok;
        refused += failed.len();
        for e in failed {
            assert!(clean_failure(&e), "not a clean failure: {e:?}");
        }
    }
    assert!(answered > 0, "no call was answered before the stop");
    eprintln!("{answered} calls answered, {refused} failed cleanly around the stop");
    let log = s.log_text();
    assert!(log.contains("service stopped"), "{log}");
}

/// `uninstall-service` of a running service: stops it (draining), deletes
/// it, and its pipes are gone.
#[test]
fn uninstall_stops_a_running_service_and_deletes_it() {
    let _turn = one_at_a_time();
    let (s, svc, pid) = running("rwuninst", "filesystem", &[]);
    drop(svc);
    s.uninstall_ok();
    let pipe = format!("{}filesystem-v1", s.prefix);
    assert!(
        win32::pipe_server_pid(&pipe).map_or(true, |p| p != pid),
        "{pipe} still served"
    );
    assert!(s.log_text().contains("service stopped"), "{}", s.log_text());
}

/// WMI inside the service process (COM initialised and its security set
/// on the worker thread of a LocalSystem service): Win32_BIOS there
/// answers as in a console process; on Windows MSFT_Disk too.
#[test]
fn wmi_calls_are_answered_by_the_service_process() {
    let _turn = one_at_a_time();
    let (s, _svc, pid) = running("rwwmi", "system,disk", &["-v=4"]);
    let sys_pipe = format!("{}system-v1alpha1", s.prefix);
    assert_eq!(win32::pipe_server_pid(&sys_pipe).unwrap(), pid);
    let console = pipes::Proxy::start_unique("rwwmi", "system,disk", &[]);
    let client = Client::builder().pipe_prefix(&s.prefix).build().unwrap();

    let (in_service, in_console) = block_on(async {
        let mut c = SysClient::new(
            client
                .connect_version(Group::System, "v1alpha1")
                .await
                .unwrap(),
        );
        let mut c2 = SysClient::new(console.channel(Group::System, "v1alpha1").await);
        (bios_serial(&mut c).await, bios_serial(&mut c2).await)
    });
    assert_eq!(in_service, in_console);
    let log = s.log_text();
    assert!(!log.contains("CoInitializeSecurity failed"), "{log}");
    assert!(!log.contains("COM is not available"), "{log}");

    let list = |prefix: String| async move {
        let client = Client::builder().pipe_prefix(&prefix).build().unwrap();
        let mut d = client.connect_disk_v1().await.unwrap();
        d.list_disk_locations(dk::ListDiskLocationsRequest {})
            .await
            .map(|r| {
                let mut v: Vec<_> = r
                    .into_inner()
                    .disk_locations
                    .into_iter()
                    .map(|(n, l)| (n, l.adapter, l.bus, l.target, l.lunid))
                    .collect();
                v.sort();
                v
            })
    };
    // The same list from both (wine's is empty: it has no disk with a
    // location).
    let disks = block_on(list(s.prefix.clone())).unwrap();
    assert_eq!(disks, block_on(list(console.pipe_prefix.clone())).unwrap());
    let Some(_win) = require("MSFT_Disk (the Storage Management API) in a service process") else {
        return;
    };
    assert!(!disks.is_empty(), "no disk listed by the service");
}

/// StopService on a chain `top` → `mid` → `base`: the running dependents
/// (dependents of dependents too) block a stop without force and are
/// stopped with it. Windows finds them with EnumDependentServicesW, wine
/// only through the dependency scan; the log says which.
#[test]
fn stop_service_finds_running_dependents_of_a_chain() {
    let _turn = one_at_a_time();
    let t = Throwaway::create(
        "rwchain",
        &[("base", &[]), ("mid", &["base"]), ("top", &["mid"])],
    );
    let (base, mid, top) = (t.name("base"), t.name("mid"), t.name("top"));
    let p = pipes::Proxy::start_unique("rwchain", "system", &["-v=10", "-allowed-services=*"]);
    block_on(async {
        let mut c = SysClient::new(p.channel(Group::System, "v1alpha1").await);
        for n in [base, mid, top] {
            start(&mut c, n).await.unwrap();
        }
        let e = stop(&mut c, base, false).await.unwrap_err();
        assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
        let msg = e.message().to_lowercase();
        assert!(msg.contains(mid) && msg.contains(top), "{msg}");
        for n in [base, mid, top] {
            assert_eq!(t.state(n), ServiceState::Running, "{n}");
        }
        stop(&mut c, base, true).await.unwrap();
        for n in [base, mid, top] {
            assert_eq!(t.state(n), ServiceState::Stopped, "{n}");
        }
        let g = get(&mut c, top).await.unwrap();
        assert_eq!(g.status, sys::ServiceStatus::Stopped as i32);
    });
    let log = p.log_text();
    if under_wine() {
        assert!(log.contains("found by the dependency scan"), "{log}");
    }
    let Some(_win) = require("EnumDependentServicesW listing the running dependents") else {
        return;
    };
    assert!(log.contains("found by EnumDependentServicesW"), "{log}");
    assert!(!log.contains("found by the dependency scan"), "{log}");
}

/// Issue 30's Windows counterparts: a forced or plain stop of a service
/// two dependencies below a protected one is refused (the dependents are
/// followed transitively), and a protected service named by its display
/// name is refused (the name is resolved to the service key name); all
/// keep running. Wine's SCM lists no dependents but the scan finds them,
/// and it has GetServiceKeyNameW, so this runs there too.
#[test]
fn a_chain_or_a_display_name_never_reaches_a_protected_service() {
    let _turn = one_at_a_time();
    let t = Throwaway::create(
        "rwguard",
        &[("base", &[]), ("mid", &["base"]), ("top", &["mid"])],
    );
    let (base, mid, top) = (t.name("base"), t.name("mid"), t.name("top"));
    let protect = format!("-protected-services={top}");
    let p = pipes::Proxy::start_unique("rwguard", "system", &[&protect, "-allowed-services=*"]);
    block_on(async {
        let mut c = SysClient::new(p.channel(Group::System, "v1alpha1").await);
        for n in [base, mid, top] {
            start(&mut c, n).await.unwrap();
        }
        for force in [true, false] {
            for n in [base, mid] {
                let e = stop(&mut c, n, force).await.unwrap_err();
                assert_eq!(e.code(), Code::PermissionDenied, "{n} {force}: {e:?}");
                assert!(e.message().contains(top), "{}", e.message());
            }
            let display = format!("csi-proxy test {top}");
            let e = stop(&mut c, &display, force).await.unwrap_err();
            assert_eq!(e.code(), Code::PermissionDenied, "{display}: {e:?}");
            assert!(e.message().contains("by another name"), "{}", e.message());
        }
        for n in [base, mid, top] {
            assert_eq!(t.state(n), ServiceState::Running, "{n}");
        }
    });
}

/// The node-critical services Windows Server always runs: StopService
/// refused (with and without force) by name, and they keep running.
#[test]
fn protected_windows_services_are_refused_and_keep_running() {
    const ALWAYS: &[&str] = &[
        "RpcSs",
        "RpcEptMapper",
        "DcomLaunch",
        "EventLog",
        "Winmgmt",
        "LSM",
        "SamSs",
        "Schedule",
    ];
    let p = pipes::Proxy::start_unique("rwprot", "system", &["-allowed-services=*"]);
    let (before, after) = block_on(async {
        let mut c = SysClient::new(p.channel(Group::System, "v1alpha1").await);
        let mut before = Vec::new();
        for n in ALWAYS {
            before.push(get(&mut c, n).await.map(|r| r.status).map_err(|e| e.code()));
        }
        for n in ALWAYS {
            for force in [false, true] {
                let e = stop(&mut c, n, force).await.unwrap_err();
                assert_eq!(e.code(), Code::PermissionDenied, "{n}: {e:?}");
            }
        }
        let e = start(&mut c, "RemoteRegistry").await.unwrap_err();
        assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
        let mut after = Vec::new();
        for n in ALWAYS {
            after.push(get(&mut c, n).await.map(|r| r.status).map_err(|e| e.code()));
        }
        (before, after)
    });
    assert_eq!(before, after, "a protected service changed state");
    let Some(_win) = require("the node-critical services of Windows Server") else {
        return;
    };
    for (n, st) in ALWAYS.iter().zip(&after) {
        assert_eq!(*st, Ok(sys::ServiceStatus::Running as i32), "{n}");
    }
}

/// The allow-list and the plan on Windows. With the default list
/// (`MSiSCSI`) a throwaway service is refused naming the flag and stays
/// stopped, GetService still answers; with `-allowed-services=*` a kernel
/// driver is refused whatever the list says, and keeps its state (wine
/// too: its `winehid` is a driver). On Windows: a service depending on a
/// load-order group (`+Group`) whose member's failure action reboots is
/// refused, read through `lpLoadOrderGroup` and `QueryServiceConfig2W`
/// (wine keeps neither: `system/windows/tests.rs` covers its registry).
#[test]
fn the_allow_list_and_the_plan_on_windows() {
    let _turn = one_at_a_time();
    let t = Throwaway::create("rwallow", &[("member", &[]), ("user", &[])]);
    let (member, user) = (t.name("member"), t.name("user"));
    let p = pipes::Proxy::start_unique("rwallow", "system", &[]);
    let all = pipes::Proxy::start_unique("rwallowall", "system", &["-allowed-services=*"]);
    block_on(async {
        let mut c = SysClient::new(p.channel(Group::System, "v1alpha1").await);
        let e = start(&mut c, user).await.unwrap_err();
        assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
        assert!(e.message().contains("-allowed-services"), "{}", e.message());
        assert_eq!(t.state(user), ServiceState::Stopped);
        get(&mut c, user).await.unwrap();
        let mut ca = SysClient::new(all.channel(Group::System, "v1alpha1").await);
        let mut driver = None;
        for d in [
            "winehid", "winebus", "MountMgr", "Null", "Beep", "bindflt", "wcifs",
        ] {
            if let Ok(g) = get(&mut ca, d).await {
                driver = Some((d, g.status));
                break;
            }
        }
        let (d, before) = driver.expect("no driver of the list on this host");
        for force in [false, true] {
            let e = stop(&mut ca, d, force).await.unwrap_err();
            assert_eq!(e.code(), Code::PermissionDenied, "{d}: {e:?}");
            assert!(e.message().contains("driver"), "{}", e.message());
        }
        assert_eq!(get(&mut ca, d).await.unwrap().status, before, "{d} changed");
    });
    let Some(_win) =
        require("load-order groups and failure actions kept by the SCM (QueryServiceConfig2W)")
    else {
        return;
    };
    let group = format!("csiproxyrwgroup{}", std::process::id());
    let sc = |args: &[&str]| {
        let out = std::process::Command::new("sc.exe")
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "sc {args:?}: {out:?}");
    };
    sc(&["config", member, "group=", &group]);
    sc(&[
        "failure",
        member,
        "reset=",
        "86400",
        "actions=",
        "reboot/60000",
    ]);
    let svc = manager()
        .open_service(
            user,
            ServiceAccess::CHANGE_CONFIG | ServiceAccess::QUERY_CONFIG,
        )
        .unwrap();
    let mut cfg = svc.query_config().unwrap();
    cfg.dependencies = vec![windows_service::service::ServiceDependency::Group(
        group.clone().into(),
    )];
    let info = windows_service::service::ServiceInfo {
        name: user.into(),
        display_name: cfg.display_name.clone(),
        service_type: cfg.service_type,
        start_type: cfg.start_type,
        error_control: cfg.error_control,
        executable_path: cfg.executable_path.clone(),
        launch_arguments: Vec::new(),
        dependencies: cfg.dependencies.clone(),
        account_name: None,
        account_password: None,
    };
    svc.change_config(&info).unwrap();
    let flag = format!("-allowed-services={user},{member}");
    let p2 = pipes::Proxy::start_unique("rwallowgroup", "system", &[&flag]);
    block_on(async {
        let mut c = SysClient::new(p2.channel(Group::System, "v1alpha1").await);
        for n in [member, user] {
            let e = start(&mut c, n).await.unwrap_err();
            assert_eq!(e.code(), Code::PermissionDenied, "{n}: {e:?}");
            assert!(e.message().contains("reboot"), "{n}: {}", e.message());
        }
    });
    for n in [member, user] {
        assert_eq!(t.state(n), ServiceState::Stopped, "{n}");
    }
}

/// A start that would start a service with trigger-start entries
/// (`sc triggerinfo ... start/networkon`: the SCM starts it on an event of
/// its own) as a dependency is refused: the plan cannot follow what the
/// SCM does with it. Wine keeps no trigger information
/// (`QueryServiceConfig2W(SERVICE_CONFIG_TRIGGER_INFO)`); the rule itself
/// is `scm_rules::unmodelled`, unit-tested on Linux.
#[test]
fn a_trigger_started_dependency_is_refused() {
    let Some(_win) =
        require("trigger-start information kept by the SCM (SERVICE_CONFIG_TRIGGER_INFO)")
    else {
        return;
    };
    let _turn = one_at_a_time();
    let t = Throwaway::create("rwtrig", &[("trig", &[]), ("user", &["trig"])]);
    let (trig, user) = (t.name("trig"), t.name("user"));
    let out = std::process::Command::new("sc.exe")
        .args(["triggerinfo", trig, "start/networkon"])
        .output()
        .unwrap();
    assert!(out.status.success(), "sc triggerinfo: {out:?}");
    let flag = format!("-allowed-services={user}");
    let p = pipes::Proxy::start_unique("rwtrig", "system", &[&flag]);
    block_on(async {
        let mut c = SysClient::new(p.channel(Group::System, "v1alpha1").await);
        let e = start(&mut c, user).await.unwrap_err();
        assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
        assert!(
            e.message().contains("trigger-start") && e.message().contains(trig),
            "{}",
            e.message()
        );
    });
    for n in [trig, user] {
        assert_eq!(t.state(n), ServiceState::Stopped, "{n}");
    }
}

/// The pipe DACL of a service: `-pipe-sddl` as installed is the one the
/// pipes carry (read back through a `READ_CONTROL` handle), and on Windows
/// it is enforced: with SYSTEM alone admitted, this test (an elevated
/// administrator, not SYSTEM) cannot open the pipe; with the default
/// (administrators and SYSTEM) it can.
#[test]
fn service_pipes_admit_only_whom_the_sddl_names() {
    use csi_proxy_server::transport::windows::pipe_dacl_ace_count;
    let _turn = one_at_a_time();
    let (s, _svc, _) = running("rwdacl", "filesystem", &["-pipe-sddl=O:SYD:P(A;;GA;;;SY)"]);
    let pipe = format!("{}filesystem-v1", s.prefix);
    let default = pipes::Proxy::start_unique("rwdacl", "filesystem", &[]);
    let default_pipe = format!("{}filesystem-v1", default.pipe_prefix);
    assert_eq!(pipe_dacl_ace_count(&default_pipe).unwrap(), 2);
    assert!(block_on(path_exists_at(&default.pipe_prefix, &default.kubelet)).unwrap());
    if under_wine() {
        // Stored as given (an administrator may not even read it on
        // Windows: READ_CONTROL is not granted to BA there).
        assert_eq!(pipe_dacl_ace_count(&pipe).unwrap(), 1);
    }
    let Some(_win) = require("a kernel that enforces pipe DACLs (wine stores them only)") else {
        return;
    };
    let e = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&pipe)
        .unwrap_err();
    assert_eq!(e.raw_os_error(), Some(5), "{e}");
    // Nor can the client library.
    block_on(path_exists(&s)).unwrap_err();
}

/// A second proxy on pipe names another one serves: on Windows the
/// first-instance flag makes its start fail, saying why, and the first
/// keeps serving (wine does not enforce the flag).
#[test]
fn a_second_proxy_on_the_same_pipes_fails_to_start() {
    let first = pipes::Proxy::start_unique("rwtwice", "filesystem", &[]);
    let exists = |prefix: &str, dir: &Path| block_on(path_exists_at(prefix, dir));
    assert!(exists(&first.pipe_prefix, &first.kubelet).unwrap());
    let Some(_win) = require("FILE_FLAG_FIRST_PIPE_INSTANCE enforced (wine ignores it)") else {
        return;
    };
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_csi-proxy"))
        .arg(format!("-kubelet-path={}", first.kubelet.display()))
        .arg("-api-groups=filesystem")
        .arg(format!("-pipe-prefix={}", first.pipe_prefix))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is another csi-proxy running?"), "{err}");
    assert!(exists(&first.pipe_prefix, &first.kubelet).unwrap());
}
