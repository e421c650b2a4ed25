//! Reading a file: opened through the walk's descriptors and checked, then searched in
//! one chunk loop ([`Worker::stream`]) over a [`Source`]: the file's bytes (holes of a
//! sparse file skipped), or a CRI log's content (partial lines joined, `.gz` inflated,
//! offsets mapped back to the file). A file its site reads whole is searched as one
//! buffer and handed to its site to attribute. One stop and timeout path serves all.

use super::names::Names;
use super::search::{aggregate, hold, Cx, Scratch, Span};
use super::{state, ScanSettings, Searchers, Seen};
use crate::finding::{Finding, UnreadMount};
use crate::node::io_message;
use crate::node::logs::{Extractor, HEAD_MAX};
use crate::severity::place;
use crate::sites::{self, Reading};
use crate::sys;
use crate::sys::image::NodeFile;
use crate::walk::{self, FileJob};
use std::io::{self, Read};
use std::sync::Mutex;
use std::time::Instant;

/// Files larger than this are announced to the kernel as read sequentially (a larger
/// read-ahead from a cold disk); smaller ones fit its default read-ahead anyway.
const SEQUENTIAL_FROM: u64 = 256 << 10;

/// The most of a compressed pod log decompressed and searched (a plain log is searched
/// whole, streamed). kubelet rotates logs at 10 MiB by default.
const MAX_GZ_LOG: u64 = 64 << 20;

/// Per-thread state: the read buffer, the search's scratch and the names checked last.
pub(super) struct Worker {
    pub(super) buf: Vec<u8>,
    chunk: usize,
    pub(super) overlap: usize,
    /// The search's scratch.
    pub(super) scratch: Scratch,
    /// Problems with parts of the current file that did not stop its search.
    pub(super) file_errors: Vec<String>,
    /// A pod log's raw bytes before its content is extracted into `buf` (allocated with
    /// the first log).
    raw: Vec<u8>,
    /// Files larger than this are not read.
    max_file_size: Option<u64>,
    /// When reading stops.
    deadline: Option<Instant>,
    /// Set when the deadline cut the current file short.
    pub(super) timed_out: bool,
    /// The names checked last (see [`Names::check`]).
    pub(super) names: Names,
    /// Set when the current file is a mount point not read.
    pub(super) unread: Option<UnreadMount>,
    /// The last scan's state (`--state`), to take unchanged files from.
    state: Option<std::sync::Arc<state::State>>,
    /// Whether what each file gave is kept for the next scan's state.
    keep_state: bool,
    /// What the current file gave, for the next state.
    pub(super) record: Option<state::Record>,
    /// Set when the current file was taken from the state: its bytes, not read.
    pub(super) unchanged: Option<u64>,
    /// Set when the current file is read though unchanged: the state had it unread for
    /// longer than `--state-max-age`.
    pub(super) due: bool,
}

/// What a [`Source`] gives the chunk loop next.
enum Piece {
    /// `n` bytes written at the start of the buffer given, the source's bytes from offset
    /// `at`; `last` when they end it.
    Data { at: u64, n: usize, last: bool },
    /// Nothing more.
    End,
}

/// Where the bytes a chunk loop searches come from.
trait Source {
    /// Writes the next bytes into `out` (at most a chunk); problems that do not end the
    /// file go to `errors`.
    fn next(&mut self, out: &mut [u8], errors: &mut Vec<String>) -> io::Result<Piece>;

    /// The file offset of the source's offset `at`.
    fn file_offset(&self, at: u64) -> u64 {
        at
    }

    /// Offsets before `at` will not be asked again.
    fn forget_before(&mut self, _at: u64) {}

    /// How far into the file reading got: the offset told when a `--timeout` cuts it.
    fn reached(&self) -> u64;

    /// When reading stops early (a stop signal, the deadline): writes into `out` what was
    /// read but held back (a pod log's unfinished last line), and returns its offset and
    /// length.
    fn flush(&mut self, _out: &mut [u8]) -> Option<(u64, usize)> {
        None
    }

    /// Whether every byte was read (what is left to give was read already): reading is
    /// then not cut, whatever the clock says.
    fn read_all(&self) -> bool {
        false
    }
}

/// A file's bytes, up to the size it had when opened (one that grows while it is read,
/// a container writing a log as fast as it is scanned, would never end). Holes of a
/// sparse file are not read: they read as zeros, and a binary value may begin or end with
/// zeros, so the first `overlap` zeros are searched as if read, after which the carry
/// (all zeros) stands for the hole's last bytes.
struct FileBytes<'f> {
    f: &'f NodeFile,
    size: u64,
    /// Whether the file may have holes (then it is asked where its data is).
    sparse: bool,
    /// Absolute offset of the next byte to read; at most `size`.
    pos: u64,
    /// Bytes read (holes not counted).
    read: u64,
    chunk: usize,
    overlap: usize,
}

impl Source for FileBytes<'_> {
    fn next(&mut self, out: &mut [u8], errors: &mut Vec<String>) -> io::Result<Piece> {
        let (f, size, pos) = (self.f, self.size, self.pos);
        // `None`: no data after `pos` before the size (the rest is a hole, or it shrank).
        let next = if self.sparse { f.next_data(pos) } else { Some(pos) };
        let next = next.filter(|&d| d < size);
        if next.is_none() && pos < size {
            note_shrunk(f, size, errors);
        }
        let data = next.unwrap_or(size);
        if data > pos {
            let z = (data - pos).min(self.overlap as u64) as usize;
            out[..z].fill(0);
            self.pos = data;
            return Ok(Piece::Data { at: pos, n: z, last: false });
        }
        if next.is_none() {
            return Ok(Piece::End);
        }
        let want = self.chunk.min(usize::try_from(size - pos).unwrap_or(usize::MAX));
        let n = read_full(&mut &*f, &mut out[..want])?;
        if n == 0 {
            note_shrunk(f, size, errors);
            return Ok(Piece::End);
        }
        self.pos += n as u64;
        self.read += n as u64;
        // The buffer that reaches the size the file had when opened is its end: its rule
        // hits are taken with windows clipped there (most files fit one buffer).
        Ok(Piece::Data { at: pos, n, last: self.pos == size })
    }

    fn reached(&self) -> u64 {
        self.pos
    }
}

/// A CRI log's content, extracted from its bytes (at most `cap` of them) as they are read.
/// What was read before a read error (a cut or damaged gzip stream) is searched too; the
/// error is kept for the caller.
struct LogContent<'r> {
    log: &'r mut dyn Read,
    ex: Extractor,
    raw: Vec<u8>,
    cap: Option<u64>,
    /// Bytes read from `log`.
    total: u64,
    /// Content offset of the next content byte.
    cpos: u64,
    /// No more bytes are read (the end, an error, the cap).
    drained: bool,
    /// The last line was given.
    finished: bool,
    error: Option<io::Error>,
}

impl LogContent<'_> {
    /// Reads the next raw bytes; 0 at the end, or after an error or the cap (then set
    /// `drained`).
    fn read_raw(&mut self, errors: &mut Vec<String>) -> usize {
        let want = match self.cap {
            Some(cap) => {
                self.raw.len().min(usize::try_from(cap + 1 - self.total).unwrap_or(usize::MAX))
            }
            None => self.raw.len(),
        };
        let mut n = 0;
        while n < want {
            match self.log.read(&mut self.raw[n..want]) {
                Ok(0) => {
                    self.drained = true;
                    break;
                }
                Ok(k) => n += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.error = Some(e);
                    self.drained = true;
                    break;
                }
            }
        }
        if let Some(cap) = self.cap.filter(|&cap| self.total + n as u64 > cap) {
            n = (cap - self.total) as usize;
            let mib = cap >> 20;
            errors.push(format!("decompresses to more than {mib} MiB; the rest was not searched"));
            self.drained = true;
        }
        self.drained |= n == 0;
        self.total += n as u64;
        n
    }
}

impl Source for LogContent<'_> {
    fn next(&mut self, out: &mut [u8], errors: &mut Vec<String>) -> io::Result<Piece> {
        let at = self.cpos;
        if !self.drained {
            let n = self.read_raw(errors);
            if n > 0 {
                let w = self.ex.feed(&self.raw[..n], out);
                self.cpos += w as u64;
                return Ok(Piece::Data { at, n: w, last: false });
            }
        }
        // The end: the last line, if it has no newline, in the same step as the read that
        // found the end.
        match self.flush(out) {
            Some((at, n)) => Ok(Piece::Data { at, n, last: true }),
            None => Ok(Piece::End),
        }
    }

    fn read_all(&self) -> bool {
        self.drained
    }

    fn flush(&mut self, out: &mut [u8]) -> Option<(u64, usize)> {
        if self.finished {
            return None;
        }
        self.finished = true;
        let (at, w) = (self.cpos, self.ex.finish(out));
        self.cpos += w as u64;
        Some((at, w))
    }

    fn file_offset(&self, at: u64) -> u64 {
        self.ex.file_offset(at)
    }

    fn forget_before(&mut self, at: u64) {
        self.ex.forget_before(at);
    }

    fn reached(&self) -> u64 {
        self.total
    }
}

/// The bytes a reader gives as they come (an LZ4 snapshot, inflated), at most `cap`.
struct Inflated<R> {
    r: R,
    /// Offset of the next byte in the inflated stream.
    pos: u64,
    cap: u64,
    chunk: usize,
}

impl<R: Read> Source for Inflated<R> {
    fn next(&mut self, out: &mut [u8], errors: &mut Vec<String>) -> io::Result<Piece> {
        if self.pos >= self.cap {
            errors.push(format!("inflates to more than {} bytes; the rest not read", self.cap));
            return Ok(Piece::End);
        }
        let want = self.chunk.min(usize::try_from(self.cap - self.pos).unwrap_or(usize::MAX));
        let n = match read_full(&mut self.r, &mut out[..want]) {
            Ok(n) => n,
            Err(_) => {
                errors.push(format!("damaged after {} inflated bytes", self.pos));
                return Ok(Piece::End);
            }
        };
        if n == 0 {
            return Ok(Piece::End);
        }
        let at = self.pos;
        self.pos += n as u64;
        Ok(Piece::Data { at, n, last: false })
    }

    fn reached(&self) -> u64 {
        self.pos
    }
}

/// Lists, in `errors`, that `f` is now shorter than the `size` it had when opened (it
/// was truncated while read): its end could not be read.
fn note_shrunk(f: &NodeFile, size: u64, errors: &mut Vec<String>) {
    if let Some(now) = f.meta().ok().map(|m| m.len).filter(|&now| now < size) {
        errors.push(format!(
            "shrank from {size} to {now} bytes while read: what was cut off was not read"
        ));
    }
}

/// Reads until `buf` is full or the input ends.
fn read_full<R: Read + ?Sized>(f: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Moves a finding `f` of `src`'s bytes to the file's offsets: its own, and those of the
/// bytes its preview shows, kept only where they lie in the file as in the source (a log's
/// content: not where a line joins the next).
fn to_file(f: &mut Finding, src: &dyn Source) {
    f.previewed = f.previewed.and_then(|(at, n)| {
        let shown = (u64::from(n) / 4).min(4);
        let (from, to) = (src.file_offset(at), src.file_offset(at + shown));
        (to.checked_sub(from) == Some(shown)).then_some((from, n))
    });
    f.offset = src.file_offset(f.offset);
}

/// What the last scan's state keeps of the file `key`, unchanged since (see [`state`]),
/// when its findings can be made again without reading it: a file of no datastore, and,
/// when it gave findings, one its site streams (not one attributed by what it holds).
/// Otherwise why it is read.
fn kept<'s>(
    last: &'s state::State,
    key: &[u8; 16],
    ident: &state::Ident,
    job: &FileJob,
    reading: Reading,
) -> Result<state::Hit<'s>, state::Stale> {
    let hit = last.lookup(key, ident, job.owner.site)?;
    match (reading, hit.has_findings()) {
        (Reading::Kine | Reading::Etcd | Reading::Dqlite, _) => Err(state::Stale::Read),
        (Reading::Whole { .. }, true) => Err(state::Stale::Read),
        (Reading::Stream | Reading::LogContent | Reading::Whole { .. }, _) => Ok(hit),
    }
}

/// How a dqlite snapshot's bytes are searched: given the worker and how to attribute a
/// match, the matches ([`Worker::scan_snapshot`]).
type SnapshotSearch<'s> =
    dyn FnMut(&mut Worker, &mut dyn FnMut(&mut Finding)) -> Result<Vec<Finding>, String> + 's;

impl Worker {
    /// Moves the last `overlap` bytes of `buf[..len]` to the front; returns the new carry.
    fn keep(&mut self, len: usize) -> usize {
        let keep = self.overlap.min(len);
        self.buf.copy_within(len - keep..len, 0);
        keep
    }

    pub(super) fn new(settings: &ScanSettings, overlap: usize) -> Worker {
        let chunk = settings.chunk;
        // The carry plus either a chunk or the zeros standing for a hole (and, for a log's
        // content, the start of a line held back from the chunk before).
        Worker {
            buf: vec![0; chunk.max(overlap) + overlap + HEAD_MAX],
            chunk,
            overlap,
            scratch: Scratch::until(settings.deadline),
            file_errors: Vec::new(),
            raw: Vec::new(),
            max_file_size: settings.max_file_size,
            deadline: settings.deadline,
            timed_out: false,
            names: Default::default(),
            unread: None,
            state: settings.state.clone(),
            keep_state: settings.keep_state,
            record: None,
            unchanged: None,
            due: false,
        }
    }

    /// Reads one file and returns (bytes read, findings); `None` if the file was already
    /// read under another name (hard link, overlapping `--path`). Errors are messages for
    /// the report's `errors` list.
    pub(super) fn scan_file(
        &mut self,
        job: &FileJob,
        searchers: &Searchers<'_>,
        seen: &Mutex<Seen>,
    ) -> Result<Option<(u64, Vec<Finding>)>, String> {
        self.scratch.start_file();
        self.file_errors.clear();
        let reading = sites::props(job.owner.site).reading;
        // The file's key in the state, only when there is one to keep (a digest of its
        // path and the parts of its node path: work no scan without `--state` does).
        let key = self.keep_state.then(|| state::key(&job.rel, &job.shown_as()));
        if let Some(taken) = self.unopened(job, key.as_ref(), reading, seen) {
            return Ok(taken);
        }
        let (f, ino) = match job.open() {
            Ok(opened) => opened,
            Err(walk::Unopened::Io(e)) => return Err(io_message(&e)),
            Err(walk::Unopened::Mount(m)) => {
                self.unread = Some(m);
                return Ok(None);
            }
        };
        let md = f.meta().map_err(|e| io_message(&e))?;
        if !md.is_file {
            return Err("not a regular file (changed during the scan); not read".to_owned());
        }
        if md.ino != ino {
            return Err("replaced during the scan; not read".to_owned());
        }
        if !seen.lock().expect("lock").insert(md.dev, md.ino) {
            return Ok(None);
        }
        // Liveness is applied to the findings once all are made (see `severity::judge`).
        let place = place(job.owner.category(|| f.is_tmpfs()), job.owner.stale, None);
        let size = md.len;
        if let Some(max) = self.max_file_size.filter(|&max| size > max) {
            return Err(format!("{size} bytes, more than --max-file-size {max}; not read"));
        }
        if size > SEQUENTIAL_FROM {
            f.read_sequentially();
        }
        // A file with a block allocated for every byte has no hole: only the others are
        // asked where their data is (two `lseek`s a file otherwise; some filesystems
        // allocate fewer blocks than they hold bytes, compressed or inline, and are asked).
        let sparse = md.blocks.saturating_mul(512) < size;
        let cx = Cx { of: job, searchers, place };
        let ident = state::Ident::of(&md);
        let last = self.state.clone();
        let hit = last.as_deref().zip(key.as_ref());
        let taken = hit.map(|(s, key)| kept(s, key, &ident, job, reading));
        if let Some(Ok(hit)) = taken {
            // Unchanged since the last scan read it: its findings made again from the
            // state (their previews' bytes read again), none of it searched.
            let mut make = |m| super::search::again(job, place, m);
            let found = hit.findings(&f, &mut make).map_err(|e| io_message(&e))?;
            self.unchanged = Some(hit.read);
            self.remember(key, ident, job, (hit.read, Some(hit.read_ns)), &found, reading);
            return Ok(Some((hit.read, found)));
        }
        self.due = taken == Some(Err(state::Stale::Due));
        let read = match reading {
            // A sparse log (truncated while a writer kept its offset) is streamed raw,
            // its holes skipped, rather than read zero by zero as content.
            Reading::LogContent if !(sparse && f.has_hole(size)) => {
                self.scan_log(job, f, size, &cx)?
            }
            Reading::Whole { cap, attribute } if size <= cap => {
                self.scan_whole(job, f, size, &cx, attribute)?
            }
            Reading::Kine => self.scan_kine(job, &f, size, sparse, &cx)?,
            Reading::Etcd => self.scan_etcd(job, &f, size, sparse, &cx)?,
            Reading::Dqlite => self.scan_dqlite(job, &f, size, sparse, &cx)?,
            Reading::Stream | Reading::LogContent | Reading::Whole { .. } => {
                self.scan_bytes(&f, size, sparse, &cx, &mut |_| {})?
            }
        };
        self.remember(key, ident, job, (read.0, None), &read.1, reading);
        Ok(Some(read))
    }

    /// A file the last scan read that gave no finding and is unchanged since: taken from
    /// the state without being opened for reading, its identity asked through an
    /// `O_PATH` descriptor ([`FileJob::peek`]; opening it for reading, with what comes
    /// with that, was most of an unchanged scan's work). `None`: it is opened (no state,
    /// changed, findings whose previews are read again, a mount point, an image's file);
    /// `Some(None)`: a file already read under another name (a hard link).
    fn unopened(
        &mut self,
        job: &FileJob,
        key: Option<&[u8; 16]>,
        reading: Reading,
        seen: &Mutex<Seen>,
    ) -> Option<Option<(u64, Vec<Finding>)>> {
        let (last, key) = (self.state.as_deref()?, key?);
        // A file the last scan did not read is opened at once.
        let md = last.holds(key).then(|| job.peek()).flatten()?;
        if !md.is_file || md.ino != job.ino {
            return None;
        }
        let ident = state::Ident::of(&md);
        let hit = kept(last, key, &ident, job, reading).ok().filter(|h| !h.has_findings())?;
        let (key, read, read_ns) = (*key, hit.read, hit.read_ns);
        if !seen.lock().expect("lock").insert(md.dev, md.ino) {
            return Some(None);
        }
        self.unchanged = Some(read);
        self.remember(Some(key), ident, job, (read, Some(read_ns)), &[], reading);
        Some(Some((read, Vec::new())))
    }

    /// Keeps what the file gave for the next scan's state, when it can be made again
    /// from it ([`kept`]): not a file cut short, nor one a rule could not finish, nor one
    /// whose reading met an error. `read`: the bytes read of it, and when the scan that
    /// read them started (`None`: this one).
    fn remember(
        &mut self,
        key: Option<[u8; 16]>,
        ident: state::Ident,
        job: &FileJob,
        (read, read_ns): (u64, Option<i64>),
        found: &[Finding],
        reading: Reading,
    ) {
        self.record = None;
        // An error (an I/O error inside a gzip log: perhaps not there next time) is met
        // again by reading again.
        let whole =
            !self.timed_out && !self.scratch.rules_incomplete && self.file_errors.is_empty();
        let keepable = match reading {
            Reading::Kine | Reading::Etcd | Reading::Dqlite => false,
            Reading::Whole { .. } => found.is_empty(),
            Reading::Stream | Reading::LogContent => true,
        };
        let Some(key) = key.filter(|_| whole && keepable) else { return };
        let Some(kept) = state::KeptFile::of(found) else { return };
        let site = job.owner.site;
        self.record = Some(state::Record { key, ident, site, read, read_ns, kept });
    }

    /// Searches what `r` gives to its end (an image layer's member, inflated as it is
    /// read), as one file of `cx`; returns (bytes read, findings). The file's
    /// problems are in `file_errors`.
    pub(super) fn scan_reader(
        &mut self,
        r: &mut dyn Read,
        cx: &Cx<'_>,
    ) -> Result<(u64, Vec<Finding>), String> {
        self.scratch.start_file();
        self.file_errors.clear();
        let mut src = Inflated { r, pos: 0, cap: u64::MAX, chunk: self.chunk };
        let found = self.stream(&mut src, cx, &mut |_| {}).map_err(|e| io_message(&e))?;
        Ok((src.pos, found))
    }

    /// Streams the file's bytes through the chunk loop, each finding given to `refine`
    /// before it is kept.
    fn scan_bytes(
        &mut self,
        f: &NodeFile,
        size: u64,
        sparse: bool,
        cx: &Cx<'_>,
        refine: &mut dyn FnMut(&mut Finding),
    ) -> Result<(u64, Vec<Finding>), String> {
        let (chunk, overlap) = (self.chunk, self.overlap);
        let mut bytes = FileBytes { f, size, sparse, pos: 0, read: 0, chunk, overlap };
        let found = self.stream(&mut bytes, cx, refine).map_err(|e| io_message(&e))?;
        Ok((bytes.read, found))
    }

    /// Reads a kine database or its log ([`Reading::Kine`]): its rows walked (the other
    /// file of the pair opened beside it, read at offsets, never locked), the values split
    /// across pages searched reassembled, then the file streamed raw, each match
    /// attributed to the row or page that holds it ([`sites::kine::Index`]). A file
    /// SQLite's format does not read is searched as it is.
    fn scan_kine(
        &mut self,
        job: &FileJob,
        f: &NodeFile,
        size: u64,
        sparse: bool,
        cx: &Cx<'_>,
    ) -> Result<(u64, Vec<Finding>), String> {
        use crate::sqlite::{Bytes, Db, Which};
        let name = job.rel.file_name().unwrap_or_default();
        let (which, other_name) = sites::kine::pair(name);
        let shown = other_name.to_string_lossy();
        let other = match job.open_sibling(&other_name) {
            Ok(o) => Some(o),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => {
                self.file_errors.push(format!("{shown} beside it: {}", io_message(&e)));
                None
            }
        };
        // The other file is read within the same limits as this one.
        let other_size = other.as_ref().map_or(0, |o| o.size());
        let other = match self.max_file_size.filter(|&max| other_size > max) {
            Some(max) => {
                self.file_errors.push(format!(
                    "{shown} beside it is larger than --max-file-size ({other_size} > {max} \
                     bytes); not read with it"
                ));
                None
            }
            None => other,
        };
        let pair: Option<(&dyn Bytes, Option<&dyn Bytes>)> = match (which, &other) {
            (Which::Main, other) => Some((f, other.as_ref().map(|o| o as &dyn Bytes))),
            (Which::Wal, Some(main)) => Some((main, Some(f))),
            (Which::Wal, None) => None,
        };
        let stop = self.stop_check();
        let db = match pair.map(|(main, wal)| Db::open_until(main, wal, &stop)) {
            Some(Ok(db)) => db,
            Some(Err(e)) => {
                self.file_errors.push(format!("{e}; searched as it is"));
                return self.scan_bytes(f, size, sparse, cx, &mut |_| {});
            }
            None => return self.scan_bytes(f, size, sparse, cx, &mut |_| {}),
        };
        let (n, mut found, index) =
            self.scan_attributed(f, size, sparse, cx, &db, which, &stop, "kine")?;
        // The database says once, in its main file, what its Secrets are at rest.
        let counts = index.map(|index| index.secrets_at_rest()).unwrap_or_default();
        if which == Which::Main && !counts.is_empty() {
            found.push(super::search::at_rest(job, counts));
        }
        Ok((n, aggregate(found)))
    }

    /// Streams `f`, the file `which` of `db`, each match attributed to the row that holds
    /// it ([`Self::rows`]), with the matches of values split across pages; and the index
    /// of its rows, unless a stop signal or the deadline came while they were read (then
    /// the file is not streamed).
    #[allow(clippy::too_many_arguments)]
    fn scan_attributed(
        &mut self,
        f: &NodeFile,
        size: u64,
        sparse: bool,
        cx: &Cx<'_>,
        db: &crate::sqlite::Db<'_>,
        which: crate::sqlite::Which,
        stop: &dyn Fn() -> bool,
        format: &str,
    ) -> Result<(u64, Vec<Finding>, Option<sites::kine::Index>), String> {
        let mut index = self.rows(db, which, cx, stop, format);
        if self.cut(0) {
            return Ok((0, index.take_split(), None));
        }
        let (n, mut found) =
            self.scan_bytes(f, size, sparse, cx, &mut |found| index.attribute(db, found))?;
        found.extend(index.take_split());
        Ok((n, found, Some(index)))
    }

    /// The rows of kine's table in `db` whose bytes are in `which` ([`sites::kine::Index`]),
    /// each row whose bytes are not one run of the file searched reassembled; what could
    /// not be read is an error of `format`.
    fn rows(
        &mut self,
        db: &crate::sqlite::Db<'_>,
        which: crate::sqlite::Which,
        cx: &Cx<'_>,
        stop: &dyn Fn() -> bool,
        format: &str,
    ) -> sites::kine::Index {
        let scratch = &mut self.scratch;
        let index = sites::kine::Index::build(db, which, |r| {
            if stop() || scratch.stopped {
                return None;
            }
            // Each row is a file of its own: another row's matched ranges mean nothing here.
            scratch.start_file();
            let mut found = Vec::new();
            let len = r.payload.len();
            let span = Span { carry: 0, len, pos: 0, last: true, each: true };
            scratch.search(&r.payload, cx, span, &mut found);
            Some(found)
        });
        // The rows' searches are no part of the file's stream.
        self.scratch.start_file();
        self.file_errors.extend(index.errors.iter().map(|e| format!("{format}: {e}")));
        index
    }

    /// Reads a file of dqlite's data dir ([`Reading::Dqlite`]): a segment of the raft log
    /// as the pages its transactions wrote to kine's database, a snapshot as the databases
    /// it holds (when LZ4-compressed, inflated in memory up to
    /// [`sites::dqlite::MAX_SNAPSHOT`], offsets then in the inflated bytes; a larger one is
    /// searched as it inflates, its rows not read), each match attributed to its row; any
    /// other file streamed as it is.
    fn scan_dqlite(
        &mut self,
        job: &FileJob,
        f: &NodeFile,
        size: u64,
        sparse: bool,
        cx: &Cx<'_>,
    ) -> Result<(u64, Vec<Finding>), String> {
        use crate::dqlite;
        use crate::sqlite::{Db, Which};
        use sites::dqlite::{Kind, DATABASE, MAX_INFLATED, MAX_SNAPSHOT};
        let name = job.rel.file_name().unwrap_or_default();
        let stop = self.stop_check();
        match Kind::of(std::os::unix::ffi::OsStrExt::as_bytes(name)) {
            Kind::Other => self.scan_bytes(f, size, sparse, cx, &mut |_| {}),
            Kind::Segment => {
                let mut txns = Vec::new();
                let mut page_size = None;
                let mut errors = dqlite::entries(f, |e| {
                    if stop() {
                        return dqlite::Flow::Break(());
                    }
                    if let Ok(Some(fr)) = dqlite::frames(f, e) {
                        if fr.database == DATABASE
                            && *page_size.get_or_insert(fr.page_size) == fr.page_size
                        {
                            txns.push(fr.pages);
                        }
                    }
                    dqlite::Flow::Continue(())
                });
                errors.truncate(16);
                self.file_errors.extend(errors.iter().map(ToString::to_string));
                let Some(page_size) = page_size else {
                    return self.scan_bytes(f, size, sparse, cx, &mut |_| {});
                };
                let db = Db::of_images(f, page_size, &txns, &stop);
                let (n, found, _) =
                    self.scan_attributed(f, size, sparse, cx, &db, Which::Wal, &stop, "dqlite")?;
                Ok((n, aggregate(found)))
            }
            Kind::Snapshot if dqlite::is_lz4(f) => {
                let (data, whole) = dqlite::inflate(f, MAX_SNAPSHOT);
                if let Err(e) = whole {
                    self.file_errors.push(e.to_string());
                }
                if data.len() as u64 >= MAX_SNAPSHOT {
                    // Too large to hold: its rows are not read, its bytes are searched as
                    // they inflate.
                    drop(data);
                    let r = dqlite::inflating(f);
                    let mut src = Inflated { r, pos: 0, cap: MAX_INFLATED, chunk: self.chunk };
                    let found =
                        self.stream(&mut src, cx, &mut |_| {}).map_err(|e| io_message(&e))?;
                    return Ok((size, aggregate(found)));
                }
                let found =
                    self.scan_snapshot(job, &data.as_slice(), cx, &stop, &mut |s, refine| {
                        let mut raw = Vec::new();
                        let span =
                            Span { carry: 0, len: data.len(), pos: 0, last: true, each: true };
                        s.scratch.search(&data, cx, span, &mut raw);
                        s.cut(0);
                        for f in &mut raw {
                            refine(f);
                        }
                        Ok(raw)
                    })?;
                Ok((size, found))
            }
            Kind::Snapshot => {
                let mut read = 0;
                let found = self.scan_snapshot(job, f, cx, &stop, &mut |s, refine| {
                    let (n, found) = s.scan_bytes(f, size, sparse, cx, refine)?;
                    read = n;
                    Ok(found)
                })?;
                Ok((read, found))
            }
        }
    }

    /// Reads a dqlite snapshot's bytes `snap`: kine's database in it read ([`Self::rows`]),
    /// its bytes searched by `search` (given how to attribute a match), and the database
    /// says what its Secrets are at rest.
    fn scan_snapshot(
        &mut self,
        job: &FileJob,
        snap: &dyn crate::sqlite::Bytes,
        cx: &Cx<'_>,
        stop: &dyn Fn() -> bool,
        search: &mut SnapshotSearch<'_>,
    ) -> Result<Vec<Finding>, String> {
        use crate::sqlite::{Db, Which};
        use crate::sys::Window;
        let dbs = match crate::dqlite::snapshot(snap) {
            Ok(dbs) => dbs,
            Err(e) => {
                self.file_errors.push(format!("{e}; searched as it is"));
                Vec::new()
            }
        };
        let Some(k8s) = dbs.into_iter().find(|d| d.database == sites::dqlite::DATABASE) else {
            return Ok(aggregate(search(self, &mut |_| {})?));
        };
        let main = Window { of: snap, range: k8s.main.clone() };
        let wal = Window { of: snap, range: k8s.wal.clone() };
        let log = (!k8s.wal.is_empty()).then_some(&wal as &dyn crate::sqlite::Bytes);
        let db = match Db::open_until(&main, log, stop) {
            Ok(db) => db,
            Err(e) => {
                self.file_errors.push(format!("{e}; searched as it is"));
                return Ok(aggregate(search(self, &mut |_| {})?));
            }
        };
        let mut parts = Vec::new();
        for (which, range) in [(Which::Main, k8s.main.clone()), (Which::Wal, k8s.wal.clone())] {
            let index = self.rows(&db, which, cx, stop, "dqlite");
            parts.push((range, index));
        }
        let mut found = match self.cut(0) {
            true => Vec::new(),
            false => search(self, &mut |found| {
                if let Some((range, index)) = parts.iter().find(|(r, _)| r.contains(&found.offset))
                {
                    found.offset -= range.start;
                    index.attribute(&db, found);
                    found.offset += range.start;
                }
            })?,
        };
        for (range, index) in &mut parts {
            for mut split in index.take_split() {
                split.offset += range.start;
                found.push(split);
            }
        }
        // The newest complete snapshot says what the datastore's Secrets are at rest, as of
        // its index; an older one's rows are the datastore's no longer.
        let name = std::os::unix::ffi::OsStrExt::as_bytes(job.rel.file_name().unwrap_or_default());
        let newest = match job.sibling_names() {
            Ok(siblings) => sites::dqlite::is_newest(name, &siblings),
            Err(e) => {
                self.file_errors.push(format!("its dir could not be listed: {}", io_message(&e)));
                false
            }
        };
        let counts = parts[0].1.secrets_at_rest();
        if !counts.is_empty() && newest {
            found.push(super::search::at_rest(job, counts));
        }
        if !newest {
            found.iter_mut().for_each(sites::kine::superseded);
        }
        Ok(aggregate(found))
    }

    /// Reads an etcd file ([`Reading::Etcd`]): when it is a bbolt database (etcd's `db`, a
    /// snapshot), its bucket of keys is walked page by page first; then it is streamed,
    /// each match attributed to the key and revision whose value holds it, and the
    /// database says once what its Secrets are at rest.
    fn scan_etcd(
        &mut self,
        job: &FileJob,
        f: &NodeFile,
        size: u64,
        sparse: bool,
        cx: &Cx<'_>,
    ) -> Result<(u64, Vec<Finding>), String> {
        let stop = self.stop_check();
        let db = sites::etcd::Database::read(f, &stop);
        if let Some(db) = &db {
            self.file_errors.extend(db.errors.iter().cloned());
        }
        let (n, mut found) = self.scan_bytes(f, size, sparse, cx, &mut |found| {
            if let Some(db) = &db {
                db.attribute(found);
            }
        })?;
        let counts = db.map(|db| db.secrets_at_rest()).unwrap_or_default();
        if !counts.is_empty() {
            found.push(super::search::at_rest(job, counts));
        }
        Ok((n, aggregate(found)))
    }

    /// Reads a file of at most its site's cap whole, searches it as one buffer, and has its
    /// site `attribute` the matches ([`crate::sites::Attribute`]), from what it
    /// parsed of the same file at discovery when it kept that ([`crate::sites::Kept`]).
    fn scan_whole(
        &mut self,
        job: &FileJob,
        mut f: NodeFile,
        size: u64,
        cx: &Cx<'_>,
        attribute: sites::Attribute,
    ) -> Result<(u64, Vec<Finding>), String> {
        let mut data = Vec::new();
        f.by_ref().take(size).read_to_end(&mut data).map_err(|e| io_message(&e))?;
        let n = data.len();
        if (n as u64) < size {
            note_shrunk(&f, size, &mut self.file_errors);
        }
        let mut raw = Vec::new();
        self.scratch.search(
            &data,
            cx,
            Span { carry: 0, len: n, pos: 0, last: true, each: true },
            &mut raw,
        );
        self.cut(0);
        // What the site parsed of the file at discovery, if it is still that file.
        let kept = job.owner.kept();
        let kept = kept.filter(|k| f.meta().is_ok_and(|m| sites::FileId::of(&m) == k.identity));
        let parsed = kept.map(|k| &*k.parsed);
        let keeper = job.owner.records.as_deref().and_then(|o| o.record.runtime);
        let attributed = attribute(parsed, keeper, &data, &mut raw);
        self.file_errors.extend(attributed);
        Ok((n as u64, aggregate(raw)))
    }

    /// Searches a pod log as its content (see [`crate::node::logs`]). A compressed log is
    /// decompressed while read, at most [`MAX_GZ_LOG`] bytes of it (a decompression bomb
    /// costs no more); what lies past that is an `errors` entry.
    fn scan_log(
        &mut self,
        job: &FileJob,
        mut f: NodeFile,
        size: u64,
        cx: &Cx<'_>,
    ) -> Result<(u64, Vec<Finding>), String> {
        // A `.gz` name on a file that is not gzip (no magic number): searched as it is.
        let mut magic = [0u8; 2];
        let gz = job.rel.extension().is_some_and(|e| e == "gz")
            && f.read_exact(&mut magic).is_ok()
            && magic == [0x1f, 0x8b];
        f.rewind().map_err(|e| io_message(&e))?;
        if gz {
            let mut z = flate2::read::MultiGzDecoder::new(&mut f);
            let mut inflated = self.log(&mut z, Some(MAX_GZ_LOG), cx);
            // Its offsets are the inflated bytes': the file does not hold what matched.
            for f in &mut inflated.1 {
                f.previewed = None;
            }
            match inflated {
                // Damaged from the start: nothing inflates, so the bytes are searched as
                // they are.
                (0, _, Some(e)) => {
                    self.file_errors.push(format!("gzip: {}; searched as it is", io_message(&e)));
                    f.rewind().map_err(|e| io_message(&e))?;
                }
                // Damaged or cut further on: what inflated is searched.
                (n, found, Some(e)) => {
                    let e = io_message(&e);
                    self.file_errors.push(format!("gzip: {e}; the rest was not searched"));
                    return Ok((n, found));
                }
                (n, found, None) => return Ok((n, found)),
            }
        }
        // Read up to its size when opened, like any file.
        let (n, found, error) = self.log(&mut f.by_ref().take(size), None, cx);
        if let Some(e) = error {
            return Err(io_message(&e));
        }
        if n < size {
            note_shrunk(&f, size, &mut self.file_errors);
        }
        Ok((n, found))
    }

    /// Streams the log `log` (at most `cap` of its bytes) through the chunk loop as its
    /// content: (bytes read, findings with file offsets, the read error that ended it).
    fn log(
        &mut self,
        log: &mut dyn Read,
        cap: Option<u64>,
        cx: &Cx<'_>,
    ) -> (u64, Vec<Finding>, Option<io::Error>) {
        let mut raw = std::mem::take(&mut self.raw);
        raw.resize(self.chunk, 0);
        let ex = Extractor::default();
        let (drained, finished, error) = (false, false, None);
        let mut content =
            LogContent { log, ex, raw, cap, total: 0, cpos: 0, drained, finished, error };
        let found = self.stream(&mut content, cx, &mut |_| {}).unwrap_or_default();
        self.raw = std::mem::take(&mut content.raw);
        (content.total, found, content.error)
    }

    /// The chunk loop: searches what `src` gives, buffer after buffer, each starting with
    /// the last `overlap` bytes of the one before (a match across a boundary is found
    /// once), until the source ends, a stop signal comes or the deadline passes. Offsets
    /// of the findings are the file's; each is given to `refine` before it is kept.
    fn stream(
        &mut self,
        src: &mut dyn Source,
        cx: &Cx<'_>,
        refine: &mut dyn FnMut(&mut Finding),
    ) -> io::Result<Vec<Finding>> {
        // The findings of the file, and those of the buffer searched last.
        let (mut findings, mut fresh) = (Vec::new(), Vec::new());
        let (mut carry, mut pos) = (0usize, 0u64);
        let mut ended = false;
        while !ended {
            let mut piece = Piece::End;
            if !src.read_all() && (sys::stop_signal().is_some() || self.late(src.reached())) {
                // What was read but held back is searched, as the last piece.
                if let Some((at, n)) = src.flush(&mut self.buf[carry..]) {
                    piece = Piece::Data { at, n, last: true };
                }
            } else {
                piece = src.next(&mut self.buf[carry..], &mut self.file_errors)?;
            }
            let Piece::Data { at, n, last } = piece else { break };
            pos = at + n as u64;
            if n == 0 {
                // Nothing more to search but the carry (below), when this was the last.
                if last {
                    break;
                }
                continue;
            }
            self.scratch.search(
                &self.buf,
                cx,
                Span { carry, len: carry + n, pos: at, last, each: false },
                &mut fresh,
            );
            for mut f in fresh.drain(..) {
                to_file(&mut f, &*src);
                refine(&mut f);
                hold(&mut findings, f);
            }
            if self.cut(src.file_offset(at)) {
                return Ok(aggregate(findings));
            }
            ended = last;
            if !ended {
                carry = self.keep(carry + n);
                src.forget_before(pos - carry as u64);
            }
        }
        if !ended {
            // Rule hits whose window ran past the last buffer's end were left for a next
            // buffer; the source ended, so they are taken from the carry, clipped there.
            self.scratch.search(
                &self.buf,
                cx,
                Span { carry, len: carry, pos, last: true, each: false },
                &mut fresh,
            );
            for mut f in fresh.drain(..) {
                to_file(&mut f, &*src);
                refine(&mut f);
                hold(&mut findings, f);
            }
        }
        Ok(aggregate(findings))
    }

    /// Whether a stop signal or the deadline cut the search of the last buffer, which
    /// starts at byte `at` of the file; if the deadline did, the file is noted as read
    /// up to there.
    fn cut(&mut self, at: u64) -> bool {
        if !std::mem::take(&mut self.scratch.stopped) {
            return false;
        }
        self.late(at);
        true
    }

    /// What a reader of a file asks between its reads: whether a stop signal came or the
    /// deadline passed.
    pub(super) fn stop_check(&self) -> impl Fn() -> bool + use<> {
        let deadline = self.deadline;
        move || sys::stop_signal().is_some() || deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// Whether the deadline has passed; if so, the file is noted as read up to `reached`.
    fn late(&mut self, reached: u64) -> bool {
        if self.deadline.is_none_or(|d| Instant::now() < d) {
            return false;
        }
        self.timed_out = true;
        self.file_errors
            .push(format!("read up to byte {reached} only: the scan's --timeout passed"));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::Category;
    use crate::finding::{Severity, SiteId};
    use crate::sites::{Layout, Scope, ScopeKind};
    use crate::walk::WalkItem;
    use std::time::Duration;

    /// The value the matcher knows, in `rules::tests::matcher_of(true)`.
    const VALUE: &[u8] = b"Zq0v7TokenValueForTheMatcher42";

    /// A pod log read in two steps: its first `split` bytes, then the rest. The clock
    /// passes `deadline` after the first step when `late_data`, else only once the end
    /// was asked for (every byte was read by then).
    struct Slow {
        data: Vec<u8>,
        split: usize,
        at: usize,
        deadline: Instant,
        late_data: bool,
    }

    impl Slow {
        fn wait(&self) {
            while Instant::now() <= self.deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }

    impl Read for Slow {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            if self.at == self.data.len() && !self.late_data {
                self.wait();
            }
            let limit = if self.at < self.split { self.split } else { self.data.len() };
            let n = out.len().min(limit - self.at);
            out[..n].copy_from_slice(&self.data[self.at..self.at + n]);
            self.at += n;
            if self.at == self.split && self.late_data {
                self.wait();
            }
            Ok(n)
        }
    }

    /// Streams a log whose last line has no newline, with the deadline passing at the
    /// point `late_data` says: (findings, the file's error entries).
    fn stream_log(late_data: bool) -> (Vec<Finding>, Vec<String>) {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("0.log");
        std::fs::write(&log, b"").unwrap();
        let root = sys::RootDir::open(dir.path()).unwrap();
        let scope = Scope {
            rel: "0.log".into(),
            node_path: "/0.log".into(),
            kind: ScopeKind::Site(SiteId::PodLog),
            start: crate::sys::walk::Start::Crossing,
        };
        let crossings = walk::Crossings::new(root.clone(), false);
        let Some(WalkItem::File(job)) =
            walk::walk_scope(&root, (scope, Default::default()), &crossings).next()
        else {
            panic!("the log is walked")
        };
        let matcher = crate::rules::tests::matcher_of(true);
        let rules = crate::rules::Rules::builtin(0);
        let searchers = Searchers { matcher: &matcher, rules: &rules };
        // The value ends the first step, at the start of a line the second step goes on
        // with: held back until it is known whether the line is a CRI line.
        let first =
            [b"2024-01-01T00:00:00.000000000Z stdout F starting\n".as_slice(), VALUE].concat();
        let rest: &[u8] = if late_data { b" and more\n" } else { b"" };
        let split = first.len();
        let data = [first.as_slice(), rest].concat();
        let deadline = Instant::now() + Duration::from_millis(300);
        let settings = ScanSettings {
            layout: Layout::defaults(),
            threads: 1,
            chunk: if late_data { split } else { 1 << 16 },
            max_file_size: None,
            deadline: Some(deadline),
            state: None,
            keep_state: false,
        };
        let mut w = Worker::new(&settings, searchers.overlap());
        let mut slow = Slow { data, split, at: 0, deadline, late_data };
        let cx = Cx { of: &job, searchers: &searchers, place: (Category::PodLog, Severity::High) };
        let (_, found, error) = w.log(&mut slow, None, &cx);
        assert!(error.is_none());
        (found, std::mem::take(&mut w.file_errors))
    }

    /// A log read to its end before the deadline passes is read whole: its last line
    /// (no newline) is searched, and no `--timeout` entry says otherwise.
    #[test]
    fn a_log_read_to_its_end_is_not_cut_by_a_later_deadline() {
        let (found, errors) = stream_log(false);
        assert_eq!(found.len(), 1, "the value in the last line is found: {found:?}");
        assert!(errors.is_empty(), "{errors:?}");
    }

    /// When the deadline cuts a log, what was read but held back (its unfinished last
    /// line) is searched too, and the cut is told.
    #[test]
    fn a_log_cut_by_the_deadline_searches_what_was_read() {
        let (found, errors) = stream_log(true);
        assert_eq!(found.len(), 1, "the value read before the cut is found: {found:?}");
        assert!(errors.iter().any(|e| e.contains("--timeout")), "{errors:?}");
    }
}
