//! What the benchmarks generate their data with, besides the crate's [`Prng`] and the
//! tests' node-tree builder (`tests/util/tree.rs`): character sets, word salad, PEM-looking
//! blobs and the fingerprinted values. Every value is synthetic, never anything resembling
//! a real credential. Each benchmark uses a subset of it.
#![allow(dead_code)]

use kresidue::kubectl::SecretValue;
use kresidue::prng::Prng;
use std::time::Duration;

pub const TOKEN_CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
pub const B64_CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Appends `n` words from `list`, space-separated.
pub fn words(rng: &mut Prng, out: &mut Vec<u8>, n: usize, list: &[&str]) {
    for k in 0..n {
        if k > 0 {
            out.push(b' ');
        }
        out.extend_from_slice(rng.pick(list).as_bytes());
    }
}

/// A PEM-looking blob of about `len` bytes of base64-ish lines. Not a key of any kind:
/// its `FAKE KEY` label matches no rule.
pub fn fake_pem(rng: &mut Prng, len: usize) -> Vec<u8> {
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
    let mut rng = Prng::new(0x6b72_6573_6964_7565);
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
