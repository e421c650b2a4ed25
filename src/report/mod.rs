//! Report writers and output plumbing: format dispatch, atomic file output, and the
//! escaping that makes hostile path names safe to show.
//!
//! Writers take a finished [`Report`] and a `Write`; they never filter, read files or
//! compute anything about findings. Values never reach this module: findings carry only
//! redacted previews.

pub mod clean;
pub mod json;
pub mod npd;
pub mod pods;
pub mod prometheus;
pub mod sarif;
pub mod table;
pub mod withhold;

pub use pods::write as write_pods;

use crate::finding::{Report, Severity};
use crate::sys;
use anyhow::{bail, Context, Result};
use std::ffi::OsStr;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// Output formats of `scan`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// One line per finding, for a person.
    Table,
    /// `kresidue/report/v1`.
    Json,
    /// SARIF 2.1.0.
    Sarif,
    /// Prometheus text exposition (node_exporter textfile collector), with at most
    /// `secret_series` per-secret presence series.
    Prometheus {
        /// `--secret-series`.
        secret_series: usize,
    },
    /// One line for node-problem-detector's custom plugin monitor.
    Npd {
        /// `--fail-on`: the findings the line counts.
        fail_on: Option<Severity>,
    },
}

/// Writes `report` in `format`.
pub fn write(report: &Report, format: Format, out: &mut dyn Write) -> io::Result<()> {
    match format {
        Format::Table => table::write(report, out),
        Format::Json => json::write(report, out),
        Format::Sarif => sarif::write(report, out),
        Format::Prometheus { secret_series } => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            prometheus::write(report, now, secret_series, out)
        }
        Format::Npd { fail_on } => npd::write(report, fail_on, out),
    }
}

/// Where `-o` writes, and whether a symlink there may be followed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Output {
    /// The path given.
    pub path: PathBuf,
    /// `--follow-output-symlink`: write through a symlink at `path` to its target.
    pub follow_symlink: bool,
}

/// Writes a file atomically: the bytes go to a temporary file in the same directory,
/// which is flushed to disk and renamed over the file, so a reader never sees half a
/// file. The path is resolved through directory descriptors ([`sys::resolve_output`]):
/// a symlink at its end is refused unless `follow_symlink` (then its target is replaced
/// and the link kept), and a symlink another user planted in a sticky world-writable dir
/// is never followed. What is not a regular file (`/dev/null`, a FIFO, a terminal) is
/// written to as it is: renamed over, a device node would be replaced by a file. A FIFO
/// is waited on until it has a reader, and a stop signal ends the wait
/// ([`crate::Interrupted`], nothing written).
pub fn write_atomic(
    out: &Output,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<()> {
    let path = &out.path;
    let context = || format!("cannot write {}", path.display());
    // An error while a stop signal is pending is the signal's doing (a wait it ended).
    let fail = |e: io::Error, what: String| match sys::stop_signal() {
        Some(signal) => anyhow::Error::new(crate::Interrupted(signal)),
        None => anyhow::Error::new(e).context(what),
    };
    let target = match sys::open_output(path, out.follow_symlink) {
        Ok(t) => t,
        Err(e) if e.get_ref().is_some_and(|i| i.is::<sys::SymlinkNotFollowed>()) => {
            bail!(
                "cannot write {}: it is a symlink, not followed: give --follow-output-symlink \
                 to write through it",
                path.display()
            )
        }
        Err(e) => return Err(fail(e, context())),
    };
    let place = match target {
        sys::Output::Special(file) => {
            let mut w = io::BufWriter::new(sys::Patient(file));
            return fill(&mut w).and_then(|()| w.flush()).map_err(|e| fail(e, context()));
        }
        sys::Output::File(place) => place,
    };
    let mut tmp = sys::TempFile::create(&place.dir, ".kresidue-")
        .map_err(|e| fail(e, format!("cannot create a file beside {}", path.display())))?;
    {
        let mut w = io::BufWriter::new(tmp.file());
        fill(&mut w).and_then(|()| w.flush()).map_err(|e| fail(e, context()))?;
    }
    tmp.file().sync_all().with_context(context)?;
    tmp.persist(&place.name).with_context(context)?;
    Ok(())
}

/// The name a value serializes to (`orphaned-volume` for a category): its plain text.
pub fn plain<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

/// `1536` → `1.5 KiB`.
pub fn human_size(bytes: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", units[u])
    }
}

/// A path as text, the one way node paths become text: UTF-8 where it is valid, each
/// invalid byte as `\xNN` and a backslash as `\\` (so the text gives the bytes back:
/// [`path_bytes`]), and each component holding secret material found in a name as
/// [`withhold::WITHHELD`] (see [`withhold`]).
pub fn display_path(p: &OsStr) -> String {
    let bytes = p.as_encoded_bytes();
    let mut out = String::with_capacity(bytes.len());
    for (i, name) in bytes.split(|&b| b == b'/').enumerate() {
        if i > 0 {
            out.push('/');
        }
        if withhold::is_withheld(name) {
            out.push_str(withhold::WITHHELD);
            continue;
        }
        for chunk in name.utf8_chunks() {
            for part in chunk.valid().split_inclusive('\\') {
                out.push_str(part);
                if part.ends_with('\\') {
                    out.push('\\');
                }
            }
            for b in chunk.invalid() {
                out.push_str(&format!("\\x{b:02x}"));
            }
        }
    }
    out
}

/// The bytes a [`display_path`] text stands for: `\xNN` and `\\` undone (a withheld
/// component stays [`withhold::WITHHELD`]).
pub fn path_bytes(shown: &str) -> Vec<u8> {
    let b = shown.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |at: usize| b.get(at).and_then(|&c| (c as char).to_digit(16));
        match (b[i], b.get(i + 1)) {
            (b'\\', Some(b'\\')) => {
                out.push(b'\\');
                i += 2;
            }
            (b'\\', Some(b'x')) if hex(i + 2).is_some() && hex(i + 3).is_some() => {
                out.push((hex(i + 2).unwrap_or(0) * 16 + hex(i + 3).unwrap_or(0)) as u8);
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// A [`display_path`] text made again: components found since to hold secret material are
/// withheld (for paths made into text before the names were matched, by the walk).
pub fn redisplay(shown: &str) -> String {
    display_path(OsStr::from_bytes(&path_bytes(shown)))
}

/// Characters that act on a terminal or hide instead of showing: controls (Cc), format
/// characters (Cf: bidi marks and overrides, zero-width characters, the soft hyphen,
/// Unicode tags), line and paragraph separators (Zl, Zp), and the rest of the tag and
/// invisible-operator blocks (unassigned there).
static HOSTILE: std::sync::LazyLock<regex_automata::meta::Regex> = std::sync::LazyLock::new(|| {
    regex_automata::meta::Regex::new(
        r"[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\x{2060}-\x{206F}\x{E0000}-\x{E007F}]",
    )
    .expect("a valid character class")
});

/// Text made safe for a terminal or a one-line message: every character of `HOSTILE`
/// (controls, format characters, line and paragraph separators) is shown as an escape
/// (`\u{202e}`) instead of acting on the display.
pub fn terminal_safe(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut last = 0;
    for m in HOSTILE.find_iter(s) {
        out.push_str(&s[last..m.start()]);
        for c in s[m.range()].chars() {
            out.extend(c.escape_default());
        }
        last = m.end();
    }
    out.push_str(&s[last..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn paths_and_terminal_escaping() {
        assert_eq!(display_path(OsStr::from_bytes(b"/a/\xffb\xc3")), "/a/\\xffb\\xc3");
        assert_eq!(display_path(OsStr::from_bytes(b"/a\\xff/b\\")), "/a\\\\xff/b\\\\");
        assert_eq!(terminal_safe("a\nb\x1b[31m\u{202e}c"), "a\\nb\\u{1b}[31m\\u{202e}c");
        assert_eq!(terminal_safe("/var/lib/kubelet/ünï"), "/var/lib/kubelet/ünï");
        for c in [
            '\u{2028}',
            '\u{2029}',
            '\u{ad}',
            '\u{e0001}',
            '\u{e0041}',
            '\u{e007f}',
            '\u{200b}',
            '\u{2065}',
            '\u{feff}',
            '\u{61c}',
            '\u{85}',
            '\u{fff9}',
        ] {
            let shown = terminal_safe(&format!("a{c}b"));
            assert!(!shown.contains(c), "U+{:04X}: {shown}", c as u32);
            assert!(shown.starts_with('a') && shown.ends_with('b'), "{shown}");
        }
    }

    #[test]
    fn display_paths_give_their_bytes_back() {
        for raw in [&b"/a/\xffb\xc3"[..], b"/x\\xff/\\\\/\\", b"/\xe2\x80/\\x4", b"", b"/"] {
            let shown = display_path(OsStr::from_bytes(raw));
            assert_eq!(path_bytes(&shown), raw, "{shown}");
            assert_eq!(redisplay(&shown), shown);
        }
    }

    #[test]
    fn withheld_components_are_not_shown() {
        // Material no other test uses: the record lasts for the process.
        let material = b"q7Zr-withheld-in-a-unit-test-0x5e";
        let path = [&b"/var/log/pods/ns_"[..], material, b"_uid/app/0.log"].concat();
        let before = display_path(OsStr::from_bytes(&path));
        assert!(before.contains("q7Zr"));
        withhold::withhold(material);
        let after = display_path(OsStr::from_bytes(&path));
        assert_eq!(after, "/var/log/pods/<withheld>/app/0.log");
        assert_eq!(redisplay(&before), after);
        assert_eq!(withhold::shown(std::str::from_utf8(material).unwrap()), withhold::WITHHELD);
        assert_eq!(withhold::shown("app"), "app");
    }
}
