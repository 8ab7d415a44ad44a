//! Windows: who serves a pipe the client opened (its process's token), for
//! the rule of [`crate::trust`]. All the unsafe code of the check is here;
//! handles are `OwnedHandle`s, the SID strings are freed by a guard.

use crate::trust::{judge, judge_owner, ServerToken, ServerTrust};
use std::ffi::c_void;
use std::io;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use tokio::net::windows::named_pipe::NamedPipeClient;
use windows_sys::Win32::Foundation::{LocalFree, FALSE, HANDLE};
use windows_sys::Win32::Security::Authorization::{
    ConvertSidToStringSidW, GetSecurityInfo, SE_KERNEL_OBJECT,
};
use windows_sys::Win32::Security::{
    GetTokenInformation, TokenGroups, TokenUser, OWNER_SECURITY_INFORMATION, PSID, TOKEN_GROUPS,
    TOKEN_QUERY, TOKEN_USER,
};
use windows_sys::Win32::System::Pipes::GetNamedPipeServerProcessId;
use windows_sys::Win32::System::Threading::{
    OpenProcess, OpenProcessToken, PROCESS_QUERY_LIMITED_INFORMATION,
};

/// Checks the server of `pipe` against `trust`; `PermissionDenied` naming
/// the pid (and user SID) when refused or unreadable.
pub(crate) fn check(pipe: &NamedPipeClient, trust: &ServerTrust) -> io::Result<()> {
    let denied = |msg: String| io::Error::new(io::ErrorKind::PermissionDenied, msg);
    let mut pid = 0u32;
    // SAFETY: `pipe` owns a live pipe handle; `pid` is a valid out pointer.
    let ok = unsafe { GetNamedPipeServerProcessId(pipe.as_raw_handle() as HANDLE, &mut pid) };
    if ok == FALSE {
        let e = io::Error::last_os_error();
        return Err(denied(format!(
            "cannot tell which process serves the pipe: {e}"
        )));
    }
    let token = server_token(pid).map_err(|e| {
        denied(format!(
            "cannot read the token of process {pid}, which serves the pipe: {e}"
        ))
    })?;
    judge(trust, pid, &token).map_err(denied)?;
    // The pid is not bound to the pipe: judge the object itself too.
    let owner =
        pipe_owner(pipe).map_err(|e| denied(format!("cannot read the owner of the pipe: {e}")))?;
    judge_owner(trust, &owner).map_err(denied)
}

/// The owner SID of the pipe object, read through the client's own handle
/// (opened with GENERIC_READ, which includes READ_CONTROL).
fn pipe_owner(pipe: &NamedPipeClient) -> io::Result<String> {
    let mut owner: PSID = std::ptr::null_mut();
    let mut sd: *mut c_void = std::ptr::null_mut();
    // SAFETY: `pipe` owns a live handle; the out pointers are valid locals,
    // the unused ones null as allowed.
    let status = unsafe {
        GetSecurityInfo(
            pipe.as_raw_handle() as HANDLE,
            SE_KERNEL_OBJECT,
            OWNER_SECURITY_INFORMATION,
            &mut owner,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut sd,
        )
    };
    if status != 0 {
        return Err(io::Error::from_raw_os_error(status as i32));
    }
    // On success `sd` is LocalAlloc'd and `owner` points into it.
    let _free = LocalGuard(sd);
    if owner.is_null() {
        return Err(io::Error::other("the pipe has no owner"));
    }
    sid_string(owner)
}

/// The user and groups of process `pid`'s token.
fn server_token(pid: u32) -> io::Result<ServerToken> {
    // SAFETY: plain call; a null result is checked.
    let process = unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, pid) };
    if process.is_null() {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a non-null handle from OpenProcess is ours to close.
    let process = unsafe { OwnedHandle::from_raw_handle(process) };
    let mut token: HANDLE = std::ptr::null_mut();
    // SAFETY: live process handle; `token` a valid out pointer.
    if unsafe { OpenProcessToken(process.as_raw_handle() as HANDLE, TOKEN_QUERY, &mut token) }
        == FALSE
    {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: on success the token handle is ours to close.
    let token = unsafe { OwnedHandle::from_raw_handle(token) };
    let user_buf = token_info(&token, TokenUser)?;
    if user_buf.len() * 8 < size_of::<TOKEN_USER>() {
        return Err(io::Error::other("short TOKEN_USER"));
    }
    // SAFETY: the buffer is 8-byte aligned and holds a TOKEN_USER whose SID
    // points inside it, alive for this function.
    let user = sid_string(unsafe { (*user_buf.as_ptr().cast::<TOKEN_USER>()).User.Sid })?;
    let groups_buf = token_info(&token, TokenGroups)?;
    if groups_buf.len() * 8 < size_of::<TOKEN_GROUPS>() {
        return Err(io::Error::other("short TOKEN_GROUPS"));
    }
    let groups_ptr = groups_buf.as_ptr().cast::<TOKEN_GROUPS>();
    // SAFETY: as above: a TOKEN_GROUPS with GroupCount entries in the same
    // buffer (the array is declared with length 1 and continues past it).
    let groups = unsafe {
        let count = (*groups_ptr).GroupCount as usize;
        let first = std::ptr::addr_of!((*groups_ptr).Groups)
            .cast::<windows_sys::Win32::Security::SID_AND_ATTRIBUTES>();
        (0..count)
            .map(|i| {
                let g = &*first.add(i);
                Ok((sid_string(g.Sid)?, g.Attributes))
            })
            .collect::<io::Result<Vec<_>>>()?
    };
    Ok(ServerToken { user, groups })
}

/// The token's information of class `class`, in an 8-byte aligned buffer.
fn token_info(token: &OwnedHandle, class: i32) -> io::Result<Vec<u64>> {
    let mut needed = 0u32;
    // SAFETY: a size query: null buffer of length 0.
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
        return Err(io::Error::last_os_error());
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
    if ok == FALSE {
        return Err(io::Error::last_os_error());
    }
    Ok(buf)
}

/// `S-1-...` of a SID.
fn sid_string(sid: PSID) -> io::Result<String> {
    let mut text: *mut u16 = std::ptr::null_mut();
    // SAFETY: `sid` is a valid SID; `text` receives LocalAlloc'd memory.
    if unsafe { ConvertSidToStringSidW(sid, &mut text) } == FALSE || text.is_null() {
        return Err(io::Error::last_os_error());
    }
    let _free = LocalGuard(text.cast());
    // SAFETY: `text` is a NUL-terminated wide string.
    let len = unsafe { (0..).take_while(|&i| *text.add(i) != 0).count() };
    // SAFETY: `len` u16s were just read from it.
    let wide = unsafe { std::slice::from_raw_parts(text, len) };
    Ok(String::from_utf16_lossy(wide))
}

/// Frees `LocalAlloc`'d memory on drop.
struct LocalGuard(*mut c_void);

impl Drop for LocalGuard {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: the pointer came from ConvertSidToStringSidW or
            // GetSecurityInfo, which document LocalFree; freed once, here.
            unsafe { LocalFree(self.0) };
        }
    }
}
