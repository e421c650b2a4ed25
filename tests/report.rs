//! What `scan` prints and returns: the `kresidue/report/v1` JSON shape, redacted previews,
//! atomic `-o`, the table (sanitised paths, one line per finding), and exit codes 0/1/2.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use crate::util::*;

const UID: &str = "d41d8cd9-8f00-4b20-9e98-00998ecf8427";

/// A small tree with findings in a secret volume, a subpath and a container file; returns
/// the secret and the file contents (node path, bytes).
fn small_tree(tree: &NodeTree) -> (Secret, Vec<(String, Vec<u8>)>) {
    let pod = tree.pod(UID);
    let (a, b, c) = (fake_secret_len(1, 32), fake_secret_len(2, 24), fake_secret_special(3, 40));
    let s = Secret::opaque(
        "payments",
        "stripe-like",
        &[("api-key", &a), ("webhook", &b), ("json", &c)],
    );
    let mut files = Vec::new();
    let vol = pod.secret_volume("keys");
    vol.key("api-key", &a);
    files.push((vol.visible("api-key"), a.clone()));
    let sub = [b"webhook_secret = ".as_slice(), &b64(&b), b"\n"].concat();
    files.push((pod.subpath("keys", "worker", 0, &sub), sub));
    let log = [
        filler(5, 120),
        br#"{"level":"info","env":""#.to_vec(),
        json_escape(&c),
        br#""}"#.to_vec(),
    ]
    .concat();
    files.push((pod.file("containers/worker/7e57ab1e", &log), log));
    (s, files)
}

/// The JSON report has every contract field with the right types and values: schema,
/// root, node, cri disabled (no `--no-cri` needed while CRI is not implemented), summary,
/// findings (id, severity, category, site, path as node path, offset, length, stale, pod
/// with `live: null`, `container: null`, match with kind/secret/key/label/`rule: null`/
/// encoding, redacted preview), errors; findings sorted by path then offset.
#[test]
fn json_report_schema() {
    let tree = NodeTree::new();
    let (s, files) = small_tree(&tree);
    let file = tree.secrets_file("s.json", std::slice::from_ref(&s));
    let before = tree.digest();
    let out = tree.run(&[
        "scan",
        "--root",
        tree.root_arg(),
        "--secrets",
        path_arg(&file),
        "--format",
        "json",
    ]);
    before.assert_same(&tree.digest(), "scan without --no-cri");
    out.assert_code(1);
    let r = out.json();
    assert_eq!(r["schema"], "kresidue/report/v1");
    assert_eq!(r["root"], tree.root_arg(), "root");
    assert!(r["node"].is_string(), "node: {}", r["node"]);
    assert_eq!(r["cri"]["status"], "disabled", "cri: {}", r["cri"]);
    for k in ["files", "bytes", "findings", "duration_ms"] {
        assert!(r["summary"][k].is_u64(), "summary.{k}: {}", r["summary"]);
    }
    let total: usize = files.iter().map(|f| f.1.len()).sum();
    assert!(r["summary"]["files"].as_u64().unwrap() >= 3, "summary.files");
    assert!(r["summary"]["bytes"].as_u64().unwrap() >= total as u64, "summary.bytes");
    assert!(r["errors"].is_array(), "errors: {}", r["errors"]);
    assert_eq!(r["errors"].as_array().unwrap().len(), 0, "errors: {}", r["errors"]);

    let findings = out.findings();
    assert_eq!(r["summary"]["findings"].as_u64(), Some(findings.len() as u64));
    let keys = ["api-key", "webhook", "json"];
    let planted: Vec<Planted> = keys.iter().map(|k| s.planted(k)).collect();
    assert_findings(&findings, &naive_matches(&files, &planted), "schema tree");

    let mut ids = BTreeSet::new();
    for f in &findings {
        let raw = &f.raw;
        let id = raw["id"].as_str().unwrap_or_else(|| panic!("id missing: {raw}"));
        assert!(!id.is_empty() && ids.insert(id.to_string()), "ids must be unique and non-empty");
        severity_rank(&f.severity);
        assert!(
            ["non-tmpfs-volume", "stale-subpath", "other", "orphaned-volume"]
                .contains(&f.category.as_str()),
            "category {:?}",
            f.category
        );
        assert!(f.path.starts_with("/var/lib/kubelet/pods/"), "path is a node path: {}", f.path);
        assert!(!f.path.contains(tree.root_arg()), "path carries the root prefix: {}", f.path);
        assert!(raw["offset"].is_u64() && raw["length"].is_u64(), "offset/length: {raw}");
        assert!(raw["stale"].is_boolean(), "stale: {raw}");
        let pod = &raw["pod"];
        assert_eq!(pod["uid"], UID, "pod: {pod}");
        for k in ["namespace", "name", "live"] {
            assert!(pod.get(k).is_some(), "pod.{k} missing: {pod}");
        }
        assert!(pod["live"].is_null(), "live must be null without CRI: {pod}");
        assert!(raw.get("container").is_some_and(|c| c.is_null()), "container: {raw}");
        let m = &raw["match"];
        assert_eq!(m["kind"], "fingerprint");
        assert_eq!(m["secret"], "payments/stripe-like");
        assert!(m.get("rule").is_some_and(|r| r.is_null()), "match.rule: {m}");
        assert_eq!(m["label"], "current");
        assert!(["raw", "base64", "json-escaped"].contains(&f.encoding.as_str()));
        assert_redacted(&f.preview, s.value(&f.key));
    }
    let order: Vec<(String, u64)> = findings.iter().map(|f| (f.path.clone(), f.offset)).collect();
    let mut sorted = order.clone();
    sorted.sort();
    assert_eq!(order, sorted, "findings are not sorted by path, then offset");
}

/// A preview is at most 4 leading characters of the match then `****`.
fn assert_redacted(preview: &str, value: &[u8]) {
    let head = preview
        .strip_suffix("****")
        .unwrap_or_else(|| panic!("preview {preview:?} does not end in ****"));
    assert!(head.chars().count() <= 4, "preview shows more than 4 characters: {preview:?}");
    let forms: Vec<Vec<u8>> = Enc::ALL.iter().filter_map(|e| e.encode(value)).collect();
    assert!(
        forms.iter().any(|f| f.starts_with(head.as_bytes())),
        "preview head {head:?} is not the start of the matched value"
    );
}

/// No 8-byte run of any value appears in the table or JSON output (previews show at most
/// 4 characters).
#[test]
fn outputs_show_no_8_byte_run_of_a_value() {
    let tree = NodeTree::new();
    let (s, _) = small_tree(&tree);
    let file = tree.secrets_file("s.json", std::slice::from_ref(&s));
    for format in ["table", "json", "sarif", "prometheus"] {
        let out = tree.scan(&["--secrets", path_arg(&file), "--format", format]);
        out.assert_code(1);
        for (_, v) in &s.data {
            for w in v.windows(8) {
                assert!(
                    !contains(&out.stdout, w),
                    "{format} output shows an 8-byte run of a value"
                );
            }
        }
    }
}

/// The small tree's secrets file, and an empty directory for reports.
fn secrets_and_reports_dir(tree: &NodeTree) -> (std::path::PathBuf, std::path::PathBuf) {
    let (s, _) = small_tree(tree);
    let file = tree.secrets_file("s.json", &[s]);
    let dir = tree.work("reports");
    fs::create_dir(&dir).unwrap();
    (file, dir)
}

/// `-o FILE`: the report goes to the file (complete, parseable), stdout stays empty, the
/// directory holds nothing else (no temp file), and an existing report is replaced.
#[test]
fn output_file_is_written_atomically() {
    let tree = NodeTree::new();
    let (file, dir) = secrets_and_reports_dir(&tree);
    let target = dir.join("report.json");
    fs::write(&target, b"{\"stale\": true}").unwrap();
    let out =
        tree.scan(&["--secrets", path_arg(&file), "--format", "json", "-o", path_arg(&target)]);
    out.assert_code(1);
    assert!(out.stdout.is_empty(), "stdout with -o: {}", out.stdout_str());
    let report: serde_json::Value =
        serde_json::from_slice(&fs::read(&target).unwrap()).expect("report file is JSON");
    assert_eq!(report["schema"], "kresidue/report/v1");
    assert_eq!(findings_of(&report).len(), 3);
    let names =
        |d: &Path| fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name()).collect::<Vec<_>>();
    assert_eq!(names(&dir), vec![std::ffi::OsString::from("report.json")], "leftover files");

    let table = dir.join("report.txt");
    let out = tree.scan(&["--secrets", path_arg(&file), "-o", path_arg(&table)]);
    out.assert_code(1);
    assert!(out.stdout.is_empty(), "stdout with -o (table): {}", out.stdout_str());
    assert!(fs::read_to_string(&table).unwrap().contains("payments/stripe-like:api-key"));
    assert_eq!(names(&dir).len(), 2, "leftover files: {:?}", names(&dir));
}

/// `-o` naming a FIFO (as `/dev/null` is a device) is written into, not renamed over: a
/// rename would leave a file in its place. `-o` naming a symlink, with
/// `--follow-output-symlink`, writes its target and keeps the link.
#[test]
fn output_to_a_fifo_or_through_a_symlink_keeps_them() {
    use std::io::Read;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let tree = NodeTree::new();
    let (file, dir) = secrets_and_reports_dir(&tree);
    let fifo = dir.join("pipe");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    // Both ends held by the test, so that no open waits: the scan's writes (a small
    // report, within the pipe's buffer) wait here until read, and the read ends when the
    // test's own write end is closed after the scan.
    let nonblock = nix::fcntl::OFlag::O_NONBLOCK.bits();
    let mut pipe = fs::OpenOptions::new().read(true).custom_flags(nonblock).open(&fifo).unwrap();
    let held = fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    let out = tree.scan(&["--secrets", path_arg(&file), "--format", "json", "-o", path_arg(&fifo)]);
    drop(held);
    let mut through = Vec::new();
    let _ = pipe.read_to_end(&mut through);
    out.assert_code(1);
    assert!(out.stdout.is_empty(), "stdout with -o: {}", out.stdout_str());
    assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo(), "the FIFO was replaced");
    let report: serde_json::Value =
        serde_json::from_slice(&through).expect("the report came through the FIFO");
    assert_eq!(findings_of(&report).len(), 3);

    let target = dir.join("report.json");
    fs::write(&target, b"{\"stale\": true}").unwrap();
    let link = dir.join("latest.json");
    std::os::unix::fs::symlink("report.json", &link).unwrap();
    let out = tree.scan(&[
        "--secrets",
        path_arg(&file),
        "--format",
        "json",
        "-o",
        path_arg(&link),
        "--follow-output-symlink",
    ]);
    out.assert_code(1);
    assert!(fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link was replaced");
    let report: serde_json::Value =
        serde_json::from_slice(&fs::read(&target).unwrap()).expect("the link's target is JSON");
    assert_eq!(findings_of(&report).len(), 3);
    let mut names: Vec<_> = fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    names.sort();
    assert_eq!(names, ["latest.json", "pipe", "report.json"], "leftover files");
}

/// The table: a header of columns, one line per owner, under it one line per finding
/// holding the secret `<ns>/<name>:<key>`, the severity, the label and the path (relative
/// to the owner's dir on its line; whole with `--wide`), then a summary line.
#[test]
fn table_lists_one_line_per_finding() {
    let tree = NodeTree::new();
    let (s, files) = small_tree(&tree);
    let file = tree.secrets_file("s.json", std::slice::from_ref(&s));
    let json = tree.scan(&["--secrets", path_arg(&file), "--format", "json"]);
    let findings = json.findings();
    for wide in [false, true] {
        let mut args = vec!["--secrets", path_arg(&file)];
        if wide {
            args.push("--wide");
        }
        // 200 columns: nothing of these names and paths is cut.
        let out = tree.kr().env("COLUMNS", "200").scan(&args);
        out.assert_code(1);
        let text = out.stdout_str();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].trim_start().starts_with("SEVERITY"), "{text}");
        let rows: Vec<&str> = lines
            .iter()
            .copied()
            .filter(|l| {
                ["critical", "high", "medium", "low", "info"]
                    .iter()
                    .any(|s| l.starts_with(&format!("  {s} ")))
            })
            .collect();
        assert_eq!(rows.len(), findings.len(), "one line per finding:\n{text}");
        let owner =
            lines.iter().find(|l| l.starts_with("pod ")).unwrap_or_else(|| panic!("{text}"));
        for f in &findings {
            let id = format!("{}:{}", f.secret, f.key);
            let shown = if wide {
                f.path.clone()
            } else {
                let dir = f.path.find(UID).map(|i| &f.path[..i + UID.len() + 1]).unwrap();
                assert!(owner.contains(dir), "the owner's line shows its dir: {owner}");
                f.path[dir.len()..].to_owned()
            };
            let hits: Vec<&&str> =
                rows.iter().filter(|l| l.contains(&id) && l.contains(&shown)).collect();
            assert_eq!(hits.len(), 1, "want one line with {id} and {shown}:\n{text}");
            let line = hits[0].to_lowercase();
            assert!(line.contains(&f.severity), "severity missing: {}", hits[0]);
            assert!(line.contains(&f.label), "label missing: {}", hits[0]);
        }
        if wide {
            assert!(
                files.iter().all(|(p, _)| text.contains(p.as_str())),
                "a path is missing:\n{text}"
            );
        }
        assert!(
            lines.iter().any(|l| l.starts_with(&format!("{} findings", findings.len()))),
            "{text}"
        );
    }
}

/// Hostile file names in an emptyDir (newline, tab, carriage return, DEL, an ESC sequence,
/// invalid UTF-8, a right-to-left override, a bidi isolate and a zero-width space) are
/// escaped in the table: each finding stays on one line, and none of them is printed raw.
#[test]
fn table_sanitises_hostile_names() {
    let tree = NodeTree::new();
    let pod = tree.pod(UID);
    let dir = pod.path("volumes/kubernetes.io~empty-dir/scratch/");
    let names: [(&str, &[u8], &str, &str); 8] = [
        ("newline", b"first\nsecond.conf", "first", "second.conf"),
        ("escape", b"esc\x1b[2J\x1b[31mred.conf", "esc", "red.conf"),
        ("nonutf8", b"bad\xff\xfename.conf", "bad", "name.conf"),
        ("tab", b"col\tumn.conf", "col", "umn.conf"),
        ("return", b"over\rwritten.conf", "over", "written.conf"),
        // U+202E RIGHT-TO-LEFT OVERRIDE: `exe.conf` would show as `fnoc.exe`.
        ("rlo", "rlo\u{202e}fnoc.exe".as_bytes(), "rlo", "fnoc.exe"),
        // U+2066 LEFT-TO-RIGHT ISOLATE and U+200B ZERO WIDTH SPACE.
        ("isolate", "iso\u{2066}late\u{200b}d.conf".as_bytes(), "iso", "d.conf"),
        ("del", b"del\x7fete.conf", "del", "ete.conf"),
    ];
    let mut data = Vec::new();
    for (i, (key, name, _, _)) in names.iter().enumerate() {
        let v = fake_secret(600 + i as u64);
        let path = [dir.as_bytes(), name].concat();
        tree.write(Path::new(os(&path)), &[b"v=".as_slice(), &v].concat());
        data.push((*key, v));
    }
    let s = Secret::opaque("ops", "weird-names", &data);
    let file = tree.secrets_file("s.json", &[s]);
    let json = tree.scan(&["--secrets", path_arg(&file), "--format", "json"]);
    json.assert_code(1);
    assert_eq!(json.findings().len(), names.len(), "findings: {:?}", json.findings());

    let out = tree.scan(&["--secrets", path_arg(&file)]);
    out.assert_code(1);
    for bad in [0x1bu8, 0xff, 0xfe, b'\t', b'\r', 0x7f] {
        assert!(!out.stdout.contains(&bad), "table prints raw byte {bad:#04x}");
    }
    let text = out.stdout_str();
    for bad in ['\u{202e}', '\u{2066}', '\u{200b}'] {
        assert!(!text.contains(bad), "table prints raw {bad:?}");
    }
    for (key, _, left, right) in names {
        let id = format!("ops/weird-names:{key}");
        let hits: Vec<&str> = text.lines().filter(|l| l.contains(&id)).collect();
        assert_eq!(hits.len(), 1, "want one line for {id}:\n{text}");
        assert!(
            hits[0].contains(left) && hits[0].contains(right),
            "the finding line for {id} does not hold the whole (escaped) name: {:?}",
            hits[0]
        );
    }
}

/// Exit codes 0 and 1: a clean tree exits 0 (table and JSON); findings exit 1 by default
/// (`--fail-on low`) when at or above low; `--fail-on` above the findings' severity exits
/// 0, at it or below exits 1; `--fail-on none` exits 0.
#[test]
fn exit_codes_follow_fail_on() {
    let tree = NodeTree::new();
    let pod = tree.pod(UID);
    let (v, unused) = (fake_secret(700), fake_secret(701));
    pod.secret_volume("db").key("user", b"admin-user-name-0001");
    pod.file("etc-hosts", b"127.0.0.1 localhost\n");
    let clean = tree.secrets_file("clean.json", &[Secret::opaque("a", "b", &[("k", &unused)])]);
    for format in ["table", "json"] {
        let out = tree.scan(&["--secrets", path_arg(&clean), "--format", format]);
        out.assert_code(0);
    }
    assert!(tree.scan(&["--secrets", path_arg(&clean), "--format", "json"]).findings().is_empty());

    // A finding in a secret volume: "1 with findings".
    pod.secret_volume("db").key("password", &v);
    let dirty = tree.secrets_file("dirty.json", &[Secret::opaque("a", "db", &[("password", &v)])]);
    let out = tree.scan(&["--secrets", path_arg(&dirty), "--format", "json"]);
    out.assert_code(1);
    let sev = out.findings()[0].severity.clone();
    let rank = severity_rank(&sev);
    for (i, level) in SEVERITIES.iter().enumerate() {
        let want = if i >= rank { 1 } else { 0 };
        tree.scan(&["--secrets", path_arg(&dirty), "--fail-on", level]).assert_code(want);
    }

    // A finding at site `other` (a container file): the threshold above its severity
    // gives 0 (if it is critical there is no such threshold).
    let tree = NodeTree::new();
    tree.pod(UID).file("containers/app/0badf00d", &[b"token: ".as_slice(), &v].concat());
    let dirty = tree.secrets_file("dirty.json", &[Secret::opaque("a", "db", &[("password", &v)])]);
    let out = tree.scan(&["--secrets", path_arg(&dirty), "--format", "json"]);
    let sev = out.findings()[0].severity.clone();
    let rank = severity_rank(&sev);
    out.assert_code(if rank <= severity_rank("low") { 1 } else { 0 });
    if rank > 0 {
        tree.scan(&["--secrets", path_arg(&dirty), "--fail-on", SEVERITIES[rank - 1]])
            .assert_code(0);
        tree.scan(&["--secrets", path_arg(&dirty), "--fail-on", "critical"]).assert_code(0);
    }
    tree.scan(&["--secrets", path_arg(&dirty), "--fail-on", &sev]).assert_code(1);
    // `none`: never fail on findings.
    tree.scan(&["--secrets", path_arg(&dirty), "--fail-on", "none"]).assert_code(0);
}

/// Exit code 2 with exactly one line on stderr (and no panic or backtrace, with
/// `RUST_BACKTRACE=1`) when the scan cannot be done: missing root, missing / truncated /
/// empty / wrong-format fingerprint file, malformed kubectl JSON (scan and fingerprint),
/// rules turned off without fingerprints or secrets. A failed scan with `-o` leaves nothing behind.
#[test]
fn exit_2_one_line_errors() {
    let tree = NodeTree::new();
    let v = fake_secret(800);
    tree.pod(UID).secret_volume("db").key("password", &v);
    let good = tree.secrets_file("good.json", &[Secret::opaque("a", "b", &[("password", &v)])]);
    let fp = tree.fingerprint_file(&good, &[], "good.fp");
    let fp_bytes = fs::read(&fp).unwrap();

    let missing = tree.work("no-such-root");
    let out =
        tree.run(&["scan", "--root", path_arg(&missing), "--no-cri", "--secrets", path_arg(&good)]);
    out.assert_one_line_error();

    let write = |name: &str, bytes: &[u8]| {
        let p = tree.work(name);
        fs::write(&p, bytes).unwrap();
        p
    };
    let mut wrong: serde_json::Value = serde_json::from_slice(&fp_bytes).unwrap();
    wrong["format"] = "kresidue/fingerprints/v999".into();
    let bad_fps = [
        write("truncated.fp", &fp_bytes[..fp_bytes.len() / 2]),
        write("empty.fp", b""),
        write("wrong-format.fp", &serde_json::to_vec(&wrong).unwrap()),
        write("other-format.fp", br#"{"format":"something-else","entries":[]}"#),
        tree.work("does-not-exist.fp"),
    ];
    for bad in &bad_fps {
        let out = tree.scan(&["--fingerprints", path_arg(bad)]);
        out.assert_one_line_error();
        // Also when a good file comes first.
        tree.scan(&["--fingerprints", path_arg(&fp), "--fingerprints", path_arg(bad)])
            .assert_one_line_error();
    }

    let kubectl = kubectl_json(&[Secret::opaque("a", "b", &[("password", &v)])]);
    let bad_kubectl = [
        write("truncated.json", &kubectl[..kubectl.len() / 2]),
        write("not-json.json", b"this is not json\n"),
        write(
            "bad-base64.json",
            br#"{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Secret","metadata":{"name":"b","namespace":"a"},"type":"Opaque","data":{"k":"%%% not base64 %%%"}}]}"#,
        ),
        tree.work("does-not-exist.json"),
    ];
    for bad in &bad_kubectl {
        tree.scan(&["--secrets", path_arg(bad)]).assert_one_line_error();
        tree.run(&["fingerprint", path_arg(bad)]).assert_one_line_error();
    }
    tree.kr()
        .stdin(&kubectl[..kubectl.len() / 2])
        .scan(&["--secrets", "-"])
        .assert_one_line_error();

    // With `-o`, a failed scan leaves no report and no temp file behind.
    let dir = tree.work("failed-out");
    fs::create_dir(&dir).unwrap();
    let target = dir.join("report.json");
    let args =
        ["--fingerprints", path_arg(&bad_fps[0]), "--format", "json", "-o", path_arg(&target)];
    tree.scan(&args).assert_one_line_error();
    assert!(
        fs::read_dir(&dir).unwrap().next().is_none(),
        "a failed scan left a file in the -o dir"
    );

    // Nothing to look for: rules off and no fingerprints.
    tree.scan(&["--no-rules"]).assert_one_line_error();
    tree.scan(&["--no-rules", "--format", "json"]).assert_one_line_error();
}

/// Bad arguments exit 2 without a panic (the wording is clap's; not held to one line).
#[test]
fn bad_arguments_exit_2() {
    let tree = NodeTree::new();
    let v = fake_secret(900);
    let good = tree.secrets_file("good.json", &[Secret::opaque("a", "b", &[("password", &v)])]);
    let g = path_arg(&good);
    for args in [
        &["--secrets", g, "--format", "xml"][..],
        &["--secrets", g, "--fail-on", "sometimes"],
        &["--secrets", g, "--chunk-size", "10"],
        &["--secrets", g, "--threads", "many"],
        &["--secrets", g, "--no-such-flag"],
    ] {
        let out = tree.scan(args);
        out.assert_code(2);
        assert!(out.stdout.is_empty(), "{args:?}: stdout not empty: {}", out.stdout_str());
    }
    tree.run(&["no-such-command"]).assert_code(2);
}
