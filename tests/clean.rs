//! `kresidue clean` against the fake CRI server of `cri.rs`: a pod whose sandbox is ready,
//! one whose sandbox is NOTREADY (both live) and pods the runtime has no sandbox for.
//! Only the last are ever planned, and only their secret-bearing dirs, then their pod
//! dirs; `--apply` removes exactly that, journals it, and a second run has nothing to do.
//! Hostile turns (a volume swapped for a symlink after the plan, a bind mount, two runs
//! at once, a runtime that cannot be asked) leave everything in place. Mount tests need
//! root (CI runs as root) and say they are skipped otherwise.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::cri::{fake, mount, Server, GONE_UID, NOTREADY_UID, READY_UID};
use crate::util::*;

/// A second pod with no sandbox, whose dir holds more than kubelet's bookkeeping.
pub(crate) const KEPT_UID: &str = "44444444-0000-4000-8000-000000000004";

/// The node: every pod has a secret volume, a projected token and a subPath copy of the
/// value; the gone pod also a CSI volume and a symlink in its volume to a file outside
/// the root; the kept pod an emptyDir with a cache file.
pub(crate) fn node() -> (NodeTree, String, Vec<String>) {
    let tree = NodeTree::new();
    let (value, secrets) = db_password(&tree, 6101);
    for uid in [READY_UID, NOTREADY_UID, GONE_UID, KEPT_UID] {
        let pod = tree.pod(uid);
        pod.secret_volume("db").key("password", value.as_bytes());
        pod.projected_volume("token").key("token", format!("token: {value}").as_bytes());
        pod.subpath("db", "app", 0, value.as_bytes());
        pod.file("containers/app/1a2b3c4d", b"");
    }
    tree.pod(GONE_UID).csi_volume("vault").key("password", value.as_bytes());
    std::fs::write(tree.outside().join("precious.txt"), b"not kresidue's to remove\n").unwrap();
    let gone = tree.pod(GONE_UID);
    tree.symlink(
        gone.path("volumes/kubernetes.io~secret/db/escape"),
        tree.outside().join("precious.txt"),
    );
    tree.pod(KEPT_UID).file("volumes/kubernetes.io~empty-dir/cache/data.bin", b"cache");
    let file = tree.secrets_file("secrets.json", &secrets);
    backdate_pods(&tree);
    // The API server's witness: the two pods the runtime has sandboxes for run on node-1.
    let pods = tree.work("pods.json");
    let live = [ApiPod::running(READY_UID, "node-1"), ApiPod::running(NOTREADY_UID, "node-1")];
    std::fs::write(&pods, pods_json(&live)).unwrap();
    let args = vec![
        "--pods".to_owned(),
        path_arg(&pods).to_owned(),
        "--secrets".to_owned(),
        path_arg(&file).to_owned(),
        "--lock".to_owned(),
        path_arg(&tree.work("lock")).to_owned(),
        "--journal".to_owned(),
        path_arg(&tree.work("journal.jsonl")).to_owned(),
    ];
    (tree, value, args)
}

/// A pod as the API server lists it (`kubectl get pods -A -o json`).
#[derive(Clone)]
pub(crate) struct ApiPod {
    pub(crate) uid: String,
    pub(crate) node: String,
    /// `Running` (its containers run), `Pending` (waiting for a volume: no sandbox yet), …
    pub(crate) phase: &'static str,
}

impl ApiPod {
    pub(crate) fn running(uid: &str, node: &str) -> ApiPod {
        ApiPod { uid: uid.into(), node: node.into(), phase: "Running" }
    }

    pub(crate) fn pending(uid: &str, node: &str) -> ApiPod {
        ApiPod { uid: uid.into(), node: node.into(), phase: "Pending" }
    }
}

/// Sets every pod dir's mtime a minute back, as a pod dir is older than the API server's
/// list taken now (a pod dir modified after the list is never touched).
pub(crate) fn backdate_pods(tree: &NodeTree) {
    let pods = tree.host(format!("{}/pods", tree.kubelet_dir()));
    let then = std::time::SystemTime::now() - Duration::from_secs(60);
    for e in std::fs::read_dir(pods).unwrap() {
        std::fs::File::open(e.unwrap().path()).unwrap().set_modified(then).unwrap();
    }
}

/// `kubectl get pods -A -o json` for `pods`: a List of Pods with the fields kubectl
/// prints (a running pod's containers running, a pending pod's waiting).
pub(crate) fn pods_json(pods: &[ApiPod]) -> Vec<u8> {
    // The times kubectl shows: the list was taken just now.
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let items: Vec<Value> = pods
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let running = p.phase == "Running";
            let state = if running {
                serde_json::json!({ "running": { "startedAt": now } })
            } else {
                serde_json::json!({ "waiting": { "reason": "ContainerCreating" } })
            };
            serde_json::json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": format!("pod-{i}"),
                    "namespace": "shop",
                    "uid": p.uid,
                    "creationTimestamp": now,
                },
                "spec": { "nodeName": p.node, "containers": [{ "name": "app", "image": "busybox" }] },
                "status": {
                    "phase": p.phase,
                    "conditions": [{ "type": "PodScheduled", "status": "True", "lastTransitionTime": now }],
                    "containerStatuses": [{ "name": "app", "ready": running, "restartCount": 0, "state": state }],
                },
            })
        })
        .collect();
    serde_json::to_vec_pretty(&serde_json::json!({
        "apiVersion": "v1", "kind": "List", "metadata": { "resourceVersion": "" }, "items": items,
    }))
    .unwrap()
}

/// `kresidue clean --root R --cri EP ARGS EXTRA --format json`.
pub(crate) fn clean(tree: &NodeTree, server: &Server, args: &[String], extra: &[&str]) -> Out {
    let ep = server.endpoint();
    let mut full = vec!["clean", "--root", tree.root_arg(), "--cri", &ep, "--format", "json"];
    full.extend(args.iter().map(String::as_str));
    full.extend_from_slice(extra);
    tree.kr().run(&full)
}

/// The actions of a clean report as (action, path relative to the pod dirs or container
/// id, status, unmount).
pub(crate) fn actions(report: &Value) -> Vec<(String, String, String)> {
    report["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let what = match a["path"].as_str() {
                Some(p) => p.split_once("/pods/").map_or(p, |(_, rest)| rest).to_owned(),
                None => a["container"]["id"].as_str().unwrap().to_owned(),
            };
            (
                a["action"].as_str().unwrap().to_owned(),
                what,
                a["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

pub(crate) fn planned_for_gone(status: &str) -> Vec<(String, String, String)> {
    let a = |action: &str, rel: &str| {
        (action.to_owned(), format!("{GONE_UID}{rel}"), status.to_owned())
    };
    vec![
        a("remove-volume", "/volumes/kubernetes.io~secret/db"),
        a("remove-volume", "/volumes/kubernetes.io~projected/token"),
        a("remove-volume", "/volumes/kubernetes.io~csi/vault/mount"),
        a("remove-subpath", "/volume-subpaths/db/app/0"),
        a("remove-pod-dir", ""),
    ]
}

pub(crate) fn journal(tree: &NodeTree) -> Vec<Value> {
    std::fs::read_to_string(tree.work("journal.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The dry run plans the gone pod's secret volumes, subPath copy and pod dir, and nothing
/// of the live pods (ready or not) or of a pod dir holding other data (its volumes, yes;
/// the dir itself, no); it changes nothing. Pods younger than --min-age (default 1h) are
/// not planned at all, nor removed with --apply.
#[test]
fn dry_run_plans_only_provably_orphaned_residue() {
    let (tree, _, args) = node();
    let server = Server::grpc(fake());
    let before = tree.digest();
    let young = clean(&tree, &server, &args, &[]);
    assert_eq!(young.code, 0, "{}", young.stderr_str());
    let report = young.json.as_ref().unwrap();
    assert_eq!(report["schema"], "kresidue/clean/v1");
    assert_eq!(report["applied"], false);
    assert!(actions(report).is_empty(), "{report:#}");
    let reasons: Vec<&str> =
        report["left"].as_array().unwrap().iter().map(|l| l["reason"].as_str().unwrap()).collect();
    assert!(reasons.iter().any(|r| r.contains("--min-age")), "{reasons:?}");
    assert!(reasons.iter().any(|r| r.contains("has a sandbox (not ready)")), "{reasons:?}");

    let young = clean(&tree, &server, &args, &["--apply"]);
    assert_eq!(young.code, 0, "{}", young.stderr_str());
    assert!(actions(young.json.as_ref().unwrap()).is_empty());
    before.assert_same(&tree.digest(), "clean --apply (every pod too young)");

    let out = clean(&tree, &server, &args, &["--min-age", "0s"]);
    assert_eq!(out.code, 0, "{}", out.stderr_str());
    let report = out.json.as_ref().unwrap();
    let mut want = planned_for_gone("planned");
    want.extend([
        (
            "remove-volume".into(),
            format!("{KEPT_UID}/volumes/kubernetes.io~secret/db"),
            "planned".into(),
        ),
        (
            "remove-volume".into(),
            format!("{KEPT_UID}/volumes/kubernetes.io~projected/token"),
            "planned".into(),
        ),
        ("remove-subpath".into(), format!("{KEPT_UID}/volume-subpaths/db/app/0"), "planned".into()),
    ]);
    let mut got = actions(report);
    got.sort();
    want.sort();
    assert_eq!(got, want, "{report:#}");
    let secrets: u64 =
        report["actions"].as_array().unwrap().iter().map(|a| a["secrets"].as_u64().unwrap()).sum();
    assert_eq!(secrets, 7, "values in the gone pod's 4 and the kept pod's 3 places: {report:#}");
    assert_eq!(report["summary"]["secrets"], 7);
    // What is left is the live pods', each with why.
    for l in report["left"].as_array().unwrap() {
        let path = l["path"].as_str().unwrap();
        assert!(path.contains(READY_UID) || path.contains(NOTREADY_UID), "{l:#}");
        assert!(l["reason"].as_str().unwrap().contains("has a sandbox"), "{l:#}");
    }
    before.assert_same(&tree.digest(), "clean (dry run)");
    assert!(journal(&tree).is_empty(), "a dry run writes no journal");
    // The table says the same for a person.
    let ep = server.endpoint();
    let mut table =
        vec!["clean", "--root", tree.root_arg(), "--cri", ep.as_str(), "--min-age", "0s", "--wide"];
    table.extend(args.iter().map(String::as_str));
    let t = tree.kr().run(&table);
    assert!(t.stdout_str().contains("dry run: 8 actions"), "{}", t.stdout_str());
    assert!(
        t.stdout_str().contains(&format!("{GONE_UID}/volumes/kubernetes.io~secret/db")),
        "{}",
        t.stdout_str()
    );
}

/// `--apply` removes what was planned (the symlink in the volume as a link: its target
/// outside stays), leaves the live pods' dirs and the kept pod's other data untouched,
/// journals every action before and after, and a second run has nothing to do.
#[test]
fn apply_removes_the_plan_journals_it_and_is_idempotent() {
    let (tree, _, args) = node();
    let server = Server::grpc(fake());
    let gone = tree.pod(GONE_UID).dir();
    let kept = tree.pod(KEPT_UID).dir();
    let untouched = |d: &Digest| {
        let mut keep = d.under(&tree.pod(READY_UID).dir()).0;
        keep.extend(d.under(&tree.pod(NOTREADY_UID).dir()).0);
        keep.extend(d.under("outside").0);
        keep.extend(d.under(&format!("{kept}/volumes/kubernetes.io~empty-dir")).0);
        Digest(keep)
    };
    let before = tree.digest();
    let out = clean(&tree, &server, &args, &["--min-age", "0s", "--apply"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout_str(), out.stderr_str());
    let report = out.json.as_ref().unwrap();
    assert_eq!(report["applied"], true);
    let got: Vec<_> = actions(report).into_iter().filter(|a| a.1.starts_with(GONE_UID)).collect();
    assert_eq!(got, planned_for_gone("done"), "{report:#}");
    assert!(actions(report).iter().all(|a| a.2 == "done"), "{report:#}");
    assert!(!tree.host(&gone).exists(), "the gone pod's dir is removed");
    assert!(tree.host(&kept).exists(), "a pod dir with other data stays");
    assert!(!tree.host(format!("{kept}/volumes/kubernetes.io~secret/db")).exists());
    untouched(&before).assert_same(&untouched(&tree.digest()), "clean --apply");
    assert_eq!(
        std::fs::read(tree.outside().join("precious.txt")).unwrap(),
        b"not kresidue's to remove\n"
    );
    assert!(report["summary"]["files"].as_u64().unwrap() > 0);

    // Two journal lines per action, begin then end, in the order of the report.
    let lines = journal(&tree);
    let n = report["actions"].as_array().unwrap().len();
    assert_eq!(lines.len(), 2 * n, "{lines:#?}");
    for (pair, action) in lines.chunks(2).zip(report["actions"].as_array().unwrap()) {
        assert_eq!(pair[0]["phase"], "begin");
        assert_eq!(pair[0]["status"], "planned");
        assert_eq!(pair[1]["phase"], "end");
        assert_eq!(pair[1]["status"], "done");
        assert_eq!(pair[0]["path"], action["path"]);
        assert_eq!(pair[0]["run"], pair[1]["run"]);
    }

    let again = clean(&tree, &server, &args, &["--min-age", "0s", "--apply"]);
    assert_eq!(again.code, 0, "{}", again.stderr_str());
    assert!(actions(again.json.as_ref().unwrap()).is_empty());
    assert!(again.stderr_str().contains("nothing to do"), "{}", again.stderr_str());
    assert_eq!(journal(&tree).len(), 2 * n, "nothing to do writes nothing");
}

/// Starts `clean --apply` with the gate: returns once it has planned (it then waits for
/// `gate/go`).
fn start_gated(
    tree: &NodeTree,
    server: &Server,
    args: &[String],
    gate: &Path,
) -> std::process::Child {
    std::fs::create_dir_all(gate).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kresidue"));
    // The lock `args` names, else the root's own (as `Kr::default_lock` runs it).
    cmd.env_remove("KRESIDUE_LOCK");
    match runtime_dir() {
        Some(dir) => cmd.env("XDG_RUNTIME_DIR", dir),
        None => cmd.env_remove("XDG_RUNTIME_DIR"),
    };
    let child = cmd
        .args(["clean", "--root", tree.root_arg(), "--cri", &server.endpoint(), "--format", "json"])
        .args(args)
        .args(["--min-age", "0s", "--apply", "--apply-gate", path_arg(gate)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while !gate.join("planned").exists() {
        assert!(t.elapsed() < Duration::from_secs(60), "the gated run never planned");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// Lets a gated run go on; its exit code and report.
fn finish(child: std::process::Child, gate: &Path, value: &str) -> (i32, Value) {
    std::fs::write(gate.join("go"), b"").unwrap();
    let out = child.wait_with_output().unwrap();
    for stream in [&out.stdout, &out.stderr] {
        assert!(!contains(stream, value.as_bytes()), "a value is printed");
    }
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().unwrap(), report)
}

/// A volume dir swapped for a symlink (to a dir outside the root) between the plan and
/// the apply is refused, and so is the rest of that pod; the symlink's target is intact.
#[test]
fn a_volume_swapped_for_a_symlink_after_the_plan_is_refused() {
    let (tree, value, args) = node();
    let server = Server::grpc(fake());
    let gate = tree.work("gate");
    let child = start_gated(&tree, &server, &args, &gate);
    let vol = tree.host(tree.pod(GONE_UID).path("volumes/kubernetes.io~secret/db"));
    let elsewhere = tree.outside().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("password"), b"outside data\n").unwrap();
    std::fs::rename(&vol, tree.outside().join("moved-away")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &vol).unwrap();
    let outside_before = tree.digest().under("outside");
    let (code, report) = finish(child, &gate, &value);
    assert_eq!(code, 1, "{report:#}");
    let first = &report["actions"][0];
    assert_eq!(
        first["path"].as_str().unwrap(),
        tree.pod(GONE_UID).path("volumes/kubernetes.io~secret/db")
    );
    assert_eq!(first["status"], "refused", "{report:#}");
    assert!(first["reason"].as_str().unwrap().contains("symlink"), "{first:#}");
    for a in report["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["path"].as_str().unwrap().contains(GONE_UID))
    {
        assert_eq!(a["status"], "refused", "the rest of the pod is left: {a:#}");
    }
    outside_before.assert_same(&tree.digest().under("outside"), "clean --apply");
    assert!(tree.host(tree.pod(GONE_UID).dir()).exists());
}

/// Two `clean --apply` at once: the second cannot take the lock and exits 2 at once,
/// having done nothing; the first does everything once; a third has nothing to do.
#[test]
fn two_applies_at_once_one_refuses() {
    let (tree, value, args) = node();
    let server = Server::grpc(fake());
    let gate = tree.work("gate");
    let first = start_gated(&tree, &server, &args, &gate);
    let before = tree.digest();
    let second = clean(&tree, &server, &args, &["--min-age", "0s", "--apply"]);
    assert_eq!(second.code, 2, "{}", second.stdout_str());
    let err = second.stderr_str();
    assert!(err.contains("holds the lock") && err.lines().count() == 1, "{err}");
    before.assert_same(&tree.digest(), "a clean --apply that could not take the lock");
    // A scan waits for no one but does not overlap a cleanup either.
    let scan = tree.kr().run(&[
        "scan",
        "--root",
        tree.root_arg(),
        "--no-cri",
        "--lock",
        path_arg(&tree.work("lock")),
    ]);
    assert_eq!(scan.code, 2, "{}", scan.stdout_str());
    let (code, report) = finish(first, &gate, &value);
    assert_eq!(code, 0, "{report:#}");
    assert!(actions(&report).iter().all(|a| a.2 == "done"), "{report:#}");
    let lines = journal(&tree);
    assert_eq!(lines.len(), 2 * report["actions"].as_array().unwrap().len(), "each action once");
    let third = clean(&tree, &server, &args, &["--min-age", "0s", "--apply"]);
    assert_eq!(third.code, 0);
    assert!(actions(third.json.as_ref().unwrap()).is_empty());
}

/// Issue 31 item 4: a `clean --apply` holds its node root's lock, not the host's. While
/// one waits at its gate on root A (the default lock), a scan of another root B runs;
/// a scan of A and a second `clean --apply` of A exit 2 at once with one line naming
/// A, having done nothing. Before, one host-wide lock made B's scan exit 2 too.
#[test]
fn a_clean_holds_only_its_roots_lock() {
    let (tree, value, mut args) = node();
    let at = args.iter().position(|a| a == "--lock").unwrap();
    args.drain(at..at + 2);
    let server = Server::grpc(fake());
    let gate = tree.work("gate");
    let first = start_gated(&tree, &server, &args, &gate);
    let (b, file_b) = {
        let b = NodeTree::new();
        let (value, secrets) = db_password(&b, 6102);
        b.pod(GONE_UID).secret_volume("db").key("password", value.as_bytes());
        let file = b.secrets_file("secrets.json", &secrets);
        (b, file)
    };
    let other = b.kr().default_lock().scan(&["--secrets", path_arg(&file_b)]);
    assert_eq!(other.code, 1, "another root is not blocked: {}", other.stderr_str());
    let before = tree.digest();
    let root = std::fs::canonicalize(tree.root()).unwrap();
    let want = format!("another kresidue run holds the lock of root {} (", root.display());
    let ep = server.endpoint();
    let mut second = vec!["clean", "--root", tree.root_arg(), "--cri", &ep, "--format", "json"];
    second.extend(args.iter().map(String::as_str));
    second.extend_from_slice(&["--min-age", "0s", "--apply"]);
    let scan = ["scan", "--root", tree.root_arg(), "--no-cri"];
    for run in [&second[..], &scan[..]] {
        let out = tree.kr().default_lock().run(run);
        out.assert_one_line_error();
        assert!(out.stderr_str().contains(&want), "{}", out.stderr_str());
    }
    before.assert_same(&tree.digest(), "a run that could not take the lock");
    let (code, report) = finish(first, &gate, &value);
    assert_eq!(code, 0, "{report:#}");
    assert!(actions(&report).iter().all(|a| a.2 == "done"), "{report:#}");
    assert!(!default_lock_of(tree.root()).exists(), "the root's lock is removed when released");
}

/// `clean` refuses outright when the runtime cannot be asked, or is not to be asked, the
/// dry run too (issue 31: it had nothing it could prove, and said "nothing to do"): exit 2,
/// one line naming the runtime, nothing touched, no journal, no plan.
#[test]
fn clean_needs_the_runtime() {
    let (tree, _, args) = node();
    let before = tree.digest();
    let missing = format!("unix://{}", tree.work("no.sock").display());
    let runs = [(vec!["--cri", missing.as_str()], true), (vec!["--no-cri"], true)];
    let dry = [(vec!["--cri", missing.as_str()], false), (vec!["--no-cri"], false)];
    for (cri, apply) in runs.into_iter().chain(dry) {
        let mut full = vec!["clean", "--root", tree.root_arg(), "--min-age", "0s"];
        if apply {
            full.push("--apply");
        }
        full.extend(cri);
        full.extend(args.iter().map(String::as_str));
        let out = tree.kr().run(&full);
        assert_eq!(out.code, 2, "{full:?}: {}", out.stdout_str());
        let err = out.stderr_str();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("CRI") || err.contains("runtime"), "{err}");
        assert!(out.stdout.is_empty());
    }
    before.assert_same(&tree.digest(), "clean without a runtime");
    assert!(journal(&tree).is_empty());
    // A bad --min-age is a usage error.
    let mut full = vec!["clean", "--root", tree.root_arg(), "--no-cri", "--min-age", "soon"];
    full.extend(args.iter().map(String::as_str));
    let out = tree.kr().run(&full);
    assert_eq!(out.code, 2);
    assert!(out.stderr_str().contains("--min-age"), "{}", out.stderr_str());
}

/// As root: a leftover tmpfs at the gone pod's volume is unmounted, then the dir removed;
/// a bind mount of a dir outside the root below the kept pod stops everything of that pod
/// (planned or appearing between plan and apply) and nothing below it is touched.
#[test]
// The skip message is for the person running the tests.
#[allow(clippy::print_stderr)]
fn real_mounts_tmpfs_unmounted_bind_mounts_refused() {
    if !is_root() {
        eprintln!("skipped: mounting needs root");
        return;
    }
    let (tree, value, args) = node();
    let server = Server::grpc(fake());
    // (`tree.pod` makes the pod dir if missing: names are taken before it goes.)
    let gone = tree.pod(GONE_UID).dir();
    // The gone pod's secret volume on a real tmpfs, as kubelet leaves it.
    let vol = tree.host(tree.pod(GONE_UID).path("volumes/kubernetes.io~secret/db"));
    std::fs::rename(&vol, tree.outside().join("old-db")).unwrap();
    let tmpfs = mount(&["-t", "tmpfs", "-o", "size=1m", "tmpfs"], &vol);
    std::fs::write(vol.join("password"), &value).unwrap();
    // A bind mount of an outside dir below the kept pod.
    let data = tree.outside().join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("db.sqlite"), b"someone's data\n").unwrap();
    let bind_at = tree.host(tree.pod(KEPT_UID).path("volumes/kubernetes.io~empty-dir/cache/sub"));
    let bind = mount(&["--bind", path_arg(&data)], &bind_at);
    let kept_before = tree.digest().under(&tree.pod(KEPT_UID).dir());
    let outside_before = tree.digest().under("outside/data");

    let out = clean(&tree, &server, &args, &["--min-age", "0s", "--apply"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout_str(), out.stderr_str());
    let report = out.json.as_ref().unwrap();
    assert_eq!(actions(report), planned_for_gone("done"), "{report:#}");
    assert_eq!(report["actions"][0]["unmount"], true, "{report:#}");
    assert!(!tree.host(&gone).exists());
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains(path_arg(&vol)), "the tmpfs is unmounted");
    std::mem::forget(tmpfs);
    let left: Vec<&Value> = report["left"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["path"].as_str().unwrap().contains(KEPT_UID))
        .collect();
    assert!(
        !left.is_empty()
            && left.iter().all(|l| l["reason"].as_str().unwrap().contains("is mounted at")),
        "{report:#}"
    );
    kept_before.assert_same(&tree.digest().under(&tree.pod(KEPT_UID).dir()), "clean --apply");
    outside_before.assert_same(&tree.digest().under("outside/data"), "clean --apply");
    drop(bind);

    // A bind mount appearing between the plan and the apply: refused, untouched.
    let gate = tree.work("gate");
    let child = start_gated(&tree, &server, &args, &gate);
    let bind = mount(&["--bind", path_arg(&data)], &bind_at);
    let kept_before = tree.digest().under(&tree.pod(KEPT_UID).dir());
    let (code, report) = finish(child, &gate, &value);
    assert_eq!(code, 1, "{report:#}");
    let kept: Vec<_> = actions(&report).into_iter().filter(|a| a.1.starts_with(KEPT_UID)).collect();
    assert!(!kept.is_empty() && kept.iter().all(|a| a.2 == "refused"), "{report:#}");
    kept_before.assert_same(&tree.digest().under(&tree.pod(KEPT_UID).dir()), "clean --apply");
    drop(bind);
}

/// Issue 46, break 6: `clean --remove-exited-containers` acts only for the node's
/// containerd, through CRI when CRI is containerd. The same exited container (CRI lists it
/// exited) with a secret in its record: in Docker's own containerd (`<docker-root>/
/// containerd/daemon`, namespace `moby`, CRI cri-dockerd, whose removal is `docker rm`) it
/// is never planned, nor in the node's containerd when CRI is another runtime; in the
/// node's containerd with CRI containerd it is (the test can fail).
#[test]
fn only_the_nodes_containerd_has_exited_containers_removed() {
    use crate::runtime::{bucket, container, data, spec};
    use kresidue::bbolt::write::{Node, Writer};
    use std::collections::BTreeMap;
    let docker = "/var/lib/docker/containerd/daemon/io.containerd.metadata.v1.bolt/meta.db";
    let node = "/var/lib/containerd/io.containerd.metadata.v1.bolt/meta.db";
    let cases = [
        (docker, "moby", "docker", false),
        (node, "k8s.io", "docker", false),
        (node, "k8s.io", "containerd", true),
    ];
    for (path, ns, cri_name, planned) in cases {
        let tree = NodeTree::new();
        let (value, secrets) = db_password(&tree, 6111);
        let file = tree.secrets_file("secrets.json", &secrets);
        let labels =
            [("io.kubernetes.pod.uid", NOTREADY_UID), ("io.kubernetes.container.name", "app")];
        let record = container(
            crate::cri::EXITED,
            spec(&[("DB", &value)], serde_json::json!({})),
            &labels,
            None,
        );
        let keyed =
            Node::Bucket(BTreeMap::from([(crate::cri::EXITED.as_bytes().to_vec(), record)]));
        let root = BTreeMap::from([(
            b"v1".to_vec(),
            bucket([(ns, bucket([("containers", keyed)])), ("version", data([6]))]),
        )]);
        tree.write(path, &Writer::new(4096, true, 64).finish(&root, &[], 4));
        let pods = tree.work("pods.json");
        let live = [ApiPod::running(READY_UID, "node-1"), ApiPod::running(NOTREADY_UID, "node-1")];
        std::fs::write(&pods, pods_json(&live)).unwrap();
        let server = Server::grpc(crate::cri::Fake { runtime_name: Some(cri_name), ..fake() });
        let args = ["--pods", path_arg(&pods), "--secrets", path_arg(&file)].map(str::to_owned);
        let out = clean(&tree, &server, &args, &["--min-age", "0s", "--remove-exited-containers"]);
        out.assert_code(0);
        let report = out.json();
        let removals: Vec<_> =
            actions(report).into_iter().filter(|(_, what, _)| what == crate::cri::EXITED).collect();
        assert_eq!(!removals.is_empty(), planned, "{path} {cri_name}: {report:#}");
        let runtime = if ns == "moby" { "docker" } else { "containerd" };
        // The finding says whose records it is in.
        let ep = server.endpoint();
        let scan = ["scan", "--root", tree.root_arg(), "--cri", &ep, "--format", "json"];
        let scanned = tree.kr().run(&[&scan[..], &["--secrets", path_arg(&file)]].concat());
        scanned.assert_code(1);
        for f in scanned.json()["findings"].as_array().unwrap() {
            assert_eq!(f["container"]["runtime"], runtime, "{path}: {f:#}");
        }
    }
}
