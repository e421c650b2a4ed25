//! Validated settings: turns raw command-line arguments into what a run needs, failing
//! fast (exit 2) before any file under the root is read.

use crate::cli::{CriArgs, FailOn, ReportFormatArg, SearchArgs};
use crate::cri;
use crate::finding::Severity;
use crate::fingerprint::{self, BuildStats, FingerprintSet};
use crate::kubectl;
use crate::report::Format;
use crate::rules::Rules;
use crate::scan::{ScanSettings, Walking, DEFAULT_CHUNK};
use crate::sites::kubelet::DEFAULT_KUBELET_DIR;
use crate::sites::{containerd, logs, Layout};
use crate::sys::RootDir;
use anyhow::{bail, Context, Result};
use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Everything `scan` needs, checked.
pub struct ScanConfig {
    /// The walk started when the arguments were read (see [`ScanConfig::walking`]).
    pub early: Option<EarlyWalk>,
    /// The opened root.
    pub root: RootDir,
    /// The root as given.
    pub root_arg: PathBuf,
    /// Walk and read settings.
    pub settings: ScanSettings,
    /// The fingerprint sets to search for.
    pub sets: Vec<FingerprintSet>,
    /// What `--secrets` left out.
    pub secrets_stats: Option<BuildStats>,
    /// The built-in rules, compiled (none with `--no-rules`).
    pub rules: Rules,
    /// The run lock file (`None`: a run as another user than root with no
    /// `$XDG_RUNTIME_DIR` and none named has none).
    pub lock: Option<PathBuf>,
    /// `--timeout`: the scan's deadline is set when it starts.
    pub timeout: Option<Duration>,
    /// `--nice`.
    pub nice: bool,
    /// `--verbose`: 0, 1 (`-v`) or 2 and more (`-vv`).
    pub verbose: u8,
    /// `--quiet`.
    pub quiet: bool,
    /// Report format.
    pub format: Format,
    /// Report file, or stdout.
    pub output: Option<crate::report::Output>,
    /// Which container runtime to ask which pods live.
    pub cri: cri::Choice,
    /// The timeout of each CRI call.
    pub cri_timeout: Duration,
    /// Whether a runtime that cannot be asked fails the scan.
    pub require_cri: bool,
    /// Whether CSI volumes other than the Secrets Store driver's are read.
    pub read_csi_volumes: bool,
}

/// A walk started early, for the layout it was given.
#[derive(Debug)]
pub struct EarlyWalk {
    layout: Layout,
    walking: Walking,
}

impl ScanConfig {
    /// The walk of the node: the early one when it started for the layout now in force
    /// (the runtime may have named another kubelet dir; `clean` asks for the one it
    /// names), else one started now.
    pub fn walking(&mut self) -> Walking {
        match self.early.take() {
            Some(e) if e.layout == self.settings.layout => return e.walking,
            Some(e) => e.walking.cancel(),
            None => {}
        }
        Walking::start_with(self.root.clone(), self.settings.layout.clone(), self.read_csi_volumes)
    }

    /// Validates `args`: opens the root, reads fingerprint files and kubectl JSON.
    pub fn from_args(args: &SearchArgs) -> Result<ScanConfig> {
        let root =
            RootDir::open(&args.root).with_context(|| format!("root {}", args.root.display()))?;
        if !root.path().is_dir() {
            bail!("root {}: not a directory", args.root.display());
        }
        let threads = match args.threads {
            Some(0) => bail!("--threads must be at least 1"),
            Some(n) if n > MAX_THREADS => bail!("--threads must be at most {MAX_THREADS}"),
            Some(n) => n,
            None => std::thread::available_parallelism().map_or(1, |n| n.get()).min(4),
        };
        let chunk = args.chunk_size.unwrap_or(DEFAULT_CHUNK);
        if !(64..=1 << 30).contains(&chunk) {
            bail!("--chunk-size must be between 64 and 1073741824");
        }
        let max_file_size = match &args.max_file_size {
            Some(s) => Some(parse_size(s).context("--max-file-size")?),
            None => None,
        };
        let timeout =
            match &args.timeout {
                Some(s) => Some(humantime::parse_duration(s).map_err(|_| {
                    anyhow::anyhow!("--timeout: not a duration (like 90s, 30m, 1h)")
                })?),
                None => None,
            };
        let (cri, cri_timeout) = cri_choice(&args.cri, args.no_cri, &root)?;
        let kubelet_dir_explicit = args.kubelet_dir.is_some();
        let kubelet_dir =
            node_path(args.kubelet_dir.as_deref().unwrap_or(Path::new(DEFAULT_KUBELET_DIR)));
        let containerd_root_explicit = args.containerd_root.is_some();
        let containerd_root = node_path(
            args.containerd_root.as_deref().unwrap_or(Path::new(containerd::DEFAULT_ROOT)),
        );
        let containerd_state = node_path(
            args.containerd_state.as_deref().unwrap_or(Path::new(containerd::DEFAULT_STATE)),
        );
        let layout = Layout {
            kubelet_dir,
            kubelet_dir_explicit,
            containerd_state,
            containerd_root,
            etcd: args.etcd.iter().map(|p| node_path(p)).collect(),
            pod_logs: node_path(
                args.pod_log_dir.as_deref().unwrap_or(Path::new(logs::DEFAULT_DIR)),
            ),
            containerd_root_explicit,
            extra: args.paths.iter().map(|p| node_path(p)).collect(),
            max_file_size,
        };
        // The node's scopes (pod dirs, volumes, the runtime's records) are found and
        // walked on a thread of their own while the fingerprints load and the matcher is
        // built: the readers then start with files listed. Not under --nice: every thread
        // must start after the priority is lowered.
        // The walk keeps directory descriptors open for files waiting to be read.
        crate::sys::raise_open_files_limit();
        let early = match args.nice {
            false => Some(EarlyWalk {
                layout: layout.clone(),
                walking: Walking::start_with(root.clone(), layout.clone(), args.read_csi_volumes),
            }),
            true => None,
        };
        // The rules compile (tens of milliseconds) on another thread while the fingerprint
        // files load.
        let (mut sets, rules) = std::thread::scope(|s| -> Result<_> {
            let rules = (!args.no_rules).then(|| s.spawn(|| Rules::builtin(crate::unix_now())));
            let mut sets = Vec::new();
            for f in &args.fingerprints {
                sets.push(
                    FingerprintSet::from_file(f, threads)
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
        if let Some(src) = &args.secrets {
            let parsed = kubectl::parse(&read_input(src)?)
                .with_context(|| format!("--secrets {}", src.display()))?;
            let (set, stats) =
                FingerprintSet::build(&parsed.values, &args.label, fingerprint::random_salt()?);
            sets.push(set);
            secrets_stats = Some(stats);
        }
        if sets.is_empty() && args.no_rules {
            bail!("nothing to look for: --no-rules without --fingerprints FILE or --secrets FILE");
        }
        Ok(ScanConfig {
            early,
            cri,
            cri_timeout,
            require_cri: args.require_cri,
            read_csi_volumes: args.read_csi_volumes,
            root,
            root_arg: args.root.clone(),
            settings: ScanSettings { layout, threads, chunk, max_file_size, deadline: None },
            timeout,
            nice: args.nice,
            verbose: args.verbose,
            quiet: args.quiet,
            sets,
            secrets_stats,
            rules,
            lock: args.lock.clone().or_else(default_lock),
            format: match args.format {
                ReportFormatArg::Table => Format::Table,
                ReportFormatArg::Json => Format::Json,
                ReportFormatArg::Sarif => Format::Sarif,
                // `--secret-series` and `--fail-on` are scan's: set by the caller.
                ReportFormatArg::Prometheus => Format::Prometheus { secret_series: 0 },
                ReportFormatArg::Npd => Format::Npd { fail_on: None },
            },
            output: args.output.clone().map(|path| crate::report::Output {
                path,
                follow_symlink: args.follow_output_symlink,
            }),
        })
    }
}

/// The most `--threads`: each thread has buffers of its own (a few MiB), and past a few
/// per core they only wait for each other; thousands of them took longer to start than a
/// small scan takes.
pub const MAX_THREADS: usize = 256;

/// The shortest `--every`: a shorter period would scan again and again without pause.
pub const MIN_EVERY: Duration = Duration::from_secs(1);

/// `--every`: a duration of at least [`MIN_EVERY`]. Errors never repeat the value.
pub fn parse_every(s: &str) -> Result<Duration> {
    match humantime::parse_duration(s) {
        Ok(d) if d >= MIN_EVERY => Ok(d),
        Ok(_) => bail!("--every must be at least 1s"),
        Err(_) => bail!("--every: not a duration (like 30m, 1h)"),
    }
}

/// The run lock when none is named (`--lock`, `KRESIDUE_LOCK`): [`crate::sys::ROOT_LOCK`]
/// as root; as another user, `kresidue.lock` in its own `$XDG_RUNTIME_DIR` (the dir only
/// that user may enter, as systemd makes it), or none: such a run (CI without root) has
/// no lock to share with root's runs anyway.
fn default_lock() -> Option<PathBuf> {
    if crate::sys::is_root() {
        return Some(PathBuf::from(crate::sys::ROOT_LOCK));
    }
    let dir = PathBuf::from(std::env::var_os("XDG_RUNTIME_DIR")?);
    dir.is_absolute().then(|| dir.join("kresidue.lock"))
}

/// A size: bytes, or with a `K`, `M`, `G` or `T` suffix (powers of 1024; `KiB`, `MB`,
/// … spelled out too).
pub fn parse_size(s: &str) -> Result<u64> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 =
        digits.parse().map_err(|_| anyhow::anyhow!("not a size: a number, then K, M, G or T"))?;
    let shift = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        "T" | "TB" | "TIB" => 40,
        // The unit is not repeated: it may be a secret pasted in the wrong place.
        _ => bail!("not a size: a number, then K, M, G or T"),
    };
    n.checked_mul(1 << shift).ok_or_else(|| anyhow::anyhow!("too large"))
}

/// The `--fail-on` threshold (`None` = never).
pub fn fail_on(arg: FailOn) -> Option<Severity> {
    match arg {
        FailOn::Critical => Some(Severity::Critical),
        FailOn::High => Some(Severity::High),
        FailOn::Medium => Some(Severity::Medium),
        FailOn::Low => Some(Severity::Low),
        FailOn::Info => Some(Severity::Info),
        FailOn::Never => None,
    }
}

/// The finding ids of an earlier `kresidue/report/v1` JSON report. Errors name the
/// position of a syntax error, never the file's content.
pub fn read_baseline(path: &Path) -> Result<HashSet<String>> {
    #[derive(serde::Deserialize)]
    struct Baseline {
        schema: String,
        findings: Vec<BaselineFinding>,
    }
    #[derive(serde::Deserialize)]
    struct BaselineFinding {
        id: String,
    }
    let ctx = || format!("baseline {}", path.display());
    let bytes = std::fs::read(path).with_context(ctx)?;
    let parsed: Baseline = serde_json::from_slice(&bytes)
        .map_err(|e| {
            anyhow::anyhow!("not a kresidue JSON report (line {}, column {})", e.line(), e.column())
        })
        .with_context(ctx)?;
    if parsed.schema != crate::finding::Report::SCHEMA {
        return Err(anyhow::anyhow!("not a {} report", crate::finding::Report::SCHEMA))
            .with_context(ctx);
    }
    Ok(parsed.findings.into_iter().map(|f| f.id).collect())
}

/// A node path is absolute; a relative one is taken from the node's `/`.
fn node_path(p: &Path) -> PathBuf {
    Path::new("/").join(p)
}

/// The runtime to ask and the call timeout: `--cri` if given; else, with the root `/`, the
/// default sockets; else none (a mounted node image has no runtime of its own running).
pub fn cri_choice(args: &CriArgs, no_cri: bool, root: &RootDir) -> Result<(cri::Choice, Duration)> {
    let timeout = cri::parse_timeout(&args.cri_timeout).map_err(anyhow::Error::msg)?;
    let choice = match (&args.endpoint, no_cri) {
        (_, true) => cri::Choice::Disabled,
        (Some(e), false) => {
            cri::Choice::Given(cri::Endpoint::parse(e).map_err(anyhow::Error::msg)?)
        }
        (None, false) if root.path() == Path::new("/") => cri::Choice::Defaults,
        (None, false) => cri::Choice::Disabled,
    };
    Ok((choice, timeout))
}

/// Reads a file, or stdin for `-`.
pub fn read_input(src: &Path) -> Result<Vec<u8>> {
    let mut buf = Vec::new();
    if src == Path::new("-") {
        std::io::stdin().lock().read_to_end(&mut buf).context("cannot read stdin")?;
    } else {
        buf = std::fs::read(src).with_context(|| format!("cannot read {}", src.display()))?;
    }
    Ok(buf)
}
