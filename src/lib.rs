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
pub mod clean;
pub mod cli;
pub mod config;
pub mod cri;
pub mod finding;
pub mod fingerprint;
pub mod fuzzing;
pub mod kubectl;
pub mod matcher;
pub mod node;
pub mod progress;
pub mod report;
pub mod rules;
pub mod scan;
pub mod severity;
pub mod sites;
pub mod sys;
pub mod walk;

use anyhow::{bail, Context, Result};
use cli::{CleanArgs, Cli, Command, FingerprintArgs, PodsArgs, RulesArgs, ScanArgs};
use finding::{CriInfo, CriStatus, ExitStatus, Report, ScanError, Summary};
use fingerprint::{BuildStats, FingerprintSet, MAX_FORM_LEN, MIN_VALUE_LEN};
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::time::Instant;

/// A run stopped by SIGINT or SIGTERM (the signal): nothing written, lock released; the
/// process exits with 128 + the signal.
#[derive(Debug)]
pub struct Interrupted(pub i32);

impl Interrupted {
    /// The signal's name: `SIGINT`, `SIGTERM`.
    pub fn name(&self) -> &'static str {
        match self.0 {
            2 => "SIGINT",
            15 => "SIGTERM",
            _ => "a signal",
        }
    }
}

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A clean --apply finished the action under way: its journal says what was done.
        write!(
            f,
            "interrupted by {}: no report was written (what clean --apply did is in its journal)",
            self.name()
        )
    }
}

impl std::error::Error for Interrupted {}

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
        Command::Clean(args) => run_clean(&args, stdout),
        Command::Completions(args) => {
            cli::completions(args.shell, stdout);
            Ok(Outcome { status: ExitStatus::Clean, notes: Vec::new() })
        }
    }
}

fn run_scan(args: &ScanArgs, stdout: &mut dyn Write) -> Result<Outcome> {
    let started = Instant::now();
    let fail_on = config::fail_on(args.fail_on);
    // A usage error: said before the fingerprints load.
    if args.search.format == cli::ReportFormatArg::Npd && fail_on.is_none() {
        bail!("--format npd reports findings at or above --fail-on: give a severity, not never");
    }
    let mut cfg = config::ScanConfig::from_args(&args.search)?;
    match &mut cfg.format {
        report::Format::Npd { fail_on: counted } => *counted = fail_on,
        report::Format::Prometheus { secret_series } => *secret_series = args.secret_series,
        _ => {}
    }
    let baseline = match &args.baseline {
        Some(path) => config::read_baseline(path)?,
        None => Default::default(),
    };
    let _lock = take_lock(&cfg.lock, false)?;
    let Scanned { mut result, cri: cri_info, notes: mut verbose, .. } =
        scan_and_ask(&mut cfg, false)?;
    let before = result.findings.len();
    result.findings.retain(|f| !baseline.contains(&f.id));
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
            incomplete: result.incomplete,
            unread_mounts: result.unread_mounts.len() as u64,
        },
        findings: result.findings,
        errors: result.errors,
        unread_mounts: result.unread_mounts,
    };
    match &cfg.output {
        Some(path) => report::write_atomic(path, |w| report::write(&report, cfg.format, w))?,
        None => report::write(&report, cfg.format, stdout)?,
    }
    let mut notes = Vec::new();
    let eacces = std::io::Error::from_raw_os_error(nix::errno::Errno::EACCES as i32);
    let eacces = node::io_message(&eacces);
    let denied = report.errors.iter().filter(|e| e.error == eacces).count();
    if !sys::is_root() && denied > 0 {
        notes.push(format!(
            "not running as root: {denied} paths could not be read (permission denied: see the report's errors); run with sudo for a whole scan"
        ));
    }
    if let Some(stats) = &cfg.secrets_stats {
        notes.extend(skip_note(stats));
    }
    notes.append(&mut verbose);
    let status = match cfg.format {
        // node-problem-detector's "unknown": a scan cut short that found nothing to count.
        report::Format::Npd { fail_on } if report::npd::unknown(&report, fail_on) => {
            ExitStatus::Error
        }
        _ => report.exit_status(fail_on),
    };
    Ok(Outcome { status, notes })
}

/// A runtime that answered, and its answer.
type Asked = Option<(cri::Client, cri::Live)>;

/// Takes the run lock, without waiting: one kresidue run at a time. A lock another user
/// could hold or replace is refused; a run that cannot create or open it, or has none
/// (not root, no `$XDG_RUNTIME_DIR`), runs without it, unless it must hold it (`clean
/// --apply`).
fn take_lock(path: &Option<std::path::PathBuf>, required: bool) -> Result<Option<sys::Lock>> {
    let Some(path) = path else {
        if required {
            bail!("no run lock: give --lock FILE (a run as another user than root takes one in $XDG_RUNTIME_DIR)");
        }
        return Ok(None);
    };
    match sys::lock(path) {
        Ok(Some(lock)) => Ok(Some(lock)),
        Ok(None) => bail!(
            "another kresidue run holds the lock {}: try again when it has finished",
            path.display()
        ),
        Err(sys::LockError::Unsafe(why)) => bail!("{why}: refused (see --lock)"),
        Err(sys::LockError::Unavailable(e)) if required => {
            bail!("cannot take the lock {}: {e}", path.display())
        }
        Err(sys::LockError::Unavailable(_)) => Ok(None),
    }
}

/// A scan with the runtime asked, and the notes of `--verbose`.
struct Scanned {
    result: scan::ScanResult,
    cri: CriInfo,
    asked: Asked,
    notes: Vec<String>,
    /// kubelet's dir as the runtime's running containers mount their volumes from, when
    /// it was learned.
    kubelet_dir_seen: Option<std::path::PathBuf>,
}

/// The scan of `cfg`, with the runtime asked: connected (and the version asked) before
/// the scan, so that `--require-cri` fails fast, and the pods listed after it, so that a
/// pod started meanwhile counts as live. kubelet's root dir, when not given, is learned
/// from where the runtime's containers mount volumes from.
/// `learn_kubelet_dir`: ask where containers mount from even when kubelet's dir is given
/// (for `clean` to compare).
fn scan_and_ask(cfg: &mut config::ScanConfig, learn_kubelet_dir: bool) -> Result<Scanned> {
    let mut notes = Vec::new();
    if cfg.nice {
        // Before any thread starts: they inherit it.
        match sys::be_nice() {
            Ok((nice, class)) if cfg.verbose > 0 => {
                let class = if class == 3 { "idle".to_owned() } else { format!("class {class}") };
                notes.push(format!("priority: nice {nice}, I/O {class}"));
            }
            Ok(_) => {}
            Err(e) => notes.push(format!("--nice: {e}")),
        }
    }
    let mut connected = match cri::connect(&cfg.cri, cfg.cri_timeout) {
        Err(u) if cfg.require_cri => bail!("{u}"),
        other => other,
    };
    let trace = cfg.verbose > 1;
    let cri_note = |l: String| format!("cri: {l}");
    let mut kubelet_dir_seen = None;
    match &mut connected {
        Ok(Some(client)) => {
            let explicit = cfg.settings.layout.kubelet_dir_explicit;
            if !explicit || learn_kubelet_dir {
                kubelet_dir_seen = cri::kubelet_dir(client).ok().flatten();
            }
            if let (false, Some(dir)) = (explicit, &kubelet_dir_seen) {
                cfg.settings.layout.kubelet_dir = dir.clone();
            }
            if trace {
                notes.extend(client.take_trace().into_iter().map(cri_note));
            }
        }
        Err(u) if trace => notes.extend(std::mem::take(&mut u.trace).into_iter().map(cri_note)),
        _ => {}
    }
    let matcher = matcher::Matcher::new(std::mem::take(&mut cfg.sets));
    let rules = std::mem::replace(&mut cfg.rules, rules::Rules::none());
    if trace {
        let m = matcher.stats();
        notes.push(format!(
            "searching for {} values ({} encoded forms, {} windows, {} fingerprint sets, \
             prefilter {}, {} sampler) and {} rules (key search: {}{}), with {} threads \
             reading {} at a time",
            m.values,
            m.forms,
            m.windows,
            m.sets,
            report::human_size(m.filter_bytes as u64),
            m.kernel,
            rules.specs().count(),
            rules.key_search(),
            if rules.key_scan().is_some() && matcher.reads_every_block() {
                ", in the fingerprint pass"
            } else {
                ""
            },
            cfg.settings.threads,
            report::human_size(cfg.settings.chunk as u64),
        ));
    }
    let searchers = scan::Searchers { matcher: &matcher, rules: &rules };
    let walking = cfg.walking();
    cfg.settings.deadline = cfg.timeout.map(|t| Instant::now() + t);
    // A bar on stderr only for a person watching: not when the report goes to a pipe.
    let watched = std::io::stderr().is_terminal()
        && (cfg.output.is_some() || std::io::stdout().is_terminal());
    let bar = (!cfg.quiet && watched).then(progress::Bar::start);
    let scanned = match &bar {
        Some(bar) => scan::scan(&cfg.settings, walking, &searchers, bar),
        None => scan::scan(&cfg.settings, walking, &searchers, &()),
    };
    if let Some(bar) = &bar {
        bar.finish();
    }
    let mut result = scanned?;
    if let Some(signal) = sys::stop_signal() {
        return Err(Interrupted(signal).into());
    }
    if result.incomplete {
        result.errors.push(ScanError {
            path: report::display_path(cfg.root_arg.as_os_str()),
            error: format!(
                "the scan stopped at --timeout {}: files not read by then are not in this report",
                humantime::format_duration(cfg.timeout.unwrap_or_default())
            ),
        });
        result.errors.sort();
    }
    if trace {
        notes.push(format!("{} scopes to walk:", result.scopes.len()));
        notes.extend(result.scopes.iter().map(|s| format!("  scope {}", report::terminal_safe(s))));
        if !result.skipped.is_empty() {
            let kinds: Vec<String> =
                result.skipped.iter().map(|(kind, n)| format!("{kind}: {n}")).collect();
            notes.push(format!("not read, not regular files: {}", kinds.join(", ")));
        }
    }
    if cfg.verbose > 0 {
        for (site, s) in &result.sites {
            notes.push(format!(
                "site {}: {} files, {}, {} ms",
                site.as_str(),
                s.files,
                report::human_size(s.bytes),
                s.busy.as_millis()
            ));
        }
    }
    let mut calls = Vec::new();
    let (cri, mut asked) = cross_check(connected, &mut result, cfg.require_cri, &mut calls)?;
    if let Some((client, _)) = &mut asked {
        calls = client.take_trace();
    }
    if trace {
        notes.extend(calls.into_iter().map(cri_note));
    }
    if let (true, Some((_, live))) = (trace, &asked) {
        notes.push(format!(
            "cri: {} pods ({} sandboxes), {} containers",
            live.pods.len(),
            live.pods.values().map(Vec::len).sum::<usize>(),
            live.containers.len()
        ));
    }
    Ok(Scanned { result, cri, asked, notes, kubelet_dir_seen })
}

fn run_clean(args: &CleanArgs, stdout: &mut dyn Write) -> Result<Outcome> {
    let mut cfg = config::ScanConfig::from_args(&args.search)?;
    if !matches!(cfg.format, report::Format::Table | report::Format::Json) {
        bail!("clean prints its plan as --format table or json");
    }
    let min_age = humantime::parse_duration(&args.min_age)
        .map_err(|_| anyhow::anyhow!("--min-age: not a duration (like 90s, 30m, 1h, 2d)"))?
        .as_secs();
    if args.pods.as_deref() == Some(Path::new("-"))
        && args.search.secrets.as_deref() == Some(Path::new("-"))
    {
        bail!("--pods - and --secrets - cannot both read stdin: give one of them as a file");
    }
    if let (Some(a), Some(b)) = (&args.plan, &args.plan_out) {
        if a == b {
            bail!("--plan-out would overwrite the reviewed plan --plan: give another file");
        }
    }
    let api_pods = match &args.pods {
        Some(src) => Some(read_pods(src)?),
        None if args.apply => bail!(
            "clean --apply needs the API server's list of pods as a second witness: pass --pods FILE (from `kubectl get pods -A -o json`) or --pods - to read it from stdin"
        ),
        None => None,
    };
    let reviewed = match &args.plan {
        Some(path) => {
            let bytes = config::read_input(path)?;
            let plan = clean::PlanFile::parse(&bytes)
                .map_err(|e| anyhow::anyhow!("--plan {}: {e}", path.display()))?;
            Some(plan)
        }
        None => None,
    };
    if args.apply && matches!(cfg.cri, cri::Choice::Disabled) {
        bail!("clean --apply needs the container runtime to prove pods dead: give --cri ENDPOINT (and not --no-cri)");
    }
    cfg.require_cri |= args.apply;
    // Where kubelet keeps pods is `--kubelet-dir` or the default, never learned from what
    // containers mount (a hostPath volume can look like a kubelet dir), for the dry run as
    // for apply: the plan a person reviews is the plan carried out.
    let kubelet_dir_given = cfg.settings.layout.kubelet_dir_explicit;
    cfg.settings.layout.kubelet_dir_explicit = true;
    let _lock = take_lock(&cfg.lock, args.apply)?;
    let Scanned { result, cri: cri_info, asked, notes: mut verbose, kubelet_dir_seen } =
        scan_and_ask(&mut cfg, true)?;
    let kubelet_dir = cfg.settings.layout.kubelet_dir.clone();
    let mut notes = Vec::new();
    let elsewhere = kubelet_dir_seen.filter(|seen| *seen != kubelet_dir);
    if let Some(seen) = &elsewhere {
        let why = format!(
            "the runtime's containers mount their volumes from {}, not from kubelet dir {}: pass --kubelet-dir {} if that is kubelet's dir",
            report::display_path(seen.as_os_str()),
            kubelet_dir.display(),
            report::display_path(seen.as_os_str()),
        );
        if args.apply && !kubelet_dir_given {
            bail!("{why}; nothing was removed");
        }
        notes.push(why);
    }
    if args.apply && result.incomplete {
        bail!("the scan stopped at --timeout: clean --apply acts only on a complete scan");
    }
    let mounts = match sys::mount::mounts() {
        Ok(m) => m,
        Err(e) => bail!("cannot read the mount table /proc/self/mountinfo: {e}"),
    };
    let (mut client, live) = match asked {
        Some((client, live)) => (Some(client), Some(live)),
        None => (None, None),
    };
    if let (true, Some(client)) = (args.apply, &client) {
        // Mounts made on the node must be visible here, or a removal could detach one.
        if let Err(why) = sys::same_mount_namespace(client.peer_pid()) {
            bail!("clean --apply must run in the mount namespace of the node and its runtime (on the node, or `nsenter -t <runtime pid> -m`): {why}; nothing was removed");
        }
    }
    let endpoint = cri_info.endpoint.clone().unwrap_or_default();
    let witness = match (api_pods, &live) {
        (Some((pods, read_at)), Some(live)) => Some(
            clean::witness::Witness::check(
                pods,
                live,
                args.node_name.as_deref(),
                node_name(&cfg.root).as_deref(),
                &endpoint,
                read_at,
            )
            .map_err(anyhow::Error::msg)?,
        ),
        _ => None,
    };
    if witness.is_none() && !args.apply {
        notes.push(if args.pods.is_none() {
            "clean --apply will also need the API server's list of pods (--pods FILE): a pod it lists is never touched".to_owned()
        } else {
            "the API server's list of pods (--pods) was not checked: the runtime was not asked".to_owned()
        });
    }
    let is_live = |uid: &str| {
        live.as_ref().is_none_or(|l| l.pod_live(uid))
            || witness.as_ref().is_some_and(|w| w.knows(uid).is_some())
    };
    let (pods, mut errors) = clean::survey(&cfg.root, &kubelet_dir, &mounts, &is_live);
    let opts = clean::PlanOptions {
        min_age,
        remove_exited: args.remove_exited_containers,
        api: witness.as_ref(),
    };
    let now = unix_now();
    let mut plan = clean::plan(&result.findings, live.as_ref(), &pods, now, &opts);
    if let Some(reviewed) = &reviewed {
        if let Some(why) = reviewed.mismatch(cfg.root.path(), &kubelet_dir) {
            bail!(
                "--plan {}: {why}; nothing was removed",
                args.plan.as_deref().unwrap_or(Path::new("-")).display()
            );
        }
        reviewed.restrict(&mut plan);
    }
    if let Some(path) = &args.plan_out {
        // What will be tried: a reviewed plan's refusals are not planned again.
        let mut shown = plan.clone();
        shown.actions.retain(|a| a.status == clean::Status::Planned);
        let file = clean::PlanFile::of(&shown, cfg.root.path(), &kubelet_dir, now, min_age);
        let out = report::Output { path: path.clone(), follow_symlink: false };
        report::write_atomic(&out, |w| {
            serde_json::to_writer_pretty(&mut *w, &file)?;
            writeln!(w)
        })?;
    }
    if let Some(gate) = &args.apply_gate {
        gate_wait(gate)?;
    }
    if let (true, Some(client)) = (args.apply, client.as_mut()) {
        if plan.actions.iter().any(|a| a.status == clean::Status::Planned) {
            let run = format!("{}-{}", unix_now(), std::process::id());
            let mut journal = clean::journal::Journal::open(&args.journal, run)?;
            let mut cx = clean::apply::Context {
                root: &cfg.root,
                kubelet_dir: &kubelet_dir,
                client,
                journal: &mut journal,
                min_age,
                listed_at: witness.as_ref().map(clean::witness::Witness::listed_at),
            };
            clean::apply::apply(&mut plan.actions, &mut cx)
                .with_context(|| format!("journal {}", args.journal.display()))?;
        }
        // The action under way was finished and journaled; the rest was refused.
        if let Some(signal) = sys::stop_signal() {
            return Err(Interrupted(signal).into());
        }
    }
    if let Some(reviewed) = &reviewed {
        let gone = reviewed.no_longer_planned(&plan);
        plan.actions.extend(gone);
    }
    errors.extend(result.errors);
    // The clean report has no list of its own for mounts the scan did not read.
    errors.extend(result.unread_mounts.into_iter().map(|m| ScanError {
        path: m.path,
        error: format!("not read: a {} filesystem is mounted here", m.fstype),
    }));
    errors.sort();
    let summary = clean::CleanSummary::of(
        result.findings.len() as u64,
        &plan.actions,
        &plan.left,
        args.apply,
    );
    let report = clean::CleanReport {
        schema: clean::CleanReport::SCHEMA,
        root: report::display_path(cfg.root_arg.as_os_str()),
        node: node_name(&cfg.root),
        cri: cri_info,
        applied: args.apply,
        min_age_seconds: min_age,
        summary,
        actions: plan.actions,
        left: plan.left,
        errors,
    };
    match &cfg.output {
        Some(path) => report::write_atomic(path, |w| report::clean::write(&report, cfg.format, w))?,
        None => report::clean::write(&report, cfg.format, stdout)?,
    }
    notes.append(&mut verbose);
    // The table says so itself; JSON and files get it on stderr.
    if report.actions.is_empty() && (cfg.format != report::Format::Table || cfg.output.is_some()) {
        notes.push("nothing to do: no provably orphaned residue".to_owned());
    }
    let unfinished = report.summary.refused + report.summary.failed > 0;
    let status = if args.apply && unfinished { ExitStatus::Findings } else { ExitStatus::Clean };
    Ok(Outcome { status, notes })
}

/// The API server's list of pods (`--pods FILE|-`), parsed, with when it was written (the
/// file's mtime) or read (stdin), Unix seconds. A file written in the future is refused.
fn read_pods(src: &Path) -> Result<(kubectl::PodList, i64)> {
    let context = || format!("--pods {}", src.display());
    let mut at = unix_now();
    if src != Path::new("-") {
        let modified = std::fs::metadata(src).and_then(|m| m.modified()).with_context(context)?;
        let secs = modified.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let modified = i64::try_from(secs).unwrap_or(i64::MAX);
        if modified > at + 1 {
            bail!("--pods {}: the file was modified in the future: check the clock", src.display());
        }
        at = modified;
    }
    let list = kubectl::parse_pods(&config::read_input(src)?).with_context(context)?;
    Ok((list, at))
}

/// Testing aid (`--apply-gate DIR`): says the plan is made (`DIR/planned`), then waits
/// for `DIR/go` (at most a minute).
fn gate_wait(dir: &Path) -> Result<()> {
    std::fs::write(dir.join("planned"), b"")?;
    let until = Instant::now() + std::time::Duration::from_secs(60);
    while !dir.join("go").exists() {
        if Instant::now() > until {
            bail!("--apply-gate: {} never appeared", dir.join("go").display());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Ok(())
}

/// Asks the runtime what runs now and rates the findings by it; the report's `cri` block,
/// and the client with its answer. A runtime that cannot be asked leaves liveness unknown
/// and says why in `errors` (or fails the scan with `--require-cri`); the calls it made
/// before giving up go to `calls`.
fn cross_check(
    connected: Result<Option<cri::Client>, cri::Unreachable>,
    result: &mut scan::ScanResult,
    require: bool,
    calls: &mut Vec<String>,
) -> Result<(CriInfo, Asked)> {
    let asked = connected.and_then(|client| match client {
        None => Ok(None),
        Some(mut client) => client.live().map(|live| Some((client, live))),
    });
    Ok(match asked {
        Ok(None) => (CriInfo { status: CriStatus::Disabled, endpoint: None, runtime: None }, None),
        Ok(Some((client, live))) => {
            severity::judge(&mut result.findings, &live);
            let info = CriInfo {
                status: CriStatus::Ok,
                endpoint: Some(client.endpoint().to_string()),
                runtime: Some(client.runtime().to_owned()),
            };
            (info, Some((client, live)))
        }
        Err(u) if require => bail!("{u}"),
        Err(mut u) => {
            *calls = std::mem::take(&mut u.trace);
            result
                .errors
                .push(ScanError { path: u.endpoint.clone(), error: format!("CRI: {}", u.error) });
            result.errors.sort();
            let info = CriInfo {
                status: CriStatus::Unreachable,
                endpoint: Some(u.endpoint),
                runtime: None,
            };
            (info, None)
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
        Some(path) => {
            let out =
                report::Output { path: path.clone(), follow_symlink: args.follow_output_symlink };
            report::write_atomic(&out, |w| w.write_all(&json))?
        }
        None => stdout.write_all(&json)?,
    }
    // The label is not repeated: it may be a secret pasted in the wrong place.
    let mut notes =
        vec![format!("fingerprinted {} values from {} secrets", stats.values, parsed.secrets)];
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
pub(crate) fn unix_now() -> i64 {
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

/// The node's name: the hostname when scanning `/`, else `<root>/etc/hostname` (a regular
/// file of at most 256 bytes: a hostname is at most 64).
fn node_name(root: &sys::RootDir) -> Option<String> {
    if root.path() == Path::new("/") {
        return sys::hostname();
    }
    let s = String::from_utf8(root.read_file(Path::new("etc/hostname"), 256).ok()?).ok()?;
    let name = s.trim();
    (!name.is_empty()).then(|| report::terminal_safe(name))
}
