//! A test-side wrapper over the extern functions: options owned by Rust,
//! a host freed on drop, calls that copy and free the library's buffers.
#![allow(dead_code)]

use csi_proxy::{
    csi_proxy_buffer_free, csi_proxy_call, csi_proxy_host_free, csi_proxy_host_new, CsiProxyBuffer,
    CsiProxyHost, CsiProxyOptions, CsiProxyStr, CsiProxyStrList, CSI_PROXY_ABI_VERSION,
};

/// The options as Rust values, turned into a [`CsiProxyOptions`] per use.
#[derive(Clone, Debug)]
pub struct Owned {
    pub abi_version: u32,
    pub require_privacy: u32,
    pub kubelet_path: String,
    pub working_dirs: Vec<String>,
    pub volume_fs_type: String,
    pub allowed_services: Vec<String>,
    pub protected_services: Vec<String>,
    pub unprotected_services: Vec<String>,
    pub service_name: String,
}

/// Options with `kubelet` as the only root, everything else by default.
pub fn options(kubelet: &str) -> Owned {
    Owned {
        abi_version: CSI_PROXY_ABI_VERSION,
        require_privacy: 1,
        kubelet_path: kubelet.to_string(),
        working_dirs: Vec::new(),
        volume_fs_type: String::new(),
        allowed_services: Vec::new(),
        protected_services: Vec::new(),
        unprotected_services: Vec::new(),
        service_name: String::new(),
    }
}

fn s(v: &str) -> CsiProxyStr {
    CsiProxyStr {
        ptr: v.as_ptr(),
        len: v.len(),
    }
}

fn l(v: &[CsiProxyStr]) -> CsiProxyStrList {
    CsiProxyStrList {
        items: v.as_ptr(),
        len: v.len(),
    }
}

/// Copy a buffer of the library and free it.
fn take(out: CsiProxyBuffer) -> Vec<u8> {
    if out.ptr.is_null() {
        return Vec::new();
    }
    // SAFETY: a buffer of the library, valid for its length until freed.
    let v = unsafe { std::slice::from_raw_parts(out.ptr, out.len) }.to_vec();
    // SAFETY: freed once.
    unsafe { csi_proxy_buffer_free(out.ptr, out.len) };
    v
}

/// A host of the library, freed on drop.
pub struct Lib(*mut CsiProxyHost);

// SAFETY: the ABI promises a host may be called from any thread.
unsafe impl Send for Lib {}
// SAFETY: as above, from many threads at once.
unsafe impl Sync for Lib {}

const EMPTY: CsiProxyBuffer = CsiProxyBuffer {
    ptr: std::ptr::null_mut(),
    len: 0,
};

impl Lib {
    /// Take ownership of a host made some other way (the crate's unit
    /// tests build hosts over fakes).
    ///
    /// # Safety
    /// `host` is a live host of this library that nothing else frees.
    pub unsafe fn from_raw(host: *mut CsiProxyHost) -> Lib {
        Lib(host)
    }

    /// `csi_proxy_host_new`, or its code and message.
    pub fn open(o: &Owned) -> Result<Lib, (i32, String)> {
        let strs = |v: &[String]| v.iter().map(|x| s(x)).collect::<Vec<_>>();
        let (wd, al, pr, un) = (
            strs(&o.working_dirs),
            strs(&o.allowed_services),
            strs(&o.protected_services),
            strs(&o.unprotected_services),
        );
        let raw = CsiProxyOptions {
            abi_version: o.abi_version,
            require_privacy: o.require_privacy,
            kubelet_path: s(&o.kubelet_path),
            working_dirs: l(&wd),
            volume_fs_type: s(&o.volume_fs_type),
            allowed_services: l(&al),
            protected_services: l(&pr),
            unprotected_services: l(&un),
            service_name: s(&o.service_name),
        };
        let mut host = std::ptr::null_mut();
        let mut error = EMPTY;
        // SAFETY: every pointer is valid for the call.
        let code = unsafe { csi_proxy_host_new(&raw, &mut host, &mut error) };
        let message = take(error);
        match code {
            0 => {
                assert!(!host.is_null() && message.is_empty());
                Ok(Lib(host))
            }
            c => {
                assert!(host.is_null());
                Err((c, String::from_utf8(message).expect("UTF-8 message")))
            }
        }
    }

    /// `csi_proxy_call` with raw names: (code, response or message).
    pub fn call_bytes(&self, group: &[u8], method: &[u8], request: &[u8]) -> (i32, Vec<u8>) {
        let mut out = EMPTY;
        // SAFETY: a live host, slices valid for the call, a valid out.
        let code = unsafe {
            csi_proxy_call(
                self.0,
                group.as_ptr(),
                group.len(),
                method.as_ptr(),
                method.len(),
                request.as_ptr(),
                request.len(),
                &mut out,
            )
        };
        (code, take(out))
    }

    /// `csi_proxy_call`: (code, response or message).
    /// The host (for calls made by hand).
    pub fn raw(&self) -> *const CsiProxyHost {
        self.0
    }

    pub fn call(&self, group: &str, method: &str, request: &[u8]) -> (i32, Vec<u8>) {
        self.call_bytes(group.as_bytes(), method.as_bytes(), request)
    }

    /// A call that must succeed: the decoded response, or (code, message).
    pub fn ok<Req: prost::Message, Resp: prost::Message + Default>(
        &self,
        group: &str,
        method: &str,
        req: &Req,
    ) -> Result<Resp, (i32, String)> {
        match self.call(group, method, &req.encode_to_vec()) {
            (0, body) => Ok(Resp::decode(&body[..]).expect("the response decodes")),
            (c, m) => Err((c, String::from_utf8_lossy(&m).into_owned())),
        }
    }
}

impl Drop for Lib {
    fn drop(&mut self) {
        // SAFETY: made by csi_proxy_host_new, freed once, no call running.
        unsafe { csi_proxy_host_free(self.0) };
    }
}
