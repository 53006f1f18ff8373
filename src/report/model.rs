//! The data model of a finished (or interrupted) run, as written to
//! `runs/<id>/report.json`. Renderers in this module read only this.

use serde::{Deserialize, Serialize};

pub const SCHEMA_VERSION: u32 = 1;

// The turn's domain types live with the loop's records; the report model
// re-exports them so renderers (and older paths) keep reading them from here.
pub use crate::turn::{AgentInfo, Decision, TurnRow};

/// The whole run, as `report.json`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct RunReport {
    pub schema_version: u32,
    pub run_id: String,
    pub project: String,
    pub agent: String,
    pub language: String,
    pub started_at: String,
    pub baseline_sps: f64,
    /// Every baseline run's samples/sec.
    #[serde(default)]
    pub baseline_samples: Vec<f64>,
    pub baseline_data_wait_share: Option<f64>,
    pub final_sps: f64,
    pub final_data_wait_share: Option<f64>,
    /// Headline: best state vs baseline measured interleaved at the end.
    pub speedup: f64,
    pub speedup_ci: Option<[f64; 2]>,
    /// How the headline's interval was reached: pairs, width against the
    /// bound, pairs left out for uneven load (absent in older reports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_interval: Option<crate::bench::stats::FinalInterval>,
    /// How far another thread count moved the baseline's losses: what the
    /// numerics guard held later steps of compute changes to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numerics_yardstick: Option<crate::numerics::Yardstick>,
    pub ceiling_sps: Option<f64>,
    /// final_sps / ceiling_sps.
    pub final_share_of_ceiling: Option<f64>,
    pub stop_reason: String,
    pub interrupted: bool,
    pub total_cost_usd: f64,
    pub agent_time_ms: u64,
    pub wall_s: f64,
    /// Bench processes run in all (baseline, turns, final).
    pub bench_runs: u32,
    pub turns: Vec<TurnRow>,
    /// The kept changes as one unified diff (baseline → final).
    pub kept_diff: String,
    /// The machine's data-path limits (`runs/<id>/probe.json`), when the run
    /// was made by a build with the `libtorch` feature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_path: Option<DataPathLimit>,
    /// Command mode: the training loader measured (call site and settings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_loader: Option<String>,
    /// Short epochs: each run timed one whole epoch, not `[bench] steps`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<crate::bench::window::Widened>,
    /// Command mode: where each knob of the measured loader is set (one
    /// line a knob, e.g. "num_workers = args.workers → --workers default=4 (train.py:12)").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub knob_sources: Vec<String>,
    /// The measured loader's knobs no turn could change while data_wait
    /// stayed large (a computed value, a value in a file outside
    /// `[project] editable`): each with why and what the user can do.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_editable_knobs: Vec<crate::edit::knobs::NotEditable>,
    /// The step-alone ceiling and what the cores can feed, which binds, and
    /// the final's share of it (absent in reports written before them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<crate::bench::limits::ThroughputLimits>,
    /// Each state's workers, their memory and the cores it kept busy:
    /// baseline, every measured turn's candidate, final (absent in reports
    /// written before them, and where no run gave those figures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub costs: Option<crate::bench::cost::StateCosts>,
    /// Which parts of the first batches the turns compare (items, order,
    /// structure, bytes), from the baseline's own runs; absent without a
    /// data identity (contract mode, reports written before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_check: Option<crate::judge::DataCheckPlan>,
    /// Why the baseline has no profiler table (its profiled run crashed,
    /// timed out or gave no table); the run went on without it. Absent when
    /// the table was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_unavailable: Option<String>,
    /// Command mode: the command to run from now on, when a kept change is
    /// an argument of `[bench] run` (a knob the command passes, `-j 8`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_command: Option<String>,
    /// The enabled `[compute] knobs` the run ended without trying, each with
    /// why: CUDA only on a CPU job, nothing to act on in the script (the
    /// builtin agent passed it over), or the run stopped first (the
    /// iteration limit, a budget, Ctrl-C). Absent when every one was tried.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compute_not_tried: Vec<crate::compute::NotTried>,
    /// Command mode: the user's command timed whole, baseline against final
    /// in interleaved rounds (start-up and every epoch included), or why it
    /// was not (`[bench] whole_command_s`). Absent when nothing was kept,
    /// outside command mode, and when turned off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whole_command: Option<crate::bench::whole::WholeCommand>,
    /// The cores other processes kept busy while tuneloop measured, and the
    /// turns decided on a busy machine (absent without those figures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_load: Option<crate::bench::load::MachineLoad>,
    /// How much of the wall time was measuring: the throughput runs' timed
    /// steps summed against the session's wall time, and each turn's
    /// seconds (absent in reports written before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<crate::bench::time::TimeSpent>,
}

/// How fast this machine can move the project's batches at all, measured
/// natively by `tuneloop probe` (feature `libtorch`). Bandwidths are GB/s
/// (10^9 bytes copied per second, median of timed repetitions); a ceiling
/// is that bandwidth divided by `bytes_per_sample`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct DataPathLimit {
    /// CUDA seen by libtorch; without it pin_memory cannot matter.
    pub cuda_available: bool,
    /// Host memory copy of a batch-sized tensor.
    pub host_copy_gbps: f64,
    /// Host-to-device copy from ordinary (pageable) memory; CUDA only.
    pub h2d_pageable_gbps: Option<f64>,
    /// Host-to-device copy from pinned (page-locked) memory; CUDA only.
    pub h2d_pinned_gbps: Option<f64>,
    pub bytes_per_sample: f64,
    /// Size of the tensor copied (one batch).
    pub batch_bytes: u64,
    /// Where `bytes_per_sample` came from (a run's baseline, an option, the default).
    pub bytes_source: String,
    pub host_copy_ceiling_sps: f64,
    pub h2d_pageable_ceiling_sps: Option<f64>,
    pub h2d_pinned_ceiling_sps: Option<f64>,
    /// One sentence on what the figures mean on this machine.
    pub note: String,
}

impl DataPathLimit {
    /// The most samples/sec the data path allows: the host copy, and with
    /// CUDA also the faster of the two host-to-device copies, whichever is lower.
    pub fn limit_sps(&self) -> f64 {
        let h2d = match (self.h2d_pageable_ceiling_sps, self.h2d_pinned_ceiling_sps) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        match h2d {
            Some(d) => d.min(self.host_copy_ceiling_sps),
            None => self.host_copy_ceiling_sps,
        }
    }
}
