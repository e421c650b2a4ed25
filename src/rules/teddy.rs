//! The rules' key search: Teddy with as many buckets as the keys need, assigned by a cost
//! model.
//!
//! Teddy (Geoff Langdale's algorithm, as in Hyperscan and aho-corasick) puts every key in
//! one of 8 *buckets*; for each of a key's first [`MASK`] bytes, two tables indexed by the
//! byte's low and high nibble give the buckets whose keys may have that byte there. Per 32
//! positions, four loads, two shuffles per load and bucket set, and a few ANDs give each
//! position the buckets all four bytes fit. A bucket accepts every pairing of its keys'
//! nibbles at each position, so how keys share buckets decides how many positions pass:
//! `sql:`, `AKIA` and `hvs.` in one bucket let through `sk…`, `hq…` and the rest of their
//! cross-product. With a few dozen keys a careful hand-placed assignment kept that low; with
//! a few hundred none does, and aho-corasick's own assignment (by the low nibbles of the
//! first bytes) lets through a position in ten of a node's text.
//!
//! So the buckets are assigned here, when the rules are compiled, by a cost model: a
//! bucket lets through a position with the probability that each of its four bytes is in
//! the bucket's nibble cross-product there, the byte frequencies being those of a node
//! ([`BYTE_FREQ`], measured on the node benchmark's tree, `/etc` and `/var/log`). Keys are
//! dealt greedily to the bucket whose cost grows least, then moved while a move lowers the
//! total. More buckets cost more shuffles (one set of 8 per 8 buckets): the number of sets
//! is the one that minimises the model's cycles per byte. Positions that pass are checked
//! against a 65,536-bit set of the keys' first four bytes (most are dismissed by that one
//! bit), then against the keys with those four bytes, by binary search.
//!
//! The kernels: AVX-512 (F and BW) takes 64 positions a step, AVX2 32, and a scalar one
//! checks each position against the key set; all find the same (a test compares them with
//! aho-corasick's automaton).
//!
//! Keys shorter than [`MASK`] (at least 2 bytes) match any byte past their end; they are
//! compared directly at each position their bucket lets through.
//!
//! Written here rather than taken from a crate: aho-corasick's packed Teddy takes at most
//! 127 keys and 16 buckets, assigned without regard to the data; no maintained crate
//! assigns Teddy buckets by a cost model. A test checks that it finds exactly what
//! aho-corasick's automaton finds.

#![allow(unsafe_code)]

/// Bytes of a key matched with the nibble tables.
pub(super) const MASK: usize = 4;
/// At most this many sets of 8 buckets.
const MAX_SETS: usize = 4;
/// Bits of [`Teddy::heads`].
const HEAD_BITS: usize = 1 << 16;

/// How often each byte value occurs in a node's files, per 65,536 bytes (at least 1): the
/// node benchmark's tree (container layers copied from `/usr`, pod logs, kubelet dirs),
/// `/etc` and `/var/log` of a Debian host. Only the bucket assignment reads it.
#[rustfmt::skip]
const BYTE_FREQ: [u16; 256] = [
    4667, 286, 178, 126, 128, 96, 81, 72, 126, 109, 707, 54, 62, 55, 106, 163,
    111, 47, 47, 37, 50, 43, 36, 35, 65, 34, 30, 34, 33, 29, 31, 53,
    7567, 37, 277, 73, 128, 71, 33, 116, 158, 158, 81, 36, 231, 350, 345, 148,
    1386, 778, 538, 281, 274, 469, 227, 315, 228, 217, 374, 65, 99, 212, 98, 26,
    56, 220, 89, 133, 146, 193, 184, 83, 277, 177, 32, 49, 164, 111, 136, 122,
    123, 30, 134, 180, 272, 81, 56, 47, 49, 39, 158, 53, 46, 53, 23, 371,
    54, 2148, 328, 1795, 1655, 4953, 547, 387, 956, 1831, 81, 252, 1671, 852, 1931, 2328,
    936, 323, 2169, 2770, 2959, 1413, 376, 105, 105, 437, 77, 55, 70, 64, 24, 23,
    72, 40, 38, 86, 72, 62, 28, 28, 44, 153, 22, 110, 32, 76, 22, 27,
    47, 22, 20, 24, 27, 24, 23, 30, 33, 22, 21, 20, 26, 21, 20, 22,
    39, 27, 19, 20, 37, 23, 27, 24, 34, 24, 24, 45, 27, 21, 21, 22,
    46, 25, 25, 22, 29, 28, 30, 23, 44, 25, 32, 27, 32, 34, 36, 28,
    62, 38, 28, 54, 36, 28, 27, 35, 26, 24, 19, 19, 25, 18, 26, 22,
    108, 69, 27, 28, 27, 22, 19, 36, 53, 25, 58, 23, 23, 21, 19, 26,
    82, 32, 26, 32, 25, 30, 27, 27, 79, 48, 20, 34, 32, 24, 24, 32,
    58, 26, 26, 36, 26, 20, 28, 23, 31, 22, 26, 25, 37, 30, 45, 381,
];

/// The model's cycles per byte for one set of 8 buckets (its eight shuffles per 32 bytes,
/// on one shuffle port).
const SET_CYCLES: f64 = 0.25;
/// The model's cycles for a position that passes the buckets: the head bit and a branch
/// the CPU mispredicts, and the model's byte independence, which underestimates how
/// often real text passes (measured with the `measure` tool below: 2 to 5 times).
const CANDIDATE_CYCLES: f64 = 150.0;

/// The compiled search.
#[derive(Clone)]
pub(super) struct Teddy {
    /// Sets of 8 buckets in use.
    sets: usize,
    /// `lo[s][j][n]`: buckets of set `s` with a key whose byte `j` has low nibble `n`.
    lo: [[[u8; 16]; MASK]; MAX_SETS],
    /// `hi[s][j][n]`: the same for the high nibble.
    hi: [[[u8; 16]; MASK]; MAX_SETS],
    /// A bit per [`head_slot`] of every key of at least [`MASK`] bytes.
    heads: Box<[u64]>,
    /// Keys of at least [`MASK`] bytes: (first four bytes as a little-endian `u32`, id,
    /// key), sorted.
    by_head: Vec<(u32, usize, &'static [u8])>,
    /// Shorter keys: (id, key).
    short: Vec<(usize, &'static [u8])>,
    /// Each key's bucket (set × 8 + bucket), by id.
    bucket_of: Vec<usize>,
    /// The kernel that runs.
    kernel: Kernel,
}

/// The implementations of the search: the same result, the widest the CPU has (or
/// `KRESIDUE_KERNEL` asks for).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kernel {
    Scalar,
    /// 32 positions a step.
    Avx2,
    /// 64 positions a step (AVX-512 F and BW).
    Avx512,
}

/// The bit of [`Teddy::heads`] for a position whose next four bytes are `head`.
#[inline(always)]
fn head_slot(head: u32) -> usize {
    (head.wrapping_mul(0x9E37_79B1) >> (32 - HEAD_BITS.trailing_zeros())) as usize
}

impl Teddy {
    /// Compiles `keys` (by id; each at least 2 bytes, none a prefix of another). `None`
    /// when a key is shorter.
    pub(super) fn new(keys: &[&'static [u8]]) -> Option<Teddy> {
        if keys.iter().any(|k| k.len() < 2) {
            return None;
        }
        let (sets, bucket_of) = assign(keys);
        let mut t = Teddy {
            sets,
            lo: [[[0; 16]; MASK]; MAX_SETS],
            hi: [[[0; 16]; MASK]; MAX_SETS],
            heads: vec![0u64; HEAD_BITS / 64].into_boxed_slice(),
            by_head: Vec::new(),
            short: Vec::new(),
            bucket_of,
            kernel: kernel_here(),
        };
        for (id, &key) in keys.iter().enumerate() {
            let (s, bit) = (t.bucket_of[id] / 8, 1u8 << (t.bucket_of[id] % 8));
            for j in 0..MASK {
                match key.get(j) {
                    Some(&byte) => {
                        t.lo[s][j][usize::from(byte & 0xf)] |= bit;
                        t.hi[s][j][usize::from(byte >> 4)] |= bit;
                    }
                    None => {
                        t.lo[s][j].iter_mut().for_each(|e| *e |= bit);
                        t.hi[s][j].iter_mut().for_each(|e| *e |= bit);
                    }
                }
            }
            match key.get(..MASK) {
                Some(h) => {
                    let head = u32::from_le_bytes(h.try_into().expect("4 bytes"));
                    t.heads[head_slot(head) / 64] |= 1 << (head_slot(head) % 64);
                    t.by_head.push((head, id, key));
                }
                None => t.short.push((id, key)),
            }
        }
        t.by_head.sort_unstable();
        Some(t)
    }

    /// Sets of 8 buckets the search uses.
    pub(super) fn sets(&self) -> usize {
        self.sets
    }

    /// The kernel that runs.
    pub(super) fn kernel(&self) -> Kernel {
        self.kernel
    }

    /// The same search with `kernel`, where the CPU has it (else `None`).
    #[cfg(test)]
    pub(super) fn with_kernel(mut self, kernel: Kernel) -> Option<Teddy> {
        let here = kernel_here();
        let runs = match kernel {
            Kernel::Scalar => true,
            Kernel::Avx2 => here != Kernel::Scalar,
            Kernel::Avx512 => here == Kernel::Avx512,
        };
        self.kernel = kernel;
        runs.then_some(self)
    }

    /// Each key's bucket, by id, for tests.
    #[cfg(test)]
    pub(super) fn buckets(&self) -> &[usize] {
        &self.bucket_of
    }

    /// The first position in `at..end` (and within `buf`) where a key starts, with the id
    /// of that key. The key may run past `end`.
    pub(super) fn find(&self, buf: &[u8], at: usize, end: usize) -> Option<(usize, usize)> {
        let end = end.min(buf.len());
        if at >= end {
            return None;
        }
        #[cfg(target_arch = "x86_64")]
        match self.kernel {
            // SAFETY: `kernel` is `Avx512` only where the CPU has AVX-512 F and BW.
            Kernel::Avx512 => {
                return unsafe {
                    match self.sets {
                        1 => self.find_avx512::<1>(buf, at, end),
                        2 => self.find_avx512::<2>(buf, at, end),
                        3 => self.find_avx512::<3>(buf, at, end),
                        _ => self.find_avx512::<4>(buf, at, end),
                    }
                };
            }
            // SAFETY: `kernel` is `Avx2` only where the CPU has AVX2.
            Kernel::Avx2 => {
                return unsafe {
                    match self.sets {
                        1 => self.find_avx2::<1>(buf, at, end),
                        2 => self.find_avx2::<2>(buf, at, end),
                        3 => self.find_avx2::<3>(buf, at, end),
                        _ => self.find_avx2::<4>(buf, at, end),
                    }
                };
            }
            Kernel::Scalar => {}
        }
        (at..end).find_map(|pos| self.key_at(buf, pos).map(|id| (id, pos)))
    }

    /// The id of the key starting at `pos`, if any.
    #[inline]
    fn key_at(&self, buf: &[u8], pos: usize) -> Option<usize> {
        let rest = buf.get(pos..)?;
        if let Some(h) = rest.get(..MASK) {
            let head = u32::from_le_bytes(h.try_into().expect("4 bytes"));
            let slot = head_slot(head);
            if self.heads[slot / 64] >> (slot % 64) & 1 != 0 {
                let from = self.by_head.partition_point(|&(h, _, _)| h < head);
                for &(h, id, key) in &self.by_head[from..] {
                    if h != head {
                        break;
                    }
                    if rest.starts_with(key) {
                        return Some(id);
                    }
                }
            }
        }
        self.short.iter().find(|(_, key)| rest.starts_with(key)).map(|&(id, _)| id)
    }

    /// # Safety
    /// The CPU must support AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn find_avx2<const S: usize>(
        &self,
        buf: &[u8],
        at: usize,
        end: usize,
    ) -> Option<(usize, usize)> {
        use std::arch::x86_64::*;
        // SAFETY: 16 bytes of a table, broadcast to both 128-bit lanes.
        let table = |t: &[u8; 16]| unsafe {
            _mm256_broadcastsi128_si256(_mm_loadu_si128(t.as_ptr().cast()))
        };
        let lo: [[__m256i; MASK]; S] =
            std::array::from_fn(|s| std::array::from_fn(|j| table(&self.lo[s][j])));
        let hi: [[__m256i; MASK]; S] =
            std::array::from_fn(|s| std::array::from_fn(|j| table(&self.hi[s][j])));
        let nibble = _mm256_set1_epi8(0xf);
        // The candidates among the 32 positions at `p`, each reading bytes `p..p + 35`.
        let step = |p: *const u8| -> u32 {
            let mut any = _mm256_setzero_si256();
            let mut ln = [_mm256_setzero_si256(); MASK];
            let mut hn = [_mm256_setzero_si256(); MASK];
            for j in 0..MASK {
                // SAFETY: the caller keeps `p + j + 32` within its buffer.
                let v = unsafe { _mm256_loadu_si256(p.add(j).cast()) };
                ln[j] = _mm256_and_si256(v, nibble);
                hn[j] = _mm256_and_si256(_mm256_srli_epi16::<4>(v), nibble);
            }
            for s in 0..S {
                let mut m = _mm256_set1_epi8(-1);
                for j in 0..MASK {
                    let l = _mm256_shuffle_epi8(lo[s][j], ln[j]);
                    let h = _mm256_shuffle_epi8(hi[s][j], hn[j]);
                    m = _mm256_and_si256(m, _mm256_and_si256(l, h));
                }
                any = _mm256_or_si256(any, m);
            }
            !(_mm256_movemask_epi8(_mm256_cmpeq_epi8(any, _mm256_setzero_si256())) as u32)
        };
        // Two steps of 32 positions make the driver's 64.
        let step64 = |p: *const u8| -> u64 {
            // SAFETY: the driver keeps `p + 64 + 3` within its block.
            u64::from(step(p)) | u64::from(step(unsafe { p.add(32) })) << 32
        };
        self.drive(buf, at, end, step64)
    }

    /// [`Teddy::find_avx2`] with 64 positions a step.
    ///
    /// # Safety
    /// The CPU must support AVX-512 F and BW.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn find_avx512<const S: usize>(
        &self,
        buf: &[u8],
        at: usize,
        end: usize,
    ) -> Option<(usize, usize)> {
        use std::arch::x86_64::*;
        // SAFETY: 16 bytes of a table, broadcast to the four 128-bit lanes.
        let table =
            |t: &[u8; 16]| unsafe { _mm512_broadcast_i32x4(_mm_loadu_si128(t.as_ptr().cast())) };
        let lo: [[__m512i; MASK]; S] =
            std::array::from_fn(|s| std::array::from_fn(|j| table(&self.lo[s][j])));
        let hi: [[__m512i; MASK]; S] =
            std::array::from_fn(|s| std::array::from_fn(|j| table(&self.hi[s][j])));
        let nibble = _mm512_set1_epi8(0xf);
        // The candidates among the 64 positions at `p`, each reading bytes `p..p + 67`.
        let step = |p: *const u8| -> u64 {
            let mut any = _mm512_setzero_si512();
            let mut ln = [_mm512_setzero_si512(); MASK];
            let mut hn = [_mm512_setzero_si512(); MASK];
            for j in 0..MASK {
                // SAFETY: the caller keeps `p + j + 64` within its buffer.
                let v = unsafe { _mm512_loadu_si512(p.add(j).cast()) };
                ln[j] = _mm512_and_si512(v, nibble);
                hn[j] = _mm512_and_si512(_mm512_srli_epi16::<4>(v), nibble);
            }
            for s in 0..S {
                let mut m = _mm512_set1_epi8(-1);
                for j in 0..MASK {
                    let l = _mm512_shuffle_epi8(lo[s][j], ln[j]);
                    let h = _mm512_shuffle_epi8(hi[s][j], hn[j]);
                    // m & l & h.
                    m = _mm512_ternarylogic_epi32::<0x80>(m, l, h);
                }
                any = _mm512_or_si512(any, m);
            }
            _mm512_test_epi8_mask(any, any)
        };
        self.drive(buf, at, end, step)
    }

    /// Runs a kernel's `step` (the candidates among the 64 positions at a pointer, each
    /// reading 3 bytes past it) over the positions `at..end` of `buf` and checks each
    /// candidate: the first key found, with its position.
    #[inline(always)]
    fn drive(
        &self,
        buf: &[u8],
        at: usize,
        end: usize,
        step: impl Fn(*const u8) -> u64,
    ) -> Option<(usize, usize)> {
        let verify = |p: usize, mut cand: u64| {
            while cand != 0 {
                let i = cand.trailing_zeros() as usize;
                cand &= cand - 1;
                if let Some(id) = self.key_at(buf, p + i) {
                    return Some((id, p + i));
                }
            }
            None
        };
        // The bytes the steps read: the positions before `end` and the three after each.
        let read = buf.len().min(end + MASK - 1);
        let mut p = at;
        while p + 64 + MASK - 1 <= read {
            // SAFETY: bytes p..p + 67 of `buf`, checked above.
            let cand = step(unsafe { buf.as_ptr().add(p) });
            if cand != 0 {
                if let Some(hit) = verify(p, cand) {
                    return Some(hit);
                }
            }
            p += 64;
        }
        // The last positions, their bytes copied into a zeroed block (a zero byte may pass
        // the tables, but `key_at` reads `buf` itself, and positions from `end` on are
        // masked off).
        while p < end {
            let rest = &buf[p..read];
            let mut tail = [0u8; 64 + MASK - 1];
            let n = rest.len().min(tail.len());
            tail[..n].copy_from_slice(&rest[..n]);
            let cand = step(tail.as_ptr());
            let live = if end - p >= 64 { u64::MAX } else { u64::MAX >> (64 - (end - p)) };
            if let Some(hit) = verify(p, cand & live) {
                return Some(hit);
            }
            p += 64;
        }
        None
    }
}

/// The widest kernel the CPU has, narrowed by `KRESIDUE_KERNEL` (`scalar`, `avx2`; any
/// other value, or none, leaves the widest).
fn kernel_here() -> Kernel {
    #[cfg(target_arch = "x86_64")]
    {
        let asked = std::env::var("KRESIDUE_KERNEL").ok();
        let asked = asked.as_deref();
        if asked == Some("scalar") || !std::arch::is_x86_feature_detected!("avx2") {
            return Kernel::Scalar;
        }
        if asked != Some("avx2")
            && std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
        {
            return Kernel::Avx512;
        }
        Kernel::Avx2
    }
    #[cfg(not(target_arch = "x86_64"))]
    Kernel::Scalar
}

/// A bucket as the cost model sees it: for each of the [`MASK`] positions, the low and
/// high nibbles its keys have there (a short key's positions past its end: every nibble).
#[derive(Clone, Copy, Default)]
struct Nibbles {
    lo: [u16; MASK],
    hi: [u16; MASK],
}

impl Nibbles {
    fn of(key: &[u8]) -> Nibbles {
        let mut n = Nibbles::default();
        for j in 0..MASK {
            match key.get(j) {
                Some(&b) => {
                    n.lo[j] = 1 << (b & 0xf);
                    n.hi[j] = 1 << (b >> 4);
                }
                None => {
                    n.lo[j] = u16::MAX;
                    n.hi[j] = u16::MAX;
                }
            }
        }
        n
    }

    fn with(self, other: Nibbles) -> Nibbles {
        let mut n = self;
        for j in 0..MASK {
            n.lo[j] |= other.lo[j];
            n.hi[j] |= other.hi[j];
        }
        n
    }

    /// The probability that a position of a node's files passes this bucket.
    fn cost(&self) -> f64 {
        let mut p = 1.0;
        for j in 0..MASK {
            if self.lo[j] == 0 {
                return 0.0;
            }
            let mut sum = 0u32;
            let mut hi = self.hi[j];
            while hi != 0 {
                let h = hi.trailing_zeros() as usize;
                hi &= hi - 1;
                let mut lo = self.lo[j];
                while lo != 0 {
                    let l = lo.trailing_zeros() as usize;
                    lo &= lo - 1;
                    sum += u32::from(BYTE_FREQ[h << 4 | l]);
                }
            }
            p *= f64::from(sum) / 65536.0;
        }
        p
    }
}

/// The number of bucket sets and each key's bucket: for each number of sets, keys dealt
/// greedily in sorted order to the bucket whose cost grows least, then moved to a better
/// bucket while one lowers the total (a few rounds); the number of sets whose modelled
/// cycles per byte are fewest wins.
fn assign(keys: &[&[u8]]) -> (usize, Vec<usize>) {
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by_key(|&k| keys[k]);
    let nibbles: Vec<Nibbles> = keys.iter().map(|k| Nibbles::of(k)).collect();
    let mut best: Option<(f64, usize, Vec<usize>)> = None;
    #[cfg(test)]
    let forced: Option<usize> =
        std::env::var("KRESIDUE_TEDDY_SETS").ok().and_then(|v| v.parse().ok());
    #[cfg(not(test))]
    let forced: Option<usize> = None;
    for sets in 1..=MAX_SETS {
        if forced.is_some_and(|f| f != sets) {
            continue;
        }
        let n = sets * 8;
        let mut of = vec![usize::MAX; keys.len()];
        let mut members: Vec<Vec<usize>> = vec![Vec::new(); n];
        let bucket = |members: &[usize]| {
            members.iter().fold(Nibbles::default(), |acc, &k| acc.with(nibbles[k]))
        };
        let mut state: Vec<Nibbles> = vec![Nibbles::default(); n];
        // A short key matches any byte past its end: a bucket it shares lets through
        // everything its other keys' first bytes start, so short keys keep to buckets of
        // their own length.
        let place = |k: usize, state: &[Nibbles], members: &[Vec<usize>]| {
            (0..n)
                .filter(|&b| {
                    members[b].iter().all(|&m| keys[m].len().min(MASK) == keys[k].len().min(MASK))
                })
                .map(|b| {
                    let grown = if members[b].is_empty() {
                        nibbles[k].cost()
                    } else {
                        state[b].with(nibbles[k]).cost() - state[b].cost()
                    };
                    (grown, b)
                })
                .min_by(|a, b| a.0.total_cmp(&b.0))
                .map_or_else(|| (0..n).find(|&b| members[b].is_empty()).unwrap_or(0), |(_, b)| b)
        };
        for &k in &order {
            let b = place(k, &state, &members);
            of[k] = b;
            members[b].push(k);
            state[b] = state[b].with(nibbles[k]);
        }
        for _round in 0..3 {
            let mut moved = false;
            for &k in &order {
                let from = of[k];
                members[from].retain(|&m| m != k);
                state[from] = bucket(&members[from]);
                let to = place(k, &state, &members);
                moved |= to != from;
                of[k] = to;
                members[to].push(k);
                state[to] = state[to].with(nibbles[k]);
            }
            if !moved {
                break;
            }
        }
        let pass: f64 =
            state.iter().zip(&members).filter(|(_, m)| !m.is_empty()).map(|(s, _)| s.cost()).sum();
        let cycles = sets as f64 * SET_CYCLES + pass * CANDIDATE_CYCLES;
        if best.as_ref().is_none_or(|b| cycles < b.0) {
            best = Some((cycles, sets, of));
        }
        if keys.len() <= n && forced.is_none() {
            break;
        }
    }
    let (_, sets, of) = best.expect("one set at least");
    (sets, of)
}

/// The model's probability that a position passes the buckets, for the `tune` tool and
/// tests.
#[cfg(test)]
pub(super) fn modelled_pass_rate(keys: &[&[u8]], bucket_of: &[usize]) -> f64 {
    let mut state = vec![Nibbles::default(); MAX_SETS * 8];
    let mut used = vec![false; MAX_SETS * 8];
    for (k, &b) in bucket_of.iter().enumerate() {
        state[b] = state[b].with(Nibbles::of(keys[k]));
        used[b] = true;
    }
    state.iter().zip(&used).filter(|(_, &u)| u).map(|(s, _)| s.cost()).sum()
}

/// Times the search over a sample: `KRESIDUE_TEDDY_DATA=dir[:dir…] cargo test --release
/// --lib rules::teddy::measure -- --ignored --nocapture` reads up to 256 MiB of the files
/// under the given dirs and prints, for the built-in keys (or the keys of the file
/// `KRESIDUE_TEDDY_KEYS`, one per line), the bucket sets, the modelled and the measured
/// share of positions that pass the buckets, and the search's speed against a pass that
/// only reads the bytes.
#[cfg(test)]
#[test]
#[ignore = "a tool: needs KRESIDUE_TEDDY_DATA"]
#[allow(clippy::print_stdout)] // a tool: it prints its figures
fn measure() {
    let dirs = std::env::var("KRESIDUE_TEDDY_DATA").expect("KRESIDUE_TEDDY_DATA is set");
    let mut data = Vec::new();
    'dirs: for dir in dirs.split(':') {
        for entry in walkdir::WalkDir::new(dir).sort_by_file_name().into_iter().flatten() {
            let small = entry.metadata().map(|m| m.len() < 64 << 20).unwrap_or(false);
            if entry.file_type().is_file() && small {
                if let Ok(bytes) = std::fs::read(entry.path()) {
                    data.extend_from_slice(&bytes);
                }
            }
            if data.len() > 256 << 20 {
                break 'dirs;
            }
        }
    }
    let keys: Vec<&'static [u8]> = match std::env::var("KRESIDUE_TEDDY_KEYS") {
        Ok(file) => std::fs::read_to_string(file)
            .expect("keys file")
            .lines()
            .filter(|l| !l.is_empty())
            .map(|l| &*Box::leak(l.replace("\\n", "\n").into_bytes().into_boxed_slice()))
            .collect(),
        Err(_) => {
            super::prefilter::keys_of(&super::table::RULES).iter().map(|k| k.as_bytes()).collect()
        }
    };
    let t = std::time::Instant::now();
    let teddy = Teddy::new(&keys).expect("keys");
    let built = t.elapsed();
    let modelled = modelled_pass_rate(&keys, &teddy.bucket_of);
    let mut hits = 0usize;
    let mut best = std::time::Duration::MAX;
    for _ in 0..3 {
        let t = std::time::Instant::now();
        let (mut at, mut n) = (0, 0);
        while let Some((_, p)) = teddy.find(&data, at, data.len()) {
            n += 1;
            at = p + 1;
        }
        best = best.min(t.elapsed());
        hits = n;
    }
    let mut read = std::time::Duration::MAX;
    for _ in 0..3 {
        let t = std::time::Instant::now();
        let sum = data.chunks(4096).fold(0u64, |s, c| s.wrapping_add(u64::from(c[c.len() - 1])));
        std::hint::black_box(sum);
        read = read.min(t.elapsed());
    }
    let gbs = |d: std::time::Duration| data.len() as f64 / d.as_secs_f64() / 1e9;
    let passing = data
        .windows(MASK)
        .filter(|w| {
            (0..teddy.sets).any(|s| {
                (0..MASK).fold(0xffu8, |b, j| {
                    let c = usize::from(w[j]);
                    b & teddy.lo[s][j][c & 0xf] & teddy.hi[s][j][c >> 4]
                }) != 0
            })
        })
        .count();
    println!("measured pass rate {:.2e}", passing as f64 / data.len() as f64);
    println!(
        "{} keys, {} MiB: {} sets (built in {:.1} ms), modelled pass rate {:.2e}, {} key hits; \
         search {:.2} GB/s",
        keys.len(),
        data.len() >> 20,
        teddy.sets,
        built.as_secs_f64() * 1e3,
        modelled,
        hits,
        gbs(best),
    );
    let _ = read;
}
