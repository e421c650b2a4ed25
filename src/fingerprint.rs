//! Fingerprints of known secret values: how they are made, and the file that holds them.
//!
//! A fingerprint file lets a node be searched for a cluster's Secret values without the
//! values themselves ever being written anywhere. It holds, per value and per encoding
//! (raw, base64, JSON-escaped):
//!
//! * the length `L` of the encoded form;
//! * a **confirm digest** `SHA-256(salt ‖ form)` of the whole form;
//! * `STRIDE` (= 4) **window hashes**: for each residue `r` in `0..4`, one window of
//!   `WINDOW` (= 12) bytes starting at an offset `o ≡ r (mod 4)` of the form, stored as
//!   `(o, H(window))` where `H` is one keyed 64×64→128-bit multiply folded to 64 bits and
//!   truncated to `HASH_BITS` (= 28) bits, keyed by `SHA-256(salt ‖ "kresidue/window-key/v1")`.
//!
//! `salt` is 32 random bytes per file.
//!
//! # Why this finds every occurrence
//! The scanner hashes the 12 bytes at every file offset `p ≡ 0 (mod 4)`. An occurrence of a
//! form at file offset `s` has `(p − s) mod 4` equal to the same residue `r` for every such
//! `p`, so the sampled position `p = s + o_r` lands exactly on the stored window of residue
//! `r`. A window hit names its form and offset, so the candidate span is `[p − o_r, p −
//! o_r + L)`; it is a finding only if `SHA-256(salt ‖ span)` equals the confirm digest. A
//! form needs room for windows at all four residues: `L ≥ WINDOW + STRIDE − 1 = 15`. Raw
//! values shorter than [`MIN_VALUE_LEN`] (16) bytes are skipped, and counted.
//!
//! # What the file gives away (the arithmetic)
//! * **No plaintext, no base64, no escaped form**: only hex digests and integers are
//!   written (a test checks the file holds no 8-byte run of any value).
//! * **The whole value** can be confirmed from the digest, as with any password hash: a
//!   value with little entropy (a dictionary word) can be guessed by brute force from the
//!   file. A random value of 16 bytes or more cannot.
//! * **A piece of a value cannot be confirmed with certainty.** Each stored window hash
//!   keeps 28 of the 64 mixed bits of a 96-bit window, so `2^(96−28) = 2^68` byte strings
//!   share every stored hash; restricted to printable ASCII (95 symbols, 78.8 bits per
//!   window) still `2^50.8`; to `[A-Za-z0-9]` (71.5 bits) `2^43.5`; to lowercase hex (48
//!   bits) `2^20`. A guess of a window that matches its hash is therefore only one
//!   candidate among that many. Windows are chosen as far apart as the value allows: when
//!   `L ≥ 4 · 13 − 1 = 51` the four windows are disjoint, so each constrains only its own
//!   12 bytes and the ambiguities multiply (`≥ 2^80` for a 64-char hex key). For shorter
//!   forms the windows overlap; a guesser who first brute-forces one whole window
//!   (`2^71.5` work for alphanumerics, `2^48` for hex) can then extend it a few bytes at a
//!   time — the cost of the first window is the protection, which is why the window is 12
//!   bytes and not 8 (an 8-byte alphanumeric window would cost only `2^47.6`).
//! * Offsets and lengths are stored in clear; they reveal which parts of a value look
//!   most distinctive (window choice prefers varied bytes), nothing more.
//! * **One bit per file**, `printable`: whether every form of every value is printable
//!   ASCII text (`0x20..=0x7e`, tab, newline, carriage return). In a file of one value it
//!   says that of that value. The scanner trusts it (the file holds nothing to check it
//!   against): a file claiming it falsely would hide its binary values from the scan.
//! * **One bit per form**, `token`: all four windows are made of [`is_token`] bytes
//!   (`A-Z a-z 0-9 + / = _ -`). Windows are placed in such bytes whenever that costs no
//!   more overlap than the free choice, so the arithmetic above holds as it is; the bit
//!   tells that those windows' bytes hold nothing else (at most `log2(95/64) · 12 ≈ 6.8`
//!   bits a window for a value drawn from all of printable ASCII, nothing for a token or
//!   base64 value). The scanner tests a token form's windows only at samples whose 12
//!   bytes are token bytes, fewer than one in ten in a node's text; it trusts the bit as
//!   it trusts `printable`.
//!
//! # False candidates and cost per byte
//! A sampled position whose window is not part of any value still matches some stored
//! 28-bit hash with probability `n / 2^28` for `n` stored windows. With `N` values, ~2.2
//! forms each and 4 windows per form, `n ≈ 8.8 N`, and with one sample per 4 bytes that is
//! `2.2 N / 2^28` per byte: for `N = 10,000`, `8.2e-5` per byte. Such a candidate is
//! dropped by checking the form's other three window hashes (a false pass of all four is
//! `2^-84`), so SHA-256 runs only on true occurrences. The scanning cost per byte is one
//! 12-byte load, one 64×64→128-bit multiply and one filter probe every 4 bytes (see
//! `matcher`); `benches/matcher.rs` measures it.

use crate::finding::Encoding;
use crate::kubectl::SecretValue;
use anyhow::{bail, Context, Result};
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::borrow::Cow;
use std::io::Read;
use std::path::Path;

mod fast;

/// Width of a hashed window, in bytes.
pub const WINDOW: usize = 12;
/// Distance between sampled positions in a scanned file; also windows per form.
pub const STRIDE: usize = 4;
/// Bits of each window hash kept in the file.
pub const HASH_BITS: u32 = 28;
/// Shortest raw value fingerprinted, in bytes.
pub const MIN_VALUE_LEN: usize = 16;
/// Longest encoded form fingerprinted, in bytes (bounds the read overlap).
pub const MAX_FORM_LEN: usize = 256 * 1024;
/// The format id written as the first key of every fingerprint file.
pub const FORMAT: &str = "kresidue/fingerprints/v1";
/// The default label of fingerprinted values.
pub const DEFAULT_LABEL: &str = "current";

const MIN_FORM_LEN: usize = WINDOW + STRIDE - 1;
const KEY_CONTEXT: &[u8] = b"kresidue/window-key/v1";
/// Names the window hash and confirm digest construction, so a change is detected.
const HASH_ID: &str = "mum1-salted/sha256-salted";

/// The keys of the window hash, derived from a file's salt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowKeys([u64; 2]);

impl WindowKeys {
    /// Derives the keys from a salt.
    pub fn from_salt(salt: &[u8; 32]) -> WindowKeys {
        let d = Sha256::new().chain_update(salt).chain_update(KEY_CONTEXT).finalize();
        let k = |i: usize| u64::from_le_bytes(d[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
        WindowKeys([k(0), k(1)])
    }

    /// The two 64-bit keys (for the matcher's SIMD kernels, which compute the same hash).
    pub fn raw(&self) -> [u64; 2] {
        self.0
    }

    /// The truncated hash of the 12-byte window given as its first 8 bytes (`a`, little
    /// endian) and last 4 bytes (`b`): one keyed 64×64→128-bit multiply, folded. This is
    /// the scanner's hot path.
    #[inline(always)]
    pub fn hash_parts(&self, a: u64, b: u32) -> u32 {
        let x = mum(a ^ self.0[0], (b as u64) ^ self.0[1]);
        (x >> (64 - HASH_BITS)) as u32
    }

    /// The truncated hash of a window.
    #[inline(always)]
    pub fn hash_window(&self, w: &[u8; WINDOW]) -> u32 {
        let a = u64::from_le_bytes(w[..8].try_into().expect("8 bytes"));
        let b = u32::from_le_bytes(w[8..].try_into().expect("4 bytes"));
        self.hash_parts(a, b)
    }

    /// The truncated hash of the first `WINDOW` bytes of `w`.
    pub fn hash(&self, w: &[u8]) -> u32 {
        self.hash_window(w[..WINDOW].try_into().expect("window is 12 bytes"))
    }
}

/// Folded multiply: the 128-bit product's halves xor-ed.
#[inline(always)]
fn mum(x: u64, y: u64) -> u64 {
    let r = (x as u128) * (y as u128);
    (r as u64) ^ ((r >> 64) as u64)
}

/// The confirm digest of a form under a salt.
pub fn confirm_digest(salt: &[u8; 32], form: &[u8]) -> [u8; 32] {
    Sha256::new().chain_update(salt).chain_update(form).finalize().into()
}

/// One encoded form of a value, as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Form {
    /// Which encoding of the value this is.
    pub encoding: Encoding,
    /// Length of the encoded form in bytes.
    pub len: u32,
    /// `SHA-256(salt ‖ form)`.
    pub digest: [u8; 32],
    /// `(offset, truncated hash)` for residues 0, 1, 2, 3 in order.
    pub windows: [(u32, u32); STRIDE],
    /// Every window is made of [`is_token`] bytes only: the scanner tests the form's
    /// windows only at samples whose 12 bytes all are.
    pub token: bool,
}

/// One fingerprinted value and where it came from (no value bytes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// `<namespace>/<name>`.
    pub secret: String,
    /// The data key.
    pub key: String,
    /// The label (`current`, `revoked`, …).
    pub label: String,
    /// The encoded forms that are searched for.
    pub forms: Vec<Form>,
}

/// A set of fingerprints sharing one salt: one fingerprint file, or the in-memory result
/// of `--secrets`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FingerprintSet {
    /// The per-file random salt.
    pub salt: [u8; 32],
    /// The fingerprinted values.
    pub entries: Vec<Entry>,
    /// True when every form of every value is printable text (see [`is_printable`]): the
    /// scanner then skips bytes no form can contain, such as the bulk of a binary. One
    /// bit for the whole set, in the file as `"printable"`, trusted when read: one binary
    /// or non-ASCII value makes it false for the whole set.
    pub printable: bool,
}

/// A byte of printable ASCII text: `0x20..=0x7e`, tab, newline and carriage return.
#[inline(always)]
pub fn is_printable(b: u8) -> bool {
    matches!(b, 0x20..=0x7e | b'\t' | b'\n' | b'\r')
}

/// Counts of what [`FingerprintSet::build`] left out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BuildStats {
    /// Values fingerprinted.
    pub values: usize,
    /// Values shorter than [`MIN_VALUE_LEN`].
    pub too_short: usize,
    /// Values with a form longer than [`MAX_FORM_LEN`].
    pub too_long: usize,
}

impl FingerprintSet {
    /// Fingerprints `values` under `salt` with `label`.
    pub fn build(
        values: &[SecretValue],
        label: &str,
        salt: [u8; 32],
    ) -> (FingerprintSet, BuildStats) {
        let keys = WindowKeys::from_salt(&salt);
        let mut stats = BuildStats::default();
        let mut printable = true;
        let mut entries = Vec::with_capacity(values.len());
        for v in values {
            if v.value.len() < MIN_VALUE_LEN {
                stats.too_short += 1;
                continue;
            }
            let forms = encodings(&v.value);
            if forms.iter().any(|(_, f)| f.len() > MAX_FORM_LEN) {
                stats.too_long += 1;
                continue;
            }
            stats.values += 1;
            printable &= forms.iter().all(|(_, f)| f.iter().all(|&b| is_printable(b)));
            let forms = forms
                .into_iter()
                .map(|(encoding, bytes)| {
                    let (offsets, token) = choose_windows(&bytes);
                    Form {
                        encoding,
                        len: bytes.len() as u32,
                        digest: confirm_digest(&salt, &bytes),
                        windows: offsets.map(|o| (o as u32, keys.hash(&bytes[o..o + WINDOW]))),
                        token,
                    }
                })
                .collect();
            entries.push(Entry {
                secret: v.secret_ref(),
                key: v.key.clone(),
                label: label.to_owned(),
                forms,
            });
        }
        (FingerprintSet { salt, entries, printable }, stats)
    }

    /// The window-hash keys of this set.
    pub fn keys(&self) -> WindowKeys {
        WindowKeys::from_salt(&self.salt)
    }

    /// Writes the versioned file format.
    pub fn to_json(&self) -> Vec<u8> {
        let file = FileRepr {
            format: FORMAT.to_owned(),
            params: Params::current(),
            salt: hex(&self.salt),
            printable: self.printable,
            values: self
                .entries
                .iter()
                .map(|e| ValueRepr {
                    secret: e.secret.clone(),
                    key: e.key.clone(),
                    label: e.label.clone(),
                    forms: e
                        .forms
                        .iter()
                        .map(|f| FormRepr {
                            encoding: f.encoding.as_str().to_owned(),
                            length: f.len,
                            digest: hex(&f.digest),
                            windows: f.windows.to_vec(),
                            token: f.token,
                        })
                        .collect(),
                })
                .collect(),
        };
        let mut out = serde_json::to_vec(&file).expect("serialising plain data cannot fail");
        out.push(b'\n');
        out
    }

    /// Reads and validates a fingerprint file. Every inconsistency is an error.
    pub fn from_json(bytes: &[u8]) -> Result<FingerprintSet> {
        Self::from_json_threads(bytes, 1)
    }

    /// As [`FingerprintSet::from_json`], the values parsed on up to `threads` threads: a
    /// file of 10,000 values is part of every scan's start. A file in the layout
    /// [`FingerprintSet::to_json`] writes is read by a parser for that layout alone (see
    /// `fast`); any other (reformatted by hand, or damaged) by serde_json, which also
    /// words every error.
    pub fn from_json_threads(bytes: &[u8], threads: usize) -> Result<FingerprintSet> {
        if let Some(set) = fast::read(bytes, threads, fast::STEP) {
            return Ok(set);
        }
        Self::from_json_serde(bytes, threads)
    }

    /// Reads the fingerprint file at `path` as [`FingerprintSet::from_json_threads`] reads
    /// its bytes. A regular file in the writer's layout is read by position, a part per
    /// thread, never whole (see `fast`); any other file is read whole first.
    pub fn from_file(path: &Path, threads: usize) -> Result<FingerprintSet> {
        let mut file = std::fs::File::open(path)?;
        let meta = file.metadata()?;
        if !meta.is_file() {
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes)?;
            return Self::from_json_threads(&bytes, threads);
        }
        let len = usize::try_from(meta.len())?;
        if let Some(set) = fast::read(&fast::OpenFile { file: &file, len }, threads, fast::STEP) {
            return Ok(set);
        }
        // Not in the writer's layout: the general reader, on the whole file (reads by
        // position left the file's offset at its start).
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Self::from_json_serde(&bytes, threads)
    }

    /// What each reader makes of `bytes` (on one thread): the fast reader's set, if it
    /// reads one (a step of `step` bytes at a time), and the general reader's result. For
    /// the fuzz target, which checks they agree.
    pub(crate) fn both_readers(
        bytes: &[u8],
        step: usize,
    ) -> (Option<FingerprintSet>, Result<FingerprintSet>) {
        (fast::read(bytes, 1, step), Self::from_json_serde(bytes, 1))
    }

    /// The general reader: the values are first only delimited (serde_json checks their
    /// syntax), then parsed on up to `threads` threads.
    fn from_json_serde(bytes: &[u8], threads: usize) -> Result<FingerprintSet> {
        let file: FileIn<'_> = serde_json::from_slice(bytes)
            .map_err(|e| anyhow::anyhow!("not a kresidue fingerprint file: {e}"))?;
        let salt = file.check()?;
        // Below this many values a thread costs more than it saves.
        const PER_THREAD: usize = 1000;
        let threads = threads.clamp(1, file.values.len().div_ceil(PER_THREAD).max(1));
        let per = file.values.len().div_ceil(threads).max(1);
        let parts: Vec<Result<Vec<Entry>>> = std::thread::scope(|s| {
            let handles: Vec<_> = file
                .values
                .chunks(per)
                .enumerate()
                .map(|(k, part)| s.spawn(move || parse_values(part, k * per)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("parser panicked"))))
                .collect()
        });
        let mut entries = Vec::with_capacity(file.values.len());
        for part in parts {
            entries.append(&mut part?);
        }
        Ok(FingerprintSet { salt, entries, printable: file.printable })
    }
}

impl FileIn<'_> {
    /// Checks the format and parameters; the salt.
    fn check(&self) -> Result<[u8; 32]> {
        if self.format != FORMAT {
            bail!(
                "unsupported fingerprint format {:?} (this kresidue reads {FORMAT:?})",
                self.format
            );
        }
        if self.params != Params::current() {
            bail!("unsupported fingerprint parameters {:?}", self.params);
        }
        unhex32(&self.salt).context("bad salt")
    }
}

/// Parses and checks `values` (the first is value `first` of its file).
fn parse_values(values: &[&serde_json::value::RawValue], first: usize) -> Result<Vec<Entry>> {
    let mut entries = Vec::with_capacity(values.len());
    for (i, raw) in values.iter().enumerate() {
        let i = first + i;
        let v: ValueIn<'_> = serde_json::from_str(raw.get())
            .map_err(|e| anyhow::anyhow!("not a kresidue fingerprint file: value {i}: {e}"))?;
        entries.push(v.check(i)?);
    }
    Ok(entries)
}

impl ValueIn<'_> {
    /// Checks value `i` of its file and makes it an entry.
    fn check(self, i: usize) -> Result<Entry> {
        let mut forms = Vec::with_capacity(self.forms.len());
        for f in self.forms {
            let encoding = Encoding::parse(&f.encoding)
                .with_context(|| format!("value {i}: unknown encoding {:?}", f.encoding))?;
            let digest = unhex32(&f.digest).with_context(|| format!("value {i}: bad digest"))?;
            forms.push(Form::checked(i, encoding, f.length, digest, f.windows, f.token)?);
        }
        Ok(Entry {
            secret: self.secret.into_owned(),
            key: self.key.into_owned(),
            label: self.label.into_owned(),
            forms,
        })
    }
}

impl Form {
    /// A form of value `i` as read, its encoding and digest decoded: checked that its
    /// length is in range and that each window sits at its residue, inside the form, with
    /// a hash of [`HASH_BITS`]. Both readers check every form here.
    fn checked(
        i: usize,
        encoding: Encoding,
        length: u32,
        digest: [u8; 32],
        windows: [(u32, u32); STRIDE],
        token: bool,
    ) -> Result<Form> {
        let len = length as usize;
        if !(MIN_FORM_LEN..=MAX_FORM_LEN).contains(&len) {
            bail!("value {i}: form length {len} out of range");
        }
        for (r, &(o, h)) in windows.iter().enumerate() {
            if o as usize % STRIDE != r || o as usize + WINDOW > len || h >> HASH_BITS != 0 {
                bail!("value {i}: invalid window {r}");
            }
        }
        Ok(Form { encoding, len: length, digest, windows, token })
    }
}

/// As written.
#[derive(Serialize)]
struct FileRepr {
    format: String,
    params: Params,
    salt: String,
    printable: bool,
    values: Vec<ValueRepr>,
}

/// A fingerprint file as read: strings borrowed from the input unless they hold escapes.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileIn<'a> {
    #[serde(borrow)]
    format: Cow<'a, str>,
    params: Params,
    #[serde(borrow)]
    salt: Cow<'a, str>,
    /// Absent from files written before it existed: nothing is skipped for them.
    #[serde(default)]
    printable: bool,
    #[serde(borrow)]
    values: Vec<&'a serde_json::value::RawValue>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ValueIn<'a> {
    #[serde(borrow)]
    secret: Cow<'a, str>,
    #[serde(borrow)]
    key: Cow<'a, str>,
    #[serde(borrow)]
    label: Cow<'a, str>,
    #[serde(borrow)]
    forms: Vec<FormIn<'a>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FormIn<'a> {
    #[serde(borrow)]
    encoding: Cow<'a, str>,
    length: u32,
    #[serde(borrow)]
    digest: Cow<'a, str>,
    windows: [(u32, u32); STRIDE],
    /// Absent from files written before it existed, and when false.
    #[serde(default)]
    token: bool,
}

#[derive(Serialize, Deserialize, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
struct Params {
    window: usize,
    stride: usize,
    hash_bits: u32,
    hash: String,
}

impl Params {
    fn current() -> Params {
        Params { window: WINDOW, stride: STRIDE, hash_bits: HASH_BITS, hash: HASH_ID.to_owned() }
    }
}

#[derive(Serialize)]
struct ValueRepr {
    secret: String,
    key: String,
    label: String,
    forms: Vec<FormRepr>,
}

#[derive(Serialize)]
struct FormRepr {
    encoding: String,
    length: u32,
    digest: String,
    windows: Vec<(u32, u32)>,
    /// Written only when true.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    token: bool,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex32(s: &str) -> Result<[u8; 32]> {
    let s: &[u8; 64] = s.as_bytes().try_into().context("expected 64 hex digits")?;
    unhex64(s).context("expected 64 hex digits")
}

/// The 32 bytes that 64 hex digits (either case) spell; `None` for any other byte.
#[inline]
fn unhex64(s: &[u8; 64]) -> Option<[u8; 32]> {
    // The value of each hex digit, 0xff for any other byte.
    const NIBBLE: [u8; 256] = {
        let mut t = [0xff; 256];
        let mut c = 0;
        while c < 256 {
            t[c] = match c as u8 {
                b @ b'0'..=b'9' => b - b'0',
                b @ b'a'..=b'f' => b - b'a' + 10,
                b @ b'A'..=b'F' => b - b'A' + 10,
                _ => 0xff,
            };
            c += 1;
        }
        t
    };
    let mut out = [0u8; 32];
    let mut bad = 0;
    for (o, pair) in out.iter_mut().zip(s.chunks_exact(2)) {
        let (hi, lo) = (NIBBLE[usize::from(pair[0])], NIBBLE[usize::from(pair[1])]);
        bad |= hi | lo;
        *o = hi << 4 | lo;
    }
    (bad & 0xf0 == 0).then_some(out)
}

/// 32 random bytes from the kernel.
pub fn random_salt() -> Result<[u8; 32]> {
    let mut salt = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut salt))
        .context("cannot read /dev/urandom for a salt")?;
    Ok(salt)
}

/// The encoded forms of a value that are searched for: raw, base64, and Go-style
/// JSON-escaped where that differs from raw (and the value is UTF-8).
pub fn encodings(value: &[u8]) -> Vec<(Encoding, Vec<u8>)> {
    let mut out = vec![
        (Encoding::Raw, value.to_vec()),
        (Encoding::Base64, base64::engine::general_purpose::STANDARD.encode(value).into_bytes()),
    ];
    if let Ok(s) = std::str::from_utf8(value) {
        let esc = json_escape(s);
        if esc.as_bytes() != value {
            out.push((Encoding::JsonEscaped, esc.into_bytes()));
        }
    }
    out
}

/// The body of a JSON string as Go's `encoding/json` writes it since Go 1.22 (the encoder
/// behind OCI specs, containerd's metadata and docker/CRI JSON logs): HTML-safe escaping
/// of `<>&` and U+2028/U+2029 included, `\b` and `\f` as short escapes.
pub fn json_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            // Go 1.22+ writes these two as short escapes too.
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32))
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Picks one window offset per residue mod [`STRIDE`], as far from the others as the
/// form allows, preferring varied bytes and the middle of the form (so shared prefixes
/// like a PEM header do not make every key a candidate at every header); and whether every
/// window is made of [`is_token`] bytes. Windows of token bytes only are taken where every
/// residue has one and they overlap no more than the free choice's: the scanner then
/// tests them only where its sample is token bytes too, most of a node's text not.
fn choose_windows(form: &[u8]) -> ([usize; STRIDE], bool) {
    debug_assert!(form.len() >= MIN_FORM_LEN);
    let free = spread_windows(form, |_| true, [0, 1, 2, 3]);
    let all_token =
        |w: &[usize; STRIDE]| w.iter().all(|&o| form[o..o + WINDOW].iter().all(|&b| is_token(b)));
    if all_token(&free.0) {
        return (free.0, true);
    }
    let allowed = |o: usize| form[o..o + WINDOW].iter().all(|&b| is_token(b));
    let mut token = spread_windows(form, allowed, [0, 1, 2, 3]);
    // Placed in another order, the residues may overlap less around the bytes avoided:
    // tried for forms short enough that trying is cheap (and that crowd their windows).
    if token.1 > free.1 && form.len() <= SHORT_FORM {
        for order in RESIDUE_ORDERS {
            let other = spread_windows(form, allowed, order);
            if other.1 < token.1 {
                token = other;
            }
        }
    }
    match token {
        (w, overlap) if all_token(&w) && overlap <= free.1 => (w, true),
        _ => (free.0, false),
    }
}

/// Forms up to this long have their token windows placed in every order of residues.
const SHORT_FORM: usize = 128;

/// The orders in which residues may be placed.
const RESIDUE_ORDERS: [[usize; STRIDE]; 24] = [
    [0, 1, 2, 3],
    [0, 1, 3, 2],
    [0, 2, 1, 3],
    [0, 2, 3, 1],
    [0, 3, 1, 2],
    [0, 3, 2, 1],
    [1, 0, 2, 3],
    [1, 0, 3, 2],
    [1, 2, 0, 3],
    [1, 2, 3, 0],
    [1, 3, 0, 2],
    [1, 3, 2, 0],
    [2, 0, 1, 3],
    [2, 0, 3, 1],
    [2, 1, 0, 3],
    [2, 1, 3, 0],
    [2, 3, 0, 1],
    [2, 3, 1, 0],
    [3, 0, 1, 2],
    [3, 0, 2, 1],
    [3, 1, 0, 2],
    [3, 1, 2, 0],
    [3, 2, 0, 1],
    [3, 2, 1, 0],
];

/// The choice of [`choose_windows`] among the offsets `allowed` says may hold a window
/// (any offset of a residue when it allows none), the residues placed in `order`; and the
/// bytes the windows overlap.
fn spread_windows(
    form: &[u8],
    allowed: impl Fn(usize) -> bool,
    order: [usize; STRIDE],
) -> ([usize; STRIDE], i64) {
    let last = form.len() - WINDOW;
    let centre = last as i64 / 2;
    let mut chosen: [usize; STRIDE] = [0; STRIDE];
    let mut taken: Vec<usize> = Vec::with_capacity(STRIDE);
    let mut overlaps = 0;
    // Spread the residues over the form: place them in the order that keeps the span
    // compact, then pick for each the best-scoring offset.
    for r in order {
        let overlap = |o: usize| -> i64 {
            taken.iter().map(|&t| (WINDOW as i64 - (o as i64 - t as i64).abs()).max(0)).sum()
        };
        let any = (r..=last).step_by(STRIDE).any(&allowed);
        let best = (r..=last)
            .step_by(STRIDE)
            .filter(|&o| !any || allowed(o))
            .max_by_key(|&o| {
                let distinct = distinct_bytes(&form[o..o + WINDOW]) as i64;
                let off_centre = (o as i64 - centre).abs();
                // Overlap dominates, then variety, then closeness to the centre;
                // ties go to the lowest offset (max_by_key keeps the last max, so negate).
                (-overlap(o) * 1024 + distinct * 64 - off_centre.min(63), -(o as i64))
            })
            .expect("every residue has an offset when len >= WINDOW + STRIDE - 1");
        overlaps += overlap(best);
        chosen[r] = best;
        taken.push(best);
    }
    (chosen, overlaps)
}

/// The bytes of tokens, keys and base64 (`A-Z a-z 0-9 + / = _ -`): the windows of most
/// values are made of them, and most of a node's text (words between spaces, quotes,
/// colons and braces) is not.
pub const fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'_' | b'-')
}

fn distinct_bytes(w: &[u8]) -> u32 {
    let mut seen = [false; 256];
    w.iter().filter(|&&b| !std::mem::replace(&mut seen[b as usize], true)).count() as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sv(key: &str, value: &[u8]) -> SecretValue {
        SecretValue {
            namespace: "ns".into(),
            name: "s".into(),
            key: key.into(),
            value: value.to_vec(),
        }
    }

    #[test]
    fn json_escape_is_go_style() {
        assert_eq!(
            json_escape("a\"b\\c\nd<e>&\u{1}\u{2028}é"),
            "a\\\"b\\\\c\\nd\\u003ce\\u003e\\u0026\\u0001\\u2028é"
        );
    }

    #[test]
    fn windows_cover_every_residue_and_are_disjoint_when_room() {
        let form: Vec<u8> = (0..64u8).map(|i| b'a' + i % 26).collect();
        let (w, token) = choose_windows(&form);
        assert!(token);
        for (r, &o) in w.iter().enumerate() {
            assert_eq!(o % STRIDE, r);
            assert!(o + WINDOW <= form.len());
        }
        let mut s = w.to_vec();
        s.sort();
        assert!(s.windows(2).all(|p| p[1] - p[0] >= WINDOW), "{s:?}");
        let short = choose_windows(&form[..MIN_FORM_LEN]);
        assert_eq!(short, ([0, 1, 2, 3], true));
    }

    /// Windows of token bytes only are taken when they overlap no more than a free
    /// choice would: around a space in a long form (still disjoint), not in a short form
    /// where avoiding it would crowd them, never where a residue has none.
    #[test]
    fn token_windows_when_they_cost_no_overlap() {
        let token = |w: &[usize; STRIDE], form: &[u8]| {
            w.iter().all(|&o| form[o..o + WINDOW].iter().all(|&b| is_token(b)))
        };
        // 64 bytes with a space at 40: four disjoint windows of token bytes still fit.
        let mut long: Vec<u8> = (0..64u8).map(|i| b'a' + i % 26).collect();
        long[40] = b' ';
        let (w, flag) = choose_windows(&long);
        assert!(flag && token(&w, &long), "{w:?}");
        let mut s = w.to_vec();
        s.sort();
        assert!(s.windows(2).all(|p| p[1] - p[0] >= WINDOW), "{s:?}");
        // 20 bytes with a `!` at 10: no window avoids it.
        let mut short: Vec<u8> = (0..20u8).map(|i| b'a' + i).collect();
        short[10] = b'!';
        let (w, flag) = choose_windows(&short);
        assert!(!flag, "{w:?}");
        assert_eq!(w, spread_windows(&short, |_| true, [0, 1, 2, 3]).0, "the free choice");
        // A PEM body line break every 64 bytes: its windows are between them.
        let pem: Vec<u8> =
            (0..200u8).map(|i| if i % 65 == 64 { b'\n' } else { b'A' + i % 26 }).collect();
        let (w, flag) = choose_windows(&pem);
        assert!(flag && token(&w, &pem), "{w:?}");
    }

    #[test]
    fn build_skips_short_and_round_trips() {
        let vals = [sv("short", b"0123456789abcde"), sv("ok", b"0123456789abcdef<&>")];
        let (set, stats) = FingerprintSet::build(&vals, "revoked", [7; 32]);
        assert_eq!(stats, BuildStats { values: 1, too_short: 1, too_long: 0 });
        assert_eq!(set.entries[0].forms.len(), 3);
        let json = set.to_json();
        assert!(json.starts_with(b"{\"format\":\"kresidue/fingerprints/v1\""));
        assert_eq!(FingerprintSet::from_json(&json).unwrap(), set);
    }

    /// 2,500 values under `salt`, and their file (~1.1 MB: three threads' parts).
    fn many_values(salt: [u8; 32]) -> (FingerprintSet, Vec<u8>) {
        let vals: Vec<SecretValue> = (0..2500)
            .map(|i| sv(&format!("s{i}"), format!("value-{i:06}-abcdefghijklmnop").as_bytes()))
            .collect();
        let (set, _) = FingerprintSet::build(&vals, "current", salt);
        let json = set.to_json();
        (set, json)
    }

    /// Both readers, on any number of threads, read what `to_json` writes to the same set;
    /// an error names the value by its place in the whole file, not in its thread's part.
    #[test]
    fn readers_agree_on_any_threads_and_number_errors_in_the_file() {
        let (set, json) = many_values([3; 32]);
        // Big enough for the fast reader to cut into three parts, each beginning a value.
        assert!(json.len() > 2 * (400 << 10), "{}", json.len());
        for threads in [1, 2, 3, 8, 64] {
            // Steps shorter than a value (~180 bytes here), than a boundary, and longer.
            for step in [1, 13, 200, 4096, fast::STEP] {
                let read = fast::read(json.as_slice(), threads, step);
                assert_eq!(read.as_ref(), Some(&set), "{threads} threads, step {step}");
            }
            assert_eq!(FingerprintSet::from_json_serde(&json, threads).unwrap(), set);
            assert_eq!(FingerprintSet::from_json_threads(&json, threads).unwrap(), set);
        }
        let (empty, _) = FingerprintSet::build(&[], "current", [3; 32]);
        assert_eq!(fast::read(empty.to_json().as_slice(), 4, 1), Some(empty));
        let text = String::from_utf8(json).unwrap();
        let at = text.find("\"key\":\"s2400\"").unwrap();
        let bad =
            format!("{}{}", &text[..at], text[at..].replacen("\"length\":", "\"length\":-", 1));
        for threads in [1, 3] {
            let err = FingerprintSet::from_json_threads(bad.as_bytes(), threads).unwrap_err();
            assert!(format!("{err:#}").contains("value 2400:"), "{threads}: {err:#}");
        }
    }

    /// A file is read by position when it is a regular file in the writer's layout, and
    /// whole otherwise (reformatted, or a pipe, which cannot be read by position): the
    /// same set every way, and a damaged file's error is the general reader's.
    #[test]
    fn files_read_by_position_or_whole_give_the_same_set() {
        let (set, json) = many_values([4; 32]);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("values.fp");
        std::fs::write(&file, &json).unwrap();
        for threads in [1, 2, 3] {
            assert_eq!(FingerprintSet::from_file(&file, threads).unwrap(), set, "{threads}");
        }
        let value: serde_json::Value = serde_json::from_slice(&json).unwrap();
        std::fs::write(&file, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
        assert_eq!(FingerprintSet::from_file(&file, 2).unwrap(), set);

        let pipe = dir.path().join("pipe");
        nix::unistd::mkfifo(&pipe, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let writer = {
            let (pipe, json) = (pipe.clone(), json.clone());
            std::thread::spawn(move || std::fs::write(pipe, json).unwrap())
        };
        assert_eq!(FingerprintSet::from_file(&pipe, 2).unwrap(), set);
        writer.join().unwrap();

        let cut = &json[..json.len() / 2];
        std::fs::write(&file, cut).unwrap();
        let got = format!("{:#}", FingerprintSet::from_file(&file, 2).unwrap_err());
        assert_eq!(got, format!("{:#}", FingerprintSet::from_json(cut).unwrap_err()));
        assert!(got.starts_with("not a kresidue fingerprint file"), "{got}");
    }

    /// Files in any other layout (reformatted, fields reordered, escapes in a name) are
    /// left to the general reader, which reads them to the same set.
    #[test]
    fn fast_reader_leaves_other_layouts_to_serde() {
        let vals = [sv("a\"quoted\"", b"0123456789abcdef-1"), sv("b", b"0123456789abcdef-2")];
        let (escaped, _) = FingerprintSet::build(&vals, "current", [5; 32]);
        let (plain, _) = FingerprintSet::build(&vals[1..], "current", [5; 32]);
        let value: serde_json::Value = serde_json::from_slice(&plain.to_json()).unwrap();
        let pretty = serde_json::to_vec_pretty(&value).unwrap();
        let text = String::from_utf8(plain.to_json()).unwrap();
        // The values not last.
        let reordered = text.replacen(",\"printable\":true,\"values\"", ",\"values\"", 1);
        let reordered =
            format!("{},\"printable\":true}}", reordered.trim_end().strip_suffix('}').unwrap());
        let spaced = text.replacen("\"secret\":", "\"secret\": ", 1);
        for (json, set) in [
            (escaped.to_json(), &escaped),
            (pretty, &plain),
            (reordered.into_bytes(), &plain),
            (spaced.into_bytes(), &plain),
        ] {
            assert_eq!(
                fast::read(json.as_slice(), 2, 64),
                None,
                "{}",
                String::from_utf8_lossy(&json)
            );
            assert_eq!(&FingerprintSet::from_json(&json).unwrap(), set);
        }
        let trailing = [plain.to_json(), b" \n\t".to_vec()].concat();
        assert_eq!(fast::read(trailing.as_slice(), 2, 64), Some(plain));
    }

    /// Where an edit is most likely to slip past a reader of the layout: every position
    /// inside a short string (names, encodings) and at either end of one; the first digit
    /// of every number.
    fn tricky_positions(json: &[u8]) -> [Vec<usize>; 2] {
        let (mut strings, mut numbers) = (Vec::new(), Vec::new());
        let mut i = 0;
        while i < json.len() {
            if json[i] == b'"' {
                let Some(n) = json[i + 1..].iter().position(|&b| b == b'"') else { break };
                let end = i + 1 + n;
                if end - i < 24 {
                    strings.extend(i..=end);
                }
                i = end + 1;
            } else {
                if json[i].is_ascii_digit() && !json[i.saturating_sub(1)].is_ascii_digit() {
                    numbers.push(i);
                }
                i += 1;
            }
        }
        [strings, numbers]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
        /// Whatever bytes the fast reader accepts, the general reader reads to the same
        /// set: files with bytes changed, inserted or removed, anywhere or where a reader
        /// of the layout is most easily fooled.
        #[test]
        fn fast_reader_accepts_nothing_serde_reads_otherwise(
            edits in proptest::collection::vec((
                0usize..10_000,
                0u8..3,
                proptest::prop_oneof![
                    proptest::prelude::any::<u8>(),
                    proptest::sample::select(b"{}[],:\"0\\ -\x01\xc3\xa9\xff".to_vec()),
                ],
            ), 1..3),
            place in 0usize..3,
            step in 12usize..700,
        ) {
            let vals: Vec<SecretValue> = (0..2)
                .map(|i| sv(&format!("k{i}"), format!("value-{i}-0123456789abcdef").as_bytes()))
                .collect();
            let (set, _) = FingerprintSet::build(&vals, "current", [9; 32]);
            let mut json = set.to_json();
            for (at, kind, byte) in edits {
                let marks = match place {
                    0 => (0..=json.len()).collect(),
                    p => std::mem::take(&mut tricky_positions(&json)[p - 1]),
                };
                let Some(&at) = marks.get(at % marks.len().max(1)) else { continue };
                match kind {
                    0 if at < json.len() => json[at] = byte,
                    1 => json.insert(at.min(json.len()), byte),
                    _ if at < json.len() => { json.remove(at); }
                    _ => {}
                }
            }
            let (fast, general) = FingerprintSet::both_readers(&json, step);
            if let Some(fast) = fast {
                proptest::prop_assert_eq!(Some(fast), general.ok());
            }
        }
    }

    /// `printable`: true when every form is printable text, false with one binary or
    /// non-ASCII value; a file without the field (written before it) reads as false.
    #[test]
    fn printable_flag() {
        let text = sv("t", b"0123456789abcdef\tline\n");
        let (set, _) = FingerprintSet::build(std::slice::from_ref(&text), "current", [7; 32]);
        assert!(set.printable);
        for odd in [sv("b", b"0123456789abcdef\x00\xff"), sv("u", "0123456789abcdefé".as_bytes())]
        {
            let (set, _) = FingerprintSet::build(&[text.clone(), odd], "current", [7; 32]);
            assert!(!set.printable);
        }
        let json = String::from_utf8(set.to_json()).unwrap();
        assert!(json.contains(",\"printable\":true,"), "{json}");
        let old = json.replace(",\"printable\":true", "");
        assert!(!FingerprintSet::from_json(old.as_bytes()).unwrap().printable);
    }

    #[test]
    fn corrupt_files_are_rejected() {
        let (set, _) = FingerprintSet::build(&[sv("k", b"0123456789abcdefgh")], "current", [1; 32]);
        let good = String::from_utf8(set.to_json()).unwrap();
        let windows =
            format!("{:?}", set.entries[0].forms[0].windows).replace('(', "[").replace(')', "]");
        let windows = windows.replace(' ', "");
        assert!(good.contains(&windows), "{good} vs {windows}");
        for bad in [
            good[..good.len() / 2].to_owned(),
            good.replace(FORMAT, "kresidue/fingerprints/v9"),
            good.replace("\"window\":12", "\"window\":8"),
            good.replace(&windows, "[[0,1],[1,1],[2,1]]"),
            good.replace(&windows, "[[1,1],[1,1],[2,1],[3,1]]"),
            good.replacen("\"length\":18", "\"length\":3", 1),
            "{}".to_owned(),
        ] {
            assert!(FingerprintSet::from_json(bad.as_bytes()).is_err(), "{bad}");
        }
    }
}
