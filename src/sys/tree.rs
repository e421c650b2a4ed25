//! Removing trees through directory descriptors, for `clean`.
//!
//! Every step opens the next directory relative to the previous one with `openat2(2)`
//! and `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV` (plus `O_NOFOLLOW |
//! O_DIRECTORY`): a symlink planted anywhere, or a directory swapped for one after the
//! plan, makes the open fail instead of redirecting the removal, and no mount point is
//! ever crossed — bind mounts of the same filesystem included, which `st_dev` alone
//! would not reveal. Entries are removed with `unlinkat(2)` relative to their parent's
//! descriptor, so a symlink is removed as a link and its target is never touched; a file
//! that is itself a mount point makes `unlinkat` fail with `EBUSY` and stops the removal.
//! A leftover tmpfs is checked through an `O_PATH` descriptor of its root (another device
//! than its parent's, filesystem type tmpfs) and unmounted by its name under the parent's
//! descriptor (`umount2("/proc/self/fd/N/<name>", UMOUNT_NOFOLLOW)`), so no symlink
//! swapped in on the way can redirect it. (The checking descriptor must be closed first:
//! it would keep the mount busy. A mount stacked on the same path in between, which only
//! a privileged process can make, would be the one unmounted: the remaining window.)

use nix::dir::Type;
use nix::errno::Errno;
use nix::fcntl::{self, AtFlags, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::{self, FileStat, SFlag};
use nix::unistd::{self, UnlinkatFlags};
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Directories nested deeper than this below a removed entry stop the removal (a hostile
/// tree cannot exhaust descriptors or the stack).
pub const MAX_DEPTH: usize = 128;

/// The identity of a file: device and inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Ident {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
}

impl Ident {
    pub(super) fn of(st: &FileStat) -> Ident {
        Ident { dev: st.st_dev, ino: st.st_ino }
    }
}

/// An open directory.
#[derive(Debug)]
pub struct Dir(OwnedFd);

/// Why a removal or an unmount stopped. Paths are node paths, for the report.
#[derive(Debug)]
pub enum Stop {
    /// Something is mounted at this path (a filesystem, or a bind mount).
    Mount(PathBuf),
    /// A symlink where a directory was planned.
    Symlink(PathBuf),
    /// Not the planned file any more (another inode, or another type).
    Changed(PathBuf),
    /// Nested deeper than [`MAX_DEPTH`].
    TooDeep(PathBuf),
    /// An entry a restricted removal may not remove (see [`Dir::remove`]).
    Kept(PathBuf),
    /// The mount at this path is not a tmpfs.
    NotTmpfs(PathBuf),
    /// Any other failure of a system call.
    Io(PathBuf, io::Error),
}

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |p: &PathBuf| crate::text::display_path(p.as_os_str());
        match self {
            Stop::Mount(p) => write!(f, "something is mounted at {}", show(p)),
            Stop::Symlink(p) => write!(f, "{} is a symlink now", show(p)),
            Stop::Changed(p) => write!(f, "{} changed since it was planned", show(p)),
            Stop::TooDeep(p) => write!(f, "{} nests deeper than {MAX_DEPTH} dirs", show(p)),
            Stop::Kept(p) => write!(f, "{} is not kubelet's bookkeeping", show(p)),
            Stop::NotTmpfs(p) => write!(f, "the filesystem mounted at {} is not a tmpfs", show(p)),
            Stop::Io(p, e) => write!(f, "{}: {e}", show(p)),
        }
    }
}

/// What a removal removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Removed {
    /// Non-directory entries unlinked.
    pub files: u64,
    /// Their sizes, summed.
    pub bytes: u64,
    /// Directories removed (the removed entry included).
    pub dirs: u64,
}

/// What [`Dir::visit`] does at an entry, asked by the entry's path before anything of it
/// is touched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Looks at it: gives it to the visitor, or walks into it when it is a directory
    /// (crossing no mount point).
    Look,
    /// Leaves it out, with everything below it.
    Skip,
    /// Walks into the whole tmpfs mounted there (the mount `id` of the mount table), once
    /// checked to be that mount.
    Enter(u64),
}

/// What [`Dir::visit`] meets. Paths are relative to the directory visited.
#[derive(Debug)]
pub enum Met<'a> {
    /// An entry that is not a directory: whether it is a regular file, and its size as
    /// `lstat` says it (a symlink's is the length of its target).
    Entry {
        /// Its path.
        rel: &'a Path,
        /// It is a regular file.
        regular: bool,
        /// Its size.
        size: u64,
    },
    /// What could not be looked at: a directory that could not be opened or listed (a
    /// mount point not entered, a symlink swapped in, nested deeper than [`MAX_DEPTH`]),
    /// or an entry of a type that could not be asked. Nothing below it was seen.
    Error {
        /// Its path.
        rel: &'a Path,
        /// Why.
        error: io::Error,
    },
}

/// What a restricted removal may remove besides directories: called with the path of a
/// non-directory entry relative to the removed entry.
pub type Allow<'a> = &'a dyn Fn(&Path) -> bool;

fn io_err(path: &Path, e: Errno) -> Stop {
    Stop::Io(path.to_path_buf(), io::Error::from(e))
}

impl Dir {
    pub(crate) fn from_fd(fd: OwnedFd) -> Dir {
        Dir(fd)
    }

    /// The identity and modification time (Unix seconds) of the directory.
    pub fn stat(&self) -> io::Result<(Ident, i64)> {
        let st = stat::fstat(&self.0)?;
        Ok((Ident::of(&st), st.st_mtime))
    }

    /// Opens the subdirectory `rel` (one or more components) without crossing a mount
    /// point or passing through a symlink. `shown` is its node path, for errors.
    pub fn open(&self, rel: &Path, shown: &Path) -> Result<Dir, Stop> {
        let how = OpenHow::new()
            .flags(OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC)
            .resolve(
                ResolveFlag::RESOLVE_BENEATH
                    | ResolveFlag::RESOLVE_NO_SYMLINKS
                    | ResolveFlag::RESOLVE_NO_MAGICLINKS
                    | ResolveFlag::RESOLVE_NO_XDEV,
            );
        fcntl::openat2(self.0.as_fd(), rel, how).map(Dir).map_err(|e| match e {
            Errno::EXDEV => Stop::Mount(shown.to_path_buf()),
            Errno::ELOOP => Stop::Symlink(shown.to_path_buf()),
            Errno::ENOTDIR => Stop::Changed(shown.to_path_buf()),
            e => io_err(shown, e),
        })
    }

    /// The identity of the entry `name` as seen through any mount on it (what `stat`
    /// says), or `None` if it is gone.
    pub fn stat_entry(&self, name: &OsStr, shown: &Path) -> Result<Option<(Ident, SFlag)>, Stop> {
        match stat::fstatat(&self.0, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) => {
                Ok(Some((Ident::of(&st), SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT)))
            }
            Err(Errno::ENOENT) => Ok(None),
            Err(e) => Err(io_err(shown, e)),
        }
    }

    /// Unmounts the tmpfs mounted exactly at the entry `name`, if one is: `Ok(false)` when
    /// nothing is mounted there. Refuses a mount that is not a tmpfs.
    pub fn unmount_tmpfs(&self, name: &OsStr, shown: &Path) -> Result<bool, Stop> {
        let how =
            OpenHow::new().flags(OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC).resolve(
                ResolveFlag::RESOLVE_BENEATH
                    | ResolveFlag::RESOLVE_NO_SYMLINKS
                    | ResolveFlag::RESOLVE_NO_MAGICLINKS,
            );
        let fd = match fcntl::openat2(self.0.as_fd(), name, how) {
            Ok(fd) => fd,
            Err(Errno::ENOENT) => return Ok(false),
            Err(Errno::ELOOP) => return Err(Stop::Symlink(shown.to_path_buf())),
            Err(e) => return Err(io_err(shown, e)),
        };
        let here = stat::fstat(&fd).map_err(|e| io_err(shown, e))?;
        let parent = stat::fstat(&self.0).map_err(|e| io_err(shown, e))?;
        // A mount's root is on another device than the directory it is mounted in. (A
        // bind mount of the same filesystem is not a tmpfs left by kubelet: the removal
        // refuses it when it meets it.)
        if here.st_dev == parent.st_dev {
            return Ok(false);
        }
        let fs = nix::sys::statfs::fstatfs(&fd).map_err(|e| io_err(shown, e))?;
        if fs.filesystem_type() != nix::sys::statfs::TMPFS_MAGIC {
            return Err(Stop::NotTmpfs(shown.to_path_buf()));
        }
        // Our descriptor of the mount would keep it busy: the unmount names it through
        // the parent's descriptor instead (which cannot be swapped), not following a
        // symlink swapped in at the last component.
        drop(fd);
        let mut at = OsString::from(format!("/proc/self/fd/{}/", self.0.as_raw_fd()));
        at.push(name);
        nix::mount::umount2(Path::new(&at), nix::mount::MntFlags::UMOUNT_NOFOLLOW)
            .map_err(|e| io_err(shown, e))?;
        Ok(true)
    }

    /// Removes the entry `name` (a directory tree or a single file) of this directory.
    /// `expect` is the identity planned for it: anything else there now is refused.
    /// `allow`, when given, restricts what the tree may hold besides directories: every
    /// entry is checked before the first is removed. `shown` is the entry's node path.
    pub fn remove(
        &self,
        name: &OsStr,
        shown: &Path,
        expect: Option<Ident>,
        allow: Option<Allow<'_>>,
    ) -> Result<Removed, Stop> {
        let mut removed = Removed::default();
        let Some((ident, kind)) = self.stat_entry(name, shown)? else { return Ok(removed) };
        if expect.is_some_and(|e| e != ident) {
            return Err(Stop::Changed(shown.to_path_buf()));
        }
        if kind != SFlag::S_IFDIR {
            if kind == SFlag::S_IFLNK && expect.is_some() {
                return Err(Stop::Symlink(shown.to_path_buf()));
            }
            self.unlink(name, shown, &mut removed)?;
            return Ok(removed);
        }
        let dir = self.open(Path::new(name), shown)?;
        if Ident::of(&stat::fstat(&dir.0).map_err(|e| io_err(shown, e))?) != ident {
            return Err(Stop::Changed(shown.to_path_buf()));
        }
        if let Some(allow) = allow {
            dir.check(shown, Path::new(""), 0, allow)?;
        }
        dir.remove_contents(shown, 0, &mut removed)?;
        drop(dir);
        match unistd::unlinkat(&self.0, name, UnlinkatFlags::RemoveDir) {
            Ok(()) => removed.dirs += 1,
            Err(Errno::EBUSY) => return Err(Stop::Mount(shown.to_path_buf())),
            Err(e) => return Err(io_err(shown, e)),
        }
        Ok(removed)
    }

    /// The entries of this directory (name, type when the filesystem says it).
    fn entries(&self, shown: &Path) -> Result<Vec<(OsString, Option<Type>)>, Stop> {
        self.listed().map_err(|e| io_err(shown, e))
    }

    fn listed(&self) -> nix::Result<Vec<(OsString, Option<Type>)>> {
        // A fresh open file description: listing must not move another reader's offset.
        // Its atime is left alone where permitted (a survey lists without changing).
        let fd = super::walk::without_atime(
            |f| fcntl::openat(&self.0, ".", f, stat::Mode::empty()),
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        )?;
        let mut dir = nix::dir::Dir::from_fd(fd)?;
        let mut out = Vec::new();
        for entry in dir.iter() {
            let entry = entry?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            out.push((OsStr::from_bytes(name).to_os_string(), entry.file_type()));
        }
        Ok(out)
    }

    /// The entries of this directory, sorted by name, with their types (see
    /// [`crate::sys::RootDir::list_dir`]).
    pub fn list(&self) -> io::Result<Vec<(OsString, Option<Type>)>> {
        let mut out = self.listed()?;
        for (name, ty) in out.iter_mut().filter(|(_, t)| t.is_none()) {
            *ty = super::walk::type_below(self.0.as_fd(), name);
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// Gives `met` every entry below this directory that is not a directory, in name order,
    /// never following a symlink: `step` is asked of each entry's path first. Directories
    /// are opened relative to their parent's descriptor crossing no mount point (one met
    /// where `step` says to look is an error), their atimes left alone where permitted;
    /// a whole tmpfs `step` names is entered once checked. At most [`MAX_DEPTH`] levels
    /// are opened (one descriptor each): a directory deeper is an error.
    pub fn visit(&self, step: &dyn Fn(&Path) -> Step, met: &mut dyn FnMut(Met<'_>)) {
        self.visit_below(Path::new(""), 0, step, met);
    }

    fn visit_below(
        &self,
        rel: &Path,
        depth: usize,
        step: &dyn Fn(&Path) -> Step,
        met: &mut dyn FnMut(Met<'_>),
    ) {
        let entries = match self.list() {
            Ok(entries) => entries,
            Err(error) => return met(Met::Error { rel, error }),
        };
        for (name, ty) in entries {
            let path = rel.join(&name);
            let opened = match (step(&path), ty) {
                (Step::Skip, _) => continue,
                (Step::Look, Some(Type::Directory)) | (Step::Enter(_), _) if depth >= MAX_DEPTH => {
                    Err(io::Error::other(format!("nests deeper than {MAX_DEPTH} dirs; not walked")))
                }
                (Step::Enter(id), _) => super::walk::mount_root(self.0.as_fd(), &name, id, true)
                    .and_then(|root| Ok(super::walk::open_dir_below(root.as_fd(), ".")?)),
                (Step::Look, Some(Type::Directory)) => {
                    super::walk::open_dir_below(self.0.as_fd(), name.as_os_str()).map_err(|e| {
                        match e {
                            Errno::EXDEV => io::Error::other("a mount point; not walked"),
                            e => e.into(),
                        }
                    })
                }
                (Step::Look, Some(t)) => {
                    let size =
                        stat::fstatat(&self.0, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW)
                            .map_or(0, |st| st.st_size.max(0) as u64);
                    met(Met::Entry { rel: &path, regular: t == Type::File, size });
                    continue;
                }
                // A mount point, or a type the filesystem did not say and that could not
                // be asked without crossing one.
                (Step::Look, None) => Err(io::Error::other("of a type that cannot be asked")),
            };
            match opened {
                Ok(fd) => Dir(fd).visit_below(&path, depth + 1, step, met),
                Err(error) => met(Met::Error { rel: &path, error }),
            }
        }
    }

    /// Whether `name` is a directory (asking the filesystem when the entry did not say).
    fn is_dir(&self, name: &OsStr, ty: Option<Type>, shown: &Path) -> Result<Option<bool>, Stop> {
        match ty {
            Some(Type::Directory) => Ok(Some(true)),
            Some(_) => Ok(Some(false)),
            None => Ok(self.stat_entry(name, shown)?.map(|(_, k)| k == SFlag::S_IFDIR)),
        }
    }

    fn check(&self, shown: &Path, rel: &Path, depth: usize, allow: Allow<'_>) -> Result<(), Stop> {
        for (name, ty) in self.entries(shown)? {
            let (path, rel) = (shown.join(&name), rel.join(&name));
            match self.is_dir(&name, ty, &path)? {
                None => {}
                Some(true) if depth >= MAX_DEPTH => return Err(Stop::TooDeep(path)),
                Some(true) => {
                    self.open(Path::new(&name), &path)?.check(&path, &rel, depth + 1, allow)?
                }
                Some(false) if allow(&rel) => {}
                Some(false) => return Err(Stop::Kept(path)),
            }
        }
        Ok(())
    }

    fn remove_contents(
        &self,
        shown: &Path,
        depth: usize,
        removed: &mut Removed,
    ) -> Result<(), Stop> {
        for (name, ty) in self.entries(shown)? {
            let path = shown.join(&name);
            match self.is_dir(&name, ty, &path)? {
                None => {}
                Some(true) if depth >= MAX_DEPTH => return Err(Stop::TooDeep(path)),
                Some(true) => {
                    self.open(Path::new(&name), &path)?.remove_contents(
                        &path,
                        depth + 1,
                        removed,
                    )?;
                    match unistd::unlinkat(&self.0, name.as_os_str(), UnlinkatFlags::RemoveDir) {
                        Ok(()) | Err(Errno::ENOENT) => removed.dirs += 1,
                        Err(Errno::EBUSY) => return Err(Stop::Mount(path)),
                        Err(e) => return Err(io_err(&path, e)),
                    }
                }
                Some(false) => self.unlink(&name, &path, removed)?,
            }
        }
        Ok(())
    }

    fn unlink(&self, name: &OsStr, shown: &Path, removed: &mut Removed) -> Result<(), Stop> {
        let size = stat::fstatat(&self.0, name, AtFlags::AT_SYMLINK_NOFOLLOW)
            .map_or(0, |st| st.st_size.max(0) as u64);
        match unistd::unlinkat(&self.0, name, UnlinkatFlags::NoRemoveDir) {
            Ok(()) => {
                removed.files += 1;
                removed.bytes += size;
                Ok(())
            }
            Err(Errno::ENOENT) => Ok(()),
            Err(Errno::EBUSY) => Err(Stop::Mount(shown.to_path_buf())),
            Err(e) => Err(io_err(shown, e)),
        }
    }
}
