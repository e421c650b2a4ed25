//! A read-only reader of dqlite's data dir (MicroK8s's `k8s-dqlite`, the datastore at
//! `/var/snap/microk8s/current/var/kubernetes/backend/`): the raft log's segments, whose
//! entries carry the SQLite pages each transaction wrote, and the snapshots, which hold
//! whole databases (the main file and its log) as of an index. The SQLite pages inside are
//! read by [`crate::sqlite`]. Facts and their upstream sources in `docs/NODE-LAYOUT.md`
//! (dqlite). All integers are little-endian.
//!
//! * A segment (`<first index>-<last index>`, 16 digits each, or `open-<n>` while written)
//!   is `u64 format (1)`, then batches: `u32 crc of the header, u32 crc of the data`, the
//!   header `u64 n` and `n × (u64 term, u8 type, 3 unused, u32 length)`, then each
//!   entry's data padded to 8 bytes. The crcs are CRC-32 of polynomial `0x04C11DB7`, most
//!   significant bit first, from 0, not inverted. An open segment is preallocated: a batch
//!   of no entries (zeros) ends it.
//! * An entry of type 1 (a command) holds a dqlite command: `u8 format (1), u8 type, 6
//!   unused`; type 2 (frames) is the database's name (NUL-terminated, padded to 8), `u64
//!   transaction, u32 truncate, u8 commit, 3 unused, u32 pages, u16 page size, 2 unused`,
//!   then the page numbers (`u64` each) and the pages.
//! * A snapshot (`snapshot-<term>-<index>-<ms>`, its `.meta` beside it) is, once inflated
//!   when it is an LZ4 frame (magic `04 22 4d 18`), `u64 format (1), u64 databases`, then
//!   per database its name (as above), `u64 main size, u64 log size`, the main file and its
//!   log (a SQLite WAL file).
//!
//! Everything is bounds-checked: a damaged or hostile file gives an [`Error`] naming
//! offsets (never content), and the work is linear in the file's size.

use crate::sys::{le16 as u16_at, le32 as u32_at, le64 as u64_at, Bytes};
use std::io::Read;
use std::ops::Range;

/// Why a file, or part of it, could not be read. The message names offsets only.
pub use crate::sys::ReadError as Error;

fn err(msg: impl Into<String>) -> Error {
    Error::new("dqlite", msg.into())
}

/// The format version of segments and snapshots.
const FORMAT: u64 = 1;
/// A raft entry that carries a command of the state machine (dqlite's).
const RAFT_COMMAND: u8 = 1;
/// dqlite's command that carries pages.
const COMMAND_FRAMES: u8 = 2;
/// The magic number of an LZ4 frame.
pub const LZ4_MAGIC: [u8; 4] = [0x04, 0x22, 0x4d, 0x18];
/// The most entries a batch may claim (raft writes batches of a few).
const MAX_BATCH: u64 = 1 << 16;
/// The longest name of a database.
const MAX_NAME: usize = 4096;

/// The CRC raft writes (polynomial `0x04C11DB7`, most significant bit first, from `crc`).
fn crc32(data: &[u8], crc: u32) -> u32 {
    const TABLE: [u32; 256] = {
        let mut t = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = (i as u32) << 24;
            let mut k = 0;
            while k < 8 {
                c = if c & 0x8000_0000 != 0 { (c << 1) ^ 0x04C1_1DB7 } else { c << 1 };
                k += 1;
            }
            t[i] = c;
            i += 1;
        }
        t
    };
    data.iter().fold(crc, |c, &b| (c << 8) ^ TABLE[((c >> 24) as u8 ^ b) as usize])
}

fn pad8(n: u64) -> u64 {
    n.div_ceil(8).saturating_mul(8)
}

/// Reads `len` bytes at `at`.
fn read(file: &dyn Bytes, at: u64, len: usize) -> Result<Vec<u8>, Error> {
    if at.saturating_add(len as u64) > file.size() {
        return Err(err(format!("{len} bytes at {at} run past the end")));
    }
    let mut buf = vec![0u8; len];
    file.read_at(at, &mut buf)
        .map_err(|_| err(format!("{len} bytes at {at} could not be read")))?;
    Ok(buf)
}

/// A raft log entry: its term, type and where its data is in the segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Its term.
    pub term: u64,
    /// Its type (1 a command, 2 a barrier, 3 a configuration).
    pub kind: u8,
    /// Its data's bytes in the file.
    pub data: Range<u64>,
}

/// Whether a walk goes on.
pub type Flow = std::ops::ControlFlow<()>;

/// Calls `visit` with each entry of the segment `file`, in order, until it breaks; what
/// could not be read (a batch whose crcs do not hold is skipped, a header that cannot be
/// is where the walk ends) is returned.
pub fn entries(file: &dyn Bytes, mut visit: impl FnMut(&Entry) -> Flow) -> Vec<Error> {
    let mut errors = Vec::new();
    let size = file.size();
    match read(file, 0, 8).map(|b| u64_at(&b, 0)) {
        Ok(Some(FORMAT)) => {}
        Ok(v) => return vec![err(format!("not a raft segment (format {v:?})"))],
        Err(e) => return vec![e],
    }
    let mut at = 8u64;
    while at.saturating_add(16) <= size {
        let Ok(head) = read(file, at, 16) else { break };
        let (crc_head, crc_data) = (u32_at(&head, 0).unwrap_or(0), u32_at(&head, 4).unwrap_or(0));
        let n = u64_at(&head, 8).unwrap_or(0);
        if n == 0 {
            // The zeros an open segment is preallocated with.
            break;
        }
        if n > MAX_BATCH {
            errors.push(err(format!("a batch at {at} claims {n} entries; the rest not read")));
            break;
        }
        let table_len = 8 + 16 * n as usize;
        let table = match read(file, at + 8, table_len) {
            Ok(t) => t,
            Err(e) => {
                errors.push(e);
                break;
            }
        };
        let mut list = Vec::with_capacity(n as usize);
        let mut data_len = 0u64;
        for i in 0..n as usize {
            let e = 8 + 16 * i;
            let term = u64_at(&table, e).unwrap_or(0);
            let kind = table.get(e + 8).copied().unwrap_or(0);
            let len = u64::from(u32_at(&table, e + 12).unwrap_or(0));
            list.push((term, kind, len));
            data_len = data_len.saturating_add(pad8(len));
        }
        let data_at = at + 8 + table_len as u64;
        let next = data_at.saturating_add(data_len);
        if next > size {
            errors.push(err(format!("a batch at {at} runs past the end (cut short?)")));
            break;
        }
        let mut ok = crc32(&table, 0) == crc_head;
        if ok {
            // The data's crc, read a piece at a time.
            let mut crc = 0;
            let mut pos = data_at;
            while pos < next && ok {
                let take = (next - pos).min(1 << 20) as usize;
                match read(file, pos, take) {
                    Ok(b) => crc = crc32(&b, crc),
                    Err(_) => ok = false,
                }
                pos += take as u64;
            }
            ok &= crc == crc_data;
        }
        if !ok {
            errors.push(err(format!("a batch at {at} fails its checksum; its entries not read")));
        } else {
            let mut pos = data_at;
            for (term, kind, len) in list {
                let entry = Entry { term, kind, data: pos..pos + len };
                if visit(&entry).is_break() {
                    return errors;
                }
                pos += pad8(len);
            }
        }
        at = next;
    }
    errors
}

/// A transaction's pages, as a frames command carries them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frames {
    /// The database's name (`k8s` for MicroK8s's).
    pub database: String,
    /// Whether the transaction commits with these pages.
    pub commit: bool,
    /// The page size.
    pub page_size: usize,
    /// Each page's number and the offset of its image in the file.
    pub pages: Vec<(u32, u64)>,
}

/// The pages of `entry` when it is a frames command.
pub fn frames(file: &dyn Bytes, entry: &Entry) -> Result<Option<Frames>, Error> {
    if entry.kind != RAFT_COMMAND || entry.data.end - entry.data.start < 16 {
        return Ok(None);
    }
    let at = entry.data.start;
    let head = read(file, at, 8)?;
    if head[0] != FORMAT as u8 || head[1] != COMMAND_FRAMES {
        return Ok(None);
    }
    let (database, name_len) = name(file, at + 8, entry.data.end)?;
    let fixed = at + 8 + name_len;
    let b = read(file, fixed, 24)?;
    let commit = b[12] != 0;
    let n = u32_at(&b, 16).unwrap_or(0) as u64;
    let page_size = usize::from(u16_at(&b, 20).unwrap_or(0));
    let page_size = if page_size == 1 { 65536 } else { page_size };
    if !(512..=65536).contains(&page_size) || !page_size.is_power_of_two() {
        return Err(err(format!("frames at {at}: page size {page_size}")));
    }
    let numbers_at = fixed + 24;
    let pages_at = numbers_at.saturating_add(8 * n);
    if pages_at.saturating_add(n.saturating_mul(page_size as u64)) > entry.data.end {
        return Err(err(format!("frames at {at}: {n} pages run past the entry")));
    }
    let numbers = read(file, numbers_at, 8 * n as usize)?;
    let pages = (0..n as usize)
        .map(|i| {
            let number = u32::try_from(u64_at(&numbers, 8 * i).unwrap_or(0)).unwrap_or(0);
            (number, pages_at + (i * page_size) as u64)
        })
        .collect();
    Ok(Some(Frames { database, commit, page_size, pages }))
}

/// A name at `at` (NUL-terminated, padded to 8 bytes, before `end`), and the bytes it
/// takes.
fn name(file: &dyn Bytes, at: u64, end: u64) -> Result<(String, u64), Error> {
    let window = read(file, at, (end.saturating_sub(at)).min(MAX_NAME as u64) as usize)?;
    let len = window.iter().position(|&b| b == 0).ok_or_else(|| err(format!("no name at {at}")))?;
    let shown = String::from_utf8_lossy(&window[..len]).into_owned();
    Ok((shown, pad8(len as u64 + 1)))
}

/// A database a snapshot holds: its name, and where its main file and its log are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotDb {
    /// Its name.
    pub database: String,
    /// The main file's bytes.
    pub main: Range<u64>,
    /// Its log's bytes (a SQLite WAL file; empty when there is none).
    pub wal: Range<u64>,
}

/// The databases of an (inflated) snapshot.
pub fn snapshot(file: &dyn Bytes) -> Result<Vec<SnapshotDb>, Error> {
    let head = read(file, 0, 16)?;
    if u64_at(&head, 0) != Some(FORMAT) {
        return Err(err("not a dqlite snapshot (format)"));
    }
    let n = u64_at(&head, 8).unwrap_or(0);
    let size = file.size();
    let mut out = Vec::new();
    let mut at = 16u64;
    for _ in 0..n.min(1024) {
        let (database, len) = name(file, at, size)?;
        let sizes = read(file, at + len, 16)?;
        let (main, wal) = (u64_at(&sizes, 0).unwrap_or(0), u64_at(&sizes, 8).unwrap_or(0));
        let main_at = at + len + 16;
        let wal_at = main_at.saturating_add(main);
        let end = wal_at.saturating_add(wal);
        if end > size {
            return Err(err(format!("database at {at} runs past the snapshot's end")));
        }
        out.push(SnapshotDb { database, main: main_at..wal_at, wal: wal_at..end });
        at = end;
    }
    Ok(out)
}

/// Whether `file` begins with an LZ4 frame.
pub fn is_lz4(file: &dyn Bytes) -> bool {
    read(file, 0, 4).is_ok_and(|b| b == LZ4_MAGIC)
}

/// The bytes of `file` read in order with `pread` (its offset left alone).
struct Reader<'a> {
    file: &'a dyn Bytes,
    at: u64,
}

impl Read for Reader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = (self.file.size().saturating_sub(self.at)).min(buf.len() as u64) as usize;
        self.file.read_at(self.at, &mut buf[..n])?;
        self.at += n as u64;
        Ok(n)
    }
}

/// The inflated bytes of the LZ4 frame `file` holds, as they inflate.
pub fn inflating(file: &dyn Bytes) -> impl Read + '_ {
    lz4_flex::frame::FrameDecoder::new(Reader { file, at: 0 })
}

/// Inflates the LZ4 frame `file` holds, at most `cap` bytes of it: the bytes, and whether
/// they are all of it (a larger or damaged frame gives what inflated before).
pub fn inflate(file: &dyn Bytes, cap: u64) -> (Vec<u8>, Result<(), Error>) {
    let mut decoder = inflating(file);
    // Grown by doubling, never past the cap (`read_to_end` would double past it).
    let cap = usize::try_from(cap).unwrap_or(usize::MAX);
    let mut out: Vec<u8> = Vec::new();
    let mut len = 0;
    let whole = loop {
        if len == out.len() {
            let grown = (2 * len).max(64 << 10).min(cap.saturating_add(1));
            if grown <= len {
                out.truncate(cap);
                break Err(err(format!("inflates to more than {cap} bytes; the rest not read")));
            }
            out.resize(grown, 0);
        }
        match decoder.read(&mut out[len..]) {
            Ok(0) => break Ok(()),
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break Err(err(format!("the LZ4 frame is damaged after {len} bytes"))),
        }
        if len > cap {
            len = cap;
            out.truncate(cap);
            break Err(err(format!("inflates to more than {cap} bytes; the rest not read")));
        }
    };
    out.truncate(len);
    (out, whole)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_is_rafts() {
        // From a segment a real dqlite node wrote: a configuration entry's batch.
        let table = [1u8, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 40, 0, 0, 0];
        assert_eq!(crc32(&table, 0), 0x86f9_992d);
    }

    /// A segment of `entries` (type, data) as raft writes it, one batch each.
    pub(crate) fn segment(entries: &[(u8, Vec<u8>)]) -> Vec<u8> {
        let mut out = FORMAT.to_le_bytes().to_vec();
        for (kind, data) in entries {
            let mut table = 1u64.to_le_bytes().to_vec();
            table.extend(1u64.to_le_bytes());
            table.extend([*kind, 0, 0, 0]);
            table.extend((data.len() as u32).to_le_bytes());
            let mut padded = data.clone();
            padded.resize(pad8(data.len() as u64) as usize, 0);
            out.extend(crc32(&table, 0).to_le_bytes());
            out.extend(crc32(&padded, 0).to_le_bytes());
            out.extend(table);
            out.extend(padded);
        }
        out
    }

    /// A frames command of `pages` (number, image) for database `db`.
    pub(crate) fn frames_command(db: &str, pages: &[(u32, Vec<u8>)], ps: usize) -> Vec<u8> {
        let mut out = vec![1u8, COMMAND_FRAMES, 0, 0, 0, 0, 0, 0];
        let mut name = db.as_bytes().to_vec();
        name.push(0);
        name.resize(pad8(name.len() as u64) as usize, 0);
        out.extend(name);
        out.extend(7u64.to_le_bytes());
        out.extend([0, 0, 0, 0, 1, 0, 0, 0]);
        out.extend((pages.len() as u32).to_le_bytes());
        out.extend((ps as u16).to_le_bytes());
        out.extend([0, 0]);
        for (n, _) in pages {
            out.extend(u64::from(*n).to_le_bytes());
        }
        for (_, p) in pages {
            out.extend(p);
        }
        out
    }

    #[test]
    fn entries_and_frames_read_back() {
        let pages = vec![(1u32, vec![0xa1u8; 512]), (3, vec![0xb3; 512])];
        let seg = segment(&[(3, vec![9; 40]), (1, frames_command("k8s", &pages, 512))]);
        let file = seg.as_slice();
        let mut got = Vec::new();
        let errors = entries(&file, |e| {
            got.push(e.clone());
            Flow::Continue(())
        });
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(got.len(), 2);
        assert_eq!(frames(&file, &got[0]).unwrap(), None);
        let f = frames(&file, &got[1]).unwrap().unwrap();
        assert_eq!((f.database.as_str(), f.commit, f.page_size), ("k8s", true, 512));
        for ((n, at), (want_n, image)) in f.pages.iter().zip(&pages) {
            assert_eq!(n, want_n);
            assert_eq!(&seg[*at as usize..*at as usize + 512], image.as_slice());
        }
        // A flipped byte in the data: that batch is skipped, with an error.
        let mut bad = seg.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        let file = bad.as_slice();
        let mut n = 0;
        let errors = entries(&file, |_| {
            n += 1;
            Flow::Continue(())
        });
        assert_eq!((n, errors.len()), (1, 1));
    }

    /// Files a real dqlite node wrote (dqlite-demo of Debian's go-dqlite, with kine's table
    /// made and filled through the `dqlite` shell): kept as the fuzz target's seeds.
    fn seed(name: &str) -> Vec<u8> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/dqlite");
        std::fs::read(dir.join(name)).unwrap()
    }

    #[test]
    fn a_real_nodes_segment_and_snapshot() {
        let seg = seed("seed-segment");
        let file = seg.as_slice();
        let mut databases = Vec::new();
        let errors = entries(&file, |e| {
            if let Ok(Some(f)) = frames(&file, e) {
                for (n, at) in &f.pages {
                    let image = &seg[*at as usize..*at as usize + f.page_size];
                    // Page 1 begins with the database header; a table leaf with 0x0d.
                    assert!(*n != 1 || image.starts_with(b"SQLite format 3\0"));
                }
                databases.push(f.database);
            }
            Flow::Continue(())
        });
        assert!(errors.is_empty(), "{errors:?}");
        assert!(databases.iter().any(|d| d == "k8s"), "{databases:?}");
        let snap = seed("seed-snapshot-lz4");
        let file = snap.as_slice();
        assert!(is_lz4(&file));
        let (inflated, whole) = inflate(&file, 64 << 20);
        assert_eq!(whole, Ok(()));
        let dbs = snapshot(&inflated.as_slice()).unwrap();
        let names: Vec<&str> = dbs.iter().map(|d| d.database.as_str()).collect();
        assert_eq!(names, ["demo", "k8s"]);
        for db in &dbs {
            let main = &inflated[db.main.start as usize..db.main.end as usize];
            assert!(main.starts_with(b"SQLite format 3\0"));
        }
        // Capped: what inflated before the cap, and an error.
        let (part, whole) = inflate(&file, 1000);
        assert!(part.len() == 1000 && whole.is_err());
    }

    #[test]
    fn damaged_segments_do_not_panic() {
        let pages = vec![(1u32, vec![0xa1u8; 512])];
        let seg = segment(&vec![(1, frames_command("k8s", &pages, 512)); 3]);
        let mut rng = crate::prng::Prng::new(52);
        for _ in 0..500 {
            let mut bad = seg.clone();
            for _ in 0..rng.range(1, 6) {
                let at = rng.below(bad.len());
                bad[at] = rng.next_u64() as u8;
            }
            bad.truncate(rng.range(1, bad.len() + 1));
            let file = bad.as_slice();
            let _ = entries(&file, |e| {
                if let Ok(Some(f)) = frames(&file, e) {
                    for (_, at) in f.pages {
                        assert!(at as usize + f.page_size <= bad.len());
                    }
                }
                Flow::Continue(())
            });
            let _ = snapshot(&file);
        }
    }
}
