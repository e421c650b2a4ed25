//! The built-in detection rules end to end (issue 3): every rule of the table on its own
//! positive examples planted in realistic files, ordinary files of this machine that no
//! rule may fire on, JWT insight and the severity model, `--baseline`, one finding per
//! material with a `count`, `kresidue rules` and `--no-rules`, and rule matches straddling
//! read buffers.
//!
//! Samples are rendered from the table's own templates (`kresidue::rules::examples`) or
//! built here from generated parts (JWTs from JSON claims with a random signature): never
//! a real credential. Every sample, its secret part and every long random run in it are
//! guarded, so the `Kr` runner fails a test if any of them shows up in stdout or stderr.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use kresidue::rules::examples::render;
use kresidue::rules::table::RULES;
use kresidue::rules::{Check, RuleSpec, Rules};
use serde_json::{json, Value};

use crate::util::*;

const UID: &str = "5c0ffee5-1d2e-4a3b-9c8d-7e6f5a4b3c2d";

/// Rule ids the README's JWT model names (checked against the table).
const LEGACY_SA_RULE: &str = "kubernetes-service-account-token-legacy";
const BOUND_SA_RULE: &str = "kubernetes-service-account-token";
const JWT_RULE: &str = "jwt";

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

/// The rule id of a finding (`""` for a fingerprint finding).
fn rule_id(f: &Finding) -> &str {
    f.raw["match"]["rule"].as_str().unwrap_or("")
}

/// The rule findings of a report.
fn rule_findings(findings: &[Finding]) -> Vec<&Finding> {
    findings.iter().filter(|f| f.raw["match"]["kind"] == "rule").collect()
}

/// `count` of a finding.
fn count(f: &Finding) -> u64 {
    f.raw["count"].as_u64().unwrap_or_else(|| panic!("finding without count: {}", f.raw))
}

/// Guards a rule sample in every run: the whole sample, the secret part of every rule match
/// in it (as the library's own engine cuts it) and its long random runs.
fn guard_sample(tree: &NodeTree, rules: &Rules, sample: &[u8]) {
    tree.guard(sample);
    for h in kresidue::rules::find_all(rules, sample) {
        let at = h.offset as usize;
        tree.guard(&sample[at + h.secret.start as usize..at + h.secret.end as usize]);
        if let Some(plain) = &h.plain {
            tree.guard(plain);
        }
    }
    for run in random_runs(sample) {
        tree.guard(run);
    }
}

/// Panics unless `preview` is at most 4 leading characters then `****`, shows at most a
/// quarter of the match, and (when not empty) its characters are a run of the matched
/// bytes (non-printable bytes shown as `.`), or of the base64 they decode to for a match
/// inside a base64 blob.
fn assert_rule_preview(f: &Finding, matched: &[u8], context: &str) {
    use base64::Engine as _;
    let decoded;
    let matched = if f.raw["match"]["encoding"] == "base64" {
        // The groups of the match may start or end mid-blob: decode what decodes.
        let whole = &matched[..matched.len() / 4 * 4];
        let lenient = base64::engine::GeneralPurpose::new(
            &base64::alphabet::STANDARD,
            base64::engine::GeneralPurposeConfig::new()
                .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent)
                .with_decode_allow_trailing_bits(true),
        );
        decoded = lenient.decode(whole).unwrap_or_default();
        &decoded[..]
    } else {
        matched
    };
    let preview = &f.preview;
    let head = preview
        .strip_suffix("****")
        .unwrap_or_else(|| panic!("{context}: preview {preview:?} does not end in ****"));
    assert!(head.chars().count() <= 4, "{context}: preview shows more than 4 chars: {preview:?}");
    assert!(
        head.len() * 4 <= matched.len().max(1),
        "{context}: preview shows more than a quarter of a {}-byte match",
        matched.len()
    );
    let h = head.as_bytes();
    let fits =
        |w: &[u8]| w.iter().zip(h).all(|(&b, &p)| b == p || (p == b'.' && !b.is_ascii_graphic()));
    assert!(
        h.is_empty() || matched.windows(h.len()).any(fits),
        "{context}: preview head {head:?} is not taken from the matched bytes"
    );
}

/// The bytes a finding covers in `content` (clipped to the file).
fn matched<'c>(f: &Finding, content: &'c [u8]) -> &'c [u8] {
    let start = (f.offset as usize).min(content.len());
    let end = (start + f.length.unwrap_or(0) as usize).min(content.len());
    &content[start..end]
}

/// A spec by id, with a message naming the table's ids when it is missing.
fn spec(id: &str) -> &'static RuleSpec {
    RULES.iter().find(|r| r.id == id).unwrap_or_else(|| {
        panic!(
            "the rule table has no rule {id:?}; its ids are {:?}",
            RULES.iter().map(|r| r.id).collect::<Vec<_>>()
        )
    })
}

/// The seed of one example: distinct per rule, template and run, so two rules' templates
/// never share random parts (a public claim of one must not equal a secret of another).
fn sample_seed(rule: &RuleSpec, template: usize, seed: u64) -> u64 {
    let fnv = rule
        .id
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    fnv ^ ((template as u64) << 32) ^ seed
}

/// File-name-safe form of a rule id.
fn slug(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect()
}

/// `n` random bytes.
fn random_bytes(seed: u64, n: usize) -> Vec<u8> {
    Prng::new(seed).bytes(n)
}

/// A JWT with header `{"alg":"RS256","kid":…}`, the given claims and a random 256-byte
/// signature, all base64url without padding. Never a real token: nothing signed it.
fn make_jwt(claims: &Value, seed: u64) -> Vec<u8> {
    const B64URL: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut rng = Prng::new(seed);
    let kid = rng.chars(B64URL, 43);
    let header = json!({"alg": "RS256", "kid": kid});
    let enc = |v: &[u8]| URL_SAFE_NO_PAD.encode(v);
    format!(
        "{}.{}.{}",
        enc(&serde_json::to_vec(&header).unwrap()),
        enc(&serde_json::to_vec(claims).unwrap()),
        enc(&random_bytes(seed ^ 0x5167, 256))
    )
    .into_bytes()
}

/// A random lowercase UUID.
fn uuid(seed: u64) -> String {
    let h = hex(&random_bytes(seed ^ 0x0011, 16));
    format!("{}-{}-4{}-a{}-{}", &h[..8], &h[8..12], &h[13..16], &h[17..20], &h[20..32])
}

/// Claims of a legacy, secret-based service-account token (no `exp`).
fn legacy_claims(ns: &str, sa: &str, seed: u64) -> Value {
    json!({
        "iss": "kubernetes/serviceaccount",
        "kubernetes.io/serviceaccount/namespace": ns,
        "kubernetes.io/serviceaccount/secret.name": format!("{sa}-token-x7k2p"),
        "kubernetes.io/serviceaccount/service-account.name": sa,
        "kubernetes.io/serviceaccount/service-account.uid": uuid(seed),
        "sub": format!("system:serviceaccount:{ns}:{sa}"),
    })
}

/// Claims of a bound (projected) service-account token expiring at `exp`.
fn bound_claims(ns: &str, sa: &str, exp: i64, seed: u64) -> Value {
    let api = "https://kubernetes.default.svc.cluster.local";
    json!({
        "aud": [api],
        "exp": exp,
        "iat": exp - 3607,
        "iss": api,
        "kubernetes.io": {
            "namespace": ns,
            "pod": {"name": format!("{sa}-5d8f7c9b4-q2w3e"), "uid": uuid(seed)},
            "serviceaccount": {"name": sa, "uid": uuid(seed + 1)},
            "warnafter": exp - 3000,
        },
        "nbf": exp - 3607,
        "sub": format!("system:serviceaccount:{ns}:{sa}"),
    })
}

/// Claims of a JWT that has nothing to do with Kubernetes.
fn other_claims(exp: i64) -> Value {
    json!({
        "iss": "https://login.acme-corp.test/oauth2",
        "sub": "user-42",
        "aud": "orders-api",
        "scope": "orders:read orders:write",
        "exp": exp,
        "iat": exp - 3600,
    })
}

/// A generated RSA-sized PKCS#1 PEM private key (random body).
fn pem_key(seed: u64) -> Vec<u8> {
    render("{pem:RSA PRIVATE KEY:1190}", seed)
}

/// The node paths of findings, grouped.
fn by_path(findings: &[Finding]) -> BTreeMap<&str, Vec<&Finding>> {
    let mut m: BTreeMap<&str, Vec<&Finding>> = BTreeMap::new();
    for f in findings {
        m.entry(f.path.as_str()).or_default().push(f);
    }
    m
}

// ---------------------------------------------------------------------------------------
// 1. Corpus: every positive example of every rule, planted in realistic files
// ---------------------------------------------------------------------------------------

/// Where a sample is planted.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Container {
    /// A YAML config in an emptyDir volume, the sample as its own YAML document.
    YamlInEmptyDir,
    /// A JSON log line in a container's file under the pod dir (the sample as a JSON string
    /// value; a sample JSON escaping would change is printed raw between JSON lines, as
    /// applications do with multi-line output: rules match material as written).
    JsonLog,
    /// A binary blob in an emptyDir: random bytes, then the sample on its own line.
    Binary,
    /// An env file in a `--path` directory.
    PathEnv,
}

impl Container {
    const ALL: [Container; 4] =
        [Container::YamlInEmptyDir, Container::JsonLog, Container::Binary, Container::PathEnv];

    /// The file content and the planted region `[start, end)`.
    fn content(self, sample: &[u8], n: u64) -> (Vec<u8>, usize, usize) {
        let (pre, body, post): (Vec<u8>, Vec<u8>, Vec<u8>) = match self {
            Container::YamlInEmptyDir => (
                format!(
                    "# rendered by the chart, revision {n}\napiVersion: v1\nkind: ConfigMap\n\
                     metadata:\n  name: app-{n}\n  namespace: shop\ndata:\n  log_level: info\n  \
                     replicas: \"3\"\n---\n"
                )
                .into_bytes(),
                sample.to_vec(),
                b"\n---\nretries: 3\ntimeout_seconds: 30\n".to_vec(),
            ),
            Container::JsonLog => {
                let first = format!(
                    "{{\"ts\":\"2025-01-02T03:04:05.{n:03}Z\",\"level\":\"info\",\"msg\":\"starting worker\",\"worker\":{n}}}\n"
                );
                let last =
                    "{\"ts\":\"2025-01-02T03:04:06.000Z\",\"level\":\"info\",\"msg\":\"ready\"}\n";
                let text = std::str::from_utf8(sample).ok();
                let escaped = text.map(|t| serde_json::to_string(t).unwrap());
                match escaped {
                    Some(e) if &e.as_bytes()[1..e.len() - 1] == sample => (
                        format!(
                            "{first}{{\"ts\":\"2025-01-02T03:04:05.999Z\",\"level\":\"debug\",\"msg\":\"loaded credentials\",\"value\":\""
                        )
                        .into_bytes(),
                        sample.to_vec(),
                        format!("\"}}\n{last}").into_bytes(),
                    ),
                    _ => (first.into_bytes(), sample.to_vec(), format!("\n{last}").into_bytes()),
                }
            }
            Container::Binary => {
                let mut rng = Prng::new(n);
                let (a, b) = (1500 + rng.below(2500), 1500 + rng.below(2500));
                (
                    [random_bytes(n, a), b"\0\n".to_vec()].concat(),
                    sample.to_vec(),
                    [b"\n\0".to_vec(), random_bytes(n + 1, b)].concat(),
                )
            }
            Container::PathEnv => (
                b"# app settings\nAPP_ENV=production\nLOG_LEVEL=info\n".to_vec(),
                sample.to_vec(),
                b"\nWORKERS=4\n".to_vec(),
            ),
        };
        let start = pre.len();
        let end = start + body.len();
        ([pre, body, post].concat(), start, end)
    }
}

/// One planted sample.
struct Plant {
    rule: &'static RuleSpec,
    template: usize,
    seed: u64,
    container: Container,
    path: String,
    content: Vec<u8>,
    region: (usize, usize),
}

impl Plant {
    fn name(&self) -> String {
        format!(
            "rule {} positive #{} seed {} in {:?} ({})",
            self.rule.id, self.template, self.seed, self.container, self.path
        )
    }
}

/// Every positive example of every rule in the table (two seeds each), planted in a YAML
/// config in an emptyDir, a JSON log in a container dir, a binary blob and an env file in
/// a `--path` dir: one rules-only scan finds each as a `rule` finding of that rule, at the
/// planted file, starting inside the planted region, with a redacted preview; no finding
/// starts outside a planted region; site and category are `other`; a non-JWT finding has
/// its rule's severity (place `other` is high, so the material decides), a JWT finding
/// carries the decoded `token`. No sample's text appears in stdout or stderr.
#[test]
fn corpus_every_positive_example_is_found() {
    assert!(!RULES.is_empty(), "the rule table is empty (src/rules/table.rs)");
    let rules = Rules::builtin(now());
    let mut problems = String::new();
    let mut samples = 0;
    for rule in RULES.iter() {
        assert!(!rule.positive.is_empty(), "rule {} has no positive example", rule.id);
        samples += positive_corpus_of(rule, &rules, &mut problems);
    }
    assert!(problems.is_empty(), "rule corpus ({samples} samples):\n{problems}");
}

/// Plants `rule`'s positive examples in a tree of their own (matching is per file, and a
/// small report keeps the leak checks cheap), scans it and appends what is wrong to
/// `problems`; returns the number of samples planted.
fn positive_corpus_of(rule: &'static RuleSpec, rules: &Rules, problems: &mut String) -> usize {
    let tree = NodeTree::new();
    let pod = tree.pod(UID);
    let mut plants: Vec<Plant> = Vec::new();
    let mut n = 0u64;
    for (ti, template) in rule.positive.iter().enumerate() {
        for seed in [9001u64, 9002] {
            let sample = render(template, sample_seed(rule, ti, seed));
            guard_sample(&tree, rules, &sample);
            for container in Container::ALL {
                n += 1;
                let (content, start, end) = container.content(&sample, n);
                let name = format!("{}-{ti}-{seed}", slug(rule.id));
                let path = match container {
                    Container::YamlInEmptyDir => pod.file(
                        &format!("volumes/kubernetes.io~empty-dir/config/{name}.yaml"),
                        &content,
                    ),
                    Container::JsonLog => {
                        pod.file(&format!("containers/app/{name}-{n:08x}"), &content)
                    }
                    Container::Binary => pod.file(
                        &format!("volumes/kubernetes.io~empty-dir/blobs/{name}.bin"),
                        &content,
                    ),
                    Container::PathEnv => tree.write(format!("/opt/app/conf/{name}.env"), &content),
                };
                plants.push(Plant {
                    rule,
                    template: ti,
                    seed,
                    container,
                    path,
                    content,
                    region: (start, end),
                });
            }
        }
    }

    let out = tree.scan(&["--path", "/opt/app", "--format", "json"]);
    let findings = out.findings();
    if out.code != 1 {
        let _ = writeln!(problems, "  rule {}: exit {} (want 1)", rule.id, out.code);
    }
    assert_eq!(out.json()["summary"]["findings"].as_u64(), Some(findings.len() as u64));
    let grouped = by_path(&findings);
    let plant_at: BTreeMap<&str, &Plant> = plants.iter().map(|p| (p.path.as_str(), p)).collect();

    // Every sample is found by its own rule, inside its region.
    for p in &plants {
        let here = grouped.get(p.path.as_str()).map(Vec::as_slice).unwrap_or(&[]);
        let own: Vec<&&Finding> = here
            .iter()
            .filter(|f| {
                f.raw["match"]["kind"] == "rule"
                    && rule_id(f) == p.rule.id
                    && (p.region.0 as u64..p.region.1 as u64).contains(&f.offset)
            })
            .collect();
        if own.is_empty() {
            let others: Vec<String> =
                here.iter().map(|f| format!("{}@{}", rule_id(f), f.offset)).collect();
            let _ = writeln!(
                problems,
                "  not found: {} (region {}..{}; findings in the file: {others:?})",
                p.name(),
                p.region.0,
                p.region.1
            );
            continue;
        }
        for f in own {
            let is_jwt = matches!(p.rule.check, Check::Jwt(_));
            if is_jwt {
                if !f.raw["token"].is_object() {
                    let _ = writeln!(problems, "  no `token` on the JWT finding: {}", p.name());
                }
            } else if f.severity != p.rule.severity.as_str() {
                let _ = writeln!(
                    problems,
                    "  severity {} (rule says {}, place `other` is high): {}",
                    f.severity,
                    p.rule.severity.as_str(),
                    p.name()
                );
            }
        }
    }
    // Every finding is a rule finding inside a planted region, at site `other`.
    for f in &findings {
        let Some(p) = plant_at.get(f.path.as_str()) else {
            let _ = writeln!(problems, "  finding in an unplanted file: {} {}", rule_id(f), f.path);
            continue;
        };
        let ctx = format!("{} finding of {}", rule_id(f), p.name());
        if f.raw["match"]["kind"] != "rule" {
            let _ = writeln!(problems, "  not a rule finding: {ctx}");
        }
        if !(p.region.0 as u64..p.region.1 as u64).contains(&f.offset) {
            let _ = writeln!(
                problems,
                "  starts outside the planted region ({} not in {}..{}): {ctx}",
                f.offset, p.region.0, p.region.1
            );
        }
        if (f.site.as_str(), f.category.as_str()) != ("other", "other") {
            let _ = writeln!(problems, "  site/category {}/{}: {ctx}", f.site, f.category);
        }
        if count(f) < 1 {
            let _ = writeln!(problems, "  count 0: {ctx}");
        }
        assert_rule_preview(f, matched(f, &p.content), &ctx);
    }
    plants.len() / Container::ALL.len()
}

/// Each rule's negative examples, planted the same way, never give a finding of that
/// rule (another rule may legitimately match a neighbour's negative, e.g. a JWT that is not
/// a service-account token).
#[test]
fn corpus_negative_examples_are_not_found_by_their_rule() {
    assert!(!RULES.is_empty(), "the rule table is empty (src/rules/table.rs)");
    let tree = NodeTree::new();
    let rules = Rules::builtin(now());
    let pod = tree.pod(UID);
    let mut planted: Vec<(String, &'static str, usize)> = Vec::new();
    let mut n = 0u64;
    for rule in RULES.iter() {
        for (ti, template) in rule.negative.iter().enumerate() {
            for seed in [9101u64, 9102] {
                let sample = render(template, sample_seed(rule, ti, seed));
                guard_sample(&tree, &rules, &sample);
                for container in [Container::YamlInEmptyDir, Container::Binary] {
                    n += 1;
                    let (content, _, _) = container.content(&sample, n);
                    let path = pod.file(
                        &format!(
                            "volumes/kubernetes.io~empty-dir/neg/{}-{ti}-{seed}-{n}",
                            slug(rule.id)
                        ),
                        &content,
                    );
                    planted.push((path, rule.id, ti));
                }
            }
        }
    }
    let out = tree.scan(&["--format", "json", "--fail-on", "never"]);
    out.assert_code(0);
    let findings = out.findings();
    let mut problems = String::new();
    for (path, id, ti) in &planted {
        for f in findings.iter().filter(|f| &f.path == path && rule_id(f) == *id) {
            let _ = writeln!(problems, "  rule {id} negative #{ti} found at {} ({path})", f.offset);
        }
    }
    assert!(problems.is_empty(), "negative examples reported by their own rule:\n{problems}");
}

// ---------------------------------------------------------------------------------------
// 2. Corpus: ordinary files of this machine
// ---------------------------------------------------------------------------------------

/// Byte and file caps of the ordinary-file corpus (a few seconds per scan).
const ORDINARY_MAX_BYTES: u64 = 48 << 20;
const ORDINARY_MAX_FILES: usize = 4000;
/// Files larger than this are skipped so the corpus stays varied.
const ORDINARY_MAX_FILE: u64 = 4 << 20;
/// Less than this copied means the machine had too little to test with.
const ORDINARY_MIN_BYTES: u64 = 4 << 20;

/// Host files that genuinely hold real key or token material shipped by a package as an
/// example, left out of the ordinary corpus by name (path relative to the source dir).
/// None is installed on a fresh Debian 12; each was found on a developer machine, and the
/// rule that reports it is right to.
const ORDINARY_EXCLUDED: &[&str] = &[
    // libxmlsec1-dev: an example RSA private key (pem-rsa-private-key).
    "libxmlsec1-dev/examples/rsakey.pem",
    // python3-jwt: PyJWT's documentation example token and an Auth0 token quoted in an
    // issue (jwt).
    "python3-jwt/README.rst",
    "python3-jwt/changelog.gz",
];

/// Which file names of a source directory to take.
type NameFilter = fn(&str) -> bool;

/// Where ordinary files come from (present on a fresh Debian 12), with a filter on the
/// file name; small directories first, so the budget they leave goes to the big ones. A
/// missing directory is skipped.
fn ordinary_sources() -> Vec<(PathBuf, NameFilter)> {
    let any: NameFilter = |_| true;
    let shared_object: NameFilter = |name| name.contains(".so");
    let mut v: Vec<(PathBuf, NameFilter)> = vec![
        ("/usr/share/common-licenses".into(), any),
        ("/usr/share/perl5".into(), any),
        ("/usr/share/man".into(), any),
        ("/usr/include".into(), any),
        ("/usr/share/doc".into(), any),
        ("/usr/bin".into(), any),
    ];
    // The multiarch library dir (x86_64-linux-gnu, aarch64-linux-gnu, …).
    if let Ok(rd) = fs::read_dir("/usr/lib") {
        let mut libs: Vec<PathBuf> = rd
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.to_string_lossy().ends_with("-linux-gnu") && p.is_dir())
            .collect();
        libs.sort();
        v.extend(libs.into_iter().map(|p| (p, shared_object)));
    }
    v.retain(|(p, _)| p.is_dir());
    v
}

/// The content of an ordinary file and the name to give its copy: a `.gz` file (man pages,
/// Debian changelogs) decompressed with the system's `gzip` when it can be, so the rules
/// see the text of documentation that talks about keys, tokens and passwords.
fn ordinary_content(f: &Path) -> Option<(Vec<u8>, String)> {
    let name = f.file_name()?.to_string_lossy().into_owned();
    if let Some(stem) = name.strip_suffix(".gz") {
        let out = std::process::Command::new("gzip").arg("-dc").arg(f).output().ok();
        if let Some(out) = out.filter(|o| {
            o.status.success() && !o.stdout.is_empty() && o.stdout.len() as u64 <= ORDINARY_MAX_FILE
        }) {
            return Some((out.stdout, stem.to_owned()));
        }
    }
    Some((fs::read(f).ok()?, name))
}

/// Regular files under `dir` (no symlinks followed, no special files), sorted by path.
fn sorted_regular_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    let mut entries: Vec<PathBuf> = rd.filter_map(Result::ok).map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        let Ok(md) = fs::symlink_metadata(&p) else { continue };
        if md.is_dir() {
            sorted_regular_files(&p, out);
        } else if md.is_file() {
            out.push(p);
        }
    }
}

/// Ordinary text and binaries copied from this machine (C headers, package docs and
/// licences, man pages and changelogs decompressed, perl modules, executables, shared
/// libraries; an evenly spread, sorted sample of each directory) under a `--path`
/// directory: a rules-only scan reports no rule finding at all. A finding here means a
/// rule is too loose; the failure names the rule and the file, never the matched text.
#[test]
fn corpus_ordinary_files_give_no_rule_finding() {
    let tree = NodeTree::new();
    let sources = ordinary_sources();
    assert!(!sources.is_empty(), "none of the ordinary-file directories exists here");
    let (mut total, mut copied) = (0u64, 0usize);
    let mut origin: BTreeMap<String, PathBuf> = BTreeMap::new();
    for (si, (dir, keep)) in sources.iter().enumerate() {
        // Each source gets an equal share of what the sources before it left over.
        let left = (sources.len() - si) as u64;
        let bytes_each = (ORDINARY_MAX_BYTES - total) / left;
        let files_each = (ORDINARY_MAX_FILES - copied) / left as usize;
        let mut files = Vec::new();
        sorted_regular_files(dir, &mut files);
        files.retain(|f| {
            let rel = f.strip_prefix(dir).unwrap();
            keep(&f.file_name().unwrap().to_string_lossy())
                && !ORDINARY_EXCLUDED.iter().any(|e| Path::new(e) == rel)
                && fs::metadata(f).is_ok_and(|md| md.len() > 0 && md.len() <= ORDINARY_MAX_FILE)
        });
        // Every k-th file of the sorted list, so the sample spans the whole directory.
        let stride = files.len().div_ceil(files_each.max(1)).max(1);
        let (mut bytes, mut count) = (0u64, 0usize);
        for f in files.iter().step_by(stride) {
            let Some((data, name)) = ordinary_content(f) else { continue };
            if count >= files_each || bytes + data.len() as u64 > bytes_each {
                continue;
            }
            let rel = f.strip_prefix(dir).unwrap().with_file_name(name);
            let tag = dir.to_string_lossy().trim_start_matches('/').replace('/', "_");
            let node = format!("/corpus/{si:02}-{tag}/{}", rel.to_string_lossy());
            tree.write(&node, &data);
            origin.insert(node, f.clone());
            bytes += data.len() as u64;
            count += 1;
        }
        total += bytes;
        copied += count;
    }
    assert!(
        total >= ORDINARY_MIN_BYTES,
        "only {total} bytes of ordinary files copied from {:?}",
        sources.iter().map(|s| &s.0).collect::<Vec<_>>()
    );

    let out = tree.scan(&["--path", "/corpus", "--format", "json", "--threads", "4"]);
    let findings = out.findings();
    let report = out.json();
    assert_eq!(report["summary"]["files"].as_u64(), Some(copied as u64), "files read");
    assert!(report["summary"]["bytes"].as_u64().unwrap_or(0) >= total, "bytes read");
    let fired: Vec<String> = rule_findings(&findings)
        .iter()
        .map(|f| {
            let host = origin.get(&f.path).map_or(f.path.clone(), |p| p.display().to_string());
            format!(
                "  rule {} fired on {host} (offset {}, count {})",
                rule_id(f),
                f.offset,
                count(f)
            )
        })
        .collect();
    assert!(
        fired.is_empty(),
        "{} rule findings on {copied} ordinary files ({total} bytes):\n{}",
        fired.len(),
        fired.join("\n")
    );
    out.assert_code(0);
}

// ---------------------------------------------------------------------------------------
// 3. JWT insight and severities
// ---------------------------------------------------------------------------------------

/// Three generated service-account tokens and a generic JWT, each in its own file in an
/// emptyDir (place `other`, high): the legacy token (no `exp`) is critical, the bound
/// token with `exp` an hour ahead high, the one that expired an hour ago low, the generic
/// JWT medium; each with its rule id, `token.kind`, `token.subject`, `token.issuer`,
/// `token.expired` and `token.expires_at`. The same tokens in a secret volume on disk
/// (place critical) rank one step higher, clamped.
/// Secrets inside base64 blobs (a Secret manifest's `data:`, a kubeconfig in Helm values
/// whose `client-key-data` is base64 again) are found by their rules with `encoding:
/// base64`, at the base64 that encodes them; no value, encoded or decoded, is printed.
#[test]
fn secrets_in_base64_blobs_are_reported_decoded() {
    let tree = NodeTree::new();
    let rules = Rules::builtin(now());
    let pod = tree.pod(UID);
    let manifest = render(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: tls\ntype: kubernetes.io/tls\ndata:\n  tls.crt: {b64:{pem:CERTIFICATE:700}}\n  tls.key: {b64:{pem:RSA PRIVATE KEY:1190}}\n",
        71,
    );
    let values = render(
        "cluster:\n  kubeconfig: {b64:apiVersion: v1\nkind: Config\nusers:\n- name: admin\n  user:\n    client-key-data: {b64:{pem:EC PRIVATE KEY:121}}\n}\n",
        72,
    );
    for sample in [&manifest, &values] {
        guard_sample(&tree, &rules, sample);
    }
    let m = pod.file("volumes/kubernetes.io~empty-dir/data/secret.yaml", &manifest);
    let v = pod.file("volumes/kubernetes.io~empty-dir/data/values.yaml", &values);
    let out = tree.scan(&["--format", "json"]);
    out.assert_code(1);
    let findings = out.findings();
    for (path, content, rule) in
        [(&m, &manifest, "pem-rsa-private-key"), (&v, &values, "pem-ec-private-key")]
    {
        let f = findings
            .iter()
            .find(|f| f.path == *path && rule_id(f) == rule)
            .unwrap_or_else(|| panic!("{rule} not found in {path}: {}", out.stdout_str()));
        assert_eq!(f.raw["match"]["encoding"], "base64", "{rule}");
        let span = matched(f, content);
        assert!(
            span.len() > 100
                && span.iter().all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(b)),
            "{rule}"
        );
    }
    assert_eq!(rule_findings(&findings).len(), 3, "{}", out.stdout_str());
}

#[test]
fn jwt_insight_and_severity() {
    for id in [LEGACY_SA_RULE, BOUND_SA_RULE, JWT_RULE] {
        spec(id);
    }
    let t = now();
    let tree = NodeTree::new();
    let pod = tree.pod(UID);
    struct Case {
        name: &'static str,
        token: Vec<u8>,
        rule: &'static str,
        kind: &'static str,
        subject: &'static str,
        issuer: &'static str,
        exp: Option<i64>,
        other_severity: &'static str,
        volume_severity: &'static str,
    }
    let api = "https://kubernetes.default.svc.cluster.local";
    let cases = [
        Case {
            name: "legacy",
            token: make_jwt(&legacy_claims("ci", "builder", 31), 31),
            rule: LEGACY_SA_RULE,
            kind: "legacy-service-account",
            subject: "system:serviceaccount:ci:builder",
            issuer: "kubernetes/serviceaccount",
            exp: None,
            other_severity: "critical",
            volume_severity: "critical",
        },
        Case {
            name: "bound-valid",
            token: make_jwt(&bound_claims("payments", "api", t + 3600, 32), 32),
            rule: BOUND_SA_RULE,
            kind: "bound-service-account",
            subject: "system:serviceaccount:payments:api",
            issuer: api,
            exp: Some(t + 3600),
            other_severity: "high",
            volume_severity: "critical",
        },
        Case {
            name: "bound-expired",
            token: make_jwt(&bound_claims("payments", "worker", t - 3600, 33), 33),
            rule: BOUND_SA_RULE,
            kind: "bound-service-account",
            subject: "system:serviceaccount:payments:worker",
            issuer: api,
            exp: Some(t - 3600),
            other_severity: "low",
            volume_severity: "medium",
        },
        Case {
            name: "other-jwt",
            token: make_jwt(&other_claims(t + 3600), 34),
            rule: JWT_RULE,
            kind: "other",
            // Not a service account's: withheld (only claims in their shape are shown).
            subject: "",
            issuer: "https://login.acme-corp.test/oauth2",
            exp: Some(t + 3600),
            other_severity: "medium",
            volume_severity: "high",
        },
    ];
    let vol = pod.secret_volume("tokens");
    let mut expect: BTreeMap<String, (&Case, &'static str)> = BTreeMap::new();
    for c in &cases {
        tree.guard(&c.token);
        for part in c.token.split(|&b| b == b'.') {
            tree.guard(part);
        }
        let content = [b"TOKEN=".as_slice(), &c.token, b"\n"].concat();
        let path =
            pod.file(&format!("volumes/kubernetes.io~empty-dir/shared/{}.env", c.name), &content);
        expect.insert(path, (c, c.other_severity));
        vol.key(c.name, &c.token);
        expect.insert(vol.visible(c.name), (c, c.volume_severity));
    }
    let out = tree.scan(&["--format", "json"]);
    out.assert_code(1);
    let findings = out.findings();
    let grouped = by_path(&findings);
    for (path, (c, severity)) in &expect {
        let here = grouped.get(path.as_str()).unwrap_or_else(|| panic!("{}: no finding", c.name));
        assert_eq!(here.len(), 1, "{} at {path}: one finding, got {:?}", c.name, here);
        let f = here[0];
        let ctx = format!("{} at {path}", c.name);
        assert_eq!(f.raw["match"]["kind"], "rule", "{ctx}");
        assert_eq!(rule_id(f), c.rule, "{ctx}: rule id");
        // The secret volume's place is critical on disk (non-tmpfs-volume); if the test
        // dir is on tmpfs it is an orphaned volume, high like `other`.
        let severity = match f.category.as_str() {
            "orphaned-volume" => c.other_severity,
            _ => severity,
        };
        assert_eq!(f.severity, severity, "{ctx}: severity (category {})", f.category);
        let tok = &f.raw["token"];
        assert_eq!(tok["kind"], c.kind, "{ctx}: token.kind in {tok}");
        match c.subject {
            "" => assert_eq!(tok["withheld"], json!(["subject"]), "{ctx}: {tok}"),
            sub => assert_eq!(tok["subject"], sub, "{ctx}: token.subject in {tok}"),
        }
        assert_eq!(tok["issuer"], c.issuer, "{ctx}: token.issuer in {tok}");
        match c.exp {
            None => {
                assert!(tok["expired"].is_null(), "{ctx}: token.expired without exp: {tok}");
                assert!(tok["expires_at"].is_null(), "{ctx}: token.expires_at: {tok}");
            }
            Some(exp) => {
                assert_eq!(tok["expired"], json!(exp <= t), "{ctx}: token.expired in {tok}");
                assert_eq!(tok["expires_at"], json!(exp), "{ctx}: token.expires_at in {tok}");
            }
        }
        let token_len = c.token.len() as u64;
        let offset = if path.contains("empty-dir") { 6 } else { 0 };
        assert!(
            f.offset <= offset && f.offset + f.length.unwrap_or(0) >= offset + token_len,
            "{ctx}: the match ({}+{:?}) does not cover the token ({offset}+{token_len})",
            f.offset,
            f.length
        );
        assert_rule_preview(f, &c.token, &ctx);
    }
    assert_eq!(findings.len(), expect.len(), "findings: {findings:?}");
}

// ---------------------------------------------------------------------------------------
// 4. Baselines
// ---------------------------------------------------------------------------------------

/// `--baseline`: after a first report (fingerprint and rule findings), a new secret file is
/// added, one file is removed and bytes are inserted before and after the material of
/// another: a scan with the first report as baseline lists exactly the new findings,
/// `summary.baselined` counts the old findings still present, and no remaining id is in
/// the baseline. The old findings keep their ids although their offsets moved. A baseline
/// of the same tree leaves nothing (exit 0).
#[test]
fn baseline_leaves_out_known_findings() {
    let t = now();
    let tree = NodeTree::new();
    let rules = Rules::builtin(t);
    let pod = tree.pod(UID);
    let (a, b, c) =
        (fake_secret_len(4001, 32), fake_secret_len(4002, 40), fake_secret_len(4003, 28));
    let secrets = tree.secrets_file(
        "s.json",
        &[
            Secret::opaque("shop", "db", &[("password", &a), ("api-key", &b)]),
            Secret::opaque("shop", "cache", &[("token", &c)]),
        ],
    );
    let (pem_old, pem_new) = (pem_key(4004), pem_key(4005));
    let tok = make_jwt(&bound_claims("shop", "web", t + 7200, 4006), 4006);
    for s in [&pem_old, &pem_new, &tok] {
        guard_sample(&tree, &rules, s);
    }
    // File 1: a secret volume key (fingerprint).
    let vol = pod.secret_volume("db");
    vol.key("password", &a);
    // File 2: an emptyDir config with a fingerprinted value and a private key (rule).
    let cfg_body = |pre: &[u8], post: &[u8]| {
        [pre, b"api_key: ", &b, b"\n---\n", &pem_old, b"\n", post].concat()
    };
    let cfg_rel = "volumes/kubernetes.io~empty-dir/conf/app.yaml";
    let cfg = pod.file(cfg_rel, &cfg_body(b"# app\n", b""));
    // File 3: a termination log with a token (rule); removed later.
    let log = pod.file(
        "containers/web/1a2b3c4d",
        &[b"fatal: request failed, Authorization: Bearer ".as_slice(), &tok, b"\n"].concat(),
    );

    let first_path = tree.work("first.json");
    let first = report_to(&tree, &secrets, &first_path);
    let first_findings = findings_of(&first);
    let first_ids: BTreeSet<String> =
        first_findings.iter().map(|f| f.id.clone().expect("finding id")).collect();
    assert_eq!(first_ids.len(), first_findings.len(), "ids are unique");
    let n_rule = rule_findings(&first_findings).len();
    assert!(n_rule >= 2, "first scan: want the key and the token as rule findings");
    assert!(first_findings.len() >= 4, "first scan: {first_findings:?}");
    for p in [&vol.visible("password"), &cfg, &log] {
        assert!(first_findings.iter().any(|f| &f.path == p), "first scan: nothing at {p}");
    }
    let removed = first_findings.iter().filter(|f| f.path == log).count();

    // Change the tree: remove the log, shift the config's content, add a new file.
    fs::remove_file(tree.host(&log)).unwrap();
    let shift = filler(4007, 1000);
    pod.file(cfg_rel, &cfg_body(&[b"# app\n".as_slice(), &shift, b"\n"].concat(), b"# end\n"));
    let new = pod.file(
        "volumes/kubernetes.io~empty-dir/conf/new.env",
        &[b"CACHE_TOKEN=".as_slice(), &c, b"\n", &pem_new, b"\n"].concat(),
    );

    let out = tree.scan(&[
        "--secrets",
        path_arg(&secrets),
        "--baseline",
        path_arg(&first_path),
        "--format",
        "json",
    ]);
    out.assert_code(1);
    let left = out.findings();
    let still = first_findings.len() - removed;
    assert_eq!(out.json()["summary"]["baselined"].as_u64(), Some(still as u64), "baselined");
    assert_eq!(out.json()["summary"]["findings"].as_u64(), Some(left.len() as u64));
    assert!(left.iter().all(|f| f.path == new), "only the new file is left: {left:?}");
    assert!(
        left.iter().any(|f| f.raw["match"]["kind"] == "fingerprint" && f.key == "token"),
        "the new fingerprinted value is reported: {left:?}"
    );
    assert!(!rule_findings(&left).is_empty(), "the new private key is reported: {left:?}");
    for f in &left {
        assert!(!first_ids.contains(f.id.as_ref().unwrap()), "a new finding has an old id");
    }

    // Without the baseline: the old findings still present keep their ids, at new offsets.
    let all_path = tree.work("second.json");
    let second = report_to(&tree, &secrets, &all_path);
    let all = findings_of(&second);
    assert_eq!(all.len(), still + left.len(), "second full scan: {all:?}");
    for old in first_findings.iter().filter(|f| f.path != log) {
        let now_f = all.iter().find(|f| f.id == old.id).unwrap_or_else(|| {
            panic!("old finding {} {} lost its id after an edit elsewhere", old.path, old.offset)
        });
        if old.path == cfg {
            assert_ne!(now_f.offset, old.offset, "test setup: offsets in the config moved");
        }
    }

    // A baseline of the same tree leaves nothing: exit 0 with the default --fail-on.
    let out = tree.scan(&[
        "--secrets",
        path_arg(&secrets),
        "--baseline",
        path_arg(&all_path),
        "--format",
        "json",
    ]);
    out.assert_code(0);
    assert!(out.findings().is_empty(), "same-tree baseline left {:?}", out.findings());
    assert_eq!(out.json()["summary"]["baselined"].as_u64(), Some(all.len() as u64));
    assert_eq!(out.json()["summary"]["findings"].as_u64(), Some(0));
    // Table format too.
    tree.scan(&["--secrets", path_arg(&secrets), "--baseline", path_arg(&all_path)]).assert_code(0);
}

/// Scans with `--secrets` into the JSON report `path` (expecting findings) and reads it.
fn report_to(tree: &NodeTree, secrets: &Path, path: &Path) -> Value {
    let args = ["--secrets", path_arg(secrets), "--format", "json", "-o", path_arg(path)];
    tree.scan(&args).assert_code(1);
    serde_json::from_slice(&fs::read(path).unwrap()).unwrap()
}

/// A baseline that is not a kresidue report exits 2 with one line on stderr (never quoting
/// the file, which may be the secrets JSON itself): a truncated report, text, an empty
/// file, a missing file, JSON of other shapes (a list, a report without findings, findings
/// without ids, another schema, the rules listing), a fingerprint file, kubectl JSON.
#[test]
fn baseline_that_is_not_a_report_exits_2() {
    let tree = NodeTree::new();
    let v = fake_secret(4101);
    tree.pod(UID).secret_volume("db").key("password", &v);
    let secrets = tree.secrets_file("s.json", &[Secret::opaque("a", "db", &[("password", &v)])]);
    let fp = tree.fingerprint_file(&secrets, &[], "fp.json");
    let good = tree.work("good.json");
    tree.scan(&["--secrets", path_arg(&secrets), "--format", "json", "-o", path_arg(&good)])
        .assert_code(1);
    let report = fs::read(&good).unwrap();
    let rules_json = tree.run(&["rules", "--format", "json"]);
    rules_json.assert_code(0);
    let write = |name: &str, bytes: &[u8]| {
        let p = tree.work(name);
        fs::write(&p, bytes).unwrap();
        p
    };
    let bad = [
        write("truncated.json", &report[..report.len() / 2]),
        write("text.json", b"not a report\n"),
        write("empty.json", b""),
        tree.work("missing.json"),
        write("list.json", b"[]"),
        write("no-findings.json", br#"{"schema":"kresidue/report/v1"}"#),
        write("findings-object.json", br#"{"schema":"kresidue/report/v1","findings":{}}"#),
        write("no-ids.json", br#"{"schema":"kresidue/report/v1","findings":[{"path":"/x"}]}"#),
        write("other-schema.json", br#"{"schema":"kresidue/report/v2","findings":[]}"#),
        write("no-schema.json", br#"{"findings":[]}"#),
        write("rules.json", &rules_json.stdout),
        fp.clone(),
        secrets.clone(),
    ];
    for b in &bad {
        for format in ["json", "table"] {
            let out = tree.scan(&[
                "--secrets",
                path_arg(&secrets),
                "--baseline",
                path_arg(b),
                "--format",
                format,
            ]);
            out.assert_one_line_error();
            assert!(out.stdout.is_empty(), "{}: stdout {}", b.display(), out.stdout_str());
        }
    }
    // The good one is accepted.
    tree.scan(&["--secrets", path_arg(&secrets), "--baseline", path_arg(&good)]).assert_code(0);
}

// ---------------------------------------------------------------------------------------
// 5. One finding per material, with a count
// ---------------------------------------------------------------------------------------

/// The same generated token five times in a file is one rule finding with `count: 5` at
/// the first occurrence; the same fingerprinted value three times is one finding with
/// `count: 3` at the first offset; a private key twice gives `count: 2`.
/// `n` copies of `value`, each after `len` bytes of filler (seeds `seed`, `seed + 1`, …)
/// and `prefix`, each followed by a newline; and where each copy starts.
fn repeated(value: &[u8], prefix: &[u8], n: u64, seed: u64, len: usize) -> (Vec<u8>, Vec<usize>) {
    let mut out = Vec::new();
    let mut starts = Vec::new();
    for i in 0..n {
        out.extend(filler(seed + i, len));
        out.extend_from_slice(prefix);
        starts.push(out.len());
        out.extend_from_slice(value);
        out.push(b'\n');
    }
    (out, starts)
}

#[test]
fn repeated_material_is_one_finding_with_count() {
    let t = now();
    let tree = NodeTree::new();
    let rules = Rules::builtin(t);
    let pod = tree.pod(UID);
    let tok = make_jwt(&bound_claims("jobs", "runner", t + 3600, 5001), 5001);
    guard_sample(&tree, &rules, &tok);
    let (log, starts) = repeated(&tok, b"\ncalling api with Authorization: Bearer ", 5, 5002, 300);
    let log_path = pod.file("containers/runner/0f0f0f0f", &log);

    let v = fake_secret_len(5010, 36);
    let secrets = tree.secrets_file("s.json", &[Secret::opaque("jobs", "db", &[("password", &v)])]);
    let (cfg, v_starts) = repeated(&v, b"\npassword=", 3, 5020, 200);
    let cfg_path = pod.file("volumes/kubernetes.io~empty-dir/conf/db.env", &cfg);

    let pem = pem_key(5030);
    guard_sample(&tree, &rules, &pem);
    let keys = [pem.as_slice(), b"\n", &pem, b"\n"].concat();
    let keys_path = pod.file("volumes/kubernetes.io~empty-dir/conf/bundle.pem", &keys);

    let out = tree.scan(&["--secrets", path_arg(&secrets), "--format", "json"]);
    out.assert_code(1);
    let findings = out.findings();
    let grouped = by_path(&findings);

    let at_log = &grouped[log_path.as_str()];
    assert_eq!(at_log.len(), 1, "one finding for the token repeated 5 times: {at_log:?}");
    let f = at_log[0];
    assert_eq!(f.raw["match"]["kind"], "rule");
    assert_eq!(count(f), 5, "count of the token: {}", f.raw);
    let end = f.offset + f.length.unwrap_or(0);
    assert!(
        f.offset <= starts[0] as u64 && end >= (starts[0] + tok.len()) as u64,
        "the finding is not at the first occurrence: {}+{:?}, token at {}",
        f.offset,
        f.length,
        starts[0]
    );

    let at_cfg = &grouped[cfg_path.as_str()];
    let fp: Vec<&&Finding> =
        at_cfg.iter().filter(|f| f.raw["match"]["kind"] == "fingerprint").collect();
    assert_eq!(fp.len(), 1, "one finding for the value repeated 3 times: {at_cfg:?}");
    assert_eq!(count(fp[0]), 3, "count of the value: {}", fp[0].raw);
    assert_eq!(fp[0].offset, v_starts[0] as u64, "first offset of the value");
    assert_eq!((fp[0].secret.as_str(), fp[0].key.as_str()), ("jobs/db", "password"));

    let at_keys = &grouped[keys_path.as_str()];
    assert_eq!(at_keys.len(), 1, "one finding for the key written twice: {at_keys:?}");
    assert_eq!(count(at_keys[0]), 2, "count of the key: {}", at_keys[0].raw);
    assert_eq!(at_keys[0].offset, 0, "first offset of the key");
}

// ---------------------------------------------------------------------------------------
// 6. `kresidue rules` and `--no-rules`
// ---------------------------------------------------------------------------------------

/// `kresidue rules` prints one line per rule (id, severity, description), at least 25;
/// `--format json` is `{"schema":"kresidue/rules/v1","rules":[{id,severity,description}]}`
/// with unique ids, in table order, with the table's severities and descriptions.
#[test]
fn rules_subcommand_lists_the_table() {
    let tree = NodeTree::new();
    assert!(RULES.len() >= 25, "the table has {} rules, want at least 25", RULES.len());

    let out = tree.run(&["rules"]);
    out.assert_code(0);
    let text = out.stdout_str();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(lines.len() >= 25, "`kresidue rules` lists {} lines:\n{text}", lines.len());
    assert!(lines.len() <= RULES.len() + 1, "more lines than rules (+ a header):\n{text}");
    for r in RULES.iter() {
        let hits: Vec<&&str> =
            lines.iter().filter(|l| l.split_whitespace().next() == Some(r.id)).collect();
        assert_eq!(hits.len(), 1, "want one line starting with {}:\n{text}", r.id);
        let words: Vec<&str> = hits[0].split_whitespace().collect();
        assert!(
            words.contains(&r.severity.as_str()),
            "line for {} lacks its severity {}: {}",
            r.id,
            r.severity,
            hits[0]
        );
    }

    let out = tree.run(&["rules", "--format", "json"]);
    out.assert_code(0);
    let doc: Value = serde_json::from_slice(&out.stdout).expect("rules --format json is JSON");
    assert_eq!(doc["schema"], "kresidue/rules/v1");
    let list = doc["rules"].as_array().expect("rules array");
    assert!(list.len() >= 25, "{} rules in JSON", list.len());
    let ids: Vec<&str> = list.iter().map(|r| r["id"].as_str().expect("id is a string")).collect();
    let unique: BTreeSet<&str> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "duplicate rule ids: {ids:?}");
    let table_ids: Vec<&str> = RULES.iter().map(|r| r.id).collect();
    assert_eq!(ids, table_ids, "JSON ids differ from the table");
    for (r, spec) in list.iter().zip(RULES.iter()) {
        assert_eq!(r["severity"], spec.severity.as_str(), "severity of {}", spec.id);
        assert!(SEVERITIES.contains(&r["severity"].as_str().unwrap_or("")), "{r}");
        let d = r["description"].as_str().unwrap_or("");
        assert!(!d.trim().is_empty(), "empty description for {}", spec.id);
        assert_eq!(d, spec.description, "description of {}", spec.id);
        assert!(
            spec.id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
            "rule id {:?} is not kebab-case",
            spec.id
        );
    }
}

/// A tree holding only rule-shaped secrets (a private key in an emptyDir, a token in a
/// container log, a GitHub token in a `--path` file): rules find each (exit 1); with
/// `--no-rules` (and an unrelated fingerprint set, since rules off with nothing to look
/// for is an error) the scan is clean (exit 0, no findings).
#[test]
fn no_rules_turns_rules_off() {
    let t = now();
    let tree = NodeTree::new();
    let rules = Rules::builtin(t);
    let pod = tree.pod(UID);
    let pem = pem_key(6001);
    let tok = make_jwt(&bound_claims("ops", "deployer", t + 3600, 6002), 6002);
    let gh = render("{ghtoken:ghp}", 6003);
    for s in [&pem, &tok, &gh] {
        guard_sample(&tree, &rules, s);
    }
    let files = [
        pod.file(
            "volumes/kubernetes.io~empty-dir/certs/server.key",
            &[pem.as_slice(), b"\n"].concat(),
        ),
        pod.file("containers/deploy/0a0b0c0d", &[b"token: ".as_slice(), &tok, b"\n"].concat()),
        tree.write("/srv/ci/.env", &[b"GITHUB_TOKEN=".as_slice(), &gh, b"\n"].concat()),
    ];
    let unrelated = tree
        .secrets_file("s.json", &[Secret::opaque("x", "y", &[("k", fake_secret_len(6004, 32))])]);

    let out = tree.scan(&["--path", "/srv/ci", "--format", "json"]);
    out.assert_code(1);
    let findings = out.findings();
    for f in &files {
        assert!(
            findings.iter().any(|g| &g.path == f && g.raw["match"]["kind"] == "rule"),
            "no rule finding at {f}: {findings:?}"
        );
    }

    let out = tree.scan(&[
        "--no-rules",
        "--secrets",
        path_arg(&unrelated),
        "--path",
        "/srv/ci",
        "--format",
        "json",
    ]);
    out.assert_code(0);
    assert!(out.findings().is_empty(), "--no-rules still reports: {:?}", out.findings());
    tree.scan(&["--no-rules", "--secrets", path_arg(&unrelated), "--path", "/srv/ci"])
        .assert_code(0);
}

// ---------------------------------------------------------------------------------------
// 7. Rule matches straddling read buffers
// ---------------------------------------------------------------------------------------

/// Private keys (RSA, EC), a service-account token and a GitHub token, each alone in a
/// file, placed across multiples of 64, 100 and 4096 bytes (half across, one byte across
/// either way, ending at and starting at the boundary, the literal itself cut): scans with
/// `--chunk-size` 64, 100 and 4096 and the default each find every one exactly once
/// (one rule finding, `count: 1`, starting inside the planted item), and all four scans
/// agree on every finding.
#[test]
fn rule_matches_straddling_buffers_are_found_once() {
    let t = now();
    let tree = NodeTree::new();
    let rules = Rules::builtin(t);
    let pod = tree.pod(UID);
    let items: Vec<(&str, Vec<u8>)> = vec![
        ("rsa", pem_key(7001)),
        ("ec", render("{pem:EC PRIVATE KEY:121}", 7002)),
        ("sa-token", make_jwt(&bound_claims("batch", "etl", t + 3600, 7003), 7003)),
        ("github", render("{ghtoken:ghp}", 7004)),
    ];
    let mut planted: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for (name, item) in &items {
        guard_sample(&tree, &rules, item);
        let l = item.len() as i64;
        for chunk in [64i64, 100, 4096] {
            // The first boundary with room for the item and a newline before it.
            let k = (l + 64 + chunk - 1) / chunk + 1;
            let b = k * chunk;
            let starts = [
                ("half", b - l / 2),
                ("one-after", b - l + 1),
                ("one-before", b - 1),
                ("at", b),
                ("ends-at", b - l),
                ("literal-cut", b - 2),
            ];
            for (place, start) in starts {
                let start = start as usize;
                let size = start + item.len() + 200;
                let mut content = filler(start as u64 ^ chunk as u64, size);
                content[start - 1] = b'\n';
                content[start..start + item.len()].copy_from_slice(item);
                content[start + item.len()] = b'\n';
                let path = pod.file(
                    &format!("volumes/kubernetes.io~empty-dir/chunks/{name}-{chunk}-{place}"),
                    &content,
                );
                planted.insert(path, (start, start + item.len()));
            }
        }
    }
    let mut runs: Vec<(String, Vec<Value>)> = Vec::new();
    for chunk in [Some("64"), Some("100"), Some("4096"), None] {
        let mut args = vec!["--format", "json"];
        if let Some(c) = chunk {
            args.extend(["--chunk-size", c]);
        }
        let out = tree.scan(&args);
        out.assert_code(1);
        let findings = out.findings();
        let label = format!("--chunk-size {}", chunk.unwrap_or("default"));
        let grouped = by_path(&findings);
        let mut problems = String::new();
        for (path, (start, end)) in &planted {
            let here = grouped.get(path.as_str()).map(Vec::as_slice).unwrap_or(&[]);
            let rule: Vec<&&Finding> =
                here.iter().filter(|f| f.raw["match"]["kind"] == "rule").collect();
            if rule.len() != 1 {
                let found: Vec<String> = rule
                    .iter()
                    .map(|f| format!("{}@{}x{}", rule_id(f), f.offset, count(f)))
                    .collect();
                let _ = writeln!(problems, "  {path}: {} rule findings {found:?}", rule.len());
                continue;
            }
            let f = rule[0];
            if count(f) != 1 || !(*start as u64..*end as u64).contains(&f.offset) {
                let _ = writeln!(
                    problems,
                    "  {path}: {}@{} count {} (item at {start}..{end})",
                    rule_id(f),
                    f.offset,
                    count(f)
                );
            }
        }
        assert!(problems.is_empty(), "{label}:\n{problems}");
        assert_eq!(findings.len(), planted.len(), "{label}: extra findings");
        runs.push((label, findings.iter().map(|f| f.raw.clone()).collect()));
    }
    for (label, r) in &runs[1..] {
        assert_eq!(r, &runs[0].1, "{label} and {} disagree", runs[0].0);
    }
}

/// A file packed with one rule's literal (a hostile or broken file: `users:` kubeconfig
/// headers or JWT header prefixes over and over) is scanned in bounded work: the scan
/// ends (the harness fails a hung run), the file gets an `errors` entry saying a rule
/// skipped part of it, the exit status is unchanged, and a token before the flood is
/// still found. An ordinary file with many certificates gets no such entry.
#[test]
fn literal_flood_is_bounded_and_reported() {
    let t = now();
    let tree = NodeTree::new();
    let rules = Rules::builtin(t);
    let tok = make_jwt(&bound_claims("ops", "deployer", t + 3600, 7001), 7001);
    guard_sample(&tree, &rules, &tok);
    let mut flood = [b"token: ".as_slice(), &tok, b"\n"].concat();
    for _ in 0..(1 << 20) / 15 {
        flood.extend_from_slice(b"users:\n- name:\n");
    }
    let flooded = tree.write("/srv/data/flood.yaml", &flood);
    let certs: Vec<u8> =
        (0..400u64).flat_map(|i| render("{pem:CERTIFICATE:500}\n", 7100 + i)).collect();
    let bundle = tree.write("/srv/data/bundle.pem", &certs);

    let out = tree.scan(&["--path", "/srv/data", "--format", "json"]);
    out.assert_code(1);
    let report = out.json();
    let errors = report["errors"].as_array().expect("errors");
    assert!(
        errors.iter().any(|e| e["path"] == flooded.as_str()
            && e["error"].as_str().unwrap_or("").contains("not checked by that rule")),
        "no errors entry for the flooded file: {errors:?}"
    );
    assert!(
        !errors.iter().any(|e| e["path"] == bundle.as_str()),
        "a certificate bundle was reported as a flood: {errors:?}"
    );
    let findings = out.findings();
    assert!(
        findings
            .iter()
            .any(|f| f.path == flooded
                && f.raw["match"]["rule"] == "kubernetes-service-account-token"),
        "the token before the flood was not found: {findings:?}"
    );
}

/// Files and pod logs of JWT look-alikes (issue 46, break 1: `eyJhbGciOiJIUzI1NiJ9.eyJ`
/// repeated cost ~40 s per MiB, and a rotated `.gz` log of them any pod can write
/// inflated to minutes): each shape, some whole tokens and some not, in a plain file, a
/// pod log and a gzip-compressed rotated log, is searched in a few seconds per MiB of
/// one thread (the harness kills a run past its deadline, far above that), and each file
/// the rules could not search whole has an `errors` entry saying so.
#[test]
// The figure is for the person running the tests.
#[allow(clippy::print_stderr)]
fn jwt_lookalike_floods_cost_linear_time_and_are_reported() {
    const SIZE: usize = 1 << 20;
    let units: [&[u8]; 5] = [
        b"eyJhbGciOiJIUzI1NiJ9.eyJ",
        b"eyJhbGciOiJIUzI1NiJ9.eyJ ",
        b"eyJ0eXAiOiJKV1QifQ.eyJ0eXAiOiJKV1QifQ.",
        b"x.eyJxxxx",
        b"eyJhbGciOiJIUzI1NiJ9.eyJhbGciOiJIUzI1NiJ9.",
    ];
    let tree = NodeTree::new();
    let logs = format!("/var/log/pods/shop_web-0_{UID}/app");
    let mut flooded = Vec::new();
    for (i, unit) in units.iter().enumerate() {
        let body: Vec<u8> = unit.iter().copied().cycle().take(SIZE).collect();
        flooded.push(tree.write(format!("/srv/flood/{i}.txt"), &body));
        // The same as a container's output: CRI lines of 4 KiB.
        let mut log = Vec::with_capacity(SIZE + SIZE / 64);
        for line in body.chunks(4096) {
            log.extend_from_slice(b"2026-12-05T09:00:00.000000000Z stdout F ");
            log.extend_from_slice(line);
            log.push(b'\n');
        }
        let rotated = format!("{logs}/{i}.log.20261205-090000.gz");
        flooded.push(tree.write(&rotated, &gzip(&log)));
        flooded.push(tree.write(format!("{logs}/{i}.log"), &log));
    }
    let out = tree.kr().timeout(std::time::Duration::from_secs(180)).scan(&[
        "--path",
        "/srv/flood",
        "--threads",
        "1",
        "--format",
        "json",
    ]);
    assert!(out.code == 0 || out.code == 1, "{}", out.stderr_str());
    let errors = out.json()["errors"].as_array().expect("errors").clone();
    for path in &flooded {
        assert!(
            errors.iter().any(|e| e["path"] == path.as_str()
                && e["error"].as_str().unwrap_or("").contains("not checked by that rule")),
            "no errors entry for the flooded {path}: {errors:?}"
        );
    }
    eprintln!("{} MiB of JWT look-alikes in {:?}", units.len() * 3, out.elapsed);
}

/// `--timeout` and a stop signal end a scan within a second of their time however its
/// buffers are packed (issue 46, break 1: `--timeout 5s` ended a scan of JWT look-alikes
/// after 42.8 s, SIGTERM after 35.6 s): a 1 MiB buffer of rule literals is cut, not
/// searched to its end, and the file is noted as read only so far.
#[test]
fn timeout_and_signals_cut_a_packed_buffer() {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    let tree = NodeTree::new();
    // Every rule's work budget is spent in each buffer: minutes of work in all.
    let mut body = Vec::new();
    while body.len() < 48 << 20 {
        body.extend_from_slice(
            b"eyJhbGciOiJIUzI1NiJ9.eyJhbGciOiJIUzI1NiJ9. x.eyJxxxx users:\n- name:\n",
        );
    }
    let packed = tree.write("/srv/packed/a.txt", &body);
    drop(body);
    let out = tree.kr().timeout(Duration::from_secs(60)).scan(&[
        "--path",
        "/srv/packed",
        "--timeout",
        "1s",
        "--format",
        "json",
    ]);
    assert!(out.elapsed < Duration::from_secs(4), "--timeout 1s took {:?}", out.elapsed);
    let report = out.json();
    assert_eq!(report["summary"]["incomplete"], true);
    let errors = report["errors"].as_array().expect("errors");
    assert!(
        errors.iter().any(|e| e["path"] == packed.as_str()
            && e["error"].as_str().unwrap_or("").contains("--timeout")),
        "{errors:?}"
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_kresidue"))
        .args(["scan", "--root", tree.root_arg(), "--no-cri", "--path", "/srv/packed"])
        .env("KRESIDUE_LOCK", tree.work("kresidue.lock"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    assert!(child.try_wait().unwrap().is_none(), "the scan ended before the signal");
    let sent = Instant::now();
    assert!(Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap()
        .success());
    while child.try_wait().unwrap().is_none() && sent.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let stopped = sent.elapsed();
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    assert!(stopped < Duration::from_secs(2), "SIGTERM took {stopped:?}");
    assert_eq!(out.status.code(), Some(143), "{}", String::from_utf8_lossy(&out.stderr));
}

// ---------------------------------------------------------------------------------------
// 8. The rules' key search with each kernel
// ---------------------------------------------------------------------------------------

/// The rules' key search gives the same findings with each of its kernels. A positive
/// example of every rule and a fingerprinted token value, spread over a 3 MiB file (read in
/// 1 MiB buffers), and some of them across the first buffer boundary or at the end of
/// files of their own, are found with the AVX2 kernel (where the CPU has it) and the
/// scalar one (`KRESIDUE_KERNEL=scalar`); every example is found by its own rule and the
/// value as its Secret; `-vv` names the search that ran.
#[test]
fn the_key_search_finds_the_same_with_every_kernel() {
    let t = now();
    let tree = NodeTree::new();
    let rules = Rules::builtin(t);
    // Token bytes only: every form of the value is a token form, read block by block.
    let value: Vec<u8> = fake_secret_len(8100, 40)
        .into_iter()
        .map(|b| if b.is_ascii_alphanumeric() { b } else { b'x' })
        .collect();
    let secret = Secret::opaque("apps", "api-token", &[("token", &value)]);
    tree.guard_secrets(std::slice::from_ref(&secret));
    let fp = tree.fingerprint_file(
        &tree.secrets_file("secrets.json", std::slice::from_ref(&secret)),
        &[],
        "values.fp",
    );
    let mut items: Vec<(&str, Vec<u8>)> = RULES
        .iter()
        .enumerate()
        .map(|(i, r)| (r.id, render(r.positive[0], sample_seed(r, 0, 8200 + i as u64))))
        .collect();
    items.push(("value", value.clone()));
    for (_, item) in &items {
        guard_sample(&tree, &rules, item);
    }
    const MIB: usize = 1 << 20;
    // (file, item name, start, end)
    let mut planted: Vec<(String, &str, usize, usize)> = Vec::new();
    let pod = tree.pod(UID);
    let mut plant = |file: &str, size: usize, at: &[(usize, usize)]| {
        let mut content = filler(8300 + size as u64, size);
        let path = format!("volumes/kubernetes.io~empty-dir/data/{file}");
        let mut here = Vec::new();
        for &(k, start) in at {
            let (name, item) = (items[k].0, &items[k].1);
            content[start - 1] = b'\n';
            content[start..start + item.len()].copy_from_slice(item);
            content[start + item.len()] = b'\n';
            here.push((name, start, start + item.len()));
        }
        let path = pod.file(&path, &content);
        planted.extend(here.into_iter().map(|(n, s, e)| (path.clone(), n, s, e)));
    };
    // Every item in one 3 MiB file, spread out.
    let spread = (3 * MIB - 40_000) / items.len();
    let at: Vec<(usize, usize)> =
        (0..items.len()).map(|k| (k, 10_000 + k * spread + k % 64)).collect();
    plant("spread.log", 3 * MIB, &at);
    // Items across the first 1 MiB boundary, each in a file of its own: half across, one
    // byte across either way, the literal cut, starting at the boundary.
    for (i, k) in (0..items.len()).step_by(7).enumerate() {
        let l = items[k].1.len();
        let start = [MIB - l / 2, MIB - l + 1, MIB - 1, MIB - 2, MIB][i % 5];
        plant(&format!("across-{k}.log"), MIB + 8192, &[(k, start)]);
    }
    // Items ending two bytes before the end of a small file: the keys of the shorter ones
    // lie past the matcher's last block, where the rules search for themselves.
    for k in (3..items.len()).step_by(7) {
        let size = 5000 + 3 * k + items[k].1.len();
        plant(&format!("at-end-{k}.log"), size, &[(k, size - 2 - items[k].1.len())]);
    }

    let fp_arg = path_arg(&fp);
    let args = ["--fingerprints", fp_arg, "--format", "json", "-vv"];
    let mut runs: Vec<(String, Vec<Value>)> = Vec::new();
    for env in [None, Some(("KRESIDUE_KERNEL", "scalar"))] {
        let label = env.map_or("default".to_string(), |(k, v)| format!("{k}={v}"));
        let mut kr = tree.kr();
        if let Some((k, v)) = env {
            kr = kr.env(k, v);
        }
        let out = kr.scan(&args);
        out.assert_code(1);
        let scalar = out.stderr_str().contains("key search: Teddy, scalar");
        let avx2 = std::arch::is_x86_feature_detected!("avx2");
        assert_eq!(scalar, env.is_some() || !avx2, "{label}: {}", out.stderr_str());
        let findings = out.findings();
        let mut problems = String::new();
        for (path, name, start, end) in &planted {
            let (name, start, end) = (*name, *start, *end);
            // A rule that reads back from its literal (`aws-access-key-secret-first`) may
            // start its match in the filler's words before the example.
            let own = findings.iter().any(|f| {
                f.path == *path
                    && (start.saturating_sub(100) as u64..end as u64).contains(&f.offset)
                    && if name == "value" {
                        f.raw["match"]["kind"] == "fingerprint"
                            && f.raw["match"]["secret"] == "apps/api-token"
                    } else {
                        f.raw["match"]["kind"] == "rule" && rule_id(f) == name
                    }
            });
            if !own {
                let _ = writeln!(problems, "  {name} at {start}..{end} of {path} not found");
            }
        }
        assert!(problems.is_empty(), "{label}:\n{problems}");
        runs.push((label, findings.iter().map(|f| f.raw.clone()).collect()));
    }
    for (label, r) in &runs[1..] {
        assert_eq!(r, &runs[0].1, "{label} and {} disagree", runs[0].0);
    }
}

/// Issue 47 item 4: a rule's match in a file its package installed, unchanged since
/// (dpkg's `.md5sums`), is `shipped`, `info`, naming the package; so is one in the `.pyc`
/// Python compiled from such a file (its header names the source's size and time). The
/// same file changed since, or a file no package lists, is reported as usual; a known
/// Secret's value in a shipped file is never downgraded.
#[test]
fn package_shipped_files_are_info() {
    use md5::Digest as _;
    let tree = NodeTree::new();
    let (value, secrets) = db_password(&tree, 4701);
    let keys: Vec<String> =
        (0..4u64).map(|s| String::from_utf8(render("{a:20}{d:2}", 4701 + s)).unwrap()).collect();
    for k in &keys {
        tree.guard(k.as_bytes());
    }
    let doc = "/usr/share/doc/tool/example.conf";
    let changed = "/usr/share/doc/tool/changed.conf";
    let loose = "/usr/local/etc/tool.conf";
    let py = "/usr/lib/python3/dist-packages/tool/auth.py";
    let pyc = "/usr/lib/python3/dist-packages/tool/__pycache__/auth.cpython-311.pyc";
    let doc_text = format!("password={}\ntoken_of_db={value}\n", keys[0]);
    tree.write(doc, doc_text.as_bytes());
    tree.write(changed, format!("password={}\n", keys[1]).as_bytes());
    tree.write(loose, format!("password={}\n", keys[2]).as_bytes());
    let py_text = format!("CLIENT_SECRET = '{}'\n", keys[3]);
    tree.write(py, py_text.as_bytes());
    let mtime = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
    fs::File::options().write(true).open(tree.host(py)).unwrap().set_modified(mtime).unwrap();
    let mut header = vec![0x0d, 0x0d, 0x0d, 0x0a, 0, 0, 0, 0];
    header.extend_from_slice(&1_700_000_000u32.to_le_bytes());
    header.extend_from_slice(&(py_text.len() as u32).to_le_bytes());
    header.extend_from_slice(
        format!("\x00z\x1a   Example: password = '{}'\n\x00", keys[3]).as_bytes(),
    );
    tree.write(pyc, &header);
    let md5 = |text: &str| {
        md5::Md5::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect::<String>()
    };
    let sums = format!(
        "{}  {}\n{}  {}\n{}  {}\n",
        md5(&doc_text),
        &doc[1..],
        md5("password=something else\n"),
        &changed[1..],
        md5(&py_text),
        &py[1..]
    );
    tree.write("/var/lib/dpkg/info/tool:amd64.md5sums", sums.as_bytes());
    let file = tree.secrets_file("secrets.json", &secrets);
    let args = ["--secrets", path_arg(&file), "--path", "/usr", "--format", "json"];
    let out = tree.scan(&args);
    out.assert_code(1);
    let mut got: Vec<(String, String, String, String, String)> = out
        .findings()
        .into_iter()
        .map(|f| {
            let package = f.raw["package"].as_str().unwrap_or("-").to_owned();
            let what = if f.secret.is_empty() { "rule".to_owned() } else { f.secret.clone() };
            (f.path, what, f.category, f.severity, package)
        })
        .collect();
    got.sort();
    let row = |p: &str, what: &str, c: &str, s: &str, pkg: &str| {
        (p.to_owned(), what.to_owned(), c.to_owned(), s.to_owned(), pkg.to_owned())
    };
    let mut want = vec![
        row(doc, "rule", "shipped", "info", "tool"),
        row(doc, "shop/db", "other", "high", "-"),
        row(changed, "rule", "other", "high", "-"),
        row(loose, "rule", "other", "high", "-"),
        row(py, "rule", "shipped", "info", "tool"),
        row(pyc, "rule", "shipped", "info", "tool"),
    ];
    want.sort();
    assert_eq!(got, want, "{}", out.stdout_str());
    assert_eq!(out.json()["summary"]["shipped"], 3);
}

/// Issue 47 item 3 and the precision the generic rules needed: a Basic credential is the
/// header rule's, once; a token sent as `Basic` (a JWT, a GitHub token) is no Basic
/// credential and is reported by its own rule, once. Values that only look like
/// passwords under a password's name (a SealedSecret's ciphertext, a Secret's base64 of
/// a placeholder) are not reported.
#[test]
fn a_header_reports_its_value_once_and_blobs_are_no_passwords() {
    let tree = NodeTree::new();
    let pod = tree.pod(UID);
    let jwt = make_jwt(&other_claims(now() + 3600), 4731);
    let jwt = String::from_utf8(jwt).unwrap();
    let basic = render("{b64:deploy:{a:20}{d:2}}", 4731);
    let basic = String::from_utf8(basic).unwrap();
    tree.guard(jwt.as_bytes());
    tree.guard(basic.as_bytes());
    let ciphertext = String::from_utf8(render("Ag{b:730}", 4731)).unwrap();
    tree.guard(ciphertext.as_bytes());
    let ghp = String::from_utf8(render("{ghtoken:ghp}", 4731)).unwrap();
    tree.guard(ghp.as_bytes());
    let files = [
        ("jwt-in-basic.log", format!("GET /api HTTP/1.1\nAuthorization: Basic {jwt}\n"), vec![JWT_RULE]),
        (
            "nginx.conf",
            format!("location / {{\n    proxy_set_header Authorization \"Basic {jwt}\";\n}}\n"),
            vec![JWT_RULE],
        ),
        (
            "ghp-in-basic.log",
            format!("Authorization: Basic {ghp}\n"),
            vec!["github-personal-access-token"],
        ),
        (
            "basic.log",
            format!("GET /api HTTP/1.1\nAuthorization: Basic {basic}\n"),
            vec!["http-basic-auth-header"],
        ),
        ("bearer.log", format!("Authorization: Bearer {jwt}\n"), vec![JWT_RULE]),
        (
            "sealed.yaml",
            format!("kind: SealedSecret\nspec:\n  encryptedData:\n    password: {ciphertext}\n"),
            vec![],
        ),
        (
            "secret.yaml",
            "kind: Secret\ndata:\n  password: Y2hhbmdlbWU=\n  api-token: PHlvdXItYXBpLXRva2VuPg==\n"
                .to_owned(),
            vec![],
        ),
    ];
    let mut paths = BTreeMap::new();
    for (name, text, _) in &files {
        paths.insert(pod.empty_dir_file("headers", name, text.as_bytes()), *name);
    }
    let out = tree.scan(&["--format", "json", "--fail-on", "never"]);
    out.assert_code(0);
    let findings = out.findings();
    for (name, _, want) in &files {
        let got: Vec<&str> = findings
            .iter()
            .filter(|f| paths.get(f.path.as_str()) == Some(name))
            .map(rule_id)
            .collect();
        assert_eq!(&got, want, "{name}");
    }
}
