//! The one home of system calls (through `nix`): opening files confined beneath the
//! scanned root, link reading, filesystem type, hole skipping, hostname, the run lock;
//! [`tree`] removes trees through directory descriptors and unmounts for `clean`, and
//! [`mount`] reads the mount table. The crate's one `unsafe` block is a cache prefetch
//! hint (`std` has no safe one yet).
//!
//! Confinement: every file is opened with `openat2(2)` relative to a descriptor of the
//! root, with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` and `O_NOFOLLOW | O_NONBLOCK`, so
//! the kernel refuses any path that would leave the root or pass through a symlink, even
//! if a directory is swapped for a symlink between the walk and the open. `O_NONBLOCK`
//! makes opening a FIFO that slipped in (type changed after the walk) return at once;
//! the caller then checks what it opened with `fstat` and closes anything that is not the
//! regular file it walked.

pub mod mount;
pub mod tree;

use nix::errno::Errno;
use nix::fcntl::{self, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::Mode;
use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

/// An open descriptor of the scan root, and its canonical path.
#[derive(Debug)]
pub struct RootDir {
    fd: OwnedFd,
    path: PathBuf,
}

impl RootDir {
    /// Opens `path` (which must be a directory) as the root of everything read.
    pub fn open(path: &Path) -> io::Result<RootDir> {
        let canonical = std::fs::canonicalize(path)?;
        let fd = fcntl::open(
            &canonical,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(io::Error::from)?;
        Ok(RootDir { fd, path: canonical })
    }

    /// The canonical absolute path of the root.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens the regular file at `rel` (relative to the root) for reading, never following
    /// a symlink and never leaving the root; atime is not updated where permitted.
    pub fn open_file(&self, rel: &Path) -> io::Result<File> {
        let base = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        match self.open_beneath(rel, base | OFlag::O_NOATIME) {
            // O_NOATIME is only allowed to the file's owner or with CAP_FOWNER.
            Err(e) if e.raw_os_error() == Some(Errno::EPERM as i32) => self.open_beneath(rel, base),
            r => r,
        }
        .map(File::from)
    }

    /// Reads the target of the symlink at `rel`, resolving its parent beneath the root.
    pub fn read_link(&self, rel: &Path) -> io::Result<OsString> {
        let (parent, name) = match (rel.parent(), rel.file_name()) {
            (Some(p), Some(n)) => (p, n),
            _ => return Err(io::Error::from(io::ErrorKind::InvalidInput)),
        };
        let dir = if parent.as_os_str().is_empty() {
            self.fd.try_clone()?
        } else {
            self.open_beneath(parent, OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)?
        };
        fcntl::readlinkat(dir.as_fd(), name).map_err(io::Error::from)
    }

    /// Opens the directory at `rel` (relative to the root; `""` is the root itself),
    /// never through a symlink and never leaving the root. Mount points may be crossed
    /// on the way (kubelet's dir is often a filesystem of its own).
    pub fn open_dir(&self, rel: &Path) -> io::Result<tree::Dir> {
        let fd = self.open_beneath(
            rel,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        )?;
        Ok(tree::Dir::from_fd(fd))
    }

    fn open_beneath(&self, rel: &Path, flags: OFlag) -> io::Result<OwnedFd> {
        let how = OpenHow::new().flags(flags).resolve(
            ResolveFlag::RESOLVE_BENEATH
                | ResolveFlag::RESOLVE_NO_SYMLINKS
                | ResolveFlag::RESOLVE_NO_MAGICLINKS,
        );
        let rel = if rel.as_os_str().is_empty() { Path::new(".") } else { rel };
        fcntl::openat2(self.fd.as_fd(), rel, how).map_err(io::Error::from)
    }
}

/// True if the open file lives on a tmpfs (RAM), as kubelet's secret volumes should.
pub fn is_tmpfs(f: &File) -> bool {
    nix::sys::statfs::fstatfs(f)
        .map(|s| s.filesystem_type() == nix::sys::statfs::TMPFS_MAGIC)
        .unwrap_or(false)
}

/// Where the next data at or after `pos` begins (holes of sparse files are skipped);
/// `None` if there is no data after `pos`. Filesystems without hole support say `pos`.
pub fn next_data(f: &File, pos: u64) -> Option<u64> {
    match nix::unistd::lseek(f, pos as i64, nix::unistd::Whence::SeekData) {
        Ok(p) => Some(p as u64),
        Err(Errno::ENXIO) => None,
        Err(_) => Some(pos),
    }
}

/// The run lock, held until dropped.
#[derive(Debug)]
pub struct Lock(#[allow(dead_code)] fcntl::Flock<File>);

/// Takes the run lock at `path` without waiting: `Ok(None)` when another run holds it in
/// a conflicting mode. The file is created (mode 0644) if missing, never through a
/// symlink; a reader that may not write it still takes a shared lock.
pub fn lock(path: &Path, exclusive: bool) -> io::Result<Option<Lock>> {
    let flags = OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let fd = match fcntl::open(
        path,
        flags | OFlag::O_RDWR | OFlag::O_CREAT,
        Mode::from_bits_truncate(0o644),
    ) {
        Err(Errno::EACCES | Errno::EROFS) if !exclusive => {
            fcntl::open(path, flags | OFlag::O_RDONLY, Mode::empty())
        }
        r => r,
    }
    .map_err(io::Error::from)?;
    let arg = if exclusive {
        fcntl::FlockArg::LockExclusiveNonblock
    } else {
        fcntl::FlockArg::LockSharedNonblock
    };
    match fcntl::Flock::lock(File::from(fd), arg) {
        Ok(l) => Ok(Some(Lock(l))),
        Err((_, Errno::EWOULDBLOCK)) => Ok(None),
        Err((_, e)) => Err(e.into()),
    }
}

/// The running machine's hostname.
pub fn hostname() -> Option<String> {
    nix::unistd::gethostname().ok().and_then(|h| h.into_string().ok())
}

/// Asks the CPU to start loading the cache line of `r` (a hint: no effect on what any
/// load returns). The matcher prefetches the table slots of its rare filter hits one
/// block ahead of looking them up, so the lookups do not wait for memory.
#[inline(always)]
#[allow(unsafe_code)]
pub fn prefetch<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` needs SSE, which every x86_64 CPU has; it reads no memory
    // architecturally and cannot fault, and `r` is a valid reference anyway.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            (r as *const T).cast::<i8>(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}
