//! A hostile node at scale and in motion: thousands of timestamped payload dirs, a
//! 10,000-level deep tree, a million empty files in one dir, device nodes, a 100 GiB
//! sparse file, a 1 GiB line, and files that shrink, turn into symlinks or vanish while
//! the scan reads them. Each time the scan ends, reports what it could, lists what it
//! could not read, and changes nothing.

use std::collections::BTreeSet;
use std::fs;
use std::io::{Seek, SeekFrom, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nix::fcntl::{openat, OFlag};
use nix::sys::stat::{fstatat, mkdirat, Mode};

use crate::util::*;

const UID: &str = "5ca1ab1e-0000-4bad-8000-00000000beef";

/// `scan --root <root> --no-cri ARGS` without the whole-tree digest (for trees too big or
/// too deep for it, or changed on purpose while scanned).
fn scan_only(kr: Kr<'_>, tree: &NodeTree, args: &[&str]) -> Out {
    let mut full = vec!["scan", "--root", tree.root_arg(), "--no-cri"];
    full.extend_from_slice(args);
    kr.run(&full)
}

/// The errors of a report as (path, error).
fn errors_of(out: &Out) -> Vec<(String, String)> {
    out.json()["errors"]
        .as_array()
        .expect("errors array")
        .iter()
        .map(|e| (e["path"].as_str().unwrap().into(), e["error"].as_str().unwrap().into()))
        .collect()
}

/// A secret volume updated 3,000 times without its old payload dirs ever being removed:
/// the live key is reported once under its visible name, the old values in the stale dirs
/// that hold them at their real paths (marked stale), and nothing else.
#[test]
fn thousands_of_timestamped_dirs() {
    const DIRS: usize = 3000;
    let tree = NodeTree::new();
    let vol = tree.pod(UID).secret_volume("db");
    let cur = fake_secret(9000);
    vol.key("password", &cur);
    let mut old = Vec::new();
    let mut expected: BTreeSet<Key> =
        [(vol.visible("password"), 0, "shop/db".into(), "password".into(), "raw".into())].into();
    for i in 0..DIRS {
        let ts = format!("..2024_01_{:02}_00_00_00.{i:09}", 1 + i % 28);
        // Every 300th old payload holds a value still known (a rotated-out password); the
        // others hold filler that matches nothing.
        if i % 300 == 7 {
            let v = fake_secret(9001 + i as u64);
            vol.stale_copy(&ts, "password", &v);
            let id = format!("shop/db-{i}");
            expected.insert((
                vol.real(&ts, "password"),
                0,
                id.clone(),
                "password".into(),
                "raw".into(),
            ));
            old.push(Secret::opaque("shop", &format!("db-{i}"), &[("password", &v)]));
        } else {
            vol.stale_copy(&ts, "password", &filler(i as u64, 24));
        }
    }
    old.push(Secret::opaque("shop", "db", &[("password", &cur)]));
    let file = tree.secrets_file("s.json", &old);
    let out = tree.kr().timeout(Duration::from_secs(120)).scan(&[
        "--secrets",
        path_arg(&file),
        "--format",
        "json",
    ]);
    out.assert_code(1);
    let findings = out.findings();
    assert_findings(&findings, &expected, "3,000 timestamped dirs");
    for f in &findings {
        assert_eq!(f.stale, Some(f.path != vol.visible("password")), "stale flag of {}", f.path);
    }
    assert!(errors_of(&out).is_empty(), "errors: {:?}", errors_of(&out));
    assert_eq!(out.json()["summary"]["files"].as_u64(), Some(DIRS as u64 + 2), "files read");
}

/// Every entry of a chain of directories, level by level, through descriptors (the paths
/// are far longer than `PATH_MAX`): (depth, name, mode, size, mtime).
fn chain_digest(top: &Path) -> Vec<(usize, String, u32, i64, i64, i64)> {
    let mut out = Vec::new();
    let mut fd: OwnedFd = fs::File::open(top).unwrap().into();
    for depth in 0.. {
        let mut names: Vec<String> = fs::read_dir(format!("/proc/self/fd/{}", raw(&fd)))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        for n in &names {
            let st =
                fstatat(fd.as_fd(), n.as_str(), nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW).unwrap();
            out.push((depth, n.clone(), st.st_mode, st.st_size, st.st_mtime, st.st_mtime_nsec));
        }
        if !names.iter().any(|n| n == "d") {
            break;
        }
        fd = openat(fd.as_fd(), "d", OFlag::O_DIRECTORY | OFlag::O_RDONLY, Mode::empty()).unwrap();
    }
    out
}

fn raw(fd: &OwnedFd) -> i32 {
    use std::os::fd::AsRawFd;
    fd.as_raw_fd()
}

/// Removes a tree with `rm -rf` (fts does not run out of descriptors or path length on a
/// 10,000-level tree) when dropped.
struct RmRf(PathBuf);

impl Drop for RmRf {
    fn drop(&mut self) {
        let _ = std::process::Command::new("rm").arg("-rf").arg(&self.0).status();
    }
}

/// A 10,000-level deep directory chain in an emptyDir (its paths run to 20,000 bytes,
/// five times `PATH_MAX`): the scan ends, finds the value 100 levels down, and for the
/// value at the bottom either finds it or lists the depth it could not enter; nothing in
/// the chain changes.
#[test]
fn ten_thousand_levels_deep() {
    const DEPTH: usize = 10_000;
    let tree = NodeTree::new();
    let pod = tree.pod(UID);
    let (shallow, deep) = (fake_secret(9100), fake_secret(9101));
    let top_node = pod.path("volumes/kubernetes.io~empty-dir/deep");
    tree.mkdir(&top_node);
    let top = tree.host(&top_node);
    let _cleanup = RmRf(top.clone());
    let mut fd: OwnedFd = fs::File::open(&top).unwrap().into();
    let put = |dir: &OwnedFd, v: &[u8]| {
        let flags = OFlag::O_CREAT | OFlag::O_WRONLY | OFlag::O_EXCL;
        let f = openat(dir.as_fd(), "leaf.env", flags, Mode::from_bits_truncate(0o644)).unwrap();
        fs::File::from(f).write_all(&[b"TOKEN=".as_slice(), v, b"\n"].concat()).unwrap();
    };
    for level in 1..=DEPTH {
        mkdirat(fd.as_fd(), "d", Mode::from_bits_truncate(0o755)).unwrap();
        fd = openat(fd.as_fd(), "d", OFlag::O_DIRECTORY | OFlag::O_RDONLY, Mode::empty()).unwrap();
        match level {
            100 => put(&fd, &shallow),
            DEPTH => put(&fd, &deep),
            _ => {}
        }
    }
    drop(fd);
    let s = Secret::opaque("deep", "s", &[("shallow", &shallow), ("deep", &deep)]);
    let file = tree.secrets_file("s.json", &[s]);
    let before = chain_digest(&top);
    assert_eq!(before.iter().filter(|e| e.1 == "d").count(), DEPTH, "test setup");
    let out = scan_only(
        tree.kr().timeout(Duration::from_secs(120)),
        &tree,
        &["--secrets", path_arg(&file), "--format", "json"],
    );
    out.assert_code(1);
    assert_eq!(chain_digest(&top), before, "the deep chain changed during the scan");
    let shallow_path = format!("{top_node}/{}leaf.env", "d/".repeat(100));
    let deep_path = format!("{top_node}/{}leaf.env", "d/".repeat(DEPTH));
    let findings = out.findings();
    let at = |p: &str| findings.iter().filter(|f| f.path == p).count();
    assert_eq!(at(&shallow_path), 1, "value 100 levels down not found once");
    let errors = errors_of(&out);
    if at(&deep_path) == 0 {
        assert!(
            errors
                .iter()
                .any(|(p, e)| deep_path.starts_with(p.as_str()) && e == "File name too long"),
            "the value at the bottom is neither found nor is its path listed in errors: {:?}",
            errors.iter().map(|(p, e)| (p.len(), e)).collect::<Vec<_>>()
        );
    }
    assert_eq!(findings.len(), 1 + at(&deep_path), "findings: {findings:?}");
}

/// A million empty files in one emptyDir plus one file holding a value (built once under
/// the cargo target dir and kept, ignored by git): the scan reads them all, finds the
/// value, stays under 100 MB of memory, and changes nothing in the dir.
#[test]
// The skip message is for the person running the tests.
#[allow(clippy::print_stderr)]
fn a_million_empty_files_in_one_dir() {
    const FILES: usize = 1_000_000;
    let tree = NodeTree::kept("million-files-v1");
    // One test run at a time builds or reads the kept tree.
    let _lock = tree.lock();
    let free = nix::sys::statvfs::statvfs(tree.root_arg()).unwrap().files_available();
    if !tree.is_built() && free < 2 * FILES as u64 {
        eprintln!("skipped: {free} free inodes where the test needs {FILES}");
        return;
    }
    let dir_node =
        format!("{}/pods/{UID}/volumes/kubernetes.io~empty-dir/many", tree.kubelet_dir());
    let dir = tree.host(&dir_node);
    let v = fake_secret(9200);
    if !tree.is_built() {
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        std::thread::scope(|s| {
            for t in 0..4 {
                let dir = &dir;
                s.spawn(move || {
                    for i in (t..FILES).step_by(4) {
                        fs::File::create(dir.join(format!("f{i:07}"))).unwrap();
                    }
                });
            }
        });
        tree.mark_built();
    }
    // Written on every run: a kept tree built by another version of the generator holds
    // another value.
    fs::write(dir.join("secret.env"), [b"PASSWORD=".as_slice(), &v, b"\n"].concat()).unwrap();
    let file = tree.secrets_file("s.json", &[Secret::opaque("many", "s", &[("password", &v)])]);
    let stat = |p: &Path| {
        let m = fs::symlink_metadata(p).unwrap();
        (m.ino(), m.mode(), m.size(), m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec())
    };
    let count = || fs::read_dir(&dir).unwrap().count();
    let before = (stat(&dir), stat(&dir.join("secret.env")), count());
    assert_eq!(before.2, FILES + 1, "test setup");
    let out = scan_only(
        tree.kr().timeout(Duration::from_secs(300)).measure_rss(),
        &tree,
        &["--secrets", path_arg(&file), "--format", "json"],
    );
    out.assert_code(1);
    let expected: BTreeSet<Key> =
        [(format!("{dir_node}/secret.env"), 9, "many/s".into(), "password".into(), "raw".into())]
            .into();
    assert_findings(&out.findings(), &expected, "a million files");
    let errors = errors_of(&out);
    assert!(errors.is_empty(), "errors: {:?}", errors.iter().take(3).collect::<Vec<_>>());
    let files = out.json()["summary"]["files"].as_u64().unwrap();
    assert!(files > FILES as u64, "read {files} files of over {FILES}");
    let rss = out.peak_rss_kb.expect("peak RSS measured");
    assert!(rss < 100 * 1024, "peak RSS {rss} KiB over a million files");
    assert_eq!((stat(&dir), stat(&dir.join("secret.env")), count()), before, "the dir changed");
}

/// Character and block device nodes (as root: `/dev/zero`, `/dev/urandom` and the disk
/// holding the tree, made with mknod in a volume, an emptyDir, a pod log dir and named by
/// `--path`) are never opened: the scan ends at once and finds the real value. Reading any
/// of them would never end (zero, urandom) or read the whole disk.
#[test]
// The skip message is for the person running the tests.
#[allow(clippy::print_stderr)]
fn device_nodes_are_never_opened() {
    use nix::sys::stat::{makedev, mknod, SFlag};
    if !is_root() {
        eprintln!("skipped: mknod needs root");
        return;
    }
    let tree = NodeTree::new();
    let pod = tree.pod(UID);
    let v = fake_secret(9300);
    let vol = pod.secret_volume("db");
    vol.key("password", &v);
    let disk = fs::metadata(tree.root_arg()).unwrap().dev();
    let nodes = [
        (vol.real(CURRENT_TS, "zero"), SFlag::S_IFCHR, makedev(1, 5)),
        (pod.path("volumes/kubernetes.io~empty-dir/x/urandom"), SFlag::S_IFCHR, makedev(1, 9)),
        (pod.path("volumes/kubernetes.io~empty-dir/x/disk"), SFlag::S_IFBLK, disk),
        (format!("/var/log/pods/shop_app_{UID}/app/0.log"), SFlag::S_IFCHR, makedev(1, 5)),
        ("/srv/zero".to_string(), SFlag::S_IFCHR, makedev(1, 5)),
    ];
    for (node_path, kind, dev) in &nodes {
        let host = tree.host(node_path);
        fs::create_dir_all(host.parent().unwrap()).unwrap();
        mknod(&host, *kind, Mode::from_bits_truncate(0o644), *dev).unwrap();
    }
    tree.symlink(vol.visible("zero"), "..data/zero");
    // The test can fail: the nodes it made are usable devices here (a `nodev` mount would
    // make opening them fail whatever the scan did).
    let mut zero = [1u8; 16];
    std::io::Read::read_exact(&mut fs::File::open(tree.host("/srv/zero")).unwrap(), &mut zero)
        .unwrap();
    assert_eq!(zero, [0u8; 16], "test setup: the zero device does not read zeros");
    let file = tree.secrets_file("s.json", &[Secret::opaque("db", "creds", &[("password", &v)])]);
    let out = tree.kr().timeout(Duration::from_secs(30)).scan(&[
        "--secrets",
        path_arg(&file),
        "--path",
        "/srv/zero",
        "--path",
        "/srv",
        "--format",
        "json",
    ]);
    out.assert_code(1);
    let expected: BTreeSet<Key> =
        [(vol.visible("password"), 0, "db/creds".into(), "password".into(), "raw".into())].into();
    assert_findings(&out.findings(), &expected, "device nodes");
    assert!(out.elapsed < Duration::from_secs(30), "took {:?}", out.elapsed);
}

/// A 100 GiB sparse file with a value 4 KiB before its end is found, in seconds, in well
/// under 100 MB (holes are skipped, not read as zeros).
#[test]
fn sparse_100gib_file() {
    const SIZE: u64 = 100 << 30;
    let tree = NodeTree::new();
    let pod = tree.pod(UID);
    let v = fake_secret(9400);
    let node_path = pod.path("volumes/kubernetes.io~empty-dir/data/volume.img");
    let host = tree.host(&node_path);
    fs::create_dir_all(host.parent().unwrap()).unwrap();
    let offset = SIZE - 4096;
    {
        let mut f = fs::File::create(&host).unwrap();
        f.set_len(SIZE).unwrap();
        f.seek(SeekFrom::Start(offset)).unwrap();
        f.write_all(&v).unwrap();
    }
    let file = tree.secrets_file("s.json", &[Secret::opaque("big", "img", &[("key", &v)])]);
    let out = tree.kr().measure_rss().timeout(Duration::from_secs(60)).scan(&[
        "--secrets",
        path_arg(&file),
        "--format",
        "json",
    ]);
    out.assert_code(1);
    let expected: BTreeSet<Key> =
        [(node_path, offset, "big/img".into(), "key".into(), "raw".into())].into();
    assert_findings(&out.findings(), &expected, "100 GiB sparse file");
    let rss = out.peak_rss_kb.expect("peak RSS measured");
    assert!(rss < 100 * 1024, "peak RSS {rss} KiB");
}

/// A pod log that is one 1 GiB line (a container printing without newlines) with a value
/// at its very end, and a rule-shaped token near its start: both are found, in bounded
/// memory.
#[test]
fn one_line_of_1gib() {
    const SIZE: usize = 1 << 30;
    let tree = NodeTree::new();
    tree.pod(UID);
    let v = fake_secret(9500);
    let node_path = format!("/var/log/pods/shop_app_{UID}/app/0.log");
    let host = tree.host(&node_path);
    fs::create_dir_all(host.parent().unwrap()).unwrap();
    let head = b"2025-01-02T03:04:05.123456789Z stdout F ";
    {
        let mut f = std::io::BufWriter::with_capacity(1 << 20, fs::File::create(&host).unwrap());
        f.write_all(head).unwrap();
        let block = filler(9501, 1 << 20);
        let body = SIZE - head.len() - v.len() - 1;
        for _ in 0..body / block.len() {
            f.write_all(&block).unwrap();
        }
        f.write_all(&block[..body % block.len()]).unwrap();
        f.write_all(&v).unwrap();
        f.write_all(b"\n").unwrap();
    }
    assert_eq!(fs::metadata(&host).unwrap().len(), SIZE as u64, "test setup");
    let file = tree.secrets_file("s.json", &[Secret::opaque("app", "api", &[("token", &v)])]);
    let out = scan_only(
        tree.kr().measure_rss().timeout(Duration::from_secs(300)),
        &tree,
        &["--secrets", path_arg(&file), "--format", "json"],
    );
    out.assert_code(1);
    let at = (SIZE - v.len() - 1) as u64;
    let expected: BTreeSet<Key> =
        [(node_path, at, "app/api".into(), "token".into(), "raw".into())].into();
    assert_findings(&out.findings(), &expected, "a 1 GiB line");
    let rss = out.peak_rss_kb.expect("peak RSS measured");
    assert!(rss < 100 * 1024, "peak RSS {rss} KiB for a 1 GiB line");
}

/// Files that shrink, entries swapped between a file and a symlink to a file outside the
/// root, and a directory of files created and removed over and over, all while the scan
/// runs (ten scans): each scan ends with a report, finds the stable value, never the value
/// outside, and nothing outside the root changes.
#[test]
fn a_tree_changing_under_the_scan() {
    let tree = NodeTree::new();
    let pod = tree.pod(UID);
    let (stable, leak) = (fake_secret(9600), fake_secret(9601));
    pod.secret_volume("db").key("password", &stable);
    let outside = tree.outside().join("leak.env");
    fs::write(&outside, [b"LEAK=".as_slice(), &leak, b"\n"].concat()).unwrap();
    let scratch = pod.path("volumes/kubernetes.io~empty-dir/scratch");
    tree.mkdir(&scratch);
    let dir = tree.host(&scratch);
    // Shrinking: 32 MiB of data, the stable value at its start, cut to 1 KiB and regrown.
    let big = dir.join("big.bin");
    let mut content = filler(9602, 32 << 20);
    content[..stable.len()].copy_from_slice(&stable);
    fs::write(&big, &content).unwrap();
    // Swapped: `swap.env` is a regular file one moment and a link to outside the next.
    let swap = dir.join("swap.env");
    fs::write(&swap, b"NOTHING=here\n").unwrap();
    let churn = dir.join("churn");
    let file = tree.secrets_file(
        "s.json",
        &[
            Secret::opaque("db", "creds", &[("password", &stable)]),
            Secret::opaque("x", "leak", &[("v", &leak)]),
        ],
    );
    let outside_before = tree.digest().under("outside");
    let stop = AtomicBool::new(false);
    // Set however the scope ends: a failing scan must not leave the mutators running.
    struct Stop<'a>(&'a AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let outs: Vec<Out> = std::thread::scope(|s| {
        let _stop = Stop(&stop);
        s.spawn(|| {
            use std::os::unix::fs::FileExt;
            let f = fs::OpenOptions::new().write(true).open(&big).unwrap();
            while !stop.load(Ordering::Relaxed) {
                f.set_len(1024).unwrap();
                std::thread::sleep(Duration::from_millis(10));
                // Regrown with data, not as a hole: a hole is read in microseconds, too
                // fast for the cut to land inside a read.
                f.write_all_at(&content, 0).unwrap();
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        s.spawn(|| {
            let (file_tmp, link_tmp) = (dir.join(".swap-file"), dir.join(".swap-link"));
            while !stop.load(Ordering::Relaxed) {
                std::os::unix::fs::symlink(&outside, &link_tmp).unwrap();
                fs::rename(&link_tmp, &swap).unwrap();
                fs::write(&file_tmp, b"NOTHING=here\n").unwrap();
                fs::rename(&file_tmp, &swap).unwrap();
            }
        });
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                for i in 0..50 {
                    let d = churn.join(format!("d{i}"));
                    fs::create_dir_all(&d).unwrap();
                    fs::write(d.join("f"), b"x").unwrap();
                }
                fs::remove_dir_all(&churn).unwrap();
            }
        });
        // Ten scans, and more (up to 100) until one has met the file cut short: whether a
        // cut lands inside a read is a race, so its count alone is not asserted.
        let mut outs = Vec::new();
        while outs.len() < 10 || (outs.len() < 100 && !outs.iter().any(shrank_seen)) {
            outs.push(scan_only(
                tree.kr().timeout(Duration::from_secs(60)),
                &tree,
                &["--secrets", path_arg(&file), "--format", "json"],
            ));
        }
        outs
    });
    let mut shrank = 0;
    for out in &outs {
        out.assert_code(1);
        let findings = out.findings();
        assert!(findings.iter().all(|f| f.secret == "db/creds"), "findings: {findings:?}");
        assert!(
            findings.iter().any(|f| f.path == pod.path("volumes/kubernetes.io~secret/db/password")),
            "the stable value in the secret volume was not found: {findings:?}"
        );
        for (p, e) in errors_of(out) {
            assert!(!p.is_empty() && !e.is_empty(), "an error without path or message");
        }
        shrank += usize::from(shrank_seen(out));
    }
    outside_before.assert_same(&tree.digest().under("outside"), "scans of a changing tree");
    // Cut to 1 KiB and regrown with data over and over, the file was met short by a read.
    assert!(shrank > 0, "no scan said the file shrank while read ({} scans)", outs.len());
}

/// Whether a scan listed `big.bin` as shrunk while read.
fn shrank_seen(out: &Out) -> bool {
    errors_of(out).iter().any(|(p, e)| p.ends_with("/big.bin") && e.starts_with("shrank from "))
}

/// A 60 MiB pod log (CRI lines, the value split across a partial line and its
/// continuation at the very end) is streamed as its content: the value is found at its
/// file offset and peak RSS stays far below the log's size.
#[test]
fn a_large_pod_log_is_streamed_as_content() {
    const SIZE: usize = 60 << 20;
    let tree = NodeTree::new();
    tree.pod(UID);
    let v = fake_secret(9700);
    let node_path = format!("/var/log/pods/shop_app_{UID}/app/0.log");
    let prefix = |tag: &str| format!("2025-01-02T03:04:05.123456789Z stdout {tag} ");
    let mut log = Vec::with_capacity(SIZE + 200);
    let line = [prefix("F").as_bytes(), &filler(9701, 200), b"\n"].concat();
    while log.len() + line.len() < SIZE {
        log.extend_from_slice(&line);
    }
    let (a, b) = v.split_at(v.len() / 2);
    log.extend_from_slice(prefix("P").as_bytes());
    let at = log.len() as u64;
    log.extend_from_slice(a);
    log.push(b'\n');
    log.extend_from_slice(prefix("F").as_bytes());
    log.extend_from_slice(b);
    log.push(b'\n');
    tree.write(&node_path, &log);
    drop(log);
    let file = tree.secrets_file("s.json", &[Secret::opaque("app", "api", &[("token", &v)])]);
    let out = tree.kr().measure_rss().scan(&[
        "--secrets",
        path_arg(&file),
        "--threads",
        "2",
        "--format",
        "json",
    ]);
    out.assert_code(1);
    let expected: BTreeSet<Key> =
        [(node_path, at, "app/api".into(), "token".into(), "raw".into())].into();
    assert_findings(
        &out.findings(),
        &expected,
        "a value split across partial lines of a 60 MiB log",
    );
    let rss = out.peak_rss_kb.expect("peak RSS measured");
    assert!(rss < 40 * 1024, "peak RSS {rss} KiB: a 60 MiB log was not streamed");
}

/// A pod log with a 10 GiB hole before its last line (truncated while a writer kept its
/// offset) is searched with the hole skipped: the value after it is found within
/// seconds, not after reading 10 GiB of zeros.
#[test]
fn a_sparse_pod_log_skips_its_hole() {
    const HOLE: u64 = 10 << 30;
    let tree = NodeTree::new();
    tree.pod(UID);
    let v = fake_secret(9800);
    let node_path = format!("/var/log/pods/shop_app_{UID}/app/0.log");
    let host = tree.host(&node_path);
    fs::create_dir_all(host.parent().unwrap()).unwrap();
    let line = [b"2025-01-02T03:04:05.123456789Z stdout F token=".as_slice(), &v, b"\n"].concat();
    {
        let mut f = fs::File::create(&host).unwrap();
        f.seek(SeekFrom::Start(HOLE)).unwrap();
        f.write_all(&line).unwrap();
    }
    let file = tree.secrets_file("s.json", &[Secret::opaque("app", "api", &[("token", &v)])]);
    let out = tree.kr().timeout(Duration::from_secs(30)).scan(&[
        "--secrets",
        path_arg(&file),
        "--format",
        "json",
    ]);
    out.assert_code(1);
    let at = HOLE + line.len() as u64 - 1 - v.len() as u64;
    let expected: BTreeSet<Key> =
        [(node_path, at, "app/api".into(), "token".into(), "raw".into())].into();
    assert_findings(&out.findings(), &expected, "a sparse pod log");
}
