//! What a server process has used so far: CPU time (user + kernel), peak
//! working set, live threads.
//!
//! On Windows from the process handle (GetProcessTimes,
//! GetProcessMemoryInfo). Under wine those report another process's CPU
//! time as a value that does not move, so there the CPU time and the peak
//! resident set come from the Linux process behind it (`/proc/<pid>/stat`
//! and `status`, read through wine's `Z:` drive; found by the server's
//! unique `-kubelet-path` argument): what the process itself spent, without
//! the wineserver's share. Threads are the Windows threads either way (a
//! Toolhelp snapshot).

#[path = "../../tests/procfs/mod.rs"]
mod procfs;
#[path = "../../tests/real_windows/mod.rs"]
mod real_windows;

use crate::server::Server;
use std::os::windows::io::AsRawHandle;
use std::time::Duration;

#[derive(Clone, Copy, Debug, Default)]
pub struct Usage {
    pub cpu: Duration,
    pub peak_rss: u64,
    pub threads: usize,
}

pub fn of(server: &Server) -> Usage {
    let (cpu, peak_rss) = if real_windows::under_wine() {
        linux_process(&server.kubelet_arg)
    } else {
        windows_process(&server.child)
    };
    Usage {
        cpu,
        peak_rss,
        threads: threads(server.child.id()),
    }
}

fn windows_process(child: &std::process::Child) -> (Duration, u64) {
    use windows_sys::Win32::Foundation::FILETIME;
    use windows_sys::Win32::System::ProcessStatus::{
        GetProcessMemoryInfo, PROCESS_MEMORY_COUNTERS,
    };
    use windows_sys::Win32::System::Threading::GetProcessTimes;
    let handle = child.as_raw_handle();
    let zero = FILETIME {
        dwLowDateTime: 0,
        dwHighDateTime: 0,
    };
    let (mut created, mut exited, mut kernel, mut user) = (zero, zero, zero, zero);
    // SAFETY: a live process handle owned by `child`, four FILETIMEs to fill.
    let ok = unsafe { GetProcessTimes(handle, &mut created, &mut exited, &mut kernel, &mut user) };
    assert!(
        ok != 0,
        "GetProcessTimes: {}",
        std::io::Error::last_os_error()
    );
    let ticks = |t: FILETIME| (u64::from(t.dwHighDateTime) << 32) | u64::from(t.dwLowDateTime);
    let cpu = Duration::from_nanos((ticks(kernel) + ticks(user)) * 100);
    // SAFETY: plain data, all-zero is valid.
    let mut mem: PROCESS_MEMORY_COUNTERS = unsafe { std::mem::zeroed() };
    mem.cb = std::mem::size_of::<PROCESS_MEMORY_COUNTERS>() as u32;
    // SAFETY: the same handle; `mem` is as large as `cb` says.
    let ok = unsafe { GetProcessMemoryInfo(handle, &mut mem, mem.cb) };
    assert!(
        ok != 0,
        "GetProcessMemoryInfo: {}",
        std::io::Error::last_os_error()
    );
    (cpu, mem.PeakWorkingSetSize as u64)
}

/// Under wine: utime + stime and VmHWM of the Linux process whose command
/// line holds `marker`.
fn linux_process(marker: &str) -> (Duration, u64) {
    let proc_dir = std::path::Path::new(r"Z:\proc");
    let entries = std::fs::read_dir(proc_dir)
        .unwrap_or_else(|e| panic!("{} (wine's Z: drive): {e}", proc_dir.display()));
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if cmdline
            .split(|&b| b == 0)
            .any(|arg| arg == marker.as_bytes())
        {
            found.push(entry.path());
        }
    }
    assert!(
        found.len() == 1,
        "{} Linux processes with argument {marker}: {found:?}",
        found.len()
    );
    // Clock ticks (USER_HZ, 100 on Linux).
    let ticks = procfs::cpu_ticks(&std::fs::read_to_string(found[0].join("stat")).unwrap());
    let status = std::fs::read_to_string(found[0].join("status")).unwrap();
    let hwm_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/<pid>/status");
    (Duration::from_millis(ticks * 10), hwm_kib * 1024)
}

/// Live threads of process `pid` (a Toolhelp snapshot).
fn threads(pid: u32) -> usize {
    use windows_sys::Win32::Foundation::{CloseHandle, INVALID_HANDLE_VALUE};
    use windows_sys::Win32::System::Diagnostics::ToolHelp::{
        CreateToolhelp32Snapshot, Thread32First, Thread32Next, TH32CS_SNAPTHREAD, THREADENTRY32,
    };
    // SAFETY: no pointers; the handle is closed below.
    let snap = unsafe { CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0) };
    assert!(snap != INVALID_HANDLE_VALUE, "CreateToolhelp32Snapshot");
    // SAFETY: plain data, all-zero is valid.
    let mut entry: THREADENTRY32 = unsafe { std::mem::zeroed() };
    entry.dwSize = std::mem::size_of::<THREADENTRY32>() as u32;
    let mut n = 0;
    // SAFETY: a snapshot handle and an entry whose dwSize is set.
    let mut more = unsafe { Thread32First(snap, &mut entry) } != 0;
    while more {
        n += usize::from(entry.th32OwnerProcessID == pid);
        // SAFETY: as above.
        more = unsafe { Thread32Next(snap, &mut entry) } != 0;
    }
    // SAFETY: the snapshot handle, closed once.
    unsafe { CloseHandle(snap) };
    n
}
