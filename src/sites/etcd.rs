//! etcd's data dirs and backups (`member/snap/db`, `member/wal/`): every Secret of the
//! cluster, in plaintext when encryption at rest is off. Facts in `docs/NODE-LAYOUT.md`
//! (etcd).

use super::kine::Keys;
use super::{Advice, Discovery, ScopeKind, Site, Unresolved};
use crate::bbolt::{self, Flow};
use crate::finding::{DbRecord, Finding, RecordState, SecretsAtRest, SiteId};
use crate::sys::Bytes;

/// etcd's bucket of keys: each revision (`main` and `sub`, 8 bytes big-endian each, with
/// `_` between and a `t` after when it is a deletion) to the key's value then
/// (`server/storage/mvcc/revision.go`, `kvstore.go`).
const KEY_BUCKET: &[u8] = b"key";

/// The length of a revision key that marks a deletion (a tombstone).
const TOMBSTONE_LEN: usize = 18;

/// `mvccpb.KeyValue` (`api/mvccpb/kv.proto`), the fields read: the key and its value.
#[derive(Clone, PartialEq, prost::Message)]
struct KeyValue {
    #[prost(bytes = "vec", tag = "1")]
    key: Vec<u8>,
    #[prost(bytes = "vec", tag = "5")]
    value: Vec<u8>,
}

/// The most value ranges a [`Database`] keeps (16 bytes each); matches in values past
/// them are not attributed to their key.
const MAX_SPANS: usize = 1 << 21;

/// An etcd database (a bbolt file: `member/snap/db`, or a snapshot) read through its
/// bucket of keys, page by page: where each revision's value is in the file (to attribute
/// a match to its key and revision), and what the database serves.
pub struct Database {
    /// (file offset, length, entry) of each revision's value, in offset order.
    spans: Vec<(u64, u32, u32)>,
    /// (key, revision) of each entry.
    entries: Vec<(u32, i64)>,
    keys: Keys,
    /// Problems reading it (messages name pages and offsets only).
    pub errors: Vec<String>,
    whole: bool,
}

impl Database {
    /// Reads the bucket of keys of `file`, asking `stop` before each page read. `None`
    /// when the file is not a bbolt file of etcd's (a log, a raft snapshot).
    pub fn read(file: &dyn Bytes, stop: &dyn Fn() -> bool) -> Option<Database> {
        let db = bbolt::Paged::open_until(file, stop).ok()?;
        let mut out = Database {
            spans: Vec::new(),
            entries: Vec::new(),
            keys: Keys::default(),
            errors: Vec::new(),
            whole: true,
        };
        let walked = db.each_at(&[KEY_BUCKET], &mut |revision, value, at| {
            let Ok(kv) = <KeyValue as prost::Message>::decode(value) else {
                return Flow::Continue(());
            };
            let Some(main) = revision.get(..8).and_then(|b| b.try_into().ok()) else {
                return Flow::Continue(());
            };
            let rev = i64::from_be_bytes(main);
            let Some(key) = out.keys.intern(&kv.key) else { return Flow::Continue(()) };
            // Keys iterate in revision order: the last one seen is the newest.
            let tombstone = revision.len() == TOMBSTONE_LEN && revision.last() == Some(&b't');
            let k = out.keys.get_mut(key);
            (k.newest, k.deleted) = (rev, tombstone);
            k.encrypted = !tombstone && kv.value.starts_with(super::kine::ENCRYPTED);
            if let Some(at) = at.filter(|_| out.spans.len() < MAX_SPANS) {
                out.spans.push((at, value.len() as u32, out.entries.len() as u32));
                out.entries.push((key, rev));
            }
            Flow::Continue(())
        });
        match walked {
            Ok(true) => {}
            Ok(false) => return None,
            Err(e) => {
                out.errors.push(format!("etcd: {e}; keys past it are not read"));
                out.whole = false;
            }
        }
        out.spans.sort_by_key(|&(at, _, _)| at);
        Some(out)
    }

    /// How many Secrets it serves in plaintext and encrypted: each Secret key's newest
    /// revision, unless it is a deletion, by its value's prefix.
    pub fn secrets_at_rest(&self) -> SecretsAtRest {
        self.keys.secrets_at_rest(self.whole)
    }

    /// Attributes `f`, a match at its offset in the file, to the key and revision whose
    /// value holds it: the value served now, an earlier revision, or a deleted key's.
    pub fn attribute(&self, f: &mut Finding) {
        let i = self.spans.partition_point(|&(at, _, _)| at <= f.offset);
        let Some(&(at, len, e)) = i.checked_sub(1).map(|i| &self.spans[i]) else { return };
        if f.offset >= at + u64::from(len) {
            return;
        }
        let (key, revision) = self.entries[e as usize];
        let k = self.keys.get(key);
        let state = match () {
            _ if k.deleted => RecordState::Deleted,
            _ if revision < k.newest => RecordState::OldRevision,
            _ => RecordState::Current,
        };
        let record = DbRecord { key: Some(k.name.clone()), revision: Some(revision), state };
        super::kine::set_state(f, record, "etcd");
    }
}

/// etcd's data dirs: `--etcd-dir`, else kubeadm's and the distributions' that exist.
pub struct Etcd;

impl Site for Etcd {
    fn discover(&self, cx: &mut Discovery<'_>) {
        let kind = || ScopeKind::Site(SiteId::Etcd);
        for (p, named) in cx.places.etcd.clone() {
            let unresolved = if named { Unresolved::Always } else { Unresolved::Quiet };
            cx.push_once(&p, kind(), unresolved);
        }
    }

    fn advice(&self, _f: &Finding, _cx: Advice<'_>) -> (String, String) {
        (
            "etcd holds Secrets unencrypted; kresidue never touches etcd".to_owned(),
            "enable encryption at rest (EncryptionConfiguration), then rewrite every Secret: kubectl get secrets -A -o json | kubectl replace -f -".to_owned(),
        )
    }
}
