//! The walk: lists the regular files of each [`Scope`] without following any symlink
//! ([`crate::sys::walk`], by directory descriptors), classifies each by site, and names it
//! as a person on the node sees it.
//!
//! Only regular files become [`FileJob`]s: symlinks, FIFOs, sockets and device nodes are
//! never opened (their type comes from the directory entry, and the open in `scan` checks
//! again). `scan` runs these iterators on a thread of their own and reads the files they
//! list with rayon.

use crate::finding::{ScanError, SiteId};
use crate::node::kubelet::{self, AtomicVolume};
use crate::node::logs::LogOwner;
use crate::node::{io_message, Ownership, Scope, ScopeKind};
use crate::report::display_path;
use crate::sys::walk::{DirFd, Entry};
use crate::sys::RootDir;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A regular file to read.
#[derive(Clone, Debug)]
pub struct FileJob {
    /// Path relative to the root (no symlinks).
    pub rel: PathBuf,
    /// Its directory, to open it by name; or the root, when `by_path`.
    dir: Arc<DirFd>,
    /// Opened by `rel` from the root (the walk's descriptor budget was spent).
    by_path: bool,
    /// Inode number seen by the walk (checked against the opened file).
    pub ino: u64,
    /// The node path of the file's scope, shared by all of its files.
    scope_path: Arc<Path>,
    /// What is shown under `scope_path` when it differs from the path under the scope (an
    /// atomic-writer volume's user-visible name).
    shown: Option<PathBuf>,
    /// Where in `rel` the path under the scope starts.
    inner_at: usize,
    /// Which site it belongs to.
    pub site: SiteId,
    /// The pod UID, for files under a pod dir.
    pub pod: Option<Arc<str>>,
    /// True for a superseded atomic-writer copy.
    pub stale: bool,
    /// What the runtime's records say of the file's layer or container (an OCI bundle, a
    /// writable or image layer): category, container, pod, images, a note.
    pub owner: Option<Arc<Ownership>>,
    /// The pod and container of a pod log, from its path.
    pub log: Option<Arc<LogOwner>>,
}

impl FileJob {
    /// Opens the file for reading, beneath its directory's descriptor (or the root's),
    /// never through a symlink.
    pub fn open(&self) -> std::io::Result<std::fs::File> {
        match (self.by_path, self.rel.file_name()) {
            (true, _) => self.dir.open_file(&self.rel),
            (false, Some(name)) => self.dir.open_file(Path::new(name)),
            (false, None) => Err(std::io::Error::other("not a file name")),
        }
    }

    /// The node path to report (the user-visible name in an atomic-writer volume). Made
    /// when needed (a finding, an error): most files have neither.
    pub fn node_path(&self) -> String {
        let inner = Path::new(OsStr::from_bytes(&self.rel.as_os_str().as_bytes()[self.inner_at..]));
        let shown = self.shown.as_deref().unwrap_or(inner);
        // A scope that is one file: `join("")` would add a trailing slash.
        if shown.as_os_str().is_empty() {
            display_path(self.scope_path.as_os_str())
        } else {
            display_path(self.scope_path.join(shown).as_os_str())
        }
    }
}

/// What the walk yields.
#[derive(Debug)]
pub enum WalkItem {
    /// A file to read.
    File(FileJob),
    /// Something that could not be listed.
    Error(ScanError),
    /// An entry that is not read because it is not a regular file or a directory: what
    /// it is (`symlink`, `FIFO`, `socket`, `char device`, `block device`).
    Skipped(&'static str),
}

/// Walks one scope beneath `root`.
pub fn walk_scope(root: &RootDir, scope: Scope) -> impl Iterator<Item = WalkItem> + '_ {
    let Scope { rel, node_path, kind } = scope;
    let mut pod = None;
    let (volumes, fixed, owner) = match kind {
        ScopeKind::Pod { uid, volumes } => {
            pod = Some(Arc::<str>::from(uid));
            (volumes, None, None)
        }
        ScopeKind::Extra => (Default::default(), Some(SiteId::Other), None),
        ScopeKind::Site(site) => (Default::default(), Some(site), None),
        ScopeKind::Owned(owner) => (Default::default(), Some(owner.site), Some(Arc::new(owner))),
    };
    let scope_path: Arc<Path> = node_path.into();
    let base_bytes = rel.as_os_str().as_bytes().to_vec();
    root.walk(&rel).map(move |entry| {
        let (dir, path, ino, by_path) = match entry {
            Entry::File { dir, rel, ino, by_path } => (dir, rel, ino, by_path),
            Entry::Special(kind) => return WalkItem::Skipped(kind),
            Entry::Error { rel, error } => {
                let inner = under(&rel, &base_bytes);
                let path = display_path(scope_path.join(inner).as_os_str());
                return WalkItem::Error(ScanError { path, error: io_message(&error) });
            }
        };
        let inner = under(&path, &base_bytes);
        let (site, shown, stale) = match fixed {
            None => {
                let (site, shown, stale) = place_in_pod(inner, &volumes);
                (site, (shown != inner).then_some(shown), stale)
            }
            Some(site) => (site, None, false),
        };
        let log = match fixed {
            Some(SiteId::PodLog) => LogOwner::of(inner).map(Arc::new),
            _ => None,
        };
        let inner_at = path.as_os_str().len() - inner.as_os_str().len();
        WalkItem::File(FileJob {
            inner_at,
            rel: path,
            dir,
            by_path,
            ino,
            scope_path: scope_path.clone(),
            shown,
            site,
            pod: pod.clone(),
            stale,
            owner: owner.clone(),
            log,
        })
    })
}

/// The path under `base` (bytes of a path) of a walked path: `base` itself (empty), or
/// `base/…` (what follows the separator). Sliced, not parsed: the walk builds every path
/// it yields by joining names onto `base`.
fn under<'a>(p: &'a Path, base: &[u8]) -> &'a Path {
    let rest = p.as_os_str().as_bytes().strip_prefix(base).unwrap_or(b"");
    Path::new(OsStr::from_bytes(rest.strip_prefix(b"/").unwrap_or(rest)))
}

/// Site, shown path (relative to the pod dir) and staleness of a file in a pod dir.
fn place_in_pod(
    inner: &Path,
    volumes: &std::collections::HashMap<PathBuf, AtomicVolume>,
) -> (SiteId, PathBuf, bool) {
    let class = kubelet::classify(inner);
    match class.volume {
        Some((vol, rest)) => {
            let (shown, stale) = match volumes.get(&vol) {
                Some(v) => v.visible_path(&rest),
                None => (rest, false),
            };
            (class.site, vol.join(shown), stale)
        }
        None => (class.site, inner.to_path_buf(), false),
    }
}
