//! What the loop says while it runs. The loop only emits these; the run log
//! (`store`) and the terminal view (`cli::view`) listen.

use serde::{Deserialize, Serialize};

use crate::turn::{AgentInfo, TurnRow};

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    RunStarted {
        run_id: String,
        project: String,
        agent: String,
        policy: String,
        world_size: u32,
    },
    RunResumed {
        run_id: String,
        completed_turns: u32,
    },
    /// baseline, agent, measuring, deciding, final.
    Phase {
        phase: String,
        turn: Option<u32>,
        detail: String,
    },
    BaselineMeasured {
        samples: Vec<f64>,
        median_sps: f64,
        data_wait_share: Option<f64>,
        ceiling_sps: Option<f64>,
        cpu_count: Option<u32>,
        device: Option<String>,
        torch_version: Option<String>,
    },
    /// Short epochs: every run times one whole epoch (`steps` batches)
    /// instead of the configured steps, which held no epoch start.
    WindowWidened {
        configured: u32,
        steps: u32,
    },
    /// The command ended before a whole epoch after the warm-up: runs time
    /// the configured steps again.
    WindowNarrowed {
        configured: u32,
        steps: u32,
    },
    /// The baseline's profiled run crashed, timed out or gave no table: the
    /// baseline goes on with its throughput runs, without the table.
    ProfileUnavailable {
        reason: String,
    },
    /// data_wait is already a small share: DataLoader tuning cannot help much.
    LowDataWait {
        share: f64,
        advice: Vec<String>,
    },
    TurnStarted {
        turn: u32,
        /// The estimate of the time the run has left, as the turn starts
        /// (absent in logs written before it, and before any run was timed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        time_left: Option<TimeLeft>,
    },
    /// A tool call the agent made, live from its event stream.
    AgentTool {
        turn: u32,
        tool: String,
        input: String,
    },
    AgentFinished {
        turn: u32,
        info: AgentInfo,
        ok: bool,
        summary: String,
    },
    Measured {
        turn: u32,
        role: String,
        pair: u32,
        samples_per_sec: f64,
    },
    /// One run of `tuneloop bench --aa`: the project against itself, in
    /// interleaved pairs (no turn).
    CalibrationRun {
        role: String,
        pair: u32,
        samples_per_sec: f64,
    },
    TurnDecided {
        row: TurnRow,
    },
    Stopped {
        reason: String,
    },
    FinalMeasured {
        baseline_samples: Vec<f64>,
        best_samples: Vec<f64>,
        speedup: f64,
        ci: [f64; 2],
    },
    Warning {
        message: String,
    },
    /// Other processes keep a busy share of the machine: the loop waits up
    /// to `limit_s` (`[decision] busy_wait_s`) before its next pair.
    MachineBusy {
        turn: Option<u32>,
        others: f64,
        cores: f64,
        limit_s: u64,
    },
    /// The wait ended: `quiet`, or the limit passed and the loop goes on.
    MachineWaited {
        turn: Option<u32>,
        waited_s: f64,
        quiet: bool,
    },
    /// A pair left out: one of its runs saw clearly more load from others.
    PairSetAside {
        turn: Option<u32>,
        pair: u32,
        candidate_others: Option<f64>,
        incumbent_others: Option<f64>,
    },
    /// A first comparison's runs saw load and its call is open at `pairs`
    /// pairs with the median (`median`) still reaching 1 + min_gain: it
    /// measures up to `up_to` pairs (`[decision] max_repeats_beside_load`).
    PairsAdded {
        turn: Option<u32>,
        pairs: u32,
        up_to: u32,
        median: f64,
    },
    ReportWritten {
        path: String,
    },
}

/// An estimate of the time a run has left (seconds), made at a turn's
/// start: the turns the stop rule still allows at the run's pace so far,
/// then the final comparison (and, in command mode, the whole-command
/// rounds). The run may stop sooner: both figures lean high.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq)]
pub struct TimeLeft {
    /// Every turn left at the run's typical runs a turn.
    pub about_s: f64,
    /// Every turn left at the most runs a turn can take.
    pub at_most_s: f64,
    /// Turns the stop rule still allows, this one included.
    pub turns_left: u32,
    /// The median seconds of one bench process so far.
    pub run_s: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_start_logged_before_the_estimate_reads_back_and_none_is_not_written() {
        let old: Event = serde_json::from_str(r#"{"event":"turn_started","turn":3}"#).unwrap();
        assert_eq!(
            old,
            Event::TurnStarted {
                turn: 3,
                time_left: None
            }
        );
        assert_eq!(
            serde_json::to_string(&old).unwrap(),
            r#"{"event":"turn_started","turn":3}"#
        );
        let new = Event::TurnStarted {
            turn: 4,
            time_left: Some(TimeLeft {
                about_s: 120.0,
                at_most_s: 300.5,
                turns_left: 7,
                run_s: 4.5,
            }),
        };
        let line = serde_json::to_string(&new).unwrap();
        assert!(
            line.contains(
                r#""time_left":{"about_s":120.0,"at_most_s":300.5,"turns_left":7,"run_s":4.5}"#
            ),
            "{line}"
        );
        assert_eq!(serde_json::from_str::<Event>(&line).unwrap(), new);
    }
}
