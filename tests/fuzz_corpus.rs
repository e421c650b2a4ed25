//! Replays every input under `fuzz/corpus/<target>/` (the seeds, and whatever the
//! fuzzers kept) through `kresidue::fuzzing::<target>`: a regression test of the fuzz
//! targets that runs on stable, in CI. `KRESIDUE_UPDATE_CORPUS=1` (re)writes the seeds,
//! made from the bundled fixtures and generated values only.

use std::fs;
use std::path::{Path, PathBuf};

use crate::util::*;
use kresidue::fuzzing::TARGETS;
use prost::Message;

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus").join(target)
}

/// Podman's state database as libpod lays it out: a container with its state and name.
fn libpod_state() -> Vec<u8> {
    use kresidue::bbolt::write::{Node, Writer};
    use std::collections::BTreeMap;
    let bucket = |entries: Vec<(&str, Node)>| {
        Node::Bucket(entries.into_iter().map(|(k, v)| (k.as_bytes().to_vec(), v)).collect())
    };
    let data = |v: &str| Node::Data(v.as_bytes().to_vec());
    let ctr = bucket(vec![("config", data(r#"{"spec":{}}"#)), ("state", data(r#"{"state":3}"#))]);
    let root = BTreeMap::from([
        (b"all-ctrs".to_vec(), bucket(vec![("c1", data("web"))])),
        (b"ctr".to_vec(), bucket(vec![("c1", ctr)])),
    ]);
    Writer::new(4096, true, 64).finish(&root, &[], 4)
}

/// A bbolt file whose bucket at `path` has 300 elements that all point at one record
/// (issue 46, break 2: each must not be read as a record of its own).
fn aliased(path: &[&[u8]]) -> Vec<u8> {
    let record: &[(&[u8], &[u8])] = &[(b"image", b"web:1"), (b"spec", b"{}")];
    kresidue::bbolt::write::aliased(path, 300, b"c1", record)
}

/// Seed inputs per target.
/// A scan state of two files, one with a finding (made by a scan of a node of its own).
fn scan_state() -> Vec<u8> {
    let tree = NodeTree::new();
    let v = fake_secret(7700);
    tree.pod("5a5a5a5a-0000-4000-8000-0000000000f1").secret_volume("db").key("password", &v);
    let file = tree.secrets_file("s.json", &[Secret::opaque("shop", "db", &[("password", &v)])]);
    let state = tree.work("state");
    tree.scan(&["--secrets", path_arg(&file), "--state", path_arg(&state)]);
    let entry = fs::read_dir(&state).unwrap().next().unwrap().unwrap();
    fs::read(entry.path()).unwrap()
}

fn seeds() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let fixture = |p: &str| fs::read(root.join("fixtures").join(p)).unwrap();
    let secrets = fixture("secrets.json");
    let values = kresidue::kubectl::parse(&secrets).unwrap().values;
    let (set, _) = kresidue::fingerprint::FingerprintSet::build(&values, "current", [7; 32]);
    let render = kresidue::rules::examples::render;
    let sa = render(
        "{jwt:{{\"iss\":\"kubernetes/serviceaccount\",\"sub\":\"system:serviceaccount:ci:builder\",\"exp\":{now+3600}}}",
        9001,
    );
    let log = b"2026-11-30T10:00:00.000000000Z stdout F password=fake-value-0123456789\n\
2026-11-30T10:00:01.000000000Z stderr P partial \n\
2026-11-30T10:00:01.000000001Z stderr F line\nnot a CRI line\n"
        .to_vec();
    let mut gz = Vec::new();
    {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(&mut gz, flate2::Compression::fast());
        e.write_all(&log).unwrap();
        e.finish().unwrap();
    }
    let spec = br#"{"ociVersion":"1.1.0","process":{"env":["A=b"]},"annotations":{"io.kubernetes.cri.container-type":"container","io.kubernetes.cri.sandbox-uid":"5d1c3b7a-0e2f-4a6b-8c9d-1e2f3a4b5c6d","io.kubernetes.cri.container-name":"app","io.kubernetes.cri.sandbox-namespace":"shop","io.kubernetes.cri.sandbox-name":"web-0"}}"#.to_vec();
    let crio = br#"[{"id":"c1","layer":"l1","metadata":"{\"uid\":\"u1\",\"name\":\"web\"}"},{"id":"c2","layer":"l2","metadata":"not json"}]"#.to_vec();
    let docker = br#"{"Name":"/web","State":{"Running":true},"Config":{"Image":"web:1","Labels":{"io.kubernetes.pod.uid":"u2","io.kubernetes.pod.namespace":"shop"}}}"#.to_vec();
    let cri_o = br#"[{"id":"s1","layer":"l0","metadata":"{\"pod\":true,\"pod-id\":\"s1\",\"uid\":\"u1\",\"namespace\":\"shop\"}"},{"id":"c1","layer":"l1","metadata":"{\"pod-id\":\"s1\",\"pod-name\":\"web-0\",\"metadata-name\":\"app\"}"}]"#.to_vec();
    let mountinfo = b"22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n\
35 22 0:30 / /var/lib/kubelet/pods/u1/volumes/kubernetes.io~secret/db rw - tmpfs tmpfs rw\n\
36 22 8:1 /srv/x /var/lib/kubelet/pods/u1/volumes/a\\040b rw - ext4 /dev/sda1 rw\n"
        .to_vec();
    let cri = {
        use kresidue::cri::proto;
        let sandboxes = proto::ListPodSandboxResponse {
            items: vec![proto::PodSandbox {
                id: "s1".into(),
                metadata: Some(proto::PodSandboxMetadata {
                    name: "web-0".into(),
                    uid: "u1".into(),
                    namespace: "shop".into(),
                    attempt: 0,
                }),
                state: 1,
                ..Default::default()
            }],
        }
        .encode_to_vec();
        let containers = proto::ListContainersResponse {
            containers: vec![proto::Container {
                id: "c1".into(),
                pod_sandbox_id: "s1".into(),
                metadata: Some(proto::ContainerMetadata { name: "app".into(), attempt: 1 }),
                state: 2,
                ..Default::default()
            }],
        }
        .encode_to_vec();
        [vec![sandboxes.len() as u8], sandboxes, containers].concat()
    };
    vec![
        ("kubectl_json", "secrets", secrets),
        ("kubectl_json", "revoked", fixture("secrets-revoked.json")),
        ("fingerprint_file", "fixture", set.to_json()),
        ("bbolt", "meta", fixture("containerd/meta.db")),
        ("bbolt", "snapshots", fixture("containerd/metadata.db")),
        ("containerd_meta", "meta", fixture("containerd/meta.db")),
        ("containerd_meta", "snapshots", fixture("containerd/metadata.db")),
        // Buckets sharing pages, eight levels deep: 40^8 paths in 64 KiB (issue 28).
        ("bbolt", "shared-pages", kresidue::bbolt::write::shared_pages(8, 40)),
        ("bbolt", "libpod", libpod_state()),
        // Many elements naming one record's bytes (issue 46, break 2).
        ("bbolt", "aliased-libpod", aliased(&[b"ctr"])),
        ("containerd_meta", "aliased", aliased(&[b"v1", b"k8s.io", b"containers"])),
        ("containerd_meta", "shared-pages", kresidue::bbolt::write::shared_pages(8, 40)),
        ("oci_spec", "bundle", spec),
        ("crio_docker_json", "crio", crio),
        ("crio_docker_json", "docker", docker),
        ("crio_docker_json", "cri-o-sandbox", cri_o),
        ("crio_docker_json", "layers", br#"[{"id":"l2","parent":"l1"},{"id":"l1"}]"#.to_vec()),
        (
            "crio_docker_json",
            "image-config",
            format!(
                r#"{{"rootfs":{{"type":"layers","diff_ids":["sha256:{}","sha256:{}"]}}}}"#,
                "a".repeat(64),
                "b".repeat(64)
            )
            .into_bytes(),
        ),
        (
            "crio_docker_json",
            "repositories",
            br#"{"Repositories":{"web":{"web:1":"sha256:aa","web@sha256:dd":"sha256:aa"}}}"#
                .to_vec(),
        ),
        (
            "crio_docker_json",
            "images",
            br#"[{"id":"aa","names":["localhost/web:1"],"layer":"l2","big-data-names":["manifest"]}]"#
                .to_vec(),
        ),
        ("scan_state", "two-files", scan_state()),
        ("cri_log", "plain", log),
        ("cri_log", "gzip", gz),
        ("jwt", "service-account", sa),
        ("mountinfo", "kubelet", mountinfo),
        ("cri_responses", "lists", cri),
        (
            "kubectl_pods",
            "list",
            crate::clean::pods_json(&[crate::clean::ApiPod::running("u1", "node-1")]),
        ),
        ("distro_settings", "k3s-config", b"data-dir: /data/k3s # moved\nnode-label:\n  - a=b\n".to_vec()),
        (
            "distro_settings",
            "k0s-unit",
            b"[Service]\nExecStart=/usr/local/bin/k0s controller \\\n --data-dir=/srv/k0s\n".to_vec(),
        ),
        (
            "distro_settings",
            "microk8s-args",
            b"--root ${SNAP_COMMON}/var/lib/containerd\n--state \"$SNAP_COMMON/run\"\n--x ${UNSET}\n".to_vec(),
        ),
    ]
}

#[test]
fn fuzz_corpora_replay_without_panics() {
    if std::env::var_os("KRESIDUE_UPDATE_CORPUS").is_some() {
        for (target, name, bytes) in seeds() {
            fs::create_dir_all(corpus_dir(target)).unwrap();
            fs::write(corpus_dir(target).join(format!("seed-{name}")), bytes).unwrap();
        }
    }
    let mut total = 0;
    for (target, run) in TARGETS {
        let dir = corpus_dir(target);
        let mut inputs: Vec<PathBuf> = fs::read_dir(&dir)
            .unwrap_or_else(|e| {
                panic!("{}: {e} (KRESIDUE_UPDATE_CORPUS=1 writes the seeds)", dir.display())
            })
            .map(|e| e.unwrap().path())
            .collect();
        inputs.sort();
        assert!(!inputs.is_empty(), "{target}: no corpus");
        for input in inputs {
            let bytes = fs::read(&input).unwrap();
            let outcome = std::panic::catch_unwind(|| run(&bytes));
            assert!(outcome.is_ok(), "{target} panics on {}", input.display());
            total += 1;
        }
    }
    assert!(total >= TARGETS.len());
}
