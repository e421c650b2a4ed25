//! containerd's metadata database (`<containerd root>/io.containerd.metadata.v1.bolt/meta.db`):
//! which bytes of the file belong to which container.
//!
//! The file is searched like any other, as a whole; this module then says, per byte
//! offset, whose data a match is in. Facts from `docs/NODE-LAYOUT.md` and containerd
//! (`metadata/buckets.go`, `containers.go`, `boltutil/helpers.go`, `pkg/cri/server/
//! helpers.go`): `v1/<namespace>/containers/<id>/` holds `spec` (a protobuf `Any` wrapping
//! the OCI spec as JSON, with every env var), `extensions/<name>` (the CRI plugin's
//! metadata, a second copy of the env), `labels/<k>` (`io.kubernetes.pod.uid`, …),
//! `image`, `snapshotter`, `snapshotKey`. Every value is one contiguous run of bytes in
//! the file, so a match is attributed by its offset. Bytes in pages no live structure
//! reaches (see [`crate::bbolt::Db::dead_ranges`]) are data of removed containers that
//! bbolt has not overwritten yet.

use super::other_runtimes::MAX_NAMES_PER_LAYER;
use super::{MAX_NAME, MAX_RECORDS};
use crate::bbolt::{Bucket, Db, Error, Flow, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ops::Range;
use std::sync::Arc;

/// Values of container records kept in all (a record has a few dozen: labels, spec,
/// extensions); past it the rest of the records are not read.
const MAX_VALUES: usize = 1 << 20;

/// Content blobs of a namespace looked up (an image has a manifest, a config and a layer
/// blob for each of its layers).
const MAX_BLOBS: usize = 4 * MAX_RECORDS;

/// Labels kept of one blob that link it to others (an index names a manifest a
/// platform; a config a top layer a snapshotter).
const MAX_LINKS: usize = 256;

/// What a snapshot is (`snapshots/snapshotter.go`, `Kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapshotKind {
    /// A read-only view.
    View,
    /// A writable layer: a container's, when its key is a container's snapshot key.
    Active,
    /// A committed layer: part of an image.
    Committed,
    /// Anything else.
    Unknown,
}

/// A snapshot record of the snapshotter's `metadata.db`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The containerd namespace (the first part of the backend key `<ns>/<seq>/<key>`).
    pub namespace: String,
    /// The client's key (the last part of the backend key): a container's snapshot key,
    /// or an image layer's chain id.
    pub key: String,
    /// What it is.
    pub kind: SnapshotKind,
    /// The id of the parent snapshot (the layer below), when it has one.
    pub parent: Option<u64>,
}

/// A snapshotter's records: its snapshots by id, and whether every record was read (when
/// not, a snapshot dir without a record is unknown, not an orphan).
#[derive(Debug, Default)]
pub struct Snapshots {
    /// The snapshots read, by id.
    pub records: BTreeMap<u64, Snapshot>,
    /// Whether the file was read to its end.
    pub complete: bool,
}

/// Snapshot records kept (an image layer or a container's writable layer each).
const MAX_SNAPSHOTS: usize = 4 * MAX_RECORDS;

/// The snapshots of a snapshotter's `metadata.db`, by id (the dir name under
/// `snapshots/`): `v1/snapshots/<backend key>/{id (uvarint), kind (a byte)}`
/// (`snapshots/storage/bolt.go`).
pub fn read_snapshots(data: &[u8]) -> Result<(Snapshots, Vec<Error>), Error> {
    let db = Db::open(data)?;
    let mut out = BTreeMap::new();
    let mut errors = Vec::new();
    let none = |errors| Ok((Snapshots { records: BTreeMap::new(), complete: true }, errors));
    let Some(v1) = db.root().bucket(b"v1")? else { return none(errors) };
    let Some(snapshots) = v1.bucket(b"snapshots")? else { return none(errors) };
    let mut ids: HashMap<&[u8], u64> = HashMap::new();
    let mut parents: Vec<(u64, &[u8])> = Vec::new();
    let mut cut = false;
    let walked = snapshots.each(|backend, value| {
        let Value::Bucket(b) = value else { return Flow::Continue(()) };
        if out.len() >= MAX_SNAPSHOTS {
            cut = true;
            return Flow::Break(());
        }
        // A key longer than a namespace, a sequence and a chain id or container id is no
        // snapshotter's.
        if backend.len() > 2 * MAX_NAME {
            return Flow::Continue(());
        }
        let mut fields = BTreeMap::new();
        let read = b.each(|k, v| {
            if let (Value::Data(d), b"id" | b"kind" | b"parent") = (v, k) {
                fields.insert(k, d);
            }
            Flow::Continue(())
        });
        if let Err(e) = read {
            errors.push(e);
            return Flow::Continue(());
        }
        let Some((id, _)) = fields.get(&b"id"[..]).and_then(|v| varint(v)) else {
            return Flow::Continue(());
        };
        let kind = match fields.get(&b"kind"[..]).and_then(|k| k.first()) {
            Some(1) => SnapshotKind::View,
            Some(2) => SnapshotKind::Active,
            Some(3) => SnapshotKind::Committed,
            _ => SnapshotKind::Unknown,
        };
        let name = lossy(backend);
        let mut parts = name.splitn(3, '/');
        let (namespace, key) = match (parts.next(), parts.next(), parts.next()) {
            (Some(ns), Some(_), Some(key)) => (ns.to_owned(), key.to_owned()),
            _ => (String::new(), name.clone()),
        };
        ids.insert(backend, id);
        if let Some(parent) = fields.get(&b"parent"[..]) {
            parents.push((id, parent));
        }
        out.insert(id, Snapshot { namespace, key, kind, parent: None });
        Flow::Continue(())
    });
    if let Err(e) = walked {
        errors.push(e);
        cut = true;
    }
    for (id, parent) in parents {
        if let (Some(&p), Some(s)) = (ids.get(parent), out.get_mut(&id)) {
            s.parent = Some(p);
        }
    }
    if cut {
        errors.push(crate::bbolt::many("snapshot records", MAX_SNAPSHOTS, 0));
    }
    Ok((Snapshots { records: out, complete: !cut }, errors))
}

/// The image names of each snapshot in `snapshots` (one snapshotter's records): every
/// layer of an image's chain, from the top layer `images` names down through the parents,
/// carries the image's names. A layer that several images share carries all of them.
pub fn layer_images(
    snapshotter: &str,
    snapshots: &BTreeMap<u64, Snapshot>,
    images: &[ImageTop],
) -> HashMap<u64, BTreeSet<Arc<str>>> {
    let by_key: HashMap<(&str, &str), u64> =
        snapshots.iter().map(|(id, s)| ((s.namespace.as_str(), s.key.as_str()), *id)).collect();
    let mut out: HashMap<u64, BTreeSet<Arc<str>>> = HashMap::new();
    for top in images.iter().filter(|t| t.snapshotter == snapshotter) {
        let mut next = by_key.get(&(top.namespace.as_str(), top.chain.as_str())).copied();
        // A layer's parent carries every name the layer does: a layer that has the name
        // already (a parent loop in a damaged file too), or is full, ends the walk, so
        // the work is at most a layer's names per layer.
        while let Some(id) = next {
            let names = out.entry(id).or_default();
            if names.contains(&top.name) || names.len() >= MAX_NAMES_PER_LAYER {
                break;
            }
            names.insert(top.name.clone());
            next = snapshots.get(&id).and_then(|s| s.parent);
        }
    }
    out
}

/// An image of `meta.db` and the top layer it was unpacked to: the chain id of its last
/// layer, as the snapshot key of one snapshotter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageTop {
    /// The containerd namespace.
    pub namespace: String,
    /// The image name (a tag, a digest reference or CRI's `sha256:<config>` id), shared by
    /// the layers it names.
    pub name: Arc<str>,
    /// The snapshotter it was unpacked with.
    pub snapshotter: String,
    /// The top layer's chain id (`sha256:…`).
    pub chain: String,
}

/// Content labels that link an image's blobs (`images/mediatypes.go`, `image.go`): a
/// manifest's config, an index's manifests, and the top snapshot a config was unpacked
/// to, per snapshotter.
const GC_CONFIG: &[u8] = b"containerd.io/gc.ref.content.config";
const GC_MANIFEST: &[u8] = b"containerd.io/gc.ref.content.m.";
const GC_SNAPSHOT: &[u8] = b"containerd.io/gc.ref.snapshot.";

/// The images of namespace `ns` and their top layers: `images/<name>/target/digest` is a
/// manifest (or an index, whose `m.<i>` labels name its manifests); the manifest blob's
/// `config` label names the config blob, whose `gc.ref.snapshot.<snapshotter>` labels name
/// the top layer's chain id.
/// Every config blob found on the way is `configs`' too, with the image's name, whether
/// or not it was unpacked.
fn image_tops(
    ns: &str,
    ns_bucket: &Bucket<'_>,
    out: &mut Vec<ImageTop>,
    configs: &mut BTreeMap<String, BTreeSet<Arc<str>>>,
) -> Result<(), Error> {
    let Some(images) = ns_bucket.bucket(b"images")? else { return Ok(()) };
    let content = ns_bucket.bucket(b"content")?;
    let mut blobs: HashMap<&[u8], Bucket<'_>> = HashMap::new();
    let mut cut = false;
    if let Some(b) = content.map(|c| c.bucket(b"blob")).transpose()?.flatten() {
        b.each(|k, v| {
            if let Value::Bucket(b) = v {
                blobs.insert(k, b);
            }
            cut = blobs.len() >= MAX_BLOBS;
            if cut {
                Flow::Break(())
            } else {
                Flow::Continue(())
            }
        })?;
    }
    // The labels of blob `digest` whose keys `pick` keeps, at most MAX_LINKS of them.
    let labels = |digest: &[u8], pick: &dyn Fn(&[u8]) -> bool| -> Vec<(&[u8], &[u8])> {
        let Some(Ok(Some(l))) = blobs.get(digest).map(|b| b.bucket(b"labels")) else {
            return Vec::new();
        };
        let mut kept = Vec::new();
        let _ = l.each(|k, v| {
            if let Value::Data(d) = v {
                if pick(k) {
                    kept.push((k, d));
                }
            }
            if kept.len() < MAX_LINKS {
                Flow::Continue(())
            } else {
                Flow::Break(())
            }
        });
        kept
    };
    let mut failed = None;
    images.each(|name, value| {
        let Value::Bucket(image) = value else { return Flow::Continue(()) };
        if out.len() >= MAX_RECORDS || configs.len() >= MAX_RECORDS {
            cut = true;
            return Flow::Break(());
        }
        let target = image.bucket(b"target").and_then(|t| t.map(|t| t.get(b"digest")).transpose());
        let target = match target {
            Ok(t) => t.flatten(),
            Err(e) => {
                failed = Some(e);
                return Flow::Break(());
            }
        };
        // A name longer than any reference (it is shown with each finding of its layers)
        // names nothing.
        let Some(target) = target.filter(|_| name.len() <= MAX_NAME) else {
            return Flow::Continue(());
        };
        let name: Arc<str> = Arc::from(lossy(name));
        // The target, and the manifests of an index (one level, as CRI pulls them).
        let mut manifests = vec![target];
        manifests
            .extend(labels(target, &|k| k.starts_with(GC_MANIFEST)).into_iter().map(|kv| kv.1));
        for manifest in manifests {
            for (_, config) in labels(manifest, &|k| k == GC_CONFIG) {
                configs.entry(lossy(config)).or_default().insert(name.clone());
                for (k, chain) in labels(config, &|k| k.starts_with(GC_SNAPSHOT)) {
                    let Some(snapshotter) = k.strip_prefix(GC_SNAPSHOT) else { continue };
                    out.push(ImageTop {
                        namespace: ns.to_owned(),
                        name: name.clone(),
                        snapshotter: lossy(snapshotter),
                        chain: lossy(chain),
                    });
                }
            }
        }
        Flow::Continue(())
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    if cut {
        return Err(crate::bbolt::many("images or content blobs", MAX_RECORDS, MAX_BLOBS));
    }
    Ok(())
}

/// A container record of `meta.db`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Container {
    /// The container id.
    pub id: String,
    /// The containerd namespace (`k8s.io` for CRI).
    pub namespace: String,
    /// Container name (`io.kubernetes.container.name`, or the CRI annotation).
    pub name: Option<String>,
    /// Pod UID, namespace and name, as far as labels or annotations tell.
    pub pod_uid: Option<String>,
    /// Pod namespace.
    pub pod_namespace: Option<String>,
    /// Pod name.
    pub pod_name: Option<String>,
    /// The image reference.
    pub image: Option<String>,
    /// The snapshotter and the snapshot key of its writable layer.
    pub snapshot: Option<(String, String)>,
}

/// Where a byte of `meta.db` belongs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner<'m> {
    /// A value of this container's record.
    Container(&'m Container),
    /// A page no live structure uses: data of something removed.
    Freed,
    /// Any other live data (images, snapshots, leases, namespaces).
    Other,
}

/// The containers of a `meta.db` and the byte ranges of their values.
#[derive(Debug, Default)]
pub struct MetaDb {
    /// Every container record, in (namespace, id) order.
    pub containers: Vec<Container>,
    /// Every image and the top layer it was unpacked to.
    pub images: Vec<ImageTop>,
    /// Every image config blob (`sha256:…`) and the names of the images whose manifests
    /// name it, in any namespace.
    pub configs: BTreeMap<String, BTreeSet<Arc<str>>>,
    /// Byte ranges of container values, sorted, with the index of their container.
    values: Vec<(Range<u64>, usize)>,
    /// Byte ranges of dead pages, sorted.
    dead: Vec<Range<u64>>,
}

impl MetaDb {
    /// Reads the container records of a `meta.db` image. Parts that cannot be read are
    /// returned as errors beside what could.
    pub fn read(data: &[u8]) -> Result<(MetaDb, Vec<Error>), Error> {
        let db = Db::open(data)?;
        let (dead, mut errors) = db.dead_ranges();
        let mut out = MetaDb { dead, ..MetaDb::default() };
        let base = data.as_ptr() as usize;
        let at = |s: &[u8]| {
            let start = (s.as_ptr() as usize - base) as u64;
            start..start + s.len() as u64
        };
        let Some(v1) = db.root().bucket(b"v1")? else { return Ok((out, errors)) };
        // The pages of every container record read so far: each is read once.
        let mut seen = HashSet::new();
        // Values kept in all, and containers: each bucket is walked entry by entry, and
        // past either bound the rest is not read (an error says so).
        let mut room = MAX_VALUES;
        let mut cut = false;
        let mut namespaces = Vec::new();
        if let Err(e) = v1.each(|ns, value| {
            if let Value::Bucket(b) = value {
                namespaces.push((ns, b));
            }
            Flow::Continue(())
        }) {
            errors.push(e);
        }
        for (ns, ns_bucket) in namespaces {
            let ns = lossy(ns);
            if let Err(e) = image_tops(&ns, &ns_bucket, &mut out.images, &mut out.configs) {
                errors.push(e);
            }
            let containers = match ns_bucket.bucket(b"containers") {
                Ok(Some(b)) => b,
                Ok(None) => continue,
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            };
            let walked = containers.each(|id, value| {
                let Value::Bucket(record) = value else { return Flow::Continue(()) };
                if out.containers.len() >= MAX_RECORDS || room == 0 {
                    cut = true;
                    return Flow::Break(());
                }
                let mut values = Vec::new();
                if let Err(e) = flatten(record, Vec::new(), &mut values, 0, &mut seen, &mut room) {
                    errors.push(e);
                }
                let c = container(&ns, &lossy(id), &values);
                let index = out.containers.len();
                out.values.extend(values.iter().map(|(_, v)| (at(v), index)));
                out.containers.push(c);
                Flow::Continue(())
            });
            if let Err(e) = walked {
                errors.push(e);
            }
        }
        if cut || room == 0 {
            errors.push(crate::bbolt::many("container records", MAX_RECORDS, MAX_VALUES));
        }
        out.values.sort_by_key(|(r, _)| r.start);
        Ok((out, errors))
    }

    /// Whose data the bytes at `range` of the file are.
    pub fn owner(&self, range: Range<u64>) -> Owner<'_> {
        let i = self.values.partition_point(|(r, _)| r.start <= range.start);
        if let Some((r, c)) = i.checked_sub(1).map(|i| &self.values[i]) {
            if range.start < r.end {
                return Owner::Container(&self.containers[*c]);
            }
        }
        if self.dead.iter().any(|d| d.start <= range.start && range.start < d.end) {
            return Owner::Freed;
        }
        Owner::Other
    }
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Every plain value under `bucket`, with its key path. Each bucket page is read once
/// (`seen`, shared by every record): in bbolt a page belongs to one bucket, so a page
/// reached again is a crafted or damaged file, and reading it again for every path that
/// leads to it would take time exponential in the nesting.
fn flatten<'a>(
    bucket: Bucket<'a>,
    path: Vec<&'a [u8]>,
    out: &mut Vec<(Vec<&'a [u8]>, &'a [u8])>,
    depth: usize,
    seen: &mut HashSet<u64>,
    room: &mut usize,
) -> Result<(), Error> {
    if let Some(page) = bucket.page() {
        if !seen.insert(page) {
            return Err(crate::bbolt::shared(page));
        }
    }
    let mut failed = None;
    bucket.each(|k, v| {
        if *room == 0 {
            return Flow::Break(());
        }
        let mut p = path.clone();
        p.push(k);
        match v {
            Value::Data(d) => {
                *room -= 1;
                out.push((p, d));
            }
            Value::Bucket(b) if depth < 8 => {
                if let Err(e) = flatten(b, p, out, depth + 1, seen, room) {
                    failed = Some(e);
                    return Flow::Break(());
                }
            }
            Value::Bucket(_) => {}
        }
        Flow::Continue(())
    })?;
    failed.map_or(Ok(()), Err)
}

/// Label and annotation keys (containerd `pkg/cri/annotations`, kubelet `types/labels.go`).
const POD_UID: [&str; 2] = ["io.kubernetes.pod.uid", "io.kubernetes.cri.sandbox-uid"];
const POD_NAMESPACE: [&str; 2] =
    ["io.kubernetes.pod.namespace", "io.kubernetes.cri.sandbox-namespace"];
const POD_NAME: [&str; 2] = ["io.kubernetes.pod.name", "io.kubernetes.cri.sandbox-name"];
const CONTAINER_NAME: [&str; 2] =
    ["io.kubernetes.container.name", "io.kubernetes.cri.container-name"];

/// Every label or annotation key of a container's or pod's name.
fn names() -> impl Iterator<Item = &'static str> {
    [POD_UID, POD_NAMESPACE, POD_NAME, CONTAINER_NAME].into_iter().flatten()
}

/// Builds the record of container `id` from its flattened values: labels first, then
/// the annotations of its spec.
fn container(ns: &str, id: &str, values: &[(Vec<&[u8]>, &[u8])]) -> Container {
    let get = |key: &str| {
        values.iter().find(|(p, _)| p.len() == 1 && p[0] == key.as_bytes()).map(|(_, v)| *v)
    };
    // Only the labels read are copied (a record's other labels may be of any size).
    let wanted = |k: &[u8]| names().any(|n| n.as_bytes() == k);
    let mut known: BTreeMap<String, String> = BTreeMap::new();
    for (p, v) in values {
        if p.len() == 2 && p[0] == b"labels" && wanted(p[1]) {
            known.insert(lossy(p[1]), lossy(v));
        }
    }
    if let Some(spec) = get("spec") {
        for (k, v) in spec_annotations(spec) {
            known.entry(k).or_insert(v);
        }
    }
    Container {
        id: id.to_owned(),
        namespace: ns.to_owned(),
        image: get("image").map(lossy),
        snapshot: get("snapshotter").map(lossy).zip(get("snapshotKey").map(lossy)),
        ..named(&known)
    }
}

/// The container and pod names that kubelet's labels or the CRI plugin's annotations in
/// `known` give; every other field empty.
fn named(known: &BTreeMap<String, String>) -> Container {
    let pick = |keys: [&str; 2]| keys.iter().find_map(|k| known.get(*k).cloned());
    Container {
        name: pick(CONTAINER_NAME),
        pod_uid: pick(POD_UID),
        pod_namespace: pick(POD_NAMESPACE),
        pod_name: pick(POD_NAME),
        ..Container::default()
    }
}

/// The pod and container an OCI spec (JSON, as in a bundle's `config.json`) belongs to,
/// from the CRI plugin's annotations; fields it does not name are `None`.
pub fn spec_owner(json: &[u8]) -> Container {
    named(&json_annotations(json).into_iter().collect())
}

impl Container {
    /// The pod, when its uid is known.
    pub fn pod(&self) -> Option<crate::finding::PodRef> {
        self.pod_uid.as_ref().map(|uid| crate::finding::PodRef {
            uid: uid.clone(),
            namespace: self.pod_namespace.clone(),
            name: self.pod_name.clone(),
            live: None,
        })
    }
}

/// The annotations of a stored spec: a protobuf `Any` (field 1 the type URL, field 2 the
/// OCI spec as JSON). Empty when it is anything else.
fn spec_annotations(any: &[u8]) -> Vec<(String, String)> {
    any_value(any).map(json_annotations).unwrap_or_default()
}

/// The annotations kresidue reads of an OCI spec in JSON (the pod's and container's
/// names), picked as the spec is parsed: nothing else of it (the env, the mounts) is
/// held, whatever its size.
fn json_annotations(json: &[u8]) -> Vec<(String, String)> {
    let keys = names;
    let paths: Vec<[&str; 2]> = keys().map(|k| ["annotations", k]).collect();
    let paths: Vec<&[&str]> = paths.iter().map(|p| &p[..]).collect();
    let Some(picked) = super::json::pick_slice(json, &paths) else { return Vec::new() };
    keys().zip(picked).filter_map(|(k, v)| Some((k.to_owned(), v?))).collect()
}

/// Field 2 of a protobuf message made of length-delimited fields 1 and 2.
fn any_value(mut b: &[u8]) -> Option<&[u8]> {
    while let Some((&tag, rest)) = b.split_first() {
        let (len, rest) = varint(rest)?;
        let len = usize::try_from(len).ok()?;
        let field = rest.get(..len)?;
        if tag == 0x12 {
            return Some(field);
        }
        if tag != 0x0a {
            return None;
        }
        b = &rest[len..];
    }
    None
}

/// A protobuf varint and the bytes after it.
fn varint(b: &[u8]) -> Option<(u64, &[u8])> {
    let mut v = 0u64;
    for (i, &x) in b.iter().enumerate().take(10) {
        v |= u64::from(x & 0x7f) << (7 * i);
        if x & 0x80 == 0 {
            return Some((v, &b[i + 1..]));
        }
    }
    None
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A real containerd 1.6 run's databases (`tests/containerd.rs` writes them with
    /// `KRESIDUE_UPDATE_FIXTURES=1`): a pod sandbox and in it one container, created over
    /// CRI as kubelet creates them (kubelet's pod labels, a generated secret in its env),
    /// from two images imported with `ctr`.
    pub(crate) const META: &[u8] = include_bytes!("../../fixtures/containerd/meta.db");
    pub(crate) const SNAPSHOTS: &[u8] = include_bytes!("../../fixtures/containerd/metadata.db");
    pub(crate) const ID: &str = include_str!("../../fixtures/containerd/container-id");

    #[test]
    fn real_meta_db_containers_and_owners() {
        let (db, errors) = MetaDb::read(META).unwrap();
        assert!(errors.is_empty(), "{errors:?}");
        let c = db.containers.iter().find(|c| c.id == ID).expect("the container's record");
        assert_eq!(c.namespace, "k8s.io");
        assert_eq!(c.pod_uid.as_deref(), Some("5d1c3b7a-0e2f-4a6b-8c9d-1e2f3a4b5c6d"));
        assert_eq!(c.name.as_deref(), Some("app"));
        assert_eq!(c.image.as_deref(), Some("localhost/kresidue-test:1"));
        assert_eq!(c.snapshot, Some(("overlayfs".to_owned(), ID.to_owned())));
        // The env value sits in the container's spec.
        let at = META.windows(10).position(|w| w == b"MY_SECRET=").unwrap() as u64 + 10;
        assert!(matches!(db.owner(at..at + 20), Owner::Container(o) if o.id == ID));
        // The live `v1/version` key is data of no container (older copies of it may sit
        // in freed pages); past the high-water mark is dead.
        let owners: Vec<Owner<'_>> = META
            .windows(7)
            .enumerate()
            .filter(|(_, w)| *w == b"version")
            .map(|(i, _)| db.owner(i as u64..i as u64 + 1))
            .collect();
        assert!(owners.contains(&Owner::Other), "{owners:?}");
        let end = META.len() as u64 - 1;
        assert_eq!(db.owner(end..end + 1), Owner::Freed);
    }

    #[test]
    fn real_snapshot_db_kinds() {
        let (snaps, errors) = read_snapshots(SNAPSHOTS).unwrap();
        assert!(snaps.complete);
        let snaps = snaps.records;
        assert!(errors.is_empty(), "{errors:?}");
        // The sandbox's and the container's writable layers, each on an image layer.
        let active: Vec<&Snapshot> =
            snaps.values().filter(|s| s.kind == SnapshotKind::Active).collect();
        assert_eq!(active.len(), 2, "{snaps:?}");
        let app = active.iter().find(|s| s.key == ID).expect("the container's layer");
        assert_eq!(app.namespace, "k8s.io");
        let parent = app.parent.and_then(|p| snaps.get(&p));
        assert!(
            parent
                .is_some_and(|p| p.kind == SnapshotKind::Committed && p.key.starts_with("sha256:")),
            "{snaps:?}"
        );
    }

    /// The image of the real run, through its manifest's and config's content labels, to
    /// the layer it was unpacked to; that layer carries the image's name.
    #[test]
    fn real_image_layers() {
        let (db, errors) = MetaDb::read(META).unwrap();
        assert!(errors.is_empty(), "{errors:?}");
        let snaps = read_snapshots(SNAPSHOTS).unwrap().0.records;
        let names: BTreeSet<&str> = db.images.iter().map(|t| &*t.name).collect();
        assert!(
            names.is_superset(&["localhost/kresidue-test:1", "localhost/kresidue-pause:1"].into())
        );
        assert!(db.images.iter().all(|t| t.namespace == "k8s.io" && t.snapshotter == "overlayfs"));
        let named = layer_images("overlayfs", &snaps, &db.images);
        // The container's image layer is named after its image (and only images on it).
        let (_, app) = snaps.iter().find(|(_, s)| s.key == ID).unwrap();
        let layer = &named[&app.parent.unwrap()];
        assert!(layer.contains("localhost/kresidue-test:1"), "{layer:?}");
        assert!(!layer.contains("localhost/kresidue-pause:1"), "{layer:?}");
        // Every committed layer is some image's; no writable layer is.
        for (id, s) in &snaps {
            assert_eq!(named.contains_key(id), s.kind == SnapshotKind::Committed, "{s:?}");
        }
        assert!(layer_images("native", &snaps, &db.images).is_empty());
        // Each image's config blob is named, with the image's names.
        let configs: BTreeSet<&str> = db.configs.values().flatten().map(|n| &**n).collect();
        assert!(configs.is_superset(&names), "{:?}", db.configs);
        assert!(db.configs.keys().all(|d| d.starts_with("sha256:") && d.len() == 71));
    }

    /// Truncated and damaged copies of the real databases: errors or partial results,
    /// never a panic.
    #[test]
    fn damaged_real_databases() {
        for data in [META, SNAPSHOTS] {
            for cut in (0..data.len()).step_by(1024) {
                let _ = MetaDb::read(&data[..cut]);
                let _ = read_snapshots(&data[..cut]);
            }
            let mut x = 0x9e37_79b9u32;
            for _ in 0..200 {
                let mut d = data.to_vec();
                for _ in 0..8 {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    let i = x as usize % d.len();
                    d[i] ^= (x >> 24) as u8 | 1;
                }
                let _ = MetaDb::read(&d);
                let _ = read_snapshots(&d);
            }
        }
        let cut = &META[..META.len() / 2];
        let broken = MetaDb::read(cut).map(|(_, e)| e.len()).unwrap_or(1);
        assert!(broken > 0, "half a database is noticed");
    }

    #[test]
    fn any_value_reads_field_two() {
        let mut any = vec![0x0a, 3, b'a', b'b', b'c', 0x12];
        any.push(0x82);
        any.push(0x01); // 130
        any.extend(vec![b'x'; 130]);
        assert_eq!(any_value(&any).map(<[u8]>::len), Some(130));
        assert_eq!(any_value(&any[..20]), None, "truncated");
        assert_eq!(any_value(b"\x1a\x00"), None, "another field");
        assert_eq!(any_value(b""), None);
    }
}
