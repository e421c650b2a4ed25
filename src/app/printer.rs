//! The printer: where a run's notes, its `-v`/`-vv` lines and the progress bar go,
//! decided once from `--quiet`, `--verbose` and whether a person watches stderr. Notes
//! reach stderr through [`Outcome::notes`](super::Outcome::notes), which the binary
//! prints after the report: the printer collects them in the order they are printed.

use crate::progress::Bar;
use crate::scan::Progress;
use std::io::IsTerminal;

/// `-v`: a line a site, the run's priority.
pub const VERBOSE: u8 = 1;
/// `-vv`: what is searched for, the scopes, the runtime's calls.
pub const TRACE: u8 = 2;

/// A run's lines for stderr.
pub struct Printer {
    quiet: bool,
    verbose: u8,
    /// A bar only for a person watching: stderr a terminal, and the report not going to
    /// a pipe.
    watched: bool,
    /// Notes about the run's result, in order.
    lines: Vec<String>,
    /// The scan's own lines (its notes and `-v`/`-vv` lines): they follow the notes about
    /// its result (see [`Printer::release`]).
    held: Vec<String>,
}

impl Printer {
    /// The printer of a run with `--quiet`, `--verbose`, and its report to a file
    /// (`to_file`) or to stdout.
    pub fn new(quiet: bool, verbose: u8, to_file: bool) -> Printer {
        let watched =
            std::io::stderr().is_terminal() && (to_file || std::io::stdout().is_terminal());
        Printer { quiet, verbose, watched, lines: Vec::new(), held: Vec::new() }
    }

    /// The printer of a subcommand with notes only (no `--quiet`, `--verbose`, bar).
    pub fn notes_only() -> Printer {
        Printer { quiet: false, verbose: 0, watched: false, lines: Vec::new(), held: Vec::new() }
    }

    /// Whether lines of `level` ([`VERBOSE`], [`TRACE`]) are printed: for a caller that
    /// would otherwise gather what they say for nothing.
    pub fn shows(&self, level: u8) -> bool {
        self.verbose >= level
    }

    /// A note about the run's result.
    pub fn note(&mut self, line: String) {
        self.lines.push(line);
    }

    /// Notes about the run's result, in order.
    pub fn notes(&mut self, lines: impl IntoIterator<Item = String>) {
        self.lines.extend(lines);
    }

    /// A note of the scan itself, whatever the verbosity (held: [`Printer::release`]).
    pub fn scan_note(&mut self, line: String) {
        self.held.push(line);
    }

    /// The scan's lines of `level`, made only when shown (held: [`Printer::release`]).
    pub fn detail<I: IntoIterator<Item = String>>(&mut self, level: u8, lines: impl FnOnce() -> I) {
        if self.shows(level) {
            self.held.extend(lines());
        }
    }

    /// The scan's held lines follow here, after the notes about its result so far.
    pub fn release(&mut self) {
        self.lines.append(&mut self.held);
    }

    /// Runs `f` with the progress bar on stderr when a person watches and the run is not
    /// quiet (cleared when `f` returns), else with none.
    pub fn with_progress<T>(&self, f: impl FnOnce(&dyn Progress) -> T) -> T {
        if self.quiet || !self.watched {
            return f(&());
        }
        let bar = Bar::start();
        let out = f(&bar);
        bar.finish();
        out
    }

    /// The lines for stderr, in order (none with `--quiet`).
    pub fn finish(mut self) -> Vec<String> {
        self.release();
        if self.quiet {
            Vec::new()
        } else {
            self.lines
        }
    }
}
