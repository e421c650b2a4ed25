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
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).unwrap();
    let families = [
        "kresidue_findings",
        "kresidue_findings_by_severity",
        "kresidue_files_scanned",
        "kresidue_bytes_scanned",
        "kresidue_scan_duration_seconds",
        "kresidue_errors",
        "kresidue_cri_up",
        "kresidue_last_run_timestamp_seconds",
    ];
    for f in families {
        assert!(text.contains(&format!("# HELP {f} ")), "{f}: {text}");
        assert!(text.contains(&format!("# TYPE {f} gauge\n")), "{f}: {text}");
        assert!(scrape.samples.iter().any(|s| s.metric == f), "{f}: {text}");
    }
    let value = |s: &prometheus_parse::Sample| match s.value {
        prometheus_parse::Value::Gauge(v) | prometheus_parse::Value::Untyped(v) => v,
        _ => panic!("{} is not a gauge", s.metric),
    };
    let one = |name: &str| value(scrape.samples.iter().find(|s| s.metric == name).unwrap());
    let findings: Vec<_> =
        scrape.samples.iter().filter(|s| s.metric == "kresidue_findings").collect();
    let total: f64 = findings.iter().map(|s| value(s)).sum();
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
        assert_eq!(value(s) as usize, n, "{s:?}");
    }
    assert_eq!(one("kresidue_files_scanned"), report["summary"]["files"].as_f64().unwrap());
    assert_eq!(one("kresidue_bytes_scanned"), report["summary"]["bytes"].as_f64().unwrap());
    assert_eq!(one("kresidue_errors"), 0.0);
    assert_eq!(one("kresidue_cri_up"), 0.0, "--no-cri");
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    assert!((now - one("kresidue_last_run_timestamp_seconds")).abs() < 120.0);
    let by_sev: Vec<_> =
        scrape.samples.iter().filter(|s| s.metric == "kresidue_findings_by_severity").collect();
    assert_eq!(by_sev.len(), 5, "every severity, zero included");
}

/// `clean` prints tables and JSON only: asking it for a scan format is a usage error.
#[test]
fn clean_refuses_scan_only_formats() {
    let tree = NodeTree::new();
    for format in ["sarif", "prometheus"] {
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
