//! `storage::parse::content` against `blkid -p` over a corpus of real
//! images, made by the real tools Debian packages (mkfs.*, cryptsetup,
//! lvm2, bcache-tools, drbd-utils, sfdisk, ...): for every image, both must
//! find something, every `TYPE`/`PTTYPE` blkid prints must be among the
//! names `identify` returns, and every name `identify` returns must be
//! blkid's or one the case expects (a format blkid reports only one of,
//! or a disagreement explained in [`KNOWN`]).
//!
//! With `CSI_PROXY_SAMPLE_IMAGES` naming a directory of images (`*.img`,
//! or `*.img.xz` when xz is installed: for example util-linux's
//! tests/ts/blkid/images-fs and images-pt, libblkid's own samples, made
//! by the formats' tools and by other systems), each is compared the same
//! way; [`SAMPLE_KNOWN`] explains the differences.
//!
//! A case whose tool is missing is skipped with a message, unless `CI` is
//! set and the tool's package is in scripts/setup.sh's apt list: then it
//! fails. Cases that need a block device (LVM, md) run as root on loop
//! devices they create, and remove what they made (loop devices, volume
//! groups) on every path, panics included; they never touch a device they
//! did not create.
#![cfg(target_os = "linux")]

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use csi_proxy_host::storage::parse::content::{identify, read_regions, Device};

/// Where blkid's answer differs from ours by design or by blkid version:
/// (case, name, why). A name listed here may be missing on either side.
const KNOWN: &[(&str, &str, &str)] = &[
    (
        "exfat",
        "dos",
        "libblkid 2.38's dos probe takes an exFAT boot sector for an empty MBR; \
         later versions skip exFAT boot sectors, as we do",
    ),
    (
        "gpt-backup-only",
        "gpt",
        "libblkid needs the protective MBR to look for a GPT; the backup header \
         at the end still describes the partitions, so we report it",
    ),
];

/// Sample images (by file name without `.img.xz`) where blkid 2.38 and we
/// differ: (image, name, why).
const SAMPLE_KNOWN: &[(&str, &str, &str)] = &[
    ("bcachefs", "bcachefs", NEWER_THAN_238),
    ("bcachefs-2", "bcachefs", NEWER_THAN_238),
    ("bcachefs-3", "bcachefs", NEWER_THAN_238),
    ("cs_fvault2", "cs_fvault2", NEWER_THAN_238),
    (
        "bsd",
        "bsd",
        "libblkid reports a BSD disklabel only when asked for partition \
         details (blkid -p asks for types only); we report it",
    ),
    (
        "erofs-minix-magic",
        "erofs",
        "an EROFS image whose inode count reads as a minix magic: libblkid 2.38 \
         finds both and answers \"ambivalent\" (later versions check for EROFS, \
         as we do)",
    ),
    (
        "swap-luks",
        "swap",
        "a swap signature left inside a LUKS header's unused space: libblkid \
         stops at the first crypto or RAID member; we report every signature",
    ),
    (
        "tuxonice",
        "swap",
        "a TuxOnIce image keeps the swap signature in its first page: libblkid \
         reports the first match only (in this order); we report both",
    ),
];

const NEWER_THAN_238: &str = "libblkid learned this format after 2.38 (Debian 12's)";

struct Case {
    name: &'static str,
    /// The Debian package that provides `tools`.
    package: &'static str,
    tools: &'static [&'static str],
    /// Names `identify` must return (blkid's, plus any it reports only one
    /// of, such as iso9660 under UDF).
    expect: &'static [&'static str],
    /// Needs root and loop devices.
    block: bool,
    make: fn(&mut Ctx) -> Result<(), String>,
}

const fn case(
    name: &'static str,
    package: &'static str,
    tools: &'static [&'static str],
    expect: &'static [&'static str],
    make: fn(&mut Ctx) -> Result<(), String>,
) -> Case {
    Case {
        name,
        package,
        tools,
        expect,
        block: false,
        make,
    }
}

const fn block_case(
    name: &'static str,
    package: &'static str,
    tools: &'static [&'static str],
    expect: &'static [&'static str],
    make: fn(&mut Ctx) -> Result<(), String>,
) -> Case {
    Case {
        block: true,
        ..case(name, package, tools, expect, make)
    }
}

const MIB: u64 = 1 << 20;
const KEY: &str = "corpus-key";
const LUKS_FAST: &[&str] = &[
    "--pbkdf",
    "pbkdf2",
    "--pbkdf-force-iterations",
    "1000",
    "--batch-mode",
];

fn cases() -> Vec<Case> {
    vec![
        case("ext2", "e2fsprogs", &["mkfs.ext2"], &["ext2"], |c| {
            c.mkfs(64, "mkfs.ext2", &["-q", "-F"])
        }),
        case("ext3", "e2fsprogs", &["mkfs.ext3"], &["ext3"], |c| {
            c.mkfs(64, "mkfs.ext3", &["-q", "-F"])
        }),
        case("ext4", "e2fsprogs", &["mkfs.ext4"], &["ext4"], |c| {
            c.mkfs(64, "mkfs.ext4", &["-q", "-F"])
        }),
        case("jbd", "e2fsprogs", &["mkfs.ext4"], &["jbd"], |c| {
            c.mkfs(64, "mkfs.ext4", &["-q", "-F", "-O", "journal_dev"])
        }),
        case("xfs", "xfsprogs", &["mkfs.xfs"], &["xfs"], |c| {
            c.mkfs(300, "mkfs.xfs", &["-q", "-f"])
        }),
        case("btrfs", "btrfs-progs", &["mkfs.btrfs"], &["btrfs"], |c| {
            c.mkfs(128, "mkfs.btrfs", &["-q", "-f"])
        }),
        case("vfat-12", "dosfstools", &["mkfs.vfat"], &["vfat"], |c| {
            c.mkfs(1, "mkfs.vfat", &["-F", "12"])
        }),
        case("vfat-16", "dosfstools", &["mkfs.vfat"], &["vfat"], |c| {
            c.mkfs(64, "mkfs.vfat", &["-F", "16"])
        }),
        case("vfat-32", "dosfstools", &["mkfs.vfat"], &["vfat"], |c| {
            c.mkfs(64, "mkfs.vfat", &["-F", "32"])
        }),
        case("exfat", "exfatprogs", &["mkfs.exfat"], &["exfat"], |c| {
            c.mkfs(64, "mkfs.exfat", &[])
        }),
        case("ntfs", "ntfs-3g", &["mkfs.ntfs"], &["ntfs"], |c| {
            c.mkfs(64, "mkfs.ntfs", &["-q", "-F", "-f"])
        }),
        case("udf-512", "udftools", &["mkudffs"], &["udf"], |c| {
            c.mkfs(64, "mkudffs", &["-b", "512"])
        }),
        case("udf-2048", "udftools", &["mkudffs"], &["udf"], |c| {
            c.mkfs(64, "mkudffs", &["-b", "2048"])
        }),
        case("udf-4096", "udftools", &["mkudffs"], &["udf"], |c| {
            c.mkfs(64, "mkudffs", &["-b", "4096"])
        }),
        case(
            "iso9660",
            "genisoimage",
            &["genisoimage"],
            &["iso9660"],
            |c| {
                let src = c.source_tree()?;
                c.tool("genisoimage", &["-quiet", "-o"], &[c.img(), &src])
            },
        ),
        case(
            "iso9660-udf",
            "genisoimage",
            &["genisoimage"],
            &["udf", "iso9660"],
            |c| {
                let src = c.source_tree()?;
                c.tool("genisoimage", &["-quiet", "-udf", "-o"], &[c.img(), &src])
            },
        ),
        case(
            "squashfs",
            "squashfs-tools",
            &["mksquashfs"],
            &["squashfs"],
            |c| {
                let src = c.source_tree()?;
                let opts = [Path::new("-quiet"), Path::new("-noappend")];
                c.tool("mksquashfs", &[], &[&src, c.img(), opts[0], opts[1]])
            },
        ),
        case("f2fs", "f2fs-tools", &["mkfs.f2fs"], &["f2fs"], |c| {
            c.mkfs(64, "mkfs.f2fs", &["-q"])
        }),
        case(
            "nilfs2",
            "nilfs-tools",
            &["mkfs.nilfs2"],
            &["nilfs2"],
            |c| c.mkfs(200, "mkfs.nilfs2", &["-q", "-f"]),
        ),
        case(
            "nilfs2-backup",
            "nilfs-tools",
            &["mkfs.nilfs2"],
            &["nilfs2"],
            |c| {
                // The primary superblock gone: the secondary one at the
                // end is found.
                c.mkfs(200, "mkfs.nilfs2", &["-q", "-f"])?;
                c.zero(1024, 1024)
            },
        ),
        case("jfs", "jfsutils", &["mkfs.jfs"], &["jfs"], |c| {
            c.mkfs(64, "mkfs.jfs", &["-q"])
        }),
        case(
            "reiserfs-3.6",
            "reiserfsprogs",
            &["mkfs.reiserfs"],
            &["reiserfs"],
            |c| c.mkfs(64, "mkfs.reiserfs", &["-q", "-f"]),
        ),
        case(
            "reiserfs-3.5",
            "reiserfsprogs",
            &["mkfs.reiserfs"],
            &["reiserfs"],
            |c| c.mkfs(64, "mkfs.reiserfs", &["-q", "-f", "--format", "3.5"]),
        ),
        case(
            "reiser4",
            "reiser4progs",
            &["mkfs.reiser4"],
            &["reiser4"],
            |c| c.mkfs(64, "mkfs.reiser4", &["-y", "-f"]),
        ),
        case("erofs", "erofs-utils", &["mkfs.erofs"], &["erofs"], |c| {
            let src = c.source_tree()?;
            c.tool("mkfs.erofs", &[], &[c.img(), &src])
        }),
        case("gfs2", "gfs2-utils", &["mkfs.gfs2"], &["gfs2"], |c| {
            c.mkfs(64, "mkfs.gfs2", &["-O", "-p", "lock_nolock", "-j", "1"])
        }),
        case("ocfs2", "ocfs2-tools", &["mkfs.ocfs2"], &["ocfs2"], |c| {
            c.mkfs(64, "mkfs.ocfs2", &["-q", "-M", "local", "-F"])
        }),
        case("apfs", "apfsprogs", &["mkapfs"], &["apfs"], |c| {
            c.mkfs(256, "mkapfs", &[])
        }),
        case("hfs", "hfsutils", &["hformat"], &["hfs"], |c| {
            c.mkfs(64, "hformat", &["-f"])
        }),
        case("ubifs", "mtd-utils", &["mkfs.ubifs"], &["ubifs"], |c| {
            let src = c.source_tree()?;
            c.tool(
                "mkfs.ubifs",
                &["-m", "2048", "-e", "129024", "-c", "100", "-r"],
                &[&src, Path::new("-o"), c.img()],
            )
        }),
        case(
            "ubi",
            "mtd-utils",
            &["mkfs.ubifs", "ubinize"],
            &["ubi"],
            |c| {
                let src = c.source_tree()?;
                let fs = c.dir().join("ubifs.img");
                c.tool(
                    "mkfs.ubifs",
                    &["-m", "2048", "-e", "129024", "-c", "100", "-r"],
                    &[&src, Path::new("-o"), &fs],
                )?;
                let cfg = c.dir().join("ubi.cfg");
                std::fs::write(
                &cfg,
                format!(
                    "[v]\nmode=ubi\nimage={}\nvol_id=0\nvol_size=4MiB\nvol_type=dynamic\nvol_name=v\n",
                    fs.display()
                ),
            )
            .map_err(|e| e.to_string())?;
                c.tool(
                    "ubinize",
                    &["-m", "2048", "-p", "128KiB", "-o"],
                    &[c.img(), &cfg],
                )
            },
        ),
        case("minix-1", "util-linux", &["mkfs.minix"], &["minix"], |c| {
            c.mkfs(16, "mkfs.minix", &["-1"])
        }),
        case("minix-2", "util-linux", &["mkfs.minix"], &["minix"], |c| {
            c.mkfs(16, "mkfs.minix", &["-2"])
        }),
        case("minix-3", "util-linux", &["mkfs.minix"], &["minix"], |c| {
            c.mkfs(16, "mkfs.minix", &["-3"])
        }),
        case("cramfs", "util-linux", &["mkfs.cramfs"], &["cramfs"], |c| {
            let src = c.source_tree()?;
            c.tool("mkfs.cramfs", &[], &[&src, c.img()])
        }),
        case("bfs", "util-linux", &["mkfs.bfs"], &["bfs"], |c| {
            c.mkfs(16, "mkfs.bfs", &[])
        }),
        case("swap", "util-linux", &["mkswap"], &["swap"], |c| {
            c.mkfs(16, "mkswap", &["-q"])
        }),
        case(
            "swap-64k-pages",
            "util-linux",
            &["mkswap"],
            &["swap"],
            |c| c.mkfs(16, "mkswap", &["-q", "-p", "65536"]),
        ),
        case("gpt", "fdisk", &["sfdisk"], &["gpt"], |c| {
            c.sfdisk(64, "label: gpt\n,10M\n,10M\n")
        }),
        case("gpt-no-primary", "fdisk", &["sfdisk"], &["gpt"], |c| {
            // The primary header gone, the protective MBR kept: blkid
            // falls back to the backup header as we do.
            c.sfdisk(64, "label: gpt\n,10M\n")?;
            c.zero(512, 512)
        }),
        case("gpt-backup-only", "fdisk", &["sfdisk"], &["gpt"], |c| {
            // The protective MBR, the primary header and its entries gone:
            // only the backup header at the end remains.
            c.sfdisk(64, "label: gpt\n,10M\n")?;
            c.zero(0, 34 * 512)
        }),
        case("dos", "fdisk", &["sfdisk"], &["dos"], |c| {
            c.sfdisk(64, "label: dos\n,10M,83\n")
        }),
        case("dos-empty", "fdisk", &["sfdisk"], &["dos"], |c| {
            c.sfdisk(64, "label: dos\n")
        }),
        case("sun", "fdisk", &["sfdisk"], &["sun"], |c| {
            c.sfdisk(64, "label: sun\n")
        }),
        case("sgi", "fdisk", &["sfdisk"], &["sgi"], |c| {
            c.sfdisk(64, "label: sgi\n")
        }),
        case(
            "luks1",
            "cryptsetup-bin",
            &["cryptsetup"],
            &["crypto_LUKS"],
            |c| c.luks("luks1"),
        ),
        case(
            "luks2",
            "cryptsetup-bin",
            &["cryptsetup"],
            &["crypto_LUKS"],
            |c| c.luks("luks2"),
        ),
        case(
            "luks2-secondary",
            "cryptsetup-bin",
            &["cryptsetup"],
            &["crypto_LUKS"],
            |c| {
                // The primary header's first 4 KiB gone: the secondary
                // header still marks the device.
                c.luks("luks2")?;
                c.zero(0, 4096)
            },
        ),
        case(
            "dm-verity",
            "cryptsetup-bin",
            &["veritysetup"],
            &["DM_verity_hash"],
            |c| {
                let data = c.dir().join("data.img");
                File::create(&data)
                    .and_then(|f| f.set_len(8 * MIB))
                    .map_err(|e| e.to_string())?;
                c.sized(8)?;
                c.tool("veritysetup", &["format"], &[&data, c.img()])
            },
        ),
        case(
            "bcache-backing",
            "bcache-tools",
            &["make-bcache"],
            &["bcache"],
            |c| c.mkfs(64, "make-bcache", &["-B"]),
        ),
        case(
            "bcache-cache",
            "bcache-tools",
            &["make-bcache"],
            &["bcache"],
            |c| c.mkfs(64, "make-bcache", &["-C"]),
        ),
        case("drbd-8", "drbd-utils", &["drbdmeta"], &["drbd"], |c| {
            c.sized(64)?;
            let img = c.img().to_path_buf();
            c.tool_stdin(
                "drbdmeta",
                &["--force", "0", "v08"],
                &[&img, Path::new("internal"), Path::new("create-md")],
                "yes\n",
            )
        }),
        case("drbd-9", "drbd-utils", &["drbdmeta"], &["drbd"], |c| {
            c.sized(64)?;
            let img = c.img().to_path_buf();
            c.tool_stdin(
                "drbdmeta",
                &["--force", "0", "v09"],
                &[
                    &img,
                    Path::new("internal"),
                    Path::new("create-md"),
                    Path::new("1"),
                ],
                "yes\n",
            )
        }),
        block_case(
            "lvm2",
            "lvm2",
            &["pvcreate", "vgcreate", "vgremove", "pvremove"],
            &["LVM2_member"],
            |c| {
                c.sized(64)?;
                let dev = c.attach()?;
                let vg = format!("csi_corpus_{}", std::process::id());
                c.lvm("pvcreate", &["-q", &dev])?;
                c.cleanup("pvremove", &["-ff", "-y", "-q", "--devices", &dev, &dev]);
                c.lvm("vgcreate", &["-q", &vg, &dev])?;
                c.cleanup("vgremove", &["-ff", "-y", "-q", "--devices", &dev, &vg]);
                Ok(())
            },
        ),
        block_case(
            "md-0.90",
            "mdadm",
            &["mdadm"],
            &["linux_raid_member"],
            |c| c.md("0.90"),
        ),
        block_case("md-1.0", "mdadm", &["mdadm"], &["linux_raid_member"], |c| {
            c.md("1.0")
        }),
        block_case("md-1.1", "mdadm", &["mdadm"], &["linux_raid_member"], |c| {
            c.md("1.1")
        }),
        block_case("md-1.2", "mdadm", &["mdadm"], &["linux_raid_member"], |c| {
            c.md("1.2")
        }),
        block_case("md-ddf", "mdadm", &["mdadm"], &["ddf_raid_member"], |c| {
            c.md("ddf")
        }),
        block_case("md-imsm", "mdadm", &["mdadm"], &["isw_raid_member"], |c| {
            c.md("imsm")
        }),
    ]
}

/// One case's working state: its directory, its image, the loop devices
/// and volume groups it made (undone on drop, in reverse order).
struct Ctx {
    dir: tempfile::TempDir,
    img: PathBuf,
    /// What is probed: the image, or a loop device over it.
    target: PathBuf,
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
    fn new() -> Ctx {
        let dir = tempfile::tempdir().expect("tempdir");
        let img = dir.path().join("image");
        Ctx {
            target: img.clone(),
            img,
            dir,
            undo: Vec::new(),
        }
    }

    fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn img(&self) -> &Path {
        &self.img
    }

    /// The image as a sparse file of `mib` MiB.
    fn sized(&self, mib: u64) -> Result<(), String> {
        File::create(&self.img)
            .and_then(|f| f.set_len(mib * MIB))
            .map_err(|e| format!("create image: {e}"))
    }

    /// A sparse image of `mib` MiB formatted by `prog args image`.
    fn mkfs(&self, mib: u64, prog: &str, args: &[&str]) -> Result<(), String> {
        self.sized(mib)?;
        self.tool(prog, args, &[&self.img])
    }

    fn sfdisk(&self, mib: u64, script: &str) -> Result<(), String> {
        self.sized(mib)?;
        self.tool_stdin("sfdisk", &["-q"], &[&self.img], script)
    }

    fn luks(&self, kind: &str) -> Result<(), String> {
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
    fn source_tree(&self) -> Result<PathBuf, String> {
        let src = self.dir().join("src");
        std::fs::create_dir_all(src.join("d")).map_err(|e| e.to_string())?;
        std::fs::write(src.join("d/file"), b"corpus\n").map_err(|e| e.to_string())?;
        Ok(src)
    }

    /// Zeroes `len` bytes at `off` of the image.
    fn zero(&self, off: u64, len: usize) -> Result<(), String> {
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
    fn tool(&self, prog: &str, args: &[&str], more: &[&Path]) -> Result<(), String> {
        self.tool_stdin(prog, args, more, "")
    }

    fn tool_stdin(
        &self,
        prog: &str,
        args: &[&str],
        paths: &[&Path],
        stdin: &str,
    ) -> Result<(), String> {
        run(prog, args, paths, stdin).map(drop)
    }

    /// Registers `prog args` to run when the case ends.
    fn cleanup(&mut self, prog: &str, args: &[&str]) {
        self.undo.push((
            prog.to_string(),
            args.iter().map(|a| a.to_string()).collect(),
        ));
    }

    /// A loop device over the image, detached when the case ends; the
    /// case probes it instead of the file.
    fn attach(&mut self) -> Result<String, String> {
        let dev = self.loop_over(&self.img.clone())?;
        self.target = PathBuf::from(&dev);
        Ok(dev)
    }

    fn loop_over(&mut self, file: &Path) -> Result<String, String> {
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
    fn lvm(&self, prog: &str, args: &[&str]) -> Result<(), String> {
        let dev = self.target.to_str().ok_or("device path")?.to_string();
        let mut all = vec!["--devices", dev.as_str()];
        all.extend_from_slice(args);
        run(prog, &all, &[], "").map(drop)
    }

    /// A two-member md array (or, for DDF and IMSM, a container) with
    /// `metadata` on two loop devices; the first member is probed while it
    /// runs, and the array is stopped and its superblocks wiped when the
    /// case ends.
    fn md(&mut self, metadata: &str) -> Result<(), String> {
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
fn run(prog: &str, args: &[&str], paths: &[&Path], stdin: &str) -> Result<String, String> {
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

fn find_tool(prog: &str) -> Option<PathBuf> {
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
fn setup_packages() -> BTreeSet<String> {
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

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

/// `TYPE` and `PTTYPE` of `blkid -p -o export`.
fn blkid_names(target: &Path) -> Result<BTreeSet<String>, String> {
    let exe = find_tool("blkid").ok_or("blkid: not found")?;
    let out = Command::new(exe)
        .args(["-p", "-o", "export"])
        .arg(target)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| e.to_string())?;
    // 2: nothing found. Anything else but 0 is an error (ambivalent
    // results included: blkid then prints nothing).
    match out.status.code() {
        Some(0) | Some(2) => {}
        _ => {
            return Err(format!(
                "blkid -p {}: {}: {}",
                target.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            l.strip_prefix("TYPE=")
                .or_else(|| l.strip_prefix("PTTYPE="))
                .map(str::to_string)
        })
        .collect())
}

/// What `identify` names on `target`, read as the backends read it.
fn our_names(target: &Path) -> Result<BTreeSet<String>, String> {
    let mut f = File::open(target).map_err(|e| format!("open {}: {e}", target.display()))?;
    let size = f.seek(SeekFrom::End(0)).map_err(|e| e.to_string())?;
    let (head, tail) =
        read_regions(size, |off, buf| f.read_exact_at(buf, off)).map_err(|e| e.to_string())?;
    Ok(identify(&Device::new(&head, &tail, size))
        .iter()
        .map(|found| found.name.to_string())
        .collect())
}

fn known(case: &str, name: &str) -> bool {
    KNOWN.iter().any(|&(c, n, _)| c == case && n == name)
}

/// What the case's image shows: blkid's names and ours, or why it could
/// not be compared.
fn compare(case: &Case, ctx: &Ctx) -> Result<(BTreeSet<String>, BTreeSet<String>), String> {
    let theirs = blkid_names(&ctx.target)?;
    let ours = our_names(&ctx.target)?;
    let mut problems = Vec::new();
    if ours.is_empty() {
        problems.push("we find nothing".to_string());
    }
    if theirs.is_empty() && !case.expect.iter().all(|e| known(case.name, e)) {
        problems.push("blkid finds nothing".to_string());
    }
    for e in case.expect {
        if !ours.contains(*e) {
            problems.push(format!("we miss {e}"));
        }
    }
    for t in &theirs {
        if !ours.contains(t) && !known(case.name, t) {
            problems.push(format!("blkid names {t}, we do not"));
        }
    }
    for o in &ours {
        if !theirs.contains(o) && !case.expect.contains(&o.as_str()) {
            problems.push(format!("we name {o}, blkid does not"));
        }
    }
    if problems.is_empty() {
        Ok((theirs, ours))
    } else {
        Err(format!(
            "{} (blkid: {theirs:?}, ours: {ours:?})",
            problems.join("; ")
        ))
    }
}

#[test]
fn identify_agrees_with_blkid_on_real_images() {
    if find_tool("blkid").is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "blkid (util-linux) is missing"
        );
        eprintln!("skip: blkid is missing");
        return;
    }
    let ci = std::env::var_os("CI").is_some();
    let listed = setup_packages();
    let root = is_root();
    let mut failures = Vec::new();
    let mut table = Vec::new();
    for case in cases() {
        let missing: Vec<_> = case
            .tools
            .iter()
            .filter(|t| find_tool(t).is_none())
            .collect();
        if !missing.is_empty() {
            let msg = format!("{}: {missing:?} missing ({})", case.name, case.package);
            if ci && listed.contains(case.package) {
                failures.push(format!("{msg}, which scripts/setup.sh installs"));
            } else {
                table.push(format!("{:<18} skipped: {msg}", case.name));
            }
            continue;
        }
        if case.block && !root {
            table.push(format!("{:<18} skipped: needs root", case.name));
            continue;
        }
        let mut ctx = Ctx::new();
        match (case.make)(&mut ctx) {
            Ok(()) => {}
            Err(e) if e.starts_with("skip:") => {
                table.push(format!("{:<18} {e}", case.name));
                continue;
            }
            Err(e) => {
                failures.push(format!("{}: making the image: {e}", case.name));
                continue;
            }
        }
        match compare(&case, &ctx) {
            Ok((theirs, ours)) => {
                let theirs = format!("{theirs:?}");
                table.push(format!(
                    "{:<18} blkid {theirs:<32} ours {ours:?}",
                    case.name
                ))
            }
            Err(e) => failures.push(format!("{}: {e}", case.name)),
        }
    }
    eprintln!("{}", table.join("\n"));
    for (case, name, why) in KNOWN {
        eprintln!("known difference: {case}: {name}: {why}");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn identify_agrees_with_blkid_on_sample_images() {
    let Some(dir) = std::env::var_os("CSI_PROXY_SAMPLE_IMAGES") else {
        eprintln!("skip: CSI_PROXY_SAMPLE_IMAGES is not set");
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("CSI_PROXY_SAMPLE_IMAGES")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    let mut failures = Vec::new();
    let mut table = Vec::new();
    for path in entries {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let (name, img) = if let Some(stem) = file.strip_suffix(".img.xz") {
            let out = tmp.path().join(stem);
            let data = match run("xz", &["-dc"], &[&path], "") {
                Ok(_) => {
                    Command::new(find_tool("xz").unwrap())
                        .args(["-dc"])
                        .arg(&path)
                        .output()
                        .expect("xz")
                        .stdout
                }
                Err(e) => {
                    table.push(format!("{stem:<40} skipped: {e}"));
                    continue;
                }
            };
            std::fs::write(&out, data).expect("write sample");
            (stem.to_string(), out)
        } else if let Some(stem) = file.strip_suffix(".img") {
            (stem.to_string(), path.clone())
        } else {
            continue;
        };
        let theirs = match blkid_names(&img) {
            Ok(t) => t,
            Err(e) => {
                table.push(format!("{name:<40} blkid failed: {e}"));
                BTreeSet::new()
            }
        };
        let ours = our_names(&img).expect("read sample");
        // libblkid reports one of UDF and ISO 9660 on a bridge disc.
        let bridge = |n: &str| n == "iso9660" && theirs.contains("udf");
        let known =
            |n: &str| bridge(n) || SAMPLE_KNOWN.iter().any(|&(i, k, _)| i == name && k == n);
        let missed: Vec<_> = theirs
            .iter()
            .filter(|t| !ours.contains(*t) && !known(t))
            .collect();
        let extra: Vec<_> = ours
            .iter()
            .filter(|o| !theirs.contains(*o) && !known(o))
            .collect();
        let shown = format!("{theirs:?}");
        table.push(format!("{name:<40} blkid {shown:<32} ours {ours:?}"));
        if !missed.is_empty() || !extra.is_empty() {
            failures.push(format!(
                "{name}: blkid {theirs:?}, ours {ours:?} (we miss {missed:?}, we add {extra:?})"
            ));
        }
        let _ = std::fs::remove_file(tmp.path().join(&name));
    }
    eprintln!("{}", table.join("\n"));
    for (img, name, why) in SAMPLE_KNOWN {
        eprintln!("known difference: {img}: {name}: {why}");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
