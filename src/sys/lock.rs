//! The run lock: one kresidue run at a time on each node root. Its file and dir are
//! resolved, and its dir made, by the one writer (`output.rs`).

use super::output::{others_may_write, resolve_output, MakeDirs, PlaceKind};
use nix::errno::Errno;
use nix::fcntl::{self, OFlag};
use nix::sys::stat::Mode;
use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;

/// The run lock, held until dropped. A lock that goes with its release
/// ([`lock`]'s `remove`) is unlinked first, while still held.
#[derive(Debug)]
pub struct Lock {
    file: fcntl::Flock<File>,
    /// Its dir and name, when it is removed on release.
    remove: Option<(OwnedFd, OsString)>,
}

impl Drop for Lock {
    fn drop(&mut self) {
        // Only the file this run holds: a run that opened it before the unlink and took
        // it after finds it gone from its name, and tries again (see [`lock`]).
        if let Some((dir, name)) = &self.remove {
            if same_inode(dir, name, &self.file) {
                let flags = nix::unistd::UnlinkatFlags::NoRemoveDir;
                let _ = nix::unistd::unlinkat(dir, name.as_os_str(), flags);
            }
        }
    }
}

/// The dir of the run locks of runs as root when none is named: only root can enter it,
/// so no other user can open a lock in it, let alone hold it. Each node root has its own
/// lock there (`crate::config`).
pub const ROOT_LOCK_DIR: &str = "/run/kresidue";

/// Why the run lock was not taken.
#[derive(Debug)]
pub enum LockError {
    /// It cannot be made or opened here (its dir's parent is missing, not this user's to
    /// write, read-only): a run that need not hold it runs without.
    Unavailable(io::Error),
    /// It is where another user could hold or replace it (a dir others may write, a
    /// file of another user's or that others may write, a symlink): refused, whatever
    /// the run.
    Unsafe(String),
}

/// Takes the run lock at `path`, exclusively and without waiting: `Ok(None)` when
/// another run holds it. Anyone who can open a file can `flock` it, so the lock's dir
/// and file must be owned by this user or root and writable by no one else (a lock in
/// `/run/lock`, mode 1777, is refused). The path is resolved by the one writer
/// ([`resolve_output`]): never through another user's symlink in a sticky world-writable
/// dir, and the lock's dir made (mode 0700) beneath its checked parent when it alone is
/// missing. The file is created with mode 0600, opened read-only, never through a symlink
/// and without blocking (a FIFO planted in its place cannot hang a run), and must be a
/// regular file. With `remove`, the file is unlinked when the lock is released (one lock
/// per node root would otherwise pile up); a lock is held only once the file taken is
/// still the one its name gives, so a run that took a file unlinked meanwhile tries again.
pub fn lock(path: &Path, remove: bool) -> Result<Option<Lock>, LockError> {
    use super::output::{ProtectedSymlink, SymlinkNotFollowed};
    use LockError::{Unavailable, Unsafe};
    let shown = path.display();
    let Some(name) = path.file_name() else {
        return Err(Unsafe(format!("the lock {shown} does not name a file")));
    };
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let place = match resolve_output(path, false, Some(MakeDirs { mode: 0o700, most: 1 })) {
        Ok(place) => place,
        Err(e) if e.get_ref().is_some_and(|i| i.is::<SymlinkNotFollowed>()) => {
            return Err(Unsafe(format!("the lock {shown} is a symlink")))
        }
        Err(e) if e.get_ref().is_some_and(|i| i.is::<ProtectedSymlink>()) => {
            return Err(Unsafe(format!("the lock {shown}: on its way, {e}")))
        }
        Err(e) if matches!(e.raw_os_error(), Some(nix::libc::ELOOP | nix::libc::ENOTDIR)) => {
            return Err(Unsafe(format!(
                "the lock's dir {} is not a directory, or its symlinks loop",
                dir.display()
            )))
        }
        Err(e) => return Err(Unavailable(e)),
    };
    if !matches!(place.kind, PlaceKind::Missing | PlaceKind::Regular) {
        return Err(Unsafe(format!("the lock {shown} is not a regular file")));
    }
    // `O_PATH`: a dir this user may enter but not list (mode 0711) holds a lock as well.
    let dir_fd = place.dir;
    let st = nix::sys::stat::fstat(&dir_fd).map_err(|e| Unavailable(e.into()))?;
    if let Some(why) = others_may_write(&st) {
        return Err(Unsafe(format!(
            "the lock's dir {} {why}: another user could hold or replace the lock",
            dir.display()
        )));
    }
    let flags =
        OFlag::O_RDONLY | OFlag::O_CREAT | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    // Each try but the last lost its file to a run that released it (and unlinked it)
    // between this run's open and its flock: a few in a row is already unlikely.
    for _ in 0..64 {
        let file = match fcntl::openat(&dir_fd, name, flags, Mode::S_IRUSR | Mode::S_IWUSR) {
            Ok(fd) => File::from(fd),
            Err(Errno::ELOOP) => return Err(Unsafe(format!("the lock {shown} is a symlink"))),
            Err(e) => return Err(Unavailable(e.into())),
        };
        let st = nix::sys::stat::fstat(&file).map_err(|e| Unavailable(e.into()))?;
        if st.st_mode & nix::libc::S_IFMT != nix::libc::S_IFREG {
            return Err(Unsafe(format!("the lock {shown} is not a regular file")));
        }
        if let Some(why) = others_may_write(&st) {
            return Err(Unsafe(format!("the lock {shown} {why}: another user could hold it")));
        }
        let file = match fcntl::Flock::lock(file, fcntl::FlockArg::LockExclusiveNonblock) {
            Ok(l) => l,
            Err((_, Errno::EWOULDBLOCK)) => return Ok(None),
            Err((_, e)) => return Err(Unavailable(e.into())),
        };
        if same_inode(&dir_fd, name, &file) {
            let remove = remove.then(|| (dir_fd, name.to_owned()));
            return Ok(Some(Lock { file, remove }));
        }
    }
    Err(Unavailable(io::Error::other("its file kept being replaced")))
}

/// True when `name` in `dir` is still `file` (not followed if a symlink).
fn same_inode(dir: &OwnedFd, name: &std::ffi::OsStr, file: &File) -> bool {
    use nix::sys::stat::{fstat, fstatat};
    let named = fstatat(dir, name, fcntl::AtFlags::AT_SYMLINK_NOFOLLOW);
    match (named, fstat(file)) {
        (Ok(a), Ok(b)) => (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino),
        _ => false,
    }
}
