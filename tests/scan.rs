//! Where and how `scan` finds values: every kubelet site in every encoding at the start,
//! middle and end of a file; values straddling the read-chunk boundaries; atomic-writer
//! volumes (user-visible path once, stale copies marked); `--path`, `--kubelet-dir`,
//! `--threads`.

use std::collections::BTreeSet;

use crate::util::*;

/// Pod uids as kubelet names pod dirs.
const UID_A: &str = "3f9a1c2e-7b4d-4e8f-9a6b-0c1d2e3f4a5b";
const UID_B: &str = "b7e6d5c4-3a2b-4c1d-8e9f-a0b1c2d3e4f5";

/// Where in a file a value is put.
#[derive(Clone, Copy, Debug)]
enum Place {
    /// The file is the value.
    Whole,
    /// The file starts with the value.
    Start,
    /// The value sits in a line in the middle.
    Middle,
    /// The file ends with the value (no trailing newline).
    End,
}

impl Place {
    const ALL: [Place; 4] = [Place::Whole, Place::Start, Place::Middle, Place::End];

    /// The file content and the offset of `form` in it.
    fn content(self, form: &[u8], seed: u64) -> (Vec<u8>, u64) {
        let (pre, post): (Vec<u8>, Vec<u8>) = match self {
            Place::Whole => (vec![], vec![]),
            Place::Start => (vec![], [b"\n".to_vec(), filler(seed, 300)].concat()),
            Place::Middle => {
                ([filler(seed, 200), b"\npassword: ".to_vec()].concat(), filler(seed + 1, 90))
            }
            Place::End => ([filler(seed, 150), b"\ntoken=".to_vec()].concat(), vec![]),
        };
        let off = pre.len() as u64;
        ([pre, form.to_vec(), post].concat(), off)
    }
}

/// The kinds of places in a pod dir a test can put a file.
#[derive(Clone, Copy, Debug, PartialEq)]
enum SiteKind {
    Secret,
    Projected,
    Csi,
    Subpath,
    Containers,
    EmptyDir,
    ConfigMap,
}

impl SiteKind {
    const ALL: [SiteKind; 7] = [
        SiteKind::Secret,
        SiteKind::Projected,
        SiteKind::Csi,
        SiteKind::Subpath,
        SiteKind::Containers,
        SiteKind::EmptyDir,
        SiteKind::ConfigMap,
    ];

    /// (site id, category) the report must give a file here (not on tmpfs, CRI disabled).
    fn expected(self) -> (&'static str, &'static str) {
        match self {
            SiteKind::Secret => ("kubelet-secret-volume", "non-tmpfs-volume"),
            SiteKind::Projected => ("kubelet-projected-volume", "non-tmpfs-volume"),
            SiteKind::Csi => ("kubelet-csi-volume", "non-tmpfs-volume"),
            SiteKind::Subpath => ("kubelet-subpath", "stale-subpath"),
            SiteKind::Containers | SiteKind::EmptyDir | SiteKind::ConfigMap => ("other", "other"),
        }
    }
}

/// One planted file: its node path, content, and the expected site of its findings.
struct PlantedFile {
    path: String,
    content: Vec<u8>,
    kind: SiteKind,
    uid: String,
}

/// Every kubelet site, every encoding, every position: each (site, encoding, place) gets its
/// own secret key and file; one scan must find exactly those, with the right path, offset,
/// length, site, category, secret, key, encoding, label, pod uid and `stale: false`.
#[test]
fn every_site_every_encoding_every_position() {
    let tree = NodeTree::new();
    let pods = [tree.pod(UID_A), tree.pod(UID_B)];
    let mut data: Vec<(String, Vec<u8>)> = Vec::new();
    let mut files: Vec<PlantedFile> = Vec::new();
    let mut seed = 1000;
    for (si, kind) in SiteKind::ALL.iter().enumerate() {
        let pod = &pods[si % 2];
        let sv = pod.secret_volume("app-secrets");
        let pv = pod.projected_volume("kube-api-access-7xk2p");
        let cv = pod.csi_volume("vault-creds");
        for enc in Enc::ALL {
            for (pi, place) in Place::ALL.iter().enumerate() {
                seed += 1;
                let key = format!("{:?}-{}-{:?}", kind, enc.name(), place).to_lowercase();
                let value = fake_secret_special(seed, 20 + (seed as usize % 40));
                let form = enc.encode(&value).unwrap();
                let (content, _) = place.content(&form, seed);
                let idx = (Enc::ALL.iter().position(|e| *e == enc).unwrap() * 4 + pi) as u32;
                let path = match kind {
                    SiteKind::Secret => sv.key(&key, &content).visible(&key),
                    SiteKind::Projected => pv.key(&key, &content).visible(&key),
                    SiteKind::Csi => cv.key(&key, &content).visible(&key),
                    SiteKind::Subpath => pod.subpath("config", "app", idx, &content),
                    SiteKind::Containers => {
                        pod.file(&format!("containers/app/{:08x}", seed), &content)
                    }
                    SiteKind::EmptyDir => pod.file(
                        &format!("volumes/kubernetes.io~empty-dir/cache/{key}.conf"),
                        &content,
                    ),
                    SiteKind::ConfigMap => pod
                        .file(&format!("volumes/kubernetes.io~configmap/settings/{key}"), &content),
                };
                data.push((key, value));
                files.push(PlantedFile { path, content, kind: *kind, uid: pod.uid().into() });
            }
        }
    }
    // etc-hosts in the pod dir is site `other` too.
    let hosts_value = fake_secret(77);
    let hosts =
        [b"127.0.0.1\tlocalhost\n# ".to_vec(), hosts_value.clone(), b"\n".to_vec()].concat();
    let hosts_path = pods[0].file("etc-hosts", &hosts);
    data.push(("etc-hosts".into(), hosts_value));
    files.push(PlantedFile {
        path: hosts_path,
        content: hosts,
        kind: SiteKind::Containers,
        uid: UID_A.into(),
    });

    let secret = Secret::opaque(
        "team-a",
        "all-sites",
        &data.iter().map(|(k, v)| (k.as_str(), v)).collect::<Vec<_>>(),
    );
    let secrets = tree.secrets_file("secrets.json", std::slice::from_ref(&secret));
    let planted: Vec<Planted> = data.iter().map(|(k, _)| secret.planted(k)).collect();
    let contents: Vec<(String, Vec<u8>)> =
        files.iter().map(|f| (f.path.clone(), f.content.clone())).collect();
    let expected = naive_matches(&contents, &planted);
    assert_eq!(expected.len(), files.len(), "test setup: one occurrence per file");

    let out = tree.scan(&["--secrets", path_arg(&secrets), "--format", "json"]);
    out.assert_code(1);
    let findings = out.findings();
    assert_findings(&findings, &expected, "every site");
    for f in &findings {
        let pf = files.iter().find(|p| p.path == f.path).unwrap();
        let (site, category) = pf.kind.expected();
        let value = secret.value(&f.key);
        let enc = Enc::ALL.iter().find(|e| e.name() == f.encoding).unwrap();
        assert_eq!(f.site, site, "site of {}", f.path);
        assert_eq!(f.category, category, "category of {}", f.path);
        assert_eq!(f.stale, Some(false), "stale of {}", f.path);
        assert_eq!(f.label, "current", "label of {}", f.path);
        assert_eq!(f.pod_uid.as_deref(), Some(pf.uid.as_str()), "pod uid of {}", f.path);
        assert_eq!(f.length, Some(enc.encode(value).unwrap().len() as u64), "length of {}", f.path);
        assert_eq!(f.raw["match"]["kind"], "fingerprint", "match.kind of {}", f.path);
    }
}

/// Builds a secret volume of files that each hold encodings of the values at offsets
/// around multiples of `chunk` (half across, one byte across either way, ending at and
/// starting at the boundary), plus a sweep of every offset around the first boundary.
/// Returns the files and the planted values.
fn straddle_tree(tree: &NodeTree, chunk: usize) -> (Vec<(String, Vec<u8>)>, Vec<Planted>) {
    let pod = tree.pod(UID_A);
    let vol = pod.secret_volume("chunks");
    // A value shorter than the smallest chunk and one longer than it (its base64 spans 3).
    let v = fake_secret_special(chunk as u64, 40);
    let w = fake_secret_special(chunk as u64 + 1, 100);
    let secret = Secret::opaque("chunks", "boundary", &[("short", &v), ("long", &w)]);
    let mut files = Vec::new();
    for (vi, value) in [&v, &w].into_iter().enumerate() {
        for enc in Enc::ALL {
            let form = enc.encode(value).unwrap();
            let l = form.len() as i64;
            let c = chunk as i64;
            let step = (l + 8 + c - 1) / c + 1; // boundaries between occurrences
            let k0 = (l + c - 1) / c; // first boundary with room for the value before it
            let deltas = [
                ("half", -l / 2),
                ("one-after", -(l - 1)),
                ("one-before", -1),
                ("at", 0),
                ("ends-at", -l),
            ];
            for (name, delta) in deltas {
                let ks = [k0, k0 + step, k0 + 2 * step];
                let size = ((k0 + 3 * step) * c + 17) as usize;
                let mut content = filler(chunk as u64 * 7 + vi as u64, size);
                for k in ks {
                    let at = (k * c + delta) as usize;
                    content[at..at + form.len()].copy_from_slice(&form);
                }
                let key = format!("v{vi}-{}-{name}", enc.name());
                vol.key(&key, &content);
                files.push((vol.visible(&key), content));
            }
        }
    }
    // Sweep: the short raw value at every offset from fully before to fully after the
    // first boundary, one file each (site `other`).
    let l = v.len();
    for off in chunk.saturating_sub(l + 2)..=chunk + 2 {
        let mut content = filler(off as u64, 2 * chunk + l);
        content[off..off + l].copy_from_slice(&v);
        let path = pod.file(&format!("containers/app/sweep-{off:05}"), &content);
        files.push((path, content));
    }
    tree.guard_secrets(std::slice::from_ref(&secret));
    (files, vec![secret.planted("short"), secret.planted("long")])
}

/// Runs the straddle layout at `--chunk-size chunk` in `--secrets` and fingerprint mode.
fn straddle(chunk: usize) {
    let tree = NodeTree::new();
    let (files, planted) = straddle_tree(&tree, chunk);
    let secret = Secret::opaque(
        "chunks",
        "boundary",
        &[("short", planted[0].value.clone()), ("long", planted[1].value.clone())],
    );
    let secrets = tree.secrets_file("secrets.json", &[secret]);
    let fp = tree.fingerprint_file(&secrets, &[], "fp.json");
    let expected = naive_matches(&files, &planted);
    let cs = chunk.to_string();
    for mode in [["--secrets", path_arg(&secrets)], ["--fingerprints", path_arg(&fp)]] {
        let out = tree.scan(&[mode[0], mode[1], "--chunk-size", &cs, "--format", "json"]);
        out.assert_code(1);
        assert_findings(&out.findings(), &expected, &format!("--chunk-size {chunk} {}", mode[0]));
    }
}

/// Values straddling 64-byte chunks (the minimum; the long value's base64 spans 3 chunks).
#[test]
fn straddles_chunk_64() {
    straddle(64);
}

/// Values straddling 100-byte chunks (not a power of two).
#[test]
fn straddles_chunk_100() {
    straddle(100);
}

/// Values straddling 4096-byte chunks.
#[test]
fn straddles_chunk_4096() {
    straddle(4096);
}

/// With the default chunk size (unknown to the test), values straddling every power of two
/// from 1 KiB to 8 MiB and every power of ten from 1 000 to 1 000 000 are found.
#[test]
fn straddles_default_chunk() {
    let tree = NodeTree::new();
    let pod = tree.pod(UID_A);
    let v = fake_secret_special(4242, 48);
    let secret = Secret::opaque("chunks", "default", &[("value", &v)]);
    let secrets = tree.secrets_file("secrets.json", std::slice::from_ref(&secret));
    let mut files = Vec::new();
    let pow2: Vec<usize> = (10..=23).map(|k| 1usize << k).collect();
    let pow10: Vec<usize> = (3..=6).map(|k| 10usize.pow(k)).collect();
    for (set, boundaries) in [("pow2", &pow2), ("pow10", &pow10)] {
        for enc in Enc::ALL {
            let form = enc.encode(&v).unwrap();
            let size = boundaries.last().unwrap() + 4096 + 3;
            let mut content = filler(size as u64, size);
            for b in boundaries {
                let at = b - form.len() / 2;
                content[at..at + form.len()].copy_from_slice(&form);
            }
            let path = pod.file(&format!("containers/app/{set}-{}.log", enc.name()), &content);
            files.push((path, content));
        }
    }
    let fp = tree.fingerprint_file(&secrets, &[], "fp.json");
    let expected = naive_matches(&files, &[secret.planted("value")]);
    for mode in [["--secrets", path_arg(&secrets)], ["--fingerprints", path_arg(&fp)]] {
        let out = tree.scan(&[mode[0], mode[1], "--format", "json"]);
        out.assert_code(1);
        assert_findings(&out.findings(), &expected, &format!("default chunk {}", mode[0]));
    }
}

/// Atomic-writer volumes: the live payload is reported once, under the user-visible name
/// (never `..data/` or the timestamped dir) with `stale: false`; a superseded timestamped
/// dir and the target of a leftover `..data_tmp` are reported at their real path with
/// `stale: true` — whether they hold an old value or the current one.
#[test]
fn atomic_writer_visible_once_and_stale_copies_marked() {
    let tree = NodeTree::new();
    let pod = tree.pod(UID_A);
    let (cur, user, old, tok, tok_next, cache) = (
        fake_secret(1),
        fake_secret(2),
        fake_secret(3),
        fake_secret(4),
        fake_secret(5),
        fake_secret(6),
    );
    const OLD_TS: &str = "..2024_12_31_23_59_59.000000001";
    const NEXT_TS: &str = "..2025_01_09_10_11_12.987654321";

    let db = pod.secret_volume("db");
    db.key("password", &cur).key("username", &user).stale_copy(OLD_TS, "password", &old);
    let api = pod.projected_volume("kube-api-access-x2x9z");
    api.key("token", &tok).stale_copy(NEXT_TS, "token", &tok_next).data_tmp(NEXT_TS);
    let cv = pod.csi_volume("cache-creds");
    cv.key("password", &cache).stale_copy(OLD_TS, "password", &cache);

    let secrets = [
        Secret::opaque("shop", "db", &[("password", &cur), ("username", &user)]),
        Secret::opaque("shop", "db-previous", &[("password", &old)]),
        Secret::new("shop", "api-token", "kubernetes.io/service-account-token", &[("token", &tok)]),
        Secret::new(
            "shop",
            "api-token-next",
            "kubernetes.io/service-account-token",
            &[("token", &tok_next)],
        ),
        Secret::opaque("shop", "cache", &[("password", &cache)]),
    ];
    let file = tree.secrets_file("secrets.json", &secrets);
    let out = tree.scan(&["--secrets", path_arg(&file), "--format", "json"]);
    out.assert_code(1);
    let findings = out.findings();

    let k = |path: String, s: &str, key: &str| {
        (path, 0u64, format!("shop/{s}"), key.to_string(), "raw".to_string())
    };
    let live: BTreeSet<Key> = [
        k(db.visible("password"), "db", "password"),
        k(db.visible("username"), "db", "username"),
        k(api.visible("token"), "api-token", "token"),
        k(cv.visible("password"), "cache", "password"),
    ]
    .into();
    let stale: BTreeSet<Key> = [
        k(db.real(OLD_TS, "password"), "db-previous", "password"),
        k(api.real(NEXT_TS, "token"), "api-token-next", "token"),
        k(cv.real(OLD_TS, "password"), "cache", "password"),
    ]
    .into();
    let expected: BTreeSet<Key> = live.union(&stale).cloned().collect();
    assert_findings(&findings, &expected, "atomic writer");
    for f in &findings {
        assert!(!f.path.contains("/..data"), "reported through ..data: {}", f.path);
        assert!(
            !f.path.contains(CURRENT_TS),
            "reported under the live timestamped dir: {}",
            f.path
        );
        let want_stale = stale.contains(&f.key());
        assert_eq!(f.stale, Some(want_stale), "stale flag of {}", f.path);
        assert_eq!(f.category, "non-tmpfs-volume", "category of {}", f.path);
    }
}

/// A nested key (`items[].path: conf/app.env`) is linked by its top directory only; it is
/// reported as `<vol>/conf/app.env`, once.
#[test]
fn atomic_writer_nested_key_reported_under_visible_path() {
    let tree = NodeTree::new();
    let pod = tree.pod(UID_A);
    let v = fake_secret(11);
    let vol = pod.secret_volume("app-env");
    vol.key("conf/app.env", &[b"DB_PASSWORD=".as_slice(), &v, b"\n"].concat());
    let file = tree.secrets_file("s.json", &[Secret::opaque("web", "env", &[("DB_PASSWORD", &v)])]);
    let out = tree.scan(&["--secrets", path_arg(&file), "--format", "json"]);
    out.assert_code(1);
    let expected: BTreeSet<Key> =
        [(vol.visible("conf/app.env"), 12, "web/env".into(), "DB_PASSWORD".into(), "raw".into())]
            .into();
    assert_findings(&out.findings(), &expected, "nested key");
}

/// `--path` adds node paths (read under the root) scanned as site `other` with no pod;
/// without it, a file outside the kubelet dir is not scanned.
#[test]
fn extra_path_is_site_other() {
    let tree = NodeTree::new();
    let v = fake_secret(21);
    let content = [b"db:\n  password: ".as_slice(), &v, b"\n"].concat();
    let path = tree.write("/etc/app/config.yaml", &content);
    let file = tree.secrets_file("s.json", &[Secret::opaque("web", "db", &[("password", &v)])]);

    let without = tree.scan(&["--secrets", path_arg(&file), "--format", "json"]);
    without.assert_code(0);
    assert!(without.findings().is_empty(), "file outside kubelet dir scanned without --path");

    let with = tree.scan(&["--secrets", path_arg(&file), "--path", "/etc/app", "--format", "json"]);
    with.assert_code(1);
    let f = with.findings();
    let expected: BTreeSet<Key> =
        [(path, 16, "web/db".into(), "password".into(), "raw".into())].into();
    assert_findings(&f, &expected, "--path");
    assert_eq!(f[0].site, "other");
    assert_eq!(f[0].category, "other");
    assert!(f[0].pod_uid.is_none(), "a --path file has no pod: {}", f[0].raw);
}

/// Issue 51: a `--path` over the sites (`/`, or a dir holding kubelet's) walks each entry
/// once: the sites' subtrees are left to their own scopes, so their files keep their site
/// and the walk meets their entries once (`-vv` counts the symlinks it did not follow:
/// the same with and without `--path /`, which adds no symlink of its own). Before, the
/// sites were walked a second time as `other`, every entry listed and opened again.
#[test]
fn a_path_over_the_sites_walks_each_entry_once() {
    let tree = NodeTree::new();
    let (v, w) = (fake_secret(31), fake_secret(32));
    let pod = tree.pod(UID_A);
    pod.secret_volume("db").key("password", &v).key("user", b"app");
    pod.projected_volume("token").key("token", b"nothing");
    pod.file("volumes/kubernetes.io~empty-dir/cache/app.log", &[b"pw=".as_slice(), &w].concat());
    tree.write(
        format!("/var/log/pods/shop_api_{UID_A}/api/0.log"),
        b"2025-01-01T00:00:00Z stdout F hi\n",
    );
    let conf = tree.write("/etc/app/config.yaml", &[b"password: ".as_slice(), &w].concat());
    let file = tree.secrets_file(
        "s.json",
        &[
            Secret::opaque("shop", "db", &[("password", &v)]),
            Secret::opaque("shop", "w", &[("w", &w)]),
        ],
    );
    let symlinks = |out: &Out| {
        let err = out.stderr_str();
        let line = err.lines().find(|l| l.contains("not read, not regular files")).unwrap_or("");
        let n = line.split("symlink: ").nth(1).map(|s| s.split(',').next().unwrap().to_owned());
        (n, err.to_owned())
    };
    let sites = tree.scan(&["--secrets", path_arg(&file), "--format", "json", "-vv"]);
    sites.assert_code(1);
    let whole =
        tree.scan(&["--secrets", path_arg(&file), "--format", "json", "-vv", "--path", "/"]);
    whole.assert_code(1);
    let (once, err) = symlinks(&sites);
    assert!(once.is_some(), "-vv counts the volumes' symlinks: {err}");
    let (twice, err) = symlinks(&whole);
    assert_eq!(twice, once, "--path / met the sites' symlinks again: {err}");
    let found = |out: &Out| -> BTreeSet<(String, String)> {
        out.findings().iter().map(|f| (f.path.clone(), f.site.clone())).collect()
    };
    let mut want = found(&sites);
    assert!(want.iter().any(|(p, s)| p.ends_with("/password") && s == "kubelet-secret-volume"));
    want.insert((conf, "other".to_owned()));
    assert_eq!(found(&whole), want, "{}", whole.stdout_str());
    let files = |out: &Out| out.json()["summary"]["files"].as_u64().unwrap();
    // The two files outside the sites: the config and the tree's `/etc/hostname`.
    assert_eq!(files(&whole), files(&sites) + 2, "{}", whole.stdout_str());
}

/// `--kubelet-dir` moves the pod tree; paths are reported under it.
#[test]
fn custom_kubelet_dir() {
    let tree = NodeTree::with_kubelet_dir("/data/kubelet");
    let v = fake_secret(31);
    let vol = tree.pod(UID_B).secret_volume("creds");
    vol.key("api-key", &v);
    let file = tree.secrets_file("s.json", &[Secret::opaque("ops", "creds", &[("api-key", &v)])]);
    let out = tree.scan(&[
        "--secrets",
        path_arg(&file),
        "--kubelet-dir",
        "/data/kubelet",
        "--format",
        "json",
    ]);
    out.assert_code(1);
    let expected: BTreeSet<Key> =
        [(vol.visible("api-key"), 0, "ops/creds".into(), "api-key".into(), "raw".into())].into();
    assert_findings(&out.findings(), &expected, "--kubelet-dir");
    assert!(vol.visible("api-key").starts_with("/data/kubelet/pods/"));
    assert_eq!(out.findings()[0].site, "kubelet-secret-volume");
}

/// `--threads 1` and `--threads 4` give the same findings, in the same order, with the same
/// ids (and a second run gives the same ids again).
#[test]
fn threads_do_not_change_findings() {
    let tree = NodeTree::new();
    let mut data = Vec::new();
    for p in 0..6u64 {
        let pod = tree.pod(&format!("0000000{p}-aaaa-4bbb-8ccc-dddddddddddd"));
        for k in 0..4u64 {
            let v = fake_secret(p * 10 + k + 100);
            pod.secret_volume(&format!("vol{k}")).key("value", &v);
            pod.file(
                &format!("containers/app/log{k}"),
                &[filler(k, 5000), v.clone(), filler(k + 9, 100)].concat(),
            );
            data.push((format!("p{p}k{k}"), v));
        }
    }
    let s = Secret::opaque(
        "many",
        "values",
        &data.iter().map(|(k, v)| (k.as_str(), v)).collect::<Vec<_>>(),
    );
    let file = tree.secrets_file("s.json", &[s]);
    let runs: Vec<Vec<Finding>> = ["1", "4", "4"]
        .iter()
        .map(|t| {
            let out =
                tree.scan(&["--secrets", path_arg(&file), "--threads", t, "--format", "json"]);
            out.assert_code(1);
            out.findings()
        })
        .collect();
    assert_eq!(runs[0].len(), 48);
    for r in &runs[1..] {
        let a: Vec<_> = runs[0].iter().map(|f| &f.raw).collect();
        let b: Vec<_> = r.iter().map(|f| &f.raw).collect();
        assert_eq!(a, b, "findings differ between --threads 1 and --threads 4");
    }
}

/// A secret volume holding plain files (no atomic-writer layout, e.g. copied by hand) is
/// still site `kubelet-secret-volume`, reported at the file's path, not stale; a subPath
/// source that is a directory has its files reported as site `kubelet-subpath`.
#[test]
fn plain_volume_files_and_subpath_dirs() {
    let tree = NodeTree::new();
    let pod = tree.pod(UID_A);
    let (a, b) = (fake_secret(41), fake_secret(42));
    let plain = pod.file("volumes/kubernetes.io~secret/legacy/password", &a);
    let sub = pod.file("volume-subpaths/certs/nginx/1/tls/server.key", &b);
    let s = Secret::opaque("web", "plain", &[("a", &a), ("b", &b)]);
    let file = tree.secrets_file("s.json", std::slice::from_ref(&s));
    let out = tree.scan(&["--secrets", path_arg(&file), "--format", "json"]);
    out.assert_code(1);
    let expected: BTreeSet<Key> = [
        (plain.clone(), 0, "web/plain".into(), "a".into(), "raw".into()),
        (sub.clone(), 0, "web/plain".into(), "b".into(), "raw".into()),
    ]
    .into();
    let f = out.findings();
    assert_findings(&f, &expected, "plain volume files");
    for f in &f {
        let (site, category) = if f.path == plain {
            ("kubelet-secret-volume", "non-tmpfs-volume")
        } else {
            ("kubelet-subpath", "stale-subpath")
        };
        assert_eq!((f.site.as_str(), f.category.as_str()), (site, category), "{}", f.path);
        assert_eq!(f.stale, Some(false), "{}", f.path);
    }
}

/// JSON escaping beyond `"` and `&`: control characters (`\u0001`), `\r`, `\t`, and
/// U+2028/U+2029 are escaped Go-style; such forms are found in both modes. A binary value
/// (invalid UTF-8, NUL bytes) is found raw and in base64.
#[test]
fn json_escaped_controls_and_binary_values() {
    let tree = NodeTree::new();
    let pod = tree.pod(UID_A);
    let mut ctl = fake_secret_len(51, 20);
    ctl.extend_from_slice("\u{1}x\r\ty\u{2028}z\u{2029}".as_bytes());
    let binary: Vec<u8> = (0..40u8).map(|i| i.wrapping_mul(97) ^ 0xA5).collect();
    let json_form = json_escape(&ctl);
    let log = [br#"{"msg":"env ""#.as_slice(), &json_form, b"\"}\n"].concat();
    let log_path = pod.file("containers/app/00c0ffee", &log);
    let bin =
        [filler(3, 100), binary.clone(), b"\n".to_vec(), b64(&binary), b"\n".to_vec()].concat();
    let bin_path = pod.file("volumes/kubernetes.io~empty-dir/blob/data.bin", &bin);
    let s = Secret::opaque("ops", "odd", &[("ctl", &ctl), ("bin", &binary)]);
    let file = tree.secrets_file("s.json", std::slice::from_ref(&s));
    let fp = tree.fingerprint_file(&file, &[], "fp.json");
    let files = [(log_path, log), (bin_path, bin)];
    let expected = naive_matches(&files, &[s.planted("ctl"), s.planted("bin")]);
    assert_eq!(expected.len(), 3, "test setup");
    for mode in [["--secrets", path_arg(&file)], ["--fingerprints", path_arg(&fp)]] {
        let out = tree.scan(&[mode[0], mode[1], "--format", "json"]);
        assert_findings(&out.findings(), &expected, &format!("odd values, {}", mode[0]));
    }
}
