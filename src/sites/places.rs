//! Where this node keeps what the site families look at: the places of every distribution
//! of [`crate::distros::DISTROS`] found on it, moved by their settings, and those the user
//! named, which replace them. Worked out once per discovery ([`Places::of`]).

use super::{resolve, Discovery, Layout, PlaceKind};
use crate::distros::{Distro, OldCopies, Place, Setting, DATA, DISTROS, KUBEADM};
use crate::node::distro::{flag_value, yaml_scalar};
use crate::runtimes::{Keeper, Runtime};
use std::path::{Path, PathBuf};

/// The largest configuration file read for a setting.
const MAX_CONFIG: u64 = 1 << 20;

/// The most drop-in files read of one dir.
const MAX_DROPINS: usize = 256;

/// A containerd to scan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerdAt {
    /// Its root, a node path.
    pub root: PathBuf,
    /// Its state dir, a node path.
    pub state: PathBuf,
    /// Who named the root, when someone did (missing is then an error).
    pub named_by: Option<String>,
    /// Its `config.toml`, which may move root and state, unless both are given.
    pub config: Option<PathBuf>,
    /// Whether the state was given (its `config.toml` does not move it then).
    pub state_given: bool,
    /// Whose records its containers are: kubelet's containerd's, or the distribution's
    /// own system containerd's.
    pub keeper: Keeper,
}

/// A distribution found on the node, and the dir its data is in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// Its name.
    pub name: &'static str,
    /// Its data dir, a node path, when it has one.
    pub data: Option<PathBuf>,
}

/// Where to look, as the distributions found and the options say.
#[derive(Clone, Debug, Default)]
pub struct Places {
    /// The distributions found (the default layout first, always).
    pub distros: Vec<Found>,
    /// kubelet's root dirs.
    pub kubelet: Vec<PathBuf>,
    /// The pod log dirs.
    pub pod_logs: Vec<PathBuf>,
    /// The containerds.
    pub containerds: Vec<ContainerdAt>,
    /// etcd's data dirs and backups, and whether each was named (missing is then an
    /// error).
    pub etcd: Vec<(PathBuf, bool)>,
    /// kine's SQLite databases (`state.db`).
    pub kine: Vec<PathBuf>,
    /// dqlite's data dirs.
    pub dqlite: Vec<PathBuf>,
    /// The dirs of the distributions' earlier versions ([`crate::distros::OldCopies`]).
    pub old_copies: Vec<PathBuf>,
}

/// Adds `p` to `list` unless it is there.
fn add(list: &mut Vec<PathBuf>, p: PathBuf) {
    if !list.contains(&p) {
        list.push(p);
    }
}

impl Places {
    /// The places of the node under `cx`'s root: the distributions found, each place
    /// moved by its settings, the options' places replacing theirs.
    pub fn of(cx: &mut Discovery<'_>) -> Places {
        let layout: &Layout = cx.layout;
        let mut out = Places::default();
        if let Some((kind, node)) = &layout.only {
            let node = node.clone();
            match kind {
                PlaceKind::Kubelet => out.kubelet.push(node),
                PlaceKind::PodLogs => out.pod_logs.push(node),
                PlaceKind::ContainerdRoot => out.containerds.push(ContainerdAt {
                    root: node,
                    // Its state is a tmpfs of its own, not beneath its root's mount.
                    state: PathBuf::new(),
                    named_by: None,
                    config: None,
                    state_given: true,
                    keeper: Runtime::Containerd.into(),
                }),
            }
            return out;
        }
        for d in DISTROS {
            let Some(found) = found(cx, d) else { continue };
            let default = *d == KUBEADM;
            let at = |cx: &mut Discovery<'_>, p: &Place| place(cx, d, &found, p).map(|(p, _)| p);
            // A dir a setting names that is not there is an `errors` entry.
            let named =
                |cx: &mut Discovery<'_>, p: &Place, what: &str| match place(cx, d, &found, p) {
                    Some((dir, Some(by))) => {
                        cx.runtime_root(&format!("{}'s {what}", d.name), dir, Some(&by))
                    }
                    other => other.map(|(dir, _)| dir),
                };
            if !layout.kubelet_dir_explicit {
                if default {
                    add(&mut out.kubelet, layout.kubelet_dir.clone());
                } else if let Some(k) = named(cx, &d.kubelet, "kubelet dir") {
                    add(&mut out.kubelet, k);
                }
            }
            if !layout.pod_logs_explicit {
                if let Some(p) = named(cx, &d.pod_logs, "pod log dir") {
                    add(&mut out.pod_logs, p);
                }
            }
            if !layout.containerd_root_explicit {
                for c in d.containerds {
                    let root = place(cx, d, &found, &c.root);
                    let (Some((root, named_by)), Some(state)) = (root, at(cx, &c.state)) else {
                        continue;
                    };
                    let config = c.config.and_then(|c| expand(&found, c)).map(PathBuf::from);
                    let state_given = default && layout.containerd_state_explicit;
                    let state = if state_given { layout.containerd_state.clone() } else { state };
                    let keeper = c.system.map_or(Runtime::Containerd.into(), Keeper::System);
                    let c = ContainerdAt { root, state, named_by, config, state_given, keeper };
                    match out.containerds.iter_mut().find(|o| o.root == c.root) {
                        // The distribution's own config, not the default one (Talos's
                        // `/etc/cri/containerd.toml`), unless an option named it.
                        Some(o) if !default && o.named_by.is_none() => o.config = c.config,
                        Some(_) => {}
                        None => out.containerds.push(c),
                    }
                }
            }
            if layout.etcd.is_empty() {
                for e in d.etcd {
                    if let Some(p) = at(cx, e) {
                        if !out.etcd.iter().any(|(o, _)| *o == p) {
                            out.etcd.push((p, false));
                        }
                    }
                }
            }
            for k in d.kine {
                if let Some(p) = at(cx, k) {
                    add(&mut out.kine, p);
                }
            }
            for q in d.dqlite {
                if let Some(p) = at(cx, q) {
                    add(&mut out.dqlite, p);
                }
            }
            if let Some(old) = d.old_copies {
                out.old_copies.extend(old_copies(cx, &old));
            }
            out.distros.push(found);
        }
        if layout.kubelet_dir_explicit {
            out.kubelet.push(layout.kubelet_dir.clone());
        }
        if layout.pod_logs_explicit {
            out.pod_logs.push(layout.pod_logs.clone());
        }
        if layout.containerd_root_explicit {
            out.containerds.push(ContainerdAt {
                root: layout.containerd_root.clone(),
                state: layout.containerd_state.clone(),
                named_by: Some("--containerd-root".to_owned()),
                config: KUBEADM.containerds[0]
                    .config
                    .filter(|_| !layout.containerd_state_explicit)
                    .map(PathBuf::from),
                state_given: layout.containerd_state_explicit,
                keeper: Runtime::Containerd.into(),
            });
        }
        out.etcd.extend(layout.etcd.iter().map(|p| (p.clone(), true)));
        out
    }

    /// The distributions found, but for the default layout, by name.
    pub fn distribution_names(&self) -> Vec<String> {
        let named = self.distros.iter().filter(|d| d.name != KUBEADM.name);
        named.map(|d| d.name.to_owned()).collect()
    }

    /// What was found, a line each (`-v`): each distribution (with its data dir), then
    /// each place that is there.
    pub fn lines(&self, root: &crate::sys::RootDir) -> Vec<String> {
        let shown = |p: &Path| crate::text::display_path(p.as_os_str());
        let here = |p: &Path| resolve(root, p).is_ok();
        let mut lines = Vec::new();
        for d in self.distros.iter().filter(|d| d.name != KUBEADM.name) {
            let data = d.data.as_deref().map(|p| format!(": data dir {}", shown(p)));
            lines.push(format!("distribution {}{}", d.name, data.unwrap_or_default()));
        }
        let mut place = |what: &str, p: &Path| {
            if here(p) {
                lines.push(format!("{what} {}", shown(p)));
            }
        };
        self.kubelet.iter().for_each(|p| place("kubelet dir", p));
        self.pod_logs.iter().for_each(|p| place("pod log dir", p));
        for c in &self.containerds {
            place("containerd root", &c.root);
            place("containerd state", &c.state);
        }
        self.etcd.iter().for_each(|(p, _)| place("etcd dir", p));
        self.kine.iter().for_each(|p| place("kine database", p));
        self.dqlite.iter().for_each(|p| place("dqlite data dir", p));
        self.old_copies.iter().for_each(|p| place("an earlier version's dir", p));
        lines
    }
}

/// The dirs of `old` on this node: every dir of its parent (not a symlink) but those it
/// keeps and the current one.
fn old_copies(cx: &mut Discovery<'_>, old: &OldCopies) -> Vec<PathBuf> {
    let parent = Path::new(old.parent);
    let current =
        resolve(cx.root, parent).and_then(|rel| cx.root.read_link(&rel.join(old.current)));
    let current = current.ok().map(PathBuf::from);
    let current = current.as_deref().and_then(Path::file_name).map(std::ffi::OsStr::to_owned);
    let dirs = cx.dirs(parent).into_iter();
    let old_ones = dirs.filter(|n| !old.keep.iter().any(|k| n == k) && current.as_ref() != Some(n));
    old_ones.map(|n| parent.join(n)).collect()
}

/// `d` as found on the node: its data dir, as its settings name it (an `errors` entry when
/// it is not there) or by default; `None` when the node has none of it (the default layout
/// is always looked at).
fn found(cx: &mut Discovery<'_>, d: &Distro) -> Option<Found> {
    let data = match d.data {
        None => None,
        Some(dd) => match setting(cx, dd.moved_by, d.vars) {
            Some((dir, by)) => {
                let what = format!("{}'s data dir", d.name);
                return cx
                    .runtime_root(&what, Path::new("/").join(dir), Some(&by))
                    .map(|data| Found { name: d.name, data: Some(data) });
            }
            None => Some(PathBuf::from(dd.default)),
        },
    };
    let present = |p: &str| resolve(cx.root, Path::new(p)).is_ok();
    let here = *d == KUBEADM
        || data.as_deref().is_some_and(|p| present(&p.to_string_lossy()))
        || d.markers.iter().any(|m| present(m));
    here.then_some(Found { name: d.name, data })
}

/// `p` of `d` on this node: as a setting names it (and what names it), else its default
/// under the data dir.
fn place(
    cx: &mut Discovery<'_>,
    d: &Distro,
    found: &Found,
    p: &Place,
) -> Option<(PathBuf, Option<String>)> {
    if let Some((named, by)) = setting(cx, p.moved_by, d.vars) {
        return Some((Path::new("/").join(named), Some(by)));
    }
    expand(found, p.at).map(|p| (PathBuf::from(p), None))
}

/// `at` with its data dir prefix replaced; `None` when it has one and `found` has no
/// data dir.
fn expand(found: &Found, at: &str) -> Option<String> {
    match at.strip_prefix(DATA) {
        None => Some(at.to_owned()),
        Some(rest) => Some(format!("{}{rest}", found.data.as_ref()?.display())),
    }
}

/// The first of `settings` that names a value on this node, and what names it (`data-dir
/// in /etc/rancher/k3s/config.yaml`).
fn setting(
    cx: &mut Discovery<'_>,
    settings: &[Setting],
    vars: &[(&str, &str)],
) -> Option<(String, String)> {
    for s in settings {
        match *s {
            Setting::Yaml { file, dropins, key } => {
                let mut named = None;
                let mut files = vec![PathBuf::from(file)];
                if let Some(dir) = dropins {
                    let mut names = cx.files(Path::new(dir));
                    names.retain(|n| {
                        Path::new(n).extension().is_some_and(|e| e == "yaml" || e == "yml")
                    });
                    // The last ones win: those are kept.
                    names.drain(..names.len().saturating_sub(MAX_DROPINS));
                    files.extend(names.iter().map(|n| Path::new(dir).join(n)));
                }
                for f in files {
                    let Some(text) = cx.read(&f, MAX_CONFIG) else { continue };
                    if let Some(v) = yaml_scalar(&text, key) {
                        named = Some((v, format!("{key} in {}", f.display())));
                    }
                }
                if named.is_some() {
                    return named;
                }
            }
            Setting::Flag { file, flag } => {
                let Some(text) = cx.read(Path::new(file), MAX_CONFIG) else { continue };
                if let Some(v) = flag_value(&text, flag, vars) {
                    return Some((v, format!("{flag} in {file}")));
                }
            }
        }
    }
    None
}
