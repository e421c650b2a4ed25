//! The built-in rule table. (Stub: filled in by the rule-table work.)

use super::RuleSpec;

/// Every built-in rule, in the order `kresidue rules` lists them.
pub static RULES: &[RuleSpec] = &[];
