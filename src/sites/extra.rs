//! Site `other`: the paths given with `--path`, the files of a pod dir outside its
//! Secret volumes and subPaths (found through [`super::kubelet`]'s pod scopes), and the
//! dirs a distribution keeps of its earlier versions (MicroK8s's snap revisions).

use super::{Advice, Discovery, Ownership, ScopeKind, Site, Unresolved};
use crate::finding::{Category, Finding, SiteId};

/// What an earlier version's dir is.
const OLD_COPY: &str = "an earlier version's copy of the distribution's data (an old snap \
    revision): its credentials, keys and datastore as they were then";

/// Extra paths and the rest of each pod dir.
pub struct Extra;

impl Site for Extra {
    fn discover(&self, cx: &mut Discovery<'_>) {
        // Once: a `--path` over an old copy leaves it to this scope (`walk::plan`).
        for p in cx.places.old_copies.clone() {
            let mut own = Ownership::new(SiteId::Other, Category::Other, None, None);
            own.note = Some(OLD_COPY);
            cx.push_once(&p, ScopeKind::Owned(own), Unresolved::Quiet);
        }
        for p in cx.layout.extra.clone() {
            cx.push(&p, ScopeKind::Site(SiteId::Other), Unresolved::Always);
        }
    }

    /// In a pod dir, as kubelet's; elsewhere, left to the user.
    fn advice(&self, f: &Finding, cx: Advice<'_>) -> (String, String) {
        super::kubelet::pod_dir_advice(f, cx).unwrap_or_else(super::by_hand)
    }
}
