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
//! What it accepts is valid JSON that serde_json reads to the same set (a test and the
//! `fingerprint_file` fuzz target compare the two): the header is parsed by serde_json
//! itself, and every value is checked by the same [`ValueIn::check`].
//!
//! Written by hand rather than with a faster JSON crate: the time went into delimiting a
//! generic document, which a reader of one fixed layout does not need, and the general
//! path stays with serde_json.

use super::{Entry, FileIn, FingerprintSet, FormIn, ValueIn, STRIDE};
use std::borrow::Cow;

/// Where the values start, and the bytes that begin each one.
const VALUES: &[u8] = b"\"values\":[";
const VALUE_START: &[u8] = b"{\"secret\":";
/// Below this many bytes of values a thread costs more than it saves (~1,000 values).
const PER_THREAD: usize = 400 << 10;

/// The set, when `bytes` is in the writer's layout and every value checks out; `None`
/// otherwise (the caller then reads it the general way).
pub(super) fn read(bytes: &[u8], threads: usize) -> Option<FingerprintSet> {
    let at = memchr::memmem::find(bytes, VALUES)?;
    // The header is what precedes the values, closed with an empty list: serde_json reads
    // it (a `"values":[` nested in it leaves it unbalanced, and it fails).
    let mut header = bytes[..at].to_vec();
    header.extend_from_slice(b"\"values\":[]}");
    let file: FileIn<'_> = serde_json::from_slice(&header).ok()?;
    let salt = file.check().ok()?;
    let tail = trim_end(bytes).strip_suffix(b"}")?;
    let body = trim_end(tail).strip_suffix(b"]")?.get(at + VALUES.len()..)?;
    let parts = split(body, threads);
    let read: Vec<Option<Vec<Entry>>> = std::thread::scope(|s| {
        let mut handles = Vec::new();
        for part in &parts[1..] {
            handles.push(s.spawn(move || values(part)));
        }
        let mut all = vec![values(parts[0])];
        all.extend(handles.into_iter().map(|h| h.join().ok().flatten()));
        all
    });
    let mut entries = Vec::with_capacity(read.iter().flatten().map(Vec::len).sum());
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

/// Cuts the values into up to `threads` parts of similar size, each a list of whole values
/// (the comma between two parts dropped).
fn split(body: &[u8], threads: usize) -> Vec<&[u8]> {
    let threads = threads.clamp(1, body.len() / PER_THREAD + 1);
    let mut parts = Vec::with_capacity(threads);
    let mut start = 0;
    // The end of one value and the start of the next.
    let boundary = [b"},".as_slice(), VALUE_START].concat();
    let finder = memchr::memmem::Finder::new(&boundary);
    for k in 1..threads {
        let aim = (body.len() * k / threads).max(start);
        let Some(cut) = finder.find(&body[aim..]).map(|c| aim + c) else { break };
        parts.push(&body[start..=cut]);
        start = cut + 2;
    }
    parts.push(&body[start..]);
    parts
}

/// The values of one part (`value(,value)*`, or nothing), checked; `None` when it is not
/// in the writer's layout or a value fails its check (whose message, numbered within the
/// part, is dropped: the general reader words it).
fn values(part: &[u8]) -> Option<Vec<Entry>> {
    let mut c = Cursor { b: part, i: 0 };
    let mut out = Vec::with_capacity(part.len() / 400);
    if part.is_empty() {
        return Some(out);
    }
    loop {
        out.push(c.value()?.check(out.len()).ok()?);
        if c.i == part.len() {
            return Some(out);
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
    fn lit(&mut self, s: &[u8]) -> Option<()> {
        self.b[self.i..].starts_with(s).then(|| self.i += s.len())
    }

    /// A string without escapes or control characters.
    fn str(&mut self) -> Option<Cow<'a, str>> {
        self.lit(b"\"")?;
        let rest = &self.b[self.i..];
        let n = memchr::memchr(b'"', rest)?;
        let s = &rest[..n];
        if s.iter().any(|&b| b == b'\\' || b < 0x20) {
            return None;
        }
        self.i += n + 1;
        std::str::from_utf8(s).ok().map(Cow::Borrowed)
    }

    /// A `u32` as JSON writes it: digits, no leading zero.
    fn u32(&mut self) -> Option<u32> {
        let rest = &self.b[self.i..];
        let mut v = 0u64;
        let mut n = 0;
        while let Some(&d) = rest.get(n).filter(|d| d.is_ascii_digit()) {
            v = v * 10 + u64::from(d - b'0');
            n += 1;
            if n > 10 {
                return None;
            }
        }
        if n == 0 || (n > 1 && rest[0] == b'0') {
            return None;
        }
        self.i += n;
        u32::try_from(v).ok()
    }

    fn value(&mut self) -> Option<ValueIn<'a>> {
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
        Some(ValueIn { secret, key, label, forms })
    }

    fn form(&mut self) -> Option<FormIn<'a>> {
        self.lit(b"{\"encoding\":")?;
        let encoding = self.str()?;
        self.lit(b",\"length\":")?;
        let length = self.u32()?;
        self.lit(b",\"digest\":")?;
        let digest = self.str()?;
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
        Some(FormIn { encoding, length, digest, windows, token })
    }
}
