//! Bytes read at an offset: the readers of node databases (kine's SQLite, bbolt, dqlite's
//! raft log) read a file page by page with `pread`, never all of it in memory; and what
//! they say when part of one cannot be read.

use std::fmt;

/// Why a file, or part of it, could not be read by a reader of a database format: the
/// message names the format, pages and offsets, never content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadError(String);

impl ReadError {
    /// An error of `format` (`sqlite`, `bbolt`, …): `<format>: <msg>`.
    pub fn new(format: &str, msg: impl fmt::Display) -> ReadError {
        ReadError(format!("{format}: {msg}"))
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ReadError {}

/// Bytes read at an offset: a file (read with `pread`, never all in memory) or a slice.
pub trait Bytes {
    /// The size in bytes.
    fn size(&self) -> u64;
    /// Fills `buf` from `at`; fails when the bytes are not all there.
    fn read_at(&self, at: u64, buf: &mut [u8]) -> std::io::Result<()>;
}

impl Bytes for &[u8] {
    fn size(&self) -> u64 {
        self.len() as u64
    }

    fn read_at(&self, at: u64, buf: &mut [u8]) -> std::io::Result<()> {
        let from = usize::try_from(at).ok().filter(|&a| a <= self.len());
        let got = from.and_then(|a| self.get(a..a.checked_add(buf.len())?));
        let got = got.ok_or_else(|| std::io::Error::from(std::io::ErrorKind::UnexpectedEof))?;
        buf.copy_from_slice(got);
        Ok(())
    }
}

impl<T: Bytes + ?Sized> Bytes for &T {
    fn size(&self) -> u64 {
        (**self).size()
    }

    fn read_at(&self, at: u64, buf: &mut [u8]) -> std::io::Result<()> {
        (**self).read_at(at, buf)
    }
}

impl<T: Bytes + ?Sized> Bytes for std::sync::Arc<T> {
    fn size(&self) -> u64 {
        (**self).size()
    }

    fn read_at(&self, at: u64, buf: &mut [u8]) -> std::io::Result<()> {
        (**self).read_at(at, buf)
    }
}

impl<T: Bytes + ?Sized> Bytes for Box<T> {
    fn size(&self) -> u64 {
        (**self).size()
    }

    fn read_at(&self, at: u64, buf: &mut [u8]) -> std::io::Result<()> {
        (**self).read_at(at, buf)
    }
}

impl Bytes for Vec<u8> {
    fn size(&self) -> u64 {
        self.len() as u64
    }

    fn read_at(&self, at: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.as_slice().read_at(at, buf)
    }
}

impl Bytes for std::fs::File {
    fn size(&self) -> u64 {
        self.metadata().map_or(0, |m| m.len())
    }

    fn read_at(&self, at: u64, buf: &mut [u8]) -> std::io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(self, buf, at)
    }
}

/// The little-endian `u16` at `at` of `b`, when it is all there.
pub fn le16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at.checked_add(2)?)?.try_into().ok()?))
}

/// The little-endian `u32` at `at` of `b`, when it is all there.
pub fn le32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at.checked_add(4)?)?.try_into().ok()?))
}

/// The little-endian `u64` at `at` of `b`, when it is all there.
pub fn le64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at.checked_add(8)?)?.try_into().ok()?))
}

/// A window of bytes of another [`Bytes`]: `range` of it, read from offset 0 (a database
/// inside a snapshot, a partition of a disk, a member of a tar).
pub struct Window<B> {
    /// What it is a window of.
    pub of: B,
    /// Its bytes there.
    pub range: std::ops::Range<u64>,
}

impl<B: Bytes> Bytes for Window<B> {
    fn size(&self) -> u64 {
        self.range.end.saturating_sub(self.range.start)
    }

    fn read_at(&self, at: u64, buf: &mut [u8]) -> std::io::Result<()> {
        if at.saturating_add(buf.len() as u64) > self.size() {
            return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
        }
        self.of.read_at(self.range.start + at, buf)
    }
}

/// The big-endian `u16` at `at` of `b`, when it is all there.
pub fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at.checked_add(2)?)?.try_into().ok()?))
}

/// The big-endian `u32` at `at` of `b`, when it is all there.
pub fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at.checked_add(4)?)?.try_into().ok()?))
}

/// The big-endian `u64` at `at` of `b`, when it is all there.
pub fn be64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(b.get(at..at.checked_add(8)?)?.try_into().ok()?))
}
