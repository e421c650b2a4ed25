//! containerd: its metadata database (`meta.db`), the task bundles' OCI specs, and the
//! overlayfs and native snapshotters' layers. Facts in `docs/NODE-LAYOUT.md`
//! (containerd); the record formats are read by [`crate::node::containerd`].

use super::places::ContainerdAt;
use super::{Advice, Discovery, FileId, Kept, Ownership, ScopeKind, Site};
use crate::finding::{Category, ContainerRef, Finding, Images, ScanError, SiteId};
use crate::node::containerd::{self, MetaDb, Owner, SnapshotKind};
use crate::node::other_runtimes::containerd_dirs;
use crate::runtimes::containerd::SPEC;
use crate::runtimes::Keeper;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The default containerd root (`root` in `config.toml`).
pub const DEFAULT_ROOT: &str = SPEC.dirs.root;
/// The metadata database, relative to the containerd root.
pub const META_DB: &str = "io.containerd.metadata.v1.bolt/meta.db";
/// The default containerd state dir (`state` in `config.toml`, a tmpfs).
pub const DEFAULT_STATE: &str = match SPEC.dirs.state {
    Some(state) => state,
    None => DEFAULT_ROOT,
};
/// containerd's configuration, which may name another `root` and `state`.
pub const CONFIG_TOML: &str = SPEC.dirs.config[0];

/// The largest `config.toml` read.
const MAX_CONFIG: u64 = 1 << 20;

/// The runtime v2 task bundles, relative to the state dir: `<namespace>/<id>/config.json`
/// (`runtime/v2/bundle.go`; a crashed delete leaves `<namespace>/.<id>`).
pub const TASKS: &str = "io.containerd.runtime.v2.task";

/// The snapshotters whose layers are scanned: the name `meta.db` knows them by, their dir
/// relative to the containerd root (`metadata.db` and `snapshots/<id>`), and where a
/// snapshot's files are inside `snapshots/<id>`: overlayfs keeps them in `fs` (the upper
/// dir of an active one), native in the dir itself, as a full copy
/// (`snapshots/overlay/overlay.go`, `snapshots/native/native.go`).
pub const SNAPSHOTTERS: [(&str, &str, &str); 2] = [
    ("overlayfs", "io.containerd.snapshotter.v1.overlayfs", "fs"),
    ("native", "io.containerd.snapshotter.v1.native", ""),
];
/// A snapshotter's database of its snapshots, in its dir.
const SNAPSHOTTER_DB: &str = "metadata.db";
/// The snapshots' dirs, in a snapshotter's dir: `snapshots/<id>`.
const SNAPSHOTS: &str = "snapshots";
/// A task bundle's OCI spec, in the bundle dir.
const BUNDLE_SPEC: &str = "config.json";

/// The largest database read whole (`meta.db`, a snapshotter's `metadata.db`), by
/// discovery and by the scan: a node's are a few MiB to tens of MiB. A larger `meta.db` is
/// searched as a stream, its matches not attributed to containers, and the snapshot dirs
/// its records would name are unknown (an `errors` entry says so); what a whole read
/// holds stays within the memory bound of docs/CONTRACT.md.
pub const MAX_DB: u64 = 128 << 20;

/// The largest bundle spec read whole to attribute its matches.
pub const MAX_SPEC: u64 = 16 << 20;

/// What an orphaned snapshot dir is.
const ORPHAN: &str = "a snapshot dir the snapshotter's database does not know (an orphan \
    left by an interrupted removal)";

/// What a match in a freed page of a database is.
const FREED_PAGE: &str = "in a freed page of the database: data of a removed container (or \
    other record) that the database has not overwritten yet";

/// containerd's root and state dirs.
pub struct Containerd;

/// What discovery parsed of `meta.db` ([`Kept::parsed`]): its records and the parts that
/// could not be read, or why none could.
type Parsed = Result<(MetaDb, Vec<crate::bbolt::Error>), String>;

/// The parse of `meta.db` kept at discovery.
fn parsed(kept: &Kept) -> Option<&Parsed> {
    kept.parsed.downcast_ref()
}

impl Site for Containerd {
    /// Every containerd of the node's places ([`super::places::Places::containerds`]):
    /// `--containerd-root` and `--containerd-state`, else the default one and each
    /// distribution's, each moved by its `config.toml`. One root or state dir is read
    /// once, whoever names it. The one dockerd starts for itself is found by Docker's
    /// family, which knows Docker's data root (through `discover_one`).
    fn discover(&self, cx: &mut Discovery<'_>) {
        let mut seen = Vec::new();
        for at in cx.places.containerds.clone() {
            let (root, state, named_by) = configured(cx, &at);
            let rel = |cx: &Discovery<'_>, p: &Path| super::resolve(cx.root, p).ok();
            let (root_rel, state_rel) = (rel(cx, &root), rel(cx, &state));
            if root_rel.is_some() && seen.contains(&root_rel) {
                continue;
            }
            let state_seen = state_rel.is_some() && seen.contains(&state_rel);
            // No state dir (what a mount hides has none).
            let state = (!state_seen && !state.as_os_str().is_empty()).then_some(state);
            seen.extend([root_rel, state_rel]);
            discover_one(cx, &root, state.as_deref(), named_by.as_deref(), at.keeper);
        }
    }

    fn advice(&self, f: &Finding, cx: Advice<'_>) -> (String, String) {
        super::runtime_advice(f, cx.live)
    }
}

/// Attributes the matches in `meta.db` by offset ([`super::Attribute`]): to the container
/// whose record holds a match, or to a freed page (a removed container's data, marked
/// stale), from the parse kept at discovery when it is of these bytes.
pub fn attribute_meta_db(
    parsed: Option<&(dyn std::any::Any + Send + Sync)>,
    keeper: Option<Keeper>,
    data: &[u8],
    found: &mut [Finding],
) -> Vec<String> {
    let reparsed;
    let meta = match parsed.and_then(|p| p.downcast_ref::<Parsed>()) {
        Some(kept) => kept,
        None => {
            reparsed = MetaDb::read(data).map_err(|e| e.to_string());
            &reparsed
        }
    };
    match meta {
        Ok((db, errs)) => {
            for f in found {
                attribute(f, db.owner(f.offset..f.offset + f.length), keeper);
            }
            errs.iter().map(|e| format!("containerd metadata: {e}")).collect()
        }
        Err(e) => {
            vec![format!("containerd metadata: {e}; its matches are not attributed to containers")]
        }
    }
}

/// Attributes the matches in a task bundle's `config.json` ([`super::Attribute`]) to the
/// pod and container its CRI annotations name (the container id is the bundle dir's).
pub fn attribute_bundle(
    _parsed: Option<&(dyn std::any::Any + Send + Sync)>,
    _keeper: Option<Keeper>,
    data: &[u8],
    found: &mut [Finding],
) -> Vec<String> {
    let owner = containerd::spec_owner(data);
    for f in found {
        if let Some(c) = &mut f.container {
            c.name.clone_from(&owner.name);
        }
        f.pod = owner.pod();
    }
    Vec::new()
}

/// Sets the owner of a match in `meta.db`.
fn attribute(f: &mut Finding, owner: Owner<'_>, keeper: Option<Keeper>) {
    let part = match owner {
        Owner::Container(c) => {
            f.container = Some(ContainerRef {
                id: Some(c.id.clone()),
                name: c.name.clone(),
                live: None,
                runtime: keeper,
            });
            f.pod = c.pod();
            format!("container={}/{}", c.namespace, c.id)
        }
        Owner::Freed => {
            f.stale = true;
            f.note = Some(FREED_PAGE);
            "freed".to_owned()
        }
        Owner::Other => "other".to_owned(),
    };
    f.id = Finding::refine_id(&f.id, &part);
}

/// The `config.json` of every task bundle under `tasks` (`<namespace>/<id>/`), live or
/// left behind by a crashed delete (`<namespace>/.<id>/`). The bundle's `rootfs` (the
/// container's mounted filesystem) is not walked.
fn bundles(cx: &mut Discovery<'_>, tasks: &Path, runtime: Keeper) {
    let tasks_rel = match super::resolve(cx.root, tasks) {
        Ok(rel) => rel,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
        Err(e) => return cx.errors.push(super::error_at(tasks, &e)),
    };
    for ns in super::subdirs(cx.root, &tasks_rel) {
        for id in super::subdirs(cx.root, &tasks_rel.join(&ns)) {
            let bundle = tasks_rel.join(&ns).join(&id);
            let listed = cx.root.list(&bundle).unwrap_or_default();
            if !listed.iter().any(|(n, k)| n == BUNDLE_SPEC && *k == crate::sys::Kind::File) {
                continue;
            }
            let name = id.to_string_lossy();
            let mut own = Ownership::new(
                SiteId::OciBundle,
                Category::EnvPersisted,
                Some(name.strip_prefix('.').unwrap_or(&name).to_owned()),
                None,
            );
            own.record.runtime = Some(runtime);
            cx.scopes.push(super::Scope {
                node_path: tasks.join(&ns).join(&id).join(BUNDLE_SPEC),
                kind: ScopeKind::Owned(own),
                rel: bundle.join(BUNDLE_SPEC),
                start: crate::sys::walk::Start::Crossing,
            });
        }
    }
}

/// The root and state of the containerd `at`, moved by its `config.toml` (`root`,
/// `state`) where not given; and who named the root.
fn configured(cx: &mut Discovery<'_>, at: &ContainerdAt) -> (PathBuf, PathBuf, Option<String>) {
    let (mut root, mut state, mut named_by) =
        (at.root.clone(), at.state.clone(), at.named_by.clone());
    let root_given = at.named_by.is_some();
    if let Some(config) = at.config.as_ref().filter(|_| !(root_given && at.state_given)) {
        let conf = cx.parse(config, MAX_CONFIG, containerd_dirs);
        let (conf_root, conf_state) = conf.unwrap_or_default();
        if let Some(r) = conf_root.filter(|_| !root_given) {
            root = Path::new("/").join(r);
            named_by = Some(format!("root in {}", config.display()));
        }
        if let Some(s) = conf_state.filter(|_| !at.state_given) {
            state = Path::new("/").join(s);
        }
    }
    (root, state, named_by)
}

/// The scopes of one containerd: its `meta.db` (read and parsed once, here: the parse
/// names the snapshots' containers, and attributes the matches in `meta.db` itself while
/// the file is unchanged), its task bundles under `state` (none when another containerd's
/// scan read that dir), its snapshots. A missing
/// `root` is an error entry when someone named it (`named_by`).
pub(super) fn discover_one(
    cx: &mut Discovery<'_>,
    root: &Path,
    state: Option<&Path>,
    named_by: Option<&str>,
    runtime: Keeper,
) {
    let mut kept = None;
    match super::resolve(cx.root, root) {
        Ok(_) => {
            let path = root.join(META_DB);
            // Errors of meta.db are its own scope's to report: a file that cannot be
            // read here is read by the scan, which says why.
            match read_quietly(cx, &path) {
                Ok(read) => {
                    kept = read.map(|(data, identity)| {
                        let parsed: Parsed = MetaDb::read(&data).map_err(|e| e.to_string());
                        Arc::new(Kept { identity, parsed: Box::new(parsed) })
                    });
                }
                Err(size) => cx.errors.push(ScanError {
                    path: crate::text::display_path(path.as_os_str()),
                    error: format!(
                        "{size} bytes, more than the {MAX_DB} a database is read whole up to: \
                         searched as a stream, its matches not attributed to containers, and \
                         the owners of its snapshots unknown"
                    ),
                }),
            }
            let mut own =
                Ownership::new(SiteId::ContainerdMetadata, Category::EnvPersisted, None, None);
            own.kept = kept.clone();
            own.record.runtime = Some(runtime);
            cx.push(&path, ScopeKind::Owned(own), super::Unresolved::UnlessMissing);
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && named_by.is_none() => {}
        Err(e) => {
            let mut entry = super::error_at(root, &e);
            if let Some(by) = named_by.filter(|by| *by != "--containerd-root") {
                entry.error = format!("containerd's root, as {by} names it: {}", entry.error);
            }
            cx.errors.push(entry);
        }
    }
    if let Some(state) = state {
        bundles(cx, &state.join(TASKS), runtime);
    }
    let meta = kept.as_deref().and_then(parsed).and_then(|p| p.as_ref().ok());
    snapshots(cx, root, meta.map(|(db, _)| db), runtime);
    if let Some((db, _)) = meta {
        image_configs(cx, root, db);
    }
}

/// containerd's content store, where pulled and imported blobs are kept by digest.
const BLOBS: &str = "io.containerd.content.v1.content/blobs";

/// The image config blobs of the content store that `meta.db`'s images name (through
/// their manifests, an index's too, unpacked or not), each with every name of the images
/// that use it. Other blobs (manifests, compressed layers, whose files are read unpacked
/// in the snapshots) are not read.
fn image_configs(cx: &mut Discovery<'_>, root: &Path, db: &MetaDb) {
    let blobs = root.join(BLOBS);
    for (digest, names) in &db.configs {
        // A digest is `<algorithm>:<hex>`; anything else (a path, in a crafted database)
        // names no blob.
        let Some((algorithm, hex)) = digest.split_once(':') else { continue };
        let word = |s: &str, ok: fn(char) -> bool| !s.is_empty() && s.chars().all(ok);
        if !word(algorithm, |c| c.is_ascii_alphanumeric()) || !word(hex, |c| c.is_ascii_hexdigit())
        {
            continue;
        }
        let mut own = Ownership::new(SiteId::ContainerdContent, Category::ImageConfig, None, None);
        own.images = Images::new(names.iter().cloned());
        cx.push(&blobs.join(algorithm).join(hex), ScopeKind::Owned(own), super::Unresolved::Quiet);
    }
}

/// The files of every snapshot of the overlayfs and native snapshotters, with what each
/// is: a snapshot the snapshotter records as active, whose key is a container's snapshot
/// key in `meta.db`, is that container's writable layer; a committed one is an image layer
/// (scanned once however many containers share it), named after the images whose chains
/// hold it; one no record names is an orphan.
fn snapshots(cx: &mut Discovery<'_>, ctrd: &Path, meta: Option<&MetaDb>, runtime: Keeper) {
    let present: Vec<_> = SNAPSHOTTERS
        .iter()
        .filter_map(|&(name, dir, files)| {
            let base = ctrd.join(dir);
            let rel = super::resolve(cx.root, &base.join(SNAPSHOTS)).ok()?;
            Some((name, base, rel, files))
        })
        .collect();
    if present.is_empty() {
        return;
    }
    let none = MetaDb::default();
    let meta = meta.unwrap_or(&none);
    let mut owners: HashMap<(&str, &str), (&str, Option<&str>)> = HashMap::new();
    for c in &meta.containers {
        if let Some((snapshotter, key)) = &c.snapshot {
            owners.insert((snapshotter, key), (&c.id, c.pod_uid.as_deref()));
        }
    }
    for (snapshotter, base, rel, files) in present {
        let db_path = base.join(SNAPSHOTTER_DB);
        // Unless every record was read, a dir without one is unknown, not an orphan.
        let (mut records, mut complete) = (BTreeMap::new(), false);
        if let Some(data) = cx.read(&db_path, MAX_DB) {
            match containerd::read_snapshots(&data) {
                Ok((r, errs)) => {
                    (records, complete) = (r.records, r.complete);
                    cx.errors.extend(errs.iter().map(|e| bolt_error(&db_path, e)));
                }
                Err(e) => cx.errors.push(bolt_error(&db_path, &e)),
            }
        }
        let images = containerd::layer_images(snapshotter, &records, &meta.images);
        let mut ids: Vec<(u64, std::ffi::OsString)> = super::subdirs(cx.root, &rel)
            .into_iter()
            .filter_map(|name| Some((name.to_str()?.parse().ok()?, name)))
            .collect();
        ids.sort();
        for (id, name) in ids {
            let mut own =
                Ownership::new(SiteId::ContainerdSnapshot, Category::ContainerLayer, None, None);
            own.record.runtime = Some(runtime);
            match records.get(&id) {
                Some(s) if s.kind == SnapshotKind::Committed => {
                    own.category = Category::ImageLayer;
                    own.images = Images::new(images.get(&id).into_iter().flatten().cloned());
                }
                Some(s) => {
                    if let Some((c, pod)) = owners.get(&(snapshotter, s.key.as_str())) {
                        own.container = Some(c.to_string());
                        own.pod_uid = pod.map(str::to_owned);
                    }
                }
                None if complete => own.note = Some(ORPHAN),
                None => {}
            }
            // `join("")` would add a trailing slash.
            let within = |p: PathBuf| if files.is_empty() { p } else { p.join(files) };
            cx.scopes.push(super::Scope {
                rel: within(rel.join(&name)),
                node_path: within(base.join(SNAPSHOTS).join(&name)),
                kind: ScopeKind::Owned(own),
                start: crate::sys::walk::Start::Crossing,
            });
        }
    }
}

/// The bytes of `meta.db` for the snapshots' owners, its errors left to its own scope;
/// `Err` with its size when it is larger than [`MAX_DB`] (and than no `--max-file-size`:
/// then the scan says it is not read at all).
fn read_quietly(cx: &Discovery<'_>, node: &Path) -> Result<Option<(Vec<u8>, FileId)>, u64> {
    use std::io::Read;
    let Ok(rel) = super::resolve(cx.root, node) else { return Ok(None) };
    let Ok((f, size)) = cx.root.open_regular(&rel, cx.layout.cap(u64::MAX)) else {
        return Ok(None);
    };
    if size > MAX_DB {
        return Err(size);
    }
    let mut data = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    if (&f).take(size).read_to_end(&mut data).is_err() {
        return Ok(None);
    }
    let Ok(md) = f.meta() else { return Ok(None) };
    Ok(Some((data, FileId::of(&md))))
}

/// An error entry for a damaged database at `node_path`.
fn bolt_error(node_path: &Path, e: &crate::bbolt::Error) -> ScanError {
    ScanError { path: crate::text::display_path(node_path.as_os_str()), error: e.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::Finding;

    use crate::node::containerd::tests::{ID, META, SNAPSHOTS as SNAPSHOT_DB};

    /// `meta.db` is read and parsed once, at discovery: its scope carries the bytes and
    /// the parse, the snapshots are owned from that parse, and the scan's attribution uses
    /// it too (the bytes given to `attribute_meta_db` are not parsed again).
    #[test]
    fn meta_db_is_read_and_parsed_once() {
        let dir = tempfile::tempdir().unwrap();
        let ctrd = dir.path().join("var/lib/containerd");
        let db_file = ctrd.join(META_DB);
        std::fs::create_dir_all(db_file.parent().unwrap()).unwrap();
        std::fs::write(&db_file, META).unwrap();
        let overlay = ctrd.join(SNAPSHOTTERS[0].1);
        std::fs::create_dir_all(&overlay).unwrap();
        std::fs::write(overlay.join(SNAPSHOTTER_DB), SNAPSHOT_DB).unwrap();
        let snaps = containerd::read_snapshots(SNAPSHOT_DB).unwrap().0.records;
        for id in snaps.keys() {
            std::fs::create_dir_all(overlay.join(SNAPSHOTS).join(id.to_string()).join("fs"))
                .unwrap();
        }
        let root = crate::sys::RootDir::open(dir.path()).unwrap();
        let mut errors = Vec::new();
        let scopes =
            super::super::discover(&root, &super::super::Layout::defaults(), &mut errors).scopes;
        assert!(errors.is_empty(), "{errors:?}");

        fn owned(s: &super::super::Scope) -> Option<&Ownership> {
            match &s.kind {
                ScopeKind::Owned(o) => Some(o),
                _ => None,
            }
        }
        let meta = scopes.iter().filter_map(owned).find(|o| o.site == SiteId::ContainerdMetadata);
        let kept = meta.and_then(|o| o.kept.clone()).expect("meta.db's scope keeps its bytes");
        let on_disk = std::fs::metadata(&db_file).unwrap();
        assert_eq!(
            kept.identity,
            FileId::of(&crate::sys::image::Meta::of(&on_disk)),
            "the version read is the one on disk"
        );
        let Some(Ok((db, _))) = parsed(&kept) else { panic!("meta.db's parse is kept") };
        assert!(db.containers.iter().any(|c| c.id == ID));
        // The container's writable layer is owned from that parse.
        let layer = scopes.iter().filter_map(owned).find(|o| o.container.as_deref() == Some(ID));
        assert_eq!(layer.map(|o| o.category), Some(Category::ContainerLayer));

        // Attribution takes the kept parse, whatever bytes it is handed: a match at a byte
        // of the container's record is the container's.
        let at = (0..META.len() as u64)
            .find(|&i| matches!(db.owner(i..i + 1), containerd::Owner::Container(c) if c.id == ID))
            .expect("a byte of the container's record");
        let mut f = Finding::sample(SiteId::ContainerdMetadata, Category::EnvPersisted, "m");
        (f.offset, f.length) = (at, 1);
        let parsed = Some(&*kept.parsed);
        let one = std::slice::from_mut(&mut f);
        let errors = attribute_meta_db(parsed, None, &[0; 64], one);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(f.container.and_then(|x| x.id).as_deref(), Some(ID));
        // Without it, the bytes given are parsed: these are no database.
        let mut g = Finding::sample(SiteId::ContainerdMetadata, Category::EnvPersisted, "m");
        let one = std::slice::from_mut(&mut g);
        let errors = attribute_meta_db(None, None, &[0; 64], one);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(g.container.is_none());
        // A file written since is another version: its kept parse is not used for it.
        std::fs::write(&db_file, [META, b"x"].concat()).unwrap();
        assert_ne!(
            kept.identity,
            FileId::of(&crate::sys::image::Meta::of(&std::fs::metadata(&db_file).unwrap()))
        );
    }
}
