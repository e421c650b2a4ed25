//! Generated examples for rules. (Stub: filled in by the rule-table work.)

/// Renders an example template into bytes, deterministically for a given `seed`.
pub fn render(template: &str, _seed: u64) -> Vec<u8> {
    template.as_bytes().to_vec()
}
