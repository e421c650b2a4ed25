//! The one pseudo-random generator of the crate and of its tests and benchmarks:
//! splitmix64, seeded, deterministic, and not for anything secret.
//!
//! It makes synthetic data only: the random parts of rule examples
//! ([`crate::rules::examples::render`]), the fake values and files of the tests, the
//! generated nodes of the benchmarks. Everything it draws is a function of the seed, so a
//! failing test or a benchmark figure is reproducible from it. Draws in a range use a
//! modulo: the bias is irrelevant for test data.

/// A seeded splitmix64 generator (see the [module docs](self)).
#[derive(Clone, Debug)]
pub struct Prng(u64);

impl Prng {
    /// A generator for `seed` (any value, 0 included).
    pub fn new(seed: u64) -> Prng {
        Prng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n`; panics if `n` is 0.
    pub fn below(&mut self, n: usize) -> usize {
        assert!(n > 0, "Prng::below(0)");
        (self.next_u64() % n as u64) as usize
    }

    /// A number in `lo..hi`; panics if the range is empty.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        assert!(lo < hi, "Prng::range({lo}, {hi}) is empty");
        lo + self.below(hi - lo)
    }

    /// A number in `lo..hi` drawn log-uniformly (as many between 1 KiB and 2 KiB as
    /// between 1 MiB and 2 MiB); panics unless `0 < lo < hi`.
    pub fn log_range(&mut self, lo: usize, hi: usize) -> usize {
        assert!(0 < lo && lo < hi, "Prng::log_range({lo}, {hi})");
        let u = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        ((lo as f64 * (hi as f64 / lo as f64).powf(u)) as usize).clamp(lo, hi - 1)
    }

    /// True with probability `pct` percent.
    pub fn chance(&mut self, pct: usize) -> bool {
        self.below(100) < pct
    }

    /// One element of `xs`, uniformly; panics if `xs` is empty.
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }

    /// Appends `n` random bytes to `out`.
    pub fn fill(&mut self, out: &mut Vec<u8>, n: usize) {
        out.reserve(n);
        let mut left = n;
        while left > 0 {
            let w = self.next_u64().to_le_bytes();
            let k = left.min(8);
            out.extend_from_slice(&w[..k]);
            left -= k;
        }
    }

    /// `n` random bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut out = Vec::new();
        self.fill(&mut out, n);
        out
    }

    /// `n` characters drawn uniformly from `set`, which must be ASCII and non-empty.
    pub fn chars(&mut self, set: &[u8], n: usize) -> String {
        assert!(set.is_ascii(), "Prng::chars: the set must be ASCII");
        (0..n).map(|_| *self.pick(set) as char).collect()
    }

    /// `n` lowercase hex digits.
    pub fn hex(&mut self, n: usize) -> String {
        self.chars(b"0123456789abcdef", n)
    }

    /// A lowercase UUID shaped like a version 4 one (`xxxxxxxx-xxxx-4xxx-Nxxx-…`, `N` one
    /// of `89ab`), as Kubernetes pod uids are.
    pub fn uuid(&mut self) -> String {
        let variant = *self.pick(b"89ab") as char;
        format!(
            "{}-{}-4{}-{variant}{}-{}",
            self.hex(8),
            self.hex(4),
            self.hex(3),
            self.hex(3),
            self.hex(12)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::Prng;

    #[test]
    fn a_seed_gives_one_sequence() {
        let draw = |seed| {
            let mut r = Prng::new(seed);
            (0..4).map(|_| r.next_u64()).collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
        // splitmix64's published first output for seed 0.
        assert_eq!(draw(0)[0], 0xE220_A839_7B1D_CDAF);
    }

    #[test]
    fn draws_stay_in_their_ranges() {
        let mut r = Prng::new(1);
        for _ in 0..10_000 {
            assert!(r.below(3) < 3);
            assert!((5..9).contains(&r.range(5, 9)));
            assert!((256..1 << 20).contains(&r.log_range(256, 1 << 20)));
        }
        assert!(!r.chance(0));
        assert!(r.chance(100));
        let hits = (0..10_000).filter(|_| r.chance(30)).count();
        assert!((2_500..3_500).contains(&hits), "{hits}");
    }

    #[test]
    fn bytes_and_characters_have_their_length_and_alphabet() {
        let mut r = Prng::new(2);
        for n in [0, 1, 7, 8, 9, 1000] {
            assert_eq!(r.bytes(n).len(), n);
            let s = r.chars(b"xyz", n);
            assert_eq!(s.len(), n);
            assert!(s.bytes().all(|b| b"xyz".contains(&b)));
        }
        let mut v = b"kept".to_vec();
        r.fill(&mut v, 5);
        assert_eq!((v.len(), &v[..4]), (9, &b"kept"[..]));
        let h = r.hex(64);
        assert!(
            h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        assert_eq!(*r.pick(&[42]), 42);
    }

    #[test]
    fn uuids_are_version_4_shaped() {
        let mut r = Prng::new(3);
        for _ in 0..100 {
            let u = r.uuid();
            let parts: Vec<&str> = u.split('-').collect();
            let lens: Vec<usize> = parts.iter().map(|p| p.len()).collect();
            assert_eq!(lens, [8, 4, 4, 4, 12], "{u}");
            assert!(parts[2].starts_with('4') && "89ab".contains(&parts[3][..1]), "{u}");
            assert!(u.bytes().all(|b| b == b'-' || b.is_ascii_hexdigit()), "{u}");
        }
    }
}
