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
    for scope in kresidue::sites::discover(&root, &layout, &mut Vec::new()) {
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
