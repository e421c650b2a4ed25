//! The one home of system calls (through `nix`), and nothing but them: opening files
//! confined beneath the scanned root, link reading, filesystem type, hole skipping,
//! read-ahead advice, priorities, stop signals, the clock, hostname; `output.rs` is the one
//! writer of every file the product writes (resolved without trusting another user's
//! symlinks, dirs made beneath checked descriptors) and `lock.rs` the run lock taken
//! through it (both re-exported here); [`walk`] walks the scanned trees by
//! directory descriptors, [`tree`] removes trees through them and unmounts for `clean`, and
//! [`mount`] reads the mount table. Pure computation lives with its users (the SIMD byte
//! masks and the cache prefetch hint in `matcher::simd`, the log-line masks in
//! `node::logs`). `unsafe` code here is only for calls with no safe binding in `nix`
//! (`getdents64`, `statx`, `open_tree`, `cachestat`, `mincore`'s mapping, the
//! priorities); the rest is in the SIMD kernels of `matcher::simd`,
//! `rules::teddy` and `node::logs`, each block with its `SAFETY` reason.
//!
//! Confinement: every file is opened with `openat2(2)` relative to a descriptor of the
//! root, or of a directory opened that way from it, with `RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS` and `O_NOFOLLOW | O_NONBLOCK`, so the kernel refuses any path that
//! would leave the root or pass through a symlink, even if a directory is swapped for a
//! symlink between the walk and the open (a directory moved out of the root while its
//! files wait to be read is read where it went: see [`walk`]). `O_NONBLOCK`
//! makes opening a FIFO that slipped in (type changed after the walk) return at once;
//! the caller then checks what it opened with `fstat` and closes anything that is not the
//! regular file it walked.

mod bytes;
pub mod cache;
pub mod image;
mod lock;
pub mod mount;
mod output;
mod rate;
pub mod tree;
pub mod walk;

pub use bytes::{be16, be32, be64, le16, le32, le64, Bytes, ReadError, Window};
pub use lock::{lock, Lock, LockError, ROOT_LOCK_DIR};
pub use output::{
    open_append, open_output, read_private, resolve_output, write_private, MakeDirs, Output,
    Patient, Place, PlaceKind, ProtectedSymlink, Stopped, SymlinkNotFollowed, TempFile,
};
pub use rate::set_max_read_rate;

use nix::errno::Errno;
use nix::fcntl::{self, OFlag};
use nix::sys::stat::{Mode, SFlag};
use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

/// An open descriptor of the scan root, its canonical path, and the mount table (read
/// once, when first needed). A clone shares both.
///
/// Nothing on a FUSE or network filesystem is ever opened through it (see
/// [`mount::Mount::is_remote`]): every open by path is checked against the mount table
/// first, and [`RootDir::resolve`] stops at such a mount.
#[derive(Clone, Debug)]
pub struct RootDir {
    /// The root's descriptor; `None` for an image's tree.
    fd: Option<std::sync::Arc<walk::DirFd>>,
    /// The tree of an image the root is (a disk image's filesystem): every path is read
    /// through it, nothing on the host.
    image: Option<image::Image>,
    path: PathBuf,
    mounts: std::sync::Arc<mount::Table>,
}

impl RootDir {
    /// Opens `path` (which must be a directory) as the root of everything read; refused
    /// on a FUSE or network filesystem.
    pub fn open(path: &Path) -> io::Result<RootDir> {
        let mounts = std::sync::Arc::new(mount::Table::default());
        let remote = |p: &Path| match mounts.remote_over(p) {
            Some(m) => Err(remote_error(m)),
            None => Ok(()),
        };
        remote(&std::path::absolute(path)?)?;
        let canonical = std::fs::canonicalize(path)?;
        remote(&canonical)?;
        let fd = fcntl::open(
            &canonical,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(io::Error::from)?;
        Ok(RootDir { fd: Some(walk::DirFd::new(fd)), image: None, path: canonical, mounts })
    }

    /// The filesystem of the dir `rel` (relative to the root, no symlink in it) as a root
    /// of its own with nothing mounted on it: what the mounts below `rel` hide. It is a
    /// detached, non-recursive bind of `rel` (`open_tree(2)` with `OPEN_TREE_CLONE`, no
    /// `AT_RECURSIVE`): nothing is mounted in any namespace, and it is gone when its last
    /// descriptor closes. Needs `CAP_SYS_ADMIN` (Linux 5.2).
    pub fn beneath_mounts(&self, rel: &Path) -> io::Result<RootDir> {
        use nix::libc;
        use std::os::fd::{AsRawFd, FromRawFd};
        const OPEN_TREE_CLONE: libc::c_uint = 1;
        // Never a FUSE or network filesystem (a dead server would hang the clone).
        self.refuse_remote(rel)?;
        let rel = if rel.as_os_str().is_empty() { Path::new(".") } else { rel };
        let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let dir = walk::open_beneath(self.fd()?, rel, flags).map_err(io::Error::from)?;
        let tree_flags =
            OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | libc::AT_EMPTY_PATH as libc::c_uint;
        #[allow(unsafe_code)]
        // SAFETY: open_tree takes a descriptor, a NUL-terminated path that outlives the
        // call and integer flags; it returns a new descriptor or -1 with errno.
        let fd = unsafe {
            libc::syscall(libc::SYS_open_tree, dir.as_raw_fd(), c"".as_ptr(), tree_flags)
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let fd = i32::try_from(fd).map_err(|_| io::Error::other("open_tree: a bad descriptor"))?;
        #[allow(unsafe_code)]
        // SAFETY: `fd` was just returned by open_tree, is open, and owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let path = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
        let mounts = std::sync::Arc::new(mount::Table::empty());
        Ok(RootDir { fd: Some(walk::DirFd::new(fd)), image: None, path, mounts })
    }

    /// The tree of an image as the root: nothing mounted, no runtime, every file read
    /// through the image's reader; its path is `/` (an absolute symlink in it points
    /// into it).
    pub fn of_image(tree: std::sync::Arc<dyn image::Tree>) -> RootDir {
        RootDir {
            fd: None,
            image: Some(image::Image::new(tree)),
            path: PathBuf::from("/"),
            mounts: std::sync::Arc::new(mount::Table::empty()),
        }
    }

    /// Whether the root is an image's tree.
    pub fn is_image(&self) -> bool {
        self.image.is_some()
    }

    /// Where `rel` lies in the root's image, when that orders its reads
    /// ([`image::Tree::position`]); none on a host.
    pub fn position(&self, rel: &Path) -> Option<u64> {
        self.image.as_ref().and_then(|i| i.tree.position(rel))
    }

    /// The root's descriptor; an image's tree has none.
    fn fd(&self) -> io::Result<std::os::fd::BorrowedFd<'_>> {
        match &self.fd {
            Some(fd) => Ok(fd.as_fd()),
            None => Err(io::Error::other("not done in an image (nothing of it is mounted)")),
        }
    }

    /// The mount table of this run.
    pub fn mounts(&self) -> &mount::Table {
        &self.mounts
    }

    /// Whether a filesystem is mounted at `rel` (relative to the root, no symlink in it),
    /// as the mount table says.
    pub fn is_mount_point(&self, rel: &Path) -> bool {
        self.mounts.at(&self.path.join(rel)).is_some()
    }

    /// Refuses `rel` (relative to the root, no symlink in it) when it is on or below a FUSE
    /// or network filesystem.
    fn refuse_remote(&self, rel: &Path) -> io::Result<()> {
        let mut host = self.path.clone();
        for c in rel.components() {
            match c {
                // Beneath the root only (the open refuses more).
                std::path::Component::ParentDir if host != self.path => {
                    host.pop();
                }
                std::path::Component::Normal(n) => host.push(n),
                _ => {}
            }
        }
        match self.mounts.remote_over(&host) {
            Some(m) => Err(remote_error(m)),
            None => Ok(()),
        }
    }

    /// Resolves the node path `node` to a path relative to the root with no symlink in it,
    /// one name at a time: symlinks on the way (`/var/lib/kubelet → /data/kubelet`) are
    /// followed while they stay inside the root (an absolute target is a path of this
    /// process's view, as the kernel reads it). Nothing on a FUSE or network filesystem is
    /// looked up: at such a mount the rest of `node` is taken as written (the walk then
    /// leaves it unread).
    pub fn resolve(&self, node: &Path) -> io::Result<PathBuf> {
        use std::path::Component;
        let mut todo: Vec<OsString> = Vec::new();
        let push = |todo: &mut Vec<OsString>, p: &Path| {
            for c in p.components().rev() {
                match c {
                    Component::Normal(n) => todo.push(n.to_owned()),
                    Component::ParentDir => todo.push("..".into()),
                    _ => {}
                }
            }
        };
        push(&mut todo, node);
        let mut rel = PathBuf::new();
        let mut links = 0;
        while let Some(name) = todo.pop() {
            if name == ".." {
                rel.pop();
                continue;
            }
            let next = rel.join(&name);
            if self.mounts.remote_over(&self.path.join(&next)).is_some() {
                rel = next;
                while let Some(name) = todo.pop() {
                    rel.push(name);
                }
                return Ok(rel);
            }
            if self.lstat(&next)?.kind != Kind::Symlink {
                rel = next;
                continue;
            }
            links += 1;
            if links > 40 {
                return Err(io::Error::from_raw_os_error(nix::libc::ELOOP));
            }
            let target = PathBuf::from(self.read_link(&next)?);
            if target.is_absolute() {
                let inside = target.strip_prefix(&self.path).map_err(|_| {
                    io::Error::new(
                        io::ErrorKind::PermissionDenied,
                        "resolves outside the root; not followed",
                    )
                })?;
                rel = PathBuf::new();
                push(&mut todo, inside);
            } else {
                push(&mut todo, &target);
            }
        }
        Ok(rel)
    }

    /// The canonical absolute path of the root.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The root dir's device and inode: one tree has one, whatever path (a symlink, a bind
    /// mount) it is reached by.
    pub fn identity(&self) -> io::Result<(u64, u64)> {
        let st = nix::sys::stat::fstat(self.fd()?)?;
        Ok((st.st_dev, st.st_ino))
    }

    /// Where the node path `node` is in this process's view: beneath the root.
    pub fn host(&self, node: &Path) -> PathBuf {
        self.path.join(node.strip_prefix("/").unwrap_or(node))
    }

    /// The node path of `host`, a path of this process's view beneath the root (as is,
    /// when it is not beneath it).
    pub fn node(&self, host: &Path) -> PathBuf {
        Path::new("/").join(host.strip_prefix(&self.path).unwrap_or(host))
    }

    /// Opens the regular file at `rel` (relative to the root) for reading, never following
    /// a symlink and never leaving the root; atime is not updated where permitted.
    pub fn open_file(&self, rel: &Path) -> io::Result<image::NodeFile> {
        if let Some(img) = &self.image {
            return img.open(rel);
        }
        self.refuse_remote(rel)?;
        walk::open_file_beneath(self.fd()?, rel).map(image::NodeFile::host)
    }

    /// Opens the file at `rel` (relative to the root) as [`RootDir::open_file`] does and
    /// checks, with `fstat` on what was opened, that it is a regular file of at most
    /// `cap` bytes; returns it and its size. Every node file read outside the walk
    /// (runtime records, databases, `etc/hostname`) is opened here, so a FIFO, a device
    /// (`/dev/zero` as `meta.db`) or a file larger than its reader holds is refused with
    /// one clear error before a byte is read (`O_NONBLOCK`: opening a FIFO does not wait).
    pub fn open_regular(&self, rel: &Path, cap: u64) -> io::Result<(image::NodeFile, u64)> {
        if let Some(img) = &self.image {
            let st = img.tree.lstat(rel)?;
            if st.kind != Kind::File {
                return Err(io::Error::other("not a regular file"));
            }
            if st.size > cap {
                return Err(io::Error::other(format!("larger than {cap} bytes; not read")));
            }
            return Ok((img.open(rel)?, st.size));
        }
        self.refuse_remote(rel)?;
        let f = walk::open_file_beneath(self.fd()?, rel)?;
        let st = nix::sys::stat::fstat(&f)?;
        let kind = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
        if kind != SFlag::S_IFREG {
            return Err(io::Error::other(format!("not a regular file ({})", kind_name(kind))));
        }
        let size = st.st_size as u64;
        if size > cap {
            return Err(io::Error::other(format!("larger than {cap} bytes; not read")));
        }
        Ok((image::NodeFile::host(f), size))
    }

    /// The bytes of the regular file at `rel` (relative to the root), at most `cap` of
    /// them: opened through [`RootDir::open_regular`] (a larger file, or anything but a
    /// regular file, is an error), read up to the size it had when opened (a file growing
    /// meanwhile cannot make it read more).
    pub fn read_file(&self, rel: &Path, cap: u64) -> io::Result<Vec<u8>> {
        use std::io::Read;
        let (f, size) = self.open_regular(rel, cap)?;
        let mut data = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        f.take(size).read_to_end(&mut data)?;
        Ok(data)
    }

    /// The entries of the directory at `rel` (relative to the root; `""` is the root),
    /// listed through a descriptor opened as [`RootDir::open_dir`] opens it (never through
    /// a symlink, never leaving the root), with what each is (`lstat`: a symlink is a
    /// symlink). Every listing of a node dir outside the walk goes through here.
    pub fn list(&self, rel: &Path) -> io::Result<Vec<(OsString, Kind)>> {
        use nix::dir::Type;
        let kind = |t: Option<Type>| match t {
            Some(Type::Directory) => Kind::Dir,
            Some(Type::File) => Kind::File,
            Some(Type::Symlink) => Kind::Symlink,
            // A device, FIFO or socket; or a mount point, never entered to ask.
            _ => Kind::Other,
        };
        let entries = self.list_dir(rel)?;
        Ok(entries.into_iter().map(|(name, t)| (name, kind(t))).collect())
    }

    /// What is at `rel` (relative to the root; `""` is the root), as `lstat` says it:
    /// asked of an `O_PATH` descriptor opened beneath the root without following a symlink
    /// (one at `rel` is the symlink, one on the way an error), nothing on a FUSE or network
    /// filesystem. Mount points are crossed, at `rel` too: a mount point is what is mounted
    /// there.
    pub fn lstat(&self, rel: &Path) -> io::Result<Lstat> {
        if let Some(img) = &self.image {
            let st = img.tree.lstat(rel)?;
            let ident = tree::Ident { dev: img.dev, ino: img.ino(rel) };
            return Ok(Lstat { kind: st.kind, ident, size: st.size });
        }
        let fd = self.open_beneath(rel, OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC)?;
        let st = nix::sys::stat::fstat(&fd)?;
        let kind = match SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT {
            SFlag::S_IFDIR => Kind::Dir,
            SFlag::S_IFREG => Kind::File,
            SFlag::S_IFLNK => Kind::Symlink,
            _ => Kind::Other,
        };
        Ok(Lstat { kind, ident: tree::Ident::of(&st), size: st.st_size.max(0) as u64 })
    }

    /// Walks the tree at `rel` (relative to the root; a directory or a file) by directory
    /// descriptors, never through a symlink (see [`walk`]).
    pub fn walk(&self, rel: &Path) -> walk::Walker {
        match (&self.image, &self.fd) {
            (Some(img), _) => walk::Walker::Image(img.walk(rel)),
            (None, Some(fd)) => {
                walk::Walker::Host(walk::Walk::new(fd, rel, None, walk::Start::Crossing))
            }
            (None, None) => walk::Walker::Image(image::ImageWalk::empty()),
        }
    }

    /// Walks the tree at `rel` like [`RootDir::walk`], entering the mount points below it
    /// that `policy` lets it enter (see [`walk`]); the others are left unread. `start`
    /// says whether a mount point at `rel` itself is crossed or is the policy's too.
    pub fn walk_mounts(
        &self,
        rel: &Path,
        policy: walk::Policy,
        start: walk::Start,
    ) -> walk::Walker {
        match (&self.image, &self.fd) {
            (Some(img), _) => walk::Walker::Image(img.walk(rel)),
            (None, Some(fd)) => walk::Walker::Host(walk::Walk::new(fd, rel, Some(policy), start)),
            (None, None) => walk::Walker::Image(image::ImageWalk::empty()),
        }
    }

    /// Reads the target of the symlink at `rel`, resolving its parent beneath the root.
    pub fn read_link(&self, rel: &Path) -> io::Result<OsString> {
        let (parent, name) = match (rel.parent(), rel.file_name()) {
            (Some(p), Some(n)) => (p, n),
            _ => return Err(io::Error::from(io::ErrorKind::InvalidInput)),
        };
        if let Some(img) = &self.image {
            return img.tree.read_link(rel);
        }
        let dir = if parent.as_os_str().is_empty() {
            self.fd()?.try_clone_to_owned()?
        } else {
            self.open_beneath(parent, OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)?
        };
        fcntl::readlinkat(dir.as_fd(), name).map_err(io::Error::from)
    }

    /// Opens the directory at `rel` (relative to the root; `""` is the root itself),
    /// never through a symlink and never leaving the root. Mount points may be crossed
    /// on the way (kubelet's dir is often a filesystem of its own).
    pub fn open_dir(&self, rel: &Path) -> io::Result<tree::Dir> {
        let rel = if rel.as_os_str().is_empty() { Path::new(".") } else { rel };
        self.refuse_remote(rel)?;
        // Listing it leaves its atime alone where permitted.
        let fd = walk::open_dir_beneath(self.fd()?, rel)?;
        Ok(tree::Dir::from_fd(fd))
    }

    /// The entries of the directory at `rel` (relative to the root), sorted by name, with
    /// their types: as the listing says them, or asked of an `O_PATH` descriptor that
    /// crosses no mount point (`None` for a mount point, or when it cannot be asked).
    /// Opened like [`RootDir::open_dir`]: its atime is left alone where permitted.
    pub fn list_dir(&self, rel: &Path) -> io::Result<Vec<(OsString, Option<nix::dir::Type>)>> {
        use nix::dir::Type;
        if let Some(img) = &self.image {
            let kind = |k| match k {
                Kind::Dir => Some(Type::Directory),
                Kind::File => Some(Type::File),
                Kind::Symlink => Some(Type::Symlink),
                Kind::Other => None,
            };
            return Ok(img.list(rel)?.into_iter().map(|(n, k)| (n, kind(k))).collect());
        }
        self.open_dir(rel)?.list()
    }

    /// The unix socket at the node path `node`, found beneath the root: resolved as
    /// [`RootDir::resolve`] resolves (symlinks on the way followed while they stay inside
    /// the root; one leading out is an error), its directory held open. What is at its
    /// name must be a socket now, and is checked again at each [`Socket::open`].
    pub fn socket(&self, node: &Path) -> io::Result<Socket> {
        let rel = self.resolve(node)?;
        let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        };
        let dir =
            self.open_beneath(parent, OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)?;
        let socket = Socket {
            dir: std::sync::Arc::new(dir),
            name: name.to_owned(),
            path: self.path.join(&rel),
        };
        socket.open()?;
        Ok(socket)
    }

    fn open_beneath(&self, rel: &Path, flags: OFlag) -> io::Result<OwnedFd> {
        let rel = if rel.as_os_str().is_empty() { Path::new(".") } else { rel };
        self.refuse_remote(rel)?;
        walk::open_beneath(self.fd()?, rel, flags).map_err(io::Error::from)
    }
}

/// A unix socket beneath the root ([`RootDir::socket`]): its directory, held open, and
/// its name in it. Connecting by its path would follow a symlink swapped in on the way
/// meanwhile; [`Socket::open`] gives a path that names the socket's inode itself.
#[derive(Clone, Debug)]
pub struct Socket {
    dir: std::sync::Arc<OwnedFd>,
    name: OsString,
    path: PathBuf,
}

impl PartialEq for Socket {
    fn eq(&self, other: &Socket) -> bool {
        std::sync::Arc::ptr_eq(&self.dir, &other.dir) && self.name == other.name
    }
}

impl Eq for Socket {}

impl Socket {
    /// Where it was found, in this process's view (beneath the root, no symlink in it).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// An `O_PATH` descriptor of what is at the socket's name now, opened beneath its
    /// directory without following a symlink (one there is refused, as is anything but a
    /// socket), and the path to connect to it by while the descriptor is open:
    /// `/proc/self/fd/N`, which names that inode. A runtime that restarted made a new
    /// socket at the name: each connection opens it again.
    pub fn open(&self) -> io::Result<(OwnedFd, PathBuf)> {
        use std::os::fd::AsRawFd;
        let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = walk::open_beneath(self.dir.as_fd(), self.name.as_os_str(), flags)?;
        let st = nix::sys::stat::fstat(&fd)?;
        let kind = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
        match kind {
            SFlag::S_IFSOCK => {}
            SFlag::S_IFLNK => return Err(io::Error::other("a symlink; not followed")),
            _ => return Err(io::Error::other(format!("not a socket ({})", kind_name(kind)))),
        }
        let path = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
        Ok((fd, path))
    }
}

/// What an entry is ([`RootDir::list`], [`RootDir::lstat`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// A directory.
    Dir,
    /// A regular file.
    File,
    /// A symlink (never followed).
    Symlink,
    /// A FIFO, socket or device.
    Other,
}

/// What [`RootDir::lstat`] says of an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lstat {
    /// What it is.
    pub kind: Kind,
    /// Its device and inode.
    pub ident: tree::Ident,
    /// Its size (a symlink's is the length of its target).
    pub size: u64,
}

/// The name a person knows a file type by, for errors.
fn kind_name(kind: SFlag) -> &'static str {
    match kind {
        SFlag::S_IFDIR => "directory",
        SFlag::S_IFREG => "regular file",
        SFlag::S_IFCHR => "character device",
        SFlag::S_IFBLK => "block device",
        SFlag::S_IFIFO => "FIFO",
        SFlag::S_IFSOCK => "socket",
        SFlag::S_IFLNK => "symlink",
        _ => "unknown type",
    }
}

/// The error of an open refused on a FUSE or network filesystem.
fn remote_error(m: &mount::Mount) -> io::Error {
    io::Error::other(format!("on a {} filesystem (never read)", m.fstype))
}

/// Raises this process's soft limit of open descriptors to its hard limit (at most 2^20)
/// and lets the walk keep about half of it for directories whose files wait to be read
/// (see [`walk::set_descriptor_budget`]).
pub fn raise_open_files_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else { return };
    let want = hard.min(1 << 20).max(soft);
    let soft = match setrlimit(Resource::RLIMIT_NOFILE, want, hard) {
        Ok(()) => want,
        Err(_) => soft,
    };
    // Half the limit, less what the walk's own directories and everything else may hold.
    let half = usize::try_from(soft / 2).unwrap_or(usize::MAX);
    walk::set_descriptor_budget(half.saturating_sub(walk::MAX_OPEN + 32).max(16));
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

/// Where the first hole at or after `pos` begins (the end of the file counts as one);
/// `None` where the filesystem cannot say. Moves the file's offset.
pub fn next_hole(f: &File, pos: u64) -> Option<u64> {
    let pos = i64::try_from(pos).ok()?;
    nix::unistd::lseek(f, pos, nix::unistd::Whence::SeekHole).ok().map(|p| p as u64)
}

/// True when `f` has a hole before `size` (a sparse file). Filesystems without hole
/// support say no. The file's offset is left at 0 (`SEEK_HOLE` moves it).
pub fn has_hole(f: &File, size: u64) -> bool {
    let hole = next_hole(f, 0).is_some_and(|h| h < size);
    let _ = nix::unistd::lseek(f, 0, nix::unistd::Whence::SeekSet);
    hole
}

/// Whether this process sees the node's mounts. The reference is the runtime's process
/// `runtime_pid`, found through the CRI socket's peer credentials: it is visible only from
/// the node's PID namespace (a container's own init cannot be it). This process must be
/// in the runtime's mount namespace, or, the runtime being visible, in PID 1's (a runtime
/// with a private mount namespace of its own, or a socket-activated one whose listener is
/// PID 1). Fails closed: a namespace that cannot be read, or a runtime process that is not
/// visible, is a reason to refuse, in one line.
pub fn same_mount_namespace(runtime_pid: Option<i32>) -> Result<(), String> {
    let ns = |pid: &str| std::fs::read_link(format!("/proc/{pid}/ns/mnt"));
    let own = ns("self").map_err(|e| format!("cannot read this process's mount namespace: {e}"))?;
    let Some(pid) = runtime_pid else {
        return Err("the runtime's process is not visible from here (another PID namespace, or its listener is gone), so its mount namespace cannot be compared with this one".to_owned());
    };
    let runtime = ns(&pid.to_string());
    if runtime.as_ref().is_ok_and(|r| *r == own) {
        return Ok(());
    }
    // The runtime is visible: this is the node's PID namespace, and PID 1 the node's init.
    match (ns("1"), runtime) {
        (Ok(init), _) if init == own => Ok(()),
        (_, Ok(_)) => Err(format!(
            "this process is in another mount namespace than the runtime's process (pid {pid})"
        )),
        (_, Err(e)) => Err(format!(
            "cannot read the mount namespace of the runtime's process (pid {pid}): {e}"
        )),
    }
}

/// The container ids whose processes this machine runs now, as their cgroups name them:
/// every 64-hex-digit name in a `/proc/<pid>/cgroup` path (Docker's `docker/<id>` and
/// `docker-<id>.scope`, Podman's `libpod-<id>`, CRI-O's `crio-<id>`, containerd's
/// `cri-containerd-<id>.scope` and `kubepods/…/<id>`). Empty where no process of the node's
/// is visible (another PID namespace). At most `max_procs` processes are read.
pub fn running_container_ids(max_procs: usize) -> std::collections::HashSet<String> {
    let mut ids = std::collections::HashSet::new();
    let Ok(procs) = std::fs::read_dir("/proc") else { return ids };
    let pids = procs
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit())));
    for pid in pids.take(max_procs) {
        let Ok(text) = std::fs::read_to_string(pid.path().join("cgroup")) else { continue };
        let names = text.split(|c: char| !c.is_ascii_hexdigit());
        ids.extend(names.filter(|n| n.len() == 64).map(str::to_ascii_lowercase));
    }
    ids
}

/// Seconds since the Unix epoch by the system clock (0 if the clock is before it).
pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Nanoseconds since the Unix epoch by the system clock (0 if the clock is before it).
pub fn unix_now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// The running machine's hostname.
pub fn hostname() -> Option<String> {
    nix::unistd::gethostname().ok().and_then(|h| h.into_string().ok())
}

/// Tells the kernel `f` will be read from start to end (`POSIX_FADV_SEQUENTIAL`: a larger
/// read-ahead). A hint: failure changes nothing.
pub fn read_sequentially(f: &File) {
    use nix::fcntl::{posix_fadvise, PosixFadviseAdvice};
    let _ = posix_fadvise(f, 0, 0, PosixFadviseAdvice::POSIX_FADV_SEQUENTIAL);
}

/// Lowers this thread's CPU priority to nice 19 and its I/O priority to the idle class;
/// threads it starts afterwards inherit both. Returns what the kernel then reports (nice
/// value, I/O class), read back. Neither call has a safe binding in `nix`.
pub fn be_nice() -> io::Result<(i32, i32)> {
    use nix::libc;
    const IOPRIO_WHO_PROCESS: libc::c_long = 1;
    const IOPRIO_CLASS_IDLE: libc::c_long = 3;
    const IOPRIO_CLASS_SHIFT: u32 = 13;
    #[allow(unsafe_code)]
    // SAFETY: setpriority, getpriority and the ioprio syscalls take integers only and
    // touch no memory of this process; errors come back as -1 with errno.
    let (set_cpu, set_io, nice, io) = unsafe {
        let set_cpu = libc::setpriority(libc::PRIO_PROCESS, 0, 19);
        let set_io = libc::syscall(
            libc::SYS_ioprio_set,
            IOPRIO_WHO_PROCESS,
            0 as libc::c_long,
            IOPRIO_CLASS_IDLE << IOPRIO_CLASS_SHIFT,
        );
        let nice = libc::getpriority(libc::PRIO_PROCESS, 0);
        let io = libc::syscall(libc::SYS_ioprio_get, IOPRIO_WHO_PROCESS, 0 as libc::c_long);
        (set_cpu, set_io, nice, io)
    };
    if set_cpu != 0 || set_io != 0 || io < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((nice, (io >> IOPRIO_CLASS_SHIFT) as i32))
}

/// The signal (SIGINT or SIGTERM) that asked this run to stop; 0 while none has.
static STOP: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
/// Set by the first stop signal: a second one ends the process at once.
static STOPPING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// From now on SIGINT and SIGTERM only ask the run to stop ([`stop_signal`]): the scan
/// stops reading, temporary files are removed and the lock is released on the way out. A
/// second signal ends the process at once (exit 128 + signal).
pub fn catch_stop_signals() -> io::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    for sig in [SIGINT, SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 128 + sig, &STOPPING)?;
        signal_hook::flag::register(sig, &STOPPING)?;
        signal_hook::flag::register_usize(sig, &STOP, sig as usize)?;
    }
    Ok(())
}

/// The signal that asked the run to stop, if one has.
pub fn stop_signal() -> Option<i32> {
    match STOP.load(std::sync::atomic::Ordering::SeqCst) {
        0 => None,
        s => Some(s as i32),
    }
}

/// The width in columns of the terminal stdout is, `None` when stdout is no terminal.
pub fn stdout_terminal_width() -> Option<usize> {
    use std::io::IsTerminal;
    let out = io::stdout();
    if !out.is_terminal() {
        return None;
    }
    terminal_size::terminal_size_of(&out).map(|(w, _)| usize::from(w.0)).filter(|&w| w > 0)
}

/// True when this process runs as root (effective uid 0).
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}
