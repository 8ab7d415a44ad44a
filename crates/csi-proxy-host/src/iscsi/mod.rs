//! iSCSI API group: version-free types and the API trait.
//!
//! The types mirror the newest version (`v1alpha2`). CHAP secrets are
//! secrets: the `Debug` output of the requests that carry them redacts them,
//! nothing logs them, and they are wiped once used.
//!
//! Layout: the types and [`IscsiApi`] here; [`Iscsi`] (`api.rs`) checks
//! every value ([`validate`]: portals, RFC 3720 names, CHAP rules) and
//! drives an [`IscsiBackend`]: `windows.rs` (the `MSFT_iSCSI*` classes and
//! their associations over the group's own WMI worker, walks in [`cim`]),
//! `linux.rs` (open-iscsi's `iscsiadm` with a fixed argv, sysfs), and the
//! recording [`fake`].

use crate::Result;
use std::fmt;

mod api;
pub mod cim;
pub mod fake;
#[cfg(target_os = "linux")]
pub mod linux;
pub mod validate;
#[cfg(windows)]
pub mod windows;

pub use api::{Iscsi, IscsiBackend};

/// An iSCSI target portal.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct TargetPortal {
    /// IPv4 or IPv6 address or DNS host name.
    pub target_address: String,
    /// TCP port; 0 means the default 3260.
    pub target_port: u32,
}

/// How the initiator authenticates to a target.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AuthenticationType {
    /// No authentication.
    #[default]
    None,
    /// The target authenticates the initiator (CHAP).
    OneWayChap,
    /// Both sides authenticate each other (mutual CHAP).
    MutualChap,
}

impl AuthenticationType {
    /// The proto enum value (`NONE` = 0, `ONE_WAY_CHAP` = 1, `MUTUAL_CHAP` = 2).
    pub fn to_i32(self) -> i32 {
        match self {
            AuthenticationType::None => 0,
            AuthenticationType::OneWayChap => 1,
            AuthenticationType::MutualChap => 2,
        }
    }

    /// Inverse of [`AuthenticationType::to_i32`]; `None` for unknown values.
    pub fn from_i32(v: i32) -> Option<Self> {
        match v {
            0 => Some(AuthenticationType::None),
            1 => Some(AuthenticationType::OneWayChap),
            2 => Some(AuthenticationType::MutualChap),
            _ => None,
        }
    }
}

/// Add a target portal to the initiator's list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AddTargetPortalRequest {
    pub target_portal: TargetPortal,
}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AddTargetPortalResponse {}

/// The targets (IQNs) a portal offers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DiscoverTargetPortalRequest {
    pub target_portal: TargetPortal,
}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DiscoverTargetPortalResponse {
    pub iqns: Vec<String>,
}

/// Remove a target portal from the initiator's list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RemoveTargetPortalRequest {
    pub target_portal: TargetPortal,
}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RemoveTargetPortalResponse {}

/// The initiator's target portals.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListTargetPortalsRequest {}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListTargetPortalsResponse {
    pub target_portals: Vec<TargetPortal>,
}

/// Log in to the target `iqn` through `target_portal`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ConnectTargetRequest {
    pub target_portal: TargetPortal,
    pub iqn: String,
    pub auth_type: AuthenticationType,
    pub chap_username: String,
    /// Secret: never logged, redacted by `Debug`.
    pub chap_secret: String,
}

impl fmt::Debug for ConnectTargetRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectTargetRequest")
            .field("target_portal", &self.target_portal)
            .field("iqn", &self.iqn)
            .field("auth_type", &self.auth_type)
            .field("chap_username", &self.chap_username)
            .field("chap_secret", &format_args!("<redacted>"))
            .finish()
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConnectTargetResponse {}

/// Log out of the target `iqn` on `target_portal`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DisconnectTargetRequest {
    pub target_portal: TargetPortal,
    pub iqn: String,
}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DisconnectTargetResponse {}

/// The disks a connected target exposes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetTargetDisksRequest {
    pub target_portal: TargetPortal,
    pub iqn: String,
}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetTargetDisksResponse {
    /// Disk numbers as decimal strings (as upstream answers).
    pub disk_ids: Vec<String>,
}

/// Set the initiator's mutual CHAP secret (`v1alpha2` only).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SetMutualChapSecretRequest {
    /// Secret: never logged, redacted by `Debug`.
    pub mutual_chap_secret: String,
}

impl fmt::Debug for SetMutualChapSecretRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SetMutualChapSecretRequest")
            .field("mutual_chap_secret", &format_args!("<redacted>"))
            .finish()
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SetMutualChapSecretResponse {}

/// The version-free iSCSI API. Every versioned gRPC service of the group is
/// adapted onto this trait.
pub trait IscsiApi: Send + Sync {
    fn add_target_portal(&self, req: AddTargetPortalRequest) -> Result<AddTargetPortalResponse>;
    fn discover_target_portal(
        &self,
        req: DiscoverTargetPortalRequest,
    ) -> Result<DiscoverTargetPortalResponse>;
    fn remove_target_portal(
        &self,
        req: RemoveTargetPortalRequest,
    ) -> Result<RemoveTargetPortalResponse>;
    fn list_target_portals(
        &self,
        req: ListTargetPortalsRequest,
    ) -> Result<ListTargetPortalsResponse>;
    fn connect_target(&self, req: ConnectTargetRequest) -> Result<ConnectTargetResponse>;
    fn disconnect_target(&self, req: DisconnectTargetRequest) -> Result<DisconnectTargetResponse>;
    fn get_target_disks(&self, req: GetTargetDisksRequest) -> Result<GetTargetDisksResponse>;
    fn set_mutual_chap_secret(
        &self,
        req: SetMutualChapSecretRequest,
    ) -> Result<SetMutualChapSecretResponse>;
}

crate::error::no_backend! {
    /// An iSCSI API without a host backend (other OSes): every operation fails
    /// with [`crate::Error::Unimplemented`] naming the group and the method.
    NoIscsiBackend: IscsiApi, "iscsi", {
        add_target_portal(AddTargetPortalRequest) -> AddTargetPortalResponse = "AddTargetPortal",
        discover_target_portal(DiscoverTargetPortalRequest) -> DiscoverTargetPortalResponse = "DiscoverTargetPortal",
        remove_target_portal(RemoveTargetPortalRequest) -> RemoveTargetPortalResponse = "RemoveTargetPortal",
        list_target_portals(ListTargetPortalsRequest) -> ListTargetPortalsResponse = "ListTargetPortals",
        connect_target(ConnectTargetRequest) -> ConnectTargetResponse = "ConnectTarget",
        disconnect_target(DisconnectTargetRequest) -> DisconnectTargetResponse = "DisconnectTarget",
        get_target_disks(GetTargetDisksRequest) -> GetTargetDisksResponse = "GetTargetDisks",
        set_mutual_chap_secret(SetMutualChapSecretRequest) -> SetMutualChapSecretResponse = "SetMutualChapSecret",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_redacts_chap_secrets() {
        let connect = ConnectTargetRequest {
            target_portal: TargetPortal {
                target_address: "10.0.0.1".into(),
                target_port: 3260,
            },
            iqn: "iqn.2000-01.com.example:t1".into(),
            auth_type: AuthenticationType::MutualChap,
            chap_username: "chapuser".into(),
            chap_secret: "s3cret-chap-123".into(),
        };
        let mutual = SetMutualChapSecretRequest {
            mutual_chap_secret: "mutual-s3cret-456".into(),
        };
        for s in [
            format!("{connect:?}"),
            format!("{connect:#?}"),
            format!("{mutual:?}"),
            format!("{mutual:#?}"),
        ] {
            assert!(!s.contains("s3cret"), "{s}");
            assert!(s.contains("<redacted>"), "{s}");
        }
        assert!(format!("{connect:?}").contains("chapuser"));
    }

    #[test]
    fn auth_type_numbering() {
        for (v, t) in [
            (0, AuthenticationType::None),
            (1, AuthenticationType::OneWayChap),
            (2, AuthenticationType::MutualChap),
        ] {
            assert_eq!(t.to_i32(), v);
            assert_eq!(AuthenticationType::from_i32(v), Some(t));
        }
        for bad in [-1, 3, i32::MAX, i32::MIN] {
            assert_eq!(AuthenticationType::from_i32(bad), None);
        }
    }
}
