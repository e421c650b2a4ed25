//! Teddy on 512-bit vectors: the rules' key search where the CPU has AVX-512BW.
//!
//! aho-corasick's Teddy (the prefilter's search elsewhere) stops at 256-bit vectors. This
//! is the same algorithm on 64 bytes per step, with the prefilter's tuned buckets: each
//! key belongs to one of 8 buckets; for each of a key's first [`MASK`] bytes, two tables
//! indexed by the byte's low and high nibble give the buckets whose keys may have that
//! byte there. Per 64 positions, four loads (the bytes at `p + j` for `j` in `0..4`), two
//! shuffles per load and three ANDs give each position the buckets all four bytes fit;
//! positions with any bucket are verified against that bucket's keys, in order, and the
//! first position where one matches is returned with the lowest id that matches there
//! (aho-corasick's leftmost-first). Where the CPU also has AVX-512 VBMI, each byte's low
//! six bits are looked up whole instead: one single-register byte permute (`vpermb`) in
//! a 64-entry table per byte position, no nibble split. That is a quarter of the shuffle
//! port's work per step (four one-cycle permutes, where the nibble tables take eight
//! shuffles and the 128-entry two-register permute two cycles each), and on the node
//! benchmark's tree it lets through about as many positions: a byte reads the entry of
//! every byte that shares its low six bits (`s` that of `3`), where the nibble tables let
//! through every pairing of a bucket's nibbles. A test checks that both find exactly what
//! aho-corasick's Teddy finds.
//!
//! The byte tables can also be lent to the matcher's pass over a buffer ([`KeyScan`], the
//! matcher's),
//! which marks the positions whose four bytes pass them; the rules then verify only the
//! marked positions ([`Teddy512::key_at`]).
//!
//! Written here rather than taken from a crate: aho-corasick has no AVX-512 Teddy, and no
//! other maintained crate offers a multi-literal search on 512-bit vectors. On the node
//! benchmark it halves the time of the rules' key search (see `docs/PERFORMANCE.md`).

#![allow(unsafe_code)]

use crate::matcher::{KeyScan, KEY_BYTES};

/// Bytes of a key matched with the nibble (or byte) tables (as many as a [`KeyScan`] lends).
pub(super) const MASK: usize = KEY_BYTES;
/// Buckets: one bit each in a table entry.
const BUCKETS: usize = 8;

/// The compiled search.
#[cfg_attr(test, derive(Clone))]
pub(super) struct Teddy512 {
    /// `lo[j][n]`: buckets with a key whose byte `j` has low nibble `n`.
    lo: [[u8; 16]; MASK],
    /// `hi[j][n]`: buckets with a key whose byte `j` has high nibble `n`.
    hi: [[u8; 16]; MASK],
    /// `bytes[j][c & 0x3f]`: buckets with a key whose byte `j` has the low six bits of
    /// `c`. Where the CPU has AVX-512 VBMI one byte permute looks a byte up in this
    /// 64-entry table: a byte reads the buckets of the four bytes that share its low six
    /// bits (`s`, `3`, 0xb3 and 0xf3), a superset the verification narrows.
    bytes: [[u8; 64]; MASK],
    /// The CPU has AVX-512 VBMI: the byte tables are used.
    vbmi: bool,
    /// Each bucket's keys by ascending id: (id, first four bytes as a little-endian
    /// `u32`, the key).
    buckets: [Vec<(usize, u32, &'static [u8])>; BUCKETS],
    /// A bit per [`head_slot`] of every key's first four bytes: most positions the tables
    /// let through (with the nibble tables one in ~900 bytes of the node benchmark's tree)
    /// are dismissed by one bit.
    heads: [u64; HEAD_SLOTS / 64],
}

/// The 64 bytes of `m`, each position's buckets (callable only from code compiled for
/// AVX-512F).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
fn store(m: std::arch::x86_64::__m512i) -> [u8; 64] {
    let mut bits = [0u8; 64];
    // SAFETY: 64 bytes into a 64-byte array.
    unsafe { std::arch::x86_64::_mm512_storeu_si512(bits.as_mut_ptr().cast(), m) };
    bits
}

/// Bits of [`Teddy512::heads`]: with ~60 keys, a position whose four bytes start no key
/// finds its bit set ~1.5% of the time.
const HEAD_SLOTS: usize = 4096;

/// The bit of [`Teddy512::heads`] for a position whose next four bytes are `head`.
#[inline(always)]
fn head_slot(head: u32) -> usize {
    (head.wrapping_mul(0x9E37_79B1) >> (32 - HEAD_SLOTS.trailing_zeros())) as usize
}

impl Teddy512 {
    /// Compiles `keys` (`(id, key, bucket)`; every key at least [`MASK`] bytes, every
    /// bucket below 8). `None` when the CPU lacks AVX-512F/BW or
    /// `KRESIDUE_KERNEL` asks for another kernel.
    pub(super) fn new(keys: &[(usize, &'static str, usize)]) -> Option<Teddy512> {
        if !Self::runs_here() {
            return None;
        }
        let mut t = Teddy512 {
            lo: [[0; 16]; MASK],
            hi: [[0; 16]; MASK],
            bytes: [[0; 64]; MASK],
            vbmi: Self::has_vbmi(),
            buckets: Default::default(),
            heads: [0; HEAD_SLOTS / 64],
        };
        for &(id, key, b) in keys {
            let key = key.as_bytes();
            if key.len() < MASK || b >= BUCKETS {
                return None;
            }
            for (j, &byte) in key[..MASK].iter().enumerate() {
                t.lo[j][usize::from(byte & 0xf)] |= 1 << b;
                t.hi[j][usize::from(byte >> 4)] |= 1 << b;
                t.bytes[j][usize::from(byte & 0x3f)] |= 1 << b;
            }
            let head = u32::from_le_bytes(key[..MASK].try_into().expect("4 bytes"));
            t.heads[head_slot(head) / 64] |= 1 << (head_slot(head) % 64);
            t.buckets[b].push((id, head, key));
        }
        for bucket in &mut t.buckets {
            bucket.sort_unstable();
        }
        Some(t)
    }

    #[cfg(target_arch = "x86_64")]
    fn runs_here() -> bool {
        std::env::var("KRESIDUE_KERNEL").ok().is_none_or(|k| k == "avx512")
            && std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn runs_here() -> bool {
        false
    }

    /// The byte tables can be used: the CPU has AVX-512 VBMI and `KRESIDUE_TEDDY` does not
    /// ask for the nibble tables (`nibble`; for comparisons and tests).
    #[cfg(target_arch = "x86_64")]
    fn has_vbmi() -> bool {
        std::env::var("KRESIDUE_TEDDY").ok().is_none_or(|k| k != "nibble")
            && std::arch::is_x86_feature_detected!("avx512vbmi")
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn has_vbmi() -> bool {
        false
    }

    /// Whether the search uses the byte tables.
    pub(super) fn uses_byte_tables(&self) -> bool {
        self.vbmi
    }

    /// The same search with the nibble tables, as where the CPU lacks VBMI.
    #[cfg(test)]
    pub(super) fn with_nibbles(mut self) -> Teddy512 {
        self.vbmi = false;
        self
    }

    /// The first position in `at..end` (and within `buf`) where a key starts, with the
    /// lowest id of the keys starting there. The key may run past `end`.
    pub(super) fn find(&self, buf: &[u8], at: usize, end: usize) -> Option<(usize, usize)> {
        #[cfg(target_arch = "x86_64")]
        if self.vbmi {
            // SAFETY: `vbmi` is set only where the CPU has AVX-512 VBMI, and `new` made
            // `self` only after checking the CPU has AVX-512F and AVX-512BW.
            return unsafe { self.find_vbmi(buf, at, end) };
        }
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `new` made `self` only after checking the CPU has AVX-512F and AVX-512BW.
        return unsafe { self.find_avx512(buf, at, end) };
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!("Teddy512::new returns None here ({buf:p}, {at}, {end})")
    }

    /// The lowest id of the keys starting at `pos`, if any: for the positions a
    /// [`KeyScan`] marked (their four bytes passed the byte tables).
    pub(super) fn key_at(&self, buf: &[u8], pos: usize) -> Option<usize> {
        let head: [u8; MASK] = buf.get(pos..pos + MASK)?.try_into().expect("MASK bytes");
        let slot = head_slot(u32::from_le_bytes(head));
        if self.heads[slot / 64] >> (slot % 64) & 1 == 0 {
            return None;
        }
        // The buckets all four bytes fit, by nibbles: no wider than the byte tables'.
        let buckets = (0..MASK).fold(u8::MAX, |b, j| {
            let c = usize::from(head[j]);
            b & self.lo[j][c & 0xf] & self.hi[j][c >> 4]
        });
        self.first_key(buf, pos, buckets)
    }

    /// The byte tables, for a pass over the bytes that marks where keys may start (see
    /// [`KeyScan`]); `None` where the search uses the nibble tables (the CPU lacks VBMI).
    pub(super) fn key_scan(&self) -> Option<KeyScan<'_>> {
        // SAFETY: `vbmi` is set only where the CPU has AVX-512 VBMI, and `new` made `self`
        // only after checking the CPU has AVX-512F and AVX-512BW.
        self.vbmi.then(|| unsafe { KeyScan::new(&self.bytes) })
    }

    /// # Safety
    /// The CPU must support AVX-512F and AVX-512BW.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn find_avx512(&self, buf: &[u8], at: usize, end: usize) -> Option<(usize, usize)> {
        use std::arch::x86_64::*;
        let table = |t: &[u8; 16]| {
            // SAFETY: 16 bytes of `t`.
            _mm512_broadcast_i32x4(unsafe { _mm_loadu_si128(t.as_ptr().cast()) })
        };
        let lo = [table(&self.lo[0]), table(&self.lo[1]), table(&self.lo[2]), table(&self.lo[3])];
        let hi = [table(&self.hi[0]), table(&self.hi[1]), table(&self.hi[2]), table(&self.hi[3])];
        let nibble = _mm512_set1_epi8(0xf);
        // The buckets of the 64 positions at `p`, each reading bytes `p..p + 67`.
        let step = |p: *const u8| {
            let mut m = _mm512_set1_epi8(-1);
            for j in 0..MASK {
                // SAFETY: the caller keeps `p + j + 64` within its buffer.
                let v = unsafe { _mm512_loadu_si512(p.add(j).cast()) };
                let l = _mm512_shuffle_epi8(lo[j], _mm512_and_si512(v, nibble));
                let h =
                    _mm512_shuffle_epi8(hi[j], _mm512_and_si512(_mm512_srli_epi16::<4>(v), nibble));
                m = _mm512_and_si512(m, _mm512_and_si512(l, h));
            }
            (_mm512_test_epi8_mask(m, m), m)
        };
        self.search(buf, at, end, step, |m| store(m))
    }

    /// As [`Self::find_avx512`], each byte's low six bits looked up in the 64-entry byte
    /// tables.
    ///
    /// # Safety
    /// The CPU must support AVX-512F, AVX-512BW and AVX-512 VBMI.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    unsafe fn find_vbmi(&self, buf: &[u8], at: usize, end: usize) -> Option<(usize, usize)> {
        use std::arch::x86_64::*;
        // SAFETY: a 64-byte table.
        let table = |t: &[u8; 64]| unsafe { _mm512_loadu_si512(t.as_ptr().cast()) };
        let tables: [__m512i; MASK] = std::array::from_fn(|j| table(&self.bytes[j]));
        let step = |p: *const u8| {
            let mut m = _mm512_set1_epi8(-1);
            for (j, &t) in tables.iter().enumerate() {
                // SAFETY: the caller keeps `p + j + 64` within its buffer.
                let v = unsafe { _mm512_loadu_si512(p.add(j).cast()) };
                // Bits 0..5 of each byte of `v` pick one of the 64 entries.
                m = _mm512_and_si512(m, _mm512_permutexvar_epi8(v, t));
            }
            (_mm512_test_epi8_mask(m, m), m)
        };
        self.search(buf, at, end, step, |m| store(m))
    }

    /// The search loop of both kernels, given `step`: for the 64 positions at a pointer,
    /// the candidate mask and each position's buckets. Positions from `end` on are not
    /// searched; the bytes read for those before it (and their keys) may run past it.
    /// Inlined into each kernel, so that it is compiled with that kernel's CPU features.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn search(
        &self,
        buf: &[u8],
        at: usize,
        end: usize,
        step: impl Fn(*const u8) -> (u64, std::arch::x86_64::__m512i),
        store: impl Fn(std::arch::x86_64::__m512i) -> [u8; 64],
    ) -> Option<(usize, usize)> {
        // The first key of a block's candidates (positions `p + i`): most start no key's
        // first four bytes and are dismissed before the buckets are stored and verified.
        let hit_in = |p: usize, cand: u64, m| {
            let cand = self.known_heads(buf, p, cand);
            if cand == 0 {
                None
            } else {
                self.verify(buf, p, cand, &store(m))
            }
        };
        let end = end.min(buf.len());
        // The bytes the steps read: the positions before `end` and the three after each.
        let read = buf.len().min(end + MASK - 1);
        let mut p = at;
        // Two steps at a time, tested with one branch: most pairs of blocks have no
        // candidate that survives the heads.
        while p + 128 + MASK - 1 <= read {
            // SAFETY: bytes p..p + 131 of `buf`, checked above.
            let (c0, m0) = step(unsafe { buf.as_ptr().add(p) });
            // SAFETY: as above.
            let (c1, m1) = step(unsafe { buf.as_ptr().add(p + 64) });
            if c0 | c1 != 0 {
                if let Some(hit) = hit_in(p, c0, m0).or_else(|| hit_in(p + 64, c1, m1)) {
                    return Some(hit);
                }
            }
            p += 128;
        }
        while p + 64 + MASK - 1 <= read {
            // SAFETY: bytes p..p + 67 of `buf`, checked above.
            let (cand, m) = step(unsafe { buf.as_ptr().add(p) });
            if let Some(hit) = hit_in(p, cand, m) {
                return Some(hit);
            }
            p += 64;
        }
        // The last positions (up to 66), their bytes copied into a zeroed block. A zero
        // byte may pass the byte tables (it reads the entry of `@`, 0x80 and 0xc0), but
        // the heads and the verification read `buf` itself, and the positions from `end`
        // on are masked off.
        while p < end {
            let rest = &buf[p..read];
            let mut tail = [0u8; 64 + MASK - 1];
            let n = rest.len().min(tail.len());
            tail[..n].copy_from_slice(&rest[..n]);
            let (cand, m) = step(tail.as_ptr());
            let live = if end - p >= 64 { u64::MAX } else { u64::MAX >> (64 - (end - p)) };
            if let Some(hit) = hit_in(p, cand & live, m) {
                return Some(hit);
            }
            p += 64;
        }
        None
    }

    /// The candidates of `cand` (positions `p + i`) whose next four bytes are in
    /// [`Teddy512::heads`]: those that may start a key.
    #[inline(always)]
    fn known_heads(&self, buf: &[u8], p: usize, cand: u64) -> u64 {
        let mut rest = cand;
        let mut known = 0;
        while rest != 0 {
            let i = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            // Every key is at least MASK bytes: a position this close to the end holds none.
            let Some(head) = buf.get(p + i..p + i + MASK) else { continue };
            let slot = head_slot(u32::from_le_bytes(head.try_into().expect("4 bytes")));
            known |= (self.heads[slot / 64] >> (slot % 64) & 1) << i;
        }
        known
    }

    /// The first candidate of `cand` (positions `p + i`, bucket bits in `bits[i]`, each
    /// with a known head) where a key of its buckets starts.
    #[inline]
    fn verify(
        &self,
        buf: &[u8],
        p: usize,
        mut cand: u64,
        bits: &[u8; 64],
    ) -> Option<(usize, usize)> {
        while cand != 0 {
            let i = cand.trailing_zeros() as usize;
            cand &= cand - 1;
            if let Some(id) = self.first_key(buf, p + i, bits[i]) {
                return Some((id, p + i));
            }
        }
        None
    }

    /// The lowest id of the keys of `buckets` that start at `pos`.
    #[inline]
    fn first_key(&self, buf: &[u8], pos: usize, mut buckets: u8) -> Option<usize> {
        // Every key is at least MASK bytes: a position this close to the end holds none.
        let head = buf.get(pos..pos + MASK)?;
        let head = u32::from_le_bytes(head.try_into().expect("4 bytes"));
        let mut best: Option<usize> = None;
        while buckets != 0 {
            let b = buckets.trailing_zeros() as usize;
            buckets &= buckets - 1;
            if let Some(&(id, _, _)) = self.buckets[b]
                .iter()
                .find(|&&(_, h, key)| h == head && buf[pos..].starts_with(key))
            {
                best = Some(best.map_or(id, |x| x.min(id)));
            }
        }
        best
    }
}
