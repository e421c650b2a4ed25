//! Shipping: the portable binary and kresidue run in-cluster, as `deploy/daemonset.yaml`
//! says, through a real containerd.
//!
//! - The `dist` build (`scripts/build-static.sh`) is static: no program interpreter, no
//!   shared library; it runs `--help` and `--version` in an empty environment, and
//!   `--version` names the version and the commit.
//! - `scripts/build-image.sh` makes an OCI image of it that `ctr images import` takes.
//!   A real containerd (`util::containerd`) runs it as a pod over CRI, with the
//!   DaemonSet's command, arguments, security context and volume mounts read from the
//!   manifest itself: each host path the manifest names is mapped to its part of a
//!   prepared node (kubelet pod dirs of a live and an orphaned pod, the real runtime's own
//!   root, state and pod-log dirs, its socket), so a mount added to the manifest without
//!   a place here fails the test. The pod writes its Prometheus textfile to a host dir;
//!   the test parses it: the runtime answered through the mounted socket, the live pod's
//!   volume is reported live and the orphaned one orphaned, per secret.
//!
//! Both build the `dist` profile once (a few minutes on two cores). They run where the
//! real-runtime test runs (`KRESIDUE_REAL_CONTAINERD=1`, root); the static check also
//! with `KRESIDUE_DIST=1` alone.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use kresidue::cri::proto;
use serde_json::Value;

use crate::deploy::{manifest, pod_spec, strings};
use crate::util::containerd::{self, host_network, run, Containerd, PodMeta, PAUSE};
use crate::util::*;

const KRESIDUE_IMAGE: &str = "localhost/kresidue:incluster";
const APP_IMAGE: &str = "localhost/kresidue-app:1";
const LIVE_UID: &str = "1ive0000-5e2f-4a6b-8c9d-1e2f3a4b5c6d";
const GONE_UID: &str = "90ne0000-5e2f-4a6b-8c9d-1e2f3a4b5c6d";
const KRESIDUE_UID: &str = "c0de0000-5e2f-4a6b-8c9d-1e2f3a4b5c6d";

/// The `dist` binary, built once per test run by `scripts/build-static.sh` (its own
/// target dir, so cargo's lock on ours does not stand in the way).
fn dist_binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
        let out = repo.join("target/dist/kresidue");
        let built = Command::new("bash")
            .arg(repo.join("scripts/build-static.sh"))
            .arg(&out)
            .env("CARGO_TARGET_DIR", repo.join("target/dist-build"))
            .output()
            .expect("bash runs");
        assert!(
            built.status.success(),
            "build-static.sh: {}",
            String::from_utf8_lossy(&built.stderr)
        );
        out
    })
}

/// Whether the `dist` tests run here (see the module docs).
// The skip message is for the person running the tests.
#[allow(clippy::print_stderr)]
fn dist_wanted(test: &str) -> bool {
    let wanted = ["KRESIDUE_DIST", "KRESIDUE_REAL_CONTAINERD"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|v| v != "0"));
    if !wanted {
        eprintln!("{test} skipped: builds the dist binary (set KRESIDUE_DIST=1 to run)");
    }
    wanted
}

/// The dist binary is static and runs with nothing around it.
#[test]
fn the_dist_binary_is_static_and_runs_in_an_empty_environment() {
    if !dist_wanted("the_dist_binary_is_static_and_runs_in_an_empty_environment") {
        return;
    }
    let bin = dist_binary();
    let readelf = |flag: &str| {
        let out = Command::new("readelf").args([flag, "-W"]).arg(bin).output().expect("readelf");
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    };
    assert!(!readelf("-l").contains("INTERP"), "a program interpreter: dynamically linked");
    assert!(!readelf("-d").contains("(NEEDED)"), "needs shared libraries");
    // Stripped: no symbol table.
    assert!(!readelf("-S").contains(".symtab"), "not stripped");
    let ldd = Command::new("ldd").arg(bin).output().expect("ldd");
    let ldd = String::from_utf8_lossy(&ldd.stdout) + String::from_utf8_lossy(&ldd.stderr);
    assert!(ldd.contains("not a dynamic executable") || ldd.contains("statically linked"), "{ldd}");

    let help = Command::new("env").arg("-i").arg(bin).arg("--help").output().unwrap();
    assert!(help.status.success());
    assert!(String::from_utf8_lossy(&help.stdout).contains("Usage: kresidue"));
    let version = Command::new("env").arg("-i").arg(bin).arg("--version").output().unwrap();
    let version = String::from_utf8(version.stdout).unwrap();
    let expected = format!("kresidue {} (commit ", env!("CARGO_PKG_VERSION"));
    assert!(version.starts_with(&expected), "{version}");
    let commit = version.trim_end().trim_start_matches(&expected).trim_end_matches(')');
    let hex = commit.len() == 12 && commit.bytes().all(|b| b.is_ascii_hexdigit());
    assert!(hex || commit == "unknown", "{version}");
    // In a git checkout, the checkout's commit.
    let head = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|h| h.status.success());
    if let Some(head) = head {
        assert_eq!(commit, String::from_utf8_lossy(&head.stdout).trim(), "{version}");
    }
    // A scan works too: the example node, nothing but the binary.
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let scan = Command::new("env")
        .arg("-i")
        .arg(bin)
        .args(["scan", "--no-cri", "--format", "json", "--fail-on", "never", "--root"])
        .arg(fixtures.join("node"))
        .arg("--secrets")
        .arg(fixtures.join("secrets.json"))
        .output()
        .unwrap();
    assert!(scan.status.success(), "{}", String::from_utf8_lossy(&scan.stderr));
    let report: Value = serde_json::from_slice(&scan.stdout).unwrap();
    assert!(!report["findings"].as_array().unwrap().is_empty(), "{report}");
}

/// What the test maps each of the manifest's volumes to: its host path (hostPath
/// volumes) or volume name (others), and the dir or file standing for it here.
fn volume_sources(node: &Path, c: &Containerd, work: &Path) -> BTreeMap<&'static str, PathBuf> {
    BTreeMap::from([
        ("/var/lib/kubelet", node.join("var/lib/kubelet")),
        ("/var/lib/containerd", c.root()),
        ("/run/containerd", c.state()),
        ("/var/log/pods", c.pod_logs()),
        ("/etc/hostname", node.join("etc/hostname")),
        ("/run/containerd/containerd.sock", c.sock()),
        ("/var/lib/node_exporter/textfile_collector", work.join("textfile")),
        ("/var/lib/kresidue", work.join("state")),
        ("secret:kresidue-fingerprints", work.join("fingerprints")),
        ("emptyDir", work.join("tmp")),
    ])
}

/// The container config of the DaemonSet's one container, its host paths mapped by
/// `sources`, its image `image`.
fn daemonset_container(sources: &BTreeMap<&str, PathBuf>, image: &str) -> proto::ContainerConfig {
    let m = manifest("daemonset.yaml");
    let spec = pod_spec(&m);
    let c = &spec["containers"][0];
    let volumes: BTreeMap<&str, &Value> = spec["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["name"].as_str().unwrap(), v))
        .collect();
    let mounts = c["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|vm| {
            let volume = volumes[vm["name"].as_str().unwrap()];
            let source = if let Some(p) = volume["hostPath"]["path"].as_str() {
                p.to_owned()
            } else if let Some(s) = volume["secret"]["secretName"].as_str() {
                format!("secret:{s}")
            } else if volume.get("emptyDir").is_some() {
                "emptyDir".to_owned()
            } else {
                panic!("a volume the test does not know: {volume}")
            };
            let host = sources.get(source.as_str()).unwrap_or_else(|| {
                panic!("the manifest mounts {source}, which the test has no place for")
            });
            let propagation = match vm["mountPropagation"].as_str() {
                None | Some("None") => proto::MountPropagation::PropagationPrivate,
                Some("HostToContainer") => proto::MountPropagation::PropagationHostToContainer,
                Some(other) => panic!("mountPropagation {other}"),
            };
            proto::Mount {
                container_path: vm["mountPath"].as_str().unwrap().into(),
                host_path: host.display().to_string(),
                readonly: vm["readOnly"].as_bool().unwrap_or(false),
                propagation: propagation as i32,
                ..Default::default()
            }
        })
        .collect();
    let sc = &c["securityContext"];
    let caps = |k: &str| sc["capabilities"][k].as_array().map(|_| strings(&sc["capabilities"][k]));
    proto::ContainerConfig {
        metadata: Some(proto::ContainerMetadata {
            name: c["name"].as_str().unwrap().into(),
            attempt: 0,
        }),
        image: Some(proto::ImageSpec { image: image.into(), ..Default::default() }),
        command: strings(&c["command"]),
        args: strings(&c["args"]),
        mounts,
        log_path: "kresidue/0.log".into(),
        linux: Some(proto::LinuxContainerConfig {
            resources: Some(limits(&c["resources"]["limits"])),
            security_context: Some(proto::LinuxContainerSecurityContext {
                capabilities: Some(proto::Capability {
                    add_capabilities: caps("add").unwrap_or_default(),
                    drop_capabilities: caps("drop").unwrap_or_default(),
                }),
                privileged: sc["privileged"].as_bool().unwrap_or(false),
                namespace_options: Some(host_network()),
                run_as_user: sc["runAsUser"].as_i64().map(|value| proto::Int64Value { value }),
                readonly_rootfs: sc["readOnlyRootFilesystem"].as_bool().unwrap_or(false),
                no_new_privs: sc["allowPrivilegeEscalation"].as_bool() == Some(false),
            }),
        }),
        ..Default::default()
    }
}

/// The container's `limits` as kubelet passes them: CPU as a CFS quota per 100 ms period,
/// memory in bytes (the quantity forms the manifests use: `500m`, `2`, `256Mi`, `1Gi`).
fn limits(limits: &Value) -> proto::LinuxContainerResources {
    const PERIOD: i64 = 100_000;
    let cpu = limits["cpu"].as_str().map(|q| match q.strip_suffix('m') {
        Some(milli) => milli.parse::<i64>().unwrap() * PERIOD / 1000,
        None => q.parse::<i64>().unwrap() * PERIOD,
    });
    let memory = limits["memory"].as_str().map(|q| {
        let (n, unit) = q.split_at(q.find(|c: char| !c.is_ascii_digit()).unwrap_or(q.len()));
        let unit: i64 = match unit {
            "" => 1,
            "Ki" => 1 << 10,
            "Mi" => 1 << 20,
            "Gi" => 1 << 30,
            other => panic!("memory unit {other}"),
        };
        n.parse::<i64>().unwrap() * unit
    });
    proto::LinuxContainerResources {
        cpu_period: if cpu.is_some() { PERIOD } else { 0 },
        cpu_quota: cpu.unwrap_or(0),
        memory_limit_in_bytes: memory.unwrap_or(0),
        ..Default::default()
    }
}

/// The DaemonSet as a pod of a real containerd: its textfile read back.
#[test]
fn kresidue_runs_as_the_daemonset_pod_through_cri() {
    if !dist_wanted("kresidue_runs_as_the_daemonset_pod_through_cri")
        || !containerd::available("kresidue_runs_as_the_daemonset_pod_through_cri")
    {
        return;
    }
    let bin = dist_binary();
    let c = Containerd::start();
    let work = c.dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let image_tar = work.join("kresidue-image.tar");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/build-image.sh");
    run(Command::new("bash")
        .arg(script)
        .arg(&image_tar)
        .arg(KRESIDUE_IMAGE)
        .env("KRESIDUE_BIN", bin));
    let tar = image_tar.display().to_string();
    c.ctr(&["images", "import", "--snapshotter", "overlayfs", &tar]).expect("image import");
    let images = c.ctr(&["images", "ls", "-q"]).unwrap();
    assert!(images.lines().any(|l| l == KRESIDUE_IMAGE), "{images}");
    c.import_image(PAUSE, &["/bin/sleep", "2147483647"], &[]);
    c.import_image(APP_IMAGE, &["/bin/sh"], &[]);

    // The node: kubelet pod dirs of a live pod and of one the runtime never saw, each
    // with a secret of its own on disk (so each series names its pod); the hostname; a
    // shared mount, as kubelet makes its dir, so that HostToContainer propagation is
    // allowed.
    let node = c.dir.path().join("node");
    let live_value = String::from_utf8(fake_secret(4701)).unwrap();
    let gone_value = String::from_utf8(fake_secret(4702)).unwrap();
    for (uid, value) in [(LIVE_UID, &live_value), (GONE_UID, &gone_value)] {
        let vol =
            node.join("var/lib/kubelet/pods").join(uid).join("volumes/kubernetes.io~secret/db");
        std::fs::create_dir_all(&vol).unwrap();
        std::fs::write(vol.join("password"), value).unwrap();
    }
    std::fs::create_dir_all(node.join("etc")).unwrap();
    std::fs::write(node.join("etc/hostname"), "incluster-node\n").unwrap();
    let kubelet = node.join("var/lib/kubelet");
    run(Command::new("mount").arg("--bind").arg(&kubelet).arg(&kubelet));
    run(Command::new("mount").arg("--make-rshared").arg(&kubelet));
    for dir in ["textfile", "fingerprints", "tmp", "state"] {
        std::fs::create_dir_all(work.join(dir)).unwrap();
    }
    let secrets = work.join("secrets.json");
    let db = Secret::opaque("shop", "db", &[("password", live_value.as_bytes())]);
    let old = Secret::opaque("shop", "db-old", &[("password", gone_value.as_bytes())]);
    std::fs::write(&secrets, kubectl_json(&[db, old])).unwrap();
    run(Command::new(bin)
        .arg("fingerprint")
        .arg(&secrets)
        .arg("-o")
        .arg(work.join("fingerprints/cluster.fp")));

    let mut cri = c.cri();
    let app = PodMeta { namespace: "shop", name: "web-0", uid: LIVE_UID };
    let app_sandbox = c.run_sandbox(&mut cri, &app);
    let app_config = proto::ContainerConfig {
        metadata: Some(proto::ContainerMetadata { name: "app".into(), attempt: 0 }),
        image: Some(proto::ImageSpec { image: APP_IMAGE.into(), ..Default::default() }),
        command: vec!["/bin/sleep".into(), "600".into()],
        log_path: "app/0.log".into(),
        ..Default::default()
    };
    c.start_container(&mut cri, &app_sandbox, &app, app_config);

    let sources = volume_sources(&node, &c, &work);
    let config = daemonset_container(&sources, KRESIDUE_IMAGE);
    let pod = PodMeta { namespace: "kube-system", name: "kresidue-x7k2p", uid: KRESIDUE_UID };
    let sandbox = c.run_sandbox(&mut cri, &pod);
    let id = c.start_container(&mut cri, &sandbox, &pod, config);

    let textfile = work.join("textfile/kresidue.prom");
    let t = Instant::now();
    while !textfile.exists() {
        let status = cri.container_status(&id).ok();
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "no textfile after 60 s; container {status:?}; its log: {}",
            std::fs::read_to_string(
                c.pod_logs()
                    .join(format!("kube-system_kresidue-x7k2p_{KRESIDUE_UID}/kresidue/0.log"))
            )
            .unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let text = std::fs::read_to_string(&textfile).unwrap();
    for value in [&live_value, &gone_value] {
        assert!(!text.contains(value.as_str()), "a value in the textfile");
    }
    // The scan state, on the node's /var/lib/kresidue, for the next hour's scan (written
    // before the report).
    let states: Vec<_> =
        std::fs::read_dir(work.join("state")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(states.iter().any(|n| n.to_string_lossy().starts_with("state-")), "{states:?}");
    let metrics = scrape(&text);
    let sample = |name: &str, labels: &[(&str, &str)]| -> Option<f64> {
        let all = |s: &&prometheus_parse::Sample| {
            s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v))
        };
        metrics.samples.iter().find(all).map(gauge)
    };
    assert_eq!(sample("kresidue_cri_up", &[]), Some(1.0), "{text}");
    assert_eq!(sample("kresidue_cri_status", &[("status", "ok")]), Some(1.0), "{text}");
    // The orphaned pod's volume, and the live pod's, told apart by asking the runtime
    // through the mounted socket: a series for each, and none the other way round.
    let present = |secret: &str, category: &str| {
        sample(
            "kresidue_secret_present",
            &[
                ("namespace", "shop"),
                ("secret", secret),
                ("key", "password"),
                ("label", "current"),
                ("site", "kubelet-secret-volume"),
                ("category", category),
            ],
        )
    };
    assert_eq!(present("db-old", "orphaned-volume"), Some(1.0), "{text}");
    assert_eq!(present("db", "non-tmpfs-volume"), Some(1.0), "{text}");
    assert_eq!(present("db", "orphaned-volume"), None, "{text}");
    assert_eq!(present("db-old", "non-tmpfs-volume"), None, "{text}");
    assert_eq!(sample("kresidue_secret_series_dropped", &[]), Some(0.0), "{text}");
    let findings: f64 =
        metrics.samples.iter().filter(|s| s.metric == "kresidue_findings").map(gauge).sum();
    assert!(findings >= 2.0, "{text}");
}
