//! JWT insight: what a JSON Web Token found on disk says about itself — whether it is a
//! Kubernetes service-account token, who it names, and whether `exp` has passed.
//!
//! [`decode`] reads the bytes a rule matched, which are hostile file content, and never
//! verifies a signature (the signing key is not on the node, and residue matters whether or
//! not the token is still valid). It accepts exactly `header.payload.signature`, each part
//! base64url (`=` padding tolerated), the header and the payload JSON objects, the header
//! naming its `alg` as a string; the signature may be empty only when `alg` is `none`.
//! Anything else — and any input longer than [`MAX_TOKEN_LEN`] — is not a JWT and gives
//! `None`. Nothing here panics on any input, and memory use is bounded by that cap.
//!
//! The [`JwtInsight`] holds claims only: never the signature nor any part of the raw token.
//! Anyone who can write a file can write a token, so a claim is shown only in the shape it
//! is meant to have, and any other is withheld (named in [`JwtInsight::withheld`]):
//! - `sub`: `system:serviceaccount:<namespace>:<name>`, the namespace a DNS label, the name
//!   a DNS subdomain (RFC 1123, lowercase);
//! - `iss`: `kubernetes/serviceaccount`, or an `https://` URL of a host name (a port and a
//!   path of URL characters allowed);
//! - each `aud`: such a URL, or a DNS subdomain (`vault`, `sts.amazonaws.com`);
//! - the service account's namespace, name and pod name: a DNS label, DNS subdomains.
//!
//! Every shown string is printable ASCII of at most [`MAX_CLAIM_CHARS`] characters. The
//! scan also withholds a claim that holds a fingerprinted value ([`JwtInsight::withhold`]).
//!
//! What kind a token is ([`JwtKind`]):
//! - `legacy-service-account`: `iss` is `kubernetes/serviceaccount` (the token of a
//!   `kubernetes.io/service-account-token` Secret);
//! - `bound-service-account`: otherwise, when the payload has a `kubernetes.io` object
//!   claim with a `serviceaccount` object (projected and TokenRequest tokens), or `sub`
//!   starts with `system:serviceaccount:`;
//! - `other`: any other JWT.
//!
//! Severity of a token as material ([`JwtInsight::severity`]); "passed" means `exp <= now`,
//! and an `exp` that is not a number counts as absent:
//!
//! | kind | `exp` | severity |
//! |---|---|---|
//! | service-account token (legacy or bound) | absent (never expires) | critical |
//! | service-account token (legacy or bound) | in the future | high |
//! | service-account token (legacy or bound) | passed | low |
//! | other JWT | absent or in the future | medium |
//! | other JWT | passed | low |

use crate::finding::{JwtInsight, JwtKind};
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine as _;
use serde_json::{Map, Value};

/// Longest input [`decode`] looks at; longer input is not a JWT. Real service-account
/// tokens are about 1 KiB; OIDC tokens with many claims stay well under this.
pub const MAX_TOKEN_LEN: usize = 64 * 1024;

/// Longest string, in characters, an [`JwtInsight`] keeps from a claim.
pub const MAX_CLAIM_CHARS: usize = 256;

/// Most audiences an [`JwtInsight`] keeps.
pub const MAX_AUDIENCES: usize = 16;

/// The `iss` of legacy, secret-based service-account tokens.
pub const LEGACY_ISSUER: &str = "kubernetes/serviceaccount";

/// The `sub` prefix of service-account tokens: `system:serviceaccount:<ns>:<name>`.
const SA_SUBJECT_PREFIX: &str = "system:serviceaccount:";

/// base64url, with or without canonical padding.
const BASE64URL: GeneralPurpose = GeneralPurpose::new(
    &alphabet::URL_SAFE,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        // A scanner takes what a lenient verifier would: non-zero bits after the last
        // whole byte (a hand-made or truncated-then-padded signature) do not make a token
        // harmless.
        .with_decode_allow_trailing_bits(true),
);

/// Reads the claims of a decoded payload; `now` is seconds since the epoch.
fn from_claims(claims: &Map<String, Value>, now: i64) -> JwtInsight {
    let issuer = str_claim(claims, "iss");
    let subject = str_claim(claims, "sub");
    let k8s = claims.get("kubernetes.io").and_then(Value::as_object);
    let k8s_sa = k8s.and_then(|k| k.get("serviceaccount")).and_then(Value::as_object);

    let kind = if issuer == Some(LEGACY_ISSUER) {
        JwtKind::LegacyServiceAccount
    } else if k8s_sa.is_some() || subject.is_some_and(|s| s.starts_with(SA_SUBJECT_PREFIX)) {
        JwtKind::BoundServiceAccount
    } else {
        JwtKind::Other
    };

    let (mut namespace, mut service_account, mut pod_name) = (None, None, None);
    match kind {
        JwtKind::LegacyServiceAccount => {
            namespace = str_claim(claims, "kubernetes.io/serviceaccount/namespace");
            service_account =
                str_claim(claims, "kubernetes.io/serviceaccount/service-account.name");
        }
        JwtKind::BoundServiceAccount => {
            namespace = k8s.and_then(|k| str_claim(k, "namespace"));
            service_account = k8s_sa.and_then(|sa| str_claim(sa, "name"));
            pod_name = k8s
                .and_then(|k| k.get("pod"))
                .and_then(Value::as_object)
                .and_then(|pod| str_claim(pod, "name"));
        }
        JwtKind::Other => {}
    }
    if kind.is_service_account() {
        if let Some((ns, name)) = subject.and_then(parse_sa_subject) {
            namespace = namespace.or(Some(ns));
            service_account = service_account.or(Some(name));
        }
    }

    let audiences: Vec<&str> = match claims.get("aud") {
        Some(Value::String(s)) => vec![s],
        Some(Value::Array(items)) => {
            items.iter().filter_map(Value::as_str).take(MAX_AUDIENCES).collect()
        }
        _ => Vec::new(),
    };
    let expires_at = claims.get("exp").and_then(numeric_date);

    let mut withheld = Vec::new();
    let mut shaped = |claim: Option<&str>, name: &'static str, shape: fn(&str) -> bool| {
        let claim = claim?;
        if claim.len() <= MAX_CLAIM_CHARS && shape(claim) {
            Some(claim.to_owned())
        } else {
            withheld.push(name);
            None
        }
    };
    let issuer = shaped(issuer, "issuer", |s| s == LEGACY_ISSUER || is_https_url(s));
    let subject = shaped(subject, "subject", |s| parse_sa_subject(s).is_some());
    let audience: Vec<String> = audiences
        .into_iter()
        .filter_map(|a| shaped(Some(a), "audience", |s| is_https_url(s) || is_dns_name(s)))
        .collect();
    let namespace = shaped(namespace, "namespace", is_dns_label);
    let service_account = shaped(service_account, "service_account", is_dns_name);
    let pod_name = shaped(pod_name, "pod_name", is_dns_name);
    withheld.dedup();

    JwtInsight {
        kind,
        issuer,
        subject,
        audience,
        expires_at,
        issued_at: claims.get("iat").and_then(numeric_date),
        expired: expires_at.map(|exp| exp <= now),
        namespace,
        service_account,
        pod_name,
        withheld,
    }
}

/// Decodes `token` without verifying it; `now` (seconds since the epoch) decides whether it
/// expired. `None` when `token` is not a JWT (see the module docs for what is accepted).
pub fn decode(token: &[u8], now: i64) -> Option<JwtInsight> {
    if token.len() > MAX_TOKEN_LEN {
        return None;
    }
    let mut parts = token.split(|&b| b == b'.');
    let (header, payload, signature) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let header = json_object(header)?;
    let alg = header.get("alg")?.as_str()?;
    if signature.is_empty() {
        if alg != "none" {
            return None;
        }
    } else {
        // Checked for shape only, then dropped: nothing of the signature is kept.
        BASE64URL.decode(signature).ok()?;
    }
    let claims = json_object(payload)?;
    Some(from_claims(&claims, now))
}

/// A base64url part that decodes to a JSON object. serde_json's recursion limit keeps
/// deeply nested input from exhausting the stack.
fn json_object(part: &[u8]) -> Option<Map<String, Value>> {
    let bytes = BASE64URL.decode(part).ok()?;
    match serde_json::from_slice(&bytes).ok()? {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

/// A non-empty string claim, raw (callers clean it before keeping it).
fn str_claim<'a>(claims: &'a Map<String, Value>, name: &str) -> Option<&'a str> {
    claims.get(name).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// A JWT NumericDate: any JSON number, saturated to `i64`; fractions are rounded up so
/// that `exp <= now` holds exactly when the real `exp` has passed.
fn numeric_date(v: &Value) -> Option<i64> {
    let n = v.as_number()?;
    if let Some(i) = n.as_i64() {
        Some(i)
    } else if let Some(u) = n.as_u64() {
        Some(i64::try_from(u).unwrap_or(i64::MAX))
    } else {
        // `as` saturates for out-of-range floats; JSON has no NaN or infinity.
        n.as_f64().filter(|f| f.is_finite()).map(|f| f.ceil() as i64)
    }
}

/// `(namespace, name)` from `system:serviceaccount:<ns>:<name>`, the namespace a DNS
/// label and the name a DNS subdomain (what Kubernetes allows); `None` for anything else.
fn parse_sa_subject(sub: &str) -> Option<(&str, &str)> {
    let (ns, name) = sub.strip_prefix(SA_SUBJECT_PREFIX)?.split_once(':')?;
    (is_dns_label(ns) && is_dns_name(name)).then_some((ns, name))
}

/// An RFC 1123 label as Kubernetes names use it: 1 to 63 of `a-z 0-9 -`, starting and
/// ending with a letter or digit.
fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    (1..=63).contains(&b.len())
        && b.iter().all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// An RFC 1123 subdomain: at most 253 characters, labels joined by dots.
fn is_dns_name(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

/// `https://<host>[:<port>][/<path>]`: the host a DNS name (any case), the port digits,
/// the path made of unreserved URL characters, `/` and `%`.
fn is_https_url(s: &str) -> bool {
    let Some(rest) = s.strip_prefix("https://") else { return false };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let (host, port) = match authority.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (authority, None),
    };
    is_dns_name(&host.to_ascii_lowercase())
        && port.is_none_or(|p| (1..=5).contains(&p.len()) && p.bytes().all(|c| c.is_ascii_digit()))
        && path.bytes().all(|c| c.is_ascii_alphanumeric() || b"-._~/%".contains(&c))
}

#[cfg(test)]
mod tests {

    /// A signature whose last character carries non-zero spare bits (hand-made, or
    /// re-padded) is still a token: the decoder is as lenient as a lenient verifier.
    #[test]
    fn signature_with_trailing_bits_still_decodes() {
        let b64 = |v: &str| URL_SAFE_NO_PAD.encode(v);
        let token = format!(
            "{}.{}.{}",
            b64(r#"{"alg":"RS256"}"#),
            b64(r#"{"sub":"system:serviceaccount:a:b","exp":10}"#),
            "AB" // 12 bits, the last 4 of which are not zero
        );
        let insight = decode(token.as_bytes(), 100).expect("decodes");
        assert_eq!(insight.kind, JwtKind::BoundServiceAccount);
        assert_eq!(insight.expired, Some(true));
    }
    use super::*;
    use crate::finding::Severity;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use proptest::prelude::*;
    use serde_json::json;

    /// A fixed "now" for every test: 2023-11-14T22:13:20Z.
    const NOW: i64 = 1_700_000_000;

    fn b64(bytes: &[u8]) -> String {
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// A generated, meaningless signature (never a real one).
    fn fake_signature() -> String {
        b64(&(0..64u8).map(|i| i.wrapping_mul(37) ^ 0x5a).collect::<Vec<_>>())
    }

    fn token_with(header: &Value, payload: &Value, signature: &str) -> String {
        format!(
            "{}.{}.{signature}",
            b64(header.to_string().as_bytes()),
            b64(payload.to_string().as_bytes())
        )
    }

    /// An RS256-shaped token with `payload` and a generated signature.
    fn token(payload: Value) -> String {
        token_with(&json!({"alg": "RS256", "kid": "test-key-1"}), &payload, &fake_signature())
    }

    fn decode_str(t: &str) -> Option<JwtInsight> {
        decode(t.as_bytes(), NOW)
    }

    fn legacy_payload() -> Value {
        json!({
            "iss": "kubernetes/serviceaccount",
            "kubernetes.io/serviceaccount/namespace": "ci",
            "kubernetes.io/serviceaccount/secret.name": "builder-token-x7k2p",
            "kubernetes.io/serviceaccount/service-account.name": "builder",
            "kubernetes.io/serviceaccount/service-account.uid": "00000000-0000-4000-8000-000000000001",
            "sub": "system:serviceaccount:ci:builder"
        })
    }

    fn bound_payload(exp: i64) -> Value {
        json!({
            "aud": ["https://kubernetes.default.svc.cluster.local"],
            "exp": exp,
            "iat": exp - 3607,
            "nbf": exp - 3607,
            "iss": "https://kubernetes.default.svc.cluster.local",
            "kubernetes.io": {
                "namespace": "payments",
                "pod": {"name": "api-5d8f7c9b4-abcde", "uid": "00000000-0000-4000-8000-000000000002"},
                "serviceaccount": {"name": "api", "uid": "00000000-0000-4000-8000-000000000003"}
            },
            "sub": "system:serviceaccount:payments:api"
        })
    }

    #[test]
    fn legacy_token_without_exp_is_critical() {
        let insight = decode_str(&token(legacy_payload())).unwrap();
        assert_eq!(
            insight,
            JwtInsight {
                kind: JwtKind::LegacyServiceAccount,
                issuer: Some("kubernetes/serviceaccount".into()),
                subject: Some("system:serviceaccount:ci:builder".into()),
                audience: vec![],
                expires_at: None,
                issued_at: None,
                expired: None,
                namespace: Some("ci".into()),
                service_account: Some("builder".into()),
                pod_name: None,
                withheld: vec![],
            }
        );
        assert_eq!(insight.severity(), Severity::Critical);
    }

    #[test]
    fn legacy_token_with_exp_is_high_then_low() {
        let mut p = legacy_payload();
        p["exp"] = json!(NOW + 60);
        let live = decode_str(&token(p.clone())).unwrap();
        assert_eq!(
            (live.kind, live.expired, live.severity()),
            (JwtKind::LegacyServiceAccount, Some(false), Severity::High)
        );
        p["exp"] = json!(NOW - 60);
        let dead = decode_str(&token(p)).unwrap();
        assert_eq!((dead.expired, dead.severity()), (Some(true), Severity::Low));
    }

    #[test]
    fn legacy_names_fall_back_to_sub() {
        let t = token(
            json!({"iss": LEGACY_ISSUER, "sub": "system:serviceaccount:kube-system:default"}),
        );
        let insight = decode_str(&t).unwrap();
        assert_eq!(insight.namespace.as_deref(), Some("kube-system"));
        assert_eq!(insight.service_account.as_deref(), Some("default"));
    }

    #[test]
    fn bound_projected_token_valid_is_high() {
        let insight = decode_str(&token(bound_payload(NOW + 3600))).unwrap();
        assert_eq!(
            insight,
            JwtInsight {
                kind: JwtKind::BoundServiceAccount,
                issuer: Some("https://kubernetes.default.svc.cluster.local".into()),
                subject: Some("system:serviceaccount:payments:api".into()),
                audience: vec!["https://kubernetes.default.svc.cluster.local".into()],
                expires_at: Some(NOW + 3600),
                issued_at: Some(NOW - 7),
                expired: Some(false),
                namespace: Some("payments".into()),
                service_account: Some("api".into()),
                pod_name: Some("api-5d8f7c9b4-abcde".into()),
                withheld: vec![],
            }
        );
        assert_eq!(insight.severity(), Severity::High);
    }

    #[test]
    fn bound_projected_token_expired_is_low() {
        let insight = decode_str(&token(bound_payload(NOW - 1))).unwrap();
        assert_eq!(insight.kind, JwtKind::BoundServiceAccount);
        assert_eq!(insight.expired, Some(true));
        assert_eq!(insight.severity(), Severity::Low);
        // exp == now has passed.
        let edge = decode_str(&token(bound_payload(NOW))).unwrap();
        assert_eq!((edge.expired, edge.severity()), (Some(true), Severity::Low));
    }

    #[test]
    fn bound_kind_from_claim_or_sub() {
        // The kubernetes.io claim alone (no sub) makes a bound token.
        let mut p = bound_payload(NOW + 10);
        p.as_object_mut().unwrap().remove("sub");
        let insight = decode_str(&token(p)).unwrap();
        assert_eq!(insight.kind, JwtKind::BoundServiceAccount);
        assert_eq!(insight.service_account.as_deref(), Some("api"));
        // sub alone makes a bound token too; names come from sub.
        let t = token(json!({"iss": "https://oidc.example.test", "exp": NOW + 10,
                             "sub": "system:serviceaccount:team-a:deployer"}));
        let insight = decode_str(&t).unwrap();
        assert_eq!(insight.kind, JwtKind::BoundServiceAccount);
        assert_eq!(insight.namespace.as_deref(), Some("team-a"));
        assert_eq!(insight.service_account.as_deref(), Some("deployer"));
        assert_eq!(insight.pod_name, None);
        // A kubernetes.io claim without a serviceaccount object is not enough.
        let t = token(json!({"kubernetes.io": {"namespace": "x"}, "sub": "alice"}));
        assert_eq!(decode_str(&t).unwrap().kind, JwtKind::Other);
    }

    #[test]
    fn bound_token_without_exp_never_expires_so_is_critical() {
        let mut p = bound_payload(0);
        p.as_object_mut().unwrap().remove("exp");
        let insight = decode_str(&token(p)).unwrap();
        assert_eq!((insight.kind, insight.expired), (JwtKind::BoundServiceAccount, None));
        assert_eq!(insight.severity(), Severity::Critical);
    }

    #[test]
    fn other_jwt_severity() {
        let base = json!({"iss": "https://auth.example.test", "sub": "user-42", "aud": "api"});
        let mut valid = base.clone();
        valid["exp"] = json!(NOW + 3600);
        let insight = decode_str(&token(valid)).unwrap();
        assert_eq!((insight.kind, insight.expired), (JwtKind::Other, Some(false)));
        assert_eq!(insight.severity(), Severity::Medium);
        assert_eq!((insight.namespace, insight.service_account), (None, None));

        let mut expired = base.clone();
        expired["exp"] = json!(NOW - 3600);
        let insight = decode_str(&token(expired)).unwrap();
        assert_eq!((insight.expired, insight.severity()), (Some(true), Severity::Low));

        let insight = decode_str(&token(base)).unwrap();
        assert_eq!((insight.expired, insight.severity()), (None, Severity::Medium));
    }

    #[test]
    fn audience_as_string_or_array() {
        let one = decode_str(&token(json!({"aud": "vault"}))).unwrap();
        assert_eq!(one.audience, vec!["vault".to_owned()]);
        let many = decode_str(&token(json!({"aud": ["a", 7, "b", null, {"c": 1}]}))).unwrap();
        assert_eq!(many.audience, vec!["a".to_owned(), "b".to_owned()]);
        let lots: Vec<String> = (0..1000).map(|i| format!("aud-{i}")).collect();
        let capped = decode_str(&token(json!({"aud": lots}))).unwrap();
        assert_eq!(capped.audience.len(), MAX_AUDIENCES);
        let odd = decode_str(&token(json!({"aud": 12}))).unwrap();
        assert!(odd.audience.is_empty());
    }

    #[test]
    fn exp_forms() {
        let exp = |v: Value| decode_str(&token(json!({"exp": v}))).unwrap();
        assert_eq!(exp(json!(NOW as f64 + 0.5)).expires_at, Some(NOW + 1));
        assert_eq!(exp(json!(NOW as f64 + 0.5)).expired, Some(false));
        assert_eq!(exp(json!(NOW as f64 - 0.5)).expired, Some(true));
        assert_eq!(exp(json!(u64::MAX)).expires_at, Some(i64::MAX));
        assert_eq!(exp(json!(1e300)).expires_at, Some(i64::MAX));
        assert_eq!(exp(json!(-1e300)).expires_at, Some(i64::MIN));
        assert_eq!(exp(json!(-5)).expired, Some(true));
        for absent in [json!("1700000000"), json!(null), json!(true), json!([1]), json!({})] {
            let insight = exp(absent);
            assert_eq!((insight.expires_at, insight.expired), (None, None));
        }
    }

    #[test]
    fn padding_and_unsecured_tokens() {
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256"}"#);
        let padded = |s: String| {
            let pad = (4 - s.len() % 4) % 4;
            s + &"=".repeat(pad)
        };
        let payload = b64(br#"{"sub":"a"}"#);
        let t = format!(
            "{}.{}.{}",
            padded(header.clone()),
            padded(payload.clone()),
            padded(b64(b"sig"))
        );
        assert!(t.contains('='));
        assert_eq!(decode_str(&t).unwrap().withheld, vec!["subject"]);

        let none = b64(br#"{"alg":"none"}"#);
        assert!(decode_str(&format!("{none}.{payload}.")).is_some());
        // An empty signature is only allowed for alg "none".
        assert!(decode_str(&format!("{header}.{payload}.")).is_none());
        assert!(decode_str(&format!("{}.{payload}.", b64(br#"{"alg":"NONE"}"#))).is_none());
    }

    #[test]
    fn garbage_is_not_a_jwt() {
        let h = b64(br#"{"alg":"RS256"}"#);
        let p = b64(br#"{"sub":"a"}"#);
        let s = fake_signature();
        let cases: Vec<String> = vec![
            String::new(),
            "..".into(),
            format!("{h}.{p}"),
            format!("{h}.{p}.{s}.{s}"),
            format!("{h}.{p}.{s}."),
            format!(".{p}.{s}"),
            format!("{h}..{s}"),
            format!("{h}.{p}.{s}!"),
            format!("{h}.{p}.a+b/"),
            format!("{h}.{p}.=={s}"),
            format!("{h}.{p}.{s}==="),
            format!("{h}.{p}.xxxxx"), // length 1 mod 4: never base64
            format!("{h}=x.{p}.{s}"),
            format!("{h}.{}.{s}", b64(b"[1,2,3]")),
            format!("{h}.{}.{s}", b64(b"\"just a string\"")),
            format!("{h}.{}.{s}", b64(b"{\"sub\":")),
            format!("{h}.{}.{s}", b64(b"{}trailing")),
            format!("{}.{p}.{s}", b64(b"[\"alg\"]")),
            format!("{}.{p}.{s}", b64(br#"{"typ":"JWT"}"#)),
            format!("{}.{p}.{s}", b64(br#"{"alg":256}"#)),
            format!("{}.{p}.{s}", b64(b"\xff\xfe{}")),
            format!(" {h}.{p}.{s}"),
        ];
        for case in cases {
            assert_eq!(decode_str(&case), None, "{case:?}");
        }
        assert_eq!(decode(b"\xff.\xfe.\xfd", NOW), None);
    }

    #[test]
    fn huge_and_deep_inputs_are_refused() {
        // Over the cap, even though it is otherwise a well-formed token.
        let big = token(json!({"sub": "a", "pad": "x".repeat(MAX_TOKEN_LEN)}));
        assert!(big.len() > MAX_TOKEN_LEN);
        assert_eq!(decode_str(&big), None);
        assert_eq!(decode(&vec![b'A'; MAX_TOKEN_LEN + 1], NOW), None);
        // Nesting past serde_json's recursion limit, under the size cap: no stack overflow.
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(20_000), "]".repeat(20_000));
        let t = token_with(&json!({"alg": "RS256"}), &json!(null), "c2ln")
            .replace(&b64(b"null"), &b64(deep.as_bytes()));
        assert!(t.len() <= MAX_TOKEN_LEN);
        assert_eq!(decode_str(&t), None);
    }

    #[test]
    fn claims_out_of_shape_are_withheld() {
        let t = token(json!({
            "iss": "evil\u{1b}[2J\u{7}",
            "sub": "system:serviceaccount:ns\u{1b}]0;x\u{7}:sa\r\nname",
            "aud": ["a\u{202E}b", "z\u{200B}w\u{0}", "vault", "https://x.example.test:8443/a%20b"],
            "exp": NOW + 10,
        }));
        let insight = decode_str(&t).unwrap();
        assert_eq!(insight.kind, JwtKind::BoundServiceAccount);
        assert_eq!((&insight.issuer, &insight.subject), (&None, &None));
        assert_eq!((&insight.namespace, &insight.service_account), (&None, &None));
        assert_eq!(insight.audience, vec!["vault", "https://x.example.test:8443/a%20b"]);
        assert_eq!(insight.withheld, vec!["issuer", "subject", "audience"]);

        for (sub, shown) in [
            ("system:serviceaccount:kube-system:default", true),
            ("system:serviceaccount:a:b.c-d", true),
            ("system:serviceaccount:A:b", false),
            ("system:serviceaccount:a:b:c", false),
            ("system:serviceaccount:-a:b", false),
            ("system:serviceaccount:a:", false),
            ("user-42", false),
        ] {
            let insight = decode_str(&token(json!({ "sub": sub }))).unwrap();
            assert_eq!(insight.subject.is_some(), shown, "{sub}");
        }
        for (iss, shown) in [
            ("kubernetes/serviceaccount", true),
            ("https://oidc.eks.eu-west-1.amazonaws.com/id/0A1B2C", true),
            ("https://login.example.test:443/", true),
            ("http://login.example.test", false),
            ("https://user:pw@login.example.test", false),
            ("https://login.example.test/a b", false),
            ("https://login_example.test", false),
            ("https://", false),
        ] {
            let insight = decode_str(&token(json!({ "iss": iss }))).unwrap();
            assert_eq!(insight.issuer.is_some(), shown, "{iss}");
        }
        let long = format!("https://{}.test", "a.".repeat(200));
        assert!(decode_str(&token(json!({ "iss": long }))).unwrap().issuer.is_none());
    }

    #[test]
    fn claims_holding_a_value_are_withheld() {
        let mut insight = decode_str(&token(bound_payload(NOW + 3600))).unwrap();
        insight.withhold(|s| s == "api" || s.contains("svc.cluster"));
        assert_eq!(insight.service_account, None);
        assert_eq!(insight.issuer, None);
        assert!(insight.audience.is_empty());
        assert_eq!(insight.subject.as_deref(), Some("system:serviceaccount:payments:api"));
        assert_eq!(insight.withheld, vec!["issuer", "audience", "service_account"]);
        insight.withhold(|s| s.ends_with(":api"));
        assert_eq!(insight.withheld, vec!["issuer", "subject", "audience", "service_account"]);
    }

    #[test]
    fn insight_holds_nothing_of_the_raw_token() {
        let t = token(bound_payload(NOW + 3600));
        let insight = decode_str(&t).unwrap();
        let out = serde_json::to_string(&insight).unwrap() + &format!("{insight:?}");
        for part in t.split('.') {
            for window in part.as_bytes().windows(12) {
                let w = std::str::from_utf8(window).unwrap();
                assert!(!out.contains(w), "raw token text {w:?} in {out}");
            }
        }
    }

    #[test]
    fn serialization_skips_absent_fields() {
        let insight = decode_str(&token(json!({"iss": "https://x.test"}))).unwrap();
        assert_eq!(
            serde_json::to_value(&insight).unwrap(),
            json!({"kind": "other", "issuer": "https://x.test"})
        );
        let insight = decode_str(&token(json!({"iss": "x y"}))).unwrap();
        assert_eq!(
            serde_json::to_value(&insight).unwrap(),
            json!({"kind": "other", "withheld": ["issuer"]})
        );
        let insight = decode_str(&token(bound_payload(NOW + 5))).unwrap();
        let v = serde_json::to_value(&insight).unwrap();
        assert_eq!(v["kind"], "bound-service-account");
        assert_eq!(v["expires_at"], NOW + 5);
        assert_eq!(v["expired"], false);
        assert_eq!(v["audience"], json!(["https://kubernetes.default.svc.cluster.local"]));
        let legacy = decode_str(&token(legacy_payload())).unwrap();
        assert_eq!(serde_json::to_value(&legacy).unwrap()["kind"], "legacy-service-account");
    }

    fn assert_safe(s: &str) {
        assert!(s.chars().count() <= MAX_CLAIM_CHARS, "{s:?}");
        assert!(s.bytes().all(|b| b.is_ascii_graphic()), "{s:?}");
    }

    proptest! {
        #[test]
        fn never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512),
                                           now in any::<i64>()) {
            let _ = decode(&bytes, now);
        }

        #[test]
        fn never_panics_on_three_base64url_parts(
            t in "[A-Za-z0-9_=-]{0,80}\\.[A-Za-z0-9_=-]{0,80}\\.[A-Za-z0-9_=-]{0,80}",
            now in any::<i64>(),
        ) {
            let _ = decode(t.as_bytes(), now);
        }

        #[test]
        fn never_panics_on_encoded_arbitrary_parts(
            header in proptest::collection::vec(any::<u8>(), 0..128),
            payload in proptest::collection::vec(any::<u8>(), 0..256),
            sig in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let t = format!("{}.{}.{}", b64(&header), b64(&payload), b64(&sig));
            let _ = decode(t.as_bytes(), NOW);
            let t = format!("{}.{}.{}", b64(br#"{"alg":"none"}"#), b64(&payload), b64(&sig));
            let _ = decode(t.as_bytes(), NOW);
        }

        #[test]
        fn claims_are_always_safe_and_severity_follows_exp(
            iss in any::<String>(), sub in any::<String>(), aud in any::<String>(),
            ns in any::<String>(), sa in any::<String>(), exp in any::<i64>(), now in any::<i64>(),
        ) {
            let t = token(json!({"iss": iss, "sub": format!("system:serviceaccount:{sub}"),
                                 "aud": [aud], "exp": exp,
                                 "kubernetes.io": {"namespace": ns, "serviceaccount": {"name": sa}}}));
            let insight = decode(t.as_bytes(), now).unwrap();
            for s in insight.issuer.iter().chain(&insight.subject).chain(&insight.audience)
                .chain(&insight.namespace).chain(&insight.service_account)
            {
                assert_safe(s);
            }
            prop_assert!(insight.kind.is_service_account());
            prop_assert_eq!(insight.expired, Some(exp <= now));
            let want = if exp <= now { Severity::Low } else { Severity::High };
            prop_assert_eq!(insight.severity(), want);
        }
    }
}
