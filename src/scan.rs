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
    Category, Finding, MatchInfo, MatchKind, PodRef, Preview, ScanError, Severity, SiteId,
};
use crate::matcher::{Hit, Matcher};
use crate::node::{self, io_message, Layout};
use crate::sys::{self, RootDir};
use crate::walk::{self, FileJob, WalkItem};
use rayon::prelude::*;
use std::collections::HashSet;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

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
}

/// Scans everything `settings` names under `root`.
pub fn scan(
    root: &RootDir,
    settings: &ScanSettings,
    matcher: &Matcher,
) -> anyhow::Result<ScanResult> {
    let mut errors = Vec::new();
    let scopes = node::discover(root, &settings.layout, &mut errors);
    let findings = Mutex::new(Vec::new());
    let errors = Mutex::new(errors);
    let files = AtomicU64::new(0);
    let bytes = AtomicU64::new(0);
    let seen = Mutex::new(HashSet::new());
    let pool = rayon::ThreadPoolBuilder::new().num_threads(settings.threads).build()?;
    let root_abs = root.path().to_path_buf();
    pool.install(|| {
        scopes.into_iter().flat_map(|s| walk::walk_scope(&root_abs, s)).par_bridge().for_each_init(
            || Worker::new(settings.chunk, matcher.max_len()),
            |w, item| match item {
                WalkItem::Error(e) => errors.lock().expect("lock").push(e),
                WalkItem::File(job) => match w.scan_file(root, &job, matcher, &seen) {
                    Ok(Some((n, mut found))) => {
                        files.fetch_add(1, Ordering::Relaxed);
                        bytes.fetch_add(n, Ordering::Relaxed);
                        if !found.is_empty() {
                            findings.lock().expect("lock").append(&mut found);
                        }
                    }
                    Ok(None) => {}
                    Err(error) => errors
                        .lock()
                        .expect("lock")
                        .push(ScanError { path: job.node_path.clone(), error }),
                },
            },
        )
    });
    let mut findings = findings.into_inner().expect("lock");
    findings.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    // The same value given twice (a fingerprint file and --secrets) is one finding.
    findings.dedup_by(|a, b| a.id == b.id);
    let mut errors = errors.into_inner().expect("lock");
    errors.sort();
    errors.dedup();
    Ok(ScanResult { findings, errors, files: files.into_inner(), bytes: bytes.into_inner() })
}

/// Per-thread state: the read buffer and hit scratch.
struct Worker {
    buf: Vec<u8>,
    chunk: usize,
    overlap: usize,
    hits: Vec<Hit>,
}

impl Worker {
    fn new(chunk: usize, max_len: usize) -> Worker {
        let overlap = max_len.saturating_sub(1);
        // The carry plus either a chunk or the zeros standing for a hole.
        Worker { buf: vec![0; chunk.max(overlap) + overlap], chunk, overlap, hits: Vec::new() }
    }

    /// Reads one file and returns (bytes read, findings); `None` if the file was already
    /// read under another name (hard link, overlapping `--path`). Errors are messages for
    /// the report's `errors` list.
    fn scan_file(
        &mut self,
        root: &RootDir,
        job: &FileJob,
        matcher: &Matcher,
        seen: &Mutex<HashSet<(u64, u64)>>,
    ) -> Result<Option<(u64, Vec<Finding>)>, String> {
        let mut f = root.open_file(&job.rel).map_err(|e| io_message(&e))?;
        let md = f.metadata().map_err(|e| io_message(&e))?;
        if !md.is_file() {
            return Err("not a regular file (changed during the scan); not read".to_owned());
        }
        if md.ino() != job.ino {
            return Err("replaced during the scan; not read".to_owned());
        }
        if !seen.lock().expect("lock").insert((md.dev(), md.ino())) {
            return Ok(None);
        }
        let on_tmpfs = sys::is_tmpfs(&f);
        let size = md.len();
        let mut findings = Vec::new();
        let mut carry = 0usize;
        let mut pos = 0u64; // absolute offset of the next byte to read
        let mut total = 0u64;
        loop {
            // `None`: no data after `pos` (the rest, up to the statted size, is a hole).
            let next = sys::next_data(&f, pos);
            let data = next.unwrap_or(size.max(pos));
            if data > pos {
                // A hole [pos, data) reads as zeros, and a binary value may begin or end
                // with zeros: search the first `overlap` zeros as if read, after which
                // the carry (all zeros) stands for the hole's last bytes.
                let z = (data - pos).min(self.overlap as u64) as usize;
                self.buf[carry..carry + z].fill(0);
                self.search(job, matcher, on_tmpfs, carry, carry + z, pos, &mut findings);
                carry = self.keep(carry + z);
                pos = data;
            }
            if next.is_none() {
                break;
            }
            let n = read_full(&mut f, &mut self.buf[carry..carry + self.chunk])
                .map_err(|e| io_message(&e))?;
            if n == 0 {
                break;
            }
            self.search(job, matcher, on_tmpfs, carry, carry + n, pos, &mut findings);
            pos += n as u64;
            total += n as u64;
            carry = self.keep(carry + n);
        }
        Ok(Some((total, findings)))
    }
}

impl Worker {
    /// Searches `buf[..len]`, whose new bytes start at `carry` and at absolute `pos`.
    #[allow(clippy::too_many_arguments)]
    fn search(
        &mut self,
        job: &FileJob,
        matcher: &Matcher,
        on_tmpfs: bool,
        carry: usize,
        len: usize,
        pos: u64,
        findings: &mut Vec<Finding>,
    ) {
        let base = pos - carry as u64;
        self.hits.clear();
        matcher.find(&self.buf[..len], base, carry, &mut self.hits);
        for h in &self.hits {
            let at = (h.offset - base) as usize;
            findings.push(lift(job, matcher, h, on_tmpfs, &self.buf[at..at + h.len as usize]));
        }
    }

    /// Moves the last `overlap` bytes of `buf[..len]` to the front; returns the new carry.
    fn keep(&mut self, len: usize) -> usize {
        let keep = self.overlap.min(len);
        self.buf.copy_within(len - keep..len, 0);
        keep
    }
}

/// Reads until `buf` is full or the file ends.
fn read_full(f: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
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

/// Lifts a matcher hit to a finding. `matched` is the matched bytes, used only for the
/// redacted preview.
fn lift(job: &FileJob, matcher: &Matcher, h: &Hit, on_tmpfs: bool, matched: &[u8]) -> Finding {
    let (entry, form) = matcher.describe(h);
    let m = MatchInfo {
        kind: MatchKind::Fingerprint,
        secret: Some(entry.secret.clone()),
        key: Some(entry.key.clone()),
        label: Some(entry.label.clone()),
        rule: None,
        encoding: form.encoding,
    };
    let (category, severity) = assess(job.site, on_tmpfs, job.stale);
    Finding {
        id: Finding::make_id(&job.node_path, h.offset, &m),
        severity,
        category,
        site: job.site,
        path: job.node_path.clone(),
        offset: h.offset,
        length: h.len as u64,
        stale: job.stale,
        pod: job.pod.as_ref().map(|uid| PodRef {
            uid: uid.to_string(),
            namespace: None,
            name: None,
            live: None,
        }),
        container: None,
        matched: m,
        preview: Preview::redact(matched),
    }
}

/// Category and severity while liveness is unknown (`live: null`): a secret volume's
/// data on disk instead of tmpfs is critical (it outlives the pod and the reboot); on
/// tmpfs it may be an orphaned mount; subPath copies are pinned at container start and
/// go stale; a stale atomic-writer copy is one step less severe than its volume.
fn assess(site: SiteId, on_tmpfs: bool, stale: bool) -> (Category, Severity) {
    let (category, severity) = match site {
        SiteId::KubeletSecretVolume | SiteId::KubeletProjectedVolume | SiteId::KubeletCsiVolume => {
            if on_tmpfs {
                (Category::OrphanedVolume, Severity::High)
            } else {
                (Category::NonTmpfsVolume, Severity::Critical)
            }
        }
        SiteId::KubeletSubpath => (Category::StaleSubpath, Severity::Medium),
        _ => (Category::Other, Severity::High),
    };
    let severity = match (stale, severity) {
        (true, Severity::Critical) => Severity::High,
        (true, Severity::High) => Severity::Medium,
        (_, s) => s,
    };
    (category, severity)
}
