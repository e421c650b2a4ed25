//! The CRI cross-check against a fake runtime: a gRPC server in the test speaking the same
//! `runtime.v1` proto on a unix socket, for what a real runtime here cannot be made to
//! show (a NOTREADY sandbox, exited containers, a runtime that never answers or answers
//! garbage), and sockets that are missing or forbidden.

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kresidue::cri::proto;
use kresidue::cri::proto::runtime_service_server::{RuntimeService, RuntimeServiceServer};
use serde_json::Value;
use tonic::{Request, Response, Status};

use crate::util::*;

pub(crate) const READY_UID: &str = "11111111-0000-4000-8000-000000000001";
pub(crate) const NOTREADY_UID: &str = "22222222-0000-4000-8000-000000000002";
pub(crate) const GONE_UID: &str = "33333333-0000-4000-8000-000000000003";
pub(crate) const RUNNING: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
pub(crate) const EXITED: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const UNKNOWN: &str = "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";

/// What the fake runtime reports.
#[derive(Clone, Default)]
pub(crate) struct Fake {
    pub(crate) pods: Vec<proto::PodSandbox>,
    pub(crate) containers: Vec<proto::Container>,
    /// Host paths of each container's mounts (`ContainerStatus`).
    pub(crate) mounts: HashMap<String, Vec<String>>,
    /// `ListPodSandbox` fails with this status code instead.
    pub(crate) list_error: Option<tonic::Code>,
    /// `ListPodSandbox` answers this many extra sandboxes with 1 KiB names.
    pub(crate) padding: usize,
    /// `ListPodSandbox` answers this many more calls "server is not initialized yet", as
    /// containerd's CRI plugin does while it starts.
    pub(crate) starting: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// The runtime's name in `Version` (default `containerd`: the fake plays the node's
    /// containerd, whose records the tests write).
    pub(crate) runtime_name: Option<&'static str>,
}

pub(crate) fn sandbox(id: &str, uid: &str, state: proto::PodSandboxState) -> proto::PodSandbox {
    proto::PodSandbox {
        id: id.into(),
        metadata: Some(proto::PodSandboxMetadata {
            name: format!("pod-{id}"),
            uid: uid.into(),
            namespace: "shop".into(),
            attempt: 0,
        }),
        state: state as i32,
        ..Default::default()
    }
}

pub(crate) fn container(
    id: &str,
    sandbox: &str,
    name: &str,
    state: proto::ContainerState,
) -> proto::Container {
    proto::Container {
        id: id.into(),
        pod_sandbox_id: sandbox.into(),
        metadata: Some(proto::ContainerMetadata { name: name.into(), attempt: 0 }),
        state: state as i32,
        ..Default::default()
    }
}

#[tonic::async_trait]
impl RuntimeService for Fake {
    async fn version(
        &self,
        _: Request<proto::VersionRequest>,
    ) -> Result<Response<proto::VersionResponse>, Status> {
        Ok(Response::new(proto::VersionResponse {
            version: "0.1.0".into(),
            runtime_name: self.runtime_name.unwrap_or("containerd").into(),
            runtime_version: "9.9.9".into(),
            runtime_api_version: "v1".into(),
        }))
    }
    async fn list_pod_sandbox(
        &self,
        _: Request<proto::ListPodSandboxRequest>,
    ) -> Result<Response<proto::ListPodSandboxResponse>, Status> {
        if let Some(code) = self.list_error {
            return Err(Status::new(code, "the runtime's store is broken\nsecond line"));
        }
        use std::sync::atomic::Ordering::SeqCst;
        if self.starting.fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1)).is_ok() {
            return Err(Status::unknown("server is not initialized yet"));
        }
        let mut items = self.pods.clone();
        for i in 0..self.padding {
            items.push(sandbox(&format!("pad{i}{}", "x".repeat(1024)), "pad", Default::default()));
        }
        Ok(Response::new(proto::ListPodSandboxResponse { items }))
    }
    async fn list_containers(
        &self,
        _: Request<proto::ListContainersRequest>,
    ) -> Result<Response<proto::ListContainersResponse>, Status> {
        Ok(Response::new(proto::ListContainersResponse { containers: self.containers.clone() }))
    }
    async fn run_pod_sandbox(
        &self,
        _: Request<proto::RunPodSandboxRequest>,
    ) -> Result<Response<proto::RunPodSandboxResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn stop_pod_sandbox(
        &self,
        _: Request<proto::StopPodSandboxRequest>,
    ) -> Result<Response<proto::StopPodSandboxResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn remove_pod_sandbox(
        &self,
        _: Request<proto::RemovePodSandboxRequest>,
    ) -> Result<Response<proto::RemovePodSandboxResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn pod_sandbox_status(
        &self,
        _: Request<proto::PodSandboxStatusRequest>,
    ) -> Result<Response<proto::PodSandboxStatusResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn create_container(
        &self,
        _: Request<proto::CreateContainerRequest>,
    ) -> Result<Response<proto::CreateContainerResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn start_container(
        &self,
        _: Request<proto::StartContainerRequest>,
    ) -> Result<Response<proto::StartContainerResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn stop_container(
        &self,
        _: Request<proto::StopContainerRequest>,
    ) -> Result<Response<proto::StopContainerResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn remove_container(
        &self,
        _: Request<proto::RemoveContainerRequest>,
    ) -> Result<Response<proto::RemoveContainerResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn container_status(
        &self,
        request: Request<proto::ContainerStatusRequest>,
    ) -> Result<Response<proto::ContainerStatusResponse>, Status> {
        let id = request.into_inner().container_id;
        let Some(c) = self.containers.iter().find(|c| c.id == id) else {
            return Err(Status::not_found(format!("container {id}")));
        };
        let mounts = self.mounts.get(&id).into_iter().flatten();
        let mounts = mounts
            .map(|host| proto::Mount {
                container_path: "/etc/db".into(),
                host_path: host.clone(),
                ..Default::default()
            })
            .collect();
        Ok(Response::new(proto::ContainerStatusResponse {
            status: Some(proto::ContainerStatus {
                id: c.id.clone(),
                metadata: c.metadata.clone(),
                state: c.state,
                mounts,
                ..Default::default()
            }),
        }))
    }
}

/// A server on a unix socket in a temp dir, running on its own thread until dropped.
pub(crate) struct Server {
    dir: tempfile::TempDir,
    /// The socket, when not `cri.sock` in `dir`.
    at: Option<PathBuf>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    fn sock(&self) -> PathBuf {
        self.at.clone().unwrap_or_else(|| self.dir.path().join("cri.sock"))
    }

    pub(crate) fn endpoint(&self) -> String {
        format!("unix://{}", self.sock().display())
    }

    /// A gRPC server answering as `fake`.
    pub(crate) fn grpc(fake: Fake) -> Server {
        Server::grpc_at(fake, None)
    }

    /// A gRPC server answering as `fake` on a socket at `at` (bound through its
    /// directory's descriptor: a path under a temp dir is too long for bind), or at
    /// `cri.sock` of a temp dir of its own.
    pub(crate) fn grpc_at(fake: Fake, at: Option<&Path>) -> Server {
        Server::spawn_at(at, move |listener, stop| async move {
            let incoming = tokio_stream::wrappers::UnixListenerStream::new(listener);
            tonic::transport::Server::builder()
                .add_service(RuntimeServiceServer::new(fake))
                .serve_with_incoming_shutdown(incoming, async {
                    let _ = stop.await;
                })
                .await
                .unwrap();
        })
    }

    /// A server that accepts connections and then answers each with `reply` (nothing at
    /// all when empty), keeping it open.
    fn raw(reply: &'static [u8]) -> Server {
        Server::spawn(move |listener, mut stop| async move {
            use tokio::io::AsyncWriteExt;
            let mut held = Vec::new();
            loop {
                tokio::select! {
                    _ = &mut stop => break,
                    Ok((mut s, _)) = listener.accept() => {
                        let _ = s.write_all(reply).await;
                        held.push(s);
                    }
                }
            }
        })
    }

    /// A server that accepts connections and closes each at once.
    fn closing() -> Server {
        Server::spawn(move |listener, mut stop| async move {
            loop {
                tokio::select! {
                    _ = &mut stop => break,
                    Ok((s, _)) = listener.accept() => drop(s),
                }
            }
        })
    }

    /// A server that is no CRI server, counting the connections it accepts: each is
    /// answered `reply` (an HTTP/1 server's answer to an HTTP/2 preface, as Docker's API
    /// socket gives; nothing when empty) and closed.
    fn counting(reply: &'static [u8]) -> (Server, Arc<AtomicUsize>) {
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        let server = Server::spawn(move |listener, mut stop| async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            loop {
                tokio::select! {
                    _ = &mut stop => break,
                    Ok((mut s, _)) = listener.accept() => {
                        count.fetch_add(1, Ordering::Relaxed);
                        let mut buf = [0u8; 64];
                        let _ = s.read(&mut buf).await;
                        let _ = s.write_all(reply).await;
                        drop(s);
                    }
                }
            }
        });
        (server, accepted)
    }

    fn spawn<F, Fut>(serve: F) -> Server
    where
        F: FnOnce(tokio::net::UnixListener, tokio::sync::oneshot::Receiver<()>) -> Fut
            + Send
            + 'static,
        Fut: std::future::Future<Output = ()>,
    {
        Server::spawn_at(None, serve)
    }

    fn spawn_at<F, Fut>(at: Option<&Path>, serve: F) -> Server
    where
        F: FnOnce(tokio::net::UnixListener, tokio::sync::oneshot::Receiver<()>) -> Fut
            + Send
            + 'static,
        Fut: std::future::Future<Output = ()>,
    {
        let dir = tempfile::Builder::new().prefix("kcri").tempdir_in("/tmp").unwrap();
        let at = at.map(Path::to_path_buf);
        // Bound here, by a short path: under a temp dir the socket's own may be too long
        // for bind, so it is bound by its name under its directory's descriptor.
        let listener = match &at {
            Some(p) => {
                use std::os::fd::AsRawFd;
                let parent = p.parent().unwrap();
                std::fs::create_dir_all(parent).unwrap();
                let parent = std::fs::File::open(parent).unwrap();
                let name = p.file_name().unwrap().to_str().unwrap();
                std::os::unix::net::UnixListener::bind(format!(
                    "/proc/self/fd/{}/{name}",
                    parent.as_raw_fd()
                ))
            }
            None => std::os::unix::net::UnixListener::bind(dir.path().join("cri.sock")),
        }
        .unwrap();
        listener.set_nonblocking(true).unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let listener = tokio::net::UnixListener::from_std(listener).unwrap();
                serve(listener, rx).await;
            });
        });
        Server { dir, at, stop: Some(tx), thread: Some(thread) }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A node with one generated value in: the secret volumes of a pod whose sandbox is
/// ready, one whose sandbox is NOTREADY and one with no sandbox; the OCI bundles of a
/// running, an exited and an unknown container; and the log of the ready pod's `app`
/// container.
fn node() -> (NodeTree, PathBuf) {
    let tree = NodeTree::new();
    let (value, secrets) = db_password(&tree, 5101);
    for uid in [READY_UID, NOTREADY_UID, GONE_UID] {
        tree.pod(uid).secret_volume("db").key("password", value.as_bytes());
    }
    let spec = serde_json::json!({"process": {"env": [format!("DB_PASSWORD={value}")]}});
    for id in [RUNNING, EXITED, UNKNOWN] {
        tree.write(
            format!("/run/containerd/io.containerd.runtime.v2.task/k8s.io/{id}/config.json"),
            serde_json::to_string(&spec).unwrap().as_bytes(),
        );
    }
    tree.write(
        format!("/var/log/pods/shop_pod-s1_{READY_UID}/app/0.log"),
        format!("2026-11-30T10:00:00.000000000Z stdout F password={value}\n").as_bytes(),
    );
    let file = tree.secrets_file("secrets.json", &secrets);
    (tree, file)
}

pub(crate) fn fake() -> Fake {
    use proto::ContainerState::{ContainerExited, ContainerRunning};
    use proto::PodSandboxState::{SandboxNotready, SandboxReady};
    Fake {
        pods: vec![
            sandbox("s1", READY_UID, SandboxReady),
            sandbox("s2", NOTREADY_UID, SandboxNotready),
        ],
        containers: vec![
            container(RUNNING, "s1", "app", ContainerRunning),
            container(EXITED, "s2", "app", ContainerExited),
        ],
        mounts: HashMap::new(),
        list_error: None,
        padding: 0,
        starting: Default::default(),
        runtime_name: None,
    }
}

/// A finding as (path tail, category, severity, pod live, container live).
type Row = (String, String, String, Option<bool>, Option<bool>);

/// The findings of `report` as rows, sorted.
fn rows(report: &Value) -> Vec<Row> {
    let mut out: Vec<_> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let path = f["path"].as_str().unwrap();
            let tail = path.split('/').rev().take(3).collect::<Vec<_>>().join("<");
            (
                tail,
                f["category"].as_str().unwrap().to_owned(),
                f["severity"].as_str().unwrap().to_owned(),
                f["pod"]["live"].as_bool(),
                f["container"]["live"].as_bool(),
            )
        })
        .collect();
    out.sort();
    out
}

/// A sandbox in any state makes its pod live (NOTREADY included); a pod no sandbox names
/// is dead. A running container is live; an exited one, or one the runtime does not know,
/// is dead and its env at rest is `dead-container`. A log's container is matched by name
/// within its pod. The report's `cri` block names the runtime.
#[test]
fn liveness_from_a_fake_runtime() {
    let (tree, file) = node();
    let server = Server::grpc(fake());
    let out = tree.kr().scan_asking(
        &["--cri", &server.endpoint()],
        &["--secrets", path_arg(&file), "--format", "json"],
    );
    out.assert_code(1);
    let report = out.json();
    assert_eq!(report["cri"]["status"], "ok");
    assert_eq!(report["cri"]["runtime"], "containerd 9.9.9");
    assert_eq!(report["cri"]["endpoint"], server.endpoint());
    let tmpfs = Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(tree.host("/"))
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"tmpfs"));
    let (volume, live_sev, dead_sev) = if tmpfs {
        ("orphaned-volume", "info", "critical")
    } else {
        ("non-tmpfs-volume", "high", "critical")
    };
    let s = |x: &str| x.to_owned();
    let bundle = |id: &str, category: &str, severity: &str, live: bool| {
        (format!("config.json<{id}<k8s.io"), s(category), s(severity), None, Some(live))
    };
    let got = rows(report);
    let mut want = vec![
        bundle(RUNNING, "env-persisted", "medium", true),
        bundle(EXITED, "dead-container", "high", false),
        bundle(UNKNOWN, "dead-container", "high", false),
        (s("0.log<app<shop_pod-s1_") + READY_UID, s("pod-log"), s("high"), Some(true), Some(true)),
    ];
    want.sort();
    for w in &want {
        assert!(got.contains(w), "missing {w:?} in {got:#?}");
    }
    // The volumes, by pod.
    let by_pod: HashMap<String, (String, String, Option<bool>)> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["site"] == "kubelet-secret-volume")
        .map(|f| {
            (
                f["pod"]["uid"].as_str().unwrap().to_owned(),
                (
                    s(f["category"].as_str().unwrap()),
                    s(f["severity"].as_str().unwrap()),
                    f["pod"]["live"].as_bool(),
                ),
            )
        })
        .collect();
    assert_eq!(by_pod[READY_UID], (s(volume), s(live_sev), Some(true)));
    assert_eq!(by_pod[NOTREADY_UID], (s(volume), s(live_sev), Some(true)));
    // No sandbox: orphaned, on disk or not.
    assert_eq!(by_pod[GONE_UID], (s("orphaned-volume"), s(dead_sev), Some(false)));
    drop(server);
}

/// A runtime still starting (containerd's CRI plugin answers "server is not initialized
/// yet" until it has loaded its state) is waited for: three such answers, then the pods —
/// `cri.status` ok, the live pod live, each attempt in `-vv`. One that never finishes
/// starting is given up on after one more timeout, with its answer in `errors`.
#[test]
fn a_runtime_still_starting_is_waited_for() {
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;
    let (tree, file) = node();
    let starting = Server::grpc(Fake { starting: Arc::new(AtomicUsize::new(3)), ..fake() });
    let ep = starting.endpoint();
    let out = tree.kr().scan_asking(
        &["--cri", &ep, "--cri-timeout", "5"],
        &["--secrets", path_arg(&file), "--format", "json", "-vv"],
    );
    out.assert_code(1);
    assert_eq!(out.json()["cri"]["status"], "ok", "{}", out.stderr_str());
    let live = out.findings().iter().filter(|f| f.raw["pod"]["live"] == true).count();
    assert!(live > 0, "the ready pod is not live: {:?}", out.findings());
    let err = out.stderr_str();
    assert_eq!(err.matches("kresidue: cri: ListPodSandbox: error in ").count(), 3, "{err}");
    assert_eq!(err.matches("kresidue: cri: ListPodSandbox: ok in ").count(), 1, "{err}");

    let never = Server::grpc(Fake { starting: Arc::new(AtomicUsize::new(usize::MAX)), ..fake() });
    let ep = never.endpoint();
    let t = Instant::now();
    let out = tree.kr().scan_asking(
        &["--cri", &ep, "--cri-timeout", "1"],
        &["--secrets", path_arg(&file), "--format", "json", "-vv"],
    );
    out.assert_code(1);
    assert!(t.elapsed() < Duration::from_secs(5), "took {:?}", t.elapsed());
    let report = out.json();
    assert_eq!(report["cri"]["status"], "unreachable");
    let errors = report["errors"].as_array().unwrap();
    assert!(
        errors.iter().any(|e| e["error"].as_str().unwrap().contains("not initialized yet")),
        "{errors:?}"
    );
    // The calls made before giving up are told with -vv too.
    assert!(out.stderr_str().contains("kresidue: cri: ListPodSandbox: error in "));
}

/// A runtime that cannot be asked: the scan still completes, with `live: null`,
/// `cri.status = "unreachable"` and the reason in `errors` (one line, even when the
/// runtime's message has two); with `--require-cri` it exits 2 with one line. Asked: a
/// socket that accepts and never answers (costs at most the timeout), one that answers
/// garbage, one that closes every connection, a missing socket, a regular file where the
/// socket should be, a runtime whose list call fails with an error status, and one whose
/// answer is larger than a CRI message may be (16 MiB).
#[test]
fn unreachable_runtimes() {
    let (tree, file) = node();
    let silent = Server::raw(b"");
    let garbage =
        Server::raw(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello\x00\xff\x13garbage");
    let missing =
        format!("unix://{}/nothing-here.sock", tree.work("x").parent().unwrap().display());
    let closing = Server::closing();
    let failing = Server::grpc(Fake { list_error: Some(tonic::Code::Internal), ..fake() });
    // More than the 16 MiB a CRI message may have (kubelet's limit too).
    let huge = Server::grpc(Fake { padding: 20_000, ..fake() });
    let regular = tree.work("regular.sock");
    std::fs::write(&regular, b"not a socket").unwrap();
    let cases: [(&str, String, &str); 7] = [
        ("silent", silent.endpoint(), "no answer within 1 s"),
        ("garbage", garbage.endpoint(), ""),
        ("missing", missing, "No such file or directory"),
        ("closing", closing.endpoint(), ""),
        ("error status", failing.endpoint(), "ListPodSandbox failed (Internal)"),
        ("huge answer", huge.endpoint(), "ListPodSandbox"),
        ("regular file", format!("unix://{}", regular.display()), "Connection refused"),
    ];
    for (what, endpoint, reason) in &cases {
        let t = Instant::now();
        let out = tree.kr().scan_asking(
            &["--cri", endpoint, "--cri-timeout", "1"],
            &["--secrets", path_arg(&file), "--format", "json"],
        );
        out.assert_code(1);
        // Connecting and the first call each have the timeout; the scan itself is quick.
        assert!(t.elapsed() < Duration::from_secs(8), "{what}: took {:?}", t.elapsed());
        let report = out.json();
        assert_eq!(report["cri"]["status"], "unreachable", "{what}");
        assert_eq!(report["cri"]["endpoint"], endpoint.as_str(), "{what}");
        let errors = report["errors"].as_array().unwrap();
        let e = errors.iter().find(|e| e["path"] == endpoint.as_str());
        let e = e.unwrap_or_else(|| panic!("{what}: no error entry: {errors:?}"));
        let text = e["error"].as_str().unwrap();
        assert!(text.starts_with("CRI: ") && text.contains(reason), "{what}: {text}");
        assert!(!text.contains('\n'), "{what}: {text}");
        let findings = report["findings"].as_array().unwrap();
        assert!(!findings.is_empty());
        assert!(
            findings.iter().all(|f| f["pod"].is_null() || f["pod"]["live"].is_null()),
            "{what}"
        );
        assert!(findings.iter().all(|f| f["category"] != "dead-container"), "{what}");

        let out = tree.kr().scan_asking(
            &["--cri", endpoint, "--cri-timeout", "1", "--require-cri"],
            &["--secrets", path_arg(&file)],
        );
        out.assert_code(2);
        let err = out.stderr_str();
        assert_eq!(err.trim_end().lines().count(), 1, "{what}: {err}");
        assert!(
            err.starts_with("kresidue: error: CRI ") && err.contains(endpoint.as_str()),
            "{what}: {err}"
        );
        assert!(out.stdout.is_empty(), "{what}: no report when the scan cannot be done");
    }
}

/// `--cri` at a socket that is no CRI server (Docker's API socket, which answers an
/// HTTP/2 preface with an HTTP/1 400 and closes; a server that closes at once): the
/// runtime is unreachable with one clear line, after two connections at most (however
/// soon the server closes), never a reconnect loop (one was seen making 36,000 connections in 5 s).
#[test]
fn a_socket_that_is_no_cri_server_is_tried_once() {
    let (tree, file) = node();
    let http1 = b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request";
    for (what, reply) in [("an HTTP/1 server", &http1[..]), ("a server that closes", b"")] {
        let (server, accepted) = Server::counting(reply);
        let endpoint = server.endpoint();
        let out = tree.kr().scan_asking(
            &["--cri", &endpoint, "--cri-timeout", "2"],
            &["--secrets", path_arg(&file), "--format", "json"],
        );
        out.assert_code(1);
        let report = out.json();
        assert_eq!(report["cri"]["status"], "unreachable", "{what}");
        let errors = report["errors"].as_array().unwrap();
        let e = errors.iter().find(|e| e["path"] == endpoint.as_str());
        let text = e.and_then(|e| e["error"].as_str()).unwrap_or_default().to_owned();
        assert!(text.contains("is not a CRI endpoint"), "{what}: {errors:?}");
        let n = accepted.load(Ordering::Relaxed);
        assert!(n <= 2, "{what}: {n} connections");
    }
}

/// A socket the user may not open: unreachable with "Permission denied". As root (who
/// may open anything) the scan runs as `nobody`, from a copy of the binary it can reach.
#[test]
fn socket_without_permission() {
    let server = Server::grpc(fake());
    std::fs::set_permissions(server.sock(), std::fs::Permissions::from_mode(0o600)).unwrap();
    let root = is_root();
    let tree = NodeTree::new();
    tree.write("/etc/hostname", b"node-1\n");
    let bin_dir = tempfile::tempdir().unwrap();
    let mut cmd = if root {
        let bin = bin_dir.path().join("kresidue");
        std::fs::copy(assert_cmd::cargo::cargo_bin("kresidue"), &bin).unwrap();
        for p in [bin_dir.path(), &bin] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"]).arg(&bin);
        c
    } else {
        std::fs::set_permissions(server.sock(), std::fs::Permissions::from_mode(0o000)).unwrap();
        Command::new(assert_cmd::cargo::cargo_bin("kresidue"))
    };
    // A run lock of its own that `nobody` may open.
    let lock = bin_dir.path().join("kresidue.lock");
    std::fs::write(&lock, b"").unwrap();
    std::fs::set_permissions(&lock, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = cmd
        .env("KRESIDUE_LOCK", &lock)
        .args(["scan", "--root", "/proc/self/fdinfo", "--format", "json", "--cri-timeout", "2"])
        .args(["--cri", &server.endpoint()])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(report["cri"]["status"], "unreachable");
    let errors = report["errors"].to_string();
    assert!(errors.contains("Permission denied"), "{errors}");
}

/// Without `--kubelet-dir`, kubelet's root dir is learned from where a running container's
/// volumes are mounted from (`ContainerStatus`): pods under a moved `--root-dir` are found.
#[test]
fn kubelet_dir_learned_from_the_runtime() {
    let tree = NodeTree::with_kubelet_dir("/data/kubelet");
    let (value, secrets) = db_password(&tree, 5201);
    tree.pod(READY_UID).secret_volume("db").key("password", value.as_bytes());
    let file = tree.secrets_file("secrets.json", &secrets);
    let mut fake = fake();
    fake.mounts.insert(
        EXITED.into(),
        vec![format!("/elsewhere/pods/{NOTREADY_UID}/volumes/kubernetes.io~secret/db")],
    );
    fake.mounts.insert(
        RUNNING.into(),
        vec![
            "/etc/resolv.conf".into(),
            format!("/data/kubelet/pods/{READY_UID}/volumes/kubernetes.io~secret/db"),
        ],
    );
    let server = Server::grpc(fake);
    let args = ["--secrets", path_arg(&file), "--format", "json"];
    let out = tree.kr().scan_asking(&["--cri", &server.endpoint()], &args);
    out.assert_code(1);
    let findings = out.findings();
    assert_eq!(findings.len(), 1, "{}", out.stdout_str());
    assert_eq!(findings[0].site, "kubelet-secret-volume");
    assert!(findings[0].path.starts_with("/data/kubelet/pods/"), "{}", findings[0].path);
    assert_eq!(out.json()["findings"][0]["pod"]["live"], true);
    // Given, it wins; without the runtime, the default is used.
    let given = ["--kubelet-dir", "/var/lib/kubelet"];
    let out = tree.kr().scan_asking(&["--cri", &server.endpoint()], &[&args[..], &given].concat());
    assert!(out.findings().is_empty(), "{}", out.stdout_str());
    assert!(tree.scan(&args).findings().is_empty());
}

/// SubPath copies: a live pod's copy of what its volume holds now is expected (`info`); a
/// copy of a value labelled revoked, or of a value its volume no longer holds, is a stale
/// value (`stale-subpath`, medium, one step up when revoked); a dead pod's copy is high.
#[test]
fn subpath_copies_current_and_stale() {
    let tree = NodeTree::new();
    let vals: Vec<String> =
        (0..3).map(|i| String::from_utf8(fake_secret(5301 + i)).unwrap()).collect();
    let current = [
        Secret::opaque("shop", "db", &[("password", vals[0].as_bytes())]),
        Secret::opaque("shop", "api", &[("token", vals[2].as_bytes())]),
    ];
    let revoked = [Secret::opaque("shop", "old", &[("password", vals[1].as_bytes())])];
    tree.guard_secrets(&current);
    tree.guard_secrets(&revoked);
    let live = tree.pod(READY_UID);
    live.secret_volume("db").key("password", vals[0].as_bytes());
    live.subpath("db", "app", 0, vals[0].as_bytes());
    live.subpath("db", "app", 1, vals[1].as_bytes());
    live.subpath("db", "app", 2, vals[2].as_bytes());
    tree.pod(GONE_UID).subpath("db", "app", 0, vals[0].as_bytes());
    let current_file = tree.secrets_file("current.json", &current);
    let revoked_file = tree.secrets_file("revoked.json", &revoked);
    let current_fp = tree.fingerprint_file(&current_file, &[], "current.fp");
    let revoked_fp = tree.fingerprint_file(&revoked_file, &["--label", "revoked"], "revoked.fp");
    let server = Server::grpc(fake());
    let fps = ["--fingerprints", path_arg(&current_fp), "--fingerprints", path_arg(&revoked_fp)];
    let out = tree
        .kr()
        .scan_asking(&["--cri", &server.endpoint()], &[&fps[..], &["--format", "json"]].concat());
    let got: Vec<(String, String, String)> = out
        .findings()
        .into_iter()
        .filter(|f| f.site == "kubelet-subpath")
        .map(|f| (f.path.clone(), f.category.clone(), f.severity.clone()))
        .collect();
    let sub = |uid: &str, i: u32, severity: &str| {
        let path = format!("/var/lib/kubelet/pods/{uid}/volume-subpaths/db/app/{i}");
        (path, "stale-subpath".to_owned(), severity.to_owned())
    };
    let mut want = vec![
        sub(READY_UID, 0, "info"),
        sub(READY_UID, 1, "high"),
        sub(READY_UID, 2, "medium"),
        sub(GONE_UID, 0, "high"),
    ];
    want.sort();
    assert_eq!(got, want, "{}", out.stdout_str());
}

/// Mounts (`mount ARGS AT`, making `at` first), unmounted when the guard drops.
pub(crate) fn mount(args: &[&str], at: &Path) -> Mounted {
    std::fs::create_dir_all(at).unwrap();
    let ok = Command::new("mount").args(args).arg(at).status().is_ok_and(|s| s.success());
    assert!(ok, "mount {args:?} {}", at.display());
    Mounted(at.to_path_buf())
}

/// Unmounts on drop.
pub(crate) struct Mounted(pub(crate) PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Real tmpfs volumes (as root, which CI is): a live pod's is expected (`info`), a pod
/// with no sandbox's is `orphaned-volume` and critical, and without the runtime
/// `orphaned-volume` and high; a volume on disk of a live pod is `non-tmpfs-volume`.
#[test]
// The skip message is for the person running the tests.
#[allow(clippy::print_stderr)]
fn tmpfs_volumes_by_liveness() {
    if !is_root() {
        eprintln!("skipped: mounting tmpfs needs root");
        return;
    }
    let tree = NodeTree::new();
    let (value, secrets) = db_password(&tree, 5401);
    let mut mounts = Vec::new();
    for uid in [READY_UID, GONE_UID] {
        let dir = tree.host(format!("/var/lib/kubelet/pods/{uid}/volumes/kubernetes.io~secret/db"));
        mounts.push(mount(&["-t", "tmpfs", "-o", "size=1m", "tmpfs"], &dir));
        std::fs::write(dir.join("password"), &value).unwrap();
    }
    tree.pod(NOTREADY_UID).secret_volume("db").key("password", value.as_bytes());
    let file = tree.secrets_file("secrets.json", &secrets);
    let server = Server::grpc(fake());
    let args = ["--secrets", path_arg(&file), "--format", "json"];
    let by_pod = |out: &Out| -> Vec<(String, String, String)> {
        out.findings()
            .into_iter()
            .map(|f| (f.raw["pod"]["uid"].as_str().unwrap().to_owned(), f.category, f.severity))
            .collect()
    };
    let row = |uid: &str, category: &str, severity: &str| {
        (uid.to_owned(), category.to_owned(), severity.to_owned())
    };
    let asked = tree.kr().scan_asking(&["--cri", &server.endpoint()], &args);
    assert_eq!(
        by_pod(&asked),
        vec![
            row(READY_UID, "orphaned-volume", "info"),
            row(NOTREADY_UID, "non-tmpfs-volume", "high"),
            row(GONE_UID, "orphaned-volume", "critical"),
        ],
        "{}",
        asked.stdout_str()
    );
    let unknown = tree.scan(&args);
    assert_eq!(
        by_pod(&unknown),
        vec![
            row(READY_UID, "orphaned-volume", "high"),
            row(NOTREADY_UID, "non-tmpfs-volume", "critical"),
            row(GONE_UID, "orphaned-volume", "high"),
        ],
        "{}",
        unknown.stdout_str()
    );
    drop(mounts);
}

/// Two witnesses of a container, the runtime's own records and CRI (issue 30): a Docker
/// container is live when either says so (running by its `State.Running` though CRI never
/// knew it; listed running by CRI though its record says stopped), and dead when one says
/// so and the other does not object. CRI's silence says nothing of a container another
/// runtime keeps (a Podman container CRI-O never lists stays unknown), while a containerd
/// container CRI does not list is gone, as before.
#[test]
fn records_and_cri_witness_together() {
    use proto::ContainerState::{ContainerExited, ContainerRunning};
    let tree = NodeTree::new();
    let (value, secrets) = db_password(&tree, 5401);
    let env = |v: &str| format!("DB_PASSWORD={v}");
    let ids: Vec<String> = (1..=6).map(|i| format!("{i}").repeat(64)).collect();
    let docker = |id: &str, running: bool| {
        let config = serde_json::json!({"Name": "/c", "State": {"Running": running},
            "Config": {"Env": [env(&value)]}});
        tree.write(
            format!("/var/lib/docker/containers/{id}/config.v2.json"),
            config.to_string().as_bytes(),
        );
    };
    docker(&ids[0], true); // CRI does not know it
    docker(&ids[1], false); // CRI lists it running
    docker(&ids[2], false); // CRI lists it exited
    docker(&ids[3], false); // CRI does not know it
    let graph = "/var/lib/containers/storage/overlay-containers";
    let meta = serde_json::json!({"name": "tool"}).to_string();
    let records = serde_json::json!([{"id": ids[4], "layer": "l", "metadata": meta}]);
    tree.write(format!("{graph}/containers.json"), records.to_string().as_bytes());
    let spec = serde_json::json!({"process": {"env": [env(&value)]}}).to_string();
    tree.write(format!("{graph}/{}/userdata/config.json", ids[4]), spec.as_bytes());
    tree.write(
        format!("/run/containerd/io.containerd.runtime.v2.task/k8s.io/{}/config.json", ids[5]),
        spec.as_bytes(),
    );
    let file = tree.secrets_file("secrets.json", &secrets);
    let mut runtime = fake();
    runtime.containers = vec![
        container(&ids[1], "s1", "app", ContainerRunning),
        container(&ids[2], "s1", "app", ContainerExited),
    ];
    let scan = |runtime: Fake| {
        let server = Server::grpc(runtime);
        let out = tree.kr().scan_asking(
            &["--cri", &server.endpoint()],
            &["--secrets", path_arg(&file), "--format", "json"],
        );
        out.assert_code(1);
        let mut got: Vec<(String, String, Option<bool>)> = out.json()["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                let id = f["container"]["id"].as_str().unwrap().to_owned();
                let category = f["category"].as_str().unwrap().to_owned();
                (id, category, f["container"]["live"].as_bool())
            })
            .collect();
        got.sort();
        got
    };
    let row = |i: usize, category: &str, live| (ids[i].clone(), category.to_owned(), live);
    let want = vec![
        // Its record says it runs, but no process of it runs here: not believed.
        row(0, "env-persisted", None),
        row(1, "env-persisted", Some(true)),
        row(2, "dead-container", Some(false)),
        row(3, "dead-container", Some(false)),
        row(4, "env-persisted", None),
        row(5, "dead-container", Some(false)),
    ];
    assert_eq!(scan(runtime.clone()), want);
    // CRI is Docker itself (cri-dockerd): a Docker container it does not list is gone,
    // and its silence says nothing of a container the node's containerd keeps.
    let mut want = want;
    want[0] = row(0, "dead-container", Some(false));
    want[5] = row(5, "env-persisted", None);
    assert_eq!(scan(Fake { runtime_name: Some("docker"), ..runtime }), want);
}

/// One duration syntax (issue 31): `--cri-timeout` takes what every duration option takes
/// (`2s`, `500ms`, `1m`), and a bare number still means seconds (`1.5`); zero, more than
/// an hour or no duration at all is refused with one line, exit 2, the value not repeated.
#[test]
fn cri_timeout_takes_durations() {
    let tree = NodeTree::new();
    let gone = format!("unix://{}", tree.work("no.sock").display());
    for ok in ["2s", "500ms", "1m", "1.5", "3"] {
        let out =
            tree.kr().scan_asking(&["--cri", &gone, "--cri-timeout", ok], &["--format", "json"]);
        assert_ne!(out.code, 2, "--cri-timeout {ok}: {}", out.stderr_str());
        assert_eq!(out.json()["cri"]["status"], "unreachable", "--cri-timeout {ok}");
    }
    for bad in ["0s", "0", "2h", "soon", "-1"] {
        let arg = format!("--cri-timeout={bad}");
        let out = tree.kr().scan_asking(&["--cri", &gone, &arg], &["--format", "json"]);
        out.assert_code(2);
        let err = out.stderr_str();
        assert_eq!(err.trim_end().lines().count(), 1, "--cri-timeout {bad}: {err}");
        assert!(err.contains("--cri-timeout"), "{err}");
        assert!(!err.contains(&format!(" {bad}")) && !err.contains(&arg), "repeated: {err}");
    }
}

/// `kubectl debug node/NAME` (the README's command): the node's `/` at `/host`, no
/// `--cri`, the fingerprints on stdin (`--fingerprints /dev/stdin`). The runtime's socket
/// beneath the root is asked: `cri.status` ok, the endpoint where it was found, the pod it
/// runs live and the one it does not orphaned. kubelet's dir learned from its containers'
/// mounts (host paths: the node's) is read beneath the root. `kresidue pods --root` asks
/// it too; `--no-cri` asks nothing.
#[test]
fn the_runtime_socket_beneath_the_root_is_asked() {
    let tree = NodeTree::with_kubelet_dir("/data/kubelet");
    let (value, secrets) = db_password(&tree, 5301);
    for uid in [READY_UID, GONE_UID] {
        tree.pod(uid).secret_volume("db").key("password", value.as_bytes());
    }
    let file = tree.secrets_file("secrets.json", &secrets);
    let fp = std::fs::read(tree.fingerprint_file(&file, &[], "cluster.fp")).unwrap();
    let mut fake = fake();
    let volume = format!("/data/kubelet/pods/{READY_UID}/volumes/kubernetes.io~secret/db");
    fake.mounts.insert(RUNNING.into(), vec![volume]);
    let sock = tree.host("/run/containerd/containerd.sock");
    let server = Server::grpc_at(fake, Some(sock.as_path()));
    let endpoint = format!("unix://{}", std::fs::canonicalize(&sock).unwrap().display());
    let args = ["--fingerprints", "/dev/stdin", "--format", "json"];
    let out = tree.kr().stdin(&fp).scan_asking(&[], &args);
    out.assert_code(1);
    let report = out.json();
    assert_eq!(report["cri"]["status"], "ok", "{}", out.stderr_str());
    assert_eq!(report["cri"]["runtime"], "containerd 9.9.9");
    assert_eq!(report["cri"]["endpoint"], endpoint.as_str());
    let by_pod: HashMap<String, (String, Option<bool>)> = out
        .findings()
        .iter()
        .filter(|f| f.site == "kubelet-secret-volume")
        .map(|f| {
            assert!(f.path.starts_with("/data/kubelet/pods/"), "{}", f.path);
            let uid = f.raw["pod"]["uid"].as_str().unwrap().to_owned();
            (uid, (f.raw["category"].as_str().unwrap().to_owned(), f.raw["pod"]["live"].as_bool()))
        })
        .collect();
    assert_eq!(by_pod.len(), 2, "{}", out.stdout_str());
    assert_eq!(by_pod[READY_UID].1, Some(true));
    assert_eq!(by_pod[GONE_UID], ("orphaned-volume".to_owned(), Some(false)));

    let out = tree.kr().run(&["pods", "--root", tree.root_arg(), "--format", "json"]);
    out.assert_code(0);
    assert_eq!(out.json()["endpoint"], endpoint.as_str());
    let out = tree.kr().stdin(&fp).scan(&args);
    assert_eq!(out.json()["cri"]["status"], "disabled");
    drop(server);
}

/// `/var/run` a symlink to `/run` (an absolute one on Debian and Ubuntu, relative
/// elsewhere): CRI-O's socket at `/var/run/crio/crio.sock` is found beneath the root
/// either way, at its `/run` path.
#[test]
fn a_socket_beneath_a_var_run_symlink_is_found() {
    for target in ["/run", "../run"] {
        let tree = NodeTree::new();
        tree.symlink("/var/run", target);
        let sock = tree.host("/run/crio/crio.sock");
        let server = Server::grpc_at(fake(), Some(sock.as_path()));
        let out = tree.kr().scan_asking(&[], &["--format", "json"]);
        assert_ne!(out.code, 2, "{}", out.stderr_str());
        let cri = &out.json()["cri"];
        assert_eq!(cri["status"], "ok", "/var/run -> {target}: {}", out.stderr_str());
        let endpoint = format!("unix://{}", std::fs::canonicalize(&sock).unwrap().display());
        assert_eq!(cri["endpoint"], endpoint.as_str(), "/var/run -> {target}");
        drop(server);
    }
}

/// Issue 48: sockets are tried in turn until one answers: a dead socket at containerd's
/// default path (a Docker install's containerd, its CRI plugin off) does not hide k3s's
/// containerd at `/run/k3s/containerd/containerd.sock`.
#[test]
fn a_dead_socket_does_not_hide_the_distributions() {
    let tree = NodeTree::new();
    tree.socket("/run/containerd/containerd.sock");
    let sock = tree.host("/run/k3s/containerd/containerd.sock");
    let server = Server::grpc_at(fake(), Some(sock.as_path()));
    let out = tree.kr().scan_asking(&["--cri-timeout", "2"], &["--format", "json"]);
    assert_ne!(out.code, 2, "{}", out.stderr_str());
    let cri = &out.json()["cri"];
    assert_eq!(cri["status"], "ok", "{}", out.stderr_str());
    let endpoint = format!("unix://{}", std::fs::canonicalize(&sock).unwrap().display());
    assert_eq!(cri["endpoint"], endpoint.as_str());
    drop(server);
}

/// Without `--cri`, a root with no live runtime beneath it: no socket at all (a mounted
/// disk image) asks no runtime (`cri.status` disabled, as before), and so does a regular
/// file where a socket would be; a socket nobody listens on (a stale one) is the runtime
/// unreachable, as at `/`. A runtime socket outside the root reached by a symlink beneath
/// it (the socket's own, a dir's, an absolute or a relative one) is never connected to.
#[test]
fn no_runtime_socket_beneath_the_root() {
    let cri = |tree: &NodeTree| {
        let out = tree.kr().scan_asking(&["--cri-timeout", "1"], &["--format", "json"]);
        assert_ne!(out.code, 2, "{}", out.stderr_str());
        out.json().clone()
    };
    let tree = NodeTree::new();
    assert_eq!(cri(&tree)["cri"]["status"], "disabled");
    tree.write("/run/containerd/containerd.sock", b"not a socket");
    assert_eq!(cri(&tree)["cri"]["status"], "disabled");

    let stale = NodeTree::new();
    stale.socket("/var/run/crio/crio.sock");
    let report = cri(&stale);
    assert_eq!(report["cri"]["status"], "unreachable");
    let errors = report["errors"].to_string();
    assert!(errors.contains("CRI: Connection refused"), "{errors}");

    type Plant = fn(&NodeTree, &Path);
    let cases: [(&str, Plant, &str); 4] = [
        (
            "the socket",
            |t, o| {
                t.symlink("/run/containerd/containerd.sock", o.join("containerd/containerd.sock"))
            },
            "/run/containerd/containerd.sock",
        ),
        (
            "a dir",
            |t, o| t.symlink("/run/containerd", o.join("containerd")),
            "/run/containerd/containerd.sock",
        ),
        ("/var/run, absolute", |t, o| t.symlink("/var/run", o), "/var/run/crio/crio.sock"),
        ("/run, relative", |t, _| t.symlink("/run", "../outside/run"), "/run/crio/crio.sock"),
    ];
    for (what, plant, through) in cases {
        use std::os::unix::fs::FileTypeExt;
        let node = NodeTree::new();
        let outside = node.outside().join("run");
        let containerd =
            Server::grpc_at(fake(), Some(outside.join("containerd/containerd.sock").as_path()));
        let crio = Server::grpc_at(fake(), Some(outside.join("crio/crio.sock").as_path()));
        plant(&node, &outside);
        // The kernel would follow it to the live socket outside.
        let kind = std::fs::metadata(node.host(through)).unwrap().file_type();
        assert!(kind.is_socket(), "{what}");
        let report = cri(&node);
        assert_eq!(report["cri"]["status"], "disabled", "{what}: {report}");
        drop((containerd, crio));
    }
}
