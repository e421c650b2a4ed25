//! `kresidue pods`: what the container runtime says lives.

use super::printer::Printer;
use super::Outcome;
use crate::cli::{FormatArg, PodsArgs};
use crate::fingerprint::FingerprintSet;
use crate::matcher::Matcher;
use crate::report::pods::PodsFormat;
use crate::rules::Rules;
use crate::scan::Searchers;
use crate::text::withhold;
use crate::{config, cri, report, scan, sys};
use anyhow::{bail, Context, Result};
use std::io::Write;

/// Asks the runtime of `--root` (or `--cri`) for its pods and containers and prints them.
pub fn run(args: &PodsArgs, stdout: &mut dyn Write) -> Result<Outcome> {
    let root =
        sys::RootDir::open(&args.root).with_context(|| format!("root {}", args.root.display()))?;
    let (choice, timeout) = config::cri_choice(&args.cri, false, &root)?;
    let mut sets = Vec::new();
    for f in &args.fingerprints {
        let set = FingerprintSet::from_file(f, 1)
            .with_context(|| format!("fingerprint file {}", f.display()))?;
        sets.push(set);
    }
    let (matcher, rules) = (Matcher::new(sets), Rules::builtin(sys::unix_now()));
    let mut client = match cri::connect(&choice, timeout) {
        Ok(Some(client)) => client,
        Ok(None) => {
            bail!("no container runtime socket beneath --root (containerd's, CRI-O's or cri-dockerd's default): give one with --cri")
        }
        Err(u) => bail!("{u}"),
    };
    let mut live = client.live().map_err(|u| anyhow::anyhow!("{u}"))?;
    let mut runtime = client.runtime().to_owned();
    // The names the runtime gave, matched as a scan matches names; what matches is shown
    // withheld.
    let searchers = Searchers { matcher: &matcher, rules: &rules };
    let names = live.names_mut().chain(std::iter::once(&mut runtime));
    scan::withhold_names(&searchers, names.map(|n| &**n));
    withhold::names(live.names_mut().chain(std::iter::once(&mut runtime)));
    let format = match args.format {
        FormatArg::Table => PodsFormat::Table(config::view(&args.table, false)),
        FormatArg::Json => PodsFormat::Json,
    };
    report::write_pods(&live, &client.endpoint().to_string(), &runtime, format, stdout)?;
    Ok(Outcome::clean(Printer::notes_only()))
}
