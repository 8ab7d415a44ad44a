//! A recording fake backend for unit tests of the layers above the host.
//!
//! It keeps an in-memory tree of entries, records every backend call with its
//! arguments, and can be told to fail the next call. Tests of the gRPC layer
//! use it to prove that rejected requests never reached the backend.

use super::FilesystemBackend;
use crate::path::{Link, LinkReader};
use std::collections::BTreeMap;
use std::io;
use std::sync::Mutex;

/// What the fake holds at a path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    Dir,
    File,
    Link(String),
}

/// One recorded backend call (read_link lookups done by path resolution are
/// not recorded: they are reads the policy needs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    Exists(String),
    CreateDirAll(String),
    Remove(String),
    RemoveAll(String),
    RemoveContents(String),
    SymlinkDir { points_to: String, link: String },
    IsLinkToExisting(String),
}

impl Call {
    /// Does this call change the host?
    pub fn is_mutation(&self) -> bool {
        !matches!(self, Call::Exists(_) | Call::IsLinkToExisting(_))
    }
}

/// The recording fake. Paths are plain strings, separator `/` or `\`
/// according to what the test puts in.
#[derive(Debug, Default)]
pub struct RecordingFilesystem {
    entries: Mutex<BTreeMap<String, Entry>>,
    calls: Mutex<Vec<Call>>,
    fail_next: Mutex<Option<io::ErrorKind>>,
}

impl RecordingFilesystem {
    pub fn new() -> Self {
        Self::default()
    }

    /// Put an entry into the fake tree.
    pub fn insert(&self, path: &str, entry: Entry) {
        self.entries.lock().unwrap().insert(path.to_string(), entry);
    }

    pub fn entry(&self, path: &str) -> Option<Entry> {
        self.entries.lock().unwrap().get(path).cloned()
    }

    /// Every backend call so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    /// Make the next backend call fail with `kind`.
    pub fn fail_next(&self, kind: io::ErrorKind) {
        *self.fail_next.lock().unwrap() = Some(kind);
    }

    fn record(&self, call: Call) -> io::Result<()> {
        self.calls.lock().unwrap().push(call);
        match self.fail_next.lock().unwrap().take() {
            Some(kind) => Err(io::Error::new(kind, "injected failure")),
            None => Ok(()),
        }
    }

    fn below(path: &str, candidate: &str) -> bool {
        candidate.len() > path.len()
            && candidate.starts_with(path)
            && matches!(candidate.as_bytes()[path.len()], b'/' | b'\\')
    }
}

fn not_found(path: &str) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("{path} not found"))
}

impl LinkReader for RecordingFilesystem {
    fn read_link(&self, path: &str) -> io::Result<Link> {
        Ok(match self.entries.lock().unwrap().get(path) {
            None => Link::NotFound,
            Some(Entry::Link(t)) => Link::Symlink(t.clone()),
            Some(_) => Link::NotALink,
        })
    }
}

impl FilesystemBackend for RecordingFilesystem {
    fn exists(&self, path: &str) -> io::Result<bool> {
        self.record(Call::Exists(path.into()))?;
        Ok(self.entries.lock().unwrap().contains_key(path))
    }

    fn create_dir_all(&self, path: &str) -> io::Result<()> {
        self.record(Call::CreateDirAll(path.into()))?;
        self.entries
            .lock()
            .unwrap()
            .entry(path.into())
            .or_insert(Entry::Dir);
        Ok(())
    }

    fn remove(&self, path: &str) -> io::Result<()> {
        self.record(Call::Remove(path.into()))?;
        let mut entries = self.entries.lock().unwrap();
        if entries.keys().any(|k| Self::below(path, k)) {
            return Err(io::Error::new(
                io::ErrorKind::DirectoryNotEmpty,
                "directory not empty",
            ));
        }
        entries
            .remove(path)
            .map(|_| ())
            .ok_or_else(|| not_found(path))
    }

    fn remove_all(&self, path: &str) -> io::Result<()> {
        self.record(Call::RemoveAll(path.into()))?;
        let mut entries = self.entries.lock().unwrap();
        let existed = entries.remove(path).is_some();
        entries.retain(|k, _| !Self::below(path, k));
        if existed {
            Ok(())
        } else {
            Err(not_found(path))
        }
    }

    fn remove_contents(&self, path: &str) -> io::Result<()> {
        self.record(Call::RemoveContents(path.into()))?;
        let mut entries = self.entries.lock().unwrap();
        if entries.get(path) != Some(&Entry::Dir) {
            return Err(not_found(path));
        }
        entries.retain(|k, _| !Self::below(path, k));
        Ok(())
    }

    fn symlink_dir(&self, points_to: &str, link: &str) -> io::Result<()> {
        self.record(Call::SymlinkDir {
            points_to: points_to.into(),
            link: link.into(),
        })?;
        let mut entries = self.entries.lock().unwrap();
        if entries.contains_key(link) {
            return Err(io::Error::new(io::ErrorKind::AlreadyExists, "exists"));
        }
        entries.insert(link.into(), Entry::Link(points_to.into()));
        Ok(())
    }

    fn is_link_to_existing(&self, path: &str) -> io::Result<bool> {
        self.record(Call::IsLinkToExisting(path.into()))?;
        let entries = self.entries.lock().unwrap();
        Ok(match entries.get(path) {
            Some(Entry::Link(t)) => entries.contains_key(t),
            _ => false,
        })
    }
}
