//! A disk whose reads hang: the inventory reads it on a bounded thread,
//! marks it unresponsive, answers every other disk meanwhile, holds at most
//! [`DISK_THREADS`] threads for it, and takes it back when it answers.

use super::*;
use crate::storage::parse::guid::Guid;
use std::collections::BTreeMap;
use std::sync::Condvar;

/// Disks by kernel name; reads of `hung` wait until it is released.
#[derive(Default)]
struct Hosts {
    disks: Mutex<BTreeMap<String, (u32, u128)>>,
    hung: Mutex<Option<String>>,
    released: Condvar,
}

struct Keyed(Arc<Hosts>);

fn id(g: u128) -> VolumeId {
    VolumeId::from_guid(Guid::from_u128(g))
}

impl Scan for Keyed {
    type Key = String;
    type Disk = u32;
    fn keys(&self) -> Option<Result<Vec<String>>> {
        Some(Ok(self.0.disks.lock().unwrap().keys().cloned().collect()))
    }
    fn scan_all(&self) -> Result<Vec<Scanned<String, u32>>> {
        unreachable!("a keyed scanner is read disk by disk")
    }
    fn scan_one(&self, key: &String) -> Result<Option<Scanned<String, u32>>> {
        let mut h = self.0.hung.lock().unwrap();
        while h.as_deref() == Some(key.as_str()) {
            h = self.0.released.wait(h).unwrap();
        }
        drop(h);
        Ok(self
            .0
            .disks
            .lock()
            .unwrap()
            .get(key)
            .map(|&(number, g)| Scanned {
                key: key.clone(),
                number,
                disk: number,
                volumes: vec![DiskVolume {
                    id: id(g),
                    partition: Some(1),
                    extent: 0,
                }],
            }))
    }
}

struct NoEvents;
impl EventSource for NoEvents {
    type Key = String;
    fn drain(&mut self) -> Pending<String> {
        Pending::Nothing
    }
}

const TIMEOUT: Duration = Duration::from_millis(300);

fn setup() -> (Arc<Hosts>, Arc<Inventory<Keyed, NoEvents>>) {
    let h = Arc::new(Hosts::default());
    {
        let mut d = h.disks.lock().unwrap();
        d.insert("sda".into(), (1, 11));
        d.insert("sdb".into(), (2, 22));
    }
    let inv = Inventory::new(Keyed(h.clone()), Some(NoEvents))
        .with_fallback_interval(Duration::ZERO)
        .with_read_timeout(TIMEOUT);
    (h, Arc::new(inv))
}

#[test]
fn a_hung_disk_is_unavailable_and_the_others_answer() {
    let (h, inv) = setup();
    assert_eq!(inv.view().unwrap().volume(&id(22)).unwrap().len(), 1);
    *h.hung.lock().unwrap() = Some("sdb".into());
    // An unknown id scans every disk: bounded by the read timeout.
    let t = Instant::now();
    let e = inv.view().unwrap().volume(&id(99)).unwrap_err();
    assert!(t.elapsed() < TIMEOUT * 3, "{:?}", t.elapsed());
    assert!(
        matches!(e, Error::Unavailable(ref m) if m.contains("sdb")),
        "{e}"
    );
    // Its own calls: Unavailable naming it, at once.
    let t = Instant::now();
    let e = inv.view().unwrap().disk(2).expect_err("unavailable");
    assert!(
        matches!(e, Error::Unavailable(ref m) if m.contains("disk 2") && m.contains("sdb")),
        "{e}"
    );
    assert!(matches!(
        inv.view().unwrap().volume(&id(22)),
        Err(Error::Unavailable(_))
    ));
    assert!(t.elapsed() < TIMEOUT);
    // Every other disk answers from what is known.
    assert_eq!(inv.view().unwrap().disk(1).unwrap(), Some(&1));
    assert_eq!(inv.view().unwrap().volume(&id(11)).unwrap()[0].disk, 1);
    assert_eq!(
        inv.view().unwrap().disks().count(),
        2,
        "listed as last known"
    );
    // However many scans: while the read given up on is out, no new read
    // of it starts (it would hang too and cost each scan the timeout
    // again), so one thread, within DISK_THREADS, and no wait.
    let t = Instant::now();
    for _ in 0..10 {
        let _ = inv.view().unwrap().volume(&id(98));
    }
    assert!(t.elapsed() < TIMEOUT, "{:?}", t.elapsed());
    assert_eq!(inv.reads_in_flight(&"sdb".to_string()), 1);
    const { assert!(DISK_THREADS >= 1) };
    // Released: it answers again, and no thread is left.
    *h.hung.lock().unwrap() = None;
    h.released.notify_all();
    let deadline = Instant::now() + Duration::from_secs(5);
    while inv.reads_in_flight(&"sdb".to_string()) > 0 {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(inv.view().unwrap().disk(2).unwrap(), Some(&2));
    assert_eq!(inv.view().unwrap().volume(&id(22)).unwrap()[0].disk, 2);
}

#[test]
fn a_scan_for_an_unknown_id_holds_up_no_other_call() {
    let (h, inv) = setup();
    inv.view().unwrap();
    *h.hung.lock().unwrap() = Some("sdb".into());
    let scanner = {
        let inv = inv.clone();
        std::thread::spawn(move || inv.view().unwrap().volume(&id(77)).map(|_| ()))
    };
    std::thread::sleep(TIMEOUT / 5);
    // The scan waits for sdb; calls that need no scan go on.
    let t = Instant::now();
    for _ in 0..50 {
        assert_eq!(inv.view().unwrap().disk(1).unwrap(), Some(&1));
        assert!(crate::inline::run(|| inv.view().is_ok()));
    }
    assert!(t.elapsed() < TIMEOUT / 2, "{:?}", t.elapsed());
    assert!(scanner.join().unwrap().is_err());
    *h.hung.lock().unwrap() = None;
    h.released.notify_all();
}
