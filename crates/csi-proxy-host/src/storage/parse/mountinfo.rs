//! Lines of `/proc/<pid>/mountinfo` (Linux), as bytes.
//!
//! A mount point is whatever bytes the directory's name has: the kernel
//! escapes only space, tab, newline and backslash (`\040`, `\011`, `\012`,
//! `\134`) and writes every other byte raw, so a name that is not UTF-8
//! (anyone with a user namespace can mount on one) is a valid entry, kept
//! as bytes here, never a reason to drop the line or the table.
//!
//! A line that does not have the kernel's shape is an error, not skipped:
//! the callers decide whether a device is mounted, and a line they cannot
//! read might be the one that says so.

use std::fmt;

/// One mount.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    /// The mount's id: unique on the system while the mount lives.
    pub id: u32,
    /// The id of the mount it is mounted on (for the namespace's top
    /// mount, one not in the table).
    pub parent: u32,
    pub major: u32,
    pub minor: u32,
    /// Where it is mounted, escapes decoded: any bytes but NUL.
    pub mount_point: Vec<u8>,
    /// The filesystem type (FUSE subtypes are the mounter's choice:
    /// decoded lossily, it is only compared with known names).
    pub fs_type: String,
    /// Peer group of a shared mount (`shared:N`).
    pub shared: Option<u32>,
    /// Peer group this mount receives propagation from (`master:N`).
    pub master: Option<u32>,
}

#[cfg(unix)]
impl Mount {
    /// The mount point as a path.
    pub fn path(&self) -> &std::path::Path {
        use std::os::unix::ffi::OsStrExt;
        std::path::Path::new(std::ffi::OsStr::from_bytes(&self.mount_point))
    }
}

/// Why a line is not a mountinfo entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Malformed {
    /// 1-based line number within the table.
    pub line: usize,
    pub reason: &'static str,
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.reason)
    }
}

impl std::error::Error for Malformed {}

/// Decodes the `\NNN` octal escapes of a field. A backslash not followed by
/// three octal digits of a byte value is kept as it is (the kernel escapes
/// every backslash it writes, so none occurs).
pub fn unescape(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        if field[i] == b'\\' {
            if let Some(v) = field.get(i + 1..i + 4).and_then(octal_byte) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(field[i]);
        i += 1;
    }
    out
}

fn octal_byte(d: &[u8]) -> Option<u8> {
    if !d.iter().all(|c| (b'0'..=b'7').contains(c)) {
        return None;
    }
    let v = d.iter().fold(0u32, |acc, c| acc * 8 + u32::from(c - b'0'));
    u8::try_from(v).ok()
}

fn decimal<T: std::str::FromStr>(b: &[u8]) -> Option<T> {
    if b.is_empty() || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(b).ok()?.parse().ok()
}

/// `major:minor`.
fn device(b: &[u8]) -> Option<(u32, u32)> {
    let colon = b.iter().position(|&c| c == b':')?;
    Some((decimal(&b[..colon])?, decimal(&b[colon + 1..])?))
}

/// One line (without its newline).
pub fn parse_line(line: &[u8]) -> Result<Mount, &'static str> {
    let mut fields = line.split(|&c| c == b' ');
    let mut next = |what| fields.next().filter(|f| !f.is_empty()).ok_or(what);
    let id = decimal(next("no mount id")?).ok_or("the mount id is not a number")?;
    let parent = decimal(next("no parent id")?).ok_or("the parent id is not a number")?;
    let (major, minor) = device(next("no device")?).ok_or("the device is not major:minor")?;
    next("no root")?;
    let mount_point = unescape(next("no mount point")?);
    if mount_point.contains(&0) {
        return Err("a NUL in the mount point");
    }
    next("no mount options")?;
    // Optional fields (tag[:value]) end at a lone "-".
    let (mut shared, mut master) = (None, None);
    loop {
        let f = next("no \" - \" separator")?;
        if f == b"-" {
            break;
        }
        if let Some(n) = f.strip_prefix(b"shared:") {
            shared = Some(decimal(n).ok_or("shared: is not a number")?);
        } else if let Some(n) = f.strip_prefix(b"master:") {
            master = Some(decimal(n).ok_or("master: is not a number")?);
        }
    }
    let fs_type = String::from_utf8_lossy(&unescape(next("no filesystem type")?)).into_owned();
    Ok(Mount {
        id,
        parent,
        major,
        minor,
        mount_point,
        fs_type,
        shared,
        master,
    })
}

/// A whole table. Empty lines are nothing; any other line that is not an
/// entry makes the table unreadable.
pub fn parse(text: &[u8]) -> Result<Vec<Mount>, Malformed> {
    let mut out = Vec::new();
    for (i, line) in text.split(|&c| c == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        out.push(parse_line(line).map_err(|reason| Malformed {
            line: i + 1,
            reason,
        })?);
    }
    Ok(out)
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

    const SAMPLE: &[u8] = b"\
22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
35 22 0:31 / /run rw,nosuid shared:5 master:1 - tmpfs tmpfs rw,mode=755
90 35 7:1 / /var/lib/kubelet/plugins/x/globalmount rw,nosuid,nodev - ext4 /dev/loop0p1 rw
91 22 7:2 / /var/lib/kubelet/a\\040b\\134c rw - xfs /dev/loop1p1 rw
92 22 7:3 /sub /mnt/bind rw propagate_from:4 unbindable - ext4 /dev/loop2p1 rw
93 22 7:4 / /mnt/\xff\xfe\\012x rw - ext4 /dev/loop\xff rw
94 22 0:40 / /tmp/t rw - tmpfs  rw
";

    #[test]
    fn parses_mountinfo() {
        let m = parse(SAMPLE).unwrap();
        assert_eq!(m.len(), 7);
        assert_eq!(m[0].mount_point, b"/");
        assert_eq!((m[0].id, m[0].major, m[0].minor), (22, 254, 0));
        assert_eq!(m[1].fs_type, "tmpfs");
        assert_eq!(m[3].mount_point, b"/var/lib/kubelet/a b\\c");
        assert_eq!(m[3].fs_type, "xfs");
        assert_eq!((m[0].shared, m[0].master), (Some(1), None));
        assert_eq!((m[1].shared, m[1].master), (Some(5), Some(1)));
        assert_eq!((m[2].shared, m[2].master), (None, None));
        assert_eq!((m[4].shared, m[4].master), (None, None));
        assert_eq!(of_device(&m, 7, 3).count(), 1);
        // Not UTF-8: kept byte for byte, the escaped newline decoded.
        assert_eq!(m[5].mount_point, b"/mnt/\xff\xfe\nx");
        // An empty source (two spaces) is fine: it is not read.
        assert_eq!(m[6].mount_point, b"/tmp/t");
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            assert_eq!(m[5].path().as_os_str().as_bytes(), b"/mnt/\xff\xfe\nx");
        }
    }

    #[test]
    fn malformed_lines_make_the_table_unreadable() {
        for (line, reason) in [
            (&b"broken line"[..], "the mount id is not a number"),
            (b"93 22 7:4 / /only-six-fields rw", "no \" - \" separator"),
            (b"93 22 7:4 / /x rw -", "no filesystem type"),
            (b"93 22 7:4 / /x rw - ", "no filesystem type"),
            (
                b"93 22 74 / /x rw - ext4 /dev/x rw",
                "the device is not major:minor",
            ),
            (
                b"93 22 7:-4 / /x rw - ext4 /dev/x rw",
                "the device is not major:minor",
            ),
            (
                b"93 22 7:99999999999 / /x rw - ext4 /dev/x rw",
                "the device is not major:minor",
            ),
            (
                b"93 x 7:4 / /x rw - ext4 /dev/x rw",
                "the parent id is not a number",
            ),
            (
                b"93 22 7:4 / /x rw shared:x - ext4 /dev/x rw",
                "shared: is not a number",
            ),
            (
                b"93 22 7:4 / /x rw master: - ext4 /dev/x rw",
                "master: is not a number",
            ),
            (b"93 22 7:4 /  rw - ext4 /dev/x rw", "no mount point"),
            (
                b"93 22 7:4 / /a\\000b rw - ext4 /dev/x rw",
                "a NUL in the mount point",
            ),
            (b"93", "no parent id"),
        ] {
            assert_eq!(parse_line(line), Err(reason), "{}", line.escape_ascii());
        }
        let mut table = SAMPLE.to_vec();
        table.extend_from_slice(b"broken line\n");
        assert_eq!(
            parse(&table),
            Err(Malformed {
                line: 8,
                reason: "the mount id is not a number"
            })
        );
        // Blank lines carry nothing; a last line without a newline counts.
        let m = parse(b"\n22 1 254:0 / / rw - ext4 /dev/vda rw\n\n23 1 7:0 / /a rw - xfs x rw")
            .unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[1].mount_point, b"/a");
    }

    #[test]
    fn unescape_edge_cases() {
        assert_eq!(unescape(b"a\\040"), b"a ");
        assert_eq!(unescape(b"a\\04"), b"a\\04");
        assert_eq!(unescape(b"\\"), b"\\");
        assert_eq!(unescape(b"\\777"), b"\\777");
        assert_eq!(unescape(b"\\400"), b"\\400");
        assert_eq!(unescape(b"\\377"), b"\xff");
        assert_eq!(unescape(b"\\011x"), b"\tx");
        assert_eq!(unescape(b"\\134040"), b"\\040");
        assert_eq!(unescape(b"\\08a"), b"\\08a");
        assert_eq!(unescape(b"\xff\\"), b"\xff\\");
    }

    proptest::proptest! {
        /// Whatever the bytes, no panic; an escaped name decodes to itself.
        #[test]
        fn any_bytes(line in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            let _ = parse(&line);
            let _ = unescape(&line);
        }

        #[test]
        fn escaped_names_round_trip(name in proptest::collection::vec(1u8..=255, 1..64)) {
            let mut esc = Vec::new();
            for &b in &name {
                if matches!(b, b' ' | b'\t' | b'\n' | b'\\') {
                    esc.extend_from_slice(format!("\\{b:03o}").as_bytes());
                } else {
                    esc.push(b);
                }
            }
            let mut line = b"1 2 8:1 / ".to_vec();
            line.extend_from_slice(&esc);
            line.extend_from_slice(b" rw shared:3 - ext4 /dev/sda1 rw\n");
            let m = parse(&line).unwrap();
            proptest::prop_assert_eq!(&m[0].mount_point, &name);
            proptest::prop_assert_eq!(m[0].shared, Some(3));
        }
    }
}
