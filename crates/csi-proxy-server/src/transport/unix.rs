//! Unix-socket endpoints: `<dir>/csi-proxy-<group>-<version>.sock`.

pub use super::socket_dir::prepare_dir;
use nix::sys::stat::{umask, Mode};
use nix::unistd::geteuid;
use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use tokio::net::{UnixListener, UnixStream};

/// The default socket directory: `/run/csi-proxy` for root; otherwise
/// `$XDG_RUNTIME_DIR/csi-proxy`, or `/tmp/csi-proxy-<uid>` without one.
pub fn default_socket_dir() -> PathBuf {
    let uid = geteuid();
    if uid.is_root() {
        return PathBuf::from("/run/csi-proxy");
    }
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) if Path::new(&d).is_absolute() => Path::new(&d).join("csi-proxy"),
        _ => PathBuf::from(format!("/tmp/csi-proxy-{uid}")),
    }
}

/// The socket path of an endpoint name inside `dir`.
pub fn socket_path(dir: &Path, endpoint_name: &str) -> PathBuf {
    dir.join(format!("{endpoint_name}.sock"))
}

/// A bound socket; the socket file is removed when it is dropped (if it is
/// still the one this process created). A socket handed over by systemd
/// is systemd's: its file stays, so clients keep connecting (and wait in
/// its backlog) while the proxy restarts.
pub struct UnixEndpoint {
    listener: UnixListener,
    path: PathBuf,
    /// The inode of the socket file this process created; `None` for a
    /// handed-over socket.
    ino: Option<u64>,
}

impl UnixEndpoint {
    /// Bind `path` with file mode `mode`. A stale socket file (nobody
    /// listening) is replaced; a live one means another proxy is serving and
    /// is an error; any other kind of file is left alone and is an error.
    pub fn bind(path: &Path, mode: u32) -> io::Result<UnixEndpoint> {
        match fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_socket() => {
                match std::os::unix::net::UnixStream::connect(path) {
                    Ok(_) => {
                        return Err(io::Error::new(
                            io::ErrorKind::AddrInUse,
                            format!(
                                "{} is served by another process: is another csi-proxy running?",
                                path.display()
                            ),
                        ))
                    }
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                        tracing::info!(path = %path.display(), "replacing stale socket");
                        fs::remove_file(path)?;
                    }
                    Err(e) => {
                        return Err(io::Error::new(
                            e.kind(),
                            format!("probe existing socket {}: {e}", path.display()),
                        ))
                    }
                }
            }
            Ok(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!(
                        "{} exists and is not a socket; refusing to replace it",
                        path.display()
                    ),
                ))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        // Never let the socket exist with a wider mode than asked, not even
        // between bind and chmod.
        let old = umask(Mode::from_bits_truncate(0o777 & !mode));
        let bound = UnixListener::bind(path);
        umask(old);
        let listener =
            bound.map_err(|e| io::Error::new(e.kind(), format!("bind {}: {e}", path.display())))?;
        fs::set_permissions(path, fs::Permissions::from_mode(mode))?;
        let ino = fs::symlink_metadata(path)?.ino();
        Ok(UnixEndpoint {
            listener,
            path: path.to_path_buf(),
            ino: Some(ino),
        })
    }

    /// Serve a listening socket handed over by systemd (see
    /// [`super::activation`]); `path` is where it is bound. Its file is
    /// never removed by this process. Needs a tokio runtime.
    pub fn from_handed(fd: std::os::fd::OwnedFd, path: &Path) -> io::Result<UnixEndpoint> {
        let std_listener = std::os::unix::net::UnixListener::from(fd);
        std_listener.set_nonblocking(true)?;
        Ok(UnixEndpoint {
            listener: UnixListener::from_std(std_listener)?,
            path: path.to_path_buf(),
            ino: None,
        })
    }

    /// Whether the socket was handed over by systemd.
    pub fn is_handed(&self) -> bool {
        self.ino.is_none()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub async fn accept(&mut self) -> io::Result<UnixStream> {
        self.listener.accept().await.map(|(s, _)| s)
    }
}

impl Drop for UnixEndpoint {
    fn drop(&mut self) {
        let Some(ino) = self.ino else { return };
        if fs::symlink_metadata(&self.path).is_ok_and(|m| m.ino() == ino) {
            let _ = fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn binds_with_mode_and_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        let p = socket_path(dir.path(), "csi-proxy-filesystem-v1");
        let ep = UnixEndpoint::bind(&p, 0o600).unwrap();
        let m = fs::metadata(&p).unwrap();
        assert!(m.file_type().is_socket());
        assert_eq!(m.mode() & 0o777, 0o600);
        drop(ep);
        assert!(!p.exists());
    }

    #[tokio::test]
    async fn live_socket_is_not_stolen_and_stale_one_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let p = socket_path(dir.path(), "x");
        let first = UnixEndpoint::bind(&p, 0o600).unwrap();
        let err = UnixEndpoint::bind(&p, 0o600).err().unwrap();
        assert_eq!(err.kind(), io::ErrorKind::AddrInUse);
        assert!(err.to_string().contains("another csi-proxy"), "{err}");
        drop(first);
        // A stale socket: bound by a listener that is gone, file left behind.
        let p2 = dir.path().join("y.sock");
        drop(std::os::unix::net::UnixListener::bind(&p2).unwrap());
        assert!(p2.exists());
        UnixEndpoint::bind(&p2, 0o600).unwrap();
    }

    #[tokio::test]
    async fn a_handed_socket_is_served_and_its_file_left_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let p = socket_path(dir.path(), "csi-proxy-filesystem-v1");
        let l = std::os::unix::net::UnixListener::bind(&p).unwrap();
        let mut ep = UnixEndpoint::from_handed(l.into(), &p).unwrap();
        assert!(ep.is_handed());
        let client = tokio::spawn({
            let p = p.clone();
            async move { UnixStream::connect(&p).await.unwrap() }
        });
        ep.accept().await.unwrap();
        client.await.unwrap();
        drop(ep);
        assert!(fs::symlink_metadata(&p).unwrap().file_type().is_socket());
    }

    #[tokio::test]
    async fn other_files_are_never_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.sock");
        fs::write(&p, b"data").unwrap();
        let err = UnixEndpoint::bind(&p, 0o600).err().unwrap();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read(&p).unwrap(), b"data");
    }
}
