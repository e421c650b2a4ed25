//! Docker's data root (`/var/lib/docker`): `overlay2/<id>/diff` is a container's writable
//! (or `<id>-init`) layer when `image/overlay2/layerdb/mounts/<container>/mount-id` names
//! it, an image layer when an image's chain of layers holds it (`imagedb` configs'
//! `rootfs.diff_ids` → chain ids → `layerdb/sha256/<chain id>/cache-id`), else no one's
//! (BuildKit's build cache); `containers/<id>/config.v2.json` holds the container's
//! `Config` with its `Env` and `Labels` (names and pod from cri-dockerd's `io.kubernetes.*`
//! labels) and `State.Running`, `containers/<id>/<id>-json.log*` its log, and every other
//! file of `containers/<id>/` is the container's too (`hostconfig.json`, swarm secrets,
//! checkpoints);
//! `image/overlay2/imagedb/content/sha256/<id>` an image's config, named through
//! `image/overlay2/repositories.json`; `volumes/<name>/_data` a volume's data. Facts in
//! `docs/NODE-LAYOUT.md` (Docker); the records are parsed by
//! [`crate::node::other_runtimes`].

use super::{
    Advice, ContainerDir, ContainerLayout, Discovery, Ownership, ScopeKind, Site, Unresolved,
};
use crate::finding::{Category, Finding, Images, SiteId};
use crate::node::other_runtimes::{
    add_names, docker_chain_ids, docker_container, docker_data_root, docker_image_names,
    ContainerRecord, MAX_IMAGE_NAMES, MAX_NAMES_PER_LAYER, MAX_RECORD,
};
use crate::runtimes::docker::SPEC;
use crate::runtimes::Runtime;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Docker's default data root.
pub const DOCKER_ROOT: &str = SPEC.dirs.root;

/// Docker's daemon configuration, which may name another data root (`data-root`).
pub const DAEMON_JSON: &str = SPEC.dirs.config[0];

/// The dir of the containerd dockerd starts for itself, under Docker's data root (its
/// root) and exec root (its state) (moby `libcontainerd/supervisor/remote_daemon.go`).
const OWN_CONTAINERD: &str = "containerd/daemon";

/// Docker's default exec root, where its containerd keeps its state.
const EXEC_ROOT: &str = match SPEC.dirs.state {
    Some(state) => state,
    None => DOCKER_ROOT,
};

/// The largest `daemon.json` read.
const MAX_DAEMON_JSON: u64 = 1 << 20;

/// A Docker container's own dir as Docker lays it out (moby `container/container.go`,
/// `daemon/logger`): its logs as Docker writes them (the json-file driver's
/// `<id>-json.log` and its rotations `.1`, `.2.gz`, ..., the local driver's `local-logs/`)
/// are read as logs; in `mounts/`, what Docker mounts into the container, the tmpfs of
/// swarm secrets (`secrets`, `container.SecretMountPath`) is read and its `/dev/shm` tmpfs
/// (`shm`, `ShmPath`) is not; every other entry is what Docker keeps of the container
/// (`config.v2.json`, `hostconfig.json` with its logging driver's options,
/// `checkpoints/`, a config written half-way as `.tmp-config.v2.json…`, `hosts`).
pub const CONTAINER_DIR: ContainerLayout =
    ContainerLayout { is_log: is_container_log, shm: "mounts/shm", secrets: &["mounts/secrets"] };

/// Docker's dir of its containers' own dirs, under its data root.
const CONTAINERS: &str = "containers";

/// Whether the entry `name` of container `id`'s dir is one of its logs.
/// Its rotations are `.N` and, compressed, `.N.gz` (moby `daemon/logger/loggerutils`).
fn is_container_log(name: &[u8], id: &str) -> bool {
    let json_log = name.strip_prefix(id.as_bytes()).and_then(|r| r.strip_prefix(b"-json.log"));
    let rotation = |r: &[u8]| {
        let n = r.strip_prefix(b".").map(|n| n.strip_suffix(b".gz").unwrap_or(n));
        n.is_some_and(|n| !n.is_empty() && n.iter().all(u8::is_ascii_digit))
    };
    name == b"local-logs" || json_log.is_some_and(|r| r.is_empty() || rotation(r))
}

/// Largest `mount-id` read (a layer id: 64 hex digits).
const MAX_MOUNT_ID: u64 = 4096;

/// What a layer dir no image and no container names is.
const NO_OWNER: &str = "a layer no image and no container names: BuildKit's build cache, or \
    one left behind";

/// Docker's data root.
pub struct Docker;

/// The record of a Docker container whose `config.v2.json` could not be read: Docker's
/// still, so CRI's silence does not make it gone.
fn unread() -> ContainerRecord {
    ContainerRecord { runtime: Some(Runtime::Docker.into()), ..ContainerRecord::default() }
}

/// Docker's data root: `--docker-root`, else what `daemon.json` names, else the default
/// ([`Discovery::runtime_root`]).
fn data_root(cx: &mut Discovery<'_>) -> Option<PathBuf> {
    let (root, named_by) = match &cx.layout.docker_root {
        Some(given) => (given.clone(), Some("--docker-root")),
        None if cx.layout.only.is_some() => return None,
        None => match cx.parse(Path::new(DAEMON_JSON), MAX_DAEMON_JSON, docker_data_root) {
            Some(Some(named)) => {
                (Path::new("/").join(named), Some("data-root in /etc/docker/daemon.json"))
            }
            _ => (PathBuf::from(DOCKER_ROOT), None),
        },
    };
    cx.runtime_root("Docker's data root", root, named_by)
}

impl Site for Docker {
    /// Also the containerd dockerd starts for itself when it is given none (namespace
    /// `moby`), scanned as containerd's family scans the node's.
    fn discover(&self, cx: &mut Discovery<'_>) {
        let Some(data) = data_root(cx) else { return };
        let data = data.as_path();
        let own = data.join(OWN_CONTAINERD);
        // The node's containerd, when pointed there, is scanned already.
        let scanned = cx.places.containerds.iter().any(|c| c.root == own);
        if !scanned && super::resolve(cx.root, &own).is_ok() {
            let state = Path::new(EXEC_ROOT).join(OWN_CONTAINERD);
            super::containerd::discover_one(cx, &own, Some(&state), None, Runtime::Docker.into());
        }
        let site = SiteId::DockerStorage;
        let image_layers = image_configs(cx, data);
        let containers = data.join(CONTAINERS);
        let layers = data.join("overlay2");
        let mut configs: HashMap<String, ContainerRecord> = HashMap::new();
        for name in cx.dirs(&containers) {
            let Some(id) = name.to_str() else { continue };
            let dir = containers.join(&name);
            let config = dir.join("config.v2.json");
            let record = cx.parse(&config, MAX_RECORD, docker_container);
            let record = super::witnessed(cx, id, record.unwrap_or_else(unread));
            container_files(cx, data, id, &record);
            configs.insert(id.to_owned(), record);
        }
        // Writable layer id → container.
        let mounts = data.join("image/overlay2/layerdb/mounts");
        let mut owners: HashMap<String, String> = HashMap::new();
        for name in cx.dirs(&mounts) {
            if let Some(id) = layer_id(cx, &mounts.join(&name).join("mount-id")) {
                owners.insert(id, name.to_string_lossy().into_owned());
            }
        }
        for name in cx.dirs(&layers) {
            let Some(id) = name.to_str().filter(|n| *n != "l") else { continue };
            // A container's init layer (`<mount id>-init`: its `/etc/hosts` and the like)
            // is the container's too.
            let container = owners.get(id).or_else(|| owners.get(id.strip_suffix("-init")?));
            let layer = match (container, image_layers.get(id)) {
                (Some(c), _) => {
                    let record = configs.get(c).cloned().unwrap_or_else(unread);
                    Ownership::of_record(site, Category::ContainerLayer, c, &record)
                }
                (None, Some(names)) => {
                    let mut own = Ownership::new(site, Category::ImageLayer, None, None);
                    own.images = Images::new(names.iter().cloned());
                    own
                }
                // Where the layer store could not be read, every other layer is an image's.
                (None, None) if image_layers.is_empty() => {
                    Ownership::new(site, Category::ImageLayer, None, None)
                }
                (None, None) => {
                    let mut own = Ownership::new(site, Category::Other, None, None);
                    own.note = Some(NO_OWNER);
                    own
                }
            };
            cx.push(&layers.join(&name).join("diff"), ScopeKind::Owned(layer), Unresolved::Quiet);
        }
        let volumes = data.join("volumes");
        for name in cx.dirs(&volumes) {
            let volume = Ownership::new(SiteId::RuntimeVolume, Category::Other, None, None);
            cx.push(
                &volumes.join(&name).join("_data"),
                ScopeKind::Owned(volume),
                Unresolved::Quiet,
            );
        }
    }

    fn advice(&self, f: &Finding, cx: Advice<'_>) -> (String, String) {
        super::runtime_advice(f, cx.live)
    }
}

/// Container `id`'s own dir, `containers/<id>`: the container's, as its `record` names it
/// (see [`CONTAINER_DIR`]).
fn container_files(cx: &mut Discovery<'_>, data: &Path, id: &str, record: &ContainerRecord) {
    let site = SiteId::DockerStorage;
    let dir = ContainerDir {
        id: id.to_owned(),
        kept: Ownership::of_record(site, Category::EnvPersisted, id, record),
        log: super::runtime_data::log_of(id, record),
        layout: &CONTAINER_DIR,
    };
    // From the data root: a `containers` that is a symlink is not followed either.
    let tail = Path::new(CONTAINERS).join(id);
    cx.push_below(data, &tail, ScopeKind::Container(Box::new(dir)));
}

/// The image configs of every storage driver's image store (`image/<driver>/imagedb/
/// content/sha256/<id>`: `ENV`, labels, and the history whose `created_by` holds build
/// args), each named after the references `repositories.json` gives it; a config no
/// reference names (an untagged image, a classic build's intermediate) is read too.
/// Returns every image layer dir (`overlay2/<cache id>`) the layer store knows
/// (`layerdb/sha256/<chain id>/cache-id`), each with the names of the images it is part
/// of: each config's `rootfs.diff_ids` give its layers' chain ids.
fn image_configs(cx: &mut Discovery<'_>, data: &Path) -> HashMap<String, BTreeSet<Arc<str>>> {
    let site = SiteId::DockerStorage;
    let images = data.join("image");
    let mut layers: HashMap<String, BTreeSet<Arc<str>>> = HashMap::new();
    for driver in cx.dirs(&images) {
        let store = images.join(&driver);
        let repositories = store.join("repositories.json");
        let (names, cut) =
            cx.parse(&repositories, MAX_RECORD, docker_image_names).unwrap_or_default();
        if cut {
            cx.errors.push(super::cut_error(&repositories, "image references", MAX_IMAGE_NAMES));
        }
        // Every layer the store knows, by chain id.
        let layerdb = store.join("layerdb/sha256");
        let mut dirs: HashMap<String, String> = HashMap::new();
        for chain in cx.dirs(&layerdb) {
            let Some(chain) = chain.to_str() else { continue };
            let cache_id = layerdb.join(chain).join("cache-id");
            if let Some(dir) = layer_id(cx, &cache_id) {
                layers.entry(dir.clone()).or_default();
                dirs.insert(chain.to_owned(), dir);
            }
        }
        let configs = store.join("imagedb/content/sha256");
        for id in cx.files(&configs) {
            let mut own = Ownership::new(site, Category::ImageConfig, None, None);
            let names = id.to_str().and_then(|id| names.get(id));
            let shown = names.into_iter().flatten().take(MAX_NAMES_PER_LAYER).cloned();
            own.images = Images::new(shown);
            let config = configs.join(&id);
            if let Some(names) = names {
                let chain = cx.parse(&config, MAX_RECORD, docker_chain_ids).unwrap_or_default();
                for dir in chain.iter().filter_map(|c| dirs.get(c)) {
                    add_names(layers.entry(dir.clone()).or_default(), names);
                }
            }
            cx.push(&config, ScopeKind::Owned(own), Unresolved::Quiet);
        }
    }
    layers
}

/// A layer id record (`mount-id`, `cache-id`: 64 hex digits), trimmed: read whatever
/// `--max-file-size` says, so that a layer stays its owner's; none when empty.
fn layer_id(cx: &mut Discovery<'_>, node: &Path) -> Option<String> {
    let id = cx.read_tiny(node, MAX_MOUNT_ID)?;
    Some(String::from_utf8_lossy(&id).trim().to_owned()).filter(|id| !id.is_empty())
}
