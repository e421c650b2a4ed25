//! containers/storage (`/var/lib/containers/storage`), the store of CRI-O and Podman:
//! `overlay/<layer>/diff` is a container's writable layer when `overlay-containers/
//! containers.json` names the layer as a container's `layer`, else an image layer, named
//! after the images whose stacks hold it (`overlay-images/images.json` gives each image's
//! top layer, `overlay-layers/layers.json` each layer's parent);
//! `overlay-containers/<id>/userdata/config.json` is the OCI spec (with the env) and
//! `userdata/ctr.log` Podman's log of the container. A container's names, pod and runtime
//! come from its record's `metadata` (a JSON string CRI-O or Podman writes); a container
//! dir no record names is a removed container's. `overlay-images/<id>/` holds an image's
//! config, named through `images.json`; `volumes/<name>/_data` a volume's data. Facts in
//! `docs/NODE-LAYOUT.md` (containers/storage); the records are parsed by
//! [`crate::node::other_runtimes`].

use super::{
    Advice, ContainerDir, ContainerLayout, Discovery, Ownership, ScopeKind, Site, Unresolved,
};
use crate::finding::{Category, Finding, Images, SiteId};
use crate::node::other_runtimes::{
    crio_root, images_of_layers, libpod_containers, link_pods, storage_containers,
    storage_graphroot, storage_images, storage_layer_parents, ContainerRecord, StorageContainer,
    StorageImages, MAX_CONTAINERS, MAX_LAYERS, MAX_RECORD,
};
use crate::runtimes::{Keeper, Runtime, SharedStore};
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// CRI-O's default graph root.
pub const CRIO_ROOT: &str = Runtime::CriO.spec().dirs.root;

/// containers/storage's record files of containers, as c/storage loads them.
const RECORD_FILES: [&str; 2] = ["containers.json", "volatile-containers.json"];

/// The runtime of a container whose records could not be read.
const EITHER: Keeper = Keeper::Shared(SharedStore::ContainersStorage);

/// Podman's state database, under the graph root (libpod's `static_dir`).
const LIBPOD_STATE: &str = "libpod/bolt_state.db";

/// What Podman's state database is.
const LIBPOD_NOTE: &str = "Podman's state database: every container's spec, env included \
    (a removed container's in freed pages)";

/// A container's `userdata/` as containers/storage's users lay it out (libpod
/// `container_internal.go`, CRI-O `server/container_create.go`): its OCI spec
/// (`config.json`), its secrets (`secrets/`, `run/secrets/`), `artifacts/`,
/// `.containerenv`, each the container's; Podman's log of it (`ctr.log`, the `k8s-file`
/// driver) read as a log; its `/dev/shm` tmpfs (`shm`) not read.
pub const USERDATA: ContainerLayout =
    ContainerLayout { is_log: |name, _| name == b"ctr.log", shm: "shm", secrets: &[] };

/// Podman's secret store, under the graph root (podman `libpod/runtime.go`: the secrets
/// manager's dir; the file driver keeps every value in `filedriver/secretsdata.json`).
const SECRETS: &str = "secrets";

/// What Podman's secret store is.
const SECRETS_NOTE: &str = "Podman's secret store (`podman secret create`, and the Secrets \
    `podman kube play` makes): every secret's value, base64";

/// containers/storage's configuration, which may name another root (`graphroot`).
pub const STORAGE_CONF: &str = Runtime::Podman.spec().dirs.config[0];

/// What a layer is that no record read names, when some records were not read.
const UNNAMED_LAYER: &str = "a layer no record read names (the container records were not \
    all read): a container's or an image's, unknown";

/// CRI-O's configuration, which may name its own storage root (`[crio] root`).
pub const CRIO_CONF: &str = Runtime::CriO.spec().dirs.config[0];

/// The largest configuration file read.
const MAX_CONF: u64 = 1 << 20;

/// containers/storage (CRI-O, Podman).
pub struct ContainersStorage;

impl Site for ContainersStorage {
    fn discover(&self, cx: &mut Discovery<'_>) {
        for graph in graph_roots(cx) {
            discover_graph(cx, &graph);
        }
    }

    fn advice(&self, f: &Finding, cx: Advice<'_>) -> (String, String) {
        super::runtime_advice(f, cx.live)
    }
}

/// The containers/storage roots to scan: `--containers-storage-root`, else those CRI-O's
/// `crio.conf` (`[crio] root`) and `storage.conf` (`graphroot`) name, else the default
/// ([`Discovery::runtime_root`]).
fn graph_roots(cx: &mut Discovery<'_>) -> Vec<PathBuf> {
    let mut named: Vec<(PathBuf, Option<&'static str>)> = Vec::new();
    match &cx.layout.containers_storage_root {
        Some(given) => named.push((given.clone(), Some("--containers-storage-root"))),
        None if cx.layout.only.is_some() => {}
        None => {
            let confs: [(&str, &'static str, Parse); 2] = [
                (CRIO_CONF, "root in /etc/crio/crio.conf", crio_root),
                (STORAGE_CONF, "graphroot in /etc/containers/storage.conf", storage_graphroot),
            ];
            for (conf, by, parse) in confs {
                if let Some(Some(root)) = cx.parse(Path::new(conf), MAX_CONF, parse) {
                    let root = Path::new("/").join(root);
                    if !named.iter().any(|(r, _)| *r == root) {
                        named.push((root, Some(by)));
                    }
                }
            }
            if named.is_empty() {
                named.push((PathBuf::from(CRIO_ROOT), None));
            }
        }
    }
    let what = "the containers-storage root";
    named.into_iter().filter_map(|(root, by)| cx.runtime_root(what, root, by)).collect()
}

/// A parser of a runtime's configuration file, giving the root it names.
type Parse = fn(&mut dyn std::io::Read) -> Option<Option<String>>;

/// The scopes of the containers/storage root `graph`: containers' specs and logs (named by
/// `containers.json`), layers (a container's writable one, or an image's, named through
/// `images.json` and `layers.json`), image dirs and volumes.
fn discover_graph(cx: &mut Discovery<'_>, graph: &Path) {
    let site = SiteId::ContainersStorage;
    let containers = graph.join("overlay-containers");
    // Listed before the records are read: a container made since is not seen at all, one
    // removed since has no record, and is gone.
    let dirs = cx.dirs(&containers);
    let (mut records, known) = container_records(cx, &containers);
    // Podman's own state: whether each of its containers runs.
    let state_db = graph.join(LIBPOD_STATE);
    if let Some(podman) = cx.parse(&state_db, MAX_RECORD, libpod_containers) {
        for c in records.iter_mut().filter(|c| c.record.runtime == Some(Runtime::Podman.into())) {
            if let Some((name, running)) = podman.get(&c.id) {
                c.record.running = *running;
                c.record.name = c.record.name.take().or_else(|| name.clone());
                c.record = super::witnessed(cx, &c.id, std::mem::take(&mut c.record));
            }
        }
    }
    let mut own = Ownership::new(site, Category::EnvPersisted, None, None);
    own.note = Some(LIBPOD_NOTE);
    cx.push(&state_db, ScopeKind::Owned(own), Unresolved::Quiet);
    let by_id: HashMap<&str, &ContainerRecord> =
        records.iter().map(|c| (c.id.as_str(), &c.record)).collect();
    let gone = ContainerRecord { running: Some(false), ..ContainerRecord::default() };
    // Records that could not be read: CRI-O's or Podman's, no one can say.
    let unknown = ContainerRecord { runtime: Some(EITHER), ..ContainerRecord::default() };
    for name in dirs {
        let Some(id) = name.to_str() else { continue };
        let record = match by_id.get(id) {
            Some(r) => *r,
            // No record in the lists, all read: the container was removed, its dir left.
            None if known => &gone,
            None => &unknown,
        };
        let dir = ContainerDir {
            id: id.to_owned(),
            kept: Ownership::of_record(site, Category::EnvPersisted, id, record),
            log: super::runtime_data::log_of(id, record),
            layout: &USERDATA,
        };
        // From the graph root: an `overlay-containers` that is a symlink is not followed.
        cx.push_below(
            graph,
            &Path::new("overlay-containers").join(id).join("userdata"),
            ScopeKind::Container(Box::new(dir)),
        );
    }
    // Podman's secret store: no container's.
    let mut own = Ownership::new(site, Category::Other, None, None);
    own.note = Some(SECRETS_NOTE);
    cx.push_below(graph, Path::new(SECRETS), ScopeKind::Owned(own));
    let images = image_configs(cx, graph);
    let parents = graph.join("overlay-layers/layers.json");
    let (parents, cut) = cx.parse(&parents, MAX_RECORD, storage_layer_parents).unwrap_or_default();
    if cut {
        let path = graph.join("overlay-layers/layers.json");
        cx.errors.push(super::cut_error(&path, "layer records", MAX_LAYERS));
    }
    let none = BTreeSet::new();
    let tops = images
        .tops
        .iter()
        .map(|(image, top)| (top.clone(), images.names.get(image).unwrap_or(&none)));
    let layer_images = images_of_layers(tops, &parents);
    let by_layer: HashMap<&str, &StorageContainer> =
        records.iter().filter_map(|c| Some((c.layer.as_deref()?, c))).collect();
    let layers = graph.join("overlay");
    for name in cx.dirs(&layers) {
        let Some(id) = name.to_str().filter(|n| *n != "l") else { continue };
        let layer = match by_layer.get(id) {
            Some(c) => Ownership::of_record(site, Category::ContainerLayer, &c.id, &c.record),
            // Named by no container record while some were not read, and by no image:
            // whose it is is unknown.
            None if !known && !layer_images.contains_key(id) => {
                let mut own = Ownership::new(site, Category::ContainerLayer, None, None);
                own.note = Some(UNNAMED_LAYER);
                own
            }
            None => {
                let mut own = Ownership::new(site, Category::ImageLayer, None, None);
                own.images = Images::new(layer_images.get(id).into_iter().flatten().cloned());
                own
            }
        };
        cx.push(&layers.join(&name).join("diff"), ScopeKind::Owned(layer), Unresolved::Quiet);
    }
    let volumes = graph.join("volumes");
    for name in cx.dirs(&volumes) {
        let volume = Ownership::new(SiteId::RuntimeVolume, Category::Other, None, None);
        cx.push(&volumes.join(&name).join("_data"), ScopeKind::Owned(volume), Unresolved::Quiet);
    }
}

/// The record files of containers/storage's containers (c/storage `containers.go`: a
/// container made `Volatile`, as CRI-O makes every one and Podman its `--rm` ones, is in
/// `volatile-containers.json`, the others in `containers.json`), parsed and merged, the
/// first record of an id kept, CRI-O's containers linked to their pods' sandboxes; and
/// whether every record file there was read (so that a container no record names is gone).
fn container_records(cx: &mut Discovery<'_>, dir: &Path) -> (Vec<StorageContainer>, bool) {
    // Any entry of the name: one that is no regular file is refused, with an error, by the
    // parse (and the records are then not all read).
    let listed = super::resolve(cx.root, dir).and_then(|rel| cx.root.list(&rel));
    let present: Vec<std::ffi::OsString> =
        listed.unwrap_or_default().into_iter().map(|(name, _)| name).collect();
    let mut records: Vec<StorageContainer> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut all_read = true;
    let mut any = false;
    for file in RECORD_FILES {
        if !present.iter().any(|p| p == file) {
            continue;
        }
        any = true;
        let path = dir.join(file);
        match cx.parse(&path, MAX_RECORD, storage_containers) {
            Some(list) => {
                if list.cut {
                    all_read = false;
                    cx.errors.push(super::cut_error(&path, "container records", MAX_CONTAINERS));
                }
                for c in list.items {
                    if seen.insert(c.id.clone()) {
                        records.push(c);
                    }
                }
            }
            None => all_read = false,
        }
    }
    link_pods(&mut records);
    (records, any && all_read)
}

/// The image dirs of the containers/storage root `graph` (`overlay-images/<id>/`: the
/// config, stored under the file name `=<base64 of "sha256:<id>">`, with `ENV`, labels
/// and the history holding build args; the manifest), each named after the names
/// `images.json` gives it; what `images.json` says.
fn image_configs(cx: &mut Discovery<'_>, graph: &Path) -> StorageImages {
    let images = graph.join("overlay-images");
    let records = images.join("images.json");
    let said = cx.parse(&records, MAX_RECORD, storage_images).unwrap_or_default();
    if said.cut {
        cx.errors.push(super::cut_error(&records, "image records", MAX_CONTAINERS));
    }
    for id in cx.dirs(&images) {
        let mut own = Ownership::new(SiteId::ContainersStorage, Category::ImageConfig, None, None);
        let names = id.to_str().and_then(|id| said.names.get(id));
        own.images = Images::new(names.into_iter().flatten().cloned());
        cx.push(&images.join(&id), ScopeKind::Owned(own), Unresolved::Quiet);
    }
    said
}
