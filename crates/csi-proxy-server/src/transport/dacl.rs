//! The pipe DACL rule (pure, platform-neutral; unit-tested on Linux).
//!
//! Windows turns `-pipe-sddl` into a binary security descriptor once
//! (`transport/windows.rs`); that same descriptor is the one every pipe
//! instance is created with, and its DACL and owner are what
//! [`check_pipe_security`] walks here, byte by byte (one decode: no second
//! SDDL parser that could read the text differently).
//!
//! The rule: only SYSTEM (`S-1-5-18`), Administrators (`S-1-5-32-544`) and
//! the service's own SID (`NT SERVICE\<name>`, [`service_sid`]) may be
//! granted, by an allow ACE of any kind, one of [`REFUSED_FOR_OTHERS`]:
//!
//! - `FILE_CREATE_PIPE_INSTANCE` (0x4, the bit of `FILE_APPEND_DATA`):
//!   whoever holds it can create its own instances of our pipe names and
//!   receive the next clients' requests (SMB passwords, CHAP secrets);
//!   `FILE_GENERIC_WRITE` (`FW`), `FILE_ALL_ACCESS` (`FA`) and the
//!   registry and directory-service aliases that share the bit carry it;
//! - `GENERIC_WRITE` and `GENERIC_ALL`, which the pipe's generic mapping
//!   turns into the above;
//! - `WRITE_DAC` and `WRITE_OWNER`, with which a grantee rewrites the DACL
//!   (and so grants itself the above);
//! - `MAXIMUM_ALLOWED`, which is no right of its own in an ACE and is
//!   refused so nothing unusual slips through.
//!
//! The descriptor's owner gets `WRITE_DAC` implicitly, so an owner outside
//! the three is refused too. `FILE_WRITE_DATA` (0x2) stays allowed: a
//! client needs it to send its requests over a duplex pipe, and it creates
//! nothing (a client admitted this way must open the pipe with
//! `GENERIC_READ | FILE_WRITE_DATA`, not `GENERIC_WRITE`, which asks for
//! 0x4 too). Deny ACEs and audit ACEs are not grants; an ACE type this
//! walk does not know is refused (it cannot be judged).

use sha1::{Digest, Sha1};
use std::fmt;

/// `S-1-5-18`, LocalSystem.
pub const SYSTEM: &str = "S-1-5-18";
/// `S-1-5-32-544`, BUILTIN\Administrators.
pub const ADMINISTRATORS: &str = "S-1-5-32-544";

/// `FILE_CREATE_PIPE_INSTANCE` (= `FILE_APPEND_DATA`).
pub const FILE_CREATE_PIPE_INSTANCE: u32 = 0x0000_0004;
/// `FILE_WRITE_DATA`: what a client writes its requests with (allowed).
pub const FILE_WRITE_DATA: u32 = 0x0000_0002;
pub const WRITE_DAC: u32 = 0x0004_0000;
pub const WRITE_OWNER: u32 = 0x0008_0000;
pub const MAXIMUM_ALLOWED: u32 = 0x0200_0000;
pub const GENERIC_ALL: u32 = 0x1000_0000;
pub const GENERIC_WRITE: u32 = 0x4000_0000;

/// The access bits only SYSTEM, Administrators and the service SID may be
/// granted on a pipe.
pub const REFUSED_FOR_OTHERS: u32 = FILE_CREATE_PIPE_INSTANCE
    | WRITE_DAC
    | WRITE_OWNER
    | MAXIMUM_ALLOWED
    | GENERIC_ALL
    | GENERIC_WRITE;

const BIT_NAMES: [(u32, &str); 6] = [
    (FILE_CREATE_PIPE_INSTANCE, "FILE_CREATE_PIPE_INSTANCE"),
    (WRITE_DAC, "WRITE_DAC"),
    (WRITE_OWNER, "WRITE_OWNER"),
    (MAXIMUM_ALLOWED, "MAXIMUM_ALLOWED"),
    (GENERIC_ALL, "GENERIC_ALL"),
    (GENERIC_WRITE, "GENERIC_WRITE"),
];

/// A SID in its binary form, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sid {
    revision: u8,
    authority: u64,
    subs: Vec<u32>,
}

impl Sid {
    /// Decodes a binary SID at the start of `b`; returns it and its length.
    pub fn decode(b: &[u8]) -> Result<(Sid, usize), String> {
        if b.len() < 8 {
            return Err("SID shorter than its 8-byte header".into());
        }
        let (revision, count) = (b[0], usize::from(b[1]));
        if revision != 1 || count > 15 {
            return Err(format!(
                "SID revision {revision} with {count} sub-authorities"
            ));
        }
        let len = 8 + 4 * count;
        if b.len() < len {
            return Err(format!("SID of {len} bytes cut at {}", b.len()));
        }
        let authority = b[2..8].iter().fold(0u64, |a, &x| (a << 8) | u64::from(x));
        let subs = b[8..len]
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        Ok((
            Sid {
                revision,
                authority,
                subs,
            },
            len,
        ))
    }
}

impl fmt::Display for Sid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "S-{}-", self.revision)?;
        if self.authority >> 32 == 0 {
            write!(f, "{}", self.authority)?;
        } else {
            write!(f, "0x{:012X}", self.authority)?;
        }
        for s in &self.subs {
            write!(f, "-{s}")?;
        }
        Ok(())
    }
}

/// The SID of the Windows service `name` (`NT SERVICE\<name>`): `S-1-5-80-`
/// and the five little-endian words of the SHA-1 of the upper-cased name in
/// UTF-16LE (what `sc showsid` prints).
pub fn service_sid(name: &str) -> String {
    let mut h = Sha1::new();
    for u in name.to_uppercase().encode_utf16() {
        h.update(u.to_le_bytes());
    }
    let d = h.finalize();
    let mut s = String::from("S-1-5-80");
    for c in d.chunks_exact(4) {
        s.push_str(&format!(
            "-{}",
            u32::from_le_bytes([c[0], c[1], c[2], c[3]])
        ));
    }
    s
}

/// The SDDL alias of a few well-known SIDs, for error messages.
fn alias(sid: &str) -> Option<&'static str> {
    Some(match sid {
        "S-1-1-0" => "WD, Everyone",
        "S-1-5-11" => "AU, Authenticated Users",
        "S-1-5-32-545" => "BU, Users",
        "S-1-5-4" => "IU, Interactive",
        "S-1-5-6" => "SU, Service",
        "S-1-5-7" => "AN, Anonymous",
        "S-1-5-19" => "LS, Local Service",
        "S-1-5-20" => "NS, Network Service",
        "S-1-3-0" => "CO, Creator Owner",
        "S-1-3-4" => "OW, Owner Rights",
        "S-1-15-2-1" => "AC, All Application Packages",
        _ => return None,
    })
}

/// One ACE as the walk sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ace {
    pub index: usize,
    pub kind: u8,
    pub mask: u32,
    pub sid: String,
}

impl Ace {
    fn is_grant(&self) -> bool {
        // ACCESS_ALLOWED, ACCESS_ALLOWED_OBJECT, ACCESS_ALLOWED_CALLBACK,
        // ACCESS_ALLOWED_CALLBACK_OBJECT.
        matches!(self.kind, 0x0 | 0x5 | 0x9 | 0xB)
    }
}

impl fmt::Display for Ace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            0x0 => "A",
            0x5 => "OA",
            0x9 => "XA",
            0xB => "ZA",
            _ => "?",
        };
        write!(
            f,
            "ACE #{} ({kind};;0x{:x};;;{}",
            self.index, self.mask, self.sid
        )?;
        if let Some(a) = alias(&self.sid) {
            write!(f, " = {a}")?;
        }
        write!(f, ")")
    }
}

/// Walks a binary ACL (its header's size bounds the walk).
pub fn aces(acl: &[u8]) -> Result<Vec<Ace>, String> {
    if acl.len() < 8 {
        return Err("ACL shorter than its 8-byte header".into());
    }
    let size = usize::from(u16::from_le_bytes([acl[2], acl[3]]));
    let count = usize::from(u16::from_le_bytes([acl[4], acl[5]]));
    if !(2..=4).contains(&acl[0]) || size < 8 || size > acl.len() {
        return Err(format!(
            "ACL revision {} of size {size} in {} bytes",
            acl[0],
            acl.len()
        ));
    }
    let acl = &acl[..size];
    let mut at = 8;
    let mut out = Vec::with_capacity(count);
    for index in 0..count {
        let head = acl
            .get(at..at + 4)
            .ok_or_else(|| format!("ACE #{index} past the end of the ACL"))?;
        let (kind, ace_size) = (head[0], usize::from(u16::from_le_bytes([head[2], head[3]])));
        let ace = acl
            .get(at..at + ace_size)
            .filter(|_| ace_size >= 8)
            .ok_or_else(|| format!("ACE #{index} of {ace_size} bytes does not fit the ACL"))?;
        let mask = u32::from_le_bytes([ace[4], ace[5], ace[6], ace[7]]);
        let sid_at = match kind {
            // mask + SID (allow, deny, audit, alarm, their callback forms,
            // mandatory label, resource attribute, scoped policy, trust
            // label, access filter).
            0x0..=0x3 | 0x9 | 0xA | 0xD | 0x11..=0x15 => 8,
            // Object ACEs: mask, flags, then a GUID per flag bit.
            0x5..=0x8 | 0xB | 0xC | 0xF | 0x10 => {
                let flags = ace
                    .get(8..12)
                    .map(|f| u32::from_le_bytes([f[0], f[1], f[2], f[3]]))
                    .ok_or_else(|| format!("object ACE #{index} cut short"))?;
                12 + 16 * ((flags & 1) + ((flags >> 1) & 1)) as usize
            }
            _ => {
                return Err(format!(
                    "ACE #{index} has type 0x{kind:x}, which is not judged"
                ))
            }
        };
        let (sid, _) = Sid::decode(ace.get(sid_at..).unwrap_or_default())
            .map_err(|e| format!("ACE #{index}: {e}"))?;
        out.push(Ace {
            index,
            kind,
            mask,
            sid: sid.to_string(),
        });
        at += ace_size;
    }
    Ok(out)
}

/// Whether `sid` may hold the refused bits.
fn trusted(sid: &str, service: Option<&str>) -> bool {
    sid == SYSTEM || sid == ADMINISTRATORS || service.is_some_and(|s| s.eq_ignore_ascii_case(sid))
}

/// Checks a pipe's owner (binary SID, if the descriptor has one) and DACL
/// (binary ACL) against the rule of this module. `service` is the
/// service's own SID (`S-1-5-80-...`), trusted like SYSTEM.
pub fn check_pipe_security(
    owner: Option<&[u8]>,
    dacl: &[u8],
    service: Option<&str>,
) -> Result<(), String> {
    if let Some(owner) = owner {
        let (sid, _) = Sid::decode(owner).map_err(|e| format!("owner: {e}"))?;
        let sid = sid.to_string();
        if !trusted(&sid, service) {
            return Err(format!(
                "the owner {sid} of the pipe security descriptor would hold WRITE_DAC: only \
                 SYSTEM ({SYSTEM}), Administrators ({ADMINISTRATORS}) or the service's own SID may \
                 own the pipes"
            ));
        }
    }
    for ace in aces(dacl)? {
        let bad = ace.mask & REFUSED_FOR_OTHERS;
        if ace.is_grant() && bad != 0 && !trusted(&ace.sid, service) {
            let names: Vec<&str> = BIT_NAMES
                .iter()
                .filter(|(b, _)| bad & b != 0)
                .map(|(_, n)| *n)
                .collect();
            return Err(format!(
                "{ace} grants {}: a grantee with it could serve our pipe names itself or \
                 rewrite the DACL; only SYSTEM ({SYSTEM}), Administrators ({ADMINISTRATORS}) or \
                 the service's own SID may hold it (a client needs GENERIC_READ and \
                 FILE_WRITE_DATA only, e.g. 0x12019b)",
                names.join("|")
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// The binary form of `S-1-<authority>-<subs...>`.
    pub fn sid_bytes(text: &str) -> Vec<u8> {
        let parts: Vec<u64> = text[2..].split('-').map(|p| p.parse().unwrap()).collect();
        let mut b = vec![parts[0] as u8, (parts.len() - 2) as u8];
        b.extend_from_slice(&parts[1].to_be_bytes()[2..]);
        for s in &parts[2..] {
            b.extend_from_slice(&(*s as u32).to_le_bytes());
        }
        b
    }

    /// A revision-2 ACL of plain ACEs `(type, flags, mask, sid)`.
    pub fn acl(aces: &[(u8, u8, u32, &str)]) -> Vec<u8> {
        let mut body = Vec::new();
        for (kind, flags, mask, sid) in aces {
            let sid = sid_bytes(sid);
            let size = (8 + sid.len()) as u16;
            body.extend_from_slice(&[*kind, *flags]);
            body.extend_from_slice(&size.to_le_bytes());
            body.extend_from_slice(&mask.to_le_bytes());
            body.extend_from_slice(&sid);
        }
        let mut a = vec![2, 0];
        a.extend_from_slice(&((8 + body.len()) as u16).to_le_bytes());
        a.extend_from_slice(&(aces.len() as u16).to_le_bytes());
        a.extend_from_slice(&[0, 0]);
        a.extend_from_slice(&body);
        a
    }

    const AU: &str = "S-1-5-11";
    const GA: u32 = GENERIC_ALL;
    const GR: u32 = 0x8000_0000;
    const GW: u32 = GENERIC_WRITE;
    const FW: u32 = 0x0012_0116;
    const FR: u32 = 0x0012_0089;
    const FA: u32 = 0x001F_01FF;

    #[test]
    fn the_default_dacl_passes() {
        // D:P(A;;GA;;;BA)(A;;GA;;;SY)
        let d = acl(&[(0, 0, GA, ADMINISTRATORS), (0, 0, GA, SYSTEM)]);
        assert_eq!(check_pipe_security(None, &d, None), Ok(()));
        let owner = sid_bytes(ADMINISTRATORS);
        assert_eq!(check_pipe_security(Some(&owner), &d, None), Ok(()));
    }

    #[test]
    fn generic_read_write_to_authenticated_users_is_refused() {
        // D:P(A;;GA;;;SY)(A;;GA;;;BA)(A;;GRGW;;;AU): the third ACE.
        let d = acl(&[
            (0, 0, GA, SYSTEM),
            (0, 0, GA, ADMINISTRATORS),
            (0, 0, GR | GW, AU),
        ]);
        let e = check_pipe_security(None, &d, None).unwrap_err();
        assert!(
            e.starts_with(
                "ACE #2 (A;;0xc0000000;;;S-1-5-11 = AU, Authenticated Users) grants GENERIC_WRITE"
            ),
            "{e}"
        );
    }

    #[test]
    fn every_refused_bit_is_refused_for_others_and_named() {
        for (mask, name) in [
            (FILE_CREATE_PIPE_INSTANCE, "FILE_CREATE_PIPE_INSTANCE"),
            (FW, "FILE_CREATE_PIPE_INSTANCE"),
            (FA, "WRITE_DAC|WRITE_OWNER"),
            (
                0x000F_003F,
                "FILE_CREATE_PIPE_INSTANCE|WRITE_DAC|WRITE_OWNER",
            ), // KA
            (0x0002_0006, "FILE_CREATE_PIPE_INSTANCE"), // KW
            (WRITE_DAC, "WRITE_DAC"),
            (WRITE_OWNER, "WRITE_OWNER"),
            (GA, "GENERIC_ALL"),
            (GW, "GENERIC_WRITE"),
            (MAXIMUM_ALLOWED, "MAXIMUM_ALLOWED"),
        ] {
            for sid in [
                AU,
                "S-1-1-0",
                "S-1-5-32-545",
                "S-1-5-21-1-2-3-1001",
                "S-1-5-80-1-2-3-4-5",
            ] {
                for kind in [0u8, 9] {
                    let d = acl(&[(0, 0, GA, SYSTEM), (kind, 0, mask, sid)]);
                    let e = check_pipe_security(None, &d, None).unwrap_err();
                    assert!(
                        e.contains(sid) && e.contains(name) && e.contains("ACE #1"),
                        "{mask:x} {sid}: {e}"
                    );
                }
                // Inherit-only or not: refused alike (flag 0x08).
                let d = acl(&[(0, 0x08, mask, sid)]);
                assert!(check_pipe_security(None, &d, None).is_err());
            }
        }
    }

    #[test]
    fn a_client_may_read_and_write_data() {
        // FR | FILE_WRITE_DATA | FILE_WRITE_EA | FILE_WRITE_ATTRIBUTES.
        let client = FR | FILE_WRITE_DATA | 0x10 | 0x100;
        assert_eq!(client, 0x0012_019b);
        let d = acl(&[
            (0, 0, GA, SYSTEM),
            (0, 0, client, AU),
            (0, 0, GR, "S-1-1-0"),
        ]);
        assert_eq!(check_pipe_security(None, &d, None), Ok(()));
        // A deny ACE or an audit ACE grants nothing.
        let d = acl(&[(1, 0, GA, "S-1-1-0"), (2, 0, GA, AU), (0, 0, GA, SYSTEM)]);
        assert_eq!(check_pipe_security(None, &d, None), Ok(()));
    }

    #[test]
    fn the_service_sid_is_trusted_only_when_it_is_ours() {
        let ours = service_sid("csiproxy");
        let d = acl(&[(0, 0, GA, &ours)]);
        assert_eq!(check_pipe_security(None, &d, Some(&ours)), Ok(()));
        let other = service_sid("other");
        assert!(check_pipe_security(None, &d, Some(&other)).is_err());
        assert!(check_pipe_security(None, &d, None).is_err());
        let owner = sid_bytes(&ours);
        assert_eq!(
            check_pipe_security(Some(&owner), &acl(&[]), Some(&ours)),
            Ok(())
        );
    }

    #[test]
    fn an_owner_outside_the_three_is_refused() {
        let d = acl(&[(0, 0, GA, SYSTEM)]);
        for owner in [AU, "S-1-5-21-1-2-3-1001", "S-1-3-4"] {
            let e = check_pipe_security(Some(&sid_bytes(owner)), &d, None).unwrap_err();
            assert!(e.contains(owner) && e.contains("WRITE_DAC"), "{e}");
        }
        assert_eq!(
            check_pipe_security(Some(&sid_bytes(SYSTEM)), &d, None),
            Ok(())
        );
    }

    #[test]
    fn service_sids_match_what_windows_computes() {
        // `sc showsid TrustedInstaller`.
        assert_eq!(
            service_sid("TrustedInstaller"),
            "S-1-5-80-956008885-3418522649-1831038044-1853292631-2271478464"
        );
        assert_eq!(
            service_sid("trustedinstaller"),
            service_sid("TrustedInstaller")
        );
        // The default -service-name.
        assert_eq!(
            service_sid("csiproxy"),
            "S-1-5-80-2268328347-2954668164-3454834723-110198566-2814594838"
        );
    }

    #[test]
    fn object_aces_are_walked_past_their_guids() {
        // ACCESS_ALLOWED_OBJECT with both GUIDs present, then a plain ACE.
        let sid = sid_bytes(AU);
        let mut ace = vec![5, 0];
        ace.extend_from_slice(&((12 + 32 + sid.len()) as u16).to_le_bytes());
        ace.extend_from_slice(&GW.to_le_bytes());
        ace.extend_from_slice(&3u32.to_le_bytes());
        ace.extend_from_slice(&[0xAB; 32]);
        ace.extend_from_slice(&sid);
        let tail = acl(&[(0, 0, GA, SYSTEM)]);
        let mut d = vec![4, 0];
        d.extend_from_slice(&((8 + ace.len() + tail.len() - 8) as u16).to_le_bytes());
        d.extend_from_slice(&2u16.to_le_bytes());
        d.extend_from_slice(&[0, 0]);
        d.extend_from_slice(&ace);
        d.extend_from_slice(&tail[8..]);
        let all = aces(&d).unwrap();
        assert_eq!(all[0].sid, AU);
        assert_eq!(all[1].sid, SYSTEM);
        let e = check_pipe_security(None, &d, None).unwrap_err();
        assert!(e.starts_with("ACE #0 (OA;;0x40000000;;;S-1-5-11"), "{e}");
    }

    #[test]
    fn malformed_acls_are_errors_not_passes() {
        let good = acl(&[(0, 0, GA, SYSTEM), (0, 0, GR, AU)]);
        for cut in 0..good.len() {
            let mut short = good[..cut].to_vec();
            if short.len() >= 4 {
                // The header still claims the whole size.
                short[2..4].copy_from_slice(&(cut as u16).to_le_bytes());
            }
            assert!(
                check_pipe_security(None, &short, None).is_err(),
                "cut at {cut}"
            );
        }
        // An unknown ACE type cannot be judged.
        let d = acl(&[(0x4, 0, GR, AU)]);
        assert!(check_pipe_security(None, &d, None)
            .unwrap_err()
            .contains("type 0x4"));
        // More ACEs claimed than present.
        let mut d = acl(&[(0, 0, GA, SYSTEM)]);
        d[4] = 2;
        assert!(check_pipe_security(None, &d, None).is_err());
    }

    #[test]
    fn sids_print_as_windows_prints_them() {
        for s in [
            SYSTEM,
            ADMINISTRATORS,
            "S-1-5-21-3623811015-3361044348-30300820-1013",
            "S-1-1-0",
        ] {
            assert_eq!(Sid::decode(&sid_bytes(s)).unwrap().0.to_string(), s);
        }
        let mut big = sid_bytes("S-1-0-1");
        big[2] = 1;
        assert_eq!(
            Sid::decode(&big).unwrap().0.to_string(),
            "S-1-0x010000000000-1"
        );
    }
}
