//! Reading a node's files without leaving them in the page cache.
//!
//! An hourly scan reads every byte of a node's sites, tens of GB of image layers among
//! them; each page read enters the page cache and pushes out pages the node's workloads
//! use. So every host file the scan reads is a [`HostFile`]: before its first read, which
//! of its pages the page cache holds is asked; when it is closed (by the last of its
//! readers, should two have it open at once), the pages that were not held then are
//! dropped again (`POSIX_FADV_DONTNEED`, page-aligned runs), and the pages that were held
//! stay. A warm cache stays warm, a cold one cold.
//!
//! Asked with `cachestat(2)` (Linux 6.5): one call says how many of the file's pages are
//! cached, which settles the usual cases (none, or all). Otherwise with `mincore(2)` over
//! a mapping of the file that is never touched (mapping faults no page in), over its data
//! only (`SEEK_DATA`: a sparse file's holes hold no page), a window of 1 GiB at a time,
//! keeping the runs of pages not cached (at most [`MAX_RUNS`]).
//!
//! The kernel answers only a process that owns the file or has `CAP_FOWNER` (or may write
//! it): `cachestat` refuses the others, `mincore` tells them every page is cached. Such a
//! file is read and left as the kernel leaves it, and counted ([`unasked`], told by `-v`);
//! the DaemonSets add `CAP_FOWNER` for this (their mounts are read-only).
//!
//! What it cannot undo: a file is dropped only when closed, so one being read fills the
//! cache meanwhile (a thread reads one file at a time); pages of a file that another
//! process reads between the look and the close are dropped if they were not cached at
//! the look; `DONTNEED` leaves dirty and mapped pages alone (and starts the writeback of
//! dirty ones, which the kernel would do soon anyway). Directory blocks, inodes and
//! dentries the walk reads are the kernel's own caches, not the files' pages, and are not
//! dropped.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Pages asked of `mincore` per mapping.
const WINDOW_PAGES: u64 = 1 << 18;

/// Runs of uncached pages kept for a file, at most (16 bytes each); a file whose cache is
/// more broken up than this is left as the kernel leaves it.
pub const MAX_RUNS: usize = 1 << 16;

/// `cachestat(2)`'s number: the same on the architectures of the unified syscall table
/// (x86_64, aarch64, arm, riscv, s390x, powerpc…), added after 5.1.
const SYS_CACHESTAT: nix::libc::c_long = 451;

/// Set when `cachestat` is missing (an older kernel): not asked again.
static NO_CACHESTAT: AtomicBool = AtomicBool::new(false);

/// Files the kernel would not say the cache of (see the module).
static UNASKED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Files read whose page cache could not be asked, so was left as the kernel left it.
pub fn unasked() -> u64 {
    UNASKED.load(Ordering::Relaxed)
}

/// The files open now, by (device, inode), and what the first of their readers found
/// cached: a second reader of a file open at once shares it, and the last one drops.
type Open = std::collections::HashMap<(u64, u64), Arc<Look>>;
static OPEN: std::sync::Mutex<Option<Open>> = std::sync::Mutex::new(None);

/// What was found of one file: its key in [`OPEN`] and, once asked, what was not cached
/// (`None` inside: nothing to drop).
#[derive(Debug)]
struct Look {
    key: (u64, u64),
    uncached: std::sync::OnceLock<Option<Uncached>>,
}

/// Set by tests: `cachestat` is not asked, the `mincore` path is taken.
#[cfg(test)]
static FORCE_MINCORE: AtomicBool = AtomicBool::new(false);

/// A file of the node opened on the host, which leaves the page cache as it found it
/// (see the module). Reads go through [`HostFile::read_at`] and [`io::Read`], which look
/// at the cache first; [`HostFile::file`] is for asking about the file.
#[derive(Debug)]
pub struct HostFile {
    file: File,
    /// The look shared by the readers of the file open now; `None` inside when nothing
    /// is to be dropped (it could not be asked, or the page cache is kept).
    look: std::sync::OnceLock<Option<Arc<Look>>>,
}

impl HostFile {
    /// `file`, opened for reading.
    pub fn new(file: File) -> HostFile {
        HostFile { file, look: std::sync::OnceLock::new() }
    }

    /// The file, to ask about it (`fstat`, `lseek`, `fadvise`), not to read it.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Reads exactly `buf.len()` bytes at `at`.
    pub fn read_at(&self, at: u64, buf: &mut [u8]) -> io::Result<()> {
        self.look();
        std::os::unix::fs::FileExt::read_exact_at(&self.file, buf, at)
    }

    /// Asks the page cache what it holds of the file, once, before the first read (or
    /// now, before another descriptor of the file reads it: an image's indexing pass).
    pub fn look(&self) {
        self.look.get_or_init(|| {
            use std::os::unix::fs::MetadataExt;
            let md = self.file.metadata().ok().filter(|m| m.is_file() && m.len() > 0)?;
            if kept() {
                return None;
            }
            let key = (md.dev(), md.ino());
            let look = {
                let mut open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
                let open = open.get_or_insert_with(Default::default);
                let new = || Arc::new(Look { key, uncached: std::sync::OnceLock::new() });
                open.entry(key).or_insert_with(new).clone()
            };
            look.uncached.get_or_init(|| Uncached::of(&self.file, &md));
            Some(look)
        });
    }
}

impl super::Bytes for HostFile {
    fn size(&self) -> u64 {
        self.file.size()
    }

    fn read_at(&self, at: u64, buf: &mut [u8]) -> io::Result<()> {
        HostFile::read_at(self, at, buf)
    }
}

impl io::Read for &HostFile {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.look();
        (&self.file).read(buf)
    }
}

impl io::Read for HostFile {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self).read(buf)
    }
}

impl io::Seek for &HostFile {
    fn seek(&mut self, pos: io::SeekFrom) -> io::Result<u64> {
        (&self.file).seek(pos)
    }
}

impl Drop for HostFile {
    fn drop(&mut self) {
        let Some(Some(look)) = self.look.take() else { return };
        let last = {
            let mut open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
            let map = open.get_or_insert_with(Default::default);
            // This reader's and the map's: the last reader of the file.
            let last = Arc::strong_count(&look) == 2;
            if last {
                map.remove(&look.key);
            }
            last
        };
        if let (true, Some(Some(uncached))) = (last, look.uncached.get()) {
            uncached.drop_pages(&self.file);
        }
    }
}

/// The pages of a file the page cache did not hold before it was read.
#[derive(Debug)]
struct Uncached {
    /// Runs of pages, `[from, to)`, in order.
    runs: Vec<(u64, u64)>,
}

impl Uncached {
    /// What of `file` (of metadata `md`) is not in the page cache now; `None` when all
    /// of it is, or when the cache cannot be asked.
    fn of(file: &File, md: &std::fs::Metadata) -> Option<Uncached> {
        let pages = md.len().div_ceil(page_size());
        match cached_pages(file) {
            Ok(Some(0)) => return Some(Uncached { runs: vec![(0, pages)] }),
            Ok(Some(n)) if n >= pages => return None,
            Ok(_) => {}
            Err(Refused) => {
                UNASKED.fetch_add(1, Ordering::Relaxed);
                return None;
            }
        }
        if !may_mincore(file, md) {
            UNASKED.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        // Finding the data moves the offset, which a reader from the position is at.
        use nix::unistd::{lseek, Whence};
        let pos = lseek(file, 0, Whence::SeekCur).ok()?;
        let runs = uncached_runs(file, md.len());
        lseek(file, pos, Whence::SeekSet).ok()?;
        let runs = runs?;
        (!runs.is_empty()).then_some(Uncached { runs })
    }

    /// Drops the pages of `file` that were not cached (page-aligned runs, so that the
    /// kernel drops whole pages: it keeps a range's partial pages).
    fn drop_pages(&self, file: &File) {
        use nix::fcntl::{posix_fadvise, PosixFadviseAdvice};
        let page = page_size();
        for &(from, to) in &self.runs {
            let at = from.checked_mul(page).and_then(|b| i64::try_from(b).ok());
            let len = (to - from).checked_mul(page).map(|b| i64::try_from(b).unwrap_or(i64::MAX));
            if let (Some(at), Some(len)) = (at, len) {
                let len = len.min(i64::MAX - at);
                let _ = posix_fadvise(file, at, len, PosixFadviseAdvice::POSIX_FADV_DONTNEED);
            }
        }
    }
}

/// `KRESIDUE_PAGE_CACHE=keep`: what is read stays cached, as it did before the scan was
/// made neutral; for benchmarks, to measure what the look costs (docs/PERFORMANCE.md).
fn kept() -> bool {
    static KEEP: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *KEEP.get_or_init(|| std::env::var_os("KRESIDUE_PAGE_CACHE").is_some_and(|v| v == "keep"))
}

/// The system's page size.
fn page_size() -> u64 {
    static PAGE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *PAGE.get_or_init(|| {
        let size = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE);
        size.ok().flatten().and_then(|s| u64::try_from(s).ok()).filter(|&s| s > 0).unwrap_or(4096)
    })
}

/// The kernel refused to say what it caches of a file (see the module).
struct Refused;

/// How many pages of `file` the page cache holds (`cachestat(2)`): `Ok(None)` where the
/// kernel has no `cachestat`, `Err` where it refuses this process.
fn cached_pages(file: &File) -> Result<Option<u64>, Refused> {
    #[cfg(test)]
    if FORCE_MINCORE.load(Ordering::Relaxed) {
        return Ok(None);
    }
    if NO_CACHESTAT.load(Ordering::Relaxed) {
        return Ok(None);
    }
    /// `struct cachestat_range`: the whole file.
    #[repr(C)]
    struct Range {
        off: u64,
        len: u64,
    }
    /// `struct cachestat`.
    #[repr(C)]
    #[derive(Default)]
    struct Stat {
        nr_cache: u64,
        nr_dirty: u64,
        nr_writeback: u64,
        nr_evicted: u64,
        nr_recently_evicted: u64,
    }
    let range = Range { off: 0, len: 0 };
    let mut stat = Stat::default();
    #[allow(unsafe_code)]
    // SAFETY: cachestat reads `range` and writes `stat`, both live `repr(C)` structs of
    // the kernel's layout, for the duration of the call; the descriptor is open.
    let r = unsafe {
        nix::libc::syscall(
            SYS_CACHESTAT,
            file.as_raw_fd(),
            &range as *const Range,
            &mut stat as *mut Stat,
            0 as nix::libc::c_uint,
        )
    };
    if r == 0 {
        return Ok(Some(stat.nr_cache));
    }
    match io::Error::last_os_error().raw_os_error() {
        Some(nix::libc::EPERM) => Err(Refused),
        Some(nix::libc::ENOSYS) => {
            NO_CACHESTAT.store(true, Ordering::Relaxed);
            Ok(None)
        }
        _ => Ok(None),
    }
}

/// Whether `mincore` tells this process the truth about `file` (of metadata `md`): the
/// kernel answers its owner, a process with `CAP_FOWNER`, or one that may write the file
/// (asked here as: `CAP_DAC_OVERRIDE` on a filesystem not mounted read-only); it tells
/// the others every page is cached.
fn may_mincore(file: &File, md: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    /// The effective capabilities' bits, from `/proc/self/status` (0 if unreadable).
    fn caps() -> u64 {
        static CAPS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
        *CAPS.get_or_init(|| {
            let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
            let eff = status.lines().find_map(|l| l.strip_prefix("CapEff:"));
            eff.and_then(|h| u64::from_str_radix(h.trim(), 16).ok()).unwrap_or(0)
        })
    }
    const CAP_DAC_OVERRIDE: u64 = 1 << 1;
    const CAP_FOWNER: u64 = 1 << 3;
    if md.uid() == nix::unistd::geteuid().as_raw() || caps() & CAP_FOWNER != 0 {
        return true;
    }
    caps() & CAP_DAC_OVERRIDE != 0
        && nix::sys::statvfs::fstatvfs(file)
            .is_ok_and(|v| !v.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY))
}

/// The runs of pages of `file` (`len` bytes) the page cache does not hold, in order,
/// asked of `mincore(2)` over its data (holes hold no page); `None` where the file
/// cannot be mapped, or its cache is broken into more than [`MAX_RUNS`] runs.
fn uncached_runs(file: &File, len: u64) -> Option<Vec<(u64, u64)>> {
    let page = page_size();
    let pages = len.div_ceil(page);
    let mut runs: Vec<(u64, u64)> = Vec::new();
    let mut vec = Vec::new();
    let mut at = 0;
    while let Some(data) = super::next_data(file, at).filter(|&d| d < len) {
        let end = super::next_hole(file, data).unwrap_or(len).clamp(data + 1, len);
        let (first, last) = (data / page, end.div_ceil(page).min(pages));
        let mut p = first;
        while p < last {
            let n = (last - p).min(WINDOW_PAGES);
            vec.resize(n as usize, 0);
            mincore(file, p * page, n * page, &mut vec)?;
            for (i, &v) in vec.iter().enumerate() {
                let q = p + i as u64;
                if v & 1 != 0 {
                    continue;
                }
                if let Some(r) = runs.last_mut().filter(|r| r.1 == q) {
                    r.1 = q + 1;
                } else if runs.len() == MAX_RUNS {
                    return None;
                } else {
                    runs.push((q, q + 1));
                }
            }
            p += n;
        }
        at = end;
    }
    Some(runs)
}

/// `mincore(2)` of `len` bytes of `file` from `off` (page-aligned) into `vec`, a byte a
/// page, over a read-only shared mapping made for it and never touched.
fn mincore(file: &File, off: u64, len: u64, vec: &mut [u8]) -> Option<()> {
    use nix::libc;
    let len = usize::try_from(len).ok()?;
    let off = libc::off_t::try_from(off).ok()?;
    #[allow(unsafe_code)]
    // SAFETY: a new read-only mapping of `len` bytes of the open descriptor, which no
    // code reads through (mincore only asks the kernel about its pages) and which is
    // unmapped before the block ends; `vec` holds a byte for each of its pages (the
    // caller sizes it `len / page`).
    let ok = unsafe {
        let at = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            off,
        );
        if at == libc::MAP_FAILED {
            return None;
        }
        let ok = libc::mincore(at, len, vec.as_mut_ptr()) == 0;
        libc::munmap(at, len);
        ok
    };
    ok.then_some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek, Write};
    use std::os::unix::fs::FileExt;

    /// The pages of `f`'s first `pages` the page cache holds, by `mincore`.
    fn cached(f: &File, pages: u64) -> Vec<u64> {
        let mut vec = vec![0; pages as usize];
        mincore(f, 0, pages * page_size(), &mut vec).unwrap();
        (0..pages).filter(|&p| vec[p as usize] & 1 != 0).collect()
    }

    /// A file of `pages` pages of data in a temp dir, synced, none of it cached (with
    /// read-ahead off on the returned descriptor); `None` where the temp dir's filesystem
    /// keeps no droppable cache (a tmpfs).
    fn cold_file(dir: &std::path::Path, pages: u64) -> Option<(std::path::PathBuf, File)> {
        let path = dir.join("f");
        let mut f = File::create(&path).unwrap();
        let data: Vec<u8> = (0..pages * page_size()).map(|i| (i % 251) as u8).collect();
        f.write_all(&data).unwrap();
        f.sync_all().unwrap();
        let f = File::open(&path).unwrap();
        use nix::fcntl::{posix_fadvise, PosixFadviseAdvice as A};
        posix_fadvise(&f, 0, 0, A::POSIX_FADV_DONTNEED).unwrap();
        posix_fadvise(&f, 0, 0, A::POSIX_FADV_RANDOM).unwrap();
        if !cached(&f, pages).is_empty() {
            // For the person running the tests.
            #[allow(clippy::print_stderr)]
            {
                eprintln!("the page cache under {} cannot be dropped: not shown", dir.display());
            }
            return None;
        }
        Some((path, f))
    }

    /// Pages cached before the first read stay, the others read are dropped, when none,
    /// some or all were cached, on both ways of asking (`cachestat`, `mincore`); a reader
    /// from the position reads from where it was put, though the look moved the offset.
    #[test]
    fn pages_cached_before_stay_and_no_others() {
        let dir = tempfile::tempdir().unwrap();
        let Some((path, f)) = cold_file(dir.path(), 64) else { return };
        let page = page_size() as usize;
        let all: Vec<u64> = (0..64).collect();
        for force in [false, true] {
            FORCE_MINCORE.store(force, Ordering::Relaxed);
            for was in [vec![], (8..16).chain([40]).collect(), all.clone()] {
                use nix::fcntl::{posix_fadvise, PosixFadviseAdvice as A};
                posix_fadvise(&f, 0, 0, A::POSIX_FADV_DONTNEED).unwrap();
                for &p in &was {
                    f.read_exact_at(&mut vec![0; page], p * page as u64).unwrap();
                }
                assert_eq!(cached(&f, 64), was, "force {force}: cached before");
                let mut h = HostFile::new(File::open(&path).unwrap());
                (&h).seek(io::SeekFrom::Start(100)).unwrap();
                let mut read = Vec::new();
                h.read_to_end(&mut read).unwrap();
                assert_eq!(read.len(), 64 * page - 100, "read from the position");
                assert_eq!(read[0], 100, "the byte at 100");
                assert_eq!(cached(&f, 64), all, "all read");
                drop(h);
                let want = if was.is_empty() { vec![] } else { was.clone() };
                assert_eq!(cached(&f, 64), want, "force {force}: cached after");
            }
        }
        FORCE_MINCORE.store(false, Ordering::Relaxed);
    }

    /// Two readers of a file open at once: the second sees what the first found (not the
    /// pages the first brought in), and only the last to close drops them.
    #[test]
    fn the_last_reader_drops() {
        let dir = tempfile::tempdir().unwrap();
        let Some((path, f)) = cold_file(dir.path(), 16) else { return };
        let mut buf = vec![0; 16 * page_size() as usize];
        let one = HostFile::new(File::open(&path).unwrap());
        one.read_at(0, &mut buf).unwrap();
        let two = HostFile::new(File::open(&path).unwrap());
        two.read_at(0, &mut buf).unwrap();
        drop(one);
        assert_eq!(cached(&f, 16).len(), 16, "the second reader has it open");
        drop(two);
        assert_eq!(cached(&f, 16), Vec::<u64>::new());
    }

    /// A sparse file of 1 TiB with three pages of data, one cached: its data alone is
    /// asked (three runs at most, no bit a page of the terabyte), and the two pages read
    /// that were not cached are dropped.
    #[test]
    fn a_sparse_file_is_asked_of_its_data() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sparse");
        let f = File::create(&path).unwrap();
        let page = page_size();
        f.set_len(1 << 40).unwrap();
        for at in [0, 1 << 30, (1 << 40) - page] {
            f.write_all_at(&vec![7; page as usize], at).unwrap();
        }
        f.sync_all().unwrap();
        let f = File::open(&path).unwrap();
        use nix::fcntl::{posix_fadvise, PosixFadviseAdvice as A};
        posix_fadvise(&f, 0, 0, A::POSIX_FADV_DONTNEED).unwrap();
        posix_fadvise(&f, 0, 0, A::POSIX_FADV_RANDOM).unwrap();
        f.read_exact_at(&mut vec![0; page as usize], 1 << 30).unwrap();
        FORCE_MINCORE.store(true, Ordering::Relaxed);
        let md = f.metadata().unwrap();
        let look = Uncached::of(&f, &md);
        FORCE_MINCORE.store(false, Ordering::Relaxed);
        let Some(look) = look else { panic!("one of three pages cached: the others to drop") };
        let last = (1 << 40) / page - 1;
        // A filesystem without holes' support says the whole file is data: the same runs,
        // asked of every page (not here: ext4 and XFS say).
        assert_eq!(look.runs, vec![(0, 1), (last, last + 1)], "{:?}", look.runs);
    }
}
