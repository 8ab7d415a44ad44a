//! The Linux iSCSI backend: open-iscsi. Portals are `iscsiadm` discovery
//! records, logins are node records; `iscsiadm` runs through the counted
//! runner (`storage::linux::tools`) with a fixed argv built from validated
//! values, an empty environment and no shell. CHAP secrets never go on a
//! command line (any local user can read `/proc/*/cmdline`): they are
//! written into the node record (`/etc/iscsi/nodes`, root-only 0600 files
//! that iscsiadm itself keeps them in), replaced atomically. Session disks
//! are read from sysfs, numbered like the Linux Disk API (`diskseq`).
//!
//! SetMutualChapSecret keeps the secret in this process's memory (wiped
//! when replaced) and applies it to later MUTUAL_CHAP logins, with the
//! initiator name as the target's user name, as Windows does.

use super::api::IscsiBackend;
use super::validate::{Auth, Iqn, Portal, Secret};
use super::TargetPortal;
use crate::storage::linux::{in_use, tools};
use crate::{Error, Result};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use zeroize::Zeroizing;

/// The open-iscsi backend.
pub struct LinuxIscsi {
    nodes: PathBuf,
    initiator_file: PathBuf,
    sysfs: PathBuf,
    dev_dir: PathBuf,
    mutual: Mutex<Option<Secret>>,
}

impl Default for LinuxIscsi {
    fn default() -> Self {
        LinuxIscsi {
            nodes: PathBuf::from("/etc/iscsi/nodes"),
            initiator_file: PathBuf::from("/etc/iscsi/initiatorname.iscsi"),
            sysfs: PathBuf::from("/sys"),
            dev_dir: PathBuf::from("/dev"),
            mutual: Mutex::new(None),
        }
    }
}

/// An `iscsiadm` exit code (open-iscsi's `ISCSI_ERR_*`) → host error.
pub fn exit_error(code: i32, what: &str, stderr: &str) -> Error {
    let detail: String = stderr
        .lines()
        .filter(|l| l.starts_with("iscsiadm:"))
        .collect::<Vec<_>>()
        .join("; ");
    let msg = |why: &str| format!("{what}: {why} (iscsiadm exit {code}: {detail})");
    match code {
        2 => Error::NotFound(msg("no such session")),
        21 => Error::NotFound(msg("no such record")),
        12 => Error::FailedPrecondition(msg(
            "the iSCSI TCP transport is not available (kernel module iscsi_tcp not loaded)",
        )),
        18 | 20 => Error::FailedPrecondition(msg("cannot talk to iscsid (is it running?)")),
        13 => Error::PermissionDenied(msg("access denied")),
        19 | 24 => Error::PermissionDenied(msg("the target refused the login (authentication)")),
        5 | 8 | 11 | 4 | 29 | 28 => {
            Error::FailedPrecondition(msg("the target could not be reached or logged in to"))
        }
        15 => Error::AlreadyExists(msg("a session exists already")),
        _ => Error::Internal(msg("iscsiadm failed")),
    }
}

fn adm(what: &str, args: &[&str], ok: &[i32]) -> Result<String> {
    let (code, out, err) = tools::capture("iscsiadm", args)?;
    if code == 0 || ok.contains(&code) {
        return Ok(out);
    }
    Err(exit_error(code, what, &err))
}

/// `iscsiadm -m discoverydb` lines (`10.0.0.1:3260 via sendtargets`).
pub fn parse_discoverydb(out: &str) -> Vec<TargetPortal> {
    out.lines()
        .filter_map(|l| {
            let (hp, how) = l.trim().split_once(' ')?;
            if !how.contains("sendtargets") {
                return None;
            }
            let (host, port) = hp.rsplit_once(':')?;
            Some(TargetPortal {
                target_address: host
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .to_string(),
                target_port: port.parse().ok()?,
            })
        })
        .collect()
}

/// `--discover` / `-m node` lines (`10.0.0.1:3260,1 iqn.…`): the names.
pub fn parse_targets(out: &str) -> Vec<String> {
    let mut v: Vec<String> = out
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1).map(str::to_string))
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Replace (or add) `key = value` lines of a node record, keeping the rest.
pub fn edit_record(text: &str, set: &[(&str, &str)]) -> Zeroizing<String> {
    let mut out = Zeroizing::new(String::with_capacity(text.len() + 256));
    for line in text.lines() {
        let key = line.split('=').next().unwrap_or_default().trim();
        if set.iter().any(|(k, _)| *k == key) {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    for (k, v) in set {
        out.push_str(k);
        out.push_str(" = ");
        out.push_str(v);
        out.push('\n');
    }
    out
}

impl LinuxIscsi {
    pub fn new() -> Self {
        Self::default()
    }

    /// Use another node-record directory and sysfs root (tests).
    pub fn with_paths(mut self, nodes: &Path, initiator_file: &Path, sysfs: &Path) -> Self {
        self.nodes = nodes.to_path_buf();
        self.initiator_file = initiator_file.to_path_buf();
        self.sysfs = sysfs.to_path_buf();
        self
    }

    /// The record files of a node (`<iqn>/<addr>,<port>` or
    /// `<iqn>/<addr>,<port>,<tpgt>/<iface>`).
    fn record_files(&self, portal: &Portal, iqn: &Iqn) -> Vec<PathBuf> {
        let dir = self.nodes.join(iqn.as_str());
        let prefixes = [
            format!("{},{}", portal.address(), portal.port()),
            format!("[{}],{}", portal.address(), portal.port()),
        ];
        let mut out = Vec::new();
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return out;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !prefixes
                .iter()
                .any(|p| name == *p || name.starts_with(&format!("{p},")))
            {
                continue;
            }
            let path = e.path();
            match std::fs::symlink_metadata(&path) {
                Ok(m) if m.is_file() => out.push(path),
                Ok(m) if m.is_dir() => {
                    if let Ok(inner) = std::fs::read_dir(&path) {
                        out.extend(inner.flatten().map(|i| i.path()).filter(|p| p.is_file()));
                    }
                }
                _ => {}
            }
        }
        out
    }

    /// Write secrets into the node's record files: a new 0600 file in the
    /// same directory, renamed over the old one.
    fn write_secrets(&self, portal: &Portal, iqn: &Iqn, set: &[(&str, &str)]) -> Result<()> {
        let files = self.record_files(portal, iqn);
        if files.is_empty() {
            return Err(Error::Internal(format!(
                "connect {iqn} via {portal}: iscsiadm created no node record under {}",
                self.nodes.display()
            )));
        }
        for f in files {
            let text = Zeroizing::new(
                std::fs::read_to_string(&f)
                    .map_err(|e| Error::io("read", f.display().to_string(), e))?,
            );
            let new = edit_record(&text, set);
            let tmp = f.with_extension("csi-proxy-tmp");
            let _ = std::fs::remove_file(&tmp);
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)
                .map_err(|e| Error::io("create", tmp.display().to_string(), e))?;
            file.write_all(new.as_bytes())
                .and_then(|_| file.sync_all())
                .map_err(|e| Error::io("write", tmp.display().to_string(), e))?;
            std::fs::rename(&tmp, &f)
                .map_err(|e| Error::io("rename", f.display().to_string(), e))?;
        }
        Ok(())
    }

    fn initiator_name(&self) -> Result<String> {
        let text = std::fs::read_to_string(&self.initiator_file)
            .map_err(|e| Error::io("read", self.initiator_file.display().to_string(), e))?;
        text.lines()
            .find_map(|l| l.trim().strip_prefix("InitiatorName=").map(str::to_string))
            .ok_or_else(|| {
                Error::FailedPrecondition(format!(
                    "{} has no InitiatorName",
                    self.initiator_file.display()
                ))
            })
    }

    /// The sysfs session directories logged in to `iqn` through `portal`.
    fn sessions(&self, portal: &Portal, iqn: &Iqn) -> Vec<PathBuf> {
        session_entries(&self.sysfs)
            .into_iter()
            .filter(|s| {
                s.target.eq_ignore_ascii_case(iqn.as_str())
                    && s.address == portal.address()
                    && s.port == portal.port().to_string()
            })
            .map(|s| s.dir)
            .collect()
    }

    /// The kernel names of the disks below a session's device
    /// (`device/target*/<h:c:t:l>/block/<name>`).
    fn session_block_names(&self, session: &Path) -> Vec<String> {
        let mut out = Vec::new();
        let dev = session.join("device");
        let mut stack = vec![(dev, 0)];
        while let Some((d, depth)) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let p = e.path();
                if name == "block" {
                    for b in std::fs::read_dir(&p).into_iter().flatten().flatten() {
                        out.push(b.file_name().to_string_lossy().into_owned());
                    }
                } else if depth < 4
                    && (name.starts_with("target")
                        || name.chars().next().is_some_and(|c| c.is_ascii_digit()))
                    && p.is_dir()
                    && !std::fs::symlink_metadata(&p)
                        .map(|m| m.file_type().is_symlink())
                        .unwrap_or(true)
                {
                    stack.push((p, depth + 1));
                }
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// The `diskseq` numbers of the disks below a session's device.
    fn session_disks(&self, session: &Path) -> Vec<u32> {
        let mut out: Vec<u32> = self
            .session_block_names(session)
            .iter()
            .filter_map(|b| {
                let seq = self.sysfs.join("block").join(b).join("diskseq");
                std::fs::read_to_string(seq)
                    .ok()
                    .and_then(|s| s.trim().parse::<u32>().ok())
            })
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Claims every disk of the sessions of `iqn` via `portal` (see
    /// [`in_use`]), refusing while one of them, or a partition of one, is
    /// mounted anywhere, held (device mapper, md, swap), open exclusively,
    /// backs a loop device or is open in a process: the same question as
    /// SetDiskState(offline) asks, naming the uses. The claims are held
    /// until the logout is done, so nothing can mount a disk in between.
    fn claim_disks(&self, portal: &Portal, iqn: &Iqn) -> Result<Vec<in_use::Claim>> {
        let mut claims = Vec::new();
        for s in self.sessions(portal, iqn) {
            for name in self.session_block_names(&s) {
                match in_use::claim_disk(&self.sysfs, &self.dev_dir, &name)? {
                    Ok(Some(c)) => claims.push(c),
                    Ok(None) => {}
                    Err((n, uses)) => {
                        return Err(Error::FailedPrecondition(format!(
                            "cannot disconnect {iqn} via {portal}: its disk {n} ({name}) is in use \
                             ({uses}); unmount it first"
                        )))
                    }
                }
            }
        }
        Ok(claims)
    }
}

impl IscsiBackend for LinuxIscsi {
    fn add_portal(&self, portal: &Portal) -> Result<()> {
        let hp = portal.host_port();
        if self.list_portals()?.iter().any(|p| same_portal(p, portal)) {
            return Ok(());
        }
        adm(
            &format!("add target portal {portal}"),
            &[
                "-m",
                "discoverydb",
                "-t",
                "sendtargets",
                "-p",
                &hp,
                "-o",
                "new",
            ],
            &[],
        )
        .map(|_| ())
    }

    fn discover(&self, portal: &Portal) -> Result<Vec<String>> {
        if !self.list_portals()?.iter().any(|p| same_portal(p, portal)) {
            return Err(Error::NotFound(format!(
                "target portal {portal} is not in the initiator's list (AddTargetPortal first)"
            )));
        }
        let hp = portal.host_port();
        let out = adm(
            &format!("discover targets of {portal}"),
            &[
                "-m",
                "discoverydb",
                "-t",
                "sendtargets",
                "-p",
                &hp,
                "--discover",
            ],
            &[],
        )?;
        Ok(parse_targets(&out))
    }

    fn remove_portal(&self, portal: &Portal) -> Result<()> {
        if !self.list_portals()?.iter().any(|p| same_portal(p, portal)) {
            return Err(Error::NotFound(format!(
                "target portal {portal} is not in the initiator's list"
            )));
        }
        let hp = portal.host_port();
        adm(
            &format!("remove target portal {portal}"),
            &[
                "-m",
                "discoverydb",
                "-t",
                "sendtargets",
                "-p",
                &hp,
                "-o",
                "delete",
            ],
            &[],
        )
        .map(|_| ())
    }

    fn list_portals(&self) -> Result<Vec<TargetPortal>> {
        let out = adm("list target portals", &["-m", "discoverydb"], &[21])?;
        Ok(parse_discoverydb(&out))
    }

    fn connect(&self, portal: &Portal, iqn: &Iqn, auth: &Auth) -> Result<()> {
        if !self.sessions(portal, iqn).is_empty() {
            return Ok(());
        }
        let what = format!("connect {iqn} via {portal}");
        let hp = portal.host_port();
        let node = ["-m", "node", "-T", iqn.as_str(), "-p", &hp];
        let update = |k: &str, v: &str| {
            let mut a = node.to_vec();
            a.extend(["-o", "update", "-n", k, "-v", v]);
            adm(&what, &a, &[]).map(|_| ())
        };
        let mut a = node.to_vec();
        a.extend(["-o", "new"]);
        adm(&what, &a, &[])?;
        let result = (|| {
            update("node.startup", "manual")?;
            match auth {
                Auth::None => update("node.session.auth.authmethod", "None"),
                Auth::OneWay { user, secret } | Auth::Mutual { user, secret } => {
                    update("node.session.auth.authmethod", "CHAP")?;
                    if !user.is_empty() {
                        update("node.session.auth.username", user)?;
                    }
                    let mut set: Vec<(&str, &str)> =
                        vec![("node.session.auth.password", secret.expose())];
                    let initiator;
                    let mutual = self.mutual.lock().unwrap_or_else(|p| p.into_inner());
                    if matches!(auth, Auth::Mutual { .. }) {
                        let m = mutual.as_ref().ok_or_else(|| {
                            Error::FailedPrecondition(format!(
                                "{what}: MUTUAL_CHAP needs the initiator's mutual CHAP secret (SetMutualChapSecret first)"
                            ))
                        })?;
                        initiator = self.initiator_name()?;
                        set.push(("node.session.auth.username_in", &initiator));
                        set.push(("node.session.auth.password_in", m.expose()));
                    }
                    self.write_secrets(portal, iqn, &set)
                }
            }?;
            let mut a = node.to_vec();
            a.push("--login");
            adm(&what, &a, &[15]).map(|_| ())
        })();
        if result.is_err() {
            // Leave no record (and no secret) behind a failed login.
            let mut a = node.to_vec();
            a.extend(["-o", "delete"]);
            let _ = adm(&what, &a, &[21]);
        }
        result
    }

    fn disconnect(&self, portal: &Portal, iqn: &Iqn) -> Result<()> {
        // Held until the logout has returned.
        let _claims = self.claim_disks(portal, iqn)?;
        #[cfg(test)]
        in_use::hooks::claimed(iqn.as_str());
        let what = format!("disconnect {iqn} via {portal}");
        let hp = portal.host_port();
        let node = ["-m", "node", "-T", iqn.as_str(), "-p", &hp];
        let mut a = node.to_vec();
        a.push("--logout");
        adm(&what, &a, &[21])?;
        // The node record would log in again at boot: forget it.
        let mut a = node.to_vec();
        a.extend(["-o", "delete"]);
        adm(&what, &a, &[21]).map(|_| ())
    }

    fn target_disks(&self, portal: &Portal, iqn: &Iqn) -> Result<Vec<u32>> {
        let mut out: Vec<u32> = self
            .sessions(portal, iqn)
            .iter()
            .flat_map(|s| self.session_disks(s))
            .collect();
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }

    fn set_mutual_chap_secret(&self, secret: Option<&Secret>) -> Result<()> {
        *self.mutual.lock().unwrap_or_else(|p| p.into_inner()) = secret.cloned();
        Ok(())
    }
}

/// One iSCSI session the kernel has logged in (`/sys/class/iscsi_session`).
struct SessionEntry {
    dir: PathBuf,
    target: String,
    address: String,
    port: String,
}

fn session_entries(sysfs: &Path) -> Vec<SessionEntry> {
    let class = sysfs.join("class/iscsi_session");
    let Ok(entries) = std::fs::read_dir(&class) else {
        return Vec::new();
    };
    let read = |p: PathBuf| {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(n) = name.strip_prefix("session") else {
            continue;
        };
        let conn = sysfs.join(format!("class/iscsi_connection/connection{n}:0"));
        out.push(SessionEntry {
            target: read(e.path().join("targetname")),
            address: read(conn.join("persistent_address")),
            port: read(conn.join("persistent_port")),
            dir: e.path(),
        });
    }
    out
}

/// Every iSCSI session logged in on this node, as `target at
/// address:port` (the System API's guard of the iSCSI daemon), sorted.
pub fn logged_in_sessions(sysfs: &Path) -> Vec<String> {
    let mut v: Vec<String> = session_entries(sysfs)
        .into_iter()
        .map(|s| {
            let target = if s.target.is_empty() {
                "an unnamed target".to_string()
            } else {
                s.target
            };
            format!("{target} at {}:{}", s.address, s.port)
        })
        .collect();
    v.sort();
    v
}

fn same_portal(p: &TargetPortal, q: &Portal) -> bool {
    p.target_address.eq_ignore_ascii_case(q.address()) && p.target_port == u32::from(q.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iscsiadm_output() {
        assert_eq!(
            parse_discoverydb(
                "127.0.0.1:3261 via sendtargets\n[fd00::1]:3260 via sendtargets\nx via isns\n"
            ),
            vec![
                TargetPortal {
                    target_address: "127.0.0.1".into(),
                    target_port: 3261
                },
                TargetPortal {
                    target_address: "fd00::1".into(),
                    target_port: 3260
                },
            ]
        );
        assert_eq!(
            parse_targets("127.0.0.1:3261,1 iqn.2026-01.io.example:t2\n127.0.0.1:3261,1 iqn.2026-01.io.example:t1\n[::1]:3261,1 iqn.2026-01.io.example:t1\n"),
            vec!["iqn.2026-01.io.example:t1".to_string(), "iqn.2026-01.io.example:t2".to_string()]
        );
    }

    #[test]
    fn exit_codes() {
        let err = "System has not been booted with systemd\niscsiadm: can not connect to iSCSI daemon (111)!\n";
        let e = exit_error(20, "connect t", err);
        assert!(matches!(e, Error::FailedPrecondition(_)), "{e}");
        assert!(
            e.to_string().contains("iscsid") && !e.to_string().contains("systemd"),
            "{e}"
        );
        assert!(
            matches!(exit_error(12, "x", ""), Error::FailedPrecondition(m) if m.contains("iscsi_tcp"))
        );
        assert!(matches!(
            exit_error(24, "x", ""),
            Error::PermissionDenied(_)
        ));
        assert!(matches!(exit_error(21, "x", ""), Error::NotFound(_)));
        assert!(matches!(exit_error(99, "x", ""), Error::Internal(_)));
    }

    #[test]
    fn records_are_edited_in_place() {
        let rec = "node.name = iqn.x\nnode.session.auth.authmethod = CHAP\nnode.session.auth.password = old\nnode.tpgt = -1\n";
        let new = edit_record(rec, &[("node.session.auth.password", "n3w-secret-xx")]);
        assert_eq!(
            new.as_str(),
            "node.name = iqn.x\nnode.session.auth.authmethod = CHAP\nnode.tpgt = -1\nnode.session.auth.password = n3w-secret-xx\n"
        );
    }

    #[test]
    fn secrets_go_into_the_record_file_only() {
        let t = tempfile::tempdir().unwrap();
        let iqn = Iqn::parse("iqn.2026-01.io.example:t1").unwrap();
        let portal = Portal::parse(&TargetPortal {
            target_address: "127.0.0.1".into(),
            target_port: 3261,
        })
        .unwrap();
        let dir = t.path().join("nodes").join(iqn.as_str());
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("127.0.0.1,3261"), "node.name = iqn\n").unwrap();
        std::fs::write(dir.join("127.0.0.1,32610"), "other\n").unwrap();
        let b =
            LinuxIscsi::new().with_paths(&t.path().join("nodes"), &t.path().join("i"), t.path());
        b.write_secrets(
            &portal,
            &iqn,
            &[("node.session.auth.password", "secret-value-1")],
        )
        .unwrap();
        let f = dir.join("127.0.0.1,3261");
        assert!(std::fs::read_to_string(&f)
            .unwrap()
            .ends_with("node.session.auth.password = secret-value-1\n"));
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&f).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("127.0.0.1,32610")).unwrap(),
            "other\n"
        );
        assert!(b.target_disks(&portal, &iqn).unwrap().is_empty());
    }
}
