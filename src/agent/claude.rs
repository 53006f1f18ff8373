//! Claude Code in headless mode as the agent (in progress).

use crate::config::{Policy, Workspace};

use super::{AgentReport, TurnContext};

pub struct ClaudeAgent {
    pub command: String,
}

impl ClaudeAgent {
    pub fn new(policy: &Policy, _ws: &Workspace) -> ClaudeAgent {
        ClaudeAgent { command: policy.agent.command.clone() }
    }

    pub fn preflight(&self) -> Result<(), String> {
        Err("the claude agent is not built yet; use --agent builtin".into())
    }

    pub async fn propose(
        &mut self,
        _ctx: &TurnContext<'_>,
        _on_tool: &mut (dyn FnMut(&str, &str) + Send),
    ) -> AgentReport {
        AgentReport { failure: Some("not built".into()), ..Default::default() }
    }
}
