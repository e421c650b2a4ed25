//! The second witness: the API server's list of pods (`--pods`), held against what the
//! runtime says before anything may be removed.
//!
//! "No sandbox" alone is no proof of death: kubelet mounts a pod's volumes before it asks
//! for a sandbox, so a pod stuck on a volume that will not attach has volumes and no
//! sandbox; and a runtime that is not kubelet's (another socket, a second runtime) has no
//! sandbox for any of the node's pods. So, before `clean --apply` removes anything:
//!
//! - a pod the API server lists (by uid, or a static pod by its mirror's
//!   `kubernetes.io/config.mirror` annotation) is never touched, whatever the runtime says;
//! - the node is the one the runtime's pods run on: every sandbox the runtime lists that
//!   the API server knows must be on one node (`--node-name`, when given, must be it), and
//!   the runtime must list at least one such sandbox if it lists any;
//! - the runtime must have a sandbox for every pod the API server says runs on that node
//!   (its status says its sandbox exists), or it is not the runtime kubelet uses.
//!
//! - every ready sandbox the runtime lists must be in the list (a list of one namespace, or
//!   of a selector, or of another cluster, is not the API server's word on this node).
//!
//! A pod created after the list was taken is missing from it; its pod dir, made after
//! the pod, was modified after the list was taken. So a pod dir modified at or after the
//! list's time is never touched ([`Witness::listed_at`]: the earlier of when the file was
//! written and the newest time the list itself records, so a copied file's fresh mtime
//! proves nothing). So an old list is safe: it only leaves more alone (and a pod that has
//! gone since it was taken makes the runtime check refuse: take it again).

use crate::cri::Live;
use crate::kubectl::{dns_name, ApiPod, PodList};

/// The API server's pods, checked against the runtime: the node they were checked for,
/// and when the list was taken at the latest.
#[derive(Debug)]
pub struct Witness {
    pods: Vec<ApiPod>,
    node: String,
    listed_at: i64,
}

/// At most this many pods are named in a refusal; the rest are counted.
const NAMED: usize = 3;

/// `pods` as `a/b, c/d, e/f and 4 more`.
fn named(pods: &[&ApiPod]) -> String {
    let mut out: Vec<String> = pods.iter().take(NAMED).map(|p| p.pod_ref()).collect();
    if pods.len() > NAMED {
        out.push(format!("{} more", pods.len() - NAMED));
    }
    out.join(", ")
}

impl Witness {
    /// Holds the API server's `list` against the runtime's answer `live`: the node (given
    /// as `node_name`, else learned from the sandboxes both know, else `hostname`) and the
    /// runtime must agree, or the reason to refuse, in one line. `read_at`: when the list
    /// was written (its file's mtime) or read (stdin), Unix seconds.
    pub fn check(
        list: PodList,
        live: &Live,
        node_name: Option<&str>,
        hostname: Option<&str>,
        endpoint: &str,
        read_at: i64,
    ) -> Result<Witness, String> {
        let PodList { pods, newest } = list;
        let known = |uid: &str| pods.iter().any(|p| p.is(uid));
        // A ready sandbox the list does not name: the list is not the whole cluster's (one
        // namespace, a selector), or the runtime not this cluster's node's.
        let unnamed: Vec<&str> = live
            .pods
            .iter()
            .filter(|(uid, s)| s.iter().any(|p| p.ready) && !known(uid))
            .map(|(uid, _)| uid.as_str())
            .collect();
        if !unnamed.is_empty() {
            return Err(format!(
                "the API server's list (--pods) does not name {} of the {} pods the runtime at {endpoint} runs: is it the runtime kubelet uses, and the whole list of this cluster's pods, just taken (kubectl get pods -A -o json, no selector)? Nothing was removed",
                unnamed.len(),
                live.pods.len()
            ));
        }
        let mut nodes: Vec<&str> = pods
            .iter()
            .filter(|p| live.pods.keys().any(|uid| p.is(uid)))
            .map(|p| p.node.as_str())
            .collect();
        nodes.sort_unstable();
        nodes.dedup();
        if nodes.len() > 1 {
            let shown: Vec<String> = nodes.iter().map(|n| dns_name(n)).collect();
            return Err(format!(
                "the runtime's pods run on more than one node according to the API server ({}): is --pods this cluster's list? Nothing was removed",
                shown.join(", ")
            ));
        }
        let on = |node: &str| pods.iter().any(|p| p.node.eq_ignore_ascii_case(node));
        let node = match (node_name, nodes.first()) {
            (Some(given), Some(seen)) if !given.eq_ignore_ascii_case(seen) => {
                return Err(format!(
                    "the runtime's pods run on node {} according to the API server, not on the node --node-name names: nothing was removed",
                    dns_name(seen)
                ));
            }
            (Some(given), None) if !on(given) => {
                return Err("no pod of the API server's list (--pods) runs on the node --node-name names: is it this node's name in the cluster? Nothing was removed".to_owned());
            }
            (Some(given), _) => given.to_owned(),
            (None, Some(seen)) => (*seen).to_owned(),
            (None, None) => {
                // kubelet names its node after the hostname, lowercased, unless told.
                let host = hostname.map(str::to_ascii_lowercase).unwrap_or_default();
                if host.is_empty() || !on(&host) {
                    return Err(
                        "cannot tell which node this is: the runtime has no pod the API server lists and no listed pod runs on a node of this hostname; pass --node-name NODE. Nothing was removed"
                            .to_owned(),
                    );
                }
                host
            }
        };
        let unknown: Vec<&ApiPod> = pods
            .iter()
            .filter(|p| p.has_sandbox && p.node.eq_ignore_ascii_case(&node))
            .filter(|p| !live.pods.keys().any(|uid| p.is(uid)))
            .collect();
        if !unknown.is_empty() {
            return Err(format!(
                "the runtime at {endpoint} does not know {} pods the API server runs on node {} ({}): is it the runtime kubelet uses, or is the list stale (take it again just before the run)? Nothing was removed",
                unknown.len(),
                dns_name(&node),
                named(&unknown)
            ));
        }
        // The list was taken no earlier than the newest time it records, and no later than
        // it was written: the earlier of the two, so a copied file's new mtime counts for
        // nothing.
        let listed_at = newest.map_or(read_at, |n| n.min(read_at));
        Ok(Witness { pods, node, listed_at })
    }

    /// The node the list was checked for.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// When the list was taken at the latest (Unix seconds): a pod created after it is
    /// not in it, and its pod dir is modified after it. A pod dir modified at or after
    /// this time may belong to such a pod, and is not touched.
    pub fn listed_at(&self) -> i64 {
        self.listed_at
    }

    /// The pod the API server lists for the pod dir or sandbox uid `uid`, if any.
    pub fn knows(&self, uid: &str) -> Option<&ApiPod> {
        self.pods.iter().find(|p| p.is(uid))
    }
}
