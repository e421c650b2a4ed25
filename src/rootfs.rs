//! A root filesystem tarball read as a tree of files, without unpacking it: one pass over
//! its headers indexes every member (its kind, where its data is, a link's target), and
//! directories no member names are made from the paths below them. A file is then read
//! at its offsets in the tar; a hard link reads its target's data. The index holds a few
//! dozen bytes and the name of each member, at most [`MAX_MEMBERS`] of them.

use crate::sys::image::{Stat, Tree};
use crate::sys::{Bytes, Kind, Window};
use crate::tarball;
use std::collections::HashMap;
use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;
use std::sync::Arc;

/// The most members indexed: more is an error (a tarball of a node's root has a few
/// hundred thousand).
pub const MAX_MEMBERS: usize = 4 << 20;

/// The longest path indexed (Linux's `PATH_MAX`).
const MAX_PATH: usize = 4096;

/// Links followed to a hard link's data, at most.
const MAX_HARD_LINKS: usize = 8;

/// One entry of the tree.
#[derive(Clone, Debug)]
struct Node {
    kind: Kind,
    /// A file's data (offset in the tar, size); a hard link's is resolved when read.
    data: (u64, u64),
    /// A symlink's target, or a hard link's (a member's path).
    link: Option<Vec<u8>>,
    hard: bool,
}

/// A dir's entry with where its member lies: (offset, name, kind).
type Placed = (u64, Vec<u8>, Kind);

/// A tar of a root filesystem, indexed: its bytes a file's, or a compressed file's inflated
/// bytes ([`crate::tarball::seekable`]).
pub struct TarTree {
    bytes: Arc<dyn Bytes + Send + Sync>,
    nodes: HashMap<Vec<u8>, Node>,
    /// Each directory's entries, by its path (`""` the root).
    dirs: HashMap<Vec<u8>, Vec<(Vec<u8>, Kind)>>,
}

impl TarTree {
    /// Indexes the tar `bytes` (read through `r`, its bytes from the start).
    pub fn index(bytes: Arc<dyn Bytes + Send + Sync>, r: impl io::Read) -> Result<TarTree, String> {
        let mut rd = tarball::Reader::new(r);
        let mut nodes: HashMap<Vec<u8>, Node> = HashMap::new();
        while let Some(m) = rd.next_member().map_err(|e| e.to_string())? {
            if nodes.len() >= MAX_MEMBERS {
                return Err(format!("more than {MAX_MEMBERS} members: not indexed"));
            }
            let path = tarball::clean_path(&m.path);
            // `..` never names a place in the tree, nor does a path longer than Linux's
            // `PATH_MAX`.
            if path.len() > MAX_PATH || path.split(|&b| b == b'/').any(|c| c == b"..") {
                continue;
            }
            let (kind, link, hard) = match m.kind {
                tarball::Kind::File => (Kind::File, None, false),
                tarball::Kind::Dir => (Kind::Dir, None, false),
                tarball::Kind::Symlink => (Kind::Symlink, Some(m.link.clone()), false),
                tarball::Kind::Hardlink => (Kind::File, Some(tarball::clean_path(&m.link)), true),
                tarball::Kind::Other => (Kind::Other, None, false),
            };
            if path.is_empty() {
                continue;
            }
            nodes.insert(path, Node { kind, data: (rd.position(), m.size), link, hard });
        }
        // Directories named only by the paths below them.
        // Each once: an ancestor met before has its own ancestors already.
        let mut implied: std::collections::HashSet<Vec<u8>> = std::collections::HashSet::new();
        for p in nodes.keys() {
            let mut at = p.len();
            while let Some(slash) = memchr::memrchr(b'/', &p[..at]) {
                if !implied.insert(p[..slash].to_vec()) {
                    break;
                }
                at = slash;
            }
        }
        for d in implied {
            let dir = Node { kind: Kind::Dir, data: (0, 0), link: None, hard: false };
            nodes.entry(d).or_insert(dir);
        }
        // Each dir's entries with where their members lie, to order them by.
        let mut dirs: HashMap<Vec<u8>, Vec<Placed>> = HashMap::new();
        dirs.insert(Vec::new(), Vec::new());
        for (p, n) in &nodes {
            let (parent, name) = match memchr::memrchr(b'/', p) {
                Some(at) => (&p[..at], &p[at + 1..]),
                None => (&p[..0], &p[..]),
            };
            // A file member under a path a file member also holds: not a directory.
            if nodes.get(parent).is_some_and(|d| d.kind != Kind::Dir) {
                continue;
            }
            dirs.entry(parent.to_vec()).or_default().push((n.data.0, name.to_vec(), n.kind));
        }
        for (p, n) in &nodes {
            if n.kind == Kind::Dir {
                dirs.entry(p.clone()).or_default();
            }
        }
        // Each dir's entries in the order of their members: a walk reads the tar front to
        // back (what a compressed one needs to be read fast).
        let dirs = dirs
            .into_iter()
            .map(|(p, mut entries)| {
                entries.sort_unstable();
                (p, entries.into_iter().map(|(_, name, kind)| (name, kind)).collect())
            })
            .collect();
        Ok(TarTree { bytes, nodes, dirs })
    }

    /// Whether it is a container image archive rather than a root filesystem: a
    /// `manifest.json` (`docker save`) or an `index.json` (an OCI layout) at its top.
    pub fn is_image_archive(&self) -> bool {
        ["manifest.json", "index.json"]
            .iter()
            .any(|n| self.nodes.get(n.as_bytes()).is_some_and(|n| n.kind == Kind::File && !n.hard))
    }

    /// Each regular file's data (offset, size) by its path, as an archive's members.
    pub fn files(&self) -> HashMap<Vec<u8>, (u64, u64)> {
        let files = self.nodes.iter().filter(|(_, n)| n.kind == Kind::File && !n.hard);
        files.map(|(p, n)| (p.clone(), n.data)).collect()
    }

    /// The member at `rel`; none through a member that is a symlink (a tar may hold `a`
    /// a symlink and `a/b` a file: on a disk `a/b` would be reached through the link).
    fn node(&self, rel: &Path) -> io::Result<&Node> {
        let p = rel.as_os_str().as_bytes();
        for (i, _) in p.iter().enumerate().filter(|&(_, &c)| c == b'/') {
            if self.nodes.get(&p[..i]).is_some_and(|n| n.kind != Kind::Dir) {
                return Err(crate::sys::image::through_symlink());
            }
        }
        self.nodes.get(p).ok_or_else(|| io::ErrorKind::NotFound.into())
    }
}

impl Tree for TarTree {
    fn lstat(&self, rel: &Path) -> io::Result<Stat> {
        if rel.as_os_str().is_empty() {
            return Ok(Stat { kind: Kind::Dir, size: 0 });
        }
        let n = self.node(rel)?;
        let size = match (&n.link, n.kind) {
            (Some(l), Kind::Symlink) => l.len() as u64,
            _ => self.data(rel).map_or(0, |d| d.1),
        };
        Ok(Stat { kind: n.kind, size })
    }

    fn list(&self, rel: &Path) -> io::Result<Vec<(OsString, Kind)>> {
        let d = self.dirs.get(rel.as_os_str().as_bytes());
        let d = d.ok_or_else(|| io::Error::from_raw_os_error(nix::libc::ENOTDIR))?;
        Ok(d.iter().map(|(n, k)| (OsString::from_vec(n.clone()), *k)).collect())
    }

    fn position(&self, rel: &Path) -> Option<u64> {
        self.node(rel).ok().map(|n| n.data.0)
    }

    /// Where its data lies (a hard link's: its target's), one past it.
    fn ino(&self, rel: &Path) -> Option<u64> {
        let (at, _) = self.data(rel).ok()?;
        Some(at + 1)
    }

    fn read_link(&self, rel: &Path) -> io::Result<OsString> {
        let n = self.node(rel)?;
        match (&n.link, n.kind) {
            (Some(l), Kind::Symlink) => Ok(OsString::from_vec(l.clone())),
            _ => Err(io::Error::from_raw_os_error(nix::libc::EINVAL)),
        }
    }

    fn open(&self, rel: &Path) -> io::Result<Box<dyn Bytes>> {
        let (at, size) = self.data(rel)?;
        Ok(Box::new(Window { of: self.bytes.clone(), range: at..at.saturating_add(size) }))
    }
}

impl TarTree {
    /// A regular file's data, a hard link's followed to its target's.
    fn data(&self, rel: &Path) -> io::Result<(u64, u64)> {
        let mut n = self.node(rel)?;
        for _ in 0..MAX_HARD_LINKS {
            if n.kind != Kind::File {
                return Err(io::Error::other("not a regular file"));
            }
            match (&n.link, n.hard) {
                (Some(target), true) => {
                    n = self
                        .nodes
                        .get(target)
                        .ok_or_else(|| io::Error::other("a hard link to no member"))?
                }
                _ => return Ok(n.data),
            }
        }
        Err(io::Error::other("hard links to hard links, too many"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// A tree packed by GNU tar (long names, a symlink, a hard link, a member with no
    /// directory member above it) reads back as it was.
    #[test]
    fn a_tarball_reads_back() {
        let dir = tempfile::tempdir().expect("tmp");
        let src = dir.path().join("src");
        let long = format!("var/lib/{}/{}", "d".repeat(120), "f".repeat(130));
        for (p, data) in [("etc/hostname", b"node-1\n".as_slice()), (long.as_str(), b"long")] {
            let path = src.join(p);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(&path, data).expect("write");
        }
        std::os::unix::fs::symlink("/etc/hostname", src.join("link")).expect("symlink");
        std::fs::hard_link(src.join("etc/hostname"), src.join("etc/hard")).expect("link");
        let tar = dir.path().join("root.tar");
        let mut cmd = Command::new("tar");
        let ok = cmd.arg("-C").arg(&src).arg("-cf").arg(&tar).args(["etc", "var", "link"]);
        assert!(ok.status().expect("tar").success());
        let bytes = std::fs::read(&tar).expect("read");
        let t = TarTree::index(Arc::new(bytes.clone()), bytes.as_slice()).expect("index");
        let read = |p: &str| {
            let f = t.open(Path::new(p)).expect("open");
            let mut b = vec![0u8; f.size() as usize];
            f.read_at(0, &mut b).expect("read");
            b
        };
        assert_eq!(read("etc/hostname"), b"node-1\n");
        assert_eq!(read("etc/hard"), b"node-1\n");
        assert_eq!(read(&long), b"long");
        assert_eq!(t.read_link(Path::new("link")).expect("link"), "/etc/hostname");
        let mut root: Vec<_> = t
            .list(Path::new(""))
            .expect("root")
            .into_iter()
            .map(|(n, k)| (n.into_string().expect("utf8"), k))
            .collect();
        root.sort();
        assert_eq!(
            root,
            [
                ("etc".to_owned(), Kind::Dir),
                ("link".to_owned(), Kind::Symlink),
                ("var".to_owned(), Kind::Dir)
            ]
        );
        assert!(t.open(Path::new("link")).is_err());
        // A hard link is one file: one number.
        assert_eq!(t.ino(Path::new("etc/hard")), t.ino(Path::new("etc/hostname")));
        assert_ne!(t.ino(Path::new("etc/hard")), t.ino(Path::new(&long)));
        crate::sys::image::read_all(&t, Path::new(""), &mut 100);
        // A member beneath a symlink member (`link/x`, appended by hand): never reached
        // through the link.
        let mut cmd = Command::new("tar");
        let ok = cmd.arg("-C").arg(&src).arg("-rf").arg(&tar);
        let ok = ok.args(["--transform", "s,^etc/hostname$,link/x,", "etc/hostname"]);
        assert!(ok.status().expect("tar").success());
        let appended = std::fs::read(&tar).expect("read");
        let t2 = TarTree::index(Arc::new(appended.clone()), appended.as_slice()).expect("index");
        assert!(t2.lstat(Path::new("link")).is_ok());
        assert!(t2.open(Path::new("link/x")).is_err());
        assert!(t2.lstat(Path::new("link/x")).is_err());
        // Damaged at random: indexed or refused, never a panic.
        let mut rng = crate::prng::Prng::new(3);
        for _ in 0..300 {
            let mut b = bytes.clone();
            for _ in 0..rng.range(1, 8) {
                let i = rng.below(b.len());
                b[i] = rng.next_u64() as u8;
            }
            if let Ok(t) = TarTree::index(Arc::new(b.clone()), b.as_slice()) {
                crate::sys::image::read_all(&t, Path::new(""), &mut 100);
            }
        }
    }
}
