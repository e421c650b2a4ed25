//! The hot loop's filter test, 64 samples at a time, in SIMD where the CPU has it.
//!
//! [`block_scalar`] is the reference: for sample `k` (the 12 bytes at `4k` of a block) it
//! hashes the window and tests its four filter bits, setting bit `k` of the result when
//! all are set. The AVX-512 and AVX2 kernels compute exactly the same bits: the 64×64→128
//! multiply of the window hash is built from four 32×32→64 lane multiplies, and the filter
//! words are gathered. [`Kernel::detect`] picks the widest one the CPU runs.
//!
//! The byte classification the kernels share lives here too ([`unprintable_mask`], its
//! SSE2 form, and its AVX2 and AVX-512 widenings), with the cache prefetch hint the
//! matcher's table lookups and the rules' marked positions use ([`prefetch`]).

#![allow(unsafe_code)]

use super::{Filter, BLOCK_BYTES, BLOCK_SAMPLES, FILTER_WORDS, WORD_SHIFT};
use crate::fingerprint::{WindowKeys, HASH_BITS, STRIDE, WINDOW};

/// The bytes of one block of 64 samples.
type Block = [u8; BLOCK_BYTES];

/// Which implementation of the block test runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kernel {
    Scalar,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Kernel {
    /// How `-vv` names it.
    pub(super) fn name(self) -> &'static str {
        match self {
            Kernel::Scalar => "scalar",
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => "AVX2",
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512 => "AVX-512",
        }
    }

    /// The fastest kernel this CPU runs (`KRESIDUE_KERNEL=scalar|avx2|avx512` narrows the
    /// choice, for tests and benchmarks; a kernel the CPU lacks is never picked, and any
    /// other value picks the scalar one). A `Kernel` names what the matcher may run: only
    /// this function and `available` (which check the CPU) make the SIMD ones.
    pub(super) fn detect() -> Kernel {
        let want = std::env::var("KRESIDUE_KERNEL").ok();
        let allowed = |name: &str| want.as_deref().is_none_or(|w| w == name);
        #[cfg(target_arch = "x86_64")]
        {
            if allowed("avx512")
                && std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512bw")
            {
                return Kernel::Avx512;
            }
            if allowed("avx2") && std::arch::is_x86_feature_detected!("avx2") {
                return Kernel::Avx2;
            }
        }
        let _ = allowed;
        Kernel::Scalar
    }
}

/// `$call` with `$s` the [`Sampler`] of kernel `$kernel` (for tests, which get kernels
/// from [`Kernel::available`]).
#[cfg(test)]
macro_rules! on_kernel {
    ($kernel:expr, $s:ident => $call:expr) => {
        match $kernel {
            Kernel::Scalar => {
                let $s = Scalar;
                $call
            }
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => {
                // SAFETY: `available` lists only kernels the CPU runs.
                let $s = unsafe { Avx2::new() };
                $call
            }
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512 => {
                // SAFETY: as above.
                let $s = unsafe { Avx512::new() };
                $call
            }
        }
    };
}

impl Kernel {
    /// Every kernel this CPU runs, the scalar one first.
    #[cfg(test)]
    pub(super) fn available() -> Vec<Kernel> {
        let mut all = vec![Kernel::Scalar];
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                all.push(Kernel::Avx2);
            }
            if std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512bw")
            {
                all.push(Kernel::Avx512);
            }
        }
        all
    }

    /// The block test of this kernel.
    #[cfg(test)]
    fn block(self, block: &Block, keys: &WindowKeys, filter: &Filter, lanes: u64) -> u64 {
        on_kernel!(self, s => s.block(block, keys, filter, lanes))
    }

    /// The token samples of this kernel.
    #[cfg(test)]
    pub(super) fn token_samples(self, block: &Block) -> u64 {
        on_kernel!(self, s => s.token_samples(block))
    }

    /// The byte classification of this kernel.
    #[cfg(test)]
    pub(super) fn unprintable(self, word: &[u8; 64]) -> u64 {
        on_kernel!(self, s => s.unprintable(word))
    }
}

/// The two operations the matcher's loops need per 64 bytes and per 64 samples; the loops
/// are generic over it and compiled once per implementation, each within a function
/// enabling its CPU features, so the calls inline.
pub(super) trait Sampler: Copy {
    /// Bit `i` set when `word[i]` is not printable text.
    fn unprintable(self, word: &[u8; 64]) -> u64;
    /// Bit `k` set when the window of sample `k` of `block` (its 12 bytes from `4k`,
    /// dwords `k..k + 3`) is made of token bytes only.
    fn token_samples(self, block: &Block) -> u64;
    /// Bit `k` set when sample `k` of `block` passes `filter`, for the samples of `lanes`;
    /// the bits of the others are clear, and a group of 16 with none in `lanes` is not
    /// computed (a short run of text, most of those in a binary, needs one group, not
    /// four; a block of text where few samples are token bytes, fewer).
    fn block(self, block: &Block, keys: &WindowKeys, filter: &Filter, lanes: u64) -> u64;
}

/// The portable implementation.
#[derive(Clone, Copy)]
pub(super) struct Scalar;

impl Sampler for Scalar {
    #[inline(always)]
    fn unprintable(self, word: &[u8; 64]) -> u64 {
        unprintable_mask(word)
    }
    #[inline(always)]
    fn token_samples(self, block: &Block) -> u64 {
        samples_of_dwords(|at| {
            let mut bits = 0;
            for (d, dword) in word_at(block, at).chunks_exact(4).enumerate() {
                bits |= u16::from(dword.iter().all(|&b| crate::fingerprint::is_token(b))) << d;
            }
            bits
        })
    }
    #[inline(always)]
    fn block(self, block: &Block, keys: &WindowKeys, filter: &Filter, lanes: u64) -> u64 {
        block_scalar(block, keys, filter, lanes)
    }
}

/// Proof that the CPU runs AVX2: only [`Avx2::new`], which is unsafe, makes one.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(super) struct Avx2(());

#[cfg(target_arch = "x86_64")]
impl Avx2 {
    /// # Safety
    /// The CPU must support AVX2.
    pub(super) unsafe fn new() -> Avx2 {
        Avx2(())
    }
}

#[cfg(target_arch = "x86_64")]
impl Sampler for Avx2 {
    #[inline(always)]
    fn unprintable(self, word: &[u8; 64]) -> u64 {
        // SAFETY: `self` exists only if the CPU has AVX2.
        unsafe { unprintable_avx2(word) }
    }
    #[inline(always)]
    fn token_samples(self, block: &Block) -> u64 {
        // SAFETY: as above.
        unsafe { token_samples_avx2(block) }
    }
    #[inline(always)]
    fn block(self, block: &Block, keys: &WindowKeys, filter: &Filter, lanes: u64) -> u64 {
        // SAFETY: as above.
        unsafe { block_avx2(block, keys, filter, lanes) }
    }
}

/// Proof that the CPU runs AVX-512F and AVX-512BW: only [`Avx512::new`] makes one.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(super) struct Avx512(());

#[cfg(target_arch = "x86_64")]
impl Avx512 {
    /// # Safety
    /// The CPU must support AVX-512F and AVX-512BW.
    pub(super) unsafe fn new() -> Avx512 {
        Avx512(())
    }
}

#[cfg(target_arch = "x86_64")]
impl Sampler for Avx512 {
    #[inline(always)]
    fn unprintable(self, word: &[u8; 64]) -> u64 {
        // SAFETY: `self` exists only if the CPU has AVX-512F and AVX-512BW.
        unsafe { unprintable_avx512(word) }
    }
    #[inline(always)]
    fn token_samples(self, block: &Block) -> u64 {
        // SAFETY: as above.
        unsafe { token_samples_avx512(block) }
    }
    #[inline(always)]
    fn block(self, block: &Block, keys: &WindowKeys, filter: &Filter, lanes: u64) -> u64 {
        // SAFETY: as above.
        unsafe { block_avx512(block, keys, filter, lanes) }
    }
}

/// Bit `i` set when `word[i]` is not printable text (see
/// [`crate::fingerprint::is_printable`]). The matcher classifies every byte it may skip
/// with this ([`Scalar`]'s kernel; the others widen it), so it must cost far less than sampling them: on x86_64, SSE2 compares and
/// byte masks, 16 bytes at a time.
#[inline(always)]
pub(super) fn unprintable_mask(word: &[u8; 64]) -> u64 {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        use std::arch::x86_64::*;
        let mut good = 0u64;
        for (k, part) in word.chunks_exact(16).enumerate() {
            // SAFETY: SSE2 is enabled (cfg above; every x86_64 CPU has it); the load reads the 16 bytes of
            // `part`, a valid slice of exactly that length, with no alignment required.
            let m = unsafe {
                let v = _mm_loadu_si128(part.as_ptr().cast::<__m128i>());
                let text = _mm_and_si128(
                    _mm_cmpgt_epi8(v, _mm_set1_epi8(0x1f)),
                    _mm_cmplt_epi8(v, _mm_set1_epi8(0x7f)),
                );
                let space = _mm_or_si128(
                    _mm_or_si128(
                        _mm_cmpeq_epi8(v, _mm_set1_epi8(9)),
                        _mm_cmpeq_epi8(v, _mm_set1_epi8(10)),
                    ),
                    _mm_cmpeq_epi8(v, _mm_set1_epi8(13)),
                );
                _mm_movemask_epi8(_mm_or_si128(text, space)) as u32 as u64
            };
            good |= m << (16 * k);
        }
        !good
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    {
        let mut m = 0u64;
        for (i, &b) in word.iter().enumerate() {
            m |= u64::from(!crate::fingerprint::is_printable(b)) << i;
        }
        m
    }
}

/// Asks the CPU to start loading the cache line of `r` (a hint: no effect on what any
/// load returns). The matcher prefetches the table slots of its rare filter hits one
/// block ahead of looking them up, so the lookups do not wait for memory.
#[inline(always)]
pub(super) fn prefetch<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` needs SSE, which every x86_64 CPU has; it reads no memory
    // architecturally and cannot fault, and `r` is a valid reference anyway.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            (r as *const T).cast::<i8>(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}

/// As [`unprintable_mask`], 32 bytes per compare.
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn unprintable_avx2(word: &[u8; 64]) -> u64 {
    use std::arch::x86_64::*;
    let mut good = 0u64;
    for k in 0..2 {
        // SAFETY: bytes 32k..32k + 32 of the 64-byte `word`; no alignment required.
        let v = unsafe { _mm256_loadu_si256(word.as_ptr().add(32 * k).cast()) };
        // 0x20..=0x7e: above 0x1f and below 0x7f as signed bytes (0x80.. are negative).
        let text = _mm256_and_si256(
            _mm256_cmpgt_epi8(v, _mm256_set1_epi8(0x1f)),
            _mm256_cmpgt_epi8(_mm256_set1_epi8(0x7f), v),
        );
        let space = _mm256_or_si256(
            _mm256_or_si256(
                _mm256_cmpeq_epi8(v, _mm256_set1_epi8(9)),
                _mm256_cmpeq_epi8(v, _mm256_set1_epi8(10)),
            ),
            _mm256_cmpeq_epi8(v, _mm256_set1_epi8(13)),
        );
        good |= (_mm256_movemask_epi8(_mm256_or_si256(text, space)) as u32 as u64) << (32 * k);
    }
    !good
}

/// As [`unprintable_mask`], the 64 bytes in one register.
///
/// # Safety
/// The CPU must support AVX-512F and AVX-512BW.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
unsafe fn unprintable_avx512(word: &[u8; 64]) -> u64 {
    use std::arch::x86_64::*;
    // SAFETY: the 64 bytes of `word`; no alignment required.
    let v = unsafe { _mm512_loadu_si512(word.as_ptr().cast()) };
    // 0x20..=0x7e: `b - 0x20` below 0x5f, unsigned.
    let text =
        _mm512_cmplt_epu8_mask(_mm512_sub_epi8(v, _mm512_set1_epi8(0x20)), _mm512_set1_epi8(0x5f));
    let space = _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(9))
        | _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(10))
        | _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(13));
    !(text | space)
}

/// The 64 bytes of `block` from `at`.
#[inline(always)]
fn word_at(block: &Block, at: usize) -> &[u8; 64] {
    block[at..at + 64].try_into().expect("64 bytes")
}

/// [`Sampler::token_samples`] from the token dwords (bit `d`: bytes `4d..4d + 4` are all
/// token bytes) of the block's 64-byte words at
/// 0, 64, 128, 192 and (for its last two dwords) 200, as `dwords(at)` gives them.
#[inline(always)]
fn samples_of_dwords(mut dwords: impl FnMut(usize) -> u16) -> u64 {
    const { assert!(BLOCK_BYTES == 264) };
    let d = [dwords(0), dwords(64), dwords(128), dwords(192), dwords(BLOCK_BYTES - 64) >> 14];
    let mut token = 0;
    for j in 0..BLOCK_SAMPLES / 16 {
        let w = u32::from(d[j]) | u32::from(d[j + 1] & 3) << 16;
        token |= u64::from(w & w >> 1 & w >> 2 & 0xffff) << (16 * j);
    }
    token
}

/// [`Sampler::token_samples`] in AVX2, in one function so that its constants are made once.
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn token_samples_avx2(block: &Block) -> u64 {
    // SAFETY: the caller's promise.
    samples_of_dwords(|at| unsafe { token_dwords_avx2(word_at(block, at)) })
}

/// [`Sampler::token_samples`] in AVX-512, in one function so that its constants are made
/// once.
///
/// # Safety
/// The CPU must support AVX-512F and AVX-512BW.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn token_samples_avx512(block: &Block) -> u64 {
    // SAFETY: the caller's promise.
    samples_of_dwords(|at| unsafe { token_dwords_avx512(word_at(block, at)) })
}

/// Bit `d` set when the four bytes `word[4d..4d + 4]` all are token bytes
/// ([`crate::fingerprint::is_token`]), 32 bytes per compare.
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn token_dwords_avx2(word: &[u8; 64]) -> u16 {
    use std::arch::x86_64::*;
    let mut good = 0u16;
    for k in 0..2 {
        // SAFETY: bytes 32k..32k + 32 of the 64-byte `word`; no alignment required.
        let v = unsafe { _mm256_loadu_si256(word.as_ptr().add(32 * k).cast()) };
        // `lo <= v <= hi` as signed bytes (bytes from 0x80 are negative: never in range).
        let within = |lo: u8, hi: u8| {
            _mm256_andnot_si256(
                _mm256_cmpgt_epi8(_mm256_set1_epi8(lo as i8), v),
                _mm256_andnot_si256(
                    _mm256_cmpgt_epi8(v, _mm256_set1_epi8(hi as i8)),
                    _mm256_set1_epi8(-1),
                ),
            )
        };
        let is = |b: u8| _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b as i8));
        let token = _mm256_or_si256(
            _mm256_or_si256(
                _mm256_or_si256(within(b'0', b'9'), within(b'A', b'Z')),
                _mm256_or_si256(within(b'a', b'z'), is(b'+')),
            ),
            _mm256_or_si256(
                _mm256_or_si256(is(b'/'), is(b'=')),
                _mm256_or_si256(is(b'_'), is(b'-')),
            ),
        );
        // Dwords of four token bytes: all ones.
        let whole = _mm256_cmpeq_epi32(token, _mm256_set1_epi8(-1));
        good |= (_mm256_movemask_ps(_mm256_castsi256_ps(whole)) as u8 as u16) << (8 * k);
    }
    good
}

/// Bit `h` of entry `l`: the byte `16h + l` is a token byte ([`crate::fingerprint::is_token`]).
#[cfg(target_arch = "x86_64")]
const TOKEN_NIBBLES: [u8; 16] = {
    let mut t = [0u8; 16];
    let mut b = 0;
    while b < 128 {
        let c = b as u8;
        if crate::fingerprint::is_token(c) {
            t[b % 16] |= 1 << (b / 16);
        }
        b += 1;
    }
    t
};

/// [`TOKEN_NIBBLES`] as a 128-bit lane, for byte shuffles.
#[cfg(target_arch = "x86_64")]
// SAFETY: any 16 bytes are a valid `__m128i`.
const TOKEN_BY_LOW_NIBBLE: std::arch::x86_64::__m128i =
    unsafe { std::mem::transmute::<[u8; 16], std::arch::x86_64::__m128i>(TOKEN_NIBBLES) };

/// Entry `h`: bit `h` for `h < 8`, none above (bytes from 0x80 are not text).
#[cfg(target_arch = "x86_64")]
// SAFETY: any 16 bytes are a valid `__m128i`.
const BIT_OF_HIGH_NIBBLE: std::arch::x86_64::__m128i = unsafe {
    std::mem::transmute::<[u8; 16], std::arch::x86_64::__m128i>([
        1, 2, 4, 8, 16, 32, 64, 128, 0, 0, 0, 0, 0, 0, 0, 0,
    ])
};

/// As [`token_dwords_avx2`], the 64 bytes in one register.
///
/// # Safety
/// The CPU must support AVX-512F and AVX-512BW.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
unsafe fn token_dwords_avx512(word: &[u8; 64]) -> u16 {
    use std::arch::x86_64::*;
    // SAFETY: the 64 bytes of `word`; no alignment required.
    let v = unsafe { _mm512_loadu_si512(word.as_ptr().cast()) };
    // A byte is a token byte when its low nibble's entry has the bit of its high nibble
    // (bytes from 0x80 have high nibbles of 8 and more: no bit; `shuffle` also gives 0
    // for an index with its top bit set).
    let lo = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(TOKEN_BY_LOW_NIBBLE), v);
    let high = _mm512_and_si512(_mm512_srli_epi16::<4>(v), _mm512_set1_epi8(0x0f));
    let hi = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(BIT_OF_HIGH_NIBBLE), high);
    let not_token = _mm512_testn_epi8_mask(lo, hi);
    // Dwords without a byte that is not a token byte.
    _mm512_testn_epi32_mask(_mm512_movm_epi8(not_token), _mm512_movm_epi8(not_token))
}

/// Bit `k` set when sample `k` of `block` passes `filter`, for the samples of `lanes`.
#[inline(always)]
fn block_scalar(block: &Block, keys: &WindowKeys, filter: &Filter, lanes: u64) -> u64 {
    let mut found = 0u64;
    let mut rest = lanes;
    while rest != 0 {
        let k = rest.trailing_zeros() as usize;
        rest &= rest - 1;
        let w: &[u8; WINDOW] = block[k * STRIDE..k * STRIDE + WINDOW].try_into().expect("window");
        found |= (filter.hit(keys.hash_window(w)) as u64) << k;
    }
    found
}

const _: () = assert!(HASH_BITS == 28 && STRIDE == 4 && WINDOW == 12 && BLOCK_SAMPLES == 64);

/// As [`block_scalar`], 16 samples per step: hashed eight at a time in 512-bit lanes,
/// tested sixteen at a time.
///
/// # Safety
/// The CPU must support AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn block_avx512(block: &Block, keys: &WindowKeys, filter: &Filter, lanes: u64) -> u64 {
    use std::arch::x86_64::*;
    let [k0, k1] = keys.raw();
    let k0 = _mm512_set1_epi64(k0 as i64);
    let k1 = _mm512_set1_epi64(k1 as i64);
    let low = _mm512_set1_epi64(0xffff_ffff);
    // The high dwords of `k1` (b's high dword, as b is a zero-extended u32 xor k1).
    let bh = _mm512_srli_epi64::<32>(k1);
    // Eight window hashes from the u64s `a` of eight samples and the vector whose high
    // dwords are their u32s `b`: each hash in bits 36..64 of its lane (the rest is garbage).
    let hash8 = |a: __m512i, b: __m512i| {
        let a = _mm512_xor_si512(a, k0);
        // b's low dword xor k1's; `mul_epu32` reads only the low dwords.
        let b = _mm512_xor_si512(_mm512_srli_epi64::<32>(b), k1);
        let ah = _mm512_srli_epi64::<32>(a);
        let ll = _mm512_mul_epu32(a, b);
        let lh = _mm512_mul_epu32(a, bh);
        let hl = _mm512_mul_epu32(ah, b);
        let hh = _mm512_mul_epu32(ah, bh);
        // The middle column and its carry.
        let t = _mm512_add_epi64(
            _mm512_add_epi64(_mm512_srli_epi64::<32>(ll), _mm512_and_si512(lh, low)),
            _mm512_and_si512(hl, low),
        );
        let hi = _mm512_add_epi64(
            _mm512_add_epi64(hh, _mm512_srli_epi64::<32>(lh)),
            _mm512_add_epi64(_mm512_srli_epi64::<32>(hl), _mm512_srli_epi64::<32>(t)),
        );
        // The product's low half has `t` as its high dword; only the high dwords count.
        _mm512_xor_si512(_mm512_slli_epi64::<32>(t), hi)
    };
    // Sample `k`'s hash from the high dwords of the even samples' lanes (k even) and the
    // odd samples' (k odd).
    let interleave = _mm512_setr_epi32(1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
    let low5 = _mm512_set1_epi32(31);
    let low13 = _mm512_set1_epi32(0x1fff);
    let golden = _mm512_set1_epi32(0x9E37_79B1_u32 as i32);
    let one = _mm512_set1_epi32(1);
    let index_mask = _mm512_set1_epi32((filter.index_mask & (FILTER_WORDS - 1)) as i32);
    let words = filter.words.as_ptr().cast::<i32>();
    let mut found = 0u64;
    for j in 0..BLOCK_SAMPLES / 16 {
        let group = (lanes >> (16 * j)) as u16;
        if group == 0 {
            continue;
        }
        let p = block.as_ptr().wrapping_add(64 * j);
        // SAFETY: bytes 64j..64j + 72 of the block, whose last group (j = 3) ends at its
        // end (BLOCK_BYTES = 264); no alignment required. Sample 2i is `a` = the u64 at 8i
        // and `b` = the u32 at 8i + 8, the high dword of lane i at `p + 4`; sample 2i + 1
        // is lane i at `p + 4`, with its `b` the high dword of lane i at `p + 8`.
        let (v0, v4, v8) = unsafe {
            (
                _mm512_loadu_si512(p.cast()),
                _mm512_loadu_si512(p.add(4).cast()),
                _mm512_loadu_si512(p.add(8).cast()),
            )
        };
        let h = _mm512_srli_epi32::<{ 32 - HASH_BITS }>(_mm512_permutex2var_epi32(
            hash8(v0, v4),
            interleave,
            hash8(v4, v8),
        ));
        // The 32-bit half of the filter word: 2·word + bit 5.
        let w = _mm512_or_si512(
            _mm512_slli_epi32::<1>(_mm512_and_si512(
                _mm512_srli_epi32::<{ WORD_SHIFT }>(h),
                index_mask,
            )),
            _mm512_and_si512(_mm512_srli_epi32::<5>(h), one),
        );
        // SAFETY: every index is below 2·FILTER_WORDS, the length of `words` in halves.
        // Lanes not in `group` are not loaded (their word reads as 0: they do not pass).
        let fw =
            unsafe { _mm512_mask_i32gather_epi32::<4>(_mm512_setzero_si512(), group, w, words) };
        let mix = _mm512_mullo_epi32(_mm512_and_si512(h, low13), golden);
        let third = _mm512_srli_epi32::<27>(mix);
        let fourth = _mm512_and_si512(_mm512_srli_epi32::<22>(mix), low5);
        let m = _mm512_or_si512(
            _mm512_or_si512(
                _mm512_sllv_epi32(one, _mm512_and_si512(h, low5)),
                _mm512_sllv_epi32(one, _mm512_and_si512(_mm512_srli_epi32::<6>(h), low5)),
            ),
            _mm512_or_si512(_mm512_sllv_epi32(one, third), _mm512_sllv_epi32(one, fourth)),
        );
        let missing = _mm512_andnot_si512(fw, m);
        let pass = _mm512_testn_epi32_mask(missing, missing) & group;
        found |= (pass as u64) << (16 * j);
    }
    found
}

/// As [`block_scalar`], eight samples per step: hashed four at a time in 256-bit lanes,
/// tested eight at a time.
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn block_avx2(block: &Block, keys: &WindowKeys, filter: &Filter, lanes: u64) -> u64 {
    use std::arch::x86_64::*;
    let [k0, k1] = keys.raw();
    let ia = _mm256_setr_epi32(0, 1, 1, 2, 2, 3, 3, 4);
    let ib = _mm256_setr_epi32(2, 0, 3, 0, 4, 0, 5, 0);
    let k0 = _mm256_set1_epi64x(k0 as i64);
    let k1 = _mm256_set1_epi64x(k1 as i64);
    let low = _mm256_set1_epi64x(0xffff_ffff);
    let six_dwords = _mm256_setr_epi32(-1, -1, -1, -1, -1, -1, 0, 0);
    // The high dwords of `k1` (b's high dword, as b is a zero-extended u32 xor k1).
    let bh = _mm256_srli_epi64::<32>(k1);
    // Four window hashes, each in bits 36..64 of its 64-bit lane (the rest is garbage).
    let hash4 = |p: *const u8| {
        // SAFETY: the masked load reads dwords 0..6 at `p`, which the caller keeps inside
        // the block; the rest are not read.
        let v = unsafe { _mm256_maskload_epi32(p.cast(), six_dwords) };
        // Sample k: a = the u64 at 4k, b = the u32 at 4k + 8 (zero-extended).
        let a = _mm256_xor_si256(_mm256_permutevar8x32_epi32(v, ia), k0);
        let b = _mm256_xor_si256(_mm256_and_si256(_mm256_permutevar8x32_epi32(v, ib), low), k1);
        let ah = _mm256_srli_epi64::<32>(a);
        let ll = _mm256_mul_epu32(a, b);
        let lh = _mm256_mul_epu32(a, bh);
        let hl = _mm256_mul_epu32(ah, b);
        let hh = _mm256_mul_epu32(ah, bh);
        let t = _mm256_add_epi64(
            _mm256_add_epi64(_mm256_srli_epi64::<32>(ll), _mm256_and_si256(lh, low)),
            _mm256_and_si256(hl, low),
        );
        let hi = _mm256_add_epi64(
            _mm256_add_epi64(hh, _mm256_srli_epi64::<32>(lh)),
            _mm256_add_epi64(_mm256_srli_epi64::<32>(hl), _mm256_srli_epi64::<32>(t)),
        );
        // The product's low half has `t` as its high dword; only the high dwords count.
        _mm256_xor_si256(_mm256_slli_epi64::<32>(t), hi)
    };
    // The high dwords of a vector of 64-bit lanes, in the low half and again in the high.
    let pack = _mm256_setr_epi32(1, 3, 5, 7, 1, 3, 5, 7);
    let low5 = _mm256_set1_epi32(31);
    let low13 = _mm256_set1_epi32(0x1fff);
    let golden = _mm256_set1_epi32(0x9E37_79B1_u32 as i32);
    let one = _mm256_set1_epi32(1);
    let index_mask = _mm256_set1_epi32((filter.index_mask & (FILTER_WORDS - 1)) as i32);
    let words = filter.words.as_ptr().cast::<i32>();
    let mut found = 0u64;
    for j in 0..BLOCK_SAMPLES / 8 {
        let group = (lanes >> (8 * j)) as u8;
        if group == 0 {
            continue;
        }
        let p = block.as_ptr().wrapping_add(32 * j);
        let h = _mm256_srli_epi32::<{ 32 - HASH_BITS as i32 }>(_mm256_blend_epi32::<0xf0>(
            _mm256_permutevar8x32_epi32(hash4(p), pack),
            _mm256_permutevar8x32_epi32(hash4(p.wrapping_add(16)), pack),
        ));
        let w = _mm256_or_si256(
            _mm256_slli_epi32::<1>(_mm256_and_si256(
                _mm256_srli_epi32::<{ WORD_SHIFT as i32 }>(h),
                index_mask,
            )),
            _mm256_and_si256(_mm256_srli_epi32::<5>(h), one),
        );
        // SAFETY: every index is below 2·FILTER_WORDS, the length of `words` in halves.
        let fw = unsafe { _mm256_i32gather_epi32::<4>(words, w) };
        let mix = _mm256_mullo_epi32(_mm256_and_si256(h, low13), golden);
        let third = _mm256_srli_epi32::<27>(mix);
        let fourth = _mm256_and_si256(_mm256_srli_epi32::<22>(mix), low5);
        let m = _mm256_or_si256(
            _mm256_or_si256(
                _mm256_sllv_epi32(one, _mm256_and_si256(h, low5)),
                _mm256_sllv_epi32(one, _mm256_and_si256(_mm256_srli_epi32::<6>(h), low5)),
            ),
            _mm256_or_si256(_mm256_sllv_epi32(one, third), _mm256_sllv_epi32(one, fourth)),
        );
        let pass =
            _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(fw, m), m)));
        found |= ((pass as u8 & group) as u64) << (8 * j);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        /// Every kernel sets exactly the bits the scalar one sets, on filters of every size
        /// (from a few windows to the largest) and for any number of groups, and every
        /// stored window passes.
        #[test]
        fn every_kernel_agrees_with_the_scalar_one(
            data in prop::collection::vec(any::<u8>(), BLOCK_BYTES),
            stored in prop::collection::vec(0usize..BLOCK_SAMPLES, 0..20),
            others in 0usize..200_000,
            seed in any::<u64>(),
            salt in any::<u8>(),
            lanes in prop_oneof![Just(u64::MAX), any::<u64>(), (0u32..64).prop_map(|n| u64::MAX >> n), (0u32..64).prop_map(|k| 1u64 << k)],
        ) {
            let block: &[u8; BLOCK_BYTES] = data.as_slice().try_into().expect("block");
            let keys = WindowKeys::from_salt(&[salt; 32]);
            let mut x = seed | 1;
            let mut hashes: Vec<u32> =
                stored.iter().map(|&k| keys.hash(&block[k * STRIDE..])).collect();
            hashes.extend((0..others).map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 36) as u32
            }));
            let mut filter = Filter::new(hashes.len());
            hashes.iter().for_each(|&h| filter.insert(h));
            let want = block_scalar(block, &keys, &filter, u64::MAX);
            for &k in &stored {
                prop_assert!(want & 1 << k != 0, "stored sample {} passes", k);
            }
            for kernel in Kernel::available() {
                prop_assert_eq!(kernel.block(block, &keys, &filter, u64::MAX), want, "{:?}", kernel);
                // Some lanes: the same bits for them, none for the rest.
                prop_assert_eq!(kernel.block(block, &keys, &filter, lanes), want & lanes, "{:?}", kernel);
            }
        }
    }
}
