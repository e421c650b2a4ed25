//! A real containerd (Debian's, with runc and its CRI plugin), started by the test in
//! private dirs and driven over CRI with kresidue's own client, as kubelet drives it: two
//! images built here from busybox-static are imported (no network; one has a generated
//! value baked into a layer), a host-network pod sandbox runs, and in it a container with
//! a generated secret in its env, which it prints to its log and writes into its writable
//! layer. The built binary then scans the node, asking the same runtime over CRI:
//! - the env value is found in `meta.db` (the spec and the CRI plugin's copy), the task
//!   bundle, the writable layer and the pod log, each attributed to the container and pod,
//!   all live; the baked value in the image layer, named after its image;
//! - a kubelet pod dir of the live pod's uid is `live: true`, another is `live: false`,
//!   with the categories and severities of `docs/CONTRACT.md`;
//! - once the container is stopped its leftovers are `dead-container`; once removed,
//!   nothing is attributed to it and whatever remains is marked for what it is.
//!
//! Needs root and `containerd`, `ctr`, `runc`, `busybox` and `tar` on the machine; `.ci/run`
//! installs them and sets `KRESIDUE_REAL_CONTAINERD=1`, which makes a missing piece a
//! failure. Without that variable the test says it is skipped and passes.
//! `KRESIDUE_UPDATE_FIXTURES=1` also saves the run's databases to `fixtures/containerd/`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kresidue::cri::proto;
use kresidue::cri::Client;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::util::containerd::{
    self, host_network, run, stop_container, Containerd, PodMeta, PAUSE,
};
use crate::util::*;

const IMAGE: &str = "localhost/kresidue-test:1";
const POD_UID: &str = "5d1c3b7a-0e2f-4a6b-8c9d-1e2f3a4b5c6d";
const DEAD_UID: &str = "0dead000-0e2f-4a6b-8c9d-1e2f3a4b5c6d";

const POD: PodMeta = PodMeta { namespace: "shop", name: "web-0", uid: POD_UID };

/// Runs the test pod, and in it container `app`: `env` set, `script` run by `sh -c`, the
/// host dir `volume` mounted at `/etc/db` (as kubelet mounts a secret volume).
fn run_pod(
    c: &Containerd,
    cri: &mut Client,
    env: &[(&str, &str)],
    script: &str,
    volume: &Path,
) -> (String, String) {
    let sandbox = c.run_sandbox(cri, &POD);
    let config = proto::ContainerConfig {
        metadata: Some(proto::ContainerMetadata { name: "app".into(), attempt: 0 }),
        image: Some(proto::ImageSpec { image: IMAGE.into(), ..Default::default() }),
        command: vec!["/bin/sh".into(), "-c".into()],
        args: vec![script.into()],
        envs: env
            .iter()
            .map(|(k, v)| proto::KeyValue { key: (*k).into(), value: v.as_bytes().to_vec() })
            .collect(),
        mounts: vec![proto::Mount {
            container_path: "/etc/db".into(),
            host_path: volume.display().to_string(),
            readonly: true,
            ..Default::default()
        }],
        log_path: "app/0.log".into(),
        linux: Some(proto::LinuxContainerConfig {
            security_context: Some(proto::LinuxContainerSecurityContext {
                namespace_options: Some(host_network()),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let cid = c.start_container(cri, &sandbox, &POD, config);
    (sandbox.0, cid)
}

/// `kresidue SUBCOMMAND --root / --format json --secrets FILE --cri <its socket>` over this
/// containerd's dirs and `kubelet` (learned from the runtime when `None`), then `extra`.
/// No output may hold a value of `guards`; the exit code and the report.
fn kresidue(
    sub: &str,
    c: &Containerd,
    secrets: &Path,
    kubelet: Option<&Path>,
    extra: &[&std::ffi::OsStr],
    guards: &[&str],
) -> (Option<i32>, Value) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kresidue"));
    cmd.args([sub, "--root", "/", "--format", "json", "--secrets"])
        .arg(secrets)
        .arg("--cri")
        .arg(format!("unix://{}", c.sock().display()))
        .arg("--containerd-root")
        .arg(c.root())
        .arg("--containerd-state")
        .arg(c.state())
        .arg("--pod-log-dir")
        .arg(c.pod_logs());
    if let Some(k) = kubelet {
        cmd.arg("--kubelet-dir").arg(k);
    }
    let out =
        cmd.env("KRESIDUE_LOCK", c.dir.path().join("kresidue.lock")).args(extra).output().unwrap();
    for stream in [&out.stdout, &out.stderr] {
        for g in guards {
            assert!(!contains(stream, g.as_bytes()), "a value is printed");
        }
    }
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code(), report)
}

/// `kresidue scan` (see [`kresidue`]), as JSON, with the runtime asked.
fn scan(c: &Containerd, secrets: &Path, kubelet: Option<&Path>, guards: &[&str]) -> Value {
    let (code, report) = kresidue("scan", c, secrets, kubelet, &[], guards);
    assert!(code == Some(0) || code == Some(1), "{report}");
    assert_eq!(report["cri"]["status"], "ok", "{report}");
    report
}

/// `kresidue clean --apply --remove-exited-containers --min-age 0s` (see [`kresidue`]),
/// journal at `journal`, lock beside it; exit 0 expected.
fn clean(c: &Containerd, secrets: &Path, kubelet: &Path, journal: &Path, guards: &[&str]) -> Value {
    let lock = journal.with_extension("lock");
    // The API server's witness: the live pod runs on this node.
    let pods = journal.with_extension("pods.json");
    let listed = [crate::clean::ApiPod::running(POD_UID, "node-1")];
    std::fs::write(&pods, crate::clean::pods_json(&listed)).unwrap();
    let extra = ["--apply", "--remove-exited-containers", "--min-age", "0s", "--journal"]
        .map(std::ffi::OsStr::new)
        .into_iter()
        .chain([journal.as_os_str(), "--lock".as_ref(), lock.as_os_str()])
        .chain(["--pods".as_ref(), pods.as_os_str()])
        .collect::<Vec<_>>();
    let (code, report) = kresidue("clean", c, secrets, Some(kubelet), &extra, guards);
    assert_eq!(code, Some(0), "{report:#}");
    report
}

/// Every entry below `dir` with its kind, size, mtime and content hash.
fn tree_digest(dir: &Path) -> Vec<(PathBuf, bool, u64, i64, String)> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let md = std::fs::symlink_metadata(&d).unwrap();
        let hash = if md.is_file() {
            hex(&Sha256::digest(std::fs::read(&d).unwrap()))
        } else {
            String::new()
        };
        out.push((d.clone(), md.is_dir(), md.size(), md.mtime(), hash));
        if md.is_dir() {
            stack.extend(std::fs::read_dir(&d).unwrap().map(|e| e.unwrap().path()));
        }
    }
    out.sort();
    out
}

/// A finding of ours, as (site, category, severity, container id, pod uid, container
/// live, pod live, stale).
type Row = (String, String, String, String, String, Option<bool>, Option<bool>, bool);

/// Findings of `secret` under this run's dirs.
fn ours(report: &Value, c: &Containerd, kubelet: &Path, secret: &str) -> Vec<Row> {
    let dirs = [c.dir.path().display().to_string(), kubelet.display().to_string()];
    let s = |v: &Value| v.as_str().unwrap_or("-").to_owned();
    let mut out: Vec<Row> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| dirs.iter().any(|d| f["path"].as_str().unwrap_or("").starts_with(d.as_str())))
        .filter(|f| f["match"]["secret"] == secret)
        .map(|f| {
            (
                s(&f["site"]),
                s(&f["category"]),
                s(&f["severity"]),
                s(&f["container"]["id"]),
                s(&f["pod"]["uid"]),
                f["container"]["live"].as_bool(),
                f["pod"]["live"].as_bool(),
                f["stale"].as_bool().unwrap_or(false),
            )
        })
        .collect();
    out.sort();
    out
}

/// Copies this run's `meta.db` and overlayfs `metadata.db` to `fixtures/containerd/`
/// (the bbolt reader's unit tests read them), with the app container's id.
fn save_fixtures(c: &Containerd, id: &str) {
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/containerd");
    std::fs::create_dir_all(&out).unwrap();
    let root = c.root();
    for (from, to) in [
        ("io.containerd.metadata.v1.bolt/meta.db", "meta.db"),
        ("io.containerd.snapshotter.v1.overlayfs/metadata.db", "metadata.db"),
    ] {
        std::fs::copy(root.join(from), out.join(to)).unwrap();
    }
    std::fs::write(out.join("container-id"), id).unwrap();
}

/// containerd killed while a scan runs (after it connected, while it reads an emptyDir made
/// big enough for a 2 s scan, or before it connected), then started again before or after the scan asks
/// for the pods: each scan ends well within its timeout, with `cri.status` "ok" and the
/// live pod judged live when the runtime was back in time (the lost connection is made
/// again), or "unreachable" with the reason in `errors` and liveness left unknown when it
/// was down for the whole ask.
fn restarted_mid_scan(c: &mut Containerd, secrets: &Path, kubelet: &Path, guards: &[&str]) {
    let slow = kubelet.join("pods").join(DEAD_UID).join("volumes/kubernetes.io~empty-dir/big");
    std::fs::create_dir_all(&slow).unwrap();
    let bin = env!("CARGO_BIN_EXE_kresidue");
    let command = |c: &Containerd| {
        let mut cmd = Command::new(bin);
        cmd.args(["scan", "--root", "/", "--format", "json", "--secrets"])
            .arg(secrets)
            .arg("--cri")
            .arg(format!("unix://{}", c.sock().display()))
            // Room for a restarted containerd to take connections and for its CRI plugin
            // to initialise on a loaded machine (the client waits one more timeout).
            .args(["--cri-timeout", "15", "--kubelet-dir"])
            .arg(kubelet)
            .arg("--containerd-root")
            .arg(c.root())
            .arg("--containerd-state")
            .arg(c.state())
            .arg("--pod-log-dir")
            .arg(c.pod_logs())
            .env("KRESIDUE_LOCK", c.dir.path().join("kresidue.lock"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    };
    // The kills below must fall within the scan, on a fast machine too: the emptyDir grows,
    // 16 MiB files at a time, until a scan with the runtime up lasts 2 s (at most 1 GiB).
    let chunk = filler(4603, 16 << 20);
    let mut files = 0;
    loop {
        let t = Instant::now();
        let out = command(c).output().unwrap();
        assert!(matches!(out.status.code(), Some(0 | 1)), "calibration scan: {:?}", out.status);
        if t.elapsed() >= Duration::from_secs(2) {
            break;
        }
        assert!(files < 64, "a scan of 1 GiB took {:?}: under 2 s", t.elapsed());
        for _ in 0..files.max(3) {
            std::fs::write(slow.join(format!("data-{files}.bin")), &chunk).unwrap();
            files += 1;
        }
    }
    // (kill after, start again after): down until after the scan, or back within it.
    for (kill_at, back_at) in [(300, None), (300, Some(600)), (0, Some(100))] {
        let mut cmd = command(c);
        let started = Instant::now();
        let mut child = cmd.spawn().unwrap();
        std::thread::sleep(Duration::from_millis(kill_at));
        if child.try_wait().unwrap().is_some() {
            let out = child.wait_with_output().unwrap();
            panic!(
                "the scan ended before {kill_at} ms ({}; stderr: {}): make the emptyDir bigger so the kill falls within it",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        c.kill();
        if let Some(back) = back_at {
            std::thread::sleep(Duration::from_millis(back - kill_at));
            c.restart();
        }
        let out = child.wait_with_output().unwrap();
        let took = started.elapsed();
        if back_at.is_none() {
            c.restart();
        }
        let case = format!("killed at {kill_at} ms, back at {back_at:?} ms");
        for stream in [&out.stdout, &out.stderr] {
            for g in guards {
                assert!(!contains(stream, g.as_bytes()), "a value is printed ({case})");
            }
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{case}: {stderr}");
        assert!(matches!(out.status.code(), Some(0 | 1)), "{case}: {:?} {stderr}", out.status);
        assert!(took < Duration::from_secs(60), "{case}: took {took:?}");
        let report: Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{case}: {e}: {stderr}"));
        let status = report["cri"]["status"].as_str().unwrap_or("").to_owned();
        let rows = ours(&report, c, kubelet, "shop/db");
        match status.as_str() {
            "ok" => {
                assert!(back_at.is_some(), "{case}: ok from a runtime that was down: {report}");
                let volume = rows.iter().find(|r| r.4 == POD_UID && r.0 == "kubelet-secret-volume");
                assert_eq!(volume.map(|r| r.6), Some(Some(true)), "{case}: {rows:#?}");
            }
            "unreachable" => {
                let errors = report["errors"].as_array().unwrap();
                assert!(
                    errors.iter().any(|e| e["error"].as_str().unwrap_or("").starts_with("CRI: ")),
                    "{case}: no CRI error listed: {errors:#?}"
                );
                assert!(rows.iter().all(|r| r.6.is_none()), "{case}: judged: {rows:#?}");
            }
            other => panic!("{case}: cri.status {other:?}: {report}"),
        }
        // Down until after the scan: unreachable. Back before the scan asks for the pods:
        // the lost connection is made again (or the refused one tried until it is taken).
        let want = if back_at.is_none() { "unreachable" } else { "ok" };
        assert_eq!(status, want, "{case}: {}", report["errors"]);
    }
    std::fs::remove_dir_all(&slow).unwrap();
    // The pod outlived the restarts: asked again, the runtime has it ready.
    let report = scan(c, secrets, Some(kubelet), guards);
    let rows = ours(&report, c, kubelet, "shop/db");
    assert!(rows.iter().any(|r| r.4 == POD_UID && r.6 == Some(true)), "{rows:#?}");
}

/// Waits until `done` or panics after 30 s with `what`.
fn wait(what: &str, mut done: impl FnMut() -> bool) {
    let t = Instant::now();
    while !done() {
        assert!(t.elapsed() < Duration::from_secs(30), "{what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn real_containerd_over_cri() {
    if !containerd::available("real_containerd_over_cri") {
        return;
    }
    let value = String::from_utf8(fake_secret(4601)).unwrap();
    let baked = String::from_utf8(fake_secret(4602)).unwrap();
    let mut c = Containerd::start();
    c.import_image(PAUSE, &["/bin/sleep", "2147483647"], &[]);
    let conf = format!("api_key: {baked}\n");
    c.import_image(IMAGE, &["/bin/sh"], &[("etc/app.conf", conf.as_bytes())]);
    let mut cri = c.cri();
    let version = cri.version().unwrap();
    assert_eq!(version.runtime_name, "containerd", "{version:?}");

    let work = tempfile::tempdir().unwrap();
    let secrets = work.path().join("secrets.json");
    let db = Secret::opaque("shop", "db", &[("password", value.as_bytes())]);
    let image = Secret::opaque("shop", "image", &[("key", baked.as_bytes())]);
    std::fs::write(&secrets, kubectl_json(&[db, image])).unwrap();
    // Kubelet's pod dirs: one of the live pod's uid, one of a pod the runtime never saw.
    let kubelet = work.path().join("kubelet");
    for uid in [POD_UID, DEAD_UID] {
        let vol = kubelet.join("pods").join(uid).join("volumes/kubernetes.io~secret/db");
        std::fs::create_dir_all(&vol).unwrap();
        std::fs::write(vol.join("password"), &value).unwrap();
    }

    let volume = kubelet.join("pods").join(POD_UID).join("volumes/kubernetes.io~secret/db");
    let (_, id) = run_pod(
        &c,
        &mut cri,
        &[("MY_SECRET", &value)],
        "echo \"secret=$MY_SECRET\"; echo \"secret=$MY_SECRET\" > /out.txt; exec sleep 600",
        &volume,
    );
    let snapshots = c.root().join("io.containerd.snapshotter.v1.overlayfs/snapshots");
    wait("the container writes /out.txt", || {
        std::fs::read_dir(&snapshots)
            .map(|d| d.flatten().any(|e| e.path().join("fs/out.txt").exists()))
            .unwrap_or(false)
    });
    // The echo reaches the pod log through containerd's copy of the container's stdout,
    // which may lag the file the container wrote.
    wait("containerd copies the echo into the pod log", || {
        walkdir::WalkDir::new(c.pod_logs())
            .into_iter()
            .flatten()
            .filter(|e| e.file_type().is_file())
            .any(|e| std::fs::read(e.path()).is_ok_and(|b| contains(&b, b"secret=")))
    });
    let guards = [value.as_str(), baked.as_str()];
    // No --kubelet-dir: learned from where the container's volume is mounted from.
    let report = scan(&c, &secrets, None, &guards);
    assert!(report["cri"]["runtime"].as_str().unwrap().starts_with("containerd "), "{report}");
    if std::env::var_os("KRESIDUE_UPDATE_FIXTURES").is_some() {
        save_fixtures(&c, &id);
    }
    let live = ours(&report, &c, &kubelet, "shop/db");
    let row = |site: &str, category: &str, severity: &str, cid: &str, uid: &str, cl, pl| -> Row {
        (site.into(), category.into(), severity.into(), cid.into(), uid.into(), cl, pl, false)
    };
    let alive =
        |site: &str| row(site, "env-persisted", "medium", &id, POD_UID, Some(true), Some(true));
    // On tmpfs the live pod's volume is expected (info); on disk it is not.
    let tmpfs = Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(work.path())
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"tmpfs"));
    let volume = |uid: &str, live: bool| {
        let (category, severity) = match (tmpfs, live) {
            (true, true) => ("orphaned-volume", "info"),
            (true, false) => ("orphaned-volume", "critical"),
            (false, true) => ("non-tmpfs-volume", "high"),
            // A pod with no sandbox: its volume is orphaned, on disk or not.
            (false, false) => ("orphaned-volume", "critical"),
        };
        row("kubelet-secret-volume", category, severity, "-", uid, None, Some(live))
    };
    for want in [
        alive("containerd-metadata"),
        alive("oci-bundle"),
        row(
            "containerd-snapshot",
            "container-layer",
            "medium",
            &id,
            POD_UID,
            Some(true),
            Some(true),
        ),
        row("pod-log", "pod-log", "high", "-", POD_UID, Some(true), Some(true)),
        volume(POD_UID, true),
        volume(DEAD_UID, false),
    ] {
        assert!(live.contains(&want), "missing {want:?} in {live:#?}");
    }
    // The value baked into the image: one image-layer finding, named after the image.
    let layers: Vec<&Value> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["match"]["secret"] == "shop/image")
        .collect();
    assert_eq!(layers.len(), 1, "{layers:#?}");
    assert_eq!(layers[0]["category"], "image-layer");
    assert!(layers[0]["images"].as_array().unwrap().iter().any(|n| n == IMAGE), "{:#?}", layers[0]);

    restarted_mid_scan(&mut c, &secrets, &kubelet, &guards);
    let mut cri = c.cri(); // its connection died with the runtime

    // Stopped: the container still exists (exited), its leftovers are a dead container's.
    stop_container(&mut cri, &id).unwrap();
    let stopped = ours(&scan(&c, &secrets, Some(&kubelet), &guards), &c, &kubelet, "shop/db");
    let layer = stopped.iter().find(|r| r.0 == "containerd-snapshot");
    assert_eq!(
        layer,
        Some(&row(
            "containerd-snapshot",
            "dead-container",
            "high",
            &id,
            POD_UID,
            Some(false),
            Some(true)
        )),
        "{stopped:#?}"
    );
    assert!(
        stopped.iter().filter(|r| r.3 == id).all(|r| r.1 == "dead-container" && r.5 == Some(false)),
        "{stopped:#?}"
    );

    // Cleaned: the pod with no sandbox has its secret volume on a real tmpfs, as kubelet
    // leaves it; `clean --apply --remove-exited-containers` unmounts and removes it and its
    // pod dir, and has the runtime remove the exited container, whose layer then goes.
    let dead_vol = kubelet.join("pods").join(DEAD_UID).join("volumes/kubernetes.io~secret/db");
    std::fs::remove_dir_all(&dead_vol).unwrap();
    std::fs::create_dir_all(&dead_vol).unwrap();
    run(Command::new("mount").args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"]).arg(&dead_vol));
    std::fs::write(dead_vol.join("password"), &value).unwrap();
    // Older than the API server's list taken just before the clean.
    let then = std::time::SystemTime::now() - Duration::from_secs(60);
    let dead_pod = kubelet.join("pods").join(DEAD_UID);
    std::fs::File::open(&dead_pod).unwrap().set_modified(then).unwrap();
    let live_pod = kubelet.join("pods").join(POD_UID);
    let live_before = tree_digest(&live_pod);
    let journal = work.path().join("clean.jsonl");
    let cleaned = clean(&c, &secrets, &kubelet, &journal, &guards);
    let done: Vec<(String, String, bool)> = cleaned["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            assert_eq!(a["status"], "done", "{cleaned:#}");
            let what = a["path"].as_str().or(a["container"]["id"].as_str()).unwrap();
            (a["action"].as_str().unwrap().to_owned(), what.to_owned(), a["unmount"] == true)
        })
        .collect();
    let dead_dir = kubelet.join("pods").join(DEAD_UID);
    assert_eq!(
        done,
        vec![
            ("remove-volume".to_owned(), dead_vol.display().to_string(), true),
            ("remove-pod-dir".to_owned(), dead_dir.display().to_string(), false),
            ("remove-container".to_owned(), id.clone(), false),
        ],
        "{cleaned:#}"
    );
    assert!(!dead_dir.exists(), "the dead pod's dir is removed");
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains(&dead_vol.display().to_string()), "the tmpfs is unmounted");
    assert_eq!(live_before, tree_digest(&live_pod), "the live pod's dirs are untouched");
    let lines: Vec<Value> = std::fs::read_to_string(&journal)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let phases: Vec<(&str, &str)> = lines
        .iter()
        .map(|l| (l["action"].as_str().unwrap(), l["phase"].as_str().unwrap()))
        .collect();
    assert_eq!(
        phases,
        [
            ("remove-volume", "begin"),
            ("remove-volume", "end"),
            ("remove-pod-dir", "begin"),
            ("remove-pod-dir", "end"),
            ("remove-container", "begin"),
            ("remove-container", "end"),
        ]
    );
    assert!(cri.container_status(&id).unwrap().is_none(), "the runtime removed the container");
    wait("the removed container's layer goes", || {
        std::fs::read_dir(&snapshots)
            .map(|d| !d.flatten().any(|e| e.path().join("fs/out.txt").exists()))
            .unwrap_or(true)
    });

    // Removed: nothing is attributed to it; what remains (freed pages of meta.db not yet
    // reused) is reported, marked for what it is.
    let after = ours(&scan(&c, &secrets, Some(&kubelet), &guards), &c, &kubelet, "shop/db");
    assert!(
        after.iter().all(|f| f.3 != id),
        "nothing is attributed to a removed container: {after:#?}"
    );
    for f in &after {
        match f.0.as_str() {
            "containerd-metadata" => assert!(f.7, "a leftover in meta.db is a freed page: {f:?}"),
            "containerd-snapshot" | "pod-log" | "kubelet-secret-volume" => {}
            other => panic!("unexpected leftover at {other}: {after:#?}"),
        }
    }
}

/// Issue 48: a real containerd laid out as k3s, RKE2, MicroK8s and k0s lay theirs out (root,
/// state and socket at their paths, beneath a node root), a pod whose container holds a
/// Secret's value in its env, and the pod's Secret volume in the distribution's kubelet
/// dir: a plain `scan --root NODE` (no option naming a dir, no `--cri`) finds the env in
/// `meta.db` and the bundle, attributed to the container and pod and live by CRI through
/// the distribution's socket; `pods` finds that socket too; `clean` plans in the
/// distribution's kubelet dir.
#[test]
fn distributions_over_a_real_containerd() {
    if !containerd::available("distributions_over_a_real_containerd") {
        return;
    }
    let value = String::from_utf8(fake_secret(4811)).unwrap();
    let layouts = [
        (
            "k3s",
            "/var/lib/kubelet",
            "/var/lib/rancher/k3s/agent/containerd",
            "/run/k3s/containerd",
            "/run/k3s/containerd/containerd.sock",
        ),
        (
            "rke2",
            "/var/lib/kubelet",
            "/var/lib/rancher/rke2/agent/containerd",
            "/run/k3s/containerd",
            "/run/k3s/containerd/containerd.sock",
        ),
        (
            "microk8s",
            "/var/snap/microk8s/common/var/lib/kubelet",
            "/var/snap/microk8s/common/var/lib/containerd",
            "/var/snap/microk8s/common/run/containerd",
            "/var/snap/microk8s/common/run/containerd.sock",
        ),
        (
            "k0s",
            "/var/lib/k0s/kubelet",
            "/var/lib/k0s/containerd",
            "/run/k0s/containerd",
            "/run/k0s/containerd.sock",
        ),
    ];
    for (distro, kubelet, root, state, sock) in layouts {
        let c = Containerd::start_laid_out(root, state, sock);
        c.import_image(PAUSE, &["/bin/sleep", "2147483647"], &[]);
        c.import_image(IMAGE, &["/bin/sh"], &[]);
        let mut cri = c.cri();
        let node = c.node();
        let at = |p: &str| node.join(p.trim_start_matches('/'));
        let pods = at(kubelet).join("pods");
        for uid in [POD_UID, DEAD_UID] {
            let vol = pods.join(uid).join("volumes/kubernetes.io~secret/db");
            std::fs::create_dir_all(&vol).unwrap();
            std::fs::write(vol.join("password"), &value).unwrap();
        }
        let old = std::time::SystemTime::now() - Duration::from_secs(7200);
        std::fs::File::open(pods.join(DEAD_UID)).unwrap().set_modified(old).unwrap();
        let volume = pods.join(POD_UID).join("volumes/kubernetes.io~secret/db");
        let (_, id) = run_pod(&c, &mut cri, &[("MY_SECRET", &value)], "exec sleep 600", &volume);

        let work = tempfile::tempdir().unwrap();
        let secrets = work.path().join("secrets.json");
        let db = Secret::opaque("shop", "db", &[("password", value.as_bytes())]);
        std::fs::write(&secrets, kubectl_json(&[db])).unwrap();
        let run = |args: &[&std::ffi::OsStr]| {
            let out = Command::new(env!("CARGO_BIN_EXE_kresidue"))
                .args(args)
                .env("KRESIDUE_LOCK", work.path().join("kresidue.lock"))
                .output()
                .unwrap();
            for stream in [&out.stdout, &out.stderr] {
                assert!(!contains(stream, value.as_bytes()), "{distro}: a value is printed");
            }
            let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
                panic!("{distro}: {e}: {}", String::from_utf8_lossy(&out.stderr))
            });
            (out.status.code(), doc)
        };
        let os = |s: &str| std::ffi::OsString::from(s);
        let base = [os("--root"), node.clone().into_os_string(), os("--format"), os("json")];
        let scan_args: Vec<_> = [os("scan")]
            .into_iter()
            .chain(base.clone())
            .chain([os("--secrets"), secrets.clone().into_os_string()])
            .collect();
        let (code, report) = run(&scan_args.iter().map(|s| s.as_os_str()).collect::<Vec<_>>());
        assert_eq!(code, Some(1), "{distro}: {report:#}");
        assert_eq!(report["cri"]["status"], "ok", "{distro}: {report:#}");
        assert!(
            report["cri"]["endpoint"].as_str().unwrap().ends_with(sock),
            "{distro}: {report:#}"
        );
        assert!(
            report["summary"]["distributions"].as_array().unwrap().iter().any(|d| d == distro),
            "{distro}: {report:#}"
        );
        let findings = report["findings"].as_array().unwrap();
        for site in ["containerd-metadata", "oci-bundle"] {
            let f =
                findings.iter().find(|f| f["site"] == site && f["container"]["id"] == id.as_str());
            let f = f.unwrap_or_else(|| panic!("{distro}: no {site} of {id}: {report:#}"));
            assert_eq!(f["pod"]["uid"], POD_UID, "{distro}: {f:#}");
            assert_eq!(f["container"]["live"], true, "{distro}: {f:#}");
            assert_eq!(f["container"]["runtime"], "containerd", "{distro}: {f:#}");
        }
        let volumes: Vec<(&str, bool)> = findings
            .iter()
            .filter(|f| f["site"] == "kubelet-secret-volume")
            .map(|f| (f["pod"]["uid"].as_str().unwrap(), f["pod"]["live"] == true))
            .collect();
        assert!(volumes.contains(&(POD_UID, true)), "{distro}: {volumes:?}");
        assert!(volumes.contains(&(DEAD_UID, false)), "{distro}: {volumes:?}");

        let pods_args: Vec<_> = [os("pods")].into_iter().chain(base.clone()).collect();
        let (code, listed) = run(&pods_args.iter().map(|s| s.as_os_str()).collect::<Vec<_>>());
        assert_eq!(code, Some(0), "{distro}: {listed:#}");
        assert!(listed["pods"].as_array().unwrap().iter().any(|p| p["uid"] == POD_UID));

        // clean's dry run plans in the distribution's kubelet dir (none named).
        let api = work.path().join("pods.json");
        std::fs::write(
            &api,
            crate::clean::pods_json(&[crate::clean::ApiPod::running(POD_UID, "node-1")]),
        )
        .unwrap();
        let clean_args: Vec<_> = [os("clean")]
            .into_iter()
            .chain(base.clone())
            .chain([
                os("--secrets"),
                secrets.clone().into_os_string(),
                os("--pods"),
                api.into_os_string(),
            ])
            .collect();
        let (code, plan) = run(&clean_args.iter().map(|s| s.as_os_str()).collect::<Vec<_>>());
        assert_eq!(code, Some(0), "{distro}: {plan:#}");
        let dead = format!("{kubelet}/pods/{DEAD_UID}/volumes/kubernetes.io~secret/db");
        let planned: Vec<&str> =
            plan["actions"].as_array().unwrap().iter().filter_map(|a| a["path"].as_str()).collect();
        assert!(planned.contains(&dead.as_str()), "{distro}: {plan:#}");
    }
}
