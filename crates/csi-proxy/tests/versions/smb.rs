//! The SMB API's versions (v1alpha1, v1beta1, v1beta2, v1) behind [`Smb`];
//! the hostile requests both tiers send, and the check that both calls
//! refuse them.

use csi_proxy_api::smb::{v1, v1alpha1, v1beta1, v1beta2};
use csi_proxy_client::ProxyChannel;
use tonic::{Code, Status};

/// A NewSmbGlobalMapping request, whatever the version.
#[derive(Clone, Debug)]
pub struct Mapping {
    pub remote: String,
    pub local: String,
    pub user: String,
    pub password: String,
}

impl Mapping {
    pub fn new(remote: &str, local: &str, user: &str, password: &str) -> Mapping {
        Mapping {
            remote: remote.into(),
            local: local.into(),
            user: user.into(),
            password: password.into(),
        }
    }
}

/// One version's client, both RPCs of the group.
pub trait Smb: Sized {
    /// `"v1alpha1"`, `"v1beta1"`, `"v1beta2"`, `"v1"`.
    const VERSION: &'static str;
    fn new(channel: ProxyChannel) -> Self;
    async fn new_smb_global_mapping(&mut self, m: &Mapping) -> Result<(), Status>;
    async fn remove_smb_global_mapping(&mut self, remote: &str) -> Result<(), Status>;
}

pub type V1alpha1 = v1alpha1::smb_client::SmbClient<ProxyChannel>;
pub type V1beta1 = v1beta1::smb_client::SmbClient<ProxyChannel>;
pub type V1beta2 = v1beta2::smb_client::SmbClient<ProxyChannel>;
pub type V1 = v1::smb_client::SmbClient<ProxyChannel>;

/// The answer's `error` field of the versions that have one: errors travel
/// as gRPC status only, so a success carries an empty one.
trait ErrorField {
    fn error_field(&self) -> &str;
}

macro_rules! error_field {
    (with [$($ver:ident),+] without [$($plain:ident),+]) => {
        $(
            impl ErrorField for $ver::NewSmbGlobalMappingResponse {
                fn error_field(&self) -> &str { &self.error }
            }
            impl ErrorField for $ver::RemoveSmbGlobalMappingResponse {
                fn error_field(&self) -> &str { &self.error }
            }
        )+
        $(
            impl ErrorField for $plain::NewSmbGlobalMappingResponse {
                fn error_field(&self) -> &str { "" }
            }
            impl ErrorField for $plain::RemoveSmbGlobalMappingResponse {
                fn error_field(&self) -> &str { "" }
            }
        )+
    };
}
error_field!(with [v1alpha1, v1beta1] without [v1beta2, v1]);

fn success(version: &str, r: impl ErrorField) {
    assert_eq!(
        r.error_field(),
        "",
        "{version}: a success with an error field"
    );
}

/// `impl Smb` for one version's generated client. `C::method` names the
/// client's own (inherent) method, not the trait's.
macro_rules! version {
    ($($ver:ident: $client:ident),+) => {$(
        impl Smb for $client {
            const VERSION: &'static str = stringify!($ver);

            fn new(channel: ProxyChannel) -> Self {
                $client::new(channel)
            }

            async fn new_smb_global_mapping(&mut self, m: &Mapping) -> Result<(), Status> {
                let r = $ver::NewSmbGlobalMappingRequest {
                    remote_path: m.remote.clone(),
                    local_path: m.local.clone(),
                    username: m.user.clone(),
                    password: m.password.clone(),
                };
                let r = $client::new_smb_global_mapping(self, r).await?;
                success(Self::VERSION, r.into_inner());
                Ok(())
            }

            async fn remove_smb_global_mapping(&mut self, remote: &str) -> Result<(), Status> {
                let r = $ver::RemoveSmbGlobalMappingRequest {
                    remote_path: remote.into(),
                };
                let r = $client::remove_smb_global_mapping(self, r).await?;
                success(Self::VERSION, r.into_inner());
                Ok(())
            }
        }
    )+};
}
version!(v1alpha1: V1alpha1, v1beta1: V1beta1, v1beta2: V1beta2, v1: V1);

/// Remote paths refused whatever the OS: no `\\host\share` form, device
/// and `\\?\` forms, `..`, bad characters, bad hosts.
pub const HOSTILE_REMOTE_PATHS: &[&str] = &[
    "",
    "server",
    r"\\server",
    r"\\?\C:\Windows",
    r"\\?\UNC\server\share",
    r"\\.\pipe\csi-proxy-disk-v1",
    r"\\.\pipe\x",
    r"\\server\share\..\..\x",
    r"\\server\..",
    r"\\server\share\\x",
    r"\\server\sha:re",
    r"\\server\share*",
    "\\\\server\\share\0",
    "\\\\server\\share\nx",
    r"\\server;reboot\share",
    r"\\$(id)\share",
    r"\\[::1]\share",
    r"\\1.2.3.999\share",
    r"\\server:445\share",
    "\\\\server\\share\u{202e}",
    r"C:\share",
];

/// Credentials refused with a good share and local path.
pub fn hostile_credentials(password: &str) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = ["a:b", "a\\b\\c", "u\nx", "u;x"]
        .iter()
        .map(|u| (u.to_string(), password.to_string()))
        .collect();
    v.push((String::new(), password.into()));
    v.push(("user".into(), format!("{password}\n")));
    v.push(("user".into(), "p".repeat(2000)));
    v
}

/// The hostile mappings of both tiers: every hostile remote path (with a
/// good `local`), every hostile local path of the OS's own (with a good
/// share), every hostile credential.
pub fn hostile_mappings(local: &str, hostile_locals: &[String], password: &str) -> Vec<Mapping> {
    let ok = r"\\server\share";
    let mut v: Vec<Mapping> = HOSTILE_REMOTE_PATHS
        .iter()
        .map(|r| Mapping::new(r, local, r"DOM\user", password))
        .collect();
    v.extend(
        hostile_locals
            .iter()
            .map(|l| Mapping::new(ok, l, r"DOM\user", password)),
    );
    v.extend(
        hostile_credentials(password)
            .iter()
            .map(|(u, pw)| Mapping::new(ok, local, u, pw)),
    );
    v
}

/// Every hostile mapping refused (InvalidArgument, or PermissionDenied for
/// a local path outside the kubelet dir), and every hostile remote path
/// refused by RemoveSmbGlobalMapping; no answer names the password.
/// Returns how many requests were refused.
pub async fn refuses_hostile<C: Smb>(c: &mut C, cases: &[Mapping], password: &str) -> usize {
    let v = C::VERSION;
    let mut n = 0;
    for m in cases {
        let e = c.new_smb_global_mapping(m).await.unwrap_err();
        assert!(
            matches!(e.code(), Code::InvalidArgument | Code::PermissionDenied),
            "{v} {:?} {:?}: {e:?}",
            m.remote,
            m.local
        );
        assert!(!e.message().is_empty() && !e.message().contains(password));
        n += 1;
    }
    for r in HOSTILE_REMOTE_PATHS {
        let e = c.remove_smb_global_mapping(r).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{v} remove {r:?}: {e:?}");
        n += 1;
    }
    n
}
