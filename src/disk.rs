//! A node's disk image read without mounting it: raw or qcow2 ([`crate::qcow2`]), a whole
//! disk with a GPT or MBR ([`crate::partitions`]) or one bare filesystem, each
//! partition's filesystem found by its magic: ext2/3/4 is served as a [`Tree`] through
//! the `ext4-view` crate (read-only, no unsafe code), XFS through [`crate::xfs`]; LVM,
//! LUKS, btrfs, squashfs, swap and others are named and refused.
//!
//! The readers keep caches (qcow2's L2 table, ext4's blocks, XFS's resolved dirs) behind
//! `RefCell`s, so each thread that reads a tree opens the whole stack for itself (the
//! image file is shared; the stack is built once per thread and tree, from the
//! superblock, and forgotten when the tree is dropped).

use crate::partitions::{self, Partition};
use crate::qcow2::{self, Qcow2};
use crate::sys::image::{through_symlink, Stat, Tree};
use crate::sys::{Bytes, Kind, Window};
use crate::xfs::Xfs;
use std::any::Any;
use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Block groups of an ext4 filesystem, at most (a 128 TiB filesystem of 4 KiB blocks has a
/// million).
const MAX_GROUPS: u64 = 1 << 20;

/// Partitions of a disk read, at most (GPT allows thousands; a node's disk has a few).
const MAX_VOLUMES: usize = 128;

/// What a disk image's bytes are read from: the image file, shared by every thread.
type Shared = Arc<dyn Bytes + Send + Sync>;

/// A disk image: its file, and whether it is qcow2.
#[derive(Clone)]
pub struct Disk {
    file: Shared,
    qcow2: bool,
}

impl Disk {
    /// The disk in `file`: qcow2 when it starts as one, else raw.
    pub fn new(file: Shared) -> Result<Disk, String> {
        let qcow2 = qcow2::is_qcow2(&file);
        if qcow2 {
            Qcow2::open(file.clone()).map_err(|e| e.to_string())?;
        }
        Ok(Disk { file, qcow2 })
    }

    /// The virtual disk's bytes, for this thread.
    fn bytes(&self) -> Box<dyn Bytes> {
        match self.qcow2 {
            // Opened once already: the header does not change.
            true => match Qcow2::open(self.file.clone()) {
                Ok(q) => Box::new(q),
                Err(_) => Box::new(Vec::new()),
            },
            false => Box::new(self.file.clone()),
        }
    }
}

/// A filesystem found on a disk image.
pub struct Volume {
    /// Its partition (the whole disk for a bare filesystem).
    pub partition: Partition,
    /// The filesystem, or why it is not read (naming what was found).
    pub tree: Result<Arc<dyn Tree>, String>,
}

/// The filesystems of `disk`, one per partition; and the problems of its partition table.
pub fn volumes(disk: &Disk) -> (Vec<Volume>, Vec<String>) {
    let bytes = disk.bytes();
    let (parts, errors) = partitions::read(&*bytes);
    let mut errors: Vec<String> = errors.into_iter().map(|e| e.to_string()).collect();
    if parts.len() > MAX_VOLUMES {
        errors.push(format!("{} partitions: the first {MAX_VOLUMES} read", parts.len()));
    }
    let mut out = Vec::new();
    for p in parts.into_iter().take(MAX_VOLUMES) {
        let window = Part { of: disk.bytes(), range: p.start..p.start + p.len };
        let tree = match identify(&window) {
            Found::Ext4 => Ext4Tree::new(disk.clone(), &p).map(|t| Arc::new(t) as Arc<dyn Tree>),
            Found::Xfs => XfsTree::new(disk.clone(), &p).map(|t| Arc::new(t) as Arc<dyn Tree>),
            Found::Other(name) => Err(format!("{name}: not read")),
        };
        out.push(Volume { partition: p, tree });
    }
    (out, errors)
}

/// What a partition's first bytes say it holds.
enum Found {
    Ext4,
    Xfs,
    Other(String),
}

/// Names the filesystem (or volume format) `b` starts with, by its magic.
fn identify(b: &dyn Bytes) -> Found {
    let at = |off: u64, len: usize| {
        let mut v = vec![0u8; len];
        b.read_at(off, &mut v).ok().map(|_| v)
    };
    let is = |off: u64, magic: &[u8]| at(off, magic.len()).is_some_and(|v| v == magic);
    if is(1080, &[0x53, 0xef]) {
        return Found::Ext4;
    }
    if crate::xfs::is_xfs(b) {
        return Found::Xfs;
    }
    let named = [
        (512, b"LABELONE".as_slice(), "an LVM physical volume"),
        (0, b"LUKS\xba\xbe", "a LUKS encrypted volume"),
        (0x10040, b"_BHRfS_M", "a btrfs filesystem"),
        (0, b"hsqs", "a squashfs filesystem"),
        (4086, b"SWAPSPACE2", "swap space"),
        (0x8001, b"CD001", "an ISO 9660 filesystem"),
        (3, b"EXFAT   ", "an exFAT filesystem"),
        (3, b"NTFS    ", "an NTFS filesystem"),
        (82, b"FAT32   ", "a FAT32 filesystem (an EFI system partition?)"),
        (54, b"FAT16   ", "a FAT16 filesystem"),
        (54, b"FAT12   ", "a FAT12 filesystem"),
        (0, b"\x20\x00\x00\x00\x20\x00\x00\x00EROFS", "an EROFS filesystem"),
    ];
    for (off, magic, name) in named {
        if is(off, magic) {
            return Found::Other(name.to_owned());
        }
    }
    if is(1024, &[0xe2, 0xe1, 0xf5, 0xe0]) {
        return Found::Other("an EROFS filesystem".to_owned());
    }
    Found::Other("no filesystem kresidue knows".to_owned())
}

/// A partition's bytes, of the disk's as this thread reads them.
type Part = Window<Box<dyn Bytes>>;

/// What ext4-view reads through: the partition's bytes.
struct Reader(Part);

impl ext4_view::Ext4Read for Reader {
    fn read(
        &mut self,
        start: u64,
        dst: &mut [u8],
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync + 'static>> {
        self.0.read_at(start, dst).map_err(|e| Box::new(e) as _)
    }
}

thread_local! {
    // The filesystems this thread has loaded, by tree.
    static LOADED: RefCell<HashMap<u64, Rc<dyn Any>>> = RefCell::new(HashMap::new());
}

/// Each tree's number, for [`LOADED`].
static NEXT: AtomicU64 = AtomicU64::new(0);

/// The numbers of the trees that live: a thread forgets the others' filesystems when it
/// loads one.
static LIVE: Mutex<BTreeSet<u64>> = Mutex::new(BTreeSet::new());

/// A tree's number, while the tree lives.
struct TreeId(u64);

impl TreeId {
    fn new() -> TreeId {
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        LIVE.lock().unwrap_or_else(|e| e.into_inner()).insert(id);
        TreeId(id)
    }
}

impl Drop for TreeId {
    fn drop(&mut self) {
        LIVE.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.0);
        let _ = LOADED.try_with(|l| l.borrow_mut().remove(&self.0));
    }
}

/// Where a filesystem lies on a disk image, and its number among the trees read.
struct OnDisk {
    id: TreeId,
    disk: Disk,
    start: u64,
    len: u64,
}

impl OnDisk {
    fn new(disk: Disk, p: &Partition) -> OnDisk {
        OnDisk { id: TreeId::new(), disk, start: p.start, len: p.len }
    }

    /// The partition's bytes, for this thread.
    fn part(&self) -> Part {
        Part { of: self.disk.bytes(), range: self.start..self.start + self.len }
    }

    /// `f` with this thread's `T` of this filesystem, made by `load` the first time.
    fn with<T: 'static, R>(
        &self,
        load: impl FnOnce(Part) -> Result<T, String>,
        f: impl FnOnce(&Rc<T>) -> io::Result<R>,
    ) -> io::Result<R> {
        let id = self.id.0;
        let got = LOADED.with(|l| l.borrow().get(&id).cloned());
        let fs = match got.map(|a| a.downcast::<T>()) {
            Some(Ok(fs)) => fs,
            _ => {
                let fs = Rc::new(load(self.part()).map_err(io::Error::other)?);
                let live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
                LOADED.with(|l| {
                    let mut l = l.borrow_mut();
                    l.retain(|id, _| live.contains(id));
                    l.insert(id, fs.clone() as Rc<dyn Any>);
                });
                fs
            }
        };
        f(&fs)
    }
}

/// An ext2/3/4 filesystem of a disk image.
pub struct Ext4Tree(OnDisk);

impl Ext4Tree {
    /// The filesystem of partition `p`, checked by loading it once here.
    fn new(disk: Disk, p: &Partition) -> Result<Ext4Tree, String> {
        let at = OnDisk::new(disk, p);
        Ext4Tree::load(at.part()).map_err(|e| format!("ext4: {e}"))?;
        Ok(Ext4Tree(at))
    }

    fn load(part: Part) -> Result<ext4_view::Ext4, String> {
        let len = part.size();
        // The superblock's size of the filesystem must fit the partition.
        let mut sb = [0u8; 1024];
        part.read_at(1024, &mut sb).map_err(|e| e.to_string())?;
        let blocks = u64::from(crate::sys::le32(&sb, 4).unwrap_or(0))
            | u64::from(crate::sys::le32(&sb, 0x150).unwrap_or(0)) << 32;
        let block = 1024u64.checked_shl(crate::sys::le32(&sb, 24).unwrap_or(64)).unwrap_or(0);
        // Group descriptors are read (and held) for every group at load: a crafted
        // superblock of tiny groups would make billions.
        let per_group = u64::from(crate::sys::le32(&sb, 32).unwrap_or(0));
        let groups = blocks.div_ceil(per_group.max(1));
        if per_group == 0 || per_group > 8 * block || groups > MAX_GROUPS {
            return Err(format!("{groups} block groups of {per_group} blocks: not read"));
        }
        if block == 0 || blocks.saturating_mul(block) > len.saturating_add(block) {
            return Err(format!(
                "the superblock says {blocks} blocks of {block} bytes, more than its partition's {len} bytes"
            ));
        }
        ext4_view::Ext4::load(Box::new(Reader(part))).map_err(|e| e.to_string())
    }

    /// `f` with this thread's loaded filesystem.
    fn with<T>(&self, f: impl FnOnce(&Ext4Loaded) -> io::Result<T>) -> io::Result<T> {
        let load = |part| Ok(Ext4Loaded { fs: Ext4Tree::load(part)?, checked: RefCell::default() });
        self.0.with(load, |l| f(l))
    }
}

/// An ext4 filesystem as a thread loaded it, and the dirs it found to be no symlinks (a
/// walk asks of the same parent for each of its files).
struct Ext4Loaded {
    fs: ext4_view::Ext4,
    checked: RefCell<std::collections::HashSet<Vec<u8>>>,
}

/// An XFS filesystem of a disk image ([`crate::xfs`]).
pub struct XfsTree(OnDisk);

impl XfsTree {
    /// The filesystem of partition `p`, checked by loading it once here.
    fn new(disk: Disk, p: &Partition) -> Result<XfsTree, String> {
        let at = OnDisk::new(disk, p);
        Xfs::load(at.part())?;
        Ok(XfsTree(at))
    }

    /// `f` with this thread's loaded filesystem.
    fn with<T>(&self, f: impl FnOnce(&Rc<Xfs<Part>>) -> io::Result<T>) -> io::Result<T> {
        self.0.with(Xfs::load, f)
    }
}

impl Tree for XfsTree {
    fn lstat(&self, rel: &Path) -> io::Result<Stat> {
        self.with(|fs| fs.lstat(rel))
    }

    fn list(&self, rel: &Path) -> io::Result<Vec<(OsString, Kind)>> {
        self.with(|fs| fs.list(rel))
    }

    fn read_link(&self, rel: &Path) -> io::Result<OsString> {
        self.with(|fs| fs.read_link(rel))
    }

    fn open(&self, rel: &Path) -> io::Result<Box<dyn Bytes>> {
        self.with(|fs| Ok(Box::new(fs.open(rel)?) as Box<dyn Bytes>))
    }

    fn ino(&self, rel: &Path) -> Option<u64> {
        self.with(|fs| fs.ino(rel)).ok()
    }
}

/// `p` as ext4-view's path.
fn ext_path(p: &[u8]) -> io::Result<ext4_view::Path<'_>> {
    ext4_view::Path::try_from(p).map_err(|e| io::Error::other(format!("ext4: {e}")))
}

/// The absolute ext4 path of `rel`.
fn abs(rel: &Path) -> Vec<u8> {
    [b"/".as_slice(), rel.as_os_str().as_bytes()].concat()
}

fn io_err(e: ext4_view::Ext4Error) -> io::Error {
    match e {
        ext4_view::Ext4Error::NotFound => io::ErrorKind::NotFound.into(),
        ext4_view::Ext4Error::NotADirectory => io::Error::from_raw_os_error(nix::libc::ENOTDIR),
        e => io::Error::other(format!("ext4: {e}")),
    }
}

fn kind_of(t: ext4_view::FileType) -> Kind {
    use ext4_view::FileType as T;
    match t {
        T::Directory => Kind::Dir,
        T::Regular => Kind::File,
        T::Symlink => Kind::Symlink,
        T::BlockDevice | T::CharacterDevice | T::Fifo | T::Socket => Kind::Other,
    }
}

impl Ext4Tree {
    /// `rel`'s metadata, its parent dirs checked to be no symlinks (ext4-view resolves
    /// them).
    fn meta(&self, l: &Ext4Loaded, rel: &Path) -> io::Result<ext4_view::Metadata> {
        let p = abs(rel);
        let path = ext_path(&p)?;
        let parent = rel.parent().filter(|p| !p.as_os_str().is_empty());
        if let Some(parent) = parent {
            let pp = abs(parent);
            if !l.checked.borrow().contains(&pp) {
                let canon = l.fs.canonicalize(ext_path(&pp)?).map_err(io_err)?;
                if canon.as_ref() != pp.as_slice() {
                    return Err(through_symlink());
                }
                let mut checked = l.checked.borrow_mut();
                if checked.len() >= 1 << 16 {
                    checked.clear();
                }
                checked.insert(pp);
            }
        }
        l.fs.symlink_metadata(path).map_err(io_err)
    }
}

impl Tree for Ext4Tree {
    fn lstat(&self, rel: &Path) -> io::Result<Stat> {
        self.with(|l| {
            let m = self.meta(l, rel)?;
            Ok(Stat { kind: kind_of(m.file_type()), size: m.len() })
        })
    }

    fn list(&self, rel: &Path) -> io::Result<Vec<(OsString, Kind)>> {
        self.with(|l| {
            let fs = &l.fs;
            let m = self.meta(l, rel)?;
            if !m.is_dir() {
                return Err(io::Error::from_raw_os_error(nix::libc::ENOTDIR));
            }
            let p = abs(rel);
            let mut out = Vec::new();
            for e in fs.read_dir(ext_path(&p)?).map_err(io_err)? {
                let e = e.map_err(io_err)?;
                let name = e.file_name();
                let name = name.as_ref();
                if name == b"." || name == b".." {
                    continue;
                }
                let kind = kind_of(e.file_type().map_err(io_err)?);
                out.push((OsString::from_vec(name.to_vec()), kind));
            }
            Ok(out)
        })
    }

    fn read_link(&self, rel: &Path) -> io::Result<OsString> {
        self.with(|l| {
            let fs = &l.fs;
            self.meta(l, rel)?;
            let p = abs(rel);
            let target = fs.read_link(ext_path(&p)?).map_err(io_err)?;
            Ok(OsString::from_vec(target.as_ref().to_vec()))
        })
    }

    fn open(&self, rel: &Path) -> io::Result<Box<dyn Bytes>> {
        self.with(|l| {
            let fs = &l.fs;
            let m = self.meta(l, rel)?;
            if !m.is_symlink() && m.file_type() != ext4_view::FileType::Regular {
                return Err(io::Error::other("not a regular file"));
            }
            if m.is_symlink() {
                return Err(through_symlink());
            }
            let p = abs(rel);
            let f = fs.open(ext_path(&p)?).map_err(io_err)?;
            Ok(Box::new(Ext4File { size: m.len(), f: RefCell::new(f) }) as Box<dyn Bytes>)
        })
    }
}

/// A regular file of an ext4 tree.
struct Ext4File {
    size: u64,
    f: RefCell<ext4_view::File>,
}

impl Bytes for Ext4File {
    fn size(&self) -> u64 {
        self.size
    }

    fn read_at(&self, at: u64, mut buf: &mut [u8]) -> io::Result<()> {
        let mut f = self.f.borrow_mut();
        // A seek walks the file's blocks from its start again: reads that follow each
        // other (a file streamed chunk by chunk) do not seek.
        if f.position() != at {
            f.seek_to(at).map_err(io_err)?;
        }
        while !buf.is_empty() {
            let n = f.read_bytes(buf).map_err(io_err)?;
            if n == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            buf = &mut buf[n..];
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn run(cmd: &mut Command) {
        let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
        assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// A tree of files, an ext4 image made of it with `mkfs.ext4 -d`, put in the second
    /// partition of a GPT disk (sfdisk), raw and as qcow2 (qemu-img): both read back the
    /// same names, kinds, sizes, bytes and link targets; the first partition (an empty
    /// EFI system partition) is said to hold no filesystem kresidue knows.
    #[test]
    fn ext4_in_a_gpt_disk_reads_back() {
        let dir = tempfile::tempdir().expect("tmp");
        let src = dir.path().join("src");
        let mut rng = crate::prng::Prng::new(4);
        let mut files = Vec::new();
        for (i, p) in [
            "etc/hostname",
            "var/lib/kubelet/pods/u1/volumes/kubernetes.io~secret/s/token",
            "big",
            "empty",
        ]
        .iter()
        .enumerate()
        {
            let path = src.join(p);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            let data = match i {
                2 => rng.bytes(3 << 20),
                3 => Vec::new(),
                _ => rng.bytes(100 + i * 7000),
            };
            std::fs::write(&path, &data).expect("write");
            files.push((p.to_string(), data));
        }
        std::os::unix::fs::symlink("/etc/hostname", src.join("link")).expect("symlink");
        std::os::unix::fs::symlink("var/lib", src.join("lib")).expect("symlink");
        let fs = dir.path().join("fs.img");
        run(Command::new("mkfs.ext4").args(["-q", "-F", "-d"]).arg(&src).arg(&fs).arg("16M"));
        let disk = dir.path().join("disk.img");
        run(Command::new("truncate").args(["-s", "24M"]).arg(&disk));
        let table = "label: gpt\nstart=2048, size=4096, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B\nstart=6144, size=32768, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4\n";
        let mut sf = Command::new("sfdisk");
        sf.arg("-q").arg(&disk).stdin(std::process::Stdio::piped());
        let mut child = sf.spawn().expect("sfdisk");
        std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), table.as_bytes())
            .expect("table");
        assert!(child.wait().expect("sfdisk").success());
        run(Command::new("dd")
            .arg(format!("if={}", fs.display()))
            .arg(format!("of={}", disk.display()))
            .args(["bs=512", "seek=6144", "conv=notrunc", "status=none"]));
        let qcow = dir.path().join("disk.qcow2");
        run(Command::new("qemu-img").args(["convert", "-O", "qcow2", "-c"]).arg(&disk).arg(&qcow));
        for image in [&disk, &qcow] {
            let file: Shared = Arc::new(std::fs::File::open(image).expect("open"));
            let (vols, errors) = volumes(&Disk::new(file).expect("disk"));
            assert!(errors.is_empty(), "{errors:?}");
            assert_eq!(vols.len(), 2);
            let none = vols[0].tree.as_ref().err().expect("nothing there");
            assert!(none.contains("no filesystem"), "{none}");
            let t = vols[1].tree.as_ref().expect("ext4");
            assert_eq!(vols[1].partition.number, 2);
            for (p, data) in &files {
                let st = t.lstat(Path::new(p)).expect("stat");
                assert_eq!((st.kind, st.size), (Kind::File, data.len() as u64), "{p}");
                let f = t.open(Path::new(p)).expect("open");
                let mut back = vec![0u8; data.len()];
                f.read_at(0, &mut back).expect("read");
                assert!(back == *data, "{p}");
            }
            let mut names: Vec<_> = t
                .list(Path::new(""))
                .expect("root")
                .into_iter()
                .map(|(n, k)| (n.into_string().expect("utf8"), k))
                .collect();
            names.sort();
            assert!(names.contains(&("lost+found".to_owned(), Kind::Dir)));
            assert!(names.contains(&("link".to_owned(), Kind::Symlink)));
            assert_eq!(t.read_link(Path::new("link")).expect("link"), "/etc/hostname");
            // Never through a symlink: `lib` → `var/lib`.
            assert!(t.lstat(Path::new("lib/kubelet")).is_err());
            assert!(t.open(Path::new("link")).is_err());
            // From another thread, which loads it for itself.
            let t2 = t.clone();
            let n = std::thread::spawn(move || t2.list(Path::new("var/lib")).expect("list").len());
            assert_eq!(n.join().expect("thread"), 1);
        }
    }

    /// An ext4 image damaged at random in its metadata (superblock, group descriptors,
    /// bitmaps, inode table, directories), 400 times: opened or refused, walked, never a
    /// panic.
    #[test]
    fn damaged_ext4_never_panics() {
        let dir = tempfile::tempdir().expect("tmp");
        let src = dir.path().join("src");
        for i in 0..40 {
            let p = src.join(format!("d{}/f{i}", i % 5));
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(&p, vec![b'x'; 100 * i]).expect("write");
        }
        let fs = dir.path().join("fs.img");
        run(Command::new("mkfs.ext4").args(["-q", "-F", "-d"]).arg(&src).arg(&fs).arg("4M"));
        let clean = std::fs::read(&fs).expect("read");
        let mut rng = crate::prng::Prng::new(11);
        for _ in 0..400 {
            let mut img = clean.clone();
            for _ in 0..rng.range(1, 24) {
                let at = rng.below(256 << 10);
                img[at] = rng.next_u64() as u8;
            }
            read_disk(Arc::new(img));
        }
    }

    /// Every filesystem of the disk image `img` walked, at most 2,000 entries each, as the
    /// `disk_image` fuzz target does.
    fn read_disk(img: Arc<Vec<u8>>) {
        let (vols, _) = volumes(&Disk::new(img).expect("disk"));
        for v in vols {
            if let Ok(t) = v.tree {
                crate::sys::image::read_all(&*t, Path::new(""), &mut 2000);
            }
        }
    }

    /// An XFS image damaged at random in its metadata (superblock, inodes, directory,
    /// B+tree and symlink blocks: the blocks that start with their magic), 400 times:
    /// opened or refused, walked, never a panic.
    #[test]
    fn damaged_xfs_never_panics() {
        let dir = tempfile::tempdir().expect("tmp");
        let src = dir.path().join("src");
        for i in 0..600 {
            let p = src.join(format!("d{}/a-longer-name-{i}", i % 3));
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(&p, vec![b'x'; 10 * i]).expect("write");
        }
        std::os::unix::fs::symlink("t/".repeat(200), src.join("long")).expect("symlink");
        let fs = dir.path().join("fs.img");
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/xfs-image.sh");
        run(Command::new("bash").arg(script).arg(&src).arg(&fs).arg("20M"));
        let mut img = std::fs::read(&fs).expect("read");
        let magics: [&[u8]; 9] =
            [b"XFSB", b"IN", b"XDB3", b"XDD3", b"BMA3", b"XSLM", b"XDF3", b"\x3d\xf1", b"\x3d\xff"];
        let units: Vec<usize> = (0..img.len())
            .step_by(256)
            .filter(|&at| magics.iter().any(|m| img[at..].starts_with(m)))
            .collect();
        assert!(units.len() > 600, "{}", units.len());
        let mut rng = crate::prng::Prng::new(12);
        for _ in 0..400 {
            let mut undo = Vec::new();
            for _ in 0..rng.range(1, 8) {
                let at = units[rng.below(units.len())] + rng.below(256);
                undo.push((at, img[at]));
                img[at] = rng.next_u64() as u8;
            }
            let disk = Arc::new(img);
            read_disk(disk.clone());
            img = Arc::try_unwrap(disk).expect("one owner");
            for (at, b) in undo.into_iter().rev() {
                img[at] = b;
            }
        }
    }

    /// A disk holding no filesystem kresidue reads names what it found.
    #[test]
    fn other_volumes_are_named() {
        for (at, magic, name) in [
            (0x10040usize, b"_BHRfS_M".as_slice(), "btrfs"),
            (512, b"LABELONE", "LVM"),
            (0, b"LUKS\xba\xbe", "LUKS"),
            (82, b"FAT32   ", "FAT32"),
        ] {
            let mut img = vec![0u8; 1 << 20];
            img[at..at + magic.len()].copy_from_slice(magic);
            let (vols, _) = volumes(&Disk::new(Arc::new(img)).expect("disk"));
            let e = vols[0].tree.as_ref().err().expect("refused");
            assert!(e.contains(name), "{e}");
        }
    }
}
