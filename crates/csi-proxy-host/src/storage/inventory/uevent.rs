//! Kernel uevent messages (`NETLINK_KOBJECT_UEVENT`, multicast group 1), as
//! the kernel's `kobject_uevent_env` writes them: `ACTION@DEVPATH\0` followed
//! by `KEY=VALUE\0` pairs (`ACTION`, `DEVPATH`, `SUBSYSTEM`, `DEVTYPE`,
//! `DEVNAME`, `DISKSEQ`, `SEQNUM`, ...). Only block-device messages matter
//! here; each names the disk whose state changed (a partition's event names
//! its parent disk).
//!
//! Pure: no I/O, never panics, every input accepted or refused.

/// A block-device event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockEvent<'a> {
    /// `add`, `remove`, `change`, `move`, ...
    pub action: &'a str,
    /// The kernel name of the disk concerned (`loop3` for `loop3p1`).
    pub disk: &'a str,
    /// For `move`: the disk's previous name.
    pub old_disk: Option<&'a str>,
    /// Whether the event is about a partition of `disk`.
    pub partition: bool,
}

/// A kernel name that is safe to join under `/sys/block`: non-empty, at
/// most 64 bytes, no `/`, not `.` or `..`, printable ASCII.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name != "."
        && name != ".."
        && name.bytes().all(|b| b.is_ascii_graphic() && b != b'/')
}

/// The disk of a block DEVPATH: its last component, or the one before it
/// for a partition.
fn disk_of(devpath: &str, partition: bool) -> Option<&str> {
    let mut parts = devpath.rsplit('/');
    let last = parts.next()?;
    let name = if partition { parts.next()? } else { last };
    valid_name(name).then_some(name)
}

/// The block event in `msg`; `None` for other subsystems, messages from
/// udev (`libudev\0` header), and anything malformed.
pub fn parse(msg: &[u8]) -> Option<BlockEvent<'_>> {
    let mut fields = msg.split(|&b| b == 0);
    let header = std::str::from_utf8(fields.next()?).ok()?;
    let (_, _) = header.split_once('@')?;
    let (mut action, mut devpath, mut subsystem, mut devtype, mut old) =
        (None, None, None, None, None);
    for f in fields {
        let Ok(f) = std::str::from_utf8(f) else {
            continue;
        };
        let Some((k, v)) = f.split_once('=') else {
            continue;
        };
        match k {
            "ACTION" => action = Some(v),
            "DEVPATH" => devpath = Some(v),
            "SUBSYSTEM" => subsystem = Some(v),
            "DEVTYPE" => devtype = Some(v),
            "DEVPATH_OLD" => old = Some(v),
            _ => {}
        }
    }
    if subsystem? != "block" {
        return None;
    }
    let partition = devtype == Some("partition");
    Some(BlockEvent {
        action: action?,
        disk: disk_of(devpath?, partition)?,
        old_disk: old.and_then(|o| disk_of(o, partition)),
        partition,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(fields: &[&str]) -> Vec<u8> {
        let mut m = Vec::new();
        for f in fields {
            m.extend_from_slice(f.as_bytes());
            m.push(0);
        }
        m
    }

    #[test]
    fn loop_attach_as_the_kernel_sends_it() {
        // Captured from this kernel (6.18) while `losetup` attached loop0.
        let m = msg(&[
            "change@/devices/virtual/block/loop0",
            "ACTION=change",
            "DEVPATH=/devices/virtual/block/loop0",
            "SUBSYSTEM=block",
            "DISK_MEDIA_CHANGE=1",
            "MAJOR=7",
            "MINOR=0",
            "DEVNAME=loop0",
            "DEVTYPE=disk",
            "DISKSEQ=11",
            "SEQNUM=822",
        ]);
        assert_eq!(
            parse(&m),
            Some(BlockEvent {
                action: "change",
                disk: "loop0",
                old_disk: None,
                partition: false
            })
        );
    }

    #[test]
    fn a_partition_names_its_disk() {
        let m = msg(&[
            "add@/devices/virtual/block/loop12/loop12p1",
            "ACTION=add",
            "DEVPATH=/devices/virtual/block/loop12/loop12p1",
            "SUBSYSTEM=block",
            "DEVNAME=loop12p1",
            "DEVTYPE=partition",
            "PARTN=1",
        ]);
        let e = parse(&m).unwrap();
        assert_eq!((e.action, e.disk, e.partition), ("add", "loop12", true));
        let m = msg(&[
            "remove@/devices/pci0000:00/0000:00:05.0/virtio2/block/vda/vda1",
            "ACTION=remove",
            "DEVPATH=/devices/pci0000:00/0000:00:05.0/virtio2/block/vda/vda1",
            "SUBSYSTEM=block",
            "DEVTYPE=partition",
        ]);
        assert_eq!(parse(&m).unwrap().disk, "vda");
    }

    #[test]
    fn a_move_names_both_disks() {
        let m = msg(&[
            "move@/devices/virtual/block/new0",
            "ACTION=move",
            "DEVPATH=/devices/virtual/block/new0",
            "DEVPATH_OLD=/devices/virtual/block/old0",
            "SUBSYSTEM=block",
            "DEVTYPE=disk",
        ]);
        let e = parse(&m).unwrap();
        assert_eq!((e.disk, e.old_disk), ("new0", Some("old0")));
    }

    #[test]
    fn other_subsystems_udev_and_garbage_are_ignored() {
        let net = msg(&[
            "add@/devices/virtual/net/veth0",
            "ACTION=add",
            "DEVPATH=/devices/virtual/net/veth0",
            "SUBSYSTEM=net",
        ]);
        assert_eq!(parse(&net), None);
        // udev's own messages start with "libudev" and a binary header.
        let mut udev = b"libudev\0\xfe\xed\xca\xfe".to_vec();
        udev.extend(msg(&["ACTION=add", "SUBSYSTEM=block", "DEVPATH=/x/loop0"]));
        assert_eq!(parse(&udev), None);
        for bad in [
            &b""[..],
            b"\0\0\0",
            b"change@/x\0SUBSYSTEM=block\0",
            b"change@/x\0ACTION=change\0SUBSYSTEM=block\0DEVPATH=\0",
            b"change@/x\0ACTION=change\0SUBSYSTEM=block\0DEVPATH=/a/..\0",
            b"change@/x\0ACTION=change\0SUBSYSTEM=block\0DEVPATH=/a/b c\0",
            b"change@/x\0ACTION=change\0SUBSYSTEM=block\0DEVTYPE=partition\0DEVPATH=p1\0",
        ] {
            assert_eq!(parse(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn names_are_checked_before_they_become_paths() {
        for ok in ["loop0", "nvme0n1", "cciss!c0d0", "dm-3", "md127"] {
            assert!(valid_name(ok), "{ok}");
        }
        let long = "a".repeat(65);
        for bad in ["", ".", "..", "a/b", "a b", "é", long.as_str(), "x\n"] {
            assert!(!valid_name(bad), "{bad:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn never_panics_and_names_stay_valid(m in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
            if let Some(e) = parse(&m) {
                proptest::prop_assert!(valid_name(e.disk));
            }
        }
    }
}
