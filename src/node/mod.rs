//! Parsers of what the node's daemons write: containerd's records, kubelet's pod-dir
//! naming and atomic writer, CRI logs, CRI-O's and Docker's records, and the streaming
//! JSON picker they share. No discovery here: [`crate::sites`] decides where to look.

pub mod containerd;
pub mod distro;
pub mod dpkg;
pub mod json;
pub mod kubelet;
pub mod logs;
pub mod other_runtimes;

use std::io;

/// Longest image name kept: a reference is at most 255 characters of repository, a tag of
/// 128 and a digest; a longer one names nothing (each finding in an image's layers shows
/// the names).
pub const MAX_NAME: usize = 512;

/// Records of one runtime file kept (containers of `containers.json`, `meta.db` or
/// `bolt_state.db`, images, snapshots): a node runs a few hundred containers and holds a
/// few thousand layers, so this bounds what a crafted file of tiny records holds. Past it
/// the file's reader says so (an `errors` entry), and what the unread records would have
/// named is unknown, never gone.
pub const MAX_RECORDS: usize = 16_384;

/// The OS error text without the "(os error N)" suffix.
pub fn io_message(e: &io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_owned(),
        None => s,
    }
}
