//! node-problem-detector's custom plugin protocol: one short line on stdout, and the exit
//! status says what it means (0 ok, 1 a problem, 2 unknown, which kresidue's own exit
//! codes already are). The line names how many findings are at or above `--fail-on` by
//! severity, and whether the runtime answered, in at most [`MAX_LINE`] bytes: the plugin
//! monitor's default `max_output_length`, past which it cuts the message. A scan that
//! `--timeout` stopped before it found anything to count is not "ok" but unknown
//! ([`unknown`]): the caller exits 2.

use crate::finding::{CriStatus, Report, Severity};
use std::io::{self, Write};

/// node-problem-detector's default `max_output_length`.
pub const MAX_LINE: usize = 80;

/// The line for `report` (without its newline); `fail_on` is the scan's `--fail-on`.
pub fn line(report: &Report, fail_on: Option<Severity>) -> String {
    let cri = match report.cri.status {
        CriStatus::Ok => "cri ok",
        CriStatus::Unreachable => "cri unreachable",
        CriStatus::Disabled => "cri not asked",
    };
    let partial = if report.summary.incomplete { ", partial" } else { "" };
    let counted: Vec<(Severity, usize)> = Severity::ALL
        .iter()
        .rev()
        .filter(|&&s| fail_on.is_some_and(|min| s >= min))
        .map(|&s| (s, report.findings.iter().filter(|f| f.severity == s).count()))
        .filter(|&(_, n)| n > 0)
        .collect();
    let total: usize = counted.iter().map(|&(_, n)| n).sum();
    let files = report.summary.files;
    let text = if unknown(report, fail_on) {
        format!("unknown: scan stopped by --timeout after {files} files, nothing found ({cri})")
    } else if total == 0 {
        format!("ok: no secret residue ({files} files, {cri})")
    } else {
        let by: Vec<String> = counted.iter().map(|(s, n)| format!("{n} {}", s.as_str())).collect();
        let noun = if total == 1 { "finding" } else { "findings" };
        format!("secret residue: {total} {noun} ({}; {cri}{partial})", by.join(", "))
    };
    cut(text)
}

/// Whether the line of `report` is `unknown`: `--timeout` stopped the scan and nothing
/// at or above `fail_on` was found in what it read.
pub fn unknown(report: &Report, fail_on: Option<Severity>) -> bool {
    report.summary.incomplete
        && !fail_on.is_some_and(|min| report.findings.iter().any(|f| f.severity >= min))
}

/// `text` cut to [`MAX_LINE`] bytes at a character boundary (the numbers come first, so a
/// cut loses at most the tail).
fn cut(mut text: String) -> String {
    if text.len() > MAX_LINE {
        let mut end = MAX_LINE;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// The line of a scan that could not be done (exit 2): `unknown: ` and the error's first
/// line, cut to [`MAX_LINE`] bytes. Errors never hold a secret value.
pub fn error_line(error: &str) -> String {
    cut(format!("unknown: {}", error.lines().next().unwrap_or_default()))
}

/// Writes the line for `report`.
pub fn write(report: &Report, fail_on: Option<Severity>, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "{}", line(report, fail_on))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A long error is cut to the limit at a character boundary, never inside one.
    #[test]
    fn lines_are_cut_at_a_character_boundary() {
        for pad in 0..4 {
            let error = format!("{}{}", "x".repeat(66 + pad), "é".repeat(20));
            let line = error_line(&error);
            assert!(line.len() <= MAX_LINE && line.len() >= MAX_LINE - 1, "{line}");
            assert!(line.starts_with("unknown: x"));
        }
        assert_eq!(error_line("first\nsecond"), "unknown: first");
    }
}
