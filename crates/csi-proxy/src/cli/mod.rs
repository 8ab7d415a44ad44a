//! Command-line flags: the upstream csi-proxy flags plus klog's, in Go syntax.
//!
//! Every flag may be written `-name`, `--name`, `-name=value` or
//! `-name value` (non-booleans only); see [`argv::normalize`].
//! Booleans follow Go: `-b` or `-b=<bool>` only. `-b false` (with a space) is
//! an error here, whereas Go would stop parsing at the positional `false`.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::error::ErrorKind;
use clap::{ArgAction, CommandFactory, FromArgMatches, Parser};

mod argv;
mod goflags;

use goflags::{
    parse_go_bool, parse_go_duration, parse_klog_severity, parse_octal_mode, parse_positive_count,
    path_allowing_empty,
};

/// Default kubelet root directory.
#[cfg(windows)]
pub const DEFAULT_KUBELET_PATH: &str = r"C:\var\lib\kubelet";
/// Default kubelet root directory.
#[cfg(not(windows))]
pub const DEFAULT_KUBELET_PATH: &str = "/var/lib/kubelet";

/// Default security descriptor of every named pipe: full access for
/// BUILTIN\Administrators and LocalSystem only, no inherited ACEs, owned
/// by BUILTIN\Administrators (explicit: without `O:` Windows would apply the
/// token's default owner, which may be a user).
pub const DEFAULT_PIPE_SDDL: &str = "O:BAD:P(A;;GA;;;BA)(A;;GA;;;SY)";

/// Default pipe name prefix: pipes are `\\.\pipe\csi-proxy-<group>-<version>`.
pub const DEFAULT_PIPE_PREFIX: &str = r"\\.\pipe\csi-proxy-";

const AFTER_HELP: &str = "\
Flags may be written with one or two dashes: -name, --name, -name=value, -name value.
Boolean flags take their value only with '=': -flag, -flag=true, -flag=false.";

/// csi-proxy command line.
#[derive(Debug, Clone, PartialEq, Eq, Parser)]
#[command(
    name = "csi-proxy",
    version = crate::version::LONG,
    about = "Serves the CSI Proxy API groups to CSI node plugins.",
    after_help = AFTER_HELP,
    args_override_self = true,
    max_term_width = 100
)]
pub struct Cli {
    /// Kubelet root directory; always an allowed path prefix.
    #[arg(long = "kubelet-path", value_name = "PATH", default_value = DEFAULT_KUBELET_PATH)]
    pub kubelet_path: String,

    /// Old (v0.x) kubelet plugins directory; added to the allowed path prefixes.
    #[arg(long = "kubelet-csi-plugins-path", value_name = "PATH")]
    pub kubelet_csi_plugins_path: Option<String>,

    /// Old (v0.x) kubelet pods directory; added to the allowed path prefixes.
    #[arg(long = "kubelet-pod-path", value_name = "PATH")]
    pub kubelet_pod_path: Option<String>,

    /// Extra allowed path prefix for filesystem operations (repeatable).
    #[arg(long = "working-dir", value_name = "PATH", action = ArgAction::Append)]
    pub working_dirs: Vec<String>,

    /// Run under the Windows Service Control Manager as service csiproxy.
    #[arg(long = "windows-service", default_value = "false", value_name = "BOOL",
          action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_go_bool)]
    pub windows_service: bool,

    /// Let PartitionDisk and FormatVolume write over non-zero bytes that no
    /// known format explains (identified content is never written over).
    #[arg(long = "overwrite-unidentified-content", default_value = "false", value_name = "BOOL",
          action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_go_bool)]
    pub overwrite_unidentified_content: bool,

    /// Create SMB global mappings with RequirePrivacy (SMB encryption).
    #[arg(long = "require-privacy", default_value = "true", value_name = "BOOL",
          action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_go_bool)]
    pub require_privacy: bool,

    /// Let NewSmbGlobalMapping map a share without a user name: on Windows
    /// the proxy then signs in to the named host as this node's computer
    /// account (LocalSystem), on Linux as a guest. Off: such a mapping is
    /// refused (see docs/security.md, the NTLM coercion risk).
    #[arg(long = "smb-allow-no-credentials", default_value = "false", value_name = "BOOL",
          action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_go_bool)]
    pub smb_allow_no_credentials: bool,

    /// Services the System API may start and stop, compared after the
    /// service manager resolved aliases and display names (comma-separated,
    /// repeatable); none given: the storage services (Windows MSiSCSI;
    /// Linux iscsid, open-iscsi, multipathd); * allows every service, as
    /// upstream. Protected services, drivers and other unit types never.
    #[arg(long = "allowed-services", value_name = "NAMES", action = ArgAction::Append,
          value_delimiter = ',')]
    pub allowed_services: Vec<String>,

    /// More services StopService refuses, beyond the built-in node-critical
    /// set (comma-separated, repeatable; a trailing * makes a prefix).
    #[arg(long = "protected-services", value_name = "NAMES", action = ArgAction::Append,
          value_delimiter = ',')]
    pub protected_services: Vec<String>,

    /// Services taken out of the built-in protected set (comma-separated,
    /// repeatable; logged at start-up). The own service stays protected.
    #[arg(long = "unprotect-services", value_name = "NAMES", action = ArgAction::Append,
          value_delimiter = ',')]
    pub unprotect_services: Vec<String>,

    /// TCP address of the Prometheus /metrics endpoint; empty disables it.
    #[arg(
        long = "metrics-bind-address",
        value_name = "ADDR",
        default_value = "",
        hide_default_value = true
    )]
    pub metrics_bind_address: String,

    /// Filesystem that FormatVolume creates on Linux: ext4, ext3, ext2 or
    /// xfs (Windows always formats NTFS).
    #[arg(long = "volume-fs-type", value_name = "FS", default_value = "ext4",
          value_parser = ["ext4", "ext3", "ext2", "xfs"])]
    pub volume_fs_type: String,

    /// Directory of what must outlive a restart (Linux: records of formats
    /// in progress, so that the retry of one cut short completes), outside
    /// the kubelet path and working dirs; empty: keep nothing.
    #[arg(
        long = "state-dir",
        value_name = "DIR",
        default_value = "/var/lib/csi-proxy"
    )]
    pub state_dir: PathBuf,

    /// Directory of the Unix sockets (Linux mode).
    #[arg(long = "socket-dir", value_name = "DIR")]
    pub socket_dir: Option<PathBuf>,

    /// File mode of each Unix socket, in octal (Linux mode).
    #[arg(long = "socket-mode", value_name = "OCTAL", default_value = "0600",
          value_parser = parse_octal_mode)]
    pub socket_mode: u32,

    /// Pipe name prefix (Windows): the pipe of a group/version is
    /// <prefix><group>-<version>.
    #[arg(long = "pipe-prefix", value_name = "PREFIX", default_value = DEFAULT_PIPE_PREFIX)]
    pub pipe_prefix: String,

    /// Service name with -windows-service, install-service and uninstall-service.
    #[arg(long = "service-name", value_name = "NAME", default_value = "csiproxy")]
    pub service_name: String,

    /// Security descriptor (SDDL) of every named pipe (Windows). Refused at
    /// start-up when it lets anyone but SYSTEM, Administrators or the
    /// service's own SID create pipe instances or rewrite the DACL.
    #[arg(long = "pipe-sddl", value_name = "SDDL", default_value = DEFAULT_PIPE_SDDL)]
    pub pipe_sddl: String,

    /// Comma-separated API groups to serve, as group or group-version (default: all).
    #[arg(long = "api-groups", value_name = "LIST")]
    pub api_groups: Option<String>,

    /// How long in-flight calls may drain on shutdown (Go duration).
    #[arg(long = "shutdown-timeout", value_name = "DURATION", default_value = "10s",
          value_parser = parse_go_duration)]
    pub shutdown_timeout: Duration,

    /// Close a connection that has not sent the HTTP/2 preface after this
    /// long (Go duration). grpc-go clients open one such connection to
    /// probe an endpoint; it costs only a parked task until then.
    #[arg(long = "preface-timeout", value_name = "DURATION", default_value = "2m",
          value_parser = parse_go_duration)]
    pub preface_timeout: Duration,

    /// Send GOAWAY to a connection that has had no call open for this long
    /// after its preface, and close it (Go duration; 0 never). grpc-go
    /// clients reconnect transparently on their next call.
    #[arg(long = "idle-timeout", value_name = "DURATION", default_value = "15m",
          value_parser = parse_go_duration)]
    pub idle_timeout: Duration,

    /// Ping a client not heard from for this long (Go duration; 0 never).
    #[arg(long = "keepalive-time", value_name = "DURATION", default_value = "2h",
          value_parser = parse_go_duration)]
    pub keepalive_time: Duration,

    /// Close a connection whose client stays silent this long after a
    /// keepalive ping (Go duration).
    #[arg(long = "keepalive-timeout", value_name = "DURATION", default_value = "20s",
          value_parser = parse_go_duration)]
    pub keepalive_timeout: Duration,

    /// At most this many open connections per endpoint; past it a new
    /// connection is closed at once (its client sees it closed and can
    /// retry) until some end.
    #[arg(long = "max-connections-per-endpoint", value_name = "N",
          default_value_t = csi_proxy_server::Config::DEFAULT_MAX_CONNECTIONS_PER_ENDPOINT,
          value_parser = parse_positive_count)]
    pub max_connections_per_endpoint: usize,

    /// Audit log: one JSON line per recorded call (who, what, outcome);
    /// '-' is standard error. Off when not given.
    #[arg(long = "audit-log", value_name = "PATH|-")]
    pub audit_log: Option<PathBuf>,

    /// Which calls the audit log records: none, write (calls that can
    /// change the host, and refused calls) or all.
    #[arg(long = "audit-level", value_name = "LEVEL", default_value = "write",
          value_parser = ["none", "write", "all"])]
    pub audit_level: String,

    /// What a line that cannot be written does: best-effort drops it
    /// (counted in csi_proxy_audit_dropped_total) and answers the call;
    /// blocking answers the call Unavailable.
    #[arg(long = "audit-mode", value_name = "MODE", default_value = "best-effort",
          value_parser = ["best-effort", "blocking"])]
    pub audit_mode: String,

    /// Rotate the audit log when it would pass this size in MB (0: never).
    #[arg(long = "audit-log-max-size", value_name = "MB", default_value_t = 100)]
    pub audit_log_max_size: u64,

    /// Rotated audit logs kept (<file>.1 newest ... <file>.N).
    #[arg(long = "audit-log-max-backups", value_name = "N", default_value_t = 5)]
    pub audit_log_max_backups: u32,

    /// Caller policy: a JSON file of which callers may call which group or
    /// method (re-read on SIGHUP and when it changes). Every caller is
    /// allowed when not given.
    #[arg(long = "caller-policy", value_name = "FILE")]
    pub caller_policy: Option<PathBuf>,

    /// The kubepods cgroups (absolute cgroup paths, comma-separated) below
    /// which a caller's pod UID and container id are read, where the node
    /// differs from /kubepods.slice and /kubepods (kind:
    /// /kubelet.slice/kubelet-kubepods.slice).
    #[arg(
        long = "kubepods-cgroup",
        value_name = "PATH,...",
        value_delimiter = ','
    )]
    pub kubepods_cgroup: Vec<String>,

    /// Log line format: text (klog) or json (Kubernetes components' JSON:
    /// ts, v, msg, key/values).
    #[arg(long = "logging-format", value_name = "FORMAT", default_value = "text",
          value_parser = ["text", "json"])]
    pub logging_format: String,

    /// Log verbosity: 0-3 info, 4-5 debug, 6+ trace.
    #[arg(long = "v", value_name = "LEVEL", default_value_t = 0)]
    pub v: u8,

    /// Log to standard error instead of files.
    #[arg(long = "logtostderr", default_value = "true", value_name = "BOOL",
          action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_go_bool)]
    pub logtostderr: bool,

    /// Log to standard error as well as files.
    #[arg(long = "alsologtostderr", default_value = "false", value_name = "BOOL",
          action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_go_bool)]
    pub alsologtostderr: bool,

    /// Log file (needs -logtostderr=false).
    #[arg(long = "log_file", value_parser = path_allowing_empty(), value_name = "FILE")]
    pub log_file: Option<PathBuf>,

    /// Directory for csi-proxy.log when -log_file is not set (needs -logtostderr=false).
    #[arg(long = "log_dir", value_parser = path_allowing_empty(), value_name = "DIR")]
    pub log_dir: Option<PathBuf>,

    /// Maximum log file size in MB before rotation to <file>.1; 0 is unlimited.
    #[arg(long = "log_file_max_size", value_name = "MB", default_value_t = 1800)]
    pub log_file_max_size: u64,

    /// Per-module verbosity (accepted for compatibility, ignored).
    #[arg(long = "vmodule", value_name = "PATTERN=N,...")]
    pub vmodule: Option<String>,

    /// Stderr severity threshold (accepted for compatibility, ignored).
    #[arg(long = "stderrthreshold", value_name = "SEVERITY", value_parser = parse_klog_severity)]
    pub stderrthreshold: Option<String>,

    /// Stderr threshold with -alsologtostderr (accepted for compatibility, ignored).
    #[arg(long = "alsologtostderrthreshold", value_name = "SEVERITY",
          value_parser = parse_klog_severity)]
    pub alsologtostderrthreshold: Option<String>,

    /// Legacy stderr threshold behaviour (accepted for compatibility, ignored).
    #[arg(long = "legacy_stderr_threshold_behavior", value_name = "BOOL",
          action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_go_bool)]
    pub legacy_stderr_threshold_behavior: Option<bool>,

    /// Add the file directory to log headers (accepted for compatibility, ignored).
    #[arg(long = "add_dir_header", value_name = "BOOL",
          action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_go_bool)]
    pub add_dir_header: Option<bool>,

    /// Omit log headers (accepted for compatibility, ignored).
    #[arg(long = "skip_headers", value_name = "BOOL",
          action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_go_bool)]
    pub skip_headers: Option<bool>,

    /// Omit headers in log files (accepted for compatibility, ignored).
    #[arg(long = "skip_log_headers", value_name = "BOOL",
          action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_go_bool)]
    pub skip_log_headers: Option<bool>,

    /// Log each severity to one file only (accepted for compatibility, ignored).
    #[arg(long = "one_output", value_name = "BOOL",
          action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_go_bool)]
    pub one_output: Option<bool>,

    /// Emit a stack trace at file:N (accepted for compatibility, ignored).
    #[arg(long = "log_backtrace_at", value_name = "FILE:N")]
    pub log_backtrace_at: Option<String>,

    /// Log flush period (accepted for compatibility, ignored).
    #[arg(long = "log_flush_frequency", value_name = "DURATION",
          value_parser = parse_go_duration)]
    pub log_flush_frequency: Option<Duration>,
}

impl Cli {
    /// Parses the process arguments; prints help, version or the error and
    /// exits on failure, like Go's `flag.ExitOnError`.
    pub fn parse_from_env() -> Cli {
        match Cli::try_parse_args(std::env::args_os()) {
            Ok(cli) => cli,
            Err(err) => err.exit(),
        }
    }

    /// Parses `args` (the first is the program name) in Go flag syntax.
    pub fn try_parse_args(args: impl IntoIterator<Item = OsString>) -> Result<Cli, clap::Error> {
        let mut cmd = Cli::command();
        let names = long_flag_names(&cmd);
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let args = argv::normalize(args.into_iter().collect(), &names);
        let matches = match cmd.try_get_matches_from_mut(&args) {
            Ok(matches) => matches,
            Err(err) if err.kind() == ErrorKind::UnknownArgument => {
                // clap reads an unknown `-name` as the short flag `-n`; say
                // what Go says instead.
                return Err(match unknown_single_dash_flag(&args) {
                    Some(name) => cmd.error(
                        ErrorKind::UnknownArgument,
                        format!("flag provided but not defined: -{name}"),
                    ),
                    None => err,
                });
            }
            Err(err) => return Err(err),
        };
        Cli::from_arg_matches(&matches).map_err(|err| err.format(&mut cmd))
    }

    /// Allowed path prefixes: the kubelet path, every working dir, then the
    /// old v0.x kubelet paths if given. Empty and duplicate entries are
    /// dropped (an empty prefix would allow every path).
    pub fn allowed_roots(&self) -> Vec<String> {
        let candidates = std::iter::once(&self.kubelet_path)
            .chain(&self.working_dirs)
            .chain(&self.kubelet_csi_plugins_path)
            .chain(&self.kubelet_pod_path);
        let mut roots: Vec<String> = Vec::new();
        for root in candidates {
            let root = root.trim();
            if !root.is_empty() && !roots.iter().any(|r| r == root) {
                roots.push(root.to_string());
            }
        }
        roots
    }

    /// The `-api-groups` items, split on commas and trimmed, empty items
    /// dropped; `None` when the flag was not given (serve everything).
    pub fn api_group_list(&self) -> Option<Vec<String>> {
        self.api_groups.as_ref().map(|raw| {
            raw.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        })
    }

    /// Names of the given flags that are accepted but have no effect.
    pub fn ignored_flags(&self) -> Vec<&'static str> {
        let flags: [(&'static str, bool); 10] = [
            ("vmodule", self.vmodule.is_some()),
            ("stderrthreshold", self.stderrthreshold.is_some()),
            (
                "alsologtostderrthreshold",
                self.alsologtostderrthreshold.is_some(),
            ),
            (
                "legacy_stderr_threshold_behavior",
                self.legacy_stderr_threshold_behavior.is_some(),
            ),
            ("add_dir_header", self.add_dir_header.is_some()),
            ("skip_headers", self.skip_headers.is_some()),
            ("skip_log_headers", self.skip_log_headers.is_some()),
            ("one_output", self.one_output.is_some()),
            ("log_backtrace_at", self.log_backtrace_at.is_some()),
            ("log_flush_frequency", self.log_flush_frequency.is_some()),
        ];
        flags
            .into_iter()
            .filter_map(|(name, given)| given.then_some(name))
            .collect()
    }
}

/// The first argument (before `--`) still shaped `-name` with a name of two
/// or more characters; after normalisation only unknown flags look so.
fn unknown_single_dash_flag(args: &[OsString]) -> Option<String> {
    args.iter()
        .skip(1)
        .take_while(|a| *a != "--")
        .filter_map(|a| a.to_str())
        .filter_map(|a| a.strip_prefix('-'))
        .map(|rest| rest.split_once('=').map_or(rest, |(name, _)| name))
        .find(|name| name.chars().count() >= 2 && name.starts_with(|c: char| c.is_alphabetic()))
        .map(str::to_string)
}

/// Long names (and aliases) of every flag, plus clap's `help` and `version`.
fn long_flag_names(cmd: &clap::Command) -> Vec<String> {
    let mut names: Vec<String> = vec!["help".into(), "version".into()];
    for arg in cmd.get_arguments() {
        let longs = arg.get_long_and_visible_aliases().unwrap_or_default();
        names.extend(longs.into_iter().map(str::to_string));
    }
    names.sort();
    names.dedup();
    names
}

#[cfg(test)]
mod tests;
