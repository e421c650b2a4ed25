//! XFS read from a partition's bytes, read-only: the superblock, inodes by number, their
//! data forks (inline, extent lists, B+trees of extents), directories (short form, and the
//! data blocks of block, leaf and node directories) and symlinks: what a scan needs to
//! walk and read a node's filesystem without mounting it. Nothing else: no log replay (a
//! cleanly unmounted image, as image builders leave it, needs none), no attributes, no
//! realtime device.
//!
//! Our own code: no maintained crate reads XFS from bytes. The layout is xfsprogs'
//! (`libxfs/xfs_format.h`, `xfs_da_format.h`; "XFS Algorithms & Data Structures"); see
//! docs/NODE-LAYOUT.md ("Image files"). Every number read is checked before it is used as an offset, a count or
//! a depth; metadata is read a block at a time, never a whole structure a header sizes.

use crate::sys::{be16, be32, be64, Bytes, Kind};
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::OsStringExt;
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;

/// Extents of one file's map, at most (a file of a million fragments).
const MAX_EXTENTS: usize = 1 << 20;

/// B+tree blocks read for one file's map, at most (a million extents fill 4,000 leaves;
/// a crafted tree whose nodes share children would otherwise be read without end).
const MAX_MAP_BLOCKS: usize = 1 << 14;

/// Levels of a B+tree of extents, at most (the kernel's own bound is 9 or so).
const MAX_LEVELS: u16 = 9;

/// Entries of one directory, at most.
const MAX_DIR_ENTRIES: usize = 1 << 21;

/// Bytes of a directory's data blocks read, at most (two million entries of long names
/// fill a quarter of it).
const MAX_DIR_BYTES: u64 = 1 << 30;

/// Where a directory's data blocks end and its hash index begins (`XFS_DIR2_LEAF_OFFSET`).
const DIR_LEAF_OFFSET: u64 = 32 << 30;

/// A symlink's target, at most (`XFS_SYMLINK_MAXLEN`).
const MAX_LINK: u64 = 1024;

/// Directories whose inode numbers are remembered by path, at most (then forgotten).
const MAX_CACHED_DIRS: usize = 1 << 16;

/// Listed directories kept for lookups (the walk lists one, then opens its files).
const LISTINGS_KEPT: usize = 16;

/// Whether `b` starts with an XFS superblock.
pub fn is_xfs(b: &dyn Bytes) -> bool {
    let mut m = [0u8; 4];
    b.read_at(0, &mut m).is_ok() && &m == b"XFSB"
}

/// Incompatible features read: file types in dir entries, sparse inode chunks, a
/// metadata UUID, big timestamps, needs-repair, 64-bit extent counters, exchange-range,
/// parent pointers, a metadata directory tree.
const INCOMPAT_KNOWN: u32 = 0x1ff;

/// What the superblock says, checked.
#[derive(Clone, Debug)]
struct Super {
    /// Block size in bytes.
    block: u64,
    /// Blocks in an allocation group.
    agblocks: u64,
    agcount: u64,
    /// Bits of a block number within a group, in block and inode numbers.
    agblklog: u32,
    /// Bits of an inode's place within its block, in inode numbers.
    inopblog: u32,
    inodesize: u64,
    /// Directory block size in bytes.
    dirblk: u64,
    /// Version 5 (checksummed metadata, version 3 inodes).
    v5: bool,
    /// Directory entries carry the file type.
    ftype: bool,
    rootino: u64,
}

impl Super {
    fn read(b: &dyn Bytes) -> Result<Super, String> {
        let mut sb = [0u8; 512];
        b.read_at(0, &mut sb).map_err(|e| format!("XFS superblock: {e}"))?;
        let u8_at = |at: usize| u32::from(sb[at]);
        let be16 = |at| u64::from(be16(&sb, at).unwrap_or(0));
        let be32 = |at| u64::from(be32(&sb, at).unwrap_or(0));
        let be64 = |at| be64(&sb, at).unwrap_or(0);
        if &sb[..4] != b"XFSB" {
            return Err("no XFS superblock".into());
        }
        let block = be32(4);
        let inodesize = be16(104);
        let version = be16(100) & 0xf;
        let dirblk = block.checked_shl(u8_at(192)).unwrap_or(0);
        let s = Super {
            block,
            agblocks: be32(84),
            agcount: be32(88),
            agblklog: u8_at(124),
            inopblog: u8_at(123),
            inodesize,
            dirblk,
            v5: version == 5,
            ftype: if version == 5 {
                be32(216) & 1 != 0
            } else {
                (be32(200) | be32(204)) & 0x200 != 0
            },
            rootino: be64(56),
        };
        let pow2 = |v: u64, lo: u64, hi: u64| v.is_power_of_two() && (lo..=hi).contains(&v);
        let dblocks = be64(8);
        let sane = (version == 4 || version == 5)
            && pow2(block, 512, 65536)
            && pow2(inodesize, 256, 2048)
            && inodesize <= block
            && s.inopblog <= 8
            && 1u64 << s.inopblog == block / inodesize
            && u64::from(u8_at(120)) == u64::from(block.trailing_zeros())
            && s.agblklog <= 31
            && s.agblocks >= 1
            && s.agblocks <= 1 << s.agblklog
            && s.agcount >= 1
            // As the kernel checks: the groups hold the blocks, the last one in part.
            && s.agcount.checked_mul(s.agblocks).is_some_and(|all| all >= dblocks)
            && (s.agcount - 1) * s.agblocks < dblocks
            && pow2(dirblk, block, 65536);
        if !sane {
            return Err(
                "an XFS superblock kresidue cannot read (its geometry is out of range)".into()
            );
        }
        let incompat = if s.v5 { be32(216) as u32 } else { 0 };
        if incompat & !INCOMPAT_KNOWN != 0 {
            return Err(format!(
                "XFS with incompatible features kresidue does not read ({:#x})",
                incompat & !INCOMPAT_KNOWN
            ));
        }
        // Version 4: directories of version 2 only; file types in entries when the
        // more-bits flag says features2 counts (and its misplaced copy, as the kernel ORs).
        let more = be16(100) & 0x8000 != 0;
        if version == 4 && be16(100) & 0x2000 == 0 {
            return Err("XFS version 4 with version 1 directories: not read".into());
        }
        let s = Super {
            ftype: s.ftype && (s.v5 || (more && (be32(200) | be32(204)) & 0x200 != 0)),
            ..s
        };
        let size = dblocks.saturating_mul(block);
        if size > b.size().saturating_add(block) {
            return Err(format!(
                "the XFS superblock says {dblocks} blocks of {block} bytes, more than its partition's {} bytes",
                b.size()
            ));
        }
        Ok(s)
    }

    /// The byte where filesystem block `fsb` (group number and block in it) begins.
    fn block_at(&self, fsb: u64) -> Option<u64> {
        let agno = fsb >> self.agblklog;
        let agbno = fsb & ((1 << self.agblklog) - 1);
        // Below `agcount × agblocks` blocks, which the superblock's check keeps in range.
        (agno < self.agcount && agbno < self.agblocks)
            .then(|| (agno * self.agblocks + agbno) * self.block)
    }

    /// The byte where inode `ino` begins.
    fn inode_at(&self, ino: u64) -> Option<u64> {
        let fsb = ino.checked_shr(self.inopblog)?;
        let slot = ino & ((1 << self.inopblog) - 1);
        Some(self.block_at(fsb)? + slot * self.inodesize)
    }
}

/// One extent of a file's map: `len` blocks from logical block `off` are at filesystem
/// block `at` (read as zeros when `unwritten`).
#[derive(Clone, Copy, Debug)]
struct Extent {
    off: u64,
    at: u64,
    len: u64,
    unwritten: bool,
}

impl Extent {
    /// The packed 128-bit record at the start of `r`.
    fn of(r: &[u8]) -> Extent {
        let l0 = be64(r, 0).unwrap_or(0);
        let l1 = be64(r, 8).unwrap_or(0);
        Extent {
            unwritten: l0 >> 63 != 0,
            off: (l0 & !(1 << 63)) >> 9,
            at: (l0 & 0x1ff) << 43 | l1 >> 21,
            len: l1 & ((1 << 21) - 1),
        }
    }
}

/// The data fork formats (`xfs_dinode_fmt`).
const FMT_LOCAL: u8 = 1;
const FMT_EXTENTS: u8 = 2;
const FMT_BTREE: u8 = 3;

/// An inode, read.
#[derive(Clone, Debug)]
struct Inode {
    kind: Kind,
    format: u8,
    size: u64,
    /// Data fork extents (the extent list format's count).
    nextents: u64,
    /// Data on the realtime device.
    realtime: bool,
    /// The data fork's bytes in the inode.
    fork: Vec<u8>,
}

/// A directory entry: name, inode, and the kind its entry says (when it says one).
type Dirent = (Vec<u8>, u64, Option<Kind>);

/// A directory's entries by name (inode, and the kind the entry says), and the parent
/// it names (`..`).
struct Listing {
    names: HashMap<Vec<u8>, (u64, Option<Kind>)>,
    parent: Option<u64>,
}

/// A directory's entries as read: the entries, and the parent it names.
#[derive(Default)]
struct Entries {
    list: Vec<Dirent>,
    parent: Option<u64>,
}

fn corrupt(what: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("XFS: {what}"))
}

/// An XFS filesystem read from `B`, the partition's bytes; remembers the inode numbers
/// of directories it resolved and the entries of the ones it listed last.
pub struct Xfs<B> {
    b: B,
    sb: Super,
    dirs: RefCell<HashMap<PathBuf, u64>>,
    listed: RefCell<Vec<(u64, Rc<Listing>)>>,
}

impl<B: Bytes> Xfs<B> {
    /// The filesystem in `b`, its superblock and root checked.
    pub fn load(b: B) -> Result<Xfs<B>, String> {
        let sb = Super::read(&b)?;
        let fs = Xfs { b, sb, dirs: RefCell::default(), listed: RefCell::default() };
        match fs.inode(fs.sb.rootino) {
            Ok(root) if root.kind == Kind::Dir => Ok(fs),
            Ok(_) => Err("XFS: the root inode is no directory".into()),
            Err(e) => Err(format!("XFS root inode: {e}")),
        }
    }

    fn read(&self, at: u64, buf: &mut [u8]) -> io::Result<()> {
        self.b.read_at(at, buf)
    }

    /// Inode `ino`, read and checked.
    fn inode(&self, ino: u64) -> io::Result<Inode> {
        let at =
            self.sb.inode_at(ino).ok_or_else(|| corrupt(format!("inode {ino} out of range")))?;
        let mut d = vec![0u8; self.sb.inodesize as usize];
        self.read(at, &mut d)?;
        let version = d[4];
        if be16(&d, 0) != Some(0x494e)
            || !(1..=3).contains(&version)
            || (self.sb.v5 != (version == 3))
        {
            return Err(corrupt(format!("inode {ino} is damaged")));
        }
        if version == 3 && be64(&d, 152) != Some(ino) {
            return Err(corrupt(format!("inode {ino} says it is another")));
        }
        let lit = if version == 3 { 176 } else { 100 };
        let forkoff = usize::from(d[82]) * 8;
        let end = if forkoff > 0 { lit + forkoff } else { d.len() };
        if end > d.len() {
            return Err(corrupt(format!("inode {ino}: its forks overrun it")));
        }
        let mode = be16(&d, 2).unwrap_or(0);
        let kind = match mode & 0o170000 {
            0o040000 => Kind::Dir,
            0o100000 => Kind::File,
            0o120000 => Kind::Symlink,
            _ => Kind::Other,
        };
        let flags2 = if version == 3 { be64(&d, 120).unwrap_or(0) } else { 0 };
        let nextents = match flags2 & (1 << 4) != 0 {
            true => be64(&d, 24).unwrap_or(0),
            false => u64::from(be32(&d, 76).unwrap_or(0)),
        };
        Ok(Inode {
            kind,
            format: d[5],
            size: be64(&d, 56).unwrap_or(0).min(i64::MAX as u64),
            nextents,
            realtime: be16(&d, 90).unwrap_or(0) & 1 != 0,
            fork: d[lit..end].to_vec(),
        })
    }

    /// The data fork's map of `i`, sorted, each extent checked to lie in one group.
    fn extents(&self, i: &Inode) -> io::Result<Vec<Extent>> {
        let mut out = Vec::new();
        match i.format {
            FMT_EXTENTS => {
                let n = usize::try_from(i.nextents).unwrap_or(usize::MAX);
                if n > i.fork.len() / 16 {
                    return Err(corrupt(format!("{n} extents in an inode's fork")));
                }
                out.extend(i.fork.chunks_exact(16).take(n).map(Extent::of));
            }
            FMT_BTREE => {
                let f = &i.fork;
                let level = be16(f, 0).unwrap_or(0);
                let n = usize::from(be16(f, 2).unwrap_or(0));
                let max = f.len().saturating_sub(4) / 16;
                if level == 0 || level > MAX_LEVELS || n > max {
                    return Err(corrupt("a damaged extent tree root"));
                }
                let mut budget = MAX_MAP_BLOCKS;
                for k in 0..n {
                    let ptr = be64(f, 4 + max * 8 + k * 8).unwrap_or(0);
                    self.map_block(ptr, level - 1, &mut out, &mut budget)?;
                }
            }
            FMT_LOCAL => return Err(corrupt("inline data where extents were expected")),
            f => return Err(corrupt(format!("data fork of format {f}"))),
        }
        out.sort_by_key(|e| e.off);
        let mut end = 0;
        for e in &out {
            let agbno = e.at & ((1 << self.sb.agblklog) - 1);
            let last = e.off.checked_add(e.len).and_then(|b| b.checked_mul(self.sb.block));
            if e.off < end
                || self.sb.block_at(e.at).is_none()
                || agbno + e.len > self.sb.agblocks
                || last.is_none_or(|l| l > i64::MAX as u64)
            {
                return Err(corrupt("a damaged extent map"));
            }
            end = e.off + e.len;
        }
        Ok(out)
    }

    /// Adds the extents below B+tree block `fsb`, of `level`, to `out`.
    fn map_block(
        &self,
        fsb: u64,
        level: u16,
        out: &mut Vec<Extent>,
        budget: &mut usize,
    ) -> io::Result<()> {
        if *budget == 0 {
            return Err(corrupt(format!("an extent tree of more than {MAX_MAP_BLOCKS} blocks")));
        }
        *budget -= 1;
        let at =
            self.sb.block_at(fsb).ok_or_else(|| corrupt("an extent tree pointer out of range"))?;
        let mut b = vec![0u8; self.sb.block as usize];
        self.read(at, &mut b)?;
        let (magic, hdr) = if self.sb.v5 { (b"BMA3", 72) } else { (b"BMAP", 24) };
        let n = usize::from(be16(&b, 6).unwrap_or(0));
        let max = (b.len() - hdr) / 16;
        if &b[..4] != magic || be16(&b, 4) != Some(level) || n > max {
            return Err(corrupt("a damaged extent tree block"));
        }
        if level == 0 {
            if out.len() + n > MAX_EXTENTS {
                return Err(corrupt(format!("a file of more than {MAX_EXTENTS} extents")));
            }
            out.extend(b[hdr..].chunks_exact(16).take(n).map(Extent::of));
            return Ok(());
        }
        for k in 0..n {
            let ptr = be64(&b, hdr + max * 8 + k * 8).unwrap_or(0);
            self.map_block(ptr, level - 1, out, budget)?;
        }
        Ok(())
    }

    /// Fills `buf` from byte `at` of the file mapped by `map` (holes and unwritten
    /// extents read as zeros).
    fn read_mapped(&self, map: &[Extent], mut at: u64, mut buf: &mut [u8]) -> io::Result<()> {
        let bs = self.sb.block;
        while !buf.is_empty() {
            let lb = at / bs;
            let i = map.partition_point(|e| e.off + e.len <= lb);
            let (n, from) = match map.get(i) {
                Some(e) if e.off <= lb => {
                    let left = (e.off + e.len) * bs - at;
                    let from = (!e.unwritten)
                        .then(|| self.sb.block_at(e.at).unwrap_or(0) + (lb - e.off) * bs + at % bs);
                    (left, from)
                }
                Some(e) => (e.off * bs - at, None),
                None => (u64::MAX, None),
            };
            let n = usize::try_from(n).unwrap_or(usize::MAX).min(buf.len());
            let (now, rest) = buf.split_at_mut(n);
            match from {
                Some(from) => self.read(from, now)?,
                None => now.fill(0),
            }
            buf = rest;
            at += n as u64;
        }
        Ok(())
    }

    /// The entries of directory `i`, but `.` and `..` and names no path can hold.
    fn dirents(&self, i: &Inode) -> io::Result<Entries> {
        let mut out = Entries::default();
        if i.format == FMT_LOCAL {
            self.short_dir(i, &mut out)?;
        } else {
            let map = self.extents(i)?;
            let db = self.sb.dirblk;
            let mut blk = vec![0u8; db as usize];
            let mut next = 0;
            let mut budget = MAX_DIR_BYTES / db;
            for e in &map {
                let (from, to) = (e.off * self.sb.block, (e.off + e.len) * self.sb.block);
                let mut at = (from / db * db).max(next);
                while at < to.min(DIR_LEAF_OFFSET) {
                    if budget == 0 {
                        return Err(corrupt(format!(
                            "a directory of more than {} MiB of entries",
                            MAX_DIR_BYTES >> 20
                        )));
                    }
                    budget -= 1;
                    self.read_mapped(&map, at, &mut blk)?;
                    self.dir_block(&blk, &mut out)?;
                    at += db;
                }
                next = next.max(at);
            }
        }
        Ok(out)
    }

    /// The entries of a short-form directory (in its inode).
    fn short_dir(&self, i: &Inode, out: &mut Entries) -> io::Result<()> {
        let sf = &i.fork[..i.fork.len().min(i.size as usize)];
        let bad = || corrupt("a damaged short-form directory");
        let (&count, &i8) = (sf.first().ok_or_else(bad)?, sf.get(1).ok_or_else(bad)?);
        let w = if i8 > 0 { 8 } else { 4 };
        let number = |b: &[u8]| b.iter().fold(0u64, |a, &b| a << 8 | u64::from(b));
        out.parent = Some(number(sf.get(2..2 + w).ok_or_else(bad)?));
        let mut pos = 2 + w;
        for _ in 0..count {
            let len = usize::from(*sf.get(pos).ok_or_else(bad)?);
            pos += 3;
            let name = sf.get(pos..pos + len).ok_or_else(bad)?.to_vec();
            pos += len;
            let kind = match self.sb.ftype {
                true => {
                    pos += 1;
                    Some(*sf.get(pos - 1).ok_or_else(bad)?)
                }
                false => None,
            };
            let ino = number(sf.get(pos..pos + w).ok_or_else(bad)?);
            pos += w;
            out.push(name, ino, kind)?;
        }
        Ok(())
    }

    /// The entries of one directory data block (of a block, leaf or node directory).
    fn dir_block(&self, b: &[u8], out: &mut Entries) -> io::Result<()> {
        let bad = || corrupt("a damaged directory block");
        let (block, data) = match self.sb.v5 {
            true => (0x5844_4233, 0x5844_4433),
            false => (0x5844_3242, 0x5844_3244),
        };
        let hdr = if self.sb.v5 { 64 } else { 16 };
        let magic = be32(b, 0).unwrap_or(0);
        let end = if magic == block {
            let count = be32(b, b.len() - 8).unwrap_or(0) as usize;
            let leaf = count.checked_mul(8).and_then(|l| l.checked_add(8)).ok_or_else(bad)?;
            b.len().checked_sub(leaf).filter(|&e| e >= hdr).ok_or_else(bad)?
        } else if magic == data {
            b.len()
        } else {
            return Err(bad());
        };
        let mut pos = hdr;
        while pos + 8 <= end {
            if be16(b, pos) == Some(0xffff) {
                let len = usize::from(be16(b, pos + 2).unwrap_or(0));
                if len < 8 || len % 8 != 0 {
                    return Err(bad());
                }
                pos += len;
                continue;
            }
            let ino = be64(b, pos).unwrap_or(0);
            let len = usize::from(*b.get(pos + 8).ok_or_else(bad)?);
            let ft = usize::from(self.sb.ftype);
            let size = (8 + 1 + len + ft + 2).next_multiple_of(8);
            if len == 0 || pos + size > end {
                return Err(bad());
            }
            let name = b[pos + 9..pos + 9 + len].to_vec();
            let kind = self.sb.ftype.then(|| b[pos + 9 + len]);
            out.push(name, ino, kind)?;
            pos += size;
        }
        Ok(())
    }

    /// The target of symlink `i`.
    fn link_target(&self, i: &Inode) -> io::Result<Vec<u8>> {
        if i.size > MAX_LINK {
            return Err(corrupt("a symlink longer than 1024 bytes"));
        }
        let size = i.size as usize;
        if i.format == FMT_LOCAL {
            return i
                .fork
                .get(..size)
                .map(<[u8]>::to_vec)
                .ok_or_else(|| corrupt("a damaged symlink"));
        }
        let map = self.extents(i)?;
        if !self.sb.v5 {
            let mut out = vec![0u8; size];
            self.read_mapped(&map, 0, &mut out)?;
            return Ok(out);
        }
        // Version 5: each extent of the target starts with a 56-byte header (the kernel
        // writes one a mapping; a target is at most two blocks).
        let mut out = Vec::with_capacity(size);
        for e in map.iter().take(2) {
            let len = (e.len * self.sb.block).min(MAX_LINK + 56) as usize;
            let mut ext = vec![0u8; len];
            self.read_mapped(&map, e.off * self.sb.block, &mut ext)?;
            if !ext.starts_with(b"XSLM") {
                return Err(corrupt("a damaged symlink block"));
            }
            let n = (size - out.len()).min(len.saturating_sub(56));
            out.extend_from_slice(&ext[56..56 + n]);
            if out.len() == size {
                return Ok(out);
            }
        }
        Err(corrupt("a symlink shorter than its size"))
    }

    /// The inode of the directory at `rel`, never through a symlink.
    fn dir_ino(&self, rel: &Path) -> io::Result<u64> {
        if rel.as_os_str().is_empty() {
            return Ok(self.sb.rootino);
        }
        if let Some(&ino) = self.dirs.borrow().get(rel) {
            return Ok(ino);
        }
        let (ino, i) = self.resolve(rel)?;
        match i.kind {
            Kind::Dir => {}
            Kind::Symlink => return Err(crate::sys::image::through_symlink()),
            _ => return Err(io::Error::from_raw_os_error(nix::libc::ENOTDIR)),
        }
        // Directories make a tree: one whose `..` is not the directory it was found in
        // (linked in twice: a loop, or the root again) is not walked.
        let parent = self.dir_ino(rel.parent().unwrap_or(Path::new("")))?;
        if self.listing(ino)?.parent != Some(parent) {
            return Err(corrupt("a directory linked in a second place (a loop): not walked"));
        }
        let mut dirs = self.dirs.borrow_mut();
        if dirs.len() >= MAX_CACHED_DIRS {
            dirs.clear();
        }
        dirs.insert(rel.to_path_buf(), ino);
        Ok(ino)
    }

    /// The entries of directory inode `ino` by name (kept for the next lookups).
    fn listing(&self, ino: u64) -> io::Result<Rc<Listing>> {
        {
            let mut listed = self.listed.borrow_mut();
            if let Some(k) = listed.iter().position(|(i, _)| *i == ino) {
                let hit = listed.remove(k);
                let l = hit.1.clone();
                listed.push(hit);
                return Ok(l);
            }
        }
        let i = self.inode(ino)?;
        if i.kind != Kind::Dir {
            return Err(io::Error::from_raw_os_error(nix::libc::ENOTDIR));
        }
        let e = self.dirents(&i)?;
        let names = e.list.into_iter().map(|(n, ino, k)| (n, (ino, k))).collect();
        let listing = Rc::new(Listing { names, parent: e.parent });
        let mut listed = self.listed.borrow_mut();
        // The least recently used goes first; a few huge directories are not all kept.
        let mut kept: usize = listed.iter().map(|(_, l)| l.names.len()).sum();
        while !listed.is_empty() && (listed.len() >= LISTINGS_KEPT || kept > MAX_DIR_ENTRIES) {
            kept -= listed.remove(0).1.names.len();
        }
        listed.push((ino, listing.clone()));
        Ok(listing)
    }

    /// The inode at `rel` (its number and itself), never through a symlink.
    fn resolve(&self, rel: &Path) -> io::Result<(u64, Inode)> {
        let ino = self.ino(rel)?;
        Ok((ino, self.inode(ino)?))
    }

    /// The inode number of `rel`, from its directory's entry (the inode is not read).
    pub fn ino(&self, rel: &Path) -> io::Result<u64> {
        if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a plain relative path"));
        }
        let Some(name) = rel.file_name() else { return Ok(self.sb.rootino) };
        let parent = self.dir_ino(rel.parent().unwrap_or(Path::new("")))?;
        let listing = self.listing(parent)?;
        let &(ino, _) = listing
            .names
            .get(std::os::unix::ffi::OsStrExt::as_bytes(name))
            .ok_or(io::ErrorKind::NotFound)?;
        Ok(ino)
    }

    /// What is at `rel` (not following a symlink there): its kind and size.
    pub fn lstat(&self, rel: &Path) -> io::Result<crate::sys::image::Stat> {
        let (_, i) = self.resolve(rel)?;
        Ok(crate::sys::image::Stat { kind: i.kind, size: i.size })
    }

    /// The entries of the directory at `rel`, with their kinds.
    pub fn list(&self, rel: &Path) -> io::Result<Vec<(OsString, Kind)>> {
        let ino = self.dir_ino(rel)?;
        let listing = self.listing(ino)?;
        let mut out = Vec::with_capacity(listing.names.len());
        for (name, &(ino, kind)) in listing.names.iter() {
            let kind = match kind {
                // A file or directory is checked when it is opened or listed.
                Some(k @ (Kind::File | Kind::Dir)) => k,
                // No file type in the entry (an old filesystem), or one a file is not
                // scanned for: the inode says.
                _ => self.inode(ino).map(|i| i.kind).unwrap_or(Kind::Other),
            };
            out.push((ino, OsString::from_vec(name.clone()), kind));
        }
        // In inode order: near the order of their data on the disk, and the same each time.
        out.sort_unstable_by_key(|e| e.0);
        Ok(out.into_iter().map(|(_, n, k)| (n, k)).collect())
    }

    /// The target of the symlink at `rel`.
    pub fn read_link(&self, rel: &Path) -> io::Result<OsString> {
        let (_, i) = self.resolve(rel)?;
        if i.kind != Kind::Symlink {
            return Err(io::Error::from_raw_os_error(nix::libc::EINVAL));
        }
        Ok(OsString::from_vec(self.link_target(&i)?))
    }

    /// The regular file at `rel`, to read at offsets.
    pub fn open(self: &Rc<Self>, rel: &Path) -> io::Result<XfsFile<B>> {
        let (_, i) = self.resolve(rel)?;
        match i.kind {
            Kind::File => {}
            Kind::Symlink => return Err(crate::sys::image::through_symlink()),
            _ => return Err(io::Error::other("not a regular file")),
        }
        if i.realtime {
            return Err(corrupt("a file on the realtime device: not read"));
        }
        let map = self.extents(&i)?;
        Ok(XfsFile { fs: self.clone(), map, size: i.size })
    }
}

impl Entries {
    /// Adds an entry: `..` is the parent; `.` and names no path can hold (with a `/` or a
    /// NUL) are left out.
    fn push(&mut self, name: Vec<u8>, ino: u64, ft: Option<u8>) -> io::Result<()> {
        if name == b".." {
            self.parent = Some(ino);
        }
        if name == b"."
            || name == b".."
            || name.is_empty()
            || name.iter().any(|&c| c == b'/' || c == 0)
        {
            return Ok(());
        }
        if self.list.len() >= MAX_DIR_ENTRIES {
            return Err(corrupt(format!("a directory of more than {MAX_DIR_ENTRIES} entries")));
        }
        // Type 0 is unknown: the inode says.
        let kind = ft.and_then(|t| match t {
            0 => None,
            1 => Some(Kind::File),
            2 => Some(Kind::Dir),
            7 => Some(Kind::Symlink),
            _ => Some(Kind::Other),
        });
        self.list.push((name, ino, kind));
        Ok(())
    }
}

/// A regular file of an XFS filesystem: its map and size.
pub struct XfsFile<B> {
    fs: Rc<Xfs<B>>,
    map: Vec<Extent>,
    size: u64,
}

impl<B: Bytes> Bytes for XfsFile<B> {
    fn size(&self) -> u64 {
        self.size
    }

    fn read_at(&self, at: u64, buf: &mut [u8]) -> io::Result<()> {
        if at.checked_add(buf.len() as u64).is_none_or(|end| end > self.size) {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        self.fs.read_mapped(&self.map, at, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// An XFS image of `src` made by mkfs.xfs (through scripts/xfs-image.sh).
    fn make(src: &Path, img: &Path, opts: &[&str]) {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/xfs-image.sh");
        let out = Command::new("bash")
            .arg(script)
            .arg(src)
            .arg(img)
            .arg("64M")
            .args(opts)
            .output()
            .expect("bash");
        assert!(out.status.success(), "{opts:?}: {}", String::from_utf8_lossy(&out.stderr));
    }

    fn kind(t: std::fs::FileType) -> Kind {
        match (t.is_dir(), t.is_symlink()) {
            (true, _) => Kind::Dir,
            (_, true) => Kind::Symlink,
            _ => Kind::File,
        }
    }

    /// The tree at `rel` of `fs` is the tree at `src/rel`: names, kinds, sizes, bytes
    /// (whole and from inside), link targets; `n` counts the entries compared.
    fn same_tree(fs: &Rc<Xfs<std::fs::File>>, src: &Path, rel: &Path, n: &mut usize) {
        let read = std::fs::read_dir(src.join(rel)).expect("read_dir");
        let mut want: Vec<(OsString, Kind)> = read
            .map(|e| e.expect("entry"))
            .map(|e| (e.file_name(), kind(e.file_type().expect("type"))))
            .collect();
        want.sort();
        let mut got = fs.list(rel).expect("list");
        got.sort();
        assert_eq!(got, want, "{rel:?}");
        for (name, kind) in want {
            *n += 1;
            let p = rel.join(&name);
            let host = src.join(&p);
            let st = fs.lstat(&p).expect("lstat");
            assert_eq!(st.kind, kind, "{p:?}");
            match kind {
                Kind::Dir => same_tree(fs, src, &p, n),
                Kind::File => {
                    let data = std::fs::read(&host).expect("read");
                    assert_eq!(st.size, data.len() as u64, "{p:?}");
                    let f = fs.open(&p).expect("open");
                    let mut back = vec![0u8; data.len()];
                    f.read_at(0, &mut back).expect("read");
                    assert!(back == data, "{p:?}");
                    if data.len() > 9000 {
                        let mut mid = vec![0u8; 5000];
                        f.read_at(4000, &mut mid).expect("read");
                        assert!(mid == data[4000..9000], "{p:?}");
                    }
                    assert!(f.read_at(data.len() as u64, &mut [0u8; 1]).is_err());
                }
                Kind::Symlink => {
                    let target = std::fs::read_link(&host).expect("link").into_os_string();
                    assert_eq!(fs.read_link(&p).expect("read_link"), target, "{p:?}");
                }
                Kind::Other => {}
            }
        }
    }

    /// A directory entry pointing back at the root (a loop a crafted image makes): the
    /// directory holding it is listed; the loop is an error, never walked.
    #[test]
    fn a_directory_linked_twice_is_not_walked() {
        let dir = tempfile::tempdir().expect("tmp");
        let src = dir.path().join("src");
        std::fs::create_dir_all(src.join("a/b")).expect("mkdir");
        std::fs::write(src.join("a/b/f"), b"x").expect("write");
        let img = dir.path().join("fs.img");
        make(&src, &img, &[]);
        let fs = Xfs::load(std::fs::File::open(&img).expect("open")).expect("load");
        let a = fs.dir_ino(Path::new("a")).expect("a");
        assert_eq!(fs.list(Path::new("a/b")).expect("b").len(), 1);
        // a's short-form entries: count, i8count, parent (4), then b: name length,
        // offset (2), name, file type, inode (4).
        let at = fs.sb.inode_at(a).expect("a") + 176 + 6 + 1 + 2 + 1 + 1;
        let root = u32::try_from(fs.sb.rootino).expect("small").to_be_bytes();
        let f = std::fs::OpenOptions::new().write(true).open(&img).expect("open");
        std::os::unix::fs::FileExt::write_all_at(&f, &root, at).expect("patch");
        let fs = Xfs::load(std::fs::File::open(&img).expect("open")).expect("load");
        assert_eq!(fs.list(Path::new("a")).expect("a"), vec![("b".into(), Kind::Dir)]);
        let e = fs.list(Path::new("a/b")).expect_err("a loop");
        assert!(e.to_string().contains("loop"), "{e}");
        assert!(fs.lstat(Path::new("a/b/a")).is_err());
    }

    /// A tree of every shape XFS stores differently: files empty, small, large and sparse;
    /// directories short-form (in the inode), block, leaf and node (3,000 names whose
    /// blocks lie between their files' data, so the map is a B+tree); symlinks inline and
    /// in a block; deep nesting. Made as XFS by mkfs.xfs in four forms (version 5; version
    /// 4 without file types in entries and 256-byte inodes; 16 KiB directory blocks;
    /// 1 KiB blocks): each reads back exactly, never through a symlink.
    #[test]
    fn xfs_made_by_mkfs_reads_back() {
        let dir = tempfile::tempdir().expect("tmp");
        let src = dir.path().join("src");
        let mut rng = crate::prng::Prng::new(7);
        let put = |rel: &str, data: &[u8]| {
            let p = src.join(rel);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(p, data).expect("write");
        };
        put("etc/hostname", b"node-1\n");
        put("empty", b"");
        put("big", &rng.bytes(3 << 20));
        let mut sparse = vec![0u8; 1 << 20];
        sparse[..100].fill(b'a');
        sparse[(1 << 20) - 100..].fill(b'z');
        put("sparse", &sparse);
        for i in 0..40 {
            put(&format!("some/entry-{i}"), &rng.bytes(i * 300));
        }
        for i in 0..3000 {
            put(&format!("many/a-rather-long-name-to-fill-directory-blocks-{i:05}"), &[i as u8]);
        }
        put(
            &format!("{}/deep", (0..20).map(|i| format!("d{i}")).collect::<Vec<_>>().join("/")),
            b"x",
        );
        put("ünïcode-näme", b"u");
        let link = |target: &str, name: &str| {
            std::os::unix::fs::symlink(target, src.join(name)).expect("symlink");
        };
        link("/etc/hostname", "link");
        link("some", "lib");
        link(&"long/".repeat(120), "long");
        for (k, opts) in [
            &[][..],
            &["-m", "crc=0", "-n", "ftype=0", "-i", "size=256"],
            &["-n", "size=16384"],
            &["-b", "size=1024"],
        ]
        .into_iter()
        .enumerate()
        {
            let img = dir.path().join("fs.img");
            make(&src, &img, opts);
            let load =
                || Rc::new(Xfs::load(std::fs::File::open(&img).expect("open")).expect("load"));
            let fs = load();
            if fs.sb.v5 {
                // mkfs.xfs 6.1 writes a long symlink's target without the header version 5
                // puts before it in each block (xfs_db calls the block damaged, as the
                // kernel would): refused; written as the kernel writes it, read.
                let e = fs.read_link(Path::new("long")).expect_err("no header");
                assert!(e.to_string().contains("damaged symlink"), "{e}");
                let (_, i) = fs.resolve(Path::new("long")).expect("long");
                let at = fs.sb.block_at(fs.extents(&i).expect("map")[0].at).expect("block");
                let target = "long/".repeat(120);
                let mut block = b"XSLM".to_vec();
                block.extend_from_slice(&[0, 0, 0, 0, 0, 0, 2, 88]);
                block.resize(56, 0);
                block.extend_from_slice(target.as_bytes());
                let f = std::fs::OpenOptions::new().write(true).open(&img).expect("open");
                std::os::unix::fs::FileExt::write_all_at(&f, &block, at).expect("patch");
            }
            let fs = load();
            let mut n = 0;
            same_tree(&fs, &src, Path::new(""), &mut n);
            assert!(n > 3060, "{n}");
            if k < 2 {
                let many = fs.inode(fs.dir_ino(Path::new("many")).expect("many")).expect("inode");
                assert_eq!(many.format, FMT_BTREE, "{opts:?}");
            }
            assert!(fs.lstat(Path::new("lib/entry-1")).is_err());
            assert!(fs.open(Path::new("link")).is_err());
            assert!(fs.list(Path::new("link")).is_err());
            assert!(fs.list(Path::new("etc/hostname")).is_err());
            assert!(fs.open(Path::new("etc")).is_err());
            let gone = fs.lstat(Path::new("etc/nothing")).expect_err("none");
            assert_eq!(gone.kind(), io::ErrorKind::NotFound);
            assert!(fs.lstat(Path::new("etc/../big")).is_err());
        }
    }
}
