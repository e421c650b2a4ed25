//! The deployment manifests under `deploy/`: valid YAML, every host path mounted
//! read-only but the textfile collector's dir, the container's arguments accepted by
//! kresidue's own parser, and the DaemonSet's exact arguments run against the bundled
//! example node, its textfile parsed by a Prometheus text parser.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::Value;

use crate::util::*;

/// `deploy/NAME`, parsed as Kubernetes would.
pub(crate) fn manifest(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy").join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The pod spec of a DaemonSet or CronJob.
pub(crate) fn pod_spec(m: &Value) -> &Value {
    match m["kind"].as_str().unwrap() {
        "DaemonSet" => &m["spec"]["template"]["spec"],
        "CronJob" => &m["spec"]["jobTemplate"]["spec"]["template"]["spec"],
        other => panic!("unexpected kind {other}"),
    }
}

/// A manifest's list of strings (`command`, `args`, capabilities).
pub(crate) fn strings(v: &Value) -> Vec<String> {
    v.as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_owned()).collect()
}

/// The kresidue command line of the manifest's one container.
fn command_line(spec: &Value) -> Vec<String> {
    let containers = spec["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1);
    let c = &containers[0];
    let mut line = strings(&c["command"]);
    assert!(line[0].ends_with("/kresidue"), "{line:?}");
    line.extend(strings(&c["args"]));
    line
}

#[test]
fn manifests_mount_the_node_read_only_and_pass_the_cli_parser() {
    let distros = DISTRO_MANIFESTS.map(|(name, _)| name);
    let runtimes =
        ["daemonset.yaml", "daemonset-crio.yaml", "daemonset-docker.yaml", "cronjob.yaml"];
    for name in runtimes.into_iter().chain(distros) {
        let m = manifest(name);
        let spec = pod_spec(&m);
        let volumes = spec["volumes"].as_array().unwrap();
        let c = &spec["containers"][0];
        for mount in c["volumeMounts"].as_array().unwrap() {
            let vname = mount["name"].as_str().unwrap();
            let volume = volumes
                .iter()
                .find(|v| v["name"] == vname)
                .unwrap_or_else(|| panic!("{name}: no volume {vname}"));
            let writable = mount["readOnly"] != true;
            match (volume.get("hostPath"), writable) {
                (Some(hp), true) => assert!(
                    ["/var/lib/node_exporter/textfile_collector", "/var/lib/kresidue"]
                        .contains(&hp["path"].as_str().unwrap()),
                    "{name}: {vname} is a host path mounted writable"
                ),
                (None, true) => {
                    assert!(volume.get("emptyDir").is_some(), "{name}: {vname} writable")
                }
                _ => {}
            }
        }
        // The container cannot write anywhere else.
        assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true, "{name}");
        assert_eq!(c["securityContext"]["capabilities"]["drop"][0], "ALL", "{name}");
        // Reading every file, and asking the page cache of each (issue 51: the kernel
        // tells only a file's owner or CAP_FOWNER); nothing more.
        let caps = strings(&c["securityContext"]["capabilities"]["add"]);
        assert_eq!(caps, ["DAC_READ_SEARCH", "FOWNER"], "{name}");
        let line = command_line(spec);
        let cli =
            kresidue::cli::Cli::try_parse_from(&line).unwrap_or_else(|e| panic!("{name}: {e}"));
        let kresidue::cli::Command::Scan(scan) = cli.command else { panic!("{name}: not a scan") };
        assert_eq!(scan.search.root, Path::new("/host"));
        // Its reads bounded on any disk, not only where the idle I/O class is honoured.
        assert!(scan.search.nice, "{name}");
        assert_eq!(scan.search.max_read_rate.as_deref(), Some("50M"), "{name}");
        // An unchanged file is not read again: the state on the node, between scans.
        if scan.every.is_some() {
            let state = scan.state.as_deref().expect("--state");
            let mount = c["volumeMounts"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["mountPath"] == state.to_str().unwrap());
            let vol = mount.unwrap_or_else(|| panic!("{name}: --state not mounted"));
            assert_ne!(vol["readOnly"], true, "{name}");
        }
        assert_eq!(scan.search.format, kresidue::cli::ReportFormatArg::Prometheus);
        let out = scan.search.output.as_deref().unwrap();
        let textfile =
            c["volumeMounts"].as_array().unwrap().iter().find(|m| m["name"] == "textfile").unwrap();
        assert!(
            out.starts_with(textfile["mountPath"].as_str().unwrap()),
            "{name}: -o outside the textfile dir"
        );
        // The run lock in a dir kresidue makes itself (mode 0700) inside a writable
        // emptyDir: kubelet makes an emptyDir's root world-writable (0777), and a lock
        // there is refused (another user could hold it).
        let lock = scan.search.lock.as_deref().expect("--lock");
        let lock_dir = lock.parent().unwrap();
        let emptydirs: Vec<&Path> = c["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| {
                volumes.iter().any(|v| v["name"] == m["name"] && v.get("emptyDir").is_some())
            })
            .map(|m| Path::new(m["mountPath"].as_str().unwrap()))
            .collect();
        assert!(!emptydirs.contains(&lock_dir), "{name}: the lock {lock:?} in an emptyDir's root");
        assert_eq!(lock_dir.parent().map(|p| emptydirs.contains(&p)), Some(true), "{name}");
    }
}

/// Each DaemonSet variant mounts what its runtime's family reads by default (its data
/// root and the configuration that may move it, at their node paths under `--root`) and
/// the CRI socket its `--cri` names, read-only; the three differ only there.
#[test]
fn each_runtimes_daemonset_mounts_its_runtime() {
    let variants: [(&str, &str, &[&str]); 3] = [
        (
            "daemonset.yaml",
            "/run/containerd/containerd.sock",
            &["/var/lib/containerd", "/run/containerd"],
        ),
        (
            "daemonset-crio.yaml",
            "/var/run/crio/crio.sock",
            &["/var/lib/containers/storage", "/etc/containers", "/etc/crio"],
        ),
        (
            "daemonset-docker.yaml",
            "/run/cri-dockerd.sock",
            &["/var/lib/docker", "/run/docker", "/etc/docker"],
        ),
    ];
    let shared = |m: &Value| {
        let spec = pod_spec(m);
        let mut args = command_line(spec);
        args.retain(|a| !a.starts_with("--cri="));
        let mut host: Vec<String> = spec["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|v| v["hostPath"]["path"].as_str().map(str::to_owned))
            .collect();
        host.sort();
        (args, host)
    };
    let (base_args, base_paths) = shared(&manifest("daemonset.yaml"));
    for (name, socket, roots) in variants {
        let m = manifest(name);
        let spec = pod_spec(&m);
        let line = command_line(spec);
        assert!(line.contains(&format!("--cri=unix://{socket}")), "{name}: {line:?}");
        let c = &spec["containers"][0];
        let mounts = c["volumeMounts"].as_array().unwrap();
        let volumes = spec["volumes"].as_array().unwrap();
        let host_of = |mount: &Value| {
            let v = volumes.iter().find(|v| v["name"] == mount["name"]).unwrap();
            v["hostPath"]["path"].as_str().map(str::to_owned)
        };
        let sock = mounts.iter().find(|m| m["mountPath"] == socket).expect("the socket mounted");
        assert_eq!(host_of(sock).as_deref(), Some(socket), "{name}");
        for root in roots {
            let at = format!("/host{root}");
            let mount = mounts.iter().find(|m| m["mountPath"] == at.as_str());
            let mount = mount.unwrap_or_else(|| panic!("{name}: {root} not mounted at {at}"));
            assert_eq!(host_of(mount).as_deref(), Some(*root), "{name}");
            assert_eq!(mount["readOnly"], true, "{name}: {root}");
        }
        // Everything else as the containerd one has it.
        let (args, mut paths) = shared(&m);
        assert_eq!(args, base_args, "{name}");
        paths.retain(|p| !roots.contains(&p.as_str()) && p != socket);
        let mut base = base_paths.clone();
        base.retain(|p| !variants[0].2.contains(&p.as_str()) && p != variants[0].1);
        assert_eq!(paths, base, "{name}");
    }
}

/// A tree for work files, the fixtures dir, and the example node's fingerprint file in
/// the tree.
fn example_node() -> (NodeTree, PathBuf, PathBuf) {
    let tree = NodeTree::new();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let fp = tree.work("cluster.fp");
    let made =
        tree.run(&["fingerprint", path_arg(&fixtures.join("secrets.json")), "-o", path_arg(&fp)]);
    assert_eq!(made.code, 0, "{}", made.stderr_str());
    (tree, fixtures, fp)
}

/// The DaemonSet's arguments, with its host paths pointed at the example node and temp
/// files, run as it would: the first textfile appears, whole, and matches a JSON scan of
/// the same node; the scan runs again (`--every`) until stopped.
#[test]
fn the_daemonsets_exact_arguments_on_the_example_node() {
    let distros = DISTRO_MANIFESTS.map(|(name, _)| name);
    for name in ["daemonset.yaml", "daemonset-crio.yaml", "daemonset-docker.yaml"]
        .into_iter()
        .chain(distros)
    {
        daemonset_on_the_example_node(name);
    }
}

/// The DaemonSets of the distributions whose paths differ from kubeadm's, and their rows.
const DISTRO_MANIFESTS: [(&str, &str); 4] = [
    ("daemonset-k3s.yaml", "k3s"),
    ("daemonset-rke2.yaml", "rke2"),
    ("daemonset-microk8s.yaml", "microk8s"),
    ("daemonset-k0s.yaml", "k0s"),
];

/// Each distribution's DaemonSet mounts, read-only at its node path under `/host`, the
/// places its row of `kresidue::distros::DISTROS` names at their defaults (kubelet's dir,
/// the pod logs, containerd's root and state), and names its containerd's socket; all the
/// rest is as the containerd DaemonSet has it.
#[test]
fn each_distributions_daemonset_mounts_its_places() {
    use kresidue::distros::{DataDir, DATA, DISTROS};
    let base_args = {
        let mut a = command_line(pod_spec(&manifest("daemonset.yaml")));
        a.retain(|a| !a.starts_with("--cri="));
        a
    };
    for (name, distro) in DISTRO_MANIFESTS {
        let row = DISTROS.iter().find(|d| d.name == distro).unwrap();
        let data = row.data.map(|DataDir { default, .. }| default);
        let at = |p: &str| match p.strip_prefix(DATA) {
            Some(rest) => format!("{}{rest}", data.unwrap()),
            None => p.to_owned(),
        };
        let m = manifest(name);
        let spec = pod_spec(&m);
        let mut line = command_line(spec);
        let socket = at(row.containerds[0].socket.unwrap().at);
        assert!(line.contains(&format!("--cri=unix://{socket}")), "{name}: {line:?}");
        line.retain(|a| !a.starts_with("--cri="));
        assert_eq!(line, base_args, "{name}");
        let c = &spec["containers"][0];
        let mounts = c["volumeMounts"].as_array().unwrap();
        let volumes = spec["volumes"].as_array().unwrap();
        let host_of = |mount: &Value| {
            let v = volumes.iter().find(|v| v["name"] == mount["name"]).unwrap();
            v["hostPath"]["path"].as_str().map(str::to_owned)
        };
        let sock = mounts.iter().find(|m| m["mountPath"] == socket.as_str()).expect("the socket");
        assert_eq!(host_of(sock), Some(socket.clone()), "{name}");
        let ctrd = row.containerds[0];
        for place in [row.kubelet.at, row.pod_logs.at, ctrd.root.at, ctrd.state.at] {
            let node = at(place);
            let mount = mounts.iter().find(|m| m["mountPath"] == format!("/host{node}").as_str());
            let mount = mount.unwrap_or_else(|| panic!("{name}: {node} not mounted"));
            assert_eq!(host_of(mount), Some(node.clone()), "{name}");
            assert_eq!(mount["readOnly"], true, "{name}: {node}");
        }
    }
}

fn daemonset_on_the_example_node(name: &str) {
    let (tree, fixtures, fp) = example_node();
    let textfile = tree.work("textfile");
    std::fs::create_dir(&textfile).unwrap();
    let prom = textfile.join("kresidue.prom");
    let node = fixtures.join("node");
    let line = command_line(pod_spec(&manifest(name)));
    let swap: [(&str, PathBuf); 4] = [
        ("--root=", node.clone()),
        ("--fingerprints=", fp.clone()),
        ("--output=", prom.clone()),
        ("--lock=", tree.work("kresidue.lock")),
    ];
    let args: Vec<String> = line[1..]
        .iter()
        .map(|a| match swap.iter().find(|(flag, _)| a.starts_with(flag)) {
            Some((flag, to)) => format!("{flag}{}", to.display()),
            None => a.clone(),
        })
        .collect();
    let mut child = Command::new(env!("CARGO_BIN_EXE_kresidue"))
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while !prom.exists() {
        assert!(t.elapsed() < Duration::from_secs(60), "no textfile after 60 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Still running: it scans again after --every.
    std::thread::sleep(Duration::from_millis(200));
    assert!(child.try_wait().unwrap().is_none(), "the DaemonSet's kresidue exited");
    child.kill().unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.stderr.is_empty(), "--quiet: {}", String::from_utf8_lossy(&out.stderr));

    let text = std::fs::read_to_string(&prom).unwrap();
    let scrape = scrape(&text);
    let total: f64 =
        scrape.samples.iter().filter(|s| s.metric == "kresidue_findings").map(gauge).sum();
    let json = tree.run(&[
        "scan",
        "--root",
        path_arg(&node),
        "--fingerprints",
        path_arg(&fp),
        "--no-cri",
        "--format",
        "json",
    ]);
    let findings = json.json.as_ref().unwrap()["findings"].as_array().unwrap().len();
    assert!(findings > 0);
    assert_eq!(total as usize, findings, "{text}");
    let cri = scrape.samples.iter().find(|s| s.metric == "kresidue_cri_up").unwrap();
    assert_eq!(gauge(cri), 0.0, "no runtime at the manifest's socket here");
    let unreachable = scrape.samples.iter().find(|s| {
        s.metric == "kresidue_cri_status" && s.labels.get("status") == Some("unreachable")
    });
    assert_eq!(unreachable.map(gauge), Some(1.0), "{text}");
}

/// `deploy/node-problem-detector.json`, the custom plugin monitor: a permanent rule whose
/// arguments kresidue's parser takes as an `npd` scan, whose own `--timeout` ends before
/// node-problem-detector's, run on the example node with its paths pointed there: exit 1
/// and one line that fits the monitor's `max_output_length`.
#[test]
fn the_npd_plugin_config_on_the_example_node() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/node-problem-detector.json"),
    )
    .unwrap();
    let config: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(config["plugin"], "custom");
    let max = config["pluginConfig"]["max_output_length"].as_u64().unwrap() as usize;
    assert!(max >= kresidue::report::npd::MAX_LINE, "{max}");
    let condition = config["conditions"][0]["type"].as_str().unwrap();
    let rule = &config["rules"][0];
    assert_eq!(rule["type"], "permanent");
    assert_eq!(rule["condition"], condition);
    assert!(rule["path"].as_str().unwrap().ends_with("/kresidue"));
    let args = strings(&rule["args"]);
    let line = [vec!["kresidue".to_owned()], args.clone()].concat();
    let cli = kresidue::cli::Cli::try_parse_from(&line).unwrap();
    let kresidue::cli::Command::Scan(scan) = cli.command else { panic!("not a scan") };
    assert_eq!(scan.search.format, kresidue::cli::ReportFormatArg::Npd);
    assert_eq!(scan.search.max_read_rate.as_deref(), Some("50M"));
    assert!(scan.search.output.is_none(), "the monitor reads stdout");
    // Not in a world-writable dir (`/tmp`, `/run/lock`): a lock there is refused.
    let lock = scan.search.lock.as_deref().expect("--lock");
    assert_eq!(lock.parent(), Some(Path::new("/run/kresidue")), "{lock:?}");
    let seconds = |d: &str| humantime::parse_duration(d).unwrap();
    let own = scan.search.timeout.as_deref().expect("--timeout");
    assert!(seconds(own) < seconds(rule["timeout"].as_str().unwrap()));
    assert!(
        seconds(rule["timeout"].as_str().unwrap())
            <= seconds(config["pluginConfig"]["timeout"].as_str().unwrap())
    );

    let (tree, fixtures, fp) = example_node();
    let swap: [(&str, String); 4] = [
        ("--root=", fixtures.join("node").display().to_string()),
        ("--fingerprints=", fp.display().to_string()),
        ("--lock=", tree.work("npd.lock").display().to_string()),
        ("--cri=", format!("unix://{}", tree.work("no.sock").display())),
    ];
    let args: Vec<String> = args
        .iter()
        .map(|a| match swap.iter().find(|(flag, _)| a.starts_with(flag)) {
            Some((flag, to)) => format!("{flag}{to}"),
            None => a.clone(),
        })
        .collect();
    let out = Command::new(env!("CARGO_BIN_EXE_kresidue")).args(&args).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(stdout.trim_end().len() <= max, "{stdout}");
    assert!(stdout.starts_with("secret residue: "), "{stdout}");
    assert!(stdout.contains("cri unreachable"), "{stdout}");
    assert!(out.stderr.is_empty(), "--quiet: {}", String::from_utf8_lossy(&out.stderr));
}
