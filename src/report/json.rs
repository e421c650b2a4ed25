//! The `kresidue/report/v1` JSON writer.

use crate::finding::Report;
use std::io::{self, Write};

/// Writes the report as one pretty-printed JSON document and a newline.
pub fn write(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, report).map_err(io::Error::from)?;
    out.write_all(b"\n")
}
