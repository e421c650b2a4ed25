//! Generated examples for rules: a tiny, deterministic template language.
//!
//! A rule's `positive` and `negative` examples are templates, never literal secrets:
//! [`render`] fills their random parts from a [`Prng`] seeded by the caller, so the tests
//! can try every example with several seeds and nothing that looks like a real credential
//! is ever committed. Only the rule-table tests use this module; nothing in a scan does.
//!
//! # Syntax
//! Text is copied as is, except for placeholders in braces:
//!
//! | placeholder | renders |
//! |---|---|
//! | `{{` | a literal `{` |
//! | `{C:N}` | `N` random characters of class `C` (below) |
//! | `{C:N-M}` | between `N` and `M` random characters of class `C` |
//! | `{[set]:N}` | `N` random characters from `set`, e.g. `{[A-Z2-7]:16}` (ranges allowed) |
//! | `{uuid}` | a random lowercase UUID (version 4 shaped) |
//! | `{now}`, `{now+S}`, `{now-S}` | the current Unix time in seconds, plus or minus `S` |
//! | `{pem:LABEL:N}` | `-----BEGIN LABEL-----`, `N` random bytes base64-encoded in 64-character lines, `-----END LABEL-----` (lines joined by `\n`, no final newline) |
//! | `{pembody:N}` | just the 64-character lines of `N` random bytes (PuTTY keys, custom PEM headers) |
//! | `{ghtoken:P}` | a GitHub token `P_` + 30 random base62 + its 6-character checksum |
//! | `{ghtoken-bad:P}` | the same with a wrong checksum |
//! | `{b64:T}` | standard, padded base64 of the rendered template `T` |
//! | `{b64url:T}` | unpadded base64url of the rendered template `T` |
//! | `{json:T}` | the rendered `T` escaped for the inside of a JSON string |
//! | `{crlf:T}` | the rendered `T` with every `\n` turned into `\r\n` |
//! | `{jwt:T}` | a JWT: header `{"alg":"RS256","kid":…}`, payload the rendered `T` (a JSON object template), a random 256-byte signature; all base64url without padding |
//!
//! Classes: `u` upper case, `l` lower case, `d` digits, `a` alphanumeric (base62), `x` lower
//! hex, `X` upper hex, `b` standard base64 (`A-Za-z0-9+/`), `B` base64url (`A-Za-z0-9-_`),
//! `p` printable ASCII except space, quotes, backslash and `@:/` (safe in URLs, YAML and
//! JSON strings alike).
//!
//! A `}` that closes no placeholder is literal, so a JSON object is written `{{"a":1}`.
//! The arguments of `b64`, `b64url`, `json`, `crlf` and `jwt` are templates themselves
//! and may nest placeholders; inside them a `}` first balances an earlier `{{` (so
//! `{jwt:{{"exp":{now+60}}}` is a JWT whose payload is `{"exp":…}`), and only an unbalanced
//! `}` closes the placeholder. Every other placeholder ends at its first `}`. `render`
//! panics on a malformed template: templates are constants, and the rule-table tests
//! render them all.
//!
//! Everything is a function of the template and the seed, except `{now…}`, which reads the
//! system clock (JWT expiry examples need real time).

use super::check::BASE62;
use crate::prng::Prng;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;

const UPPER: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ";
const LOWER: &[u8] = b"abcdefghijklmnopqrstuvwxyz";
const DIGITS: &[u8] = b"0123456789";
const HEX_LOWER: &[u8] = b"0123456789abcdef";
const HEX_UPPER: &[u8] = b"0123456789ABCDEF";
const BASE64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const BASE64URL: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const PRINTABLE: &[u8] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789!#$%&()*+,-.;<=>?[]^_{|}~";

/// Renders an example template into bytes, deterministically for a given `seed` (see the
/// module docs for the syntax). Panics on a malformed template.
pub fn render(template: &str, seed: u64) -> Vec<u8> {
    let mut r = Renderer { rng: Prng::new(seed), now: None };
    let mut p = Parser { src: template.as_bytes(), at: 0, template };
    r.seq(&mut p, false)
}

struct Parser<'a> {
    src: &'a [u8],
    at: usize,
    template: &'a str,
}

impl Parser<'_> {
    fn peek(&self, k: usize) -> Option<u8> {
        self.src.get(self.at + k).copied()
    }

    /// The raw text up to the next `}`, which is consumed.
    fn until_close(&mut self) -> String {
        let start = self.at;
        let len = self.src[start..]
            .iter()
            .position(|&b| b == b'}')
            .unwrap_or_else(|| self.fail("unterminated placeholder"));
        self.at = start + len + 1;
        self.template[start..start + len].to_owned()
    }

    fn fail(&self, what: &str) -> ! {
        panic!("template {:?}: {what} at byte {}", self.template, self.at)
    }
}

struct Renderer {
    rng: Prng,
    /// The clock, read once per render so that every `{now…}` agrees.
    now: Option<i64>,
}

impl Renderer {
    /// Renders text and placeholders until the end of input, or (when `nested`) until the
    /// `}` that closes the enclosing placeholder, which is consumed. Inside a nested
    /// template a `}` balances an earlier `{{` before it can close anything.
    fn seq(&mut self, p: &mut Parser, nested: bool) -> Vec<u8> {
        let mut out = Vec::new();
        let mut open = 0usize;
        while let Some(b) = p.peek(0) {
            match (b, p.peek(1)) {
                (b'{', Some(b'{')) => {
                    out.push(b'{');
                    open += 1;
                    p.at += 2;
                }
                (b'{', _) => {
                    p.at += 1;
                    self.placeholder(p, &mut out);
                }
                (b'}', _) if nested && open == 0 => {
                    p.at += 1;
                    return out;
                }
                (b'}', _) => {
                    out.push(b);
                    open = open.saturating_sub(1);
                    p.at += 1;
                }
                _ => {
                    out.push(b);
                    p.at += 1;
                }
            }
        }
        if nested {
            p.fail("unterminated nested template");
        }
        out
    }

    /// Renders one placeholder; `p` is just past its `{`.
    fn placeholder(&mut self, p: &mut Parser, out: &mut Vec<u8>) {
        let name_len = p.src[p.at..]
            .iter()
            .position(|&b| b == b':' || b == b'}')
            .unwrap_or_else(|| p.fail("unterminated placeholder"));
        let name = &p.template[p.at..p.at + name_len];
        if let Some(set) = name.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            p.at += name_len + 1;
            let set = expand_set(set);
            let spec = p.until_close();
            let n = self.count(&spec, p);
            out.extend(self.rng.chars(&set, n).into_bytes());
            return;
        }
        let has_args = p.src[p.at + name_len] == b':';
        p.at += name_len + 1;
        match name {
            "b64" | "b64url" | "json" | "crlf" | "jwt" => {
                if !has_args {
                    p.fail("missing template argument");
                }
                let inner = self.seq(p, true);
                match name {
                    "b64" => out.extend(STANDARD.encode(&inner).into_bytes()),
                    "b64url" => out.extend(URL_SAFE_NO_PAD.encode(&inner).into_bytes()),
                    "json" => json_escape(&inner, out),
                    "crlf" => {
                        for b in inner {
                            if b == b'\n' {
                                out.push(b'\r');
                            }
                            out.push(b);
                        }
                    }
                    _ => self.jwt(&inner, out),
                }
            }
            _ => {
                let args = if has_args { p.until_close() } else { String::new() };
                self.simple(name, &args, p, out);
            }
        }
    }

    /// Placeholders whose arguments are plain text.
    fn simple(&mut self, name: &str, args: &str, p: &Parser, out: &mut Vec<u8>) {
        match name {
            "uuid" => out.extend(self.rng.uuid().into_bytes()),
            "pem" => {
                let (label, n) = args.rsplit_once(':').unwrap_or_else(|| p.fail("pem needs L:N"));
                let n = self.count(n, p);
                out.extend(format!("-----BEGIN {label}-----\n").into_bytes());
                self.pem_body(n, out);
                out.extend(format!("\n-----END {label}-----").into_bytes());
            }
            "pembody" => {
                let n = self.count(args, p);
                self.pem_body(n, out);
            }
            "ghtoken" | "ghtoken-bad" => {
                if args.is_empty() {
                    p.fail("ghtoken needs a prefix");
                }
                let body = self.rng.chars(BASE62, 30).into_bytes();
                let mut sum = super::check::github_checksum(&body);
                if name == "ghtoken-bad" {
                    // Any other base62 digit in any position makes the checksum wrong.
                    let i = self.rng.below(6);
                    let pos = BASE62.iter().position(|&c| c == sum[i]).expect("base62 digit");
                    sum[i] = BASE62[(pos + 1 + self.rng.below(61)) % 62];
                }
                out.extend(args.bytes());
                out.push(b'_');
                out.extend(body);
                out.extend(sum);
            }
            _ if name == "now" || name.starts_with("now+") || name.starts_with("now-") => {
                let now = *self.now.get_or_insert_with(unix_now);
                let delta: i64 = match name.as_bytes().get(3) {
                    None => 0,
                    Some(&sign) => {
                        let d: i64 = name[4..].parse().unwrap_or_else(|_| p.fail("bad {now±S}"));
                        if sign == b'+' {
                            d
                        } else {
                            -d
                        }
                    }
                };
                out.extend((now + delta).to_string().into_bytes());
            }
            _ => {
                let set: &[u8] = match name {
                    "u" => UPPER,
                    "l" => LOWER,
                    "d" => DIGITS,
                    "a" => BASE62,
                    "x" => HEX_LOWER,
                    "X" => HEX_UPPER,
                    "b" => BASE64,
                    "B" => BASE64URL,
                    "p" => PRINTABLE,
                    _ => p.fail(&format!("unknown placeholder {name:?}")),
                };
                let n = self.count(args, p);
                out.extend(self.rng.chars(set, n).into_bytes());
            }
        }
    }

    /// `N` or `N-M` (a random count in that inclusive range).
    fn count(&mut self, spec: &str, p: &Parser) -> usize {
        let num = |s: &str| s.trim().parse::<usize>().unwrap_or_else(|_| p.fail("bad count"));
        match spec.split_once('-') {
            Some((lo, hi)) => {
                let (lo, hi) = (num(lo), num(hi));
                assert!(lo <= hi, "template {:?}: empty range {spec}", p.template);
                lo + self.rng.below(hi - lo + 1)
            }
            None => num(spec),
        }
    }

    fn pem_body(&mut self, n: usize, out: &mut Vec<u8>) {
        let text = STANDARD.encode(self.rng.bytes(n));
        for (i, line) in text.as_bytes().chunks(64).enumerate() {
            if i > 0 {
                out.push(b'\n');
            }
            out.extend(line);
        }
    }

    fn jwt(&mut self, payload: &[u8], out: &mut Vec<u8>) {
        let kid = self.rng.chars(BASE64URL, 43);
        let header = format!(r#"{{"alg":"RS256","kid":"{kid}"}}"#);
        out.extend(URL_SAFE_NO_PAD.encode(header).into_bytes());
        out.push(b'.');
        out.extend(URL_SAFE_NO_PAD.encode(payload).into_bytes());
        out.push(b'.');
        out.extend(URL_SAFE_NO_PAD.encode(self.rng.bytes(256)).into_bytes());
    }
}

/// `A-Z2-7` -> the bytes of those ranges; any other byte stands for itself.
fn expand_set(spec: &str) -> Vec<u8> {
    let s = spec.as_bytes();
    let mut set = Vec::new();
    let mut i = 0;
    while i < s.len() {
        if i + 2 < s.len() && s[i + 1] == b'-' {
            set.extend(s[i]..=s[i + 2]);
            i += 3;
        } else {
            set.push(s[i]);
            i += 1;
        }
    }
    assert!(!set.is_empty(), "empty character set [{spec}]");
    set
}

/// Escapes `raw` as Go's and serde's JSON encoders do for the inside of a string.
fn json_escape(raw: &[u8], out: &mut Vec<u8>) {
    for &b in raw {
        match b {
            b'"' => out.extend(b"\\\""),
            b'\\' => out.extend(b"\\\\"),
            b'\n' => out.extend(b"\\n"),
            b'\r' => out.extend(b"\\r"),
            b'\t' => out.extend(b"\\t"),
            0..=0x1f => out.extend(format!("\\u{b:04x}").into_bytes()),
            _ => out.push(b),
        }
    }
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(template: &str, seed: u64) -> String {
        String::from_utf8(render(template, seed)).expect("templates render ASCII")
    }

    #[test]
    fn plain_text_and_escaped_braces_are_copied() {
        assert_eq!(text("a: b\n", 1), "a: b\n");
        assert_eq!(text(r#"{{"k":{{"v":1}}"#, 1), r#"{"k":{"v":1}}"#);
        assert_eq!(text("x}y}}", 1), "x}y}}");
    }

    #[test]
    fn same_seed_same_output_other_seed_other_output() {
        let t = "id={a:20} key={b:40} {pem:RSA PRIVATE KEY:300} {ghtoken:ghp} {uuid}";
        assert_eq!(render(t, 7), render(t, 7));
        assert_ne!(render(t, 7), render(t, 8));
    }

    #[test]
    fn classes_have_their_length_and_alphabet() {
        let cases: &[(&str, &dyn Fn(u8) -> bool)] = &[
            ("u", &|c| c.is_ascii_uppercase()),
            ("l", &|c| c.is_ascii_lowercase()),
            ("d", &|c| c.is_ascii_digit()),
            ("a", &|c| c.is_ascii_alphanumeric()),
            ("x", &|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)),
            ("X", &|c| c.is_ascii_digit() || (b'A'..=b'F').contains(&c)),
            ("b", &|c| c.is_ascii_alphanumeric() || c == b'+' || c == b'/'),
            ("B", &|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'),
            ("p", &|c| c.is_ascii_graphic() && !b"\"'`\\@:/".contains(&c)),
            ("[A-Z2-7]", &|c| c.is_ascii_uppercase() || (b'2'..=b'7').contains(&c)),
        ];
        for (class, ok) in cases {
            for seed in 0..20 {
                let out = render(&format!("{{{class}:64}}"), seed);
                assert_eq!(out.len(), 64, "class {class}");
                assert!(out.iter().all(|&c| ok(c)), "class {class}: {out:?}");
            }
        }
        // Over many draws every member of a small class shows up.
        let hex = render("{x:4000}", 3);
        assert!(HEX_LOWER.iter().all(|c| hex.contains(c)));
    }

    #[test]
    fn ranges_stay_in_bounds() {
        let lens: Vec<usize> = (0..200).map(|s| render("{a:5-9}", s).len()).collect();
        assert!(lens.iter().all(|l| (5..=9).contains(l)));
        assert!(lens.contains(&5) && lens.contains(&9));
    }

    #[test]
    fn pem_blocks_are_well_formed() {
        let pem = text("{pem:EC PRIVATE KEY:121}", 5);
        let lines: Vec<&str> = pem.lines().collect();
        assert_eq!(lines[0], "-----BEGIN EC PRIVATE KEY-----");
        assert_eq!(*lines.last().unwrap(), "-----END EC PRIVATE KEY-----");
        let body: String = lines[1..lines.len() - 1].concat();
        assert!(lines[1..lines.len() - 2].iter().all(|l| l.len() == 64));
        assert_eq!(STANDARD.decode(body).unwrap().len(), 121);
        assert_eq!(text("{pembody:192}", 1).lines().count(), 4);
    }

    #[test]
    fn github_tokens_carry_a_good_or_a_bad_checksum() {
        for seed in 0..50 {
            let good = render("{ghtoken:ghp}", seed);
            let bad = render("{ghtoken-bad:ghs}", seed);
            assert_eq!(good.len(), 40);
            assert!(good.starts_with(b"ghp_") && bad.starts_with(b"ghs_"));
            assert_eq!(super::super::check::github_checksum(&good[4..34]), good[34..]);
            assert_ne!(super::super::check::github_checksum(&bad[4..34]), bad[34..]);
        }
    }

    #[test]
    fn nested_templates_encode_their_rendering() {
        let b = text("{b64:{a:8}:{a:12}}", 9);
        let raw = String::from_utf8(STANDARD.decode(&b).unwrap()).unwrap();
        assert_eq!((raw.len(), raw.as_bytes()[8]), (21, b':'));
        assert_eq!(text("{b64url:{{}}", 1), URL_SAFE_NO_PAD.encode("{}"));
        assert_eq!(text("{json:a\"b\\c\nd}", 1), r#"a\"b\\c\nd"#);
        assert_eq!(text("{crlf:a\nb}", 1), "a\r\nb");
        // Nested placeholders may close together; `}` balances `{{` first.
        assert_eq!(text("{b64:{json:{{\"k\":{{}}}}", 1), STANDARD.encode(r#"{\"k\":{}}"#));
    }

    #[test]
    fn jwts_have_three_base64url_parts_and_real_time() {
        let t = text(r#"{jwt:{{"iss":"test","exp":{now+3600},"iat":{now}}}"#, 4);
        let parts: Vec<&str> = t.split('.').collect();
        assert_eq!(parts.len(), 3);
        let header = URL_SAFE_NO_PAD.decode(parts[0]).unwrap();
        assert!(header.starts_with(br#"{"alg":"RS256","kid":""#));
        let payload: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
        let (exp, iat) = (payload["exp"].as_i64().unwrap(), payload["iat"].as_i64().unwrap());
        assert_eq!(exp - iat, 3600);
        assert!((iat - unix_now()).abs() < 60);
        assert_eq!(URL_SAFE_NO_PAD.decode(parts[2]).unwrap().len(), 256);
    }

    #[test]
    fn uuids_look_like_v4() {
        let u = text("{uuid}", 11);
        assert_eq!(u.len(), 36);
        assert_eq!((&u[8..9], &u[14..15]), ("-", "4"));
    }

    #[test]
    #[should_panic(expected = "unknown placeholder")]
    fn unknown_placeholders_panic() {
        render("{nope:3}", 0);
    }

    #[test]
    #[should_panic(expected = "unterminated")]
    fn unterminated_placeholders_panic() {
        render("{a:3", 0);
    }
}
