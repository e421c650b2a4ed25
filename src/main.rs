//! The `kresidue` binary: parse arguments, run, map the result to exit codes 0/1/2.
//! All logic lives in the library; this file owns the process boundary.

use clap::Parser;
use std::io::Write;
use std::process::ExitCode;

#[allow(clippy::print_stderr)] // the one place errors and notes reach the terminal
fn main() -> ExitCode {
    let cli = match kresidue::cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version: clap prints them in full.
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            // Usage errors: one line, like every other error.
            let text = e.render().to_string();
            let first = text.lines().next().unwrap_or("invalid arguments");
            let first = first.strip_prefix("error: ").unwrap_or(first);
            eprintln!("kresidue: error: {first} (see kresidue --help)");
            return ExitCode::from(2);
        }
    };
    let quiet = match &cli.command {
        kresidue::cli::Command::Scan(a) => a.search.quiet,
        kresidue::cli::Command::Clean(a) => a.search.quiet,
        _ => false,
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let result =
        kresidue::run(cli, &mut out).and_then(|o| out.flush().map(|()| o).map_err(Into::into));
    match result {
        Ok(outcome) => {
            if !quiet {
                for n in &outcome.notes {
                    eprintln!("kresidue: {n}");
                }
            }
            ExitCode::from(outcome.status.code() as u8)
        }
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            let msg = format!("{e:#}").replace('\n', " ");
            eprintln!("kresidue: error: {msg}");
            ExitCode::from(2)
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
