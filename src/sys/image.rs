//! A node root read from an image rather than mounted: a tree of files a user-space reader
//! serves (a disk image's ext4 filesystem, a root filesystem tarball). Nothing of it is
//! ever mounted or written: its files are read through the reader, at offsets.

use super::{Bytes, Kind};
use std::ffi::OsString;
use std::io;
use std::path::Path;

/// What an entry of a [`Tree`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    /// Dir, file, symlink or other.
    pub kind: Kind,
    /// Its size in bytes (a symlink's: its target's length).
    pub size: u64,
}

/// A read-only tree of files served from an image. Paths are relative to its root, `""`
/// the root itself; no path is ever resolved through a symlink (one on the way is an
/// error, as beneath a mounted root).
pub trait Tree: Send + Sync {
    /// What is at `rel`, not following a symlink there.
    fn lstat(&self, rel: &Path) -> io::Result<Stat>;
    /// The entries of the directory at `rel`, with what each is.
    fn list(&self, rel: &Path) -> io::Result<Vec<(OsString, Kind)>>;
    /// The target of the symlink at `rel`.
    fn read_link(&self, rel: &Path) -> io::Result<OsString>;
    /// The regular file at `rel`, to read at offsets.
    fn open(&self, rel: &Path) -> io::Result<Box<dyn Bytes>>;
}

/// The error of a path that runs through a symlink in an image.
pub fn through_symlink() -> io::Error {
    io::Error::other("a symlink on the way (never followed)")
}
