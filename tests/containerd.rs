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
//!   with the categories and severities of the README;
//! - once the container is stopped its leftovers are `dead-container`; once removed,
//!   nothing is attributed to it and whatever remains is marked for what it is.
//!
//! Needs root and `containerd`, `ctr`, `runc`, `busybox` and `tar` on the machine; `.ci/run`
//! installs them and sets `KRESIDUE_REAL_CONTAINERD=1`, which makes a missing piece a
//! failure. Without that variable the test says it is skipped and passes.
//! `KRESIDUE_UPDATE_FIXTURES=1` also saves the run's databases to `fixtures/containerd/`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kresidue::cri::proto;
use kresidue::cri::{Client, Endpoint};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::util::*;

const NS: &str = "k8s.io";
const IMAGE: &str = "localhost/kresidue-test:1";
const PAUSE: &str = "localhost/kresidue-pause:1";
const POD_UID: &str = "5d1c3b7a-0e2f-4a6b-8c9d-1e2f3a4b5c6d";
const DEAD_UID: &str = "0dead000-0e2f-4a6b-8c9d-1e2f3a4b5c6d";
/// The timeout of the test's own CRI calls (pulling nothing, but starting runc).
const CALL: Duration = Duration::from_secs(60);

/// A containerd serving a private root, state dir and socket; its pods, containers,
/// shims, mounts and cgroups are removed on drop.
struct Containerd {
    dir: tempfile::TempDir,
    child: Child,
    /// The pods' cgroup parent, unique per run.
    cgroup: String,
}

impl Containerd {
    fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    fn sock(&self) -> PathBuf {
        self.dir.path().join("c.sock")
    }

    fn start() -> Containerd {
        // Short: unix socket paths must stay under 108 bytes.
        let dir = tempfile::Builder::new().prefix("krc").tempdir_in("/tmp").unwrap();
        let d = dir.path().display().to_string();
        for sub in ["cni/bin", "cni/net.d", "certs.d", "pods", "runc"] {
            std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        }
        // The CRI plugin as kubelet's runtime, confined to our dirs: no CNI (pods use the
        // host network), no TCP streaming port, no AppArmor; the pause container may not
        // lower its OOM score here (no CAP_SYS_RESOURCE in this sandbox).
        let config = format!(
            r#"version = 2
root = "{d}/root"
state = "{d}/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
                    "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]
[grpc]
  address = "{d}/c.sock"
[ttrpc]
  address = "{d}/c.sock.ttrpc"
[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = "{d}/opt"
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "{PAUSE}"
    disable_tcp_service = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    disable_apparmor = true
    restrict_oom_score_adj = true
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "{d}/cni/bin"
      conf_dir = "{d}/cni/net.d"
    [plugins."io.containerd.grpc.v1.cri".registry]
      config_path = "{d}/certs.d"
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          Root = "{d}/runc"
          SystemdCgroup = false
"#
        );
        std::fs::write(dir.path().join("config.toml"), config).unwrap();
        let child = Self::spawn(dir.path());
        let cgroup = format!("/kresidue-test-{}", &hex(&Sha256::digest(d.as_bytes()))[..12]);
        let c = Containerd { dir, child, cgroup };
        c.wait_ready();
        c
    }

    /// Starts containerd on the config in `dir`, appending to its log.
    fn spawn(dir: &Path) -> Child {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("containerd.log"))
            .unwrap();
        Command::new("containerd")
            .arg("--config")
            .arg(dir.join("config.toml"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("containerd runs")
    }

    fn wait_ready(&self) {
        let t = Instant::now();
        while self.ctr(&["version"]).is_err() {
            assert!(t.elapsed() < Duration::from_secs(30), "containerd answers: {}", self.log());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Kills containerd (as a crash would: its shims and pods keep running).
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts containerd again on the same dirs; waits until it answers.
    fn restart(&mut self) {
        self.child = Self::spawn(self.dir.path());
        self.wait_ready();
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("containerd.log")).unwrap_or_default()
    }

    /// `ctr -a <sock> -n k8s.io ARGS`: stdout, or stderr as the error.
    fn ctr(&self, args: &[&str]) -> Result<String, String> {
        let out = Command::new("ctr")
            .arg("-a")
            .arg(self.sock())
            .args(["-n", NS])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    fn cri(&self) -> Client {
        Client::connect(&Endpoint { path: self.sock() }, CALL).expect("CRI answers")
    }

    /// Builds an OCI image named `name` of busybox-static (one uncompressed layer) plus
    /// `files`, and imports it.
    fn import_image(&self, name: &str, entrypoint: &[&str], files: &[(&str, &[u8])]) {
        let w = self.dir.path().join("img").join(hex(&Sha256::digest(name.as_bytes())));
        let rootfs = w.join("rootfs");
        std::fs::create_dir_all(rootfs.join("bin")).unwrap();
        std::fs::copy("/bin/busybox", rootfs.join("bin/busybox")).expect("busybox-static");
        for a in ["sh", "sleep", "echo", "cat"] {
            std::os::unix::fs::symlink("busybox", rootfs.join("bin").join(a)).unwrap();
        }
        for (path, bytes) in files {
            let p = rootfs.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, bytes).unwrap();
        }
        let blobs = w.join("oci/blobs/sha256");
        std::fs::create_dir_all(&blobs).unwrap();
        let layer = w.join("layer.tar");
        run(Command::new("tar")
            .args(["--sort=name", "--mtime=@0", "--numeric-owner", "--owner=0", "--group=0", "-C"])
            .arg(&rootfs)
            .arg("-cf")
            .arg(&layer)
            .arg("."));
        let blob = |bytes: &[u8]| -> (String, usize) {
            let d = hex(&Sha256::digest(bytes));
            std::fs::write(blobs.join(&d), bytes).unwrap();
            (format!("sha256:{d}"), bytes.len())
        };
        let (ldig, lsz) = blob(&std::fs::read(&layer).unwrap());
        let config = serde_json::json!({"architecture": "amd64", "os": "linux",
            "config": {"Env": ["PATH=/bin"], "Entrypoint": entrypoint, "WorkingDir": "/"},
            "rootfs": {"type": "layers", "diff_ids": [ldig]}});
        let (cdig, csz) = blob(&serde_json::to_vec(&config).unwrap());
        let manifest = serde_json::json!({"schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cdig, "size": csz},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": ldig, "size": lsz}]});
        let (mdig, msz) = blob(&serde_json::to_vec(&manifest).unwrap());
        let tag = name.rsplit(':').next().unwrap();
        let index = serde_json::json!({"schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": mdig, "size": msz, "platform": {"architecture": "amd64", "os": "linux"},
                "annotations": {"io.containerd.image.name": name,
                                "org.opencontainers.image.ref.name": tag}}]});
        std::fs::write(w.join("oci/index.json"), serde_json::to_vec(&index).unwrap()).unwrap();
        std::fs::write(w.join("oci/oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
        let tar = w.join("image.tar");
        run(Command::new("tar").arg("-C").arg(w.join("oci")).arg("-cf").arg(&tar).args([
            "oci-layout",
            "index.json",
            "blobs",
        ]));
        let tar = tar.display().to_string();
        self.ctr(&["images", "import", "--snapshotter", "overlayfs", &tar]).expect("image import");
    }

    /// The sandbox config of the test pod, as kubelet sends it: host network (no CNI here),
    /// its log dir under our `pods/`.
    fn sandbox_config(&self) -> proto::PodSandboxConfig {
        let host = proto::NamespaceOption {
            network: proto::NamespaceMode::Node as i32,
            ..Default::default()
        };
        proto::PodSandboxConfig {
            metadata: Some(proto::PodSandboxMetadata {
                name: "web-0".into(),
                uid: POD_UID.into(),
                namespace: "shop".into(),
                attempt: 0,
            }),
            log_directory: self
                .pod_logs()
                .join(format!("shop_web-0_{POD_UID}"))
                .display()
                .to_string(),
            labels: HashMap::from([("io.kubernetes.pod.uid".into(), POD_UID.into())]),
            linux: Some(proto::LinuxPodSandboxConfig {
                cgroup_parent: self.cgroup.clone(),
                security_context: Some(proto::LinuxSandboxSecurityContext {
                    namespace_options: Some(host),
                    privileged: false,
                }),
            }),
            ..Default::default()
        }
    }

    fn pod_logs(&self) -> PathBuf {
        self.dir.path().join("pods")
    }

    /// Runs the pod, and in it container `app`: `env` set, `script` run by `sh -c`, the
    /// host dir `volume` mounted at `/etc/db` (as kubelet mounts a secret volume).
    fn run_pod(
        &self,
        cri: &mut Client,
        env: &[(&str, &str)],
        script: &str,
        volume: &Path,
    ) -> (String, String) {
        let sandbox = self.sandbox_config();
        let config = sandbox.clone();
        let sid = cri
            .call("RunPodSandbox", |mut c| async move {
                c.run_pod_sandbox(proto::RunPodSandboxRequest {
                    config: Some(config),
                    runtime_handler: String::new(),
                })
                .await
            })
            .unwrap_or_else(|e| panic!("RunPodSandbox: {e}\n{}", self.log()))
            .pod_sandbox_id;
        let labels = HashMap::from([
            ("io.kubernetes.pod.uid".to_owned(), POD_UID.to_owned()),
            ("io.kubernetes.pod.namespace".to_owned(), "shop".to_owned()),
            ("io.kubernetes.pod.name".to_owned(), "web-0".to_owned()),
            ("io.kubernetes.container.name".to_owned(), "app".to_owned()),
        ]);
        let host = proto::NamespaceOption {
            network: proto::NamespaceMode::Node as i32,
            ..Default::default()
        };
        let config = proto::ContainerConfig {
            metadata: Some(proto::ContainerMetadata { name: "app".into(), attempt: 0 }),
            image: Some(proto::ImageSpec { image: IMAGE.into(), ..Default::default() }),
            command: vec!["/bin/sh".into(), "-c".into()],
            args: vec![script.into()],
            envs: env
                .iter()
                .map(|(k, v)| proto::KeyValue { key: (*k).into(), value: v.as_bytes().to_vec() })
                .collect(),
            labels,
            mounts: vec![proto::Mount {
                container_path: "/etc/db".into(),
                host_path: volume.display().to_string(),
                readonly: true,
                selinux_relabel: false,
            }],
            log_path: "app/0.log".into(),
            linux: Some(proto::LinuxContainerConfig {
                security_context: Some(proto::LinuxContainerSecurityContext {
                    privileged: false,
                    namespace_options: Some(host),
                }),
            }),
            ..Default::default()
        };
        let pod_sandbox_id = sid.clone();
        let cid = cri
            .call("CreateContainer", |mut c| async move {
                c.create_container(proto::CreateContainerRequest {
                    pod_sandbox_id,
                    config: Some(config),
                    sandbox_config: Some(sandbox),
                })
                .await
            })
            .unwrap_or_else(|e| panic!("CreateContainer: {e}\n{}", self.log()))
            .container_id;
        let container_id = cid.clone();
        cri.call("StartContainer", |mut c| async move {
            c.start_container(proto::StartContainerRequest { container_id }).await
        })
        .unwrap_or_else(|e| panic!("StartContainer: {e}\n{}", self.log()));
        (sid, cid)
    }

    /// Every container and sandbox stopped and removed, over CRI.
    fn remove_all(&self) {
        let Ok(mut cri) = Client::connect(&Endpoint { path: self.sock() }, CALL) else { return };
        // Best effort (this runs in `drop`): whatever fails is left to the steps after.
        for c in cri.containers().unwrap_or_default() {
            let _ = stop_container(&mut cri, &c.id);
            let _ = cri.remove_container(&c.id);
        }
        for p in cri.pod_sandboxes().unwrap_or_default() {
            let id = p.id.clone();
            let _ = cri.call("StopPodSandbox", |mut c| async move {
                c.stop_pod_sandbox(proto::StopPodSandboxRequest { pod_sandbox_id: id }).await
            });
            let _ = cri.call("RemovePodSandbox", |mut c| async move {
                c.remove_pod_sandbox(proto::RemovePodSandboxRequest { pod_sandbox_id: p.id }).await
            });
        }
    }
}

fn stop_container(cri: &mut Client, id: &str) -> Result<(), kresidue::cri::Error> {
    let container_id = id.to_owned();
    cri.call("StopContainer", |mut c| async move {
        c.stop_container(proto::StopContainerRequest { container_id, timeout: 2 }).await
    })
    .map(|_| ())
}

impl Drop for Containerd {
    fn drop(&mut self) {
        self.remove_all();
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Shims outlive containerd; they are started with `-address <our socket>`.
        let sock = self.sock().display().to_string();
        for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            let pid = e.file_name().to_string_lossy().into_owned();
            if pid.bytes().all(|b| b.is_ascii_digit()) && contains(&cmdline, sock.as_bytes()) {
                let _ = Command::new("sh").args(["-c", &format!("kill -9 {pid}")]).status();
            }
        }
        std::thread::sleep(Duration::from_millis(200));
        // containerd 1.6 puts shim sockets in /run/containerd/s, named by the hash of
        // `<our socket>/<namespace>/<id>`: the bundles name the ids.
        let tasks = self.state().join("io.containerd.runtime.v2.task").join(NS);
        for e in std::fs::read_dir(tasks).into_iter().flatten().flatten() {
            let id = e.file_name().to_string_lossy().trim_start_matches('.').to_owned();
            let shim = format!("{sock}/{NS}/{id}");
            let _ = std::fs::remove_file(
                Path::new("/run/containerd/s").join(hex(&Sha256::digest(shim.as_bytes()))),
            );
        }
        // Mounts (task rootfs, sandbox shm), innermost first.
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        let dir = self.dir.path().display().to_string();
        let mut ours: Vec<&str> = mounts
            .lines()
            .filter_map(|l| l.split(' ').nth(1))
            .filter(|m| m.starts_with(&dir))
            .collect();
        ours.sort_by_key(|m| std::cmp::Reverse(m.len()));
        for m in ours {
            let _ = Command::new("umount").arg("-l").arg(m).status();
        }
        // The pods' cgroups (v2: /sys/fs/cgroup/<parent>; v1: under each controller),
        // empty once their processes are gone.
        let mut groups = vec![PathBuf::from(format!("/sys/fs/cgroup{}", self.cgroup))];
        for e in std::fs::read_dir("/sys/fs/cgroup").into_iter().flatten().flatten() {
            groups.push(e.path().join(self.cgroup.trim_start_matches('/')));
        }
        for g in groups.into_iter().filter(|g| g.is_dir()) {
            for sub in std::fs::read_dir(&g).into_iter().flatten().flatten() {
                if sub.path().is_dir() {
                    let _ = std::fs::remove_dir(sub.path());
                }
            }
            let _ = std::fs::remove_dir(&g);
        }
    }
}

fn run(c: &mut Command) {
    let out = c.output().unwrap_or_else(|e| panic!("{c:?}: {e}"));
    assert!(out.status.success(), "{c:?}: {}", String::from_utf8_lossy(&out.stderr));
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
    let extra = ["--apply", "--remove-exited-containers", "--min-age", "0s", "--journal"]
        .map(std::ffi::OsStr::new)
        .into_iter()
        .chain([journal.as_os_str(), "--lock".as_ref(), lock.as_os_str()])
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

/// containerd killed while a scan runs (after it connected, while it walks 48 MiB of an
/// emptyDir, or before it connected), then started again before or after the scan asks
/// for the pods: each scan ends well within its timeout, with `cri.status` "ok" and the
/// live pod judged live when the runtime was back in time (the lost connection is made
/// again), or "unreachable" with the reason in `errors` and liveness left unknown when it
/// was down for the whole ask.
fn restarted_mid_scan(c: &mut Containerd, secrets: &Path, kubelet: &Path, guards: &[&str]) {
    let slow = kubelet.join("pods").join(DEAD_UID).join("volumes/kubernetes.io~empty-dir/big");
    std::fs::create_dir_all(&slow).unwrap();
    std::fs::write(slow.join("data.bin"), filler(4603, 48 << 20)).unwrap();
    let bin = env!("CARGO_BIN_EXE_kresidue");
    // (kill after, start again after): down until after the scan, or back within it.
    for (kill_at, back_at) in [(300, None), (300, Some(600)), (0, Some(100))] {
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
        let started = Instant::now();
        let mut child = cmd.spawn().unwrap();
        std::thread::sleep(Duration::from_millis(kill_at));
        assert!(
            child.try_wait().unwrap().is_none(),
            "the scan ended before {kill_at} ms: make the emptyDir bigger so the kill falls within it"
        );
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
// The skip message is for the person running the tests.
#[allow(clippy::print_stderr)]
fn real_containerd_over_cri() {
    let required = std::env::var_os("KRESIDUE_REAL_CONTAINERD").is_some();
    let tools = ["containerd", "ctr", "runc", "tar"].iter().all(|t| {
        Command::new("sh")
            .args(["-c", &format!("command -v {t}")])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    let root = is_root();
    if !(tools && root && Path::new("/bin/busybox").exists()) {
        assert!(!required, "KRESIDUE_REAL_CONTAINERD is set but root, containerd, ctr, runc, tar or busybox is missing");
        eprintln!("skipped: needs root, containerd, ctr, runc, tar and busybox-static (set KRESIDUE_REAL_CONTAINERD=1 to require)");
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
    let (_, id) = c.run_pod(
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
