//! A gzip- or zstd-compressed file read at offsets of its inflated bytes, without
//! inflating it anywhere: what lets a compressed root filesystem tarball (or a compressed
//! `docker save`) be indexed once and then read member by member, in any order.
//!
//! One pass inflates the whole stream ([`Seekable::indexer`]) and, for gzip, keeps a
//! checkpoint every [`SPAN`] bytes of output: the inflater's whole state (its 32 KiB
//! window and tables, about 43 KiB; `miniz_oxide`'s `InflateState` is `Clone`), so a read
//! anywhere inflates at most [`SPAN`] bytes it does not need. zstd's decoder cannot be
//! copied, so a zstd stream has one checkpoint, its start. Reads reuse the decoders that
//! earlier reads left where they stopped (six of them): a file read front to back,
//! chunk by chunk, is inflated once.

use super::{Compression, Zstd};
use crate::sys::Bytes;
use miniz_oxide::inflate::stream::{inflate, InflateState};
use miniz_oxide::{DataFormat, MZFlush, MZStatus};
use std::io::{self, BufRead, BufReader, Read};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

/// Output bytes between two gzip checkpoints (a read inflates at most this much in vain).
pub const SPAN: u64 = 1 << 20;

/// Checkpoints kept, at most: past it every other one is dropped and the span doubles
/// (1,024 of 43 KiB: 44 MiB; past 1 GiB of output the span is 2 MiB, and so on).
const MAX_POINTS: usize = 1024;

/// Decoders kept where reads left them.
const LIVE: usize = 6;

/// Bytes each kept decoder remembers behind it.
const HISTORY: usize = 1 << 20;

/// What the file's bytes are read through.
type Shared = Arc<dyn Bytes + Send + Sync>;

/// A file whose size does not change while it is read.
struct Sized {
    file: Shared,
    len: u64,
}

impl Bytes for Sized {
    fn size(&self) -> u64 {
        self.len
    }

    fn read_at(&self, at: u64, buf: &mut [u8]) -> io::Result<()> {
        self.file.read_at(at, buf)
    }
}

/// Reads a file's bytes from a position that moves.
struct At {
    file: Shared,
    pos: u64,
}

impl Read for At {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.file.size().saturating_sub(self.pos);
        let n = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        self.file.read_at(self.pos, &mut buf[..n])?;
        self.pos += n as u64;
        Ok(n)
    }
}

/// Where a gzip decoder is between members, or in one.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Header,
    Deflate,
    Done,
}

/// A gzip decoder at a place of the stream: copied whole as a checkpoint.
#[derive(Clone)]
struct Gz {
    st: Box<InflateState>,
    phase: Phase,
    /// The next compressed byte to read.
    input: u64,
    /// The CRC-32 and size of the member's output so far, checked against its trailer:
    /// kept by the indexing pass, which reads every member whole.
    check: Option<(crc32fast::Hasher, u32)>,
}

/// Compressed bytes read ahead, from `at`.
struct InBuf {
    data: Vec<u8>,
    at: u64,
}

/// A gzip member's name or comment, at most (gzip writes a file name).
const MAX_HEADER_TEXT: u64 = 64 << 10;

fn bad_gzip(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("gzip: {what}"))
}

impl Gz {
    fn start(check: bool) -> Gz {
        let check = check.then(|| (crc32fast::Hasher::new(), 0));
        Gz { st: InflateState::new_boxed(DataFormat::Raw), phase: Phase::Header, input: 0, check }
    }

    /// Reads the gzip header at `input` (RFC 1952): the member's deflate data follows.
    /// At the start of the file anything else is an error; after a member, the file's end
    /// or anything else (padding, trailing garbage, as gzip itself ignores) ends it.
    fn header(&mut self, file: &Shared) -> io::Result<()> {
        let mut h = [0u8; 10];
        let left = file.size().saturating_sub(self.input);
        if left < 10 || {
            file.read_at(self.input, &mut h)?;
            h[..3] != [0x1f, 0x8b, 8]
        } {
            if self.input == 0 {
                return Err(bad_gzip("no gzip member at its start"));
            }
            self.phase = Phase::Done;
            return Ok(());
        }
        let flags = h[3];
        let mut at = self.input + 10;
        let bad = || bad_gzip("a damaged member header");
        if flags & 4 != 0 {
            let mut n = [0u8; 2];
            file.read_at(at, &mut n).map_err(|_| bad())?;
            at += 2 + u64::from(u16::from_le_bytes(n));
        }
        for bit in [8, 16] {
            if flags & bit != 0 {
                // A zero-terminated name or comment, read in pieces.
                let mut piece = [0u8; 4096];
                let from = at;
                loop {
                    let n = piece.len().min(file.size().saturating_sub(at) as usize);
                    file.read_at(at, &mut piece[..n]).map_err(|_| bad())?;
                    match memchr::memchr(0, &piece[..n]) {
                        Some(i) => {
                            at += i as u64 + 1;
                            break;
                        }
                        None if n == 0 || at - from > MAX_HEADER_TEXT => return Err(bad()),
                        None => at += n as u64,
                    }
                }
            }
        }
        if flags & 2 != 0 {
            at += 2;
        }
        self.input = at;
        self.st.reset(DataFormat::Raw);
        self.phase = Phase::Deflate;
        if let Some(c) = &mut self.check {
            *c = (crc32fast::Hasher::new(), 0);
        }
        Ok(())
    }

    /// The member's trailer, at `input`: CRC-32 and size, checked when kept.
    fn trailer(&mut self, file: &Shared) -> io::Result<()> {
        let mut t = [0u8; 8];
        file.read_at(self.input, &mut t)
            .map_err(|_| io::Error::new(io::ErrorKind::UnexpectedEof, "gzip: cut short"))?;
        if let Some((crc, size)) = self.check.take() {
            let want = (
                u32::from_le_bytes([t[0], t[1], t[2], t[3]]),
                u32::from_le_bytes([t[4], t[5], t[6], t[7]]),
            );
            if (crc.finalize(), size) != want {
                return Err(bad_gzip("a member whose CRC-32 or size is not its trailer's"));
            }
            self.check = Some((crc32fast::Hasher::new(), 0));
        }
        self.input += 8;
        self.phase = Phase::Header;
        Ok(())
    }

    fn read(&mut self, file: &Shared, buf: &mut [u8], inbuf: &mut InBuf) -> io::Result<usize> {
        loop {
            match self.phase {
                Phase::Done => return Ok(0),
                Phase::Header => self.header(file)?,
                Phase::Deflate => {
                    // Compressed bytes are read in pieces of 64 KiB, each once.
                    let held = inbuf.at..inbuf.at + inbuf.data.len() as u64;
                    if !held.contains(&self.input) {
                        let left = file.size().saturating_sub(self.input);
                        let n = (64 << 10).min(usize::try_from(left).unwrap_or(usize::MAX));
                        inbuf.data.resize(n, 0);
                        file.read_at(self.input, &mut inbuf.data)?;
                        inbuf.at = self.input;
                    }
                    let input = &inbuf.data[(self.input - inbuf.at) as usize..];
                    let r = inflate(&mut self.st, input, buf, MZFlush::None);
                    self.input += r.bytes_consumed as u64;
                    if let Some((crc, size)) = &mut self.check {
                        crc.update(&buf[..r.bytes_written]);
                        *size = size.wrapping_add(r.bytes_written as u32);
                    }
                    match r.status {
                        Ok(MZStatus::StreamEnd) => self.trailer(file)?,
                        Ok(_) if r.bytes_written == 0 && r.bytes_consumed == 0 => {
                            return Err(io::Error::new(
                                io::ErrorKind::UnexpectedEof,
                                "gzip: cut short",
                            ));
                        }
                        Ok(_) => {}
                        Err(e) => return Err(bad_gzip(&format!("{e:?}"))),
                    }
                    if r.bytes_written > 0 {
                        return Ok(r.bytes_written);
                    }
                }
            }
        }
    }
}

/// A decoder at `out` bytes of the inflated stream.
struct Cursor {
    out: u64,
    dec: Dec,
    /// The last bytes it gave (up to [`HISTORY`]), which end at `out`: a read a little
    /// behind it (a file's head read again) is served from them.
    hist: std::collections::VecDeque<u8>,
    /// Whether it keeps a history (the indexing pass does not).
    remember: bool,
}

enum Dec {
    Gz(Gz, InBuf),
    Zstd(Box<Zstd<BufReader<At>>>),
}

impl Cursor {
    fn read(&mut self, file: &Shared, buf: &mut [u8]) -> io::Result<usize> {
        let n = match &mut self.dec {
            Dec::Gz(g, inbuf) => g.read(file, buf, inbuf)?,
            Dec::Zstd(z) => z.read(buf)?,
        };
        self.out += n as u64;
        if !self.remember {
            return Ok(n);
        }
        let keep = &buf[n.saturating_sub(HISTORY)..n];
        let over = (self.hist.len() + keep.len()).saturating_sub(HISTORY);
        self.hist.drain(..over);
        self.hist.extend(keep);
        Ok(n)
    }

    /// The first byte its history holds.
    fn from(&self) -> u64 {
        self.out - self.hist.len() as u64
    }

    /// Fills `buf` from `at`, at or behind where it is: from its history first.
    fn read_at(&mut self, file: &Shared, at: u64, buf: &mut [u8]) -> io::Result<()> {
        let mut got = 0;
        if at < self.out {
            let skip = (at - self.from()) as usize;
            let n = (self.hist.len() - skip).min(buf.len());
            for (b, h) in buf[..n].iter_mut().zip(self.hist.range(skip..skip + n)) {
                *b = *h;
            }
            got = n;
        }
        self.skip_to(file, at + got as u64)?;
        while got < buf.len() {
            match self.read(file, &mut buf[got..])? {
                0 => return Err(io::ErrorKind::UnexpectedEof.into()),
                n => got += n,
            }
        }
        Ok(())
    }

    /// Moves on to `to`, inflating what lies before it in vain.
    fn skip_to(&mut self, file: &Shared, to: u64) -> io::Result<()> {
        if self.out >= to {
            return Ok(());
        }
        let mut scratch = vec![0u8; 64 << 10];
        while self.out < to {
            let n = scratch.len().min(usize::try_from(to - self.out).unwrap_or(usize::MAX));
            if self.read(file, &mut scratch[..n])? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
        Ok(())
    }
}

/// A checkpoint: a gzip decoder's state at `out` bytes of output.
struct Point {
    out: u64,
    gz: Gz,
}

/// A compressed file read at offsets of its inflated bytes ([`Bytes`]).
pub struct Seekable {
    file: Shared,
    kind: Compression,
    /// Inflated bytes known (all of them once the indexer has read to the end).
    size: std::sync::atomic::AtomicU64,
    points: RwLock<Vec<Point>>,
    live: Mutex<Vec<Cursor>>,
}

impl Seekable {
    /// The gzip or zstd stream in `file`.
    pub fn new(file: Shared, kind: Compression) -> io::Result<Arc<Seekable>> {
        if kind == Compression::None {
            return Err(io::Error::other("not compressed"));
        }
        // Its size asked once (a file's is an fstat each time).
        let file = Arc::new(Sized { len: file.size(), file });
        Ok(Arc::new(Seekable {
            file,
            kind,
            size: 0.into(),
            points: RwLock::new(Vec::new()),
            live: Mutex::new(Vec::new()),
        }))
    }

    /// A decoder at the stream's start.
    /// A decoder at the stream's start: the indexing pass's (checking each gzip member's
    /// CRC-32, keeping no history), or a reader's.
    fn start(&self, indexing: bool) -> Cursor {
        let check = indexing;
        let dec = match self.kind {
            Compression::Zstd => {
                let at = At { file: self.file.clone(), pos: 0 };
                Dec::Zstd(Box::new(Zstd { r: BufReader::with_capacity(64 << 10, at), frame: None }))
            }
            _ => Dec::Gz(Gz::start(check), InBuf { data: Vec::new(), at: 0 }),
        };
        Cursor { out: 0, dec, hist: Default::default(), remember: !indexing }
    }

    /// Inflates the whole stream, front to back, keeping checkpoints as it goes: read it
    /// to its end before reading at offsets (what it has not reached is not there yet).
    /// Past `deadline` it fails (a small file may inflate to terabytes).
    pub fn indexer(self: &Arc<Seekable>, deadline: Option<Instant>) -> impl BufRead + Send {
        let cur = self.start(true);
        let ix = Indexer { s: self.clone(), cur, span: SPAN, last: 0, deadline };
        BufReader::with_capacity(1 << 20, ix)
    }

    /// A decoder at or before `at`: the nearest of those reads left and the checkpoints.
    fn cursor(&self, at: u64) -> Cursor {
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        // One whose history holds `at`, or the nearest before it.
        let holds = (0..live.len()).find(|&i| (live[i].from()..=live[i].out).contains(&at));
        let behind = (0..live.len()).filter(|&i| live[i].out <= at).max_by_key(|&i| live[i].out);
        let best = holds.or(behind);
        let reused = best.map(|i| live.swap_remove(i));
        drop(live);
        let points = self.points.read().unwrap_or_else(|e| e.into_inner());
        let point = points.partition_point(|p| p.out <= at).checked_sub(1).map(|i| &points[i]);
        match (reused, point) {
            (Some(c), Some(p)) if p.out > c.out => gz_cursor(p),
            (Some(c), _) => c,
            (None, Some(p)) => gz_cursor(p),
            (None, None) => self.start(false),
        }
    }

    fn park(&self, c: Cursor) {
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        if live.len() >= LIVE {
            // The one furthest behind goes.
            if let Some(i) = (0..live.len()).min_by_key(|&i| live[i].out) {
                live.swap_remove(i);
            }
        }
        live.push(c);
    }
}

fn gz_cursor(p: &Point) -> Cursor {
    let mut gz = p.gz.clone();
    gz.check = None;
    let dec = Dec::Gz(gz, InBuf { data: Vec::new(), at: 0 });
    Cursor { out: p.out, dec, hist: Default::default(), remember: true }
}

impl Bytes for Seekable {
    fn size(&self) -> u64 {
        self.size.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn read_at(&self, at: u64, buf: &mut [u8]) -> io::Result<()> {
        if at.checked_add(buf.len() as u64).is_none_or(|end| end > self.size()) {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let mut c = self.cursor(at);
        c.read_at(&self.file, at, buf)?;
        self.park(c);
        Ok(())
    }
}

/// The first pass ([`Seekable::indexer`]).
struct Indexer {
    s: Arc<Seekable>,
    cur: Cursor,
    /// Output between checkpoints now.
    span: u64,
    /// Where the last checkpoint is.
    last: u64,
    deadline: Option<Instant>,
}

impl Read for Indexer {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if crate::sys::stop_signal().is_some() {
            // Not `Interrupted`: readers retry that, and the signal stays.
            return Err(io::Error::other("stopped by a signal"));
        }
        if self.deadline.is_some_and(|d| Instant::now() > d) {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("--timeout passed after inflating {} MiB", self.cur.out >> 20),
            ));
        }
        // The points are locked only to add one.
        if let Dec::Gz(g, _) = &self.cur.dec {
            if self.cur.out >= self.last + self.span {
                let mut points = self.s.points.write().unwrap_or_else(|e| e.into_inner());
                points.push(Point { out: self.cur.out, gz: g.clone() });
                if points.len() > MAX_POINTS {
                    let mut i = 0;
                    points.retain(|_| {
                        i += 1;
                        i % 2 == 0
                    });
                    self.span *= 2;
                }
                self.last = points.last().map_or(0, |p| p.out);
            }
        }
        let n = self.cur.read(&self.s.file, buf)?;
        self.s.size.store(self.cur.out, std::sync::atomic::Ordering::Relaxed);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// Random bytes, compressed by the real tools (gzip in two members; zstd in one
    /// frame), read at random offsets and lengths, in any order, from several threads:
    /// the same bytes as inflated front to back; past the end, an error.
    #[test]
    fn reads_anywhere_what_inflating_gives() {
        let mut rng = crate::prng::Prng::new(3);
        // Compressible but not trivially: words from a small alphabet.
        let data: Vec<u8> = (0..(9 << 20)).map(|_| b"abcdefgh \n"[rng.below(10)]).collect();
        let dir = tempfile::tempdir().expect("tmp");
        let (a, b) = data.split_at(5 << 20);
        let gz = |part: &[u8]| {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(part).expect("gz");
            e.finish().expect("gz")
        };
        let two = [gz(a), gz(b)].concat();
        let path = dir.path().join("d");
        std::fs::write(&path, &data).expect("write");
        let out = std::process::Command::new("zstd")
            .args(["-q", "-c", "-3"])
            .arg(&path)
            .output()
            .expect("zstd");
        assert!(out.status.success());
        for (kind, packed) in [(Compression::Gzip, two), (Compression::Zstd, out.stdout)] {
            let s = Seekable::new(Arc::new(packed), kind).expect("seekable");
            let mut all = Vec::new();
            s.indexer(None).read_to_end(&mut all).expect("index");
            assert!(all == data);
            assert_eq!(s.size(), data.len() as u64);
            if kind == Compression::Gzip {
                assert!(s.points.read().expect("lock").len() >= 3);
            }
            std::thread::scope(|t| {
                for seed in 0..2 {
                    let (s, data) = (&s, &data);
                    t.spawn(move || {
                        let mut rng = crate::prng::Prng::new(10 + seed);
                        for _ in 0..25 {
                            let at = rng.below(data.len());
                            let len = rng.below((data.len() - at).min(300_000));
                            let mut buf = vec![0u8; len];
                            s.read_at(at as u64, &mut buf).expect("read");
                            assert!(buf == data[at..at + len], "{at} {len}");
                        }
                    });
                }
            });
            assert!(s.read_at(data.len() as u64 - 1, &mut [0u8; 2]).is_err());
        }
    }

    /// A gzip stream whose data was changed where deflate cannot tell (a stored block),
    /// whose method is not deflate, or whose trailer is cut: the indexing pass fails,
    /// naming gzip; bytes after the last member (padding) end it quietly.
    #[test]
    fn gzip_damage_is_an_error() {
        let data = vec![b'x'; 5000];
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::none());
        e.write_all(&data).expect("gz");
        let clean = e.finish().expect("gz");
        let index = |b: Vec<u8>| {
            let s = Seekable::new(Arc::new(b), Compression::Gzip).expect("seekable");
            let mut out = Vec::new();
            s.indexer(None).read_to_end(&mut out).map(|_| out)
        };
        assert!(index(clean.clone()).expect("clean") == data);
        let mut padded = clean.clone();
        padded.extend_from_slice(&[0u8; 1024]);
        assert!(index(padded).expect("padded") == data);
        let mut changed = clean.clone();
        changed[100] ^= 1;
        let e = index(changed).expect_err("CRC");
        assert!(e.to_string().contains("CRC-32"), "{e}");
        let mut method = clean.clone();
        method[2] = 7;
        assert!(index(method).expect_err("method").to_string().starts_with("gzip: "));
        let cut = clean[..clean.len() - 3].to_vec();
        assert!(index(cut).is_err());
    }

    /// Damaged streams (cut, bytes changed): an error or bytes, never a panic or a hang.
    #[test]
    fn damaged_streams_fail_cleanly() {
        let data: Vec<u8> = (0..200_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(&data).expect("gz");
        let clean = e.finish().expect("gz");
        let mut rng = crate::prng::Prng::new(5);
        for i in 0..300 {
            let mut bad = clean.clone();
            if i % 3 == 0 {
                bad.truncate(rng.below(bad.len()));
            } else {
                for _ in 0..rng.range(1, 6) {
                    let at = rng.below(bad.len());
                    bad[at] = rng.next_u64() as u8;
                }
            }
            let s = Seekable::new(Arc::new(bad), Compression::Gzip).expect("seekable");
            let _ = s.indexer(None).read_to_end(&mut Vec::new());
            let mut buf = [0u8; 1000];
            let _ = s.read_at(rng.below(data.len()) as u64, &mut buf);
        }
    }
}
