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
    use crate::routes::testing::{call, service_for, Recorder};
    use csi_proxy_api::Group;
    use tonic::Code;

    #[derive(Default)]
    struct TestIscsi {
        rec: Recorder,
    }

    type R<T> = csi_proxy_host::Result<T>;

    fn portal() -> iscsi::TargetPortal {
        iscsi::TargetPortal {
            target_address: "10.0.0.1".into(),
            target_port: 3260,
        }
    }

    impl IscsiApi for TestIscsi {
        fn add_target_portal(
            &self,
            req: iscsi::AddTargetPortalRequest,
        ) -> R<iscsi::AddTargetPortalResponse> {
            self.rec.record(req);
            Ok(iscsi::AddTargetPortalResponse {})
        }
        fn discover_target_portal(
            &self,
            req: iscsi::DiscoverTargetPortalRequest,
        ) -> R<iscsi::DiscoverTargetPortalResponse> {
            self.rec.record(req);
            Ok(iscsi::DiscoverTargetPortalResponse {
                iqns: vec![
                    "iqn.2000-01.com.example:a".into(),
                    "iqn.2000-01.com.example:b".into(),
                ],
            })
        }
        fn remove_target_portal(
            &self,
            req: iscsi::RemoveTargetPortalRequest,
        ) -> R<iscsi::RemoveTargetPortalResponse> {
            self.rec.record(req);
            Ok(iscsi::RemoveTargetPortalResponse {})
        }
        fn list_target_portals(
            &self,
            req: iscsi::ListTargetPortalsRequest,
        ) -> R<iscsi::ListTargetPortalsResponse> {
            self.rec.record(req);
            Ok(iscsi::ListTargetPortalsResponse {
                target_portals: vec![
                    portal(),
                    iscsi::TargetPortal {
                        target_address: "host.example".into(),
                        target_port: 3261,
                    },
                ],
            })
        }
        fn connect_target(
            &self,
            req: iscsi::ConnectTargetRequest,
        ) -> R<iscsi::ConnectTargetResponse> {
            self.rec.record(req);
            Ok(iscsi::ConnectTargetResponse {})
        }
        fn disconnect_target(
            &self,
            req: iscsi::DisconnectTargetRequest,
        ) -> R<iscsi::DisconnectTargetResponse> {
            self.rec.record(req);
            Ok(iscsi::DisconnectTargetResponse {})
        }
        fn get_target_disks(
            &self,
            req: iscsi::GetTargetDisksRequest,
        ) -> R<iscsi::GetTargetDisksResponse> {
            self.rec.record(req);
            Ok(iscsi::GetTargetDisksResponse {
                disk_ids: vec!["2".into(), "5".into()],
            })
        }
        fn set_mutual_chap_secret(
            &self,
            req: iscsi::SetMutualChapSecretRequest,
        ) -> R<iscsi::SetMutualChapSecretResponse> {
            self.rec.record(req);
            Ok(iscsi::SetMutualChapSecretResponse {})
        }
    }

    fn setup(version: &str) -> (Arc<TestIscsi>, crate::dispatch::VersionedService) {
        let api = Arc::new(TestIscsi::default());
        let svc = service_for(Group::Iscsi, version, |h| h.iscsi = api.clone());
        (api, svc)
    }

    fn wire_portal() -> v1alpha2::TargetPortal {
        v1alpha2::TargetPortal {
            target_address: "10.0.0.1".into(),
            target_port: 3260,
        }
    }

    fn connect(auth_type: i32) -> v1alpha2::ConnectTargetRequest {
        v1alpha2::ConnectTargetRequest {
            target_portal: Some(wire_portal()),
            iqn: "iqn.2000-01.com.example:a".into(),
            auth_type,
            chap_username: "user".into(),
            chap_secret: "chap-secret-1".into(),
        }
    }

    #[tokio::test]
    async fn connect_target_converts_auth_type_and_secret() {
        for version in ["v1alpha1", "v1alpha2"] {
            let (api, svc) = setup(version);
            let path = format!("/{version}.Iscsi/ConnectTarget");
            for (wire, want) in [
                (0, AuthenticationType::None),
                (1, AuthenticationType::OneWayChap),
                (2, AuthenticationType::MutualChap),
            ] {
                let _: v1alpha2::ConnectTargetResponse =
                    call(&svc, &path, connect(wire)).await.unwrap();
                let got = api.rec.only::<iscsi::ConnectTargetRequest>();
                assert_eq!(
                    got,
                    iscsi::ConnectTargetRequest {
                        target_portal: portal(),
                        iqn: "iqn.2000-01.com.example:a".into(),
                        auth_type: want,
                        chap_username: "user".into(),
                        chap_secret: "chap-secret-1".into(),
                    }
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
            assert!(api.rec.is_empty(), "the API must not be called");
        }
    }

    #[tokio::test]
    async fn a_missing_target_portal_is_rejected() {
        let (api, svc) = setup("v1alpha2");
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
        assert!(api.rec.is_empty());
    }

    #[tokio::test]
    async fn portals_and_disks() {
        let (api, svc) = setup("v1alpha1");
        let resp: v1alpha1::ListTargetPortalsResponse = call(
            &svc,
            "/v1alpha1.Iscsi/ListTargetPortals",
            v1alpha1::ListTargetPortalsRequest {},
        )
        .await
        .unwrap();
        assert_eq!(resp.target_portals.len(), 2);
        assert_eq!(resp.target_portals[1].target_address, "host.example");
        assert_eq!(resp.target_portals[1].target_port, 3261);
        api.rec.only::<iscsi::ListTargetPortalsRequest>();

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
        assert_eq!(resp.iqns.len(), 2);
        assert_eq!(
            api.rec.only::<iscsi::DiscoverTargetPortalRequest>(),
            iscsi::DiscoverTargetPortalRequest {
                target_portal: portal()
            }
        );

        let resp: v1alpha1::GetTargetDisksResponse = call(
            &svc,
            "/v1alpha1.Iscsi/GetTargetDisks",
            v1alpha1::GetTargetDisksRequest {
                target_portal: Some(v1alpha1::TargetPortal {
                    target_address: "10.0.0.1".into(),
                    target_port: 3260,
                }),
                iqn: "iqn.2000-01.com.example:a".into(),
            },
        )
        .await
        .unwrap();
        assert_eq!(resp.disk_i_ds, vec!["2".to_string(), "5".into()]);
        assert_eq!(
            api.rec.only::<iscsi::GetTargetDisksRequest>().iqn,
            "iqn.2000-01.com.example:a"
        );
    }

    #[tokio::test]
    async fn mutual_chap_secret() {
        let (api, svc) = setup("v1alpha2");
        let _: v1alpha2::SetMutualChapSecretResponse = call(
            &svc,
            "/v1alpha2.Iscsi/SetMutualChapSecret",
            v1alpha2::SetMutualChapSecretRequest {
                mutual_chap_secret: "mutual-secret-2".into(),
            },
        )
        .await
        .unwrap();
        let got = api.rec.only::<iscsi::SetMutualChapSecretRequest>();
        assert_eq!(got.mutual_chap_secret, "mutual-secret-2");
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
