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
    use crate::routes::testing::{call, service_for, sha256, FakeHost};
    use crate::wire::Wire;
    use csi_proxy_api::Group;
    use csi_proxy_host::smb::fake::Call;
    use tonic::Code;

    fn map_request(local_path: &str) -> v1::NewSmbGlobalMappingRequest {
        v1::NewSmbGlobalMappingRequest {
            remote_path: r"\\srv\share".into(),
            local_path: local_path.into(),
            username: r"DOM\u".into(),
            password: "pw-secret".into(),
        }
    }

    /// Every version's request reaches the host whole: the remote path and
    /// the user and password reach the backend's mapping (the password by
    /// its SHA-256: the fake keeps no secret), the local path becomes the
    /// link to the share; the converted request never shows the password.
    #[tokio::test]
    async fn every_version_maps_and_unmaps() {
        for version in ["v1alpha1", "v1beta1", "v1beta2", "v1"] {
            let host = FakeHost::new();
            let svc = host.service(Group::Smb, version);
            let local = host.path("x");
            // The conversion the route makes: whole, and its Debug redacts.
            macro_rules! converted {
                ($v:ident) => {
                    $v::NewSmbGlobalMappingRequest {
                        remote_path: r"\\srv\share".into(),
                        local_path: local.clone(),
                        username: r"DOM\u".into(),
                        password: "pw-secret".into(),
                    }
                    .wire()
                };
            }
            let converted: smb::NewSmbGlobalMappingRequest = match version {
                "v1alpha1" => converted!(v1alpha1),
                "v1beta1" => converted!(v1beta1),
                "v1beta2" => converted!(v1beta2),
                _ => converted!(v1),
            }
            .unwrap();
            assert_eq!(
                converted,
                smb::NewSmbGlobalMappingRequest {
                    remote_path: r"\\srv\share".into(),
                    local_path: local.clone(),
                    username: r"DOM\u".into(),
                    password: "pw-secret".into(),
                }
            );
            assert!(!format!("{converted:?}").contains("pw-secret"));

            let path = format!("/{version}.Smb/NewSmbGlobalMapping");
            // The old versions' responses have an `error` field: it stays empty.
            let linked =
                call::<_, v1alpha1::NewSmbGlobalMappingResponse>(&svc, &path, map_request(&local))
                    .await;
            assert_eq!(
                *host.fakes.smb.calls.lock().unwrap(),
                vec![
                    Call::Mapping(r"\\srv\share".into()),
                    Call::Map {
                        root: r"\\srv\share".into(),
                        user: Some(r"DOM\u".into()),
                        password_sha256: Some(sha256("pw-secret")),
                        require_privacy: true,
                    }
                ]
            );
            assert!(!format!("{:?}", host.fakes.smb.calls()).contains("pw-secret"));
            match linked {
                Ok(resp) => {
                    assert_eq!(resp.error, "");
                    assert_eq!(
                        std::fs::read_link(&local).unwrap(),
                        std::path::Path::new(r"\\?\UNC\srv\share\")
                    );
                }
                // wine's CreateSymbolicLinkW creates nothing: the link of
                // the local path is refused once the share is mapped.
                Err(e) if cfg!(windows) && e.message().contains("no link exists") => {
                    assert_eq!(e.code(), Code::Internal);
                    assert!(e.message().contains(&local), "{}", e.message());
                    println!("{version}: no link checked (wine creates none)");
                }
                Err(e) => panic!("{version}: {e:?}"),
            }
            assert!(!host.fakes.smb.mappings.lock().unwrap().is_empty());
            // Mapped already, without a local path: nothing more reaches the
            // backend but the look-up.
            let resp: v1alpha1::NewSmbGlobalMappingResponse =
                call(&svc, &path, map_request("")).await.unwrap();
            assert_eq!(resp.error, "");

            host.fakes.smb.calls.lock().unwrap().clear();
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
                host.fakes.smb.calls(),
                vec![Call::Unmap(r"\\srv\share".into())]
            );
            assert!(host.fakes.smb.mappings.lock().unwrap().is_empty());
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
