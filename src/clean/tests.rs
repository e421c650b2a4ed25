//! `plan` on hand-built findings, runtime answers and surveys: what is planned is exactly
//! the secret-bearing dirs of pods with no sandbox, old enough, with nothing foreign
//! mounted, then their pod dirs when nothing else is in them; and exited containers only
//! when asked.

use super::*;
use crate::cri::{Container, Live, Pod};
use crate::finding::{ContainerRef, PodRef};
use crate::runtimes::Keeper;

const NOW: i64 = 1_800_000_000;
const HOUR: i64 = 3600;
const KUBELET: &str = "/var/lib/kubelet/pods";

fn finding(
    site: SiteId,
    category: Category,
    path: &str,
    uid: Option<&str>,
    container: Option<&str>,
) -> Finding {
    let mut f = Finding::sample(site, category, path);
    f.pod = uid.map(|u| PodRef {
        uid: u.into(),
        namespace: Some("shop".into()),
        name: Some("web".into()),
        live: Some(false),
    });
    // The node's containerd keeps the records of its sites' containers.
    let keeper = crate::sites::props(site).container_owned.then_some(Runtime::Containerd.into());
    f.container = container.map(|c| ContainerRef {
        id: Some(c.into()),
        name: None,
        live: Some(false),
        runtime: keeper,
    });
    f.matched.label = Some("current".into());
    f
}

fn id(n: u64) -> Ident {
    Ident { dev: 1, ino: n }
}

/// A pod dir with a secret volume `db` and a subPath copy, modified `age` seconds ago.
fn pod(uid: &str, age: i64) -> PodDir {
    let dir = PathBuf::from(format!("{KUBELET}/{uid}"));
    let target = |rel: &str, kind, ino| Target {
        path: dir.join(rel),
        kind,
        ident: id(ino),
        tmpfs_mount: false,
        files: 2,
        bytes: 40,
    };
    PodDir {
        uid: uid.into(),
        ident: id(1),
        mtime: NOW - age,
        targets: vec![
            target("volumes/kubernetes.io~secret/db", TargetKind::SecretVolume, 2),
            target("volume-subpaths/db/app/0", TargetKind::Subpath, 3),
        ],
        others: Vec::new(),
        bookkeeping_files: 1,
        bookkeeping_bytes: 60,
        mounts: Vec::new(),
        path: dir,
    }
}

fn secret_in(uid: &str) -> Finding {
    finding(
        SiteId::KubeletSecretVolume,
        Category::OrphanedVolume,
        &format!("{KUBELET}/{uid}/volumes/kubernetes.io~secret/db/password"),
        Some(uid),
        None,
    )
}

fn live_with(sandboxes: &[(&str, &str, bool)], containers: &[(&str, &str, &'static str)]) -> Live {
    let mut live = Live::default();
    for (sid, uid, ready) in sandboxes {
        live.pods.entry(uid.to_string()).or_default().push(Pod {
            id: sid.to_string(),
            uid: uid.to_string(),
            namespace: "shop".into(),
            name: "web".into(),
            ready: *ready,
        });
    }
    for (cid, sid, state) in containers {
        live.containers.insert(
            cid.to_string(),
            Container { id: cid.to_string(), name: "app".into(), sandbox: sid.to_string(), state },
        );
    }
    live
}

const OPTS: PlanOptions<'static> = PlanOptions {
    min_age: HOUR as u64,
    remove_exited: false,
    api: None,
    cri_runtime: Some("containerd 1.7.2"),
};

fn kinds(plan: &Plan) -> Vec<(ActionKind, String)> {
    plan.actions
        .iter()
        .map(|a| {
            (a.action, a.path.clone().unwrap_or_else(|| a.container.as_ref().unwrap().id.clone()))
        })
        .collect()
}

#[test]
fn a_pod_with_no_sandbox_old_enough_is_planned_volumes_first() {
    let live = live_with(&[], &[]);
    let plan = plan(&[secret_in("gone")], Some(&live), &[pod("gone", 2 * HOUR)], NOW, &OPTS);
    assert_eq!(
        kinds(&plan),
        vec![
            (ActionKind::RemoveVolume, format!("{KUBELET}/gone/volumes/kubernetes.io~secret/db")),
            (ActionKind::RemoveSubpath, format!("{KUBELET}/gone/volume-subpaths/db/app/0")),
            (ActionKind::RemovePodDir, format!("{KUBELET}/gone")),
        ]
    );
    assert_eq!(plan.actions[0].secrets, 1);
    assert_eq!(plan.actions[0].ident, Some(id(2)));
    assert_eq!(plan.actions[2].ident, Some(id(1)));
    assert_eq!(plan.actions[0].pod.as_ref().unwrap().namespace.as_deref(), Some("shop"));
    assert!(plan.actions.iter().all(|a| a.status == Status::Planned));
    assert!(plan.left.is_empty(), "{:?}", plan.left);
}

#[test]
fn any_sandbox_unknown_liveness_or_youth_plans_nothing() {
    let findings = [secret_in("p")];
    let pods = [pod("p", 2 * HOUR)];
    for (ready, word) in [(true, "ready"), (false, "not ready")] {
        let live = live_with(&[("s1", "p", ready)], &[]);
        let plan = plan(&findings, Some(&live), &pods, NOW, &OPTS);
        assert!(plan.actions.is_empty());
        assert_eq!(plan.left.len(), 1);
        assert_eq!(plan.left[0].reason, format!("the pod has a sandbox ({word})"));
    }
    let unknown = plan(&findings, None, &pods, NOW, &OPTS);
    assert!(unknown.actions.is_empty());
    assert!(unknown.left[0].reason.contains("not asked"), "{:?}", unknown.left);
    let live = live_with(&[], &[]);
    let young = plan(&findings, Some(&live), &[pod("p", HOUR - 1)], NOW, &OPTS);
    assert!(young.actions.is_empty());
    assert!(
        young.left[0].reason.contains("59m59s ago, less than --min-age 1h"),
        "{:?}",
        young.left
    );
    // Exactly --min-age old is old enough.
    let ripe = plan(&findings, Some(&live), &[pod("p", HOUR)], NOW, &OPTS);
    assert_eq!(ripe.actions.len(), 3);
}

#[test]
fn only_a_tmpfs_exactly_at_a_target_may_be_mounted_below() {
    let live = live_with(&[], &[]);
    let mut p = pod("p", 2 * HOUR);
    let vol = p.targets[0].path.clone();
    p.targets[0].tmpfs_mount = true;
    p.mounts = vec![(vol.clone(), "tmpfs".into(), true)];
    let ok = plan(&[secret_in("p")], Some(&live), std::slice::from_ref(&p), NOW, &OPTS);
    assert_eq!(ok.actions.len(), 3);
    assert!(ok.actions[0].unmount);
    // Inside a volume, a bind of part of a filesystem at a volume, elsewhere in the pod
    // dir, a whole tmpfs at a subPath copy: each stops the pod.
    let subpath = p.targets[1].path.clone();
    let foreign = [
        (vol.join("inner"), true),
        (vol.clone(), false),
        (p.path.join("volumes/x"), true),
        (subpath, true),
    ];
    for (at, whole_tmpfs) in foreign {
        let mut q = p.clone();
        q.mounts.push((at, "x".into(), whole_tmpfs));
        let refused = plan(&[secret_in("p")], Some(&live), &[q], NOW, &OPTS);
        assert!(refused.actions.is_empty(), "{whole_tmpfs}");
        assert!(refused.left[0].reason.contains("is mounted at"), "{:?}", refused.left);
    }
}

#[test]
fn the_pod_dir_stays_when_it_holds_more_than_bookkeeping() {
    let live = live_with(&[], &[]);
    let mut p = pod("p", 2 * HOUR);
    p.others = vec![PathBuf::from("volumes/kubernetes.io~empty-dir/cache/a"), PathBuf::from("b")];
    let plan1 = plan(&[secret_in("p")], Some(&live), std::slice::from_ref(&p), NOW, &OPTS);
    assert_eq!(plan1.actions.len(), 2, "volumes yes, pod dir no");
    // A finding outside the targets keeps the pod dir too, and is left with the reason.
    let stray =
        finding(SiteId::Other, Category::Other, &format!("{KUBELET}/q/etc-hosts"), Some("q"), None);
    let plan2 = plan(&[secret_in("q"), stray], Some(&live), &[pod("q", 2 * HOUR)], NOW, &OPTS);
    assert!(plan2.actions.iter().all(|a| a.action != ActionKind::RemovePodDir));
    assert_eq!(plan2.left.len(), 1);
    assert_eq!(plan2.left[0].path, format!("{KUBELET}/q/etc-hosts"));
}

#[test]
fn exited_containers_only_when_asked_and_only_exited() {
    let live = live_with(
        &[("s1", "p", true)],
        &[("c-exited", "s1", "exited"), ("c-running", "s1", "running")],
    );
    let layer = |c: &str| {
        finding(
            SiteId::ContainerdSnapshot,
            Category::DeadContainer,
            &format!("/var/lib/containerd/snap/{c}/fs/x"),
            Some("p"),
            Some(c),
        )
    };
    let spec = finding(
        SiteId::ContainerdMetadata,
        Category::DeadContainer,
        "/var/lib/containerd/meta.db",
        Some("p"),
        Some("c-exited"),
    );
    let log = finding(
        SiteId::PodLog,
        Category::PodLog,
        "/var/log/pods/shop_web_p/app/0.log",
        Some("p"),
        None,
    );
    let findings = [layer("c-exited"), layer("c-running"), spec, log];
    let without = plan(&findings, Some(&live), &[], NOW, &OPTS);
    assert!(without.actions.is_empty());
    let exited = without.left.iter().find(|l| l.path.contains("c-exited")).unwrap();
    assert!(exited.manual.contains("crictl rm c-exited"), "{exited:?}");
    let opts = PlanOptions { remove_exited: true, ..OPTS };
    let with = plan(&findings, Some(&live), &[], NOW, &opts);
    assert_eq!(kinds(&with), vec![(ActionKind::RemoveContainer, "c-exited".to_owned())]);
    // Issue 46, break 6: never for a container whose records another runtime keeps
    // (Docker's own containerd, namespace `moby`: cri-dockerd would `docker rm` it), or an
    // unknown one, nor when CRI is not containerd, nor when CRI's name is not known.
    for keeper in [Some(Runtime::Docker.into()), None] {
        let mut theirs = findings.clone();
        theirs[2].container.as_mut().unwrap().runtime = keeper;
        let planned = plan(&theirs, Some(&live), &[], NOW, &opts);
        assert!(planned.actions.is_empty(), "{keeper:?}: {:?}", kinds(&planned));
    }
    for cri in [Some("docker 24.0.7"), Some("cri-o 1.29"), None] {
        let planned =
            plan(&findings, Some(&live), &[], NOW, &PlanOptions { cri_runtime: cri, ..opts });
        assert!(planned.actions.is_empty(), "{cri:?}: {:?}", kinds(&planned));
    }
    assert_eq!(with.actions[0].secrets, 2, "its layer and its spec in meta.db");
    assert_eq!(with.actions[0].pod.as_ref().unwrap().uid, "p");
    // Left: the running container's layer and the log, each with its manual step.
    let left: Vec<(&str, &str)> =
        with.left.iter().map(|l| (l.path.as_str(), l.reason.as_str())).collect();
    assert_eq!(
        left,
        vec![
            ("/var/lib/containerd/snap/c-running/fs/x", "the container is live"),
            ("/var/log/pods/shop_web_p/app/0.log", "logs are never removed by kresidue"),
        ]
    );
}

#[test]
fn bookkeeping_is_kubelets_own_files_only() {
    for yes in [
        "etc-hosts",
        "containers/app/1a2b",
        "plugins/kubernetes.io~empty-dir/x/ready",
        "volumes/kubernetes.io~csi/v/vol_data.json",
    ] {
        assert!(bookkeeping(Path::new(yes)), "{yes}");
    }
    for no in [
        "etc-hosts2",
        "volumes/kubernetes.io~empty-dir/cache/a",
        "volumes/kubernetes.io~csi/v/mount/x",
        "x/etc-hosts",
    ] {
        assert!(!bookkeeping(Path::new(no)), "{no}");
    }
}

#[test]
fn human_durations() {
    assert_eq!(human_secs(0), "0s");
    assert_eq!(human_secs(59), "59s");
    assert_eq!(human_secs(3600), "1h");
    assert_eq!(human_secs(3725), "1h2m");
    assert_eq!(human_secs(90_061), "1d1h");
}

/// A plan file reads back as written; `restrict` refuses what it does not hold (and the
/// pod dir of that pod), keeps what it holds; a file of another schema is refused.
#[test]
fn plan_file_round_trips_and_restricts() {
    let live = Live::default();
    let p = plan(&[secret_in("gone")], Some(&live), &[pod("gone", 2 * HOUR)], NOW, &OPTS);
    assert!(p.actions.len() >= 2, "{:?}", kinds(&p));
    let file = PlanFile::of(&p, Path::new("/"), Path::new("/var/lib/kubelet"), NOW, 3600);
    let text = serde_json::to_vec(&file).unwrap();
    let back = PlanFile::parse(&text).unwrap();
    assert_eq!(back.actions, file.actions);
    assert!(back.mismatch(Path::new("/"), Path::new("/var/lib/kubelet")).is_none());
    assert!(back.mismatch(Path::new("/"), Path::new("/data/kubelet")).is_some());
    let mut same = p.clone();
    back.restrict(&mut same);
    assert!(same.actions.iter().all(|a| a.status == Status::Planned));
    // Without its first action, that action and the pod's dir are refused.
    let mut fewer = PlanFile::parse(&text).unwrap();
    fewer.actions.remove(0);
    let mut again = p.clone();
    fewer.restrict(&mut again);
    assert_eq!(again.actions[0].status, Status::Refused);
    let dir = again.actions.iter().find(|a| a.action == ActionKind::RemovePodDir).unwrap();
    assert_eq!(dir.status, Status::Refused);
    assert!(PlanFile::parse(b"{\"schema\": \"x\"}").is_err());
    let seed = include_bytes!("../../fuzz/corpus/kubectl_pods/seed-plan");
    assert_eq!(PlanFile::parse(seed).unwrap().actions.len(), 1);
}

/// Each runtime's residue is advised with that runtime's own tool: Docker's and Podman's
/// containers and images with `docker`/`podman`, CRI's with `crictl`; with no CRI asked,
/// what the runtime's records say of the container decides.
#[test]
fn advice_names_each_runtimes_own_tool() {
    let of = |site, category, path: &str, runtime: Option<Runtime>, live| {
        let mut f = finding(site, category, path, None, Some("c1"));
        let c = f.container.as_mut().unwrap();
        (c.runtime, c.live) = (runtime.map(Keeper::from), live);
        f
    };
    let image = |site, category, path: &str| {
        let mut f = finding(site, category, path, None, None);
        f.container = None;
        f
    };
    let cases = [
        (
            of(
                SiteId::DockerStorage,
                Category::DeadContainer,
                "/d/c",
                Some(Runtime::Docker),
                Some(false),
            ),
            "docker rm c1",
        ),
        (
            of(
                SiteId::DockerStorage,
                Category::EnvPersisted,
                "/d/l",
                Some(Runtime::Docker),
                Some(true),
            ),
            "restart the pod",
        ),
        (
            of(
                SiteId::ContainersStorage,
                Category::DeadContainer,
                "/s/c",
                Some(Runtime::Podman),
                Some(false),
            ),
            "podman rm c1",
        ),
        (
            of(SiteId::ContainersStorage, Category::EnvPersisted, "/s/o", None, Some(false)),
            "by hand",
        ),
        (
            of(SiteId::RuntimeLog, Category::PodLog, "/d/log", Some(Runtime::Docker), Some(false)),
            "docker rm c1",
        ),
        (image(SiteId::DockerStorage, Category::ImageConfig, "/d/i"), "(docker rmi)"),
        (
            image(SiteId::ContainersStorage, Category::ImageLayer, "/s/i"),
            "(crictl rmi, or podman rmi)",
        ),
        (image(SiteId::ContainerdSnapshot, Category::ImageLayer, "/c/i"), "(crictl rmi)"),
        (image(SiteId::RuntimeVolume, Category::Other, "/d/volumes/v/_data/x"), "volume rm"),
    ];
    let findings: Vec<Finding> = cases.iter().map(|(f, _)| f.clone()).collect();
    let planned = plan(&findings, None, &[], NOW, &OPTS);
    assert!(planned.actions.is_empty());
    for (f, want) in &cases {
        let left = planned.left.iter().find(|l| l.path == f.path).unwrap();
        assert!(left.manual.contains(want), "{}: {left:?}", f.path);
    }
    // With CRI asked: a containerd container it no longer knows is its garbage collector's
    // (never a dir to remove by hand); an exited Docker container CRI lists is removed with
    // `docker rm`, and `clean` does not offer to remove it.
    let live = live_with(&[("s1", "p", true)], &[("c1", "s1", "exited")]);
    let gone = of(
        SiteId::ContainerdSnapshot,
        Category::DeadContainer,
        "/c/s",
        Some(Runtime::Containerd),
        Some(false),
    );
    let mut gone = gone;
    gone.container.as_mut().unwrap().id = Some("c-gone".into());
    let docker = of(
        SiteId::DockerStorage,
        Category::DeadContainer,
        "/d/x",
        Some(Runtime::Docker),
        Some(false),
    );
    let planned = plan(&[gone, docker], Some(&live), &[], NOW, &OPTS);
    let manual = |path: &str| planned.left.iter().find(|l| l.path == path).unwrap().manual.clone();
    assert!(manual("/c/s").contains("garbage collection"), "{}", manual("/c/s"));
    assert!(manual("/d/x").contains("docker rm c1"), "{}", manual("/d/x"));
    assert!(!manual("/d/x").contains("--remove-exited-containers"), "{}", manual("/d/x"));
}
