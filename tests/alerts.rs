//! The shipped alerting rules, `deploy/alerts.yaml`, against the textfile of a scan whose
//! runtime answered (the fake CRI server), was asked and did not answer (a socket that is
//! not there), and was not asked (`--no-cri`): which alerts fire, evaluated by promtool's
//! rule tests (Prometheus's own PromQL engine) and by a small evaluator of exactly the
//! shipped expressions over the parsed textfile. Without promtool (a developer machine)
//! only the latter runs; with `KRESIDUE_REAL_RUNTIMES` set (`.ci/run`) promtool must be
//! there.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

use crate::cri::{fake, Server, GONE_UID};
use crate::util::*;

/// The labels a scrape of the textfile collector adds.
const SCRAPE: [(&str, &str); 2] = [("instance", "node-a:9100"), ("job", "node")];
/// How long the promtool test scrapes the same textfile, and the times it evaluates at:
/// one scan old, and past `KresidueNotRunning`'s 3 hours.
const MINUTES: u32 = 240;
const EVAL_MINUTES: [u32; 2] = [10, 190];

fn alerts_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/alerts.yaml")
}

/// The rules of `deploy/alerts.yaml`, parsed.
fn rules() -> Vec<Value> {
    let text = std::fs::read_to_string(alerts_path()).unwrap();
    let file: Value = serde_norway::from_str(&text).unwrap();
    let groups = file["groups"].as_array().unwrap();
    groups.iter().flat_map(|g| g["rules"].as_array().unwrap().clone()).collect()
}

/// promtool, if installed; required when `KRESIDUE_REAL_RUNTIMES` is set.
// The skip message is for the person running the tests.
#[allow(clippy::print_stderr)]
fn promtool() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths).map(|d| d.join("promtool")).find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var_os("KRESIDUE_REAL_RUNTIMES").is_none(),
            "KRESIDUE_REAL_RUNTIMES is set and promtool is not installed (Debian: apt-get install prometheus)"
        );
        eprintln!("promtool not installed: the alerts checked by the test's own evaluator only");
    }
    found
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Cri {
    Ok,
    Unreachable,
    Disabled,
}

/// One sample of a textfile: name, labels, value.
type Sample = (String, BTreeMap<String, String>, f64);

/// A node holding the value of a Secret in the volume of a pod no sandbox names (dead to
/// the fake runtime), scanned with the runtime `cri`: the textfile's samples, the run's
/// end made relative to the second before the run (the test clock's zero).
fn textfile(cri: Cri) -> Vec<Sample> {
    let tree = NodeTree::new();
    let (value, secrets) = db_password(&tree, 7301);
    tree.pod(GONE_UID).secret_volume("db").key("password", value.as_bytes());
    let file = tree.secrets_file("secrets.json", &secrets);
    let server = Server::grpc(fake());
    let endpoint = server.endpoint();
    let missing = format!("unix://{}", tree.work("nothing-here.sock").display());
    let how: Vec<&str> = match cri {
        Cri::Ok => vec!["--cri", &endpoint],
        Cri::Unreachable => vec!["--cri", &missing, "--cri-timeout", "1"],
        Cri::Disabled => vec!["--no-cri"],
    };
    let t0 = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        .floor();
    let out =
        tree.kr().scan_asking(&how, &["--secrets", path_arg(&file), "--format", "prometheus"]);
    out.assert_code(1);
    let text = String::from_utf8(out.stdout.clone()).unwrap();
    let mut samples: Vec<Sample> = scrape(&text)
        .samples
        .iter()
        .map(|s| {
            let labels = s.labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            (s.metric.clone(), labels, gauge(s))
        })
        .collect();
    let ts = samples.iter_mut().find(|s| s.0 == "kresidue_last_run_timestamp_seconds").unwrap();
    ts.2 -= t0;
    assert!((0.0..120.0).contains(&ts.2), "{cri:?}: the run ended {} s after it began", ts.2);
    samples
}

/// A textfile's samples with `name` and all of `labels`.
fn find<'a>(samples: &'a [Sample], name: &str, labels: &[(&str, &str)]) -> Vec<&'a Sample> {
    samples
        .iter()
        .filter(|(n, l, _)| {
            n == name && labels.iter().all(|(k, v)| l.get(*k).map(String::as_str) == Some(v))
        })
        .collect()
}

/// The labels of the alert `expr` raises at `minutes` over `samples` as scraped (the
/// scrape's labels added, the metric's name dropped), or `None`: exactly the shipped
/// expressions, each as PromQL reads it.
fn evaluate(expr: &str, samples: &[Sample], minutes: u32) -> Option<BTreeMap<String, String>> {
    let scraped = |keep: &[&str]| -> BTreeMap<String, String> {
        SCRAPE
            .iter()
            .filter(|(k, _)| keep.contains(k))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    match expr {
        r#"sum by (instance) (kresidue_findings{severity="critical"}) > 0"# => {
            let all = find(samples, "kresidue_findings", &[("severity", "critical")]);
            // The sum of no series is no series.
            let sum: f64 = all.iter().map(|s| s.2).sum();
            (!all.is_empty() && sum > 0.0).then(|| scraped(&["instance"]))
        }
        "time() - kresidue_last_run_timestamp_seconds > 3 * 3600" => {
            let ts = find(samples, "kresidue_last_run_timestamp_seconds", &[]);
            let age = |s: &&Sample| f64::from(minutes * 60) - s.2;
            ts.first().filter(|s| age(s) > 3.0 * 3600.0).map(|_| scraped(&["instance", "job"]))
        }
        "kresidue_cri_up == 0" => find(samples, "kresidue_cri_up", &[])
            .first()
            .filter(|s| s.2 == 0.0)
            .map(|s| s.1.clone().into_iter().chain(scraped(&["instance", "job"])).collect()),
        other => panic!("deploy/alerts.yaml: no evaluator here for {other:?}; add one"),
    }
}

/// The alerts that should fire at `minutes` for a scan with the runtime `cri`, given
/// how many critical findings its textfile counts.
fn expected(alert: &str, cri: Cri, criticals: f64, minutes: u32) -> bool {
    match alert {
        "KresidueCriticalResidue" => criticals > 0.0,
        // The textfile was written once, at zero: stale after 3 hours, whatever the runtime.
        "KresidueNotRunning" => minutes > 180,
        // Only a runtime asked that did not answer; never one not asked.
        "KresidueRuntimeUnreachable" => cri == Cri::Unreachable,
        other => panic!("deploy/alerts.yaml: no expectation here for {other}; add one"),
    }
}

/// `deploy/alerts.yaml` passes `promtool check rules`; every rule is an alert with a
/// severity, a summary and a description, and no `for` (a textfile's value stands until
/// the next scan rewrites it).
#[test]
fn the_shipped_alerts_pass_promtool_check() {
    for r in rules() {
        let name = r["alert"].as_str().unwrap();
        assert!(r["labels"]["severity"].is_string(), "{name}");
        assert!(r["annotations"]["summary"].is_string(), "{name}");
        assert!(r["annotations"]["description"].is_string(), "{name}");
        assert!(r.get("for").is_none(), "{name}");
    }
    let Some(promtool) = promtool() else { return };
    let out = Command::new(promtool).arg("check").arg("rules").arg(alerts_path()).output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "promtool check rules: {text}");
    assert!(text.contains(&format!("SUCCESS: {} rules found", rules().len())), "{text}");
}

/// The textfile of each runtime state, scraped every minute for 4 hours and never
/// rewritten: `KresidueCriticalResidue` fires while a critical finding is counted (the
/// dead pod's volume when the runtime answered), `KresidueNotRunning` only once the
/// last run is 3 hours old, `KresidueRuntimeUnreachable` only for the runtime that was
/// asked and did not answer, never with `--no-cri`. Checked by the test's evaluator and,
/// when installed, by `promtool test rules`.
#[test]
fn the_shipped_alerts_over_each_runtime_state() {
    let rules = rules();
    let promtool = promtool();
    let dir = tempfile::tempdir().unwrap();
    for cri in [Cri::Ok, Cri::Unreachable, Cri::Disabled] {
        let samples = textfile(cri);
        let states: Vec<_> = find(&samples, "kresidue_cri_status", &[])
            .iter()
            .map(|(_, l, v)| (l["status"].clone(), *v))
            .collect();
        let status = match cri {
            Cri::Ok => "ok",
            Cri::Unreachable => "unreachable",
            Cri::Disabled => "disabled",
        };
        assert_eq!(states.len(), 3, "{cri:?}: {states:?}");
        for (s, v) in &states {
            assert_eq!(*v, f64::from(u8::from(s == status)), "{cri:?}: {states:?}");
        }
        let criticals =
            find(&samples, "kresidue_findings_by_severity", &[("severity", "critical")])[0].2;
        if cri == Cri::Ok {
            assert!(criticals > 0.0, "the dead pod's volume is critical");
        }
        let mut tests = Vec::new();
        for minutes in EVAL_MINUTES {
            for r in &rules {
                let alert = r["alert"].as_str().unwrap();
                let expr = r["expr"].as_str().unwrap();
                let fires = expected(alert, cri, criticals, minutes);
                let got = evaluate(expr, &samples, minutes);
                assert_eq!(got.is_some(), fires, "{cri:?} at {minutes}m: {alert}");
                let exp_alerts: Vec<Value> = got
                    .into_iter()
                    .map(|mut labels| {
                        for (k, v) in r["labels"].as_object().unwrap() {
                            labels.insert(k.clone(), v.as_str().unwrap().to_owned());
                        }
                        json!({"exp_labels": labels, "exp_annotations": r["annotations"]})
                    })
                    .collect();
                tests.push(json!({
                    "eval_time": format!("{minutes}m"),
                    "alertname": alert,
                    "exp_alerts": exp_alerts,
                }));
            }
        }
        let Some(promtool) = &promtool else { continue };
        let series: Vec<Value> = samples
            .iter()
            .map(|(name, labels, v)| {
                let all: Vec<String> = labels
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .chain(SCRAPE)
                    .map(|(k, v)| format!("{k}=\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\"")))
                    .collect();
                json!({"series": format!("{name}{{{}}}", all.join(",")), "values": format!("{v}x{MINUTES}")})
            })
            .collect();
        // JSON is YAML.
        let test = json!({
            "rule_files": [alerts_path()],
            "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": series, "alert_rule_test": tests}],
        });
        let file = dir.path().join(format!("{status}.test.yaml"));
        std::fs::write(&file, serde_json::to_string_pretty(&test).unwrap()).unwrap();
        let out = Command::new(promtool).arg("test").arg("rules").arg(&file).output().unwrap();
        assert!(
            out.status.success(),
            "{cri:?}: promtool test rules:\n{}{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            serde_json::to_string_pretty(&test).unwrap()
        );
    }
}
