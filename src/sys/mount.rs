//! The mount table (`/proc/self/mountinfo`): for `clean`, what is mounted below a pod dir
//! before anything there is touched; for the scan's walk, what a mount point it meets
//! below a scope is, decided before anything on that mount is touched ([`Table`]).
//!
//! The format is proc(5)'s: `id parent major:minor root mount-point options [optional
//! fields…] - fstype source super-options`, with space, tab, newline and backslash in
//! paths written as octal escapes (`\040`). A dozen lines of parsing; no crate for it is
//! both small and kept up.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

/// One mount.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    /// The mount's id (the first field; what `/proc/self/fdinfo/N` says as `mnt_id` of a
    /// descriptor on it).
    pub id: u64,
    /// The device of its filesystem (`st_dev` of its files).
    pub dev: u64,
    /// Where it is mounted, in this process's view.
    pub point: PathBuf,
    /// Its filesystem type (`tmpfs`, `ext4`, …).
    pub fstype: String,
    /// The dir of its filesystem mounted there: `/` for a whole filesystem, another path
    /// for a bind mount of part of one.
    pub root: PathBuf,
}

impl Mount {
    /// What is mounted, for a person: `tmpfs`, or `tmpfs (bind of /sub)`.
    pub fn describe(&self) -> String {
        if self.root == Path::new("/") {
            self.fstype.clone()
        } else {
            format!("{} (bind of {})", self.fstype, self.root.display())
        }
    }

    /// A whole tmpfs (not a bind mount of part of one): what kubelet mounts at a volume.
    pub fn is_whole_tmpfs(&self) -> bool {
        self.fstype == "tmpfs" && self.root == Path::new("/")
    }

    /// A FUSE or network filesystem: any call into it may wait on another process or
    /// machine for ever (in uninterruptible sleep, past `--timeout` and SIGTERM), so the
    /// scan never opens anything on one.
    pub fn is_remote(&self) -> bool {
        is_remote_type(&self.fstype)
    }
}

/// Filesystem types served by another process (FUSE) or over a network (see
/// [`Mount::is_remote`]).
pub fn is_remote_type(fstype: &str) -> bool {
    const NETWORK: &[&str] = &[
        "nfs",
        "nfs4",
        "cifs",
        "smb3",
        "smbfs",
        "9p",
        "ceph",
        "glusterfs",
        "lustre",
        "afs",
        "gfs2",
        "ocfs2",
        "beegfs",
        "gpfs",
        "coda",
        "ncpfs",
        "orangefs",
        "pvfs2",
        "davfs",
        "sshfs",
        "vboxsf",
        "mfs",
        "moosefs",
        "cvmfs",
        "quobyte",
        "wekafs",
    ];
    fstype.starts_with("fuse") || NETWORK.contains(&fstype.split('.').next().unwrap_or(""))
}

/// The mount table of one run, read once when first needed; later mounts are not in it.
#[derive(Debug, Default)]
pub struct Table(std::sync::OnceLock<(Vec<Mount>, Vec<usize>)>);

impl Table {
    /// A table with no mount in it: the view of a detached tree nothing is mounted on
    /// ([`super::RootDir::beneath_mounts`]).
    pub fn empty() -> Table {
        Table(std::sync::OnceLock::from((Vec::new(), Vec::new())))
    }

    /// The mounts, and the indexes of the FUSE and network ones among them.
    fn read(&self) -> &(Vec<Mount>, Vec<usize>) {
        self.0.get_or_init(|| {
            // An unreadable table is an empty one: every mount met is then left unread.
            let all = mounts().unwrap_or_default();
            let remote = (0..all.len()).filter(|&i| all[i].is_remote()).collect();
            (all, remote)
        })
    }

    fn mounts(&self) -> &[Mount] {
        &self.read().0
    }

    /// The mount on top at `point` (a path of this process's view), if any: the last one
    /// mounted there.
    pub fn at(&self, point: &Path) -> Option<&Mount> {
        self.mounts().iter().rev().find(|m| m.point == point)
    }

    /// The FUSE or network mount `path` is on or below, if any (the deepest).
    pub fn remote_over(&self, path: &Path) -> Option<&Mount> {
        let (all, remote) = self.read();
        remote
            .iter()
            .map(|&i| &all[i])
            .filter(|m| path.starts_with(&m.point))
            .max_by_key(|m| m.point.as_os_str().len())
    }
}

/// Reads this process's mount table.
pub fn mounts() -> std::io::Result<Vec<Mount>> {
    Ok(parse(&std::fs::read("/proc/self/mountinfo")?))
}

/// Parses mountinfo text; malformed lines are skipped.
pub fn parse(text: &[u8]) -> Vec<Mount> {
    text.split(|&b| b == b'\n').filter_map(parse_line).collect()
}

fn parse_line(line: &[u8]) -> Option<Mount> {
    let fields: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
    let number = |f: &[u8]| std::str::from_utf8(f).ok()?.parse::<u64>().ok();
    let id = number(fields.first()?)?;
    let (major, minor) = fields.get(2)?.split_at(fields[2].iter().position(|&b| b == b':')?);
    let dev = nix::sys::stat::makedev(number(major)?, number(&minor[1..])?);
    let root = fields.get(3)?;
    let point = fields.get(4)?;
    let dash = fields.iter().skip(6).position(|f| *f == b"-")? + 6;
    let fstype = fields.get(dash + 1)?;
    Some(Mount {
        id,
        dev,
        point: PathBuf::from(OsString::from_vec(unescape(point))),
        fstype: String::from_utf8_lossy(&unescape(fstype)).into_owned(),
        root: PathBuf::from(OsString::from_vec(unescape(root))),
    })
}

/// Undoes the kernel's octal escapes (`\040` → space).
fn unescape(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        let octal = s.get(i + 1..i + 4).filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (s[i], octal) {
            (b'\\', Some(d)) => {
                let v = d.iter().fold(0u32, |v, c| v * 8 + u32::from(c - b'0'));
                out.push(v as u8);
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

/// The mounts at or below `dir`, deepest last.
pub fn below<'a>(mounts: &'a [Mount], dir: &Path) -> Vec<&'a Mount> {
    mounts.iter().filter(|m| m.point.starts_with(dir)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &[u8] = b"\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
35 22 0:30 / /var/lib/kubelet/pods/u1/volumes/kubernetes.io~secret/db rw,relatime shared:20 - tmpfs tmpfs rw,size=1024k
36 22 8:1 /srv/x /var/lib/kubelet/pods/u1/volumes/a\\040b rw - ext4 /dev/sda1 rw
garbage line
37 22 0:31 / /no/dash rw
";

    #[test]
    fn parses_points_types_and_escapes() {
        let m = parse(SAMPLE);
        assert_eq!(m.len(), 3);
        assert_eq!(m[1].fstype, "tmpfs");
        assert_eq!(m[2].point, Path::new("/var/lib/kubelet/pods/u1/volumes/a b"));
        assert!(m[1].is_whole_tmpfs() && !m[2].is_whole_tmpfs());
        assert_eq!(m[2].describe(), "ext4 (bind of /srv/x)");
        assert_eq!((m[1].id, m[1].dev), (35, nix::sys::stat::makedev(0, 30)));
        let under = below(&m, Path::new("/var/lib/kubelet/pods/u1"));
        assert_eq!(under.len(), 2);
        assert!(below(&m, Path::new("/var/lib/kubelet/pods/u")).is_empty());
    }

    #[test]
    fn fuse_and_network_filesystems_are_remote() {
        for t in ["fuse", "fuseblk", "fuse.sshfs", "nfs", "nfs4", "cifs", "smb3", "9p", "ceph"] {
            assert!(is_remote_type(t), "{t}");
        }
        for t in ["tmpfs", "ext4", "xfs", "overlay", "btrfs", "proc", "nfsd"] {
            assert!(!is_remote_type(t), "{t}");
        }
    }

    #[test]
    fn bad_escapes_are_kept_as_text() {
        assert_eq!(unescape(b"a\\09z\\"), b"a\\09z\\");
        assert_eq!(unescape(b"\\134x"), b"\\x");
    }
}
