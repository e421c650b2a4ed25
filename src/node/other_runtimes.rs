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

use super::{error_at, json, resolve, Layout, Ownership, Scope, ScopeKind};
use crate::finding::{Category, ScanError, SiteId};
use crate::sys::RootDir;
use std::collections::HashMap;
use std::ffi::OsString;
use std::path::Path;

/// CRI-O's default graph root.
pub const CRIO_ROOT: &str = "/var/lib/containers/storage";
/// Docker's default data root.
pub const DOCKER_ROOT: &str = "/var/lib/docker";

/// Largest record file read (`containers.json`, `config.v2.json`). Records are parsed as
/// they are read, keeping only the few fields used, so this bounds time, not memory.
const MAX_RECORD: u64 = 64 << 20;
/// Largest `mount-id` read (a layer id: 64 hex digits).
const MAX_MOUNT_ID: u64 = 4096;
/// Container records of `containers.json` kept; the rest are parsed and dropped (a node
/// runs a few hundred containers: this bounds what a crafted file of tiny records holds).
pub const MAX_CONTAINERS: usize = 16_384;
/// Longest id, layer id or pod uid kept (container ids are 64 hex digits, pod uids 36
/// characters); a longer one is not a runtime's and is dropped.
const MAX_ID: usize = 256;

/// Adds the scopes of CRI-O's and Docker's dirs that exist under `root`. A record file
/// that cannot be read (not a regular file, too large) is an entry in `errors`.
pub fn discover(
    root: &RootDir,
    layout: &Layout,
    scopes: &mut Vec<Scope>,
    errors: &mut Vec<ScanError>,
) {
    crio(root, layout, Path::new(CRIO_ROOT), scopes, errors);
    docker(root, layout, Path::new(DOCKER_ROOT), scopes, errors);
}

/// A record file under the root, opened as a regular file of at most `cap` bytes and
/// parsed by `parse` while read; `None` when absent or unreadable (an error entry), or
/// not what `parse` takes.
fn record<T>(
    root: &RootDir,
    node: &Path,
    cap: u64,
    errors: &mut Vec<ScanError>,
    parse: fn(&mut dyn std::io::Read) -> Option<T>,
) -> Option<T> {
    use std::io::Read;
    let rel = resolve(root, node).ok()?;
    let (f, size) =
        root.open_regular(&rel, cap).map_err(|e| errors.push(error_at(node, &e))).ok()?;
    parse(&mut std::io::BufReader::new(f.take(size)))
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

fn crio(
    root: &RootDir,
    layout: &Layout,
    graph: &Path,
    scopes: &mut Vec<Scope>,
    errors: &mut Vec<ScanError>,
) {
    let site = SiteId::CrioStorage;
    let records = graph.join("overlay-containers/containers.json");
    let owners =
        record(root, &records, layout.cap(MAX_RECORD), errors, crio_layers).unwrap_or_default();
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

/// Writable layer id → (container id, pod uid), as [`crio_layers`] returns them.
pub type CrioOwners = HashMap<String, (String, Option<String>)>;

/// CRI-O's `containers.json` (a list of records), parsed as it is read: each container's
/// writable layer id → (container id, pod uid from the record's `metadata` string, itself
/// JSON). Only those fields of a record are kept (every other is skipped by the parser
/// unheld), for at most [`MAX_CONTAINERS`] records; ids longer than a runtime makes are
/// dropped. `None` when it is not a JSON list.
pub fn crio_layers(json: &mut dyn std::io::Read) -> Option<CrioOwners> {
    let records = json::pick_each(json, &[&["id"], &["layer"], &["metadata"]], MAX_CONTAINERS)?;
    let mut owners = HashMap::new();
    for r in records {
        let [id, layer, meta] = <[Option<String>; 3]>::try_from(r).ok()?;
        let (Some(id), Some(layer)) = (short(id), short(layer)) else { continue };
        let uid = meta
            .and_then(|m| json::pick_slice(m.as_bytes(), &[&["uid"]]))
            .and_then(|mut u| u.pop().flatten());
        owners.insert(layer, (id, short(uid)));
    }
    Some(owners)
}

/// An id, unless it is longer than any a runtime makes.
fn short(id: Option<String>) -> Option<String> {
    id.filter(|s| s.len() <= MAX_ID)
}

/// The pod uid of a Docker container's `config.v2.json` (kubelet's label), if any,
/// parsed as it is read (the rest of the config is skipped unheld).
pub fn docker_pod_uid(json: &mut dyn std::io::Read) -> Option<String> {
    let mut uid = json::pick_reader(json, &[&["Config", "Labels", "io.kubernetes.pod.uid"]])?;
    short(uid.pop().flatten())
}

fn docker(
    root: &RootDir,
    layout: &Layout,
    data: &Path,
    scopes: &mut Vec<Scope>,
    errors: &mut Vec<ScanError>,
) {
    let site = SiteId::DockerStorage;
    let mut configs: HashMap<String, Option<String>> = HashMap::new();
    for name in dirs(root, &data.join("containers")) {
        let Some(id) = name.to_str() else { continue };
        let config = data.join("containers").join(&name).join("config.v2.json");
        let uid = record(root, &config, layout.cap(MAX_RECORD), errors, docker_pod_uid);
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
        match root.read_file(&rel, MAX_MOUNT_ID) {
            Ok(id) => {
                let id = String::from_utf8_lossy(&id).trim().to_owned();
                owners.insert(id, name.to_string_lossy().into_owned());
            }
            Err(e) => errors.push(error_at(&node, &e)),
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
