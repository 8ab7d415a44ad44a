//! Windows named-pipe listener: one pipe per API group/version,
//! `\\.\pipe\csi-proxy-<group>-<version>`, protected by a DACL parsed from SDDL.
//!
//! All the unsafe code of the pipe transport lives in this module.
//!
//! Accept-loop rule: a listening instance always exists. [`PipeListener::bind`]
//! creates the first one (so start-up fails when the name is taken), and
//! [`PipeListener::accept`] creates the next instance before it hands off the
//! connected one, so a client racing the hand-off finds a free instance instead
//! of `ERROR_PIPE_BUSY` or `ERROR_FILE_NOT_FOUND`.
//!
//! Under wine the descriptor is stored and can be read back, but neither the
//! DACL nor `FILE_FLAG_FIRST_PIPE_INSTANCE` is enforced; both need real Windows.

use std::ffi::c_void;
use std::fmt;
use std::io;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use std::ptr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::windows::named_pipe::{NamedPipeServer, PipeMode, ServerOptions};
use windows_sys::Win32::Foundation::{
    LocalFree, ERROR_ACCESS_DENIED, ERROR_PIPE_BUSY, FALSE, INVALID_HANDLE_VALUE,
};
use windows_sys::Win32::Security::Authorization::{
    ConvertStringSecurityDescriptorToSecurityDescriptorW, GetSecurityInfo, SDDL_REVISION_1,
    SE_KERNEL_OBJECT,
};
use windows_sys::Win32::Security::{
    AclSizeInformation, GetAclInformation, GetLengthSid, GetSecurityDescriptorDacl,
    GetSecurityDescriptorOwner, ACL, ACL_SIZE_INFORMATION, DACL_SECURITY_INFORMATION,
    OWNER_SECURITY_INFORMATION, PSECURITY_DESCRIPTOR, PSID, SECURITY_ATTRIBUTES,
};
use windows_sys::Win32::Storage::FileSystem::{
    CreateFileW, OPEN_EXISTING, READ_CONTROL, SECURITY_IDENTIFICATION, SECURITY_SQOS_PRESENT,
};
use windows_sys::Win32::System::Pipes::WaitNamedPipeW;

/// Prefix every local pipe name starts with.
const PIPE_PREFIX: &str = r"\\.\pipe\";

/// Memory that a Win32 function allocated with `LocalAlloc` and handed to us.
struct LocalMem(*mut c_void);

impl Drop for LocalMem {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: the pointer came from a Win32 function documented to
            // return LocalAlloc'd memory to be released with LocalFree, and this
            // is its only owner; it is freed exactly once, here.
            unsafe { LocalFree(self.0) };
        }
    }
}

/// An owned security descriptor parsed from SDDL (`LocalFree` on drop;
/// `Send + Sync`). It must carry a DACL: a descriptor without one, or with a
/// NULL DACL, would give everyone full access to the pipe.
pub struct SecurityDescriptor {
    mem: LocalMem,
    sddl: String,
    /// The service's own SID, trusted like SYSTEM by the pipe rule; the
    /// rule is checked again on what the first instance really got.
    service_sid: Option<String>,
}

// SAFETY: the descriptor is a self-relative block owned exclusively by this
// value and never written after creation; Win32 only reads it, which is safe
// from any thread, and LocalFree may be called from any thread.
unsafe impl Send for SecurityDescriptor {}
// SAFETY: as above: shared access is read-only.
unsafe impl Sync for SecurityDescriptor {}

impl SecurityDescriptor {
    /// Parses `sddl` with `ConvertStringSecurityDescriptorToSecurityDescriptorW`
    /// (`SDDL_REVISION_1`). Fails with `InvalidInput` when the string is not
    /// valid SDDL or has no (or a NULL) DACL.
    pub fn from_sddl(sddl: &str) -> io::Result<Self> {
        let wide = to_wide(sddl)?;
        let mut raw: PSECURITY_DESCRIPTOR = ptr::null_mut();
        // SAFETY: `wide` is NUL-terminated and outlives the call; `raw` is a
        // valid out pointer; the size out pointer is optional (null).
        let ok = unsafe {
            ConvertStringSecurityDescriptorToSecurityDescriptorW(
                wide.as_ptr(),
                SDDL_REVISION_1,
                &mut raw,
                ptr::null_mut(),
            )
        };
        if ok == FALSE {
            let err = io::Error::last_os_error();
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("invalid security descriptor (SDDL) {sddl:?}: {err}"),
            ));
        }
        let sd = Self {
            mem: LocalMem(raw),
            sddl: sddl.to_owned(),
            service_sid: None,
        };
        // NO_ACCESS_CONTROL asks for a NULL DACL (everyone, full access).
        // Refuse it by name too: not every implementation (wine) reports the
        // parsed DACL as NULL.
        if sd.dacl()?.is_null() || sddl.to_ascii_uppercase().contains("NO_ACCESS_CONTROL") {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "security descriptor {sddl:?} has no DACL (\"D:...\"): it would give everyone \
                     full access"
                ),
            ));
        }
        Ok(sd)
    }

    /// Parses `sddl` like [`SecurityDescriptor::from_sddl`] and checks the
    /// result against the pipe rule ([`super::dacl`]): the owner and DACL
    /// walked are those of this very descriptor, the one every instance is
    /// created with. `service_sid` is the service's own SID, trusted like
    /// SYSTEM. A refused descriptor is `InvalidInput`, naming the ACE.
    pub fn for_pipes(sddl: &str, service_sid: Option<&str>) -> io::Result<Self> {
        let mut sd = Self::from_sddl(sddl)?;
        sd.service_sid = service_sid.map(str::to_owned);
        // SAFETY: both point into the descriptor owned by `sd`, alive here.
        let (owner, dacl) = unsafe { (sd.owner_bytes()?, acl_bytes(sd.dacl()?)?) };
        super::dacl::check_pipe_security(owner, dacl, service_sid).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("security descriptor {sddl:?} refused for the pipes: {e}"),
            )
        })?;
        Ok(sd)
    }

    /// The owner SID of the descriptor, in its binary form, if it has one.
    ///
    /// # Safety
    ///
    /// The slice borrows the descriptor: it must not outlive `self`.
    unsafe fn owner_bytes(&self) -> io::Result<Option<&[u8]>> {
        let mut owner: PSID = ptr::null_mut();
        let mut defaulted = FALSE;
        // SAFETY: `self.mem` holds a valid descriptor; out pointers are locals.
        if unsafe { GetSecurityDescriptorOwner(self.mem.0, &mut owner, &mut defaulted) } == FALSE {
            return Err(io::Error::last_os_error());
        }
        if owner.is_null() {
            return Ok(None);
        }
        // SAFETY: `owner` points at a valid SID inside the descriptor
        // (ConvertStringSecurityDescriptor... built it), whose length
        // GetLengthSid reads from its header.
        Ok(Some(unsafe {
            std::slice::from_raw_parts(owner.cast::<u8>(), GetLengthSid(owner) as usize)
        }))
    }

    /// The SDDL this descriptor was parsed from.
    pub fn sddl(&self) -> &str {
        &self.sddl
    }

    /// Number of ACEs in the DACL (for tests).
    pub fn dacl_ace_count(&self) -> io::Result<u32> {
        // SAFETY: the DACL pointer points into the descriptor owned by `self`,
        // which is alive for the call.
        unsafe { acl_ace_count(self.dacl()?) }
    }

    /// The DACL inside the descriptor: null when absent or NULL.
    fn dacl(&self) -> io::Result<*mut ACL> {
        let mut present = FALSE;
        let mut defaulted = FALSE;
        let mut acl: *mut ACL = ptr::null_mut();
        // SAFETY: `self.mem` holds a valid descriptor for the life of `self`;
        // the out pointers are valid locals.
        let ok = unsafe {
            GetSecurityDescriptorDacl(self.mem.0, &mut present, &mut acl, &mut defaulted)
        };
        if ok == FALSE {
            return Err(io::Error::last_os_error());
        }
        Ok(if present == FALSE {
            ptr::null_mut()
        } else {
            acl
        })
    }
}

impl fmt::Debug for SecurityDescriptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecurityDescriptor")
            .field("sddl", &self.sddl)
            .finish()
    }
}

/// Number of ACEs in `acl`; a null `acl` (a NULL DACL: everyone has full
/// access) is reported as an error.
///
/// # Safety
///
/// `acl` must be null or point at a valid ACL that stays alive for the call.
unsafe fn acl_ace_count(acl: *const ACL) -> io::Result<u32> {
    if acl.is_null() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the security descriptor has a NULL or no DACL (everyone has full access)",
        ));
    }
    let mut info = ACL_SIZE_INFORMATION {
        AceCount: 0,
        AclBytesInUse: 0,
        AclBytesFree: 0,
    };
    // SAFETY: the caller guarantees `acl` is valid; `info` is a writable
    // ACL_SIZE_INFORMATION of exactly the size passed.
    let ok = unsafe {
        GetAclInformation(
            acl,
            (&mut info as *mut ACL_SIZE_INFORMATION).cast(),
            size_of::<ACL_SIZE_INFORMATION>() as u32,
            AclSizeInformation,
        )
    };
    if ok == FALSE {
        return Err(io::Error::last_os_error());
    }
    Ok(info.AceCount)
}

/// The bytes of `acl` (its header's `AclSize`).
///
/// # Safety
///
/// `acl` must be null or point at a valid ACL; the slice must not outlive it.
unsafe fn acl_bytes<'a>(acl: *const ACL) -> io::Result<&'a [u8]> {
    if acl.is_null() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the security descriptor has a NULL or no DACL (everyone has full access)",
        ));
    }
    // SAFETY: a valid ACL starts with its header, whose AclSize counts the
    // header and every ACE.
    let size = usize::from(unsafe { (*acl).AclSize });
    // SAFETY: as above, `size` bytes from `acl` are the ACL.
    Ok(unsafe { std::slice::from_raw_parts(acl.cast::<u8>(), size) })
}

/// Listens on one pipe name: `\\.\pipe\csi-proxy-<group>-<version>`.
///
/// Must be created and used inside a Tokio runtime with I/O enabled.
pub struct PipeListener {
    name: String,
    sd: Arc<SecurityDescriptor>,
    /// The instance clients connect to next. `None` only after creating a
    /// replacement instance failed; the next `accept` retries.
    listening: Option<NamedPipeServer>,
}

impl PipeListener {
    /// Creates the FIRST instance of the pipe (`FILE_FLAG_FIRST_PIPE_INSTANCE`:
    /// fails with `AddrInUse` if any process already owns the name), rejecting
    /// remote clients, in byte mode, with unlimited instances and `sd` as its
    /// security descriptor.
    pub fn bind(name: &str, sd: Arc<SecurityDescriptor>) -> io::Result<Self> {
        let is_local_pipe = name
            .get(..PIPE_PREFIX.len())
            .is_some_and(|p| p.eq_ignore_ascii_case(PIPE_PREFIX))
            && name.len() > PIPE_PREFIX.len();
        if !is_local_pipe {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{name:?} is not a local pipe name ({PIPE_PREFIX}<name>)"),
            ));
        }
        let first = create_instance(name, &sd, true).map_err(|e| bind_error(name, e))?;
        // The descriptor asked for is not always the one applied (no `O:`:
        // Windows applies the token's default owner). Judge what the first
        // instance really got; on refusal `first` is dropped (closed).
        check_applied(&first, sd.service_sid.as_deref()).map_err(|e| {
            io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("pipe {name} refused as created with {:?}: {e}", sd.sddl()),
            )
        })?;
        Ok(Self {
            name: name.to_owned(),
            sd,
            listening: Some(first),
        })
    }

    /// Waits for a client on the listening instance, creates the next instance
    /// and then returns the connected one.
    ///
    /// A client that connected between creation and this call (or connected
    /// and already left) counts as connected: tokio maps
    /// `ERROR_PIPE_CONNECTED` and `ERROR_NO_DATA` to success; the latter gives
    /// a connection that reads EOF or fails on first use.
    ///
    /// Errors are per connection attempt: the caller should log them, pause
    /// briefly and call `accept` again; the listener stays usable. If creating
    /// the next instance fails after a client connected, the connection is
    /// still returned (the failure is logged) and the next call retries the
    /// creation, returning its error if it fails again.
    ///
    /// Cancel safe: if the future is dropped while waiting, the listening
    /// instance is kept and the next call resumes waiting on it.
    pub async fn accept(&mut self) -> io::Result<NamedPipeServer> {
        if self.listening.is_none() {
            self.listening = Some(self.recreate()?);
        }
        let listening = self
            .listening
            .as_mut()
            .expect("a listening instance was set above");
        let connected = listening.connect().await;
        // The instance is now connected or broken: replace it either way,
        // before handing it off or dropping it.
        let next = match create_instance(&self.name, &self.sd, false) {
            Ok(next) => Some(next),
            Err(err) => {
                tracing::warn!(pipe = %self.name, error = %err, "cannot create the next pipe instance");
                None
            }
        };
        let current = std::mem::replace(&mut self.listening, next)
            .expect("a listening instance was set above");
        connected.map(|()| current)
    }

    /// Re-creates the listening instance after creating it failed. Once our
    /// connected instances have closed, the name may be free and anyone may
    /// have taken it: so first try `FILE_FLAG_FIRST_PIPE_INSTANCE` (succeeds
    /// whenever no instance of the name is alive, ours or not). If the name
    /// is alive, join it. Either way the owner and DACL the instance really
    /// got must pass the pipe rule (a squatter's pipe is refused, closed).
    fn recreate(&self) -> io::Result<NamedPipeServer> {
        let pipe = match create_instance(&self.name, &self.sd, true) {
            Ok(pipe) => pipe,
            Err(_) => create_instance(&self.name, &self.sd, false)?,
        };
        check_applied(&pipe, self.sd.service_sid.as_deref()).map_err(|e| {
            io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("pipe {} is not ours any more: {e}", self.name),
            )
        })?;
        Ok(pipe)
    }

    /// The pipe name, `\\.\pipe\...`.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl fmt::Debug for PipeListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PipeListener")
            .field("name", &self.name)
            .field("sddl", &self.sd.sddl())
            .field("listening", &self.listening.is_some())
            .finish()
    }
}

/// Creates one server instance of pipe `name` protected by `sd`.
fn create_instance(
    name: &str,
    sd: &SecurityDescriptor,
    first: bool,
) -> io::Result<NamedPipeServer> {
    let mut options = ServerOptions::new();
    options
        .first_pipe_instance(first)
        .reject_remote_clients(true)
        .pipe_mode(PipeMode::Byte);
    // tokio's default instance limit is already PIPE_UNLIMITED_INSTANCES.
    let mut attributes = SECURITY_ATTRIBUTES {
        nLength: size_of::<SECURITY_ATTRIBUTES>() as u32,
        lpSecurityDescriptor: sd.mem.0,
        bInheritHandle: FALSE,
    };
    // SAFETY: `attributes` is a valid SECURITY_ATTRIBUTES that lives for the
    // whole call; its descriptor is owned by `sd`, borrowed for the call, and
    // only read (CreateNamedPipeW copies it into the new pipe object).
    unsafe {
        options.create_with_security_attributes_raw(
            name,
            (&mut attributes as *mut SECURITY_ATTRIBUTES).cast(),
        )
    }
}

/// Reads the owner and DACL of a live instance back through its server
/// handle and checks them against the pipe rule ([`super::dacl`]).
fn check_applied(pipe: &NamedPipeServer, service_sid: Option<&str>) -> io::Result<()> {
    let mut owner: PSID = ptr::null_mut();
    let mut dacl: *mut ACL = ptr::null_mut();
    let mut raw_sd: PSECURITY_DESCRIPTOR = ptr::null_mut();
    // SAFETY: `pipe` owns a live server handle (created by us, so it has
    // READ_CONTROL); the out pointers are valid locals, the unused ones null.
    let status = unsafe {
        GetSecurityInfo(
            pipe.as_raw_handle(),
            SE_KERNEL_OBJECT,
            OWNER_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION,
            &mut owner,
            ptr::null_mut(),
            &mut dacl,
            ptr::null_mut(),
            &mut raw_sd,
        )
    };
    // On success `raw_sd` is a LocalAlloc'd descriptor `owner`/`dacl` point into.
    let _sd = LocalMem(raw_sd);
    if status != 0 {
        return Err(io::Error::from_raw_os_error(status as i32));
    }
    if owner.is_null() {
        return Err(io::Error::other("the pipe has no owner to check"));
    }
    // SAFETY: `owner` points at a valid SID inside the descriptor owned by
    // `_sd`, alive until the end of this function; `dacl` is null or a valid
    // ACL inside it too (null is reported by `acl_bytes`).
    let (owner, dacl) = unsafe {
        (
            std::slice::from_raw_parts(owner.cast::<u8>(), GetLengthSid(owner) as usize),
            acl_bytes(dacl)?,
        )
    };
    super::dacl::check_pipe_security(Some(owner), dacl, service_sid).map_err(io::Error::other)
}

/// Turns the failure to create the first instance into a clear error.
fn bind_error(name: &str, err: io::Error) -> io::Error {
    // With FILE_FLAG_FIRST_PIPE_INSTANCE an existing name gives
    // ERROR_ACCESS_DENIED; an existing pipe with all instances taken gives
    // ERROR_PIPE_BUSY.
    match err.raw_os_error().and_then(|code| u32::try_from(code).ok()) {
        Some(ERROR_ACCESS_DENIED | ERROR_PIPE_BUSY) => io::Error::new(
            io::ErrorKind::AddrInUse,
            format!("pipe {name} already exists: is another csi-proxy running? ({err})"),
        ),
        _ => io::Error::new(err.kind(), format!("cannot create pipe {name}: {err}")),
    }
}

/// Reads back the number of ACEs in the DACL of a live pipe, through a client
/// handle opened with `READ_CONTROL` only (for tests under wine).
///
/// Opening the handle connects to a listening instance like any client (the
/// server's `accept` then returns a connection that is already closed).
/// Blocking: it waits up to 5 s for a free instance; call it from
/// `spawn_blocking` in async code.
pub fn pipe_dacl_ace_count(name: &str) -> io::Result<u32> {
    let wide = to_wide(name)?;
    let deadline = Instant::now() + Duration::from_secs(5);
    let handle = loop {
        // SAFETY: `wide` is NUL-terminated and outlives the call; no security
        // attributes and no template handle are passed.
        let raw = unsafe {
            CreateFileW(
                wide.as_ptr(),
                READ_CONTROL,
                0,
                ptr::null(),
                OPEN_EXISTING,
                SECURITY_SQOS_PRESENT | SECURITY_IDENTIFICATION,
                ptr::null_mut(),
            )
        };
        if raw != INVALID_HANDLE_VALUE {
            // SAFETY: `raw` is a valid handle just returned to us and owned by
            // nothing else; OwnedHandle closes it exactly once.
            break unsafe { OwnedHandle::from_raw_handle(raw) };
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(ERROR_PIPE_BUSY as i32) || Instant::now() >= deadline {
            return Err(err);
        }
        // SAFETY: `wide` is NUL-terminated and outlives the call. The result
        // does not matter: the loop retries the open until the deadline.
        unsafe { WaitNamedPipeW(wide.as_ptr(), 100) };
    };

    let mut dacl: *mut ACL = ptr::null_mut();
    let mut raw_sd: PSECURITY_DESCRIPTOR = ptr::null_mut();
    // SAFETY: `handle` is a live handle opened with READ_CONTROL; the out
    // pointers are valid locals, the unused ones are null as allowed.
    let status = unsafe {
        GetSecurityInfo(
            handle.as_raw_handle(),
            SE_KERNEL_OBJECT,
            DACL_SECURITY_INFORMATION,
            ptr::null_mut(),
            ptr::null_mut(),
            &mut dacl,
            ptr::null_mut(),
            &mut raw_sd,
        )
    };
    // On success `raw_sd` is a LocalAlloc'd descriptor that `dacl` points into.
    let sd = LocalMem(raw_sd);
    if status != 0 {
        return Err(io::Error::from_raw_os_error(status as i32));
    }
    // SAFETY: `dacl` is null or points into the descriptor owned by `sd`,
    // which is alive for the call.
    let count = unsafe { acl_ace_count(dacl) };
    drop(sd);
    count
}

/// `s` as a NUL-terminated UTF-16 string; interior NULs are rejected.
fn to_wide(s: &str) -> io::Result<Vec<u16>> {
    Ok(csi_proxy_host::wide::nul_terminated(s)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::windows::named_pipe::{ClientOptions, NamedPipeClient};

    const TWO_ACES: &str = "O:BAD:P(A;;GA;;;BA)(A;;GA;;;SY)";

    fn unique_name() -> String {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        format!(
            r"\\.\pipe\csi-proxy-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        )
    }

    fn sd(sddl: &str) -> Arc<SecurityDescriptor> {
        Arc::new(SecurityDescriptor::from_sddl(sddl).expect("valid SDDL"))
    }

    /// Opens a client, retrying while every instance is busy.
    async fn open_client(name: &str) -> NamedPipeClient {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match ClientOptions::new().open(name) {
                Ok(client) => return client,
                Err(e)
                    if e.raw_os_error() == Some(ERROR_PIPE_BUSY as i32)
                        && Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Err(e) => panic!("cannot open {name}: {e}"),
            }
        }
    }

    /// Client side of a ping: sends `ping`, expects `pong`.
    async fn ping(client: &mut NamedPipeClient) {
        client.write_all(b"ping").await.unwrap();
        let mut buf = [0u8; 4];
        client.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"pong");
    }

    /// Server side of a ping: expects `ping`, answers `pong`.
    async fn pong(conn: &mut NamedPipeServer) {
        let mut buf = [0u8; 4];
        conn.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ping");
        conn.write_all(b"pong").await.unwrap();
    }

    #[test]
    fn sddl_with_two_aces() {
        let sd = SecurityDescriptor::from_sddl(TWO_ACES).unwrap();
        assert_eq!(sd.dacl_ace_count().unwrap(), 2);
        assert_eq!(sd.sddl(), TWO_ACES);
        let sd = SecurityDescriptor::from_sddl("D:P(A;;GA;;;SY)").unwrap();
        assert_eq!(sd.dacl_ace_count().unwrap(), 1);
    }

    #[test]
    fn invalid_sddl_is_an_error() {
        for sddl in ["not sddl", "D:P(A;;GA;;;NOSUCHSID)", "D:P(X;;GA;;;SY)"] {
            let err = SecurityDescriptor::from_sddl(sddl).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{sddl}: {err}");
            assert!(err.to_string().contains(sddl), "{err}");
        }
        let err = SecurityDescriptor::from_sddl("D:P\0(A;;GA;;;SY)").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn sddl_without_dacl_is_rejected() {
        for sddl in ["O:BAG:BA", "D:NO_ACCESS_CONTROL"] {
            let err = SecurityDescriptor::from_sddl(sddl).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{sddl}: {err}");
            assert!(err.to_string().contains("no DACL"), "{err}");
        }
    }

    #[test]
    fn pipes_refuse_a_dacl_that_lets_others_create_instances() {
        let ours = super::super::dacl::service_sid("csiproxy");
        for (sddl, ace) in [
            (
                "D:P(A;;GA;;;SY)(A;;GA;;;BA)(A;;GRGW;;;AU)",
                "ACE #2 (A;;0xc0000000;;;S-1-5-11",
            ),
            (
                "D:P(A;;GA;;;SY)(A;;FW;;;WD)",
                "ACE #1 (A;;0x120116;;;S-1-1-0",
            ),
            ("D:P(A;;0x4;;;BU)", "ACE #0 (A;;0x4;;;S-1-5-32-545"),
            (
                "D:P(A;;GA;;;SY)(A;;WD;;;IU)",
                "ACE #1 (A;;0x40000;;;S-1-5-4",
            ),
            (
                "D:P(A;;GA;;;SY)(A;;GA;;;S-1-5-80-1-2-3-4-5)",
                "ACE #1 (A;;0x10000000;;;S-1-5-80-1-2-3-4-5",
            ),
        ] {
            let err = SecurityDescriptor::for_pipes(sddl, Some(&ours)).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{sddl}: {err}");
            assert!(err.to_string().contains(ace), "{sddl}: {err}");
        }
        let err = SecurityDescriptor::for_pipes("O:AUD:P(A;;GA;;;SY)", None).unwrap_err();
        assert!(err.to_string().contains("owner S-1-5-11"), "{err}");
        let service = format!("O:SYD:P(A;;GA;;;SY)(A;;GA;;;BA)(A;;GA;;;{ours})");
        for sddl in [
            TWO_ACES,
            "D:P(A;;GA;;;SY)(A;;0x12019b;;;AU)(D;;GA;;;WD)",
            &service,
        ] {
            SecurityDescriptor::for_pipes(sddl, Some(&ours)).unwrap();
        }
    }

    #[test]
    fn security_descriptor_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<SecurityDescriptor>();
        check::<PipeListener>();
    }

    #[test]
    fn taken_name_is_reported_clearly() {
        let err = bind_error(
            r"\\.\pipe\x",
            io::Error::from_raw_os_error(ERROR_ACCESS_DENIED as i32),
        );
        assert_eq!(err.kind(), io::ErrorKind::AddrInUse);
        assert!(
            err.to_string()
                .starts_with(r"pipe \\.\pipe\x already exists: is another csi-proxy running?"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn bind_rejects_names_outside_the_pipe_namespace() {
        for name in [r"C:\pipe\x", r"\\.\pipe\", "csi-proxy-disk-v1"] {
            let err = PipeListener::bind(name, sd(TWO_ACES)).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{name}");
        }
    }

    #[tokio::test]
    async fn second_first_instance_fails() {
        let name = unique_name();
        let _first = PipeListener::bind(&name, sd(TWO_ACES)).unwrap();
        match PipeListener::bind(&name, sd(TWO_ACES)) {
            Err(err) => {
                assert_eq!(err.kind(), io::ErrorKind::AddrInUse, "{err}");
                assert!(err.to_string().contains("already exists"), "{err}");
            }
            // wine does not enforce FILE_FLAG_FIRST_PIPE_INSTANCE.
            Ok(_) => eprintln!("note: FILE_FLAG_FIRST_PIPE_INSTANCE not enforced (wine)"),
        }
    }

    #[tokio::test]
    async fn client_and_server_exchange_bytes() {
        let name = unique_name();
        let mut listener = PipeListener::bind(&name, sd(TWO_ACES)).unwrap();
        assert_eq!(listener.name(), name);
        let server = tokio::spawn(async move {
            let mut conn = listener.accept().await.unwrap();
            pong(&mut conn).await;
            conn // kept open until the client has read the answer
        });
        let mut client = open_client(&name).await;
        ping(&mut client).await;
        drop(server.await.unwrap());
    }

    #[tokio::test]
    async fn consecutive_clients() {
        let name = unique_name();
        let mut listener = PipeListener::bind(&name, sd(TWO_ACES)).unwrap();
        for _ in 0..3 {
            let mut client = open_client(&name).await;
            let mut conn = listener.accept().await.unwrap();
            tokio::join!(ping(&mut client), pong(&mut conn));
            // (No EOF check after the server closes: wine does not deliver
            // one to the client.)
        }
    }

    #[tokio::test]
    async fn next_instance_exists_before_hand_off() {
        let name = unique_name();
        let mut listener = PipeListener::bind(&name, sd(TWO_ACES)).unwrap();
        let mut first_client = ClientOptions::new().open(&name).unwrap();
        let mut first = listener.accept().await.unwrap();
        // No accept is pending: only the instance created by the previous
        // accept can take this client, so there is no retry here.
        let mut second_client = ClientOptions::new().open(&name).unwrap();
        let mut second = listener.accept().await.unwrap();
        tokio::join!(ping(&mut second_client), pong(&mut second));
        tokio::join!(ping(&mut first_client), pong(&mut first));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_clients() {
        const CLIENTS: usize = 16;
        let name = unique_name();
        let mut listener = PipeListener::bind(&name, sd(TWO_ACES)).unwrap();
        let server = tokio::spawn(async move {
            let mut served = tokio::task::JoinSet::new();
            for _ in 0..CLIENTS {
                let mut conn = listener.accept().await.unwrap();
                served.spawn(async move {
                    pong(&mut conn).await;
                    conn
                });
            }
            served.join_all().await
        });
        let mut clients = tokio::task::JoinSet::new();
        for _ in 0..CLIENTS {
            let name = name.clone();
            clients.spawn(async move {
                let mut client = open_client(&name).await;
                ping(&mut client).await;
            });
        }
        clients.join_all().await;
        assert_eq!(server.await.unwrap().len(), CLIENTS);
    }

    #[tokio::test]
    async fn dacl_read_back_from_live_pipe() {
        for (sddl, aces) in [
            (TWO_ACES, 2),
            // A client grant the pipe rule allows (no FILE_CREATE_PIPE_INSTANCE).
            ("O:SYD:P(A;;GA;;;SY)(A;;GA;;;BA)(A;;0x12019b;;;AU)", 3),
        ] {
            let name = unique_name();
            let mut listener = PipeListener::bind(&name, sd(sddl)).unwrap();
            let probe = name.clone();
            let count = tokio::task::spawn_blocking(move || pipe_dacl_ace_count(&probe))
                .await
                .unwrap()
                .unwrap();
            assert_eq!(count, aces, "{sddl}");
            // The probe was a client (like the Go client's idle existence
            // check): its closed connection comes out of accept, and the
            // listener keeps serving.
            let t = Duration::from_secs(10);
            let _probe_conn = tokio::time::timeout(t, listener.accept())
                .await
                .expect("accept probe")
                .unwrap();
            let mut client = open_client(&name).await;
            let mut conn = tokio::time::timeout(t, listener.accept())
                .await
                .expect("accept")
                .unwrap();
            tokio::join!(ping(&mut client), pong(&mut conn));
        }
    }

    #[test]
    fn dacl_read_back_of_missing_pipe_fails() {
        let err = pipe_dacl_ace_count(&unique_name()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound, "{err}");
    }
}
