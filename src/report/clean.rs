//! The result of `kresidue clean`: a table for a person (the actions, then what is left
//! and what to do about it, then a summary) or the `kresidue/clean/v1` JSON document.
//! Every path and reason is passed through [`terminal_safe`] in the table.

use super::layout::{
    owner_dir, pod_line, shown_path, write_owner, Col, Cut, Fitted, Style, View, DEFAULT_WIDTH,
};
use super::{human_size as size, Format};
use crate::clean::{Action, CleanReport, Left};
use crate::text::terminal_safe;
use std::io::{self, Write};

/// Writes `report` in `format`.
pub fn write(report: &CleanReport, format: Format, out: &mut dyn Write) -> io::Result<()> {
    match format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, report).map_err(io::Error::from)?;
            out.write_all(b"\n")
        }
        Format::Table(view) => table(report, &view, out),
        // (`run_clean` refuses the scan-only formats before anything runs.)
        Format::Sarif | Format::Prometheus { .. } | Format::Npd { .. } => {
            table(report, &View::plain(DEFAULT_WIDTH), out)
        }
    }
}

fn what(a: &Action, dir: &str, id: Option<&str>) -> String {
    match (&a.path, &a.container) {
        (Some(p), _) if a.unmount => format!("{} (tmpfs unmounted first)", shown_path(p, dir, id)),
        (Some(p), _) => shown_path(p, dir, id),
        (None, Some(c)) => {
            format!("container {} ({})", c.name, c.id.chars().take(12).collect::<String>())
        }
        (None, None) => "-".to_owned(),
    }
}

/// The columns of an action's line.
const ACTION_COLS: [Col; 6] = [
    Col::fixed("ACTION"),
    Col::fixed("STATUS"),
    Col::fixed("SECRETS").right().droppable(2),
    Col::fixed("FILES").right().droppable(1),
    Col::fixed("SIZE").right().droppable(3),
    Col::fixed("WHAT").flex(24, Cut::Start, 1),
];

/// The columns of a line of what is left.
const LEFT_COLS: [Col; 4] = [
    Col::fixed("SEVERITY"),
    Col::fixed("CATEGORY").flex(10, Cut::End, 2),
    Col::fixed("SECRETS").right().droppable(1),
    Col::fixed("PATH").flex(24, Cut::Start, 1),
];

const INDENT: usize = 2;

/// A group of a plan's lines: its owner's line, the dir its paths are shown from, the
/// pod's uid and its items.
type Group<'a, T> = (String, String, Option<&'a str>, Vec<&'a T>);

/// `items` grouped by pod (in their order; those of no pod together), each group's dir
/// that of its pod where its paths name one (none when `wide`). `of` gives an item's pod
/// uid, pod name and path.
fn grouped<'a, T>(
    items: &'a [impl std::borrow::Borrow<T> + 'a],
    wide: bool,
    of: impl Fn(&'a T) -> (Option<&'a str>, Option<String>, Option<&'a str>),
) -> Vec<Group<'a, T>> {
    let mut groups: Vec<Group<'a, T>> = Vec::new();
    for item in items {
        let item = item.borrow();
        let (uid, _, _) = of(item);
        match groups.iter_mut().find(|g| g.2 == uid) {
            Some(g) => g.3.push(item),
            None => groups.push((String::new(), String::new(), uid, vec![item])),
        }
    }
    for g in &mut groups {
        let paths: Vec<&str> = g.3.iter().filter_map(|i| of(i).2).collect();
        let dir = match g.2 {
            Some(uid) if !wide => owner_dir(paths.iter().copied(), Some(uid)),
            _ => String::new(),
        };
        let name = of(g.3[0]).1;
        let header = match g.2 {
            Some(uid) => pod_line(name, uid, &dir, None),
            None => "no pod".to_owned(),
        };
        g.0 = terminal_safe(&header);
        g.1 = dir;
    }
    groups
}

fn table(r: &CleanReport, view: &View, out: &mut dyn Write) -> io::Result<()> {
    let wide = view.width.is_none();
    if r.actions.is_empty() {
        writeln!(out, "nothing to do: no provably orphaned residue")?;
    } else {
        // One group per pod (its actions' paths shown from its dir), then the containers.
        let groups = grouped(&r.actions, wide, |a: &Action| {
            let uid = a.pod.as_ref().map(|p| p.uid.as_str());
            let name = a
                .pod
                .as_ref()
                .and_then(|p| Some(format!("{}/{}", p.namespace.as_ref()?, p.name.as_ref()?)));
            (uid, name, a.path.as_deref())
        });
        let rows: Vec<Vec<String>> = groups
            .iter()
            .flat_map(|(_, dir, uid, actions)| {
                actions.iter().map(move |a| {
                    vec![
                        super::plain(&a.action),
                        super::plain(&a.status),
                        a.secrets.to_string(),
                        a.files.to_string(),
                        size(a.bytes),
                        terminal_safe(&what(a, dir, *uid)),
                    ]
                })
            })
            .collect();
        let fitted = Fitted::new(&ACTION_COLS, &rows, view.width, INDENT);
        writeln!(out, "{}", fitted.header(view))?;
        let mut rows = rows.iter();
        for (header, dir, _, actions) in &groups {
            write_owner(out, header, dir, view)?;
            for (a, cells) in actions.iter().zip(rows.by_ref()) {
                writeln!(out, "{}", fitted.row(cells, view, |_, s| s.to_owned()))?;
                if let Some(why) = &a.reason {
                    for line in view.wrap(&format!("    why: {}", terminal_safe(why)), 9) {
                        writeln!(out, "{line}")?;
                    }
                }
            }
        }
    }
    if !r.left.is_empty() {
        writeln!(out)?;
        let title = format!(
            "LEFT: {} with secrets kresidue does not remove",
            if r.left.len() == 1 { "1 path".to_owned() } else { format!("{} paths", r.left.len()) }
        );
        writeln!(out, "{}", view.paint(Style::Bold, &view.line(&title)))?;
        let mut left: Vec<&Left> = r.left.iter().collect();
        left.sort_by_key(|l| std::cmp::Reverse(l.severity));
        let groups =
            grouped(&left, wide, |l: &Left| (l.pod.as_deref(), None, Some(l.path.as_str())));
        let rows: Vec<Vec<String>> = groups
            .iter()
            .flat_map(|(_, dir, uid, left)| {
                left.iter().map(move |l| {
                    vec![
                        l.severity.to_string(),
                        super::plain(&l.category),
                        l.secrets.to_string(),
                        terminal_safe(&shown_path(&l.path, dir, *uid)),
                    ]
                })
            })
            .collect();
        let fitted = Fitted::new(&LEFT_COLS, &rows, view.width, INDENT);
        writeln!(out, "{}", fitted.header(view))?;
        let mut rows = rows.iter();
        for (header, dir, _, left) in &groups {
            write_owner(out, header, dir, view)?;
            for (l, cells) in left.iter().zip(rows.by_ref()) {
                let line = fitted.severity_row(cells, view, l.severity);
                writeln!(out, "{line}")?;
                for (tag, text) in [("why:", &l.reason), ("do: ", &l.manual)] {
                    for line in view.wrap(&format!("    {tag} {}", terminal_safe(text)), 9) {
                        writeln!(out, "{line}")?;
                    }
                }
            }
        }
    }
    writeln!(out)?;
    let s = &r.summary;
    let summary = if r.applied {
        format!(
            "applied: {} of {} actions done ({} refused, {} failed); removed {} files, {}, {} secret values; {} paths left; CRI {}",
            s.done, s.actions, s.refused, s.failed, s.files, size(s.bytes), s.secrets, s.left, super::plain(&r.cri.status)
        )
    } else {
        format!(
            "dry run: {} actions would remove {} files, {}, {} secret values; {} paths left; CRI {}",
            s.actions,
            s.files,
            size(s.bytes),
            s.secrets,
            s.left,
            super::plain(&r.cri.status),
        )
    };
    for line in view.wrap(&summary, 2) {
        writeln!(out, "{line}")?;
    }
    if !r.applied && s.actions > 0 {
        let next = "next: review the plan, then run the same command with --apply --pods FILE (kubectl get pods -A -o json)";
        for line in view.wrap(next, 6) {
            writeln!(out, "{}", view.paint(Style::Bold, &line))?;
        }
    }
    for e in &r.errors {
        let line = format!("error: {}: {}", terminal_safe(&e.path), terminal_safe(&e.error));
        writeln!(out, "{}", view.line(&line))?;
    }
    Ok(())
}
