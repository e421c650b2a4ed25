//! etcd's data dirs and backups (`member/snap/db`, `member/wal/`): every Secret of the
//! cluster, in plaintext when encryption at rest is off. Facts in `docs/NODE-LAYOUT.md`
//! (etcd).

use super::{Advice, Discovery, ScopeKind, Site, Unresolved};
use crate::finding::{Finding, SiteId};

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
