//! Prometheus metrics, in one place.
//!
//! - The series upstream exports through grpc-ecosystem's middleware, with
//!   the same names, labels and histogram buckets, so existing dashboards
//!   keep working: `grpc_server_started_total`, `grpc_server_handled_total`
//!   (with `grpc_code`), `grpc_server_msg_received_total`,
//!   `grpc_server_msg_sent_total`, `grpc_server_handling_seconds`; labels
//!   `grpc_type`, `grpc_service`, `grpc_method`.
//! - Process metrics on Linux and Windows ([`process`]).
//! - Ours: `csi_proxy_host_operation_seconds{group,operation}`,
//!   `csi_proxy_calls_in_flight{grpc_service,grpc_method}`,
//!   `csi_proxy_open_connections{endpoint}`,
//!   `csi_proxy_audit_dropped_total` (audit lines not written: see
//!   [`crate::audit`]) and `csi_proxy_build_info{version,commit,target}`.
//!
//! Calls are recorded at the one dispatch point
//! ([`crate::dispatch::VersionedService::call`]) through handles resolved
//! once per method when a service is built ([`MethodMetrics`]), so a call
//! costs a few atomic operations and no label lookup. Connections are
//! counted by the accept loops ([`ConnectionGauge`]). [`http`] serves
//! `/metrics`.

pub mod http;
mod process;
mod text;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::{Arc, OnceLock};
use std::time::Instant;
use tonic::Code;

pub use text::Format;

/// Upstream's `grpc_server_handling_seconds` buckets.
pub const HANDLING_BUCKETS: [f64; 14] = [
    0.001, 0.01, 0.1, 0.3, 0.6, 1.0, 3.0, 6.0, 9.0, 20.0, 30.0, 60.0, 90.0, 120.0,
];

/// `csi_proxy_host_operation_seconds` buckets: finer at the low end, where
/// path and stat operations live, up to formatting and resizing times.
pub const HOST_OPERATION_BUCKETS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0,
    60.0, 120.0,
];

/// What the build-info series says about this binary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuildInfo {
    pub version: String,
    pub commit: String,
    pub target: String,
}

type MethodLabels = [(&'static str, String); 3];
type CodeLabels = [(&'static str, String); 4];
type Pair = [(&'static str, String); 2];

fn handling_histogram() -> Histogram {
    Histogram::new(HANDLING_BUCKETS)
}

fn host_histogram() -> Histogram {
    Histogram::new(HOST_OPERATION_BUCKETS)
}

struct Families {
    started: Family<MethodLabels, Counter>,
    handled: Family<CodeLabels, Counter>,
    received: Family<MethodLabels, Counter>,
    sent: Family<MethodLabels, Counter>,
    handling: Family<MethodLabels, Histogram, fn() -> Histogram>,
    host: Family<Pair, Histogram, fn() -> Histogram>,
    in_flight: Family<Pair, Gauge>,
    connections: Family<[(&'static str, String); 1], Gauge>,
}

/// Every metric of the process and the registry that encodes them.
pub struct Metrics {
    registry: Registry,
    families: Arc<Families>,
    audit_dropped: Counter,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// A registry with every series, the process collector and the build
    /// info.
    pub fn new(build: &BuildInfo) -> Metrics {
        let families = Arc::new(Families {
            started: Family::default(),
            handled: Family::default(),
            received: Family::default(),
            sent: Family::default(),
            handling: Family::new_with_constructor(handling_histogram),
            host: Family::new_with_constructor(host_histogram),
            in_flight: Family::default(),
            connections: Family::default(),
        });
        let mut registry = Registry::default();
        let f = &families;
        registry.register(
            "grpc_server_started",
            "Total number of RPCs started on the server",
            f.started.clone(),
        );
        registry.register(
            "grpc_server_handled",
            "Total number of RPCs completed on the server, regardless of success or failure",
            f.handled.clone(),
        );
        registry.register(
            "grpc_server_msg_received",
            "Total number of RPC stream messages received on the server",
            f.received.clone(),
        );
        registry.register(
            "grpc_server_msg_sent",
            "Total number of gRPC stream messages sent by the server",
            f.sent.clone(),
        );
        registry.register(
            "grpc_server_handling_seconds",
            "Histogram of response latency (seconds) of gRPC that had been application-level \
             handled by the server",
            f.handling.clone(),
        );
        registry.register(
            "csi_proxy_host_operation_seconds",
            "Time spent in the host operation of a call (disk, volume, filesystem, ... work), \
             by API group and version-free operation",
            f.host.clone(),
        );
        registry.register(
            "csi_proxy_calls_in_flight",
            "Calls being handled right now",
            f.in_flight.clone(),
        );
        registry.register(
            "csi_proxy_open_connections",
            "Open client connections per endpoint",
            f.connections.clone(),
        );
        let info: Family<[(&'static str, String); 3], Gauge> = Family::default();
        info.get_or_create(&[
            ("version", build.version.clone()),
            ("commit", build.commit.clone()),
            ("target", build.target.clone()),
        ])
        .set(1);
        registry.register(
            "csi_proxy_build_info",
            "Always 1; the labels tell which build of csi-proxy is running",
            info,
        );
        let audit_dropped = Counter::default();
        registry.register(
            "csi_proxy_audit_dropped",
            "Audit lines not written: queue full or write failed (see -audit-mode)",
            audit_dropped.clone(),
        );
        registry.register_collector(Box::new(process::ProcessCollector::new()));
        Metrics {
            registry,
            families,
            audit_dropped,
        }
    }

    /// The handles of one method: `service` is e.g. `v1.Filesystem`,
    /// `method` e.g. `PathExists`, `group` the API group and `operation`
    /// the version-free host operation (e.g. `path_exists`).
    pub fn method(
        &self,
        service: &str,
        method: &str,
        group: &str,
        operation: &str,
    ) -> MethodMetrics {
        let f = &self.families;
        let labels: MethodLabels = [
            ("grpc_type", "unary".to_string()),
            ("grpc_service", service.to_string()),
            ("grpc_method", method.to_string()),
        ];
        MethodMetrics {
            inner: Arc::new(MethodInner {
                started: f.started.get_or_create_owned(&labels),
                received: f.received.get_or_create_owned(&labels),
                sent: f.sent.get_or_create_owned(&labels),
                handling: f.handling.get_or_create_owned(&labels),
                in_flight: f.in_flight.get_or_create_owned(&[
                    ("grpc_service", service.to_string()),
                    ("grpc_method", method.to_string()),
                ]),
                handled: Default::default(),
                families: self.families.clone(),
                labels,
            }),
            host: HostTimer(f.host.get_or_create_owned(&[
                ("group", group.to_string()),
                ("operation", operation.to_string()),
            ])),
        }
    }

    /// The open-connections gauge of one endpoint (e.g. `filesystem-v1`).
    pub fn connections(&self, endpoint: &str) -> ConnectionGauge {
        ConnectionGauge(
            self.families
                .connections
                .get_or_create_owned(&[("endpoint", endpoint.to_string())]),
        )
    }

    /// The counter of audit lines dropped (`csi_proxy_audit_dropped_total`).
    pub fn audit_dropped(&self) -> Counter {
        self.audit_dropped.clone()
    }

    /// Everything, in `format`.
    pub fn encode(&self, format: Format) -> String {
        let mut out = String::with_capacity(64 << 10);
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        match format {
            Format::OpenMetrics => out,
            Format::Prometheus => text::to_prometheus(&out),
        }
    }
}

/// The metric handles of one method, resolved once.
#[derive(Clone)]
pub struct MethodMetrics {
    inner: Arc<MethodInner>,
    host: HostTimer,
}

struct MethodInner {
    started: Counter,
    received: Counter,
    sent: Counter,
    handling: Histogram,
    in_flight: Gauge,
    /// `grpc_server_handled_total` per code, created on first use.
    handled: [OnceLock<Counter>; 17],
    families: Arc<Families>,
    labels: MethodLabels,
}

impl MethodMetrics {
    /// A call started: its request message was received.
    pub fn begin(&self) -> CallRecord {
        let m = &self.inner;
        m.started.inc();
        m.received.inc();
        m.in_flight.inc();
        CallRecord {
            metrics: Some(self.inner.clone()),
            start: Instant::now(),
        }
    }

    /// The timer of this method's host operation.
    pub fn host(&self) -> &HostTimer {
        &self.host
    }
}

/// One call being handled. [`CallRecord::finish`] records its outcome; a
/// record dropped unfinished (the handler panicked) counts as `Internal`.
pub struct CallRecord {
    metrics: Option<Arc<MethodInner>>,
    start: Instant,
}

impl CallRecord {
    /// The call was answered with `code`.
    pub fn finish(mut self, code: Code) {
        if let Some(m) = self.metrics.take() {
            record(&m, self.start, code);
        }
    }
}

impl Drop for CallRecord {
    fn drop(&mut self) {
        if let Some(m) = self.metrics.take() {
            record(&m, self.start, Code::Internal);
        }
    }
}

fn record(m: &MethodInner, start: Instant, code: Code) {
    let index = usize::try_from(i32::from(code)).map_or(2, |i| i.min(16));
    m.handled[index]
        .get_or_init(|| {
            let [t, s, me] = m.labels.clone();
            m.families.handled.get_or_create_owned(&[
                t,
                s,
                me,
                ("grpc_code", go_code_name(code).to_string()),
            ])
        })
        .inc();
    m.handling.observe(start.elapsed().as_secs_f64());
    if code == Code::Ok {
        m.sent.inc();
    }
    m.in_flight.dec();
}

/// Times host operations of one group and operation.
#[derive(Clone)]
pub struct HostTimer(Histogram);

impl HostTimer {
    /// Run `f`, recording how long it took.
    pub fn time<T>(&self, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = f();
        self.observe_since(start);
        out
    }

    /// Record an operation that started at `start` and has just ended.
    pub fn observe_since(&self, start: Instant) {
        self.0.observe(start.elapsed().as_secs_f64());
    }
}

/// Counts the open connections of one endpoint.
#[derive(Clone)]
pub struct ConnectionGauge(Gauge);

impl ConnectionGauge {
    /// A connection was accepted; it counts until the guard is dropped.
    pub fn open(&self) -> ConnectionGuard {
        self.0.inc();
        ConnectionGuard(self.0.clone())
    }
}

/// One open connection (see [`ConnectionGauge::open`]).
pub struct ConnectionGuard(Gauge);

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// grpc-go's name of a status code (`codes.Code.String()`), the value of
/// upstream's `grpc_code` label.
pub fn go_code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "Canceled",
        Code::Unknown => "Unknown",
        Code::InvalidArgument => "InvalidArgument",
        Code::DeadlineExceeded => "DeadlineExceeded",
        Code::NotFound => "NotFound",
        Code::AlreadyExists => "AlreadyExists",
        Code::PermissionDenied => "PermissionDenied",
        Code::ResourceExhausted => "ResourceExhausted",
        Code::FailedPrecondition => "FailedPrecondition",
        Code::Aborted => "Aborted",
        Code::OutOfRange => "OutOfRange",
        Code::Unimplemented => "Unimplemented",
        Code::Internal => "Internal",
        Code::Unavailable => "Unavailable",
        Code::DataLoss => "DataLoss",
        Code::Unauthenticated => "Unauthenticated",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build() -> BuildInfo {
        BuildInfo {
            version: "1.2.3".into(),
            commit: "abc".into(),
            target: "x86_64-unknown-linux-gnu".into(),
        }
    }

    #[test]
    fn a_call_is_recorded_under_upstream_names() {
        let m = Metrics::new(&build());
        let pe = m.method("v1.Filesystem", "PathExists", "filesystem", "path_exists");
        pe.begin().finish(Code::Ok);
        pe.begin().finish(Code::NotFound);
        drop(pe.begin()); // a panicking handler
        pe.host().time(|| ());
        let conns = m.connections("filesystem-v1");
        let g1 = conns.open();
        let _g2 = conns.open();
        drop(g1);
        let text = m.encode(Format::Prometheus);
        for want in [
            "# TYPE grpc_server_started_total counter".to_string(),
            r#"grpc_server_started_total{grpc_type="unary",grpc_service="v1.Filesystem",grpc_method="PathExists"} 3"#.to_string(),
            r#"grpc_server_msg_sent_total{grpc_type="unary",grpc_service="v1.Filesystem",grpc_method="PathExists"} 1"#.to_string(),
            r#"grpc_server_handled_total{grpc_type="unary",grpc_service="v1.Filesystem",grpc_method="PathExists",grpc_code="NotFound"} 1"#.to_string(),
            r#"grpc_server_handled_total{grpc_type="unary",grpc_service="v1.Filesystem",grpc_method="PathExists",grpc_code="Internal"} 1"#.to_string(),
            "grpc_server_handling_seconds_bucket{le=\"0.001\",grpc_type=\"unary\",grpc_service=\"v1.Filesystem\",grpc_method=\"PathExists\"} 3".to_string(),
            "grpc_server_handling_seconds_count{grpc_type=\"unary\",grpc_service=\"v1.Filesystem\",grpc_method=\"PathExists\"} 3".to_string(),
            "csi_proxy_calls_in_flight{grpc_service=\"v1.Filesystem\",grpc_method=\"PathExists\"} 0".to_string(),
            "csi_proxy_open_connections{endpoint=\"filesystem-v1\"} 1".to_string(),
            "csi_proxy_host_operation_seconds_count{group=\"filesystem\",operation=\"path_exists\"} 1".to_string(),
            "csi_proxy_build_info{version=\"1.2.3\",commit=\"abc\",target=\"x86_64-unknown-linux-gnu\"} 1".to_string(),
        ] {
            assert!(text.contains(&want), "missing {want}\n{text}");
        }
        assert!(!text.contains("# EOF"));
        let om = m.encode(Format::OpenMetrics);
        assert!(om.ends_with("# EOF\n"));
        assert!(om.contains("# TYPE grpc_server_started counter"));
    }

    #[test]
    fn every_code_has_its_go_name() {
        let names: std::collections::HashSet<&str> =
            (0..17).map(|i| go_code_name(Code::from_i32(i))).collect();
        assert_eq!(names.len(), 17);
        assert_eq!(go_code_name(Code::Cancelled), "Canceled");
    }
}
