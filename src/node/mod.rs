//! Parsers of what the node's daemons write: containerd's records, kubelet's pod-dir
//! naming and atomic writer, CRI logs, CRI-O's and Docker's records, and the streaming
//! JSON picker they share. No discovery here: [`crate::sites`] decides where to look.

pub mod containerd;
pub mod json;
pub mod kubelet;
pub mod logs;
pub mod other_runtimes;

use std::io;

/// The OS error text without the "(os error N)" suffix.
pub fn io_message(e: &io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_owned(),
        None => s,
    }
}
