//! Kubelet's on-disk layout: which pod-dir paths are which site, and how an atomic-writer
//! volume maps real files to the names a person sees.
//!
//! Facts in `docs/NODE-LAYOUT.md` (kubelet `pkg/kubelet/config/defaults.go`,
//! `pkg/volume/util/atomic_writer.go`, `pkg/volume/util/subpath/subpath_linux.go`):
//! `<kubelet>/pods/<uid>/volumes/<plugin with / escaped as ~>/<vol>/`, CSI data one level
//! deeper at `<vol>/mount/`, subPath bind targets at `volume-subpaths/<vol>/<ctr>/<idx>`.
//! An atomic-writer volume holds one real dir `..<timestamp>.<rand>`, a symlink `..data`
//! to it, a transient `..data_tmp`, and one symlink `<name> → ..data/<name>` per top-level
//! key. Every `..`-prefixed entry belongs to the writer (payload paths may not start with
//! `..`).

use crate::finding::SiteId;
use crate::sys::RootDir;
use nix::dir::Type;
use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::path::{Component, Path, PathBuf};

/// Where a file inside a pod directory belongs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodFile {
    /// The site id.
    pub site: SiteId,
    /// For atomic-writer volumes: the volume dir relative to the pod dir, and the path of
    /// the file relative to that volume dir.
    pub volume: Option<(PathBuf, PathBuf)>,
    /// The volume's name, for a file of a Secret volume or a subPath copy of one.
    pub name: Option<String>,
}

/// The pod dirs, relative to kubelet's root dir: `pods/<uid>`.
pub const PODS: &str = "pods";
/// A pod's volume dirs, relative to its pod dir: `volumes/<plugin>/<vol>`.
pub const VOLUMES: &str = "volumes";
/// A pod's subPath copies, relative to its pod dir: `volume-subpaths/<vol>/<container>/<index>`
/// (`pkg/volume/util/subpath`).
pub const SUBPATHS: &str = "volume-subpaths";
/// kubelet's `/etc/hosts` for the pod's containers, a file in its pod dir.
pub const ETC_HOSTS: &str = "etc-hosts";
/// kubelet's record of the pod's containers (their termination logs), a pod dir's dir.
pub const CONTAINERS: &str = "containers";
/// Volume plugins' records of the pod, a pod dir's dir.
pub const PLUGINS: &str = "plugins";
/// The CSI record of a volume, in its volume dir (`pkg/volume/csi`).
pub const CSI_VOL_DATA: &str = "vol_data.json";

/// Classifies a path relative to a pod directory.
pub fn classify(rel: &Path) -> PodFile {
    let c: Vec<&OsStr> = rel
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s),
            _ => None,
        })
        .collect();
    let s = |i: usize| c.get(i).and_then(|x| x.to_str());
    let split = |depth: usize| {
        let vol: PathBuf = c[..depth].iter().collect();
        let rest: PathBuf = c[depth..].iter().collect();
        Some((vol, rest))
    };
    let name = |i: usize| c.get(i).map(|x| x.to_string_lossy().into_owned());
    if s(0) == Some(SUBPATHS) && c.len() >= 4 {
        return PodFile { site: SiteId::KubeletSubpath, volume: None, name: name(1) };
    }
    let plugin = VOLUME_PLUGINS.iter().find(|p| s(0) == Some(VOLUMES) && s(1) == Some(p.dir));
    match plugin {
        Some(p) if p.data.is_none() && c.len() > 3 => {
            PodFile { site: p.site, volume: split(3), name: name(2) }
        }
        Some(p) if p.data.is_some() && c.len() > 4 && s(3) == p.data => {
            PodFile { site: p.site, volume: split(4), name: name(2) }
        }
        _ => PodFile { site: SiteId::Other, volume: None, name: None },
    }
}

/// A kubelet volume plugin whose volumes hold Secret data written by the atomic writer.
#[derive(Debug)]
pub struct VolumePlugin {
    /// Its dir under a pod's `volumes/` (the plugin name, `/` escaped as `~`).
    pub dir: &'static str,
    /// The site of its volumes' files.
    pub site: SiteId,
    /// The dir within a volume dir where the data is (CSI's `mount`), if not the
    /// volume dir itself.
    pub data: Option<&'static str>,
}

/// The volume plugins of Secret data: `secret`, `projected`, and `csi` (the Secrets Store
/// driver uses the same writer, in the volume's `mount` dir).
pub const VOLUME_PLUGINS: [VolumePlugin; 3] = [
    VolumePlugin { dir: "kubernetes.io~secret", site: SiteId::KubeletSecretVolume, data: None },
    VolumePlugin {
        dir: "kubernetes.io~projected",
        site: SiteId::KubeletProjectedVolume,
        data: None,
    },
    VolumePlugin { dir: "kubernetes.io~csi", site: SiteId::KubeletCsiVolume, data: Some("mount") },
];

/// What an atomic-writer volume dir says about its own contents.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AtomicVolume {
    /// The timestamped dir `..data` points to, if it is a valid bare `..` name.
    pub current: Option<OsString>,
    /// Top-level names with a user-visible symlink `<name> → ..data/<name>`.
    pub visible: HashSet<OsString>,
}

impl AtomicVolume {
    /// Reads what the volume at `rel` (relative to the root) says of itself from its
    /// listing, reading its links only where the listing cannot tell: reading a symlink
    /// (or following one) updates its access time. The user-visible names are its
    /// top-level symlinks (kubelet makes each `<name> → ..data/<name>`); the live
    /// timestamped dir is the only one, and the `..data` link is read only when there are
    /// several, or a leftover `..data_tmp` (the superseded copies `scan` reports as
    /// stale). Unreadable parts leave the volume looking stale, never hide a file.
    pub fn read(root: &RootDir, rel: &Path) -> AtomicVolume {
        let mut vol = AtomicVolume::default();
        let Ok(entries) = root.list_dir(rel) else { return vol };
        let (mut data, mut data_tmp, mut dirs) = (false, false, Vec::new());
        for (name, ty) in entries {
            match (name.as_encoded_bytes(), ty) {
                (b"..data", Some(Type::Symlink)) => data = true,
                (b"..data_tmp", Some(Type::Symlink)) => data_tmp = true,
                (n, Some(Type::Symlink)) if !n.starts_with(b"..") => {
                    vol.visible.insert(name);
                }
                (_, Some(Type::Directory)) if is_writer_dir_name(&name) => dirs.push(name),
                _ => {}
            }
        }
        vol.current = match (data, dirs.as_slice(), data_tmp) {
            (false, _, _) => None,
            (true, [only], false) => Some(only.clone()),
            _ => root
                .read_link(&rel.join("..data"))
                .ok()
                .filter(|t| is_writer_dir_name(t) && !t.as_encoded_bytes().contains(&b'/')),
        };
        vol
    }

    /// The path a person sees for the file at `rest` (relative to the volume dir), and
    /// whether it is a stale copy. Files of the live timestamped dir reached through a
    /// user-visible link are shown under that link; files of any other timestamped dir
    /// (an older one, or the target of a leftover `..data_tmp`) are stale and shown where
    /// they really are.
    pub fn visible_path(&self, rest: &Path) -> (PathBuf, bool) {
        let mut comps = rest.components();
        let (Some(Component::Normal(first)), Some(Component::Normal(second))) =
            (comps.next(), comps.next())
        else {
            return (rest.to_path_buf(), false);
        };
        if !is_writer_dir_name(first) {
            return (rest.to_path_buf(), false);
        }
        if self.current.as_deref() != Some(first) {
            return (rest.to_path_buf(), true);
        }
        if self.visible.contains(second) {
            let inner = comps.as_path();
            let shown = if inner.as_os_str().is_empty() {
                Path::new(second).to_path_buf()
            } else {
                Path::new(second).join(inner)
            };
            (shown, false)
        } else {
            (rest.to_path_buf(), false)
        }
    }
}

/// A writer-owned timestamped dir name: `..` followed by anything but `data…`.
fn is_writer_dir_name(name: &OsStr) -> bool {
    let b = name.as_encoded_bytes();
    b.len() > 2 && b.starts_with(b"..") && !b.starts_with(b"..data")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_kubelet_sites() {
        let c = |p: &str| classify(Path::new(p));
        assert_eq!(
            c("volumes/kubernetes.io~secret/db/..2025_01_01_00_00_00.1/password").site,
            SiteId::KubeletSecretVolume
        );
        assert_eq!(
            c("volumes/kubernetes.io~secret/db/x").volume,
            Some((PathBuf::from("volumes/kubernetes.io~secret/db"), PathBuf::from("x")))
        );
        assert_eq!(
            c("volumes/kubernetes.io~projected/kube-api-access-1/token").site,
            SiteId::KubeletProjectedVolume
        );
        assert_eq!(c("volumes/kubernetes.io~csi/v/mount/a").site, SiteId::KubeletCsiVolume);
        assert_eq!(c("volumes/kubernetes.io~csi/v/mount/a").name.as_deref(), Some("v"));
        assert_eq!(c("volumes/kubernetes.io~secret/db/x").name.as_deref(), Some("db"));
        assert_eq!(c("volume-subpaths/db/app/0").name.as_deref(), Some("db"));
        assert_eq!(c("etc-hosts").name, None);
        assert_eq!(c("volumes/kubernetes.io~csi/v/vol_data.json").site, SiteId::Other);
        assert_eq!(c("volume-subpaths/v/app/0").site, SiteId::KubeletSubpath);
        assert_eq!(c("volume-subpaths/v/app/0/inner").site, SiteId::KubeletSubpath);
        assert_eq!(c("volumes/kubernetes.io~configmap/c/k").site, SiteId::Other);
        assert_eq!(c("etc-hosts").site, SiteId::Other);
        assert_eq!(c("containers/app/0a1b2c3d").site, SiteId::Other);
    }

    #[test]
    fn visible_paths_and_stale_copies() {
        let ts = OsString::from("..2025_03_01_10_20_30.1234567890");
        let vol = AtomicVolume {
            current: Some(ts.clone()),
            visible: [OsString::from("password")].into(),
        };
        let p = |s: &str| vol.visible_path(Path::new(s));
        assert_eq!(
            p("..2025_03_01_10_20_30.1234567890/password"),
            (PathBuf::from("password"), false)
        );
        assert_eq!(
            p("..2025_03_01_10_20_30.1234567890/orphan"),
            (PathBuf::from("..2025_03_01_10_20_30.1234567890/orphan"), false)
        );
        assert_eq!(
            p("..2024_01_01_00_00_00.1/password"),
            (PathBuf::from("..2024_01_01_00_00_00.1/password"), true)
        );
        assert_eq!(p("plainfile"), (PathBuf::from("plainfile"), false));
        let broken = AtomicVolume::default();
        assert!(broken.visible_path(Path::new("..2025_03_01_10_20_30.1/k")).1);
    }
}
