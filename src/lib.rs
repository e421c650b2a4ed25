//! kresidue finds Kubernetes Secret residue on a node's disks: Secret values still there
//! after their pods died, or leaked where they never belonged.
//!
//! Layers, top to bottom (dependencies point down): [`cli`] (clap types) → [`config`]
//! (validated settings) → [`scan`] (orchestration) → [`node`] (layout knowledge) and
//! [`walk`] (confined walk) → [`matcher`] (compiled fingerprints) → [`fingerprint`] /
//! [`kubectl`] (inputs) → [`finding`] (the model); [`cri`] asks the container runtime which
//! pods and containers live; [`report`] writers print a finished
//! [`finding::Report`]; [`sys`] is the only home of system calls. [`bbolt`] reads the
//! runtime's metadata databases (containerd's `meta.db`, etcd's db) from bytes.
#![deny(missing_docs)]

pub mod bbolt;
pub mod cli;
pub mod config;
pub mod cri;
pub mod finding;
pub mod fingerprint;
pub mod kubectl;
pub mod matcher;
pub mod node;
pub mod report;
pub mod rules;
pub mod scan;
pub mod sys;
pub mod walk;

use anyhow::{bail, Context, Result};
use cli::{Cli, Command, FingerprintArgs, PodsArgs, RulesArgs, ScanArgs};
use finding::{CriInfo, CriStatus, ExitStatus, Report, ScanError, Summary};
use fingerprint::{BuildStats, FingerprintSet, MAX_FORM_LEN, MIN_VALUE_LEN};
use std::io::{Read, Write};
use std::path::Path;
use std::time::Instant;

/// What a run ended with: the exit status and notes for stderr (never holding values).
#[derive(Debug)]
pub struct Outcome {
    /// The exit status.
    pub status: ExitStatus,
    /// One-line notes for stderr.
    pub notes: Vec<String>,
}

/// Runs a parsed command line. Output goes to `stdout` (or the `-o` file).
pub fn run(cli: Cli, stdout: &mut dyn Write) -> Result<Outcome> {
    match cli.command {
        Command::Scan(args) => run_scan(&args, stdout),
        Command::Fingerprint(args) => run_fingerprint(&args, stdout),
        Command::Rules(args) => run_rules(&args, stdout),
        Command::Pods(args) => run_pods(&args, stdout),
    }
}

fn run_scan(args: &ScanArgs, stdout: &mut dyn Write) -> Result<Outcome> {
    let started = Instant::now();
    let mut cfg = config::ScanConfig::from_args(args)?;
    // Connected (and the version asked) before the scan, so that `--require-cri` fails
    // fast; the pods are listed after it, so that a pod started meanwhile counts as live.
    let mut connected = match cri::connect(&cfg.cri, cfg.cri_timeout) {
        Err(u) if cfg.require_cri => bail!("{u}"),
        other => other,
    };
    // kubelet's root dir, when not given: where the runtime's containers mount volumes from.
    if let Ok(Some(client)) = &mut connected {
        if !cfg.settings.layout.kubelet_dir_explicit {
            if let Ok(Some(dir)) = cri::kubelet_dir(client) {
                cfg.settings.layout.kubelet_dir = dir;
            }
        }
    }
    let matcher = matcher::Matcher::new(cfg.sets);
    let rules = if cfg.rules { rules::Rules::builtin(unix_now()) } else { rules::Rules::none() };
    let searchers = scan::Searchers { matcher: &matcher, rules: &rules };
    let mut result = scan::scan(&cfg.root, &cfg.settings, &searchers)?;
    let cri_info = cross_check(connected, &mut result, cfg.require_cri)?;
    let before = result.findings.len();
    result.findings.retain(|f| !cfg.baseline.contains(&f.id));
    let baselined = (before - result.findings.len()) as u64;
    let report = Report {
        schema: Report::SCHEMA,
        root: report::display_path(cfg.root_arg.as_os_str()),
        node: node_name(&cfg.root),
        cri: cri_info,
        summary: Summary {
            files: result.files,
            bytes: result.bytes,
            findings: result.findings.len() as u64,
            sites: result.findings.iter().fold(Default::default(), |mut m, f| {
                *m.entry(f.site).or_default() += 1;
                m
            }),
            baselined,
            duration_ms: started.elapsed().as_millis() as u64,
        },
        findings: result.findings,
        errors: result.errors,
    };
    match &cfg.output {
        Some(path) => report::write_atomic(path, |w| report::write(&report, cfg.format, w))?,
        None => report::write(&report, cfg.format, stdout)?,
    }
    let mut notes = Vec::new();
    if let Some(stats) = cfg.secrets_stats {
        notes.extend(skip_note(&stats));
    }
    Ok(Outcome { status: report.exit_status(cfg.fail_on), notes })
}

/// Asks the runtime what runs now and rates the findings by it; the report's `cri` block.
/// A runtime that cannot be asked leaves liveness unknown and says why in `errors` (or
/// fails the scan with `--require-cri`).
fn cross_check(
    connected: Result<Option<cri::Client>, cri::Unreachable>,
    result: &mut scan::ScanResult,
    require: bool,
) -> Result<CriInfo> {
    let asked = connected.and_then(|client| match client {
        None => Ok(None),
        Some(mut client) => client.live().map(|live| Some((client, live))),
    });
    Ok(match asked {
        Ok(None) => CriInfo { status: CriStatus::Disabled, endpoint: None, runtime: None },
        Ok(Some((client, live))) => {
            scan::judge(&mut result.findings, &live);
            CriInfo {
                status: CriStatus::Ok,
                endpoint: Some(client.endpoint().to_string()),
                runtime: Some(client.runtime().to_owned()),
            }
        }
        Err(u) if require => bail!("{u}"),
        Err(u) => {
            result
                .errors
                .push(ScanError { path: u.endpoint.clone(), error: format!("CRI: {}", u.error) });
            result.errors.sort();
            CriInfo { status: CriStatus::Unreachable, endpoint: Some(u.endpoint), runtime: None }
        }
    })
}

fn run_pods(args: &PodsArgs, stdout: &mut dyn Write) -> Result<Outcome> {
    let root =
        sys::RootDir::open(&args.root).with_context(|| format!("root {}", args.root.display()))?;
    let (choice, timeout) = config::cri_choice(&args.cri, false, &root)?;
    let mut client = match cri::connect(&choice, timeout) {
        Ok(Some(client)) => client,
        Ok(None) => {
            bail!("no container runtime to ask with --root other than /: give one with --cri")
        }
        Err(u) => bail!("{u}"),
    };
    let live = client.live().map_err(|u| anyhow::anyhow!("{u}"))?;
    report::write_pods(
        &live,
        &client.endpoint().to_string(),
        client.runtime(),
        args.format,
        stdout,
    )?;
    Ok(Outcome { status: ExitStatus::Clean, notes: Vec::new() })
}

fn run_fingerprint(args: &FingerprintArgs, stdout: &mut dyn Write) -> Result<Outcome> {
    let src = args.input.as_deref().unwrap_or(Path::new("-"));
    let parsed = kubectl::parse(&config::read_input(src)?)?;
    let (set, stats) =
        FingerprintSet::build(&parsed.values, &args.label, fingerprint::random_salt()?);
    let json = set.to_json();
    match &args.output {
        Some(path) => report::write_atomic(path, |w| w.write_all(&json))?,
        None => stdout.write_all(&json)?,
    }
    let mut notes = vec![format!(
        "fingerprinted {} values from {} secrets with label {:?}",
        stats.values, parsed.secrets, args.label
    )];
    notes.extend(skip_note(&stats));
    if parsed.unparsable_docker_configs > 0 {
        notes.push(format!(
            "{} docker config values were not valid JSON: fingerprinted whole, registries not extracted",
            parsed.unparsable_docker_configs
        ));
    }
    Ok(Outcome { status: ExitStatus::Clean, notes })
}

fn run_rules(args: &RulesArgs, stdout: &mut dyn Write) -> Result<Outcome> {
    let rules = rules::Rules::builtin(unix_now());
    match args.format {
        cli::FormatArg::Json => {
            let list: Vec<_> = rules
                .specs()
                .map(|r| {
                    serde_json::json!({
                        "id": r.id,
                        "severity": r.severity,
                        "description": r.description,
                        "literals": r.literals.iter().map(|l| l.text).collect::<Vec<_>>(),
                    })
                })
                .collect();
            let doc = serde_json::json!({ "schema": "kresidue/rules/v1", "rules": list });
            serde_json::to_writer_pretty(&mut *stdout, &doc)?;
            writeln!(stdout)?;
        }
        cli::FormatArg::Table => {
            let width = rules.specs().map(|r| r.id.len()).max().unwrap_or(0);
            for r in rules.specs() {
                writeln!(
                    stdout,
                    "{:<width$}  {:<8}  {}",
                    r.id,
                    r.severity.as_str(),
                    r.description
                )?;
            }
        }
    }
    Ok(Outcome { status: ExitStatus::Clean, notes: Vec::new() })
}

/// Seconds since the Unix epoch (0 if the clock is before it).
fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn skip_note(stats: &BuildStats) -> Option<String> {
    (stats.too_short + stats.too_long > 0).then(|| {
        format!(
            "skipped {} values shorter than {MIN_VALUE_LEN} bytes and {} with a form longer than {MAX_FORM_LEN} bytes",
            stats.too_short, stats.too_long
        )
    })
}

/// The node's name: the hostname when scanning `/`, else `<root>/etc/hostname`.
fn node_name(root: &sys::RootDir) -> Option<String> {
    if root.path() == Path::new("/") {
        return sys::hostname();
    }
    let mut f = root.open_file(Path::new("etc/hostname")).ok()?;
    let mut s = String::new();
    (&mut f).take(256).read_to_string(&mut s).ok()?;
    let name = s.trim();
    (!name.is_empty()).then(|| report::terminal_safe(name))
}
