//! SARIF 2.1.0 for CI gates and code-scanning dashboards: one run whose driver lists a
//! reporting rule per built-in detection rule (`rule/<id>`) and per site for known values
//! (`fingerprint/<site>`), and one result per finding: its level from the severity, its
//! node path as a `file://` URI with the byte region of the match, the finding id as the
//! stable `partialFingerprints` entry, and the report's fields as properties. Like every
//! writer it sees only redacted previews; no value can reach the output.

use crate::finding::{Finding, MatchKind, Report, Severity, SiteId, Within};
use serde_json::{json, Value};
use std::io::{self, Write};

/// The key of the finding id in `partialFingerprints`.
pub const FINGERPRINT_KEY: &str = "kresidueFindingId/v1";

/// SARIF level of a severity.
fn level(s: Severity) -> &'static str {
    match s {
        Severity::Critical | Severity::High => "error",
        Severity::Medium => "warning",
        Severity::Low | Severity::Info => "note",
    }
}

/// The reporting rule id of a finding.
fn rule_id(f: &Finding) -> String {
    match (f.matched.kind, &f.matched.rule) {
        (MatchKind::Rule, Some(r)) => format!("rule/{r}"),
        (MatchKind::Datastore, _) => AT_REST.to_owned(),
        _ => format!("fingerprint/{}", f.site.as_str()),
    }
}

/// A node path as a `file://` URI: the bytes the path stands for (a name that is not
/// UTF-8 by its own bytes, see [`crate::text::path_bytes`]), each outside RFC 3986's unreserved
/// set and `/` percent-encoded.
pub fn file_uri(path: &str) -> String {
    let mut out = String::from("file://");
    for b in crate::text::path_bytes(path) {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The rule of a datastore's encryption-at-rest finding.
const AT_REST: &str = "datastore/encryption-at-rest";

fn rules() -> Vec<Value> {
    let mut rules: Vec<Value> = SiteId::ALL
        .iter()
        .map(|site| {
            json!({
                "id": format!("fingerprint/{}", site.as_str()),
                "name": "KnownSecretValue",
                "shortDescription": { "text": format!("A fingerprinted Secret value at site {}", site.as_str()) },
                "fullDescription": { "text": "A value of a Kubernetes Secret, known by its fingerprint (raw, base64 or JSON-escaped), found on the node's disk." },
                "help": { "text": "See the finding's category: remove orphaned residue with `kresidue clean`, rotate values that leaked where they never belonged." },
                "defaultConfiguration": { "level": "error" },
                "properties": { "tags": ["security", "secret", site.as_str()] },
            })
        })
        .collect();
    rules.push(json!({
        "id": AT_REST,
        "name": "DatastoreEncryptionAtRest",
        "shortDescription": { "text": "How many of a cluster datastore's Secrets are stored in plaintext and how many encrypted" },
        "fullDescription": { "text": "Counted from the datastore's keys and the prefixes of its values (k8s:enc: is ciphertext), no value read: an error when any Secret is stored in plaintext (encryption at rest is off), a note when all are encrypted." },
        "help": { "text": "Enable encryption at rest (EncryptionConfiguration; k3s and k0s: --secrets-encryption), then rewrite every Secret so that each is stored encrypted." },
        "defaultConfiguration": { "level": "error" },
        "properties": { "tags": ["security", "secret", "encryption-at-rest"] },
    }));
    rules.extend(crate::rules::table::RULES.iter().map(|r| {
        json!({
            "id": format!("rule/{}", r.id),
            "name": r.id,
            "shortDescription": { "text": r.description },
            "help": { "text": "Secret material found by its shape: check where it came from, rotate it, remove it." },
            "defaultConfiguration": { "level": level(r.severity) },
            "properties": { "tags": ["security", "secret"], "severity": r.severity.as_str() },
        })
    }));
    rules
}

fn message(f: &Finding) -> String {
    if let Some(counts) =
        f.secrets_at_rest.as_ref().filter(|_| f.matched.kind == MatchKind::Datastore)
    {
        return format!("{} at {} ({})", counts.line(), f.path, f.site.as_str());
    }
    let what = match (&f.matched.secret, &f.matched.key, &f.matched.rule) {
        (Some(s), Some(k), _) => format!(
            "Secret {s} key {k} ({}, {})",
            f.matched.label.as_deref().unwrap_or("-"),
            f.matched.encoding.as_str()
        ),
        (_, _, Some(r)) => format!("Secret material matching rule {r}"),
        _ => "Secret material".to_owned(),
    };
    let at = match f.within {
        Within::Content => "at",
        Within::Name => "in the name of",
    };
    let mut text = format!(
        "{what} found {at} {} ({}, {})",
        f.path,
        f.site.as_str(),
        super::plain(&f.category)
    );
    if let Some(p) = &f.pod {
        let live = match p.live {
            Some(true) => "live",
            Some(false) => "not live",
            None => "liveness unknown",
        };
        text.push_str(&format!("; pod {} {live}", p.uid));
    }
    if f.count > 1 {
        text.push_str(&format!("; {} times in the file", f.count));
    }
    text
}

/// The SARIF document of `report`.
pub fn document(report: &Report) -> Value {
    let rules = rules();
    let index = |id: &str| rules.iter().position(|r| r["id"] == id);
    let results: Vec<Value> = report
        .findings
        .iter()
        .map(|f| {
            let id = rule_id(f);
            let mut location = json!({ "artifactLocation": { "uri": file_uri(&f.path) } });
            // A match in a name has no region of the file's bytes.
            if f.within == Within::Content {
                location["region"] = json!({ "byteOffset": f.offset, "byteLength": f.length });
            }
            let mut result = json!({
                "ruleId": id,
                "level": level(f.severity),
                "message": { "text": message(f) },
                "locations": [{ "physicalLocation": location }],
                "partialFingerprints": { FINGERPRINT_KEY: f.id },
                "properties": {
                    "severity": f.severity.as_str(),
                    "category": f.category,
                    "site": f.site,
                    "stale": f.stale,
                    "count": f.count,
                    "pod": f.pod,
                    "container": f.container,
                    "match": f.matched,
                    "in": f.within,
                    "preview": f.preview,
                },
            });
            if let Some(i) = index(&id) {
                result["ruleIndex"] = json!(i);
            }
            result
        })
        .collect();
    let notifications: Vec<Value> = report
        .errors
        .iter()
        .map(|e| {
            json!({
                "level": "warning",
                "message": { "text": format!("{}: {}", e.path, e.error) },
                "locations": [{ "physicalLocation": { "artifactLocation": { "uri": file_uri(&e.path) } } }],
            })
        })
        .collect();
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": {
                "name": "kresidue",
                "version": env!("CARGO_PKG_VERSION"),
                "semanticVersion": env!("CARGO_PKG_VERSION"),
                "rules": rules,
            }},
            "invocations": [{
                "executionSuccessful": true,
                "toolExecutionNotifications": notifications,
            }],
            "results": results,
            "properties": {
                "schema": Report::SCHEMA,
                "root": report.root,
                "node": report.node,
                "cri": report.cri,
                "summary": report.summary,
                "unread_mounts": report.unread_mounts,
            },
        }],
    })
}

/// Writes the SARIF document and a newline.
pub fn write(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, &document(report)).map_err(io::Error::from)?;
    out.write_all(b"\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_are_percent_encoded() {
        assert_eq!(file_uri("/var/lib/a b/ü%#?"), "file:///var/lib/a%20b/%C3%BC%25%23%3F");
        // The bytes of a name that is not UTF-8; a backslash of the name itself.
        assert_eq!(file_uri("/x/a\\xffb\\\\xff"), "file:///x/a%FFb%5Cxff");
    }
}
