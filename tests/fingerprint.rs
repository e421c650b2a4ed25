//! `kresidue fingerprint` and the two ways of knowing values: the file must hold nothing a
//! value can be read back from; labels and type-aware key selection carry through to
//! findings; short values are skipped and counted; and a scan with a fingerprint file
//! finds exactly what `--secrets` finds, which is exactly what a naive substring search
//! finds (property test).

use std::collections::BTreeSet;
use std::fs;

use base64::Engine as _;
use proptest::prelude::*;

use crate::util::*;

const UID: &str = "5c0ffee0-1234-4abc-8def-0123456789ab";

/// The first key of a JSON object, read from the text (serde_json's map is sorted).
fn first_key(text: &[u8]) -> String {
    let s = String::from_utf8_lossy(text);
    let rest = s.trim_start().strip_prefix('{').expect("a JSON object").trim_start();
    let rest = rest.strip_prefix('"').expect("a key");
    rest[..rest.find('"').unwrap()].to_string()
}

/// Checks a fingerprint file: `format` first and right, and no form of any value in it —
/// raw, base64 (padded, unpadded, URL-safe), JSON-escaped, hex — and no 8-byte run of any
/// value in `windowed` (nor of its base64).
fn assert_no_leak(fp: &[u8], values: &[Vec<u8>], windowed: &[Vec<u8>]) {
    assert_eq!(first_key(fp), "format", "first key of the fingerprint file");
    let v: serde_json::Value = serde_json::from_slice(fp).expect("fingerprint file is JSON");
    assert_eq!(v["format"], "kresidue/fingerprints/v1");
    let e = &base64::engine::general_purpose::STANDARD_NO_PAD;
    let u = &base64::engine::general_purpose::URL_SAFE_NO_PAD;
    for value in values {
        let mut forms = guard_forms(value);
        forms.push(("base64-nopad", e.encode(value).into_bytes()));
        forms.push(("base64-url", u.encode(value).into_bytes()));
        forms.push(("hex", hex(value).into_bytes()));
        for (name, form) in forms {
            assert!(
                !contains(fp, &form),
                "fingerprint file holds the {name} form of a value starting {:?}",
                String::from_utf8_lossy(&value[..4.min(value.len())])
            );
        }
    }
    for value in windowed {
        for source in [value.clone(), b64(value)] {
            for w in source.windows(8) {
                assert!(
                    !contains(fp, w),
                    "fingerprint file holds an 8-byte run {:?} of a value",
                    String::from_utf8_lossy(&w[..2])
                );
            }
        }
    }
}

/// A registry entry with random credentials.
fn docker_auth(seed: u64, registry: &str, token: bool) -> DockerAuth {
    DockerAuth {
        registry: registry.into(),
        username: fake_secret(seed),
        password: fake_secret(seed + 1),
        identitytoken: token.then(|| fake_secret(seed + 2)),
    }
}

/// One secret of every type kresidue treats specially, plus Opaque and a custom type.
/// Returns the secrets and, per secret, the keys whose values must be fingerprinted.
fn every_type() -> (Vec<Secret>, Vec<DockerAuth>, Vec<DockerAuth>) {
    let dcj = vec![
        docker_auth(500, "registry.example.test", false),
        docker_auth(510, "mirror.example.test:5000", true),
    ];
    let dcfg = vec![docker_auth(520, "legacy.example.test", true)];
    let secrets = vec![
        Secret::opaque(
            "apps",
            "opaque",
            &[("password", fake_secret(401)), ("api-key", fake_secret(402))],
        ),
        Secret::new(
            "apps",
            "tls",
            "kubernetes.io/tls",
            &[
                ("tls.crt", fake_secret(411)),
                ("tls.key", fake_secret(412)),
                ("ca.crt", fake_secret(413)),
            ],
        ),
        Secret::new(
            "apps",
            "sa-token",
            "kubernetes.io/service-account-token",
            &[
                ("token", fake_secret(421)),
                ("ca.crt", fake_secret(422)),
                ("namespace", b"apps-namespace-x".to_vec()),
            ],
        ),
        Secret::new(
            "apps",
            "regcred",
            "kubernetes.io/dockerconfigjson",
            &[(".dockerconfigjson", docker_config_json(&dcj))],
        ),
        Secret::new(
            "apps",
            "legacy-regcred",
            "kubernetes.io/dockercfg",
            &[(".dockercfg", docker_cfg(&dcfg))],
        ),
        Secret::new(
            "apps",
            "basic",
            "kubernetes.io/basic-auth",
            &[("username", fake_secret(431)), ("password", fake_secret(432))],
        ),
        Secret::new(
            "apps",
            "ssh",
            "kubernetes.io/ssh-auth",
            &[("ssh-privatekey", fake_secret(441)), ("known_hosts", fake_secret(442))],
        ),
        Secret::new(
            "apps",
            "custom",
            "example.com/api-creds",
            &[("client-id", fake_secret(451)), ("client-secret", fake_secret(452))],
        ),
    ];
    (secrets, dcj, dcfg)
}

/// The fingerprint file — on stdout and with `-o`, with the default and a custom label —
/// contains no value in any form and no 8-byte run of any value.
#[test]
fn fingerprint_file_leaks_nothing() {
    let tree = NodeTree::new();
    let (secrets, dcj, dcfg) = every_type();
    let file = tree.secrets_file("secrets.json", &secrets);
    let mut values: Vec<Vec<u8>> =
        secrets.iter().flat_map(|s| s.data.iter().map(|d| d.1.clone())).collect();
    // Random pieces: every value except the docker config JSON documents themselves (whose
    // 8-byte runs include registry host names that may legitimately name an entry).
    let mut windowed: Vec<Vec<u8>> =
        values.iter().filter(|v| !v.starts_with(b"{")).cloned().collect();
    for a in dcj.iter().chain(&dcfg) {
        let mut pieces = vec![a.username.clone(), a.password.clone(), a.auth()];
        pieces.extend(a.identitytoken.clone());
        values.extend(pieces.clone());
        windowed.extend(pieces);
    }
    let stdout = tree.run(&["fingerprint", path_arg(&file)]);
    stdout.assert_code(0);
    assert_no_leak(&stdout.stdout, &values, &windowed);

    let o = tree.fingerprint_file(&file, &["--label", "revoked"], "revoked.fp");
    assert_no_leak(&fs::read(o).unwrap(), &values, &windowed);
}

/// `-o FILE` writes the file atomically: stdout empty, the directory holds exactly that
/// file (no temp file left), and an existing file is replaced.
#[test]
fn fingerprint_output_file_is_atomic() {
    let tree = NodeTree::new();
    let v = fake_secret(61);
    let file = tree.secrets_file("s.json", &[Secret::opaque("a", "b", &[("k", &v)])]);
    let dir = tree.work("fp-out");
    fs::create_dir(&dir).unwrap();
    let target = dir.join("cluster.fp");
    fs::write(&target, b"previous content").unwrap();
    let out = tree.run(&["fingerprint", path_arg(&file), "-o", path_arg(&target)]);
    out.assert_code(0);
    assert!(out.stdout.is_empty(), "stdout not empty with -o: {}", out.stdout_str());
    let names: Vec<_> = fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, vec![std::ffi::OsString::from("cluster.fp")], "files left in the output dir");
    let vs = [v];
    assert_no_leak(&fs::read(&target).unwrap(), &vs, &vs);
}

/// Labels: `--label revoked` on `fingerprint` and on `scan --secrets` is carried into each
/// finding; two `--fingerprints` files keep their own labels; the default is `current`.
#[test]
fn labels_carried_into_findings() {
    let tree = NodeTree::new();
    let pod = tree.pod(UID);
    let (now, old) = (fake_secret(71), fake_secret(72));
    pod.secret_volume("db").key("password", &now);
    pod.file("containers/app/0f0f0f0f", &[b"old password was ".as_slice(), &old].concat());
    let cur =
        tree.secrets_file("cur.json", &[Secret::opaque("db", "creds", &[("password", &now)])]);
    let rev =
        tree.secrets_file("rev.json", &[Secret::opaque("db", "creds-2024", &[("password", &old)])]);
    let cur_fp = tree.fingerprint_file(&cur, &[], "cur.fp");
    let rev_fp = tree.fingerprint_file(&rev, &["--label", "revoked"], "rev.fp");

    let out = tree.scan(&[
        "--fingerprints",
        path_arg(&cur_fp),
        "--fingerprints",
        path_arg(&rev_fp),
        "--format",
        "json",
    ]);
    out.assert_code(1);
    let labels: BTreeSet<(String, String)> =
        out.findings().iter().map(|f| (f.secret.clone(), f.label.clone())).collect();
    let want: BTreeSet<(String, String)> =
        [("db/creds".into(), "current".into()), ("db/creds-2024".into(), "revoked".into())].into();
    assert_eq!(labels, want);
    assert_eq!(out.findings().len(), 2);

    let out = tree.scan(&["--secrets", path_arg(&rev), "--label", "revoked", "--format", "json"]);
    let f = out.findings();
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].label, "revoked");
    let out = tree.scan(&["--secrets", path_arg(&cur), "--format", "json"]);
    assert_eq!(out.findings()[0].label, "current");
}

/// A fingerprint file given as a pipe (`--fingerprints <(ssh host cat values.fp)`), which
/// cannot be read by position, finds what the file itself finds.
#[test]
fn fingerprint_file_through_a_pipe() {
    let tree = NodeTree::new();
    let pod = tree.pod(UID);
    let (a, b) = (fake_secret(81), fake_secret(82));
    pod.secret_volume("db").key("password", &a);
    pod.file("containers/app/0f0f0f0f", &[b"token=".as_slice(), &b].concat());
    let secrets = tree.secrets_file(
        "s.json",
        &[
            Secret::opaque("db", "creds", &[("password", &a)]),
            Secret::opaque("db", "tok", &[("t", &b)]),
        ],
    );
    let fp = tree.fingerprint_file(&secrets, &[], "s.fp");
    let ids = |out: &Out| -> BTreeSet<String> {
        out.assert_code(1);
        out.findings().into_iter().map(|f| f.id.expect("an id")).collect()
    };
    let want = ids(&tree.scan(&["--fingerprints", path_arg(&fp), "--format", "json"]));
    assert_eq!(want.len(), 2, "{want:?}");

    let pipe = tree.work("pipe.fp");
    nix::unistd::mkfifo(&pipe, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let writer = {
        let (pipe, bytes) = (pipe.clone(), fs::read(&fp).unwrap());
        std::thread::spawn(move || fs::write(pipe, bytes).unwrap())
    };
    let got = ids(&tree.scan(&["--fingerprints", path_arg(&pipe), "--format", "json"]));
    writer.join().unwrap();
    assert_eq!(got, want);
}

/// Type-aware selection, in both modes: TLS -> `tls.key` only; service-account token ->
/// `token` only; dockerconfigjson / dockercfg -> whole value plus each registry's `auth`,
/// `password`, `identitytoken` (found inside other files too), not `username`; basic-auth
/// -> `password` only; ssh-auth -> `ssh-privatekey` only; Opaque and other types -> all.
#[test]
fn type_aware_key_selection() {
    let tree = NodeTree::new();
    let pod = tree.pod(UID);
    let (secrets, dcj, dcfg) = every_type();
    let file = tree.secrets_file("secrets.json", &secrets);

    // Every data value goes into its own file in a container dir, with some context; the
    // docker configs also go into a secret volume whole.
    let mut files = Vec::new();
    for s in &secrets {
        for (k, v) in &s.data {
            let c = [format!("# {}:{}\nvalue = ", s.name, k).as_bytes(), v, b"\n"].concat();
            files.push((
                pod.file(&format!("containers/app/{}-{}", s.name, k.trim_start_matches('.')), &c),
                c,
            ));
        }
    }
    for (i, a) in dcj.iter().chain(&dcfg).enumerate() {
        let c = [
            b"Authorization: Basic ".as_slice(),
            &a.auth(),
            b"\npassword=",
            &a.password,
            b"\nuser=",
        ]
        .concat();
        let mut c = [c, a.username.clone(), b"\n".to_vec()].concat();
        if let Some(t) = &a.identitytoken {
            c = [c, b"identitytoken: ".to_vec(), t.clone(), b"\n".to_vec()].concat();
        }
        files.push((pod.file(&format!("containers/app/docker-login-{i}.log"), &c), c));
    }
    let vol = pod.secret_volume("regcred");
    let whole = secrets[3].value(".dockerconfigjson").to_vec();
    vol.key(".dockerconfigjson", &whole);
    files.push((vol.visible(".dockerconfigjson"), whole));

    // What must be fingerprinted. Docker pieces are matched under the data key's prefix.
    let mut planted = Vec::new();
    let by = |name: &str| secrets.iter().find(|s| s.name == name).unwrap();
    for (name, keys) in [
        ("opaque", &["password", "api-key"][..]),
        ("tls", &["tls.key"]),
        ("sa-token", &["token"]),
        ("regcred", &[".dockerconfigjson"]),
        ("legacy-regcred", &[".dockercfg"]),
        ("basic", &["password"]),
        ("ssh", &["ssh-privatekey"]),
        ("custom", &["client-id", "client-secret"]),
    ] {
        for k in keys {
            planted.push(by(name).planted(k));
        }
    }
    for (secret, key, auths) in
        [("apps/regcred", ".dockerconfigjson", &dcj), ("apps/legacy-regcred", ".dockercfg", &dcfg)]
    {
        for a in auths.iter() {
            let mut pieces = vec![a.auth(), a.password.clone()];
            pieces.extend(a.identitytoken.clone());
            for p in pieces {
                planted.push(Planted { secret: secret.into(), key: format!("{key}*"), value: p });
            }
        }
    }
    let expected: BTreeSet<Key> = naive_matches(&files, &planted)
        .into_iter()
        .map(|(p, o, s, k, e)| (p, o, s, k.trim_end_matches('*').to_string(), e))
        .collect();

    let fp = tree.fingerprint_file(&file, &[], "fp.json");
    for mode in [["--secrets", path_arg(&file)], ["--fingerprints", path_arg(&fp)]] {
        let out = tree.scan(&[mode[0], mode[1], "--format", "json"]);
        out.assert_code(1);
        let mut findings = out.findings();
        for f in &mut findings {
            // A piece pulled out of a docker config has a key that starts with the data
            // key (its exact form is not pinned down); the whole value's key is the data key.
            let dk = match f.secret.as_str() {
                "apps/regcred" => ".dockerconfigjson",
                "apps/legacy-regcred" => ".dockercfg",
                _ => continue,
            };
            assert!(
                f.key.starts_with(dk),
                "docker finding key {:?} does not start with {dk}",
                f.key
            );
            if f.path == vol.visible(".dockerconfigjson") && f.offset == 0 {
                assert_eq!(f.key, dk, "key of the whole docker config value");
            }
            f.key = dk.into();
        }
        let findings = merge_same_keys(findings);
        assert_findings(&findings, &expected, &format!("type-aware selection, {}", mode[0]));
    }
}

/// Values shorter than 16 bytes are skipped by `fingerprint`, which says how many on a
/// stderr line containing "skipped"; a 16-byte value is kept. `--secrets` skips the same.
#[test]
fn short_values_skipped_and_counted() {
    let tree = NodeTree::new();
    let pod = tree.pod(UID);
    let (b, c, d, e) =
        (fake_secret_len(81, 8), fake_secret_len(82, 15), fake_secret_len(83, 16), fake_secret(84));
    let s = Secret::opaque(
        "apps",
        "mixed",
        &[("a", &b"x"[..]), ("b", &b[..]), ("c", &c[..]), ("d", &d[..]), ("e", &e[..])],
    );
    let file = tree.secrets_file("s.json", std::slice::from_ref(&s));
    let mut files = Vec::new();
    for (k, v) in [("b", &b), ("c", &c), ("d", &d), ("e", &e)] {
        let content = [b"k=".as_slice(), v, b";\n"].concat();
        files.push((pod.file(&format!("containers/app/{k}.txt"), &content), content));
    }

    let out = tree.run(&["fingerprint", path_arg(&file)]);
    out.assert_code(0);
    let err = out.stderr_str();
    let line = err.lines().find(|l| l.to_lowercase().contains("skipped"));
    let line = line.unwrap_or_else(|| panic!("no 'skipped' line on stderr: {err:?}"));
    let numbers: Vec<&str> =
        line.split(|c: char| !c.is_ascii_digit()).filter(|t| !t.is_empty()).collect();
    assert!(numbers.contains(&"3"), "skipped line does not give the count 3: {line:?}");

    let fp = tree.work("fp.json");
    fs::write(&fp, &out.stdout).unwrap();
    let expected = naive_matches(&files, &[s.planted("d"), s.planted("e")]);
    for mode in [["--secrets", path_arg(&file)], ["--fingerprints", path_arg(&fp)]] {
        let out = tree.scan(&[mode[0], mode[1], "--format", "json"]);
        assert_findings(&out.findings(), &expected, &format!("short values, {}", mode[0]));
    }
}

/// Input forms: `fingerprint -` and `fingerprint` with no file read stdin; one `Secret`
/// object is accepted as well as a `List`; `scan --secrets -` reads stdin; `stringData` is
/// ignored in both modes.
#[test]
fn stdin_single_secret_and_string_data() {
    let tree = NodeTree::new();
    let pod = tree.pod(UID);
    let (v, sd) = (fake_secret(91), fake_secret(92));
    let s = Secret::opaque("web", "single", &[("token", &v)])
        .with_string_data("extra", std::str::from_utf8(&sd).unwrap());
    tree.guard_secrets(std::slice::from_ref(&s));
    pod.secret_volume("tok").key("token", &v).key("extra", &sd);
    let expected: BTreeSet<Key> = [(
        pod.path("volumes/kubernetes.io~secret/tok/token"),
        0,
        "web/single".into(),
        "token".into(),
        "raw".into(),
    )]
    .into();

    for args in [&["fingerprint", "-"][..], &["fingerprint"][..]] {
        let out = tree.kr().stdin(&kubectl_single(&s)).run(args);
        out.assert_code(0);
        let fp = tree.work("stdin.fp");
        fs::write(&fp, &out.stdout).unwrap();
        let scan = tree.scan(&["--fingerprints", path_arg(&fp), "--format", "json"]);
        assert_findings(&scan.findings(), &expected, &format!("{args:?} then scan"));
    }
    let scan = tree.kr().stdin(&kubectl_json(std::slice::from_ref(&s))).scan(&[
        "--secrets",
        "-",
        "--format",
        "json",
    ]);
    assert_findings(&scan.findings(), &expected, "--secrets -");
}

/// Fingerprint mode and `--secrets` mode give the very same findings, ids included, on a
/// tree with every encoding at several sites.
#[test]
fn modes_give_identical_findings_and_ids() {
    let tree = NodeTree::new();
    let pod = tree.pod(UID);
    let mut data = Vec::new();
    for (i, enc) in Enc::ALL.iter().enumerate() {
        let v = fake_secret_special(300 + i as u64, 30);
        let form = enc.encode(&v).unwrap();
        pod.secret_volume("s").key(&format!("k{i}"), &[filler(1, 50), form.clone()].concat());
        pod.subpath("cfg", "app", i as u32, &form);
        pod.file(&format!("containers/app/{i:08x}"), &[form.clone(), filler(2, 10)].concat());
        data.push((format!("k{i}"), v));
    }
    let s =
        Secret::opaque("x", "y", &data.iter().map(|(k, v)| (k.as_str(), v)).collect::<Vec<_>>());
    let file = tree.secrets_file("s.json", &[s]);
    let fp = tree.fingerprint_file(&file, &[], "fp.json");
    let a = tree.scan(&["--secrets", path_arg(&file), "--format", "json"]);
    let b = tree.scan(&["--fingerprints", path_arg(&fp), "--format", "json"]);
    a.assert_code(1);
    assert_eq!(a.findings().len(), 9);
    assert_eq!(
        without_ids(&a.findings()),
        without_ids(&b.findings()),
        "findings differ between modes"
    );
    let ids = |o: &Out| o.findings().iter().map(|f| f.id.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&a), ids(&b), "finding ids differ between modes");
}

/// Bytes values are made of in the property test: letters, digits, symbols, `"`, `&`, `<`,
/// `>`, `\`, space, newline, tab (so the JSON-escaped form often differs). Shrinks to `A`.
const PROP_CHARS: &[u8] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.!@\"&<>\\ \n\t";

/// One generated case: values, and insertions (value, encoding, position, file).
#[derive(Debug, Clone)]
struct Case {
    values: Vec<Vec<u8>>,
    sizes: [usize; 2],
    filler_seed: u64,
    inserts: Vec<(usize, usize, f64, usize)>,
}

fn case_strategy() -> impl Strategy<Value = Case> {
    let value = prop::collection::vec(prop::sample::select(PROP_CHARS), 16..200);
    (
        prop::collection::vec(value, 1..=3),
        [0usize..1100, 0usize..1100],
        any::<u64>(),
        prop::collection::vec((0usize..3, 0usize..3, 0.0f64..=1.0, 0usize..2), 0..6),
    )
        .prop_filter("distinct values", |(vs, ..)| {
            vs.iter().collect::<BTreeSet<_>>().len() == vs.len()
        })
        .prop_map(|(values, sizes, filler_seed, inserts)| Case {
            values,
            sizes,
            filler_seed,
            inserts,
        })
}

/// Random printable filler from the same alphabet as the values (so partial matches and
/// window-hash candidates happen).
fn prop_filler(seed: u64, len: usize) -> Vec<u8> {
    Prng::new(seed).chars(PROP_CHARS, len).into_bytes()
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 24,
        failure_persistence: None,
        max_shrink_iters: 24,
        ..ProptestConfig::default()
    })]

    /// For random values (16..200 bytes), encodings, positions and file sizes (up to a few
    /// 256-byte chunks): `--secrets` findings equal a naive substring search of every
    /// encoding, and fingerprint-mode findings equal `--secrets` findings.
    #[test]
    fn fingerprint_and_secrets_modes_agree(case in case_strategy()) {
        let tree = NodeTree::new();
        let pod = tree.pod(UID);
        let mut contents = [
            prop_filler(case.filler_seed, case.sizes[0]),
            prop_filler(case.filler_seed ^ 1, case.sizes[1]),
        ];
        for &(vi, ei, pos, fi) in &case.inserts {
            let value = &case.values[vi % case.values.len()];
            let enc = Enc::ALL[ei];
            let form = enc.encode(value).unwrap_or_else(|| value.clone());
            let c = &mut contents[fi];
            let at = ((c.len() as f64) * pos) as usize;
            c.splice(at.min(c.len())..at.min(c.len()), form);
        }
        pod.secret_volume("payload").key("data", &contents[0]);
        let log = pod.file("containers/app/5f5f5f5f", &contents[1]);
        let files = vec![
            (pod.path("volumes/kubernetes.io~secret/payload/data"), contents[0].clone()),
            (log, contents[1].clone()),
        ];
        let keys: Vec<String> = (0..case.values.len()).map(|i| format!("v{i}")).collect();
        let s = Secret::opaque(
            "prop",
            "values",
            &keys.iter().zip(&case.values).map(|(k, v)| (k.as_str(), v)).collect::<Vec<_>>(),
        );
        let planted: Vec<Planted> = keys.iter().map(|k| s.planted(k)).collect();
        let file = tree.secrets_file("s.json", &[s]);
        let fp = tree.fingerprint_file(&file, &[], "fp.json");
        let a = tree.scan(&["--secrets", path_arg(&file), "--chunk-size", "256", "--format", "json"]);
        let b = tree.scan(&["--fingerprints", path_arg(&fp), "--chunk-size", "256", "--format", "json"]);
        let expected = naive_matches(&files, &planted);
        assert_findings(&a.findings(), &expected, "--secrets vs naive search");
        prop_assert_eq!(without_ids(&a.findings()), without_ids(&b.findings()));
        prop_assert_eq!(a.code, if expected.is_empty() { 0 } else { 1 });
    }
}
