//! The few Win32 calls the service tests make themselves: which process
//! serves a pipe, and killing a process the way a crash ends it.

use std::io;
use std::os::windows::io::AsRawHandle;
use windows_sys::Win32::Foundation::{CloseHandle, HANDLE};
use windows_sys::Win32::System::Pipes::GetNamedPipeServerProcessId;
use windows_sys::Win32::System::Threading::{OpenProcess, TerminateProcess, PROCESS_TERMINATE};

/// The id of the process that serves pipe `name` (opens one connection to
/// it and closes it again).
pub fn pipe_server_pid(name: &str) -> io::Result<u32> {
    let pipe = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(name)?;
    let mut pid = 0u32;
    // SAFETY: `pipe` is an open pipe client handle for the whole call and
    // `pid` is writable.
    let ok = unsafe { GetNamedPipeServerProcessId(pipe.as_raw_handle() as HANDLE, &mut pid) };
    if ok == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(pid)
}

/// A process handle, closed on drop.
struct Process(HANDLE);

impl Drop for Process {
    fn drop(&mut self) {
        // SAFETY: a handle OpenProcess returned, closed once.
        unsafe { CloseHandle(self.0) };
    }
}

/// `TerminateProcess(pid, 1)`: the process ends at once, without running
/// any of its shutdown code (as a crash would end it).
pub fn kill(pid: u32) -> io::Result<()> {
    // SAFETY: plain call; a null result is checked.
    let h = unsafe { OpenProcess(PROCESS_TERMINATE, 0, pid) };
    if h.is_null() {
        return Err(io::Error::last_os_error());
    }
    let p = Process(h);
    // SAFETY: `p.0` is a live handle with PROCESS_TERMINATE access.
    if unsafe { TerminateProcess(p.0, 1) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
