//! The records of containers/storage (CRI-O's, Podman's) and Docker's data root that tell
//! what a dir is (their discovery is in [`crate::sites::containers_storage`] and
//! [`crate::sites::docker`]; facts in `docs/NODE-LAYOUT.md`), parsed as they are read.

use super::json::{self, Capped};
use super::MAX_NAME;
use crate::runtimes::{Keeper, Runtime};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

/// Largest record file read (`containers.json`, `config.v2.json`). Records are parsed as
/// they are read, keeping only the few fields used, so this bounds time, not memory.
pub const MAX_RECORD: u64 = 64 << 20;
/// Container records of `containers.json` kept (see [`super::MAX_RECORDS`]).
pub const MAX_CONTAINERS: usize = super::MAX_RECORDS;
/// Longest id, layer id or pod uid kept (container ids are 64 hex digits, pod uids 36
/// characters); a longer one is not a runtime's and is dropped.
const MAX_ID: usize = 256;

/// A record of containers/storage's `containers.json` or `volatile-containers.json`: the
/// container, its writable layer, and what the record's `metadata` (a JSON string its
/// runtime writes) says of it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StorageContainer {
    /// The container's id.
    pub id: String,
    /// Its writable layer's id.
    pub layer: Option<String>,
    /// Its names, pod and runtime: CRI-O's records (those with a `pod-id`) name the
    /// kubelet container (`metadata-name`); its pod's uid, namespace and name
    /// (`metadata-name`) are on the pod's sandbox record ([`link_pods`]). Podman's name
    /// the container (`name`).
    pub record: ContainerRecord,
    /// CRI-O's `pod-id`: the id of the pod's sandbox record.
    pub pod_id: Option<String>,
}

/// A containers/storage record list (`containers.json`, `volatile-containers.json`),
/// parsed as it is read: each record's `id`, `layer` and `metadata` (itself JSON); every
/// other field is skipped by the parser unheld, for at most [`MAX_CONTAINERS`] records;
/// ids longer than a runtime makes are dropped. `None` when it is not a JSON list.
pub fn storage_containers(json: &mut dyn std::io::Read) -> Option<Capped<StorageContainer>> {
    const META: [&[&str]; 5] =
        [&["uid"], &["namespace"], &["pod-id"], &["metadata-name"], &["name"]];
    let records = json::pick_each(json, &[&["id"], &["layer"], &["metadata"]], MAX_CONTAINERS)?;
    let mut out = Vec::new();
    for r in records.items {
        let [id, layer, meta] = <[Option<String>; 3]>::try_from(r).ok()?;
        let Some(id) = short(id) else { continue };
        let meta = meta.and_then(|m| json::pick_slice(m.as_bytes(), &META));
        let meta = meta.unwrap_or_else(|| vec![None; META.len()]).into_iter().map(short);
        let [uid, namespace, pod_id, kubelet_name, name] =
            <[Option<String>; 5]>::try_from(meta.collect::<Vec<_>>()).ok()?;
        let runtime = Some(if pod_id.is_some() { Runtime::CriO } else { Runtime::Podman }.into());
        // A sandbox's own record: its `metadata-name` is the pod's name.
        let pod_name = uid.as_ref().and(kubelet_name.clone());
        let record = ContainerRecord {
            name: kubelet_name.or(name),
            pod_uid: uid,
            pod_namespace: namespace,
            pod_name,
            running: None,
            runtime,
        };
        out.push(StorageContainer { id, layer: short(layer), record, pod_id });
    }
    Some(Capped { items: out, cut: records.cut })
}

/// Gives each CRI-O container of `records` its pod's uid, namespace and name, from the
/// record of the sandbox its `pod-id` names (CRI-O's own `pod-name` is the sandbox's
/// `k8s_<pod>_<namespace>_<uid>_<attempt>`, not the pod's name).
pub fn link_pods(records: &mut [StorageContainer]) {
    let pods: HashMap<String, ContainerRecord> = records
        .iter()
        .filter(|c| c.record.pod_uid.is_some())
        .map(|c| (c.id.clone(), c.record.clone()))
        .collect();
    for c in records.iter_mut() {
        let Some(pod) = c.pod_id.as_ref().and_then(|p| pods.get(p)) else { continue };
        let r = &mut c.record;
        r.pod_uid = r.pod_uid.take().or_else(|| pod.pod_uid.clone());
        r.pod_namespace = r.pod_namespace.take().or_else(|| pod.pod_namespace.clone());
        r.pod_name = r.pod_name.take().or_else(|| pod.pod_name.clone());
    }
}

/// Container id → (name, whether it runs), as [`libpod_containers`] returns them.
pub type LibpodContainers = HashMap<String, (Option<String>, Option<bool>)>;

/// What Podman's state database (`<graphroot>/libpod/bolt_state.db`, bbolt) says of each
/// container: id → (name, whether it runs). Bucket `ctr` holds a bucket per container id
/// whose `state` is JSON with `state`, libpod's `ContainerStatus`: configured (1), created
/// (2), running (3), paused (5) and stopping (8) are live, stopped (4), exited (6) and
/// removing (7) are not, anything else unknown; bucket `all-ctrs` maps ids to names. `None`
/// when it is not a bbolt file with a `ctr` bucket.
pub fn libpod_containers(db: &mut dyn std::io::Read) -> Option<LibpodContainers> {
    use crate::bbolt::{Db, Flow, Value};
    let mut data = Vec::new();
    db.read_to_end(&mut data).ok()?;
    let db = Db::open(&data).ok()?;
    let root = db.root();
    let ctrs = root.bucket(b"ctr").ok()??;
    // Walked entry by entry, at most MAX_CONTAINERS of each kept; a damaged bucket gives
    // what was read before the damage.
    let mut names: HashMap<&[u8], &[u8]> = HashMap::new();
    if let Ok(Some(all)) = root.bucket(b"all-ctrs") {
        let _ = all.each(|k, v| {
            if let Value::Data(name) = v {
                names.insert(k, name);
            }
            if names.len() < MAX_CONTAINERS {
                Flow::Continue(())
            } else {
                Flow::Break(())
            }
        });
    }
    let text = |b: &[u8]| short(std::str::from_utf8(b).ok().map(str::to_owned));
    let mut out = HashMap::new();
    let _ = ctrs.each(|id, entry| {
        let (Some(id_text), Value::Bucket(ctr)) = (text(id), entry) else {
            return Flow::Continue(());
        };
        /// libpod's `ContainerState`, of which only `state` is kept (the rest is skipped).
        #[derive(serde::Deserialize)]
        struct State {
            state: Option<u64>,
        }
        let state = ctr.get(b"state").ok().flatten();
        let status = state.and_then(|s| serde_json::from_slice::<State>(s).ok());
        let running = match status.and_then(|s| s.state) {
            Some(1 | 2 | 3 | 5 | 8) => Some(true),
            Some(4 | 6 | 7) => Some(false),
            _ => None,
        };
        let name = names.get(id).and_then(|n| text(n));
        out.insert(id_text, (name, running));
        if out.len() < MAX_CONTAINERS {
            Flow::Continue(())
        } else {
            Flow::Break(())
        }
    });
    Some(out)
}

/// containers/storage's `layers.json` (a list of records), parsed as it is read: each
/// layer's parent, for at most [`MAX_CONTAINERS`] records. `None` when it is not a JSON list.
pub fn storage_layer_parents(
    json: &mut dyn std::io::Read,
) -> Option<(HashMap<String, String>, bool)> {
    let records = json::pick_each(json, &[&["id"], &["parent"]], MAX_LAYERS)?;
    let pairs = records.items.into_iter().filter_map(|r| {
        let [id, parent] = <[Option<String>; 2]>::try_from(r).ok()?;
        Some((short(id)?, short(parent)?))
    });
    Some((pairs.collect(), records.cut))
}

/// Layer records of `layers.json` kept (a node's images have a few thousand).
pub const MAX_LAYERS: usize = 4 * super::MAX_RECORDS;

/// The longest chain of parent layers followed from an image's top layer (overlay stacks
/// at most 128 layers; Docker makes at most 125).
const MAX_CHAIN: usize = 256;

/// Names kept on layers in all (an image's names on each of its layers).
const MAX_LAYER_NAMES: usize = 1 << 20;

/// Names kept on one layer: a layer shared by more images is reported with the first
/// 256 of their names (each finding in the layer carries the list).
pub const MAX_NAMES_PER_LAYER: usize = 256;

/// Adds `names` to a layer's `set`, up to [`MAX_NAMES_PER_LAYER`]; how many it added.
pub fn add_names(set: &mut BTreeSet<Arc<str>>, names: &BTreeSet<Arc<str>>) -> usize {
    let before = set.len();
    for name in names {
        if set.len() >= MAX_NAMES_PER_LAYER {
            break;
        }
        set.insert(name.clone());
    }
    set.len() - before
}

/// Layer id → the names of the images whose stacks hold it: each image's names on its top
/// layer (`tops`: top layer, names) and on each parent below it (`parents`), at most
/// 256 deep (`MAX_CHAIN`), [`MAX_NAMES_PER_LAYER`] a layer and 2^20 names in all
/// (`MAX_LAYER_NAMES`).
pub fn images_of_layers<'n>(
    tops: impl IntoIterator<Item = (String, &'n BTreeSet<Arc<str>>)>,
    parents: &HashMap<String, String>,
) -> HashMap<String, BTreeSet<Arc<str>>> {
    let mut out: HashMap<String, BTreeSet<Arc<str>>> = HashMap::new();
    let mut kept = 0;
    for (top, names) in tops {
        let mut layer = Some(top);
        for _ in 0..MAX_CHAIN {
            let Some(at) = layer.take() else { break };
            if kept >= MAX_LAYER_NAMES {
                return out;
            }
            layer = parents.get(&at).cloned();
            kept += add_names(out.entry(at).or_default(), names);
        }
    }
    out
}

/// An id, unless it is longer than any a runtime makes.
fn short(id: Option<String>) -> Option<String> {
    id.filter(|s| s.len() <= MAX_ID)
}

/// The data root Docker's `daemon.json` names (`data-root`; `graph`, the deprecated name
/// of the same setting, when that is all it has): `Some(None)` when it names none, `None` when
/// it is not JSON. Longer than a path may be is none.
pub fn docker_data_root(json: &mut dyn std::io::Read) -> Option<Option<String>> {
    let picked = json::pick_reader(json, &[&["data-root"], &["graph"]])?;
    let [root, graph] = <[Option<String>; 2]>::try_from(picked).ok()?;
    Some(root.or(graph).filter(|p| p.len() <= 4096))
}

/// The string at `path` (table names, then the key) in the TOML document read from
/// `text`: `Some(None)` when it has none there, `None` when it is not TOML (or not UTF-8).
/// Longer than a path may be is none.
pub fn toml_string(text: &mut dyn std::io::Read, path: &[&str]) -> Option<Option<String>> {
    toml_strings(text, &[path])?.pop()
}

/// [`toml_string`] of several paths in one document.
pub fn toml_strings(
    text: &mut dyn std::io::Read,
    paths: &[&[&str]],
) -> Option<Vec<Option<String>>> {
    let mut s = String::new();
    text.read_to_string(&mut s).ok()?;
    let doc: toml::Table = s.parse().ok()?;
    let at = |path: &[&str]| {
        let (key, tables) = path.split_last()?;
        let mut table = &doc;
        for name in tables {
            match table.get(*name) {
                Some(toml::Value::Table(t)) => table = t,
                _ => return None,
            }
        }
        let found = table.get(*key).and_then(|v| v.as_str()).filter(|p| p.len() <= 4096);
        found.map(str::to_owned)
    };
    Some(paths.iter().map(|p| at(p)).collect())
}

/// containerd's `root` and `state` in its `config.toml` (top-level keys).
pub fn containerd_dirs(text: &mut dyn std::io::Read) -> Option<(Option<String>, Option<String>)> {
    let mut found = toml_strings(text, &[&["root"], &["state"]])?;
    let state = found.pop()?;
    Some((found.pop()?, state))
}

/// containers/storage's `graphroot` in its `storage.conf` (`[storage] graphroot`).
pub fn storage_graphroot(text: &mut dyn std::io::Read) -> Option<Option<String>> {
    toml_string(text, &["storage", "graphroot"])
}

/// CRI-O's containers-storage root in its `crio.conf` (`[crio] root`).
pub fn crio_root(text: &mut dyn std::io::Read) -> Option<Option<String>> {
    toml_string(text, &["crio", "root"])
}

/// What a runtime's own records say of a container: its names, its pod's (kubelet's
/// `io.kubernetes.*` labels, as cri-dockerd sets them), and whether it runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerRecord {
    /// The container's name: kubelet's container name when labelled, else the runtime's.
    pub name: Option<String>,
    /// The pod's uid.
    pub pod_uid: Option<String>,
    /// The pod's namespace.
    pub pod_namespace: Option<String>,
    /// The pod's name.
    pub pod_name: Option<String>,
    /// Whether it runs (Docker's `State.Running`), when the record says.
    pub running: Option<bool>,
    /// The runtime that keeps the record (`docker`, `cri-o`, `podman`).
    pub runtime: Option<Keeper>,
}

/// A Docker container's `config.v2.json`, parsed as it is read (the rest of the config is
/// skipped unheld): `Name`, kubelet's labels and `State.Running` (a
/// container never started, `State.StartedAt` Go's zero time, counts as running: created).
/// `None` when it is not JSON.
pub fn docker_container(json: &mut dyn std::io::Read) -> Option<ContainerRecord> {
    const LABELS: [&str; 4] = [
        "io.kubernetes.container.name",
        "io.kubernetes.pod.uid",
        "io.kubernetes.pod.namespace",
        "io.kubernetes.pod.name",
    ];
    let mut paths: Vec<Vec<&str>> = LABELS.iter().map(|l| vec!["Config", "Labels", l]).collect();
    paths.extend([vec!["Name"], vec!["State", "Running"], vec!["State", "StartedAt"]]);
    let paths: Vec<&[&str]> = paths.iter().map(Vec::as_slice).collect();
    let picked = json::pick_reader(json, &paths)?;
    let [container, uid, namespace, pod, name, running, started] =
        <[Option<String>; 7]>::try_from(picked).ok()?;
    let name = name.map(|n| n.strip_prefix('/').unwrap_or(&n).to_owned());
    // Never started (Go's zero time): created, which CRI counts as live.
    let created = started.is_some_and(|t| t.starts_with("0001-01-01"));
    let running = running.map(|r| r == "true" || created);
    Some(ContainerRecord {
        name: short(container.or(name)),
        pod_uid: short(uid),
        pod_namespace: short(namespace),
        pod_name: short(pod),
        running,
        runtime: Some(Runtime::Docker.into()),
    })
}

/// Image names kept: a node holds a few hundred images, each with a few names.
pub const MAX_IMAGE_NAMES: usize = 65_536;
/// Names kept of one image.
const MAX_NAMES_PER_IMAGE: usize = 256;

/// Image id (hex, no `sha256:`) → the names of the image, as [`docker_image_names`] and
/// [`storage_images`] return them.
pub type ImageNames = HashMap<String, BTreeSet<Arc<str>>>;

/// Docker's `repositories.json` (`Repositories` → repository → reference → `sha256:<id>`),
/// parsed as it is read: each image id's references (tags and digests), at most
/// [`MAX_IMAGE_NAMES`] in all, and whether there were more. `None` when it is not JSON.
pub fn docker_image_names(json: &mut dyn std::io::Read) -> Option<(ImageNames, bool)> {
    let pairs = json::pick_nested_pairs(json, "Repositories", MAX_IMAGE_NAMES)?;
    let mut names = ImageNames::new();
    for (reference, id) in pairs.items {
        let Some(id) = short(Some(id)) else { continue };
        let id = id.strip_prefix("sha256:").unwrap_or(&id).to_owned();
        if reference.len() <= MAX_NAME {
            names.entry(id).or_default().insert(Arc::from(reference));
        }
    }
    Some((names, pairs.cut))
}

/// Layers of one image kept (overlay stacks at most 128).
const MAX_IMAGE_LAYERS: usize = 256;

/// The chain ids (hex, no `sha256:`) of the layers of the Docker image whose config is read
/// from `json`, bottom first: the first is the first `rootfs.diff_ids` entry, each next one
/// the SHA-256 of the one below (`sha256:<hex>`), a space and its own diff id, as the
/// image spec defines them; Docker keeps each layer under its chain id
/// (`layerdb/sha256/<chain id>/cache-id` names its `overlay2` dir). `None` when it is not
/// JSON; a diff id that is not `sha256:` and hex ends the chain.
pub fn docker_chain_ids(json: &mut dyn std::io::Read) -> Option<Vec<String>> {
    use sha2::{Digest, Sha256};
    let diffs = json::pick_list_at(json, &["rootfs", "diff_ids"], MAX_IMAGE_LAYERS)?;
    let mut chain: Vec<String> = Vec::new();
    for diff in diffs {
        let hex = diff.strip_prefix("sha256:").filter(|h| {
            h.len() == 64 && h.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        });
        let Some(hex) = hex else { break };
        let next = match chain.last() {
            None => hex.to_owned(),
            Some(below) => {
                let digest = Sha256::digest(format!("sha256:{below} {diff}").as_bytes());
                digest.iter().map(|b| format!("{b:02x}")).collect()
            }
        };
        chain.push(next);
    }
    Some(chain)
}

/// What containers/storage's `images.json` says: each image id's names, and each image's
/// top layer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StorageImages {
    /// Image id → names.
    pub names: ImageNames,
    /// (image id, its top layer's id).
    pub tops: Vec<(String, String)>,
    /// Whether records past [`MAX_CONTAINERS`] were left out.
    pub cut: bool,
}

/// containers/storage's `images.json` (a list of records with `id`, `names` and `layer`),
/// parsed as it is read, for at most [`MAX_CONTAINERS`] records of at most 256 names.
/// `None` when it is not a JSON list.
pub fn storage_images(json: &mut dyn std::io::Read) -> Option<StorageImages> {
    let keys = [("id", 1), ("names", MAX_NAMES_PER_IMAGE), ("layer", 1)];
    let records = json::pick_each_keys(json, &keys, MAX_CONTAINERS)?;
    let mut images = StorageImages { cut: records.cut, ..StorageImages::default() };
    for r in records.items {
        let [id, names, layer] = <[Vec<String>; 3]>::try_from(r).ok()?;
        let Some(id) = short(id.into_iter().next()) else { continue };
        if let Some(layer) = short(layer.into_iter().next()) {
            images.tops.push((id.clone(), layer));
        }
        let names = names.into_iter().filter(|n| n.len() <= MAX_NAME).map(Arc::from);
        images.names.entry(id).or_default().extend(names);
    }
    Some(images)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_data_root_from_daemon_json() {
        let root = |s: &str| docker_data_root(&mut s.as_bytes());
        assert_eq!(root(r#"{"data-root": "/data/docker"}"#), Some(Some("/data/docker".into())));
        assert_eq!(root(r#"{"graph": "/old/docker"}"#), Some(Some("/old/docker".into())));
        let both = r#"{"graph": "/old", "data-root": "/new"}"#;
        assert_eq!(root(both), Some(Some("/new".into())), "data-root wins");
        assert_eq!(root(r#"{"debug": true}"#), Some(None));
        assert_eq!(root(r#"{"data-root": 7}"#), Some(None), "not a path");
        assert_eq!(root("not json"), None);
    }

    /// `sha256sum` of `sha256:<64 a> sha256:<64 b>`.
    const CHAIN_AB: &str = "ccd722928bd92476ba1745586fed6e45a102504185ad88cd89e01ff116fd146c";

    /// Chain ids as the image spec defines them: checked against a value computed with
    /// `printf 'sha256:<a> sha256:<b>' | sha256sum`.
    #[test]
    fn docker_chain_ids_of_a_config() {
        let (a, b) = ("a".repeat(64), "b".repeat(64));
        let config = format!(
            r#"{{"rootfs":{{"type":"layers","diff_ids":["sha256:{a}","sha256:{b}","md5:x","sha256:{a}"]}}}}"#
        );
        let chain = docker_chain_ids(&mut config.as_bytes()).unwrap();
        assert_eq!(chain.len(), 2, "a diff id of another digest ends the chain");
        assert_eq!(chain[0], a);
        assert_eq!(chain[1], CHAIN_AB);
        assert_eq!(docker_chain_ids(&mut &b"{}"[..]), Some(vec![]));
        assert_eq!(docker_chain_ids(&mut &b"nope"[..]), None);
    }

    #[test]
    fn image_names_of_both_runtimes() {
        let repos = br#"{"Repositories":{"web":{"web:1":"sha256:aa","web@sha256:dd":"sha256:aa"},
            "db":{"db:2":"sha256:bb"}}}"#;
        let (names, cut) = docker_image_names(&mut &repos[..]).unwrap();
        assert!(!cut);
        let set = |v: &[&str]| v.iter().map(|s| Arc::from(*s)).collect::<BTreeSet<Arc<str>>>();
        assert_eq!(names["aa"], set(&["web:1", "web@sha256:dd"]));
        assert_eq!(names["bb"], set(&["db:2"]));
        assert_eq!(docker_image_names(&mut &b"not json"[..]), None);
        let images =
            br#"[{"id":"aa","names":["localhost/web:1","localhost/web:2"],"big-data-names":["x"]},
            {"id":"bb"}]"#;
        let names = storage_images(&mut &images[..]).unwrap().names;
        assert_eq!(names["aa"], set(&["localhost/web:1", "localhost/web:2"]));
        assert!(names["bb"].is_empty());
        assert_eq!(storage_images(&mut &b"{}"[..]), None);
    }

    #[test]
    fn storage_roots_from_their_toml() {
        let conf = "[storage]\ndriver = \"overlay\"\ngraphroot = \"/data/storage\"\n";
        assert_eq!(storage_graphroot(&mut conf.as_bytes()), Some(Some("/data/storage".into())));
        let crio = "[crio]\nroot = \"/data/crio\"\n[crio.runtime]\nconmon = \"/usr/bin/conmon\"\n";
        assert_eq!(crio_root(&mut crio.as_bytes()), Some(Some("/data/crio".into())));
        assert_eq!(crio_root(&mut conf.as_bytes()), Some(None));
        assert_eq!(storage_graphroot(&mut "[storage]\ngraphroot = 3".as_bytes()), Some(None));
        assert_eq!(storage_graphroot(&mut "graphroot = [".as_bytes()), None);
        let ctrd = "version = 2\nroot = \"/data/containerd\"\n[plugins]\n";
        assert_eq!(
            containerd_dirs(&mut ctrd.as_bytes()),
            Some((Some("/data/containerd".into()), None))
        );
    }
}
