//! Node-layout knowledge: turns a root and the configured node paths into the
//! [`Scope`]s to walk (one per kubelet pod dir, containerd's metadata database, one per
//! `--path`), without reading any file contents or matching anything.

pub mod containerd;
pub mod json;
pub mod kubelet;
pub mod logs;
pub mod other_runtimes;

use crate::finding::{Category, ScanError, SiteId};
use crate::sys::{Kind, RootDir};
use kubelet::AtomicVolume;
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Path, PathBuf};

/// A subtree to walk, and what it is.
#[derive(Debug)]
pub struct Scope {
    /// Where it is, relative to the root, with no symlink in it.
    pub rel: PathBuf,
    /// The node path shown in reports for `rel`.
    pub node_path: PathBuf,
    /// What kind of subtree.
    pub kind: ScopeKind,
}

/// The kinds of subtrees.
#[derive(Debug)]
pub enum ScopeKind {
    /// A kubelet pod dir.
    Pod {
        /// The pod UID (directory name).
        uid: String,
        /// Atomic-writer volumes of the pod, by volume dir relative to the pod dir.
        volumes: HashMap<PathBuf, AtomicVolume>,
    },
    /// An extra path given with `--path`.
    Extra,
    /// A file or dir whose files all belong to one site (containerd's `meta.db`).
    Site(SiteId),
    /// A layer dir or a container's file, whose owner the runtime's records name.
    Owned(Ownership),
}

/// What a layer dir (a snapshot's `fs`, a `diff`) or a container's file (an OCI bundle's
/// `config.json`, a stored spec) is, from the runtime's records.
#[derive(Debug)]
pub struct Ownership {
    /// The site.
    pub site: SiteId,
    /// `container-layer`, `image-layer` or `env-persisted`.
    pub category: Category,
    /// The container whose layer or file it is.
    pub container: Option<String>,
    /// That container's pod.
    pub pod_uid: Option<String>,
    /// Said of an orphan (a dir no snapshot record names).
    pub note: Option<&'static str>,
    /// The images an image layer belongs to, as far as the runtime's records tell.
    pub images: Vec<String>,
}

impl Ownership {
    /// A place of `site` and `category` owned by `container` of the pod `pod_uid`.
    pub fn new(
        site: SiteId,
        category: Category,
        container: Option<String>,
        pod_uid: Option<String>,
    ) -> Ownership {
        Ownership { site, category, container, pod_uid, note: None, images: Vec::new() }
    }
}

/// What an orphaned snapshot dir is.
const ORPHAN: &str = "a snapshot dir the snapshotter's database does not know (an orphan \
    left by an interrupted removal)";

/// Where to look on the node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Kubelet root dir, a node path (`/var/lib/kubelet`).
    pub kubelet_dir: PathBuf,
    /// Whether `kubelet_dir` was given by the user (missing is then an error).
    pub kubelet_dir_explicit: bool,
    /// containerd root dir, a node path (`/var/lib/containerd`).
    pub containerd_root: PathBuf,
    /// containerd state dir, a node path (`/run/containerd`).
    pub containerd_state: PathBuf,
    /// The pod log dir, a node path (`/var/log/pods`).
    pub pod_logs: PathBuf,
    /// etcd data dirs and backups given by the user; none means `/var/lib/etcd` when it
    /// exists.
    pub etcd: Vec<PathBuf>,
    /// Whether `containerd_root` was given by the user (missing is then an error).
    pub containerd_root_explicit: bool,
    /// Extra node paths scanned as site `other`.
    pub extra: Vec<PathBuf>,
    /// `--max-file-size`: no record or database larger than this is read during
    /// discovery either.
    pub max_file_size: Option<u64>,
}

/// The largest database discovery reads whole (`meta.db`, a snapshotter's `metadata.db`),
/// as the scan's own cap on a whole `meta.db`.
pub const MAX_DB: u64 = 1 << 30;

impl Layout {
    /// The most bytes discovery reads of one file whose own cap is `cap`.
    pub fn cap(&self, cap: u64) -> u64 {
        self.max_file_size.map_or(cap, |m| m.min(cap))
    }
}

/// etcd's data dir as kubeadm sets it up (`member/snap/db`, `member/wal/`).
pub const DEFAULT_ETCD_DIR: &str = "/var/lib/etcd";

/// The default kubelet root (`--root-dir` default, NODE-LAYOUT.md §1.1).
pub const DEFAULT_KUBELET_DIR: &str = "/var/lib/kubelet";

/// Lists every subtree to walk. Problems go to `errors`; nothing here is fatal.
pub fn discover(root: &RootDir, layout: &Layout, errors: &mut Vec<ScanError>) -> Vec<Scope> {
    let mut scopes = Vec::new();
    let pods_node = layout.kubelet_dir.join("pods");
    match resolve(root, &pods_node) {
        Ok(pods_rel) => match root.list(&pods_rel) {
            Ok(entries) => {
                for (name, _) in entries.into_iter().filter(|(_, k)| *k == Kind::Dir) {
                    let rel = pods_rel.join(&name);
                    scopes.push(Scope {
                        node_path: pods_node.join(&name),
                        kind: ScopeKind::Pod {
                            uid: name.to_string_lossy().into_owned(),
                            volumes: atomic_volumes(root, &rel),
                        },
                        rel,
                    });
                }
            }
            Err(e) => errors.push(error_at(&pods_node, &e)),
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound && !layout.kubelet_dir_explicit => {}
        Err(e) => errors.push(error_at(&pods_node, &e)),
    }
    let meta_db = layout.containerd_root.join(containerd::META_DB);
    match resolve(root, &layout.containerd_root) {
        Ok(_) => match resolve(root, &meta_db) {
            Ok(rel) => scopes.push(Scope {
                rel,
                node_path: meta_db,
                kind: ScopeKind::Site(SiteId::ContainerdMetadata),
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => errors.push(error_at(&meta_db, &e)),
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound && !layout.containerd_root_explicit => {}
        Err(e) => errors.push(error_at(&layout.containerd_root, &e)),
    }
    match resolve(root, &layout.pod_logs) {
        Ok(rel) => scopes.push(Scope {
            rel,
            node_path: layout.pod_logs.clone(),
            kind: ScopeKind::Site(SiteId::PodLog),
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => errors.push(error_at(&layout.pod_logs, &e)),
    }
    bundles(root, &layout.containerd_state.join(containerd::TASKS), &mut scopes, errors);
    snapshots(root, layout, &mut scopes, errors);
    other_runtimes::discover(root, layout, &mut scopes, errors);
    if layout.etcd.is_empty() {
        let default = Path::new(DEFAULT_ETCD_DIR);
        if let Ok(rel) = resolve(root, default) {
            let kind = ScopeKind::Site(SiteId::Etcd);
            scopes.push(Scope { rel, node_path: default.to_path_buf(), kind });
        }
    }
    for p in &layout.etcd {
        match resolve(root, p) {
            Ok(rel) => {
                let kind = ScopeKind::Site(SiteId::Etcd);
                scopes.push(Scope { rel, node_path: p.clone(), kind });
            }
            Err(e) => errors.push(error_at(p, &e)),
        }
    }
    for p in &layout.extra {
        match resolve(root, p) {
            Ok(rel) => scopes.push(Scope { rel, node_path: p.clone(), kind: ScopeKind::Extra }),
            Err(e) => errors.push(error_at(p, &e)),
        }
    }
    scopes
}

/// The files of every snapshot of the overlayfs and native snapshotters, with what each
/// is: a snapshot the snapshotter records as active, whose key is a container's snapshot
/// key in `meta.db`, is that container's writable layer; a committed one is an image layer
/// (scanned once however many containers share it), named after the images whose chains
/// hold it; one no record names is an orphan.
fn snapshots(
    root: &RootDir,
    layout: &Layout,
    scopes: &mut Vec<Scope>,
    errors: &mut Vec<ScanError>,
) {
    let ctrd = &layout.containerd_root;
    let cap = layout.cap(MAX_DB);
    let present: Vec<_> = containerd::SNAPSHOTTERS
        .iter()
        .filter_map(|&(name, dir, files)| {
            let base = ctrd.join(dir);
            let rel = resolve(root, &base.join("snapshots")).ok()?;
            Some((name, base, rel, files))
        })
        .collect();
    if present.is_empty() {
        return;
    }
    // Errors of meta.db are its own scope's to report.
    let meta = read_db(root, &ctrd.join(containerd::META_DB), cap, &mut Vec::new())
        .and_then(|data| containerd::MetaDb::read(&data).ok())
        .map(|(db, _)| db)
        .unwrap_or_default();
    let mut owners: HashMap<(&str, &str), (&str, Option<&str>)> = HashMap::new();
    for c in &meta.containers {
        if let Some((snapshotter, key)) = &c.snapshot {
            owners.insert((snapshotter, key), (&c.id, c.pod_uid.as_deref()));
        }
    }
    for (snapshotter, base, rel, files) in present {
        let db_path = base.join("metadata.db");
        let mut records = BTreeMap::new();
        if let Some(data) = read_db(root, &db_path, cap, errors) {
            match containerd::read_snapshots(&data) {
                Ok((r, errs)) => {
                    records = r;
                    errors.extend(errs.iter().map(|e| bolt_error(&db_path, e)));
                }
                Err(e) => errors.push(bolt_error(&db_path, &e)),
            }
        }
        let images = containerd::layer_images(snapshotter, &records, &meta.images);
        let mut ids: Vec<(u64, std::ffi::OsString)> = subdirs(root, &rel)
            .into_iter()
            .filter_map(|name| Some((name.to_str()?.parse().ok()?, name)))
            .collect();
        ids.sort();
        for (id, name) in ids {
            let mut own =
                Ownership::new(SiteId::ContainerdSnapshot, Category::ContainerLayer, None, None);
            match records.get(&id) {
                Some(s) if s.kind == containerd::SnapshotKind::Committed => {
                    own.category = Category::ImageLayer;
                    own.images = images.get(&id).into_iter().flatten().cloned().collect();
                }
                Some(s) => {
                    if let Some((c, pod)) = owners.get(&(snapshotter, s.key.as_str())) {
                        own.container = Some(c.to_string());
                        own.pod_uid = pod.map(str::to_owned);
                    }
                }
                None => own.note = Some(ORPHAN),
            }
            // `join("")` would add a trailing slash.
            let within = |p: PathBuf| if files.is_empty() { p } else { p.join(files) };
            scopes.push(Scope {
                rel: within(rel.join(&name)),
                node_path: within(base.join("snapshots").join(&name)),
                kind: ScopeKind::Owned(own),
            });
        }
    }
}

/// The bytes of a database file (a regular file of at most `cap` bytes), or none with an
/// error entry.
fn read_db(root: &RootDir, node: &Path, cap: u64, errors: &mut Vec<ScanError>) -> Option<Vec<u8>> {
    let rel = resolve(root, node).ok()?;
    root.read_file(&rel, cap).map_err(|e| errors.push(error_at(node, &e))).ok()
}

/// The sorted names of the dirs (not symlinks to dirs) in `rel`, relative to the root,
/// listed through the root's descriptors; none when it cannot be listed.
pub(crate) fn subdirs(root: &RootDir, rel: &Path) -> Vec<std::ffi::OsString> {
    let entries = root.list(rel).unwrap_or_default();
    entries.into_iter().filter(|(_, k)| *k == Kind::Dir).map(|(name, _)| name).collect()
}

/// An error entry for a damaged database at `node_path`.
fn bolt_error(node_path: &Path, e: &crate::bbolt::Error) -> ScanError {
    ScanError { path: crate::report::display_path(node_path.as_os_str()), error: e.to_string() }
}

/// The `config.json` of every task bundle under `tasks` (`<namespace>/<id>/`), live or
/// left behind by a crashed delete (`<namespace>/.<id>/`). The bundle's `rootfs` (the
/// container's mounted filesystem) is not walked.
fn bundles(root: &RootDir, tasks: &Path, scopes: &mut Vec<Scope>, errors: &mut Vec<ScanError>) {
    let tasks_rel = match resolve(root, tasks) {
        Ok(rel) => rel,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return,
        Err(e) => return errors.push(error_at(tasks, &e)),
    };
    let dirs = |rel: &Path| subdirs(root, rel);
    for ns in dirs(&tasks_rel) {
        for id in dirs(&tasks_rel.join(&ns)) {
            let bundle = tasks_rel.join(&ns).join(&id);
            let listed = root.list(&bundle).unwrap_or_default();
            if !listed.iter().any(|(n, k)| n == "config.json" && *k == Kind::File) {
                continue;
            }
            let rel = bundle.join("config.json");
            let name = id.to_string_lossy();
            scopes.push(Scope {
                node_path: tasks.join(&ns).join(&id).join("config.json"),
                kind: ScopeKind::Owned(Ownership::new(
                    SiteId::OciBundle,
                    Category::EnvPersisted,
                    Some(name.strip_prefix('.').unwrap_or(&name).to_owned()),
                    None,
                )),
                rel,
            });
        }
    }
}

/// The atomic-writer volumes of the pod dir at `pod_rel`: secret and projected volume
/// dirs, and CSI `mount` dirs (the Secrets Store driver uses the same writer).
fn atomic_volumes(root: &RootDir, pod_rel: &Path) -> HashMap<PathBuf, AtomicVolume> {
    let mut out = HashMap::new();
    for (plugin, sub) in [
        ("kubernetes.io~secret", None),
        ("kubernetes.io~projected", None),
        ("kubernetes.io~csi", Some("mount")),
    ] {
        let plugin_rel = Path::new("volumes").join(plugin);
        for name in subdirs(root, &pod_rel.join(&plugin_rel)) {
            let mut vol = plugin_rel.join(name);
            if let Some(sub) = sub {
                vol.push(sub);
            }
            let info = AtomicVolume::read(root, &pod_rel.join(&vol));
            out.insert(vol, info);
        }
    }
    out
}

/// Resolves a node path to a path relative to the root with no symlink in it. Symlinks on
/// the way (e.g. `/var/lib/kubelet → /data/kubelet`) are followed only while they stay
/// inside the root.
pub fn resolve(root: &RootDir, node_path: &Path) -> io::Result<PathBuf> {
    // Name by name through the root's descriptor, never into a FUSE or network mount.
    root.resolve(node_path)
}

/// An error entry for a node path. The message is the OS error text only.
pub fn error_at(node_path: &Path, e: &io::Error) -> ScanError {
    ScanError { path: crate::report::display_path(node_path.as_os_str()), error: io_message(e) }
}

/// The OS error text without the "(os error N)" suffix.
pub fn io_message(e: &io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_owned(),
        None => s,
    }
}
