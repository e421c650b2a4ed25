//! Matching names: the names on the paths of a batch of files (each file's own, and its
//! directories'), searched joined in one pass. What matches is withheld from every path
//! shown from then on, and is a finding at the path of its name.

use super::search::{aggregate, lift, lift_rule, Target};
use super::{Searchers, Seen};
use crate::finding::{Category, Finding, Severity, Within};
use crate::matcher::Hit;
use crate::rules::RuleHit;
use crate::severity::place;
use crate::text;
use crate::walk::{FileJob, WalkItem};
use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::sync::Mutex;

/// A worker's state for matching names: the directory whose names it checked last, the
/// names of a batch of files joined (each followed by a `/`, which no name holds; a
/// printable separator keeps the joined names one run of text for the matcher), where
/// each is, and hit scratch.
#[derive(Default)]
pub(super) struct Names {
    dir: Vec<u8>,
    text: Vec<u8>,
    spans: Vec<NameSpan>,
    hits: Vec<Hit>,
    rule_hits: Vec<RuleHit>,
}

/// One name in [`Names::text`]: of the batch's `job`-th item, at `start..end`; a
/// directory's name has the length of the directory's path from the root (`dir_end`).
#[derive(Clone, Copy)]
struct NameSpan {
    job: usize,
    start: usize,
    end: usize,
    dir_end: Option<usize>,
}

impl Names {
    /// Joins the names on the paths of a batch: each file's own, and the directories' not
    /// checked since the directory checked last.
    fn join(&mut self, batch: &[WalkItem]) {
        self.text.clear();
        self.spans.clear();
        for (i, item) in batch.iter().enumerate() {
            let WalkItem::File(job) = item else { continue };
            let rel = job.rel.as_os_str().as_bytes();
            let (dir, name) = match memchr::memrchr(b'/', rel) {
                Some(at) => (&rel[..at], &rel[at + 1..]),
                None => (&rel[..0], rel),
            };
            let add = |names: &mut Names, text: &[u8], dir_end| {
                let start = names.text.len();
                names.text.extend_from_slice(text);
                names.spans.push(NameSpan { job: i, start, end: names.text.len(), dir_end });
                names.text.push(b'/');
            };
            if dir != self.dir.as_slice() {
                // The components shared with the directory checked last were checked then.
                let mut at = 0;
                for (a, b) in dir.split(|&c| c == b'/').zip(self.dir.split(|&c| c == b'/')) {
                    if a != b {
                        break;
                    }
                    at += a.len() + 1;
                }
                while at < dir.len() {
                    let end = memchr::memchr(b'/', &dir[at..]).map_or(dir.len(), |n| at + n);
                    add(self, &dir[at..end], Some(end));
                    at = end + 1;
                }
                self.dir.clear();
                self.dir.extend_from_slice(dir);
            }
            add(self, name, None);
        }
    }
}

/// The note of a finding in a name.
const IN_NAME: &str = "in the name of this file or directory: the path shows that name \
    withheld";

/// Finds secret material in a short text (names, a claim): fingerprinted forms into
/// `hits`, rule matches into `rule_hits`; true when there is any.
fn screen(
    searchers: &Searchers<'_>,
    text: &[u8],
    hits: &mut Vec<Hit>,
    rule_hits: &mut Vec<RuleHit>,
) -> bool {
    hits.clear();
    rule_hits.clear();
    if !searchers.matcher.is_empty() {
        searchers.matcher.find(text, 0, 0, hits);
    }
    if !searchers.rules.is_empty() {
        let _complete = searchers.rules.find(text, 0, 0, true, rule_hits);
    }
    !hits.is_empty() || !rule_hits.is_empty()
}

/// Matches names that come from node data or the runtime rather than from a path (a
/// pod's or a container's name or id, an image's name, the runtime's version) as the names
/// on paths are matched, each once: what matches is withheld from every name and path shown
/// from now on ([`text::withhold`]). Such a name is no finding of its own: the record it
/// was read from is searched as any file is (a runtime's answer is no file).
pub fn withhold_names<'a>(searchers: &Searchers<'_>, names: impl IntoIterator<Item = &'a str>) {
    let (mut hits, mut rule_hits) = (Vec::new(), Vec::new());
    let mut done = std::collections::HashSet::new();
    for name in names {
        if !done.insert(name) || !screen(searchers, name.as_bytes(), &mut hits, &mut rule_hits) {
            continue;
        }
        let spans = hits
            .iter()
            .map(|h| (h.offset, h.len))
            .chain(rule_hits.iter().map(|h| (h.offset, h.len)));
        for (offset, len) in spans {
            text::withhold::withhold(
                &name.as_bytes()[offset as usize..offset as usize + len as usize],
            );
        }
    }
}

impl Names {
    /// Matches the names on the paths of a batch of files: each file's own, and the
    /// directories' above it that this worker has not checked yet (the walk lists a
    /// directory's files together, so each directory is checked about once). The names are
    /// searched joined, in one pass of the matcher and of the rules (a pass per name would
    /// cost more than reading a small file); a match running into the next name is none.
    /// What matches is withheld from every path shown from now on ([`text::withhold`]),
    /// before any file of the batch is read, and is a finding at the path of its name
    /// (`"in": "name"`; a directory's once a scan). Names come from the walk: nothing is
    /// read again.
    pub(super) fn check(
        &mut self,
        batch: &[WalkItem],
        searchers: &Searchers<'_>,
        seen: &Mutex<Seen>,
    ) -> Vec<Finding> {
        let names = self;
        names.join(batch);
        let mut found = Vec::new();
        if screen(searchers, &names.text, &mut names.hits, &mut names.rule_hits) {
            let mut by_span: BTreeMap<usize, (Vec<Hit>, Vec<RuleHit>)> = BTreeMap::new();
            let span_of = |offset: u64, len: u64| {
                let i = names.spans.partition_point(|s| s.start as u64 <= offset).checked_sub(1)?;
                let s = names.spans[i];
                (offset + len <= s.end as u64).then_some((i, s.start as u64))
            };
            for h in &names.hits {
                if let Some((i, start)) = span_of(h.offset, h.len as u64) {
                    by_span.entry(i).or_default().0.push(Hit { offset: h.offset - start, ..*h });
                }
            }
            for h in &names.rule_hits {
                if let Some((i, start)) = span_of(h.offset, h.len as u64) {
                    let hit = RuleHit { offset: h.offset - start, ..h.clone() };
                    by_span.entry(i).or_default().1.push(hit);
                }
            }
            for (i, (hits, rule_hits)) in by_span {
                let span = names.spans[i];
                let WalkItem::File(job) = &batch[span.job] else { continue };
                let name = &names.text[span.start..span.end];
                let rel = job.rel.as_os_str().as_bytes();
                let path = match span.dir_end {
                    None => job.shown_path(),
                    Some(end) => {
                        if !seen.lock().expect("lock").named_dirs.insert(rel[..end].to_vec()) {
                            continue;
                        }
                        dir_path(job, &rel[..end], name)
                    }
                };
                let on_tmpfs = || job.open().is_ok_and(|f| f.0.is_tmpfs());
                let place = place(job.owner.category(on_tmpfs), job.owner.stale, None);
                let found_here = (&hits[..], &rule_hits[..]);
                let named = name_findings(job, place, searchers, found_here, name, &path);
                found.extend(aggregate(named));
            }
        }
        found
    }
}

/// The node path of the directory at `rel` (from the root) above `job`'s file, whose name
/// is `name`: cut from the file's node path (which shows the names a person sees); else
/// the path from the root.
fn dir_path(job: &FileJob, rel: &[u8], name: &[u8]) -> Vec<u8> {
    let shown = job.shown_path();
    let mut end = 0;
    for component in shown.split(|&c| c == b'/') {
        end += component.len();
        if component == name {
            return shown[..end].to_vec();
        }
        end += 1;
    }
    [b"/", rel].concat()
}

/// The findings in the names on `path` (a member's path in an image layer, components
/// separated by `/`), shown under `prefix` (the layer's digest): each name holding
/// material is a finding at its own path, once (`dirs` keeps those reported), what matched withheld before any path is shown. A match across a `/` is
/// none (no name on a node holds one).
pub(super) fn in_path(
    target: &dyn Target,
    place: (Category, Severity),
    searchers: &Searchers<'_>,
    (prefix, path): (&[u8], &[u8]),
    dirs: &mut std::collections::HashSet<Vec<u8>>,
) -> Vec<Finding> {
    let (mut hits, mut rule_hits) = (Vec::new(), Vec::new());
    if !screen(searchers, path, &mut hits, &mut rule_hits) {
        return Vec::new();
    }
    let mut by_name: BTreeMap<(usize, usize), (Vec<Hit>, Vec<RuleHit>)> = BTreeMap::new();
    let name_at = |offset: u64, len: u64| {
        let (from, to) = (offset as usize, (offset + len) as usize);
        let start = memchr::memrchr(b'/', &path[..from]).map_or(0, |n| n + 1);
        let end = memchr::memchr(b'/', &path[from..]).map_or(path.len(), |n| from + n);
        (to <= end).then_some((start, end))
    };
    for h in &hits {
        if let Some((start, end)) = name_at(h.offset, u64::from(h.len)) {
            let hit = Hit { offset: h.offset - start as u64, ..*h };
            by_name.entry((start, end)).or_default().0.push(hit);
        }
    }
    for h in &rule_hits {
        if let Some((start, end)) = name_at(h.offset, u64::from(h.len)) {
            let hit = RuleHit { offset: h.offset - start as u64, ..h.clone() };
            by_name.entry((start, end)).or_default().1.push(hit);
        }
    }
    let mut found = Vec::new();
    for ((start, end), (hits, rule_hits)) in by_name {
        if !dirs.insert(path[..end].to_vec()) {
            continue;
        }
        let shown = [prefix, b"/", &path[..end]].concat();
        let named =
            name_findings(target, place, searchers, (&hits, &rule_hits), &path[start..end], &shown);
        found.extend(aggregate(named));
    }
    found
}

/// The findings of `hits` in `name` (offsets in it), the last name of `path` (node path
/// bytes, not yet withheld): what matched is withheld first, then the findings are made
/// at `path` as it is shown now.
fn name_findings(
    job: &dyn Target,
    place: (Category, Severity),
    searchers: &Searchers<'_>,
    (hits, rule_hits): (&[Hit], &[RuleHit]),
    name: &[u8],
    path: &[u8],
) -> Vec<Finding> {
    let at = |offset: u64, len: u64| &name[offset as usize..(offset + len) as usize];
    for h in hits {
        text::withhold::withhold_in(name, at(h.offset, h.len as u64));
    }
    for h in rule_hits {
        text::withhold::withhold_in(name, at(h.offset, h.len as u64));
    }
    let path = std::ffi::OsStr::from_bytes(path);
    let (id_path, path) = (text::id_path(path), text::display_path(path));
    let in_name = |mut f: Finding, secret: &[u8]| {
        f.path.clone_from(&path);
        f.within = Within::Name;
        f.note = Some(IN_NAME);
        f.id = Finding::refine_id(
            &Finding::make_id(job.owner().site, &id_path, &f.matched, secret),
            "name",
        );
        f
    };
    let mut found = Vec::new();
    for h in hits {
        let f = lift(job, searchers.matcher, h, place, at(h.offset, h.len as u64));
        found.push(in_name(f, &[]));
    }
    for h in rule_hits {
        let secret = at(h.offset + u64::from(h.secret.start), h.secret.len() as u64);
        let f = lift_rule(job, searchers, h.clone(), place, secret);
        found.push(in_name(f, secret));
    }
    found
}
