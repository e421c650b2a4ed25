//! containerd's metadata database (`<containerd root>/io.containerd.metadata.v1.bolt/meta.db`):
//! which bytes of the file belong to which container.
//!
//! The file is searched like any other, as a whole; this module then says, per byte
//! offset, whose data a match is in. Facts from NODE-LAYOUT.md and containerd
//! (`metadata/buckets.go`, `containers.go`, `boltutil/helpers.go`, `pkg/cri/server/
//! helpers.go`): `v1/<namespace>/containers/<id>/` holds `spec` (a protobuf `Any` wrapping
//! the OCI spec as JSON, with every env var), `extensions/<name>` (the CRI plugin's
//! metadata, a second copy of the env), `labels/<k>` (`io.kubernetes.pod.uid`, …),
//! `image`, `snapshotter`, `snapshotKey`. Every value is one contiguous run of bytes in
//! the file, so a match is attributed by its offset. Bytes in pages no live structure
//! reaches (see [`crate::bbolt::Db::dead_ranges`]) are data of removed containers that
//! bbolt has not overwritten yet.

use crate::bbolt::{Bucket, Db, Error, Value};
use std::collections::BTreeMap;
use std::ops::Range;

/// The default containerd root (`root` in `config.toml`).
pub const DEFAULT_ROOT: &str = "/var/lib/containerd";
/// The metadata database, relative to the containerd root.
pub const META_DB: &str = "io.containerd.metadata.v1.bolt/meta.db";
/// The default containerd state dir (`state` in `config.toml`, a tmpfs).
pub const DEFAULT_STATE: &str = "/run/containerd";
/// The runtime v2 task bundles, relative to the state dir: `<namespace>/<id>/config.json`
/// (`runtime/v2/bundle.go`; a crashed delete leaves `<namespace>/.<id>`).
pub const TASKS: &str = "io.containerd.runtime.v2.task";

/// The overlayfs snapshotter's dir, relative to the containerd root: `metadata.db` and
/// `snapshots/<id>/fs` (`snapshots/overlay/overlay.go`).
pub const OVERLAY: &str = "io.containerd.snapshotter.v1.overlayfs";

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
    /// The client's key (the last part of the backend key `<ns>/<seq>/<key>`): a
    /// container's snapshot key, or an image layer's chain id.
    pub key: String,
    /// What it is.
    pub kind: SnapshotKind,
}

/// The snapshots of a snapshotter's `metadata.db`, by id (the dir name under
/// `snapshots/`): `v1/snapshots/<backend key>/{id (uvarint), kind (a byte)}`
/// (`snapshots/storage/bolt.go`).
pub fn read_snapshots(data: &[u8]) -> Result<(BTreeMap<u64, Snapshot>, Vec<Error>), Error> {
    let db = Db::open(data)?;
    let mut out = BTreeMap::new();
    let mut errors = Vec::new();
    let Some(v1) = db.root().bucket(b"v1")? else { return Ok((out, errors)) };
    let Some(snapshots) = v1.bucket(b"snapshots")? else { return Ok((out, errors)) };
    for (key, value) in snapshots.entries()? {
        let Value::Bucket(b) = value else { continue };
        let fields = match (b.get(b"id"), b.get(b"kind")) {
            (Ok(id), Ok(kind)) => (id.and_then(|v| varint(v)).map(|(id, _)| id), kind),
            (Err(e), _) | (_, Err(e)) => {
                errors.push(e);
                continue;
            }
        };
        let (Some(id), kind) = fields else { continue };
        let kind = match kind.and_then(|k| k.first()) {
            Some(1) => SnapshotKind::View,
            Some(2) => SnapshotKind::Active,
            Some(3) => SnapshotKind::Committed,
            _ => SnapshotKind::Unknown,
        };
        let key = lossy(key);
        let key = key.splitn(3, '/').nth(2).unwrap_or(&key).to_owned();
        out.insert(id, Snapshot { key, kind });
    }
    Ok((out, errors))
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
        for (ns, value) in v1.entries()? {
            let Value::Bucket(ns_bucket) = value else { continue };
            let containers = match ns_bucket.bucket(b"containers") {
                Ok(Some(b)) => b,
                Ok(None) => continue,
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            };
            let entries = match containers.entries() {
                Ok(e) => e,
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            };
            for (id, value) in entries {
                let Value::Bucket(record) = value else { continue };
                let mut values = Vec::new();
                if let Err(e) = flatten(record, Vec::new(), &mut values, 0) {
                    errors.push(e);
                }
                let c = container(&lossy(ns), &lossy(id), &values);
                let index = out.containers.len();
                out.values.extend(values.iter().map(|(_, v)| (at(v), index)));
                out.containers.push(c);
            }
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

/// Every plain value under `bucket`, with its key path.
fn flatten<'a>(
    bucket: Bucket<'a>,
    path: Vec<&'a [u8]>,
    out: &mut Vec<(Vec<&'a [u8]>, &'a [u8])>,
    depth: usize,
) -> Result<(), Error> {
    for (k, v) in bucket.entries()? {
        let mut p = path.clone();
        p.push(k);
        match v {
            Value::Data(d) => out.push((p, d)),
            Value::Bucket(b) if depth < 8 => flatten(b, p, out, depth + 1)?,
            Value::Bucket(_) => {}
        }
    }
    Ok(())
}

/// Label and annotation keys (containerd `pkg/cri/annotations`, kubelet `types/labels.go`).
const POD_UID: [&str; 2] = ["io.kubernetes.pod.uid", "io.kubernetes.cri.sandbox-uid"];
const POD_NAMESPACE: [&str; 2] =
    ["io.kubernetes.pod.namespace", "io.kubernetes.cri.sandbox-namespace"];
const POD_NAME: [&str; 2] = ["io.kubernetes.pod.name", "io.kubernetes.cri.sandbox-name"];
const CONTAINER_NAME: [&str; 2] =
    ["io.kubernetes.container.name", "io.kubernetes.cri.container-name"];

/// Builds the record of container `id` from its flattened values: labels first, then
/// the annotations of its spec.
fn container(ns: &str, id: &str, values: &[(Vec<&[u8]>, &[u8])]) -> Container {
    let get = |key: &str| {
        values.iter().find(|(p, _)| p.len() == 1 && p[0] == key.as_bytes()).map(|(_, v)| *v)
    };
    let mut known: BTreeMap<String, String> = BTreeMap::new();
    for (p, v) in values {
        if p.len() == 2 && p[0] == b"labels" {
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

/// The string annotations of an OCI spec in JSON.
fn json_annotations(json: &[u8]) -> Vec<(String, String)> {
    let Ok(spec) = serde_json::from_slice::<serde_json::Value>(json) else { return Vec::new() };
    let Some(map) = spec.get("annotations").and_then(|a| a.as_object()) else {
        return Vec::new();
    };
    map.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect()
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
mod tests {
    use super::*;

    /// A real containerd 1.6 run's databases (`tests/containerd.rs` writes them with
    /// `KRESIDUE_UPDATE_FIXTURES=1`): one container started with `ctr run` and kubelet's
    /// pod labels, a generated secret in its env.
    const META: &[u8] = include_bytes!("../../fixtures/containerd/meta.db");
    const SNAPSHOTS: &[u8] = include_bytes!("../../fixtures/containerd/metadata.db");
    const ID: &str = include_str!("../../fixtures/containerd/container-id");

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
        assert!(errors.is_empty(), "{errors:?}");
        let active: Vec<&Snapshot> =
            snaps.values().filter(|s| s.kind == SnapshotKind::Active).collect();
        assert_eq!(active.len(), 1, "{snaps:?}");
        assert_eq!(active[0].key, ID);
        assert!(snaps
            .values()
            .any(|s| s.kind == SnapshotKind::Committed && s.key.starts_with("sha256:")));
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
