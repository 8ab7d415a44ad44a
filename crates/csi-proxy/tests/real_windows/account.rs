//! A local user account made with `NetUserAdd` for the SMB tests, its
//! password rotated with `NetUserSetInfo`, deleted (`NetUserDel`) on drop.

use std::io;
use windows_sys::Win32::NetworkManagement::NetManagement::{
    NetUserAdd, NetUserDel, NetUserSetInfo, UF_DONT_EXPIRE_PASSWD, UF_SCRIPT, USER_INFO_1,
    USER_INFO_1003, USER_PRIV_USER,
};

pub(crate) fn wide(s: &str) -> Vec<u16> {
    s.encode_utf16().chain(std::iter::once(0)).collect()
}

/// A NET_API_STATUS as an error: Win32 codes as they are, NERR_* (2100
/// and up) with their number.
pub(crate) fn net_error(what: &str, status: u32) -> io::Error {
    if status < 2100 {
        let e = io::Error::from_raw_os_error(status as i32);
        io::Error::new(e.kind(), format!("{what}: {e}"))
    } else {
        io::Error::other(format!("{what}: NET_API_STATUS {status}"))
    }
}

/// A local user of this machine.
pub struct LocalUser {
    pub name: String,
}

impl LocalUser {
    /// Creates user `name` (an ordinary user, password never expires).
    pub fn create(name: &str, password: &str) -> io::Result<LocalUser> {
        let mut n = wide(name);
        let mut p = wide(password);
        let info = USER_INFO_1 {
            usri1_name: n.as_mut_ptr(),
            usri1_password: p.as_mut_ptr(),
            usri1_password_age: 0,
            usri1_priv: USER_PRIV_USER,
            usri1_home_dir: std::ptr::null_mut(),
            usri1_comment: std::ptr::null_mut(),
            usri1_flags: UF_SCRIPT | UF_DONT_EXPIRE_PASSWD,
            usri1_script_path: std::ptr::null_mut(),
        };
        let mut parm = 0u32;
        // SAFETY: level 1 with a USER_INFO_1 whose strings are
        // NUL-terminated and alive for the call; local machine.
        let status = unsafe {
            NetUserAdd(
                std::ptr::null(),
                1,
                (&info as *const USER_INFO_1).cast(),
                &mut parm,
            )
        };
        p.fill(0);
        if status != 0 {
            return Err(net_error(&format!("NetUserAdd {name}"), status));
        }
        Ok(LocalUser { name: name.into() })
    }

    /// `COMPUTERNAME\name`, the form a credential names it by.
    pub fn qualified(&self) -> String {
        format!("{}\\{}", computer_name(), self.name)
    }

    /// Sets a new password (an administrator's reset, level 1003).
    pub fn set_password(&self, password: &str) -> io::Result<()> {
        let n = wide(&self.name);
        let mut p = wide(password);
        let info = USER_INFO_1003 {
            usri1003_password: p.as_mut_ptr(),
        };
        let mut parm = 0u32;
        // SAFETY: level 1003 with a USER_INFO_1003 whose string is
        // NUL-terminated and alive for the call.
        let status = unsafe {
            NetUserSetInfo(
                std::ptr::null(),
                n.as_ptr(),
                1003,
                (&info as *const USER_INFO_1003).cast(),
                &mut parm,
            )
        };
        p.fill(0);
        if status != 0 {
            return Err(net_error(&format!("NetUserSetInfo {}", self.name), status));
        }
        Ok(())
    }
}

impl Drop for LocalUser {
    fn drop(&mut self) {
        let n = wide(&self.name);
        // SAFETY: a NUL-terminated name; local machine.
        unsafe { NetUserDel(std::ptr::null(), n.as_ptr()) };
    }
}

/// This machine's NetBIOS name.
pub fn computer_name() -> String {
    std::env::var("COMPUTERNAME").expect("COMPUTERNAME is set on Windows")
}
