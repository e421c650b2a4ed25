//! Mounts the scan meets, for real (as root; each test says it is skipped otherwise): a
//! FUSE filesystem that never answers below a pod dir is listed as not read and never
//! touched (the scan and `clean` finish, a stop signal still ends a run at once), nor one
//! mounted over a file the scan state holds; a
//! persistent volume (a loop-mounted ext4 at a CSI volume's `mount`) is read only with
//! `--read-csi-volumes`; the tmpfs of a Secret volume, of a Secrets Store CSI volume and a
//! subPath bind mount of one are read; and the scan changes no access time on a
//! `strictatime` tmpfs, directories and symlinks included.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::cri::{mount, Mounted};
use crate::util::fuse::HangingFuse;
use crate::util::*;

const UID: &str = "5eed0000-4a11-4b0c-9d1e-00000000f0f0";

/// Runs with a timeout generous enough that only a hang reaches it.
const HANG: Duration = Duration::from_secs(60);

macro_rules! needs_root {
    () => {
        if !is_root() {
            // The skip message is for the person running the tests.
            #[allow(clippy::print_stderr)]
            {
                eprintln!("skipped: real mounts need root");
            }
            return;
        }
    };
}

/// A node whose pod has one fingerprinted value in a secret volume on disk; the value
/// and the `--secrets` file.
fn node() -> (NodeTree, String, PathBuf) {
    let tree = NodeTree::new();
    let (value, secrets) = db_password(&tree, 7101);
    tree.pod(UID).secret_volume("db").key("password", value.as_bytes());
    let file = tree.secrets_file("secrets.json", &secrets);
    (tree, value, file)
}

/// A file the last scan read, then covered by a FUSE filesystem that never answers
/// (mounted over that one file): the rescan with the state asks the identity of each
/// file by name without opening it, and must not wait on the mount. It lists the file as
/// not read, finds the value beside it, takes the rest from the state, and finishes.
#[test]
fn a_mount_over_a_file_the_state_holds_is_not_waited_on() {
    needs_root!();
    let (tree, _, file) = node();
    let pod = tree.pod(UID);
    let cache = pod.path("volumes/kubernetes.io~empty-dir/cache/app.log");
    pod.file("volumes/kubernetes.io~empty-dir/cache/app.log", &filler(7, 30_000));
    let fp = tree.fingerprint_file(&file, &[], "values.fp");
    // Older than the state's granularity (2 s) by the first scan: trusted by the next.
    std::thread::sleep(Duration::from_millis(2100));
    let state = tree.work("state");
    let scan = || {
        let mut args = vec!["scan", "--root", tree.root_arg(), "--no-cri", "--format", "json"];
        args.extend(["--fingerprints", path_arg(&fp), "--state", path_arg(&state)]);
        let out = tree.kr().timeout(HANG).run(&[args, vec!["--timeout", "20s"]].concat());
        out.assert_code(1);
        out
    };
    let first = scan();
    let files = first.json()["summary"]["files"].as_u64().unwrap();
    let mut fuse = HangingFuse::mount_file(&tree.host(&cache));
    let second = scan();
    assert_eq!(fuse.requests(), 0, "the mounted filesystem was asked");
    drop(fuse);
    let report = second.json();
    assert_eq!(unread(report), vec![(cache.clone(), "fuse".to_owned())], "{report:#}");
    assert_eq!(report["summary"]["incomplete"], false, "{report:#}");
    assert_eq!(report["summary"]["unchanged_files"], files - 1, "{report:#}");
    let password = pod.path("volumes/kubernetes.io~secret/db/password");
    assert_eq!(found(&second), vec![(password, "non-tmpfs-volume".to_owned())]);
}

/// `scan --root R --no-cri --secrets FILE ARGS`, without digesting the tree (a digest
/// would itself hang on the FUSE mount).
fn scan_undigested(tree: &NodeTree, file: &Path, args: &[&str]) -> Out {
    let mut full = vec!["scan", "--root", tree.root_arg(), "--no-cri", "--secrets", path_arg(file)];
    full.extend_from_slice(args);
    tree.kr().timeout(HANG).run(&full)
}

fn unread(report: &Value) -> Vec<(String, String)> {
    report["unread_mounts"]
        .as_array()
        .unwrap_or_else(|| panic!("no unread_mounts: {report:#}"))
        .iter()
        .map(|m| (m["path"].as_str().unwrap().to_owned(), m["type"].as_str().unwrap().to_owned()))
        .collect()
}

/// The node paths of a report's findings and their categories.
fn found(out: &Out) -> Vec<(String, String)> {
    out.findings().into_iter().map(|f| (f.path, f.category)).collect()
}

/// A FUSE filesystem that never answers, mounted below a pod dir (where an NFS volume is):
/// the scan finishes, lists it as not read (`fuse`) in every format, still finds the value
/// beside it, and exits as usual; `clean` (a dry run) finishes and names it; a run stopped
/// by SIGTERM exits 143 at once and leaves the lock free. Before, the walk waited on the
/// mount for ever: `--timeout` and SIGTERM did nothing.
#[test]
fn a_hanging_fuse_mount_is_listed_and_never_touched() {
    needs_root!();
    let (tree, value, file) = node();
    let pod = tree.pod(UID);
    let nfs = pod.path("volumes/kubernetes.io~nfs/data");
    let fuse = HangingFuse::mount(&tree.host(&nfs));
    let out = scan_undigested(&tree, &file, &["--format", "json", "--timeout", "20s"]);
    out.assert_code(1);
    let report = out.json();
    assert_eq!(unread(report), vec![(nfs.clone(), "fuse".to_owned())], "{report:#}");
    assert_eq!(report["summary"]["unread_mounts"], 1, "{report:#}");
    assert_eq!(report["summary"]["incomplete"], false, "{report:#}");
    let password = pod.path("volumes/kubernetes.io~secret/db/password");
    assert_eq!(found(&out), vec![(password, "non-tmpfs-volume".to_owned())]);

    let table = scan_undigested(&tree, &file, &[]);
    table.assert_code(1);
    let text = table.stdout_str();
    assert!(text.contains("; 1 mount not read;"), "{text}");
    assert!(text.contains(&format!("not read: {nfs} (fuse mounted)")), "{text}");
    let prom = scan_undigested(&tree, &file, &["--format", "prometheus", "--fail-on", "never"]);
    prom.assert_code(0);
    assert!(prom.stdout_str().contains("\nkresidue_unread_mounts 1\n"), "{}", prom.stdout_str());
    let sarif = scan_undigested(&tree, &file, &["--format", "sarif"]);
    let doc: Value = serde_json::from_slice(&sarif.stdout).unwrap();
    let props = &doc["runs"][0]["properties"];
    assert_eq!(props["unread_mounts"], json!([{ "path": nfs, "type": "fuse" }]), "{props:#}");
    assert_eq!(props["summary"]["unread_mounts"], 1, "{props:#}");

    let server = crate::cri::Server::grpc(crate::cri::fake());
    let endpoint = server.endpoint();
    let clean = tree.kr().timeout(HANG).run(&[
        "clean",
        "--root",
        tree.root_arg(),
        "--cri",
        &endpoint,
        "--secrets",
        path_arg(&file),
        "--format",
        "json",
    ]);
    clean.assert_code(0);
    let errors = &clean.json()["errors"];
    let named = errors.as_array().unwrap().iter().any(|e| {
        e["path"] == nfs.as_str() && e["error"].as_str().unwrap().contains("fuse filesystem")
    });
    assert!(named, "{errors:#}");

    // Stopped while it waits for its next round: 143 at once, and the lock is free.
    let mut child = Command::new(env!("CARGO_BIN_EXE_kresidue"))
        .args(["scan", "--root", tree.root_arg(), "--no-cri", "--secrets", path_arg(&file)])
        .args(["--format", "json", "--every", "1h"])
        .env("KRESIDUE_LOCK", tree.work("kresidue.lock"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    assert!(child.try_wait().unwrap().is_none(), "the run ended before the signal");
    let kill = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    assert!(kill.unwrap().success());
    let sent = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if sent.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("SIGTERM did not end the run in 10 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(143));
    let out = child.wait_with_output().unwrap();
    let first: Value = serde_json::from_slice(&out.stdout).expect("the first round's report");
    assert_eq!(unread(&first), vec![(nfs.clone(), "fuse".to_owned())]);
    tree.guard(value.as_bytes());
    let again = scan_undigested(&tree, &file, &["--format", "json"]);
    again.assert_code(1);
    drop(fuse);
}

/// A FUSE filesystem on the way to a scope (`--path` below it, and `--path` at it): not
/// walked, listed as not read.
#[test]
fn a_scope_on_a_fuse_mount_is_not_walked() {
    needs_root!();
    let (tree, _, file) = node();
    let fuse = HangingFuse::mount(&tree.host("/mnt/remote"));
    let out = scan_undigested(&tree, &file, &["--format", "json", "--path", "/mnt/remote"]);
    out.assert_code(1);
    assert_eq!(unread(out.json()), vec![("/mnt/remote".to_owned(), "fuse".to_owned())]);
    drop(fuse);
}

/// Bind-mounts the file `from` onto the file `at` (as kubelet mounts a subPath file).
fn bind_file(from: &Path, at: &Path) -> Mounted {
    let ok = Command::new("mount").arg("--bind").arg(from).arg(at).status();
    assert!(ok.is_ok_and(|s| s.success()), "mount --bind {}", at.display());
    Mounted(at.to_path_buf())
}

/// A FUSE filesystem where discovery looks before the walk: at a CSI volume's `mount`
/// (a FUSE-based CSI driver, whose `vol_data.json` even claims to be the Secrets Store
/// driver's), at a Secret volume dir, and a `--path` inside a FUSE mount: the scan
/// finishes and lists each as not read. A `--root` on one is refused.
#[test]
fn discovery_never_touches_a_fuse_mount() {
    needs_root!();
    let (tree, _, file) = node();
    let pod = tree.pod(UID);
    let csi = pod.path("volumes/kubernetes.io~csi/s3/mount");
    tree.write(
        pod.path("volumes/kubernetes.io~csi/s3/vol_data.json"),
        br#"{"driverName":"secrets-store.csi.k8s.io"}"#,
    );
    let secret = pod.path("volumes/kubernetes.io~secret/fused");
    let mounts = [
        HangingFuse::mount(&tree.host(&csi)),
        HangingFuse::mount(&tree.host(&secret)),
        HangingFuse::mount(&tree.host("/mnt/remote")),
    ];
    let out = scan_undigested(&tree, &file, &["--format", "json", "--path", "/mnt/remote/sub"]);
    out.assert_code(1);
    let fuse = |p: &str| (p.to_owned(), "fuse".to_owned());
    assert_eq!(
        unread(out.json()),
        vec![fuse("/mnt/remote"), fuse(&csi), fuse(&secret)],
        "{}",
        out.stdout_str()
    );
    // A root on one (or below one) is refused at once: exit 2, one line.
    for root in ["/mnt/remote", "/mnt/remote/node"] {
        let root = tree.host(root);
        let out = tree.kr().timeout(HANG).run(&["scan", "--root", path_arg(&root), "--no-cri"]);
        out.assert_code(2).assert_one_line_error();
        assert!(out.stderr_str().contains("on a fuse filesystem"), "{}", out.stderr_str());
    }
    drop(mounts);
}

/// Makes an ext4 filesystem in a 4 MiB file and loop-mounts it at `at`.
fn ext4(tree: &NodeTree, name: &str, at: &Path) -> Mounted {
    let image = tree.work(name);
    std::fs::write(&image, vec![0u8; 4 << 20]).unwrap();
    let made = Command::new("mkfs.ext4")
        .args(["-q", "-F"])
        .arg(&image)
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(made, "mkfs.ext4 {}", image.display());
    mount(&["-o", "loop", path_arg(&image)], at)
}

/// A persistent volume (a loop-mounted ext4 at a CSI volume's `mount`, another driver's)
/// holding a fingerprinted value: not read by default (listed, no finding, no
/// `non-tmpfs-volume`); read with `--read-csi-volumes`, as the application's data (site and
/// category `other`). Before, it was read on every scan and reported as a critical
/// `non-tmpfs-volume`.
#[test]
fn a_persistent_volume_is_read_only_when_asked() {
    needs_root!();
    let (tree, value, file) = node();
    let pod = tree.pod(UID);
    tree.write(
        pod.path("volumes/kubernetes.io~csi/pvc-1/vol_data.json"),
        br#"{"driverName":"ebs.csi.aws.com","specVolID":"pvc-1","volumeHandle":"vol-0a1b"}"#,
    );
    let at = pod.path("volumes/kubernetes.io~csi/pvc-1/mount");
    let pv = ext4(&tree, "pv.img", &tree.host(&at));
    let dump = format!("{at}/dump.sql");
    tree.write(&dump, format!("INSERT INTO creds VALUES ('{value}');\n").as_bytes());
    let args = ["--secrets", path_arg(&file), "--format", "json"];
    let out = tree.scan(&args);
    out.assert_code(1);
    assert_eq!(unread(out.json()), vec![(at.clone(), "ext4".to_owned())]);
    let password = pod.path("volumes/kubernetes.io~secret/db/password");
    assert_eq!(found(&out), vec![(password.clone(), "non-tmpfs-volume".to_owned())]);

    let mut asked = args.to_vec();
    asked.push("--read-csi-volumes");
    let out = tree.scan(&asked);
    out.assert_code(1);
    assert_eq!(unread(out.json()), vec![]);
    let f: Vec<_> = out.findings().into_iter().map(|f| (f.path, f.category, f.site)).collect();
    assert_eq!(
        f,
        vec![
            (dump, "other".to_owned(), "other".to_owned()),
            (password, "non-tmpfs-volume".to_owned(), "kubelet-secret-volume".to_owned()),
        ]
    );
    drop(pv);
}

/// The tmpfs kubelet mounts at a Secret volume, the Secrets Store CSI driver's tmpfs at its
/// volume's `mount` (its `vol_data.json` says the driver), and subPath bind mounts of one
/// (a file and a dir) are read; a tmpfs at another driver's CSI volume and a bind mount of
/// a dir outside the root into an emptyDir are not.
#[test]
fn secret_tmpfs_mounts_are_read_and_nothing_else() {
    needs_root!();
    let tree = NodeTree::new();
    let (value, secrets) = db_password(&tree, 7301);
    let file = tree.secrets_file("secrets.json", &secrets);
    let pod = tree.pod(UID);
    let mut mounts = Vec::new();
    let tmpfs = |at: &str| mount(&["-t", "tmpfs", "-o", "size=1m", "tmpfs"], &tree.host(at));
    let secret = pod.path("volumes/kubernetes.io~secret/db");
    mounts.push(tmpfs(&secret));
    pod.secret_volume("db").key("password", value.as_bytes());
    let csi = pod.path("volumes/kubernetes.io~csi/vault/mount");
    mounts.push(tmpfs(&csi));
    pod.csi_volume("vault").key("password", value.as_bytes());
    let other = pod.path("volumes/kubernetes.io~csi/other/mount");
    tree.write(
        pod.path("volumes/kubernetes.io~csi/other/vol_data.json"),
        br#"{"driverName":"example.csi.k8s.io"}"#,
    );
    mounts.push(tmpfs(&other));
    tree.write(format!("{other}/password"), value.as_bytes());
    // subPath sources on a tmpfs outside the root, bind-mounted as kubelet does.
    let source = tree.outside().join("subpath-source");
    mounts.push(mount(&["-t", "tmpfs", "-o", "size=1m", "tmpfs"], &source));
    std::fs::write(source.join("password"), &value).unwrap();
    std::fs::create_dir(source.join("dir")).unwrap();
    std::fs::write(source.join("dir/password"), &value).unwrap();
    let sub_file = pod.subpath("db", "app", 0, b"");
    mounts.push(bind_file(&source.join("password"), &tree.host(&sub_file)));
    let sub_dir = pod.path("volume-subpaths/db/app/1");
    mounts.push(mount(&["--bind", path_arg(&source.join("dir"))], &tree.host(&sub_dir)));
    let empty_dir = pod.path("volumes/kubernetes.io~empty-dir/cache/sub");
    let data = tree.outside().join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("password"), &value).unwrap();
    mounts.push(mount(&["--bind", path_arg(&data)], &tree.host(&empty_dir)));

    let mut want = vec![
        (format!("{csi}/password"), "orphaned-volume".to_owned()),
        (format!("{secret}/password"), "orphaned-volume".to_owned()),
        (sub_file, "stale-subpath".to_owned()),
        (format!("{sub_dir}/password"), "stale-subpath".to_owned()),
    ];
    want.sort();
    // A `--path /` leaves the pod dir to its own scope: the same mounts are entered and
    // the same left unread (issue 51: it walked the pod again, finding its tmpfs mounts
    // unread as `other`'s).
    for extra in [&[][..], &["--path", "/"]] {
        let args = [&["--secrets", path_arg(&file), "--format", "json"][..], extra].concat();
        let out = tree.scan(&args);
        out.assert_code(1);
        let mut got = found(&out);
        got.sort();
        assert_eq!(got, want, "{extra:?}: {}", out.stdout_str());
        // (The bind mount's type is that of the filesystem the tests run on.)
        let unread: Vec<_> =
            unread(out.json()).into_iter().map(|(path, t)| (path, t == "tmpfs")).collect();
        let want = vec![(other.clone(), true), (empty_dir.clone(), false)];
        assert_eq!(unread, want, "{extra:?}: {}", out.stdout_str());
    }
    drop(mounts);
}

/// Every entry's access time, with nanoseconds (`statx` reads it without changing it).
fn atimes(paths: &[PathBuf]) -> Vec<(PathBuf, i64, i64)> {
    use std::os::unix::fs::MetadataExt;
    paths
        .iter()
        .map(|p| {
            let md = std::fs::symlink_metadata(p).unwrap();
            (p.clone(), md.atime(), md.atime_nsec())
        })
        .collect()
}

fn every_entry(dir: &Path, out: &mut Vec<PathBuf>) {
    out.push(dir.to_path_buf());
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            every_entry(&e.path(), out);
        } else {
            out.push(e.path());
        }
    }
}

/// On a `strictatime` tmpfs (every read updates an atime), `scan` (the walk, discovery's
/// listings of pods and volumes, the atomic-writer links) and a `clean` dry run change no
/// entry's access time: directories, symlinks and files. Before, 26 of 42 changed.
#[test]
fn the_scan_changes_no_access_time() {
    needs_root!();
    let tree = NodeTree::new();
    let (value, secrets) = db_password(&tree, 7401);
    let file = tree.secrets_file("secrets.json", &secrets);
    let root = tree.host("/");
    let _tmpfs = mount(&["-t", "tmpfs", "-o", "size=8m,strictatime", "tmpfs"], &root);
    tree.mkdir(format!("{}/pods", tree.kubelet_dir()));
    tree.write("/etc/hostname", b"node-a\n");
    let pod = tree.pod(UID);
    pod.secret_volume("db").key("password", value.as_bytes()).key("user", b"app");
    pod.projected_volume("token").key("token", b"not a token at all");
    pod.csi_volume("vault").key("password", value.as_bytes());
    pod.subpath("db", "app", 0, value.as_bytes());
    pod.file("containers/app/1a2b3c4d", b"");
    pod.file("volumes/kubernetes.io~empty-dir/cache/notes.txt", b"nothing here\n");
    tree.symlink(pod.path("volumes/kubernetes.io~empty-dir/cache/link"), "notes.txt");
    tree.write(
        format!("/var/log/pods/ns_app_{UID}/app/0.log"),
        b"2025-01-01T00:00:00Z stdout F hello\n",
    );
    tree.write("/srv/extra/config.yaml", b"key: value\n");
    let mut paths = Vec::new();
    every_entry(&root, &mut paths);
    // Listing them set their atimes just now; a later read must be seen as a change.
    std::thread::sleep(Duration::from_millis(50));
    let before = atimes(&paths);
    let args = ["--root", tree.root_arg(), "--no-cri", "--secrets", path_arg(&file)];
    let mut scan = vec!["scan", "--path", "/srv/extra"];
    scan.extend_from_slice(&args);
    let out = tree.kr().run(&scan);
    out.assert_code(1);
    let changed: Vec<_> = before
        .iter()
        .zip(atimes(&paths))
        .filter(|(a, b)| **a != *b)
        .map(|(a, _)| a.0.strip_prefix(&root).unwrap().display().to_string())
        .collect();
    assert!(
        changed.is_empty(),
        "{} of {} atimes changed by scan: {changed:#?}",
        changed.len(),
        paths.len()
    );
    // clean asks a runtime (without one it refuses): the fake one.
    let server = crate::cri::Server::grpc(crate::cri::fake());
    let endpoint = server.endpoint();
    let mut clean = vec!["clean", "--cri", &endpoint];
    clean.extend(args.iter().filter(|a| **a != "--no-cri"));
    let out = tree.kr().run(&clean);
    out.assert_code(0);
    let changed: Vec<_> = before
        .iter()
        .zip(atimes(&paths))
        .filter(|(a, b)| **a != *b)
        .map(|(a, _)| a.0.strip_prefix(&root).unwrap().display().to_string())
        .collect();
    assert!(
        changed.is_empty(),
        "{} of {} atimes changed by clean: {changed:#?}",
        changed.len(),
        paths.len()
    );
}

/// Issue 46 review, break 2: mount points in a runtime's container dirs. A filesystem
/// mounted at an entry of a Docker container's dir (`checkpoints`, bound from outside the
/// root) is listed as not read, never read as the container's; the tmpfs Docker mounts at
/// `mounts/secrets` while a swarm service runs is read (its secrets, the container's); a
/// container's `/dev/shm` tmpfs (Docker's `mounts/shm`, Podman's `userdata/shm`) is
/// neither read nor listed (the app's memory while it runs); a plain `shm` dir, no mount,
/// holds what something else left there, and is read.
#[test]
fn mounts_in_container_dirs() {
    needs_root!();
    let tree = NodeTree::new();
    let (value, secrets) = db_password(&tree, 7501);
    let file = tree.secrets_file("secrets.json", &secrets);
    let docker = "/var/lib/docker/containers";
    let (b, d) = ("b1".repeat(32), "d1".repeat(32));
    for cid in [&b, &d] {
        let record = json!({"Name": "/job", "State": {"Running": false, "ExitCode": 0},
            "Config": {"Image": "busybox", "Env": [], "Labels": {}}});
        tree.write(format!("{docker}/{cid}/config.v2.json"), record.to_string().as_bytes());
    }
    let mut mounts = Vec::new();
    let outside = tree.outside().join("elsewhere");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("password"), &value).unwrap();
    let checkpoints = format!("{docker}/{b}/checkpoints");
    mounts.push(mount(&["--bind", path_arg(&outside)], &tree.host(&checkpoints)));
    let tmpfs = |at: &str| mount(&["-t", "tmpfs", "-o", "size=1m", "tmpfs"], &tree.host(at));
    let swarm = format!("{docker}/{b}/mounts/secrets");
    mounts.push(tmpfs(&swarm));
    tree.write(format!("{swarm}/db_password"), value.as_bytes());
    let shm = format!("{docker}/{b}/mounts/shm");
    mounts.push(tmpfs(&shm));
    tree.write(format!("{shm}/cache"), value.as_bytes());
    let plain_shm = format!("{docker}/{d}/mounts/shm/cache");
    tree.write(&plain_shm, value.as_bytes());
    let containers = "/var/lib/containers/storage/overlay-containers";
    let p = "c3".repeat(32);
    let records = json!([{"id": p, "layer": "c4".repeat(32), "names": ["one"]}]);
    tree.write(format!("{containers}/containers.json"), records.to_string().as_bytes());
    let podman_shm = format!("{containers}/{p}/userdata/shm");
    mounts.push(tmpfs(&podman_shm));
    tree.write(format!("{podman_shm}/cache"), value.as_bytes());
    // Part of a tmpfs bound at a container's shm: no runtime mounts that, listed.
    let part = tree.outside().join("part");
    mounts.push(mount(&["-t", "tmpfs", "-o", "size=1m", "tmpfs"], &part));
    std::fs::create_dir(part.join("sub")).unwrap();
    let e = "e1".repeat(32);
    let record = json!({"Name": "/job", "State": {"Running": false, "ExitCode": 0}});
    tree.write(format!("{docker}/{e}/config.v2.json"), record.to_string().as_bytes());
    let bound_shm = format!("{docker}/{e}/mounts/shm");
    mounts.push(mount(&["--bind", path_arg(&part.join("sub"))], &tree.host(&bound_shm)));

    let out = tree.scan(&["--secrets", path_arg(&file), "--format", "json"]);
    out.assert_code(1);
    let mut want = vec![
        (format!("{swarm}/db_password"), "dead-container".to_owned()),
        (plain_shm, "dead-container".to_owned()),
    ];
    want.sort();
    let mut got = found(&out);
    got.sort();
    assert_eq!(got, want, "{}", out.stdout_str());
    let unread: Vec<_> = unread(out.json()).into_iter().map(|(path, _)| path).collect();
    let mut want_unread = vec![checkpoints, bound_shm];
    want_unread.sort();
    assert_eq!(unread, want_unread, "{}", out.stdout_str());
    drop(mounts);
}

/// Issue 48: a node whose kubelet dir was copied to a local disk and mounted back over the
/// original (EKS's `setup-local-disks`, GKE's local SSDs): what the mount hides on the
/// filesystem beneath, a copy the node no longer sees, is read (a detached clone of the
/// filesystem, nothing mounted in the node's namespace) and reported as hidden beneath a
/// mount at its node path; what the mount shows is read as ever; a dir mounted over itself
/// hides nothing and is read once. The mount table is the same after the scan.
#[test]
fn what_a_mount_over_a_moved_dir_hides_is_found() {
    needs_root!();
    let tree = NodeTree::new();
    let (old, mut secrets) = (String::from_utf8(fake_secret(7141)).unwrap(), Vec::new());
    let new = String::from_utf8(fake_secret(7142)).unwrap();
    secrets.push(Secret::opaque("shop", "old", &[("password", old.as_bytes())]));
    secrets.push(Secret::opaque("shop", "new", &[("password", new.as_bytes())]));
    tree.guard_secrets(&secrets);
    const MOVED: &str = "7e57ab1e-0000-4000-8000-00000000c0de";
    // The copy left beneath: a pod's volume and its log.
    tree.pod(UID).secret_volume("db").key("password", old.as_bytes());
    tree.pod(UID).log(
        "shop",
        "web",
        "app",
        "0.log",
        format!("2026-01-01T00:00:00Z stdout F pw={old}\n").as_bytes(),
    );
    // The local disk, mounted over kubelet's dir and the pod logs.
    let disk = tree.outside().join("k8s-disks/0");
    let kubelet_disk =
        disk.join("kubelet/pods").join(MOVED).join("volumes/kubernetes.io~secret/db");
    std::fs::create_dir_all(&kubelet_disk).unwrap();
    std::fs::write(kubelet_disk.join("password"), &new).unwrap();
    // The mounts of this tree (other tests mount and unmount theirs meanwhile).
    let base = tree.base().to_string_lossy().into_owned();
    let ours = || -> Vec<String> {
        let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        table.lines().filter(|l| l.contains(base.as_str())).map(str::to_owned).collect()
    };
    let before = ours().len();
    let _k = mount(&["--bind", path_arg(&disk.join("kubelet"))], &tree.host("/var/lib/kubelet"));
    // The pod logs bound over themselves (as kubelet wrappers do): nothing hidden.
    let logs = tree.host("/var/log/pods");
    let _l = mount(&["--bind", path_arg(&logs)], &logs);
    let mounted = ours();
    let file = tree.secrets_file("secrets.json", &secrets);
    let out = tree.scan(&["--secrets", path_arg(&file), "--format", "json", "-v"]);
    out.assert_code(1);
    let got: Vec<(String, String, bool, bool)> = out
        .findings()
        .iter()
        .map(|f| {
            let hidden =
                f.raw["note"].as_str().is_some_and(|n| n.contains("hidden beneath a mount"));
            (f.secret.clone(), f.site.clone(), f.stale == Some(true), hidden)
        })
        .collect();
    let row =
        |secret: &str, site: &str, hidden| (secret.to_owned(), site.to_owned(), false, hidden);
    // Once each: the copy beneath kubelet's mount is hidden (and no less severe for it);
    // the log under a mount of itself is read once, as it is.
    let mut want = vec![
        row("shop/new", "kubelet-secret-volume", false),
        row("shop/old", "kubelet-secret-volume", true),
        row("shop/old", "pod-log", false),
    ];
    want.sort();
    let mut got = got;
    got.sort();
    assert_eq!(got, want, "{}", out.stdout_str());
    let old_at = out
        .findings()
        .into_iter()
        .find(|f| f.secret == "shop/old" && f.site == "kubelet-secret-volume");
    let old_at = old_at.unwrap();
    assert!(old_at.path.starts_with(&format!("/var/lib/kubelet/pods/{UID}/")), "{}", old_at.path);
    assert!(
        out.stderr_str().contains("beneath the mount at /var/lib/kubelet: read"),
        "{}",
        out.stderr_str()
    );
    // Nothing mounted, nothing left mounted.
    assert_eq!(ours(), mounted);
    drop((_k, _l));
    assert_eq!(ours().len(), before);
}
