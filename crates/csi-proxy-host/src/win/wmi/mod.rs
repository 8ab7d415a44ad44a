//! WMI on a small pool of COM worker threads.
//!
//! COM objects belong to the thread (apartment) that made them, and a WMI
//! connection costs tens of milliseconds, so WMI work runs on dedicated OS
//! threads, each of which initialises COM (multi-threaded apartment) once
//! and keeps its own warm `IWbemServices` per namespace. They take jobs
//! from one queue: [`WmiWorker::call`] sends a closure
//! `FnOnce(&Wmi) -> Result<T>` and blocks until its answer comes back. The
//! first thread starts with the first call (a host that never needs WMI
//! never starts COM); another starts when a call finds every thread busy,
//! up to the pool's size, so one long call (a format of a large disk) does
//! not hold up the calls for other disks. A thread beyond the first ends
//! after [`IDLE_EXIT`] without work; all end when the worker is dropped.
//!
//! Query text comes from `wmi_schema::queries`, built from the checked
//! names of `wmi_schema::names`; values only ever enter through
//! `storage::parse::cim::wql_string_literal`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, Once};
use std::time::{Duration, Instant};

use windows::core::{BSTR, HRESULT, PCWSTR};
use windows::Win32::System::Com::{
    CoCreateInstance, CoInitializeEx, CoInitializeSecurity, CoSetProxyBlanket, CoUninitialize,
    CLSCTX_INPROC_SERVER, COINIT_MULTITHREADED, EOAC_NONE, RPC_C_AUTHN_LEVEL_PKT_PRIVACY,
    RPC_C_IMP_LEVEL_IMPERSONATE,
};
use windows::Win32::System::Wmi::{
    IWbemClassObject, IWbemLocator, IWbemServices, WbemLocator, WBEM_FLAG_CREATE_OR_UPDATE,
    WBEM_FLAG_FORWARD_ONLY, WBEM_FLAG_RETURN_IMMEDIATELY, WBEM_FLAG_RETURN_WBEM_COMPLETE,
    WBEM_GENERIC_FLAG_TYPE, WBEM_INFINITE,
};

use crate::win::errors;
use crate::{Error, Result};

// The namespaces live with the other WMI names (checked on every OS).
pub use crate::wmi_schema::{CIMV2_NAMESPACE, SMB_NAMESPACE, STORAGE_NAMESPACE};

mod variant;
pub use variant::{Object, Value, Var};

/// `RPC_C_AUTHN_WINNT` and `RPC_C_AUTHZ_NONE` (Win32::System::Rpc).
const RPC_C_AUTHN_WINNT: u32 = 10;
const RPC_C_AUTHZ_NONE: u32 = 0;
/// `RPC_E_TOO_LAST`: security was initialised already (by us or a library).
const RPC_E_TOO_LATE: HRESULT = HRESULT(0x8001_0119_u32 as i32);
/// HRESULTs after which a cached connection is dropped and made again.
const BROKEN_CONNECTION: [u32; 4] = [0x8007_06BA, 0x8007_06BE, 0x8001_0108, 0x8001_0114];

type Job = Box<dyn FnOnce(&Wmi) + Send + 'static>;

/// How many WMI threads a worker runs at most, unless told otherwise.
pub const DEFAULT_THREADS: usize = 8;

/// A thread beyond the first ends after this long without a job.
pub const IDLE_EXIT: Duration = Duration::from_secs(60);

/// What the worker's threads share: the job queue and how many threads run
/// and wait.
struct Shared {
    jobs: Mutex<mpsc::Receiver<Job>>,
    threads: AtomicUsize,
    idle: AtomicUsize,
}

struct Pool {
    sender: mpsc::Sender<Job>,
    shared: Arc<Shared>,
}

/// The handle to the COM worker threads. Cheap to create: the first thread
/// (and COM) starts with the first [`call`](Self::call).
pub struct WmiWorker {
    namespace: String,
    max_threads: usize,
    pool: Mutex<Option<Pool>>,
}

impl WmiWorker {
    /// A worker whose [`Wmi::query`] and [`Wmi::exec_method`] use
    /// `namespace` (e.g. [`STORAGE_NAMESPACE`]), with at most
    /// [`DEFAULT_THREADS`] threads.
    pub fn new(namespace: impl Into<String>) -> WmiWorker {
        WmiWorker {
            namespace: namespace.into(),
            max_threads: DEFAULT_THREADS,
            pool: Mutex::new(None),
        }
    }

    /// At most `n` threads (at least one): with one, every call waits for
    /// the one before it.
    pub fn with_max_threads(mut self, n: usize) -> WmiWorker {
        self.max_threads = n.max(1);
        self
    }

    /// Runs `job` on a worker thread and returns its result (blocking).
    /// A job that panics is answered with [`Error::Internal`]; the worker
    /// survives it.
    pub fn call<T, F>(&self, job: F) -> Result<T>
    where
        F: FnOnce(&Wmi) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let (reply_tx, reply_rx) = mpsc::sync_channel::<Result<T>>(1);
        let job: Job = Box::new(move |wmi| {
            let _ = reply_tx.send(job(wmi));
        });
        self.sender()?
            .send(job)
            .map_err(|_| Error::Internal("the WMI worker threads have stopped".into()))?;
        reply_rx.recv().map_err(|_| {
            Error::Internal("the WMI job failed without an answer (it panicked)".into())
        })?
    }

    /// Whether a worker thread has been started.
    pub fn started(&self) -> bool {
        self.pool
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// How many worker threads run now.
    pub fn threads(&self) -> usize {
        self.pool
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map_or(0, |p| p.shared.threads.load(Ordering::Acquire))
    }

    /// The queue to the running threads, starting the first, or another
    /// when none is idle and the pool is not full.
    fn sender(&self) -> Result<mpsc::Sender<Job>> {
        let mut guard = self.pool.lock().unwrap_or_else(|p| p.into_inner());
        let pool = match guard.as_mut() {
            Some(p) => p,
            None => {
                let (tx, rx) = mpsc::channel::<Job>();
                guard.insert(Pool {
                    sender: tx,
                    shared: Arc::new(Shared {
                        jobs: Mutex::new(rx),
                        threads: AtomicUsize::new(0),
                        idle: AtomicUsize::new(0),
                    }),
                })
            }
        };
        let shared = &pool.shared;
        let threads = shared.threads.load(Ordering::Acquire);
        if threads == 0 || (shared.idle.load(Ordering::Acquire) == 0 && threads < self.max_threads)
        {
            shared.threads.fetch_add(1, Ordering::AcqRel);
            let (namespace, s) = (self.namespace.clone(), shared.clone());
            let spawned = std::thread::Builder::new()
                .name("csi-proxy-wmi".into())
                .spawn(move || worker_main(namespace, s));
            if let Err(e) = spawned {
                shared.threads.fetch_sub(1, Ordering::AcqRel);
                if threads == 0 {
                    return Err(Error::Internal(format!(
                        "cannot start the WMI worker thread: {e}"
                    )));
                }
                // The running threads take the job.
                tracing::warn!("cannot start another WMI worker thread: {e}");
            }
        }
        Ok(pool.sender.clone())
    }
}

/// Takes the next job: waits for one (a thread beyond the first gives up
/// after [`IDLE_EXIT`]); `None` when the worker is gone or the thread is
/// to end.
fn next_job(shared: &Shared) -> Option<Job> {
    shared.idle.fetch_add(1, Ordering::AcqRel);
    let job = {
        let jobs = shared.jobs.lock().unwrap_or_else(|p| p.into_inner());
        match jobs.recv_timeout(IDLE_EXIT) {
            Ok(job) => Some(job),
            Err(mpsc::RecvTimeoutError::Disconnected) => None,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                // The last thread stays for the next call.
                let others =
                    shared
                        .threads
                        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                            (n > 1).then(|| n - 1)
                        });
                if others.is_ok() {
                    shared.idle.fetch_sub(1, Ordering::AcqRel);
                    return None;
                }
                drop(jobs);
                shared.idle.fetch_sub(1, Ordering::AcqRel);
                return next_job(shared);
            }
        }
    };
    shared.idle.fetch_sub(1, Ordering::AcqRel);
    if job.is_none() {
        shared.threads.fetch_sub(1, Ordering::AcqRel);
    }
    job
}

/// The body of a worker thread: COM up, jobs until the queue closes (or
/// the thread is idle too long), COM objects released, COM down.
fn worker_main(namespace: String, shared: Arc<Shared>) {
    // SAFETY: initialises COM for this thread (multi-threaded apartment);
    // balanced by CoUninitialize below when it succeeded.
    let init = unsafe { CoInitializeEx(None, COINIT_MULTITHREADED) };
    init_security();
    {
        let wmi = Wmi {
            default_namespace: namespace,
            com: init
                .ok()
                .map_err(|e| errors::hresult("CoInitializeEx", "the WMI worker thread", &e)),
            locator: RefCell::new(None),
            connections: RefCell::new(HashMap::new()),
        };
        while let Some(job) = next_job(&shared) {
            // A panicking job drops its reply sender: the caller gets an
            // error, the worker goes on.
            let _ = catch_unwind(AssertUnwindSafe(|| job(&wmi)));
        }
    }
    if init.is_ok() {
        // SAFETY: balances the successful CoInitializeEx above; every COM
        // object of this thread was released when `wmi` was dropped.
        unsafe { CoUninitialize() };
    }
}

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
}

impl Wmi {
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
                0,
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
        let mut out = Vec::new();
        loop {
            let mut batch: [Option<IWbemClassObject>; 16] = Default::default();
            let mut returned = 0u32;
            // SAFETY: `batch` has room for its length of objects and
            // `returned` is writable; the enumerator is alive.
            let hr = unsafe { rows.Next(WBEM_INFINITE, &mut batch, &mut returned) };
            out.extend(
                batch
                    .into_iter()
                    .take(returned as usize)
                    .flatten()
                    .map(Object),
            );
            if hr.is_err() {
                return Err(fail(
                    "IEnumWbemClassObject::Next",
                    windows::core::Error::from(hr),
                ));
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
        let name = wide(method);
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
        let mut out: Option<IWbemClassObject> = None;
        // SAFETY: both BSTRs are valid for the call; the in-parameters (if
        // any) are a live instance; `out` receives an owned interface.
        unsafe {
            services.ExecMethod(
                &BSTR::from(object_path),
                &BSTR::from(method),
                WBEM_GENERIC_FLAG_TYPE(0),
                None,
                in_params.as_ref().map(|o| &o.0),
                Some(&mut out),
                None,
            )
        }
        .map_err(|e| {
            self.forget_if_broken(namespace, &e);
            errors::hresult(
                "IWbemServices::ExecMethod",
                &format!("{class}.{method} on {object_path}"),
                &e,
            )
        })?;
        out.map(Object)
            .ok_or_else(|| Error::Internal(format!("{class}.{method} returned no out-parameters")))
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

fn prefix(e: Error, what: &str) -> Error {
    match e {
        Error::Internal(m) => Error::Internal(format!("{what}: {m}")),
        other => other,
    }
}

pub(crate) fn wide(s: &str) -> Vec<u16> {
    s.encode_utf16().chain(std::iter::once(0)).collect()
}
