//! The container runtimes kresidue knows, as data: each is one file here holding its
//! [`Spec`] (its name, the CRI sockets it serves, the tool that removes its containers
//! and images, what `clean` may do with its containers, where it keeps its data and the
//! configuration files that move it), and one line of `runtimes!`. Nothing elsewhere
//! compares a runtime's name: it asks the [`Runtime`]'s spec. Which site families read
//! which runtime's data is the sites' own table (`sites::props`); facts and their upstream
//! sources are in `docs/NODE-LAYOUT.md`.

pub mod containerd;
pub mod crio;
pub mod docker;
pub mod podman;

use serde::Serialize;

/// What `clean` may do with a runtime's containers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clean {
    /// Remove an exited container through CRI (`RemoveContainer`) when CRI is this
    /// runtime, and its records name the container.
    RemoveExited,
    /// Nothing: advice names the runtime's own tool.
    Advise,
}

/// Where a runtime keeps its data by default, as node paths, and the configuration files
/// that may move it (read by the runtime's site family).
#[derive(Clone, Copy, Debug)]
pub struct Dirs {
    /// Its data root (`/var/lib/containerd`, `/var/lib/docker`, containers/storage's
    /// graph root).
    pub root: &'static str,
    /// Its state dir, a tmpfs (containerd's `/run/containerd`, Docker's exec root); none
    /// when its state is kept under its root.
    pub state: Option<&'static str>,
    /// Its configuration files that may name another root or state, in the order read.
    pub config: &'static [&'static str],
}

/// What kresidue knows of one runtime.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    /// Its name in reports (`container.runtime`).
    pub name: &'static str,
    /// The name its CRI server gives in `Version` (`runtime_name`), when it serves CRI
    /// (cri-dockerd says `docker`).
    pub cri_name: Option<&'static str>,
    /// Its CRI sockets by default, as node paths, tried in turn when no `--cri` is given.
    pub endpoints: &'static [&'static str],
    /// The command that removes its containers and images (`<tool> rm`, `<tool> rmi`).
    pub tool: &'static str,
    /// What `clean` may do with its containers.
    pub clean: Clean,
    /// Whether its own records say whether a container runs (Docker's `State.Running`,
    /// Podman's state database): a witness beside CRI. containerd's do not (CRI does).
    pub records_tell_running: bool,
    /// Where it keeps its data.
    pub dirs: Dirs,
}

/// Declares the runtimes: each `Variant => module` line adds a [`Runtime`] variant whose
/// spec is `module::SPEC`, and its place in [`Runtime::ALL`].
macro_rules! runtimes {
    ($($variant:ident => $module:ident,)*) => {
        /// A container runtime kresidue knows (one file in `src/runtimes/`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Runtime {
            $(
                #[doc = concat!("See [`", stringify!($module), "`].")]
                $variant,
            )*
        }

        impl Runtime {
            /// Every runtime, in the order their default sockets are tried.
            pub const ALL: &'static [Runtime] = &[$(Runtime::$variant),*];

            /// What kresidue knows of it.
            pub const fn spec(self) -> &'static Spec {
                match self {
                    $(Runtime::$variant => &$module::SPEC,)*
                }
            }
        }
    };
}

runtimes! {
    Containerd => containerd,
    CriO => crio,
    Podman => podman,
    Docker => docker,
}

impl Runtime {
    /// Its name in reports.
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// The runtime whose CRI server gives `version` in `Version` (`containerd 1.7.2`,
    /// `cri-o 1.28.1`, `docker 24.0.7` for cri-dockerd); none for another.
    pub fn of_cri(version: &str) -> Option<Runtime> {
        let name = version.split_whitespace().next()?;
        Runtime::ALL
            .iter()
            .copied()
            .find(|r| r.spec().cri_name.is_some_and(|n| n.eq_ignore_ascii_case(name)))
    }

    /// Every runtime's default CRI sockets, as node paths, in the order tried.
    pub fn endpoints() -> impl Iterator<Item = &'static str> {
        Runtime::ALL.iter().flat_map(|r| r.spec().endpoints.iter().copied())
    }
}

/// A store that more than one runtime keeps its containers in, whose records did not say
/// which runtime a container is (one per store; see [`Keeper::Shared`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SharedStore {
    /// containers/storage, CRI-O's and Podman's.
    ContainersStorage,
}

impl SharedStore {
    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            SharedStore::ContainersStorage => "containers-storage",
        }
    }

    /// The runtimes that keep containers in it.
    pub fn runtimes(self) -> &'static [Runtime] {
        match self {
            SharedStore::ContainersStorage => &[Runtime::CriO, Runtime::Podman],
        }
    }
}

/// Whose records name a container: a runtime's, a shared store's whose records could not
/// be read (CRI-O's or Podman's, no one can say), or a containerd a distribution runs for
/// its own services.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Keeper {
    /// The runtime's.
    Runtime(Runtime),
    /// One of the store's runtimes'.
    Shared(SharedStore),
    /// A containerd that is not kubelet's (Talos's system containerd, Bottlerocket's
    /// host containers'), by its name in reports: CRI does not list its containers, and
    /// `clean` never removes them.
    System(&'static str),
}

impl Keeper {
    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Keeper::Runtime(r) => r.name(),
            Keeper::Shared(s) => s.name(),
            Keeper::System(name) => name,
        }
    }

    /// The runtimes it may be.
    pub fn runtimes(&self) -> &'static [Runtime] {
        match self {
            Keeper::Runtime(r) => {
                std::slice::from_ref(Runtime::ALL.iter().find(|x| *x == r).expect("in ALL"))
            }
            Keeper::Shared(s) => s.runtimes(),
            // Its own tools (`ctr -a <its socket>`), none of the runtimes' CLIs.
            Keeper::System(_) => &[],
        }
    }

    /// The one runtime it is, when known.
    pub fn runtime(self) -> Option<Runtime> {
        match self {
            Keeper::Runtime(r) => Some(r),
            Keeper::Shared(_) | Keeper::System(_) => None,
        }
    }
}

impl From<Runtime> for Keeper {
    fn from(r: Runtime) -> Keeper {
        Keeper::Runtime(r)
    }
}

impl std::fmt::Display for Keeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Keeper {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names are distinct, every runtime is in `ALL` once, and each CRI name maps back.
    #[test]
    fn runtimes_are_distinct_and_found_by_their_cri_names() {
        let all = Runtime::ALL;
        for (i, r) in all.iter().enumerate() {
            assert!(!all[i + 1..].contains(r), "{r:?} twice");
            assert!(all[i + 1..].iter().all(|o| o.name() != r.name()), "{r:?}'s name twice");
            if let Some(n) = r.spec().cri_name {
                assert_eq!(Runtime::of_cri(&format!("{n} 1.2.3")), Some(*r));
            }
            assert_eq!(Keeper::from(*r).runtimes(), &[*r]);
        }
        assert_eq!(Runtime::of_cri("remote 1"), None);
        assert_eq!(Runtime::of_cri(""), None);
    }
}
