//! A real containerd for the tests (Debian's, with runc and its CRI plugin), started in
//! private dirs with its own socket and driven over CRI with kresidue's own client, as
//! kubelet drives it: images built here and imported (no network), host-network pod
//! sandboxes, containers with mounts. Dropping it removes every pod, shim, mount and
//! cgroup it made. Used by `containerd` (the runtime's leftovers) and `incluster`
//! (kresidue itself run as a pod).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kresidue::cri::proto;
use kresidue::cri::{Client, Endpoint};
use sha2::{Digest, Sha256};

use super::{contains, hex, is_root};

/// The CRI namespace of containerd.
pub const NS: &str = "k8s.io";
/// The sandbox image, built from busybox by [`Containerd::import_image`].
pub const PAUSE: &str = "localhost/kresidue-pause:1";

/// A pod as kubelet names it.
pub struct PodMeta<'a> {
    /// Its namespace.
    pub namespace: &'a str,
    /// Its name.
    pub name: &'a str,
    /// Its uid (kubelet's `pods/<uid>` dir).
    pub uid: &'a str,
}

/// The host network namespace (pods have no CNI here).
pub fn host_network() -> proto::NamespaceOption {
    proto::NamespaceOption { network: proto::NamespaceMode::Node as i32, ..Default::default() }
}

/// Whether a real containerd can run here: root, `containerd`, `ctr`, `runc`, `tar` and
/// busybox-static. With `KRESIDUE_REAL_CONTAINERD` set a missing piece fails the test;
/// without, `test` says it is skipped.
// The skip message is for the person running the tests.
#[allow(clippy::print_stderr)]
pub fn available(test: &str) -> bool {
    let required = std::env::var_os("KRESIDUE_REAL_CONTAINERD").is_some();
    let tools = ["containerd", "ctr", "runc", "tar"].iter().all(|t| {
        Command::new("sh")
            .args(["-c", &format!("command -v {t}")])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if tools && is_root() && Path::new("/bin/busybox").exists() {
        return true;
    }
    assert!(!required, "KRESIDUE_REAL_CONTAINERD is set but root, containerd, ctr, runc, tar or busybox is missing");
    eprintln!("{test} skipped: needs root, containerd, ctr, runc, tar and busybox-static (set KRESIDUE_REAL_CONTAINERD=1 to require)");
    false
}

/// The timeout of the test's own CRI calls (pulling nothing, but starting runc).
pub const CALL: Duration = Duration::from_secs(60);

/// A containerd serving a private root, state dir and socket; its pods, containers,
/// shims, mounts and cgroups are removed on drop.
pub struct Containerd {
    /// Its config, root, state, socket, pods' logs and images, removed on drop.
    pub dir: tempfile::TempDir,
    /// Its root, state dir, socket and pods' log dir.
    at: [PathBuf; 4],
    child: Child,
    /// The pods' cgroup parent, unique per run.
    cgroup: String,
}

impl Containerd {
    pub fn root(&self) -> PathBuf {
        self.at[0].clone()
    }

    pub fn state(&self) -> PathBuf {
        self.at[1].clone()
    }

    pub fn sock(&self) -> PathBuf {
        self.at[2].clone()
    }

    /// A containerd in private dirs.
    pub fn start() -> Containerd {
        Self::start_at(None)
    }

    /// A containerd whose root, state dir and socket are the node paths `root`, `state`
    /// and `sock` of a node root at [`Containerd::node`], as a distribution lays them
    /// out, and its pods' logs in the node's `/var/log/pods`.
    pub fn start_laid_out(root: &str, state: &str, sock: &str) -> Containerd {
        Self::start_at(Some([root, state, sock]))
    }

    /// The node root of [`Containerd::start_laid_out`].
    pub fn node(&self) -> PathBuf {
        self.dir.path().join("node")
    }

    fn start_at(laid_out: Option<[&str; 3]>) -> Containerd {
        // Short: unix socket paths must stay under 108 bytes.
        let dir = tempfile::Builder::new().prefix("krc").tempdir_in("/tmp").unwrap();
        let base = dir.path();
        let at = match laid_out {
            None => ["root", "state", "c.sock", "pods"].map(|p| base.join(p)),
            Some([root, state, sock]) => [root, state, sock, "/var/log/pods"]
                .map(|p| base.join("node").join(p.trim_start_matches('/'))),
        };
        let [root, state, sock, pods] = at.clone().map(|p| p.display().to_string());
        std::fs::create_dir_all(&pods).unwrap();
        std::fs::create_dir_all(Path::new(&sock).parent().unwrap()).unwrap();
        let d = base.display().to_string();
        for sub in ["cni/bin", "cni/net.d", "certs.d", "runc"] {
            std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        }
        // The CRI plugin as kubelet's runtime, confined to our dirs: no CNI (pods use the
        // host network), no TCP streaming port, no AppArmor; the pause container may not
        // lower its OOM score here (no CAP_SYS_RESOURCE in this sandbox).
        let config = format!(
            r#"version = 2
root = "{root}"
state = "{state}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
                    "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]
[grpc]
  address = "{sock}"
[ttrpc]
  address = "{sock}.ttrpc"
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
        let c = Containerd { dir, at, child, cgroup };
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
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts containerd again on the same dirs; waits until it answers.
    pub fn restart(&mut self) {
        self.child = Self::spawn(self.dir.path());
        self.wait_ready();
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("containerd.log")).unwrap_or_default()
    }

    /// `ctr -a <sock> -n k8s.io ARGS`: stdout, or stderr as the error.
    pub fn ctr(&self, args: &[&str]) -> Result<String, String> {
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

    pub fn cri(&self) -> Client {
        Client::connect(&Endpoint::at(self.sock()), CALL).expect("CRI answers")
    }

    /// Builds an OCI image named `name` of busybox-static (one uncompressed layer) plus
    /// `files`, and imports it.
    pub fn import_image(&self, name: &str, entrypoint: &[&str], files: &[(&str, &[u8])]) {
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

    /// The sandbox config of `pod`, as kubelet sends it: host network (no CNI here), its
    /// log dir under our `pods/`.
    pub fn sandbox_config(&self, pod: &PodMeta) -> proto::PodSandboxConfig {
        let PodMeta { namespace, name, uid } = pod;
        proto::PodSandboxConfig {
            metadata: Some(proto::PodSandboxMetadata {
                name: (*name).into(),
                uid: (*uid).into(),
                namespace: (*namespace).into(),
                attempt: 0,
            }),
            log_directory: self
                .pod_logs()
                .join(format!("{namespace}_{name}_{uid}"))
                .display()
                .to_string(),
            labels: HashMap::from([("io.kubernetes.pod.uid".into(), (*uid).into())]),
            linux: Some(proto::LinuxPodSandboxConfig {
                cgroup_parent: self.cgroup.clone(),
                security_context: Some(proto::LinuxSandboxSecurityContext {
                    namespace_options: Some(host_network()),
                    privileged: false,
                }),
            }),
            ..Default::default()
        }
    }

    /// The pods' log dir (kubelet's `/var/log/pods`).
    pub fn pod_logs(&self) -> PathBuf {
        self.at[3].clone()
    }

    /// Runs `pod`'s sandbox; its id and config.
    pub fn run_sandbox(
        &self,
        cri: &mut Client,
        pod: &PodMeta,
    ) -> (String, proto::PodSandboxConfig) {
        let sandbox = self.sandbox_config(pod);
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
        (sid, sandbox)
    }

    /// Creates and starts container `config` in sandbox `sid` of `pod` (its labels added
    /// as kubelet's); the container's id.
    pub fn start_container(
        &self,
        cri: &mut Client,
        (sid, sandbox): &(String, proto::PodSandboxConfig),
        pod: &PodMeta,
        mut config: proto::ContainerConfig,
    ) -> String {
        let container = config.metadata.as_ref().map(|m| m.name.clone()).unwrap_or_default();
        config.labels.extend([
            ("io.kubernetes.pod.uid".to_owned(), pod.uid.to_owned()),
            ("io.kubernetes.pod.namespace".to_owned(), pod.namespace.to_owned()),
            ("io.kubernetes.pod.name".to_owned(), pod.name.to_owned()),
            ("io.kubernetes.container.name".to_owned(), container),
        ]);
        let (pod_sandbox_id, sandbox) = (sid.clone(), sandbox.clone());
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
        cid
    }

    /// Every container and sandbox stopped and removed, over CRI.
    pub fn remove_all(&self) {
        let Ok(mut cri) = Client::connect(&Endpoint::at(self.sock()), CALL) else { return };
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

pub fn stop_container(cri: &mut Client, id: &str) -> Result<(), kresidue::cri::Error> {
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

/// Runs `c`; panics with its stderr unless it succeeds.
pub fn run(c: &mut Command) {
    let out = c.output().unwrap_or_else(|e| panic!("{c:?}: {e}"));
    assert!(out.status.success(), "{c:?}: {}", String::from_utf8_lossy(&out.stderr));
}
