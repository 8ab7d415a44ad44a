//! A recording fake backend for unit tests of the layers above the host.
//!
//! It keeps an in-memory tree of entries, records every backend call with its
//! arguments, and can be told to fail the next call. Tests of the gRPC layer
//! use it to prove that rejected requests never reached the backend.

use super::FilesystemBackend;
use crate::confined::Located;
use crate::path::CheckedPath;
use crate::{Error, Result};
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

/// One recorded backend call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    Exists(String),
    CreateDirAll(String),
    Remove(String),
    RemoveAll(String),
    RemoveContents(String),
    SymlinkDir { points_to: String, link: String },
    IsLinkToExisting(String),
    Valid(String),
}

impl Call {
    /// Does this call change the host?
    pub fn is_mutation(&self) -> bool {
        !matches!(
            self,
            Call::Exists(_) | Call::IsLinkToExisting(_) | Call::Valid(_)
        )
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

    fn record(&self, call: Call) -> Result<()> {
        self.calls.lock().unwrap().push(call);
        match self.fail_next.lock().unwrap().take() {
            Some(kind) => Err(Error::io(
                "fake",
                "injected",
                io::Error::new(kind, "injected failure"),
            )),
            None => Ok(()),
        }
    }

    fn below(path: &str, candidate: &str) -> bool {
        candidate.len() > path.len()
            && candidate.starts_with(path)
            && matches!(candidate.as_bytes()[path.len()], b'/' | b'\\')
    }
}

fn not_found(path: &str) -> Error {
    Error::NotFound(format!("{path} not found"))
}

impl FilesystemBackend for RecordingFilesystem {
    fn exists(&self, p: &Located) -> Result<bool> {
        let path = p.path();
        self.record(Call::Exists(path.into()))?;
        Ok(self.entries.lock().unwrap().contains_key(path))
    }

    fn mkdir_all(&self, p: &Located) -> Result<()> {
        let path = p.path();
        self.record(Call::CreateDirAll(path.into()))?;
        self.entries
            .lock()
            .unwrap()
            .entry(path.into())
            .or_insert(Entry::Dir);
        Ok(())
    }

    fn remove(&self, p: &Located) -> Result<()> {
        let path = p.path();
        self.record(Call::Remove(path.into()))?;
        let mut entries = self.entries.lock().unwrap();
        if entries.keys().any(|k| Self::below(path, k)) {
            return Err(Error::io(
                "rmdir",
                path,
                io::Error::new(io::ErrorKind::DirectoryNotEmpty, "directory not empty"),
            ));
        }
        entries
            .remove(path)
            .map(|_| ())
            .ok_or_else(|| not_found(path))
    }

    fn remove_all(&self, p: &Located) -> Result<()> {
        let path = p.path();
        self.record(Call::RemoveAll(path.into()))?;
        let mut entries = self.entries.lock().unwrap();
        entries.remove(path);
        entries.retain(|k, _| !Self::below(path, k));
        Ok(())
    }

    fn remove_contents(&self, p: &Located) -> Result<()> {
        let path = p.path();
        self.record(Call::RemoveContents(path.into()))?;
        let mut entries = self.entries.lock().unwrap();
        if entries.get(path) != Some(&Entry::Dir) {
            return Err(not_found(path));
        }
        entries.retain(|k, _| !Self::below(path, k));
        Ok(())
    }

    fn symlink(&self, points_to: &CheckedPath, link: &Located) -> Result<()> {
        let link = link.path();
        self.record(Call::SymlinkDir {
            points_to: points_to.as_str().into(),
            link: link.into(),
        })?;
        let mut entries = self.entries.lock().unwrap();
        if entries.contains_key(link) {
            return Err(Error::AlreadyExists(format!("{link} exists")));
        }
        entries.insert(link.into(), Entry::Link(points_to.as_str().into()));
        Ok(())
    }

    fn is_symlink(&self, p: &Located) -> Result<bool> {
        let path = p.path();
        self.record(Call::IsLinkToExisting(path.into()))?;
        let entries = self.entries.lock().unwrap();
        match entries.get(path) {
            None => Err(not_found(path)),
            Some(Entry::Link(t)) => Ok(entries.contains_key(t)),
            Some(_) => Ok(false),
        }
    }

    fn valid(&self, p: &Located) -> Result<bool> {
        let path = p.path();
        self.record(Call::Valid(path.into()))?;
        let entries = self.entries.lock().unwrap();
        Ok(match entries.get(path) {
            None => false,
            Some(Entry::Link(t)) => entries.contains_key(t),
            Some(_) => true,
        })
    }
}
