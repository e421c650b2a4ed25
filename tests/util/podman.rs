//! A real Podman for the tests (Debian's, with conmon and runc), on a private node tree:
//! its graph root at a node path of the test's choice (`/var/lib/containers/storage`, or
//! another named by the node's `/etc/containers/storage.conf`), its run root at
//! `/run/containers/storage` and its tmp dir at `/run/libpod` of that node; cgroupfs under
//! a parent of its own, events in a file, no network (`--network none`), the k8s-file log
//! driver, and rlimits this sandbox grants (it refuses Podman's default 1048576 nofile and
//! nproc). Its own `storage.conf`, `containers.conf` and `registries.conf` (empty: nothing
//! of this machine's), images built here from busybox-static: nothing is pulled. Podman has
//! no daemon: dropping it removes every container, kills what is left of conmon and the
//! containers' processes, unmounts the layers and removes the cgroups and dirs, even when
//! the test panicked.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::docker::{
    available_with, base_tar, cgroup_parent, output_within, short_tempdir, storage_driver,
    tear_down, BASE,
};
use super::hex;

/// How long one podman command may take.
const CALL: Duration = Duration::from_secs(90);

/// The run root, as a node path (containers/storage's default).
pub const RUN_ROOT: &str = "/run/containers/storage";

/// Podman's tmp dir (libpod's default), as a node path.
pub const TMP_DIR: &str = "/run/libpod";

/// The rlimits given to every container and build step: this sandbox refuses Podman's
/// default 1048576 for nofile and nproc.
pub const ULIMITS: [&str; 4] = ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"];

/// Whether a real Podman can run here: root, podman, conmon, runc, tar and busybox-static.
pub fn available(test: &str) -> bool {
    available_with(test, "Podman", &["podman", "conmon", "runc", "tar"])
}

/// Podman over a private node tree; everything it made goes on drop.
pub struct Podman {
    /// `node/` (the node root), Podman's configs, its network config dir, TMPDIR and build
    /// contexts; `None` once torn down.
    dir: Option<tempfile::TempDir>,
    /// The graph root as a node path.
    graph_root: String,
    /// The containers' (and conmon's) cgroup parent, unique to this instance.
    cgroup: String,
    /// `overlay`, or `vfs` where overlay cannot be mounted.
    pub driver: &'static str,
}

impl Podman {
    /// Podman with its graph root at node path `graph_root`; checks it answers.
    pub fn new(graph_root: &str) -> Podman {
        let dir = short_tempdir("krp-");
        let cgroup = cgroup_parent("podman", dir.path());
        let node = dir.path().join("node");
        let graph = node.join(graph_root.trim_start_matches('/'));
        for d in [&graph, &node.join("run"), &node.join("etc"), &dir.path().join("net")] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::create_dir_all(dir.path().join("tmp")).unwrap();
        let driver = storage_driver(&graph, "overlay");
        let run_root = node.join(RUN_ROOT.trim_start_matches('/'));
        // containers/storage refuses a longer run root.
        assert!(run_root.as_os_str().len() <= 50, "run root too long: {}", run_root.display());
        let storage = format!(
            "[storage]\ndriver = \"{driver}\"\ngraphroot = \"{}\"\nrunroot = \"{}\"\n",
            graph.display(),
            run_root.display()
        );
        std::fs::write(dir.path().join("storage.conf"), storage).unwrap();
        let containers = format!(
            "[containers]\nlog_driver = \"k8s-file\"\n[engine]\ncgroup_manager = \"cgroupfs\"\n\
             events_logger = \"file\"\ntmp_dir = \"{}\"\n[network]\nnetwork_config_dir = \"{}\"\n",
            node.join(TMP_DIR.trim_start_matches('/')).display(),
            dir.path().join("net").display()
        );
        std::fs::write(dir.path().join("containers.conf"), containers).unwrap();
        std::fs::write(dir.path().join("registries.conf"), b"").unwrap();
        let p = Podman { dir: Some(dir), graph_root: graph_root.to_owned(), cgroup, driver };
        p.must(&["info", "--format", "{{.Store.GraphRoot}}"]);
        p
    }

    fn dir(&self) -> &Path {
        self.dir.as_ref().unwrap().path()
    }

    /// The node root (for `--root`).
    pub fn node(&self) -> PathBuf {
        self.dir().join("node")
    }

    /// The host path of node path `p`.
    pub fn host(&self, p: &str) -> PathBuf {
        self.node().join(p.trim_start_matches('/'))
    }

    /// The graph root as a node path.
    pub fn graph_root(&self) -> &str {
        &self.graph_root
    }

    /// A scratch dir beside the node (not in it).
    pub fn scratch(&self, name: &str) -> PathBuf {
        let p = self.dir().join(name);
        std::fs::create_dir_all(&p).unwrap();
        p
    }

    /// `podman <private roots, cgroupfs, file events> ARGS`: stdout, or stderr as the
    /// error; a command that takes more than [`CALL`] is an error.
    pub fn podman(&self, args: &[&str]) -> Result<String, String> {
        let dir = self.dir();
        let mut c = Command::new("podman");
        c.arg("--root")
            .arg(self.host(&self.graph_root))
            .arg("--runroot")
            .arg(self.host(RUN_ROOT))
            .arg("--tmpdir")
            .arg(self.host(TMP_DIR))
            .args(["--storage-driver", self.driver])
            .args(["--cgroup-manager", "cgroupfs", "--events-backend", "file"])
            .arg("--network-config-dir")
            .arg(dir.join("net"))
            .args(args)
            .env("CONTAINERS_STORAGE_CONF", dir.join("storage.conf"))
            .env("CONTAINERS_CONF", dir.join("containers.conf"))
            .env("CONTAINERS_REGISTRIES_CONF", dir.join("registries.conf"))
            .env("TMPDIR", dir.join("tmp"))
            .env_remove("CONTAINER_HOST")
            .env_remove("CONTAINER_CONNECTION");
        match output_within(&mut c, CALL) {
            None => Err(format!("podman {args:?} took more than {CALL:?}")),
            Some(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout).into_owned()),
            Some(o) => Err(format!(
                "podman {args:?}: {}: {}",
                o.status,
                String::from_utf8_lossy(&o.stderr)
            )),
        }
    }

    /// [`Self::podman`], which must succeed: its stdout, trimmed.
    pub fn must(&self, args: &[&str]) -> String {
        self.podman(args).unwrap_or_else(|e| panic!("{e}")).trim().to_owned()
    }

    /// `podman run` with no network, the k8s-file log driver, this sandbox's rlimits and
    /// this instance's cgroup parent, then `args`; its stdout, trimmed.
    pub fn run(&self, args: &[&str]) -> String {
        let mut all = vec!["run", "--network", "none", "--log-driver", "k8s-file"];
        all.extend(ULIMITS);
        all.extend(["--cgroup-parent", &self.cgroup]);
        all.extend(args);
        self.must(&all)
    }

    /// Imports [`BASE`] (busybox-static) from a tar built here.
    pub fn import_base(&self) {
        let tar = base_tar(&self.scratch("base"));
        self.must(&["import", tar.to_str().unwrap(), BASE]);
    }

    /// `podman build` (no network, nothing pulled) of `dockerfile` with `build_args`,
    /// tagged `tag`; the image id.
    pub fn build(&self, tag: &str, dockerfile: &str, build_args: &[(&str, &str)]) -> String {
        let ctx = self.scratch(&format!("ctx-{}", hex(&Sha256::digest(tag.as_bytes()))));
        std::fs::write(ctx.join("Dockerfile"), dockerfile).unwrap();
        let args: Vec<String> = build_args.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mut cmd = vec!["build", "-q", "--network", "none", "--pull=never"];
        cmd.extend(ULIMITS);
        // Buildah runs each step in the cgroup it is given itself (not in a child of it),
        // which must hold no other process: a child of ours.
        let cgroup = format!("{}/build", self.cgroup);
        cmd.extend(["--cgroup-parent", &cgroup, "-t", tag]);
        for a in &args {
            cmd.extend(["--build-arg", a.as_str()]);
        }
        cmd.push(ctx.to_str().unwrap());
        self.must(&cmd).lines().last().unwrap_or_default().to_owned()
    }
}

impl Drop for Podman {
    fn drop(&mut self) {
        // Best effort: whatever fails is left to the steps after.
        let _ = self.podman(&["rm", "-a", "-f", "-t", "0"]);
        let dir = self.dir.take().unwrap();
        tear_down(dir, &self.cgroup);
    }
}
