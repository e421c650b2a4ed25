//! Bytes read at an offset: the datastores' readers (kine's SQLite, etcd's bbolt) read
//! a file page by page with `pread`, never all of it in memory.

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

impl Bytes for std::fs::File {
    fn size(&self) -> u64 {
        self.metadata().map_or(0, |m| m.len())
    }

    fn read_at(&self, at: u64, buf: &mut [u8]) -> std::io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(self, buf, at)
    }
}
