//! The domain model at the centre of every run: [`Finding`], its [`Severity`] and
//! [`Category`], the [`Report`] that writers print, and the [`ExitStatus`] contract.
//!
//! Everything a writer may print about a secret passes through here first: previews are
//! redacted when a finding is built ([`Preview::redact`]), so no writer ever holds a value.
//! Nothing in this module reads files or talks to the runtime.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;
use std::sync::Arc;

/// How bad a finding is. Ordered: `Info < Low < Medium < High < Critical`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Expected material, reported for completeness.
    Info,
    /// Worth knowing, rarely worth acting on.
    Low,
    /// A stale or partial copy.
    Medium,
    /// A secret where it should not be.
    High,
    /// A secret at rest on disk where nothing protects it.
    Critical,
}

impl Severity {
    /// All severities, lowest first.
    pub const ALL: [Severity; 5] =
        [Severity::Info, Severity::Low, Severity::Medium, Severity::High, Severity::Critical];

    /// The lowercase name used in reports and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "high",
            Severity::Critical => "critical",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What kind of residue a finding is (the `category` field of report v1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[allow(missing_docs)] // the names are the contract of docs/CONTRACT.md
pub enum Category {
    OrphanedVolume,
    DeadContainer,
    ImageLayer,
    ImageConfig,
    ContainerLayer,
    EnvPersisted,
    PodLog,
    StaleSubpath,
    NonTmpfsVolume,
    EtcdPlaintext,
    EncryptedAtRest,
    Shipped,
    Other,
}

/// Declares [`SiteId`] from one list of variants and report names, so that
/// [`SiteId::ALL`] and [`SiteId::as_str`] cannot miss a variant.
macro_rules! site_ids {
    ($($variant:ident => $name:literal,)*) => {
        /// Where a finding was made (the `site` field of report v1; the names are the
        /// contract of `docs/CONTRACT.md`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
        #[allow(missing_docs)]
        pub enum SiteId {
            $(#[serde(rename = $name)] $variant,)*
        }

        impl SiteId {
            /// Every site, in report order.
            pub const ALL: &'static [SiteId] = &[$(SiteId::$variant,)*];

            /// The id as written in reports.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(SiteId::$variant => $name,)*
                }
            }
        }
    };
}

site_ids! {
    KubeletSecretVolume => "kubelet-secret-volume",
    KubeletProjectedVolume => "kubelet-projected-volume",
    KubeletCsiVolume => "kubelet-csi-volume",
    KubeletSubpath => "kubelet-subpath",
    ContainerdSnapshot => "containerd-snapshot",
    ContainerdMetadata => "containerd-metadata",
    ContainerdContent => "containerd-content",
    OciBundle => "oci-bundle",
    PodLog => "pod-log",
    Etcd => "etcd",
    Kine => "kine",
    Dqlite => "dqlite",
    ContainersStorage => "containers-storage",
    DockerStorage => "docker-storage",
    RuntimeLog => "runtime-log",
    RuntimeVolume => "runtime-volume",
    ImageArchive => "image-archive",
    Other => "other",
}

/// The form in which a known value was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Encoding {
    /// The value's own bytes.
    Raw,
    /// Standard padded base64 of the whole value, as in manifests.
    Base64,
    /// The body of a JSON string holding the value, escaped as Go's encoding/json does.
    JsonEscaped,
}

impl Encoding {
    /// All encodings, in report order.
    pub const ALL: [Encoding; 3] = [Encoding::Raw, Encoding::Base64, Encoding::JsonEscaped];

    /// The name used in reports and fingerprint files.
    pub fn as_str(self) -> &'static str {
        match self {
            Encoding::Raw => "raw",
            Encoding::Base64 => "base64",
            Encoding::JsonEscaped => "json-escaped",
        }
    }

    /// Parses the name used in fingerprint files.
    pub fn parse(s: &str) -> Option<Encoding> {
        Encoding::ALL.into_iter().find(|e| e.as_str() == s)
    }
}

/// The pod a finding belongs to.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct PodRef {
    /// The pod UID (the directory name under `pods/`).
    pub uid: String,
    /// Namespace, when known.
    pub namespace: Option<String>,
    /// Name, when known.
    pub name: Option<String>,
    /// Whether the runtime reports the pod alive; `None` when it could not be asked.
    pub live: Option<bool>,
}

/// The container a finding belongs to.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct ContainerRef {
    /// Runtime container id (unknown for a pod log, which names only the container).
    pub id: Option<String>,
    /// Container name from the pod spec, when known.
    pub name: Option<String>,
    /// Whether the container is alive, as CRI or the runtime's own records say; `None`
    /// when unknown.
    pub live: Option<bool>,
    /// The runtime whose own records name the container (`docker`, `cri-o`, `podman`),
    /// when they, not CRI's, are its witness.
    pub runtime: Option<crate::runtimes::Keeper>,
}

/// What matched: a known value (fingerprint) or a rule.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MatchInfo {
    /// `fingerprint` or `rule`.
    pub kind: MatchKind,
    /// `<namespace>/<name>` of the Secret the value came from.
    pub secret: Option<String>,
    /// The key under `data` of that Secret (or a derived key like `.dockerconfigjson/<registry>/auth`).
    pub key: Option<String>,
    /// The fingerprint label (`current`, `revoked`, …).
    pub label: Option<String>,
    /// The rule id, for rule matches.
    pub rule: Option<String>,
    /// The encoding the value was found in.
    pub encoding: Encoding,
}

/// The kind of a match.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MatchKind {
    /// A fingerprinted known value.
    Fingerprint,
    /// A built-in detection rule.
    Rule,
    /// What a cluster datastore says of its Secrets' encryption at rest, from its keys and
    /// the prefixes of its values alone ([`SecretsAtRest`]).
    Datastore,
}

/// Where in its file a match is: the file's bytes, or the name at its path (a file's or a
/// directory's), the path showing that name withheld.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Within {
    /// The content: `offset` and `length` are bytes of the file (not written in reports).
    #[default]
    Content,
    /// The name: `offset` and `length` are bytes of the last name of the path.
    Name,
}

impl Within {
    /// True for [`Within::Content`] (the default, left out of reports).
    pub fn is_content(&self) -> bool {
        *self == Within::Content
    }
}

/// A redacted preview: at most four leading characters, then `****`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct Preview(String);

impl Preview {
    /// Builds the preview from the matched bytes. Shows at most 4 leading characters and at
    /// most a quarter of the value, printable ASCII only (anything else becomes `.`), so a
    /// preview never reveals enough of a value to matter.
    pub fn redact(matched: &[u8]) -> Preview {
        let shown = (matched.len() / 4).min(4);
        let mut s: String = matched[..shown]
            .iter()
            .map(|&b| if b.is_ascii_graphic() { b as char } else { '.' })
            .collect();
        s.push_str("****");
        Preview(s)
    }

    /// No preview: a finding of no matched bytes (a datastore's encryption at rest).
    pub fn none() -> Preview {
        Preview("-".to_owned())
    }

    /// The preview text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What kind of token a JWT is (see `rules::jwt`, which decodes them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum JwtKind {
    /// A legacy, secret-based Kubernetes service-account token (`iss` is
    /// `kubernetes/serviceaccount`, usually no `exp`).
    LegacyServiceAccount,
    /// A bound (projected, TokenRequest) Kubernetes service-account token.
    BoundServiceAccount,
    /// Any other JWT.
    Other,
}

impl JwtKind {
    /// True for Kubernetes service-account tokens, legacy or bound.
    pub fn is_service_account(self) -> bool {
        matches!(self, JwtKind::LegacyServiceAccount | JwtKind::BoundServiceAccount)
    }
}

/// What a JWT says about itself (unverified), decoded by `rules::jwt`. Holds no part of the
/// raw token; every string is a claim in its expected shape (see `rules::jwt`), printable
/// ASCII.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct JwtInsight {
    /// The kind of token.
    pub kind: JwtKind,
    /// `iss`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// `sub`, e.g. `system:serviceaccount:<ns>:<name>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// `aud`, a string or an array of strings in the token (at most `rules::jwt::MAX_AUDIENCES`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub audience: Vec<String>,
    /// `exp`, seconds since the epoch (a fractional `exp` is rounded up).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
    /// `iat`, seconds since the epoch (a fractional `iat` is rounded up).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issued_at: Option<i64>,
    /// Whether `exp <= now`; `None` when the token has no `exp`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expired: Option<bool>,
    /// Namespace of the service account, for service-account tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name of the service account, for service-account tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_account: Option<String>,
    /// Name of the pod a bound token was issued for, when the token says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_name: Option<String>,
    /// The fields above the token has but that are not shown: not in their shape, or
    /// holding a fingerprinted value (field names, in the order above).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub withheld: Vec<&'static str>,
}

/// The fields of an [`JwtInsight`] that can be withheld, in their order.
const CLAIM_FIELDS: [&str; 6] =
    ["issuer", "subject", "audience", "namespace", "service_account", "pod_name"];

impl JwtInsight {
    /// The severity of the token as material (the table in `rules::jwt`'s docs).
    pub fn severity(&self) -> Severity {
        match (self.kind.is_service_account(), self.expired) {
            (true, None) => Severity::Critical,
            (true, Some(false)) => Severity::High,
            (true, Some(true)) => Severity::Low,
            (false, Some(true)) => Severity::Low,
            (false, _) => Severity::Medium,
        }
    }

    /// Withholds every shown claim for which `holds` is true (one that holds a
    /// fingerprinted value): it is left out and named in [`JwtInsight::withheld`].
    pub fn withhold(&mut self, mut holds: impl FnMut(&str) -> bool) {
        let mut withheld = std::mem::take(&mut self.withheld);
        for (field, name) in [
            (&mut self.issuer, "issuer"),
            (&mut self.subject, "subject"),
            (&mut self.namespace, "namespace"),
            (&mut self.service_account, "service_account"),
            (&mut self.pod_name, "pod_name"),
        ] {
            if field.as_deref().is_some_and(&mut holds) {
                *field = None;
                withheld.push(name);
            }
        }
        let before = self.audience.len();
        self.audience.retain(|a| !holds(a));
        if self.audience.len() < before {
            withheld.push("audience");
        }
        withheld.sort_by_key(|f| CLAIM_FIELDS.iter().position(|c| c == f));
        withheld.dedup();
        self.withheld = withheld;
    }
}

/// The names of the images a layer belongs to: one list per layer, shared (a pointer
/// each) by its scope and every finding in it, and each name by every layer it is on, so
/// that a layer of many files, of a base image of many names, costs its names once.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct Images(Arc<[Arc<str>]>);

impl Images {
    /// The list of `names`, in their order.
    pub fn new(names: impl IntoIterator<Item = Arc<str>>) -> Images {
        Images(names.into_iter().collect())
    }

    /// The names.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|n| &**n)
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The first.
    pub fn first(&self) -> Option<&str> {
        self.iter().next()
    }

    /// Withholds each name holding recorded material (see
    /// [`crate::text::withhold::names`]); the list is copied only when one does.
    pub fn withhold(&mut self) {
        use crate::text::withhold;
        if !self.iter().any(|n| withhold::is_withheld(n.as_bytes())) {
            return;
        }
        let mut names: Vec<String> = self.iter().map(str::to_owned).collect();
        withhold::names(names.iter_mut());
        *self = Images::new(names.into_iter().map(Arc::from));
    }
}

/// One place where secret material was found. Owned, small, and free of secret values.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Stable id (see [`Finding::make_id`]).
    pub id: String,
    /// How bad it is.
    pub severity: Severity,
    /// What kind of residue it is.
    pub category: Category,
    /// Where it was found.
    pub site: SiteId,
    /// The node path a person sees (user-visible name for atomic-writer volumes), as
    /// `text::display_path` makes it: a name holding secret material is withheld.
    pub path: String,
    /// Byte offset of the (first) match in the file (in its name, for a name).
    pub offset: u64,
    /// Length of the match in bytes.
    pub length: u64,
    /// How many times the same material occurs in this file (one finding for all).
    pub count: u64,
    /// True for a superseded copy (old atomic-writer dir, leftover `..data_tmp`).
    pub stale: bool,
    /// The owning pod, when the site has one.
    pub pod: Option<PodRef>,
    /// The owning container, when the site has one.
    pub container: Option<ContainerRef>,
    /// The images an image layer belongs to (their names, as the runtime records them).
    #[serde(skip_serializing_if = "Images::is_empty")]
    pub images: Images,
    /// Whether the match is in the file's content or in the name at `path` (`"in":
    /// "name"`, written only then).
    #[serde(rename = "in", skip_serializing_if = "Within::is_content")]
    pub within: Within,
    /// What matched.
    #[serde(rename = "match")]
    pub matched: MatchInfo,
    /// Redacted preview.
    pub preview: Preview,
    /// What the place of the match is, when the path alone does not say (a freed page of a
    /// database).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<&'static str>,
    /// The record of a cluster datastore the match is in (a kine row), when it is in one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record: Option<DbRecord>,
    /// What a datastore's Secrets are at rest, for its encryption-at-rest finding.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secrets_at_rest: Option<SecretsAtRest>,
    /// The package that installed the file, for a `shipped` finding.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub package: Option<String>,
    /// What a matched JWT says about itself (issuer, subject, audience, expiry).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<JwtInsight>,
    /// What the severity is made of besides the place, kept to rate the finding again
    /// once its owner's liveness is known.
    #[serde(skip)]
    pub material: Material,
    /// The volume of a pod's Secret volume or subPath copy the finding is in (raw, never
    /// written: what the severity model pairs a subPath copy with its volume by).
    #[serde(skip)]
    pub volume: Option<std::sync::Arc<str>>,
    /// Where in the file the bytes its preview shows are, and the length of what they
    /// begin (the preview shows the first quarter, at most 4): read again to show the
    /// preview of a finding a later scan keeps from its state (`--state`) without reading
    /// the file. `None` where the file's bytes are not what was matched (a decoded blob,
    /// a compressed log, a log line joined to the next, a datastore's reassembled value).
    #[serde(skip)]
    pub previewed: Option<(u64, u32)>,
}

/// The record of a cluster datastore (a row of kine's table) a match is in, or the part
/// of the datastore's file that holds it when no record does.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DbRecord {
    /// Its key (`/registry/secrets/<namespace>/<name>`), withheld as a name is when it
    /// holds secret material; `null` when no record holds the match.
    pub key: Option<String>,
    /// Its revision (kine's row id); `null` when no record holds the match.
    pub revision: Option<i64>,
    /// What the datastore makes of the bytes the match is in.
    pub state: RecordState,
}

/// The prefix of a Secret's key in the cluster's datastore (the API server's default
/// `--etcd-prefix`, `/registry`).
pub const SECRETS_PREFIX: &str = "/registry/secrets/";

/// How many of a datastore's Secrets are stored in plaintext and how many encrypted (a
/// value beginning `k8s:enc:`), each Secret's served revision counted once, from the keys
/// and the values' prefixes alone: never a value.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SecretsAtRest {
    /// Secrets stored in plaintext.
    pub plaintext: u64,
    /// Secrets stored encrypted.
    pub encrypted: u64,
    /// The same, by namespace, in name order.
    pub namespaces: Vec<NamespaceAtRest>,
    /// Set when part of the datastore could not be read (corrupt pages, the deadline):
    /// the counts are of the part read, and say nothing of the rest.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub partial: bool,
}

/// A namespace's share of [`SecretsAtRest`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct NamespaceAtRest {
    /// The namespace, withheld as a name is when it holds secret material.
    pub namespace: String,
    /// Its Secrets stored in plaintext.
    pub plaintext: u64,
    /// Its Secrets stored encrypted.
    pub encrypted: u64,
}

impl SecretsAtRest {
    /// Counts the Secret of namespace `ns`, encrypted or not.
    pub fn add(&mut self, ns: &str, encrypted: bool) {
        let i = match self.namespaces.binary_search_by(|n| n.namespace.as_str().cmp(ns)) {
            Ok(i) => i,
            Err(i) => {
                let n = NamespaceAtRest { namespace: ns.to_owned(), ..Default::default() };
                self.namespaces.insert(i, n);
                i
            }
        };
        let (all, one) = match encrypted {
            true => (&mut self.encrypted, &mut self.namespaces[i].encrypted),
            false => (&mut self.plaintext, &mut self.namespaces[i].plaintext),
        };
        *all += 1;
        *one += 1;
    }

    /// Counts the Secret whose datastore key is `key` (`/registry/secrets/<ns>/<name>`);
    /// another key is no Secret and is not counted.
    pub fn add_key(&mut self, key: &str, encrypted: bool) {
        if let Some(rest) = key.strip_prefix(SECRETS_PREFIX) {
            self.add(rest.split_once('/').map_or("", |(ns, _)| ns), encrypted);
        }
    }

    /// Whether it counted no Secret.
    pub fn is_empty(&self) -> bool {
        self.plaintext + self.encrypted == 0
    }

    /// The line a report shows: `datastore: 842 Secrets in plaintext (encryption at rest
    /// is off)`.
    pub fn line(&self) -> String {
        let secrets = |n: u64| if n == 1 { "1 Secret".to_owned() } else { format!("{n} Secrets") };
        let line = match (self.plaintext, self.encrypted) {
            (p, 0) => format!("datastore: {} in plaintext (encryption at rest is off)", secrets(p)),
            (0, e) => format!("datastore: {} encrypted (encryption at rest is on)", secrets(e)),
            (p, e) => format!(
                "datastore: {} in plaintext, {e} encrypted (encryption at rest is on, not for all)",
                secrets(p)
            ),
        };
        match self.partial {
            true => format!("{line}; only part of it could be read, the rest is not counted"),
            false => line,
        }
    }
}

/// What a datastore makes of the bytes a match is in: the newest value of its key, or
/// one of the copies a datastore keeps of what it no longer serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RecordState {
    /// The value the cluster serves now.
    Current,
    /// An earlier revision's value, kept until the datastore compacts it.
    OldRevision,
    /// The previous value copied beside a newer one (kine's `old_value`).
    OldValue,
    /// A value of a key whose newest revision is its deletion.
    Deleted,
    /// Written but not committed (a log frame after the last commit).
    Uncommitted,
    /// An older image of a page the database has rewritten since, or a frame of an
    /// earlier generation of the log.
    Superseded,
    /// A page on the database's freelist: compacted or deleted rows, until a vacuum.
    Freed,
    /// Unused space in a page: the bytes of a row deleted from it.
    Unused,
    /// A transaction's pages in the datastore's replicated log (dqlite's raft log), kept
    /// until the log is compacted past it: the row as it was written.
    RaftLog,
}

impl RecordState {
    /// Its name in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            RecordState::Current => "current",
            RecordState::OldRevision => "old-revision",
            RecordState::OldValue => "old-value",
            RecordState::Deleted => "deleted",
            RecordState::Uncommitted => "uncommitted",
            RecordState::Superseded => "superseded",
            RecordState::Freed => "freed",
            RecordState::Unused => "unused",
            RecordState::RaftLog => "raft-log",
        }
    }

    /// What the place is, for a finding's `note` (none for the value served now).
    pub fn note(self) -> Option<&'static str> {
        Some(match self {
            RecordState::Current => return None,
            RecordState::OldRevision => {
                "an earlier revision of the object, kept until the datastore compacts it"
            }
            RecordState::OldValue => "the previous value, kept beside the newer revision",
            RecordState::Deleted => "an object deleted from the cluster, kept until compaction",
            RecordState::Uncommitted => "a write the datastore's log holds uncommitted",
            RecordState::Superseded => {
                "an older copy of a page of the database, rewritten since (its log or file)"
            }
            RecordState::Freed => "in a freed page of the database: compacted or deleted rows",
            RecordState::Unused => "in unused space of a page of the database: a removed row",
            RecordState::RaftLog => {
                "in the datastore's raft log: a write as it was replicated, kept until the log \
                 is compacted"
            }
        })
    }
}

/// The material part of a finding's severity: the rule's severity (`high` for a
/// fingerprinted value), and whether the value is labelled `revoked`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Material {
    /// The material's own severity.
    pub severity: Severity,
    /// A rotated-out value (one step more severe).
    pub revoked: bool,
}

impl Default for Material {
    fn default() -> Material {
        Material { severity: Severity::High, revoked: false }
    }
}

/// Domain separation of finding ids.
const ID_CONTEXT: &[u8] = b"kresidue/finding-id/v1";
/// Domain separation of the digest of a rule match's secret inside a finding id.
const RULE_VALUE_CONTEXT: &[u8] = b"kresidue/rule-value/v1";

impl Finding {
    /// The stable id of a finding: the first 16 hex digits of `SHA-256` over, each
    /// followed by a zero byte, a context string, the site, the path, the match kind, and
    /// for a fingerprint the Secret, key, label and encoding, for a rule the rule id and
    /// `SHA-256("kresidue/rule-value/v1" ‖ secret part)`. The offset is not part of it, so
    /// an id survives edits elsewhere in the file; the same material twice in a file is
    /// one finding with a count. `rule_secret` is the secret part of a rule match (unused
    /// for fingerprints, whose Secret and key already name the value).
    pub fn make_id(site: SiteId, path: &str, m: &MatchInfo, rule_secret: &[u8]) -> String {
        let mut h = Sha256::new();
        h.update(ID_CONTEXT);
        h.update([0]);
        let value = match m.kind {
            MatchKind::Fingerprint | MatchKind::Datastore => String::new(),
            MatchKind::Rule => {
                let d = Sha256::new().chain_update(RULE_VALUE_CONTEXT).chain_update(rule_secret);
                hex(&d.finalize())
            }
        };
        for part in [
            site.as_str(),
            path,
            match m.kind {
                MatchKind::Fingerprint => "fingerprint",
                MatchKind::Rule => "rule",
                MatchKind::Datastore => "datastore",
            },
            m.secret.as_deref().unwrap_or(""),
            m.key.as_deref().unwrap_or(""),
            m.label.as_deref().unwrap_or(""),
            m.encoding.as_str(),
            m.rule.as_deref().unwrap_or(""),
            &value,
        ] {
            h.update(part.as_bytes());
            h.update([0]);
        }
        hex(&h.finalize()[..8])
    }

    /// The id of a finding within one part of a file that holds several owners' data
    /// (containerd's `meta.db`): the id of [`Finding::make_id`] refined by `part` (e.g.
    /// `container=<id>`), so that one value in two containers' records is two findings.
    pub fn refine_id(id: &str, part: &str) -> String {
        let d = Sha256::new()
            .chain_update(ID_CONTEXT)
            .chain_update([0])
            .chain_update(id)
            .chain_update([0])
            .chain_update(part)
            .finalize();
        hex(&d[..8])
    }

    /// The order of findings in every report: by path, then offset, then id.
    pub fn sort_key(&self) -> (&str, u64, &str) {
        (&self.path, self.offset, &self.id)
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The severity of a finding, from the severity of where it sits (`place`: category and
/// liveness, see [`crate::severity::place`]), of what it is (`material`: `high` for a known Secret
/// value, the rule's or decoded token's severity for a rule match) and its label: the
/// material shifts the place's rank up or down by its distance from `high`, a `revoked`
/// value ranks one step higher, and the result is clamped to `info..=critical`.
pub fn rank(place: Severity, material: Severity, revoked: bool) -> Severity {
    let level = place as i32 + (material as i32 - Severity::High as i32) + i32::from(revoked);
    Severity::ALL[level.clamp(0, 4) as usize]
}

#[cfg(test)]
impl Finding {
    /// A fingerprint finding of `shop/db` key `password` at `path`, owned by nothing, for
    /// unit tests to adjust.
    pub(crate) fn sample(site: SiteId, category: Category, path: &str) -> Finding {
        Finding {
            id: String::new(),
            severity: Severity::High,
            category,
            site,
            path: path.to_owned(),
            offset: 0,
            length: 20,
            count: 1,
            stale: false,
            pod: None,
            container: None,
            images: Images::default(),
            within: Within::Content,
            matched: MatchInfo {
                kind: MatchKind::Fingerprint,
                secret: Some("shop/db".into()),
                key: Some("password".into()),
                label: None,
                rule: None,
                encoding: Encoding::Raw,
            },
            preview: Preview::redact(b"xxxxxxxxxxxxxxxx"),
            note: None,
            record: None,
            secrets_at_rest: None,
            package: None,
            token: None,
            material: Material::default(),
            volume: None,
            previewed: None,
        }
    }
}

/// A path the scan could not read, and why (never containing a value).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct ScanError {
    /// The node path.
    pub path: String,
    /// What went wrong.
    pub error: String,
}

impl ScanError {
    /// Its path made again with the names found since it was made, and each word of its
    /// message that holds secret material found in a name withheld (`text::withhold`).
    pub fn withhold(&mut self) {
        self.path = crate::text::redisplay(&self.path);
        crate::text::withhold::prose(&mut self.error);
    }
}

/// A mount point the scan met and did not read: a FUSE or network filesystem anywhere,
/// or any other filesystem below a scope but a Secret volume's tmpfs (see `walk`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct UnreadMount {
    /// The node path of the mount point.
    pub path: String,
    /// The filesystem type mounted there (`fuse`, `nfs4`, `ext4`, …; `unknown` when the
    /// mount table does not say).
    #[serde(rename = "type")]
    pub fstype: String,
}

/// State of the container-runtime cross-check.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CriInfo {
    /// `ok`, `unreachable` or `disabled`.
    pub status: CriStatus,
    /// The endpoint asked, if any.
    pub endpoint: Option<String>,
    /// Runtime name and version, when it answered.
    pub runtime: Option<String>,
}

impl CriInfo {
    /// The runtime's name and version withheld where they hold secret material found in a
    /// name (`text::withhold`).
    pub fn withhold(&mut self) {
        crate::text::withhold::names(self.runtime.iter_mut());
    }
}

/// Whether the runtime could be asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CriStatus {
    /// The runtime answered.
    Ok,
    /// It was asked and did not answer.
    Unreachable,
    /// It was not asked.
    Disabled,
}

/// Totals of a scan.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Regular files scanned: read, or taken unchanged from the last scan's state.
    pub files: u64,
    /// Bytes scanned (read, or taken unchanged from the state).
    pub bytes: u64,
    /// Of `files`, those taken from the last scan's state (`--state`), unchanged since:
    /// not read.
    pub unchanged_files: u64,
    /// Of `bytes`, those of the files taken from the state: not read.
    pub unchanged_bytes: u64,
    /// Number of findings.
    pub findings: u64,
    /// Number of findings per site id (sites without findings left out).
    pub sites: std::collections::BTreeMap<SiteId, u64>,
    /// Findings left out because `--baseline` already had them.
    pub baselined: u64,
    /// Wall time of the scan.
    pub duration_ms: u64,
    /// True when `--timeout` stopped the scan before everything was read.
    pub incomplete: bool,
    /// Mount points not read (listed in the report's `unread_mounts`).
    pub unread_mounts: u64,
    /// Findings of category `shipped`: a rule's match in a file its package installed,
    /// unchanged.
    pub shipped: u64,
    /// The Kubernetes distributions whose layout the node has (`k3s`, `rke2`,
    /// `microk8s`, `k0s`, `talos`, `bottlerocket`), besides the default (kubeadm's).
    pub distributions: Vec<String>,
}

/// A whole scan report: schema `kresidue/report/v1`.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Always [`Report::SCHEMA`].
    pub schema: &'static str,
    /// The root scanned.
    pub root: String,
    /// The node's hostname, when known.
    pub node: Option<String>,
    /// Runtime cross-check state.
    pub cri: CriInfo,
    /// Totals.
    pub summary: Summary,
    /// Findings, sorted by [`Finding::sort_key`].
    pub findings: Vec<Finding>,
    /// Unreadable paths, sorted.
    pub errors: Vec<ScanError>,
    /// Mount points not read, sorted.
    pub unread_mounts: Vec<UnreadMount>,
}

impl Finding {
    /// The names and ids of its owner that come from node data or the runtime, not from
    /// its path: the pod's uid, namespace and name, the container's id and name, the
    /// datastore record's key (the images' names are [`Finding::images`]'). Each is withheld as a name on a path is
    /// (see [`Report::withhold`]).
    pub fn names_mut(&mut self) -> impl Iterator<Item = &mut String> {
        let pod = self.pod.iter_mut().flat_map(|p| {
            std::iter::once(&mut p.uid).chain(p.namespace.iter_mut()).chain(p.name.iter_mut())
        });
        let container =
            self.container.iter_mut().flat_map(|c| c.id.iter_mut().chain(c.name.iter_mut()));
        let record = self.record.iter_mut().flat_map(|r| r.key.iter_mut());
        let namespaces = self
            .secrets_at_rest
            .iter_mut()
            .flat_map(|s| s.namespaces.iter_mut().map(|n| &mut n.namespace));
        pod.chain(container).chain(record).chain(namespaces)
    }
}

impl Report {
    /// The schema id of this report format.
    pub const SCHEMA: &'static str = "kresidue/report/v1";

    /// Every name the report shows, withheld where it holds secret material found in a
    /// name (`text::withhold`): its findings' owners' names and ids
    /// ([`Finding::names_mut`]), the runtime's name and version, and the errors' words;
    /// and every path made again with the names found since it was made. Done once, when
    /// the report is made: writers print what it holds.
    pub fn withhold(&mut self) {
        use crate::text::{redisplay, withhold};
        withhold::names(self.findings.iter_mut().flat_map(Finding::names_mut));
        self.findings.iter_mut().for_each(|f| f.images.withhold());
        self.cri.withhold();
        for f in &mut self.findings {
            f.path = redisplay(&f.path);
        }
        self.findings.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
        self.errors.iter_mut().for_each(ScanError::withhold);
        self.errors.sort();
        for m in &mut self.unread_mounts {
            m.path = redisplay(&m.path);
        }
        self.unread_mounts.sort();
    }

    /// The exit status for `--fail-on` (None = never fail on findings).
    pub fn exit_status(&self, fail_on: Option<Severity>) -> ExitStatus {
        match fail_on {
            Some(min) if self.findings.iter().any(|f| f.severity >= min) => ExitStatus::Findings,
            _ => ExitStatus::Clean,
        }
    }
}

/// The process exit contract (`docs/CONTRACT.md` "Exit codes").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitStatus {
    /// 0: nothing at or above `--fail-on`.
    Clean,
    /// 1: findings at or above `--fail-on`.
    Findings,
    /// 2: the job could not be done.
    Error,
}

impl ExitStatus {
    /// The numeric process exit code.
    pub fn code(self) -> i32 {
        match self {
            ExitStatus::Clean => 0,
            ExitStatus::Findings => 1,
            ExitStatus::Error => 2,
        }
    }
}

/// A run stopped by SIGINT or SIGTERM (the signal): nothing written, lock released; the
/// process exits with 128 + the signal (the exit contract's case outside [`ExitStatus`]).
#[derive(Debug)]
pub struct Interrupted(pub i32);

impl Interrupted {
    /// The signal's name: `SIGINT`, `SIGTERM`.
    pub fn name(&self) -> &'static str {
        match self.0 {
            2 => "SIGINT",
            15 => "SIGTERM",
            _ => "a signal",
        }
    }
}

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A clean --apply finished the action under way: its journal says what was done.
        write!(
            f,
            "interrupted by {}: no report was written (what clean --apply did is in its journal)",
            self.name()
        )
    }
}

impl std::error::Error for Interrupted {}

#[cfg(test)]
mod tests {
    use super::*;

    /// `SiteId::ALL` is the enum: every variant once, in declaration order (the
    /// discriminants are 0..n), each report name unique and the one serde writes.
    #[test]
    fn site_id_all_is_the_enum() {
        for (i, id) in SiteId::ALL.iter().enumerate() {
            assert_eq!(*id as usize, i, "{id:?} out of place in SiteId::ALL");
            let json = serde_json::to_value(id).unwrap();
            assert_eq!(json, id.as_str(), "{id:?}");
            assert_eq!(SiteId::ALL.iter().filter(|o| o.as_str() == id.as_str()).count(), 1);
        }
        // One past the last is not a variant: the list is complete up to its end.
        let last = *SiteId::ALL.last().unwrap();
        assert_eq!(last as usize + 1, SiteId::ALL.len());
        assert_eq!(std::mem::size_of::<SiteId>(), 1);
    }

    #[test]
    fn preview_never_shows_more_than_a_quarter_or_four_chars() {
        assert_eq!(Preview::redact(b"abcdefghijklmnopqrst").as_str(), "abcd****");
        assert_eq!(Preview::redact(b"abcdefgh").as_str(), "ab****");
        assert_eq!(Preview::redact(b"abc").as_str(), "****");
        assert_eq!(Preview::redact(b"\x1b[2Jxyzxyzxyzxyz").as_str(), ".[2J****");
    }

    #[test]
    fn severity_order_and_exit_status() {
        assert!(Severity::Critical > Severity::High && Severity::Low > Severity::Info);
        let r = Report {
            schema: Report::SCHEMA,
            root: "/".into(),
            node: None,
            cri: CriInfo { status: CriStatus::Disabled, endpoint: None, runtime: None },
            summary: Summary::default(),
            findings: vec![],
            errors: vec![],
            unread_mounts: vec![],
        };
        assert_eq!(r.exit_status(Some(Severity::Low)), ExitStatus::Clean);
    }
}
