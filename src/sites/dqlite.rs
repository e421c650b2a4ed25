//! dqlite's data dir (MicroK8s's `k8s-dqlite`, the cluster's datastore): the raft log's
//! segments and the snapshots, each holding SQLite pages of kine's table, every Secret of
//! the cluster in them, in plaintext when encryption at rest is off. A snapshot is read
//! as the databases it holds (inflated when LZ4-compressed), a segment as the pages its
//! transactions wrote; each match is attributed to its row as kine's are
//! ([`super::kine::Index`]). The formats are [`crate::dqlite`]'s; facts in
//! `docs/NODE-LAYOUT.md` (dqlite).

use super::{Advice, Discovery, ScopeKind, Site, Unresolved};
use crate::finding::{Finding, SiteId};

/// The database k8s-dqlite keeps kine's table in.
pub const DATABASE: &str = "k8s";

/// The most a snapshot is inflated to in memory (the DaemonSet's pod has 256 MiB; raft
/// keeps two snapshots): the rest of a larger one is not read, and the errors say so.
pub const MAX_SNAPSHOT: u64 = 64 << 20;

/// The most of a larger snapshot searched as it inflates (etcd's largest quota, 8 GiB, is
/// kine's too): what lies past it is an `errors` entry.
pub const MAX_INFLATED: u64 = 8 << 30;

/// What a file of the data dir is, by its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A segment of the raft log: `<first>-<last>` (16 digits each) or `open-<n>`.
    Segment,
    /// A snapshot: `snapshot-<term>-<index>-<ms>` (its `.meta` is not one).
    Snapshot,
    /// Anything else (the node's identity, the cluster's addresses, its TLS key).
    Other,
}

impl Kind {
    /// What the file named `name` is.
    pub fn of(name: &[u8]) -> Kind {
        let digits = |s: &[u8]| !s.is_empty() && s.iter().all(u8::is_ascii_digit);
        if let Some(rest) = name.strip_prefix(b"snapshot-") {
            let parts: Vec<&[u8]> = rest.split(|&b| b == b'-').collect();
            if parts.len() == 3 && parts.iter().all(|p| digits(p)) {
                return Kind::Snapshot;
            }
            return Kind::Other;
        }
        if name.strip_prefix(b"open-").is_some_and(digits) {
            return Kind::Segment;
        }
        match name.split(|&b| b == b'-').collect::<Vec<_>>().as_slice() {
            [a, b] if a.len() == 16 && b.len() == 16 && digits(a) && digits(b) => Kind::Segment,
            _ => Kind::Other,
        }
    }
}

/// A snapshot's raft term and index, from its name (`snapshot-<term>-<index>-<ms>`): the
/// newer of two snapshots has the greater.
pub fn snapshot_index(name: &[u8]) -> Option<(u64, u64)> {
    let rest = name.strip_prefix(b"snapshot-")?;
    let mut parts = rest.split(|&b| b == b'-');
    let mut num = || std::str::from_utf8(parts.next()?).ok()?.parse::<u64>().ok();
    Some((num()?, num()?))
}

/// Whether the snapshot `name` is the newest complete one among `siblings` (the names of
/// its dir; raft writes a snapshot's `.meta` last, and one without it is incomplete): only
/// that one says what the datastore's Secrets are at rest.
pub fn is_newest(name: &[u8], siblings: &[std::ffi::OsString]) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let complete = |n: &[u8]| {
        let meta = [n, b".meta"].concat();
        siblings.iter().any(|s| s.as_bytes() == meta.as_slice())
    };
    let Some(mine) = snapshot_index(name).filter(|_| complete(name)) else { return false };
    siblings
        .iter()
        .filter(|s| Kind::of(s.as_bytes()) == Kind::Snapshot && complete(s.as_bytes()))
        .filter_map(|s| snapshot_index(s.as_bytes()))
        .all(|other| other <= mine)
}

/// dqlite's data dirs: the distributions' that exist.
pub struct Dqlite;

impl Site for Dqlite {
    fn discover(&self, cx: &mut Discovery<'_>) {
        for dir in cx.places.dqlite.clone() {
            cx.push_once(&dir, ScopeKind::Site(SiteId::Dqlite), Unresolved::Quiet);
        }
    }

    fn advice(&self, _f: &Finding, _cx: Advice<'_>) -> (String, String) {
        (
            "the cluster's datastore (dqlite) holds Secrets unencrypted; kresidue never touches it"
                .to_owned(),
            "enable encryption at rest (MicroK8s: an EncryptionConfiguration in the API server's \
             args), then rewrite every Secret; the raft log and snapshots keep old values until \
             dqlite compacts them"
                .to_owned(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_by_name() {
        for (name, kind) in [
            ("0000000000000001-0000000000000931", Kind::Segment),
            ("open-12", Kind::Segment),
            ("snapshot-1-1024-26157806", Kind::Snapshot),
            ("snapshot-1-1024-26157806.meta", Kind::Other),
            ("metadata1", Kind::Other),
            ("cluster.key", Kind::Other),
            ("open-", Kind::Other),
            ("0000000000000001-93", Kind::Other),
        ] {
            assert_eq!(Kind::of(name.as_bytes()), kind, "{name}");
        }
    }

    #[test]
    fn the_newest_snapshot_by_term_and_index() {
        let names: Vec<std::ffi::OsString> = [
            "snapshot-1-1024-5",
            "snapshot-1-1024-5.meta",
            "snapshot-2-900-7",
            "snapshot-2-900-7.meta",
            "snapshot-3-1-9",
            "open-3",
        ]
        .iter()
        .map(Into::into)
        .collect();
        assert!(is_newest(b"snapshot-2-900-7", &names));
        assert!(!is_newest(b"snapshot-1-1024-5", &names));
        // One without its .meta is incomplete: neither newest nor in the way.
        assert!(!is_newest(b"snapshot-3-1-9", &names));
        assert_eq!(snapshot_index(b"snapshot-1-1024-5"), Some((1, 1024)));
    }
}
