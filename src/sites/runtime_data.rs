//! Sites `runtime-log` and `runtime-volume`: what a container runtime keeps of its
//! containers besides their layers and configs, found by the runtime's own family
//! ([`super::docker`], [`super::containers_storage`]) from its records: a container's log as the runtime
//! writes it (Docker's `containers/<id>/<id>-json.log`, containers/storage's
//! `userdata/ctr.log`), read as a pod log is (and reported as site `pod-log` when the
//! records name the container's pod), and a named volume's data (`volumes/<name>/_data`).

use super::{Advice, Discovery, Ownership, Site};
use crate::finding::{Category, Finding, SiteId};
use crate::node::other_runtimes::ContainerRecord;

/// The place of a log the runtime writes for `container`: a pod's log (site `pod-log`)
/// when its `record` names the pod, else a `runtime-log`; category `pod-log` either way.
pub fn log_of(container: &str, record: &ContainerRecord) -> Ownership {
    let site = if record.pod_uid.is_some() { SiteId::PodLog } else { SiteId::RuntimeLog };
    Ownership::of_record(site, Category::PodLog, container, record)
}

/// The runtimes' logs and volumes.
pub struct RuntimeData;

impl Site for RuntimeData {
    /// Nothing of its own: the runtimes' families push these scopes.
    fn discover(&self, _cx: &mut Discovery<'_>) {}

    /// As for the container's other residue; a log's secret was printed, so rotate it first.
    fn advice(&self, f: &Finding, cx: Advice<'_>) -> (String, String) {
        let (why, what) = super::runtime_advice(f, cx.live);
        match f.site {
            SiteId::RuntimeLog => (why, format!("rotate the secret (it was printed), then {what}")),
            _ => (why, what),
        }
    }
}
