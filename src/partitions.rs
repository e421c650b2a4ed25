//! The partitions of a disk image: its GPT (UEFI spec, chapter 5: the header at LBA 1,
//! `EFI PART`, its CRC-32; the entries' array and its CRC-32) or its MBR (the four entries
//! at byte 446, `55 aa` at 510; extended partitions' chains of EBRs), read from the disk's
//! bytes (a raw file, or a qcow2 image's virtual disk). A disk with neither is one bare
//! filesystem. Every claim is checked against the disk's size: a damaged or hostile table
//! gives an [`Error`] or fewer partitions, never a panic nor an allocation it asks for.
//! Integers are little-endian.

use crate::sys::{le32, le64, Bytes};

/// Why a table could not be read. The message names offsets only.
pub use crate::sys::ReadError as Error;

fn err(msg: impl Into<String>) -> Error {
    Error::new("partitions", msg.into())
}

/// The most bytes of GPT entries read.
const MAX_ENTRIES_BYTES: u64 = 1 << 20;
/// The most logical partitions followed in an extended partition's chain.
const MAX_LOGICAL: usize = 128;
/// MBR partition types of an extended partition.
const EXTENDED: [u8; 3] = [0x05, 0x0f, 0x85];
/// The MBR type that protects a GPT.
const PROTECTIVE: u8 = 0xee;

/// What a partition is, as its table says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A GPT entry: its type GUID (as the spec writes it) and its name.
    Gpt {
        /// The type GUID, e.g. `0FC63DAF-8483-4772-8E79-3D69D8477DE4` (Linux data).
        type_guid: String,
        /// Its name.
        name: String,
    },
    /// An MBR entry (primary or logical): its type byte.
    Mbr {
        /// The type (0x83 Linux, 0x8e LVM, …).
        type_byte: u8,
    },
    /// No table: the whole disk.
    Whole,
}

/// A partition: its number (1 for the first, as Linux numbers them), where its bytes are
/// and what its table says it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partition {
    /// Its number.
    pub number: u32,
    /// Its first byte on the disk.
    pub start: u64,
    /// Its length in bytes.
    pub len: u64,
    /// What it is.
    pub kind: Kind,
}

/// The partitions of `disk`: its GPT's (tried with 512- and 4096-byte sectors), else its
/// MBR's, else the whole disk as one. Entries that lie outside the disk are left out, and
/// said in the errors.
pub fn read(disk: &dyn Bytes) -> (Vec<Partition>, Vec<Error>) {
    let mut errors = Vec::new();
    let mut mbr = [0u8; 512];
    let has_mbr = disk.read_at(0, &mut mbr).is_ok() && mbr[510..] == [0x55, 0xaa];
    for sector in [512u64, 4096] {
        match gpt(disk, sector) {
            Ok(Some(parts)) => return checked(disk, parts, errors),
            Ok(None) => {}
            Err(e) => errors.push(e),
        }
    }
    if !has_mbr {
        let whole = Partition { number: 0, start: 0, len: disk.size(), kind: Kind::Whole };
        return (vec![whole], errors);
    }
    let mut parts = Vec::new();
    for i in 0..4 {
        let e = &mbr[446 + 16 * i..462 + 16 * i];
        let (type_byte, first, count) = (e[4], le32(e, 8).unwrap_or(0), le32(e, 12).unwrap_or(0));
        if type_byte == 0 || count == 0 || type_byte == PROTECTIVE {
            continue;
        }
        let (start, len) = (u64::from(first) * 512, u64::from(count) * 512);
        if EXTENDED.contains(&type_byte) {
            logical(disk, start, len, &mut parts, &mut errors);
        } else {
            parts.push(Partition {
                number: i as u32 + 1,
                start,
                len,
                kind: Kind::Mbr { type_byte },
            });
        }
    }
    checked(disk, parts, errors)
}

/// The partitions inside `disk`'s bounds; the others said in `errors`.
fn checked(
    disk: &dyn Bytes,
    parts: Vec<Partition>,
    mut errors: Vec<Error>,
) -> (Vec<Partition>, Vec<Error>) {
    let size = disk.size();
    let (inside, outside): (Vec<_>, Vec<_>) =
        parts.into_iter().partition(|p| p.len > 0 && p.start.saturating_add(p.len) <= size);
    for p in outside {
        errors.push(err(format!(
            "partition {} ({} bytes at {}) lies outside the {size}-byte disk",
            p.number, p.len, p.start
        )));
    }
    (inside, errors)
}

/// The logical partitions of the extended partition at `base` (`len` bytes): a chain of
/// EBRs, each holding one logical partition (relative to itself) and the next EBR
/// (relative to `base`), numbered from 5.
fn logical(
    disk: &dyn Bytes,
    base: u64,
    len: u64,
    parts: &mut Vec<Partition>,
    errors: &mut Vec<Error>,
) {
    let mut at = base;
    let mut seen = Vec::new();
    while seen.len() < MAX_LOGICAL {
        if seen.contains(&at) || at < base || at >= base.saturating_add(len) {
            errors.push(err(format!("an extended partition's chain loops or leaves it at {at}")));
            return;
        }
        seen.push(at);
        let mut ebr = [0u8; 512];
        if disk.read_at(at, &mut ebr).is_err() || ebr[510..] != [0x55, 0xaa] {
            errors.push(err(format!("no extended boot record at {at}")));
            return;
        }
        let (one, two) = (&ebr[446..462], &ebr[462..478]);
        let (type_byte, first, count) =
            (one[4], le32(one, 8).unwrap_or(0), le32(one, 12).unwrap_or(0));
        if type_byte != 0 && count != 0 {
            let number = 5 + parts.iter().filter(|p| p.number >= 5).count() as u32;
            let start = at + u64::from(first) * 512;
            parts.push(Partition {
                number,
                start,
                len: u64::from(count) * 512,
                kind: Kind::Mbr { type_byte },
            });
        }
        let next = le32(two, 8).unwrap_or(0);
        if two[4] == 0 || next == 0 {
            return;
        }
        at = base + u64::from(next) * 512;
    }
    errors.push(err(format!("more than {MAX_LOGICAL} logical partitions; the rest not read")));
}

/// The GPT of `disk` with `sector`-byte sectors, when its header is there and valid.
fn gpt(disk: &dyn Bytes, sector: u64) -> Result<Option<Vec<Partition>>, Error> {
    let mut h = [0u8; 92];
    if disk.read_at(sector, &mut h).is_err() || &h[..8] != b"EFI PART" {
        return Ok(None);
    }
    let header_len = le32(&h, 12).unwrap_or(0) as usize;
    if !(92..=sector as usize).contains(&header_len) {
        return Err(err(format!("a GPT header of {header_len} bytes")));
    }
    let mut header = vec![0u8; header_len];
    disk.read_at(sector, &mut header).map_err(|_| err("the GPT header is cut short"))?;
    let stored = le32(&header, 16).unwrap_or(0);
    header[16..20].fill(0);
    if crc32fast::hash(&header) != stored {
        return Err(err(format!("the GPT header at {sector} fails its checksum")));
    }
    let entries_at = le64(&h, 72).unwrap_or(0).saturating_mul(sector);
    let (count, size) =
        (u64::from(le32(&h, 80).unwrap_or(0)), u64::from(le32(&h, 84).unwrap_or(0)));
    if size < 128 || size % 8 != 0 || count.saturating_mul(size) > MAX_ENTRIES_BYTES {
        return Err(err(format!("{count} GPT entries of {size} bytes")));
    }
    let mut entries = vec![0u8; (count * size) as usize];
    disk.read_at(entries_at, &mut entries)
        .map_err(|_| err(format!("the GPT entries at {entries_at} run past the disk")))?;
    if crc32fast::hash(&entries) != le32(&h, 88).unwrap_or(0) {
        return Err(err("the GPT entries fail their checksum"));
    }
    let mut parts = Vec::new();
    for (i, e) in entries.chunks_exact(size as usize).enumerate() {
        if e[..16].iter().all(|&b| b == 0) {
            continue;
        }
        let (first, last) = (le64(e, 32).unwrap_or(0), le64(e, 40).unwrap_or(0));
        if last < first {
            continue;
        }
        let name: Vec<u16> = e[56..128]
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .take_while(|&c| c != 0)
            .collect();
        let kind = Kind::Gpt { type_guid: guid(&e[..16]), name: String::from_utf16_lossy(&name) };
        let start = first.saturating_mul(sector);
        let len = (last - first + 1).saturating_mul(sector);
        parts.push(Partition { number: i as u32 + 1, start, len, kind });
    }
    Ok(Some(parts))
}

/// A GUID as the spec writes it: its first three fields little-endian.
fn guid(b: &[u8]) -> String {
    let hex = |r: &[u8]| r.iter().map(|x| format!("{x:02X}")).collect::<String>();
    let rev = |r: &[u8]| r.iter().rev().map(|x| format!("{x:02X}")).collect::<String>();
    format!(
        "{}-{}-{}-{}-{}",
        rev(&b[0..4]),
        rev(&b[4..6]),
        rev(&b[6..8]),
        hex(&b[8..10]),
        hex(&b[10..16])
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// A disk image of `size` bytes partitioned by util-linux's `sfdisk` (Debian's fdisk)
    /// from `script`.
    fn sfdisk(dir: &std::path::Path, size: u64, script: &str) -> Vec<u8> {
        use std::io::Write;
        let path = dir.join("disk.img");
        std::fs::File::create(&path).unwrap().set_len(size).unwrap();
        let mut c = Command::new("sfdisk")
            .arg("-q")
            .arg(&path)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("sfdisk (Debian's fdisk) runs");
        c.stdin.take().unwrap().write_all(script.as_bytes()).unwrap();
        assert!(c.wait().unwrap().success());
        std::fs::read(&path).unwrap()
    }

    #[test]
    fn gpt_and_mbr_made_by_sfdisk() {
        let dir = tempfile::tempdir().unwrap();
        let disk = sfdisk(
            dir.path(),
            64 << 20,
            "label: gpt\nstart=2048, size=20480, name=root\n\
             size=40960, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4\n",
        );
        let (parts, errors) = read(&disk.as_slice());
        assert!(errors.is_empty(), "{errors:?}");
        let got: Vec<_> = parts.iter().map(|p| (p.number, p.start / 512, p.len / 512)).collect();
        assert_eq!(got, [(1, 2048, 20480), (2, 22528, 40960)]);
        assert!(matches!(&parts[0].kind, Kind::Gpt { name, .. } if name == "root"));
        let linux = "0FC63DAF-8483-4772-8E79-3D69D8477DE4";
        assert!(matches!(&parts[1].kind, Kind::Gpt { type_guid, .. } if type_guid == linux));

        let disk = sfdisk(
            dir.path(),
            64 << 20,
            "label: dos\nd1 : start=2048, size=10240, type=83\n\
             d2 : start=12288, size=81920, type=5\nd5 : start=14336, size=8192, type=83\n\
             d6 : start=24576, size=16384, type=8e\n",
        );
        let (parts, errors) = read(&disk.as_slice());
        assert!(errors.is_empty(), "{errors:?}");
        let got: Vec<_> = parts.iter().map(|p| (p.number, p.len / 512, p.kind.clone())).collect();
        assert_eq!(
            got,
            [
                (1, 10240, Kind::Mbr { type_byte: 0x83 }),
                (5, 8192, Kind::Mbr { type_byte: 0x83 }),
                (6, 16384, Kind::Mbr { type_byte: 0x8e }),
            ]
        );
        // A bare filesystem: no table, the whole disk.
        let bare = vec![0u8; 1 << 20];
        let (parts, _) = read(&bare.as_slice());
        assert_eq!(parts, [Partition { number: 0, start: 0, len: 1 << 20, kind: Kind::Whole }]);
    }

    #[test]
    fn damaged_tables_do_not_panic() {
        let dir = tempfile::tempdir().unwrap();
        let gpt = sfdisk(dir.path(), 4 << 20, "label: gpt\nsize=2048\nsize=2048\n");
        let dos = sfdisk(
            dir.path(),
            4 << 20,
            "label: dos\nd1 : start=2048, size=4096, type=5\nd5 : start=2080, size=200\n\
             d6 : start=2400, size=200\n",
        );
        let mut rng = crate::prng::Prng::new(53);
        for good in [gpt, dos] {
            for _ in 0..300 {
                let mut bad = good.clone();
                for _ in 0..rng.range(1, 8) {
                    let at = if rng.chance(50) { rng.below(4096) } else { rng.below(2 << 20) };
                    bad[at] = rng.next_u64() as u8;
                }
                let (parts, _) = read(&bad.as_slice());
                for p in parts {
                    assert!(p.start + p.len <= bad.len() as u64);
                }
            }
        }
    }
}
