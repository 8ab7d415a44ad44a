//! A test pipe server whose pipe has an owner the client trusts.
//!
//! The client refuses a pipe whose owner is not SYSTEM, Administrators or a
//! SID it was told to trust (`pipe_server.rs`). A pipe created with the
//! default security descriptor is owned by the creator's default owner on
//! Windows and by nobody under wine, so the fakes here name `O:BA`, as the
//! proxy's own default `-pipe-sddl` does.

use std::ffi::c_void;
use std::io;
use tokio::net::windows::named_pipe::{NamedPipeServer, ServerOptions};
use windows_sys::Win32::Foundation::LocalFree;
use windows_sys::Win32::Security::Authorization::{
    ConvertStringSecurityDescriptorToSecurityDescriptorW, SDDL_REVISION_1,
};
use windows_sys::Win32::Security::SECURITY_ATTRIBUTES;

/// Owned by Administrators, open to Administrators and SYSTEM.
const SDDL: &str = "O:BAD:P(A;;GA;;;BA)(A;;GA;;;SY)";

/// A new instance of pipe `name` (the first one when `first`), owned by
/// Administrators.
pub fn create(name: impl AsRef<std::ffi::OsStr>, first: bool) -> io::Result<NamedPipeServer> {
    let wide: Vec<u16> = SDDL.encode_utf16().chain(Some(0)).collect();
    let mut sd: *mut c_void = std::ptr::null_mut();
    // SAFETY: `wide` is NUL-terminated and alive; `sd` a valid out pointer.
    let ok = unsafe {
        ConvertStringSecurityDescriptorToSecurityDescriptorW(
            wide.as_ptr(),
            SDDL_REVISION_1,
            &mut sd,
            std::ptr::null_mut(),
        )
    };
    if ok == 0 {
        return Err(io::Error::last_os_error());
    }
    let mut sa = SECURITY_ATTRIBUTES {
        nLength: size_of::<SECURITY_ATTRIBUTES>() as u32,
        lpSecurityDescriptor: sd,
        bInheritHandle: 0,
    };
    // SAFETY: `sa` points at a valid descriptor for the whole call.
    let made = unsafe {
        ServerOptions::new()
            .first_pipe_instance(first)
            .create_with_security_attributes_raw(name, (&raw mut sa).cast())
    };
    // SAFETY: `sd` was LocalAlloc'd by the conversion; CreateNamedPipe
    // copied what it needs.
    unsafe { LocalFree(sd) };
    made
}
