//! The table for a person: fitted to 80, 120 and 200 columns under a real
//! pseudo-terminal (`script`, its size set with `stty`) and piped (`COLUMNS`, else 120),
//! never wrapping; grouped by owner, worst first; colour on a terminal only (never with
//! `NO_COLOR` or `--color never`); a summary that names the next step; the same for
//! `clean`'s plan and `pods`.

use crate::cri::{fake, Server, READY_UID as LIVE_UID};
use crate::util::*;
use std::process::{Command, Stdio};
use unicode_width::UnicodeWidthStr;

const GONE_UID: &str = "e2d4f6a8-0b1c-4d3e-8f5a-6b7c8d9e0f1a";
const WIDTHS: [usize; 3] = [80, 120, 200];
const SEVERITIES: [&str; 5] = ["critical", "high", "medium", "low", "info"];

/// A node with long names everywhere: a pod whose Secret volume, deep emptyDir file and
/// log hold values, and a second pod with a subPath copy.
fn node() -> (NodeTree, std::path::PathBuf) {
    let tree = NodeTree::new();
    let (a, b) = (fake_secret_len(71, 40), fake_secret_len(72, 32));
    let s = Secret::opaque(
        "payments-production",
        "checkout-service-database-credentials",
        &[("primary-database-password", &a), ("payment-provider-api-token", &b)],
    );
    let pod = tree.pod(LIVE_UID);
    pod.secret_volume("database-credentials").key("primary-database-password", &a);
    let deep = "cache/a/rather/deep/directory/tree/that/goes/on/and/on/settings.conf";
    pod.empty_dir_file("scratch", deep, &[b"token=".as_slice(), &b].concat());
    pod.log("payments-production", "checkout-api-7f9c8b6d5-x2k4q", "app", "0.log", &b);
    tree.pod(GONE_UID).subpath("database-credentials", "migrate", 0, &a);
    let file = tree.secrets_file("s.json", &[s]);
    (tree, file)
}

/// The lines of `text` with colour sequences and carriage returns taken out.
fn plain_lines(text: &str) -> Vec<String> {
    let mut plain = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("\x1b[") {
        plain.push_str(&rest[..at]);
        let seq = &rest[at + 2..];
        let end = seq.find(|c: char| !(c.is_ascii_digit() || c == ';')).unwrap_or(seq.len());
        rest = if seq[end..].starts_with('m') { &seq[end + 1..] } else { &rest[at + 1..] };
    }
    plain.push_str(rest);
    plain.lines().map(|l| l.trim_end_matches('\r').to_owned()).collect()
}

/// Asserts no line of `lines` is wider than `width`, and that the table is grouped:
/// a finding's line follows an owner's line, severities never rise within a group and
/// the groups' worst never rises.
fn assert_fits_and_groups(lines: &[String], width: usize, findings: usize, context: &str) {
    for l in lines {
        assert!(l.width() <= width, "{context}: a line of {} columns > {width}:\n{l}", l.width());
    }
    let severity = |l: &str| SEVERITIES.iter().position(|s| l.starts_with(&format!("  {s} ")));
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for l in lines {
        if l.starts_with("pod ")
            || l.starts_with("container ")
            || l.starts_with("image ")
            || l.starts_with("site ")
        {
            groups.push(Vec::new());
        } else if let Some(s) = severity(l) {
            groups
                .last_mut()
                .unwrap_or_else(|| panic!("{context}: a finding before any owner"))
                .push(s);
        }
    }
    assert_eq!(
        groups.iter().map(Vec::len).sum::<usize>(),
        findings,
        "{context}:\n{}",
        lines.join("\n")
    );
    for g in &groups {
        assert!(g.windows(2).all(|w| w[0] <= w[1]), "{context}: not worst first: {g:?}");
    }
    let worst: Vec<usize> = groups.iter().filter_map(|g| g.first().copied()).collect();
    assert!(worst.windows(2).all(|w| w[0] <= w[1]), "{context}: groups not worst first: {worst:?}");
}

/// Piped: `COLUMNS` (else 120) is the width, no colour; every finding has its line, the
/// owner's line holds the pod's dir, and `--wide` gives whole paths.
#[test]
fn piped_tables_fit_columns() {
    let (tree, file) = node();
    let json = tree.scan(&["--secrets", path_arg(&file), "--format", "json"]);
    let findings = json.findings();
    assert!(findings.len() >= 4, "{findings:?}");
    for width in WIDTHS.map(Some).into_iter().chain([None]) {
        let mut kr = tree.kr();
        if let Some(w) = width {
            kr = kr.env("COLUMNS", &w.to_string());
        }
        let out = kr.scan(&["--secrets", path_arg(&file)]);
        out.assert_code(1);
        let text = out.stdout_str();
        assert!(!text.contains('\x1b'), "colour into a pipe:\n{text}");
        let lines = plain_lines(&text);
        let w = width.unwrap_or(120);
        assert_fits_and_groups(&lines, w, findings.len(), &format!("COLUMNS={width:?}"));
        let pod_dir = format!("/var/lib/kubelet/pods/{LIVE_UID}/");
        assert!(
            lines.iter().any(|l| l.starts_with("pod ") || l.starts_with("  /var"))
                && text.contains(&pod_dir[..40]),
            "the pod's line or its dir:\n{text}"
        );
        assert!(lines.iter().any(|l| l.starts_with("next: ")), "no next step:\n{text}");
    }
    let wide = tree.kr().env("COLUMNS", "80").scan(&["--secrets", path_arg(&file), "--wide"]);
    let text = wide.stdout_str();
    for f in &findings {
        assert!(text.lines().any(|l| l.contains(&f.path)), "--wide lacks {}:\n{text}", f.path);
    }
    assert!(text.lines().any(|l| l.width() > 120), "--wide is not cut:\n{text}");
}

/// `kresidue ARGS` under a real pseudo-terminal of `width` columns, with `env`.
fn on_terminal(width: usize, args: &str, env: &[(&str, &str)]) -> String {
    let bin = env!("CARGO_BIN_EXE_kresidue");
    let cmd = format!("stty cols {width} rows 50; {bin} {args}");
    let mut c = Command::new("script");
    c.args(["-qec", &cmd, "/dev/null"])
        .env("TERM", "xterm")
        .env_remove("NO_COLOR")
        .env_remove("COLUMNS");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.stdin(Stdio::null()).output().expect("script (util-linux)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Under a real terminal the terminal's width wins over `COLUMNS`; severities are
/// coloured, and `NO_COLOR` or `--color never` leave colour out.
#[test]
fn terminal_tables_fit_the_terminal_and_colour() {
    let (tree, file) = node();
    let findings = tree.scan(&["--secrets", path_arg(&file), "--format", "json"]).findings();
    let lock = tree.work("kresidue.lock");
    let args = format!(
        "scan --root {} --no-cri --quiet --secrets {} --lock {}",
        tree.root_arg(),
        file.display(),
        lock.display()
    );
    for width in WIDTHS {
        let screen = on_terminal(width, &args, &[("COLUMNS", "300")]);
        assert!(screen.contains("\x1b[1;31mcritical"), "no colour on a terminal:\n{screen:?}");
        assert_fits_and_groups(
            &plain_lines(&screen),
            width,
            findings.len(),
            &format!("pty {width}"),
        );
    }
    let no_color = on_terminal(120, &args, &[("NO_COLOR", "1")]);
    assert!(!no_color.contains('\x1b') && no_color.contains("critical"), "{no_color:?}");
    let never = on_terminal(120, &format!("{args} --color never"), &[]);
    assert!(!never.contains('\x1b') && never.contains("critical"), "{never:?}");
    // `--color always` colours a pipe too.
    let always = tree.kr().scan(&["--secrets", path_arg(&file), "--color", "always"]);
    assert!(always.stdout_str().contains("\x1b["), "{}", always.stdout_str());
}

/// `clean`'s plan and `pods` fit the width too, under a terminal and piped.
#[test]
fn plan_and_pods_fit() {
    let (tree, file) = node();
    let server = Server::grpc(fake());
    let ep = server.endpoint();
    for width in WIDTHS {
        let cols = width.to_string();
        let mut clean = vec!["clean", "--root", tree.root_arg(), "--cri", &ep];
        clean.extend(["--min-age", "0s", "--secrets", path_arg(&file)]);
        let plan = tree.kr().env("COLUMNS", &cols).run(&clean);
        plan.assert_code(0);
        let text = plan.stdout_str();
        assert!(text.contains("dry run:"), "{text}");
        assert!(text.contains("remove-subpath"), "the gone pod's copy is planned:\n{text}");
        for l in plain_lines(&text) {
            assert!(l.width() <= width, "clean at {width}: {l}");
        }
        let pods =
            tree.kr().env("COLUMNS", &cols).run(&["pods", "--root", tree.root_arg(), "--cri", &ep]);
        pods.assert_code(0);
        let text = pods.stdout_str();
        assert!(text.contains("SANDBOX/CONTAINER"), "{text}");
        for l in plain_lines(&text) {
            assert!(l.width() <= width, "pods at {width}: {l}");
        }
        let args = format!("pods --root {} --cri {ep}", tree.root_arg());
        for l in plain_lines(&on_terminal(width, &args, &[])) {
            assert!(l.width() <= width, "pods on a terminal of {width}: {l}");
        }
    }
}

/// The summary names what to do next: `kresidue clean` for a gone pod's volume, rotation
/// for a leak into a log, and a root with nothing kresidue knows beneath it says so.
#[test]
fn the_summary_names_the_next_step() {
    let (tree, file) = node();
    let server = Server::grpc(fake());
    let ep = server.endpoint();
    let out = tree.kr().scan_asking(&["--cri", &ep], &["--secrets", path_arg(&file)]);
    out.assert_code(1);
    let text = out.stdout_str();
    let next: Vec<&str> = text.lines().filter(|l| l.starts_with("next: ")).collect();
    assert!(next.iter().any(|l| l.contains("`kresidue clean` shows the plan")), "{text}");
    assert!(next.iter().any(|l| l.contains("rotate those secrets")), "{text}");
    let empty = NodeTree::new();
    let out = empty.scan(&["--secrets", path_arg(&file)]);
    out.assert_code(0);
    let text = out.stdout_str();
    assert!(text.contains("next: nothing was read"), "{text}");
}
