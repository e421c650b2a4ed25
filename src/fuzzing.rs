//! Entry points for fuzzing every parser of untrusted input, shared by the cargo-fuzz
//! targets in `fuzz/` and by the test that replays their corpora (`tests/fuzz_corpus.rs`),
//! so CI checks every input a fuzzer ever kept without needing a fuzzing toolchain.
//!
//! Each function takes arbitrary bytes, runs one parser over them the way a scan does and
//! uses what comes out, and must return without panicking, whatever the bytes. Where a
//! property is cheap to state it is asserted too (a panic is a finding for the fuzzer).

use crate::bbolt::{Bucket, Db, Value};
use crate::node::{containerd, logs, other_runtimes, MAX_NAME};
use std::io::Read;

/// A fuzz target: arbitrary bytes in, no panic out.
pub type Target = fn(&[u8]);

/// Every target, by name (the `fuzz/fuzz_targets/<name>.rs` file and corpus dir).
pub const TARGETS: &[(&str, Target)] = &[
    ("kubectl_json", kubectl_json),
    ("fingerprint_file", fingerprint_file),
    ("bbolt", bbolt),
    ("containerd_meta", containerd_meta),
    ("oci_spec", oci_spec),
    ("crio_docker_json", crio_docker_json),
    ("cri_log", cri_log),
    ("jwt", jwt),
    ("mountinfo", mountinfo),
    ("cri_responses", cri_responses),
    ("kubectl_pods", kubectl_pods),
    ("distro_settings", distro_settings),
    ("sqlite", sqlite),
    ("dqlite", dqlite),
    ("qcow2", qcow2),
    ("partitions", partitions),
    ("layer", layer),
    ("image_archive", image_archive),
    ("disk_image", disk_image),
    ("rootfs", rootfs),
    ("compressed_rootfs", compressed_rootfs),
    ("scan_state", scan_state),
];

/// A scan state file (`--state`, a file on the node another process could have damaged):
/// decoded, and when it decodes, every record looked up and written back the same.
pub fn scan_state(data: &[u8]) {
    if let Ok(state) = crate::scan::state::State::decode(data) {
        let again =
            crate::scan::state::State::encode(&state.digest, state.started_ns, state.records());
        assert_eq!(again, data, "a state decoded writes back as it was");
    }
}

/// A compressed root filesystem tarball (gzip or zstd, as sniffed): inflated once to
/// index it (at most 64 MiB), then its tree walked, its files read from checkpoints.
pub fn compressed_rootfs(data: &[u8]) {
    use crate::tarball::{compression, seekable::Seekable, Compression};
    let c = compression(data);
    if c == Compression::None {
        return;
    }
    let Ok(s) = Seekable::new(std::sync::Arc::new(data.to_vec()), c) else { return };
    let Ok(t) = crate::rootfs::TarTree::index(s.clone(), s.indexer(None).take(64 << 20)) else {
        return;
    };
    crate::sys::image::read_all(&t, std::path::Path::new(""), &mut 2000);
}

/// A root filesystem tarball: indexed, and its tree walked (at most 2,000 entries), every
/// file's first 64 KiB read.
pub fn rootfs(data: &[u8]) {
    let bytes = std::sync::Arc::new(data.to_vec());
    let Ok(t) = crate::rootfs::TarTree::index(bytes, data) else { return };
    crate::sys::image::read_all(&t, std::path::Path::new(""), &mut 2000);
}

/// A disk image (raw or qcow2): its partitions' filesystems found, and each ext4 tree
/// walked (at most 2,000 entries), every file's first 64 KiB read.
pub fn disk_image(data: &[u8]) {
    let Ok(disk) = crate::disk::Disk::new(std::sync::Arc::new(data.to_vec())) else { return };
    let (vols, _) = crate::disk::volumes(&disk);
    for v in vols {
        if let Ok(t) = v.tree {
            crate::sys::image::read_all(&*t, std::path::Path::new(""), &mut 2000);
        }
    }
}

/// An image layer (or any tar stream): inflated (gzip, zstd) as sniffed, its members read
/// through, at most 64 MiB inflated; every member's data is as long as its header says.
pub fn layer(data: &[u8]) {
    let Ok((_, r)) = crate::tarball::inflated(std::io::Cursor::new(data.to_vec())) else { return };
    let mut tar = crate::tarball::Reader::new(r.take(64 << 20));
    while let Ok(Some(m)) = tar.next_member() {
        let _ = crate::tarball::clean_path(&m.path);
        let mut n = 0u64;
        let mut buf = [0u8; 8192];
        let mut d = tar.data();
        loop {
            match d.read(&mut buf) {
                Ok(0) => {
                    assert_eq!(n, m.size);
                    break;
                }
                Ok(k) => n += k as u64,
                Err(_) => break,
            }
        }
    }
}

/// An image archive as a tar: indexed, its catalog read (`docker save`'s
/// `manifest.json` or an OCI layout's `index.json` and manifests); every image's blobs
/// are in the catalog.
pub fn image_archive(data: &[u8]) {
    // Indexed as `scan --image` indexes a tar.
    let bytes = std::sync::Arc::new(data.to_vec());
    let Ok(tree) = crate::rootfs::TarTree::index(bytes.clone(), data) else { return };
    let store = crate::oci::Store::Tar { bytes, members: tree.files() };
    let Ok(cat) = crate::oci::catalog(&store) else { return };
    for img in &cat.images {
        assert!(img.config < cat.blobs.len());
        assert!(img.layers.iter().all(|&l| l < cat.blobs.len()));
    }
}

/// A disk's partition table (GPT or MBR): every partition read lies inside the disk.
pub fn partitions(data: &[u8]) {
    let (parts, _) = crate::partitions::read(&data);
    for p in parts {
        assert!(p.start.saturating_add(p.len) <= data.len() as u64);
    }
}

/// A qcow2 disk image: opened, and its virtual disk read (its first 16 MiB) in pieces that
/// cross clusters; a read fails or fills what it was asked.
pub fn qcow2(data: &[u8]) {
    use crate::sys::Bytes;
    let Ok(q) = crate::qcow2::Qcow2::open(&data) else { return };
    let mut buf = vec![0u8; 70_001];
    let mut at = 0;
    while at < q.size().min(16 << 20) {
        let n = (q.size() - at).min(buf.len() as u64) as usize;
        let _ = q.read_at(at, &mut buf[..n]);
        at += n as u64;
    }
}

/// dqlite's files (MicroK8s's datastore): read as a raft segment, every frames command's
/// pages where they say they are, and its transactions' rows read; as a snapshot, every database inside it; and inflated
/// as an LZ4 frame, at most 1 MiB, then read as a snapshot.
pub fn dqlite(data: &[u8]) {
    use crate::dqlite::{entries, frames, inflate, snapshot, Flow};
    let mut txns = Vec::new();
    let mut page_size = None;
    let _ = entries(&data, |e| {
        assert!(e.data.start <= e.data.end && e.data.end <= data.len() as u64);
        if let Ok(Some(f)) = frames(&data, e) {
            for &(_, at) in &f.pages {
                assert!(at + f.page_size as u64 <= e.data.end);
            }
            if *page_size.get_or_insert(f.page_size) == f.page_size {
                txns.push(f.pages);
            }
        }
        Flow::Continue(())
    });
    // The transactions' pages read as a database of page images, as a scan reads them.
    if let Some(page_size) = page_size {
        let db = crate::sqlite::Db::of_images(&data, page_size, &txns, &|| false);
        db.image_records(|r| {
            for p in &r.pieces {
                assert!(p.at as usize + p.len <= data.len());
            }
            crate::sqlite::Flow::Continue(())
        });
    }
    let check = |bytes: &[u8]| {
        for db in snapshot(&bytes).unwrap_or_default() {
            assert!(db.main.end <= db.wal.start && db.wal.end <= bytes.len() as u64);
        }
    };
    check(data);
    let (inflated, _) = inflate(&data, 1 << 20);
    assert!(inflated.len() <= 1 << 20);
    check(&inflated);
}

/// A SQLite database and its log (kine's `state.db`, `state.db-wal`): the first four
/// bytes (little-endian) are the length of the database, the rest after it the log. Every
/// record of every table and of every image the database no longer uses is read, each
/// piece where it says it is and no record larger than the reader's cap.
pub fn sqlite(data: &[u8]) {
    use crate::sqlite::{columns, Bytes, Db, Flow, Which, MAX_RECORD};
    let split = data.get(..4).map_or(0, |b| {
        usize::try_from(u32::from_le_bytes(b.try_into().unwrap_or_default())).unwrap_or(0)
    });
    let rest = data.get(4..).unwrap_or_default();
    let (main, wal) = rest.split_at(split.min(rest.len()));
    let log = (!wal.is_empty()).then_some(&wal as &dyn Bytes);
    let Ok(db) = Db::open(&main, log) else { return };
    let tables: Vec<u32> = db.tables().unwrap_or_default().iter().map(|t| t.root).collect();
    let _ = db.freelist();
    db.records(&tables, |r| {
        assert!(r.payload.len() <= MAX_RECORD);
        for p in &r.pieces {
            let size = if p.which == Which::Main { main.len() } else { wal.len() };
            assert!(p.at as usize + p.len <= size);
        }
        let _ = columns(&r.payload);
        Flow::Continue(())
    });
    let _ = db.errors();
}

/// A distribution's settings file (k3s's `config.yaml`, a k0s systemd unit, a MicroK8s
/// args file): the values that move its places read out of it, each a path of bounded
/// length with no variable left unexpanded.
pub fn distro_settings(data: &[u8]) {
    use crate::node::distro::{flag_value, yaml_scalar};
    for key in ["data-dir", "d"] {
        if let Some(v) = yaml_scalar(data, key) {
            assert!(!v.is_empty() && v.len() <= 4096);
        }
    }
    let vars = [("SNAP_COMMON", "/var/snap/microk8s/common"), ("SNAP_DATA", "/x")];
    for flag in ["--data-dir", "--root", "--root-dir", "--state"] {
        if let Some(v) = flag_value(data, flag, &vars) {
            assert!(!v.is_empty() && v.len() <= 4096);
            assert!(!v.contains("${"), "a variable left: {v}");
        }
    }
}

/// `kubectl get secrets -o json` output.
pub fn kubectl_json(data: &[u8]) {
    if let Ok(parsed) = crate::kubectl::parse(data) {
        for v in &parsed.values {
            let _ = v.secret_ref();
        }
    }
}

/// `kubectl get pods -A -o json` output (`clean --pods`), and a plan file
/// (`clean --apply --plan`): parsed, and what comes out used as `clean` uses it.
pub fn kubectl_pods(data: &[u8]) {
    if let Ok(list) = crate::kubectl::parse_pods(data) {
        for p in &list.pods {
            let _ = (p.pod_ref(), p.is(&p.uid));
            assert!(p.name == "<invalid>" || !p.name.bytes().any(|b| b.is_ascii_control()));
        }
    }
    if let Ok(plan) = crate::clean::PlanFile::parse(data) {
        let _ = plan.mismatch(std::path::Path::new("/"), std::path::Path::new("/var/lib/kubelet"));
    }
}

/// A fingerprint file: parsed, compiled, and searched over its own bytes. What the fast
/// reader (the writer's layout only) accepts, the general reader reads to the same set.
pub fn fingerprint_file(data: &[u8]) {
    // Read a step at a time as a scan does, and in steps shorter than a value.
    let mut general = Err(anyhow::anyhow!("not read"));
    for step in [256 << 10, 61] {
        let (fast, read) = crate::fingerprint::FingerprintSet::both_readers(data, step);
        if let Some(fast) = fast {
            assert_eq!(Some(&fast), read.as_ref().ok(), "the two readers disagree");
        }
        general = read;
    }
    if let Ok(set) = general {
        let m = crate::matcher::Matcher::new(vec![set]);
        let hits = crate::matcher::find_all(&m, data);
        for h in &hits {
            let (_, form) = m.describe(h);
            assert_eq!(form.len, h.len);
        }
    }
}

/// Any bbolt file: opened, every bucket walked (depth-bounded), freed pages listed; read
/// as Podman's state database; and page by page as etcd's database, its Secrets counted.
pub fn bbolt(data: &[u8]) {
    // Podman's state database, read as the scan reads it.
    let _ = other_runtimes::libpod_containers(&mut &data[..]);
    // etcd's, as the scan reads it.
    if let Some(db) = crate::sites::etcd::Database::read(&data, &|| false) {
        let _ = db.secrets_at_rest();
    }
    let Ok(db) = Db::open(data) else { return };
    let _ = db.meta();
    walk(db.root(), 0);
    for r in db.dead_ranges().0 {
        assert!(r.start <= r.end);
    }
}

fn walk(b: Bucket<'_>, depth: usize) {
    if depth > 16 {
        return;
    }
    let Ok(entries) = b.entries() else { return };
    for (key, value) in entries.into_iter().take(1000) {
        let _ = b.get(key);
        if let Value::Bucket(inner) = value {
            walk(inner, depth + 1);
        }
    }
}

/// containerd's `meta.db` and a snapshotter's `metadata.db`, read as the scan reads them.
pub fn containerd_meta(data: &[u8]) {
    if let Ok((db, _)) = containerd::MetaDb::read(data) {
        let len = data.len() as u64;
        for start in [0, len / 3, len / 2, len.saturating_sub(1)] {
            let _ = db.owner(start..start + 1);
        }
    }
    let _ = containerd::read_snapshots(data);
}

/// An OCI runtime spec (`config.json` of a task bundle).
pub fn oci_spec(data: &[u8]) {
    let _ = containerd::spec_owner(data).pod();
}

/// containers/storage's records (`containers.json`, `layers.json`, `images.json`) and
/// Docker's `config.v2.json`, parsed as they are read. What is picked is what indexing the
/// whole document as a `serde_json::Value` gives.
pub fn crio_docker_json(data: &[u8]) {
    let owners = other_runtimes::storage_containers(&mut &data[..]);
    let parents = other_runtimes::storage_layer_parents(&mut &data[..]);
    let chain = other_runtimes::docker_chain_ids(&mut &data[..]);
    let record = other_runtimes::docker_container(&mut &data[..]);
    // The runtimes' own configuration (Docker's daemon.json, containers/storage's and
    // CRI-O's TOML): any bytes give a root, none, or "not that format", never a panic.
    let _ = other_runtimes::docker_data_root(&mut &data[..]);
    let _ = other_runtimes::storage_graphroot(&mut &data[..]);
    let _ = other_runtimes::crio_root(&mut &data[..]);
    let _ = other_runtimes::containerd_dirs(&mut &data[..]);
    // Image names: Docker's `repositories.json`, containers/storage's `images.json`.
    let docker = other_runtimes::docker_image_names(&mut &data[..]);
    let storage = other_runtimes::storage_images(&mut &data[..]);
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) {
        assert_eq!(docker.is_some(), v.is_object(), "a repositories.json object");
        assert_eq!(storage.is_some(), v.is_array(), "an images.json list");
        // Each name indexing the document gives is kept (the parser keeps duplicate
        // keys' earlier values too, and bounds the counts far above this input's).
        let repos = v["Repositories"].as_object().into_iter().flat_map(|r| r.values());
        for (name, id) in repos.filter_map(|r| r.as_object()).flatten() {
            let Some(id) = id.as_str().filter(|i| i.len() <= 256 && name.len() <= MAX_NAME) else {
                continue;
            };
            let id = id.strip_prefix("sha256:").unwrap_or(id);
            let (names, cut) = docker.as_ref().expect("an object");
            let kept = names.get(id).is_some_and(|n| n.contains(name.as_str()));
            assert!(kept || *cut, "a Docker image name, or the list said cut");
        }
        let want = v["Config"]["Labels"]["io.kubernetes.pod.uid"].as_str();
        let want = want.filter(|u| u.len() <= 256).map(str::to_owned);
        let uid = record.as_ref().and_then(|r| r.pod_uid.clone());
        assert_eq!(uid, want, "the Docker pod uid");
        if let Some(running) = v["State"]["Running"].as_bool() {
            let said = record.as_ref().and_then(|r| r.running);
            assert_eq!(said, Some(running), "a Docker container's state");
        }

        assert_eq!(owners.is_some(), v.is_array(), "a containers.json list");
        assert_eq!(parents.is_some(), v.is_array(), "a layers.json list");
        // A chain id for each leading `sha256:` diff id (the first one is that digest).
        let diffs = match &v["rootfs"]["diff_ids"] {
            serde_json::Value::Array(a) => a.clone(),
            one @ serde_json::Value::String(_) => vec![one.clone()],
            _ => Vec::new(),
        };
        let chain = chain.expect("JSON gives a chain");
        assert!(chain.len() <= diffs.len().min(256), "a chain id per diff id");
        if let Some(first) = chain.first() {
            let digest = diffs.iter().find_map(|d| d.as_str().filter(|d| d.len() <= 4096));
            assert_eq!(digest.and_then(|d| d.get(7..)), Some(first.as_str()));
        }
        let list = v.as_array().map(Vec::as_slice).unwrap_or_default();
        // Cut past the cap, and said so.
        let cut = owners.as_ref().is_some_and(|o| o.cut);
        assert_eq!(cut, list.len() > other_runtimes::MAX_CONTAINERS, "the cut is said");
        if list.len() <= other_runtimes::MAX_CONTAINERS {
            // Every record with an id (of a runtime's length) is a container, in order (the
            // picker takes a boolean as its text).
            let picked = |v: &serde_json::Value| {
                let text = v.as_bool().map(|b| b.to_string());
                text.or_else(|| v.as_str().filter(|s| s.len() <= 256).map(str::to_owned))
            };
            let records: Vec<_> = list.iter().filter(|r| picked(&r["id"]).is_some()).collect();
            let got: Vec<_> = owners
                .iter()
                .flat_map(|o| &o.items)
                .map(|c| (c.id.clone(), c.layer.clone()))
                .collect();
            let want: Vec<_> =
                records.iter().map(|r| (picked(&r["id"]).unwrap(), picked(&r["layer"]))).collect();
            assert_eq!(got, want, "the containers.json records");
            // Each image record with a string id and top layer gives its top layer.
            let text = |v: &serde_json::Value| v.as_str().is_some_and(|s| s.len() <= 256);
            let tops = storage.as_ref().map(|s| s.tops.len()).unwrap_or_default();
            let want = list.iter().filter(|r| text(&r["id"]) && text(&r["layer"])).count();
            assert_eq!(tops, want, "the images.json top layers");
        }
    }
}

/// A pod log in the CRI format, plain and (when the bytes are gzip) inflated, as a scan
/// reads `*.log*`: every content offset maps to a file offset inside the file.
pub fn cri_log(data: &[u8]) {
    check_log(data);
    let mut inflated = Vec::new();
    let _ = flate2::read::MultiGzDecoder::new(data).take(1 << 20).read_to_end(&mut inflated);
    check_log(&inflated);
}

fn check_log(log: &[u8]) {
    let c = logs::Content::of(log);
    assert!(c.bytes.len() <= log.len());
    for at in [0, c.bytes.len() as u64 / 2, c.bytes.len().saturating_sub(1) as u64] {
        if (at as usize) < c.bytes.len() {
            assert!(c.file_offset(at) < log.len() as u64);
        }
    }
}

/// A JWT (the decoder of service-account tokens, never verifying).
pub fn jwt(data: &[u8]) {
    if let Some(insight) = crate::rules::jwt::decode(data, 1_800_000_000) {
        let _ = insight.severity();
    }
}

/// `/proc/self/mountinfo` text.
pub fn mountinfo(data: &[u8]) {
    for m in crate::sys::mount::parse(data) {
        let _ = m.describe();
        let _ = m.is_whole_tmpfs();
    }
}

/// CRI answers off the wire: `ListPodSandbox` and `ListContainers` responses (the first
/// byte says where the one ends and the other begins), decoded with prost and turned into
/// what the cross-check uses.
pub fn cri_responses(data: &[u8]) {
    use crate::cri::proto;
    use prost::Message;
    let Some((&cut, rest)) = data.split_first() else { return };
    let (a, b) = rest.split_at((cut as usize).min(rest.len()));
    let sandboxes = proto::ListPodSandboxResponse::decode(a).map(|r| r.items).unwrap_or_default();
    let containers =
        proto::ListContainersResponse::decode(b).map(|r| r.containers).unwrap_or_default();
    let live = crate::cri::Live::from_lists(sandboxes, containers);
    for uid in live.pods.keys() {
        assert!(live.pod_live(uid));
    }
    for (id, c) in &live.containers {
        let _ = live.container_live(id);
        let _ = live.container_live_in(&c.sandbox, &c.name);
    }
    let _ = proto::ContainerStatusResponse::decode(rest);
}
