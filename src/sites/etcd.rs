//! etcd's data dirs and backups (`member/snap/db`, `member/wal/`): every Secret of the
//! cluster, in plaintext when encryption at rest is off. Facts in `docs/NODE-LAYOUT.md`
//! (etcd).

use super::{Advice, Discovery, ScopeKind, Site, Unresolved};
use crate::bbolt::{self, Flow};
use crate::finding::{Finding, SecretsAtRest, SiteId};
use crate::sys::Bytes;
use std::collections::HashMap;

/// etcd's bucket of keys: each revision (`main` and `sub`, 8 bytes big-endian each, with
/// `_` between and a `t` after when it is a deletion) to the key's value then
/// (`server/storage/mvcc/revision.go`, `kvstore.go`).
const KEY_BUCKET: &[u8] = b"key";

/// The length of a revision key that marks a deletion (a tombstone).
const TOMBSTONE_LEN: usize = 18;

/// The most Secret keys counted (a cluster has some thousands); past them the counts are
/// marked partial.
const MAX_KEYS: usize = 1 << 20;

/// `mvccpb.KeyValue` (`api/mvccpb/kv.proto`), the fields read: the key and its value.
#[derive(Clone, PartialEq, prost::Message)]
struct KeyValue {
    #[prost(bytes = "vec", tag = "1")]
    key: Vec<u8>,
    #[prost(bytes = "vec", tag = "5")]
    value: Vec<u8>,
}

/// How many Secrets the etcd database (a bbolt file: `member/snap/db`, or a snapshot)
/// serves in plaintext and encrypted: each Secret key's newest revision, unless it is a
/// deletion, by its value's prefix (empty when it holds none); and what could not be read.
/// `None` when the file is not a bbolt file of etcd's (a log, a raft snapshot).
/// `stop` is asked before each page read.
pub fn secrets_at_rest(
    file: &dyn Bytes,
    stop: &dyn Fn() -> bool,
) -> Option<(SecretsAtRest, Vec<String>)> {
    let db = bbolt::Paged::open_until(file, stop).ok()?;
    let mut newest: HashMap<Vec<u8>, bool> = HashMap::new();
    let mut errors = Vec::new();
    let mut full = false;
    let walked = db.each(&[KEY_BUCKET], &mut |revision, value| {
        let Ok(kv) = <KeyValue as prost::Message>::decode(value) else {
            return Flow::Continue(());
        };
        if !kv.key.starts_with(super::kine::SECRETS.as_bytes()) {
            return Flow::Continue(());
        }
        if revision.len() == TOMBSTONE_LEN && revision.last() == Some(&b't') {
            newest.remove(&kv.key);
        } else if newest.len() < MAX_KEYS || newest.contains_key(&kv.key) {
            let encrypted = kv.value.starts_with(super::kine::ENCRYPTED);
            newest.insert(kv.key, encrypted);
        } else {
            full = true;
        }
        Flow::Continue(())
    });
    let whole = match walked {
        Ok(true) => !full,
        Ok(false) => return None,
        Err(e) => {
            errors.push(format!("etcd: {e}; Secrets past it are not counted"));
            false
        }
    };
    let mut counts = SecretsAtRest { partial: !whole, ..SecretsAtRest::default() };
    for (key, encrypted) in &newest {
        counts.add_key(&String::from_utf8_lossy(key), *encrypted);
    }
    Some((counts, errors))
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
