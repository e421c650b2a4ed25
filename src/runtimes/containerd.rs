//! containerd: kubeadm's and most distributions' CRI runtime (docs/NODE-LAYOUT.md,
//! containerd). Its own records say nothing of whether a container runs: CRI does.

use super::{Clean, Dirs, Spec};

/// containerd.
pub const SPEC: Spec = Spec {
    name: "containerd",
    cri_name: Some("containerd"),
    endpoints: &["/run/containerd/containerd.sock"],
    tool: "crictl",
    clean: Clean::RemoveExited,
    records_tell_running: false,
    dirs: Dirs {
        root: "/var/lib/containerd",
        state: Some("/run/containerd"),
        config: &["/etc/containerd/config.toml"],
    },
};
