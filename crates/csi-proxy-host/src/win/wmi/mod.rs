//! WMI on small pools of COM worker threads, one per group.
//!
//! COM objects belong to the thread (apartment) that made them, and a WMI
//! connection costs tens of milliseconds, so WMI work runs on dedicated OS
//! threads, each of which initialises COM (multi-threaded apartment) once
//! and keeps its own warm `IWbemServices` per namespace ([`Wmi`]). Each
//! group (SMB, iSCSI, System, storage) has its own [`WmiWorker`] (`pool`):
//! [`WmiWorker::call`] sends a closure `FnOnce(&Wmi) -> Result<T>` and
//! waits for its answer no longer than the call's deadline. The first
//! thread starts with the first call (a host that never needs WMI never
//! starts COM); another starts when a call finds every thread busy, up to
//! the pool's size, so one long call (a format of a large disk) does not
//! hold up the calls for other disks; a thread stuck past its caller's
//! deadline is set aside and replaced.
//!
//! Inside a job every WMI wait ends at the job's deadline
//! ([`Wmi::deadline`]): queries are semisynchronous (`ExecQuery` returns at
//! once, `IEnumWbemClassObject::Next` waits with a timeout) and so are
//! method calls (`ExecMethod` returns an `IWbemCallResult`, polled with
//! timeouts); a wait that reaches the deadline is
//! [`Error::DeadlineExceeded`]. `GetObject` (class definitions, one
//! instance by key), `PutInstance`, `DeleteInstance` and `ConnectServer`
//! stay synchronous (wine's provider writes through the object pointer
//! that a semisynchronous `GetObject` leaves NULL); the pool's bounded
//! wait covers them.
//!
//! Query text comes from `wmi_schema::queries`, built from the checked
//! names of `wmi_schema::names`; values only ever enter through
//! `storage::parse::cim::wql_string_literal`.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::Once;
use std::time::Instant;

use windows::core::{Interface, BSTR, HRESULT, PCWSTR};
use windows::Win32::System::Com::{
    CoCreateInstance, CoInitializeSecurity, CoSetProxyBlanket, CLSCTX_INPROC_SERVER, EOAC_NONE,
    RPC_C_AUTHN_LEVEL_PKT_PRIVACY, RPC_C_IMP_LEVEL_IMPERSONATE,
};
use windows::Win32::System::Wmi::{
    IEnumWbemClassObject, IWbemCallResult, IWbemClassObject, IWbemLocator, IWbemServices,
    WbemLocator, WBEM_FLAG_CONNECT_USE_MAX_WAIT, WBEM_FLAG_CREATE_OR_UPDATE,
    WBEM_FLAG_FORWARD_ONLY, WBEM_FLAG_RETURN_IMMEDIATELY, WBEM_FLAG_RETURN_WBEM_COMPLETE,
    WBEM_GENERIC_FLAG_TYPE, WBEM_S_TIMEDOUT,
};

use crate::win::errors;
use crate::{Error, Result};

// The namespaces live with the other WMI names (checked on every OS).
pub use crate::wmi_schema::{CIMV2_NAMESPACE, SMB_NAMESPACE, STORAGE_NAMESPACE};

mod pool;
mod secret;
#[cfg(test)]
mod tests;
mod variant;
pub use pool::{WmiWorker, DEFAULT_BOUND, DEFAULT_THREADS, GRACE, IDLE_EXIT};
pub use variant::{Object, Value, Var};

/// `RPC_C_AUTHN_WINNT` and `RPC_C_AUTHZ_NONE` (Win32::System::Rpc).
const RPC_C_AUTHN_WINNT: u32 = 10;
const RPC_C_AUTHZ_NONE: u32 = 0;
/// `RPC_E_TOO_LAST`: security was initialised already (by us or a library).
const RPC_E_TOO_LATE: HRESULT = HRESULT(0x8001_0119_u32 as i32);
/// HRESULTs after which a cached connection is dropped and made again.
const BROKEN_CONNECTION: [u32; 4] = [0x8007_06BA, 0x8007_06BE, 0x8001_0108, 0x8001_0114];

/// Process-wide COM security, set once before the first COM object is made:
/// packet privacy and impersonation, like upstream csi-proxy. Skipped when
/// the environment variable `WMI_COM_SECURITY` is `0`, `false`, `no` or
/// `off`; a process that set it already (RPC_E_TOO_LATE) keeps its own.
fn init_security() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let off = std::env::var("WMI_COM_SECURITY").is_ok_and(|v| {
            matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "0" | "false" | "no" | "off"
            )
        });
        if off {
            tracing::debug!("WMI_COM_SECURITY is off: COM security left to the defaults");
            return;
        }
        // SAFETY: no security descriptor (default access), no
        // authentication-service list, no reserved pointers; called on a
        // thread with COM initialised.
        let r = unsafe {
            CoInitializeSecurity(
                None,
                -1,
                None,
                None,
                RPC_C_AUTHN_LEVEL_PKT_PRIVACY,
                RPC_C_IMP_LEVEL_IMPERSONATE,
                None,
                EOAC_NONE,
                None,
            )
        };
        match r {
            Ok(()) => {}
            Err(e) if e.code() == RPC_E_TOO_LATE => {}
            Err(e) => tracing::warn!("CoInitializeSecurity failed: {e}"),
        }
    });
}

/// The WMI side of the worker thread, handed to every job. Not `Send`: it
/// never leaves the worker.
pub struct Wmi {
    default_namespace: String,
    com: Result<()>,
    locator: RefCell<Option<IWbemLocator>>,
    connections: RefCell<HashMap<String, IWbemServices>>,
    /// The deadline of the job being run.
    deadline: Cell<Instant>,
}

impl Wmi {
    fn new(default_namespace: String, com: Result<()>) -> Wmi {
        Wmi {
            default_namespace,
            com,
            locator: RefCell::new(None),
            connections: RefCell::new(HashMap::new()),
            deadline: Cell::new(Instant::now()),
        }
    }

    fn set_deadline(&self, d: Instant) {
        self.deadline.set(d);
    }

    /// When the current job's WMI waits end (its caller's deadline, or the
    /// worker's bound).
    pub fn deadline(&self) -> Instant {
        self.deadline.get()
    }

    /// What is left of the job's deadline, in milliseconds, as the WMI
    /// timeouts take it; `DeadlineExceeded` naming `what` once it passed.
    fn remaining_ms(&self, what: &str) -> Result<i32> {
        let left = self.deadline().saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Error::DeadlineExceeded(format!(
                "WMI {what} did not answer within the call's deadline (it may still take effect)"
            )));
        }
        // At least 1 ms (0 would only poll); WBEM_INFINITE is -1, never reached.
        Ok(i32::try_from(left.as_millis().max(1)).unwrap_or(i32::MAX))
    }

    /// The namespace [`query`](Self::query) and friends use.
    pub fn default_namespace(&self) -> &str {
        &self.default_namespace
    }

    fn locator(&self) -> Result<IWbemLocator> {
        if let Err(e) = &self.com {
            return Err(Error::Internal(format!("COM is not available: {e}")));
        }
        if let Some(l) = self.locator.borrow().as_ref() {
            return Ok(l.clone());
        }
        // SAFETY: COM is initialised on this thread; WbemLocator is an
        // in-process class whose instance we own through the interface.
        let l: IWbemLocator = unsafe { CoCreateInstance(&WbemLocator, None, CLSCTX_INPROC_SERVER) }
            .map_err(|e| errors::hresult("CoCreateInstance", "WbemLocator", &e))?;
        *self.locator.borrow_mut() = Some(l.clone());
        Ok(l)
    }

    /// The (cached) connection to `namespace`.
    pub fn services(&self, namespace: &str) -> Result<IWbemServices> {
        let key = namespace.to_ascii_lowercase();
        if let Some(s) = self.connections.borrow().get(&key) {
            return Ok(s.clone());
        }
        let locator = self.locator()?;
        let started = Instant::now();
        let empty = BSTR::new();
        // SAFETY: all BSTRs are valid for the call; no context object.
        let services = unsafe {
            locator.ConnectServer(
                &BSTR::from(namespace),
                &empty,
                &empty,
                &empty,
                // ConnectServer has no timeout of its own: at most 2 minutes.
                WBEM_FLAG_CONNECT_USE_MAX_WAIT.0,
                &empty,
                None,
            )
        }
        .map_err(|e| errors::hresult("IWbemLocator::ConnectServer", namespace, &e))?;
        // SAFETY: `services` is a live proxy; no principal name and no
        // explicit identity (the process token is used).
        let blanket = unsafe {
            CoSetProxyBlanket(
                &services,
                RPC_C_AUTHN_WINNT,
                RPC_C_AUTHZ_NONE,
                PCWSTR::null(),
                RPC_C_AUTHN_LEVEL_PKT_PRIVACY,
                RPC_C_IMP_LEVEL_IMPERSONATE,
                None,
                EOAC_NONE,
            )
        };
        if let Err(e) = blanket {
            // In-process objects are not proxies (E_NOINTERFACE); harmless.
            tracing::debug!("CoSetProxyBlanket on {namespace}: {e}");
        }
        tracing::debug!(
            "WMI: connected to {namespace} in {} ms",
            started.elapsed().as_millis()
        );
        self.connections.borrow_mut().insert(key, services.clone());
        Ok(services)
    }

    /// Drops the cached connection to `namespace` after an RPC failure.
    fn forget_if_broken(&self, namespace: &str, e: &windows::core::Error) {
        if BROKEN_CONNECTION.contains(&(e.code().0 as u32)) {
            self.connections
                .borrow_mut()
                .remove(&namespace.to_ascii_lowercase());
        }
    }

    /// Runs a WQL query in the default namespace.
    pub fn query(&self, wql: &str) -> Result<Vec<Object>> {
        let ns = self.default_namespace.clone();
        self.query_in(&ns, wql)
    }

    /// Runs a WQL query in `namespace` and collects every row. A broken
    /// connection is made again and the query retried once.
    pub fn query_in(&self, namespace: &str, wql: &str) -> Result<Vec<Object>> {
        match self.query_once(namespace, wql) {
            Err((e, true)) => {
                tracing::debug!("WMI: reconnecting to {namespace} after {e}");
                self.query_once(namespace, wql).map_err(|(e, _)| e)
            }
            r => r.map_err(|(e, _)| e),
        }
    }

    fn query_once(
        &self,
        namespace: &str,
        wql: &str,
    ) -> std::result::Result<Vec<Object>, (Error, bool)> {
        let services = self.services(namespace).map_err(|e| (e, false))?;
        let fail = |op: &str, e: windows::core::Error| {
            let broken = BROKEN_CONNECTION.contains(&(e.code().0 as u32));
            self.forget_if_broken(namespace, &e);
            (errors::hresult(op, wql, &e), broken)
        };
        // SAFETY: both BSTRs are valid for the call; no context object.
        let rows = unsafe {
            services.ExecQuery(
                &BSTR::from("WQL"),
                &BSTR::from(wql),
                WBEM_FLAG_FORWARD_ONLY | WBEM_FLAG_RETURN_IMMEDIATELY,
                None,
            )
        }
        .map_err(|e| fail("IWbemServices::ExecQuery", e))?;
        self.collect(&rows, wql).map_err(|e| match e {
            Collect::Timeout(e) => (e, false),
            Collect::Failed(op, e) => fail(op, e),
        })
    }

    /// Every row of a semisynchronous enumeration, each `Next` waiting no
    /// longer than the job's deadline.
    fn collect(
        &self,
        rows: &IEnumWbemClassObject,
        what: &str,
    ) -> std::result::Result<Vec<Object>, Collect> {
        let mut out = Vec::new();
        loop {
            let timeout = self
                .remaining_ms(&format!("query {what:?}"))
                .map_err(Collect::Timeout)?;
            let mut batch: [Option<IWbemClassObject>; 16] = Default::default();
            let mut returned = 0u32;
            // SAFETY: `batch` has room for its length of objects and
            // `returned` is writable; the enumerator is alive.
            let hr = unsafe { rows.Next(timeout, &mut batch, &mut returned) };
            out.extend(
                batch
                    .into_iter()
                    .take(returned as usize)
                    .flatten()
                    .map(Object),
            );
            if hr.is_err() {
                return Err(Collect::Failed(
                    "IEnumWbemClassObject::Next",
                    windows::core::Error::from(hr),
                ));
            }
            // Timed out with the rows so far: wait again while time is
            // left (the next round's remaining_ms says when none is).
            if hr.0 == WBEM_S_TIMEDOUT.0 {
                continue;
            }
            // WBEM_S_FALSE (1): fewer than asked, the enumeration is over.
            if hr.0 != 0 || returned == 0 {
                return Ok(out);
            }
        }
    }

    /// The class or instance at `path` (a class name or an instance's
    /// `__PATH`) in the default namespace.
    pub fn get_object(&self, path: &str) -> Result<Object> {
        let ns = self.default_namespace.clone();
        self.get_object_in(&ns, path)
    }

    /// The class or instance at `path` in `namespace`.
    pub fn get_object_in(&self, namespace: &str, path: &str) -> Result<Object> {
        let services = self.services(namespace)?;
        let mut obj = None;
        // SAFETY: the BSTR is valid for the call; `obj` receives an owned
        // interface; no context, no call-result object.
        unsafe {
            services.GetObject(
                &BSTR::from(path),
                WBEM_FLAG_RETURN_WBEM_COMPLETE,
                None,
                Some(&mut obj),
                None,
            )
        }
        .map_err(|e| {
            self.forget_if_broken(namespace, &e);
            errors::hresult("IWbemServices::GetObject", path, &e)
        })?;
        obj.map(Object).ok_or_else(|| {
            Error::Internal(format!(
                "IWbemServices::GetObject {path:?} returned no object"
            ))
        })
    }

    /// Calls `method` of `class` on `object_path` (an instance's `__PATH`,
    /// or the class name for a static method) in the default namespace,
    /// with in-parameters built from the method's signature; parameters not
    /// given stay NULL. Returns the out-parameters.
    pub fn exec_method(
        &self,
        object_path: &str,
        class: &str,
        method: &str,
        args: &[(&str, Value)],
    ) -> Result<Object> {
        let ns = self.default_namespace.clone();
        self.exec_method_in(&ns, object_path, class, method, args)
    }

    /// [`exec_method`](Self::exec_method) in `namespace`. Error messages
    /// name the class, method, object path and parameter names, never a
    /// parameter's value (credentials and CHAP secrets travel here).
    pub fn exec_method_in(
        &self,
        namespace: &str,
        object_path: &str,
        class: &str,
        method: &str,
        args: &[(&str, Value)],
    ) -> Result<Object> {
        let class_obj = self.get_object_in(namespace, class)?;
        let name = wide(method)?;
        let mut in_sig: Option<IWbemClassObject> = None;
        // SAFETY: `name` is NUL-terminated and alive for the call; the
        // out-signature is not asked for.
        unsafe {
            class_obj
                .0
                .GetMethod(PCWSTR(name.as_ptr()), 0, &mut in_sig, std::ptr::null_mut())
        }
        .map_err(|e| {
            errors::hresult(
                "IWbemClassObject::GetMethod",
                &format!("{class}.{method}"),
                &e,
            )
        })?;
        let in_params = match in_sig {
            Some(sig) => {
                // SAFETY: `sig` is a live class object.
                let inst = unsafe { sig.SpawnInstance(0) }.map_err(|e| {
                    errors::hresult("SpawnInstance", &format!("{class}.{method}"), &e)
                })?;
                let inst = Object(inst);
                for (k, v) in args {
                    inst.put(k, v)
                        .map_err(|e| prefix(e, &format!("{class}.{method} parameter {k}")))?;
                }
                Some(inst)
            }
            None if args.is_empty() => None,
            None => {
                return Err(Error::Internal(format!(
                    "{class}.{method} takes no parameters"
                )))
            }
        };
        let services = self.services(namespace)?;
        let what = format!("{class}.{method} on {object_path}");
        let mut call: Option<IWbemCallResult> = None;
        // SAFETY: both BSTRs are valid for the call; the in-parameters (if
        // any) are a live instance; semisynchronous: no out-parameter
        // pointer, `call` receives an owned call-result object.
        unsafe {
            services.ExecMethod(
                &BSTR::from(object_path),
                &BSTR::from(method),
                WBEM_FLAG_RETURN_IMMEDIATELY,
                None,
                in_params.as_ref().map(|o| &o.0),
                None,
                Some(&mut call),
            )
        }
        .map_err(|e| {
            self.forget_if_broken(namespace, &e);
            errors::hresult("IWbemServices::ExecMethod", &what, &e)
        })?;
        // Wine ignores the flag and the call-result pointer: the method ran
        // and its out-parameters are gone.
        let call = call.ok_or_else(|| {
            Error::Internal(format!(
                "IWbemServices::ExecMethod {what}: the provider returned no call result for a semisynchronous call"
            ))
        })?;
        self.call_result(namespace, &call, &what)
    }

    /// The out-parameters of a semisynchronous method call: its status,
    /// then its result object, each waited for no longer than the job's
    /// deadline.
    fn call_result(&self, namespace: &str, call: &IWbemCallResult, what: &str) -> Result<Object> {
        let fail = |op: &str, hr: HRESULT| {
            let e = windows::core::Error::from(hr);
            self.forget_if_broken(namespace, &e);
            errors::hresult(op, what, &e)
        };
        loop {
            let timeout = self.remaining_ms(&format!("method {what}"))?;
            let mut status = 0i32;
            // SAFETY: the call result is alive and `status` is writable; the
            // raw entry point is used because the wrapper folds
            // WBEM_S_TIMEDOUT (a success code) into Ok.
            let hr = unsafe {
                (Interface::vtable(call).GetCallStatus)(call.as_raw(), timeout, &mut status)
            };
            if hr.0 == WBEM_S_TIMEDOUT.0 {
                continue;
            }
            if hr.is_err() {
                return Err(fail("IWbemCallResult::GetCallStatus", hr));
            }
            if HRESULT(status).is_err() {
                return Err(fail("IWbemServices::ExecMethod", HRESULT(status)));
            }
            break;
        }
        loop {
            let timeout = self.remaining_ms(&format!("method {what}"))?;
            let mut raw: *mut core::ffi::c_void = std::ptr::null_mut();
            // SAFETY: as above; on success `raw` holds an owned reference
            // to the out-parameters, taken over by `from_raw` below.
            let hr = unsafe {
                (Interface::vtable(call).GetResultObject)(call.as_raw(), timeout, &mut raw)
            };
            if hr.0 == WBEM_S_TIMEDOUT.0 {
                continue;
            }
            if hr.is_err() {
                return Err(fail("IWbemCallResult::GetResultObject", hr));
            }
            if raw.is_null() {
                return Err(Error::Internal(format!(
                    "{what} returned no out-parameters"
                )));
            }
            // SAFETY: a non-null interface pointer the callee handed over
            // with its reference.
            return Ok(Object(unsafe { IWbemClassObject::from_raw(raw) }));
        }
    }

    /// A new instance of `class` in `namespace` with `props` set, written
    /// with `PutInstance` (created, or updated where its keys exist). The
    /// product only reads and calls methods; the real-Windows tests set up
    /// their iSCSI target this way.
    pub fn put_instance_in(
        &self,
        namespace: &str,
        class: &str,
        props: &[(&str, Value)],
    ) -> Result<()> {
        let class_obj = self.get_object_in(namespace, class)?;
        // SAFETY: `class_obj` is a live class object.
        let inst = unsafe { class_obj.0.SpawnInstance(0) }
            .map_err(|e| errors::hresult("SpawnInstance", class, &e))?;
        let inst = Object(inst);
        for (k, v) in props {
            inst.put(k, v)
                .map_err(|e| prefix(e, &format!("{class} property {k}")))?;
        }
        self.write_instance_in(namespace, &inst, class)
    }

    /// Writes `instance` (a row of a query whose properties were changed
    /// with [`Object::put`]) back with `PutInstance`.
    pub fn write_instance_in(&self, namespace: &str, instance: &Object, what: &str) -> Result<()> {
        let services = self.services(namespace)?;
        // SAFETY: the instance is a live object; no context, no call-result
        // object.
        unsafe {
            services.PutInstance(
                &instance.0,
                WBEM_GENERIC_FLAG_TYPE(WBEM_FLAG_CREATE_OR_UPDATE.0),
                None,
                None,
            )
        }
        .map_err(|e| {
            self.forget_if_broken(namespace, &e);
            errors::hresult("IWbemServices::PutInstance", what, &e)
        })
    }

    /// Deletes the instance at `path` (its `__PATH`) with `DeleteInstance`.
    pub fn delete_instance_in(&self, namespace: &str, path: &str) -> Result<()> {
        let services = self.services(namespace)?;
        // SAFETY: the BSTR is valid for the call; no context, no
        // call-result object.
        unsafe { services.DeleteInstance(&BSTR::from(path), WBEM_GENERIC_FLAG_TYPE(0), None, None) }
            .map_err(|e| {
                self.forget_if_broken(namespace, &e);
                errors::hresult("IWbemServices::DeleteInstance", path, &e)
            })
    }
}

/// Why an enumeration ended early.
enum Collect {
    Timeout(Error),
    Failed(&'static str, windows::core::Error),
}

fn prefix(e: Error, what: &str) -> Error {
    match e {
        Error::Internal(m) => Error::Internal(format!("{what}: {m}")),
        other => other,
    }
}

/// `s` as a NUL-terminated UTF-16 string; an interior NUL is refused
/// ([`crate::wide`]).
pub(crate) fn wide(s: &str) -> Result<Vec<u16>> {
    Ok(crate::wide::nul_terminated(s)?)
}
