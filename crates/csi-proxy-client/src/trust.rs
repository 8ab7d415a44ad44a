//! Who may serve a pipe this client talks to (the rule is pure and
//! platform-neutral; the Windows reads are in `pipe_server.rs`).
//!
//! Before a single byte goes out, the client asks Windows which process
//! serves the pipe it opened (`GetNamedPipeServerProcessId`) and reads that
//! process's token: its user must be SYSTEM, or its token an enabled
//! (elevated, not deny-only) member of Administrators, or its user one of
//! the SIDs the client was told to trust ([`ServerTrust::also_sid`], for a
//! proxy that runs as its own service account `NT SERVICE\<name>`). Any
//! other server, or one whose token cannot be read, is refused with an
//! error naming its pid: a process that managed to create an instance of
//! our pipe name would otherwise receive the plugin's requests (SMB
//! passwords, CHAP secrets).
//!
//! A pid is not bound to the pipe (the creator may exit, its handle live on
//! elsewhere, its pid be reused), so the pipe object itself is judged too:
//! its owner, read through the client's own handle, must be SYSTEM,
//! Administrators (unless [`ServerTrust::without_administrators`]) or a
//! trusted SID ([`judge_owner`]); nobody else can set such an owner.

/// `S-1-5-18`, LocalSystem.
pub const SYSTEM: &str = "S-1-5-18";
/// `S-1-5-32-544`, BUILTIN\Administrators.
pub const ADMINISTRATORS: &str = "S-1-5-32-544";
/// `SE_GROUP_ENABLED`.
pub const SE_GROUP_ENABLED: u32 = 0x4;
/// `SE_GROUP_USE_FOR_DENY_ONLY`: the group of a filtered (not elevated)
/// administrator token, and of restricted tokens.
pub const SE_GROUP_USE_FOR_DENY_ONLY: u32 = 0x10;

/// Which pipe servers a [`crate::Client`] accepts (Windows): SYSTEM, an
/// elevated administrator, and the SIDs added here. Default: those two
/// only.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerTrust {
    also: Vec<String>,
    administrators: bool,
}

impl Default for ServerTrust {
    fn default() -> ServerTrust {
        ServerTrust {
            also: Vec::new(),
            administrators: true,
        }
    }
}

impl ServerTrust {
    /// Trust no administrator as such: only SYSTEM and the SIDs added with
    /// [`ServerTrust::also_sid`] (for a proxy known to run as LocalSystem
    /// or as its service account).
    #[must_use]
    pub fn without_administrators(mut self) -> ServerTrust {
        self.administrators = false;
        self
    }

    /// Trust a server process whose token user is `sid` (`S-1-5-80-...`
    /// for a service account `NT SERVICE\<name>`) too.
    #[must_use]
    pub fn also_sid(mut self, sid: impl Into<String>) -> ServerTrust {
        self.also.push(sid.into());
        self
    }

    /// The SIDs trusted besides SYSTEM and Administrators.
    #[must_use]
    pub fn extra_sids(&self) -> &[String] {
        &self.also
    }
}

/// What the client read of the server process's token.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerToken {
    /// The token's user SID (`S-1-5-...`).
    pub user: String,
    /// The token's groups: SID and attributes (`SE_GROUP_*`).
    pub groups: Vec<(String, u32)>,
}

/// Whether the process `pid` with `token` may serve the client's pipe; the
/// error says which process and why not.
pub fn judge(trust: &ServerTrust, pid: u32, token: &ServerToken) -> Result<(), String> {
    let admin = trust.administrators
        && token.groups.iter().any(|(sid, attrs)| {
            sid == ADMINISTRATORS
                && attrs & SE_GROUP_ENABLED != 0
                && attrs & SE_GROUP_USE_FOR_DENY_ONLY == 0
        });
    let trusted_user = token.user == SYSTEM
        || trust
            .also
            .iter()
            .any(|s| s.eq_ignore_ascii_case(&token.user));
    if admin || trusted_user {
        return Ok(());
    }
    Err(format!(
        "the pipe is served by process {pid} (user {}), which is neither SYSTEM, an elevated \
         administrator nor a trusted service SID: refused before sending anything",
        token.user
    ))
}

/// Whether a pipe owned by `owner` may be ours: SYSTEM, Administrators
/// (when trusted) or one of the trusted SIDs; the error names the owner.
pub fn judge_owner(trust: &ServerTrust, owner: &str) -> Result<(), String> {
    let ok = owner == SYSTEM
        || (trust.administrators && owner == ADMINISTRATORS)
        || trust.also.iter().any(|s| s.eq_ignore_ascii_case(owner));
    if ok {
        return Ok(());
    }
    Err(format!(
        "the pipe is owned by {owner}, which is neither SYSTEM, Administrators nor a trusted \
         SID: whoever holds that SID may have created or rewritten it; refused before sending \
         anything"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(user: &str, groups: &[(&str, u32)]) -> ServerToken {
        ServerToken {
            user: user.into(),
            groups: groups.iter().map(|(s, a)| (s.to_string(), *a)).collect(),
        }
    }

    const USER: &str = "S-1-5-21-1-2-3-1001";
    const SERVICE: &str = "S-1-5-80-1-2-3-4-5";

    #[test]
    fn system_and_elevated_administrators_serve() {
        let strict = ServerTrust::default();
        assert_eq!(judge(&strict, 4, &token(SYSTEM, &[])), Ok(()));
        let elevated = token(USER, &[("S-1-1-0", 7), (ADMINISTRATORS, 0xF)]);
        assert_eq!(judge(&strict, 4, &elevated), Ok(()));
    }

    #[test]
    fn a_filtered_or_restricted_administrator_is_refused_by_pid() {
        let strict = ServerTrust::default();
        for attrs in [
            SE_GROUP_USE_FOR_DENY_ONLY,
            0,
            SE_GROUP_ENABLED | SE_GROUP_USE_FOR_DENY_ONLY,
        ] {
            let t = token(USER, &[(ADMINISTRATORS, attrs), ("S-1-5-32-545", 7)]);
            let e = judge(&strict, 4242, &t).unwrap_err();
            assert!(e.contains("process 4242") && e.contains(USER), "{e}");
        }
        // Users, Everyone, Authenticated Users: nothing.
        let plain = token(USER, &[("S-1-5-32-545", 7), ("S-1-5-11", 7)]);
        assert!(judge(&strict, 9, &plain).is_err());
        // A group named like SYSTEM is not the user SYSTEM.
        assert!(judge(&strict, 9, &token(USER, &[(SYSTEM, 7)])).is_err());
    }

    #[test]
    fn a_service_sid_serves_only_when_trusted() {
        let t = token(SERVICE, &[("S-1-5-6", 7)]);
        assert!(judge(&ServerTrust::default(), 1, &t).is_err());
        let trust = ServerTrust::default().also_sid(SERVICE);
        assert_eq!(judge(&trust, 1, &t), Ok(()));
        assert_eq!(trust.extra_sids(), [SERVICE.to_string()]);
        let other = ServerTrust::default().also_sid("S-1-5-80-9");
        assert!(judge(&other, 1, &t).is_err());
    }

    #[test]
    fn without_administrators_only_system_and_the_listed_sids_serve() {
        let trust = ServerTrust::default().without_administrators();
        let elevated = token(USER, &[(ADMINISTRATORS, 0xF)]);
        let e = judge(&trust, 77, &elevated).unwrap_err();
        assert!(e.contains("process 77"), "{e}");
        assert_eq!(judge(&trust, 77, &token(SYSTEM, &[])), Ok(()));
        assert_eq!(judge(&trust.also_sid(USER), 77, &elevated), Ok(()));
    }

    #[test]
    fn the_pipe_owner_must_be_system_administrators_or_trusted() {
        let strict = ServerTrust::default();
        assert_eq!(judge_owner(&strict, SYSTEM), Ok(()));
        assert_eq!(judge_owner(&strict, ADMINISTRATORS), Ok(()));
        for owner in [USER, SERVICE, "S-1-5-21-0-0-0-513", "S-1-5-32-545"] {
            let e = judge_owner(&strict, owner).unwrap_err();
            assert!(e.contains(&format!("owned by {owner},")), "{e}");
        }
        let no_admin = ServerTrust::default().without_administrators();
        assert!(judge_owner(&no_admin, ADMINISTRATORS).is_err());
        assert_eq!(judge_owner(&no_admin, SYSTEM), Ok(()));
        let service = no_admin.also_sid(SERVICE);
        assert_eq!(judge_owner(&service, &SERVICE.to_lowercase()), Ok(()));
        assert!(judge_owner(&service, USER).is_err());
    }
}
