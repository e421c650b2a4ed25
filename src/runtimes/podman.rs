//! Podman: no CRI server; its containers and images in containers/storage, whose
//! `storage.conf` names the root, and whether each runs in its state database
//! (docs/NODE-LAYOUT.md, containers/storage).

use super::{Clean, Dirs, Spec};

/// Podman.
pub const SPEC: Spec = Spec {
    name: "podman",
    cri_name: None,
    endpoints: &[],
    tool: "podman",
    clean: Clean::Advise,
    records_tell_running: true,
    dirs: Dirs {
        root: "/var/lib/containers/storage",
        state: None,
        config: &["/etc/containers/storage.conf"],
    },
};
