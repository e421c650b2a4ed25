//! Package-shipped content: a rule's finding in a file the node's package manager
//! installed, whose bytes still have the checksum the package recorded, is what the
//! package ships (an example key in its docs, a test key, a public OAuth client id), not
//! residue: category `shipped`, severity `info`, naming the package. So is a Python
//! `.pyc` compiled from such a file (its header's source size and time are the file's).
//! A modified file is reported as usual, and a fingerprint's finding never changes: a
//! known Secret value is residue wherever it is.
//!
//! dpkg's `.md5sums` are read (beneath the root, as every node file is) only when there is
//! a rule's finding, and only the lines of the findings' paths are kept; only those
//! files are hashed. rpm's database is not read: no maintained crate reads its SQLite
//! header blobs (docs/NODE-LAYOUT.md).

use crate::finding::{Category, Finding, MatchKind, Within};
use crate::node::dpkg;
use crate::sys::{Kind, RootDir};
use md5::{Digest, Md5};
use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::path::Path;

/// Where dpkg keeps what each package installed.
pub const DPKG_INFO: &str = "/var/lib/dpkg/info";

/// The largest `.md5sums` file read (the largest package's, Debian's, is a few MiB).
const MAX_MD5SUMS: u64 = 64 << 20;

/// The largest file hashed to compare (a larger one is reported as usual).
const MAX_HASHED: u64 = 1 << 30;

/// What a file its package installed and nobody changed is.
pub const SHIPPED_NOTE: &str = "a file its package installed, unchanged since (dpkg's \
    md5sums): what the package ships (an example or test key, a public client id), not residue";

/// What a `.pyc` compiled from such a file is.
pub const COMPILED_NOTE: &str = "Python's compiled copy of a file its package installed, \
    unchanged since (dpkg's md5sums; the .pyc's source size and time): what the package \
    ships, not residue";

/// Marks the rule findings in files their package shipped unchanged (see the module
/// docs).
pub fn mark(root: &RootDir, findings: &mut [Finding]) {
    let candidate = |f: &Finding| f.matched.kind == MatchKind::Rule && f.within == Within::Content;
    let paths: HashSet<&str> =
        findings.iter().filter(|f| candidate(f)).map(|f| f.path.as_str()).collect();
    if paths.is_empty() {
        return;
    }
    let sources: Vec<String> = paths.iter().filter_map(|p| pyc_source(p)).collect();
    let wanted: HashSet<&str> =
        paths.iter().copied().chain(sources.iter().map(String::as_str)).collect();
    let index = dpkg_index(root, &wanted);
    if index.is_empty() {
        return;
    }
    let mut packages = Packages { root, index, unchanged: HashMap::new() };
    let mut verdicts: HashMap<String, Option<(&'static str, String)>> = HashMap::new();
    for f in findings.iter_mut().filter(|f| candidate(f)) {
        let verdict = verdicts.entry(f.path.clone()).or_insert_with(|| packages.verdict(&f.path));
        if let Some((note, package)) = verdict {
            f.category = Category::Shipped;
            f.note = Some(note);
            f.package = Some(package.clone());
        }
    }
}

/// What dpkg says of the findings' files, and which of them are as it says (each file
/// hashed once, a `.py` and its `.pyc`'s findings alike).
struct Packages<'a> {
    root: &'a RootDir,
    /// The node path, MD5 and package of each file wanted.
    index: HashMap<String, ([u8; 16], String)>,
    /// The package of each file hashed: `None` when changed since, or unreadable.
    unchanged: HashMap<String, Option<String>>,
}

impl Packages<'_> {
    /// The package that installed the file at the node path `path`, when it is unchanged.
    fn unchanged(&mut self, path: &str) -> Option<String> {
        let (md5, package) = self.index.get(path)?;
        let root = self.root;
        let same = || (file_md5(root, path)? == *md5).then(|| package.clone());
        self.unchanged.entry(path.to_owned()).or_insert_with(same).clone()
    }

    /// The note and package of the file at the node path `path` when its package shipped
    /// it unchanged, or shipped the source it was compiled from.
    fn verdict(&mut self, path: &str) -> Option<(&'static str, String)> {
        if let Some(package) = self.unchanged(path) {
            return Some((SHIPPED_NOTE, package));
        }
        let source = pyc_source(path)?;
        let package = self.unchanged(&source)?;
        compiled_from(self.root, path, &source).map(|()| (COMPILED_NOTE, package))
    }
}

/// The `.py` file a `__pycache__/<module>.<tag>.pyc` is compiled from (PEP 3147).
fn pyc_source(path: &str) -> Option<String> {
    let (dir, name) = path.rsplit_once('/')?;
    let parent = dir.strip_suffix("/__pycache__")?;
    let module = name.strip_suffix(".pyc")?.split('.').next()?;
    (!module.is_empty()).then(|| format!("{parent}/{module}.py"))
}

/// Whether the `.pyc` at `pyc` was compiled from `source` as it is: its header (PEP 552)
/// is timestamp-based and names the source's size and modification time.
fn compiled_from(root: &RootDir, pyc: &str, source: &str) -> Option<()> {
    let (mut f, _) = open(root, pyc)?;
    let mut header = [0u8; 16];
    f.read_exact(&mut header).ok()?;
    let word = |at: usize| {
        u32::from_le_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]])
    };
    let (src, _) = open(root, source)?;
    let meta = src.meta().ok()?;
    (word(4) == 0 && word(8) == meta.mtime.0 as u32 && word(12) == meta.len as u32).then_some(())
}

/// Every line of dpkg's `.md5sums` files (beneath the root) whose path is `wanted`: the
/// node path, its MD5 and its package.
fn dpkg_index(root: &RootDir, wanted: &HashSet<&str>) -> HashMap<String, ([u8; 16], String)> {
    let mut index = HashMap::new();
    let Ok(dir) = root.resolve(Path::new(DPKG_INFO)) else { return index };
    for (name, kind) in root.list(&dir).unwrap_or_default() {
        let Some(package) = name.to_str().and_then(dpkg::package_of) else { continue };
        if kind != Kind::File {
            continue;
        }
        let Ok(text) = root.read_file(&dir.join(&name), MAX_MD5SUMS) else { continue };
        for (md5, path) in dpkg::md5sums(&text) {
            let Ok(path) = std::str::from_utf8(path) else { continue };
            let node = format!("/{path}");
            if wanted.contains(node.as_str()) {
                index.insert(node, (md5, package.to_owned()));
            }
        }
    }
    index
}

/// The regular file at the node path `path`, opened beneath the root.
fn open(root: &RootDir, path: &str) -> Option<(crate::sys::image::NodeFile, u64)> {
    let rel = root.resolve(Path::new(path)).ok()?;
    root.open_regular(&rel, MAX_HASHED).ok()
}

/// The MD5 of the file at the node path `path`.
fn file_md5(root: &RootDir, path: &str) -> Option<[u8; 16]> {
    let (mut f, _) = open(root, path)?;
    let mut md5 = Md5::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => md5.update(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    Some(md5.finalize().into())
}

#[cfg(test)]
mod tests {
    use super::pyc_source;

    #[test]
    fn the_source_of_a_pyc() {
        let src = |p: &str| pyc_source(p);
        assert_eq!(
            src("/usr/lib/python3/dist-packages/oauthlib/__pycache__/common.cpython-311.pyc"),
            Some("/usr/lib/python3/dist-packages/oauthlib/common.py".to_owned())
        );
        assert_eq!(src("/a/__pycache__/m.cpython-312.opt-1.pyc"), Some("/a/m.py".to_owned()));
        assert_eq!(src("/a/m.cpython-312.pyc"), None);
        assert_eq!(src("/a/__pycache__/m.py"), None);
    }
}
