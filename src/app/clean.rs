//! `kresidue clean`: the plan of what provably orphaned residue to remove, made from a
//! scan, and with `--apply` carried out.

use super::printer::Printer;
use super::scan::{search, Scanned, Searching};
use super::{node_name, stopped, take_lock, Outcome};
use crate::clean::witness::Witness;
use crate::clean::{self, Plan, PlanFile};
use crate::cli::CleanArgs;
use crate::config::{self, Needs, ScanConfig};
use crate::finding::{CriInfo, ExitStatus, ScanError};
use crate::sys::unix_now;
use crate::{cri, kubectl, report, scan, sys, text};
use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::Path;
use std::time::Instant;

/// Plans the removal of orphaned residue, prints the plan, and with `--apply` removes it.
pub fn run(args: &CleanArgs, stdout: &mut dyn Write) -> Result<Outcome> {
    // Where kubelet keeps pods is `--kubelet-dir`, else the node's distribution's or the
    // default, never learned from what containers mount (a hostPath volume can look like
    // a kubelet dir), for the dry run as for apply: the plan a person reviews is the plan
    // carried out.
    let needs = Needs {
        format: config::format(&args.search, None, 0),
        fixed_kubelet_dir: true,
        // Without the runtime nothing is provably orphaned: a dry run would prove nothing.
        require_cri: true,
    };
    let mut cfg = ScanConfig::from_args(&args.search, needs)?;
    if args.search.kubelet_dir.is_none() {
        // The distribution's, when the node has one (MicroK8s's, k0s's).
        cfg.layout.kubelet_dir = crate::sites::node_kubelet_dir(&cfg.root, &cfg.layout);
    }
    let searching = Searching::start(&cfg)?;
    let inputs = Inputs::read(args, &cfg)?;
    let _lock = take_lock(&cfg.lock, cfg.root.path(), args.apply)?;
    let mut printer = Printer::new(cfg.quiet, cfg.verbose, cfg.output.is_some());
    let Scanned { result, cri: cri_info, asked, kubelet_dir_seen } =
        search(&cfg, searching, &mut printer, true, false)?;
    let kubelet_dir = cfg.layout.kubelet_dir.clone();
    if let Some(seen) = kubelet_dir_seen.filter(|seen| *seen != kubelet_dir) {
        let why = format!(
            "the runtime's containers mount their volumes from {}, not from kubelet dir {}: pass --kubelet-dir {} if that is kubelet's dir",
            text::display_path(seen.as_os_str()),
            kubelet_dir.display(),
            text::display_path(seen.as_os_str()),
        );
        if args.apply && args.search.kubelet_dir.is_none() {
            bail!("{why}; nothing was removed");
        }
        printer.note(why);
    }
    if args.apply && result.incomplete {
        bail!("the scan stopped at --timeout: clean --apply acts only on a complete scan");
    }
    let (mut client, live) = match asked {
        Some((client, live)) => (Some(client), Some(live)),
        None => (None, None),
    };
    let mounts = match sys::mount::mounts() {
        Ok(m) => m,
        Err(e) => bail!("cannot read the mount table /proc/self/mountinfo: {e}"),
    };
    if let (true, Some(client)) = (args.apply, &client) {
        // Mounts made on the node must be visible here, or a removal could detach one.
        if let Err(why) = sys::same_mount_namespace(client.peer_pid()) {
            bail!("clean --apply must run in the mount namespace of the node and its runtime (on the node, or `nsenter -t <runtime pid> -m`): {why}; nothing was removed");
        }
    }
    let endpoint = cri_info.endpoint.clone().unwrap_or_default();
    let witness = witness(args, &cfg, inputs.api_pods, live.as_ref(), &endpoint, &mut printer)?;
    let is_live = |uid: &str| {
        live.as_ref().is_none_or(|l| l.pod_live(uid))
            || witness.as_ref().is_some_and(|w| w.knows(uid).is_some())
    };
    let (pods, errors) = clean::survey(&cfg.root, &kubelet_dir, &mounts, &is_live);
    let opts = clean::PlanOptions {
        min_age: inputs.min_age,
        remove_exited: args.remove_exited_containers,
        api: witness.as_ref(),
        cri_runtime: cri_info.runtime.as_deref(),
    };
    let now = unix_now();
    let mut plan = clean::plan(&result.findings, live.as_ref(), &pods, now, &opts);
    if let Some(reviewed) = &inputs.reviewed {
        if let Some(why) = reviewed.mismatch(cfg.root.path(), &kubelet_dir) {
            bail!(
                "--plan {}: {why}; nothing was removed",
                args.plan.as_deref().unwrap_or(Path::new("-")).display()
            );
        }
        reviewed.restrict(&mut plan);
    }
    write_plan(args, &cfg, &plan, &kubelet_dir, now, inputs.min_age)?;
    if let Some(gate) = &args.apply_gate {
        gate_wait(gate)?;
    }
    if let (true, Some(client)) = (args.apply, client.as_mut()) {
        let listed_at = witness.as_ref().map(Witness::listed_at);
        apply(args, &cfg, &mut plan, client, &kubelet_dir, inputs.min_age, listed_at)?;
    }
    if let Some(reviewed) = &inputs.reviewed {
        let gone = reviewed.no_longer_planned(&plan);
        plan.actions.extend(gone);
    }
    let done = Done { result, errors, cri: cri_info, plan, min_age: inputs.min_age };
    finish(args, &cfg, done, printer, stdout)
}

/// What `clean` reads besides the search's inputs, checked before the scan.
struct Inputs {
    /// `--min-age`, seconds.
    min_age: u64,
    /// `--pods`: the API server's list of pods and when it was read.
    api_pods: Option<(kubectl::PodList, i64)>,
    /// `--plan`: the reviewed plan.
    reviewed: Option<PlanFile>,
}

impl Inputs {
    /// Checks clean's own options and reads `--pods` and `--plan`.
    fn read(args: &CleanArgs, cfg: &ScanConfig) -> Result<Inputs> {
        if !matches!(cfg.format, report::Format::Table(_) | report::Format::Json) {
            bail!("clean prints its plan as --format table or json");
        }
        let min_age = crate::config::parse_duration("--min-age", &args.min_age, false)?.as_secs();
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
                let plan = PlanFile::parse(&bytes)
                    .map_err(|e| anyhow::anyhow!("--plan {}: {e}", path.display()))?;
                Some(plan)
            }
            None => None,
        };
        if matches!(cfg.cri, cri::Choice::Disabled) {
            bail!("clean needs the container runtime to prove pods dead: give --cri ENDPOINT (and not --no-cri); nothing was planned");
        }
        Ok(Inputs { min_age, api_pods, reviewed })
    }
}

/// The API server's list of pods checked against the runtime's (the second witness),
/// when both were had; without it, a dry run says what `--apply` will need.
fn witness(
    args: &CleanArgs,
    cfg: &ScanConfig,
    api_pods: Option<(kubectl::PodList, i64)>,
    live: Option<&cri::Live>,
    endpoint: &str,
    printer: &mut Printer,
) -> Result<Option<Witness>> {
    let witness = match (api_pods, live) {
        (Some((pods, read_at)), Some(live)) => Some(
            Witness::check(
                pods,
                live,
                args.node_name.as_deref(),
                node_name(&cfg.root).as_deref(),
                endpoint,
                read_at,
            )
            .map_err(anyhow::Error::msg)?,
        ),
        _ => None,
    };
    if witness.is_none() && !args.apply {
        printer.note(if args.pods.is_none() {
            "clean --apply will also need the API server's list of pods (--pods FILE): a pod it lists is never touched".to_owned()
        } else {
            "the API server's list of pods (--pods) was not checked: the runtime was not asked".to_owned()
        });
    }
    Ok(witness)
}

/// `--plan-out`: the plan made at `now` as it will be tried (a reviewed plan's refusals are not planned
/// again), for a person to review.
fn write_plan(
    args: &CleanArgs,
    cfg: &ScanConfig,
    plan: &Plan,
    kubelet_dir: &Path,
    now: i64,
    min_age: u64,
) -> Result<()> {
    let Some(path) = &args.plan_out else { return Ok(()) };
    let mut shown = plan.clone();
    shown.actions.retain(|a| a.status == clean::Status::Planned);
    shown.actions.iter_mut().for_each(clean::Action::withhold);
    let file = PlanFile::of(&shown, cfg.root.path(), kubelet_dir, now, min_age);
    let out = report::Output { path: path.clone(), follow_symlink: false };
    report::write_atomic(&out, |w| {
        serde_json::to_writer_pretty(&mut *w, &file)?;
        writeln!(w)
    })?;
    Ok(())
}

/// `--apply`: carries out the planned actions, each journaled.
fn apply(
    args: &CleanArgs,
    cfg: &ScanConfig,
    plan: &mut Plan,
    client: &mut cri::Client,
    kubelet_dir: &Path,
    min_age: u64,
    listed_at: Option<i64>,
) -> Result<()> {
    if plan.actions.iter().any(|a| a.status == clean::Status::Planned) {
        let run = format!("{}-{}", unix_now(), std::process::id());
        let mut journal = clean::journal::Journal::open(&args.journal, run)?;
        let mut cx = clean::apply::Context {
            root: &cfg.root,
            kubelet_dir,
            client,
            journal: &mut journal,
            min_age,
            listed_at,
        };
        clean::apply::apply(&mut plan.actions, &mut cx)
            .with_context(|| format!("journal {}", args.journal.display()))?;
    }
    // The action under way was finished and journaled; the rest was refused.
    stopped()
}

/// What a clean run has done, to report.
struct Done {
    /// The scan it planned from.
    result: scan::ScanResult,
    /// The survey's errors.
    errors: Vec<ScanError>,
    /// The report's `cri` block.
    cri: CriInfo,
    /// The plan, as carried out with `--apply`.
    plan: Plan,
    /// `--min-age`, seconds.
    min_age: u64,
}

/// Writes the clean report; the outcome.
fn finish(
    args: &CleanArgs,
    cfg: &ScanConfig,
    done: Done,
    mut printer: Printer,
    stdout: &mut dyn Write,
) -> Result<Outcome> {
    let Done { result, mut errors, cri, plan, min_age } = done;
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
    let mut report = clean::CleanReport {
        schema: clean::CleanReport::SCHEMA,
        root: text::display_path(cfg.root_arg.as_os_str()),
        node: node_name(&cfg.root),
        cri,
        applied: args.apply,
        min_age_seconds: min_age,
        summary,
        actions: plan.actions,
        left: plan.left,
        errors,
    };
    report.withhold();
    match &cfg.output {
        Some(path) => report::write_atomic(path, |w| report::clean::write(&report, cfg.format, w))?,
        None => report::clean::write(&report, cfg.format, stdout)?,
    }
    printer.release();
    // The table says so itself; JSON and files get it on stderr.
    if report.actions.is_empty()
        && (!matches!(cfg.format, report::Format::Table(_)) || cfg.output.is_some())
    {
        printer.note("nothing to do: no provably orphaned residue".to_owned());
    }
    let unfinished = report.summary.refused + report.summary.failed > 0;
    let status = if args.apply && unfinished { ExitStatus::Findings } else { ExitStatus::Clean };
    Ok(Outcome { status, notes: printer.finish() })
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
    let planned = report::Output { path: dir.join("planned"), follow_symlink: false };
    report::write_atomic(&planned, |_| Ok(()))?;
    let until = Instant::now() + std::time::Duration::from_secs(60);
    while !dir.join("go").exists() {
        if Instant::now() > until {
            bail!("--apply-gate: {} never appeared", dir.join("go").display());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Ok(())
}
