//! The table for a person at a terminal, read at a glance: findings grouped under one
//! line per owner (a pod, a container, an image, else the site), the worst group first
//! and the worst finding first within it; each finding on one line fitted to the width
//! ([`super::layout`]), its path shortened relative to the owner's dir (whole with
//! `--wide`, and always in JSON); then a summary and what to do next. Every path and name
//! is passed through [`terminal_safe`].

use super::layout::{owner_dir, pod_line, shown_path, write_owner, Col, Cut, Fitted, Style, View};
use crate::finding::{Category, Finding, Report, Severity, SiteId, Within};
use crate::text::terminal_safe;
use std::collections::BTreeMap;
use std::io::{self, Write};

/// The columns of a finding's line.
const COLS: [Col; 6] = [
    Col::fixed("SEVERITY"),
    Col::fixed("CATEGORY").flex(10, Cut::End, 3).droppable(2),
    Col::fixed("MATCH").flex(28, Cut::End, 1),
    Col::fixed("LABEL").flex(7, Cut::End, 3).droppable(1),
    Col::fixed("PREVIEW").droppable(3),
    Col::fixed("PATH").flex(36, Cut::Start, 2),
];

/// The indent of a finding's line under its owner's.
const INDENT: usize = 2;

/// Writes the table.
pub fn write(report: &Report, view: &View, out: &mut dyn Write) -> io::Result<()> {
    let groups = groups(&report.findings, view.width.is_none());
    let rows: Vec<Vec<String>> = groups
        .iter()
        .flat_map(|g| g.findings.iter().map(|f| row(f, g, view.width.is_none())))
        .collect();
    if !rows.is_empty() {
        let fitted = Fitted::new(&COLS, &rows, view.width, INDENT);
        writeln!(out, "{}", fitted.header(view))?;
        let mut rows = rows.iter();
        for g in &groups {
            write_owner(out, &g.header, &g.dir, view)?;
            for (f, cells) in g.findings.iter().zip(rows.by_ref()) {
                let line = fitted.severity_row(cells, view, f.severity);
                writeln!(out, "{line}")?;
            }
        }
    }
    for line in view.wrap(&summary(report), 2) {
        writeln!(out, "{line}")?;
    }
    for next in next_steps(report) {
        for line in view.wrap(&format!("next: {next}"), 6) {
            writeln!(out, "{}", view.paint(Style::Bold, &line))?;
        }
    }
    for e in &report.errors {
        let line = format!("error: {}: {}", terminal_safe(&e.path), terminal_safe(&e.error));
        writeln!(out, "{}", view.line(&line))?;
    }
    for m in &report.unread_mounts {
        let line =
            format!("not read: {} ({} mounted)", terminal_safe(&m.path), terminal_safe(&m.fstype));
        writeln!(out, "{}", view.line(&line))?;
    }
    Ok(())
}

/// The findings of one owner.
struct Group<'a> {
    /// Its line (terminal-safe).
    header: String,
    /// The dir its paths are shown relative to (empty: whole paths).
    dir: String,
    /// The owner's id, as it appears in its paths (a pod's uid, a container's id).
    id: Option<&'a str>,
    /// Worst first.
    findings: Vec<&'a Finding>,
    /// The owner is a pod.
    pod: bool,
}

/// What a finding belongs to, as the table groups it.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Owner {
    Pod(String),
    Container(String),
    Image(String),
    Site(SiteId),
}

fn owner(f: &Finding) -> Owner {
    match (&f.pod, &f.container, f.images.first()) {
        (Some(p), _, _) => Owner::Pod(p.uid.clone()),
        (None, Some(c), _) if c.id.is_some() || c.name.is_some() => {
            Owner::Container(c.id.clone().or_else(|| c.name.clone()).unwrap_or_default())
        }
        (None, _, Some(image)) => Owner::Image(image.to_owned()),
        _ => Owner::Site(f.site),
    }
}

/// Groups the findings by owner, worst group first (then the most findings, then by
/// name); the worst finding first within each. `wide`: paths stay whole.
fn groups(findings: &[Finding], wide: bool) -> Vec<Group<'_>> {
    let mut by: BTreeMap<Owner, Vec<&Finding>> = BTreeMap::new();
    for f in findings {
        by.entry(owner(f)).or_default().push(f);
    }
    let mut groups: Vec<(Owner, Vec<&Finding>)> = by.into_iter().collect();
    for (_, fs) in &mut groups {
        fs.sort_by(|a, b| {
            (b.severity, a.category, &a.path, a.offset)
                .cmp(&(a.severity, b.category, &b.path, b.offset))
        });
    }
    // The worst first: the worst severity, then how many findings have it, then how many
    // in all.
    let rank = |fs: &[&Finding]| {
        let worst = fs.iter().map(|f| f.severity).max().unwrap_or(Severity::Info);
        (worst, fs.iter().filter(|f| f.severity == worst).count(), fs.len())
    };
    groups.sort_by(|(ka, a), (kb, b)| rank(b).cmp(&rank(a)).then_with(|| ka.cmp(kb)));
    groups
        .into_iter()
        .map(|(key, findings)| {
            let first = findings[0];
            let id = match &key {
                Owner::Pod(_) => first.pod.as_ref().map(|p| p.uid.as_str()),
                Owner::Container(_) => first.container.as_ref().and_then(|c| c.id.as_deref()),
                _ => None,
            };
            let id = id.filter(|id| !id.is_empty());
            let dir = if wide {
                String::new()
            } else {
                owner_dir(findings.iter().map(|f| f.path.as_str()), id)
            };
            let header = header(&key, first, &dir);
            let pod = matches!(key, Owner::Pod(_));
            Group { header: terminal_safe(&header), dir, id, findings, pod }
        })
        .collect()
}

/// The owner's line: what it is, its id (unless its `dir`, shown after it, holds it) and
/// whether it lives.
fn header(key: &Owner, f: &Finding, dir: &str) -> String {
    let alive = |live: Option<bool>| match live {
        Some(true) => "alive",
        Some(false) => "gone",
        None => "liveness unknown",
    };
    match key {
        Owner::Pod(uid) => {
            let p = f.pod.as_ref();
            let name =
                p.and_then(|p| Some(format!("{}/{}", p.namespace.as_ref()?, p.name.as_ref()?)));
            pod_line(name, uid, dir, Some(alive(p.and_then(|p| p.live))))
        }
        Owner::Container(_) => {
            let c = f.container.as_ref();
            let id = c.and_then(|c| c.id.as_deref()).map(short_id);
            let name = c.and_then(|c| c.name.clone());
            let what = [name, id].into_iter().flatten().collect::<Vec<_>>().join(" ");
            let runtime = c.and_then(|c| c.runtime).map(|r| format!("  {r}")).unwrap_or_default();
            format!("container {what}{runtime}  {}", alive(c.and_then(|c| c.live)))
        }
        Owner::Image(first) => match f.images.len() {
            1 => format!("image {first}"),
            n => format!("image {first} (+{} more)", n - 1),
        },
        Owner::Site(site) => format!("site {}", site.as_str()),
    }
}

/// Container ids are 64 hex digits; 12 name one, as `crictl ps` shows them.
fn short_id(id: &str) -> String {
    id.chars().take(12).collect()
}

fn row(f: &Finding, g: &Group<'_>, wide: bool) -> Vec<String> {
    let m = &f.matched;
    let what = match (&m.secret, &m.key, &m.rule) {
        _ if m.kind == crate::finding::MatchKind::Datastore => {
            f.secrets_at_rest.as_ref().map_or_else(|| "-".to_owned(), |c| c.line())
        }
        (Some(s), Some(k), _) => match m.encoding {
            crate::finding::Encoding::Raw => format!("{s}:{k}"),
            e => format!("{s}:{k} [{}]", e.as_str()),
        },
        (_, _, Some(r)) => format!("rule {r}{}", token_note(f)),
        _ => "-".to_owned(),
    };
    let mut category = super::plain(&f.category);
    if f.stale {
        category.push_str(" (stale)");
    }
    // A person reads which file; where in it (the byte offset) is for `--wide` and JSON.
    let mut path = shown_path(&f.path, &g.dir, g.id);
    // Under its pod's line, a finding of one of its containers names the container.
    if let (true, Some(name)) = (g.pod, f.container.as_ref().and_then(|c| c.name.as_ref())) {
        path = format!("{name}: {path}");
    }
    match f.within {
        Within::Name => path.push_str(" (its name)"),
        Within::Content if wide => path.push_str(&format!(":{}", f.offset)),
        Within::Content => {}
    }
    if f.count > 1 {
        path.push_str(&format!(" ({} times)", f.count));
    }
    [
        f.severity.to_string(),
        category,
        what,
        m.label.clone().unwrap_or_else(|| "-".to_owned()),
        f.preview.as_str().to_owned(),
        path,
    ]
    .map(|c| terminal_safe(&c))
    .to_vec()
}

/// ` (subject, expired)` for a decoded token, else nothing.
fn token_note(f: &Finding) -> String {
    let Some(t) = &f.token else { return String::new() };
    let expiry = match t.expired {
        Some(true) => "expired",
        Some(false) => "not expired",
        None => "never expires",
    };
    match (&t.subject, t.withheld.contains(&"subject")) {
        (Some(sub), _) => format!(" ({sub}, {expiry})"),
        (None, true) => format!(" (subject withheld, {expiry})"),
        (None, false) => format!(" ({expiry})"),
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn summary(r: &Report) -> String {
    let mut by_sev = Vec::new();
    for s in Severity::ALL.iter().rev() {
        let n = r.findings.iter().filter(|f| f.severity == *s).count();
        if n > 0 {
            by_sev.push(format!("{n} {s}"));
        }
    }
    let counts =
        if by_sev.is_empty() { String::new() } else { format!(" ({})", by_sev.join(", ")) };
    let sites: Vec<String> =
        r.summary.sites.iter().map(|(site, n)| format!("{} {n}", site.as_str())).collect();
    let sites =
        if sites.is_empty() { String::new() } else { format!("; by site: {}", sites.join(", ")) };
    let unread = match r.unread_mounts.len() {
        0 => String::new(),
        n => format!("; {} not read", plural(n, "mount", "mounts")),
    };
    let distros = match r.summary.distributions.as_slice() {
        [] => String::new(),
        names => format!("; distribution {}", names.join(", ")),
    };
    let unchanged = match r.summary.unchanged_files {
        0 => String::new(),
        n => format!(" ({n} unchanged, not read)"),
    };
    format!(
        "{}{counts} in {} files{unchanged}, {}, {} ms{sites}; {}{unread}; CRI {}{distros}",
        plural(r.findings.len(), "finding", "findings"),
        r.summary.files,
        super::human_size(r.summary.bytes),
        r.summary.duration_ms,
        plural(r.errors.len(), "error", "errors"),
        super::plain(&r.cri.status),
    )
}

/// What to do next, one clause each: the cleanup `kresidue clean` can plan, the leaks
/// only rotation ends, and what kept the scan from being whole.
fn next_steps(r: &Report) -> Vec<String> {
    use crate::finding::CriStatus;
    let count = |cats: &[Category]| -> Vec<&Finding> {
        r.findings.iter().filter(|f| cats.contains(&f.category)).collect()
    };
    let mut next = Vec::new();
    let orphaned = count(&[Category::OrphanedVolume, Category::StaleSubpath]);
    if !orphaned.is_empty() {
        let pods: std::collections::BTreeSet<_> =
            orphaned.iter().filter_map(|f| f.pod.as_ref().map(|p| &p.uid)).collect();
        next.push(format!(
            "{} of {} in orphaned volumes and stale subPath copies: `kresidue clean` shows the plan",
            plural(orphaned.len(), "finding", "findings"),
            plural(pods.len(), "pod", "pods"),
        ));
    }
    let dead = count(&[Category::DeadContainer]).len();
    if dead > 0 {
        next.push(format!(
            "{} in dead containers: `kresidue clean --remove-exited-containers` shows the plan",
            plural(dead, "finding", "findings"),
        ));
    }
    let leaks = count(&[
        Category::ImageLayer,
        Category::ImageConfig,
        Category::PodLog,
        Category::EnvPersisted,
        Category::ContainerLayer,
        Category::EtcdPlaintext,
    ])
    .len();
    if leaks > 0 {
        next.push(format!(
            "{} in images, logs, layers or databases: rotate those secrets (nothing removes every copy)",
            plural(leaks, "finding", "findings"),
        ));
    }
    match r.cri.status {
        CriStatus::Unreachable => next.push(
            "the runtime did not answer: liveness comes from its records alone (see the note on stderr)"
                .to_owned(),
        ),
        CriStatus::Disabled if !r.findings.is_empty() => next.push(
            "no runtime was asked: give --cri unix:///PATH to tell live pods from dead".to_owned(),
        ),
        _ => {}
    }
    if !r.errors.is_empty() {
        next.push(format!(
            "{} could not be read: see the error lines below",
            plural(r.errors.len(), "path", "paths"),
        ));
    }
    if r.summary.files == 0 && r.errors.is_empty() {
        next.push(
            "nothing was read: no kubelet or runtime dir beneath the root (is --root the node's /? -v lists the sites read)"
                .to_owned(),
        );
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_shown_relative_to_their_owner() {
        let uid = "3f1c2a8e-5b7d-4e21-9a0c-6d8e2f4b1a77";
        let pod = format!("/var/lib/kubelet/pods/{uid}/");
        let vol = format!("{pod}volumes/kubernetes.io~secret/db/password");
        let log = format!("/var/log/pods/shop_api_{uid}/app/0.log");
        assert_eq!(super::super::layout::dir_through(&vol, uid), Some(pod.as_str()));
        assert_eq!(shown_path(&vol, &pod, Some(uid)), "volumes/kubernetes.io~secret/db/password");
        assert_eq!(shown_path(&log, &pod, Some(uid)), "/var/log/pods/…/app/0.log");
        assert_eq!(shown_path("/etc/x", "", Some(uid)), "/etc/x");
        assert_eq!(super::super::layout::width(&shown_path(&vol, "", None)), vol.len());
    }
}
