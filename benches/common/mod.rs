//! What both benchmarks generate their data with: a seeded PRNG, character sets, word
//! salad and the fingerprinted values. Every value is synthetic, never anything resembling
//! a real credential. Each benchmark uses a subset of it.
#![allow(dead_code)]

use kresidue::kubectl::SecretValue;
use std::time::Duration;

/// xorshift64* — tiny, deterministic, good enough for synthetic data.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform-ish in `lo..hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next() % (hi - lo) as u64) as usize
    }
    /// True with probability `pct` percent.
    pub fn chance(&mut self, pct: usize) -> bool {
        self.range(0, 100) < pct
    }
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.range(0, xs.len())]
    }
    /// Appends `n` random bytes to `out`.
    pub fn fill(&mut self, out: &mut Vec<u8>, n: usize) {
        let mut left = n;
        while left > 0 {
            let w = self.next().to_le_bytes();
            let k = left.min(8);
            out.extend_from_slice(&w[..k]);
            left -= k;
        }
    }
    /// `n` random bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(n);
        self.fill(&mut out, n);
        out
    }
    /// `n` characters drawn from `set`.
    pub fn chars(&mut self, set: &[u8], n: usize) -> String {
        (0..n).map(|_| *self.pick(set) as char).collect()
    }
    pub fn hex(&mut self, n: usize) -> String {
        self.chars(b"0123456789abcdef", n)
    }
    pub fn uuid(&mut self) -> String {
        format!("{}-{}-{}-{}-{}", self.hex(8), self.hex(4), self.hex(4), self.hex(4), self.hex(12))
    }
    /// Log-uniform in `lo..hi`.
    pub fn log_range(&mut self, lo: usize, hi: usize) -> usize {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        (lo as f64 * (hi as f64 / lo as f64).powf(u)) as usize
    }
}

pub const TOKEN_CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
pub const B64_CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Appends `n` words from `list`, space-separated.
pub fn words(rng: &mut Rng, out: &mut Vec<u8>, n: usize, list: &[&str]) {
    for k in 0..n {
        if k > 0 {
            out.push(b' ');
        }
        out.extend_from_slice(rng.pick(list).as_bytes());
    }
}

/// A PEM-looking blob of about `len` bytes of base64-ish lines. Not a key of any kind:
/// its `FAKE KEY` label matches no rule.
pub fn fake_pem(rng: &mut Rng, len: usize) -> Vec<u8> {
    let mut v = b"-----BEGIN FAKE KEY-----\n".to_vec();
    let body = len.saturating_sub(v.len() + 23);
    let mut written = 0;
    while written < body {
        let n = 64.min(body - written);
        v.extend(rng.chars(B64_CHARS, n).bytes());
        v.push(b'\n');
        written += n;
    }
    v.extend_from_slice(b"-----END FAKE KEY-----\n");
    v
}

/// The fingerprinted values: value `i` has kinds in a fixed 6:3:1 pattern (so every
/// prefix of 10 has the full mix: short tokens, long tokens, PEM-looking blocks whose
/// JSON-escaped form differs), lengths drawn at random.
pub fn values(n: usize) -> Vec<SecretValue> {
    let mut rng = Rng::new(0x6b72_6573_6964_7565);
    (0..n)
        .map(|i| {
            let value = match i % 10 {
                0..=5 => {
                    let len = rng.range(16, 41);
                    rng.chars(TOKEN_CHARS, len).into_bytes()
                }
                6..=8 => {
                    let len = rng.range(40, 121);
                    rng.chars(TOKEN_CHARS, len).into_bytes()
                }
                _ => {
                    let len = rng.range(1024, 3 * 1024 + 1);
                    fake_pem(&mut rng, len)
                }
            };
            SecretValue {
                namespace: format!("ns{}", i % 37),
                name: format!("secret-{i}"),
                key: "data".into(),
                value,
            }
        })
        .collect()
}

/// Milliseconds.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
