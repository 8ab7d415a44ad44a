//! Command-line flags: the upstream csi-proxy flags plus klog's, in Go syntax.
//!
//! Every flag may be written `-name`, `--name`, `-name=value` or
//! `-name value` (non-booleans only); see [`crate::argv::normalize`].
//! Booleans follow Go: `-b` or `-b=<bool>` only. `-b false` (with a space) is
//! an error here, whereas Go would stop parsing at the positional `false`.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::error::ErrorKind;
use clap::{ArgAction, CommandFactory, FromArgMatches, Parser};

use crate::argv;

/// Default kubelet root directory.
#[cfg(windows)]
pub const DEFAULT_KUBELET_PATH: &str = r"C:\var\lib\kubelet";
/// Default kubelet root directory.
#[cfg(not(windows))]
pub const DEFAULT_KUBELET_PATH: &str = "/var/lib/kubelet";

/// Default security descriptor of every named pipe: full access for
/// BUILTIN\Administrators and LocalSystem only, no inherited ACEs.
pub const DEFAULT_PIPE_SDDL: &str = "D:P(A;;GA;;;BA)(A;;GA;;;SY)";

const AFTER_HELP: &str = "\
Flags may be written with one or two dashes: -name, --name, -name=value, -name value.
Boolean flags take their value only with '=': -flag, -flag=true, -flag=false.";

/// csi-proxy command line.
#[derive(Debug, Clone, PartialEq, Eq, Parser)]
#[command(
    name = "csi-proxy",
    version,
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

    /// Create SMB global mappings with RequirePrivacy (SMB encryption).
    #[arg(long = "require-privacy", default_value = "true", value_name = "BOOL",
          action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_go_bool)]
    pub require_privacy: bool,

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

    /// Directory of the Unix sockets (Linux mode).
    #[arg(long = "socket-dir", value_name = "DIR")]
    pub socket_dir: Option<PathBuf>,

    /// File mode of each Unix socket, in octal (Linux mode).
    #[arg(long = "socket-mode", value_name = "OCTAL", default_value = "0600",
          value_parser = parse_octal_mode)]
    pub socket_mode: u32,

    /// Security descriptor (SDDL) of every named pipe (Windows).
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

/// A `PathBuf` parser that, like Go, accepts an empty value (meaning unset).
fn path_allowing_empty() -> impl clap::builder::TypedValueParser<Value = PathBuf> {
    use clap::builder::TypedValueParser as _;
    clap::builder::OsStringValueParser::new().map(PathBuf::from)
}

/// Parses a file mode written in octal (`0600`, `600`, `0o660`), at most 0o777.
fn parse_octal_mode(s: &str) -> Result<u32, String> {
    let digits = s.strip_prefix("0o").unwrap_or(s);
    match u32::from_str_radix(digits, 8) {
        Ok(mode) if mode <= 0o777 && !digits.starts_with('+') => Ok(mode),
        _ => Err(format!(
            "invalid mode {s:?} (octal, e.g. 0600, at most 0777)"
        )),
    }
}

/// Parses a boolean the way Go's `strconv.ParseBool` does.
pub fn parse_go_bool(s: &str) -> Result<bool, String> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(format!(
            "invalid boolean {s:?} (use true/false, t/f, 1/0, TRUE/FALSE, True/False)"
        )),
    }
}

/// Validates a klog severity (`INFO`, `WARNING`, `ERROR`, `FATAL`, any case,
/// or 0-3) and returns it unchanged.
fn parse_klog_severity(s: &str) -> Result<String, String> {
    const NAMES: [&str; 4] = ["INFO", "WARNING", "ERROR", "FATAL"];
    let valid = NAMES.iter().any(|n| n.eq_ignore_ascii_case(s))
        || s.parse::<u8>().is_ok_and(|n| usize::from(n) < NAMES.len());
    if valid {
        Ok(s.to_string())
    } else {
        Err(format!(
            "invalid severity {s:?} (use INFO, WARNING, ERROR, FATAL or 0-3)"
        ))
    }
}

/// Parses a Go duration (`time.ParseDuration`): a sequence of decimal numbers
/// with units `ns`, `us` (`µs`), `ms`, `s`, `m`, `h`, e.g. `1m30s`, `1.5h`,
/// `500ms`. A bare `0` is allowed. Negative durations are rejected.
pub fn parse_go_duration(input: &str) -> Result<Duration, String> {
    let err = |why: &str| format!("invalid duration {input:?}: {why}");
    let (negative, mut s) = match input.as_bytes().first() {
        Some(b'-') => (true, &input[1..]),
        Some(b'+') => (false, &input[1..]),
        _ => (false, input),
    };
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err(err("empty (use e.g. 10s, 1m30s, 500ms)"));
    }
    // Go's limit: the duration must fit in an i64 of nanoseconds.
    const MAX_NANOS: u128 = i64::MAX as u128;
    let mut total: u128 = 0;
    while !s.is_empty() {
        let int_len = s.bytes().take_while(u8::is_ascii_digit).count();
        let (int_part, rest) = s.split_at(int_len);
        let (frac_part, rest) = match rest.strip_prefix('.') {
            Some(after) => {
                let frac_len = after.bytes().take_while(u8::is_ascii_digit).count();
                after.split_at(frac_len)
            }
            None => ("", rest),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(err("expected a number"));
        }
        let unit_len = rest
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (unit, rest) = rest.split_at(unit_len);
        let unit_nanos: u128 = match unit {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60 * 1_000_000_000,
            "h" => 3_600 * 1_000_000_000,
            "" => return Err(err("missing unit (ns, us, ms, s, m, h)")),
            _ => return Err(err(&format!("unknown unit {unit:?} (ns, us, ms, s, m, h)"))),
        };
        let overflow = || err("too large");
        let mut value: u128 = 0;
        for d in int_part.bytes() {
            value = value
                .checked_mul(10)
                .and_then(|v| v.checked_add(u128::from(d - b'0')))
                .filter(|v| *v <= MAX_NANOS)
                .ok_or_else(overflow)?;
        }
        value = value
            .checked_mul(unit_nanos)
            .filter(|v| *v <= MAX_NANOS)
            .ok_or_else(overflow)?;
        // Fraction, truncated to whole nanoseconds; digits past 1e-9 of the
        // largest unit cannot matter, so at most 13 are used.
        let (mut frac, mut scale) = (0u128, 1u128);
        for d in frac_part.bytes().take(13) {
            frac = frac * 10 + u128::from(d - b'0');
            scale *= 10;
        }
        value += frac * unit_nanos / scale;
        total = total
            .checked_add(value)
            .filter(|v| *v <= MAX_NANOS)
            .ok_or_else(overflow)?;
        s = rest;
    }
    if negative && total > 0 {
        return Err(err("must not be negative"));
    }
    let nanos = u64::try_from(total).map_err(|_| err("too large"))?;
    Ok(Duration::from_nanos(nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        let mut argv = vec![OsString::from("csi-proxy")];
        argv.extend(args.iter().map(OsString::from));
        Cli::try_parse_args(argv)
    }

    fn ok(args: &[&str]) -> Cli {
        parse(args).unwrap_or_else(|e| panic!("{args:?} should parse: {e}"))
    }

    #[test]
    fn defaults() {
        let cli = ok(&[]);
        assert_eq!(cli.kubelet_path, DEFAULT_KUBELET_PATH);
        assert!(cli.working_dirs.is_empty());
        assert!(!cli.windows_service);
        assert!(cli.require_privacy);
        assert_eq!(cli.metrics_bind_address, "");
        assert_eq!(cli.socket_dir, None);
        assert_eq!(cli.socket_mode, 0o600);
        assert_eq!(cli.pipe_sddl, DEFAULT_PIPE_SDDL);
        assert_eq!(cli.api_group_list(), None);
        assert_eq!(cli.shutdown_timeout, Duration::from_secs(10));
        assert_eq!(cli.preface_timeout, Duration::from_secs(120));
        assert_eq!(cli.idle_timeout, Duration::from_secs(900));
        assert_eq!(cli.keepalive_time, Duration::from_secs(7200));
        assert_eq!(cli.keepalive_timeout, Duration::from_secs(20));
        assert_eq!(cli.v, 0);
        assert!(cli.logtostderr);
        assert!(!cli.alsologtostderr);
        assert_eq!(cli.log_file, None);
        assert_eq!(cli.log_dir, None);
        assert_eq!(cli.log_file_max_size, 1800);
        assert!(cli.ignored_flags().is_empty());
        assert_eq!(cli.allowed_roots(), vec![DEFAULT_KUBELET_PATH.to_string()]);
    }

    #[test]
    fn upstream_service_line() {
        let cli = ok(&[
            "-windows-service",
            r"-log_file=C:\etc\kubernetes\logs\csi-proxy.log",
            "-logtostderr=false",
            "-v=5",
            "-metrics-bind-address=localhost:8888",
        ]);
        assert!(cli.windows_service);
        assert_eq!(
            cli.log_file,
            Some(PathBuf::from(r"C:\etc\kubernetes\logs\csi-proxy.log"))
        );
        assert!(!cli.logtostderr);
        assert_eq!(cli.v, 5);
        assert_eq!(cli.metrics_bind_address, "localhost:8888");
    }

    #[test]
    fn kubelet_path_forms() {
        for args in [
            &["-kubelet-path=D:\\k"][..],
            &["-kubelet-path", "D:\\k"],
            &["--kubelet-path=D:\\k"],
            &["--kubelet-path", "D:\\k"],
        ] {
            assert_eq!(ok(args).kubelet_path, r"D:\k", "{args:?}");
        }
    }

    #[test]
    fn repeated_flags() {
        let cli = ok(&[
            "-working-dir=C:\\a",
            "-working-dir",
            "C:\\b",
            "--working-dir=C:\\c",
        ]);
        assert_eq!(cli.working_dirs, vec![r"C:\a", r"C:\b", r"C:\c"]);
        // Go semantics: a repeated scalar flag keeps the last value.
        assert_eq!(ok(&["-v=1", "-v=3"]).v, 3);
        assert_eq!(
            ok(&["-kubelet-path=a", "-kubelet-path=b"]).kubelet_path,
            "b"
        );
        assert!(!ok(&["-windows-service", "-windows-service=false"]).windows_service);
    }

    #[test]
    fn allowed_roots() {
        let cli = ok(&[
            "-kubelet-path=C:\\k",
            "-working-dir=C:\\w",
            "-working-dir=",
            "-working-dir=C:\\k",
            "-kubelet-pod-path=C:\\p",
            "-kubelet-csi-plugins-path=C:\\q",
        ]);
        assert_eq!(
            cli.allowed_roots(),
            vec![r"C:\k", r"C:\w", r"C:\q", r"C:\p"]
        );
        assert!(ok(&["-kubelet-path="]).allowed_roots().is_empty());
    }

    #[test]
    fn go_bools() {
        let t = ["1", "t", "T", "TRUE", "true", "True"];
        let f = ["0", "f", "F", "FALSE", "false", "False"];
        for (vals, want) in [(t, true), (f, false)] {
            for v in vals {
                let cli = ok(&[
                    &format!("-windows-service={v}"),
                    &format!("-alsologtostderr={v}"),
                ]);
                assert_eq!(cli.windows_service, want, "{v}");
                assert_eq!(cli.alsologtostderr, want, "{v}");
                assert_eq!(
                    ok(&[&format!("-skip_headers={v}")]).skip_headers,
                    Some(want)
                );
            }
        }
        assert!(ok(&["-windows-service"]).windows_service);
        assert!(ok(&["--windows-service"]).windows_service);
        assert!(ok(&["-logtostderr"]).logtostderr);
        assert!(!ok(&["-require-privacy=false"]).require_privacy);
        assert!(ok(&["-require-privacy"]).require_privacy);
        for bad in [
            "-windows-service=yes",
            "-windows-service=",
            "-require-privacy=2",
        ] {
            assert!(parse(&[bad]).is_err(), "{bad}");
        }
        // Go would stop at the positional `false`; we reject it.
        assert!(parse(&["-windows-service", "false"]).is_err());
    }

    #[test]
    fn verbosity_forms() {
        for args in [&["-v=4"][..], &["-v", "4"], &["--v=4"], &["--v", "4"]] {
            assert_eq!(ok(args).v, 4, "{args:?}");
        }
        assert!(parse(&["-v=x"]).is_err());
        assert!(parse(&["-v"]).is_err());
    }

    #[test]
    fn other_flags() {
        let cli = ok(&[
            "-socket-dir=/run/csi-proxy",
            "-pipe-sddl",
            "D:P(A;;GA;;;SY)",
            "-api-groups= filesystem, disk-v1,,",
            "-shutdown-timeout=1m30s",
            "-preface-timeout=1500ms",
            "-idle-timeout=0",
            "-keepalive-time=1m",
            "-keepalive-timeout",
            "5s",
            "-log_dir",
            "/var/log",
            "-log_file_max_size=0",
            "-alsologtostderr",
        ]);
        assert_eq!(cli.socket_dir, Some(PathBuf::from("/run/csi-proxy")));
        assert_eq!(ok(&["-socket-mode=660"]).socket_mode, 0o660);
        assert_eq!(ok(&["-socket-mode", "0o666"]).socket_mode, 0o666);
        for bad in [
            "-socket-mode=8",
            "-socket-mode=01000",
            "-socket-mode=",
            "-socket-mode=+6",
        ] {
            assert!(parse(&[bad]).is_err(), "{bad}");
        }
        assert_eq!(cli.pipe_sddl, "D:P(A;;GA;;;SY)");
        assert_eq!(
            cli.api_group_list(),
            Some(vec!["filesystem".to_string(), "disk-v1".to_string()])
        );
        assert_eq!(cli.shutdown_timeout, Duration::from_secs(90));
        assert_eq!(cli.preface_timeout, Duration::from_millis(1500));
        assert_eq!(cli.idle_timeout, Duration::ZERO);
        assert_eq!(cli.keepalive_time, Duration::from_secs(60));
        assert_eq!(cli.keepalive_timeout, Duration::from_secs(5));
        assert_eq!(cli.log_dir, Some(PathBuf::from("/var/log")));
        assert_eq!(cli.log_file_max_size, 0);
        assert!(cli.alsologtostderr);
        assert_eq!(ok(&["-api-groups="]).api_group_list(), Some(vec![]));
        assert_eq!(
            ok(&["-log_file=", "-log_dir="]).log_file,
            Some(PathBuf::new())
        );
        assert!(parse(&["-shutdown-timeout=10"]).is_err());
        assert!(parse(&["-log_file_max_size=-1"]).is_err());
    }

    #[test]
    fn ignored_flags_are_reported() {
        let cli = ok(&[
            "-vmodule=foo=2",
            "-stderrthreshold=error",
            "-alsologtostderrthreshold=1",
            "-legacy_stderr_threshold_behavior=false",
            "-add_dir_header",
            "-skip_headers",
            "-skip_log_headers=true",
            "-one_output",
            "-log_backtrace_at=main.go:10",
            "-log_flush_frequency=5s",
        ]);
        assert_eq!(
            cli.ignored_flags(),
            vec![
                "vmodule",
                "stderrthreshold",
                "alsologtostderrthreshold",
                "legacy_stderr_threshold_behavior",
                "add_dir_header",
                "skip_headers",
                "skip_log_headers",
                "one_output",
                "log_backtrace_at",
                "log_flush_frequency",
            ]
        );
        assert_eq!(
            ok(&["-one_output=false"]).ignored_flags(),
            vec!["one_output"]
        );
        assert!(parse(&["-stderrthreshold=LOUD"]).is_err());
        assert!(parse(&["-stderrthreshold=4"]).is_err());
        assert!(parse(&["-log_flush_frequency=5"]).is_err());
    }

    #[test]
    fn unknown_flags_and_positionals_are_errors() {
        for args in [
            &["-unknown"][..],
            &["--unknown=1"],
            &["-kubelet_path=x"],
            &["positional"],
            &["--", "-v=1"],
        ] {
            let err = parse(args).expect_err("should fail");
            assert_eq!(err.kind(), ErrorKind::UnknownArgument, "{args:?}");
        }
        let err = parse(&["-v=1", "-bogus=2"]).expect_err("unknown flag");
        assert!(
            err.to_string()
                .contains("flag provided but not defined: -bogus"),
            "{err}"
        );
        let err = parse(&["--bogus"]).expect_err("unknown flag");
        assert!(err.to_string().contains("'--bogus'"), "{err}");
    }

    #[test]
    fn help_mentions_every_flag() {
        for flag in ["-help", "--help", "-h"] {
            let err = parse(&[flag]).expect_err("help is reported as an error");
            assert_eq!(err.kind(), ErrorKind::DisplayHelp);
        }
        let help = Cli::command().render_long_help().to_string();
        let cmd = Cli::command();
        let mut count = 0;
        for arg in cmd.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            count += 1;
            assert!(
                help.contains(&format!("--{long}")),
                "help lacks --{long}:\n{help}"
            );
        }
        assert_eq!(count, 33, "flag count changed; update the help checks");
        for flag in [
            "kubelet-path",
            "kubelet-csi-plugins-path",
            "kubelet-pod-path",
            "working-dir",
            "windows-service",
            "require-privacy",
            "metrics-bind-address",
            "volume-fs-type",
            "socket-dir",
            "socket-mode",
            "pipe-sddl",
            "api-groups",
            "shutdown-timeout",
            "preface-timeout",
            "idle-timeout",
            "keepalive-time",
            "keepalive-timeout",
            "v",
            "logtostderr",
            "alsologtostderr",
            "log_file",
            "log_dir",
            "log_file_max_size",
        ] {
            assert!(
                help.contains(&format!("--{flag} ")) || help.contains(&format!("--{flag}[")),
                "{flag}"
            );
        }
        assert_eq!(
            help.matches("(accepted for compatibility, ignored)")
                .count(),
            10
        );
        assert!(help.contains("one or two dashes"));
    }

    #[test]
    fn version() {
        for flag in ["-version", "--version", "-V"] {
            let err = parse(&[flag]).expect_err("version is reported as an error");
            assert_eq!(err.kind(), ErrorKind::DisplayVersion);
            assert!(err.to_string().contains(env!("CARGO_PKG_VERSION")));
        }
    }

    #[test]
    fn go_durations() {
        let ok_cases: &[(&str, Duration)] = &[
            ("0", Duration::ZERO),
            ("-0", Duration::ZERO),
            ("0s", Duration::ZERO),
            ("10s", Duration::from_secs(10)),
            ("+10s", Duration::from_secs(10)),
            ("1m30s", Duration::from_secs(90)),
            ("500ms", Duration::from_millis(500)),
            ("1.5h", Duration::from_secs(5400)),
            (".5s", Duration::from_millis(500)),
            ("1.s", Duration::from_secs(1)),
            ("1h2m3s4ms5us6ns", Duration::new(3723, 4_005_006)),
            ("3\u{b5}s", Duration::from_micros(3)),
            ("3\u{3bc}s", Duration::from_micros(3)),
            ("0.000000001s", Duration::from_nanos(1)),
            ("0.0000000019s", Duration::from_nanos(1)),
            (
                "2562047h47m16.854775807s",
                Duration::from_nanos(i64::MAX as u64),
            ),
        ];
        for (input, want) in ok_cases {
            assert_eq!(parse_go_duration(input), Ok(*want), "{input}");
        }
        for bad in [
            "",
            "s",
            "10",
            "1x",
            "-1s",
            ".s",
            "1..5s",
            "1s2",
            "2562047h47m16.854775808s",
            "9999999999999999999h",
            " 1s",
        ] {
            assert!(parse_go_duration(bad).is_err(), "{bad:?} should fail");
        }
        let msg = parse_go_duration("10").unwrap_err();
        assert!(msg.contains("missing unit"), "{msg}");
    }
}
