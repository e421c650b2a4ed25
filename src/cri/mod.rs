//! The CRI client: asks the node's container runtime, over the Kubernetes CRI gRPC API
//! (`runtime.v1.RuntimeService`) on its unix socket, which pods and containers exist.
//!
//! The rest of kresidue is synchronous; this module owns a single-threaded tokio runtime
//! and blocks on each call, and every call (the connection included) is bounded by one
//! timeout, so a runtime that accepts and never answers costs at most that long. A
//! runtime restarting is waited for, once per client and for at most one more timeout: a
//! socket refusing connections (or, once connected, gone) is tried again, a question whose
//! connection was lost is asked again on a new one, and so is one the runtime answers
//! with "not initialized yet" while it starts. A socket whose other end never answered as
//! a gRPC server gets one new connection (a runtime killed before it answered is taken
//! back by it); lost again without an answer, it is "not a CRI endpoint" (Docker's API
//! socket, an HTTP/1 server, one that closes at once), never a reconnect loop. What the
//! runtime says is reduced to a [`Live`] view: pods by uid and containers by id, with their
//! state, which the scan consults for `live`.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The generated `runtime.v1` messages and service stubs (`runtime.proto`, field numbers as
/// upstream `k8s.io/cri-api`).
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod proto {
    tonic::include_proto!("runtime.v1");
}

use crate::node::kubelet;
use crate::runtimes::Runtime;
use crate::sys::{RootDir, Socket};
use proto::runtime_service_client::RuntimeServiceClient;
use tonic::transport::Channel;

/// The sockets tried, in turn, when no `--cri` is given and the root is `/`: each
/// runtime's defaults, as each documents them ([`Runtime::endpoints`]: containerd's,
/// CRI-O's, cri-dockerd's), then each distribution's kubelet runtime's
/// ([`crate::distros::DISTROS`]: k3s's and RKE2's, MicroK8s's, k0s's).
pub fn default_endpoints() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    let distros = crate::distros::DISTROS.iter().flat_map(|d| d.sockets());
    for p in Runtime::endpoints().chain(distros) {
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// The sockets looked for beneath a root other than `/` when no `--cri` is given (see
/// [`beneath`]): [`default_endpoints`], each `/var/run/…` one also as `/run/…`. `/var/run`
/// is a symlink to `/run` on current distributions, an absolute one on some (Debian,
/// Ubuntu), and an absolute target is a path of this process's view to
/// [`RootDir::resolve`], which does not follow it out of the root.
pub fn beneath_endpoints() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for p in default_endpoints() {
        out.push(PathBuf::from(p));
        if let Some(run) = p.strip_prefix("/var/run/") {
            out.push(Path::new("/run").join(run));
        }
    }
    out
}

/// The default timeout of each call.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// The largest response accepted: kubelet's own limit (16 MiB), ample for thousands of
/// containers with their labels and annotations.
const MAX_MESSAGE: usize = 16 << 20;

/// A runtime's socket, as `unix:///path` or a plain absolute path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// The socket's path.
    pub path: PathBuf,
    /// The socket as found beneath the root ([`beneath`]): connected to through its
    /// directory's descriptor, never by `path`.
    beneath: Option<Socket>,
}

impl Endpoint {
    /// The socket at `path`.
    pub fn at(path: impl Into<PathBuf>) -> Endpoint {
        Endpoint { path: path.into(), beneath: None }
    }

    /// A new connection to the socket.
    async fn connect(&self) -> std::io::Result<tokio::net::UnixStream> {
        match &self.beneath {
            None => tokio::net::UnixStream::connect(&self.path).await,
            Some(socket) => {
                // The descriptor keeps the inode its `/proc/self/fd` path names.
                let (fd, path) = socket.open()?;
                let stream = tokio::net::UnixStream::connect(path).await;
                drop(fd);
                stream
            }
        }
    }

    /// True when a socket is at the endpoint now.
    fn is_socket(&self) -> bool {
        use std::os::unix::fs::FileTypeExt;
        match &self.beneath {
            None => std::fs::metadata(&self.path).is_ok_and(|m| m.file_type().is_socket()),
            Some(socket) => socket.open().is_ok(),
        }
    }

    /// Parses `unix:///path` or `/path`; any other scheme is refused (CRI runtimes listen
    /// on unix sockets).
    pub fn parse(s: &str) -> Result<Endpoint, String> {
        let path = match s.split_once("://") {
            Some(("unix", path)) => path,
            Some((_, _)) => {
                return Err("unsupported CRI endpoint scheme: use unix:///path".to_owned())
            }
            None => s,
        };
        if !path.starts_with('/') {
            return Err("the CRI endpoint is not an absolute socket path (unix:///path)".to_owned());
        }
        Ok(Endpoint::at(path))
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unix://{}", self.path.display())
    }
}

/// Why a call failed, in one line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error(String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl Error {
    /// One line, at most 300 characters, of what a peer said (it is not ours to trust):
    /// controls, format and separator characters escaped ([`crate::text::terminal_safe`]).
    fn from_peer(what: &str, detail: &str) -> Error {
        let detail: String = crate::text::terminal_safe(detail).chars().take(300).collect();
        Error(format!("{what}: {detail}"))
    }
}

/// A connection to a runtime.
pub struct Client {
    tokio: tokio::runtime::Runtime,
    inner: RuntimeServiceClient<Channel>,
    timeout: Duration,
    endpoint: Endpoint,
    /// `<name> <version>` as `Version` said, once [`connect`] asked.
    runtime: String,
    /// One line per call made (name, outcome, time), for `-vv`.
    trace: Vec<String>,
    /// Until when a restarting runtime may still be waited for: set by the first wait,
    /// one timeout long (see [`Client::ask`]).
    patience: Option<Instant>,
    /// The process id of the socket's other end (`SO_PEERCRED`) on the latest connection,
    /// 0 when the kernel could not say (a process of another PID namespace).
    peer: Arc<AtomicI32>,
    /// Set once the other end answered a call as a gRPC server (with an answer or a
    /// status of its own): from then on a lost connection is a runtime restarting, worth
    /// connecting again.
    answered: bool,
    /// Set when a connection was lost before any answer: the one new connection such a
    /// loss gets is used. A second loss without an answer means the socket is not a CRI
    /// endpoint (an HTTP/1 server such as Docker's API, a server that closes at once).
    lost_unanswered: bool,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("endpoint", &self.endpoint).finish_non_exhaustive()
    }
}

impl Client {
    /// Connects to `endpoint` (the HTTP/2 handshake included) within `timeout`.
    pub fn connect(endpoint: &Endpoint, timeout: Duration) -> Result<Client, Error> {
        let started = Instant::now();
        let tokio = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| Error(format!("cannot start the CRI client: {e}")))?;
        let peer = Arc::new(AtomicI32::new(0));
        let channel = open(&tokio, endpoint, timeout, started + timeout, false, &peer)?;
        let inner = RuntimeServiceClient::new(channel).max_decoding_message_size(MAX_MESSAGE);
        let shown = crate::text::terminal_safe(&endpoint.to_string());
        let trace = vec![format!("connected to {shown} in {}", millis(started.elapsed()))];
        Ok(Client {
            tokio,
            inner,
            timeout,
            endpoint: endpoint.clone(),
            runtime: String::new(),
            trace,
            patience: None,
            peer,
            answered: false,
            lost_unanswered: false,
        })
    }

    /// The calls made since the last take: one line each, with its outcome and time.
    pub fn take_trace(&mut self) -> Vec<String> {
        std::mem::take(&mut self.trace)
    }

    /// The process id of the runtime at the socket's other end, as the kernel says it
    /// (`SO_PEERCRED` of the latest connection: the process that listens); `None` when it
    /// is not a process of this PID namespace.
    pub fn peer_pid(&self) -> Option<i32> {
        Some(self.peer.load(Ordering::Relaxed)).filter(|&p| p > 0)
    }

    /// The endpoint this client is connected to.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The runtime's name and version (empty until [`connect`] asked `Version`).
    pub fn runtime(&self) -> &str {
        &self.runtime
    }

    /// Runs one call within the timeout: `call` gets the stub and returns its future.
    pub fn call<T, F, Fut>(&mut self, what: &str, call: F) -> Result<T, Error>
    where
        F: FnOnce(RuntimeServiceClient<Channel>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let fut = call(self.inner.clone());
        self.attempt(what, fut).map_err(|f| f.error(what, self.timeout))
    }

    /// Awaits one call's future within the timeout, and traces it.
    fn attempt<T, Fut>(&mut self, what: &str, fut: Fut) -> Result<T, Failed>
    where
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let timeout = self.timeout;
        let started = Instant::now();
        let answer = self.tokio.block_on(async { tokio::time::timeout(timeout, fut).await });
        let outcome = match &answer {
            Ok(Ok(_)) => "ok",
            Ok(Err(_)) => "error",
            Err(_) => "no answer",
        };
        self.trace.push(format!("{what}: {outcome} in {}", millis(started.elapsed())));
        self.answered |= match &answer {
            Ok(Ok(_)) => true,
            Ok(Err(status)) => !connection_lost(status),
            Err(_) => false,
        };
        match answer {
            Ok(Ok(response)) => Ok(response.into_inner()),
            Ok(Err(status)) => Err(Failed::Status(status)),
            Err(_) => Err(Failed::Timeout),
        }
    }

    /// As [`Client::call`], for a question that may be asked again: when the connection
    /// is gone (the runtime restarted since it was made) or the runtime says it is still
    /// starting, waits for it (connecting again if need be) and asks again. The waiting
    /// is allowed once per client, for one timeout in all, so a runtime that keeps
    /// failing costs at most one timeout more than its calls.
    fn ask<T, F, Fut>(&mut self, what: &str, mut call: F) -> Result<T, Error>
    where
        F: FnMut(RuntimeServiceClient<Channel>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        loop {
            let fut = call(self.inner.clone());
            let failure = match self.attempt(what, fut) {
                Ok(answer) => return Ok(answer),
                Err(f) => f,
            };
            let now = Instant::now();
            let lost = matches!(&failure, Failed::Status(s) if connection_lost(s));
            if lost && !self.answered {
                if self.lost_unanswered {
                    let why = failure.error(what, self.timeout).0;
                    return Err(Error(format!("the socket is not a CRI endpoint: {why}")));
                }
                self.lost_unanswered = true;
            }
            let starting = matches!(&failure, Failed::Status(s) if still_starting(s));
            if !(lost || starting) {
                return Err(failure.error(what, self.timeout));
            }
            let until = *self.patience.get_or_insert(now + self.timeout);
            if now + RETRY_PAUSE >= until {
                return Err(failure.error(what, self.timeout));
            }
            if lost {
                // A pause first: a runtime restarting takes longer than that anyway.
                std::thread::sleep(RETRY_PAUSE);
                let channel =
                    open(&self.tokio, &self.endpoint, self.timeout, until, true, &self.peer)
                        .map_err(|e| Error(format!("{what}: the connection was lost: {}", e.0)))?;
                self.inner =
                    RuntimeServiceClient::new(channel).max_decoding_message_size(MAX_MESSAGE);
                self.trace.push(format!("connected again in {}", millis(now.elapsed())));
            } else {
                std::thread::sleep(RETRY_PAUSE);
            }
        }
    }

    /// As [`Client::ask`], with a `NotFound` answer (the runtime knows no such object)
    /// as `None`.
    fn ask_found<T, F, Fut>(&mut self, what: &str, mut call: F) -> Result<Option<T>, Error>
    where
        F: FnMut(RuntimeServiceClient<Channel>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        self.ask(what, |c| {
            let fut = call(c);
            async move {
                match fut.await {
                    Ok(r) => Ok(tonic::Response::new(Some(r.into_inner()))),
                    Err(s) if s.code() == tonic::Code::NotFound => Ok(tonic::Response::new(None)),
                    Err(s) => Err(s),
                }
            }
        })
    }

    /// `Version`: the runtime's name and version.
    pub fn version(&mut self) -> Result<proto::VersionResponse, Error> {
        self.ask("Version", |mut c| async move {
            c.version(proto::VersionRequest { version: "v1".into() }).await
        })
    }

    /// `ListPodSandbox`, unfiltered: every sandbox in any state.
    pub fn pod_sandboxes(&mut self) -> Result<Vec<proto::PodSandbox>, Error> {
        self.ask("ListPodSandbox", |mut c| async move {
            c.list_pod_sandbox(proto::ListPodSandboxRequest { filter: None }).await
        })
        .map(|r| r.items)
    }

    /// `ListContainers`, unfiltered: every container in any state.
    pub fn containers(&mut self) -> Result<Vec<proto::Container>, Error> {
        self.ask("ListContainers", |mut c| async move {
            c.list_containers(proto::ListContainersRequest { filter: None }).await
        })
        .map(|r| r.containers)
    }

    /// `PodSandboxStatus` of one sandbox; `None` when the runtime knows no such sandbox.
    pub fn pod_sandbox_status(
        &mut self,
        id: &str,
    ) -> Result<Option<proto::PodSandboxStatus>, Error> {
        self.ask_found("PodSandboxStatus", |mut c| {
            let pod_sandbox_id = id.to_owned();
            async move {
                c.pod_sandbox_status(proto::PodSandboxStatusRequest {
                    pod_sandbox_id,
                    verbose: false,
                })
                .await
            }
        })
        .map(|r| r.and_then(|r| r.status))
    }

    /// `ContainerStatus` of one container; `None` when the runtime knows no such
    /// container.
    pub fn container_status(&mut self, id: &str) -> Result<Option<proto::ContainerStatus>, Error> {
        self.ask_found("ContainerStatus", |mut c| {
            let container_id = id.to_owned();
            async move {
                c.container_status(proto::ContainerStatusRequest { container_id, verbose: false })
                    .await
            }
        })
        .map(|r| r.and_then(|r| r.status))
    }

    /// `RemoveContainer`: the runtime removes the container and its writable layer.
    pub fn remove_container(&mut self, id: &str) -> Result<(), Error> {
        let container_id = id.to_owned();
        self.call("RemoveContainer", |mut c| async move {
            c.remove_container(proto::RemoveContainerRequest { container_id }).await
        })
        .map(|_| ())
    }
}

/// A connection failure, with the cause that says most (tonic wraps the I/O error).
fn connect_error(e: &(dyn std::error::Error + 'static)) -> Error {
    let cause = root_cause(e);
    if let Some(io) = cause.downcast_ref::<std::io::Error>() {
        return Error(crate::node::io_message(io));
    }
    Error::from_peer("cannot connect", &cause.to_string())
}

/// How an attempt at a call failed.
enum Failed {
    /// The runtime (or the transport) answered with an error status.
    Status(tonic::Status),
    /// No answer within the timeout.
    Timeout,
}

impl Failed {
    fn error(self, what: &str, timeout: Duration) -> Error {
        match self {
            Failed::Status(status) => status_error(what, &status),
            Failed::Timeout => {
                Error(format!("{what}: no answer within {} s", timeout.as_secs_f64()))
            }
        }
    }
}

/// True when the runtime answered that it is still starting (containerd's CRI plugin
/// says "server is not initialized yet" until it has loaded its state).
fn still_starting(status: &tonic::Status) -> bool {
    status.message().contains("not initialized yet")
}

/// True when a call failed because the connection is gone (the runtime went away or
/// restarted), rather than by the runtime's answer.
fn connection_lost(status: &tonic::Status) -> bool {
    let transport = std::error::Error::source(status)
        .is_some_and(|e| e.downcast_ref::<tonic::transport::Error>().is_some());
    transport
        || status.code() == tonic::Code::Unavailable
        || (status.code() == tonic::Code::Unknown && status.message() == "transport error")
}

/// Opens a channel to `endpoint` (the HTTP/2 handshake included) by `deadline`. The
/// channel makes this one connection only: when it is lost, calls on the channel fail, and
/// whether to open another is [`Client::ask`]'s decision. A socket that refuses connections (the
/// runtime is restarting: its socket is there but no one listens yet) is tried again every
/// 100 ms until the deadline; so is a missing one when `patient` (a runtime that was there
/// a moment ago removes and recreates its socket as it restarts).
fn open(
    tokio: &tokio::runtime::Runtime,
    endpoint: &Endpoint,
    timeout: Duration,
    deadline: Instant,
    patient: bool,
    peer: &Arc<AtomicI32>,
) -> Result<Channel, Error> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let target = endpoint.clone();
        let peer = peer.clone();
        // One connection per channel: the channel would otherwise connect again by itself
        // when its connection is lost, as often as it is asked, behind the back of
        // [`Client::ask`], which decides alone whether a lost connection is worth another.
        let used = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let connect = async move {
            // The URI is required by the API and ignored by the connector.
            tonic::transport::Endpoint::from_static("http://localhost")
                .connect_timeout(timeout)
                .connect_with_connector(tower::service_fn(move |_| {
                    let (target, peer, used) = (target.clone(), peer.clone(), used.clone());
                    async move {
                        if used.swap(true, Ordering::Relaxed) {
                            let lost = std::io::ErrorKind::ConnectionAborted;
                            return Err(std::io::Error::new(lost, "the connection was lost"));
                        }
                        let stream = target.connect().await?;
                        let pid = stream.peer_cred().ok().and_then(|c| c.pid()).unwrap_or(0);
                        peer.store(pid, Ordering::Relaxed);
                        Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
                    }
                }))
                .await
        };
        match tokio.block_on(async { tokio::time::timeout(left, connect).await }) {
            Ok(Ok(channel)) => return Ok(channel),
            Ok(Err(e)) if left > RETRY_PAUSE && worth_waiting(&e, endpoint, patient) => {
                std::thread::sleep(RETRY_PAUSE);
            }
            Ok(Err(e)) => return Err(connect_error(&e)),
            Err(_) => return Err(Error(format!("no answer within {} s", timeout.as_secs_f64()))),
        }
    }
}

/// How long to wait before trying a restarting runtime again.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// The innermost cause of an error.
fn root_cause<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> &'a (dyn std::error::Error + 'static) {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause
}

/// True when connecting failed in a way a restarting runtime causes: `ECONNREFUSED` on a
/// path that is a socket (connecting to a regular file fails the same way, and waiting
/// would not help it), or, when `patient`, no socket at all.
fn worth_waiting(
    e: &(dyn std::error::Error + 'static),
    endpoint: &Endpoint,
    patient: bool,
) -> bool {
    root_cause(e).downcast_ref::<std::io::Error>().is_some_and(|io| match io.kind() {
        std::io::ErrorKind::ConnectionRefused => endpoint.is_socket(),
        std::io::ErrorKind::NotFound => patient,
        _ => false,
    })
}

/// A call's failure status, in one line.
fn status_error(what: &str, status: &tonic::Status) -> Error {
    Error::from_peer(&format!("{what} failed ({:?})", status.code()), status.message())
}

/// Which runtime to ask, and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Choice {
    /// Not at all (`--no-cri`; or, without `--cri`, a root other than `/` with no
    /// runtime socket beneath it).
    Disabled,
    /// The endpoint `--cri` names.
    Given(Endpoint),
    /// The runtime sockets found beneath a root other than `/` ([`beneath`]), tried in
    /// turn.
    Found(Vec<Endpoint>),
    /// The first default socket that exists.
    Defaults,
}

/// A runtime that could not be asked: where (the endpoint, or the sockets looked for)
/// and why.
#[derive(Clone, Debug)]
pub struct Unreachable {
    /// The endpoint, as `unix:///path`.
    pub endpoint: String,
    /// Why.
    pub error: Error,
    /// The calls made before giving up (see [`Client::take_trace`]).
    pub trace: Vec<String>,
}

impl std::fmt::Display for Unreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CRI {}: {}", self.endpoint, self.error)
    }
}

impl Client {
    /// Every sandbox and container the runtime reports ([`Live::query`]), or why not.
    pub fn live(&mut self) -> Result<Live, Unreachable> {
        Live::query(self).map_err(|error| Unreachable {
            endpoint: self.endpoint.to_string(),
            error,
            trace: self.take_trace(),
        })
    }
}

/// A duration as milliseconds with one decimal (`2.5 ms`).
fn millis(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// Connects to the runtime `choice` names and asks its version. `Ok(None)` when it is
/// disabled.
pub fn connect(choice: &Choice, timeout: Duration) -> Result<Option<Client>, Unreachable> {
    let endpoints = match choice {
        Choice::Disabled => return Ok(None),
        Choice::Given(e) => vec![e.clone()],
        Choice::Found(found) => found.clone(),
        Choice::Defaults => {
            let defaults = default_endpoints();
            let found: Vec<Endpoint> =
                defaults.iter().filter(|p| Path::new(p).exists()).map(Endpoint::at).collect();
            if found.is_empty() {
                let shown: Vec<_> = defaults.iter().map(|p| format!("unix://{p}")).collect();
                return Err(Unreachable {
                    endpoint: shown.join(", "),
                    error: Error(
                        "no container runtime socket found (give one with --cri)".to_owned(),
                    ),
                    trace: Vec::new(),
                });
            }
            found
        }
    };
    // The first that answers: a node may hold a socket that is no CRI runtime's before
    // kubelet's (Docker's containerd with its CRI plugin off, beside k3s's).
    let mut first_error = None;
    for endpoint in endpoints {
        match connect_one(&endpoint, timeout) {
            Ok(client) => return Ok(Some(client)),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    Err(first_error.expect("at least one endpoint"))
}

/// Connects to `endpoint` and asks its version.
fn connect_one(endpoint: &Endpoint, timeout: Duration) -> Result<Client, Unreachable> {
    let unreachable = |error, trace| Unreachable { endpoint: endpoint.to_string(), error, trace };
    let mut client = Client::connect(endpoint, timeout).map_err(|e| unreachable(e, Vec::new()))?;
    let version = match client.version() {
        Ok(v) => v,
        Err(e) => return Err(unreachable(e, client.take_trace())),
    };
    client.runtime =
        format!("{} {}", version.runtime_name, version.runtime_version).trim().to_owned();
    Ok(client)
}

/// The runtime sockets beneath a root other than `/`, when no `--cri` is given: those of
/// [`beneath_endpoints`] that are sockets beneath `root`, in that order ([`RootDir::socket`]: never
/// through a symlink leading out of it). Beneath `kubectl debug node/NAME`'s `/host`, the
/// node's `/`, that is the node's runtime, and the host paths it names are node paths.
/// `None` when none is there: a mounted disk image has no socket (its runtime does not
/// run), and asks no runtime, as before. A socket there that does not answer (a stale one)
/// is the runtime unreachable, as with the root `/`.
pub fn beneath(root: &RootDir) -> Vec<Endpoint> {
    let found = beneath_endpoints().into_iter().filter_map(|node| {
        let socket = root.socket(&node).ok()?;
        Some(Endpoint { path: socket.path().to_owned(), beneath: Some(socket) })
    });
    found.collect()
}

/// kubelet's root dir (its `--root-dir`), learned from where the runtime's running
/// containers mount their volumes from: a mount's host path
/// `<root-dir>/pods/<uid>/{volumes,volume-subpaths,etc-hosts,containers}/…` names it.
/// Asks `ContainerStatus` of at most 16 running containers; `None` when none tells.
pub fn kubelet_dir(client: &mut Client) -> Result<Option<PathBuf>, Error> {
    let running = proto::ContainerState::ContainerRunning as i32;
    let containers = client.containers()?;
    for c in containers.iter().filter(|c| c.state == running).take(16) {
        let Some(status) = client.container_status(&c.id)? else { continue };
        if let Some(dir) = status.mounts.iter().find_map(|m| kubelet_root_of(&m.host_path)) {
            return Ok(Some(dir));
        }
    }
    Ok(None)
}

/// The kubelet root dir a pod's host path lies under, if it is one (a pod dir's
/// volumes, subPaths, `etc-hosts` or `containers` under it).
fn kubelet_root_of(host_path: &str) -> Option<PathBuf> {
    let parts: Vec<&str> = host_path.split('/').collect();
    let is_uid = |s: &str| s.len() >= 8 && s.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-');
    let at = parts.windows(3).position(|w| {
        w[0] == kubelet::PODS
            && is_uid(w[1])
            && [kubelet::VOLUMES, kubelet::SUBPATHS, kubelet::ETC_HOSTS, kubelet::CONTAINERS]
                .contains(&w[2])
    })?;
    let root = parts[..at].join("/");
    root.starts_with('/').then(|| PathBuf::from(root))
}

/// A pod sandbox as the runtime reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pod {
    /// The sandbox id.
    pub id: String,
    /// Pod uid, namespace and name (from the sandbox's metadata).
    pub uid: String,
    /// Pod namespace.
    pub namespace: String,
    /// Pod name.
    pub name: String,
    /// True when the sandbox is ready (its pod runs).
    pub ready: bool,
}

/// A container as the runtime reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Container {
    /// The container id.
    pub id: String,
    /// Its name in the pod.
    pub name: String,
    /// The sandbox it belongs to.
    pub sandbox: String,
    /// `created`, `running`, [`EXITED`] or `unknown`.
    pub state: &'static str,
}

/// The state of a container that has stopped (and is not yet removed).
pub const EXITED: &str = "exited";

impl Container {
    /// Stopped and not yet removed.
    pub fn exited(&self) -> bool {
        self.state == EXITED
    }

    /// Running or created: a container that is, or is about to be, alive.
    pub fn live(&self) -> bool {
        matches!(self.state, "running" | "created")
    }
}

/// What the runtime said: every sandbox and every container.
#[derive(Clone, Debug, Default)]
pub struct Live {
    /// Sandboxes by pod uid (a pod restarted in place has several: all are kept).
    pub pods: BTreeMap<String, Vec<Pod>>,
    /// Containers by id.
    pub containers: HashMap<String, Container>,
}

impl Live {
    /// Asks `client` for every sandbox and container.
    pub fn query(client: &mut Client) -> Result<Live, Error> {
        let sandboxes = client.pod_sandboxes()?;
        Ok(Live::from_lists(sandboxes, client.containers()?))
    }

    /// What the runtime's `ListPodSandbox` and `ListContainers` answers say.
    pub fn from_lists(
        sandboxes: Vec<proto::PodSandbox>,
        containers: Vec<proto::Container>,
    ) -> Live {
        let mut live = Live::default();
        for p in sandboxes {
            let meta = p.metadata.unwrap_or_default();
            let pod = Pod {
                id: p.id,
                uid: meta.uid,
                namespace: meta.namespace,
                name: meta.name,
                // READY is 0: absent on the wire, the default.
                ready: p.state == proto::PodSandboxState::SandboxReady as i32,
            };
            live.pods.entry(pod.uid.clone()).or_default().push(pod);
        }
        for c in containers {
            let state = match proto::ContainerState::try_from(c.state) {
                Ok(proto::ContainerState::ContainerCreated) => "created",
                Ok(proto::ContainerState::ContainerRunning) => "running",
                Ok(proto::ContainerState::ContainerExited) => EXITED,
                _ => "unknown",
            };
            let name = c.metadata.map(|m| m.name).unwrap_or_default();
            live.containers.insert(
                c.id.clone(),
                Container { id: c.id, name, sandbox: c.pod_sandbox_id, state },
            );
        }
        live
    }

    /// Every name and id the runtime reported: the sandboxes' ids and their pods' uids,
    /// namespaces and names, the containers' ids, names and sandboxes (not the keys they
    /// are found by).
    pub fn names_mut(&mut self) -> impl Iterator<Item = &mut String> {
        let pods = self
            .pods
            .values_mut()
            .flatten()
            .flat_map(|p| [&mut p.id, &mut p.uid, &mut p.namespace, &mut p.name]);
        let containers =
            self.containers.values_mut().flat_map(|c| [&mut c.id, &mut c.name, &mut c.sandbox]);
        pods.chain(containers)
    }

    /// Whether a pod with `uid` has a sandbox, in any state.
    pub fn pod_live(&self, uid: &str) -> bool {
        self.pods.contains_key(uid)
    }

    /// Whether the container `id` is running or created; false when the runtime does not
    /// know it.
    pub fn container_live(&self, id: &str) -> bool {
        self.containers.get(id).is_some_and(Container::live)
    }

    /// Whether a container named `name` in a sandbox of the pod `uid` is running or
    /// created.
    pub fn container_live_in(&self, uid: &str, name: &str) -> bool {
        let Some(sandboxes) = self.pods.get(uid) else { return false };
        self.containers
            .values()
            .any(|c| c.name == name && c.live() && sandboxes.iter().any(|p| p.id == c.sandbox))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse() {
        let e = Endpoint::parse("unix:///run/containerd/containerd.sock").unwrap();
        assert_eq!(e.path, Path::new("/run/containerd/containerd.sock"));
        assert_eq!(e.to_string(), "unix:///run/containerd/containerd.sock");
        assert_eq!(
            Endpoint::parse("/run/crio/crio.sock").unwrap().path,
            Path::new("/run/crio/crio.sock")
        );
        for bad in ["tcp://1.2.3.4:10010", "npipe:////./pipe/x", "run/x.sock", "unix://relative"] {
            assert!(Endpoint::parse(bad).is_err(), "{bad}");
        }
    }

    /// What a newer runtime adds is skipped; a ready sandbox's state (0) is absent on the
    /// wire and decodes as ready.
    #[test]
    fn unknown_fields_and_default_states_decode() {
        use prost::Message;
        let pod = proto::PodSandbox {
            id: "s1".into(),
            metadata: Some(proto::PodSandboxMetadata { uid: "u1".into(), ..Default::default() }),
            ..Default::default()
        };
        let mut item = pod.encode_to_vec();
        assert!(!item.windows(2).any(|w| w == [0x18, 0x00]), "state 0 is not encoded");
        // Field 99 (varint) and field 100 (bytes), unknown to this proto.
        item.extend_from_slice(&[0x98, 0x06, 0x01, 0xa2, 0x06, 0x03, b'x', b'y', b'z']);
        let mut list = vec![0x0a, item.len() as u8];
        list.extend_from_slice(&item);
        let decoded = proto::ListPodSandboxResponse::decode(&list[..]).unwrap();
        assert_eq!(decoded.items, vec![pod]);
        assert_eq!(decoded.items[0].state, proto::PodSandboxState::SandboxReady as i32);
    }

    #[test]
    fn kubelet_root_from_mount_sources() {
        let uid = "5d1c3b7a-0e2f-4a6b-8c9d-1e2f3a4b5c6d";
        for (path, want) in [
            (
                format!("/var/lib/kubelet/pods/{uid}/volumes/kubernetes.io~secret/db"),
                Some("/var/lib/kubelet"),
            ),
            (format!("/data/k/pods/{uid}/etc-hosts"), Some("/data/k")),
            (format!("/srv/pods/{uid}/volume-subpaths/cfg/app/0"), Some("/srv")),
            (format!("/var/lib/kubelet/pods/{uid}"), None),
            ("/var/log/pods/shop_web-0_x/app".to_owned(), None),
            (format!("pods/{uid}/volumes/x"), None),
            ("/etc/resolv.conf".to_owned(), None),
        ] {
            assert_eq!(kubelet_root_of(&path), want.map(PathBuf::from), "{path}");
        }
    }

    #[test]
    fn peer_text_is_one_bounded_line() {
        let e = Error::from_peer("ListContainers failed", &format!("a\nb\r{}", "x".repeat(1000)));
        let s = e.to_string();
        assert!(!s.contains('\n') && !s.contains('\r'));
        assert!(s.len() < 400);
        let e = Error::from_peer("Version failed", "a\u{202e}b\u{200b}c\u{2028}d\u{e0041}e");
        let s = e.to_string();
        for c in ['\u{202e}', '\u{200b}', '\u{2028}', '\u{e0041}'] {
            assert!(!s.contains(c), "{s}");
        }
        assert!(s.contains("a\\u{202e}b"), "{s}");
    }
}
