//! The cluster datastores distributions keep on the node (issue 49): kine's SQLite
//! database (`state.db` and its log), made by SQLite itself (Debian's `sqlite3`) in kine's
//! schema, with Secrets stored as the API server stores them (`k8s\0` and the protobuf of
//! a v1 Secret: the encoder is below, from `k8s.io/api` field numbers) and kine's row
//! lifecycle played through SQL: creations, updates (`old_value`), deletions, compaction
//! (rows deleted, pages freed), rows only in the log, encrypted rows. Found by a plain
//! `scan` where k3s (also with its data dir moved) and k0s keep it; every value found
//! whole, split across overflow pages or not, attributed to its key and revision state.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use crate::util::*;

/// A protobuf varint.
fn varint(mut n: u64, out: &mut Vec<u8>) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// A length-delimited field.
fn field(num: u64, bytes: &[u8], out: &mut Vec<u8>) {
    varint(num << 3 | 2, out);
    varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

/// A v1 Secret as the API server stores it: `k8s\0`, then a `runtime.Unknown` (typeMeta
/// 1: apiVersion 1, kind 2; raw 2; contentType 4) whose raw is the Secret (metadata 1:
/// name 1, namespace 3, uid 5, resourceVersion 6; data 2: map entries key 1, value 2;
/// type 3).
pub fn stored_secret(ns: &str, name: &str, data: &[(&str, &[u8])]) -> Vec<u8> {
    let mut meta = Vec::new();
    field(1, name.as_bytes(), &mut meta);
    field(3, ns.as_bytes(), &mut meta);
    field(5, format!("uid-{ns}-{name}").as_bytes(), &mut meta);
    let mut secret = Vec::new();
    field(1, &meta, &mut secret);
    for (k, v) in data {
        let mut entry = Vec::new();
        field(1, k.as_bytes(), &mut entry);
        field(2, v, &mut entry);
        field(2, &entry, &mut secret);
    }
    field(3, b"Opaque", &mut secret);
    let mut type_meta = Vec::new();
    field(1, b"v1", &mut type_meta);
    field(2, b"Secret", &mut type_meta);
    let mut unknown = Vec::new();
    field(1, &type_meta, &mut unknown);
    field(2, &secret, &mut unknown);
    field(4, b"", &mut unknown);
    [b"k8s\0".as_slice(), &unknown].concat()
}

/// A SQL blob literal.
fn blob(b: &[u8]) -> String {
    format!("X'{}'", hex(b))
}

/// kine's table (kine before 0.16.3 declares `name INTEGER`; both occur on nodes) and its
/// indexes.
const SCHEMA: &str = "CREATE TABLE kine ( id INTEGER PRIMARY KEY AUTOINCREMENT, name INTEGER, \
    created INTEGER, deleted INTEGER, create_revision INTEGER, prev_revision INTEGER, lease \
    INTEGER, value BLOB, old_value BLOB );
CREATE INDEX kine_name_index ON kine (name);
CREATE INDEX kine_name_id_index ON kine (name,id);
CREATE UNIQUE INDEX kine_name_prev_revision_uindex ON kine (name, prev_revision);\n";

/// A kine database's rows, written as kine writes them.
#[derive(Default)]
struct Kine {
    sql: String,
    /// The newest revision of each key, and its value.
    newest: std::collections::HashMap<String, (u64, Vec<u8>)>,
    rev: u64,
}

impl Kine {
    /// A database of 4 KiB pages with kine's schema; in WAL mode (kept, never checkpointed
    /// but when told, freed pages not zeroed: as kine's SQLite does) when `wal`.
    fn new(wal: bool) -> Kine {
        let mut k = Kine::default();
        k.sql("PRAGMA page_size=4096;");
        if wal {
            k.sql("PRAGMA journal_mode=WAL; PRAGMA secure_delete=0; PRAGMA wal_autocheckpoint=0;");
        }
        k.sql(SCHEMA);
        k
    }

    fn row(&mut self, key: &str, created: u8, deleted: u8, value: Option<&[u8]>) {
        self.rev += 1;
        let (prev, old) = match self.newest.get(key) {
            Some((rev, v)) => (*rev, Some(v.clone())),
            None => (0, None),
        };
        let v = value.map_or("NULL".to_owned(), blob);
        let o = old.as_deref().map_or("NULL".to_owned(), blob);
        self.sql += &format!(
            "INSERT INTO kine VALUES ({}, '{key}', {created}, {deleted}, 0, {prev}, 0, {v}, {o});\n",
            self.rev
        );
        let kept = value.map(<[u8]>::to_vec).or(old).unwrap_or_default();
        self.newest.insert(key.to_owned(), (self.rev, kept));
    }
    fn create(&mut self, key: &str, value: &[u8]) {
        self.row(key, 1, 0, Some(value));
    }
    fn update(&mut self, key: &str, value: &[u8]) {
        self.row(key, 0, 0, Some(value));
    }
    /// A deletion as kine 0.16 writes it: no value, the last one in `old_value`.
    fn delete(&mut self, key: &str) {
        self.row(key, 0, 1, None);
    }
    fn sql(&mut self, sql: &str) {
        self.sql += sql;
        self.sql.push('\n');
    }
}

/// A Secret's key in kine.
fn key(ns: &str, name: &str) -> String {
    format!("/registry/secrets/{ns}/{name}")
}

/// What the database holds, by the value each finding must be of.
pub struct Made {
    /// (secret id, state, file) each value must be found in, at least.
    pub want: Vec<(String, &'static str, &'static str)>,
    /// The Secrets to fingerprint (their `password` only).
    pub secrets: Vec<Secret>,
    /// The values stored split across pages (not one run of either file).
    pub split: Vec<String>,
    /// Where they are (`out/`).
    pub dir: tempfile::TempDir,
}

/// Runs `k`'s SQL with Debian's `sqlite3` in `dir`, on `state.db`, keeping the log: the
/// shell checkpoints and removes it when it exits, so both files are copied to
/// `dir/out` first.
fn run_sqlite(dir: &Path, k: &mut Kine) {
    let out = dir.join("out");
    std::fs::create_dir(&out).unwrap();
    k.sql(&format!(".shell cp state.db state.db-wal {}", out.display()));
    let status = Command::new("sqlite3")
        .arg("state.db")
        .current_dir(dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(k.sql.as_bytes())?;
            c.wait()
        })
        .expect("sqlite3 (Debian's sqlite3 package) runs");
    assert!(status.success());
}

/// Makes `state.db` and `state.db-wal` in a temp dir with Debian's `sqlite3`.
pub fn make_db() -> Made {
    let dir = tempfile::tempdir().unwrap();
    let mut k = Kine::new(true);
    let mut secrets = Vec::new();
    let mut want = Vec::new();
    // The data's keys in the order the API server writes a map (sorted): the value between
    // two certificates.
    let mut stored = |ns: &str, name: &str, seed: u64, ca: usize, tls: usize| {
        let password = fake_secret_len(seed, 48);
        let (ca, tls) = (filler(seed, ca), filler(seed + 1, tls));
        let data = [("ca.crt", &ca[..]), ("password", &password), ("tls.crt", &tls)];
        let bytes = stored_secret(ns, name, &data);
        secrets.push(Secret::opaque(ns, name, &[("password", password)]));
        bytes
    };
    // Cert-sized Secrets: their rows spill into overflow pages, some values across a
    // page's end (sizes swept past where the first and the second page end).
    for i in 0..48u64 {
        let name = format!("tls-{i}");
        let ca = if i < 24 { 1000 } else { 5000 };
        let v = stored("shop", &name, 4900 + i, ca, 3850 + 13 * (i as usize % 24));
        k.create(&key("shop", &name), &v);
        want.push((format!("shop/{name}"), "current", "state.db"));
    }
    // Updated: the first value is an earlier revision and the update's old value.
    let v1 = stored("shop", "rotated", 4990, 100, 0);
    let v2 = stored("shop", "rotated-v2", 4991, 100, 0);
    k.create(&key("shop", "rotated"), &v1);
    k.update(&key("shop", "rotated"), &v2);
    want.push(("shop/rotated".into(), "old-revision", "state.db"));
    want.push(("shop/rotated".into(), "old-value", "state.db"));
    want.push(("shop/rotated-v2".into(), "current", "state.db"));
    // Deleted from the cluster, not yet compacted.
    let gone = stored("shop", "gone", 4992, 100, 0);
    k.create(&key("shop", "gone"), &gone);
    k.delete(&key("shop", "gone"));
    want.push(("shop/gone".into(), "deleted", "state.db"));
    // Compacted away: its rows deleted, its overflow pages freed, its cell left in a page.
    let purged = stored("shop", "purged", 4993, 100, 9000);
    k.create(&key("shop", "purged"), &purged);
    k.sql("PRAGMA wal_checkpoint(TRUNCATE);");
    k.sql(&format!("DELETE FROM kine WHERE name = '{}';", key("shop", "purged")));
    k.sql("PRAGMA wal_checkpoint(TRUNCATE);");
    want.push(("shop/purged".into(), "freed", "state.db"));
    // Encrypted at rest: nothing of its value is stored.
    let sealed = stored("shop", "sealed", 4994, 100, 0);
    let mut ct = b"k8s:enc:aescbc:v1:key1:".to_vec();
    ct.extend(filler(4994, sealed.len()).iter().map(|b| b ^ 0x5a));
    k.create(&key("shop", "sealed"), &ct);
    for i in 0..3 {
        k.create(&key("vault", &format!("unseal-{i}")), &ct);
    }
    k.sql("PRAGMA wal_checkpoint(TRUNCATE);");
    // Written since the last checkpoint: only in the log.
    let fresh = stored("shop", "fresh", 4995, 100, 0);
    k.create(&key("shop", "fresh"), &fresh);
    want.push(("shop/fresh".into(), "current", "state.db-wal"));
    run_sqlite(dir.path(), &mut k);
    let out = dir.path().join("out");
    let (db, wal) = (read(&out.join("state.db")), read(&out.join("state.db-wal")));
    assert!(!wal.is_empty(), "the log holds the newest rows");
    let split: Vec<String> = secrets
        .iter()
        .filter(|s| s.name.starts_with("tls-"))
        .filter(|s| find_all(&db, s.value("password")).is_empty())
        .map(Secret::id)
        .collect();
    assert!(split.len() >= 3, "values split across overflow pages: {split:?}");
    for s in &secrets {
        if s.name == "sealed" {
            assert!(find_all(&db, s.value("password")).is_empty());
            assert!(find_all(&wal, s.value("password")).is_empty());
        }
    }
    Made { want, secrets, split, dir }
}

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap()
}

/// A node with the database made in `dir` at the node path `at`.
pub fn node_with(dir: &Path, at: &str) -> NodeTree {
    let tree = NodeTree::new();
    for name in ["state.db", "state.db-wal"] {
        let made = dir.join("out").join(name);
        if made.exists() {
            tree.copy(format!("{at}/{name}"), &made).unwrap();
        }
    }
    tree
}

/// (secret, record state, file name) of each finding, and the report.
fn scan_layout(
    made: &Made,
    at: &str,
    files: &[(&str, &str)],
) -> (BTreeSet<(String, String, String)>, Out) {
    let tree = node_with(made.dir.path(), at);
    for (path, text) in files {
        tree.write(path, text.as_bytes());
    }
    let file = tree.secrets_file("secrets.json", &made.secrets);
    let before = tree.digest();
    let out = tree.scan(&["--secrets", path_arg(&file), "--format", "json"]);
    out.assert_code(1);
    tree.digest().assert_same(&before, "a scan of a kine database changes nothing");
    let mut seen = BTreeSet::new();
    for f in out.findings() {
        assert_eq!(f.site, "kine", "{}", f.path);
        if f.raw["match"]["kind"] == "datastore" {
            continue;
        }
        assert_eq!(f.category, "etcd-plaintext");
        assert_eq!(f.severity, "critical");
        let file = f.path.rsplit('/').next().unwrap().to_owned();
        assert!(f.path.starts_with(at), "{} under {at}", f.path);
        let r = &f.raw["record"];
        let state = r["state"].as_str().unwrap_or_else(|| panic!("a state: {}", f.raw)).to_owned();
        assert_eq!(f.raw["stale"] == true, state != "current", "{}", f.raw);
        assert!(state == "current" || f.raw["note"].is_string(), "{}", f.raw);
        if r["key"].is_string() {
            let secret = f.secret.clone();
            // The row's key names the Secret whose value it holds (an old value's key is
            // the Secret's).
            let want_key =
                key(secret.split('/').next().unwrap(), secret.split('/').nth(1).unwrap());
            let rotated_v2 = secret == "shop/rotated-v2" && r["key"] == key("shop", "rotated");
            assert!(r["key"] == want_key.as_str() || rotated_v2, "{r:?} for {secret}");
            assert!(r["revision"].as_i64().unwrap() > 0);
        }
        seen.insert((f.secret.clone(), state, file));
    }
    (seen, out)
}

/// Every value kine's database holds is found whole (split across overflow pages or not,
/// only in the log, an old value, a deleted key's, a freed page's), attributed to its key
/// and what its row is now, wherever k3s and k0s keep the database.
#[test]
fn kine_values_found_whole_and_attributed() {
    let made = make_db();
    for (at, files) in [
        ("/var/lib/rancher/k3s/server/db", &[][..]),
        ("/data/k3s/server/db", &[("/etc/rancher/k3s/config.yaml", "data-dir: /data/k3s\n")][..]),
        ("/var/lib/k0s/db", &[][..]),
    ] {
        let (seen, out) = scan_layout(&made, at, files);
        for (secret, state, file) in &made.want {
            let hit = seen.iter().any(|(s, st, f)| s == secret && st == state && f == file);
            assert!(hit, "{at}: {secret} {state} in {file}: {seen:?}");
        }
        for secret in &made.split {
            let hit = seen.iter().any(|(s, st, _)| s == secret && st == "current");
            assert!(hit, "{at}: the split value of {secret} found whole: {seen:?}");
        }
        let current = |s: &str| seen.iter().any(|(x, st, _)| x == s && st == "current");
        for gone in ["shop/gone", "shop/purged", "shop/rotated"] {
            assert!(!current(gone), "{at}: {gone} is no current value: {seen:?}");
        }
        assert!(!seen.iter().any(|(s, ..)| s == "shop/sealed"), "{at}: encrypted: {seen:?}");
        let report = out.json();
        assert!(report["errors"].as_array().unwrap().is_empty(), "{at}: {}", report["errors"]);
    }
}

/// Whether encryption at rest is on, answered without any fingerprint: one finding per
/// datastore, critical while any Secret is stored in plaintext (the counts exact, by
/// namespace, from keys and value prefixes: a deleted or compacted Secret is none, a
/// Secret only in the log is one), `info` when every Secret is encrypted; in the table,
/// JSON, SARIF and Prometheus outputs alike.
#[test]
fn encryption_at_rest_is_counted_without_fingerprints() {
    let made = make_db();
    let at = "/var/lib/rancher/k3s/server/db";
    let tree = node_with(made.dir.path(), at);
    tree.guard_secrets(&made.secrets);
    let out = tree.scan(&["--format", "json"]);
    out.assert_code(1);
    let lines: Vec<_> =
        out.findings().into_iter().filter(|f| f.raw["match"]["kind"] == "datastore").collect();
    assert_eq!(lines.len(), 1, "one line per datastore: {}", out.stdout_str());
    let line = &lines[0];
    assert_eq!(line.path, format!("{at}/state.db"));
    assert_eq!((line.severity.as_str(), line.category.as_str()), ("critical", "etcd-plaintext"));
    let counts = &line.raw["secrets_at_rest"];
    assert_eq!(counts["plaintext"], 50, "{counts}");
    assert_eq!(counts["encrypted"], 4, "{counts}");
    let by_ns = serde_json::json!([
        {"namespace": "shop", "plaintext": 50, "encrypted": 1},
        {"namespace": "vault", "plaintext": 0, "encrypted": 3},
    ]);
    assert_eq!(counts["namespaces"], by_ns);
    let said = "datastore: 50 Secrets in plaintext, 4 encrypted";
    let table = tree.scan(&["--wide"]);
    assert!(table.stdout_str().contains(said), "{}", table.stdout_str());
    let sarif = tree.scan(&["--format", "sarif"]);
    let sarif: serde_json::Value = serde_json::from_str(&sarif.stdout_str()).unwrap();
    let results = sarif["runs"][0]["results"].as_array().unwrap().clone();
    let result = results.iter().find(|r| r["ruleId"] == "datastore/encryption-at-rest");
    let result = result.unwrap_or_else(|| panic!("{results:?}"));
    assert_eq!(result["level"], "error");
    assert!(result["message"]["text"].as_str().unwrap().contains(said), "{result}");
    let prom = tree.scan(&["--format", "prometheus"]);
    let scrape = scrape(&prom.stdout_str());
    let gauge_of = |state: &str| {
        let s = scrape.samples.iter().find(|s| {
            s.metric == "kresidue_datastore_secrets" && s.labels.get("state") == Some(state)
        });
        s.map(gauge)
    };
    assert_eq!((gauge_of("plaintext"), gauge_of("encrypted")), (Some(50.0), Some(4.0)));

    // Every Secret encrypted: the same line says so, as information.
    let dir = tempfile::tempdir().unwrap();
    let mut k = Kine::default();
    k.sql("PRAGMA journal_mode=WAL;");
    k.sql(SCHEMA);
    for i in 0..7 {
        let mut ct = b"k8s:enc:secretbox:v1:key2:".to_vec();
        ct.extend(filler(i, 300));
        k.create(&key("shop", &format!("s{i}")), &ct);
    }
    k.create("/registry/configmaps/shop/plain", b"k8s\0not a secret");
    run_sqlite(dir.path(), &mut k);
    let sealed = node_with(dir.path(), at);
    let out = sealed.scan(&["--format", "json"]);
    out.assert_code(0);
    let findings = out.findings();
    assert_eq!(findings.len(), 1, "{}", out.stdout_str());
    let f = &findings[0];
    assert_eq!((f.severity.as_str(), f.category.as_str()), ("info", "encrypted-at-rest"));
    assert_eq!(f.raw["secrets_at_rest"]["plaintext"], 0);
    assert_eq!(f.raw["secrets_at_rest"]["encrypted"], 7);
    let table = sealed.scan(&[]);
    let said = "datastore: 7 Secrets encrypted (encryption at rest is on)";
    assert!(table.stdout_str().contains(said), "{}", table.stdout_str());
}

/// kine's database is read in bounded memory and time whatever it says of itself: a
/// 1 GiB file (sparse, its value at the end, past every page the header counts), a header
/// claiming 2^32-1 pages and a freelist trunk that points at itself, and pages
/// overwritten with junk. Each is scanned to the end (its values found where whole), with
/// a clear `errors` entry for what could not be read, never a panic.
#[test]
fn hostile_kine_databases_are_bounded() {
    const GIB: u64 = 1 << 30;
    let made = make_db();
    let at = "/var/lib/rancher/k3s/server/db";
    let src = made.dir.path().join("out/state.db");
    let good = read(&src);
    let value = made.secrets.iter().find(|s| s.name == "tls-3").unwrap().value("password").to_vec();

    // A 1 GiB sparse database with the value at its very end.
    let tree = node_with(made.dir.path(), at);
    let host = tree.host(format!("{at}/state.db"));
    {
        use std::io::{Seek, SeekFrom, Write};
        let mut f = std::fs::OpenOptions::new().write(true).open(&host).unwrap();
        f.set_len(GIB).unwrap();
        f.seek(SeekFrom::Start(GIB - 4096)).unwrap();
        f.write_all(&value).unwrap();
    }
    let out = scan_measured(&tree, &made.secrets);
    out.assert_code(1);
    let at_end =
        out.findings().into_iter().any(|f| f.offset == GIB - 4096 && f.secret == "shop/tls-3");
    assert!(at_end, "the value at the end of 1 GiB: {}", out.stdout_str());
    let rss = out.peak_rss_kb.expect("peak RSS measured");
    assert!(rss < 100 * 1024, "peak RSS {rss} KiB over a 1 GiB database");

    // A header claiming 2^32-1 pages, a freelist trunk that is itself, pages of junk.
    let page_size = usize::from(u16::from_be_bytes([good[16], good[17]]));
    let mut rng = Prng::new(4949);
    for round in 0..6 {
        let mut bad = good.clone();
        bad[28..32].copy_from_slice(&u32::MAX.to_be_bytes());
        bad[32..36].copy_from_slice(&2u32.to_be_bytes());
        let pages = bad.len() / page_size;
        for _ in 0..8 * (round + 1) {
            let start = rng.range(1, pages) * page_size + rng.below(page_size - 16);
            let junk = rng.next_u64() as u8;
            bad[start..start + 16].fill(junk);
        }
        // Page 2's first four bytes (a trunk's next) point back at page 2.
        bad[page_size..page_size + 4].copy_from_slice(&2u32.to_be_bytes());
        let tree = node_with(made.dir.path(), at);
        std::fs::write(tree.host(format!("{at}/state.db")), &bad).unwrap();
        let out = scan_measured(&tree, &made.secrets);
        assert!(matches!(out.code, 0 | 1), "round {round}: {}", out.stderr_str());
        let rss = out.peak_rss_kb.expect("peak RSS measured");
        assert!(rss < 100 * 1024, "round {round}: peak RSS {rss} KiB");
    }
}

/// `scan --secrets … --format json` of `tree`, its peak RSS measured, within a deadline
/// far above what it takes.
fn scan_measured(tree: &NodeTree, secrets: &[Secret]) -> Out {
    let file = tree.secrets_file("secrets.json", secrets);
    let kr = tree.kr().measure_rss().timeout(std::time::Duration::from_secs(120));
    kr.scan(&["--secrets", path_arg(&file), "--format", "json"])
}

/// The findings of `out` that are matches (not the at-rest line), as (secret, key, state).
fn attributed(out: &Out) -> BTreeSet<(String, String, String)> {
    out.findings()
        .into_iter()
        .filter(|f| f.raw["match"]["kind"] != "datastore")
        .map(|f| {
            let r = &f.raw["record"];
            let key = r["key"].as_str().unwrap_or("-").to_owned();
            (f.secret.clone(), key, r["state"].as_str().unwrap_or("-").to_owned())
        })
        .collect()
}

/// The database `k` makes in `dir`, at k3s's place: scanned for `secrets`, each match's
/// (secret, key, state).
fn scan_made(dir: &Path, k: &mut Kine, secrets: &[Secret]) -> BTreeSet<(String, String, String)> {
    run_sqlite(dir, k);
    let tree = node_with(dir, "/var/lib/rancher/k3s/server/db");
    let file = tree.secrets_file("secrets.json", secrets);
    let out = tree.scan(&["--secrets", path_arg(&file), "--format", "json"]);
    out.assert_code(1);
    attributed(&out)
}

/// Rows deleted and others written in their place reuse their overflow pages: the page
/// the log rewrote still holds a deleted row's cell, pointing at pages that now hold a new
/// row. The new rows' values are theirs, current, never an old row's. And where the old
/// rows were written in the log too (no checkpoint between), an old row's overflow pages
/// are read as they were when it was written (its transaction's frames): its value is
/// found as its own, superseded.
#[test]
fn an_older_image_never_claims_pages_reused_since() {
    for checkpoint in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let mut k = Kine::new(true);
        let mut secrets = Vec::new();
        // Rows of two pages each: a password past the first 4 KiB lies whole in an
        // overflow page.
        let mut stored = |name: &str, seed: u64| {
            let password = fake_secret_len(seed, 48);
            let data = [("ca.crt", filler(seed, 5000)), ("password", password.clone())];
            let data: Vec<(&str, &[u8])> = data.iter().map(|(k, v)| (*k, &v[..])).collect();
            secrets.push(Secret::opaque("shop", name, &[("password", password)]));
            stored_secret("shop", name, &data)
        };
        for i in 0..60 {
            let v = stored(&format!("old-{i}"), 7100 + i);
            k.create(&key("shop", &format!("old-{i}")), &v);
        }
        if checkpoint {
            k.sql("PRAGMA wal_checkpoint(TRUNCATE);");
        }
        // Compaction removes the old rows; new Secrets take their pages, in the log.
        k.sql("BEGIN;");
        k.sql("DELETE FROM kine WHERE name LIKE '/registry/secrets/shop/old-%';");
        for i in 0..60 {
            let v = stored(&format!("new-{i}"), 7200 + i);
            k.create(&key("shop", &format!("new-{i}")), &v);
        }
        k.sql("COMMIT;");
        let seen = scan_made(dir.path(), &mut k, &secrets);
        for s in &secrets {
            let own = key("shop", &s.name);
            let wrong = seen.iter().filter(|(x, k, _)| *x == s.id() && *k != "-" && *k != own);
            assert_eq!(wrong.count(), 0, "{} claimed by another row: {seen:?}", s.id());
            let state = match s.name.starts_with("old-") {
                true if checkpoint => continue,
                true => "superseded",
                false => "current",
            };
            let want = (s.id(), own, state.to_owned());
            assert!(seen.contains(&want), "checkpoint {checkpoint}: {want:?} in {seen:?}");
        }
    }
}

/// A corrupt page loses its own rows, not the rest of the table: the counts go on past
/// it, and the line says they are of the part read (never "encryption at rest is on" when
/// the plaintext rows beyond the bad page were not counted).
#[test]
fn a_corrupt_page_loses_its_rows_not_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let mut k = Kine::new(false);
    for i in 0..100 {
        k.create(
            &key("shop", &format!("p{i:03}")),
            &stored_secret("shop", "p", &[("v", &[7; 300])]),
        );
    }
    for i in 0..100 {
        let mut ct = b"k8s:enc:aescbc:v1:key1:".to_vec();
        ct.extend(filler(i, 300));
        k.create(&key("vault", &format!("e{i:03}")), &ct);
    }
    run_sqlite(dir.path(), &mut k);
    let src = dir.path().join("out/state.db");
    let mut db = read(&src);
    // The leaf holding one encrypted row in the middle: its cell count made absurd.
    let hits = find_all(&db, key("vault", "e050").as_bytes());
    let page = hits.iter().map(|at| at / 4096 * 4096).find(|&p| db[p] == 0x0d).unwrap();
    assert_eq!(db[page], 0x0d, "a table leaf");
    db[page + 3..page + 5].copy_from_slice(&[0xff, 0xff]);
    std::fs::write(&src, &db).unwrap();
    let tree = node_with(dir.path(), "/var/lib/k0s/db");
    let out = tree.scan(&["--format", "json"]);
    out.assert_code(1);
    let lines: Vec<_> =
        out.findings().into_iter().filter(|f| f.raw["match"]["kind"] == "datastore").collect();
    assert_eq!(lines.len(), 1, "{}", out.stdout_str());
    let counts = &lines[0].raw["secrets_at_rest"];
    assert_eq!(counts["plaintext"], 100, "every plaintext row beyond the bad page: {counts}");
    let encrypted = counts["encrypted"].as_u64().unwrap();
    assert!((80..100).contains(&encrypted), "the bad page's rows only are lost: {counts}");
    assert_eq!(counts["partial"], true, "{counts}");
    assert_eq!(lines[0].category, "etcd-plaintext");
    let table = tree.scan(&["--wide"]);
    assert!(table.stdout_str().contains("only part of it could be read"), "{}", table.stdout_str());
    let errors = out.json()["errors"].to_string();
    assert!(errors.contains("cells do not fit a page"), "{errors}");
}

/// Cell pointers that all point at one cell (or at cells overlapping each other) are
/// read once: a page's records hold at most a page, whatever its pointer array says.
#[test]
fn overlapping_cells_are_read_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut k = Kine::new(false);
    k.sql(
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 4000) \
         INSERT INTO kine SELECT x, '/registry/secrets/ns/s' || x, 1, 0, 0, 0, 0, \
         randomblob(2500), NULL FROM c;",
    );
    run_sqlite(dir.path(), &mut k);
    let src = dir.path().join("out/state.db");
    let mut db = read(&src);
    let mut patched = 0;
    for page in db.chunks_exact_mut(4096).skip(1) {
        let content = usize::from(u16::from_be_bytes([page[5], page[6]]));
        if page[0] != 0x0d || content < 16 {
            continue;
        }
        // As many pointers as fit before the content, each at the page's first cell.
        let n = (content - 8) / 2;
        page[3..5].copy_from_slice(&(n as u16).to_be_bytes());
        for i in 0..n {
            page[8 + 2 * i..10 + 2 * i].copy_from_slice(&(content as u16).to_be_bytes());
        }
        patched += 1;
    }
    assert!(patched > 3000, "{patched} leaves");
    std::fs::write(&src, &db).unwrap();
    let tree = node_with(dir.path(), "/var/lib/rancher/k3s/server/db");
    let out = scan_measured(&tree, &[]);
    assert!(matches!(out.code, 0 | 1), "{}", out.stderr_str());
    let rss = out.peak_rss_kb.expect("peak RSS measured");
    assert!(rss < 100 * 1024, "peak RSS {rss} KiB");
}

/// A log larger than `--max-file-size` is not read with its database (as it is not read
/// on its own): the limit bounds both, and the errors say so.
#[test]
fn the_log_beside_a_database_is_within_max_file_size() {
    let made = make_db();
    let tree = node_with(made.dir.path(), "/var/lib/rancher/k3s/server/db");
    let (db, wal) = (
        tree.host("/var/lib/rancher/k3s/server/db/state.db"),
        tree.host("/var/lib/rancher/k3s/server/db/state.db-wal"),
    );
    let (db, wal) = (std::fs::metadata(db).unwrap().len(), std::fs::metadata(wal).unwrap().len());
    assert!(wal < db, "{wal} {db}");
    // Pad the log with frames of no generation: a larger log, the same database.
    let host = tree.host("/var/lib/rancher/k3s/server/db/state.db-wal");
    let mut padded = read(&host);
    padded.extend(std::iter::repeat_n(0u8, (db - wal) as usize + 4096 * 8));
    std::fs::write(&host, &padded).unwrap();
    let max = (db + 4096).to_string();
    let file = tree.secrets_file("secrets.json", &made.secrets);
    let out =
        tree.scan(&["--secrets", path_arg(&file), "--format", "json", "--max-file-size", &max]);
    out.assert_code(1);
    let errors = out.json()["errors"].to_string();
    assert!(errors.contains("state.db-wal beside it is larger than --max-file-size"), "{errors}");
}

/// VACUUM rewrites the database smaller through the log: the log's earlier frames of pages
/// past its new end are no page of it; their rows are read as the older images they are.
#[test]
fn frames_past_a_shrunk_database_are_older_images() {
    let dir = tempfile::tempdir().unwrap();
    let mut k = Kine::new(true);
    let mut secrets = Vec::new();
    for i in 0..40u64 {
        let name = format!("gone-{i}");
        let password = fake_secret_len(7300 + i, 48);
        let v = stored_secret("shop", &name, &[("password", &password), ("x", &filler(i, 3000))]);
        secrets.push(Secret::opaque("shop", &name, &[("password", password)]));
        k.create(&key("shop", &name), &v);
    }
    k.sql("DELETE FROM kine;");
    k.sql("VACUUM;");
    let seen = scan_made(dir.path(), &mut k, &secrets);
    let late: Vec<_> = seen.iter().filter(|(s, ..)| s.ends_with("gone-39")).collect();
    assert!(!late.is_empty(), "{seen:?}");
    for (secret, _, state) in &seen {
        assert_ne!(
            state, "unused",
            "{secret} in a frame past the end is no unused space: {seen:?}"
        );
        assert_ne!(state, "current", "{secret}: {seen:?}");
    }
    for s in &secrets {
        let row = seen.iter().any(|(x, k, _)| *x == s.id() && k.ends_with(&s.id()));
        assert!(row, "{} attributed to its row: {seen:?}", s.id());
    }
}

/// Two free TCP ports on the loopback.
fn free_ports() -> (u16, u16) {
    let a = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let b = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    (a.local_addr().unwrap().port(), b.local_addr().unwrap().port())
}

/// A datastore's daemon the test started (etcd, a dqlite node), its output in `log`;
/// stopped as a node stops it (SIGTERM: etcd's backend commits what it batched) on drop,
/// then written back (the extents of its preallocated log files, what the tree's digest
/// hashes by, no longer change under the scan).
struct Daemon(std::process::Child);

impl Daemon {
    fn spawn(cmd: &mut Command, log: &Path) -> Daemon {
        let out = std::fs::File::create(log).unwrap();
        let child = cmd.stdout(out.try_clone().unwrap()).stderr(out).spawn();
        Daemon(child.unwrap_or_else(|e| panic!("{cmd:?} runs (its Debian package): {e}")))
    }

    /// Waits until `ready` (10 s at most), or fails with the daemon's log.
    fn wait(&self, log: &Path, ready: impl Fn() -> bool) {
        for _ in 0..100 {
            if ready() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("did not come up: {}", std::fs::read_to_string(log).unwrap());
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-TERM", &self.0.id().to_string()]).status();
        let _ = self.0.wait();
        let _ = Command::new("sync").status();
    }
}

/// A real etcd (Debian's etcd-server) serving a data dir of the test's.
struct Etcd {
    daemon: Daemon,
    client: String,
}

impl Etcd {
    fn start(data_dir: &Path) -> Etcd {
        let (client, peer) = free_ports();
        let (client, peer) =
            (format!("http://127.0.0.1:{client}"), format!("http://127.0.0.1:{peer}"));
        let log = data_dir.with_extension("log");
        let daemon = Daemon::spawn(
            Command::new("etcd")
                .arg("--data-dir")
                .arg(data_dir)
                .args(["--name", "node", "--listen-client-urls", &client])
                .args(["--advertise-client-urls", &client, "--listen-peer-urls", &peer])
                .args(["--initial-advertise-peer-urls", &peer])
                .args(["--initial-cluster", &format!("node={peer}")]),
            &log,
        );
        let etcd = Etcd { daemon, client };
        etcd.daemon.wait(&log, || etcd.ctl(&["endpoint", "health"], b"").is_ok());
        etcd
    }

    /// Runs `etcdctl` (Debian's etcd-client) against it, `stdin` its input.
    fn ctl(&self, args: &[&str], stdin: &[u8]) -> Result<(), String> {
        use std::io::Write;
        let mut c = Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .args(["--endpoints", &self.client])
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("etcdctl (Debian's etcd-client) runs");
        c.stdin.take().unwrap().write_all(stdin).unwrap();
        let out = c.wait_with_output().unwrap();
        match out.status.success() {
            true => Ok(()),
            false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
        }
    }

    /// Puts `value` under `key` (from stdin: a value is bytes, `\0` and all).
    fn put(&self, key: &str, value: &[u8]) {
        self.ctl(&["put", key], value).unwrap();
    }
}

/// A real etcd where k3s (embedded etcd) and k0s keep it, and a snapshot where k3s writes
/// them: a plain scan finds each Secret value in the database and the snapshot, and says
/// for each how many Secrets it serves in plaintext and encrypted, exactly (a Secret
/// updated is one, a deleted one none, a ConfigMap none), from the bucket of keys walked
/// page by page.
#[test]
fn etcd_where_distributions_keep_it() {
    for (data_dir, snapshots) in [
        ("/var/lib/rancher/k3s/server/db/etcd", Some("/var/lib/rancher/k3s/server/db/snapshots")),
        ("/var/lib/k0s/etcd", None),
    ] {
        let tree = NodeTree::new();
        let host = tree.host(data_dir);
        std::fs::create_dir_all(host.parent().unwrap()).unwrap();
        let etcd = Etcd::start(&host);
        let mut secrets = Vec::new();
        for i in 0..12u64 {
            let name = format!("app-{i}");
            let password = fake_secret_len(7400 + i, 40);
            let stored = stored_secret("shop", &name, &[("password", &password)]);
            etcd.put(&key("shop", &name), &stored);
            secrets.push(Secret::opaque("shop", &name, &[("password", password)]));
        }
        // Updated (one Secret still), deleted (none), encrypted, not a Secret.
        etcd.put(&key("shop", "app-0"), &stored_secret("shop", "app-0", &[("password", b"x")]));
        etcd.ctl(&["del", &key("shop", "app-1")], b"").unwrap();
        for i in 0..5 {
            let mut ct = b"k8s:enc:aescbc:v1:key1:".to_vec();
            ct.extend(filler(i, 200));
            etcd.put(&key("vault", &format!("sealed-{i}")), &ct);
        }
        etcd.put("/registry/configmaps/shop/cm", b"k8s\0not a secret");
        let snapshot = snapshots.map(|dir| {
            let path = format!("{dir}/etcd-snapshot-node-1764979200");
            std::fs::create_dir_all(tree.host(dir)).unwrap();
            let host = tree.host(&path);
            etcd.ctl(&["snapshot", "save", host.to_str().unwrap()], b"").unwrap();
            path
        });
        drop(etcd);
        tree.guard_secrets(&secrets);
        let file = tree.secrets_file("secrets.json", &secrets);
        let out = tree.scan(&["--secrets", path_arg(&file), "--format", "json"]);
        out.assert_code(1);
        let db = format!("{data_dir}/member/snap/db");
        let mut files = vec![db.clone()];
        files.extend(snapshot);
        for path in &files {
            let lines: Vec<_> = out
                .findings()
                .into_iter()
                .filter(|f| f.path == *path && f.raw["match"]["kind"] == "datastore")
                .collect();
            assert_eq!(lines.len(), 1, "{path}: {}", out.stdout_str());
            let (f, counts) = (&lines[0], &lines[0].raw["secrets_at_rest"]);
            assert_eq!((f.site.as_str(), f.severity.as_str()), ("etcd", "critical"));
            assert_eq!(
                (counts["plaintext"].as_u64(), counts["encrypted"].as_u64()),
                (Some(11), Some(5))
            );
            assert!(counts["partial"].is_null(), "{counts}");
            // Each value attributed to its key and revision: served now, the value app-0 had
            // before its update (etcd keeps revisions until it compacts), app-1's deleted.
            for s in &secrets {
                let state = match s.name.as_str() {
                    "app-0" => "old-revision",
                    "app-1" => "deleted",
                    _ => "current",
                };
                // (Copy-on-write leaves older copies in freed pages: those hold no key.)
                let hits: Vec<_> = out
                    .findings()
                    .into_iter()
                    .filter(|f| f.path == *path && f.secret == s.id() && !f.raw["record"].is_null())
                    .collect();
                assert!(!hits.is_empty(), "{} attributed in {path}", s.id());
                for hit in hits {
                    let r = &hit.raw["record"];
                    assert_eq!(r["key"], key("shop", &s.name).as_str(), "{}", hit.raw);
                    assert_eq!(r["state"], state, "{}", hit.raw);
                    assert!(r["revision"].as_i64().unwrap() > 0);
                    assert_eq!(hit.raw["stale"], state != "current");
                }
            }
        }
        let report = out.json();
        assert!(report["errors"].as_array().unwrap().is_empty(), "{}", report["errors"]);
    }
}

/// A real dqlite node (Debian's go-dqlite: `dqlite-demo`, on libdqlite0) with its data
/// dir of the test's, and its SQL shell.
struct DqliteNode {
    daemon: Daemon,
    db: String,
}

impl DqliteNode {
    fn start(dir: &Path) -> DqliteNode {
        let (api, db) = free_ports();
        let db = format!("127.0.0.1:{db}");
        let log = dir.with_extension("log");
        let api = format!("127.0.0.1:{api}");
        let mut cmd = Command::new("dqlite-demo");
        let daemon = Daemon::spawn(cmd.args(["--api", &api, "--db", &db, "--dir"]).arg(dir), &log);
        let node = DqliteNode { daemon, db };
        node.daemon.wait(&log, || node.sql("SELECT 1;\n").is_ok());
        node
    }

    /// Runs `sql` (one statement a line) in database `k8s`, as k8s-dqlite's is named: the
    /// shell reads lines of at most 4 KiB, so a longer statement is given as an argument.
    fn sql(&self, sql: &str) -> Result<(), String> {
        let mut short = String::new();
        for line in sql.lines() {
            if line.len() < 3000 {
                short += line;
                short.push('\n');
                continue;
            }
            self.shell(&[], &std::mem::take(&mut short))?;
            self.shell(&[line], "")?;
        }
        self.shell(&[], &short)
    }

    /// The dqlite shell with `args`, `stdin` its input; what it says of an error fails.
    fn shell(&self, args: &[&str], stdin: &str) -> Result<(), String> {
        use std::io::Write;
        if args.is_empty() && stdin.is_empty() {
            return Ok(());
        }
        let mut c = Command::new("dqlite")
            .args(["-s", &self.db, "k8s"])
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("the dqlite shell (Debian's go-dqlite) runs");
        c.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
        let out = c.wait_with_output().unwrap();
        let said = [out.stdout, out.stderr].concat();
        let said = String::from_utf8_lossy(&said);
        match out.status.success() && !said.contains("Error") {
            true => Ok(()),
            false => Err(said.chars().take(300).collect()),
        }
    }
}

/// MicroK8s's datastore made by a real dqlite node (kine's table created and filled
/// through SQL: Secrets, some split across overflow pages, encrypted ones, updates and a
/// deletion; then enough writes for the node to take an LZ4 snapshot; then Secrets only
/// in the raft log): a plain scan of a node laid out as MicroK8s finds every value, whole,
/// in the snapshot and in the log's segments, attributed to its key; and the snapshot says
/// how many Secrets it serves in plaintext and encrypted.
#[test]
fn dqlite_where_microk8s_keeps_it() {
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("node");
    std::fs::create_dir(&data).unwrap();
    let node = DqliteNode::start(&data);
    // kine's schema, a statement a line (the shell reads lines).
    let schema = SCHEMA.replace('\n', " ");
    let schema: String = schema
        .split(';')
        .filter(|s| !s.trim().is_empty())
        .map(|s| format!("{};\n", s.trim()))
        .collect();
    node.sql(&schema).unwrap();
    let mut k = Kine::default();
    let mut secrets = Vec::new();
    // The value between two certificates; the second's size sweeps where a page ends.
    let mut stored = |name: &str, seed: u64, tls: usize| {
        let password = fake_secret_len(seed, 48);
        let data = [
            ("ca.crt", filler(seed, 1000)),
            ("password", password.clone()),
            ("tls.crt", filler(seed + 1, tls)),
        ];
        let data: Vec<(&str, &[u8])> = data.iter().map(|(k, v)| (*k, &v[..])).collect();
        secrets.push(Secret::opaque("shop", name, &[("password", password)]));
        stored_secret("shop", name, &data)
    };
    // Before the snapshot: small and cert-sized Secrets (split across overflow pages).
    for i in 0..30u64 {
        let tls = if i < 6 { 0 } else { 3850 + 13 * (i as usize - 6) };
        let v = stored(&format!("s-{i}"), 7500 + 2 * i, tls);
        k.create(&key("shop", &format!("s-{i}")), &v);
    }
    let v = stored("rotated", 7590, 100);
    k.create(&key("shop", "rotated"), &v);
    k.update(&key("shop", "rotated"), &stored("rotated-v2", 7591, 100));
    k.create(&key("shop", "gone"), &stored("gone", 7592, 100));
    k.delete(&key("shop", "gone"));
    for i in 0..3 {
        let mut ct = b"k8s:enc:aescbc:v1:key1:".to_vec();
        ct.extend(filler(i, 200));
        k.create(&key("vault", &format!("sealed-{i}")), &ct);
    }
    // Enough writes (a transaction each) for the node to snapshot (every 1024 entries).
    for i in 0..1100 {
        k.create(&format!("/registry/leases/kube-node-lease/n{i}"), b"k8s\0lease");
    }
    node.sql(&k.sql).unwrap();
    // After it: only in the raft log.
    let mut after = Kine { rev: k.rev, ..Kine::default() };
    for i in 0..3u64 {
        let v = stored(&format!("late-{i}"), 7600 + i, 4100);
        after.create(&key("shop", &format!("late-{i}")), &v);
    }
    node.sql(&after.sql).unwrap();
    drop(node);
    let tree = NodeTree::new();
    let backend = "/var/snap/microk8s/current/var/kubernetes/backend";
    // What marks a MicroK8s node; `current` the snap revision's dir.
    std::fs::create_dir_all(tree.host("/var/snap/microk8s/common")).unwrap();
    std::fs::create_dir_all(tree.host("/var/snap/microk8s/7229")).unwrap();
    std::os::unix::fs::symlink("7229", tree.host("/var/snap/microk8s/current")).unwrap();
    let made = std::fs::read_dir(&data).unwrap().next().unwrap().unwrap().path();
    let mut snapshots = 0;
    for e in std::fs::read_dir(&made).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        snapshots += usize::from(name.starts_with("snapshot-") && !name.ends_with(".meta"));
        let revision = "/var/snap/microk8s/7229/var/kubernetes/backend";
        tree.copy(format!("{revision}/{name}"), &e.path()).unwrap();
        // raft keeps the snapshot before too: an older copy, under an older index.
        if name.starts_with("snapshot-") && !name.ends_with(".meta") {
            tree.copy(format!("{revision}/snapshot-1-512-1764979200"), &e.path()).unwrap();
        }
    }
    assert!(snapshots >= 1, "the node took a snapshot");
    // Some values are split across pages: not one run of bytes in the (inflated) snapshot
    // nor in any segment.
    let mut files = Vec::new();
    for e in std::fs::read_dir(&made).unwrap() {
        let (name, bytes) = (e.as_ref().unwrap().file_name(), read(&e.unwrap().path()));
        let name = name.to_string_lossy().into_owned();
        if name.starts_with("snapshot-") && !name.ends_with(".meta") {
            let mut inflated = Vec::new();
            use std::io::Read;
            lz4_flex::frame::FrameDecoder::new(&bytes[..]).read_to_end(&mut inflated).unwrap();
            files.push(inflated);
        } else {
            files.push(bytes);
        }
    }
    let split = secrets
        .iter()
        .filter(|s| files.iter().all(|f| find_all(f, s.value("password")).is_empty()))
        .count();
    assert!(split >= 2, "{split} values split across pages");
    tree.guard_secrets(&secrets);
    let file = tree.secrets_file("secrets.json", &secrets);
    let before = tree.digest();
    let out = tree.scan(&["--secrets", path_arg(&file), "--format", "json"]);
    out.assert_code(1);
    tree.digest().assert_same(&before, "a scan of dqlite's data dir changes nothing");
    let findings = out.findings();
    let (lines, matches): (Vec<_>, Vec<_>) =
        findings.iter().partition(|f| f.raw["match"]["kind"] == "datastore");
    // (secret, file kind, state, key) of each match.
    let seen: BTreeSet<(String, String, String, String)> = matches
        .iter()
        .map(|f| {
            assert_eq!((f.site.as_str(), f.category.as_str()), ("dqlite", "etcd-plaintext"));
            assert!(f.path.starts_with(backend), "{}", f.path);
            let file = f.path.rsplit('/').next().unwrap();
            let kind = if file.starts_with("snapshot-") { "snapshot" } else { "log" };
            let r = &f.raw["record"];
            let key = r["key"].as_str().unwrap_or("-").to_owned();
            (f.secret.clone(), kind.to_owned(), r["state"].as_str().unwrap_or("-").to_owned(), key)
        })
        .collect();
    // Found in `kind` of file, in `state`, attributed to the Secret's own key.
    let has = |secret: &str, kind: &str, state: &str| {
        let own = key("shop", secret.trim_start_matches("shop/"));
        seen.iter().any(|(s, k, st, key)| s == secret && k == kind && st == state && *key == own)
    };
    for i in 0..30 {
        let s = format!("shop/s-{i}");
        assert!(has(&s, "snapshot", "current"), "{s} in the snapshot: {seen:?}");
        assert!(has(&s, "log", "raft-log"), "{s} in the log: {seen:?}");
    }
    for i in 0..3 {
        let s = format!("shop/late-{i}");
        assert!(has(&s, "log", "raft-log"), "{s} in the log: {seen:?}");
        assert!(!seen.iter().any(|(x, k, ..)| *x == s && k == "snapshot"), "{s}: {seen:?}");
    }
    assert!(
        seen.iter()
            .any(|(s, k, st, _)| s == "shop/rotated" && k == "snapshot" && st == "old-revision"),
        "{seen:?}"
    );
    // The older snapshot's rows are the datastore's no longer.
    for f in matches.iter().filter(|f| f.path.contains("/snapshot-1-512-")) {
        assert_eq!(f.raw["record"]["state"], "superseded", "{}", f.raw);
    }
    assert!(
        seen.iter().any(|(s, k, st, _)| s == "shop/gone" && k == "snapshot" && st == "deleted"),
        "{seen:?}"
    );
    // The snapshot's count: every Secret it serves, by state, exactly.
    // One line, the newest snapshot's (not the older one's, nor the log's).
    assert_eq!(lines.len(), 1, "{}", out.stdout_str());
    let newest = &lines[0];
    assert!(!newest.path.contains("snapshot-1-512-"), "{}", newest.path);
    let counts = &newest.raw["secrets_at_rest"];
    assert_eq!(
        (counts["plaintext"].as_u64(), counts["encrypted"].as_u64()),
        (Some(31), Some(3)),
        "{counts}"
    );
    assert_eq!(newest.severity, "critical");
    let report = out.json();
    assert!(report["errors"].as_array().unwrap().is_empty(), "{}", report["errors"]);
}

/// dqlite's files are read in bounded memory and time whatever they say: a snapshot that
/// inflates to 256 MiB (more than is held: searched as it inflates, its value at the end
/// found, with an error saying its rows were not read), a segment whose batch claims
/// 2^60 entries, one whose frames claim more pages than it holds, and segments of junk.
/// Each is scanned to the end with a clear `errors` entry, never a panic.
#[test]
fn hostile_dqlite_files_are_bounded() {
    use std::io::Write;
    let tree = NodeTree::new();
    std::fs::create_dir_all(tree.host("/var/snap/microk8s/common")).unwrap();
    let backend = "/var/snap/microk8s/current/var/kubernetes/backend";
    // An LZ4 bomb: 256 MiB of zeros, then a value.
    let value = fake_secret_len(7700, 40);
    let mut bomb = lz4_flex::frame::FrameEncoder::new(Vec::new());
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..256 {
        bomb.write_all(&zeros).unwrap();
    }
    bomb.write_all(&value).unwrap();
    tree.write(format!("{backend}/snapshot-1-2048-1764979200"), &bomb.finish().unwrap());
    // A batch claiming 2^60 entries; a frames command claiming 2^31 pages of 4 KiB.
    let mut huge = 1u64.to_le_bytes().to_vec();
    huge.extend([0u8; 8]);
    huge.extend((1u64 << 60).to_le_bytes());
    huge.extend(filler(7701, 4096));
    tree.write(format!("{backend}/0000000000000001-0000000000000009"), &huge);
    let mut rng = Prng::new(7702);
    tree.write(format!("{backend}/open-1"), &rng.bytes(1 << 20));
    let mut junk = 1u64.to_le_bytes().to_vec();
    junk.extend(rng.bytes(1 << 20));
    tree.write(format!("{backend}/open-2"), &junk);
    let secrets = [Secret::opaque("shop", "bomb", &[("password", value)])];
    let out = scan_measured(&tree, &secrets);
    assert!(matches!(out.code, 0 | 1), "{}", out.stderr_str());
    let errors = out.json()["errors"].to_string();
    assert!(errors.contains("inflates to more than"), "{errors}");
    assert!(errors.contains("claims"), "{errors}");
    let at_end =
        out.findings().into_iter().any(|f| f.secret == "shop/bomb" && f.offset == 256 << 20);
    assert!(at_end, "the value past what is held, found as it inflates: {}", out.stdout_str());
    let rss = out.peak_rss_kb.expect("peak RSS measured");
    assert!(rss < 160 * 1024, "peak RSS {rss} KiB");
}
