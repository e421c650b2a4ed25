//! The append-only journal of `clean --apply`: one JSON object per line, written and
//! fsynced before each action (`"phase": "begin"`) and after it (`"phase": "end"`, with
//! the result), so that after a crash the last `begin` without an `end` names the action
//! that was under way. Lines hold paths, ids and counts, never a value.

use super::Action;
use anyhow::{Context, Result};
use serde::Serialize;
use std::fs::File;
use std::io::Write;
use std::path::Path;

/// An open journal.
#[derive(Debug)]
pub struct Journal {
    file: File,
    run: String,
}

#[derive(Serialize)]
struct Line<'a> {
    time: i64,
    run: &'a str,
    phase: &'a str,
    #[serde(flatten)]
    action: &'a Action,
}

impl Journal {
    /// Opens (creating it, mode 0600, and the missing dirs of its path, mode 0750) the
    /// journal at `path` for appending, through the one writer
    /// ([`crate::sys::open_append`]): a regular file of this user's or root's, never
    /// through a symlink at the file itself nor another user's on the way, and each dir
    /// made beneath the one checked before it, once the whole path is checked. A new file's
    /// and a new dir's entries are flushed to disk, or a crash could take the whole
    /// journal with them. `run` names this run in every line.
    pub fn open(path: &Path, run: String) -> Result<Journal> {
        let dirs = crate::sys::MakeDirs { mode: 0o750, most: usize::MAX };
        // Never through a symlink, never a FIFO (opening one nobody reads would hang).
        let file = crate::sys::open_append(path, dirs)
            .with_context(|| format!("journal {}", path.display()))?;
        Ok(Journal { file, run })
    }

    /// Appends one line for `action` in `phase` and waits until it is on disk.
    pub fn record(&mut self, phase: &str, action: &Action) -> std::io::Result<()> {
        let mut action = action.clone();
        action.withhold();
        let line = Line { time: crate::sys::unix_now(), run: &self.run, phase, action: &action };
        let mut bytes = serde_json::to_vec(&line)?;
        bytes.push(b'\n');
        self.file.write_all(&bytes)?;
        self.file.sync_data()
    }
}
