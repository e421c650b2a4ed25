//! CRI-O's containers-storage (`/var/lib/containers/storage`): `overlay/<layer>/diff` is a
//! container's writable layer when `overlay-containers/containers.json` names the layer
//! as a container's `layer`, else an image layer; `overlay-containers/<id>/userdata/
//! config.json` is the OCI spec (with the env) CRI-O keeps on disk. The pod comes from
//! the record's `metadata` (a JSON string CRI-O writes, with the pod `uid`);
//! `overlay-images/<id>/` holds an image's config, named through `images.json`. Facts in
//! `docs/NODE-LAYOUT.md` (CRI-O); the records are parsed by
//! [`crate::node::other_runtimes`].

use super::{Advice, Discovery, Ownership, ScopeKind, Site, Unresolved};
use crate::finding::{Category, Finding, SiteId};
use crate::node::other_runtimes::{
    crio_layers, crio_root, storage_graphroot, storage_image_names, MAX_RECORD,
};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// CRI-O's default graph root.
pub const CRIO_ROOT: &str = "/var/lib/containers/storage";

/// containers/storage's configuration, which may name another root (`graphroot`).
pub const STORAGE_CONF: &str = "/etc/containers/storage.conf";

/// CRI-O's configuration, which may name its own storage root (`[crio] root`).
pub const CRIO_CONF: &str = "/etc/crio/crio.conf";

/// The largest configuration file read.
const MAX_CONF: u64 = 1 << 20;

/// containers/storage (CRI-O, Podman).
pub struct ContainersStorage;

impl Site for ContainersStorage {
    fn ids(&self) -> &'static [SiteId] {
        &[SiteId::ContainersStorage]
    }

    fn discover(&self, cx: &mut Discovery<'_>) {
        for graph in graph_roots(cx) {
            discover_graph(cx, &graph);
            image_configs(cx, &graph);
        }
    }

    /// As the records say: a container's layer or spec, or an image layer.
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

/// The containers/storage roots to scan: `--containers-storage-root`, else those CRI-O's
/// `crio.conf` (`[crio] root`) and `storage.conf` (`graphroot`) name, else the default
/// ([`Discovery::runtime_root`]).
fn graph_roots(cx: &mut Discovery<'_>) -> Vec<PathBuf> {
    let mut named: Vec<(PathBuf, Option<&'static str>)> = Vec::new();
    match &cx.layout.containers_storage_root {
        Some(given) => named.push((given.clone(), Some("--containers-storage-root"))),
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

/// The scopes of the containers/storage root `graph`: layers, and containers' specs.
fn discover_graph(cx: &mut Discovery<'_>, graph: &Path) {
    let site = SiteId::ContainersStorage;
    let layers = graph.join("overlay");
    let containers = graph.join("overlay-containers");
    let records = containers.join("containers.json");
    let owners = cx.parse(&records, MAX_RECORD, crio_layers).unwrap_or_default();
    let by_container: HashMap<&str, Option<&String>> =
        owners.values().map(|(id, uid)| (id.as_str(), uid.as_ref())).collect();
    for name in cx.dirs(&layers) {
        let Some(id) = name.to_str().filter(|n| *n != "l") else { continue };
        let (category, container, pod_uid) = match owners.get(id) {
            Some((c, uid)) => (Category::ContainerLayer, Some(c.clone()), uid.clone()),
            None => (Category::ImageLayer, None, None),
        };
        let layer = ScopeKind::Owned(Ownership::new(site, category, container, pod_uid));
        cx.push(&layers.join(&name).join("diff"), layer, Unresolved::Quiet);
    }
    for name in cx.dirs(&containers) {
        let Some(id) = name.to_str() else { continue };
        let pod_uid = by_container.get(id).copied().flatten().cloned();
        let spec = Ownership::new(site, Category::EnvPersisted, Some(id.to_owned()), pod_uid);
        let config = containers.join(&name).join("userdata/config.json");
        cx.push(&config, ScopeKind::Owned(spec), Unresolved::Quiet);
    }
}

/// The image dirs of the containers/storage root `graph` (`overlay-images/<id>/`: the
/// config, stored under the file name `=<base64 of "sha256:<id>">`, with `ENV`, labels
/// and the history holding build args; the manifest), each named after the names
/// `images.json` gives it.
fn image_configs(cx: &mut Discovery<'_>, graph: &Path) {
    let images = graph.join("overlay-images");
    let records = images.join("images.json");
    let names = cx.parse(&records, MAX_RECORD, storage_image_names).unwrap_or_default();
    for id in cx.dirs(&images) {
        let mut own = Ownership::new(SiteId::ContainersStorage, Category::ImageConfig, None, None);
        let names = id.to_str().and_then(|id| names.get(id));
        own.images = names.map(|n| n.iter().cloned().collect()).unwrap_or_default();
        cx.push(&images.join(&id), ScopeKind::Owned(own), Unresolved::Quiet);
    }
}
