//! The C ABI: plain structs of pointers and lengths, an opaque host
//! handle, integer gRPC codes, and buffers the library allocates and the
//! caller gives back with [`csi_proxy_buffer_free`].
//!
//! Every function catches panics: a panic answers `Internal` (13) and never
//! unwinds into the caller. Strings are UTF-8 given as pointer and length
//! (no NUL terminator needed; a NULL pointer is allowed with length 0).
//! Every argument is passed as a scalar or a pointer, never a struct by
//! value (Win64 passes structs of 16 bytes by hidden reference, which loaders
//! such as Go's `syscall.SyscallN` cannot express).

use crate::library::{Failure, Library, Options};
use csi_proxy_host::HostOptions;
use csi_proxy_server::dispatch::{Code, Reply};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The version of this ABI. A caller checks [`csi_proxy_abi_version`]
/// before anything else and sets [`CsiProxyOptions::abi_version`] to the
/// version it was written for; the library refuses another.
pub const CSI_PROXY_ABI_VERSION: u32 = 1;

/// A UTF-8 string: `len` bytes at `ptr` (`ptr` may be NULL when `len` is 0).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CsiProxyStr {
    pub ptr: *const u8,
    pub len: usize,
}

/// A list of strings: `len` [`CsiProxyStr`] at `items`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CsiProxyStrList {
    pub items: *const CsiProxyStr,
    pub len: usize,
}

/// The options of a host, the binary's flags of the same names.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CsiProxyOptions {
    /// Must be [`CSI_PROXY_ABI_VERSION`].
    pub abi_version: u32,
    /// 1: SMB global mappings require privacy (`-require-privacy`, the
    /// binary's default); 0: they do not. Any other value is refused.
    pub require_privacy: u32,
    /// `-kubelet-path`: the first allowed root.
    pub kubelet_path: CsiProxyStr,
    /// `-working-dir`: more allowed roots.
    pub working_dirs: CsiProxyStrList,
    /// `-volume-fs-type` (Linux; empty: ext4).
    pub volume_fs_type: CsiProxyStr,
    /// `-allowed-services` (empty: the OS's default list; `*`: all).
    pub allowed_services: CsiProxyStrList,
    /// `-protected-services`.
    pub protected_services: CsiProxyStrList,
    /// `-unprotect-services`.
    pub unprotected_services: CsiProxyStrList,
    /// `-service-name` (empty: none): protected with its dependencies.
    pub service_name: CsiProxyStr,
}

/// A host: every API group over the confined filesystem of its roots. Safe
/// to call from any number of threads at once; freed with
/// [`csi_proxy_host_free`].
pub struct CsiProxyHost {
    library: Library,
}

/// A buffer the library allocated: `len` bytes at `ptr` (NULL when empty).
/// Give it back with [`csi_proxy_buffer_free`].
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CsiProxyBuffer {
    pub ptr: *mut u8,
    pub len: usize,
}

const INTERNAL: i32 = 13;

/// The version of this ABI ([`CSI_PROXY_ABI_VERSION`] of the library that
/// answers).
#[no_mangle]
pub extern "C" fn csi_proxy_abi_version() -> u32 {
    CSI_PROXY_ABI_VERSION
}

/// Create a host from `options`. On success returns 0 and stores the host
/// in `*host`; otherwise returns a gRPC code (3 InvalidArgument for bad
/// options) and stores its message in `*error` (when `error` is not NULL).
///
/// # Safety
/// `options` points to a valid [`CsiProxyOptions`] whose strings and lists
/// are valid for their lengths; `host` is a valid pointer; `error` is NULL
/// or a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn csi_proxy_host_new(
    options: *const CsiProxyOptions,
    host: *mut *mut CsiProxyHost,
    error: *mut CsiProxyBuffer,
) -> i32 {
    let result = catch_unwind(AssertUnwindSafe(|| {
        if options.is_null() || host.is_null() {
            return Err(invalid("options and host must not be NULL"));
        }
        // SAFETY: non-NULL and valid by the caller's contract.
        let options = unsafe { read_options(&*options) }?;
        Library::open(&options)
    }));
    match result {
        Ok(Ok(library)) => {
            // SAFETY: `host` is non-NULL (checked above) and valid.
            unsafe { *host = Box::into_raw(Box::new(CsiProxyHost { library })) };
            0
        }
        Ok(Err(f)) => {
            // SAFETY: `error` is NULL or valid by the caller's contract.
            unsafe { put(error, f.message.into_bytes()) };
            i32::from(f.code)
        }
        Err(_) => {
            // SAFETY: as above.
            unsafe { put(error, b"panic while creating the host".to_vec()) };
            INTERNAL
        }
    }
}

/// Free a host made by [`csi_proxy_host_new`] (NULL is ignored). No call
/// on it may be running or follow.
///
/// # Safety
/// `host` is NULL or a host of [`csi_proxy_host_new`] not freed before.
#[no_mangle]
pub unsafe extern "C" fn csi_proxy_host_free(host: *mut CsiProxyHost) {
    if host.is_null() {
        return;
    }
    // A panic in a destructor must not unwind into the caller either.
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: made by Box::into_raw in csi_proxy_host_new, freed once.
        drop(unsafe { Box::from_raw(host) });
    }));
}

/// Call `method` of `group` on `host` with the protobuf-encoded `request`
/// (a message of the newest version of the group, or of the version named
/// as `group/version`). Returns 0 and stores the encoded response in
/// `*out`, or returns a gRPC code and stores its UTF-8 message in `*out`.
/// Either way `*out` is the caller's to free. Unknown groups, versions and
/// methods answer 12 (Unimplemented).
///
/// # Safety
/// `host` is a live host; `group`, `method` and `request` are valid for
/// their lengths (or NULL with length 0); `out` is a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn csi_proxy_call(
    host: *const CsiProxyHost,
    group: *const u8,
    group_len: usize,
    method: *const u8,
    method_len: usize,
    request: *const u8,
    request_len: usize,
    out: *mut CsiProxyBuffer,
) -> i32 {
    if out.is_null() {
        return 3;
    }
    let reply = catch_unwind(AssertUnwindSafe(|| {
        if host.is_null() {
            return Reply::error(Code::InvalidArgument, "host must not be NULL");
        }
        // A NULL pointer with a length is a caller's bug, never an empty
        // request (disk 0, path ""), as for the options of host_new.
        for (ptr, len, what) in [
            (group, group_len, "group"),
            (method, method_len, "method"),
            (request, request_len, "request"),
        ] {
            if ptr.is_null() && len != 0 {
                return Reply::error(
                    Code::InvalidArgument,
                    format!("{what} is NULL with a length of {len}"),
                );
            }
        }
        // SAFETY: valid for their lengths by the caller's contract.
        let (group, method, request) = unsafe {
            (
                bytes(group, group_len),
                bytes(method, method_len),
                bytes(request, request_len),
            )
        };
        let (Ok(group), Ok(method)) = (std::str::from_utf8(group), std::str::from_utf8(method))
        else {
            return Reply::error(Code::InvalidArgument, "group and method must be UTF-8");
        };
        // SAFETY: a live host by the caller's contract.
        unsafe { &*host }.library.call(group, method, request)
    }))
    .unwrap_or_else(|_| Reply::error(Code::Internal, "panic in the host operation"));
    let code = i32::from(reply.code);
    let payload = if reply.code == Code::Ok {
        reply.body
    } else {
        reply.message.into_bytes()
    };
    // SAFETY: `out` is non-NULL and valid.
    unsafe { put(out, payload) };
    code
}

/// Free a buffer the library stored in a [`CsiProxyBuffer`] (NULL is
/// ignored). The buffer's size is kept with it: `len` may be the buffer's
/// `len` or 0, and the whole buffer is freed either way.
///
/// # Safety
/// `ptr` is NULL or the `ptr` of one buffer of this library, freed once.
#[no_mangle]
pub unsafe extern "C" fn csi_proxy_buffer_free(ptr: *mut u8, len: usize) {
    if ptr.is_null() {
        return;
    }
    // SAFETY: `ptr` came from put: HEADER bytes after the start of a boxed
    // slice whose first HEADER bytes hold the payload's length.
    unsafe {
        let start = ptr.sub(HEADER);
        let stored = start.cast::<usize>().read_unaligned();
        debug_assert!(
            len == 0 || len == stored,
            "csi_proxy_buffer_free: len {len} is not the buffer's {stored} (or 0)"
        );
        drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
            start,
            HEADER + stored,
        )));
    }
}

/// Bytes before a buffer's payload holding its length.
const HEADER: usize = std::mem::size_of::<usize>();

fn invalid(message: impl Into<String>) -> Failure {
    Failure {
        code: Code::InvalidArgument,
        message: message.into(),
    }
}

/// Store `bytes` in `*out` as a buffer of this library (NULL when empty).
///
/// # Safety
/// `out` is NULL (nothing is stored) or valid for a write.
unsafe fn put(out: *mut CsiProxyBuffer, bytes: Vec<u8>) {
    if out.is_null() {
        return;
    }
    let buffer = if bytes.is_empty() {
        CsiProxyBuffer {
            ptr: std::ptr::null_mut(),
            len: 0,
        }
    } else {
        let len = bytes.len();
        let mut all = Vec::with_capacity(HEADER + len);
        all.extend_from_slice(&len.to_ne_bytes());
        all.extend_from_slice(&bytes);
        let start = Box::into_raw(all.into_boxed_slice()).cast::<u8>();
        // SAFETY: the allocation is HEADER + len bytes long.
        let ptr = unsafe { start.add(HEADER) };
        CsiProxyBuffer { ptr, len }
    };
    // SAFETY: valid for a write by the contract.
    unsafe { out.write(buffer) };
}

/// The bytes at `ptr` (an empty slice for NULL or length 0).
///
/// # Safety
/// `ptr` is NULL or valid for `len` bytes that outlive the returned slice.
unsafe fn bytes<'a>(ptr: *const u8, len: usize) -> &'a [u8] {
    if ptr.is_null() || len == 0 {
        return &[];
    }
    // SAFETY: valid for `len` bytes by the contract.
    unsafe { std::slice::from_raw_parts(ptr, len) }
}

/// A string field of the options.
///
/// # Safety
/// As [`bytes`] for `s.ptr` and `s.len`.
unsafe fn string(s: CsiProxyStr, what: &str) -> Result<String, Failure> {
    if s.ptr.is_null() && s.len != 0 {
        return Err(invalid(format!("{what}: NULL with a length")));
    }
    // SAFETY: by the contract.
    let b = unsafe { bytes(s.ptr, s.len) };
    String::from_utf8(b.to_vec()).map_err(|_| invalid(format!("{what}: not UTF-8")))
}

/// A list field of the options.
///
/// # Safety
/// `l.items` is NULL or valid for `l.len` strings, each valid as [`string`].
unsafe fn list(l: CsiProxyStrList, what: &str) -> Result<Vec<String>, Failure> {
    if l.items.is_null() {
        return match l.len {
            0 => Ok(Vec::new()),
            _ => Err(invalid(format!("{what}: NULL with a length"))),
        };
    }
    // SAFETY: valid for `len` items by the contract.
    let items = unsafe { std::slice::from_raw_parts(l.items, l.len) };
    items
        .iter()
        // SAFETY: every item is valid by the contract.
        .map(|s| unsafe { string(*s, what) })
        .collect()
}

/// The options of `o`, checked.
///
/// # Safety
/// Every string and list of `o` is valid for its length.
unsafe fn read_options(o: &CsiProxyOptions) -> Result<Options, Failure> {
    if o.abi_version != CSI_PROXY_ABI_VERSION {
        return Err(invalid(format!(
            "the caller was written for ABI version {}, this library has version {}",
            o.abi_version, CSI_PROXY_ABI_VERSION
        )));
    }
    let require_privacy = match o.require_privacy {
        0 => false,
        1 => true,
        n => return Err(invalid(format!("require_privacy must be 0 or 1, not {n}"))),
    };
    // SAFETY (all below): valid by the contract.
    let volume_fs_type = unsafe { string(o.volume_fs_type, "volume_fs_type") }?;
    let service_name = unsafe { string(o.service_name, "service_name") }?;
    Ok(Options {
        kubelet_path: unsafe { string(o.kubelet_path, "kubelet_path") }?,
        working_dirs: unsafe { list(o.working_dirs, "working_dirs") }?,
        host: HostOptions {
            volume_fs_type: if volume_fs_type.is_empty() {
                HostOptions::default().volume_fs_type
            } else {
                volume_fs_type
            },
            allowed_services: unsafe { list(o.allowed_services, "allowed_services") }?,
            require_privacy,
            // Library mode keeps the safe default: a mapping without a
            // user name is refused (no ABI field turns it on).
            smb_allow_no_credentials: false,
            protected_services: unsafe { list(o.protected_services, "protected_services") }?,
            unprotected_services: unsafe { list(o.unprotected_services, "unprotected_services") }?,
            service_name: (!service_name.is_empty()).then_some(service_name),
            // Library mode keeps the safe default: nothing unidentified is
            // written over.
            overwrite_unidentified_content: false,
            // No records: a format cut short is refused on retry.
            state_dir: None,
            state_dir_handle: None,
        },
    })
}

#[cfg(test)]
impl CsiProxyHost {
    /// A handle over an already built library (tests of the boundary with
    /// hosts the options cannot make, e.g. one whose operation panics).
    pub(crate) fn boxed(library: Library) -> *mut CsiProxyHost {
        Box::into_raw(Box::new(CsiProxyHost { library }))
    }
}
