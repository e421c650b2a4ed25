//! What is on disk under kubelet's pod dirs, for planning: each pod dir's identity and
//! age, its secret-bearing volume dirs and subPath copies (identity, files, bytes, a
//! tmpfs mounted there), what else it holds, and what is mounted below it.
//!
//! Read-only, through the root's descriptors like the scan (never through a symlink,
//! never leaving the root, each directory listed through its parent's descriptor, no
//! mount point crossed but a whole tmpfs, nothing on a FUSE or network filesystem): a
//! survey only informs the plan. [`super::apply`] checks every action again through
//! descriptors before acting.

use crate::finding::{ScanError, SiteId};
use crate::node::kubelet::{PODS, SUBPATHS, VOLUMES, VOLUME_PLUGINS};
use crate::sys::mount::Mount;
use crate::sys::tree::{Ident, Met, Step};
use crate::sys::{Kind, RootDir};
use crate::text::display_path;
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
        | SiteId::ContainerdContent
        | SiteId::OciBundle
        | SiteId::PodLog
        | SiteId::ContainersStorage
        | SiteId::DockerStorage
        | SiteId::RuntimeLog
        | SiteId::RuntimeVolume
        | SiteId::Etcd
        | SiteId::Kine
        | SiteId::Dqlite
        | SiteId::ImageArchive
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
        let Ok(dir) = root.open_dir(&rel(&node)) else { continue };
        let Ok((ident, mtime)) = dir.stat() else { continue };
        let below = crate::sys::mount::below(mounts, &host(&node));
        let mounted: Vec<(PathBuf, String, bool)> =
            below.iter().map(|m| (root.node(&m.point), m.describe(), m.is_whole_tmpfs())).collect();
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
                pod.targets.extend(target(root, path, kind, &pod.mounts, &below));
            }
        }
        for vol in children(root, &rel(&node.join(SUBPATHS))) {
            for ctr in children(root, &rel(&node.join(SUBPATHS).join(&vol))) {
                let dir = node.join(SUBPATHS).join(&vol).join(&ctr);
                for index in children(root, &rel(&dir)) {
                    let path = dir.join(index);
                    pod.targets.extend(target(
                        root,
                        path,
                        TargetKind::Subpath,
                        &pod.mounts,
                        &below,
                    ));
                }
            }
        }
        // Everything else in the pod dir, through the descriptor its identity came from.
        let targets: Vec<PathBuf> = pod.targets.iter().map(|t| t.path.clone()).collect();
        let step = steps(root, &node, &below, &targets);
        if step(Path::new("")) != Step::Skip {
            dir.visit(&step, &mut |met| match met {
                Met::Entry { rel, regular, size } => {
                    if super::bookkeeping(rel) && regular {
                        pod.bookkeeping_files += 1;
                        pod.bookkeeping_bytes += size;
                    } else {
                        pod.others.push(rel.to_path_buf());
                    }
                }
                Met::Error { rel, error } => {
                    // What cannot be read cannot be shown to be only bookkeeping.
                    pod.others.push(rel.to_path_buf());
                    err(&node.join(rel), error);
                }
            });
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

/// How a walk below the node path `start` treats each path below it (relative to
/// `start`; `""` is `start`): what `skip` names (node paths) and the mount points of the
/// mounts `below` that are not a whole tmpfs are left out, a whole tmpfs is entered.
fn steps<'a>(
    root: &'a RootDir,
    start: &'a Path,
    below: &'a [&'a Mount],
    skip: &'a [PathBuf],
) -> impl Fn(&Path) -> Step + 'a {
    move |rel| {
        let node = if rel.as_os_str().is_empty() { start.to_path_buf() } else { start.join(rel) };
        if skip.contains(&node) {
            return Step::Skip;
        }
        let host = root.host(&node);
        let here: Vec<&Mount> = below.iter().copied().filter(|m| m.point == host).collect();
        match here.last() {
            None => Step::Look,
            Some(_) if here.iter().any(|m| !m.is_whole_tmpfs()) => Step::Skip,
            // The one on top of any others there.
            Some(m) => Step::Enter(m.id),
        }
    }
}

/// A target at node path `path`, unless it is missing or a symlink (left to the "others"
/// of its pod: a symlink where kubelet makes dirs is not kubelet's), or on a FUSE or
/// network filesystem (its pod has a mount no plan touches).
fn target(
    root: &RootDir,
    path: PathBuf,
    kind: TargetKind,
    mounts: &[(PathBuf, String, bool)],
    below: &[&Mount],
) -> Option<Target> {
    let rel = path.strip_prefix("/").unwrap_or(&path).to_path_buf();
    let st = root.lstat(&rel).ok()?;
    if st.kind == Kind::Symlink {
        return None;
    }
    let (mut files, mut bytes) = (0, 0);
    {
        let step = steps(root, &path, below, &[]);
        match st.kind {
            _ if step(Path::new("")) == Step::Skip => {}
            Kind::Dir => {
                if let Ok(dir) = root.open_dir(&rel) {
                    dir.visit(&step, &mut |met| {
                        if let Met::Entry { size, .. } = met {
                            files += 1;
                            bytes += size;
                        }
                    });
                }
            }
            _ => (files, bytes) = (1, st.size),
        }
    }
    Some(Target {
        // Only at a volume: a subPath copy's mount is a bind mount, never kubelet's tmpfs.
        tmpfs_mount: kind != TargetKind::Subpath
            && mounts.iter().any(|(p, _, whole_tmpfs)| *p == path && *whole_tmpfs),
        path,
        kind,
        ident: st.ident,
        files,
        bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, MetadataExt};

    fn write(p: &Path, data: &[u8]) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, data).unwrap();
    }

    /// An atomic-writer volume at `dir`: two files, `..data` and a symlink per key.
    fn volume(dir: &Path) {
        write(&dir.join("..2026_01_01_00_00_00.1/password"), b"hunter2hunter2");
        write(&dir.join("..2026_01_01_00_00_00.1/user"), b"admin");
        symlink("..2026_01_01_00_00_00.1", dir.join("..data")).unwrap();
        symlink("..data/password", dir.join("password")).unwrap();
        symlink("..data/user", dir.join("user")).unwrap();
    }

    /// Through the root's descriptors, the survey counts what `lstat` by path says: every
    /// entry but directories (symlinks at the length of their targets), a target's
    /// identity its own; symlinks where kubelet makes dirs are no targets, and whatever is
    /// not kubelet's bookkeeping is the pod's "others", however deep.
    #[test]
    fn counts_are_lstats_over_every_entry_but_directories() {
        let tmp = tempfile::tempdir().unwrap();
        let pod = tmp.path().join("var/lib/kubelet/pods/u1");
        write(&pod.join("etc-hosts"), b"127.0.0.1 localhost\n");
        write(&pod.join("containers/app/abcd"), b"x");
        write(&pod.join("plugins/kubernetes.io~empty-dir/cache/ready"), b"");
        let secret = pod.join("volumes/kubernetes.io~secret/db");
        volume(&secret);
        write(&pod.join("volumes/kubernetes.io~csi/vault/vol_data.json"), b"{}");
        write(&pod.join("volumes/kubernetes.io~csi/vault/mount/secret.txt"), b"abc");
        write(&pod.join("volume-subpaths/tls/nginx/0"), b"file subpath");
        write(&pod.join("volume-subpaths/tls/nginx/1/inner"), b"dir subpath");
        let mut deep = pod.join("volumes/kubernetes.io~empty-dir/deep");
        for _ in 0..40 {
            deep.push("d");
        }
        write(&deep.join("bottom"), b"deep");
        std::fs::create_dir_all(pod.join("volumes/kubernetes.io~empty-dir/empty")).unwrap();
        nix::unistd::mkfifo(&pod.join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        symlink("/etc", pod.join("outside")).unwrap();
        symlink("/etc", pod.join("volumes/kubernetes.io~secret/linked")).unwrap();
        std::fs::create_dir_all(pod.join("volumes/kubernetes.io~projected")).unwrap();
        symlink("/etc", pod.join("volumes/kubernetes.io~projected/linked")).unwrap();

        let root = RootDir::open(tmp.path()).unwrap();
        let (pods, errors) = survey(&root, Path::new("/var/lib/kubelet"), &[], &|_| false);
        assert!(errors.is_empty(), "{errors:?}");
        let [pod_dir] = &pods[..] else { panic!("{pods:?}") };
        let node = Path::new("/var/lib/kubelet/pods/u1");
        let counts: Vec<(PathBuf, TargetKind, u64, u64)> =
            pod_dir.targets.iter().map(|t| (t.path.clone(), t.kind, t.files, t.bytes)).collect();
        // The volume: 14 + 5 bytes of files, 23 + 15 + 11 of symlinks.
        assert_eq!(
            counts,
            [
                (node.join("volumes/kubernetes.io~secret/db"), TargetKind::SecretVolume, 5, 68),
                (node.join("volumes/kubernetes.io~csi/vault/mount"), TargetKind::CsiVolume, 1, 3),
                (node.join("volume-subpaths/tls/nginx/0"), TargetKind::Subpath, 1, 12),
                (node.join("volume-subpaths/tls/nginx/1"), TargetKind::Subpath, 1, 11),
            ]
        );
        let st = std::fs::symlink_metadata(&secret).unwrap();
        assert_eq!(pod_dir.targets[0].ident, Ident { dev: st.dev(), ino: st.ino() });
        let st = std::fs::symlink_metadata(&pod).unwrap();
        assert_eq!(pod_dir.ident, Ident { dev: st.dev(), ino: st.ino() });
        // etc-hosts, containers/app/abcd, plugins/…/ready and the CSI volume's record.
        assert_eq!((pod_dir.bookkeeping_files, pod_dir.bookkeeping_bytes), (4, 23));
        let mut others = pod_dir.others.clone();
        others.sort();
        let deep = deep.join("bottom");
        let deep = deep.strip_prefix(&pod).unwrap();
        assert_eq!(
            others,
            [
                Path::new("fifo"),
                Path::new("outside"),
                deep,
                Path::new("volumes/kubernetes.io~projected/linked"),
                Path::new("volumes/kubernetes.io~secret/linked"),
            ]
        );
    }
}
