//! Report writers and output plumbing: format dispatch and atomic file output (paths and
//! names are made text, and safe to show, by [`crate::text`]).
//!
//! Writers take a finished [`Report`] and a `Write`; they never filter, read files or
//! compute anything about findings. Values never reach this module: findings carry only
//! redacted previews.

pub mod clean;
pub mod json;
pub mod layout;
pub mod npd;
pub mod pods;
pub mod prometheus;
pub mod sarif;
pub mod table;

pub use pods::write as write_pods;

use crate::finding::{Report, Severity};
use crate::sys;
use anyhow::{bail, Context, Result};
use std::io::{self, Write};
use std::path::PathBuf;

/// Output formats of `scan`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// One line per finding grouped by owner, for a person, shown as the view says.
    Table(layout::View),
    /// `kresidue/report/v1`.
    Json,
    /// SARIF 2.1.0.
    Sarif,
    /// Prometheus text exposition (node_exporter textfile collector), with at most
    /// `secret_series` per-secret presence series.
    Prometheus {
        /// `--secret-series`.
        secret_series: usize,
    },
    /// One line for node-problem-detector's custom plugin monitor.
    Npd {
        /// `--fail-on`: the findings the line counts.
        fail_on: Option<Severity>,
    },
}

/// Writes `report` in `format`.
pub fn write(report: &Report, format: Format, out: &mut dyn Write) -> io::Result<()> {
    match format {
        Format::Table(view) => table::write(report, &view, out),
        Format::Json => json::write(report, out),
        Format::Sarif => sarif::write(report, out),
        Format::Prometheus { secret_series } => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            prometheus::write(report, now, secret_series, out)
        }
        Format::Npd { fail_on } => npd::write(report, fail_on, out),
    }
}

/// Where `-o` writes, and whether a symlink there may be followed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Output {
    /// The path given.
    pub path: PathBuf,
    /// `--follow-output-symlink`: write through a symlink at `path` to its target.
    pub follow_symlink: bool,
}

/// Writes a file atomically: the bytes go to a temporary file in the same directory,
/// which is flushed to disk and renamed over the file, so a reader never sees half a
/// file. The path is resolved through directory descriptors ([`sys::resolve_output`]):
/// a symlink at its end is refused unless `follow_symlink` (then its target is replaced
/// and the link kept), and a symlink another user planted in a sticky world-writable dir
/// is never followed. What is not a regular file (`/dev/null`, a FIFO, a terminal) is
/// written to as it is: renamed over, a device node would be replaced by a file. A FIFO
/// is waited on until it has a reader, and a stop signal ends the wait
/// ([`crate::finding::Interrupted`], nothing written).
pub fn write_atomic(
    out: &Output,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<()> {
    let path = &out.path;
    let context = || format!("cannot write {}", path.display());
    // An error while a stop signal is pending is the signal's doing (a wait it ended).
    let fail = |e: io::Error, what: String| match sys::stop_signal() {
        Some(signal) => anyhow::Error::new(crate::finding::Interrupted(signal)),
        None => anyhow::Error::new(e).context(what),
    };
    let target = match sys::open_output(path, out.follow_symlink) {
        Ok(t) => t,
        Err(e) if e.get_ref().is_some_and(|i| i.is::<sys::SymlinkNotFollowed>()) => {
            bail!(
                "cannot write {}: it is a symlink, not followed: give --follow-output-symlink \
                 to write through it",
                path.display()
            )
        }
        Err(e) => return Err(fail(e, context())),
    };
    let place = match target {
        sys::Output::Special(file) => {
            let mut w = io::BufWriter::new(sys::Patient(file));
            return fill(&mut w).and_then(|()| w.flush()).map_err(|e| fail(e, context()));
        }
        sys::Output::File(place) => place,
    };
    let mut tmp = sys::TempFile::create(&place.dir, ".kresidue-")
        .map_err(|e| fail(e, format!("cannot create a file beside {}", path.display())))?;
    {
        let mut w = io::BufWriter::new(tmp.file());
        fill(&mut w).and_then(|()| w.flush()).map_err(|e| fail(e, context()))?;
    }
    tmp.file().sync_all().with_context(context)?;
    tmp.persist(&place.name).with_context(context)?;
    Ok(())
}

/// The name a value serializes to (`orphaned-volume` for a category): its plain text.
pub fn plain<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

/// `1536` → `1.5 KiB`.
pub fn human_size(bytes: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", units[u])
    }
}
