//! The node-tree builder of the tests and the benchmarks (`benches/node.rs` and
//! `benches/scan.rs` include this file by path): a fake node root in a directory, written
//! in kubelet's, containerd's and the CRI log writer's terms, so every generated node has
//! one layout whoever builds it.
//!
//! A [`NodeTree`] is one directory holding `root/` (the node root passed to `--root`),
//! `outside/` (a sibling the scan must never read: targets of hostile symlinks) and
//! `work/` (inputs and outputs of the binary, not part of the node). Paths are node paths
//! (`/var/lib/kubelet/...`), mapped under `root/` by [`NodeTree::host`]. Building panics
//! on any I/O error: a tree that cannot be built is a broken test or benchmark.
//!
//! Layout: [`NodeTree::pod`] makes a pod dir; a [`Pod`] makes its atomic-writer volumes
//! ([`AtomicVolume`]: secret, projected, CSI), empty-dir files, subPath sources and its CRI
//! logs under `/var/log/pods`; [`NodeTree::snapshot`] names an overlayfs snapshot of
//! containerd. What the tests add on top (values that no run may print, running the binary,
//! digests) lives in `tests/util/mod.rs`.
// Each includer uses a part of it.
#![allow(dead_code)]

use std::cell::RefCell;
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};

/// The timestamped directory name the atomic writer uses for the current payload.
pub const CURRENT_TS: &str = "..2025_01_02_03_04_05.123456789";

/// containerd's root (its default).
pub const CONTAINERD_ROOT: &str = "/var/lib/containerd";

/// Where kubelet writes the CRI logs of pods.
pub const POD_LOGS: &str = "/var/log/pods";

/// A fake node root in a temp dir, built in kubelet's terms.
pub struct NodeTree {
    base: Base,
    root: PathBuf,
    kubelet_dir: String,
    /// Values no run of the binary may print, in any form (the tests' `Kr` checks them).
    pub(super) guards: RefCell<Vec<Vec<u8>>>,
}

impl NodeTree {
    /// An empty node with kubelet at `/var/lib/kubelet`.
    pub fn new() -> Self {
        Self::with_kubelet_dir("/var/lib/kubelet")
    }

    /// An empty node whose kubelet dir is the node path `kubelet_dir`.
    pub fn with_kubelet_dir(kubelet_dir: &str) -> Self {
        // Under the cargo target dir rather than /tmp: a tmpfs /tmp would turn every
        // `non-tmpfs-volume` expectation upside down.
        let base = tempfile::Builder::new()
            .prefix("kresidue-node-")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .expect("create temp dir");
        Self::at(Base::Temp(base), kubelet_dir)
    }

    /// The node kept across test runs at `$CARGO_TARGET_TMPDIR/NAME` (for trees too
    /// costly to build each time, such as a million files); it is created when missing
    /// and never removed. Its builder marks it complete (see [`NodeTree::mark_built`]).
    pub fn kept(name: &str) -> Self {
        let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
        fs::create_dir_all(&base).unwrap();
        Self::at(Base::Kept(base), "/var/lib/kubelet")
    }

    fn at(base: Base, kubelet_dir: &str) -> Self {
        let root = base.path().join("root");
        for d in ["root", "outside", "work"] {
            fs::create_dir_all(base.path().join(d)).unwrap();
        }
        let tree =
            NodeTree { base, root, kubelet_dir: kubelet_dir.into(), guards: RefCell::default() };
        tree.mkdir(format!("{kubelet_dir}/pods"));
        tree.write("/etc/hostname", b"node-a\n");
        tree
    }

    /// True when a kept tree was completely built by an earlier run.
    pub fn is_built(&self) -> bool {
        self.base.path().join("built").exists()
    }

    /// Holds the tree's lock (an exclusive flock on `lock` beside the root) until dropped,
    /// so concurrent test runs do not build or rebuild a kept tree under each other.
    pub fn lock(&self) -> nix::fcntl::Flock<fs::File> {
        let f = fs::File::create(self.base.path().join("lock")).unwrap();
        nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusive).map_err(|(_, e)| e).unwrap()
    }

    /// Marks a kept tree completely built.
    pub fn mark_built(&self) {
        fs::write(self.base.path().join("built"), b"").unwrap();
    }

    /// The directory holding `root/`, `outside/` and `work/`.
    pub fn base(&self) -> &Path {
        self.base.path()
    }

    /// The host path of the node root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The node root as a `--root` argument.
    pub fn root_arg(&self) -> &str {
        self.root.to_str().unwrap()
    }

    /// A directory next to the root (not under it) that the scan must never read.
    pub fn outside(&self) -> PathBuf {
        self.base.path().join("outside")
    }

    /// `work/NAME`: scratch space for inputs and outputs of the binary (not digested).
    pub fn work(&self, name: &str) -> PathBuf {
        self.base.path().join("work").join(name)
    }

    /// The kubelet dir as a node path.
    pub fn kubelet_dir(&self) -> &str {
        &self.kubelet_dir
    }

    /// The host path of a node path.
    pub fn host(&self, node_path: impl AsRef<Path>) -> PathBuf {
        let p = node_path.as_ref();
        assert!(p.is_absolute(), "node paths start with /: {}", p.display());
        self.root.join(p.strip_prefix("/").unwrap())
    }

    /// Creates the directory at a node path (and its parents).
    pub fn mkdir(&self, node_path: impl AsRef<Path>) {
        fs::create_dir_all(self.host(node_path)).unwrap();
    }

    /// Writes a regular file (mode 0644) at a node path; returns the node path.
    pub fn write(&self, node_path: impl AsRef<Path>, bytes: &[u8]) -> String {
        let host = self.host(&node_path);
        fs::create_dir_all(host.parent().unwrap()).unwrap();
        fs::write(&host, bytes).unwrap();
        fs::set_permissions(&host, fs::Permissions::from_mode(0o644)).unwrap();
        node_path.as_ref().to_string_lossy().into_owned()
    }

    /// Copies the host file `src` to a node path (mode 0644); its length, or the error
    /// reading `src` (the caller decides whether an unreadable source matters).
    pub fn copy(&self, node_path: impl AsRef<Path>, src: &Path) -> std::io::Result<u64> {
        let host = self.host(&node_path);
        fs::create_dir_all(host.parent().unwrap()).unwrap();
        let len = fs::copy(src, &host)?;
        fs::set_permissions(&host, fs::Permissions::from_mode(0o644)).unwrap();
        Ok(len)
    }

    /// Creates a FIFO at a node path.
    pub fn fifo(&self, node_path: impl AsRef<Path>) {
        let host = self.host(node_path);
        fs::create_dir_all(host.parent().unwrap()).unwrap();
        nix::unistd::mkfifo(&host, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
    }

    /// Creates a unix socket inode at a node path (by mknod: socket paths under temp dirs
    /// are too long for bind's 108-byte limit).
    pub fn socket(&self, node_path: impl AsRef<Path>) {
        use nix::sys::stat::{mknod, Mode, SFlag};
        let host = self.host(node_path);
        fs::create_dir_all(host.parent().unwrap()).unwrap();
        mknod(&host, SFlag::S_IFSOCK, Mode::from_bits_truncate(0o755), 0).unwrap();
    }

    /// Creates a symlink at a node path pointing at `target` (taken literally: absolute
    /// host paths, relative paths and node paths are all possible).
    pub fn symlink(&self, node_path: impl AsRef<Path>, target: impl AsRef<Path>) {
        let host = self.host(node_path);
        fs::create_dir_all(host.parent().unwrap()).unwrap();
        symlink(target, host).unwrap();
    }

    /// A pod dir `<kubelet-dir>/pods/<uid>/` (created with kubelet's usual entries).
    pub fn pod(&self, uid: &str) -> Pod<'_> {
        let pod = Pod { tree: self, uid: uid.into() };
        let dir = pod.dir();
        if !self.host(&dir).exists() {
            for d in ["containers", "plugins", "volumes"] {
                self.mkdir(format!("{dir}/{d}"));
            }
            self.write(
                format!("{dir}/etc-hosts"),
                b"# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n",
            );
        }
        pod
    }

    /// The node path of the `fs/` dir of containerd's overlayfs snapshot `id` (a layer
    /// of an image, or a container's writable layer).
    pub fn snapshot(&self, id: u64) -> String {
        format!("{CONTAINERD_ROOT}/io.containerd.snapshotter.v1.overlayfs/snapshots/{id}/fs")
    }
}

/// Where a [`NodeTree`] lives: a temp dir removed on drop, or a kept dir.
enum Base {
    Temp(tempfile::TempDir),
    Kept(PathBuf),
}

impl Base {
    fn path(&self) -> &Path {
        match self {
            Base::Temp(t) => t.path(),
            Base::Kept(p) => p,
        }
    }
}

/// One pod dir in a [`NodeTree`].
pub struct Pod<'a> {
    tree: &'a NodeTree,
    uid: String,
}

impl<'a> Pod<'a> {
    /// The pod uid.
    pub fn uid(&self) -> &str {
        &self.uid
    }

    /// The pod dir's node path.
    pub fn dir(&self) -> String {
        format!("{}/pods/{}", self.tree.kubelet_dir, self.uid)
    }

    /// The node path of `rel` inside the pod dir.
    pub fn path(&self, rel: &str) -> String {
        format!("{}/{rel}", self.dir())
    }

    /// A secret volume `volumes/kubernetes.io~secret/<vol>/` (atomic writer layout, the
    /// payload in [`CURRENT_TS`]).
    pub fn secret_volume(&self, vol: &str) -> AtomicVolume<'a> {
        self.secret_volume_at(vol, CURRENT_TS)
    }

    /// [`Pod::secret_volume`] with its payload in the timestamped dir `ts` (`..2025_…`).
    pub fn secret_volume_at(&self, vol: &str, ts: &str) -> AtomicVolume<'a> {
        let dir = self.path(&format!("volumes/kubernetes.io~secret/{vol}"));
        AtomicVolume::create(self.tree, dir, ts)
    }

    /// A projected volume `volumes/kubernetes.io~projected/<vol>/` (atomic writer layout,
    /// the payload in [`CURRENT_TS`]).
    pub fn projected_volume(&self, vol: &str) -> AtomicVolume<'a> {
        self.projected_volume_at(vol, CURRENT_TS)
    }

    /// [`Pod::projected_volume`] with its payload in the timestamped dir `ts`.
    pub fn projected_volume_at(&self, vol: &str, ts: &str) -> AtomicVolume<'a> {
        let dir = self.path(&format!("volumes/kubernetes.io~projected/{vol}"));
        AtomicVolume::create(self.tree, dir, ts)
    }

    /// A CSI volume `volumes/kubernetes.io~csi/<vol>/mount/` as the Secrets Store CSI driver
    /// writes it (atomic writer layout in `mount/`, `vol_data.json` beside it).
    pub fn csi_volume(&self, vol: &str) -> AtomicVolume<'a> {
        let dir = self.path(&format!("volumes/kubernetes.io~csi/{vol}"));
        let meta = format!(
            r#"{{"attachmentID":"csi-0a1b","driverName":"secrets-store.csi.k8s.io","specVolumeID":"{vol}","volumeHandle":"csi-{vol}","volumeLifecycleMode":"Ephemeral"}}"#
        );
        self.tree.write(format!("{dir}/vol_data.json"), meta.as_bytes());
        AtomicVolume::create(self.tree, format!("{dir}/mount"), CURRENT_TS)
    }

    /// A file `rel` (may be nested) in the empty-dir volume `vol`,
    /// `volumes/kubernetes.io~empty-dir/<vol>/<rel>`; returns its node path.
    pub fn empty_dir_file(&self, vol: &str, rel: &str, bytes: &[u8]) -> String {
        self.file(&format!("volumes/kubernetes.io~empty-dir/{vol}/{rel}"), bytes)
    }

    /// A container's termination-log file `containers/<ctr>/<id>` (kubelet leaves one per
    /// container start); returns its node path.
    pub fn termination_log(&self, ctr: &str, id: &str, bytes: &[u8]) -> String {
        self.file(&format!("containers/{ctr}/{id}"), bytes)
    }

    /// The node path of the CRI log dir of this pod's container `ctr`,
    /// `/var/log/pods/<ns>_<name>_<uid>/<ctr>` (kubelet names it after the pod's
    /// namespace, name and uid).
    pub fn log_dir(&self, ns: &str, name: &str, ctr: &str) -> String {
        format!("{POD_LOGS}/{ns}_{name}_{}/{ctr}", self.uid)
    }

    /// Writes the CRI log file `file` (`0.log`, a rotation `0.log.20240501-093000`) of
    /// container `ctr` (see [`Pod::log_dir`]); returns its node path.
    pub fn log(&self, ns: &str, name: &str, ctr: &str, file: &str, bytes: &[u8]) -> String {
        self.tree.write(format!("{}/{file}", self.log_dir(ns, name, ctr)), bytes)
    }

    /// A subPath bind-mount source `volume-subpaths/<vol>/<ctr>/<idx>` holding `bytes`;
    /// returns its node path.
    pub fn subpath(&self, vol: &str, ctr: &str, idx: u32, bytes: &[u8]) -> String {
        self.tree.write(self.path(&format!("volume-subpaths/{vol}/{ctr}/{idx}")), bytes)
    }

    /// Any file in the pod dir, e.g. `containers/app/1a2b3c4d`; returns its node path.
    pub fn file(&self, rel: &str, bytes: &[u8]) -> String {
        self.tree.write(self.path(rel), bytes)
    }
}

/// A volume written by kubelet's atomic writer: `..<timestamp>/` real dir, `..data` ->
/// that dir, and one user-visible symlink per key `<key>` -> `..data/<key>`.
pub struct AtomicVolume<'a> {
    tree: &'a NodeTree,
    dir: String,
    /// The live payload dir's name.
    ts: String,
}

impl<'a> AtomicVolume<'a> {
    fn create(tree: &'a NodeTree, dir: String, ts: &str) -> Self {
        assert!(ts.starts_with(".."), "payload dirs are hidden: {ts}");
        let payload = format!("{dir}/{ts}");
        tree.mkdir(&payload);
        fs::set_permissions(tree.host(&payload), fs::Permissions::from_mode(0o755)).unwrap();
        let data = tree.host(format!("{dir}/..data"));
        if data.symlink_metadata().is_err() {
            symlink(ts, data).unwrap();
        }
        AtomicVolume { tree, dir, ts: ts.into() }
    }

    /// The node path of the volume dir (the one holding `..data`).
    pub fn dir(&self) -> &str {
        &self.dir
    }

    /// Adds key `name` (may be nested, `conf/app.env`) with `bytes` to the live payload.
    pub fn key(&self, name: &str, bytes: &[u8]) -> &Self {
        self.tree.write(format!("{}/{}/{name}", self.dir, self.ts), bytes);
        let top = name.split('/').next().unwrap();
        let link = self.tree.host(format!("{}/{top}", self.dir));
        if link.symlink_metadata().is_err() {
            symlink(format!("..data/{top}"), link).unwrap();
        }
        self
    }

    /// Leaves an older payload dir `ts` (not pointed to by `..data`) holding `key`.
    pub fn stale_copy(&self, ts: &str, key: &str, bytes: &[u8]) -> &Self {
        assert!(ts.starts_with("..") && ts != self.ts);
        self.tree.write(format!("{}/{ts}/{key}", self.dir), bytes);
        self
    }

    /// Leaves a `..data_tmp` symlink -> `ts`, as an interrupted update does.
    pub fn data_tmp(&self, ts: &str) -> &Self {
        self.tree.mkdir(format!("{}/{ts}", self.dir));
        symlink(ts, self.tree.host(format!("{}/..data_tmp", self.dir))).unwrap();
        self
    }

    /// The user-visible node path of `key`, as findings must report it.
    pub fn visible(&self, key: &str) -> String {
        format!("{}/{key}", self.dir)
    }

    /// The real node path of `key` inside payload dir `ts`.
    pub fn real(&self, ts: &str, key: &str) -> String {
        format!("{}/{ts}/{key}", self.dir)
    }
}
