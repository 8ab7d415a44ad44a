//! Stalled connections drain nothing (issue 39), over the real binary: a
//! caller of another user opens five connections and sends 128 calls on
//! each that hang (FormatVolume calls joining one slow format on a
//! throttled loop disk, with a long deadline) and never reads a reply.
//! Each was a blocking job of its own: 640 blocked jobs drained tokio's
//! pool (512 threads), and every other caller's blocking calls
//! (RmdirContents on the Filesystem socket) queued behind them until the format ended. Now
//! one connection holds at most 32 and one caller 64; past that its calls
//! are answered `Unavailable`, and the others' calls run at once.
#![cfg(target_os = "linux")]

mod common;
mod storage;

use common::Proxy;
use csi_proxy_api::{filesystem::v2alpha1 as fs, volume::v2alpha1 as vl};
use csi_proxy_http2::client::{RequestEncoder, Shape};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::time::{Duration, Instant};
use storage::{can_run, can_throttle, LoopDisk, Throttle, MIB};

const STALL_DIR: &str = "STALLED_SOCKET_DIR";
const STALL_VOLUME: &str = "STALLED_VOLUME_ID";

/// The staller, run as this test binary again (a no-op otherwise): five
/// connections, 128 FormatVolume calls each, never a frame read; then it
/// waits to be killed.
#[test]
fn staller_process() {
    use prost::Message;
    let Ok(dir) = std::env::var(STALL_DIR) else {
        return;
    };
    let volume_id = std::env::var(STALL_VOLUME).unwrap();
    let socket = Path::new(&dir).join("csi-proxy-volume-v2alpha1.sock");
    let msg = vl::FormatVolumeRequest { volume_id }.encode_to_vec();
    let mut held = Vec::new();
    for _ in 0..5 {
        let mut s = std::os::unix::net::UnixStream::connect(&socket).unwrap();
        let mut enc = RequestEncoder::new(Shape::default());
        let mut out = RequestEncoder::preface();
        for _ in 0..128 {
            let block = enc.request_block(
                "/v2alpha1.Volume/FormatVolume",
                None,
                &[(b"grpc-timeout", b"300S")],
            );
            enc.put_request(&mut out, &block, &msg);
        }
        s.write_all(&out).unwrap();
        held.push(s);
    }
    println!("sent");
    std::thread::sleep(Duration::from_secs(600));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_connections_leave_the_pool_to_other_callers() {
    if !can_run() || !can_throttle() {
        return;
    }
    let proxy = Proxy::start(&["-socket-mode=0666"]);
    std::fs::set_permissions(proxy.root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let disk = LoopDisk::new(proxy.root.path(), 128 * MIB);
    let vol = common::partitioned_volume(&proxy, disk.number).await;
    let c = proxy.client();
    let throttle = Throttle::at(&disk, 256 * 1024);
    // The slow format the stalled calls join: this test's own, not waited for.
    let format = tokio::spawn({
        let vol = vol.clone();
        let mut v = c.connect_volume_v2alpha1().await.unwrap();
        async move {
            v.format_volume(vl::FormatVolumeRequest { volume_id: vol })
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;

    let mut staller = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "staller_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(STALL_DIR, &proxy.socket_dir)
        .env(STALL_VOLUME, &vol)
        .uid(65534)
        .gid(65534)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::BufRead;
        let mut line = String::new();
        let out = staller.stdout.as_mut().unwrap();
        let mut r = std::io::BufReader::new(out);
        while !line.contains("sent") {
            line.clear();
            assert!(r.read_line(&mut line).unwrap() > 0, "the staller ended");
        }
    }
    // Let the server take in all 640 calls.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        !format.is_finished(),
        "the format ended before the stalled calls could be measured"
    );

    let threads = proxy.threads();
    eprintln!("server threads while stalled: {threads}");
    // The caller's 64 jobs, the workers and a few more; not the pool's 512.
    assert!(threads < 200, "{threads} threads");
    // Another caller's blocking calls run at once.
    let mut f =
        fs::filesystem_client::FilesystemClient::new(proxy.channel("filesystem-v2alpha1").await);
    for i in 0..5 {
        let dir = proxy.kubelet.join(format!("other-{i}"));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub/file"), b"x").unwrap();
        let t = Instant::now();
        // A blocking call (it removes a tree).
        let r = tokio::time::timeout(
            Duration::from_secs(10),
            f.rmdir_contents(fs::RmdirContentsRequest {
                path: dir.display().to_string(),
            }),
        )
        .await;
        let took = t.elapsed();
        assert!(
            r.is_ok(),
            "RmdirContents waited {took:?} behind another caller's stalled connections"
        );
        r.unwrap().unwrap();
        assert!(!dir.join("sub").exists());
        assert!(took < Duration::from_secs(2), "RmdirContents took {took:?}");
    }
    assert!(
        !format.is_finished(),
        "measured while the calls were stalled"
    );
    let _ = staller.kill();
    let _ = staller.wait();
    drop(throttle);
    format.await.unwrap().unwrap();
}
