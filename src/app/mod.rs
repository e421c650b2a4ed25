//! The app layer: one module per subcommand, each a run from parsed arguments to its
//! report and [`Outcome`], and the pieces they share (the run lock, the node's name, the
//! [`printer::Printer`] every note goes through).

pub mod clean;
pub mod fingerprint;
pub mod pods;
pub mod printer;
pub mod rules;
pub mod scan;

use crate::finding::{ExitStatus, Interrupted};
use crate::fingerprint::{BuildStats, MAX_FORM_LEN, MIN_VALUE_LEN};
use crate::{config, sys, text};
use anyhow::{bail, Result};
use std::path::Path;

/// `Err(Interrupted)` when a stop signal came.
fn stopped() -> Result<()> {
    match sys::stop_signal() {
        Some(signal) => Err(Interrupted(signal).into()),
        None => Ok(()),
    }
}

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

/// Takes the run lock, without waiting: one kresidue run at a time on each node root
/// (`config::RunLock`: every root with the one `--lock` names). A lock another user
/// could hold or replace is refused; a run that cannot create or open it, or has none
/// (not root, no `$XDG_RUNTIME_DIR`), runs without it, unless it must hold it (`clean
/// --apply`). `root` is the root scanned, for the messages.
fn take_lock(
    lock: &Option<config::RunLock>,
    root: &Path,
    required: bool,
) -> Result<Option<sys::Lock>> {
    let Some(lock) = lock else {
        if required {
            bail!("no run lock: give --lock FILE (a run as another user than root takes one in $XDG_RUNTIME_DIR)");
        }
        return Ok(None);
    };
    let path = lock.path.display();
    let root = text::display_path(root.as_os_str());
    match sys::lock(&lock.path, lock.per_root) {
        Ok(Some(held)) => Ok(Some(held)),
        Ok(None) if lock.per_root => bail!(
            "another kresidue run holds the lock of root {root} ({path}): try again when it has finished"
        ),
        Ok(None) => bail!(
            "another kresidue run holds the lock {path} (named by --lock, one lock for every root; this run's is {root}): try again when it has finished, or drop --lock for a lock per root"
        ),
        Err(sys::LockError::Unsafe(why)) => bail!("{why}: refused (see --lock)"),
        Err(sys::LockError::Unavailable(e)) if required => {
            bail!("cannot take the lock {path}: {e}")
        }
        Err(sys::LockError::Unavailable(_)) => Ok(None),
    }
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
    (!name.is_empty()).then(|| text::terminal_safe(name))
}
