//! A reader for fingerprint files exactly as [`FingerprintSet::to_json`] writes them.
//!
//! Loading 10,000 values is part of every scan's start, and serde_json spent most of it
//! delimiting the values one by one before any thread could parse them. This reader knows
//! the writer's compact layout: the header, then `"values":[`, then the values, each
//! `{"secret":…,"key":…,"label":…,"forms":[…]}` with its fields in that order, then `]}`.
//! It cuts the values into one part per thread where a value begins (`},{"secret":`, which
//! only the layout can hold: a quote inside a JSON string is always escaped), and reads
//! each part with a cursor that accepts that layout and nothing else: no whitespace, no
//! escapes in strings, no other field order. Anything else, valid or not, makes it answer
//! `None`, and the caller reads the file with serde_json, which words every error.
//!
//! Each thread reads its part of the file by position, a step at a time, into one buffer
//! it reuses, and parses the whole values of each step: reading the 4.7 MB of 10,000
//! values into fresh memory cost more in page faults (~1.4 µs a page here) than parsing
//! them.
//!
//! What it accepts is valid JSON that serde_json reads to the same set (a test and the
//! `fingerprint_file` fuzz target compare the two): the header is parsed by serde_json
//! itself, and every form is checked by the same [`Form::checked`] as serde_json's.
//!
//! Written by hand rather than with a faster JSON crate: the time went into delimiting a
//! generic document, which a reader of one fixed layout does not need, and the general
//! path stays with serde_json.

use super::{unhex64, Entry, FileIn, FingerprintSet, Form, STRIDE};
use crate::finding::Encoding;
use memchr::memmem;

/// Where the values start, and the bytes that begin each one.
const VALUES: &[u8] = b"\"values\":[";
const VALUE_START: &[u8] = b"{\"secret\":";
/// The end of one value and the start of the next.
const BOUNDARY: &[u8] = b"},{\"secret\":";
/// Below this many bytes of values a thread costs more than it saves (~1,000 values).
const PER_THREAD: usize = 400 << 10;
/// Bytes read at a time by each thread (more when one value is longer).
pub(super) const STEP: usize = 256 << 10;
/// The header must end (`"values":[`) within this many bytes of the start, and the
/// values (`]}`, then whitespace) within this many of the end.
const HEAD: usize = 64 << 10;
const TAIL: usize = 4 << 10;

/// Bytes read by position: an open regular file, or bytes in memory.
pub(super) trait Source: Sync {
    /// The length in bytes.
    fn size(&self) -> usize;
    /// Fills `buf` with the bytes from `at`; `None` when they cannot all be read.
    fn read_at(&self, buf: &mut [u8], at: usize) -> Option<()>;

    /// The `n` bytes from `at`.
    fn bytes(&self, at: usize, n: usize) -> Option<Vec<u8>> {
        let mut buf = vec![0; n];
        self.read_at(&mut buf, at)?;
        Some(buf)
    }
}

impl Source for [u8] {
    fn size(&self) -> usize {
        self.len()
    }

    fn read_at(&self, buf: &mut [u8], at: usize) -> Option<()> {
        buf.copy_from_slice(self.get(at..at.checked_add(buf.len())?)?);
        Some(())
    }
}

/// An open regular file and its length when opened. A file that shrinks meanwhile fails a
/// read, and the caller reads it again the general way; one rewritten in place at its
/// length could be read part old, part new, as a whole-file read could be over a shorter
/// time (`kresidue fingerprint -o` replaces the file whole, by rename).
pub(super) struct OpenFile<'a> {
    pub(super) file: &'a std::fs::File,
    pub(super) len: usize,
}

impl Source for OpenFile<'_> {
    fn size(&self) -> usize {
        self.len
    }

    fn read_at(&self, buf: &mut [u8], at: usize) -> Option<()> {
        std::os::unix::fs::FileExt::read_exact_at(self.file, buf, at as u64).ok()
    }
}

/// The set, when `src` is in the writer's layout and every value checks out; `None`
/// otherwise (the caller then reads it the general way). Each thread reads `step` bytes at
/// a time.
pub(super) fn read<S: Source + ?Sized>(
    src: &S,
    threads: usize,
    step: usize,
) -> Option<FingerprintSet> {
    let step = step.max(1);
    let len = src.size();
    let head = src.bytes(0, len.min(HEAD))?;
    let at = memmem::find(&head, VALUES)?;
    // The header is what precedes the values, closed with an empty list: serde_json reads
    // it (a `"values":[` nested in it leaves it unbalanced, and it fails).
    let mut header = head[..at].to_vec();
    header.extend_from_slice(b"\"values\":[]}");
    let file: FileIn<'_> = serde_json::from_slice(&header).ok()?;
    let salt = file.check().ok()?;
    let first = at + VALUES.len();
    let tail_at = len.saturating_sub(TAIL).max(first);
    let tail = src.bytes(tail_at, len.checked_sub(tail_at)?)?;
    let tail = trim_end(trim_end(&tail).strip_suffix(b"}")?).strip_suffix(b"]")?;
    let parts = split(src, first, tail_at + tail.len(), threads, step)?;
    let read: Vec<Option<Vec<Entry>>> = std::thread::scope(|s| {
        let mut handles = Vec::new();
        for &(from, to) in &parts[1..] {
            handles.push(s.spawn(move || part(src, from, to, step)));
        }
        let (from, to) = parts[0];
        let mut all = vec![part(src, from, to, step)];
        all.extend(handles.into_iter().map(|h| h.join().ok().flatten()));
        all
    });
    // The first part's entries grow to hold the others': no copy of them all.
    let mut read = read.into_iter();
    let mut entries = read.next().flatten()?;
    for mut part in read {
        entries.append(part.as_mut()?);
    }
    Some(FingerprintSet { salt, entries, printable: file.printable })
}

/// `bytes` without trailing JSON whitespace.
fn trim_end(bytes: &[u8]) -> &[u8] {
    let n = bytes.iter().rposition(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'));
    &bytes[..n.map_or(0, |n| n + 1)]
}

/// Cuts the values (`from..to` of `src`) into up to `threads` parts of similar size, each
/// a list of whole values (the comma between two parts dropped); `None` when a read fails.
fn split<S: Source + ?Sized>(
    src: &S,
    from: usize,
    to: usize,
    threads: usize,
    step: usize,
) -> Option<Vec<(usize, usize)>> {
    let threads = threads.clamp(1, (to - from) / PER_THREAD + 1);
    let mut parts = Vec::with_capacity(threads);
    let mut start = from;
    let finder = memmem::Finder::new(BOUNDARY);
    'parts: for k in 1..threads {
        // The first boundary at or after the aim, looked for a step at a time (steps
        // overlapping by a boundary less one byte).
        let mut at = (from + (to - from) * k / threads).max(start);
        while at + BOUNDARY.len() <= to {
            let window = src.bytes(at, step.clamp(BOUNDARY.len(), 4096).min(to - at))?;
            if let Some(cut) = finder.find(&window).map(|c| at + c) {
                parts.push((start, cut + 1));
                start = cut + 2;
                continue 'parts;
            }
            at += window.len() + 1 - BOUNDARY.len();
        }
        break;
    }
    parts.push((start, to));
    Some(parts)
}

/// The values of `from..to` of `src` (`value(,value)*`, or nothing), read a step at a time
/// into one buffer; `None` when a read fails or [`values`] refuses a step's values.
fn part<S: Source + ?Sized>(src: &S, from: usize, to: usize, step: usize) -> Option<Vec<Entry>> {
    let mut out = Vec::with_capacity((to - from) / 400);
    let rfinder = memmem::FinderRev::new(BOUNDARY);
    let mut buf = vec![0; step.min(to - from)];
    // Bytes of `buf` read and not yet parsed: the start of a value.
    let mut filled = 0;
    let mut at = from;
    while at < to {
        if filled == buf.len() {
            // One value longer than the buffer.
            buf.resize(2 * buf.len(), 0);
        }
        let n = (buf.len() - filled).min(to - at);
        src.read_at(&mut buf[filled..filled + n], at)?;
        (at, filled) = (at + n, filled + n);
        // The whole values read: up to the last boundary, or all at the end.
        let done = match at == to {
            true => filled,
            false => match rfinder.rfind(&buf[..filled]) {
                Some(cut) => cut + 1,
                None => continue,
            },
        };
        values(&buf[..done], &mut out)?;
        // Past the comma, the start of the next value moves to the front.
        let next = (done + 1).min(filled);
        buf.copy_within(next..filled, 0);
        filled -= next;
    }
    Some(out)
}

/// The values of `bytes` (`value(,value)*`, or nothing), checked, appended to `out`;
/// `None` when they are not in the writer's layout or a value fails its check (whose
/// message, numbered within the part, is dropped: the general reader words it).
fn values(bytes: &[u8], out: &mut Vec<Entry>) -> Option<()> {
    let mut c = Cursor { b: bytes, i: 0 };
    if bytes.is_empty() {
        return Some(());
    }
    loop {
        out.push(c.value()?);
        if c.i == bytes.len() {
            return Some(());
        }
        c.lit(b",")?;
    }
}

/// A position in the bytes of a part.
struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Cursor<'a> {
    /// Steps over `s`, which must come next.
    #[inline]
    fn lit(&mut self, s: &[u8]) -> Option<()> {
        self.b[self.i..].starts_with(s).then(|| self.i += s.len())
    }

    /// A string without escapes or control characters.
    fn str(&mut self) -> Option<&'a str> {
        self.lit(b"\"")?;
        let rest = &self.b[self.i..];
        let n = rest.iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
        if rest[n] != b'"' {
            return None;
        }
        self.i += n + 1;
        std::str::from_utf8(&rest[..n]).ok()
    }

    /// An encoding's name, quoted.
    fn encoding(&mut self) -> Option<Encoding> {
        self.lit(b"\"")?;
        let rest = &self.b[self.i..];
        let e = Encoding::ALL.into_iter().find(|e| {
            let name = e.as_str().as_bytes();
            rest.starts_with(name) && rest.get(name.len()) == Some(&b'"')
        })?;
        self.i += e.as_str().len() + 1;
        Some(e)
    }

    /// A digest: 64 hex digits, quoted.
    fn digest(&mut self) -> Option<[u8; 32]> {
        self.lit(b"\"")?;
        let hex: &[u8; 64] = self.b.get(self.i..self.i + 64)?.try_into().ok()?;
        self.i += 64;
        self.lit(b"\"")?;
        unhex64(hex)
    }

    /// A `u32` as JSON writes it: digits, no leading zero.
    #[inline]
    fn u32(&mut self) -> Option<u32> {
        let rest = &self.b[self.i..];
        // Where 16 bytes follow (all but the last numbers of each step's values), their
        // digits are found and summed eight at a time: a loop per digit mispredicted the end of
        // every number, and numbers were a third of the reading.
        let (v, n) = match rest.get(..16) {
            Some(b) => {
                let lo = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
                let hi = u64::from_le_bytes(b[8..].try_into().expect("8 bytes"));
                match digits(lo) {
                    8 => {
                        let m = digits(hi);
                        (eight(lo, 8) * 10u64.pow(m as u32) + eight(hi, m), 8 + m)
                    }
                    n => (eight(lo, n), n),
                }
            }
            None => {
                let n = rest.iter().take(11).take_while(|d| d.is_ascii_digit()).count();
                (rest[..n].iter().fold(0u64, |v, &d| v * 10 + u64::from(d - b'0')), n)
            }
        };
        if n == 0 || n > 10 || (n > 1 && rest[0] == b'0') {
            return None;
        }
        self.i += n;
        u32::try_from(v).ok()
    }

    fn value(&mut self) -> Option<Entry> {
        self.lit(VALUE_START)?;
        let secret = self.str()?;
        self.lit(b",\"key\":")?;
        let key = self.str()?;
        self.lit(b",\"label\":")?;
        let label = self.str()?;
        self.lit(b",\"forms\":[")?;
        let mut forms = Vec::with_capacity(3);
        if self.lit(b"]").is_none() {
            loop {
                forms.push(self.form()?);
                if self.lit(b"]").is_some() {
                    break;
                }
                self.lit(b",")?;
            }
        }
        self.lit(b"}")?;
        Some(Entry {
            secret: secret.to_owned(),
            key: key.to_owned(),
            label: label.to_owned(),
            forms,
        })
    }

    fn form(&mut self) -> Option<Form> {
        self.lit(b"{\"encoding\":")?;
        let encoding = self.encoding()?;
        self.lit(b",\"length\":")?;
        let length = self.u32()?;
        self.lit(b",\"digest\":")?;
        let digest = self.digest()?;
        self.lit(b",\"windows\":[")?;
        let mut windows = [(0, 0); STRIDE];
        for (r, w) in windows.iter_mut().enumerate() {
            if r > 0 {
                self.lit(b",")?;
            }
            self.lit(b"[")?;
            let o = self.u32()?;
            self.lit(b",")?;
            *w = (o, self.u32()?);
            self.lit(b"]")?;
        }
        self.lit(b"]")?;
        // Written only when true.
        let token = self.lit(b",\"token\":true").is_some();
        self.lit(b"}")?;
        // The value's number in the message is within the part: the message is dropped.
        Form::checked(0, encoding, length, digest, windows, token).ok()
    }
}

/// How many of the 8 bytes of `x` (little endian: the first in the low byte) are ASCII
/// digits before the first that is not.
#[inline(always)]
fn digits(x: u64) -> usize {
    const LO: u64 = 0x0f0f_0f0f_0f0f_0f0f;
    const HI: u64 = !LO;
    const SEVEN: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    // A byte is a digit when its high nibble is 3 and its low nibble at most 9 (adding 6
    // leaves it below 16): a nonzero byte of `bad` marks one that is not.
    let bad = ((x & HI) ^ 0x3030_3030_3030_3030) | (((x & LO) + 0x0606_0606_0606_0606) & HI);
    // The top bit of each nonzero byte, without carries between bytes.
    let nonzero = (((bad & SEVEN) + SEVEN) | bad) & !SEVEN;
    nonzero.trailing_zeros() as usize / 8
}

/// The number the first `n` (at most 8) bytes of `x` spell, all digits.
#[inline(always)]
fn eight(x: u64, n: usize) -> u64 {
    if n == 0 {
        return 0;
    }
    // The digits' values moved to the top bytes: the bytes below are leading zeros.
    let v = (x & 0x0f0f_0f0f_0f0f_0f0f) << (8 * (8 - n));
    // Pairs, then fours, then all eight, each step one multiply.
    let v = (v * 10 + (v >> 8)) & 0x00ff_00ff_00ff_00ff;
    let v = (v * 100 + (v >> 16)) & 0x0000_ffff_0000_ffff;
    (v * 10000 + (v >> 32)) & 0xffff_ffff
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What JSON's grammar and `u32` make of the start of `b`: the number and its length.
    fn reference(b: &[u8]) -> Option<(u32, usize)> {
        let n = b.iter().take_while(|d| d.is_ascii_digit()).count();
        let s = std::str::from_utf8(&b[..n]).ok()?;
        (n > 0 && (n == 1 || b[0] != b'0')).then_some(())?;
        Some((s.parse().ok()?, n))
    }

    proptest! {
        /// Eight digits at a time reads what a digit at a time does, at every length and
        /// whatever follows (other bytes close to the digits', and the end of the part).
        #[test]
        fn numbers_read_as_json_reads_them(
            digits in "[0-9]{0,12}",
            tail in proptest::collection::vec(prop_oneof![Just(b'/'), Just(b':'), Just(b'0'), Just(0x39 + 0x40), any::<u8>()], 0..20),
        ) {
            let b = [digits.as_bytes(), &tail].concat();
            let mut c = Cursor { b: &b, i: 0 };
            let got = c.u32().map(|v| (v, c.i));
            prop_assert_eq!(got, reference(&b));
        }
    }

    #[test]
    fn the_digit_masks_hold_at_their_edges() {
        for n in 0..=8 {
            let mut b = [b'x'; 8];
            b[..n].fill(b'9');
            let x = u64::from_le_bytes(b);
            assert_eq!(digits(x), n);
            assert_eq!(eight(x, n), "9".repeat(n).parse().unwrap_or(0));
        }
        // Bytes next to the digits' in value: '/' and ':', and with the high bit set.
        for other in [b'/', b':', b'0' | 0x80, b'9' | 0x80, 0x3f, 0x20] {
            assert_eq!(
                digits(u64::from_le_bytes([b'1', other, b'2', b'3', b'4', b'5', b'6', b'7'])),
                1
            );
        }
        assert_eq!(eight(u64::from_le_bytes(*b"12345678"), 8), 12_345_678);
        assert_eq!(eight(u64::from_le_bytes(*b"4294967x"), 7), 4_294_967);
    }
}
