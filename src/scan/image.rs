//! Scanning a container image archive (`scan --image`): each blob the archive's images
//! use is read once, by one worker, whatever the number of images sharing it. A layer is
//! streamed from its blob (gzip or zstd inflated as it is read, nothing unpacked
//! anywhere), member by member; each regular member is searched as a file, its findings
//! shown at `LAYER-DIGEST/PATH-IN-LAYER` and attributed to every image holding the layer.
//! A config is searched as one file (ENV, history with build arguments, labels).
//!
//! A file a later layer of the same image deletes (a `.wh.NAME` whiteout, or an opaque
//! directory's `.wh..wh..opq`) is not in the image's filesystem, but it is in the bytes
//! every pull fetches: its findings are kept, noted as deleted.

use super::read::Worker;
use super::search::{Cx, Target};
use super::{Progress, ScanResult, ScanSettings, Searchers, SiteStats};
use crate::finding::{Category, Finding, Images, ScanError, SiteId};
use crate::oci::{BlobKind, Catalog, Store};
use crate::severity::place;
use crate::sites::{Owner, Ownership};
use crate::tarball::{self, Kind};
use crate::{sys, text};
use rayon::prelude::*;
use std::collections::HashSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Whiteouts remembered, over all layers: past this, what later layers delete is not
/// noted (said in `errors`).
pub const MAX_WHITEOUTS: usize = 1 << 20;

/// The longest whiteout path remembered (Linux's `PATH_MAX`): longer ones delete nothing
/// on a node either.
const MAX_PATH: usize = 4096;

/// Said of a finding in a file a later layer of every image holding it deletes.
const DELETED: &str = "deleted by a later layer's whiteout: not in the image's filesystem, \
    but in the bytes every pull fetches";
/// Said of a finding in a file a later layer deletes in some of the images holding it.
const DELETED_IN_SOME: &str = "deleted by a later layer's whiteout in some of the images \
    holding the layer: still in the bytes every pull fetches";

/// A member of a layer, or a config, as the findings in it are shown.
struct Member<'a> {
    owner: &'a Owner,
    /// Its path's bytes: the layer's digest and the member's path in it, or the config's
    /// digest.
    raw: Vec<u8>,
}

impl Target for Member<'_> {
    fn owner(&self) -> &Owner {
        self.owner
    }

    fn node_path(&self) -> String {
        text::display_path(OsStr::from_bytes(&self.raw))
    }

    fn id_path(&self) -> String {
        text::id_path(OsStr::from_bytes(&self.raw))
    }
}

/// What a layer deletes of the layers below it.
#[derive(Default)]
struct Whiteouts {
    /// Paths deleted (with all below them).
    deleted: HashSet<Vec<u8>>,
    /// Directories whose lower contents are hidden (opaque).
    opaque: HashSet<Vec<u8>>,
}

impl Whiteouts {
    /// Whether `path` of a lower layer is deleted here.
    fn deletes(&self, path: &[u8]) -> bool {
        let mut at = path.len();
        loop {
            if self.deleted.contains(&path[..at]) {
                return true;
            }
            let Some(slash) = memchr::memrchr(b'/', &path[..at]) else {
                return self.opaque.contains(&b""[..]);
            };
            at = slash;
            if self.opaque.contains(&path[..at]) {
                return true;
            }
        }
    }
}

/// What the workers gather.
#[derive(Default)]
struct Gathered {
    /// Each finding with its blob and path in the layer.
    findings: Mutex<Vec<(usize, Vec<u8>, Finding)>>,
    errors: Mutex<Vec<ScanError>>,
    whiteouts: Mutex<Vec<(usize, Whiteouts)>>,
    remembered: AtomicUsize,
    files: AtomicU64,
    bytes: AtomicU64,
    busy: Mutex<SiteStats>,
    late: AtomicBool,
}

/// Scans the blobs of `catalog`'s images in `store`.
pub fn scan_archive(
    settings: &ScanSettings,
    store: &Store,
    catalog: &Catalog,
    searchers: &Searchers<'_>,
    progress: &dyn Progress,
) -> anyhow::Result<ScanResult> {
    let g = Gathered::default();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(settings.threads).build()?;
    pool.install(|| {
        (0..catalog.blobs.len()).into_par_iter().for_each_init(
            || Worker::new(settings, searchers.overlap()),
            |w, i| blob(w, i, (store, catalog), settings, searchers, &g, progress),
        )
    });
    let whiteouts = g.whiteouts.into_inner().expect("lock");
    let mut findings = Vec::new();
    for (b, path, mut f) in g.findings.into_inner().expect("lock") {
        f.note = f.note.or(deleted(catalog, &whiteouts, b, &path));
        findings.push(f);
    }
    findings.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    let mut errors = g.errors.into_inner().expect("lock");
    errors
        .extend(catalog.errors.iter().map(|e| ScanError { path: String::new(), error: e.clone() }));
    errors.sort();
    errors.dedup();
    let (files, bytes) = (g.files.into_inner(), g.bytes.into_inner());
    let stats = SiteStats { files, bytes, ..g.busy.into_inner().expect("lock") };
    let lines = catalog
        .images
        .iter()
        .map(|m| format!("image {} ({} layers)", m.names.join(", "), m.layers.len()))
        .collect();
    Ok(ScanResult {
        findings,
        errors,
        files,
        bytes,
        sites: [(SiteId::ImageArchive, stats)].into_iter().filter(|(_, s)| s.files > 0).collect(),
        incomplete: g.late.into_inner(),
        scopes: catalog.blobs.iter().map(|b| b.digest.clone()).collect(),
        skipped: Default::default(),
        layouts: super::Layouts { distributions: vec![], lines },
        unread_mounts: vec![],
        records: vec![],
        unchanged: (0, 0),
        due: (0, 0),
    })
}

/// The note of a finding in blob `b` at `path`: whether later layers delete it.
fn deleted(
    catalog: &Catalog,
    whiteouts: &[(usize, Whiteouts)],
    b: usize,
    path: &[u8],
) -> Option<&'static str> {
    let (mut holding, mut deleting) = (0, 0);
    for img in catalog.images.iter() {
        let Some(at) = img.layers.iter().position(|&l| l == b) else { continue };
        holding += 1;
        let later = &img.layers[at + 1..];
        let gone = whiteouts.iter().any(|(l, w)| later.contains(l) && w.deletes(path));
        deleting += usize::from(gone);
    }
    match deleting {
        0 => None,
        n if n == holding => Some(DELETED),
        _ => Some(DELETED_IN_SOME),
    }
}

/// Whether the scan is to stop: a stop signal, or the deadline passed.
fn late(settings: &ScanSettings, g: &Gathered) -> bool {
    let late =
        sys::stop_signal().is_some() || settings.deadline.is_some_and(|d| Instant::now() >= d);
    if late {
        g.late.store(true, Ordering::Relaxed);
    }
    late
}

/// Reads blob `i`.
fn blob(
    w: &mut Worker,
    i: usize,
    (store, catalog): (&Store, &Catalog),
    settings: &ScanSettings,
    searchers: &Searchers<'_>,
    g: &Gathered,
    progress: &dyn Progress,
) {
    if late(settings, g) {
        return;
    }
    let b = &catalog.blobs[i];
    let category = match b.kind {
        BlobKind::Config => Category::ImageConfig,
        BlobKind::Layer => Category::ImageLayer,
    };
    let mut own = Ownership::new(SiteId::ImageArchive, category, None, None);
    own.images = Images::new(catalog.names_of(i).into_iter().map(Arc::from));
    let owner = Owner { records: Some(Arc::new(own)), ..Owner::of(SiteId::ImageArchive) };
    let place = place(owner.category(|| false), false, None);
    let error = |path: String, error: String| {
        g.errors.lock().expect("lock").push(ScanError { path, error })
    };
    let (mut r, size) = match store.open_blob(&b.name) {
        Ok(r) => r,
        Err(e) => return error(b.digest.clone(), e),
    };
    let started = Instant::now();
    let keep = |path: Vec<u8>, n: u64, found: Vec<Finding>, w: &mut Worker, shown: &str| {
        g.files.fetch_add(1, Ordering::Relaxed);
        g.bytes.fetch_add(n, Ordering::Relaxed);
        progress.file(SiteId::ImageArchive, n);
        if !found.is_empty() {
            let mut all = g.findings.lock().expect("lock");
            all.extend(found.into_iter().map(|f| (i, path.clone(), f)));
        }
        for e in w.file_errors.drain(..) {
            error(shown.to_owned(), e);
        }
    };
    if b.kind == BlobKind::Config {
        let target = Member { owner: &owner, raw: b.digest.as_bytes().to_vec() };
        let cx = Cx { of: &target, searchers, place };
        if let Some(max) = settings.max_file_size.filter(|&max| size > max) {
            let e = format!("{size} bytes, more than --max-file-size {max}; not read");
            return error(target.node_path(), e);
        }
        match w.scan_reader(&mut r, &cx) {
            Ok((n, found)) => keep(Vec::new(), n, found, w, &target.node_path()),
            Err(e) => error(target.node_path(), e),
        }
        record_busy(g, started);
        return;
    }
    let r = match tarball::inflated(r) {
        Ok((_, r)) => r,
        Err(e) => return error(b.digest.clone(), format!("{e}")),
    };
    let mut tar = tarball::Reader::new(r).with_stop(Box::new(w.stop_check()));
    let mut whiteouts = Whiteouts::default();
    let mut named_dirs = HashSet::new();
    loop {
        if late(settings, g) {
            break;
        }
        let m = match tar.next_member() {
            Ok(Some(m)) => m,
            Ok(None) => break,
            // Stopped while skipping: the scan is marked incomplete (below), no error.
            Err(_) if late(settings, g) => break,
            Err(e) => {
                error(b.digest.clone(), format!("{e}; the rest of the layer not read"));
                break;
            }
        };
        let inner = tarball::clean_path(&m.path);
        // Names holding material are findings, and withheld before any path is shown.
        let named = super::names::in_path(
            &Member { owner: &owner, raw: Vec::new() },
            place,
            searchers,
            (b.digest.as_bytes(), &inner),
            &mut named_dirs,
        );
        if !named.is_empty() {
            let mut all = g.findings.lock().expect("lock");
            all.extend(named.into_iter().map(|f| (i, inner.clone(), f)));
        }
        let name = inner.rsplit(|&c| c == b'/').next().unwrap_or_default();
        if let Some(target) = name.strip_prefix(b".wh.") {
            let parent = &inner[..inner.len() - name.len()];
            let parent = parent.strip_suffix(b"/").unwrap_or(parent).to_vec();
            let remembered = g.remembered.fetch_add(1, Ordering::Relaxed) < MAX_WHITEOUTS;
            let fits = parent.len() + target.len() <= MAX_PATH;
            if remembered && fits && target == b".wh..opq" {
                whiteouts.opaque.insert(parent);
            } else if remembered && fits {
                let mut p = parent;
                if !p.is_empty() {
                    p.push(b'/');
                }
                p.extend_from_slice(target);
                whiteouts.deleted.insert(p);
            }
            // A whiteout's data (none, from a well-behaved builder) is in the blob too:
            // searched as any file's.
        }
        // An empty file holds nothing to find (a layer of millions of them is read
        // header by header).
        if m.kind != Kind::File || m.size == 0 {
            continue;
        }
        let target = Member { owner: &owner, raw: [b.digest.as_bytes(), b"/", &inner].concat() };
        if let Some(max) = settings.max_file_size.filter(|&max| m.size > max) {
            let e = format!("{} bytes, more than --max-file-size {max}; not read", m.size);
            error(target.node_path(), e);
            continue;
        }
        let cx = Cx { of: &target, searchers, place };
        match w.scan_reader(&mut tar.data(), &cx) {
            Ok((n, found)) => keep(inner, n, found, w, &target.node_path()),
            Err(e) => error(target.node_path(), e),
        }
        if std::mem::take(&mut w.timed_out) {
            g.late.store(true, Ordering::Relaxed);
        }
    }
    if g.remembered.load(Ordering::Relaxed) > MAX_WHITEOUTS {
        error(
            b.digest.clone(),
            format!("more than {MAX_WHITEOUTS} whiteouts in the archive: what later layers delete is not all noted"),
        );
    }
    g.whiteouts.lock().expect("lock").push((i, whiteouts));
    record_busy(g, started);
}

fn record_busy(g: &Gathered, started: Instant) {
    let mut s = g.busy.lock().expect("lock");
    s.busy += started.elapsed();
}
