//! Built-in rules: cloud, registry and observability services, in the conventions of `src/rules/table.rs`.

use crate::rules::RuleSpec;

/// This family's rules, in the order `kresidue rules` lists them.
pub(super) const RULES: &[RuleSpec] = &[];
