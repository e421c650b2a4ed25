//! Real Docker and Podman (Debian's), started by the tests in private node trees
//! (`util::docker`, `util::podman`), and the built binary run on what they leave. Each
//! value is generated and is its own Secret, so every finding says which case it came
//! from. For each runtime, with busybox-static images built here (no network):
//! - a value in a container's env (`-e DB=…`): running, its record is `env-persisted`, the
//!   container named and live; exited, `dead-container` and not live; removed, nothing is
//!   attributed to it;
//! - a value written into a container's writable layer: `container-layer` (running),
//!   `dead-container` (exited);
//! - a value baked into an image by a Dockerfile's `RUN`: `image-layer`, named after the
//!   image; a `--build-arg` and an `ENV`: `image-config`, named after the image;
//! - a value printed by a container: its log (Docker's json-file, Podman's k8s-file
//!   `ctr.log`), site `runtime-log` (no pod), category `pod-log`;
//! - a value in a named volume: site `runtime-volume`;
//! - a value given to a container beside its env (issue 46 break 8): Docker's splunk
//!   logging driver's token, in `hostconfig.json`; a Podman secret, in Podman's secret
//!   store (no container's, `other`) and in the container's `userdata/secrets/`; both the
//!   made (never started) container's, `env-persisted`;
//! - a data root moved by the runtime's own config (`/etc/docker/daemon.json`
//!   `data-root`, `/etc/containers/storage.conf` `graphroot`), found without a flag;
//! - Docker's API socket given as `--cri`: not a CRI endpoint, said in one line, at once,
//!   in at most two connections.
//!
//! Every expectation of a test is checked and the failures are listed together (a failed
//! one does not hide the next). Needs root and the runtimes (`.ci/run` installs them and
//! sets `KRESIDUE_REAL_RUNTIMES=1`, which makes a missing one a failure); without that
//! variable a test whose runtime is missing says it is skipped and passes.

use std::io::Read as _;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::docker::{self, Dockerd, BASE};
use crate::util::podman::{self, Podman};
use crate::util::*;

/// The image the tests build `FROM` [`BASE`].
const BUILT: &str = "localhost/kresidue-built:1";

/// How long one scan may take (a debug build over a few runtime trees).
const SCAN: Duration = Duration::from_secs(120);

/// What a finding says of its place and owner (never the value).
#[derive(Clone, Debug)]
struct Row {
    site: String,
    category: String,
    severity: String,
    path: String,
    container_id: Option<String>,
    container_name: Option<String>,
    container_live: Option<bool>,
    container_runtime: Option<String>,
    images: Vec<String>,
    pod_uid: Option<String>,
    stale: bool,
}

impl std::fmt::Display for Row {
    /// `site category severity path container(id name live runtime) images pod stale`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let o = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
        let live = self.container_live.map_or("-".into(), |l| l.to_string());
        write!(
            f,
            "{} {} {} {} container(id {} name {} live {live} runtime {}) images {:?} pod {}{}",
            self.site,
            self.category,
            self.severity,
            self.path,
            o(&self.container_id),
            o(&self.container_name),
            o(&self.container_runtime),
            self.images,
            o(&self.pod_uid),
            if self.stale { " stale" } else { "" }
        )
    }
}

/// Rows one a line, for failure messages.
fn listed(rows: &[Row]) -> String {
    if rows.is_empty() {
        return "    (no finding)".into();
    }
    rows.iter().map(|r| format!("    {r}")).collect::<Vec<_>>().join("\n")
}

/// The findings of Secret `secret` in `report`.
fn rows(report: &Value, secret: &str) -> Vec<Row> {
    let s = |v: &Value| v.as_str().map(str::to_owned);
    report["findings"]
        .as_array()
        .unwrap_or_else(|| panic!("no findings array: {report}"))
        .iter()
        .filter(|f| f["match"]["secret"] == secret)
        .map(|f| Row {
            site: s(&f["site"]).unwrap_or_default(),
            category: s(&f["category"]).unwrap_or_default(),
            severity: s(&f["severity"]).unwrap_or_default(),
            path: s(&f["path"]).unwrap_or_default(),
            container_id: s(&f["container"]["id"]),
            container_name: s(&f["container"]["name"]),
            container_live: f["container"]["live"].as_bool(),
            container_runtime: s(&f["container"]["runtime"]),
            images: f["images"]
                .as_array()
                .map(|a| a.iter().filter_map(|n| n.as_str().map(str::to_owned)).collect())
                .unwrap_or_default(),
            pod_uid: s(&f["pod"]["uid"]),
            stale: f["stale"].as_bool().unwrap_or(false),
        })
        .collect()
}

/// A finding a case expects: every field given must hold.
#[derive(Clone, Debug, Default)]
struct Want<'a> {
    site: &'a str,
    category: &'a str,
    /// The path starts with it (a node path).
    under: &'a str,
    /// The path ends with it.
    ends: String,
    id: Option<&'a str>,
    name: Option<&'a str>,
    /// `container.live`.
    live: Option<bool>,
    /// `container.runtime`.
    runtime: Option<&'a str>,
    /// An image `images` names.
    image: Option<&'a str>,
    /// No pod: the runtime's own log of a container no kubelet made.
    no_pod: bool,
}

impl std::fmt::Display for Want<'_> {
    /// The fields given.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "site {} category {} path {}*{}",
            self.site, self.category, self.under, self.ends
        )?;
        for (k, v) in [
            ("container.id", self.id),
            ("container.name", self.name),
            ("container.runtime", self.runtime),
            ("images has", self.image),
        ] {
            if let Some(v) = v {
                write!(f, " {k} {v}")?;
            }
        }
        if let Some(l) = self.live {
            write!(f, " container.live {l}")?;
        }
        if self.no_pod {
            write!(f, " no pod")?;
        }
        Ok(())
    }
}

impl Want<'_> {
    fn matches(&self, r: &Row) -> bool {
        r.site == self.site
            && r.category == self.category
            && r.path.starts_with(self.under)
            && r.path.ends_with(&self.ends)
            && self.id.is_none_or(|id| r.container_id.as_deref() == Some(id))
            && self.name.is_none_or(|n| r.container_name.as_deref() == Some(n))
            && self.live.is_none_or(|l| r.container_live == Some(l))
            && self.runtime.is_none_or(|rt| r.container_runtime.as_deref() == Some(rt))
            && self.image.is_none_or(|i| r.images.iter().any(|n| n == i))
            && (!self.no_pod || r.pod_uid.is_none())
    }
}

/// A test's expectations, all checked; the failures listed together at the end.
struct Checks {
    test: &'static str,
    started: Instant,
    done: usize,
    failed: Vec<String>,
}

impl Checks {
    fn new(test: &'static str) -> Checks {
        Checks { test, started: Instant::now(), done: 0, failed: Vec::new() }
    }

    fn check(&mut self, case: &str, ok: bool, detail: impl FnOnce() -> String) {
        self.done += 1;
        if !ok {
            self.failed.push(format!("{case}: {}", detail()));
        }
    }

    /// Some finding of `secret` is `want`.
    fn want(&mut self, case: &str, report: &Value, secret: &str, want: Want) {
        let found = rows(report, secret);
        let ok = found.iter().any(|r| want.matches(r));
        self.check(case, ok, || {
            format!("expected {want}\n  the product gave for {secret}:\n{}", listed(&found))
        });
    }

    /// Lists every failure and panics if there was one.
    // The summary is for the person running the tests.
    #[allow(clippy::print_stderr)]
    fn finish(self) {
        let took = self.started.elapsed();
        eprintln!(
            "{}: {} checks, {} failed, took {took:.1?}",
            self.test,
            self.done,
            self.failed.len()
        );
        assert!(
            self.failed.is_empty(),
            "{}: {} of {} checks failed (took {took:.1?}):\n\n{}",
            self.test,
            self.failed.len(),
            self.done,
            self.failed.join("\n\n")
        );
    }
}

/// What the tests need of a runtime.
trait Runtime {
    /// Its name in `container.runtime`.
    const NAME: &'static str;
    /// The site of its records and layers.
    const SITE: &'static str;
    /// The dir of its overlay layers under the data root.
    const LAYERS: &'static str;
    /// The flag naming its data root.
    const ROOT_FLAG: &'static str;
    fn node(&self) -> PathBuf;
    /// Its data root, as a node path.
    fn data_root(&self) -> &str;
    /// The CLI with `args`, which must succeed; stdout trimmed.
    fn cli(&self, args: &[&str]) -> String;
    /// `run --network none …` with `args`; stdout trimmed.
    fn run(&self, args: &[&str]) -> String;
    fn import_base(&self);
    fn build(&self, tag: &str, dockerfile: &str, build_args: &[(&str, &str)]) -> String;
    /// The end of the path of container `id`'s record with its env.
    fn config(id: &str) -> String;
    /// The end of the path of container `id`'s log.
    fn log(id: &str) -> String;
    /// The storage driver in use.
    fn driver(&self) -> &'static str;
    /// Gives `value` to a container made (not started) for it, as the runtime keeps what
    /// it is given beside a container's env (Docker: a logging driver's token, in
    /// `hostconfig.json`; Podman: a secret, in its secret store and copied into the
    /// container's `userdata/`): the container's id, and where the value is expected
    /// (the path's end, site, category, and whether the finding is the container's).
    fn keep(&self, value: &str) -> (String, Vec<Kept>);
}

/// A place [`Runtime::keep`] expects its value: path end, site, category, the container's.
type Kept = (&'static str, &'static str, &'static str, bool);

impl Runtime for Dockerd {
    const NAME: &'static str = "docker";
    const SITE: &'static str = "docker-storage";
    const LAYERS: &'static str = "overlay2";
    const ROOT_FLAG: &'static str = "--docker-root";
    fn node(&self) -> PathBuf {
        Dockerd::node(self)
    }
    fn data_root(&self) -> &str {
        Dockerd::data_root(self)
    }
    fn cli(&self, args: &[&str]) -> String {
        self.must(args)
    }
    fn run(&self, args: &[&str]) -> String {
        let mut all = vec!["run", "--network", "none"];
        all.extend(args);
        self.must(&all)
    }
    fn import_base(&self) {
        Dockerd::import_base(self)
    }
    fn build(&self, tag: &str, dockerfile: &str, build_args: &[(&str, &str)]) -> String {
        Dockerd::build(self, tag, dockerfile, build_args)
    }
    fn config(id: &str) -> String {
        format!("/containers/{id}/config.v2.json")
    }
    fn log(id: &str) -> String {
        format!("/containers/{id}/{id}-json.log")
    }
    fn driver(&self) -> &'static str {
        self.driver
    }
    fn keep(&self, value: &str) -> (String, Vec<Kept>) {
        let token = format!("splunk-token={value}");
        let splunk = ["--log-driver", "splunk", "--log-opt", &token];
        let url = ["--log-opt", "splunk-url=http://127.0.0.1:9"];
        let mut args = vec!["create", "--network", "none", "--name", "kr-kept"];
        args.extend(splunk.into_iter().chain(url).chain([BASE, "true"]));
        let id = self.must(&args);
        (id, vec![("/hostconfig.json", "docker-storage", "env-persisted", true)])
    }
}

impl Runtime for Podman {
    const NAME: &'static str = "podman";
    const SITE: &'static str = "containers-storage";
    const LAYERS: &'static str = "overlay";
    const ROOT_FLAG: &'static str = "--containers-storage-root";
    fn node(&self) -> PathBuf {
        Podman::node(self)
    }
    fn data_root(&self) -> &str {
        self.graph_root()
    }
    fn cli(&self, args: &[&str]) -> String {
        self.must(args)
    }
    fn run(&self, args: &[&str]) -> String {
        Podman::run(self, args)
    }
    fn import_base(&self) {
        Podman::import_base(self)
    }
    fn build(&self, tag: &str, dockerfile: &str, build_args: &[(&str, &str)]) -> String {
        Podman::build(self, tag, dockerfile, build_args)
    }
    fn config(id: &str) -> String {
        format!("/overlay-containers/{id}/userdata/config.json")
    }
    fn log(id: &str) -> String {
        format!("/overlay-containers/{id}/userdata/ctr.log")
    }
    fn driver(&self) -> &'static str {
        self.driver
    }
    fn keep(&self, value: &str) -> (String, Vec<Kept>) {
        let file = self.scratch("kept").join("value");
        std::fs::write(&file, value).unwrap();
        self.must(&["secret", "create", "kr-kept", path_arg(&file)]);
        let args = ["create", "--network", "none", "--secret", "kr-kept", "--name", "kr-kept"];
        let id = self.must(&[&args[..], &[BASE, "true"]].concat());
        let store = "/secrets/filedriver/secretsdata.json";
        // Podman 4 copies it to `userdata/secrets/`, Podman 5 to `userdata/run/secrets/`.
        let copy = "/secrets/kr-kept";
        let cs = "containers-storage";
        (id, vec![(store, cs, "other", false), (copy, cs, "env-persisted", true)])
    }
}

/// The generated values of a test, each its own Secret `rt/<case>` (key `v`).
struct Values {
    cases: Vec<(&'static str, String)>,
}

impl Values {
    fn new(seed: u64, cases: &[&'static str]) -> Values {
        let cases = cases
            .iter()
            .enumerate()
            .map(|(i, c)| (*c, String::from_utf8(fake_secret(seed + i as u64)).unwrap()))
            .collect();
        Values { cases }
    }

    fn get(&self, case: &str) -> &str {
        &self.cases.iter().find(|(c, _)| *c == case).unwrap().1
    }

    /// The kubectl JSON of every value, written to `tree`'s work dir; every value guarded.
    fn secrets(&self, tree: &NodeTree) -> PathBuf {
        let secrets: Vec<Secret> = self
            .cases
            .iter()
            .map(|(c, v)| Secret::opaque("rt", c, &[("v", v.as_bytes())]))
            .collect();
        tree.secrets_file("secrets.json", &secrets)
    }
}

/// The Secret a case's value is.
fn secret(case: &str) -> String {
    format!("rt/{case}")
}

/// `sh -c` text that writes `value` to `file` (printf: a value may start with `-`).
fn write_to(value: &str, file: &str) -> String {
    format!("printf '%s\\n' '{value}' > {file}")
}

/// `sh -c` text that prints `value`.
fn print(value: &str) -> String {
    format!("printf '%s\\n' '{value}'")
}

/// Waits until `done`, at most 30 s; `what` when it never is.
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let t = Instant::now();
    while !done() {
        assert!(t.elapsed() < Duration::from_secs(30), "{what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `kresidue scan --root <node> --no-cri --secrets FILE --format json EXTRA`; the report.
/// Exit 1 (findings) expected.
fn scan(tree: &NodeTree, node: &Path, secrets: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["scan", "--root", path_arg(node), "--no-cri", "--secrets"];
    args.extend([path_arg(secrets), "--format", "json"]);
    args.extend(extra);
    let out = tree.kr().timeout(SCAN).run(&args);
    out.assert_code(1);
    out.json().clone()
}

const CASES: [&str; 12] = [
    "env-running",
    "layer-running",
    "log-running",
    "env-exited",
    "layer-exited",
    "log-exited",
    "env-removed",
    "volume",
    "baked",
    "build-arg",
    "image-env",
    "kept",
];

/// Cases 1 to 6 of the module doc on runtime `rt`, scanned with its data root named by
/// its flag.
fn leftovers<R: Runtime>(rt: &R, seed: u64, checks: &mut Checks) {
    let v = Values::new(seed, &CASES);
    let tree = NodeTree::new();
    let secrets = v.secrets(&tree);
    rt.import_base();

    // Running: env, a file in its writable layer, a line on stdout; then it sleeps.
    let script = format!(
        "{}; {}; exec sleep 3600",
        write_to(v.get("layer-running"), "/out.txt"),
        print(v.get("log-running"))
    );
    let env = format!("DB={}", v.get("env-running"));
    let running = rt.run(&["-d", "--name", "kr-running", "-e", &env, BASE, "sh", "-c", &script]);
    // The line is printed after the file is written.
    wait_for("the running container prints its line", || {
        rt.cli(&["logs", &running]).contains(v.get("log-running"))
    });

    // Exited: the same, then it ends.
    let script =
        format!("{}; {}", write_to(v.get("layer-exited"), "/out.txt"), print(v.get("log-exited")));
    let env = format!("DB={}", v.get("env-exited"));
    rt.run(&["--name", "kr-exited", "-e", &env, BASE, "sh", "-c", &script]);
    let exited = rt.cli(&["inspect", "--format", "{{.Id}}", "kr-exited"]);
    wait_for("the exited container's line is in its log", || {
        rt.cli(&["logs", &exited]).contains(v.get("log-exited"))
    });

    // Removed: ran, ended, removed.
    let env = format!("DB={}", v.get("env-removed"));
    let removed = rt.run(&["-d", "--name", "kr-removed", "-e", &env, BASE, "true"]);
    rt.cli(&["wait", &removed]);
    rt.cli(&["rm", &removed]);

    // A named volume, written by a container that is gone.
    rt.cli(&["volume", "create", "vol1"]);
    let script = write_to(v.get("volume"), "/data/secret.txt");
    rt.run(&["--rm", "-v", "vol1:/data", BASE, "sh", "-c", &script]);

    // An image: a value baked by RUN, a build arg, an ENV.
    let dockerfile = format!(
        "FROM {BASE}\nARG TOKEN\nENV APIKEY={}\nRUN {}\n",
        v.get("image-env"),
        write_to(v.get("baked"), "/baked")
    );
    rt.build(BUILT, &dockerfile, &[("TOKEN", v.get("build-arg"))]);
    let (kept_id, kept) = rt.keep(v.get("kept"));

    let root = rt.data_root().to_owned();
    let report = scan(&tree, &rt.node(), &secrets, &[R::ROOT_FLAG, &root]);
    let layers = format!("{root}/{}/", R::LAYERS);
    let container = |category, ends: String, id, name, live| Want {
        site: R::SITE,
        category,
        under: &root,
        ends,
        id: Some(id),
        name: Some(name),
        live: Some(live),
        runtime: Some(R::NAME),
        ..Default::default()
    };
    let (run_id, run_name) = (running.as_str(), "kr-running");
    let (exit_id, exit_name) = (exited.as_str(), "kr-exited");
    let cases = [
        ("env-running", container("env-persisted", R::config(run_id), run_id, run_name, true)),
        ("env-exited", container("dead-container", R::config(exit_id), exit_id, exit_name, false)),
        (
            "layer-running",
            Want {
                under: &layers,
                ..container("container-layer", "/diff/out.txt".into(), run_id, run_name, true)
            },
        ),
        (
            "layer-exited",
            Want {
                under: &layers,
                ..container("dead-container", "/diff/out.txt".into(), exit_id, exit_name, false)
            },
        ),
        (
            "log-running",
            Want {
                site: "runtime-log",
                no_pod: true,
                ..container("pod-log", R::log(run_id), run_id, run_name, true)
            },
        ),
        (
            "log-exited",
            Want {
                site: "runtime-log",
                no_pod: true,
                ..container("pod-log", R::log(exit_id), exit_id, exit_name, false)
            },
        ),
        (
            "volume",
            Want {
                site: "runtime-volume",
                category: "other",
                under: &root,
                ends: "/volumes/vol1/_data/secret.txt".into(),
                ..Default::default()
            },
        ),
        (
            "baked",
            Want {
                site: R::SITE,
                category: "image-layer",
                under: &layers,
                ends: "/diff/baked".into(),
                image: Some(BUILT),
                ..Default::default()
            },
        ),
        (
            "build-arg",
            Want {
                site: R::SITE,
                category: "image-config",
                under: &root,
                image: Some(BUILT),
                ..Default::default()
            },
        ),
        (
            "image-env",
            Want {
                site: R::SITE,
                category: "image-config",
                under: &root,
                image: Some(BUILT),
                ..Default::default()
            },
        ),
    ];
    for (case, want) in cases {
        checks.want(case, &report, &secret(case), want);
    }
    // A running container's `shm` is a tmpfs mounted in its dir: not read, not listed.
    let unread = report["unread_mounts"].as_array().cloned().unwrap_or_default();
    checks.check("unread mounts", unread.is_empty(), || format!("{unread:?}"));
    for (ends, site, category, owned) in kept {
        let mut want =
            Want { site, ..container(category, ends.into(), &kept_id, "kr-kept", false) };
        // Made, never started: may start any time, its liveness is not told.
        want.live = None;
        if !owned {
            (want.id, want.name, want.runtime) = (None, None, None);
        }
        checks.want("kept", &report, &secret("kept"), want);
    }

    // Removed: nothing of it is attributed to it (whatever is left is reported for what it
    // is, most likely nothing).
    let left = rows(&report, &secret("env-removed"));
    let attributed = left.iter().any(|r| {
        r.container_id.as_deref() == Some(removed.as_str())
            || r.container_name.as_deref() == Some("kr-removed")
    });
    checks.check("env-removed", !attributed, || {
        format!("attributed to the removed container {removed}:\n{}", listed(&left))
    });
    checks.check(&format!("storage driver {}", rt.driver()), rt.driver() != "vfs", || {
        "overlay cannot be mounted here: the runtime used vfs, which kresidue does not read as layers".into()
    });
}

/// Case 7 of the module doc: `config` (a node path) names `data_root`, where the runtime
/// keeps its data; a scan without the flag finds a running container's env and layer there.
fn moved_root<R: Runtime>(rt: &R, config: &str, text: &str, seed: u64, checks: &mut Checks) {
    let v = Values::new(seed, &["env-running", "layer-running"]);
    let tree = NodeTree::new();
    let secrets = v.secrets(&tree);
    let conf = rt.node().join(config.trim_start_matches('/'));
    std::fs::create_dir_all(conf.parent().unwrap()).unwrap();
    std::fs::write(&conf, text).unwrap();
    rt.import_base();
    let script =
        format!("{}; echo ready; exec sleep 3600", write_to(v.get("layer-running"), "/out.txt"));
    let env = format!("DB={}", v.get("env-running"));
    let id = rt.run(&["-d", "--name", "kr-moved", "-e", &env, BASE, "sh", "-c", &script]);
    wait_for("the container is ready", || rt.cli(&["logs", &id]).contains("ready"));
    let report = scan(&tree, &rt.node(), &secrets, &[]);
    let root = rt.data_root();
    let layers = format!("{root}/{}/", R::LAYERS);
    let running = Want {
        site: R::SITE,
        id: Some(&id),
        name: Some("kr-moved"),
        live: Some(true),
        runtime: Some(R::NAME),
        ..Default::default()
    };
    checks.want(
        &format!("env-running under {root} as {config} names it"),
        &report,
        &secret("env-running"),
        Want { category: "env-persisted", under: root, ends: R::config(&id), ..running.clone() },
    );
    checks.want(
        &format!("layer-running under {root} as {config} names it"),
        &report,
        &secret("layer-running"),
        Want {
            category: "container-layer",
            under: &layers,
            ends: "/diff/out.txt".into(),
            ..running.clone()
        },
    );
}

#[test]
fn docker_leftovers() {
    if !docker::available("docker_leftovers") {
        return;
    }
    let mut checks = Checks::new("docker_leftovers");
    let d = Dockerd::start("/var/lib/docker");
    leftovers(&d, 7100, &mut checks);
    drop(d);
    checks.finish();
}

#[test]
fn docker_data_root_named_by_daemon_json() {
    if !docker::available("docker_data_root_named_by_daemon_json") {
        return;
    }
    let mut checks = Checks::new("docker_data_root_named_by_daemon_json");
    let d = Dockerd::start("/data/docker");
    let json = r#"{"data-root": "/data/docker"}"#;
    moved_root(&d, "/etc/docker/daemon.json", json, 7200, &mut checks);
    drop(d);
    checks.finish();
}

#[test]
fn podman_leftovers() {
    if !podman::available("podman_leftovers") {
        return;
    }
    let mut checks = Checks::new("podman_leftovers");
    let p = Podman::new("/var/lib/containers/storage");
    leftovers(&p, 7300, &mut checks);
    drop(p);
    checks.finish();
}

#[test]
fn podman_graphroot_named_by_storage_conf() {
    if !podman::available("podman_graphroot_named_by_storage_conf") {
        return;
    }
    let mut checks = Checks::new("podman_graphroot_named_by_storage_conf");
    let p = Podman::new("/data/containers");
    let conf = "[storage]\ndriver = \"overlay\"\ngraphroot = \"/data/containers\"\n";
    moved_root(&p, "/etc/containers/storage.conf", conf, 7400, &mut checks);
    drop(p);
    checks.finish();
}

/// A unix socket at `path` that forwards every connection to `to`, counting them.
struct CountingProxy {
    path: PathBuf,
    count: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl CountingProxy {
    fn start(path: PathBuf, to: PathBuf) -> CountingProxy {
        let listener = UnixListener::bind(&path).unwrap();
        listener.set_nonblocking(true).unwrap();
        let count = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (c, s) = (count.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((client, _)) => {
                        c.fetch_add(1, Ordering::SeqCst);
                        client.set_nonblocking(false).unwrap();
                        if let Ok(server) = UnixStream::connect(&to) {
                            pipe(client.try_clone().unwrap(), server.try_clone().unwrap());
                            pipe(server, client);
                        }
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        CountingProxy { path, count, stop, thread: Some(thread) }
    }

    fn connections(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }
}

/// Copies `from` to `to` until either ends, then closes `to`'s writing side.
fn pipe(mut from: UnixStream, mut to: UnixStream) {
    std::thread::spawn(move || {
        let mut buf = [0u8; 16384];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 || std::io::Write::write_all(&mut to, &buf[..n]).is_err() {
                break;
            }
        }
        let _ = to.shutdown(std::net::Shutdown::Write);
    });
}

impl Drop for CountingProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

#[test]
fn docker_api_socket_is_not_a_cri_endpoint() {
    if !docker::available("docker_api_socket_is_not_a_cri_endpoint") {
        return;
    }
    let mut checks = Checks::new("docker_api_socket_is_not_a_cri_endpoint");
    let d = Dockerd::start("/var/lib/docker");
    let tree = NodeTree::new();
    let v = Values::new(7500, &["env-running"]);
    let secrets = v.secrets(&tree);
    let timeout = 3;
    let limit = Duration::from_secs(timeout + 5);
    let proxy = CountingProxy::start(d.scratch("proxy").join("cri.sock"), d.sock());
    let node = d.node();
    for (how, sock) in [("direct", d.sock()), ("counted", proxy.path.clone())] {
        for require in [false, true] {
            let endpoint = format!("unix://{}", sock.display());
            let t = timeout.to_string();
            let mut args = vec!["scan", "--root", path_arg(&node), "--cri", &endpoint];
            args.extend(["--cri-timeout", &t, "--secrets", path_arg(&secrets)]);
            args.extend(["--format", "json"]);
            if require {
                args.push("--require-cri");
            }
            let before = proxy.connections();
            let out = tree.kr().timeout(Duration::from_secs(60)).run(&args);
            let case = format!(
                "--cri <dockerd's socket> ({how}{})",
                if require { ", --require-cri" } else { "" }
            );
            checks.check(&case, out.elapsed < limit, || {
                format!("took {:?}, more than --cri-timeout {timeout} s + 5 s", out.elapsed)
            });
            if how == "counted" {
                let n = proxy.connections() - before;
                checks.check(&case, (1..=2).contains(&n), || {
                    format!("{n} connections to the socket (at most 2: one, and one new one)")
                });
            }
            if require {
                let err = out.stderr_str();
                let lines: Vec<&str> = err.trim_end().lines().collect();
                checks.check(&case, out.code == 2, || {
                    format!("exit {} (expected 2): {err}", out.code)
                });
                checks.check(
                    &case,
                    lines.len() == 1 && lines[0].contains("not a CRI endpoint"),
                    || format!("expected one line saying it is not a CRI endpoint: {err:?}"),
                );
                continue;
            }
            checks.check(&case, matches!(out.code, 0 | 1), || {
                format!("exit {}: {}", out.code, out.stderr_str())
            });
            let Some(report) = out.json.as_ref() else { continue };
            checks.check(&case, report["cri"]["status"] == "unreachable", || {
                format!("cri: {}", report["cri"])
            });
            let errors = report["errors"].as_array().cloned().unwrap_or_default();
            let said = errors.iter().any(|e| {
                let e = e["error"].as_str().unwrap_or("");
                e.starts_with("CRI: ") && e.contains("not a CRI endpoint") && !e.contains('\n')
            });
            checks.check(&case, said, || {
                format!("no one-line \"CRI: … not a CRI endpoint\" in errors: {errors:#?}")
            });
        }
    }
    drop(proxy);
    drop(d);
    checks.finish();
}
