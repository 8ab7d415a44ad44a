//! `-metrics-bind-address` and the health service against the real binary
//! over its Unix sockets: real calls, then a scrape of `/metrics` parsed
//! with a Prometheus text-format parser (`prometheus-parse`), checking
//! upstream's grpc-ecosystem series, labels and buckets, the process
//! metrics and ours; `grpc.health.v1.Health/Check` on every endpoint (what
//! `grpc_health_probe` does); and a metrics port that is taken stops
//! start-up.
#![cfg(unix)]

mod common;

use common::Proxy;
use csi_proxy_api::filesystem::{v1, v1beta1};
use csi_proxy_api::health::v1::health_check_response::ServingStatus;
use csi_proxy_api::health::v1::{health_client::HealthClient, HealthCheckRequest};
use csi_proxy_api::API_VERSIONS;
use prometheus_parse::{Sample, Scrape, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tonic::Code;

/// The metrics address from the "csi-proxy ready" line.
fn metrics_address(p: &Proxy) -> String {
    let log = p.log();
    let line = log
        .lines()
        .find(|l| l.contains("csi-proxy ready"))
        .expect("ready line");
    let at = line.find("metrics=").expect("metrics field") + "metrics=".len();
    line[at..]
        .split_whitespace()
        .next()
        .unwrap()
        .trim_matches('"')
        .to_string()
}

/// One HTTP/1.1 request; returns the status code, the headers (lower-case
/// names) and the body.
fn http(addr: &str, method: &str, path: &str, accept: Option<&str>) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let accept = accept
        .map(|a| format!("Accept: {a}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{accept}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").expect("a full response");
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, head.to_ascii_lowercase(), body.to_string())
}

fn scrape(addr: &str) -> Scrape {
    let (status, head, body) = http(addr, "GET", "/metrics", None);
    assert_eq!(status, 200, "{head}");
    assert!(
        head.contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).expect("parses")
}

fn find<'a>(s: &'a Scrape, metric: &str, labels: &[(&str, &str)]) -> Vec<&'a Sample> {
    s.samples
        .iter()
        .filter(|x| x.metric == metric && labels.iter().all(|(k, v)| x.labels.get(k) == Some(v)))
        .collect()
}

fn counter(s: &Scrape, metric: &str, labels: &[(&str, &str)]) -> f64 {
    let found = find(s, metric, labels);
    assert_eq!(found.len(), 1, "{metric} {labels:?}: {found:?}");
    match found[0].value {
        Value::Counter(v) => v,
        ref other => panic!("{metric} is not typed counter: {other:?}"),
    }
}

fn gauge(s: &Scrape, metric: &str, labels: &[(&str, &str)]) -> f64 {
    let found = find(s, metric, labels);
    assert_eq!(found.len(), 1, "{metric} {labels:?}: {found:?}");
    match found[0].value {
        Value::Gauge(v) => v,
        ref other => panic!("{metric} is not typed gauge: {other:?}"),
    }
}

const PE: [(&str, &str); 3] = [
    ("grpc_type", "unary"),
    ("grpc_service", "v1.Filesystem"),
    ("grpc_method", "PathExists"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_after_real_calls_and_health_on_every_endpoint() {
    let p = Proxy::start(&["-metrics-bind-address=127.0.0.1:0"]);
    let addr = metrics_address(&p);
    let kubelet = p.kubelet.display().to_string();

    // Real calls: 3 PathExists on v1 (2 OK, 1 refused), 1 Mkdir, 1 on v1beta1.
    let mut fs = v1::filesystem_client::FilesystemClient::new(p.channel("filesystem-v1").await);
    for path in [kubelet.clone(), format!("{kubelet}/missing")] {
        fs.path_exists(v1::PathExistsRequest { path })
            .await
            .unwrap();
    }
    let outside = p.outside.display().to_string();
    let err = fs
        .path_exists(v1::PathExistsRequest { path: outside })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);
    fs.mkdir(v1::MkdirRequest {
        path: format!("{kubelet}/made"),
    })
    .await
    .unwrap();
    let mut old =
        v1beta1::filesystem_client::FilesystemClient::new(p.channel("filesystem-v1beta1").await);
    old.path_exists(v1beta1::PathExistsRequest {
        path: kubelet.clone(),
        context: 0,
    })
    .await
    .unwrap();

    // Health: what grpc_health_probe asks, on all 23 endpoints.
    for api in API_VERSIONS {
        let endpoint = format!("{}-{}", api.group, api.version);
        let mut h = HealthClient::new(p.channel(&endpoint).await);
        for service in [String::new(), api.service()] {
            let r = h
                .check(HealthCheckRequest {
                    service: service.clone(),
                })
                .await
                .unwrap_or_else(|e| panic!("{endpoint} {service:?}: {e}"))
                .into_inner();
            assert_eq!(r.status(), ServingStatus::Serving, "{endpoint} {service:?}");
        }
        let e = h
            .check(HealthCheckRequest {
                service: "v9.Nothing".into(),
            })
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::NotFound, "{endpoint}");
        let e = h.watch(HealthCheckRequest::default()).await.unwrap_err();
        assert_eq!(e.code(), Code::Unimplemented, "{endpoint}");
    }

    // The scrape, while `fs` keeps its connection open.
    let s = scrape(&addr);
    assert_eq!(counter(&s, "grpc_server_started_total", &PE), 3.0);
    assert_eq!(counter(&s, "grpc_server_msg_received_total", &PE), 3.0);
    assert_eq!(counter(&s, "grpc_server_msg_sent_total", &PE), 2.0);
    let mut ok = PE.to_vec();
    ok.push(("grpc_code", "OK"));
    assert_eq!(counter(&s, "grpc_server_handled_total", &ok), 2.0);
    let mut denied = PE.to_vec();
    denied.push(("grpc_code", "PermissionDenied"));
    assert_eq!(counter(&s, "grpc_server_handled_total", &denied), 1.0);
    let old_pe = [
        ("grpc_type", "unary"),
        ("grpc_service", "v1beta1.Filesystem"),
        ("grpc_method", "PathExists"),
        ("grpc_code", "OK"),
    ];
    assert_eq!(counter(&s, "grpc_server_handled_total", &old_pe), 1.0);
    // Every method of every served version has its series (as upstream's
    // InitializeMetrics does), 139 in all.
    assert_eq!(find(&s, "grpc_server_started_total", &[]).len(), 139);
    // The histogram: upstream's buckets, 3 observations.
    let h = find(&s, "grpc_server_handling_seconds", &PE);
    assert_eq!(h.len(), 1, "{h:?}");
    let Value::Histogram(buckets) = &h[0].value else {
        panic!("not a histogram: {:?}", h[0])
    };
    let bounds: Vec<f64> = buckets.iter().map(|b| b.less_than).collect();
    let mut want = csi_proxy_server::metrics::HANDLING_BUCKETS.to_vec();
    want.push(f64::INFINITY);
    assert_eq!(bounds, want);
    assert_eq!(
        [0.001, 0.01, 0.1, 0.3, 0.6, 1.0, 3.0, 6.0, 9.0, 20.0, 30.0, 60.0, 90.0, 120.0],
        csi_proxy_server::metrics::HANDLING_BUCKETS
    );
    assert_eq!(buckets.last().unwrap().count, 3.0);
    let count = find(&s, "grpc_server_handling_seconds_count", &PE);
    assert_eq!(count.len(), 1);
    // Ours.
    let host = find(
        &s,
        "csi_proxy_host_operation_seconds",
        &[("group", "filesystem"), ("operation", "path_exists")],
    );
    let Value::Histogram(hb) = &host[0].value else {
        panic!("{host:?}")
    };
    // The refusal comes from the host library's path policy, so all 4
    // PathExists calls (v1 and v1beta1) ran the host operation.
    assert_eq!(hb.last().unwrap().count, 4.0);
    let mkdir = find(
        &s,
        "csi_proxy_host_operation_seconds",
        &[("group", "filesystem"), ("operation", "mkdir")],
    );
    assert_eq!(mkdir.len(), 1);
    assert_eq!(
        gauge(
            &s,
            "csi_proxy_calls_in_flight",
            &[
                ("grpc_service", "v1.Filesystem"),
                ("grpc_method", "PathExists")
            ]
        ),
        0.0
    );
    assert!(
        gauge(
            &s,
            "csi_proxy_open_connections",
            &[("endpoint", "filesystem-v1")]
        ) >= 1.0
    );
    let info = find(&s, "csi_proxy_build_info", &[]);
    assert_eq!(info.len(), 1);
    assert_eq!(info[0].value, Value::Gauge(1.0));
    assert_eq!(
        info[0].labels.get("version"),
        Some(env!("CARGO_PKG_VERSION"))
    );
    assert!(info[0].labels.get("commit").is_some_and(|c| !c.is_empty()));
    assert_eq!(
        info[0].labels.get("target"),
        Some("x86_64-unknown-linux-gnu")
    );
    assert!(counter(&s, "process_cpu_seconds_total", &[]) > 0.0);
    for g in [
        "process_resident_memory_bytes",
        "process_virtual_memory_bytes",
        "process_open_fds",
        "process_max_fds",
        "process_start_time_seconds",
    ] {
        assert!(gauge(&s, g, &[]) > 0.0, "{g}");
    }

    // Connections close: the gauge follows.
    drop(fs);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let s = scrape(&addr);
        if gauge(
            &s,
            "csi_proxy_open_connections",
            &[("endpoint", "filesystem-v1")],
        ) == 0.0
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the connection gauge did not drop"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // OpenMetrics on request; other paths and methods.
    let (status, head, body) = http(
        &addr,
        "GET",
        "/metrics",
        Some("application/openmetrics-text;version=1.0.0,text/plain;q=0.5"),
    );
    assert_eq!(status, 200);
    assert!(head.contains("application/openmetrics-text"), "{head}");
    assert!(body.ends_with("# EOF\n"));
    assert!(body.contains("# TYPE grpc_server_handled counter"));
    assert_eq!(http(&addr, "GET", "/", None).0, 404);
    assert_eq!(http(&addr, "POST", "/metrics", None).0, 405);
    let (status, _, body) = http(&addr, "HEAD", "/metrics", None);
    assert_eq!((status, body.as_str()), (200, ""));
}

#[test]
fn a_taken_metrics_port_stops_start_up() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(common::bin())
        .arg(format!("-kubelet-path={}", dir.path().display()))
        .arg(format!("-socket-dir={}", dir.path().join("sock").display()))
        .arg(format!("-metrics-bind-address=127.0.0.1:{port}"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("-metrics-bind-address"), "{err}");
    assert!(!err.contains("csi-proxy ready"), "{err}");
}

#[test]
fn version_names_commit_and_target() {
    let out = std::process::Command::new(common::bin())
        .arg("-version")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with(&format!("csi-proxy {} (commit ", env!("CARGO_PKG_VERSION"))),
        "{text}"
    );
    assert!(text.contains("target x86_64-unknown-linux-gnu"), "{text}");
    assert!(
        ["clean", "dirty", "unknown"]
            .iter()
            .any(|t| text.contains(&format!(", tree {t}, "))),
        "{text}"
    );
}
