//! Whether a disk may be taken away from its users (SetDiskState offline,
//! DisconnectTarget of the iSCSI target that carries it) on Windows: the
//! rule, platform-neutral; the OS reads in `windows/in_use.rs`. (Linux asks
//! the kernel the same question with an exclusive open:
//! `linux/in_use.rs`.)

use super::VolumeId;
use crate::{Error, Result};

/// One use of a volume that taking its disk away would break.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VolumeUse {
    /// Reachable at this access path: a drive letter or a mount folder,
    /// inside the allowed roots or anywhere else.
    Mounted(String),
    /// Open handles Windows reports (the volume cannot be locked).
    Open,
    /// Whether it is used cannot be told (the reason): not proven unused.
    Unknown(String),
}

/// Refuses `what` (e.g. "take disk 3 offline") while any volume of the
/// disk is in use, naming every use found.
pub fn refuse(disk: u32, uses: &[(VolumeId, VolumeUse)], what: &str) -> Result<()> {
    if uses.is_empty() {
        return Ok(());
    }
    let named: Vec<String> = uses
        .iter()
        .map(|(v, u)| match u {
            VolumeUse::Mounted(p) => format!("volume {v} is mounted at {p}"),
            VolumeUse::Open => format!("volume {v} has open handles"),
            VolumeUse::Unknown(why) => format!("volume {v} may be in use ({why})"),
        })
        .collect();
    Err(Error::FailedPrecondition(format!(
        "cannot {what}: disk {disk} is in use ({}); unmount its volumes and close them first",
        named.join("; ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_use_is_named_and_none_is_no_refusal() {
        let v = VolumeId::parse("\\\\?\\Volume{0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0}\\").unwrap();
        refuse(3, &[], "take disk 3 offline").unwrap();
        let e = refuse(
            3,
            &[
                (
                    v.clone(),
                    VolumeUse::Mounted("c:\\var\\lib\\kubelet\\pods\\a\\mount\\".into()),
                ),
                (v.clone(), VolumeUse::Open),
                (v.clone(), VolumeUse::Unknown("no lock".into())),
            ],
            "take disk 3 offline",
        )
        .unwrap_err();
        let m = e.to_string();
        assert!(matches!(e, Error::FailedPrecondition(_)), "{m}");
        assert!(
            m.contains("cannot take disk 3 offline: disk 3 is in use")
                && m.contains(&format!(
                    "volume {v} is mounted at c:\\var\\lib\\kubelet\\pods\\a\\mount\\"
                ))
                && m.contains(&format!("volume {v} has open handles"))
                && m.contains(&format!("volume {v} may be in use (no lock)")),
            "{m}"
        );
    }
}
