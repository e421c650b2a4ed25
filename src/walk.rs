//! The walk: lists the regular files of each [`Scope`] without following any symlink
//! ([`crate::sys::walk`], by directory descriptors), classifies each by site, and names it
//! as a person on the node sees it.
//!
//! Only regular files become [`FileJob`]s: symlinks, FIFOs, sockets and device nodes are
//! never opened (their type comes from the directory entry, and the open in `scan` checks
//! again). `scan` runs these iterators on a thread of their own and reads the files they
//! list with rayon.
//!
//! Mount points below a scope are not crossed ([`crate::sys::walk`] refuses the crossing
//! before the mounted filesystem is asked anything), except where kubelet or a Secret
//! driver mounts a tmpfs of Secret data: a Secret or projected volume dir, a Secrets Store
//! CSI volume's `mount` dir (its `vol_data.json` names the driver), a `volume-subpaths`
//! entry (a bind mount of part of such a tmpfs); and other CSI volumes' `mount` dirs only
//! with `--read-csi-volumes` (they hold the application's data). A FUSE or network
//! filesystem is never entered, nor a scope on or below one. What is left is listed as an
//! [`UnreadMount`].

use crate::finding::{ScanError, SiteId, UnreadMount};
use crate::node::io_message;
use crate::sites::kubelet::{mount_place, secrets_store, MountPlace};
use crate::sites::{ContainerLayout, ContainerMount, Owner, Owners, Scope};
use crate::sys::image::NodeFile;
use crate::sys::walk::{Cross, DirFd, Entry, Pruned};
use crate::sys::RootDir;
use crate::text::display_path;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A regular file to read.
#[derive(Clone, Debug)]
pub struct FileJob {
    /// Path relative to the root (no symlinks).
    pub rel: PathBuf,
    /// Where it is opened from.
    from: From,
    /// What to do when the file is itself a mount point.
    mounts: Arc<ScopeMounts>,
    /// Inode number seen by the walk (checked against the opened file).
    pub ino: u64,
    /// The node path of the file's scope, shared by all of its files.
    scope_path: Arc<Path>,
    /// What is shown under `scope_path` when it differs from the path under the scope (an
    /// atomic-writer volume's user-visible name).
    shown: Option<PathBuf>,
    /// Where in `rel` the path under the scope starts.
    inner_at: usize,
    /// Who it belongs to.
    pub owner: Owner,
}

/// Where a [`FileJob`]'s file is opened from.
#[derive(Clone, Debug)]
enum From {
    /// A mounted root's directory.
    Host {
        /// Its directory, to open it by name; or the root, when `by_path`.
        dir: Arc<DirFd>,
        /// Opened by `rel[base..]` from `dir`, the top of its mount (the walk's
        /// descriptor budget was spent).
        by_path: bool,
        /// See `by_path`.
        base: usize,
    },
    /// An image's tree (the root), by its path.
    Image(RootDir),
}

impl FileJob {
    /// Opens the file for reading, beneath its directory's descriptor (or its mount's
    /// top), never through a symlink nor across a mount point the scope's policy does not
    /// let the scan enter (a file bind-mounted from a Secret volume's tmpfs is read). The
    /// inode the file opened must have: the one listed, or, for a file that is a mount
    /// point, the mounted file's (checked as it is opened).
    pub fn open(&self) -> Result<(NodeFile, u64), Unopened> {
        let Some(name) = self.rel.file_name() else {
            return Err(Unopened::Io(std::io::Error::other("not a file name")));
        };
        let (dir, by_path, base) = match &self.from {
            From::Host { dir, by_path, base } => (dir, *by_path, *base),
            From::Image(root) => {
                return root.open_file(&self.rel).map(|f| (f, self.ino)).map_err(Unopened::Io)
            }
        };
        let opened = match by_path {
            true => dir.open_file_below(crate::sys::walk::under_base(&self.rel, base)),
            false => dir.open_file_below(Path::new(name)),
        };
        match opened {
            Err(e) if e.raw_os_error() == Some(nix::libc::EXDEV) && !by_path => {
                match self.mounts.decide(&self.rel, dir) {
                    Cross::Enter { id, tmpfs } => {
                        let f = dir.open_mounted_file(name, id, tmpfs).map_err(Unopened::Io)?;
                        let ino = f.metadata().map_err(Unopened::Io)?.ino();
                        Ok((NodeFile::host(f), ino))
                    }
                    Cross::Unread(fstype) => {
                        Err(Unopened::Mount(UnreadMount { path: self.node_path(), fstype }))
                    }
                    // A file is no container's `/dev/shm`: said, not read.
                    Cross::Skip => Err(Unopened::Mount(UnreadMount {
                        path: self.node_path(),
                        fstype: "tmpfs".to_owned(),
                    })),
                }
            }
            Err(e) if e.raw_os_error() == Some(nix::libc::EXDEV) => {
                Err(Unopened::Io(std::io::Error::other(
                    "a filesystem was mounted on its path during the scan; not read",
                )))
            }
            r => r.map(|f| (NodeFile::host(f), self.ino)).map_err(Unopened::Io),
        }
    }

    /// What the file is, asked without opening it for reading ([`DirFd::peek`]: an
    /// `O_PATH` descriptor beneath its directory's, crossing no mount point). `None`
    /// where it is not asked that way (an image's file, one opened by its path) or cannot
    /// be (a mount point, an error): it is opened ([`FileJob::open`]).
    pub fn peek(&self) -> Option<crate::sys::image::Meta> {
        match &self.from {
            From::Host { dir, by_path: false, .. } => dir.peek(self.rel.file_name()?).ok()?,
            From::Host { by_path: true, .. } | From::Image(_) => None,
        }
    }

    /// Opens the regular file `name` beside this one (a database's log), as
    /// [`FileJob::open`] opens a file: beneath its directory's descriptor (or its mount's
    /// top), never through a symlink nor across a mount point.
    pub fn open_sibling(&self, name: &OsStr) -> std::io::Result<NodeFile> {
        let f = match &self.from {
            From::Image(root) => {
                return root.open_regular(&self.rel.with_file_name(name), u64::MAX).map(|(f, _)| f)
            }
            From::Host { dir, by_path: true, base } => {
                let rel = self.rel.with_file_name(name);
                dir.open_regular_below(crate::sys::walk::under_base(&rel, *base))?
            }
            From::Host { dir, by_path: false, .. } => dir.open_regular_below(Path::new(name))?,
        };
        Ok(NodeFile::host(f))
    }

    /// The names of the entries of this file's directory (its siblings and itself), in
    /// name order, listed beneath its directory's descriptor (or its mount's top).
    pub fn sibling_names(&self) -> std::io::Result<Vec<std::ffi::OsString>> {
        match &self.from {
            From::Image(root) => {
                let listed = root.list(self.rel.parent().unwrap_or(Path::new("")))?;
                Ok(listed.into_iter().map(|(name, _)| name).collect())
            }
            From::Host { dir, by_path: true, base } => {
                let rel = self.rel.parent().unwrap_or(Path::new(""));
                let rel = crate::sys::walk::under_base(rel, *base);
                let rel = if rel.as_os_str().is_empty() { Path::new(".") } else { rel };
                dir.names_below(rel)
            }
            From::Host { dir, by_path: false, .. } => dir.names_below(Path::new(".")),
        }
    }

    /// What its node path is made of ([`FileJob::node_path`]), unformatted: the scope's
    /// node path and the name shown under it.
    pub fn shown_as(&self) -> [&Path; 2] {
        [&self.scope_path, self.shown.as_deref().unwrap_or_else(|| self.inner())]
    }

    /// Its path under its scope.
    fn inner(&self) -> &Path {
        Path::new(OsStr::from_bytes(&self.rel.as_os_str().as_bytes()[self.inner_at..]))
    }

    /// The node path to report (the user-visible name in an atomic-writer volume). Made
    /// when needed (a finding, an error): most files have neither.
    pub fn node_path(&self) -> String {
        display_path(OsStr::from_bytes(&self.shown_path()))
    }

    /// The node path its findings' ids are made of ([`crate::text::id_path`]).
    pub fn id_path(&self) -> String {
        crate::text::id_path(OsStr::from_bytes(&self.shown_path()))
    }

    /// The bytes of the node path to report.
    pub fn shown_path(&self) -> Vec<u8> {
        let [_, shown] = self.shown_as();
        // A scope that is one file: `join("")` would add a trailing slash.
        if shown.as_os_str().is_empty() {
            self.scope_path.as_os_str().as_bytes().to_vec()
        } else {
            std::os::unix::ffi::OsStringExt::into_vec(self.scope_path.join(shown).into_os_string())
        }
    }
}

/// Why a [`FileJob`] was not opened.
#[derive(Debug)]
pub enum Unopened {
    /// It could not be.
    Io(std::io::Error),
    /// It is a mount point the scan does not enter.
    Mount(UnreadMount),
}

/// What the walk knows of the node's mounts for one scan: the root's mount table (read
/// once for the run, when first needed) and whether other CSI volumes are read.
#[derive(Debug)]
pub struct Crossings {
    root: RootDir,
    read_csi_volumes: bool,
}

impl Crossings {
    /// The mounts of the node beneath `root`; `read_csi_volumes`: CSI volumes other than
    /// the Secrets Store driver's are entered too (`--read-csi-volumes`).
    pub fn new(root: RootDir, read_csi_volumes: bool) -> Arc<Crossings> {
        Arc::new(Crossings { root, read_csi_volumes })
    }
}

/// The mount policy of one scope.
#[derive(Debug)]
pub struct ScopeMounts {
    crossings: Arc<Crossings>,
    /// A kubelet pod dir (where kubelet's tmpfs volumes are).
    pod: bool,
    /// A container's own dir, as its runtime lays it out (where the runtime mounts its
    /// tmpfs).
    container: Option<&'static ContainerLayout>,
    /// The scope's path relative to the root, bytes.
    base: Vec<u8>,
    /// The CSI volumes entered only because `--read-csi-volumes` asks (paths relative to
    /// the root): their files are the application's data, site `other`.
    app_volumes: std::sync::Mutex<Vec<PathBuf>>,
}

impl ScopeMounts {
    /// Whether `rel` is in a CSI volume entered only because `--read-csi-volumes` asks.
    fn is_app_volume(&self, rel: &Path) -> bool {
        let apps = self.app_volumes.lock().expect("lock");
        apps.iter().any(|v| rel.starts_with(v))
    }

    /// What to do at the mount point `rel` (relative to the root) in the directory `parent`:
    /// decided from the mount table, before anything on the mount is touched.
    fn decide(&self, rel: &Path, parent: &DirFd) -> Cross {
        let c = &self.crossings;
        let Some(m) = c.root.mounts().at(&c.root.path().join(rel)) else {
            return Cross::Unread("unknown".to_owned());
        };
        if let Some(layout) = self.container {
            let tmpfs = m.fstype == "tmpfs";
            return match layout.mount(under(rel, &self.base)) {
                // The runtime mounts a tmpfs of its own there, never a bind of part of one.
                ContainerMount::Shm if m.is_whole_tmpfs() => Cross::Skip,
                ContainerMount::Secrets if m.is_whole_tmpfs() => Cross::Enter { id: m.id, tmpfs },
                ContainerMount::Shm | ContainerMount::Secrets | ContainerMount::Foreign => {
                    Cross::Unread(m.fstype.clone())
                }
            };
        }
        let place = if self.pod { mount_place(under(rel, &self.base)) } else { None };
        let enter = !m.is_remote()
            && match place {
                Some(MountPlace::Volume) => m.is_whole_tmpfs(),
                // Kubelet bind-mounts the subPath's file or dir from the volume's tmpfs.
                Some(MountPlace::Subpath) => m.fstype == "tmpfs",
                Some(MountPlace::Csi) if m.is_whole_tmpfs() && secrets_store(parent) => true,
                Some(MountPlace::Csi) if c.read_csi_volumes => {
                    self.app_volumes.lock().expect("lock").push(rel.to_path_buf());
                    true
                }
                Some(MountPlace::Csi) => false,
                None => false,
            };
        match enter {
            true => Cross::Enter { id: m.id, tmpfs: m.fstype == "tmpfs" },
            false => Cross::Unread(m.fstype.clone()),
        }
    }
}

/// What the walk yields.
#[derive(Debug)]
pub enum WalkItem {
    /// A file to read.
    File(FileJob),
    /// Something that could not be listed.
    Error(ScanError),
    /// An entry that is not read because it is not a regular file or a directory: what
    /// it is (`symlink`, `FIFO`, `socket`, `char device`, `block device`).
    Skipped(&'static str),
    /// A mount point not read.
    Unread(UnreadMount),
}

/// The scopes to walk, in the order given, each with the subtrees its walk leaves out:
/// the scopes strictly beneath it that come before it, which are walked as themselves. So
/// a `--path /` (after every site) leaves the sites to their own scopes, and each of their
/// entries is walked once, as its site's. A scope beneath an earlier one is walked as
/// before, both ways (its files read as the first's that reaches them): a `--path` inside
/// a pod dir keeps the pod's mount policy over it, and may cross a mount at its start the
/// pod's walk leaves unread.
pub fn plan(scopes: Vec<Scope>) -> Vec<(Scope, Pruned)> {
    // In the order of paths by components, a scope's descendants follow it at once.
    let mut by_path: Vec<usize> = (0..scopes.len()).collect();
    by_path.sort_by(|&a, &b| scopes[a].rel.cmp(&scopes[b].rel).then(a.cmp(&b)));
    let mut pruned = vec![std::collections::HashSet::new(); scopes.len()];
    for (k, &i) in by_path.iter().enumerate() {
        let outer = &scopes[i].rel;
        let beneath = by_path[k + 1..].iter().take_while(|&&j| scopes[j].rel.starts_with(outer));
        for &j in beneath.filter(|&&j| j < i && scopes[j].rel != *outer) {
            pruned[i].insert(scopes[j].rel.clone());
        }
    }
    scopes.into_iter().zip(pruned).map(|(s, p)| (s, Pruned::new(p))).collect()
}

/// Walks one scope beneath `root`, crossing mount points below it as `crossings` allow,
/// leaving out the subtrees `pruned` holds; a scope on or below a FUSE or network
/// filesystem is not walked at all.
pub fn walk_scope<'a>(
    root: &'a RootDir,
    (scope, pruned): (Scope, Pruned),
    crossings: &Arc<Crossings>,
) -> impl Iterator<Item = WalkItem> + 'a {
    let Scope { rel, node_path, kind, start } = scope;
    let owners = Owners::new(kind);
    let base_bytes = rel.as_os_str().as_bytes().to_vec();
    let remote = root.mounts().remote_over(&root.path().join(&rel)).map(|m| {
        // The mount point as a node path (as is when the root itself is on it).
        let path = display_path(root.node(&m.point).as_os_str());
        WalkItem::Unread(UnreadMount { path, fstype: m.fstype.clone() })
    });
    let mounts = Arc::new(ScopeMounts {
        crossings: crossings.clone(),
        pod: owners.is_pod(),
        container: owners.container_layout(),
        base: base_bytes.clone(),
        app_volumes: Default::default(),
    });
    let scope_path: Arc<Path> = node_path.into();
    let policy = mounts.clone();
    let walk = remote.is_none().then(|| {
        let walk = root.walk_mounts(&rel, Box::new(move |rel, dir| policy.decide(rel, dir)), start);
        walk.leaving_out(pruned)
    });
    remote.into_iter().chain(walk.into_iter().flatten().map(move |entry| {
        let (from, path, ino) = match entry {
            Entry::File { dir, rel, ino, by_path, base } => {
                (From::Host { dir, by_path, base }, rel, ino)
            }
            Entry::ImageFile { rel, ino } => (From::Image(root.clone()), rel, ino),
            Entry::Special(kind) => return WalkItem::Skipped(kind),
            Entry::Unread { rel, fstype } => {
                // At the scope itself: its path (`join("")` would add a slash).
                let inner = under(&rel, &base_bytes);
                let at = if inner.as_os_str().is_empty() {
                    scope_path.to_path_buf()
                } else {
                    scope_path.join(inner)
                };
                let path = display_path(at.as_os_str());
                return WalkItem::Unread(UnreadMount { path, fstype });
            }
            Entry::Error { rel, error } => {
                let inner = under(&rel, &base_bytes);
                let path = display_path(scope_path.join(inner).as_os_str());
                return WalkItem::Error(ScanError { path, error: io_message(&error) });
            }
        };
        let inner = under(&path, &base_bytes);
        let (mut owner, mut shown) = owners.of(inner);
        if owner.site == SiteId::KubeletCsiVolume && mounts.is_app_volume(&path) {
            (owner, shown) = (owners.app_data(), None);
        }
        let inner_at = path.as_os_str().len() - inner.as_os_str().len();
        WalkItem::File(FileJob {
            inner_at,
            rel: path,
            from,
            mounts: mounts.clone(),
            ino,
            scope_path: scope_path.clone(),
            shown,
            owner,
        })
    }))
}

/// The path under `base` (bytes of a path) of a walked path: `base` itself (empty), or
/// `base/…` (what follows the separator). Sliced, not parsed: the walk builds every path
/// it yields by joining names onto `base`.
fn under<'a>(p: &'a Path, base: &[u8]) -> &'a Path {
    let rest = p.as_os_str().as_bytes().strip_prefix(base).unwrap_or(b"");
    Path::new(OsStr::from_bytes(rest.strip_prefix(b"/").unwrap_or(rest)))
}

#[cfg(test)]
mod tests {
    use super::plan;
    use crate::finding::SiteId;
    use crate::sites::{Scope, ScopeKind};
    use std::path::Path;

    fn scope(rel: &str) -> Scope {
        let kind = ScopeKind::Site(SiteId::Other);
        let start = crate::sys::walk::Start::Crossing;
        Scope { rel: rel.into(), node_path: Path::new("/").join(rel), kind, start }
    }

    /// Each scope leaves out the earlier scopes strictly beneath it (not a sibling whose
    /// name only begins alike, not a later one, not one at its own place).
    #[test]
    fn earlier_scopes_beneath_are_left_out() {
        let scopes = ["a/b/c", "x", "a/b", "a/b-c", "a/bc/d", "a/b", "", "a/b/c/d"].map(scope);
        let planned = plan(scopes.into());
        let kept: Vec<&Path> = planned.iter().map(|(s, _)| s.rel.as_path()).collect();
        let all = ["a/b/c", "x", "a/b", "a/b-c", "a/bc/d", "a/b", "", "a/b/c/d"];
        assert_eq!(kept, all.map(Path::new));
        let leaves = |i: usize| -> Vec<&str> {
            let mut left: Vec<&str> =
                all.into_iter().filter(|p| planned[i].1.holds(Path::new(p))).collect();
            left.sort();
            left.dedup();
            left
        };
        assert_eq!(leaves(0), Vec::<&str>::new(), "a/b/c/d comes after a/b/c");
        assert_eq!(leaves(2), ["a/b/c"]);
        assert_eq!(leaves(5), ["a/b/c"], "a/b again: a/b/c, not the first a/b");
        assert_eq!(leaves(6), ["a/b", "a/b-c", "a/b/c", "a/bc/d", "x"]);
    }
}
