//! The severity model: a finding's category and severity from its place (the category
//! its site gives before liveness), whether its owner lives, and its material. The scan
//! rates every finding with liveness unknown ([`place`]); [`judge`] rates them again
//! with what the witnesses said of which pods and containers live.

use crate::cri::Live;
use crate::finding::{rank, Category, Finding, MatchInfo, MatchKind, Severity, SiteId};

/// Rates `findings` again with what the witnesses said. CRI, when it was asked (`live`):
/// each pod is live when a sandbox with its uid exists (in any state), each container
/// when it is running or created (by id; by name within its pod where only the name is
/// known, as for pod logs); of a container another runtime's records name, only when it
/// lists it or is that `runtime` (CRI's name and version). The runtime's own records,
/// stamped on the finding at the scan (Docker's `State`, Podman's state database,
/// containers/storage's records; see `sites::witnessed`): a container is live when either
/// witness says so, gone when one says so and the other does not say otherwise. A place
/// owned by a container (its env at rest, its writable layer) takes the container's
/// liveness, falling back to its pod's; every other place takes its pod's.
///
/// A live pod's subPath copy holding what its volume holds now (the same fingerprinted
/// value, not labelled revoked) is expected (`info`); any other subPath copy of a live pod
/// holds a stale value and stays `stale-subpath`.
pub fn judge(findings: &mut [Finding], live: Option<&Live>, runtime: Option<&str>) {
    // The runtime CRI is (its name, as `Version` gives it: `containerd`, `cri-o`, `docker`
    // for cri-dockerd): it lists every container of its own.
    let cri_is =
        runtime.and_then(crate::runtimes::Runtime::of_cri).map(crate::runtimes::Keeper::from);
    // What each pod's volumes hold now: (pod uid, volume, fingerprinted value).
    let current: std::collections::BTreeSet<(String, String, MatchInfo)> = findings
        .iter()
        .filter(|f| f.matched.kind == MatchKind::Fingerprint && f.site != SiteId::KubeletSubpath)
        .filter_map(|f| {
            let uid = f.pod.as_ref()?.uid.as_str();
            let vol = f.volume.as_deref()?;
            Some((uid.to_owned(), vol.to_owned(), f.matched.clone()))
        })
        .collect();
    for f in findings {
        let pod = f.pod.as_mut().map(|p| {
            if let Some(live) = live {
                p.live = Some(live.pod_live(&p.uid));
            }
            p.uid.clone()
        });
        if let Some(c) = f.container.as_mut() {
            let cri = live.and_then(|live| match (&c.id, &c.name, &pod) {
                // A container another runtime's records name (Docker's, Podman's) may be
                // one CRI never knew: CRI speaks of it only when it lists it, or when it is
                // that runtime.
                (Some(id), _, _) if c.runtime.is_some() && c.runtime != cri_is => {
                    live.containers.get(id).map(crate::cri::Container::live)
                }
                (Some(id), _, _) => Some(live.container_live(id)),
                (None, Some(name), Some(uid)) => Some(live.container_live_in(uid, name)),
                _ => None,
            });
            // Two witnesses, the runtime's own records (stamped already) and CRI: alive
            // when either says so, gone when one says so and the other does not object.
            c.live = match (c.live, cri) {
                (Some(true), _) | (_, Some(true)) => Some(true),
                (Some(false), _) | (_, Some(false)) => Some(false),
                (None, None) => None,
            };
        }
        let pod_live = f.pod.as_ref().and_then(|p| p.live);
        let owner_live = match f.category {
            Category::EnvPersisted | Category::ContainerLayer => {
                f.container.as_ref().and_then(|c| c.live).or(pod_live)
            }
            _ => pod_live,
        };
        let (category, mut place) = place(f.category, f.stale, owner_live);
        if category == Category::StaleSubpath && owner_live == Some(true) && !f.material.revoked {
            let uid = f.pod.as_ref().map_or("", |p| p.uid.as_str());
            let vol = f.volume.as_deref().unwrap_or_default();
            if current.contains(&(uid.to_owned(), vol.to_owned(), f.matched.clone())) {
                place = Severity::Info;
            }
        }
        f.category = category;
        f.severity = match category {
            // What a package ships is no residue, whatever the rule says of its shape.
            Category::Shipped => Severity::Info,
            _ => rank(place, f.material.severity, f.material.revoked),
        };
    }
}

/// Category and place severity (the model of `docs/CONTRACT.md`) of a place of `category`:
/// `live` is whether its owner is alive (`None`: unknown), `stale` a superseded copy (one
/// step less severe than its place, but in a datastore in plaintext). A container's env or writable layer whose container
/// is gone is a `dead-container`.
pub fn place(category: Category, stale: bool, live: Option<bool>) -> (Category, Severity) {
    use Severity::{Critical, High, Info, Medium};
    let (category, [unknown, dead, alive]) = match category {
        // A volume of a pod that has no sandbox is orphaned, on tmpfs or not.
        Category::NonTmpfsVolume if live == Some(false) => {
            (Category::OrphanedVolume, [Critical, Critical, Critical])
        }
        Category::NonTmpfsVolume => (category, [Critical, Critical, High]),
        Category::OrphanedVolume => (category, [High, Critical, Info]),
        Category::StaleSubpath => (category, [Medium, High, Medium]),
        // A container's env at rest, or what an app wrote into its writable layer:
        // expected while the container lives, residue once it is gone.
        Category::EnvPersisted | Category::ContainerLayer if live == Some(false) => {
            (Category::DeadContainer, [High, High, High])
        }
        Category::EnvPersisted | Category::ContainerLayer => (category, [High, High, Medium]),
        // Baked into an image: on every node that pulls it, whoever runs it.
        Category::ImageLayer => (category, [High, High, High]),
        // An image's `ENV` or a build arg in its history: shown by `docker history` and
        // `inspect` to whoever may pull the image.
        Category::ImageConfig => (category, [High, High, High]),
        // Printed by an app: in the log until it rotates out, and shipped wherever logs go.
        Category::PodLog => (category, [High, High, High]),
        // Every Secret of the cluster in plaintext: encryption at rest is off.
        Category::EtcdPlaintext => (category, [Critical, Critical, Critical]),
        // A datastore whose Secrets are all encrypted: said, as information.
        Category::EncryptedAtRest => (category, [Info, Info, Info]),
        Category::DeadContainer => (category, [High, High, High]),
        Category::Other => (category, [High, High, Medium]),
        Category::Shipped => (category, [Info, Info, Info]),
    };
    let severity = match live {
        None => unknown,
        Some(false) => dead,
        Some(true) => alive,
    };
    // A datastore's old copy in plaintext proves encryption at rest off as its current
    // value does: as severe.
    let lessened = stale && category != Category::EtcdPlaintext;
    let severity = if lessened { rank(severity, Medium, false) } else { severity };
    (category, severity)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cri::{Container, Pod};
    use crate::finding::{ContainerRef, PodRef};
    use crate::sites::Ownership;
    use Category as C;
    use Severity::{Critical as Cr, High as H, Info as I, Medium as M};

    /// The category every site gives each place before liveness: `(site, on tmpfs,
    /// what the runtime's records say of its layer or container) → category`.
    #[test]
    fn every_site_gives_its_category() {
        let owned = |c| Some(Ownership::new(SiteId::Other, c, None, None));
        let records =
            [None, owned(C::ContainerLayer), owned(C::ImageLayer), owned(C::EnvPersisted)];
        for id in SiteId::ALL.iter().copied() {
            for tmpfs in [true, false] {
                for owner in &records {
                    let asked = std::cell::Cell::new(false);
                    let on_tmpfs = || {
                        asked.set(true);
                        tmpfs
                    };
                    let got = crate::sites::base_category(id, owner.as_ref(), on_tmpfs);
                    let from_records = owner.as_ref().map_or(C::Other, |o| o.category);
                    let want = match id {
                        SiteId::KubeletSecretVolume
                        | SiteId::KubeletProjectedVolume
                        | SiteId::KubeletCsiVolume => {
                            if tmpfs {
                                C::OrphanedVolume
                            } else {
                                C::NonTmpfsVolume
                            }
                        }
                        SiteId::KubeletSubpath => C::StaleSubpath,
                        SiteId::ContainerdMetadata | SiteId::OciBundle => C::EnvPersisted,
                        SiteId::ContainerdSnapshot
                        | SiteId::ContainerdContent
                        | SiteId::ContainersStorage
                        | SiteId::DockerStorage
                        | SiteId::ImageArchive => from_records,
                        SiteId::PodLog | SiteId::RuntimeLog => C::PodLog,
                        SiteId::RuntimeVolume => C::Other,
                        SiteId::Etcd | SiteId::Kine | SiteId::Dqlite => C::EtcdPlaintext,
                        SiteId::Other => C::Other,
                    };
                    assert_eq!(got, want, "{id:?} tmpfs={tmpfs} owner={owner:?}");
                    // The mount table is asked only where the category depends on it.
                    let volume = matches!(
                        id,
                        SiteId::KubeletSecretVolume
                            | SiteId::KubeletProjectedVolume
                            | SiteId::KubeletCsiVolume
                    );
                    assert_eq!(asked.get(), volume, "{id:?} asked the mount table");
                }
            }
        }
    }

    /// Every category × liveness (unknown, dead, alive) → the category and place severity
    /// of `docs/CONTRACT.md`; a stale copy is one step less severe (a datastore's as
    /// severe).
    #[test]
    fn every_category_and_liveness_has_its_place() {
        #[rustfmt::skip]
        let table: [(Category, [(Category, Severity); 3]); 12] = [
            (C::OrphanedVolume, [(C::OrphanedVolume, H), (C::OrphanedVolume, Cr), (C::OrphanedVolume, I)]),
            (C::NonTmpfsVolume, [(C::NonTmpfsVolume, Cr), (C::OrphanedVolume, Cr), (C::NonTmpfsVolume, H)]),
            (C::StaleSubpath, [(C::StaleSubpath, M), (C::StaleSubpath, H), (C::StaleSubpath, M)]),
            (C::EnvPersisted, [(C::EnvPersisted, H), (C::DeadContainer, H), (C::EnvPersisted, M)]),
            (C::ContainerLayer, [(C::ContainerLayer, H), (C::DeadContainer, H), (C::ContainerLayer, M)]),
            (C::ImageLayer, [(C::ImageLayer, H), (C::ImageLayer, H), (C::ImageLayer, H)]),
            (C::ImageConfig, [(C::ImageConfig, H), (C::ImageConfig, H), (C::ImageConfig, H)]),
            (C::PodLog, [(C::PodLog, H), (C::PodLog, H), (C::PodLog, H)]),
            (C::EtcdPlaintext, [(C::EtcdPlaintext, Cr), (C::EtcdPlaintext, Cr), (C::EtcdPlaintext, Cr)]),
            (C::EncryptedAtRest, [(C::EncryptedAtRest, I), (C::EncryptedAtRest, I), (C::EncryptedAtRest, I)]),
            (C::DeadContainer, [(C::DeadContainer, H), (C::DeadContainer, H), (C::DeadContainer, H)]),
            (C::Other, [(C::Other, H), (C::Other, H), (C::Other, M)]),
        ];
        for (category, row) in table {
            for (live, want) in [None, Some(false), Some(true)].into_iter().zip(row) {
                assert_eq!(place(category, false, live), want, "{category:?} live={live:?}");
                let stale = match want.1 {
                    Cr if category == C::EtcdPlaintext => Cr,
                    Cr => H,
                    H => M,
                    M => Severity::Low,
                    _ => I,
                };
                assert_eq!(
                    place(category, true, live),
                    (want.0, stale),
                    "stale {category:?} {live:?}"
                );
            }
        }
    }

    fn finding(site: SiteId, category: Category, path: &str, container: Option<&str>) -> Finding {
        let mut f = Finding::sample(site, category, path);
        f.pod = Some(PodRef { uid: "u1".into(), namespace: None, name: None, live: None });
        f.container = container.map(|c| ContainerRef {
            id: Some(c.into()),
            name: None,
            live: None,
            runtime: None,
        });
        f
    }

    fn live(pod: bool, container: Option<&'static str>) -> Live {
        let mut live = Live::default();
        if pod {
            let p = Pod {
                id: "s1".into(),
                uid: "u1".into(),
                namespace: "shop".into(),
                name: "web".into(),
                ready: true,
            };
            live.pods.insert("u1".into(), vec![p]);
        }
        if let Some(state) = container {
            let c = Container { id: "c1".into(), name: "app".into(), sandbox: "s1".into(), state };
            live.containers.insert("c1".into(), c);
        }
        live
    }

    /// A container's env or layer takes its container's liveness, falling back to its
    /// pod's; everything else takes its pod's.
    #[test]
    fn judge_takes_the_owners_liveness() {
        let cases = [
            // (category, owner container c1?, its state, pod live) → (category, severity)
            (C::EnvPersisted, true, Some("running"), false, (C::EnvPersisted, M)),
            (C::EnvPersisted, true, Some("exited"), true, (C::DeadContainer, H)),
            (C::ContainerLayer, true, None, true, (C::DeadContainer, H)),
            (C::ContainerLayer, false, None, true, (C::ContainerLayer, M)),
            (C::ContainerLayer, false, None, false, (C::DeadContainer, H)),
            (C::OrphanedVolume, true, Some("exited"), true, (C::OrphanedVolume, I)),
            (C::OrphanedVolume, true, Some("running"), false, (C::OrphanedVolume, Cr)),
        ];
        for (category, owned, state, pod, want) in cases {
            let c1 = owned.then_some("c1");
            let mut fs = [finding(SiteId::ContainerdSnapshot, category, "/x", c1)];
            judge(&mut fs, Some(&live(pod, state)), None);
            assert_eq!((fs[0].category, fs[0].severity), want, "{category:?} {state:?} {pod}");
            assert_eq!(fs[0].pod.as_ref().unwrap().live, Some(pod));
        }
    }

    /// A container CRI does not list is gone only when CRI is the runtime that keeps its
    /// records: one of a distribution's own containerd (Talos's system services) or of
    /// another runtime stays unknown, one of CRI's own is dead.
    #[test]
    fn judge_believes_cri_only_of_its_own_containers() {
        use crate::runtimes::{Keeper, Runtime};
        for (keeper, want) in [
            (Keeper::System("talos-system-containerd"), None),
            (Keeper::Runtime(Runtime::Docker), None),
            (Keeper::Runtime(Runtime::Containerd), Some(false)),
        ] {
            let mut fs = [finding(SiteId::ContainerdMetadata, C::EnvPersisted, "/m", Some("c9"))];
            fs[0].container.as_mut().unwrap().runtime = Some(keeper);
            judge(&mut fs, Some(&live(true, None)), Some("containerd 1.7.2"));
            assert_eq!(fs[0].container.as_ref().unwrap().live, want, "{keeper:?}");
        }
    }

    /// A live pod's subPath copy of what its volume holds now is expected; a copy of
    /// anything else is stale.
    #[test]
    fn judge_knows_a_current_subpath_copy() {
        let vol = "/var/lib/kubelet/pods/u1/volumes/kubernetes.io~secret/db/password";
        let sub = "/var/lib/kubelet/pods/u1/volume-subpaths/db/app/0";
        let other = "/var/lib/kubelet/pods/u1/volume-subpaths/cfg/app/0";
        let mut fs = [
            finding(SiteId::KubeletSecretVolume, C::OrphanedVolume, vol, None),
            finding(SiteId::KubeletSubpath, C::StaleSubpath, sub, None),
            finding(SiteId::KubeletSubpath, C::StaleSubpath, other, None),
        ];
        for (f, v) in fs.iter_mut().zip(["db", "db", "cfg"]) {
            f.volume = Some(v.into());
        }
        judge(&mut fs, Some(&live(true, None)), None);
        let got: Vec<_> = fs.iter().map(|f| (f.category, f.severity)).collect();
        assert_eq!(got, [(C::OrphanedVolume, I), (C::StaleSubpath, I), (C::StaleSubpath, M)]);
        judge(&mut fs, Some(&live(false, None)), None);
        assert_eq!(fs[1].severity, H, "a dead pod's subPath copy is residue");
    }
}
