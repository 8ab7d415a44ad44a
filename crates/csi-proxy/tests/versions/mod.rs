//! The SMB and iSCSI APIs' versions behind one interface per group, for
//! the Unix-socket and the named-pipe tiers: each group's trait
//! (`smb::Smb`, `iscsi::Iscsi`) is implemented once per version by a macro
//! over the generated clients, so a scenario is written once, generic over
//! the client, and [`every_version!`] makes one `#[tokio::test]` of it per
//! version.
#![allow(dead_code)]

pub mod iscsi;
pub mod smb;

/// `every_version!(smb: scenario, ...)` (or `iscsi:`): for each scenario,
/// an `async fn scenario<C: Smb>()` beside the call, a module `scenario`
/// with one test per version (`scenario::v1alpha1`, ...) running
/// `scenario::<that version's client>()`.
macro_rules! every_version {
    (smb: $($scenario:ident),+ $(,)?) => {
        $crate::versions::every_version!(@each [
            v1alpha1: $crate::versions::smb::V1alpha1,
            v1beta1: $crate::versions::smb::V1beta1,
            v1beta2: $crate::versions::smb::V1beta2,
            v1: $crate::versions::smb::V1,
        ] $($scenario),+);
    };
    (iscsi: $($scenario:ident),+ $(,)?) => {
        $crate::versions::every_version!(@each [
            v1alpha1: $crate::versions::iscsi::V1alpha1,
            v1alpha2: $crate::versions::iscsi::V1alpha2,
        ] $($scenario),+);
    };
    (@each $versions:tt $($scenario:ident),+) => {
        $($crate::versions::every_version!(@one $versions $scenario);)+
    };
    (@one [$($test:ident: $client:path),+ $(,)?] $scenario:ident) => {
        mod $scenario {
            $(
                #[tokio::test]
                async fn $test() {
                    super::$scenario::<$client>().await;
                }
            )+
        }
    };
}
pub(crate) use every_version;
