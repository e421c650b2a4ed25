//! `clean --apply` removes nothing any witness says may be alive (issue 28, items 1-3):
//! the API server's list of pods (`--pods`) is a second witness beside the runtime, a
//! runtime that does not know the node's pods is refused, the dry run shows what apply
//! does (the same kubelet dir, a reviewed plan carried out as reviewed), and apply runs
//! only in the runtime's mount namespace, refusing when that cannot be told.

use std::process::Command;

use serde_json::Value;

use crate::clean::{actions, backdate_pods, clean, journal, node, pods_json, ApiPod, KEPT_UID};
use crate::cri::{container, fake, sandbox, Server, GONE_UID, NOTREADY_UID, READY_UID};
use crate::util::*;
use kresidue::cri::proto;

/// `args` with the `--pods FILE` pair replaced by `--pods path` (or left out).
fn with_pods(args: &[String], pods: Option<&str>) -> Vec<String> {
    let mut out = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--pods" {
            it.next();
            continue;
        }
        out.push(a.clone());
    }
    if let Some(p) = pods {
        out.extend(["--pods".to_owned(), p.to_owned()]);
    }
    out
}

/// Writes `pods` as the API server's list in `work/NAME`; its path.
fn api_list(tree: &NodeTree, name: &str, pods: &[ApiPod]) -> String {
    let path = tree.work(name);
    std::fs::write(&path, pods_json(pods)).unwrap();
    path_arg(&path).to_owned()
}

/// The one line a refused `--apply` prints, after checking it changed nothing.
fn refused(tree: &NodeTree, before: &Digest, out: &Out, what: &str) -> String {
    assert_eq!(out.code, 2, "{what}: {}\n{}", out.stdout_str(), out.stderr_str());
    assert!(out.stdout.is_empty(), "{what}: {}", out.stdout_str());
    let err = out.stderr_str();
    assert_eq!(err.lines().count(), 1, "{what}: {err}");
    before.assert_same(&tree.digest(), what);
    err.to_owned()
}

/// Without the API server's list, `--apply` does nothing and says what to pass; the dry
/// run still plans, and says that applying needs it.
#[test]
fn apply_without_the_api_servers_list_refuses() {
    let (tree, _, args) = node();
    let server = Server::grpc(fake());
    let before = tree.digest();
    let args = with_pods(&args, None);
    let out = clean(&tree, &server, &args, &["--min-age", "0s", "--apply"]);
    let err = refused(&tree, &before, &out, "clean --apply without --pods");
    assert!(err.contains("--pods") && err.contains("kubectl get pods"), "{err}");
    assert!(journal(&tree).is_empty());
    let dry = clean(&tree, &server, &args, &["--min-age", "0s"]);
    assert_eq!(dry.code, 0, "{}", dry.stderr_str());
    assert!(!actions(dry.json.as_ref().unwrap()).is_empty());
    assert!(dry.stderr_str().contains("--pods"), "{}", dry.stderr_str());
}

/// A pod with volumes and no sandbox that the API server knows (stuck in Pending on a
/// volume that will not attach) is never touched, by the plan or by apply; a pod neither
/// witness knows is cleaned as before.
#[test]
fn a_pod_the_api_server_knows_is_never_touched() {
    let (tree, _, args) = node();
    let server = Server::grpc(fake());
    let list = api_list(
        &tree,
        "pods-pending.json",
        &[
            ApiPod::running(READY_UID, "node-1"),
            ApiPod::running(NOTREADY_UID, "node-1"),
            ApiPod::pending(GONE_UID, "node-1"),
        ],
    );
    let args = with_pods(&args, Some(&list));
    let gone = tree.pod(GONE_UID).dir();
    let before = tree.digest().under(&gone);
    for extra in [&["--min-age", "0s"][..], &["--min-age", "0s", "--apply"]] {
        let out = clean(&tree, &server, &args, extra);
        assert_eq!(out.code, 0, "{extra:?}: {}\n{}", out.stdout_str(), out.stderr_str());
        let report = out.json.as_ref().unwrap();
        let acts = actions(report);
        assert!(acts.iter().all(|a| !a.1.starts_with(GONE_UID)), "{extra:?}: {report:#}");
        assert!(acts.iter().any(|a| a.1.starts_with(KEPT_UID)), "{extra:?}: {report:#}");
        let why: Vec<&str> = report["left"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|l| l["path"].as_str().unwrap().contains(GONE_UID))
            .map(|l| l["reason"].as_str().unwrap())
            .collect();
        assert!(!why.is_empty(), "{report:#}");
        assert!(why.iter().all(|r| r.contains("the API server knows the pod")), "{why:?}");
        before.assert_same(&tree.digest().under(&gone), "a pod the API server knows");
    }
    assert!(!tree.host(tree.pod(KEPT_UID).path("volumes/kubernetes.io~secret/db")).exists());
}

/// A runtime that is not the one kubelet uses (another socket, a second runtime) holding
/// one unrelated pod: whether the API server knows that pod or not, `--apply` refuses and
/// nothing is touched. Before, every kubelet pod dir was planned and removed.
#[test]
fn the_wrong_runtime_is_refused() {
    let (tree, _, args) = node();
    let other = "99999999-0000-4000-8000-000000000009";
    let mut wrong = fake();
    wrong.pods = vec![sandbox("s9", other, proto::PodSandboxState::SandboxReady)];
    wrong.containers =
        vec![container(&"9".repeat(64), "s9", "app", proto::ContainerState::ContainerRunning)];
    let server = Server::grpc(wrong);
    let before = tree.digest();
    // The runtime's pod is unknown to the API server.
    let out = clean(&tree, &server, &args, &["--min-age", "0s", "--apply"]);
    let err = refused(&tree, &before, &out, "a runtime none of whose pods the API server lists");
    assert!(err.contains("the runtime kubelet uses"), "{err}");
    // The runtime's pod is known, on this node, but the node's other running pods are not
    // the runtime's.
    let list = api_list(
        &tree,
        "pods-other.json",
        &[
            ApiPod::running(READY_UID, "node-1"),
            ApiPod::running(NOTREADY_UID, "node-1"),
            ApiPod::running(other, "node-1"),
        ],
    );
    let args = with_pods(&args, Some(&list));
    let out = clean(&tree, &server, &args, &["--min-age", "0s", "--apply"]);
    let err = refused(&tree, &before, &out, "a runtime that does not know the node's pods");
    assert!(err.contains("does not know 2 pods") && err.contains("shop/pod-0"), "{err}");
    // The runtime's pods on more than one node: not one node's runtime.
    let list = api_list(
        &tree,
        "pods-nodes.json",
        &[ApiPod::running(READY_UID, "node-1"), ApiPod::running(NOTREADY_UID, "node-2")],
    );
    let out = clean(
        &tree,
        &Server::grpc(fake()),
        &with_pods(&args, Some(&list)),
        &["--min-age", "0s", "--apply"],
    );
    let err = refused(&tree, &before, &out, "a runtime whose pods are on two nodes");
    assert!(err.contains("node-1") && err.contains("node-2"), "{err}");
    // A --node-name the runtime's pods do not run on.
    let out = clean(
        &tree,
        &Server::grpc(fake()),
        &args,
        &["--min-age", "0s", "--apply", "--node-name", "node-7"],
    );
    let err = refused(&tree, &before, &out, "--node-name of another node");
    assert!(err.contains("--node-name") && !err.contains("node-7"), "{err}");
    // A runtime with no pod at all (another runtime's socket), and a --node-name no listed
    // pod runs on, or none: refused.
    let mut empty = fake();
    (empty.pods, empty.containers) = (Vec::new(), Vec::new());
    let empty = Server::grpc(empty);
    for extra in [&["--node-name", "node-7"][..], &[]] {
        let mut full = vec!["--min-age", "0s", "--apply"];
        full.extend_from_slice(extra);
        let out = clean(&tree, &empty, &args, &full);
        let err = refused(&tree, &before, &out, "a runtime with no pods");
        assert!(err.contains("node"), "{err}");
    }
    assert!(journal(&tree).is_empty());
}

/// A list taken before a pod dir was last modified cannot speak for it (the pod may have
/// been created after the list): that pod dir is not touched. The list's time is the
/// earlier of its file's mtime and the newest time it records, so an old list copied to a
/// fresh file (new mtime) counts as old. Read from stdin, it is as fresh as its contents.
#[test]
fn a_pod_dir_newer_than_the_list_is_not_touched() {
    let (tree, value, args) = node();
    let server = Server::grpc(fake());
    let list = tree.work("pods.json");
    // The same list, as kubectl printed it two hours ago, copied just now.
    let text = String::from_utf8(std::fs::read(&list).unwrap()).unwrap();
    let old = humantime::format_rfc3339_seconds(
        std::time::SystemTime::now() - std::time::Duration::from_secs(7200),
    )
    .to_string();
    let re_dated: String = text
        .split('"')
        .enumerate()
        .map(|(i, part)| {
            let is_time = i % 2 == 1 && humantime::parse_rfc3339(part).is_ok();
            if is_time {
                old.clone()
            } else {
                part.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\"");
    std::fs::write(&list, &re_dated).unwrap();
    let before = tree.digest();
    let out = clean(&tree, &server, &args, &["--min-age", "0s", "--apply"]);
    assert_eq!(out.code, 0, "{}", out.stderr_str());
    let report = out.json.as_ref().unwrap();
    assert!(actions(report).is_empty(), "{report:#}");
    let reasons: Vec<&str> =
        report["left"].as_array().unwrap().iter().map(|l| l["reason"].as_str().unwrap()).collect();
    assert!(
        reasons.iter().any(|r| r.contains("modified after the API server's list")),
        "{reasons:?}"
    );
    before.assert_same(&tree.digest(), "clean --apply with a list older than the pod dirs");

    // A list in the future is refused.
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(3600);
    std::fs::File::options().write(true).open(&list).unwrap().set_modified(later).unwrap();
    let out = clean(&tree, &server, &args, &["--min-age", "0s", "--apply"]);
    let err = refused(&tree, &before, &out, "a list written in the future");
    assert!(err.contains("future"), "{err}");

    // The list of now, from stdin.
    let stdin =
        pods_json(&[ApiPod::running(READY_UID, "node-1"), ApiPod::running(NOTREADY_UID, "node-1")]);
    // (`tree.pod` makes the pod dir if missing: its path is taken before it goes.)
    let gone = tree.host(tree.pod(GONE_UID).dir());
    let ep = server.endpoint();
    let mut full = vec!["clean", "--root", tree.root_arg(), "--cri", &ep, "--format", "json"];
    let args = with_pods(&args, Some("-"));
    full.extend(args.iter().map(String::as_str));
    full.extend(["--min-age", "0s", "--apply"]);
    let out = tree.kr().stdin(&stdin).run(&full);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout_str(), out.stderr_str());
    assert!(!gone.exists(), "the orphan is removed: {}", out.stdout_str());
    assert!(!contains(&out.stdout, value.as_bytes()));
}

/// A malformed list is one line, exit 2, quoting nothing of it; `--pods -` twice with
/// `--secrets -` is refused (one stdin).
#[test]
fn a_malformed_list_is_one_line() {
    let (tree, _, args) = node();
    let server = Server::grpc(fake());
    let before = tree.digest();
    let secretish = "hunter2-not-a-pod-list-7Qx9";
    for (name, text) in [
        ("garbage.json", format!("{{\"kind\": \"List\", \"items\": [{secretish}]}}")),
        ("kind.json", format!("{{\"kind\": \"{secretish}\"}}")),
        ("nouid.json", "{\"kind\": \"List\", \"items\": [{\"kind\": \"Pod\"}]}".to_owned()),
        // Not the whole list: one pod, one page of several.
        ("pod.json", "{\"kind\": \"Pod\", \"metadata\": {\"uid\": \"u1\"}}".to_owned()),
        (
            "page.json",
            "{\"kind\": \"List\", \"metadata\": {\"continue\": \"abc\"}, \"items\": []}".to_owned(),
        ),
    ] {
        std::fs::write(tree.work(name), &text).unwrap();
        let args = with_pods(&args, Some(path_arg(&tree.work(name))));
        let out = clean(&tree, &server, &args, &["--min-age", "0s", "--apply"]);
        let err = refused(&tree, &before, &out, name);
        assert!(!err.contains(secretish) && !err.contains("hunter2"), "{err}");
        assert!(err.contains("--pods"), "{err}");
    }
}

/// kubelet's dir at `/data/kubelet`, as the runtime's containers mount it, and a second
/// pod tree at the default `/var/lib/kubelet`. Without `--kubelet-dir` the dry run and
/// apply both plan the default dir, the dry run says where the runtime's containers mount
/// from, and apply refuses (it would act on a dir kubelet may not use); with it, apply does
/// exactly what the dry run showed. Before, the dry run showed `/data/kubelet` and apply
/// removed `/var/lib/kubelet`.
#[test]
fn the_dry_run_shows_what_apply_does() {
    let tree = NodeTree::with_kubelet_dir("/data/kubelet");
    let (value, secrets) = db_password(&tree, 6202);
    for uid in [READY_UID, GONE_UID] {
        tree.pod(uid).secret_volume("db").key("password", value.as_bytes());
    }
    let d2 = "/var/lib/kubelet/pods/55555555-0000-4000-8000-000000000005";
    tree.write(format!("{d2}/volumes/kubernetes.io~secret/db/password"), value.as_bytes());
    let file = tree.secrets_file("secrets.json", &secrets);
    backdate_pods(&tree);
    let then = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    std::fs::File::open(tree.host(d2)).unwrap().set_modified(then).unwrap();
    let list = api_list(&tree, "pods.json", &[ApiPod::running(READY_UID, "node-1")]);
    let mut f = fake();
    f.pods.truncate(1);
    f.containers.truncate(1);
    f.mounts.insert(
        crate::cri::RUNNING.to_owned(),
        vec![format!("/data/kubelet/pods/{READY_UID}/volumes/kubernetes.io~secret/db")],
    );
    let server = Server::grpc(f);
    let base = [
        "--secrets",
        path_arg(&file),
        "--pods",
        &list,
        "--lock",
        path_arg(&tree.work("lock")),
        "--journal",
        path_arg(&tree.work("journal.jsonl")),
        "--min-age",
        "0s",
    ]
    .map(str::to_owned);
    let planned = |extra: &[&str]| {
        let out = clean(&tree, &server, &base, extra);
        assert_eq!(out.code, 0, "{}", out.stderr_str());
        (actions(out.json.as_ref().unwrap()), out.stderr_str().to_owned())
    };
    let (plan, note) = planned(&[]);
    assert!(!plan.is_empty() && plan.iter().all(|a| a.1.starts_with("55555555")), "{plan:?}");
    assert!(note.contains("/data/kubelet") && note.contains("--kubelet-dir"), "{note}");
    let before = tree.digest();
    let out = clean(&tree, &server, &base, &["--apply"]);
    let err = refused(&tree, &before, &out, "apply where the runtime mounts from elsewhere");
    assert!(err.contains("/data/kubelet") && err.contains("--kubelet-dir"), "{err}");

    let (plan, _) = planned(&["--kubelet-dir", "/data/kubelet"]);
    let out = clean(&tree, &server, &base, &["--kubelet-dir", "/data/kubelet", "--apply"]);
    assert_eq!(out.code, 0, "{}", out.stderr_str());
    let done: Vec<_> =
        actions(out.json.as_ref().unwrap()).into_iter().map(|(a, p, _)| (a, p)).collect();
    let shown: Vec<_> = plan.into_iter().map(|(a, p, _)| (a, p)).collect();
    assert_eq!(done, shown, "apply does what the dry run showed");
    assert!(done.iter().all(|a| a.1.starts_with(GONE_UID)), "{done:?}");
    assert!(tree.host(format!("{d2}/volumes/kubernetes.io~secret/db/password")).exists());
}

/// A plan written by the dry run (`--plan-out`) and carried out with `--apply --plan`:
/// what the review saw is done; an orphan that appeared since is left for the next review
/// (refused, exit 1); a plan file for another kubelet dir or root is refused whole.
#[test]
fn a_reviewed_plan_is_carried_out_as_reviewed() {
    let (tree, value, args) = node();
    let server = Server::grpc(fake());
    let plan = tree.work("plan.json");
    let dry = clean(&tree, &server, &args, &["--min-age", "0s", "--plan-out", path_arg(&plan)]);
    assert_eq!(dry.code, 0, "{}", dry.stderr_str());
    let reviewed = actions(dry.json.as_ref().unwrap());
    let text = std::fs::read(&plan).unwrap();
    assert!(!contains(&text, value.as_bytes()), "the plan holds no value");
    let doc: Value = serde_json::from_slice(&text).unwrap();
    assert_eq!(doc["schema"], "kresidue/clean-plan/v1");
    // A pod orphaned after the review.
    let late = "66666666-0000-4000-8000-000000000006";
    tree.pod(late).secret_volume("db").key("password", value.as_bytes());
    backdate_pods(&tree);
    std::fs::write(tree.work("pods.json"), std::fs::read(tree.work("pods.json")).unwrap()).unwrap();
    let out =
        clean(&tree, &server, &args, &["--min-age", "0s", "--apply", "--plan", path_arg(&plan)]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout_str(), out.stderr_str());
    let report = out.json.as_ref().unwrap();
    let got = actions(report);
    for (a, p, _) in &reviewed {
        assert!(got.contains(&(a.clone(), p.clone(), "done".to_owned())), "{a} {p}: {report:#}");
    }
    let late_actions: Vec<_> = report["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["path"].as_str().is_some_and(|p| p.contains(late)))
        .collect();
    assert!(!late_actions.is_empty(), "{report:#}");
    for a in late_actions {
        assert_eq!(a["status"], "refused", "{a:#}");
        assert!(a["reason"].as_str().unwrap().contains("not in the reviewed plan"), "{a:#}");
    }
    assert!(tree
        .host(format!(
            "{}/pods/{late}/volumes/kubernetes.io~secret/db/password",
            tree.kubelet_dir()
        ))
        .exists());

    // A plan of another kubelet dir: refused whole.
    let mut doc = doc;
    doc["kubelet_dir"] = Value::from("/srv/kubelet");
    std::fs::write(&plan, serde_json::to_vec(&doc).unwrap()).unwrap();
    let before = tree.digest();
    let out =
        clean(&tree, &server, &args, &["--min-age", "0s", "--apply", "--plan", path_arg(&plan)]);
    let err = refused(&tree, &before, &out, "a plan of another kubelet dir");
    assert!(err.contains("--plan"), "{err}");
    // --plan without --apply, and garbage as a plan: usage errors.
    let out = clean(&tree, &server, &args, &["--plan", path_arg(&plan)]);
    assert_eq!(out.code, 2, "{}", out.stdout_str());
    std::fs::write(&plan, b"{\"schema\": \"hunter2-hunter2\"}").unwrap();
    let out = clean(&tree, &server, &args, &["--apply", "--plan", path_arg(&plan)]);
    let err = refused(&tree, &before, &out, "garbage as a plan");
    assert!(!err.contains("hunter2"), "{err}");
}

/// `clean --apply` in a mount namespace of its own (a container without the host's, here
/// `unshare -m`, where PID 1's namespace cannot even be read) or in a PID namespace of
/// its own too (`unshare -m -p -f --mount-proc`, where /proc/1 is its own init) refuses:
/// the runtime's process, found through its socket's peer credentials, is the reference,
/// and one that cannot be seen or read refuses. On the node itself (the tests' own
/// namespace) apply runs for real: the other clean tests exercise it.
#[test]
// The skip message is for the person running the tests.
#[allow(clippy::print_stderr)]
fn apply_refuses_outside_the_runtimes_mount_namespace() {
    if !is_root() || Command::new("unshare").arg("--version").output().is_err() {
        eprintln!("skipped: needs root and unshare");
        return;
    }
    let (tree, value, args) = node();
    let server = Server::grpc(fake());
    let before = tree.digest();
    let bin = env!("CARGO_BIN_EXE_kresidue");
    let ep = server.endpoint();
    for ns in [&["-m"][..], &["-m", "-p", "-f", "--mount-proc"]] {
        let out = Command::new("unshare")
            .args(ns)
            .arg(bin)
            .args(["clean", "--root", tree.root_arg(), "--cri", &ep, "--format", "json"])
            .args(&args)
            .args(["--min-age", "0s", "--apply"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "unshare {ns:?}: {err}");
        assert!(err.contains("mount namespace") && err.lines().count() == 1, "{ns:?}: {err}");
        assert!(
            !contains(&out.stdout, value.as_bytes()) && !contains(&out.stderr, value.as_bytes())
        );
        before.assert_same(&tree.digest(), "clean --apply in a mount namespace of its own");
    }
    assert!(journal(&tree).is_empty());
}
