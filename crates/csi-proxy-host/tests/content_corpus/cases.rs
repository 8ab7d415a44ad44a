//! The images: one case per format (or variant), each made by the tool
//! its format's project ships.

use std::fs::File;
use std::path::Path;

use super::ctx::Ctx;

pub struct Case {
    pub name: &'static str,
    /// The Debian package that provides `tools`.
    pub package: &'static str,
    pub tools: &'static [&'static str],
    /// Names `identify` must return (blkid's, plus any it reports only one
    /// of, such as iso9660 under UDF).
    pub expect: &'static [&'static str],
    /// Needs root and loop devices.
    pub block: bool,
    pub make: fn(&mut Ctx) -> Result<(), String>,
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

pub const MIB: u64 = 1 << 20;
pub const KEY: &str = "corpus-key";
pub const LUKS_FAST: &[&str] = &[
    "--pbkdf",
    "pbkdf2",
    "--pbkdf-force-iterations",
    "1000",
    "--batch-mode",
];

pub fn cases() -> Vec<Case> {
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
        // Formats no Debian package makes: images laid out by hand where
        // util-linux 2.38's libblkid looks (blkid is the only tool).
        case("sysv", "util-linux", &["blkid"], &["sysv"], |c| {
            c.handmade(8, &[(1016, &0xFD18_7E20u32.to_le_bytes())])
        }),
        case(
            "sysv-be-block-18",
            "util-linux",
            &["blkid"],
            &["sysv"],
            |c| c.handmade(8, &[(18 * 1024 + 1016, &0xFD18_7E20u32.to_be_bytes())]),
        ),
        case("xenix", "util-linux", &["blkid"], &["xenix"], |c| {
            c.handmade(8, &[(2048, b"\x2b\x55\x44")])
        }),
        case("xenix-be", "util-linux", &["blkid"], &["xenix"], |c| {
            c.handmade(8, &[(2048, b"\x44\x55\x2b")])
        }),
        case(
            "drbdproxy_datalog",
            "util-linux",
            &["blkid"],
            &["drbdproxy_datalog"],
            |c| c.handmade(8, &[(0, b"DRBDdlh*")]),
        ),
        case("exfs", "xfsprogs", &["mkfs.xfs"], &["exfs"], |c| {
            // An XFS superblock under EXFS's magic: the same layout.
            c.mkfs(300, "mkfs.xfs", &["-q", "-f"])?;
            c.put(0, b"EXFS")
        }),
        case("aix", "util-linux", &["blkid"], &["aix"], |c| {
            c.handmade(8, &[(0, b"\xC9\xC2\xD4\xC1")])
        }),
        case("ultrix", "util-linux", &["blkid"], &["ultrix"], |c| {
            let label = [0x0003_2957u32.to_le_bytes(), 1u32.to_le_bytes()].concat();
            c.handmade(8, &[(16312, &label)])
        }),
        case("unixware", "util-linux", &["blkid"], &["unixware"], |c| {
            let vtoc = 0x600D_DEEEu32.to_le_bytes();
            c.handmade(8, &[(29174, &0xCAE5_600Du32.to_le_bytes()), (15004, &vtoc)])
        }),
        case(
            "unixware-label-in-sector-29",
            "util-linux",
            &["blkid"],
            &["unixware"],
            |c| {
                let vtoc = 0x600D_DEEEu32.to_le_bytes();
                c.handmade(8, &[(14852, &0xCAE5_600Du32.to_le_bytes()), (15004, &vtoc)])
            },
        ),
        case("solaris", "util-linux", &["blkid"], &["solaris"], |c| {
            let vtoc = [0x600D_DEEEu32.to_le_bytes(), 1u32.to_le_bytes()].concat();
            c.handmade(8, &[(524, &vtoc)])
        }),
        case("pmbr", "util-linux", &["blkid"], &["PMBR"], |c| {
            c.handmade(8, &[(446 + 4, &[0xEE]), (510, &[0x55, 0xAA])])
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
