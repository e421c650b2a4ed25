//! `kresidue fingerprint`: a fingerprint file of the Secrets in kubectl JSON.

use super::printer::Printer;
use super::{skip_note, Outcome};
use crate::cli::FingerprintArgs;
use crate::fingerprint::{self, FingerprintSet};
use crate::{config, kubectl, report};
use anyhow::Result;
use std::io::Write;
use std::path::Path;

/// Fingerprints the values of `--input` (or stdin) and writes the set to `-o` or stdout.
pub fn run(args: &FingerprintArgs, stdout: &mut dyn Write) -> Result<Outcome> {
    let src = args.input.as_deref().unwrap_or(Path::new("-"));
    let parsed = kubectl::parse(&config::read_input(src)?)?;
    let (set, stats) =
        FingerprintSet::build(&parsed.values, &args.label, fingerprint::random_salt()?);
    let json = set.to_json();
    match &args.output {
        Some(path) => {
            let out =
                report::Output { path: path.clone(), follow_symlink: args.follow_output_symlink };
            report::write_atomic(&out, |w| w.write_all(&json))?
        }
        None => stdout.write_all(&json)?,
    }
    let mut printer = Printer::notes_only();
    // The label is not repeated: it may be a secret pasted in the wrong place.
    printer.note(format!("fingerprinted {} values from {} secrets", stats.values, parsed.secrets));
    printer.notes(skip_note(&stats));
    if parsed.unparsable_docker_configs > 0 {
        printer.note(format!(
            "{} docker config values were not valid JSON: fingerprinted whole, registries not extracted",
            parsed.unparsable_docker_configs
        ));
    }
    Ok(Outcome::clean(printer))
}
