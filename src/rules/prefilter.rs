//! The rules' literal prefilter: one SIMD pass over a buffer for every rule's key.
//!
//! Each [`Literal`] of a rule is searched for by its *key*, the part of it from
//! [`Literal::key`] on; a key hit is then checked against the whole literal. Keys are
//! picked in the table to be rare in ordinary text (`es://` for `postgres://`, whose
//! leading `post` is everywhere).
//!
//! The search is aho-corasick's Teddy: per 32 bytes, a few shuffles match the first four
//! bytes of every key at once, each key assigned to one of 8 *buckets*; a position whose
//! bytes fit a bucket's byte sets (tested a nibble at a time) is verified against that
//! bucket's keys. A bucket holding keys that start alike (`ghp_`, `gho_`) has tight
//! byte sets; one holding `sql:`, `AKIA` and `hvs.` accepts most of their mix too
//! (`sq…`, `hk…`), and every such position costs a verification. How keys share buckets
//! therefore decides the prefilter's speed: on a node's logs and configs, a careless
//! assignment is five to ten times slower than a tuned one.
//!
//! Teddy puts the first key of each distinct (low-nibble) prefix in bucket
//! `7 - id % 8`, where `id` is the key's position in the list it is built from, and
//! later keys with a seen prefix in that prefix's bucket. [`BUCKETS`] is the assignment
//! tuned for the built-in keys (by the `tune` tool at the bottom of this file, on the
//! node benchmark's generated tree and a Debian host's `/usr/lib` and `/var/log`; when
//! the kubeconfig key became `sers:\n` without a re-tune, the nibble tables let `user`
//! through as that bucket's cross-product, and 1.63M positions of the node tree were
//! candidates; re-tuned, 0.48M); the prefilter deals the keys in the order that
//! reproduces it. A key set it does not
//! cover (a custom rule set) gets aho-corasick's own choice. Either way the matches are
//! the same; only the speed differs, which `cargo bench --bench scan` measures.

use super::teddy::Teddy512;
use super::Literal;
use crate::matcher::{KeyMarks, KeyScan};
use aho_corasick::{packed, AhoCorasick, Input, MatchKind, Span};

/// Teddy's bucket count when it runs on 256-bit vectors with 8 buckets ("slim").
const TEDDY_BUCKETS: usize = 8;
/// The bytes of a key Teddy matches with its vector masks.
const TEDDY_MASK: usize = 4;

/// The built-in keys in their tuned Teddy buckets (see the module docs). Every key of
/// [`super::table::RULES`] is here exactly once (a test checks); so that dealing can
/// reproduce it, bucket sizes, counted in distinct prefixes, differ by at most one, the
/// larger ones first.
#[rustfmt::skip]
pub static BUCKETS: [&[&str]; TEDDY_BUCKETS] = [
    &["is://", "iss://", "hvs.", "mqps://", "--token", "b_pat_"],
    &["xoxe-", "xoxp-", "ntKey=", "n-secret", "xoxb-", "xoxr-", "whsec_"],
    &["apToken", "etbox:", "eyJhbGci", "eyJ0eXAi", "PuTTY-User-Key-File-", "eyJraWQi"],
    &["esql+", "esql://", "es://", "rk_live_", "rk_test_", "riadb+", "riadb://", "gho_"],
    &["uths\"", "xoxa-", "aesgcm:", "aescbc:", "glpat-", "_account\""],
    &["-BEGIN ", "ASIA", "AKIA", "mqp://", "hvb.", "hvr.", "sql://", "sql+"],
    &["ghu_", "ghr_", "glptt-", "ks.slack.com/", "ghs_", "ghp_", "lserver://"],
    &["sk_test_", "gldt-", "sers:\n", "glrt-", "ngodb+srv://", "ngodb://", "sk_live_", "y-data"],
];

/// A literal as the prefilter sees it: its text, where its key starts, and the rules
/// (indices into [`super::Rules`]) it belongs to.
pub(super) struct Target {
    pub text: &'static [u8],
    pub skip: usize,
    pub rules: Vec<usize>,
}

/// The compiled prefilter.
pub(super) struct Prefilter {
    search: Search,
    /// For each pattern id of `search`, the literals whose key it is.
    targets: Vec<Vec<Target>>,
}

enum Search {
    /// Our Teddy on 512-bit vectors, with the tuned buckets (where the CPU has AVX-512BW).
    Teddy512(Box<Teddy512>),
    /// aho-corasick's Teddy with the tuned bucket order.
    Teddy(packed::Searcher),
    /// aho-corasick's own choice (Teddy when it can, an automaton otherwise).
    Automaton(AhoCorasick),
}

impl Prefilter {
    /// Compiles the keys of `literals` (each with the rule it belongs to); `None` when
    /// there is none.
    pub fn new(literals: &[(Literal, usize)]) -> anyhow::Result<Option<Prefilter>> {
        let mut keys: Vec<&'static str> = Vec::new();
        let mut targets: Vec<Vec<Target>> = Vec::new();
        for &(lit, rule) in literals {
            let key = lit.key_text();
            let k = match keys.iter().position(|&k| k == key) {
                Some(k) => k,
                None => {
                    keys.push(key);
                    targets.push(Vec::new());
                    keys.len() - 1
                }
            };
            match targets[k].iter_mut().find(|t| t.text == lit.text.as_bytes()) {
                Some(t) => t.rules.push(rule),
                None => targets[k].push(Target {
                    text: lit.text.as_bytes(),
                    skip: lit.key,
                    rules: vec![rule],
                }),
            }
        }
        if keys.is_empty() {
            return Ok(None);
        }
        if let Some(order) = deal(&keys, &BUCKETS) {
            let search = match Teddy512::new(&dealt(&keys, &order)) {
                Some(ours) => Some(Search::Teddy512(Box::new(ours))),
                None => aho_teddy(order.iter().map(|&k| keys[k])).map(Search::Teddy),
            };
            if let Some(search) = search {
                let targets = order.iter().map(|&k| std::mem::take(&mut targets[k])).collect();
                return Ok(Some(Prefilter { search, targets }));
            }
        }
        let automaton = AhoCorasick::builder().match_kind(MatchKind::LeftmostFirst).build(&keys)?;
        Ok(Some(Prefilter { search: Search::Automaton(automaton), targets }))
    }

    /// The first key hit in `buf[at..]`: the literals it may belong to, and where the key
    /// starts.
    pub fn find(&self, buf: &[u8], at: usize) -> Option<(&[Target], usize)> {
        let (id, start) = match &self.search {
            Search::Teddy512(t) => t.find(buf, at, buf.len())?,
            Search::Teddy(s) => {
                let m = s.find_in(buf, Span { start: at, end: buf.len() })?;
                (m.pattern().as_usize(), m.start())
            }
            Search::Automaton(a) => {
                let m = a.find(Input::new(buf).span(at..buf.len()))?;
                (m.pattern().as_usize(), m.start())
            }
        };
        Some((&self.targets[id], start))
    }

    /// Calls `f` with each key hit in `buf[at..]`, in order, as [`Prefilter::find`] finds
    /// them one after the other. Where `marks` cover the buffer (a pass with
    /// [`Prefilter::key_scan`] marked them), only the marked positions are tested; the
    /// rest is searched.
    pub fn each_key(
        &self,
        buf: &[u8],
        at: usize,
        marks: &KeyMarks,
        mut f: impl FnMut(&[Target], usize),
    ) {
        let covered = marks.covered_in(buf);
        match &self.search {
            Search::Teddy512(t) if !covered.is_empty() => {
                // Every key hit that starts in `from..end`, searched.
                let search = |from: usize, end: usize, f: &mut dyn FnMut(&[Target], usize)| {
                    let mut at = from;
                    while let Some((id, start)) = t.find(buf, at, end) {
                        f(&self.targets[id], start);
                        at = start + 1;
                    }
                };
                search(at, covered.start, &mut f);
                marks.each(buf, |pos| {
                    if let Some(id) = (pos >= at).then(|| t.key_at(buf, pos)).flatten() {
                        f(&self.targets[id], pos);
                    }
                });
                search(at.max(covered.end), buf.len(), &mut f);
            }
            _ => {
                let mut at = at;
                while let Some((targets, start)) = self.find(buf, at) {
                    f(targets, start);
                    at = start + 1;
                }
            }
        }
    }

    /// The key search, as `-v` names it.
    pub fn name(&self) -> &'static str {
        match &self.search {
            Search::Teddy512(t) if t.uses_byte_tables() => "Teddy, 512-bit, byte tables",
            Search::Teddy512(_) => "Teddy, 512-bit, nibble tables",
            Search::Teddy(_) => "Teddy (aho-corasick)",
            Search::Automaton(_) => "aho-corasick",
        }
    }

    /// The key search's byte tables, for a pass that marks where keys may start (see
    /// [`KeyScan`]): where the search is our Teddy with its byte tables.
    pub fn key_scan(&self) -> Option<KeyScan<'_>> {
        match &self.search {
            Search::Teddy512(t) => t.key_scan(),
            _ => None,
        }
    }
}

/// The keys in dealt `order` as our Teddy takes them: (id, key, its bucket in [`BUCKETS`]).
fn dealt(keys: &[&'static str], order: &[usize]) -> Vec<(usize, &'static str, usize)> {
    let bucket_of = |key: &str| BUCKETS.iter().position(|b| b.contains(&key)).expect("dealt");
    order.iter().enumerate().map(|(id, &k)| (id, keys[k], bucket_of(keys[k]))).collect()
}

/// aho-corasick's slim Teddy over `keys` in this order (which decides their buckets).
fn aho_teddy<'k>(keys: impl Iterator<Item = &'k str>) -> Option<packed::Searcher> {
    let mut builder = packed::Config::new()
        .match_kind(packed::MatchKind::LeftmostFirst)
        .only_teddy(true)
        .only_teddy_fat(Some(false))
        .heuristic_pattern_limits(false)
        .builder();
    builder.extend(keys);
    builder.build()
}

/// Teddy's bucket identity of a key: the low nibbles of its first bytes.
fn prefix(key: &str) -> Vec<u8> {
    key.bytes().take(TEDDY_MASK).map(|b| b & 0xf).collect()
}

/// The order (indices into `keys`) in which Teddy puts `keys` into `buckets`: the first
/// key of each prefix dealt round-robin (bucket `7 - id % 8` takes position `id`), then
/// the rest. `None` unless `buckets` holds exactly `keys`, every key at least
/// [`TEDDY_MASK`] bytes, and the deal works out.
fn deal(keys: &[&str], buckets: &[&[&str]; TEDDY_BUCKETS]) -> Option<Vec<usize>> {
    let mut listed: Vec<&str> = buckets.iter().flat_map(|b| b.iter().copied()).collect();
    let mut given = keys.to_vec();
    listed.sort_unstable();
    given.sort_unstable();
    if listed != given || keys.iter().any(|k| k.len() < TEDDY_MASK) {
        return None;
    }
    let index = |key: &str| keys.iter().position(|&k| k == key);
    // Each bucket's keys split into the first of each prefix and the rest.
    let mut firsts: Vec<std::collections::VecDeque<&str>> = Vec::new();
    let mut rest: Vec<&str> = Vec::new();
    let mut seen: Vec<(Vec<u8>, usize)> = Vec::new();
    for (b, bucket) in buckets.iter().enumerate() {
        let mut f = std::collections::VecDeque::new();
        for &key in bucket.iter() {
            match seen.iter().find(|(p, _)| *p == prefix(key)) {
                // A prefix lives in one bucket only.
                Some(&(_, other)) if other != b => return None,
                Some(_) => rest.push(key),
                None => {
                    seen.push((prefix(key), b));
                    f.push_back(key);
                }
            }
        }
        firsts.push(f);
    }
    let mut order = Vec::with_capacity(keys.len());
    for id in 0.. {
        if firsts.iter().all(|f| f.is_empty()) {
            break;
        }
        let key = firsts[TEDDY_BUCKETS - 1 - id % TEDDY_BUCKETS].pop_front()?;
        order.push(index(key)?);
    }
    for key in rest {
        order.push(index(key)?);
    }
    Some(order)
}

/// The distinct keys of `specs`, sorted, for tests and the `tune` tool.
#[cfg(test)]
pub(super) fn keys_of(specs: &[super::RuleSpec]) -> Vec<&'static str> {
    let mut keys: Vec<&str> =
        specs.iter().flat_map(|r| r.literals.iter().map(|l| l.key_text())).collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// Teddy's assignment of `keys`, in this order, to buckets (as aho-corasick 1.x does it),
/// for tests.
#[cfg(test)]
fn teddy_buckets(keys: &[&str]) -> Vec<Vec<String>> {
    let mut buckets = vec![Vec::new(); TEDDY_BUCKETS];
    let mut seen: Vec<(Vec<u8>, usize)> = Vec::new();
    for (id, key) in keys.iter().enumerate() {
        let b = match seen.iter().find(|(p, _)| *p == prefix(key)) {
            Some(&(_, b)) => b,
            None => {
                let b = TEDDY_BUCKETS - 1 - id % TEDDY_BUCKETS;
                seen.push((prefix(key), b));
                b
            }
        };
        buckets[b].push((*key).to_string());
    }
    buckets
}

/// How many positions of `data` a Teddy bucket holding `keys` lets through to
/// verification.
#[cfg(test)]
fn candidates(keys: &[&str], data: &[u8]) -> usize {
    if keys.is_empty() {
        return 0;
    }
    let mut lo = [0u16; TEDDY_MASK];
    let mut hi = [0u16; TEDDY_MASK];
    for key in keys {
        for (j, b) in key.bytes().take(TEDDY_MASK).enumerate() {
            lo[j] |= 1 << (b & 0xf);
            hi[j] |= 1 << (b >> 4);
        }
    }
    let mut fits = [[false; 256]; TEDDY_MASK];
    for (j, row) in fits.iter_mut().enumerate() {
        for (b, fit) in row.iter_mut().enumerate() {
            *fit = lo[j] & (1 << (b & 0xf)) != 0 && hi[j] & (1 << (b >> 4)) != 0;
        }
    }
    data.windows(TEDDY_MASK)
        .filter(|w| {
            fits[0][usize::from(w[0])]
                && fits[1][usize::from(w[1])]
                && fits[2][usize::from(w[2])]
                && fits[3][usize::from(w[3])]
        })
        .count()
}

/// Re-tunes [`BUCKETS`]: `KRESIDUE_TUNE_CORPUS=a:b:… cargo test --release --lib
/// rules::prefilter::tune -- --ignored --nocapture` reads up to 8 MiB from the given
/// files and directories (512 KiB slices spread over them) and prints the table. It
/// starts from a round-robin deal of the keys' prefixes and swaps prefixes between
/// buckets while that lowers the candidates counted on the sample; swaps keep bucket
/// sizes, so the result can be dealt. Takes several minutes.
#[cfg(test)]
#[test]
#[ignore = "a tool: needs KRESIDUE_TUNE_CORPUS"]
#[allow(clippy::print_stdout)] // a tool: it prints the table it made
fn tune() {
    use std::io::{Read, Seek, SeekFrom};
    const SLICE: u64 = 512 * 1024;
    const SAMPLE: usize = 8 << 20;
    let corpus = std::env::var("KRESIDUE_TUNE_CORPUS").expect("KRESIDUE_TUNE_CORPUS is set");
    let mut files: Vec<(std::path::PathBuf, u64)> = Vec::new();
    for root in corpus.split(':') {
        for entry in walkdir::WalkDir::new(root).sort_by_file_name().into_iter().flatten() {
            if entry.file_type().is_file() {
                let len = entry.metadata().map(|m| m.len()).unwrap_or(0);
                files.push((entry.into_path(), len));
            }
        }
    }
    let total: u64 = files.iter().map(|f| f.1).sum();
    let slices = (SAMPLE as u64 / SLICE).max(1);
    let mut sample = Vec::new();
    let mut next = 0u64;
    let mut passed = 0u64;
    for (path, len) in &files {
        while next < passed + len && sample.len() < SAMPLE {
            let mut f = std::fs::File::open(path).expect("corpus file opens");
            f.seek(SeekFrom::Start(next - passed)).expect("seek");
            f.take(SLICE).read_to_end(&mut sample).expect("corpus file reads");
            next += (total / slices).max(SLICE);
        }
        passed += len;
    }
    let keys = keys_of(super::table::RULES);
    // Groups of keys sharing a prefix move together.
    let mut groups: Vec<Vec<&str>> = Vec::new();
    for key in keys {
        match groups.iter_mut().find(|g| prefix(g[0]) == prefix(key)) {
            Some(g) => g.push(key),
            None => groups.push(vec![key]),
        }
    }
    let mut slots: Vec<Vec<usize>> = vec![Vec::new(); TEDDY_BUCKETS];
    // As Teddy deals them: the first group to bucket 7, the next to 6, …
    for g in 0..groups.len() {
        slots[TEDDY_BUCKETS - 1 - g % TEDDY_BUCKETS].push(g);
    }
    let flat = |s: &[usize]| -> Vec<&str> { s.iter().flat_map(|&g| groups[g].clone()).collect() };
    let mut cost: Vec<usize> = slots.iter().map(|s| candidates(&flat(s), &sample)).collect();
    let mut improved = true;
    while improved {
        improved = false;
        for a in 0..TEDDY_BUCKETS {
            for b in a + 1..TEDDY_BUCKETS {
                for i in 0..slots[a].len() {
                    for j in 0..slots[b].len() {
                        let (mut sa, mut sb) = (slots[a].clone(), slots[b].clone());
                        std::mem::swap(&mut sa[i], &mut sb[j]);
                        let (ca, cb) =
                            (candidates(&flat(&sa), &sample), candidates(&flat(&sb), &sample));
                        if ca + cb < cost[a] + cost[b] {
                            (slots[a], slots[b], cost[a], cost[b]) = (sa, sb, ca, cb);
                            improved = true;
                        }
                    }
                }
            }
        }
    }
    println!("sample {} bytes; candidates {}", sample.len(), cost.iter().sum::<usize>());
    println!("pub static BUCKETS: [&[&str]; TEDDY_BUCKETS] = [");
    for s in &slots {
        let keys: Vec<String> = flat(s).iter().map(|k| format!("{k:?}")).collect();
        println!("    &[{}],", keys.join(", "));
    }
    println!("];");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::table::RULES;

    fn builtin_keys() -> Vec<&'static str> {
        keys_of(RULES)
    }

    #[test]
    fn the_tuned_buckets_hold_every_builtin_key_once_and_are_dealt_exactly() {
        let keys = builtin_keys();
        let mut listed: Vec<&str> = BUCKETS.iter().flat_map(|b| b.iter().copied()).collect();
        listed.sort_unstable();
        assert_eq!(listed, keys, "re-tune BUCKETS (see `tune`) after changing a literal");
        let order = deal(&keys, &BUCKETS).expect("the tuned buckets can be dealt");
        let dealt: Vec<&str> = order.iter().map(|&k| keys[k]).collect();
        let got = teddy_buckets(&dealt);
        for (b, bucket) in BUCKETS.iter().enumerate() {
            let mut want: Vec<String> = bucket.iter().map(|k| k.to_string()).collect();
            let mut have = got[b].clone();
            want.sort_unstable();
            have.sort_unstable();
            assert_eq!(have, want, "bucket {}", TEDDY_BUCKETS - 1 - b);
        }
    }

    #[test]
    fn a_key_set_the_buckets_do_not_cover_is_not_dealt() {
        assert_eq!(deal(&["ghp_", "AKIA"], &BUCKETS), None);
        let mut keys = builtin_keys();
        keys.push("zzzz");
        assert_eq!(deal(&keys, &BUCKETS), None);
    }

    /// The built-in rules and the prefilter of their literals.
    fn builtin() -> (crate::rules::Rules, Prefilter) {
        let rules = crate::rules::Rules::builtin(0);
        let lits: Vec<(Literal, usize)> = rules
            .specs()
            .enumerate()
            .flat_map(|(i, s)| s.literals.iter().map(move |&l| (l, i)))
            .collect();
        let prefilter = Prefilter::new(&lits).unwrap().unwrap();
        (rules, prefilter)
    }

    /// The PEM rules share the key `-BEGIN `; at a hit, only the rules whose whole
    /// literal (`-----BEGIN <label>-----`) is there are run.
    #[test]
    fn literals_sharing_a_key_are_told_apart_whole() {
        let (rules, prefilter) = builtin();
        let rules_at = |text: &str| {
            let data = format!("x\n{text}\nMIIB\n");
            let (targets, key_at) = prefilter.find(data.as_bytes(), 0).expect("a key hit");
            let mut ids: Vec<&str> = targets
                .iter()
                .filter(|t| data.as_bytes()[key_at - t.skip..].starts_with(t.text))
                .flat_map(|t| t.rules.iter().map(|&r| rules.spec(r).id))
                .collect();
            ids.sort_unstable();
            ids
        };
        assert_eq!(rules_at("-----BEGIN CERTIFICATE-----"), Vec::<&str>::new());
        assert_eq!(
            rules_at("-----BEGIN RSA PRIVATE KEY-----"),
            ["pem-legacy-encrypted-private-key", "pem-rsa-private-key"]
        );
        assert_eq!(rules_at("-----BEGIN PRIVATE KEY-----"), ["pem-pkcs8-private-key"]);
        assert_eq!(rules_at("-----BEGIN OPENSSH PRIVATE KEY-----"), ["pem-openssh-private-key"]);
    }

    #[test]
    fn teddy_and_the_automaton_find_the_same_keys() {
        let (_, teddy) = builtin();
        #[cfg(target_arch = "x86_64")]
        assert!(
            matches!(teddy.search, Search::Teddy(_) | Search::Teddy512(_)),
            "the built-in keys are dealt to Teddy"
        );
        let mut data = Vec::new();
        for (i, key) in builtin_keys().iter().enumerate() {
            data.extend_from_slice(format!("{i} text {key} more\n").as_bytes());
        }
        let keys = builtin_keys();
        let automaton = AhoCorasick::new(&keys).unwrap();
        let hits = |p: &Prefilter| {
            let mut out = Vec::new();
            let mut at = 0;
            while let Some((t, start)) = p.find(&data, at) {
                out.push((start, t[0].text, t[0].skip));
                at = start + 1;
            }
            out
        };
        let want: Vec<usize> = automaton.find_overlapping_iter(&data).map(|m| m.start()).collect();
        let got = hits(&teddy);
        assert_eq!(got.iter().map(|h| h.0).collect::<Vec<_>>(), want);
        // Each hit's literals are those of the key found there.
        for (start, text, skip) in got {
            let key = keys.iter().find(|k| data[start..].starts_with(k.as_bytes()));
            assert!(key.is_some_and(|k| text[skip..].starts_with(k.as_bytes())), "{start}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]
        /// `each_key` over the marks of the matcher's pass gives, from any start, the key
        /// hits `find` gives one after the other (the same literals, at the same
        /// positions): for a buffer at any offset of its file and with any carry (the
        /// matcher's pass starts near the carry's end, the rules' search anywhere), with a
        /// matcher whose pass marks keys and one whose pass marks nothing.
        #[test]
        fn each_key_over_the_matchers_marks_gives_what_find_gives(
            filler in proptest::collection::vec(proptest::sample::select(
                b"aeghkopsuxyABEGIKS_:-/+.=\"\n 0123456789\xc1\xe5\xf3\xdf".to_vec()), 0..2000),
            plants in proptest::collection::vec((0usize..100, 0usize..2000), 0..16),
            base in 0u64..1000,
            carry in 0usize..2000,
            at in 0usize..2100,
            token in proptest::prelude::any::<bool>(),
        ) {
            let (_, prefilter) = builtin();
            let data = with_keys(filler, &builtin_keys(), plants.into_iter().map(|(k, pos)| (k, pos, 0)));
            let (carry, at) = (carry.min(data.len()), at.min(data.len()));
            let matcher = crate::rules::tests::matcher_of(token);
            let mut marks = KeyMarks::default();
            let mut found = Vec::new();
            if let Some(scan) = prefilter.key_scan() {
                matcher.find_keyed(&data, base, carry, &mut found, scan, &mut marks);
            }
            let texts = |t: &[Target]| t.iter().map(|t| t.text).collect::<Vec<_>>();
            let mut want = Vec::new();
            let mut from = at;
            while let Some((t, start)) = prefilter.find(&data, from) {
                want.push((texts(t), start));
                from = start + 1;
            }
            let mut got = Vec::new();
            prefilter.each_key(&data, at, &marks, |t, start| got.push((texts(t), start)));
            proptest::prop_assert_eq!(got, want);
            if prefilter.key_scan().is_some() && matcher.reads_every_block() && data.len() >= carry + 300 {
                proptest::prop_assert!(!marks.covered().is_empty(), "the pass marked nothing");
            }
        }
    }

    /// `filler` with, for each `(k, pos, cut)`, key `k` (modulo their number) less its
    /// last `cut % 3` bytes inserted at `pos` (or the end).
    fn with_keys(
        mut data: Vec<u8>,
        keys: &[&str],
        plants: impl IntoIterator<Item = (usize, usize, usize)>,
    ) -> Vec<u8> {
        for (k, pos, cut) in plants {
            let key = keys[k % keys.len()].as_bytes();
            let pos = pos.min(data.len());
            data.splice(pos..pos, key[..key.len().saturating_sub(cut % 3)].iter().copied());
        }
        data
    }

    /// Both Teddy searches over the built-in keys in their tuned buckets, with ids in the
    /// dealt order: (ours on 512-bit vectors if the CPU runs it, aho-corasick's).
    fn both_teddies() -> (Option<Teddy512>, packed::Searcher, Vec<&'static str>) {
        let keys = builtin_keys();
        let order = deal(&keys, &BUCKETS).expect("dealt");
        let ordered: Vec<&'static str> = order.iter().map(|&k| keys[k]).collect();
        let theirs = aho_teddy(ordered.iter().copied()).expect("teddy");
        (Teddy512::new(&dealt(&keys, &order)), theirs, ordered)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]
        /// Our Teddy finds exactly what aho-corasick's finds, key by key, from every start
        /// (and, bounded, what starts before `end`), with its byte tables and with its
        /// nibble tables: keys planted anywhere (across
        /// the 64-byte steps, in the tail, cut by the end) in text made of their own bytes
        /// and of bytes above 0x7f whose low seven bits are key bytes, so that candidates
        /// abound.
        #[test]
        fn our_teddy_finds_what_aho_corasicks_finds(
            filler in proptest::collection::vec(proptest::sample::select(
                b"aeghkopsuxyABEGIKS_:-/+.=\"\n 0123456789\xc1\xe5\xf3\xdf".to_vec()), 0..400),
            plants in proptest::collection::vec((0usize..100, 0usize..400, 0usize..8), 0..12),
            at in 0usize..80,
            end in 0usize..450,
        ) {
            let (ours, theirs, keys) = both_teddies();
            let Some(ours) = ours else { return Ok(()) };
            // The byte tables where the CPU has VBMI, and the nibble tables on any CPU.
            #[cfg(target_arch = "x86_64")]
            proptest::prop_assert_eq!(
                ours.uses_byte_tables(),
                std::arch::is_x86_feature_detected!("avx512vbmi")
                    && std::env::var("KRESIDUE_TEDDY").as_deref() != Ok("nibble")
            );
            let nibbles = ours.clone().with_nibbles();
            // Sometimes only a prefix of the key: a candidate that must fail.
            let data = with_keys(filler, &keys, plants);
            let at = at.min(data.len());
            let mut from = at;
            loop {
                let want = theirs
                    .find_in(&data, Span { start: from, end: data.len() })
                    .map(|m| (m.pattern().as_usize(), m.start()));
                proptest::prop_assert_eq!(ours.find(&data, from, data.len()), want);
                proptest::prop_assert_eq!(nibbles.find(&data, from, data.len()), want);
                // Bounded: the same hit if it starts before `end` (its key may run past).
                let before_end = want.filter(|&(_, start)| start < end);
                proptest::prop_assert_eq!(ours.find(&data, from, end), before_end);
                proptest::prop_assert_eq!(nibbles.find(&data, from, end), before_end);
                match want {
                    Some((_, start)) => from = start + 1,
                    None => break,
                }
            }
        }
    }
}
