//! The compiled matcher: finds fingerprinted values in byte buffers.
//!
//! One [`Matcher`] is built per scan and shared by every worker thread (it is read-only);
//! each worker streams its files through [`Matcher::find`] with its own hit vector. The
//! matcher knows nothing of files, paths or sites: it maps `(buffer, absolute offset)` to
//! [`Hit`]s.
//!
//! Per fingerprint set (one salt) the compiled form is
//! * a bit filter over the top bits of the 28-bit window hashes, sized to stay in the CPU
//!   cache (a probe costs one load and a bit test), and
//! * a bucketed table of `(hash, form, window offset)` consulted only on a filter hit.
//!
//! The hot loop samples the 12 bytes at every absolute offset `≡ 0 (mod 4)`, hashes them
//! with the set's key, probes the filter, and on a hit confirms each candidate span with
//! the salted SHA-256 digest (see `fingerprint` for why this finds every occurrence).

use crate::fingerprint::{Entry, FingerprintSet, Form, WindowKeys, HASH_BITS, STRIDE, WINDOW};
use sha2::{Digest, Sha256};

/// A confirmed occurrence of a fingerprinted form in a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Hit {
    /// Absolute offset of the first byte of the occurrence.
    pub offset: u64,
    /// Index of the fingerprint set.
    pub set: u32,
    /// Index of the entry in that set.
    pub entry: u32,
    /// Index of the form in that entry.
    pub form: u32,
    /// Length of the occurrence.
    pub len: u32,
}

/// Bits of the hash used to pick a bucket of the candidate table.
const BUCKET_BITS: u32 = 16;

struct Candidate {
    hash: u32,
    offset: u32,
    entry: u32,
    form: u32,
}

struct CompiledSet {
    keys: WindowKeys,
    salt: [u8; 32],
    /// Bit filter indexed by the top `filter_bits` bits of the hash.
    filter: Vec<u64>,
    filter_shift: u32,
    /// `starts[b]..starts[b + 1]` indexes `candidates` for bucket `b`.
    starts: Vec<u32>,
    candidates: Vec<Candidate>,
    entries: Vec<Entry>,
}

/// All fingerprint sets of a scan, compiled for searching.
pub struct Matcher {
    sets: Vec<CompiledSet>,
    max_len: usize,
}

impl Matcher {
    /// Compiles the given sets.
    pub fn new(sets: Vec<FingerprintSet>) -> Matcher {
        let mut max_len = 0;
        let sets = sets
            .into_iter()
            .map(|set| {
                let keys = set.keys();
                let mut candidates = Vec::new();
                for (ei, e) in set.entries.iter().enumerate() {
                    for (fi, f) in e.forms.iter().enumerate() {
                        max_len = max_len.max(f.len as usize);
                        for &(offset, hash) in &f.windows {
                            candidates.push(Candidate {
                                hash,
                                offset,
                                entry: ei as u32,
                                form: fi as u32,
                            });
                        }
                    }
                }
                candidates.sort_by_key(|c| c.hash);
                // ~64 filter bits per window keeps the filter ~1.5% full; the filter stays
                // between 1 KiB and 1 MiB.
                let filter_bits =
                    (candidates.len() * 64).next_power_of_two().trailing_zeros().clamp(13, 23);
                let mut filter = vec![0u64; 1 << (filter_bits - 6)];
                let filter_shift = HASH_BITS - filter_bits;
                for c in &candidates {
                    let i = (c.hash >> filter_shift) as usize;
                    filter[i >> 6] |= 1 << (i & 63);
                }
                let mut starts = vec![0u32; (1 << BUCKET_BITS) + 1];
                for c in &candidates {
                    starts[(c.hash >> (HASH_BITS - BUCKET_BITS)) as usize + 1] += 1;
                }
                for b in 0..(1 << BUCKET_BITS) {
                    starts[b + 1] += starts[b];
                }
                CompiledSet {
                    keys,
                    salt: set.salt,
                    filter,
                    filter_shift,
                    starts,
                    candidates,
                    entries: set.entries,
                }
            })
            .collect();
        Matcher { sets, max_len }
    }

    /// True when there is nothing to look for.
    pub fn is_empty(&self) -> bool {
        self.sets.iter().all(|s| s.entries.is_empty())
    }

    /// The longest form searched for: consecutive buffers of a stream must overlap by
    /// `max_len() - 1` bytes so that no occurrence straddling a boundary is missed.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// The entry and form a hit refers to.
    pub fn describe(&self, hit: &Hit) -> (&Entry, &Form) {
        let e = &self.sets[hit.set as usize].entries[hit.entry as usize];
        (e, &e.forms[hit.form as usize])
    }

    /// Finds every occurrence in `buf` (which starts at absolute offset `base`) that ends
    /// after `buf[..report_after]`, i.e. that a previous overlapping buffer did not already
    /// contain. Appends to `hits`.
    pub fn find(&self, buf: &[u8], base: u64, report_after: usize, hits: &mut Vec<Hit>) {
        if buf.len() < WINDOW {
            return;
        }
        let first = ((STRIDE as u64 - base % STRIDE as u64) % STRIDE as u64) as usize;
        for (si, set) in self.sets.iter().enumerate() {
            set.find(si as u32, buf, base, first, report_after, hits);
        }
    }
}

impl CompiledSet {
    #[inline]
    fn find(
        &self,
        si: u32,
        buf: &[u8],
        base: u64,
        first: usize,
        report_after: usize,
        hits: &mut Vec<Hit>,
    ) {
        if self.candidates.is_empty() {
            return;
        }
        let end = buf.len() - WINDOW;
        let mut i = first;
        // Four samples per iteration, one filter check: hits are rare, so the loop stays
        // branch-predictable.
        while i + 3 * STRIDE <= end {
            let block = &buf[i..i + 3 * STRIDE + WINDOW];
            let mut any = 0u64;
            let mut hs = [0u32; 4];
            for (k, h) in hs.iter_mut().enumerate() {
                let o = k * STRIDE;
                let a = u64::from_le_bytes(block[o..o + 8].try_into().expect("8 bytes"));
                let b = u32::from_le_bytes(block[o + 8..o + 12].try_into().expect("4 bytes"));
                *h = self.keys.hash_parts(a, b);
                any |= self.probe(*h);
            }
            if any != 0 {
                for (k, &h) in hs.iter().enumerate() {
                    if self.probe(h) != 0 {
                        self.confirm(si, buf, base, i + k * STRIDE, h, report_after, hits);
                    }
                }
            }
            i += 4 * STRIDE;
        }
        while i <= end {
            let h = self.keys.hash(&buf[i..i + WINDOW]);
            if self.probe(h) != 0 {
                self.confirm(si, buf, base, i, h, report_after, hits);
            }
            i += STRIDE;
        }
    }

    #[inline(always)]
    fn probe(&self, h: u32) -> u64 {
        let i = (h >> self.filter_shift) as usize;
        (self.filter[i >> 6] >> (i & 63)) & 1
    }

    #[cold]
    #[allow(clippy::too_many_arguments)]
    fn confirm(
        &self,
        si: u32,
        buf: &[u8],
        base: u64,
        pos: usize,
        h: u32,
        report_after: usize,
        hits: &mut Vec<Hit>,
    ) {
        let b = (h >> (HASH_BITS - BUCKET_BITS)) as usize;
        let range = self.starts[b] as usize..self.starts[b + 1] as usize;
        for c in self.candidates[range].iter().filter(|c| c.hash == h) {
            let form = &self.entries[c.entry as usize].forms[c.form as usize];
            let Some(start) = pos.checked_sub(c.offset as usize) else { continue };
            let stop = start + form.len as usize;
            if stop > buf.len() || stop <= report_after {
                continue;
            }
            let digest: [u8; 32] = Sha256::new()
                .chain_update(self.salt)
                .chain_update(&buf[start..stop])
                .finalize()
                .into();
            if digest == form.digest {
                hits.push(Hit {
                    offset: base + start as u64,
                    set: si,
                    entry: c.entry,
                    form: c.form,
                    len: form.len,
                });
            }
        }
    }
}

/// Convenience for tests and benches: all hits of `buf` searched as one whole buffer.
pub fn find_all(m: &Matcher, buf: &[u8]) -> Vec<Hit> {
    let mut hits = Vec::new();
    m.find(buf, 0, 0, &mut hits);
    hits.sort();
    hits
}

/// Searches `data` the way a file is streamed: buffers of `chunk` new bytes, each carrying
/// the last `max_len - 1` bytes of the one before.
pub fn find_chunked(m: &Matcher, data: &[u8], chunk: usize) -> Vec<Hit> {
    let overlap = m.max_len().saturating_sub(1);
    let mut hits = Vec::new();
    let mut pos = 0usize; // absolute start of the new bytes
    while pos < data.len() {
        let carry = overlap.min(pos);
        let end = (pos + chunk).min(data.len());
        m.find(&data[pos - carry..end], (pos - carry) as u64, carry, &mut hits);
        pos = end;
    }
    hits.sort();
    hits
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::Encoding;
    use crate::fingerprint;
    use crate::kubectl::SecretValue;
    use proptest::prelude::*;

    fn set_of(values: &[Vec<u8>], salt: u8) -> FingerprintSet {
        let vals: Vec<SecretValue> = values
            .iter()
            .enumerate()
            .map(|(i, v)| SecretValue {
                namespace: "ns".into(),
                name: format!("s{i}"),
                key: "k".into(),
                value: v.clone(),
            })
            .collect();
        FingerprintSet::build(&vals, "current", [salt; 32]).0
    }

    /// Every (offset, entry, encoding) at which a form of a value occurs, by brute force.
    fn naive(values: &[Vec<u8>], data: &[u8]) -> Vec<(u64, u32, Encoding)> {
        let mut out = Vec::new();
        for (vi, v) in values.iter().enumerate() {
            for (enc, form) in fingerprint::encodings(v) {
                for start in 0..data.len().saturating_sub(form.len() - 1) {
                    if data[start..].starts_with(&form) {
                        out.push((start as u64, vi as u32, enc));
                    }
                }
            }
        }
        out.sort();
        out
    }

    fn summarise(m: &Matcher, hits: &[Hit]) -> Vec<(u64, u32, Encoding)> {
        let mut v: Vec<_> =
            hits.iter().map(|h| (h.offset, h.entry, m.describe(h).1.encoding)).collect();
        v.sort();
        v
    }

    fn value_strategy() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(prop::sample::select(b"abcXYZ0189-_.\"&<\n\\ ".to_vec()), 16..90)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn finds_exactly_what_naive_search_finds(
            values in prop::collection::vec(value_strategy(), 1..4),
            filler in prop::collection::vec(any::<u8>(), 0..700),
            plants in prop::collection::vec((0usize..3, 0usize..3, 0usize..700), 0..6),
            chunk in 1usize..300,
        ) {
            let mut data = filler;
            for (vi, enc, at) in plants {
                let v = &values[vi % values.len()];
                let forms = fingerprint::encodings(v);
                let form = &forms[enc % forms.len()].1;
                let at = at.min(data.len());
                data.splice(at..at, form.iter().copied());
            }
            let m = Matcher::new(vec![set_of(&values, 3)]);
            let expect = naive(&values, &data);
            prop_assert_eq!(summarise(&m, &find_all(&m, &data)), expect.clone());
            prop_assert_eq!(summarise(&m, &find_chunked(&m, &data, chunk + WINDOW)), expect);
        }
    }

    #[test]
    fn value_straddling_every_boundary_of_every_chunk_size() {
        let v = b"straddle-me-0123456789-abcdefghij".to_vec();
        let m = Matcher::new(vec![set_of(std::slice::from_ref(&v), 9)]);
        for chunk in [13usize, 64, 100, 4096] {
            for k in 1..4usize {
                for shift in [1, v.len() / 2, v.len() - 1] {
                    let at = (k * chunk).saturating_sub(shift);
                    let mut data = vec![b'.'; 4 * chunk + v.len()];
                    data[at..at + v.len()].copy_from_slice(&v);
                    let hits = find_chunked(&m, &data, chunk);
                    assert_eq!(hits.len(), 1, "chunk {chunk} k {k} shift {shift}");
                    assert_eq!(hits[0].offset, at as u64);
                }
            }
        }
    }

    #[test]
    fn two_sets_with_different_salts_both_match() {
        let a = b"first-value-aaaaaaaaaaaa".to_vec();
        let b = b"second-value-bbbbbbbbbbb".to_vec();
        let m = Matcher::new(vec![
            set_of(std::slice::from_ref(&a), 1),
            set_of(std::slice::from_ref(&b), 2),
        ]);
        let data = [&b"xx"[..], &a, b" ", &b].concat();
        let hits = find_all(&m, &data);
        assert_eq!(hits.iter().map(|h| (h.set, h.offset)).collect::<Vec<_>>(), [(0, 2), (1, 27)]);
    }
}
