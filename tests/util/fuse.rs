//! A FUSE filesystem that never answers (as root): mounted from `/dev/fuse` by hand, it
//! answers the kernel's `FUSE_INIT` and nothing else, so any lookup, getattr, opendir or
//! readdir on it waits for ever (in the kernel's killable wait: a stop signal the
//! process catches does not end it). What a FUSE server that hangs, or a network
//! filesystem whose server is gone, does to a process that touches it.
//!
//! The kernel protocol (`linux/fuse.h`): a request is a `fuse_in_header` (40 bytes: `u32
//! len, u32 opcode, u64 unique, u64 nodeid, u32 uid, u32 gid, u32 pid, u16 total_extlen,
//! u16 padding`) and its argument; a reply is a `fuse_out_header` (16 bytes: `u32 len, i32
//! error, u64 unique`) and its result. `FUSE_INIT`'s result is a `fuse_init_out` (64
//! bytes: `u32 major, u32 minor, u32 max_readahead, u32 flags, u16 max_background, u16
//! congestion_threshold, u32 max_write, u32 time_gran, u16 max_pages, u16 map_alignment,
//! u32 flags2, u32 max_stack_depth, u32 unused[6]`).

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

const FUSE_INIT: u32 = 26;
const IN_HEADER: usize = 40;
const INIT_OUT: usize = 64;

/// A mounted FUSE filesystem that never answers; unmounted on drop (the connection
/// aborted first, so whatever waits on it fails instead of waiting on).
pub struct HangingFuse {
    dir: PathBuf,
    dev: Option<File>,
}

impl HangingFuse {
    /// Mounts it at `dir` (created if missing) and answers `FUSE_INIT`. Panics when the
    /// mount fails (the caller checks it runs as root).
    pub fn mount(dir: &Path) -> HangingFuse {
        std::fs::create_dir_all(dir).unwrap();
        HangingFuse::mount_at(dir, "40000")
    }

    /// Mounts it over the regular file `file` (its root a regular file, as a bind mount
    /// of one file is) and answers `FUSE_INIT`.
    pub fn mount_file(file: &Path) -> HangingFuse {
        assert!(file.is_file(), "{}", file.display());
        HangingFuse::mount_at(file, "100000")
    }

    /// Mounts it at `dir`, its root of the octal mode type `rootmode`.
    fn mount_at(dir: &Path, rootmode: &str) -> HangingFuse {
        let dev = OpenOptions::new().read(true).write(true).open("/dev/fuse").expect("/dev/fuse");
        let opts = format!("fd={},rootmode={rootmode},user_id=0,group_id=0", dev.as_raw_fd());
        use nix::mount::MsFlags;
        nix::mount::mount(
            Some("kresidue-hang"),
            dir,
            Some("fuse"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some(opts.as_str()),
        )
        .unwrap_or_else(|e| panic!("mount fuse at {}: {e}", dir.display()));
        // From here the guard unmounts, whatever fails below.
        let mut fuse = HangingFuse { dir: dir.to_path_buf(), dev: Some(dev) };
        fuse.answer_init();
        fuse
    }

    /// Reads the kernel's `FUSE_INIT` (sent when the mount is made) and accepts it.
    fn answer_init(&mut self) {
        let dev = self.dev.as_mut().unwrap();
        // The kernel refuses reads into a buffer smaller than a request could be.
        let mut buf = vec![0u8; 1 << 20];
        let n = dev.read(&mut buf).expect("read FUSE_INIT");
        assert!(n >= IN_HEADER + 8, "a {n}-byte request");
        let u32_at = |i: usize| u32::from_ne_bytes(buf[i..i + 4].try_into().unwrap());
        assert_eq!(u32_at(4), FUSE_INIT, "the first request is FUSE_INIT");
        let unique = u64::from_ne_bytes(buf[8..16].try_into().unwrap());
        let (major, minor) = (u32_at(IN_HEADER), u32_at(IN_HEADER + 4));
        assert_eq!(major, 7, "FUSE protocol major version");
        let mut out = Vec::with_capacity(16 + INIT_OUT);
        out.extend_from_slice(&((16 + INIT_OUT) as u32).to_ne_bytes());
        out.extend_from_slice(&0i32.to_ne_bytes());
        out.extend_from_slice(&unique.to_ne_bytes());
        out.extend_from_slice(&7u32.to_ne_bytes()); // major
        out.extend_from_slice(&minor.min(31).to_ne_bytes()); // minor
        out.extend_from_slice(&0u32.to_ne_bytes()); // max_readahead
        out.extend_from_slice(&0u32.to_ne_bytes()); // flags: nothing asked for
        out.extend_from_slice(&0u16.to_ne_bytes()); // max_background
        out.extend_from_slice(&0u16.to_ne_bytes()); // congestion_threshold
        out.extend_from_slice(&4096u32.to_ne_bytes()); // max_write
        out.extend_from_slice(&1u32.to_ne_bytes()); // time_gran
        out.resize(16 + INIT_OUT, 0); // max_pages … unused: zero
        dev.write_all(&out).expect("answer FUSE_INIT");
    }
}

impl HangingFuse {
    /// How many requests the kernel has sent it since `FUSE_INIT` (each taken from the
    /// queue and left unanswered): how often anything asked the mounted filesystem.
    pub fn requests(&mut self) -> usize {
        use nix::fcntl::{fcntl, FcntlArg, OFlag};
        let dev = self.dev.as_mut().unwrap();
        fcntl(&*dev, FcntlArg::F_SETFL(OFlag::O_NONBLOCK)).expect("O_NONBLOCK");
        let mut buf = vec![0u8; 1 << 20];
        let mut n = 0;
        while dev.read(&mut buf).is_ok() {
            n += 1;
        }
        n
    }
}

impl Drop for HangingFuse {
    fn drop(&mut self) {
        // Closing the only descriptor of the connection aborts it: every waiting request
        // fails with ENOTCONN, and nothing new waits.
        drop(self.dev.take());
        let _ = nix::mount::umount2(&self.dir, nix::mount::MntFlags::MNT_DETACH);
    }
}
