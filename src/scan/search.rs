//! Searching a buffer: the matcher's and the rules' hits in it, lifted to findings of the
//! file's owner and place, then one finding per (file, material).

use super::Searchers;
use crate::finding::{
    rank, Category, ContainerRef, Encoding, Finding, MatchInfo, MatchKind, Material, PodRef,
    Preview, Severity, Within,
};
use crate::matcher::{Hit, Matcher};
use crate::node::other_runtimes::ContainerRecord;
use crate::rules::{RuleHit, Searched};
use crate::sites::Owner;
use crate::sys;
use crate::text;
use crate::walk::FileJob;
use std::time::Instant;

/// The file being searched: what is searched for, and its place before liveness.
pub(super) struct Cx<'a> {
    pub(super) of: &'a dyn Target,
    pub(super) searchers: &'a Searchers<'a>,
    pub(super) place: (Category, Severity),
}

/// What the findings of a searched file are of: its owner and the path shown.
pub(super) trait Target {
    /// Who the file belongs to.
    fn owner(&self) -> &Owner;
    /// The path to report.
    fn node_path(&self) -> String;
    /// The path its findings' ids are made of ([`crate::text::id_path`]).
    fn id_path(&self) -> String;
}

impl Target for FileJob {
    fn owner(&self) -> &Owner {
        &self.owner
    }

    fn node_path(&self) -> String {
        FileJob::node_path(self)
    }

    fn id_path(&self) -> String {
        FileJob::id_path(self)
    }
}

/// Where a buffer sits in its file: `buf[..len]` holds the file from `pos - carry`; the
/// first `carry` bytes were searched with the previous buffer (all of them, in a last
/// search of the carry alone); `last` when nothing follows.
#[derive(Clone, Copy)]
pub(super) struct Span {
    pub(super) carry: usize,
    pub(super) len: usize,
    pub(super) pos: u64,
    pub(super) last: bool,
    /// Every match is kept at its own offset, for the site to attribute (a file read
    /// whole); otherwise the findings are aggregated as they come ([`hold`]).
    pub(super) each: bool,
}

/// One finding per (file, material): occurrences of the same id become a count, at the
/// first offset. The same occurrence found twice (one value in a fingerprint file and in
/// `--secrets`) counts once. Findings aggregated already keep their counts, so a file's
/// findings can be aggregated as they come (see [`AGGREGATE_AT`]).
pub(super) fn aggregate(mut raw: Vec<Finding>) -> Vec<Finding> {
    raw.sort_by(|a, b| (&a.id, a.offset).cmp(&(&b.id, b.offset)));
    let mut out: Vec<Finding> = Vec::new();
    let mut last_offset = 0;
    for f in raw {
        match out.last_mut() {
            Some(prev) if prev.id == f.id => {
                if f.offset != last_offset {
                    prev.count += f.count;
                    last_offset = f.offset;
                }
            }
            _ => {
                last_offset = f.offset;
                out.push(f);
            }
        }
    }
    out
}

/// How many findings of one file are held before they are first aggregated: a file of a
/// hundred thousand matches of one token holds one finding, not a hundred thousand.
const AGGREGATE_AT: usize = 1024;

/// Adds `f` to a file's findings, aggregating them first when they fill their vector's
/// room past [`AGGREGATE_AT`]. The room is then twice what aggregation left, so a file of
/// many distinct findings is aggregated a logarithmic number of times.
pub(super) fn hold(findings: &mut Vec<Finding>, f: Finding) {
    if findings.len() >= AGGREGATE_AT && findings.len() == findings.capacity() {
        let mut kept = aggregate(std::mem::take(findings));
        kept.reserve(kept.len().max(AGGREGATE_AT));
        *findings = kept;
    }
    findings.push(f);
}

/// A worker's search scratch: the hits of the buffer searched last, and whether a rule
/// skipped literal hits in the current file.
#[derive(Default)]
pub(super) struct Scratch {
    hits: Vec<Hit>,
    rule_hits: Vec<RuleHit>,
    /// Set when a rule skipped literal hits in the current file.
    pub(super) rules_incomplete: bool,
    /// When the search stops (the scan's `--timeout`).
    pub(super) deadline: Option<Instant>,
    /// Set when a stop signal or the deadline cut the search of the last buffer short.
    pub(super) stopped: bool,
    /// The byte ranges the fingerprints matched in the current file that end past the
    /// start of the buffer searched last (a rule's hit may be taken a buffer later).
    fingerprinted: Vec<(u64, u64)>,
}

impl Scratch {
    /// A scratch whose searches stop at `deadline` (and at a stop signal).
    pub(super) fn until(deadline: Option<Instant>) -> Scratch {
        Scratch { deadline, ..Scratch::default() }
    }

    /// Forgets the file searched before.
    pub(super) fn start_file(&mut self) {
        self.rules_incomplete = false;
        self.fingerprinted.clear();
    }

    /// Searches `buf[..at.len]` with fingerprints and rules.
    pub(super) fn search(
        &mut self,
        buf: &[u8],
        cx: &Cx<'_>,
        at: Span,
        findings: &mut Vec<Finding>,
    ) {
        let Cx { of: job, searchers, place } = *cx;
        let Span { carry, len, pos, last, each } = at;
        let keep = |findings: &mut Vec<Finding>, f| {
            if each {
                findings.push(f)
            } else {
                hold(findings, f)
            }
        };
        let base = pos - carry as u64;
        let buf = &buf[..len];
        self.hits.clear();
        if len > carry {
            searchers.matcher.find(buf, base, carry, &mut self.hits);
        }
        self.fingerprinted.retain(|&(_, to)| to > base);
        for h in &self.hits {
            self.fingerprinted.push((h.offset, h.offset + u64::from(h.len)));
            let at = (h.offset - base) as usize;
            let matched = &buf[at..at + h.len as usize];
            keep(findings, lift(job, searchers.matcher, h, place, matched));
        }
        self.rule_hits.clear();
        // However a buffer is packed, a stop signal or the deadline ends its search soon.
        let deadline = self.deadline;
        let stop = || sys::stop_signal().is_some() || deadline.is_some_and(|d| Instant::now() >= d);
        match searchers.rules.find_until(buf, base, carry, last, &mut self.rule_hits, &stop) {
            Searched::Whole => {}
            Searched::Flooded => self.rules_incomplete = true,
            Searched::Stopped => self.stopped = true,
        }
        // A rule's secret over bytes a fingerprint matched is that Secret's value: one
        // finding, the fingerprint's (it names the Secret; the rule would say less of it).
        let fingerprinted = |from: u64, to: u64| {
            self.fingerprinted.iter().any(|&(start, end)| start < to && from < end)
        };
        for h in self.rule_hits.drain(..) {
            let (from, to) =
                (h.offset + u64::from(h.secret.start), h.offset + u64::from(h.secret.end));
            if fingerprinted(from, to) {
                continue;
            }
            let at = (h.offset - base) as usize;
            let secret = &buf[at + h.secret.start as usize..at + h.secret.end as usize];
            keep(findings, lift_rule(job, searchers, h, place, secret));
        }
    }
}

/// The label that ranks a fingerprinted value one step higher: a rotated-out value that
/// is still on disk.
const REVOKED: &str = "revoked";

/// Lifts a matcher hit to a finding. `matched` is the matched bytes, used only for the
/// redacted preview.
pub(super) fn lift(
    job: &dyn Target,
    matcher: &Matcher,
    h: &Hit,
    place: (Category, Severity),
    matched: &[u8],
) -> Finding {
    let (entry, form) = matcher.describe(h);
    let m = MatchInfo {
        kind: MatchKind::Fingerprint,
        secret: Some(entry.secret.clone()),
        key: Some(entry.key.clone()),
        label: Some(entry.label.clone()),
        rule: None,
        encoding: form.encoding,
    };
    let material = Material { severity: Severity::High, revoked: entry.label == REVOKED };
    let id = Finding::make_id(job.owner().site, &job.id_path(), &m, &[]);
    let (offset, length, preview) = (h.offset, h.len as u64, Preview::redact(matched));
    let mut f = finding(job, place, Match { id, material, offset, length, matched: m, preview });
    f.previewed = Some((h.offset, h.len));
    f
}

/// Lifts a rule hit to a finding. `secret` is the secret part of the match, used only for
/// the redacted preview and the id's digest. A decoded token's claims that hold a
/// fingerprinted value are withheld.
pub(super) fn lift_rule(
    job: &dyn Target,
    searchers: &Searchers<'_>,
    h: RuleHit,
    place: (Category, Severity),
    secret: &[u8],
) -> Finding {
    let rules = searchers.rules;
    let m = MatchInfo {
        kind: MatchKind::Rule,
        secret: None,
        key: None,
        label: None,
        rule: Some(rules.spec(h.rule).id.to_owned()),
        encoding: if h.plain.is_some() { Encoding::Base64 } else { Encoding::Raw },
    };
    // What the preview shows, where the file holds it as matched.
    let previewed = match h.plain {
        None => Some((h.offset + u64::from(h.secret.start), h.secret.end - h.secret.start)),
        Some(_) => None,
    };
    // A match in a base64 blob: its secret as decoded names and previews it.
    let secret = h.plain.as_deref().unwrap_or(secret);
    let material = Material { severity: h.severity, revoked: false };
    let id = Finding::make_id(job.owner().site, &job.id_path(), &m, secret);
    let (offset, length, preview) = (h.offset, h.len as u64, Preview::redact(secret));
    let mut f = finding(job, place, Match { id, material, offset, length, matched: m, preview });
    f.previewed = previewed;
    f.token = h.token;
    if let Some(token) = &mut f.token {
        let mut hits = Vec::new();
        token.withhold(|claim| {
            hits.clear();
            searchers.matcher.find(claim.as_bytes(), 0, 0, &mut hits);
            !hits.is_empty()
        });
    }
    f
}

/// The encryption-at-rest finding of the datastore in `job`'s file: critical
/// (`etcd-plaintext`) when any Secret is stored in plaintext, else `encrypted-at-rest`
/// (`info`). Its id is the file's, whatever the counts.
pub(super) fn at_rest(job: &dyn Target, counts: crate::finding::SecretsAtRest) -> Finding {
    let m = MatchInfo {
        kind: MatchKind::Datastore,
        secret: None,
        key: None,
        label: None,
        rule: None,
        encoding: Encoding::Raw,
    };
    let id = Finding::make_id(job.owner().site, &job.id_path(), &m, &[]);
    let category = match counts.plaintext {
        0 => Category::EncryptedAtRest,
        _ => Category::EtcdPlaintext,
    };
    let place = crate::severity::place(category, false, None);
    let (material, preview) = (Material::default(), Preview::none());
    let mut f =
        finding(job, place, Match { id, material, offset: 0, length: 0, matched: m, preview });
    f.secrets_at_rest = Some(counts);
    f
}

/// A finding the last scan's state keeps ([`super::state`]), as a finding of `job`'s
/// file again, at its place, stamped with its owner now.
pub(super) fn again(
    job: &dyn Target,
    place: (Category, Severity),
    m: super::state::Made,
) -> Finding {
    let super::state::Made { id, offset, length, matched, material, preview } = m;
    finding(job, place, Match { id, material, offset, length, matched, preview })
}

/// A match, before it is a finding of its file.
pub(super) struct Match {
    pub(super) id: String,
    pub(super) material: Material,
    pub(super) offset: u64,
    pub(super) length: u64,
    pub(super) matched: MatchInfo,
    pub(super) preview: Preview,
}

/// The finding of `m` in `job`'s file, at its place, stamped with its owner.
fn finding(job: &dyn Target, (category, place): (Category, Severity), m: Match) -> Finding {
    let Match { id, material, offset, length, matched, preview } = m;
    let mut f = Finding {
        id,
        severity: rank(place, material.severity, material.revoked),
        category,
        site: job.owner().site,
        path: job.node_path(),
        offset,
        length,
        count: 1,
        stale: false,
        pod: None,
        container: None,
        images: crate::finding::Images::default(),
        within: Within::Content,
        matched,
        preview,
        note: None,
        record: None,
        secrets_at_rest: None,
        package: None,
        token: None,
        material,
        volume: None,
        previewed: None,
    };
    stamp(job.owner(), &mut f);
    f
}

/// Writes what `owner` says into `f`: site, staleness, pod, container, images, note and
/// volume. The pod is the pod dir's, else the runtime records', else the log path's; the
/// container the records', else the log path's. Names taken from a path are withheld
/// where the path's are.
pub(super) fn stamp(owner: &Owner, f: &mut Finding) {
    let shown = text::withhold::shown;
    let records = owner.records.as_deref();
    let log = owner.log.as_deref();
    f.site = owner.site;
    f.stale = owner.stale;
    let record = records.map(|o| &o.record);
    let from_record = |f: fn(&ContainerRecord) -> &Option<String>| {
        record.and_then(|r| f(r).as_deref()).map(shown)
    };
    f.pod = match (owner.pod.as_deref().or(records.and_then(|o| o.pod_uid.as_deref())), log) {
        (Some(uid), _) => Some(PodRef {
            uid: shown(uid),
            namespace: from_record(|r| &r.pod_namespace),
            name: from_record(|r| &r.pod_name),
            live: None,
        }),
        (None, Some(l)) => Some(PodRef {
            uid: shown(&l.uid),
            namespace: Some(shown(&l.namespace)),
            name: Some(shown(&l.pod)),
            live: None,
        }),
        (None, None) => None,
    };
    f.container = match (records.and_then(|o| o.container.as_deref()), log) {
        (Some(id), _) => Some(ContainerRef {
            id: Some(id.to_owned()),
            name: from_record(|r| &r.name),
            // What the records say; the runtime, when asked, may say more (`judge`).
            live: record.and_then(|r| r.running),
            runtime: record.and_then(|r| r.runtime),
        }),
        (None, Some(l)) => Some(ContainerRef {
            id: None,
            name: Some(shown(&l.container)),
            live: None,
            runtime: None,
        }),
        (None, None) => None,
    };
    f.images = records.map(|o| o.images.clone()).unwrap_or_default();
    f.note = records.and_then(|o| o.note);
    f.volume.clone_from(&owner.volume);
}
