//! A test-only agent for the loop's unit tests: each turn it writes the
//! scripted text of one editable file (or nothing), at a scripted cost, so
//! that a test chooses exactly which change the loop verifies and measures.
//! Past its script it reports nothing left to propose.

use super::{AgentReport, TurnContext};
use crate::turn::AgentInfo;

/// One turn of the script.
#[derive(Clone, Debug)]
pub struct ScriptedTurn {
    /// The editable file written (relative to the project root).
    pub file: String,
    /// Its new text; `None` changes nothing.
    pub text: Option<String>,
    /// What the call is said to have cost.
    pub cost_usd: f64,
}

#[derive(Clone, Debug, Default)]
pub struct ScriptedAgent {
    pub turns: Vec<ScriptedTurn>,
}

impl ScriptedAgent {
    pub fn propose(&mut self, ctx: &TurnContext<'_>) -> AgentReport {
        let mut report = AgentReport {
            info: AgentInfo {
                backend: "scripted".into(),
                ..Default::default()
            },
            ..Default::default()
        };
        let Some(t) = self.turns.get(ctx.turn as usize - 1) else {
            report.exhausted = true;
            report.summary = "script finished".into();
            return report;
        };
        report.info.cost_usd = Some(t.cost_usd);
        if let Some(text) = &t.text {
            if let Err(e) = std::fs::write(ctx.project_root.join(&t.file), text) {
                report.failure = Some(format!("cannot write {}: {e}", t.file));
                return report;
            }
        }
        report.summary = format!("turn {}: wrote {}", ctx.turn, t.file);
        report
    }
}
