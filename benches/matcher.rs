//! Single-thread throughput of the fingerprint matcher against the number of values.
//!
//! Builds 256 MiB of in-memory "node-like" data (YAML/JSON config lines, log lines with
//! timestamps, random binary, runs of zeros, base64 text), plants 200 occurrences of
//! fingerprinted values in their raw, base64 and JSON-escaped forms (some straddling the
//! 1 MiB chunk boundaries), then streams the buffer through [`Matcher::find`] the way the
//! scanner streams a file — each 1 MiB chunk, with the `max_len() - 1` bytes of overlap,
//! copied into one reused buffer as `read` copies a file's pages, and searched there —
//! with 10, 1,000 and 10,000 fingerprinted values on one thread. Every value is synthetic
//! (the crate's seeded PRNG, [`kresidue::prng::Prng`]), never anything resembling a real
//! credential. The configurations and the references (the same copying without the search, touching
//! every byte as a wrapping sum of its `u64` words, and counting newlines with memchr) run
//! in interleaved rounds — one warm-up round, then 11 timed ones — and each keeps its best
//! time; the per-round ratio to 10 values is also printed as a median, since a shared
//! machine's quiet moments do not fall evenly. Every
//! planted occurrence of a value in the set must be found (exit status 1 if not). The
//! targets (at 10,000 values ≥ 1 GiB/s and ≤ 1.3× the time at 10 values) are reported as
//! PASS/MISS, not asserted. Run with `cargo bench --bench matcher`;
//! `KRESIDUE_BENCH_ONLY=10000` times one configuration alone (e.g. under `perf record`);
//! `KRESIDUE_KERNEL=scalar|avx2|avx512` picks the sampler.
//!
//! Then, at the largest value count and with all built-in rules, the same stream with the
//! rules searched after the matcher on each buffer: their time over the matcher alone,
//! best of interleaved rounds; at least one rule hit per planted rule example (exit
//! status 1 if not).

// A benchmark's job is printing its figures.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use kresidue::finding::Encoding;
use kresidue::fingerprint::{self, FingerprintSet};
use kresidue::kubectl::SecretValue;
use kresidue::matcher::{self, Matcher};
use kresidue::rules::examples::render;
use kresidue::rules::table::RULES;
use kresidue::rules::{RuleHit, Rules};
use std::hint::black_box;
use std::io::Write as _;
use std::time::{Duration, Instant};

mod common;
use common::{ms, values, words, B64_CHARS};
use kresidue::prng::Prng;

/// Size of the scanned buffer.
const DATA_LEN: usize = 256 << 20;
/// Chunk size of the stream (the scanner's default).
const CHUNK: usize = 1 << 20;
/// Number of planted occurrences.
const PLANTS: usize = 200;
/// Value counts measured.
const CONFIGS: [usize; 3] = [10, 1_000, 10_000];
/// Timed rounds (after one warm-up round); each configuration keeps its best.
const ROUNDS: usize = 11;
/// Targets at 10,000 values.
const TARGET_GIBS: f64 = 1.0;
const TARGET_X_VS_10: f64 = 1.3;

#[rustfmt::skip]
const WORDS: &[&str] = &[
    "kubelet", "pod", "container", "sandbox", "volume", "mount", "image", "pull", "sync",
    "node", "ready", "status", "update", "config", "network", "cgroup", "runtime", "overlay",
    "snapshot", "default", "kube-system", "coredns", "etcd", "proxy", "lease", "probe",
    "liveness", "readiness", "restart", "backoff", "started",
];

/// Appends one block of about `len` bytes of a randomly chosen kind.
fn block(rng: &mut Prng, out: &mut Vec<u8>, len: usize) {
    let stop = out.len() + len;
    match rng.range(0, 100) {
        // Config: YAML and JSON-ish lines.
        0..=29 => {
            while out.len() < stop {
                let depth = rng.range(0, 4);
                out.resize(out.len() + depth * 2, b' ');
                match rng.range(0, 4) {
                    0 => {
                        let _ = write!(
                            out,
                            "{{\"name\": \"{}-{}\", \"replicas\": {}, \"enabled\": true}},",
                            rng.pick(WORDS),
                            rng.range(0, 1000),
                            rng.range(1, 9)
                        );
                    }
                    1 => {
                        let _ = write!(out, "- {}: \"{}\"", rng.pick(WORDS), rng.pick(WORDS));
                    }
                    _ => {
                        let _ = write!(out, "{}: ", rng.pick(WORDS));
                        let n = rng.range(1, 4);
                        words(rng, out, n, WORDS);
                    }
                }
                out.push(b'\n');
            }
        }
        // Logs with timestamps.
        30..=54 => {
            let mut t = rng.range(0, 86_400_000_000);
            while out.len() < stop {
                t += rng.range(1, 2_000_000);
                let (s, us) = (t / 1_000_000, t % 1_000_000);
                let _ = write!(
                    out,
                    "2024-05-01T{:02}:{:02}:{:02}.{us:06}Z stderr F I0501 {}.go:{}] \"",
                    s / 3600 % 24,
                    s / 60 % 60,
                    s % 60,
                    rng.pick(WORDS),
                    rng.range(10, 2000)
                );
                let n = rng.range(3, 12);
                words(rng, out, n, WORDS);
                let _ = writeln!(
                    out,
                    "\" pod=\"{}/{}-{:x}\"",
                    rng.pick(WORDS),
                    rng.pick(WORDS),
                    rng.next_u64() >> 40
                );
            }
        }
        // Random binary (ELF / compressed data).
        55..=79 => {
            out.extend_from_slice(b"\x7fELF\x02\x01\x01\0");
            let n = stop.saturating_sub(out.len());
            rng.fill(out, n);
        }
        // Zeros (sparse files, filesystem blocks).
        80..=89 => out.resize(stop, 0),
        // Base64 text, 76-column lines.
        _ => {
            while out.len() < stop {
                out.extend((0..76).map(|_| *rng.pick(B64_CHARS)));
                out.push(b'\n');
            }
        }
    }
}

struct Plant {
    offset: u64,
    value: usize,
    encoding: Encoding,
}

/// The mixed buffer, with `PLANTS` occurrences of forms of `vals` written over it.
/// Plant `k` uses a value among the first 10, 1,000 or 10,000 (by `k % 3`) so that every
/// configuration has planted occurrences to find; a third are base64 and a third
/// JSON-escaped (those are PEM-like values, the ones whose escaped form differs); every
/// fifth straddles a chunk boundary.
fn mixed_data(vals: &[SecretValue]) -> (Vec<u8>, Vec<Plant>) {
    let mut rng = Prng::new(0x9e37_79b9_7f4a_7c15);
    let mut data = Vec::with_capacity(DATA_LEN + (64 << 10));
    while data.len() < DATA_LEN {
        let len = rng.range(4 << 10, 64 << 10);
        block(&mut rng, &mut data, len);
    }
    data.truncate(DATA_LEN);

    let slot = DATA_LEN / PLANTS;
    let mut plants = Vec::with_capacity(PLANTS);
    for k in 0..PLANTS {
        let limit = CONFIGS[k % CONFIGS.len()].min(vals.len());
        let encoding = Encoding::ALL[(k / CONFIGS.len()) % Encoding::ALL.len()];
        let (value, form) = loop {
            let vi = rng.range(0, limit);
            if let Some((_, f)) =
                fingerprint::encodings(&vals[vi].value).into_iter().find(|(e, _)| *e == encoding)
            {
                break (vi, f);
            }
        };
        let lo = k * slot;
        let at = if k % 5 == 0 {
            // Straddle the first chunk boundary that leaves the plant inside its slot.
            let boundary = ((lo + form.len()) / CHUNK + 1) * CHUNK;
            boundary - rng.range(1, form.len())
        } else {
            rng.range(lo, lo + slot - form.len())
        };
        assert!(at >= lo && at + form.len() <= lo + slot, "plant {k} stays in its slot");
        data[at..at + form.len()].copy_from_slice(&form);
        plants.push(Plant { offset: at as u64, value, encoding });
    }
    (data, plants)
}

/// The reference: a wrapping sum of every `u64` of the buffer.
fn touch_sum(data: &[u8]) -> u64 {
    data.chunks_exact(8)
        .map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")))
        .fold(0u64, |a, x| a.wrapping_add(x))
}

fn gibs(d: Duration) -> f64 {
    DATA_LEN as f64 / (1u64 << 30) as f64 / d.as_secs_f64()
}

/// Streams `data` the way the scanner streams a file: each chunk (with the overlap the
/// matcher needs) is copied into one reused buffer, as `read` copies a file's pages, and
/// searched there while it is still in cache. Without a matcher, just the copying: the
/// reference the search is compared with. Returns the hits and the bytes copied.
fn stream_copied(
    m: Option<&Matcher>,
    data: &[u8],
    buf: &mut Vec<u8>,
) -> (Vec<matcher::Hit>, usize) {
    let overlap = m.map_or(0, |m| m.max_len().saturating_sub(1));
    let (mut hits, mut copied, mut pos) = (Vec::new(), 0, 0);
    while pos < data.len() {
        let carry = overlap.min(pos);
        let end = (pos + CHUNK).min(data.len());
        buf.clear();
        buf.extend_from_slice(&data[pos - carry..end]);
        copied += buf.len();
        if let Some(m) = m {
            m.find(buf, (pos - carry) as u64, carry, &mut hits);
        }
        pos = end;
    }
    hits.sort();
    (hits, copied)
}

/// Streams `data` as [`stream_copied`] does, with the overlap the rules need too, through
/// `m` and, when given, `rules` ([`Rules::find`] on each buffer). Returns the rule hits.
fn stream_rules(
    m: &Matcher,
    rules: Option<&Rules>,
    data: &[u8],
    buf: &mut Vec<u8>,
) -> Vec<RuleHit> {
    let overlap = m.max_len().saturating_sub(1).max(rules.map_or(0, Rules::overlap));
    let (mut hits, mut rule_hits, mut pos) = (Vec::new(), Vec::new(), 0);
    while pos < data.len() {
        let carry = overlap.min(pos);
        let end = (pos + CHUNK).min(data.len());
        buf.clear();
        buf.extend_from_slice(&data[pos - carry..end]);
        let base = (pos - carry) as u64;
        let last = end == data.len();
        m.find(buf, base, carry, &mut hits);
        if let Some(r) = rules {
            let _ = r.find(buf, base, carry, last, &mut rule_hits);
        }
        pos = end;
    }
    rule_hits.sort_by_key(|h| (h.offset, h.rule));
    rule_hits
}

/// What the rules add to the matcher over the same stream (10,000 values, all built-in
/// rules): each configuration's best of [`ROUNDS`] interleaved rounds, with a positive
/// example of each rule planted in turn. Returns false if fewer rule hits were found than
/// were planted.
fn rules_over_the_matcher(m: &Matcher, data: &[u8], buf: &mut Vec<u8>) -> bool {
    let rules = Rules::builtin(0);
    // A positive example of each rule in turn every 2 MiB, every other one across a
    // chunk boundary, each on a line of its own.
    let mut data = data.to_vec();
    let mut planted = 0;
    for (k, at) in (0..data.len().saturating_sub(1 << 20)).step_by(2 << 20).enumerate() {
        let spec = &RULES[k % RULES.len()];
        let example = render(spec.positive[0], k as u64);
        let at = if k % 2 == 1 { at + CHUNK - example.len() / 2 } else { at + 4096 };
        data[at - 1] = b'\n';
        data[at..at + example.len()].copy_from_slice(&example);
        data[at + example.len()] = b'\n';
        planted += 1;
    }
    let data = &data[..];
    println!();
    println!("rules' key search: {}", rules.key_search());
    let configs: [(&str, Option<&Rules>); 2] =
        [("fingerprints alone", None), ("fingerprints and rules", Some(&rules))];
    let mut best = [Duration::MAX; 2];
    let mut found: [Vec<RuleHit>; 2] = Default::default();
    for round in 0..=ROUNDS {
        for (i, &(_, r)) in configs.iter().enumerate() {
            let t = Instant::now();
            found[i] = black_box(stream_rules(m, r, black_box(data), buf));
            if round > 0 {
                best[i] = best[i].min(t.elapsed());
            }
        }
    }
    for (i, (name, _)) in configs.iter().enumerate() {
        println!(
            "{name:>42}: {:8.1} ms, +{:5.1} ms over fingerprints alone ({} rule hits)",
            ms(best[i]),
            ms(best[i]) - ms(best[0]),
            found[i].len()
        );
    }
    println!("(rule examples planted: {planted})");
    found[1].len() >= planted
}

fn main() {
    let started = Instant::now();
    let max_n = *CONFIGS.iter().max().expect("configs");
    let vals = values(max_n);
    let t = Instant::now();
    let (data, plants) = mixed_data(&vals);
    let zeros = data.iter().filter(|&&b| b == 0).count();
    println!(
        "data: {} MiB mixed ({:.1}% zero bytes), {} planted occurrences, generated in {:.0} ms",
        DATA_LEN >> 20,
        zeros as f64 * 100.0 / DATA_LEN as f64,
        plants.len(),
        ms(t.elapsed())
    );
    println!("stream: {} KiB chunks, overlap max_len-1, single thread", CHUNK >> 10);

    // Build every configuration first, then time them in interleaved rounds: on a shared
    // machine a slow phase then hits every configuration alike, and the best of the rounds
    // is compared with the best of the others.
    let mut configs = Vec::new();
    // `KRESIDUE_BENCH_ONLY=10000` times just that configuration (e.g. under `perf record`).
    let only: Option<usize> =
        std::env::var("KRESIDUE_BENCH_ONLY").ok().and_then(|v| v.parse().ok());
    for &n in CONFIGS.iter().filter(|&&n| only.is_none_or(|o| o == n)) {
        let t = Instant::now();
        let (set, stats) = FingerprintSet::build(&vals[..n], "current", [0x5a; 32]);
        assert_eq!(stats.values, n, "every generated value is fingerprinted");
        let forms: usize = set.entries.iter().map(|e| e.forms.len()).sum();
        let m = Matcher::new(vec![set]);
        configs.push((n, forms, m, t.elapsed()));
    }
    let mut touch = Duration::MAX;
    let mut newline_time = Duration::MAX;
    let mut times = vec![Duration::MAX; configs.len()];
    // Per round, each configuration's time over the first configuration's time.
    let mut ratios = vec![Vec::new(); configs.len()];
    let mut outputs = vec![Vec::new(); configs.len()];
    let (mut sum, mut newlines, mut copied) = (0, 0, 0);
    let mut copy = Duration::MAX;
    let mut buf = Vec::with_capacity(CHUNK + 8192);
    for round in 0..=ROUNDS {
        let t = Instant::now();
        sum = black_box(touch_sum(black_box(&data)));
        let touched = t.elapsed();
        let t = Instant::now();
        newlines = black_box(memchr::memchr_iter(b'\n', black_box(&data)).count());
        let counted = t.elapsed();
        let t = Instant::now();
        copied = black_box(stream_copied(None, black_box(&data), &mut buf).1);
        let copy_took = t.elapsed();
        let mut first = Duration::MAX;
        for (i, (_, _, m, _)) in configs.iter().enumerate() {
            let t = Instant::now();
            outputs[i] = black_box(stream_copied(Some(m), black_box(&data), &mut buf).0);
            let took = t.elapsed();
            if i == 0 {
                first = took;
            }
            // Round 0 warms caches and page tables up; it is not timed.
            if round > 0 {
                times[i] = times[i].min(took);
                ratios[i].push(took.as_secs_f64() / first.as_secs_f64());
            }
        }
        if round > 0 {
            copy = copy.min(copy_took);
            touch = touch.min(touched);
            newline_time = newline_time.min(counted);
        }
    }
    println!(
        "reference touch (wrapping u64 sum): {:8.1} ms {:6.2} GiB/s (sum {sum:#018x})",
        ms(touch),
        gibs(touch)
    );
    println!(
        "reference copy in {} KiB chunks:    {:8.1} ms {:6.2} GiB/s ({copied} bytes)",
        CHUNK >> 10,
        ms(copy),
        gibs(copy)
    );
    println!(
        "reference memchr count of b'\\n':    {:8.1} ms {:6.2} GiB/s ({newlines} newlines)",
        ms(newline_time),
        gibs(newline_time)
    );

    let mut rows = Vec::new();
    let mut all_found = true;
    for (((n, forms, m, build), time), hits) in configs.iter().zip(&times).zip(&outputs) {
        let (n, time) = (*n, *time);
        let found: Vec<(u64, usize, Encoding)> =
            hits.iter().map(|h| (h.offset, h.entry as usize, m.describe(h).1.encoding)).collect();
        let expected: Vec<&Plant> = plants.iter().filter(|p| p.value < n).collect();
        let recalled =
            expected.iter().filter(|p| found.contains(&(p.offset, p.value, p.encoding))).count();
        let extra = found
            .iter()
            .filter(|&&(o, v, e)| {
                !expected.iter().any(|p| (p.offset, p.value, p.encoding) == (o, v, e))
            })
            .count();
        all_found &= recalled == expected.len();
        println!(
            "values {n:>6}: {forms:>6} forms, max_len {:>5}, built in {:>6.1} ms; best of {ROUNDS} {:8.1} ms \
             {:6.2} GiB/s; recall {recalled}/{} ({:.1}%), {extra} other hits",
            m.max_len(),
            ms(*build),
            ms(time),
            gibs(time),
            expected.len(),
            recalled as f64 * 100.0 / expected.len().max(1) as f64,
        );
        rows.push((n, time));
    }
    let medians: Vec<f64> = ratios
        .iter_mut()
        .map(|r| {
            r.sort_by(f64::total_cmp);
            r[r.len() / 2]
        })
        .collect();

    let base = rows[0].1;
    println!();
    println!(
        "{:>6}  {:>6}  {:>8}  {:>7}  {:>13}  {:>10}",
        "values", "GiB/s", "time_ms", "x_vs_10", "x_vs_10_median", "x_vs_copy"
    );
    for (&(n, t), median) in rows.iter().zip(&medians) {
        println!(
            "{n:>6}  {:>6.2}  {:>8.1}  {:>7.2}  {median:>13.2}  {:>10.2}",
            gibs(t),
            ms(t),
            t.as_secs_f64() / base.as_secs_f64(),
            t.as_secs_f64() / copy.as_secs_f64()
        );
    }
    println!(
        "{:>6}  {:>6.2}  {:>8.1}  {:>7}  {:>13}  {:>10.2}",
        "copy",
        gibs(copy),
        ms(copy),
        "-",
        "-",
        1.0
    );
    let &(n_top, top) = rows.last().expect("rows");
    let g = gibs(top);
    // The ratio of the best times; the per-round median is printed beside it because on a
    // shared machine one configuration's best round can fall in a quiet moment.
    let x = top.as_secs_f64() / base.as_secs_f64();
    let verdict = |ok: bool| if ok { "PASS" } else { "MISS" };
    println!();
    println!(
        "target {n_top} values >= {TARGET_GIBS} GiB/s: {:.2} GiB/s {}",
        g,
        verdict(g >= TARGET_GIBS)
    );
    println!(
        "target {n_top} values <= {TARGET_X_VS_10}x time at 10: {x:.2}x {}",
        verdict(x <= TARGET_X_VS_10)
    );
    let (_, _, m_top, _) = configs.last().expect("configs");
    let rules_agree = rules_over_the_matcher(m_top, &data, &mut buf);
    println!();
    println!("recall: {}", if all_found { "100% in every configuration" } else { "INCOMPLETE" });
    println!(
        "command: cargo bench --bench matcher   (total {:.1} s)",
        started.elapsed().as_secs_f64()
    );
    if !all_found {
        eprintln!("error: the matcher missed planted occurrences");
        std::process::exit(1);
    }
    if !rules_agree {
        eprintln!("error: the rules missed planted examples");
        std::process::exit(1);
    }
}
