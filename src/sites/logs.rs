//! Pod logs (`/var/log/pods/<namespace>_<pod>_<uid>/<container>/<n>.log`, rotated copies,
//! `.gz`): what an app printed, in the CRI log format. Facts in `docs/NODE-LAYOUT.md`
//! (pod logs); the format and the owner from the path are in [`crate::node::logs`].

use super::{Advice, Discovery, Owner, ScopeKind, Site, Unresolved};
use crate::finding::{Finding, SiteId};
use crate::node::logs::LogOwner;
use crate::sys::Kind;
use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The default pod log dir (kubelet's `podLogsRootDirectory`).
pub const DEFAULT_DIR: &str = crate::distros::KUBEADM.pod_logs.at;

/// The pod log dir.
pub struct PodLogs;

impl Site for PodLogs {
    fn discover(&self, cx: &mut Discovery<'_>) {
        for dir in cx.places.pod_logs.clone() {
            cx.push_once(&dir, ScopeKind::Site(SiteId::PodLog), Unresolved::UnlessMissing);
        }
    }

    /// The pod and container the log's path names.
    fn file_owner(&self, id: SiteId, inner: &Path) -> Owner {
        Owner { log: LogOwner::of(inner).map(Arc::new), ..Owner::of(id) }
    }

    fn advice(&self, _f: &Finding, _cx: Advice<'_>) -> (String, String) {
        (
            "logs are never removed by kresidue".to_owned(),
            "rotate the secret (it was printed), then delete or truncate the log file".to_owned(),
        )
    }
}

/// Pod log entries that are symlinks (cri-dockerd links `<n>.log` to Docker's json-file log
/// of the container): one that resolves, inside the root, to a log a runtime's family
/// found from its records makes that log the linking pod's (site `pod-log`, the pod and
/// container its path names, where the records do not say); any other is never followed
/// (the walk skips it). Run once every family has discovered its scopes.
pub fn link_runtime_logs(cx: &mut Discovery<'_>) {
    // The runtimes' container dirs, where their logs are.
    let dirs: HashMap<PathBuf, usize> = cx
        .scopes
        .iter()
        .enumerate()
        .filter(|(_, s)| matches!(s.kind, ScopeKind::Container(_)))
        .map(|(i, s)| (s.rel.clone(), i))
        .collect();
    if dirs.is_empty() {
        return;
    }
    let dir = cx.layout.pod_logs.clone();
    for pod in cx.dirs(&dir) {
        for container in cx.dirs(&dir.join(&pod)) {
            let at = dir.join(&pod).join(&container);
            let Ok(rel) = super::resolve(cx.root, &at) else { continue };
            let entries = cx.root.list(&rel).unwrap_or_default();
            for (name, _) in entries.into_iter().filter(|(_, k)| *k == Kind::Symlink) {
                let Some(owner) = LogOwner::of(&Path::new(&pod).join(&container).join(&name))
                else {
                    continue;
                };
                // The link's target is a node path (an absolute one from the node's `/`).
                let Ok(to) = cx.root.read_link(&rel.join(&name)) else { continue };
                let Ok(target) = super::resolve(cx.root, &at.join(to)) else { continue };
                let (Some(parent), Some(file)) = (target.parent(), target.file_name()) else {
                    continue;
                };
                let Some(&i) = dirs.get(parent) else { continue };
                // The records' pod, when they name one, stays (kubelet's labels); else the
                // link's, with kubelet's name of the container: for each of its logs.
                if let ScopeKind::Container(c) = &mut cx.scopes[i].kind {
                    if !(c.layout.is_log)(file.as_bytes(), &c.id) {
                        continue;
                    }
                    let o = &mut c.log;
                    o.site = SiteId::PodLog;
                    if o.record.pod_uid.is_none() {
                        let r = &mut o.record;
                        r.pod_uid = Some(owner.uid.clone());
                        r.pod_namespace = Some(owner.namespace);
                        r.pod_name = Some(owner.pod);
                        r.name = Some(owner.container);
                        o.pod_uid = Some(owner.uid);
                    }
                }
            }
        }
    }
}
