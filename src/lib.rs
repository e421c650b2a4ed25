//! kresidue finds Kubernetes Secret residue on a node's disks: Secret values still there
//! after their pods died, or leaked where they never belonged.
//!
//! Layers, top to bottom: a module uses only modules of the layers below its own, none of
//! its own layer's (`docs/ARCHITECTURE.md` draws them; the `layering` test checks every
//! `crate::` path of every module against this list, kept as `LAYERS`).
//!
//! 1. [`app`] (one module per subcommand, its notes through one printer) and [`fuzzing`]
//!    (the fuzz targets' entry points);
//! 2. [`config`] (validated settings, pure data) and [`progress`] (the progress bar);
//! 3. [`cli`] (the clap types `config` validates) and [`report`] (the writers of a finished
//!    `finding::Report`, a clean plan, the runtime's pods, the rules in SARIF);
//! 4. [`scan`] (the site-neutral engine) and [`clean`] (plans and applies cleanup);
//! 5. [`walk`] (the confined walk of the scopes) and [`severity`] (how bad a place is, by
//!    site, category and liveness);
//! 6. [`sites`] (what each place on a node is: discovery, reading, attribution, category,
//!    advice);
//! 7. [`cri`] (asks the container runtime which pods and containers live);
//! 8. [`node`] (parsers of node data);
//! 9. [`rules`] (the built-in rules; their key search rides the matcher's pass);
//! 10. [`matcher`] (the search for known values);
//! 11. [`fingerprint`] (what known values are searched as), [`oci`] (container image
//!     archives: OCI layouts, `docker save`; their tars read by the tar reader below) and
//!     [`disk`] (disk images' filesystems, read as trees of files without mounting) and
//!     [`rootfs`] (a root filesystem tarball, indexed and read as a tree of files);
//! 12. [`finding`] (the model: findings, severities, the exit contract), [`kubectl`] (the API
//!     server's JSON) and [`bbolt`] (the runtime's metadata databases, containerd's
//!     `meta.db` and the snapshotters' `metadata.db`, read from bytes), [`sqlite`] (kine's
//!     SQLite datastore and its log, read page by page), [`dqlite`] (MicroK8s's raft log
//!     and snapshots, the SQLite pages they carry), [`qcow2`] (disk images, as the virtual
//!     disk's bytes), [`partitions`] (a disk's GPT or MBR), [`xfs`] (XFS filesystems, read
//!     from a partition's bytes), [`tarball`] (tar streams: image layers,
//!     archives, root filesystem tarballs, inflated as read) and [`distros`] (the
//!     Kubernetes distributions' node layouts, as data);
//! 13. [`sys`] (the only home of system calls);
//! 14. [`text`] (how node bytes become text: paths, names withheld, text safe to show),
//!     [`prng`] (the seeded generator of rule examples and of the tests' and benches' data)
//!     and [`runtimes`] (the container runtimes kresidue knows, as data).
#![deny(missing_docs)]

pub mod app;
pub mod bbolt;
pub mod clean;
pub mod cli;
pub mod config;
pub mod cri;
pub mod disk;
pub mod distros;
pub mod dqlite;
pub mod finding;
pub mod fingerprint;
pub mod fuzzing;
pub mod kubectl;
pub mod matcher;
pub mod node;
pub mod oci;
pub mod partitions;
pub mod prng;
pub mod progress;
pub mod qcow2;
pub mod report;
pub mod rootfs;
pub mod rules;
pub mod runtimes;
pub mod scan;
pub mod severity;
pub mod sites;
pub mod sqlite;
pub mod sys;
pub mod tarball;
pub mod text;
pub mod walk;
pub mod xfs;

pub use app::Outcome;
use cli::{Cli, Command};
use finding::ExitStatus;
pub use finding::Interrupted;
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
            cli::completions(args.shell, stdout)?;
            Ok(Outcome { status: ExitStatus::Clean, notes: Vec::new() })
        }
    }
}

/// The layers of the crate's top-level modules, top to bottom, as the crate docs above
/// state them: a module may use (by a `crate::` path) only modules of the layers below its
/// own; modules of one layer use none of each other.
#[cfg(test)]
const LAYERS: &[&[&str]] = &[
    &["app", "fuzzing"],
    &["config", "progress"],
    &["cli", "report"],
    &["scan", "clean"],
    &["walk", "severity"],
    &["sites"],
    &["cri"],
    &["node"],
    &["rules"],
    &["matcher"],
    &["fingerprint", "oci", "disk", "rootfs"],
    &[
        "finding",
        "kubectl",
        "bbolt",
        "sqlite",
        "dqlite",
        "qcow2",
        "partitions",
        "xfs",
        "tarball",
        "distros",
    ],
    &["sys"],
    &["text", "prng", "runtimes"],
];

#[cfg(test)]
mod layering {
    use super::LAYERS;
    use std::collections::BTreeSet;
    use std::path::{Path, PathBuf};

    /// `src`'s code with comments, strings and character literals blanked out (each byte
    /// of them made a space, newlines kept).
    fn code(src: &str) -> String {
        let b = src.as_bytes();
        let mut out = b.to_vec();
        let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
            for c in &mut out[from..to.min(b.len())] {
                if *c != b'\n' {
                    *c = b' ';
                }
            }
        };
        let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
        let mut i = 0;
        while i < b.len() {
            let rest = &b[i..];
            if rest.starts_with(b"//") {
                let end = rest.iter().position(|&c| c == b'\n').map_or(b.len(), |n| i + n);
                blank(&mut out, i, end);
                i = end;
            } else if rest.starts_with(b"/*") {
                // Block comments nest.
                let (mut depth, mut j) = (0, i);
                while j < b.len() {
                    if b[j..].starts_with(b"/*") {
                        depth += 1;
                        j += 2;
                    } else if b[j..].starts_with(b"*/") {
                        depth -= 1;
                        j += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        j += 1;
                    }
                }
                blank(&mut out, i, j);
                i = j;
            } else if (rest.starts_with(b"r#") || rest.starts_with(b"r\""))
                && (i == 0 || !ident(b[i - 1]) || b[i - 1] == b'b' && (i < 2 || !ident(b[i - 2])))
            {
                // A raw string: `r#*"` … `"#*`.
                let hashes = rest[1..].iter().take_while(|&&c| c == b'#').count();
                if rest.get(1 + hashes) != Some(&b'"') {
                    i += 1;
                    continue;
                }
                let close = [&b"\""[..], &vec![b'#'; hashes]].concat();
                let body = i + 2 + hashes;
                let end = b[body..]
                    .windows(close.len())
                    .position(|w| w == close)
                    .map_or(b.len(), |n| body + n + close.len());
                blank(&mut out, i, end);
                i = end;
            } else if rest[0] == b'"' {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                blank(&mut out, i, j + 1);
                i = j + 1;
            } else if rest[0] == b'\'' {
                // A character literal (`'x'`, `'\n'`, `'"'`, `'é'`), or a lifetime (`'a`).
                let end = if rest.get(1) == Some(&b'\\') {
                    rest[2..].iter().position(|&c| c == b'\'').map(|n| i + 2 + n + 1)
                } else {
                    let ch = src[i + 1..].chars().next().map_or(1, char::len_utf8);
                    (rest.get(1 + ch) == Some(&b'\'')).then_some(i + 2 + ch)
                };
                match end {
                    Some(end) => {
                        blank(&mut out, i, end);
                        i = end;
                    }
                    None => i += 1,
                }
            } else {
                i += 1;
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    /// The first name of every `crate::` path in `code`: `crate::a::b` gives `a`,
    /// `crate::{a, b::c}` gives `a` and `b` (`$crate::` counts as well).
    fn crate_paths(code: &str) -> Vec<String> {
        let b = code.as_bytes();
        let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
        let skip_space = |mut j: usize| {
            while j < b.len() && b[j].is_ascii_whitespace() {
                j += 1;
            }
            j
        };
        let name_at = |j: usize| {
            let end = b[j..].iter().position(|&c| !ident(c)).map_or(b.len(), |n| j + n);
            code[j..end].to_owned()
        };
        let mut out = Vec::new();
        let mut from = 0;
        while let Some(n) = code[from..].find("crate") {
            let at = from + n;
            from = at + 5;
            if at > 0 && ident(b[at - 1]) || b.get(at + 5).is_some_and(|&c| ident(c)) {
                continue;
            }
            let j = skip_space(at + 5);
            if !code[j..].starts_with("::") {
                continue;
            }
            let j = skip_space(j + 2);
            if b.get(j) != Some(&b'{') {
                out.push(name_at(j));
                continue;
            }
            // A group: the first name of each of its top-level items.
            let (mut depth, mut k, mut start) = (0, j, true);
            while k < b.len() {
                match b[k] {
                    b'{' => {
                        depth += 1;
                        start = depth == 1;
                    }
                    b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    b',' if depth == 1 => start = true,
                    c if depth == 1 && start && ident(c) => {
                        let name = name_at(k);
                        k += name.len();
                        out.push(name);
                        start = false;
                        continue;
                    }
                    c if !c.is_ascii_whitespace() => start = false,
                    _ => {}
                }
                k += 1;
            }
        }
        out
    }

    fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("src lists") {
            let path = entry.expect("src lists").path();
            if path.is_dir() {
                sources(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    /// The layer of each top-level module.
    fn layer(module: &str) -> Option<usize> {
        LAYERS.iter().position(|l| l.contains(&module))
    }

    #[test]
    fn the_parser_sees_paths_in_code_only() {
        let src = "use crate::{a::b, c as d, e::{f, g}};\n// crate::h\n/* crate::i /* crate::j */ */\n\
                   let s = \"crate::k\"; let r = r#\"crate::l\"#; let q = '\"'; let x: &'static str = crate::m::N;\n\
                   fn f<'a>() { crate :: n(); $crate::o!(); pub(crate) fn p() {} }";
        assert_eq!(crate_paths(&code(src)), ["a", "c", "e", "m", "n", "o"]);
    }

    /// Every `crate::` path of every module under `src/` (tests included) names a module
    /// of a lower layer than its own; the table holds every module, and the crate docs
    /// list the layers in its order.
    #[test]
    fn modules_use_only_lower_layers() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        sources(&src, &mut files);
        files.sort();
        let mut modules = BTreeSet::new();
        let mut wrong = Vec::new();
        for file in &files {
            let rel = file.strip_prefix(&src).expect("under src");
            let top = rel.components().next().expect("a name").as_os_str().to_string_lossy();
            let module = top.strip_suffix(".rs").unwrap_or(&top).to_owned();
            // The crate root, the binary and the build script are no layer's.
            if ["lib", "main", "build"].contains(&module.as_str()) {
                continue;
            }
            modules.insert(module.clone());
            let text = std::fs::read_to_string(file).expect("a source file reads");
            let Some(own) = layer(&module) else { continue };
            let used: BTreeSet<String> = crate_paths(&code(&text)).into_iter().collect();
            for target in used.into_iter().filter(|t| *t != module) {
                match layer(&target) {
                    Some(l) if l > own => {}
                    Some(l) if l == own => wrong.push(format!(
                        "{}: crate::{target} is of its own layer ({module})",
                        rel.display()
                    )),
                    Some(_) => wrong.push(format!(
                        "{}: crate::{target} is of a higher layer than {module}",
                        rel.display()
                    )),
                    None => wrong.push(format!(
                        "{}: crate::{target} is no layer's module (name its home module)",
                        rel.display()
                    )),
                }
            }
        }
        let listed: BTreeSet<String> =
            LAYERS.iter().flat_map(|l| l.iter().map(|m| m.to_string())).collect();
        for m in modules.symmetric_difference(&listed) {
            wrong.push(format!("{m}: a module under src/ and in LAYERS, or neither"));
        }
        // The crate docs list the layers, one numbered item each (its links name its
        // modules), in the table's order; a blank line ends the list.
        let lib = std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs reads");
        let (mut doc, mut listing): (Vec<Vec<&str>>, bool) = (Vec::new(), false);
        for line in lib.lines().filter_map(|l| l.strip_prefix("//!")).map(str::trim) {
            if line.split_once(". ").is_some_and(|(n, _)| n.parse::<usize>().is_ok()) {
                doc.push(Vec::new());
                listing = true;
            } else if line.is_empty() {
                listing = false;
            }
            if let (true, Some(names)) = (listing, doc.last_mut()) {
                let links = line.split("[`").skip(1).filter_map(|s| s.split_once("`]"));
                names.extend(links.map(|(n, _)| n).filter(|n| layer(n).is_some()));
            }
        }
        if doc != LAYERS {
            wrong.push(format!("the crate docs' numbered layers {doc:?} are not LAYERS"));
        }
        assert!(wrong.is_empty(), "against the layers:\n{}", wrong.join("\n"));
    }
}
