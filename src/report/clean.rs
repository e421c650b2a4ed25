//! The result of `kresidue clean`: a table for a person (the actions, then what is left
//! and what to do about it, then a summary) or the `kresidue/clean/v1` JSON document.
//! Every path and reason is passed through [`terminal_safe`] in the table.

use super::{human_size as size, Format};
use crate::clean::{Action, CleanReport};
use crate::text::terminal_safe;
use std::io::{self, Write};

/// Writes `report` in `format`.
pub fn write(report: &CleanReport, format: Format, out: &mut dyn Write) -> io::Result<()> {
    match format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, report).map_err(io::Error::from)?;
            out.write_all(b"\n")
        }
        // (`run_clean` refuses the scan-only formats before anything runs.)
        Format::Table | Format::Sarif | Format::Prometheus { .. } | Format::Npd { .. } => {
            table(report, out)
        }
    }
}

fn what(a: &Action) -> String {
    match (&a.path, &a.container) {
        (Some(p), _) if a.unmount => format!("{p} (tmpfs unmounted first)"),
        (Some(p), _) => p.clone(),
        (None, Some(c)) => {
            format!("container {} ({})", c.name, c.id.chars().take(12).collect::<String>())
        }
        (None, None) => "-".to_owned(),
    }
}

fn table(r: &CleanReport, out: &mut dyn Write) -> io::Result<()> {
    if r.actions.is_empty() {
        writeln!(out, "nothing to do: no provably orphaned residue")?;
    } else {
        writeln!(
            out,
            "{:<17} {:<8} {:>7} {:>6} {:>10}  WHAT",
            "ACTION", "STATUS", "SECRETS", "FILES", "SIZE"
        )?;
        for a in &r.actions {
            writeln!(
                out,
                "{:<17} {:<8} {:>7} {:>6} {:>10}  {}",
                super::plain(&a.action),
                super::plain(&a.status),
                a.secrets,
                a.files,
                size(a.bytes),
                terminal_safe(&what(a))
            )?;
            if let Some(why) = &a.reason {
                writeln!(out, "{:<17} why: {}", "", terminal_safe(why))?;
            }
        }
    }
    if !r.left.is_empty() {
        writeln!(out)?;
        writeln!(
            out,
            "LEFT: {} path{} with secrets kresidue does not remove",
            r.left.len(),
            if r.left.len() == 1 { "" } else { "s" }
        )?;
        for l in &r.left {
            writeln!(
                out,
                "{:<8} {:<16} {:>3}  {}",
                l.severity.to_string(),
                super::plain(&l.category),
                l.secrets,
                terminal_safe(&l.path)
            )?;
            writeln!(out, "{:<30} why: {}", "", terminal_safe(&l.reason))?;
            writeln!(out, "{:<30} do:  {}", "", terminal_safe(&l.manual))?;
        }
    }
    writeln!(out)?;
    let s = &r.summary;
    if r.applied {
        writeln!(
            out,
            "applied: {} of {} actions done ({} refused, {} failed); removed {} files, {}, {} secret values; {} paths left; CRI {}",
            s.done, s.actions, s.refused, s.failed, s.files, size(s.bytes), s.secrets, s.left, super::plain(&r.cri.status)
        )?;
    } else {
        writeln!(
            out,
            "dry run: {} actions would remove {} files, {}, {} secret values; {} paths left; CRI {}{}",
            s.actions,
            s.files,
            size(s.bytes),
            s.secrets,
            s.left,
            super::plain(&r.cri.status),
            if s.actions > 0 { "; run with --apply to act" } else { "" }
        )?;
    }
    for e in &r.errors {
        writeln!(out, "error: {}: {}", terminal_safe(&e.path), terminal_safe(&e.error))?;
    }
    Ok(())
}
