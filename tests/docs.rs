//! The documentation holds together: every `docs/<NAME>.md` the README, the code, the
//! scripts and the benchmarks cite exists; nothing cites the design notes kept outside
//! this repository; the README stays a user's guide (at most [`README_MAX_LINES`] lines);
//! every relative link of the README and `docs/` leads to a file that exists, and every
//! `#anchor` in one to a heading of its file (GitHub's slugs); and every repository path
//! written in backticks there names a file or dir that exists.
//!
//! No binary is run: these read the tree.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The README is the user's guide; design, node layout and measurements live in `docs/`.
const README_MAX_LINES: usize = 520;

/// The repository's root.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The text of `rel`, a path from the root.
fn read(rel: &Path) -> String {
    fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{}: {e}", rel.display()))
}

/// The files below `dir` (a path from the root) whose names end in one of `exts` (any
/// name when `exts` is empty), as paths from the root, sorted.
fn files(dir: &str, exts: &[&str]) -> Vec<PathBuf> {
    fn walk(abs: &Path, rel: &Path, exts: &[&str], out: &mut Vec<PathBuf>) {
        let Ok(entries) = fs::read_dir(abs) else { return };
        for e in entries.flatten() {
            let name = e.file_name();
            let (abs, rel) = (abs.join(&name), rel.join(&name));
            let Ok(kind) = e.file_type() else { continue };
            if kind.is_dir() {
                walk(&abs, &rel, exts, out);
            } else if kind.is_file() {
                let n = name.to_string_lossy();
                if exts.is_empty() || exts.iter().any(|x| n.ends_with(x)) {
                    out.push(rel);
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(&root().join(dir), Path::new(dir), exts, &mut out);
    out.sort();
    out
}

/// `README.md` and `docs/*.md`.
fn guides() -> Vec<PathBuf> {
    let mut all = vec![PathBuf::from("README.md")];
    all.extend(files("docs", &[".md"]));
    all
}

/// Whether `b` may be part of a path or a name (so that `docs/` after it is not a path's
/// start: `…/docs/book/…` of another project).
fn is_path_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"/._-".contains(&b)
}

/// Each `<dir>/<NAME>.md` in `text` whose path starts at a word boundary: the names (with
/// the `.md`) that follow `prefix`.
fn cited(text: &str, prefix: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    for (at, _) in text.match_indices(prefix) {
        if at > 0 && is_path_byte(bytes[at - 1]) {
            continue;
        }
        let rest = &text[at + prefix.len()..];
        let end = rest
            .bytes()
            .position(|b| !(b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
            .unwrap_or(rest.len());
        if rest[end..].starts_with(".md") {
            out.push(format!("{}.md", &rest[..end]));
        }
    }
    out
}

/// Each bare `NAME.md` in `text` (an upper-case name, not a path's last part): the design
/// notes' way of citing each other, meaningless in this repository.
fn bare_doc_names(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    for (at, _) in text.match_indices(".md") {
        let start = text[..at]
            .bytes()
            .rposition(|b| {
                !(b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
            })
            .map_or(0, |p| p + 1);
        let name = &text[start..at];
        let after = bytes.get(at + 3).copied().unwrap_or(b' ');
        let whole = !name.is_empty()
            && name.as_bytes()[0].is_ascii_uppercase()
            && !(after.is_ascii_alphanumeric() || after == b'_');
        let in_path = start > 0 && is_path_byte(bytes[start - 1]);
        if whole && !in_path && name != "README" {
            out.push(format!("{name}.md"));
        }
    }
    out
}

/// The files that may cite `docs/`: the README, every source file, the scripts and the
/// benchmarks (and `docs/` itself, and the tests).
fn citing_files() -> Vec<PathBuf> {
    let mut all = guides();
    all.extend(files("src", &[".rs"]));
    all.extend(files("scripts", &[]));
    all.extend(files("benches", &[".rs"]));
    all.extend(files("tests", &[".rs"]));
    all
}

#[test]
fn every_cited_doc_exists() {
    let mut missing = Vec::new();
    for f in citing_files() {
        for name in cited(&read(&f), "docs/") {
            if !root().join("docs").join(&name).is_file() {
                missing.push(format!("{} cites docs/{name}", f.display()));
            }
        }
    }
    assert!(missing.is_empty(), "missing docs:\n{}", missing.join("\n"));
}

#[test]
fn nothing_cites_the_design_notes_outside_the_repository() {
    let mut all = guides();
    all.extend(files("src", &[".rs"]));
    let mut bad = Vec::new();
    for f in &all {
        let text = read(f);
        for (n, line) in text.lines().enumerate() {
            for outside in ["../shared", "shared/design"] {
                if line.contains(outside) {
                    bad.push(format!("{}:{}: cites {outside}", f.display(), n + 1));
                }
            }
            // In docs/ a bare name is a link to a sibling; anywhere else it must say where.
            let in_docs = f.starts_with("docs");
            for name in bare_doc_names(line) {
                let sibling = in_docs && root().join("docs").join(&name).is_file();
                if !sibling {
                    bad.push(format!("{}:{}: cites a bare {name}", f.display(), n + 1));
                }
            }
        }
    }
    assert!(bad.is_empty(), "citations that lead nowhere here:\n{}", bad.join("\n"));
}

#[test]
fn the_readme_is_a_users_guide() {
    let lines = read(Path::new("README.md")).lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines (at most {README_MAX_LINES}): move design, node layout \
         and measurements to docs/"
    );
}

/// The lines of a Markdown text outside fenced code blocks, with their line numbers.
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<&str> = None;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let t = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| t.starts_with(m));
        match (fence, marker) {
            (None, Some(m)) => fence = Some(m),
            (Some(f), Some(m)) if f == m => fence = None,
            (Some(_), _) => {}
            (None, None) => out.push((n + 1, line)),
        }
    }
    out
}

/// `line` without its code spans (where `](` is not a link).
fn without_code(line: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
        } else if !in_code {
            out.push(c);
        }
    }
    out
}

/// GitHub's anchor of a heading's text: lower case; every character but letters, digits,
/// `-`, `_` and spaces dropped; each space a `-`.
fn slug(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter(|&c| c.is_alphanumeric() || c == '-' || c == '_' || c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown text's headings, a repeated one numbered as GitHub does
/// (`name`, `name-1`, …).
fn anchors(text: &str) -> HashSet<String> {
    let mut out = HashSet::new();
    for (_, line) in prose(text) {
        let hashes = line.bytes().take_while(|&b| b == b'#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(line[hashes..].trim().trim_end_matches('#').trim());
        let mut anchor = base.clone();
        let mut n = 0;
        while out.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        out.insert(anchor);
    }
    out
}

/// The targets of the inline links of a Markdown line: `[text](target)`.
fn link_targets(line: &str) -> Vec<String> {
    let line = without_code(line);
    let mut out = Vec::new();
    for (at, _) in line.match_indices("](") {
        let rest = &line[at + 2..];
        if let Some(end) = rest.find(')') {
            let target = rest[..end].split_whitespace().next().unwrap_or("");
            out.push(target.to_owned());
        }
    }
    out
}

/// `path` with its `.` and `..` parts resolved (lexically: the repository has no
/// symlinks on these paths).
fn normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[test]
fn every_link_and_anchor_resolves() {
    let mut bad = Vec::new();
    for f in guides() {
        let text = read(&f);
        let dir = f.parent().unwrap_or(Path::new(""));
        for (n, line) in prose(&text) {
            for target in link_targets(line) {
                if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let (path, anchor) = match target.split_once('#') {
                    Some((p, a)) => (p, Some(a)),
                    None => (target.as_str(), None),
                };
                let file = if path.is_empty() { f.clone() } else { normal(&dir.join(path)) };
                let here = format!("{}:{n}: ({target})", f.display());
                if !root().join(&file).exists() {
                    bad.push(format!("{here}: no {}", file.display()));
                    continue;
                }
                let Some(anchor) = anchor else { continue };
                if file.extension().is_none_or(|e| e != "md") {
                    bad.push(format!("{here}: an anchor into a file that is not Markdown"));
                } else if !anchors(&read(&file)).contains(anchor) {
                    bad.push(format!("{here}: no heading #{anchor} in {}", file.display()));
                }
            }
        }
    }
    assert!(bad.is_empty(), "links that lead nowhere:\n{}", bad.join("\n"));
}

/// The top-level dirs of the repository whose paths the guides name in code spans.
const TREE: [&str; 10] = [
    "src/",
    "tests/",
    "benches/",
    "scripts/",
    "fuzz/",
    "deploy/",
    "fixtures/",
    "man/",
    "docs/",
    ".ci/",
];

#[test]
fn every_path_named_in_the_guides_exists() {
    let mut bad = Vec::new();
    for f in guides() {
        let text = read(&f);
        for (n, line) in prose(&text) {
            // The code spans of the line: every other piece between backticks.
            for span in line.split('`').skip(1).step_by(2) {
                let Some(path) = span.split_whitespace().next() else { continue };
                // A pattern (`src/sites/<family>.rs`, `src/{mod,read}.rs`), not a path.
                let pattern = path.contains(['<', '*', '{', '…', '$']) || path.contains("...");
                if pattern || !TREE.iter().any(|d| path.starts_with(d)) {
                    continue;
                }
                let path = path.trim_end_matches([',', ';', ':', ')']);
                if !root().join(path).exists() {
                    bad.push(format!("{}:{n}: `{path}` does not exist", f.display()));
                }
            }
        }
    }
    assert!(bad.is_empty(), "paths named but not in the tree:\n{}", bad.join("\n"));
}

#[test]
fn the_helpers_read_markdown_as_github_does() {
    assert_eq!(slug("Cleanup (`kresidue clean`)"), "cleanup-kresidue-clean");
    assert_eq!(slug("Exit codes"), "exit-codes");
    assert_eq!(slug("Running it: over SSH, from cron"), "running-it-over-ssh-from-cron");
    assert_eq!(slug("CRI-O"), "cri-o");
    assert_eq!(slug("A — b_c"), "a--b_c");
    let text = "# Top\n## Exit codes\n```sh\n# not a heading\n```\n## Exit codes\n";
    let a = anchors(text);
    assert!(a.contains("top") && a.contains("exit-codes") && a.contains("exit-codes-1"));
    assert!(!a.contains("not-a-heading"));
    assert_eq!(cited("see docs/CONTRACT.md and x/docs/Y.md", "docs/"), ["CONTRACT.md"]);
    assert_eq!(
        bare_doc_names("(PRODUCT.md \"Exit\") docs/NODE-LAYOUT.md README.md"),
        ["PRODUCT.md"]
    );
    assert_eq!(
        link_targets("[a](docs/CONTRACT.md#x) `[b](c)` [d](#e)"),
        ["docs/CONTRACT.md#x", "#e"]
    );
}
