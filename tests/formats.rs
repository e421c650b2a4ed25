//! The fleet formats of `scan`: SARIF 2.1.0 (valid against the published schema, one
//! result per finding with stable fingerprints) and the Prometheus textfile format
//! (parsed by a Prometheus text parser, every family with HELP and TYPE, written
//! atomically with `-o`).

use std::collections::BTreeMap;
use std::fs;

use serde_json::Value;

use crate::util::*;

const UID: &str = "0f0e0d0c-0b0a-4909-8807-060504030201";

/// A node with a value in a secret volume and in an emptyDir (with a space and a
/// non-ASCII letter in its name), and a PEM key in a container file; the kubectl JSON.
fn node() -> (NodeTree, std::path::PathBuf) {
    let tree = NodeTree::new();
    let (value, secrets) = db_password(&tree, 7101);
    let pod = tree.pod(UID);
    pod.secret_volume("db").key("password", value.as_bytes());
    pod.file(
        "volumes/kubernetes.io~empty-dir/cache/my conf é.env",
        format!("DB={value}\n").as_bytes(),
    );
    let key = kresidue::rules::examples::render("{pem:RSA PRIVATE KEY:1190}", 7102);
    tree.guard(&key);
    pod.file("containers/app/0a1b2c3d", &key);
    let file = tree.secrets_file("secrets.json", &secrets);
    (tree, file)
}

fn sarif_schema() -> jsonschema::Validator {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/sarif-schema-2.1.0.json");
    let schema: Value = serde_json::from_slice(&fs::read(path).unwrap()).unwrap();
    jsonschema::draft4::options().should_validate_formats(true).build(&schema).unwrap()
}

/// SARIF: valid against the SARIF 2.1.0 schema; one result per finding, with the rule it
/// names in the driver's rules, the level of its severity, the node path as a file URI
/// with the byte region, and the finding id as partial fingerprint; an empty node gives
/// a valid document with no results.
#[test]
fn sarif_is_valid_against_the_schema() {
    let (tree, file) = node();
    let schema = sarif_schema();
    let json = tree.scan(&["--secrets", path_arg(&file), "--format", "json"]);
    let out = tree.scan(&["--secrets", path_arg(&file), "--format", "sarif"]);
    out.assert_code(1);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let errors: Vec<String> =
        schema.iter_errors(&doc).map(|e| format!("{e} at {}", e.instance_path())).collect();
    assert!(errors.is_empty(), "{errors:#?}");
    assert_eq!(doc["version"], "2.1.0");
    let run = &doc["runs"][0];
    let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
    let findings = json.findings();
    let results = run["results"].as_array().unwrap();
    assert_eq!(results.len(), findings.len());
    let mut by_id: BTreeMap<&str, &Value> = BTreeMap::new();
    for r in results {
        by_id.insert(r["partialFingerprints"]["kresidueFindingId/v1"].as_str().unwrap(), r);
    }
    for f in &findings {
        let r = by_id[f.raw["id"].as_str().unwrap()];
        let rule = &rules[r["ruleIndex"].as_u64().unwrap() as usize];
        assert_eq!(rule["id"], r["ruleId"]);
        let want_rule = match f.raw["match"]["rule"].as_str() {
            Some(id) => format!("rule/{id}"),
            None => format!("fingerprint/{}", f.site),
        };
        assert_eq!(r["ruleId"], want_rule.as_str());
        let level = match f.severity.as_str() {
            "critical" | "high" => "error",
            "medium" => "warning",
            _ => "note",
        };
        assert_eq!(r["level"], level, "{r:#}");
        let loc = &r["locations"][0]["physicalLocation"];
        let uri = loc["artifactLocation"]["uri"].as_str().unwrap();
        assert!(uri.starts_with("file:///var/lib/kubelet/pods/"), "{uri}");
        assert_eq!(loc["region"]["byteOffset"], f.raw["offset"]);
        assert_eq!(loc["region"]["byteLength"], f.raw["length"]);
    }
    let conf = results.iter().find(|r| {
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            .as_str()
            .unwrap()
            .ends_with("my%20conf%20%C3%A9.env")
    });
    assert!(conf.is_some(), "the emptyDir file, percent-encoded: {results:#?}");
    assert!(results.iter().any(|r| r["ruleId"] == "rule/pem-rsa-private-key"), "{results:#?}");
    // Every rule of `kresidue rules` and every site for known values is a driver rule.
    let ids: Vec<&str> = rules.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert!(
        ids.contains(&"fingerprint/kubelet-secret-volume")
            && ids.contains(&"rule/pem-rsa-private-key"),
        "{ids:?}"
    );

    let empty = NodeTree::new();
    let clean = empty.scan(&["--format", "sarif"]);
    clean.assert_code(0);
    let doc: Value = serde_json::from_slice(&clean.stdout).unwrap();
    assert!(schema.is_valid(&doc));
    assert_eq!(doc["runs"][0]["results"].as_array().unwrap().len(), 0);
}

/// The schema check itself can fail: a result without a message is rejected.
#[test]
fn the_sarif_schema_check_rejects_a_broken_document() {
    let (tree, file) = node();
    let out = tree.scan(&["--secrets", path_arg(&file), "--format", "sarif"]);
    let mut doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    doc["runs"][0]["results"][0].as_object_mut().unwrap().remove("message");
    assert!(!sarif_schema().is_valid(&doc));
}

/// Prometheus: parsed by a Prometheus text parser; every family has HELP and TYPE gauge
/// lines; `kresidue_findings` per (severity, category, site) sums to the findings; the
/// other gauges hold the report's numbers; with `-o` the file is written whole and
/// atomically (nothing else left in its dir), stdout empty.
#[test]
fn prometheus_textfile_parses_and_matches_the_report() {
    let (tree, file) = node();
    let json = tree.scan(&["--secrets", path_arg(&file), "--format", "json"]);
    let report = json.json.as_ref().unwrap();
    let dir = tree.work("textfile");
    fs::create_dir(&dir).unwrap();
    let prom = dir.join("kresidue.prom");
    fs::write(&prom, "stale\n").unwrap();
    let out =
        tree.scan(&["--secrets", path_arg(&file), "--format", "prometheus", "-o", path_arg(&prom)]);
    out.assert_code(1);
    assert!(out.stdout.is_empty());
    let names: Vec<_> = fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, vec![std::ffi::OsString::from("kresidue.prom")]);
    let text = fs::read_to_string(&prom).unwrap();
    let scrape = scrape(&text);
    let families = [
        "kresidue_findings",
        "kresidue_findings_by_severity",
        "kresidue_files_scanned",
        "kresidue_bytes_scanned",
        "kresidue_files_unchanged",
        "kresidue_bytes_unchanged",
        "kresidue_scan_duration_seconds",
        "kresidue_errors",
        "kresidue_cri_status",
        "kresidue_last_run_timestamp_seconds",
    ];
    for f in families {
        assert!(text.contains(&format!("# HELP {f} ")), "{f}: {text}");
        assert!(text.contains(&format!("# TYPE {f} gauge\n")), "{f}: {text}");
        assert!(scrape.samples.iter().any(|s| s.metric == f), "{f}: {text}");
    }
    let one = |name: &str| gauge(scrape.samples.iter().find(|s| s.metric == name).unwrap());
    let findings: Vec<_> =
        scrape.samples.iter().filter(|s| s.metric == "kresidue_findings").collect();
    let total: f64 = findings.iter().map(|s| gauge(s)).sum();
    assert_eq!(total as usize, report["findings"].as_array().unwrap().len());
    for s in &findings {
        let n = report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| {
                f["severity"] == s.labels.get("severity").unwrap()
                    && f["category"] == s.labels.get("category").unwrap()
                    && f["site"] == s.labels.get("site").unwrap()
            })
            .count();
        assert_eq!(gauge(s) as usize, n, "{s:?}");
    }
    assert_eq!(one("kresidue_files_scanned"), report["summary"]["files"].as_f64().unwrap());
    assert_eq!(one("kresidue_bytes_scanned"), report["summary"]["bytes"].as_f64().unwrap());
    assert_eq!(one("kresidue_errors"), 0.0);
    // --no-cri: no runtime asked, so no `kresidue_cri_up` to read as down; the state set
    // says disabled.
    assert!(!text.contains("kresidue_cri_up"), "{text}");
    let cri: Vec<_> = scrape
        .samples
        .iter()
        .filter(|s| s.metric == "kresidue_cri_status")
        .map(|s| (s.labels.get("status").unwrap(), gauge(s)))
        .collect();
    assert_eq!(cri, [("ok", 0.0), ("unreachable", 0.0), ("disabled", 1.0)], "{text}");
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    assert!((now - one("kresidue_last_run_timestamp_seconds")).abs() < 120.0);
    let by_sev: Vec<_> =
        scrape.samples.iter().filter(|s| s.metric == "kresidue_findings_by_severity").collect();
    assert_eq!(by_sev.len(), 5, "every severity, zero included");
}

/// The per-secret series of a textfile on stdout: label sets and values.
fn secret_series(text: &str) -> BTreeMap<Vec<(String, String)>, f64> {
    let scrape = scrape(text);
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == "kresidue_secret_present")
        .map(|s| {
            let labels = ["namespace", "secret", "key", "label", "site", "category"]
                .iter()
                .map(|k| (k.to_string(), s.labels.get(k).unwrap_or("?").to_owned()))
                .collect();
            (labels, gauge(s))
        })
        .collect()
}

fn dropped(text: &str) -> f64 {
    let scrape = scrape(text);
    let s = scrape.samples.iter().find(|s| s.metric == "kresidue_secret_series_dropped").unwrap();
    gauge(s)
}

/// The fleet view: one `kresidue_secret_present` series, value 1, per fingerprinted
/// Secret key, label, site and category of the JSON report's findings (rule findings
/// have none); `--secret-series N` keeps the N most severe and counts the rest in
/// `kresidue_secret_series_dropped`; `--secret-series 0` writes none. No value appears.
#[test]
fn prometheus_per_secret_series_match_the_report_and_are_bounded() {
    let (tree, file) = node();
    let (_, old) = db_password(&tree, 7103);
    let [old] = old;
    let old = Secret::opaque("billing", "stripe", &[("api-key", old.data[0].1.as_slice())]);
    let pod = tree.pod(UID);
    pod.file("volumes/kubernetes.io~empty-dir/cache/old.txt", &old.data[0].1);
    let revoked = tree.secrets_file("old.json", std::slice::from_ref(&old));
    let fp = tree.work("old.fp");
    tree.run(&["fingerprint", "--label", "revoked", "-o", path_arg(&fp), path_arg(&revoked)])
        .assert_code(0);
    let args = ["--secrets", path_arg(&file), "--fingerprints", path_arg(&fp)];
    let json = tree.scan(&[&args[..], &["--format", "json"]].concat());
    let report = json.json.as_ref().unwrap();
    let rank = |s: &str| ["info", "low", "medium", "high", "critical"].iter().position(|x| *x == s);
    let mut expected: BTreeMap<Vec<(String, String)>, String> = BTreeMap::new();
    for f in report["findings"].as_array().unwrap() {
        let m = &f["match"];
        if m["kind"] != "fingerprint" {
            continue;
        }
        let (ns, name) = m["secret"].as_str().unwrap().split_once('/').unwrap();
        let labels = [
            ("namespace", ns),
            ("secret", name),
            ("key", m["key"].as_str().unwrap()),
            ("label", m["label"].as_str().unwrap()),
            ("site", f["site"].as_str().unwrap()),
            ("category", f["category"].as_str().unwrap()),
        ];
        let labels = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        // A series stands for the worst of its findings.
        let severity = f["severity"].as_str().unwrap().to_owned();
        let worst = expected.entry(labels).or_insert(severity.clone());
        if rank(&severity) > rank(worst) {
            *worst = severity;
        }
    }
    assert!(expected.len() >= 3, "{expected:?}");
    assert!(expected.keys().any(|l| l.contains(&("label".into(), "revoked".into()))));

    let all = tree.scan(&[&args[..], &["--format", "prometheus"]].concat());
    let text = all.stdout_str();
    let series = secret_series(&text);
    assert_eq!(series.keys().collect::<Vec<_>>(), expected.keys().collect::<Vec<_>>(), "{text}");
    assert!(series.values().all(|&v| v == 1.0));
    assert_eq!(dropped(&text), 0.0);

    let one = tree.scan(&[&args[..], &["--format", "prometheus", "--secret-series", "1"]].concat());
    let text = one.stdout_str();
    let series = secret_series(&text);
    assert_eq!(series.len(), 1, "{text}");
    let worst = expected.values().map(|s| rank(s)).max().unwrap();
    let kept = series.keys().next().unwrap();
    assert_eq!(rank(&expected[kept]), worst, "the most severe is kept: {text}");
    assert_eq!(dropped(&text), (expected.len() - 1) as f64);

    let none =
        tree.scan(&[&args[..], &["--format", "prometheus", "--secret-series", "0"]].concat());
    let text = none.stdout_str();
    assert!(!text.contains("kresidue_secret_present"), "{text}");
    assert_eq!(dropped(&text), expected.len() as f64);
}

/// `--format npd`, node-problem-detector's plugin protocol: one line of at most 80
/// bytes on stdout; exit 1 and the count of findings at or above `--fail-on` by severity
/// when there are some, exit 0 and `ok` when not, exit 2 and `unknown: <why>` when the
/// scan cannot be done (a usage error too), or `--timeout` stopped it before it found
/// anything.
#[test]
fn npd_format_is_one_short_line_and_the_exit_code() {
    let (tree, file) = node();
    let json = tree.scan(&["--secrets", path_arg(&file), "--format", "json"]);
    let report = json.json.as_ref().unwrap();
    let at_least = |min: &[&str]| {
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| min.contains(&f["severity"].as_str().unwrap()))
            .count()
    };
    let one_line = |out: &Out| {
        let text = out.stdout_str();
        assert!(text.ends_with('\n') && text.lines().count() == 1, "{text:?}");
        assert!(text.trim_end().len() <= 80, "{text:?}");
        text.trim_end().to_owned()
    };

    let problem = tree.scan(&["--secrets", path_arg(&file), "--format", "npd"]);
    problem.assert_code(1);
    let line = one_line(&problem);
    let n = at_least(&["low", "medium", "high", "critical"]);
    let noun = if n == 1 { "finding" } else { "findings" };
    assert!(line.starts_with(&format!("secret residue: {n} {noun} (")), "{line}");
    assert!(line.contains("cri not asked"), "{line}");

    // The severities in the line, worst first, each with its count.
    let by: Vec<String> = ["critical", "high", "medium", "low"]
        .iter()
        .map(|s| (s, at_least(&[s])))
        .filter(|&(_, n)| n > 0)
        .map(|(s, n)| format!("{n} {s}"))
        .collect();
    assert_eq!(line, format!("secret residue: {n} {noun} ({}; cri not asked)", by.join(", ")));

    let crit = at_least(&["critical"]);
    assert!(crit > 0 && crit < n, "the node has critical and other findings");
    let critical =
        tree.scan(&["--secrets", path_arg(&file), "--format", "npd", "--fail-on", "critical"]);
    critical.assert_code(1);
    let noun = if crit == 1 { "finding" } else { "findings" };
    let line = one_line(&critical);
    assert_eq!(line, format!("secret residue: {crit} {noun} ({crit} critical; cri not asked)"));

    let empty = NodeTree::new();
    let ok = empty.scan(&["--format", "npd"]);
    ok.assert_code(0);
    let line = one_line(&ok);
    assert!(line.starts_with("ok: no secret residue ("), "{line}");

    // The scan's error, as stderr has it, cut to the line's limit.
    let missing = tree.work("missing.fp");
    let bad = tree.scan(&["--fingerprints", path_arg(&missing), "--format", "npd"]);
    bad.assert_code(2);
    let line = one_line(&bad);
    let err = bad.stderr_str();
    let msg = err.trim_end().strip_prefix("kresidue: error: ").unwrap();
    assert_eq!(line, kresidue::report::npd::error_line(msg));
    assert!(line.starts_with("unknown: ") && msg.starts_with(&line["unknown: ".len()..]), "{line}");
    // A usage error too, found while the arguments are parsed.
    let usage = tree.scan(&["--format", "npd", "--fail-on", "sometimes"]);
    usage.assert_code(2);
    assert_eq!(one_line(&usage), "unknown: invalid value for '--fail-on <SEVERITY>'");
    let never = tree.scan(&["--format=npd", "--fail-on", "never"]);
    never.assert_code(2);
    assert!(one_line(&never).starts_with("unknown: --format npd reports findings"));
    // A scan --timeout stopped before it found anything is unknown, not ok.
    let cut = tree.scan(&["--secrets", path_arg(&file), "--format", "npd", "--timeout", "0s"]);
    cut.assert_code(2);
    let line = one_line(&cut);
    assert!(line.starts_with("unknown: scan stopped by --timeout after 0 files"), "{line}");
}

/// `clean` prints tables and JSON only: asking it for a scan format is a usage error.
#[test]
fn clean_refuses_scan_only_formats() {
    let tree = NodeTree::new();
    for format in ["sarif", "prometheus", "npd"] {
        let out = tree.run(&["clean", "--root", tree.root_arg(), "--no-cri", "--format", format]);
        assert_eq!(out.code, 2);
        assert!(out.stderr_str().contains("--format table or json"), "{}", out.stderr_str());
    }
}

/// `kresidue completions bash` is a script bash can load, whose function completes the
/// subcommands and `scan`'s options; zsh and fish get their own kind of script.
#[test]
fn shell_completions() {
    let tree = NodeTree::new();
    let bash = tree.run(&["completions", "bash"]);
    assert_eq!(bash.code, 0);
    let script = tree.work("kresidue.bash");
    fs::write(&script, &bash.stdout).unwrap();
    // As bash calls it: the words so far, then `_kresidue COMMAND CURRENT PREVIOUS`.
    let complete = |words: &str, cword: usize| {
        let w: Vec<&str> = words.split(' ').collect();
        let cmd = format!(
            "source {}; COMP_WORDS=({words}); COMP_CWORD={cword}; _kresidue kresidue '{}' '{}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            script.display(),
            w[cword],
            w[cword - 1]
        );
        let out = std::process::Command::new("bash").args(["-c", &cmd]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(complete("kresidue cl", 1).trim(), "clean");
    let opts = complete("kresidue scan --for", 2);
    assert!(opts.lines().any(|l| l == "--format"), "{opts}");
    let zsh = tree.run(&["completions", "zsh"]);
    assert!(zsh.stdout_str().starts_with("#compdef kresidue"), "{}", zsh.stdout_str());
    let fish = tree.run(&["completions", "fish"]);
    assert!(fish.stdout_str().contains("complete -c kresidue"));
    let bad = tree.run(&["completions", "tcsh"]);
    assert_eq!(bad.code, 2);
}
