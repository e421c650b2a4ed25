//! Container runtime sites over generated databases: containerd's `meta.db` written with
//! the crate's bbolt writer in the layout containerd uses (`v1/<ns>/containers/<id>/` with
//! `spec`, `extensions/…`, `labels/…`), then scanned by the built binary: matches are
//! attributed to the container and pod whose record holds them, a value left in a freed
//! page is reported as such, a damaged database is an `errors` entry and its matches are
//! still reported.

use std::collections::BTreeMap;

use kresidue::bbolt::write::{leaf, Node, Writer};
use kresidue::rules::examples::render;
use serde_json::{json, Value};

use crate::util::*;

const META_DB: &str = "/var/lib/containerd/io.containerd.metadata.v1.bolt/meta.db";
const SPEC_URL: &str = "types.containerd.io/opencontainers/runtime-spec/1/Spec";
const CRI_META_URL: &str = "github.com/containerd/cri/pkg/store/container/Metadata";
pub(crate) const POD_UID: &str = "8d2f4c6a-1b3e-4f5a-9c7d-2e4f6a8b0c1d";

pub(crate) fn id(n: u8) -> String {
    format!("{:064x}", u64::from(n).wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// A protobuf `Any` (type URL, then value), as containerd stores specs and extensions.
fn any(url: &str, value: &[u8]) -> Vec<u8> {
    let mut out = vec![0x0a];
    varint(url.len(), &mut out);
    out.extend_from_slice(url.as_bytes());
    out.push(0x12);
    varint(value.len(), &mut out);
    out.extend_from_slice(value);
    out
}

fn varint(mut n: usize, out: &mut Vec<u8>) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

pub(crate) fn data(v: impl AsRef<[u8]>) -> Node {
    Node::Data(v.as_ref().to_vec())
}

pub(crate) fn bucket<const N: usize>(entries: [(&str, Node); N]) -> Node {
    Node::Bucket(entries.into_iter().map(|(k, v)| (k.as_bytes().to_vec(), v)).collect())
}

/// The OCI spec containerd's CRI plugin stores: env, and the CRI annotations.
pub(crate) fn spec(env: &[(&str, &str)], annotations: Value) -> Vec<u8> {
    let env: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let spec = json!({
        "ociVersion": "1.0.2-dev",
        "process": {"args": ["sleep", "3600"], "env": env, "cwd": "/"},
        "annotations": annotations,
    });
    any(SPEC_URL, serde_json::to_string(&spec).unwrap().as_bytes())
}

/// A container record (its snapshot key is its id, as CRI makes it). `labels` as kubelet
/// sets them.
pub(crate) fn container(
    id: &str,
    spec: Vec<u8>,
    labels: &[(&str, &str)],
    extension: Option<Vec<u8>>,
) -> Node {
    let labels: BTreeMap<Vec<u8>, Node> =
        labels.iter().map(|(k, v)| (k.as_bytes().to_vec(), data(v))).collect();
    let mut record = BTreeMap::from([
        (b"image".to_vec(), data("localhost/app:1")),
        (b"labels".to_vec(), Node::Bucket(labels)),
        (b"snapshotKey".to_vec(), data(id)),
        (b"snapshotter".to_vec(), data("overlayfs")),
        (b"spec".to_vec(), data(spec)),
    ]);
    if let Some(x) = extension {
        record.insert(
            b"extensions".to_vec(),
            bucket([("io.cri-containerd.container.metadata", data(any(CRI_META_URL, &x)))]),
        );
    }
    Node::Bucket(record)
}

/// A meta.db with: container 1 (kubelet labels; the value in its spec env and in the CRI
/// metadata extension), container 2 (no labels; pod known from its spec's annotations;
/// the same value), and a freed leaf page holding an old spec with `freed_value`.
pub(crate) fn meta_db(value: &str, freed_value: &str) -> Vec<u8> {
    let labelled = container(
        &id(1),
        spec(&[("PATH", "/bin"), ("DB_PASSWORD", value)], json!({})),
        &[
            ("io.kubernetes.pod.uid", POD_UID),
            ("io.kubernetes.pod.namespace", "shop"),
            ("io.kubernetes.pod.name", "web-0"),
            ("io.kubernetes.container.name", "app"),
            ("io.cri-containerd.kind", "container"),
        ],
        Some(
            serde_json::to_vec(&json!({"Version": "v1", "Metadata": {"Config": {"envs": [
                {"key": "DB_PASSWORD", "value": value}]}}}))
            .unwrap(),
        ),
    );
    let annotated = container(
        &id(2),
        spec(
            &[("DB_PASSWORD", value)],
            json!({
                "io.kubernetes.cri.container-type": "container",
                "io.kubernetes.cri.container-name": "worker",
                "io.kubernetes.cri.sandbox-uid": "c0ffee00-0000-4000-8000-000000000002",
                "io.kubernetes.cri.sandbox-name": "batch-1",
                "io.kubernetes.cri.sandbox-namespace": "jobs",
            }),
        ),
        &[],
        None,
    );
    let containers = Node::Bucket(BTreeMap::from([
        (id(1).into_bytes(), labelled),
        (id(2).into_bytes(), annotated),
    ]));
    let root = BTreeMap::from([(
        b"v1".to_vec(),
        bucket([
            (
                "k8s.io",
                bucket([
                    ("containers", containers),
                    ("content", images().1),
                    ("images", images().0),
                    ("leases", bucket([])),
                ]),
            ),
            ("version", data([6])),
        ]),
    )]);
    let old = spec(&[("API_TOKEN", freed_value)], json!({}));
    let stale =
        leaf(&[(0, b"spec".to_vec(), old), (0, b"snapshotter".to_vec(), b"overlayfs".to_vec())]);
    Writer::new(4096, true, 64).finish(&root, &[stale], 4)
}

/// The image records of `meta.db` and the content blobs they lead through, as an unpack
/// leaves them: `localhost/app:1` and its id `sha256:c0…` (CRI names an image both ways)
/// target one manifest, whose config was unpacked with overlayfs to the top of
/// [`chains`]; `native-only:1` targets an index, whose manifest's config was unpacked with
/// the native snapshotter to the base layer.
fn images() -> (Node, Node) {
    let [base, top] = chains();
    let digest = |b: &str| "sha256:".to_owned() + &b.repeat(32);
    let image = |target: &str| bucket([("target", bucket([("digest", data(target))]))]);
    let images = Node::Bucket(BTreeMap::from([
        (b"localhost/app:1".to_vec(), image(&digest("e1"))),
        (digest("c0").into_bytes(), image(&digest("e1"))),
        (b"native-only:1".to_vec(), image(&digest("e2"))),
    ]));
    let blob = |labels: &[(&str, &str)]| {
        let labels = labels.iter().map(|(k, v)| (k.as_bytes().to_vec(), data(v))).collect();
        bucket([("labels", Node::Bucket(labels)), ("size", data([2]))])
    };
    let blobs = BTreeMap::from([
        (
            digest("e1").into_bytes(),
            blob(&[
                ("containerd.io/gc.ref.content.config", &digest("c0")),
                ("containerd.io/gc.ref.content.l.0", &digest("d0")),
            ]),
        ),
        (digest("c0").into_bytes(), blob(&[("containerd.io/gc.ref.snapshot.overlayfs", &top)])),
        (digest("e2").into_bytes(), blob(&[("containerd.io/gc.ref.content.m.0", &digest("e3"))])),
        (
            digest("e3").into_bytes(),
            blob(&[("containerd.io/gc.ref.content.config", &digest("c3"))]),
        ),
        (digest("c3").into_bytes(), blob(&[("containerd.io/gc.ref.snapshot.native", &base)])),
    ]);
    (images, bucket([("blob", Node::Bucket(blobs)), ("ingests", bucket([]))]))
}

fn secrets(value: &str, freed: &str) -> Vec<Secret> {
    vec![
        Secret::opaque("shop", "db", &[("password", value.as_bytes())]),
        Secret::opaque("ops", "api", &[("token", freed.as_bytes())]),
    ]
}

/// A node with a `meta_db` of two generated values at `at`, and the kubectl JSON of
/// their Secrets.
fn planted(at: &str, seed: u64) -> (NodeTree, std::path::PathBuf) {
    let tree = NodeTree::new();
    let value = String::from_utf8(fake_secret(seed)).unwrap();
    let freed = String::from_utf8(fake_secret(seed + 1)).unwrap();
    let secrets = secrets(&value, &freed);
    tree.guard_secrets(&secrets);
    tree.write(at, &meta_db(&value, &freed));
    let file = tree.secrets_file("secrets.json", &secrets);
    (tree, file)
}

/// `n` generated values as Secrets `shop/s<i>` (key `v`), guarded.
fn numbered(tree: &NodeTree, n: u64, seed: u64) -> (Vec<String>, Vec<Secret>) {
    let vals: Vec<String> =
        (0..n).map(|i| String::from_utf8(fake_secret(seed + i)).unwrap()).collect();
    let secrets: Vec<Secret> = vals
        .iter()
        .enumerate()
        .map(|(i, v)| Secret::opaque("shop", &format!("s{i}"), &[("v", v.as_bytes())]))
        .collect();
    tree.guard_secrets(&secrets);
    (vals, secrets)
}

/// A finding's container id and pod uid, `-` where absent.
fn owner(f: &Finding) -> (&str, &str) {
    fn s(v: &Value) -> &str {
        v.as_str().unwrap_or("-")
    }
    (s(&f.raw["container"]["id"]), s(&f.raw["pod"]["uid"]))
}

fn of_secret<'f>(findings: &'f [Finding], secret: &str) -> Vec<&'f Finding> {
    findings.iter().filter(|f| f.secret == secret && f.site == "containerd-metadata").collect()
}

/// Matches in `meta.db` are attributed to the container (and pod) whose record holds
/// them: by kubelet's labels, or by the CRI annotations of the stored spec; the copies in
/// one record are one finding with a count. A value in a freed page is reported as
/// stale, with a note and no owner.
#[test]
fn meta_db_matches_are_attributed() {
    let (tree, file) = planted(META_DB, 4101);
    let out = tree.scan(&["--secrets", path_arg(&file), "--format", "json"]);
    out.assert_code(1);
    let findings = out.findings();

    let mut db = of_secret(&findings, "shop/db");
    db.sort_by_key(|f| f.raw["container"]["name"].as_str().map(str::to_owned));
    let owners: Vec<(&str, u64, &str, &str)> = db
        .iter()
        .map(|f| {
            (
                f.raw["container"]["id"].as_str().unwrap_or("-"),
                f.raw["count"].as_u64().unwrap(),
                f.raw["pod"]["uid"].as_str().unwrap_or("-"),
                f.raw["container"]["name"].as_str().unwrap_or("-"),
            )
        })
        .collect();
    let (one, two) = (id(1), id(2));
    assert_eq!(
        owners,
        vec![
            (one.as_str(), 2, POD_UID, "app"),
            (two.as_str(), 1, "c0ffee00-0000-4000-8000-000000000002", "worker"),
        ],
        "{}",
        out.stdout_str()
    );
    for f in &db {
        assert_eq!(f.category, "env-persisted");
        assert_eq!(f.stale, Some(false));
        assert_eq!(f.path, META_DB);
        assert!(f.raw.get("note").is_none());
    }
    assert_eq!(db[0].raw["pod"]["namespace"], "shop");
    assert_eq!(db[0].raw["pod"]["name"], "web-0");
    assert_eq!(db[1].raw["pod"]["namespace"], "jobs");
    assert_ne!(db[0].id, db[1].id, "one value in two records is two findings");

    let gone = of_secret(&findings, "ops/api");
    assert_eq!(gone.len(), 1, "{}", out.stdout_str());
    assert_eq!(gone[0].stale, Some(true));
    assert!(gone[0].raw["container"].is_null());
    assert!(gone[0].raw["note"].as_str().unwrap().contains("freed page"));
    let report = out.json.as_ref().unwrap();
    assert!(report["errors"].as_array().unwrap().is_empty());
    // The summary counts findings per site; the table shows site, pod and container.
    let here = findings.iter().filter(|f| f.site == "containerd-metadata").count() as u64;
    assert_eq!(report["summary"]["sites"]["containerd-metadata"].as_u64(), Some(here));
    // The table: the pod's line names it, the finding's line its container and the file.
    let table = tree.scan(&["--secrets", path_arg(&file)]);
    let text = table.stdout_str();
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("pod shop/web-0"))
        .unwrap_or_else(|| panic!("{text}"));
    let row =
        lines[at..].iter().find(|l| l.contains("app: meta.db")).unwrap_or_else(|| panic!("{text}"));
    assert!(row.contains("env-persisted"), "{row}");
    assert!(text.contains(&format!("by site: containerd-metadata {here}")), "{text}");
}

/// With rules only, the same attribution: a GitHub token in a container's env is that
/// container's finding.
#[test]
fn meta_db_rule_match_is_attributed() {
    let tree = NodeTree::new();
    let key = String::from_utf8(render("{ghtoken:ghp}", 4103)).unwrap();
    tree.guard(key.as_bytes());
    let freed = String::from_utf8(fake_secret(4104)).unwrap();
    tree.write(META_DB, &meta_db(&key, &freed));
    let out = tree.scan(&["--format", "json"]);
    out.assert_code(1);
    let findings = out.findings();
    let ids: Vec<&str> =
        findings.iter().filter(|f| f.raw["match"]["kind"] == "rule").map(|f| owner(f).0).collect();
    assert!(ids.contains(&id(1).as_str()) && ids.contains(&id(2).as_str()), "{ids:?}");
}

/// A damaged database (both meta pages' checksums broken, or cut short) is an `errors`
/// entry naming the file, and what it holds is still found, unattributed.
#[test]
fn damaged_meta_db_is_an_error_and_still_searched() {
    let value = String::from_utf8(fake_secret(4105)).unwrap();
    let freed = String::from_utf8(fake_secret(4106)).unwrap();
    let good = meta_db(&value, &freed);
    let mut checksums = good.clone();
    checksums[72] ^= 0xff;
    checksums[4096 + 72] ^= 0xff;
    let cut = good[..4096 * 4 + 100].to_vec();
    for (name, bytes) in [("bad checksums", checksums), ("truncated", cut)] {
        let tree = NodeTree::new();
        let secrets = secrets(&value, &freed);
        tree.guard_secrets(&secrets);
        tree.write(META_DB, &bytes);
        let file = tree.secrets_file("secrets.json", &secrets);
        let out = tree.scan(&["--secrets", path_arg(&file), "--format", "json"]);
        let report = out.json.as_ref().unwrap();
        let errors = report["errors"].as_array().unwrap();
        assert!(
            errors.iter().any(|e| e["path"] == META_DB
                && e["error"].as_str().unwrap().contains("containerd metadata")),
            "{name}: {errors:?}"
        );
        let found = of_secret(&out.findings(), "shop/db").len();
        if name == "bad checksums" {
            out.assert_code(1);
            assert_eq!(found, 1, "{name}: every copy, unattributed, is one finding");
        }
    }
}

/// `--containerd-root` moves the database; a missing default root is no error, a missing
/// explicit one is.
#[test]
fn containerd_root_option() {
    let moved = "/data/containerd/io.containerd.metadata.v1.bolt/meta.db";
    let (tree, file) = planted(moved, 4107);
    let plain = tree.scan(&["--secrets", path_arg(&file), "--format", "json"]);
    plain.assert_code(0);
    assert!(plain.json.as_ref().unwrap()["errors"].as_array().unwrap().is_empty());
    let args = ["--secrets", path_arg(&file), "--containerd-root", "/data/containerd"];
    let out = tree.scan(&[&args[..], &["--format", "json"]].concat());
    out.assert_code(1);
    assert!(out.findings().iter().any(|f| f.path == moved && f.site == "containerd-metadata"));
    let missing =
        ["--secrets", path_arg(&file), "--containerd-root", "/nowhere", "--format", "json"];
    let out = tree.scan(&missing);
    let errors = out.json.as_ref().unwrap()["errors"].as_array().unwrap().clone();
    assert!(errors.iter().any(|e| e["path"] == "/nowhere"), "{errors:?}");
}

const TASKS: &str = "/run/containerd/io.containerd.runtime.v2.task/k8s.io";

/// A task bundle's `config.json` (the OCI spec with the env) is site `oci-bundle`,
/// attributed to the container id (the bundle dir; `.<id>` is a bundle a crashed delete
/// left) and to the pod its CRI annotations name; the bundle's `rootfs` (the container's
/// mounted filesystem) is not walked as part of it; `--containerd-state` moves it.
#[test]
fn oci_bundle_config_is_attributed() {
    for state in [None, Some("/var/run/ctrd")] {
        let tree = NodeTree::new();
        let value = String::from_utf8(fake_secret(4201)).unwrap();
        let secrets = [Secret::opaque("shop", "db", &[("password", value.as_bytes())])];
        tree.guard_secrets(&secrets);
        let tasks = match state {
            Some(s) => format!("{s}/io.containerd.runtime.v2.task/k8s.io"),
            None => TASKS.to_owned(),
        };
        let annotations = json!({
            "io.kubernetes.cri.container-name": "app",
            "io.kubernetes.cri.sandbox-uid": POD_UID,
            "io.kubernetes.cri.sandbox-namespace": "shop",
            "io.kubernetes.cri.sandbox-name": "web-0",
        });
        let spec = |env| -> Vec<u8> {
            let s = json!({"ociVersion": "1.0.2", "process": {"env": [env]}, "annotations": annotations});
            serde_json::to_vec(&s).unwrap()
        };
        tree.write(format!("{tasks}/{}/config.json", id(1)), &spec(format!("DB_PASSWORD={value}")));
        tree.write(format!("{tasks}/.{}/config.json", id(2)), &spec(format!("X={value}")));
        tree.write(format!("{tasks}/{}/rootfs/etc/db", id(1)), value.as_bytes());
        tree.write(format!("{tasks}/{}/log.json", id(1)), b"{}");
        let file = tree.secrets_file("secrets.json", &secrets);
        let mut args = vec!["--secrets", path_arg(&file), "--format", "json"];
        if let Some(s) = state {
            args.extend(["--containerd-state", s]);
        }
        let out = tree.scan(&args);
        out.assert_code(1);
        let findings = out.findings();
        let got: Vec<(&str, &str, &str, &str)> = findings
            .iter()
            .map(|f| (f.path.as_str(), f.site.as_str(), owner(f).0, owner(f).1))
            .collect();
        let (p1, p2) =
            (format!("{tasks}/{}/config.json", id(1)), format!("{tasks}/.{}/config.json", id(2)));
        let mut want = [
            (p1.as_str(), "oci-bundle", id(1), POD_UID),
            (p2.as_str(), "oci-bundle", id(2), POD_UID),
        ];
        want.sort();
        let want: Vec<(&str, &str, &str, &str)> =
            want.iter().map(|(p, s, i, u)| (*p, *s, i.as_str(), *u)).collect();
        assert_eq!(got, want, "state {state:?}");
        assert!(findings.iter().all(|f| f.category == "env-persisted"
            && f.raw["container"]["name"] == "app"
            && f.raw["pod"]["namespace"] == "shop"));
    }
}

const OVERLAY: &str = "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs";

/// The overlayfs snapshotter's `metadata.db`: `v1/snapshots/<ns>/<seq>/<key>` with a
/// uvarint `id` (the dir name), a `kind` byte (2 active, 3 committed) and the backend key
/// of its parent (given as an index into `records`).
fn snapshot_db(records: &[(&str, u8, u8, Option<usize>)]) -> Vec<u8> {
    let backend = |seq: usize| format!("k8s.io/{}/{}", seq + 2, records[seq].0);
    let snapshots: BTreeMap<Vec<u8>, Node> = records
        .iter()
        .enumerate()
        .map(|(seq, (_, id, kind, parent))| {
            let mut record =
                BTreeMap::from([(b"id".to_vec(), data([*id])), (b"kind".to_vec(), data([*kind]))]);
            if let Some(p) = parent {
                record.insert(b"parent".to_vec(), data(backend(*p)));
            }
            (backend(seq).into_bytes(), Node::Bucket(record))
        })
        .collect();
    let root = BTreeMap::from([(b"v1".to_vec(), bucket([("snapshots", Node::Bucket(snapshots))]))]);
    Writer::new(4096, true, 64).finish(&root, &[], 0)
}

/// The chain ids of a two-layer image: base, then top.
fn chains() -> [String; 2] {
    ["ab", "cd"].map(|b| "sha256:".to_owned() + &b.repeat(32))
}

/// Snapshot dirs: a value baked into an image layer (committed, shared by two containers'
/// writable layers) is one `image-layer` finding with no container, naming the images
/// whose chains hold the layer (from `meta.db`'s image records and content labels); a
/// value an app wrote into its writable layer is a `container-layer` finding of that
/// container and its pod (from `meta.db`); a dir neither database knows is an orphan,
/// said so in a note.
#[test]
fn snapshot_layers_are_classified_and_attributed() {
    let tree = NodeTree::new();
    let (vals, secrets) = numbered(&tree, 4, 4301);
    tree.write(META_DB, &meta_db("unrelated-value-0123456789", "unrelated-freed-0123456789"));
    let [base, top] = chains();
    let db = snapshot_db(&[
        (&base, 1, 3, None),
        (&top, 2, 3, Some(0)),
        (&id(1), 3, 2, Some(1)),
        (&id(2), 4, 2, Some(1)),
    ]);
    tree.write(format!("{OVERLAY}/metadata.db"), &db);
    tree.write(
        format!("{OVERLAY}/snapshots/1/fs/etc/app.conf"),
        format!("key: {}\n", vals[0]).as_bytes(),
    );
    tree.write(format!("{OVERLAY}/snapshots/2/fs/srv/env"), format!("T={}", vals[3]).as_bytes());
    tree.write(
        format!("{OVERLAY}/snapshots/3/fs/data/out.txt"),
        format!("secret={}\n", vals[1]).as_bytes(),
    );
    tree.mkdir(format!("{OVERLAY}/snapshots/4/fs"));
    tree.write(format!("{OVERLAY}/snapshots/9/fs/tmp/x"), vals[2].as_bytes());
    let file = tree.secrets_file("secrets.json", &secrets);
    let out = tree.scan(&["--secrets", path_arg(&file), "--format", "json"]);
    out.assert_code(1);
    let findings: Vec<Finding> =
        out.findings().into_iter().filter(|f| f.site == "containerd-snapshot").collect();
    let got: Vec<(&str, &str, &str, &str, bool)> = findings
        .iter()
        .map(|f| {
            (
                f.secret.as_str(),
                f.category.as_str(),
                owner(f).0,
                owner(f).1,
                f.raw["note"].as_str().is_some_and(|n| n.contains("orphan")),
            )
        })
        .collect();
    let one = id(1);
    assert_eq!(
        got,
        vec![
            ("shop/s0", "image-layer", "-", "-", false),
            ("shop/s3", "image-layer", "-", "-", false),
            ("shop/s1", "container-layer", one.as_str(), POD_UID, false),
            ("shop/s2", "container-layer", "-", "-", true),
        ],
        "{}",
        out.stdout_str()
    );
    assert_eq!(findings[0].path, format!("{OVERLAY}/snapshots/1/fs/etc/app.conf"));
    let names = json!(["localhost/app:1", "sha256:".to_owned() + &"c0".repeat(32)]);
    for f in &findings[..2] {
        assert_eq!(f.raw["images"], names, "{}", out.stdout_str());
    }
    assert!(findings[2..].iter().all(|f| f.raw.get("images").is_none()));
    // The table groups the layer's findings under the image's line.
    let table = tree.scan(&["--secrets", path_arg(&file)]);
    let text = table.stdout_str();
    let lines: Vec<&str> = text.lines().collect();
    let at = lines.iter().position(|l| l.starts_with("image localhost/app:1 (+1 more)"));
    let at = at.unwrap_or_else(|| panic!("no line of the image:\n{text}"));
    assert!(lines[at..].iter().any(|l| l.contains("1/fs/etc/app.conf")), "{text}");
}

/// The native snapshotter keeps a snapshot's files in `snapshots/<id>` itself: its layers
/// are found and classified as overlayfs ones are, with the native snapshotter's records.
#[test]
fn native_snapshotter_layers() {
    const NATIVE: &str = "/var/lib/containerd/io.containerd.snapshotter.v1.native";
    let tree = NodeTree::new();
    let (vals, secrets) = numbered(&tree, 2, 4311);
    tree.write(META_DB, &meta_db("unrelated-value-0123456789", "unrelated-freed-0123456789"));
    let [base, _] = chains();
    tree.write(format!("{NATIVE}/metadata.db"), &snapshot_db(&[(&base, 7, 3, None)]));
    tree.write(format!("{NATIVE}/snapshots/7/etc/key"), vals[0].as_bytes());
    tree.write(format!("{NATIVE}/snapshots/8/root/.history"), vals[1].as_bytes());
    let file = tree.secrets_file("secrets.json", &secrets);
    let out = tree.scan(&["--secrets", path_arg(&file), "--format", "json"]);
    out.assert_code(1);
    let got: Vec<(String, String, String, Value)> = out
        .findings()
        .into_iter()
        .filter(|f| f.site == "containerd-snapshot")
        .map(|f| (f.path.clone(), f.category.clone(), f.secret.clone(), f.raw["images"].clone()))
        .collect();
    let want = |path: &str, category: &str, secret: &str, images: Value| {
        (format!("{NATIVE}/snapshots/{path}"), category.to_owned(), secret.to_owned(), images)
    };
    assert_eq!(
        got,
        vec![
            want("7/etc/key", "image-layer", "shop/s0", json!(["native-only:1"])),
            want("8/root/.history", "container-layer", "shop/s1", Value::Null),
        ],
        "{}",
        out.stdout_str()
    );
}

/// An etcd bbolt db: bucket `key`, revision keys, `mvccpb.KeyValue` values (field 1 the
/// key, field 5 the value); a Secret stored plaintext (`k8s\0` + protobuf) or encrypted
/// (`k8s:enc:aescbc:v1:<key>:` + ciphertext).
fn etcd_db(plain: (&str, &[u8]), encrypted: &str) -> Vec<u8> {
    let kv = |key: &str, value: &[u8]| {
        let mut out = vec![0x0a];
        varint(key.len(), &mut out);
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(&[0x10, 0x05, 0x18, 0x05, 0x20, 0x01, 0x2a]);
        varint(value.len(), &mut out);
        out.extend_from_slice(value);
        out
    };
    let mut secret = b"k8s\0\n\x0c\n\x02v1\x12\x06Secret\x12".to_vec();
    secret.extend_from_slice(plain.1);
    let cipher: Vec<u8> = filler(4402, 200);
    let enc = [b"k8s:enc:aescbc:v1:key1:".as_slice(), &cipher[..]].concat();
    let rev = |n: u64| [n.to_be_bytes().as_slice(), b"_", &0u64.to_be_bytes()].concat();
    let keys = BTreeMap::from([
        (rev(5), Node::Data(kv(&format!("/registry/secrets/{}", plain.0), &secret))),
        (rev(6), Node::Data(kv(&format!("/registry/secrets/{encrypted}"), &enc))),
    ]);
    let root = BTreeMap::from([
        (b"key".to_vec(), Node::Bucket(keys)),
        (b"meta".to_vec(), bucket([("consistent_index", data([0, 0, 0, 0, 0, 0, 0, 9]))])),
    ]);
    Writer::new(4096, false, 64).finish(&root, &[], 0)
}

/// A Secret stored in plaintext in etcd's db (the default `/var/lib/etcd/member/snap/db`,
/// or a snapshot backup given with `--etcd`, with etcdctl's trailing checksum) is an
/// `etcd-plaintext` finding, critical; a Secret stored as `k8s:enc:` ciphertext is not.
#[test]
fn etcd_plaintext_is_found_and_ciphertext_is_not() {
    let tree = NodeTree::new();
    let plain = fake_secret(4401);
    let hidden = fake_secret(4403);
    let secrets = [
        Secret::opaque("shop", "db", &[("password", plain.as_slice())]),
        Secret::opaque("shop", "api", &[("token", hidden.as_slice())]),
    ];
    tree.guard_secrets(&secrets);
    let db = etcd_db(("shop/db", &plain), "shop/api");
    tree.write("/var/lib/etcd/member/snap/db", &db);
    let backup = [db.as_slice(), &[0x5a; 32]].concat();
    tree.write("/backup/etcd-2026-11-30.db", &backup);
    let file = tree.secrets_file("secrets.json", &secrets);
    for (args, path) in [
        (vec![], "/var/lib/etcd/member/snap/db"),
        (vec!["--etcd", "/backup/etcd-2026-11-30.db"], "/backup/etcd-2026-11-30.db"),
    ] {
        let out =
            tree.scan(&[&["--secrets", path_arg(&file), "--format", "json"], &args[..]].concat());
        out.assert_code(1);
        let (lines, matches): (Vec<_>, Vec<_>) =
            out.findings().into_iter().partition(|f| f.raw["match"]["kind"] == "datastore");
        let found: Vec<(String, String, String, String)> =
            matches.into_iter().map(|f| (f.path, f.site, f.category, f.secret)).collect();
        let want =
            (path.to_owned(), "etcd".to_owned(), "etcd-plaintext".to_owned(), "shop/db".to_owned());
        assert_eq!(found, vec![want], "{args:?}");
        // And the database says what its Secrets are at rest: one of each.
        let counts: Vec<_> = lines.iter().map(|f| f.raw["secrets_at_rest"].clone()).collect();
        assert_eq!(counts.len(), 1, "{args:?}");
        assert_eq!((&counts[0]["plaintext"], &counts[0]["encrypted"]), (&1.into(), &1.into()));
        assert!(out.findings().iter().all(|f| f.severity == "critical"));
    }
}

const LOGS: &str = "/var/log/pods/shop_web-0_8d2f4c6a-1b3e-4f5a-9c7d-2e4f6a8b0c1d/app";

/// A CRI log line at `second`.
fn cri_line(second: u32, tag: &str, content: &str) -> String {
    format!("2026-11-30T10:00:{second:02}.000000001Z stdout {tag} {content}\n")
}

/// Pod logs: a value the runtime split over a partial (`P`) and a full (`F`) line is
/// found once the contents are joined, at the file offset of its first byte; rotated
/// logs, plain and gzip-compressed (or only named `.gz`), are searched; findings name the pod and container
/// from the log's path.
#[test]
fn pod_logs_partial_lines_and_rotations() {
    let tree = NodeTree::new();
    let (value, secrets) = db_password(&tree, 4501);
    let (head, tail) = value.split_at(value.len() / 2);
    let split = [
        cri_line(1, "F", "starting"),
        cri_line(2, "P", &format!("connecting with password={head}")),
        cri_line(2, "F", &format!("{tail} to db:5432")),
    ]
    .concat();
    let whole = [cri_line(3, "F", "ready"), cri_line(4, "F", &format!("token {value}"))].concat();
    tree.write(format!("{LOGS}/0.log"), split.as_bytes());
    tree.write(format!("{LOGS}/0.log.20261130-100000"), whole.as_bytes());
    tree.write(format!("{LOGS}/0.log.20261129-100000.gz"), &gzip(whole.as_bytes()));
    // Named .gz but not compressed: searched as it is.
    tree.write(format!("{LOGS}/0.log.20261128-100000.gz"), whole.as_bytes());
    let file = tree.secrets_file("secrets.json", &secrets);
    let out = tree.scan(&["--secrets", path_arg(&file), "--format", "json"]);
    out.assert_code(1);
    let findings = out.findings();
    let got: Vec<(String, u64)> = findings.iter().map(|f| (f.path.clone(), f.offset)).collect();
    let at = |text: &str| text.find(head).unwrap() as u64;
    let (head_at, whole_at) = (at(&split), at(&whole));
    assert_eq!(
        got,
        vec![
            (format!("{LOGS}/0.log"), head_at),
            (format!("{LOGS}/0.log.20261128-100000.gz"), whole_at),
            (format!("{LOGS}/0.log.20261129-100000.gz"), whole_at),
            (format!("{LOGS}/0.log.20261130-100000"), whole_at),
        ],
        "{}",
        out.stdout_str()
    );
    for f in &findings {
        assert_eq!((f.site.as_str(), f.category.as_str()), ("pod-log", "pod-log"));
        assert_eq!(f.raw["pod"]["uid"], POD_UID);
        assert_eq!(f.raw["pod"]["namespace"], "shop");
        assert_eq!(f.raw["pod"]["name"], "web-0");
        assert_eq!(f.raw["container"]["name"], "app");
    }
}

/// A compressed log that inflates past the cap (a gzip bomb) is searched up to the cap
/// and reported in `errors`; a damaged one is searched as far as it inflates, or as it is
/// when nothing inflates.
#[test]
fn pod_log_gzip_bomb_and_damage_are_bounded() {
    let tree = NodeTree::new();
    let (value, secrets) = db_password(&tree, 4502);
    let mut bomb = cri_line(1, "F", &format!("pw {value}")).into_bytes();
    bomb.resize(80 << 20, b'\n');
    let packed = gzip(&bomb);
    assert!(packed.len() < 1 << 20, "a bomb is small");
    tree.write(format!("{LOGS}/1.log.1.gz"), &packed);
    let cut = gzip(cri_line(1, "F", &format!("pw {value} and more text")).as_bytes());
    tree.write(format!("{LOGS}/1.log.2.gz"), &cut[..cut.len() - 6]);
    // A gzip header, then no valid deflate data: searched as it is.
    let junk =
        [&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0xff, 0xff][..], b" pw ", value.as_bytes()].concat();
    tree.write(format!("{LOGS}/1.log.3.gz"), &junk);
    let file = tree.secrets_file("secrets.json", &secrets);
    let out = tree.kr().measure_rss().scan(&["--secrets", path_arg(&file), "--format", "json"]);
    out.assert_code(1);
    let paths: Vec<String> = out.findings().into_iter().map(|f| f.path).collect();
    let want = ["1.log.1.gz", "1.log.2.gz", "1.log.3.gz"].map(|f| format!("{LOGS}/{f}"));
    assert_eq!(paths, want);
    let errors = out.json.as_ref().unwrap()["errors"].as_array().unwrap().clone();
    let said = |p: &str, what: &str| {
        errors.iter().any(|e| e["path"] == p && e["error"].as_str().unwrap().contains(what))
    };
    assert!(said(&format!("{LOGS}/1.log.1.gz"), "more than 64 MiB"), "{errors:?}");
    assert!(said(&format!("{LOGS}/1.log.2.gz"), "the rest was not searched"), "{errors:?}");
    assert!(said(&format!("{LOGS}/1.log.3.gz"), "searched as it is"), "{errors:?}");
    let rss = out.peak_rss_kb.unwrap();
    assert!(rss < 400 << 10, "peak RSS {rss} KiB");
}

/// CRI-O's and Docker's layouts: a container's writable layer (as their records name
/// it), an image layer, and a container's config holding its env, each found with its
/// category, container and pod.
#[test]
fn crio_and_docker_layouts() {
    let tree = NodeTree::new();
    let (vals, secrets) = numbered(&tree, 6, 4701);
    let (rw, img, cid) = ("a1".repeat(32), "b2".repeat(32), id(7));
    // CRI-O
    let crio = "/var/lib/containers/storage";
    let meta = json!({"pod-name": "web-0", "uid": POD_UID, "namespace": "shop", "name": "app"});
    let records = json!([{"id": cid, "layer": rw, "metadata": meta.to_string()}]);
    tree.write(
        format!("{crio}/overlay-containers/containers.json"),
        records.to_string().as_bytes(),
    );
    tree.write(format!("{crio}/overlay/{rw}/diff/out.txt"), vals[0].as_bytes());
    tree.write(format!("{crio}/overlay/{img}/diff/etc/key"), vals[1].as_bytes());
    let spec = json!({"process": {"env": [format!("DB={}", vals[2])]}});
    let config = format!("{crio}/overlay-containers/{cid}/userdata/config.json");
    tree.write(&config, spec.to_string().as_bytes());
    // Docker
    let docker = "/var/lib/docker";
    tree.write(format!("{docker}/image/overlay2/layerdb/mounts/{cid}/mount-id"), rw.as_bytes());
    tree.write(format!("{docker}/overlay2/{rw}/diff/out.txt"), vals[3].as_bytes());
    tree.write(format!("{docker}/overlay2/{img}/diff/etc/key"), vals[4].as_bytes());
    let v2 = json!({"Config": {"Env": [format!("DB={}", vals[5])],
        "Labels": {"io.kubernetes.pod.uid": POD_UID}}});
    tree.write(format!("{docker}/containers/{cid}/config.v2.json"), v2.to_string().as_bytes());
    let file = tree.secrets_file("secrets.json", &secrets);
    let out = tree.scan(&["--secrets", path_arg(&file), "--format", "json"]);
    out.assert_code(1);
    let got: Vec<(String, String, String, String, String)> = out
        .findings()
        .into_iter()
        .map(|f| {
            let (c, p) = owner(&f);
            let (c, p) = (c.to_owned(), p.to_owned());
            (f.secret, f.site, f.category, c, p)
        })
        .collect();
    let want = |i: usize, site: &str, category: &str, owned: bool| {
        let (c, p) =
            if owned { (cid.clone(), POD_UID.to_owned()) } else { ("-".into(), "-".into()) };
        (format!("shop/s{i}"), site.to_owned(), category.to_owned(), c, p)
    };
    let mut expected = vec![
        want(0, "containers-storage", "container-layer", true),
        want(1, "containers-storage", "image-layer", false),
        want(2, "containers-storage", "env-persisted", true),
        want(3, "docker-storage", "container-layer", true),
        want(4, "docker-storage", "image-layer", false),
        want(5, "docker-storage", "env-persisted", true),
    ];
    let mut got = got;
    got.sort();
    expected.sort();
    assert_eq!(got, expected, "{}", out.stdout_str());
}

/// `--max-file-size` spares big files, not the records that name a layer's owner: a
/// Docker `mount-id` (64 hex digits) larger than the bound is still read, so the
/// container's writable layer stays its container's, with no error entry.
#[test]
fn max_file_size_does_not_unown_a_docker_layer() {
    let tree = NodeTree::new();
    let (vals, secrets) = numbered(&tree, 1, 4711);
    let (rw, cid) = ("c3".repeat(32), id(9));
    let docker = "/var/lib/docker";
    tree.write(format!("{docker}/image/overlay2/layerdb/mounts/{cid}/mount-id"), rw.as_bytes());
    tree.write(format!("{docker}/overlay2/{rw}/diff/out.txt"), vals[0].as_bytes());
    let file = tree.secrets_file("secrets.json", &secrets);
    let bound = rw.len() - 1;
    assert!(vals[0].len() <= bound, "the value's file is within the bound");
    let bound = bound.to_string();
    let args = ["--secrets", path_arg(&file), "--format", "json", "--max-file-size", &bound];
    let out = tree.scan(&args);
    out.assert_code(1);
    assert_eq!(out.json()["errors"].as_array().unwrap(), &Vec::<serde_json::Value>::new());
    let found = out.findings();
    assert_eq!(found.len(), 1, "{}", out.stdout_str());
    assert_eq!((found[0].category.as_str(), owner(&found[0]).0), ("container-layer", &*cid));
}

/// Docker's data root moved (`data-root` in `/etc/docker/daemon.json`, or
/// `--docker-root`): a container's config there is found at its real path; a root that
/// the config or the option names and that is missing is an error entry, never a clean
/// bill; a missing default is no error.
#[test]
fn docker_data_root_from_its_config_and_the_option() {
    let tree = NodeTree::new();
    let (vals, secrets) = numbered(&tree, 1, 4721);
    let cid = id(11);
    let config = format!("/data/docker/containers/{cid}/config.v2.json");
    let v2 = json!({"Config": {"Env": [format!("DB={}", vals[0])]}});
    tree.write(&config, v2.to_string().as_bytes());
    let file = tree.secrets_file("secrets.json", &secrets);
    let args = ["--secrets", path_arg(&file), "--format", "json"];
    let errors = |out: &Out| out.json()["errors"].as_array().unwrap().clone();
    // Nothing names the moved root: it is not looked at, and that is no error.
    let out = tree.scan(&args);
    out.assert_code(0);
    assert!(errors(&out).is_empty(), "{:?}", errors(&out));
    // Docker's own config names it.
    tree.write("/etc/docker/daemon.json", br#"{"data-root": "/data/docker", "debug": true}"#);
    let out = tree.scan(&args);
    out.assert_code(1);
    let found = out.findings();
    assert_eq!(found.len(), 1, "{}", out.stdout_str());
    assert_eq!((found[0].path.as_str(), found[0].site.as_str()), (&*config, "docker-storage"));
    assert_eq!(found[0].category, "env-persisted");
    // A root it names that is missing: an error entry that says who named it.
    tree.write("/etc/docker/daemon.json", br#"{"data-root": "/elsewhere/docker"}"#);
    let out = tree.scan(&args);
    let e = errors(&out);
    let named = e.iter().find(|e| e["path"] == "/elsewhere/docker");
    let text = named.and_then(|e| e["error"].as_str()).unwrap_or_default();
    assert!(text.contains("daemon.json") && text.contains("No such file"), "{e:?}");
    // The option wins over the config, and a missing one is an error entry too.
    let moved = [&args[..], &["--docker-root", "/data/docker"]].concat();
    tree.scan(&moved).assert_code(1);
    let out = tree.scan(&[&args[..], &["--docker-root", "/nowhere"]].concat());
    let e = errors(&out);
    let text = e.iter().find(|e| e["path"] == "/nowhere").and_then(|e| e["error"].as_str());
    assert!(text.unwrap_or_default().contains("--docker-root"), "{e:?}");
}

/// containers/storage moved: `graphroot` in `/etc/containers/storage.conf` (Podman's, and
/// CRI-O's unless its own `crio.conf` names a `root`), `[crio] root` in
/// `/etc/crio/crio.conf`, or `--containers-storage-root`: a container's spec under each
/// root named is found; a named root that is missing is an error entry that says who
/// named it; the option wins over both files.
#[test]
fn containers_storage_roots_from_their_config_and_the_option() {
    let tree = NodeTree::new();
    let (vals, secrets) = numbered(&tree, 2, 4731);
    let spec = |root: &str, i: usize| {
        let config = format!("{root}/overlay-containers/{}/userdata/config.json", id(20 + i as u8));
        let env = json!({"process": {"env": [format!("DB={}", vals[i])]}});
        tree.write(&config, env.to_string().as_bytes());
        config
    };
    let (podman, crio) = (spec("/data/podman", 0), spec("/data/crio", 1));
    let file = tree.secrets_file("secrets.json", &secrets);
    let args = ["--secrets", path_arg(&file), "--format", "json"];
    let paths = |out: &Out| {
        let mut p: Vec<String> = out.findings().into_iter().map(|f| f.path).collect();
        p.sort();
        p
    };
    let errors = |out: &Out| out.json()["errors"].as_array().unwrap().clone();
    let out = tree.scan(&args);
    out.assert_code(0);
    assert!(errors(&out).is_empty(), "{:?}", errors(&out));
    tree.write(
        "/etc/containers/storage.conf",
        b"[storage]\ndriver = \"overlay\"\ngraphroot = \"/data/podman\"\n",
    );
    let out = tree.scan(&args);
    assert_eq!(paths(&out), std::slice::from_ref(&podman));
    tree.write("/etc/crio/crio.conf", b"[crio]\nroot = \"/data/crio\"\n");
    let out = tree.scan(&args);
    let mut both = vec![crio.clone(), podman.clone()];
    both.sort();
    assert_eq!(paths(&out), both);
    assert!(out
        .findings()
        .iter()
        .all(|f| f.site == "containers-storage" && f.category == "env-persisted"));
    // The option: only its root.
    let out = tree.scan(&[&args[..], &["--containers-storage-root", "/data/crio"]].concat());
    assert_eq!(paths(&out), [crio]);
    // Named and missing: an error entry saying who named it.
    tree.write("/etc/crio/crio.conf", b"[crio]\nroot = \"/gone/crio\"\n");
    let out = tree.scan(&args);
    assert_eq!(paths(&out), [podman]);
    let e = errors(&out);
    let text = e.iter().find(|e| e["path"] == "/gone/crio").and_then(|e| e["error"].as_str());
    assert!(text.unwrap_or_default().contains("crio.conf"), "{e:?}");
}

/// The containerd dockerd starts for itself (root `<data-root>/containerd/daemon`, state
/// `/run/docker/containerd/daemon`, namespace `moby`) is scanned with the node's own:
/// its `meta.db`, its task bundles' specs and its snapshots, under a data root that
/// Docker's `daemon.json` moved too.
#[test]
fn dockers_own_containerd_is_found() {
    let moved = "/data/docker/containerd/daemon/io.containerd.metadata.v1.bolt/meta.db";
    let tree = NodeTree::new();
    let (value, freed) = (fake_secret(4741), fake_secret(4742));
    let (value, freed) = (String::from_utf8(value).unwrap(), String::from_utf8(freed).unwrap());
    let mut all = secrets(&value, &freed);
    tree.guard_secrets(&all);
    tree.write(moved, &meta_db(&value, &freed));
    let (vals, more) = numbered(&tree, 2, 4751);
    all.extend(more);
    let cid = id(30);
    let bundle = format!(
        "/run/docker/containerd/daemon/io.containerd.runtime.v2.task/moby/{cid}/config.json"
    );
    let spec = json!({"process": {"env": [format!("DB={}", vals[0])]}});
    tree.write(&bundle, spec.to_string().as_bytes());
    let layer = "/data/docker/containerd/daemon/io.containerd.snapshotter.v1.overlayfs/snapshots/7/fs/out.txt";
    tree.write(layer, vals[1].as_bytes());
    let file = tree.secrets_file("secrets.json", &all);
    let args = ["--secrets", path_arg(&file), "--format", "json"];
    // Under the default data root, nothing of it: the moved one is not named yet.
    let out = tree.scan(&args);
    out.assert_code(0);
    tree.write("/etc/docker/daemon.json", br#"{"data-root": "/data/docker"}"#);
    let out = tree.scan(&args);
    out.assert_code(1);
    let mut got: Vec<(String, String)> =
        out.findings().into_iter().map(|f| (f.site, f.path)).collect();
    got.sort();
    got.dedup();
    let want = [
        ("containerd-metadata", moved),
        ("containerd-snapshot", layer),
        ("oci-bundle", bundle.as_str()),
    ];
    assert_eq!(got, want.map(|(s, p)| (s.to_owned(), p.to_owned())), "{}", out.stdout_str());
}

/// containerd's own `config.toml` may move its root: the moved `meta.db` is found; a root
/// it names that is missing is an error entry that says so; `--containerd-root` wins.
#[test]
fn containerd_root_from_its_config() {
    let moved = "/data/containerd/io.containerd.metadata.v1.bolt/meta.db";
    let (tree, file) = planted(moved, 4761);
    let args = ["--secrets", path_arg(&file), "--format", "json"];
    tree.write(
        "/etc/containerd/config.toml",
        b"version = 2\nroot = \"/data/containerd\"\n[grpc]\n",
    );
    let out = tree.scan(&args);
    out.assert_code(1);
    assert!(out.findings().iter().any(|f| f.path == moved && f.site == "containerd-metadata"));
    tree.write("/etc/containerd/config.toml", b"version = 2\nroot = \"/gone/containerd\"\n");
    let out = tree.scan(&args);
    out.assert_code(0);
    let errors = out.json()["errors"].as_array().unwrap().clone();
    let e =
        errors.iter().find(|e| e["path"] == "/gone/containerd").and_then(|e| e["error"].as_str());
    assert!(e.unwrap_or_default().contains("config.toml"), "{errors:?}");
    let given = [&args[..], &["--containerd-root", "/data/containerd"]].concat();
    tree.scan(&given).assert_code(1);
}

/// An image config as the runtimes store it: `ENV`, and the history whose `created_by`
/// holds a build arg's value.
fn image_config(env: &str, build_arg: &str) -> Vec<u8> {
    let config = json!({
        "architecture": "amd64", "os": "linux",
        "config": {"Env": ["PATH=/bin", format!("TOKEN={env}")], "Cmd": ["sh"]},
        "history": [{"created_by": format!("|1 DEPLOY_KEY={build_arg} /bin/sh -c make")}],
        "rootfs": {"type": "layers", "diff_ids": [format!("sha256:{}", "d1".repeat(32))]},
    });
    serde_json::to_vec(&config).unwrap()
}

/// Image metadata of every runtime (issue 30): a Docker image config (`imagedb`, named
/// through `repositories.json`), a containers/storage one (`overlay-images/<id>/=<base64
/// key>`, named through `images.json`) and containerd's content-store configs (named
/// through `meta.db`'s images, an index's too, an image never unpacked too), each found
/// once as `image-config` with every name of its images; containerd's compressed layer
/// blobs are not read.
#[test]
fn image_configs_of_every_runtime() {
    let tree = NodeTree::new();
    let (vals, mut secrets) = numbered(&tree, 8, 4771);
    let value = String::from_utf8(fake_secret(4791)).unwrap();
    let freed = String::from_utf8(fake_secret(4792)).unwrap();
    secrets.extend(self::secrets(&value, &freed));
    tree.guard_secrets(&secrets);
    tree.write(META_DB, &meta_db(&value, &freed));
    let blobs = "/var/lib/containerd/io.containerd.content.v1.content/blobs/sha256";
    let (c0, c3) = (format!("{blobs}/{}", "c0".repeat(32)), format!("{blobs}/{}", "c3".repeat(32)));
    tree.write(&c0, &image_config(&vals[0], &vals[1]));
    tree.write(&c3, &image_config(&vals[2], &vals[2]));
    let layer_blob = format!("{blobs}/{}", "d0".repeat(32));
    tree.write(&layer_blob, vals[3].as_bytes());
    // Docker
    let img = "f5".repeat(32);
    let docker = "/var/lib/docker/image/overlay2";
    let docker_config = format!("{docker}/imagedb/content/sha256/{img}");
    tree.write(&docker_config, &image_config(&vals[4], &vals[5]));
    let repos = json!({"Repositories": {
        "shop/web": {"shop/web:1": format!("sha256:{img}"), "shop/web:latest": format!("sha256:{img}")},
        "shop/other": {"shop/other:2": format!("sha256:{}", "0f".repeat(32))},
    }});
    tree.write(format!("{docker}/repositories.json"), repos.to_string().as_bytes());
    // containers/storage
    let images = "/var/lib/containers/storage/overlay-images";
    let key = String::from_utf8(b64(format!("sha256:{img}").as_bytes())).unwrap();
    let cs_config = format!("{images}/{img}/={key}");
    tree.write(&cs_config, &image_config(&vals[6], &vals[7]));
    tree.write(format!("{images}/{img}/manifest"), b"{\"schemaVersion\": 2}");
    let records = json!([{"id": img, "names": ["localhost/web:1", "localhost/web:2"]}]);
    tree.write(format!("{images}/images.json"), records.to_string().as_bytes());
    let file = tree.secrets_file("secrets.json", &secrets);
    let out = tree.scan(&["--secrets", path_arg(&file), "--format", "json"]);
    out.assert_code(1);
    let mut got: Vec<(String, String, String, String, Vec<String>)> = out
        .findings()
        .into_iter()
        .filter(|f| f.category == "image-config" || f.path == layer_blob)
        .map(|f| {
            let names = f.raw["images"].as_array().cloned().unwrap_or_default();
            let names = names.iter().map(|n| n.as_str().unwrap().to_owned()).collect();
            (f.secret, f.path, f.site, f.category, names)
        })
        .collect();
    got.sort();
    let s = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let c0_names = s(&["localhost/app:1", &format!("sha256:{}", "c0".repeat(32))]);
    let row = |i: usize, path: &str, site: &str, names: &[String]| {
        (
            format!("shop/s{i}"),
            path.to_owned(),
            site.to_owned(),
            "image-config".into(),
            names.to_vec(),
        )
    };
    let mut want = vec![
        row(0, &c0, "containerd-content", &c0_names),
        row(1, &c0, "containerd-content", &c0_names),
        row(2, &c3, "containerd-content", &s(&["native-only:1"])),
        row(4, &docker_config, "docker-storage", &s(&["shop/web:1", "shop/web:latest"])),
        row(5, &docker_config, "docker-storage", &s(&["shop/web:1", "shop/web:latest"])),
        row(6, &cs_config, "containers-storage", &s(&["localhost/web:1", "localhost/web:2"])),
        row(7, &cs_config, "containers-storage", &s(&["localhost/web:1", "localhost/web:2"])),
    ];
    want.sort();
    assert_eq!(got, want, "{}", out.stdout_str());
}

/// Each finding's attribution, sorted: secret, path, site, category, container id, name,
/// `live` and `runtime`, pod uid, namespace and name (`-` where absent), and its images'
/// names joined by `,`.
fn attribution(out: &Out) -> Vec<Vec<String>> {
    let s = |v: &Value| v.as_str().unwrap_or("-").to_owned();
    let mut got: Vec<Vec<String>> = out
        .findings()
        .into_iter()
        .map(|f| {
            let (c, p) = (&f.raw["container"], &f.raw["pod"]);
            let live = c["live"].as_bool().map_or("-".to_owned(), |l| l.to_string());
            let images = f.raw["images"].as_array().cloned().unwrap_or_default();
            let images: Vec<String> = images.iter().map(s).collect();
            vec![f.secret, f.path, f.site, f.category, s(&c["id"]), s(&c["name"]), live]
                .into_iter()
                .chain([s(&c["runtime"]), s(&p["uid"]), s(&p["namespace"]), s(&p["name"])])
                .chain([images.join(",")])
                .collect()
        })
        .collect();
    got.sort();
    got
}

/// An [`attribution`] row of value `i`: the place, then the owner (container id, name,
/// live, runtime, pod uid, namespace, name, images).
fn attributed(i: usize, path: &str, site: &str, category: &str, owner: [&str; 8]) -> Vec<String> {
    let place = [path, site, category].map(str::to_owned);
    [format!("shop/s{i}")].into_iter().chain(place).chain(owner.map(str::to_owned)).collect()
}

/// What Docker's own records say of a container (issue 30), with no CRI to ask: its name
/// and its pod's (kubelet's `io.kubernetes.*` labels, as cri-dockerd sets them) on every
/// finding of its config, layer and logs, and whether it runs (`State.Running`): an
/// exited container's env and writable layer are `dead-container`; a record saying it
/// runs, with no process of it running here, leaves it unknown (`env-persisted`). Its
/// json-file logs (the current one and a gzip rotation) are of category `pod-log`, at site
/// `pod-log` when they are a pod's and `runtime-log` when not; a named volume's data is a
/// `runtime-volume`; a file in the container's dir that is not a log is the container's,
/// not read as a log.
#[test]
fn docker_records_name_and_witness_their_containers() {
    let tree = NodeTree::new();
    let (vals, secrets) = numbered(&tree, 9, 4811);
    let (up, down, rw) = (id(11), id(12), "e4".repeat(32));
    let docker = "/var/lib/docker";
    let labels = json!({
        "io.kubernetes.container.name": "app", "io.kubernetes.pod.uid": POD_UID,
        "io.kubernetes.pod.namespace": "shop", "io.kubernetes.pod.name": "web-0",
    });
    let running = json!({"Name": "/k8s_app_web-0_shop_0", "State": {"Running": true},
        "Config": {"Image": "shop/web:1", "Env": [format!("DB={}", vals[0])], "Labels": labels}});
    let exited = json!({"Name": "/batch", "State": {"Running": false, "ExitCode": 0},
        "Config": {"Image": "busybox", "Env": [format!("DB={}", vals[1])], "Labels": {}}});
    for (cid, config) in [(&up, &running), (&down, &exited)] {
        let path = format!("{docker}/containers/{cid}/config.v2.json");
        tree.write(path, config.to_string().as_bytes());
    }
    tree.write(format!("{docker}/image/overlay2/layerdb/mounts/{down}/mount-id"), rw.as_bytes());
    tree.write(format!("{docker}/overlay2/{rw}/diff/out.txt"), vals[2].as_bytes());
    let init = format!("{docker}/overlay2/{rw}-init/diff/etc/hosts");
    tree.write(&init, vals[8].as_bytes());
    let line = |v: &str| format!("{{\"log\":\"token={v}\\n\",\"stream\":\"stdout\"}}\n");
    let up_log = format!("{docker}/containers/{up}/{up}-json.log");
    tree.write(&up_log, line(&vals[3]).as_bytes());
    let down_log = format!("{docker}/containers/{down}/{down}-json.log.1.gz");
    tree.write(&down_log, &gzip(line(&vals[4]).as_bytes()));
    let volume = format!("{docker}/volumes/data1/_data/app.env");
    tree.write(&volume, format!("KEY={}\n", vals[5]).as_bytes());
    // Not logs, but the container's files: its hostname file, a file named like a log of
    // another id.
    let hostname = format!("{docker}/containers/{up}/hostname");
    tree.write(&hostname, vals[6].as_bytes());
    let not_log = format!("{docker}/containers/{up}/{down}-json.log");
    tree.write(&not_log, vals[7].as_bytes());
    let file = tree.secrets_file("secrets.json", &secrets);
    let out = tree.scan(&["--secrets", path_arg(&file), "--format", "json"]);
    out.assert_code(1);
    let got = attribution(&out);
    let owner = |of: &str| -> [&str; 8] {
        match of {
            "up" => [&up, "app", "-", "docker", POD_UID, "shop", "web-0", ""],
            "down" => [&down, "batch", "false", "docker", "-", "-", "-", ""],
            _ => ["-", "-", "-", "-", "-", "-", "-", ""],
        }
    };
    let row = |i: usize, path: &str, site: &str, category: &str, of: &str| {
        attributed(i, path, site, category, owner(of))
    };
    let up_config = format!("{docker}/containers/{up}/config.v2.json");
    let down_config = format!("{docker}/containers/{down}/config.v2.json");
    let layer = format!("{docker}/overlay2/{rw}/diff/out.txt");
    let mut want = vec![
        row(0, &up_config, "docker-storage", "env-persisted", "up"),
        row(1, &down_config, "docker-storage", "dead-container", "down"),
        row(2, &layer, "docker-storage", "dead-container", "down"),
        row(3, &up_log, "pod-log", "pod-log", "up"),
        row(4, &down_log, "runtime-log", "pod-log", "down"),
        row(5, &volume, "runtime-volume", "other", "-"),
        row(6, &hostname, "docker-storage", "env-persisted", "up"),
        row(7, &not_log, "docker-storage", "env-persisted", "up"),
        row(8, &init, "docker-storage", "dead-container", "down"),
    ];
    want.sort();
    assert_eq!(got, want, "{}", out.stdout_str());
}

/// What containers/storage's records say (issue 30), with no CRI to ask: a CRI-O
/// container's kubelet name and pod (uid, namespace and name from its sandbox's record,
/// both in `volatile-containers.json` as CRI-O writes them), a
/// Podman container's name, each with its runtime, and whether Podman's runs as its state
/// database (`libpod/bolt_state.db`, itself read: it holds every spec) says; a container
/// dir no record names is a removed container's (`dead-container`); Podman's `ctr.log` is a
/// `runtime-log`; image
/// layers carry the names of the images whose stacks hold them (`images.json`'s top layer,
/// `layers.json`'s parents); a volume's data is a `runtime-volume`.
#[test]
fn containers_storage_records_name_and_witness_their_containers() {
    let tree = NodeTree::new();
    let (vals, secrets) = numbered(&tree, 9, 4851);
    let (sandbox, crio, podman, removed) = (id(21), id(22), id(23), id(24));
    let (l_crio, l_podman, top, base) =
        ("a5".repeat(32), "b6".repeat(32), "c7".repeat(32), "d8".repeat(32));
    let graph = "/var/lib/containers/storage";
    let meta = |m: Value| m.to_string();
    // CRI-O makes every container volatile: its records are in volatile-containers.json,
    // with the sandbox's name as its `pod-name` and the pod's on the sandbox's record.
    let sandbox_name = format!("k8s_web-0_shop_{POD_UID}_0");
    let volatile = json!([
        {"id": sandbox, "layer": "e9".repeat(32), "metadata": meta(json!({"pod": true,
            "pod-name": sandbox_name, "pod-id": sandbox, "uid": POD_UID, "namespace": "shop",
            "name": sandbox_name, "metadata-name": "web-0"}))},
        {"id": crio, "layer": l_crio, "metadata": meta(json!({"pod-name": sandbox_name,
            "pod-id": sandbox, "name": format!("k8s_app_web-0_shop_{POD_UID}_0"),
            "metadata-name": "app", "image-name": "shop/web:1"}))},
    ]);
    let records = json!([{"id": podman, "layer": l_podman, "names": ["batch"],
        "metadata": meta(json!({"name": "batch", "image-name": "localhost/tool:1"}))}]);
    let containers = format!("{graph}/overlay-containers");
    tree.write(format!("{containers}/containers.json"), records.to_string().as_bytes());
    let volatile = volatile.to_string();
    tree.write(format!("{containers}/volatile-containers.json"), volatile.as_bytes());
    let spec = |v: &str| json!({"process": {"env": [format!("DB={v}")]}}).to_string();
    let config = |c: &str| format!("{containers}/{c}/userdata/config.json");
    tree.write(config(&crio), spec(&vals[0]).as_bytes());
    tree.write(config(&podman), spec(&vals[1]).as_bytes());
    let ctr_log = format!("{containers}/{podman}/userdata/ctr.log");
    tree.write(&ctr_log, cri_line(1, "F", &format!("token={}", vals[2])).as_bytes());
    tree.write(config(&removed), spec(&vals[3]).as_bytes());
    tree.write(format!("{graph}/overlay/{l_crio}/diff/out.txt"), vals[4].as_bytes());
    let images = json!([{"id": "f0".repeat(32), "names": ["localhost/web:1"], "layer": top}]);
    tree.write(format!("{graph}/overlay-images/images.json"), images.to_string().as_bytes());
    let layers = json!([{"id": top, "parent": base}, {"id": base}]);
    tree.write(format!("{graph}/overlay-layers/layers.json"), layers.to_string().as_bytes());
    let (in_base, in_top) = (
        format!("{graph}/overlay/{base}/diff/etc/key"),
        format!("{graph}/overlay/{top}/diff/app/key"),
    );
    tree.write(&in_base, vals[5].as_bytes());
    tree.write(&in_top, vals[6].as_bytes());
    let volume = format!("{graph}/volumes/v1/_data/app.env");
    tree.write(&volume, vals[7].as_bytes());
    // Podman's state: its container has exited; its stored spec holds a value too.
    let ctr = bucket([
        (
            "config",
            data(json!({"spec": {"process": {"env": [format!("K={}", vals[8])]}}}).to_string()),
        ),
        ("state", data(json!({"state": 6, "exitCode": 0}).to_string())),
    ]);
    let state = BTreeMap::from([
        (
            b"all-ctrs".to_vec(),
            Node::Bucket(BTreeMap::from([(podman.clone().into_bytes(), data("batch"))])),
        ),
        (b"ctr".to_vec(), Node::Bucket(BTreeMap::from([(podman.clone().into_bytes(), ctr)]))),
    ]);
    let state_db = format!("{graph}/libpod/bolt_state.db");
    tree.write(&state_db, &Writer::new(4096, true, 64).finish(&state, &[], 4));
    let file = tree.secrets_file("secrets.json", &secrets);
    let out = tree.scan(&["--secrets", path_arg(&file), "--format", "json"]);
    out.assert_code(1);
    let got = attribution(&out);
    let owner = |of: &str| -> [&str; 8] {
        match of {
            "crio" => [&crio, "app", "-", "cri-o", POD_UID, "shop", "web-0", ""],
            "podman" => [&podman, "batch", "false", "podman", "-", "-", "-", ""],
            "removed" => [&removed, "-", "false", "-", "-", "-", "-", ""],
            "image" => ["-", "-", "-", "-", "-", "-", "-", "localhost/web:1"],
            _ => ["-", "-", "-", "-", "-", "-", "-", ""],
        }
    };
    let row = |i: usize, path: &str, site: &str, category: &str, of: &str| {
        attributed(i, path, site, category, owner(of))
    };
    let cs = "containers-storage";
    let mut want = vec![
        row(0, &config(&crio), cs, "env-persisted", "crio"),
        row(1, &config(&podman), cs, "dead-container", "podman"),
        row(2, &ctr_log, "runtime-log", "pod-log", "podman"),
        row(3, &config(&removed), cs, "dead-container", "removed"),
        row(4, &format!("{graph}/overlay/{l_crio}/diff/out.txt"), cs, "container-layer", "crio"),
        row(5, &in_base, cs, "image-layer", "image"),
        row(6, &in_top, cs, "image-layer", "image"),
        row(7, &volume, "runtime-volume", "other", "-"),
        row(8, &state_db, cs, "env-persisted", "-"),
    ];
    want.sort();
    assert_eq!(got, want, "{}", out.stdout_str());
}

/// What a runtime keeps beside its records (issue 46, break 8): every file of a Docker
/// container's dir is the container's, read with its record's owner: `hostconfig.json`
/// (its `LogConfig.Config` holds a logging driver's token), swarm secrets in
/// `mounts/secrets/`, a checkpoint's images, a config left half-written (`.tmp-…`,
/// `….tmp`); so is every file of a containers/storage container's `userdata/` (Podman's
/// secrets in `secrets/` or `run/secrets/`, `artifacts/`), and Podman's secret store
/// (`secrets/filedriver/secretsdata.json`, every `podman secret`, base64) is read as
/// no container's. A container's `shm` that is a plain dir (no tmpfs mounted there: what
/// something else left) is read as the container's too (`tests/mounts.rs` has the tmpfs).
#[test]
fn runtime_files_beside_the_records_are_read() {
    let tree = NodeTree::new();
    let (vals, secrets) = numbered(&tree, 11, 4871);
    let down = id(31);
    let docker = "/var/lib/docker";
    let dir = format!("{docker}/containers/{down}");
    let exited = json!({"Name": "/batch", "State": {"Running": false, "ExitCode": 0},
        "Config": {"Image": "busybox", "Env": [], "Labels": {}}});
    tree.write(format!("{dir}/config.v2.json"), exited.to_string().as_bytes());
    let host = json!({"LogConfig": {"Type": "splunk", "Config": {"splunk-token": vals[0],
        "splunk-url": "https://splunk.example:8088"}}});
    let docker_files = [
        (0, format!("{dir}/hostconfig.json"), host.to_string().into_bytes()),
        (1, format!("{dir}/mounts/secrets/db_password"), vals[1].clone().into_bytes()),
        (
            2,
            format!("{dir}/checkpoints/cp1/pages-1.img"),
            [&[0u8; 64][..], vals[2].as_bytes(), &[7u8; 64]].concat(),
        ),
        (
            3,
            format!("{dir}/config.v2.json.tmp"),
            json!({"Config": {"Env": [format!("DB={}", vals[3])]}}).to_string().into_bytes(),
        ),
        (
            4,
            format!("{dir}/.tmp-config.v2.json3141592"),
            json!({"Config": {"Env": [format!("DB={}", vals[4])]}}).to_string().into_bytes(),
        ),
    ];
    for (_, path, bytes) in &docker_files {
        tree.write(path, bytes);
    }
    let docker_shm = format!("{dir}/mounts/shm/app.lock");
    tree.write(&docker_shm, vals[10].as_bytes());
    // Podman
    let graph = "/var/lib/containers/storage";
    let podman = id(32);
    let records = json!([{"id": podman, "layer": "b6".repeat(32), "names": ["batch"],
        "metadata": json!({"name": "batch", "image-name": "localhost/tool:1"}).to_string()}]);
    let containers = format!("{graph}/overlay-containers");
    tree.write(format!("{containers}/containers.json"), records.to_string().as_bytes());
    let userdata = format!("{containers}/{podman}/userdata");
    let podman_files = [
        (5, format!("{userdata}/run/secrets/db_password"), vals[5].clone().into_bytes()),
        (6, format!("{userdata}/secrets/api_key"), vals[6].clone().into_bytes()),
        (7, format!("{userdata}/artifacts/token"), vals[7].clone().into_bytes()),
        (8, format!("{userdata}/.containerenv"), format!("TOKEN={}\n", vals[8]).into_bytes()),
    ];
    for (_, path, bytes) in &podman_files {
        tree.write(path, bytes);
    }
    let podman_shm = format!("{userdata}/shm/app.lock");
    tree.write(&podman_shm, vals[10].as_bytes());
    let store = format!("{graph}/secrets/filedriver/secretsdata.json");
    let stored =
        json!({"a1b2c3d4e5f6a7b8c9d0e1f2a": String::from_utf8(b64(vals[9].as_bytes())).unwrap()});
    tree.write(&store, stored.to_string().as_bytes());
    let file = tree.secrets_file("secrets.json", &secrets);
    let out = tree.scan(&["--secrets", path_arg(&file), "--format", "json"]);
    out.assert_code(1);
    let got = attribution(&out);
    let docker_down = [&*down, "batch", "false", "docker", "-", "-", "-", ""];
    let podman_batch = [&*podman, "batch", "-", "podman", "-", "-", "-", ""];
    let mut want: Vec<Vec<String>> = docker_files
        .iter()
        .map(|(i, path, _)| attributed(*i, path, "docker-storage", "dead-container", docker_down))
        .chain(podman_files.iter().map(|(i, path, _)| {
            attributed(*i, path, "containers-storage", "env-persisted", podman_batch)
        }))
        .collect();
    let nobody = ["-", "-", "-", "-", "-", "-", "-", ""];
    want.push(attributed(9, &store, "containers-storage", "other", nobody));
    want.push(attributed(10, &docker_shm, "docker-storage", "dead-container", docker_down));
    want.push(attributed(10, &podman_shm, "containers-storage", "env-persisted", podman_batch));
    want.sort();
    assert_eq!(got, want, "{}", out.stdout_str());
    assert!(found_note(&out, &store).contains("secret store"), "{}", out.stdout_str());
}

/// The note of the finding at `path`.
fn found_note(out: &Out, path: &str) -> String {
    let found = out.findings();
    let f = found.iter().find(|f| f.path == path).unwrap_or_else(|| panic!("{path}"));
    f.raw["note"].as_str().unwrap_or_default().to_owned()
}

/// Docker's image layers carry the names of the images whose stacks hold them: an image
/// config's `rootfs.diff_ids` give the chain ids (the image spec's), under which
/// `layerdb/sha256/<chain id>/cache-id` names each layer's `overlay2` dir; a layer two
/// images share carries both's names. A layer no image and no container names (BuildKit's
/// build cache) is no image's: `other`, with a note.
#[test]
fn docker_image_layers_carry_their_images() {
    use sha2::{Digest, Sha256};
    let tree = NodeTree::new();
    let (vals, secrets) = numbered(&tree, 3, 4881);
    let store = "/var/lib/docker/image/overlay2";
    let (d1, d2) = (format!("sha256:{}", "1d".repeat(32)), format!("sha256:{}", "2d".repeat(32)));
    let chain1 = d1.trim_start_matches("sha256:").to_owned();
    let chain2: String = Sha256::digest(format!("sha256:{chain1} {d2}").as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let (web, base) = ("5a".repeat(32), "6b".repeat(32));
    let config =
        |diffs: &[&str]| json!({"rootfs": {"type": "layers", "diff_ids": diffs}}).to_string();
    tree.write(format!("{store}/imagedb/content/sha256/{web}"), config(&[&d1, &d2]).as_bytes());
    tree.write(format!("{store}/imagedb/content/sha256/{base}"), config(&[&d1]).as_bytes());
    let repos = json!({"Repositories": {
        "shop/web": {"shop/web:1": format!("sha256:{web}")},
        "base": {"base:3": format!("sha256:{base}")},
    }});
    tree.write(format!("{store}/repositories.json"), repos.to_string().as_bytes());
    let (bottom, upper, loose) = ("7c".repeat(32), "8d".repeat(32), "9e".repeat(32));
    tree.write(format!("{store}/layerdb/sha256/{chain1}/cache-id"), bottom.as_bytes());
    tree.write(format!("{store}/layerdb/sha256/{chain2}/cache-id"), upper.as_bytes());
    let layer = |dir: &str| format!("/var/lib/docker/overlay2/{dir}/diff/key");
    for (dir, v) in [(&bottom, &vals[0]), (&upper, &vals[1]), (&loose, &vals[2])] {
        tree.write(layer(dir), v.as_bytes());
    }
    let file = tree.secrets_file("secrets.json", &secrets);
    let out = tree.scan(&["--secrets", path_arg(&file), "--format", "json"]);
    out.assert_code(1);
    let mut got: Vec<(String, String, String, Vec<String>)> = out
        .findings()
        .into_iter()
        .map(|f| {
            let names = f.raw["images"].as_array().cloned().unwrap_or_default();
            let names = names.iter().map(|n| n.as_str().unwrap().to_owned()).collect();
            (f.secret, f.path, f.category, names)
        })
        .collect();
    got.sort();
    let row = |i: usize, dir: &str, category: &str, names: &[&str]| {
        let names = names.iter().map(|n| (*n).to_owned()).collect();
        (format!("shop/s{i}"), layer(dir), category.to_owned(), names)
    };
    let loose_note = found_note(&out, &layer(&loose));
    assert!(loose_note.contains("BuildKit"), "{loose_note}");
    let want = vec![
        row(0, &bottom, "image-layer", &["base:3", "shop/web:1"]),
        row(1, &upper, "image-layer", &["shop/web:1"]),
        row(2, &loose, "other", &[]),
    ];
    assert_eq!(got, want, "{}", out.stdout_str());
}

/// A pod log that is a symlink (cri-dockerd links `/var/log/pods/<ns>_<pod>_<uid>/<c>/0.log`
/// to Docker's json-file log) is read as that pod's log when it resolves, inside the root,
/// to a log a runtime's records name: the Docker log of a container with no kubelet labels
/// is the linking pod's. A link to any other file is never followed, nor one whose `..`s
/// climb past the node's `/` (a link's target is a node path: it stops at the root, here
/// at a file no runtime's record names).
#[test]
fn pod_log_links_to_runtime_logs() {
    let tree = NodeTree::new();
    let (vals, secrets) = numbered(&tree, 3, 4901);
    let cid = id(31);
    let docker = "/var/lib/docker";
    let config = json!({"Name": "/k8s_app_web-0", "State": {"Running": true}, "Config": {}});
    let dir = format!("{docker}/containers/{cid}");
    tree.write(format!("{dir}/config.v2.json"), config.to_string().as_bytes());
    let log = format!("{dir}/{cid}-json.log");
    tree.write(&log, format!("{{\"log\":\"t={}\\n\"}}\n", vals[0]).as_bytes());
    tree.write("/srv/notes.txt", vals[1].as_bytes());
    let pod_dir = format!("/var/log/pods/shop_web-0_{POD_UID}/app");
    tree.mkdir(&pod_dir);
    let link = |name: &str, to: &str| tree.symlink(format!("{pod_dir}/{name}"), to);
    link("0.log", &log);
    link("1.log", "/srv/notes.txt");
    link("2.log", "../../../../../../../../srv/notes.txt");
    let file = tree.secrets_file("secrets.json", &secrets);
    let out = tree.scan(&["--secrets", path_arg(&file), "--format", "json"]);
    out.assert_code(1);
    let found = out.findings();
    let got: Vec<_> = found
        .iter()
        .map(|f| {
            let (c, p) = (&f.raw["container"], &f.raw["pod"]);
            let s = |v: &Value| v.as_str().unwrap_or("-").to_owned();
            [f.secret.clone(), f.path.clone(), f.site.clone(), f.category.clone(), s(&c["id"])]
                .into_iter()
                .chain([s(&c["name"]), s(&p["uid"]), s(&p["namespace"]), s(&p["name"])])
                .collect::<Vec<_>>()
        })
        .collect();
    let want = vec![["shop/s0", &log, "pod-log", "pod-log", &cid, "app", POD_UID, "shop", "web-0"]
        .map(str::to_owned)
        .to_vec()];
    assert_eq!(got, want, "{}", out.stdout_str());
}

/// Issue 46 review, breaks 1 and 3: nothing in a runtime's dirs is read through a symlink.
/// A container's `mounts` pointing at another container's dir does not make that
/// container's files this one's; one pointing at the root does not walk the node as a
/// container's; containers/storage's secret store pointing at `/etc` is not read as the
/// secret store, nor a container's `userdata` pointing at another's as its own.
#[test]
fn symlinks_in_runtime_dirs_are_not_followed() {
    let tree = NodeTree::new();
    let (vals, secrets) = numbered(&tree, 4, 4901);
    let docker = "/var/lib/docker/containers";
    let (a, b, c) = (id(41), id(42), id(43));
    for (cid, name) in [(&a, "/a"), (&b, "/b"), (&c, "/c")] {
        let record = json!({"Name": name, "State": {"Running": false, "ExitCode": 0},
            "Config": {"Image": "busybox", "Env": [], "Labels": {}}});
        tree.write(format!("{docker}/{cid}/config.v2.json"), record.to_string().as_bytes());
    }
    let host = json!({"LogConfig": {"Type": "splunk", "Config": {"splunk-token": vals[0]}}});
    let b_host = format!("{docker}/{b}/hostconfig.json");
    tree.write(&b_host, host.to_string().as_bytes());
    tree.symlink(format!("{docker}/{a}/mounts"), format!("../{b}"));
    tree.symlink(format!("{docker}/{c}/mounts"), "../../../../..");
    tree.write("/srv/app/token", vals[1].as_bytes());
    // containers/storage
    let graph = "/var/lib/containers/storage";
    let (p1, p2) = (id(44), id(45));
    let records = json!([
        {"id": p1, "layer": "c1".repeat(32), "names": ["one"],
         "metadata": json!({"name": "one"}).to_string()},
        {"id": p2, "layer": "c2".repeat(32), "names": ["two"],
         "metadata": json!({"name": "two"}).to_string()}]);
    let containers = format!("{graph}/overlay-containers");
    tree.write(format!("{containers}/containers.json"), records.to_string().as_bytes());
    tree.write("/etc/app.conf", format!("password={}\n", vals[2]).as_bytes());
    tree.symlink(format!("{graph}/secrets"), "../../../../etc");
    let p2_env = format!("{containers}/{p2}/userdata/.containerenv");
    tree.write(&p2_env, format!("TOKEN={}\n", vals[3]).as_bytes());
    tree.mkdir(format!("{containers}/{p1}"));
    tree.symlink(format!("{containers}/{p1}/userdata"), format!("../{p2}/userdata"));
    let file = tree.secrets_file("secrets.json", &secrets);
    let out = tree.scan(&["--secrets", path_arg(&file), "--format", "json"]);
    out.assert_code(1);
    let b_down = [&*b, "b", "false", "docker", "-", "-", "-", ""];
    let two = [&*p2, "two", "-", "podman", "-", "-", "-", ""];
    let mut want = vec![
        attributed(0, &b_host, "docker-storage", "dead-container", b_down),
        attributed(3, &p2_env, "containers-storage", "env-persisted", two),
    ];
    want.sort();
    assert_eq!(attribution(&out), want, "{}", out.stdout_str());
}

/// Issue 46, second review of the fix: a Docker `containers` dir that is a symlink (to a
/// host dir) makes no host dir a container's; a file under a name that only starts like
/// a json-file log's rotation (`<id>-json.log.d/`) is read as the container's file, not
/// as a log (whose timestamps would be dropped).
#[test]
fn docker_containers_symlink_and_log_lookalikes() {
    let tree = NodeTree::new();
    let (vals, secrets) = numbered(&tree, 2, 4951);
    tree.write("/srv/data/app/db.conf", format!("password={}\n", vals[0]).as_bytes());
    tree.symlink("/var/lib/docker/containers", "../../../srv/data");
    let other = NodeTree::new();
    other.guard_secrets(&secrets);
    let a = id(51);
    let dir = format!("/var/lib/docker/containers/{a}");
    let record = json!({"Name": "/a", "State": {"Running": false, "ExitCode": 0}});
    other.write(format!("{dir}/config.v2.json"), record.to_string().as_bytes());
    let notes = format!("{dir}/{a}-json.log.d/notes");
    other.write(&notes, format!("2024-{} stdout F x\n", vals[1]).as_bytes());
    let file = tree.secrets_file("secrets.json", &secrets);
    let out = tree.scan(&["--secrets", path_arg(&file), "--format", "json", "--fail-on", "never"]);
    let found: Vec<String> = out.findings().into_iter().map(|f| f.path).collect();
    assert_eq!(found, Vec::<String>::new(), "{}", out.stdout_str());
    let file = other.secrets_file("secrets.json", &secrets);
    let out = other.scan(&["--secrets", path_arg(&file), "--format", "json"]);
    out.assert_code(1);
    let a_down = [&*a, "a", "false", "docker", "-", "-", "-", ""];
    let want = vec![attributed(1, &notes, "docker-storage", "dead-container", a_down)];
    assert_eq!(attribution(&out), want, "{}", out.stdout_str());
}
