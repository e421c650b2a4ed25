//! CRI-O: its containers and images in containers/storage, its own configuration naming
//! the store's root (docs/NODE-LAYOUT.md, containers/storage).

use super::{Clean, Dirs, Spec};

/// CRI-O.
pub const SPEC: Spec = Spec {
    name: "cri-o",
    cri_name: Some("cri-o"),
    endpoints: &["/var/run/crio/crio.sock"],
    tool: "crictl",
    clean: Clean::Advise,
    records_tell_running: true,
    dirs: Dirs {
        root: "/var/lib/containers/storage",
        state: None,
        config: &["/etc/crio/crio.conf"],
    },
};
