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
}

/// Carries out `actions` (a plan's, in order), setting each one's status, reason, and
/// what it removed. Errors only when the journal cannot be written: nothing is done
/// without its record.
pub fn apply(actions: &mut [Action], cx: &mut Context<'_>) -> std::io::Result<()> {
    let mut i = 0;
    while i < actions.len() {
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

fn apply_pod(uid: &str, actions: &mut [Action], cx: &mut Context<'_>) -> std::io::Result<()> {
    // The pod still has no sandbox?
    match cx.client.pod_sandboxes() {
        Err(e) => {
            refuse(actions, &format!("the runtime could not be asked again: {e}"));
            return Ok(());
        }
        Ok(sandboxes)
            if sandboxes.iter().any(|s| s.metadata.as_ref().is_some_and(|m| m.uid == uid)) =>
        {
            refuse(actions, "the pod has a sandbox now");
            return Ok(());
        }
        Ok(_) => {}
    }
    let pods_node = cx.kubelet_dir.join("pods");
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
        Err(stop) => {
            refuse(actions, &stop.to_string());
            return Ok(());
        }
    };
    let planned =
        actions.iter().find(|a| a.action == ActionKind::RemovePodDir).and_then(|a| a.ident);
    match pod.stat() {
        Ok((ident, _)) if planned.is_some_and(|p| p != ident) => {
            refuse(actions, "the pod dir changed since it was planned");
            return Ok(());
        }
        Ok((_, mtime)) if crate::unix_now().saturating_sub(mtime) < cx.min_age as i64 => {
            refuse(actions, "the pod dir was modified since it was planned");
            return Ok(());
        }
        Ok(_) => {}
        Err(e) => {
            refuse(actions, &e.to_string());
            return Ok(());
        }
    }
    // Nothing mounted below but a tmpfs exactly at a planned path.
    let host = cx.root.path().join(pod_node.strip_prefix("/").unwrap_or(&pod_node));
    let mounts = crate::sys::mount::mounts().unwrap_or_default();
    let planned_at: Vec<_> = actions
        .iter()
        .map(|a| cx.root.path().join(a.node_path.strip_prefix("/").unwrap_or(&a.node_path)))
        .collect();
    if let Some(m) = crate::sys::mount::below(&mounts, &host)
        .into_iter()
        .find(|m| !(m.fstype == "tmpfs" && planned_at.contains(&m.point)))
    {
        let at = Path::new("/").join(m.point.strip_prefix(cx.root.path()).unwrap_or(&m.point));
        refuse(
            actions,
            &format!("{} is mounted at {}: nothing of this pod is touched", m.fstype, at.display()),
        );
        return Ok(());
    }
    for i in 0..actions.len() {
        if actions[i].status != Status::Planned {
            continue;
        }
        cx.journal.record("begin", &actions[i])?;
        let result = if actions[i].action == ActionKind::RemovePodDir {
            pods.remove(uid.as_ref(), &pod_node, actions[i].ident, Some(&bookkeeping))
        } else {
            remove_target(&pod, &pod_node, &actions[i])
        };
        let a = &mut actions[i];
        match result {
            Ok(removed) => {
                a.status = Status::Done;
                a.files = removed.files;
                a.bytes = removed.bytes;
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

/// Removes a volume dir or subPath copy of the pod dir `pod` (node path `pod_node`),
/// unmounting a tmpfs mounted exactly there first.
fn remove_target(pod: &Dir, pod_node: &Path, a: &Action) -> Result<Removed, Stop> {
    let rel = a.node_path.strip_prefix(pod_node).map_err(|_| Stop::Changed(a.node_path.clone()))?;
    let (Some(parent_rel), Some(name)) = (rel.parent(), rel.file_name()) else {
        return Err(Stop::Changed(a.node_path.clone()));
    };
    let parent_node = a.node_path.parent().unwrap_or(pod_node);
    let parent = pod.open(parent_rel, parent_node)?;
    let Some((now, kind)) = parent.stat_entry(name, &a.node_path)? else {
        return Ok(Removed::default());
    };
    if kind == nix::sys::stat::SFlag::S_IFLNK {
        return Err(Stop::Symlink(a.node_path.clone()));
    }
    if a.ident.is_some_and(|planned| planned != now) {
        return Err(Stop::Changed(a.node_path.clone()));
    }
    let expect = if parent.unmount_tmpfs(name, &a.node_path)? {
        // What the tmpfs covered: kubelet's dir, which must still be a dir.
        match parent.stat_entry(name, &a.node_path)? {
            Some((ident, kind)) if kind == nix::sys::stat::SFlag::S_IFDIR => Some(ident),
            Some(_) => return Err(Stop::Changed(a.node_path.clone())),
            None => return Ok(Removed::default()),
        }
    } else {
        a.ident
    };
    parent.remove(name, &a.node_path, expect, None)
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
