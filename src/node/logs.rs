//! Pod logs as the kubelet and the CRI runtime keep them (`docs/NODE-LAYOUT.md`; kubelet
//! `pkg/kubelet/kuberuntime/logs`): `/var/log/pods/<namespace>_<pod>_<uid>/<container>/
//! <restart>.log`, rotated to `<restart>.log.<timestamp>` and compressed to `….gz`.
//!
//! Each line is `<RFC 3339 time> <stream> <tag> <content>`; the tag is `F` for a full line
//! and `P` for a partial one, whose content continues on the next line (the runtime
//! splits lines longer than 16 KiB). A value printed across such a split is only whole
//! once the partial contents are joined, so logs are searched as their **content**: the
//! messages, partial lines joined, each full line ending in a newline. An [`Extractor`]
//! streams a log's content from its bytes and maps every content offset back to the file
//! offset it came from; [`Content`] does so for a whole log in memory.

use std::path::{Component, Path};

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

/// The content of a whole CRI log, and where each run of it came from (see
/// [`Extractor`], which streams the same).
#[derive(Debug, Default)]
pub struct Content {
    /// The messages, partial lines joined.
    pub bytes: Vec<u8>,
    /// The map back to the file.
    map: Extractor,
}

impl Content {
    /// Extracts the content of a CRI log. A line that is not in the CRI format (another
    /// runtime's, or damage) is kept whole, so nothing in the file goes unsearched.
    pub fn of(log: &[u8]) -> Content {
        let mut map = Extractor::default();
        let mut bytes = vec![0; log.len() + HEAD_MAX];
        let mut n = map.feed(log, &mut bytes);
        n += map.finish(&mut bytes[n..]);
        bytes.truncate(n);
        Content { bytes, map }
    }

    /// The file offset of content offset `c`.
    pub fn file_offset(&self, c: u64) -> u64 {
        self.map.file_offset(c)
    }
}

/// The most of a line's start held back to tell whether it is a CRI line: its time,
/// stream and tag (some 40 bytes) fit; a line whose first three fields are longer is not
/// one and is kept whole.
pub const HEAD_MAX: usize = 128;

/// Extracts the content of a CRI log from its bytes fed in pieces of any size, keeping
/// the map from content offsets back to file offsets (of the bytes fed). Each call
/// writes at most the bytes fed plus [`HEAD_MAX`].
#[derive(Debug, Default)]
pub struct Extractor {
    /// The start of the current line while it is not known whether it is a CRI line.
    head: Vec<u8>,
    /// The file offset of `head[0]`.
    head_at: u64,
    state: State,
    /// The file offset of the next byte fed.
    fed: u64,
    /// Content bytes written so far.
    written: u64,
    /// `(content offset, file offset)` at the start of each run copied from the file,
    /// ascending (see [`Extractor::forget_before`]).
    runs: std::collections::VecDeque<(u64, u64)>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum State {
    /// At the start of a line (its first bytes are in `head`).
    #[default]
    Head,
    /// In the message of a CRI line; a partial one's newline is dropped.
    Message { partial: bool },
    /// In a line that is not a CRI line: kept whole.
    Raw,
}

impl Extractor {
    /// Feeds the next bytes of the log; writes their content to `out` (which must hold
    /// `raw.len() + HEAD_MAX` bytes) and returns how many bytes it wrote.
    pub fn feed(&mut self, raw: &[u8], out: &mut [u8]) -> usize {
        let mut w = 0;
        let mut at = 0;
        while at < raw.len() {
            let rest = &raw[at..];
            let file = self.fed + at as u64;
            match self.state {
                State::Head => {
                    if self.head.is_empty() {
                        self.head_at = file;
                        // A line that cannot be a CRI line (whose time starts with a
                        // digit) is content as it is, and so are the lines after it that
                        // cannot either: copied as one stretch, not line by line (a log of
                        // empty lines cost some 60 ns a line).
                        if !rest[0].is_ascii_digit() {
                            let end = raw_stretch(rest);
                            w += self.emit(&rest[..end], file, out, w);
                            at += end;
                            if rest[end - 1] != b'\n' {
                                self.state = State::Raw;
                            }
                            continue;
                        }
                        // Nearly every line: a CRI line with its head in its first 64
                        // bytes and its end in `rest`; its message (and the newline of a
                        // full line) copied at once.
                        if let Some((skip, partial, j)) = cri_message(rest) {
                            let n = j + usize::from(!partial);
                            w += self.emit(&rest[skip..skip + n], file + skip as u64, out, w);
                            at += skip + j + 1;
                            continue;
                        }
                        // Most lines arrive whole: their head is found in `rest` itself, a
                        // few SIMD searches instead of a byte loop and a copy.
                        if let Some((i, newline)) = head_end(&rest[..rest.len().min(HEAD_MAX)]) {
                            let head = &rest[..i + usize::from(!newline)];
                            // A CRI line whose end is in `rest` too: its message, and the
                            // newline of a full line, copied at once.
                            if let Some((skip, partial)) = message(head).filter(|_| !newline) {
                                let body = &rest[skip..];
                                if let Some(j) = memchr::memchr(b'\n', body) {
                                    let n = j + usize::from(!partial);
                                    w += self.emit(&body[..n], file + skip as u64, out, w);
                                    at += skip + j + 1;
                                    continue;
                                }
                            }
                            at += i + 1;
                            w += self.complete_head(head, file, newline, out, w);
                            continue;
                        }
                    }
                    let room = HEAD_MAX - self.head.len();
                    let look = &rest[..rest.len().min(room)];
                    let spaces = self.head.iter().filter(|&&b| b == b' ').count();
                    // The end of the head: a newline, the third space, or no more room.
                    let mut end = None;
                    let mut seen = spaces;
                    for (i, &b) in look.iter().enumerate() {
                        if b == b'\n' {
                            end = Some((i, true));
                            break;
                        }
                        if b == b' ' {
                            seen += 1;
                            if seen == 3 {
                                end = Some((i, false));
                                break;
                            }
                        }
                    }
                    match end {
                        Some((i, newline)) => {
                            self.head.extend_from_slice(&look[..i + usize::from(!newline)]);
                            at += i + 1;
                            w += self.end_head(newline, out, w);
                        }
                        None if look.len() == room => {
                            // No CRI prefix fits: the line is kept whole.
                            self.head.extend_from_slice(look);
                            at += look.len();
                            w += self.flush_head(out, w);
                            self.state = State::Raw;
                        }
                        None => {
                            self.head.extend_from_slice(look);
                            at += look.len();
                        }
                    }
                }
                State::Message { partial } => match memchr::memchr(b'\n', rest) {
                    Some(i) => {
                        w += self.emit(&rest[..i], file, out, w);
                        if !partial {
                            w += self.emit(b"\n", file + i as u64, out, w);
                        }
                        at += i + 1;
                        self.state = State::Head;
                    }
                    None => {
                        w += self.emit(rest, file, out, w);
                        at = raw.len();
                    }
                },
                State::Raw => {
                    let n = memchr::memchr(b'\n', rest).map_or(rest.len(), |i| i + 1);
                    w += self.emit(&rest[..n], file, out, w);
                    at += n;
                    if rest[n - 1] == b'\n' {
                        self.state = State::Head;
                    }
                }
            }
        }
        self.fed += raw.len() as u64;
        w
    }

    /// The log ended: writes what is still held back (a last line without a newline).
    pub fn finish(&mut self, out: &mut [u8]) -> usize {
        match self.state {
            State::Head if !self.head.is_empty() => {
                let line = std::mem::take(&mut self.head);
                let skip = message(&line).map_or(0, |(skip, _)| skip);
                self.emit(&line[skip..], self.head_at + skip as u64, out, 0)
            }
            _ => 0,
        }
    }

    /// The head is complete: at a newline (a whole line) or at its third space.
    fn end_head(&mut self, newline: bool, out: &mut [u8], w: usize) -> usize {
        let head = std::mem::take(&mut self.head);
        let n = self.complete_head(&head, self.head_at, newline, out, w);
        self.head = head;
        self.head.clear();
        n
    }

    /// Handles a complete `head` (from file offset `at`): a whole line when `newline`,
    /// else a line's start up to its third space.
    fn complete_head(
        &mut self,
        head: &[u8],
        at: u64,
        newline: bool,
        out: &mut [u8],
        w: usize,
    ) -> usize {
        match (message(head), newline) {
            (Some((skip, partial)), true) => {
                let n = self.emit(&head[skip..], at + skip as u64, out, w);
                match partial {
                    true => n,
                    false => n + self.emit(b"\n", at + head.len() as u64, out, w + n),
                }
            }
            (Some((_, partial)), false) => {
                self.state = State::Message { partial };
                0
            }
            (None, true) => {
                let n = self.emit(head, at, out, w);
                n + self.emit(b"\n", at + head.len() as u64, out, w + n)
            }
            (None, false) => {
                self.state = State::Raw;
                self.emit(head, at, out, w)
            }
        }
    }

    /// Writes the held-back head as content.
    fn flush_head(&mut self, out: &mut [u8], w: usize) -> usize {
        let head = std::mem::take(&mut self.head);
        let n = self.emit(&head, self.head_at, out, w);
        self.head = head;
        self.head.clear();
        n
    }

    /// Writes `bytes` (from file offset `file`) at `out[w..]`, extending the map.
    fn emit(&mut self, bytes: &[u8], file: u64, out: &mut [u8], w: usize) -> usize {
        if bytes.is_empty() {
            return 0;
        }
        let c = self.written;
        match self.runs.back() {
            // Contiguous with the last run: no new entry.
            Some(&(rc, rf)) if rf + (c - rc) == file => {}
            _ => self.runs.push_back((c, file)),
        }
        out[w..w + bytes.len()].copy_from_slice(bytes);
        self.written += bytes.len() as u64;
        bytes.len()
    }

    /// The file offset of content offset `c` (not before [`Extractor::forget_before`]).
    pub fn file_offset(&self, c: u64) -> u64 {
        let i = self.runs.partition_point(|&(rc, _)| rc <= c);
        match i.checked_sub(1).map(|i| self.runs[i]) {
            Some((rc, rf)) => rf + (c - rc),
            None => c,
        }
    }

    /// Drops the map of content before offset `c`: a stream keeps only what its buffers
    /// may still refer to.
    pub fn forget_before(&mut self, c: u64) {
        while self.runs.len() > 1 && self.runs[1].0 <= c {
            self.runs.pop_front();
        }
    }
}

/// The length of the lines at the start of `rest` that cannot be CRI lines (the first
/// byte of each is not a digit), up to the first that may be one, or all of `rest`.
fn raw_stretch(rest: &[u8]) -> usize {
    let mut end = 0;
    while let Some(i) = memchr::memchr(b'\n', &rest[end..]) {
        end += i + 1;
        if rest.get(end).is_none_or(u8::is_ascii_digit) {
            return end;
        }
    }
    rest.len()
}

/// Bits set where `word` holds a space, and where it holds a newline: a pod log line's
/// head (time, stream, tag) is read from these, one pass over its first 64 bytes. On
/// x86_64, SSE2 compares and byte masks, 16 bytes at a time.
#[inline(always)]
#[allow(unsafe_code)]
fn space_newline_masks(word: &[u8; 64]) -> (u64, u64) {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        use std::arch::x86_64::*;
        let (mut spaces, mut newlines) = (0u64, 0u64);
        for (k, part) in word.chunks_exact(16).enumerate() {
            // SAFETY: SSE2 is enabled (cfg above); the load reads the 16 bytes of `part`, a
            // valid slice of exactly that length, with no alignment required.
            let (s, n) = unsafe {
                let v = _mm_loadu_si128(part.as_ptr().cast::<__m128i>());
                (
                    _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(b' ' as i8))) as u32,
                    _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(b'\n' as i8))) as u32,
                )
            };
            spaces |= u64::from(s) << (16 * k);
            newlines |= u64::from(n) << (16 * k);
        }
        (spaces, newlines)
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    {
        let (mut spaces, mut newlines) = (0u64, 0u64);
        for (i, &b) in word.iter().enumerate() {
            spaces |= u64::from(b == b' ') << i;
            newlines |= u64::from(b == b'\n') << i;
        }
        (spaces, newlines)
    }
}

/// For a CRI line starting `rest` whose head (time, stream, tag) ends in its first 64
/// bytes and whose newline is in `rest`: where its message starts, whether it is partial,
/// and where its newline is in the message. Read from the masks of spaces and newlines of
/// those 64 bytes, where [`head_end`] and [`message`] take five searches; `None` for any
/// other line (which they then read), so the two ways agree.
fn cri_message(rest: &[u8]) -> Option<(usize, bool, usize)> {
    let (spaces, newlines) = space_newline_masks(rest.get(..64)?.try_into().ok()?);
    let t = spaces.trailing_zeros();
    let after = spaces & spaces.wrapping_sub(1);
    let s2 = after.trailing_zeros();
    let after = after & after.wrapping_sub(1);
    let s3 = after.trailing_zeros();
    // Three spaces, no newline before the third.
    if s3 >= 64 || newlines & ((1u64 << s3) - 1) != 0 {
        return None;
    }
    let (t, s2, s3) = (t as usize, s2 as usize, s3 as usize);
    if t < 20 || !rest[..4].iter().all(u8::is_ascii_digit) || rest[4] != b'-' {
        return None;
    }
    let stream = &rest[t + 1..s2];
    if stream != b"stdout" && stream != b"stderr" {
        return None;
    }
    let partial = match rest[s2 + 1..s3].split(|&b| b == b':').next()? {
        b"P" => true,
        b"F" => false,
        _ => return None,
    };
    let skip = s3 + 1;
    // Any newline in the mask is past the head.
    let newline = match newlines {
        0 => 64 + memchr::memchr(b'\n', &rest[64..])?,
        m => m.trailing_zeros() as usize,
    };
    Some((skip, partial, newline - skip))
}

/// Where the head of a line starting `look` ends: at its first newline (`true`) or its
/// third space, whichever comes first; `None` when `look` holds neither.
fn head_end(look: &[u8]) -> Option<(usize, bool)> {
    let mut spaces = 0;
    for i in memchr::memchr2_iter(b' ', b'\n', look) {
        if look[i] == b'\n' {
            return Some((i, true));
        }
        spaces += 1;
        if spaces == 3 {
            return Some((i, false));
        }
    }
    None
}

/// For a CRI log line `<time> <stream> <tag> <content>`: where its content starts, and
/// whether the tag marks it partial. `None` when the line is not one. The fields are found
/// by position (the stream is one of two 6-byte words) rather than by splitting: this runs
/// once per line of every log.
fn message(line: &[u8]) -> Option<(usize, bool)> {
    let t = memchr::memchr(b' ', line)?;
    let time = &line[..t];
    if time.len() < 20 || !time[..4].iter().all(u8::is_ascii_digit) || time[4] != b'-' {
        return None;
    }
    let after = &line[t + 1..];
    if after.get(6) != Some(&b' ') || (&after[..6] != b"stdout" && &after[..6] != b"stderr") {
        return None;
    }
    let rest = &after[7..];
    let tag = &rest[..memchr::memchr(b' ', rest).unwrap_or(rest.len())];
    // Tags are `:`-separated; the first is `P` or `F`.
    let partial = match tag.split(|&b| b == b':').next()? {
        b"P" => true,
        b"F" => false,
        _ => return None,
    };
    let skip = t + 1 + 7 + tag.len() + 1;
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

    /// `message` as first written, by splitting: the reference for the one by position.
    fn message_by_split(line: &[u8]) -> Option<(usize, bool)> {
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
        let partial = match tag.split(|&b| b == b':').next()? {
            b"P" => true,
            b"F" => false,
            _ => return None,
        };
        let skip = time.len() + stream.len() + tag.len() + 3;
        Some((skip.min(line.len()), partial))
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
        /// Lines made of CRI-like pieces, damaged anywhere: `message` reads them as the
        /// splitting reference does.
        #[test]
        fn message_by_position_equals_by_split(
            time in proptest::sample::select(vec!["2026-11-30T10:00:00.000000001Z", "2026-11-30", "", "x026-11-30T10:00:00Z"]),
            stream in proptest::sample::select(vec!["stdout", "stderr", "stdou", "stdoutx", ""]),
            tag in proptest::sample::select(vec!["P", "F", "F:x", "P:", "PF", ":F", ""]),
            seps in proptest::collection::vec(proptest::sample::select(vec![" ", "  ", ""]), 3),
            content in proptest::sample::select(vec!["", "a b", " x", "F"]),
            cut in 0usize..80,
        ) {
            let line = [time, seps[0], stream, seps[1], tag, seps[2], content].concat().into_bytes();
            let line = &line[..cut.min(line.len())];
            proptest::prop_assert_eq!(message(line), message_by_split(line));
        }
    }

    /// A log of `(kind, message)` lines, each kind a head: 0 and 1 CRI (partial, full),
    /// 2 CRI with a tag holding more fields, 3 a tag that is none, 4 a time too short,
    /// 5 not a CRI line though all but its first byte would make one; any other none.
    fn log_of(lines: &[(u8, Vec<u8>)]) -> Vec<u8> {
        let mut log = Vec::new();
        for (kind, msg) in lines {
            let head: &[u8] = match kind {
                0 => b"2026-11-30T10:00:00.000000001Z stdout P ",
                1 => b"2026-11-30T10:00:00.000000001Z stderr F ",
                2 => b"2026-11-30T10:00:00Z stdout F:x:y ",
                3 => b"2026-11-30T10:00:00Z stdout X ",
                4 => b"2026 stdout F ",
                5 => b"x2026-11-30T10:00:00.000000001Z stdout F ",
                _ => b"",
            };
            log.extend(head);
            log.extend(msg);
            log.push(b'\n');
        }
        log
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1000))]
        /// CRI lines mixed with empty lines, other text and damaged heads: the content is
        /// what reading the log line by line gives; fed in pieces of any sizes, with the
        /// map pruned as a stream prunes it, the content and its map are the whole log's.
        #[test]
        fn streamed_in_pieces_equals_whole(
            lines in proptest::collection::vec(
                (0u8..8, proptest::collection::vec(proptest::sample::select(b" :0aZ\t\x7e".to_vec()), 0..300)),
                0..12,
            ),
            end_newline in proptest::bool::ANY,
            cuts in proptest::collection::vec(1usize..400, 1..20),
        ) {
            let mut log = log_of(&lines);
            if !end_newline {
                log.pop();
            }
            let whole = Content::of(&log);
            proptest::prop_assert_eq!(&whole.bytes, &content_by_lines(&log));
            let mut ex = Extractor::default();
            let (mut at, mut content, mut cut) = (0, Vec::new(), cuts.iter().cycle());
            while at < log.len() {
                let n = (*cut.next().unwrap()).min(log.len() - at);
                let mut out = vec![0; n + HEAD_MAX];
                let w = ex.feed(&log[at..at + n], &mut out);
                for i in 0..w as u64 {
                    let c = content.len() as u64 + i;
                    proptest::prop_assert_eq!(ex.file_offset(c), whole.file_offset(c));
                }
                content.extend_from_slice(&out[..w]);
                ex.forget_before(content.len() as u64);
                at += n;
            }
            let mut out = vec![0; HEAD_MAX];
            let w = ex.finish(&mut out);
            content.extend_from_slice(&out[..w]);
            proptest::prop_assert_eq!(content, whole.bytes);
        }
    }

    /// The content of a log line by line, as the format says: a CRI line's message (its
    /// newline dropped when partial), any other line whole.
    fn content_by_lines(log: &[u8]) -> Vec<u8> {
        let mut content = Vec::new();
        let mut lines = log.split(|&b| b == b'\n').peekable();
        while let Some(line) = lines.next() {
            let last = lines.peek().is_none();
            match message_by_split(line) {
                Some((skip, partial)) => {
                    content.extend_from_slice(&line[skip..]);
                    if !partial && !last {
                        content.push(b'\n');
                    }
                }
                None => {
                    content.extend_from_slice(line);
                    if !last {
                        content.push(b'\n');
                    }
                }
            }
        }
        content
    }

    /// The slow way to [`cri_message`]'s answer: the head's end, the message, the newline.
    fn cri_message_by_search(rest: &[u8]) -> Option<(usize, bool, usize)> {
        let (i, newline) = head_end(&rest[..rest.len().min(HEAD_MAX)])?;
        let (skip, partial) = message(&rest[..i + 1]).filter(|_| !newline)?;
        Some((skip, partial, memchr::memchr(b'\n', &rest[skip..])?))
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]
        /// Line starts made of CRI-like pieces, damaged anywhere, followed by text with or
        /// without a newline: where the mask reading answers, the searches answer the same;
        /// it answers for every undamaged line.
        #[test]
        fn cri_message_equals_search(
            time in proptest::sample::select(vec!["2026-11-30T10:00:00.000000001Z", "2026-11-30T10:00:00Z", "2026-11-30", "", "x026-11-30T10:00:00Z", "2026-11-30T10:00:00.000000001Z\n"]),
            stream in proptest::sample::select(vec!["stdout", "stderr", "stdou", "stdoutx", "std\nut", ""]),
            tag in proptest::sample::select(vec!["P", "F", "F:x", "P:", "PF", ":F", "", "F\n"]),
            seps in proptest::collection::vec(proptest::sample::select(vec![" ", "  ", "", "\n"]), 3),
            pad in 0usize..60,
            content in proptest::collection::vec(proptest::sample::select(vec![b'a', b' ', b'\n', b':']), 0..100),
        ) {
            let line = [time, seps[0], stream, seps[1], tag, seps[2], &"a".repeat(pad)].concat();
            let rest = [line.as_bytes(), &content].concat();
            let fast = cri_message(&rest);
            proptest::prop_assert!(fast.is_none() || fast == cri_message_by_search(&rest));
            let cri = ["2026-11-30T10:00:00.000000001Z", "2026-11-30T10:00:00Z"].contains(&time)
                && ["stdout", "stderr"].contains(&stream)
                && ["P", "F", "F:x", "P:"].contains(&tag)
                && seps.iter().all(|s| *s == " ");
            let head = time.len() + stream.len() + tag.len() + 3;
            if cri && rest.len() >= 64 && head <= 64 && rest[head..].contains(&b'\n') {
                proptest::prop_assert!(fast.is_some(), "{:?}", String::from_utf8_lossy(&rest));
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
