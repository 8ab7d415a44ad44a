//! Connection exhaustion against the real binary on Unix sockets: the
//! per-endpoint connection cap, and running out of file descriptors.
#![cfg(target_os = "linux")]

mod common;
mod procfs;

use common::Proxy;
use csi_proxy_api::filesystem::v1::{PathExistsRequest, PathExistsResponse};
use csi_proxy_http2::client::{RawClient, Shape};
use prost::Message;
use std::io::{ErrorKind, Read};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// Liveness bound for anything the server should do "soon": generous, as
/// other builds and tests may load the machine.
const PATIENCE: Duration = Duration::from_secs(60);

fn connect(socket: &Path) -> UnixStream {
    let s = UnixStream::connect(socket).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    s
}

/// PathExists(`path`) on `c`: `Ok(grpc-status, exists)`, or the I/O error
/// of a connection the server closed.
fn path_exists(c: &mut RawClient<UnixStream>, path: &str) -> std::io::Result<(i32, bool)> {
    let msg = PathExistsRequest { path: path.into() }.encode_to_vec();
    let resp = c.call("/v1.Filesystem/PathExists", None, &msg)?;
    let status = resp.grpc_status.expect("a grpc-status");
    let exists = match &resp.message {
        Some(m) => PathExistsResponse::decode(&m[..]).unwrap().exists,
        None => false,
    };
    Ok((status, exists))
}

/// A new connection that answers PathExists(`path`) = true, retried until
/// [`PATIENCE`] runs out while the server closes new connections.
fn served_again(socket: &Path, path: &str) -> (RawClient<UnixStream>, u32) {
    let deadline = Instant::now() + PATIENCE;
    let mut attempts = 0;
    loop {
        attempts += 1;
        // A closed connection may already fail the preface.
        let attempt = RawClient::new(connect(socket), Shape::default())
            .and_then(|mut c| path_exists(&mut c, path).map(|r| (c, r)));
        match attempt {
            Ok((c, (0, true))) => return (c, attempts),
            Ok((_, other)) => panic!("PathExists({path}) = {other:?}"),
            Err(e) => assert!(
                Instant::now() < deadline,
                "not served again after {attempts} attempts: {e}"
            ),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The connection was closed by the server without an answer.
fn assert_closed(mut s: UnixStream, what: &str) {
    let mut b = [0u8; 1];
    match s.read(&mut b) {
        Ok(0) => {}
        Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
        other => panic!("{what}: expected the server to close it, got {other:?}"),
    }
}

#[test]
fn connections_over_the_cap_are_closed_at_once_and_new_ones_served_once_some_end() {
    const CAP: usize = 8;
    let p = Proxy::start(&[
        "-api-groups=filesystem-v1",
        &format!("-max-connections-per-endpoint={CAP}"),
        "-preface-timeout=10m",
    ]);
    let socket = p.socket("filesystem-v1");
    let existing = p.kubelet.display().to_string();
    // CAP idle connections: the server accepts in arrival order, so these
    // take every slot before the ones below are looked at.
    let mut held: Vec<UnixStream> = (0..CAP).map(|_| connect(&socket)).collect();
    for i in 0..4 {
        assert_closed(
            connect(&socket),
            &format!("connection {} over the cap", CAP + i),
        );
    }
    // A complete call over the cap fails too: the connection is closed.
    // (Sending the preface may already fail.)
    let err = RawClient::new(connect(&socket), Shape::default())
        .and_then(|mut over| path_exists(&mut over, &existing))
        .expect_err("over the cap");
    assert!(
        matches!(
            err.kind(),
            ErrorKind::UnexpectedEof | ErrorKind::ConnectionReset | ErrorKind::BrokenPipe
        ),
        "{err}"
    );
    // The connections holding the slots are served.
    let mut first = RawClient::new(held.remove(0), Shape::default()).unwrap();
    assert_eq!(path_exists(&mut first, &existing).unwrap(), (0, true));
    let log = p.log();
    assert!(
        log.contains("connection limit reached") && log.contains("limit=8"),
        "{log}"
    );
    // Two end: new connections are served again.
    drop(first);
    drop(held.remove(0));
    let (mut c, _) = served_again(&socket, &existing);
    // The slots are counted, not lost: with this one and the other idle
    // ones, the endpoint is full again.
    let mut second = served_again(&socket, &existing).0;
    assert_eq!(path_exists(&mut c, &existing).unwrap(), (0, true));
    assert_eq!(path_exists(&mut second, &existing).unwrap(), (0, true));
    assert_closed(connect(&socket), "a connection over the cap, again");
    assert!(!p.log().contains("panicked"));
}

/// utime + stime of `pid`, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    procfs::cpu_ticks(&std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap())
}

#[test]
fn out_of_descriptors_the_server_backs_off_without_spinning_and_recovers() {
    const LIMIT: u64 = 64;
    let mut p = Proxy::start_with(
        &[
            "-api-groups=filesystem-v1",
            "-max-connections-per-endpoint=100000",
            "-preface-timeout=10m",
        ],
        |cmd| {
            // SAFETY: the hook runs in the child between fork and exec; it
            // only calls setrlimit (async-signal-safe) on a struct on its
            // own stack, and allocates nothing.
            unsafe {
                cmd.pre_exec(|| {
                    let lim = libc::rlimit {
                        rlim_cur: LIMIT,
                        rlim_max: LIMIT,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        },
    );
    let pid = p.child.as_ref().unwrap().id();
    let socket = p.socket("filesystem-v1");
    let existing = p.kubelet.display().to_string();
    assert!(
        p.log().contains(&format!("soft={LIMIT} hard={LIMIT}")),
        "the limit is logged: {}",
        p.log()
    );
    // A connection opened (and used) before the descriptors run out.
    let mut early = RawClient::new(connect(&socket), Shape::default()).unwrap();
    assert_eq!(path_exists(&mut early, &existing).unwrap(), (0, true));

    // More idle connections than descriptors: the rest wait in the queue.
    let idle: Vec<UnixStream> = (0..LIMIT + 32).map(|_| connect(&socket)).collect();
    let deadline = Instant::now() + PATIENCE;
    while !p.log().contains("out of file descriptors") {
        assert!(Instant::now() < deadline, "no EMFILE: {}", p.log());
        std::thread::sleep(Duration::from_millis(50));
    }

    // Exhausted, it does not spin: over 5 s it uses under a tenth of one
    // CPU. (It uses next to nothing; a retry loop without a pause was
    // measured here at over a third of one CPU on a busy machine.)
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    let window = Duration::from_secs(5);
    let before = cpu_ticks(pid);
    std::thread::sleep(window);
    let used = cpu_ticks(pid) - before;
    let bound = window.as_secs() * hz / 10;
    assert!(
        used < bound,
        "{used} ticks of CPU in {window:?} (bound {bound})"
    );
    eprintln!("{used} ticks of CPU in {window:?} while out of descriptors");
    assert!(p.child.as_mut().unwrap().try_wait().unwrap().is_none());

    // The connection opened before is still served: the call is answered,
    // though the host operation itself may lack a descriptor.
    let (status, exists) = path_exists(&mut early, &existing).unwrap();
    assert!(
        (status == 0 && exists) || status == 8,
        "status {status}, exists {exists}"
    );

    // The idle clients leave: descriptors are freed, and new connections
    // are accepted and served again.
    drop(idle);
    let (mut c, _) = served_again(&socket, &existing);
    assert_eq!(path_exists(&mut c, &existing).unwrap(), (0, true));
    assert_eq!(path_exists(&mut early, &existing).unwrap(), (0, true));
    let log = p.log();
    assert!(log.contains("accepting connections again"), "{log}");
    assert!(!log.contains("panicked"), "{log}");
    assert!(p.terminate().success());
}
