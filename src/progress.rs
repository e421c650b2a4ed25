//! The progress of a scan on a terminal: a spinner on stderr with the elapsed time, the
//! files and bytes read so far and the site being read, redrawn ten times a second and
//! cleared when the scan ends. Shown only when stderr is a terminal and the report does
//! not go to a pipe, never with `--quiet` (the printer decides:
//! [`crate::app::printer::Printer::with_progress`]).

use crate::finding::SiteId;
use crate::report::human_size;
use crate::scan::Progress;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The spinner.
pub struct Bar {
    bar: ProgressBar,
    bytes: AtomicU64,
}

/// Files between two updates of the message (the count itself is updated every file).
const MESSAGE_EVERY: u64 = 16;

impl Bar {
    /// Starts the spinner on stderr.
    pub fn start() -> Bar {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("{spinner} {elapsed:>3} {pos} files, {msg}")
                .expect("a valid template"),
        );
        bar.set_message("starting");
        bar.tick();
        bar.enable_steady_tick(Duration::from_millis(100));
        Bar { bar, bytes: AtomicU64::new(0) }
    }

    /// Clears the spinner.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Progress for Bar {
    fn file(&self, site: SiteId, bytes: u64) {
        let total = self.bytes.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.bar.inc(1);
        if self.bar.position() % MESSAGE_EVERY == 1 {
            self.bar.set_message(format!("{} read; {}", human_size(total), site.as_str()));
        }
    }
}
