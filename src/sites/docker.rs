//! Docker's data root (`/var/lib/docker`): `overlay2/<id>/diff` is a container's writable
//! layer when `image/overlay2/layerdb/mounts/<container>/mount-id` names it, else an
//! image layer; `containers/<id>/config.v2.json` holds the container's `Config` with its
//! `Env` and `Labels` (the pod from kubelet's `io.kubernetes.pod.uid` label);
//! `image/overlay2/imagedb/content/sha256/<id>` an image's config, named through
//! `image/overlay2/repositories.json`. Facts in
//! `docs/NODE-LAYOUT.md` (Docker); the records are parsed by
//! [`crate::node::other_runtimes`].

use super::{Advice, Discovery, Ownership, ScopeKind, Site, Unresolved};
use crate::finding::{Category, Finding, SiteId};
use crate::node::other_runtimes::{
    docker_container, docker_data_root, docker_image_names, ContainerRecord, MAX_RECORD,
};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Docker's default data root.
pub const DOCKER_ROOT: &str = "/var/lib/docker";

/// Docker's daemon configuration, which may name another data root (`data-root`).
pub const DAEMON_JSON: &str = "/etc/docker/daemon.json";

/// The dir of the containerd dockerd starts for itself, under Docker's data root (its
/// root) and exec root (its state) (moby `libcontainerd/supervisor/remote_daemon.go`).
const OWN_CONTAINERD: &str = "containerd/daemon";

/// Docker's default exec root, where its containerd keeps its state.
const EXEC_ROOT: &str = "/run/docker";

/// The largest `daemon.json` read.
const MAX_DAEMON_JSON: u64 = 1 << 20;

/// Largest `mount-id` read (a layer id: 64 hex digits).
const MAX_MOUNT_ID: u64 = 4096;

/// Docker's data root.
pub struct Docker;

/// Docker's data root: `--docker-root`, else what `daemon.json` names, else the default
/// ([`Discovery::runtime_root`]).
fn data_root(cx: &mut Discovery<'_>) -> Option<PathBuf> {
    let (root, named_by) = match &cx.layout.docker_root {
        Some(given) => (given.clone(), Some("--docker-root")),
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
    fn ids(&self) -> &'static [SiteId] {
        &[SiteId::DockerStorage]
    }

    /// Also the containerd dockerd starts for itself when it is given none (namespace
    /// `moby`), scanned as containerd's family scans the node's.
    fn discover(&self, cx: &mut Discovery<'_>) {
        let Some(data) = data_root(cx) else { return };
        let data = data.as_path();
        let own = data.join(OWN_CONTAINERD);
        // The node's containerd, when pointed there, is scanned already.
        if own != cx.layout.containerd_root && super::resolve(cx.root, &own).is_ok() {
            let state = Path::new(EXEC_ROOT).join(OWN_CONTAINERD);
            super::containerd::discover_one(cx, &own, &state, None);
        }
        let site = SiteId::DockerStorage;
        let containers = data.join("containers");
        let layers = data.join("overlay2");
        let mut configs: HashMap<String, ContainerRecord> = HashMap::new();
        for name in cx.dirs(&containers) {
            let Some(id) = name.to_str() else { continue };
            let dir = containers.join(&name);
            let config = dir.join("config.v2.json");
            let record = cx.parse(&config, MAX_RECORD, docker_container).unwrap_or_default();
            let spec = Ownership::of_record(site, Category::EnvPersisted, id, &record);
            cx.push(&config, ScopeKind::Owned(spec), Unresolved::Quiet);
            logs(cx, &dir, id, &record);
            configs.insert(id.to_owned(), record);
        }
        // Writable layer id → container.
        let mounts = data.join("image/overlay2/layerdb/mounts");
        let mut owners: HashMap<String, String> = HashMap::new();
        for name in cx.dirs(&mounts) {
            if let Some(id) = cx.read_tiny(&mounts.join(&name).join("mount-id"), MAX_MOUNT_ID) {
                let id = String::from_utf8_lossy(&id).trim().to_owned();
                owners.insert(id, name.to_string_lossy().into_owned());
            }
        }
        for name in cx.dirs(&layers) {
            let Some(id) = name.to_str().filter(|n| *n != "l") else { continue };
            let layer = match owners.get(id) {
                Some(c) => {
                    let record = configs.get(c).cloned().unwrap_or_default();
                    Ownership::of_record(site, Category::ContainerLayer, c, &record)
                }
                None => Ownership::new(site, Category::ImageLayer, None, None),
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
        image_configs(cx, data);
    }

    /// As the records say: a container's layer or config, or an image layer.
    fn category(
        &self,
        _id: SiteId,
        owner: Option<&Ownership>,
        _on_tmpfs: &mut dyn FnMut() -> bool,
    ) -> Category {
        owner.map_or(Category::Other, |o| o.category)
    }

    fn advice(&self, f: &Finding, cx: Advice<'_>) -> (String, String) {
        super::runtime_advice(f, cx.live)
    }
}

/// A container's logs as Docker writes them: the json-file driver's `<id>-json.log` and its
/// rotations (`.1`, `.2.gz`, ...), the local driver's `local-logs/`; each the container's,
/// named as its `record` names it (a pod's log when it names the pod).
fn logs(cx: &mut Discovery<'_>, dir: &Path, id: &str, record: &ContainerRecord) {
    let own = || super::runtime_data::log_of(id, record);
    let json_log = format!("{id}-json.log");
    for file in cx.files(dir) {
        let Some(name) = file.to_str() else { continue };
        let rotated = name.strip_prefix(json_log.as_str()).is_some_and(|r| r.starts_with('.'));
        if name == json_log || rotated {
            cx.push(&dir.join(name), ScopeKind::Owned(own()), Unresolved::Quiet);
        }
    }
    cx.push(&dir.join("local-logs"), ScopeKind::Owned(own()), Unresolved::Quiet);
}

/// The image configs of every storage driver's image store (`image/<driver>/imagedb/
/// content/sha256/<id>`: `ENV`, labels, and the history whose `created_by` holds build
/// args), each named after the references `repositories.json` gives it; a config no
/// reference names (an untagged image, a classic build's intermediate) is read too.
fn image_configs(cx: &mut Discovery<'_>, data: &Path) {
    let site = SiteId::DockerStorage;
    let images = data.join("image");
    for driver in cx.dirs(&images) {
        let store = images.join(&driver);
        let repositories = store.join("repositories.json");
        let names = cx.parse(&repositories, MAX_RECORD, docker_image_names).unwrap_or_default();
        let configs = store.join("imagedb/content/sha256");
        for id in cx.files(&configs) {
            let mut own = Ownership::new(site, Category::ImageConfig, None, None);
            let names = id.to_str().and_then(|id| names.get(id));
            own.images = names.map(|n| n.iter().cloned().collect()).unwrap_or_default();
            cx.push(&configs.join(&id), ScopeKind::Owned(own), Unresolved::Quiet);
        }
    }
}
