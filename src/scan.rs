//! Scan orchestration: scopes → walk → bounded streaming reads → matcher → findings.
//!
//! Files are pulled from the walk iterators by a rayon pool; each worker owns one read
//! buffer of `chunk + overlap` bytes and one hit vector, so memory is bounded by
//! `threads × (chunk + longest form)` whatever the file sizes. Consecutive buffers of a
//! file overlap by the longest searched form minus one byte, so an occurrence straddling
//! a boundary is found exactly once (see `matcher::Matcher::find`). Holes of sparse files
//! are skipped with `SEEK_DATA`; only their first and last `overlap` zeros are searched,
//! so a binary value that begins or ends with zeros is still found at a hole's edge.

use crate::finding::{
    rank, Category, ContainerRef, Encoding, Finding, MatchInfo, MatchKind, Material, PodRef,
    Preview, ScanError, Severity, SiteId, UnreadMount, Within,
};
use crate::matcher::{Hit, Matcher};
use crate::node::io_message;
use crate::node::logs::{Extractor, HEAD_MAX};
use crate::report;
use crate::rules::{KeyMarks, RuleHit, Rules};
use crate::severity::place;
use crate::sites::{self, Layout, Reading};
use crate::sys::{self, RootDir};
use crate::walk::{self, FileJob, WalkItem};
use rayon::prelude::*;
use std::collections::{BTreeMap, HashSet};
use std::io::{Read, Seek};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Default number of new bytes read per buffer.
pub const DEFAULT_CHUNK: usize = 1 << 20;

/// What a scan needs, validated.
#[derive(Debug)]
pub struct ScanSettings {
    /// Where on the node to look.
    pub layout: Layout,
    /// Worker threads.
    pub threads: usize,
    /// New bytes per read buffer.
    pub chunk: usize,
    /// Files larger than this are not read (each is listed in `errors`).
    pub max_file_size: Option<u64>,
    /// When reading stops: files not yet read then are not read, and the result is marked
    /// incomplete.
    pub deadline: Option<Instant>,
}

/// What a scan found.
#[derive(Debug, Default)]
pub struct ScanResult {
    /// Findings, sorted.
    pub findings: Vec<Finding>,
    /// Unreadable paths, sorted.
    pub errors: Vec<ScanError>,
    /// Regular files read.
    pub files: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Per site: files, bytes and the time spent reading and searching them (summed
    /// over threads).
    pub sites: BTreeMap<SiteId, SiteStats>,
    /// The deadline passed before everything was read.
    pub incomplete: bool,
    /// The node paths of the subtrees to walk, in walk order (with `--timeout` or a stop
    /// signal, the later ones may not have been walked).
    pub scopes: Vec<String>,
    /// Entries not read because they are not regular files, by kind (see
    /// [`WalkItem::Skipped`]).
    pub skipped: BTreeMap<&'static str, u64>,
    /// Mount points not read, sorted (see [`crate::walk`]).
    pub unread_mounts: Vec<UnreadMount>,
}

/// What a scan read at one site.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SiteStats {
    /// Files read.
    pub files: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Time spent on them, summed over threads.
    pub busy: Duration,
}

/// Where a scan reports each file it has read (a progress bar; `()` for nothing).
pub trait Progress: Sync {
    /// A file of `site` was read: `bytes` bytes.
    fn file(&self, site: SiteId, bytes: u64);
}

impl Progress for () {
    fn file(&self, _: SiteId, _: u64) {}
}

/// What to look for: known values and rules. Both are read-only and shared by workers.
pub struct Searchers<'a> {
    /// Compiled fingerprints.
    pub matcher: &'a Matcher,
    /// Compiled rules.
    pub rules: &'a Rules,
}

impl Searchers<'_> {
    /// Bytes consecutive buffers of a file must share.
    fn overlap(&self) -> usize {
        self.matcher.max_len().saturating_sub(1).max(self.rules.overlap())
    }
}

/// What a walk running on a thread of its own shares with the scan reading its files.
#[derive(Debug, Default)]
struct WalkControl {
    /// Set by the scan: the walk stops (the readers are late, or gone).
    stop: AtomicBool,
    /// Set by the walk: it stopped at the deadline or a signal.
    late: AtomicBool,
    /// The scan's deadline, set when the scan starts.
    deadline: std::sync::OnceLock<Option<Instant>>,
}

/// A walk started: the node's scopes are found, then walked, on a thread of its own,
/// ahead of the readers by up to `WALK_AHEAD` batches. It may start before the
/// fingerprints are loaded and the matcher is built (see `ScanConfig::from_args`): the
/// first batches are then ready when the readers start.
#[derive(Debug)]
pub struct Walking {
    found: std::sync::mpsc::Receiver<(Vec<String>, Vec<ScanError>)>,
    batches: std::sync::mpsc::Receiver<Vec<WalkItem>>,
    control: std::sync::Arc<WalkControl>,
    thread: std::thread::JoinHandle<()>,
}

impl Walking {
    /// Starts finding the scopes `layout` names under `root`, and walking them.
    pub fn start(root: RootDir, layout: Layout) -> Walking {
        Walking::start_with(root, layout, false)
    }

    /// [`Walking::start`]; `read_csi_volumes`: CSI volumes other than the Secrets Store
    /// driver's are read too (`--read-csi-volumes`).
    pub fn start_with(root: RootDir, layout: Layout, read_csi_volumes: bool) -> Walking {
        let (found_tx, found) = std::sync::mpsc::sync_channel(1);
        let (tx, batches) = std::sync::mpsc::sync_channel(WALK_AHEAD);
        let control = std::sync::Arc::new(WalkControl::default());
        let c = control.clone();
        let thread = std::thread::spawn(move || {
            let mut errors = Vec::new();
            let scopes = sites::discover(&root, &layout, &mut errors);
            let walked =
                scopes.iter().map(|s| report::display_path(s.node_path.as_os_str())).collect();
            if found_tx.send((walked, errors)).is_err() {
                return;
            }
            let on_time = || {
                let on_time = !c.stop.load(Ordering::Relaxed)
                    && c.deadline.get().copied().flatten().is_none_or(|d| Instant::now() < d)
                    && sys::stop_signal().is_none();
                if !on_time {
                    c.late.store(true, Ordering::Relaxed);
                }
                on_time
            };
            // The mount table is read once for the scan, when first needed.
            let crossings = walk::Crossings::new(root.clone(), read_csi_volumes);
            let walk = scopes.into_iter().flat_map(|s| walk::walk_scope(&root, s, &crossings));
            let mut batch = Vec::with_capacity(WALK_BATCH);
            for item in walk.take_while(|_| on_time()) {
                batch.push(item);
                // The scan is gone (it failed, or the walk was started for a layout the
                // runtime then corrected): the walk stops too.
                if batch.len() == WALK_BATCH
                    && tx
                        .send(std::mem::replace(&mut batch, Vec::with_capacity(WALK_BATCH)))
                        .is_err()
                {
                    return;
                }
            }
            let _ = tx.send(batch);
        });
        Walking { found, batches, control, thread }
    }

    /// Stops the walk and waits for its thread (a walk not to be scanned after all).
    pub fn cancel(self) {
        self.control.stop.store(true, Ordering::Relaxed);
        drop((self.found, self.batches));
        let _ = self.thread.join();
    }
}

/// Scans the files `walking` lists, telling `progress` of each file read.
pub fn scan(
    settings: &ScanSettings,
    walking: Walking,
    searchers: &Searchers<'_>,
    progress: &dyn Progress,
) -> anyhow::Result<ScanResult> {
    let Walking { found, batches: rx, control, thread } = walking;
    let _ = control.deadline.set(settings.deadline);
    let Ok((walked, errors)) = found.recv() else {
        // The walk's thread ended without a word: it panicked, and so does the scan.
        match thread.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => anyhow::bail!("the walk ended before it began"),
        }
    };
    let skipped = Mutex::new(BTreeMap::new());
    let unread = Mutex::new(Vec::new());
    let findings = Mutex::new(Vec::new());
    let errors = Mutex::new(errors);
    let files = AtomicU64::new(0);
    let bytes = AtomicU64::new(0);
    let sites = Mutex::new(BTreeMap::<SiteId, SiteStats>::new());
    let late = AtomicBool::new(false);
    let in_time = || {
        let on_time =
            settings.deadline.is_none_or(|d| Instant::now() < d) && sys::stop_signal().is_none();
        if !on_time {
            late.store(true, Ordering::Relaxed);
            control.stop.store(true, Ordering::Relaxed);
        }
        on_time
    };
    let seen = Mutex::new(Seen::default());
    let pool = rayon::ThreadPoolBuilder::new().num_threads(settings.threads).build()?;
    pool.install(|| {
        rx.into_iter().par_bridge().for_each_init(
            || Worker::new(settings, searchers.overlap()),
            |w, batch: Vec<WalkItem>| {
                let mut named = w.check_names(&batch, searchers, &seen);
                if !named.is_empty() {
                    findings.lock().expect("lock").append(&mut named);
                }
                for item in batch {
                    match item {
                        WalkItem::Error(e) => errors.lock().expect("lock").push(e),
                        WalkItem::Skipped(kind) => {
                            *skipped.lock().expect("lock").entry(kind).or_insert(0) += 1;
                        }
                        WalkItem::Unread(m) => unread.lock().expect("lock").push(m),
                        // Listed before the deadline or a signal, not yet read: left
                        // alone (what the walk could not list is still reported).
                        WalkItem::File(_) if !in_time() => {}
                        WalkItem::File(job) => {
                            let started = Instant::now();
                            let result = w.scan_file(&job, searchers, &seen);
                            if let Some(m) = w.unread.take() {
                                unread.lock().expect("lock").push(m);
                            }
                            if std::mem::take(&mut w.timed_out) {
                                late.store(true, Ordering::Relaxed);
                            }
                            match result {
                                Ok(Some((n, mut found))) => {
                                    files.fetch_add(1, Ordering::Relaxed);
                                    bytes.fetch_add(n, Ordering::Relaxed);
                                    let mut sites = sites.lock().expect("lock");
                                    let site = sites.entry(job.site).or_default();
                                    site.files += 1;
                                    site.bytes += n;
                                    site.busy += started.elapsed();
                                    drop(sites);
                                    progress.file(job.site, n);
                                    if !found.is_empty() {
                                        findings.lock().expect("lock").append(&mut found);
                                    }
                                    for error in w.file_errors.drain(..) {
                                        let path = job.node_path();
                                        errors
                                            .lock()
                                            .expect("lock")
                                            .push(ScanError { path, error });
                                    }
                                    if std::mem::take(&mut w.rules_incomplete) {
                                        errors.lock().expect("lock").push(ScanError {
                                            path: job.node_path(),
                                            error: RULES_INCOMPLETE.to_owned(),
                                        });
                                    }
                                }
                                Ok(None) => {}
                                Err(error) => errors
                                    .lock()
                                    .expect("lock")
                                    .push(ScanError { path: job.node_path(), error }),
                            }
                        }
                    }
                }
            },
        )
    });
    // The readers drained the walk to its end (or they stopped it).
    if let Err(panic) = thread.join() {
        std::panic::resume_unwind(panic);
    }
    if control.late.load(Ordering::Relaxed) {
        late.store(true, Ordering::Relaxed);
    }
    let mut findings = findings.into_inner().expect("lock");
    findings.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    let mut errors = errors.into_inner().expect("lock");
    // The walk made some of these paths text before the names in them were matched.
    for e in &mut errors {
        e.path = report::redisplay(&e.path);
    }
    let walked = walked.iter().map(|s| report::redisplay(s)).collect();
    errors.sort();
    errors.dedup();
    let mut unread_mounts = unread.into_inner().expect("lock");
    unread_mounts.sort();
    unread_mounts.dedup();
    Ok(ScanResult {
        findings,
        errors,
        files: files.into_inner(),
        bytes: bytes.into_inner(),
        sites: sites.into_inner().expect("lock"),
        incomplete: late.into_inner(),
        scopes: walked,
        skipped: skipped.into_inner().expect("lock"),
        unread_mounts,
    })
}

/// Batches of walk entries listed ahead of the readers, at most: enough that a reader never
/// waits for a directory listing, few enough to stay small (a few hundred bytes an entry).
const WALK_AHEAD: usize = 128;
/// Walk entries handed over at a time: one handover (and wake-up) per entry cost more than
/// the reading of a small file.
const WALK_BATCH: usize = 16;

/// The `errors` entry of a file in which a rule ran out of its work budget.
const RULES_INCOMPLETE: &str = "too many candidate matches for a rule (a flood of its \
    literal); parts of the file were not checked by that rule";

/// The files already read, by (device, inode), so that a file reached by two paths (a
/// hard link, a bind mount, an overlapping `--path`) is read once. 8 bytes a file: the
/// device as its index among those met (a node has one per tmpfs volume: hundreds) above
/// an inode of up to 48 bits (ext4's are 32); 16 bytes for anything else.
#[derive(Debug, Default)]
struct Seen {
    devices: std::collections::HashMap<u64, usize>,
    packed: HashSet<u64>,
    other: HashSet<(u64, u64)>,
    /// The directories (paths from the root) whose names were reported as findings: each
    /// once, whichever worker meets it first.
    named_dirs: HashSet<Vec<u8>>,
}

impl Seen {
    /// Records a file; false when it was recorded before.
    fn insert(&mut self, dev: u64, ino: u64) -> bool {
        let next = self.devices.len();
        let d = *self.devices.entry(dev).or_insert(next);
        if d < 1 << 16 && ino < 1 << 48 {
            self.packed.insert((d as u64) << 48 | ino)
        } else {
            self.other.insert((dev, ino))
        }
    }
}

/// Per-thread state: the read buffer and hit scratch.
struct Worker {
    buf: Vec<u8>,
    chunk: usize,
    overlap: usize,
    hits: Vec<Hit>,
    rule_hits: Vec<RuleHit>,
    /// Where the matcher's pass marked that a rule's key may start.
    key_marks: KeyMarks,
    /// Set when a rule skipped literal hits in the current file.
    rules_incomplete: bool,
    /// Problems with parts of the current file that did not stop its search.
    file_errors: Vec<String>,
    /// A pod log's raw bytes before its content is extracted into `buf` (allocated with
    /// the first log).
    raw: Vec<u8>,
    /// Files larger than this are not read.
    max_file_size: Option<u64>,
    /// When reading stops.
    deadline: Option<Instant>,
    /// Set when the deadline cut the current file short.
    timed_out: bool,
    /// The names checked last (see [`Worker::check_names`]).
    names: Names,
    /// Set when the current file is a mount point not read.
    unread: Option<UnreadMount>,
}

/// A worker's state for matching names: the directory whose names it checked last, the
/// names of a batch of files joined (each followed by a `/`, which no name holds; a
/// printable separator keeps the joined names one run of text for the matcher), where
/// each is, and hit scratch.
#[derive(Default)]
struct Names {
    dir: Vec<u8>,
    text: Vec<u8>,
    spans: Vec<NameSpan>,
    hits: Vec<Hit>,
    rule_hits: Vec<RuleHit>,
}

/// One name in [`Names::text`]: of the batch's `job`-th item, at `start..end`; a
/// directory's name has the length of the directory's path from the root (`dir_end`).
#[derive(Clone, Copy)]
struct NameSpan {
    job: usize,
    start: usize,
    end: usize,
    dir_end: Option<usize>,
}

/// The note of a finding in a name.
const IN_NAME: &str = "in the name of this file or directory: the path shows that name \
    withheld";

/// Finds secret material in a short text (names, a claim): fingerprinted forms into
/// `hits`, rule matches into `rule_hits`; true when there is any.
fn screen(
    searchers: &Searchers<'_>,
    text: &[u8],
    hits: &mut Vec<Hit>,
    rule_hits: &mut Vec<RuleHit>,
) -> bool {
    hits.clear();
    rule_hits.clear();
    if !searchers.matcher.is_empty() {
        searchers.matcher.find(text, 0, 0, hits);
    }
    if !searchers.rules.is_empty() {
        let _complete = searchers.rules.find(text, 0, 0, true, rule_hits);
    }
    !hits.is_empty() || !rule_hits.is_empty()
}

impl Worker {
    /// Matches the names on the paths of a batch of files: each file's own, and the
    /// directories' above it that this worker has not checked yet (the walk lists a
    /// directory's files together, so each directory is checked about once). The names are
    /// searched joined, in one pass of the matcher and of the rules (a pass per name would
    /// cost more than reading a small file); a match running into the next name is none.
    /// What matches is withheld from every path shown from now on ([`report::withhold`]),
    /// before any file of the batch is read, and is a finding at the path of its name
    /// (`"in": "name"`; a directory's once a scan). Names come from the walk: nothing is
    /// read again.
    fn check_names(
        &mut self,
        batch: &[WalkItem],
        searchers: &Searchers<'_>,
        seen: &Mutex<Seen>,
    ) -> Vec<Finding> {
        let mut names = std::mem::take(&mut self.names);
        names.text.clear();
        names.spans.clear();
        for (i, item) in batch.iter().enumerate() {
            let WalkItem::File(job) = item else { continue };
            let rel = job.rel.as_os_str().as_bytes();
            let (dir, name) = match memchr::memrchr(b'/', rel) {
                Some(at) => (&rel[..at], &rel[at + 1..]),
                None => (&rel[..0], rel),
            };
            let add = |names: &mut Names, text: &[u8], dir_end| {
                let start = names.text.len();
                names.text.extend_from_slice(text);
                names.spans.push(NameSpan { job: i, start, end: names.text.len(), dir_end });
                names.text.push(b'/');
            };
            if dir != names.dir.as_slice() {
                // The components shared with the directory checked last were checked then.
                let mut at = 0;
                for (a, b) in dir.split(|&c| c == b'/').zip(names.dir.split(|&c| c == b'/')) {
                    if a != b {
                        break;
                    }
                    at += a.len() + 1;
                }
                while at < dir.len() {
                    let end = memchr::memchr(b'/', &dir[at..]).map_or(dir.len(), |n| at + n);
                    add(&mut names, &dir[at..end], Some(end));
                    at = end + 1;
                }
                names.dir.clear();
                names.dir.extend_from_slice(dir);
            }
            add(&mut names, name, None);
        }
        let mut found = Vec::new();
        if screen(searchers, &names.text, &mut names.hits, &mut names.rule_hits) {
            let mut by_span: BTreeMap<usize, (Vec<Hit>, Vec<RuleHit>)> = BTreeMap::new();
            let span_of = |offset: u64, len: u64| {
                let i = names.spans.partition_point(|s| s.start as u64 <= offset).checked_sub(1)?;
                let s = names.spans[i];
                (offset + len <= s.end as u64).then_some((i, s.start as u64))
            };
            for h in &names.hits {
                if let Some((i, start)) = span_of(h.offset, h.len as u64) {
                    by_span.entry(i).or_default().0.push(Hit { offset: h.offset - start, ..*h });
                }
            }
            for h in &names.rule_hits {
                if let Some((i, start)) = span_of(h.offset, h.len as u64) {
                    let hit = RuleHit { offset: h.offset - start, ..h.clone() };
                    by_span.entry(i).or_default().1.push(hit);
                }
            }
            for (i, (hits, rule_hits)) in by_span {
                let span = names.spans[i];
                let WalkItem::File(job) = &batch[span.job] else { continue };
                let name = &names.text[span.start..span.end];
                let rel = job.rel.as_os_str().as_bytes();
                let path = match span.dir_end {
                    None => report::path_bytes(&job.node_path()),
                    Some(end) => {
                        if !seen.lock().expect("lock").named_dirs.insert(rel[..end].to_vec()) {
                            continue;
                        }
                        dir_path(job, &rel[..end], name)
                    }
                };
                let named = name_findings(job, searchers, (&hits, &rule_hits), name, &path);
                found.extend(aggregate(named));
            }
        }
        self.names = names;
        found
    }
}

/// The node path of the directory at `rel` (from the root) above `job`'s file, whose name
/// is `name`: cut from the file's node path (which shows the names a person sees) before
/// `name` is withheld; else the path from the root.
fn dir_path(job: &FileJob, rel: &[u8], name: &[u8]) -> Vec<u8> {
    let shown = report::path_bytes(&job.node_path());
    let mut end = 0;
    for component in shown.split(|&c| c == b'/') {
        end += component.len();
        if component == name {
            return shown[..end].to_vec();
        }
        end += 1;
    }
    [b"/", rel].concat()
}

/// The findings of `hits` in `name` (offsets in it), the last name of `path` (node path
/// bytes, not yet withheld): what matched is withheld first, then the findings are made
/// at `path` as it is shown now.
fn name_findings(
    job: &FileJob,
    searchers: &Searchers<'_>,
    (hits, rule_hits): (&[Hit], &[RuleHit]),
    name: &[u8],
    path: &[u8],
) -> Vec<Finding> {
    let at = |offset: u64, len: u64| &name[offset as usize..(offset + len) as usize];
    for h in hits {
        report::withhold::withhold(at(h.offset, h.len as u64));
    }
    for h in rule_hits {
        report::withhold::withhold(at(h.offset, h.len as u64));
    }
    let path = report::display_path(std::ffi::OsStr::from_bytes(path));
    let on_tmpfs = || job.open().is_ok_and(|f| sys::is_tmpfs(&f.0));
    let place = place(category(job, on_tmpfs), job.stale, None);
    let in_name = |mut f: Finding, secret: &[u8]| {
        f.path.clone_from(&path);
        f.within = Within::Name;
        f.note = Some(IN_NAME);
        f.id = Finding::refine_id(&Finding::make_id(job.site, &path, &f.matched, secret), "name");
        f
    };
    let mut found = Vec::new();
    for h in hits {
        let f = lift(job, searchers.matcher, h, place, at(h.offset, h.len as u64));
        found.push(in_name(f, &[]));
    }
    for h in rule_hits {
        let secret = at(h.offset + u64::from(h.secret.start), h.secret.len() as u64);
        let f = lift_rule(job, searchers, h.clone(), place, secret);
        found.push(in_name(f, secret));
    }
    found
}

impl Worker {
    fn new(settings: &ScanSettings, overlap: usize) -> Worker {
        let chunk = settings.chunk;
        // The carry plus either a chunk or the zeros standing for a hole (and, for a log's
        // content, the start of a line held back from the chunk before).
        Worker {
            buf: vec![0; chunk.max(overlap) + overlap + HEAD_MAX],
            chunk,
            overlap,
            hits: Vec::new(),
            rule_hits: Vec::new(),
            key_marks: KeyMarks::default(),
            rules_incomplete: false,
            file_errors: Vec::new(),
            raw: Vec::new(),
            max_file_size: settings.max_file_size,
            deadline: settings.deadline,
            timed_out: false,
            names: Names::default(),
            unread: None,
        }
    }

    /// Lists, in the file's errors, that it is now shorter than the `size` it had when
    /// opened (it was truncated while read): its end could not be read.
    fn note_shrunk(&mut self, f: &std::fs::File, size: u64) {
        if let Some(now) = f.metadata().ok().map(|m| m.len()).filter(|&now| now < size) {
            self.file_errors.push(format!(
                "shrank from {size} to {now} bytes while read: what was cut off was not read"
            ));
        }
    }

    /// Reads one file and returns (bytes read, findings); `None` if the file was already
    /// read under another name (hard link, overlapping `--path`). Errors are messages for
    /// the report's `errors` list.
    fn scan_file(
        &mut self,
        job: &FileJob,
        searchers: &Searchers<'_>,
        seen: &Mutex<Seen>,
    ) -> Result<Option<(u64, Vec<Finding>)>, String> {
        self.rules_incomplete = false;
        self.file_errors.clear();
        let (mut f, ino) = match job.open() {
            Ok(opened) => opened,
            Err(walk::Unopened::Io(e)) => return Err(io_message(&e)),
            Err(walk::Unopened::Mount(m)) => {
                self.unread = Some(m);
                return Ok(None);
            }
        };
        let md = f.metadata().map_err(|e| io_message(&e))?;
        if !md.is_file() {
            return Err("not a regular file (changed during the scan); not read".to_owned());
        }
        if md.ino() != ino {
            return Err("replaced during the scan; not read".to_owned());
        }
        if !seen.lock().expect("lock").insert(md.dev(), md.ino()) {
            return Ok(None);
        }
        // Liveness is applied to the findings once all are made (see `judge`).
        let place = place(category(job, || sys::is_tmpfs(&f)), job.stale, None);
        let size = md.len();
        if let Some(max) = self.max_file_size.filter(|&max| size > max) {
            return Err(format!("{size} bytes, more than --max-file-size {max}; not read"));
        }
        if size > SEQUENTIAL_FROM {
            sys::read_sequentially(&f);
        }
        // A sparse log (truncated while a writer kept its offset) is streamed raw below,
        // its holes skipped, rather than read zero by zero as content.
        // A file with a block allocated for every byte has no hole: only the others are
        // asked where their data is (two `lseek`s a file otherwise; some filesystems
        // allocate fewer blocks than they hold bytes, compressed or inline, and are asked).
        let sparse = md.blocks().saturating_mul(512) < size;
        match sites::site(job.site).reading(job.site) {
            Reading::LogContent if !(sparse && sys::has_hole(&f, size)) => {
                return self.scan_log(&mut f, size, job, searchers, place).map(Some);
            }
            Reading::Whole { cap } if size <= cap => {
                return self.scan_whole(&mut f, size, job, searchers, place).map(Some);
            }
            _ => {}
        }
        let mut findings = Vec::new();
        let mut carry = 0usize;
        let mut ended = false;
        let mut pos = 0u64; // absolute offset of the next byte to read
        let mut total = 0u64;
        // The file is read up to the size it had when opened: one that grows while it is
        // read (a container writing a log as fast as it is scanned) would never end.
        loop {
            // `None`: no data after `pos` before that size (the rest is a hole, or the
            // file shrank).
            let next =
                if sparse { sys::next_data(&f, pos) } else { Some(pos) }.filter(|&d| d < size);
            if next.is_none() && pos < size {
                self.note_shrunk(&f, size);
            }
            // Reads stop at `size`, so `pos <= size` throughout.
            let data = next.unwrap_or(size);
            if data > pos {
                // A hole [pos, data) reads as zeros, and a binary value may begin or end
                // with zeros: search the first `overlap` zeros as if read, after which
                // the carry (all zeros) stands for the hole's last bytes.
                let z = (data - pos).min(self.overlap as u64) as usize;
                self.buf[carry..carry + z].fill(0);
                let at = Span { carry, len: carry + z, pos, last: false };
                self.search(job, searchers, place, at, &mut findings);
                carry = self.keep(carry + z);
                pos = data;
            }
            if next.is_none() {
                break;
            }
            if sys::stop_signal().is_some() {
                break;
            }
            if self.deadline.is_some_and(|d| Instant::now() >= d) {
                self.timed_out = true;
                self.file_errors
                    .push(format!("read up to byte {pos} only: the scan's --timeout passed"));
                break;
            }
            let want = self.chunk.min(usize::try_from(size - pos).unwrap_or(usize::MAX));
            let n = read_full(&mut f, &mut self.buf[carry..carry + want])
                .map_err(|e| io_message(&e))?;
            if n == 0 {
                self.note_shrunk(&f, size);
                break;
            }
            // The buffer that reaches the size the file had when opened is its end: its
            // rule hits are taken with windows clipped there (most files fit one buffer).
            ended = pos + n as u64 == size;
            let at = Span { carry, len: carry + n, pos, last: ended };
            self.search(job, searchers, place, at, &mut findings);
            pos += n as u64;
            total += n as u64;
            if ended {
                break;
            }
            carry = self.keep(carry + n);
        }
        if !ended {
            // Rule hits whose window ran past the last buffer's end were left for a next
            // buffer; the file ended, so they are taken from the carry, clipped at the end.
            let at = Span { carry, len: carry, pos, last: true };
            self.search(job, searchers, place, at, &mut findings);
        }
        Ok(Some((total, aggregate(findings))))
    }
}

impl Worker {
    /// Reads a file of at most its site's cap whole, searches it, and has its site
    /// attribute the matches ([`crate::sites::Site::attribute_whole`]).
    fn scan_whole(
        &mut self,
        f: &mut std::fs::File,
        size: u64,
        job: &FileJob,
        searchers: &Searchers<'_>,
        place: (Category, Severity),
    ) -> Result<(u64, Vec<Finding>), String> {
        let mut data = Vec::new();
        f.by_ref().take(size).read_to_end(&mut data).map_err(|e| io_message(&e))?;
        let n = data.len();
        if (n as u64) < size {
            self.note_shrunk(f, size);
        }
        let (data, mut raw) = self.search_bytes(data, job, searchers, place);
        self.file_errors.extend(sites::site(job.site).attribute_whole(job.site, &data, &mut raw));
        Ok((n as u64, aggregate(raw)))
    }
}

impl Worker {
    /// Searches `data` as a whole file; returns it, and the (not yet aggregated) findings.
    fn search_bytes(
        &mut self,
        data: Vec<u8>,
        job: &FileJob,
        searchers: &Searchers<'_>,
        place: (Category, Severity),
    ) -> (Vec<u8>, Vec<Finding>) {
        let n = data.len();
        let mut raw = Vec::new();
        // The file is the buffer, searched as one, to its end.
        let saved = std::mem::replace(&mut self.buf, data);
        let whole = Span { carry: 0, len: n, pos: 0, last: true };
        self.search(job, searchers, place, whole, &mut raw);
        (std::mem::replace(&mut self.buf, saved), raw)
    }

    /// Searches a pod log as its content (see [`crate::node::logs`]), streamed through
    /// the same buffers as any file: partial lines joined, offsets mapped back to the file
    /// (for a `.gz` file, to its decompressed bytes). A compressed log is decompressed
    /// while read, at most [`MAX_GZ_LOG`] bytes of it (a decompression bomb costs no more);
    /// what lies past that is an `errors` entry.
    fn scan_log(
        &mut self,
        f: &mut std::fs::File,
        size: u64,
        job: &FileJob,
        searchers: &Searchers<'_>,
        place: (Category, Severity),
    ) -> Result<(u64, Vec<Finding>), String> {
        // A `.gz` name on a file that is not gzip (no magic number): searched as it is.
        let mut magic = [0u8; 2];
        let gz = job.rel.extension().is_some_and(|e| e == "gz")
            && f.read_exact(&mut magic).is_ok()
            && magic == [0x1f, 0x8b];
        f.rewind().map_err(|e| io_message(&e))?;
        if !gz {
            // Read up to its size when opened, like any file.
            let (n, findings, error) =
                self.stream_log(&mut f.by_ref().take(size), None, job, searchers, place);
            if let Some(e) = error {
                return Err(io_message(&e));
            }
            if n < size {
                self.note_shrunk(f, size);
            }
            return Ok((n, findings));
        }
        let mut z = flate2::read::MultiGzDecoder::new(&mut *f);
        let (n, findings, error) = self.stream_log(&mut z, Some(MAX_GZ_LOG), job, searchers, place);
        match error {
            // Damaged from the start: nothing inflates, so the bytes are searched as they are.
            Some(e) if n == 0 => {
                f.rewind().map_err(|e| io_message(&e))?;
                let (n, findings, error) =
                    self.stream_log(&mut f.by_ref().take(size), None, job, searchers, place);
                if let Some(e) = error {
                    return Err(io_message(&e));
                }
                self.file_errors.push(format!("gzip: {}; searched as it is", io_message(&e)));
                Ok((n, findings))
            }
            // Damaged or cut further on: what inflated is searched.
            Some(e) => {
                self.file_errors
                    .push(format!("gzip: {}; the rest was not searched", io_message(&e)));
                Ok((n, findings))
            }
            None => Ok((n, findings)),
        }
    }

    /// Streams a log's bytes from `log` (at most `cap` of them) through an
    /// [`Extractor`] and searches its content: (bytes read, findings with file offsets,
    /// the read error that ended it early).
    fn stream_log(
        &mut self,
        log: &mut dyn Read,
        cap: Option<u64>,
        job: &FileJob,
        searchers: &Searchers<'_>,
        place: (Category, Severity),
    ) -> (u64, Vec<Finding>, Option<std::io::Error>) {
        let mut ex = Extractor::default();
        let mut raw = std::mem::take(&mut self.raw);
        raw.resize(self.chunk, 0);
        let mut findings = Vec::new();
        let (mut carry, mut cpos, mut total) = (0usize, 0u64, 0u64);
        let mut error = None;
        let mut ended = false;
        while !ended {
            if sys::stop_signal().is_some() {
                break;
            }
            if self.deadline.is_some_and(|d| Instant::now() >= d) {
                self.timed_out = true;
                self.file_errors
                    .push(format!("read up to byte {total} only: the scan's --timeout passed"));
                break;
            }
            let want = match cap {
                Some(cap) => raw.len().min(usize::try_from(cap + 1 - total).unwrap_or(usize::MAX)),
                None => raw.len(),
            };
            // What was read before an error (a cut or damaged gzip stream) is searched too.
            let mut n = 0;
            while n < want {
                match log.read(&mut raw[n..want]) {
                    Ok(0) => break,
                    Ok(k) => n += k,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        error = Some(e);
                        ended = true;
                        break;
                    }
                }
            }
            if let Some(cap) = cap.filter(|&cap| total + n as u64 > cap) {
                n = (cap - total) as usize;
                self.file_errors.push(format!(
                    "decompresses to more than {} MiB; the rest was not searched",
                    cap >> 20
                ));
                ended = true;
            }
            if n == 0 {
                break;
            }
            total += n as u64;
            let w = ex.feed(&raw[..n], &mut self.buf[carry..]);
            carry = self.search_content(
                &ex,
                (carry, w, &mut cpos),
                job,
                searchers,
                place,
                &mut findings,
            );
            ex.forget_before(cpos - carry as u64);
        }
        // The last line, if it has no newline, then the end of the content.
        let w = ex.finish(&mut self.buf[carry..]);
        carry =
            self.search_content(&ex, (carry, w, &mut cpos), job, searchers, place, &mut findings);
        let before = findings.len();
        self.search(
            job,
            searchers,
            place,
            Span { carry, len: carry, pos: cpos, last: true },
            &mut findings,
        );
        for f in &mut findings[before..] {
            f.offset = ex.file_offset(f.offset);
        }
        self.raw = raw;
        (total, aggregate(findings), error)
    }

    /// Searches `w` new content bytes after a carry of `carry` (content offset `*cpos`),
    /// maps the findings' offsets back to the file, advances `*cpos`; the new carry.
    fn search_content(
        &mut self,
        ex: &Extractor,
        (carry, w, cpos): (usize, usize, &mut u64),
        job: &FileJob,
        searchers: &Searchers<'_>,
        place: (Category, Severity),
        findings: &mut Vec<Finding>,
    ) -> usize {
        if w == 0 {
            return carry;
        }
        let before = findings.len();
        let at = Span { carry, len: carry + w, pos: *cpos, last: false };
        self.search(job, searchers, place, at, findings);
        for f in &mut findings[before..] {
            f.offset = ex.file_offset(f.offset);
        }
        *cpos += w as u64;
        self.keep(carry + w)
    }
}

/// Files larger than this are announced to the kernel as read sequentially (a larger
/// read-ahead from a cold disk); smaller ones fit its default read-ahead anyway.
const SEQUENTIAL_FROM: u64 = 256 << 10;

/// The most of a compressed pod log decompressed and searched (a plain log is searched
/// whole, streamed). kubelet rotates logs at 10 MiB by default.
const MAX_GZ_LOG: u64 = 64 << 20;

/// The category of `job`'s place before liveness, as its site says.
fn category(job: &FileJob, mut on_tmpfs: impl FnMut() -> bool) -> Category {
    sites::site(job.site).category(job.site, job.owner.as_deref(), &mut on_tmpfs)
}

/// Where a buffer sits in its file: `buf[..len]` holds the file from `pos - carry`; the
/// first `carry` bytes were searched with the previous buffer (all of them, in a last
/// search of the carry alone); `last` when nothing follows.
#[derive(Clone, Copy)]
struct Span {
    carry: usize,
    len: usize,
    pos: u64,
    last: bool,
}

/// One finding per (file, material): occurrences of the same id become a count, at the
/// first offset. The same occurrence found twice (one value in a fingerprint file and in
/// `--secrets`) counts once.
fn aggregate(mut raw: Vec<Finding>) -> Vec<Finding> {
    raw.sort_by(|a, b| (&a.id, a.offset).cmp(&(&b.id, b.offset)));
    let mut out: Vec<Finding> = Vec::new();
    let mut last_offset = 0;
    for f in raw {
        match out.last_mut() {
            Some(prev) if prev.id == f.id => {
                if f.offset != last_offset {
                    prev.count += 1;
                    last_offset = f.offset;
                }
            }
            _ => {
                last_offset = f.offset;
                out.push(f);
            }
        }
    }
    out
}

impl Worker {
    /// Searches one buffer with fingerprints and rules, in one pass over its bytes.
    fn search(
        &mut self,
        job: &FileJob,
        searchers: &Searchers<'_>,
        place: (Category, Severity),
        at: Span,
        findings: &mut Vec<Finding>,
    ) {
        let Span { carry, len, pos, last } = at;
        let base = pos - carry as u64;
        let buf = &self.buf[..len];
        self.hits.clear();
        self.key_marks.clear();
        if len > carry {
            match searchers.rules.key_scan() {
                // The rules' key search rides along the matcher's pass over the bytes.
                Some(keys) => searchers.matcher.find_keyed(
                    buf,
                    base,
                    carry,
                    &mut self.hits,
                    keys,
                    &mut self.key_marks,
                ),
                None => searchers.matcher.find(buf, base, carry, &mut self.hits),
            }
        }
        for h in &self.hits {
            let at = (h.offset - base) as usize;
            let matched = &buf[at..at + h.len as usize];
            findings.push(lift(job, searchers.matcher, h, place, matched));
        }
        self.rule_hits.clear();
        let marks = &self.key_marks;
        if !searchers.rules.find_marked(buf, base, carry, last, marks, &mut self.rule_hits) {
            self.rules_incomplete = true;
        }
        for h in self.rule_hits.drain(..) {
            let at = (h.offset - base) as usize;
            let secret = &buf[at + h.secret.start as usize..at + h.secret.end as usize];
            findings.push(lift_rule(job, searchers, h, place, secret));
        }
    }

    /// Moves the last `overlap` bytes of `buf[..len]` to the front; returns the new carry.
    fn keep(&mut self, len: usize) -> usize {
        let keep = self.overlap.min(len);
        self.buf.copy_within(len - keep..len, 0);
        keep
    }
}

/// Reads until `buf` is full or the input ends.
fn read_full<R: Read + ?Sized>(f: &mut R, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// The label that ranks a fingerprinted value one step higher: a rotated-out value that
/// is still on disk.
const REVOKED: &str = "revoked";

/// Lifts a matcher hit to a finding. `matched` is the matched bytes, used only for the
/// redacted preview.
fn lift(
    job: &FileJob,
    matcher: &Matcher,
    h: &Hit,
    place: (Category, Severity),
    matched: &[u8],
) -> Finding {
    let (entry, form) = matcher.describe(h);
    let m = MatchInfo {
        kind: MatchKind::Fingerprint,
        secret: Some(entry.secret.clone()),
        key: Some(entry.key.clone()),
        label: Some(entry.label.clone()),
        rule: None,
        encoding: form.encoding,
    };
    let material = Material { severity: Severity::High, revoked: entry.label == REVOKED };
    let id = Finding::make_id(job.site, &job.node_path(), &m, &[]);
    finding(job, id, place, material, h.offset, h.len as u64, m, Preview::redact(matched))
}

/// Lifts a rule hit to a finding. `secret` is the secret part of the match, used only for
/// the redacted preview and the id's digest. A decoded token's claims that hold a
/// fingerprinted value are withheld.
fn lift_rule(
    job: &FileJob,
    searchers: &Searchers<'_>,
    h: RuleHit,
    place: (Category, Severity),
    secret: &[u8],
) -> Finding {
    let rules = searchers.rules;
    let m = MatchInfo {
        kind: MatchKind::Rule,
        secret: None,
        key: None,
        label: None,
        rule: Some(rules.spec(h.rule).id.to_owned()),
        encoding: Encoding::Raw,
    };
    let material = Material { severity: h.severity, revoked: false };
    let id = Finding::make_id(job.site, &job.node_path(), &m, secret);
    let mut f =
        finding(job, id, place, material, h.offset, h.len as u64, m, Preview::redact(secret));
    f.token = h.token;
    if let Some(token) = &mut f.token {
        let mut hits = Vec::new();
        token.withhold(|claim| {
            hits.clear();
            searchers.matcher.find(claim.as_bytes(), 0, 0, &mut hits);
            !hits.is_empty()
        });
    }
    f
}

#[allow(clippy::too_many_arguments)]
fn finding(
    job: &FileJob,
    id: String,
    (category, place): (Category, Severity),
    material: Material,
    offset: u64,
    length: u64,
    matched: MatchInfo,
    preview: Preview,
) -> Finding {
    let owner = job.owner.as_deref();
    let shown = report::withhold::shown;
    Finding {
        id,
        severity: rank(place, material.severity, material.revoked),
        category,
        site: job.site,
        path: job.node_path(),
        offset,
        length,
        count: 1,
        stale: job.stale,
        pod: match (job.pod.as_deref().or(owner.and_then(|o| o.pod_uid.as_deref())), &job.log) {
            (Some(uid), _) => {
                Some(PodRef { uid: shown(uid), namespace: None, name: None, live: None })
            }
            // Names taken from the log's path: withheld where the path's are.
            (None, Some(l)) => Some(PodRef {
                uid: shown(&l.uid),
                namespace: Some(shown(&l.namespace)),
                name: Some(shown(&l.pod)),
                live: None,
            }),
            (None, None) => None,
        },
        container: match (owner.and_then(|o| o.container.as_deref()), &job.log) {
            (Some(id), _) => Some(ContainerRef { id: Some(id.to_owned()), name: None, live: None }),
            (None, Some(l)) => {
                Some(ContainerRef { id: None, name: Some(shown(&l.container)), live: None })
            }
            (None, None) => None,
        },
        images: owner.map(|o| o.images.clone()).unwrap_or_default(),
        within: Within::Content,
        matched,
        preview,
        note: owner.and_then(|o| o.note),
        token: None,
        material,
    }
}

#[cfg(test)]
mod tests {
    use super::Seen;

    /// Each (device, inode) is new once, whichever way it is stored: devices by index,
    /// inodes past 48 bits and devices past the 65,536th in the fallback set.
    #[test]
    fn seen_tells_each_file_once() {
        let mut seen = Seen::default();
        for (dev, ino) in [(7, 1), (7, 2), (9, 1), (7, 1 << 48), (9, u64::MAX)] {
            assert!(seen.insert(dev, ino), "({dev}, {ino}) is new");
            assert!(!seen.insert(dev, ino), "({dev}, {ino}) was seen");
        }
        // The 65,537th device met is stored in the fallback set.
        seen.devices.extend((1000..1000 + (1 << 16)).map(|d| (d, d as usize)));
        assert!(seen.insert(5, 5) && !seen.insert(5, 5));
        assert_eq!(seen.other.len(), 3, "past 48 bits (twice) and past the 65,536th device");
    }
}
