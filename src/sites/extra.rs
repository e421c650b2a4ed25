//! Site `other`: the paths given with `--path`, and the files of a pod dir outside its
//! Secret volumes and subPaths (found through [`super::kubelet`]'s pod scopes).

use super::{Advice, Discovery, ScopeKind, Site, Unresolved};
use crate::finding::{Finding, SiteId};

/// Extra paths and the rest of each pod dir.
pub struct Extra;

impl Site for Extra {
    fn discover(&self, cx: &mut Discovery<'_>) {
        for p in cx.layout.extra.clone() {
            cx.push(&p, ScopeKind::Site(SiteId::Other), Unresolved::Always);
        }
    }

    /// In a pod dir, as kubelet's; elsewhere, left to the user.
    fn advice(&self, f: &Finding, cx: Advice<'_>) -> (String, String) {
        super::kubelet::pod_dir_advice(f, cx).unwrap_or_else(super::by_hand)
    }
}
