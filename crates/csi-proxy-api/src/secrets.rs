//! The request fields that carry secrets, by proto message and field name.
//!
//! Whatever records requests (the audit log) writes these fields as
//! `"<redacted>"`. A test walks every compiled descriptor and fails when a
//! field named like a secret (password, secret, token, credential, key) is
//! missing from [`SECRET_FIELDS`], so a new proto field cannot leak by
//! omission.

/// `(message, field)`: proto names, in any group/version that has them.
pub const SECRET_FIELDS: &[(&str, &str)] = &[
    // SMB: the password of the global mapping's credential.
    ("NewSmbGlobalMappingRequest", "password"),
    // iSCSI: the CHAP secret of a session, and the initiator's mutual CHAP
    // secret.
    ("ConnectTargetRequest", "chap_secret"),
    ("SetMutualChapSecretRequest", "MutualChapSecret"),
];

/// What a redacted secret is written as.
pub const REDACTED: &str = "<redacted>";

/// Whether `field` of `message` (proto names) carries a secret.
#[must_use]
pub fn is_secret(message: &str, field: &str) -> bool {
    SECRET_FIELDS
        .iter()
        .any(|&(m, f)| m == message && f == field)
}

/// Whether a field name looks like it carries a secret.
#[must_use]
pub fn looks_secret(field: &str) -> bool {
    let f = field.to_ascii_lowercase();
    [
        "password",
        "passwd",
        "secret",
        "token",
        "credential",
        "apikey",
        "api_key",
        "privatekey",
        "private_key",
    ]
    .iter()
    .any(|w| f.contains(w))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::API_VERSIONS;
    use prost::Message as _;
    use prost_types::{DescriptorProto, FileDescriptorSet};

    fn walk<'a>(m: &'a DescriptorProto, out: &mut Vec<(&'a str, &'a str)>) {
        for f in &m.field {
            out.push((m.name(), f.name()));
        }
        for n in &m.nested_type {
            walk(n, out);
        }
    }

    #[test]
    fn every_secret_looking_field_is_in_the_table() {
        let mut seen = std::collections::HashSet::new();
        for v in API_VERSIONS {
            let fds = FileDescriptorSet::decode(v.file_descriptor_set()).unwrap();
            let mut fields = Vec::new();
            for file in &fds.file {
                for m in &file.message_type {
                    walk(m, &mut fields);
                }
            }
            for (message, field) in fields {
                if looks_secret(field) {
                    assert!(
                        is_secret(message, field),
                        "{v}: {message}.{field} looks like a secret but is not in SECRET_FIELDS"
                    );
                }
                if is_secret(message, field) {
                    seen.insert((message.to_string(), field.to_string()));
                }
            }
        }
        // No stale entries: each one names a field that exists.
        for &(m, f) in SECRET_FIELDS {
            assert!(
                seen.contains(&(m.to_string(), f.to_string())),
                "{m}.{f} is in SECRET_FIELDS but no proto has it"
            );
        }
    }

    #[test]
    fn names_that_look_secret() {
        for name in [
            "password",
            "chap_secret",
            "MutualChapSecret",
            "authToken",
            "Credentials",
        ] {
            assert!(looks_secret(name), "{name}");
        }
        for name in ["path", "username", "chap_username", "diskNumber", "iqn"] {
            assert!(!looks_secret(name), "{name}");
        }
    }
}
