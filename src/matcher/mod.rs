//! The compiled matcher: finds fingerprinted values in byte buffers.
//!
//! One [`Matcher`] is built per scan and shared by every worker thread (it is read-only);
//! each worker streams its files through [`Matcher::find`] with its own hit vector. The
//! matcher knows nothing of files, paths or sites: it maps `(buffer, absolute offset)` to
//! [`Hit`]s.
//!
//! Per fingerprint set (one salt) the compiled form is
//! * two blocked Bloom filters over the 28-bit window hashes, one of the windows of token
//!   forms ([`Form::token`]: tested only at samples whose 12 bytes are all token bytes,
//!   fewer than one in ten in a node's text, found from byte classes 64 bytes at a time)
//!   and one of the other forms' windows (tested at every sample). Each: a hash picks one 32-bit half of
//!   a 64-bit word and four bits in it. The filter is at most 256 KiB (16 bits per window
//!   up to ~131,000 windows, i.e. ~15,000 values), so it stays in a core's L2 cache next to
//!   the data streaming through;
//! * the windows sorted by hash, and an index of where each hash's windows are (buckets
//!   by the hash's top bits), consulted only when a sample passes the filter.
//!
//! The hot loop takes 64 samples at a time (the 12 bytes at every absolute offset
//! `≡ 0 (mod 4)`), hashes each, tests its four filter bits, and gathers the outcomes into
//! a bit mask without branching. Where the CPU has AVX-512 or AVX2 this runs 16 or 8
//! samples per step (see `simd`: the hash's 128-bit product from 32-bit lane multiplies,
//! the filter halves gathered), about 1.6× the scalar loop's speed; elsewhere one sample
//! at a time. A set whose forms are all token forms samples the whole buffer block by
//! block (a block without a token sample costs its byte classes only); any other set of
//! printable forms samples only runs of printable text, where a run of text shorter than
//! a block (most runs in a binary) tests only the
//! groups of 16 samples it has. Each sample that passes is tested against a small memo of
//! recent false hits, kept across the runs of a buffer (text repeats, and a repeated
//! window that fools the filter would otherwise cost a lookup per copy); the rest have
//! their index bucket prefetched and are looked up one block later, when the bucket has
//! arrived: at 10,000 values the index and the windows are megabytes, and a lookup that
//! waited for memory cost more than the whole filter. A hash found in the index names
//! candidate spans; a span is checked against the form's other three window hashes and
//! only then confirmed with the salted SHA-256 digest (see `fingerprint` for why this
//! finds every occurrence).

use crate::fingerprint::{Entry, FingerprintSet, Form, WindowKeys, HASH_BITS, STRIDE, WINDOW};
use sha2::{Digest, Sha256};
use std::cell::Cell;

mod simd;
use simd::{Kernel, Sampler};

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

/// Filter bits per stored window (at least, up to the size cap below: the filter's size
/// is rounded up to a power of two). With four bits set per window in one 32-bit half-word, a half holds ~7 set bits
/// of 32 and a sample stored nowhere passes all four with probability ~(7/32)^4 ≈ 0.2%
/// (more where a half holds more). On the node benchmark's 10,000 values the fourth bit
/// took the samples looked up in the index from 230,000 to 158,000.
const FILTER_BITS_PER_WINDOW: usize = 16;
/// The filter never exceeds 2^21 bits (256 KiB), half of a core's L2 cache: a filter that
/// spills to L3 costs more per probe than the false hits a larger one saves.
const MAX_FILTER_WORD_BITS: u32 = 15;
/// Nor goes below 2^6 words (512 bytes).
const MIN_FILTER_WORD_BITS: u32 = 6;

#[derive(Clone, Copy)]
struct Candidate {
    hash: u32,
    offset: u32,
    entry: u32,
    form: u32,
}

/// Words of the largest filter; smaller ones use a prefix, so an index masked to this size
/// is always in bounds.
const FILTER_WORDS: usize = 1 << MAX_FILTER_WORD_BITS;

/// A blocked Bloom filter over 28-bit window hashes: the top bits of a hash pick a 64-bit
/// word, bit 5 one of its 32-bit halves, and four bits are set in that half. The hot loop
/// tests all four with one 32-bit load: the SIMD kernels gather 16 or 8 halves at once.
struct Filter {
    words: Box<[u64; FILTER_WORDS]>,
    /// `2^word_bits - 1`: a hash's word is `(h >> WORD_SHIFT) & index_mask`.
    index_mask: usize,
}

/// The word of a hash is picked by the bits above the two 6-bit bit-position groups (and a
/// spare bit), so the bits picking the word never also pick a bit within it.
const WORD_SHIFT: u32 = HASH_BITS - MAX_FILTER_WORD_BITS;

impl Filter {
    /// An empty filter sized for `n` window hashes.
    fn new(n: usize) -> Filter {
        let bits = (n * FILTER_BITS_PER_WINDOW).next_power_of_two().trailing_zeros();
        let word_bits = bits.saturating_sub(6).clamp(MIN_FILTER_WORD_BITS, MAX_FILTER_WORD_BITS);
        let index_mask = (1usize << word_bits) - 1;
        Filter { words: Box::new([0u64; FILTER_WORDS]), index_mask }
    }

    /// Adds `h`.
    fn insert(&mut self, h: u32) {
        self.words[self.word(h)] |= Self::mask(h);
    }

    /// The word of the filter that holds the bits of `h`.
    #[inline(always)]
    fn word(&self, h: u32) -> usize {
        (h >> WORD_SHIFT) as usize & self.index_mask & (FILTER_WORDS - 1)
    }

    /// The four bits of `h`: bit 5 of `h` picks a 32-bit half of the word (so that the
    /// SIMD kernels load 32-bit halves, 16 at a time), bits 0..5 and 6..11 a bit in it each,
    /// and two 5-bit fields of one multiplicative mix of the 13 bits below the word index
    /// the third and fourth (so that a hash whose first two bits were set by other windows
    /// is unlikely to find the others set too).
    #[inline(always)]
    fn mask(h: u32) -> u64 {
        let half = h & 32;
        let mix = (h & 0x1fff).wrapping_mul(0x9E37_79B1);
        let (third, fourth) = (mix >> 27, (mix >> 22) & 31);
        (1u64 << (half | (h & 31)))
            | (1u64 << (half | ((h >> 6) & 31)))
            | (1u64 << (half | third))
            | (1u64 << (half | fourth))
    }

    /// True when `h` may be stored.
    #[inline(always)]
    fn hit(&self, h: u32) -> bool {
        let m = Self::mask(h);
        self.words[self.word(h)] & m == m
    }
}

/// Where the candidates of each window hash are: the candidates sorted by (hash, entry,
/// form, offset) and counted into buckets by their hash's top bits, about one candidate a
/// bucket. A hash's bucket is known from the hash alone, so its bounds can be prefetched
/// before they are needed; beside each bucket's start is its smallest hash, so that a
/// sample that passed the filter by chance is mostly dismissed without reading the
/// candidates (a second cache miss, ~100 ns or more where the candidates are megabytes).
/// Counting builds it in two passes over the candidates (a comparison sort and a hash
/// table of the distinct hashes took most of the start of a scan with 10,000 values).
struct Index {
    /// `slots[b] = [start, first]`: the candidates of bucket `b` are
    /// `start..slots[b + 1][0]`, and the first of them has hash `first` (when any).
    slots: Vec<[u32; 2]>,
    /// `HASH_BITS - log2(buckets)`: a hash's bucket is `h >> shift`.
    shift: u32,
}

impl Index {
    /// The windows of `entries` as candidates, sorted, and their index.
    fn new(entries: &[Entry]) -> (Vec<Candidate>, Index) {
        // Each window of each form, with its entry and form.
        let each = |visit: &mut dyn FnMut(Candidate)| {
            for (ei, e) in entries.iter().enumerate() {
                for (fi, f) in e.forms.iter().enumerate() {
                    for &(offset, hash) in &f.windows {
                        visit(Candidate { hash, offset, entry: ei as u32, form: fi as u32 });
                    }
                }
            }
        };
        let n: usize = entries.iter().map(|e| e.forms.len() * STRIDE).sum();
        let bits = (n.max(1).ilog2() + 1).min(HASH_BITS);
        let shift = HASH_BITS - bits;
        let bucket = |h: u32| (h >> shift) as usize;
        // Counted into the slots' starts; the second half of each slot is the bucket's
        // next free place while filling, then its first hash.
        let mut slots = vec![[0u32; 2]; (1 << bits) + 1];
        each(&mut |c| slots[bucket(c.hash) + 1][0] += 1);
        let mut start = 0;
        for slot in &mut slots {
            start += slot[0];
            *slot = [start, start];
        }
        let mut sorted = vec![Candidate { hash: 0, offset: 0, entry: 0, form: 0 }; n];
        each(&mut |c| {
            let at = &mut slots[bucket(c.hash)][1];
            sorted[*at as usize] = c;
            *at += 1;
        });
        for b in 0..slots.len() - 1 {
            let (lo, hi) = (slots[b][0] as usize, slots[b + 1][0] as usize);
            if hi - lo > 1 {
                sorted[lo..hi].sort_unstable_by_key(|c| (c.hash, c.entry, c.form, c.offset));
            }
        }
        for slot in &mut slots {
            slot[1] = sorted.get(slot[0] as usize).map_or(u32::MAX, |c| c.hash);
        }
        (sorted, Index { slots, shift })
    }

    /// The bucket of hash `h`.
    #[inline(always)]
    fn bucket(&self, h: u32) -> usize {
        (h >> self.shift) as usize
    }

    /// Starts loading the bounds of the bucket of `h`.
    #[inline(always)]
    fn prefetch(&self, h: u32) {
        simd::prefetch(&self.slots[self.bucket(h)]);
    }

    /// The index of the first of `candidates` (those indexed) with hash `h`, if any.
    fn get(&self, h: u32, candidates: &[Candidate]) -> Option<usize> {
        let b = self.bucket(h);
        let [lo, first] = self.slots[b];
        // The bucket's candidates are sorted by hash: none is below its first. An empty
        // bucket's `first` is a later bucket's, above every hash of this one.
        if h < first {
            return None;
        }
        if h == first {
            return Some(lo as usize);
        }
        // A bucket of one candidate holds only `first` (the next slot, whose start bounds
        // this bucket, mostly shares its cache line): its candidates are not read.
        let (lo, hi) = (lo as usize, self.slots[b + 1][0] as usize);
        if hi - lo <= 1 {
            return None;
        }
        candidates[lo..hi].iter().position(|c| c.hash == h).map(|i| lo + i)
    }
}

struct CompiledSet {
    keys: WindowKeys,
    salt: [u8; 32],
    /// The windows of the forms that are not [`Form::token`]: tested at every sample.
    every: Option<Filter>,
    /// The windows of the token forms: tested only at samples made of token bytes.
    token: Option<Filter>,
    /// Sorted by hash.
    candidates: Vec<Candidate>,
    /// Where each window hash's candidates are (see [`Index`]).
    index: Index,
    entries: Vec<Entry>,
    /// Every form is printable text: only runs of printable bytes need searching.
    printable: bool,
    /// The length of the shortest form: a shorter run cannot hold one.
    min_len: usize,
}

/// The size of a [`Matcher`]'s search (see [`Matcher::stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MatcherStats {
    /// Fingerprint sets (files, or the in-memory `--secrets`).
    pub sets: usize,
    /// Values (secret keys).
    pub values: usize,
    /// Encoded forms of the values.
    pub forms: usize,
    /// Fingerprinted windows of the forms.
    pub windows: usize,
    /// Bytes of the prefilters.
    pub filter_bytes: usize,
    /// The sampler the CPU runs: "AVX-512", "AVX2" or "scalar".
    pub kernel: &'static str,
}

/// All fingerprint sets of a scan, compiled for searching.
pub struct Matcher {
    sets: Vec<CompiledSet>,
    max_len: usize,
    kernel: Kernel,
}

impl Matcher {
    /// Compiles the given sets.
    pub fn new(sets: Vec<FingerprintSet>) -> Matcher {
        let max_len = sets
            .iter()
            .flat_map(|s| s.entries.iter().flat_map(|e| e.forms.iter().map(|f| f.len as usize)))
            .max()
            .unwrap_or(0);
        let sets = sets
            .into_iter()
            .map(|set| {
                let min_len = set
                    .entries
                    .iter()
                    .flat_map(|e| e.forms.iter().map(|f| f.len as usize))
                    .min()
                    .unwrap_or(usize::MAX);
                // Built from the entries in place: at 10,000 values every megabyte of
                // intermediate lists cost the start of a scan ~0.6 ms in page faults.
                let filter = |token: bool| {
                    let forms = || {
                        set.entries.iter().flat_map(|e| &e.forms).filter(move |f| f.token == token)
                    };
                    let n = forms().count() * STRIDE;
                    (n > 0).then(|| {
                        let mut filter = Filter::new(n);
                        for f in forms() {
                            for &(_, h) in &f.windows {
                                filter.insert(h);
                            }
                        }
                        filter
                    })
                };
                let (candidates, index) = Index::new(&set.entries);
                CompiledSet {
                    keys: set.keys(),
                    salt: set.salt,
                    every: filter(false),
                    token: filter(true),
                    candidates,
                    index,
                    entries: set.entries,
                    printable: set.printable,
                    min_len,
                }
            })
            .collect();
        Matcher { sets, max_len, kernel: Kernel::detect() }
    }

    /// What is searched for: values, their encoded forms, their windows, and the bytes of
    /// the prefilters (for `-vv`).
    pub fn stats(&self) -> MatcherStats {
        let mut s = MatcherStats {
            sets: self.sets.len(),
            kernel: self.kernel.name(),
            ..MatcherStats::default()
        };
        for set in &self.sets {
            s.values += set.entries.len();
            s.forms += set.entries.iter().map(|e| e.forms.len()).sum::<usize>();
            s.windows += set.candidates.len();
            for f in set.every.iter().chain(&set.token) {
                s.filter_bytes += (f.index_mask + 1) * 8;
            }
        }
        s
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
    #[allow(unsafe_code)]
    pub fn find(&self, buf: &[u8], base: u64, report_after: usize, hits: &mut Vec<Hit>) {
        match self.kernel {
            Kernel::Scalar => self.find_in(simd::Scalar, buf, base, report_after, hits),
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Kernel::detect` picks AVX-512 only when the CPU has it.
            Kernel::Avx512 => unsafe { self.find_avx512(buf, base, report_after, hits) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Kernel::detect` picks AVX2 only when the CPU has it.
            Kernel::Avx2 => unsafe { self.find_avx2(buf, base, report_after, hits) },
        }
    }

    /// [`Matcher::find`] compiled for AVX-512.
    ///
    /// # Safety
    /// The CPU must support AVX-512F and AVX-512BW.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw")]
    #[allow(unsafe_code)]
    unsafe fn find_avx512(&self, buf: &[u8], base: u64, report_after: usize, hits: &mut Vec<Hit>) {
        // SAFETY: the caller's promise.
        let sampler = unsafe { simd::Avx512::new() };
        self.find_in(sampler, buf, base, report_after, hits)
    }

    /// [`Matcher::find`] compiled for AVX2.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    #[allow(unsafe_code)]
    unsafe fn find_avx2(&self, buf: &[u8], base: u64, report_after: usize, hits: &mut Vec<Hit>) {
        // SAFETY: the caller's promise.
        let sampler = unsafe { simd::Avx2::new() };
        self.find_in(sampler, buf, base, report_after, hits)
    }

    #[inline(always)]
    fn find_in<S: Sampler>(
        &self,
        sampler: S,
        buf: &[u8],
        base: u64,
        report_after: usize,
        hits: &mut Vec<Hit>,
    ) {
        if buf.len() < WINDOW {
            return;
        }
        // An occurrence that ends after `report_after` starts after `report_after - max_len`,
        // and so do all its windows: the carried bytes before that are not sampled again.
        let skip = (report_after + 1).saturating_sub(self.max_len);
        // The first sampled position at or after `at`: samples sit at file offsets that are
        // multiples of STRIDE, so that consecutive buffers sample the same positions.
        let aligned = |at: usize| {
            at + ((STRIDE as u64 - (base + at as u64) % STRIDE as u64) % STRIDE as u64) as usize
        };
        let mut scratch = Scratch::take();
        for (si, set) in self.sets.iter().enumerate() {
            let si = si as u32;
            if set.candidates.is_empty() {
                // Nothing to find (a file of no values): not even the runs are worth finding.
                continue;
            }
            // Per set: the memo holds this set's (keyed) hashes.
            scratch.misses.fill(u32::MAX);
            // A set of token forms only is tested at token samples only, which are text:
            // the blocks without one are skipped as they come, with no pass for runs.
            if !set.reads_every_block() {
                // A form of printable text lies within one run of printable bytes: the
                // rest (most of a binary) is not sampled at all.
                printable_runs(sampler, buf, skip, set.min_len, |start, end| {
                    let ctx = Ctx { si, buf: &buf[..end], whole: buf, base, report_after };
                    set.find(sampler, &ctx, aligned(start), &mut scratch, hits);
                });
            } else {
                let ctx = Ctx { si, buf, whole: buf, base, report_after };
                set.find(sampler, &ctx, aligned(skip), &mut scratch, hits);
            }
        }
        scratch.put_back();
    }
}

/// Calls `f(start, end)` for each maximal run of printable bytes (see
/// [`crate::fingerprint::is_printable`]) in `buf[from..]` that is at least `min` bytes long.
/// Bytes are classified 64 at a time; a word holding no run of 15 printable bytes between
/// its unprintable ones (machine code, compressed data) costs a few operations.
#[inline(always)]
fn printable_runs<S: Sampler>(
    sampler: S,
    buf: &[u8],
    from: usize,
    min: usize,
    mut f: impl FnMut(usize, usize),
) {
    // The word test below finds runs of 15 bytes or more inside a word: forms are never
    // shorter.
    const { assert!(WINDOW + STRIDE > 15) }; // the shortest form, WINDOW + STRIDE - 1
    debug_assert!(min >= 15, "runs shorter than 15 bytes inside a word would be missed");
    let mut start = from; // where the current run began
    let mut at = from;
    while let Some(word) = buf.get(at..at + 64) {
        let word: &[u8; 64] = word.try_into().expect("64 bytes");
        let bad = sampler.unprintable(word);
        if bad != 0 {
            let first = at + bad.trailing_zeros() as usize;
            if first - start >= min {
                f(start, first);
            }
            // Runs between the word's first and last unprintable byte: only when one of
            // 15 bytes or more may exist (bit k of `g`: bytes k..=k+14 printable).
            let good = !bad;
            let mut g = good & (good >> 1);
            g &= g >> 2;
            g &= g >> 4;
            g &= g >> 7;
            if g != 0 {
                let mut rest = bad & (bad - 1);
                let mut s = first + 1;
                while rest != 0 {
                    let i = at + rest.trailing_zeros() as usize;
                    if i - s >= min {
                        f(s, i);
                    }
                    s = i + 1;
                    rest &= rest - 1;
                }
            }
            start = at + 64 - bad.leading_zeros() as usize;
        }
        at += 64;
    }
    for (i, &b) in buf.iter().enumerate().skip(at) {
        if !crate::fingerprint::is_printable(b) {
            if i - start >= min {
                f(start, i);
            }
            start = i + 1;
        }
    }
    if buf.len().saturating_sub(start) >= min {
        f(start, buf.len());
    }
}

/// What a confirmation needs to know about the buffer being searched.
struct Ctx<'a> {
    si: u32,
    /// The bytes searched: a run of text, or the whole buffer.
    buf: &'a [u8],
    /// The whole buffer `buf` begins: a run's last block is read from it in place, its
    /// samples past the run masked off, where the buffer holds a block's bytes there.
    whole: &'a [u8],
    base: u64,
    report_after: usize,
}

/// Samples per block of the hot loop: their filter results are gathered into one `u64`.
const BLOCK_SAMPLES: usize = 64;
/// Slots of the memo of false filter hits (1 KiB). On the node benchmark's 10,000 values,
/// 256 slots kept for a whole buffer look up 135,000 samples in the index where 64 kept
/// for one run of text looked up 158,000.
const MISS_MEMO: usize = 256;
/// Bytes a block reads.
const BLOCK_BYTES: usize = (BLOCK_SAMPLES - 1) * STRIDE + WINDOW;

/// What a set's search keeps from one run of text to the next within a buffer: most runs
/// in a binary are short, and a memo and queues made afresh for each cost more than the
/// run's own samples.
struct Scratch {
    /// Recent false filter hits (hashes stored nowhere), direct-mapped: text repeats, and a
    /// repeated window that passes the filter costs one table lookup, not one per copy.
    misses: [u32; MISS_MEMO],
    /// Samples that passed the filter in the block before this one, and in this one: their
    /// index buckets are prefetched when they pass and looked up a block later, by when the
    /// bucket has arrived from memory (the index of 10,000 values is far larger than the
    /// caches).
    ready: Vec<(usize, u32)>,
    passed: Vec<(usize, u32)>,
    /// A copy of a run's last samples when the buffer ends before their block does (its
    /// bytes past them are left from before: their samples are masked off).
    pad: [u8; BLOCK_BYTES],
}

thread_local! {
    /// The queues of this thread's last search, kept for their capacity: a search that
    /// made its own grew them anew, a few allocations for every buffer.
    static QUEUES: Cell<[Vec<(usize, u32)>; 2]> = const { Cell::new([Vec::new(), Vec::new()]) };
}

impl Scratch {
    /// A scratch with this thread's queues.
    fn take() -> Scratch {
        let [ready, passed] = QUEUES.take();
        Scratch { misses: [u32::MAX; MISS_MEMO], ready, passed, pad: [0; BLOCK_BYTES] }
    }

    /// Keeps the queues for this thread's next search.
    fn put_back(self) {
        QUEUES.set([self.ready, self.passed]);
    }
}

impl CompiledSet {
    /// True when the set's pass reads every block of a buffer: its forms are all token
    /// forms (tested at token samples, found block by block), or not all text. Other sets
    /// read only runs of printable text.
    fn reads_every_block(&self) -> bool {
        !(self.printable && self.every.is_some())
    }

    /// Searches `ctx.buf` from sample position `first` (see the module docs).
    #[inline(always)]
    fn find<S: Sampler>(
        &self,
        sampler: S,
        ctx: &Ctx<'_>,
        first: usize,
        scratch: &mut Scratch,
        hits: &mut Vec<Hit>,
    ) {
        let buf = ctx.buf;
        let keys = self.keys;
        let Scratch { misses, ready, passed, pad } = scratch;
        // The queues hold positions of one run: the run before left them empty.
        debug_assert!(ready.is_empty() && passed.is_empty());
        let mut i = first;
        // Blocks of 64 samples fill a bit mask without branching; the (rare) filter hits
        // are then confirmed one by one. The block is a fixed-size array, so the loop has
        // no bounds checks and the loads of neighbouring samples overlap.
        while let Some(block) = buf.get(i..i + BLOCK_BYTES) {
            let block: &[u8; BLOCK_BYTES] = block.try_into().expect("BLOCK_BYTES bytes");
            let mut found = self.sample(sampler, block, u64::MAX);
            while found != 0 {
                let k = found.trailing_zeros() as usize;
                found &= found - 1;
                let pos = i + k * STRIDE;
                let h = keys.hash(&buf[pos..pos + WINDOW]);
                if misses[h as usize % MISS_MEMO] != h {
                    self.index.prefetch(h);
                    passed.push((pos, h));
                }
            }
            self.lookup(ctx, ready, misses, hits);
            std::mem::swap(ready, passed);
            i += BLOCK_SAMPLES * STRIDE;
        }
        // The last samples (fewer than a block; all of a short run): the groups of 16 that
        // hold them, tested where they are in the whole buffer (or on a copy where it ends
        // first), with the samples that would reach past the run masked off.
        if let Some(rest) = buf.get(i..).filter(|r| r.len() >= WINDOW) {
            let n = (rest.len() - WINDOW) / STRIDE + 1;
            let block: &[u8; BLOCK_BYTES] = match ctx.whole.get(i..i + BLOCK_BYTES) {
                Some(block) => block.try_into().expect("BLOCK_BYTES bytes"),
                None => {
                    pad[..rest.len()].copy_from_slice(rest);
                    pad
                }
            };
            let mut found = self.sample(sampler, block, u64::MAX >> (64 - n));
            while found != 0 {
                let pos = i + found.trailing_zeros() as usize * STRIDE;
                found &= found - 1;
                let h = keys.hash(&buf[pos..pos + WINDOW]);
                if misses[h as usize % MISS_MEMO] != h {
                    ready.push((pos, h));
                }
            }
        }
        self.lookup(ctx, ready, misses, hits);
    }

    /// Bit `k` set when sample `k` of `block`, one of `lanes`, passes its filter: every
    /// sample is tested against the windows of forms that are not token forms, and those
    /// whose 12 bytes are all token bytes against the token forms' windows too (in most of
    /// a node's text, a few samples in ten).
    #[inline(always)]
    fn sample<S: Sampler>(&self, sampler: S, block: &[u8; BLOCK_BYTES], lanes: u64) -> u64 {
        let mut found = 0;
        if let Some(every) = &self.every {
            found |= sampler.block(block, &self.keys, every, lanes);
        }
        if let Some(token) = &self.token {
            let lanes = lanes & sampler.token_samples(block);
            if lanes != 0 {
                found |= sampler.block(block, &self.keys, token, lanes);
            }
        }
        found
    }

    /// Looks up the samples in `pending`, remembering the false filter hits in `misses`.
    fn lookup(
        &self,
        ctx: &Ctx<'_>,
        pending: &mut Vec<(usize, u32)>,
        misses: &mut [u32; MISS_MEMO],
        hits: &mut Vec<Hit>,
    ) {
        for (pos, h) in pending.drain(..) {
            if !self.confirm(ctx, pos, h, hits) {
                misses[h as usize % MISS_MEMO] = h;
            }
        }
    }

    /// Confirms the candidates whose window hash is `h` at `pos`; false when no window
    /// has that hash (a false filter hit).
    #[cold]
    #[inline(never)]
    fn confirm(&self, ctx: &Ctx<'_>, pos: usize, h: u32, hits: &mut Vec<Hit>) -> bool {
        let Some(first) = self.index.get(h, &self.candidates) else { return false };
        for c in self.candidates[first..].iter().take_while(|c| c.hash == h) {
            let form = &self.entries[c.entry as usize].forms[c.form as usize];
            let Some(start) = pos.checked_sub(c.offset as usize) else { continue };
            let stop = start + form.len as usize;
            if stop > ctx.buf.len() || stop <= ctx.report_after {
                continue;
            }
            // One window hash matches by chance at ~n / 2^28 of the samples; checking the
            // form's other three windows (a few ns) spares nearly all of those a SHA-256 of
            // the whole form (microseconds for a key file).
            let span = &ctx.buf[start..stop];
            if !form
                .windows
                .iter()
                .all(|&(o, wh)| self.keys.hash(&span[o as usize..][..WINDOW]) == wh)
            {
                continue;
            }
            let digest: [u8; 32] = Sha256::new()
                .chain_update(self.salt)
                .chain_update(&ctx.buf[start..stop])
                .finalize()
                .into();
            if digest == form.digest {
                hits.push(Hit {
                    offset: ctx.base + start as u64,
                    set: ctx.si,
                    entry: c.entry,
                    form: c.form,
                    len: form.len,
                });
            }
        }
        true
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
    find_streamed(m, data, chunk, m.max_len().saturating_sub(1))
}

/// As [`find_chunked`], with each buffer carrying `overlap` (at least `max_len - 1`) bytes
/// of the one before, as the scanner's do when the rules need a longer overlap.
pub fn find_streamed(m: &Matcher, data: &[u8], chunk: usize, overlap: usize) -> Vec<Hit> {
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
#[allow(unsafe_code)] // to make the SIMD samplers, on CPUs that run them
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

    /// Values of text with and without token bytes (their forms token forms or not, by
    /// chance), and of token bytes only (every form a token form).
    fn value_strategy() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            prop::collection::vec(prop::sample::select(b"abcXYZ0189-_.\"&<\n\\ ".to_vec()), 16..90),
            prop::collection::vec(prop::sample::select(b"aZ09+/=_-".to_vec()), 16..90),
        ]
    }

    proptest! {
        /// A sample is a token sample exactly when its 12 bytes all are token bytes, for
        /// every kernel's classification.
        #[test]
        fn token_samples_are_exact(
            block in prop::collection::vec(prop_oneof![
                16 => prop::sample::select(b"aZ09+/=_-".to_vec()),
                2 => prop::sample::select(b"@[`{:.,*!\"\\ \n\x00\x7f\x80\xaf\xff".to_vec()),
                1 => any::<u8>(),
            ], BLOCK_BYTES),
        ) {
            let block: &[u8; BLOCK_BYTES] = block.as_slice().try_into().expect("block");
            let want = (0..BLOCK_SAMPLES).fold(0u64, |m, k| {
                let token = block[k * STRIDE..k * STRIDE + WINDOW].iter().all(|&b| fingerprint::is_token(b));
                m | u64::from(token) << k
            });
            for kernel in Kernel::available() {
                prop_assert_eq!(kernel.token_samples(block), want, "{:?}", kernel);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn finds_exactly_what_naive_search_finds(
            values in prop::collection::vec(value_strategy(), 1..4),
            filler in prop::collection::vec(any::<u8>(), 0..700),
            plants in prop::collection::vec((0usize..3, 0usize..3, 0usize..700), 0..6),
            chunk in 1usize..300,
            extra in 0usize..200,
        ) {
            let mut data = filler;
            for (vi, enc, at) in plants {
                let v = &values[vi % values.len()];
                let forms = fingerprint::encodings(v);
                let form = &forms[enc % forms.len()].1;
                let at = at.min(data.len());
                data.splice(at..at, form.iter().copied());
            }
            let expect = naive(&values, &data);
            // As written now, and as a file written before forms were marked token forms
            // (every window then tested at every sample).
            let mut untagged = set_of(&values, 3);
            for f in untagged.entries.iter_mut().flat_map(|e| e.forms.iter_mut()) {
                f.token = false;
            }
            for (kernel, set) in Kernel::available().into_iter().flat_map(|k| [(k, set_of(&values, 3)), (k, untagged.clone())]) {
                let mut m = Matcher::new(vec![set]);
                m.kernel = kernel;
                prop_assert_eq!(summarise(&m, &find_all(&m, &data)), expect.clone());
                prop_assert_eq!(summarise(&m, &find_chunked(&m, &data, chunk + WINDOW)), expect.clone());
                let overlap = m.max_len() - 1 + extra;
                prop_assert_eq!(summarise(&m, &find_streamed(&m, &data, chunk + WINDOW, overlap)), expect.clone());
            }
        }
    }

    proptest! {
        /// The runs found 64 bytes at a time are exactly the maximal runs of printable
        /// bytes at least `min` long, found one byte at a time.
        #[test]
        fn printable_runs_are_exact(
            data in prop::collection::vec(
                prop_oneof![4 => 0x20u8..0x7f, 1 => any::<u8>()], 0..700),
            from in 0usize..100,
            min in 15usize..40,
        ) {
            let from = from.min(data.len());
            let mut want = Vec::new();
            let mut start = from;
            for i in from..=data.len() {
                if i == data.len() || !crate::fingerprint::is_printable(data[i]) {
                    if i - start >= min {
                        want.push((start, i));
                    }
                    start = i + 1;
                }
            }
            for kernel in Kernel::available() {
                let mut got = Vec::new();
                match kernel {
                    Kernel::Scalar => printable_runs(simd::Scalar, &data, from, min, |s, e| got.push((s, e))),
                    // SAFETY: `available` lists only kernels the CPU runs.
                    #[cfg(target_arch = "x86_64")]
                    Kernel::Avx2 => printable_runs(unsafe { simd::Avx2::new() }, &data, from, min, |s, e| got.push((s, e))),
                    // SAFETY: as above.
                    #[cfg(target_arch = "x86_64")]
                    Kernel::Avx512 => printable_runs(unsafe { simd::Avx512::new() }, &data, from, min, |s, e| got.push((s, e))),
                }
                prop_assert_eq!(&got, &want, "{:?}", kernel);
            }
        }
    }

    /// Every kernel's byte classification agrees with `is_printable` for every byte value
    /// at every position of a word.
    #[test]
    fn unprintable_mask_classifies_every_byte() {
        for b in 0..=255u8 {
            for i in 0..64 {
                let mut word = [b'a'; 64];
                word[i] = b;
                let want = u64::from(!crate::fingerprint::is_printable(b)) << i;
                for kernel in Kernel::available() {
                    assert_eq!(kernel.unprintable(&word), want, "byte {b:#04x} at {i}, {kernel:?}");
                }
            }
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
