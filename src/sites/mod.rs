//! One home per site: what kresidue knows of each place on a node where Secret residue is
//! found. Each family of sites (kubelet's pod dirs, containerd, CRI-O's containers-storage,
//! Docker, pod logs, etcd, extra paths) is one module implementing [`Site`]: it discovers
//! its scopes from the [`Layout`] (parsing the runtime's records once), says how its files
//! are read, attributes what a whole file says about its matches, gives the category of a
//! place before liveness, and the cleanup advice for what no action removes.
//!
//! What each site is (its family, how its files are read, whether its residue is a
//! container's, its category before liveness, the runtimes whose data it holds) is one row
//! of [`props`], a match with no catch-all arm: a new `SiteId` does not compile until its
//! row is written, and [`REGISTRY`] (the families in discovery order) is checked against
//! the rows by a test. Node facts behind the code
//! are in `docs/NODE-LAYOUT.md`.

pub mod containerd;
pub mod containers_storage;
pub mod docker;
pub mod dqlite;
pub mod etcd;
pub mod extra;
pub mod kine;
pub mod kubelet;
pub mod logs;
pub mod places;
pub mod runtime_data;

use crate::cri::Live;
use crate::finding::{Category, Finding, ScanError, SiteId};
use crate::node::kubelet::AtomicVolume;
use crate::node::logs::LogOwner;
use crate::node::other_runtimes::ContainerRecord;
use crate::runtimes::{Clean, Keeper, Runtime};
use crate::sys::walk::Start;
use crate::sys::{Kind, RootDir};
use std::collections::HashMap;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A subtree to walk, and what it is.
#[derive(Debug)]
pub struct Scope {
    /// Where it is, relative to the root, with no symlink in it.
    pub rel: PathBuf,
    /// The node path shown in reports for `rel`.
    pub node_path: PathBuf,
    /// What kind of subtree.
    pub kind: ScopeKind,
    /// Whether a filesystem mounted at `rel` is crossed into ([`Start::Crossing`]: kubelet's
    /// dir, a runtime's root, often filesystems of their own) or met as below it.
    pub start: Start,
}

/// The kinds of subtrees.
#[derive(Debug)]
pub enum ScopeKind {
    /// A kubelet pod dir.
    Pod {
        /// The pod UID (directory name).
        uid: String,
        /// Atomic-writer volumes of the pod, by volume dir relative to the pod dir.
        volumes: HashMap<PathBuf, AtomicVolume>,
    },
    /// A file or dir whose files all belong to one site (containerd's `meta.db`, an
    /// extra `--path`).
    Site(SiteId),
    /// A layer dir or a container's file, whose owner the runtime's records name.
    Owned(Ownership),
    /// A container's own dir: what its runtime keeps of it, and its logs.
    Container(Box<ContainerDir>),
}

/// A container's own dir (Docker's `containers/<id>`, containers/storage's
/// `overlay-containers/<id>/userdata`): every file in it is the container's, its logs read
/// as logs; a tmpfs the runtime mounts in it is entered or skipped as its [`ContainerLayout`]
/// says, any other mount left unread (and the dir itself, should one be mounted there).
#[derive(Debug)]
pub struct ContainerDir {
    /// The container's id.
    pub id: String,
    /// The place of what the runtime keeps of it (config, secrets, checkpoints).
    pub kept: Ownership,
    /// The place of its logs.
    pub log: Ownership,
    /// How its runtime lays the dir out.
    pub layout: &'static ContainerLayout,
}

/// How a runtime lays out a container's own dir: data, one per runtime.
#[derive(Debug)]
pub struct ContainerLayout {
    /// Whether the entry `name` of the dir is (or holds) a log the runtime writes for the
    /// container `id`.
    pub is_log: fn(name: &[u8], id: &str) -> bool,
    /// Where in the dir the runtime mounts the container's `/dev/shm`, a tmpfs while it
    /// runs: the app's memory, neither read nor listed (a plain dir there is read).
    pub shm: &'static str,
    /// Where in the dir the runtime mounts a tmpfs of the container's secrets while it
    /// runs: read, as kubelet's Secret volumes are.
    pub secrets: &'static [&'static str],
}

/// What a mount point in a container's dir is, by its place in the dir.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContainerMount {
    /// Its `/dev/shm`.
    Shm,
    /// A tmpfs of its secrets.
    Secrets,
    /// Nothing its runtime mounts there.
    Foreign,
}

impl ContainerLayout {
    /// What a mount point at `inner` (relative to the container's dir) is.
    pub fn mount(&self, inner: &Path) -> ContainerMount {
        if inner == Path::new(self.shm) {
            ContainerMount::Shm
        } else if self.secrets.iter().any(|s| inner == Path::new(s)) {
            ContainerMount::Secrets
        } else {
            ContainerMount::Foreign
        }
    }
}

/// What a layer dir (a snapshot's `fs`, a `diff`) or a container's file (an OCI bundle's
/// `config.json`, a stored spec) is, from the runtime's records.
#[derive(Debug)]
pub struct Ownership {
    /// The site.
    pub site: SiteId,
    /// `container-layer`, `image-layer`, `image-config` or `env-persisted`.
    pub category: Category,
    /// The container whose layer or file it is.
    pub container: Option<String>,
    /// That container's pod.
    pub pod_uid: Option<String>,
    /// The container's name, its pod's namespace and name, and whether it runs, as the
    /// runtime's own records say (Docker's `config.v2.json`, containers/storage's
    /// `containers.json`).
    pub record: ContainerRecord,
    /// Said of an orphan (a dir no snapshot record names).
    pub note: Option<&'static str>,
    /// The images an image layer belongs to, as far as the runtime's records tell.
    pub images: crate::finding::Images,
    /// What the site parsed at discovery of this file, read whole then (containerd's
    /// `meta.db`): the scan attributes the file's matches from the same parse while the
    /// file is unchanged.
    pub kept: Option<Arc<Kept>>,
}

/// What a site parsed of a file it read whole at discovery, and which version of the file
/// that was. Only the parse is kept (the bytes are read again to be searched, so a scan
/// holds at most one whole file at a time); it is used for the bytes searched when the
/// file is still the same ([`FileId`]), else they are parsed again.
pub struct Kept {
    /// The file as it was read.
    pub identity: FileId,
    /// The site's parse of it, for the [`Attribute`] its row names.
    pub parsed: Box<dyn std::any::Any + Send + Sync>,
}

impl std::fmt::Debug for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Kept({:?})", self.identity)
    }
}

/// Which version of a file: its device, inode, size and change times. A file written
/// since (a daemon updating its database) has another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileId {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl FileId {
    /// The version of the file `m` describes.
    pub fn of(m: &crate::sys::image::Meta) -> FileId {
        FileId { dev: m.dev, ino: m.ino, size: m.len, mtime: m.mtime, ctime: m.ctime }
    }
}

impl Ownership {
    /// A place of `site` and `category` owned by `container` of the pod `pod_uid`.
    pub fn new(
        site: SiteId,
        category: Category,
        container: Option<String>,
        pod_uid: Option<String>,
    ) -> Ownership {
        Ownership {
            site,
            category,
            container,
            pod_uid,
            record: ContainerRecord::default(),
            note: None,
            images: crate::finding::Images::default(),
            kept: None,
        }
    }

    /// The place of `container` as its `record` describes it (the pod's uid included).
    pub fn of_record(
        site: SiteId,
        category: Category,
        container: &str,
        record: &ContainerRecord,
    ) -> Ownership {
        let pod_uid = record.pod_uid.clone();
        let own = Ownership::new(site, category, Some(container.to_owned()), pod_uid);
        Ownership { record: record.clone(), ..own }
    }
}

/// Who a file belongs to, as its scope, its place in the scope and the runtime's records
/// say: the walk makes one for each file (sharing what a scope's files share), the engine
/// stamps it on every finding in the file, and the severity model and `clean` read it
/// from there.
#[derive(Clone, Debug)]
pub struct Owner {
    /// The site.
    pub site: SiteId,
    /// A superseded copy (an old atomic-writer dir, a leftover `..data_tmp`).
    pub stale: bool,
    /// The pod UID, for files under a pod dir.
    pub pod: Option<Arc<str>>,
    /// The volume name, for files of a pod's Secret volumes and subPath copies.
    pub volume: Option<Arc<str>>,
    /// What the runtime's records say of the file's layer or container (an OCI bundle, a
    /// writable or image layer): category, container, pod, images, a note.
    pub records: Option<Arc<Ownership>>,
    /// The pod and container of a pod log, from its path.
    pub log: Option<Arc<LogOwner>>,
}

impl Owner {
    /// An owner of site `site` that nothing more is known of.
    pub fn of(site: SiteId) -> Owner {
        Owner { site, stale: false, pod: None, volume: None, records: None, log: None }
    }

    /// The file read whole at discovery, when its site kept it.
    pub fn kept(&self) -> Option<&Kept> {
        self.records.as_ref()?.kept.as_deref()
    }

    /// The category of the file's place before liveness, as its site says; `on_tmpfs` is
    /// asked only where that depends on it.
    pub fn category(&self, on_tmpfs: impl FnOnce() -> bool) -> Category {
        base_category(self.site, self.records.as_deref(), on_tmpfs)
    }
}

/// The category of a place of site `id` before liveness ([`Base`]): `owner` is what the
/// runtime's records say of its layer or container; `on_tmpfs` is asked only where the
/// category depends on it.
pub fn base_category(
    id: SiteId,
    owner: Option<&Ownership>,
    on_tmpfs: impl FnOnce() -> bool,
) -> Category {
    match props(id).base {
        Base::Is(c) => c,
        Base::Records => owner.map_or(Category::Other, |o| o.category),
        Base::Volume if on_tmpfs() => Category::OrphanedVolume,
        Base::Volume => Category::NonTmpfsVolume,
    }
}

/// What the files of one scope share about who they belong to, ready for the walk to
/// give each file its [`Owner`].
#[derive(Debug)]
pub struct Owners(Shared);

#[derive(Debug)]
enum Shared {
    Pod {
        uid: Arc<str>,
        volumes: HashMap<PathBuf, AtomicVolume>,
    },
    Site(SiteId),
    Owned(Arc<Ownership>),
    Container {
        id: String,
        kept: Arc<Ownership>,
        log: Arc<Ownership>,
        layout: &'static ContainerLayout,
    },
}

impl Owners {
    /// The owners of a scope of `kind`.
    pub fn new(kind: ScopeKind) -> Owners {
        Owners(match kind {
            ScopeKind::Pod { uid, volumes } => Shared::Pod { uid: uid.into(), volumes },
            ScopeKind::Site(id) => Shared::Site(id),
            ScopeKind::Owned(records) => Shared::Owned(Arc::new(records)),
            ScopeKind::Container(dir) => {
                let ContainerDir { id, kept, log, layout } = *dir;
                Shared::Container { id, kept: Arc::new(kept), log: Arc::new(log), layout }
            }
        })
    }

    /// The layout of the container dir the scope is, if it is one.
    pub fn container_layout(&self) -> Option<&'static ContainerLayout> {
        match &self.0 {
            Shared::Container { layout, .. } => Some(layout),
            Shared::Pod { .. } | Shared::Site(_) | Shared::Owned(_) => None,
        }
    }

    /// Whether the scope is a kubelet pod dir.
    pub fn is_pod(&self) -> bool {
        matches!(self.0, Shared::Pod { .. })
    }

    /// The owner of the file at `inner` (relative to the scope), and the path shown for
    /// it under the scope when that differs from `inner` (an atomic-writer volume's
    /// user-visible name).
    pub fn of(&self, inner: &Path) -> (Owner, Option<PathBuf>) {
        match &self.0 {
            Shared::Pod { uid, volumes } => kubelet::pod_file(uid, volumes, inner),
            Shared::Site(id) => (site(*id).file_owner(*id, inner), None),
            Shared::Owned(records) => {
                let owner = Owner { records: Some(records.clone()), ..Owner::of(records.site) };
                (owner, None)
            }
            Shared::Container { id, kept, log, layout } => {
                let top = inner.components().next().map(|c| c.as_os_str().as_bytes());
                let records = match top {
                    Some(name) if (layout.is_log)(name, id) => log,
                    _ => kept,
                };
                let owner = Owner { records: Some(records.clone()), ..Owner::of(records.site) };
                (owner, None)
            }
        }
    }

    /// The owner of a file of a CSI volume read only because `--read-csi-volumes` asks:
    /// the application's data in its pod, site `other`.
    pub fn app_data(&self) -> Owner {
        let pod = match &self.0 {
            Shared::Pod { uid, .. } => Some(uid.clone()),
            _ => None,
        };
        Owner { pod, ..Owner::of(SiteId::Other) }
    }
}

/// Where to look on the node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Kubelet root dir, a node path (`/var/lib/kubelet`).
    pub kubelet_dir: PathBuf,
    /// Whether `kubelet_dir` was given by the user (missing is then an error).
    pub kubelet_dir_explicit: bool,
    /// containerd root dir, a node path (`/var/lib/containerd`).
    pub containerd_root: PathBuf,
    /// containerd state dir, a node path (`/run/containerd`).
    pub containerd_state: PathBuf,
    /// The pod log dir, a node path (`/var/log/pods`).
    pub pod_logs: PathBuf,
    /// Whether `pod_logs` was given by the user (the distributions' are not looked at
    /// then).
    pub pod_logs_explicit: bool,
    /// etcd data dirs and backups given by the user; none means `/var/lib/etcd` when it
    /// exists.
    pub etcd: Vec<PathBuf>,
    /// Whether `containerd_root` was given by the user (missing is then an error).
    pub containerd_root_explicit: bool,
    /// Whether `containerd_state` was given by the user (else containerd's own
    /// `config.toml` may name another).
    pub containerd_state_explicit: bool,
    /// Extra node paths scanned as site `other`.
    pub extra: Vec<PathBuf>,
    /// Docker's data root given by the user (`--docker-root`; missing is then an error);
    /// none: the one Docker's own `daemon.json` names, else the default.
    pub docker_root: Option<PathBuf>,
    /// containers/storage's root given by the user (`--containers-storage-root`); none:
    /// those CRI-O's and containers/storage's own configuration name, else the default.
    pub containers_storage_root: Option<PathBuf>,
    /// `--max-file-size`: no record or database larger than this is read during
    /// discovery either.
    pub max_file_size: Option<u64>,
    /// Only this place is read, quietly when it is not there: no default, no
    /// distribution's, no runtime root a configuration names (the scan of what a mount
    /// hides, [`beneath_mounts`]).
    pub only: Option<(PlaceKind, PathBuf)>,
}

impl Layout {
    /// The default places, as `scan` with no option has them.
    pub fn defaults() -> Layout {
        Layout {
            kubelet_dir: kubelet::DEFAULT_KUBELET_DIR.into(),
            kubelet_dir_explicit: false,
            containerd_root: containerd::DEFAULT_ROOT.into(),
            containerd_state: containerd::DEFAULT_STATE.into(),
            pod_logs: logs::DEFAULT_DIR.into(),
            pod_logs_explicit: false,
            etcd: Vec::new(),
            containerd_root_explicit: false,
            containerd_state_explicit: false,
            extra: Vec::new(),
            docker_root: None,
            containers_storage_root: None,
            max_file_size: None,
            only: None,
        }
    }

    /// The most bytes discovery reads of one file whose own cap is `cap`.
    pub fn cap(&self, cap: u64) -> u64 {
        self.max_file_size.map_or(cap, |m| m.min(cap))
    }
}

/// How the matches in a file read whole ([`Reading::Whole`]) are attributed, once it was
/// searched: from what `data` says about itself, or from `parsed`, what its site parsed of
/// these very bytes at discovery ([`Kept`]); `keeper` is the runtime whose records the file
/// is, as discovery named it. It returns problems, messages for the file's error entry.
pub type Attribute = fn(
    parsed: Option<&(dyn std::any::Any + Send + Sync)>,
    keeper: Option<Keeper>,
    data: &[u8],
    found: &mut [Finding],
) -> Vec<String>;

/// How the engine reads a site's files.
#[derive(Clone, Copy, Debug)]
pub enum Reading {
    /// Streamed in chunks (holes of a sparse file skipped).
    Stream,
    /// Read whole when at most `cap` bytes, searched, then its (not yet aggregated)
    /// matches attributed by `attribute`; a larger file is streamed, its matches
    /// unattributed.
    Whole {
        /// The largest file read whole.
        cap: u64,
        /// Who its matches belong to.
        attribute: Attribute,
    },
    /// A kine SQLite database or its log ([`kine`]): searched raw, its matches attributed
    /// to the rows that hold them, its values split across pages searched reassembled.
    Kine,
    /// etcd's files: streamed; a bbolt database among them (`member/snap/db`, a snapshot)
    /// then says how many Secrets it serves in plaintext and encrypted ([`etcd`]).
    Etcd,
    /// A file of dqlite's data dir ([`dqlite`]): a snapshot (inflated) read as the
    /// databases it holds, a segment of the raft log as the pages its transactions wrote,
    /// each match attributed to its row, values split across pages searched reassembled.
    Dqlite,
    /// A CRI log: its content searched (partial lines joined, `.gz` inflated), offsets
    /// mapped back to the file; a sparse log is streamed raw.
    LogContent,
}

/// What `clean` knows when it advises on a finding no action covers.
#[derive(Clone, Copy, Debug)]
pub struct Advice<'a> {
    /// Why the finding's pod dir is not removed, when a pod dir holds it.
    pub pod_block: Option<&'a str>,
    /// What the runtime said, when it could be asked.
    pub live: Option<&'a Live>,
}

/// A family of sites: how kresidue finds and advises on one kind of place on a node.
/// What each of its sites is (how read, whose, its category) is [`props`]'s row.
pub trait Site: Sync {
    /// Adds the family's scopes that exist on the node.
    fn discover(&self, cx: &mut Discovery<'_>);

    /// The owner of a file of site `id` at `inner`, relative to its scope (not a pod dir:
    /// those are kubelet's).
    fn file_owner(&self, id: SiteId, _inner: &Path) -> Owner {
        Owner::of(id)
    }

    /// Why `f` is left by `clean`, and the manual step.
    fn advice(&self, f: &Finding, cx: Advice<'_>) -> (String, String);
}

/// What a site's place is before liveness is known ([`Owner::category`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Base {
    /// Always this category.
    Is(Category),
    /// What the runtime's records say of the file's layer or container (a container's
    /// layer or env, an image's layer or config); `other` when no record does.
    Records,
    /// A volume: orphaned on a tmpfs, on a disk where it should never have been.
    Volume,
}

/// What one site is: a row of [`props`].
#[derive(Clone, Copy, Debug)]
pub struct Props {
    /// The family that finds it and advises on it.
    pub family: Family,
    /// How the engine reads its files.
    pub reading: Reading,
    /// Whether its residue belongs to one container and goes when the runtime removes it.
    pub container_owned: bool,
    /// Its category before liveness.
    pub base: Base,
    /// The runtimes whose data it holds: whose tools remove what it holds when its
    /// records name no runtime, and, all of them, whose images a store shared by several
    /// is (containers/storage's images are CRI-O's and Podman's alike).
    pub runtimes: &'static [Runtime],
}

/// Every site's properties, one row each. No catch-all arm: a new [`SiteId`] does not
/// compile until its row is written, and its family's methods never decide these.
pub fn props(id: SiteId) -> Props {
    use crate::runtimes::Runtime::{Containerd, CriO, Docker, Podman};
    let row = |family, reading, container_owned, base, runtimes| Props {
        family,
        reading,
        container_owned,
        base,
        runtimes,
    };
    let (stream, log) = (Reading::Stream, Reading::LogContent);
    let (kubelet, ctrd) = (Family::Kubelet, Family::Containerd);
    match id {
        SiteId::KubeletSecretVolume | SiteId::KubeletProjectedVolume | SiteId::KubeletCsiVolume => {
            row(kubelet, stream, false, Base::Volume, &[])
        }
        SiteId::KubeletSubpath => {
            row(kubelet, stream, false, Base::Is(Category::StaleSubpath), &[])
        }
        SiteId::ContainerdSnapshot => row(ctrd, stream, true, Base::Records, &[Containerd]),
        SiteId::ContainerdMetadata => {
            let attribute = containerd::attribute_meta_db;
            let whole = Reading::Whole { cap: containerd::MAX_DB, attribute };
            row(ctrd, whole, true, Base::Is(Category::EnvPersisted), &[Containerd])
        }
        SiteId::OciBundle => {
            let attribute = containerd::attribute_bundle;
            let whole = Reading::Whole { cap: containerd::MAX_SPEC, attribute };
            row(ctrd, whole, true, Base::Is(Category::EnvPersisted), &[Containerd])
        }
        SiteId::ContainerdContent => row(ctrd, stream, false, Base::Records, &[Containerd]),
        SiteId::PodLog => row(Family::PodLogs, log, false, Base::Is(Category::PodLog), &[]),
        SiteId::ContainersStorage => {
            let family = Family::ContainersStorage;
            row(family, stream, false, Base::Records, &[CriO, Podman])
        }
        SiteId::DockerStorage => row(Family::Docker, stream, false, Base::Records, &[Docker]),
        SiteId::RuntimeLog => {
            let base = Base::Is(Category::PodLog);
            row(Family::RuntimeData, log, false, base, &[Docker, Podman])
        }
        SiteId::RuntimeVolume => {
            let base = Base::Is(Category::Other);
            row(Family::RuntimeData, stream, false, base, &[Docker, Podman])
        }
        SiteId::Etcd => {
            row(Family::Etcd, Reading::Etcd, false, Base::Is(Category::EtcdPlaintext), &[])
        }
        SiteId::Kine => {
            row(Family::Kine, Reading::Kine, false, Base::Is(Category::EtcdPlaintext), &[])
        }
        SiteId::Dqlite => {
            row(Family::Dqlite, Reading::Dqlite, false, Base::Is(Category::EtcdPlaintext), &[])
        }
        SiteId::Other => row(Family::Extra, stream, false, Base::Is(Category::Other), &[]),
        // An image archive given with `--image`: its layers and configs, never a node's.
        SiteId::ImageArchive => row(Family::Extra, stream, false, Base::Records, &[]),
    }
}

/// The families of sites, one file each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Kubelet's pod dirs ([`kubelet`]).
    Kubelet,
    /// The pod logs ([`logs`]).
    PodLogs,
    /// containerd's root and state ([`containerd`]).
    Containerd,
    /// containers/storage, CRI-O's and Podman's ([`containers_storage`]).
    ContainersStorage,
    /// Docker's data root ([`docker`]).
    Docker,
    /// The runtimes' logs and volumes ([`runtime_data`]).
    RuntimeData,
    /// etcd's data ([`etcd`]).
    Etcd,
    /// kine's SQLite databases ([`kine`]).
    Kine,
    /// dqlite's data dirs ([`dqlite`]).
    Dqlite,
    /// Extra paths ([`extra`]).
    Extra,
}

impl Family {
    /// Its implementation.
    pub fn site(self) -> &'static dyn Site {
        match self {
            Family::Kubelet => &kubelet::Kubelet,
            Family::PodLogs => &logs::PodLogs,
            Family::Containerd => &containerd::Containerd,
            Family::ContainersStorage => &containers_storage::ContainersStorage,
            Family::Docker => &docker::Docker,
            Family::RuntimeData => &runtime_data::RuntimeData,
            Family::Etcd => &etcd::Etcd,
            Family::Kine => &kine::Kine,
            Family::Dqlite => &dqlite::Dqlite,
            Family::Extra => &extra::Extra,
        }
    }
}

/// Every family, in discovery order, which is the order the walk reads them in (and so
/// what a `--timeout` reaches first): kubelet's pod dirs, the pod logs, then the
/// runtimes' records and layers (gigabytes of image layers come after what the pods left).
pub const REGISTRY: [Family; 10] = [
    Family::Kubelet,
    Family::PodLogs,
    Family::Containerd,
    Family::ContainersStorage,
    Family::Docker,
    Family::RuntimeData,
    Family::Etcd,
    Family::Kine,
    Family::Dqlite,
    Family::Extra,
];

/// The family of `id` ([`props`]).
pub fn site(id: SiteId) -> &'static dyn Site {
    props(id).family.site()
}

/// What discovery works with: the root, the layout, and what it found.
pub struct Discovery<'a> {
    /// The node's root.
    pub root: &'a RootDir,
    /// Where to look.
    pub layout: &'a Layout,
    /// The scopes found so far.
    pub scopes: Vec<Scope>,
    /// Problems met; nothing in discovery is fatal.
    pub errors: &'a mut Vec<ScanError>,
    /// The ids of the containers this machine runs now, once asked ([`witnessed`]).
    pub running: std::cell::OnceCell<std::collections::HashSet<String>>,
    /// Where this node keeps what the families look at ([`places::Places::of`]).
    pub places: places::Places,
}

/// What discovery says of a node path it looks for and cannot resolve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unresolved {
    /// Nothing: the place is optional and its absence or state is not news (a default
    /// path, a runtime's record dir).
    Quiet,
    /// An error entry, unless it does not exist.
    UnlessMissing,
    /// An error entry, whatever the cause (a path the user gave).
    Always,
}

impl Discovery<'_> {
    /// A scope of `kind` for the node path `node` when it resolves; whether it did.
    /// `unresolved` says what to report otherwise.
    pub fn push(&mut self, node: &Path, kind: ScopeKind, unresolved: Unresolved) -> bool {
        match resolve(self.root, node) {
            Ok(rel) => {
                let start = Start::Crossing;
                self.scopes.push(Scope { rel, node_path: node.to_path_buf(), kind, start });
                true
            }
            Err(e) => {
                let report = match unresolved {
                    Unresolved::Quiet => false,
                    Unresolved::UnlessMissing => e.kind() != io::ErrorKind::NotFound,
                    Unresolved::Always => true,
                };
                if report {
                    self.errors.push(error_at(node, &e));
                }
                false
            }
        }
    }

    /// [`Discovery::push`] of a scope unless one at the same place was pushed already (a
    /// dir two distributions, or an option and a distribution, both name).
    pub fn push_once(&mut self, node: &Path, kind: ScopeKind, unresolved: Unresolved) -> bool {
        if let Ok(rel) = resolve(self.root, node) {
            if self.scopes.iter().any(|s| s.rel == rel) {
                return false;
            }
        }
        self.push(node, kind, unresolved)
    }

    /// The sorted names of the dirs (not symlinks to dirs) at the node path `node`;
    /// none when it does not exist or cannot be listed.
    pub fn dirs(&self, node: &Path) -> Vec<std::ffi::OsString> {
        resolve(self.root, node).map(|rel| subdirs(self.root, &rel)).unwrap_or_default()
    }

    /// The sorted names of the regular files (not symlinks) at the node path `node`; none
    /// when it does not exist or cannot be listed.
    pub fn files(&self, node: &Path) -> Vec<std::ffi::OsString> {
        let listed = resolve(self.root, node).and_then(|rel| self.root.list(&rel));
        let files = listed.unwrap_or_default().into_iter().filter(|(_, k)| *k == Kind::File);
        files.map(|(name, _)| name).collect()
    }

    /// The dir at the node path `base` (resolved as [`resolve`] does: a runtime's root is
    /// often a symlink), then `tail` below it name by name through no symlink and across no
    /// mount point but at its end (which the walk meets as an entry: [`Start::Entry`]). A
    /// runtime's own dirs hold no symlink: one there (a container's `userdata` pointing at
    /// another container's, a secret store pointing at `/etc`) is an error entry, not
    /// followed; a missing one is nothing.
    fn resolve_below(&mut self, base: &Path, tail: &Path) -> Option<PathBuf> {
        let node = base.join(tail);
        let mut rel = resolve(self.root, base).ok()?;
        let names: Vec<_> = tail.components().map(|c| c.as_os_str().to_owned()).collect();
        for (i, name) in names.iter().enumerate() {
            rel.push(name);
            let refused = match self.root.lstat(&rel) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
                Err(e) => crate::node::io_message(&e),
                Ok(l) if l.kind == Kind::Symlink => "a symlink; not followed".to_owned(),
                Ok(_) if i + 1 < names.len() && self.root.is_mount_point(&rel) => {
                    "a filesystem is mounted on the way; not read".to_owned()
                }
                Ok(_) => continue,
            };
            let path = crate::text::display_path(node.as_os_str());
            self.errors.push(ScanError { path, error: refused });
            return None;
        }
        Some(rel)
    }

    /// A scope of `kind` at `tail` below the runtime's dir `base`, resolved by
    /// `Discovery::resolve_below`: an entry of the runtime's own, whose mounts are the
    /// walk's to judge as any below it.
    pub fn push_below(&mut self, base: &Path, tail: &Path, kind: ScopeKind) {
        if let Some(rel) = self.resolve_below(base, tail) {
            let node_path = base.join(tail);
            self.scopes.push(Scope { rel, node_path, kind, start: Start::Entry });
        }
    }

    /// The bytes of a record or database file at the node path `node` (a regular file
    /// of at most `cap` bytes, and at most `--max-file-size`); none when absent, or with
    /// an error entry when unreadable.
    pub fn read(&mut self, node: &Path, cap: u64) -> Option<Vec<u8>> {
        self.read_tiny(node, self.layout.cap(cap))
    }

    /// A runtime's data root at the node path `root`, when it can be resolved. `named_by`
    /// says who named it (an option, the runtime's own configuration): a named root that
    /// cannot be resolved is an error entry saying so (a scan must not pass a node whose
    /// runtime data it never saw); a default one that is not there is no such runtime.
    pub fn runtime_root(
        &mut self,
        what: &str,
        root: PathBuf,
        named_by: Option<&str>,
    ) -> Option<PathBuf> {
        match (resolve(self.root, &root), named_by) {
            (Ok(_), _) => Some(root),
            // The default, not there, or not to be listed (as what is below it).
            (Err(_), None) => None,
            (Err(e), Some(by)) => {
                let why = crate::node::io_message(&e);
                let error = format!("{what}, as {by} names it: {why}");
                let path = crate::text::display_path(root.as_os_str());
                self.errors.push(ScanError { path, error });
                None
            }
        }
    }

    /// [`Discovery::read`] of a record of a few bytes (an id), of at most `cap` bytes
    /// whatever `--max-file-size` says: the option is there to spare big files.
    pub fn read_tiny(&mut self, node: &Path, cap: u64) -> Option<Vec<u8>> {
        let rel = resolve(self.root, node).ok()?;
        self.root.read_file(&rel, cap).map_err(|e| self.errors.push(error_at(node, &e))).ok()
    }

    /// A record file at the node path `node`, opened as a regular file of at most `cap`
    /// bytes (and `--max-file-size`) and parsed by `parse` while read; `None` when absent
    /// or unreadable (an error entry), or not what `parse` takes.
    pub fn parse<T>(
        &mut self,
        node: &Path,
        cap: u64,
        parse: fn(&mut dyn std::io::Read) -> Option<T>,
    ) -> Option<T> {
        use std::io::Read;
        let rel = resolve(self.root, node).ok()?;
        let opened = self.root.open_regular(&rel, self.layout.cap(cap));
        let (f, size) = opened.map_err(|e| self.errors.push(error_at(node, &e))).ok()?;
        parse(&mut std::io::BufReader::new(f.take(size)))
    }
}

/// The `errors` entry of a record file at the node path `path` of more `what` than the
/// `kept` read.
pub(crate) fn cut_error(path: &Path, what: &str, kept: usize) -> ScanError {
    ScanError {
        path: crate::text::display_path(path.as_os_str()),
        error: format!(
            "more {what} than the {kept} kept; the rest are not read, and what they would \
             name is unknown"
        ),
    }
}

/// What discovery found: the subtrees to walk, and the node's layout.
#[derive(Debug)]
pub struct Discovered {
    /// The subtrees to walk, in walk order.
    pub scopes: Vec<Scope>,
    /// The distributions found, but for the default layout, by name.
    pub distributions: Vec<String>,
    /// What was found, a line each, for `-v` ([`places::Places::lines`]).
    pub lines: Vec<String>,
}

/// Lists every subtree to walk, family by family ([`REGISTRY`]), in the places of the
/// node's distributions ([`places::Places`]). Problems go to `errors`; nothing here is
/// fatal.
pub fn discover(root: &RootDir, layout: &Layout, errors: &mut Vec<ScanError>) -> Discovered {
    let running = std::cell::OnceCell::new();
    let places = places::Places::default();
    let mut cx = Discovery { root, layout, scopes: Vec::new(), errors, running, places };
    cx.places = places::Places::of(&mut cx);
    for family in REGISTRY {
        family.site().discover(&mut cx);
    }
    logs::link_runtime_logs(&mut cx);
    let distributions = cx.places.distribution_names();
    let lines = cx.places.lines(root);
    Discovered { scopes: cx.scopes, distributions, lines }
}

/// What a place of the node is, for the scan of what a mount over it hides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlaceKind {
    /// kubelet's root dir.
    Kubelet,
    /// containerd's root.
    ContainerdRoot,
    /// The pod log dir.
    PodLogs,
}

/// The node's places ([`places::Places`]) that are mount points: kubelet's dir, a
/// containerd root, the pod log dir moved to another disk and mounted back (EKS's local
/// disks, AKS's temporary kubelet disk, GKE's local SSDs), whose old copy on the
/// filesystem beneath the node no longer sees; each as a node path.
pub fn mounted_places(root: &RootDir, layout: &Layout) -> Vec<(PathBuf, PlaceKind)> {
    let mut errors = Vec::new();
    let running = std::cell::OnceCell::new();
    let places = places::Places::default();
    let mut cx =
        Discovery { root, layout, scopes: Vec::new(), errors: &mut errors, running, places };
    let p = places::Places::of(&mut cx);
    let kubelet = p.kubelet.into_iter().map(|k| (k, PlaceKind::Kubelet));
    let ctrd = p.containerds.into_iter().map(|c| (c.root, PlaceKind::ContainerdRoot));
    let logs = p.pod_logs.into_iter().map(|l| (l, PlaceKind::PodLogs));
    let mounted = |(node, _): &(PathBuf, PlaceKind)| {
        resolve(root, node)
            .is_ok_and(|rel| !rel.as_os_str().is_empty() && root.is_mount_point(&rel))
    };
    kubelet.chain(ctrd).chain(logs).filter(mounted).collect()
}

/// The layout that reads only the place `node` of `kind`, beneath the root that holds
/// what its mount hides.
pub fn beneath_mounts(node: &Path, kind: PlaceKind, max_file_size: Option<u64>) -> Layout {
    Layout { only: Some((kind, node.to_path_buf())), max_file_size, ..Layout::defaults() }
}

/// kubelet's dir on the node under `root` when `layout` does not name one, as `clean`
/// takes it (never learned from what containers mount): the one kubelet dir of the
/// distributions found that holds a `pods` dir, else the default.
pub fn node_kubelet_dir(root: &RootDir, layout: &Layout) -> PathBuf {
    let mut errors = Vec::new();
    let open = Layout { kubelet_dir_explicit: false, ..layout.clone() };
    let running = std::cell::OnceCell::new();
    let places = places::Places::default();
    let mut cx =
        Discovery { root, layout: &open, scopes: Vec::new(), errors: &mut errors, running, places };
    let found = places::Places::of(&mut cx).kubelet;
    let with_pods: Vec<&PathBuf> = found
        .iter()
        .filter(|k| resolve(root, &k.join(crate::node::kubelet::PODS)).is_ok())
        .collect();
    match with_pods.as_slice() {
        [one] => (*one).clone(),
        _ => layout.kubelet_dir.clone(),
    }
}

/// The sorted names of the dirs (not symlinks to dirs) in `rel`, relative to the root,
/// listed through the root's descriptors; none when it cannot be listed.
pub(crate) fn subdirs(root: &RootDir, rel: &Path) -> Vec<std::ffi::OsString> {
    let entries = root.list(rel).unwrap_or_default();
    entries.into_iter().filter(|(_, k)| *k == Kind::Dir).map(|(name, _)| name).collect()
}

/// Resolves a node path to a path relative to the root with no symlink in it. Symlinks on
/// the way (e.g. `/var/lib/kubelet → /data/kubelet`) are followed only while they stay
/// inside the root.
pub fn resolve(root: &RootDir, node_path: &Path) -> io::Result<PathBuf> {
    // Name by name through the root's descriptor, never into a FUSE or network mount.
    root.resolve(node_path)
}

/// An error entry for a node path. The message is the OS error text only.
pub fn error_at(node_path: &Path, e: &io::Error) -> ScanError {
    ScanError {
        path: crate::text::display_path(node_path.as_os_str()),
        error: crate::node::io_message(e),
    }
}

/// The advice on what no site's rule covers: review it.
fn by_hand() -> (String, String) {
    (
        "kresidue only removes kubelet pod volumes and exited containers".to_owned(),
        "review and remove by hand".to_owned(),
    )
}

/// `record` of container `id` as a witness: a runtime's record that the container runs is
/// believed only when this machine runs a process in the container's cgroup now
/// ([`crate::sys::running_container_ids`]); a record of a disk image or of a node that
/// stopped says what ran then, and nothing now. That it does not run is believed.
pub fn witnessed(cx: &Discovery<'_>, id: &str, record: ContainerRecord) -> ContainerRecord {
    let running = match record.running {
        Some(true) if !cx.running.get_or_init(sys_running).contains(id) => None,
        other => other,
    };
    ContainerRecord { running, ..record }
}

/// The ids of the containers this machine runs now (at most 1<<16 processes looked at).
fn sys_running() -> std::collections::HashSet<String> {
    crate::sys::running_container_ids(1 << 16)
}

/// The distinct tools of `runtimes`, in order.
fn tools(runtimes: &[Runtime]) -> Vec<&'static str> {
    let mut tools: Vec<&'static str> = Vec::new();
    for r in runtimes {
        if !tools.contains(&r.spec().tool) {
            tools.push(r.spec().tool);
        }
    }
    tools
}

/// The advice on residue in a container runtime's storage (containerd, CRI-O, Podman,
/// Docker): images are never removed; a container's residue goes with the container,
/// removed with its runtime's own tool (the runtime its records name, else the site's).
fn runtime_advice(f: &Finding, live: Option<&Live>) -> (String, String) {
    let s = |a: &str, b: String| (a.to_owned(), b);
    let props = props(f.site);
    let container = f.container.as_ref();
    let keeper = container.and_then(|c| c.runtime);
    // Who keeps the container: its records' runtime, else any of the site's.
    let who = keeper.map_or(props.runtimes, |k| k.runtimes());
    let tool = tools(who).first().copied().unwrap_or("the runtime's tool");
    // Whose images these are: every runtime of a store they share (containers/storage's
    // images are CRI-O's and Podman's alike), else the keeper's (Docker's own
    // containerd's are Docker's).
    let shared = !who.is_empty() && who.iter().all(|r| props.runtimes.contains(r));
    let store = if shared || keeper.is_none() { props.runtimes } else { who };
    let rmi = match tools(store) {
        t if t.is_empty() => "with the runtime's own tool".to_owned(),
        t => t.iter().map(|t| format!("{t} rmi")).collect::<Vec<_>>().join(", or "),
    };
    match f.category {
        Category::ImageLayer => {
            return s(
                "images are never removed by kresidue",
                format!("rebuild the image without the secret, rotate it, then remove the image ({rmi})"),
            );
        }
        Category::ImageConfig => {
            return s(
                "images are never removed by kresidue",
                format!("rebuild the image without the build arg or ENV (pass it as a build secret), rotate the secret, then remove the image ({rmi})"),
            );
        }
        _ if f.site == SiteId::RuntimeVolume => {
            let tool = tools(who).join(" or ");
            return s(
                "volumes are never removed by kresidue",
                format!("rotate the secret, then remove the volume once no container uses it ({tool} volume rm)"),
            );
        }
        _ => {}
    }
    let id = container.and_then(|c| c.id.as_deref());
    let state = id.and_then(|id| live?.containers.get(id)).map(|c| c.state);
    // What a runtime's own records say (containerd's say nothing of it: CRI does).
    let own_records = keeper.filter(|k| k.runtimes().iter().all(|r| r.spec().records_tell_running));
    let records_say = own_records.and(container.and_then(|c| c.live));
    // Only the containers of a runtime `clean` removes are removed by it (its sites are
    // container-owned, and its records name it).
    let removable = props.container_owned
        && keeper.and_then(Keeper::runtime).is_some_and(|r| r.spec().clean == Clean::RemoveExited);
    match (id, state, records_say) {
        (Some(id), Some(crate::cri::EXITED), _) if removable => s(
            "the container has exited",
            format!("remove it: {tool} rm {id} (or kresidue clean --remove-exited-containers)"),
        ),
        (Some(id), Some(crate::cri::EXITED), _) | (Some(id), None, Some(false)) => {
            s("the container has exited", format!("remove it: {tool} rm {id}"))
        }
        (Some(_), Some(_), _) | (Some(_), None, Some(true)) => s(
            "the container is live",
            "move the secret into a Secret volume and restart the pod".to_owned(),
        ),
        // A containers/storage container dir that no record names.
        (Some(_), None, None)
            if f.site == SiteId::ContainersStorage
                && container.and_then(|c| c.live) == Some(false) =>
        {
            s(
                "no runtime record names the container: it was removed, its files left",
                "check that no runtime uses the container's dir, then remove it by hand"
                    .to_owned(),
            )
        }
        (Some(_), None, None) if live.is_some() && removable => s(
            "the runtime no longer knows the container",
            "the runtime's garbage collection removes what no container references; if it stays, remove it with the runtime's tools (ctr)".to_owned(),
        ),
        _ if f.site == SiteId::ContainerdMetadata => s(
            "the runtime's metadata database is never edited by kresidue",
            "remove the containers it names through the runtime; freed pages are overwritten as the database grows".to_owned(),
        ),
        _ => s(
            "runtime storage is only removed through the runtime",
            format!("remove the owning container through the runtime ({tool} rm), if it is not needed"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `SiteId` is in `SiteId::ALL` once, and its family is in the registry once.
    #[test]
    fn every_site_id_has_one_family_in_the_registry() {
        let all = SiteId::ALL;
        for (i, id) in all.iter().enumerate() {
            assert!(!all[i + 1..].contains(id), "{id:?} twice in SiteId::ALL");
            let family = props(*id).family;
            let entries = REGISTRY.iter().filter(|f| **f == family).count();
            assert_eq!(entries, 1, "{id:?}'s family is in the registry {entries} times");
        }
        // Every family of the registry has a site.
        for f in REGISTRY {
            assert!(all.iter().any(|id| props(*id).family == f), "{f:?} has no site");
        }
    }

    /// A site that holds a runtime's data names the runtimes whose tools its advice
    /// gives (the advice of a family that gives runtime advice needs one).
    #[test]
    fn runtime_sites_name_their_runtimes() {
        for &id in SiteId::ALL {
            let p = props(id);
            let runtime_family = matches!(
                p.family,
                Family::Containerd
                    | Family::ContainersStorage
                    | Family::Docker
                    | Family::RuntimeData
            );
            assert_eq!(runtime_family, !p.runtimes.is_empty(), "{id:?}");
        }
    }

    /// Pod dirs are walked first, then pod logs, then the runtimes' records and layers:
    /// a `--timeout` cuts the layers, not what the pods left.
    #[test]
    fn pods_and_logs_are_walked_before_the_runtimes_layers() {
        let at = |id| REGISTRY.iter().position(|f| *f == props(id).family).unwrap();
        assert_eq!(at(SiteId::KubeletSecretVolume), 0);
        assert_eq!(at(SiteId::PodLog), 1);
        for id in [SiteId::ContainerdSnapshot, SiteId::ContainersStorage, SiteId::DockerStorage] {
            assert!(at(id) > at(SiteId::PodLog), "{id:?}");
        }
    }
}
