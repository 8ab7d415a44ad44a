//! Tests of the command line: Go flag syntax, defaults, help.

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
    assert!(!cli.smb_allow_no_credentials);
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
    assert_eq!(cli.max_connections_per_endpoint, 1024);
    assert_eq!(cli.pipe_prefix, r"\\.\pipe\csi-proxy-");
    assert_eq!(cli.service_name, "csiproxy");
    assert_eq!(cli.v, 0);
    assert!(cli.logtostderr);
    assert!(!cli.alsologtostderr);
    assert_eq!(cli.log_file, None);
    assert_eq!(cli.log_dir, None);
    assert_eq!(cli.log_file_max_size, 1800);
    assert!(cli.ignored_flags().is_empty());
    assert_eq!(cli.allowed_roots(), vec![DEFAULT_KUBELET_PATH.to_string()]);
    assert_eq!(cli.audit_log, None);
    assert_eq!(cli.audit_level, "write");
    assert_eq!(cli.audit_mode, "best-effort");
    assert_eq!(cli.audit_log_max_size, 100);
    assert_eq!(cli.audit_log_max_backups, 5);
    assert_eq!(cli.caller_policy, None);
    assert_eq!(cli.logging_format, "text");
}

#[test]
fn audit_policy_and_logging_format_flags() {
    let cli = ok(&[
        "-audit-log=/var/log/csi-proxy/audit.log",
        "-audit-level",
        "all",
        "-audit-mode=blocking",
        "-audit-log-max-size=7",
        "-audit-log-max-backups",
        "0",
        "-caller-policy=/etc/csi-proxy/policy.json",
        "-logging-format=json",
    ]);
    assert_eq!(
        cli.audit_log,
        Some(PathBuf::from("/var/log/csi-proxy/audit.log"))
    );
    assert_eq!(cli.audit_level, "all");
    assert_eq!(cli.audit_mode, "blocking");
    assert_eq!(cli.audit_log_max_size, 7);
    assert_eq!(cli.audit_log_max_backups, 0);
    assert_eq!(
        cli.caller_policy,
        Some(PathBuf::from("/etc/csi-proxy/policy.json"))
    );
    assert_eq!(cli.logging_format, "json");
    assert_eq!(ok(&["-audit-log=-"]).audit_log, Some(PathBuf::from("-")));
    assert_eq!(ok(&["-audit-log", "-"]).audit_log, Some(PathBuf::from("-")));
    for bad in [
        "-audit-level=reads",
        "-audit-mode=fail-closed",
        "-logging-format=yaml",
        "-audit-log-max-size=-1",
    ] {
        assert!(parse(&[bad]).is_err(), "{bad}");
    }
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
    assert!(ok(&["-smb-allow-no-credentials"]).smb_allow_no_credentials);
    assert!(!ok(&["-smb-allow-no-credentials=false"]).smb_allow_no_credentials);
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
        "-max-connections-per-endpoint",
        "16",
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
    assert_eq!(cli.max_connections_per_endpoint, 16);
    assert!(parse(&["-max-connections-per-endpoint=0"]).is_err());
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
    assert_eq!(count, 50, "flag count changed; update the help checks");
    for flag in [
        "kubelet-path",
        "kubelet-csi-plugins-path",
        "kubelet-pod-path",
        "working-dir",
        "windows-service",
        "require-privacy",
        "smb-allow-no-credentials",
        "overwrite-unidentified-content",
        "allowed-services",
        "protected-services",
        "unprotect-services",
        "metrics-bind-address",
        "volume-fs-type",
        "state-dir",
        "socket-dir",
        "socket-mode",
        "pipe-sddl",
        "api-groups",
        "shutdown-timeout",
        "preface-timeout",
        "idle-timeout",
        "keepalive-time",
        "keepalive-timeout",
        "max-connections-per-endpoint",
        "pipe-prefix",
        "service-name",
        "v",
        "logtostderr",
        "alsologtostderr",
        "log_file",
        "log_dir",
        "log_file_max_size",
        "audit-log",
        "audit-level",
        "audit-mode",
        "audit-log-max-size",
        "audit-log-max-backups",
        "caller-policy",
        "kubepods-cgroup",
        "logging-format",
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
        let text = err.to_string();
        assert!(text.contains(env!("CARGO_PKG_VERSION")), "{text}");
        assert!(text.contains(crate::version::COMMIT), "{text}");
        assert!(
            text.contains(&format!("tree {}", crate::version::TREE)),
            "{text}"
        );
        assert!(text.contains(crate::version::TARGET), "{text}");
    }
}
