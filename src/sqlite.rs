//! A read-only reader of SQLite database files and their write-ahead logs (kine's
//! `state.db` and `state.db-wal`, the datastore of k3s and k0s), page by page.
//!
//! It never goes through SQLite: SQLite opening a database in WAL mode creates or writes
//! its `-shm` index and takes locks, and a live kine would see a reader it does not know.
//! No maintained crate reads the file format without SQLite's library (`rusqlite` and
//! `sqlx` link it; `immutable=1` still needs the engine and ignores the WAL, whose frames
//! are what holds the newest rows), so this reads the documented, stable format itself:
//! <https://www.sqlite.org/fileformat2.html> (facts and their sections in
//! `docs/NODE-LAYOUT.md`, "kine"). All integers are big-endian.
//!
//! * The 100-byte header on page 1: page size at 16 (1 meaning 65536), reserved bytes per
//!   page at 20, the page count at 28 (valid when the change counter at 24 equals the
//!   version-valid-for at 92), the first freelist trunk page at 32.
//! * B-tree pages: a header (at 100 on page 1, else at 0) of type (0x05 interior table,
//!   0x0d leaf table, 0x02/0x0a index), first freeblock, cell count, content start,
//!   fragmented bytes and, on interior pages, the right-most child; then the cell
//!   pointers. A table leaf cell is `varint payload size, varint rowid, local payload,
//!   [u32 first overflow page]`, the local part `X = U-35` bytes when the payload fits,
//!   else `K = M + (P-M) % (U-4)` (or `M` when `K > X`), `M = (U-12)*32/255 - 23`.
//! * An overflow page is `u32 next page, U-4 bytes of payload`; a freelist trunk page is
//!   `u32 next trunk, u32 count, count × u32 leaf pages`; leaf pages of the freelist keep
//!   whatever was last written there.
//! * The WAL: a 32-byte header (magic `0x377f0682`/`0x377f0683`, version, page size,
//!   checkpoint sequence, two salts, two checksum words), then frames of a 24-byte header
//!   (page number, the database size after a commit or 0, the salts, the cumulative
//!   checksum) and a page image. A frame is valid when its salts are the header's and the
//!   checksum chain holds up to it; the valid frames up to the last commit frame are the
//!   database, each the newest image of its page; the rest (a transaction not committed,
//!   frames of an earlier generation of the log) hold older data.
//!
//! The reader yields every record of every table b-tree of the current database, then
//! every record it can read from the page images the current database no longer uses:
//! the older images of pages the log rewrote, the log's frames not (or no longer) part of
//! the database, the freelist's pages. Everything is bounds-checked and budgeted: a
//! corrupt or hostile file gives an [`Error`] naming pages and offsets (never a value),
//! the work is linear in the file's size whatever its header or pointers claim (cycles in
//! trees and chains, absurd counts), and memory is a page plus the record being read.
//! Cells a page's pointers make overlap are read once; a page that cannot be read loses
//! its subtree, not the table ([`Db::read_whole`] says so); a record read from a log frame
//! reads its overflow pages as they were then (its transaction's frames or earlier ones,
//! else the main file's), and an older record's chain stops at a page image the current
//! database uses (those bytes are another record's now); a caller's `stop`
//! ([`Db::open_until`]) is asked before every page read.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::ops::Range;

pub use crate::sys::Bytes;
use crate::sys::{be16, be32};

/// The magic string that starts a database file.
pub const MAGIC: &[u8; 16] = b"SQLite format 3\0";
/// The two magic numbers of a WAL header (checksums of little- or big-endian words).
const WAL_MAGIC: [u32; 2] = [0x377f_0682, 0x377f_0683];
const WAL_HEADER: u64 = 32;
const FRAME_HEADER: u64 = 24;
const TABLE_INTERIOR: u8 = 0x05;
const TABLE_LEAF: u8 = 0x0d;
/// SQLite's own limit on a b-tree's depth is 20; past this a tree is a loop.
const MAX_DEPTH: usize = 40;
/// The most columns of a record read ([`columns`]).
pub const MAX_COLUMNS: usize = 64;
/// The largest record reassembled (kine's values are at most etcd's 1.5 MiB request
/// limit, twice with the old value); the rest of a larger one is not read.
pub const MAX_RECORD: usize = 64 << 20;
/// How many times over the reader may read the page images a file holds: the current
/// trees once, the other images once each, the overflow chains of the records they hold
/// and the lookups of the caller. Past this every read fails, so the work on any file is
/// linear in its size.
const REREADS: u64 = 8;

/// Why a file, or part of it, could not be read. The message names pages and offsets only.
pub use crate::sys::ReadError as Error;

fn err(msg: impl Into<String>) -> Error {
    Error::new("sqlite", msg.into())
}

/// Which of the two files a byte is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Which {
    /// The database file.
    Main,
    /// Its write-ahead log.
    Wal,
}

/// Where a page image starts: its file and byte offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Loc {
    /// The file.
    pub which: Which,
    /// The offset of the image's first byte.
    pub at: u64,
}

/// What the database makes of a page image a record was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Version {
    /// A page of a table of the current database.
    Current,
    /// An image the database no longer uses: a page the log has rewritten since, a log
    /// frame of a transaction not committed or of an earlier generation of the log.
    Older,
    /// A page on the current database's freelist.
    Freed,
}

/// The state of a log frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameState {
    /// Valid and committed: part of the database (the newest image of its page, or an
    /// older one).
    Committed,
    /// Valid but after the last commit: a transaction not (yet) committed.
    Uncommitted,
    /// Not valid (another generation's salts, a broken checksum chain): left over.
    Unused,
}

#[derive(Clone, Copy, Debug)]
struct Frame {
    page: u32,
    /// The offset of its page image in the log.
    at: u64,
    state: FrameState,
}

/// One piece of a record's payload: `len` bytes of the payload from `start`, in `which`
/// at `at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    /// Offset in the payload.
    pub start: usize,
    /// Its length.
    pub len: usize,
    /// Its file.
    pub which: Which,
    /// Its offset in the file.
    pub at: u64,
}

/// A record of a table b-tree (a row), its payload reassembled from its cell and its
/// overflow pages.
#[derive(Clone, Debug)]
pub struct Record {
    /// The root page of its table, when known (an image no tree uses has none).
    pub table: Option<u32>,
    /// Its rowid.
    pub rowid: i64,
    /// What the database makes of the image it was read from.
    pub version: Version,
    /// Where its cell's page image is.
    pub page: Loc,
    /// The payload (at most [`MAX_RECORD`] bytes; see `complete`).
    pub payload: Vec<u8>,
    /// Where each part of `payload` is in the files, in payload order.
    pub pieces: Vec<Piece>,
    /// Whether the payload was read whole (not cut at [`MAX_RECORD`] nor by a broken
    /// overflow chain).
    pub complete: bool,
}

impl Record {
    /// Where the payload's byte `at` is in the files.
    pub fn locate(&self, at: usize) -> Option<(Which, u64)> {
        let p = self.pieces.iter().find(|p| (p.start..p.start + p.len).contains(&at))?;
        Some((p.which, p.at + (at - p.start) as u64))
    }

    /// Whether the bytes `range` of `which` hold any of the payload.
    pub fn holds(&self, which: Which, range: Range<u64>) -> bool {
        self.pieces
            .iter()
            .any(|p| p.which == which && p.at < range.end && range.start < p.at + p.len as u64)
    }
}

/// A column's value in a record.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value<'r> {
    /// NULL (also a rowid alias column, whose value is the rowid).
    Null,
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// Text, as stored (UTF-8 in kine's databases).
    Text(&'r [u8]),
    /// A blob.
    Blob(&'r [u8]),
}

/// A table of the schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table {
    /// Its name.
    pub name: String,
    /// Its root page.
    pub root: u32,
    /// Its `CREATE TABLE` statement.
    pub sql: String,
}

/// Whether a walk over records goes on.
pub type Flow = std::ops::ControlFlow<()>;

/// An opened database: its header's facts, its log's frames, the current database's map
/// of pages to images and what is left of the read budget.
pub struct Db<'a> {
    main: &'a dyn Bytes,
    wal: Option<&'a dyn Bytes>,
    page_size: usize,
    usable: usize,
    /// Pages of the current database.
    pages: u32,
    frames: Vec<Frame>,
    /// The newest committed frame of each page the log holds.
    newest: HashMap<u32, usize>,
    budget: Cell<u64>,
    errors: RefCell<Vec<Error>>,
    /// Asked before each page read: whether to stop (a deadline, a signal).
    stop: &'a dyn Fn() -> bool,
    /// Whether every page of the tables walked so far was read.
    whole: Cell<bool>,
    /// The pages the current database's tables use (their trees and overflow chains, as
    /// far as walked): an older record's overflow chain does not run into them.
    used: RefCell<HashSet<u32>>,
    /// The log's transactions: what an older record's overflow pages were when it was
    /// written.
    history: History,
}

/// The frames of each page in order, the last frame of each frame's transaction, and the
/// frame a record in a log frame is read as of (its overflow pages are the images of that
/// time: its transaction's, or earlier, else the main file's).
#[derive(Default)]
struct History {
    frames: HashMap<u32, Vec<usize>>,
    txn_end: Vec<usize>,
    as_of: Cell<Option<usize>>,
    /// A database of page images only ([`Db::of_images`]): no main file behind the log.
    log_only: bool,
}

/// No bytes: the main file of a database of page images only.
static NO_FILE: &[u8] = &[];

/// Never stops.
fn never() -> bool {
    false
}

/// Reads a varint at `at`: (value, its length).
fn varint(b: &[u8], at: usize) -> Option<(u64, usize)> {
    let mut v: u64 = 0;
    for i in 0..9 {
        let c = *b.get(at + i)?;
        if i == 8 {
            return Some(((v << 8) | u64::from(c), 9));
        }
        v = (v << 7) | u64::from(c & 0x7f);
        if c & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// The WAL checksum of `data` (whole 8-byte words), continuing from `s`.
fn wal_checksum(big_endian: bool, data: &[u8], mut s: (u32, u32)) -> (u32, u32) {
    let word = |w: &[u8]| {
        let w: [u8; 4] = w.try_into().unwrap_or_default();
        if big_endian {
            u32::from_be_bytes(w)
        } else {
            u32::from_le_bytes(w)
        }
    };
    for pair in data.chunks_exact(8) {
        s.0 = s.0.wrapping_add(word(&pair[..4])).wrapping_add(s.1);
        s.1 = s.1.wrapping_add(word(&pair[4..])).wrapping_add(s.0);
    }
    s
}

/// The record format's columns of `payload`: each value and its bytes in the payload. A
/// payload cut short gives the columns that are whole, and the last one cut.
pub fn columns(payload: &[u8]) -> Result<Vec<(Value<'_>, Range<usize>)>, Error> {
    let (header_len, n) = varint(payload, 0).ok_or_else(|| err("record header cut short"))?;
    let header_len = usize::try_from(header_len).unwrap_or(usize::MAX);
    if header_len < n || header_len > payload.len() {
        return Err(err(format!("record header of {header_len} bytes")));
    }
    let mut out = Vec::new();
    let (mut at, mut body) = (n, header_len);
    // A table of kine's has 9 columns; a header claiming millions is read that far only.
    while at < header_len && out.len() < MAX_COLUMNS {
        let (serial, n) = varint(payload, at).ok_or_else(|| err("serial type cut short"))?;
        at += n;
        let len = match serial {
            0 | 8 | 9 => 0,
            1..=4 => serial as usize,
            5 => 6,
            6 | 7 => 8,
            10 | 11 => return Err(err(format!("reserved serial type {serial}"))),
            n => usize::try_from((n - 12) / 2).unwrap_or(usize::MAX),
        };
        let end = body.saturating_add(len).min(payload.len());
        let bytes = &payload[body..end];
        let int = || {
            let mut v: i64 = if bytes.first().is_some_and(|b| b & 0x80 != 0) { -1 } else { 0 };
            for &b in bytes {
                v = (v << 8) | i64::from(b);
            }
            v
        };
        let value = match serial {
            0 => Value::Null,
            1..=6 => Value::Int(int()),
            7 => Value::Float(f64::from_bits(int() as u64)),
            8 => Value::Int(0),
            9 => Value::Int(1),
            n if n % 2 == 0 => Value::Blob(bytes),
            _ => Value::Text(bytes),
        };
        out.push((value, body..end));
        if end == payload.len() && body.saturating_add(len) > end {
            break;
        }
        body = end;
    }
    Ok(out)
}

impl<'a> Db<'a> {
    /// Opens a database file and, when given, its log: reads the header, checks each log
    /// frame and maps the current database's pages to their images. Nothing is written.
    pub fn open(main: &'a dyn Bytes, wal: Option<&'a dyn Bytes>) -> Result<Db<'a>, Error> {
        Db::open_until(main, wal, &never)
    }

    /// [`Db::open`], asking `stop` before each page read (the log's frames while opening
    /// too) whether to stop: past it every read fails, and the database is not read whole.
    pub fn open_until(
        main: &'a dyn Bytes,
        wal: Option<&'a dyn Bytes>,
        stop: &'a dyn Fn() -> bool,
    ) -> Result<Db<'a>, Error> {
        let mut head = [0u8; 100];
        main.read_at(0, &mut head).map_err(|_| err("shorter than its 100-byte header"))?;
        if &head[..16] != MAGIC {
            return Err(err("not a database (no 'SQLite format 3' magic)"));
        }
        let page_size = match be16(&head, 16).unwrap_or(0) {
            1 => 65536,
            n => usize::from(n),
        };
        if !(512..=65536).contains(&page_size) || !page_size.is_power_of_two() {
            return Err(err(format!("page size {page_size}")));
        }
        let usable = page_size - usize::from(head[20]);
        if usable < 480 {
            return Err(err(format!("{usable} usable bytes a page")));
        }
        let in_file = u32::try_from(main.size() / page_size as u64).unwrap_or(u32::MAX);
        let counter_valid = be32(&head, 24) == be32(&head, 92);
        let pages = match be32(&head, 28).unwrap_or(0) {
            n if n > 0 && counter_valid => n,
            _ => in_file,
        };
        let mut db = Db {
            main,
            wal,
            page_size,
            usable,
            pages,
            frames: Vec::new(),
            newest: HashMap::new(),
            budget: Cell::new(0),
            errors: RefCell::new(Vec::new()),
            stop,
            whole: Cell::new(true),
            used: RefCell::new(HashSet::new()),
            history: History::default(),
        };
        if let Some(wal) = wal {
            db.read_wal(wal);
        }
        let images = u64::from(in_file) + db.frames.len() as u64;
        db.budget.set(REREADS.saturating_mul(images).saturating_add(64));
        Ok(db)
    }

    /// A database of page images only (dqlite's raft log: each transaction's pages, in
    /// order, in `log`; `txns` the page number and image offset of each page of each
    /// transaction). Its records are read with [`Db::image_records`]: each table leaf
    /// image once, its overflow pages the images of its transaction or before.
    pub fn of_images(
        log: &'a dyn Bytes,
        page_size: usize,
        txns: &[Vec<(u32, u64)>],
        stop: &'a dyn Fn() -> bool,
    ) -> Db<'a> {
        let mut frames = Vec::new();
        let mut txn_end = Vec::new();
        let mut history: HashMap<u32, Vec<usize>> = HashMap::new();
        let mut newest = HashMap::new();
        for txn in txns {
            let end = frames.len() + txn.len();
            for &(page, at) in txn {
                history.entry(page).or_default().push(frames.len());
                newest.insert(page, frames.len());
                frames.push(Frame { page, at, state: FrameState::Committed });
                txn_end.push(end.saturating_sub(1));
            }
        }
        let history = History { frames: history, txn_end, as_of: Cell::new(None), log_only: true };
        let pages = frames.iter().map(|f| f.page).max().unwrap_or(0);
        let images = frames.len() as u64;
        Db {
            main: &NO_FILE,
            wal: Some(log),
            page_size,
            usable: page_size,
            pages,
            frames,
            newest,
            budget: Cell::new(REREADS.saturating_mul(images).saturating_add(64)),
            errors: RefCell::new(Vec::new()),
            stop,
            whole: Cell::new(true),
            used: RefCell::new(HashSet::new()),
            history,
        }
    }

    /// Whether it is a database of page images only ([`Db::of_images`]).
    pub fn is_images(&self) -> bool {
        self.history.log_only
    }

    /// Calls `visit` with every record of every table leaf image of a database of page
    /// images only ([`Db::of_images`]), as of its transaction.
    pub fn image_records(&self, mut visit: impl FnMut(&Record) -> Flow) {
        if !self.history.log_only {
            return;
        }
        let mut buf = Vec::new();
        for (i, f) in self.frames.iter().enumerate() {
            let loc = Loc { which: Which::Wal, at: f.at };
            if let Err(e) = self.image(loc, &mut buf) {
                self.whole.set(false);
                self.keep(e);
                return;
            }
            let head = if f.page == 1 { 100 } else { 0 };
            if buf.get(head) != Some(&TABLE_LEAF) {
                continue;
            }
            let flow = self.leaf_as_of(i, &buf, loc, head, Version::Older, &mut visit);
            match flow {
                Ok(Flow::Break(())) => return,
                Ok(Flow::Continue(())) => {}
                Err(e) => self.keep(e),
            }
        }
    }

    /// The index of the frame whose page image holds the log's byte `at`.
    fn frame_index(&self, at: u64) -> Option<usize> {
        let i = self.frames.partition_point(|f| f.at <= at).checked_sub(1)?;
        (at < self.frames[i].at + self.page_size as u64).then_some(i)
    }

    /// Reads the log's header and frames: which are valid, which committed, and the
    /// newest committed image of each page (and the database's size after the last
    /// commit).
    fn read_wal(&mut self, wal: &dyn Bytes) {
        let mut head = [0u8; WAL_HEADER as usize];
        if wal.size() < WAL_HEADER || wal.read_at(0, &mut head).is_err() {
            return;
        }
        let magic = be32(&head, 0).unwrap_or(0);
        let ps = be32(&head, 8).unwrap_or(0) as usize;
        let frame_size = FRAME_HEADER + self.page_size as u64;
        let count = wal.size().saturating_sub(WAL_HEADER) / frame_size;
        let header_ok = WAL_MAGIC.contains(&magic)
            && ps == self.page_size
            && wal_checksum(magic & 1 == 1, &head[..24], (0, 0))
                == (be32(&head, 24).unwrap_or(0), be32(&head, 28).unwrap_or(0));
        if !header_ok {
            self.note(format!(
                "the log's header is not valid (magic {magic:#x}, page size {ps}); its {count} \
                 frames are read as left over"
            ));
        }
        let salts = (be32(&head, 16), be32(&head, 20));
        let mut sum = wal_checksum(magic & 1 == 1, &head[..24], (0, 0));
        let (mut valid, mut committed, mut db_pages) = (header_ok, 0usize, None);
        let mut commits = HashSet::new();
        let mut page = vec![0u8; self.page_size];
        let mut fh = [0u8; FRAME_HEADER as usize];
        for i in 0..count {
            let at = WAL_HEADER + i * frame_size;
            if (self.stop)() {
                self.whole.set(false);
                self.note(format!("stopped reading the log at frame {i} of {count}"));
                break;
            }
            if wal.read_at(at, &mut fh).is_err()
                || wal.read_at(at + FRAME_HEADER, &mut page).is_err()
            {
                break;
            }
            let number = be32(&fh, 0).unwrap_or(0);
            if valid {
                let s = wal_checksum(magic & 1 == 1, &fh[..8], sum);
                let s = wal_checksum(magic & 1 == 1, &page, s);
                let stored = (be32(&fh, 16).unwrap_or(0), be32(&fh, 20).unwrap_or(0));
                valid = (be32(&fh, 8), be32(&fh, 12)) == salts && s == stored && number > 0;
                sum = s;
            }
            let state = if valid { FrameState::Uncommitted } else { FrameState::Unused };
            self.frames.push(Frame { page: number, at: at + FRAME_HEADER, state });
            let size = be32(&fh, 4).unwrap_or(0);
            if size > 0 {
                commits.insert(self.frames.len() - 1);
            }
            if valid && size > 0 {
                committed = self.frames.len();
                db_pages = Some(size);
            }
        }
        for (i, f) in self.frames[..committed].iter_mut().enumerate() {
            f.state = FrameState::Committed;
            self.newest.insert(f.page, i);
        }
        // Each frame's transaction ends at the next commit frame (or the log's end).
        let mut end = self.frames.len().saturating_sub(1);
        self.history.txn_end = vec![0; self.frames.len()];
        for i in (0..self.frames.len()).rev() {
            if commits.contains(&i) {
                end = i;
            }
            self.history.txn_end[i] = end;
        }
        for (i, f) in self.frames.iter().enumerate() {
            self.history.frames.entry(f.page).or_default().push(i);
        }
        if let Some(n) = db_pages {
            self.pages = n;
        }
        // A committed frame of a page past the database's last size is no page of it.
        let pages = self.pages;
        self.newest.retain(|&n, _| n <= pages);
    }

    fn note(&self, msg: String) {
        self.keep(err(msg));
    }

    /// Keeps `e` among the errors (the first 64).
    fn keep(&self, e: Error) {
        let mut errors = self.errors.borrow_mut();
        if errors.len() < 64 {
            errors.push(e);
        }
    }

    /// What went wrong reading parts of the files (the rest was read).
    pub fn errors(&self) -> Vec<Error> {
        self.errors.borrow().clone()
    }

    /// Whether every page of the tables walked (by [`Db::records`]) was read: no page of
    /// them was cut short, corrupt, past the budget, or left when told to stop.
    pub fn read_whole(&self) -> bool {
        self.whole.get()
    }

    /// Whether reading must stop (the budget spent, or `stop` says so).
    fn spent(&self) -> bool {
        self.budget.get() == 0 || (self.stop)()
    }

    /// The page size.
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// The state of the log frame whose image holds the log's byte `at`; `None` in the
    /// log's header or past its frames.
    pub fn frame_at(&self, at: u64) -> Option<FrameState> {
        self.frame_index(at).map(|i| self.frames[i].state)
    }

    /// What the database makes of the page image holding byte `at` of `which`, `freed`
    /// being its [`Db::freelist`]: a page of the current database (its unused space, when
    /// no record holds the byte), an older image (superseded by the log, past the
    /// database's end, a log frame not the newest of its page or not committed, the log's
    /// header) or a freed page.
    pub fn version_at(&self, which: Which, at: u64, freed: &HashSet<u32>) -> Version {
        let page_size = self.page_size as u64;
        let (page, current) = match which {
            Which::Main => {
                let n = u32::try_from(at / page_size + 1).unwrap_or(u32::MAX);
                (n, n <= self.pages && !self.newest.contains_key(&n))
            }
            Which::Wal => {
                let Some(i) = self.frame_index(at) else { return Version::Older };
                let f = self.frames[i];
                (f.page, self.newest.get(&f.page) == Some(&i))
            }
        };
        match (current, freed.contains(&page)) {
            (false, _) => Version::Older,
            (true, true) => Version::Freed,
            (true, false) => Version::Current,
        }
    }

    /// The records of the leaf image of frame `i` (in `buf`), read as of its transaction.
    fn leaf_as_of(
        &self,
        i: usize,
        buf: &[u8],
        loc: Loc,
        head: usize,
        version: Version,
        visit: &mut dyn FnMut(&Record) -> Flow,
    ) -> Result<Flow, Error> {
        let end = self.history.txn_end.get(i).copied().unwrap_or(i);
        self.history.as_of.set(Some(end));
        let flow = self.leaf(buf, loc, head, None, version, visit);
        self.history.as_of.set(None);
        flow
    }

    /// Whether `loc` is the image of page `n` in the current database.
    fn is_current_image(&self, n: u32, loc: Loc) -> bool {
        self.current_image(n).is_ok_and(|c| c == loc)
    }

    /// The image of page `n` in the current database; for a record read as of a frame of
    /// the log, its image then (the newest frame of it in that transaction or before, else
    /// the main file's).
    fn current(&self, n: u32) -> Result<Loc, Error> {
        if let Some(limit) = self.history.as_of.get() {
            let list = self.history.frames.get(&n);
            if let Some(&i) = list.and_then(|l| l[..l.partition_point(|&i| i <= limit)].last()) {
                return Ok(Loc { which: Which::Wal, at: self.frames[i].at });
            }
            let at = u64::from(n.saturating_sub(1)) * self.page_size as u64;
            if self.history.log_only || n == 0 || at + self.page_size as u64 > self.main.size() {
                return Err(err(format!("page {n} is in no transaction of the log")));
            }
            return Ok(Loc { which: Which::Main, at });
        }
        self.current_image(n)
    }

    /// The image of page `n` in the current database.
    fn current_image(&self, n: u32) -> Result<Loc, Error> {
        if n == 0 || n > self.pages {
            return Err(err(format!("page {n} is past the database's {} pages", self.pages)));
        }
        Ok(match self.newest.get(&n) {
            Some(&i) => Loc { which: Which::Wal, at: self.frames[i].at },
            None => Loc { which: Which::Main, at: u64::from(n - 1) * self.page_size as u64 },
        })
    }

    /// Reads the image at `loc`, from the budget.
    fn image(&self, loc: Loc, buf: &mut Vec<u8>) -> Result<(), Error> {
        let left = self.budget.get();
        if left == 0 {
            return Err(err(
                "read budget spent (pages reached over and over); the rest is not read",
            ));
        }
        if (self.stop)() {
            return Err(err("stopped (a deadline or a signal); the rest is not read"));
        }
        self.budget.set(left - 1);
        buf.resize(self.page_size, 0);
        let file = match loc.which {
            Which::Main => self.main,
            Which::Wal => self.wal.ok_or_else(|| err("no log"))?,
        };
        file.read_at(loc.at, buf).map_err(|_| err(format!("page image at {} cut short", loc.at)))
    }

    /// The tables of the current database's schema (the b-tree rooted at page 1).
    pub fn tables(&self) -> Result<Vec<Table>, Error> {
        let mut out = Vec::new();
        let _whole: Flow = self.walk_tree(1, None, &mut HashSet::new(), &mut |r| {
            if let Ok(cols) = columns(&r.payload) {
                if let [(Value::Text(b"table"), _), (Value::Text(name), _), _, (Value::Int(root), _), rest @ ..] =
                    cols.as_slice()
                {
                    let sql = match rest.first() {
                        Some((Value::Text(s), _)) => String::from_utf8_lossy(s).into_owned(),
                        _ => String::new(),
                    };
                    if let Ok(root) = u32::try_from(*root) {
                        let name = String::from_utf8_lossy(name).into_owned();
                        out.push(Table { name, root, sql });
                    }
                }
            }
            Flow::Continue(())
        })?;
        Ok(out)
    }

    /// Calls `visit` with every record of the tables `tables` (of the current database)
    /// and then with every record of the images it does not use (older images of its
    /// pages, the log's other frames, its freelist's pages), each of those at most once
    /// and not when the same row is already current. Errors in parts of the files are
    /// [`Db::errors`]; the walk goes on past them.
    pub fn records(&self, tables: &[u32], mut visit: impl FnMut(&Record) -> Flow) {
        let mut reached = HashSet::new();
        let mut seen: HashSet<(i64, u64)> = HashSet::new();
        for &root in tables {
            let walked = self.walk_tree(root, Some(root), &mut reached, &mut |r| {
                seen.insert((r.rowid, fnv(&r.payload)));
                visit(r)
            });
            match walked {
                Ok(Flow::Break(())) => {
                    self.whole.set(false);
                    return;
                }
                Ok(Flow::Continue(())) => {}
                Err(e) => {
                    self.whole.set(false);
                    self.keep(e);
                }
            }
        }
        let freed = self.freelist();
        let mut others: Vec<(Loc, Version)> = Vec::new();
        for (i, f) in self.frames.iter().enumerate() {
            let newest = self.newest.get(&f.page) == Some(&i);
            if !newest || f.state != FrameState::Committed {
                others.push((Loc { which: Which::Wal, at: f.at }, Version::Older));
            }
        }
        let in_file = self.main.size() / self.page_size as u64;
        for n in 1..=u32::try_from(in_file).unwrap_or(u32::MAX) {
            let at = u64::from(n - 1) * self.page_size as u64;
            let loc = Loc { which: Which::Main, at };
            if freed.contains(&n) && !self.newest.contains_key(&n) {
                others.push((loc, Version::Freed));
            } else if self.newest.contains_key(&n) || n > self.pages {
                others.push((loc, Version::Older));
            }
        }
        for (i, f) in self.frames.iter().enumerate() {
            if self.newest.get(&f.page) == Some(&i) && freed.contains(&f.page) {
                others.push((Loc { which: Which::Wal, at: f.at }, Version::Freed));
            }
        }
        let mut buf = Vec::new();
        for (loc, version) in others {
            if reached.contains(&loc) {
                continue;
            }
            if let Err(e) = self.image(loc, &mut buf) {
                self.keep(e);
                return;
            }
            if buf[0] != TABLE_LEAF {
                continue;
            }
            let mut unseen = |r: &Record| {
                if seen.contains(&(r.rowid, fnv(&r.payload))) {
                    return Flow::Continue(());
                }
                visit(r)
            };
            let flow = match (loc.which, self.frame_index(loc.at)) {
                (Which::Wal, Some(i)) => self.leaf_as_of(i, &buf, loc, 0, version, &mut unseen),
                _ => self.leaf(&buf, loc, 0, None, version, &mut unseen),
            };
            match flow {
                Ok(Flow::Break(())) => return,
                Ok(Flow::Continue(())) => {}
                Err(e) => self.keep(e),
            }
        }
    }

    /// The pages on the current database's freelist (trunks and leaves), as far as its
    /// trunk chain reads.
    pub fn freelist(&self) -> HashSet<u32> {
        let mut out = HashSet::new();
        let mut head = vec![0u8; 100];
        let Ok(first) = self.current(1) else { return out };
        if self.image(first, &mut head).is_err() {
            return out;
        }
        let mut trunk = be32(&head, 32).unwrap_or(0);
        let mut buf = Vec::new();
        while trunk != 0 && out.insert(trunk) {
            let Ok(loc) = self.current(trunk) else { break };
            if let Err(e) = self.image(loc, &mut buf) {
                self.keep(e);
                break;
            }
            let count = be32(&buf, 4).unwrap_or(0) as usize;
            for i in 0..count.min(self.usable / 4 - 2) {
                if let Some(leaf) = be32(&buf, 8 + 4 * i).filter(|&p| p > 0 && p <= self.pages) {
                    out.insert(leaf);
                }
            }
            trunk = be32(&buf, 0).unwrap_or(0);
        }
        out
    }

    /// Walks the table b-tree rooted at `root` in the current database; `reached` collects
    /// the images it read (and stops a tree that loops).
    fn walk_tree(
        &self,
        root: u32,
        table: Option<u32>,
        reached: &mut HashSet<Loc>,
        visit: &mut dyn FnMut(&Record) -> Flow,
    ) -> Result<Flow, Error> {
        let mut stack = vec![(root, 0usize)];
        let mut buf = Vec::new();
        // A page that cannot be read loses its subtree, not the rest of the tree.
        let lost = |e: Error| {
            self.whole.set(false);
            self.keep(e);
        };
        while let Some((n, depth)) = stack.pop() {
            let loc = match self.current(n) {
                Ok(loc) => loc,
                Err(e) => {
                    lost(e);
                    continue;
                }
            };
            if depth > MAX_DEPTH || !reached.insert(loc) {
                self.note(format!(
                    "page {n} is reached twice in the tree of page {root}; read once"
                ));
                continue;
            }
            if let Err(e) = self.image(loc, &mut buf) {
                if self.spent() {
                    return Err(e);
                }
                lost(e);
                continue;
            }
            self.used.borrow_mut().insert(n);
            let head = if n == 1 { 100 } else { 0 };
            match buf.get(head) {
                Some(&TABLE_LEAF) => {
                    match self.leaf(&buf, loc, head, table, Version::Current, visit) {
                        Ok(Flow::Break(())) => return Ok(Flow::Break(())),
                        Ok(Flow::Continue(())) => {}
                        Err(e) => lost(e),
                    }
                }
                Some(&TABLE_INTERIOR) => {
                    let cells = match self.cell_pointers(&buf, head, 12) {
                        Ok(cells) => cells,
                        Err(e) => {
                            lost(e);
                            continue;
                        }
                    };
                    let right = be32(&buf, head + 8).unwrap_or(0);
                    // Right-most last pushed is read first; the order of rows does not matter.
                    stack.push((right, depth + 1));
                    for at in cells {
                        stack.extend(be32(&buf, at).map(|child| (child, depth + 1)));
                    }
                }
                Some(t) => {
                    lost(err(format!("page {n} of the tree of page {root} has type {t:#x}")));
                }
                None => {}
            }
        }
        Ok(Flow::Continue(()))
    }

    /// The cell offsets of the b-tree page in `buf` whose header is at `head` and
    /// `header_len` bytes long.
    fn cell_pointers(
        &self,
        buf: &[u8],
        head: usize,
        header_len: usize,
    ) -> Result<Vec<usize>, Error> {
        let count = usize::from(be16(buf, head + 3).unwrap_or(0));
        let from = head + header_len;
        if from + 2 * count > self.usable {
            return Err(err(format!("{count} cells do not fit a page")));
        }
        let mut cells: Vec<usize> = (0..count)
            .filter_map(|i| be16(buf, from + 2 * i).map(usize::from))
            .filter(|&at| at >= from + 2 * count && at < self.usable)
            .collect();
        // In content order, each once (the order of rows does not matter).
        cells.sort_unstable();
        cells.dedup();
        Ok(cells)
    }

    /// Reads the cells of the table leaf image in `buf` (at `loc`, header at `head`).
    fn leaf(
        &self,
        buf: &[u8],
        loc: Loc,
        head: usize,
        table: Option<u32>,
        version: Version,
        visit: &mut dyn FnMut(&Record) -> Flow,
    ) -> Result<Flow, Error> {
        let u = self.usable;
        let (x, m) = (u - 35, (u - 12) * 32 / 255 - 23);
        // Cells do not overlap: each byte of the page is read as part of one cell at most,
        // so a page's records hold at most a page of it.
        let mut free_from = 0;
        let mut overlapping = 0;
        for at in self.cell_pointers(buf, head, 8)? {
            if at < free_from {
                overlapping += 1;
                continue;
            }
            let Some((size, n1)) = varint(buf, at) else { continue };
            let Some((rowid, n2)) = varint(buf, at + n1) else { continue };
            let size = usize::try_from(size).unwrap_or(usize::MAX);
            let start = at + n1 + n2;
            let local = if size <= x {
                size
            } else {
                let k = m + (size - m) % (u - 4);
                if k <= x {
                    k
                } else {
                    m
                }
            };
            let Some(bytes) = buf.get(start..start + local).filter(|_| start + local <= u) else {
                self.note(format!("a cell at {at} of the page image at {} runs past it", loc.at));
                continue;
            };
            free_from = start + local + if size > local { 4 } else { 0 };
            let want = size.min(MAX_RECORD);
            let mut record = Record {
                table,
                rowid: rowid as i64,
                version,
                page: loc,
                payload: bytes[..local.min(want)].to_vec(),
                pieces: vec![Piece {
                    start: 0,
                    len: local.min(want),
                    which: loc.which,
                    at: loc.at + start as u64,
                }],
                complete: size <= MAX_RECORD,
            };
            if size > local {
                let first = be32(buf, start + local).unwrap_or(0);
                if !self.overflow(first, want, &mut record) {
                    record.complete = false;
                }
            }
            if let Flow::Break(()) = visit(&record) {
                return Ok(Flow::Break(()));
            }
        }
        if overlapping > 0 {
            self.note(format!(
                "{overlapping} cells of the page image at {} overlap others; not read",
                loc.at
            ));
        }
        Ok(Flow::Continue(()))
    }

    /// Appends the overflow chain from page `next` to `record`, up to `want` payload
    /// bytes; false when the chain ends early or loops, or (for a record the current
    /// database no longer holds) runs into a page the current database uses: that page's
    /// bytes are another record's now.
    fn overflow(&self, mut next: u32, want: usize, record: &mut Record) -> bool {
        let mut buf = Vec::new();
        let mut seen = HashSet::new();
        let current = record.version == Version::Current;
        while record.payload.len() < want {
            if next == 0 || !seen.insert(next) {
                return false;
            }
            let loc = match self.current(next) {
                Ok(loc) => loc,
                Err(_) => return false,
            };
            if !current && self.is_current_image(next, loc) && self.used.borrow().contains(&next) {
                return false;
            }
            if let Err(e) = self.image(loc, &mut buf) {
                self.keep(e);
                return false;
            }
            let take = (self.usable - 4).min(want - record.payload.len());
            record.pieces.push(Piece {
                start: record.payload.len(),
                len: take,
                which: loc.which,
                at: loc.at + 4,
            });
            record.payload.extend_from_slice(&buf[4..4 + take]);
            if current {
                self.used.borrow_mut().insert(next);
            }
            next = be32(&buf, 0).unwrap_or(0);
        }
        true
    }
}

/// FNV-1a of `b` (what tells two copies of a row apart).
fn fnv(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325, |h, &c| (h ^ u64::from(c)).wrapping_mul(0x100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prng::Prng;
    use std::fmt::Write as _;
    use std::path::Path;

    /// Runs `sql` through SQLite's own shell in `dir` (on database `state.db`).
    fn sqlite3(dir: &Path, sql: &str) {
        use std::io::Write as _;
        let mut child = std::process::Command::new("sqlite3")
            .arg("state.db")
            .current_dir(dir)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("SQLite's shell `sqlite3` (Debian's sqlite3) runs");
        child.stdin.take().unwrap().write_all(sql.as_bytes()).unwrap();
        assert!(child.wait().unwrap().success(), "sqlite3 failed on {sql:.200}");
    }

    fn hex(b: &[u8]) -> String {
        b.iter().fold(String::new(), |mut s, c| {
            let _ = write!(s, "{c:02x}");
            s
        })
    }

    const KINE: &str = "CREATE TABLE kine (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT, \
        created INTEGER, deleted INTEGER, create_revision INTEGER, prev_revision INTEGER, \
        lease INTEGER, value BLOB, old_value BLOB);\n";

    fn insert(name: &str, value: &[u8], old: &[u8]) -> String {
        format!(
            "INSERT INTO kine(name, created, deleted, create_revision, prev_revision, lease, \
             value, old_value) VALUES ('{name}', 1, 0, 0, 0, 0, X'{}', X'{}');\n",
            hex(value),
            hex(old)
        )
    }

    /// A record as the tests see it: rowid, version, payload, read whole.
    type Row = (i64, Version, Vec<u8>, bool);

    /// Every record the reader yields of kine's table in `dir`, and the reader's errors.
    fn read(dir: &Path) -> (Vec<Row>, Vec<Error>) {
        let main = std::fs::File::open(dir.join("state.db")).unwrap();
        let wal = std::fs::File::open(dir.join("state.db-wal")).ok();
        let db = Db::open(&main, wal.as_ref().map(|w| w as &dyn Bytes)).unwrap();
        let tables = db.tables().unwrap();
        let tables: Vec<u32> = tables.iter().filter(|t| t.name == "kine").map(|t| t.root).collect();
        let mut out = Vec::new();
        db.records(&tables, |r| {
            // Every piece is where the record says.
            for p in &r.pieces {
                let file = if p.which == Which::Main { &main } else { wal.as_ref().unwrap() };
                let mut b = vec![0; p.len];
                file.read_at(p.at, &mut b).unwrap();
                assert_eq!(b, r.payload[p.start..p.start + p.len]);
            }
            out.push((r.rowid, r.version, r.payload.clone(), r.complete));
            Flow::Continue(())
        });
        (out, db.errors())
    }

    fn holds(payload: &[u8], value: &[u8]) -> bool {
        payload.windows(value.len()).any(|w| w == value)
    }

    #[test]
    fn every_value_whole_split_by_overflow_pages_or_not() {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = Prng::new(49);
        let mut sql = String::from(KINE);
        let mut values = Vec::new();
        for n in [10, 500, 3000, 4100, 5000, 9000, 70_000] {
            let v = rng.bytes(n);
            sql += &insert(&format!("/registry/secrets/default/s{n}"), &v, b"");
            values.push(v);
        }
        sqlite3(dir.path(), &sql);
        let (records, errors) = read(dir.path());
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(records.len(), values.len());
        for v in &values {
            let r = records.iter().find(|r| holds(&r.2, v)).expect("value found whole");
            assert_eq!(r.1, Version::Current);
            assert!(r.3);
            let cols = columns(&r.2).unwrap();
            assert_eq!(cols.len(), 9);
            assert_eq!(cols[7].0, Value::Blob(v));
        }
        // And at least one was split in the file: not found as one run of bytes there.
        let file = std::fs::read(dir.path().join("state.db")).unwrap();
        assert!(values.iter().any(|v| !holds(&file, v)));
    }

    #[test]
    fn rows_only_in_the_log_old_images_and_freed_pages() {
        let dir = tempfile::tempdir().unwrap();
        let copy = tempfile::tempdir().unwrap();
        let mut rng = Prng::new(7);
        let (a, b, c, d) = (rng.bytes(6000), rng.bytes(200), rng.bytes(5000), rng.bytes(300));
        // kine's SQLite (mattn/go-sqlite3's own copy) does not zero what it frees; Debian's
        // shell is built to, unless told otherwise.
        let mut sql = String::from(
            "PRAGMA secure_delete=0;\nPRAGMA journal_mode=WAL;\nPRAGMA wal_autocheckpoint=0;\n",
        );
        sql += KINE;
        // Freed: rows written, checkpointed, then deleted and checkpointed again.
        for i in 0..20 {
            sql += &insert(&format!("/registry/secrets/ns/gone{i}"), &a, b"");
        }
        sql += "PRAGMA wal_checkpoint(TRUNCATE);\nDELETE FROM kine;\nPRAGMA wal_checkpoint(TRUNCATE);\n";
        // Current in the main file, then updated in the log (old image keeps `b`).
        sql += &insert("/registry/secrets/ns/kept", &b, b"");
        sql += "PRAGMA wal_checkpoint(TRUNCATE);\n";
        sql += &format!(
            "UPDATE kine SET value = X'{}' WHERE name = '/registry/secrets/ns/kept';\n",
            hex(&d)
        );
        // Only in the log.
        sql += &insert("/registry/secrets/ns/new", &c, &b);
        sql += &format!(".shell cp state.db state.db-wal {}\n", copy.path().display());
        sqlite3(dir.path(), &sql);
        assert!(copy.path().join("state.db-wal").exists());
        let (records, errors) = read(copy.path());
        assert!(errors.is_empty(), "{errors:?}");
        let find = |v: &[u8], version| records.iter().any(|r| r.1 == version && holds(&r.2, v));
        assert!(find(&c, Version::Current), "a row only in the log is current");
        assert!(find(&d, Version::Current));
        assert!(find(&b, Version::Older), "the image the log rewrote keeps the old value");
        let versions: Vec<_> =
            records.iter().map(|r| (r.0, r.1, r.2.len(), holds(&r.2, &a[..100]))).collect();
        assert!(find(&a, Version::Freed), "a deleted row on a freed page {versions:?}");
        // Without the log, the new row is not there and the old value is current.
        let main = std::fs::File::open(copy.path().join("state.db")).unwrap();
        let db = Db::open(&main, None).unwrap();
        let tables: Vec<u32> = db.tables().unwrap().iter().map(|t| t.root).collect();
        let mut current = Vec::new();
        db.records(&tables, |r| {
            if r.version == Version::Current {
                current.push(r.payload.clone());
            }
            Flow::Continue(())
        });
        assert!(current.iter().any(|p| holds(p, &b)) && !current.iter().any(|p| holds(p, &c)));
    }

    #[test]
    fn hostile_files_are_bounded() {
        // A tree whose interior page points at itself, an overflow chain that loops, a
        // header claiming 2^32-1 pages: each read once, with an error, no panic.
        let dir = tempfile::tempdir().unwrap();
        let mut rng = Prng::new(3);
        let mut sql = String::from(KINE);
        for i in 0..40 {
            sql += &insert(&format!("/registry/secrets/ns/s{i}"), &rng.bytes(3000), b"");
        }
        sqlite3(dir.path(), &sql);
        let good = std::fs::read(dir.path().join("state.db")).unwrap();
        let ps = usize::from(be16(&good, 16).unwrap());
        let mut rng = Prng::new(11);
        for _ in 0..300 {
            let mut bad = good.clone();
            for _ in 0..rng.range(1, 8) {
                let at = rng.below(bad.len());
                bad[at] = rng.next_u64() as u8;
            }
            if rng.chance(30) {
                // Every page pointer of some interior page aimed at that page.
                let page = rng.range(1, bad.len() / ps);
                let self_ptr = (page as u32 + 1).to_be_bytes();
                bad[page * ps + 8..page * ps + 12].copy_from_slice(&self_ptr);
            }
            if rng.chance(20) {
                bad[28..32].copy_from_slice(&u32::MAX.to_be_bytes());
            }
            let bad = bad.as_slice();
            let Ok(db) = Db::open(&bad, None) else { continue };
            let tables: Vec<u32> =
                db.tables().map(|t| t.iter().map(|t| t.root).collect()).unwrap_or_default();
            let mut n = 0usize;
            db.records(&tables, |r| {
                n += 1;
                assert!(r.payload.len() <= MAX_RECORD);
                Flow::Continue(())
            });
            assert!(n <= 2 * good.len() / 8, "records bounded by the file's size");
        }
    }

    #[test]
    fn columns_of_cut_records_do_not_panic() {
        let payload = [4u8, 1, 0x13, 0x0c, 0x7f, b'a', b'b'];
        let cols = columns(&payload).unwrap();
        assert_eq!(cols[0].0, Value::Int(0x7f));
        assert_eq!(cols[1].0, Value::Text(b"ab"));
        assert!(columns(&[0x80]).is_err());
    }
}
