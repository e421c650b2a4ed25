//! Pod logs (`/var/log/pods/<namespace>_<pod>_<uid>/<container>/<n>.log`, rotated copies,
//! `.gz`): what an app printed, in the CRI log format. Facts in `docs/NODE-LAYOUT.md`
//! (pod logs); the format and the owner from the path are in [`crate::node::logs`].

use super::{Advice, Discovery, Owner, Ownership, Reading, ScopeKind, Site, Unresolved};
use crate::finding::{Category, Finding, SiteId};
use crate::node::logs::LogOwner;
use std::path::Path;
use std::sync::Arc;

/// The default pod log dir (kubelet's `podLogsRootDirectory`).
pub const DEFAULT_DIR: &str = "/var/log/pods";

/// The pod log dir.
pub struct PodLogs;

impl Site for PodLogs {
    fn ids(&self) -> &'static [SiteId] {
        &[SiteId::PodLog]
    }

    fn discover(&self, cx: &mut Discovery<'_>) {
        let dir = cx.layout.pod_logs.clone();
        cx.push(&dir, ScopeKind::Site(SiteId::PodLog), Unresolved::UnlessMissing);
    }

    fn reading(&self, _id: SiteId) -> Reading {
        Reading::LogContent
    }

    /// Printed by an app: in the log until it rotates out, and shipped wherever logs go.
    fn category(
        &self,
        _id: SiteId,
        _owner: Option<&Ownership>,
        _on_tmpfs: &mut dyn FnMut() -> bool,
    ) -> Category {
        Category::PodLog
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
