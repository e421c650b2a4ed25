//! The rules' literal prefilter: one SIMD pass over a buffer for every rule's key.
//!
//! Each [`Literal`] of a rule is searched for by its *key*, the part of it from
//! [`Literal::key`] to [`Literal::key_end`]; a key hit is then checked against the whole
//! literal. Keys are picked in the table to be rare in ordinary text (`es://` for
//! `postgres://`, whose leading `post` is everywhere).
//!
//! The search is our Teddy (`src/rules/teddy.rs`), whose buckets are assigned by a cost model
//! when the rules are compiled, so a rule set of any size needs no hand-placed table.

use super::teddy::{Kernel, Teddy};
use super::Literal;

/// A literal as the prefilter sees it: its text, where its key starts, and the rules
/// (indices into [`super::Rules`]) it belongs to.
pub(super) struct Target {
    pub text: &'static [u8],
    pub skip: usize,
    /// The literal must start a word ([`Literal::boundary`]).
    pub boundary: bool,
    pub rules: Vec<usize>,
}

/// The compiled prefilter.
pub(super) struct Prefilter {
    search: Teddy,
    /// For each key id of `search`, the literals whose key it is.
    targets: Vec<Vec<Target>>,
}

impl Prefilter {
    /// Compiles the keys of `literals` (each with the rule it belongs to); `None` when
    /// there is none. Every key must be at least 2 bytes, and none a prefix of another.
    pub fn new(literals: &[(Literal, usize)]) -> anyhow::Result<Option<Prefilter>> {
        let mut keys: Vec<&'static [u8]> = Vec::new();
        let mut targets: Vec<Vec<Target>> = Vec::new();
        for &(lit, rule) in literals {
            let key = lit.key_text().as_bytes();
            let k = match keys.iter().position(|&k| k == key) {
                Some(k) => k,
                None => {
                    keys.push(key);
                    targets.push(Vec::new());
                    keys.len() - 1
                }
            };
            let same =
                |t: &&mut Target| t.text == lit.text.as_bytes() && t.boundary == lit.boundary;
            match targets[k].iter_mut().find(same) {
                Some(t) => t.rules.push(rule),
                None => targets[k].push(Target {
                    text: lit.text.as_bytes(),
                    skip: lit.key,
                    boundary: lit.boundary,
                    rules: vec![rule],
                }),
            }
        }
        if keys.is_empty() {
            return Ok(None);
        }
        for (i, a) in keys.iter().enumerate() {
            if let Some(b) = keys.iter().enumerate().find(|&(j, b)| j != i && b.starts_with(a)) {
                anyhow::bail!(
                    "rule key {:?} is a prefix of key {:?}",
                    String::from_utf8_lossy(a),
                    String::from_utf8_lossy(b.1)
                );
            }
        }
        let search = Teddy::new(&keys)
            .ok_or_else(|| anyhow::anyhow!("a rule key is shorter than 2 bytes"))?;
        Ok(Some(Prefilter { search, targets }))
    }

    /// The first key hit in `buf[at..]`: the literals it may belong to, and where the key
    /// starts.
    pub fn find(&self, buf: &[u8], at: usize) -> Option<(&[Target], usize)> {
        let (id, start) = self.search.find(buf, at, buf.len())?;
        Some((&self.targets[id], start))
    }

    /// Calls `f` with each key hit in `buf[at..]`, in order.
    pub fn each_key(&self, buf: &[u8], at: usize, mut f: impl FnMut(&[Target], usize)) {
        let mut at = at;
        while let Some((targets, start)) = self.find(buf, at) {
            f(targets, start);
            at = start + 1;
        }
    }

    /// The key search, as `-v` names it.
    pub fn name(&self) -> &'static str {
        match (self.search.kernel(), self.search.sets()) {
            (Kernel::Scalar, _) => "Teddy, scalar",
            (Kernel::Avx2, 1) => "Teddy, AVX2, 8 buckets",
            (Kernel::Avx2, 2) => "Teddy, AVX2, 16 buckets",
            (Kernel::Avx2, 3) => "Teddy, AVX2, 24 buckets",
            (Kernel::Avx2, _) => "Teddy, AVX2, 32 buckets",
            (Kernel::Avx512, 1) => "Teddy, AVX-512, 8 buckets",
            (Kernel::Avx512, 2) => "Teddy, AVX-512, 16 buckets",
            (Kernel::Avx512, 3) => "Teddy, AVX-512, 24 buckets",
            (Kernel::Avx512, _) => "Teddy, AVX-512, 32 buckets",
        }
    }
}

/// The distinct keys of `specs`, sorted, for tests.
#[cfg(test)]
pub(super) fn keys_of(specs: &[super::RuleSpec]) -> Vec<&'static str> {
    let mut keys: Vec<&str> =
        specs.iter().flat_map(|r| r.literals.iter().map(|l| l.key_text())).collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::table::RULES;
    use aho_corasick::{AhoCorasick, MatchKind};

    fn builtin_keys() -> Vec<&'static str> {
        keys_of(&RULES)
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

    /// A key that is a prefix of another, or shorter than 2 bytes, is refused: each
    /// position reports one key.
    #[test]
    fn a_key_prefix_of_another_is_refused() {
        let lits = [(crate::rules::lit("abcd"), 0), (crate::rules::lit("abcdef"), 0)];
        assert!(Prefilter::new(&lits).is_err());
        let lits = [(crate::rules::lit("a"), 0)];
        assert!(Prefilter::new(&lits).is_err());
    }

    /// `filler` with, for each `(k, pos, cut)`, key `k` (modulo their number) less its
    /// last `cut % 3` bytes inserted at `pos` (or the end).
    fn with_keys(
        mut data: Vec<u8>,
        keys: &[&[u8]],
        plants: impl IntoIterator<Item = (usize, usize, usize)>,
    ) -> Vec<u8> {
        for (k, pos, cut) in plants {
            let key = keys[k % keys.len()];
            let pos = pos.min(data.len());
            data.splice(pos..pos, key[..key.len().saturating_sub(cut % 3)].iter().copied());
        }
        data
    }

    /// Every key hit from `at`, one after the other, as `f` finds the next.
    fn all_hits(
        data: &[u8],
        at: usize,
        f: impl Fn(&[u8], usize) -> Option<(usize, usize)>,
    ) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut from = at;
        while let Some((id, start)) = f(data, from) {
            out.push((id, start));
            from = start + 1;
        }
        out
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]
        /// Our Teddy finds exactly what aho-corasick's automaton finds, key by key, from
        /// every start (and, bounded, what starts before `end`), with the widest kernel the
        /// CPU has, the AVX2 one (where it has it) and the scalar one: the built-in keys and random key sets
        /// (short keys among them) planted anywhere (across the 32-byte steps, in the tail,
        /// cut by the end) in text made of their own bytes, so that candidates abound.
        #[test]
        fn our_teddy_finds_what_the_automaton_finds(
            filler in proptest::collection::vec(proptest::sample::select(
                b"aeghkopsuxyABEGIKS_:-/+.=\"\n 0123456789\xc1\xe5\xf3\xdf".to_vec()), 0..400),
            random_keys in proptest::collection::vec(
                proptest::collection::vec(proptest::sample::select(b"aegkpsAEGKS_-.:0".to_vec()), 2..7), 1..80),
            builtin in proptest::prelude::any::<bool>(),
            plants in proptest::collection::vec((0usize..200, 0usize..400, 0usize..8), 0..12),
            at in 0usize..80,
            end in 0usize..450,
        ) {
            let mut keys: Vec<&'static [u8]> = if builtin {
                builtin_keys().into_iter().map(str::as_bytes).collect()
            } else {
                let leaked: &'static [Vec<u8>] = Box::leak(random_keys.into_boxed_slice());
                leaked.iter().map(Vec::as_slice).collect()
            };
            // No key a prefix of another (nor equal).
            keys.sort_unstable();
            keys.dedup();
            let all = keys.clone();
            keys.retain(|k| !all.iter().any(|o| o != k && o.starts_with(k)));
            let teddy = Teddy::new(&keys).expect("keys of 2 bytes or more");
            let scalar = teddy.clone().with_kernel(Kernel::Scalar).expect("scalar runs anywhere");
            let avx2 = teddy.clone().with_kernel(Kernel::Avx2);
            let automaton = AhoCorasick::builder().match_kind(MatchKind::LeftmostFirst).build(&keys).unwrap();
            let data = with_keys(filler, &keys, plants);
            let at = at.min(data.len());
            let want = all_hits(&data, at, |d, from| {
                automaton.find(aho_corasick::Input::new(d).span(from..d.len())).map(|m| (m.pattern().as_usize(), m.start()))
            });
            proptest::prop_assert_eq!(&all_hits(&data, at, |d, from| teddy.find(d, from, d.len())), &want);
            proptest::prop_assert_eq!(&all_hits(&data, at, |d, from| scalar.find(d, from, d.len())), &want);
            if let Some(avx2) = &avx2 {
                proptest::prop_assert_eq!(&all_hits(&data, at, |d, from| avx2.find(d, from, d.len())), &want);
                let bounded: Vec<(usize, usize)> = want.iter().copied().filter(|&(_, s)| s < end).collect();
                proptest::prop_assert_eq!(&all_hits(&data, at, |d, from| avx2.find(d, from, end)), &bounded);
            }
            // Bounded: the same hits that start before `end` (their key may run past).
            let bounded: Vec<(usize, usize)> = want.iter().copied().filter(|&(_, s)| s < end).collect();
            proptest::prop_assert_eq!(&all_hits(&data, at, |d, from| teddy.find(d, from, end)), &bounded);
            proptest::prop_assert_eq!(&all_hits(&data, at, |d, from| scalar.find(d, from, end)), &bounded);
        }
    }

    /// The cost model keeps the modelled pass rate of the built-in keys low.
    #[test]
    fn the_buckets_let_few_positions_through() {
        let keys: Vec<&[u8]> = builtin_keys().into_iter().map(str::as_bytes).collect();
        let teddy = Teddy::new(&keys).unwrap();
        let rate = super::super::teddy::modelled_pass_rate(&keys, teddy.buckets());
        // Measured rates run 2 to 5 times the model's (see `teddy::CANDIDATE_CYCLES`).
        assert!(rate < 5e-3, "modelled pass rate {rate}");
    }
}
