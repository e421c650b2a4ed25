//! Container image archives: an OCI image layout (a directory, or a tar of one, as
//! `skopeo copy oci-archive:`, `buildah push oci-archive:`, `podman save --format
//! oci-archive` and `ctr export` write it) or a `docker save` archive (its
//! `manifest.json`: `docker save`, `podman save`): which images it holds, by name, and
//! their config and layer blobs, each blob listed once however many images share it.
//!
//! A blob is named by where it is in the archive; a directory's are opened beneath it
//! through the confined open (no symlink followed, nothing outside it); a tar's are
//! byte ranges of the tar, as the one pass over its headers that tells an image archive
//! from a root filesystem found them (`rootfs::TarTree::files`). A digest is taken as a blob name only when it is `ALGORITHM:HEX` of
//! the algorithm's length, so a manifest cannot name a path outside `blobs/`.

use crate::sys::{Bytes, RootDir};
use serde::Deserialize;
use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

/// The largest JSON document read (an index, a manifest, a config): configs with long
/// histories are hundreds of kilobytes.
pub const MAX_JSON: u64 = 16 << 20;

/// Images, manifests and indexes followed in one archive, at most (a registry's largest
/// multi-platform index has a few dozen).
pub const MAX_DESCRIPTORS: usize = 4096;

/// Nested image indexes followed, at most.
const MAX_DEPTH: usize = 4;

/// Where an archive's blobs are.
pub enum Store {
    /// An OCI layout or an unpacked `docker save` in a directory.
    Dir(RootDir),
    /// A tar: each regular member's data range, by its cleaned name.
    Tar {
        /// The archive.
        bytes: Arc<dyn Bytes + Send + Sync>,
        /// (offset, size) of each member's data.
        members: HashMap<Vec<u8>, (u64, u64)>,
    },
}

impl Store {
    /// Opens the directory at `path` (a tar's members come indexed with it:
    /// [`Store::Tar`], as `rootfs::TarTree::files` gives them).
    pub fn open_dir(path: &Path) -> Result<Store, String> {
        RootDir::open(path).map(Store::Dir).map_err(|e| e.to_string())
    }

    /// Whether the archive holds a file named `name`.
    pub fn has(&self, name: &str) -> bool {
        match self {
            Store::Dir(root) => root.lstat(Path::new(name)).is_ok(),
            Store::Tar { members, .. } => members.contains_key(name.as_bytes()),
        }
    }

    /// The blob or file `name` of the archive, to read through, and its size.
    pub fn open_blob(&self, name: &str) -> Result<(Box<dyn Read + Send>, u64), String> {
        match self {
            Store::Dir(root) => {
                let (f, size) =
                    root.open_regular(Path::new(name), u64::MAX).map_err(|e| e.to_string())?;
                let crate::sys::image::NodeFile::Host(f) = f else {
                    return Err("not a file of this host".to_owned());
                };
                Ok((Box::new(f.take(size)), size))
            }
            Store::Tar { bytes, members } => {
                let &(at, size) = members.get(name.as_bytes()).ok_or("not in the archive")?;
                Ok((Box::new(Range { bytes: bytes.clone(), pos: at, end: at + size }), size))
            }
        }
    }

    /// The JSON document `name`, parsed.
    fn json<T: for<'de> Deserialize<'de>>(&self, name: &str) -> Result<T, String> {
        let (r, size) = self.open_blob(name).map_err(|e| format!("{name}: {e}"))?;
        if size > MAX_JSON {
            return Err(format!("{name}: {size} bytes, more than {MAX_JSON}"));
        }
        let mut data = Vec::with_capacity(size as usize);
        r.take(MAX_JSON).read_to_end(&mut data).map_err(|e| format!("{name}: {e}"))?;
        // serde's message may quote the document's text (a value): only where it failed.
        serde_json::from_slice(&data).map_err(|e| {
            let what = match e.classify() {
                serde_json::error::Category::Io => "could not be read",
                serde_json::error::Category::Syntax => "is not JSON",
                serde_json::error::Category::Data => "is not the JSON expected",
                serde_json::error::Category::Eof => "is cut short",
            };
            format!("{name} {what} (line {}, column {})", e.line(), e.column())
        })
    }
}

/// A byte range of the archive, read with `pread` (many readers share the file).
struct Range {
    bytes: Arc<dyn Bytes + Send + Sync>,
    pos: u64,
    end: u64,
}

impl Read for Range {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let want = buf.len().min(usize::try_from(self.end - self.pos).unwrap_or(usize::MAX));
        if want == 0 {
            return Ok(0);
        }
        self.bytes.read_at(self.pos, &mut buf[..want])?;
        self.pos += want as u64;
        Ok(want)
    }
}

/// What a blob is to its images.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlobKind {
    /// An image config (ENV, history, labels).
    Config,
    /// A layer (a tar, maybe compressed).
    Layer,
}

/// A blob, listed once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blob {
    /// Where it is in the archive.
    pub name: String,
    /// Its digest (a legacy `docker save` layer's is its uncompressed digest, from the
    /// config's `rootfs.diff_ids`; its name when the config does not say).
    pub digest: String,
    /// Config or layer.
    pub kind: BlobKind,
}

/// An image of the archive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    /// Its names (`repo:tag`), or its config's digest when it has none.
    pub names: Vec<String>,
    /// Its config, an index into [`Catalog::blobs`].
    pub config: usize,
    /// Its layers, bottom first, indexes into [`Catalog::blobs`].
    pub layers: Vec<usize>,
}

/// The images of an archive and their blobs.
#[derive(Debug, Default)]
pub struct Catalog {
    /// `docker-save` or `oci-layout`.
    pub format: &'static str,
    /// The images.
    pub images: Vec<Image>,
    /// Their blobs, each once.
    pub blobs: Vec<Blob>,
    /// What could not be read (an image whose manifest is missing).
    pub errors: Vec<String>,
    /// Each blob's index in `blobs`, by name.
    by_name: HashMap<String, usize>,
    /// The manifests and configs read so far (a document is parsed once, however many
    /// descriptors name it), and how many descriptors were followed.
    read: HashMap<String, Arc<Manifest>>,
    followed: usize,
}

impl Catalog {
    /// The names of the images holding blob `i`, each once, in image order.
    pub fn names_of(&self, i: usize) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for img in self.images.iter().filter(|m| m.config == i || m.layers.contains(&i)) {
            for n in &img.names {
                if !names.contains(n) {
                    names.push(n.clone());
                }
            }
        }
        names
    }

    fn blob(&mut self, name: String, digest: String, kind: BlobKind) -> usize {
        if let Some(&i) = self.by_name.get(&name) {
            return i;
        }
        self.by_name.insert(name.clone(), self.blobs.len());
        self.blobs.push(Blob { name, digest, kind });
        self.blobs.len() - 1
    }

    /// Counts one more descriptor followed; false past [`MAX_DESCRIPTORS`] (said once).
    fn follow(&mut self) -> bool {
        self.followed += 1;
        if self.followed == MAX_DESCRIPTORS + 1 {
            self.errors.push(format!(
                "more than {MAX_DESCRIPTORS} images and manifests: the rest not read"
            ));
        }
        self.followed <= MAX_DESCRIPTORS
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct SaveEntry {
    config: String,
    #[serde(default)]
    repo_tags: Option<Vec<String>>,
    layers: Vec<String>,
}

#[derive(Deserialize, Default)]
struct Config {
    #[serde(default)]
    rootfs: Option<RootFs>,
}

#[derive(Deserialize, Default)]
struct RootFs {
    #[serde(default)]
    diff_ids: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Descriptor {
    #[serde(default)]
    media_type: String,
    digest: String,
    #[serde(default)]
    annotations: HashMap<String, String>,
}

#[derive(Deserialize)]
struct Index {
    manifests: Vec<Descriptor>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Manifest {
    #[serde(default)]
    media_type: String,
    #[serde(default)]
    manifests: Option<Vec<Descriptor>>,
    #[serde(default)]
    config: Option<Descriptor>,
    #[serde(default)]
    layers: Vec<Descriptor>,
}

/// The blob path of `digest` (`blobs/ALG/HEX`), when it is a well-formed digest.
pub fn blob_path(digest: &str) -> Option<String> {
    let (alg, hex) = digest.split_once(':')?;
    let len = match alg {
        "sha256" => 64,
        "sha512" => 128,
        _ => return None,
    };
    let ok =
        hex.len() == len && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    ok.then(|| format!("blobs/{alg}/{hex}"))
}

/// The digest a `blobs/ALG/HEX` name stands for.
fn digest_of(name: &str) -> Option<String> {
    let rest = name.strip_prefix("blobs/")?;
    let (alg, hex) = rest.split_once('/')?;
    let digest = format!("{alg}:{hex}");
    blob_path(&digest).map(|_| digest)
}

/// The images of the archive in `store`: its `manifest.json` when it has one (a
/// `docker save`; recent Docker writes an OCI layout beside it), else its `index.json`.
pub fn catalog(store: &Store) -> Result<Catalog, String> {
    if store.has("manifest.json") {
        return docker_save(store);
    }
    if store.has("index.json") {
        return oci_layout(store);
    }
    Err("neither a docker save archive (manifest.json) nor an OCI image layout (index.json)"
        .to_owned())
}

fn docker_save(store: &Store) -> Result<Catalog, String> {
    let entries: Vec<SaveEntry> = store.json("manifest.json")?;
    let mut cat = Catalog { format: "docker-save", ..Catalog::default() };
    let mut diff_ids_of: HashMap<String, Vec<String>> = HashMap::new();
    for e in entries {
        if !cat.follow() {
            break;
        }
        let config_digest = digest_of(&e.config).unwrap_or_else(|| {
            // A legacy archive names the config `HEX.json`.
            let hex = e.config.trim_end_matches(".json");
            blob_path(&format!("sha256:{hex}"))
                .map_or(e.config.clone(), |_| format!("sha256:{hex}"))
        });
        let config = cat.blob(e.config.clone(), config_digest.clone(), BlobKind::Config);
        let diff_ids = match diff_ids_of.get(&e.config) {
            Some(d) => d.clone(),
            None => {
                let d = match store.json::<Config>(&e.config) {
                    Ok(c) => c.rootfs.unwrap_or_default().diff_ids,
                    Err(err) => {
                        cat.errors.push(err);
                        Vec::new()
                    }
                };
                diff_ids_of.insert(e.config.clone(), d.clone());
                d
            }
        };
        let mut layers = Vec::new();
        for (i, l) in e.layers.iter().enumerate() {
            let digest = digest_of(l)
                .or_else(|| diff_ids.get(i).filter(|d| blob_path(d).is_some()).cloned())
                .unwrap_or_else(|| l.clone());
            layers.push(cat.blob(l.clone(), digest, BlobKind::Layer));
        }
        let names = e.repo_tags.filter(|t| !t.is_empty()).unwrap_or_else(|| vec![config_digest]);
        cat.images.push(Image { names, config, layers });
    }
    Ok(cat)
}

fn oci_layout(store: &Store) -> Result<Catalog, String> {
    let index: Index = store.json("index.json")?;
    let mut cat = Catalog { format: "oci-layout", ..Catalog::default() };
    for d in index.manifests {
        let names = names_of(&d, &[]);
        manifest(store, &mut cat, &d, names, 0);
    }
    Ok(cat)
}

/// The names a descriptor's annotations give (containerd's full name first), else those
/// of the index that holds it.
fn names_of(d: &Descriptor, parent: &[String]) -> Vec<String> {
    let mut names = Vec::new();
    for key in ["io.containerd.image.name", "org.opencontainers.image.ref.name"] {
        if let Some(n) = d.annotations.get(key) {
            // A bare tag (`latest`) is a name only when nothing better is there.
            if !names.is_empty() && !n.contains([':', '/', '@']) {
                continue;
            }
            names.push(n.clone());
        }
    }
    if names.is_empty() {
        names = parent.to_vec();
    }
    names
}

fn manifest(store: &Store, cat: &mut Catalog, d: &Descriptor, names: Vec<String>, depth: usize) {
    let Some(path) = blob_path(&d.digest) else {
        return cat
            .errors
            .push(format!("index.json: a malformed digest ({} bytes)", d.digest.len()));
    };
    if !cat.follow() {
        return;
    }
    let m = match cat.read.get(&path) {
        Some(m) => m.clone(),
        None => match store.json::<Manifest>(&path) {
            Ok(m) => {
                let m = Arc::new(m);
                cat.read.insert(path.clone(), m.clone());
                m
            }
            // A multi-platform image's other platforms are often not in the layout.
            Err(e) => return cat.errors.push(e),
        },
    };
    if let Some(children) = &m.manifests {
        if depth >= MAX_DEPTH {
            return cat
                .errors
                .push(format!("{path}: image indexes nested deeper than {MAX_DEPTH}"));
        }
        for c in children {
            let n = names_of(c, &names);
            manifest(store, cat, c, n, depth + 1);
        }
        return;
    }
    let _ = (&m.media_type, &d.media_type);
    let Some(config) =
        m.config.as_ref().and_then(|c| blob_path(&c.digest).map(|p| (p, c.digest.clone())))
    else {
        return cat.errors.push(format!("{path}: a manifest without a config"));
    };
    let config = cat.blob(config.0, config.1.clone(), BlobKind::Config);
    let mut layers = Vec::new();
    for l in &m.layers {
        match blob_path(&l.digest) {
            Some(p) => layers.push(cat.blob(p, l.digest.clone(), BlobKind::Layer)),
            None => cat.errors.push(format!("{path}: a layer with a malformed digest")),
        }
    }
    let names = if names.is_empty() { vec![cat.blobs[config].digest.clone()] } else { names };
    cat.images.push(Image { names, config, layers });
}
