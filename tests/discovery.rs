//! Discovery's own reads of node files (the runtimes' records and databases, read to
//! learn what each dir is) cannot be turned against the scan: a crafted `meta.db` whose
//! buckets share pages costs linear work; record files of tens of MiB cost no more memory
//! than docs/CONTRACT.md's bound; a device or FIFO where a record should be is refused with one
//! error, never read; nothing outside the root is listed through a symlinked dir.
//! Time and memory are the process's own: each run has a generous kill timeout, a
//! `--timeout` it must meet, and its peak RSS measured.

use std::time::Duration;

use serde_json::{json, Value};

use crate::util::*;

const META_DB: &str = "/var/lib/containerd/io.containerd.metadata.v1.bolt/meta.db";
const SNAPSHOTS: &str = "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs";
const CRIO: &str = "/var/lib/containers/storage";
const DOCKER: &str = "/var/lib/docker";
const POD_UID: &str = "8d2f4c6a-1b3e-4f5a-9c7d-2e4f6a8b0c1d";

/// A run killed past this counts as hung: old readers took minutes (or were killed for
/// memory) on what a linear one reads in well under a second.
const GENEROUS: Duration = Duration::from_secs(60);

/// The errors of a report, as (path, message).
fn errors(out: &Out) -> Vec<(String, String)> {
    out.json()["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["path"].as_str().unwrap().to_owned(), e["error"].as_str().unwrap().to_owned()))
        .collect()
}

/// The peak RSS of a run in MiB.
fn rss_mib(out: &Out) -> u64 {
    out.peak_rss_kb.expect("RSS measured") / 1024
}

/// A scan that must meet `--timeout 2s` (its report complete) under the kill timeout.
fn bounded_scan(tree: &NodeTree, extra: &[&str]) -> Out {
    let out = measured_scan(tree, &[&["--timeout", "2s"], extra].concat());
    assert_eq!(out.json()["summary"]["incomplete"], false, "{}", out.stdout_str());
    out
}

/// A scan with four threads under the kill timeout, its peak RSS measured (and shown with
/// `--nocapture`: the figures of `docs/CONTRACT.md`).
#[allow(clippy::print_stderr)]
fn measured_scan(tree: &NodeTree, extra: &[&str]) -> Out {
    let mut args = vec!["--format", "json", "--threads", "4"];
    args.extend_from_slice(extra);
    let out = tree.kr().timeout(GENEROUS).measure_rss().scan(&args);
    out.assert_code(0);
    eprintln!("{}: {:?}, peak RSS {} KiB", args.join(" "), out.elapsed, out.peak_rss_kb.unwrap());
    out
}

/// Item 6: a 64 KiB `meta.db` whose container records all name one page of buckets that
/// all name one page, eight levels deep (40^8 paths), with a snapshotter dir so that
/// discovery reads it too. Each page is read once: the scan completes at once, in a few
/// MiB, and says the pages are shared.
#[test]
fn meta_db_with_shared_pages_is_read_in_linear_time() {
    let tree = NodeTree::new();
    let db = kresidue::bbolt::write::shared_pages(8, 40);
    assert!(db.len() <= 64 << 10, "{} bytes", db.len());
    tree.write(META_DB, &db);
    tree.mkdir(format!("{SNAPSHOTS}/snapshots"));
    let out = bounded_scan(&tree, &[]);
    let errs = errors(&out);
    assert!(
        errs.iter().any(|(p, e)| p == META_DB && e.contains("reached twice")),
        "the shared pages are reported: {errs:?}"
    );
    let rss = rss_mib(&out);
    assert!(rss < 100, "peak RSS {rss} MiB");
}

/// Item 7: CRI-O's `containers.json` of ~30 MiB (records with long lists, as a node with
/// many containers and a hostile one would have) is parsed as it is read: the layer it
/// names is still a container's layer, and memory stays far below the file's size.
#[test]
fn large_crio_records_are_streamed() {
    let tree = NodeTree::new();
    let (layer, cid) = ("a1".repeat(32), "c3".repeat(32));
    let meta = json!({"uid": POD_UID, "name": "app"}).to_string();
    // Numbers in lists: two bytes of JSON each, 32 bytes each as a `serde_json::Value`.
    let filler = format!("[{}0]", "0,".repeat(1 << 20));
    let mut records = String::from("[");
    for i in 0..15 {
        records.push_str(&format!(r#"{{"id":"{i:064x}","layer":"{i:064}","names":{filler}}},"#));
    }
    records.push_str(&json!({"id": cid, "layer": layer, "metadata": meta}).to_string());
    records.push(']');
    assert!(records.len() > 30 << 20, "{}", records.len());
    tree.write(format!("{CRIO}/overlay-containers/containers.json"), records.as_bytes());
    tree.write(format!("{CRIO}/overlay/{layer}/diff/out.txt"), b"a log line\n");
    // Not `--timeout`: parsing 30 MiB takes a debug build's serde_json seconds.
    let out = measured_scan(&tree, &[]);
    assert!(errors(&out).is_empty(), "{:?}", errors(&out));
    let rss = rss_mib(&out);
    assert!(rss < 100, "peak RSS {rss} MiB for a 30 MiB containers.json");
    // What the records say is still read: the layer is the container's.
    let value = String::from_utf8(fake_secret(4711)).unwrap();
    let secrets = [Secret::opaque("shop", "db", &[("password", value.as_bytes())])];
    let file = tree.secrets_file("secrets.json", &secrets);
    tree.write(format!("{CRIO}/overlay/{layer}/diff/env"), format!("DB={value}\n").as_bytes());
    let out = tree.kr().timeout(GENEROUS).scan(&["--secrets", path_arg(&file), "--format", "json"]);
    out.assert_code(1);
    let f: Vec<Value> = out.json()["findings"].as_array().unwrap().clone();
    assert!(
        f.iter().any(|f| f["category"] == "container-layer"
            && f["container"]["id"] == cid.as_str()
            && f["pod"]["uid"] == POD_UID),
        "{}",
        out.stdout_str()
    );
}

/// Item 7: four task bundles whose `config.json` is just under the 16 MiB a spec is read
/// whole up to, read by four threads at once: each spec is held as its bytes only (its
/// annotations picked as it is parsed), not as a `serde_json::Value` many times its size.
#[test]
fn large_bundle_specs_cost_their_bytes_only() {
    let tree = NodeTree::new();
    let annotations = json!({
        "io.kubernetes.cri.container-name": "app",
        "io.kubernetes.cri.sandbox-uid": POD_UID,
    });
    let filler = format!("[{}0]", "0,".repeat((16 << 20) / 2 - 4096));
    for i in 0..4 {
        let spec = format!(
            r#"{{"ociVersion":"1.0.2","process":{{"args":{filler}}},"annotations":{annotations}}}"#
        );
        assert!(spec.len() < 16 << 20 && spec.len() > 15 << 20);
        tree.write(
            format!("/run/containerd/io.containerd.runtime.v2.task/k8s.io/{i:064x}/config.json"),
            spec.as_bytes(),
        );
    }
    // Not `--timeout`: searching 64 MiB takes a debug build seconds.
    let out = measured_scan(&tree, &[]);
    assert!(errors(&out).is_empty(), "{:?}", errors(&out));
    let rss = rss_mib(&out);
    assert!(rss < 150, "peak RSS {rss} MiB for four 16 MiB specs");
}

/// Item 7: `--max-file-size` bounds discovery's reads too: a 128 MiB `meta.db` (sparse)
/// with a snapshotter dir is not read whole to classify snapshots, and the scan lists it
/// as too large.
#[test]
fn max_file_size_bounds_discovery() {
    let tree = NodeTree::new();
    let db = kresidue::bbolt::write::shared_pages(1, 2);
    tree.write(META_DB, &db);
    std::fs::File::options()
        .write(true)
        .open(tree.host(META_DB))
        .unwrap()
        .set_len(128 << 20)
        .unwrap();
    tree.mkdir(format!("{SNAPSHOTS}/snapshots/1/fs"));
    let out = bounded_scan(&tree, &["--max-file-size", "1M"]);
    let errs = errors(&out);
    assert!(errs.iter().any(|(p, e)| p == META_DB && e.contains("--max-file-size")), "{errs:?}");
    let rss = rss_mib(&out);
    assert!(rss < 100, "peak RSS {rss} MiB: the 128 MiB meta.db was read");
}

/// Item 8: devices and FIFOs where discovery reads a record (`meta.db`, the snapshotter's
/// `metadata.db`, `containers.json`, `config.v2.json`, `mount-id`, `etc/hostname`) are
/// refused after `fstat`, each with one error naming what it is; `/dev/zero` as
/// `meta.db` is not read at all.
#[test]
#[allow(clippy::print_stderr)]
fn devices_and_fifos_are_not_read_during_discovery() {
    use nix::sys::stat::{makedev, mknod, Mode, SFlag};
    if !is_root() {
        eprintln!("skipped: mknod needs root");
        return;
    }
    let tree = NodeTree::new();
    let zero = |node: &str| {
        let host = tree.host(node);
        std::fs::create_dir_all(host.parent().unwrap()).unwrap();
        mknod(&host, SFlag::S_IFCHR, Mode::from_bits_truncate(0o644), makedev(1, 5)).unwrap();
    };
    let cid = "c3".repeat(32);
    zero(META_DB);
    zero(&format!("{SNAPSHOTS}/metadata.db"));
    tree.mkdir(format!("{SNAPSHOTS}/snapshots/1/fs"));
    tree.fifo(format!("{CRIO}/overlay-containers/containers.json"));
    tree.mkdir(format!("{CRIO}/overlay/{}/diff", "a1".repeat(32)));
    tree.fifo(format!("{DOCKER}/containers/{cid}/config.v2.json"));
    zero(&format!("{DOCKER}/image/overlay2/layerdb/mounts/{cid}/mount-id"));
    std::fs::remove_file(tree.host("/etc/hostname")).unwrap();
    zero("/etc/hostname");
    let out = bounded_scan(&tree, &[]);
    let errs = errors(&out);
    let refused = |path: String, kind: &str| {
        let want = format!("not a regular file ({kind})");
        assert!(errs.iter().any(|(p, e)| *p == path && *e == want), "{path}: {want}\n{errs:?}");
    };
    refused(format!("{SNAPSHOTS}/metadata.db"), "character device");
    refused(format!("{CRIO}/overlay-containers/containers.json"), "FIFO");
    refused(format!("{DOCKER}/containers/{cid}/config.v2.json"), "FIFO");
    refused(format!("{DOCKER}/image/overlay2/layerdb/mounts/{cid}/mount-id"), "character device");
    assert_eq!(out.json()["node"], Value::Null, "etc/hostname is /dev/zero");
    let rss = rss_mib(&out);
    assert!(rss < 100, "peak RSS {rss} MiB: /dev/zero was read");
}

/// Item 8: a record larger than its reader's cap is refused with its size limit.
#[test]
fn oversized_mount_id_is_refused() {
    let tree = NodeTree::new();
    let cid = "c3".repeat(32);
    let node = format!("{DOCKER}/image/overlay2/layerdb/mounts/{cid}/mount-id");
    tree.write(&node, &filler(7, 8192));
    tree.mkdir(format!("{DOCKER}/overlay2/{}/diff", "a1".repeat(32)));
    let out = bounded_scan(&tree, &[]);
    let errs = errors(&out);
    assert!(errs.contains(&(node, "larger than 4096 bytes; not read".to_owned())), "{errs:?}");
}

/// The distinctive name planted outside the root.
const OUTSIDE_NAME: &str = "zz-outside-the-root-7f3a9c";

/// Plants `outside/<dir>/OUTSIDE_NAME/` (a volume dir, with a file of that name too).
fn plant_outside(tree: &NodeTree, dir: &str) -> std::path::PathBuf {
    let target = tree.outside().join(dir);
    let vol = target.join(OUTSIDE_NAME);
    std::fs::create_dir_all(vol.join(CURRENT_TS)).unwrap();
    std::fs::write(vol.join(CURRENT_TS).join(OUTSIDE_NAME), b"outside").unwrap();
    std::os::unix::fs::symlink(CURRENT_TS, vol.join("..data")).unwrap();
    std::os::unix::fs::symlink(format!("..data/{OUTSIDE_NAME}"), vol.join(OUTSIDE_NAME)).unwrap();
    std::fs::write(target.join(format!("{OUTSIDE_NAME}-file")), b"outside").unwrap();
    target
}

/// Asserts that no stream of `out` names what lies outside the root.
fn names_nothing_outside(out: &Out) {
    for (name, s) in [("stdout", out.stdout_str()), ("stderr", out.stderr_str())] {
        assert!(
            !s.contains(OUTSIDE_NAME),
            "`{}`: {name} names a file outside the root:\n{s}",
            out.args.join(" ")
        );
    }
}

/// 18c: a pod whose `volumes/kubernetes.io~secret` is a symlink to a dir outside the
/// root: discovery lists nothing there (every listing goes through the root's
/// descriptors), so no report, table or error names what it holds.
#[test]
fn symlinked_volume_dir_lists_nothing_outside() {
    let tree = NodeTree::new();
    let pod = tree.pod(POD_UID);
    let target = plant_outside(&tree, "secrets");
    tree.symlink(pod.path("volumes/kubernetes.io~secret"), &target);
    pod.file("volumes/kubernetes.io~empty-dir/cache/x", b"cache\n");
    for format in ["json", "table"] {
        let out = tree.kr().scan(&["--format", format, "-vv"]);
        out.assert_code(0);
        names_nothing_outside(&out);
    }
    names_nothing_outside(&clean_dead(&tree, &[], "json"));
    // What discovery learned of the pod's volumes (the map its files are named by) holds
    // nothing listed outside.
    let root = kresidue::sys::RootDir::open(std::path::Path::new(tree.root_arg())).unwrap();
    let layout = kresidue::sites::Layout::defaults();
    for scope in kresidue::sites::discover(&root, &layout, &mut Vec::new()).scopes {
        if let kresidue::sites::ScopeKind::Pod { volumes, .. } = scope.kind {
            assert!(volumes.is_empty(), "volumes listed outside the root: {volumes:?}");
        }
    }
}

/// `clean` (a dry run) with a runtime that knows no pod of the tree: every pod dir is
/// dead and old enough, so all it surveyed is in the plan.
fn clean_dead(tree: &NodeTree, extra: &[&str], format: &str) -> Out {
    let server = crate::cri::Server::grpc(crate::cri::fake());
    let ep = server.endpoint();
    let lock = tree.work("clean.lock");
    let mut args = vec!["clean", "--root", tree.root_arg(), "--cri", &ep, "--min-age", "0s"];
    args.extend_from_slice(&["--lock", path_arg(&lock), "--format", format]);
    args.extend_from_slice(extra);
    tree.kr().run(&args)
}

/// 18c: kubelet's `pods` dir a symlink out of the root: `clean` surveys no pod there
/// (listed through the root's descriptors, never by host path), and names none.
#[test]
fn symlinked_pods_dir_lists_nothing_outside() {
    let tree = NodeTree::with_kubelet_dir("/var/lib/kubelet2");
    let target = plant_outside(&tree, "pods");
    std::fs::remove_dir(tree.host("/var/lib/kubelet2/pods")).unwrap();
    tree.symlink("/var/lib/kubelet2/pods", &target);
    for format in ["json", "table"] {
        let out = clean_dead(&tree, &["--kubelet-dir", "/var/lib/kubelet2"], format);
        names_nothing_outside(&out);
        let out = tree.kr().scan(&["--kubelet-dir", "/var/lib/kubelet2", "--format", format]);
        names_nothing_outside(&out);
    }
    // What clean's survey found (the pods its plan is made of) is nothing outside.
    let root = kresidue::sys::RootDir::open(std::path::Path::new(tree.root_arg())).unwrap();
    let (pods, _) = kresidue::clean::survey(
        &root,
        std::path::Path::new("/var/lib/kubelet2"),
        &[],
        &|_: &str| false,
    );
    assert!(pods.is_empty(), "pods surveyed outside the root: {pods:?}");
}

/// Image names on layers are bounded (issue 30 review): 4,096 containers/storage images of
/// 256 names each on one top layer, and one Docker image of 65,536 tags over 64 layers,
/// with findings in those layers: each finding names at most 256 images, and the scan
/// stays within a few tens of MiB.
#[test]
fn image_names_on_layers_are_bounded() {
    let tree = NodeTree::new();
    let value = String::from_utf8(fake_secret(6101)).unwrap();
    let secrets = vec![Secret::opaque("shop", "db", &[("v", value.as_bytes())])];
    tree.guard_secrets(&secrets);
    let graph = "/var/lib/containers/storage";
    let top = "ab".repeat(32);
    let images: Vec<serde_json::Value> = (0..4096)
        .map(|i| {
            let names: Vec<String> = (0..256).map(|n| format!("localhost/i{i}:{n}")).collect();
            serde_json::json!({"id": format!("{i:064x}"), "names": names, "layer": top})
        })
        .collect();
    let images = serde_json::to_vec(&images).unwrap();
    tree.write(format!("{graph}/overlay-images/images.json"), &images);
    for f in 0..8 {
        tree.write(format!("{graph}/overlay/{top}/diff/f{f}"), value.as_bytes());
    }
    let store = "/var/lib/docker/image/overlay2";
    let img = "cd".repeat(32);
    let refs: serde_json::Map<String, serde_json::Value> =
        (0..65_536).map(|n| (format!("web:{n}"), format!("sha256:{img}").into())).collect();
    let repos = serde_json::json!({"Repositories": {"web": refs}});
    tree.write(format!("{store}/repositories.json"), repos.to_string().as_bytes());
    let diffs: Vec<String> = (0..64u64).map(|d| format!("sha256:{d:064x}")).collect();
    let config = serde_json::json!({"rootfs": {"type": "layers", "diff_ids": diffs}});
    tree.write(format!("{store}/imagedb/content/sha256/{img}"), config.to_string().as_bytes());
    // Only the bottom layer's chain id is its diff id; its dir holds the values.
    let bottom = format!("{:064x}", 0);
    tree.write(format!("{store}/layerdb/sha256/{bottom}/cache-id"), b"base");
    for f in 0..8 {
        tree.write(format!("/var/lib/docker/overlay2/base/diff/f{f}"), value.as_bytes());
    }
    let file = tree.secrets_file("secrets.json", &secrets);
    let args = ["--secrets", path_arg(&file), "--format", "json", "--fail-on", "never"];
    let out = tree.kr().timeout(GENEROUS).measure_rss().scan(&args);
    out.assert_code(0);
    let found = out.findings();
    assert_eq!(found.len(), 16, "{}", out.stdout_str().len());
    for f in &found {
        let n = f.raw["images"].as_array().map_or(0, Vec::len);
        assert_eq!(n, 256, "{}: {n} names", f.path);
    }
    let rss = rss_mib(&out);
    assert!(rss < 200, "peak RSS {rss} MiB");
}

/// Issue 46, break 2: a runtime database whose bucket of containers holds two million
/// elements that all name one record (16 bytes each: a 32 MiB file), as containerd's
/// `meta.db`, Docker's own containerd's and Podman's `bolt_state.db`. A record is read
/// once: the elements share bytes, which no bbolt page does, and the bucket is reported
/// as damaged; peak RSS stays under 200 MiB (it was 2.5 GB for 62 MiB). The same file
/// padded past the size a database is read whole up to is searched as a stream, and an
/// `errors` entry says its matches are not attributed.
#[test]
fn records_naming_one_key_are_read_once() {
    let id = "c3".repeat(32);
    let record: &[(&[u8], &[u8])] = &[
        (b"image", b"docker.io/library/busybox:latest"),
        (b"snapshotter", b"overlayfs"),
        (b"snapshotKey", id.as_bytes()),
        (b"state", br#"{"state":6}"#),
    ];
    let n = 1 << 21;
    let containerd = |ns: &[u8]| {
        kresidue::bbolt::write::aliased(&[b"v1", ns, b"containers"], n, id.as_bytes(), record)
    };
    let docker_meta = "/var/lib/docker/containerd/daemon/io.containerd.metadata.v1.bolt/meta.db";
    let files = [
        (META_DB, containerd(b"k8s.io"), true),
        (docker_meta, containerd(b"moby"), true),
        (
            "/var/lib/containers/storage/libpod/bolt_state.db",
            kresidue::bbolt::write::aliased(&[b"ctr"], n, id.as_bytes(), record),
            false,
        ),
    ];
    for (path, db, reported) in &files {
        assert!(db.len() > 32 << 20, "{} bytes", db.len());
        let tree = NodeTree::new();
        tree.write(path, db);
        tree.mkdir(format!("{SNAPSHOTS}/snapshots/1/fs"));
        tree.mkdir("/var/lib/containers/storage/overlay-containers");
        let out = measured_scan(&tree, &[]);
        let errs = errors(&out);
        if *reported {
            assert!(
                errs.iter().any(|(p, e)| p == path && e.contains("shares bytes")),
                "{path}: {errs:?}"
            );
        }
        let rss = rss_mib(&out);
        assert!(rss < 200, "{path}: peak RSS {rss} MiB");
    }
    // Ten times over: past the whole-read size, streamed and said so.
    let tree = NodeTree::new();
    tree.write(META_DB, &files[0].1);
    std::fs::File::options()
        .write(true)
        .open(tree.host(META_DB))
        .unwrap()
        .set_len(10 * files[0].1.len() as u64)
        .unwrap();
    tree.mkdir(format!("{SNAPSHOTS}/snapshots/1/fs"));
    let out = measured_scan(&tree, &[]);
    let errs = errors(&out);
    assert!(
        errs.iter().any(|(p, e)| p == META_DB && e.contains("not attributed to containers")),
        "{errs:?}"
    );
    let rss = rss_mib(&out);
    assert!(rss < 200, "peak RSS {rss} MiB");
}

/// Issue 46, break 2: a `meta.db` of 100,000 distinct container records (a crafted file of
/// tiny records; a node runs a few hundred) holds 16,384 of them, says the rest were not
/// read, and the snapshot dirs the others would name are not called orphans.
#[test]
fn meta_db_records_past_the_cap_are_reported() {
    use kresidue::bbolt::write::{Node, Writer};
    use std::collections::BTreeMap;
    let data = |s: &str| Node::Data(s.as_bytes().to_vec());
    let containers: BTreeMap<Vec<u8>, Node> = (0..100_000u32)
        .map(|i| {
            let record = BTreeMap::from([
                (b"snapshotter".to_vec(), data("overlayfs")),
                (b"snapshotKey".to_vec(), data(&format!("{i:064x}"))),
            ]);
            (format!("{i:064x}").into_bytes(), Node::Bucket(record))
        })
        .collect();
    let ns = BTreeMap::from([(b"containers".to_vec(), Node::Bucket(containers))]);
    let v1 = BTreeMap::from([(b"k8s.io".to_vec(), Node::Bucket(ns))]);
    let root = BTreeMap::from([(b"v1".to_vec(), Node::Bucket(v1))]);
    let db = Writer::new(4096, true, 2000).finish(&root, &[], 0);
    let tree = NodeTree::new();
    tree.write(META_DB, &db);
    tree.mkdir(format!("{SNAPSHOTS}/snapshots/1/fs"));
    let out = measured_scan(&tree, &[]);
    let errs = errors(&out);
    assert!(
        errs.iter().any(|(p, e)| p == META_DB && e.contains("more than 16384 container records")),
        "{errs:?}"
    );
    let rss = rss_mib(&out);
    assert!(rss < 200, "peak RSS {rss} MiB");
}

/// Issue 46, break 3: image names are shared, not copied per layer. containers/storage's
/// `images.json` and Docker's `repositories.json` give 4 images 256 names of 4 KiB (no
/// reference is that long: dropped) and 16 images 256 names of 500 bytes, all on one
/// 256-layer chain whose every layer holds a value. Each finding shows its layer's first
/// 256 names, no 4 KiB one, and peak RSS stays under 200 MiB (it was 1 GB for the 4 KiB
/// names alone).
#[test]
fn image_names_on_deep_chains_are_shared() {
    let tree = NodeTree::new();
    let value = String::from_utf8(fake_secret(6102)).unwrap();
    let secrets = vec![Secret::opaque("shop", "db", &[("v", value.as_bytes())])];
    tree.guard_secrets(&secrets);
    let name = |i: usize, n: usize, len: usize| {
        let head = format!("localhost/i{i}/n{n}:");
        format!("{head}{}", "x".repeat(len - head.len()))
    };
    let named: Vec<(usize, usize)> =
        (0..4).map(|i| (i, 4096)).chain((4..20).map(|i| (i, 500))).collect();
    // containers/storage: every image's top is the chain's top layer.
    let graph = "/var/lib/containers/storage";
    let layer = |d: usize| format!("{d:064x}");
    let top = layer(255);
    let images: Vec<serde_json::Value> = named
        .iter()
        .map(|&(i, len)| {
            let names: Vec<String> = (0..256).map(|n| name(i, n, len)).collect();
            json!({"id": format!("{i:064x}"), "names": names, "layer": top})
        })
        .collect();
    tree.write(
        format!("{graph}/overlay-images/images.json"),
        &serde_json::to_vec(&images).unwrap(),
    );
    let layers: Vec<serde_json::Value> = (0..256)
        .map(|d| match d {
            0 => json!({"id": layer(d)}),
            _ => json!({"id": layer(d), "parent": layer(d - 1)}),
        })
        .collect();
    tree.write(
        format!("{graph}/overlay-layers/layers.json"),
        &serde_json::to_vec(&layers).unwrap(),
    );
    for d in 0..256 {
        tree.write(format!("{graph}/overlay/{}/diff/f", layer(d)), value.as_bytes());
    }
    // Docker: every image's config lists the same 256 diff ids.
    let store = "/var/lib/docker/image/overlay2";
    let mut repos = serde_json::Map::new();
    for &(i, len) in &named {
        let refs: serde_json::Map<String, serde_json::Value> =
            (0..256).map(|n| (name(i, n, len), format!("sha256:{i:064x}").into())).collect();
        repos.insert(format!("r{i}"), refs.into());
    }
    let repos = json!({"Repositories": repos});
    tree.write(format!("{store}/repositories.json"), repos.to_string().as_bytes());
    let diffs: Vec<String> = (0..256u64).map(|d| format!("sha256:{d:064x}")).collect();
    let config = json!({"rootfs": {"type": "layers", "diff_ids": diffs}}).to_string();
    let chain = kresidue::node::other_runtimes::docker_chain_ids(&mut config.as_bytes()).unwrap();
    for &(i, _) in &named {
        tree.write(format!("{store}/imagedb/content/sha256/{i:064x}"), config.as_bytes());
    }
    for (d, c) in chain.iter().enumerate() {
        tree.write(format!("{store}/layerdb/sha256/{c}/cache-id"), format!("d{d}").as_bytes());
        tree.write(format!("/var/lib/docker/overlay2/d{d}/diff/f"), value.as_bytes());
    }
    let file = tree.secrets_file("secrets.json", &secrets);
    let args = ["--secrets", path_arg(&file), "--format", "json", "--fail-on", "never"];
    let out = tree.kr().timeout(GENEROUS).measure_rss().scan(&args);
    out.assert_code(0);
    let found = out.findings();
    assert_eq!(found.len(), 512, "{}", out.stdout_str().len());
    for f in &found {
        let names = f.raw["images"].as_array().expect("images named");
        assert_eq!(names.len(), 256, "{}", f.path);
        assert!(names.iter().all(|n| n.as_str().unwrap().len() == 500), "{}", f.path);
    }
    let rss = rss_mib(&out);
    assert!(rss < 200, "peak RSS {rss} MiB");
}

/// Issue 46, break 7: a `containers.json` of 20,001 records is read up to the 16,384 kept,
/// and says so in `errors`; the last container's writable layer and its dir, which no
/// record read names, are unknown (a `container-layer` whose owner is not known, an env
/// whose container may live), never an image's layer or a dead container's.
#[test]
fn container_records_past_the_cap_are_reported_and_unknown() {
    let tree = NodeTree::new();
    let value = String::from_utf8(fake_secret(6103)).unwrap();
    let secrets = vec![Secret::opaque("shop", "db", &[("v", value.as_bytes())])];
    let records: Vec<serde_json::Value> = (0..20_001u32)
        .map(|i| json!({"id": format!("{i:064x}"), "layer": format!("{:064x}", i + (1 << 20))}))
        .collect();
    let records = serde_json::to_vec(&records).unwrap();
    tree.write(format!("{CRIO}/overlay-containers/containers.json"), &records);
    let (last, layer) = (format!("{:064x}", 20_000), format!("{:064x}", 20_000 + (1 << 20)));
    tree.write(format!("{CRIO}/overlay/{layer}/diff/env"), format!("V={value}\n").as_bytes());
    let spec = format!(r#"{{"process":{{"env":["V={value}"]}}}}"#);
    tree.write(format!("{CRIO}/overlay-containers/{last}/userdata/config.json"), spec.as_bytes());
    let file = tree.secrets_file("secrets.json", &secrets);
    let args = ["--secrets", path_arg(&file), "--format", "json", "--fail-on", "never"];
    let out = tree.kr().timeout(GENEROUS).scan(&args);
    out.assert_code(0);
    let errs = errors(&out);
    let json_path = format!("{CRIO}/overlay-containers/containers.json");
    assert!(
        errs.iter()
            .any(|(p, e)| *p == json_path && e.contains("more container records than the 16384")),
        "{errs:?}"
    );
    let found = out.findings();
    assert_eq!(found.len(), 2, "{}", out.stdout_str());
    for f in &found {
        assert_ne!(f.raw["category"], "dead-container", "{}", f.path);
        assert_ne!(f.raw["category"], "image-layer", "{}", f.path);
        assert_ne!(f.raw["container"]["live"], false, "{}", f.path);
    }
}

/// Issue 46, break 7 with other numbers: Docker's `repositories.json` with more
/// references than are kept (65,536) says so in `errors`, and an image only the references
/// past the cap name is shown with no name, never with another's.
#[test]
fn image_references_past_the_cap_are_reported() {
    let tree = NodeTree::new();
    let value = String::from_utf8(fake_secret(6107)).unwrap();
    let secrets = vec![Secret::opaque("shop", "db", &[("v", value.as_bytes())])];
    let n = 70_000u32;
    let refs: serde_json::Map<String, Value> =
        (0..n).map(|i| (format!("r/{i}:1"), json!(format!("sha256:{i:064x}")))).collect();
    let repos = json!({"Repositories": {"r": refs}});
    let store = format!("{DOCKER}/image/overlay2");
    tree.write(format!("{store}/repositories.json"), &serde_json::to_vec(&repos).unwrap());
    // The last image's config holds the value.
    let config = format!("{store}/imagedb/content/sha256/{:064x}", n - 1);
    tree.write(&config, format!(r#"{{"config":{{"Env":["V={value}"]}}}}"#).as_bytes());
    let file = tree.secrets_file("secrets.json", &secrets);
    let args = ["--secrets", path_arg(&file), "--format", "json", "--fail-on", "never"];
    let out = tree.kr().timeout(GENEROUS).scan(&args);
    out.assert_code(0);
    let errs = errors(&out);
    let repos_path = format!("{store}/repositories.json");
    assert!(
        errs.iter()
            .any(|(p, e)| *p == repos_path && e.contains("more image references than the 65536")),
        "{errs:?}"
    );
    let found = out.findings();
    assert_eq!(found.len(), 1, "{}", out.stdout_str());
    assert_eq!(found[0].raw["category"], "image-config");
    assert!(found[0].raw["images"].is_null(), "{}", out.stdout_str());
}

/// Issue 46 review, break 4: a container dir of 100,000 entries (a crafted dir; a
/// container's holds a dozen) is one scope, walked like any dir: discovery spends nothing
/// per entry, the scan meets its `--timeout` and finds the kubelet Secret beside it, in
/// the memory a small node takes.
#[test]
fn a_container_dir_of_many_entries_is_one_scope() {
    let tree = NodeTree::new();
    let (value, secrets) = db_password(&tree, 7611);
    tree.pod(POD_UID).secret_volume("db").key("password", value.as_bytes());
    let file = tree.secrets_file("secrets.json", &secrets);
    let cid = "e7".repeat(32);
    let record = json!({"Name": "/job", "State": {"Running": false, "ExitCode": 0}});
    tree.write(format!("{DOCKER}/containers/{cid}/config.v2.json"), record.to_string().as_bytes());
    let dir = tree.host(format!("{DOCKER}/containers/{cid}/checkpoints"));
    std::fs::create_dir_all(&dir).unwrap();
    let many = tree.host(format!("{DOCKER}/containers/{cid}"));
    for i in 0..100_000 {
        std::fs::File::create(many.join(format!("f{i}"))).unwrap();
    }
    let args = ["--secrets", path_arg(&file), "--timeout", "30s", "--fail-on", "never", "-vv"];
    let out = measured_scan(&tree, &args);
    assert_eq!(out.json()["summary"]["incomplete"], false, "{}", out.stdout_str());
    let found: Vec<String> = out.findings().into_iter().map(|f| f.path).collect();
    let secret = tree.pod(POD_UID).path("volumes/kubernetes.io~secret/db/password");
    assert_eq!(found, vec![secret], "{}", out.stdout_str());
    let err = out.stderr_str();
    let scopes =
        err.lines().find_map(|l| l.strip_suffix(" scopes to walk:")?.split(' ').next_back());
    let scopes: usize = scopes.and_then(|n| n.parse().ok()).expect("-vv tells the scopes");
    assert!(scopes < 10, "{scopes} scopes");
    let rss = rss_mib(&out);
    assert!(rss < 40, "peak RSS {rss} MiB");
}
