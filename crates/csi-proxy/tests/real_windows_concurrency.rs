//! The real-Windows tier, concurrency: formats of two VHDX volumes at once
//! overlap (the storage WMI calls run on a pool of COM threads, not one),
//! and a different operation on a volume being formatted is refused with
//! Aborted. Under wine (no `MSFT_Volume`) the tests report themselves
//! skipped; the pool itself is exercised under wine by the backend's own
//! tests (`storage/windows/tests.rs`).
#![cfg(windows)]

mod pipes;
mod real_windows;

use csi_proxy_client::Group;
use pipes::Proxy;
use real_windows::calls::Calls;
use real_windows::require;
use real_windows::vhd::{Vhd, MIB};
use std::time::{Duration, Instant};
use tonic::Code;

async fn calls(p: &Proxy) -> Calls {
    Calls::new(
        p.channel(Group::Disk, "v1").await,
        p.channel(Group::Volume, "v2alpha1").await,
    )
}

/// Formats `vol` and says when the call started and ended.
async fn timed_format(mut c: Calls, vol: String) -> (Instant, Instant) {
    let start = Instant::now();
    c.format(&vol).await.unwrap();
    (start, Instant::now())
}

#[tokio::test]
async fn two_vhdx_volumes_format_at_the_same_time() {
    let p = Proxy::start_unique("rw-concurrent-format", "disk,volume", &[]);
    let Some(_w) = require("two VHDX volumes formatted at once (MSFT_Volume.Format)") else {
        return;
    };
    let a = Vhd::create(&p.root, "conc-a", 4096 * MIB).unwrap();
    let b = Vhd::create(&p.root, "conc-b", 4096 * MIB).unwrap();
    let mut c = calls(&p).await;
    let va = c.partitioned_volume(a.disk()).await;
    let vb = c.partitioned_volume(b.disk()).await;
    // One after the other.
    let t = Instant::now();
    c.format(&va).await.unwrap();
    let alone_a = t.elapsed();
    let t = Instant::now();
    c.format(&vb).await.unwrap();
    let alone_b = t.elapsed();
    // At once, from two clients.
    let t = Instant::now();
    let (ra, rb) = tokio::join!(
        timed_format(calls(&p).await, va.clone()),
        timed_format(calls(&p).await, vb.clone())
    );
    let together = t.elapsed();
    eprintln!(
        "format alone: {alone_a:?} + {alone_b:?}; both at once: {together:?} (a {:?}, b {:?})",
        ra.1 - ra.0,
        rb.1 - rb.0
    );
    assert!(c.is_formatted(&va).await.unwrap() && c.is_formatted(&vb).await.unwrap());
    // Queued behind one thread, the second would end after the sum of both.
    let sum = alone_a + alone_b;
    assert!(
        together < sum.mul_f64(0.8),
        "the formats did not overlap: {together:?} at once against {sum:?} one after the other"
    );
}

#[tokio::test]
async fn another_operation_on_a_volume_being_formatted_is_aborted() {
    let p = Proxy::start_unique("rw-aborted", "disk,volume", &[]);
    let Some(_w) = require("a VHDX volume being formatted (MSFT_Volume.Format)") else {
        return;
    };
    let a = Vhd::create(&p.root, "busy-a", 8192 * MIB).unwrap();
    let mut c = calls(&p).await;
    let va = c.partitioned_volume(a.disk()).await;
    let format = tokio::spawn(timed_format(calls(&p).await, va.clone()));
    // While the format runs, a resize of the same volume is refused.
    let t = Instant::now();
    let mut refused = None;
    while !format.is_finished() && t.elapsed() < Duration::from_secs(60) {
        match c.resize(&va, 0).await {
            Err(s) if s.code() == Code::Aborted => {
                refused = Some(s);
                break;
            }
            _ => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
    format.await.unwrap();
    let s = refused.expect("no ResizeVolume reached the volume while it was formatted");
    assert!(s.message().contains("FormatVolume is in progress"), "{s:?}");
}
