//! A recording in-memory iSCSI backend: portals, the targets each offers,
//! sessions and their disks, and the calls that reached it (secrets are
//! recorded by their SHA-256 only, never by value).

use super::api::IscsiBackend;
use super::validate::{Auth, Iqn, Portal, Secret};
use super::TargetPortal;
use crate::{Error, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    AddPortal(String),
    Discover(String),
    RemovePortal(String),
    List,
    /// Portal, target, the WMI authentication type and, for CHAP, what
    /// came with it.
    Connect(String, String, &'static str, Option<Chap>),
    Disconnect(String, String),
    Disks(String, String),
    /// The SHA-256 of the mutual CHAP secret; `None`: cleared.
    SetMutual(Option<Vec<u8>>),
}

/// The CHAP fields of a ConnectTarget as they reached the backend: the
/// user, and the secret by its SHA-256 only.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chap {
    pub user: String,
    pub secret_sha256: Vec<u8>,
}

/// The SHA-256 of a secret: what the fake keeps of it.
fn digest(s: &Secret) -> Vec<u8> {
    use sha2::Digest;
    sha2::Sha256::digest(s.expose().as_bytes()).to_vec()
}

#[derive(Debug, Default)]
pub struct RecordingIscsi {
    pub portals: Mutex<BTreeSet<Portal>>,
    /// Targets offered per portal.
    pub offered: Mutex<BTreeMap<Portal, Vec<String>>>,
    /// Connected (portal, iqn) → disk numbers.
    pub sessions: Mutex<BTreeMap<(Portal, Iqn), Vec<u32>>>,
    pub calls: Mutex<Vec<Call>>,
}

impl RecordingIscsi {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    fn record(&self, c: Call) {
        self.calls.lock().unwrap().push(c);
    }

    fn known(&self, p: &Portal) -> Result<()> {
        if self.portals.lock().unwrap().contains(p) {
            Ok(())
        } else {
            Err(Error::NotFound(format!(
                "target portal {p} is not in the initiator's list"
            )))
        }
    }
}

impl IscsiBackend for RecordingIscsi {
    fn add_portal(&self, p: &Portal) -> Result<()> {
        self.record(Call::AddPortal(p.to_string()));
        self.portals.lock().unwrap().insert(p.clone());
        Ok(())
    }
    fn discover(&self, p: &Portal) -> Result<Vec<String>> {
        self.record(Call::Discover(p.to_string()));
        self.known(p)?;
        Ok(self
            .offered
            .lock()
            .unwrap()
            .get(p)
            .cloned()
            .unwrap_or_default())
    }
    fn remove_portal(&self, p: &Portal) -> Result<()> {
        self.record(Call::RemovePortal(p.to_string()));
        self.known(p)?;
        self.portals.lock().unwrap().remove(p);
        Ok(())
    }
    fn list_portals(&self) -> Result<Vec<TargetPortal>> {
        self.record(Call::List);
        Ok(self
            .portals
            .lock()
            .unwrap()
            .iter()
            .map(Portal::to_wire)
            .collect())
    }
    fn connect(&self, p: &Portal, iqn: &Iqn, auth: &Auth) -> Result<()> {
        let chap = match auth {
            Auth::None => None,
            Auth::OneWay { user, secret } | Auth::Mutual { user, secret } => Some(Chap {
                user: user.clone(),
                secret_sha256: digest(secret),
            }),
        };
        self.record(Call::Connect(
            p.to_string(),
            iqn.to_string(),
            auth.wmi_name(),
            chap,
        ));
        self.known(p)?;
        self.sessions
            .lock()
            .unwrap()
            .entry((p.clone(), iqn.clone()))
            .or_default();
        Ok(())
    }
    fn disconnect(&self, p: &Portal, iqn: &Iqn) -> Result<()> {
        self.record(Call::Disconnect(p.to_string(), iqn.to_string()));
        self.sessions
            .lock()
            .unwrap()
            .remove(&(p.clone(), iqn.clone()));
        Ok(())
    }
    fn target_disks(&self, p: &Portal, iqn: &Iqn) -> Result<Vec<u32>> {
        self.record(Call::Disks(p.to_string(), iqn.to_string()));
        Ok(self
            .sessions
            .lock()
            .unwrap()
            .get(&(p.clone(), iqn.clone()))
            .cloned()
            .unwrap_or_default())
    }
    fn set_mutual_chap_secret(&self, s: Option<&Secret>) -> Result<()> {
        self.record(Call::SetMutual(s.map(digest)));
        Ok(())
    }
}

impl IscsiBackend for std::sync::Arc<RecordingIscsi> {
    fn add_portal(&self, p: &Portal) -> Result<()> {
        (**self).add_portal(p)
    }
    fn discover(&self, p: &Portal) -> Result<Vec<String>> {
        (**self).discover(p)
    }
    fn remove_portal(&self, p: &Portal) -> Result<()> {
        (**self).remove_portal(p)
    }
    fn list_portals(&self) -> Result<Vec<TargetPortal>> {
        (**self).list_portals()
    }
    fn connect(&self, p: &Portal, i: &Iqn, a: &Auth) -> Result<()> {
        (**self).connect(p, i, a)
    }
    fn disconnect(&self, p: &Portal, i: &Iqn) -> Result<()> {
        (**self).disconnect(p, i)
    }
    fn target_disks(&self, p: &Portal, i: &Iqn) -> Result<Vec<u32>> {
        (**self).target_disks(p, i)
    }
    fn set_mutual_chap_secret(&self, s: Option<&Secret>) -> Result<()> {
        (**self).set_mutual_chap_secret(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iscsi::*;
    use crate::path::Flavor;
    use std::sync::Arc;

    fn tp(a: &str, p: u32) -> TargetPortal {
        TargetPortal {
            target_address: a.into(),
            target_port: p,
        }
    }

    #[test]
    fn refused_requests_never_reach_the_backend() {
        let fake = Arc::new(RecordingIscsi::new());
        let api = Iscsi::new(fake.clone(), Flavor::Windows);
        for &a in validate::tests_hostile_addresses() {
            assert!(api
                .add_target_portal(AddTargetPortalRequest {
                    target_portal: tp(a, 3260)
                })
                .is_err());
        }
        for &n in validate::tests_hostile_iqns() {
            for r in [
                api.connect_target(ConnectTargetRequest {
                    target_portal: tp("10.0.0.1", 0),
                    iqn: n.into(),
                    auth_type: AuthenticationType::OneWayChap,
                    chap_username: "u".into(),
                    chap_secret: "secret-1234567".into(),
                })
                .map(|_| ()),
                api.disconnect_target(DisconnectTargetRequest {
                    target_portal: tp("10.0.0.1", 0),
                    iqn: n.into(),
                })
                .map(|_| ()),
                api.get_target_disks(GetTargetDisksRequest {
                    target_portal: tp("10.0.0.1", 0),
                    iqn: n.into(),
                })
                .map(|_| ()),
            ] {
                let e = r.unwrap_err();
                assert!(matches!(e, Error::InvalidArgument(_)), "{n:?}: {e}");
                assert!(!e.to_string().contains("secret-1234567"));
            }
        }
        let e = api
            .add_target_portal(AddTargetPortalRequest {
                target_portal: tp("10.0.0.1", 65536),
            })
            .unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)));
        let e = api
            .set_mutual_chap_secret(SetMutualChapSecretRequest {
                mutual_chap_secret: "short".into(),
            })
            .unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)));
        assert!(fake.calls().is_empty(), "{:?}", fake.calls());
    }

    #[test]
    fn flow_over_the_fake() {
        let fake = Arc::new(RecordingIscsi::new());
        let api = Iscsi::new(fake.clone(), Flavor::Unix);
        api.add_target_portal(AddTargetPortalRequest {
            target_portal: tp("10.0.0.1", 0),
        })
        .unwrap();
        assert_eq!(
            api.list_target_portals(ListTargetPortalsRequest {})
                .unwrap()
                .target_portals,
            vec![tp("10.0.0.1", 3260)]
        );
        api.connect_target(ConnectTargetRequest {
            target_portal: tp("10.0.0.1", 3260),
            iqn: "IQN.2026-01.io.example:T1".into(),
            auth_type: AuthenticationType::None,
            ..Default::default()
        })
        .unwrap();
        assert!(fake.calls().contains(&Call::Connect(
            "10.0.0.1:3260".into(),
            "iqn.2026-01.io.example:t1".into(),
            "NONE",
            None
        )));
        fake.sessions
            .lock()
            .unwrap()
            .values_mut()
            .for_each(|d| *d = vec![4, 2]);
        assert_eq!(
            api.get_target_disks(GetTargetDisksRequest {
                target_portal: tp("10.0.0.1", 3260),
                iqn: "iqn.2026-01.io.example:t1".into(),
            })
            .unwrap()
            .disk_ids,
            vec!["4".to_string(), "2".to_string()]
        );
        api.set_mutual_chap_secret(SetMutualChapSecretRequest::default())
            .unwrap();
        assert_eq!(fake.calls().last(), Some(&Call::SetMutual(None)));
    }
}
