//! Pod logs as the kubelet and the CRI runtime keep them (NODE-LAYOUT.md; kubelet
//! `pkg/kubelet/kuberuntime/logs`): `/var/log/pods/<namespace>_<pod>_<uid>/<container>/
//! <restart>.log`, rotated to `<restart>.log.<timestamp>` and compressed to `….gz`.
//!
//! Each line is `<RFC 3339 time> <stream> <tag> <content>`; the tag is `F` for a full line
//! and `P` for a partial one, whose content continues on the next line (the runtime
//! splits lines longer than 16 KiB). A value printed across such a split is only whole
//! once the partial contents are joined, so logs are searched as their **content**: the
//! messages, partial lines joined, each full line ending in a newline. A [`Content`] maps
//! every content offset back to the file offset it came from.

use std::path::{Component, Path};

/// The default pod log dir (kubelet's `podLogsRootDirectory`).
pub const DEFAULT_DIR: &str = "/var/log/pods";

/// The pod and container a log file belongs to, from its path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogOwner {
    /// Pod namespace.
    pub namespace: String,
    /// Pod name.
    pub pod: String,
    /// Pod UID.
    pub uid: String,
    /// Container name.
    pub container: String,
}

impl LogOwner {
    /// The owner of the log file at `rel`, relative to the pod log dir
    /// (`<namespace>_<pod>_<uid>/<container>/<file>`). Namespaces, pod names and UIDs
    /// cannot hold `_`, so the split is exact.
    pub fn of(rel: &Path) -> Option<LogOwner> {
        let mut parts = rel.components().filter_map(|c| match c {
            Component::Normal(s) => s.to_str(),
            _ => None,
        });
        let (pod_dir, container, _file) = (parts.next()?, parts.next()?, parts.next()?);
        let mut ids = pod_dir.split('_');
        let (namespace, pod, uid) = (ids.next()?, ids.next()?, ids.next()?);
        if ids.next().is_some() || [namespace, pod, uid, container].iter().any(|s| s.is_empty()) {
            return None;
        }
        Some(LogOwner {
            namespace: namespace.to_owned(),
            pod: pod.to_owned(),
            uid: uid.to_owned(),
            container: container.to_owned(),
        })
    }
}

/// The content of a CRI log, and where each run of it came from.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Content {
    /// The messages, partial lines joined.
    pub bytes: Vec<u8>,
    /// `(content offset, file offset)` at the start of each run copied from the file,
    /// ascending.
    runs: Vec<(u64, u64)>,
}

impl Content {
    /// Extracts the content of a CRI log. A line that is not in the CRI format (another
    /// runtime's, or damage) is kept whole, so nothing in the file goes unsearched.
    pub fn of(log: &[u8]) -> Content {
        let mut out = Content::default();
        let mut at = 0usize;
        while at < log.len() {
            let end = memchr::memchr(b'\n', &log[at..]).map_or(log.len(), |i| at + i);
            let line = &log[at..end];
            match message(line) {
                Some((skip, partial)) => {
                    out.copy(log, at + skip, end);
                    if !partial {
                        out.copy(log, end, (end + 1).min(log.len()));
                    }
                }
                None => out.copy(log, at, (end + 1).min(log.len())),
            }
            at = end + 1;
        }
        out
    }

    fn copy(&mut self, log: &[u8], from: usize, to: usize) {
        if from >= to {
            return;
        }
        let c = self.bytes.len() as u64;
        match self.runs.last() {
            // Contiguous with the last run: no new entry.
            Some(&(rc, rf)) if rf + (c - rc) == from as u64 => {}
            _ => self.runs.push((c, from as u64)),
        }
        self.bytes.extend_from_slice(&log[from..to]);
    }

    /// The file offset of content offset `c`.
    pub fn file_offset(&self, c: u64) -> u64 {
        let i = self.runs.partition_point(|&(rc, _)| rc <= c);
        match i.checked_sub(1).map(|i| self.runs[i]) {
            Some((rc, rf)) => rf + (c - rc),
            None => c,
        }
    }
}

/// For a CRI log line `<time> <stream> <tag> <content>`: where its content starts, and
/// whether the tag marks it partial. `None` when the line is not one.
fn message(line: &[u8]) -> Option<(usize, bool)> {
    let mut fields = line.splitn(4, |&b| b == b' ');
    let time = fields.next()?;
    let stream = fields.next()?;
    let tag = fields.next()?;
    if time.len() < 20 || !time[..4].iter().all(u8::is_ascii_digit) || time[4] != b'-' {
        return None;
    }
    if stream != b"stdout" && stream != b"stderr" {
        return None;
    }
    // Tags are `:`-separated; the first is `P` or `F`.
    let partial = match tag.split(|&b| b == b':').next()? {
        b"P" => true,
        b"F" => false,
        _ => return None,
    };
    let skip = time.len() + stream.len() + tag.len() + 3;
    Some((skip.min(line.len()), partial))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_from_path() {
        let o = LogOwner::of(Path::new("shop_web-0_1234-ab/app/0.log")).unwrap();
        assert_eq!(
            (o.namespace.as_str(), o.pod.as_str(), o.uid.as_str()),
            ("shop", "web-0", "1234-ab")
        );
        assert_eq!(o.container, "app");
        assert_eq!(LogOwner::of(Path::new("bad/app/0.log")), None);
        assert_eq!(LogOwner::of(Path::new("a_b_c_d/app/0.log")), None);
        assert_eq!(LogOwner::of(Path::new("a_b_c/0.log")), None);
    }

    #[test]
    fn partial_lines_are_joined_and_offsets_map_back() {
        let log = b"2026-11-30T10:00:00.000000001Z stdout P secret=abc\n\
                    2026-11-30T10:00:00.000000002Z stdout F def tail\n\
                    not a cri line\n\
                    2026-11-30T10:00:01.000000000Z stderr F:x last";
        let c = Content::of(log);
        assert_eq!(c.bytes, b"secret=abcdef tail\nnot a cri line\nlast".to_vec());
        let d = c.bytes.windows(3).position(|w| w == b"def").unwrap() as u64;
        assert_eq!(&log[c.file_offset(d) as usize..][..3], b"def");
        let n = c.bytes.windows(3).position(|w| w == b"not").unwrap() as u64;
        assert_eq!(&log[c.file_offset(n) as usize..][..3], b"not");
        assert_eq!(&log[c.file_offset(0) as usize..][..6], b"secret");
        let l = c.bytes.len() as u64 - 4;
        assert_eq!(&log[c.file_offset(l) as usize..], b"last");
    }

    proptest::proptest! {
        /// Any input: every content byte maps back to the same byte of the file, in order;
        /// a log made of CRI lines yields exactly their messages, partial ones joined.
        #[test]
        fn content_maps_back_to_the_file(
            lines in proptest::collection::vec(
                (proptest::bool::ANY, proptest::collection::vec(32u8..127, 0..40), 0u8..4),
                0..12,
            ),
            junk in proptest::collection::vec(proptest::num::u8::ANY, 0..64),
        ) {
            let mut log = Vec::new();
            let mut want = Vec::new();
            for (partial, msg, stream) in &lines {
                let stream = if stream % 2 == 0 { "stdout" } else { "stderr" };
                let tag = if *partial { "P" } else { "F" };
                log.extend(format!("2026-11-30T10:00:00.000000001Z {stream} {tag} ").bytes());
                log.extend(msg);
                log.push(b'\n');
                want.extend(msg);
                if !partial {
                    want.push(b'\n');
                }
            }
            proptest::prop_assert_eq!(&Content::of(&log).bytes, &want);
            log.extend(&junk);
            let c = Content::of(&log);
            let mut last = None;
            for (i, &b) in c.bytes.iter().enumerate() {
                let f = c.file_offset(i as u64);
                proptest::prop_assert_eq!(log[f as usize], b);
                proptest::prop_assert!(last.is_none_or(|l| f > l));
                last = Some(f);
            }
        }
    }

    #[test]
    fn odd_input_does_not_panic() {
        for log in [
            &b""[..],
            b"\n\n",
            b"2026-11-30T10:00:00Z stdout P",
            b"x y z",
            b"2026-11-30T10:00:00.0Z stdout",
        ] {
            let c = Content::of(log);
            for i in 0..c.bytes.len() as u64 {
                assert!(c.file_offset(i) < log.len() as u64);
            }
        }
    }
}
