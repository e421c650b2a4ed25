//! `kresidue clean`: what may be removed, and only that.
//!
//! [`survey()`] reads what is on disk under kubelet's pod dirs (identities, ages, mounts,
//! what else a pod dir holds); [`plan`] is a pure function of that survey, the findings,
//! what the runtime said and the clock, so every rule of what may be removed is
//! unit-tested on hand-built inputs; [`apply::apply`] carries a plan out, checking each action
//! again just before it acts and writing it to the [`journal`] first.
//!
//! What may be planned, and nothing else: for a pod with **no sandbox at all** in the
//! runtime whose pod dir is older than `--min-age` and has nothing but a tmpfs mounted
//! exactly at a volume path below it, its secret, projected and CSI volume dirs and its
//! subPath copies, then the pod dir itself when nothing but kubelet's bookkeeping remains
//! in it; with `--remove-exited-containers`, exited containers whose writable layer,
//! bundle or stored spec hold secrets, removed by the runtime itself. Every other finding
//! is left, with the reason and the manual step to take.

pub mod apply;
pub mod journal;
pub mod survey;
pub mod witness;

use crate::cri::Live;
use crate::finding::{Category, Finding, Severity, SiteId};
use crate::node::kubelet;
use crate::runtimes::{Clean, Runtime};
use crate::sites::{self, Advice};
use crate::sys::tree::Ident;
use crate::text::{display_path, redisplay, withhold};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

pub use survey::{survey, PodDir, Target, TargetKind};

/// The choices that shape a plan.
#[derive(Clone, Copy, Debug)]
pub struct PlanOptions<'a> {
    /// A pod dir modified less than this many seconds ago is left alone.
    pub min_age: u64,
    /// Whether exited containers holding secrets are removed (through the runtime).
    pub remove_exited: bool,
    /// The API server's pods (`--pods`), checked against the runtime: a pod it lists is
    /// never planned.
    pub api: Option<&'a witness::Witness>,
    /// The runtime CRI is, as its `Version` names it (`containerd 1.7.2`): containers are
    /// removed only when it is containerd and containerd's records name them.
    pub cri_runtime: Option<&'a str>,
}

/// What an action does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ActionKind {
    /// Remove a secret, projected or CSI volume dir (unmounting a leftover tmpfs first).
    RemoveVolume,
    /// Remove a subPath copy.
    RemoveSubpath,
    /// Remove a pod dir holding nothing but kubelet's bookkeeping.
    RemovePodDir,
    /// Remove an exited container through CRI `RemoveContainer`.
    RemoveContainer,
}

/// Where an action stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Planned, not (yet) done.
    Planned,
    /// Done.
    Done,
    /// Not done: a check just before acting said no (the pod has a sandbox now, the path
    /// changed, something is mounted, …).
    Refused,
    /// Tried and failed.
    Failed,
}

/// The pod an action or a leftover belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PodInfo {
    /// Pod uid.
    pub uid: String,
    /// Namespace, when the runtime or the findings said.
    pub namespace: Option<String>,
    /// Name, when known.
    pub name: Option<String>,
}

/// The container an action removes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ContainerInfo {
    /// Runtime container id.
    pub id: String,
    /// Its name in the pod.
    pub name: String,
}

/// One planned action, and once applied what became of it.
#[derive(Clone, Debug, Serialize)]
pub struct Action {
    /// What it does.
    pub action: ActionKind,
    /// The node path it removes (none for a container).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The pod it belongs to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod: Option<PodInfo>,
    /// The container it removes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<ContainerInfo>,
    /// A tmpfs is mounted exactly there and is unmounted first.
    pub unmount: bool,
    /// Files below it (planned), or removed (applied).
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Secret values found in what it removes (findings × their counts).
    pub secrets: u64,
    /// Where it stands.
    pub status: Status,
    /// Why it was refused or failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The node path, as a path.
    #[serde(skip)]
    pub node_path: PathBuf,
    /// The identity seen when planning (of the mounted tmpfs's root when one is mounted).
    #[serde(skip)]
    pub ident: Option<Ident>,
    /// The identity of its pod dir when planned (checked before each action of the pod).
    #[serde(skip)]
    pub pod_ident: Option<Ident>,
}

/// Findings at one path that the plan leaves, and what to do about them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Left {
    /// The node path.
    pub path: String,
    /// Its site.
    pub site: SiteId,
    /// The category of its most severe finding.
    pub category: Category,
    /// The most severe finding's severity.
    pub severity: Severity,
    /// Secret values found there (findings × their counts).
    pub secrets: u64,
    /// The owning pod's uid, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// The owning container's id, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// Why `clean` leaves it.
    pub reason: String,
    /// What a person can do about it.
    pub manual: String,
}

/// A plan: the actions, in the order they are carried out, and what is left.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// Per pod: its volumes and subPath copies, then its pod dir; then containers.
    pub actions: Vec<Action>,
    /// Findings no action removes, grouped by path.
    pub left: Vec<Left>,
}

/// The result of `kresidue clean` (JSON schema `kresidue/clean/v1`).
#[derive(Debug, Serialize)]
pub struct CleanReport {
    /// `kresidue/clean/v1`.
    pub schema: &'static str,
    /// The root as given.
    pub root: String,
    /// The node's name.
    pub node: Option<String>,
    /// How the runtime was asked.
    pub cri: crate::finding::CriInfo,
    /// Whether the plan was carried out (`--apply`).
    pub applied: bool,
    /// `--min-age`, seconds.
    pub min_age_seconds: u64,
    /// Counts.
    pub summary: CleanSummary,
    /// The actions, in order.
    pub actions: Vec<Action>,
    /// What is left, and what to do about it.
    pub left: Vec<Left>,
    /// What could not be read.
    pub errors: Vec<crate::finding::ScanError>,
}

impl CleanReport {
    /// The schema id.
    pub const SCHEMA: &'static str = "kresidue/clean/v1";

    /// Every name and path the report shows, withheld as a scan report's are
    /// ([`crate::finding::Report::withhold`]): once, when the report is made.
    pub fn withhold(&mut self) {
        self.actions.iter_mut().for_each(Action::withhold);
        for l in &mut self.left {
            l.path = redisplay(&l.path);
            withhold::names(l.pod.iter_mut().chain(l.container.iter_mut()));
            withhold::prose(&mut l.reason);
            withhold::prose(&mut l.manual);
        }
        self.cri.withhold();
        self.errors.iter_mut().for_each(crate::finding::ScanError::withhold);
        self.errors.sort();
    }
}

impl Action {
    /// Its path, pod, container and reason as shown (the report, `--plan-out`, the
    /// journal), withheld where they hold secret material found in a name
    /// (`text::withhold`); the action carried out keeps what it acts on.
    pub fn withhold(&mut self) {
        if let Some(path) = &mut self.path {
            *path = redisplay(path);
        }
        let pod = self.pod.iter_mut().flat_map(|p| {
            std::iter::once(&mut p.uid).chain(p.namespace.iter_mut()).chain(p.name.iter_mut())
        });
        let container = self.container.iter_mut().flat_map(|c| [&mut c.id, &mut c.name]);
        withhold::names(pod.chain(container));
        self.reason.iter_mut().for_each(withhold::prose);
    }
}

/// The counts of a clean report.
#[derive(Debug, Default, Serialize)]
pub struct CleanSummary {
    /// Findings of the scan.
    pub findings: u64,
    /// Actions planned (or, applied, attempted).
    pub actions: u64,
    /// Actions done.
    pub done: u64,
    /// Actions refused by a check.
    pub refused: u64,
    /// Actions that failed.
    pub failed: u64,
    /// Files removed (planned, in a dry run).
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Secret values in what was (or would be) removed.
    pub secrets: u64,
    /// Paths with findings left.
    pub left: u64,
}

impl CleanSummary {
    /// Counts `actions` and `left`; done actions only once applied.
    pub fn of(findings: u64, actions: &[Action], left: &[Left], applied: bool) -> CleanSummary {
        let counted = |a: &&Action| !applied || a.status == Status::Done;
        let n = |s: Status| actions.iter().filter(|a| a.status == s).count() as u64;
        CleanSummary {
            findings,
            actions: actions.len() as u64,
            done: n(Status::Done),
            refused: n(Status::Refused),
            failed: n(Status::Failed),
            files: actions.iter().filter(counted).map(|a| a.files).sum(),
            bytes: actions.iter().filter(counted).map(|a| a.bytes).sum(),
            secrets: actions.iter().filter(counted).map(|a| a.secrets).sum(),
            left: left.len() as u64,
        }
    }
}

/// A plan as written for review (`clean --plan-out FILE`, JSON `kresidue/clean-plan/v1`)
/// and carried out as reviewed (`clean --apply --plan FILE`): what each action removes and
/// the identities (device, inode) it was planned with. No values, no file contents.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanFile {
    /// `kresidue/clean-plan/v1`.
    pub schema: String,
    /// The scanned root (its canonical path).
    pub root: String,
    /// kubelet's dir the plan was made for (node path).
    pub kubelet_dir: String,
    /// When it was made (Unix seconds).
    pub created: i64,
    /// `--min-age` it was made with, seconds.
    pub min_age_seconds: u64,
    /// The actions, in order.
    pub actions: Vec<Reviewed>,
}

/// One action of a [`PlanFile`].
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Reviewed {
    /// What it does.
    pub action: ActionKind,
    /// The node path it removes.
    pub path: Option<String>,
    /// Its pod's uid.
    pub pod: Option<String>,
    /// The container it removes.
    pub container: Option<String>,
    /// The identity planned.
    pub ident: Option<Ident>,
    /// Its pod dir's identity planned.
    pub pod_ident: Option<Ident>,
}

impl Reviewed {
    fn of(a: &Action) -> Reviewed {
        Reviewed {
            action: a.action,
            path: a.path.clone(),
            pod: a.pod.as_ref().map(|p| p.uid.clone()),
            container: a.container.as_ref().map(|c| c.id.clone()),
            ident: a.ident,
            pod_ident: a.pod_ident,
        }
    }
}

impl PlanFile {
    /// The schema id.
    pub const SCHEMA: &'static str = "kresidue/clean-plan/v1";

    /// The plan file of `plan`.
    pub fn of(plan: &Plan, root: &Path, kubelet_dir: &Path, now: i64, min_age: u64) -> PlanFile {
        PlanFile {
            schema: Self::SCHEMA.to_owned(),
            root: display_path(root.as_os_str()),
            kubelet_dir: display_path(kubelet_dir.as_os_str()),
            created: now,
            min_age_seconds: min_age,
            actions: plan.actions.iter().map(Reviewed::of).collect(),
        }
    }

    /// Reads a plan file; the error names what is wrong, never the text.
    pub fn parse(bytes: &[u8]) -> Result<PlanFile, String> {
        let plan: PlanFile = serde_json::from_slice(bytes).map_err(|e| {
            format!("not a kresidue plan (line {} column {})", e.line(), e.column())
        })?;
        if plan.schema != Self::SCHEMA {
            return Err(format!("not a kresidue plan (its schema is not {})", Self::SCHEMA));
        }
        Ok(plan)
    }

    /// Why this reviewed plan cannot be carried out on `root` and `kubelet_dir`, if so.
    /// (What the file says is not repeated.)
    pub fn mismatch(&self, root: &Path, kubelet_dir: &Path) -> Option<String> {
        if self.root != display_path(root.as_os_str()) {
            return Some("it was made for another root".to_owned());
        }
        if self.kubelet_dir != display_path(kubelet_dir.as_os_str()) {
            return Some(format!(
                "it was made for another kubelet dir than {}",
                kubelet_dir.display()
            ));
        }
        None
    }

    /// Refuses every action of `plan` (made again just now) that this reviewed plan does
    /// not hold as it is (same action, path, identities), and the pod dir of a pod that
    /// has such an action: only what was reviewed is carried out.
    pub fn restrict(&self, plan: &mut Plan) {
        let mut unreviewed: Vec<String> = Vec::new();
        for a in plan.actions.iter_mut() {
            if !self.actions.contains(&Reviewed::of(a)) {
                a.status = Status::Refused;
                a.reason = Some(
                    "not in the reviewed plan (--plan): review a new plan to remove it".into(),
                );
                unreviewed.extend(a.pod.as_ref().map(|p| p.uid.clone()));
            }
        }
        for a in plan.actions.iter_mut().filter(|a| a.status == Status::Planned) {
            let pod = a.pod.as_ref().map(|p| p.uid.as_str());
            if a.action == ActionKind::RemovePodDir
                && pod.is_some_and(|u| unreviewed.iter().any(|x| x == u))
            {
                a.status = Status::Refused;
                a.reason = Some("the pod has an action not in the reviewed plan (--plan)".into());
            }
        }
    }

    /// The reviewed actions `plan` no longer holds, as refused actions: a check said no
    /// since the review (see what is left, and why).
    pub fn no_longer_planned(&self, plan: &Plan) -> Vec<Action> {
        let now: Vec<Reviewed> = plan.actions.iter().map(Reviewed::of).collect();
        self.actions
            .iter()
            .filter(|r| !now.contains(r))
            .map(|r| Action {
                action: r.action,
                path: r.path.clone(),
                pod: r.pod.as_ref().map(|uid| PodInfo { uid: uid.clone(), namespace: None, name: None }),
                container: r.container.as_ref().map(|id| ContainerInfo { id: id.clone(), name: String::new() }),
                unmount: false,
                files: 0,
                bytes: 0,
                secrets: 0,
                status: Status::Refused,
                reason: Some("in the reviewed plan, but no longer planned: it changed or a check says no (see left)".into()),
                node_path: PathBuf::new(),
                ident: r.ident,
                pod_ident: r.pod_ident,
            })
            .collect()
    }
}

/// Files a pod dir may still hold for it to be removed once its volumes are gone:
/// kubelet's own records of the pod (relative to the pod dir).
pub fn bookkeeping(rel: &Path) -> bool {
    let parts: Vec<&std::ffi::OsStr> = rel.iter().collect();
    match parts.as_slice() {
        [f] => *f == kubelet::ETC_HOSTS,
        [d, ..] if *d == kubelet::CONTAINERS || *d == kubelet::PLUGINS => true,
        [v, plugin, _, f] => {
            *v == kubelet::VOLUMES
                && *f == kubelet::CSI_VOL_DATA
                && kubelet::VOLUME_PLUGINS.iter().any(|p| p.data.is_some() && *plugin == p.dir)
        }
        _ => false,
    }
}

/// Why a pod's residue is not planned for removal.
fn pod_blocked(pod: &PodDir, live: Option<&Live>, now: i64, opts: &PlanOptions) -> Option<String> {
    let Some(live) = live else {
        return Some("the container runtime was not asked, so the pod may be live".into());
    };
    if let Some(s) = live.pods.get(&pod.uid).and_then(|s| s.first()) {
        let state = if s.ready { "ready" } else { "not ready" };
        return Some(format!("the pod has a sandbox ({state})"));
    }
    if let Some(w) = opts.api {
        if let Some(p) = w.knows(&pod.uid) {
            return Some(match p.phase {
                "Succeeded" | "Failed" => format!(
                    "the API server knows the pod ({}, {}): delete the pod object to have its residue cleaned",
                    p.pod_ref(),
                    p.phase
                ),
                _ => format!(
                    "the API server knows the pod ({}): it may be starting or stopping",
                    p.pod_ref()
                ),
            });
        }
        if pod.mtime >= w.listed_at() {
            return Some(
                "the pod dir was modified after the API server's list (--pods) was taken, which cannot speak for it: take the list again".to_owned(),
            );
        }
    }
    let age = now.saturating_sub(pod.mtime);
    if age < i64::try_from(opts.min_age).unwrap_or(i64::MAX) {
        return Some(format!(
            "the pod dir was modified {} ago, less than --min-age {}",
            human_secs(age.max(0) as u64),
            human_secs(opts.min_age)
        ));
    }
    // Volumes only: a subPath copy's mount is a bind mount, never kubelet's tmpfs.
    let volumes: Vec<&Path> = pod
        .targets
        .iter()
        .filter(|t| t.kind != TargetKind::Subpath)
        .map(|t| t.path.as_path())
        .collect();
    let foreign = pod
        .mounts
        .iter()
        .find(|(p, _, whole_tmpfs)| !(*whole_tmpfs && volumes.contains(&p.as_path())));
    if let Some((at, what, _)) = foreign {
        return Some(format!(
            "{what} is mounted at {}: nothing of this pod is touched",
            display_path(at.as_os_str())
        ));
    }
    None
}

/// `3725` → `1h2m`: the two largest units.
pub fn human_secs(s: u64) -> String {
    let units = [(86400, "d"), (3600, "h"), (60, "m"), (1, "s")];
    let Some(first) = units.iter().position(|(u, _)| s >= *u) else { return "0s".into() };
    let (big, name) = units[first];
    let mut out = format!("{}{name}", s / big);
    if let Some((small, name)) = units.get(first + 1) {
        if s % big >= *small {
            out.push_str(&format!("{}{name}", s % big / small));
        }
    }
    out
}

/// True when node path `path` (as reported) is `dir` or inside it.
fn within(path: &str, dir: &str) -> bool {
    path.strip_prefix(dir).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// Builds the plan: a pure function of the findings (rated by the runtime's answer), what
/// the runtime said (`None`: not asked), the survey of pod dirs, the clock (Unix seconds)
/// and the options.
pub fn plan(
    findings: &[Finding],
    live: Option<&Live>,
    pods: &[PodDir],
    now: i64,
    opts: &PlanOptions,
) -> Plan {
    let mut actions = Vec::new();
    // Why the residue of each pod dir is left (pods with no action).
    let mut blocked: BTreeMap<String, String> = BTreeMap::new();
    let secrets_in = |dir: &str| -> u64 {
        findings.iter().filter(|f| within(&f.path, dir)).map(|f| f.count).sum()
    };
    for pod in pods {
        let shown = display_path(pod.path.as_os_str());
        if let Some(why) = pod_blocked(pod, live, now, opts) {
            blocked.insert(shown, why);
            continue;
        }
        let names = findings.iter().filter_map(|f| f.pod.as_ref()).find(|p| p.uid == pod.uid);
        let info = PodInfo {
            uid: pod.uid.clone(),
            namespace: names.and_then(|p| p.namespace.clone()),
            name: names.and_then(|p| p.name.clone()),
        };
        for t in &pod.targets {
            let path = display_path(t.path.as_os_str());
            actions.push(Action {
                action: if t.kind == TargetKind::Subpath {
                    ActionKind::RemoveSubpath
                } else {
                    ActionKind::RemoveVolume
                },
                secrets: secrets_in(&path),
                path: Some(path),
                pod: Some(info.clone()),
                container: None,
                unmount: t.tmpfs_mount,
                files: t.files,
                bytes: t.bytes,
                status: Status::Planned,
                reason: None,
                node_path: t.path.clone(),
                ident: Some(t.ident),
                pod_ident: Some(pod.ident),
            });
        }
        // The pod dir goes too when nothing but bookkeeping is left, and no finding is in
        // what is left.
        let targets: Vec<String> =
            pod.targets.iter().map(|t| display_path(t.path.as_os_str())).collect();
        let leftover_finding = findings
            .iter()
            .any(|f| within(&f.path, &shown) && !targets.iter().any(|t| within(&f.path, t)));
        if pod.others.is_empty() && !leftover_finding {
            actions.push(Action {
                action: ActionKind::RemovePodDir,
                path: Some(shown),
                pod: Some(info),
                container: None,
                unmount: false,
                files: pod.bookkeeping_files,
                bytes: pod.bookkeeping_bytes,
                secrets: 0,
                status: Status::Planned,
                reason: None,
                node_path: pod.path.clone(),
                ident: Some(pod.ident),
                pod_ident: Some(pod.ident),
            });
        } else if !pod.others.is_empty() {
            // How many, not which: a name with no finding is not the report's to show
            // (it may be anything a container wrote, a secret value included).
            let n = pod.others.len();
            blocked.insert(
                shown,
                format!(
                    "the pod dir holds {n} {} besides kubelet's bookkeeping",
                    if n == 1 { "entry" } else { "entries" }
                ),
            );
        } else {
            blocked.insert(
                shown,
                "secrets were found in the pod dir outside its volumes: remove them by hand"
                    .to_owned(),
            );
        }
    }
    // Only the containers of a runtime whose clean policy removes them (containerd's) are
    // removed, through CRI when CRI is that runtime: a record another runtime keeps (Docker's own containerd, whose
    // containers cri-dockerd would `docker rm`), or one whose keeper is unknown, is never
    // acted on, nor is a container any such record names.
    let cri = opts.cri_runtime.and_then(Runtime::of_cri);
    let removes = cri.filter(|r| r.spec().clean == Clean::RemoveExited);
    if let (true, Some(live), Some(cri)) = (opts.remove_exited, live, removes) {
        let mut by_container: BTreeMap<&str, u64> = BTreeMap::new();
        let mut foreign: BTreeSet<&str> = BTreeSet::new();
        for f in findings {
            let Some(c) = f.container.as_ref() else { continue };
            let Some(id) = c.id.as_deref() else { continue };
            let ours = c.runtime == Some(cri.into()) && sites::props(f.site).container_owned;
            if !ours {
                foreign.insert(id);
            } else if live.containers.get(id).is_some_and(|c| c.exited()) {
                *by_container.entry(id).or_default() += f.count;
            }
        }
        by_container.retain(|id, _| !foreign.contains(id));
        for (id, secrets) in by_container {
            let c = &live.containers[id];
            let pod = live.pods.values().flatten().find(|p| p.id == c.sandbox);
            actions.push(Action {
                action: ActionKind::RemoveContainer,
                path: None,
                pod: pod.map(|p| PodInfo {
                    uid: p.uid.clone(),
                    namespace: Some(p.namespace.clone()),
                    name: Some(p.name.clone()),
                }),
                container: Some(ContainerInfo { id: id.to_owned(), name: c.name.clone() }),
                unmount: false,
                files: 0,
                bytes: 0,
                secrets,
                status: Status::Planned,
                reason: None,
                node_path: PathBuf::new(),
                ident: None,
                pod_ident: None,
            });
        }
    }
    let left = leftovers(findings, &actions, &blocked, live);
    Plan { actions, left }
}

/// Findings no action covers, grouped by path, with why and what to do.
fn leftovers(
    findings: &[Finding],
    actions: &[Action],
    blocked: &BTreeMap<String, String>,
    live: Option<&Live>,
) -> Vec<Left> {
    let covered = |f: &Finding| {
        actions.iter().any(|a| match (&a.path, &a.container) {
            (Some(p), _) => within(&f.path, p),
            (None, Some(c)) => {
                sites::props(f.site).container_owned
                    && f.container.as_ref().and_then(|fc| fc.id.as_deref()) == Some(c.id.as_str())
            }
            _ => false,
        })
    };
    let mut by_path: BTreeMap<&str, Vec<&Finding>> = BTreeMap::new();
    for f in findings.iter().filter(|f| !covered(f)) {
        by_path.entry(f.path.as_str()).or_default().push(f);
    }
    by_path
        .into_iter()
        .map(|(path, fs)| {
            let worst = fs.iter().max_by_key(|f| f.severity).expect("one finding at least");
            let pod_block =
                blocked.iter().find(|(dir, _)| within(path, dir)).map(|(_, why)| why.clone());
            let cx = Advice { pod_block: pod_block.as_deref(), live };
            let (reason, manual) = sites::site(worst.site).advice(worst, cx);
            Left {
                path: path.to_owned(),
                site: worst.site,
                category: worst.category,
                severity: worst.severity,
                secrets: fs.iter().map(|f| f.count).sum(),
                pod: worst.pod.as_ref().map(|p| p.uid.clone()),
                container: worst.container.as_ref().and_then(|c| c.id.clone()),
                reason,
                manual,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
