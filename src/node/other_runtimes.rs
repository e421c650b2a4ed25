//! CRI-O's containers-storage and Docker's data root (NODE-LAYOUT.md §6), as far as their
//! own records tell what a dir is:
//!
//! * CRI-O, `/var/lib/containers/storage`: `overlay/<layer>/diff` is a container's
//!   writable layer when `overlay-containers/containers.json` names the layer as a
//!   container's `layer`, else an image layer; `overlay-containers/<id>/userdata/
//!   config.json` is the OCI spec (with the env) CRI-O keeps on disk. The pod comes from
//!   the record's `metadata` (a JSON string CRI-O writes, with the pod `uid`).
//! * Docker, `/var/lib/docker`: `overlay2/<id>/diff` is a container's writable layer when
//!   `image/overlay2/layerdb/mounts/<container>/mount-id` names it, else an image layer;
//!   `containers/<id>/config.v2.json` holds the container's `Config` with its `Env` and
//!   `Labels` (the pod from kubelet's `io.kubernetes.pod.uid` label).

use super::{resolve, Ownership, Scope, ScopeKind};
use crate::finding::{Category, SiteId};
use crate::sys::RootDir;
use std::collections::HashMap;
use std::ffi::OsString;
use std::path::Path;

/// CRI-O's default graph root.
pub const CRIO_ROOT: &str = "/var/lib/containers/storage";
/// Docker's default data root.
pub const DOCKER_ROOT: &str = "/var/lib/docker";

/// Largest record file read (`containers.json`, `config.v2.json`).
const MAX_RECORD: u64 = 64 << 20;

/// Adds the scopes of CRI-O's and Docker's dirs that exist under `root`.
pub fn discover(root: &RootDir, scopes: &mut Vec<Scope>) {
    crio(root, Path::new(CRIO_ROOT), scopes);
    docker(root, Path::new(DOCKER_ROOT), scopes);
}

/// A JSON file under the root, parsed; `None` when absent or not JSON.
fn json(root: &RootDir, node: &Path) -> Option<serde_json::Value> {
    use std::io::Read;
    let rel = resolve(root, node).ok()?;
    let mut data = Vec::new();
    root.open_file(&rel).ok()?.take(MAX_RECORD).read_to_end(&mut data).ok()?;
    serde_json::from_slice(&data).ok()
}

/// The sorted names of the dirs in `node`.
fn dirs(root: &RootDir, node: &Path) -> Vec<OsString> {
    resolve(root, node).map(|rel| super::subdirs(root, &rel)).unwrap_or_default()
}

/// A scope for `node` (a dir or a file) when it exists.
fn push(root: &RootDir, node: &Path, layer: Ownership, scopes: &mut Vec<Scope>) {
    if let Ok(rel) = resolve(root, node) {
        scopes.push(Scope { rel, node_path: node.to_path_buf(), kind: ScopeKind::Owned(layer) });
    }
}

fn crio(root: &RootDir, graph: &Path, scopes: &mut Vec<Scope>) {
    let site = SiteId::CrioStorage;
    let records = json(root, &graph.join("overlay-containers/containers.json"));
    let owners = records.as_ref().map(crio_layers).unwrap_or_default();
    let by_container: HashMap<&str, Option<&String>> =
        owners.values().map(|(id, uid)| (id.as_str(), uid.as_ref())).collect();
    for name in dirs(root, &graph.join("overlay")) {
        let Some(id) = name.to_str().filter(|n| *n != "l") else { continue };
        let (category, container, pod_uid) = match owners.get(id) {
            Some((c, uid)) => (Category::ContainerLayer, Some(c.clone()), uid.clone()),
            None => (Category::ImageLayer, None, None),
        };
        let layer = Ownership::new(site, category, container, pod_uid);
        push(root, &graph.join("overlay").join(&name).join("diff"), layer, scopes);
    }
    for name in dirs(root, &graph.join("overlay-containers")) {
        let Some(id) = name.to_str() else { continue };
        let pod_uid = by_container.get(id).copied().flatten().cloned();
        let layer = Ownership::new(site, Category::EnvPersisted, Some(id.to_owned()), pod_uid);
        let config = graph.join("overlay-containers").join(&name).join("userdata/config.json");
        push(root, &config, layer, scopes);
    }
}

/// CRI-O's `containers.json` (a list of records): each container's writable layer id →
/// (container id, pod uid from the record's `metadata` string, itself JSON).
pub fn crio_layers(records: &serde_json::Value) -> HashMap<String, (String, Option<String>)> {
    let mut owners = HashMap::new();
    for c in records.as_array().into_iter().flatten() {
        let (Some(id), Some(layer)) = (c["id"].as_str(), c["layer"].as_str()) else { continue };
        let meta: Option<serde_json::Value> =
            c["metadata"].as_str().and_then(|m| serde_json::from_str(m).ok());
        let uid = meta.as_ref().and_then(|m| m["uid"].as_str()).map(str::to_owned);
        owners.insert(layer.to_owned(), (id.to_owned(), uid));
    }
    owners
}

/// The pod uid of a Docker container's `config.v2.json` (kubelet's label), if any.
pub fn docker_pod_uid(config: &serde_json::Value) -> Option<String> {
    config["Config"]["Labels"]["io.kubernetes.pod.uid"].as_str().map(str::to_owned)
}

fn docker(root: &RootDir, data: &Path, scopes: &mut Vec<Scope>) {
    let site = SiteId::DockerStorage;
    let mut configs: HashMap<String, Option<String>> = HashMap::new();
    for name in dirs(root, &data.join("containers")) {
        let Some(id) = name.to_str() else { continue };
        let config = data.join("containers").join(&name).join("config.v2.json");
        let uid = json(root, &config).as_ref().and_then(docker_pod_uid);
        configs.insert(id.to_owned(), uid.clone());
        let layer = Ownership::new(site, Category::EnvPersisted, Some(id.to_owned()), uid);
        push(root, &config, layer, scopes);
    }
    // Writable layer id → container.
    let mounts = data.join("image/overlay2/layerdb/mounts");
    let mut owners: HashMap<String, String> = HashMap::new();
    for name in dirs(root, &mounts) {
        let node = mounts.join(&name).join("mount-id");
        let Ok(rel) = resolve(root, &node) else { continue };
        let Ok(mut f) = root.open_file(&rel) else { continue };
        let mut id = String::new();
        if std::io::Read::read_to_string(&mut std::io::Read::take(&mut f, 256), &mut id).is_ok() {
            owners.insert(id.trim().to_owned(), name.to_string_lossy().into_owned());
        }
    }
    for name in dirs(root, &data.join("overlay2")) {
        let Some(id) = name.to_str().filter(|n| *n != "l") else { continue };
        let (category, container) = match owners.get(id) {
            Some(c) => (Category::ContainerLayer, Some(c.clone())),
            None => (Category::ImageLayer, None),
        };
        let pod_uid = container.as_ref().and_then(|c| configs.get(c).cloned().flatten());
        let layer = Ownership::new(site, category, container, pod_uid);
        push(root, &data.join("overlay2").join(&name).join("diff"), layer, scopes);
    }
}
