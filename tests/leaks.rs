//! Nothing secret or hostile leaks through the output (issue 28, items 9, 10, 18a, 18b).
//!
//! - A Secret value (and its base64 form) used as the name of a file or a directory (in a
//!   secret volume, an emptyDir, a pod log dir) is a finding at that path (`"in": "name"`),
//!   and the name is withheld from every output: each scan format, `clean`'s plan and its
//!   "why" line, which counts the entries it leaves rather than naming them.
//! - What a JWT says of itself is shown only in the shapes claims are meant to have, and
//!   never when it holds a fingerprinted value.
//! - Invisible and format characters in names never reach the table raw.
//! - A SARIF URI of a name that is not UTF-8 names its bytes.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{json, Value};

use crate::cri::{fake, Server, GONE_UID};
use crate::util::*;

/// What a withheld path component is shown as.
const WITHHELD: &str = "<withheld>";

/// A generated value whose base64 form holds no `/` (so both can be file names).
fn name_value(seed: u64) -> (Vec<u8>, Vec<u8>) {
    (seed..)
        .map(|s| {
            let v = fake_secret_len(s, 24);
            let b = b64(&v);
            (v, b)
        })
        .find(|(v, b)| !b.contains(&b'/') && !v.contains(&b'/'))
        .unwrap()
}

/// Panics when `out` holds any 8-byte piece of `value` (the harness's guard checks whole
/// forms; a path cut in a table column or a URI must not show a piece either).
fn assert_no_piece(what: &str, out: &[u8], value: &[u8]) {
    for piece in value.windows(8) {
        assert!(
            !contains(out, piece),
            "{what}: the output holds a piece of a value ({:?}…)",
            String::from_utf8_lossy(&piece[..2])
        );
    }
}

/// A Secret value and its base64 form as file and directory names, in a secret volume, an
/// emptyDir and a pod log dir of a pod with no sandbox: each is a finding at its (withheld)
/// path, in every scan format and in `clean`'s plan no piece of either is shown, and the
/// tree is unchanged.
#[test]
fn secret_values_as_names_are_findings_and_withheld_everywhere() {
    let tree = NodeTree::new();
    let (value, b64v) = name_value(9101);
    let secret = Secret::opaque("shop", "db", &[("password", value.as_slice())]);
    let file = tree.secrets_file("secrets.json", std::slice::from_ref(&secret));
    let v = String::from_utf8(value.clone()).unwrap();
    let b = String::from_utf8(b64v.clone()).unwrap();
    let pod = tree.pod(GONE_UID);
    // A secret volume whose key is the value (its payload dir holds a file of that name).
    pod.secret_volume("db").key(&v, b"not secret\n");
    // An emptyDir: the value as a file name, its base64 form as a directory name.
    let empty = "volumes/kubernetes.io~empty-dir/cache";
    pod.file(&format!("{empty}/{v}"), b"cached\n");
    pod.file(&format!("{empty}/{b}/data.txt"), b"cached\n");
    // A pod log dir: the value as a container's directory (its log also holds the value),
    // the base64 form as a rotated log's name.
    let logs = format!("/var/log/pods/shop_web_{GONE_UID}");
    tree.write(
        format!("{logs}/{v}/0.log"),
        format!("2026-11-30T10:00:00.000000000Z stdout F password={v}\n").as_bytes(),
    );
    tree.write(format!("{logs}/app/{b}"), b"2026-11-30T10:00:00.000000000Z stdout F hi\n");

    let secrets = ["--secrets", path_arg(&file)];
    let out = tree.scan(&[&secrets[..], &["--format", "json"]].concat());
    out.assert_code(1);
    for form in [&value, &b64v] {
        assert_no_piece("scan --format json", &out.stdout, form);
    }
    let findings = out.findings();
    let named: Vec<(&str, &str)> = findings
        .iter()
        .filter(|f| f.raw["in"] == "name")
        .map(|f| (f.path.as_str(), f.encoding.as_str()))
        .collect();
    let pod_dir = pod.dir();
    let expected = [
        (format!("{pod_dir}/volumes/kubernetes.io~secret/db/{WITHHELD}"), "raw"),
        (format!("{pod_dir}/{empty}/{WITHHELD}"), "raw"),
        (format!("{pod_dir}/{empty}/{WITHHELD}"), "base64"),
        (format!("{logs}/{WITHHELD}"), "raw"),
        (format!("{logs}/app/{WITHHELD}"), "base64"),
    ];
    for (path, enc) in &expected {
        assert!(
            named.contains(&(path.as_str(), *enc)),
            "no {enc} name finding at {path}: {named:?}"
        );
    }
    assert_eq!(named.len(), expected.len(), "one finding per name: {named:?}");
    for f in findings.iter().filter(|f| f.raw["in"] == "name") {
        assert_eq!(f.secret, "shop/db", "{:?}", f.raw);
        assert_eq!(f.key, "password", "{:?}", f.raw);
        assert!(f.raw["note"].as_str().is_some_and(|n| n.contains("name")), "{:?}", f.raw);
    }
    // The log's content finding: its path and its container (named by the value) withheld.
    let log = findings
        .iter()
        .find(|f| f.raw["in"].is_null() && f.site == "pod-log")
        .unwrap_or_else(|| panic!("no content finding in the log: {findings:?}"));
    assert_eq!(log.path, format!("{logs}/{WITHHELD}/0.log"));
    assert_eq!(log.raw["container"]["name"], WITHHELD, "{:?}", log.raw);

    for format in ["table", "sarif", "prometheus", "npd"] {
        let out = tree.scan(&[&secrets[..], &["--format", format]].concat());
        out.assert_code(1);
        for form in [&value, &b64v] {
            assert_no_piece(&format!("scan --format {format}"), &out.stdout, form);
        }
    }

    // clean's plan: the gone pod's volume is planned, its dir kept for the emptyDir files,
    // which the "why" line counts without naming them.
    let server = Server::grpc(fake());
    let ep = server.endpoint();
    let lock = tree.work("lock");
    for format in ["json", "table"] {
        let before = tree.digest();
        let out = tree.run(&[
            "clean",
            "--root",
            tree.root_arg(),
            "--cri",
            &ep,
            "--min-age",
            "0s",
            "--lock",
            path_arg(&lock),
            "--secrets",
            path_arg(&file),
            "--format",
            format,
        ]);
        before.assert_same(&tree.digest(), "clean (dry run)");
        out.assert_code(0);
        for form in [&value, &b64v] {
            assert_no_piece(&format!("clean --format {format}"), &out.stdout, form);
        }
        let text = out.stdout_str();
        assert!(
            !text.contains("data.txt"),
            "clean names a file with no finding: {}",
            truncate_lines(&text)
        );
        if format == "json" {
            let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
            let why: Vec<&str> = plan["left"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|l| l["reason"].as_str())
                .filter(|r| r.contains("bookkeeping"))
                .collect();
            assert!(!why.is_empty(), "no bookkeeping reason: {plan}");
            for r in why {
                assert!(r.contains("2 entries"), "{r}");
                assert!(!r.contains(&pod_dir), "{r}");
            }
        }
    }
}

fn truncate_lines(s: &str) -> String {
    s.lines().take(40).collect::<Vec<_>>().join("\n")
}

/// A JWT with the given claims and a generated signature (nothing signed it).
fn jwt(claims: &Value, seed: u64) -> Vec<u8> {
    let enc = |v: &[u8]| URL_SAFE_NO_PAD.encode(v);
    let mut rng = Prng::new(seed);
    let sig = rng.bytes(256);
    format!(
        "{}.{}.{}",
        enc(br#"{"alg":"RS256","kid":"k1"}"#),
        enc(&serde_json::to_vec(claims).unwrap()),
        enc(&sig)
    )
    .into_bytes()
}

/// Claims are shown only in their shapes (a service account's subject, an `https://`
/// issuer), never with a fingerprinted value in them: a token whose `sub` is a known
/// value, one whose claims are free text with bidi and control characters, and a plain
/// service-account token, whose claims are shown.
#[test]
fn jwt_claims_are_shown_only_in_their_shapes_and_never_with_a_value() {
    let tree = NodeTree::new();
    let t = 1_900_000_000i64;
    // A value shaped like a service-account name: only the fingerprint check withholds it.
    let sa: String = String::from_utf8(fake_secret_len(9201, 24))
        .unwrap()
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let sa = format!("x{sa}x");
    let secret = Secret::opaque("ci", "sa-name", &[("name", sa.as_bytes())]);
    let file = tree.secrets_file("secrets.json", std::slice::from_ref(&secret));
    let hostile = String::from_utf8(fake_secret_len(9202, 20)).unwrap();
    tree.guard(hostile.as_bytes());
    let api = "https://kubernetes.default.svc.cluster.local";
    let known = json!({
        "iss": api, "aud": [api, sa], "exp": t,
        "sub": format!("system:serviceaccount:ci:{sa}"),
        "kubernetes.io": { "namespace": "ci", "serviceaccount": { "name": sa } },
    });
    let free = json!({
        "iss": format!("https://login.example.test/\u{202e}{hostile}"),
        "sub": format!("{hostile}\n\u{1b}[31m"),
        "aud": format!("aud {hostile}"),
        "exp": t,
    });
    let plain = json!({
        "iss": api, "aud": [api], "exp": t,
        "sub": "system:serviceaccount:payments:api",
        "kubernetes.io": { "namespace": "payments", "serviceaccount": { "name": "api" } },
    });
    let pod = tree.pod(GONE_UID);
    for (name, claims, seed) in [("known", &known, 1), ("free", &free, 2), ("plain", &plain, 3)] {
        let token = jwt(claims, seed);
        tree.guard(&token);
        pod.file(&format!("volumes/kubernetes.io~empty-dir/t/{name}.env"), &token);
    }
    let out = tree.scan(&["--secrets", path_arg(&file), "--format", "json"]);
    out.assert_code(1);
    let findings = out.findings();
    let token = |name: &str| -> Value {
        let f = findings
            .iter()
            .find(|f| f.path.ends_with(&format!("/{name}.env")) && f.raw["token"].is_object())
            .unwrap_or_else(|| panic!("no token finding for {name}: {findings:?}"));
        f.raw["token"].clone()
    };
    let known = token("known");
    assert!(known.get("subject").is_none(), "{known}");
    assert!(known.get("service_account").is_none(), "{known}");
    assert_eq!(known["issuer"], api, "{known}");
    assert_eq!(known["audience"], json!([api]), "{known}");
    assert_eq!(known["namespace"], "ci", "{known}");
    assert_eq!(known["withheld"], json!(["subject", "audience", "service_account"]), "{known}");
    assert_eq!(known["kind"], "bound-service-account", "{known}");
    let free = token("free");
    for k in ["issuer", "subject", "audience"] {
        assert!(free.get(k).is_none(), "{k} shown: {free}");
    }
    assert_eq!(free["withheld"], json!(["issuer", "subject", "audience"]), "{free}");
    let plain = token("plain");
    assert_eq!(plain["subject"], "system:serviceaccount:payments:api", "{plain}");
    assert_eq!(plain["service_account"], "api", "{plain}");
    assert!(plain.get("withheld").is_none(), "{plain}");
    for format in ["table", "sarif"] {
        let out = tree.scan(&["--secrets", path_arg(&file), "--format", format]);
        out.assert_code(1);
        assert_no_piece(format, &out.stdout, sa.as_bytes());
        assert_no_piece(format, &out.stdout, hostile.as_bytes());
    }
}

/// Invisible and format characters in a file name (line and paragraph separators, tag
/// characters, a soft hyphen, a bidi override, a word joiner) are escaped in the table.
#[test]
fn invisible_characters_in_names_are_escaped_in_the_table() {
    let tree = NodeTree::new();
    let (value, secrets) = db_password(&tree, 9301);
    let file = tree.secrets_file("secrets.json", &secrets);
    let hostile =
        ['\u{2028}', '\u{2029}', '\u{e0041}', '\u{e007f}', '\u{ad}', '\u{202e}', '\u{2064}'];
    let name: String = hostile.iter().map(|c| format!("a{c}")).collect();
    tree.pod(GONE_UID).file(&format!("volumes/kubernetes.io~empty-dir/x/{name}"), value.as_bytes());
    // `--wide`: the whole name, not cut to the terminal's width.
    let out = tree.scan(&["--secrets", path_arg(&file), "--wide"]);
    out.assert_code(1);
    let text = out.stdout_str();
    assert!(text.contains("kubernetes.io~empty-dir/x/a"), "{text}");
    for c in hostile {
        assert!(!text.contains(c), "U+{:04X} reaches the table raw:\n{text}", c as u32);
    }
}

/// A SARIF URI of a name that is not UTF-8 percent-encodes its bytes (`%FF`), and a name
/// holding a backslash and `x` stays unambiguous (`%5Cxff`).
#[test]
fn sarif_uris_name_the_bytes_of_a_name() {
    let tree = NodeTree::new();
    let (value, secrets) = db_password(&tree, 9401);
    let file = tree.secrets_file("secrets.json", &secrets);
    let dir = tree.pod(GONE_UID).path("volumes/kubernetes.io~empty-dir/x");
    tree.mkdir(&dir);
    let host = tree.host(&dir);
    std::fs::write(host.join(os(b"bin\xff\xfe")), value.as_bytes()).unwrap();
    std::fs::write(host.join(os(b"lit\\xff")), value.as_bytes()).unwrap();
    let out = tree.scan(&["--secrets", path_arg(&file), "--format", "sarif"]);
    out.assert_code(1);
    let sarif: Value = serde_json::from_slice(&out.stdout).unwrap();
    let uris: Vec<&str> = sarif["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].as_str())
        .collect();
    let base = format!("file://{dir}/");
    assert!(uris.contains(&format!("{base}bin%FF%FE").as_str()), "{uris:?}");
    assert!(uris.contains(&format!("{base}lit%5Cxff").as_str()), "{uris:?}");
    // The JSON report shows the two apart.
    let out = tree.scan(&["--secrets", path_arg(&file), "--format", "json"]);
    let paths: Vec<String> = out.findings().iter().map(|f| f.path.clone()).collect();
    assert!(paths.contains(&format!("{dir}/bin\\xff\\xfe")), "{paths:?}");
    assert!(paths.contains(&format!("{dir}/lit\\\\xff")), "{paths:?}");
}

/// A rule's match (a GitHub token) as a file name and inside a directory's name is a rule
/// finding in that name, withheld like a known value; without any fingerprint too.
#[test]
fn rule_matches_in_names_are_findings_and_withheld() {
    let tree = NodeTree::new();
    let token =
        String::from_utf8(kresidue::rules::examples::render("{ghtoken:ghp}", 9501)).unwrap();
    let other =
        String::from_utf8(kresidue::rules::examples::render("{ghtoken:ghp}", 9502)).unwrap();
    tree.guard(token.as_bytes());
    tree.guard(other.as_bytes());
    let pod = tree.pod(GONE_UID);
    let dir = "volumes/kubernetes.io~empty-dir/x";
    pod.file(&format!("{dir}/{token}"), b"nothing\n");
    pod.file(&format!("{dir}/backup-{other}.d/list.txt"), b"nothing\n");
    for format in ["table", "sarif", "json"] {
        let out = tree.scan(&["--format", format]);
        out.assert_code(1);
        for t in [&token, &other] {
            assert_no_piece(format, &out.stdout, t.as_bytes());
        }
        if format != "json" {
            continue;
        }
        let named: Vec<(String, String)> = out
            .findings()
            .iter()
            .filter(|f| f.raw["in"] == "name")
            .map(|f| (f.path.clone(), f.raw["match"]["rule"].as_str().unwrap_or("").to_owned()))
            .collect();
        let rule = "github-personal-access-token".to_owned();
        let at = pod.path(&format!("{dir}/{WITHHELD}"));
        assert_eq!(named, vec![(at.clone(), rule.clone()), (at, rule)], "{named:?}");
    }
}

/// A finding's id does not depend on which names a scan matched before making it: a file
/// in a dir whose name holds a GitHub token with a letter on each side (which the rule
/// alone does not match) keeps its finding's id when a file named by the token (matched
/// first: a dir's files are listed before its subdirs) comes, and the path is shown
/// withheld once the token is found. (Ids made of the path as shown then made a finding's
/// id depend on which of a scan's threads came first.)
#[test]
fn a_findings_id_does_not_depend_on_names_found_before_it() {
    let tree = NodeTree::new();
    let render = |seed| String::from_utf8(kresidue::rules::examples::render("{ghtoken:ghp}", seed));
    let (token, other) = (render(9511).unwrap(), render(9512).unwrap());
    // Not `token`: until a name holds it alone, no rule finds it in `X…Z`, which the
    // path then shows.
    tree.guard(other.as_bytes());
    let pod = tree.pod(GONE_UID);
    let dir = "volumes/kubernetes.io~empty-dir/x";
    pod.file(&format!("{dir}/X{token}Z/conf.txt"), format!("GITHUB_TOKEN={other}\n").as_bytes());
    let conf = |out: &Out| -> (String, String) {
        let found = out.findings();
        let f = found.iter().find(|f| f.path.ends_with("/conf.txt")).expect("conf.txt's finding");
        (f.raw["id"].as_str().unwrap().to_owned(), f.path.clone())
    };
    let (id, path) = conf(&tree.scan(&["--format", "json", "--threads", "1"]));
    assert!(path.contains(&token), "{path}");
    pod.file(&format!("{dir}/{token}"), b"nothing\n");
    for threads in ["1", "2"] {
        let out = tree.scan(&["--format", "json", "--threads", threads]);
        assert_eq!(conf(&out), (id.clone(), pod.path(&format!("{dir}/{WITHHELD}/conf.txt"))));
    }
}

/// The scan formats `--secrets FILE` prints: each is searched for pieces of `values`
/// (a container id cut to 12 characters in the table is a piece too).
const SCAN_FORMATS: [&str; 5] = ["json", "table", "sarif", "prometheus", "npd"];

/// Runs `clean` (a dry run, asking the fake runtime `server`) in each format and checks no
/// piece of `values` is shown; returns the JSON plan.
fn clean_shows_no_piece(tree: &NodeTree, server: &Server, file: &str, values: &[&[u8]]) -> Value {
    let lock = tree.work("lock");
    let mut plan = Value::Null;
    for format in ["json", "table"] {
        let out = tree.run(&[
            "clean",
            "--root",
            tree.root_arg(),
            "--cri",
            &server.endpoint(),
            "--min-age",
            "0s",
            "--lock",
            path_arg(&lock),
            "--secrets",
            file,
            "--format",
            format,
        ]);
        out.assert_code(0);
        for v in values {
            assert_no_piece(&format!("clean --format {format}"), &out.stdout, v);
        }
        if format == "json" {
            plan = serde_json::from_slice(&out.stdout).unwrap();
        }
    }
    plan
}

/// Container ids taken from dir names (issue 46 break 4): a dir named like a Secret value
/// under Docker's `containers/`, containers/storage's `overlay-containers/` and
/// containerd's task bundles holds the value in its config too. The path shows the name
/// withheld, and so does `container.id`, in every scan format (the table's 12 characters
/// of an id included) and in `clean`'s `left[].container`.
#[test]
fn container_ids_named_like_secret_values_are_withheld() {
    let tree = NodeTree::new();
    let (value, _) = name_value(9601);
    let v = String::from_utf8(value.clone()).unwrap();
    let secret = Secret::opaque("shop", "db", &[("password", value.as_slice())]);
    let file = tree.secrets_file("secrets.json", std::slice::from_ref(&secret));
    let spec = json!({"process": {"env": [format!("DB_PASSWORD={v}")]}}).to_string();
    let docker = json!({"Name": "/batch", "State": {"Running": false, "ExitCode": 0},
        "Config": {"Image": "busybox", "Env": [format!("DB={v}")], "Labels": {}}});
    let dirs = [
        (format!("/var/lib/docker/containers/{v}"), "config.v2.json", docker.to_string()),
        (
            format!("/var/lib/containers/storage/overlay-containers/{v}"),
            "userdata/config.json",
            spec.clone(),
        ),
        (format!("/run/containerd/io.containerd.runtime.v2.task/k8s.io/{v}"), "config.json", spec),
    ];
    for (dir, name, content) in &dirs {
        tree.write(format!("{dir}/{name}"), content.as_bytes());
    }
    let secrets = ["--secrets", path_arg(&file)];
    for format in SCAN_FORMATS {
        let out = tree.scan(&[&secrets[..], &["--format", format]].concat());
        out.assert_code(1);
        assert_no_piece(&format!("scan --format {format}"), &out.stdout, &value);
        if format != "json" {
            continue;
        }
        let findings = out.findings();
        for (dir, name, _) in &dirs {
            let shown = format!("{}/{WITHHELD}/{name}", dir.rsplit_once('/').unwrap().0);
            let f = findings
                .iter()
                .find(|f| f.path == shown && f.raw["in"].is_null())
                .unwrap_or_else(|| panic!("no finding at {shown}: {findings:?}"));
            assert_eq!(f.raw["container"]["id"], WITHHELD, "{:?}", f.raw);
        }
    }
    let server = Server::grpc(fake());
    let plan = clean_shows_no_piece(&tree, &server, path_arg(&file), &[&value]);
    let left = plan["left"].as_array().unwrap();
    let ids: Vec<&Value> = left.iter().map(|l| &l["container"]).filter(|c| !c.is_null()).collect();
    assert!(!ids.is_empty() && ids.iter().all(|c| *c == WITHHELD), "{plan}");
}

/// `n` generated values as Secrets `shop/n<i>` (key `v`), guarded, and their kubectl JSON.
fn named_values(tree: &NodeTree, n: u64, seed: u64) -> (Vec<String>, std::path::PathBuf) {
    let vals: Vec<String> =
        (0..n).map(|i| String::from_utf8(fake_secret_len(seed + i, 24)).unwrap()).collect();
    let secrets: Vec<Secret> = vals
        .iter()
        .enumerate()
        .map(|(i, v)| Secret::opaque("shop", &format!("n{i}"), &[("v", v.as_bytes())]))
        .collect();
    (vals, tree.secrets_file("secrets.json", &secrets))
}

/// Names from the runtimes' records (issue 46 break 5), each a Secret's value: Docker's
/// `Name` and its `io.kubernetes.pod.name` label; containers/storage's `names`,
/// `metadata-name` (a container's and its sandbox's, the pod's name) and an image's name
/// in `images.json`; an image's name in Docker's `repositories.json`; a container's key
/// and its pod's label in containerd's `meta.db`. Every finding they own (all of a value
/// `shop/n0` in their env or layers) shows them withheld, in every scan format.
#[test]
fn names_from_runtime_records_are_withheld() {
    use crate::runtime::{bucket, container, data, spec, POD_UID};
    use kresidue::bbolt::write::{Node, Writer};
    use std::collections::BTreeMap;
    let tree = NodeTree::new();
    let (n, file) = named_values(&tree, 10, 9701);
    let c = &n[0];
    let hex = |b: &str| b.repeat(32);
    // Docker: a kubelet container (its pod's name from its label), and one of its own
    // name.
    let labels = json!({"io.kubernetes.container.name": "app", "io.kubernetes.pod.uid": POD_UID,
        "io.kubernetes.pod.namespace": "shop", "io.kubernetes.pod.name": n[1]});
    let docker = "/var/lib/docker";
    for (id, name, labels) in [(hex("d1"), "/k8s_app", labels), (hex("d2"), &*n[2], json!({}))] {
        let record = json!({"Name": format!("/{name}"), "State": {"Running": false},
            "Config": {"Image": "busybox", "Env": [format!("DB={c}")], "Labels": labels}});
        tree.write(
            format!("{docker}/containers/{id}/config.v2.json"),
            record.to_string().as_bytes(),
        );
    }
    // Docker's image names: one image of one layer.
    let store = "/var/lib/docker/image/overlay2";
    let (web, diff, cache) = (hex("5a"), hex("1d"), hex("7c"));
    let config = json!({"rootfs": {"type": "layers", "diff_ids": [format!("sha256:{diff}")]}});
    tree.write(format!("{store}/imagedb/content/sha256/{web}"), config.to_string().as_bytes());
    let repos = json!({"Repositories": {"shop/web": {format!("shop/web:{}", n[3]): format!("sha256:{web}")}}});
    tree.write(format!("{store}/repositories.json"), repos.to_string().as_bytes());
    tree.write(format!("{store}/layerdb/sha256/{diff}/cache-id"), cache.as_bytes());
    tree.write(format!("{docker}/overlay2/{cache}/diff/key"), c.as_bytes());
    // containers/storage: a CRI-O container and its sandbox, a Podman container, an image.
    let graph = "/var/lib/containers/storage";
    let (sandbox, crio, podman, top) = (hex("c1"), hex("c2"), hex("c3"), hex("c4"));
    let meta = |m: Value| m.to_string();
    let volatile = json!([
        {"id": sandbox, "layer": hex("c5"), "metadata": meta(json!({"pod": true,
            "pod-name": "k8s_sb", "pod-id": sandbox, "uid": POD_UID, "namespace": "shop",
            "name": "k8s_sb", "metadata-name": n[4]}))},
        {"id": crio, "layer": hex("c6"), "metadata": meta(json!({"pod-name": "k8s_sb",
            "pod-id": sandbox, "name": "k8s_app", "metadata-name": n[5]}))},
    ]);
    let records = json!([{"id": podman, "layer": hex("c7"), "names": [n[6]],
        "metadata": meta(json!({"name": n[6]}))}]);
    let containers = format!("{graph}/overlay-containers");
    tree.write(format!("{containers}/containers.json"), records.to_string().as_bytes());
    tree.write(format!("{containers}/volatile-containers.json"), volatile.to_string().as_bytes());
    let env = json!({"process": {"env": [format!("DB={c}")]}}).to_string();
    for id in [&crio, &podman] {
        tree.write(format!("{containers}/{id}/userdata/config.json"), env.as_bytes());
    }
    let images =
        json!([{"id": hex("f0"), "names": [format!("localhost/{}:1", n[7])], "layer": top}]);
    tree.write(format!("{graph}/overlay-images/images.json"), images.to_string().as_bytes());
    let layers = json!([{"id": top}]);
    tree.write(format!("{graph}/overlay-layers/layers.json"), layers.to_string().as_bytes());
    tree.write(format!("{graph}/overlay/{top}/diff/key"), c.as_bytes());
    // containerd: a container keyed by a value, its pod named by another.
    let record = container(
        &n[8],
        spec(&[("DB", c)], json!({})),
        &[
            ("io.kubernetes.pod.uid", POD_UID),
            ("io.kubernetes.pod.namespace", "shop"),
            ("io.kubernetes.pod.name", &n[9]),
            ("io.kubernetes.container.name", "app"),
        ],
        None,
    );
    let keyed = Node::Bucket(BTreeMap::from([(n[8].clone().into_bytes(), record)]));
    let root = BTreeMap::from([(
        b"v1".to_vec(),
        bucket([("k8s.io", bucket([("containers", keyed)])), ("version", data([6]))]),
    )]);
    let meta_db = "/var/lib/containerd/io.containerd.metadata.v1.bolt/meta.db";
    tree.write(meta_db, &Writer::new(4096, true, 64).finish(&root, &[], 4));

    let secrets = ["--secrets", path_arg(&file)];
    for format in SCAN_FORMATS {
        let out = tree.scan(&[&secrets[..], &["--format", format]].concat());
        out.assert_code(1);
        for v in &n[1..] {
            assert_no_piece(&format!("scan --format {format}"), &out.stdout, v.as_bytes());
        }
        if format != "json" {
            continue;
        }
        // Where each name was, the value's finding shows it withheld.
        let findings = out.findings();
        let of = |path: &str| {
            findings
                .iter()
                .find(|f| f.secret == "shop/n0" && f.path.ends_with(path))
                .unwrap_or_else(|| panic!("no finding at {path}: {findings:?}"))
                .raw
                .clone()
        };
        let d1 = of(&format!("{}/config.v2.json", hex("d1")));
        assert_eq!(d1["pod"]["name"], WITHHELD, "{d1}");
        let d2 = of(&format!("{}/config.v2.json", hex("d2")));
        assert_eq!(d2["container"]["name"], WITHHELD, "{d2}");
        assert_eq!(of(&format!("{cache}/diff/key"))["images"], json!([WITHHELD]));
        let cr = of(&format!("{crio}/userdata/config.json"));
        assert_eq!(
            (&cr["container"]["name"], &cr["pod"]["name"]),
            (&json!(WITHHELD), &json!(WITHHELD)),
            "{cr}"
        );
        let pm = of(&format!("{podman}/userdata/config.json"));
        assert_eq!(pm["container"]["name"], WITHHELD, "{pm}");
        assert_eq!(of(&format!("{top}/diff/key"))["images"], json!([WITHHELD]));
        let md = of("meta.db");
        assert_eq!(
            (&md["container"]["id"], &md["pod"]["name"]),
            (&json!(WITHHELD), &json!(WITHHELD)),
            "{md}"
        );
    }
}

/// What the runtime says over CRI (issue 46 break 5): a pod's and a container's name and
/// the runtime's name, each a Secret's value, are withheld from the scan's `cri.runtime`,
/// `clean`'s plan and `kresidue pods` (given the fingerprints); a rule's match (a GitHub
/// token) in a container's name is withheld by `pods` without any.
#[test]
fn names_from_cri_are_withheld() {
    use crate::cri::{container, sandbox, GONE_UID, RUNNING};
    use kresidue::cri::proto::{ContainerState, PodSandboxState};
    let tree = NodeTree::new();
    let (n, file) = named_values(&tree, 3, 9801);
    let token =
        String::from_utf8(kresidue::rules::examples::render("{ghtoken:ghp}", 9802)).unwrap();
    tree.guard(token.as_bytes());
    tree.pod(GONE_UID).secret_volume("db").key("password", n[0].as_bytes());
    let mut answer = fake();
    let mut pod = sandbox("s9", GONE_UID, PodSandboxState::SandboxReady);
    pod.metadata.as_mut().unwrap().name.clone_from(&n[0]);
    answer.pods.push(pod);
    answer.containers.push(container(RUNNING, "s9", &n[1], ContainerState::ContainerRunning));
    let tokened = container(&"e".repeat(64), "s1", &token, ContainerState::ContainerExited);
    answer.containers.push(tokened.clone());
    answer.runtime_name = Some(String::leak(format!("rt-{}", n[2])));
    let server = Server::grpc(answer);
    let values: Vec<&[u8]> = n.iter().map(|v| v.as_bytes()).chain([token.as_bytes()]).collect();
    let secrets = ["--secrets", path_arg(&file)];
    for format in SCAN_FORMATS {
        let args = [&secrets[..], &["--format", format]].concat();
        let out = tree.kr().scan_asking(&["--cri", &server.endpoint()], &args);
        for v in &values {
            assert_no_piece(&format!("scan --format {format}"), &out.stdout, v);
        }
        if format == "json" {
            assert_eq!(out.json()["cri"]["runtime"], WITHHELD);
        }
    }
    clean_shows_no_piece(&tree, &server, path_arg(&file), &values);
    let fp = tree.fingerprint_file(&file, &[], "fp");
    // Without fingerprints only the rules know a value: a runtime naming only the token.
    let ruled = Server::grpc(crate::cri::Fake { containers: vec![tokened], ..fake() });
    for (given, format) in [(true, "json"), (true, "table"), (false, "json"), (false, "table")] {
        let ep = if given { server.endpoint() } else { ruled.endpoint() };
        let mut args = vec!["pods", "--root", tree.root_arg(), "--cri", &ep];
        if given {
            args.extend(["--fingerprints", path_arg(&fp)]);
        }
        args.extend(["--format", format]);
        let out = tree.run(&args);
        out.assert_code(0);
        for v in &values {
            assert_no_piece(&format!("pods --format {format}"), &out.stdout, v);
        }
        if format == "json" && given {
            let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(doc["runtime"], WITHHELD, "{doc}");
        }
    }
}
