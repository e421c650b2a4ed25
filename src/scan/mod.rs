//! Scan orchestration: scopes → walk → bounded streaming reads → matcher → findings.
//!
//! Files are pulled from the walk iterators by a rayon pool; each worker owns one read
//! buffer of `chunk + overlap` bytes and one hit vector, so memory is bounded by
//! `threads × (chunk + longest form)` whatever the file sizes. Consecutive buffers of a
//! file overlap by the longest searched form minus one byte, so an occurrence straddling
//! a boundary is found exactly once (see `matcher::Matcher::find`). Holes of sparse files
//! are skipped with `SEEK_DATA`; only their first and last `overlap` zeros are searched,
//! so a binary value that begins or ends with zeros is still found at a hole's edge.

mod image;
pub use image::scan_archive;
mod names;
pub use names::withhold_names;
mod read;
mod search;
pub mod shipped;
pub mod state;

use crate::finding::{Finding, ScanError, SiteId, UnreadMount};
use crate::matcher::Matcher;
use crate::rules::Rules;
use crate::sites::{self, Layout};
use crate::sys::{self, RootDir};
use crate::text;
use crate::walk::{self, FileJob, WalkItem};
use rayon::prelude::*;
use read::Worker;
use std::collections::{BTreeMap, HashSet};
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
    /// The last scan's state (`--state`): files unchanged since are taken from it.
    pub state: Option<std::sync::Arc<state::State>>,
    /// Whether what each file gives is kept ([`ScanResult::records`]) for the next state.
    pub keep_state: bool,
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
    /// The node's distributions and the places found.
    pub layouts: Layouts,
    /// Mount points not read, sorted (see [`crate::walk`]).
    pub unread_mounts: Vec<UnreadMount>,
    /// What each file gave, for the next scan's state (with [`ScanSettings::keep_state`]).
    pub records: Vec<state::Record>,
    /// Files taken from the last scan's state, unchanged since, and their bytes (counted
    /// in `files` and `bytes` too, as a full scan counts them).
    pub unchanged: (u64, u64),
    /// Files read again though unchanged, unread for longer than `--state-max-age`, and
    /// their bytes.
    pub due: (u64, u64),
}

/// The distributions discovery found on the node, and its places (`-v`).
#[derive(Clone, Debug, Default)]
pub struct Layouts {
    /// The distributions found, but for the default layout, by name.
    pub distributions: Vec<String>,
    /// What was found, a line each.
    pub lines: Vec<String>,
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
    pub(super) fn overlap(&self) -> usize {
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
/// fingerprints are loaded and the matcher is built (see `app::scan`): the
/// first batches are then ready when the readers start.
#[derive(Debug)]
pub struct Walking {
    found: std::sync::mpsc::Receiver<(Vec<String>, Vec<ScanError>, Layouts)>,
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
            let sites::Discovered { mut scopes, distributions, lines } =
                sites::discover(&root, &layout, &mut errors);
            let walked =
                scopes.iter().map(|s| text::display_path(s.node_path.as_os_str())).collect();
            // In an image whose order sets the cost of reads (a compressed tarball), the
            // scopes are walked in that order: the image is read front to back.
            scopes.sort_by_key(|s| root.position(&s.rel));
            if found_tx.send((walked, errors, Layouts { distributions, lines })).is_err() {
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
            let planned = walk::plan(scopes);
            let walk = planned.into_iter().flat_map(|s| walk::walk_scope(&root, s, &crossings));
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
    let Ok((walked, errors, layouts)) = found.recv() else {
        // The walk's thread ended without a word: it panicked, and so does the scan.
        match thread.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => anyhow::bail!("the walk ended before it began"),
        }
    };
    let gathered = Gathered { errors: Mutex::new(errors), ..Gathered::default() };
    let in_time = || {
        let on_time =
            settings.deadline.is_none_or(|d| Instant::now() < d) && sys::stop_signal().is_none();
        if !on_time {
            gathered.late.store(true, Ordering::Relaxed);
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
                let mut named = w.names.check(&batch, searchers, &seen);
                if !named.is_empty() {
                    gathered.findings.lock().expect("lock").append(&mut named);
                }
                for item in batch {
                    match item {
                        WalkItem::Error(e) => gathered.errors.lock().expect("lock").push(e),
                        WalkItem::Skipped(kind) => {
                            *gathered.skipped.lock().expect("lock").entry(kind).or_insert(0) += 1;
                        }
                        WalkItem::Unread(m) => gathered.unread.lock().expect("lock").push(m),
                        // Listed before the deadline or a signal, not yet read: left
                        // alone (what the walk could not list is still reported).
                        WalkItem::File(_) if !in_time() => {}
                        WalkItem::File(job) => gathered.read(w, &job, (searchers, &seen), progress),
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
        gathered.late.store(true, Ordering::Relaxed);
    }
    Ok(gathered.into_result(walked, layouts))
}

/// What the readers gather, shared between them.
#[derive(Default)]
struct Gathered {
    skipped: Mutex<BTreeMap<&'static str, u64>>,
    unread: Mutex<Vec<UnreadMount>>,
    findings: Mutex<Vec<Finding>>,
    errors: Mutex<Vec<ScanError>>,
    files: AtomicU64,
    bytes: AtomicU64,
    sites: Mutex<BTreeMap<SiteId, SiteStats>>,
    /// The deadline or a stop signal cut the scan short.
    late: AtomicBool,
    records: Mutex<Vec<state::Record>>,
    unchanged: Mutex<(u64, u64)>,
    due: Mutex<(u64, u64)>,
}

impl Gathered {
    /// Has `w` read `job`'s file and keeps what came of it.
    fn read(
        &self,
        w: &mut Worker,
        job: &FileJob,
        (searchers, seen): (&Searchers<'_>, &Mutex<Seen>),
        progress: &dyn Progress,
    ) {
        let started = Instant::now();
        let result = w.scan_file(job, searchers, seen);
        let due = std::mem::take(&mut w.due);
        if let Some(r) = w.record.take() {
            self.records.lock().expect("lock").push(r);
        }
        if let Some(n) = w.unchanged.take() {
            let mut u = self.unchanged.lock().expect("lock");
            *u = (u.0 + 1, u.1 + n);
        }
        if let Some(m) = w.unread.take() {
            self.unread.lock().expect("lock").push(m);
        }
        if std::mem::take(&mut w.timed_out) {
            self.late.store(true, Ordering::Relaxed);
        }
        let error = |error| ScanError { path: job.node_path(), error };
        let (n, mut found) = match result {
            Ok(Some(read)) => read,
            Ok(None) => return,
            Err(e) => return self.errors.lock().expect("lock").push(error(e)),
        };
        self.files.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(n, Ordering::Relaxed);
        if due {
            let mut d = self.due.lock().expect("lock");
            *d = (d.0 + 1, d.1 + n);
        }
        let mut sites = self.sites.lock().expect("lock");
        let site = sites.entry(job.owner.site).or_default();
        site.files += 1;
        site.bytes += n;
        site.busy += started.elapsed();
        drop(sites);
        progress.file(job.owner.site, n);
        if !found.is_empty() {
            self.findings.lock().expect("lock").append(&mut found);
        }
        let mut errors = self.errors.lock().expect("lock");
        errors.extend(w.file_errors.drain(..).map(error));
        if std::mem::take(&mut w.scratch.rules_incomplete) {
            errors.push(error(RULES_INCOMPLETE.to_owned()));
        }
    }

    /// The result, sorted; `walked` are the scopes' node paths.
    fn into_result(self, walked: Vec<String>, layouts: Layouts) -> ScanResult {
        let mut findings = self.findings.into_inner().expect("lock");
        findings.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
        let mut errors = self.errors.into_inner().expect("lock");
        // The walk made some of these paths text before the names in them were matched.
        for e in &mut errors {
            e.path = text::redisplay(&e.path);
        }
        let walked = walked.iter().map(|s| text::redisplay(s)).collect();
        errors.sort();
        errors.dedup();
        let mut unread_mounts = self.unread.into_inner().expect("lock");
        unread_mounts.sort();
        unread_mounts.dedup();
        ScanResult {
            findings,
            errors,
            files: self.files.into_inner(),
            bytes: self.bytes.into_inner(),
            sites: self.sites.into_inner().expect("lock"),
            incomplete: self.late.into_inner(),
            scopes: walked,
            skipped: self.skipped.into_inner().expect("lock"),
            unread_mounts,
            layouts,
            records: self.records.into_inner().expect("lock"),
            unchanged: self.unchanged.into_inner().expect("lock"),
            due: self.due.into_inner().expect("lock"),
        }
    }
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
pub(super) struct Seen {
    devices: std::collections::HashMap<u64, usize>,
    packed: HashSet<u64>,
    other: HashSet<(u64, u64)>,
    /// The directories (paths from the root) whose names were reported as findings: each
    /// once, whichever worker meets it first.
    pub(super) named_dirs: HashSet<Vec<u8>>,
}

impl Seen {
    /// Records a file; false when it was recorded before.
    pub(super) fn insert(&mut self, dev: u64, ino: u64) -> bool {
        let next = self.devices.len();
        let d = *self.devices.entry(dev).or_insert(next);
        if d < 1 << 16 && ino < 1 << 48 {
            self.packed.insert((d as u64) << 48 | ino)
        } else {
            self.other.insert((dev, ino))
        }
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
