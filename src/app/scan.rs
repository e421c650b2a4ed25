//! `kresidue scan`: the node searched, the runtime asked, the report written; and the
//! search itself, which `clean` plans from (`Searching`, `search`).

use super::printer::{Printer, TRACE, VERBOSE};
use super::{node_name, skip_note, stopped, take_lock, Outcome};
use crate::cli::{ReportFormatArg, ScanArgs};
use crate::config::{self, Needs, ScanConfig};
use crate::finding::{Category, CriInfo, CriStatus, Finding, Report, ScanError, Summary};
use crate::fingerprint::{self, BuildStats, FingerprintSet};
use crate::matcher::Matcher;
use crate::rules::Rules;
use crate::scan::{ScanResult, ScanSettings, Searchers, Walking};
use crate::sites::Layout;
use crate::sys::unix_now;
use crate::{cri, kubectl, node, report, scan, sys, text};
use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

/// Scans the node and writes the report; the exit status says what it found.
pub fn run(args: &ScanArgs, stdout: &mut dyn Write) -> Result<Outcome> {
    let started = Instant::now();
    let fail_on = config::fail_on(args.fail_on);
    // A usage error: said before the fingerprints load.
    if args.search.format == ReportFormatArg::Npd && fail_on.is_none() {
        bail!("--format npd reports findings at or above --fail-on: give a severity, not never");
    }
    let format = config::format(&args.search, fail_on, args.secret_series);
    let needs = Needs { format, fixed_kubelet_dir: false, require_cri: false };
    let mut cfg = ScanConfig::from_args(&args.search, needs)?;
    (cfg.state, cfg.full) = (config::state_file(args, &cfg.root), args.full);
    cfg.state_max_age = config::parse_state_max_age(args.state_max_age.as_deref())?;
    if let Some(image) = &args.image {
        return run_image(args, &cfg, image, started, stdout);
    }
    let mut searching = Searching::start(&cfg)?;
    let baseline = baseline(args)?;
    let _lock = take_lock(&cfg.lock, cfg.root.path(), false)?;
    let mut printer = Printer::new(cfg.quiet, cfg.verbose, cfg.output.is_some());
    let secrets_stats = searching.secrets_stats.take();
    let Scanned { result, cri, .. } = search(&cfg, searching, &mut printer, false, true)?;
    let report = report_of(&cfg, result, cri, &baseline, started);
    finish(&cfg, report, fail_on, printer, secrets_stats, stdout)
}

/// The ids `--baseline` leaves out.
fn baseline(args: &ScanArgs) -> Result<std::collections::HashSet<String>> {
    match &args.baseline {
        Some(path) => config::read_baseline(path),
        None => Ok(Default::default()),
    }
}

/// The report of a scan of the image shown as `shown`: no node, no runtime asked.
fn image_report(
    cfg: &ScanConfig,
    result: ScanResult,
    baseline: &std::collections::HashSet<String>,
    shown: String,
    started: Instant,
) -> Report {
    let cri = CriInfo { status: CriStatus::Disabled, endpoint: None, runtime: None };
    let mut report = report_of(cfg, result, cri, baseline, started);
    report.root = shown;
    report.node = None;
    report
}

/// Writes `report` and says what the run's notes and exit status are.
fn finish(
    cfg: &ScanConfig,
    report: Report,
    fail_on: Option<crate::finding::Severity>,
    mut printer: Printer,
    secrets_stats: Option<BuildStats>,
    stdout: &mut dyn Write,
) -> Result<Outcome> {
    match &cfg.output {
        Some(path) => report::write_atomic(path, |w| report::write(&report, cfg.format, w))?,
        None => report::write(&report, cfg.format, stdout)?,
    }
    let eacces = std::io::Error::from_raw_os_error(nix::errno::Errno::EACCES as i32);
    let eacces = node::io_message(&eacces);
    let denied = report.errors.iter().filter(|e| e.error == eacces).count();
    if !sys::is_root() && denied > 0 {
        printer.note(format!(
            "not running as root: {denied} paths could not be read (permission denied: see the report's errors); run with sudo for a whole scan"
        ));
    }
    if let Some(stats) = &secrets_stats {
        printer.notes(skip_note(stats));
    }
    let status = match cfg.format {
        // node-problem-detector's "unknown": a scan cut short that found nothing to count.
        report::Format::Npd { fail_on } if report::npd::unknown(&report, fail_on) => {
            crate::finding::ExitStatus::Error
        }
        _ => report.exit_status(fail_on),
    };
    Ok(Outcome { status, notes: printer.finish() })
}

/// What `--image` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ImageKind {
    /// A directory: a container image archive unpacked (an OCI layout).
    Dir,
    /// A tar: a container image archive, or a root filesystem tarball; gzip- or
    /// zstd-compressed when it says so.
    Tar(crate::tarball::Compression),
    /// A disk image (anything else).
    Disk,
}

/// What the file or directory at `image` is, by its first bytes (a compressed file is
/// taken for a compressed tar: what is inside is checked as it is inflated).
fn image_kind(image: &std::path::Path) -> Result<ImageKind, String> {
    use crate::tarball::{compression, is_tar, Compression};
    use std::io::Read;
    if std::fs::metadata(image).map_err(|e| e.to_string())?.is_dir() {
        return Ok(ImageKind::Dir);
    }
    let mut head = Vec::with_capacity(512);
    let f = std::fs::File::open(image).map_err(|e| e.to_string())?;
    let f = crate::sys::cache::HostFile::new(f);
    f.take(512).read_to_end(&mut head).map_err(|e| e.to_string())?;
    let c = compression(&head);
    Ok(match c != Compression::None || is_tar(&head) {
        true => ImageKind::Tar(c),
        false => ImageKind::Disk,
    })
}

/// `scan --image DISK`: each filesystem of the disk image scanned as a node root (every
/// site, as `--root` over it mounted would), through user-space readers, nothing mounted;
/// no runtime asked. The findings of a disk with several filesystems name their partition
/// (`p2:/var/lib/…`); a filesystem kresidue does not read is an `errors` entry naming what
/// it is, and a disk with none it reads is an error.
fn run_disk(
    args: &ScanArgs,
    cfg: &ScanConfig,
    image: &std::path::Path,
    started: Instant,
    stdout: &mut dyn Write,
) -> Result<Outcome> {
    let shown = text::display_path(image.as_os_str());
    let file = std::fs::File::open(image).with_context(|| format!("--image {shown}"))?;
    let file = crate::sys::cache::HostFile::new(file);
    let disk = crate::disk::Disk::new(std::sync::Arc::new(file))
        .map_err(|e| anyhow::anyhow!("--image {shown}: {e}"))?;
    let (volumes, table_errors) = crate::disk::volumes(&disk);
    let several = volumes.len() > 1;
    let name = |v: &crate::disk::Volume| match several {
        true => format!("p{}", v.partition.number),
        false => String::new(),
    };
    let mut refused = Vec::new();
    let mut trees = Vec::new();
    for v in &volumes {
        match &v.tree {
            Ok(t) => trees.push((name(v), t.clone())),
            Err(e) => {
                let path = format!("{shown} {}", name(v)).trim_end().to_owned();
                refused.push(ScanError { path, error: e.clone() });
            }
        }
    }
    if trees.is_empty() {
        let found: Vec<String> = refused.iter().map(|e| e.error.clone()).collect();
        bail!("--image {shown}: no filesystem kresidue reads ({})", found.join("; "));
    }
    let table = table_errors.into_iter().map(|error| ScanError { path: shown.clone(), error });
    refused.extend(table);
    scan_roots(args, cfg, (trees, refused), shown, started, stdout)
}

/// A filesystem of an image to scan as a node root: its partition's name (`p2`; `""` when
/// the image has one) and its tree.
type Root = (String, std::sync::Arc<dyn crate::sys::image::Tree>);

/// Scans each tree of `trees` as a node root (named by its partition when there are
/// several, `""` when one), `errors` added to the report, whose root is `shown`.
fn scan_roots(
    args: &ScanArgs,
    cfg: &ScanConfig,
    (trees, errors): (Vec<Root>, Vec<ScanError>),
    shown: String,
    started: Instant,
    stdout: &mut dyn Write,
) -> Result<Outcome> {
    let fail_on = config::fail_on(args.fail_on);
    let several = trees.iter().any(|(part, _)| !part.is_empty());
    let baseline = baseline(args)?;
    let mut printer = Printer::new(cfg.quiet, cfg.verbose, cfg.output.is_some());
    let mut all = ScanResult::default();
    let mut secrets_stats = None;
    for (part, tree) in trees {
        let mut vol = cfg.clone();
        vol.root = crate::sys::RootDir::of_image(tree);
        let sep = if part.is_empty() { "" } else { " " };
        vol.root_arg = std::path::PathBuf::from(format!("{shown}{sep}{part}"));
        vol.cri = cri::Choice::Disabled;
        vol.lock = None;
        // One --timeout for the whole image: its indexing and every filesystem.
        vol.deadline = cfg.timeout.map(|t| started + t);
        let mut searching = Searching::load(&vol, None)?;
        secrets_stats = searching.secrets_stats.take().or(secrets_stats);
        let Scanned { mut result, .. } = search(&vol, searching, &mut printer, false, false)?;
        if several {
            for f in &mut result.findings {
                f.path = format!("{part}:{}", f.path);
            }
            for e in &mut result.errors {
                e.path = format!("{part}:{}", e.path);
            }
        }
        merge(&mut all, result);
    }
    all.errors.extend(errors);
    all.errors.sort();
    all.findings.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    let report = image_report(cfg, all, &baseline, shown, started);
    finish(cfg, report, fail_on, printer, secrets_stats, stdout)
}

/// Adds the result of one filesystem's scan to `all`.
fn merge(all: &mut ScanResult, r: ScanResult) {
    all.findings.extend(r.findings);
    all.errors.extend(r.errors);
    all.files += r.files;
    all.bytes += r.bytes;
    for (site, s) in r.sites {
        let t = all.sites.entry(site).or_default();
        (t.files, t.bytes, t.busy) = (t.files + s.files, t.bytes + s.bytes, t.busy + s.busy);
    }
    all.incomplete |= r.incomplete;
    all.scopes.extend(r.scopes);
    for (kind, n) in r.skipped {
        *all.skipped.entry(kind).or_default() += n;
    }
    all.layouts.distributions.extend(r.layouts.distributions);
    all.layouts.distributions.dedup();
    all.layouts.lines.extend(r.layouts.lines);
    all.unread_mounts.extend(r.unread_mounts);
}

/// `scan --image PATH`: the image archive at `image` searched, no node and no runtime
/// asked; the report is a scan's, its root the archive.
fn run_image(
    args: &ScanArgs,
    cfg: &ScanConfig,
    image: &std::path::Path,
    started: Instant,
    stdout: &mut dyn Write,
) -> Result<Outcome> {
    let fail_on = config::fail_on(args.fail_on);
    let shown = text::display_path(image.as_os_str());
    let failed = |e: String| anyhow::anyhow!("--image {shown}: {e}");
    let store = match image_kind(image).map_err(failed)? {
        ImageKind::Disk => return run_disk(args, cfg, image, started, stdout),
        ImageKind::Dir => crate::oci::Store::open_dir(image).map_err(failed)?,
        ImageKind::Tar(c) => {
            // One pass over its headers: a container image archive has a manifest.json or
            // an index.json at its top; any other tar is a node's root. A compressed one is
            // inflated in that pass, keeping checkpoints to read its members from later.
            use crate::tarball::{seekable::Seekable, Compression};
            let file = std::fs::File::open(image).map_err(|e| failed(e.to_string()))?;
            let shared = file.try_clone().map_err(|e| failed(e.to_string()))?;
            let shared = std::sync::Arc::new(crate::sys::cache::HostFile::new(shared));
            // What the page cache holds of it, asked before the indexing pass reads it.
            shared.look();
            let (bytes, tree): (std::sync::Arc<dyn crate::sys::Bytes + Send + Sync>, _) = match c {
                Compression::None => {
                    let read = std::io::BufReader::with_capacity(1 << 20, file);
                    (shared.clone(), crate::rootfs::TarTree::index(shared, read))
                }
                _ => {
                    let seekable = Seekable::new(shared, c).map_err(|e| failed(e.to_string()))?;
                    let deadline = cfg.timeout.map(|t| started + t);
                    let tree =
                        crate::rootfs::TarTree::index(seekable.clone(), seekable.indexer(deadline))
                            .map_err(|e| format!("{c}-compressed: {e}"));
                    (seekable, tree)
                }
            };
            let tree = tree.map_err(failed)?;
            if !tree.is_image_archive() {
                let roots = (vec![(String::new(), std::sync::Arc::new(tree) as _)], vec![]);
                return scan_roots(args, cfg, roots, shown, started, stdout);
            }
            crate::oci::Store::Tar { bytes, members: tree.files() }
        }
    };
    let catalog =
        crate::oci::catalog(&store).map_err(|e| anyhow::anyhow!("--image {shown}: {e}"))?;
    let mut searching = Searching::load(cfg, None)?;
    let baseline = baseline(args)?;
    let mut printer = Printer::new(cfg.quiet, cfg.verbose, cfg.output.is_some());
    let secrets_stats = searching.secrets_stats.take();
    let Searching { sets, rules, .. } = searching;
    let matcher = Matcher::new(sets);
    printer.detail(TRACE, || [searching_line(&matcher, &rules, cfg)]);
    let searchers = Searchers { matcher: &matcher, rules: &rules };
    let settings = ScanSettings {
        layout: cfg.layout.clone(),
        threads: cfg.threads,
        chunk: cfg.chunk,
        max_file_size: cfg.max_file_size,
        // One --timeout for the whole archive, its indexing pass included.
        deadline: cfg.timeout.map(|t| started + t),
        state: None,
        keep_state: false,
    };
    let mut result = printer
        .with_progress(|p| scan::scan_archive(&settings, &store, &catalog, &searchers, p))?;
    stopped()?;
    for e in result.errors.iter_mut().filter(|e| e.path.is_empty()) {
        e.path = shown.clone();
    }
    if result.incomplete {
        result.errors.push(ScanError {
            path: shown.clone(),
            error: format!(
                "the scan stopped at --timeout {}: what was not read by then is not in this report",
                humantime::format_duration(cfg.timeout.unwrap_or_default())
            ),
        });
    }
    result.errors.sort();
    printer.detail(VERBOSE, || result.layouts.lines.clone());
    scan::withhold_names(&searchers, result.findings.iter().flat_map(|f| f.images.iter()));
    let names = result.findings.iter_mut().flat_map(Finding::names_mut);
    scan::withhold_names(&searchers, names.map(|n| &**n));
    let report = image_report(cfg, result, &baseline, shown, started);
    finish(cfg, report, fail_on, printer, secrets_stats, stdout)
}

/// The report of a scan that started at `started`, the findings `baseline` names left out.
fn report_of(
    cfg: &ScanConfig,
    mut result: ScanResult,
    cri: CriInfo,
    baseline: &std::collections::HashSet<String>,
    started: Instant,
) -> Report {
    let before = result.findings.len();
    result.findings.retain(|f| !baseline.contains(&f.id));
    let baselined = (before - result.findings.len()) as u64;
    let mut report = Report {
        schema: Report::SCHEMA,
        root: text::display_path(cfg.root_arg.as_os_str()),
        node: node_name(&cfg.root),
        cri,
        summary: Summary {
            files: result.files,
            bytes: result.bytes,
            unchanged_files: result.unchanged.0,
            unchanged_bytes: result.unchanged.1,
            findings: result.findings.len() as u64,
            sites: result.findings.iter().fold(Default::default(), |mut m, f| {
                *m.entry(f.site).or_default() += 1;
                m
            }),
            baselined,
            duration_ms: started.elapsed().as_millis() as u64,
            incomplete: result.incomplete,
            unread_mounts: result.unread_mounts.len() as u64,
            shipped: result.findings.iter().filter(|f| f.category == Category::Shipped).count()
                as u64,
            distributions: result.layouts.distributions.clone(),
        },
        findings: result.findings,
        errors: result.errors,
        unread_mounts: result.unread_mounts,
    };
    report.withhold();
    report
}

/// What a search searches with, made as the run's first steps: the node's walk started,
/// the fingerprints loaded, the rules compiled.
pub(crate) struct Searching {
    early: Option<EarlyWalk>,
    sets: Vec<FingerprintSet>,
    /// What `--secrets` left out.
    pub(crate) secrets_stats: Option<BuildStats>,
    rules: Rules,
}

/// A walk started early, for the layout it was given.
struct EarlyWalk {
    layout: Layout,
    walking: Walking,
}

impl Searching {
    /// Starts the walk of the node and loads what to search for.
    pub(crate) fn start(cfg: &ScanConfig) -> Result<Searching> {
        // The walk keeps directory descriptors open for files waiting to be read.
        sys::raise_open_files_limit();
        let early = (!cfg.nice).then(|| EarlyWalk {
            layout: cfg.layout.clone(),
            walking: Walking::start_with(
                cfg.root.clone(),
                cfg.layout.clone(),
                cfg.read_csi_volumes,
            ),
        });
        Searching::load(cfg, early)
    }

    /// Loads what to search for; `early`: the node's walk, started.
    fn load(cfg: &ScanConfig, early: Option<EarlyWalk>) -> Result<Searching> {
        // The node's scopes (pod dirs, volumes, the runtime's records) are found and
        // walked on a thread of their own while the fingerprints load and the matcher is
        // built: the readers then start with files listed. Not under --nice: every thread
        // must start after the priority is lowered.
        // The rules compile (tens of milliseconds) on another thread while the fingerprint
        // files load.
        let (mut sets, rules) = std::thread::scope(|s| -> Result<_> {
            let rules = cfg.rules.then(|| s.spawn(|| Rules::builtin(unix_now())));
            let mut sets = Vec::new();
            for f in &cfg.fingerprints {
                sets.push(
                    FingerprintSet::from_file(f, cfg.threads)
                        .with_context(|| format!("fingerprint file {}", f.display()))?,
                );
            }
            let rules = match rules {
                Some(build) => {
                    build.join().map_err(|_| anyhow::anyhow!("the rules did not compile"))?
                }
                None => Rules::none(),
            };
            Ok((sets, rules))
        })?;
        let mut secrets_stats = None;
        if let Some(src) = &cfg.secrets {
            let parsed = kubectl::parse(&config::read_input(src)?)
                .with_context(|| format!("--secrets {}", src.display()))?;
            let (set, stats) =
                FingerprintSet::build(&parsed.values, &cfg.label, fingerprint::random_salt()?);
            sets.push(set);
            secrets_stats = Some(stats);
        }
        Ok(Searching { early, sets, secrets_stats, rules })
    }
}

/// The walk of the node: the early one when it started for `layout` (the runtime may
/// have named another kubelet dir), else one started now.
fn walking(early: Option<EarlyWalk>, cfg: &ScanConfig, layout: &Layout) -> Walking {
    match early {
        Some(e) if e.layout == *layout => return e.walking,
        Some(e) => e.walking.cancel(),
        None => {}
    }
    Walking::start_with(cfg.root.clone(), layout.clone(), cfg.read_csi_volumes)
}

/// A runtime that answered, and its answer.
pub(crate) type Asked = Option<(cri::Client, cri::Live)>;

/// A search with the runtime asked.
pub(crate) struct Scanned {
    /// What the scan found, judged by what lives.
    pub(crate) result: ScanResult,
    /// The report's `cri` block.
    pub(crate) cri: CriInfo,
    /// The runtime, when it answered.
    pub(crate) asked: Asked,
    /// kubelet's dir as the runtime's running containers mount their volumes from, when
    /// it was learned.
    pub(crate) kubelet_dir_seen: Option<PathBuf>,
}

/// The search of `cfg`, with the runtime asked: connected (and the version asked) before
/// the scan, so that `--require-cri` fails fast, and the pods listed after it, so that a
/// pod started meanwhile counts as live. kubelet's root dir, when not given, is learned
/// from where the runtime's containers mount volumes from.
/// `learn_kubelet_dir`: ask where containers mount from even when kubelet's dir is given
/// (for `clean` to compare); `read_hidden`: read what mounts over the node's places hide
/// (`scan`).
pub(crate) fn search(
    cfg: &ScanConfig,
    searching: Searching,
    printer: &mut Printer,
    learn_kubelet_dir: bool,
    read_hidden: bool,
) -> Result<Scanned> {
    let Searching { early, sets, rules, .. } = searching;
    if cfg.nice {
        lower_priority(printer);
    }
    crate::sys::set_max_read_rate(cfg.max_read_rate.unwrap_or(0));
    let mut connected = match cri::connect(&cfg.cri, cfg.cri_timeout) {
        Err(u) if cfg.require_cri => bail!("{u}"),
        other => other,
    };
    let mut layout = cfg.layout.clone();
    let kubelet_dir_seen = learn(&mut connected, &mut layout, learn_kubelet_dir, printer);
    let inputs =
        scan::state::Inputs { sets: &sets, rules: &rules, max_file_size: cfg.max_file_size };
    let digest = cfg.state.as_ref().map(|_| scan::state::digest(&inputs));
    let matcher = Matcher::new(sets);
    printer.detail(TRACE, || [searching_line(&matcher, &rules, cfg)]);
    let searchers = Searchers { matcher: &matcher, rules: &rules };
    let walking = walking(early, cfg, &layout);
    let last = match (&cfg.state, &digest) {
        (Some(path), Some(digest)) if !cfg.full => last_state(path, digest, printer),
        _ => None,
    };
    let started_ns = crate::sys::unix_now_ns();
    let last = last.map(|mut last| {
        last.read_again_after(started_ns, cfg.state_max_age);
        last
    });
    let settings = ScanSettings {
        layout,
        threads: cfg.threads,
        chunk: cfg.chunk,
        max_file_size: cfg.max_file_size,
        deadline: cfg.deadline.or(cfg.timeout.map(|t| Instant::now() + t)),
        state: last.map(std::sync::Arc::new),
        keep_state: cfg.state.is_some(),
    };
    let deadline = settings.deadline;
    let mut result = printer.with_progress(|p| scan::scan(&settings, walking, &searchers, p))?;
    stopped()?;
    let records = std::mem::take(&mut result.records);
    // Every file of the last state taken from it, none read and none gone: it is kept as
    // it is. (Any state a scan wrote stays true of each file it holds until the file
    // changes; a newer one only knows more. Its older start judges no file "racily
    // clean" otherwise: each was older than it.)
    let kept = settings
        .state
        .as_ref()
        .is_some_and(|last| result.unchanged.0 == result.files && records.len() == last.len());
    if kept {
        printer.detail(VERBOSE, || ["scan state: every file unchanged; kept as it is".to_owned()]);
    }
    if let (Some(path), Some(digest), false) = (&cfg.state, &digest, kept) {
        // A scan cut short keeps what it read: the rest is read next time.
        let bytes = scan::state::State::encode(digest, started_ns, records);
        if let Err(e) = crate::sys::write_private(path, &bytes) {
            let shown = text::display_path(path.as_os_str());
            printer
                .note(format!("the scan state {shown} was not written: {}", node::io_message(&e)));
        }
    }
    // Not for `clean`: it removes only what the node sees, and a copy beneath a mount has
    // the visible one's paths.
    let hidden = match read_hidden {
        true => beneath_mounts(cfg, &settings.layout, &searchers, deadline, printer)?,
        false => Hidden::default(),
    };
    if result.incomplete {
        result.errors.push(ScanError {
            path: text::display_path(cfg.root_arg.as_os_str()),
            error: format!(
                "the scan stopped at --timeout {}: files not read by then are not in this report",
                humantime::format_duration(cfg.timeout.unwrap_or_default())
            ),
        });
        result.errors.sort();
    }
    tell_scan(&result, printer);
    // Before liveness: a shipped file's finding is `info` whoever owns it.
    scan::shipped::mark(&cfg.root, &mut result.findings);
    let (mut cri, mut asked) = ask(connected, &mut result, cfg.require_cri, printer)?;
    // What no one sees has no owner that lives: judged without the runtime.
    merge_hidden(hidden, &mut result);
    // The names the scan and the runtime gave, matched as the names on paths were: the
    // outputs withhold what matches.
    scan::withhold_names(&searchers, result.findings.iter().flat_map(|f| f.images.iter()));
    let names = result.findings.iter_mut().flat_map(Finding::names_mut);
    let names = names.chain(cri.runtime.iter_mut());
    let names = names.chain(asked.iter_mut().flat_map(|(_, live)| live.names_mut()));
    scan::withhold_names(&searchers, names.map(|n| &**n));
    Ok(Scanned { result, cri, asked, kubelet_dir_seen })
}

/// The last scan's state at `path`, when it was made under `digest` and reads back whole;
/// otherwise none, with a note saying why (a missing one is said only with `-v`).
fn last_state(
    path: &std::path::Path,
    digest: &scan::state::Digest,
    printer: &mut Printer,
) -> Option<scan::state::State> {
    let shown = text::display_path(path.as_os_str());
    let read = crate::sys::read_private(path, scan::state::MAX_BYTES);
    // Its dir not made yet: none yet.
    let read = match read {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        other => other,
    };
    let why = match read {
        Ok(None) => {
            printer.detail(VERBOSE, || [format!("scan state {shown}: none yet; every file read")]);
            return None;
        }
        Ok(Some(bytes)) => match scan::state::State::decode(&bytes) {
            Ok(s) if s.digest == *digest => return Some(s),
            Ok(_) => {
                let why = "made with other fingerprints, rules, options or binary; every file read";
                printer.detail(VERBOSE, || [format!("scan state {shown}: {why}")]);
                return None;
            }
            Err(why) => why,
        },
        Err(e) => node::io_message(&e),
    };
    printer.note(format!("the scan state {shown} is not used ({why}): every file is read"));
    None
}

/// What a finding beneath a mount is.
const HIDDEN: &str = "hidden beneath a mount: a copy on the filesystem a mount now covers \
    (the data was moved to another disk and mounted back), which the node no longer sees \
    and nothing removes";

/// What the mounts over the node's places hide: a scan's result.
type Hidden = ScanResult;

/// Adds what the mounts hide to `result`, sorted as a scan's are.
fn merge_hidden(hidden: Hidden, result: &mut ScanResult) {
    result.findings.extend(hidden.findings);
    result.findings.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    result.errors.extend(hidden.errors);
    result.errors.sort();
    result.errors.dedup();
    result.unread_mounts.extend(hidden.unread_mounts);
    result.unread_mounts.sort();
    result.unread_mounts.dedup();
    for (kind, n) in hidden.skipped {
        *result.skipped.entry(kind).or_default() += n;
    }
    (result.files, result.bytes) = (result.files + hidden.files, result.bytes + hidden.bytes);
    result.incomplete |= hidden.incomplete;
}

/// `note` said of a finding hidden beneath a mount: [`HIDDEN`], then the note it had (a
/// freed page, an orphaned snapshot), one string per note, kept for the run.
fn hidden_note(note: Option<&'static str>) -> &'static str {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static NOTES: OnceLock<Mutex<HashMap<&'static str, &'static str>>> = OnceLock::new();
    let Some(note) = note else { return HIDDEN };
    let mut notes = NOTES.get_or_init(Default::default).lock().expect("lock");
    // Bounded: the notes are the sites' constants, a dozen at most.
    notes.entry(note).or_insert_with(|| Box::leak(format!("{HIDDEN}; {note}").into_boxed_str()))
}

/// What the mounts over the node's places hide (kubelet's dir, a containerd root, the pod
/// logs moved to a local disk and mounted back, as EKS, AKS and GKE nodes do): each read
/// through a detached clone of the filesystem beneath (`RootDir::beneath_mounts`;
/// nothing is mounted, nothing written), its findings noted as hidden and rated with no
/// owner alive (nothing removes them). A mount of a dir over itself (a bind kubelet
/// wrappers make) hides nothing and is passed by. Without `CAP_SYS_ADMIN` nothing is
/// read (`-v` says so).
fn beneath_mounts(
    cfg: &ScanConfig,
    layout: &Layout,
    searchers: &Searchers<'_>,
    deadline: Option<Instant>,
    printer: &mut Printer,
) -> Result<Hidden> {
    let mut hidden = Hidden::default();
    for (node, kind) in crate::sites::mounted_places(&cfg.root, layout) {
        let shown = text::display_path(node.as_os_str());
        let Ok(rel) = crate::sites::resolve(&cfg.root, &node) else { continue };
        let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else { continue };
        let clone = cfg.root.beneath_mounts(parent).and_then(|clone| {
            let beneath = clone.lstat(std::path::Path::new(name))?;
            Ok((clone, beneath))
        });
        let (clone, beneath) = match clone {
            Ok(c) => c,
            Err(e) => {
                let why = node::io_message(&e);
                printer.detail(VERBOSE, || {
                    [format!("beneath the mount at {shown}: not read ({why})")]
                });
                continue;
            }
        };
        if cfg.root.lstat(&rel).is_ok_and(|seen| seen.ident == beneath.ident) {
            printer.detail(VERBOSE, || [format!("beneath the mount at {shown}: itself")]);
            continue;
        }
        printer.detail(VERBOSE, || [format!("beneath the mount at {shown}: read")]);
        let layout = crate::sites::beneath_mounts(
            &std::path::Path::new("/").join(name),
            kind,
            cfg.max_file_size,
        );
        let walking = Walking::start_with(clone, layout.clone(), false);
        let settings = ScanSettings {
            layout,
            threads: cfg.threads,
            chunk: cfg.chunk,
            max_file_size: cfg.max_file_size,
            deadline,
            state: None,
            keep_state: false,
        };
        let mut result = scan::scan(&settings, walking, searchers, &())?;
        stopped()?;
        // The clone's root is the mount's parent dir, a node path with no symlink in it.
        let parent = text::display_path(std::path::Path::new("/").join(parent).as_os_str());
        let at = |p: &str| format!("{}{p}", parent.trim_end_matches('/'));
        for f in &mut result.findings {
            f.path = at(&f.path);
            f.note = Some(hidden_note(f.note));
            f.id = Finding::refine_id(&f.id, &format!("beneath-mount:{parent}"));
        }
        crate::severity::judge(&mut result.findings, None, None);
        for e in &mut result.errors {
            e.path = at(&e.path);
        }
        for m in &mut result.unread_mounts {
            m.path = at(&m.path);
        }
        merge_hidden(result, &mut hidden);
    }
    Ok(hidden)
}

/// Lowers the run's CPU and I/O priority (`--nice`), before any thread of the scan starts:
/// they inherit it.
fn lower_priority(printer: &mut Printer) {
    match sys::be_nice() {
        Ok((nice, class)) => printer.detail(VERBOSE, || {
            let class = if class == 3 { "idle".to_owned() } else { format!("class {class}") };
            [format!("priority: nice {nice}, I/O {class}")]
        }),
        Err(e) => printer.scan_note(format!("--nice: {e}")),
    }
}

/// kubelet's dir as the runtime's containers mount volumes from, asked when `layout`
/// leaves it to be learned or `always` (for `clean` to compare); `layout` takes it when
/// it was not given.
fn learn(
    connected: &mut Result<Option<cri::Client>, cri::Unreachable>,
    layout: &mut Layout,
    always: bool,
    printer: &mut Printer,
) -> Option<PathBuf> {
    let mut seen = None;
    match connected {
        Ok(Some(client)) => {
            let explicit = layout.kubelet_dir_explicit;
            if !explicit || always {
                seen = cri::kubelet_dir(client).ok().flatten();
            }
            if let (false, Some(dir)) = (explicit, &seen) {
                layout.kubelet_dir = dir.clone();
            }
            printer.detail(TRACE, || client.take_trace().into_iter().map(cri_note));
        }
        Err(u) => printer.detail(TRACE, || std::mem::take(&mut u.trace).into_iter().map(cri_note)),
        Ok(None) => {}
    }
    seen
}

/// A line of the runtime's calls (`-vv`).
fn cri_note(call: String) -> String {
    format!("cri: {call}")
}

/// What is searched for and how (`-vv`).
fn searching_line(matcher: &Matcher, rules: &Rules, cfg: &ScanConfig) -> String {
    let m = matcher.stats();
    format!(
        "searching for {} values ({} encoded forms, {} windows, {} fingerprint sets, \
         prefilter {}, {} sampler) and {} rules (key search: {}), with {} threads \
         reading {} at a time",
        m.values,
        m.forms,
        m.windows,
        m.sets,
        report::human_size(m.filter_bytes as u64),
        m.kernel,
        rules.specs().count(),
        rules.key_search(),
        cfg.threads,
        report::human_size(cfg.chunk as u64),
    )
}

/// What the scan walked (`-vv`) and read a site (`-v`).
fn tell_scan(result: &ScanResult, printer: &mut Printer) {
    printer.detail(TRACE, || {
        let mut lines = vec![format!("{} scopes to walk:", result.scopes.len())];
        lines.extend(result.scopes.iter().map(|s| format!("  scope {}", text::terminal_safe(s))));
        if !result.skipped.is_empty() {
            let kinds: Vec<String> =
                result.skipped.iter().map(|(kind, n)| format!("{kind}: {n}")).collect();
            lines.push(format!("not read, not regular files: {}", kinds.join(", ")));
        }
        lines
    });
    printer.detail(VERBOSE, || result.layouts.lines.iter().map(|l| text::terminal_safe(l)));
    printer.detail(VERBOSE, || {
        let (files, bytes) = result.unchanged;
        (files > 0).then(|| {
            let size = report::human_size(bytes);
            format!("unchanged since the last scan (its state): {files} files, {size}, not read")
        })
    });
    printer.detail(VERBOSE, || {
        let (files, bytes) = result.due;
        (files > 0).then(|| {
            let size = report::human_size(bytes);
            format!("read again though unchanged, unread for longer than --state-max-age: {files} files, {size}")
        })
    });
    printer.detail(VERBOSE, || {
        let n = crate::sys::cache::unasked();
        (n > 0).then(|| {
            format!(
                "page cache: the kernel would not say what it held of {n} files (they are \
                 another user's, and this process has no CAP_FOWNER): what was read of them \
                 stays cached"
            )
        })
    });
    printer.detail(VERBOSE, || {
        result.sites.iter().map(|(site, s)| {
            format!(
                "site {}: {} files, {}, {} ms",
                site.as_str(),
                s.files,
                report::human_size(s.bytes),
                s.busy.as_millis()
            )
        })
    });
}

/// Asks the runtime what runs now and rates the findings by it; the report's `cri` block,
/// and the client with its answer. A runtime that cannot be asked leaves liveness unknown
/// and says why in `errors` (or fails the scan with `--require-cri`); with `-vv`, the
/// calls it made.
fn ask(
    connected: Result<Option<cri::Client>, cri::Unreachable>,
    result: &mut ScanResult,
    require: bool,
    printer: &mut Printer,
) -> Result<(CriInfo, Asked)> {
    let asked = connected.and_then(|client| match client {
        None => Ok(None),
        Some(mut client) => client.live().map(|live| Some((client, live))),
    });
    let (info, mut asked, calls) = match asked {
        Ok(None) => {
            (CriInfo { status: CriStatus::Disabled, endpoint: None, runtime: None }, None, vec![])
        }
        Ok(Some((client, live))) => {
            let info = CriInfo {
                status: CriStatus::Ok,
                endpoint: Some(client.endpoint().to_string()),
                runtime: Some(client.runtime().to_owned()),
            };
            (info, Some((client, live)), vec![])
        }
        Err(u) if require => bail!("{u}"),
        Err(mut u) => {
            let calls = std::mem::take(&mut u.trace);
            result
                .errors
                .push(ScanError { path: u.endpoint.clone(), error: format!("CRI: {}", u.error) });
            result.errors.sort();
            let info = CriInfo {
                status: CriStatus::Unreachable,
                endpoint: Some(u.endpoint),
                runtime: None,
            };
            (info, None, calls)
        }
    };
    // The runtimes' own records are witnesses too, CRI asked or not.
    let (live, runtime) = match &asked {
        Some((client, live)) => (Some(live), Some(client.runtime())),
        None => (None, None),
    };
    crate::severity::judge(&mut result.findings, live, runtime);
    let calls = match &mut asked {
        Some((client, _)) => client.take_trace(),
        None => calls,
    };
    printer.detail(TRACE, || calls.into_iter().map(cri_note));
    if let Some((_, live)) = &asked {
        printer.detail(TRACE, || {
            [format!(
                "cri: {} pods ({} sandboxes), {} containers",
                live.pods.len(),
                live.pods.values().map(Vec::len).sum::<usize>(),
                live.containers.len()
            )]
        });
    }
    Ok((info, asked))
}
