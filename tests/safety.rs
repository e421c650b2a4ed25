//! A hostile node cannot hang, crash or mislead the scan, and the scan changes nothing:
//! FIFOs and sockets are never opened, symlinks never lead out of the root, loops and
//! deep trees end, a 1 GiB sparse file is streamed in bounded memory, and `--secrets`
//! writes nothing anywhere. (Every `scan` here also digests the tree before and after.)

use std::collections::BTreeSet;
use std::fs;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::util::*;

const UID: &str = "c0ffee00-dead-4bee-8f00-123456789abc";

/// A relative symlink target that climbs from the node path `link` out of the root to
/// `outside/<rest>` (e.g. `../../../../outside/leak.txt`).
fn climb_out(tree: &NodeTree, link: &str, rest: &str) -> PathBuf {
    let base = tree.outside().parent().unwrap().to_path_buf();
    let parent = tree.host(link).parent().unwrap().to_path_buf();
    let depth = parent.strip_prefix(&base).unwrap().components().count();
    PathBuf::from(format!("{}outside/{rest}", "../".repeat(depth)))
}

/// FIFOs (as a volume key behind `..data`, loose in a volume, in a container dir, in an
/// emptyDir, and named by `--path`) and a unix socket neither hang nor stop the scan: it
/// ends well within 20 s and still finds the real value.
#[test]
fn fifos_and_sockets_do_not_hang_the_scan() {
    let tree = NodeTree::new();
    let pod = tree.pod(UID);
    let v = fake_secret(1);
    let vol = pod.secret_volume("db");
    vol.key("password", &v);
    tree.fifo(vol.real(CURRENT_TS, "pipe"));
    tree.symlink(vol.visible("pipe"), "..data/pipe");
    tree.fifo(format!("{}/loose-fifo", vol.dir()));
    tree.fifo(pod.path("containers/app/fifo"));
    tree.fifo(pod.path("volumes/kubernetes.io~empty-dir/shared/pipe"));
    tree.socket(pod.path("volumes/kubernetes.io~empty-dir/shared/app.sock"));
    tree.fifo("/run/extra.fifo");
    let file = tree.secrets_file("s.json", &[Secret::opaque("db", "creds", &[("password", &v)])]);
    let out = tree.kr().timeout(Duration::from_secs(20)).scan(&[
        "--secrets",
        path_arg(&file),
        "--path",
        "/run/extra.fifo",
        "--path",
        "/run",
        "--format",
        "json",
    ]);
    out.assert_code(1);
    assert!(out.elapsed < Duration::from_secs(20), "took {:?}", out.elapsed);
    let expected: BTreeSet<Key> =
        [(vol.visible("password"), 0, "db/creds".into(), "password".into(), "raw".into())].into();
    assert_findings(&out.findings(), &expected, "fifo tree");
}

/// Symlinks out of the root are never followed: absolute and relative links to a file
/// outside, links to a dir outside, a hijacked `..data`, a pod dir that is a link to
/// outside, a `--path` that is a link to outside, links to the host's `/`, `/proc` and
/// `/proc/self/environ` (holding the leak value: it is in the scan's own environment) and
/// a `..` chain far past the root. The value sitting outside is never
/// found; the one inside is. Symlink loops end.
#[test]
fn symlinks_out_of_the_root_are_not_followed() {
    let tree = NodeTree::new();
    let (inside, leak) = (fake_secret(10), fake_secret(11));
    let outside = tree.outside();
    let leak_file = [b"leaked: ".as_slice(), &leak, b"\n"].concat();
    fs::write(outside.join("leak.txt"), &leak_file).unwrap();
    let hijacked_pod = outside.join("pod");
    let hv = hijacked_pod.join("volumes/kubernetes.io~secret/x");
    fs::create_dir_all(&hv).unwrap();
    fs::write(hv.join("leak"), &leak).unwrap();

    let pod = tree.pod(UID);
    let vol = pod.secret_volume("db");
    vol.key("password", &inside);
    tree.symlink(vol.visible("leak-abs"), outside.join("leak.txt"));
    let rel = vol.visible("leak-rel");
    tree.symlink(&rel, climb_out(&tree, &rel, "leak.txt"));

    // A volume whose `..data` points outside, with kubelet-style key links through it.
    let hj = pod.path("volumes/kubernetes.io~secret/hijack");
    tree.symlink(format!("{hj}/..data"), &outside);
    tree.symlink(format!("{hj}/leak.txt"), "..data/leak.txt");
    let pj = pod.path("volumes/kubernetes.io~projected/hijack-rel");
    tree.symlink(format!("{pj}/..data"), climb_out(&tree, &format!("{pj}/..data"), ""));
    tree.symlink(format!("{pj}/leak.txt"), "..data/leak.txt");

    let cache = pod.path("volumes/kubernetes.io~empty-dir/cache");
    tree.symlink(format!("{cache}/outdir"), &outside);
    tree.symlink(
        format!("{cache}/outdir-rel"),
        climb_out(&tree, &format!("{cache}/outdir-rel"), ""),
    );
    tree.symlink(format!("{cache}/loop"), ".");
    tree.symlink(format!("{cache}/a"), "b");
    tree.symlink(format!("{cache}/b"), "a");
    tree.symlink(format!("{cache}/self"), "self");
    tree.symlink(format!("{cache}/up"), "..");
    // Links to the host's `/` and `/proc` (whose `self/environ` holds the leak value: it is
    // in the scan's own environment), and a `..` chain far past the root.
    tree.symlink(format!("{cache}/slash"), "/");
    tree.symlink(format!("{cache}/proc"), "/proc");
    tree.symlink(format!("{cache}/environ"), "/proc/self/environ");
    tree.symlink(format!("{cache}/selfroot"), "/proc/self/root");
    tree.symlink(format!("{cache}/up-chain"), "../".repeat(40));
    // A whole pod dir that is a link out of the root.
    tree.symlink(
        format!("{}/pods/0000aaaa-bbbb-4ccc-8ddd-eeeeffff0000", tree.kubelet_dir()),
        &hijacked_pod,
    );
    // Extra paths that lead outside.
    tree.symlink("/etc/outlink", &outside);
    tree.symlink("/etc/outfile", outside.join("leak.txt"));

    let secrets = [
        Secret::opaque("db", "creds", &[("password", &inside)]),
        Secret::opaque("elsewhere", "leak", &[("value", &leak)]),
    ];
    let file = tree.secrets_file("s.json", &secrets);
    let planted = std::str::from_utf8(&leak).unwrap();
    let out = tree.kr().timeout(Duration::from_secs(30)).env("KRESIDUE_PLANTED", planted).scan(&[
        "--secrets",
        path_arg(&file),
        "--path",
        "/etc/outlink",
        "--path",
        "/etc/outfile",
        "--path",
        "/etc",
        "--path",
        &format!("{cache}/proc"),
        "--format",
        "json",
    ]);
    let expected: BTreeSet<Key> =
        [(vol.visible("password"), 0, "db/creds".into(), "password".into(), "raw".into())].into();
    assert_findings(&out.findings(), &expected, "symlinks out of the root");
    out.assert_code(1);
}

/// A 300-level deep directory in an emptyDir is walked to the bottom; the value there is
/// found at its full path.
#[test]
fn deep_nesting_is_walked() {
    let tree = NodeTree::new();
    let pod = tree.pod(UID);
    let v = fake_secret(20);
    let deep = format!("volumes/kubernetes.io~empty-dir/deep/{}leaf.txt", "d/".repeat(300));
    let path = pod.file(&deep, &[b"x=".as_slice(), &v].concat());
    let file = tree.secrets_file("s.json", &[Secret::opaque("deep", "s", &[("k", &v)])]);
    let out = tree.scan(&["--secrets", path_arg(&file), "--format", "json"]);
    out.assert_code(1);
    let expected: BTreeSet<Key> = [(path, 2, "deep/s".into(), "k".into(), "raw".into())].into();
    assert_findings(&out.findings(), &expected, "deep tree");
}

/// A 1 GiB sparse file with a value near its end (straddling a 4 KiB page boundary) is
/// found, in both modes, with peak RSS well under 100 MB.
#[test]
fn sparse_1gib_file_found_with_bounded_memory() {
    const GIB: u64 = 1 << 30;
    let tree = NodeTree::new();
    let pod = tree.pod(UID);
    let v = fake_secret_special(30, 48);
    let node_path = pod.path("volumes/kubernetes.io~empty-dir/data/disk.img");
    let host = tree.host(&node_path);
    fs::create_dir_all(host.parent().unwrap()).unwrap();
    let offset = GIB - 4096 - 20;
    {
        let mut f = fs::File::create(&host).unwrap();
        f.set_len(GIB).unwrap();
        f.seek(SeekFrom::Start(offset)).unwrap();
        f.write_all(&v).unwrap();
    }
    let file = tree.secrets_file("s.json", &[Secret::opaque("big", "disk", &[("key", &v)])]);
    let fp = tree.fingerprint_file(&file, &[], "fp.json");
    let expected: BTreeSet<Key> =
        [(node_path, offset, "big/disk".into(), "key".into(), "raw".into())].into();
    for mode in [["--secrets", path_arg(&file)], ["--fingerprints", path_arg(&fp)]] {
        let out = tree.kr().measure_rss().scan(&[mode[0], mode[1], "--format", "json"]);
        out.assert_code(1);
        assert_findings(&out.findings(), &expected, &format!("1 GiB sparse file, {}", mode[0]));
        let rss = out.peak_rss_kb.expect("peak RSS measured");
        assert!(
            rss > 0 && rss < 100 * 1024,
            "peak RSS {rss} KiB is not under 100 MiB ({})",
            mode[0]
        );
    }
}

/// A large dense file (64 MiB of real data, no holes) is streamed, not slurped: with
/// `--threads 2` the peak RSS stays far below the file size, and the value at the end is
/// found.
#[test]
fn dense_64mib_file_is_streamed() {
    const SIZE: usize = 64 << 20;
    let tree = NodeTree::new();
    let pod = tree.pod(UID);
    let v = fake_secret_len(60, 40);
    let mut content = filler(60, SIZE);
    let offset = SIZE - 1000;
    content[offset..offset + v.len()].copy_from_slice(&v);
    let path = pod.file("containers/app/0000beef", &content);
    drop(content);
    let file = tree.secrets_file("s.json", &[Secret::opaque("big", "dense", &[("key", &v)])]);
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
        [(path, offset as u64, "big/dense".into(), "key".into(), "raw".into())].into();
    assert_findings(&out.findings(), &expected, "dense 64 MiB file");
    let rss = out.peak_rss_kb.expect("peak RSS measured");
    assert!(rss < 40 * 1024, "peak RSS {rss} KiB: a 64 MiB file was not streamed");
}

/// Holes read as zeros: a binary value (kubectl `data` may hold any bytes) whose trailing
/// zero bytes lie in a hole of a sparse file, and one whose leading zero bytes do, are both
/// found, like any other occurrence, whatever the chunk size.
#[test]
fn binary_value_running_into_a_hole_is_found() {
    use nix::unistd::{lseek, Whence};
    const B: u64 = 1 << 16; // 64 KiB: aligned to any filesystem block size
    let tree = NodeTree::new();
    let pod = tree.pod(UID);
    let tail = [fake_secret_len(70, 24), vec![0u8; 8]].concat();
    let head = [vec![0u8; 8], fake_secret_len(71, 24)].concat();
    let node_path = pod.path("volumes/kubernetes.io~empty-dir/data/sparse.bin");
    let host = tree.host(&node_path);
    fs::create_dir_all(host.parent().unwrap()).unwrap();
    {
        let mut f = fs::File::create(&host).unwrap();
        f.set_len(4 * B).unwrap();
        f.seek(SeekFrom::Start(B - 24)).unwrap();
        f.write_all(&tail[..24]).unwrap(); // its 8 zeros are the start of the hole at B
        f.seek(SeekFrom::Start(3 * B)).unwrap();
        f.write_all(&head[8..]).unwrap(); // its 8 zeros are the end of the hole before 3B
        f.sync_all().unwrap();
        let hole = lseek(&f, 0, Whence::SeekHole).unwrap_or(-1);
        let data = lseek(&f, B as i64, Whence::SeekData).unwrap_or(-1);
        assert!(
            hole == 0 && data == (3 * B) as i64,
            "test setup: expected holes before B and in [B, 3B) (hole at {hole}, data at {data})"
        );
    }
    let s = Secret::opaque("bin", "blob", &[("tail", &tail), ("head", &head)]);
    let file = tree.secrets_file("s.json", &[s]);
    let expected: BTreeSet<Key> = [
        (node_path.clone(), B - 24, "bin/blob".into(), "tail".into(), "raw".into()),
        (node_path, 3 * B - 8, "bin/blob".into(), "head".into(), "raw".into()),
    ]
    .into();
    for chunk in [None, Some("4096"), Some("65536")] {
        let mut args = vec!["--secrets", path_arg(&file), "--format", "json"];
        args.extend(chunk.iter().flat_map(|c| ["--chunk-size", *c]));
        let out = tree.scan(&args);
        assert_findings(
            &out.findings(),
            &expected,
            &format!("values running into holes, chunk {chunk:?}"),
        );
    }
}

/// `scan --secrets` keeps values in memory only: run from an empty cwd with empty TMPDIR
/// and HOME, nothing appears in any of them (and the tree is unchanged, as always).
#[test]
fn secrets_mode_writes_nothing() {
    let tree = NodeTree::new();
    let v = fake_secret(40);
    tree.pod(UID).secret_volume("db").key("password", &v);
    let file = tree.secrets_file("s.json", &[Secret::opaque("db", "creds", &[("password", &v)])]);
    let dirs: Vec<PathBuf> = ["cwd", "tmp", "home"].iter().map(|d| tree.work(d)).collect();
    for d in &dirs {
        fs::create_dir(d).unwrap();
    }
    let kubectl = fs::read(&file).unwrap();
    for args in [&["--secrets", path_arg(&file)][..], &["--secrets", "-", "--format", "json"]] {
        let out = tree
            .kr()
            .cwd(&dirs[0])
            .env("TMPDIR", path_arg(&dirs[1]))
            .env("HOME", path_arg(&dirs[2]))
            .stdin(&kubectl)
            .scan(args);
        out.assert_code(1);
        for d in &dirs {
            assert!(is_empty_dir(d), "`scan {args:?}` wrote into {}", d.display());
        }
    }
}

fn is_empty_dir(d: &Path) -> bool {
    fs::read_dir(d).unwrap().next().is_none()
}

/// Harness self-check: the digest notices a changed mtime, mode, content and a new entry,
/// so "unchanged after scan" assertions mean something.
#[test]
fn harness_digest_detects_changes() {
    let tree = NodeTree::new();
    let p = tree.pod(UID).file("containers/app/log", b"hello");
    let host = tree.host(&p);
    let d0 = tree.digest();
    assert_eq!(d0, tree.digest());
    let changes: [&dyn Fn(); 4] = [
        &|| fs::write(&host, b"hellp").unwrap(),
        &|| {
            fs::set_permissions(&host, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap()
        },
        &|| {
            fs::File::options()
                .write(true)
                .open(&host)
                .unwrap()
                .set_modified(std::time::SystemTime::UNIX_EPOCH)
                .unwrap()
        },
        &|| drop(fs::File::create(host.with_extension("tmp")).unwrap()),
    ];
    for change in changes {
        let before = tree.digest();
        change();
        assert_ne!(before, tree.digest(), "digest missed a change");
    }
}

/// Harness self-check: the JSON-escaped form is Go's `encoding/json` (HTML-safe) string body.
#[test]
fn harness_json_escape_is_go_style() {
    let v = "a\"b\\c\nd\re\tf\u{1}g<h>i&j\u{2028}k\u{2029}l/m\u{7f}é";
    let want =
        r#"a\"b\\c\nd\re\tf\u0001g\u003ch\u003ei\u0026j\u2028k\u2029l/m"#.to_string() + "\u{7f}é";
    assert_eq!(String::from_utf8(json_escape(v.as_bytes())).unwrap(), want);
    assert_eq!(b64(b"any carnal pleas"), b"YW55IGNhcm5hbCBwbGVhcw==".to_vec());
}

/// A file that grows while it is read (a container writing a log as fast as it can) is
/// read up to the size it had when opened: the scan ends while the writer is still
/// writing, finds the value at the start, and has read less than the file became.
#[test]
fn a_file_growing_while_read_does_not_keep_the_scan() {
    use std::sync::atomic::{AtomicBool, Ordering};
    const CAP: u64 = 2 << 30;
    let tree = NodeTree::new();
    let pod = tree.pod(UID);
    let v = fake_secret(50);
    let node_path = pod.path("volumes/kubernetes.io~empty-dir/logs/app.log");
    let host = tree.host(&node_path);
    fs::create_dir_all(host.parent().unwrap()).unwrap();
    fs::write(&host, [b"token=".as_slice(), &v, b"\n", &vec![b'.'; 4 << 20]].concat()).unwrap();
    let file = tree.secrets_file("s.json", &[Secret::opaque("app", "api", &[("token", &v)])]);
    let stop = AtomicBool::new(false);
    let out = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let mut f = fs::OpenOptions::new().append(true).open(&host).unwrap();
            let block = vec![b'x'; 1 << 20];
            while !stop.load(Ordering::Relaxed) && f.metadata().unwrap().len() < CAP {
                f.write_all(&block).unwrap();
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        let out = tree.kr().timeout(Duration::from_secs(60)).run(&[
            "scan",
            "--root",
            tree.root_arg(),
            "--no-cri",
            "--secrets",
            path_arg(&file),
            "--format",
            "json",
        ]);
        stop.store(true, Ordering::Relaxed);
        writer.join().unwrap();
        out
    });
    out.assert_code(1);
    let expected: BTreeSet<Key> =
        [(node_path, 6, "app/api".into(), "token".into(), "raw".into())].into();
    assert_findings(&out.findings(), &expected, "growing file");
    let read = out.json()["summary"]["bytes"].as_u64().unwrap();
    let grown = fs::metadata(&host).unwrap().len();
    assert!(read < grown, "read {read} bytes of a file that grew to {grown} during the scan");
}

/// Node paths are resolved name by name beneath the root: a kubelet dir reached through a
/// relative symlink and through an absolute one naming a path under the root is scanned
/// (paths reported under the node path given); one whose symlink leads outside the root is
/// an error entry and nothing outside is read.
#[test]
fn symlinked_node_dirs_resolve_beneath_the_root() {
    let tree = NodeTree::with_kubelet_dir("/data/kubelet");
    let v = fake_secret(71);
    tree.pod(UID).secret_volume("creds").key("api-key", &v);
    let file = tree.secrets_file("s.json", &[Secret::opaque("ops", "creds", &[("api-key", &v)])]);
    tree.symlink("/var/lib/kubelet", "../../data/kubelet");
    tree.symlink("/srv/kubelet", tree.host("/data/kubelet"));
    fs::create_dir_all(tree.outside().join("kubelet/pods")).unwrap();
    tree.symlink("/srv/escape", tree.outside().join("kubelet"));
    for dir in ["/var/lib/kubelet", "/srv/kubelet"] {
        let out =
            tree.scan(&["--secrets", path_arg(&file), "--kubelet-dir", dir, "--format", "json"]);
        out.assert_code(1);
        let paths: Vec<String> = out.findings().into_iter().map(|f| f.path).collect();
        let want = format!("{dir}/pods/{UID}/volumes/kubernetes.io~secret/creds/api-key");
        assert_eq!(paths, vec![want], "{dir}");
    }
    let out = tree.scan(&[
        "--secrets",
        path_arg(&file),
        "--kubelet-dir",
        "/srv/escape",
        "--format",
        "json",
    ]);
    out.assert_code(0);
    let errors = out.json()["errors"].as_array().unwrap().clone();
    assert!(
        errors.iter().any(|e| e["path"] == "/srv/escape/pods"
            && e["error"].as_str().unwrap().contains("outside the root")),
        "{errors:?}"
    );
}
