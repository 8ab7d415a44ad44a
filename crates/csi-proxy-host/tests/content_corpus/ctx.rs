//! A case's working state and the commands it runs: its image, the loop
//! devices, volume groups and arrays it made (undone on drop).

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::cases::{KEY, LUKS_FAST, MIB};

/// One case's working state: its directory, its image, the loop devices
/// and volume groups it made (undone on drop, in reverse order).
pub struct Ctx {
    dir: tempfile::TempDir,
    img: PathBuf,
    /// What is probed: the image, or a loop device over it.
    pub target: PathBuf,
    undo: Vec<(String, Vec<String>)>,
}

impl Drop for Ctx {
    fn drop(&mut self) {
        while let Some((prog, args)) = self.undo.pop() {
            let out = Command::new(find_tool(&prog).unwrap_or_else(|| prog.clone().into()))
                .args(&args)
                .env("DM_DISABLE_UDEV", "1")
                .stdin(Stdio::null())
                .output();
            match out {
                Ok(o) if o.status.success() => {}
                Ok(o) => eprintln!(
                    "cleanup {prog} {args:?} failed: {}",
                    String::from_utf8_lossy(&o.stderr)
                ),
                Err(e) => eprintln!("cleanup {prog} {args:?} failed: {e}"),
            }
        }
    }
}

impl Ctx {
    pub fn new() -> Ctx {
        let dir = tempfile::tempdir().expect("tempdir");
        let img = dir.path().join("image");
        Ctx {
            target: img.clone(),
            img,
            dir,
            undo: Vec::new(),
        }
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn img(&self) -> &Path {
        &self.img
    }

    /// The image as a sparse file of `mib` MiB.
    pub fn sized(&self, mib: u64) -> Result<(), String> {
        File::create(&self.img)
            .and_then(|f| f.set_len(mib * MIB))
            .map_err(|e| format!("create image: {e}"))
    }

    /// A sparse image of `mib` MiB formatted by `prog args image`.
    pub fn mkfs(&self, mib: u64, prog: &str, args: &[&str]) -> Result<(), String> {
        self.sized(mib)?;
        self.tool(prog, args, &[&self.img])
    }

    pub fn sfdisk(&self, mib: u64, script: &str) -> Result<(), String> {
        self.sized(mib)?;
        self.tool_stdin("sfdisk", &["-q"], &[&self.img], script)
    }

    pub fn luks(&self, kind: &str) -> Result<(), String> {
        self.sized(32)?;
        let key = self.dir().join("key");
        std::fs::write(&key, KEY).map_err(|e| e.to_string())?;
        let mut args = vec!["luksFormat", "--type", kind, "--key-file"];
        let key = key.to_str().ok_or("key path")?.to_string();
        args.push(&key);
        args.extend_from_slice(LUKS_FAST);
        self.tool("cryptsetup", &args, &[&self.img])
    }

    /// A small tree for the image builders that take one.
    pub fn source_tree(&self) -> Result<PathBuf, String> {
        let src = self.dir().join("src");
        std::fs::create_dir_all(src.join("d")).map_err(|e| e.to_string())?;
        std::fs::write(src.join("d/file"), b"corpus\n").map_err(|e| e.to_string())?;
        Ok(src)
    }

    /// Writes `bytes` at `off` of the image.
    pub fn put(&self, off: u64, bytes: &[u8]) -> Result<(), String> {
        let mut f = OpenOptions::new()
            .write(true)
            .open(&self.img)
            .map_err(|e| e.to_string())?;
        f.seek(SeekFrom::Start(off)).map_err(|e| e.to_string())?;
        f.write_all(bytes).map_err(|e| e.to_string())?;
        f.sync_all().map_err(|e| e.to_string())
    }

    /// An image of `mib` MiB, zero but for `bytes` at each offset: for
    /// the formats no Debian package makes, laid out as libblkid reads
    /// them.
    pub fn handmade(&self, mib: u64, puts: &[(u64, &[u8])]) -> Result<(), String> {
        self.sized(mib)?;
        puts.iter()
            .try_for_each(|&(off, bytes)| self.put(off, bytes))
    }

    /// Zeroes `len` bytes at `off` of the image.
    pub fn zero(&self, off: u64, len: usize) -> Result<(), String> {
        let mut f = OpenOptions::new()
            .write(true)
            .open(&self.img)
            .map_err(|e| e.to_string())?;
        f.seek(SeekFrom::Start(off)).map_err(|e| e.to_string())?;
        f.write_all(&vec![0; len]).map_err(|e| e.to_string())?;
        f.sync_all().map_err(|e| e.to_string())
    }

    /// Runs `prog args more`: `more` holds paths, and options that must
    /// come after them.
    pub fn tool(&self, prog: &str, args: &[&str], more: &[&Path]) -> Result<(), String> {
        self.tool_stdin(prog, args, more, "")
    }

    pub fn tool_stdin(
        &self,
        prog: &str,
        args: &[&str],
        paths: &[&Path],
        stdin: &str,
    ) -> Result<(), String> {
        run(prog, args, paths, stdin).map(drop)
    }

    /// Registers `prog args` to run when the case ends.
    pub fn cleanup(&mut self, prog: &str, args: &[&str]) {
        self.undo.push((
            prog.to_string(),
            args.iter().map(|a| a.to_string()).collect(),
        ));
    }

    /// A loop device over the image, detached when the case ends; the
    /// case probes it instead of the file.
    pub fn attach(&mut self) -> Result<String, String> {
        let dev = self.loop_over(&self.img.clone())?;
        self.target = PathBuf::from(&dev);
        Ok(dev)
    }

    pub fn loop_over(&mut self, file: &Path) -> Result<String, String> {
        let out = run("losetup", &["--find", "--show"], &[file], "")?;
        let dev = out.trim().to_string();
        if !dev.starts_with("/dev/loop") {
            return Err(format!("losetup printed {dev:?}"));
        }
        self.cleanup("losetup", &["-d", &dev]);
        Ok(dev)
    }

    /// An LVM command confined to the case's loop device (`--devices`),
    /// without udev.
    pub fn lvm(&self, prog: &str, args: &[&str]) -> Result<(), String> {
        let dev = self.target.to_str().ok_or("device path")?.to_string();
        let mut all = vec!["--devices", dev.as_str()];
        all.extend_from_slice(args);
        run(prog, &all, &[], "").map(drop)
    }

    /// A two-member md array (or, for DDF and IMSM, a container) with
    /// `metadata` on two loop devices; the first member is probed while it
    /// runs, and the array is stopped and its superblocks wiped when the
    /// case ends.
    pub fn md(&mut self, metadata: &str) -> Result<(), String> {
        if !Path::new("/proc/mdstat").exists() {
            return Err(SKIP_NO_MD.to_string());
        }
        self.sized(64)?;
        let second = self.dir().join("second");
        File::create(&second)
            .and_then(|f| f.set_len(64 * MIB))
            .map_err(|e| e.to_string())?;
        let a = self.attach()?;
        let b = self.loop_over(&second)?;
        let name = format!("/dev/md/csi_corpus_{}_{}", std::process::id(), metadata);
        let meta = format!("--metadata={metadata}");
        let container = matches!(metadata, "ddf" | "imsm");
        let mut args = vec!["--create", name.as_str(), "--run", meta.as_str()];
        if container {
            args.push("--level=container");
        } else {
            args.extend(["--level=1", "--bitmap=none"]);
        }
        args.extend(["--raid-devices=2", a.as_str(), b.as_str()]);
        let out = Command::new(find_tool("mdadm").ok_or("mdadm")?)
            .args(&args)
            .env("IMSM_NO_PLATFORM", "1")
            .env("IMSM_DEVNAME_AS_SERIAL", "1")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| e.to_string())?;
        // Undone in reverse: the array stopped, the members' superblocks
        // wiped (so that udev does not assemble them again), then the
        // loop devices detached.
        self.cleanup("mdadm", &["--zero-superblock", &a, &b]);
        if out.status.success() {
            self.cleanup("mdadm", &["--stop", &name]);
            Ok(())
        } else {
            Err(format!(
                "mdadm {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }
}

const SKIP_NO_MD: &str = "skip: this kernel has no md driver (no /proc/mdstat)";

/// Runs `prog args paths` with `stdin`; its stdout, or an error naming the
/// command and its stderr.
pub fn run(prog: &str, args: &[&str], paths: &[&Path], stdin: &str) -> Result<String, String> {
    let exe = find_tool(prog).ok_or_else(|| format!("{prog}: not found"))?;
    let mut child = Command::new(exe)
        .args(args)
        .args(paths)
        .env("DM_DISABLE_UDEV", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{prog}: {e}"))?;
    let mut input = child.stdin.take().expect("stdin");
    let _ = input.write_all(stdin.as_bytes());
    drop(input);
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "{prog} {args:?} {paths:?}: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

pub fn find_tool(prog: &str) -> Option<PathBuf> {
    if prog.contains('/') {
        return Some(prog.into());
    }
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path
        .split(':')
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"])
        .map(|d| Path::new(d).join(prog))
        .find(|p| p.is_file());
    found
}

/// The apt packages scripts/setup.sh installs.
pub fn setup_packages() -> BTreeSet<String> {
    let setup = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/setup.sh");
    let text = std::fs::read_to_string(setup).unwrap_or_default();
    let Some(start) = text.find("apt_packages=(") else {
        return BTreeSet::new();
    };
    let body = &text[start + "apt_packages=(".len()..];
    let body = &body[..body.find(')').unwrap_or(body.len())];
    body.lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .flat_map(str::split_whitespace)
        .map(str::to_string)
        .collect()
}

pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}
