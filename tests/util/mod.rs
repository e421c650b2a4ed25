//! The test harness: a node tree that speaks kubelet's layout ([`tree`], shared with the
//! benchmarks), fake secrets and the `kubectl get secrets -A -o json` text that carries
//! them, and `Kr`, the one way tests run the built binary. Random values come from the
//! crate's one generator, [`Prng`].
//!
//! Every run goes through [`Kr`], which checks, whatever the test is about, that no
//! guarded secret value (raw, base64, JSON-escaped) appears in stdout or stderr and that
//! nothing panicked or printed a backtrace. Every `scan` also digests the tree before and
//! after and fails the test if a single entry, mode, mtime, size or byte changed.
//!
//! Layout of a [`NodeTree`]: one temp dir holding `root/` (the node root passed to
//! `--root`), `outside/` (a sibling the scan must never read: targets of hostile symlinks)
//! and `work/` (kubectl JSON, fingerprint files, reports; not part of the digest).

pub mod containerd;
pub mod docker;
pub mod fuse;
pub mod podman;
pub mod tree;

pub use kresidue::prng::Prng;
pub use tree::{NodeTree, CURRENT_TS};

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::fmt::Write as _;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Map, Value};
use sha2::{Digest as _, Sha256};

/// Values shorter than this are not guarded in outputs: a 3-byte value such as `abc`
/// may well occur in a path or a message by chance.
const GUARD_MIN: usize = 8;

/// How long any run may take before it counts as hung (debug builds, 1 GiB sparse file).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(180);

// ---------------------------------------------------------------------------------------
// Random but reproducible fake values
// ---------------------------------------------------------------------------------------

/// Characters of fake secret values: letters, digits and a few symbols.
const SECRET_CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.!@";

/// Prefixes of real credential formats; a fake value never starts with one.
const CREDENTIAL_PREFIXES: &[&[u8]] =
    &[b"AKIA", b"ASIA", b"AIza", b"ghp_", b"gho_", b"ghs_", b"glpat", b"xox", b"sk-", b"eyJ"];

/// A random printable fake secret of length 16..=64, reproducible from `seed`.
///
/// Made of letters, digits and `-_.!@`; never starts like a real credential format.
pub fn fake_secret(seed: u64) -> Vec<u8> {
    let mut rng = Prng::new(seed);
    let len = 16 + rng.below(49);
    fake_from(&mut rng, len)
}

/// A fake secret of exactly `len` bytes.
pub fn fake_secret_len(seed: u64, len: usize) -> Vec<u8> {
    fake_from(&mut Prng::new(seed.wrapping_mul(31).wrapping_add(len as u64)), len)
}

fn fake_from(rng: &mut Prng, len: usize) -> Vec<u8> {
    loop {
        let v = rng.chars(SECRET_CHARS, len).into_bytes();
        if !CREDENTIAL_PREFIXES.iter().any(|p| v.starts_with(p)) {
            return v;
        }
    }
}

/// A fake secret of exactly `len` bytes (at least 16) holding `"` and `&` (and `<`, `>`,
/// a newline and a backslash when long enough), so its JSON-escaped form differs from it.
pub fn fake_secret_special(seed: u64, len: usize) -> Vec<u8> {
    assert!(len >= 16);
    let mut v = fake_secret_len(seed ^ 0xABCD, len);
    let specials: &[u8] = if len >= 24 { b"\"&<>\n\\" } else { b"\"&" };
    let step = len / (specials.len() + 1);
    for (i, c) in specials.iter().enumerate() {
        v[step * (i + 1)] = *c;
    }
    v
}

/// `len` bytes of text-like filler (lowercase words, spaces, newlines): it cannot hold a
/// fake secret by accident since those mix cases, digits and symbols.
pub fn filler(seed: u64, len: usize) -> Vec<u8> {
    let mut rng = Prng::new(seed ^ 0xF111);
    (0..len)
        .map(|_| match rng.below(16) {
            0 => b' ',
            1 if rng.below(4) == 0 => b'\n',
            _ => b'a' + rng.below(26) as u8,
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// Encodings
// ---------------------------------------------------------------------------------------

/// The three forms a value is searched in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Enc {
    /// The value's bytes.
    Raw,
    /// Standard padded base64 of the whole value.
    Base64,
    /// Go `encoding/json` string body (no quotes), HTML-safe.
    Json,
}

impl Enc {
    /// All encodings.
    pub const ALL: [Enc; 3] = [Enc::Raw, Enc::Base64, Enc::Json];

    /// The report's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Enc::Raw => "raw",
            Enc::Base64 => "base64",
            Enc::Json => "json-escaped",
        }
    }

    /// `v` in this encoding; `None` for JSON when it is the same as raw.
    pub fn encode(self, v: &[u8]) -> Option<Vec<u8>> {
        match self {
            Enc::Raw => Some(v.to_vec()),
            Enc::Base64 => Some(b64(v)),
            Enc::Json => Some(json_escape(v)).filter(|j| j != v),
        }
    }
}

/// `bytes` gzip-compressed, as a rotated log is.
pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// Standard padded base64.
pub fn b64(v: &[u8]) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD.encode(v).into_bytes()
}

/// The body of a JSON string as Go's `encoding/json` writes it (HTML-safe): `"` and `\`
/// backslashed, `\n` `\r` `\t` `\b` `\f` as such (Go 1.22+), other control chars and
/// `<` `>` `&` as `\u00XX`,
/// U+2028/U+2029 escaped, each invalid UTF-8 byte as `\ufffd`.
pub fn json_escape(v: &[u8]) -> Vec<u8> {
    let mut out = String::new();
    for chunk in v.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                '<' | '>' | '&' => {
                    let _ = write!(out, "\\u{:04x}", c as u32);
                }
                c if (c as u32) < 0x20 => {
                    let _ = write!(out, "\\u{:04x}", c as u32);
                }
                '\u{2028}' => out.push_str("\\u2028"),
                '\u{2029}' => out.push_str("\\u2029"),
                c => out.push(c),
            }
        }
        for _ in chunk.invalid() {
            out.push_str("\\ufffd");
        }
    }
    out.into_bytes()
}

/// Every start offset of `needle` in `hay`, overlapping occurrences included.
pub fn find_all(hay: &[u8], needle: &[u8]) -> Vec<usize> {
    if needle.is_empty() || needle.len() > hay.len() {
        return Vec::new();
    }
    (0..=hay.len() - needle.len()).filter(|&i| &hay[i..i + needle.len()] == needle).collect()
}

/// A Prometheus textfile, parsed by a Prometheus text parser.
pub fn scrape(text: &str) -> prometheus_parse::Scrape {
    prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned())))
        .expect("textfile parses")
}

/// The value of a gauge (or untyped) sample.
pub fn gauge(s: &prometheus_parse::Sample) -> f64 {
    match s.value {
        prometheus_parse::Value::Gauge(v) | prometheus_parse::Value::Untyped(v) => v,
        _ => panic!("{} is not a gauge", s.metric),
    }
}

/// Maximal runs of token-like bytes (`A-Za-z0-9+/=_.~-`) of at least 16 bytes that mix
/// letters and digits: the random parts of a sample (PEM lines, key bodies, token parts),
/// never the words around them.
pub fn random_runs(sample: &[u8]) -> Vec<&[u8]> {
    let tokenish = |c: &u8| c.is_ascii_alphanumeric() || b"+/=_.~-".contains(c);
    sample
        .split(|c| !tokenish(c))
        .filter(|run| {
            run.len() >= 16
                && run.iter().any(u8::is_ascii_digit)
                && run.iter().any(u8::is_ascii_alphabetic)
        })
        .collect()
}

/// Whether `needle` occurs in `hay`.
pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && memchr::memmem::find(hay, needle).is_some()
}

// ---------------------------------------------------------------------------------------
// Secrets and kubectl JSON
// ---------------------------------------------------------------------------------------

/// One Kubernetes Secret as `kubectl get secrets -o json` would show it.
#[derive(Clone, Debug)]
pub struct Secret {
    /// Namespace.
    pub ns: String,
    /// Name.
    pub name: String,
    /// `type` field, e.g. `Opaque`, `kubernetes.io/tls`.
    pub type_: String,
    /// `data`: key -> decoded value (written base64-encoded).
    pub data: Vec<(String, Vec<u8>)>,
    /// `stringData`: must be ignored by kresidue.
    pub string_data: Vec<(String, String)>,
}

impl Secret {
    /// A secret of any `type_`.
    pub fn new<V: AsRef<[u8]>>(ns: &str, name: &str, type_: &str, data: &[(&str, V)]) -> Self {
        Secret {
            ns: ns.into(),
            name: name.into(),
            type_: type_.into(),
            data: data.iter().map(|(k, v)| (k.to_string(), v.as_ref().to_vec())).collect(),
            string_data: Vec::new(),
        }
    }

    /// An `Opaque` secret.
    pub fn opaque<V: AsRef<[u8]>>(ns: &str, name: &str, data: &[(&str, V)]) -> Self {
        Self::new(ns, name, "Opaque", data)
    }

    /// Adds a `stringData` entry.
    pub fn with_string_data(mut self, key: &str, value: &str) -> Self {
        self.string_data.push((key.into(), value.into()));
        self
    }

    /// `<ns>/<name>` as findings name it.
    pub fn id(&self) -> String {
        format!("{}/{}", self.ns, self.name)
    }

    /// The decoded value of `key`.
    pub fn value(&self, key: &str) -> &[u8] {
        &self.data.iter().find(|(k, _)| k == key).unwrap_or_else(|| panic!("no key {key}")).1
    }

    /// A [`Planted`] for `key` of this secret.
    pub fn planted(&self, key: &str) -> Planted {
        Planted { secret: self.id(), key: key.into(), value: self.value(key).to_vec() }
    }

    /// The secret as one kubectl JSON object.
    pub fn to_json(&self) -> Value {
        let data: Map<String, Value> = self
            .data
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(String::from_utf8(b64(v)).unwrap())))
            .collect();
        let mut obj = json!({
            "apiVersion": "v1",
            "data": data,
            "kind": "Secret",
            "metadata": {
                "creationTimestamp": "2025-01-02T03:04:05Z",
                "name": self.name,
                "namespace": self.ns,
                "resourceVersion": "4242",
                "uid": "0b8c5a8e-5d1f-4c1e-9b3f-2f1f5d7c9a01",
            },
            "type": self.type_,
        });
        if !self.string_data.is_empty() {
            let sd: Map<String, Value> = self
                .string_data
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect();
            obj["stringData"] = Value::Object(sd);
        }
        obj
    }
}

/// A generated value (from `seed`) as the Secret `shop/db`, key `password`, guarded on
/// `tree` (no run may print it).
pub fn db_password(tree: &NodeTree, seed: u64) -> (String, [Secret; 1]) {
    let value = String::from_utf8(fake_secret(seed)).unwrap();
    let secrets = [Secret::opaque("shop", "db", &[("password", value.as_bytes())])];
    tree.guard_secrets(&secrets);
    (value, secrets)
}

/// `kubectl get secrets -A -o json` output: a `List` of the secrets.
pub fn kubectl_json(secrets: &[Secret]) -> Vec<u8> {
    let list = json!({
        "apiVersion": "v1",
        "items": secrets.iter().map(Secret::to_json).collect::<Vec<_>>(),
        "kind": "List",
        "metadata": { "resourceVersion": "" },
    });
    serde_json::to_vec_pretty(&list).unwrap()
}

/// `kubectl get secret NAME -o json` output: one `Secret` object.
pub fn kubectl_single(secret: &Secret) -> Vec<u8> {
    serde_json::to_vec_pretty(&secret.to_json()).unwrap()
}

/// One registry entry of a docker config.
#[derive(Clone, Debug)]
pub struct DockerAuth {
    /// Registry host, e.g. `registry.example.test`.
    pub registry: String,
    /// User name (not secret).
    pub username: Vec<u8>,
    /// Password.
    pub password: Vec<u8>,
    /// Identity token, if any.
    pub identitytoken: Option<Vec<u8>>,
}

impl DockerAuth {
    /// The `auth` field: base64 of `username:password`.
    pub fn auth(&self) -> Vec<u8> {
        let mut up = self.username.clone();
        up.push(b':');
        up.extend_from_slice(&self.password);
        b64(&up)
    }

    fn entry(&self) -> Value {
        let s = |v: &[u8]| String::from_utf8(v.to_vec()).unwrap();
        let mut e = json!({
            "username": s(&self.username),
            "password": s(&self.password),
            "auth": s(&self.auth()),
        });
        if let Some(t) = &self.identitytoken {
            e["identitytoken"] = Value::String(s(t));
        }
        e
    }
}

/// A `.dockerconfigjson` value: `{"auths":{REG:{...}}}`.
pub fn docker_config_json(auths: &[DockerAuth]) -> Vec<u8> {
    let m: Map<String, Value> = auths.iter().map(|a| (a.registry.clone(), a.entry())).collect();
    serde_json::to_vec(&json!({ "auths": m })).unwrap()
}

/// A legacy `.dockercfg` value: `{REG:{...}}`.
pub fn docker_cfg(auths: &[DockerAuth]) -> Vec<u8> {
    let m: Map<String, Value> = auths.iter().map(|a| (a.registry.clone(), a.entry())).collect();
    serde_json::to_vec(&Value::Object(m)).unwrap()
}

// ---------------------------------------------------------------------------------------
// The node tree: built in `tree` (shared with the benches), guarded and run here
// ---------------------------------------------------------------------------------------

impl NodeTree {
    /// Writes kubectl List JSON of `secrets` to `work/NAME` and guards every value.
    pub fn secrets_file(&self, name: &str, secrets: &[Secret]) -> PathBuf {
        self.guard_secrets(secrets);
        let p = self.work(name);
        fs::write(&p, kubectl_json(secrets)).unwrap();
        p
    }

    /// Guards every value of `secrets` (and every string inside a JSON value, such as a
    /// docker config's `auth` and `password`).
    pub fn guard_secrets(&self, secrets: &[Secret]) {
        for s in secrets {
            for (_, v) in &s.data {
                self.guard(v);
                if let Ok(j) = serde_json::from_slice::<Value>(v) {
                    json_leaves(&j, &mut |leaf| self.guard(leaf.as_bytes()));
                }
            }
            for (_, v) in &s.string_data {
                self.guard(v.as_bytes());
            }
        }
    }

    /// Adds a value that must never appear in any output of any run.
    pub fn guard(&self, v: &[u8]) {
        if v.len() >= GUARD_MIN {
            self.guards.borrow_mut().push(v.to_vec());
        }
    }

    /// A runner bound to this tree.
    pub fn kr(&self) -> Kr<'_> {
        Kr {
            tree: self,
            stdin: None,
            timeout: DEFAULT_TIMEOUT,
            cwd: None,
            measure_rss: false,
            env: Vec::new(),
            default_lock: false,
        }
    }

    /// `kresidue scan --root <root> --no-cri ARGS` (see [`Kr::scan`]).
    pub fn scan(&self, args: &[&str]) -> Out {
        self.kr().scan(args)
    }

    /// `kresidue ARGS` (see [`Kr::run`]).
    pub fn run(&self, args: &[&str]) -> Out {
        self.kr().run(args)
    }

    /// Runs `kresidue fingerprint SECRETS_FILE [EXTRA] -o work/NAME`; returns the file.
    pub fn fingerprint_file(&self, secrets_file: &Path, extra: &[&str], name: &str) -> PathBuf {
        let out = self.work(name);
        let mut args = vec!["fingerprint", path_arg(secrets_file)];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["-o", path_arg(&out)]);
        let r = self.run(&args);
        r.assert_code(0);
        assert!(out.exists(), "fingerprint -o did not create {}", out.display());
        out
    }

    /// Every entry under `root/` and `outside/`, by lstat, with a content hash.
    pub fn digest(&self) -> Digest {
        let mut entries = Vec::new();
        for d in ["root", "outside"] {
            walk_digest(self.base(), &self.base().join(d), &mut entries);
        }
        entries.sort();
        Digest(entries)
    }
}

fn json_leaves(v: &Value, f: &mut dyn FnMut(&str)) {
    match v {
        Value::String(s) => f(s),
        Value::Array(a) => a.iter().for_each(|x| json_leaves(x, f)),
        Value::Object(o) => o.values().for_each(|x| json_leaves(x, f)),
        _ => {}
    }
}

/// True when the tests run as root (mounts, `setpriv`, a real containerd need it).
pub fn is_root() -> bool {
    std::process::Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout == b"0\n")
}

/// The `$XDG_RUNTIME_DIR` of runs with the default run lock as another user than root:
/// one private dir (mode 0700) for every test, so runs on different trees
/// share it as they would share the real one. `None` as root, whose default locks are in
/// the machine's `/run/kresidue` (each named for its root, so tests never share one).
pub fn runtime_dir() -> Option<&'static Path> {
    static DIR: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    let dir = DIR.get_or_init(|| {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        if is_root() {
            return None;
        }
        // One for every run of the tests (a temp dir would outlive each: statics are
        // never dropped); its locks are removed when released.
        let uid = fs::metadata("/proc/self").unwrap().uid();
        let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("runtime-dir-{uid}"));
        match fs::DirBuilder::new().mode(0o700).create(&d) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => panic!("{e}"),
            _ => fs::set_permissions(&d, fs::Permissions::from_mode(0o700)).unwrap(),
        }
        Some(d)
    });
    dir.as_deref()
}

/// The default run lock of the node root `root` as the binary names it: `root-` and the
/// first 16 hex digits of the SHA-256 of the canonical root, in `/run/kresidue` as root,
/// else in `kresidue/` of [`runtime_dir`].
pub fn default_lock_of(root: &Path) -> PathBuf {
    let name = lock_name_of(root);
    match runtime_dir() {
        Some(dir) => dir.join("kresidue").join(name),
        None => Path::new("/run/kresidue").join(name),
    }
}

/// The file name of the default run lock of the node root `root` (see [`default_lock_of`]).
pub fn lock_name_of(root: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    let m = fs::metadata(root).unwrap();
    let digest = Sha256::digest(format!("{}:{}", m.dev(), m.ino()).as_bytes());
    format!("root-{}.lock", hex(&digest[..8]))
}

/// A path as a UTF-8 command-line argument (temp paths always are).
pub fn path_arg(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

// ---------------------------------------------------------------------------------------
// Digest: "the scan changed nothing"
// ---------------------------------------------------------------------------------------

/// One entry of a tree digest.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Entry {
    /// Path relative to the tree's base (`root/...` or `outside/...`), raw bytes.
    pub path: Vec<u8>,
    /// `dir`, `file`, `symlink`, `fifo`, `socket`, `char`, `block`.
    pub kind: &'static str,
    /// `st_mode`.
    pub mode: u32,
    /// `st_mtime`, seconds and nanoseconds.
    pub mtime: (i64, i64),
    /// `st_size`.
    pub size: u64,
    /// SHA-256 of the content (regular files, by data extent) or link target.
    pub sha256: String,
}

/// A sorted list of every entry of a tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Digest(pub Vec<Entry>);

impl Digest {
    /// The entries at or below the node path `node_path` (or, for `outside/…`, that
    /// path of the tree's base).
    pub fn under(&self, node_path: &str) -> Digest {
        let prefix = match node_path.strip_prefix("outside") {
            Some(_) => node_path.as_bytes().to_vec(),
            None => format!("root{node_path}").into_bytes(),
        };
        Digest(self.0.iter().filter(|e| e.path.starts_with(&prefix)).cloned().collect())
    }

    /// Panics, listing the differences, unless `after` equals `self`.
    pub fn assert_same(&self, after: &Digest, context: &str) {
        if self == after {
            return;
        }
        let a: BTreeSet<_> = self.0.iter().collect();
        let b: BTreeSet<_> = after.0.iter().collect();
        let mut msg = format!("the tree changed during `{context}`:\n");
        for e in a.difference(&b).take(10) {
            let _ = writeln!(msg, "  before: {} {e:?}", String::from_utf8_lossy(&e.path));
        }
        for e in b.difference(&a).take(10) {
            let _ = writeln!(msg, "  after:  {} {e:?}", String::from_utf8_lossy(&e.path));
        }
        panic!("{msg}");
    }
}

fn walk_digest(base: &Path, p: &Path, out: &mut Vec<Entry>) {
    let md = fs::symlink_metadata(p).unwrap();
    let ft = md.file_type();
    let kind = if ft.is_dir() {
        "dir"
    } else if ft.is_file() {
        "file"
    } else if ft.is_symlink() {
        "symlink"
    } else if ft.is_fifo() {
        "fifo"
    } else if ft.is_socket() {
        "socket"
    } else if ft.is_char_device() {
        "char"
    } else {
        "block"
    };
    let sha256 = match kind {
        "file" => hash_file(p),
        "symlink" => hex(&Sha256::digest(fs::read_link(p).unwrap().as_os_str().as_bytes())),
        _ => String::new(),
    };
    out.push(Entry {
        path: p.strip_prefix(base).unwrap().as_os_str().as_bytes().to_vec(),
        kind,
        mode: md.mode(),
        mtime: (md.mtime(), md.mtime_nsec()),
        size: md.size(),
        sha256,
    });
    if ft.is_dir() {
        for e in fs::read_dir(p).unwrap() {
            walk_digest(base, &e.unwrap().path(), out);
        }
    }
}

/// Hashes a regular file by data extent (SEEK_DATA/SEEK_HOLE), so a 1 GiB sparse file
/// costs only its data; falls back to the whole file where extents are not supported.
fn hash_file(p: &Path) -> String {
    use nix::unistd::{lseek, Whence};
    let f = fs::File::open(p).unwrap();
    let size = f.metadata().unwrap().len() as i64;
    let mut h = Sha256::new();
    let mut pos = 0i64;
    let mut extents = Vec::new();
    while pos < size {
        match lseek(&f, pos, Whence::SeekData) {
            Ok(start) => {
                let end = lseek(&f, start, Whence::SeekHole).unwrap_or(size);
                extents.push((start, end));
                pos = end;
            }
            Err(nix::errno::Errno::ENXIO) => break,
            Err(_) => {
                extents = vec![(0, size)];
                break;
            }
        }
    }
    // The content as read, a hole and zeros alike: each 4 KiB block that is not all
    // zeros, at its offset (the extents a filesystem reports change as reads bring an
    // unwritten extent's pages into the cache; the bytes do not).
    let mut buf = vec![0u8; 1 << 20];
    for (start, end) in extents {
        let mut off = start;
        while off < end {
            let want = ((end - off) as usize).min(buf.len());
            let n = f.read_at(&mut buf[..want], off as u64).unwrap();
            assert!(n > 0, "short read hashing {}", p.display());
            for (i, block) in buf[..n].chunks(4096).enumerate() {
                if block.iter().any(|&b| b != 0) {
                    h.update((off + 4096 * i as i64).to_le_bytes());
                    h.update(block);
                }
            }
            off += n as i64;
        }
    }
    h.update(size.to_le_bytes());
    hex(&h.finalize())
}

/// The output of `cmd`, which runs a copy of the binary the test just wrote: the copy's
/// write descriptor may live on a moment in a child another test forked meanwhile (until
/// that child execs), and exec then fails with ETXTBSY (exit 126): tried again then.
pub fn output_of_copy(cmd: &mut std::process::Command) -> std::process::Output {
    let mut tries = 0;
    loop {
        let out = cmd.output().unwrap();
        let busy = String::from_utf8_lossy(&out.stderr).contains("Text file busy");
        tries += 1;
        if !(busy && out.status.code() == Some(126) && tries < 50) {
            return out;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Lowercase hex.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

// ---------------------------------------------------------------------------------------
// Running the binary
// ---------------------------------------------------------------------------------------

/// A configured run of the `kresidue` binary. Every run asserts: no guarded value in any
/// form in stdout/stderr, no panic, no backtrace, finished before the timeout, and (for a
/// JSON report on stdout) findings sorted by path, then offset.
pub struct Kr<'a> {
    tree: &'a NodeTree,
    stdin: Option<Vec<u8>>,
    timeout: Duration,
    cwd: Option<PathBuf>,
    measure_rss: bool,
    env: Vec<(String, String)>,
    default_lock: bool,
}

/// What a run produced.
#[derive(Debug)]
pub struct Out {
    /// The command line (for messages).
    pub args: Vec<String>,
    /// Exit code.
    pub code: i32,
    /// Standard output.
    pub stdout: Vec<u8>,
    /// Standard error.
    pub stderr: Vec<u8>,
    /// stdout parsed as JSON when the run asked for JSON on stdout.
    pub json: Option<Value>,
    /// Peak RSS in KiB, when measured.
    pub peak_rss_kb: Option<u64>,
    /// Wall time.
    pub elapsed: Duration,
}

impl<'a> Kr<'a> {
    /// Feeds `bytes` on stdin (by default stdin is empty and closed).
    pub fn stdin(mut self, bytes: &[u8]) -> Self {
        self.stdin = Some(bytes.to_vec());
        self
    }

    /// Kills the run and fails the test after `t`.
    pub fn timeout(mut self, t: Duration) -> Self {
        self.timeout = t;
        self
    }

    /// Runs in directory `dir`.
    pub fn cwd(mut self, dir: &Path) -> Self {
        self.cwd = Some(dir.to_path_buf());
        self
    }

    /// Sets an environment variable for the run.
    pub fn env(mut self, k: &str, v: &str) -> Self {
        self.env.push((k.into(), v.into()));
        self
    }

    /// Runs with the default run lock, the node root's own, instead of the tree's
    /// `--lock` (see [`default_lock_of`]).
    pub fn default_lock(mut self) -> Self {
        self.default_lock = true;
        self
    }

    /// Records the peak RSS (`/usr/bin/time -v`, else `/proc/<pid>/status` VmHWM).
    pub fn measure_rss(mut self) -> Self {
        self.measure_rss = true;
        self
    }

    /// `kresidue scan --root <root> --no-cri ARGS`, asserting the tree is unchanged.
    pub fn scan(self, args: &[&str]) -> Out {
        self.scan_asking(&["--no-cri"], args)
    }

    /// `kresidue scan --root <root> CRI ARGS` (CRI: how to ask the runtime), asserting the
    /// tree is unchanged.
    pub fn scan_asking(self, cri: &[&str], args: &[&str]) -> Out {
        let tree = self.tree;
        let mut full = vec!["scan", "--root", tree.root_arg()];
        full.extend_from_slice(cri);
        full.extend_from_slice(args);
        let before = tree.digest();
        let out = self.run(&full);
        before.assert_same(&tree.digest(), &full.join(" "));
        out
    }

    /// `kresidue ARGS`.
    pub fn run(self, args: &[&str]) -> Out {
        let bin = assert_cmd::cargo::cargo_bin("kresidue");
        let time = Path::new("/usr/bin/time");
        let rss_file = self.tree.work(&format!("rss-{}.txt", std::process::id()));
        let use_time = self.measure_rss && time.exists();
        let mut cmd = if use_time {
            let mut c = assert_cmd::Command::new(time);
            c.arg("-v").arg("-o").arg(&rss_file).arg(&bin);
            c
        } else {
            assert_cmd::Command::cargo_bin("kresidue").unwrap()
        };
        // Each tree its own run lock: tests run in parallel.
        cmd.args(args)
            .env("RUST_BACKTRACE", "1")
            .env_remove("RUST_LOG")
            // The CPU kernels are a test's own choice (`env`), not the caller's.
            .env_remove("KRESIDUE_KERNEL");
        if self.default_lock {
            cmd.env_remove("KRESIDUE_LOCK");
            match runtime_dir() {
                Some(dir) => cmd.env("XDG_RUNTIME_DIR", dir),
                None => cmd.env_remove("XDG_RUNTIME_DIR"),
            };
        } else {
            cmd.env("KRESIDUE_LOCK", self.tree.work("kresidue.lock"));
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        if let Some(d) = &self.cwd {
            cmd.current_dir(d);
        }
        let start = Instant::now();
        let (status, stdout, stderr, mut peak) = if self.measure_rss && !use_time {
            run_polling_rss(&bin, args, &self)
        } else {
            cmd.write_stdin(self.stdin.clone().unwrap_or_default()).timeout(self.timeout);
            let o = cmd.output().expect("run kresidue");
            (o.status, o.stdout, o.stderr, None)
        };
        let elapsed = start.elapsed();
        if use_time {
            let t = fs::read_to_string(&rss_file).unwrap_or_default();
            let _ = fs::remove_file(&rss_file);
            peak = t
                .lines()
                .find_map(|l| l.trim().strip_prefix("Maximum resident set size (kbytes):"))
                .and_then(|n| n.trim().parse().ok());
        }
        let shown = args.join(" ");
        let code = status.code().unwrap_or_else(|| {
            panic!(
                "`kresidue {shown}` did not exit normally after {elapsed:?} (killed: timeout {:?}?)\nstderr: {}",
                self.timeout,
                String::from_utf8_lossy(&stderr)
            )
        });
        let out = Out {
            args: args.iter().map(|s| s.to_string()).collect(),
            code,
            json: None,
            stdout,
            stderr,
            peak_rss_kb: peak,
            elapsed,
        };
        out.assert_clean(&self.tree.guards.borrow());
        let wants_json = args.windows(2).any(|w| w == ["--format", "json"])
            && !args.iter().any(|a| *a == "-o" || *a == "--output");
        let json: Option<Value> = if wants_json && out.code != 2 {
            Some(serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
                panic!("`kresidue {shown}`: stdout is not JSON ({e}):\n{}", out.stdout_str())
            }))
        } else {
            None
        };
        if let Some(findings) = json.as_ref().and_then(|j| j["findings"].as_array()) {
            let order: Vec<(&str, u64)> = findings
                .iter()
                .map(|f| (f["path"].as_str().unwrap_or(""), f["offset"].as_u64().unwrap_or(0)))
                .collect();
            assert!(
                order.windows(2).all(|w| w[0] <= w[1]),
                "`kresidue {shown}`: findings are not sorted by path, then offset: {order:?}"
            );
        }
        Out { json, ..out }
    }
}

/// Spawns directly and samples VmHWM (used when `/usr/bin/time` is missing).
fn run_polling_rss(
    bin: &Path,
    args: &[&str],
    kr: &Kr<'_>,
) -> (std::process::ExitStatus, Vec<u8>, Vec<u8>, Option<u64>) {
    use std::io::Read;
    let mut cmd = std::process::Command::new(bin);
    cmd.args(args).env("RUST_BACKTRACE", "1").stdin(Stdio::null());
    cmd.env("KRESIDUE_LOCK", kr.tree.work("kresidue.lock"));
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    if let Some(d) = &kr.cwd {
        cmd.current_dir(d);
    }
    let mut child = cmd.spawn().unwrap();
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let t1 = std::thread::spawn(move || {
        let mut b = Vec::new();
        so.read_to_end(&mut b).map(|_| b).unwrap_or_default()
    });
    let t2 = std::thread::spawn(move || {
        let mut b = Vec::new();
        se.read_to_end(&mut b).map(|_| b).unwrap_or_default()
    });
    let start = Instant::now();
    let mut peak = 0u64;
    let status = loop {
        if let Ok(s) = fs::read_to_string(format!("/proc/{}/status", child.id())) {
            if let Some(kb) = s.lines().find_map(|l| l.strip_prefix("VmHWM:")) {
                let kb: u64 = kb.trim().trim_end_matches("kB").trim().parse().unwrap_or(0);
                peak = peak.max(kb);
            }
        }
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > kr.timeout {
            let _ = child.kill();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    (status, t1.join().unwrap(), t2.join().unwrap(), Some(peak))
}

impl Out {
    /// stdout as text (lossy).
    pub fn stdout_str(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// stderr as text (lossy).
    pub fn stderr_str(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }

    /// Panics (with stderr) unless the exit code is `code`.
    pub fn assert_code(&self, code: i32) -> &Self {
        assert_eq!(
            self.code,
            code,
            "`kresidue {}` exited {} (expected {code})\nstderr:\n{}\nstdout:\n{}",
            self.args.join(" "),
            self.code,
            self.stderr_str(),
            truncate(&self.stdout_str(), 4000)
        );
        self
    }

    /// Exit code 2 with exactly one non-empty line on stderr.
    pub fn assert_one_line_error(&self) -> &Self {
        self.assert_code(2);
        let err = self.stderr_str();
        let lines: Vec<&str> = err.trim_end_matches('\n').split('\n').collect();
        assert!(
            lines.len() == 1 && !lines[0].trim().is_empty(),
            "`kresidue {}`: expected exactly one line on stderr, got {}:\n{err}",
            self.args.join(" "),
            lines.len()
        );
        self
    }

    /// The parsed report (panics if the run did not print JSON).
    pub fn json(&self) -> &Value {
        self.json.as_ref().unwrap_or_else(|| panic!("no JSON for `{}`", self.args.join(" ")))
    }

    /// The report's findings.
    pub fn findings(&self) -> Vec<Finding> {
        findings_of(self.json())
    }

    /// Checks no guarded value, no panic and no backtrace in stdout or stderr.
    fn assert_clean(&self, guards: &[Vec<u8>]) {
        let shown = self.args.join(" ");
        for (name, stream) in [("stdout", &self.stdout), ("stderr", &self.stderr)] {
            let lower = String::from_utf8_lossy(stream).to_lowercase();
            for bad in ["panicked", "rust_backtrace", "backtrace"] {
                assert!(
                    !lower.contains(bad),
                    "`kresidue {shown}`: {name} mentions {bad:?}:\n{}",
                    truncate(&lower, 4000)
                );
            }
            for g in guards {
                for (form, bytes) in guard_forms(g) {
                    assert!(
                        !contains(stream, &bytes),
                        "`kresidue {shown}`: {name} contains the {form} form of a secret value \
                         (starting {:?})",
                        String::from_utf8_lossy(&g[..4])
                    );
                }
            }
        }
    }
}

/// The forms of a value that must never be printed.
pub fn guard_forms(v: &[u8]) -> Vec<(&'static str, Vec<u8>)> {
    let mut forms = vec![("raw", v.to_vec()), ("base64", b64(v)), ("json-escaped", json_escape(v))];
    if let Ok(s) = std::str::from_utf8(v) {
        let j = serde_json::to_string(s).unwrap();
        forms.push(("serde-json-escaped", j.as_bytes()[1..j.len() - 1].to_vec()));
    }
    forms
}

fn truncate(s: &str, n: usize) -> String {
    if s.len() <= n {
        s.to_string()
    } else {
        let mut end = n;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…[{} more bytes]", &s[..end], s.len() - end)
    }
}

// ---------------------------------------------------------------------------------------
// Findings
// ---------------------------------------------------------------------------------------

/// The identity of a finding: (path, offset, secret, key, encoding).
pub type Key = (String, u64, String, String, String);

/// One finding of a JSON report, read leniently (missing fields become `None`/"") so a
/// test checks what it is about; `report::json_report_schema` checks the shape strictly.
#[derive(Clone, Debug)]
pub struct Finding {
    /// `id`.
    pub id: Option<String>,
    /// `severity`.
    pub severity: String,
    /// `category`.
    pub category: String,
    /// `site`.
    pub site: String,
    /// `path` (node path).
    pub path: String,
    /// `offset`.
    pub offset: u64,
    /// `length`.
    pub length: Option<u64>,
    /// `stale`.
    pub stale: Option<bool>,
    /// `pod.uid`.
    pub pod_uid: Option<String>,
    /// `match.secret`.
    pub secret: String,
    /// `match.key`.
    pub key: String,
    /// `match.label`.
    pub label: String,
    /// `match.encoding`.
    pub encoding: String,
    /// `preview`.
    pub preview: String,
    /// The whole finding object.
    pub raw: Value,
}

impl Finding {
    /// (path, offset, secret, key, encoding).
    pub fn key(&self) -> Key {
        (
            self.path.clone(),
            self.offset,
            self.secret.clone(),
            self.key.clone(),
            self.encoding.clone(),
        )
    }
}

/// The findings of a report.
pub fn findings_of(report: &Value) -> Vec<Finding> {
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    report["findings"]
        .as_array()
        .unwrap_or_else(|| panic!("report has no findings array: {report}"))
        .iter()
        .map(|f| Finding {
            id: f["id"].as_str().map(str::to_string),
            severity: s(&f["severity"]),
            category: s(&f["category"]),
            site: s(&f["site"]),
            path: s(&f["path"]),
            offset: f["offset"].as_u64().unwrap_or(u64::MAX),
            length: f["length"].as_u64(),
            stale: f["stale"].as_bool(),
            pod_uid: f["pod"]["uid"].as_str().map(str::to_string),
            secret: s(&f["match"]["secret"]),
            key: s(&f["match"]["key"]),
            label: s(&f["match"]["label"]),
            encoding: s(&f["match"]["encoding"]),
            preview: s(&f["preview"]),
            raw: f.clone(),
        })
        .collect()
}

/// A value a test planted, and the secret it belongs to.
#[derive(Clone, Debug)]
pub struct Planted {
    /// `<ns>/<name>`.
    pub secret: String,
    /// Data key.
    pub key: String,
    /// The value.
    pub value: Vec<u8>,
}

/// What a naive substring search finds: every occurrence of every encoding of every
/// planted value in every file.
pub fn naive_matches(files: &[(String, Vec<u8>)], planted: &[Planted]) -> BTreeSet<Key> {
    let mut out = BTreeSet::new();
    for (path, content) in files {
        for p in planted {
            for enc in Enc::ALL {
                if let Some(form) = enc.encode(&p.value) {
                    for off in find_all(content, &form) {
                        out.insert((
                            path.clone(),
                            off as u64,
                            p.secret.clone(),
                            p.key.clone(),
                            enc.name().to_string(),
                        ));
                    }
                }
            }
        }
    }
    out
}

/// Panics, listing what is missing and what is unexpected, unless the fingerprint
/// findings are exactly `expected` (every occurrence a naive search finds) aggregated the
/// way reports aggregate them: one finding per (path, secret, key, encoding), at the first
/// offset, with `count` the number of occurrences. Rule findings are not compared here.
pub fn assert_findings(actual: &[Finding], expected: &BTreeSet<Key>, context: &str) {
    let mut grouped: BTreeMap<(String, String, String, String), (u64, u64)> = BTreeMap::new();
    for (path, offset, secret, key, enc) in expected {
        let e = grouped.entry((path.clone(), secret.clone(), key.clone(), enc.clone()));
        let slot = e.or_insert((*offset, 0));
        slot.0 = slot.0.min(*offset);
        slot.1 += 1;
    }
    let expected: BTreeSet<(Key, u64)> = grouped
        .into_iter()
        .map(|((path, secret, key, enc), (offset, count))| {
            ((path, offset, secret, key, enc), count)
        })
        .collect();
    let keys: Vec<(Key, u64)> = actual
        .iter()
        .filter(|f| f.raw["match"]["kind"] == "fingerprint")
        .map(|f| (f.key(), f.raw["count"].as_u64().unwrap_or(0)))
        .collect();
    let got: BTreeSet<(Key, u64)> = keys.iter().cloned().collect();
    let mut msg = String::new();
    if got.len() != keys.len() {
        let _ =
            writeln!(msg, "duplicate findings: {} findings, {} distinct", keys.len(), got.len());
    }
    for k in expected.difference(&got).take(20) {
        let _ = writeln!(msg, "  missing:    {k:?}");
    }
    for k in got.difference(&expected).take(20) {
        let _ = writeln!(msg, "  unexpected: {k:?}");
    }
    if !msg.is_empty() {
        panic!(
            "{context}: findings differ from expected ({} expected, {} found, {} missing, \
             {} unexpected)\n{msg}",
            expected.len(),
            keys.len(),
            expected.difference(&got).count(),
            got.difference(&expected).count()
        );
    }
}

/// Merges findings that became equal (path, secret, key, encoding) after a test rewrote
/// their keys: one finding at the first offset with the summed `count`.
pub fn merge_same_keys(findings: Vec<Finding>) -> Vec<Finding> {
    let mut out: Vec<Finding> = Vec::new();
    for f in findings {
        let same = |g: &&mut Finding| {
            (&g.path, &g.secret, &g.key, &g.encoding, &g.raw["match"]["kind"])
                == (&f.path, &f.secret, &f.key, &f.encoding, &f.raw["match"]["kind"])
        };
        match out.iter_mut().find(|g| same(g)) {
            Some(g) => {
                let count =
                    g.raw["count"].as_u64().unwrap_or(0) + f.raw["count"].as_u64().unwrap_or(0);
                g.raw["count"] = count.into();
                g.offset = g.offset.min(f.offset);
            }
            None => out.push(f),
        }
    }
    out
}

/// Findings as comparable JSON with `id` (and nothing else) removed.
pub fn without_ids(findings: &[Finding]) -> Vec<Value> {
    findings
        .iter()
        .map(|f| {
            let mut v = f.raw.clone();
            if let Some(o) = v.as_object_mut() {
                o.remove("id");
            }
            v
        })
        .collect()
}

/// The severities, most severe first.
pub const SEVERITIES: [&str; 5] = ["critical", "high", "medium", "low", "info"];

/// Rank of a severity (0 = critical); panics on an unknown name.
pub fn severity_rank(s: &str) -> usize {
    SEVERITIES.iter().position(|x| *x == s).unwrap_or_else(|| panic!("unknown severity {s:?}"))
}

/// `OsStr` from raw bytes (for non-UTF-8 file names).
pub fn os(bytes: &[u8]) -> &OsStr {
    OsStr::from_bytes(bytes)
}
