//! `kresidue pods`: what the container runtime says lives.

use super::printer::Printer;
use super::Outcome;
use crate::cli::{FormatArg, PodsArgs};
use crate::report::pods::PodsFormat;
use crate::{config, cri, report, sys};
use anyhow::{bail, Context, Result};
use std::io::Write;

/// Asks the runtime of `--root` (or `--cri`) for its pods and containers and prints them.
pub fn run(args: &PodsArgs, stdout: &mut dyn Write) -> Result<Outcome> {
    let root =
        sys::RootDir::open(&args.root).with_context(|| format!("root {}", args.root.display()))?;
    let (choice, timeout) = config::cri_choice(&args.cri, false, &root)?;
    let mut client = match cri::connect(&choice, timeout) {
        Ok(Some(client)) => client,
        Ok(None) => {
            bail!("no container runtime socket beneath --root (containerd's, CRI-O's or cri-dockerd's default): give one with --cri")
        }
        Err(u) => bail!("{u}"),
    };
    let live = client.live().map_err(|u| anyhow::anyhow!("{u}"))?;
    let format = match args.format {
        FormatArg::Table => PodsFormat::Table(config::view(&args.table, false)),
        FormatArg::Json => PodsFormat::Json,
    };
    report::write_pods(&live, &client.endpoint().to_string(), client.runtime(), format, stdout)?;
    Ok(Outcome::clean(Printer::notes_only()))
}
