//! The connection to systemd: zbus over the system bus, one connection
//! shared by every call and made again after it broke.
//!
//! Host calls are synchronous and run on the server's blocking threads, so
//! each one runs its D-Bus exchange to completion with `block_on` of a
//! Tokio runtime of this module's own: one worker thread
//! (`csi-proxy-dbus`) that reads every connection's socket and runs zbus's
//! tasks whether or not a call is under way, while each caller polls its
//! own future on its own thread. It is never the daemon's runtime, so no
//! call waits on a thread the daemon needs, and the connection outlives
//! any runtime of the caller's. (zbus's own `block_on` runs connections on
//! one single-threaded scheduler that only works while some caller is
//! inside it: between calls nothing would read the socket.) A host call
//! must not be made from inside an async task (Tokio refuses to block
//! there).
//!
//! The address is `$DBUS_SYSTEM_BUS_ADDRESS` when set (the standard
//! override), else `unix:path=/run/dbus/system_bus_socket`. Its
//! `unix:path=` and `unix:abstract=` entries are tried in order, their
//! values `%`-unescaped as the D-Bus specification says (zbus takes a unix
//! path as written, so the socket is opened here and handed to zbus, which
//! authenticates and says Hello). Anything else in it is refused with the
//! reason; an address that is not one is a clear error, never a panic.

use crate::{Error, Result};
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use zbus_systemd::systemd1::ManagerProxy;

/// The well-known default system bus socket.
pub const DEFAULT_SYSTEM_BUS: &str = "unix:path=/run/dbus/system_bus_socket";

/// How long one D-Bus round trip (and connecting) may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// The address of the system bus: `$DBUS_SYSTEM_BUS_ADDRESS`, else the
/// default.
pub fn system_bus_address() -> Result<String> {
    match std::env::var_os("DBUS_SYSTEM_BUS_ADDRESS") {
        None => Ok(DEFAULT_SYSTEM_BUS.to_string()),
        Some(v) => match v.into_string() {
            Ok(s) if s.trim().is_empty() => Ok(DEFAULT_SYSTEM_BUS.to_string()),
            Ok(s) => Ok(s),
            Err(v) => Err(Error::FailedPrecondition(format!(
                "systemd is not reachable: DBUS_SYSTEM_BUS_ADDRESS is not a D-Bus address (not UTF-8: {v:?})"
            ))),
        },
    }
}

/// A socket a bus address names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Socket {
    /// `unix:path=`: a socket in the filesystem.
    Path(PathBuf),
    /// `unix:abstract=`: a name in Linux's abstract socket namespace.
    Abstract(Vec<u8>),
}

impl Socket {
    /// The path Tokio connects to (an abstract name: a leading NUL).
    fn path(&self) -> PathBuf {
        match self {
            Socket::Path(p) => p.clone(),
            Socket::Abstract(name) => {
                let mut b = vec![0];
                b.extend_from_slice(name);
                PathBuf::from(OsString::from_vec(b))
            }
        }
    }
}

/// The sockets of `address` (D-Bus specification, "Server Addresses"), in
/// the order they are to be tried. An entry of another transport is
/// skipped; a malformed entry makes the whole address an error.
pub fn parse_address(address: &str) -> std::result::Result<Vec<Socket>, String> {
    let mut out = Vec::new();
    for entry in address.split(';').filter(|e| !e.is_empty()) {
        let Some((transport, rest)) = entry.split_once(':') else {
            return Err(format!("{entry:?} has no transport (\"unix:\")"));
        };
        if transport != "unix" {
            continue;
        }
        let mut socket = None;
        for kv in rest.split(',').filter(|kv| !kv.is_empty()) {
            let Some((key, value)) = kv.split_once('=') else {
                return Err(format!("{kv:?} in {entry:?} is not key=value"));
            };
            let value = unescape(value).map_err(|e| format!("{key}= in {entry:?}: {e}"))?;
            let s = match key {
                "path" => Socket::Path(PathBuf::from(OsString::from_vec(value))),
                "abstract" => Socket::Abstract(value),
                // guid= and keys of listening addresses do not say where to
                // connect.
                _ => continue,
            };
            if socket.replace(s).is_some() {
                return Err(format!("{entry:?} names more than one socket"));
            }
        }
        out.extend(socket);
    }
    if out.is_empty() {
        return Err("it has no unix:path= or unix:abstract= entry".to_string());
    }
    Ok(out)
}

/// A `%xx`-escaped address value as bytes (D-Bus specification: every
/// byte may be escaped, the optionally-escaped ones may also stand as
/// they are).
fn unescape(value: &str) -> std::result::Result<Vec<u8>, String> {
    let b = value.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = |at: usize| {
                    b.get(at)
                        .and_then(|c| (*c as char).to_digit(16))
                        .ok_or_else(|| format!("bad %-escape at byte {i}"))
                };
                out.push((hex(i + 1)? * 16 + hex(i + 2)?) as u8);
                i += 3;
            }
            c if c.is_ascii_alphanumeric() || b"-_/.\\*".contains(&c) => {
                out.push(c);
                i += 1;
            }
            c => {
                return Err(format!(
                    "byte {c:#04x} at {i} must be %-escaped in a D-Bus address"
                ))
            }
        }
    }
    Ok(out)
}

/// A live connection and the systemd manager on it.
#[derive(Debug)]
pub struct Link {
    pub conn: zbus::Connection,
    pub manager: ManagerProxy<'static>,
    /// The address it was made to (for messages).
    pub address: String,
    /// Calls waiting for jobs on this connection: subscribed to systemd's
    /// signals while there are any (the lock is held across `Subscribe`
    /// and `Unsubscribe`, so they reach systemd in the order of the count).
    pub waiters: tokio::sync::Mutex<usize>,
}

/// The shared connection: made on first use, kept, and made again after a
/// call found it broken.
#[derive(Debug, Default)]
pub struct Bus {
    /// `None`: the system bus of the environment.
    address: Option<String>,
    kept: Mutex<Option<Arc<Link>>>,
}

impl Bus {
    pub fn new(address: Option<String>) -> Bus {
        Bus {
            address,
            kept: Mutex::new(None),
        }
    }

    /// Run `f` on the kept connection (or a new one) to completion. When
    /// it fails with [`Error::Internal`] (the connection broke or answered
    /// nonsense) on a kept connection, the connection is dropped and `f`
    /// runs once more on a new one.
    pub fn run<T>(&self, f: impl AsyncFn(&Link) -> Result<T>) -> Result<T> {
        runtime()?.block_on(async {
            let kept = self
                .kept
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
                .filter(|l| !l.conn.is_closed());
            let (mut link, reused) = match kept {
                Some(l) => (l, true),
                None => (self.connect().await?, false),
            };
            let mut r = f(&link).await;
            if reused && matches!(r, Err(Error::Internal(_))) {
                self.forget(&link);
                link = self.connect().await?;
                r = f(&link).await;
            }
            if matches!(r, Err(Error::Internal(_))) {
                self.forget(&link);
            }
            r
        })
    }

    fn forget(&self, link: &Arc<Link>) {
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        if kept.as_ref().is_some_and(|k| Arc::ptr_eq(k, link)) {
            *kept = None;
        }
    }

    /// Connect to the first socket of the address that answers, and keep
    /// the connection (unless another call kept one meanwhile).
    async fn connect(&self) -> Result<Arc<Link>> {
        let address = match &self.address {
            Some(a) => a.clone(),
            None => system_bus_address()?,
        };
        let sockets = parse_address(&address).map_err(|e| {
            Error::FailedPrecondition(format!(
                "systemd is not reachable: {address:?} is not a D-Bus address this proxy can use (DBUS_SYSTEM_BUS_ADDRESS): {e}"
            ))
        })?;
        let mut last = String::new();
        for s in &sockets {
            match tokio::time::timeout(CALL_TIMEOUT, open(s)).await {
                Ok(Ok(link)) => {
                    let link = Arc::new(Link {
                        address: address.clone(),
                        ..link
                    });
                    let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
                    return Ok(match &*kept {
                        Some(k) if !k.conn.is_closed() => k.clone(),
                        _ => {
                            *kept = Some(link.clone());
                            link
                        }
                    });
                }
                Ok(Err(e)) => last = e,
                Err(_) => last = format!("no answer within {} s", CALL_TIMEOUT.as_secs()),
            }
        }
        Err(Error::FailedPrecondition(format!(
            "systemd is not reachable: cannot connect to the D-Bus system bus at {address}: {last}"
        )))
    }
}

/// The runtime the connections live on (made on first use).
fn runtime() -> Result<&'static tokio::runtime::Runtime> {
    static RUNTIME: OnceLock<std::result::Result<tokio::runtime::Runtime, String>> =
        OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("csi-proxy-dbus")
                .enable_io()
                .enable_time()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| Error::Internal(format!("cannot start the D-Bus client's thread: {e}")))
}

/// Connect to one socket, authenticate, say Hello.
async fn open(s: &Socket) -> std::result::Result<Link, String> {
    let stream = tokio::net::UnixStream::connect(s.path())
        .await
        .and_then(|s| s.into_std())
        .map_err(|e| e.to_string())?;
    let conn = zbus::connection::Builder::unix_stream(stream)
        .method_timeout(CALL_TIMEOUT)
        .build()
        .await
        .map_err(|e| e.to_string())?;
    let manager = ManagerProxy::builder(&conn)
        .cache_properties(zbus::proxy::CacheProperties::No)
        .build()
        .await
        .map_err(|e| e.to_string())?;
    Ok(Link {
        conn,
        manager,
        address: String::new(),
        waiters: Default::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        let p = |a: &str| parse_address(a);
        assert_eq!(
            p("unix:path=/run/dbus/system%5fbus").unwrap(),
            [Socket::Path("/run/dbus/system_bus".into())]
        );
        assert_eq!(
            p("tcp:host=localhost,port=1;unix:abstract=/tmp/dbus-x%2c,guid=0123;unix:path=/b")
                .unwrap(),
            [
                Socket::Abstract(b"/tmp/dbus-x,".to_vec()),
                Socket::Path("/b".into())
            ]
        );
        // Escaped bytes that are not UTF-8 make a path still.
        assert_eq!(
            p("unix:path=/tmp/%ff").unwrap(),
            [Socket::Path(PathBuf::from(OsString::from_vec(
                b"/tmp/\xff".to_vec()
            )))]
        );
        for (bad, why) in [
            ("unix:path=/tmp/%aé", "bad %-escape"),
            ("unix:path=/tmp/%a", "bad %-escape"),
            ("unix:path=/tmp/%", "bad %-escape"),
            ("unix:path=/tmp/%%41", "bad %-escape"),
            ("unix:path=/tmp/é", "must be %-escaped"),
            ("unix:path=/a b", "must be %-escaped"),
            ("unix:path", "not key=value"),
            ("unix:path=/a,abstract=b", "more than one socket"),
            ("/run/dbus/system_bus_socket", "no transport"),
            ("tcp:host=localhost,port=1", "no unix:path="),
            ("unix:tmpdir=/tmp", "no unix:path="),
            ("", "no unix:path="),
        ] {
            let e = p(bad).unwrap_err();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
    }

    #[test]
    fn a_bad_address_is_a_clear_error() {
        let n = crate::system::validate::ServiceName::parse("kubelet", crate::path::Flavor::Unix)
            .unwrap();
        for a in [
            "unix:path=/tmp/%aé",
            "tcp:host=localhost,port=1",
            "nonsense",
        ] {
            let s = super::super::LinuxSystem::new().with_bus(a);
            let e = crate::system::SystemBackend::get_service(&s, &n).unwrap_err();
            assert!(matches!(e, Error::FailedPrecondition(_)), "{a}: {e}");
            let m = e.to_string();
            assert!(m.contains("is not a D-Bus address"), "{a}: {m}");
            assert!(m.contains("systemd is not reachable"), "{a}: {m}");
        }
    }
}
