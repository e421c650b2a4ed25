//! `kresidue pods`: what the container runtime reports, as a table or JSON.

use crate::cri::Live;
use crate::text::terminal_safe;
use serde_json::json;
use std::io::{self, Write};

/// How `kresidue pods` prints what the runtime reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodsFormat {
    /// One row per sandbox and container, for a person.
    Table,
    /// `kresidue/pods/v1`.
    Json,
}

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
        PodsFormat::Table => {
            writeln!(out, "{}", terminal_safe(&format!("runtime: {runtime} at {endpoint}")))?;
            let mut rows =
                vec![["POD", "UID", "SANDBOX/CONTAINER", "STATE", "ID"].map(String::from)];
            let short = |id: &str| id.chars().take(12).collect::<String>();
            for p in sandboxes {
                let state = if p.ready { "ready" } else { "notready" };
                let pod = format!("{}/{}", p.namespace, p.name);
                rows.push([pod, p.uid.clone(), "sandbox".into(), state.into(), short(&p.id)]);
                for c in of(&p.id) {
                    let name = format!("  {}", c.name);
                    rows.push(["".into(), "".into(), name, c.state.into(), short(&c.id)]);
                }
            }
            for c in orphans {
                let sandbox = format!("(sandbox {})", short(&c.sandbox));
                rows.push([sandbox, "".into(), c.name.clone(), c.state.into(), short(&c.id)]);
            }
            let rows: Vec<[String; 5]> =
                rows.into_iter().map(|r| r.map(|c| terminal_safe(&c))).collect();
            let mut widths = [0usize; 5];
            for r in &rows {
                for (w, c) in widths.iter_mut().zip(r) {
                    *w = (*w).max(c.chars().count());
                }
            }
            for r in &rows {
                let line: Vec<String> =
                    r.iter().zip(widths).map(|(c, w)| format!("{c:<w$}")).collect();
                writeln!(out, "{}", line.join("  ").trim_end())?;
            }
            Ok(())
        }
    }
}
