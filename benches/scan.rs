//! What the built-in rules cost a whole scan: the issue's target is "scanning with all rules
//! enabled costs at most 20% more than without rules on the same tree".
//!
//! Generates a node-like tree (the crate's seeded [`Prng`], ~256 MiB, `KRESIDUE_BENCH_MIB`
//! to change it) in a fresh temp dir under `CARGO_TARGET_TMPDIR`, laid out by the tests'
//! node-tree builder (`tests/util/tree.rs`): kubelet pod dirs with atomic-writer secret
//! and projected volumes and empty-dir volumes (application logs, YAML and JSON configs,
//! kubeconfigs without credentials, public certificates, base64 blobs, binaries,
//! zero-filled files), and `/var/log/pods` CRI logs, some rotations gzip-compressed (site
//! `pod-log`: searched as their content, decompressed). File sizes run from a few KiB to
//! several MiB. Into it go a modest number of generated secrets of several rule families
//! (PEM private keys, GitHub tokens, service-account JWTs, kubeconfigs and docker configs
//! with credentials, AWS key pairs, database URLs with a password) and 40 of 1,000
//! generated fingerprinted values (raw, base64 and JSON-escaped). Everything is generated
//! at run time; nothing is a real credential.
//!
//! [`kresidue::scan::scan`] is timed on the tree with (a) fingerprints only, (b)
//! fingerprints and [`Rules::builtin`], (c) rules only (an empty matcher), each on 1 and 2
//! threads, next to a reference that only walks the tree and reads every file into a
//! reused buffer (one thread). The configurations run in interleaved rounds (one warm-up
//! round, which also brings every file into the page cache, then `ROUNDS` timed ones, in
//! a rotating order; `KRESIDUE_BENCH_ROUNDS` to change it); each keeps its best time, and
//! the per-round ratio to (a) of the same thread count is also printed as a median, since
//! a shared machine's quiet moments do not fall evenly. The verdict uses the best times.
//!
//! Checks: every planted item is found in (b) (fingerprinted values as their Secret and
//! encoding, rule plants as a rule finding overlapping them), (a) and (c) agree with the
//! fingerprint and rule findings of (b), 1 and 2 threads agree, and no read fails; any
//! failure exits 1 (2 if the benchmark itself cannot run).
//! Rule findings in (b) are counted per rule id, split into planted and other, and the
//! others are shown with the kind of generated content they sit in, so a rule firing on
//! ordinary content is visible. The target is reported as PASS/MISS, not asserted.
//! Run with `cargo bench --bench scan`.

// A benchmark's job is printing its figures.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use kresidue::finding::{Encoding, Finding, MatchKind};
use kresidue::fingerprint::{self, FingerprintSet};
use kresidue::kubectl::SecretValue;
use kresidue::matcher::Matcher;
use kresidue::rules::Rules;
use kresidue::scan::{self, ScanResult, ScanSettings, Searchers, DEFAULT_CHUNK};
use kresidue::sites::Layout;
use kresidue::sys::RootDir;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hint::black_box;
use std::io::{Read, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

mod common;
#[path = "../tests/util/tree.rs"]
mod tree;
use common::{ms, values, words, B64_CHARS, TOKEN_CHARS};
use kresidue::prng::Prng;
use kresidue::rules::examples::render;
use tree::{NodeTree, POD_LOGS};

/// Default size of the generated tree.
const DEFAULT_MIB: usize = 256;
/// Fingerprinted values.
const VALUES: usize = 1_000;
/// Fingerprinted values planted in the tree.
const VALUE_PLANTS: usize = 40;
/// Thread counts measured.
const THREADS: [usize; 2] = [1, 2];
/// Timed rounds (after one warm-up round); each configuration keeps its best.
const ROUNDS: usize = 11;
/// The target: rules add at most this fraction to a fingerprint scan.
const TARGET_OVERHEAD: f64 = 0.20;

// ---------------------------------------------------------------------------------------
// Generated data

const LOWER: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
/// First bytes of binary files: an executable, a rotated gzip'd log, a database.
const MAGIC: &[&[u8]] =
    &[b"\x7fELF\x02\x01\x01\0", b"\x1f\x8b\x08\0\0\0\0\0\0\x03", b"SQLite format 3\0"];

#[rustfmt::skip]
const WORDS: &[&str] = &[
    "kubelet", "pod", "container", "sandbox", "volume", "mount", "image", "pull", "sync",
    "node", "ready", "status", "update", "config", "network", "cgroup", "runtime", "overlay",
    "snapshot", "default", "order", "cart", "invoice", "customer", "lease", "probe", "cache",
    "liveness", "readiness", "restart", "backoff", "started", "request", "response", "queue",
];
const NAMESPACES: &[&str] = &[
    "default",
    "kube-system",
    "payments",
    "checkout",
    "monitoring",
    "ingress-nginx",
    "data",
    "search",
    "auth",
    "batch",
];
const APPS: &[&str] = &[
    "api",
    "web",
    "worker",
    "cart",
    "billing",
    "indexer",
    "prometheus",
    "grafana",
    "redis",
    "postgres",
    "nginx",
    "notifier",
    "scheduler",
    "gateway",
];
const SIDECARS: &[&str] = &["istio-proxy", "fluent-bit", "config-reloader", "oauth2-proxy"];
const HOSTS: &[&str] = &[
    "api.acme-shop.io",
    "orders.acme.internal:8443",
    "auth.acme-shop.io",
    "10.96.0.1:443",
    "kubernetes.default.svc",
    "metrics.acme.net:9090",
    "storage.acme-cdn.com",
    "hooks.acme.io",
    "registry.acme.internal",
    "inventory.payments.svc.cluster.local:8080",
];
const DB_HOSTS: &[&str] = &[
    "db.payments.svc.cluster.local",
    "10.0.12.7",
    "postgres-primary.data.svc",
    "pg.acme.internal",
];
const URL_PATHS: &[&str] = &[
    "/api/v1/namespaces/default/pods",
    "/healthz",
    "/readyz",
    "/v2/team/app/manifests/1.25.3",
    "/oauth/token",
    "/metrics",
    "/v1/orders/",
    "/login?next=/dashboard",
    "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-1",
    "/static/js/main.3f2a9c.js",
];

/// The kind of generated content; reported for rule findings that were not planted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Kind {
    CriLog,
    AppLog,
    Yaml,
    Json,
    Kubeconfig,
    Cert,
    Base64,
    Binary,
    Zeros,
    SecretText,
    Hosts,
    /// The few bytes of context around a planted item.
    PlantContext,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::CriLog => "CRI pod log lines (klog, JSON, access log, logfmt, URLs)",
            Kind::AppLog => "application log lines (klog, JSON, access log, logfmt, URLs)",
            Kind::Yaml => "YAML config (k8s manifests, app config, URLs, image digests)",
            Kind::Json => "JSON config (objects, env arrays, URLs, sha256 digests)",
            Kind::Kubeconfig => "kubeconfig without credentials (CA data, cert file paths)",
            Kind::Cert => "public PEM certificate",
            Kind::Base64 => "base64 blob of random bytes",
            Kind::Binary => "random binary (ELF/gzip/SQLite headers)",
            Kind::Zeros => "zeros",
            Kind::SecretText => "secret-volume config value (properties, host names)",
            Kind::Hosts => "etc-hosts",
            Kind::PlantContext => "context around a planted item",
        }
    }
}

/// What a planted item is.
#[derive(Clone, Debug, PartialEq, Eq)]
enum What {
    /// A generated secret of a rule family (family name, for the report).
    Rule(&'static str),
    /// A fingerprinted value: `<ns>/<name>` and the encoding it was written in.
    Value { secret: String, encoding: Encoding },
}

/// A planted item in the tree.
#[derive(Debug)]
struct Plant {
    /// The node path a finding reports.
    path: String,
    offset: u64,
    len: u64,
    what: What,
}

/// Text around a planted item, to be inserted in a host file of a given kind.
struct Snippet {
    before: Vec<u8>,
    secret: Vec<u8>,
    after: Vec<u8>,
    what: What,
}

/// A generated file: its bytes, the planted items in it, and the kind of each stretch.
#[derive(Default)]
struct Doc {
    bytes: Vec<u8>,
    plants: Vec<(u64, u64, What)>,
    segments: Vec<(u64, Kind)>,
}

impl Doc {
    fn seg(&mut self, kind: Kind) {
        if self.segments.last().map(|s| s.1) != Some(kind) {
            self.segments.push((self.bytes.len() as u64, kind));
        }
    }
    fn snippet(&mut self, s: Snippet, host: Kind) {
        self.seg(Kind::PlantContext);
        self.bytes.extend_from_slice(&s.before);
        self.plants.push((self.bytes.len() as u64, s.secret.len() as u64, s.what));
        self.bytes.extend_from_slice(&s.secret);
        self.bytes.extend_from_slice(&s.after);
        self.seg(host);
    }
    /// A whole file that is one planted item.
    fn whole(bytes: Vec<u8>, what: What) -> Doc {
        let len = bytes.len() as u64;
        Doc { bytes, plants: vec![(0, len, what)], segments: vec![(0, Kind::PlantContext)] }
    }
}

/// A wall clock for log lines, in microseconds since 2024-05-01.
struct Clock(u64);

impl Clock {
    fn tick(&mut self, rng: &mut Prng) -> (u64, u64, u64, u64) {
        self.0 += rng.range(1, 3_000_000) as u64;
        let s = self.0 / 1_000_000;
        (s / 3600 % 24, s / 60 % 60, s % 60, self.0 % 1_000_000)
    }
}

fn url(rng: &mut Prng) -> String {
    let scheme = if rng.chance(70) { "https" } else { "http" };
    let mut u = format!("{scheme}://{}{}", rng.pick(HOSTS), rng.pick(URL_PATHS));
    if u.ends_with('/') {
        u.push_str(&rng.range(1000, 999_999).to_string());
    }
    u
}

/// One application log line (or a short Go stack trace), without the CRI prefix.
fn log_line(rng: &mut Prng, clock: &mut Clock, out: &mut Vec<u8>) {
    let (h, m, s, us) = clock.tick(rng);
    match rng.range(0, 100) {
        0..=29 => {
            let _ = write!(
                out,
                "I0501 {h:02}:{m:02}:{s:02}.{us:06}       1 {}.go:{}] \"",
                rng.pick(WORDS),
                rng.range(10, 2000)
            );
            let n = rng.range(2, 8);
            words(rng, out, n, WORDS);
            let _ = writeln!(
                out,
                "\" pod=\"{}/{}-{}\" duration=\"{}.{}ms\"",
                rng.pick(NAMESPACES),
                rng.pick(APPS),
                rng.hex(5),
                rng.range(0, 900),
                rng.range(0, 10)
            );
        }
        30..=54 => {
            let _ = write!(
                out,
                "{{\"level\":\"{}\",\"ts\":\"2024-05-01T{h:02}:{m:02}:{s:02}.{:03}Z\",\"caller\":\"{}/{}.go:{}\",\"msg\":\"",
                rng.pick(&["info", "info", "debug", "warn", "error"]),
                us / 1000,
                rng.pick(WORDS),
                rng.pick(WORDS),
                rng.range(10, 900)
            );
            let n = rng.range(2, 6);
            words(rng, out, n, WORDS);
            let _ = writeln!(
                out,
                "\",\"method\":\"{}\",\"url\":\"{}\",\"status\":{},\"duration_ms\":{}.{},\"trace_id\":\"{}\"}}",
                rng.pick(&["GET", "GET", "POST", "PUT", "DELETE"]),
                url(rng),
                rng.pick(&[200, 200, 200, 201, 204, 304, 404, 500, 503]),
                rng.range(0, 2000),
                rng.range(0, 10),
                rng.hex(32)
            );
        }
        55..=74 => {
            let _ = writeln!(
                out,
                "10.244.{}.{} - - [01/May/2024:{h:02}:{m:02}:{s:02} +0000] \"{} {} HTTP/1.1\" {} {} \"{}\" \"{}\"",
                rng.range(0, 8),
                rng.range(2, 250),
                rng.pick(&["GET", "GET", "POST"]),
                rng.pick(URL_PATHS),
                rng.pick(&[200, 200, 301, 404, 502]),
                rng.range(0, 90_000),
                url(rng),
                rng.pick(&[
                    "kube-probe/1.29",
                    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36",
                    "curl/8.5.0",
                    "Go-http-client/2.0",
                    "Prometheus/2.51.0",
                ])
            );
        }
        75..=89 => {
            let _ = writeln!(
                out,
                "2024-05-01 {h:02}:{m:02}:{s:02}.{:03}  {} 1 --- [nio-8080-exec-{}] c.e.{}.{}Controller : Fetching {} took {} ms",
                us / 1000,
                rng.pick(&["INFO", "INFO", "DEBUG", "WARN"]),
                rng.range(1, 10),
                rng.pick(WORDS),
                rng.pick(&["Order", "Cart", "Invoice", "Health"]),
                url(rng),
                rng.range(1, 900)
            );
        }
        90..=96 => {
            let _ = writeln!(
                out,
                "time=\"2024-05-01T{h:02}:{m:02}:{s:02}Z\" level=warning msg=\"retrying\" err=\"Get \\\"{}\\\": dial tcp 10.{}.{}.{}:443: i/o timeout\" attempt={}",
                url(rng),
                rng.range(0, 255),
                rng.range(0, 255),
                rng.range(1, 255),
                rng.range(1, 6)
            );
        }
        _ => {
            let _ = writeln!(
                out,
                "panic: runtime error: invalid memory address or nil pointer dereference\n\
                 [signal SIGSEGV: segmentation violation code=0x1 addr=0x18 pc=0x{}]\n\n\
                 goroutine {} [running]:\nmain.(*server).handle(0xc000{})\n\t/src/cmd/{}/server.go:{} +0x{}",
                rng.hex(6),
                rng.range(1, 400),
                rng.hex(6),
                rng.pick(APPS),
                rng.range(20, 600),
                rng.hex(2)
            );
        }
    }
}

/// One CRI log record (kubelet's `<RFC3339Nano> <stream> <P|F> <line>` format) per line.
fn cri_line(rng: &mut Prng, clock: &mut Clock, out: &mut Vec<u8>) {
    let mut line = Vec::new();
    log_line(rng, clock, &mut line);
    let (h, m, s, us) = (
        clock.0 / 3_600_000_000 % 24,
        clock.0 / 60_000_000 % 60,
        clock.0 / 1_000_000 % 60,
        clock.0 % 1_000_000,
    );
    let stream = if rng.chance(80) { "stdout" } else { "stderr" };
    for l in line.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let _ = write!(
            out,
            "2024-05-01T{h:02}:{m:02}:{s:02}.{us:06}{:03}Z {stream} F ",
            rng.range(0, 1000)
        );
        out.extend_from_slice(l);
        out.push(b'\n');
    }
}

/// The CRI prefix of one log record.
fn cri_prefix(rng: &mut Prng) -> String {
    format!(
        "2024-05-01T12:{:02}:{:02}.{:09}Z stdout F ",
        rng.range(0, 60),
        rng.range(0, 60),
        rng.range(0, 1_000_000_000)
    )
}

/// One section of a YAML config.
fn yaml_section(rng: &mut Prng, out: &mut Vec<u8>) {
    match rng.range(0, 100) {
        0..=34 => {
            let app = rng.pick(APPS);
            let _ = write!(
                out,
                "- name: {app}\n  image: registry.acme.internal/{}/{app}@sha256:{}\n  imagePullPolicy: IfNotPresent\n  ports:\n  - containerPort: {}\n    protocol: TCP\n  env:\n  - name: LOG_LEVEL\n    value: {}\n  - name: UPSTREAM_URL\n    value: {}\n  - name: DB_PASSWORD\n    valueFrom:\n      secretKeyRef:\n        name: {app}-db-credentials\n        key: password\n  resources:\n    limits: {{cpu: {}m, memory: {}Mi}}\n",
                rng.pick(NAMESPACES),
                rng.hex(64),
                rng.pick(&[80, 8080, 8443, 9090, 5432]),
                rng.pick(&["info", "debug", "warn"]),
                url(rng),
                rng.range(1, 20) * 100,
                rng.range(1, 32) * 64,
            );
        }
        35..=64 => {
            let _ = write!(
                out,
                "{}_{}:\n  url: {}\n  timeout: {}s\n  retries: {}\n  tls_ca_file: /etc/ssl/certs/ca-{}.crt\n  password_file: /etc/secrets/{}/password\n",
                rng.pick(&["upstream", "backend", "sink", "source"]),
                rng.pick(WORDS),
                url(rng),
                rng.range(1, 60),
                rng.range(0, 6),
                rng.pick(WORDS),
                rng.pick(APPS),
            );
        }
        65..=84 => {
            let _ = write!(
                out,
                "- job_name: {}-{}\n  scrape_interval: {}s\n  metrics_path: /metrics\n  static_configs:\n  - targets: ['{}:{}', '{}:{}']\n",
                rng.pick(APPS),
                rng.pick(WORDS),
                rng.pick(&[15, 30, 60]),
                rng.pick(HOSTS),
                rng.range(1000, 65000),
                rng.pick(HOSTS),
                rng.range(1000, 65000),
            );
        }
        _ => {
            let _ = write!(out, "# {}: ", rng.pick(WORDS));
            let n = rng.range(3, 10);
            words(rng, out, n, WORDS);
            let _ = writeln!(
                out,
                "\nfeature.{}.{}.enabled: {}",
                rng.pick(WORDS),
                rng.pick(WORDS),
                rng.chance(50)
            );
        }
    }
}

/// One line of a JSON config (objects one per line, as many tools write state files).
fn json_line(rng: &mut Prng, out: &mut Vec<u8>) {
    let app = rng.pick(APPS);
    match rng.range(0, 3) {
        0 => {
            let _ = writeln!(
                out,
                "{{\"name\":\"{app}-{}\",\"url\":\"{}\",\"replicas\":{},\"labels\":{{\"app\":\"{app}\",\"tier\":\"{}\"}},\"checksum\":\"sha256:{}\",\"enabled\":{}}},",
                rng.range(0, 1000),
                url(rng),
                rng.range(1, 9),
                rng.pick(&["frontend", "backend", "cache"]),
                rng.hex(64),
                rng.chance(50)
            );
        }
        1 => {
            let _ = writeln!(
                out,
                "{{\"process\":{{\"args\":[\"/usr/local/bin/{app}\",\"--config=/etc/{app}/config.yaml\",\"--port={}\"],\"env\":[\"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\",\"HOSTNAME={app}-{}-{}\",\"KUBERNETES_SERVICE_HOST=10.96.0.1\",\"KUBERNETES_PORT=tcp://10.96.0.1:443\",\"UPSTREAM={}\"],\"cwd\":\"/\"}}}},",
                rng.range(1024, 65535),
                rng.hex(10),
                rng.chars(LOWER, 5),
                url(rng)
            );
        }
        _ => {
            let _ = writeln!(
                out,
                "{{\"id\":\"{}\",\"created\":\"2024-05-01T{:02}:{:02}:00Z\",\"image\":\"registry.acme.internal/{app}:v1.{}.{}\",\"digest\":\"sha256:{}\",\"size\":{}}},",
                rng.uuid(),
                rng.range(0, 24),
                rng.range(0, 60),
                rng.range(0, 30),
                rng.range(0, 10),
                rng.hex(64),
                rng.range(1000, 90_000_000)
            );
        }
    }
}

/// A DER-looking body for a PEM block: the given header bytes, then random bytes.
fn der(rng: &mut Prng, header: &[u8], len: usize) -> Vec<u8> {
    let mut v = header.to_vec();
    let n = len.saturating_sub(v.len());
    v.extend(rng.bytes(n));
    v
}

fn pem(label: &str, body: &[u8]) -> Vec<u8> {
    let b64 = STANDARD.encode(body);
    let mut out = format!("-----BEGIN {label}-----\n").into_bytes();
    for line in b64.as_bytes().chunks(64) {
        out.extend_from_slice(line);
        out.push(b'\n');
    }
    out.extend_from_slice(format!("-----END {label}-----\n").as_bytes());
    out
}

/// A public certificate (random DER after a certificate's first bytes).
fn cert(rng: &mut Prng) -> Vec<u8> {
    let body = der(rng, &[0x30, 0x82, 0x03, 0x2d, 0x30, 0x82, 0x02, 0x15, 0xa0, 0x03], 817);
    pem("CERTIFICATE", &body)
}

/// A kubeconfig that references its credentials by path (kubelet's, kube-proxy's): the
/// only inline data is the public CA certificate.
fn kubeconfig_plain(rng: &mut Prng) -> Vec<u8> {
    let ca = STANDARD.encode(cert(rng));
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    certificate-authority-data: {ca}\n    server: https://10.0.{}.{}:6443\n  name: default-cluster\ncontexts:\n- context:\n    cluster: default-cluster\n    namespace: default\n    user: default-auth\n  name: default-context\ncurrent-context: default-context\npreferences: {{}}\nusers:\n- name: default-auth\n  user:\n    client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem\n    client-key: /var/lib/kubelet/pki/kubelet-client-current.pem\n",
        rng.range(0, 255),
        rng.range(1, 255)
    )
    .into_bytes()
}

/// Ordinary (non-fingerprinted, non-credential) content of a secret-volume key.
fn secret_text(rng: &mut Prng, size: usize) -> Vec<u8> {
    let mut out = Vec::new();
    if size < 64 {
        let _ = write!(out, "{}.{}.svc.cluster.local", rng.pick(APPS), rng.pick(NAMESPACES));
        return out;
    }
    while out.len() < size {
        let _ = writeln!(
            out,
            "{}.{}.{}={}",
            rng.pick(&["spring", "app", "server", "client"]),
            rng.pick(WORDS),
            rng.pick(&["url", "timeout", "pool-size", "enabled", "host"]),
            match rng.range(0, 4) {
                0 => url(rng),
                1 => rng.range(1, 5000).to_string(),
                2 => rng.chance(50).to_string(),
                _ => format!("jdbc:postgresql://{}:5432/{}", rng.pick(DB_HOSTS), rng.pick(WORDS)),
            }
        );
    }
    out
}

/// About `size` bytes of `kind`, with `snippets` inserted at random line boundaries (text
/// kinds; appended to the others).
fn generate(rng: &mut Prng, kind: Kind, size: usize, snippets: Vec<Snippet>) -> Doc {
    let mut doc = Doc::default();
    let mut at: Vec<usize> = snippets.iter().map(|_| rng.range(0, size.max(2))).collect();
    at.sort_unstable();
    let mut pending = snippets.into_iter().zip(at).peekable();
    let mut clock = Clock(rng.range(0, 20 * 3_600_000_000) as u64);
    doc.seg(kind);
    match kind {
        Kind::Binary => {
            let magic = *rng.pick(MAGIC);
            doc.bytes.extend_from_slice(magic);
            while doc.bytes.len() < size {
                let n = rng.range(512, 64 << 10).min(size - doc.bytes.len());
                if rng.chance(25) {
                    doc.seg(Kind::Zeros);
                    doc.bytes.resize(doc.bytes.len() + n, 0);
                } else {
                    doc.seg(Kind::Binary);
                    doc.bytes.extend(rng.bytes(n));
                }
            }
            doc.bytes.truncate(size);
        }
        Kind::Zeros => doc.bytes.resize(size, 0),
        Kind::Base64 => {
            let raw = rng.bytes(size * 3 / 4);
            let text = STANDARD.encode(raw);
            if rng.chance(50) {
                for line in text.as_bytes().chunks(76) {
                    doc.bytes.extend_from_slice(line);
                    doc.bytes.push(b'\n');
                }
            } else {
                let _ = write!(
                    doc.bytes,
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {}-blob\nbinaryData:\n  blob.bin: {text}\n",
                    rng.pick(APPS)
                );
            }
        }
        Kind::Cert => doc.bytes.extend(cert(rng)),
        Kind::Kubeconfig => doc.bytes.extend(kubeconfig_plain(rng)),
        Kind::SecretText => doc.bytes.extend(secret_text(rng, size)),
        Kind::Hosts => {
            let _ = write!(
                doc.bytes,
                "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\n10.244.{}.{}\t{}-{}\n",
                rng.range(0, 8),
                rng.range(2, 250),
                rng.pick(APPS),
                rng.hex(5)
            );
        }
        Kind::CriLog | Kind::AppLog | Kind::Yaml | Kind::Json => loop {
            while let Some((_, point)) = pending.peek() {
                if *point > doc.bytes.len() {
                    break;
                }
                let (s, _) = pending.next().expect("peeked");
                doc.snippet(s, kind);
            }
            if doc.bytes.len() >= size && pending.peek().is_none() {
                break;
            }
            match kind {
                Kind::CriLog => cri_line(rng, &mut clock, &mut doc.bytes),
                Kind::AppLog => log_line(rng, &mut clock, &mut doc.bytes),
                Kind::Yaml => yaml_section(rng, &mut doc.bytes),
                _ => json_line(rng, &mut doc.bytes),
            }
        },
        Kind::PlantContext => {}
    }
    for (s, _) in pending {
        doc.snippet(s, kind);
    }
    doc
}

// ---------------------------------------------------------------------------------------
// Planted secrets (generated at run time; random bytes in the shape of each family)

/// A PEM private key block: random bytes after the DER header of the key type.
fn private_key(rng: &mut Prng) -> Vec<u8> {
    match rng.range(0, 3) {
        0 => pem(
            "RSA PRIVATE KEY",
            &der(
                rng,
                &[0x30, 0x82, 0x04, 0xa4, 0x02, 0x01, 0x00, 0x02, 0x82, 0x01, 0x01, 0x00],
                1192,
            ),
        ),
        1 => pem(
            "PRIVATE KEY",
            &der(
                rng,
                &[
                    0x30, 0x82, 0x04, 0xbe, 0x02, 0x01, 0x00, 0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86,
                    0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01, 0x05, 0x00, 0x04, 0x82, 0x04, 0xa8,
                ],
                1218,
            ),
        ),
        _ => {
            let mut body = vec![0x30, 0x77, 0x02, 0x01, 0x01, 0x04, 0x20];
            body.extend(rng.bytes(32));
            body.extend_from_slice(&[
                0xa0, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0xa1, 0x44,
                0x03, 0x42, 0x00, 0x04,
            ]);
            body.extend(rng.bytes(64));
            pem("EC PRIVATE KEY", &body)
        }
    }
}

/// A GitHub personal access token with a valid checksum, from the rule examples
/// generator.
fn github_token(rng: &mut Prng) -> Vec<u8> {
    render("{ghtoken:ghp}", rng.next_u64())
}

/// A service-account JWT: bound (projected, with `exp`, possibly expired) or legacy
/// (secret-based, no `exp`); the signature is random.
fn service_account_jwt(rng: &mut Prng, now: i64, bound: bool) -> Vec<u8> {
    let header = format!("{{\"alg\":\"RS256\",\"kid\":\"{}\"}}", rng.chars(TOKEN_CHARS, 43));
    let ns = rng.pick(NAMESPACES);
    let sa = rng.pick(APPS);
    let payload = if bound {
        let iat = if rng.chance(75) { now - 600 } else { now - 30 * 86_400 };
        format!(
            "{{\"aud\":[\"https://kubernetes.default.svc.cluster.local\"],\"exp\":{},\"iat\":{iat},\"iss\":\"https://kubernetes.default.svc.cluster.local\",\"jti\":\"{}\",\"kubernetes.io\":{{\"namespace\":\"{ns}\",\"node\":{{\"name\":\"node-1\",\"uid\":\"{}\"}},\"pod\":{{\"name\":\"{sa}-{}\",\"uid\":\"{}\"}},\"serviceaccount\":{{\"name\":\"{sa}\",\"uid\":\"{}\"}},\"warnafter\":{}}},\"nbf\":{iat},\"sub\":\"system:serviceaccount:{ns}:{sa}\"}}",
            iat + 3607,
            rng.uuid(),
            rng.uuid(),
            rng.hex(5),
            rng.uuid(),
            rng.uuid(),
            iat + 3600
        )
    } else {
        format!(
            "{{\"iss\":\"kubernetes/serviceaccount\",\"kubernetes.io/serviceaccount/namespace\":\"{ns}\",\"kubernetes.io/serviceaccount/secret.name\":\"{sa}-token-{}\",\"kubernetes.io/serviceaccount/service-account.name\":\"{sa}\",\"kubernetes.io/serviceaccount/service-account.uid\":\"{}\",\"sub\":\"system:serviceaccount:{ns}:{sa}\"}}",
            rng.chars(LOWER, 5),
            rng.uuid()
        )
    };
    let sig = rng.bytes(256);
    format!(
        "{}.{}.{}",
        URL_SAFE_NO_PAD.encode(header),
        URL_SAFE_NO_PAD.encode(payload),
        URL_SAFE_NO_PAD.encode(sig)
    )
    .into_bytes()
}

/// A kubeconfig with an embedded client key (what a leaked admin kubeconfig looks like).
fn kubeconfig_with_key(rng: &mut Prng) -> Vec<u8> {
    let ca = STANDARD.encode(cert(rng));
    let crt = STANDARD.encode(cert(rng));
    let key = STANDARD.encode(private_key(rng));
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    certificate-authority-data: {ca}\n    server: https://10.0.0.{}:6443\n  name: prod\ncontexts:\n- context:\n    cluster: prod\n    user: admin\n  name: admin@prod\ncurrent-context: admin@prod\nusers:\n- name: admin\n  user:\n    client-certificate-data: {crt}\n    client-key-data: {key}\n",
        rng.range(1, 255)
    )
    .into_bytes()
}

/// A kubeconfig with an embedded bearer token.
fn kubeconfig_with_token(rng: &mut Prng, now: i64) -> Vec<u8> {
    let ca = STANDARD.encode(cert(rng));
    let token = service_account_jwt(rng, now, false);
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    certificate-authority-data: {ca}\n    server: https://kubernetes.default.svc\n  name: in-cluster\ncontexts:\n- context:\n    cluster: in-cluster\n    user: deployer\n  name: deployer\ncurrent-context: deployer\nusers:\n- name: deployer\n  user:\n    token: {}\n",
        String::from_utf8(token).expect("ascii")
    )
    .into_bytes()
}

/// A `.dockerconfigjson` with one registry credential.
fn docker_config(rng: &mut Prng) -> Vec<u8> {
    let user = format!("robot${}", rng.pick(APPS));
    let pass = rng.chars(TOKEN_CHARS, 32);
    let auth = STANDARD.encode(format!("{user}:{pass}"));
    format!(
        "{{\"auths\":{{\"registry.acme.internal\":{{\"username\":\"{user}\",\"password\":\"{pass}\",\"auth\":\"{auth}\"}}}}}}"
    )
    .into_bytes()
}

/// An AWS access key id and secret access key, as `(id, secret)`.
fn aws_keys(rng: &mut Prng) -> (String, String) {
    let id = format!("AKIA{}", rng.chars(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16));
    (id, rng.chars(B64_CHARS, 40))
}

// ---------------------------------------------------------------------------------------
// The tree

/// Generated content to be: its kind, its size and the snippets to insert.
struct Gen {
    kind: Kind,
    size: usize,
    snippets: Vec<Snippet>,
}

/// Where a file outside atomic-writer volumes goes, in the node-tree builder's terms.
enum FileAt {
    /// `rel` in the pod dir (`etc-hosts`).
    PodDir(&'static str),
    /// `<name>` in the empty-dir volume `<vol>`.
    EmptyDir(String, String),
    /// The CRI log file `<file>` of container `<ctr>` under `/var/log/pods`.
    Log(String, String),
}

/// A file to write, outside atomic-writer volumes: a planted item or generated content.
struct FilePlan {
    at: FileAt,
    content: Result<(Vec<u8>, What), Gen>,
}

/// A key of an atomic-writer volume: its name and either a planted item or ordinary text.
struct KeyPlan {
    name: String,
    content: Result<(Vec<u8>, What), (Kind, usize)>,
}

/// An atomic-writer volume: `projected` or `secret`, its name, its keys.
struct VolumePlan {
    projected: bool,
    name: String,
    keys: Vec<KeyPlan>,
}

struct PodPlan {
    uid: String,
    namespace: &'static str,
    name: String,
    containers: Vec<String>,
    volumes: Vec<VolumePlan>,
    files: Vec<FilePlan>,
}

/// The generated tree on disk.
struct Tree {
    node: NodeTree,
    files: usize,
    bytes: u64,
    pods: usize,
    plants: Vec<Plant>,
    /// For every file with a planted item or of a text kind: node path → kind stretches.
    segments: HashMap<String, Vec<(u64, Kind)>>,
    /// Bytes per kind.
    composition: BTreeMap<Kind, u64>,
}

/// Sizes: mostly small configs and logs, some of a few hundred KiB, a few of several MiB.
fn file_size(rng: &mut Prng) -> usize {
    match rng.range(0, 100) {
        0..=54 => rng.log_range(2 << 10, 64 << 10),
        55..=87 => rng.log_range(64 << 10, 1 << 20),
        _ => rng.log_range(1 << 20, 8 << 20),
    }
}

fn plan_pods(rng: &mut Prng, target: usize) -> Vec<PodPlan> {
    let mut pods = Vec::new();
    let mut planned = 0usize;
    while planned < target {
        let uid = rng.uuid();
        let ns = *rng.pick(NAMESPACES);
        let app = *rng.pick(APPS);
        let name = format!("{app}-{}-{}", rng.hex(10), rng.chars(LOWER, 5));
        let mut containers = vec![app.to_owned()];
        for _ in 0..rng.range(0, 3) {
            let s = rng.pick(SIDECARS).to_string();
            if !containers.contains(&s) {
                containers.push(s);
            }
        }
        let mut volumes = Vec::new();
        let mut vol_names =
            vec!["db-credentials", "tls", "app-secrets", "api-keys", "config-secret"];
        for _ in 0..rng.range(1, 3) {
            let v = vol_names.remove(rng.range(0, vol_names.len()));
            let keys = (0..rng.range(1, 4))
                .map(|k| {
                    let size = if rng.chance(50) { rng.range(8, 60) } else { rng.range(200, 4096) };
                    planned += size;
                    KeyPlan {
                        name: format!(
                            "{}-{k}",
                            rng.pick(&["settings", "host", "config", "endpoint"])
                        ),
                        content: Err((Kind::SecretText, size)),
                    }
                })
                .collect();
            volumes.push(VolumePlan { projected: false, name: v.into(), keys });
        }
        if rng.chance(30) {
            volumes.push(VolumePlan {
                projected: true,
                name: "config-bundle".into(),
                keys: vec![
                    KeyPlan { name: "ca.crt".into(), content: Err((Kind::Cert, 0)) },
                    KeyPlan { name: "namespace".into(), content: Err((Kind::SecretText, 8)) },
                ],
            });
        }
        let gen = |kind, size| Err(Gen { kind, size, snippets: Vec::new() });
        let mut files =
            vec![FilePlan { at: FileAt::PodDir("etc-hosts"), content: gen(Kind::Hosts, 0) }];
        for (vi, v) in ["cache", "data", "logs", "tmp"].iter().take(rng.range(1, 3)).enumerate() {
            // Every empty-dir has an application log and a config: hosts for planted text.
            let mut kinds = vec![Kind::AppLog, if vi == 0 { Kind::Yaml } else { Kind::Json }];
            for _ in 0..rng.range(0, 6) {
                kinds.push(match rng.range(0, 100) {
                    0..=21 => Kind::AppLog,
                    22..=36 => Kind::Yaml,
                    37..=51 => Kind::Json,
                    52..=63 => Kind::Base64,
                    64..=84 => Kind::Binary,
                    85..=89 => Kind::Zeros,
                    90..=94 => Kind::Kubeconfig,
                    _ => Kind::Cert,
                });
            }
            for (i, kind) in kinds.into_iter().enumerate() {
                let name = match kind {
                    Kind::AppLog => format!("{}-{i}.log", rng.pick(&["app", "server", "access"])),
                    Kind::Yaml => format!("{}-{i}.yaml", rng.pick(&["config", "values", "rules"])),
                    Kind::Json => format!("{}-{i}.json", rng.pick(&["settings", "state", "index"])),
                    Kind::Base64 => format!("blob-{}.b64", rng.hex(8)),
                    Kind::Binary => {
                        format!("{}-{i}.{}", rng.pick(WORDS), rng.pick(&["bin", "db", "gz"]))
                    }
                    Kind::Zeros => format!("prealloc-{i}.img"),
                    Kind::Kubeconfig => format!("kubeconfig-{i}"),
                    _ => format!("ca-{i}.crt"),
                };
                let size = file_size(rng);
                planned += size;
                let at = FileAt::EmptyDir(v.to_string(), name);
                files.push(FilePlan { at, content: gen(kind, size) });
            }
        }
        for c in &containers {
            let n_logs = if rng.chance(40) { 2 } else { 1 };
            for k in 0..n_logs {
                let (file, kind) = match k {
                    0 => ("0.log".to_owned(), Kind::CriLog),
                    _ if rng.chance(50) => ("0.log.20240501-093000.gz".to_owned(), Kind::CriLog),
                    _ => ("0.log.20240501-093000".to_owned(), Kind::CriLog),
                };
                let size = file_size(rng);
                planned += size;
                let at = FileAt::Log(c.clone(), file);
                files.push(FilePlan { at, content: gen(kind, size) });
            }
        }
        pods.push(PodPlan { uid, namespace: ns, name, containers, volumes, files });
    }
    pods
}

/// Where a planted item goes.
enum Place {
    /// The only key of a new secret volume.
    SecretKey(&'static str),
    /// The `token` of a new `kube-api-access-*` projected volume.
    Token,
    /// A new file in a new empty-dir volume.
    EmptyDirFile(&'static str),
    /// Inside a text file of this kind, as this snippet.
    Inline(Kind, Snippet),
}

/// One planted item before it is placed.
struct Planned {
    bytes: Vec<u8>,
    what: What,
    place: Place,
}

/// Places `secret` inside a file of `kind`, on a line of its own (after a CRI prefix in a
/// CRI log).
fn inline(
    rng: &mut Prng,
    kind: Kind,
    before: &str,
    secret: Vec<u8>,
    after: &str,
    what: What,
) -> Planned {
    let prefix = if kind == Kind::CriLog { cri_prefix(rng) } else { String::new() };
    let snippet = Snippet {
        before: format!("{prefix}{before}").into_bytes(),
        secret: secret.clone(),
        after: format!("{after}\n").into_bytes(),
        what: what.clone(),
    };
    Planned { bytes: secret, what, place: Place::Inline(kind, snippet) }
}

fn whole(bytes: Vec<u8>, what: What, place: Place) -> Planned {
    Planned { bytes, what, place }
}

/// The rule plants: a few of each family, in whole files and inside logs and configs.
fn rule_plants(rng: &mut Prng, now: i64) -> Vec<Planned> {
    let mut out = Vec::new();
    let w = What::Rule("pem-private-key");
    for i in 0..7 {
        let key = private_key(rng);
        out.push(match i {
            0..=2 => whole(key, w.clone(), Place::SecretKey("tls.key")),
            3 => whole(key, w.clone(), Place::EmptyDirFile("server.key")),
            4 => inline(rng, Kind::AppLog, "loaded signing key:\n", key, "", w.clone()),
            // A Helm values file: a block scalar, every line indented.
            5 => {
                let text = String::from_utf8(key).expect("ascii");
                let indented = text.trim_end().replace('\n', "\n    ");
                inline(
                    rng,
                    Kind::Yaml,
                    "tls:\n  key: |\n    ",
                    indented.into_bytes(),
                    "",
                    w.clone(),
                )
            }
            _ => {
                let escaped = fingerprint::json_escape(std::str::from_utf8(&key).expect("ascii"));
                let before = "{\"tls\":{\"key\":\"";
                inline(rng, Kind::Json, before, escaped.into_bytes(), "\"}},", w.clone())
            }
        });
    }
    let w = What::Rule("github-token");
    for i in 0..6 {
        let t = github_token(rng);
        out.push(match i % 3 {
            0 => inline(
                rng,
                Kind::CriLog,
                "level=info msg=\"cloning\" url=\"https://x-access-token:",
                t,
                "@github.com/acme/shop-api.git\"",
                w.clone(),
            ),
            1 => inline(rng, Kind::Yaml, "github_token: ", t, "", w.clone()),
            _ => inline(
                rng,
                Kind::Json,
                "{\"name\":\"ci\",\"env\":[\"GITHUB_TOKEN=",
                t,
                "\"]},",
                w.clone(),
            ),
        });
    }
    let w = What::Rule("service-account-jwt");
    for i in 0..8 {
        let t = service_account_jwt(rng, now, i % 4 != 3);
        out.push(match i {
            0..=3 => whole(t, w.clone(), Place::Token),
            4 | 5 => inline(
                rng,
                Kind::CriLog,
                "DEBUG outgoing request headers: Authorization: Bearer ",
                t,
                "",
                w.clone(),
            ),
            6 => inline(rng, Kind::AppLog, "using token ", t, " for kube-apiserver", w.clone()),
            _ => inline(rng, Kind::Json, "{\"bearerToken\":\"", t, "\"},", w.clone()),
        });
    }
    let w = What::Rule("kubeconfig-credentials");
    out.push(whole(kubeconfig_with_key(rng), w.clone(), Place::SecretKey("kubeconfig")));
    out.push(whole(kubeconfig_with_key(rng), w.clone(), Place::EmptyDirFile("admin.kubeconfig")));
    out.push(whole(kubeconfig_with_token(rng, now), w, Place::EmptyDirFile("deployer.kubeconfig")));
    let w = What::Rule("docker-config-auth");
    out.push(whole(docker_config(rng), w.clone(), Place::SecretKey(".dockerconfigjson")));
    out.push(whole(docker_config(rng), w.clone(), Place::SecretKey(".dockerconfigjson")));
    let c = docker_config(rng);
    out.push(inline(rng, Kind::Json, "", c, ",", w));
    let w = What::Rule("aws-access-key");
    for i in 0..4 {
        let (id, secret) = aws_keys(rng);
        out.push(if i % 2 == 0 {
            let after = format!("\naws_secret_access_key: {secret}");
            inline(rng, Kind::Yaml, "aws_access_key_id: ", id.into_bytes(), &after, w.clone())
        } else {
            let after = format!("\nAWS_SECRET_ACCESS_KEY={secret}");
            inline(rng, Kind::AppLog, "AWS_ACCESS_KEY_ID=", id.into_bytes(), &after, w.clone())
        });
    }
    let w = What::Rule("database-url-with-password");
    for i in 0..3 {
        let url = format!(
            "postgres{}://{}:{}@{}:5432/{}?sslmode=require",
            if i == 0 { "" } else { "ql" },
            rng.pick(APPS),
            rng.chars(TOKEN_CHARS, 24),
            rng.pick(DB_HOSTS),
            rng.pick(WORDS)
        )
        .into_bytes();
        out.push(match i {
            0 => inline(rng, Kind::Yaml, "DATABASE_URL: ", url, "", w.clone()),
            1 => inline(rng, Kind::CriLog, "level=info msg=\"migrating\" dsn=", url, "", w.clone()),
            _ => inline(rng, Kind::Json, "{\"env\":[\"DATABASE_URL=", url, "\"]},", w.clone()),
        });
    }
    out
}

/// The fingerprint plants: `VALUE_PLANTS` values spread over the set, a quarter each as a
/// whole secret-volume key, raw inside a config or log, base64 inside a manifest, and
/// JSON-escaped (the PEM-looking values, whose escaped form differs) inside JSON.
fn value_plants(rng: &mut Prng, vals: &[SecretValue]) -> Vec<Planned> {
    let band = vals.len() / VALUE_PLANTS;
    let mut out = Vec::new();
    for k in 0..VALUE_PLANTS {
        let mut i = k * band + rng.range(0, band);
        if k % 4 == 3 {
            i = (i - i % 10 + 9).min(vals.len() - 1);
        }
        let v = &vals[i];
        let forms = fingerprint::encodings(&v.value);
        let form = |e: Encoding| forms.iter().find(|(x, _)| *x == e).map(|(_, f)| f.clone());
        let what = |encoding| What::Value { secret: v.secret_ref(), encoding };
        let raw = v.value.clone();
        out.push(match k % 4 {
            0 => whole(raw, what(Encoding::Raw), Place::SecretKey("password")),
            // A PEM-looking value is printed raw (several lines) by the application.
            1 if raw.starts_with(b"-----") => {
                inline(rng, Kind::AppLog, "", raw, "", what(Encoding::Raw))
            }
            1 if rng.chance(50) => {
                inline(rng, Kind::Yaml, "  password: ", raw, "", what(Encoding::Raw))
            }
            1 => inline(
                rng,
                Kind::CriLog,
                "connecting to db with password=",
                raw,
                "",
                what(Encoding::Raw),
            ),
            2 => {
                let f = form(Encoding::Base64).expect("every value has a base64 form");
                if rng.chance(50) {
                    inline(rng, Kind::Yaml, "data:\n  password: ", f, "", what(Encoding::Base64))
                } else {
                    let before = "{\"kind\":\"Secret\",\"data\":{\"password\":\"";
                    inline(rng, Kind::Json, before, f, "\"}},", what(Encoding::Base64))
                }
            }
            _ => {
                let f = form(Encoding::JsonEscaped).expect("a PEM-looking value escapes");
                if rng.chance(50) {
                    inline(
                        rng,
                        Kind::Json,
                        "{\"tls\":{\"key\":\"",
                        f,
                        "\"}},",
                        what(Encoding::JsonEscaped),
                    )
                } else {
                    let before = "{\"level\":\"debug\",\"msg\":\"loaded\",\"key\":\"";
                    inline(rng, Kind::CriLog, before, f, "\"}", what(Encoding::JsonEscaped))
                }
            }
        });
    }
    out
}

/// Puts every planted item into the plan, each in a random pod.
fn place(rng: &mut Prng, pods: &mut [PodPlan], plants: Vec<Planned>) {
    for (n, Planned { bytes, what, place }) in plants.into_iter().enumerate() {
        let pod = &mut pods[rng.range(0, pods.len())];
        let content = (bytes, what);
        match place {
            Place::SecretKey(key) => {
                pod.volumes.push(VolumePlan {
                    projected: false,
                    name: format!("planted-{n}"),
                    keys: vec![KeyPlan { name: key.into(), content: Ok(content) }],
                });
            }
            Place::Token => {
                let name = format!("kube-api-access-{}", rng.chars(LOWER, 5));
                let keys = vec![
                    KeyPlan { name: "token".into(), content: Ok(content) },
                    KeyPlan { name: "ca.crt".into(), content: Err((Kind::Cert, 0)) },
                    KeyPlan { name: "namespace".into(), content: Err((Kind::SecretText, 8)) },
                ];
                pod.volumes.push(VolumePlan { projected: true, name, keys });
            }
            Place::EmptyDirFile(name) => {
                let at = FileAt::EmptyDir(format!("secrets-{n}"), name.into());
                pod.files.push(FilePlan { at, content: Ok(content) });
            }
            Place::Inline(kind, snippet) => {
                // Any file of that kind: every empty-dir has an app log and a YAML or JSON
                // config, and every container a CRI log.
                let hosts: Vec<(usize, usize)> = pods
                    .iter()
                    .enumerate()
                    .flat_map(|(pi, pod)| {
                        pod.files.iter().enumerate().filter_map(move |(fi, f)| match &f.content {
                            Err(g) if g.kind == kind => Some((pi, fi)),
                            _ => None,
                        })
                    })
                    .collect();
                let (pi, fi) = *rng.pick(&hosts);
                if let Err(g) = &mut pods[pi].files[fi].content {
                    g.snippets.push(snippet);
                }
            }
        }
    }
}

/// Writes the planned tree under a fresh temp dir, through the node-tree builder.
fn write_tree(target: usize, now: i64, vals: &[SecretValue]) -> std::io::Result<Tree> {
    // A seed whose tree has the shape of the one this benchmark generated before it used
    // the crate's `Prng` (51 pods against 50, 822 files against 802, 252 MiB, the share of
    // each kind of content within 3 points), so its figures stay comparable.
    let mut rng = Prng::new(841);
    let mut pods = plan_pods(&mut rng, target);
    let mut plants = rule_plants(&mut rng, now);
    plants.extend(value_plants(&mut rng, vals));
    place(&mut rng, &mut pods, plants);

    let node = NodeTree::new();
    let mut w = Written::default();
    for p in &mut pods {
        let pod = node.pod(&p.uid);
        for v in std::mem::take(&mut p.volumes) {
            // kubelet's atomic writer: a timestamped dir, `..data` pointing at it, and one
            // `<key> → ..data/<key>` link per key.
            let ts = format!(
                "..2024_05_01_{:02}_{:02}_{:02}.{}",
                rng.range(0, 24),
                rng.range(0, 60),
                rng.range(0, 60),
                rng.range(100_000_000, 999_999_999)
            );
            let vol = match v.projected {
                true => pod.projected_volume_at(&v.name, &ts),
                false => pod.secret_volume_at(&v.name, &ts),
            };
            for k in v.keys {
                let doc = match k.content {
                    Ok((bytes, what)) => Doc::whole(bytes, what),
                    Err((kind, size)) => generate(&mut rng, kind, size, Vec::new()),
                };
                vol.key(&k.name, &doc.bytes);
                w.record(vol.visible(&k.name), doc);
            }
        }
        for f in std::mem::take(&mut p.files) {
            let doc = match f.content {
                Ok((bytes, what)) => Doc::whole(bytes, what),
                Err(g) => generate(&mut rng, g.kind, g.size, g.snippets),
            };
            let name = match &f.at {
                FileAt::PodDir(rel) => rel,
                FileAt::EmptyDir(_, name) | FileAt::Log(_, name) => name.as_str(),
            };
            // A `.gz` file (a rotated log, compressed as kubelet does) is written compressed;
            // offsets stay those of its content.
            let gz;
            let data = match name.ends_with(".gz") {
                true => {
                    gz = gzip(&doc.bytes)?;
                    &gz
                }
                false => &doc.bytes,
            };
            let path = match &f.at {
                FileAt::PodDir(rel) => pod.file(rel, data),
                FileAt::EmptyDir(vol, name) => pod.empty_dir_file(vol, name, data),
                FileAt::Log(ctr, file) => pod.log(p.namespace, &p.name, ctr, file, data),
            };
            w.record(path, doc);
        }
        for c in &p.containers {
            // Termination logs: empty files.
            pod.termination_log(c, &rng.hex(8), b"");
            w.files += 1;
        }
    }
    let Written { files, bytes, plants, segments, composition } = w;
    Ok(Tree { node, files, bytes, pods: pods.len(), plants, segments, composition })
}

fn gzip(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(bytes)?;
    gz.finish()
}

/// What [`write_tree`] wrote, file by file (the fields of [`Tree`] but the node).
#[derive(Default)]
struct Written {
    files: usize,
    bytes: u64,
    plants: Vec<Plant>,
    segments: HashMap<String, Vec<(u64, Kind)>>,
    composition: BTreeMap<Kind, u64>,
}

impl Written {
    /// Remembers a written file's plants and stretches under its node path.
    fn record(&mut self, node: String, doc: Doc) {
        self.files += 1;
        self.bytes += doc.bytes.len() as u64;
        let ends = doc.segments.iter().skip(1).map(|s| s.0).chain([doc.bytes.len() as u64]);
        for (&(start, kind), end) in doc.segments.iter().zip(ends) {
            *self.composition.entry(kind).or_default() += end - start;
        }
        for (offset, len, what) in doc.plants {
            self.plants.push(Plant { path: node.clone(), offset, len, what });
        }
        self.segments.insert(node, doc.segments);
    }
}

impl Tree {
    /// The kind of content at `offset` of the file at node path `path`.
    fn kind_at(&self, path: &str, offset: u64) -> Option<Kind> {
        let segs = self.segments.get(path)?;
        segs.iter().take_while(|s| s.0 <= offset).last().map(|s| s.1)
    }

    /// The generated line around `offset` of the file at node path `path`, escaped and
    /// cut to at most 160 characters (the tree holds generated content only).
    fn context(&self, path: &str, offset: u64, len: u64) -> String {
        let Ok(data) = std::fs::read(self.node.host(path)) else {
            return String::from("(unreadable)");
        };
        let (at, end) = (offset as usize, (offset + len) as usize);
        let lo = data[..at]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |p| p + 1)
            .max(at.saturating_sub(60));
        let hi = data[end..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(data.len(), |p| end + p)
            .min(end + 60);
        let mut s: String = data[lo..hi]
            .iter()
            .map(|&b| if b.is_ascii_graphic() || b == b' ' { b as char } else { '.' })
            .collect();
        if s.len() > 160 {
            s.truncate(160);
            s.push('…');
        }
        s
    }
}

// ---------------------------------------------------------------------------------------
// Measuring

/// One timed configuration.
struct Config<'a> {
    name: &'static str,
    threads: usize,
    searchers: Searchers<'a>,
}

/// The reference: walk the tree and read every regular file into one reused buffer.
fn read_all(root: &Path, buf: &mut Vec<u8>) -> std::io::Result<(u64, u64)> {
    let (mut files, mut bytes) = (0, 0);
    for e in walkdir::WalkDir::new(root).follow_links(false) {
        let e = e?;
        if e.file_type().is_file() {
            buf.clear();
            std::fs::File::open(e.path())?.read_to_end(buf)?;
            files += 1;
            bytes += buf.len() as u64;
        }
    }
    Ok((files, bytes))
}

fn gibs(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / (1u64 << 30) as f64 / d.as_secs_f64()
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs.get(xs.len() / 2).copied().unwrap_or(f64::NAN)
}

/// What identifies a finding across configurations.
fn keys<'a>(fs: impl Iterator<Item = &'a Finding>) -> Vec<(&'a str, u64, &'a str)> {
    fs.map(Finding::sort_key).collect()
}

fn overlaps(f: &Finding, p: &Plant) -> bool {
    f.offset < p.offset + p.len && p.offset < f.offset + f.length.max(1)
}

fn env_usize(name: &str, default: usize) -> Result<usize, String> {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .ok()
            .filter(|&n| n > 0)
            .ok_or(format!("{name}={v}: not a positive number")),
        Err(_) => Ok(default),
    }
}

/// The 1-minute load average: on a shared machine, what else was running.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Runs the benchmark; `Ok(false)` when a check failed.
fn run() -> anyhow::Result<bool> {
    let started = Instant::now();
    let load_before = load_average();
    let mib = env_usize("KRESIDUE_BENCH_MIB", DEFAULT_MIB).map_err(anyhow::Error::msg)?;
    let rounds = env_usize("KRESIDUE_BENCH_ROUNDS", ROUNDS).map_err(anyhow::Error::msg)?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs() as i64;

    let vals = values(VALUES);
    let t = Instant::now();
    let tree = write_tree(mib << 20, now, &vals)?;
    let rule_plants = tree.plants.iter().filter(|p| matches!(p.what, What::Rule(_))).count();
    println!(
        "tree: {} files, {:.1} MiB, {} pods, under {} (generated in {:.1} s)",
        tree.files,
        tree.bytes as f64 / (1 << 20) as f64,
        tree.pods,
        tree.node.base().display(),
        t.elapsed().as_secs_f64()
    );
    let composition: Vec<String> = tree
        .composition
        .iter()
        .map(|(k, b)| format!("{:?} {:.2}%", k, *b as f64 * 100.0 / tree.bytes as f64))
        .collect();
    println!("content: {}", composition.join(", "));
    println!(
        "planted: {rule_plants} rule-family secrets, {} fingerprinted values (of {VALUES})",
        tree.plants.len() - rule_plants
    );

    let t = Instant::now();
    let (set, stats) = FingerprintSet::build(&vals, "current", [0x5a; 32]);
    assert_eq!(stats.values, VALUES, "every generated value is fingerprinted");
    let fingerprints = Matcher::new(vec![set]);
    let no_fingerprints = Matcher::new(Vec::new());
    let built_fp = t.elapsed();
    let t = Instant::now();
    let rules = Rules::builtin(now);
    let built_rules = t.elapsed();
    let no_rules = Rules::none();
    println!(
        "searchers: {VALUES} fingerprinted values (max form {} B, built in {:.0} ms); {} built-in rules (overlap {} B, built in {:.1} ms)",
        fingerprints.max_len(),
        ms(built_fp),
        rules.specs().count(),
        rules.overlap(),
        ms(built_rules)
    );

    let root = RootDir::open(tree.node.root())?;
    let layout = Layout {
        kubelet_dir: PathBuf::from(tree.node.kubelet_dir()),
        pod_logs: PathBuf::from(POD_LOGS),
        ..Layout::defaults()
    };
    let mut configs = Vec::new();
    for threads in THREADS {
        for (name, matcher, rules) in [
            ("(a) fingerprints only", &fingerprints, &no_rules),
            ("(b) fingerprints + rules", &fingerprints, &rules),
            ("(c) rules only", &no_fingerprints, &rules),
        ] {
            configs.push(Config { name, threads, searchers: Searchers { matcher, rules } });
        }
    }
    println!(
        "scan: kubelet pods + pod logs {POD_LOGS}, chunk {} KiB; 1 warm-up round then {rounds} timed rounds, interleaved in rotating order, best time kept",
        DEFAULT_CHUNK >> 10
    );

    // Round 0 warms the page cache and is not timed. Slot `configs.len()` is the reference.
    let slots = configs.len() + 1;
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); slots];
    let mut results: Vec<Option<ScanResult>> = (0..configs.len()).map(|_| None).collect();
    let mut buf = Vec::new();
    let mut read = (0, 0);
    for round in 0..=rounds {
        for j in 0..slots {
            let slot = (j + round) % slots;
            let t = Instant::now();
            if slot == configs.len() {
                read = black_box(read_all(tree.node.root(), &mut buf)?);
            } else {
                let c = &configs[slot];
                let settings = ScanSettings {
                    layout: layout.clone(),
                    threads: c.threads,
                    chunk: DEFAULT_CHUNK,
                    max_file_size: None,
                    deadline: None,
                    state: None,
                    keep_state: false,
                };
                let walking = scan::Walking::start(root.clone(), settings.layout.clone());
                let found = scan::scan(&settings, walking, &c.searchers, &())?;
                results[slot] = Some(black_box(found));
            }
            let took = t.elapsed();
            if round > 0 {
                times[slot].push(took);
            }
        }
    }
    let best: Vec<Duration> =
        times.iter().map(|t| t.iter().copied().min().unwrap_or(Duration::MAX)).collect();
    let results: Vec<ScanResult> =
        results.into_iter().map(|r| r.expect("every configuration ran")).collect();
    let reference = best[configs.len()];
    let scanned = results[0].bytes;
    println!(
        "read-only reference: {} files, {} bytes; scans read {} files, {} bytes",
        read.0, read.1, results[0].files, scanned
    );

    println!();
    println!(
        "{:<26} {:>7} {:>9} {:>7} {:>8} {:>13} {:>9}",
        "config", "threads", "ms", "GiB/s", "x_vs_a", "x_vs_a_median", "x_vs_read"
    );
    println!(
        "{:<26} {:>7} {:>9.1} {:>7.2} {:>8} {:>13} {:>9.2}",
        "read-only reference",
        1,
        ms(reference),
        gibs(read.1, reference),
        "-",
        "-",
        1.0
    );
    let mut overheads = Vec::new();
    for (i, c) in configs.iter().enumerate() {
        let a = i - i % 3;
        let x = best[i].as_secs_f64() / best[a].as_secs_f64();
        let per_round: Vec<f64> = times[i]
            .iter()
            .zip(&times[a])
            .map(|(t, ta)| t.as_secs_f64() / ta.as_secs_f64())
            .collect();
        let med = median(per_round);
        println!(
            "{:<26} {:>7} {:>9.1} {:>7.2} {:>8.3} {:>13.3} {:>9.2}",
            c.name,
            c.threads,
            ms(best[i]),
            gibs(scanned, best[i]),
            x,
            med,
            best[i].as_secs_f64() / reference.as_secs_f64()
        );
        if i % 3 == 1 {
            overheads.push((c.threads, x - 1.0, med - 1.0));
        }
    }
    println!();
    for (threads, best_x, med_x) in &overheads {
        let verdict = if *best_x <= TARGET_OVERHEAD { "PASS" } else { "MISS" };
        println!(
            "target rules overhead <= {:.0}%: {:.1}% {verdict}   (threads {threads}; best times; median of per-round ratios {:.1}%)",
            TARGET_OVERHEAD * 100.0,
            best_x * 100.0,
            med_x * 100.0
        );
    }
    println!();

    // Checks on the last round's results.
    let mut ok = true;
    let b = &results[1];
    for (i, r) in results.iter().enumerate() {
        if !r.errors.is_empty() {
            ok = false;
            println!(
                "error: {} (threads {}) listed {} read errors, first: {:?}",
                configs[i].name,
                configs[i].threads,
                r.errors.len(),
                r.errors[0]
            );
        }
    }
    let is_rule = |f: &&Finding| f.matched.kind == MatchKind::Rule;
    let is_fp = |f: &&Finding| f.matched.kind == MatchKind::Fingerprint;
    let mut agree = vec![];
    for t in 0..THREADS.len() {
        let (a, bb, c) = (&results[3 * t], &results[3 * t + 1], &results[3 * t + 2]);
        agree.push((
            format!("(a) = fingerprint part of (b), threads {}", THREADS[t]),
            keys(a.findings.iter()) == keys(bb.findings.iter().filter(is_fp)),
        ));
        agree.push((
            format!("(c) = rule part of (b), threads {}", THREADS[t]),
            keys(c.findings.iter()) == keys(bb.findings.iter().filter(is_rule)),
        ));
        if t > 0 {
            agree.push((
                format!("(b) threads {} = (b) threads {}", THREADS[t], THREADS[0]),
                keys(bb.findings.iter()) == keys(b.findings.iter()),
            ));
        }
    }
    let disagree: Vec<&String> = agree.iter().filter(|a| !a.1).map(|a| &a.0).collect();
    if disagree.is_empty() {
        println!(
            "consistency: all {} comparisons agree ((a)/(c) vs (b), 1 vs 2 threads)",
            agree.len()
        );
    } else {
        ok = false;
        for d in disagree {
            println!("consistency: MISMATCH {d}");
        }
    }

    // Planted items in (b).
    let mut families: BTreeMap<String, (usize, usize, BTreeSet<String>)> = BTreeMap::new();
    let mut missed = Vec::new();
    for p in &tree.plants {
        let (family, found): (String, Vec<&Finding>) = match &p.what {
            What::Rule(fam) => (
                format!("rule family {fam}"),
                b.findings
                    .iter()
                    .filter(is_rule)
                    .filter(|f| f.path == p.path && overlaps(f, p))
                    .collect(),
            ),
            What::Value { secret, encoding } => (
                format!("fingerprinted value, {}", encoding.as_str()),
                b.findings
                    .iter()
                    .filter(is_fp)
                    .filter(|f| {
                        f.path == p.path
                            && f.matched.secret.as_ref() == Some(secret)
                            && f.matched.encoding == *encoding
                    })
                    .collect(),
            ),
        };
        let e = families.entry(family.clone()).or_default();
        e.0 += 1;
        if found.is_empty() {
            missed.push((family, p));
        } else {
            e.1 += 1;
            for f in found {
                e.2.insert(f.matched.rule.clone().unwrap_or_else(|| "fingerprint".into()));
            }
        }
    }
    println!("planted items found in (b):");
    for (family, (n, found, by)) in &families {
        let by: Vec<&str> = by.iter().map(String::as_str).collect();
        println!(
            "  {family:<40} {found:>3}/{n:<3} by {}",
            if by.is_empty() { "-".into() } else { by.join(", ") }
        );
    }
    ok &= missed.is_empty();
    for (family, p) in missed.iter().take(20) {
        println!("  MISSED {family}: {} at offset {} ({} bytes)", p.path, p.offset, p.len);
    }
    if missed.len() > 20 {
        println!("  … and {} more missed", missed.len() - 20);
    }

    // Rule findings in (b): planted or not.
    let mut per_rule: BTreeMap<&str, (usize, u64, usize, usize)> = BTreeMap::new();
    let mut others = Vec::new();
    for f in b.findings.iter().filter(is_rule) {
        let id = f.matched.rule.as_deref().unwrap_or("?");
        let planted = tree.plants.iter().any(|p| p.path == f.path && overlaps(f, p));
        let e = per_rule.entry(id).or_default();
        e.0 += 1;
        e.1 += f.count;
        if planted {
            e.2 += 1;
        } else {
            e.3 += 1;
            others.push(f);
        }
    }
    println!(
        "rule findings in (b), threads 1 ({} findings in all, {} fingerprint):",
        b.findings.len(),
        b.findings.iter().filter(is_fp).count()
    );
    println!(
        "  {:<40} {:>8} {:>11} {:>7} {:>5}",
        "rule", "findings", "occurrences", "planted", "other"
    );
    for (id, (n, occ, planted, other)) in &per_rule {
        println!("  {id:<40} {n:>8} {occ:>11} {planted:>7} {other:>5}");
    }
    let silent: Vec<&str> =
        rules.specs().map(|s| s.id).filter(|id| !per_rule.contains_key(id)).collect();
    println!("  no findings ({} rules): {}", silent.len(), silent.join(", "));
    if !others.is_empty() {
        let mut by_kind: BTreeMap<(&str, &str), usize> = BTreeMap::new();
        for f in &others {
            let kind = tree.kind_at(&f.path, f.offset).map_or("?", Kind::label);
            *by_kind.entry((f.matched.rule.as_deref().unwrap_or("?"), kind)).or_default() += 1;
        }
        println!("rule findings on ordinary generated content (not planted) in (b):");
        for ((rule, kind), n) in &by_kind {
            println!("  {rule:<40} {n:>5} in {kind}");
        }
        println!("  examples (generated text around the match):");
        for f in others.iter().take(12) {
            println!(
                "    {} {}@{}: {}",
                f.matched.rule.as_deref().unwrap_or("?"),
                f.path,
                f.offset,
                tree.context(&f.path, f.offset, f.length)
            );
        }
    } else {
        println!("rule findings on ordinary generated content (not planted) in (b): none");
    }
    println!();
    println!(
        "machine: {} CPUs; load average before {load_before}, after {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load_average()
    );
    println!(
        "command: cargo bench --bench scan   (KRESIDUE_BENCH_MIB={mib}, KRESIDUE_BENCH_ROUNDS={rounds}; total {:.1} s)",
        started.elapsed().as_secs_f64()
    );
    if !ok {
        eprintln!(
            "error: planted items missed, read errors, or configurations disagree (see above)"
        );
    }
    Ok(ok)
}
