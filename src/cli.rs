//! The command line, as clap derive types only (raw strings and flags; `config` validates
//! them), plus the man pages rendered from it.

use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

const EXIT_CODES: &str = "\
Exit codes:
  0  nothing found at or above --fail-on
  1  findings at or above --fail-on
  2  the job could not be done (bad arguments, unreadable root, bad fingerprint file,
     malformed kubectl JSON, malformed baseline)";

/// `--version`: the crate's version and the git commit it was built from.
pub const VERSION: &str =
    concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("KRESIDUE_COMMIT"), ")");

/// Find Kubernetes Secret residue on a node's disks.
///
/// kresidue looks for Secret values that are still on a node after the pods that used
/// them are gone (orphaned kubelet pod volumes, stale subPath copies, stale atomic-writer
/// copies) or that leaked where they never belonged. Known values are matched by
/// fingerprints that hold no plaintext; secret material nobody handed over (private keys,
/// tokens, cloud keys, kubeconfigs with credentials) is found by built-in rules. No
/// secret value is ever printed.
#[derive(Clone, Debug, Parser)]
#[command(name = "kresidue", version = VERSION, after_help = EXIT_CODES, max_term_width = 100, disable_help_subcommand = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Clone, Debug, Subcommand)]
pub enum Command {
    /// Scan a node (or a node root mounted elsewhere) for secret residue.
    #[command(after_help = EXIT_CODES)]
    Scan(Box<ScanArgs>),
    /// Turn `kubectl get secrets -A -o json` output into a fingerprint file.
    ///
    /// The file holds no plaintext: salted digests of whole values and truncated keyed
    /// hashes of 12-byte windows (see SECURITY in kresidue(1)). Values shorter than 16
    /// bytes are skipped and counted on stderr.
    #[command(after_help = EXIT_CODES)]
    Fingerprint(FingerprintArgs),
    /// List the built-in detection rules: id, severity, description.
    ///
    /// Rules find secret material by its shape (private keys, tokens, cloud keys,
    /// kubeconfigs with credentials, …) without knowing any value; `scan` runs them unless
    /// given --no-rules.
    Rules(RulesArgs),
    /// List the pods and containers the container runtime reports, over CRI.
    ///
    /// What `scan` consults for `live`: a pod is live when a sandbox with its uid exists in
    /// any state, a container when it is running or created.
    #[command(after_help = EXIT_CODES)]
    Pods(PodsArgs),
    /// Remove residue that is provably orphaned: a dry run (the plan) unless --apply.
    ///
    /// Runs the scan, then plans the removal of the secret, projected and CSI volume dirs
    /// and subPath copies of pods that have no sandbox at all in the container runtime and
    /// whose pod dir is older than --min-age, and of the pod dir once nothing but kubelet's
    /// bookkeeping remains in it; with --remove-exited-containers also the exited
    /// containers holding secrets, through CRI RemoveContainer. Nothing else is ever
    /// removed: the report says what is left and the manual step to take. See CLEANUP in
    /// kresidue(1).
    #[command(after_help = CLEAN_EXIT_CODES)]
    Clean(Box<CleanArgs>),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) to stdout.
    ///
    /// bash: `kresidue completions bash > /etc/bash_completion.d/kresidue`;
    /// zsh: into a dir on `$fpath` as `_kresidue`; fish:
    /// `kresidue completions fish > ~/.config/fish/completions/kresidue.fish`.
    Completions(CompletionsArgs),
}

/// Arguments of `kresidue completions`.
#[derive(Clone, Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

const CLEAN_EXIT_CODES: &str = "\
Exit codes:
  0  the plan was printed (dry run), or everything planned was done (--apply)
  1  some planned action was refused or failed (--apply)
  2  the job could not be done (bad arguments, unreadable root, runtime not reachable with
     --apply, no --pods with --apply, a witness that disagrees, another mount namespace,
     the lock held by another run)";

/// Arguments of `kresidue clean`.
#[derive(Clone, Debug, Args)]
pub struct CleanArgs {
    /// What to search and where (as for `scan`).
    #[command(flatten)]
    pub search: SearchArgs,

    /// Carry the plan out (without it, only print it). Needs `--pods`.
    #[arg(long)]
    pub apply: bool,

    /// The API server's list of pods, the second witness beside the runtime: what
    /// `kubectl get pods -A -o json` prints (or with `--field-selector
    /// spec.nodeName=NODE`), from a file or `-` (stdin). A pod it names is never touched,
    /// and `--apply` refuses unless the runtime has a sandbox for every pod it runs on
    /// this node. Required by `--apply`. A pod dir modified after the list was taken is
    /// never touched.
    #[arg(long, value_name = "FILE|-")]
    pub pods: Option<PathBuf>,

    /// This node's name in the API server (`spec.nodeName` of its pods) [default: the
    /// node of the listed pods the runtime has sandboxes for, else the hostname].
    #[arg(long, value_name = "NAME")]
    pub node_name: Option<String>,

    /// Write the plan to FILE (JSON `kresidue/clean-plan/v1`), for review and for
    /// `--apply --plan FILE`.
    #[arg(long, value_name = "FILE")]
    pub plan_out: Option<PathBuf>,

    /// With `--apply`: carry out only what this reviewed plan (`--plan-out`) holds. The
    /// plan is made again and every check is done again; an action not in the reviewed
    /// plan is refused.
    #[arg(long, value_name = "FILE", requires = "apply")]
    pub plan: Option<PathBuf>,

    /// Only pods whose pod dir was last modified at least this long ago (`90s`, `30m`,
    /// `1h`, `2d`).
    #[arg(long, value_name = "DURATION", default_value = "1h")]
    pub min_age: String,

    /// Append every action to this JSON-lines journal (fsynced before the action is
    /// done, and its result after). Missing dirs are made (mode 0750); a path through
    /// another user's symlink in a sticky world-writable dir is refused.
    #[arg(long, value_name = "FILE", default_value = "/var/log/kresidue/clean.jsonl")]
    pub journal: PathBuf,

    /// Also remove exited containers whose writable layer, bundle or stored spec holds
    /// secrets, through the runtime (CRI RemoveContainer).
    #[arg(long)]
    pub remove_exited_containers: bool,

    /// Testing aid: after planning, create DIR/planned and wait until DIR/go exists.
    #[arg(long, value_name = "DIR", hide = true)]
    pub apply_gate: Option<PathBuf>,
}

/// Arguments of `kresidue rules`.
#[derive(Clone, Debug, Args)]
pub struct RulesArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = FormatArg::Table)]
    pub format: FormatArg,
}

/// Arguments of `kresidue scan`.
#[derive(Clone, Debug, Args)]
pub struct ScanArgs {
    /// What to search and where (shared with `clean`).
    #[command(flatten)]
    pub search: SearchArgs,

    /// Leave out the findings of an earlier JSON report (matched by finding id).
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,

    /// Exit with 1 when a finding has at least this severity.
    #[arg(long, value_enum, value_name = "SEVERITY", default_value_t = FailOn::Low)]
    pub fail_on: FailOn,

    /// Per-secret series in the Prometheus output (`kresidue_secret_present`): at most N,
    /// the most severe kept; 0 writes none.
    #[arg(long, value_name = "N", default_value_t = 500)]
    pub secret_series: usize,

    /// Scan again every DURATION (`1h`, at least `1s`) until stopped, each report
    /// replacing the last (with -o): for a DaemonSet. A failure of a later scan is one
    /// line on stderr; the next scan still runs.
    #[arg(long, value_name = "DURATION")]
    pub every: Option<String>,

    /// Keep what each file gave in a state in DIR (made mode 0700; one file per node root,
    /// mode 0600), and take the files unchanged since the last scan from it instead of
    /// reading them again; the report is the one a full scan makes. The state holds no
    /// value, nor any piece or hash of one, nor a path [default as root with --root /:
    /// /var/lib/kresidue]
    #[arg(long, value_name = "DIR", conflicts_with_all = ["image", "no_state"])]
    pub state: Option<PathBuf>,

    /// Neither read nor write a state, not even the default one.
    #[arg(long)]
    pub no_state: bool,

    /// Read every file, whatever the state says (the state is then written anew).
    #[arg(long)]
    pub full: bool,

    /// Read again a file the state has had unchanged for longer than DURATION (each after
    /// between half of it and all of it, as its path falls, so that the reading spreads
    /// over scans): a change that no file time shows (a write through a shared memory
    /// mapping into a page already dirty) is found within DURATION [default: 7d]
    #[arg(long, value_name = "DURATION", conflicts_with_all = ["image", "no_state"])]
    pub state_max_age: Option<String>,

    /// Scan an image instead of the node, without root, a mount or a runtime: a container
    /// image archive (an OCI image layout, a directory or a tar of one, or a `docker save`
    /// tar: each layer read once, inflated as it is read; a finding's path is
    /// LAYER-DIGEST/PATH-IN-LAYER, or the config's digest, with the images holding it), or
    /// a node's disk image (raw or qcow2; GPT, MBR or one bare filesystem): each ext2/3/4
    /// or XFS filesystem scanned as a node root with every site, its paths PARTITION:/PATH
    /// when the disk has several), or a root filesystem tarball (a tar that is no image
    /// archive, plain, gzip or zstd), read in place as a node root. A gzip or zstd tar is
    /// inflated once to index it, then read from checkpoints.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["root", "paths", "every"])]
    pub image: Option<PathBuf>,
}

/// What to search for and where: the options `scan` and `clean` share.
#[derive(Clone, Debug, Args)]
pub struct SearchArgs {
    /// Root of the node's filesystem; every path is read beneath it and nothing outside
    /// it is ever read (symlinks are not followed out of it). The node's `/` mounted
    /// elsewhere (`kubectl debug node/NAME`'s `/host`) is scanned with the runtime whose
    /// socket is beneath it.
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub root: PathBuf,

    /// Fingerprint file made by `kresidue fingerprint` (repeatable).
    #[arg(long = "fingerprints", value_name = "FILE")]
    pub fingerprints: Vec<PathBuf>,

    /// Read `kubectl get secrets -A -o json` output from FILE (`-` for stdin) and keep the
    /// values in memory only; nothing is written.
    #[arg(long, value_name = "FILE|-")]
    pub secrets: Option<PathBuf>,

    /// Do not run the built-in detection rules (only fingerprints are searched).
    #[arg(long)]
    pub no_rules: bool,

    /// Also read the CSI volumes mounted in pod dirs that are not the Secrets Store CSI
    /// driver's (persistent volumes: the application's data, not read by default; never
    /// a FUSE or network filesystem).
    #[arg(long)]
    pub read_csi_volumes: bool,

    /// Label given to the values read with --secrets.
    #[arg(long, value_name = "LABEL", default_value = "current")]
    pub label: String,

    /// Output format.
    #[arg(long, value_enum, default_value_t = ReportFormatArg::Table)]
    pub format: ReportFormatArg,

    /// How the table is shown.
    #[command(flatten)]
    pub table: TableArgs,

    /// Write the report to FILE (atomically: a temporary file renamed into place; a
    /// device or FIFO such as /dev/null written to as is, a FIFO once it has a reader).
    /// A symlink is refused unless --follow-output-symlink.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Write through a symlink at -o FILE to its target (the link kept); never through
    /// another user's symlink in a sticky world-writable dir such as /tmp.
    #[arg(long, requires = "output")]
    pub follow_output_symlink: bool,

    /// Worker threads, at most 256 [default: the number of cores, at most 4].
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,

    /// Kubelet root dir, as a node path (kubelet's --root-dir) [default: learned from where
    /// the runtime's running containers mount their volumes from, else /var/lib/kubelet].
    #[arg(long, value_name = "PATH")]
    pub kubelet_dir: Option<PathBuf>,

    /// containerd root dir, as a node path (`root` in containerd's config.toml)
    /// [default: what /etc/containerd/config.toml under --root names, else
    /// /var/lib/containerd].
    #[arg(long, value_name = "PATH")]
    pub containerd_root: Option<PathBuf>,

    /// containerd state dir, as a node path (`state` in containerd's config.toml)
    /// [default: what /etc/containerd/config.toml under --root names, else
    /// /run/containerd].
    #[arg(long, value_name = "PATH")]
    pub containerd_state: Option<PathBuf>,

    /// Docker's data root, as a node path (`data-root` in Docker's daemon.json)
    /// [default: what /etc/docker/daemon.json under --root names, else /var/lib/docker].
    #[arg(long, value_name = "PATH")]
    pub docker_root: Option<PathBuf>,

    /// containers/storage's root (CRI-O's and Podman's images, layers and containers), as a
    /// node path (`graphroot` in storage.conf, `root` in crio.conf) [default: what
    /// /etc/crio/crio.conf and /etc/containers/storage.conf under --root name, else
    /// /var/lib/containers/storage].
    #[arg(long, value_name = "PATH")]
    pub containers_storage_root: Option<PathBuf>,

    /// Pod log dir, as a node path (kubelet's podLogsRootDirectory) [default: /var/log/pods].
    #[arg(long, value_name = "PATH")]
    pub pod_log_dir: Option<PathBuf>,

    /// etcd data dir or snapshot backup, as a node path (repeatable); its findings have
    /// site `etcd` [default: /var/lib/etcd when present].
    #[arg(long, value_name = "PATH")]
    pub etcd: Vec<PathBuf>,

    /// Also scan this node path (repeatable); its findings have site `other`. A site
    /// beneath it (`--path /`) is still walked and read once, as that site.
    #[arg(long = "path", value_name = "PATH")]
    pub paths: Vec<PathBuf>,

    /// How to reach the container runtime.
    #[command(flatten)]
    pub cri: CriArgs,

    /// Do not ask the container runtime which pods are alive (liveness is then unknown).
    #[arg(long, conflicts_with_all = ["endpoint", "require_cri"])]
    pub no_cri: bool,

    /// Exit with 2 when the container runtime cannot be asked.
    #[arg(long)]
    pub require_cri: bool,

    /// Print nothing but the report (no progress bar, no notes).
    #[arg(short, long)]
    pub quiet: bool,

    /// After the scan, print per-site files, bytes and time, and the priority the scan
    /// ran at, on stderr. `-vv` also prints each call to the runtime with its time, how
    /// many values and rules were searched for, each scope walked, and the entries not
    /// read because they are not regular files (symlinks, FIFOs, sockets, devices).
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,

    /// Run at the lowest CPU priority (nice 19) and in the idle I/O class, so a busy node
    /// does not notice the scan.
    #[arg(long)]
    pub nice: bool,

    /// Do not read files larger than this (`500M`, `2G`, bytes without a suffix); each is
    /// listed in the report's errors.
    #[arg(long, value_name = "SIZE")]
    pub max_file_size: Option<String>,

    /// Read at most this many bytes a second over all threads (`50M`; bytes without a
    /// suffix): bounds the scan's I/O on any disk and scheduler, where `--nice`'s idle I/O
    /// class only works under BFQ (and in part mq-deadline).
    #[arg(long, value_name = "SIZE")]
    pub max_read_rate: Option<String>,

    /// Stop reading after this long (`90s`, `10m`); the report then says it is incomplete
    /// (`summary.incomplete`) and why.
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,

    /// The run lock: one kresidue run at a time on each node root, so overlapping cron runs
    /// exit at once (exit 2, one line) instead of piling up, while runs on other roots go
    /// on. Its dir and file must be this user's or root's and writable by no one else (a
    /// lock in /run/lock or /tmp is refused: another user could hold it, and so is a path
    /// through another user's symlink in such a dir); the dir is made (mode 0700) if it
    /// alone is missing. A run that cannot create or open it runs without it, except
    /// `clean --apply`. The file named here is the lock of every run given it, whatever its
    /// root, and is left in place [default: the root's own, root-HASH.lock (HASH: of the
    /// root dir's device and inode, so a bind mount of a root is that root), removed when
    /// released; as root in /run/kresidue; as another user in $XDG_RUNTIME_DIR/kresidue,
    /// or none].
    #[arg(long, value_name = "FILE", env = "KRESIDUE_LOCK")]
    pub lock: Option<PathBuf>,

    /// Bytes read per buffer (testing aid).
    #[arg(long, value_name = "BYTES", hide = true)]
    pub chunk_size: Option<usize>,
}

/// How to reach the container runtime over CRI.
#[derive(Clone, Debug, Args)]
pub struct CriArgs {
    /// The runtime's CRI socket, `unix:///path` [default with --root /: the first of
    /// containerd's, CRI-O's and cri-dockerd's default sockets, then k3s's and RKE2's,
    /// MicroK8s's and k0s's containerd's, that exists and answers; with another
    /// root: the first of them (or their /run path) that is a socket beneath it, reached
    /// through no symlink leading out; none there (a mounted disk image): no runtime is
    /// asked].
    #[arg(long = "cri", value_name = "ENDPOINT", id = "endpoint")]
    pub endpoint: Option<String>,

    /// How long each CRI call may take, the connection included (`2s`, `500ms`; a bare
    /// number is seconds).
    #[arg(long, value_name = "DURATION", default_value = "5s")]
    pub cri_timeout: String,
}

/// Arguments of `kresidue pods`.
#[derive(Clone, Debug, Args)]
pub struct PodsArgs {
    /// Root of the node's filesystem: default sockets are looked for beneath it.
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub root: PathBuf,

    /// How to reach the container runtime.
    #[command(flatten)]
    pub cri: CriArgs,

    /// Fingerprint file made by `kresidue fingerprint` (repeatable): a name or id the
    /// runtime reports that holds one of its values is shown `<withheld>`, as one holding
    /// a built-in rule's match always is.
    #[arg(long = "fingerprints", value_name = "FILE")]
    pub fingerprints: Vec<PathBuf>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = FormatArg::Table)]
    pub format: FormatArg,

    /// How the table is shown.
    #[command(flatten)]
    pub table: TableArgs,
}

/// How a table for a person is shown.
#[derive(Clone, Debug, Args)]
pub struct TableArgs {
    /// The table with whole paths and every column, however long its lines get (it is
    /// otherwise fitted to the terminal's width, else to $COLUMNS, else to 120 columns:
    /// paths shortened relative to their owner's dir, cut with `…`).
    #[arg(long)]
    pub wide: bool,

    /// Colour in the table: `auto` on a terminal unless NO_COLOR is set, `always`, `never`.
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = ColorWhen::Auto)]
    pub color: ColorWhen,
}

/// `--color` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ColorWhen {
    /// On a terminal, unless NO_COLOR is set or TERM is dumb.
    Auto,
    /// Also into a file or a pipe.
    Always,
    /// Never.
    Never,
}

/// Arguments of `kresidue fingerprint`.
#[derive(Clone, Debug, Args)]
pub struct FingerprintArgs {
    /// kubectl JSON to read (`-` or nothing for stdin).
    #[arg(value_name = "FILE|-")]
    pub input: Option<PathBuf>,

    /// Label carried into findings (`current`, `revoked`, …).
    #[arg(long, value_name = "LABEL", default_value = "current")]
    pub label: String,

    /// Write the fingerprint file to FILE (atomically) instead of stdout. A symlink is
    /// refused unless --follow-output-symlink.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Write through a symlink at -o FILE to its target (the link kept); never through
    /// another user's symlink in a sticky world-writable dir such as /tmp.
    #[arg(long, requires = "output")]
    pub follow_output_symlink: bool,
}

/// `--format` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    /// One line per finding, for a person.
    Table,
    /// JSON.
    Json,
}

/// `--format` values of `scan` (`clean` prints a table or JSON).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ReportFormatArg {
    /// One line per finding, for a person.
    Table,
    /// JSON: `kresidue/report/v1` (`kresidue/clean/v1` for clean).
    Json,
    /// SARIF 2.1.0, for CI gates and code-scanning dashboards.
    Sarif,
    /// Prometheus text format for node_exporter's textfile collector (use with -o).
    Prometheus,
    /// One line for node-problem-detector's custom plugin monitor (exit 0 ok, 1 problem,
    /// 2 unknown).
    Npd,
}

/// `--fail-on` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
#[allow(missing_docs)]
pub enum FailOn {
    Critical,
    High,
    Medium,
    Low,
    Info,
    /// Never exit 1 because of findings.
    #[value(alias = "none")]
    Never,
}

const MAN_EXTRA: &str = r#".SH EXIT STATUS
.TP
\fB0\fR
Nothing was found at or above \fB\-\-fail\-on\fR (default \fBlow\fR).
.TP
\fB1\fR
Findings at or above \fB\-\-fail\-on\fR.
.TP
\fB2\fR
The job could not be done: bad arguments, a missing or unreadable root, a corrupt
fingerprint file, malformed kubectl JSON, a baseline that is not a kresidue report,
\fB\-\-require\-cri\fR with a runtime that cannot be asked.
One line on stderr says why.
Unreadable files during a scan do not change the exit status; they are listed in the
report's \fBerrors\fR.
With \fB\-\-format npd\fR, a scan that \fB\-\-timeout\fR stopped before it found
anything at or above \fB\-\-fail\-on\fR exits 2 (node\-problem\-detector's "unknown"),
and a run that exits 2 prints its \fBunknown:\fR line on stdout too.
.SH SITES
Under \fI<kubelet\-dir>\fR\fB/pods/\fR\fI<uid>\fR\fB/\fR:
\fBvolumes/kubernetes.io~secret/\fR\fI<vol>\fR (kubelet\-secret\-volume),
\fBvolumes/kubernetes.io~projected/\fR\fI<vol>\fR (kubelet\-projected\-volume),
\fBvolumes/kubernetes.io~csi/\fR\fI<vol>\fR\fB/mount\fR (kubelet\-csi\-volume),
\fBvolume\-subpaths/\fR\fI<vol>/<container>/<index>\fR (kubelet\-subpath),
and the rest of the pod dir (other).
Atomic\-writer volumes are reported under the names a pod sees; a superseded
timestamped directory or a leftover \fB..data_tmp\fR target is reported at its real
path and marked stale.
.SH LIVENESS
With \fB\-\-root /\fR (or \fB\-\-cri\fR), kresidue asks the container runtime over CRI
which sandboxes and containers exist. A pod is live when a sandbox with its uid exists
in any state; a container when it is running or created. A container's env at rest or
writable layer whose container is exited or gone is \fBdead\-container\fR; a secret
volume of a pod with no sandbox is \fBorphaned\-volume\fR; a live pod's subPath copy
of the value its volume holds now is \fBinfo\fR, of any other value stale. A runtime
that cannot be asked within \fB\-\-cri\-timeout\fR leaves liveness to the runtimes'
own records (Docker's \fBState.Running\fR, containers/storage's records; else
\fBlive\fR is null), \fBcri.status\fR \fBunreachable\fR and the reason in \fBerrors\fR.
\fBkresidue pods\fR lists what the runtime reports.
.SH RULES
\fBkresidue rules\fR lists the built\-in detection rules. One literal prefilter pass
per buffer finds every rule's literals; a rule's regex runs only around its literal
hits, in the same read as the fingerprints. Placeholders (documentation example keys,
\fB${VAR}\fR, \fB<...>\fR) and matches failing a rule's entropy or checksum test are
dropped. A matched JWT is decoded, never verified, and reported with its issuer,
subject, audience and expiry.
.SH SEVERITY
severity = place + (material \- high) + (1 if the label is \fBrevoked\fR), clamped to
info..critical.
Place, with the owner unknown / dead / alive: \fBnon\-tmpfs\-volume\fR
critical/(orphaned)/high, \fBorphaned\-volume\fR high/critical/info,
\fBstale\-subpath\fR medium/high/medium, \fBenv\-persisted\fR and
\fBcontainer\-layer\fR high/\fBdead\-container\fR high/medium, \fBimage\-layer\fR and
\fBpod\-log\fR high, \fBetcd\-plaintext\fR critical, \fBencrypted\-at\-rest\fR info,
\fBother\fR high/high/medium; stale copies one step lower (a datastore's as severe).
Material: a fingerprinted value high; a rule match its rule's severity; a
service\-account token critical without expiry, high before and low after it.
The same material several times in a file is one finding with a \fBcount\fR.
.SH CLEANUP
\fBkresidue clean\fR prints a plan; \fB\-\-apply\fR carries it out. Only a pod with no
sandbox at all in the runtime, that the API server's list of pods (\fB\-\-pods\fR) does
not name, whose pod dir is older than \fB\-\-min\-age\fR and has
nothing mounted below but a tmpfs exactly at a volume path, is planned: its secret,
projected and CSI volume dirs and subPath copies, then its pod dir when only kubelet's
bookkeeping remains; with \fB\-\-remove\-exited\-containers\fR exited containers holding
secrets, removed through CRI RemoveContainer. Logs, images, metadata databases and etcd
are never touched: the report lists them with the manual step to take.
With \fB\-\-apply\fR the runtime must answer and \fB\-\-pods\fR must be given, no
and a pod dir modified after it was taken is not touched; the runtime must have a
sandbox for every pod the API
server runs on this node; the process must be in the runtime's mount namespace; kubelet's
dir is \fB\-\-kubelet\-dir\fR or /var/lib/kubelet, in the dry run as in apply;
\fB\-\-plan\-out\fR writes the plan, \fB\-\-apply \-\-plan\fR carries out only what
it holds; the run lock is taken exclusively; each
pod is checked again just before acting (no sandbox, same device and inode, age, mounts);
a leftover tmpfs at a volume path is unmounted; trees are removed through directory
descriptors that neither follow symlinks nor cross mount points; each action is written
to the journal and fsynced before it is done and after. A second run has nothing to do.
.SH BASELINES
\fB\-\-baseline\fR \fIFILE\fR leaves out the findings whose \fBid\fR an earlier JSON
report lists. An id is a truncated SHA\-256 of the site, path, match kind and what
matched (for a rule, a digest of the matched secret); it holds no value and no offset.
.SH SECURITY
No secret value is ever printed: previews show at most four leading characters.
A fingerprint file holds no plaintext, no base64 of a value and no hash of a short
piece of a value that could be confirmed with certainty: a salted SHA\-256 of each
whole value, and per value four keyed hashes of 12\-byte windows truncated to 28 bits
(2^68 byte strings share each).
Values shorter than 16 bytes are not fingerprinted.
.SH EXAMPLES
.nf
kubectl get secrets \-A \-o json | kresidue fingerprint \-o cluster.fp
sudo kresidue scan \-\-fingerprints cluster.fp
kresidue scan \-\-root /mnt/node \-\-secrets secrets.json \-\-format json \-o report.json
kresidue scan \-\-root /mnt/image \-\-no\-cri \-\-baseline last.json \-\-format json
kresidue rules \-\-format json
sudo kresidue clean \-\-fingerprints cluster.fp
kubectl get pods \-A \-o json > pods.json
sudo kresidue clean \-\-fingerprints cluster.fp \-\-pods pods.json \-\-plan\-out plan.json
sudo kresidue clean \-\-fingerprints cluster.fp \-\-pods pods.json \-\-apply \-\-plan plan.json
sudo kresidue pods \-\-cri unix:///run/containerd/containerd.sock
.fi
"#;

/// Writes the completion script for `shell`. It is made in memory first: the generator
/// panics on a write error, and `out` may fail (`/dev/full`, a closed pipe).
pub fn completions(
    shell: clap_complete::Shell,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "kresidue", &mut script);
    out.write_all(&script)
}

/// The man pages, rendered from the clap definition: `(file name, roff text)`.
pub fn man_pages() -> Vec<(String, Vec<u8>)> {
    // The crate's version alone: the pages do not change with each commit.
    let cmd = Cli::command().version(env!("CARGO_PKG_VERSION"));
    let mut pages = Vec::new();
    let mut top = Vec::new();
    let man = clap_mangen::Man::new(cmd.clone()).date("2026");
    man.render_title(&mut top).expect("in-memory write");
    man.render_name_section(&mut top).expect("in-memory write");
    man.render_synopsis_section(&mut top).expect("in-memory write");
    man.render_description_section(&mut top).expect("in-memory write");
    man.render_subcommands_section(&mut top).expect("in-memory write");
    top.extend_from_slice(MAN_EXTRA.as_bytes());
    top.extend_from_slice(
        b".SH SEE ALSO\n\\fBkresidue\\-scan\\fR(1), \\fBkresidue\\-fingerprint\\fR(1), \\fBkresidue\\-rules\\fR(1), \\fBkresidue\\-pods\\fR(1), \\fBkresidue\\-clean\\fR(1), \\fBkresidue\\-completions\\fR(1)\n",
    );
    man.render_version_section(&mut top).expect("in-memory write");
    pages.push(("kresidue.1".to_owned(), top));
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let name = format!("kresidue-{}", sub.get_name());
        let sub = sub
            .clone()
            .name(name.clone())
            .version(cmd.get_version().unwrap_or_default().to_owned());
        let mut page = Vec::new();
        clap_mangen::Man::new(sub).date("2026").render(&mut page).expect("in-memory write");
        page.extend_from_slice(b".SH SEE ALSO\n\\fBkresidue\\fR(1)\n");
        pages.push((format!("{name}.1"), page));
    }
    pages
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    /// The committed man pages match the clap definition. Regenerate with
    /// `KRESIDUE_UPDATE_MAN=1 cargo test man_pages_are_up_to_date`.
    #[test]
    fn man_pages_are_up_to_date() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("man");
        for (name, text) in man_pages() {
            let path = dir.join(&name);
            if std::env::var_os("KRESIDUE_UPDATE_MAN").is_some() {
                std::fs::write(&path, &text).unwrap();
            }
            let committed = std::fs::read(&path).unwrap_or_default();
            assert!(
                committed == text,
                "man/{name} is out of date: run KRESIDUE_UPDATE_MAN=1 cargo test man_pages"
            );
        }
    }
}
