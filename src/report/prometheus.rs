//! The Prometheus text exposition format, for node_exporter's textfile collector: gauges
//! of the last scan (findings by severity, category and site; files, bytes, duration,
//! errors; whether the runtime was asked and answered; when the run ended), and one presence series per
//! fingerprinted Secret key and place it was found in, for a fleet view. Written with `-o`
//! through [`super::write_atomic`], so the collector never reads half a file.

use crate::finding::{CriStatus, Finding, MatchKind, Report, Severity};
use std::collections::BTreeMap;
use std::io::{self, Write};

/// A label value with `\`, `"` and newlines escaped.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn family(out: &mut dyn Write, name: &str, help: &str) -> io::Result<()> {
    writeln!(out, "# HELP {name} {help}")?;
    writeln!(out, "# TYPE {name} gauge")
}

/// The labels of one `kresidue_secret_present` series: namespace, secret, key, label,
/// site, category.
type SecretSeries<'a> = (&'a str, &'a str, &'a str, &'a str, &'a str, String);

/// The per-secret series of `findings`, each with the worst severity it was found at:
/// one per Secret key, fingerprint label, site and category, whatever the count of files
/// and containers. Rule findings name no Secret and have none.
fn secret_series(findings: &[Finding]) -> BTreeMap<SecretSeries<'_>, Severity> {
    let mut series = BTreeMap::new();
    for f in findings {
        let m = &f.matched;
        let (MatchKind::Fingerprint, Some(secret)) = (m.kind, m.secret.as_deref()) else {
            continue;
        };
        // `<namespace>/<name>`; a Secret without a namespace (a bare `kubectl get secret
        // -o json` of one) has an empty one.
        let (namespace, name) = secret.split_once('/').unwrap_or(("", secret));
        let key = (
            namespace,
            name,
            m.key.as_deref().unwrap_or(""),
            m.label.as_deref().unwrap_or(""),
            f.site.as_str(),
            super::plain(&f.category),
        );
        let worst: &mut Severity = series.entry(key).or_insert(f.severity);
        *worst = (*worst).max(f.severity);
    }
    series
}

/// Writes the metrics of `report`; `now` is the run's end, Unix seconds. At most
/// `secret_series_max` presence series are written, the most severe first; how many more
/// there were is `kresidue_secret_series_dropped`.
pub fn write(
    report: &Report,
    now: f64,
    secret_series_max: usize,
    out: &mut dyn Write,
) -> io::Result<()> {
    let mut by: BTreeMap<(Severity, String, &str), u64> = BTreeMap::new();
    for f in &report.findings {
        *by.entry((f.severity, super::plain(&f.category), f.site.as_str())).or_default() += 1;
    }
    family(
        out,
        "kresidue_findings",
        "Secret residue findings of the last scan, by severity, category and site.",
    )?;
    for ((severity, category, site), n) in by.iter().rev() {
        writeln!(
            out,
            "kresidue_findings{{severity=\"{}\",category=\"{}\",site=\"{}\"}} {n}",
            label(severity.as_str()),
            label(category),
            label(site)
        )?;
    }
    family(
        out,
        "kresidue_findings_by_severity",
        "Findings of the last scan per severity, zero included.",
    )?;
    for s in Severity::ALL.iter().rev() {
        let n = report.findings.iter().filter(|f| f.severity == *s).count();
        writeln!(out, "kresidue_findings_by_severity{{severity=\"{}\"}} {n}", s.as_str())?;
    }
    family(
        out,
        "kresidue_files_scanned",
        "Regular files scanned by the last scan (read, or unchanged since the one before).",
    )?;
    writeln!(out, "kresidue_files_scanned {}", report.summary.files)?;
    family(
        out,
        "kresidue_bytes_scanned",
        "Bytes scanned by the last scan (read, or unchanged since the one before).",
    )?;
    writeln!(out, "kresidue_bytes_scanned {}", report.summary.bytes)?;
    family(
        out,
        "kresidue_files_unchanged",
        "Of the files scanned, those the last scan's state had unchanged: not read.",
    )?;
    writeln!(out, "kresidue_files_unchanged {}", report.summary.unchanged_files)?;
    family(
        out,
        "kresidue_bytes_unchanged",
        "Of the bytes scanned, those of files the state had unchanged: not read.",
    )?;
    writeln!(out, "kresidue_bytes_unchanged {}", report.summary.unchanged_bytes)?;
    family(out, "kresidue_scan_duration_seconds", "Wall time of the last scan.")?;
    writeln!(out, "kresidue_scan_duration_seconds {}", report.summary.duration_ms as f64 / 1000.0)?;
    family(out, "kresidue_errors", "Paths the last scan could not read.")?;
    writeln!(out, "kresidue_errors {}", report.errors.len())?;
    family(out, "kresidue_unread_mounts", "Mount points the last scan did not read (FUSE, network, or other filesystems below a scanned dir).")?;
    writeln!(out, "kresidue_unread_mounts {}", report.unread_mounts.len())?;
    write_cri(report.cri.status, out)?;
    write_at_rest(report, out)?;
    write_secret_series(report, secret_series_max, out)?;
    family(out, "kresidue_last_run_timestamp_seconds", "When the last scan ended, Unix time.")?;
    writeln!(out, "kresidue_last_run_timestamp_seconds {now:.3}")
}

/// Whether the runtime answered: `kresidue_cri_up` only when it was asked (so `== 0`
/// means asked and silent, never "not asked"), and the state set `kresidue_cri_status`
/// always, one series per status, the run's at 1 (docs/CONTRACT.md, deploy/alerts.yaml).
fn write_cri(status: CriStatus, out: &mut dyn Write) -> io::Result<()> {
    if status != CriStatus::Disabled {
        family(
            out,
            "kresidue_cri_up",
            "1 when the container runtime the last scan asked answered, 0 when it did not; absent when the scan did not ask one (--no-cri).",
        )?;
        writeln!(out, "kresidue_cri_up {}", u8::from(status == CriStatus::Ok))?;
    }
    family(
        out,
        "kresidue_cri_status",
        "The container runtime's state in the last scan: 1 for its status (ok: answered, unreachable: asked and did not answer, disabled: not asked), 0 for the others.",
    )?;
    for s in [CriStatus::Ok, CriStatus::Unreachable, CriStatus::Disabled] {
        let name = super::plain(&s);
        writeln!(
            out,
            "kresidue_cri_status{{status=\"{}\"}} {}",
            label(&name),
            u8::from(s == status)
        )?;
    }
    Ok(())
}

/// Each datastore's Secrets at rest: `kresidue_datastore_secrets` per datastore file and
/// state (`plaintext`, `encrypted`).
fn write_at_rest(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let stores: Vec<(&Finding, &crate::finding::SecretsAtRest)> =
        report.findings.iter().filter_map(|f| f.secrets_at_rest.as_ref().map(|c| (f, c))).collect();
    if stores.is_empty() {
        return Ok(());
    }
    family(
        out,
        "kresidue_datastore_secrets",
        "Secrets a cluster datastore on the node stores, by datastore (site, path) and state: plaintext (encryption at rest is off for them) or encrypted. Counted from keys and value prefixes; no value is exported.",
    )?;
    for (f, c) in stores {
        for (state, n) in [("plaintext", c.plaintext), ("encrypted", c.encrypted)] {
            writeln!(
                out,
                "kresidue_datastore_secrets{{site=\"{}\",path=\"{}\",state=\"{state}\"}} {n}",
                label(f.site.as_str()),
                label(&f.path)
            )?;
        }
    }
    Ok(())
}

/// The fleet view: `kresidue_secret_present` per Secret key and place (at most `max`, the
/// most severe kept), and how many were left out.
fn write_secret_series(report: &Report, max: usize, out: &mut dyn Write) -> io::Result<()> {
    let all = secret_series(&report.findings);
    let mut kept: Vec<(&SecretSeries<'_>, Severity)> = all.iter().map(|(k, &s)| (k, s)).collect();
    // Most severe first, then in label order; the sort is stable.
    kept.sort_by_key(|&(_, s)| std::cmp::Reverse(s));
    let dropped = kept.len().saturating_sub(max);
    kept.truncate(max);
    kept.sort_by_key(|&(k, _)| k);
    if !kept.is_empty() {
        family(
            out,
            "kresidue_secret_present",
            "1 for each fingerprinted Secret key the last scan found, by Secret (namespace, secret, key), fingerprint label and place (site, category). No value is exported.",
        )?;
    }
    for ((namespace, secret, key, fp_label, site, category), _) in kept {
        writeln!(
            out,
            "kresidue_secret_present{{namespace=\"{}\",secret=\"{}\",key=\"{}\",label=\"{}\",site=\"{}\",category=\"{}\"}} 1",
            label(namespace),
            label(secret),
            label(key),
            label(fp_label),
            label(site),
            label(category)
        )?;
    }
    family(
        out,
        "kresidue_secret_series_dropped",
        "Per-secret series of the last scan left out by --secret-series (0 when all were written).",
    )?;
    writeln!(out, "kresidue_secret_series_dropped {dropped}")
}
