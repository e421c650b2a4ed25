//! etcd's data dirs and backups (`member/snap/db`, `member/wal/`): every Secret of the
//! cluster, in plaintext when encryption at rest is off. Facts in `docs/NODE-LAYOUT.md`
//! (etcd).

use super::{Advice, Discovery, ScopeKind, Site, Unresolved};
use crate::finding::{Finding, SiteId};
use std::path::Path;

/// etcd's data dir as kubeadm sets it up.
pub const DEFAULT_ETCD_DIR: &str = "/var/lib/etcd";

/// etcd's data dirs: `--etcd-dir`, else the default one when it exists.
pub struct Etcd;

impl Site for Etcd {
    fn discover(&self, cx: &mut Discovery<'_>) {
        let kind = || ScopeKind::Site(SiteId::Etcd);
        if cx.layout.etcd.is_empty() {
            cx.push(Path::new(DEFAULT_ETCD_DIR), kind(), Unresolved::Quiet);
        }
        for p in cx.layout.etcd.clone() {
            cx.push(&p, kind(), Unresolved::Always);
        }
    }

    fn advice(&self, _f: &Finding, _cx: Advice<'_>) -> (String, String) {
        (
            "etcd holds Secrets unencrypted; kresidue never touches etcd".to_owned(),
            "enable encryption at rest (EncryptionConfiguration), then rewrite every Secret: kubectl get secrets -A -o json | kubectl replace -f -".to_owned(),
        )
    }
}
