//! The rules' key search riding along the matcher's pass ([`super::Matcher::find_keyed`]):
//! the byte tables the rules' Teddy lends to it ([`KeyScan`], [`KeyTables`]), and the marks
//! the pass leaves the rules to verify ([`KeyMarks`]). Here because the matcher's pass runs
//! them; the rules, above the matcher, make the tables and read the marks.

#![allow(unsafe_code)]

use std::ops::Range;

/// Bytes of a key a [`KeyScan`]'s tables test: one table per byte.
pub const KEY_BYTES: usize = 4;

/// Positions a [`KeyScan`] marks per call: the 256 at the start of the block it is given.
pub const KEY_SPAN: usize = 256;
/// Bytes a [`KeyScan`] reads per call: the 256 positions' and the three after them.
pub const KEY_READ: usize = KEY_SPAN + KEY_BYTES - 1;

/// The byte tables of the rules' Teddy (`rules::teddy`, where it uses them), lent to a pass
/// that reads every byte anyway (the matcher's: [`super::Matcher::find_keyed`]), to mark
/// where a key may start: a position whose four bytes all pass the tables. Run there, the
/// byte permutes keep a port busy that the matcher's multiplies and gathers leave idle, and
/// the rules' own pass over the bytes is left with the marked positions (see
/// `Rules::find_marked`). Exists only where the CPU has AVX-512F, AVX-512BW and AVX-512
/// VBMI (see `KeyScan::new`).
#[derive(Clone, Copy)]
pub struct KeyScan<'t> {
    bytes: &'t [[u8; 64]; KEY_BYTES],
}

impl<'t> KeyScan<'t> {
    /// Lends the byte tables `bytes`: `bytes[j][c & 0x3f]` are the buckets with a key whose
    /// byte `j` has the low six bits of `c`.
    ///
    /// # Safety
    /// The CPU must support AVX-512F, AVX-512BW and AVX-512 VBMI: every use of a
    /// `KeyScan` and of its [`KeyTables`] runs instructions of all three.
    pub(crate) unsafe fn new(bytes: &'t [[u8; 64]; KEY_BYTES]) -> KeyScan<'t> {
        KeyScan { bytes }
    }
}

/// A [`KeyScan`]'s tables in registers, for the length of one pass.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub struct KeyTables([std::arch::x86_64::__m512i; KEY_BYTES]);

#[cfg(target_arch = "x86_64")]
impl KeyScan<'_> {
    /// The tables as vectors (loaded with AVX-512F, which a `KeyScan` proves the CPU has).
    #[inline(always)]
    pub fn tables(self) -> KeyTables {
        // SAFETY: a `KeyScan` exists only where the CPU has AVX-512F, BW and VBMI (see
        // `KeyScan::new`).
        unsafe { self.tables_vbmi() }
    }

    /// # Safety
    /// The CPU must support AVX-512F.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn tables_vbmi(self) -> KeyTables {
        // SAFETY: 64 bytes of each table.
        KeyTables(std::array::from_fn(|j| unsafe {
            std::arch::x86_64::_mm512_loadu_si512(self.bytes[j].as_ptr().cast())
        }))
    }
}

#[cfg(target_arch = "x86_64")]
impl KeyTables {
    /// Bit `i` of word `w`: a key may start at position `64w + i` of `block` (its four
    /// bytes pass the byte tables), for the [`KEY_SPAN`] positions at its start.
    #[inline(always)]
    pub fn marks(self, block: &[u8; KEY_READ]) -> [u64; KEY_SPAN / 64] {
        // SAFETY: `KeyTables` come only from a `KeyScan`, which exists only where the CPU
        // has AVX-512F, BW and VBMI.
        unsafe { self.marks_vbmi(block) }
    }

    /// # Safety
    /// The CPU must support AVX-512F, AVX-512BW and AVX-512 VBMI.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    #[inline]
    unsafe fn marks_vbmi(self, block: &[u8; KEY_READ]) -> [u64; KEY_SPAN / 64] {
        use std::arch::x86_64::*;
        let [t0, t1, t2, t3] = self.0;
        let p = block.as_ptr();
        // The candidates of the 64 positions at `p + at`.
        let step = |at: usize| {
            // SAFETY: bytes at..at + 67 of `block`, at most KEY_READ.
            let load = |j: usize| unsafe { _mm512_loadu_si512(p.add(at + j).cast()) };
            let a = _mm512_and_si512(
                _mm512_permutexvar_epi8(load(0), t0),
                _mm512_permutexvar_epi8(load(1), t1),
            );
            let b = _mm512_and_si512(
                _mm512_permutexvar_epi8(load(2), t2),
                _mm512_permutexvar_epi8(load(3), t3),
            );
            _mm512_test_epi8_mask(a, b)
        };
        [step(0), step(64), step(128), step(192)]
    }
}

/// Where a pass over a buffer with `Rules::key_scan`'s tables marked that a key may
/// start, from position `start` on, 256 (`KEY_SPAN`) positions per pass step; the positions
/// [`KeyMarks::covered`] that are not marked hold no key. A worker keeps one for its
/// buffers.
#[derive(Debug, Default)]
pub struct KeyMarks {
    start: usize,
    /// The length of the buffer marked: marks given with another buffer are not used.
    len: usize,
    /// Steps taken.
    steps: usize,
    /// The steps that marked a position, each as [`MARKED`] words: the step's number,
    /// then its marks (bit `i` of word `w`: position `64w + i` of the step). Room for
    /// every step of a buffer is made before the pass, so that its loop does not branch
    /// on the marks and holds no call that may grow this; the first `filled` words are
    /// written.
    words: Vec<u64>,
    filled: usize,
}

/// Words a step that marked a position takes in [`KeyMarks::words`].
const MARKED: usize = 1 + KEY_SPAN / 64;

impl KeyMarks {
    /// No position covered.
    pub fn clear(&mut self) {
        self.start = 0;
        self.len = 0;
        self.steps = 0;
        self.filled = 0;
    }

    /// Starts marks from position `start` of a buffer of `len` bytes.
    pub(crate) fn begin(&mut self, start: usize, len: usize) {
        self.clear();
        self.start = start;
        self.len = len;
        let room = len.saturating_sub(start).div_ceil(KEY_SPAN) * MARKED + MARKED;
        if self.words.len() < room {
            self.words.resize(room, 0);
        }
    }

    /// Takes the marks of the next [`KEY_SPAN`] positions (of the buffer given to
    /// [`KeyMarks::begin`]).
    #[inline(always)]
    pub(crate) fn push(&mut self, marks: [u64; KEY_SPAN / 64]) {
        // Written whether or not any position is marked; kept only if one is.
        let slot = &mut self.words[self.filled..self.filled + MARKED];
        slot[0] = self.steps as u64;
        slot[1..].copy_from_slice(&marks);
        self.filled += MARKED * usize::from(marks.iter().fold(0, |a, &m| a | m) != 0);
        self.steps += 1;
    }

    /// The positions the marks cover.
    pub fn covered(&self) -> Range<usize> {
        self.start..self.start + KEY_SPAN * self.steps
    }

    /// The positions the marks cover in `buf`: none unless they were made for a buffer of
    /// its length.
    pub(crate) fn covered_in(&self, buf: &[u8]) -> Range<usize> {
        if buf.len() == self.len {
            self.covered()
        } else {
            0..0
        }
    }

    /// Calls `f` with each marked position, in order. The bytes at the first mark of each
    /// word of the steps a few ahead are prefetched: by the time the rules read the marks,
    /// the matcher's tables have pushed most of the buffer out of the nearer caches (in a
    /// harness, a third of this loop's time).
    pub(crate) fn each(&self, buf: &[u8], mut f: impl FnMut(usize)) {
        const AHEAD: usize = 4;
        let at = |step: &[u64]| self.start + KEY_SPAN * step[0] as usize;
        let fetch = |step: &[u64]| {
            for (w, &m) in step[1..].iter().enumerate().filter(|&(_, &m)| m != 0) {
                if let Some(byte) = buf.get(at(step) + 64 * w + m.trailing_zeros() as usize) {
                    super::simd::prefetch(byte);
                }
            }
        };
        let steps = || self.words[..self.filled].chunks_exact(MARKED);
        steps().take(AHEAD).for_each(fetch);
        for (k, step) in steps().enumerate() {
            if let Some(ahead) = steps().nth(k + AHEAD) {
                fetch(ahead);
            }
            for (w, &m) in step[1..].iter().enumerate() {
                let mut rest = m;
                while rest != 0 {
                    f(at(step) + 64 * w + rest.trailing_zeros() as usize);
                    rest &= rest - 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_are_given_back_in_order_and_cover_their_steps() {
        let mut marks = KeyMarks::default();
        marks.begin(12, 12 + 5 * KEY_SPAN + 9);
        marks.push([1, 0, 0, 1 << 63]);
        marks.push([0; 4]);
        marks.push([0, 1 << 5 | 1 << 6, 0, 0]);
        marks.push([0; 4]);
        assert_eq!(marks.covered(), 12..12 + 4 * KEY_SPAN);
        let buf = vec![0u8; 12 + 5 * KEY_SPAN + 9];
        let mut got = Vec::new();
        marks.each(&buf, |p| got.push(p));
        let step = |k: usize| 12 + k * KEY_SPAN;
        assert_eq!(got, [step(0), step(0) + 255, step(2) + 69, step(2) + 70]);
        marks.clear();
        assert!(marks.covered().is_empty());
        marks.each(&buf, |_| panic!("a cleared mark"));
    }
}
