//! The validating iSCSI API: portals, target names and CHAP fields are
//! checked before the backend sees them; secrets are moved, never copied,
//! and wiped when dropped.

use super::validate::{Auth, Iqn, Portal, Secret};
use super::*;
use crate::path::Flavor;
use crate::Result;
use zeroize::Zeroizing;

/// What a host must provide for the iSCSI API; every value is checked.
pub trait IscsiBackend: Send + Sync {
    /// Add a portal to the initiator's list; present already is success.
    fn add_portal(&self, portal: &Portal) -> Result<()>;
    /// The target names the portal offers.
    fn discover(&self, portal: &Portal) -> Result<Vec<String>>;
    /// Remove a portal from the initiator's list.
    fn remove_portal(&self, portal: &Portal) -> Result<()>;
    /// The initiator's portals.
    fn list_portals(&self) -> Result<Vec<TargetPortal>>;
    /// Log in; connected already is success.
    fn connect(&self, portal: &Portal, iqn: &Iqn, auth: &Auth) -> Result<()>;
    /// Log out and forget the persistent login; not connected is success.
    fn disconnect(&self, portal: &Portal, iqn: &Iqn) -> Result<()>;
    /// The numbers of the disks the target's sessions expose.
    fn target_disks(&self, portal: &Portal, iqn: &Iqn) -> Result<Vec<u32>>;
    /// Set (or with `None`, clear) the initiator's mutual CHAP secret.
    fn set_mutual_chap_secret(&self, secret: Option<&Secret>) -> Result<()>;
}

/// The iSCSI API over a backend.
pub struct Iscsi<B> {
    backend: B,
    flavor: Flavor,
}

impl<B: IscsiBackend> Iscsi<B> {
    pub fn new(backend: B, flavor: Flavor) -> Self {
        Iscsi { backend, flavor }
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }
}

impl<B: IscsiBackend> IscsiApi for Iscsi<B> {
    fn add_target_portal(&self, req: AddTargetPortalRequest) -> Result<AddTargetPortalResponse> {
        self.backend
            .add_portal(&Portal::parse(&req.target_portal)?)?;
        Ok(AddTargetPortalResponse {})
    }

    fn discover_target_portal(
        &self,
        req: DiscoverTargetPortalRequest,
    ) -> Result<DiscoverTargetPortalResponse> {
        let iqns = self.backend.discover(&Portal::parse(&req.target_portal)?)?;
        Ok(DiscoverTargetPortalResponse { iqns })
    }

    fn remove_target_portal(
        &self,
        req: RemoveTargetPortalRequest,
    ) -> Result<RemoveTargetPortalResponse> {
        self.backend
            .remove_portal(&Portal::parse(&req.target_portal)?)?;
        Ok(RemoveTargetPortalResponse {})
    }

    fn list_target_portals(
        &self,
        _: ListTargetPortalsRequest,
    ) -> Result<ListTargetPortalsResponse> {
        Ok(ListTargetPortalsResponse {
            target_portals: self.backend.list_portals()?,
        })
    }

    fn connect_target(&self, req: ConnectTargetRequest) -> Result<ConnectTargetResponse> {
        let ConnectTargetRequest {
            target_portal,
            iqn,
            auth_type,
            chap_username,
            chap_secret,
        } = req;
        let secret = Zeroizing::new(chap_secret);
        let portal = Portal::parse(&target_portal)?;
        let iqn = Iqn::parse(&iqn)?;
        let auth = Auth::parse(auth_type, &chap_username, secret, self.flavor)?;
        self.backend.connect(&portal, &iqn, &auth)?;
        Ok(ConnectTargetResponse {})
    }

    fn disconnect_target(&self, req: DisconnectTargetRequest) -> Result<DisconnectTargetResponse> {
        let portal = Portal::parse(&req.target_portal)?;
        self.backend.disconnect(&portal, &Iqn::parse(&req.iqn)?)?;
        Ok(DisconnectTargetResponse {})
    }

    fn get_target_disks(&self, req: GetTargetDisksRequest) -> Result<GetTargetDisksResponse> {
        let portal = Portal::parse(&req.target_portal)?;
        let disks = self.backend.target_disks(&portal, &Iqn::parse(&req.iqn)?)?;
        Ok(GetTargetDisksResponse {
            disk_ids: disks.iter().map(u32::to_string).collect(),
        })
    }

    fn set_mutual_chap_secret(
        &self,
        req: SetMutualChapSecretRequest,
    ) -> Result<SetMutualChapSecretResponse> {
        let s = Zeroizing::new(req.mutual_chap_secret);
        let secret = if s.is_empty() {
            None
        } else {
            Some(Secret::parse(s, self.flavor, "mutual_chap_secret")?)
        };
        self.backend.set_mutual_chap_secret(secret.as_ref())?;
        Ok(SetMutualChapSecretResponse {})
    }
}
