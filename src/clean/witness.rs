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
//! A list older than `--min-age` is refused: a pod created after it was taken is missing
//! from it, and its pod dir, made after the list, is younger than the list.

use crate::cri::Live;
use crate::kubectl::ApiPod;

/// The API server's pods, checked against the runtime: the node they were checked for.
#[derive(Debug)]
pub struct Witness {
    pods: Vec<ApiPod>,
    node: String,
}

/// At most this many pods are named in a refusal; the rest are counted.
const NAMED: usize = 3;

impl Witness {
    /// Holds the API server's `pods` against the runtime's answer `live`: the node (given
    /// as `node_name`, else learned from the sandboxes both know, else `hostname`) and the
    /// runtime must agree, or the reason to refuse, in one line.
    pub fn check(
        pods: Vec<ApiPod>,
        live: &Live,
        node_name: Option<&str>,
        hostname: Option<&str>,
        endpoint: &str,
    ) -> Result<Witness, String> {
        let sandboxes: Vec<&str> = live.pods.keys().map(String::as_str).collect();
        let mut nodes: Vec<&str> = pods
            .iter()
            .filter(|p| sandboxes.iter().any(|uid| p.is(uid)))
            .map(|p| p.node.as_str())
            .collect();
        nodes.sort_unstable();
        nodes.dedup();
        if !sandboxes.is_empty() && nodes.is_empty() {
            return Err(format!(
                "none of the {} pods the runtime at {endpoint} has a sandbox for is in the API server's list (--pods): is it the runtime kubelet uses, and the list this cluster's? Nothing was removed",
                sandboxes.len()
            ));
        }
        if nodes.len() > 1 {
            return Err(format!(
                "the runtime's pods run on more than one node according to the API server ({}): is --pods this cluster's list? Nothing was removed",
                nodes.join(", ")
            ));
        }
        let node = match (node_name, nodes.first()) {
            (Some(given), Some(seen)) if !given.eq_ignore_ascii_case(seen) => {
                return Err(format!(
                    "the runtime's pods run on node {seen} according to the API server, not on --node-name {given}: nothing was removed"
                ));
            }
            (Some(given), _) => given.to_owned(),
            (None, Some(seen)) => (*seen).to_owned(),
            (None, None) => {
                // kubelet names its node after the hostname, lowercased, unless told.
                let host = hostname.map(str::to_ascii_lowercase).unwrap_or_default();
                if host.is_empty() || !pods.iter().any(|p| p.node.eq_ignore_ascii_case(&host)) {
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
            .filter(|p| !sandboxes.iter().any(|uid| p.is(uid)))
            .collect();
        if !unknown.is_empty() {
            let mut named: Vec<String> = unknown.iter().take(NAMED).map(|p| p.pod_ref()).collect();
            if unknown.len() > NAMED {
                named.push(format!("{} more", unknown.len() - NAMED));
            }
            return Err(format!(
                "the runtime at {endpoint} does not know {} pods the API server runs on node {node} ({}): is it the runtime kubelet uses? Nothing was removed",
                unknown.len(),
                named.join(", ")
            ));
        }
        Ok(Witness { pods, node })
    }

    /// The node the list was checked for.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The pod the API server lists for the pod dir or sandbox uid `uid`, if any.
    pub fn knows(&self, uid: &str) -> Option<&ApiPod> {
        self.pods.iter().find(|p| p.is(uid))
    }
}
