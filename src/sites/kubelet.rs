//! kubelet's pod dirs: Secret, projected and CSI volumes, subPath copies, and the rest of
//! each pod dir (site `other`). Facts in `docs/NODE-LAYOUT.md` (kubelet); the path
//! classification and the atomic writer's naming are in [`crate::node::kubelet`].

use super::{Advice, Discovery, Owner, ScopeKind, Site};
use crate::finding::{Category, Finding};
use crate::node::kubelet::{self, AtomicVolume, PODS, SUBPATHS, VOLUMES, VOLUME_PLUGINS};
use crate::sys::walk::DirFd;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The default kubelet root (`--root-dir` default).
pub const DEFAULT_KUBELET_DIR: &str = crate::distros::KUBEADM.kubelet.at;

/// kubelet's pod dirs.
pub struct Kubelet;

impl Site for Kubelet {
    /// One scope per pod dir, with its atomic-writer volumes read.
    fn discover(&self, cx: &mut Discovery<'_>) {
        let mut seen = Vec::new();
        for dir in cx.places.kubelet.clone() {
            let rel = super::resolve(cx.root, &dir.join(PODS)).ok();
            if rel.is_none() || !seen.contains(&rel) {
                seen.push(rel);
                pod_dirs(cx, &dir);
            }
        }
    }

    fn advice(&self, f: &Finding, cx: Advice<'_>) -> (String, String) {
        pod_dir_advice(f, cx).unwrap_or_else(super::by_hand)
    }
}

/// The pod dirs under kubelet's dir `dir`, a node path.
fn pod_dirs(cx: &mut Discovery<'_>, dir: &Path) {
    let pods_node = dir.join(PODS);
    let pods_rel = match super::resolve(cx.root, &pods_node) {
        Ok(rel) => rel,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !cx.layout.kubelet_dir_explicit => {
            return
        }
        Err(e) => return cx.errors.push(super::error_at(&pods_node, &e)),
    };
    let entries = match cx.root.list(&pods_rel) {
        Ok(entries) => entries,
        Err(e) => return cx.errors.push(super::error_at(&pods_node, &e)),
    };
    for (name, _) in entries.into_iter().filter(|(_, k)| *k == crate::sys::Kind::Dir) {
        let rel = pods_rel.join(&name);
        let volumes = atomic_volumes(cx, &rel);
        cx.scopes.push(super::Scope {
            node_path: pods_node.join(&name),
            kind: ScopeKind::Pod { uid: name.to_string_lossy().into_owned(), volumes },
            rel,
            start: crate::sys::walk::Start::Crossing,
        });
    }
}

/// The advice on a finding in a pod dir that `clean` does not remove (`cx.pod_block`
/// says why); none when nothing blocks its pod dir.
pub(super) fn pod_dir_advice(f: &Finding, cx: Advice<'_>) -> Option<(String, String)> {
    let why = cx.pod_block?;
    let pod_live = f.pod.as_ref().and_then(|p| p.live);
    let manual = if cx.live.is_none() {
        "run `kresidue clean` where the container runtime can be asked"
    } else if pod_live == Some(true) {
        match f.category {
            Category::StaleSubpath => "restart the pod: kubelet makes a fresh subPath copy",
            Category::NonTmpfsVolume => {
                "the volume is on disk, not tmpfs: find why kubelet could not mount a tmpfs, then restart the pod"
            }
            _ => "nothing: the pod uses it",
        }
    } else {
        "check what is mounted or kept there, then remove it by hand, or wait for --min-age"
    };
    Some((why.to_owned(), manual.to_owned()))
}

/// The atomic-writer volumes of the pod dir at `pod_rel`: secret and projected volume
/// dirs, and CSI `mount` dirs (the Secrets Store driver uses the same writer).
fn atomic_volumes(cx: &Discovery<'_>, pod_rel: &Path) -> HashMap<std::path::PathBuf, AtomicVolume> {
    let mut out = HashMap::new();
    for plugin in VOLUME_PLUGINS {
        let plugin_rel = Path::new(VOLUMES).join(plugin.dir);
        for name in super::subdirs(cx.root, &pod_rel.join(&plugin_rel)) {
            let mut vol = plugin_rel.join(name);
            if let Some(sub) = plugin.data {
                vol.push(sub);
            }
            let info = AtomicVolume::read(cx.root, &pod_rel.join(&vol));
            out.insert(vol, info);
        }
    }
    out
}

/// The Secrets Store CSI driver: its volumes are Secret data on a tmpfs it mounts.
const SECRETS_STORE_DRIVER: &str = "secrets-store.csi.k8s.io";

/// Where in a pod dir a mount point is, for the places a tmpfs of Secret data is mounted.
#[derive(Debug, PartialEq, Eq)]
pub enum MountPlace {
    /// `volumes/kubernetes.io~secret/<vol>`, `volumes/kubernetes.io~projected/<vol>`.
    Volume,
    /// `volumes/kubernetes.io~csi/<vol>/mount`.
    Csi,
    /// `volume-subpaths/<vol>/<container>/<index>`.
    Subpath,
}

/// The place of a mount point at `inner` (relative to its pod dir), if kubelet or a
/// Secret driver mounts Secret data there.
pub fn mount_place(inner: &Path) -> Option<MountPlace> {
    let c: Vec<&[u8]> = inner.iter().map(|c| c.as_bytes()).collect();
    match c.as_slice() {
        [sub, _, _, _] if *sub == SUBPATHS.as_bytes() => Some(MountPlace::Subpath),
        [vols, plugin, _] if *vols == VOLUMES.as_bytes() => {
            VOLUME_PLUGINS.iter().find(|p| p.dir.as_bytes() == *plugin && p.data.is_none())?;
            Some(MountPlace::Volume)
        }
        [vols, plugin, _, data] if *vols == VOLUMES.as_bytes() => {
            VOLUME_PLUGINS.iter().find(|p| {
                p.dir.as_bytes() == *plugin && p.data.map(str::as_bytes) == Some(*data)
            })?;
            Some(MountPlace::Csi)
        }
        _ => None,
    }
}

/// Whether the CSI volume dir `vol` (holding the `mount` dir) is the Secrets Store
/// driver's, as its `vol_data.json` (kubelet's record of the volume) says.
pub fn secrets_store(vol: &DirFd) -> bool {
    #[derive(serde::Deserialize)]
    struct VolData {
        #[serde(rename = "driverName")]
        driver_name: Option<String>,
    }
    vol.read_small(OsStr::new(kubelet::CSI_VOL_DATA), 64 << 10)
        .and_then(|data| serde_json::from_slice::<VolData>(&data).ok())
        .is_some_and(|v| v.driver_name.as_deref() == Some(SECRETS_STORE_DRIVER))
}

/// The owner of the file at `inner` in the pod dir of pod `uid` (whose atomic-writer
/// volumes are `volumes`), and its shown path when that differs from `inner`: its site,
/// staleness and volume from where it is.
pub(super) fn pod_file(
    uid: &Arc<str>,
    volumes: &HashMap<PathBuf, AtomicVolume>,
    inner: &Path,
) -> (Owner, Option<PathBuf>) {
    let class = kubelet::classify(inner);
    let mut owner = Owner { pod: Some(uid.clone()), ..Owner::of(class.site) };
    owner.volume = class.name.map(Arc::from);
    let Some((vol, rest)) = class.volume else { return (owner, None) };
    let (shown, stale) = match volumes.get(&vol) {
        Some(v) => v.visible_path(&rest),
        None => (rest, false),
    };
    owner.stale = stale;
    let shown = vol.join(shown);
    (owner, (shown != inner).then_some(shown))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_kubelet_secret_places_are_mount_places() {
        let p = |s: &str| mount_place(Path::new(s));
        assert_eq!(p("volumes/kubernetes.io~secret/db"), Some(MountPlace::Volume));
        assert_eq!(
            p("volumes/kubernetes.io~projected/kube-api-access-1"),
            Some(MountPlace::Volume)
        );
        assert_eq!(p("volumes/kubernetes.io~csi/vault/mount"), Some(MountPlace::Csi));
        assert_eq!(p("volume-subpaths/db/app/0"), Some(MountPlace::Subpath));
        for other in [
            "volumes/kubernetes.io~secret/db/sub",
            "volumes/kubernetes.io~secret",
            "volumes/kubernetes.io~csi/vault",
            "volumes/kubernetes.io~csi/vault/mount/x",
            "volumes/kubernetes.io~secret/db/mount",
            "volumes/kubernetes.io~nfs/data",
            "volumes/kubernetes.io~empty-dir/cache",
            "volume-subpaths/db/app",
            "volume-subpaths/db/app/0/x",
            "containers/app",
        ] {
            assert_eq!(p(other), None, "{other}");
        }
    }
}
