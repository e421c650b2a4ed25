//! The table for a person at a terminal: one line per finding, a summary, then errors.
//! Every path and name is passed through [`terminal_safe`].

use crate::finding::{Finding, Report, Severity, Within};
use crate::text::terminal_safe;
use std::io::{self, Write};

/// Writes the table.
pub fn write(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let rows: Vec<[String; 9]> = report.findings.iter().map(row).collect();
    let header =
        ["SEVERITY", "CATEGORY", "SITE", "POD", "CONTAINER", "MATCH", "LABEL", "PREVIEW", "PATH"]
            .map(String::from);
    let mut widths = header.clone().map(|h| h.len());
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    if !rows.is_empty() {
        for r in std::iter::once(&header).chain(&rows) {
            let mut line = String::new();
            for (i, (c, w)) in r.iter().zip(widths).enumerate() {
                if i + 1 == r.len() {
                    line.push_str(c);
                } else {
                    line.push_str(&format!("{c:<w$}  "));
                }
            }
            writeln!(out, "{}", line.trim_end())?;
        }
    }
    writeln!(out, "{}", summary(report))?;
    for e in &report.errors {
        writeln!(out, "error: {}: {}", terminal_safe(&e.path), terminal_safe(&e.error))?;
    }
    for m in &report.unread_mounts {
        writeln!(
            out,
            "not read: {} ({} mounted)",
            terminal_safe(&m.path),
            terminal_safe(&m.fstype)
        )?;
    }
    Ok(())
}

fn row(f: &Finding) -> [String; 9] {
    let m = &f.matched;
    let what = match (&m.secret, &m.key, &m.rule) {
        (Some(s), Some(k), _) => format!("{s}:{k} [{}]", m.encoding.as_str()),
        (_, _, Some(r)) => format!("rule {r}{}", token_note(f)),
        _ => "-".to_owned(),
    };
    let mut category = super::plain(&f.category);
    if f.stale {
        category.push_str(" (stale)");
    }
    [
        f.severity.to_string(),
        category,
        f.site.as_str().to_owned(),
        f.pod.as_ref().map_or("-".to_owned(), |p| match (&p.namespace, &p.name) {
            (Some(ns), Some(name)) => format!("{ns}/{name}"),
            _ => p.uid.clone(),
        }),
        match (&f.container, f.images.as_slice()) {
            (Some(c), _) => match (&c.name, &c.id) {
                (Some(name), _) => name.clone(),
                // Container ids are 64 hex digits; 12 name one, as `crictl ps` shows them.
                (None, Some(id)) => id.chars().take(12).collect(),
                (None, None) => "-".to_owned(),
            },
            // An image layer: its (first) image.
            (None, [one]) => format!("image {one}"),
            (None, [first, more @ ..]) => format!("image {first} (+{})", more.len()),
            (None, []) => "-".to_owned(),
        },
        what,
        m.label.clone().unwrap_or_else(|| "-".to_owned()),
        f.preview.as_str().to_owned(),
        match (f.within, f.count) {
            (Within::Name, _) => format!("{} (its name)", f.path),
            (Within::Content, 1) => format!("{}:{}", f.path, f.offset),
            (Within::Content, n) => format!("{}:{} ({n} times)", f.path, f.offset),
        },
    ]
    .map(|c| terminal_safe(&c))
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
        1 => "; 1 mount not read".to_owned(),
        n => format!("; {n} mounts not read"),
    };
    format!(
        "{} finding{}{counts} in {} files, {} bytes, {} ms{sites}; {} error{}{unread}; CRI {}",
        r.findings.len(),
        if r.findings.len() == 1 { "" } else { "s" },
        r.summary.files,
        r.summary.bytes,
        r.summary.duration_ms,
        r.errors.len(),
        if r.errors.len() == 1 { "" } else { "s" },
        super::plain(&r.cri.status),
    )
}
