//! kine's SQLite database (`state.db` and its log `state.db-wal`): k3s's and k0s's
//! cluster datastore, every Secret of the cluster in its rows, in plaintext when
//! encryption at rest is off. Each file is searched raw, and each match attributed to the
//! row whose bytes hold it (its key and revision, and what the row is now: the served
//! value, an earlier revision, the `old_value` copy, a deleted key, a freed page, a
//! superseded or uncommitted page image); a value SQLite split across overflow pages is
//! searched reassembled. The file format is [`crate::sqlite`]'s; facts in
//! `docs/NODE-LAYOUT.md` (kine).

use super::{Advice, Discovery, ScopeKind, Site, Unresolved};
use crate::finding::{DbRecord, Finding, RecordState, SecretsAtRest, SiteId};
use crate::sqlite::{self, Db, Flow, Record, Value, Version, Which};
use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::path::PathBuf;

/// The suffix of a SQLite database's write-ahead log beside it.
pub const WAL_SUFFIX: &str = "-wal";

/// The most byte ranges of rows an index keeps (16 bytes each); the matches in rows past
/// them are attributed by their page only.
const MAX_SPANS: usize = 1 << 21;

/// The most keys an index keeps (a cluster's datastore holds some hundred thousand);
/// rows of keys past them are not attributed nor counted.
const MAX_KEYS: usize = 1 << 20;

/// kine's table.
const TABLE: &str = "kine";

/// kine's columns, in the order its `CREATE TABLE` declares them (every version).
const COLUMNS: [&str; 9] = [
    "id",
    "name",
    "created",
    "deleted",
    "create_revision",
    "prev_revision",
    "lease",
    "value",
    "old_value",
];

/// kine's databases: the distributions' that exist, and each one's log.
pub struct Kine;

impl Site for Kine {
    fn discover(&self, cx: &mut Discovery<'_>) {
        let kind = || ScopeKind::Site(SiteId::Kine);
        for db in cx.places.kine.clone() {
            let mut wal = db.clone().into_os_string();
            wal.push(WAL_SUFFIX);
            cx.push_once(&db, kind(), Unresolved::Quiet);
            cx.push_once(&PathBuf::from(wal), kind(), Unresolved::Quiet);
        }
    }

    fn advice(&self, _f: &Finding, _cx: Advice<'_>) -> (String, String) {
        (
            "the cluster's datastore (kine) holds Secrets unencrypted; kresidue never touches it"
                .to_owned(),
            "enable encryption at rest (k3s: --secrets-encryption, then k3s secrets-encrypt \
             reencrypt); earlier revisions and freed pages keep old values until kine compacts \
             and SQLite vacuums (kine 0.15 and later vacuum when the server starts)"
                .to_owned(),
        )
    }
}

/// Which file of a database pair `name` is: the log when it ends with [`WAL_SUFFIX`]; and
/// the name of the other.
pub fn pair(name: &std::ffi::OsStr) -> (Which, std::ffi::OsString) {
    let bytes = std::os::unix::ffi::OsStrExt::as_bytes(name);
    match bytes.strip_suffix(WAL_SUFFIX.as_bytes()) {
        Some(main) => {
            let main: &std::ffi::OsStr = std::os::unix::ffi::OsStrExt::from_bytes(main);
            (Which::Wal, main.to_owned())
        }
        None => {
            let mut wal = name.to_owned();
            wal.push(WAL_SUFFIX);
            (Which::Main, wal)
        }
    }
}

/// Which column of a row a byte is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Column {
    Value,
    OldValue,
    Other,
}

/// The entries of a row's columns, in [`Index::entries`] order from `base`.
const COLUMN_ENTRIES: [Column; 3] = [Column::Value, Column::OldValue, Column::Other];

/// Where a row's value columns are in its payload (`value`, `old_value`), and the index
/// of its first entry.
struct Columns {
    values: [Range<usize>; 2],
    base: u32,
}

impl Columns {
    /// The entry of the payload's byte `at`: its value column's, else the row's other
    /// bytes'.
    fn entry_at(&self, at: usize) -> u32 {
        let i = self.values.iter().position(|c| c.contains(&at));
        self.base + i.map_or(2, |i| i as u32)
    }
}

/// Where kine's columns are in its table's records (from its `CREATE TABLE`).
#[derive(Clone, Copy, Debug)]
struct Layout {
    name: usize,
    deleted: usize,
    value: usize,
    old_value: usize,
}

impl Layout {
    /// The columns of kine's `CREATE TABLE` statement `sql`; kine's own order when it does
    /// not name them all.
    fn of(sql: &str) -> Layout {
        let names: Vec<String> = sql
            .split_once('(')
            .map(|(_, cols)| cols.rsplit_once(')').map_or(cols, |(c, _)| c))
            .unwrap_or("")
            .split(',')
            .map(|c| c.split_whitespace().next().unwrap_or("").trim_matches('"').to_lowercase())
            .collect();
        let at = |col: &str| names.iter().position(|n| n == col);
        let default = |col: &str| COLUMNS.iter().position(|c| *c == col).unwrap_or(0);
        let pick = |col| match COLUMNS.iter().all(|c| at(c).is_some()) {
            true => at(col).unwrap_or_else(|| default(col)),
            false => default(col),
        };
        Layout {
            name: pick("name"),
            deleted: pick("deleted"),
            value: pick("value"),
            old_value: pick("old_value"),
        }
    }
}

/// A kine row as the index keeps it: its key, revision, where it was read from, and
/// whether it is a deletion.
#[derive(Clone, Copy, Debug)]
struct Entry {
    key: u32,
    revision: i64,
    column: Column,
    /// What its page image is when not a page of the current database (freed, an older
    /// image, a frame not committed).
    image: Option<RecordState>,
}

/// A key of a datastore: its name, and its newest revision in the current database
/// (whether it deletes the key, whether its value is encrypted); `newest` is `i64::MIN`
/// while no current revision is known.
#[derive(Clone, Debug)]
pub struct Key {
    /// Its name (`/registry/secrets/<ns>/<name>` for a Secret).
    pub name: String,
    /// Its newest revision.
    pub newest: i64,
    /// Whether its newest revision deletes it.
    pub deleted: bool,
    /// Whether its newest value is encrypted at rest.
    pub encrypted: bool,
}

/// The keys of a datastore, each once (at most `MAX_KEYS`), shared by kine's rows and
/// etcd's revisions.
#[derive(Default)]
pub struct Keys {
    names: HashMap<Vec<u8>, u32>,
    keys: Vec<Key>,
    /// Set when a key past the bound was left out.
    pub full: bool,
}

impl Keys {
    /// The index of key `name`, added with no revision when new; `None` (and `full`) past
    /// the bound.
    pub fn intern(&mut self, name: &[u8]) -> Option<u32> {
        if let Some(&k) = self.names.get(name) {
            return Some(k);
        }
        if self.keys.len() >= MAX_KEYS {
            self.full = true;
            return None;
        }
        let k = self.keys.len() as u32;
        let shown = String::from_utf8_lossy(name).into_owned();
        self.keys.push(Key { name: shown, newest: i64::MIN, deleted: false, encrypted: false });
        self.names.insert(name.to_vec(), k);
        Some(k)
    }

    /// Key `k`.
    pub fn get(&self, k: u32) -> &Key {
        &self.keys[k as usize]
    }

    /// Key `k`, to update its newest revision.
    pub fn get_mut(&mut self, k: u32) -> &mut Key {
        &mut self.keys[k as usize]
    }

    /// How many Secrets the keys serve in plaintext and encrypted: each Secret key with a
    /// newest revision that does not delete it, by its value's prefix; `partial` when the
    /// keys are not all the datastore's (`whole` false, or `full`).
    pub fn secrets_at_rest(&self, whole: bool) -> SecretsAtRest {
        let partial = !whole || self.full;
        let mut counts = SecretsAtRest { partial, ..SecretsAtRest::default() };
        for k in self.keys.iter().filter(|k| k.newest != i64::MIN && !k.deleted) {
            counts.add_key(&k.name, k.encrypted);
        }
        counts
    }
}

/// The prefix of a Secret's key.
pub const SECRETS: &str = crate::finding::SECRETS_PREFIX;

/// The prefix of a value encrypted at rest (`k8s:enc:<provider>:v1:<key>:`).
pub const ENCRYPTED: &[u8] = b"k8s:enc:";

/// The rows of kine's table whose bytes are in one file of a database, by offset: what a
/// match at an offset is in.
pub struct Index {
    which: Which,
    /// (offset in the file, length, entry), sorted by offset, not overlapping.
    spans: Vec<(u64, u32, u32)>,
    entries: Vec<Entry>,
    keys: Keys,
    freed: HashSet<u32>,
    /// The matches in values split across pages, at their file offsets, and their entries.
    split: Vec<(Finding, u32)>,
    /// Problems reading the files (messages name pages and offsets only).
    pub errors: Vec<String>,
    /// Whether the rows of the current database were all read (the counts are whole).
    whole: bool,
}

impl Index {
    /// Walks the records of kine's table in `db` (the current ones, then the older images
    /// and the freed pages), keeping where their bytes are in `which`. `search` is called
    /// with each record of an overflow chain (its bytes not one run of the file) and
    /// returns the matches in its payload at payload offsets, or `None` to stop the walk
    /// (a stop signal, the deadline); those that begin in `which` are kept, attributed
    /// ([`Index::take_split`]).
    pub fn build(
        db: &Db<'_>,
        which: Which,
        mut search: impl FnMut(&Record) -> Option<Vec<Finding>>,
    ) -> Index {
        let mut index = Index {
            which,
            spans: Vec::new(),
            entries: Vec::new(),
            keys: Keys::default(),
            freed: db.freelist(),
            split: Vec::new(),
            errors: Vec::new(),
            whole: true,
        };
        // A database of page images only (dqlite's log) has no schema to read: its rows are
        // the records of kine's shape.
        let (layout, root) = match db.is_images() {
            true => (Layout::of(""), None),
            false => {
                let tables = match db.tables() {
                    Ok(t) => t,
                    Err(e) => {
                        index.errors.push(e.to_string());
                        Vec::new()
                    }
                };
                let Some(table) = tables.iter().find(|t| t.name == TABLE) else {
                    if index.errors.is_empty() {
                        let e = "no kine table; matches are not attributed to rows";
                        index.errors.push(e.to_owned());
                    }
                    return index;
                };
                (Layout::of(&table.sql), Some(table.root))
            }
        };
        let mut full = false;
        let mut visit = |r: &Record| {
            if r.table.is_some_and(|t| Some(t) != root) {
                return Flow::Continue(());
            }
            let Ok(cols) = sqlite::columns(&r.payload) else { return Flow::Continue(()) };
            if root.is_none() && cols.len() != COLUMNS.len() {
                return Flow::Continue(());
            }
            let Some((Value::Text(name), _)) = cols.get(layout.name) else {
                return Flow::Continue(());
            };
            let deleted = matches!(cols.get(layout.deleted), Some((Value::Int(1), _)));
            let Some(key) = index.keys.intern(name) else { return Flow::Continue(()) };
            if r.version == Version::Current && r.rowid > index.keys.get(key).newest {
                let value = match cols.get(layout.value) {
                    Some((Value::Blob(v) | Value::Text(v), _)) => v,
                    _ => &[][..],
                };
                let k = index.keys.get_mut(key);
                (k.newest, k.deleted, k.encrypted) =
                    (r.rowid, deleted, value.starts_with(ENCRYPTED));
            }
            let range = |i: usize| cols.get(i).map_or(0..0, |(_, range)| range.clone());
            let base = index.entries.len() as u32;
            let columns = Columns { values: [range(layout.value), range(layout.old_value)], base };
            let image = match r.version {
                Version::Current => None,
                Version::Freed => Some(RecordState::Freed),
                Version::Older => Some(older(db, r.page.which, r.page.at)),
            };
            let contiguous = r
                .pieces
                .windows(2)
                .all(|w| w[0].which == w[1].which && w[0].at + w[0].len as u64 == w[1].at);
            let found = match contiguous {
                true => Vec::new(),
                false => match search(r) {
                    Some(found) => found,
                    None => return Flow::Break(()),
                },
            };
            // The row's entries, when a span or a split match refers to them: none for a row
            // with no bytes in this file (the other file's index has it).
            let here = r.pieces.iter().any(|p| p.which == index.which);
            if (full || !here) && found.is_empty() {
                return Flow::Continue(());
            }
            for column in COLUMN_ENTRIES {
                index.entries.push(Entry { key, revision: r.rowid, column, image });
            }
            if !full {
                full = !index.add_spans(r, &columns);
            }
            for f in found {
                index.keep_split(r, f, &columns);
            }
            Flow::Continue(())
        };
        match root {
            Some(root) => db.records(&[root], &mut visit),
            None => db.image_records(&mut visit),
        }
        if full {
            index.errors.push(format!(
                "more than {MAX_SPANS} row pieces; matches past them are attributed by page only"
            ));
        }
        index.errors.extend(db.errors().iter().map(ToString::to_string));
        index.whole &= db.read_whole();
        // Stable: at an offset two records claim, the one walked first (current rows are
        // walked before older images) keeps it.
        index.spans.sort_by_key(|&(at, _, _)| at);
        // Bytes two records claim (two older images of a page sharing a freed overflow
        // page): the first span there wins.
        let mut end = 0;
        index.spans.retain(|&(at, len, _)| {
            let keep = at >= end;
            end = end.max(at + u64::from(len));
            keep
        });
        index
    }

    /// How many Secrets the database serves in plaintext and encrypted: each Secret key's
    /// newest row in the current database, unless it deletes the key, by its value's
    /// prefix.
    pub fn secrets_at_rest(&self) -> SecretsAtRest {
        self.keys.secrets_at_rest(self.whole)
    }

    /// Adds the pieces of `r` in this file, cut at its value columns' bounds; false when
    /// the index is full.
    fn add_spans(&mut self, r: &Record, columns: &Columns) -> bool {
        for p in r.pieces.iter().filter(|p| p.which == self.which) {
            let mut cuts = vec![p.start, p.start + p.len];
            for c in &columns.values {
                cuts.extend(
                    [c.start, c.end].into_iter().filter(|&x| x > p.start && x < p.start + p.len),
                );
            }
            cuts.sort_unstable();
            cuts.dedup();
            for w in cuts.windows(2) {
                if self.spans.len() >= MAX_SPANS {
                    return false;
                }
                let at = p.at + (w[0] - p.start) as u64;
                self.spans.push((at, (w[1] - w[0]) as u32, columns.entry_at(w[0])));
            }
        }
        true
    }

    /// Keeps a match `f` of the reassembled payload of `r` (at a payload offset) when it
    /// begins in this file and its bytes are not one run of it (the raw search finds
    /// those): at its first byte's file offset, attributed to its column's entry.
    fn keep_split(&mut self, r: &Record, mut f: Finding, columns: &Columns) {
        let (Ok(start), Ok(len)) = (usize::try_from(f.offset), usize::try_from(f.length)) else {
            return;
        };
        let (Some((w, at)), Some(last)) = (r.locate(start), r.locate(start + len.max(1) - 1))
        else {
            return;
        };
        if w != self.which || last == (w, at + len.max(1) as u64 - 1) {
            return;
        }
        f.offset = at;
        self.split.push((f, columns.entry_at(start)));
    }

    /// The matches in values split across pages, attributed ([`Index::build`]).
    pub fn take_split(&mut self) -> Vec<Finding> {
        let mut split = std::mem::take(&mut self.split);
        for (f, e) in &mut split {
            self.label(f, self.entries[*e as usize]);
        }
        split.into_iter().map(|(f, _)| f).collect()
    }

    /// Attributes `f`, a match at its offset in this file: to the row whose bytes hold its
    /// first byte, else to the page it is in (freed, an older image, a page's unused
    /// space).
    pub fn attribute(&self, db: &Db<'_>, f: &mut Finding) {
        let i = self.spans.partition_point(|&(at, _, _)| at <= f.offset);
        let entry = i
            .checked_sub(1)
            .map(|i| self.spans[i])
            .filter(|&(at, len, _)| f.offset < at + u64::from(len))
            .map(|(_, _, e)| self.entries[e as usize]);
        match entry {
            Some(e) => self.label(f, e),
            None => {
                let state = match db.version_at(self.which, f.offset, &self.freed) {
                    _ if db.is_images() => RecordState::RaftLog,
                    Version::Current => RecordState::Unused,
                    Version::Freed => RecordState::Freed,
                    Version::Older => older(db, self.which, f.offset),
                };
                set_state(f, DbRecord { key: None, revision: None, state }, TAG);
            }
        }
    }

    /// Labels `f` with the row of `e`.
    fn label(&self, f: &mut Finding, e: Entry) {
        let key = self.keys.get(e.key);
        let state = match e.image {
            Some(image) => image,
            None if key.deleted => RecordState::Deleted,
            None if e.column == Column::OldValue => RecordState::OldValue,
            None if e.revision < key.newest => RecordState::OldRevision,
            None => RecordState::Current,
        };
        let (key, revision) = (Some(key.name.clone()), Some(e.revision));
        set_state(f, DbRecord { key, revision, state }, TAG);
    }
}

/// The state of an older page image at `at` of `which`: uncommitted when it is a log
/// frame after the last commit.
fn older(db: &Db<'_>, which: Which, at: u64) -> RecordState {
    if db.is_images() {
        return RecordState::RaftLog;
    }
    match (which, db.frame_at(at)) {
        (Which::Wal, Some(sqlite::FrameState::Uncommitted)) => RecordState::Uncommitted,
        _ => RecordState::Superseded,
    }
}

/// Marks `f`, a match in a row of a copy of the datastore that is no longer its state (a
/// dqlite snapshot older than the newest), as in an older copy: its key and revision stay.
pub fn superseded(f: &mut Finding) {
    if let Some(record) = f.record.take() {
        let (key, revision) = (record.key, record.revision);
        set_state(f, DbRecord { key, revision, state: RecordState::Superseded }, TAG);
    }
}

/// What kine's records add to their findings' ids.
const TAG: &str = "kine";

/// Sets the record of `f`, a match in a datastore (`tag` names it in the id), and its
/// note, staleness and id.
pub fn set_state(f: &mut Finding, record: DbRecord, tag: &str) {
    let state = record.state;
    let part = match &record.key {
        Some(key) => format!("{tag}={key}:{}", state.as_str()),
        None => format!("{tag}={}", state.as_str()),
    };
    f.id = Finding::refine_id(&f.id, &part);
    f.note = state.note();
    f.stale = state != RecordState::Current;
    f.record = Some(record);
}
