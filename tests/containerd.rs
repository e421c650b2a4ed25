//! A real containerd (Debian's, with runc), started by the test in private dirs: an image
//! built here from busybox-static is imported (no network), a container runs with a
//! generated secret in its env and writes it into its writable layer, and the built
//! binary scans the node: the value is found in `meta.db`, the task bundle and the
//! writable layer, each attributed to the container; after the container is removed,
//! nothing is attributed to it any more and whatever remains is reported.
//!
//! Needs root and `containerd`, `ctr`, `runc`, `busybox` and `tar` on the machine; `.ci/run`
//! installs them and sets `KRESIDUE_REAL_CONTAINERD=1`, which makes a missing piece a
//! failure. Without that variable the test says it is skipped and passes.
//! `KRESIDUE_UPDATE_FIXTURES=1` also saves the run's databases to `fixtures/containerd/`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::util::*;

const NS: &str = "k8s.io";
const IMAGE: &str = "localhost/kresidue-test:1";
const POD_UID: &str = "5d1c3b7a-0e2f-4a6b-8c9d-1e2f3a4b5c6d";

/// A containerd serving a private root, state dir and socket; stopped and cleaned up on
/// drop.
struct Containerd {
    dir: tempfile::TempDir,
    child: Child,
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
        let config = format!(
            "version = 2\nroot = \"{d}/root\"\nstate = \"{d}/state\"\n\
             disabled_plugins = [\"io.containerd.grpc.v1.cri\", \"io.containerd.snapshotter.v1.aufs\",\n\
             \"io.containerd.snapshotter.v1.btrfs\", \"io.containerd.snapshotter.v1.devmapper\",\n\
             \"io.containerd.snapshotter.v1.zfs\"]\n\
             [grpc]\n  address = \"{d}/c.sock\"\n[ttrpc]\n  address = \"{d}/c.sock.ttrpc\"\n\
             [plugins]\n  [plugins.\"io.containerd.internal.v1.opt\"]\n    path = \"{d}/opt\"\n"
        );
        std::fs::write(dir.path().join("config.toml"), config).unwrap();
        let log = std::fs::File::create(dir.path().join("containerd.log")).unwrap();
        let child = Command::new("containerd")
            .arg("--config")
            .arg(dir.path().join("config.toml"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("containerd runs");
        let c = Containerd { dir, child };
        let t = Instant::now();
        while c.ctr(&["version"]).is_err() {
            assert!(t.elapsed() < Duration::from_secs(30), "containerd answers: {}", c.log());
            std::thread::sleep(Duration::from_millis(100));
        }
        c
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

    /// Builds an OCI image of busybox-static (one uncompressed layer) and imports it.
    fn import_image(&self) {
        let w = self.dir.path().join("img");
        let rootfs = w.join("rootfs");
        std::fs::create_dir_all(rootfs.join("bin")).unwrap();
        std::fs::copy("/bin/busybox", rootfs.join("bin/busybox")).expect("busybox-static");
        for a in ["sh", "sleep", "echo"] {
            std::os::unix::fs::symlink("busybox", rootfs.join("bin").join(a)).unwrap();
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
            "config": {"Env": ["PATH=/bin"], "Entrypoint": ["/bin/sh"], "WorkingDir": "/"},
            "rootfs": {"type": "layers", "diff_ids": [ldig]}});
        let (cdig, csz) = blob(&serde_json::to_vec(&config).unwrap());
        let manifest = serde_json::json!({"schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cdig, "size": csz},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": ldig, "size": lsz}]});
        let (mdig, msz) = blob(&serde_json::to_vec(&manifest).unwrap());
        let index = serde_json::json!({"schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": mdig, "size": msz, "platform": {"architecture": "amd64", "os": "linux"},
                "annotations": {"io.containerd.image.name": IMAGE,
                                "org.opencontainers.image.ref.name": "1"}}]});
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

    /// Removes the container `id` and its task; true when it is gone.
    fn remove(&self, id: &str) -> bool {
        let _ = self.ctr(&["tasks", "kill", "-s", "SIGKILL", id]);
        let t = Instant::now();
        while self.ctr(&["tasks", "delete", "-f", id]).is_err()
            && self.ctr(&["tasks", "ls", "-q"]).is_ok_and(|l| l.lines().any(|t| t == id))
            && t.elapsed() < Duration::from_secs(20)
        {
            std::thread::sleep(Duration::from_millis(100));
        }
        self.ctr(&["containers", "delete", id]).is_ok()
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        // Containers left by a failed test: their tasks, runc state and shim sockets live
        // in fixed places under /run/containerd, not in our dirs.
        for id in self.ctr(&["containers", "ls", "-q"]).unwrap_or_default().lines() {
            self.remove(id);
            let _ = std::fs::remove_dir_all(Path::new("/run/containerd/runc").join(NS).join(id));
            let shim = format!("{}/{NS}/{id}", self.sock().display());
            let _ = std::fs::remove_file(
                Path::new("/run/containerd/s").join(hex(&Sha256::digest(shim.as_bytes()))),
            );
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Shims are started with `-address <our socket>`.
        let sock = self.sock().display().to_string();
        for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            let pid = e.file_name().to_string_lossy().into_owned();
            if pid.bytes().all(|b| b.is_ascii_digit()) && contains(&cmdline, sock.as_bytes()) {
                let _ = Command::new("sh").args(["-c", &format!("kill -9 {pid}")]).status();
            }
        }
        std::thread::sleep(Duration::from_millis(200));
        // Overlay mounts of the task rootfs, innermost first.
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
    }
}

fn run(c: &mut Command) {
    let out = c.output().unwrap_or_else(|e| panic!("{c:?}: {e}"));
    assert!(out.status.success(), "{c:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// `kresidue scan --root / --no-cri` over this containerd's dirs, as JSON.
fn scan(c: &Containerd, secrets: &Path, guard: &[u8]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_kresidue"))
        .args(["scan", "--root", "/", "--no-cri", "--format", "json", "--secrets"])
        .arg(secrets)
        .arg("--containerd-root")
        .arg(c.root())
        .arg("--containerd-state")
        .arg(c.state())
        .args(["--kubelet-dir", "/nonexistent-kubelet", "--pod-log-dir", "/nonexistent-logs"])
        .output()
        .unwrap();
    for stream in [&out.stdout, &out.stderr] {
        assert!(!contains(stream, guard), "the value is printed");
    }
    assert!(out.status.code() == Some(0) || out.status.code() == Some(1), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Findings of `secret` under this containerd's dirs: (site, category, container id, pod
/// uid, stale).
fn ours(report: &Value, c: &Containerd) -> Vec<(String, String, String, String, bool)> {
    let dir = c.dir.path().display().to_string();
    let s = |v: &Value| v.as_str().unwrap_or("-").to_owned();
    let mut out: Vec<_> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["path"].as_str().unwrap_or("").starts_with(&dir))
        .map(|f| {
            (
                s(&f["site"]),
                s(&f["category"]),
                s(&f["container"]["id"]),
                s(&f["pod"]["uid"]),
                f["stale"].as_bool().unwrap_or(false),
            )
        })
        .collect();
    out.sort();
    out
}

/// Copies this run's `meta.db` and overlayfs `metadata.db` to `fixtures/containerd/`
/// (the bbolt reader's unit tests read them), with the container id they hold.
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

#[test]
// The skip message is for the person running the tests.
#[allow(clippy::print_stderr)]
fn real_containerd_env_secret_is_found_and_attributed() {
    let required = std::env::var_os("KRESIDUE_REAL_CONTAINERD").is_some();
    let tools = ["containerd", "ctr", "runc", "tar"].iter().all(|t| {
        Command::new("sh")
            .args(["-c", &format!("command -v {t}")])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    let root = Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout == b"0\n");
    if !(tools && root && Path::new("/bin/busybox").exists()) {
        assert!(!required, "KRESIDUE_REAL_CONTAINERD is set but root, containerd, ctr, runc, tar or busybox is missing");
        eprintln!("skipped: needs root, containerd, ctr, runc, tar and busybox-static (set KRESIDUE_REAL_CONTAINERD=1 to require)");
        return;
    }
    let c = Containerd::start();
    c.import_image();
    let value = String::from_utf8(fake_secret(4601)).unwrap();
    let work = tempfile::tempdir().unwrap();
    let secrets = work.path().join("secrets.json");
    let secret = Secret::opaque("shop", "db", &[("password", value.as_bytes())]);
    std::fs::write(&secrets, kubectl_json(&[secret])).unwrap();
    // Unique, like a runtime's: runc keeps state under a fixed /run path by id.
    let id = hex(&Sha256::digest(format!("{:?}{}", Instant::now(), std::process::id())));
    let env = format!("MY_SECRET={value}");
    c.ctr(&[
        "run",
        "-d",
        "--snapshotter",
        "overlayfs",
        "--net-host",
        "--env",
        &env,
        "--label",
        &format!("io.kubernetes.pod.uid={POD_UID}"),
        "--label",
        "io.kubernetes.container.name=app",
        IMAGE,
        &id,
        "/bin/sh",
        "-c",
        "echo \"secret=$MY_SECRET\" > /out.txt; exec sleep 600",
    ])
    .unwrap_or_else(|e| panic!("ctr run: {e}\n{}", c.log()));
    // Wait for the container to write the value into its writable layer.
    let snapshots = c.root().join("io.containerd.snapshotter.v1.overlayfs/snapshots");
    let t = Instant::now();
    while !std::fs::read_dir(&snapshots)
        .map(|d| d.flatten().any(|e| e.path().join("fs/out.txt").exists()))
        .unwrap_or(false)
    {
        assert!(t.elapsed() < Duration::from_secs(30), "the container writes /out.txt");
        std::thread::sleep(Duration::from_millis(100));
    }

    let live = ours(&scan(&c, &secrets, value.as_bytes()), &c);
    if std::env::var_os("KRESIDUE_UPDATE_FIXTURES").is_some() {
        save_fixtures(&c, &id);
    }
    // (site, category, container id, pod uid, stale): the pod from the container's labels
    // (meta.db, the layer) or the spec's annotations, which `ctr run` fills from them.
    let has = |site: &str, category: &str, pod: &str| {
        live.contains(&(site.into(), category.into(), id.clone(), pod.into(), false))
    };
    assert!(has("containerd-metadata", "env-persisted", POD_UID), "meta.db: {live:?}");
    assert!(has("oci-bundle", "env-persisted", POD_UID), "bundle: {live:?}");
    assert!(has("containerd-snapshot", "container-layer", POD_UID), "writable layer: {live:?}");

    assert!(c.remove(&id), "the container is removed: {}", c.log());
    let after = ours(&scan(&c, &secrets, value.as_bytes()), &c);
    assert!(
        after.iter().all(|f| f.2 != id),
        "nothing is attributed to a removed container: {after:?}"
    );
    // What remains (freed pages of meta.db not yet reused, a layer not yet collected) is
    // reported, marked for what it is.
    for f in &after {
        match f.0.as_str() {
            "containerd-metadata" => assert!(f.4, "a leftover in meta.db is a freed page: {f:?}"),
            "containerd-snapshot" => {}
            other => panic!("unexpected leftover at {other}: {after:?}"),
        }
    }
}
