use super::*;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::thread;

fn vol(n: u8) -> Target {
    Target::Volume(
        VolumeId::parse(&format!(
            "\\\\?\\Volume{{{n:08x}-0000-0000-0000-000000000000}}\\"
        ))
        .unwrap(),
    )
}

/// An operation that runs until `release` sends, after telling `started`.
fn gated(
    started: mpsc::Sender<()>,
    release: mpsc::Receiver<Result<()>>,
    runs: &AtomicU32,
) -> impl FnOnce() -> Result<()> + '_ {
    move || {
        runs.fetch_add(1, Ordering::SeqCst);
        started.send(()).unwrap();
        release.recv().unwrap()
    }
}

fn never_runs() -> Result<()> {
    panic!("this call must not run its operation")
}

/// Waits until some call has joined (the joiner is parked).
fn until_joined(ops: &Operations, n: u64) {
    let t = Instant::now();
    while ops.counters().joined < n {
        assert!(t.elapsed() < Duration::from_secs(10), "nobody joined");
        thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn an_identical_call_joins_and_gets_the_same_result() {
    let ops = Operations::new();
    let runs = AtomicU32::new(0);
    let (started_tx, started) = mpsc::channel();
    let (release, release_rx) = mpsc::channel();
    let op = || Operation::new("FormatVolume");
    thread::scope(|s| {
        let owner = s.spawn(|| ops.run(vol(1), op(), gated(started_tx, release_rx, &runs)));
        started.recv().unwrap();
        assert_eq!(ops.running(&vol(1)), Some(op()));
        let joiners: Vec<_> = (0..3)
            .map(|_| s.spawn(|| ops.run(vol(1), op(), never_runs)))
            .collect();
        until_joined(&ops, 3);
        release
            .send(Err(Error::io(
                "mkfs",
                "/dev/x",
                std::io::Error::from_raw_os_error(libc_eio()),
            )))
            .unwrap();
        let first = owner.join().unwrap().unwrap_err().to_string();
        for j in joiners {
            assert_eq!(j.join().unwrap().unwrap_err().to_string(), first);
        }
    });
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(ops.running(&vol(1)), None);
    let c = ops.counters();
    assert_eq!((c.ran, c.joined, c.aborted, c.collected), (1, 3, 0, 0));
}

fn libc_eio() -> i32 {
    5
}

#[test]
fn a_different_call_on_the_target_is_aborted_at_once_naming_the_running_one() {
    let ops = Operations::new();
    let runs = AtomicU32::new(0);
    let (started_tx, started) = mpsc::channel();
    let (release, release_rx) = mpsc::channel();
    thread::scope(|s| {
        let owner = s.spawn(|| {
            ops.run(
                vol(2),
                Operation::with_args("MountVolume", "target /k/a"),
                gated(started_tx, release_rx, &runs),
            )
        });
        started.recv().unwrap();
        for other in [
            Operation::new("FormatVolume"),
            Operation::with_args("MountVolume", "target /k/b"),
            Operation::with_args("UnmountVolume", "target /k/a"),
        ] {
            let t = Instant::now();
            let e = ops.run(vol(2), other, never_runs).unwrap_err();
            assert!(t.elapsed() < Duration::from_secs(1));
            let Error::Aborted(m) = e else {
                panic!("{e:?}")
            };
            assert!(
                m.contains("MountVolume (target /k/a) is in progress")
                    && m.contains("volume \\\\?\\Volume{00000002"),
                "{m}"
            );
        }
        // Other targets are not held up.
        ops.run(vol(3), Operation::new("FormatVolume"), || Ok(()))
            .unwrap();
        ops.run(Target::Disk(2), Operation::new("PartitionDisk"), || Ok(()))
            .unwrap();
        release.send(Ok(())).unwrap();
        owner.join().unwrap().unwrap();
    });
    assert_eq!(ops.counters().aborted, 3);
    // Once it has finished, anything runs.
    ops.run(vol(2), Operation::new("FormatVolume"), || Ok(()))
        .unwrap();
}

#[test]
fn a_joiner_stops_waiting_at_its_deadline_and_the_operation_goes_on() {
    let ops = Operations::new();
    let runs = AtomicU32::new(0);
    let (started_tx, started) = mpsc::channel();
    let (release, release_rx) = mpsc::channel();
    thread::scope(|s| {
        let owner = s.spawn(|| {
            ops.run(
                Target::Disk(7),
                Operation::new("PartitionDisk"),
                gated(started_tx, release_rx, &runs),
            )
        });
        started.recv().unwrap();
        let d = Instant::now() + Duration::from_millis(50);
        let e = deadline::run(Some(d), || {
            ops.run(Target::Disk(7), Operation::new("PartitionDisk"), never_runs)
        })
        .unwrap_err();
        assert!(Instant::now() >= d);
        assert!(
            matches!(&e, Error::DeadlineExceeded(m) if m.contains("PartitionDisk on disk 7")),
            "{e:?}"
        );
        assert_eq!(
            ops.running(&Target::Disk(7)),
            Some(Operation::new("PartitionDisk"))
        );
        release.send(Ok(())).unwrap();
        owner.join().unwrap().unwrap();
    });
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[test]
fn a_result_its_caller_missed_is_collected_once_by_the_retry() {
    let ops = Operations::new();
    let runs = AtomicU32::new(0);
    let format = || Operation::new("FormatVolume");
    // The caller's deadline passes while its operation runs.
    let r = deadline::run(Some(Instant::now() + Duration::from_millis(10)), || {
        ops.run(vol(4), format(), || {
            runs.fetch_add(1, Ordering::SeqCst);
            thread::sleep(Duration::from_millis(30));
            Ok(())
        })
    });
    assert!(r.is_ok(), "the run's own answer (its client has gone)");
    assert_eq!(ops.running(&vol(4)), None, "kept, not running");
    // The retry gets that result without running anything.
    ops.run(vol(4), format(), never_runs).unwrap();
    assert_eq!(ops.counters().collected, 1);
    // Collected once: the next call runs again.
    ops.run(vol(4), format(), || {
        runs.fetch_add(1, Ordering::SeqCst);
        Ok(())
    })
    .unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[test]
fn a_kept_result_is_discarded_by_another_operation_on_the_target() {
    let ops = Operations::new();
    deadline::run(Some(Instant::now()), || {
        ops.run(vol(5), Operation::new("FormatVolume"), || Ok(()))
    })
    .unwrap();
    let ran = AtomicU32::new(0);
    ops.run(
        vol(5),
        Operation::with_args("MountVolume", "target /k"),
        || {
            ran.fetch_add(1, Ordering::SeqCst);
            Ok(())
        },
    )
    .unwrap();
    // The format's result is gone: a format now really formats.
    ops.run(vol(5), Operation::new("FormatVolume"), || {
        ran.fetch_add(1, Ordering::SeqCst);
        Ok(())
    })
    .unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 2);
}

#[test]
fn a_result_its_caller_received_is_not_kept() {
    let ops = Operations::new();
    let ran = AtomicU32::new(0);
    for _ in 0..2 {
        deadline::run(Some(Instant::now() + Duration::from_secs(60)), || {
            ops.run(vol(6), Operation::new("FormatVolume"), || {
                ran.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
        })
        .unwrap();
    }
    assert_eq!(ran.load(Ordering::SeqCst), 2);
    assert_eq!(ops.counters().collected, 0);
}

/// The flood: calls on other targets, from the same caller or another,
/// never push a kept result out; a caller past its budget keeps no more.
#[test]
fn kept_results_are_bounded_per_caller_and_never_pushed_out() {
    let ops = Operations::new();
    let past = Some(Instant::now());
    let driver: Option<Arc<str>> = Some(Arc::from("uid=0 pod=driver"));
    let other: Option<Arc<str>> = Some(Arc::from("uid=0 pod=other"));
    let ran = AtomicU32::new(0);
    let format = || Operation::new("FormatVolume");
    // The driver's format finishes after its deadline: kept.
    crate::on_behalf::run(driver.clone(), || {
        deadline::run(past, || {
            ops.run(vol(1), format(), || {
                ran.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
        })
    })
    .unwrap();
    // Floods of calls with deadlines too short, on other targets, from
    // another caller and from the driver itself.
    for (first, owner) in [(0, &other), (10_000, &driver)] {
        for n in first..first + MAX_KEPT_PER_CALLER as u32 + 44 {
            crate::on_behalf::run(owner.clone(), || {
                deadline::run(past, || {
                    ops.run(Target::Disk(n), Operation::new("PartitionDisk"), || Ok(()))
                })
            })
            .unwrap();
        }
    }
    let kept = |who: &Option<Arc<str>>| {
        ops.table()
            .kept
            .values()
            .flatten()
            .filter(|k| k.missed.contains(who))
            .count()
    };
    assert_eq!(kept(&other), MAX_KEPT_PER_CALLER);
    assert_eq!(kept(&driver), MAX_KEPT_PER_CALLER);
    // The retry collects the format's result: it ran once.
    crate::on_behalf::run(driver.clone(), || ops.run(vol(1), format(), never_runs)).unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    assert_eq!(ops.counters().collected, 1);
}

#[test]
fn a_panicking_operation_fails_its_joiners_and_leaves_nothing_behind() {
    let ops = Operations::new();
    let (started_tx, started) = mpsc::channel();
    let (release, release_rx) = mpsc::channel::<()>();
    let ops_ref = &ops;
    thread::scope(|s| {
        let owner = s.spawn(move || {
            ops_ref.run(
                Target::Disk(9),
                Operation::new("PartitionDisk"),
                move || {
                    started_tx.send(()).unwrap();
                    release_rx.recv().unwrap();
                    panic!("boom")
                },
            )
        });
        started.recv().unwrap();
        let joiner =
            s.spawn(|| ops.run(Target::Disk(9), Operation::new("PartitionDisk"), never_runs));
        until_joined(&ops, 1);
        release.send(()).unwrap();
        assert!(owner.join().is_err());
        let e = joiner.join().unwrap().unwrap_err();
        assert!(
            matches!(&e, Error::Internal(m) if m.contains("panicked")),
            "{e:?}"
        );
    });
    assert_eq!(ops.running(&Target::Disk(9)), None);
    ops.run(Target::Disk(9), Operation::new("PartitionDisk"), || Ok(()))
        .unwrap();
}

#[test]
fn operations_are_shown_with_their_arguments() {
    assert_eq!(Operation::new("Rescan").to_string(), "Rescan");
    assert_eq!(
        Operation::with_args("ResizeVolume", "size 1048576").to_string(),
        "ResizeVolume (size 1048576)"
    );
    assert_eq!(Target::Disk(3).to_string(), "disk 3");
    assert_eq!(Target::Host.to_string(), "the host");
}

#[test]
fn a_result_a_joiner_missed_is_kept_for_its_retry() {
    let ops = Operations::new();
    let runs = AtomicU32::new(0);
    let (started_tx, started) = mpsc::channel();
    let (release, release_rx) = mpsc::channel();
    thread::scope(|s| {
        let owner = s.spawn(|| {
            ops.run(
                vol(8),
                Operation::new("FormatVolume"),
                gated(started_tx, release_rx, &runs),
            )
        });
        started.recv().unwrap();
        let e = deadline::run(Some(Instant::now() + Duration::from_millis(20)), || {
            ops.run(vol(8), Operation::new("FormatVolume"), never_runs)
        })
        .unwrap_err();
        assert!(matches!(e, Error::DeadlineExceeded(_)), "{e:?}");
        release.send(Ok(())).unwrap();
        owner.join().unwrap().unwrap();
    });
    // The owner received its result; the joiner's retry gets it too.
    ops.run(vol(8), Operation::new("FormatVolume"), never_runs)
        .unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(ops.counters().collected, 1);
}

#[test]
fn a_kept_result_holds_nothing_and_is_never_run_again_by_its_retry() {
    // Red team 39caller E: another uid's identical FormatVolume collected
    // the result kept for the driver's retry, and another's ResizeVolume
    // discarded it; either way the retry ran mkfs again. Red team 39r2 F3:
    // answering every other call `Aborted` while a result was kept let a
    // caller hold another's target for minutes (renewable).
    let ops = Operations::new();
    let runs = AtomicU32::new(0);
    let driver: Option<Arc<str>> = Some(Arc::from("uid=0 pod=driver"));
    let other: Option<Arc<str>> = Some(Arc::from("uid=1000 pod=other"));
    let format = || Operation::new("FormatVolume");
    let keep_one = || {
        crate::on_behalf::run(driver.clone(), || {
            deadline::run(Some(Instant::now()), || {
                ops.run(vol(9), format(), || {
                    runs.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                })
            })
        })
        .unwrap()
    };
    keep_one();
    // The driver's retry collects it: mkfs ran once.
    crate::on_behalf::run(driver.clone(), || ops.run(vol(9), format(), never_runs)).unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(ops.counters().collected, 1);

    // Kept again; another caller's different call runs at once: nothing
    // is held.
    keep_one();
    let resized = AtomicU32::new(0);
    let resize = || Operation::with_args("ResizeVolume", "size 1");
    crate::on_behalf::run(other.clone(), || {
        ops.run(vol(9), resize(), || {
            resized.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
    })
    .unwrap();
    assert_eq!(resized.load(Ordering::SeqCst), 1);
    // The driver's retry is told the target changed (naming the method,
    // not the other caller's arguments), without running mkfs.
    let e = crate::on_behalf::run(driver.clone(), || ops.run(vol(9), format(), never_runs))
        .unwrap_err();
    assert!(
        matches!(&e, Error::Aborted(m) if m.contains("finished (OK) after this caller's deadline, and ResizeVolume has run on the target since") && !m.contains("size 1")),
        "{e:?}"
    );
    // Told once: its next call runs.
    crate::on_behalf::run(driver.clone(), || {
        ops.run(vol(9), format(), || {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
    })
    .unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 3);
    assert!(ops.table().kept.is_empty());
    // A result kept for the driver is never another caller's: its
    // identical call runs.
    keep_one();
    crate::on_behalf::run(other.clone(), || {
        ops.run(vol(9), format(), || {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
    })
    .unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 5);
}

#[test]
fn a_caller_that_renews_its_kept_result_holds_no_target() {
    // Red team 39r2 F3's renewal: the attacker collects and at once leaves
    // another result kept, again and again; the victim's calls always run.
    let ops = Operations::new();
    let attacker: Option<Arc<str>> = Some(Arc::from("uid=3001"));
    let victim: Option<Arc<str>> = Some(Arc::from("uid=0"));
    let partition = || Operation::new("PartitionDisk");
    for _ in 0..3 {
        // (Its retry of a result the victim's calls changed is told so.)
        let _ = crate::on_behalf::run(attacker.clone(), || {
            deadline::run(Some(Instant::now()), || {
                ops.run(Target::Disk(7), partition(), || Ok(()))
            })
        });
        for state in ["offline", "online"] {
            let ran = AtomicU32::new(0);
            crate::on_behalf::run(victim.clone(), || {
                ops.run(
                    Target::Disk(7),
                    Operation::with_args("SetDiskState", state),
                    || {
                        ran.fetch_add(1, Ordering::SeqCst);
                        Ok(())
                    },
                )
            })
            .unwrap();
            assert_eq!(ran.load(Ordering::SeqCst), 1);
        }
    }
}

#[test]
fn a_retry_that_joins_and_receives_ends_what_was_kept_for_its_caller() {
    let ops = Operations::new();
    let runs = AtomicU32::new(0);
    let (started_tx, started) = mpsc::channel();
    let (release, release_rx) = mpsc::channel();
    thread::scope(|s| {
        // The first call's deadline passes while it runs.
        let first = s.spawn(|| {
            deadline::run(Some(Instant::now() + Duration::from_millis(50)), || {
                ops.run(
                    vol(10),
                    Operation::new("FormatVolume"),
                    gated(started_tx, release_rx, &runs),
                )
            })
        });
        started.recv().unwrap();
        // The same caller's retry joins and receives the result.
        let retry = s.spawn(|| ops.run(vol(10), Operation::new("FormatVolume"), never_runs));
        until_joined(&ops, 1);
        thread::sleep(Duration::from_millis(80));
        release.send(Ok(())).unwrap();
        let _ = first.join().unwrap();
        retry.join().unwrap().unwrap();
    });
    // Nothing kept: the next call runs.
    ops.run(vol(10), Operation::new("FormatVolume"), || {
        runs.fetch_add(1, Ordering::SeqCst);
        Ok(())
    })
    .unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[test]
fn a_rescan_is_never_kept() {
    // Red team 39r2: a Rescan kept for one caller answered another's after
    // a disk grew, and the growth was not seen.
    let ops = Operations::new();
    let runs = AtomicU32::new(0);
    let rescan = || {
        ops.run(Target::Host, Operation::new("Rescan"), || {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
    };
    deadline::run(Some(Instant::now()), rescan).unwrap();
    assert!(ops.table().entries.is_empty(), "nothing running");
    assert!(ops.table().kept.is_empty(), "nothing kept");
    rescan().unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert_eq!(ops.counters().collected, 0);
}

// Red team 40kept's cases (redteam40.rs), each failing on be98d43.

fn key(s: &str) -> Option<Arc<str>> {
    Some(Arc::from(s))
}

fn as_<R>(who: &str, deadline: Option<Instant>, f: impl FnOnce() -> R) -> R {
    crate::on_behalf::run(key(who), || deadline::run(deadline, f))
}

fn past() -> Option<Instant> {
    Some(Instant::now() - Duration::from_millis(1))
}

/// Kept results are charged to the callers that missed them: another
/// caller joining the victim's operations with 1 ns deadlines fills its own
/// budget, not the victim's.
#[test]
fn a_joiner_that_misses_is_charged_not_the_runner() {
    let ops = Operations::new();
    for i in 0..MAX_KEPT_PER_CALLER as u32 + 4 {
        let (started_tx, started) = mpsc::channel();
        let (release, release_rx) = mpsc::channel::<()>();
        thread::scope(|s| {
            let opsr = &ops;
            let v = s.spawn(move || {
                as_("uid=0 pod=victim", None, || {
                    opsr.run(
                        Target::Disk(1000 + i),
                        Operation::new("SetDiskState"),
                        || {
                            started_tx.send(()).unwrap();
                            release_rx.recv().unwrap();
                            Ok(())
                        },
                    )
                })
            });
            started.recv().unwrap();
            let r = as_("uid=3001", past(), || {
                ops.run(
                    Target::Disk(1000 + i),
                    Operation::new("SetDiskState"),
                    never_runs,
                )
            });
            assert!(matches!(r, Err(Error::DeadlineExceeded(_))), "{r:?}");
            release.send(()).unwrap();
            v.join().unwrap().unwrap();
        });
    }
    assert_eq!(ops.table().kept_for(&key("uid=3001")), MAX_KEPT_PER_CALLER);
    assert_eq!(ops.table().kept_for(&key("uid=0 pod=victim")), 0);
    let runs = AtomicU32::new(0);
    let fmt = || {
        runs.fetch_add(1, Ordering::SeqCst);
        Ok(())
    };
    let _ = as_("uid=0 pod=victim", past(), || {
        ops.run(vol(1), Operation::new("FormatVolume"), fmt)
    });
    as_("uid=0 pod=victim", None, || {
        ops.run(vol(1), Operation::new("FormatVolume"), never_runs)
    })
    .unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

/// Callers filling the table push out only their own results: a victim's
/// result is kept, and failed operations (disks that do not exist) are not
/// kept at all.
#[test]
fn callers_filling_the_table_push_out_only_their_own() {
    let ops = Operations::new();
    for u in 0..(MAX_KEPT / MAX_KEPT_PER_CALLER) as u32 {
        for n in 0..MAX_KEPT_PER_CALLER as u32 {
            let target = Target::Disk(100_000 + u * 1000 + n);
            let _ = as_(&format!("uid={}", 3001 + u), past(), || {
                ops.run(target.clone(), Operation::new("PartitionDisk"), || {
                    Err(Error::NotFound("no disk".into()))
                })
            });
        }
    }
    assert!(ops.table().kept.is_empty(), "errors are not kept");
    // The same flood with successes fills the table.
    for u in 0..(MAX_KEPT / MAX_KEPT_PER_CALLER) as u32 {
        for n in 0..MAX_KEPT_PER_CALLER as u32 {
            let target = Target::Disk(100_000 + u * 1000 + n);
            let _ = as_(&format!("uid={}", 3001 + u), past(), || {
                ops.run(target.clone(), Operation::new("SetDiskState"), || Ok(()))
            });
        }
    }
    assert_eq!(ops.table().kept_len(), MAX_KEPT);
    let runs = AtomicU32::new(0);
    let fmt = || {
        runs.fetch_add(1, Ordering::SeqCst);
        Ok(())
    };
    let _ = as_("uid=0 pod=victim", past(), || {
        ops.run(vol(1), Operation::new("FormatVolume"), fmt)
    });
    assert_eq!(ops.table().kept_len(), MAX_KEPT);
    as_("uid=0 pod=victim", None, || {
        ops.run(vol(1), Operation::new("FormatVolume"), never_runs)
    })
    .unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

/// A waiter whose deadline passes as the run finishes still has the result
/// kept for its retry.
#[test]
fn a_joiner_timing_out_as_the_run_finishes_keeps_its_result() {
    for i in 0..300u32 {
        let ops = Operations::new();
        let runs = AtomicU32::new(0);
        let t = Target::Disk(i);
        let (started_tx, started) = mpsc::channel();
        let d = Instant::now() + Duration::from_millis(3);
        let joined = thread::scope(|s| {
            s.spawn(|| {
                as_("uid=0 pod=owner", None, || {
                    ops.run(t.clone(), Operation::new("PartitionDisk"), || {
                        runs.fetch_add(1, Ordering::SeqCst);
                        started_tx.send(()).unwrap();
                        while Instant::now() < d {
                            std::hint::spin_loop();
                        }
                        Ok(())
                    })
                })
            });
            started.recv().unwrap();
            as_("uid=3001 pod=joiner", Some(d), || {
                ops.run(t.clone(), Operation::new("PartitionDisk"), || {
                    runs.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                })
            })
        });
        let _ = joined;
        if runs.load(Ordering::SeqCst) == 2 {
            // It came after the run had ended, and ran its own.
            continue;
        }
        // Whatever it was told, its retry collects: the run is not repeated.
        as_("uid=3001 pod=joiner", None, || {
            ops.run(t.clone(), Operation::new("PartitionDisk"), never_runs)
        })
        .unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 1, "run {i}");
    }
}

/// A caller joining a long operation with 1 ns deadlines again and again
/// is one entry of its missed list.
#[test]
fn a_caller_misses_a_run_once_however_often_it_joins() {
    let ops = Operations::new();
    let (started_tx, started) = mpsc::channel();
    let (release, release_rx) = mpsc::channel::<()>();
    thread::scope(|s| {
        let opsr = &ops;
        s.spawn(move || {
            as_("uid=0 pod=victim", None, || {
                opsr.run(vol(7), Operation::new("FormatVolume"), || {
                    started_tx.send(()).unwrap();
                    release_rx.recv().unwrap();
                    Ok(())
                })
            })
        });
        started.recv().unwrap();
        for _ in 0..10_000 {
            let _ = as_("uid=3001", past(), || {
                ops.run(vol(7), Operation::new("FormatVolume"), never_runs)
            });
        }
        let n = ops.table().entries[&vol(7)].missed.len();
        release.send(()).unwrap();
        assert_eq!(n, 1, "missed holds {n} copies of one caller's key");
    });
}
