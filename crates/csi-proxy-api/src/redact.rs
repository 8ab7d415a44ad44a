//! Hand-written `Debug` for the wire messages that carry secrets (their
//! generated `Debug` is skipped in build.rs): the secret prints as
//! `<redacted>`, so no log line or error message built with `{:?}` can leak
//! a password or CHAP secret.

use std::fmt;

use crate::secrets::REDACTED;

macro_rules! redacting_debug {
    ($ty:path { $($field:ident),* ; secret $($secret:ident),+ }) => {
        impl fmt::Debug for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(stringify!($ty))
                    $(.field(stringify!($field), &self.$field))*
                    $(.field(stringify!($secret), &REDACTED))+
                    .finish()
            }
        }
    };
}

redacting_debug!(crate::smb::v1alpha1::NewSmbGlobalMappingRequest { remote_path, local_path, username; secret password });
redacting_debug!(crate::smb::v1beta1::NewSmbGlobalMappingRequest { remote_path, local_path, username; secret password });
redacting_debug!(crate::smb::v1beta2::NewSmbGlobalMappingRequest { remote_path, local_path, username; secret password });
redacting_debug!(crate::smb::v1::NewSmbGlobalMappingRequest { remote_path, local_path, username; secret password });
redacting_debug!(crate::iscsi::v1alpha1::ConnectTargetRequest { target_portal, iqn, auth_type, chap_username; secret chap_secret });
redacting_debug!(crate::iscsi::v1alpha2::ConnectTargetRequest { target_portal, iqn, auth_type, chap_username; secret chap_secret });
redacting_debug!(crate::iscsi::v1alpha2::SetMutualChapSecretRequest { ; secret mutual_chap_secret });

#[cfg(test)]
mod tests {
    #[test]
    fn secrets_never_appear_in_debug() {
        let smb = crate::smb::v1::NewSmbGlobalMappingRequest {
            remote_path: "\\\\srv\\share".into(),
            local_path: String::new(),
            username: "DOMAIN\\user".into(),
            password: "hunter2-secret".into(),
        };
        let text = format!("{smb:?}");
        assert!(
            !text.contains("hunter2") && text.contains("<redacted>") && text.contains("DOMAIN"),
            "{text}"
        );
        let iscsi = crate::iscsi::v1alpha2::ConnectTargetRequest {
            chap_secret: "chap-secret-1234".into(),
            ..Default::default()
        };
        assert!(!format!("{iscsi:?}").contains("chap-secret"));
        let mutual = crate::iscsi::v1alpha2::SetMutualChapSecretRequest {
            mutual_chap_secret: "mutual-s3cret".into(),
        };
        assert!(!format!("{mutual:?}").contains("s3cret"));
        let v1alpha1 = crate::iscsi::v1alpha1::ConnectTargetRequest {
            chap_secret: "zzz-secret".into(),
            ..Default::default()
        };
        assert!(!format!("{v1alpha1:?}").contains("zzz"));
    }
}
