//! The pure parts of the Windows SMB backend, tested on every OS: the
//! `Credential` string of `MSFT_SmbGlobalMapping.Create`, the query text,
//! and the reading of a mapping's `Status`.

use super::api::MappingState;
use super::validate::{Credential, ShareRoot};
use crate::wmi_schema::names::smb_global_mapping;
use crate::wmi_schema::queries;
use crate::{Error, Result};
use zeroize::Zeroizing;

/// The class of SMB global mappings.
pub const CLASS: &str = smb_global_mapping::CLASS.name;

/// `MSFT_SmbGlobalMapping.Status` values (`0` = OK).
pub const STATUS_OK: u32 = 0;

/// The `Credential` parameter: the user name with `\` escaped as `\\` and
/// `:` as `\:` (PowerShell's CIM converter does the same), then `:`, then
/// the password as it is. The result is a secret.
pub fn credential_string(c: &Credential) -> Zeroizing<String> {
    let mut s = Zeroizing::new(String::with_capacity(
        c.user().len() * 2 + 1 + c.password().len(),
    ));
    for ch in c.user().chars() {
        match ch {
            '\\' => s.push_str("\\\\"),
            ':' => s.push_str("\\:"),
            ch => s.push(ch),
        }
    }
    s.push(':');
    s.push_str(c.password());
    s
}

/// The query for the mapping of `root` (all properties: removing it needs
/// its `__PATH`, which a projection without every key lacks).
pub fn mapping_query(root: &ShareRoot) -> Result<String> {
    queries::smb_mapping(&root.unc())
        .map_err(|e| Error::InvalidArgument(format!("remote_path: {e}")))
}

/// A mapping's state from its `Status` (NULL counts as unreachable).
pub fn mapping_state(status: Option<u32>) -> MappingState {
    match status {
        Some(STATUS_OK) => MappingState::Ok,
        _ => MappingState::Unreachable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::smb::validate::RemotePath;

    fn cred(user: &str, pw: &str) -> Credential {
        Credential::parse(user, Zeroizing::new(pw.to_string()))
            .unwrap()
            .unwrap()
    }

    #[test]
    fn credential_escaping() {
        assert_eq!(
            credential_string(&cred(r"DOMAIN\user", "pw")).as_str(),
            r"DOMAIN\\user:pw"
        );
        assert_eq!(
            credential_string(&cred("user@dom", "a:b\\c")).as_str(),
            "user@dom:a:b\\c"
        );
        assert_eq!(credential_string(&cred("u", "")).as_str(), "u:");
        assert_eq!(
            credential_string(&cred(r"AZURE\acct", "k3y==+/")).as_str(),
            r"AZURE\\acct:k3y==+/"
        );
    }

    #[test]
    fn query_and_status() {
        let r = RemotePath::parse(r"\\Srv\Share\x").unwrap().root();
        assert_eq!(
            mapping_query(&r).unwrap(),
            r"SELECT * FROM MSFT_SmbGlobalMapping WHERE RemotePath = '\\\\srv\\Share'"
        );
        assert_eq!(mapping_state(Some(0)), MappingState::Ok);
        for s in [Some(1), Some(2), Some(6), None] {
            assert_eq!(mapping_state(s), MappingState::Unreachable);
        }
    }
}
