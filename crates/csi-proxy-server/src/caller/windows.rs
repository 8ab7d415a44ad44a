//! Windows: the pipe client's process id and creation time, and from its
//! process the token user SID, session id, image path and job membership.
//!
//! The creation time is read at accept through a handle opened there; the
//! reads open the pid again and go on only if that process has the same
//! creation time ([`super::started`]). Test hook: with the
//! environment variable `CSI_PROXY_TEST_PID_REUSE=1` the creation time
//! found at the reads is shifted by one tick, as if another process had
//! taken the pid (it can only make callers unknown).
//!
//! All the unsafe code of caller identity on Windows lives here; handles
//! are `OwnedHandle`s (closed on drop), the SID string is freed with
//! `LocalFree` by a guard.

use super::{started, Caller};
use std::ffi::c_void;
use std::mem::size_of;
use std::os::windows::ffi::OsStringExt;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use tokio::net::windows::named_pipe::NamedPipeServer;
use windows_sys::Win32::Foundation::{LocalFree, FALSE, FILETIME, HANDLE};
use windows_sys::Win32::Security::Authorization::ConvertSidToStringSidW;
use windows_sys::Win32::Security::{
    GetTokenInformation, TokenSessionId, TokenUser, TOKEN_QUERY, TOKEN_USER,
};
use windows_sys::Win32::System::JobObjects::IsProcessInJob;
use windows_sys::Win32::System::Pipes::GetNamedPipeClientProcessId;
use windows_sys::Win32::System::Threading::{
    GetProcessTimes, OpenProcess, OpenProcessToken, QueryFullProcessImageNameW, PROCESS_NAME_WIN32,
    PROCESS_QUERY_INFORMATION, PROCESS_QUERY_LIMITED_INFORMATION,
};

/// The pipe client's process id (cheap: no I/O; taken when accepted).
pub(super) fn client_pid(pipe: &NamedPipeServer) -> Option<u32> {
    let mut pid = 0u32;
    // SAFETY: the handle is the live pipe instance `pipe` owns; `pid` is a
    // valid out pointer.
    let ok = unsafe { GetNamedPipeClientProcessId(pipe.as_raw_handle() as HANDLE, &mut pid) };
    (ok != FALSE && pid != 0).then_some(pid)
}

/// The client process as found at accept.
pub(crate) struct Accepted {
    /// Its creation time (FILETIME ticks, 100 ns): two processes that
    /// held the same pid one after the other never share it.
    created: Option<u64>,
}

/// Opens process `pid` with `PROCESS_QUERY_LIMITED_INFORMATION` and reads
/// its creation time (cheap: no I/O; taken when accepted). The handle is
/// closed at once: the connection holds no handle to its client.
pub(super) fn accepted(pid: Option<u32>) -> Accepted {
    let process = pid.and_then(|pid| {
        // SAFETY: plain call; a null result is checked.
        let h = unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, pid) };
        // SAFETY: a non-null handle from OpenProcess is ours to close.
        (!h.is_null()).then(|| unsafe { OwnedHandle::from_raw_handle(h) })
    });
    Accepted {
        created: process.as_ref().and_then(creation_time),
    }
}

/// The creation time of `process` (`GetProcessTimes`).
fn creation_time(process: &OwnedHandle) -> Option<u64> {
    let zero = FILETIME {
        dwLowDateTime: 0,
        dwHighDateTime: 0,
    };
    let (mut created, mut exited, mut kernel, mut user) = (zero, zero, zero, zero);
    // SAFETY: `process` is a live process handle; the four out pointers are
    // valid locals.
    let ok = unsafe {
        GetProcessTimes(
            process.as_raw_handle() as HANDLE,
            &mut created,
            &mut exited,
            &mut kernel,
            &mut user,
        )
    };
    let t = (u64::from(created.dwHighDateTime) << 32) | u64::from(created.dwLowDateTime);
    (ok != FALSE && t != 0).then_some(t)
}

/// The test hook of the module doc: 1 with `CSI_PROXY_TEST_PID_REUSE=1`.
fn test_skew() -> u64 {
    static SKEW: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *SKEW.get_or_init(|| {
        u64::from(std::env::var("CSI_PROXY_TEST_PID_REUSE").is_ok_and(|v| v == "1"))
    })
}

/// The identity of process `pid` (blocking: opens the process and its
/// token; run on the blocking pool, `super::pending`), if it is still the
/// process `at_accept` found.
pub(super) fn identify_pid(pid: u32, at_accept: &Accepted) -> Caller {
    let mut caller = Caller {
        pid: Some(pid),
        ..Caller::default()
    };
    let Some(process) = open_process(pid) else {
        return caller;
    };
    let now = creation_time(&process).map(|t| t.wrapping_add(test_skew()));
    if !started::same_process(at_accept.created, now) {
        started::forget_process(&mut caller);
        return caller;
    }
    caller.exe = image_path(&process);
    caller.in_job = in_job(&process);
    if let Some(token) = open_token(&process) {
        caller.sid = token_user_sid(&token);
        caller.session_id = token_session_id(&token);
    }
    caller
}

fn open_process(pid: u32) -> Option<OwnedHandle> {
    // The full query right where we may (IsProcessInJob wants it on some
    // systems), else the limited one (enough for the rest).
    let open = |access| {
        // SAFETY: plain call; a null result is checked.
        unsafe { OpenProcess(access, FALSE, pid) }
    };
    let mut h = open(PROCESS_QUERY_INFORMATION | PROCESS_QUERY_LIMITED_INFORMATION);
    if h.is_null() {
        h = open(PROCESS_QUERY_LIMITED_INFORMATION);
    }
    // SAFETY: a non-null handle from OpenProcess is ours to close.
    (!h.is_null()).then(|| unsafe { OwnedHandle::from_raw_handle(h) })
}

fn open_token(process: &OwnedHandle) -> Option<OwnedHandle> {
    let mut token: HANDLE = std::ptr::null_mut();
    // SAFETY: `process` is a live process handle; `token` a valid out pointer.
    let ok =
        unsafe { OpenProcessToken(process.as_raw_handle() as HANDLE, TOKEN_QUERY, &mut token) };
    // SAFETY: on success the token handle is ours to close.
    (ok != FALSE && !token.is_null()).then(|| unsafe { OwnedHandle::from_raw_handle(token) })
}

fn image_path(process: &OwnedHandle) -> Option<String> {
    let mut buf = vec![0u16; 32_768];
    let mut len = buf.len() as u32;
    // SAFETY: `buf` holds `len` u16s; the call writes at most that many and
    // sets `len` to the count written.
    let ok = unsafe {
        QueryFullProcessImageNameW(
            process.as_raw_handle() as HANDLE,
            PROCESS_NAME_WIN32,
            buf.as_mut_ptr(),
            &mut len,
        )
    };
    (ok != FALSE).then(|| {
        let s = std::ffi::OsString::from_wide(&buf[..len as usize]);
        s.to_string_lossy().into_owned()
    })
}

fn in_job(process: &OwnedHandle) -> Option<bool> {
    let mut result = FALSE;
    // SAFETY: live process handle; a null job asks about any job.
    let ok = unsafe {
        IsProcessInJob(
            process.as_raw_handle() as HANDLE,
            std::ptr::null_mut(),
            &mut result,
        )
    };
    (ok != FALSE).then_some(result != FALSE)
}

/// The token's information of class `class`, in an 8-byte aligned buffer.
fn token_info(token: &OwnedHandle, class: i32) -> Option<Vec<u64>> {
    let mut needed = 0u32;
    // SAFETY: a size query: null buffer of length 0, `needed` receives the size.
    unsafe {
        GetTokenInformation(
            token.as_raw_handle() as HANDLE,
            class,
            std::ptr::null_mut(),
            0,
            &mut needed,
        )
    };
    if needed == 0 {
        return None;
    }
    let mut buf = vec![0u64; (needed as usize).div_ceil(8)];
    // SAFETY: `buf` has at least `needed` bytes.
    let ok = unsafe {
        GetTokenInformation(
            token.as_raw_handle() as HANDLE,
            class,
            buf.as_mut_ptr().cast::<c_void>(),
            (buf.len() * 8) as u32,
            &mut needed,
        )
    };
    (ok != FALSE).then_some(buf)
}

fn token_user_sid(token: &OwnedHandle) -> Option<String> {
    let buf = token_info(token, TokenUser)?;
    if buf.len() * 8 < size_of::<TOKEN_USER>() {
        return None;
    }
    // SAFETY: the buffer is aligned and holds a TOKEN_USER whose SID points
    // inside the same buffer, alive for this function.
    let sid = unsafe { (*buf.as_ptr().cast::<TOKEN_USER>()).User.Sid };
    let mut text: *mut u16 = std::ptr::null_mut();
    // SAFETY: `sid` is a valid SID; `text` receives LocalAlloc'd memory.
    if unsafe { ConvertSidToStringSidW(sid, &mut text) } == FALSE || text.is_null() {
        return None;
    }
    let _free = LocalGuard(text.cast());
    // SAFETY: `text` is a NUL-terminated wide string.
    let len = unsafe { (0..).take_while(|&i| *text.add(i) != 0).count() };
    // SAFETY: `len` u16s were just read from it.
    let wide = unsafe { std::slice::from_raw_parts(text, len) };
    Some(String::from_utf16_lossy(wide))
}

fn token_session_id(token: &OwnedHandle) -> Option<u32> {
    let buf = token_info(token, TokenSessionId)?;
    buf.first().map(|w| *w as u32)
}

/// Frees `LocalAlloc`'d memory on drop.
struct LocalGuard(*mut c_void);

impl Drop for LocalGuard {
    fn drop(&mut self) {
        // SAFETY: the pointer came from ConvertSidToStringSidW, which
        // documents LocalFree; freed once, here.
        unsafe { LocalFree(self.0) };
    }
}
