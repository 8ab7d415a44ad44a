//! Typed accessors: one `connect_<group>_<version>` per group/version and,
//! per group, an `Any<Group>Client` enum with a `connect_<group>` accessor
//! that picks the version. Generated from one table.

use crate::{Client, ProxyChannel, Result};
use csi_proxy_api::{ApiVersion, Group};

macro_rules! typed_clients {
    ($(
        $group:ident, $gmod:ident, $cmod:ident, $Client:ident, $Any:ident, $connect_group:ident {
            $($ver:ident => $Var:ident, $connect:ident;)+
        }
    )*) => {
        $(
            #[doc = concat!(
                "A client of whichever `", stringify!($gmod), "` version [`Client::",
                stringify!($connect_group), "`] picked."
            )]
            #[derive(Clone, Debug)]
            pub enum $Any {
                $(
                    #[doc = concat!("`", stringify!($gmod), "/", stringify!($ver), "`.")]
                    $Var(csi_proxy_api::$gmod::$ver::$cmod::$Client<ProxyChannel>),
                )+
            }

            impl $Any {
                /// The group/version of this client.
                #[must_use]
                pub fn api(&self) -> ApiVersion {
                    match self {
                        $($Any::$Var(_) => ApiVersion {
                            group: Group::$group,
                            version: stringify!($ver),
                        },)+
                    }
                }

                /// The client of `api` on `channel`; `None` if `api` is
                /// not a version of this group.
                #[must_use]
                pub fn from_channel(api: ApiVersion, channel: ProxyChannel) -> Option<$Any> {
                    if api.group != Group::$group {
                        return None;
                    }
                    match api.version {
                        $(stringify!($ver) => Some($Any::$Var(
                            csi_proxy_api::$gmod::$ver::$cmod::$Client::new(channel),
                        )),)+
                        _ => None,
                    }
                }
            }

            impl Client {
                $(
                    #[doc = concat!(
                        "Connect to `", stringify!($gmod), "/", stringify!($ver),
                        "`: the `", stringify!($Client), "` of [`csi_proxy_api::",
                        stringify!($gmod), "::", stringify!($ver), "`]."
                    )]
                    pub async fn $connect(
                        &self,
                    ) -> Result<csi_proxy_api::$gmod::$ver::$cmod::$Client<ProxyChannel>> {
                        let api = ApiVersion {
                            group: Group::$group,
                            version: stringify!($ver),
                        };
                        let channel = self.connect(api).await?;
                        Ok(csi_proxy_api::$gmod::$ver::$cmod::$Client::new(channel))
                    }
                )+

                #[doc = concat!(
                    "Version fallback for `", stringify!($gmod),
                    "`: [`Client::connect_newest`] as a typed client; ",
                    "[`", stringify!($Any), "::api`] tells which version was picked."
                )]
                pub async fn $connect_group(&self) -> Result<$Any> {
                    let (api, channel) = self.connect_newest(Group::$group).await?;
                    Ok($Any::from_channel(api, channel)
                        .expect("connect_newest returns a version of the group"))
                }
            }
        )*

        /// Every group/version that has a typed accessor, in table order.
        #[cfg(test)]
        pub(crate) const TYPED: &[(Group, &str)] = &[$($((Group::$group, stringify!($ver)),)+)*];
    };
}

typed_clients! {
    Disk, disk, disk_client, DiskClient, AnyDiskClient, connect_disk {
        v1alpha1 => V1alpha1, connect_disk_v1alpha1;
        v1beta1 => V1beta1, connect_disk_v1beta1;
        v1beta2 => V1beta2, connect_disk_v1beta2;
        v1beta3 => V1beta3, connect_disk_v1beta3;
        v1 => V1, connect_disk_v1;
    }
    Filesystem, filesystem, filesystem_client, FilesystemClient, AnyFilesystemClient, connect_filesystem {
        v1alpha1 => V1alpha1, connect_filesystem_v1alpha1;
        v1beta1 => V1beta1, connect_filesystem_v1beta1;
        v1beta2 => V1beta2, connect_filesystem_v1beta2;
        v1 => V1, connect_filesystem_v1;
        v2alpha1 => V2alpha1, connect_filesystem_v2alpha1;
    }
    Iscsi, iscsi, iscsi_client, IscsiClient, AnyIscsiClient, connect_iscsi {
        v1alpha1 => V1alpha1, connect_iscsi_v1alpha1;
        v1alpha2 => V1alpha2, connect_iscsi_v1alpha2;
    }
    Smb, smb, smb_client, SmbClient, AnySmbClient, connect_smb {
        v1alpha1 => V1alpha1, connect_smb_v1alpha1;
        v1beta1 => V1beta1, connect_smb_v1beta1;
        v1beta2 => V1beta2, connect_smb_v1beta2;
        v1 => V1, connect_smb_v1;
    }
    System, system, system_client, SystemClient, AnySystemClient, connect_system {
        v1alpha1 => V1alpha1, connect_system_v1alpha1;
    }
    Volume, volume, volume_client, VolumeClient, AnyVolumeClient, connect_volume {
        v1alpha1 => V1alpha1, connect_volume_v1alpha1;
        v1beta1 => V1beta1, connect_volume_v1beta1;
        v1beta2 => V1beta2, connect_volume_v1beta2;
        v1beta3 => V1beta3, connect_volume_v1beta3;
        v1 => V1, connect_volume_v1;
        v2alpha1 => V2alpha1, connect_volume_v2alpha1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use csi_proxy_api::API_VERSIONS;

    #[test]
    fn the_table_covers_every_version_once() {
        let listed: Vec<(Group, &str)> =
            API_VERSIONS.iter().map(|a| (a.group, a.version)).collect();
        assert_eq!(TYPED, listed.as_slice());
    }

    #[tokio::test]
    async fn any_clients_know_their_version() {
        // A lazy channel: nothing is dialed.
        let channel = tonic::transport::Endpoint::from_static("http://localhost").connect_lazy();
        for api in API_VERSIONS {
            let ch = ProxyChannel::new(channel.clone(), api, "/x".into(), None);
            let got = match api.group {
                Group::Disk => AnyDiskClient::from_channel(api, ch).map(|c| c.api()),
                Group::Filesystem => AnyFilesystemClient::from_channel(api, ch).map(|c| c.api()),
                Group::Iscsi => AnyIscsiClient::from_channel(api, ch).map(|c| c.api()),
                Group::Smb => AnySmbClient::from_channel(api, ch).map(|c| c.api()),
                Group::System => AnySystemClient::from_channel(api, ch).map(|c| c.api()),
                Group::Volume => AnyVolumeClient::from_channel(api, ch).map(|c| c.api()),
            };
            assert_eq!(got, Some(api));
        }
        let ch = ProxyChannel::new(channel, API_VERSIONS[0], "/x".into(), None);
        let disk_v1 = csi_proxy_api::find(Group::Disk, "v1").unwrap();
        assert!(AnyFilesystemClient::from_channel(disk_v1, ch.clone()).is_none());
        let bogus = ApiVersion {
            group: Group::Filesystem,
            version: "v3",
        };
        assert!(AnyFilesystemClient::from_channel(bogus, ch).is_none());
    }
}
