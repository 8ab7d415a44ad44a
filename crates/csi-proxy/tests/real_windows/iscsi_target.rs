//! A target of the Windows iSCSI Target Server on this machine, made
//! through its WMI provider (`root\wmi`: `WT_Host`, `WT_Disk`,
//! `WT_IDMethod`) for the iSCSI tests: a dynamic VHDX virtual disk in a
//! temp dir, assigned to a new target that admits initiators connecting
//! from 127.0.0.1, with one-way CHAP if asked. Removed (target, disk, file)
//! on drop.

use csi_proxy_host::storage::parse::cim::wql_string_literal;
use csi_proxy_host::win::wmi::{Value, WmiWorker};
use std::path::PathBuf;

/// The provider's namespace.
pub const NAMESPACE: &str = r"root\wmi";
/// The size of the target's disk.
pub const DISK_BYTES: u64 = 64 << 20;

/// `Ok` when the iSCSI Target Server's WMI provider answers on this
/// machine; else why not (the feature `FS-iSCSITarget-Server` is not
/// installed, or its service is not running).
pub fn available(wmi: &WmiWorker) -> Result<(), String> {
    // The class definitions: a query of an unknown class may answer no
    // rows instead of an error (wine's does).
    wmi.call(|w| {
        for class in ["WT_Host", "WT_Disk", "WT_IDMethod"] {
            w.get_object_in(NAMESPACE, class)?;
        }
        Ok(())
    })
    .map_err(|e| {
        format!(
            "the iSCSI Target Server's WMI classes (WT_Host in {NAMESPACE}) are missing: {e}; \
             install them with Install-WindowsFeature FS-iSCSITarget-Server"
        )
    })
}

/// The `__PATH` and `props` (as text) of the first row of `class` whose
/// `key` is `value`.
fn one_row(
    wmi: &WmiWorker,
    class: &'static str,
    key: &'static str,
    value: &str,
    props: &'static [&'static str],
) -> Result<Vec<String>, String> {
    let wql = format!(
        "SELECT * FROM {class} WHERE {key} = {}",
        wql_string_literal(value).map_err(|e| e.to_string())?
    );
    wmi.call(move |w| {
        let rows = w.query_in(NAMESPACE, &wql)?;
        let row = rows
            .first()
            .ok_or_else(|| csi_proxy_host::Error::NotFound(format!("no row for {wql}")))?;
        let mut out = vec![row.path()?];
        for p in props {
            let text = match row.string(p) {
                Ok(s) => s,
                Err(_) => row.u32(p)?.map(|n| n.to_string()),
            };
            out.push(text.unwrap_or_default());
        }
        Ok(out)
    })
    .map_err(|e| e.to_string())
}

pub struct Target {
    wmi: WmiWorker,
    /// The target's name in the Target Server (`WT_Host.HostName`).
    pub host: String,
    /// The IQN initiators log in to.
    pub iqn: String,
    host_path: String,
    disk_path: Option<String>,
    vhdx: PathBuf,
}

impl Target {
    /// Target `csiproxy<tag><pid>` with one 64 MiB disk; `chap` = one-way
    /// CHAP user and secret (12 to 16 characters).
    pub fn create(tag: &str, chap: Option<(&str, &str)>) -> Result<Target, String> {
        let wmi = WmiWorker::new(NAMESPACE);
        available(&wmi)?;
        let pid = std::process::id();
        let host = format!("csiproxy{tag}{pid}");
        let vhdx = std::env::temp_dir().join(format!("csi-proxy-iscsi-{tag}-{pid}.vhdx"));
        let name = host.clone();
        wmi.call(move |w| {
            w.exec_method_in(
                NAMESPACE,
                "WT_Host",
                "WT_Host",
                "NewHost",
                // No cluster: an empty resource group.
                &[
                    ("HostName", Value::Str(name)),
                    ("ResourceGroup", Value::Str(String::new())),
                ],
            )
            .map(|_| ())
        })
        .map_err(|e| format!("WT_Host.NewHost: {e}"))?;
        let row = one_row(&wmi, "WT_Host", "HostName", &host, &["TargetIQN"])?;
        let mut t = Target {
            wmi,
            host,
            iqn: row[1].clone(),
            host_path: row[0].clone(),
            disk_path: None,
            vhdx,
        };
        // Initiators connecting from the loopback address may log in.
        let name = t.host.clone();
        t.wmi
            .call(move |w| {
                w.put_instance_in(
                    NAMESPACE,
                    "WT_IDMethod",
                    &[
                        ("HostName", Value::Str(name)),
                        // 2 = IPAddress
                        ("Method", Value::U32(2)),
                        ("Value", Value::Str("127.0.0.1".into())),
                    ],
                )
            })
            .map_err(|e| format!("WT_IDMethod: {e}"))?;
        let device = t.vhdx.display().to_string();
        let d = device.clone();
        t.wmi
            .call(move |w| {
                w.exec_method_in(
                    NAMESPACE,
                    "WT_Disk",
                    "WT_Disk",
                    "CreateVhdWTDisk",
                    &[
                        ("DevicePath", Value::Str(d)),
                        // 3 = dynamic
                        ("VhdType", Value::U32(3)),
                        ("MaxInternalSize", Value::U64(DISK_BYTES)),
                        ("BlockSize", Value::U32(0)),
                        ("LogicalSectorSize", Value::U32(512)),
                        ("PhysicalSectorSize", Value::U32(4096)),
                        (
                            "Description",
                            Value::Str("csi-proxy real-Windows test".into()),
                        ),
                        ("ClearData", Value::Bool(false)),
                    ],
                )
                .map(|_| ())
            })
            .map_err(|e| format!("WT_Disk.CreateVhdWTDisk: {e}"))?;
        let disk = one_row(&t.wmi, "WT_Disk", "DevicePath", &device, &["WTD"])?;
        t.disk_path = Some(disk[0].clone());
        let wtd: u32 = disk[1]
            .parse()
            .map_err(|e| format!("WT_Disk.WTD {:?}: {e}", disk[1]))?;
        let host_path = t.host_path.clone();
        t.wmi
            .call(move |w| {
                w.exec_method_in(
                    NAMESPACE,
                    &host_path,
                    "WT_Host",
                    "AddWTDisk",
                    &[("WTD", Value::U32(wtd))],
                )
                .map(|_| ())
            })
            .map_err(|e| format!("WT_Host.AddWTDisk: {e}"))?;
        if let Some((user, secret)) = chap {
            t.set_chap(user, secret)?;
        }
        Ok(t)
    }

    /// One-way CHAP on the target: `EnableCHAP`, `CHAPUserName`,
    /// `CHAPSecret` written back to its `WT_Host`.
    pub fn set_chap(&self, user: &str, secret: &str) -> Result<(), String> {
        let wql = format!(
            "SELECT * FROM WT_Host WHERE HostName = {}",
            wql_string_literal(&self.host).map_err(|e| e.to_string())?
        );
        let (user, secret) = (user.to_string(), secret.to_string());
        self.wmi
            .call(move |w| {
                let rows = w.query_in(NAMESPACE, &wql)?;
                let row = rows
                    .first()
                    .ok_or_else(|| csi_proxy_host::Error::NotFound(wql.clone()))?;
                row.put("EnableCHAP", &Value::Bool(true))?;
                row.put("CHAPUserName", &Value::Str(user))?;
                row.put("CHAPSecret", &Value::Str(secret))?;
                w.write_instance_in(NAMESPACE, row, "WT_Host")
            })
            .map_err(|e| format!("WT_Host CHAP: {e}"))
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let paths: Vec<String> = [Some(self.host_path.clone()), self.disk_path.clone()]
            .into_iter()
            .flatten()
            .collect();
        let _ = self.wmi.call(move |w| {
            for p in &paths {
                if let Err(e) = w.delete_instance_in(NAMESPACE, p) {
                    eprintln!("iSCSI target clean-up: {e}");
                }
            }
            Ok(())
        });
        let _ = std::fs::remove_file(&self.vhdx);
    }
}

/// Starts the Microsoft iSCSI Initiator service (`MSiSCSI`, manual start
/// and stopped on a fresh Windows Server) and waits until it runs.
pub fn start_initiator() -> Result<(), String> {
    set_service_running("MSiSCSI", true)
}

/// The iSCSI Target Server's service: while it is stopped, every target of
/// this host stops answering its initiators (sessions drop, their I/O is
/// held by the initiator until it reconnects or gives up).
pub const TARGET_SERVICE: &str = "WinTarget";

/// Starts (`true`) or stops (`false`) the service `name` and waits up to
/// 60 s until it is in that state.
pub fn set_service_running(name: &str, running: bool) -> Result<(), String> {
    use windows_service::service::{ServiceAccess, ServiceState};
    use windows_service::service_manager::{ServiceManager, ServiceManagerAccess};
    let m = ServiceManager::local_computer(None::<&str>, ServiceManagerAccess::CONNECT)
        .map_err(|e| format!("SCM: {e}"))?;
    let s = m
        .open_service(
            name,
            ServiceAccess::START | ServiceAccess::STOP | ServiceAccess::QUERY_STATUS,
        )
        .map_err(|e| format!("open {name}: {e}"))?;
    let want = if running {
        ServiceState::Running
    } else {
        ServiceState::Stopped
    };
    let state = || s.query_status().map(|st| st.current_state);
    if state().map_err(|e| e.to_string())? != want {
        // Already starting or stopping: the wait below covers it.
        let _ = if running {
            s.start::<&str>(&[])
        } else {
            s.stop().map(drop)
        };
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while state().map_err(|e| e.to_string())? != want {
        if std::time::Instant::now() > deadline {
            return Err(format!("{name} did not reach {want:?} within 60 s"));
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    Ok(())
}
