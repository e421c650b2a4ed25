//! Carrying a plan out. Per pod, just before acting: the runtime is asked again whether
//! the pod has a sandbox, the pod dir is opened through descriptors and must be the one
//! planned (device and inode) and still old enough, and the mount table must show nothing
//! below it but a tmpfs exactly at a planned path. Then each of its actions is written to
//! the journal, done through directory descriptors ([`crate::sys::tree`]), and its result
//! written too. The first action of a pod that stops leaves the rest of that pod alone.
//! Containers are checked (still exited) and removed by the runtime.

use super::journal::Journal;
use super::{bookkeeping, Action, ActionKind, Status};
use crate::cri::Client;
use crate::sys::tree::{Dir, Removed, Stop};
use crate::sys::RootDir;
use std::path::Path;

/// What applying needs besides the plan.
pub struct Context<'a> {
    /// The scanned root.
    pub root: &'a RootDir,
    /// kubelet's root dir (node path).
    pub kubelet_dir: &'a Path,
    /// The runtime, asked again before each pod and container.
    pub client: &'a mut Client,
    /// Where every action is written first.
    pub journal: &'a mut Journal,
    /// `--min-age`, seconds.
    pub min_age: u64,
    /// When the API server's list was taken at the latest (see
    /// [`super::witness::Witness::listed_at`]): a pod dir modified since is not touched.
    pub listed_at: Option<i64>,
}

/// Carries out `actions` (a plan's, in order), setting each one's status, reason, and
/// what it removed. Errors only when the journal cannot be written: nothing is done
/// without its record.
pub fn apply(actions: &mut [Action], cx: &mut Context<'_>) -> std::io::Result<()> {
    let mut i = 0;
    while i < actions.len() {
        if let Some(signal) = crate::sys::stop_signal() {
            refuse(&mut actions[i..], &format!("interrupted by signal {signal}"));
            break;
        }
        if actions[i].action == ActionKind::RemoveContainer {
            remove_container(&mut actions[i], cx)?;
            i += 1;
            continue;
        }
        let uid = actions[i].pod.as_ref().map(|p| p.uid.clone()).unwrap_or_default();
        let n = actions[i..]
            .iter()
            .take_while(|a| {
                a.action != ActionKind::RemoveContainer
                    && a.pod.as_ref().is_some_and(|p| p.uid == uid)
            })
            .count();
        apply_pod(&uid, &mut actions[i..i + n], cx)?;
        i += n;
    }
    Ok(())
}

fn refuse(actions: &mut [Action], why: &str) {
    for a in actions.iter_mut().filter(|a| a.status == Status::Planned) {
        a.status = Status::Refused;
        a.reason = Some(why.to_owned());
    }
}

/// Whether the runtime has a sandbox for pod `uid` now: `Err` (with the reason to
/// refuse) when it cannot be asked or answers a sandbox without metadata.
fn has_sandbox(client: &mut Client, uid: &str) -> Result<bool, String> {
    let sandboxes =
        client.pod_sandboxes().map_err(|e| format!("the runtime could not be asked again: {e}"))?;
    let mut found = false;
    for s in &sandboxes {
        match &s.metadata {
            Some(m) => found |= m.uid == uid,
            None => return Err("the runtime reports a sandbox without metadata".to_owned()),
        }
    }
    Ok(found)
}

fn apply_pod(uid: &str, actions: &mut [Action], cx: &mut Context<'_>) -> std::io::Result<()> {
    let pods_node = cx.kubelet_dir.join(crate::node::kubelet::PODS);
    let pod_node = pods_node.join(uid);
    let pods = match cx.root.open_dir(pods_node.strip_prefix("/").unwrap_or(&pods_node)) {
        Ok(d) => d,
        Err(e) => {
            refuse(actions, &format!("{}: {e}", pods_node.display()));
            return Ok(());
        }
    };
    let pod = match pods.open(Path::new(uid), &pod_node) {
        Ok(d) => d,
        // Gone since the plan (kubelet cleaned up): what was planned is done.
        Err(Stop::Io(_, e)) if e.kind() == std::io::ErrorKind::NotFound => {
            for a in actions.iter_mut() {
                a.status = Status::Done;
                a.reason = Some("already gone".to_owned());
                (a.files, a.bytes) = (0, 0);
            }
            return Ok(());
        }
        Err(stop) => {
            refuse(actions, &stop.to_string());
            return Ok(());
        }
    };
    let planned_pod = actions.iter().find_map(|a| a.pod_ident);
    let min_age = i64::try_from(cx.min_age).unwrap_or(i64::MAX);
    for i in 0..actions.len() {
        if actions[i].status != Status::Planned {
            continue;
        }
        // Just before each action: no sandbox, the same pod dir, still old enough, and
        // nothing mounted below it but a whole tmpfs exactly at a planned volume.
        if let Some(signal) = crate::sys::stop_signal() {
            refuse(&mut actions[i..], &format!("interrupted by signal {signal}"));
            break;
        }
        let why = match has_sandbox(cx.client, uid) {
            Err(why) => Some(why),
            Ok(true) => Some("the pod has a sandbox now".to_owned()),
            Ok(false) => match pod.stat() {
                Err(e) => Some(e.to_string()),
                Ok((ident, _)) if planned_pod.is_some_and(|p| p != ident) => {
                    Some("the pod dir changed since it was planned".to_owned())
                }
                Ok((_, mtime)) if crate::sys::unix_now().saturating_sub(mtime) < min_age => {
                    Some("the pod dir was modified less than --min-age ago".to_owned())
                }
                Ok((_, mtime)) if cx.listed_at.is_some_and(|t| mtime >= t) => Some(
                    "the pod dir was modified after the API server's list (--pods) was taken"
                        .to_owned(),
                ),
                Ok(_) => foreign_mount(cx, &pod_node, actions),
            },
        };
        if let Some(why) = why {
            refuse(&mut actions[i..], &why);
            break;
        }
        cx.journal.record("begin", &actions[i])?;
        let result = if actions[i].action == ActionKind::RemovePodDir {
            pods.remove(uid.as_ref(), &pod_node, actions[i].ident, Some(&bookkeeping))
                .map(|r| (r, false))
        } else {
            remove_target(&pod, &pod_node, &actions[i])
        };
        let a = &mut actions[i];
        match result {
            Ok((removed, unmounted)) => {
                a.status = Status::Done;
                // What the unmounted tmpfs held went with it: as surveyed.
                if !unmounted {
                    (a.files, a.bytes) = (0, 0);
                }
                a.files += removed.files;
                a.bytes += removed.bytes;
            }
            Err(stop) => {
                a.status =
                    if matches!(stop, Stop::Io(..)) { Status::Failed } else { Status::Refused };
                a.reason = Some(stop.to_string());
                a.secrets = 0;
            }
        }
        cx.journal.record("end", &actions[i])?;
        if actions[i].status != Status::Done {
            let why = format!(
                "not done: {} stopped",
                actions[i].path.as_deref().unwrap_or("an earlier action")
            );
            refuse(&mut actions[i + 1..], &why);
            break;
        }
    }
    Ok(())
}

/// Why the pod dir `pod_node` must not be touched now because of a mount below it: any
/// mount but a whole tmpfs exactly at a planned volume; `None` when there is none. A
/// mount table that cannot be read is a reason too.
fn foreign_mount(cx: &Context<'_>, pod_node: &Path, actions: &[Action]) -> Option<String> {
    let mounts = match crate::sys::mount::mounts() {
        Ok(m) => m,
        Err(e) => return Some(format!("cannot read the mount table: {e}")),
    };
    let volumes: Vec<_> = actions
        .iter()
        .filter(|a| a.action == ActionKind::RemoveVolume)
        .map(|a| cx.root.host(&a.node_path))
        .collect();
    let m = crate::sys::mount::below(&mounts, &cx.root.host(pod_node))
        .into_iter()
        .find(|m| !(m.is_whole_tmpfs() && volumes.contains(&m.point)))?;
    let at = cx.root.node(&m.point);
    Some(format!("{} is mounted at {}: nothing of this pod is touched", m.describe(), at.display()))
}

/// Removes a volume dir or subPath copy of the pod dir `pod` (node path `pod_node`),
/// unmounting a tmpfs mounted exactly there first.
fn remove_target(pod: &Dir, pod_node: &Path, a: &Action) -> Result<(Removed, bool), Stop> {
    let rel = a.node_path.strip_prefix(pod_node).map_err(|_| Stop::Changed(a.node_path.clone()))?;
    let (Some(parent_rel), Some(name)) = (rel.parent(), rel.file_name()) else {
        return Err(Stop::Changed(a.node_path.clone()));
    };
    let parent_node = a.node_path.parent().unwrap_or(pod_node);
    let parent = match pod.open(parent_rel, parent_node) {
        Err(Stop::Io(_, e)) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok((Removed::default(), false));
        }
        r => r?,
    };
    let Some((now, kind)) = parent.stat_entry(name, &a.node_path)? else {
        return Ok((Removed::default(), false));
    };
    if kind == nix::sys::stat::SFlag::S_IFLNK {
        return Err(Stop::Symlink(a.node_path.clone()));
    }
    if a.ident.is_some_and(|planned| planned != now) {
        return Err(Stop::Changed(a.node_path.clone()));
    }
    // Only at a volume: whatever is mounted at a subPath copy stops its removal.
    let unmounted =
        a.action == ActionKind::RemoveVolume && parent.unmount_tmpfs(name, &a.node_path)?;
    let expect = if unmounted {
        // What the tmpfs covered: kubelet's dir, which must still be a dir.
        match parent.stat_entry(name, &a.node_path)? {
            Some((ident, kind)) if kind == nix::sys::stat::SFlag::S_IFDIR => Some(ident),
            Some(_) => return Err(Stop::Changed(a.node_path.clone())),
            None => return Ok((Removed::default(), true)),
        }
    } else {
        a.ident
    };
    Ok((parent.remove(name, &a.node_path, expect, None)?, unmounted))
}

fn remove_container(a: &mut Action, cx: &mut Context<'_>) -> std::io::Result<()> {
    let id = a.container.as_ref().map(|c| c.id.clone()).unwrap_or_default();
    match cx.client.container_status(&id) {
        Ok(Some(s)) if s.state == crate::cri::proto::ContainerState::ContainerExited as i32 => {}
        Ok(Some(_)) => {
            refuse(std::slice::from_mut(a), "the container is not exited any more");
            return Ok(());
        }
        Ok(None) => {
            refuse(std::slice::from_mut(a), "the runtime no longer knows the container");
            return Ok(());
        }
        Err(e) => {
            refuse(std::slice::from_mut(a), &format!("the runtime could not be asked again: {e}"));
            return Ok(());
        }
    }
    cx.journal.record("begin", a)?;
    match cx.client.remove_container(&id) {
        Ok(()) => a.status = Status::Done,
        Err(e) => {
            a.status = Status::Failed;
            a.reason = Some(e.to_string());
            a.secrets = 0;
        }
    }
    cx.journal.record("end", a)
}
