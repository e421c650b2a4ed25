//! Node-scale benchmark (issue 9): the built `kresidue` binary, end to end, on a generated
//! node, against the time to just read every byte of it and against ripgrep.
//!
//! The node (built once under the cargo target dir, `node-bench/<size>/`, and kept; laid
//! out by the tests' node-tree builder, `tests/util/tree.rs`, from the crate's seeded
//! `Prng`): kubelet pod dirs in the atomic-writer layout (a secret volume, a projected
//! token volume, emptyDirs of application logs and configs, termination-log files),
//! container layers under containerd's overlayfs snapshots made of real files copied from
//! this machine's `/usr`, and CRI pod logs under `/var/log/pods`. 10,000 generated values
//! are fingerprinted; 400 of them are planted (raw in secret volumes, configs and logs,
//! JSON-escaped in configs, base64 in layer files). Nothing is a real credential.
//!
//! Measured, in interleaved rounds after one warm-up round (warm page cache), each as
//! its median and min..max over the rounds:
//! - reading every byte: a tiny reader in this process, the same walk (no symlinks) and
//!   thread count, each file read into one reused 1 MiB buffer per thread;
//! - `kresidue scan` with 10,000 fingerprinted values and every built-in rule (the main
//!   figure), with 10 values and rules, with 10,000 values and `--no-rules`; and the
//!   whole node (`--path /`) with 10,000 values, with rules and without;
//! - `rg -uuu -F -f values.txt` over the same tree with the same thread count, the
//!   values in plaintext (each line of a multi-line value a pattern), counting matches,
//!   in the first `--rg-rounds` rounds only (5 by default): it takes ~30 times as long
//!   as a scan, and the rounds of the close comparisons (10 against 10,000 values, rules
//!   on against off) are then seconds long, their runs adjacent;
//! - peak RSS of every kresidue run (`/usr/bin/time`), startup (an empty root, 10,000
//!   fingerprints, median of 21 runs), and a tree holding one 20 GiB sparse file;
//! - recall: every planted value must be found, as its Secret.
//!
//! Verdicts against the targets are printed as PASS/MISS; a recall below 100%
//! exits 1. `cargo bench --bench node [-- --large] [--rounds N] [--rg-rounds N] [--threads N]`
//! (`scripts/bench-node.sh` installs ripgrep first). `--large` builds a node of several
//! GB. Needs a release build of the binary (cargo builds it for the bench).

// A benchmark's job is printing its figures.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use kresidue::kubectl::SecretValue;
use nix::sys::resource::{getrusage, UsageWho};
use rayon::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

mod common;
#[path = "../tests/util/tree.rs"]
mod tree;
use common::{values, words};
use kresidue::prng::Prng;
use tree::NodeTree;

/// Values fingerprinted.
const VALUES: usize = 10_000;
/// Values planted in the tree.
const PLANTS: usize = 400;
/// Bump when the generated node changes, so a kept one is rebuilt.
const LAYOUT_VERSION: u32 = 5;

const NAMESPACES: &[&str] = &["shop", "payments", "auth", "search", "monitoring", "ingress"];
const APPS: &[&str] = &["api", "web", "worker", "cart", "ledger", "gateway", "indexer", "agent"];
const WORDS: &[&str] = &[
    "request",
    "handled",
    "user",
    "session",
    "cache",
    "miss",
    "hit",
    "upstream",
    "latency",
    "ms",
    "status",
    "ok",
    "retry",
    "timeout",
    "connection",
    "pool",
    "queue",
    "event",
    "processed",
    "batch",
    "shard",
    "replica",
    "leader",
    "elected",
    "config",
    "reloaded",
];

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

struct Options {
    large: bool,
    rounds: usize,
    /// Rounds that run rg too (the first ones).
    rg_rounds: usize,
    threads: usize,
}

fn options() -> anyhow::Result<Options> {
    let mut o = Options {
        large: false,
        rounds: 5,
        rg_rounds: 5,
        threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut number = |name: &str| -> anyhow::Result<usize> {
            args.next()
                .and_then(|v| v.parse().ok())
                .filter(|&n| n > 0)
                .ok_or_else(|| anyhow::anyhow!("{name} needs a positive number"))
        };
        match a.as_str() {
            "--large" => o.large = true,
            "--rounds" => o.rounds = number("--rounds")?,
            "--rg-rounds" => o.rg_rounds = number("--rg-rounds")?,
            "--threads" => o.threads = number("--threads")?,
            "--bench" => {} // what `cargo bench` passes
            other => anyhow::bail!("unknown argument {other:?}"),
        }
    }
    Ok(o)
}

fn run() -> anyhow::Result<bool> {
    let opts = options()?;
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_kresidue"));
    let size: u64 = if opts.large { 4 << 30 } else { 400 << 20 };
    let kept = format!("node-bench/{}", if opts.large { "large" } else { "default" });
    let vals = values(VALUES);
    let t = Instant::now();
    let (tree, node) = Node::build_or_load(&kept, size, &vals)?;
    let base = tree.base().to_path_buf();
    println!(
        "node: {} files, {:.0} MiB ({:.0} MiB in container layers from /usr, {:.0} MiB pod logs), \
         {} pods, {} planted values, under {} ({:.1} s)",
        node.files,
        mib(node.bytes),
        mib(node.layer_bytes),
        mib(node.log_bytes),
        node.pods,
        node.plants.len(),
        base.display(),
        t.elapsed().as_secs_f64()
    );
    let inputs = Inputs::write(&base, &bin, &vals)?;
    let root = tree.root().to_path_buf();
    let t = opts.threads.to_string();
    let scan = |fp: &Path, rules: bool| {
        let mut a: Vec<String> =
            ["scan", "--root", path_str(&root), "--no-cri", "-q"].map(String::from).to_vec();
        a.extend(["--fingerprints".into(), path_str(fp).into(), "--threads".into(), t.clone()]);
        a.extend(["--format".into(), "json".into(), "--fail-on".into(), "none".into()]);
        if !rules {
            a.push("--no-rules".into());
        }
        a
    };
    let whole =
        |fp: &Path, rules: bool| [scan(fp, rules), vec!["--path".into(), "/".into()]].concat();
    let rg_path = which("rg");
    let mut configs = vec![
        Config::Read,
        Config::Kresidue("kresidue, 10,000 values + rules", scan(&inputs.fp_10k, true)),
        Config::Kresidue("kresidue, 10 values + rules", scan(&inputs.fp_10, true)),
        Config::Kresidue("kresidue, 10,000 values, no rules", scan(&inputs.fp_10k, false)),
        Config::Kresidue("kresidue --path /, 10,000 values + rules", whole(&inputs.fp_10k, true)),
        Config::Kresidue(
            "kresidue --path /, 10,000 values, no rules",
            whole(&inputs.fp_10k, false),
        ),
    ];
    match &rg_path {
        Some(rg) => configs.push(Config::Rg(
            rg.clone(),
            vec![
                "-uuu".into(),
                "-F".into(),
                "-c".into(),
                "-f".into(),
                path_str(&inputs.values_txt).into(),
                "--threads".into(),
                t.clone(),
                path_str(&root).into(),
            ],
        )),
        None => println!("rg: not installed (apt-get install ripgrep): no comparison"),
    }
    let rg_rounds = opts.rg_rounds.min(opts.rounds);
    println!(
        "runs: {} threads, 1 warm-up round then {} rounds (rg in the first {}), interleaved in \
         rotating order",
        opts.threads, opts.rounds, rg_rounds
    );
    let time_bin = Path::new("/usr/bin/time").exists().then(|| PathBuf::from("/usr/bin/time"));
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); configs.len()];
    // CPU seconds (user + system) of each run: the reader's own, the others' as children.
    let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); configs.len()];
    let mut rss: Vec<u64> = vec![0; configs.len()];
    // Each kresidue run's last report.
    let mut reports: Vec<Option<Vec<u8>>> = vec![None; configs.len()];
    let mut read_bytes = 0;
    for round in 0..=opts.rounds {
        for j in 0..configs.len() {
            let i = (j + round) % configs.len();
            if matches!(configs[i], Config::Rg(..)) && round > rg_rounds {
                continue;
            }
            let who = match configs[i] {
                Config::Read => UsageWho::RUSAGE_SELF,
                _ => UsageWho::RUSAGE_CHILDREN,
            };
            let cpu_before = cpu_seconds(who)?;
            let started = Instant::now();
            match &configs[i] {
                Config::Read => read_bytes = read_all(&root, opts.threads)?,
                Config::Kresidue(_, args) => {
                    let (out, peak) = run_measured(&bin, args, time_bin.as_deref(), &base)?;
                    rss[i] = rss[i].max(peak);
                    reports[i] = Some(out);
                }
                Config::Rg(rg, args) => {
                    let status = Command::new(rg).args(args).stdout(Stdio::null()).status()?;
                    anyhow::ensure!(status.code() == Some(0), "rg failed: {status}");
                }
            }
            if round > 0 {
                times[i].push(started.elapsed());
                cpu[i].push(cpu_seconds(who)? - cpu_before);
            }
        }
    }
    let report_of = |i: usize| -> anyhow::Result<serde_json::Value> {
        Ok(serde_json::from_slice(reports[i].as_deref().expect("ran"))?)
    };
    let report = report_of(1)?;
    let scanned = report["summary"]["bytes"].as_u64().unwrap_or(0);
    let whole_bytes = report_of(4)?["summary"]["bytes"].as_u64().unwrap_or(0);
    println!(
        "bytes: the reader read {} ({:.0} MiB), kresidue read {} ({:.0} MiB), with --path / {} \
         ({:.0} MiB)",
        read_bytes,
        mib(read_bytes),
        scanned,
        mib(scanned),
        whole_bytes,
        mib(whole_bytes)
    );
    let med: Vec<f64> = times.iter().map(|t| median(t)).collect();
    println!();
    let med_cpu: Vec<f64> = cpu.iter().map(|c| median_f64(c.clone())).collect();
    println!("| run | median s | min..max s | × read | median CPU s | CPU × read | peak RSS |");
    println!("|---|---|---|---|---|---|---|");
    for (i, c) in configs.iter().enumerate() {
        let (lo, hi) = min_max(&times[i]);
        let rss = if rss[i] > 0 { format!("{:.0} MB", rss[i] as f64 / 1024.0) } else { "".into() };
        println!(
            "| {} | {:.3} | {:.3}..{:.3} | {:.2} | {:.3} | {:.2} | {} |",
            c.name(opts.threads),
            med[i],
            lo,
            hi,
            med[i] / med[0],
            med_cpu[i],
            med_cpu[i] / med_cpu[0],
            rss
        );
    }
    println!();

    // Production neutrality (issue 51): the page cache as the scan found it, the read
    // budget held, and the scan against a parallel `cat` with the files' pages dropped.
    let main_args = match &configs[1] {
        Config::Kresidue(_, args) => args.clone(),
        _ => unreachable!("the main run"),
    };
    let neutral = neutrality(&bin, &root, &base, &main_args, opts.threads)?;
    let rate = read_rate(&bin, &base, &main_args, scanned)?;
    let inc = incremental(&bin, &root, &base, &main_args)?;

    let startup = startup(&bin, &base, &inputs.fp_10k)?;
    let sparse_rss = sparse(&bin, &kept, &base, &inputs.fp_10k, time_bin.as_deref())?;
    let recall_whole = recall(&report_of(4)?, &node.plants);
    let recall = recall(&report, &node.plants);

    let mut ok = true;
    let verdict = |target: &str, pass: bool| {
        println!("{} {target}", if pass { "PASS" } else { "MISS" });
    };
    // A ratio as the ratio of the medians, and as the median of the ratios within each
    // round (the runs of one round are seconds apart, so a slow spell of a shared machine
    // weighs on both sides); a target is met only if both meet it.
    // Both over the rounds both ran in (rg ran in the first rounds only).
    let ratio = |a: usize, b: usize| {
        let n = times[a].len().min(times[b].len());
        let per_round: Vec<f64> = times[a][..n]
            .iter()
            .zip(&times[b][..n])
            .map(|(x, y)| x.as_secs_f64() / y.as_secs_f64())
            .collect();
        (median(&times[a][..n]) / median(&times[b][..n]), median_f64(per_round))
    };
    let (read_x, read_r) = ratio(1, 0);
    verdict(
        &format!("wall ≤ 1.5× reading the bytes: {read_x:.2}× (per round {read_r:.2}×)"),
        read_x.max(read_r) <= 1.5,
    );
    if rg_path.is_some() {
        let (rg_x, rg_r) = ratio(configs.len() - 1, 1);
        verdict(
            &format!("≥ 5× faster than rg -F -f: {rg_x:.1}× (per round {rg_r:.1}×)"),
            rg_x.min(rg_r) >= 5.0,
        );
    }
    // CPU time is steadier than wall time on a shared machine: shown beside the targets,
    // which are on wall time.
    println!(
        "CPU: 10 → 10,000 values {:+.1}%, rules on vs off {:+.1}% (medians of CPU seconds)",
        (med_cpu[1] / med_cpu[2] - 1.0) * 100.0,
        (med_cpu[1] / med_cpu[3] - 1.0) * 100.0
    );
    let (values_x, values_r) = ratio(1, 2);
    verdict(
        &format!(
            "10 → 10,000 values ≤ +10%: {:+.1}% (per round {:+.1}%)",
            (values_x - 1.0) * 100.0,
            (values_r - 1.0) * 100.0
        ),
        values_x.max(values_r) <= 1.10,
    );
    let (rules_x, rules_r) = ratio(1, 3);
    verdict(
        &format!(
            "rules on vs off ≤ +15%: {:+.1}% (per round {:+.1}%)",
            (rules_x - 1.0) * 100.0,
            (rules_r - 1.0) * 100.0
        ),
        rules_x.max(rules_r) <= 1.15,
    );
    // The whole node (`--path /`): the sites' files walked and read once, as the sites';
    // the rest as `other`. Without rules against reading the bytes (the rules' own cost is
    // the rules' target), and per byte read against the same scan of the sites alone.
    let (whole_x, whole_r) = ratio(5, 0);
    verdict(
        &format!(
            "--path /, no rules, ≤ 1.25× reading the bytes: {whole_x:.2}× (per round \
             {whole_r:.2}×)"
        ),
        whole_x.max(whole_r) <= 1.25,
    );
    let per_byte = whole_bytes as f64 / scanned.max(1) as f64;
    for (w, s, what) in [(4, 1, "rules"), (5, 3, "no rules")] {
        let (x, r) = ratio(w, s);
        let (x, r) = (x / per_byte, r / per_byte);
        verdict(
            &format!(
                "--path / per byte read within 10% of the sites alone, {what}: {:+.1}% (per \
                 round {:+.1}%)",
                (x - 1.0) * 100.0,
                (r - 1.0) * 100.0
            ),
            x.max(r) <= 1.10,
        );
    }
    let peak = rss.iter().copied().max().unwrap_or(0);
    if peak > 0 {
        verdict(&format!("peak RSS ≤ 100 MB: {:.0} MB", peak as f64 / 1024.0), peak <= 100 * 1024);
    }
    if let Some(kb) = sparse_rss {
        verdict(
            &format!("peak RSS with a 20 GiB sparse file ≤ 100 MB: {:.0} MB", kb as f64 / 1024.0),
            kb <= 100 * 1024,
        );
    }
    verdict(
        &format!("startup with 10,000 fingerprints ≤ 50 ms: {:.1} ms", startup),
        startup <= 50.0,
    );
    if let Some(n) = &neutral {
        verdict(
            &format!(
                "page cache: the workload's files (pod logs, {:.0} MiB) ≥ 99% cached after: \
                 {:.1}% before, {:.1}% after",
                mib(n.workload),
                n.workload_before * 100.0,
                n.workload_after * 100.0
            ),
            n.workload_after >= 0.99,
        );
        verdict(
            &format!(
                "page cache: of the rest ({:.0} MiB, not cached before: {:.1}%), ≤ 2% cached \
                 after: {:.2}%",
                mib(n.rest),
                n.rest_before * 100.0,
                n.rest_after * 100.0
            ),
            n.rest_after <= 0.02,
        );
        println!(
            "warm cache, median of {WARM_ROUNDS}: scan {:.3} s, with KRESIDUE_PAGE_CACHE=keep \
             {:.3} s: the page-cache look costs {:+.1}%",
            n.warm_looked,
            n.warm_kept,
            (n.warm_looked / n.warm_kept - 1.0) * 100.0
        );
        println!(
            "cold cache ({}, median of {} rounds): scan {:.3} s, parallel cat {:.3} s: {:.2}×",
            n.dropped_how,
            n.cold_rounds,
            n.cold_scan,
            n.cold_cat,
            n.cold_scan / n.cold_cat
        );
    }
    let (budget, held) = rate;
    verdict(
        &format!(
            "--max-read-rate {:.0} MB/s held within 10%: {:.1} MB/s ({:+.1}%)",
            budget / 1e6,
            held / 1e6,
            (held / budget - 1.0) * 100.0
        ),
        (held / budget - 1.0).abs() <= 0.10,
    );
    println!(
        "--state: a full scan, cold (each leaves the cache as the cold-cache runs left it) \
         {:.3} s ({:.0} MiB read); unchanged {:.3} s ({} bytes read); \
         1% of the files changed ({} files) {:.3} s ({:.1} MiB read); medians",
        inc.full,
        mib(inc.full_read),
        inc.unchanged,
        inc.unchanged_read,
        inc.changed_files,
        inc.changed,
        mib(inc.changed_read)
    );
    println!(
        "--state floor: `find ROOT -printf '%s %T@ %C@'` (every dir listed, every file's \
         times asked, one thread) {:.3} s = {:.1}% of the full scan; the unchanged scan {:.2}× it",
        inc.find,
        inc.find / inc.full * 100.0,
        inc.unchanged / inc.find
    );
    verdict(
        &format!(
            "--state, unchanged: ≤ 5% of the full scan's time: {:.1}% (the full scan cold); at \
             --max-read-rate 50M, as the DaemonSets run: {:.3} s against {:.3} s, {:.1}%",
            inc.unchanged / inc.full * 100.0,
            inc.budget_unchanged,
            inc.budget_full,
            inc.budget_unchanged / inc.budget_full * 100.0
        ),
        inc.unchanged <= 0.05 * inc.full,
    );
    verdict(
        &format!(
            "--state, unchanged: ≤ 1% of its bytes read: {:.2}%",
            inc.unchanged_read as f64 / inc.full_read.max(1) as f64 * 100.0
        ),
        inc.unchanged_read * 100 <= inc.full_read,
    );
    verdict(
        &format!(
            "--state, 1% of the files changed: ≤ 10% of the time: {:.1}%, of the bytes: {:.1}%; \
             at --max-read-rate 50M: {:.3} s against {:.3} s, {:.1}%",
            inc.changed / inc.full * 100.0,
            inc.changed_read as f64 / inc.full_read.max(1) as f64 * 100.0,
            inc.budget_changed,
            inc.budget_full,
            inc.budget_changed / inc.budget_full * 100.0
        ),
        inc.changed <= 0.10 * inc.full && inc.changed_read * 10 <= inc.full_read,
    );
    let (found, total) = recall;
    verdict(&format!("recall 100%: {found} of {total} planted values found"), found == total);
    ok &= found == total;
    let (found, total) = recall_whole;
    verdict(
        &format!("recall 100% with --path /: {found} of {total}, each as its site found it"),
        found == total,
    );
    ok &= found == total;
    Ok(ok)
}

/// One measured configuration.
enum Config {
    Read,
    Kresidue(&'static str, Vec<String>),
    Rg(PathBuf, Vec<String>),
}

impl Config {
    fn name(&self, threads: usize) -> String {
        match self {
            Config::Read => format!("read every byte ({threads} threads)"),
            Config::Kresidue(name, _) => (*name).to_owned(),
            Config::Rg(..) => "rg -uuu -F -f values.txt (10,000 values)".into(),
        }
    }
}

// ---------------------------------------------------------------------------------------
// The node

/// A planted value: where it must be reported, and as which Secret.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Plant {
    path: String,
    secret: String,
}

struct Node {
    files: u64,
    bytes: u64,
    layer_bytes: u64,
    log_bytes: u64,
    pods: usize,
    plants: Vec<Plant>,
}

/// What a kept node remembers about itself (`node.json`).
#[derive(serde::Serialize, serde::Deserialize)]
struct Saved {
    version: u32,
    size: u64,
    files: u64,
    bytes: u64,
    layer_bytes: u64,
    log_bytes: u64,
    pods: usize,
    plants: Vec<(String, String)>,
}

impl Node {
    /// The kept node `$CARGO_TARGET_TMPDIR/<kept>/` (see [`NodeTree::kept`]), rebuilt
    /// unless a complete one of this layout version and size is there.
    fn build_or_load(
        kept: &str,
        size: u64,
        vals: &[SecretValue],
    ) -> anyhow::Result<(NodeTree, Node)> {
        let tree = NodeTree::kept(kept);
        let saved = tree.base().join("node.json");
        if let Ok(s) = std::fs::read(&saved) {
            if let Ok(s) = serde_json::from_slice::<Saved>(&s) {
                if tree.is_built() && s.version == LAYOUT_VERSION && s.size == size {
                    let node = Node {
                        files: s.files,
                        bytes: s.bytes,
                        layer_bytes: s.layer_bytes,
                        log_bytes: s.log_bytes,
                        pods: s.pods,
                        plants: s
                            .plants
                            .into_iter()
                            .map(|(path, secret)| Plant { path, secret })
                            .collect(),
                    };
                    return Ok((tree, node));
                }
            }
        }
        let base = tree.base().to_path_buf();
        drop(tree);
        std::fs::remove_dir_all(&base)?;
        let tree = NodeTree::kept(kept);
        let node = Builder::new(&tree).build(size, vals)?;
        let s = Saved {
            version: LAYOUT_VERSION,
            size,
            files: node.files,
            bytes: node.bytes,
            layer_bytes: node.layer_bytes,
            log_bytes: node.log_bytes,
            pods: node.pods,
            plants: node.plants.iter().map(|p| (p.path.clone(), p.secret.clone())).collect(),
        };
        std::fs::write(saved, serde_json::to_vec(&s)?)?;
        tree.mark_built();
        Ok((tree, node))
    }
}

/// Writes the node through the node-tree builder, remembering what it planted where.
struct Builder<'t> {
    tree: &'t NodeTree,
    rng: Prng,
    node: Node,
}

impl<'t> Builder<'t> {
    fn new(tree: &'t NodeTree) -> Builder<'t> {
        Builder {
            tree,
            rng: Prng::new(0x6e6f_6465_6265_6e63),
            node: Node {
                files: 0,
                bytes: 0,
                layer_bytes: 0,
                log_bytes: 0,
                pods: 0,
                plants: Vec::new(),
            },
        }
    }

    fn plant(&mut self, path: String, v: &SecretValue) {
        self.node.plants.push(Plant { path, secret: format!("{}/{}", v.namespace, v.name) });
    }

    fn build(mut self, size: u64, vals: &[SecretValue]) -> anyhow::Result<Node> {
        let tree = self.tree;
        // Planted: every 25th value, dealt in turn to volumes, configs, logs and layers.
        let mut planted: Vec<&SecretValue> = vals.iter().step_by(VALUES / PLANTS).collect();
        let pods = (size / (2 << 20)).clamp(20, 2000) as usize;
        let layer_budget = size * 55 / 100;
        let log_budget = size * 25 / 100;
        let pod_budget = size - layer_budget - log_budget;
        let mut pod_dirs = Vec::new();
        for p in 0..pods {
            let uid = self.rng.uuid();
            let ns = *self.rng.pick(NAMESPACES);
            let app = *self.rng.pick(APPS);
            let name = format!("{app}-{}", self.rng.hex(5));
            // The pod dir with kubelet's usual entries (`etc-hosts` among them).
            let pod = tree.pod(&uid);
            for c in [app, "istio-proxy"] {
                pod.termination_log(c, &self.rng.hex(8), b"");
            }
            // The secret volume.
            let ts = format!("..2025_05_01_10_{:02}_{:02}.{}", p % 60, p % 59, 100_000_000 + p);
            let vol = pod.secret_volume_at(&format!("{app}-secrets"), &ts);
            let value = match (p % 4 == 0).then(|| planted.pop()).flatten() {
                Some(v) => {
                    self.plant(vol.visible("password"), v);
                    v.value.clone()
                }
                None => self.rng.chars(common::TOKEN_CHARS, 24).into_bytes(),
            };
            vol.key("password", &value).key("username", app.as_bytes());
            // The projected service-account token volume.
            let proj = format!("kube-api-access-{}", self.rng.hex(5));
            let ts2 = format!("..2025_05_01_11_{:02}_{:02}.{}", p % 60, p % 57, 200_000_000 + p);
            let token = self.jwt_like();
            let ca = common::fake_pem(&mut self.rng, 1100);
            pod.projected_volume_at(&proj, &ts2)
                .key("token", &token)
                .key("namespace", ns.as_bytes())
                .key("ca.crt", &ca);
            pod_dirs.push((uid, ns, name, app));
        }
        // emptyDirs: application logs and configs, some holding values.
        let mut written = 0u64;
        let mut k = 0;
        while written < pod_budget {
            let (uid, _, _, app) = &pod_dirs[k % pods];
            k += 1;
            // Mostly small files, a few large ones (up to 16 MiB).
            let size = match self.rng.chance(3) {
                true => self.rng.log_range(1 << 20, 16 << 20),
                false => self.rng.log_range(256, 256 << 10),
            };
            let mut text = self.text(size);
            let name = if k % 3 == 0 { format!("config-{k}.yaml") } else { format!("app-{k}.log") };
            let plant = if k % 2 == 0 { planted.pop() } else { None };
            if let Some(v) = plant {
                // JSON-escaped and raw forms alike: a config line.
                let esc = serde_json::to_string(&String::from_utf8_lossy(&v.value))?;
                let line = [b"\napi_key: ".as_slice(), esc.as_bytes(), b"\n"].concat();
                let at = self.rng.range(0, text.len().max(1));
                text.splice(at..at, line);
            }
            written += text.len() as u64;
            let path = tree.pod(uid).empty_dir_file(&format!("{app}-data"), &name, &text);
            if let Some(v) = plant {
                self.plant(path, v);
            }
        }
        // Pod logs in CRI format.
        let mut written = 0u64;
        let mut k = 0;
        while written < log_budget {
            let (uid, ns, name, app) = &pod_dirs[k % pods];
            k += 1;
            let size = self.rng.log_range(2 << 10, 10 << 20);
            let mut log = Vec::with_capacity(size + 256);
            let mut plant = if k % 2 == 0 { planted.pop() } else { None };
            let mut placed = None;
            let at = self.rng.range(0, size);
            let mut second = 0u64;
            while log.len() < size {
                second += 1;
                log.extend_from_slice(
                    format!(
                        "2025-05-01T10:{:02}:{:02}.{:09}Z stdout F ",
                        second / 60 % 60,
                        second % 60,
                        second
                    )
                    .as_bytes(),
                );
                if log.len() >= at {
                    if let Some(v) = plant.take() {
                        log.extend_from_slice(b"token=");
                        log.extend_from_slice(&v.value);
                        log.push(b'\n');
                        placed = Some(v);
                        continue;
                    }
                }
                let n = self.rng.range(6, 30);
                words(&mut self.rng, &mut log, n, WORDS);
                log.push(b'\n');
            }
            written += log.len() as u64;
            self.node.log_bytes += log.len() as u64;
            let path = tree.pod(uid).log(ns, name, app, &format!("{k}.log"), &log);
            if let Some(v) = placed {
                self.plant(path, v);
            }
        }
        // Container layers: real files from /usr (spread over all of it, or all of it
        // again and again for a large node) in containerd's overlayfs snapshots, and a
        // base64 value now and then.
        let sources = usr_files();
        anyhow::ensure!(!sources.is_empty(), "no files under /usr to copy");
        let available: u64 = sources.iter().map(|s| s.1).sum();
        let stride = (available / layer_budget).max(1) as usize;
        let per_layer = (layer_budget / 16).max(8 << 20);
        let (mut written, mut in_layer, mut layer, mut next) = (0u64, 0u64, 1, 0usize);
        let mut copied = 0u64;
        while written < layer_budget {
            let src = &sources[next % sources.len()].0;
            next += stride;
            let fs = tree.snapshot(layer);
            let dst = Path::new(&fs).join(src.strip_prefix("/").expect("absolute"));
            if tree.host(&dst).exists() {
                continue;
            }
            let Ok(len) = tree.copy(&dst, src) else { continue };
            copied += 1;
            self.node.layer_bytes += len;
            in_layer += len;
            written += len;
            if copied.is_multiple_of(150) {
                if let Some(v) = planted.pop() {
                    let b64 = STANDARD.encode(&v.value);
                    let path = format!("{fs}/etc/app-{copied}/credentials.b64");
                    let path = tree.write(path, format!("{b64}\n").as_bytes());
                    self.plant(path, v);
                }
            }
            if in_layer >= per_layer {
                (layer, in_layer) = (layer + 1, 0);
            }
        }
        self.node.pods = pods;
        (self.node.files, self.node.bytes) = regular_files(tree.root());
        Ok(self.node)
    }

    /// A JWT-shaped token that is not one (its header does not decode to JSON).
    fn jwt_like(&mut self) -> Vec<u8> {
        let mut t = b"eyJ".to_vec();
        t.extend(self.rng.chars(common::B64_CHARS, 60).bytes());
        t
    }

    /// About `size` bytes of log-like text.
    fn text(&mut self, size: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(size + 256);
        while out.len() < size {
            out.extend_from_slice(
                format!("{} level=info ", self.rng.range(1_700_000_000, 1_800_000_000)).as_bytes(),
            );
            let n = self.rng.range(6, 24);
            words(&mut self.rng, &mut out, n, WORDS);
            out.push(b'\n');
        }
        out
    }
}

/// How many regular files are under `root` (no symlinks followed), and their bytes.
fn regular_files(root: &Path) -> (u64, u64) {
    walkdir::WalkDir::new(root)
        .follow_links(false)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .filter_map(|e| e.metadata().ok())
        .fold((0, 0), |(n, b), m| (n + 1, b + m.len()))
}

/// Regular files under `/usr` of at most 2 MiB (an image's files: mostly small), sorted by
/// path, with their sizes.
fn usr_files() -> Vec<(PathBuf, u64)> {
    let mut out: Vec<(PathBuf, u64)> = walkdir::WalkDir::new("/usr")
        .follow_links(false)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .filter_map(|e| {
            let len = e.metadata().ok()?.len();
            (len > 0 && len <= 2 << 20).then(|| (e.into_path(), len))
        })
        .collect();
    out.sort();
    out
}

// ---------------------------------------------------------------------------------------
// Inputs

struct Inputs {
    fp_10k: PathBuf,
    fp_10: PathBuf,
    values_txt: PathBuf,
}

impl Inputs {
    /// kubectl JSON of the values, their fingerprint files (all, and the first 10), and
    /// the plaintext pattern file for rg.
    fn write(base: &Path, bin: &Path, vals: &[SecretValue]) -> anyhow::Result<Inputs> {
        let kubectl = |vals: &[SecretValue]| {
            let items: Vec<serde_json::Value> = vals
                .iter()
                .map(|v| {
                    serde_json::json!({
                        "apiVersion": "v1",
                        "kind": "Secret",
                        "type": "Opaque",
                        "metadata": {"namespace": v.namespace, "name": v.name},
                        "data": {v.key.as_str(): STANDARD.encode(&v.value)},
                    })
                })
                .collect();
            serde_json::to_vec(
                &serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items}),
            )
        };
        let dir = base.join("inputs");
        std::fs::create_dir_all(&dir)?;
        let mut fps = Vec::new();
        for (name, vals) in [("10k", vals), ("10", &vals[..10])] {
            let json = dir.join(format!("secrets-{name}.json"));
            std::fs::write(&json, kubectl(vals)?)?;
            let fp = dir.join(format!("values-{name}.fp"));
            let st = Command::new(bin)
                .arg("fingerprint")
                .arg(&json)
                .arg("-o")
                .arg(&fp)
                .stderr(Stdio::null())
                .status()?;
            anyhow::ensure!(st.success(), "kresidue fingerprint failed");
            fps.push(fp);
        }
        let mut lines = BTreeSet::new();
        for v in vals {
            for l in v.value.split(|&b| b == b'\n').filter(|l| l.len() >= 8) {
                lines.insert(l.to_vec());
            }
        }
        let values_txt = dir.join("values.txt");
        let mut f = std::io::BufWriter::new(std::fs::File::create(&values_txt)?);
        for l in lines {
            f.write_all(&l)?;
            f.write_all(b"\n")?;
        }
        f.flush()?;
        let fp_10 = fps.pop().expect("two");
        let fp_10k = fps.pop().expect("two");
        Ok(Inputs { fp_10k, fp_10, values_txt })
    }
}

// ---------------------------------------------------------------------------------------
// Measuring

/// Walks `root` (no symlinks followed) and reads every regular file into a reused 1 MiB
/// buffer per thread, on `threads` threads; the bytes read.
fn read_all(root: &Path, threads: usize) -> anyhow::Result<u64> {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build()?;
    let total = std::sync::atomic::AtomicU64::new(0);
    pool.install(|| {
        walkdir::WalkDir::new(root)
            .follow_links(false)
            .into_iter()
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_file())
            .par_bridge()
            .for_each_init(
                || vec![0u8; 1 << 20],
                |buf, e| {
                    let Ok(mut f) = std::fs::File::open(e.path()) else { return };
                    let mut n = 0u64;
                    while let Ok(k) = f.read(buf) {
                        if k == 0 {
                            break;
                        }
                        n += k as u64;
                    }
                    total.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
                },
            )
    });
    Ok(total.into_inner())
}

/// Runs `bin args` (through `/usr/bin/time` when there is one): stdout and peak RSS (KiB).
fn run_measured(
    bin: &Path,
    args: &[String],
    time: Option<&Path>,
    base: &Path,
) -> anyhow::Result<(Vec<u8>, u64)> {
    let rss_file = base.join("rss.txt");
    let mut cmd = match time {
        Some(t) => {
            let mut c = Command::new(t);
            c.arg("-f").arg("%M").arg("-o").arg(&rss_file).arg(bin);
            c
        }
        None => Command::new(bin),
    };
    let out =
        cmd.args(args).env("KRESIDUE_LOCK", base.join("lock")).stderr(Stdio::piped()).output()?;
    anyhow::ensure!(
        matches!(out.status.code(), Some(0 | 1)),
        "kresidue {args:?}: {}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let peak =
        std::fs::read_to_string(&rss_file).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0);
    Ok((out.stdout, peak))
}

/// What [`neutrality`] measured.
struct Neutral {
    /// Bytes of the workload's files (the pod logs), cached before the scan.
    workload: u64,
    workload_before: f64,
    workload_after: f64,
    /// Bytes of the other files, not cached before the scan.
    rest: u64,
    rest_before: f64,
    rest_after: f64,
    /// How the pages were dropped for the cold runs.
    dropped_how: &'static str,
    cold_rounds: usize,
    /// Median seconds of a scan and of a parallel `cat`, each after the pages were dropped.
    cold_scan: f64,
    cold_cat: f64,
    /// Median seconds of a scan on a warm cache, as is and with the page cache kept.
    warm_looked: f64,
    warm_kept: f64,
}

/// Rounds of each side of the warm comparison of [`neutrality`], after one each.
const WARM_ROUNDS: usize = 7;

/// The page cache before and after a scan (`fincore`), with the pod logs cached as a
/// workload would and every other file's pages dropped; then the scan against
/// `find | xargs -P cat` with the pages dropped before each run (as root the kernel's
/// caches too: `drop_caches`). `None` without `fincore`, or where pages cannot be dropped
/// (a tmpfs).
fn neutrality(
    bin: &Path,
    root: &Path,
    base: &Path,
    args: &[String],
    threads: usize,
) -> anyhow::Result<Option<Neutral>> {
    if which("fincore").is_none() {
        println!("page cache: fincore not installed (util-linux-extra): not measured");
        return Ok(None);
    }
    let files: Vec<(PathBuf, u64)> = walkdir::WalkDir::new(root)
        .follow_links(false)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .filter_map(|e| Some((e.path().to_path_buf(), e.metadata().ok()?.len())))
        .collect();
    let is_log = |p: &Path| p.starts_with(root.join("var/log/pods"));
    let (logs, rest): (Vec<_>, Vec<_>) = files.iter().cloned().partition(|(p, _)| is_log(p));
    let bytes = |set: &[(PathBuf, u64)]| set.iter().map(|(_, n)| n).sum::<u64>().max(1);
    // A node just built has dirty pages, which are not dropped until written.
    Command::new("sync").status()?;
    drop_pages(&files)?;
    if cached(&files)? != 0 {
        println!("page cache: the node's pages cannot be dropped here (a tmpfs?): not measured");
        return Ok(None);
    }
    for (p, _) in &logs {
        std::io::copy(&mut std::fs::File::open(p)?, &mut std::io::sink())?;
    }
    let share = |set: &[(PathBuf, u64)]| -> anyhow::Result<f64> {
        Ok(cached(set)? as f64 / bytes(set) as f64)
    };
    let (workload_before, rest_before) = (share(&logs)?, share(&rest)?);
    run_measured(bin, args, None, base)?;
    let (workload_after, rest_after) = (share(&logs)?, share(&rest)?);

    // On a warm cache the look is all the neutrality costs: the scan as is against the
    // scan with `KRESIDUE_PAGE_CACHE=keep`, interleaved.
    for (p, _) in &files {
        std::io::copy(&mut std::fs::File::open(p)?, &mut std::io::sink())?;
    }
    let (mut looked, mut kept) = (Vec::new(), Vec::new());
    for round in 0..2 * WARM_ROUNDS {
        let keep = round % 2 == 1;
        let t = Instant::now();
        let mut cmd = Command::new(bin);
        cmd.args(args).env("KRESIDUE_LOCK", base.join("lock")).stdout(Stdio::null());
        if keep {
            cmd.env("KRESIDUE_PAGE_CACHE", "keep");
        }
        anyhow::ensure!(matches!(cmd.status()?.code(), Some(0 | 1)), "kresidue {args:?}");
        if round >= 2 {
            [&mut looked, &mut kept][usize::from(keep)].push(t.elapsed());
        }
    }

    let as_root = nix::unistd::geteuid().is_root();
    let dropped_how = if as_root { "drop_caches" } else { "POSIX_FADV_DONTNEED per file" };
    let cold = || -> anyhow::Result<()> {
        if as_root {
            Command::new("sync").status()?;
            std::fs::write("/proc/sys/vm/drop_caches", "3\n")?;
        } else {
            drop_pages(&files)?;
        }
        Ok(())
    };
    let cat = format!(
        "find {} -type f -print0 | xargs -0 -P{threads} -n 200 cat > /dev/null",
        path_str(root)
    );
    let cold_rounds = 3;
    let (mut scans, mut cats) = (Vec::new(), Vec::new());
    for _ in 0..cold_rounds {
        cold()?;
        let t = Instant::now();
        anyhow::ensure!(Command::new("sh").args(["-c", &cat]).status()?.success(), "{cat}");
        cats.push(t.elapsed());
        cold()?;
        let t = Instant::now();
        run_measured(bin, args, None, base)?;
        scans.push(t.elapsed());
    }
    Ok(Some(Neutral {
        workload: bytes(&logs),
        workload_before,
        workload_after,
        rest: bytes(&rest),
        rest_before,
        rest_after,
        dropped_how,
        cold_rounds,
        cold_scan: median(&scans),
        cold_cat: median(&cats),
        warm_looked: median(&looked),
        warm_kept: median(&kept),
    }))
}

/// Drops the page-cache pages of `files` (`POSIX_FADV_DONTNEED`; they were synced long
/// since, so none is dirty).
fn drop_pages(files: &[(PathBuf, u64)]) -> anyhow::Result<()> {
    use nix::fcntl::{posix_fadvise, PosixFadviseAdvice};
    for (p, _) in files {
        let f = std::fs::File::open(p)?;
        posix_fadvise(&f, 0, 0, PosixFadviseAdvice::POSIX_FADV_DONTNEED)?;
    }
    Ok(())
}

/// Bytes of `files` in the page cache, as util-linux's `fincore` says.
fn cached(files: &[(PathBuf, u64)]) -> anyhow::Result<u64> {
    let mut sum = 0;
    for chunk in files.chunks(500) {
        let out = Command::new("fincore")
            .args(["--bytes", "--noheadings", "--raw", "--output", "RES"])
            .args(chunk.iter().map(|(p, _)| p))
            .output()?;
        anyhow::ensure!(out.status.success(), "fincore: {}", String::from_utf8_lossy(&out.stderr));
        for line in String::from_utf8(out.stdout)?.lines() {
            sum += line.trim().parse::<u64>()?;
        }
    }
    Ok(sum)
}

/// The main scan with `--max-read-rate` set to what makes it take about 3 s: the budget
/// and the rate held (the bytes read over the whole run's time), bytes a second.
fn read_rate(bin: &Path, base: &Path, args: &[String], bytes: u64) -> anyhow::Result<(f64, f64)> {
    let budget = (bytes as f64 / 3.0 / 1e6).round().max(1.0) * 1e6;
    let mut limited = args.to_vec();
    limited.extend(["--max-read-rate".into(), format!("{}", budget as u64)]);
    let t = Instant::now();
    let (out, _) = run_measured(bin, &limited, None, base)?;
    let took = t.elapsed().as_secs_f64();
    let report: serde_json::Value = serde_json::from_slice(&out)?;
    let read = report["summary"]["bytes"].as_u64().unwrap_or(0);
    Ok((budget, read as f64 / took))
}

/// What [`incremental`] measured: median seconds, bytes read.
struct Incremental {
    /// One full, one unchanged and one 1%-changed scan at `--max-read-rate 50M`.
    budget_full: f64,
    budget_unchanged: f64,
    budget_changed: f64,
    full: f64,
    full_read: u64,
    unchanged: f64,
    unchanged_read: u64,
    changed_files: usize,
    changed: f64,
    changed_read: u64,
    /// `find ROOT -printf '%s %T@ %C@'`: every directory listed and every file's size
    /// and times asked, the least a scan that trusts no file unseen does.
    find: f64,
}

/// Rounds of each measurement of [`incremental`].
const STATE_ROUNDS: usize = 5;

/// The main scan with `--state` (issue 52), after the cold-cache runs (so each full scan
/// reads a cold cache: a scan leaves the cache as it found it): a full scan (`--full`,
/// the state written anew), a scan of the node unchanged since, `find` listing the tree
/// and asking every file's times (the floor), and a scan after 1% of its files changed
/// (their mode set again: a new change time, the same bytes, 2.1 s before the scan, so
/// that none is "racily clean"); the bytes read are the files read, not those the state
/// had unchanged. Then the same three scans once at `--max-read-rate 50M`, as the
/// DaemonSets run them.
fn incremental(
    bin: &Path,
    root: &Path,
    base: &Path,
    args: &[String],
) -> anyhow::Result<Incremental> {
    let state = base.join("state");
    let _ = std::fs::remove_dir_all(&state);
    let mut with_state = args.to_vec();
    with_state.extend(["--state".into(), path_str(&state).into()]);
    let run = |extra: &[&str]| -> anyhow::Result<(f64, u64)> {
        let mut a = with_state.clone();
        a.extend(extra.iter().map(|s| s.to_string()));
        let t = Instant::now();
        let (out, _) = run_measured(bin, &a, None, base)?;
        let took = t.elapsed().as_secs_f64();
        let r: serde_json::Value = serde_json::from_slice(&out)?;
        let s = &r["summary"];
        let read = s["bytes"].as_u64().unwrap_or(0) - s["unchanged_bytes"].as_u64().unwrap_or(0);
        Ok((took, read))
    };
    let step = 100;
    let files: Vec<PathBuf> = walkdir::WalkDir::new(root)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .map(|e| e.into_path())
        .collect();
    // 1% of the files changed: their mode set again (a new change time, the same bytes),
    // 2.1 s before the next scan, so that none is "racily clean".
    let change = |round: usize| -> anyhow::Result<()> {
        for p in files.iter().skip(round).step_by(step) {
            let perm = std::fs::metadata(p)?.permissions();
            std::fs::set_permissions(p, perm)?;
        }
        std::thread::sleep(Duration::from_millis(2100));
        Ok(())
    };
    let (mut full, mut unchanged, mut changed) = (Vec::new(), Vec::new(), Vec::new());
    let mut find = Vec::new();
    let (mut full_read, mut unchanged_read, mut changed_read) = (0, 0, 0);
    for round in 0..STATE_ROUNDS {
        let (t, n) = run(&["--full"])?;
        full_read = n;
        full.push(Duration::from_secs_f64(t));
        let (t, n) = run(&[])?;
        unchanged_read = n;
        unchanged.push(Duration::from_secs_f64(t));
        let t = Instant::now();
        let listed = Command::new("find")
            .arg(root)
            .args(["-printf", "%s %T@ %C@\\n"])
            .stdout(std::process::Stdio::null())
            .status()?;
        anyhow::ensure!(listed.success(), "find: {listed}");
        find.push(t.elapsed());
        change(round)?;
        let (t, n) = run(&[])?;
        changed_read = n;
        changed.push(Duration::from_secs_f64(t));
    }
    // As the DaemonSets run: at most 50 MB/s, where the reading, not the walk, sets the
    // first scan's pace.
    let (budget_full, _) = run(&["--full", "--max-read-rate", "50M"])?;
    let (budget_unchanged, _) = run(&["--max-read-rate", "50M"])?;
    change(STATE_ROUNDS)?;
    let (budget_changed, _) = run(&["--max-read-rate", "50M"])?;
    Ok(Incremental {
        budget_full,
        budget_unchanged,
        budget_changed,
        full: median(&full),
        full_read,
        unchanged: median(&unchanged),
        unchanged_read,
        changed_files: files.len().div_ceil(step),
        changed: median(&changed),
        changed_read,
        find: median(&find),
    })
}

/// Median wall time (ms) of `scan` over an empty root with the 10,000-value fingerprints.
fn startup(bin: &Path, base: &Path, fp: &Path) -> anyhow::Result<f64> {
    let empty = base.join("empty-root");
    std::fs::create_dir_all(&empty)?;
    let mut times = Vec::new();
    for _ in 0..21 {
        let t = Instant::now();
        let out = Command::new(bin)
            .args(["scan", "--no-cri", "-q", "--format", "json", "--root"])
            .arg(&empty)
            .arg("--fingerprints")
            .arg(fp)
            .env("KRESIDUE_LOCK", base.join("lock"))
            .output()?;
        anyhow::ensure!(out.status.success(), "startup run: {}", out.status);
        times.push(t.elapsed());
    }
    Ok(median(&times) * 1e3)
}

/// Peak RSS (KiB) of a scan of a node holding one 20 GiB sparse file with 1 MiB of data
/// every GiB (a kept node of its own, `<kept>/sparse`); `None` without `/usr/bin/time`.
fn sparse(
    bin: &Path,
    kept: &str,
    base: &Path,
    fp: &Path,
    time: Option<&Path>,
) -> anyhow::Result<Option<u64>> {
    let Some(time) = time else { return Ok(None) };
    let tree = NodeTree::kept(&format!("{kept}/sparse"));
    if !tree.is_built() {
        let pod = tree.pod("5ba25e00-0000-4000-8000-000000000020");
        let file = tree.host(pod.empty_dir_file("disk", "disk.img", b""));
        let f = std::fs::OpenOptions::new().write(true).open(file)?;
        f.set_len(20 << 30)?;
        let mut rng = Prng::new(20);
        for gib in 0..20u64 {
            use std::os::unix::fs::FileExt;
            f.write_all_at(&rng.bytes(1 << 20), gib << 30)?;
        }
        tree.mark_built();
    }
    let root = tree.root();
    let args: Vec<String> = [
        "scan",
        "--no-cri",
        "-q",
        "--format",
        "json",
        "--root",
        path_str(root),
        "--fingerprints",
        path_str(fp),
    ]
    .map(String::from)
    .to_vec();
    let (_, peak) = run_measured(bin, &args, Some(time), base)?;
    Ok(Some(peak))
}

/// How many plants the report found (a finding at the plant's path naming its Secret).
fn recall(report: &serde_json::Value, plants: &[Plant]) -> (usize, usize) {
    let mut found: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for f in report["findings"].as_array().into_iter().flatten() {
        if let (Some(p), Some(s)) = (f["path"].as_str(), f["match"]["secret"].as_str()) {
            found.entry(p).or_default().insert(s);
        }
    }
    let hits = plants
        .iter()
        .filter(|p| found.get(p.path.as_str()).is_some_and(|s| s.contains(p.secret.as_str())))
        .count();
    for p in plants
        .iter()
        .filter(|p| !found.get(p.path.as_str()).is_some_and(|s| s.contains(p.secret.as_str())))
        .take(5)
    {
        println!("missed: {} at {}", p.secret, p.path);
    }
    (hits, plants.len())
}

/// User plus system CPU seconds of this process (`RUSAGE_SELF`) or of its waited-for
/// children (`RUSAGE_CHILDREN`).
fn cpu_seconds(who: UsageWho) -> anyhow::Result<f64> {
    let u = getrusage(who)?;
    let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    Ok(secs(u.user_time()) + secs(u.system_time()))
}

fn median(ts: &[Duration]) -> f64 {
    median_f64(ts.iter().map(Duration::as_secs_f64).collect())
}

fn median_f64(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn min_max(ts: &[Duration]) -> (f64, f64) {
    let v = ts.iter().map(Duration::as_secs_f64);
    (v.clone().fold(f64::MAX, f64::min), v.fold(0.0, f64::max))
}

fn mib(b: u64) -> f64 {
    b as f64 / (1 << 20) as f64
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 bench path")
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}
