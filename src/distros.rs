//! The Kubernetes distributions kresidue knows, as data: for each, where its node keeps
//! kubelet's dir, the pod logs, its containerd (root, state, socket, configuration) and its
//! datastore, and the configuration files that move them. A new distribution is one row of
//! [`DISTROS`] (and its test); `sites::places` reads the rows against a node, the way the
//! runtimes' own configurations are read. Facts, with their upstream sources, are in
//! `docs/NODE-LAYOUT.md` (Distributions).

use crate::runtimes::containerd::SPEC as CONTAINERD;

/// A setting in a configuration file that moves a place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    /// A top-level key of a YAML file of flags (k3s's and RKE2's `config.yaml`), then of
    /// each `*.yaml` and `*.yml` of its drop-in dir in name order, a later one winning.
    Yaml {
        /// The file, a node path.
        file: &'static str,
        /// Its drop-in dir, a node path.
        dropins: Option<&'static str>,
        /// The key (a flag's name without its dashes).
        key: &'static str,
    },
    /// A command-line flag in a file: a systemd unit's `ExecStart`, an args file (one
    /// flag a line); `--flag=value` or `--flag value`, `${VAR}` expanded from the row's
    /// [`Distro::vars`].
    Flag {
        /// The file, a node path.
        file: &'static str,
        /// The flag, with its dashes.
        flag: &'static str,
    },
}

impl Setting {
    /// The file it is in.
    pub fn file(self) -> &'static str {
        match self {
            Setting::Yaml { file, .. } | Setting::Flag { file, .. } => file,
        }
    }
}

/// A place of a distribution: a node path (under [`DATA`] when it starts with it), and the
/// settings that move it, the first that names one winning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    /// Where it is by default.
    pub at: &'static str,
    /// What moves it.
    pub moved_by: &'static [Setting],
}

/// The prefix of a place under the distribution's data dir ([`Distro::data`]).
pub const DATA: &str = "{data}";

impl Place {
    /// A place nothing moves.
    pub const fn at(at: &'static str) -> Place {
        Place { at, moved_by: &[] }
    }
}

/// A containerd a distribution runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Containerd {
    /// Its root.
    pub root: Place,
    /// Its state dir.
    pub state: Place,
    /// Its CRI socket, when it is kubelet's runtime (a distribution's own system
    /// containerd is not).
    pub socket: Option<Place>,
    /// Its `config.toml`, which may name another root and state; a node path.
    pub config: Option<&'static str>,
    /// Its name in reports when it is not kubelet's but the distribution's own (its
    /// containers are the distribution's services, which CRI does not list).
    pub system: Option<&'static str>,
}

/// What a distribution's data dir is and what moves it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataDir {
    /// Where it is by default.
    pub default: &'static str,
    /// What moves it, the first setting that names one winning.
    pub moved_by: &'static [Setting],
}

/// One distribution's node layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Distro {
    /// Its name, as the summary and `-v` give it.
    pub name: &'static str,
    /// Paths whose presence says a node is of this distribution (besides its data dir);
    /// none for the default layout, always looked at.
    pub markers: &'static [&'static str],
    /// The dir most of its places are under.
    pub data: Option<DataDir>,
    /// The values of `${VAR}` in its settings' files.
    pub vars: &'static [(&'static str, &'static str)],
    /// kubelet's root dir.
    pub kubelet: Place,
    /// The pod log dir.
    pub pod_logs: Place,
    /// The containerds it runs: kubelet's, and any of its own system's.
    pub containerds: &'static [Containerd],
    /// Its etcd data dirs and snapshot dirs.
    pub etcd: &'static [Place],
    /// Its kine SQLite databases (`state.db`; its log `state.db-wal` beside it).
    pub kine: &'static [Place],
    /// Its dqlite data dirs (raft log segments and snapshots of kine's database).
    pub dqlite: &'static [Place],
    /// The CRI sockets of the other runtimes kubelet may use on it (k3s's `--docker`
    /// mode: cri-dockerd's), as node paths.
    pub other_sockets: &'static [&'static str],
    /// Where it keeps copies of its earlier versions' data (MicroK8s's snap revisions).
    pub old_copies: Option<OldCopies>,
}

/// The dirs of a distribution's earlier versions, kept beside the current one: every dir
/// of `parent` but those of `keep` and the one the symlink `current` in it points to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OldCopies {
    /// The dir that holds them, a node path.
    pub parent: &'static str,
    /// The symlink in `parent` to the current version's dir.
    pub current: &'static str,
    /// The dirs of `parent` that are no earlier version's.
    pub keep: &'static [&'static str],
}

/// containerd at its own defaults ([`crate::runtimes::containerd`]).
const UPSTREAM_CONTAINERD: Containerd = Containerd {
    root: Place::at(CONTAINERD.dirs.root),
    state: Place::at(match CONTAINERD.dirs.state {
        Some(state) => state,
        None => CONTAINERD.dirs.root,
    }),
    socket: Some(Place::at(CONTAINERD.endpoints[0])),
    config: Some(CONTAINERD.dirs.config[0]),
    system: None,
};

/// The default layout (kubeadm's, and any node that keeps the upstream defaults).
pub const KUBEADM: Distro = Distro {
    name: "kubeadm",
    markers: &[],
    data: None,
    vars: &[],
    kubelet: Place::at("/var/lib/kubelet"),
    pod_logs: Place::at("/var/log/pods"),
    containerds: &[UPSTREAM_CONTAINERD],
    etcd: &[Place::at("/var/lib/etcd")],
    kine: &[],
    dqlite: &[],
    other_sockets: &[],
    old_copies: None,
};

/// k3s's data dir, and its `data-dir` setting: the config file and its drop-ins.
const K3S_DATA: DataDir = DataDir {
    default: "/var/lib/rancher/k3s",
    moved_by: &[Setting::Yaml {
        file: "/etc/rancher/k3s/config.yaml",
        dropins: Some("/etc/rancher/k3s/config.yaml.d"),
        key: "data-dir",
    }],
};
/// RKE2's, as k3s's.
const RKE2_DATA: DataDir = DataDir {
    default: "/var/lib/rancher/rke2",
    moved_by: &[Setting::Yaml {
        file: "/etc/rancher/rke2/config.yaml",
        dropins: Some("/etc/rancher/rke2/config.yaml.d"),
        key: "data-dir",
    }],
};

/// The containerd k3s and RKE2 run for kubelet, under their data dir.
const RANCHER_CONTAINERD: Containerd = Containerd {
    root: Place::at("{data}/agent/containerd"),
    state: Place::at("/run/k3s/containerd"),
    socket: Some(Place::at("/run/k3s/containerd/containerd.sock")),
    config: Some("{data}/agent/etc/containerd/config.toml"),
    system: None,
};

/// k3s and RKE2's embedded etcd and its snapshots.
const RANCHER_ETCD: [Place; 2] =
    [Place::at("{data}/server/db/etcd"), Place::at("{data}/server/db/snapshots")];

/// k3s's kine database (the single server's default datastore).
const K3S_KINE: Place = Place::at("{data}/server/db/state.db");

/// k3s's and RKE2's layout (RKE2 is k3s's code built as another program), but for
/// their names and data dirs.
const RANCHER: Distro = Distro {
    name: "",
    markers: &[],
    data: None,
    vars: &[],
    kubelet: Place::at("/var/lib/kubelet"),
    pod_logs: Place::at("/var/log/pods"),
    containerds: &[RANCHER_CONTAINERD],
    etcd: &RANCHER_ETCD,
    kine: &[],
    dqlite: &[],
    other_sockets: &["/run/k3s/cri-dockerd/cri-dockerd.sock"],
    old_copies: None,
};

/// MicroK8s's snap dirs.
const SNAP_COMMON: &str = "/var/snap/microk8s/common";
/// MicroK8s's args files.
const MICROK8S_KUBELET_ARGS: &str = "/var/snap/microk8s/current/args/kubelet";
/// MicroK8s's containerd args.
const MICROK8S_CONTAINERD_ARGS: &str = "/var/snap/microk8s/current/args/containerd";

/// k0s's `--data-dir`, in the systemd units `k0s install` writes.
const K0S_DATA: [Setting; 2] = [
    Setting::Flag { file: "/etc/systemd/system/k0scontroller.service", flag: "--data-dir" },
    Setting::Flag { file: "/etc/systemd/system/k0sworker.service", flag: "--data-dir" },
];

/// Every distribution, the default layout first.
pub const DISTROS: &[Distro] = &[
    KUBEADM,
    // k3s's default datastore (RKE2 has none but etcd).
    Distro { name: "k3s", data: Some(K3S_DATA), kine: &[K3S_KINE], ..RANCHER },
    Distro { name: "rke2", data: Some(RKE2_DATA), ..RANCHER },
    Distro {
        name: "microk8s",
        markers: &[SNAP_COMMON],
        data: None,
        vars: &[("SNAP_COMMON", SNAP_COMMON), ("SNAP_DATA", "/var/snap/microk8s/current")],
        kubelet: Place {
            at: "/var/snap/microk8s/common/var/lib/kubelet",
            moved_by: &[Setting::Flag { file: MICROK8S_KUBELET_ARGS, flag: "--root-dir" }],
        },
        pod_logs: Place::at("/var/log/pods"),
        containerds: &[Containerd {
            root: Place {
                at: "/var/snap/microk8s/common/var/lib/containerd",
                moved_by: &[Setting::Flag { file: MICROK8S_CONTAINERD_ARGS, flag: "--root" }],
            },
            state: Place {
                at: "/var/snap/microk8s/common/run/containerd",
                moved_by: &[Setting::Flag { file: MICROK8S_CONTAINERD_ARGS, flag: "--state" }],
            },
            socket: Some(Place {
                at: "/var/snap/microk8s/common/run/containerd.sock",
                moved_by: &[Setting::Flag { file: MICROK8S_CONTAINERD_ARGS, flag: "--address" }],
            }),
            config: Some("/var/snap/microk8s/current/args/containerd.toml"),
            system: None,
        }],
        etcd: &[],
        kine: &[],
        // k8s-dqlite's raft log and snapshots (`--storage-dir`).
        dqlite: &[Place::at("/var/snap/microk8s/current/var/kubernetes/backend")],
        other_sockets: &[],
        // snapd keeps earlier revisions' `SNAP_DATA` (credentials, certs, the datastore).
        old_copies: Some(OldCopies {
            parent: "/var/snap/microk8s",
            current: "current",
            keep: &["common"],
        }),
    },
    Distro {
        name: "k0s",
        markers: &[],
        data: Some(DataDir { default: "/var/lib/k0s", moved_by: &K0S_DATA }),
        vars: &[],
        kubelet: Place::at("{data}/kubelet"),
        pod_logs: Place::at("/var/log/pods"),
        containerds: &[Containerd {
            root: Place::at("{data}/containerd"),
            state: Place::at("/run/k0s/containerd"),
            socket: Some(Place::at("/run/k0s/containerd.sock")),
            config: Some("/etc/k0s/containerd.toml"),
            system: None,
        }],
        etcd: &[Place::at("{data}/etcd")],
        // With `--single` (or `storage.type: kine`).
        kine: &[Place::at("{data}/db/state.db")],
        dqlite: &[],
        other_sockets: &[],
        old_copies: None,
    },
    Distro {
        name: "talos",
        markers: &["/system/var/lib/containerd", "/etc/cri/containerd.toml"],
        data: None,
        vars: &[],
        kubelet: Place::at("/var/lib/kubelet"),
        pod_logs: Place::at("/var/log/pods"),
        containerds: &[
            // kubelet's, at containerd's defaults but for its config.
            Containerd { config: Some("/etc/cri/containerd.toml"), ..UPSTREAM_CONTAINERD },
            // Talos's own services' containerd.
            Containerd {
                root: Place::at("/system/var/lib/containerd"),
                state: Place::at("/system/run/containerd"),
                socket: None,
                config: None,
                system: Some("talos-system-containerd"),
            },
        ],
        etcd: &[Place::at("/var/lib/etcd")],
        kine: &[],
        dqlite: &[],
        other_sockets: &[],
        old_copies: None,
    },
    Distro {
        name: "bottlerocket",
        markers: &["/var/lib/bottlerocket"],
        data: None,
        vars: &[],
        kubelet: Place::at("/var/lib/kubelet"),
        pod_logs: Place::at("/var/log/pods"),
        containerds: &[
            UPSTREAM_CONTAINERD,
            // The host containers' containerd (the admin and control containers).
            Containerd {
                root: Place::at("/var/lib/host-containerd"),
                state: Place::at("/run/host-containerd"),
                socket: None,
                config: None,
                system: Some("bottlerocket-host-containerd"),
            },
        ],
        etcd: &[],
        kine: &[],
        dqlite: &[],
        other_sockets: &[],
        old_copies: None,
    },
];

impl Distro {
    /// The default CRI sockets of kubelet's runtime on it, as node paths.
    pub fn sockets(&self) -> impl Iterator<Item = &'static str> {
        let containerd = self.containerds.iter().filter_map(|c| c.socket).map(|p| p.at);
        containerd.chain(self.other_sockets.iter().copied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names are distinct, the default layout is first and always looked at, every other
    /// row says how it is recognised, and every path is absolute (or under the data dir,
    /// for a row that has one).
    #[test]
    fn rows_are_well_formed() {
        assert_eq!(DISTROS[0], KUBEADM);
        for (i, d) in DISTROS.iter().enumerate() {
            assert!(DISTROS[i + 1..].iter().all(|o| o.name != d.name), "{} twice", d.name);
            assert_eq!(i == 0, d.markers.is_empty() && d.data.is_none(), "{}", d.name);
            let mut places = vec![d.kubelet, d.pod_logs];
            places.extend(d.etcd.iter().chain(d.kine).chain(d.dqlite).copied());
            for c in d.containerds {
                places.extend([c.root, c.state]);
                places.extend(c.socket);
                places.extend(c.config.map(Place::at));
            }
            for p in places {
                let under_data = p.at.starts_with(DATA) && d.data.is_some();
                assert!(p.at.starts_with('/') || under_data, "{}: {}", d.name, p.at);
                for s in p.moved_by {
                    assert!(s.file().starts_with('/'), "{}: {s:?}", d.name);
                }
            }
        }
    }
}
