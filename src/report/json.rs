//! `report.json`: the [`RunReport`] itself, pretty-printed.

use super::model::RunReport;

/// Renders the run as pretty JSON with a trailing newline. Non-finite numbers
/// (NaN, ±inf) become `null`, as serde_json writes them.
pub fn render_json(r: &RunReport) -> String {
    // A RunReport has only string keys and plain values, so serialising
    // cannot fail; the fallback keeps this function total all the same.
    // A multi-agent run (hybrid) also says who made which turn and the cost
    // per point of speed-up; a single-agent run's JSON is the model alone.
    let value = match (serde_json::to_value(r), super::agents::json_fields(r)) {
        (Ok(serde_json::Value::Object(mut m)), Some(serde_json::Value::Object(extra))) => {
            m.extend(extra);
            Some(serde_json::Value::Object(m))
        }
        _ => None,
    };
    if let Some(v) = value {
        if let Ok(mut s) = serde_json::to_string_pretty(&v) {
            s.push('\n');
            return s;
        }
    }
    let mut s = serde_json::to_string_pretty(r).unwrap_or_else(|e| {
        serde_json::json!({ "schema_version": r.schema_version, "error": e.to_string() })
            .to_string()
    });
    s.push('\n');
    s
}
