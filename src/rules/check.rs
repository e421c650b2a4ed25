//! Checks a rule match must pass besides its regex: the placeholder filter every match
//! goes through ([`is_placeholder`]) and the per-rule [`Check`] ([`passes`]).
//!
//! Both look only at the secret part of a match, never at its context, and are pure
//! functions of those bytes. The placeholder filter is deliberately narrow: it names the
//! shapes that documentation, templates and masked logs use (`AKIAIOSFODNN7EXAMPLE`,
//! `${DB_PASSWORD}`, `<token>`, `****`, `changeme`) and nothing a random secret could
//! plausibly contain, because a real key that is dropped here is never reported. It also
//! knows, by digest only, the few private keys that are public knowledge yet ship on
//! every node (GnuTLS's self-test keys), which would otherwise be critical findings in
//! each image layer.

use super::Check;
use memchr::memmem;
use sha2::{Digest, Sha256};

/// The base62 alphabet of GitHub's checksum: digits, upper case, lower case.
pub const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

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
    // PyJWT's documentation token (`{"some": "payload"}` signed with "secret"), shipped
    // in its package metadata in every image that installs PyJWT.
    b"eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzb21lIjoicGF5bG9hZCJ9.4twFt5NiznN84AWoo1d7KO1T_yoc0Z6XOpOVswacPZg",
    // jwt.io's example token (`{"sub":"1234567890","name":"John Doe","iat":1516239022}`
    // signed with "your-256-bit-secret"), in countless tutorials, tests and READMEs.
    b"eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    // The Azure Storage emulator's (Azurite's) fixed development account key.
    b"Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==",
    // OAuth 2.0's examples (RFC 6749 §4.1, §5.1; RFC 6750 §2.1), quoted in every OAuth
    // library's docs and tests (oauthlib, requests-oauthlib, google-auth).
    b"2YotnFZFEjr1zCsicMWpAA",
    b"tGzv3JOkF0XG5Qx2TlKWIA",
    b"SplxlOBeZQQYbYS6WxSbIA",
    b"czZCaGRSa3F0MzpnWDFmQmF0M2JW",
    b"gX1fBat3bV",
    b"mF_9.B5f-4.1JqM",
    // OAuth 1.0's examples (RFC 5849 §1.2, §3.1, §3.5.1).
    b"dpf43f3p2l4k3l03",
    b"kd94hf93k423kf44",
    b"hh5s93j4hdidpola",
    b"hdhd0244k9j7ao03",
    b"nnch734d00sl2jdk",
    b"pfkkdhi9sl3r4s00",
    b"9djdj82h48djs9d2",
    b"kkk9d7dh3k39sjv7",
    b"0685bd9184jfhq22",
    b"ad180jjd733klru7",
    // oauthlib's and requests-oauthlib's docstrings (every Python image that installs
    // them).
    b"h480djs93hd8",
    b"lsdkfol23w54jlksdef",
    b"qwe089234lkjsdf",
    b"45ghiukldjahdnhzdauz",
    b"kjfch2345sdf",
    b"askfjh234as9sd8",
    b"sdlfkj452",
    b"kjerht2309u",
    b"kjerht2309uf",
    b"lsdajfh923874",
    b"sdf0o9823sjdfsdf",
    b"2kjshdfp92i34asdasd",
    // kubectl's documented example password (`kubectl config set-credentials`).
    b"uXFGweU9l35qcif",
];

/// The known examples, for the docs' test.
#[cfg(test)]
pub(crate) fn known_examples() -> &'static [&'static [u8]] {
    KNOWN_EXAMPLES
}

/// Private keys that are public knowledge, by the SHA-256 of their base64 body with line
/// breaks removed ([`key_body_digest`]): the self-test keys GnuTLS compiles into
/// `libgnutls.so.30` (`lib/crypto-selftests-pk.c`), which sits in every Debian-based image
/// layer and would otherwise be reported as critical in each of them.
const KNOWN_PUBLIC_KEYS: &[&str] = &[
    "f287c70b1db074fe73f73bfb1f09a8b0231e0d951d5bfd30a742bcb9de9195ab", // RSA 2048
    "9ab6db67523ba6071fdb948b3ce38349ec08fb726f359abbbca33a3a84238ba2", // DSA 2048
    "24a2416c5abbb67327599619c25906553b849d79cbc413e2a061f12de6718838", // ECDSA P-256
    "bf552d2ff30b20f0b0ee2bcc357a5ab68dbe899ae09a0071b097bee2d2434332", // GOST R 34.10-2012 512
    "cadf1e62661d5d21a7fce2c80b3319022ee366137e4b302a7ea78b7f17d6f599", // GOST R 34.10-2012 256
    "6d03bbf47115fad00d6f990593a6465ca693d0f6d797721cfc94b0190349b50d", // GOST R 34.10-2001
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
    // RabbitMQ's default user's password.
    "guest",
];

/// Substrings (case-insensitive, at least 8 letters so random text never holds them) that
/// only placeholders contain.
const PLACEHOLDER_WORDS: &[&[u8]] = &[b"changeme", b"redacted", b"replaceme", b"replace_me"];

/// True when `secret` is a well-known placeholder (documentation example keys and the
/// like) that must never be reported.
pub fn is_placeholder(secret: &[u8]) -> bool {
    let lower = secret.to_ascii_lowercase();
    KNOWN_EXAMPLES.contains(&secret)
        || is_known_public_key(secret)
        || PLACEHOLDER_VALUES.iter().any(|v| lower == v.as_bytes())
        || PLACEHOLDER_WORDS.iter().any(|w| contains(&lower, w))
        || has_word(secret, &lower, b"example", true)
        || has_word(secret, &lower, b"dummy", false)
        || is_your_here(&lower)
        || is_template_reference(secret)
        || is_credential_name(secret)
        || is_mostly_filler(secret)
        || is_made_of_runs(secret)
        || is_format_string(secret)
        || is_made_of_credential_words(&lower)
        || decodes_to_placeholder(secret)
}

/// Whether `secret` is the padded standard base64 of printable text that is a placeholder
/// (a Secret's `data` holds its values so: `Y2hhbmdlbWU=` is `changeme`).
fn decodes_to_placeholder(secret: &[u8]) -> bool {
    use base64::Engine as _;
    if secret.len() < 8 || !secret.len().is_multiple_of(4) {
        return false;
    }
    let Ok(plain) = base64::engine::general_purpose::STANDARD.decode(secret) else {
        return false;
    };
    plain.iter().all(|b| (0x20..0x7f).contains(b)) && is_placeholder(&plain)
}

/// True when `secret` passes `check` (`Check::Jwt` is decided by the caller, which decodes
/// the token).
pub fn passes(check: Check, secret: &[u8]) -> bool {
    match check {
        Check::None | Check::Jwt(_) => true,
        Check::Entropy(min_bits) => shannon_entropy(secret) >= min_bits,
        Check::Password(min_bits) => {
            secret.len() <= PASSWORD_MAX && shannon_entropy(secret) >= min_bits
        }
        Check::BasicCredentials => is_basic_credentials(secret),
        Check::GithubChecksum => github_checksum_ok(secret),
    }
}

/// The longest value [`Check::Password`] takes for a password: 128 bytes (what systems
/// that cap a password's length allow) and their base64 (a Secret's `data`), with room.
pub const PASSWORD_MAX: usize = 256;

/// Whether `value` is the standard base64 (padded or not) of printable `user:password`
/// whose password is no placeholder and has an entropy of at least 2.5 bits per byte.
fn is_basic_credentials(value: &[u8]) -> bool {
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    use base64::Engine as _;
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    let Ok(plain) = LENIENT.decode(value) else { return false };
    let printable = plain.iter().all(|b| (0x20..0x7f).contains(b));
    let Some(colon) = plain.iter().position(|&b| b == b':') else { return false };
    let password = &plain[colon + 1..];
    printable
        && !password.is_empty()
        && !is_placeholder(password)
        && shannon_entropy(password) >= 2.5
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

/// The SHA-256, in lower-case hex, of the base64 characters of a key body: whitespace and
/// `\n`/`\r`/`\t` escapes (with any number of backslashes) left out, so a key reads the
/// same in a PEM file, a YAML block or a JSON string.
pub fn key_body_digest(body: &[u8]) -> String {
    let mut h = Sha256::new();
    let mut i = 0;
    while i < body.len() {
        let b = body[i];
        if b == b'\\' {
            while i < body.len() && body[i] == b'\\' {
                i += 1;
            }
            if i < body.len() && matches!(body[i], b'n' | b'r' | b't') {
                i += 1;
            }
            continue;
        }
        if b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=') {
            h.update([b]);
        }
        i += 1;
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// A key body (long enough to be one) whose digest is in [`KNOWN_PUBLIC_KEYS`].
fn is_known_public_key(secret: &[u8]) -> bool {
    secret.len() >= 60 && {
        let digest = key_body_digest(secret);
        KNOWN_PUBLIC_KEYS.contains(&digest.as_str())
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    memmem::find(haystack, needle).is_some()
}

/// `word` (given in lower case) written all lower case, all upper case or capitalised,
/// and not glued to a letter before it (so `counterexample` is no placeholder while
/// `my-example-key` is); with `open_end` it may run on into letters (`EXAMPLEKEY`),
/// otherwise it must end there too (`dummy-token`, not `Dummyx7Kq`).
fn has_word(s: &[u8], lower: &[u8], word: &[u8], open_end: bool) -> bool {
    let upper = word.to_ascii_uppercase();
    let mut capital = word.to_vec();
    capital[0] = capital[0].to_ascii_uppercase();
    memmem::find_iter(lower, word).any(|i| {
        let found = &s[i..i + word.len()];
        let cased = found == word || found == upper.as_slice() || found == capital.as_slice();
        let open = i == 0 || !s[i - 1].is_ascii_alphabetic();
        let close = open_end || s.get(i + word.len()).is_none_or(|c| !c.is_ascii_alphabetic());
        // All-caps `EXAMPLE` counts anywhere: `AKIAIOSFODNN7EXAMPLE`.
        cased && ((close && open) || (open_end && found == upper.as_slice()))
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
/// env expansion), `{{ .Values.x }}`, `%(name)s`, a value that is a name in `<…>`, or a
/// whole value that is a shell variable, `$VAR` (one case: `$password`, `$DB_PASS`).
/// Names start with a letter or `_` and have at least two characters, which keeps random
/// passwords with `$`, braces or brackets from looking like templates; a `$` and mixed
/// case (`$uperS3cret`) is a password.
fn is_template_reference(s: &[u8]) -> bool {
    let name = |b: &[u8]| {
        b.len() >= 2
            && (b[0].is_ascii_alphabetic() || b[0] == b'_')
            && b.iter().all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.'))
    };
    let name_or_default = |b: &[u8]| name(b.split(|&c| c == b':').next().unwrap_or(b));
    let words = |b: &[u8]| {
        b.iter().any(u8::is_ascii_alphabetic)
            && b.iter()
                .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.' | b' '))
    };
    let anything = |b: &[u8]| b.len() <= 256;
    let enclosed = |open: &[u8], close: &[u8], body_ok: &dyn Fn(&[u8]) -> bool| {
        memmem::find_iter(s, open).any(|i| {
            let rest = &s[i + open.len()..];
            memmem::find(rest, close).is_some_and(|end| body_ok(&rest[..end]))
        })
    };
    // `$DB_PASS2` (upper case, digits allowed) or `$password` (lower case, no digit): a
    // `$` before lower case and digits (`$ecret99`) is a password.
    let shell_variable = |b: &[u8]| {
        name(b)
            && b.len() <= 40
            && !b.contains(&b'.')
            && (b.iter().all(|c| !c.is_ascii_lowercase())
                || b.iter().all(|c| c.is_ascii_lowercase() || *c == b'_'))
    };
    (s.len() >= 3 && s[0] == b'<' && s[s.len() - 1] == b'>' && words(&s[1..s.len() - 1]))
        || s.strip_prefix(b"$").is_some_and(shell_variable)
        || enclosed(b"${", b"}", &name_or_default)
        || enclosed(b"$(", b")", &shell_variable)
        || enclosed(b"{{", b"}}", &anything)
        || enclosed(b"%(", b")s", &name)
        // A format string's field (`{self.password}`, Python's f-strings and `format`), a
        // batch file's `%NAME%`, a Makefile's `$$NAME`.
        || (s.len() >= 4 && s[0] == b'{' && s[s.len() - 1] == b'}' && name(&s[1..s.len() - 1]))
        || (s.len() >= 4 && s[0] == b'%' && s[s.len() - 1] == b'%' && name(&s[1..s.len() - 1]))
        || s.strip_prefix(b"$$").is_some_and(shell_variable)
}

/// A value that is the name of a credential, not one: upper-case words joined by `_`, one
/// of them `PASSWORD`, `PASS`, `PASSWD`, `PWD`, `TOKEN`, `SECRET`, `KEY` or
/// `CREDENTIALS` (`--password=DOCKER_PASSWORD` in help texts and READMEs).
fn is_credential_name(s: &[u8]) -> bool {
    const WORDS: &[&[u8]] =
        &[b"PASSWORD", b"PASS", b"PASSWD", b"PWD", b"TOKEN", b"SECRET", b"KEY", b"CREDENTIALS"];
    s.contains(&b'_')
        && s.iter().all(|&c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_')
        && s.split(|&c| c == b'_').any(|w| WORDS.contains(&w))
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

/// The class of a byte for runs: lower case, upper case, digit, or none.
fn class(c: u8) -> u8 {
    match c {
        b'a'..=b'z' => 1,
        b'A'..=b'Z' => 2,
        b'0'..=b'9' => 3,
        _ => 0,
    }
}

/// The length of the run of `s` (taking every `stride`-th byte) from its start: bytes of one
/// class, each the one before plus `step` (1 up the alphabet, -1 down, 0 repeated).
fn run_at(s: &[u8], stride: usize, step: i16) -> usize {
    let mut n = usize::from(s.first().is_some_and(|&c| class(c) != 0));
    while n > 0 {
        let (Some(&a), Some(&b)) = (s.get((n - 1) * stride), s.get(n * stride)) else { break };
        if class(a) != class(b) || i16::from(b) - i16::from(a) != step {
            break;
        }
        n += 1;
    }
    n
}

/// How many bytes of `s` are in runs of three or more bytes up or down the alphabet or the
/// digits, or repeated (`abcdef`, `123456`, `zyx`, `aaa`).
fn in_runs(s: &[u8]) -> usize {
    let mut covered = 0;
    let mut i = 0;
    while i < s.len() {
        let longest = [1, -1, 0].map(|step| run_at(&s[i..], 1, step)).into_iter().max();
        let run = longest.unwrap_or(1).max(1);
        if run >= 3 {
            covered += run;
        }
        i += run;
    }
    covered
}

/// A value typed rather than drawn: runs ([`in_runs`]) cover at least 60% of it
/// (`abc123xyz`, `abcde12345`, `AIzaSyABCDEFGHIJKLMNOPQRSTUVWXYZ012345`), or of each of its
/// halves taken a byte in two (`a1b2c3d4e5f6`). At least 6 bytes. A random value of that
/// length holds a run of three by chance now and then, never 60% of runs.
fn is_made_of_runs(s: &[u8]) -> bool {
    let mostly = |s: &[u8]| in_runs(s) * 5 >= s.len() * 3;
    let half = |from: usize| -> Vec<u8> { s.iter().skip(from).step_by(2).copied().collect() };
    s.len() >= 6 && (mostly(s) || (mostly(&half(0)) && mostly(&half(1))))
}

/// A printf format, not a value: the value is a verb (`%s`, `%v`, `%w`, `%q`, `%d`) then
/// nothing or the next string's word, in lower case but perhaps its first byte (`%wreading`,
/// `%sLocation`, `%sshield-fips.us-east-1`), as in the format strings compiled into Go
/// and C binaries (`invalid username/password: %s`), where a key's name meets the next
/// string. A random password's symbols and mixed case do not look like that.
fn is_format_string(s: &[u8]) -> bool {
    let Some(rest) = s.strip_prefix(b"%") else { return false };
    let Some((verb, next)) = rest.split_first() else { return false };
    let word = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit() || b"._-".contains(c);
    let tail = match next.split_first() {
        Some((first, tail)) if first.is_ascii_uppercase() => tail,
        _ => next,
    };
    b"svwqdxXfegtTpbcoU".contains(verb)
        && (next.is_empty() || (next.len() >= 4 && tail.iter().all(word)))
}

/// The words that name a credential, as values made of them use them (`password123`,
/// `newtoken123`, `MyPassword1`, `some+client+secret`, `secret%3Dpassword`).
const CREDENTIAL_WORDS: &[&[u8]] = &[b"password", b"passwd", b"secret", b"token", b"apikey"];

/// A value (already lower-cased) named after what it stands for: without its credential
/// words, and without runs ([`in_runs`]), fewer than 6 bytes are left (`password123`,
/// `Password01`, `newtoken123`, `secret%3Dpassword`). A drawn secret holds no such word, and
/// one that happens to (`PASSWORDXQ7Z2K`) keeps its random part.
fn is_made_of_credential_words(lower: &[u8]) -> bool {
    let mut rest = lower.to_vec();
    let mut found = false;
    for w in CREDENTIAL_WORDS {
        while let Some(at) = memmem::find(&rest, w) {
            rest.drain(at..at + w.len());
            found = true;
        }
    }
    found && rest.len() - in_runs(&rest) < 6
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::JwtKind;
    use crate::rules::examples::render;

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
            "$password",
            "$DB_PASS",
            "$RABBITMQ_PASSWORD2",
            "DOCKER_PASSWORD",
            "MY_API_TOKEN",
            "REGISTRY_PASS",
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
            // Runs typed rather than drawn (the peers' example keys).
            "abc123xyz",
            "abcde12345",
            "abc000def111",
            "x0x0x0x0x0x0",
            "a1b2c3d4e5f6a7b8",
            "AIzaSyABCDEFGHIJKLMNOPQRSTUVWXYZ0123456",
            "zyxwvu987654",
            "qwerty123456789",
            // Format strings compiled into binaries.
            "%wreading",
            "%sLocation",
            "%vfailed",
            // Named after what they stand for.
            "password123",
            "Password01",
            "newtoken123",
            "MYTOKEN1",
            "secret%3Dpassword",
            "123Abpassword",
        ] {
            assert!(is_placeholder(v.as_bytes()), "{v}");
        }
    }

    #[test]
    fn key_bodies_digest_the_same_in_every_encoding() {
        let body = render("{pembody:600}", 3);
        let text = String::from_utf8(body.clone()).unwrap();
        let digest = key_body_digest(&body);
        assert_eq!(digest.len(), 64);
        for variant in [
            text.replace('\n', "\\n"),
            text.replace('\n', "\\\\n"),
            text.replace('\n', "\r\n    "),
            text.replace('\n', ""),
        ] {
            assert_eq!(key_body_digest(variant.as_bytes()), digest);
        }
        assert_ne!(key_body_digest(&render("{pembody:600}", 4)), digest);
        // Random keys are not in the list of public ones.
        assert!(!is_placeholder(&body));
    }

    #[test]
    fn real_looking_values_are_not_placeholders() {
        for v in [
            "counterexample",
            "Dummyx7Kq",
            "s3cr3t-Pa55w0rd!",
            "postgres",
            "pa$$word",
            "$uperS3cretX9",
            "$3cret-Pass",
            "$ecret99",
            "$tr0ngpass1",
            "PASSWORDXQ7Z2K",
            "AKIAKEYQ2Z7XW5TR3M4N",
            "a<b>c",
            "{}",
        ] {
            assert!(!is_placeholder(v.as_bytes()), "{v}");
        }
    }

    #[test]
    fn random_secrets_are_never_placeholders() {
        let alphabets = ["{a:40}", "{b:40}", "{B:43}", "{x:40}", "{p:24}", "{b:88}", "{l:16}"];
        let short = ["{a:8}", "{a:12}", "{x:12}", "{p:10}", "{l:8}{d:4}"];
        for seed in 0..5000 {
            for t in alphabets.iter().chain(&short) {
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
        assert!(passes(Check::Jwt(JwtKind::Other), b"not a jwt"));
    }
}
