//! A read-only reader of qcow2 disk images (what node-image builders emit), as the bytes
//! of the virtual disk they hold: the first part of reading a node's disk image without
//! root (issue 50). The format is QEMU's `docs/interop/qcow2.txt`; integers are
//! big-endian.
//!
//! * The header: magic `QFI\xfb`, version (2 or 3), the backing file's offset at 8 (an
//!   image over another is refused: its bytes are not all here), `cluster_bits` at 20,
//!   the virtual size at 24, the encryption method at 32 (refused unless none), the L1
//!   table's size at 36 and offset at 40; in version 3 the incompatible features at 72
//!   (dirty and corrupt are read; an external data file, extended L2 entries or any other
//!   bit refused) and, past 104 bytes of header, the compression type at 104 (zlib; zstd
//!   is refused).
//! * An L1 entry's bits 9–55 are an L2 table's offset (0: none); an L2 entry's bit 62 says
//!   compressed, else bit 0 says zeros and bits 9–55 are the cluster's offset (0: not
//!   allocated, zeros). A compressed cluster's entry holds its offset in bits 0..x and its
//!   count of further 512-byte sectors in bits x..62, `x = 62 - (cluster_bits - 8)`: raw
//!   deflate.
//!
//! It holds the L1 table (bounded by what the virtual size needs), one L2 table and one
//! inflated cluster at a time. Every offset is checked against the file: a damaged or
//! hostile image gives an [`Error`] naming offsets, never a panic.

use crate::sys::Bytes;
use std::cell::RefCell;

/// Why an image, or part of it, could not be read. The message names offsets only.
pub use crate::sys::ReadError as Error;

fn err(msg: impl Into<String>) -> Error {
    Error::new("qcow2", msg.into())
}

/// The magic number that starts an image.
pub const MAGIC: [u8; 4] = *b"QFI\xfb";
const OFFSET_MASK: u64 = 0x00ff_ffff_ffff_fe00;
const COMPRESSED: u64 = 1 << 62;
const ZERO: u64 = 1;
/// The incompatible features read: dirty (bit 0) and corrupt (bit 1).
const KNOWN_INCOMPATIBLE: u64 = 0b11;
/// The largest L1 table read (8 bytes an entry).
const MAX_L1: u64 = 4 << 20;

/// The big-endian `u32` at `at` of `b`; 0 past its end.
fn be32(b: &[u8], at: usize) -> u32 {
    crate::sys::be32(b, at).unwrap_or(0)
}

/// The big-endian `u64` at `at` of `b`; 0 past its end.
fn be64(b: &[u8], at: usize) -> u64 {
    crate::sys::be64(b, at).unwrap_or(0)
}

/// Whether `file` begins as a qcow2 image does.
pub fn is_qcow2(file: &dyn Bytes) -> bool {
    let mut magic = [0u8; 4];
    file.read_at(0, &mut magic).is_ok() && magic == MAGIC
}

/// An opened image: the virtual disk's bytes, read through its tables.
pub struct Qcow2<B> {
    file: B,
    cluster_bits: u32,
    size: u64,
    l1: Vec<u64>,
    /// The L2 table read last: its offset and entries.
    l2: RefCell<Option<(u64, Vec<u64>)>>,
    /// The compressed cluster inflated last: its entry and bytes.
    inflated: RefCell<Option<(u64, Vec<u8>)>>,
}

impl<B: Bytes> Qcow2<B> {
    /// Opens the image `file`: checks its header and reads its L1 table.
    pub fn open(file: B) -> Result<Qcow2<B>, Error> {
        let mut h = [0u8; 112];
        let got = h.len().min(usize::try_from(file.size()).unwrap_or(usize::MAX));
        file.read_at(0, &mut h[..got]).map_err(|_| err("the header could not be read"))?;
        if h[..4] != MAGIC || got < 72 {
            return Err(err("not a qcow2 image"));
        }
        let version = be32(&h, 4);
        if !(2..=3).contains(&version) {
            return Err(err(format!("version {version}")));
        }
        if be64(&h, 8) != 0 {
            return Err(err("an image over a backing file: its bytes are not all in it"));
        }
        let cluster_bits = be32(&h, 20);
        if !(9..=21).contains(&cluster_bits) {
            return Err(err(format!("cluster_bits {cluster_bits}")));
        }
        if be32(&h, 32) != 0 {
            return Err(err("encrypted"));
        }
        if version == 3 {
            let incompatible = be64(&h, 72);
            if incompatible & !KNOWN_INCOMPATIBLE != 0 {
                return Err(err(format!(
                    "incompatible features {incompatible:#x} (an external data file, extended \
                     L2 entries or newer): not read"
                )));
            }
            let header_len = be32(&h, 100);
            if header_len > 104 && h[104] != 0 {
                return Err(err("zstd-compressed clusters: not read"));
            }
        }
        let size = be64(&h, 24);
        let cluster = 1u64 << cluster_bits;
        let per_l2 = cluster / 8;
        let needed = size.div_ceil(cluster).div_ceil(per_l2);
        let l1_size = u64::from(be32(&h, 36));
        if l1_size < needed || needed > MAX_L1 {
            return Err(err(format!("an L1 table of {l1_size} entries for {size} bytes of disk")));
        }
        let l1_at = be64(&h, 40);
        let mut raw = vec![0u8; needed as usize * 8];
        file.read_at(l1_at, &mut raw)
            .map_err(|_| err(format!("the L1 table at {l1_at} runs past the file")))?;
        let l1 = raw.chunks_exact(8).map(|c| be64(c, 0)).collect();
        Ok(Qcow2 {
            file,
            cluster_bits,
            size,
            l1,
            l2: RefCell::new(None),
            inflated: RefCell::new(None),
        })
    }

    /// The L2 entry of virtual cluster `n` (0: not allocated).
    fn entry(&self, n: u64) -> Result<u64, Error> {
        let per_l2 = 1u64 << (self.cluster_bits - 3);
        let l2_at = self.l1.get((n / per_l2) as usize).copied().unwrap_or(0) & OFFSET_MASK;
        if l2_at == 0 {
            return Ok(0);
        }
        let mut cached = self.l2.borrow_mut();
        if cached.as_ref().is_none_or(|(at, _)| *at != l2_at) {
            let mut raw = vec![0u8; 1 << self.cluster_bits];
            self.file
                .read_at(l2_at, &mut raw)
                .map_err(|_| err(format!("an L2 table at {l2_at} runs past the file")))?;
            *cached = Some((l2_at, raw.chunks_exact(8).map(|c| be64(c, 0)).collect()));
        }
        let table = cached.as_ref().map(|(_, t)| t);
        Ok(table.and_then(|t| t.get((n % per_l2) as usize)).copied().unwrap_or(0))
    }

    /// Fills `out` from byte `off` of virtual cluster `n`.
    fn read_cluster(&self, n: u64, off: usize, out: &mut [u8]) -> Result<(), Error> {
        let entry = self.entry(n)?;
        let cluster = 1usize << self.cluster_bits;
        if entry & COMPRESSED != 0 {
            let mut cached = self.inflated.borrow_mut();
            if cached.as_ref().is_none_or(|(e, _)| *e != entry) {
                *cached = Some((entry, self.inflate(entry)?));
            }
            let data = cached.as_ref().map(|(_, d)| d.as_slice()).unwrap_or_default();
            out.copy_from_slice(&data[off..off + out.len()]);
            return Ok(());
        }
        let at = entry & OFFSET_MASK;
        if at == 0 || entry & ZERO != 0 || off + out.len() > cluster {
            out.fill(0);
            return Ok(());
        }
        self.file
            .read_at(at + off as u64, out)
            .map_err(|_| err(format!("a cluster at {at} runs past the file")))
    }

    /// The bytes of the compressed cluster `entry` describes.
    fn inflate(&self, entry: u64) -> Result<Vec<u8>, Error> {
        let x = 62 - (self.cluster_bits - 8);
        let at = entry & ((1u64 << x) - 1);
        let sectors = (entry & !COMPRESSED) >> x;
        let len = ((sectors + 1) * 512).saturating_sub(at & 511);
        let len = len.min(self.file.size().saturating_sub(at));
        let mut raw = vec![0u8; len as usize];
        self.file
            .read_at(at, &mut raw)
            .map_err(|_| err(format!("a compressed cluster at {at} runs past the file")))?;
        let cluster = 1usize << self.cluster_bits;
        let mut out = vec![0u8; cluster];
        let mut z = flate2::Decompress::new(false);
        let status = z.decompress(&raw, &mut out, flate2::FlushDecompress::Finish);
        match status {
            Ok(_) if z.total_out() as usize == cluster => Ok(out),
            _ => Err(err(format!("a compressed cluster at {at} does not inflate to a cluster"))),
        }
    }
}

impl<B: Bytes> Bytes for Qcow2<B> {
    fn size(&self) -> u64 {
        self.size
    }

    fn read_at(&self, at: u64, buf: &mut [u8]) -> std::io::Result<()> {
        if at.saturating_add(buf.len() as u64) > self.size {
            return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
        }
        let cluster = 1u64 << self.cluster_bits;
        let mut done = 0;
        while done < buf.len() {
            let pos = at + done as u64;
            let (n, off) = (pos / cluster, (pos % cluster) as usize);
            let take = (cluster as usize - off).min(buf.len() - done);
            self.read_cluster(n, off, &mut buf[done..done + take])
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            done += take;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prng::Prng;
    use std::process::Command;

    /// A raw disk of `len` bytes: random runs, zero runs and a repeated pattern.
    fn raw_disk(len: usize, seed: u64) -> Vec<u8> {
        let mut rng = Prng::new(seed);
        let mut out = vec![0u8; len];
        let mut at = 0;
        while at < len {
            let run = rng.range(1, 300_000).min(len - at);
            match rng.below(3) {
                0 => out[at..at + run].copy_from_slice(&rng.bytes(run)),
                1 => {}
                _ => out[at..at + run].iter_mut().enumerate().for_each(|(i, b)| *b = i as u8),
            }
            at += run;
        }
        out
    }

    fn read_all<B: Bytes>(q: &Qcow2<B>) -> Vec<u8> {
        let mut out = vec![0u8; q.size() as usize];
        // In uneven pieces, across cluster ends.
        let mut at = 0;
        let mut step = 777;
        while at < out.len() {
            let n = step.min(out.len() - at);
            q.read_at(at as u64, &mut out[at..at + n]).unwrap();
            at += n;
            step = step * 3 % 200_003 + 1;
        }
        out
    }

    /// Images made by QEMU's own `qemu-img` (Debian's qemu-utils) read back as the raw
    /// disk they were made from: each cluster size, version 2 and 3, compressed or not.
    #[test]
    fn qemu_images_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let raw = raw_disk(5 << 20, 50);
        let raw_path = dir.path().join("disk.raw");
        std::fs::write(&raw_path, &raw).unwrap();
        for (i, args) in [
            &["-o", "cluster_size=65536"][..],
            &["-c"],
            &["-o", "cluster_size=512"],
            &["-o", "cluster_size=2M", "-c"],
            &["-o", "compat=0.10"],
        ]
        .iter()
        .enumerate()
        {
            let out = dir.path().join(format!("disk{i}.qcow2"));
            let status = Command::new("qemu-img")
                .args(["convert", "-f", "raw", "-O", "qcow2"])
                .args(*args)
                .arg(&raw_path)
                .arg(&out)
                .status()
                .expect("qemu-img (Debian's qemu-utils) runs");
            assert!(status.success());
            let file = std::fs::File::open(&out).unwrap();
            assert!(is_qcow2(&file));
            let q = Qcow2::open(&file).unwrap();
            assert_eq!(q.size(), raw.len() as u64);
            assert!(read_all(&q) == raw, "{args:?}");
        }
        // An image over a backing file is refused.
        let base = dir.path().join("disk0.qcow2");
        let over = dir.path().join("over.qcow2");
        let status = Command::new("qemu-img")
            .args(["create", "-f", "qcow2", "-F", "qcow2", "-b"])
            .arg(&base)
            .arg(&over)
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
        let file = std::fs::File::open(&over).unwrap();
        let e = Qcow2::open(&file).err().unwrap().to_string();
        assert!(e.contains("backing file"), "{e}");
    }

    #[test]
    fn damaged_images_do_not_panic() {
        let dir = tempfile::tempdir().unwrap();
        let raw_path = dir.path().join("disk.raw");
        std::fs::write(&raw_path, raw_disk(1 << 20, 51)).unwrap();
        let out = dir.path().join("disk.qcow2");
        let status = Command::new("qemu-img")
            .args(["convert", "-c", "-f", "raw", "-O", "qcow2", "-o", "cluster_size=4096"])
            .arg(&raw_path)
            .arg(&out)
            .status()
            .expect("qemu-img runs");
        assert!(status.success());
        let good = std::fs::read(&out).unwrap();
        let mut rng = Prng::new(52);
        for _ in 0..400 {
            let mut bad = good.clone();
            for _ in 0..rng.range(1, 10) {
                let at = if rng.chance(50) { rng.below(112) } else { rng.below(bad.len()) };
                bad[at] = rng.next_u64() as u8;
            }
            let bad = bad.as_slice();
            let Ok(q) = Qcow2::open(&bad) else { continue };
            let mut buf = vec![0u8; 65536];
            let mut at = 0;
            while at < q.size().min(1 << 22) {
                let n = (q.size() - at).min(buf.len() as u64) as usize;
                let _ = q.read_at(at, &mut buf[..n]);
                at += n as u64;
            }
        }
    }
}
