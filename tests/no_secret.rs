//! No secret anywhere: every subcommand, every format, `-v` and `-vv`, the error paths, with
//! `RUST_BACKTRACE=1`, on a node full of planted values; then every file the tool wrote
//! (reports, the fingerprint file, the clean journal, the scan state) is searched for each value in every
//! encoding and for any 8-byte run of it. (The runner already checks stdout and stderr of
//! every run for every encoding, and for panics.)

use std::path::{Path, PathBuf};

use crate::cri::{fake, Server, GONE_UID, READY_UID};
use crate::util::*;

#[test]
fn no_value_in_any_output_or_written_file() {
    let tree = NodeTree::new();
    let (db, mut secrets) = {
        let (v, s) = db_password(&tree, 9101);
        (v, s.to_vec())
    };
    let api = fake_secret(9102);
    let token = fake_secret_special(9103, 48);
    secrets.push(Secret::opaque("shop", "api", &[("key", &api), ("token", &token)]));
    for s in &secrets {
        tree.guard_secrets(std::slice::from_ref(s));
    }
    for uid in [READY_UID, GONE_UID] {
        let pod = tree.pod(uid);
        pod.secret_volume("db").key("password", db.as_bytes());
        pod.subpath("db", "app", 0, &api);
        pod.file(
            "volumes/kubernetes.io~empty-dir/cache/app.json",
            &[b"{\"t\":\"", &json_escape(&token)[..], b"\"}"].concat(),
        );
        pod.file("containers/app/0a1b2c3d", &b64(&api));
    }
    tree.write(
        format!("/var/log/pods/shop_web_{READY_UID}/app/0.log"),
        format!("2026-11-30T10:00:00.000000000Z stdout F db={db}\n").as_bytes(),
    );
    let key = kresidue::rules::examples::render("{pem:EC PRIVATE KEY:121}", 9104);
    tree.guard(&key);
    tree.pod(READY_UID).file("volumes/kubernetes.io~empty-dir/cache/key.pem", &key);
    let secrets_file = tree.secrets_file("secrets.json", &secrets);
    let out = tree.work("out");
    std::fs::create_dir(&out).unwrap();
    let o = |name: &str| out.join(name).display().to_string();
    let fp = o("cluster.fp");
    let server = Server::grpc(fake());
    let ep = server.endpoint();
    let root = tree.root_arg().to_owned();
    let sf = path_arg(&secrets_file).to_owned();

    // Inputs that are wrong, each holding a value where an error message could quote it.
    let bad_fp = tree.work("bad.fp");
    std::fs::write(
        &bad_fp,
        format!("{{\"format\": \"kresidue/fingerprints/v1\", \"salt\": \"{db}\""),
    )
    .unwrap();
    let bad_json = tree.work("bad.json");
    let bad =
        ["{\"kind\": \"List\", \"items\": [{\"data\": {\"k\": \"", db.as_str(), "\" }"].concat();
    std::fs::write(&bad_json, bad).unwrap();
    let bad_baseline = tree.work("bad-baseline.json");
    std::fs::write(&bad_baseline, format!("{{\"schema\": \"{db}\", \"findings\": []}}")).unwrap();

    // Each run: a command, then its options as one string split at spaces (no option
    // value here holds a space).
    let mut runs: Vec<Vec<String>> = Vec::new();
    let mut add = |cmd: &str, opts: String| {
        let mut run = vec![cmd.to_owned()];
        run.extend(opts.split(' ').filter(|s| !s.is_empty()).map(str::to_owned));
        runs.push(run);
    };
    let on = format!("--root {root} --no-cri --secrets {sf}");
    let asked = format!("--root {root} --cri {ep}");
    add("fingerprint", format!("{sf} -o {fp}"));
    add("fingerprint", format!("{sf} --label revoked"));
    for f in ["table", "json", "sarif", "prometheus", "npd"] {
        add("scan", format!("{on} --format {f} -v --nice"));
        add(
            "scan",
            format!(
                "{asked} --fingerprints {fp} --format {f} -vv -o {}",
                o(&format!("report.{f}"))
            ),
        );
    }
    add("scan", format!("{on} --format json --baseline {}", o("report.json")));
    add("scan", format!("{on} --max-file-size 10 --timeout 5m -vv"));
    // The scan state (issue 52): written, then read back and written again.
    for _ in 0..2 {
        add("scan", format!("{asked} --fingerprints {fp} --format json -v --state {}", o("state")));
    }
    for f in ["table", "json"] {
        add("clean", format!("{asked} --secrets {sf} --format {f} --min-age 0s -vv"));
    }
    let journal = o("clean.jsonl");
    let clean_json = o("clean.json");
    // The API server's witness: the fake runtime's pods run on node-1.
    crate::clean::backdate_pods(&tree);
    let pods = o("pods.json");
    let listed = [
        crate::clean::ApiPod::running(crate::cri::READY_UID, "node-1"),
        crate::clean::ApiPod::running(crate::cri::NOTREADY_UID, "node-1"),
    ];
    std::fs::write(&pods, crate::clean::pods_json(&listed)).unwrap();
    add("clean", format!("{asked} --secrets {sf} --pods {pods} --min-age 0s --apply --journal {journal} -o {clean_json} --format json"));
    add("pods", format!("--cri {ep}"));
    add("pods", format!("--cri {ep} --format json"));
    add("rules", "--format json".to_owned());
    add("completions", "bash".to_owned());
    // Error paths.
    add("scan", format!("--root {root} --no-cri --fingerprints {}", bad_fp.display()));
    add("scan", format!("--root {root} --no-cri --secrets {}", bad_json.display()));
    add("fingerprint", bad_json.display().to_string());
    add("scan", format!("{on} --baseline {}", bad_baseline.display()));
    add("scan", format!("--root {} --no-cri", tree.work("missing").display()));
    add("scan", format!("{asked}/nonexistent --require-cri --secrets {sf}"));
    add("clean", format!("{on} --min-age {db}"));
    add("scan", format!("{on} --format {db}"));
    // The npd line of errors is on stdout.
    add("scan", format!("--root {root} --no-cri --fingerprints {} --format npd", bad_fp.display()));
    add("scan", format!("{on} --format npd --fail-on {db}"));
    let mut codes = Vec::new();
    for args in &runs {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let run = tree.kr().env("RUST_BACKTRACE", "1").run(&args);
        codes.push((args.join(" ").chars().take(60).collect::<String>(), run.code));
    }
    // The error paths did fail, and the rest did run.
    let failed = codes.iter().filter(|(_, c)| *c == 2).count();
    assert_eq!(failed, 10, "{codes:#?}");

    // Every file the runs wrote.
    let mut written: Vec<PathBuf> = Vec::new();
    let mut stack = vec![out.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                written.push(p);
            }
        }
    }
    let names: Vec<String> =
        written.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
    for want in [
        "cluster.fp",
        "report.json",
        "report.sarif",
        "report.prometheus",
        "report.table",
        "clean.jsonl",
        "clean.json",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} not written: {names:?}");
    }
    assert!(names.iter().any(|n| n.starts_with("state-")), "no state written: {names:?}");
    let values: Vec<Vec<u8>> = vec![db.into_bytes(), api, token, key];
    for file in &written {
        let bytes = std::fs::read(file).unwrap();
        for v in &values {
            for (form, b) in guard_forms(v) {
                assert!(!contains(&bytes, &b), "{} holds the {form} form of a value", show(file));
            }
            for w in v.windows(8) {
                assert!(!contains(&bytes, w), "{} holds an 8-byte run of a value", show(file));
            }
        }
    }
}

fn show(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}
