//! The iSCSI API's versions (v1alpha1, v1alpha2) behind [`Iscsi`]; the
//! hostile inputs both tiers send, and the check that every call refuses
//! them.

use csi_proxy_api::iscsi::{v1alpha1, v1alpha2};
use csi_proxy_client::ProxyChannel;
use tonic::{Code, Status};

/// A target portal, whatever the version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Portal {
    pub address: String,
    pub port: u32,
}

impl Portal {
    pub fn new(address: &str, port: u32) -> Portal {
        Portal {
            address: address.into(),
            port,
        }
    }
}

/// A ConnectTarget request, whatever the version.
#[derive(Clone, Debug)]
pub struct Login {
    pub portal: Portal,
    pub iqn: String,
    /// The proto enum value (0 NONE, 1 ONE_WAY_CHAP, 2 MUTUAL_CHAP), kept
    /// raw so that out-of-range values can be sent.
    pub auth: i32,
    pub user: String,
    pub secret: String,
}

impl Login {
    pub fn new(portal: &Portal, iqn: &str, auth: i32, user: &str, secret: &str) -> Login {
        Login {
            portal: portal.clone(),
            iqn: iqn.into(),
            auth,
            user: user.into(),
            secret: secret.into(),
        }
    }
}

/// One version's client, every RPC of the group.
pub trait Iscsi: Sized {
    /// `"v1alpha1"`, `"v1alpha2"`.
    const VERSION: &'static str;
    /// The other version (both serve the same initiator).
    type Other: Iscsi;
    fn new(channel: ProxyChannel) -> Self;
    async fn add_target_portal(&mut self, p: &Portal) -> Result<(), Status>;
    async fn discover_target_portal(&mut self, p: &Portal) -> Result<Vec<String>, Status>;
    async fn remove_target_portal(&mut self, p: &Portal) -> Result<(), Status>;
    async fn list_target_portals(&mut self) -> Result<Vec<Portal>, Status>;
    async fn connect_target(&mut self, l: &Login) -> Result<(), Status>;
    async fn disconnect_target(&mut self, p: &Portal, iqn: &str) -> Result<(), Status>;
    async fn get_target_disks(&mut self, p: &Portal, iqn: &str) -> Result<Vec<String>, Status>;
    /// `None` where the version has no SetMutualChapSecret (v1alpha1).
    async fn set_mutual_chap_secret(&mut self, secret: &str) -> Option<Result<(), Status>>;
}

pub type V1alpha1 = v1alpha1::iscsi_client::IscsiClient<ProxyChannel>;
pub type V1alpha2 = v1alpha2::iscsi_client::IscsiClient<ProxyChannel>;

/// `impl Iscsi` for one version's generated client. `C::method` names the
/// client's own (inherent) method, not the trait's.
macro_rules! version {
    ($ver:ident, $client:ident, other $other:ident, $set_mutual:item) => {
        impl Iscsi for $client {
            const VERSION: &'static str = stringify!($ver);
            type Other = $other;

            fn new(channel: ProxyChannel) -> Self {
                $client::new(channel)
            }

            async fn add_target_portal(&mut self, p: &Portal) -> Result<(), Status> {
                let target_portal = Some($ver::TargetPortal::from(p));
                $client::add_target_portal(self, $ver::AddTargetPortalRequest { target_portal })
                    .await
                    .map(|_| ())
            }

            async fn discover_target_portal(&mut self, p: &Portal) -> Result<Vec<String>, Status> {
                let target_portal = Some($ver::TargetPortal::from(p));
                let r = $ver::DiscoverTargetPortalRequest { target_portal };
                Ok($client::discover_target_portal(self, r).await?.into_inner().iqns)
            }

            async fn remove_target_portal(&mut self, p: &Portal) -> Result<(), Status> {
                let target_portal = Some($ver::TargetPortal::from(p));
                let r = $ver::RemoveTargetPortalRequest { target_portal };
                $client::remove_target_portal(self, r).await.map(|_| ())
            }

            async fn list_target_portals(&mut self) -> Result<Vec<Portal>, Status> {
                let r = $client::list_target_portals(self, $ver::ListTargetPortalsRequest {});
                let list = r.await?.into_inner().target_portals;
                Ok(list
                    .into_iter()
                    .map(|p| Portal::new(&p.target_address, p.target_port))
                    .collect())
            }

            async fn connect_target(&mut self, l: &Login) -> Result<(), Status> {
                let r = $ver::ConnectTargetRequest {
                    target_portal: Some($ver::TargetPortal::from(&l.portal)),
                    iqn: l.iqn.clone(),
                    auth_type: l.auth,
                    chap_username: l.user.clone(),
                    chap_secret: l.secret.clone(),
                };
                $client::connect_target(self, r).await.map(|_| ())
            }

            async fn disconnect_target(&mut self, p: &Portal, iqn: &str) -> Result<(), Status> {
                let r = $ver::DisconnectTargetRequest {
                    target_portal: Some($ver::TargetPortal::from(p)),
                    iqn: iqn.into(),
                };
                $client::disconnect_target(self, r).await.map(|_| ())
            }

            async fn get_target_disks(
                &mut self,
                p: &Portal,
                iqn: &str,
            ) -> Result<Vec<String>, Status> {
                let r = $ver::GetTargetDisksRequest {
                    target_portal: Some($ver::TargetPortal::from(p)),
                    iqn: iqn.into(),
                };
                Ok($client::get_target_disks(self, r).await?.into_inner().disk_i_ds)
            }

            $set_mutual
        }

        impl From<&Portal> for $ver::TargetPortal {
            fn from(p: &Portal) -> Self {
                $ver::TargetPortal {
                    target_address: p.address.clone(),
                    target_port: p.port,
                }
            }
        }
    };
}

version!(
    v1alpha1,
    V1alpha1,
    other V1alpha2,
    async fn set_mutual_chap_secret(&mut self, _: &str) -> Option<Result<(), Status>> {
        None
    }
);
version!(
    v1alpha2,
    V1alpha2,
    other V1alpha1,
    async fn set_mutual_chap_secret(&mut self, secret: &str) -> Option<Result<(), Status>> {
        let r = v1alpha2::SetMutualChapSecretRequest {
            mutual_chap_secret: secret.into(),
        };
        Some(V1alpha2::set_mutual_chap_secret(self, r).await.map(|_| ()))
    }
);

/// A well-formed target name (RFC 3720 IQN).
pub const IQN: &str = "iqn.2026-01.io.csi-proxy.test:disk1";

/// Portals refused by every call that takes one.
pub fn hostile_portals() -> Vec<Portal> {
    let mut v: Vec<Portal> = [
        "",
        "10.0.0.1:3260",
        "[::1]",
        "fe80::1%eth0",
        "10.0.0.256",
        "host;reboot",
        "$(id)",
        "-p",
        "a..b",
        "host\n",
        "host/x",
        "höst",
    ]
    .iter()
    .map(|a| Portal::new(a, 3260))
    .collect();
    v.push(Portal::new("127.0.0.1", 65536));
    v
}

/// Target names refused by every call that takes one.
pub const HOSTILE_IQNS: &[&str] = &[
    "",
    "target",
    "iqn.2001-13.com.example",
    "iqn.2001-01.com.example:t 1",
    "iqn.2001-01.com.example;reboot",
    "iqn.2001-01.com.example:$(id)",
    "eui.0123",
    "naa.zz23456789abcdef",
    "--help",
    "iqn.2001-01.com.example/../x",
];

/// Logins with a good portal and name but bad CHAP fields (`secret` is a
/// valid CHAP secret, sent where none belongs).
pub fn hostile_chap(portal: &Portal, secret: &str) -> Vec<Login> {
    let l = |auth, user: &str, s: &str| Login::new(portal, IQN, auth, user, s);
    vec![
        l(1, "user", "short"),
        l(1, "user", &"s".repeat(300)),
        l(1, "user", &format!("{secret}\n")),
        l(2, "us er", secret),
        l(0, "", secret),
        l(0, "user", ""),
        l(7, "", ""),
        l(-1, "", ""),
    ]
}

/// Every hostile portal, name and CHAP field sent to every call that takes
/// it: each must be InvalidArgument naming no secret. `portal` is a valid
/// portal (the name and CHAP cases use it), `secret` a valid CHAP secret.
/// Returns how many requests were refused.
pub async fn refuses_hostile<C: Iscsi>(c: &mut C, portal: &Portal, secret: &str) -> usize {
    let v = C::VERSION;
    let mut n = 0;
    let mut refused = |what: String, r: Result<(), Status>| {
        let e = r.expect_err(&what);
        assert_eq!(e.code(), Code::InvalidArgument, "{v} {what}: {e:?}");
        assert!(!e.message().is_empty(), "{v} {what}");
        assert!(!e.message().contains(secret), "{v} {what}: {}", e.message());
        n += 1;
    };
    let logins = hostile_portals()
        .into_iter()
        .map(|p| Login::new(&p, IQN, 1, "user", secret))
        .chain(
            HOSTILE_IQNS
                .iter()
                .map(|q| Login::new(portal, q, 0, "", "")),
        );
    for l in logins {
        let what = format!("{:?} {:?}", l.portal, l.iqn);
        refused(format!("ConnectTarget {what}"), c.connect_target(&l).await);
        let r = c.disconnect_target(&l.portal, &l.iqn).await;
        refused(format!("DisconnectTarget {what}"), r);
        let r = c.get_target_disks(&l.portal, &l.iqn).await.map(|_| ());
        refused(format!("GetTargetDisks {what}"), r);
    }
    for p in hostile_portals() {
        refused(
            format!("AddTargetPortal {p:?}"),
            c.add_target_portal(&p).await,
        );
        let r = c.discover_target_portal(&p).await.map(|_| ());
        refused(format!("DiscoverTargetPortal {p:?}"), r);
        let r = c.remove_target_portal(&p).await;
        refused(format!("RemoveTargetPortal {p:?}"), r);
    }
    for l in hostile_chap(portal, secret) {
        let what = format!("ConnectTarget auth {} user {:?}", l.auth, l.user);
        refused(what, c.connect_target(&l).await);
    }
    for s in ["tiny", "s\0ecret-secret", &"m".repeat(300)] {
        if let Some(r) = c.set_mutual_chap_secret(s).await {
            refused(format!("SetMutualChapSecret {} bytes", s.len()), r);
        }
    }
    n
}
