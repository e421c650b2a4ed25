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
    /// Where `rel` lies in the image, when where it lies sets what is cheap to read next
    /// (a tarball's member order): a walk of several subtrees takes them in this order.
    fn position(&self, _rel: &Path) -> Option<u64> {
        None
    }
    /// The number of the file at `rel`, the same for every name of it (a hard link's),
    /// when the tree has such numbers.
    fn ino(&self, _rel: &Path) -> Option<u64> {
        None
    }
}

/// The error of a path that runs through a symlink in an image.
pub fn through_symlink() -> io::Error {
    io::Error::other("a symlink on the way (never followed)")
}

/// A file of the node, opened for reading: on the host (a descriptor), or in an image
/// (read through the image's reader). Read at offsets ([`Bytes`]) or from a position that
/// moves ([`std::io::Read`]).
pub enum NodeFile {
    /// Opened beneath a mounted root.
    Host(super::cache::HostFile),
    /// Served by a [`Tree`].
    Image(ImageFile),
}

/// A file of a [`Tree`]: its bytes, its identity in the tree, and where the next read is.
pub struct ImageFile {
    bytes: Box<dyn Bytes>,
    /// (tree, file) numbers: what a device and an inode are on a host.
    ident: (u64, u64),
    pos: std::cell::Cell<u64>,
}

impl ImageFile {
    /// A file of `bytes`, `ident` its (tree, file) numbers.
    pub fn new(bytes: Box<dyn Bytes>, ident: (u64, u64)) -> ImageFile {
        ImageFile { bytes, ident, pos: std::cell::Cell::new(0) }
    }
}

/// What a [`NodeFile`] is, as `fstat` says it of a host's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    /// A regular file.
    pub is_file: bool,
    /// Its size.
    pub len: u64,
    /// Its device (an image's tree number).
    pub dev: u64,
    /// Its inode (an image's file number).
    pub ino: u64,
    /// 512-byte blocks allocated (an image's: as many as it has bytes, no hole told).
    pub blocks: u64,
    /// Last modification, (seconds, nanoseconds).
    pub mtime: (i64, i64),
    /// Last status change, (seconds, nanoseconds).
    pub ctime: (i64, i64),
}

impl Meta {
    /// What `m` says.
    pub fn of(m: &std::fs::Metadata) -> Meta {
        use std::os::unix::fs::MetadataExt;
        Meta {
            is_file: m.is_file(),
            len: m.len(),
            dev: m.dev(),
            ino: m.ino(),
            blocks: m.blocks(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }
}

impl NodeFile {
    /// `file`, opened beneath a mounted root, read so as to leave the page cache as it
    /// was (see [`super::cache`]).
    pub fn host(file: std::fs::File) -> NodeFile {
        NodeFile::Host(super::cache::HostFile::new(file))
    }

    /// What it is now.
    pub fn meta(&self) -> io::Result<Meta> {
        match self {
            NodeFile::Host(f) => Ok(Meta::of(&f.file().metadata()?)),
            NodeFile::Image(f) => {
                let len = f.bytes.size();
                let (dev, ino) = f.ident;
                let blocks = len.div_ceil(512);
                Ok(Meta { is_file: true, len, dev, ino, blocks, mtime: (0, 0), ctime: (0, 0) })
            }
        }
    }

    /// Whether it lives on a tmpfs (an image's never does).
    pub fn is_tmpfs(&self) -> bool {
        match self {
            NodeFile::Host(f) => super::is_tmpfs(f.file()),
            NodeFile::Image(_) => false,
        }
    }

    /// Where the next data at or after `pos` begins (see [`super::next_data`]).
    pub fn next_data(&self, pos: u64) -> Option<u64> {
        match self {
            NodeFile::Host(f) => super::next_data(f.file(), pos),
            NodeFile::Image(f) => (pos < f.bytes.size()).then_some(pos),
        }
    }

    /// Whether it has a hole before `size` (see [`super::has_hole`]).
    pub fn has_hole(&self, size: u64) -> bool {
        match self {
            NodeFile::Host(f) => super::has_hole(f.file(), size),
            NodeFile::Image(_) => false,
        }
    }

    /// Moves the position of [`std::io::Read`] back to the start.
    pub fn rewind(&self) -> io::Result<()> {
        match self {
            NodeFile::Host(f) => io::Seek::rewind(&mut &*f),
            NodeFile::Image(f) => {
                f.pos.set(0);
                Ok(())
            }
        }
    }

    /// Tells the kernel it will be read from start to end (see
    /// [`super::read_sequentially`]).
    pub fn read_sequentially(&self) {
        if let NodeFile::Host(f) = self {
            super::read_sequentially(f.file());
        }
    }
}

impl Bytes for NodeFile {
    fn size(&self) -> u64 {
        match self {
            NodeFile::Host(f) => f.file().size(),
            NodeFile::Image(f) => f.bytes.size(),
        }
    }

    fn read_at(&self, at: u64, buf: &mut [u8]) -> io::Result<()> {
        match self {
            NodeFile::Host(f) => f.read_at(at, buf),
            NodeFile::Image(f) => f.bytes.read_at(at, buf),
        }?;
        super::rate::charge(buf.len());
        Ok(())
    }
}

impl io::Read for &NodeFile {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.read_unbudgeted(buf)?;
        super::rate::charge(n);
        Ok(n)
    }
}

impl NodeFile {
    /// A read from the position, not charged to the read budget.
    fn read_unbudgeted(&self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            NodeFile::Host(f) => io::Read::read(&mut &*f, buf),
            NodeFile::Image(f) => {
                let pos = f.pos.get();
                let left = f.bytes.size().saturating_sub(pos);
                let n = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                f.bytes.read_at(pos, &mut buf[..n])?;
                f.pos.set(pos + n as u64);
                Ok(n)
            }
        }
    }
}

impl io::Read for NodeFile {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self).read(buf)
    }
}

/// Directories nested deeper than this in an image are not walked (an error entry).
pub const MAX_DEPTH: usize = 256;

/// Entries walked in one walk of an image, at most: a crafted filesystem whose
/// directories link to each other would otherwise be walked without end.
pub const MAX_ENTRIES: u64 = 16 << 20;

/// A [`Tree`] as a node root: the tree, its number (a device's stand-in) and what the
/// scan shows of it.
#[derive(Clone)]
pub struct Image {
    /// The tree.
    pub tree: std::sync::Arc<dyn Tree>,
    /// Its number, unique in the process.
    pub dev: u64,
}

impl std::fmt::Debug for Image {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Image({})", self.dev)
    }
}

impl Image {
    /// `tree` as a node root.
    pub fn new(tree: std::sync::Arc<dyn Tree>) -> Image {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1 << 40);
        Image { tree, dev: NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) }
    }

    /// The inode of `rel`: the tree's number for it (one for every name of a file), or a
    /// hash of its path when the tree has none (two names of one file are then read
    /// twice).
    pub fn ino(&self, rel: &Path) -> u64 {
        use std::hash::{Hash, Hasher};
        self.tree.ino(rel).unwrap_or_else(|| {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            rel.hash(&mut h);
            h.finish()
        })
    }

    /// The regular file at `rel`, opened.
    pub fn open(&self, rel: &Path) -> io::Result<NodeFile> {
        let bytes = self.tree.open(rel)?;
        Ok(NodeFile::Image(ImageFile::new(bytes, (self.dev, self.ino(rel)))))
    }

    /// The entries of the dir at `rel`, in the tree's own order: where their data lies
    /// (a tarball's member order, a filesystem's inode or directory order), which reads an
    /// image front to back rather than to and fro. (A report is sorted whatever the
    /// order.)
    pub fn list(&self, rel: &Path) -> io::Result<Vec<(OsString, Kind)>> {
        self.tree.list(rel)
    }

    /// Walks the tree at `rel` (a dir or a file), depth first in the tree's order, never
    /// through a symlink.
    pub fn walk(&self, rel: &Path) -> ImageWalk {
        let first = match self.tree.lstat(rel) {
            Ok(st) if st.kind == Kind::Dir => None,
            Ok(st) => Some(self.entry(rel.to_path_buf(), st.kind)),
            Err(error) => Some(super::walk::Entry::Error { rel: rel.into(), error }),
        };
        let stack = match first {
            Some(_) => Vec::new(),
            None => vec![(rel.to_path_buf(), None)],
        };
        ImageWalk { image: self.clone(), first, stack, walked: 0, pruned: Default::default() }
    }
}

impl Image {
    /// The walk entry of a non-directory at `rel`.
    fn entry(&self, rel: std::path::PathBuf, kind: Kind) -> super::walk::Entry {
        match kind {
            Kind::File => super::walk::Entry::ImageFile { ino: self.ino(&rel), rel },
            Kind::Symlink => super::walk::Entry::Special("symlink"),
            // A device, FIFO or socket: an image's reader does not say which.
            Kind::Other | Kind::Dir => super::walk::Entry::Special("special file"),
        }
    }
}

/// A directory's entries not yet walked.
type Listed = std::vec::IntoIter<(OsString, Kind)>;

/// A walk of an [`Image`]'s tree ([`Image::walk`]).
pub struct ImageWalk {
    image: Image,
    first: Option<super::walk::Entry>,
    /// Each directory being walked: its path and its entries not yet yielded (listed when
    /// first reached), innermost last.
    stack: Vec<(std::path::PathBuf, Option<Listed>)>,
    /// Entries walked so far.
    walked: u64,
    /// Subtrees left out.
    pruned: super::walk::Pruned,
}

impl ImageWalk {
    /// A walk that yields nothing.
    pub fn empty() -> ImageWalk {
        let image = Image { tree: std::sync::Arc::new(Empty), dev: 0 };
        ImageWalk { image, first: None, stack: Vec::new(), walked: 0, pruned: Default::default() }
    }

    /// This walk, leaving out the subtrees `pruned` holds.
    pub fn leaving_out(self, pruned: super::walk::Pruned) -> ImageWalk {
        ImageWalk { pruned, ..self }
    }
}

/// A tree with nothing in it.
struct Empty;

impl Tree for Empty {
    fn lstat(&self, _: &Path) -> io::Result<Stat> {
        Err(io::ErrorKind::NotFound.into())
    }

    fn list(&self, _: &Path) -> io::Result<Vec<(OsString, Kind)>> {
        Err(io::ErrorKind::NotFound.into())
    }

    fn read_link(&self, _: &Path) -> io::Result<OsString> {
        Err(io::ErrorKind::NotFound.into())
    }

    fn open(&self, _: &Path) -> io::Result<Box<dyn Bytes>> {
        Err(io::ErrorKind::NotFound.into())
    }
}

impl Iterator for ImageWalk {
    type Item = super::walk::Entry;

    fn next(&mut self) -> Option<super::walk::Entry> {
        if let Some(first) = self.first.take() {
            return Some(first);
        }
        loop {
            let depth = self.stack.len();
            let (dir, entries) = self.stack.last_mut()?;
            let entries = match entries {
                Some(e) => e,
                None => match self.image.list(dir) {
                    Ok(listed) => entries.insert(listed.into_iter()),
                    Err(error) => {
                        let rel = dir.clone();
                        self.stack.pop();
                        return Some(super::walk::Entry::Error { rel, error });
                    }
                },
            };
            let Some((name, kind)) = entries.next() else {
                self.stack.pop();
                continue;
            };
            let rel = dir.join(&name);
            if self.pruned.holds(&rel) {
                continue;
            }
            self.walked += 1;
            if self.walked > MAX_ENTRIES {
                self.stack.clear();
                let error = io::Error::other(format!(
                    "more than {MAX_ENTRIES} entries in one walk: the rest is not read"
                ));
                return Some(super::walk::Entry::Error { rel, error });
            }
            if kind != Kind::Dir {
                return Some(self.image.entry(rel, kind));
            }
            if depth >= MAX_DEPTH {
                let error = io::Error::other(format!("nested deeper than {MAX_DEPTH} dirs"));
                return Some(super::walk::Entry::Error { rel, error });
            }
            self.stack.push((rel, None));
        }
    }
}

/// Every entry of `t` below `rel` listed, stat'ed and read (a file's first 64 KiB, a
/// link's target), at most `budget` entries: how the fuzz target and the tests exercise a
/// tree as a scan would.
pub fn read_all(t: &dyn Tree, rel: &Path, budget: &mut usize) {
    let Ok(entries) = t.list(rel) else { return };
    for (name, kind) in entries {
        if *budget == 0 {
            return;
        }
        *budget -= 1;
        let p = rel.join(&name);
        let _ = t.lstat(&p);
        match kind {
            Kind::Dir => read_all(t, &p, budget),
            Kind::File => {
                if let Ok(f) = t.open(&p) {
                    let mut buf = vec![0u8; f.size().min(1 << 16) as usize];
                    let _ = f.read_at(0, &mut buf);
                }
            }
            Kind::Symlink => {
                let _ = t.read_link(&p);
            }
            Kind::Other => {}
        }
    }
}
