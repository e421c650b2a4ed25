//! Built-in detection rules: secret material found by its shape, not by a known value.
//!
//! The rule set is data ([`table::RULES`]): each [`RuleSpec`] names its literals, its
//! regex, how far around a literal a match may reach, an extra [`Check`] and generated
//! examples. [`Rules`] compiles it into one Aho-Corasick automaton over every rule's
//! literals; a buffer is searched once for those literals, and a rule's regex runs only on
//! the window around each of its literal hits, so a buffer without any literal costs one
//! prefilter pass. A match must then pass the rule's [`Check`] and must not be a
//! well-known placeholder ([`check::is_placeholder`]).
//!
//! Buffers are streamed like the matcher's: consecutive buffers of a file overlap by
//! [`Rules::overlap`] bytes, and each literal hit is handled in exactly one buffer — the
//! first whose window around it is complete (or the file's last).

pub mod check;
pub mod examples;
pub mod jwt;
pub mod prefilter;
pub mod table;
mod teddy;

use crate::finding::{JwtInsight, JwtKind, Severity};
use prefilter::Prefilter;
use regex_automata::meta::Regex;
use regex_automata::util::syntax;
use regex_automata::PatternID;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

/// One detection rule, as data.
#[derive(Clone, Copy, Debug)]
pub struct RuleSpec {
    /// Stable id, e.g. `pem-private-key`; reports and baselines name rules by it.
    pub id: &'static str,
    /// One line for `kresidue rules`.
    pub description: &'static str,
    /// Severity of the material itself (see the severity model in `docs/CONTRACT.md`).
    pub severity: Severity,
    /// Case-sensitive literals, at least one of which every match starts with (or, with
    /// `before > 0`, contains). No literal's key may be a prefix of another's in the whole
    /// table (a test checks).
    pub literals: &'static [Literal],
    /// The regex (`regex` crate syntax, on bytes). A group named `secret`, when present,
    /// is the secret part: previews and finding ids use it, checks test it. A group named
    /// `span`, when present, is what the finding's offset and length cover (so a
    /// delimiter the regex must consume, having no look-behind, is left out).
    pub pattern: &'static str,
    /// How many bytes before the start of a literal a match may begin.
    pub before: usize,
    /// How many bytes after the start of a literal a match may end.
    pub after: usize,
    /// The test a match's secret must pass besides the regex.
    pub check: Check,
    /// Example templates that must match (see [`examples`] for the template syntax).
    pub positive: &'static [&'static str],
    /// Example templates that must not match.
    pub negative: &'static [&'static str],
}

/// A literal of a rule, and the part of it the prefilter searches for: its *key*,
/// `text[key..key_end]`. Leading bytes that ordinary text is full of (`post` of
/// `postgres://`) are left out of the key and compared when the key is found; so are
/// trailing bytes that tell apart literals sharing a key (the label of
/// `-----BEGIN RSA PRIVATE KEY-----`): one search finds them all, and each rule runs only
/// where its own literal is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Literal {
    /// The literal.
    pub text: &'static str,
    /// Where in `text` the key starts.
    pub key: usize,
    /// Where in `text` the key ends.
    pub key_end: usize,
    /// The literal starts a token: it does not count where the two bytes before it are
    /// letters, digits or `_` (so `sk_test_` inside `task_test_` is no Stripe key).
    pub boundary: bool,
}

impl Literal {
    /// The part of the literal the prefilter searches for.
    pub fn key_text(&self) -> &'static str {
        &self.text[self.key..self.key_end]
    }
}

/// A literal searched for whole.
pub const fn lit(text: &'static str) -> Literal {
    Literal { text, key: 0, key_end: text.len(), boundary: false }
}

/// A literal searched for by `text[key..]`.
pub const fn lit_at(text: &'static str, key: usize) -> Literal {
    Literal { text, key, key_end: text.len(), boundary: false }
}

/// A literal searched for by `text[key..key_end]`.
pub const fn lit_in(text: &'static str, key: usize, key_end: usize) -> Literal {
    Literal { text, key, key_end, boundary: false }
}

/// A token prefix searched for whole, that must start a word ([`Literal::boundary`]).
pub const fn word(text: &'static str) -> Literal {
    Literal { text, key: 0, key_end: text.len(), boundary: true }
}

/// A token prefix searched for by `text[key..]`, that must start a word.
pub const fn word_at(text: &'static str, key: usize) -> Literal {
    Literal { text, key, key_end: text.len(), boundary: true }
}

/// Whether a literal that must start a word may start at `q` of `buf`: unless the two
/// bytes before it are letters, digits or `_`. One
/// such byte is not enough: it is what a length prefix (etcd's protobuf, bbolt), an
/// escape (`\n` in a JSON string) or a percent-encoding (`%3D`) puts before a token.
fn starts_word(buf: &[u8], q: usize) -> bool {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    q < 2 || !(word(buf[q - 2]) && word(buf[q - 1]))
}

/// A test beyond the regex, applied to the secret part of a match.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Check {
    /// Nothing more.
    None,
    /// Shannon entropy of at least this many bits per byte.
    Entropy(f64),
    /// The CRC-32 checksum GitHub puts in the last 6 characters of its tokens.
    GithubChecksum,
    /// Decodes as a JWT (header and payload are base64url JSON objects) of this kind; the
    /// decoded claims set the finding's severity (see [`jwt`]).
    Jwt(JwtKind),
    /// A password: Shannon entropy of at least this many bits per byte, and no longer
    /// than [`check::PASSWORD_MAX`] bytes (a longer value under a password's name is a
    /// blob: a SealedSecret's ciphertext, a hash list).
    Password(f64),
    /// The value of an HTTP `Basic` credential: standard base64 of `user:password`
    /// (printable, the password no placeholder). A value this rule reports is its own:
    /// a match of another rule inside it is not reported. A value it rejects (a token
    /// sent as `Basic`) is left to the other rules.
    BasicCredentials,
}

impl Check {
    /// Whether a match of a rule with this check claims its secret's bytes from the other
    /// rules (see [`Check::BasicCredentials`]).
    fn claims_value(self) -> bool {
        matches!(self, Check::BasicCredentials)
    }
}

/// How many bytes of regex work a rule may spend per byte of a buffer (plus
/// [`WORK_ALLOWANCE`]). A search is charged for every byte its regex looks at: from the
/// start of its window to the end of the last match it examined, or to the window's end
/// when it finds none that holds its literal. Ordinary data stays far below it (a CA
/// bundle of small certificates, each a PEM-literal hit whose key regexes fail, costs
/// ~25× its size); a file packed with one rule's literal (`users:` or `eyJhbGci` over and
/// over) would otherwise cost a window per literal — quadratic work that turns a scan
/// into hours.
pub const WORK_FACTOR: usize = 64;
/// How many bytes of regex and decoding work all the rules together may spend per byte
/// of a buffer (plus [`WORK_ALLOWANCE`]): a file packed with the literals of many rules at
/// once is bounded by this, not by [`WORK_FACTOR`] times the number of rules.
pub const TOTAL_WORK_FACTOR: usize = 4 * WORK_FACTOR;
/// Window bytes every rule may search in any buffer, so a small file is always searched
/// whole.
pub const WORK_ALLOWANCE: usize = 256 * 1024;
/// The work a check of a match is charged, in bytes of regex work, besides the length
/// of its secret: the placeholder filter and a JWT's decoding each cost about what the
/// regex spends on a kilobyte (measured on a file of JWT look-alikes).
pub const CHECK_COST: usize = 1024;
/// Bytes of work between two askings of the caller's stop (a signal, the deadline).
pub const STOP_EVERY: usize = 1 << 20;

/// How the search of a buffer ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Searched {
    /// Every literal hit was checked.
    Whole,
    /// A rule (or all of them together) ran out of its work budget and skipped some of its
    /// literal hits (see [`WORK_FACTOR`]): the caller says so.
    Flooded,
    /// The caller's stop said to stop: the rest of the buffer was not searched.
    Stopped,
}

/// A rule match in a buffer.
#[derive(Clone, Debug, PartialEq)]
pub struct RuleHit {
    /// Absolute offset of the first byte of the match.
    pub offset: u64,
    /// Length of the match.
    pub len: u32,
    /// Index of the rule in [`Rules::specs`].
    pub rule: usize,
    /// The secret part, relative to the start of the match.
    pub secret: Range<u32>,
    /// The material's severity: the rule's, or the decoded token's.
    pub severity: Severity,
    /// What a decoded JWT says about itself.
    pub token: Option<JwtInsight>,
    /// For a match inside a base64 blob ([`Rules::builtin`] decodes them): the secret as
    /// decoded. The match's offset and length then cover the base64 that encodes it.
    pub plain: Option<Box<[u8]>>,
}

/// Texts whose base64 marks a blob worth decoding and searching with the rules: the start
/// of a PEM block, of a Kubernetes object or kubeconfig, of a Docker config, of a JWT, of
/// AWS credentials, and tokens a Secret's `data:` holds whole. Each is searched for by the
/// base64 it encodes to at each of the three byte alignments ([`encoded_cores`]), so one
/// anywhere in a blob is found; the rules then run on the blob decoded from there on
/// ([`DECODE_WINDOW`] bytes of base64), and once more on blobs within it.
const DECODE_TRIGGERS: &[&str] = &[
    "-----BEGIN ",
    "apiVersion",
    "\"apiVersion\"",
    "{\"auths\"",
    "eyJhbGci",
    "eyJ0eXAi",
    "eyJraWQi",
    "[default]",
    "aws_access_key_id",
    "client-key-data",
    "ghp_",
    "gho_",
    "github_pat_",
    "glpat-",
    "xoxb-",
    "xoxp-",
    "sk_live_",
    "hvs.",
    "AKIA",
];

/// Bytes of base64 decoded from a trigger on (12 KiB decoded).
const DECODE_WINDOW: usize = 16 * 1024;
/// Bytes of base64 before a trigger decoded with it (four groups): the bytes of the text
/// before the trigger's first whole group (`--` of `-----BEGIN`) are in them.
const DECODE_BACK: usize = 16;
/// Layers of base64 decoded: a blob, and a blob within it.
const DECODE_DEPTH: u8 = 2;
/// The rule index of a decode trigger among a literal's rules.
const TRIGGER: usize = usize::MAX;

/// The base64 of `text` wherever it sits in a blob: for each of the three offsets of its
/// first byte within a 3-byte group, the 4-character groups made of its bytes alone (a
/// group that also encodes a neighbour's bits differs from blob to blob). Cores shorter
/// than 4 characters are left out.
fn encoded_cores(text: &str) -> Vec<String> {
    use base64::Engine as _;
    let bytes = text.as_bytes();
    let mut cores = Vec::new();
    for phase in 0..3 {
        // The first whole group starts at the byte where the offset comes round to 0.
        let first = (3 - phase) % 3;
        let whole = bytes.len().saturating_sub(first) / 3 * 3;
        if whole >= 3 {
            let core =
                base64::engine::general_purpose::STANDARD.encode(&bytes[first..first + whole]);
            cores.push(core);
        }
    }
    cores
}

/// Whether decoded bytes read as text: the rules' shapes are text, and a blob of random
/// bytes (a hash, a compressed file) is not worth searching.
fn reads_as_text(data: &[u8]) -> bool {
    let printable = data
        .iter()
        .filter(|&&b| (0x20..0x7f).contains(&b) || matches!(b, b'\n' | b'\r' | b'\t'))
        .count();
    data.len() >= 8 && printable * 10 >= data.len() * 9
}

struct Compiled {
    spec: &'static RuleSpec,
    /// Compiled when a literal of the rule is first found: most scans run a few of the
    /// rules, and compiling them all would cost every scan's start ~20 ms. Rules with the
    /// same pattern (the three JWT rules, which differ in their check) share it, compiled
    /// once.
    regex: Arc<OnceLock<Pattern>>,
}

/// A rule's regex and the indices of its `secret` and `span` groups: a group named
/// `secret` or `secret_<anything>` (and `span`, `span_<anything>`), so that alternatives
/// of one pattern can each name their own (a regex names a group once); the first that
/// took part in a match counts.
struct Pattern {
    regex: Regex,
    secret_groups: Vec<usize>,
    span_groups: Vec<usize>,
}

impl Pattern {
    /// Compiles the rule's pattern as `regex::bytes::Regex::new` would (any byte, not
    /// only UTF-8, can match), without the one-pass DFA: `regex` builds one for every
    /// pattern that allows it, to resolve capture groups, and for the rules' bounded
    /// repetitions (`{0,1024}`, `{6,256}`, …) it costs a quarter of the compile time
    /// (the 46 patterns: 12.1 ms, 8.9 ms without it) and memory (470 fewer page faults
    /// in a scan of the node benchmark). The rules' matches are short, and the bounded
    /// backtracker resolves their groups over the match instead.
    fn new(spec: &RuleSpec) -> anyhow::Result<Pattern> {
        let regex = Regex::builder()
            .configure(Regex::config().utf8_empty(false).onepass(false))
            .syntax(syntax::Config::new().utf8(false))
            .build(spec.pattern)
            .map_err(|e| anyhow::anyhow!("rule {}: bad pattern: {e}", spec.id))?;
        let groups = |kind: &str| -> Vec<usize> {
            let names = regex.group_info().pattern_names(PatternID::ZERO);
            names
                .enumerate()
                .filter(|(_, name)| {
                    name.is_some_and(|n| {
                        n.strip_prefix(kind).is_some_and(|t| t.is_empty() || t.starts_with('_'))
                    })
                })
                .map(|(i, _)| i)
                .collect()
        };
        let (secret_groups, span_groups) = (groups("secret"), groups("span"));
        Ok(Pattern { regex, secret_groups, span_groups })
    }
}

impl Compiled {
    /// The rule's pattern, compiled on first use.
    fn pattern(&self) -> &Pattern {
        self.regex.get_or_init(|| {
            Pattern::new(self.spec)
                .expect("every pattern compiles (checked when the rules were made)")
        })
    }
}

/// The compiled rule set of a scan. Read-only and shared by every worker.
pub struct Rules {
    rules: Vec<Compiled>,
    prefilter: Option<Prefilter>,
    overlap: usize,
    /// The largest `after` of any rule.
    max_after: usize,
    /// Seconds since the epoch, for JWT expiry.
    now: i64,
}

impl Rules {
    /// Compiles `specs`; `now` (seconds since the epoch) decides whether a token expired.
    /// Each rule's regex compiles at its first literal hit, so `specs` must be a table
    /// whose patterns a test compiles (the built-in one: `every_builtin_pattern_compiles`).
    pub fn new(specs: &'static [RuleSpec], now: i64) -> anyhow::Result<Rules> {
        Rules::compile(specs, now, false)
    }

    /// As [`Rules::new`], and with `decodes` the base64 blobs marked by
    /// [`DECODE_TRIGGERS`] are decoded and searched too.
    fn compile(specs: &'static [RuleSpec], now: i64, decodes: bool) -> anyhow::Result<Rules> {
        let mut rules: Vec<Compiled> = Vec::with_capacity(specs.len());
        let mut literals: Vec<(Literal, usize)> = Vec::new();
        for (i, spec) in specs.iter().enumerate() {
            // Specs are static tables: `every_builtin_pattern_compiles` compiles each one.
            let regex = match specs[..i].iter().position(|s| s.pattern == spec.pattern) {
                Some(j) => Arc::clone(&rules[j].regex),
                None => Arc::new(OnceLock::new()),
            };
            rules.push(Compiled { spec, regex });
            for &lit in spec.literals {
                if !(lit.key < lit.key_end && lit.text.get(lit.key..lit.key_end).is_some()) {
                    anyhow::bail!("rule {}: literal key is not a part of the literal", spec.id);
                }
                literals.push((lit, i));
            }
        }
        if decodes {
            let mut cores: Vec<String> =
                DECODE_TRIGGERS.iter().flat_map(|t| encoded_cores(t)).collect();
            cores.sort_unstable();
            cores.dedup();
            // Every key must be no prefix of another: a core that one of the rules' keys
            // or a shorter core starts (or that starts a rules' key) is left out, the
            // shorter one finding the blob as well.
            let keys: Vec<&str> = literals.iter().map(|(l, _)| l.key_text()).collect();
            let kept: Vec<String> = cores
                .iter()
                .filter(|c| {
                    !keys.iter().any(|k| k.starts_with(c.as_str()) || c.starts_with(k))
                        && !cores.iter().any(|o| o != *c && c.starts_with(o.as_str()))
                })
                .cloned()
                .collect();
            for core in kept {
                literals.push((lit(Box::leak(core.into_boxed_str())), TRIGGER));
            }
        }
        let prefilter = Prefilter::new(&literals)?;
        let window = if decodes { DECODE_WINDOW } else { 0 };
        let overlap = specs.iter().map(|s| s.before + s.after).max().unwrap_or(0).max(window);
        let max_after = specs.iter().map(|s| s.after).max().unwrap_or(0).max(window);
        Ok(Rules { rules, prefilter, overlap, max_after, now })
    }

    /// The built-in rule set, which also searches base64 blobs decoded.
    pub fn builtin(now: i64) -> Rules {
        Rules::compile(&table::RULES, now, true).expect("the built-in rules compile (tested)")
    }

    /// No rules at all.
    pub fn none() -> Rules {
        Rules::new(&[], 0).expect("an empty rule set compiles")
    }

    /// True when there is no rule.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The rules, in table order.
    pub fn specs(&self) -> impl Iterator<Item = &'static RuleSpec> + '_ {
        self.rules.iter().map(|r| r.spec)
    }

    /// The rule at `index`.
    pub fn spec(&self, index: usize) -> &'static RuleSpec {
        self.rules[index].spec
    }

    /// The literal key search, as `-v` names it (`none` without rules).
    pub fn key_search(&self) -> &'static str {
        self.prefilter.as_ref().map_or("none", Prefilter::name)
    }

    /// Bytes consecutive buffers of a stream must share so that every match is whole in
    /// some buffer.
    pub fn overlap(&self) -> usize {
        self.overlap
    }

    /// Finds rule matches in `buf` (starting at absolute offset `base`). Literal hits whose
    /// window ends within `buf[..done]` were handled by the previous buffer and are
    /// skipped; hits whose window runs past the end of `buf` are left to the next buffer,
    /// unless `last` (the file ends with `buf`). Appends to `hits`, unsorted.
    ///
    /// Returns false when a rule ran out of its work budget in this buffer (see
    /// [`WORK_FACTOR`]) and skipped some of its literal hits: the caller says so.
    pub fn find(
        &self,
        buf: &[u8],
        base: u64,
        done: usize,
        last: bool,
        hits: &mut Vec<RuleHit>,
    ) -> bool {
        self.find_until(buf, base, done, last, hits, &|| false) == Searched::Whole
    }

    /// [`Rules::find`], asking `stop` after every [`STOP_EVERY`] bytes of work whether to
    /// stop (a signal came, the deadline passed): however a buffer is packed, the search
    /// of it ends soon after `stop` says so.
    pub fn find_until(
        &self,
        buf: &[u8],
        base: u64,
        done: usize,
        last: bool,
        hits: &mut Vec<RuleHit>,
        stop: &dyn Fn() -> bool,
    ) -> Searched {
        let mut work = Work::new(buf.len(), stop);
        self.find_at_depth(buf, base, done, last, hits, 0, &mut work);
        work.outcome()
    }

    /// [`Rules::find`] in data `depth` layers of base64 deep, charging `work`.
    #[allow(clippy::too_many_arguments)]
    fn find_at_depth(
        &self,
        buf: &[u8],
        base: u64,
        done: usize,
        last: bool,
        hits: &mut Vec<RuleHit>,
        depth: u8,
        work: &mut Work<'_>,
    ) {
        let Some(prefilter) = &self.prefilter else { return };
        let first_new = hits.len();
        let decoding = self.rules.len();
        // A hit this far back had its whole window in the previous buffer, for every rule.
        let at = done.saturating_sub(self.max_after);
        if at >= buf.len() {
            return;
        }
        prefilter.each_key(buf, at, |targets, key_at| {
            for target in targets {
                // The literal starts before its key; a literal cut by the end of `buf`
                // has its window cut too, and is handled with the next buffer.
                let Some(q) = key_at.checked_sub(target.skip) else { continue };
                if buf.get(q..q + target.text.len()) != Some(target.text)
                    || (target.boundary && !starts_word(buf, q))
                {
                    continue;
                }
                // Rules that share a pattern (the three JWT rules) and a window search it
                // once: the match is the same, only their checks differ.
                type Key = (*const OnceLock<Pattern>, usize, usize);
                let mut shared: Option<(Key, Located, Verdict)> = None;
                for &ri in &target.rules {
                    if ri == TRIGGER {
                        // Decoded like a rule's window: in the first buffer that holds
                        // `DECODE_WINDOW` bytes from the trigger on, or the last.
                        let reach = q + DECODE_WINDOW;
                        if !(reach <= done || (reach > buf.len() && !last) || depth >= DECODE_DEPTH)
                            && work.may(decoding)
                        {
                            let cost = self.decode_at(buf, base, q, depth, hits, work);
                            work.charge(decoding, cost, true);
                        }
                        continue;
                    }
                    let rule = &self.rules[ri];
                    let reach = q + rule.spec.after;
                    if reach <= done || (reach > buf.len() && !last) {
                        continue;
                    }
                    let lo = q.saturating_sub(rule.spec.before);
                    let hi = reach.min(buf.len());
                    if !work.may(ri) {
                        continue;
                    }
                    let key = (Arc::as_ptr(&rule.regex), lo, hi);
                    let (located, verdict) = match &mut shared {
                        Some((k, located, verdict)) if *k == key => {
                            work.charge(ri, located.cost, false);
                            (&*located, verdict)
                        }
                        slot => {
                            let located = Located::search(rule.pattern(), &buf[lo..hi], q - lo);
                            work.charge(ri, located.cost, true);
                            let (_, located, verdict) =
                                slot.insert((key, located, Verdict::default()));
                            (&*located, verdict)
                        }
                    };
                    if let Some(m) = &located.found {
                        let window = &buf[lo..hi];
                        let cost = self.accept(ri, window, base + lo as u64, m, verdict, hits);
                        work.charge(ri, cost, true);
                    }
                }
            }
        });
        // A match inside a value another rule claimed (one it reports, found at this depth)
        // is that rule's.
        let claims: Vec<(usize, Range<u64>)> = hits[first_new..]
            .iter()
            .filter(|h| h.plain.is_none() && self.rules[h.rule].spec.check.claims_value())
            .map(|h| {
                (h.rule, h.offset + u64::from(h.secret.start)..h.offset + u64::from(h.secret.end))
            })
            .collect();
        if !claims.is_empty() {
            let claimed = |h: &RuleHit| {
                let from = h.offset + u64::from(h.secret.start);
                let to = h.offset + u64::from(h.secret.end);
                claims.iter().any(|(ri, c)| *ri != h.rule && c.start <= from && to <= c.end)
            };
            let mut i = first_new;
            while i < hits.len() {
                if claimed(&hits[i]) {
                    hits.swap_remove(i);
                } else {
                    i += 1;
                }
            }
        }
        // One secret found from two literals of a rule (`mysql+pymysql://` holds
        // `mysql://` twice over) is one hit: the earliest, longest match.
        // Sorted and deduplicated in place: most buffers have no hit, and none allocates.
        if hits.len() - first_new > 1 {
            let secret_at = |h: &RuleHit| (h.rule, h.offset + u64::from(h.secret.start));
            hits[first_new..].sort_by_key(|h| (secret_at(h), h.offset));
            let mut kept = first_new + 1;
            for i in first_new + 1..hits.len() {
                if secret_at(&hits[i]) != secret_at(&hits[kept - 1]) {
                    hits.swap(kept, i);
                    kept += 1;
                }
            }
            hits.truncate(kept);
        }
    }

    /// Decodes the base64 from `q` of `buf` (a trigger's position, where a 4-character
    /// group starts) on, up to [`DECODE_WINDOW`] bytes or the first byte that is not
    /// base64, and searches what it decodes to, when that reads as text. Matches found
    /// are reported at the base64 that encodes them, with the decoded secret. Returns the
    /// work it cost, in bytes, beyond what the search of the decoded text charged itself.
    fn decode_at(
        &self,
        buf: &[u8],
        base: u64,
        q: usize,
        depth: u8,
        hits: &mut Vec<RuleHit>,
        work: &mut Work<'_>,
    ) -> usize {
        use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
        use base64::Engine as _;
        const LENIENT: GeneralPurpose = GeneralPurpose::new(
            &base64::alphabet::STANDARD,
            GeneralPurposeConfig::new()
                .with_decode_padding_mode(DecodePaddingMode::Indifferent)
                .with_decode_allow_trailing_bits(true),
        );
        // Back over up to four whole groups of base64 before the trigger.
        let is_b64 = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/');
        let back =
            buf[q.saturating_sub(DECODE_BACK)..q].iter().rev().take_while(|&&b| is_b64(b)).count();
        let q = q - back / 4 * 4;
        let end = (q + DECODE_WINDOW).min(buf.len());
        let run = buf[q..end].iter().position(|&b| !is_b64(b)).unwrap_or(end - q);
        // Whole groups, and a last group padded with `=`.
        let mut n = run / 4 * 4;
        let rest = run - n;
        if rest >= 2 {
            let pad = buf[q + run..end].iter().take(4 - rest).take_while(|&&b| b == b'=').count();
            if rest + pad == 4 {
                n += 4;
            }
        }
        let Ok(decoded) = LENIENT.decode(&buf[q..q + n]) else { return run };
        if !reads_as_text(&decoded) {
            return run;
        }
        let mut inner = Vec::new();
        self.find_at_depth(&decoded, 0, 0, true, &mut inner, depth + 1, work);
        for h in inner {
            let start = h.offset as usize;
            let stop = start + h.len as usize;
            let plain = h.plain.clone().unwrap_or_else(|| {
                let secret = start + h.secret.start as usize..start + h.secret.end as usize;
                decoded[secret].into()
            });
            // The groups that encode the match's bytes.
            let from = q + start / 3 * 4;
            let to = (q + stop.div_ceil(3) * 4).min(q + n);
            hits.push(RuleHit {
                offset: base + from as u64,
                len: (to - from) as u32,
                rule: h.rule,
                secret: 0..(to - from) as u32,
                severity: h.severity,
                token: h.token,
                plain: Some(plain),
            });
        }
        run + decoded.len()
    }

    /// Keeps the match `m` of rule `ri` in `window` (at absolute `wbase`) when its secret
    /// passes the rule's check and is no placeholder. What rules of one pattern decide
    /// alike (whether the secret is a placeholder, what it decodes to as a JWT) is decided
    /// once, in `verdict`. Returns the work that cost: [`CHECK_COST`] and the secret's
    /// length for each decision made, none for one taken from `verdict`.
    fn accept(
        &self,
        ri: usize,
        window: &[u8],
        wbase: u64,
        m: &Matched,
        verdict: &mut Verdict,
        hits: &mut Vec<RuleHit>,
    ) -> usize {
        let rule = &self.rules[ri];
        let value = &window[m.secret.clone()];
        let mut cost = 0;
        let placeholder = *verdict.placeholder.get_or_insert_with(|| {
            cost += CHECK_COST + value.len();
            check::is_placeholder(value)
        });
        if placeholder {
            return cost;
        }
        let (severity, token) = match rule.spec.check {
            Check::Jwt(kind) => {
                let token = verdict.token.get_or_insert_with(|| {
                    cost += CHECK_COST + value.len();
                    jwt::decode(value, self.now)
                });
                match token {
                    Some(insight) if insight.kind == kind => {
                        (insight.severity(), Some(insight.clone()))
                    }
                    _ => return cost,
                }
            }
            c => {
                cost += value.len();
                if !check::passes(c, value) {
                    return cost;
                }
                (rule.spec.severity, None)
            }
        };
        hits.push(RuleHit {
            offset: wbase + m.whole.start as u64,
            len: m.whole.len() as u32,
            rule: ri,
            secret: (m.secret.start - m.whole.start) as u32..(m.secret.end - m.whole.start) as u32,
            severity,
            token,
            plain: None,
        });
        cost
    }
}

/// What the rules sharing a pattern decide alike of the match at one literal, once.
#[derive(Default)]
struct Verdict {
    placeholder: Option<bool>,
    token: Option<Option<JwtInsight>>,
}

/// The work a search of one buffer may do, and has done: bytes per rule (decoding last)
/// and in all, against [`WORK_FACTOR`] and [`TOTAL_WORK_FACTOR`].
struct Work<'a> {
    /// Made at the first literal hit: most buffers have none.
    spent: Vec<usize>,
    total: usize,
    rule_budget: usize,
    total_budget: usize,
    /// When `stop` is asked next, in bytes of `total`.
    ask_at: usize,
    stop: &'a dyn Fn() -> bool,
    flooded: bool,
    stopped: bool,
}

impl<'a> Work<'a> {
    fn new(len: usize, stop: &'a dyn Fn() -> bool) -> Work<'a> {
        Work {
            spent: Vec::new(),
            total: 0,
            rule_budget: WORK_FACTOR * len + WORK_ALLOWANCE,
            total_budget: TOTAL_WORK_FACTOR * len + WORK_ALLOWANCE,
            ask_at: STOP_EVERY,
            stop,
            flooded: false,
            stopped: false,
        }
    }

    /// Whether rule `ri` (or decoding, at the rules' count) may do more work. Once a
    /// budget is spent the buffer is flooded; once `stop` said so, nothing may.
    fn may(&mut self, ri: usize) -> bool {
        if self.stopped {
            return false;
        }
        let spent = self.spent.get(ri).copied().unwrap_or(0);
        if spent > self.rule_budget || self.total > self.total_budget {
            self.flooded = true;
            return false;
        }
        true
    }

    /// Charges rule `ri` with `n` bytes of work, and the total too when the work was done
    /// for it (`fresh`), not shared with a rule of the same pattern.
    fn charge(&mut self, ri: usize, n: usize, fresh: bool) {
        if self.spent.len() <= ri {
            self.spent.resize(ri + 1, 0);
        }
        self.spent[ri] += n;
        if fresh {
            self.total += n;
            if self.total >= self.ask_at {
                self.ask_at = self.total + STOP_EVERY;
                self.stopped = (self.stop)();
            }
        }
    }

    fn outcome(&self) -> Searched {
        if self.stopped {
            Searched::Stopped
        } else if self.flooded {
            Searched::Flooded
        } else {
            Searched::Whole
        }
    }
}

/// A match of a rule's pattern that holds its literal: the span a finding covers and its
/// secret part, relative to the window.
#[derive(Clone)]
struct Matched {
    whole: Range<usize>,
    secret: Range<usize>,
}

/// What the search of a window around a literal found, and what it cost.
#[derive(Clone)]
struct Located {
    found: Option<Matched>,
    /// Bytes of the window the regex looked at.
    cost: usize,
}

impl Located {
    /// Searches `window` for the match that holds the literal at `q`. Matches are found
    /// without their groups, in order, up to the first that holds `q` or starts after it
    /// (none later can hold it); only that one has its groups resolved. The cost is every
    /// byte looked at: up to the end of the last match examined, or the whole window.
    fn search(pattern: &Pattern, window: &[u8], q: usize) -> Located {
        use regex_automata::{Anchored, Input};
        for m in pattern.regex.find_iter(window) {
            if m.end() <= q {
                continue;
            }
            if m.start() > q {
                return Located { found: None, cost: m.end() };
            }
            let mut caps = pattern.regex.create_captures();
            let input = Input::new(window).span(m.range()).anchored(Anchored::Yes);
            pattern.regex.search_captures(&input, &mut caps);
            let all = caps.get_match().map_or(m.range(), |c| c.range());
            let first = |groups: &[usize]| groups.iter().find_map(|&g| caps.get_group(g));
            let whole = first(&pattern.span_groups).map_or(all.clone(), |s| s.range());
            let secret = first(&pattern.secret_groups)
                .map(|s| s.range())
                .filter(|s| whole.start <= s.start && s.end <= whole.end)
                .unwrap_or(whole.clone());
            return Located { found: Some(Matched { whole, secret }), cost: m.end() };
        }
        Located { found: None, cost: window.len() }
    }
}

/// Convenience for tests and benches: every rule hit in `data` searched as one buffer.
pub fn find_all(rules: &Rules, data: &[u8]) -> Vec<RuleHit> {
    let mut hits = Vec::new();
    let _complete = rules.find(data, 0, 0, true, &mut hits);
    hits.sort_by_key(|h| (h.offset, h.rule));
    // A match holding two literals (a block's BEGIN and END) is found from both.
    hits.dedup();
    hits
}

/// Searches `data` the way the scanner streams a file: buffers of `chunk` new bytes, each
/// carrying the last [`Rules::overlap`] bytes of the one before. With `end_known` the last
/// buffer is searched as the end (as a file read to the size it had when opened), else
/// (as a pod log's content) the end is searched afterwards, as a last call on the carry
/// alone. For tests: the result must equal [`find_all`] either way.
pub fn find_chunked(rules: &Rules, data: &[u8], chunk: usize, end_known: bool) -> Vec<RuleHit> {
    let overlap = rules.overlap();
    let mut hits = Vec::new();
    let mut pos = 0usize;
    let mut carry = 0usize;
    let mut ended = false;
    while pos < data.len() {
        let end = (pos + chunk).min(data.len());
        let base = (pos - carry) as u64;
        ended = end_known && end == data.len();
        let _complete = rules.find(&data[pos - carry..end], base, carry, ended, &mut hits);
        carry = overlap.min(end);
        pos = end;
    }
    if !ended {
        let _complete =
            rules.find(&data[pos - carry..pos], (pos - carry) as u64, carry, true, &mut hits);
    }
    hits.sort_by_key(|h| (h.offset, h.rule));
    hits.dedup();
    hits
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    static TEST_RULES: &[RuleSpec] = &[
        RuleSpec {
            id: "test-token",
            description: "a token",
            severity: Severity::High,
            literals: &[lit("tok_")],
            pattern: r"tok_(?P<secret>[a-z0-9]{12})\b",
            before: 0,
            after: 20,
            check: Check::None,
            positive: &[],
            negative: &[],
        },
        RuleSpec {
            id: "test-block",
            description: "a block with an end line",
            severity: Severity::Critical,
            literals: &[lit("BEGIN-"), lit_at("-END", 1)],
            pattern: r"BEGIN-[a-z]{4,200}-END",
            before: 210,
            after: 210,
            check: Check::None,
            positive: &[],
            negative: &[],
        },
    ];

    /// Inserts each text at its position in `filler`, highest first, so that no text
    /// lands inside another.
    fn plant(filler: &[u8], plants: &[(usize, Vec<u8>)]) -> Vec<u8> {
        let mut data = filler.to_vec();
        let mut plants = plants.to_vec();
        plants.sort_by_key(|p| std::cmp::Reverse(p.0));
        for (at, text) in &plants {
            let at = (*at).min(filler.len());
            data.splice(at..at, text.iter().copied());
        }
        data
    }

    fn sample() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            "[a-z0-9]{12}".prop_map(|s| format!(" tok_{s} ").into_bytes()),
            "[a-z]{4,150}".prop_map(|s| format!("BEGIN-{s}-END").into_bytes()),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        /// Streaming in buffers of any size finds exactly what one whole-buffer search
        /// finds: every match once, none cut short at a buffer edge.
        #[test]
        fn chunked_equals_whole(
            filler in prop::collection::vec(prop::sample::select(b" .-abtokBEGIN_END\n".to_vec()), 0..800),
            plants in prop::collection::vec((0usize..800, sample()), 0..6),
            chunk in 1usize..400,
            end_known in any::<bool>(),
        ) {
            let rules = Rules::new(TEST_RULES, 0).unwrap();
            let data = plant(&filler, &plants);
            let whole = find_all(&rules, &data);
            prop_assert_eq!(find_chunked(&rules, &data, chunk, end_known), whole.clone());
            for (_, text) in &plants {
                let found = whole.iter().any(|h| {
                    data[h.offset as usize..][..h.len as usize] == text.trim_ascii()[..]
                });
                prop_assert!(found, "planted sample not found whole");
            }
        }
    }

    /// A matcher of one value of token bytes.
    pub(crate) fn matcher_of(token: bool) -> crate::matcher::Matcher {
        let value =
            if token { &b"Zq0v7TokenValueForTheMatcher42"[..] } else { b"a value with spaces!" };
        let vals = [crate::kubectl::SecretValue {
            namespace: "ns".into(),
            name: "s".into(),
            key: "k".into(),
            value: value.to_vec(),
        }];
        let set = crate::fingerprint::FingerprintSet::build(&vals, "current", [7; 32]).0;
        crate::matcher::Matcher::new(vec![set])
    }

    #[test]
    fn every_builtin_pattern_compiles() {
        for spec in table::RULES.iter() {
            if let Err(e) = Pattern::new(spec) {
                panic!("{e}");
            }
        }
    }

    /// The JWT rules differ only in their check, and the six database URL rules only in
    /// their literals: each group's one pattern compiles once.
    #[test]
    fn rules_with_one_pattern_share_its_compiled_regex() {
        let rules = Rules::builtin(0);
        for (id, n) in [("jwt", 3), ("postgres-url-with-password", 6)] {
            let pattern = rules.rules.iter().find(|r| r.spec.id == id).unwrap().spec.pattern;
            let group: Vec<&Compiled> =
                rules.rules.iter().filter(|r| r.spec.pattern == pattern).collect();
            assert_eq!(group.len(), n, "{id}: the rules that share its pattern");
            assert!(group.iter().all(|r| Arc::ptr_eq(&r.regex, &group[0].regex)));
            let _ = group[1].pattern();
            assert!(group[0].regex.get().is_some(), "{id}: compiled for every rule sharing it");
            let distinct = |r: &&Compiled| r.spec.pattern != pattern;
            assert!(rules
                .rules
                .iter()
                .filter(distinct)
                .all(|r| !Arc::ptr_eq(&r.regex, &group[0].regex)));
        }
    }

    /// A database URL rule reports only URLs of its own schemes, though all six share one
    /// pattern that matches every scheme: it runs only at its own literals.
    #[test]
    fn a_shared_database_url_pattern_reports_each_scheme_under_its_own_rule() {
        let rules = Rules::builtin(0);
        let data = &examples::render(
            "a postgresql://app:{a:16}@db/app\n\
             b mysql+pymysql://app:{a:16}@db/app\n\
             c mongodb+srv://app:{a:16}@db/app\n\
             d rediss://app:{a:16}@db:6380/0\n\
             e amqps://app:{a:16}@mq/vh\n\
             f sqlserver://app:{a:16}@db\n",
            7,
        );
        let found: Vec<(u8, &str)> = find_all(&rules, data)
            .iter()
            .map(|h| (data[h.offset as usize - 2], rules.spec(h.rule).id))
            .collect();
        assert_eq!(
            found,
            [
                (b'a', "postgres-url-with-password"),
                (b'b', "mysql-url-with-password"),
                (b'c', "mongodb-url-with-password"),
                (b'd', "redis-url-with-password"),
                (b'e', "amqp-url-with-password"),
                (b'f', "sqlserver-url-with-password"),
            ]
        );
    }

    /// A token prefix glued to a word is no token (`task_test_…`), but one byte before it
    /// does not glue it: a length prefix in a binary record (etcd, bbolt), an escape in a
    /// JSON string. (Two do: a percent-encoding, `%3Dghp_…`, hides a token.)
    #[test]
    fn a_token_after_a_length_byte_or_an_escape_is_found() {
        let rules = Rules::builtin(0);
        let ghp = examples::render("{ghtoken:ghp}", 5);
        let sk = examples::render("sk_live_{a:24}", 5);
        let found = |data: Vec<u8>| find_all(&rules, &data).len();
        assert_eq!(found([b"\x0a7".as_slice(), &ghp, b"\x12"].concat()), 1, "after a length byte");
        assert_eq!(found([b"{\"a\":\"x\\n".as_slice(), &ghp, b"\"}"].concat()), 1, "after \\n");
        assert_eq!(found([b"7".as_slice(), &sk, b"\n"].concat()), 1, "after one byte at the start");
        assert_eq!(found([b"\"ta".as_slice(), &sk[2..], b"\"\n"].concat()), 0, "inside a word");
        assert_eq!(found([b"x ta".as_slice(), &sk[2..], b"\n"].concat()), 0, "inside a word");
    }

    /// The built-in rules find secrets inside base64 blobs, once nested, anywhere in the
    /// blob, and report them at the base64 that encodes them with the decoded secret;
    /// streamed in buffers of any size they find the same.
    #[test]
    fn secrets_in_base64_blobs_are_found_decoded() {
        let rules = Rules::builtin(0);
        let id = |h: &RuleHit| rules.spec(h.rule).id;
        let cases = [
            ("  tls.key: {b64:{pem:RSA PRIVATE KEY:1190}}\n", "pem-rsa-private-key"),
            ("data:\n  token: {b64:{ghtoken:ghp}}\n", "github-personal-access-token"),
            ("x: {b64:some text first, then {pem:PRIVATE KEY:300} and more}\n", "pem-pkcs8-private-key"),
            ("y: {b64:ab{pem:PRIVATE KEY:300}}\n", "pem-pkcs8-private-key"),
            (
                "kubeconfig: {b64:apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user:\n    client-key-data: {b64:{pem:EC PRIVATE KEY:121}}\n}\n",
                "pem-ec-private-key",
            ),
            ("auth: {b64:{{\"auths\":{{\"r.io\":{{\"auth\":\"{b64:u:{a:20}}\"}}}}\n", "docker-config-auth"),
        ];
        for (template, rule) in cases {
            for seed in 0..4 {
                let data = examples::render(template, seed);
                let hits = find_all(&rules, &data);
                let hit = hits.iter().find(|h| id(h) == rule && h.plain.is_some());
                let Some(hit) = hit else {
                    panic!("{rule} not found in {template} ({seed}): {hits:?}")
                };
                // The span is base64 of the blob.
                let span = &data[hit.offset as usize..][..hit.len as usize];
                assert!(
                    span.iter().all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(b)),
                    "{rule}"
                );
                for chunk in [1000, 4096, 7777] {
                    assert_eq!(
                        find_chunked(&rules, &data, chunk, seed % 2 == 0),
                        hits,
                        "{rule} in {chunk}-byte buffers"
                    );
                }
            }
        }
        // Base64 of ordinary text, of a certificate, of random bytes: nothing.
        for template in [
            "v: {b64:apiVersion: v1\nkind: ConfigMap\ndata:\n  a: b\n}\n",
            "ca.crt: {b64:{pem:CERTIFICATE:900}}\n",
            "blob: {b:400}\n",
        ] {
            for seed in 0..4 {
                let data = examples::render(template, seed);
                assert_eq!(find_all(&rules, &data), [], "{template}");
            }
        }
    }

    /// A match found from two of its rule's literals is one hit; distinct matches stay.
    #[test]
    fn a_match_found_from_two_literals_is_one_hit() {
        let rules = Rules::new(TEST_RULES, 0).unwrap();
        let data = b"BEGIN-abcd-END tok_k3q9x7m2w5zt BEGIN-efgh-END BEGIN-ijkl-END";
        let mut hits = Vec::new();
        assert!(rules.find(data, 0, 0, true, &mut hits));
        hits.sort_by_key(|h| h.offset);
        let found: Vec<(u64, u32)> = hits.iter().map(|h| (h.offset, h.len)).collect();
        assert_eq!(found, [(0, 14), (15, 16), (32, 14), (47, 14)]);
    }

    #[test]
    fn secret_group_and_literal_containment() {
        let rules = Rules::new(TEST_RULES, 0).unwrap();
        let data = b"x tok_k3q9x7m2w5zt y";
        let hits = find_all(&rules, data);
        assert_eq!(hits.len(), 1);
        let h = &hits[0];
        assert_eq!((h.offset, h.len), (2, 16));
        assert_eq!(&data[2 + h.secret.start as usize..2 + h.secret.end as usize], b"k3q9x7m2w5zt");
    }
}
