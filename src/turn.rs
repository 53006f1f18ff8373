//! What one turn decided: the [`Decision`], the agent call's [`AgentInfo`],
//! and the [`TurnRow`] that `turns/NN/decision.json` holds. Domain types of
//! the loop, the agents and the event log; the report renders them (and
//! re-exports them as `report::TurnRow` etc.), it does not own them.

use serde::{Deserialize, Serialize};

/// What happened to one proposed change.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Measured faster by the decision rule; the change stays.
    Kept,
    /// A cheaper setting (fewer workers, a setting dropped) measured no more
    /// than min_gain slower by the equivalence rule; the change stays.
    KeptCheaper,
    /// Measured, not faster by the rule; restored byte for byte.
    Reverted,
    /// Failed verification (more than one change, a non-editable file, data changed, ...).
    Rejected,
    /// The agent or the bench failed; restored.
    Failed,
    /// The agent ended without changing any file.
    NoChange,
}

impl Decision {
    /// Whether the change stays (faster, or cheaper and as fast).
    pub fn is_kept(self) -> bool {
        matches!(self, Decision::Kept | Decision::KeptCheaper)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Kept => "kept",
            Decision::KeptCheaper => "kept_cheaper",
            Decision::Reverted => "reverted",
            Decision::Rejected => "rejected",
            Decision::Failed => "failed",
            Decision::NoChange => "no_change",
        }
    }
}

/// What the agent call cost and how it ended.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct AgentInfo {
    pub backend: String,
    pub num_turns: Option<u32>,
    pub cost_usd: Option<f64>,
    pub exit_code: Option<i32>,
    pub duration_ms: u64,
}

/// What the turns' agent calls cost, USD. (A float sum of nothing is
/// `-0.0`, which prints as "$-0.00": start from `0.0`.)
pub fn total_cost_usd(rows: &[TurnRow]) -> f64 {
    rows.iter()
        .filter_map(|r| r.agent.cost_usd)
        .fold(0.0, |a, c| a + c)
}

/// One row of the before/after table.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct TurnRow {
    pub turn: u32,
    /// One line, e.g. "num_workers 0 → 4".
    pub change: String,
    pub file: Option<String>,
    /// Incumbent's median samples/sec in this turn's measurement.
    pub before_sps: Option<f64>,
    /// Candidate's median samples/sec in this turn's measurement.
    pub after_sps: Option<f64>,
    /// Median of the paired ratios candidate/incumbent.
    pub ratio: Option<f64>,
    /// Confidence interval of the ratio, [low, high].
    pub ratio_ci: Option<[f64; 2]>,
    /// Number of bench processes this decision took (candidate + incumbent).
    pub runs: u32,
    pub decision: Decision,
    pub reason: String,
    pub agent: AgentInfo,
    /// Every candidate run's samples/sec (for the plot's spread).
    #[serde(default)]
    pub candidate_samples: Vec<f64>,
    /// Every incumbent run's samples/sec in this turn.
    #[serde(default)]
    pub incumbent_samples: Vec<f64>,
    /// data_wait share of step time of the candidate (median), when measured.
    #[serde(default)]
    pub data_wait_share: Option<f64>,
    /// A kept change measured again before it stays (a compute change, or
    /// one kept while other processes took cores): whether it held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmation: Option<Box<Confirmation>>,
}

/// A kept change's second comparison, on a machine as quiet as it gets:
/// candidate against the incumbent without it, in fresh interleaved pairs.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Confirmation {
    /// Why it was measured again: "a compute change" or "kept while other
    /// processes took cores".
    pub why: String,
    /// Median paired ratio and its interval in the second comparison.
    pub ratio: f64,
    pub ci: [f64; 2],
    pub pairs: u32,
    /// Whether it held ([`crate::bench::stats::confirmed`]: kept again, or
    /// passing at the cap at 90%; beside load, not
    /// [`crate::bench::stats::refuted`]); if not, the change was reverted.
    pub held: bool,
    /// The ratio it was first kept at.
    pub first_ratio: f64,
    /// Whether the second comparison's own runs saw load too (no quiet
    /// machine to be had): then only a refutation reverts the change.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub under_load: bool,
}
