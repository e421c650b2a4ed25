//! kresidue finds Kubernetes Secret residue on a node's disks: Secret values still there
//! after their pods died, or leaked where they never belonged.
//!
//! Layers, top to bottom (dependencies point down; `docs/ARCHITECTURE.md` draws them):
//! [`cli`] (clap types) → [`app`] (one module per subcommand, its notes through one
//! printer) → [`config`] (validated settings, pure data) → [`scan`] (the site-neutral
//! engine) → [`sites`] (what each place on a node is: discovery, reading, attribution,
//! category, advice) and [`walk`] (the confined walk) → [`node`] (parsers of node data) →
//! [`matcher`] / [`rules`] (the search) → [`fingerprint`] / [`kubectl`] (inputs) →
//! [`severity`] and [`finding`] (the model); [`cri`] asks the container runtime which pods
//! and containers live; [`report`] writers print a finished [`finding::Report`]; [`clean`]
//! plans and applies cleanup; [`sys`] is the only home of system calls. [`bbolt`] reads the
//! runtime's metadata databases (containerd's `meta.db`, the snapshotters' `metadata.db`) from
//! bytes.
#![deny(missing_docs)]

pub mod app;
pub mod bbolt;
pub mod clean;
pub mod cli;
pub mod config;
pub mod cri;
pub mod finding;
pub mod fingerprint;
pub mod fuzzing;
pub mod kubectl;
pub mod matcher;
pub mod node;
pub mod prng;
pub mod progress;
pub mod report;
pub mod rules;
pub mod scan;
pub mod severity;
pub mod sites;
pub mod sys;
pub mod walk;

pub(crate) use app::unix_now;
pub use app::{Interrupted, Outcome};
use cli::{Cli, Command};
use finding::ExitStatus;
use std::io::Write;

/// Runs a parsed command line. Output goes to `stdout` (or the `-o` file).
pub fn run(cli: Cli, stdout: &mut dyn Write) -> anyhow::Result<Outcome> {
    match cli.command {
        Command::Scan(args) => app::scan::run(&args, stdout),
        Command::Fingerprint(args) => app::fingerprint::run(&args, stdout),
        Command::Rules(args) => app::rules::run(&args, stdout),
        Command::Pods(args) => app::pods::run(&args, stdout),
        Command::Clean(args) => app::clean::run(&args, stdout),
        Command::Completions(args) => {
            cli::completions(args.shell, stdout);
            Ok(Outcome { status: ExitStatus::Clean, notes: Vec::new() })
        }
    }
}
