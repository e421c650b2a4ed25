//! The app layer: one module per subcommand, each a run from parsed arguments to its
//! report and [`Outcome`], and the pieces they share (the run lock, the node's name, the
//! [`printer::Printer`] every note goes through).

pub mod clean;
pub mod fingerprint;
pub mod pods;
pub mod printer;
pub mod rules;
pub mod scan;

use crate::finding::ExitStatus;
use crate::fingerprint::{BuildStats, MAX_FORM_LEN, MIN_VALUE_LEN};
use crate::{report, sys};
use anyhow::{bail, Result};
use std::path::{Path, PathBuf};

/// A run stopped by SIGINT or SIGTERM (the signal): nothing written, lock released; the
/// process exits with 128 + the signal.
#[derive(Debug)]
pub struct Interrupted(pub i32);

impl Interrupted {
    /// The signal's name: `SIGINT`, `SIGTERM`.
    pub fn name(&self) -> &'static str {
        match self.0 {
            2 => "SIGINT",
            15 => "SIGTERM",
            _ => "a signal",
        }
    }

    /// `Err(Interrupted)` when a stop signal came.
    fn check() -> Result<()> {
        match sys::stop_signal() {
            Some(signal) => Err(Interrupted(signal).into()),
            None => Ok(()),
        }
    }
}

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A clean --apply finished the action under way: its journal says what was done.
        write!(
            f,
            "interrupted by {}: no report was written (what clean --apply did is in its journal)",
            self.name()
        )
    }
}

impl std::error::Error for Interrupted {}

/// What a run ended with: the exit status and notes for stderr (never holding values).
#[derive(Debug)]
pub struct Outcome {
    /// The exit status.
    pub status: ExitStatus,
    /// One-line notes for stderr.
    pub notes: Vec<String>,
}

impl Outcome {
    /// A run that ended well, with the printer's lines.
    fn clean(printer: printer::Printer) -> Outcome {
        Outcome { status: ExitStatus::Clean, notes: printer.finish() }
    }
}

/// Takes the run lock, without waiting: one kresidue run at a time. A lock another user
/// could hold or replace is refused; a run that cannot create or open it, or has none
/// (not root, no `$XDG_RUNTIME_DIR`), runs without it, unless it must hold it (`clean
/// --apply`).
fn take_lock(path: &Option<PathBuf>, required: bool) -> Result<Option<sys::Lock>> {
    let Some(path) = path else {
        if required {
            bail!("no run lock: give --lock FILE (a run as another user than root takes one in $XDG_RUNTIME_DIR)");
        }
        return Ok(None);
    };
    match sys::lock(path) {
        Ok(Some(lock)) => Ok(Some(lock)),
        Ok(None) => bail!(
            "another kresidue run holds the lock {}: try again when it has finished",
            path.display()
        ),
        Err(sys::LockError::Unsafe(why)) => bail!("{why}: refused (see --lock)"),
        Err(sys::LockError::Unavailable(e)) if required => {
            bail!("cannot take the lock {}: {e}", path.display())
        }
        Err(sys::LockError::Unavailable(_)) => Ok(None),
    }
}

/// Seconds since the Unix epoch (0 if the clock is before it).
pub(crate) fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// The note on the values fingerprinting left out, if any.
fn skip_note(stats: &BuildStats) -> Option<String> {
    (stats.too_short + stats.too_long > 0).then(|| {
        format!(
            "skipped {} values shorter than {MIN_VALUE_LEN} bytes and {} with a form longer than {MAX_FORM_LEN} bytes",
            stats.too_short, stats.too_long
        )
    })
}

/// The node's name: the hostname when scanning `/`, else `<root>/etc/hostname` (a regular
/// file of at most 256 bytes: a hostname is at most 64).
fn node_name(root: &sys::RootDir) -> Option<String> {
    if root.path() == Path::new("/") {
        return sys::hostname();
    }
    let s = String::from_utf8(root.read_file(Path::new("etc/hostname"), 256).ok()?).ok()?;
    let name = s.trim();
    (!name.is_empty()).then(|| report::terminal_safe(name))
}
