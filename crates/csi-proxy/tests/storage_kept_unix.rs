//! Results kept for a retry belong to their target (issue 39), over the
//! real binary on a loop device: a FormatVolume whose caller gave up
//! (`grpc-timeout: 1n`) finishes and keeps its result; a flood of 300
//! FormatVolume calls on random volume ids with the same 1 ns deadline
//! pushed that result out of the one shared table of 256, so the driver's
//! retry ran mkfs again and the filesystem UUID changed. Now the retry
//! collects the kept result: one mkfs, the same UUID.
#![cfg(target_os = "linux")]

mod common;
mod storage;

use common::Proxy;
use csi_proxy_api::volume::v2alpha1 as vl;
use csi_proxy_http2::client::{RawClient, Shape};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};
use storage::{can_run, partition_node, LoopDisk, MIB};
use tonic::Code;

/// FormatVolume calls of `ids`, each with `grpc-timeout: 1n`, pipelined on
/// one raw HTTP/2 connection (tonic would end them itself): their codes.
fn formats_given_up(proxy: &Proxy, ids: &[String]) -> Vec<i32> {
    use prost::Message;
    let socket = proxy.socket("volume-v2alpha1");
    let mut c = RawClient::new(UnixStream::connect(socket).unwrap(), Shape::default()).unwrap();
    ids.iter()
        .map(|id| {
            let block = c.request_block(
                "/v2alpha1.Volume/FormatVolume",
                None,
                &[(b"grpc-timeout", b"1n")],
            );
            let msg = vl::FormatVolumeRequest {
                volume_id: id.clone(),
            }
            .encode_to_vec();
            c.call_with_block(&block, &msg)
                .unwrap()
                .grpc_status
                .expect("a status")
        })
        .collect()
}

fn uuid_of(node: &std::path::Path) -> String {
    let out = std::process::Command::new("blkid")
        .args(["-p", "-s", "UUID", "-o", "value"])
        .arg(node)
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Whether any process runs `mkfs.*` on `node`.
fn mkfs_on(node: &std::path::Path) -> bool {
    let node = node.display().to_string();
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read(e.path().join("cmdline")).is_ok_and(|c| {
            let args: Vec<&[u8]> = c.split(|b| *b == 0).collect();
            args.first()
                .is_some_and(|a| a.windows(4).any(|w| w == b"mkfs"))
                && args.contains(&node.as_bytes())
        })
    })
}

fn random_volume_id(n: u32) -> String {
    let r = u64::from(std::process::id()) << 32 | u64::from(n);
    format!(
        "\\\\?\\Volume{{{:08x}-{:04x}-4{:03x}-8000-{:012x}}}\\",
        (r >> 24) as u32,
        n & 0xffff,
        n & 0xfff,
        r & 0xffff_ffff_ffff
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_given_up_formats_never_evicts_a_targets_kept_result() {
    if !can_run() {
        return;
    }
    let proxy = Proxy::start(&[]);
    let disk = LoopDisk::new(proxy.root.path(), 64 * MIB);
    let vol = common::partitioned_volume(&proxy, disk.number).await;
    let mut v = proxy.client().connect_volume_v2alpha1().await.unwrap();
    let node = partition_node(&disk);

    // The driver's format: its caller is gone at once, the format goes on.
    let codes = formats_given_up(&proxy, std::slice::from_ref(&vol));
    assert_eq!(codes, [Code::DeadlineExceeded as i32]);
    let t = Instant::now();
    while mkfs_on(&node) || uuid_of(&node).is_empty() {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the format never ended"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let uuid = uuid_of(&node);

    // The flood, from the same caller.
    let ids: Vec<String> = (0..300).map(random_volume_id).collect();
    let codes = formats_given_up(&proxy, &ids);
    assert!(
        codes.iter().all(|c| *c != Code::Ok as i32),
        "no random id names a volume: {codes:?}"
    );

    // The retry collects the kept result: mkfs does not run again.
    v.format_volume(vl::FormatVolumeRequest {
        volume_id: vol.clone(),
    })
    .await
    .unwrap();
    assert_eq!(
        uuid_of(&node),
        uuid,
        "the retry formatted the volume again:\n{}",
        proxy.log()
    );
    assert!(
        proxy
            .log()
            .contains("answered with the result of the same operation"),
        "{}",
        proxy.log()
    );
}
