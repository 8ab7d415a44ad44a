//! The audit log (`-audit-log`, `-audit-level`, `-audit-mode`,
//! `-audit-log-max-size`, `-audit-log-max-backups`) and the caller policy
//! (`-caller-policy`) from the command line.

use crate::cli::Cli;
use anyhow::{Context, Result};
use csi_proxy_server::audit::{self, AuditLog, Level, Mode, Sink};
use csi_proxy_server::guard::Guard;
use csi_proxy_server::metrics::Metrics;
use csi_proxy_server::policy::PolicyFile;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long shutdown waits for the audit log to be written and synced.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// The audit log and policy of the process (either may be off).
#[derive(Default)]
pub struct Guarding {
    audit: Option<Arc<AuditLog>>,
    policy: Option<Arc<PolicyFile>>,
}

impl Guarding {
    /// Open the audit log and read the policy. A policy file that cannot be
    /// read or parsed is a start-up error.
    pub fn from_cli(cli: &Cli, metrics: Option<&Metrics>) -> Result<Guarding> {
        let level = match cli.audit_level.as_str() {
            "none" => Level::None,
            "all" => Level::All,
            _ => Level::Write,
        };
        let mode = match cli.audit_mode.as_str() {
            "blocking" => Mode::Blocking,
            _ => Mode::BestEffort,
        };
        let audit = match &cli.audit_log {
            Some(path) if !path.as_os_str().is_empty() && level != Level::None => {
                let sink = if path.as_os_str() == "-" {
                    Sink::Stderr
                } else {
                    Sink::File {
                        path: path.clone(),
                        max_bytes: cli.audit_log_max_size.saturating_mul(1024 * 1024),
                        max_backups: cli.audit_log_max_backups,
                    }
                };
                let config = audit::Config { sink, level, mode };
                let log = AuditLog::open(&config, metrics).context("invalid -audit-log")?;
                tracing::info!(
                    path = %path.display(),
                    level = cli.audit_level,
                    mode = cli.audit_mode,
                    max_size_mb = cli.audit_log_max_size,
                    max_backups = cli.audit_log_max_backups,
                    "audit log on"
                );
                Some(log)
            }
            _ => None,
        };
        csi_proxy_server::caller::cgroup::set_kubepods_roots(&cli.kubepods_cgroup)
            .map_err(|e| anyhow::anyhow!("invalid -kubepods-cgroup: {e}"))?;
        let policy = match &cli.caller_policy {
            Some(path) => {
                let file = PolicyFile::load(path)?;
                tracing::info!(path = %path.display(), entries = file.current().len(), "caller policy in force");
                Some(file)
            }
            None => None,
        };
        Ok(Guarding { audit, policy })
    }

    /// The guard for the server config; `None` when both are off.
    pub fn guard(&self) -> Option<Arc<Guard>> {
        (self.audit.is_some() || self.policy.is_some()).then(|| {
            Arc::new(Guard {
                audit: self.audit.clone(),
                policy: self.policy.clone(),
            })
        })
    }

    /// Start reloading the policy on SIGHUP and file changes (inside the
    /// runtime, before the proxy says it is ready).
    pub fn watch_policy(&self, token: &CancellationToken) -> Result<()> {
        if let Some(p) = &self.policy {
            let watch = csi_proxy_server::policy::watch(p.clone(), token.clone())
                .context("cannot watch the caller policy (SIGHUP)")?;
            tokio::spawn(watch);
        }
        Ok(())
    }

    /// Write and sync what the audit log still holds (at shutdown).
    pub fn close(&self) {
        if let Some(a) = &self.audit {
            a.close(CLOSE_WAIT);
            let dropped = a.dropped();
            if dropped > 0 {
                tracing::warn!(dropped, "audit lines were dropped during this run");
            }
        }
    }
}
