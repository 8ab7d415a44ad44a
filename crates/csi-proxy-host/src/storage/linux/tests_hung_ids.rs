//! A disk whose identifiers do not come back (a virtio `serial` or a VPD
//! page read that asks a hung device) holds up no call on another disk:
//! identifiers are read outside the inventory lock, on bounded readers.
//! The disks are made up (a sysfs tree in a temporary directory); the
//! hung read is a FIFO nobody writes to.

use super::{FsType, LinuxStorage, StorageBackend};
use crate::storage::inventory::READ_TIMEOUT;
use crate::Error;
use std::fs;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A disk in the made-up sysfs at `root`, number `seq`, no partitions.
fn disk(root: &Path, name: &str, seq: u32) {
    let dev = root.join("devices").join(format!("virtio{seq}"));
    fs::create_dir_all(&dev).unwrap();
    let dir = root.join("block").join(name);
    fs::create_dir_all(&dir).unwrap();
    for (f, v) in [
        ("size", "2048".to_string()),
        ("diskseq", seq.to_string()),
        ("dev", format!("252:{}", seq * 16)),
        ("ro", "0".into()),
    ] {
        fs::write(dir.join(f), format!("{v}\n")).unwrap();
    }
    std::os::unix::fs::symlink(&dev, dir.join("device")).unwrap();
}

#[test]
fn a_disk_whose_identifiers_hang_holds_up_no_other_disk() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    disk(root, "vdy", 901);
    disk(root, "vdz", 902);
    fs::write(root.join("block/vdz/serial"), "HEALTHY\n").unwrap();
    // vdy's serial: a read that does not return until someone writes.
    let fifo = root.join("block/vdy/serial");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let s = LinuxStorage::new(FsType::Ext4).with_sysfs(root);
    assert_eq!(s.disk_size(902).unwrap(), 2048 * 512);

    let s = &s;
    std::thread::scope(|scope| {
        let (ids_tx, ids_rx) = mpsc::channel();
        scope.spawn(move || {
            let t = Instant::now();
            let r = s.disk_ids();
            ids_tx.send((t.elapsed(), r)).unwrap();
        });
        std::thread::sleep(Duration::from_millis(300));
        // Another disk's call, while vdy's identifiers are being read.
        let (tx, rx) = mpsc::channel();
        scope.spawn(move || {
            let t = Instant::now();
            let r = s.disk_size(902);
            tx.send((t.elapsed(), r)).unwrap();
        });
        let other = rx.recv_timeout(Duration::from_secs(5));
        let ids = ids_rx.recv_timeout(READ_TIMEOUT * 3);
        // vdy's own calls, while its read is still out: Unavailable naming
        // it, at once. (Asked before the read is let go below: a read that
        // comes back makes the disk answer again.)
        let t = Instant::now();
        let own = s.disk_size(901);
        let own_took = t.elapsed();
        // Let the stuck read go (whatever the outcome), then make the
        // serial an ordinary file.
        let plain = root.join("serial.plain");
        fs::write(&plain, "LATE\n").unwrap();
        let mut w = fs::OpenOptions::new().write(true).open(&fifo).unwrap();
        std::io::Write::write_all(&mut w, b"LATE\n").unwrap();
        drop(w);
        fs::rename(&plain, &fifo).unwrap();

        let (took, size) = other.expect("another disk's call waited for vdy's identifiers");
        assert_eq!(size.unwrap(), 2048 * 512);
        assert!(
            took < Duration::from_secs(1),
            "another disk's call took {took:?}"
        );
        let (took, ids) = ids.expect("ListDiskIDs waited for vdy past its read timeout");
        assert!(took < READ_TIMEOUT * 2, "ListDiskIDs took {took:?}");
        let ids = ids.unwrap();
        assert_eq!(ids[&902].serial_number, "HEALTHY");
        assert!(!ids.contains_key(&901), "{ids:?}");
        match own {
            Err(Error::Unavailable(m)) => assert!(m.contains("vdy"), "{m}"),
            other => panic!("{other:?}"),
        }
        assert!(own_took < Duration::from_secs(1), "{own_took:?}");
    });
    // The read came back: vdy answers again, with its identifiers.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let ids = s.disk_ids().unwrap();
        if let Some(i) = ids.get(&901) {
            assert_eq!(i.serial_number, "LATE");
            break;
        }
        assert!(Instant::now() < deadline, "vdy never answered again");
        std::thread::sleep(Duration::from_millis(100));
    }
}
