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
            // Usage errors: one line, like every other error. A value given to an option
            // is not repeated: it could be a secret pasted in the wrong place.
            return usage_error(&usage_message(&e));
        }
    };
    if let Err(e) = kresidue::sys::catch_stop_signals() {
        return usage_error(&format!("cannot catch SIGINT/SIGTERM: {e}"));
    }
    let every = match &cli.command {
        kresidue::cli::Command::Scan(a) => a.every.as_deref(),
        _ => None,
    };
    let every = match every.map(kresidue::config::parse_every) {
        None => None,
        Some(Ok(d)) => Some(d),
        Some(Err(e)) => return usage_error(&e.to_string()),
    };
    let mut first = true;
    loop {
        let code = run_once(cli.clone());
        // A first failure is the configuration's: stop. Later ones are the node's moment.
        let Some(every) = every.filter(|_| !(first && code == ExitCode::from(2))) else {
            return code;
        };
        first = false;
        // Sleep in steps, so a stop signal ends the loop at once; one that came during
        // the run ends it before any sleep.
        let until = std::time::Instant::now() + every;
        loop {
            if let Some(signal) = kresidue::sys::stop_signal() {
                let stopped = ExitCode::from(128 + signal as u8);
                // A run the signal ended has said so (one line).
                if code != stopped {
                    eprintln!(
                        "kresidue: stopped by {} between scans",
                        kresidue::Interrupted(signal).name()
                    );
                }
                return stopped;
            }
            if std::time::Instant::now() >= until {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

/// A usage error in one line, built from what clap knows about it, never from the
/// arguments as given: a value, a misspelt option or a stray word may be a secret pasted
/// in the wrong place, so only names of this command's own options and subcommands (and
/// their value placeholders) appear.
fn usage_message(e: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let ctx = |k: ContextKind| match e.get(k) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        Some(ContextValue::Strings(v)) => v.first().cloned(),
        _ => None,
    };
    let arg = ctx(ContextKind::InvalidArg);
    let suggest =
        |k: ContextKind| ctx(k).map(|s| format!(" (did you mean '{s}'?)")).unwrap_or_default();
    match e.kind() {
        ErrorKind::InvalidValue | ErrorKind::ValueValidation | ErrorKind::InvalidUtf8 => {
            match arg {
                Some(arg) => format!("invalid value for '{arg}'"),
                None => "invalid value".to_owned(),
            }
        }
        ErrorKind::TooManyValues | ErrorKind::TooFewValues | ErrorKind::WrongNumberOfValues => {
            match arg {
                Some(arg) => format!("wrong number of values for '{arg}'"),
                None => "wrong number of values".to_owned(),
            }
        }
        // The InvalidArg of these is the word given: not repeated.
        ErrorKind::UnknownArgument => {
            format!("unexpected argument{}", suggest(ContextKind::SuggestedArg))
        }
        ErrorKind::InvalidSubcommand => {
            format!("unrecognized subcommand{}", suggest(ContextKind::SuggestedSubcommand))
        }
        ErrorKind::NoEquals => "an option needs its value after '='".to_owned(),
        // The rest name options and subcommands only (missing, conflicting).
        _ => {
            let text = e.render().to_string();
            let first = text.lines().next().unwrap_or("invalid arguments");
            first.strip_prefix("error: ").unwrap_or(first).to_owned()
        }
    }
}

#[allow(clippy::print_stderr)] // the one place errors and notes reach the terminal
fn usage_error(msg: &str) -> ExitCode {
    eprintln!("kresidue: error: {msg} (see kresidue --help)");
    if npd_asked() {
        println_npd(msg);
    }
    ExitCode::from(2)
}

/// Whether the command line asks for `--format npd`, read from the raw arguments: for
/// errors found before (or while) clap parses them.
fn npd_asked() -> bool {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    args.iter().any(|a| a == "--format=npd")
        || args.windows(2).any(|w| w[0] == "--format" && w[1] == "npd")
}

/// node-problem-detector reads stdout only: the `unknown:` line of a run that could not
/// be done.
#[allow(clippy::print_stdout)] // the plugin protocol's one line
fn println_npd(msg: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", kresidue::report::npd::error_line(msg));
    let _ = out.flush();
}

/// Runs the command once: prints its notes (the printer left none with `--quiet`) or its
/// error (one line); the exit code.
#[allow(clippy::print_stderr)] // the one place errors and notes reach the terminal
fn run_once(cli: kresidue::cli::Cli) -> ExitCode {
    // node-problem-detector reads stdout only: a scan that cannot be done says why there
    // too, in its one line.
    let npd = matches!(&cli.command, kresidue::cli::Command::Scan(a)
        if a.search.format == kresidue::cli::ReportFormatArg::Npd && a.search.output.is_none());
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let result =
        kresidue::run(cli, &mut out).and_then(|o| out.flush().map(|()| o).map_err(Into::into));
    match result {
        Ok(outcome) => {
            for n in &outcome.notes {
                eprintln!("kresidue: {n}");
            }
            ExitCode::from(outcome.status.code() as u8)
        }
        Err(e) if is_broken_pipe(&e) => {
            // The reader went away (`| head`): the report is not whole, so the exit code
            // cannot say what it holds. Nothing more goes to that stdout.
            eprintln!("kresidue: error: the report could not be fully written: the reader of stdout closed the pipe (broken pipe)");
            drop(out.into_parts());
            ExitCode::from(2)
        }
        Err(e) if e.downcast_ref::<kresidue::Interrupted>().is_some() => {
            let signal = e.downcast_ref::<kresidue::Interrupted>().map_or(2, |i| i.0);
            eprintln!("kresidue: {e}");
            ExitCode::from(128 + signal as u8)
        }
        Err(e) => {
            let msg = format!("{e:#}").replace('\n', " ");
            eprintln!("kresidue: error: {msg}");
            if npd {
                // What a failed write left in the buffer is not sent: one line only.
                drop(out.into_parts());
                println_npd(&msg);
            }
            ExitCode::from(2)
        }
    }
}

/// Whether `e` is a write to stdout whose reader is gone. (A write to `-o FILE` carries
/// the file's name as context: it is reported as any other error, naming it.)
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().count() == 1
        && e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}
