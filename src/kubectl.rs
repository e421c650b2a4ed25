//! Reads what `kubectl get secrets -A -o json` prints (a `List` of `Secret`, or one
//! `Secret`) and turns it into the [`SecretValue`]s worth looking for, type-aware.
//!
//! Which keys are secret depends on the Secret's `type` (issue #2):
//! `kubernetes.io/tls` → `tls.key` only (certificates are public);
//! `kubernetes.io/service-account-token` → `token` only;
//! `kubernetes.io/dockerconfigjson` / `dockercfg` → the whole value plus each registry's
//! `auth`, `password` and `identitytoken`; `kubernetes.io/basic-auth` → `password`;
//! `kubernetes.io/ssh-auth` → `ssh-privatekey`; Opaque and anything else → every key.
//! `stringData` is ignored (the API server folds it into `data`).
//!
//! Errors never quote the input: a parse error names the line and column only, because
//! the input is full of secret values.

use anyhow::{bail, Result};
use base64::Engine as _;
use serde::Deserialize;
use std::collections::BTreeMap;

/// One value taken from a Secret, with where it came from.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue {
    /// The Secret's namespace (empty if the object had none).
    pub namespace: String,
    /// The Secret's name.
    pub name: String,
    /// The data key, or `<key>/<registry>/<field>` for values pulled out of a docker config.
    pub key: String,
    /// The decoded value. Never printed.
    pub value: Vec<u8>,
}

impl std::fmt::Debug for SecretValue {
    /// Redacts the value, so a `{:?}` anywhere can never print it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SecretValue({}/{}:{}, {} bytes)",
            self.namespace,
            self.name,
            self.key,
            self.value.len()
        )
    }
}

impl SecretValue {
    /// `<namespace>/<name>` as shown in reports.
    pub fn secret_ref(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

#[derive(Deserialize)]
struct Doc {
    kind: Option<String>,
    #[serde(default)]
    items: Vec<Object>,
    #[serde(flatten)]
    object: Object,
}

#[derive(Deserialize, Default)]
struct Object {
    kind: Option<String>,
    #[serde(default)]
    metadata: Meta,
    #[serde(rename = "type")]
    secret_type: Option<String>,
    data: Option<BTreeMap<String, Option<String>>>,
}

#[derive(Deserialize, Default)]
struct Meta {
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    name: String,
}

/// Everything taken from one kubectl document.
#[derive(Debug, Default)]
pub struct Parsed {
    /// The values to look for.
    pub values: Vec<SecretValue>,
    /// How many Secrets were read.
    pub secrets: usize,
    /// Docker config values that were not valid JSON (fingerprinted whole only).
    pub unparsable_docker_configs: usize,
}

/// A JSON error of kubectl output, naming where and what kind only: never the text.
fn malformed(e: &serde_json::Error) -> anyhow::Error {
    anyhow::anyhow!(
        "malformed kubectl JSON ({}) at line {} column {}",
        match e.classify() {
            serde_json::error::Category::Io => "read error",
            serde_json::error::Category::Syntax => "syntax error",
            serde_json::error::Category::Data => "unexpected structure",
            serde_json::error::Category::Eof => "unexpected end of input",
        },
        e.line(),
        e.column()
    )
}

/// Parses kubectl JSON output. Errors carry no input text.
pub fn parse(input: &[u8]) -> Result<Parsed> {
    let doc: Doc = serde_json::from_slice(input).map_err(|e| malformed(&e))?;
    let objects: Vec<Object> = match doc.kind.as_deref() {
        Some("Secret") => vec![doc.object],
        Some("List") | Some("SecretList") => doc.items,
        // The kind is file content: not repeated.
        Some(_) => bail!("expected a Secret or a List of Secrets, got another kind"),
        None => bail!("expected a Secret or a List of Secrets: no \"kind\" field"),
    };
    let mut out = Parsed::default();
    for obj in objects {
        if obj.kind.as_deref().is_some_and(|k| k != "Secret") {
            continue;
        }
        out.secrets += 1;
        take_values(obj, &mut out)?;
    }
    Ok(out)
}

fn take_values(obj: Object, out: &mut Parsed) -> Result<()> {
    let Object { metadata, secret_type, data, .. } = obj;
    let ty = secret_type.unwrap_or_default();
    let wanted = |key: &str| -> bool {
        match ty.as_str() {
            "kubernetes.io/tls" => key == "tls.key",
            "kubernetes.io/service-account-token" => key == "token",
            "kubernetes.io/basic-auth" => key == "password",
            "kubernetes.io/ssh-auth" => key == "ssh-privatekey",
            "kubernetes.io/dockerconfigjson" => key == ".dockerconfigjson",
            "kubernetes.io/dockercfg" => key == ".dockercfg",
            _ => true,
        }
    };
    for (key, b64) in data.unwrap_or_default() {
        let Some(b64) = b64 else { continue };
        if !wanted(&key) {
            continue;
        }
        // The decoder's error names the offending symbol: never pass it on.
        let value = base64::engine::general_purpose::STANDARD.decode(b64.trim()).map_err(|_| {
            anyhow::anyhow!(
                "data key {key:?} of Secret {}/{} is not valid base64",
                metadata.namespace,
                metadata.name
            )
        })?;
        let push = |out: &mut Parsed, key: String, value: Vec<u8>| {
            out.values.push(SecretValue {
                namespace: metadata.namespace.clone(),
                name: metadata.name.clone(),
                key,
                value,
            })
        };
        let docker = match (ty.as_str(), key.as_str()) {
            ("kubernetes.io/dockerconfigjson", ".dockerconfigjson") => Some(true),
            ("kubernetes.io/dockercfg", ".dockercfg") => Some(false),
            _ => None,
        };
        if let Some(has_auths) = docker {
            match docker_credentials(&value, has_auths) {
                Some(creds) => {
                    for (reg, field, v) in creds {
                        push(out, format!("{key}/{reg}/{field}"), v.into_bytes());
                    }
                }
                None => out.unparsable_docker_configs += 1,
            }
        }
        push(out, key, value);
    }
    Ok(())
}

/// A pod as the API server lists it (`kubectl get pods -A -o json`): who it is, where it
/// runs, and whether its status says it has a sandbox on its node. Names are kept only in
/// the shapes the API server allows (DNS names): anything else reads as `<invalid>`, so
/// no other text of the file can reach a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiPod {
    /// `metadata.uid`.
    pub uid: String,
    /// For a mirror pod, the uid kubelet knows its static pod by (the
    /// `kubernetes.io/config.mirror` annotation): the name of its pod dir.
    pub mirror_of: Option<String>,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `spec.nodeName` (empty while unscheduled).
    pub node: String,
    /// `status.phase` (`Pending`, `Running`, `Succeeded`, `Failed`, `Unknown`; else empty).
    pub phase: &'static str,
    /// Its status says its sandbox exists: `Running`, or `Pending` with a container
    /// started or `PodReadyToStartContainers` true. A pod being deleted does not count
    /// (its sandbox may be going).
    pub has_sandbox: bool,
}

/// What the API server's list says, and when it was taken at the latest.
#[derive(Clone, Debug, Default)]
pub struct PodList {
    /// The pods.
    pub pods: Vec<ApiPod>,
    /// The newest time the list records (a pod's creation or start, a condition's
    /// transition, a field manager's write), Unix seconds: the list was taken no earlier.
    pub newest: Option<i64>,
}

impl ApiPod {
    /// `<namespace>/<name>`.
    pub fn pod_ref(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// True when `uid` (a pod dir's name, a sandbox's uid) is this pod's.
    pub fn is(&self, uid: &str) -> bool {
        self.uid == uid || self.mirror_of.as_deref() == Some(uid)
    }
}

/// `s` when it has the shape of a Kubernetes object or node name (a DNS subdomain: at most
/// 253 lowercase letters, digits, `-` and `.`), else `<invalid>`.
pub fn dns_name(s: &str) -> String {
    let ok = !s.is_empty()
        && s.len() <= 253
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
    if ok {
        s.to_owned()
    } else {
        "<invalid>".to_owned()
    }
}

#[derive(Deserialize)]
struct PodDoc {
    kind: Option<String>,
    #[serde(default)]
    items: Vec<PodObject>,
    #[serde(default)]
    metadata: ListMeta,
}

#[derive(Deserialize, Default)]
struct ListMeta {
    #[serde(rename = "continue", default)]
    more: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct PodObject {
    kind: Option<String>,
    #[serde(default)]
    metadata: PodMeta,
    #[serde(default)]
    spec: PodSpec,
    #[serde(default)]
    status: PodStatus,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct PodMeta {
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    name: String,
    uid: Option<String>,
    creation_timestamp: Option<String>,
    deletion_timestamp: Option<String>,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
    #[serde(default)]
    managed_fields: Vec<Timed>,
}

#[derive(Deserialize, Default)]
struct Timed {
    time: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct PodSpec {
    #[serde(default)]
    node_name: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct PodStatus {
    #[serde(default)]
    phase: String,
    start_time: Option<String>,
    #[serde(default)]
    conditions: Vec<Condition>,
    #[serde(default)]
    container_statuses: Vec<ContainerStatus>,
    #[serde(default)]
    init_container_statuses: Vec<ContainerStatus>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Condition {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    status: String,
    last_transition_time: Option<String>,
}

#[derive(Deserialize, Default)]
struct ContainerStatus {
    #[serde(default)]
    state: BTreeMap<String, serde::de::IgnoredAny>,
}

/// Unix seconds of an RFC 3339 time as the API server writes it.
fn unix_time(s: &str) -> Option<i64> {
    let t = humantime::parse_rfc3339_weak(s).ok()?;
    let secs = t.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs();
    i64::try_from(secs).ok()
}

/// Parses the API server's list of pods: what `kubectl get pods -A -o json` prints (a
/// `List` or `PodList`), whole: a single `Pod`, or one page of a list that says it goes
/// on (`metadata.continue`), is refused, as is a pod without a uid. Errors carry no input
/// text.
pub fn parse_pods(input: &[u8]) -> Result<PodList> {
    let doc: PodDoc = serde_json::from_slice(input).map_err(|e| malformed(&e))?;
    match doc.kind.as_deref() {
        Some("List") | Some("PodList") => {}
        Some("Pod") => bail!("a single Pod is not the API server's list of pods: give what `kubectl get pods -A -o json` prints"),
        Some(_) => bail!("expected a List of Pods, got another kind"),
        None => bail!("expected a List of Pods: no \"kind\" field"),
    }
    if !doc.metadata.more.is_empty() {
        bail!("the list is one page of more (metadata.continue is set): give the whole list");
    }
    let mut list = PodList::default();
    for (i, o) in doc.items.into_iter().enumerate() {
        if o.kind.as_deref().is_some_and(|k| k != "Pod") {
            bail!("item {i} of the list is not a Pod");
        }
        let Some(uid) = o.metadata.uid.filter(|u| !u.is_empty()) else {
            bail!("item {i} of the list has no metadata.uid");
        };
        let s = &o.status;
        let started = s
            .container_statuses
            .iter()
            .chain(&s.init_container_statuses)
            .any(|c| c.state.contains_key("running") || c.state.contains_key("terminated"));
        let ready_to_start = s
            .conditions
            .iter()
            .any(|c| c.kind == "PodReadyToStartContainers" && c.status == "True");
        let phase = ["Pending", "Running", "Succeeded", "Failed", "Unknown"]
            .into_iter()
            .find(|p| *p == s.phase)
            .unwrap_or("");
        let has_sandbox = o.metadata.deletion_timestamp.is_none()
            && match phase {
                "Running" => true,
                "Pending" => started || ready_to_start,
                _ => false,
            };
        let times = [&o.metadata.creation_timestamp, &s.start_time]
            .into_iter()
            .chain(s.conditions.iter().map(|c| &c.last_transition_time))
            .chain(o.metadata.managed_fields.iter().map(|m| &m.time));
        for t in times.flatten().filter_map(|t| unix_time(t)) {
            list.newest = Some(list.newest.map_or(t, |n| n.max(t)));
        }
        list.pods.push(ApiPod {
            uid,
            mirror_of: o.metadata.annotations.get("kubernetes.io/config.mirror").cloned(),
            namespace: dns_name(&o.metadata.namespace),
            name: dns_name(&o.metadata.name),
            node: o.spec.node_name,
            phase,
            has_sandbox,
        });
    }
    Ok(list)
}

/// The `auth`, `password` and `identitytoken` strings of every registry in a docker config
/// (`{"auths": {...}}` for `.dockerconfigjson`, the bare map for legacy `.dockercfg`).
fn docker_credentials(
    value: &[u8],
    has_auths: bool,
) -> Option<Vec<(String, &'static str, String)>> {
    let json: serde_json::Value = serde_json::from_slice(value).ok()?;
    let registries = if has_auths { json.get("auths")? } else { &json };
    let mut out = Vec::new();
    for (reg, entry) in registries.as_object()? {
        for field in ["auth", "password", "identitytoken"] {
            if let Some(s) = entry.get(field).and_then(|v| v.as_str()) {
                if !s.is_empty() {
                    out.push((reg.clone(), field, s.to_owned()));
                }
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    fn keys(p: &Parsed) -> Vec<String> {
        p.values.iter().map(|v| format!("{}:{}", v.secret_ref(), v.key)).collect()
    }

    #[test]
    fn list_with_types_selects_secret_keys_only() {
        let dcj = format!(
            r#"{{"auths":{{"reg.example":{{"username":"u","password":"pw-{0}","auth":"{1}"}}}}}}"#,
            "x".repeat(20),
            b64("u:pw")
        );
        let doc = format!(
            r#"{{"kind":"List","items":[
              {{"kind":"Secret","metadata":{{"namespace":"a","name":"tls"}},"type":"kubernetes.io/tls","data":{{"tls.crt":"{0}","tls.key":"{0}"}}}},
              {{"kind":"Secret","metadata":{{"namespace":"a","name":"ba"}},"type":"kubernetes.io/basic-auth","data":{{"username":"{0}","password":"{0}"}}}},
              {{"kind":"Secret","metadata":{{"namespace":"a","name":"sa"}},"type":"kubernetes.io/service-account-token","data":{{"token":"{0}","ca.crt":"{0}","namespace":"{0}"}}}},
              {{"kind":"Secret","metadata":{{"namespace":"a","name":"ssh"}},"type":"kubernetes.io/ssh-auth","data":{{"ssh-privatekey":"{0}","known_hosts":"{0}"}}}},
              {{"kind":"Secret","metadata":{{"namespace":"a","name":"op"}},"type":"Opaque","data":{{"k1":"{0}","k2":"{0}"}},"stringData":{{"k3":"v"}}}},
              {{"kind":"Secret","metadata":{{"namespace":"a","name":"reg"}},"type":"kubernetes.io/dockerconfigjson","data":{{".dockerconfigjson":"{1}"}}}}
            ]}}"#,
            b64("value-value-value"),
            b64(&dcj)
        );
        let p = parse(doc.as_bytes()).unwrap();
        assert_eq!(p.secrets, 6);
        assert_eq!(
            keys(&p),
            [
                "a/tls:tls.key",
                "a/ba:password",
                "a/sa:token",
                "a/ssh:ssh-privatekey",
                "a/op:k1",
                "a/op:k2",
                "a/reg:.dockerconfigjson/reg.example/auth",
                "a/reg:.dockerconfigjson/reg.example/password",
                "a/reg:.dockerconfigjson",
            ]
        );
    }

    #[test]
    fn single_secret_and_legacy_dockercfg() {
        let cfg =
            format!(r#"{{"r.example":{{"auth":"{}","identitytoken":"tok-tok-tok"}}}}"#, b64("a:b"));
        let doc = format!(
            r#"{{"kind":"Secret","metadata":{{"namespace":"n","name":"s"}},"type":"kubernetes.io/dockercfg","data":{{".dockercfg":"{}"}}}}"#,
            b64(&cfg)
        );
        let p = parse(doc.as_bytes()).unwrap();
        assert_eq!(
            keys(&p),
            [
                "n/s:.dockercfg/r.example/auth",
                "n/s:.dockercfg/r.example/identitytoken",
                "n/s:.dockercfg"
            ]
        );
    }

    #[test]
    fn errors_never_quote_values() {
        let secretish = "hunter2-hunter2-hunter2";
        for doc in [
            format!(r#"{{"kind":"Secret","data":{{"k":{secretish}}}}}"#),
            format!(r#"{{"kind":"Secret","data":{{"k":"{secretish}!"}}}}"#),
            format!(r#"{{"kind":"Secret","data":["{secretish}"]}}"#),
            format!(r#"{{"kind":"Pod","data":{{"k":"{secretish}"}}"#),
            r#"{"kind":"Secret","data":{"k":"aHVudGVyMi1odW50ZXIy!"}}"#.to_owned(),
        ] {
            let e = format!("{:#}", parse(doc.as_bytes()).unwrap_err());
            assert!(!e.contains("hunter2") && !e.contains("symbol"), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn rejects_non_secret_documents() {
        assert!(parse(br#"{"kind":"Pod"}"#).is_err());
        assert!(parse(b"[]").is_err());
        assert!(parse(b"").is_err());
    }
}
