//! Checks a rule match must pass besides its regex: the placeholder filter every match
//! goes through ([`is_placeholder`]) and the per-rule [`Check`] ([`passes`]).
//!
//! Both look only at the secret part of a match, never at its context, and are pure
//! functions of those bytes. The placeholder filter is deliberately narrow: it names the
//! shapes that documentation, templates and masked logs use (`AKIAIOSFODNN7EXAMPLE`,
//! `${DB_PASSWORD}`, `<token>`, `****`, `changeme`) and nothing a random secret could
//! plausibly contain, because a real key that is dropped here is never reported.

use super::examples::BASE62;
use super::Check;

/// Documentation example values that are public and must never be reported.
const KNOWN_EXAMPLES: &[&[u8]] = &[
    // AWS documentation (IAM user guide, CLI docs).
    b"AKIAIOSFODNN7EXAMPLE",
    b"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    b"AKIAI44QH8DHBEXAMPLE",
    b"je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY",
    // GitHub REST API documentation.
    b"gho_16C7e42F292c6912E7710c838347Ae178B4a",
    // kubeadm documentation's bootstrap token.
    b"abcdef.0123456789abcdef",
];

/// Whole values (compared case-insensitively) that are placeholders, not secrets.
const PLACEHOLDER_VALUES: &[&str] = &[
    "password",
    "passwd",
    "pass",
    "pwd",
    "secret",
    "changeme",
    "changeit",
    "placeholder",
    "redacted",
    "masked",
    "hidden",
    "dummy",
    "example",
    "sample",
    "test",
    "null",
    "none",
    "nil",
    "undefined",
    "foo",
    "foobar",
];

/// Substrings (case-insensitive, at least 8 letters so random text never holds them) that
/// only placeholders contain.
const PLACEHOLDER_WORDS: &[&[u8]] = &[b"changeme", b"redacted", b"replaceme", b"replace_me"];

/// True when `secret` is a well-known placeholder (documentation example keys and the
/// like) that must never be reported.
pub fn is_placeholder(secret: &[u8]) -> bool {
    let lower = secret.to_ascii_lowercase();
    KNOWN_EXAMPLES.contains(&secret)
        || PLACEHOLDER_VALUES.iter().any(|v| lower == v.as_bytes())
        || PLACEHOLDER_WORDS.iter().any(|w| contains(&lower, w))
        || has_example_word(secret)
        || has_dummy_word(secret)
        || is_your_here(&lower)
        || is_template_reference(secret)
        || is_mostly_filler(secret)
}

/// True when `secret` passes `check` (`Check::Jwt` is decided by the caller, which decodes
/// the token).
pub fn passes(check: Check, secret: &[u8]) -> bool {
    match check {
        Check::None | Check::Jwt(_) => true,
        Check::Entropy(min_bits) => shannon_entropy(secret) >= min_bits,
        Check::GithubChecksum => github_checksum_ok(secret),
    }
}

/// Shannon entropy of the byte distribution of `data`, in bits per byte (0 for empty).
pub fn shannon_entropy(data: &[u8]) -> f64 {
    if data.is_empty() {
        return 0.0;
    }
    let mut counts = [0u32; 256];
    for &b in data {
        counts[b as usize] += 1;
    }
    let n = data.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum()
}

/// The 6-character checksum of a GitHub token (April 2021 format): the CRC-32 (IEEE) of
/// the 30 random characters after the `ghx_` prefix, in base62 (`0-9A-Za-z`), left-padded
/// with `0`. See <https://github.blog/2021-04-05-behind-githubs-new-authentication-token-formats/>.
pub fn github_checksum(random: &[u8]) -> [u8; 6] {
    let mut crc = crc32fast::hash(random);
    let mut out = [b'0'; 6];
    for slot in out.iter_mut().rev() {
        *slot = BASE62[(crc % 62) as usize];
        crc /= 62;
    }
    out
}

/// `ghx_` + 30 base62 + the checksum of those 30 (the prefix is whatever precedes `_`).
fn github_checksum_ok(token: &[u8]) -> bool {
    let Some(us) = token.iter().position(|&b| b == b'_') else { return false };
    let body = &token[us + 1..];
    body.len() == 36
        && body.iter().all(u8::is_ascii_alphanumeric)
        && github_checksum(&body[..30]) == body[30..]
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// `EXAMPLE` anywhere, or `example`/`Example` not glued to a preceding letter (so a
/// password like `counterexample` is not a placeholder, but `my-example-key` is).
fn has_example_word(s: &[u8]) -> bool {
    if contains(s, b"EXAMPLE") {
        return true;
    }
    s.windows(7).enumerate().any(|(i, w)| {
        (w == b"example" || w == b"Example") && (i == 0 || !s[i - 1].is_ascii_alphabetic())
    })
}

/// `dummy`/`DUMMY`/`Dummy` as a word of its own (delimited by non-letters).
fn has_dummy_word(s: &[u8]) -> bool {
    s.windows(5).enumerate().any(|(i, w)| {
        matches!(w, b"dummy" | b"DUMMY" | b"Dummy")
            && (i == 0 || !s[i - 1].is_ascii_alphabetic())
            && s.get(i + 5).map_or(true, |c| !c.is_ascii_alphabetic())
    })
}

/// `your_api_key_here`, `YOUR-TOKEN-HERE`, `your token here`, … (already lower-cased).
fn is_your_here(lower: &[u8]) -> bool {
    let trimmed = lower.strip_prefix(b"<").unwrap_or(lower);
    trimmed.starts_with(b"your")
        && trimmed.get(4).is_some_and(|&c| matches!(c, b'_' | b'-' | b' ' | b'.'))
        && contains(&trimmed[4..], b"here")
}

/// Template and substitution syntax: `${VAR}`, `${VAR:-default}`, `$(VAR)` (Kubernetes
/// env expansion), `{{ .Values.x }}`, `%(name)s`, or a value that is a name in `<…>`.
/// Names start with a letter or `_` and have at least two characters, which keeps random
/// passwords with `$`, braces or brackets from looking like templates.
fn is_template_reference(s: &[u8]) -> bool {
    let name = |b: &[u8]| {
        b.len() >= 2
            && (b[0].is_ascii_alphabetic() || b[0] == b'_')
            && b.iter().all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.'))
    };
    let name_or_default = |b: &[u8]| name(b.split(|&c| c == b':').next().unwrap_or(b));
    let words = |b: &[u8]| {
        b.iter().any(u8::is_ascii_alphabetic)
            && b.iter().all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.' | b' '))
    };
    let anything = |b: &[u8]| b.len() <= 256;
    let enclosed = |open: &[u8], close: &[u8], body_ok: &dyn Fn(&[u8]) -> bool| {
        s.windows(open.len()).enumerate().any(|(i, w)| {
            w == open && {
                let rest = &s[i + open.len()..];
                rest.windows(close.len())
                    .position(|c| c == close)
                    .is_some_and(|end| body_ok(&rest[..end]))
            }
        })
    };
    (s.len() >= 3 && s[0] == b'<' && s[s.len() - 1] == b'>' && words(&s[1..s.len() - 1]))
        || enclosed(b"${", b"}", &name_or_default)
        || enclosed(b"$(", b")", &name)
        || enclosed(b"{{", b"}}", &anything)
        || enclosed(b"%(", b")s", &name)
}

/// Runs of at least three `x`, `X`, `*`, `0`, `#` or `.` cover more than half the value, or
/// the value is one byte repeated.
fn is_mostly_filler(s: &[u8]) -> bool {
    if s.len() >= 4 && s.iter().all(|&c| c == s[0]) {
        return true;
    }
    let mut filler = 0;
    let mut i = 0;
    while i < s.len() {
        let run = s[i..].iter().take_while(|&&c| c == s[i]).count();
        if run >= 3 && matches!(s[i], b'x' | b'X' | b'*' | b'0' | b'#' | b'.') {
            filler += run;
        }
        i += run;
    }
    filler * 2 > s.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::examples::render;
    use crate::rules::jwt;

    #[test]
    fn documentation_examples_are_placeholders() {
        for v in [
            "AKIAIOSFODNN7EXAMPLE",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "abcdef.0123456789abcdef",
            "my-example-token-1234",
            "Example_Secret_Value",
            "sk_live_EXAMPLEKEY12345678901234",
            "changeme",
            "ChangeMe123",
            "PASSWORD",
            "<password>",
            "<your-token>",
            "your_api_key_here",
            "YOUR-TOKEN-HERE",
            "${DB_PASSWORD}",
            "${DB_PASSWORD:-postgres}",
            "pre${SUFFIX}",
            "$(GITHUB_TOKEN)",
            "{{ .Values.password }}",
            "{{password}}",
            "%(password)s",
            "xxxxxxxxxxxxxxxxxxxx",
            "XXXXXXXXXXXX1234",
            "ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
            "****",
            "********",
            "0000000000000000000000000000000000000000",
            "aaaaaaaa",
            "dummy",
            "dummy-token-value",
            "[REDACTED]",
        ] {
            assert!(is_placeholder(v.as_bytes()), "{v}");
        }
    }

    #[test]
    fn real_looking_values_are_not_placeholders() {
        for v in [
            "counterexample",
            "Dummyx7Kq",
            "s3cr3t-Pa55w0rd!",
            "postgres",
            "pa$$word",
            "a<b>c",
            "{}",
            "x0x0x0x0x0x0",
            "abc000def111",
        ] {
            assert!(!is_placeholder(v.as_bytes()), "{v}");
        }
    }

    #[test]
    fn random_secrets_are_never_placeholders() {
        for seed in 0..2000 {
            for t in ["{a:40}", "{b:40}", "{B:43}", "{x:40}", "{p:24}", "{b:88}", "{l:16}"] {
                let v = render(t, seed);
                assert!(!is_placeholder(&v), "{t} seed {seed}: {}", String::from_utf8_lossy(&v));
            }
        }
    }

    #[test]
    fn entropy_measures_bits_per_byte() {
        assert_eq!(shannon_entropy(b""), 0.0);
        assert_eq!(shannon_entropy(b"aaaa"), 0.0);
        assert!((shannon_entropy(b"abab") - 1.0).abs() < 1e-9);
        assert!((shannon_entropy(b"0123456789abcdef") - 4.0).abs() < 1e-9);
        assert!(!passes(Check::Entropy(3.5), b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));
        assert!(!passes(Check::Entropy(3.5), b"abababababababababababababababababababab"));
    }

    #[test]
    fn random_base62_and_base64_strings_pass_entropy() {
        for seed in 0..2000 {
            for t in ["{a:40}", "{b:40}", "{B:40}"] {
                let v = render(t, seed);
                assert!(passes(Check::Entropy(3.5), &v), "{t} seed {seed}");
                // The AWS secret rule's bar, which 40 hex digits cannot reach.
                assert!(passes(Check::Entropy(4.0), &v), "{t} seed {seed}");
            }
            assert!(!passes(Check::Entropy(4.0), &render("{x:40}", seed)));
        }
    }

    #[test]
    fn github_checksum_accepts_good_tokens_and_rejects_any_change() {
        for seed in 0..200 {
            let good = render("{ghtoken:ghp}", seed);
            assert!(passes(Check::GithubChecksum, &good));
            for i in 4..good.len() {
                let mut bad = good.clone();
                bad[i] = if bad[i] == b'a' { b'b' } else { b'a' };
                assert!(!passes(Check::GithubChecksum, &bad), "seed {seed} pos {i}");
            }
            assert!(!passes(Check::GithubChecksum, &render("{ghtoken-bad:gho}", seed)));
        }
        assert!(!passes(Check::GithubChecksum, b"ghp_short"));
        assert!(!passes(Check::GithubChecksum, b"no-underscore"));
    }

    #[test]
    fn github_checksum_is_left_padded_base62_of_crc32() {
        // Independent encoding: CRC-32 of "" is 0, of "a" is 0xE8B7BE43.
        assert_eq!(&github_checksum(b""), b"000000");
        let mut n = 0xE8B7_BE43u64;
        let mut expect = Vec::new();
        while n > 0 {
            expect.insert(0, BASE62[(n % 62) as usize]);
            n /= 62;
        }
        while expect.len() < 6 {
            expect.insert(0, b'0');
        }
        assert_eq!(github_checksum(b"a").to_vec(), expect);
    }

    #[test]
    fn none_and_jwt_always_pass() {
        assert!(passes(Check::None, b""));
        assert!(passes(Check::Jwt(jwt::Kind::Other), b"not a jwt"));
    }
}
