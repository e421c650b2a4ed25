//! A read-only reader of bbolt database files (containerd's `meta.db` and the snapshotters'
//! `metadata.db`; etcd's `member/snap/db` has the same format but is streamed as raw bytes),
//! over bytes already read into memory.
//!
//! It never touches the file itself: the scanner reads a copy without taking bbolt's
//! `flock`, so a live containerd is not disturbed, and hands the bytes here. Everything is
//! bounds-checked: a truncated, corrupt or hostile file gives an [`Error`] (which names
//! pages and offsets, never keys or values), never a panic.
//!
//! The format, as written by bbolt (`internal/common/page.go`, `meta.go`, `bucket.go`),
//! all integers little-endian:
//! * pages of `page_size` bytes; a page starts with a 16-byte header `id u64, flags u16,
//!   count u16, overflow u32` and spans `overflow + 1` pages;
//! * pages 0 and 1 are meta pages: after the header `magic u32 (0xED0CDAED), version u32
//!   (2), page_size u32, flags u32, root u64, sequence u64, freelist u64, pgid u64, txid
//!   u64, checksum u64`, the checksum being FNV-1a 64 of the 56 bytes before it. The valid
//!   meta with the higher txid is current;
//! * branch pages hold `count` 16-byte elements `pos u32, ksize u32, pgid u64`, leaf pages
//!   `flags u32, pos u32, ksize u32, vsize u32`; `pos` is relative to the element itself;
//! * a leaf element with flag 1 is a bucket: its value starts with `root u64, sequence
//!   u64`; root 0 means the rest of the value is the bucket's single leaf page, inline.
//!
//! Pages that no live structure reaches (freed by a later transaction and not yet reused,
//! or past the high-water mark) keep whatever was last written there: bbolt never zeroes
//! them. [`Db::dead_ranges`] lists them, so that the scanner can search them for values of
//! removed containers.

use std::cell::Cell;
use std::collections::HashSet;
use std::ops::Range;
use std::rc::Rc;

use crate::sys::{le16 as u16_at, le32 as u32_at, le64 as u64_at, Bytes};

/// The magic number of a meta page.
pub const MAGIC: u32 = 0xED0C_DAED;
/// The file format version bbolt writes.
pub const VERSION: u32 = 2;

const HEADER: usize = 16;
const ELEMENT: usize = 16;
const BRANCH: u16 = 0x01;
const LEAF: u16 = 0x02;
const FREELIST: u16 = 0x10;
const BUCKET_FLAG: u32 = 0x01;
/// `meta.freelist` when the freelist is not persisted (etcd's `NoFreelistSync`).
const NO_FREELIST: u64 = u64::MAX;
/// Nested pages (branches within a bucket) and nested buckets are each followed at most
/// this deep; bbolt trees are a few levels deep.
const MAX_DEPTH: usize = 64;
/// How many times over the reader may read the elements a file can hold (each takes 16
/// bytes of it, so a file of `n` bytes holds at most `n / 16`): a lookup by key reads its
/// bucket's entries, and callers look up a few keys of a bucket, walk the tree once to
/// find freed pages and once more for what they read. A crafted file whose buckets share
/// pages (a tree of pages that is really a graph) would have every path through it read:
/// exponential work in the nesting depth. Past this budget every read fails instead, so
/// the work on any file is linear in its size.
const REREADS: u64 = 16;
/// Byte offset of the checksum in a meta page, and of the meta fields.
const META_AT: usize = HEADER;
const CHECKSUM_AT: usize = HEADER + 56;

/// Why a file, or part of it, could not be read. The message names pages and offsets only.
pub use crate::sys::ReadError as Error;

/// More records (of `what`) or values than a reader keeps (`values` 0: no count of values
/// is kept).
pub fn many(what: &str, records: usize, values: usize) -> Error {
    let values = match values {
        0 => String::new(),
        n => format!(" or {n} values"),
    };
    err(format!(
        "more than {records} {what}{values}; the rest are not read (what they would name is \
         unknown)"
    ))
}

/// Page `page` is the root of a second bucket (or reached again on the way to one).
pub fn shared(page: u64) -> Error {
    err(format!("page {page} is reached twice (buckets share it); read once"))
}

fn err(msg: impl Into<String>) -> Error {
    Error::new("bbolt", msg.into())
}

/// FNV-1a, 64 bits (Go's `hash/fnv.New64a`), the meta page checksum.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

/// The fields of a valid meta page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    /// Page size of the file.
    pub page_size: u32,
    /// Page of the root bucket's root.
    pub root: u64,
    /// Page of the freelist, or `u64::MAX` when it is not persisted.
    pub freelist: u64,
    /// The high-water mark: the first page never allocated.
    pub pgid: u64,
    /// The transaction that wrote this meta.
    pub txid: u64,
}

/// Reads the meta page starting at `page[0]`; `None` unless its magic, version and
/// checksum are right.
fn read_meta(page: &[u8]) -> Option<Meta> {
    let fields = page.get(META_AT..CHECKSUM_AT)?;
    if u32_at(page, META_AT)? != MAGIC || u32_at(page, META_AT + 4)? != VERSION {
        return None;
    }
    if fnv1a64(fields) != u64_at(page, CHECKSUM_AT)? {
        return None;
    }
    Some(Meta {
        page_size: u32_at(page, META_AT + 8)?,
        root: u64_at(page, META_AT + 16)?,
        freelist: u64_at(page, META_AT + 32)?,
        pgid: u64_at(page, META_AT + 40)?,
        txid: u64_at(page, META_AT + 48)?,
    })
}

/// The current meta of a file of `page_size` pages from its two meta pages: the valid one
/// of the higher transaction.
fn current_meta(
    page_size: usize,
    first: Option<Meta>,
    second: Option<Meta>,
) -> Result<Meta, Error> {
    if !(512..=1 << 24).contains(&page_size) || !page_size.is_power_of_two() {
        return Err(err(format!("implausible page size {page_size}")));
    }
    let valid = |m: &Meta| m.page_size as usize == page_size && m.root >= 2 && m.root < m.pgid;
    match (first.filter(valid), second.filter(valid)) {
        (Some(a), Some(b)) => Ok(if b.txid > a.txid { b } else { a }),
        (Some(m), None) | (None, Some(m)) => Ok(m),
        (None, None) => Err(err("no valid meta page")),
    }
}

/// Takes `n` elements from `budget`, or says it is spent.
fn spend(budget: &Cell<u64>, n: usize) -> Result<(), Error> {
    match budget.get().checked_sub(n as u64) {
        Some(rest) => {
            budget.set(rest);
            Ok(())
        }
        None => {
            budget.set(0);
            Err(err(format!(
                "more elements read than {REREADS} times what the file can hold \
                 (buckets share pages: a crafted or damaged file); the rest is not read"
            )))
        }
    }
}

/// An opened bbolt file: its bytes, its current meta, and what is left of the budget of
/// elements to read (shared by every bucket of it, see `REREADS`).
#[derive(Clone, Debug)]
pub struct Db<'a> {
    data: &'a [u8],
    page_size: usize,
    meta: Meta,
    budget: Rc<Cell<u64>>,
}

/// A value in a bucket.
#[derive(Clone, Debug)]
pub enum Value<'a> {
    /// Plain bytes.
    Data(&'a [u8]),
    /// A nested bucket.
    Bucket(Bucket<'a>),
}

/// Where a bucket's entries are.
#[derive(Clone, Copy, Debug)]
enum Root<'a> {
    Page(u64),
    /// The page image of an inline bucket.
    Inline(&'a [u8]),
}

/// A bucket of a [`Db`].
#[derive(Clone, Debug)]
pub struct Bucket<'a> {
    db: Db<'a>,
    root: Root<'a>,
    depth: usize,
}

/// A leaf element: flags, key, value.
type Element<'a> = (u32, &'a [u8], &'a [u8]);

/// Whether a walk over elements goes on.
pub type Flow = std::ops::ControlFlow<()>;

/// What is called with each element a walk reaches.
type Visit<'f, 'a> = dyn FnMut(Element<'a>) -> Flow + 'f;

impl<'a> Db<'a> {
    /// Opens the bytes of a bbolt file: finds the page size, validates both meta pages and
    /// takes the current one.
    pub fn open(data: &'a [u8]) -> Result<Db<'a>, Error> {
        let first = read_meta(data);
        // The page size comes from meta 0; when that is damaged, meta 1 is looked for at
        // every power of two from 1 KiB to 16 MiB, as bbolt does.
        let page_size = match first {
            Some(m) => m.page_size as usize,
            None => (0..15)
                .map(|i| 1024usize << i)
                .find(|&at| {
                    data.get(at..).and_then(read_meta).is_some_and(|m| m.page_size as usize == at)
                })
                .ok_or_else(|| {
                    if data.len() < CHECKSUM_AT + 8 {
                        err(format!(
                            "not a bbolt file: {} bytes, too short for a meta page",
                            data.len()
                        ))
                    } else if u32_at(data, META_AT) != Some(MAGIC) {
                        err("not a bbolt file: no bbolt magic number in the first meta page")
                    } else {
                        err("both meta pages are invalid (bad checksum or version)")
                    }
                })?,
        };
        let second = data.get(page_size..).and_then(read_meta);
        let meta = current_meta(page_size, first, second)?;
        let budget = Rc::new(Cell::new(REREADS * (data.len() / ELEMENT) as u64 + 1024));
        Ok(Db { data, page_size, meta, budget })
    }

    /// Takes `n` elements from the budget of reads, or says it is spent.
    fn spend(&self, n: usize) -> Result<(), Error> {
        spend(&self.budget, n)
    }

    /// The current meta page.
    pub fn meta(&self) -> Meta {
        self.meta
    }

    /// The root bucket (its entries are the top-level buckets).
    pub fn root(&self) -> Bucket<'a> {
        Bucket { db: self.clone(), root: Root::Page(self.meta.root), depth: 0 }
    }

    /// The bytes of page `id` (with its overflow pages), checked to be a page of the tree.
    fn page(&self, id: u64) -> Result<&'a [u8], Error> {
        if id < 2 || id >= self.meta.pgid {
            return Err(err(format!("page {id} is outside the file's pages")));
        }
        let start = usize::try_from(id).ok().and_then(|i| i.checked_mul(self.page_size));
        let header = start.and_then(|s| self.data.get(s..s + HEADER));
        let Some((start, header)) = start.zip(header) else {
            return Err(err(format!("page {id} is past the end of the file (truncated?)")));
        };
        if u64_at(header, 0) != Some(id) {
            return Err(err(format!("page {id} has the id of another page")));
        }
        let overflow = u32_at(header, 12).unwrap_or(0) as usize;
        let len = (overflow + 1).checked_mul(self.page_size);
        match len.and_then(|l| self.data.get(start..start.checked_add(l)?)) {
            Some(page) => Ok(page),
            None => Err(err(format!("page {id} runs past the end of the file (truncated?)"))),
        }
    }

    /// Byte ranges of the file that no live structure uses: free pages, pages past the
    /// high-water mark, a trailing partial page. Old data may linger there. Pages are
    /// marked live by walking every bucket of the current tree and the freelist page; if
    /// that walk fails somewhere, the pages it could not reach are counted dead too (the
    /// error comes with them).
    pub fn dead_ranges(&self) -> (Vec<Range<u64>>, Vec<Error>) {
        let mut live: HashSet<u64> = HashSet::from([0, 1]);
        let mut errors = Vec::new();
        if self.meta.freelist != NO_FREELIST {
            match self.page(self.meta.freelist) {
                Ok(p) if u16_at(p, 8) == Some(FREELIST) => {
                    live.extend(
                        (0..(p.len() / self.page_size) as u64).map(|i| self.meta.freelist + i),
                    );
                }
                Ok(_) => errors
                    .push(err(format!("freelist page {} is not a freelist", self.meta.freelist))),
                Err(e) => errors.push(e),
            }
        }
        self.mark(&self.root(), &mut live, &mut errors);
        let ps = self.page_size as u64;
        let len = self.data.len() as u64;
        let mut out: Vec<Range<u64>> = Vec::new();
        for id in 2..len.div_ceil(ps) {
            if live.contains(&id) {
                continue;
            }
            let r = id * ps..((id + 1) * ps).min(len);
            match out.last_mut() {
                Some(last) if last.end == r.start => last.end = r.end,
                _ => out.push(r),
            }
        }
        (out, errors)
    }

    /// Marks the pages of `bucket` and of every bucket under it as live: its own pages
    /// first, then its entries one by one (none held).
    fn mark(&self, bucket: &Bucket<'a>, live: &mut HashSet<u64>, errors: &mut Vec<Error>) {
        match bucket.pages() {
            Ok(pages) => {
                for (id, n) in pages {
                    live.extend((0..n).map(|i| id + i));
                }
            }
            Err(e) => {
                errors.push(e);
                return;
            }
        }
        let walked = bucket.each(|_, value| {
            if let Value::Bucket(b) = value {
                if let Root::Page(id) = b.root {
                    if live.contains(&id) {
                        // A loop, or a page shared by two buckets: not bbolt's doing.
                        return Flow::Continue(());
                    }
                }
                if b.depth > MAX_DEPTH {
                    errors.push(err("buckets nested too deep"));
                    return Flow::Continue(());
                }
                self.mark(&b, live, errors);
            }
            Flow::Continue(())
        });
        if let Err(e) = walked {
            errors.push(e);
        }
    }
}

impl<'a> Bucket<'a> {
    /// The page of the bucket's root; `None` for an inline bucket (its page is in its
    /// parent's value).
    pub fn page(&self) -> Option<u64> {
        match self.root {
            Root::Page(id) => Some(id),
            Root::Inline(_) => None,
        }
    }

    /// Every entry, in key order. Held all at once: for a bucket of any size, [`Bucket::each`].
    pub fn entries(&self) -> Result<Vec<(&'a [u8], Value<'a>)>, Error> {
        let mut out = Vec::new();
        self.each(|k, v| {
            out.push((k, v));
            Flow::Continue(())
        })?;
        Ok(out)
    }

    /// Calls `f` with each entry, in key order, until it breaks; nothing is held between
    /// calls, so a bucket of millions of entries costs no more memory than one. An error
    /// (a damaged page, the file's read budget spent) ends the walk where it is.
    pub fn each(&self, mut f: impl FnMut(&'a [u8], Value<'a>) -> Flow) -> Result<(), Error> {
        let mut bad = None;
        let _ = self.visit(&mut Vec::new(), &mut |(flags, key, value)| match self
            .value(flags, value)
        {
            Ok(v) => f(key, v),
            Err(e) => {
                bad = Some(e);
                Flow::Break(())
            }
        })?;
        bad.map_or(Ok(()), Err)
    }

    /// The plain value under `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<&'a [u8]>, Error> {
        self.find(key, |v| match v {
            Value::Data(d) => Some(d),
            Value::Bucket(_) => None,
        })
    }

    /// The nested bucket under `key`.
    pub fn bucket(&self, key: &[u8]) -> Result<Option<Bucket<'a>>, Error> {
        self.find(key, |v| match v {
            Value::Bucket(b) => Some(b),
            Value::Data(_) => None,
        })
    }

    /// The first value under `key` that `pick` takes, walking no further than it.
    fn find<T>(
        &self,
        key: &[u8],
        pick: impl Fn(Value<'a>) -> Option<T>,
    ) -> Result<Option<T>, Error> {
        let mut found = None;
        self.each(|k, v| {
            found = if k == key { pick(v) } else { None };
            match found {
                Some(_) => Flow::Break(()),
                None => Flow::Continue(()),
            }
        })?;
        Ok(found)
    }

    /// The pages of the bucket (id, pages spanned), read without looking at its entries.
    fn pages(&self) -> Result<Vec<(u64, u64)>, Error> {
        let mut pages = Vec::new();
        let _ = self.visit(&mut pages, &mut |_| Flow::Continue(()))?;
        Ok(pages)
    }

    /// Walks the elements, noting each page read (id, pages spanned) in `pages`.
    fn visit(&self, pages: &mut Vec<(u64, u64)>, f: &mut Visit<'_, 'a>) -> Result<Flow, Error> {
        match self.root {
            Root::Inline(page) => {
                if u16_at(page, 8) != Some(LEAF) {
                    return Err(err("an inline bucket is not a leaf page"));
                }
                self.db.spend(usize::from(u16_at(page, 10).unwrap_or(0)))?;
                leaf(page, "an inline bucket", f)
            }
            Root::Page(id) => self.db.walk(id, 0, &mut HashSet::new(), pages, f),
        }
    }

    /// The value of a leaf element: plain bytes, or a nested bucket.
    fn value(&self, flags: u32, value: &'a [u8]) -> Result<Value<'a>, Error> {
        if flags & BUCKET_FLAG == 0 {
            return Ok(Value::Data(value));
        }
        let root = u64_at(value, 0).ok_or_else(|| err("a bucket value is too short"))?;
        let root = match root {
            0 => {
                Root::Inline(value.get(HEADER..).ok_or_else(|| err("a bucket value is too short"))?)
            }
            id => Root::Page(id),
        };
        Ok(Value::Bucket(Bucket { db: self.db.clone(), root, depth: self.depth + 1 }))
    }
}

impl<'a> Db<'a> {
    /// Calls `f` with the leaf elements under page `id` (a branch or leaf), in order, until
    /// it breaks.
    fn walk(
        &self,
        id: u64,
        depth: usize,
        seen: &mut HashSet<u64>,
        pages: &mut Vec<(u64, u64)>,
        f: &mut Visit<'_, 'a>,
    ) -> Result<Flow, Error> {
        if depth > MAX_DEPTH || !seen.insert(id) {
            return Err(err(format!("page {id} is reached twice (a loop)")));
        }
        let page = self.page(id)?;
        pages.push((id, (page.len() / self.page_size) as u64));
        self.spend(usize::from(u16_at(page, 10).unwrap_or(0)).max(1))?;
        let what = format!("page {id}");
        match u16_at(page, 8) {
            Some(LEAF) => leaf(page, &what, f),
            Some(BRANCH) => {
                let count = usize::from(u16_at(page, 10).unwrap_or(0));
                for i in 0..count {
                    let e = HEADER + i * ELEMENT;
                    let child = u64_at(page, e + 8)
                        .ok_or_else(|| err(format!("{what}: element {i} runs past the page")))?;
                    if self.walk(child, depth + 1, seen, pages, f)?.is_break() {
                        return Ok(Flow::Break(()));
                    }
                }
                Ok(Flow::Continue(()))
            }
            Some(flags) => Err(err(format!("{what} is not a branch or leaf (flags {flags:#x})"))),
            None => Err(err(format!("{what} is too short"))),
        }
    }
}

/// Calls `f` with each element of the leaf page `page`, in order, until it breaks. bbolt
/// writes a leaf's keys and values one after another behind its element headers
/// (`node.go`, `write`), and keys are never empty: an element whose bytes start before
/// the previous one's end is a crafted or damaged page (many elements naming one key would
/// have one record read as many), and is an error.
fn leaf<'a>(page: &'a [u8], what: &str, f: &mut Visit<'_, 'a>) -> Result<Flow, Error> {
    let count = usize::from(u16_at(page, 10).unwrap_or(0));
    let mut free = HEADER + count * ELEMENT;
    for i in 0..count {
        let e = HEADER + i * ELEMENT;
        let bad = || err(format!("{what}: element {i} runs past the page"));
        let (flags, pos, ksize, vsize) = (|| {
            Some((
                u32_at(page, e)?,
                u32_at(page, e + 4)?,
                u32_at(page, e + 8)?,
                u32_at(page, e + 12)?,
            ))
        })()
        .ok_or_else(bad)?;
        let k = e.checked_add(pos as usize).ok_or_else(bad)?;
        let v = k.checked_add(ksize as usize).ok_or_else(bad)?;
        let end = v.checked_add(vsize as usize).ok_or_else(bad)?;
        let (Some(key), Some(value)) = (page.get(k..v), page.get(v..end)) else {
            return Err(bad());
        };
        if k < free || key.is_empty() {
            return Err(err(format!(
                "{what}: element {i} shares bytes with another or has no key (a \
                 crafted or damaged page); the rest of its bucket is not read"
            )));
        }
        free = end;
        if f((flags, key, value)).is_break() {
            return Ok(Flow::Break(()));
        }
    }
    Ok(Flow::Continue(()))
}

/// What [`Paged::each_at`] calls with each plain entry: its key, its value and the
/// value's file offset (none in an inline bucket).
pub type Located<'f> = dyn FnMut(&[u8], &[u8], Option<u64>) -> Flow + 'f;

/// A bbolt file read page by page with `pread` (etcd's `member/snap/db` and its
/// snapshots, up to etcd's 8 GiB quota): a walk holds one page (with its overflow pages)
/// at a time, never the file. The same format, checks and read budget as [`Db`], which
/// reads bytes already in memory.
pub struct Paged<'a> {
    file: &'a dyn Bytes,
    page_size: usize,
    meta: Meta,
    budget: Cell<u64>,
    /// Asked before each page read: whether to stop (a deadline, a signal).
    stop: &'a dyn Fn() -> bool,
}

/// Never stops.
fn never() -> bool {
    false
}

/// Where a bucket's elements are, for [`Paged`]: a page, or an inline bucket's page image.
enum PagedRoot {
    Page(u64),
    Inline(Vec<u8>),
}

/// The largest page (with its overflow pages) [`Paged`] reads: a value larger than etcd's
/// request limit (1.5 MiB by default, `--max-request-bytes`) is no etcd value.
const MAX_PAGE_RUN: usize = 64 << 20;

/// The largest branch page (with its overflow pages) [`Paged`] reads: a branch of 65535
/// elements is 1 MiB.
const MAX_BRANCH_RUN: usize = 1 << 20;

impl<'a> Paged<'a> {
    /// Opens a bbolt file: its page size and current meta, as [`Db::open`] finds them.
    pub fn open(file: &'a dyn Bytes) -> Result<Paged<'a>, Error> {
        Paged::open_until(file, &never)
    }

    /// [`Paged::open`], asking `stop` before each page read whether to stop: past it every
    /// read fails.
    pub fn open_until(file: &'a dyn Bytes, stop: &'a dyn Fn() -> bool) -> Result<Paged<'a>, Error> {
        let meta_at = |at: u64| {
            let mut b = [0u8; CHECKSUM_AT + 8];
            file.read_at(at, &mut b).ok()?;
            read_meta(&b)
        };
        let first = meta_at(0);
        let page_size = match first {
            Some(m) => m.page_size as usize,
            None => (0..15)
                .map(|i| 1024usize << i)
                .find(|&at| meta_at(at as u64).is_some_and(|m| m.page_size as usize == at))
                .ok_or_else(|| err("not a bbolt file: no valid meta page"))?,
        };
        let meta = current_meta(page_size, first, meta_at(page_size as u64))?;
        // In pages: a walk reads each page once; the budget bounds the walks together.
        let pages = file.size() / page_size as u64;
        let budget = Cell::new(REREADS.saturating_mul(pages).saturating_add(64));
        Ok(Paged { file, page_size, meta, budget, stop })
    }

    /// Reads page `id` with its overflow pages, checked to be a page of the tree that
    /// shares no page with another read by this walk (`seen`), from the budget: a branch
    /// is at most [`MAX_BRANCH_RUN`] bytes, any page at most [`MAX_PAGE_RUN`].
    fn page(&self, id: u64, seen: &mut HashSet<u64>) -> Result<Vec<u8>, Error> {
        if (self.stop)() {
            return Err(err("stopped (a deadline or a signal)"));
        }
        if id < 2 || id >= self.meta.pgid {
            return Err(err(format!("page {id} is outside the file's pages")));
        }
        let start = id.saturating_mul(self.page_size as u64);
        let mut header = [0u8; HEADER];
        if self.file.read_at(start, &mut header).is_err() {
            return Err(err(format!("page {id} is past the end of the file (truncated?)")));
        }
        if u64_at(&header, 0) != Some(id) {
            return Err(err(format!("page {id} has the id of another page")));
        }
        let overflow = u32_at(&header, 12).unwrap_or(0) as usize;
        let len = (overflow + 1).saturating_mul(self.page_size);
        let cap = match u16_at(&header, 8) {
            Some(BRANCH) => MAX_BRANCH_RUN,
            _ => MAX_PAGE_RUN,
        };
        if len > cap || start.saturating_add(len as u64) > self.file.size() {
            return Err(err(format!("page {id} runs past the end of the file")));
        }
        // Every page of the run is this walk's once: runs that overlap are a crafted file.
        let run = id..id + overflow as u64 + 1;
        if run.clone().any(|p| seen.contains(&p)) {
            return Err(err(format!("page {id} is reached twice (a loop or shared pages)")));
        }
        seen.extend(run);
        let left = self.budget.get().checked_sub(overflow as u64 + 1);
        self.budget.set(left.unwrap_or(0));
        if left.is_none() {
            return Err(err(format!(
                "more pages read than {REREADS} times the file's; the rest is not read"
            )));
        }
        let mut page = vec![0u8; len];
        self.file
            .read_at(start, &mut page)
            .map_err(|_| err(format!("page {id} could not be read")))?;
        Ok(page)
    }

    /// Calls `f` with the key and value of each plain entry of the bucket at `path` (its
    /// names from the root), in key order, until it breaks. `Ok(false)` when there is no
    /// such bucket. An error (a damaged page, the budget spent) ends the walk where it is.
    pub fn each(
        &self,
        path: &[&[u8]],
        f: &mut dyn FnMut(&[u8], &[u8]) -> Flow,
    ) -> Result<bool, Error> {
        self.each_at(path, &mut |key, value, _| f(key, value))
    }

    /// [`Paged::each`], with the file offset of each value (none in an inline bucket).
    pub fn each_at(&self, path: &[&[u8]], f: &mut Located<'_>) -> Result<bool, Error> {
        let mut root = PagedRoot::Page(self.meta.root);
        for name in path {
            let mut found = None;
            let _: Flow = self.walk(&root, &mut |(flags, key, value), _| {
                if key != *name || flags & BUCKET_FLAG == 0 {
                    return Flow::Continue(());
                }
                found = match u64_at(value, 0) {
                    Some(0) => value.get(HEADER..).map(|v| PagedRoot::Inline(v.to_vec())),
                    Some(id) => Some(PagedRoot::Page(id)),
                    None => None,
                };
                Flow::Break(())
            })?;
            match found {
                Some(r) => root = r,
                None => return Ok(false),
            }
        }
        let _: Flow =
            self.walk(&root, &mut |(flags, key, value), at| match flags & BUCKET_FLAG {
                0 => f(key, value, at),
                _ => Flow::Continue(()),
            })?;
        Ok(true)
    }

    /// Calls `f` with the leaf elements of the bucket at `root`, in order, and the file
    /// offset of each value, until it breaks.
    fn walk(
        &self,
        root: &PagedRoot,
        f: &mut dyn FnMut(Element<'_>, Option<u64>) -> Flow,
    ) -> Result<Flow, Error> {
        let id = match root {
            PagedRoot::Inline(page) => {
                if u16_at(page, 8) != Some(LEAF) {
                    return Err(err("an inline bucket is not a leaf page"));
                }
                return leaf(page, "an inline bucket", &mut |e| f(e, None));
            }
            PagedRoot::Page(id) => *id,
        };
        let mut seen = HashSet::new();
        // Depth first, children in order: the stack holds each branch's children left to
        // read (ids only, never a page's bytes), the next last.
        let mut stack: Vec<Vec<u64>> = Vec::new();
        let mut next = Some(id);
        loop {
            if let Some(id) = next.take() {
                if stack.len() > MAX_DEPTH {
                    return Err(err(format!("page {id} is nested too deep (a loop)")));
                }
                let page = self.page(id, &mut seen)?;
                match u16_at(&page, 8) {
                    Some(LEAF) => {
                        let start = id * self.page_size as u64;
                        let base = page.as_ptr() as usize;
                        let at = |v: &[u8]| start + (v.as_ptr() as usize - base) as u64;
                        let flow = leaf(&page, &format!("page {id}"), &mut |e| f(e, Some(at(e.2))));
                        if flow?.is_break() {
                            return Ok(Flow::Break(()));
                        }
                    }
                    Some(BRANCH) => {
                        let count = usize::from(u16_at(&page, 10).unwrap_or(0));
                        let children: Option<Vec<u64>> = (0..count)
                            .rev()
                            .map(|i| u64_at(&page, HEADER + i * ELEMENT + 8))
                            .collect();
                        let children = children.ok_or_else(|| {
                            err(format!("page {id}: its elements run past the page"))
                        })?;
                        stack.push(children);
                    }
                    Some(flags) => {
                        return Err(err(format!(
                            "page {id} is not a branch or leaf (flags {flags:#x})"
                        )));
                    }
                    None => return Err(err(format!("page {id} is too short"))),
                }
            }
            let Some(children) = stack.last_mut() else { return Ok(Flow::Continue(())) };
            match children.pop() {
                Some(child) => next = Some(child),
                None => {
                    stack.pop();
                }
            }
        }
    }
}

/// A minimal bbolt writer, for tests and fixtures only: it lays out a tree the way bbolt
/// does (metas in pages 0 and 1, the freelist in page 2, leaves and branch pages, inline
/// buckets, overflow pages) so that the reader and the scanner can be tested on files of
/// known content, including freed pages of stale data. It is not used by the scanner.
pub mod write {
    use super::*;
    use std::collections::BTreeMap;

    /// A tree to write: keys in order.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub enum Node {
        /// A plain value.
        Data(Vec<u8>),
        /// A bucket.
        Bucket(BTreeMap<Vec<u8>, Node>),
    }

    /// Writes bbolt files the way bbolt lays them out: metas in pages 0 and 1, the freelist
    /// in page 2, then the tree; buckets without sub-buckets inline when `inline`, leaves
    /// of at most `leaf_max` elements under one branch page.
    pub struct Writer {
        ps: usize,
        out: Vec<u8>,
        inline: bool,
        leaf_max: usize,
    }

    impl Writer {
        /// A writer of `ps`-byte pages.
        pub fn new(ps: usize, inline: bool, leaf_max: usize) -> Writer {
            Writer { ps, out: vec![0; 3 * ps], inline, leaf_max }
        }

        /// Places a page image, padded to whole pages; returns its id.
        fn place(&mut self, mut image: Vec<u8>) -> u64 {
            let id = (self.out.len() / self.ps) as u64;
            let pages = image.len().div_ceil(self.ps).max(1);
            image[0..8].copy_from_slice(&id.to_le_bytes());
            image[12..16].copy_from_slice(&((pages - 1) as u32).to_le_bytes());
            image.resize(pages * self.ps, 0);
            self.out.extend_from_slice(&image);
            id
        }
    }

    /// A hostile `meta.db` (4 KiB pages): `v1/k8s.io/containers/<id>/` for `fanout`
    /// container ids, all naming one record page, whose `fanout` buckets all name one page
    /// of `fanout` buckets, and so on `levels` deep, over a last page of `fanout` values.
    /// It is small (`levels + 7` pages) but holds `fanout^levels` paths: a reader that
    /// follows each path reads that many values.
    pub fn shared_pages(levels: usize, fanout: usize) -> Vec<u8> {
        let mut w = Writer::new(4096, false, usize::MAX);
        let key = |i: usize| format!("k{i:03}").into_bytes();
        let data: Vec<_> = (0..fanout).map(|i| (0, key(i), b"v".to_vec())).collect();
        let mut page = w.leaf_page(&data);
        for _ in 0..levels {
            let refs: Vec<_> = (0..fanout).map(|i| (BUCKET, key(i), bucket_at(page))).collect();
            page = w.leaf_page(&refs);
        }
        let ids: Vec<_> = (0..fanout)
            .map(|i| (BUCKET, format!("{i:064x}").into_bytes(), bucket_at(page)))
            .collect();
        let containers = w.leaf_page(&ids);
        let mut up =
            |name: &[u8], page: u64| w.leaf_page(&[(BUCKET, name.to_vec(), bucket_at(page))]);
        let ns = up(b"containers", containers);
        let v1 = up(b"k8s.io", ns);
        let root = up(b"v1", v1);
        w.finish_at(root)
    }

    /// A hostile file (4 KiB pages) whose bucket at `path` holds `n` elements that all
    /// name the same bytes: one `key` and one bucket of `record` entries (inline), as
    /// leaves of at most 65,535 elements under one branch page. Each element is 16 bytes,
    /// so `n` records take `16 n` bytes: a reader that holds what each says holds `n`
    /// copies of one record.
    pub fn aliased(path: &[&[u8]], n: usize, key: &[u8], record: &[(&[u8], &[u8])]) -> Vec<u8> {
        let mut w = Writer::new(4096, true, usize::MAX);
        let inner: Vec<_> = record.iter().map(|(k, v)| (0, k.to_vec(), v.to_vec())).collect();
        let mut value = vec![0u8; 16];
        value.extend(leaf(&inner));
        let mut leaves = Vec::new();
        let mut left = n;
        while left > 0 {
            let count = left.min(u16::MAX as usize);
            left -= count;
            let mut page = vec![0u8; HEADER + count * ELEMENT];
            page[8..10].copy_from_slice(&LEAF.to_le_bytes());
            page[10..12].copy_from_slice(&(count as u16).to_le_bytes());
            let data = page.len();
            for i in 0..count {
                let e = HEADER + i * ELEMENT;
                let fields = [BUCKET_FLAG, (data - e) as u32, key.len() as u32, value.len() as u32];
                for (j, x) in fields.into_iter().enumerate() {
                    page[e + 4 * j..e + 4 * j + 4].copy_from_slice(&x.to_le_bytes());
                }
            }
            page.extend_from_slice(key);
            page.extend_from_slice(&value);
            leaves.push(w.place(page));
        }
        let mut branch = vec![0u8; HEADER + leaves.len() * ELEMENT];
        branch[8..10].copy_from_slice(&BRANCH.to_le_bytes());
        branch[10..12].copy_from_slice(&(leaves.len() as u16).to_le_bytes());
        let keys = branch.len();
        for (i, id) in leaves.iter().enumerate() {
            let e = HEADER + i * ELEMENT;
            branch[e..e + 4].copy_from_slice(&((keys - e) as u32).to_le_bytes());
            branch[e + 4..e + 8].copy_from_slice(&(key.len() as u32).to_le_bytes());
            branch[e + 8..e + 16].copy_from_slice(&id.to_le_bytes());
        }
        branch.extend_from_slice(key);
        let mut page = w.place(branch);
        for name in path.iter().rev() {
            page = w.leaf_page(&[(BUCKET_FLAG, name.to_vec(), bucket_at(page))]);
        }
        w.finish_at(page)
    }

    /// The flags of a leaf element that is a bucket.
    pub const BUCKET: u32 = BUCKET_FLAG;

    /// The value a parent stores for a bucket whose root is the page `root`.
    pub fn bucket_at(root: u64) -> Vec<u8> {
        let mut value = vec![0u8; 16];
        value[..8].copy_from_slice(&root.to_le_bytes());
        value
    }

    /// The image of a leaf page holding `elements` (flags, key, value), id and overflow unset.
    pub fn leaf(elements: &[(u32, Vec<u8>, Vec<u8>)]) -> Vec<u8> {
        let mut page = vec![0u8; HEADER + elements.len() * ELEMENT];
        page[8..10].copy_from_slice(&LEAF.to_le_bytes());
        page[10..12].copy_from_slice(&(elements.len() as u16).to_le_bytes());
        for (i, (flags, k, v)) in elements.iter().enumerate() {
            let e = HEADER + i * ELEMENT;
            let pos = (page.len() - e) as u32;
            for (j, x) in [*flags, pos, k.len() as u32, v.len() as u32].into_iter().enumerate() {
                page[e + 4 * j..e + 4 * j + 4].copy_from_slice(&x.to_le_bytes());
            }
            page.extend_from_slice(k);
            page.extend_from_slice(v);
        }
        page
    }

    impl Writer {
        /// The value a parent stores for a bucket.
        fn bucket(&mut self, entries: &BTreeMap<Vec<u8>, Node>) -> Vec<u8> {
            let nested = entries.values().any(|n| matches!(n, Node::Bucket(_)));
            let mut elements = Vec::new();
            for (k, n) in entries {
                elements.push(match n {
                    Node::Data(v) => (0, k.clone(), v.clone()),
                    Node::Bucket(b) => (BUCKET_FLAG, k.clone(), self.bucket(b)),
                });
            }
            let mut value = vec![0u8; 16];
            if self.inline && !nested && elements.len() <= self.leaf_max {
                value.extend(leaf(&elements));
            } else {
                let root = self.tree(&elements);
                value[..8].copy_from_slice(&root.to_le_bytes());
            }
            value
        }

        fn tree(&mut self, elements: &[(u32, Vec<u8>, Vec<u8>)]) -> u64 {
            if elements.len() <= self.leaf_max {
                return self.place(leaf(elements));
            }
            let children: Vec<(Vec<u8>, u64)> = elements
                .chunks(self.leaf_max)
                .map(|c| (c[0].1.clone(), self.place(leaf(c))))
                .collect();
            let mut page = vec![0u8; HEADER + children.len() * ELEMENT];
            page[8..10].copy_from_slice(&BRANCH.to_le_bytes());
            page[10..12].copy_from_slice(&(children.len() as u16).to_le_bytes());
            for (i, (k, id)) in children.iter().enumerate() {
                let e = HEADER + i * ELEMENT;
                let pos = (page.len() - e) as u32;
                page[e..e + 4].copy_from_slice(&pos.to_le_bytes());
                page[e + 4..e + 8].copy_from_slice(&(k.len() as u32).to_le_bytes());
                page[e + 8..e + 16].copy_from_slice(&id.to_le_bytes());
                page.extend_from_slice(k);
            }
            self.place(page)
        }

        fn meta(&mut self, page: usize, root: u64, pgid: u64, txid: u64) {
            let at = page * self.ps;
            let m = &mut self.out[at..at + self.ps];
            m[..8].copy_from_slice(&(page as u64).to_le_bytes());
            m[8..10].copy_from_slice(&4u16.to_le_bytes());
            let fields: [(usize, u64, usize); 7] = [
                (16, u64::from(MAGIC), 4),
                (20, u64::from(VERSION), 4),
                (24, self.ps as u64, 4),
                (32, root, 8),
                (48, 2, 8),
                (56, pgid, 8),
                (64, txid, 8),
            ];
            for (o, v, n) in fields {
                m[o..o + n].copy_from_slice(&v.to_le_bytes()[..n]);
            }
            let sum = fnv1a64(&m[16..72]);
            m[72..80].copy_from_slice(&sum.to_le_bytes());
        }

        /// Writes `root` as the whole database; `free` pages of stale bytes (e.g. an old
        /// leaf) are placed after it and listed in the freelist; `spare` zero pages follow
        /// the high-water mark.
        pub fn finish(
            mut self,
            root: &BTreeMap<Vec<u8>, Node>,
            free: &[Vec<u8>],
            spare: usize,
        ) -> Vec<u8> {
            let mut elements = Vec::new();
            for (k, n) in root {
                if let Node::Bucket(b) = n {
                    elements.push((BUCKET_FLAG, k.clone(), self.bucket(b)));
                }
            }
            let root_id = self.tree(&elements);
            self.close(root_id, free, spare)
        }

        /// Places the leaf page of `elements` (flags, key, value) as they are and returns
        /// its id: with [`bucket_at`] values, any shape of pages, hostile ones included
        /// (nothing stops two buckets from naming the same page).
        pub fn leaf_page(&mut self, elements: &[(u32, Vec<u8>, Vec<u8>)]) -> u64 {
            self.place(leaf(elements))
        }

        /// Writes the freelist and the metas of a database whose root bucket is the page
        /// `root` (placed with [`Writer::leaf_page`]).
        pub fn finish_at(self, root: u64) -> Vec<u8> {
            self.close(root, &[], 0)
        }

        fn close(mut self, root_id: u64, free: &[Vec<u8>], spare: usize) -> Vec<u8> {
            let mut freed = Vec::new();
            for f in free {
                let id = (self.out.len() / self.ps) as u64;
                let mut page = f.clone();
                page.resize(self.ps, 0);
                self.out.extend_from_slice(&page);
                freed.push(id);
            }
            let pgid = (self.out.len() / self.ps) as u64;
            let fl = 2 * self.ps;
            self.out[fl..fl + 8].copy_from_slice(&2u64.to_le_bytes());
            self.out[fl + 8..fl + 10].copy_from_slice(&FREELIST.to_le_bytes());
            self.out[fl + 10..fl + 12].copy_from_slice(&(freed.len() as u16).to_le_bytes());
            for (i, id) in freed.iter().enumerate() {
                self.out[fl + 16 + 8 * i..fl + 24 + 8 * i].copy_from_slice(&id.to_le_bytes());
            }
            self.meta(0, root_id, pgid, 4);
            self.meta(1, root_id, pgid, 5);
            self.out.resize(self.out.len() + spare * self.ps, 0);
            self.out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::write::{leaf, Node, Writer};
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// Reads a bucket back as a tree.
    fn read(b: Bucket<'_>) -> Result<BTreeMap<Vec<u8>, Node>, Error> {
        let mut out = BTreeMap::new();
        for (k, v) in b.entries()? {
            let node = match v {
                Value::Data(d) => Node::Data(d.to_vec()),
                Value::Bucket(b) => Node::Bucket(read(b)?),
            };
            out.insert(k.to_vec(), node);
        }
        Ok(out)
    }

    /// Each bucket's path and its plain entries.
    type Plain = (Vec<Vec<u8>>, BTreeMap<Vec<u8>, Vec<u8>>);

    fn plain(bucket: &BTreeMap<Vec<u8>, Node>, path: &mut Vec<Vec<u8>>, out: &mut Vec<Plain>) {
        let mut data = BTreeMap::new();
        for (k, v) in bucket {
            match v {
                Node::Data(d) => {
                    data.insert(k.clone(), d.clone());
                }
                Node::Bucket(b) => {
                    path.push(k.clone());
                    plain(b, path, out);
                    path.pop();
                }
            }
        }
        if !path.is_empty() {
            out.push((path.clone(), data));
        }
    }

    fn node() -> impl Strategy<Value = Node> {
        let key = || prop::collection::vec(any::<u8>(), 1..12);
        let data = prop::collection::vec(any::<u8>(), 0..300).prop_map(Node::Data);
        data.prop_recursive(3, 40, 8, move |inner| {
            prop::collection::btree_map(key(), inner, 0..8).prop_map(Node::Bucket)
        })
    }

    fn tree() -> impl Strategy<Value = BTreeMap<Vec<u8>, Node>> {
        prop::collection::btree_map(
            prop::collection::vec(any::<u8>(), 1..12),
            prop::collection::btree_map(prop::collection::vec(any::<u8>(), 1..12), node(), 0..10)
                .prop_map(Node::Bucket),
            1..4,
        )
    }

    /// A sample database: `v1/k8s.io/containers/<id>/{spec, labels/…}`, a long value on
    /// overflow pages, and a freed leaf holding a stale value.
    fn sample(inline: bool, leaf_max: usize) -> (Vec<u8>, BTreeMap<Vec<u8>, Node>) {
        let mut containers = BTreeMap::new();
        for i in 0..5u8 {
            let labels =
                BTreeMap::from([(b"io.kubernetes.pod.uid".to_vec(), Node::Data(vec![b'u', i]))]);
            containers.insert(
                format!("{i:064x}").into_bytes(),
                Node::Bucket(BTreeMap::from([
                    (b"labels".to_vec(), Node::Bucket(labels)),
                    (b"spec".to_vec(), Node::Data(vec![b'{'; 100 + 3000 * usize::from(i)])),
                ])),
            );
        }
        let ns = BTreeMap::from([(b"containers".to_vec(), Node::Bucket(containers))]);
        let v1 = BTreeMap::from([
            (b"k8s.io".to_vec(), Node::Bucket(ns)),
            (b"version".to_vec(), Node::Data(vec![6])),
        ]);
        let root = BTreeMap::from([(b"v1".to_vec(), Node::Bucket(v1))]);
        let stale = leaf(&[(0, b"spec".to_vec(), b"STALE-VALUE".to_vec())]);
        (Writer::new(4096, inline, leaf_max).finish(&root, &[stale], 2), root)
    }

    #[test]
    fn reads_back_what_was_written() {
        for (inline, leaf_max) in [(true, 64), (false, 64), (true, 2), (false, 1)] {
            let (file, root) = sample(inline, leaf_max);
            let db = Db::open(&file).unwrap();
            assert_eq!(db.meta().txid, 5, "the newer meta is current");
            assert_eq!(read(db.root()).unwrap(), root, "inline {inline} leaf_max {leaf_max}");
            let v1 = db.root().bucket(b"v1").unwrap().unwrap();
            assert_eq!(v1.get(b"version").unwrap(), Some(&[6u8][..]));
            assert!(v1.get(b"k8s.io").unwrap().is_none(), "a bucket is not a plain value");
        }
    }

    #[test]
    fn dead_ranges_are_the_freed_page_and_the_spare_pages() {
        let (file, _) = sample(true, 64);
        let db = Db::open(&file).unwrap();
        let (dead, errors) = db.dead_ranges();
        assert!(errors.is_empty(), "{errors:?}");
        let pages = file.len() as u64 / 4096;
        // The freed page is the last before the high-water mark, then two spare pages.
        assert_eq!(dead, vec![(pages - 3) * 4096..pages * 4096]);
        let stale = find(&file, b"STALE-VALUE").unwrap() as u64;
        assert!(dead[0].contains(&stale));
        // The live spec values are outside every dead range.
        let live = find(&file, b"{{{{").unwrap() as u64;
        assert!(dead.iter().all(|r| !r.contains(&live)));
    }

    fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
        hay.windows(needle.len()).position(|w| w == needle)
    }

    /// The page-by-page reader is bounded whatever the pages say: children that all point
    /// at one page (a graph, not a tree) are read once, then an error; a page claiming
    /// 2^32 overflow pages is an error, not a 16 TiB read.
    #[test]
    fn paged_reads_are_bounded() {
        let keys: BTreeMap<Vec<u8>, Node> =
            (0..40u8).map(|i| (vec![b'k', i], Node::Data(vec![i; 100]))).collect();
        let root = BTreeMap::from([(b"key".to_vec(), Node::Bucket(keys))]);
        let good = Writer::new(4096, false, 2).finish(&root, &[], 0);
        let count = |file: &[u8]| {
            let bytes = file;
            let paged = Paged::open(&bytes).unwrap();
            let mut n = 0;
            let r = paged.each(&[b"key"], &mut |_, _| {
                n += 1;
                Flow::Continue(())
            });
            (n, r)
        };
        assert_eq!(count(&good), (40, Ok(true)));
        let branch = (2..good.len() / 4096)
            .find(|&p| u16_at(&good[p * 4096..], 8) == Some(BRANCH))
            .expect("a branch page");
        let mut shared = good.clone();
        let at = branch * 4096;
        let first = u64_at(&shared, at + HEADER + 8).unwrap();
        let elements = usize::from(u16_at(&shared, at + 10).unwrap());
        for i in 0..elements {
            let e = at + HEADER + i * ELEMENT + 8;
            shared[e..e + 8].copy_from_slice(&first.to_le_bytes());
        }
        let (n, r) = count(&shared);
        assert!(n <= 40 && r.unwrap_err().to_string().contains("reached twice"), "{n}");
        let mut huge = good.clone();
        let leaf = (2..good.len() / 4096)
            .find(|&p| u16_at(&good[p * 4096..], 8) == Some(LEAF) && p != branch)
            .unwrap();
        huge[leaf * 4096 + 12..leaf * 4096 + 16].copy_from_slice(&u32::MAX.to_le_bytes());
        let (_, r) = count(&huge);
        assert!(r.unwrap_err().to_string().contains("runs past"));
        // A branch whose run overlaps the pages after it (each page read once per walk),
        // and one claiming more than a branch can be.
        let mut overlapping = good.clone();
        let second = u64_at(&good, at + HEADER + ELEMENT + 8).unwrap();
        let (lo, hi) = (first.min(second) as usize, first.max(second) as usize);
        let run = (hi - lo) as u32;
        overlapping[lo * 4096 + 12..lo * 4096 + 16].copy_from_slice(&run.to_le_bytes());
        let (_, r) = count(&overlapping);
        assert!(r.unwrap_err().to_string().contains("reached twice"));
        let mut wide = good.clone();
        wide[at + 12..at + 16].copy_from_slice(&300u32.to_le_bytes());
        let (_, r) = count(&wide);
        assert!(r.unwrap_err().to_string().contains("runs past"));
    }

    #[test]
    fn meta_choice_and_damage() {
        let (file, _) = sample(true, 64);
        // Meta 1 (txid 5) damaged: meta 0 (txid 4) is used.
        let mut f = file.clone();
        f[4096 + 40] ^= 1;
        assert_eq!(Db::open(&f).unwrap().meta().txid, 4);
        // Meta 0 damaged: the page size is found from meta 1.
        let mut f = file.clone();
        f[20] ^= 1;
        assert_eq!(Db::open(&f).unwrap().meta().txid, 5);
        f[4096 + 40] ^= 1;
        let e = Db::open(&f).unwrap_err().to_string();
        assert!(e.contains("not a bbolt file") || e.contains("meta"), "{e}");
        assert!(Db::open(b"hello").unwrap_err().to_string().contains("not a bbolt file"));
        assert!(Db::open(&[0u8; 8192]).unwrap_err().to_string().contains("not a bbolt file"));
    }

    #[test]
    fn truncated_file_gives_errors_not_panics() {
        let (file, _) = sample(false, 2);
        for len in (0..file.len()).step_by(512) {
            let part = &file[..len];
            let Ok(db) = Db::open(part) else { continue };
            let r = read(db.root());
            let (_, errors) = db.dead_ranges();
            if len < file.len() - 3 * 4096 {
                assert!(r.is_err() || !errors.is_empty(), "truncated at {len} goes unnoticed");
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn any_tree_round_trips(root in tree(), inline in any::<bool>(), leaf_max in 1usize..6) {
            let file = Writer::new(4096, inline, leaf_max).finish(&root, &[], 0);
            let db = Db::open(&file).unwrap();
            prop_assert_eq!(&read(db.root()).unwrap(), &root);
            // Read page by page, every bucket's plain entries are the same.
            let bytes = file.as_slice();
            let paged = Paged::open(&bytes).unwrap();
            let mut buckets = Vec::new();
            plain(&root, &mut Vec::new(), &mut buckets);
            for (path, want) in buckets {
                let path: Vec<&[u8]> = path.iter().map(Vec::as_slice).collect();
                let mut got = BTreeMap::new();
                let found = paged.each(&path, &mut |k, v| {
                    got.insert(k.to_vec(), v.to_vec());
                    Flow::Continue(())
                });
                prop_assert_eq!(found, Ok(true));
                prop_assert_eq!(got, want);
            }
            let (dead, errors) = db.dead_ranges();
            prop_assert!(errors.is_empty());
            prop_assert!(dead.is_empty());
        }

        /// Damage anywhere: no panic, and no error message quotes file content.
        #[test]
        fn damaged_files_never_panic(
            flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..20),
            cut in any::<prop::sample::Index>(),
            truncate in any::<bool>(),
        ) {
            let (mut file, _) = sample(true, 2);
            for (at, x) in flips {
                let i = at.index(file.len());
                file[i] ^= x | 1;
            }
            if truncate {
                file.truncate(cut.index(file.len()));
            }
            let bytes = file.as_slice();
            if let Ok(paged) = Paged::open(&bytes) {
                let mut n = 0usize;
                let walked = paged.each(&[b"v1", b"default"], &mut |_, _| {
                    n += 1;
                    Flow::Continue(())
                });
                if let Err(e) = walked {
                    prop_assert!(!e.to_string().contains("STALE"), "{}", e);
                }
                prop_assert!(n <= file.len() / ELEMENT);
            }
            if let Ok(db) = Db::open(&file) {
                let messages: Vec<String> = match read(db.root()) {
                    Ok(_) => Vec::new(),
                    Err(e) => vec![e.to_string()],
                }
                .into_iter()
                .chain(db.dead_ranges().1.iter().map(|e| e.to_string()))
                .collect();
                for m in messages {
                    prop_assert!(!m.contains("STALE") && !m.contains("io.kubernetes") && !m.contains("{{"), "{}", m);
                }
            }
        }
    }
}
