//! The inventory's logic against a scripted host: a map of disks the test
//! changes, a scanner that reads it (and counts how often), and an event
//! queue the test fills the way the kernel would (or forgets to).

use super::*;
use crate::storage::parse::guid::Guid;
use proptest::prelude::*;
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

#[derive(Clone, Debug, PartialEq, Eq)]
struct HostDisk {
    number: u32,
    volumes: Vec<(u128, u32)>,
}

#[derive(Default)]
struct Host {
    disks: Mutex<BTreeMap<String, HostDisk>>,
    all: AtomicU64,
    one: AtomicU64,
    fail_one: std::sync::atomic::AtomicBool,
}

fn vol(g: u128) -> VolumeId {
    VolumeId::from_guid(Guid::from_u128(g))
}

fn scanned(key: &str, d: &HostDisk) -> Scanned<String, HostDisk> {
    Scanned {
        key: key.to_string(),
        number: d.number,
        disk: d.clone(),
        volumes: d
            .volumes
            .iter()
            .map(|&(g, p)| DiskVolume {
                id: vol(g),
                partition: Some(p),
                extent: 0,
            })
            .collect(),
    }
}

impl Scan for Arc<Host> {
    type Key = String;
    type Disk = HostDisk;
    fn scan_all(&self) -> Result<Vec<Scanned<String, HostDisk>>> {
        self.all.fetch_add(1, Ordering::SeqCst);
        Ok(self
            .disks
            .lock()
            .unwrap()
            .iter()
            .map(|(k, d)| scanned(k, d))
            .collect())
    }
    fn scan_one(&self, key: &String) -> Result<Option<Scanned<String, HostDisk>>> {
        self.one.fetch_add(1, Ordering::SeqCst);
        if self.fail_one.load(Ordering::SeqCst) {
            return Err(crate::Error::Internal("scripted failure".into()));
        }
        Ok(self.disks.lock().unwrap().get(key).map(|d| scanned(key, d)))
    }
}

impl Host {
    fn set(&self, key: &str, number: u32, volumes: &[(u128, u32)]) {
        self.disks.lock().unwrap().insert(
            key.to_string(),
            HostDisk {
                number,
                volumes: volumes.to_vec(),
            },
        );
    }
    fn remove(&self, key: &str) {
        self.disks.lock().unwrap().remove(key);
    }
    fn scans(&self) -> (u64, u64) {
        (
            self.all.load(Ordering::SeqCst),
            self.one.load(Ordering::SeqCst),
        )
    }
}

/// Events the test queues by hand.
#[derive(Clone, Default)]
struct Queue(Arc<Mutex<VecDeque<Pending<String>>>>);

impl Queue {
    fn push(&self, p: Pending<String>) {
        self.0.lock().unwrap().push_back(p);
    }
    fn key(&self, k: &str) {
        self.push(Pending::Keys([k.to_string()].into()));
    }
}

impl EventSource for Queue {
    type Key = String;
    fn drain(&mut self) -> Pending<String> {
        let mut q = self.0.lock().unwrap();
        q.drain(..).fold(Pending::Nothing, Pending::merge)
    }
}

fn setup() -> (Arc<Host>, Queue, Inventory<Arc<Host>, Queue>) {
    let host = Arc::new(Host::default());
    let q = Queue::default();
    let inv = Inventory::new(host.clone(), Some(q.clone())).with_fallback_interval(Duration::ZERO);
    (host, q, inv)
}

fn numbers(inv: &Inventory<Arc<Host>, Queue>) -> Vec<u32> {
    inv.view().unwrap().disks().map(|(n, _)| n).collect()
}

#[test]
fn built_once_then_only_what_events_name_is_scanned() {
    let (host, q, inv) = setup();
    host.set("loop0", 10, &[(1, 1)]);
    host.set("loop1", 11, &[]);
    assert_eq!(numbers(&inv), [10, 11]);
    assert_eq!(host.scans(), (1, 0));
    for _ in 0..5 {
        assert_eq!(numbers(&inv), [10, 11]);
    }
    assert_eq!(host.scans(), (1, 0), "no events: nothing is read again");
    // Attach, detach, re-attach with a new number: one disk scan each.
    host.set("loop2", 12, &[(2, 1)]);
    q.key("loop2");
    assert_eq!(numbers(&inv), [10, 11, 12]);
    host.remove("loop1");
    q.key("loop1");
    assert_eq!(numbers(&inv), [10, 12]);
    host.set("loop0", 13, &[(1, 1)]);
    q.key("loop0");
    let mut v = inv.view().unwrap();
    assert_eq!(v.disks().map(|(n, _)| n).collect::<Vec<_>>(), [12, 13]);
    assert_eq!(
        v.volume(&vol(1)).unwrap(),
        [Placement {
            disk: 13,
            partition: Some(1),
            extent: 0
        }]
    );
    drop(v);
    assert_eq!(host.scans(), (1, 3));
}

#[test]
fn events_queued_before_the_call_are_in_its_answer() {
    let (host, q, inv) = setup();
    assert!(numbers(&inv).is_empty());
    for n in 0..20u32 {
        let key = format!("loop{n}");
        host.set(&key, 100 + n, &[(u128::from(n) + 1, 1)]);
        q.key(&key);
        let mut v = inv.view().unwrap();
        assert!(v.snapshot().disk(100 + n).is_some(), "disk {n} missed");
        assert_eq!(v.volume(&vol(u128::from(n) + 1)).unwrap().len(), 1);
    }
    assert_eq!(host.scans(), (1, 20), "one scan per announced disk");
}

#[test]
fn lost_events_and_unknown_sources_scan_everything() {
    let (host, q, inv) = setup();
    host.set("sda", 1, &[]);
    numbers(&inv);
    host.set("sdb", 2, &[]); // never announced
    q.push(Pending::Lost("overflow"));
    let lost = counters().lost;
    assert_eq!(numbers(&inv), [1, 2]);
    assert!(counters().lost > lost);
    assert_eq!(host.scans(), (2, 0));
    q.push(Pending::Unknown);
    numbers(&inv);
    assert_eq!(host.scans(), (3, 0));
    // Without an event source every call scans.
    let plain: Inventory<Arc<Host>, Queue> = Inventory::new(host.clone(), None);
    assert!(!plain.has_events());
    for _ in 0..3 {
        assert_eq!(numbers(&plain), [1, 2]);
    }
    assert_eq!(host.scans(), (6, 0));
}

#[test]
fn unknown_numbers_and_ids_rescan_once_per_call() {
    let (host, _q, inv) = setup();
    host.set("sda", 1, &[(7, 1)]);
    numbers(&inv);
    // A disk and a volume the kernel never announced.
    host.set("sdb", 2, &[(8, 1)]);
    let mut v = inv.view().unwrap();
    assert!(v.knows_disk(2).unwrap());
    assert_eq!(v.volume(&vol(8)).unwrap().len(), 1);
    assert!(!v.knows_disk(99).unwrap());
    assert!(v.volume(&vol(99)).unwrap().is_empty());
    assert!(v.volumes_on(98).unwrap().is_none());
    drop(v);
    assert_eq!(host.scans(), (2, 0), "one fallback scan in that call");
    let mut v = inv.view().unwrap();
    assert!(v.disk(99).unwrap().is_none());
    drop(v);
    assert_eq!(host.scans(), (3, 0), "the next call tries again");
    // Known ones never rescan.
    let mut v = inv.view().unwrap();
    assert!(v.disk(1).unwrap().is_some());
    assert_eq!(v.volumes_on(2).unwrap().unwrap().len(), 1);
    drop(v);
    assert_eq!(host.scans(), (3, 0));
}

#[test]
fn one_volume_id_on_two_disks_keeps_both_places() {
    let (host, q, inv) = setup();
    host.set("loop0", 5, &[(42, 1), (43, 2)]);
    host.set("loop1", 6, &[(42, 1)]); // a clone of loop0's first partition
    let mut v = inv.view().unwrap();
    let places = v.volume(&vol(42)).unwrap();
    assert_eq!(
        places.iter().map(|p| p.disk).collect::<Vec<_>>(),
        [5, 6],
        "{places:?}"
    );
    drop(v);
    host.remove("loop1");
    q.key("loop1");
    let mut v = inv.view().unwrap();
    assert_eq!(v.volume(&vol(42)).unwrap().len(), 1);
    assert_eq!(v.volume(&vol(43)).unwrap().len(), 1);
    drop(v);
    // Same id twice on one disk (a corrupt table): both kept too.
    host.set("loop2", 7, &[(44, 1), (44, 2)]);
    q.key("loop2");
    assert_eq!(inv.view().unwrap().volume(&vol(44)).unwrap().len(), 2);
}

#[test]
fn touched_disks_and_invalidation() {
    let (host, _q, inv) = setup();
    host.set("loop0", 5, &[]);
    numbers(&inv);
    // Our own change, which the kernel does not announce.
    host.set("loop0", 5, &[(9, 1)]);
    inv.touch("loop0".into());
    assert_eq!(inv.view().unwrap().volume(&vol(9)).unwrap().len(), 1);
    assert_eq!(host.scans(), (1, 1));
    host.set("sdz", 77, &[]);
    inv.invalidate();
    assert_eq!(numbers(&inv), [5, 77]);
    assert_eq!(host.scans(), (2, 1));
}

#[test]
fn a_failing_disk_scan_falls_back_to_a_full_scan() {
    let (host, q, inv) = setup();
    host.set("loop0", 5, &[]);
    numbers(&inv);
    host.set("loop1", 6, &[]);
    host.fail_one.store(true, Ordering::SeqCst);
    q.key("loop1");
    assert_eq!(numbers(&inv), [5, 6]);
    assert_eq!(host.scans(), (2, 1));
}

#[test]
fn generation_moves_with_every_change_only() {
    let (host, q, inv) = setup();
    host.set("loop0", 5, &[]);
    let g0 = inv.view().unwrap().generation();
    assert_eq!(inv.view().unwrap().generation(), g0);
    q.key("loop0");
    assert!(inv.view().unwrap().generation() > g0);
}

#[test]
fn a_notification_counter_means_scan_everything_once() {
    let counter = Arc::new(AtomicU64::new(0));
    let mut s: SeqEvents<String> = SeqEvents::new(counter.clone());
    assert_eq!(s.drain(), Pending::Nothing);
    counter.fetch_add(3, Ordering::Release);
    assert_eq!(s.drain(), Pending::Unknown);
    assert_eq!(s.drain(), Pending::Nothing);
    // Through an inventory: a bump makes the next call scan everything.
    let host = Arc::new(Host::default());
    host.set("PhysicalDrive0", 0, &[]);
    let inv = Inventory::new(host.clone(), Some(SeqEvents::new(counter.clone())));
    inv.view().unwrap();
    inv.view().unwrap();
    assert_eq!(host.scans(), (1, 0));
    host.set("PhysicalDrive1", 1, &[]);
    counter.fetch_add(1, Ordering::Release);
    assert_eq!(
        inv.view()
            .unwrap()
            .disks()
            .map(|(n, _)| n)
            .collect::<Vec<_>>(),
        [0, 1]
    );
    assert_eq!(host.scans(), (2, 0));
}

#[test]
fn pending_merges_to_the_strongest() {
    let k = |s: &str| Pending::Keys([s.to_string()].into());
    assert_eq!(
        k("a").merge(k("b")),
        Pending::Keys(["a".into(), "b".into()].into())
    );
    assert_eq!(k("a").merge(Pending::Unknown), Pending::Unknown);
    assert_eq!(
        Pending::<String>::Unknown.merge(Pending::Lost("x")),
        Pending::Lost("x")
    );
    assert_eq!(Pending::Nothing.merge(k("a")), k("a"));
}

/// A change to the scripted host.
#[derive(Clone, Debug)]
enum Step {
    Attach { slot: u8, volumes: Vec<(u8, u8)> },
    Detach { slot: u8 },
    Overflow,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0u8..8, proptest::collection::vec((0u8..6, 1u8..4), 0..3))
            .prop_map(|(slot, volumes)| Step::Attach { slot, volumes }),
        2 => (0u8..8).prop_map(|slot| Step::Detach { slot }),
        1 => Just(Step::Overflow),
    ]
}

proptest! {
    /// Whatever happens, as long as the events name each change (or say
    /// they were lost), every call answers exactly what a full scan at
    /// that moment would.
    #[test]
    fn every_answer_equals_a_fresh_scan(steps in proptest::collection::vec(step(), 1..40)) {
        let (host, q, inv) = setup();
        let mut seq = 100u32;
        for s in steps {
            match s {
                Step::Attach { slot, volumes } => {
                    seq += 1;
                    let vols: Vec<(u128, u32)> =
                        volumes.iter().map(|&(g, p)| (u128::from(g) + 1, u32::from(p))).collect();
                    host.set(&format!("loop{slot}"), seq, &vols);
                    q.key(&format!("loop{slot}"));
                }
                Step::Detach { slot } => {
                    host.remove(&format!("loop{slot}"));
                    q.key(&format!("loop{slot}"));
                }
                Step::Overflow => {
                    // The kernel dropped events: change something unannounced.
                    seq += 1;
                    host.set("loop9", seq, &[(1, 1)]);
                    q.push(Pending::Lost("overflow"));
                }
            }
            let fresh = Snapshot::from_scan(host.scan_all().unwrap());
            let v = inv.view().unwrap();
            let got: Vec<(u32, HostDisk)> = v.disks().map(|(n, d)| (n, d.clone())).collect();
            let want: Vec<(u32, HostDisk)> = fresh.disks().map(|(n, d)| (n, d.clone())).collect();
            prop_assert_eq!(&got, &want);
            for g in 1..=6u128 {
                prop_assert_eq!(v.snapshot().places(&vol(g)), fresh.places(&vol(g)));
            }
        }
    }
}

#[test]
fn inline_attempts_answer_only_from_memory() {
    use crate::inline::{is_would_block, run};
    let (host, q, inv) = setup();
    host.set("loop0", 5, &[(1, 1)]);
    // Not built yet: that needs a scan.
    let e = run(|| inv.view().err()).expect("would block");
    assert!(is_would_block(&e), "{e}");
    assert_eq!(host.scans(), (0, 0));
    numbers(&inv);
    // Built and quiet: answered inline, nothing read.
    let n = run(|| inv.view().map(|v| v.disks().count()));
    assert_eq!(n.unwrap(), 1);
    assert_eq!(host.scans(), (1, 0));
    // An event to apply: would block, and the drained event is kept.
    host.set("loop1", 6, &[]);
    q.key("loop1");
    assert!(run(|| inv.view().is_err()));
    assert!(q.0.lock().unwrap().is_empty(), "drained");
    assert_eq!(host.scans(), (1, 0));
    assert_eq!(numbers(&inv), [5, 6], "applied by the next blocking call");
    assert_eq!(host.scans(), (1, 1));
    // An unknown id would need a full scan: would block, scans nothing.
    let r = run(|| inv.view().and_then(|mut v| v.volume(&vol(77))));
    assert!(is_would_block(&r.unwrap_err()));
    assert_eq!(host.scans(), (1, 1));
    // A busy inventory (a scan in progress elsewhere) does not wait.
    let held = inv.view().unwrap();
    let other = std::thread::scope(|s| {
        s.spawn(|| run(|| inv.view().err().map(|e| is_would_block(&e))))
            .join()
            .unwrap()
    });
    drop(held);
    assert_eq!(other, Some(true));
    // Lost events stashed by an inline attempt still count and rescan.
    let lost = counters().lost;
    q.push(Pending::Lost("overflow"));
    assert!(run(|| inv.view().is_err()));
    numbers(&inv);
    assert!(counters().lost > lost);
    assert_eq!(host.scans(), (2, 1));
}

#[test]
fn fallback_scans_for_unknown_ids_are_spaced() {
    let host = Arc::new(Host::default());
    let inv = Inventory::new(host.clone(), Some(Queue::default()))
        .with_fallback_interval(Duration::from_millis(300));
    host.set("sda", 1, &[]);
    numbers(&inv); // the first full scan
    host.set("sdb", 2, &[(5, 1)]); // never announced
    for _ in 0..20 {
        assert!(!inv.view().unwrap().knows_disk(2).unwrap());
        assert!(inv.view().unwrap().volume(&vol(5)).unwrap().is_empty());
    }
    assert_eq!(host.scans(), (1, 0), "no scan right after a full scan");
    std::thread::sleep(Duration::from_millis(350));
    assert!(inv.view().unwrap().knows_disk(2).unwrap());
    assert_eq!(inv.view().unwrap().volume(&vol(5)).unwrap().len(), 1);
    assert_eq!(host.scans(), (2, 0));
    // Lost events and Rescan are never held back.
    inv.invalidate();
    numbers(&inv);
    assert_eq!(host.scans(), (3, 0));
}
