//! The Prometheus text exposition format, for node_exporter's textfile collector: gauges
//! of the last scan (findings by severity, category and site; files, bytes, duration,
//! errors; whether the runtime answered; when the run ended). Written with `-o` through
//! [`super::write_atomic`], so the collector never reads half a file.

use crate::finding::{CriStatus, Report, Severity};
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

/// Writes the metrics of `report`; `now` is the run's end, Unix seconds.
pub fn write(report: &Report, now: f64, out: &mut dyn Write) -> io::Result<()> {
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
    family(out, "kresidue_files_scanned", "Regular files read by the last scan.")?;
    writeln!(out, "kresidue_files_scanned {}", report.summary.files)?;
    family(out, "kresidue_bytes_scanned", "Bytes read by the last scan.")?;
    writeln!(out, "kresidue_bytes_scanned {}", report.summary.bytes)?;
    family(out, "kresidue_scan_duration_seconds", "Wall time of the last scan.")?;
    writeln!(out, "kresidue_scan_duration_seconds {}", report.summary.duration_ms as f64 / 1000.0)?;
    family(out, "kresidue_errors", "Paths the last scan could not read.")?;
    writeln!(out, "kresidue_errors {}", report.errors.len())?;
    family(out, "kresidue_cri_up", "1 when the container runtime answered the last scan, else 0 (status: ok, unreachable, disabled).")?;
    let status = super::plain(&report.cri.status);
    let up = u8::from(report.cri.status == CriStatus::Ok);
    writeln!(out, "kresidue_cri_up{{status=\"{}\"}} {up}", label(&status))?;
    family(out, "kresidue_last_run_timestamp_seconds", "When the last scan ended, Unix time.")?;
    writeln!(out, "kresidue_last_run_timestamp_seconds {now:.3}")
}
