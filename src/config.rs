//! Validated settings: turns raw command-line arguments into what a run needs, failing
//! fast (exit 2) before any file under the root is read. Pure data: nothing here starts
//! a thread, reads a fingerprint file or compiles a rule (those are steps of the run, in
//! [`crate::app`]).

use crate::cli::{ColorWhen, CriArgs, FailOn, ReportFormatArg, SearchArgs, TableArgs};
use crate::cri;
use crate::finding::Severity;
use crate::report::layout::View;
use crate::report::Format;
use crate::scan::DEFAULT_CHUNK;
use crate::sites::kubelet::DEFAULT_KUBELET_DIR;
use crate::sites::{containerd, logs, Layout};
use crate::sys::RootDir;
use anyhow::{bail, Context, Result};
use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Everything `scan` and `clean` need, checked.
#[derive(Clone)]
pub struct ScanConfig {
    /// The opened root.
    pub root: RootDir,
    /// The root as given.
    pub root_arg: PathBuf,
    /// Where to look on the node (kubelet's dir may still be learned from the runtime
    /// when not given: see [`Layout::kubelet_dir_explicit`]).
    pub layout: Layout,
    /// Worker threads.
    pub threads: usize,
    /// New bytes per read buffer.
    pub chunk: usize,
    /// `--max-file-size`.
    pub max_file_size: Option<u64>,
    /// `--fingerprints`: the fingerprint files to search for.
    pub fingerprints: Vec<PathBuf>,
    /// `--secrets`: kubectl JSON (a file, or `-` for stdin) to fingerprint in memory.
    pub secrets: Option<PathBuf>,
    /// `--label`: the label of the values read with `--secrets`.
    pub label: String,
    /// Whether the built-in rules run (not with `--no-rules`).
    pub rules: bool,
    /// The run lock (`None`: a run as another user than root with no
    /// `$XDG_RUNTIME_DIR` and none named has none).
    pub lock: Option<RunLock>,
    /// `--timeout`: the scan's deadline is set when it starts.
    pub timeout: Option<Duration>,
    /// The deadline already set, when `--timeout` counts from before the scan (an image's
    /// indexing pass and its filesystems share one).
    pub deadline: Option<std::time::Instant>,
    /// `--nice`.
    pub nice: bool,
    /// `--max-read-rate`, bytes a second.
    pub max_read_rate: Option<u64>,
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
    /// Whether a runtime that cannot be asked fails the run.
    pub require_cri: bool,
    /// Whether CSI volumes other than the Secrets Store driver's are read.
    pub read_csi_volumes: bool,
    /// The scan state's file (`--state`), for `scan` alone.
    pub state: Option<PathBuf>,
    /// `--full`: every file read, whatever the state says.
    pub full: bool,
    /// `--state-max-age`: a file unchanged but not read for longer is read again.
    pub state_max_age: Duration,
}

/// What a subcommand asks of its search beyond the [`SearchArgs`] it shares.
#[derive(Clone, Copy, Debug)]
pub struct Needs {
    /// The report format, whole (see [`format()`]).
    pub format: Format,
    /// kubelet's dir is `--kubelet-dir` or the default, never learned from the runtime
    /// (`clean`: a missing one is then an error).
    pub fixed_kubelet_dir: bool,
    /// The runtime must answer, as with `--require-cri` (`clean --apply`).
    pub require_cri: bool,
}

impl ScanConfig {
    /// Validates `args`: opens the root and checks every option; reads no other file.
    pub fn from_args(args: &SearchArgs, needs: Needs) -> Result<ScanConfig> {
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
        let max_read_rate = match &args.max_read_rate {
            Some(s) => match parse_size(s).context("--max-read-rate")? {
                0 => bail!("--max-read-rate: must be more than 0"),
                n => Some(n),
            },
            None => None,
        };
        let timeout = match &args.timeout {
            Some(s) => Some(parse_duration("--timeout", s, false)?),
            None => None,
        };
        let (cri, cri_timeout) = cri_choice(&args.cri, args.no_cri, &root)?;
        let layout = layout(args, needs.fixed_kubelet_dir, max_file_size);
        // Each fingerprint file and --secrets make one set: none of either leaves nothing
        // to search for without the rules.
        if args.fingerprints.is_empty() && args.secrets.is_none() && args.no_rules {
            bail!("nothing to look for: --no-rules without --fingerprints FILE or --secrets FILE");
        }
        let lock = match &args.lock {
            Some(path) => Some(RunLock { path: path.clone(), per_root: false }),
            None => default_lock(&root).map(|path| RunLock { path, per_root: true }),
        };
        Ok(ScanConfig {
            cri,
            cri_timeout,
            require_cri: args.require_cri || needs.require_cri,
            read_csi_volumes: args.read_csi_volumes,
            state: None,
            full: false,
            state_max_age: STATE_MAX_AGE,
            root,
            root_arg: args.root.clone(),
            layout,
            threads,
            chunk,
            max_file_size,
            fingerprints: args.fingerprints.clone(),
            secrets: args.secrets.clone(),
            label: args.label.clone(),
            rules: !args.no_rules,
            timeout,
            deadline: None,
            nice: args.nice,
            max_read_rate,
            verbose: args.verbose,
            quiet: args.quiet,
            lock,
            format: needs.format,
            output: args.output.clone().map(|path| crate::report::Output {
                path,
                follow_symlink: args.follow_output_symlink,
            }),
        })
    }
}

/// Where to look on the node: the given node paths, else the defaults.
fn layout(args: &SearchArgs, fixed_kubelet_dir: bool, max_file_size: Option<u64>) -> Layout {
    let or = |given: &Option<PathBuf>, default: &str| {
        node_path(given.as_deref().unwrap_or(Path::new(default)))
    };
    Layout {
        kubelet_dir: or(&args.kubelet_dir, DEFAULT_KUBELET_DIR),
        kubelet_dir_explicit: args.kubelet_dir.is_some() || fixed_kubelet_dir,
        containerd_state: or(&args.containerd_state, containerd::DEFAULT_STATE),
        containerd_root: or(&args.containerd_root, containerd::DEFAULT_ROOT),
        etcd: args.etcd.iter().map(|p| node_path(p)).collect(),
        pod_logs: or(&args.pod_log_dir, logs::DEFAULT_DIR),
        pod_logs_explicit: args.pod_log_dir.is_some(),
        containerd_root_explicit: args.containerd_root.is_some(),
        containerd_state_explicit: args.containerd_state.is_some(),
        extra: args.paths.iter().map(|p| node_path(p)).collect(),
        docker_root: args.docker_root.as_deref().map(node_path),
        containers_storage_root: args.containers_storage_root.as_deref().map(node_path),
        max_file_size,
        only: None,
    }
}

/// The report format of `--format`, with what `scan`'s `--fail-on` (the findings an
/// `npd` line counts) and `--secret-series` (Prometheus) add, and how a table is shown.
pub fn format(args: &SearchArgs, fail_on: Option<Severity>, secret_series: usize) -> Format {
    match args.format {
        ReportFormatArg::Table => Format::Table(view(&args.table, args.output.is_some())),
        ReportFormatArg::Json => Format::Json,
        ReportFormatArg::Sarif => Format::Sarif,
        ReportFormatArg::Prometheus => Format::Prometheus { secret_series },
        ReportFormatArg::Npd => Format::Npd { fail_on },
    }
}

/// How a table goes to stdout, or to `-o` (`to_file`: no terminal's width or colour).
pub fn view(args: &TableArgs, to_file: bool) -> View {
    let color = match args.color {
        ColorWhen::Auto => None,
        ColorWhen::Always => Some(true),
        ColorWhen::Never => Some(false),
    };
    let width = if to_file { None } else { crate::sys::stdout_terminal_width() };
    View::new(args.wide, color, width, |k| std::env::var(k).ok())
}

/// The most `--threads`: each thread has buffers of its own (a few MiB), and past a few
/// per core they only wait for each other; thousands of them took longer to start than a
/// small scan takes.
pub const MAX_THREADS: usize = 256;

/// The shortest `--every`: a shorter period would scan again and again without pause.
pub const MIN_EVERY: Duration = Duration::from_secs(1);

/// The value of the duration option `option`, in the one syntax every duration option
/// takes: a number and a unit, or several (`500ms`, `90s`, `30m`, `1h30m`, `2d`); where
/// `bare_seconds` (`--cri-timeout`, which always took seconds), a plain number, fractions
/// too, is seconds. Errors never repeat the value.
pub fn parse_duration(option: &str, s: &str, bare_seconds: bool) -> Result<Duration> {
    let s = s.trim();
    if bare_seconds {
        if let Ok(secs) = s.parse::<f64>() {
            return match Duration::try_from_secs_f64(secs) {
                Ok(d) => Ok(d),
                Err(_) => bail!("{option}: not a duration (like 90s, 30m, 1h)"),
            };
        }
    }
    humantime::parse_duration(s)
        .map_err(|_| anyhow::anyhow!("{option}: not a duration (like 90s, 30m, 1h)"))
}

/// `--state-max-age` when not given: a week.
pub const STATE_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);

/// `--state-max-age`: a duration of at least a second ([`STATE_MAX_AGE`] when not given).
pub fn parse_state_max_age(s: Option<&str>) -> Result<Duration> {
    s.map_or(Ok(STATE_MAX_AGE), |s| at_least_a_second("--state-max-age", s))
}

/// `--every`: a duration of at least [`MIN_EVERY`]. Errors never repeat the value.
pub fn parse_every(s: &str) -> Result<Duration> {
    at_least_a_second("--every", s)
}

/// `option`'s duration `s`, of at least [`MIN_EVERY`] (a second).
fn at_least_a_second(option: &str, s: &str) -> Result<Duration> {
    match parse_duration(option, s, false)? {
        d if d >= MIN_EVERY => Ok(d),
        _ => bail!("{option} must be at least 1s"),
    }
}

/// `--cri-timeout`: longer than zero, at most an hour (a bare number is seconds).
pub fn parse_cri_timeout(s: &str) -> Result<Duration> {
    match parse_duration("--cri-timeout", s, true)? {
        d if !d.is_zero() && d <= Duration::from_secs(3600) => Ok(d),
        _ => bail!("--cri-timeout: must be longer than zero and at most an hour"),
    }
}

/// The run lock of a run: the file, and whether it is the node root's own.
#[derive(Clone, Debug)]
pub struct RunLock {
    /// The lock file.
    pub path: PathBuf,
    /// Whether it is the default lock of this node root (`default_lock`), removed when
    /// released; `false` for the one `--lock` (`KRESIDUE_LOCK`) names, which is that file
    /// whatever the root, left in place.
    pub per_root: bool,
}

/// The run lock when none is named (`--lock`, `KRESIDUE_LOCK`): each node root has its
/// own, so runs on different roots never exclude each other and runs on the same one
/// always do. The lock is named by the root dir's device and inode ([`lock_name`]: `/`,
/// `/./`, a symlink to it and a bind mount of it are one root), in [`crate::sys::ROOT_LOCK_DIR`] as root; as another user, in `kresidue/` of
/// its own `$XDG_RUNTIME_DIR` (the dir only that user may enter, as systemd makes it), or
/// none: such a run (CI without root) has no lock to share with root's runs anyway.
fn default_lock(root: &RootDir) -> Option<PathBuf> {
    let name = lock_name(root.identity().ok()?);
    if crate::sys::is_root() {
        return Some(Path::new(crate::sys::ROOT_LOCK_DIR).join(name));
    }
    let dir = PathBuf::from(std::env::var_os("XDG_RUNTIME_DIR")?);
    dir.is_absolute().then(|| dir.join("kresidue").join(name))
}

/// The default dir of the scan state (`--state`): with `--root /`, as root.
pub const STATE_DIR: &str = "/var/lib/kresidue";

/// The scan state's file for `args` over `root`: `state-HASH` (of the root dir's device
/// and inode, as the lock's) in `--state DIR`, else in [`STATE_DIR`] as root with the root
/// `/`; none with `--no-state`, for an image, or otherwise.
pub fn state_file(args: &crate::cli::ScanArgs, root: &RootDir) -> Option<PathBuf> {
    if args.no_state || args.image.is_some() {
        return None;
    }
    let dir = match &args.state {
        Some(dir) => dir.clone(),
        None if crate::sys::is_root() && is_slash(root) => STATE_DIR.into(),
        None => return None,
    };
    let name = lock_name(root.identity().ok()?);
    Some(dir.join(name.replace("root-", "state-").trim_end_matches(".lock")))
}

/// Whether `root` is this machine's `/`.
fn is_slash(root: &RootDir) -> bool {
    use std::os::unix::fs::MetadataExt;
    let slash = std::fs::metadata("/").map(|m| (m.dev(), m.ino()));
    slash.is_ok_and(|s| root.identity().is_ok_and(|r| r == s))
}

/// The file name of the default lock of the root dir with `(device, inode)`: `root-` and
/// the first 16 hex digits of the SHA-256 of `device:inode`. Not of its path: one tree
/// reached by two paths (a bind mount of `/` at `/mnt/node`) has one lock.
fn lock_name((dev, ino): (u64, u64)) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("{dev}:{ino}").as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("root-{hex}.lock")
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
/// default sockets; with another root, the default sockets beneath it (`kubectl debug
/// node/NAME`'s `/host`), and none when none is there (a mounted node image has no
/// runtime of its own running): see [`cri::beneath`].
pub fn cri_choice(args: &CriArgs, no_cri: bool, root: &RootDir) -> Result<(cri::Choice, Duration)> {
    let timeout = parse_cri_timeout(&args.cri_timeout)?;
    let choice = match (&args.endpoint, no_cri) {
        (_, true) => cri::Choice::Disabled,
        (Some(e), false) => {
            cri::Choice::Given(cri::Endpoint::parse(e).map_err(anyhow::Error::msg)?)
        }
        (None, false) if root.path() == Path::new("/") => cri::Choice::Defaults,
        (None, false) => match cri::beneath(root) {
            found if found.is_empty() => cri::Choice::Disabled,
            found => cri::Choice::Found(found),
        },
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

#[cfg(test)]
mod tests {
    use super::*;

    /// One root, one lock, however it is spelled: `/` and `/./`, a dir and a symlink to
    /// it, a dir and `dir/../dir/`; another root, another lock.
    #[test]
    fn the_default_lock_is_the_canonical_roots() {
        let name = |p: &Path| lock_name(RootDir::open(p).unwrap().identity().unwrap());
        assert_eq!(name(Path::new("/")), name(Path::new("/./")));
        let base = tempfile::tempdir().unwrap();
        let a = base.path().join("a");
        std::fs::create_dir(&a).unwrap();
        std::os::unix::fs::symlink(&a, base.path().join("link")).unwrap();
        assert_eq!(name(&a), name(&base.path().join("link")));
        assert_eq!(name(&a), name(&base.path().join("a/../a/")));
        std::fs::create_dir(base.path().join("b")).unwrap();
        assert_ne!(name(&a), name(&base.path().join("b")));
        assert_ne!(name(&a), name(Path::new("/")));
        let n = name(&a);
        assert!(n.starts_with("root-") && n.ends_with(".lock") && n.len() == 26, "{n}");
    }
}
