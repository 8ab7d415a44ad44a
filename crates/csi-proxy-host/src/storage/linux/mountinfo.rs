//! `/proc/self/mountinfo`: which device is mounted where.

use std::io;

/// One mount.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    pub major: u32,
    pub minor: u32,
    /// Where it is mounted (octal escapes decoded).
    pub mount_point: String,
    pub fs_type: String,
    /// Peer group of a shared mount (`shared:N`).
    pub shared: Option<u32>,
    /// Peer group this mount receives propagation from (`master:N`).
    pub master: Option<u32>,
}

/// Decodes the `\NNN` octal escapes the kernel uses for space, tab,
/// newline and backslash.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() {
            let oct = &b[i + 1..i + 4];
            if oct.iter().all(|c| (b'0'..=b'7').contains(c)) {
                let v = (oct[0] - b'0') as u32 * 64
                    + (oct[1] - b'0') as u32 * 8
                    + (oct[2] - b'0') as u32;
                if let Ok(v) = u8::try_from(v) {
                    out.push(v);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses mountinfo text; malformed lines are skipped.
pub fn parse(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split(' ');
            let _id = fields.next()?;
            let _parent = fields.next()?;
            let (major, minor) = super::sysfs::parse_dev(fields.next()?)?;
            let _root = fields.next()?;
            let mount_point = unescape(fields.next()?);
            let _options = fields.next()?;
            // Optional fields end at " - ".
            let (mut shared, mut master) = (None, None);
            for f in fields.by_ref() {
                if f == "-" {
                    let fs_type = fields.next()?.to_string();
                    return Some(Mount {
                        major,
                        minor,
                        mount_point,
                        fs_type,
                        shared,
                        master,
                    });
                }
                if let Some(n) = f.strip_prefix("shared:") {
                    shared = n.parse().ok();
                } else if let Some(n) = f.strip_prefix("master:") {
                    master = n.parse().ok();
                }
            }
            None
        })
        .collect()
}

/// The mounts of this process's mount namespace.
pub fn read() -> io::Result<Vec<Mount>> {
    read_of("self")
}

/// The mounts of the mount namespace of process `pid` (`self` for ours).
pub fn read_of(pid: &str) -> io::Result<Vec<Mount>> {
    Ok(parse(&std::fs::read_to_string(format!(
        "/proc/{pid}/mountinfo"
    ))?))
}

/// Every mount of device `major:minor`.
pub fn of_device(mounts: &[Mount], major: u32, minor: u32) -> impl Iterator<Item = &Mount> {
    mounts
        .iter()
        .filter(move |m| m.major == major && m.minor == minor)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
35 22 0:31 / /run rw,nosuid shared:5 master:1 - tmpfs tmpfs rw,mode=755
90 35 7:1 / /var/lib/kubelet/plugins/x/globalmount rw,nosuid,nodev - ext4 /dev/loop0p1 rw
91 22 7:2 / /var/lib/kubelet/a\\040b\\134c rw - xfs /dev/loop1p1 rw
92 22 7:3 /sub /mnt/bind rw - ext4 /dev/loop2p1 rw
broken line
93 22 7:4 / /only-six-fields rw
";

    #[test]
    fn parses_mountinfo() {
        let m = parse(SAMPLE);
        assert_eq!(m.len(), 5);
        assert_eq!(m[0].mount_point, "/");
        assert_eq!((m[0].major, m[0].minor), (254, 0));
        assert_eq!(m[1].fs_type, "tmpfs");
        assert_eq!(m[3].mount_point, "/var/lib/kubelet/a b\\c");
        assert_eq!(m[3].fs_type, "xfs");
        assert_eq!((m[0].shared, m[0].master), (Some(1), None));
        assert_eq!((m[1].shared, m[1].master), (Some(5), Some(1)));
        assert_eq!((m[2].shared, m[2].master), (None, None));
        assert_eq!(of_device(&m, 7, 3).count(), 1);
    }

    #[test]
    fn unescape_edge_cases() {
        assert_eq!(unescape("a\\040"), "a ");
        assert_eq!(unescape("a\\04"), "a\\04");
        assert_eq!(unescape("\\"), "\\");
        assert_eq!(unescape("\\777"), "\\777");
        assert_eq!(unescape("\\011x"), "\tx");
    }

    #[test]
    fn reads_our_own_mounts() {
        let m = read().unwrap();
        assert!(m.iter().any(|m| m.mount_point == "/"));
    }
}
