//! The scan state (`--state DIR`): what a scan read of each file, kept so that the next
//! scan need not read it again while it is unchanged.
//!
//! Per file: its identity as `fstat` said it when it was read (device, inode, size,
//! modification and change times in nanoseconds), its site, and, when it gave findings,
//! what a finding of it is without the file's bytes: its id, offset, length, count, what
//! matched (the Secret's name and key and label, as the fingerprint file holds them, or the
//! rule's id), the material of its severity, and where in the file the bytes its preview
//! shows are (read again, at most 4 bytes, to show it). Never a value, a piece of one, a
//! hash of one or a name: a file is known by a digest of its path, as a finding's id is.
//!
//! A file is taken from the state, not read, when everything its findings depend on is as
//! it was: the same identity and site, the same fingerprint sets, rules, binary and
//! options (one digest of them all, [`Digest`]), and a change time older than the scan
//! that read it by more than a timestamp's granularity (git's "racily clean" rule: a
//! write just before the read could share the read's timestamp and go unseen). Its
//! identity is asked again (a file that gave no finding through an `O_PATH` descriptor,
//! not opened for reading; one with findings opened, to show their previews), and its
//! findings are made again from the state and judged afresh (liveness, severity,
//! baseline), so the report is the one a full scan makes. What is read, and why, is
//! `docs/ARCHITECTURE.md`'s.
//!
//! The file: a header (magic and version, the digest, the scan's start), fixed-size
//! records sorted by their path's digest, then the findings of the files that have any as
//! JSON, then a SHA-256 of all before it. A state that does not read back whole (damaged,
//! cut, another version, another digest) is not used: the scan reads everything.

use crate::finding::{Finding, MatchInfo, Material, Preview, SiteId};
use crate::text::withhold;
use sha2::{Digest as _, Sha256};

/// The state file's first bytes: its format, and its version.
const MAGIC: &[u8; 8] = b"KRSTATE2";

/// Files a state holds at most (89 bytes each); a node with more keeps the first.
pub const MAX_FILES: usize = 1 << 22;

/// Findings kept of one file at most; a file with more is read again.
const MAX_KEPT: usize = 64;

/// A state file larger than this is not read.
pub const MAX_BYTES: u64 = 1 << 30;

/// How much older than the scan that read it a file's last change must be for its
/// identity to be trusted (coarse timestamps: ext4's follow the kernel's tick, some
/// filesystems keep seconds or two).
const GRANULARITY_NS: i64 = 2_000_000_000;

/// A digest of everything but the files that a file's findings depend on.
pub type Digest = [u8; 32];

/// What [`digest`] is made of.
pub struct Inputs<'a> {
    /// The fingerprint sets: each its salt, its entries' names and forms.
    pub sets: &'a [crate::fingerprint::FingerprintSet],
    /// The rules that run (none with `--no-rules`).
    pub rules: &'a crate::rules::Rules,
    /// `--max-file-size`.
    pub max_file_size: Option<u64>,
}

/// The digest of `inputs` and of this binary (its version and commit, its sites).
pub fn digest(inputs: &Inputs<'_>) -> Digest {
    let mut h = Sha256::new();
    h.update(MAGIC);
    h.update(env!("CARGO_PKG_VERSION"));
    h.update(env!("KRESIDUE_COMMIT"));
    for site in SiteId::ALL {
        h.update(site.as_str());
        h.update([0]);
    }
    // Each rule as the binary defines it (a build with edited rules is another).
    for spec in inputs.rules.specs() {
        h.update(format!("{spec:?}"));
        h.update([0]);
    }
    h.update(inputs.max_file_size.unwrap_or(u64::MAX).to_le_bytes());
    for set in inputs.sets {
        h.update(set.salt);
        for e in &set.entries {
            for text in [&e.secret, &e.key, &e.label] {
                h.update(text.as_bytes());
                h.update([0]);
            }
            // Each form by all the matcher acts on, as the fingerprint file holds it.
            for f in &e.forms {
                h.update(f.encoding.as_str());
                h.update(f.len.to_le_bytes());
                h.update(f.digest);
                for (at, hash) in f.windows {
                    h.update(at.to_le_bytes());
                    h.update(hash.to_le_bytes());
                }
                h.update([u8::from(f.token)]);
            }
        }
        h.update([u8::from(set.printable)]);
    }
    h.finalize().into()
}

/// A file's identity, as `fstat` says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ident {
    /// Its device and inode.
    pub dev: u64,
    /// See `dev`.
    pub ino: u64,
    /// Its size.
    pub size: u64,
    /// Last modification, (seconds, nanoseconds).
    pub mtime: (i64, i64),
    /// Last status change, (seconds, nanoseconds).
    pub ctime: (i64, i64),
}

impl Ident {
    /// Of `m`.
    pub fn of(m: &crate::sys::image::Meta) -> Ident {
        Ident { dev: m.dev, ino: m.ino, size: m.len, mtime: m.mtime, ctime: m.ctime }
    }

    /// Nanoseconds since the epoch of its last modification or change, the later.
    fn changed_ns(&self) -> i64 {
        let ns = |(s, n): (i64, i64)| s.saturating_mul(1_000_000_000).saturating_add(n);
        ns(self.mtime).max(ns(self.ctime))
    }
}

/// A finding of a file as the state keeps it: all but what its owner and place give.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct KeptFinding {
    id: String,
    offset: u64,
    length: u64,
    count: u64,
    #[serde(rename = "match")]
    matched: MatchInfo,
    material: Material,
    /// Where the bytes its preview shows are, and the length of what they begin.
    previewed: (u64, u32),
}

/// What the state keeps of a file with findings.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct KeptFile {
    findings: Vec<KeptFinding>,
}

impl KeptFile {
    /// What a file's `findings` are kept as; `None` when a finding cannot be made again
    /// without the file (its preview's bytes are not the file's, it says more than where
    /// and what matched: a token's claims, a datastore's record, a note). `Some(None)`:
    /// nothing to keep but that it gave nothing.
    pub fn of(findings: &[Finding]) -> Option<Option<KeptFile>> {
        if findings.is_empty() {
            return Some(None);
        }
        if findings.len() > MAX_KEPT {
            return None;
        }
        let kept = findings.iter().map(|f| {
            let plain = f.token.is_none()
                && f.record.is_none()
                && f.secrets_at_rest.is_none()
                && f.package.is_none()
                && f.within == crate::finding::Within::Content;
            Some(KeptFinding {
                id: f.id.clone(),
                offset: f.offset,
                length: f.length,
                count: f.count,
                matched: f.matched.clone(),
                material: f.material,
                previewed: f.previewed.filter(|_| plain)?,
            })
        });
        let findings = kept.collect::<Option<Vec<_>>>()?;
        Some(Some(KeptFile { findings }))
    }
}

/// What the state says of an unchanged file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hit<'a> {
    /// The bytes the scan that read it read.
    pub read: u64,
    /// When the scan that last read it started (nanoseconds since the epoch).
    pub read_ns: i64,
    /// Its findings, when it had any.
    kept: Option<&'a KeptFile>,
}

impl Hit<'_> {
    /// Whether it gave findings.
    pub fn has_findings(&self) -> bool {
        self.kept.is_some_and(|k| !k.findings.is_empty())
    }

    /// The findings kept, as findings of the file `f` (its bytes read again only where a
    /// preview shows them), each made by `make` from its id, offset, length, what matched,
    /// its material and its preview.
    pub fn findings(
        &self,
        f: &dyn crate::sys::Bytes,
        make: &mut dyn FnMut(Made) -> Finding,
    ) -> std::io::Result<Vec<Finding>> {
        let Some(kept) = self.kept else { return Ok(Vec::new()) };
        let mut out = Vec::with_capacity(kept.findings.len());
        for k in &kept.findings {
            let (at, len) = k.previewed;
            let mut shown = vec![0; (len as usize / 4).min(4)];
            f.read_at(at, &mut shown)?;
            // The preview shows the first quarter of `len` bytes: the rest is not read.
            // (16 bytes stand for any longer match: `redact` shows a quarter, at most 4.)
            let mut whole = shown.clone();
            whole.resize((len as usize).min(16), 0);
            let made = Made {
                id: k.id.clone(),
                offset: k.offset,
                length: k.length,
                matched: k.matched.clone(),
                material: k.material,
                preview: Preview::redact(&whole),
            };
            let mut finding = make(made);
            finding.count = k.count;
            finding.previewed = Some(k.previewed);
            out.push(finding);
        }
        Ok(out)
    }
}

/// A finding kept, to be made a finding of its file again.
pub struct Made {
    /// Its id.
    pub id: String,
    /// Its offset.
    pub offset: u64,
    /// Its length.
    pub length: u64,
    /// What matched.
    pub matched: MatchInfo,
    /// Its material.
    pub material: Material,
    /// Its preview, shown again from the file's bytes.
    pub preview: Preview,
}

/// What a scan keeps of one file it read or took from the state.
#[derive(Clone, Debug)]
pub struct Record {
    /// The digest of its path ([`key`]).
    pub key: [u8; 16],
    /// Its identity when read.
    pub ident: Ident,
    /// Its site.
    pub site: SiteId,
    /// The bytes read of it.
    pub read: u64,
    /// When the scan that last read it started: `None` for this scan (it was read now).
    pub read_ns: Option<i64>,
    /// Its findings and errors; `None` when it had none.
    pub kept: Option<KeptFile>,
}

/// The key of the file at `rel` (relative to the root) shown as `shown` (its node path's
/// parts: an atomic-writer volume's file by the name the pod sees, which its ids are made
/// of, and which depends on its neighbours): a digest of all of their bytes, as they are
/// (no name formatted: a path holds no NUL, which parts them), but for each name that
/// holds material found in a name (`text::withhold`), taken as the report shows it,
/// withheld. So no value in a name is hashed (the walk matches a file's names before it
/// is read), and a file whose path is shown otherwise than at the last scan (a name found
/// elsewhere since, or gone) has another key: it is read again, and its findings' ids,
/// made of the path as shown, are a full scan's.
pub fn key(rel: &std::path::Path, shown: &[&std::path::Path]) -> [u8; 16] {
    use std::os::unix::ffi::OsStrExt;
    let mut d = Sha256::new().chain_update(b"kresidue-state-path\0");
    for (i, part) in std::iter::once(rel).chain(shown.iter().copied()).enumerate() {
        if i > 0 {
            d.update([0]);
        }
        let bytes = part.as_os_str().as_bytes();
        if !withhold::any() {
            d.update(bytes);
            continue;
        }
        for (j, name) in bytes.split(|&b| b == b'/').enumerate() {
            if j > 0 {
                d.update(b"/");
            }
            match withhold::is_withheld(name) {
                true => d.update(withhold::WITHHELD.as_bytes()),
                false => d.update(name),
            }
        }
    }
    d.finalize()[..16].try_into().expect("16 bytes")
}

/// A state read back: what the last scan kept.
#[derive(Debug, Default)]
pub struct State {
    /// The digest it was made under.
    pub digest: Digest,
    /// When the scan that made it started, nanoseconds since the epoch.
    pub started_ns: i64,
    /// Records by key, sorted.
    records: Vec<Entry>,
    /// The kept files the records name.
    kept: Vec<KeptFile>,
    /// (now, the most a file may go unread): see [`State::read_again_after`].
    max_age: Option<(i64, i64)>,
}

/// A record as stored.
#[derive(Clone, Copy, Debug)]
struct Entry {
    key: [u8; 16],
    ident: Ident,
    site: u8,
    read: u64,
    read_ns: i64,
    /// Index in `kept`, `u32::MAX` for none.
    kept: u32,
}

/// Why a kept file is not used.
#[derive(Debug, PartialEq, Eq)]
pub enum Stale {
    /// Not in the state.
    New,
    /// Changed since (identity or site), or changed too close to the last scan to tell.
    Changed,
    /// Unchanged, but not read for longer than `--state-max-age` allows.
    Due,
    /// Unchanged, but its findings are made only by reading it (a datastore's file, a
    /// record read whole that gave findings).
    Read,
}

impl State {
    /// What the state says of the file `key`, now of identity `ident` and site `site`:
    /// its kept findings and errors (none when it had none), or why it must be read.
    pub fn lookup(&self, key: &[u8; 16], ident: &Ident, site: SiteId) -> Result<Hit<'_>, Stale> {
        let i = self.find(key).ok_or(Stale::New)?;
        let e = &self.records[i];
        let racy = e.ident.changed_ns() >= self.started_ns.saturating_sub(GRANULARITY_NS);
        if e.ident != *ident || e.site != site as u8 || racy {
            return Err(Stale::Changed);
        }
        if let Some((now, max)) = self.max_age {
            // Due after between half the most and all of it, as the key falls: the files
            // one scan read come due over half the period, not all in one later scan.
            let spread = i128::from(u16::from_le_bytes([key[14], key[15]]));
            let after = max / 2 + ((i128::from(max / 2) * spread) >> 16) as i64;
            if now.saturating_sub(e.read_ns) > after {
                return Err(Stale::Due);
            }
        }
        Ok(Hit { read: e.read, read_ns: e.read_ns, kept: self.kept.get(e.kept as usize) })
    }

    /// Has a file that is unchanged read again once its last read is older, at `now_ns`,
    /// than `max_age` (`--state-max-age`; each file after between half of it and all of
    /// it): a change no file time shows (a write through a shared mapping into a page
    /// already dirty leaves them as they were) is read within `max_age`.
    pub fn read_again_after(&mut self, now_ns: i64, max_age: std::time::Duration) {
        let max = i64::try_from(max_age.as_nanos()).unwrap_or(i64::MAX);
        self.max_age = Some((now_ns, max));
    }

    /// Whether it holds a record of `key` (whatever its identity).
    pub fn holds(&self, key: &[u8; 16]) -> bool {
        self.find(key).is_some()
    }

    /// Where the record of `key` is. Keys are digests, spread evenly: its place is guessed
    /// from its first bytes and found by widening around the guess, a comparison or two
    /// (keys bunched by a crafted state are only found more slowly).
    fn find(&self, key: &[u8; 16]) -> Option<usize> {
        let n = self.records.len();
        let first = u64::from_be_bytes(key[..8].try_into().expect("8 bytes"));
        let guess = ((u128::from(first) * n as u128) >> 64) as usize;
        // Every key before `lo` is less than `key`; every key from `hi` on, greater.
        let (mut lo, mut step) = (guess, 1);
        while lo > 0 && self.records[lo - 1].key >= *key {
            lo = lo.saturating_sub(step);
            step *= 2;
        }
        let (mut hi, mut step) = (guess.max(lo), 1);
        while hi < n && self.records[hi].key <= *key {
            hi = (hi + step).min(n);
            step *= 2;
        }
        let at = self.records[lo..hi].binary_search_by(|e| e.key.cmp(key)).ok()?;
        Some(lo + at)
    }

    /// Its records, as a scan makes them (to write it again).
    pub fn records(&self) -> Vec<Record> {
        let record = |e: &Entry| Record {
            key: e.key,
            ident: e.ident,
            site: SiteId::ALL[usize::from(e.site)],
            read: e.read,
            read_ns: Some(e.read_ns),
            kept: self.kept.get(e.kept as usize).cloned(),
        };
        self.records.iter().map(record).collect()
    }

    /// How many files it holds.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The state file of `records`, made under `digest` by a scan started at
    /// `started_ns`.
    pub fn encode(digest: &Digest, started_ns: i64, mut records: Vec<Record>) -> Vec<u8> {
        records.sort_by_key(|a| a.key);
        records.dedup_by(|a, b| a.key == b.key);
        records.truncate(MAX_FILES);
        let mut out = Vec::with_capacity(64 + records.len() * 72);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(digest);
        out.extend_from_slice(&started_ns.to_le_bytes());
        out.extend_from_slice(&(records.len() as u64).to_le_bytes());
        let mut kept = Vec::new();
        for r in &records {
            out.extend_from_slice(&r.key);
            let i = &r.ident;
            for n in [i.dev, i.ino, i.size] {
                out.extend_from_slice(&n.to_le_bytes());
            }
            for (s, ns) in [i.mtime, i.ctime] {
                out.extend_from_slice(&s.to_le_bytes());
                out.extend_from_slice(&(ns as u32).to_le_bytes());
            }
            out.push(r.site as u8);
            out.extend_from_slice(&r.read.to_le_bytes());
            out.extend_from_slice(&r.read_ns.unwrap_or(started_ns).to_le_bytes());
            let at = match &r.kept {
                Some(k) => {
                    kept.push(k);
                    kept.len() as u32 - 1
                }
                None => u32::MAX,
            };
            out.extend_from_slice(&at.to_le_bytes());
        }
        let json = serde_json::to_vec(&kept).expect("kept findings serialize");
        out.extend_from_slice(&(json.len() as u64).to_le_bytes());
        out.extend_from_slice(&json);
        let sum = Sha256::digest(&out);
        out.extend_from_slice(&sum);
        out
    }

    /// The state in `bytes`; `Err` says why it is not used (in a note).
    pub fn decode(bytes: &[u8]) -> Result<State, String> {
        let body_len = bytes.len().checked_sub(32).ok_or("cut short")?;
        let (body, sum) = bytes.split_at(body_len);
        if Sha256::digest(body).as_slice() != sum {
            return Err(match body.starts_with(MAGIC) {
                true => "damaged (its checksum does not match)".to_owned(),
                false => "not a kresidue state of this version".to_owned(),
            });
        }
        let mut r = Cursor(body);
        let magic = r.take(8).ok_or("cut short")?;
        if magic != MAGIC {
            return Err("not a kresidue state of this version".to_owned());
        }
        let mut digest = [0; 32];
        digest.copy_from_slice(r.take(32).ok_or("cut short")?);
        let started_ns = r.i64().ok_or("cut short")?;
        let n = r.u64().ok_or("cut short")?;
        if n > MAX_FILES as u64 {
            return Err(format!("more than {MAX_FILES} files"));
        }
        // Never more than the bytes left can hold (89 bytes a record).
        let mut records = Vec::with_capacity((n as usize).min(r.0.len() / 89));
        for _ in 0..n {
            let mut key = [0; 16];
            key.copy_from_slice(r.take(16).ok_or("cut short")?);
            let (dev, ino, size) = (r.u64(), r.u64(), r.u64());
            let mtime = (r.i64(), r.u32());
            let ctime = (r.i64(), r.u32());
            let (site, read, read_ns, kept) = (r.u8(), r.u64(), r.i64(), r.u32());
            let ident = Ident {
                dev: dev.ok_or("cut short")?,
                ino: ino.ok_or("cut short")?,
                size: size.ok_or("cut short")?,
                mtime: (mtime.0.ok_or("cut short")?, i64::from(mtime.1.ok_or("cut short")?)),
                ctime: (ctime.0.ok_or("cut short")?, i64::from(ctime.1.ok_or("cut short")?)),
            };
            let site = site.ok_or("cut short")?;
            if usize::from(site) >= SiteId::ALL.len() {
                return Err("a record names no site".to_owned());
            }
            let (read, kept) = (read.ok_or("cut short")?, kept.ok_or("cut short")?);
            let read_ns = read_ns.ok_or("cut short")?;
            records.push(Entry { key, ident, site, read, read_ns, kept });
        }
        if !records.windows(2).all(|w| w[0].key < w[1].key) {
            return Err("its records are not in order".to_owned());
        }
        let len = r.u64().ok_or("cut short")?;
        let json = r.take(usize::try_from(len).map_err(|_| "cut short")?).ok_or("cut short")?;
        if !r.is_empty() {
            return Err("trailing bytes".to_owned());
        }
        let kept: Vec<KeptFile> =
            serde_json::from_slice(json).map_err(|_| "its findings do not parse".to_owned())?;
        if records.iter().any(|e| e.kept != u32::MAX && e.kept as usize >= kept.len()) {
            return Err("a record names findings that are not there".to_owned());
        }
        Ok(State { digest, started_ns, records, kept, max_age: None })
    }
}

/// Reads a state's bytes in order (little-endian numbers).
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn u32(&mut self) -> Option<u32> {
        self.take(4).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
    }

    fn u64(&mut self) -> Option<u64> {
        self.take(8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }

    fn i64(&mut self) -> Option<i64> {
        self.u64().map(|n| n as i64)
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state reads back as written; a flipped byte, a cut, another magic are refused.
    #[test]
    fn a_state_reads_back_and_damage_is_refused() {
        let ident = Ident { dev: 1, ino: 2, size: 3, mtime: (4, 5), ctime: (6, 7) };
        let kept = KeptFile { findings: vec![] };
        let records = vec![
            Record { key: [9; 16], ident, site: SiteId::Other, read: 3, read_ns: None, kept: None },
            Record {
                key: [1; 16],
                ident,
                site: SiteId::ALL[0],
                read: 3,
                read_ns: None,
                kept: Some(kept.clone()),
            },
        ];
        let bytes = State::encode(&[7; 32], 1_000_000_000_000, records);
        let s = State::decode(&bytes).unwrap();
        assert_eq!((s.digest, s.started_ns, s.len()), ([7; 32], 1_000_000_000_000, 2));
        assert_eq!(
            s.lookup(&[1; 16], &ident, SiteId::ALL[0]),
            Ok(Hit { read: 3, read_ns: 1_000_000_000_000, kept: Some(&kept) })
        );
        assert_eq!(
            s.lookup(&[9; 16], &ident, SiteId::Other),
            Ok(Hit { read: 3, read_ns: 1_000_000_000_000, kept: None })
        );
        assert_eq!(s.lookup(&[9; 16], &ident, SiteId::ALL[0]), Err(Stale::Changed));
        assert_eq!(s.lookup(&[2; 16], &ident, SiteId::Other), Err(Stale::New));
        let newer = Ident { ctime: (6, 8), ..ident };
        assert_eq!(s.lookup(&[9; 16], &newer, SiteId::Other), Err(Stale::Changed));
        for at in [0, 8, 50, bytes.len() / 2, bytes.len() - 1] {
            let mut bad = bytes.clone();
            bad[at] ^= 1;
            assert!(State::decode(&bad).is_err(), "byte {at}");
        }
        for len in [0, 31, 40, bytes.len() - 1] {
            assert!(State::decode(&bytes[..len]).is_err(), "cut at {len}");
        }
        // Damaged past its checksum (the checksum made again): an error, never a panic,
        // never an allocation the bytes do not back.
        let mut rng = crate::prng::Prng::new(52);
        for _ in 0..3000 {
            let mut bad = bytes[..bytes.len() - 32].to_vec();
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(bad.len());
                bad[at] = rng.below(256) as u8;
            }
            if rng.below(4) == 0 {
                bad.truncate(rng.below(bad.len()));
            }
            let sum = Sha256::digest(&bad);
            bad.extend_from_slice(&sum);
            let _ = State::decode(&bad);
        }
        // Changed just before the scan that read it: not trusted.
        let racy = State::encode(
            &[7; 32],
            6_500_000_000,
            vec![Record {
                key: [9; 16],
                ident,
                site: SiteId::Other,
                read: 3,
                read_ns: None,
                kept: None,
            }],
        );
        let s = State::decode(&racy).unwrap();
        assert_eq!(s.lookup(&[9; 16], &ident, SiteId::Other), Err(Stale::Changed));
    }

    /// With a most age, a file unchanged but unread for longer is read again: each after
    /// between half the most age and all of it, as its key falls; a record taken from the
    /// state keeps when it was read.
    #[test]
    fn files_unread_for_longer_than_the_most_age_are_read_again() {
        let ident = Ident { dev: 1, ino: 2, size: 3, mtime: (4, 5), ctime: (6, 7) };
        let (read_at, hour) = (1_000_000_000_000_i64, 3_600_000_000_000_i64);
        let keys: Vec<[u8; 16]> = (0..=255u8).map(|b| [b; 16]).collect();
        let record =
            |key| Record { key, ident, site: SiteId::Other, read: 3, read_ns: None, kept: None };
        let bytes = State::encode(&[7; 32], read_at, keys.iter().map(|&k| record(k)).collect());
        let due = |after_ns: i64| {
            let mut s = State::decode(&bytes).unwrap();
            s.read_again_after(read_at + after_ns, std::time::Duration::from_secs(3600));
            keys.iter().filter(|k| s.lookup(k, &ident, SiteId::Other) == Err(Stale::Due)).count()
        };
        assert_eq!(due(hour / 2), 0);
        let some = due(hour * 3 / 4);
        assert!(some > 64 && some < 192, "{some} of 256 due at 3/4 of the most age");
        assert_eq!(due(hour + 1), 256);
        // Without a most age, none is ever due.
        let s = State::decode(&bytes).unwrap();
        assert!(keys.iter().all(|k| s.lookup(k, &ident, SiteId::Other).is_ok()));
        // A record taken again keeps its time; one read now takes the new scan's start.
        let again = State::encode(&[7; 32], read_at + hour, s.records());
        let s = State::decode(&again).unwrap();
        assert_eq!(s.lookup(&keys[0], &ident, SiteId::Other).unwrap().read_ns, read_at);
    }

    /// Every record is found by its key and no other key finds one, whether the keys are
    /// spread as digests are or bunched as a crafted state may bunch them.
    #[test]
    fn records_are_found_wherever_their_keys_fall() {
        let ident = Ident { dev: 1, ino: 2, size: 3, mtime: (4, 5), ctime: (6, 7) };
        let mut rng = crate::prng::Prng::new(520);
        let spread = |rng: &mut crate::prng::Prng| -> [u8; 16] {
            rng.bytes(16).try_into().expect("16 bytes")
        };
        let bunched = |rng: &mut crate::prng::Prng| -> [u8; 16] {
            let mut k = [0x80; 16];
            k[15] = rng.below(256) as u8;
            k[14] = rng.below(3) as u8;
            k
        };
        let edges = |rng: &mut crate::prng::Prng| -> [u8; 16] {
            let mut k = [[0; 16], [0xff; 16]][rng.below(2)];
            k[15] = rng.below(256) as u8;
            k
        };
        let kinds: [fn(&mut crate::prng::Prng) -> [u8; 16]; 3] = [spread, bunched, edges];
        for make in kinds {
            for n in [0, 1, 2, 3, 17, 500] {
                let keys: std::collections::BTreeSet<[u8; 16]> =
                    (0..n).map(|_| make(&mut rng)).collect();
                let records = keys.iter().map(|&key| Record {
                    key,
                    ident,
                    site: SiteId::Other,
                    read: 1,
                    read_ns: None,
                    kept: None,
                });
                let bytes = State::encode(&[0; 32], 1_000_000_000_000, records.collect());
                let s = State::decode(&bytes).unwrap();
                for key in &keys {
                    assert!(s.lookup(key, &ident, SiteId::Other).is_ok(), "{key:?} of {n}");
                }
                for _ in 0..200 {
                    let other = make(&mut rng);
                    let found = s.lookup(&other, &ident, SiteId::Other).is_ok();
                    assert_eq!(found, keys.contains(&other), "{other:?} of {n}");
                }
            }
        }
    }
}
