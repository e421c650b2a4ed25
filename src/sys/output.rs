//! The one writer of every file the product writes: `-o` reports and fingerprint files,
//! `clean`'s `--plan-out` and journal, the run lock (`lock.rs`), and the dirs any of
//! them needs made. A path is resolved here one component at a time through directory
//! descriptors ([`resolve_output`]), never trusting a symlink another user planted in a
//! sticky world-writable dir; a missing dir is made with `mkdirat` beneath the descriptor
//! of the dir checked before it, only once the whole path has been resolved that far, so
//! a path that is refused has made nothing. Files are created beneath the resolved dir's
//! descriptor too: atomically replaced ([`TempFile`]), written as they are when they are no
//! regular file ([`open_output`]), or appended to ([`open_append`]).

use super::stop_signal;
use nix::errno::Errno;
use nix::fcntl::{self, OFlag};
use nix::sys::stat::Mode;
use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;

/// An output path resolved by [`resolve_output`]: the directory that holds it, by
/// descriptor, its name there and what is there now.
#[derive(Debug)]
pub struct Place {
    /// The directory holding it (an `O_PATH` descriptor).
    pub dir: OwnedFd,
    /// Its name in `dir`.
    pub name: std::ffi::OsString,
    /// What is there now.
    pub kind: PlaceKind,
}

/// What an output path names now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlaceKind {
    /// Nothing: a file is to be created.
    Missing,
    /// A regular file.
    Regular,
    /// A FIFO.
    Fifo,
    /// A device or socket.
    Other,
    /// A magic link of /proc (`/dev/stdout` leads to `/proc/self/fd/1`): it names no
    /// path, the kernel opens what it stands for.
    Magic,
}

/// A symlink that [`resolve_output`] was not asked to follow.
#[derive(Debug)]
pub struct SymlinkNotFollowed;

impl std::fmt::Display for SymlinkNotFollowed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("it is a symlink, not followed")
    }
}

impl std::error::Error for SymlinkNotFollowed {}

/// A symlink another user planted in a sticky world-writable dir, which
/// [`resolve_output`] does not follow (the kernel's `protected_symlinks` rule).
#[derive(Debug)]
pub struct ProtectedSymlink {
    /// The symlink's owner.
    pub uid: u32,
}

impl std::fmt::Display for ProtectedSymlink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "a symlink of uid {} in a sticky world-writable dir: not followed \
             (the kernel's protected_symlinks rule)",
            self.uid
        )
    }
}

impl std::error::Error for ProtectedSymlink {}

/// The missing dirs on the way to a file that [`resolve_output`] may make.
#[derive(Clone, Copy, Debug)]
pub struct MakeDirs {
    /// Their mode (the umask applies).
    pub mode: u32,
    /// How many at most: a path missing more is refused (`ENOENT`) before any is made.
    pub most: usize,
}

/// Resolves an output path one component at a time through directory descriptors,
/// applying the kernel's `protected_symlinks` rule itself (whatever `fs.protected_symlinks`
/// says, and where the kernel would not: a path read with `readlink` and used later is
/// never checked): a symlink in a sticky world-writable dir (`/tmp`) is followed only when
/// it is this user's or the dir's owner's, at any depth ([`ProtectedSymlink`] otherwise).
/// A symlink as the last component is followed only with `follow` ([`SymlinkNotFollowed`]
/// otherwise). With `make`, the missing dirs of the path are made, each with `mkdirat`
/// beneath the descriptor of the dir resolved before it, and only when what is left of the
/// path is plain names (no `..`), at most `make.most` dirs: a path refused makes nothing.
/// Each dir made is looked at again as any other (what is there then passes the same
/// checks), and its entry is flushed to disk. What comes back is the dir by descriptor,
/// so a dir swapped for a symlink afterwards changes nothing.
pub fn resolve_output(path: &Path, follow: bool, make: Option<MakeDirs>) -> io::Result<Place> {
    use nix::libc;
    use std::collections::VecDeque;
    fn parts(p: &Path) -> Vec<OsString> {
        use std::path::Component;
        p.components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n.to_owned()),
                Component::ParentDir => Some("..".into()),
                _ => None,
            })
            .collect()
    }
    let start = |absolute: bool| {
        let at = if absolute { "/" } else { "." };
        fcntl::open(at, OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty())
    };
    let euid = nix::unistd::geteuid().as_raw();
    let mut dir = start(path.has_root())?;
    let mut todo: VecDeque<OsString> = parts(path).into();
    let (mut links, mut made) = (0, 0);
    while let Some(name) = todo.pop_front() {
        let last = todo.is_empty();
        let st = match nix::sys::stat::fstatat(
            &dir,
            name.as_os_str(),
            fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        ) {
            Ok(st) => st,
            Err(Errno::ENOENT) if last => return Ok(Place { dir, name, kind: PlaceKind::Missing }),
            Err(Errno::ENOENT) => {
                // This dir and the rest but the file's name are missing.
                let Some(make) = make else { return Err(Errno::ENOENT.into()) };
                if todo.len() > make.most || todo.iter().any(|p| p == "..") || made >= 64 {
                    return Err(Errno::ENOENT.into());
                }
                match nix::sys::stat::mkdirat(
                    &dir,
                    name.as_os_str(),
                    Mode::from_bits_truncate(make.mode),
                ) {
                    Ok(()) => sync_dir(&dir)?,
                    // Made meanwhile by another: looked at as it is.
                    Err(Errno::EEXIST) => {}
                    Err(e) => return Err(e.into()),
                }
                made += 1;
                todo.push_front(name);
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let kind = st.st_mode & libc::S_IFMT;
        if kind == libc::S_IFLNK {
            if last && !follow {
                return Err(io::Error::other(SymlinkNotFollowed));
            }
            links += 1;
            if links > 40 {
                return Err(Errno::ELOOP.into());
            }
            let d = nix::sys::stat::fstat(&dir)?;
            let sticky_open = libc::S_ISVTX | libc::S_IWOTH;
            if d.st_mode & sticky_open == sticky_open && st.st_uid != euid && st.st_uid != d.st_uid
            {
                return Err(io::Error::other(ProtectedSymlink { uid: st.st_uid }));
            }
            let on_proc = nix::sys::statfs::fstatfs(&dir)
                .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::PROC_SUPER_MAGIC);
            if last && on_proc {
                return Ok(Place { dir, name, kind: PlaceKind::Magic });
            }
            let target = fcntl::readlinkat(&dir, name.as_os_str())?;
            let target = Path::new(&target);
            if target.has_root() {
                dir = start(true)?;
            }
            for p in parts(target).into_iter().rev() {
                todo.push_front(p);
            }
            continue;
        }
        if !last {
            let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
            dir = fcntl::openat(&dir, name.as_os_str(), flags, Mode::empty())?;
            continue;
        }
        let kind = match kind {
            libc::S_IFREG => PlaceKind::Regular,
            libc::S_IFDIR => return Err(Errno::EISDIR.into()),
            libc::S_IFIFO => PlaceKind::Fifo,
            _ => PlaceKind::Other,
        };
        return Ok(Place { dir, name, kind });
    }
    // The path ends in `/`, `.` or `..`, or a link to one: a directory.
    Err(Errno::EISDIR.into())
}

/// Flushes the entries of the dir `dir` (any descriptor of it, `O_PATH` too) to disk.
fn sync_dir(dir: &OwnedFd) -> io::Result<()> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    File::from(fcntl::openat(dir, ".", flags, Mode::empty())?).sync_all()
}

/// An output opened by [`open_output`].
#[derive(Debug)]
pub enum Output {
    /// A regular file, or none yet: replaced by a [`TempFile`] renamed over it.
    File(Place),
    /// What is not a regular file (`/dev/null`, a FIFO with its reader, a terminal),
    /// opened for writing as it is, non-blocking: write it through [`Patient`].
    Special(File),
}

/// Resolves `path` ([`resolve_output`]) and opens what is not a regular file for writing.
/// A FIFO is opened without blocking: while it has no reader the open is tried again
/// every 50 ms, as long as no stop signal came ([`Stopped`] then).
pub fn open_output(path: &Path, follow: bool) -> io::Result<Output> {
    let place = resolve_output(path, follow, None)?;
    if matches!(place.kind, PlaceKind::Missing | PlaceKind::Regular) {
        return Ok(Output::File(place));
    }
    let mut flags = OFlag::O_WRONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY | OFlag::O_CLOEXEC;
    if place.kind != PlaceKind::Magic {
        flags |= OFlag::O_NOFOLLOW;
    }
    loop {
        match fcntl::openat(&place.dir, place.name.as_os_str(), flags, Mode::empty()) {
            Ok(fd) => {
                let f = File::from(fd);
                // Swapped for a regular file since it was looked at: not written in place.
                if f.metadata()?.is_file() && place.kind != PlaceKind::Magic {
                    return Err(io::Error::other("it changed while it was opened"));
                }
                return Ok(Output::Special(f));
            }
            // A FIFO without a reader yet (a magic link may lead to one).
            Err(Errno::ENXIO) if matches!(place.kind, PlaceKind::Fifo | PlaceKind::Magic) => {}
            Err(e) => return Err(e.into()),
        }
        if stop_signal().is_some() {
            return Err(io::Error::other(Stopped));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Opens `path` for appending (a journal), creating it with mode 0600 and the missing
/// dirs of its path as `dirs` says: resolved as [`resolve_output`] does, never through a
/// symlink, and only a regular file of this user's or root's (a FIFO is refused at once,
/// never waited on). A file created has its dir's entry flushed to disk, as each dir made.
pub fn open_append(path: &Path, dirs: MakeDirs) -> io::Result<File> {
    let place = resolve_output(path, false, Some(dirs))?;
    if !matches!(place.kind, PlaceKind::Missing | PlaceKind::Regular) {
        return Err(io::Error::other("not a regular file"));
    }
    let flags = OFlag::O_WRONLY
        | OFlag::O_APPEND
        | OFlag::O_CREAT
        | OFlag::O_NOFOLLOW
        | OFlag::O_NONBLOCK
        | OFlag::O_NOCTTY
        | OFlag::O_CLOEXEC;
    let file = match fcntl::openat(
        &place.dir,
        place.name.as_os_str(),
        flags,
        Mode::S_IRUSR | Mode::S_IWUSR,
    ) {
        Ok(fd) => File::from(fd),
        // Swapped for a FIFO meanwhile.
        Err(Errno::ENXIO) => return Err(io::Error::other("not a regular file")),
        Err(e) => return Err(e.into()),
    };
    let st = nix::sys::stat::fstat(&file)?;
    if st.st_mode & nix::libc::S_IFMT != nix::libc::S_IFREG {
        return Err(io::Error::other("not a regular file"));
    }
    if let Some(why) = others_may_write(&st) {
        return Err(io::Error::other(format!("it {why}")));
    }
    // A new file's entry must be on disk too, or a crash could take the file with it.
    if place.kind == PlaceKind::Missing {
        sync_dir(&place.dir)?;
    }
    Ok(file)
}

/// A wait for an output that a stop signal ended ([`stop_signal`] says which).
#[derive(Debug)]
pub struct Stopped;

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("stopped by a signal")
    }
}

impl std::error::Error for Stopped {}

/// A writer to a non-blocking descriptor (a FIFO or device from [`open_output`]): while
/// it is full (a slow reader) it waits, a few milliseconds at a time, until a stop signal
/// comes ([`Stopped`]; not `Interrupted`, which `write_all` would retry for ever).
#[derive(Debug)]
pub struct Patient(pub File);

impl io::Write for Patient {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        loop {
            match self.0.write(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if stop_signal().is_some() {
                        return Err(io::Error::other(Stopped));
                    }
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                other => return other,
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// A new file (mode 0600, a random name with a prefix) in a directory given by
/// descriptor, removed when dropped unless [`TempFile::persist`]ed: a report cut short
/// (an error, a stop signal, a panic unwinding) leaves nothing behind.
#[derive(Debug)]
pub struct TempFile<'a> {
    dir: &'a OwnedFd,
    name: std::ffi::OsString,
    file: File,
    persisted: bool,
}

impl<'a> TempFile<'a> {
    /// Creates it in `dir`: `O_EXCL`, never through a symlink.
    pub fn create(dir: &'a OwnedFd, prefix: &str) -> io::Result<TempFile<'a>> {
        use std::hash::{BuildHasher, Hasher};
        let flags =
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        for _ in 0..64 {
            // Each RandomState is seeded anew: a random name per try.
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u32(std::process::id());
            let name = std::ffi::OsString::from(format!("{prefix}{:016x}", h.finish()));
            match fcntl::openat(dir, name.as_os_str(), flags, Mode::S_IRUSR | Mode::S_IWUSR) {
                Ok(fd) => {
                    return Ok(TempFile { dir, name, file: File::from(fd), persisted: false })
                }
                Err(Errno::EEXIST) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(Errno::EEXIST.into())
    }

    /// The open file.
    pub fn file(&mut self) -> &mut File {
        &mut self.file
    }

    /// Renames it over `name` in the same dir (whatever is there is replaced, a symlink
    /// as a link: rename never follows one).
    pub fn persist(mut self, name: &std::ffi::OsStr) -> io::Result<()> {
        fcntl::renameat(self.dir, self.name.as_os_str(), self.dir, name)?;
        self.persisted = true;
        Ok(())
    }
}

impl Drop for TempFile<'_> {
    fn drop(&mut self) {
        if !self.persisted {
            let _ = nix::unistd::unlinkat(
                self.dir,
                self.name.as_os_str(),
                nix::unistd::UnlinkatFlags::NoRemoveDir,
            );
        }
    }
}

/// The file at `path` that only this user or root may change (a scan's state), read whole
/// if it holds at most `cap` bytes; `Ok(None)` when it is missing. Resolved as
/// [`resolve_output`] resolves (no symlink at its end, none of another user's in a sticky
/// world-writable dir); refused when its dir or itself is another user's or writable by
/// others, or it is not a regular file, or larger than `cap`.
pub fn read_private(path: &Path, cap: u64) -> io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    let place = resolve_output(path, false, None)?;
    match place.kind {
        PlaceKind::Missing => return Ok(None),
        PlaceKind::Regular => {}
        _ => return Err(io::Error::other("not a regular file")),
    }
    if let Some(why) = others_may_write(&nix::sys::stat::fstat(&place.dir)?) {
        return Err(io::Error::other(format!("its dir {why}")));
    }
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    let f = File::from(fcntl::openat(&place.dir, place.name.as_os_str(), flags, Mode::empty())?);
    let st = nix::sys::stat::fstat(&f)?;
    if st.st_mode & nix::libc::S_IFMT != nix::libc::S_IFREG {
        return Err(io::Error::other("not a regular file"));
    }
    if let Some(why) = others_may_write(&st) {
        return Err(io::Error::other(format!("it {why}")));
    }
    if st.st_size as u64 > cap {
        return Err(io::Error::other(format!("larger than {cap} bytes")));
    }
    let mut data = Vec::with_capacity(st.st_size as usize);
    f.take(cap).read_to_end(&mut data)?;
    Ok(Some(data))
}

/// Writes `bytes` to `path` (a scan's state) whole or not at all: a new file (mode 0600)
/// in its dir, flushed to disk, renamed over it. Its dir is made (mode 0700) when it alone
/// is missing; refused as [`read_private`] refuses.
pub fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let place = resolve_output(path, false, Some(MakeDirs { mode: 0o700, most: 1 }))?;
    if !matches!(place.kind, PlaceKind::Missing | PlaceKind::Regular) {
        return Err(io::Error::other("not a regular file"));
    }
    if let Some(why) = others_may_write(&nix::sys::stat::fstat(&place.dir)?) {
        return Err(io::Error::other(format!("its dir {why}")));
    }
    let mut t = TempFile::create(&place.dir, ".kresidue-state-")?;
    t.file().write_all(bytes)?;
    t.file().sync_all()?;
    t.persist(place.name.as_os_str())?;
    sync_dir(&place.dir)
}

/// Why users other than this one and root could change `st`'s inode (a dir's entries):
/// its owner, or its mode.
pub(super) fn others_may_write(st: &nix::sys::stat::FileStat) -> Option<String> {
    let euid = nix::unistd::geteuid().as_raw();
    if st.st_uid != euid && st.st_uid != 0 {
        return Some(format!("is owned by uid {}", st.st_uid));
    }
    (st.st_mode & 0o022 != 0)
        .then(|| format!("is writable by others (mode {:o})", st.st_mode & 0o7777))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The dirs made on the way: every missing one, mode as asked, beneath the dir
    /// checked before; a path missing more than `most`, or going up (`..`) past a missing
    /// dir, is refused before any is made.
    #[test]
    fn missing_dirs_are_made_only_once_the_path_is_checked() {
        use std::os::unix::fs::PermissionsExt;
        let base = tempfile::tempdir().unwrap();
        let b = base.path();
        let all = Some(MakeDirs { mode: 0o750, most: usize::MAX });
        let place = resolve_output(&b.join("a/b/c/file"), false, all).unwrap();
        assert_eq!((place.name.to_str(), place.kind), (Some("file"), PlaceKind::Missing));
        let mode = std::fs::metadata(b.join("a/b/c")).unwrap().permissions().mode();
        assert_eq!(mode & 0o7777 & !0o022, 0o750 & !0o022);
        // Again: the dirs are there now.
        resolve_output(&b.join("a/b/c/file"), false, all).unwrap();
        let one = Some(MakeDirs { mode: 0o700, most: 1 });
        resolve_output(&b.join("a/d/file"), false, one).unwrap();
        assert!(b.join("a/d").is_dir());
        for (path, make) in [("x/y/file", one), ("x/../file", all), ("x/y/../../file", all)] {
            let e = resolve_output(&b.join(path), false, make).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(Errno::ENOENT as i32), "{path}: {e}");
            assert!(!b.join("x").exists(), "{path}: a dir was made");
        }
        let e = resolve_output(&b.join("x/file"), false, None).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(Errno::ENOENT as i32));
    }
}
