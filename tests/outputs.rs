//! What a run writes and how it ends (issue 28, items 4 and 11–16): no option value is
//! repeated in a message; `-o` refuses a symlink unless told to follow it, and never
//! follows one another user planted in a sticky world-writable dir (applying the kernel's
//! `protected_symlinks` rule itself, whatever the sysctl says); the run lock lives where
//! only root (or the running user) can create it, so another user cannot block runs; a
//! report cut short by a closed pipe exits 2; `--threads` and `--every` are bounded; a
//! FIFO without a reader (`-o`, `--journal`) cannot hang a run past a stop signal.
//! Tests that change owners or run as `nobody` need root and say they are skipped
//! otherwise.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::*;

const UID: &str = "28282828-0000-4000-8000-000000000028";
const NOBODY: u32 = 65534;

/// A node with one value in a secret volume, and its `--secrets` file.
fn node() -> (NodeTree, String, PathBuf) {
    let tree = NodeTree::new();
    let (value, secrets) = db_password(&tree, 2801);
    tree.pod(UID).secret_volume("db").key("password", value.as_bytes());
    let file = tree.secrets_file("secrets.json", &secrets);
    (tree, value, file)
}

/// A dir in the tree's work space with `mode` (chmod, so the umask does not apply).
fn dir_with_mode(tree: &NodeTree, name: &str, mode: u32) -> PathBuf {
    let d = tree.work(name);
    fs::create_dir_all(&d).unwrap();
    fs::set_permissions(&d, fs::Permissions::from_mode(mode)).unwrap();
    d
}

/// Whether `hay` holds any 4-byte piece of `value`.
fn holds_a_piece(hay: &[u8], value: &str) -> Option<String> {
    value
        .as_bytes()
        .windows(4)
        .find(|w| contains(hay, w))
        .map(|w| String::from_utf8_lossy(w).into_owned())
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut n: Vec<String> =
        fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    n.sort();
    n
}

/// Bytes, mode and owner of a file.
fn state(p: &Path) -> (Vec<u8>, u32, u32) {
    let m = fs::metadata(p).unwrap();
    (fs::read(p).unwrap(), m.mode(), m.uid())
}

/// Sends `signal` (`TERM`, `INT`) to `child`.
fn kill(child: &Child, signal: &str) {
    let ok = Command::new("kill").args([&format!("-{signal}"), &child.id().to_string()]).status();
    assert!(ok.unwrap().success());
}

/// Waits at most `limit` for `child`; kills it (and fails) past that.
fn wait_at_most(mut child: Child, limit: Duration, what: &str) -> std::process::Output {
    let t = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{what}: still running after {limit:?}\nstderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// The built binary, with the tree's lock (as `Kr` runs it).
fn kresidue(tree: &NodeTree) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kresidue"));
    c.env("KRESIDUE_LOCK", tree.work("kresidue.lock"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// One line on stderr, no value in either stream.
fn assert_one_line(out: &std::process::Output, value: &str) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(err.trim_end().lines().count(), 1, "expected one line on stderr:\n{err}");
    for s in [&out.stdout, &out.stderr] {
        assert!(!contains(s, value.as_bytes()), "a value is printed");
    }
    err
}

/// Item 11: a secret-shaped value given to every option that takes a free-form value (or
/// to a misspelt option, a stray argument, an unknown subcommand) is never repeated on
/// stderr, nor any 4-character piece of it: the message names the option only.
#[test]
fn no_option_value_is_repeated_in_a_message() {
    let (tree, _, file) = node();
    // Starts with a letter: `5<v>` reads as the number 5 and the unit <v>.
    let v = format!("Q{}", String::from_utf8(fake_secret_len(2802, 23)).unwrap());
    tree.guard(v.as_bytes());
    let root = tree.root_arg();
    let secrets = path_arg(&file);
    let five_v = format!("5{v}");
    let dash_v = format!("--{v}");
    let typo = format!("--max-file-sise={v}");
    let eq = format!("--timeout={v}");
    let tcp = format!("tcp://{v}");
    let scan = |extra: &[&str]| -> Vec<String> {
        let mut a = vec!["scan", "--root", root, "--secrets", secrets];
        a.extend_from_slice(extra);
        a.into_iter().map(str::to_owned).collect()
    };
    let mut cases: Vec<Vec<String>> = vec![
        scan(&["--max-file-size", &five_v]),
        scan(&["--max-file-size", &v]),
        scan(&["--timeout", &v]),
        scan(&["--timeout", &five_v]),
        scan(&["--every", &v]),
        scan(&["--every", &five_v]),
        scan(&["--cri-timeout", &v]),
        scan(&["--cri", &v]),
        scan(&["--cri", &tcp]),
        scan(&["--threads", &v]),
        scan(&["--secret-series", &v]),
        scan(&["--chunk-size", &v]),
        scan(&["--format", &v]),
        scan(&["--fail-on", &v]),
        scan(&[&typo]),
        scan(&[&format!("--no-rules={v}")]),
        scan(&[&eq]),
        scan(&[&dash_v]),
        scan(&[&v]),
    ];
    for extra in [["--min-age", v.as_str()], ["--cri-timeout", v.as_str()]] {
        let mut a = vec!["clean", "--root", root, "--secrets", secrets];
        a.extend_from_slice(&extra);
        cases.push(a.into_iter().map(str::to_owned).collect());
    }
    for a in [
        vec![v.as_str()],
        vec!["rules", "--format", &v],
        vec!["completions", &v],
        vec!["pods", "--root", root, "--cri-timeout", &v],
        vec!["fingerprint", secrets, &dash_v],
    ] {
        cases.push(a.into_iter().map(str::to_owned).collect());
    }
    for args in &cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = tree.run(&args);
        out.assert_one_line_error();
        for (name, stream) in [("stderr", &out.stderr), ("stdout", &out.stdout)] {
            if let Some(piece) = holds_a_piece(stream, &v) {
                panic!(
                    "`kresidue {}`: {name} repeats the piece {piece:?} of the value:\n{}",
                    args.join(" "),
                    String::from_utf8_lossy(stream)
                );
            }
        }
    }
    // A label is carried into findings, not into messages.
    let fp = tree.work("labelled.fp");
    let out = tree.run(&["fingerprint", secrets, "--label", &v, "-o", path_arg(&fp)]);
    out.assert_code(0);
    assert_eq!(holds_a_piece(&out.stderr, &v), None, "{}", out.stderr_str());
}

/// Item 12: `nobody` plants `report.json -> a root-owned file` in a sticky world-writable
/// dir (as in /tmp); root's `scan -o` there exits 2 with one line, with or without
/// `--follow-output-symlink`, and the target keeps its bytes, mode and owner. So does
/// `fingerprint -o`, and a dir symlink of `nobody`'s on the way (`-o tmp/d/report.json`).
#[test]
// The skip message is for the person running the tests.
#[allow(clippy::print_stderr)]
fn output_through_another_users_symlink_is_refused() {
    if !is_root() {
        eprintln!("skipped: planting another user's symlink needs root");
        return;
    }
    let (tree, _, file) = node();
    let sticky = dir_with_mode(&tree, "tmp", 0o1777);
    let target = tree.work("rootowned.conf");
    fs::write(&target, b"setting = root's own\n").unwrap();
    fs::set_permissions(&target, fs::Permissions::from_mode(0o644)).unwrap();
    let before = state(&target);
    let link = sticky.join("report.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    std::os::unix::fs::lchown(&link, Some(NOBODY), Some(NOBODY)).unwrap();
    let etc = dir_with_mode(&tree, "etc", 0o755);
    let dlink = sticky.join("d");
    std::os::unix::fs::symlink(&etc, &dlink).unwrap();
    std::os::unix::fs::lchown(&dlink, Some(NOBODY), Some(NOBODY)).unwrap();
    let scan = |o: &Path, extra: &[&str]| {
        let mut a = vec!["--secrets", path_arg(&file), "--format", "json", "-o", path_arg(o)];
        a.extend_from_slice(extra);
        tree.scan(&a)
    };
    for extra in [&[][..], &["--follow-output-symlink"]] {
        scan(&link, extra).assert_one_line_error();
        assert_eq!(state(&target), before, "the target changed ({extra:?})");
        assert!(fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(names(&sticky), ["d", "report.json"], "leftover files ({extra:?})");
        let fp = tree.run(&["fingerprint", path_arg(&file), "-o", path_arg(&link)]);
        fp.assert_one_line_error();
        assert_eq!(state(&target), before, "fingerprint -o changed the target");
        scan(&dlink.join("report.json"), extra).assert_one_line_error();
        assert!(names(&etc).is_empty(), "written through nobody's dir link: {:?}", names(&etc));
    }
}

/// Item 12: a symlink of one's own (`latest.json -> r1.json`, root's, in root's dir) is
/// refused too unless `--follow-output-symlink` is given (one line naming the flag); with
/// it the report replaces the target and the link is kept.
#[test]
fn output_through_a_symlink_needs_the_flag() {
    let (tree, _, file) = node();
    let dir = dir_with_mode(&tree, "reports", 0o755);
    let target = dir.join("r1.json");
    fs::write(&target, b"{\"previous\": true}\n").unwrap();
    let link = dir.join("latest.json");
    std::os::unix::fs::symlink("r1.json", &link).unwrap();
    let args = ["--secrets", path_arg(&file), "--format", "json", "-o", path_arg(&link)];
    let out = tree.scan(&args);
    out.assert_one_line_error();
    assert!(out.stderr_str().contains("--follow-output-symlink"), "{}", out.stderr_str());
    assert_eq!(fs::read(&target).unwrap(), b"{\"previous\": true}\n");
    let out = tree.scan(&[&args[..], &["--follow-output-symlink"]].concat());
    out.assert_code(1);
    let report: serde_json::Value = serde_json::from_slice(&fs::read(&target).unwrap()).unwrap();
    assert_eq!(report["schema"], "kresidue/report/v1");
    assert!(fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert_eq!(names(&dir), ["latest.json", "r1.json"], "leftover files");
}

/// Item 13: `nobody` pre-creates the old default lock `/run/lock/kresidue.lock` (mode
/// 1777 dir) and holds it; root's scan with the default lock still runs (exit 1, not 2):
/// its lock is the root's own in `/run/kresidue` (issue 31 item 4), the dir made by root
/// with mode 0700, unreachable by `nobody`, the file removed when released.
#[test]
#[allow(clippy::print_stderr)]
fn another_user_cannot_block_runs_through_the_lock() {
    if !is_root() || !Path::new("/run/lock").is_dir() {
        eprintln!("skipped: needs root and /run/lock");
        return;
    }
    let (tree, value, file) = node();
    let old = Path::new("/run/lock/kresidue.lock");
    let new: &Path = &default_lock_of(tree.root());
    let holders: Vec<Child> = [old, new]
        .iter()
        .map(|lock| {
            Command::new("flock")
                .args(["--no-fork", "-x"])
                .arg(lock)
                .args(["sleep", "60"])
                .uid(NOBODY)
                .gid(NOBODY)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("flock (util-linux)")
        })
        .collect();
    // Until nobody holds the old one: a probe of root's own cannot take it then.
    let t = Instant::now();
    while Command::new("flock").args(["-n", "-x"]).arg(old).arg("true").status().unwrap().success()
    {
        assert!(t.elapsed() < Duration::from_secs(10), "nobody never took the lock");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = kresidue(&tree)
        .env_remove("KRESIDUE_LOCK")
        .env_remove("XDG_RUNTIME_DIR")
        .args(["scan", "--root", tree.root_arg(), "--no-cri", "--secrets", path_arg(&file)])
        .output()
        .unwrap();
    for mut h in holders {
        let _ = h.kill();
        let _ = h.wait();
    }
    if fs::metadata(old).is_ok_and(|m| m.uid() == NOBODY) {
        let _ = fs::remove_file(old);
    }
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!contains(&out.stdout, value.as_bytes()) && !err.contains(&value));
    assert_eq!(out.status.code(), Some(1), "{err}");
    let dir = fs::metadata("/run/kresidue").unwrap();
    assert_eq!((dir.mode() & 0o7777, dir.uid()), (0o700, 0), "/run/kresidue");
    assert!(!new.exists(), "{} is left", new.display());
}

/// Item 13: a lock other users could hold or replace is refused, exit 2 with one line
/// naming it: in a world-writable dir (even sticky), a file owned by another user, a file
/// others may write, a symlink. Nothing is scanned.
#[test]
#[allow(clippy::print_stderr)]
fn a_lock_others_could_hold_or_replace_is_refused() {
    if !is_root() {
        eprintln!("skipped: files of another user need root");
        return;
    }
    let (tree, _, file) = node();
    let sticky = dir_with_mode(&tree, "runlock", 0o1777);
    let open = dir_with_mode(&tree, "open", 0o777);
    let locks = dir_with_mode(&tree, "locks", 0o755);
    let theirs = locks.join("theirs.lock");
    fs::write(&theirs, b"").unwrap();
    std::os::unix::fs::chown(&theirs, Some(NOBODY), Some(NOBODY)).unwrap();
    let writable = locks.join("writable.lock");
    fs::write(&writable, b"").unwrap();
    fs::set_permissions(&writable, fs::Permissions::from_mode(0o666)).unwrap();
    let link = locks.join("link.lock");
    std::os::unix::fs::symlink(locks.join("elsewhere.lock"), &link).unwrap();
    for lock in [sticky.join("kresidue.lock"), open.join("kresidue.lock"), theirs, writable, link] {
        let out = tree.scan(&["--secrets", path_arg(&file), "--lock", path_arg(&lock)]);
        out.assert_one_line_error();
        let err = out.stderr_str();
        assert!(err.contains("lock"), "{err}");
        assert!(!err.contains("another kresidue run holds"), "{err}");
    }
    assert!(!locks.join("elsewhere.lock").exists(), "the lock's symlink was followed");
    assert!(names(&sticky).is_empty() && names(&open).is_empty());
}

/// Issue 46 break 9: `nobody` plants `evil -> victim` in a sticky world-writable dir;
/// root's `--lock st/evil/sub/lock` (a dir to make, then the file) and `--lock
/// st/evil/lock` exit 2 with one line, and nothing is created under `victim`: the lock
/// goes through `-o`'s writer, its dir too, and nothing is made before the path is checked.
#[test]
#[allow(clippy::print_stderr)]
fn a_lock_through_another_users_symlink_is_refused() {
    if !is_root() {
        eprintln!("skipped: planting another user's symlink needs root");
        return;
    }
    let (tree, _, file) = node();
    let (sticky, victim, evil) = planted(&tree.work("planted"));
    for lock in [evil.join("sub/lock"), evil.join("lock")] {
        let out = tree.scan(&["--secrets", path_arg(&file), "--lock", path_arg(&lock)]);
        out.assert_one_line_error();
        assert!(out.stderr_str().contains("lock"), "{}", out.stderr_str());
        assert!(names(&victim).is_empty(), "made through nobody's link: {:?}", names(&victim));
        assert_eq!(names(&sticky), ["evil"]);
    }
}

/// Issue 46 break 9: `clean --apply --journal st/evil/jdir/x.jsonl` (`evil -> victim`,
/// `nobody`'s, in a sticky world-writable dir) exits 2 with one line before it removes
/// anything, and neither `victim/jdir` nor any file under `victim` is created.
#[test]
#[allow(clippy::print_stderr)]
fn a_journal_through_another_users_symlink_is_refused() {
    if !is_root() {
        eprintln!("skipped: planting another user's symlink needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (sticky, victim, evil) = planted(dir.path());
    for journal in [evil.join("jdir/x.jsonl"), evil.join("x.jsonl")] {
        the_journal_is_refused(&journal, "clean --apply with a journal through a link");
        assert!(names(&victim).is_empty(), "made through nobody's link: {:?}", names(&victim));
        assert_eq!(names(&sticky), ["evil"]);
    }
}

/// In `base`: a sticky world-writable `st` holding `evil -> victim`, a symlink of
/// `nobody`'s to root's dir `victim`. Gives `(st, victim, evil)`.
fn planted(base: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let (sticky, victim) = (base.join("st"), base.join("victim"));
    for (d, mode) in [(&sticky, 0o1777), (&victim, 0o755)] {
        fs::create_dir_all(d).unwrap();
        fs::set_permissions(d, fs::Permissions::from_mode(mode)).unwrap();
    }
    let evil = sticky.join("evil");
    std::os::unix::fs::symlink(&victim, &evil).unwrap();
    std::os::unix::fs::lchown(&evil, Some(NOBODY), Some(NOBODY)).unwrap();
    (sticky, victim, evil)
}

/// Item 13: a run as another user than root, with no `--lock`/`KRESIDUE_LOCK`, takes
/// its lock in its own `$XDG_RUNTIME_DIR` (the root's own in `kresidue/`, made mode 0700,
/// the file removed when released: issue 31 item 4); without one it runs without a
/// lock. Either way it scans (exit 1), and while that lock is held it exits 2.
#[test]
#[allow(clippy::print_stderr)]
fn a_run_as_another_user_locks_in_its_runtime_dir() {
    if !is_root() {
        eprintln!("skipped: running as nobody needs root");
        return;
    }
    let (_, value, _) = node();
    let base = tempfile::tempdir().unwrap();
    let b = base.path();
    fs::set_permissions(b, fs::Permissions::from_mode(0o755)).unwrap();
    fs::create_dir_all(b.join("root/etc")).unwrap();
    fs::write(b.join("root/etc/hostname"), b"node-n\n").unwrap();
    fs::write(b.join("root/etc/app.env"), format!("PASSWORD={value}\n")).unwrap();
    let secrets = b.join("secrets.json");
    fs::write(&secrets, kubectl_json(&[Secret::opaque("shop", "db", &[("password", &value)])]))
        .unwrap();
    let bin = b.join("kresidue");
    fs::copy(env!("CARGO_BIN_EXE_kresidue"), &bin).unwrap();
    for p in [b.join("root"), b.join("root/etc"), bin.clone()] {
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
    }
    for p in [b.join("root/etc/hostname"), b.join("root/etc/app.env"), secrets.clone()] {
        fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
    }
    let xdg = b.join("xdg");
    fs::create_dir(&xdg).unwrap();
    fs::set_permissions(&xdg, fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(&xdg, Some(NOBODY), Some(NOBODY)).unwrap();
    let run = |runtime_dir: Option<&Path>| {
        let mut cmd = Command::new("setpriv");
        cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"]).arg(&bin);
        cmd.args(["scan", "--root"]).arg(b.join("root")).args(["--no-cri", "--path", "/etc"]);
        cmd.arg("--secrets");
        cmd.arg(&secrets).env_remove("KRESIDUE_LOCK").env_remove("XDG_RUNTIME_DIR");
        if let Some(d) = runtime_dir {
            cmd.env("XDG_RUNTIME_DIR", d);
        }
        let out = output_of_copy(&mut cmd);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!contains(&out.stdout, value.as_bytes()) && !err.contains(&value));
        (out.status.code(), err)
    };
    for runtime_dir in [Some(xdg.as_path()), None] {
        let (code, err) = run(runtime_dir);
        assert_eq!(code, Some(1), "{runtime_dir:?}: {err}");
    }
    let dir = fs::symlink_metadata(xdg.join("kresidue")).expect("the lock's dir");
    assert_eq!((dir.mode() & 0o7777, dir.uid()), (0o700, NOBODY));
    assert_eq!(names(&xdg.join("kresidue")), Vec::<String>::new(), "the lock is removed");
    let lock = xdg.join("kresidue").join(lock_name_of(&b.join("root")));
    fs::write(&lock, b"").unwrap();
    fs::set_permissions(&lock, fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::chown(&lock, Some(NOBODY), Some(NOBODY)).unwrap();
    let held = fs::File::open(&lock).unwrap();
    let held = nix::fcntl::Flock::lock(held, nix::fcntl::FlockArg::LockExclusiveNonblock).unwrap();
    let (code, err) = run(Some(&xdg));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("another kresidue run holds the lock of root"), "{err}");
    drop(held);
}

/// Item 14: a report that cannot be fully written, because the reader of stdout closed
/// the pipe early (`scan | head -c 10`), exits 2 with one line, not 0 (with findings it
/// would be 1): a CI gate must not pass on half a report.
#[test]
fn a_report_cut_short_by_a_closed_pipe_exits_2() {
    let (tree, value, file) = node();
    for format in ["json", "table", "sarif"] {
        let (reader, writer) = std::io::pipe().unwrap();
        let child = kresidue(&tree)
            .args(["scan", "--root", tree.root_arg(), "--no-cri", "--secrets", path_arg(&file)])
            .args(["--format", format])
            .stdout(writer)
            .spawn()
            .unwrap();
        // The reader is gone before the report is written: every write of it fails.
        drop(reader);
        let out = wait_at_most(child, Duration::from_secs(60), "scan into a closed pipe");
        let err = assert_one_line(&out, &value);
        assert_eq!(out.status.code(), Some(2), "{format}: {err}");
        assert!(err.contains("pipe"), "{err}");
    }
}

/// Issue 46 break 10: every subcommand whose stdout is `/dev/full` (each write fails,
/// `ENOSPC`) exits 2 with one line saying so, never a panic (101): `completions` for
/// each shell as `scan`, `rules` and `fingerprint` do.
#[test]
fn stdout_that_cannot_be_written_exits_2_with_one_line() {
    let (tree, value, file) = node();
    let secrets = path_arg(&file);
    let cases: [&[&str]; 7] = [
        &["completions", "bash"],
        &["completions", "zsh"],
        &["completions", "fish"],
        &["rules", "--format", "json"],
        &["fingerprint", secrets],
        &["scan", "--root", tree.root_arg(), "--no-cri", "--secrets", secrets],
        &["scan", "--root", tree.root_arg(), "--no-cri", "--secrets", secrets, "--format", "json"],
    ];
    for args in cases {
        let full = fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let child = kresidue(&tree).args(args).stdout(full).spawn().unwrap();
        let out = wait_at_most(child, Duration::from_secs(60), "a run into /dev/full");
        let err = assert_one_line(&out, &value);
        assert_eq!(out.status.code(), Some(2), "`kresidue {}`: {err}", args.join(" "));
        assert!(err.contains("No space left"), "`kresidue {}`: {err}", args.join(" "));
    }
}

/// Item 15: `--threads` above 256 is refused at once (exit 2, one line naming the bound);
/// 256 itself runs.
#[test]
fn threads_are_bounded() {
    let (tree, _, file) = node();
    let kr = tree.kr().timeout(Duration::from_secs(20));
    let out = kr.scan(&["--secrets", path_arg(&file), "--threads", "3000"]);
    out.assert_one_line_error();
    assert!(out.stderr_str().contains("--threads") && out.stderr_str().contains("256"));
    assert!(out.elapsed < Duration::from_secs(5), "{:?}", out.elapsed);
    tree.scan(&["--secrets", path_arg(&file), "--threads", "256"]).assert_code(1);
}

/// Item 16: `-o FIFO` that nobody reads: one SIGTERM ends the wait for a reader (exit
/// 143, one line), the FIFO stays; with a reader the whole report comes through it.
#[test]
fn output_to_a_fifo_nobody_reads_stops_on_sigterm() {
    let (tree, value, file) = node();
    let fifo = tree.work("report.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let scan = || {
        kresidue(&tree)
            .args(["scan", "--root", tree.root_arg(), "--no-cri", "--secrets", path_arg(&file)])
            .args(["--format", "json", "-o", path_arg(&fifo)])
            .spawn()
            .unwrap()
    };
    let child = scan();
    std::thread::sleep(Duration::from_millis(1500));
    assert!(fs::metadata(&fifo).is_ok());
    kill(&child, "TERM");
    let out = wait_at_most(child, Duration::from_secs(10), "-o FIFO after SIGTERM");
    let err = assert_one_line(&out, &value);
    assert_eq!(out.status.code(), Some(143), "{err}");
    assert!(err.contains("SIGTERM"), "{err}");
    use std::os::unix::fs::FileTypeExt;
    assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());

    let child = scan();
    std::thread::sleep(Duration::from_millis(500));
    let read = fs::read(&fifo).unwrap();
    let out = wait_at_most(child, Duration::from_secs(60), "-o FIFO with a reader");
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&read).expect("the whole report");
    assert_eq!(findings_of(&report).len(), 1);
}

/// Item 16: `--every` shorter than 1s is refused (exit 2, one line); a SIGTERM between
/// two scans, or during a scan of `--every 1s`, ends the loop with 143 and one line.
#[test]
fn every_is_bounded_and_stops_on_sigterm() {
    let (tree, value, file) = node();
    for short in ["1ns", "999ms", "0s"] {
        let kr = tree.kr().timeout(Duration::from_secs(20));
        let out = kr.scan(&["--secrets", path_arg(&file), "--every", short]);
        out.assert_one_line_error();
        assert!(out.stderr_str().contains("--every"), "{}", out.stderr_str());
    }
    let report = tree.work("every.json");
    let every = |period: &str| {
        kresidue(&tree)
            .args(["scan", "--root", tree.root_arg(), "--no-cri", "--secrets", path_arg(&file)])
            .args(["--every", period, "--format", "json", "-o", path_arg(&report)])
            .args(["--chunk-size", "64"])
            .spawn()
            .unwrap()
    };
    // Between scans: after the first report, within the hour's wait.
    let child = every("1h");
    let t = Instant::now();
    while !report.exists() {
        assert!(t.elapsed() < Duration::from_secs(120), "no first report");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    kill(&child, "TERM");
    let out = wait_at_most(child, Duration::from_secs(5), "--every 1h after SIGTERM");
    let err = assert_one_line(&out, &value);
    assert_eq!(out.status.code(), Some(143), "{err}");
    assert!(err.contains("SIGTERM"), "{err}");

    // Slow enough to be caught mid-scan: 64-byte buffers over a 16 MiB file.
    tree.pod(UID).file("volumes/kubernetes.io~empty-dir/cache/slow.bin", &vec![b'a'; 16 << 20]);
    let child = every("1s");
    std::thread::sleep(Duration::from_millis(700));
    kill(&child, "TERM");
    let out = wait_at_most(child, Duration::from_secs(10), "--every 1s after SIGTERM");
    let err = assert_one_line(&out, &value);
    assert_eq!(out.status.code(), Some(143), "{err}");
}

/// A pod the fake runtime has no sandbox for, with `files` files in its secret volume;
/// the args of `clean` for it (secrets, lock, journal at `journal`).
fn gone_pod(files: usize, journal: &Path) -> (NodeTree, String, Vec<String>) {
    use crate::cri::GONE_UID;
    let tree = NodeTree::new();
    let (value, secrets) = db_password(&tree, 2803);
    let pod = tree.pod(GONE_UID);
    let vol = pod.secret_volume("db");
    vol.key("password", value.as_bytes());
    for i in 0..files {
        pod.file(&format!("volumes/kubernetes.io~secret/db/extra/f{i}"), b"x");
    }
    let file = tree.secrets_file("secrets.json", &secrets);
    // The API server's witness: the fake runtime's two pods run on node-1.
    crate::clean::backdate_pods(&tree);
    let pods = tree.work("pods.json");
    let live = [
        crate::clean::ApiPod::running(crate::cri::READY_UID, "node-1"),
        crate::clean::ApiPod::running(crate::cri::NOTREADY_UID, "node-1"),
    ];
    fs::write(&pods, crate::clean::pods_json(&live)).unwrap();
    let args = ["--secrets", path_arg(&file), "--lock", path_arg(&tree.work("lock"))]
        .into_iter()
        .chain(["--pods", path_arg(&pods)])
        .chain(["--journal", path_arg(journal), "--min-age", "0s", "--apply"])
        .map(str::to_owned)
        .collect();
    (tree, value, args)
}

/// Item 16: `clean --apply --journal FIFO` is refused at once (exit 2, one line): a
/// journal must be a file on disk, and opening a FIFO nobody reads would hang. Nothing is
/// removed.
#[test]
fn a_journal_that_is_a_fifo_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal.fifo");
    nix::unistd::mkfifo(&journal, nix::sys::stat::Mode::S_IRWXU).unwrap();
    the_journal_is_refused(&journal, "clean --apply with a FIFO journal");
}

/// `clean --apply` of [`gone_pod`] with its journal at `journal` exits 2 at once with
/// one line naming the journal, and the node's tree is unchanged (`what` says the case).
fn the_journal_is_refused(journal: &Path, what: &str) {
    use crate::cri::{fake, Server};
    let (tree, value, args) = gone_pod(0, journal);
    let server = Server::grpc(fake());
    let before = tree.digest();
    let child = kresidue(&tree)
        .args(["clean", "--root", tree.root_arg(), "--cri", &server.endpoint()])
        .args(&args)
        .spawn()
        .unwrap();
    let out = wait_at_most(child, Duration::from_secs(30), what);
    let err = assert_one_line(&out, &value);
    assert_eq!(out.status.code(), Some(2), "{what}: {err}");
    assert!(err.contains("journal"), "{what}: {err}");
    before.assert_same(&tree.digest(), what);
}

/// Item 4 (the promise of `docs/CONTRACT.md`): a SIGTERM while `clean --apply` removes a volume of many files finishes that action
/// (its journal has `begin` and `end`), refuses the rest and exits 143, not 1.
#[test]
fn sigterm_during_clean_apply_exits_143() {
    use crate::cri::{fake, Server};
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal.jsonl");
    let (tree, value, args) = gone_pod(20_000, &journal);
    let server = Server::grpc(fake());
    let gate = tree.work("gate");
    fs::create_dir(&gate).unwrap();
    let child = kresidue(&tree)
        .args(["clean", "--root", tree.root_arg(), "--cri", &server.endpoint()])
        .args(["--format", "json"])
        .args(&args)
        .args(["--apply-gate", path_arg(&gate)])
        .spawn()
        .unwrap();
    let t = Instant::now();
    while !gate.join("planned").exists() {
        assert!(t.elapsed() < Duration::from_secs(120), "the gated run never planned");
        std::thread::sleep(Duration::from_millis(20));
    }
    fs::write(gate.join("go"), b"").unwrap();
    // When it starts acting: the first `begin` is on disk.
    while !fs::read_to_string(&journal).unwrap_or_default().contains("\"begin\"") {
        assert!(t.elapsed() < Duration::from_secs(120), "it never began");
        std::thread::sleep(Duration::from_millis(2));
    }
    kill(&child, "TERM");
    let out = wait_at_most(child, Duration::from_secs(60), "clean --apply after SIGTERM");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!contains(&out.stdout, value.as_bytes()) && !err.contains(&value));
    let lines: Vec<serde_json::Value> = fs::read_to_string(&journal)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.len() >= 2, "{lines:#?}");
    assert_eq!((&lines[0]["phase"], &lines[1]["phase"]), (&"begin".into(), &"end".into()));
    assert_eq!(out.status.code(), Some(143), "{err}");
}
