//! SMB v1alpha1, v1beta1, v1beta2, v1.

use super::routing;
use crate::dispatch::Routes;
use crate::wire::{request, response};
use csi_proxy_api::smb::{v1, v1alpha1, v1beta1, v1beta2};
use csi_proxy_host::smb::{self as smb, SmbApi};
use std::sync::Arc;

crate::catalog::smb_table!(routing!());

// Requests. The password is a secret: it goes straight into the
// version-free request, whose Debug redacts it.
request!([v1alpha1, v1beta1, v1beta2, v1] NewSmbGlobalMappingRequest => smb::NewSmbGlobalMappingRequest { remote_path, local_path, username, password });
request!([v1alpha1, v1beta1, v1beta2, v1] RemoveSmbGlobalMappingRequest => smb::RemoveSmbGlobalMappingRequest { remote_path });

// Responses. The old versions' `error` fields stay empty: errors travel as
// gRPC status only.
response!([v1alpha1, v1beta1] smb::NewSmbGlobalMappingResponse => NewSmbGlobalMappingResponse {} fill);
response!([v1beta2, v1] smb::NewSmbGlobalMappingResponse => NewSmbGlobalMappingResponse {} exact);
response!([v1alpha1, v1beta1] smb::RemoveSmbGlobalMappingResponse => RemoveSmbGlobalMappingResponse {} fill);
response!([v1beta2, v1] smb::RemoveSmbGlobalMappingResponse => RemoveSmbGlobalMappingResponse {} exact);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes::testing::{call, service_for, Recorder};
    use csi_proxy_api::Group;
    use tonic::Code;

    #[derive(Default)]
    struct TestSmb {
        rec: Recorder,
    }

    impl SmbApi for TestSmb {
        fn is_smb_mapped(
            &self,
            req: smb::IsSmbMappedRequest,
        ) -> csi_proxy_host::Result<smb::IsSmbMappedResponse> {
            self.rec.record(req);
            Ok(smb::IsSmbMappedResponse { mapped: true })
        }
        fn new_smb_link(
            &self,
            req: smb::NewSmbLinkRequest,
        ) -> csi_proxy_host::Result<smb::NewSmbLinkResponse> {
            self.rec.record(req);
            Ok(smb::NewSmbLinkResponse {})
        }
        fn new_smb_global_mapping(
            &self,
            req: smb::NewSmbGlobalMappingRequest,
        ) -> csi_proxy_host::Result<smb::NewSmbGlobalMappingResponse> {
            self.rec.record(req);
            Ok(smb::NewSmbGlobalMappingResponse {})
        }
        fn remove_smb_global_mapping(
            &self,
            req: smb::RemoveSmbGlobalMappingRequest,
        ) -> csi_proxy_host::Result<smb::RemoveSmbGlobalMappingResponse> {
            self.rec.record(req);
            Ok(smb::RemoveSmbGlobalMappingResponse {})
        }
    }

    #[tokio::test]
    async fn every_version_maps_and_unmaps() {
        for version in ["v1alpha1", "v1beta1", "v1beta2", "v1"] {
            let api = Arc::new(TestSmb::default());
            let svc = service_for(Group::Smb, version, |h| h.smb = api.clone());
            // The old versions' responses have an `error` field: it stays empty.
            let resp: v1alpha1::NewSmbGlobalMappingResponse = call(
                &svc,
                &format!("/{version}.Smb/NewSmbGlobalMapping"),
                v1::NewSmbGlobalMappingRequest {
                    remote_path: r"\\srv\share".into(),
                    local_path: r"C:\var\lib\kubelet\x".into(),
                    username: r"DOM\u".into(),
                    password: "pw-secret".into(),
                },
            )
            .await
            .unwrap();
            assert_eq!(resp.error, "");
            let got = api.rec.only::<smb::NewSmbGlobalMappingRequest>();
            assert_eq!(
                got,
                smb::NewSmbGlobalMappingRequest {
                    remote_path: r"\\srv\share".into(),
                    local_path: r"C:\var\lib\kubelet\x".into(),
                    username: r"DOM\u".into(),
                    password: "pw-secret".into(),
                }
            );
            assert!(!format!("{got:?}").contains("pw-secret"));
            let resp: v1alpha1::RemoveSmbGlobalMappingResponse = call(
                &svc,
                &format!("/{version}.Smb/RemoveSmbGlobalMapping"),
                v1::RemoveSmbGlobalMappingRequest {
                    remote_path: r"\\srv\share".into(),
                },
            )
            .await
            .unwrap();
            assert_eq!(resp.error, "");
            assert_eq!(
                api.rec
                    .only::<smb::RemoveSmbGlobalMappingRequest>()
                    .remote_path,
                r"\\srv\share"
            );
        }
    }

    #[tokio::test]
    async fn no_backend_answers_unimplemented() {
        let svc = service_for(Group::Smb, "v1", |h| {
            h.smb = Arc::new(csi_proxy_host::smb::NoSmbBackend)
        });
        let err = call::<_, v1::RemoveSmbGlobalMappingResponse>(
            &svc,
            "/v1.Smb/RemoveSmbGlobalMapping",
            v1::RemoveSmbGlobalMappingRequest {
                remote_path: r"\\srv\share".into(),
            },
        )
        .await
        .unwrap_err();
        assert_eq!(err.code(), Code::Unimplemented);
        assert!(
            err.message().contains("smb API: RemoveSmbGlobalMapping"),
            "{}",
            err.message()
        );
    }
}
