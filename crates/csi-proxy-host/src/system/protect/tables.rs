//! The built-in protected sets of each OS and the systemd units that end
//! the manager (see the parent module for how they apply).

use super::Guarded;
use crate::path::Flavor;

/// One entry of a built-in table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Builtin {
    /// The service name (a trailing `*` makes it a prefix).
    pub name: &'static str,
    pub guarded: Guarded,
    /// Why it is in the set (shown in the refusal).
    pub why: &'static str,
}

const fn stop(name: &'static str, why: &'static str) -> Builtin {
    Builtin {
        name,
        guarded: Guarded::Stop,
        why,
    }
}

const fn start_stop(name: &'static str, why: &'static str) -> Builtin {
    Builtin {
        name,
        guarded: Guarded::StartAndStop,
        why,
    }
}

/// Windows Server (2022, 2025) nodes.
pub const WINDOWS: &[Builtin] = &[
    stop(
        "kubelet",
        "the kubelet: without it the node leaves the cluster",
    ),
    stop("kube-proxy", "kube-proxy: Service networking of every pod"),
    stop("containerd", "the container runtime of every pod"),
    stop(
        "docker",
        "the container runtime of every pod (dockershim nodes)",
    ),
    stop("hns", "the Host Network Service: every container network"),
    stop(
        "vmcompute",
        "the Host Compute Service: every Windows container",
    ),
    stop("flanneld", "the flannel CNI agent: pod networking"),
    stop("CalicoNode", "Calico's node agent: pod networking"),
    stop(
        "CalicoFelix",
        "Calico's policy agent: pod networking and policy",
    ),
    stop(
        "CalicoConfd",
        "Calico's BGP configuration agent: pod routes",
    ),
    stop(
        "Winmgmt",
        "WMI: csi-proxy's own Disk, Volume, SMB and iSCSI calls need it",
    ),
    stop(
        "RpcSs",
        "the RPC server: COM, WMI and the SCM stop working without it",
    ),
    stop("RpcEptMapper", "the RPC endpoint mapper: every local RPC"),
    stop(
        "DcomLaunch",
        "the DCOM server process launcher: COM and WMI",
    ),
    stop(
        "EventLog",
        "the event log: the node's own record of what happened",
    ),
    stop("LSM", "the Local Session Manager: logons and sessions"),
    stop(
        "SamSs",
        "the Security Accounts Manager: local accounts and logons",
    ),
    stop(
        "Schedule",
        "the Task Scheduler: node maintenance and start-up tasks",
    ),
    start_stop(
        "WinRM",
        "Windows Remote Management: remote administration (kept disabled on some nodes on purpose)",
    ),
    start_stop(
        "TermService",
        "Remote Desktop: remote access (kept disabled on some nodes on purpose)",
    ),
    start_stop(
        "sshd",
        "the OpenSSH server: remote access (kept disabled on some nodes on purpose)",
    ),
    start_stop(
        "RemoteRegistry",
        "remote registry access (disabled by default on purpose)",
    ),
    start_stop(
        "RemoteAccess",
        "Routing and Remote Access: turns the node into a router or VPN server",
    ),
    stop(
        "W32Time",
        "time synchronisation: certificates and leases need the right time",
    ),
    stop(
        "mpssvc",
        "Windows Defender Firewall: stopping it drops the node's firewall",
    ),
    stop("BFE", "the Base Filtering Engine: the firewall and IPsec"),
    stop("Dhcp", "the DHCP client: the node's addresses"),
    stop("Dnscache", "the DNS client: name resolution"),
    stop("nsi", "the Network Store Interface: network configuration"),
    stop(
        "LanmanWorkstation",
        "the SMB client: every SMB global mapping",
    ),
    stop(
        "MSiSCSI",
        "the iSCSI initiator: every iSCSI disk of running pods",
    ),
];

/// Linux nodes (systemd units).
pub const LINUX: &[Builtin] = &[
    stop(
        "kubelet",
        "the kubelet: without it the node leaves the cluster",
    ),
    stop("kube-proxy", "kube-proxy: Service networking of every pod"),
    stop("containerd", "the container runtime of every pod"),
    stop("docker", "the container runtime of every pod"),
    stop(
        "cri-docker",
        "the CRI shim of docker: the container runtime",
    ),
    stop("crio", "the container runtime of every pod (CRI-O)"),
    stop("flanneld", "the flannel CNI agent: pod networking"),
    stop(
        "dbus",
        "the system bus: systemd and csi-proxy's own System calls need it",
    ),
    stop(
        "dbus-broker",
        "the system bus: systemd and csi-proxy's own System calls need it",
    ),
    stop(
        "systemd-*",
        "systemd's own services: journal, udev, logind, networkd, resolved, timesyncd, ...",
    ),
    start_stop(
        "sshd",
        "the OpenSSH server: remote access (kept disabled on some nodes on purpose)",
    ),
    start_stop(
        "ssh",
        "the OpenSSH server: remote access (kept disabled on some nodes on purpose)",
    ),
    stop("NetworkManager", "the node's network configuration"),
    stop("networking", "the node's network interfaces (ifupdown)"),
    stop(
        "firewalld",
        "the node's firewall: stopping it drops its rules",
    ),
    stop(
        "nftables",
        "the node's firewall: stopping it flushes the ruleset",
    ),
    stop("ufw", "the node's firewall: stopping it drops its rules"),
    stop(
        "chrony",
        "time synchronisation: certificates and leases need the right time",
    ),
    stop(
        "chronyd",
        "time synchronisation: certificates and leases need the right time",
    ),
    stop("auditd", "the kernel audit trail of the node"),
    Builtin {
        name: "iscsid",
        guarded: Guarded::StopWhileIscsiSessions,
        why: "the iSCSI daemon: stopping it cuts the logged-in sessions' disks off",
    },
    Builtin {
        name: "open-iscsi",
        guarded: Guarded::StopWhileIscsiSessions,
        why: "the iSCSI login service: stopping it logs every session out",
    },
];

/// systemd units whose start shuts the node or its service manager down,
/// reboots, halts, kexecs, suspends or hibernates it, or isolates it into a
/// rescue mode: StartService refuses them by name before any lookup (the
/// services), and a start that would pull one in is refused (services and
/// targets alike). Not removable by `-unprotect-services`.
pub const ENDS_THE_MANAGER: &[&str] = &[
    "systemd-reboot.service",
    "systemd-poweroff.service",
    "systemd-halt.service",
    "systemd-kexec.service",
    "systemd-exit.service",
    "systemd-soft-reboot.service",
    "systemd-suspend.service",
    "systemd-hibernate.service",
    "systemd-hybrid-sleep.service",
    "systemd-suspend-then-hibernate.service",
    "rescue.service",
    "emergency.service",
    "reboot.target",
    "poweroff.target",
    "halt.target",
    "kexec.target",
    "exit.target",
    "soft-reboot.target",
    "shutdown.target",
    "final.target",
    "ctrl-alt-del.target",
    "sleep.target",
    "suspend.target",
    "hibernate.target",
    "hybrid-sleep.target",
    "suspend-then-hibernate.target",
    "rescue.target",
    "emergency.target",
];

/// Whether starting the systemd unit `unit` (an exact unit name) ends or
/// isolates the manager.
pub fn ends_the_manager(unit: &str) -> bool {
    ENDS_THE_MANAGER.contains(&unit)
}

/// The built-in table of `flavor`.
pub fn builtin(flavor: Flavor) -> &'static [Builtin] {
    match flavor {
        Flavor::Windows => WINDOWS,
        Flavor::Unix => LINUX,
    }
}
