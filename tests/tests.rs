//! Integration tests for `kresidue`: one test binary (`autotests = false`) that runs the
//! built CLI over node trees laid out in temp dirs.
//!
//! - `util`: the `NodeTree` builder (`util/tree.rs`, kubelet and containerd layouts, shared
//!   with the benches), hostile entries, digests, fake secrets and kubectl JSON, and the
//!   `Kr` runner that checks every run for leaks/panics.
//! - `scan`: every kubelet site, every encoding, positions in a file, chunk boundaries,
//!   atomic-writer volumes, `--path`, `--kubelet-dir`, `--threads`.
//! - `fingerprint`: the fingerprint file (no leak, labels, type-aware selection, short
//!   values) and the property that fingerprint and `--secrets` modes agree.
//! - `deploy`: the DaemonSet (containerd, CRI-O, Docker) and CronJob manifests (read-only host mounts, arguments the
//!   CLI accepts), the DaemonSet's exact arguments run on the example node, and the
//!   node-problem-detector plugin config run the same way.
//! - `fleet`: the run lock, `--nice`, `--max-file-size`, `--timeout`, `-v`, the progress
//!   bar under a real pseudo-terminal and silence when piped.
//! - `formats`: SARIF validated against the published SARIF 2.1.0 schema, the Prometheus
//!   textfile parsed by a Prometheus text parser and compared with the JSON report (its
//!   per-secret series and their bound too), the node-problem-detector line.
//! - `alerts`: `deploy/alerts.yaml` through `promtool check rules`, and its alerts over
//!   the textfile of a runtime that answered, was unreachable and was not asked, by
//!   `promtool test rules` and by an evaluator of exactly those expressions.
//! - `fuzz_corpus`: every committed fuzz corpus input replayed through its target.
//! - `no_secret`: every subcommand, format and error path on a node full of values, and
//!   every file the tool wrote, searched for the values in every encoding.
//! - `report`: JSON schema, table output, `-o`, exit codes.
//! - `rules`: the built-in rules end to end: every rule on its own examples in realistic
//!   files, ordinary files of this machine (no rule may fire), JWT insight and severities,
//!   `--baseline`, counts, `kresidue rules`, `--no-rules`, matches straddling buffers.
//! - `coverage`: the built-in rules measured on an independent labelled corpus of
//!   credential formats (`tests/data/rule-corpus.txt`): recall and false positives per
//!   family, a ratchet of the families not yet at target.
//! - `containerd`: a real containerd (started by the test, private dirs, locally built
//!   images) driven over CRI like kubelet: a pod's secret env var found in `meta.db`, the
//!   task bundle, the writable layer and the pod log, attributed and live; a value baked
//!   into an image; kubelet pod dirs of a live and a dead pod; what remains once the
//!   container is stopped, then removed.
//! - `cri`: a fake CRI server speaking the same proto: NOTREADY sandboxes, exited and
//!   unknown containers; runtimes that never answer or answer garbage, a missing socket, a
//!   socket without permission; `--require-cri`; kubelet's dir learned from mounts; subPath
//!   copies current and stale; real tmpfs volumes of live, dead and unknown pods.
//! - `clean`: `kresidue clean` against the fake runtime: the plan (only pods with no
//!   sandbox, old enough, nothing foreign mounted), `--apply` through descriptors with a
//!   journal, idempotence, a volume swapped for a symlink or a bind mount appearing after
//!   the plan, two runs at once, a runtime that cannot be asked, real tmpfs and bind
//!   mounts (as root). The real containerd test cleans too.
//! - `incluster`: the `dist` build is static and runs in an empty environment; its OCI
//!   image (`scripts/build-image.sh`) imported into a real containerd and run as a pod
//!   over CRI exactly as `deploy/daemonset.yaml` says, its textfile read back.
//! - `distros`: every distribution's node layout (kubeadm, k3s, RKE2, MicroK8s, k0s, and
//!   their data moved by their configs) found and attributed alike; a data dir a config
//!   names that is missing is an error.
//! - `runtime`: every runtime's records over generated trees: containerd's `meta.db`
//!   (the crate's bbolt writer: attribution, freed pages, damaged databases), snapshots,
//!   content-store configs; Docker's and containers/storage's records, names, liveness,
//!   logs, volumes, image layers and configs; pod log links to runtime logs.
//! - `runtimes`: a real `dockerd` and a real Podman (private roots and sockets, images built
//!   from busybox-static, no network): env of running, exited and removed containers,
//!   writable layers, baked layers, build args and `ENV`, logs, volumes, data roots moved
//!   by the runtimes' own config, Docker's API socket given as `--cri`.
//! - `table`: the table for a person at 80, 120 and 200 columns under a real
//!   pseudo-terminal and piped (never wrapping, grouped by owner worst first, colour on a
//!   terminal only), `--wide`, and `clean`'s plan and `pods` fitted alike.
//! - `safety`: FIFOs, sockets, symlinks out of the root, loops, deep trees, a 1 GiB sparse
//!   file with bounded memory, nothing written by `--secrets`.

mod alerts;
mod clean;
mod containerd;
mod coverage;
mod cri;
mod datastores;
mod deploy;
mod discovery;
mod distros;
mod fingerprint;
mod fleet;
mod formats;
mod fuzz_corpus;
mod hostile;
mod images;
mod incluster;
mod leaks;
mod mounts;
mod no_secret;
mod outputs;
mod report;
mod rules;
mod runtime;
mod runtimes;
mod safety;
mod scan;
mod state;
mod table;
mod util;
mod witness;
