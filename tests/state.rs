//! Issue 52: rescans that read only what changed (`scan --state DIR`). A file unchanged
//! since the last scan is taken from the state, not read; the report is the one a full
//! scan makes, whatever changed in between.

use crate::util::*;
use kresidue::prng::Prng;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A file's change time must be older than the scan that read it by more than this for the
/// next scan to trust it (the state's timestamp granularity, 2 s, and some).
const SETTLE: Duration = Duration::from_millis(2100);

/// The report without what may differ between a full and an incremental scan of the same
/// tree: the wall time, and how many files the state spared.
fn comparable(out: &Out) -> Value {
    let mut r = out.json().clone();
    let summary = r["summary"].as_object_mut().unwrap();
    for k in ["duration_ms", "unchanged_files", "unchanged_bytes"] {
        summary.remove(k);
    }
    r
}

/// `scan --state DIR --format json -v`, with `extra`.
fn scan(tree: &NodeTree, fp: &Path, state: &Path, extra: &[&str]) -> Out {
    let mut args = vec!["--fingerprints", path_arg(fp), "--state", path_arg(state)];
    args.extend(["--format", "json", "-v"]);
    args.extend_from_slice(extra);
    let out = tree.scan(&args);
    assert!(matches!(out.code, 0 | 1), "{}", out.stderr_str());
    out
}

/// (files, bytes) the state spared.
fn unchanged(out: &Out) -> (u64, u64) {
    let s = &out.json()["summary"];
    (s["unchanged_files"].as_u64().unwrap(), s["unchanged_bytes"].as_u64().unwrap())
}

/// A node of a pod with a Secret volume, an emptyDir of logs and configs holding values,
/// a pod log, and two image layers; its fingerprint file.
fn node(values: &[Vec<u8>]) -> (NodeTree, PathBuf) {
    let tree = NodeTree::new();
    let pod = tree.pod("5a5a5a5a-0000-4000-8000-0000000000a1");
    pod.secret_volume("db").key("password", &values[0]).key("user", b"app");
    let log = [b"start\npassword=".as_slice(), &values[1], b"\nend\n"].concat();
    pod.file("volumes/kubernetes.io~empty-dir/cache/app.log", &log);
    pod.file("volumes/kubernetes.io~empty-dir/cache/plain.txt", &filler(3, 40_000));
    // A rule's token on the log's last line: its match is taken from the last carry.
    let token = kresidue::rules::examples::render("{ghtoken:ghp}", 5190);
    let line = [
        b"2025-01-01T00:00:00Z stdout F token ".as_slice(),
        &values[2],
        b"\n2025-01-01T00:00:01Z stdout F GITHUB_TOKEN=",
        &token,
        b"\n",
    ]
    .concat();
    pod.log("shop", "api", "api", "0.log", &line);
    for (id, seed) in [(1, 11), (2, 12)] {
        tree.write(format!("{}/usr/share/doc/readme", tree.snapshot(id)), &filler(seed, 20_000));
    }
    let secrets: Vec<Secret> = values
        .iter()
        .enumerate()
        .map(|(i, v)| Secret::opaque("shop", &format!("s{i}"), &[("v", v.as_slice())]))
        .collect();
    let file = tree.secrets_file("secrets.json", &secrets);
    let fp = tree.fingerprint_file(&file, &[], "values.fp");
    (tree, fp)
}

/// [`node`] of four values from `seed` on, its files older than any scan that follows
/// by more than the state's granularity: values, tree, fingerprints, the state dir.
fn settled(seed: u64) -> (Vec<Vec<u8>>, NodeTree, PathBuf, PathBuf) {
    let values: Vec<Vec<u8>> = (0..4).map(|i| fake_secret(seed + i)).collect();
    let (tree, fp) = node(&values);
    let state = tree.work("state");
    std::thread::sleep(SETTLE);
    (values, tree, fp, state)
}

/// A second scan of an unchanged node reads nothing but the few bytes its findings'
/// previews show (a rule's match at a pod log's end among them), and says so (`-v`, the
/// summary); after an append, an in-place rewrite of the same size with its mtime put
/// back, a rename, a new and a removed file, and a Secret volume's update (its old payload
/// left behind, the same files under new names), it reads exactly those, and its report
/// is a full scan's.
#[test]
fn a_rescan_reads_only_what_changed() {
    let (values, tree, fp, state) = settled(5200);
    let first = scan(&tree, &fp, &state, &[]);
    assert_eq!(unchanged(&first), (0, 0));
    assert!(first.stderr_str().contains("none yet"), "{}", first.stderr_str());
    let second = scan(&tree, &fp, &state, &[]);
    let files = second.json()["summary"]["files"].as_u64().unwrap();
    assert!(files >= 7, "{files}");
    assert_eq!(unchanged(&second).0, files, "every file unchanged");
    assert_eq!(comparable(&second), comparable(&first));
    assert!(second
        .stderr_str()
        .contains(&format!("unchanged since the last scan (its state): {files} files")));
    // Nothing read, nothing gone: the state is kept as it was, not written again.
    let written = || {
        let entries = std::fs::read_dir(&state).unwrap().map(|e| e.unwrap().path());
        let files: Vec<_> = entries.collect();
        assert_eq!(files.len(), 1, "{files:?}");
        std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&files[0]).unwrap())
    };
    let after_first = written();
    // A file that gave no finding is not opened (its identity asked through an `O_PATH`
    // descriptor, which inotify is not told of); one with findings is, for their
    // previews. Run without the harness's digest of the tree, which reads every file.
    use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
    let watch = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).unwrap();
    let pod = tree.pod("5a5a5a5a-0000-4000-8000-0000000000a1");
    let cache =
        |name: &str| tree.host(pod.path(&format!("volumes/kubernetes.io~empty-dir/cache/{name}")));
    let plain = watch.add_watch(&cache("plain.txt"), AddWatchFlags::IN_OPEN).unwrap();
    let log = watch.add_watch(&cache("app.log"), AddWatchFlags::IN_OPEN).unwrap();
    let mut args = vec!["scan", "--root", tree.root_arg(), "--no-cri", "--format", "json"];
    args.extend(["--fingerprints", path_arg(&fp), "--state", path_arg(&state)]);
    let unseen = tree.kr().run(&args);
    assert_eq!(unseen.json()["summary"]["unchanged_files"], files, "{}", unseen.stderr_str());
    let opened: Vec<_> = watch.read_events().unwrap_or_default().iter().map(|e| e.wd).collect();
    assert!(opened.contains(&log), "app.log's findings' previews are read again");
    assert!(!opened.contains(&plain), "plain.txt, without findings, was opened");
    assert_eq!(written(), after_first, "an unchanged node's state is not written again");
    // Appended: a value more.
    let mut f = std::fs::OpenOptions::new().append(true).open(cache("app.log")).unwrap();
    std::io::Write::write_all(&mut f, &[b"again=".as_slice(), &values[3]].concat()).unwrap();
    drop(f);
    // Rewritten in place, the same size, its mtime put back: a value where filler was.
    let plain = cache("plain.txt");
    let mtime = std::fs::metadata(&plain).unwrap().modified().unwrap();
    let mut bytes = std::fs::read(&plain).unwrap();
    bytes[1000..1000 + values[3].len()].copy_from_slice(&values[3]);
    std::fs::write(&plain, &bytes).unwrap();
    std::fs::File::options().write(true).open(&plain).unwrap().set_modified(mtime).unwrap();
    assert_eq!(std::fs::metadata(&plain).unwrap().modified().unwrap(), mtime);
    // Renamed, added, removed.
    std::fs::rename(cache("app.log"), cache("app.1.log")).unwrap();
    pod.file("volumes/kubernetes.io~empty-dir/cache/new.txt", &values[0]);
    std::fs::remove_file(tree.host(format!("{}/usr/share/doc/readme", tree.snapshot(2)))).unwrap();
    // kubelet updates the Secret: a new payload dir and `..data` swapped to it, the old
    // one left behind. Its files are unchanged, but their names are now their real paths
    // (stale copies), and so are their findings' ids.
    let vol = tree.host(pod.path("volumes/kubernetes.io~secret/db"));
    let ts = "..2026_01_01_00_00_00.000000001";
    std::fs::create_dir(vol.join(ts)).unwrap();
    std::fs::write(vol.join(ts).join("password"), &values[2]).unwrap();
    std::fs::write(vol.join(ts).join("user"), b"app").unwrap();
    std::fs::remove_file(vol.join("..data")).unwrap();
    std::os::unix::fs::symlink(ts, vol.join("..data")).unwrap();
    let third = scan(&tree, &fp, &state, &[]);
    assert_ne!(written(), after_first, "a changed node's state is written again");
    let full = scan(&tree, &fp, &state, &["--full"]);
    assert_eq!(unchanged(&full), (0, 0), "--full reads every file");
    assert_eq!(comparable(&third), comparable(&full));
    let files = full.json()["summary"]["files"].as_u64().unwrap();
    // Read again: the renamed, rewritten and new files, the new payload's two and the old
    // payload's two (named anew).
    assert_eq!(unchanged(&third).0, files - 7, "{}", third.stderr_str());
    let stale = third.findings().iter().filter(|f| f.stale == Some(true)).count();
    assert_eq!(stale, 1, "the old payload's password, a stale copy");
    let paths: Vec<String> = third.findings().iter().map(|f| f.path.clone()).collect();
    assert!(paths.iter().any(|p| p.ends_with("/plain.txt")), "{paths:?}");
    assert!(paths.iter().any(|p| p.ends_with("/app.1.log")), "{paths:?}");
}

/// Over a node changed at random between scans (files with and without values added,
/// removed, appended, rewritten in place with their size and mtime kept, renamed, layers
/// added, the fingerprints changed), the report of a scan with the state is a full
/// scan's after every step.
#[test]
fn incremental_reports_equal_full_reports_over_random_changes() {
    for seed in [1u64, 2, 3] {
        let mut rng = Prng::new(0x5ea7 + seed);
        let mut values: Vec<Vec<u8>> = (0..6).map(|i| fake_secret(5300 + seed * 10 + i)).collect();
        let (tree, mut fp) = node(&values[..4]);
        let state = tree.work("state");
        let dir = "volumes/kubernetes.io~empty-dir/cache";
        let pod = tree.pod("5a5a5a5a-0000-4000-8000-0000000000a1");
        let mut files: Vec<String> = Vec::new();
        // A third of the files hold no value: those a rescan takes without opening them
        // (until a change puts a value in one).
        for i in 0..12 {
            let value = if i % 3 == 0 { Vec::new() } else { values[i as usize % 4].clone() };
            let bytes = [filler(seed * 100 + i, 500 + rng.below(5000)), value].concat();
            files.push(pod.file(&format!("{dir}/f{i}.txt"), &bytes));
        }
        std::thread::sleep(SETTLE);
        scan(&tree, &fp, &state, &[]);
        let mut spared = 0;
        for step in 0..8u64 {
            for _ in 0..1 + rng.below(3) {
                let at = rng.below(files.len());
                let host = tree.host(&files[at]);
                let value = &values[rng.below(values.len())];
                match rng.below(7) {
                    0 => {
                        let name = format!("{dir}/n{step}-{}.txt", rng.below(1000));
                        files.push(pod.file(&name, &[b"k=".as_slice(), value].concat()));
                    }
                    1 if files.len() > 2 => {
                        let _ = std::fs::remove_file(&host);
                        files.remove(at);
                    }
                    2 => {
                        if let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(&host) {
                            std::io::Write::write_all(&mut f, value).unwrap();
                        }
                    }
                    3 => {
                        let Ok(meta) = std::fs::metadata(&host) else { continue };
                        let mut bytes = std::fs::read(&host).unwrap();
                        let at = rng.below(bytes.len().saturating_sub(value.len()) + 1);
                        let end = (at + value.len()).min(bytes.len());
                        bytes[at..end].copy_from_slice(&value[..end - at]);
                        std::fs::write(&host, &bytes).unwrap();
                        let f = std::fs::File::options().write(true).open(&host).unwrap();
                        f.set_modified(meta.modified().unwrap()).unwrap();
                    }
                    4 => {
                        let to = format!("{}.r{step}", files[at]);
                        if std::fs::rename(&host, tree.host(&to)).is_ok() {
                            files[at] = to;
                        }
                    }
                    5 => {
                        let layer = tree.snapshot(10 + step * 10 + rng.below(10) as u64);
                        tree.write(
                            format!("{layer}/etc/app.conf"),
                            &[b"secret: ".as_slice(), value].concat(),
                        );
                    }
                    _ => {
                        // The fingerprints change: a value rotated in.
                        let v = fake_secret(5400 + seed * 100 + step);
                        values.push(v);
                        let secrets: Vec<Secret> = values
                            .iter()
                            .enumerate()
                            .map(|(i, v)| {
                                Secret::opaque("shop", &format!("s{i}"), &[("v", v.as_slice())])
                            })
                            .collect();
                        let file = tree.secrets_file(&format!("secrets-{step}.json"), &secrets);
                        fp = tree.fingerprint_file(&file, &[], &format!("values-{step}.fp"));
                    }
                }
            }
            // Every other step, the changes settle before the scan: the next step's
            // changes then meet records that are not "racily clean", which only the
            // files' identities tell from what changed.
            if step % 2 == 0 {
                std::thread::sleep(SETTLE);
            }
            let incremental = scan(&tree, &fp, &state, &[]);
            spared += unchanged(&incremental).0;
            let full =
                tree.scan(&["--fingerprints", path_arg(&fp), "--no-state", "--format", "json"]);
            assert_eq!(comparable(&incremental), comparable(&full), "seed {seed}, step {step}");
        }
        assert!(spared > 0, "seed {seed}: no file was ever taken from the state");
    }
}

/// A state damaged, cut, of another binary's making, or where another user could change
/// it (a symlink, a file others may write) is not used: one note, every file read, the
/// same report; it is then written anew.
#[test]
fn a_damaged_or_unsafe_state_is_not_used() {
    use std::os::unix::fs::PermissionsExt;
    let (_, tree, fp, state) = settled(5500);
    let first = scan(&tree, &fp, &state, &[]);
    let file = std::fs::read_dir(&state).unwrap().next().unwrap().unwrap().path();
    let good = std::fs::read(&file).unwrap();
    let damaged = |bytes: &[u8]| {
        std::fs::write(&file, bytes).unwrap();
        let out = scan(&tree, &fp, &state, &[]);
        assert_eq!(unchanged(&out), (0, 0));
        assert_eq!(comparable(&out), comparable(&first));
        assert!(out.stderr_str().contains("is not used"), "{}", out.stderr_str());
        out
    };
    let mut flipped = good.clone();
    flipped[good.len() / 2] ^= 0x40;
    assert!(damaged(&flipped).stderr_str().contains("damaged"));
    damaged(&good[..good.len() - 7]);
    damaged(b"not a state at all");
    // Written anew by the scan that did not use it: used by the next.
    assert!(unchanged(&scan(&tree, &fp, &state, &[])).0 > 0);
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = scan(&tree, &fp, &state, &[]);
    assert!(out.stderr_str().contains("writable by others"), "{}", out.stderr_str());
    assert_eq!(unchanged(&out), (0, 0));
    std::fs::remove_file(&file).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", &file).unwrap();
    let out = scan(&tree, &fp, &state, &[]);
    assert!(out.stderr_str().contains("is not used"), "{}", out.stderr_str());
    assert!(
        std::fs::symlink_metadata(&file).unwrap().file_type().is_symlink(),
        "not written through"
    );
    // Other fingerprints: the state is another scan's, said with -v, every file read.
    let other =
        tree.secrets_file("other.json", &[Secret::opaque("a", "b", &[("c", fake_secret(5599))])]);
    let other = tree.fingerprint_file(&other, &[], "other.fp");
    std::fs::remove_file(&file).unwrap();
    scan(&tree, &fp, &state, &[]);
    let out = scan(&tree, &other, &state, &[]);
    assert_eq!(unchanged(&out), (0, 0));
    assert!(out.stderr_str().contains("made with other fingerprints"), "{}", out.stderr_str());
}

/// The state holds no value, no piece of one, and no name: a file named by a value, and
/// files holding values, leave none of it in the state (mode 0600, its dir 0700).
#[test]
fn the_state_holds_no_secret() {
    use std::os::unix::fs::PermissionsExt;
    let values: Vec<Vec<u8>> = (0..4).map(|i| fake_secret(5600 + i)).collect();
    let (tree, fp) = node(&values);
    let pod = tree.pod("5a5a5a5a-0000-4000-8000-0000000000a1");
    let name = String::from_utf8(values[3].clone()).unwrap();
    pod.file(&format!("volumes/kubernetes.io~empty-dir/cache/{name}"), b"a file named by a value");
    let state = tree.work("state");
    scan(&tree, &fp, &state, &[]);
    let file = std::fs::read_dir(&state).unwrap().next().unwrap().unwrap().path();
    let bytes = std::fs::read(&file).unwrap();
    for v in &values {
        for piece in v.windows(8) {
            assert!(!bytes.windows(8).any(|w| w == piece), "a piece of a value in the state");
        }
    }
    assert!(!bytes.windows(8).any(|w| w == &name.as_bytes()[..8]));
    // No digest of the name either: one who guesses the value and makes the key of the
    // file's path with it (the walk's path and shown parts, as the state's key is made)
    // finds no such key in the state. The findings were kept (what matched, as the
    // fingerprint file names it), so the state was not empty.
    let scope = pod.dir();
    let inner = format!("volumes/kubernetes.io~empty-dir/cache/{name}");
    let rel = format!("{}/{inner}", scope.trim_start_matches('/'));
    let guess =
        kresidue::scan::state::key(Path::new(&rel), &[Path::new(&scope), Path::new(&inner)]);
    assert!(!bytes.windows(16).any(|w| w == guess), "the state confirms a guessed value");
    assert!(bytes.windows(4).any(|w| w == b"shop"), "no finding kept");
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(std::fs::metadata(&state).unwrap().permissions().mode() & 0o777, 0o700);
}

/// A finding's id is made of its path as shown, and a part of a path is shown withheld
/// once material found in any name on the node is in it. A rule's match in another file's
/// name (a GitHub token; the unchanged file's dir holds it with a letter on each side,
/// which the rule alone does not match) changes how an unchanged file's path is shown,
/// and so its finding's id, both when the name appears and when it goes: the incremental
/// report is still a full scan's.
#[test]
fn a_name_found_elsewhere_that_changes_how_a_path_is_shown_is_a_full_scans() {
    let (values, tree, fp, state) = settled(5700);
    let pod = tree.pod("5a5a5a5a-0000-4000-8000-0000000000a1");
    let token = kresidue::rules::examples::render("{ghtoken:ghp}", 5190);
    let token = String::from_utf8(token).unwrap();
    let conf = [b"password=".as_slice(), &values[0], b"\n"].concat();
    pod.file(&format!("volumes/kubernetes.io~empty-dir/cache/z9/X{token}Z/conf.txt"), &conf);
    std::thread::sleep(SETTLE);
    let one = ["--threads", "1"];
    let full = |tree: &NodeTree| {
        let args = ["--fingerprints", path_arg(&fp), "--no-state", "--format", "json"];
        tree.scan(&[args.as_slice(), &one].concat())
    };
    scan(&tree, &fp, &state, &one);
    // A file named by the token, walked before the other: the rule matches its name.
    let named = pod.file(&format!("volumes/kubernetes.io~empty-dir/cache/a0/{token}"), b"x\n");
    let incremental = scan(&tree, &fp, &state, &one);
    assert!(unchanged(&incremental).0 > 0);
    let f = full(&tree);
    assert!(f.stdout_str().contains("/<withheld>/conf.txt"), "{}", f.stdout_str());
    assert_eq!(comparable(&incremental), comparable(&f));
    // The name gone again, the files settled: the path is shown whole again.
    std::thread::sleep(SETTLE);
    scan(&tree, &fp, &state, &one);
    std::fs::remove_file(tree.host(&named)).unwrap();
    let incremental = scan(&tree, &fp, &state, &one);
    assert!(unchanged(&incremental).0 > 0);
    let f = full(&tree);
    assert!(!f.stdout_str().contains("<withheld>"), "{}", f.stdout_str());
    assert_eq!(comparable(&incremental), comparable(&f));
}

/// A write through a shared writable mapping sets the file's times only at the write
/// fault of a clean page; later writes to the page while it is dirty (until writeback,
/// about 30 s; on tmpfs, ever) leave the file's identity as it was. With
/// `--state-max-age`, a file the state has had unchanged for longer is read again: the
/// value written so after a scan read the file is found then, as a full scan finds it.
/// `--state-max-age` under a second is refused in one line.
#[test]
#[allow(unsafe_code)]
fn a_write_no_file_time_shows_is_found_within_the_most_age() {
    use nix::libc;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;
    const LEN: usize = 8192;
    let (values, tree, fp, state) = settled(5800);
    let pod = tree.pod("5a5a5a5a-0000-4000-8000-0000000000a1");
    let times =
        |m: &std::fs::Metadata| (m.size(), m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec());
    let max_age = ["--state-max-age", "1s"];
    // Writeback (or a `sync` elsewhere) between the two writes would give the file new
    // times: then the case is made again with another file.
    for attempt in 0..3 {
        let node = pod.file(
            &format!("volumes/kubernetes.io~empty-dir/cache/shm{attempt}.dat"),
            &filler(58, LEN),
        );
        let host = tree.host(&node);
        let f = std::fs::OpenOptions::new().read(true).write(true).open(&host).unwrap();
        let (rw, shared) = (libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED);
        // SAFETY: a new shared mapping of the LEN bytes of a file that long, unmapped
        // below, used by this thread alone.
        let map = unsafe { libc::mmap(std::ptr::null_mut(), LEN, rw, shared, f.as_raw_fd(), 0) };
        assert_ne!(map, libc::MAP_FAILED);
        // SAFETY: the mapping above.
        let bytes = unsafe { std::slice::from_raw_parts_mut(map.cast::<u8>(), LEN) };
        bytes[0] = b'#'; // The write fault: the file's times are set now.
        std::thread::sleep(SETTLE);
        scan(&tree, &fp, &state, &max_age);
        let before = times(&std::fs::metadata(&host).unwrap());
        let value = [b"password=".as_slice(), &values[3], b"\n"].concat();
        bytes[100..100 + value.len()].copy_from_slice(&value);
        let same = times(&std::fs::metadata(&host).unwrap()) == before;
        // SAFETY: the mapping above, no longer used (the page stays dirty in the cache).
        unsafe { libc::munmap(map, LEN) };
        if !same {
            assert!(attempt < 2, "the file's times changed at every attempt");
            continue;
        }
        // Not yet due: taken from the state, the value unseen (what the most age is for).
        let soon = scan(&tree, &fp, &state, &[]);
        assert!(!soon.stdout_str().contains(&format!("shm{attempt}.dat")), "{}", soon.stdout_str());
        std::thread::sleep(Duration::from_millis(1100));
        let incremental = scan(&tree, &fp, &state, &max_age);
        let said = incremental.stderr_str();
        assert!(said.contains("unread for longer than --state-max-age: "), "{said}");
        let full = tree.scan(&["--fingerprints", path_arg(&fp), "--no-state", "--format", "json"]);
        assert!(full.stdout_str().contains(&format!("shm{attempt}.dat")), "{}", full.stdout_str());
        assert_eq!(comparable(&incremental), comparable(&full));
        break;
    }
    for bad in ["0s", "500ms", "soon"] {
        let out = tree.scan(&["--state", path_arg(&state), "--state-max-age", bad]);
        assert_eq!(out.code, 2, "{bad}");
        assert_eq!(out.stderr_str().trim().lines().count(), 1, "{}", out.stderr_str());
    }
}
