//! iSCSI v1alpha1, v1alpha2.

use super::routing;
use crate::dispatch::Routes;
use crate::wire::{request, response, Wire};
use csi_proxy_api::iscsi::{v1alpha1, v1alpha2};
use csi_proxy_host::iscsi::{self as iscsi, AuthenticationType, IscsiApi};
use std::sync::Arc;
use tonic::Status;

crate::catalog::iscsi_table!(routing!());

// The nested TargetPortal message, both directions.
request!([v1alpha1, v1alpha2] TargetPortal => iscsi::TargetPortal { target_address, target_port });
response!([v1alpha1, v1alpha2] iscsi::TargetPortal => TargetPortal { target_address, target_port } exact);

/// A message field is optional on the wire (prost `Option`); every request
/// that has a `target_portal` needs one.
macro_rules! required_target_portal {
    ($($ver:ident),+) => {$(
        impl Wire<iscsi::TargetPortal> for Option<$ver::TargetPortal> {
            fn wire(self) -> Result<iscsi::TargetPortal, Status> {
                self.ok_or_else(|| Status::invalid_argument("target_portal is required"))?.wire()
            }
        }
    )+};
}
required_target_portal!(v1alpha1, v1alpha2);

/// The proto enum `AuthenticationType`: unknown values are rejected, not
/// passed through.
impl Wire<AuthenticationType> for i32 {
    fn wire(self) -> Result<AuthenticationType, Status> {
        AuthenticationType::from_i32(self).ok_or_else(|| {
            Status::invalid_argument(format!(
                "auth_type {self} is not one of NONE (0), ONE_WAY_CHAP (1), MUTUAL_CHAP (2)"
            ))
        })
    }
}

// Requests. CHAP secrets go straight into the version-free requests, whose
// Debug redacts them.
request!([v1alpha1, v1alpha2] AddTargetPortalRequest => iscsi::AddTargetPortalRequest { target_portal });
request!([v1alpha1, v1alpha2] DiscoverTargetPortalRequest => iscsi::DiscoverTargetPortalRequest { target_portal });
request!([v1alpha1, v1alpha2] RemoveTargetPortalRequest => iscsi::RemoveTargetPortalRequest { target_portal });
request!([v1alpha1, v1alpha2] ListTargetPortalsRequest => iscsi::ListTargetPortalsRequest {});
request!([v1alpha1, v1alpha2] ConnectTargetRequest => iscsi::ConnectTargetRequest { target_portal, iqn, auth_type, chap_username, chap_secret });
request!([v1alpha1, v1alpha2] DisconnectTargetRequest => iscsi::DisconnectTargetRequest { target_portal, iqn });
request!([v1alpha1, v1alpha2] GetTargetDisksRequest => iscsi::GetTargetDisksRequest { target_portal, iqn });
request!([v1alpha2] SetMutualChapSecretRequest => iscsi::SetMutualChapSecretRequest { mutual_chap_secret });

// Responses.
response!([v1alpha1, v1alpha2] iscsi::AddTargetPortalResponse => AddTargetPortalResponse {} exact);
response!([v1alpha1, v1alpha2] iscsi::DiscoverTargetPortalResponse => DiscoverTargetPortalResponse { iqns } exact);
response!([v1alpha1, v1alpha2] iscsi::RemoveTargetPortalResponse => RemoveTargetPortalResponse {} exact);
response!([v1alpha1, v1alpha2] iscsi::ListTargetPortalsResponse => ListTargetPortalsResponse { target_portals } exact);
response!([v1alpha1, v1alpha2] iscsi::ConnectTargetResponse => ConnectTargetResponse {} exact);
response!([v1alpha1, v1alpha2] iscsi::DisconnectTargetResponse => DisconnectTargetResponse {} exact);
response!([v1alpha1, v1alpha2] iscsi::GetTargetDisksResponse => GetTargetDisksResponse { disk_i_ds = disk_ids } exact);
response!([v1alpha2] iscsi::SetMutualChapSecretResponse => SetMutualChapSecretResponse {} exact);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes::testing::{call, service_for, sha256, FakeHost};
    use csi_proxy_api::Group;
    use csi_proxy_host::iscsi::fake::{Call, Chap};
    use csi_proxy_host::iscsi::validate::{Iqn, Portal};
    use tonic::Code;

    const IQN: &str = "iqn.2000-01.com.example:a";

    fn portal() -> iscsi::TargetPortal {
        iscsi::TargetPortal {
            target_address: "10.0.0.1".into(),
            target_port: 3260,
        }
    }

    /// A host whose initiator knows two portals; the first offers two
    /// targets and has a session of `IQN` with disks 2 and 5.
    fn setup(version: &str) -> (FakeHost, crate::dispatch::VersionedService) {
        let host = FakeHost::new();
        let fake = &host.fakes.iscsi;
        let first = Portal::parse(&portal()).unwrap();
        let second = Portal::parse(&iscsi::TargetPortal {
            target_address: "host.example".into(),
            target_port: 3261,
        })
        .unwrap();
        fake.portals.lock().unwrap().extend([first.clone(), second]);
        fake.offered.lock().unwrap().insert(
            first.clone(),
            vec![IQN.into(), "iqn.2000-01.com.example:b".into()],
        );
        fake.sessions
            .lock()
            .unwrap()
            .insert((first, Iqn::parse(IQN).unwrap()), vec![2, 5]);
        let svc = host.service(Group::Iscsi, version);
        (host, svc)
    }

    /// The calls that reached the backend since the last look.
    fn calls(host: &FakeHost) -> Vec<Call> {
        std::mem::take(&mut *host.fakes.iscsi.calls.lock().unwrap())
    }

    fn wire_portal() -> v1alpha2::TargetPortal {
        v1alpha2::TargetPortal {
            target_address: "10.0.0.1".into(),
            target_port: 3260,
        }
    }

    /// A ConnectTarget; CHAP fields only where `auth_type` takes them (NONE
    /// with CHAP fields is refused by the API).
    fn connect(auth_type: i32) -> v1alpha2::ConnectTargetRequest {
        let chap = auth_type != 0;
        v1alpha2::ConnectTargetRequest {
            target_portal: Some(wire_portal()),
            iqn: IQN.into(),
            auth_type,
            chap_username: if chap { "user".into() } else { String::new() },
            chap_secret: if chap {
                "chap-secret-1".into()
            } else {
                String::new()
            },
        }
    }

    /// `connect(auth_type)` as `version`'s message, converted as the route
    /// converts it.
    fn converted(version: &str, auth_type: i32) -> iscsi::ConnectTargetRequest {
        let c = connect(auth_type);
        match version {
            "v1alpha1" => v1alpha1::ConnectTargetRequest {
                target_portal: Some(v1alpha1::TargetPortal {
                    target_address: "10.0.0.1".into(),
                    target_port: 3260,
                }),
                iqn: c.iqn,
                auth_type: c.auth_type,
                chap_username: c.chap_username,
                chap_secret: c.chap_secret,
            }
            .wire(),
            _ => c.wire(),
        }
        .unwrap()
    }

    #[tokio::test]
    async fn connect_target_converts_auth_type_and_secret() {
        for version in ["v1alpha1", "v1alpha2"] {
            let (host, svc) = setup(version);
            let path = format!("/{version}.Iscsi/ConnectTarget");
            for (wire, want, wmi) in [
                (0, AuthenticationType::None, "NONE"),
                (1, AuthenticationType::OneWayChap, "ONEWAYCHAP"),
                (2, AuthenticationType::MutualChap, "MUTUALCHAP"),
            ] {
                let chap = wire != 0;
                // The conversion: every field, the secret never shown.
                let got = converted(version, wire);
                assert_eq!(
                    got,
                    iscsi::ConnectTargetRequest {
                        target_portal: portal(),
                        iqn: IQN.into(),
                        auth_type: want,
                        chap_username: if chap { "user".into() } else { String::new() },
                        chap_secret: if chap {
                            "chap-secret-1".into()
                        } else {
                            String::new()
                        },
                    }
                );
                assert!(!format!("{got:?}").contains("chap-secret-1"));
                // What reaches the backend.
                let _: v1alpha2::ConnectTargetResponse =
                    call(&svc, &path, connect(wire)).await.unwrap();
                let got = calls(&host);
                assert_eq!(
                    got,
                    vec![Call::Connect(
                        "10.0.0.1:3260".into(),
                        IQN.into(),
                        wmi,
                        chap.then(|| Chap {
                            user: "user".into(),
                            secret_sha256: sha256("chap-secret-1"),
                        })
                    )]
                );
                assert!(!format!("{got:?}").contains("chap-secret-1"));
            }
            for bad in [3, -1, 1000] {
                let err = call::<_, v1alpha2::ConnectTargetResponse>(&svc, &path, connect(bad))
                    .await
                    .unwrap_err();
                assert_eq!(err.code(), Code::InvalidArgument, "{bad}");
                assert!(err.message().contains("auth_type"), "{}", err.message());
                assert!(!err.message().contains("chap-secret-1"));
            }
            assert_eq!(calls(&host), vec![], "the backend must not be called");
        }
    }

    #[tokio::test]
    async fn a_missing_target_portal_is_rejected() {
        let (host, svc) = setup("v1alpha2");
        let err = call::<_, v1alpha2::AddTargetPortalResponse>(
            &svc,
            "/v1alpha2.Iscsi/AddTargetPortal",
            v1alpha2::AddTargetPortalRequest {
                target_portal: None,
            },
        )
        .await
        .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(
            err.message().contains("target_portal is required"),
            "{}",
            err.message()
        );
        let mut req = connect(0);
        req.target_portal = None;
        let err =
            call::<_, v1alpha2::ConnectTargetResponse>(&svc, "/v1alpha2.Iscsi/ConnectTarget", req)
                .await
                .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert_eq!(calls(&host), vec![]);
    }

    #[tokio::test]
    async fn portals_and_disks() {
        let (host, svc) = setup("v1alpha1");
        let resp: v1alpha1::ListTargetPortalsResponse = call(
            &svc,
            "/v1alpha1.Iscsi/ListTargetPortals",
            v1alpha1::ListTargetPortalsRequest {},
        )
        .await
        .unwrap();
        assert_eq!(resp.target_portals.len(), 2);
        assert_eq!(resp.target_portals[0].target_address, "10.0.0.1");
        assert_eq!(resp.target_portals[0].target_port, 3260);
        assert_eq!(resp.target_portals[1].target_address, "host.example");
        assert_eq!(resp.target_portals[1].target_port, 3261);
        assert_eq!(calls(&host), vec![Call::List]);

        let resp: v1alpha1::DiscoverTargetPortalResponse = call(
            &svc,
            "/v1alpha1.Iscsi/DiscoverTargetPortal",
            v1alpha1::DiscoverTargetPortalRequest {
                target_portal: Some(v1alpha1::TargetPortal {
                    target_address: "10.0.0.1".into(),
                    target_port: 3260,
                }),
            },
        )
        .await
        .unwrap();
        assert_eq!(
            resp.iqns,
            vec![IQN.to_string(), "iqn.2000-01.com.example:b".into()]
        );
        assert_eq!(calls(&host), vec![Call::Discover("10.0.0.1:3260".into())]);

        let resp: v1alpha1::GetTargetDisksResponse = call(
            &svc,
            "/v1alpha1.Iscsi/GetTargetDisks",
            v1alpha1::GetTargetDisksRequest {
                target_portal: Some(v1alpha1::TargetPortal {
                    target_address: "10.0.0.1".into(),
                    target_port: 3260,
                }),
                iqn: IQN.into(),
            },
        )
        .await
        .unwrap();
        assert_eq!(resp.disk_i_ds, vec!["2".to_string(), "5".into()]);
        assert_eq!(
            calls(&host),
            vec![Call::Disks("10.0.0.1:3260".into(), IQN.into())]
        );
    }

    #[tokio::test]
    async fn mutual_chap_secret() {
        let (host, svc) = setup("v1alpha2");
        let req = v1alpha2::SetMutualChapSecretRequest {
            mutual_chap_secret: "mutual-secret-2".into(),
        };
        let got: iscsi::SetMutualChapSecretRequest = req.clone().wire().unwrap();
        assert_eq!(got.mutual_chap_secret, "mutual-secret-2");
        assert!(!format!("{got:?}").contains("mutual-secret-2"));
        let _: v1alpha2::SetMutualChapSecretResponse =
            call(&svc, "/v1alpha2.Iscsi/SetMutualChapSecret", req)
                .await
                .unwrap();
        let got = calls(&host);
        assert_eq!(got, vec![Call::SetMutual(Some(sha256("mutual-secret-2")))]);
        assert!(!format!("{got:?}").contains("mutual-secret-2"));
    }

    #[tokio::test]
    async fn no_backend_answers_unimplemented() {
        let svc = service_for(Group::Iscsi, "v1alpha2", |h| {
            h.iscsi = Arc::new(csi_proxy_host::iscsi::NoIscsiBackend)
        });
        let err = call::<_, v1alpha2::ConnectTargetResponse>(
            &svc,
            "/v1alpha2.Iscsi/ConnectTarget",
            connect(1),
        )
        .await
        .unwrap_err();
        assert_eq!(err.code(), Code::Unimplemented);
        assert!(
            err.message().contains("iscsi API: ConnectTarget"),
            "{}",
            err.message()
        );
        assert!(!err.message().contains("chap-secret-1"));
    }
}
