//! Agents: whatever proposes and applies ONE change per turn to the editable
//! files. `builtin` is offline and deterministic; `claude` drives Claude Code in
//! headless mode; `hybrid` lets the builtin agent settle the knobs and Claude
//! Code take the structural turns after. `evidence` is what both read from a
//! measurement. The loop never trusts an agent's word: it verifies the files
//! afterwards (`verify`) and measures.

pub mod assets;
pub mod builtin;
pub mod cheaper;
pub mod claude;
pub mod compute_turn;
pub mod evidence;
pub mod hybrid;
#[cfg(test)]
pub mod scripted;
pub mod threaded;

use std::path::{Path, PathBuf};

use crate::bench::Measurement;
use crate::config::{Policy, Workspace};
use crate::process::Interrupt;
use crate::turn::{AgentInfo, TurnRow};

/// What an agent is told at the start of a turn.
pub struct TurnContext<'a> {
    pub turn: u32,
    /// The run's iteration limit (the policy's, or `--iterations`).
    pub max_iterations: u32,
    pub ws: &'a Workspace,
    pub policy: &'a Policy,
    pub project_root: &'a Path,
    /// The incumbent's latest figures (data_wait share, loader settings, CPU count).
    pub incumbent: &'a Measurement,
    /// The incumbent's median samples/sec.
    pub incumbent_sps: f64,
    /// The baseline's ceiling: samples/sec of the training step alone.
    pub ceiling_sps: Option<f64>,
    pub history: &'a [TurnRow],
    /// The profiler table of the incumbent (may be empty).
    pub profile_table: &'a str,
    /// The baseline's profiled step by part, on CPU (what a compute knob
    /// acts on: [`crate::compute::part_can_win`]).
    pub step_parts: Option<crate::bench::StepParts>,
    /// `runs/<id>/turns/NN/`, where the agent's records go.
    pub turn_dir: PathBuf,
    pub interrupt: &'a Interrupt,
    /// The streak of turns not kept ended the climb: only cheaper neighbours
    /// of the incumbent are left to propose.
    pub only_cheaper: bool,
}

impl TurnContext<'_> {
    /// The step alone and what the cores can feed, from the incumbent's figures.
    pub fn limits(&self) -> crate::bench::limits::ThroughputLimits {
        crate::bench::limits::ThroughputLimits::of(
            self.ceiling_sps,
            std::slice::from_ref(self.incumbent),
            self.incumbent_sps,
        )
    }
}

/// How an agent call ended.
#[derive(Clone, Debug, Default)]
pub struct AgentReport {
    pub info: AgentInfo,
    /// `None` when the call succeeded; else the reason, in the agent's words.
    pub failure: Option<String>,
    /// What the agent says it did.
    pub summary: String,
    /// The agent has nothing left to propose (builtin only).
    pub exhausted: bool,
    /// The call was ended by Ctrl-C / SIGTERM.
    pub interrupted: bool,
    /// Every later call would fail the same way (e.g. not logged in): stop the run.
    pub fatal: bool,
    /// With `exhausted`: the run's stop reason, when more can be said than
    /// "candidates exhausted".
    pub stop_note: Option<String>,
}

pub enum Agent {
    Builtin(builtin::BuiltinAgent),
    Claude(claude::ClaudeAgent),
    Hybrid(hybrid::HybridAgent),
    /// The loop's unit tests: a scripted change per turn.
    #[cfg(test)]
    Scripted(scripted::ScriptedAgent),
}

impl Agent {
    pub fn from_policy(policy: &Policy, ws: &Workspace) -> Agent {
        match policy.agent.backend.as_str() {
            "claude" => Agent::Claude(claude::ClaudeAgent::new(policy, ws)),
            "hybrid" => Agent::Hybrid(hybrid::HybridAgent::new(policy, ws)),
            _ => Agent::Builtin(builtin::BuiltinAgent::new(ws)),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Agent::Builtin(_) => "builtin",
            Agent::Claude(_) => "claude",
            Agent::Hybrid(_) => "hybrid",
            #[cfg(test)]
            Agent::Scripted(_) => "scripted",
        }
    }

    /// Whether the agent tries cheaper neighbours of the incumbent after its
    /// climb, which a streak of turns not kept does not cut short.
    pub fn has_cheaper_neighbours(&self) -> bool {
        matches!(self, Agent::Builtin(_))
    }

    /// Whether the agent makes compute-side changes (`[compute] knobs`): the
    /// builtin agent writes them, Claude Code is told which are allowed. A
    /// scripted agent does only what its script says.
    pub fn takes_compute(&self) -> bool {
        match self {
            #[cfg(test)]
            Agent::Scripted(_) => false,
            _ => true,
        }
    }

    /// The builtin agent, alone or as hybrid's first part: the one that
    /// writes compute changes itself.
    pub fn builtin(&self) -> Option<&builtin::BuiltinAgent> {
        match self {
            Agent::Builtin(b) => Some(b),
            Agent::Hybrid(h) => Some(h.builtin()),
            _ => None,
        }
    }

    /// Checks, before the baseline, that the agent can run at all.
    pub fn preflight(&self) -> Result<(), claude::ProgramNotFound> {
        match self {
            Agent::Builtin(_) => Ok(()),
            Agent::Claude(c) => c.preflight(),
            Agent::Hybrid(h) => h.preflight(),
            #[cfg(test)]
            Agent::Scripted(_) => Ok(()),
        }
    }

    /// One turn: propose and apply one change to the editable files.
    /// `on_tool` receives the agent's tool calls as they happen.
    pub async fn propose(
        &mut self,
        ctx: &TurnContext<'_>,
        on_tool: &mut (dyn FnMut(&str, &str) + Send),
    ) -> AgentReport {
        match self {
            Agent::Builtin(b) => b.propose(ctx),
            Agent::Claude(c) => c.propose(ctx, on_tool).await,
            Agent::Hybrid(h) => h.propose(ctx, on_tool).await,
            #[cfg(test)]
            Agent::Scripted(s) => s.propose(ctx),
        }
    }
}
