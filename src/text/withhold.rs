//! Secret material found in names, withheld from every path shown.
//!
//! The scan matches the names of the files and directories it walks (see `scan`); what
//! matched in a name (a fingerprinted value's form, a rule's match) is recorded here, for
//! the rest of the process. From then on every path made text ([`super::display_path`])
//! shows a component holding any of it as [`WITHHELD`], and so does every name taken from a
//! path ([`shown`]: a pod log's namespace, pod and container). So the finding at that name,
//! the errors of files below it and `clean`'s plan all name the place without the value.
//!
//! Names that come from node data or the runtime rather than a path (a pod's or a
//! container's name or id, an image's name, the runtime's version) are matched the same
//! way once the scan has them (`scan::withhold_names`), and every output withholds them
//! here in one pass over what it prints ([`names`], and [`prose`] for its messages).
//!
//! Only names hold recorded material: a handful on a node where any is found, none on most.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::RwLock;

/// What a path component holding secret material is shown as.
pub const WITHHELD: &str = "<withheld>";

/// The material found in names (each distinct once).
static FOUND: RwLock<Vec<Box<[u8]>>> = RwLock::new(Vec::new());
/// Whether anything was recorded: most runs never take the lock.
static ANY: AtomicBool = AtomicBool::new(false);
/// The names found to hold material themselves (each distinct once): see [`held_by`].
static NAMED: RwLock<Vec<Box<[u8]>>> = RwLock::new(Vec::new());

/// Records `material` (matched in a name) to be withheld from every path shown from now on.
pub fn withhold(material: &[u8]) {
    if material.is_empty() {
        return;
    }
    let mut found = FOUND.write().unwrap_or_else(|e| e.into_inner());
    if !found.iter().any(|m| **m == *material) {
        found.push(material.into());
    }
    ANY.store(true, Ordering::Release);
}

/// Records `material`, matched in `name` (a file's or directory's): withheld from every
/// path shown from now on, as [`withhold`] does, and `name` one that holds material itself.
pub fn withhold_in(name: &[u8], material: &[u8]) {
    withhold(material);
    let mut named = NAMED.write().unwrap_or_else(|e| e.into_inner());
    if !named.iter().any(|n| **n == *name) {
        named.push(name.into());
    }
}

/// True when `name` was found to hold material itself ([`withhold_in`]), whatever other
/// names were found: a finding's id withholds these names alone (`super::id_path`), so
/// that it is the same whichever names a scan's threads happen to match first.
pub fn held_by(name: &[u8]) -> bool {
    if !any() {
        return false;
    }
    let named = NAMED.read().unwrap_or_else(|e| e.into_inner());
    named.iter().any(|n| **n == *name)
}

/// True when any material was recorded by [`withhold`].
pub fn any() -> bool {
    ANY.load(Ordering::Acquire)
}

/// True when `text` holds material recorded by [`withhold`].
pub fn is_withheld(text: &[u8]) -> bool {
    if !ANY.load(Ordering::Acquire) {
        return false;
    }
    let found = FOUND.read().unwrap_or_else(|e| e.into_inner());
    found.iter().any(|m| memchr::memmem::find(text, m).is_some())
}

/// A name taken from a path (a pod log's namespace, pod or container), or [`WITHHELD`].
pub fn shown(name: &str) -> String {
    if is_withheld(name.as_bytes()) {
        WITHHELD.to_owned()
    } else {
        name.to_owned()
    }
}

/// Withholds, in place, each of `names` that holds recorded material (see [`shown`]).
pub fn names<'a>(names: impl IntoIterator<Item = &'a mut String>) {
    for name in names {
        if is_withheld(name.as_bytes()) {
            WITHHELD.clone_into(name);
        }
    }
}

/// Withholds, in place, each word (a run of text between spaces) of a message that holds
/// recorded material: a name a message quotes (`docker rm <id>`) is shown as a name is.
pub fn prose(text: &mut String) {
    if !ANY.load(Ordering::Acquire) || !text.split(' ').any(|w| is_withheld(w.as_bytes())) {
        return;
    }
    let words: Vec<&str> =
        text.split(' ').map(|w| if is_withheld(w.as_bytes()) { WITHHELD } else { w }).collect();
    *text = words.join(" ");
}
