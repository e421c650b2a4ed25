//! Built-in rules: generic assignments and HTTP credentials, in the conventions of `src/rules/table.rs`.

use crate::rules::RuleSpec;

/// This family's rules, in the order `kresidue rules` lists them.
pub(super) const RULES: &[RuleSpec] = &[];
