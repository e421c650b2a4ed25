//! A real Docker for the tests (Debian's `docker.io`: dockerd, its own containerd, runc),
//! started in a private node tree: its data root at a node path of the test's choice
//! (`/var/lib/docker`, or another named by the node's `/etc/docker/daemon.json`), its exec
//! root at `/run/docker` and its API socket at `/run/docker.sock` of that node, no network
//! (`--bridge=none`, containers `--network none`), no iptables, cgroups under a parent of
//! its own (cgroupfs). Images are built here from busybox-static (`docker import`, then
//! classic `docker build`): nothing is pulled. Dropping it removes every container, stops
//! dockerd and its containerd, kills what is left of their processes, unmounts what they
//! mounted and removes their cgroups and dirs, even when the test panicked.
//!
//! The pieces shared with [`super::podman`] are here too: the busybox base image's tar,
//! the overlay probe, and the clean-up of processes, mounts and cgroups.

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use super::containerd::run;
use super::{contains, hex, is_root};

/// The base image every test image is built `FROM`: busybox-static and its applets.
pub const BASE: &str = "localhost/kresidue-base:1";

/// Makes a missing runtime a failure instead of a skip (`.ci/run` sets it).
pub const REQUIRE: &str = "KRESIDUE_REAL_RUNTIMES";

/// How long dockerd may take to answer, and a client command to finish.
const START: Duration = Duration::from_secs(60);

/// Whether `tool` is on `PATH`.
pub fn has(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether a runtime needing `tools` can run here (root, busybox-static, `tar` and the
/// tools). With [`REQUIRE`] set a missing piece fails the test; without, `test` says it is
/// skipped.
// The skip message is for the person running the tests.
#[allow(clippy::print_stderr)]
pub fn available_with(test: &str, runtime: &str, tools: &[&str]) -> bool {
    let required = std::env::var_os(REQUIRE).is_some();
    let missing: Vec<&str> = tools.iter().copied().filter(|t| !has(t)).collect();
    let root = is_root();
    let busybox = Path::new("/bin/busybox").exists();
    if missing.is_empty() && root && busybox {
        return true;
    }
    let why = format!(
        "needs root ({}), busybox-static ({}) and {tools:?} (missing: {missing:?})",
        if root { "yes" } else { "no" },
        if busybox { "yes" } else { "no" }
    );
    assert!(!required, "{REQUIRE} is set but {runtime} cannot run: {why}");
    eprintln!("{test} skipped: {runtime} {why} (set {REQUIRE}=1 to require)");
    false
}

/// Whether a real Docker can run here: root, dockerd, the docker client, containerd, runc,
/// tar and busybox-static.
pub fn available(test: &str) -> bool {
    available_with(test, "Docker", &["dockerd", "docker", "containerd", "runc", "tar"])
}

/// The docker client: Debian's, of the daemon's own version, when it is there (another
/// one earlier on `PATH` may speak a newer API and want buildx for `build`).
fn client() -> &'static str {
    if Path::new("/usr/bin/docker").exists() {
        "/usr/bin/docker"
    } else {
        "docker"
    }
}

/// A private temp dir short enough for the unix sockets and the paths runtimes limit
/// (Podman's run root may not be longer than 50 bytes).
pub fn short_tempdir(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(prefix).tempdir_in("/tmp").unwrap()
}

/// `dir/rootfs` (busybox-static and the applets the tests run) packed as `dir/base.tar`,
/// ready for `docker import` / `podman import`.
pub fn base_tar(dir: &Path) -> PathBuf {
    let rootfs = dir.join("rootfs");
    std::fs::create_dir_all(rootfs.join("bin")).unwrap();
    std::fs::create_dir_all(rootfs.join("tmp")).unwrap();
    std::fs::copy("/bin/busybox", rootfs.join("bin/busybox")).expect("busybox-static");
    for a in ["sh", "cat", "echo", "sleep", "true", "printf"] {
        std::os::unix::fs::symlink("busybox", rootfs.join("bin").join(a)).unwrap();
    }
    let tar = dir.join("base.tar");
    run(Command::new("tar")
        .args(["--sort=name", "--mtime=@0", "--numeric-owner", "--owner=0", "--group=0", "-C"])
        .arg(&rootfs)
        .arg("-cf")
        .arg(&tar)
        .arg("."));
    std::fs::remove_dir_all(&rootfs).unwrap();
    tar
}

/// Whether the kernel mounts an overlay with its upper dir in `dir` (else the runtimes fall
/// back to `vfs`, and say so).
pub fn overlay_mountable(dir: &Path) -> bool {
    let probe = dir.join("overlay-probe");
    for d in ["lower", "upper", "work", "merged"] {
        std::fs::create_dir_all(probe.join(d)).unwrap();
    }
    let p = probe.display();
    let ok = Command::new("mount")
        .args(["-t", "overlay", "overlay", "-o"])
        .arg(format!("lowerdir={p}/lower,upperdir={p}/upper,workdir={p}/work"))
        .arg(probe.join("merged"))
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        let _ = Command::new("umount").arg(probe.join("merged")).status();
    }
    let _ = std::fs::remove_dir_all(&probe);
    ok
}

/// The storage driver to use under `dir`: `overlay` (as Docker calls it, `overlay2`), or
/// `vfs` when overlay cannot be mounted there, said on stderr.
// The fallback note is for the person running the tests.
#[allow(clippy::print_stderr)]
pub fn storage_driver(dir: &Path, overlay: &'static str) -> &'static str {
    if overlay_mountable(dir) {
        overlay
    } else {
        eprintln!("note: overlay cannot be mounted in {}: falling back to vfs", dir.display());
        "vfs"
    }
}

/// A cgroup parent unique to `dir` (cgroupfs: `/sys/fs/cgroup[/<controller>]<parent>`).
pub fn cgroup_parent(kind: &str, dir: &Path) -> String {
    let d = dir.display().to_string();
    format!("/kresidue-{kind}-{}", &hex(&Sha256::digest(d.as_bytes()))[..12])
}

/// The dirs of cgroup `parent` in every hierarchy (v2, or each v1 controller).
fn cgroup_dirs(parent: &str) -> Vec<PathBuf> {
    let rel = parent.trim_start_matches('/');
    let mut out = vec![Path::new("/sys/fs/cgroup").join(rel)];
    for e in std::fs::read_dir("/sys/fs/cgroup").into_iter().flatten().flatten() {
        out.push(e.path().join(rel));
    }
    out.into_iter().filter(|g| g.is_dir()).collect()
}

/// Kills (SIGKILL) every process whose command line names `dir` or that is in cgroup
/// `parent`, but not this process.
pub fn kill_leftovers(dir: &Path, parent: &str) {
    let me = std::process::id().to_string();
    let d = dir.display().to_string();
    let mut pids: Vec<String> = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let pid = e.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) || pid == me {
            continue;
        }
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        if contains(&cmdline, d.as_bytes()) {
            pids.push(pid);
        }
    }
    for g in cgroup_dirs(parent) {
        for e in walkdir::WalkDir::new(&g).into_iter().flatten() {
            if e.file_name() == "cgroup.procs" {
                let procs = std::fs::read_to_string(e.path()).unwrap_or_default();
                pids.extend(procs.lines().map(str::to_owned).filter(|p| *p != me));
            }
        }
    }
    pids.sort();
    pids.dedup();
    for pid in &pids {
        let _ = Command::new("kill").args(["-9", pid]).stderr(Stdio::null()).status();
    }
    if !pids.is_empty() {
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// The mount points at or below `dir`, innermost first.
pub fn mounts_under(dir: &Path) -> Vec<String> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let d = dir.display().to_string();
    let mut ours: Vec<String> = mounts
        .lines()
        .filter_map(|l| l.split(' ').nth(1))
        // /proc/mounts escapes spaces as \040; our paths have none.
        .filter(|m| *m == d || m.starts_with(&format!("{d}/")))
        .map(str::to_owned)
        .collect();
    ours.sort_by_key(|m| std::cmp::Reverse(m.len()));
    ours
}

/// Unmounts everything at or below `dir`, innermost first (lazily: a busy one goes when
/// its last user does); whether nothing is left mounted there.
pub fn unmount_all(dir: &Path) -> bool {
    for _ in 0..3 {
        let ours = mounts_under(dir);
        if ours.is_empty() {
            return true;
        }
        for m in ours {
            let _ = Command::new("umount").arg("-l").arg(&m).stderr(Stdio::null()).status();
        }
    }
    mounts_under(dir).is_empty()
}

/// Removes cgroup `parent` and its children (empty once their processes are gone).
pub fn remove_cgroups(parent: &str) {
    for g in cgroup_dirs(parent) {
        let mut dirs: Vec<PathBuf> = walkdir::WalkDir::new(&g)
            .into_iter()
            .flatten()
            .filter(|e| e.file_type().is_dir())
            .map(|e| e.into_path())
            .collect();
        dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        for d in dirs {
            let _ = std::fs::remove_dir(d);
        }
    }
}

/// The end of every private runtime dir: processes killed, mounts and cgroups removed,
/// then the dir, unless something stays mounted in it (then it is left, and said:
/// removing it would reach into the mount).
// The leftover note is for the person running the tests.
#[allow(clippy::print_stderr)]
pub fn tear_down(dir: tempfile::TempDir, cgroup: &str) {
    kill_leftovers(dir.path(), cgroup);
    let unmounted = unmount_all(dir.path());
    remove_cgroups(cgroup);
    if unmounted {
        drop(dir);
    } else {
        let kept = dir.keep();
        eprintln!("note: {} is left: still mounted: {:?}", kept.display(), mounts_under(&kept));
    }
}

/// Runs `c` with a deadline; its exit status and output, or `None` when it was killed
/// at the deadline.
pub fn output_within(c: &mut Command, limit: Duration) -> Option<std::process::Output> {
    let mut child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{c:?}: {e}"));
    let t = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return Some(child.wait_with_output().unwrap());
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait_with_output();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A dockerd (and the containerd it starts for itself) over a private node tree; every
/// container, process, mount and cgroup it made goes on drop.
pub struct Dockerd {
    /// `node/` (the node root), the daemon's config, log and pid file, the client's config
    /// and build contexts; `None` once torn down.
    dir: Option<tempfile::TempDir>,
    child: Child,
    /// The data root as a node path.
    data_root: String,
    /// The containers' cgroup parent, unique to this daemon.
    cgroup: String,
    /// `overlay2`, or `vfs` where overlay cannot be mounted.
    pub driver: &'static str,
}

impl Dockerd {
    /// Starts dockerd with its data root at node path `data_root` (`/var/lib/docker`, or
    /// another as a node's `daemon.json` names), its exec root at `/run/docker` and its API
    /// socket at `/run/docker.sock` of the node, and waits until it answers.
    pub fn start(data_root: &str) -> Dockerd {
        let dir = short_tempdir("krd-");
        let cgroup = cgroup_parent("docker", dir.path());
        let node = dir.path().join("node");
        for d in [data_root.trim_start_matches('/'), "run/docker", "etc"] {
            std::fs::create_dir_all(node.join(d)).unwrap();
        }
        std::fs::create_dir_all(dir.path().join("client")).unwrap();
        // Its own config (none of this machine's /etc/docker/daemon.json).
        std::fs::write(dir.path().join("daemon.json"), b"{}").unwrap();
        let driver = storage_driver(&node.join(data_root.trim_start_matches('/')), "overlay2");
        let log = std::fs::File::create(dir.path().join("dockerd.log")).unwrap();
        let mut d = Dockerd {
            child: Command::new("dockerd")
                .arg("--config-file")
                .arg(dir.path().join("daemon.json"))
                .arg("--data-root")
                .arg(node.join(data_root.trim_start_matches('/')))
                .arg("--exec-root")
                .arg(node.join("run/docker"))
                .arg("--pidfile")
                .arg(dir.path().join("dockerd.pid"))
                .arg("-H")
                .arg(format!("unix://{}", node.join("run/docker.sock").display()))
                .args(["--iptables=false", "--ip6tables=false", "--bridge=none"])
                .args(["--storage-driver", driver, "--log-driver", "json-file"])
                .args(["--exec-opt", "native.cgroupdriver=cgroupfs", "--cgroup-parent", &cgroup])
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .expect("dockerd runs"),
            dir: Some(dir),
            data_root: data_root.to_owned(),
            cgroup,
            driver,
        };
        d.wait_ready();
        d
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

    /// The data root as a node path.
    pub fn data_root(&self) -> &str {
        &self.data_root
    }

    /// dockerd's API socket (host path).
    pub fn sock(&self) -> PathBuf {
        self.host("/run/docker.sock")
    }

    /// A scratch dir beside the node (not in it).
    pub fn scratch(&self, name: &str) -> PathBuf {
        let p = self.dir().join(name);
        std::fs::create_dir_all(&p).unwrap();
        p
    }

    /// The daemon's log (its last 6000 bytes), for failure messages.
    pub fn log(&self) -> String {
        let log = std::fs::read(self.dir().join("dockerd.log")).unwrap_or_default();
        String::from_utf8_lossy(&log[log.len().saturating_sub(6000)..]).into_owned()
    }

    fn wait_ready(&mut self) {
        let t = Instant::now();
        loop {
            if UnixStream::connect(self.sock()).is_ok() && self.docker(&["version"]).is_ok() {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("dockerd exited ({status}):\n{}", self.log());
            }
            assert!(t.elapsed() < START, "dockerd answers within {START:?}:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `docker -H <its socket> ARGS` (classic builder, the test's own client config):
    /// stdout, or stderr as the error; a command that takes more than a minute is an
    /// error.
    pub fn docker(&self, args: &[&str]) -> Result<String, String> {
        let mut c = Command::new(client());
        c.arg("-H")
            .arg(format!("unix://{}", self.sock().display()))
            .args(args)
            .env("DOCKER_CONFIG", self.dir().join("client"))
            .env("DOCKER_BUILDKIT", "0")
            .env_remove("DOCKER_HOST")
            .env_remove("DOCKER_CONTEXT");
        match output_within(&mut c, START) {
            None => Err(format!("docker {args:?} took more than {START:?}")),
            Some(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout).into_owned()),
            Some(o) => Err(format!(
                "docker {args:?}: {}: {}",
                o.status,
                String::from_utf8_lossy(&o.stderr)
            )),
        }
    }

    /// [`Self::docker`], which must succeed: its stdout, trimmed.
    pub fn must(&self, args: &[&str]) -> String {
        match self.docker(args) {
            Ok(out) => out.trim().to_owned(),
            Err(e) => panic!("{e}\ndockerd's log:\n{}", self.log()),
        }
    }

    /// Imports [`BASE`] (busybox-static) from a tar built here.
    pub fn import_base(&self) {
        let tar = base_tar(&self.scratch("base"));
        self.must(&["import", tar.to_str().unwrap(), BASE]);
    }

    /// `docker build` (the classic builder, no network) of `dockerfile` with `build_args`,
    /// tagged `tag`; the image id.
    pub fn build(&self, tag: &str, dockerfile: &str, build_args: &[(&str, &str)]) -> String {
        let ctx = self.scratch(&format!("ctx-{}", hex(&Sha256::digest(tag.as_bytes()))));
        std::fs::write(ctx.join("Dockerfile"), dockerfile).unwrap();
        let args: Vec<String> = build_args.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mut cmd = vec!["build", "-q", "--network", "none", "-t", tag];
        for a in &args {
            cmd.extend(["--build-arg", a.as_str()]);
        }
        cmd.push(ctx.to_str().unwrap());
        self.must(&cmd)
    }

    /// Stops and removes every container (best effort: this runs in `drop`).
    fn remove_all(&self) {
        if let Ok(ids) = self.docker(&["ps", "-aq"]) {
            let ids: Vec<&str> = ids.split_whitespace().collect();
            if !ids.is_empty() {
                let mut args = vec!["rm", "-f", "-v"];
                args.extend(ids);
                let _ = self.docker(&args);
            }
        }
    }

    /// Stops dockerd: SIGTERM (it stops its containerd and unmounts), SIGKILL after 20 s.
    fn stop(&mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(20) {
            if self.child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Dockerd {
    fn drop(&mut self) {
        self.remove_all();
        self.stop();
        // containerd 1.6 keeps shim sockets in /run/containerd/s, named by the hash of
        // `<its socket>/<namespace>/<id>` (a graceful stop removes them).
        let sock = self.host("/run/docker/containerd/containerd.sock").display().to_string();
        let tasks = self.host("/run/docker/containerd/daemon/io.containerd.runtime.v2.task/moby");
        let ids: Vec<String> = std::fs::read_dir(tasks)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        let dir = self.dir.take().unwrap();
        tear_down(dir, &self.cgroup);
        for id in ids {
            let shim = format!("{sock}/moby/{id}");
            let _ = std::fs::remove_file(
                Path::new("/run/containerd/s").join(hex(&Sha256::digest(shim.as_bytes()))),
            );
        }
    }
}
