//! What the Volume lookups find at a target path: the links followed to
//! it, and the backend's typed answer for GetVolumeIDFromTargetPath: a
//! volume, or a *proven* reason that nothing is mounted there
//! ([`NotMounted`]).
//!
//! Only a [`NotMounted`] answer carries the phrases drivers match
//! ([`crate::compat`]; aws-ebs reads them as "not mounted" and goes on).
//! A backend returns one only for what it observed itself on handles
//! reached beneath the root: nothing at the path, a directory nothing is
//! mounted on (Linux: not a mount root, and no mount listed there in the
//! mount table; Windows: not a volume mount point), a regular file (Linux:
//! no mount listed on it either). Everything else — a link met after the
//! hops were followed, a mount whose volume cannot be read, a mount that
//! is not a disk volume's (tmpfs, a whole-disk filesystem), a failure — is
//! an error of its own, without the phrases, and goes through
//! [`crate::compat::neutralise`].

use crate::compat;
use crate::confined::{Confined, Kind, Located};
use crate::storage::VolumeId;
use crate::{Error, Result};

/// Most links followed from a target path (a published path linked to a
/// staging directory is one). Upstream follows without a bound.
pub const MAX_LINK_HOPS: usize = 8;

/// What is at a target path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum At {
    /// This volume is mounted there.
    Volume(VolumeId),
    /// Nothing is mounted there, for this proven reason.
    NotMounted(NotMounted),
}

/// Why nothing is mounted at a path, as a backend proved it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotMounted {
    /// Nothing exists at the path; its parent directory does.
    Missing,
    /// Nothing exists at the path, nor at its parent (a further ancestor
    /// is missing, or is not a directory).
    MissingParent,
    /// A directory with nothing mounted on it.
    PlainDirectory,
    /// A regular file with nothing mounted on it.
    File,
}

impl NotMounted {
    /// The condition of the compatibility table it is.
    pub fn condition(self) -> compat::Condition {
        match self {
            NotMounted::Missing | NotMounted::MissingParent => compat::Condition::TargetMissing,
            NotMounted::PlainDirectory | NotMounted::File => compat::Condition::NotAMountPoint,
        }
    }

    /// Our wording for it, about `shown` (a path for messages).
    fn describe(self, shown: &str) -> String {
        match self {
            NotMounted::Missing => format!("path {shown} does not exist"),
            NotMounted::MissingParent => {
                format!("path {shown} does not exist, nor does its parent directory")
            }
            NotMounted::PlainDirectory => {
                format!("{shown} is not a mount point: no volume is mounted on that directory")
            }
            NotMounted::File => format!("{shown} is a file, not a volume mount point"),
        }
    }
}

/// A target path with its final links followed.
#[derive(Clone, Debug)]
pub struct Followed {
    /// The path the client sent.
    pub from: Located,
    /// What it leads to (`from` itself when it is no link).
    pub to: Located,
    /// Links followed.
    pub hops: usize,
}

/// `path` checked and located, its final link followed hop by hop (at
/// most [`MAX_LINK_HOPS`]), each hop only to a destination inside the
/// roots by the lexical rules ([`Confined::link_destination`]): a link
/// leading elsewhere is `PermissionDenied`, a longer chain
/// `FailedPrecondition`. What the chain ends on is what a backend then
/// opens (without following links: a link swapped in meanwhile is an
/// error there, not a hop).
pub fn follow(fs: &Confined, path: &str) -> Result<Followed> {
    let from = fs.locate(path)?;
    let mut to = from.clone();
    for hops in 0.. {
        if fs.kind(&to)? != Some(Kind::Link) {
            return Ok(Followed { from, to, hops });
        }
        if hops == MAX_LINK_HOPS {
            return Err(Error::FailedPrecondition(format!(
                "target path {} leads through more than {MAX_LINK_HOPS} links",
                from.shown()
            )));
        }
        to = fs.link_destination(&to)?.ok_or_else(|| {
            Error::PermissionDenied(format!(
                "target path {} is a link that does not lead inside the allowed roots{}",
                to.shown(),
                via(&from, hops)
            ))
        })?;
    }
    unreachable!("the loop returns")
}

/// `" (reached from ... through N links)"`, or nothing without links.
fn via(from: &Located, hops: usize) -> String {
    match hops {
        0 => String::new(),
        1 => format!(" (reached from {} through a link)", from.shown()),
        n => format!(" (reached from {} through {n} links)", from.shown()),
    }
}

/// For a backend whose open of `target` as a directory failed with `err`
/// (`NotFound` or `FailedPrecondition`): what a fresh look beneath the
/// root proves. Nothing there: [`NotMounted::Missing`] if the parent is a
/// directory, else [`NotMounted::MissingParent`]; a regular file:
/// [`NotMounted::File`] (on Linux the backend must still check that
/// nothing is mounted on it). Anything else (a link, a directory after
/// all, a device) proves nothing: `err`.
pub fn absent(fs: &Confined, target: &Located, err: Error) -> Result<At> {
    let reason = match fs.kind(target)? {
        None => match target.parent() {
            None => NotMounted::Missing,
            Some(parent) => match fs.kind(&parent)? {
                Some(Kind::Dir | Kind::MountPoint) => NotMounted::Missing,
                _ => NotMounted::MissingParent,
            },
        },
        Some(Kind::File) => NotMounted::File,
        Some(_) => return Err(err),
    };
    Ok(At::NotMounted(reason))
}

/// The answer of GetVolumeIDFromTargetPath for a proven reason: NotFound,
/// our wording, then the phrases drivers match for its condition.
pub fn not_mounted(reason: NotMounted, followed: &Followed) -> Error {
    let ours = format!(
        "{}{}",
        reason.describe(&followed.to.shown()),
        via(&followed.from, followed.hops)
    );
    Error::NotFound(compat::message(
        reason.condition(),
        &ours,
        followed.to.path(),
    ))
}

#[cfg(all(test, unix))]
mod tests;
