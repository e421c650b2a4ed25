//! Docker: its data root, its own containerd beneath it, and CRI through cri-dockerd
//! (docs/NODE-LAYOUT.md, Docker).

use super::{Clean, Dirs, Spec};

/// Docker.
pub const SPEC: Spec = Spec {
    name: "docker",
    cri_name: Some("docker"),
    endpoints: &["/var/run/cri-dockerd.sock"],
    tool: "docker",
    clean: Clean::Advise,
    records_tell_running: true,
    dirs: Dirs {
        root: "/var/lib/docker",
        state: Some("/run/docker"),
        config: &["/etc/docker/daemon.json"],
    },
};
