//! `report.json`: the [`RunReport`] itself, pretty-printed.

use super::model::RunReport;

/// Renders the run as pretty JSON with a trailing newline. Non-finite numbers
/// (NaN, ±inf) become `null`, as serde_json writes them.
pub fn render_json(r: &RunReport) -> String {
    // A RunReport has only string keys and plain values, so serialising
    // cannot fail; the fallback keeps this function total all the same.
    let mut s = serde_json::to_string_pretty(r).unwrap_or_else(|e| {
        serde_json::json!({ "schema_version": r.schema_version, "error": e.to_string() })
            .to_string()
    });
    s.push('\n');
    s
}
