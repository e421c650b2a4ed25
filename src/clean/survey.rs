//! What is on disk under kubelet's pod dirs, for planning: each pod dir's identity and
//! age, its secret-bearing volume dirs and subPath copies (identity, files, bytes, a
//! tmpfs mounted there), what else it holds, and what is mounted below it.
//!
//! Read-only and by path (`lstat`, never following a symlink): a survey only informs the
//! plan. [`super::apply`] checks every action again through descriptors before acting.

use crate::finding::{ScanError, SiteId};
use crate::node::kubelet::{PODS, SUBPATHS, VOLUMES, VOLUME_PLUGINS};
use crate::report::display_path;
use crate::sys::mount::Mount;
use crate::sys::tree::Ident;
use crate::sys::{Kind, RootDir};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// What a removable entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetKind {
    /// `volumes/kubernetes.io~secret/<vol>`.
    SecretVolume,
    /// `volumes/kubernetes.io~projected/<vol>`.
    ProjectedVolume,
    /// `volumes/kubernetes.io~csi/<vol>/mount`.
    CsiVolume,
    /// `volume-subpaths/<vol>/<container>/<index>`.
    Subpath,
}

/// A secret-bearing entry of a pod dir.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// Node path.
    pub path: PathBuf,
    /// What it is.
    pub kind: TargetKind,
    /// Its identity (of the mounted filesystem's root when one is mounted there).
    pub ident: Ident,
    /// A tmpfs is mounted exactly there.
    pub tmpfs_mount: bool,
    /// Files below it.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// A pod dir as found on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodDir {
    /// The pod uid (the dir's name).
    pub uid: String,
    /// Node path.
    pub path: PathBuf,
    /// Identity of the dir.
    pub ident: Ident,
    /// Its modification time, Unix seconds.
    pub mtime: i64,
    /// Its secret-bearing entries.
    pub targets: Vec<Target>,
    /// Files that are neither in a target nor kubelet's bookkeeping (relative paths).
    pub others: Vec<PathBuf>,
    /// Bookkeeping files (`etc-hosts`, `containers/…`, `plugins/…`) and their bytes.
    pub bookkeeping_files: u64,
    /// Bytes of those.
    pub bookkeeping_bytes: u64,
    /// What is mounted at or below the pod dir: node path, what (see
    /// [`Mount::describe`]), and whether it is a whole tmpfs.
    pub mounts: Vec<(PathBuf, String, bool)>,
}

/// The target kind of a kubelet site's dirs; none for the other sites.
fn target_kind(site: SiteId) -> Option<TargetKind> {
    match site {
        SiteId::KubeletSecretVolume => Some(TargetKind::SecretVolume),
        SiteId::KubeletProjectedVolume => Some(TargetKind::ProjectedVolume),
        SiteId::KubeletCsiVolume => Some(TargetKind::CsiVolume),
        SiteId::KubeletSubpath => Some(TargetKind::Subpath),
        SiteId::ContainerdSnapshot
        | SiteId::ContainerdMetadata
        | SiteId::OciBundle
        | SiteId::PodLog
        | SiteId::CrioStorage
        | SiteId::DockerStorage
        | SiteId::Etcd
        | SiteId::Other => None,
    }
}

/// Surveys every pod dir under `<kubelet_dir>/pods` (a node path) of the root, with the
/// process's mount table. Pods for which `live(uid)` holds get only their identity, age
/// and mounts: nothing of theirs can be planned, so their volumes are not walked. Walks
/// never descend into a mount point other than a whole tmpfs (a dead NFS server cannot
/// hang a survey).
pub fn survey(
    root: &RootDir,
    kubelet_dir: &Path,
    mounts: &[Mount],
    live: &dyn Fn(&str) -> bool,
) -> (Vec<PodDir>, Vec<ScanError>) {
    let node_pods = kubelet_dir.join(PODS);
    let host = |node: &Path| root.host(node);
    let mut errors = Vec::new();
    let mut err = |p: &Path, e: std::io::Error| {
        errors.push(ScanError { path: display_path(p.as_os_str()), error: e.to_string() })
    };
    // Listed and opened through the root's descriptors: kubelet's dir reached through a
    // symlink is not kubelet's (`apply` would refuse it too), and nothing outside the root
    // is listed.
    let rel = |node: &Path| node.strip_prefix("/").unwrap_or(node).to_path_buf();
    let entries = match root.list(&rel(&node_pods)) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (Vec::new(), Vec::new()),
        Err(e) => {
            err(&node_pods, e);
            return (Vec::new(), errors);
        }
    };
    let mut pods = Vec::new();
    for (name, kind) in entries {
        if kind != Kind::Dir {
            continue;
        }
        let node = node_pods.join(&name);
        let Ok((ident, mtime)) = root.open_dir(&rel(&node)).and_then(|d| d.stat()) else {
            continue;
        };
        let below = crate::sys::mount::below(mounts, &host(&node));
        let mounted: Vec<(PathBuf, String, bool)> =
            below.iter().map(|m| (root.node(&m.point), m.describe(), m.is_whole_tmpfs())).collect();
        // Mount points the walks must not enter: all but a whole tmpfs (kubelet's).
        let fences: Vec<PathBuf> =
            below.iter().filter(|m| !m.is_whole_tmpfs()).map(|m| m.point.clone()).collect();
        let mut pod = PodDir {
            uid: name.to_string_lossy().into_owned(),
            ident,
            mtime,
            targets: Vec::new(),
            others: Vec::new(),
            bookkeeping_files: 0,
            bookkeeping_bytes: 0,
            mounts: mounted,
            path: node.clone(),
        };
        if live(&pod.uid) {
            pods.push(pod);
            continue;
        }
        for plugin in VOLUME_PLUGINS {
            let Some(kind) = target_kind(plugin.site) else { continue };
            for vol in children(root, &rel(&node.join(VOLUMES).join(plugin.dir))) {
                let path = node.join(VOLUMES).join(plugin.dir).join(&vol);
                let path = match plugin.data {
                    Some(data) => path.join(data),
                    None => path,
                };
                pod.targets.extend(target(&host(&path), path, kind, &pod.mounts, &fences));
            }
        }
        for vol in children(root, &rel(&node.join(SUBPATHS))) {
            for ctr in children(root, &rel(&node.join(SUBPATHS).join(&vol))) {
                let dir = node.join(SUBPATHS).join(&vol).join(&ctr);
                for index in children(root, &rel(&dir)) {
                    let path = dir.join(index);
                    pod.targets.extend(target(
                        &host(&path),
                        path,
                        TargetKind::Subpath,
                        &pod.mounts,
                        &fences,
                    ));
                }
            }
        }
        // Everything else in the pod dir.
        let targets: Vec<PathBuf> = pod.targets.iter().map(|t| host(&t.path)).collect();
        let walk = walkdir::WalkDir::new(host(&node))
            .follow_links(false)
            .into_iter()
            .filter_entry(|e| !targets.iter().chain(&fences).any(|t| t == e.path()));
        for e in walk {
            let e = match e {
                Ok(e) => e,
                Err(e) => {
                    // What cannot be read cannot be shown to be only bookkeeping.
                    let p = e.path().map(Path::to_path_buf).unwrap_or_else(|| host(&node));
                    pod.others.push(p.strip_prefix(host(&node)).unwrap_or(&p).to_path_buf());
                    err(&p, e.into());
                    continue;
                }
            };
            if e.file_type().is_dir() {
                continue;
            }
            let rel = e.path().strip_prefix(host(&node)).unwrap_or(e.path()).to_path_buf();
            if super::bookkeeping(&rel) && e.file_type().is_file() {
                pod.bookkeeping_files += 1;
                pod.bookkeeping_bytes += e.metadata().map_or(0, |m| m.len());
            } else {
                pod.others.push(rel);
            }
        }
        pods.push(pod);
    }
    pods.sort_by(|a, b| a.path.cmp(&b.path));
    errors.sort();
    (pods, errors)
}

/// The names in the dir at `rel` (relative to the root), sorted, listed through the
/// root's descriptors: none if it is missing, not a dir, or reached through a symlink
/// anywhere on its path (kubelet makes none there).
fn children(root: &RootDir, rel: &Path) -> Vec<std::ffi::OsString> {
    root.list(rel).map(|e| e.into_iter().map(|(name, _)| name).collect()).unwrap_or_default()
}

/// A target at `host` (node path `path`), unless it is missing or a symlink (left to the
/// "others" of its pod: a symlink where kubelet makes dirs is not kubelet's).
fn target(
    host: &Path,
    path: PathBuf,
    kind: TargetKind,
    mounts: &[(PathBuf, String, bool)],
    fences: &[PathBuf],
) -> Option<Target> {
    let meta = std::fs::symlink_metadata(host).ok()?;
    if meta.file_type().is_symlink() {
        return None;
    }
    let (mut files, mut bytes) = (0, 0);
    let walk = walkdir::WalkDir::new(host).follow_links(false).into_iter();
    for e in walk.filter_entry(|e| !fences.iter().any(|f| f == e.path())).flatten() {
        if !e.file_type().is_dir() {
            files += 1;
            bytes += e.metadata().map_or(0, |m| m.len());
        }
    }
    Some(Target {
        // Only at a volume: a subPath copy's mount is a bind mount, never kubelet's tmpfs.
        tmpfs_mount: kind != TargetKind::Subpath
            && mounts.iter().any(|(p, _, whole_tmpfs)| *p == path && *whole_tmpfs),
        path,
        kind,
        ident: Ident { dev: meta.dev(), ino: meta.ino() },
        files,
        bytes,
    })
}
