//! `kresidue rules`: the built-in detection rules.

use super::printer::Printer;
use super::Outcome;
use crate::cli::{FormatArg, RulesArgs};
use crate::rules::Rules;
use crate::sys::unix_now;
use anyhow::Result;
use std::io::Write;

/// Lists the built-in rules: id, severity and description (and literals in JSON).
pub fn run(args: &RulesArgs, stdout: &mut dyn Write) -> Result<Outcome> {
    let rules = Rules::builtin(unix_now());
    match args.format {
        FormatArg::Json => {
            let list: Vec<_> = rules
                .specs()
                .map(|r| {
                    serde_json::json!({
                        "id": r.id,
                        "severity": r.severity,
                        "description": r.description,
                        "literals": r.literals.iter().map(|l| l.text).collect::<Vec<_>>(),
                    })
                })
                .collect();
            let doc = serde_json::json!({ "schema": "kresidue/rules/v1", "rules": list });
            serde_json::to_writer_pretty(&mut *stdout, &doc)?;
            writeln!(stdout)?;
        }
        FormatArg::Table => {
            let width = rules.specs().map(|r| r.id.len()).max().unwrap_or(0);
            for r in rules.specs() {
                writeln!(
                    stdout,
                    "{:<width$}  {:<8}  {}",
                    r.id,
                    r.severity.as_str(),
                    r.description
                )?;
            }
        }
    }
    Ok(Outcome::clean(Printer::notes_only()))
}
