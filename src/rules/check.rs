//! Checks a rule match must pass besides its regex. (Stub: filled in by the rule-table work.)

use super::Check;

/// True when `secret` is a well-known placeholder (documentation example keys and the
/// like) that must never be reported.
pub fn is_placeholder(_secret: &[u8]) -> bool {
    false
}

/// True when `secret` passes `check` (`Check::Jwt` is handled by the caller).
pub fn passes(_check: Check, _secret: &[u8]) -> bool {
    true
}
