//! `kresidue pods`: what the container runtime reports, as a table or JSON.

use super::layout::{Col, Cut, Fitted, Style, View};
use crate::cri::Live;
use crate::text::terminal_safe;
use serde_json::json;
use std::io::{self, Write};

/// How `kresidue pods` prints what the runtime reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodsFormat {
    /// One row per sandbox and container, for a person, shown as the view says.
    Table(View),
    /// `kresidue/pods/v1`.
    Json,
}

/// The columns of `kresidue pods`: names cut at their end, the uid (36 characters) the
/// first to give way.
const COLS: [Col; 5] = [
    Col::fixed("POD").flex(24, Cut::End, 2),
    Col::fixed("UID").flex(13, Cut::End, 1),
    Col::fixed("SANDBOX/CONTAINER").flex(20, Cut::End, 2),
    Col::fixed("STATE"),
    Col::fixed("ID"),
];

/// Writes every sandbox (by pod) with its containers, then containers of no listed
/// sandbox.
pub fn write(
    live: &Live,
    endpoint: &str,
    runtime: &str,
    format: PodsFormat,
    out: &mut dyn Write,
) -> io::Result<()> {
    let sandboxes = live.pods.values().flatten();
    let mut containers: Vec<_> = live.containers.values().collect();
    containers.sort_by(|a, b| (&a.sandbox, &a.name, &a.id).cmp(&(&b.sandbox, &b.name, &b.id)));
    let of = |sandbox: &str| -> Vec<&crate::cri::Container> {
        containers.iter().copied().filter(|c| c.sandbox == sandbox).collect()
    };
    let ids: std::collections::HashSet<&str> = sandboxes.clone().map(|p| p.id.as_str()).collect();
    let orphans = containers.iter().filter(|c| !ids.contains(c.sandbox.as_str()));
    match format {
        PodsFormat::Json => {
            let container = |c: &crate::cri::Container| {
                json!({"id": c.id, "name": c.name, "state": c.state, "live": c.live(),
                       "sandbox": c.sandbox})
            };
            let pods: Vec<_> = sandboxes
                .map(|p| {
                    json!({"uid": p.uid, "namespace": p.namespace, "name": p.name,
                           "sandbox": p.id, "state": if p.ready { "ready" } else { "notready" },
                           "containers": of(&p.id).into_iter().map(container).collect::<Vec<_>>()})
                })
                .collect();
            let doc = json!({"schema": "kresidue/pods/v1", "endpoint": endpoint,
                "runtime": runtime, "pods": pods,
                "containers_without_sandbox": orphans.map(|c| container(c)).collect::<Vec<_>>()});
            serde_json::to_writer_pretty(&mut *out, &doc)?;
            writeln!(out)
        }
        PodsFormat::Table(view) => {
            let header = format!("runtime: {runtime} at {endpoint}");
            writeln!(out, "{}", view.line(&terminal_safe(&header)))?;
            let short = |id: &str| id.chars().take(12).collect::<String>();
            let mut rows: Vec<Vec<String>> = Vec::new();
            for p in sandboxes {
                let state = if p.ready { "ready" } else { "notready" };
                let pod = format!("{}/{}", p.namespace, p.name);
                rows.push(vec![pod, p.uid.clone(), "sandbox".into(), state.into(), short(&p.id)]);
                for c in of(&p.id) {
                    let name = format!("  {}", c.name);
                    rows.push(vec!["".into(), "".into(), name, c.state.into(), short(&c.id)]);
                }
            }
            for c in orphans {
                let sandbox = format!("(sandbox {})", short(&c.sandbox));
                rows.push(vec![sandbox, "".into(), c.name.clone(), c.state.into(), short(&c.id)]);
            }
            let rows: Vec<Vec<String>> = rows
                .into_iter()
                .map(|r| r.into_iter().map(|c| terminal_safe(&c)).collect())
                .collect();
            let fitted = Fitted::new(&COLS, &rows, view.width, 0);
            writeln!(out, "{}", fitted.header(&view))?;
            for r in &rows {
                let state = |s: &str| match s.trim() {
                    "notready" | "exited" | "unknown" => view.paint(Style::Dim, s),
                    _ => s.to_owned(),
                };
                writeln!(
                    out,
                    "{}",
                    fitted.row(r, &view, |i, s| if i == 3 { state(s) } else { s.into() })
                )?;
            }
            Ok(())
        }
    }
}
