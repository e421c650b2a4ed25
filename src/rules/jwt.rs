//! JWT insight. (Stub: filled in by the JWT work.)

use crate::finding::Severity;
use serde::Serialize;

/// What kind of token a JWT is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A legacy, secret-based Kubernetes service-account token (`iss` is
    /// `kubernetes/serviceaccount`, usually no `exp`).
    LegacyServiceAccount,
    /// A bound (projected, TokenRequest) Kubernetes service-account token.
    BoundServiceAccount,
    /// Any other JWT.
    Other,
}

/// What a JWT says about itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Insight {
    /// The kind of token.
    pub kind: Kind,
    /// `iss`.
    pub issuer: Option<String>,
}

impl Insight {
    /// The severity of the token as material.
    pub fn severity(&self) -> Severity {
        Severity::High
    }
}

/// Decodes `token` (never verified); `None` when it is not a JWT.
pub fn decode(_token: &[u8], _now: i64) -> Option<Insight> {
    None
}
