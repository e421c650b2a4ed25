//! Walking a tree by directory descriptors: each directory is opened relative to its
//! parent's descriptor and each file is opened relative to its own directory's, so the
//! kernel resolves one name per open instead of the whole path from the root. On a node,
//! where files sit 10 to 20 directories deep (`var/lib/kubelet/pods/<uid>/volumes/…`),
//! whole-path lookups were the largest share of the kernel's work after copying the bytes.
//!
//! Every open is `openat2(2)` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` and
//! `O_NOFOLLOW`, relative to a descriptor that was itself opened that way from the root's:
//! a symlink anywhere, even one swapped in for a directory after it was listed, makes the
//! open fail rather than lead out of the root.
//!
//! Mount points are crossed on the way to the walk's start (kubelet's dir is often a
//! filesystem of its own), never below it unless the walk's [`Policy`] says so: every
//! open below the start adds `RESOLVE_NO_XDEV`, so the kernel refuses a crossing with
//! `EXDEV` before it calls into the mounted filesystem (a FUSE server that never answers
//! cannot stall the walk: even `fstatat` on a mount point would wait for it, so entries
//! of unknown type are asked with an `O_PATH` open and `fstat`). The policy then decides
//! from the mount table whether to enter; what is entered is checked to be the mount the
//! policy named (its mount id, read from `/proc/self/fdinfo`, and for a tmpfs its type)
//! and becomes a base of its own: files past the descriptor budget and directories
//! opened again are opened by their path from the nearest base, never from the root.
//!
//! Directories are opened with `O_NOATIME` where permitted (as files are), so listing them
//! does not change their access times.
//!
//! Listings are read with `getdents64(2)` from the same descriptor the directory's entries
//! are opened by, into buffers reused from one directory to the next.
//!
//! At most [`MAX_OPEN`] directories are held open at once. Below that depth a directory's
//! remaining entries are read into memory and its descriptors closed; it is opened again
//! from the root by its path (and must be the same directory) when its turn comes back.
//! Only trees nested that deep pay for whole-path lookups. A listed file keeps its
//! directory's descriptor until it is read; past a budget of such descriptors (half the
//! process's limit, see [`set_descriptor_budget`]) files are listed to be opened by their
//! path from the root instead, so that no tree can exhaust the process's descriptors.
//!
//! A descriptor follows its directory: one moved out of the root while its files wait to
//! be read is read where it went. What it holds was beneath the root when it was listed;
//! a symlink, which could point anywhere, is never followed.

use nix::dir::Type;
use nix::errno::Errno;
use nix::fcntl::{self, AtFlags, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::{self, SFlag};
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The subtrees a walk leaves out, by their paths relative to the root: other walks'
/// (a scope nested in another is walked as itself, once). An entry at one of these paths
/// is neither yielded nor opened nor descended into.
#[derive(Clone, Debug, Default)]
pub struct Pruned(Option<Arc<std::collections::HashSet<PathBuf>>>);

impl Pruned {
    /// Leaves out the subtrees at `paths`.
    pub fn new(paths: std::collections::HashSet<PathBuf>) -> Pruned {
        Pruned((!paths.is_empty()).then(|| Arc::new(paths)))
    }

    /// Whether the entry at `rel` is left out.
    pub fn holds(&self, rel: &Path) -> bool {
        self.0.as_ref().is_some_and(|p| p.contains(rel))
    }
}

/// Directories held open at once; deeper ones are listed into memory and closed.
pub const MAX_OPEN: usize = 64;

/// The flags of every open: beneath the descriptor, through no symlink of any kind.
fn beneath() -> ResolveFlag {
    ResolveFlag::RESOLVE_BENEATH
        | ResolveFlag::RESOLVE_NO_SYMLINKS
        | ResolveFlag::RESOLVE_NO_MAGICLINKS
}

/// Opens `path` beneath `dir` with `flags`, crossing no mount point (see the module doc).
fn open_below<P: ?Sized + nix::NixPath>(
    dir: BorrowedFd<'_>,
    path: &P,
    flags: OFlag,
) -> nix::Result<OwnedFd> {
    let how = OpenHow::new().flags(flags).resolve(beneath() | ResolveFlag::RESOLVE_NO_XDEV);
    fcntl::openat2(dir, path, how)
}

/// `open` with `flags | O_NOATIME`, or, where that is not permitted (only the owner or
/// `CAP_FOWNER` may), with `flags`.
pub(super) fn without_atime(
    open: impl Fn(OFlag) -> nix::Result<OwnedFd>,
    flags: OFlag,
) -> nix::Result<OwnedFd> {
    match open(flags | OFlag::O_NOATIME) {
        Err(Errno::EPERM) => open(flags),
        r => r,
    }
}

/// Opens the directory `path` beneath `dir` for listing, crossing no mount point, its
/// atime left alone where permitted.
pub(super) fn open_dir_below<P: ?Sized + nix::NixPath>(
    dir: BorrowedFd<'_>,
    path: &P,
) -> nix::Result<OwnedFd> {
    without_atime(|f| open_below(dir, path, f), dir_flags())
}

/// Opens the directory `path` beneath `dir` for listing (mount points on the way
/// crossed), its atime left alone where permitted.
pub(super) fn open_dir_beneath<P: ?Sized + nix::NixPath>(
    dir: BorrowedFd<'_>,
    path: &P,
) -> nix::Result<OwnedFd> {
    without_atime(|f| open_beneath(dir, path, f), dir_flags())
}

/// The type of the entry `name` of `dir`, asked of an `O_PATH` descriptor that crosses no
/// mount point (`fstatat` on a mount point would ask the filesystem mounted there):
/// `None` for a mount point, or when it cannot be asked.
pub(super) fn type_below(dir: BorrowedFd<'_>, name: &OsStr) -> Option<Type> {
    let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let st = open_below(dir, name, flags).and_then(|fd| stat::fstat(&fd)).ok()?;
    type_of(st.st_mode)
}

/// What the walk does at a mount point it meets below its start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cross {
    /// Walk into it once it is checked to be the mount `id` of the mount table (and, when
    /// `tmpfs`, a tmpfs).
    Enter {
        /// The mount's id.
        id: u64,
        /// Whether it must be a tmpfs.
        tmpfs: bool,
    },
    /// Leave it unread: its filesystem type, for the report.
    Unread(String),
    /// Leave it unread and unsaid: what is mounted there is known and not the scan's (a
    /// container's `/dev/shm` while it runs).
    Skip,
}

/// What the walk does at its start when a filesystem is mounted there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// Crossed, as every mount point on the way to it is (kubelet's dir, a runtime's root,
    /// often filesystems of their own).
    Crossing,
    /// As at an entry below it: the mount is the policy's to enter or leave (an entry of a
    /// runtime's dir, where nothing is mounted but what the runtime mounts itself).
    Entry,
}

/// Decides what the walk does at a mount point below its start, before anything on that
/// mount is touched: called with the mount point's path (relative to the root) and the
/// directory it is in.
pub type Policy = Box<dyn Fn(&Path, &DirFd) -> Cross>;

/// The mount id of the open descriptor `fd` (`mnt_id` in `/proc/self/fdinfo/N`: read
/// without calling into the filesystem it is on).
fn mount_id(fd: BorrowedFd<'_>) -> io::Result<u64> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd()))?;
    info.lines()
        .find_map(|l| l.strip_prefix("mnt_id:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| io::Error::other("no mount id in /proc/self/fdinfo"))
}

/// Opens the root of the mount at `name` in `dir` as `O_PATH` (nothing on it is called) and
/// checks it is the mount `id` (and a tmpfs when `tmpfs`): what was decided on is what is
/// entered.
pub(super) fn mount_root(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    id: u64,
    tmpfs: bool,
) -> io::Result<OwnedFd> {
    let fd = open_beneath(dir, name, OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC)?;
    if mount_id(fd.as_fd())? != id {
        return Err(io::Error::other("the mount changed during the scan; not read"));
    }
    if tmpfs {
        // The mount is the one the table says is a tmpfs: asking it is safe.
        let fs = nix::sys::statfs::fstatfs(&fd)?;
        if fs.filesystem_type() != nix::sys::statfs::TMPFS_MAGIC {
            return Err(io::Error::other("not the tmpfs the mount table says; not read"));
        }
    }
    Ok(fd)
}

/// Opens `path` (one name, or several) beneath the directory `dir` with `flags`.
pub(super) fn open_beneath<P: ?Sized + nix::NixPath>(
    dir: BorrowedFd<'_>,
    path: &P,
    flags: OFlag,
) -> nix::Result<OwnedFd> {
    fcntl::openat2(dir, path, OpenHow::new().flags(flags).resolve(beneath()))
}

fn dir_flags() -> OFlag {
    OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC
}

/// Directory descriptors open in this process ([`DirFd`]s alive): the walk's own and
/// those its listed files keep for their readers.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// How many [`LIVE`] directory descriptors the walk lets files keep (see
/// [`set_descriptor_budget`]).
static BUDGET: AtomicUsize = AtomicUsize::new(256);

/// Sets how many directory descriptors the walk's listed files may keep open while they
/// wait for their readers. Past it, a file is listed to be opened by its path from the
/// root, and its directory's descriptor closes with the walk's step out of it.
pub fn set_descriptor_budget(n: usize) {
    BUDGET.store(n, Ordering::Relaxed);
}

/// An open directory whose files are opened by name.
#[derive(Debug)]
pub struct DirFd(OwnedFd);

impl AsFd for DirFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

impl DirFd {
    pub(super) fn new(fd: OwnedFd) -> Arc<DirFd> {
        LIVE.fetch_add(1, Ordering::Relaxed);
        Arc::new(DirFd(fd))
    }

    /// Opens the regular file at `path` (its name, or a path of several names) beneath
    /// this directory for reading, never following a symlink; atime is not updated where
    /// permitted. `O_NONBLOCK`: a FIFO swapped in after the walk opens at once (the caller
    /// checks what it opened with `fstat`).
    pub fn open_file(&self, path: &Path) -> io::Result<File> {
        open_file_beneath(self.0.as_fd(), path)
    }

    /// Opens the regular file at `path` beneath this directory like
    /// [`DirFd::open_file`], but crossing no mount point: a file that is itself a mount
    /// point (a bind mount of one file) is refused with `EXDEV`.
    pub fn open_file_below(&self, path: &Path) -> io::Result<File> {
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        without_atime(|f| open_below(self.0.as_fd(), path, f), flags)
            .map(File::from)
            .map_err(io::Error::from)
    }

    /// What the file `name` in this directory is, without opening it for reading: an
    /// `O_PATH` descriptor of it (beneath this one, through no symlink, crossing no mount
    /// point: a mount on it is refused with `EXDEV` before the mounted filesystem is
    /// asked anything) is asked (`statx`). Nothing of the file is read: no read access
    /// checked, no lease broken, no open event told to inotify or fanotify. `None` for a
    /// name of several components; an error for a mount point: such a file is opened
    /// ([`DirFd::open_file_below`]), where the walk's mount policy decides.
    pub fn peek(&self, name: &OsStr) -> io::Result<Option<super::image::Meta>> {
        use nix::libc;
        if name.as_bytes().contains(&b'/') {
            return Ok(None);
        }
        let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = open_below(self.0.as_fd(), Path::new(name), flags)?;
        let flags = libc::AT_EMPTY_PATH | libc::AT_STATX_DONT_SYNC;
        let x = statx(fd.as_fd(), c"", flags, libc::STATX_BASIC_STATS)?;
        let told = libc::STATX_TYPE | libc::STATX_INO | libc::STATX_SIZE | libc::STATX_BLOCKS;
        let told = told | libc::STATX_MTIME | libc::STATX_CTIME;
        if x.stx_mask & told != told {
            return Ok(None);
        }
        let time = |t: libc::statx_timestamp| (t.tv_sec, i64::from(t.tv_nsec));
        Ok(Some(super::image::Meta {
            is_file: u32::from(x.stx_mode) & libc::S_IFMT == libc::S_IFREG,
            len: x.stx_size,
            dev: libc::makedev(x.stx_dev_major, x.stx_dev_minor),
            ino: x.stx_ino,
            blocks: x.stx_blocks,
            mtime: time(x.stx_mtime),
            ctime: time(x.stx_ctime),
        }))
    }

    /// The names of the entries of the directory `path` beneath this one (`.` for this
    /// one), crossing no mount point, in name order.
    pub fn names_below(&self, path: &Path) -> io::Result<Vec<OsString>> {
        let fd = open_dir_below(self.0.as_fd(), path)?;
        let listed = super::tree::Dir::from_fd(fd).list()?;
        Ok(listed.into_iter().map(|(name, _)| name).collect())
    }

    /// [`DirFd::open_file_below`] for a file the walk has not seen (a database's log
    /// beside it): asked first what it is (an `O_PATH` descriptor opens nothing), so a
    /// device node there is never opened; the file opened must be the one asked.
    pub fn open_regular_below(&self, path: &Path) -> io::Result<File> {
        let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let checked = open_below(self.0.as_fd(), path, flags)?;
        let asked = stat::fstat(&checked)?;
        if SFlag::from_bits_truncate(asked.st_mode) & SFlag::S_IFMT != SFlag::S_IFREG {
            return Err(io::Error::other("not a regular file"));
        }
        // The very inode checked, reopened for reading through its descriptor's link in
        // /proc (nothing swapped in meanwhile is opened); by name where /proc is not there.
        let read = OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        let link = format!("/proc/self/fd/{}", checked.as_raw_fd());
        let reopened = without_atime(|f| fcntl::open(link.as_str(), f, stat::Mode::empty()), read);
        let file = match reopened {
            Ok(fd) => File::from(fd),
            Err(Errno::ENOENT) => self.open_file_below(path)?,
            Err(e) => return Err(e.into()),
        };
        let opened = stat::fstat(&file)?;
        if (asked.st_dev, asked.st_ino) != (opened.st_dev, opened.st_ino) {
            return Err(io::Error::other("replaced while opened; not read"));
        }
        Ok(file)
    }

    /// Opens the regular file `name` of this directory that is itself a mount point,
    /// once it is checked to be the mount `id` of the mount table (and a tmpfs when
    /// `tmpfs`); the file opened must be the one checked.
    pub fn open_mounted_file(&self, name: &OsStr, id: u64, tmpfs: bool) -> io::Result<File> {
        let checked = mount_root(self.0.as_fd(), name, id, tmpfs)?;
        let file = open_file_beneath(self.0.as_fd(), name)?;
        let (a, b) = (stat::fstat(&checked)?, stat::fstat(&file)?);
        if (a.st_dev, a.st_ino) != (b.st_dev, b.st_ino) {
            return Err(io::Error::other("the mount changed during the scan; not read"));
        }
        Ok(file)
    }

    /// Reads the regular file `name` of this directory whole, at most `cap` bytes
    /// (crossing no mount point, its atime left alone where permitted); `None` when it
    /// is missing, not a regular file, larger, or unreadable.
    pub fn read_small(&self, name: &OsStr, cap: u64) -> Option<Vec<u8>> {
        use std::io::Read;
        let f = self.open_file_below(Path::new(name)).ok()?;
        let md = f.metadata().ok().filter(|m| m.is_file() && m.len() <= cap)?;
        let mut data = Vec::with_capacity(md.len() as usize);
        super::cache::HostFile::new(f).take(cap).read_to_end(&mut data).ok()?;
        Some(data)
    }
}

impl Drop for DirFd {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Opens the regular file at `path` beneath `dir` for reading (see [`DirFd::open_file`]).
pub(super) fn open_file_beneath<P: ?Sized + nix::NixPath>(
    dir: BorrowedFd<'_>,
    path: &P,
) -> io::Result<File> {
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    without_atime(|f| open_beneath(dir, path, f), flags).map(File::from).map_err(io::Error::from)
}

/// What the walk yields. Paths are relative to the root.
#[derive(Debug)]
pub enum Entry {
    /// A regular file.
    File {
        /// Its directory, to open it by name; or, when `by_path`, the base of the mount
        /// it is on (the walk's start, or a mount entered below it).
        dir: Arc<DirFd>,
        /// Its path.
        rel: PathBuf,
        /// Its inode as listed (checked against the file opened).
        ino: u64,
        /// It is opened by `rel[base..]` from `dir` (past the descriptor budget).
        by_path: bool,
        /// Where in `rel` (bytes) the path under `dir` starts, when `by_path`.
        base: usize,
    },
    /// A regular file of an image's tree ([`super::image::Image::walk`]).
    ImageFile {
        /// Its path.
        rel: PathBuf,
        /// Its stand-in inode ([`super::image::Image::ino`]).
        ino: u64,
    },
    /// A mount point below the start, left unread by the walk's policy.
    Unread {
        /// Its path.
        rel: PathBuf,
        /// Its filesystem type (`unknown` when not in the mount table).
        fstype: String,
    },
    /// Not a directory and not a regular file, never opened: what it is (`symlink`,
    /// `FIFO`, `socket`, `char device`, `block device`).
    Special(&'static str),
    /// What could not be opened or listed (or a directory that changed while walked).
    Error {
        /// Its path.
        rel: PathBuf,
        /// Why.
        error: io::Error,
    },
}

/// What a non-regular, non-directory entry is, in words.
fn special_kind(t: Type) -> &'static str {
    match t {
        Type::Symlink => "symlink",
        Type::Fifo => "FIFO",
        Type::Socket => "socket",
        Type::CharacterDevice => "char device",
        Type::BlockDevice => "block device",
        Type::Directory | Type::File => unreachable!("only called for special entries"),
    }
}

fn type_of(mode: u32) -> Option<Type> {
    Some(match SFlag::from_bits_truncate(mode) & SFlag::S_IFMT {
        SFlag::S_IFDIR => Type::Directory,
        SFlag::S_IFREG => Type::File,
        SFlag::S_IFLNK => Type::Symlink,
        SFlag::S_IFIFO => Type::Fifo,
        SFlag::S_IFSOCK => Type::Socket,
        SFlag::S_IFCHR => Type::CharacterDevice,
        SFlag::S_IFBLK => Type::BlockDevice,
        _ => return None,
    })
}

/// Bytes of directory entries read per `getdents64(2)` call (what glibc's `readdir` uses).
const LISTING_BYTES: usize = 32 * 1024;

/// The type a directory entry is listed with (`d_type`); `None` when the filesystem does
/// not say (`DT_UNKNOWN`).
fn listed_type(d_type: u8) -> Option<Type> {
    Some(match d_type {
        1 => Type::Fifo,
        2 => Type::CharacterDevice,
        4 => Type::Directory,
        6 => Type::BlockDevice,
        8 => Type::File,
        10 => Type::Symlink,
        12 => Type::Socket,
        _ => return None,
    })
}

/// Reads the next entries of the directory `dir` into `buf`: how many bytes (0 at its end).
/// The directory's own descriptor is listed (nix's `Dir` would need one of its own, a `dup`
/// and a `close` more per directory: 2 × 12,000 calls on the benchmark's node).
#[allow(unsafe_code)]
fn getdents(dir: BorrowedFd<'_>, buf: &mut [u8]) -> nix::Result<usize> {
    // SAFETY: the kernel writes at most `buf.len()` bytes at `buf`, which is valid and
    // exclusively borrowed for that long; the descriptor is open (borrowed).
    let n = unsafe {
        nix::libc::syscall(nix::libc::SYS_getdents64, dir.as_raw_fd(), buf.as_mut_ptr(), buf.len())
    };
    Errno::result(n).map(|n| n as usize)
}

/// `statx(2)` of `name` in `dir` with `flags`, asking for `mask`.
#[allow(unsafe_code)]
fn statx(
    dir: BorrowedFd<'_>,
    name: &std::ffi::CStr,
    flags: i32,
    mask: u32,
) -> io::Result<nix::libc::statx> {
    let mut x = std::mem::MaybeUninit::<nix::libc::statx>::zeroed();
    // SAFETY: `name` is NUL-terminated and lives across the call; the kernel writes one
    // `struct statx` at `x`, valid and exclusively borrowed; the descriptor is open
    // (borrowed). All of its fields are integers, so the zeroed value is one too.
    let n =
        unsafe { nix::libc::statx(dir.as_raw_fd(), name.as_ptr(), flags, mask, x.as_mut_ptr()) };
    Errno::result(n)?;
    // SAFETY: zeroed, then written by the kernel: every field holds an integer.
    Ok(unsafe { x.assume_init() })
}

/// The first record of a `getdents64` listing (`struct linux_dirent64`: `u64` inode, `i64`
/// offset, `u16` record length, `u8` type, the NUL-terminated name): its length, inode,
/// type and name. `None` when it is malformed (which the kernel never lists).
fn dirent(buf: &[u8]) -> Option<(usize, u64, u8, &[u8])> {
    let len = usize::from(u16::from_ne_bytes(buf.get(16..18)?.try_into().ok()?));
    let rec = buf.get(..len).filter(|r| r.len() > 19)?;
    let ino = u64::from_ne_bytes(rec[..8].try_into().ok()?);
    let name = &rec[19..];
    Some((len, ino, rec[18], &name[..memchr::memchr(0, name)?]))
}

/// A listed entry: its path, its type if the directory said it, its inode.
type Listed = (PathBuf, Option<Type>, u64);

/// An entry listed ahead into memory: its name, its type if said, its inode.
type Named = (OsString, Option<Type>, u64);

/// The entries of a directory still to be walked.
enum Listing {
    /// Listed as walked: `buf[at..len]` is read and not yet walked.
    Stream { buf: Vec<u8>, at: usize, len: usize },
    /// Read ahead into memory (a directory below [`MAX_OPEN`] open ones).
    Memory(std::vec::IntoIter<Named>),
}

/// A directory being walked. Its path is not kept here but once for the whole walk (in
/// [`Walk`]), so that a chain of N directories costs memory in N, not N².
struct Frame {
    /// `None` while closed (see [`MAX_OPEN`]).
    fd: Option<Arc<DirFd>>,
    /// The directory at the top of the mount this one is on (the walk's start, or a mount
    /// entered below it), and the length in bytes of its path: what this directory and
    /// its files are opened again from, by path, crossing no mount point.
    base: (Arc<DirFd>, usize),
    /// Device and inode, recorded when it was closed, checked when it is opened again.
    ident: Option<(u64, u64)>,
    listing: Listing,
}

impl Frame {
    /// The next entry but `.` and `..`, its path joined to `path`, this directory's.
    fn next(&mut self, path: &Path) -> Option<nix::Result<Listed>> {
        let (buf, at, len) = match &mut self.listing {
            Listing::Memory(it) => {
                return it.next().map(|(n, t, ino)| Ok((joined(path, &n), t, ino)))
            }
            Listing::Stream { buf, at, len } => (buf, at, len),
        };
        loop {
            if *at == *len {
                let fd = self.fd.as_ref().expect("a listed directory is open");
                match getdents(fd.0.as_fd(), buf) {
                    Ok(0) => return None,
                    Ok(n) => (*at, *len) = (0, n),
                    Err(e) => return Some(Err(e)),
                }
            }
            let Some((n, ino, d_type, name)) = dirent(&buf[*at..*len]) else {
                *at = *len;
                return Some(Err(Errno::EIO));
            };
            *at += n;
            if name != b"." && name != b".." {
                let rel = joined(path, OsStr::from_bytes(name));
                return Some(Ok((rel, listed_type(d_type), ino)));
            }
        }
    }
}

/// The part of `rel` below its base, whose path is `rel`'s first `len` bytes.
pub fn under_base(rel: &Path, len: usize) -> &Path {
    let rest = rel.as_os_str().as_bytes().get(len..).unwrap_or(b"");
    Path::new(OsStr::from_bytes(rest.strip_prefix(b"/").unwrap_or(rest)))
}

/// `dir/name`, allocated once at its length (`Path::join` copies `dir` and then grows the
/// copy for `name`: two allocations for every entry walked).
fn joined(dir: &Path, name: &OsStr) -> PathBuf {
    let mut p = PathBuf::with_capacity(dir.as_os_str().len() + 1 + name.len());
    p.push(dir);
    p.push(name);
    p
}

/// Walks the tree at `rel` beneath the root descriptor `root`, without following any
/// symlink (`rel` itself included). `rel` may name a file; `""` is the root itself.
pub struct Walk {
    /// What to do at mount points below the start (`None`: leave them all unread).
    policy: Option<Policy>,
    stack: Vec<Frame>,
    /// The path of the directory on top of `stack`.
    path: PathBuf,
    /// How many components the path of the directory at the bottom of `stack` has.
    base: usize,
    /// The first entry, when `rel` names something that is not a directory (or fails).
    first: Option<Entry>,
    /// Listing buffers of directories walked, for the next ones.
    spare: Vec<Vec<u8>>,
    /// Directory descriptors files may keep (see [`set_descriptor_budget`]).
    budget: usize,
    /// What to do when the start is a mount point.
    start: Start,
    /// Subtrees left out.
    pruned: Pruned,
}

impl Walk {
    pub(super) fn new(root: &Arc<DirFd>, rel: &Path, policy: Option<Policy>, start: Start) -> Walk {
        Walk::with_budget(root, rel, BUDGET.load(Ordering::Relaxed), policy, start)
    }

    fn with_budget(
        root_dir: &Arc<DirFd>,
        rel: &Path,
        budget: usize,
        policy: Option<Policy>,
        start: Start,
    ) -> Walk {
        let root = root_dir.as_fd();
        let mut walk = Walk {
            policy,
            stack: Vec::new(),
            path: PathBuf::new(),
            base: 0,
            first: None,
            spare: Vec::new(),
            budget,
            start,
            pruned: Pruned::default(),
        };
        let parent = match (rel.parent(), rel.file_name()) {
            (Some(p), Some(_)) if p.as_os_str().is_empty() => Path::new("."),
            (Some(p), Some(_)) => p,
            // The root itself, or a path without a last name (`a/..`).
            _ => {
                let at = if rel.as_os_str().is_empty() { Path::new(".") } else { rel };
                walk.first = match open_dir_beneath(root, at) {
                    Ok(fd) => walk.push(rel.to_path_buf(), fd, true),
                    Err(e) => Some(Entry::Error { rel: rel.into(), error: e.into() }),
                };
                return walk;
            }
        };
        // Only searched, not listed: `O_PATH` needs no read permission on it (a scope under
        // a mode 0711 home directory).
        let path_only = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        walk.first = match open_beneath(root, parent, path_only) {
            Ok(fd) => walk.enter(&DirFd::new(fd), rel.to_path_buf(), None, None),
            Err(e) => Some(Entry::Error { rel: rel.into(), error: e.into() }),
        };
        walk
    }

    /// A file listed in `dir`: opened by name from `dir`, or by path from the base of its
    /// mount when files already keep more directory descriptors than the budget.
    fn file(&self, dir: &Arc<DirFd>, rel: PathBuf, ino: u64) -> Entry {
        match self.stack.last() {
            Some(top) if LIVE.load(Ordering::Relaxed) > self.budget => {
                let (base, len) = &top.base;
                Entry::File { dir: base.clone(), rel, ino, by_path: true, base: *len }
            }
            _ => Entry::File { dir: dir.clone(), rel, ino, by_path: false, base: 0 },
        }
    }

    /// Makes the directory `fd`, at `rel`, the top of the walk; `base`: it is the top of
    /// its mount (the walk's start, or a mount entered).
    fn push(&mut self, rel: PathBuf, fd: OwnedFd, base: bool) -> Option<Entry> {
        let open = self.stack.iter().filter(|f| f.fd.is_some()).count();
        let mut failed = None;
        if open >= MAX_OPEN {
            // The shallowest open directory is read ahead and closed.
            if let Some(i) = self.stack.iter().position(|f| f.fd.is_some()) {
                let error = close(&mut self.stack[i], &mut self.spare).err();
                let rel = || self.path.components().take(self.base + i).collect();
                failed = error.map(|error| Entry::Error { rel: rel(), error });
            }
        }
        if self.stack.is_empty() {
            self.base = rel.components().count();
        }
        let fd = DirFd::new(fd);
        let base = match self.stack.last() {
            Some(top) if !base => top.base.clone(),
            _ => (fd.clone(), rel.as_os_str().len()),
        };
        self.path = rel;
        let buf = self.spare.pop().unwrap_or_else(|| vec![0; LISTING_BYTES]);
        let frame = Frame {
            fd: Some(fd),
            base,
            ident: None,
            listing: Listing::Stream { buf, at: 0, len: 0 },
        };
        self.stack.push(frame);
        failed
    }

    /// Drops the directory on top of the walk, keeping its listing buffer; its path.
    fn pop(&mut self) -> PathBuf {
        if let Some(Frame { listing: Listing::Stream { buf, .. }, .. }) = self.stack.pop() {
            self.spare.push(buf);
        }
        let rel = self.path.clone();
        self.path.pop();
        rel
    }

    /// Handles the entry at `rel` in `dir`: a file or special entry to yield, or a
    /// directory to descend into (`None`, or the error opening it). `listed`: the type and
    /// inode its directory listed it with (`None` at the walk's start).
    fn enter(
        &mut self,
        dir: &Arc<DirFd>,
        rel: PathBuf,
        listed_type: Option<Type>,
        listed: Option<u64>,
    ) -> Option<Entry> {
        let name = rel.file_name().unwrap_or(OsStr::new("."));
        // An entry gone since its directory was listed is not walked; a start that is not
        // there is an error.
        let gone = |e: Errno| e == Errno::ENOENT && listed.is_some();
        // The walk's start, a mount point there crossed.
        let crossed = listed.is_none() && self.start == Start::Crossing;
        let (kind, ino) = match (listed_type, listed) {
            (Some(t), Some(ino)) => (t, ino),
            // Asked, without following a symlink.
            (_, None) if crossed => {
                match stat::fstatat(dir.as_fd(), name, AtFlags::AT_SYMLINK_NOFOLLOW) {
                    Ok(st) => (type_of(st.st_mode)?, st.st_ino),
                    Err(e) => return Some(Entry::Error { rel, error: e.into() }),
                }
            }
            // The filesystem does not say types in its listings, or the start is to be
            // met as an entry: asked of an `O_PATH` descriptor opened without crossing a
            // mount point (`fstatat` on a mount point would ask the filesystem mounted
            // there).
            _ => {
                let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
                match open_below(dir.as_fd(), name, flags).and_then(|fd| stat::fstat(&fd)) {
                    Ok(st) => (type_of(st.st_mode)?, st.st_ino),
                    Err(Errno::EXDEV) => return self.cross(dir, rel),
                    Err(e) if gone(e) => return None,
                    Err(e) => return Some(Entry::Error { rel, error: e.into() }),
                }
            }
        };
        match kind {
            Type::File => Some(self.file(dir, rel, ino)),
            // The start: mount points on the way to it are crossed.
            Type::Directory if crossed => match open_dir_beneath(dir.as_fd(), name) {
                Ok(fd) => self.push(rel, fd, true),
                Err(e) => Some(Entry::Error { rel, error: e.into() }),
            },
            Type::Directory => match open_dir_below(dir.as_fd(), name) {
                Ok(fd) => self.push(rel, fd, false),
                Err(Errno::EXDEV) => self.cross(dir, rel),
                Err(e) if gone(e) => None,
                Err(e) => Some(Entry::Error { rel, error: e.into() }),
            },
            t => Some(Entry::Special(special_kind(t))),
        }
    }

    /// The mount point at `rel` in `dir`, met below the start: entered, or left unread,
    /// as the policy says. A mount point that is not a directory (a bind mount of one
    /// file) is left to its reader (see [`DirFd::open_mounted_file`]).
    fn cross(&mut self, dir: &Arc<DirFd>, rel: PathBuf) -> Option<Entry> {
        let decision = match &self.policy {
            Some(policy) => policy(&rel, dir),
            None => Cross::Unread("unknown".to_owned()),
        };
        let (id, tmpfs) = match decision {
            Cross::Unread(fstype) => return Some(Entry::Unread { rel, fstype }),
            Cross::Skip => return None,
            Cross::Enter { id, tmpfs } => (id, tmpfs),
        };
        let name = rel.file_name().unwrap_or(OsStr::new("."));
        let entered = mount_root(dir.as_fd(), name, id, tmpfs).and_then(|root| {
            let st = stat::fstat(&root)?;
            match type_of(st.st_mode) {
                Some(Type::Directory) => Ok(Ok(open_dir_below(root.as_fd(), ".")?)),
                Some(Type::File) => Ok(Err(st.st_ino)),
                _ => Err(io::Error::other("a mount point that is not a file or a directory")),
            }
        });
        match entered {
            Ok(Ok(fd)) => self.push(rel, fd, true),
            // Its reader opens it across the mount again (its inode is the mounted file's).
            Ok(Err(ino)) => Some(self.file(dir, rel, ino)),
            Err(error) => Some(Entry::Error { rel, error }),
        }
    }
}

/// Reads the rest of `frame`'s listing into memory and closes its descriptor, recording
/// which directory it is; its buffer goes to `spare`. A listing that fails keeps what was
/// read before.
fn close(frame: &mut Frame, spare: &mut Vec<Vec<u8>>) -> io::Result<()> {
    let mut rest = Vec::new();
    let mut failed = None;
    while let Some(e) = frame.next(Path::new("")) {
        match e {
            Ok((name, t, ino)) => rest.push((name.into_os_string(), t, ino)),
            Err(e) => {
                failed = Some(e.into());
                break;
            }
        }
    }
    let fd = frame.fd.take().expect("an open frame");
    frame.ident = stat::fstat(&fd.0).ok().map(|st| (st.st_dev, st.st_ino));
    let listing = std::mem::replace(&mut frame.listing, Listing::Memory(rest.into_iter()));
    if let Listing::Stream { buf, .. } = listing {
        spare.push(buf);
    }
    failed.map_or(Ok(()), Err)
}

/// A walk of a mounted root ([`Walk`]) or of an image's tree
/// ([`super::image::ImageWalk`]).
pub enum Walker {
    /// Beneath a mounted root.
    Host(Walk),
    /// In an image.
    Image(super::image::ImageWalk),
}

impl Walker {
    /// This walk, leaving out the subtrees `pruned` holds.
    pub fn leaving_out(self, pruned: Pruned) -> Walker {
        match self {
            Walker::Host(w) => Walker::Host(Walk { pruned, ..w }),
            Walker::Image(w) => Walker::Image(w.leaving_out(pruned)),
        }
    }
}

impl Iterator for Walker {
    type Item = Entry;

    fn next(&mut self) -> Option<Entry> {
        match self {
            Walker::Host(w) => w.next(),
            Walker::Image(w) => w.next(),
        }
    }
}

impl Iterator for Walk {
    type Item = Entry;

    fn next(&mut self) -> Option<Entry> {
        if let Some(first) = self.first.take() {
            return Some(first);
        }
        loop {
            let top = self.stack.last_mut()?;
            let (rel, listed, ino) = match top.next(&self.path) {
                Some(Ok(l)) => l,
                end => {
                    let rel = self.pop();
                    match end {
                        Some(Err(e)) => return Some(Entry::Error { rel, error: e.into() }),
                        _ => continue,
                    }
                }
            };
            if self.pruned.holds(&rel) {
                continue;
            }
            let dir = match &top.fd {
                Some(fd) => fd.clone(),
                None => match reopen(top, &self.path) {
                    Ok(fd) => fd,
                    Err(error) => return Some(Entry::Error { rel: self.pop(), error }),
                },
            };
            if let Some(e) = self.enter(&dir, rel, listed, Some(ino)) {
                return Some(e);
            }
        }
    }
}

/// Opens a closed directory again by its path from its base, crossing no mount point: it
/// must be the one listed.
fn reopen(frame: &mut Frame, rel: &Path) -> io::Result<Arc<DirFd>> {
    let (base, len) = &frame.base;
    let rel = under_base(rel, *len);
    let rel = if rel.as_os_str().is_empty() { Path::new(".") } else { rel };
    let fd = open_dir_below(base.as_fd(), rel)?;
    let st = stat::fstat(&fd)?;
    match frame.ident {
        Some(ident) if ident == (st.st_dev, st.st_ino) => {}
        Some(_) => return Err(io::Error::other("replaced during the scan; not walked further")),
        None => return Err(io::Error::other("could not be checked again; not walked further")),
    }
    let fd = DirFd::new(fd);
    frame.fd = Some(fd.clone());
    Ok(fd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::os::unix::fs::MetadataExt;

    /// The walk tests count this process's descriptors: one at a time.
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn open_fds() -> usize {
        std::fs::read_dir("/proc/self/fd").unwrap().count()
    }

    /// Opens a listed file the way a reader does; checks it is the one listed.
    fn open_listed(dir: &DirFd, rel: &Path, ino: u64, base: Option<usize>) {
        let at = match base {
            Some(len) => under_base(rel, len),
            None => Path::new(rel.file_name().unwrap()),
        };
        let f = dir.open_file_below(at).unwrap();
        assert_eq!(f.metadata().unwrap().ino(), ino, "{rel:?}");
    }

    fn walk(root: &Path, rel: &str) -> (BTreeSet<String>, Vec<&'static str>, Vec<String>) {
        let fd = DirFd::new(File::open(root).unwrap().into());
        let (mut files, mut special, mut errors) = (BTreeSet::new(), vec![], vec![]);
        for e in Walk::new(&fd, Path::new(rel), None, Start::Crossing) {
            match e {
                Entry::File { dir, rel, ino, by_path, base } => {
                    open_listed(&dir, &rel, ino, by_path.then_some(base));
                    files.insert(rel.to_str().unwrap().to_owned());
                }
                Entry::Special(kind) => special.push(kind),
                Entry::Error { rel, error } => errors.push(format!("{}: {error}", rel.display())),
                Entry::Unread { rel, fstype } => {
                    errors.push(format!("{}: {fstype}", rel.display()))
                }
                Entry::ImageFile { rel, .. } => {
                    errors.push(format!("{}: an image's", rel.display()))
                }
            }
        }
        special.sort();
        (files, special, errors)
    }

    #[test]
    fn walks_files_by_descriptor_without_following_links() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        std::fs::create_dir_all(r.join("a/b/c")).unwrap();
        std::fs::write(r.join("a/top"), "1").unwrap();
        std::fs::write(r.join("a/b/c/deep"), "2").unwrap();
        std::os::unix::fs::symlink("/etc", r.join("a/b/out")).unwrap();
        std::os::unix::fs::symlink("../..", r.join("a/b/c/up")).unwrap();
        nix::unistd::mkfifo(&r.join("a/fifo"), stat::Mode::S_IRUSR).unwrap();
        let (files, special, errors) = walk(r, "a");
        assert_eq!(files, ["a/b/c/deep", "a/top"].map(String::from).into());
        assert_eq!(special, ["FIFO", "symlink", "symlink"]);
        assert!(errors.is_empty(), "{errors:?}");
        // The whole root, one file, a symlink and a missing path as the start.
        assert_eq!(walk(r, "").0.len(), 2);
        assert_eq!(walk(r, "a/top").0, ["a/top".to_owned()].into());
        assert_eq!(walk(r, "a/b/out").1, ["symlink"]);
        assert_eq!(walk(r, "a/b/out/passwd").2.len(), 1, "through a symlink");
        assert_eq!(walk(r, "nope").2.len(), 1);
        assert_eq!(walk(r, "a/b/..").0.len(), 2, "a start without a last name");
    }

    #[test]
    fn deeper_than_the_open_limit_is_walked_with_bounded_descriptors() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let t = tempfile::tempdir().unwrap();
        let mut p = t.path().join("d");
        let mut want = BTreeSet::new();
        for i in 0..3 * MAX_OPEN {
            std::fs::create_dir(&p).unwrap();
            std::fs::write(p.join(format!("f{i}")), "x").unwrap();
            std::fs::create_dir(p.join("side")).unwrap();
            std::fs::write(p.join("side/s"), "y").unwrap();
            let rel = p.strip_prefix(t.path()).unwrap();
            want.insert(rel.join(format!("f{i}")));
            want.insert(rel.join("side/s"));
            p = p.join("d");
        }
        let before = open_fds();
        let fd = DirFd::new(File::open(t.path()).unwrap().into());
        let (mut most, mut got) = (0, BTreeSet::new());
        for e in Walk::new(&fd, Path::new("d"), None, Start::Crossing) {
            let Entry::File { dir, rel, ino, by_path, base } = e else { panic!("{e:?}") };
            open_listed(&dir, &rel, ino, by_path.then_some(base));
            got.insert(rel);
            most = most.max(open_fds());
        }
        assert_eq!(got, want, "the paths listed");
        assert!(most <= before + MAX_OPEN + 16, "{most} descriptors open at once");
    }

    #[test]
    fn listed_files_keep_no_more_descriptors_than_the_budget() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let t = tempfile::tempdir().unwrap();
        for i in 0..300 {
            let d = t.path().join(format!("pod{i}"));
            std::fs::create_dir(&d).unwrap();
            std::fs::write(d.join("0.log"), "x").unwrap();
        }
        let before = open_fds();
        let fd = DirFd::new(File::open(t.path()).unwrap().into());
        // Every entry kept, as a queue of files waiting for their readers keeps them.
        let kept: Vec<Entry> =
            Walk::with_budget(&fd, Path::new(""), 16, None, Start::Crossing).collect();
        let open = open_fds();
        assert!(open <= before + 16 + 8, "{open} descriptors open with every entry kept");
        assert_eq!(kept.len(), 300);
        for e in &kept {
            let Entry::File { dir, rel, ino, by_path, base } = e else { panic!("{e:?}") };
            open_listed(dir, rel, *ino, by_path.then_some(*base));
        }
        assert!(kept.iter().any(|e| matches!(e, Entry::File { by_path: true, .. })));
    }

    #[test]
    fn malformed_listings_are_refused() {
        let mut rec = vec![0u8; 24];
        rec[..8].copy_from_slice(&7u64.to_ne_bytes());
        rec[16..18].copy_from_slice(&24u16.to_ne_bytes());
        rec[18] = 8;
        rec[19..22].copy_from_slice(b"abc");
        assert_eq!(dirent(&rec), Some((24, 7, 8, &b"abc"[..])));
        for len in [0u16, 19, 25, 400] {
            let mut bad = rec.clone();
            bad[16..18].copy_from_slice(&len.to_ne_bytes());
            assert_eq!(dirent(&bad), None, "record length {len}");
        }
        let mut unterminated = rec.clone();
        unterminated[19..24].copy_from_slice(b"abcde");
        assert_eq!(dirent(&unterminated), None);
        assert_eq!(dirent(&rec[..17]), None);
    }

    #[test]
    fn a_closed_directory_is_opened_again_only_if_it_is_the_same() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        std::fs::create_dir(r.join("d")).unwrap();
        let root = File::open(r).unwrap();
        let fd = open_beneath(root.as_fd(), Path::new("d"), dir_flags()).unwrap();
        let base = DirFd::new(File::open(r).unwrap().into());
        let mut frame = Frame {
            fd: Some(DirFd::new(fd)),
            base: (base, 0),
            ident: None,
            listing: Listing::Memory(Vec::new().into_iter()),
        };
        close(&mut frame, &mut Vec::new()).unwrap();
        assert!(frame.fd.is_none());
        assert!(reopen(&mut frame, Path::new("d")).is_ok());
        frame.fd = None;
        std::fs::rename(r.join("d"), r.join("old")).unwrap();
        std::fs::create_dir(r.join("d")).unwrap();
        let e = reopen(&mut frame, Path::new("d")).unwrap_err();
        assert!(e.to_string().contains("replaced"), "{e}");
    }
}
