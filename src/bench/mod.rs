//! Running one measurement of the project, and reading its figure.
//!
//! Managed mode writes the embedded harness (`harness.py`) into the run folder
//! and runs it against the user's `build()`; command mode runs the user's own
//! training command with tuneloop's instrumentation on its interpreter's path
//! (`instrument/`, see [`command`]); contract mode runs the user's command and
//! reads its `samples/sec: N` line. Either way each measurement is a process
//! of its own (worker start-up counts) run through [`crate::process`],
//! forked where it can be from a server that imported torch once ([`fork`])
//! rather than started afresh.

pub mod command;
pub mod cost;
pub mod fork;
pub mod identity;
pub mod limits;
pub mod load;
pub mod memory;
pub mod stats;
pub mod time;
pub mod whole;
pub mod window;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::Workspace;
use crate::error::BenchError;
use crate::knob::LoaderKnob;
use crate::process::{self, Ending, Interrupt, Spec};

pub const HARNESS_PY: &str = include_str!("harness.py");
const RESULT_PREFIX: &str = "TUNELOOP_RESULT ";

/// Overrides `[bench] window_s` (the test suite's short runs: `0`).
pub const ENV_WINDOW_S: &str = "TUNELOOP_WINDOW_S";

/// The timed window's least length: [`ENV_WINDOW_S`] when set and a number,
/// else the workspace's `[bench] window_s`; never negative.
pub fn window_s(configured: f64) -> f64 {
    std::env::var(ENV_WINDOW_S)
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or(configured)
        .max(0.0)
}
const ERROR_PREFIX: &str = "TUNELOOP_ERROR ";

/// One bench process's figures (the harness's JSON line, or a contract figure).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Measurement {
    pub samples_per_sec: f64,
    /// The timed steps (every stretch of a window lengthened by time).
    #[serde(default)]
    pub steps: Option<u32>,
    /// Stretches of `[bench] steps` the timed window held: 1, or more when
    /// `[bench] window_s` lengthened it ([`crate::config::WINDOW_S`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_stretches: Option<u32>,
    /// The window ended early, past the cap a candidate's runs get
    /// ([`Bencher::window_cap_s`]): its figure is a rate under a fraction of
    /// the incumbent's, from the steps timed until then.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub window_cut: bool,
    /// The window ended in its first stretch at [`window::SLOW_AFTER`] times
    /// `[bench] window_s`: a slow run's steps (the baseline without
    /// workers), timed for that long and no longer.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub window_by_time: bool,
    /// The profiled run's window ended once the profiler's steps were taken
    /// (with the losses and the data check's batches in): its table, its
    /// step's parts and its first batches are what is read of it, and its
    /// rate is that of those steps, under the profiler.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub profile_only: bool,
    /// The profiler's steps were taken after the first throughput run's
    /// timed window, in that run's process ([`Bencher::measure_then_profile`]),
    /// and that run is the baseline's first: no process of its own. A
    /// first run set aside for a widened window ([`window`]) is not among
    /// the runs, and then this is false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_first_run: bool,
    /// A throughput run that went on to the profiler's steps after its
    /// window: those steps' own figures (the run's are its window's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_after: Option<ProfileAfter>,
    /// The steps of one stretch as the run was given them (`[bench] steps`,
    /// or as widened to an epoch or fitted to the command), whatever it
    /// then timed. Older harnesses leave it out ([`Measurement::stretch_steps`]).
    #[serde(
        default,
        rename = "stretch_steps",
        skip_serializing_if = "Option::is_none"
    )]
    pub stretch: Option<u32>,
    /// Untimed steps before them: `[bench] warmup_steps`, or more with many
    /// workers (at least 4 batches a worker: a worker's first batches cost
    /// more; in command mode within the batches the command has).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup_steps: Option<u32>,
    #[serde(default)]
    pub batch_size: Option<u64>,
    /// Samples over the timed steps (all ranks together under a launcher).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples: Option<u64>,
    /// Bytes of the tensors of the first batch (what one host-to-device copy moves).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_bytes: Option<u64>,
    #[serde(default)]
    pub wall_s: Option<f64>,
    #[serde(default)]
    pub data_wait_s: Option<f64>,
    #[serde(default)]
    pub train_step_s: Option<f64>,
    #[serde(default)]
    pub data_wait_share: Option<f64>,
    #[serde(default)]
    pub device: Option<String>,
    #[serde(default)]
    pub torch_version: Option<String>,
    #[serde(default)]
    pub cuda_available: Option<bool>,
    /// The host's CPU count (`os.cpu_count()`), not what the job may use.
    #[serde(default)]
    pub cpu_count: Option<u32>,
    /// The cores the job may really use: the smallest of the host's count,
    /// the affinity mask and the cgroup CPU quota (which may be fractional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usable_cores: Option<f64>,
    /// Whether the CPU does bf16 arithmetic in hardware (AVX512-BF16 or AMX
    /// on x86, BF16 on Arm), as torch's CPU kernels see it; `None` where
    /// the harness's torch cannot say. Without it bf16 autocast on the CPU
    /// is slower than float32 ([`crate::compute`] passes it over).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_bf16: Option<bool>,
    /// The loader's worker processes alive at the end of the timed steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live_workers: Option<u64>,
    /// Their resident memory summed (RSS: shared pages counted in each).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers_rss_bytes: Option<u64>,
    /// Their proportional memory summed (PSS: shared pages split among the
    /// processes that map them): what more workers really add.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers_pss_bytes: Option<u64>,
    /// The training process's resident memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub main_rss_bytes: Option<u64>,
    /// The machine's MemAvailable when the timed steps ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_available_bytes: Option<u64>,
    /// The job's cgroup memory limit less the cgroup's usage (its inactive
    /// page cache not counted), read by tuneloop once the run had ended;
    /// `None` without a limit. See [`memory`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_memory_headroom_bytes: Option<u64>,
    /// Which of them limited `usable_cores`: "cpu_count", "affinity" or "cgroup_quota".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores_limited_by: Option<String>,
    /// The first batches' structure and bytes in one digest (what older
    /// harnesses wrote; the data check reads `data_identity` when there is one).
    #[serde(default)]
    pub fingerprint: Option<String>,
    /// The first batches by part: items, order, structure, bytes (see
    /// [`identity`]); absent from older harnesses and contract mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_identity: Option<identity::DataIdentity>,
    /// The loss of each of the first training steps (the scalar passed to
    /// `backward`; `None` for a NaN or infinite one): what the numerics
    /// guard of compute turns compares ([`crate::numerics`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub losses: Vec<Option<f64>>,
    /// torch's intra-op threads at the end of the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch_threads: Option<u32>,
    #[serde(default)]
    pub ceiling_sps: Option<f64>,
    /// The DataLoader's settings as the harness saw them.
    #[serde(default)]
    pub loader: BTreeMap<String, serde_json::Value>,
    /// Command mode: where the measured (training) loader was built, as
    /// `file:line` in the project (or the first frame outside torch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_site: Option<String>,
    /// Command mode: every DataLoader the command iterated before the end of
    /// the measurement (site, batches, backward passes, settings, training?).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loaders: Vec<serde_json::Value>,
    #[serde(default)]
    pub world_size: Option<u32>,
    /// `forked` from the fork server ([`fork`]) or `fresh` (managed and command mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_start: Option<String>,
    /// Managed mode: the run's seconds around its timed window, by phase
    /// (`before_main`, `import_torch`, `build`, `first_batch`, `warmup`,
    /// `after_window`; see the harness).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases_s: Option<BTreeMap<String, Option<f64>>>,
    /// The bench process's whole wall time as tuneloop timed it, spawn to
    /// exit (managed mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_s: Option<f64>,
    /// Under a launcher: each rank's figures (rank, samples_per_sec, data_wait_share, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_rank: Vec<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slowest_rank: Option<u32>,
    /// New epochs begun during the timed steps (each restarts non-persistent workers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch_starts_timed: Option<u32>,
    /// CPU seconds spent producing batches over the timed steps: the worker
    /// processes', or the training process's own inside `next()` without workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loader_cpu_s: Option<f64>,
    /// Like `loader_cpu_s` with every thread of the workers counted (their
    /// queue feeder threads, a `__getitems__` thread pool): the CPU limit's
    /// figure. `loader_cpu_s` counts the workers' main threads only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loader_threads_cpu_s: Option<f64>,
    /// CPU seconds of the training process over the timed steps, loading excluded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub main_cpu_s: Option<f64>,
    /// CPU seconds of the training thread inside `next()` over the timed steps:
    /// the loading itself without workers; receiving the batches with them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetch_cpu_s: Option<f64>,
    /// The median timed step's data_wait, in seconds: near the mean when the
    /// step waits steadily (the loader's rate is the limit), near zero when
    /// the wait comes as a few long stalls (what a deeper prefetch absorbs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_wait_step_median_s: Option<f64>,
    /// CPU seconds the whole machine was busy over the timed steps, every
    /// process counted: on a shared machine, the cores others took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_busy_s: Option<f64>,
    /// `len(loader)`: the batches one epoch holds (this rank's); none for an
    /// iterable dataset without a length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batches_per_epoch: Option<u64>,
    /// Median over the timed epoch starts: seconds from the new iterator to
    /// its first batch (the pipeline filling from empty while the step idles).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch_fill_s: Option<f64>,
    /// Median over the timed epoch starts: CPU seconds the machine was busy
    /// during that fill (every process counted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch_fill_busy_s: Option<f64>,
    /// Command mode: the training batches the whole command runs, once a
    /// run of this session has met its end (a short `--epochs 1`). With the
    /// timed steps it bounds the workers a measurement can warm up
    /// ([`command::workers_that_fit`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_batches: Option<u64>,
    /// Command mode: seconds from the process's start to the training
    /// loader's first `iter()` (imports, data and model set-up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_s: Option<f64>,
    /// The profiled run only, on CPU: where the step's own time went, by
    /// the part a compute knob acts on ([`StepParts`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_parts: Option<StepParts>,
}

/// The profiler's steps a throughput run took after its timed window (the
/// harness's `profile_after`): one warm-up step, then `steps` profiled ones.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ProfileAfter {
    /// The profiled steps (the profiler's warm-up step not counted).
    #[serde(default)]
    pub steps: u32,
    #[serde(default)]
    pub samples: u64,
    #[serde(default)]
    pub wall_s: f64,
    #[serde(default)]
    pub data_wait_s: f64,
    #[serde(default)]
    pub train_step_s: f64,
    #[serde(default)]
    pub samples_per_sec: f64,
    #[serde(default)]
    pub data_wait_share: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_parts: Option<StepParts>,
    /// Why the profiler gave nothing (it did not start or stop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ProfileAfter {
    /// The profiled run's record, from the run `run` that took these steps:
    /// the steps' own rate and split, the step's parts, and what describes
    /// the job and its window as given (not the window's CPU, memory or
    /// data figures, which are the run's). `profile_only`: its rate is that
    /// of the profiler's steps alone.
    pub fn measurement(&self, run: &Measurement) -> Measurement {
        Measurement {
            samples_per_sec: self.samples_per_sec,
            steps: Some(self.steps),
            profile_only: true,
            in_first_run: true,
            stretch: run.stretch_steps(),
            warmup_steps: run.warmup_steps,
            batch_size: run.batch_size,
            samples: Some(self.samples),
            batch_bytes: run.batch_bytes,
            wall_s: Some(self.wall_s),
            data_wait_s: Some(self.data_wait_s),
            train_step_s: Some(self.train_step_s),
            data_wait_share: Some(self.data_wait_share),
            device: run.device.clone(),
            torch_version: run.torch_version.clone(),
            cuda_available: run.cuda_available,
            cpu_count: run.cpu_count,
            usable_cores: run.usable_cores,
            cpu_bf16: run.cpu_bf16,
            loader: run.loader.clone(),
            world_size: run.world_size,
            process_start: run.process_start.clone(),
            batches_per_epoch: run.batches_per_epoch,
            step_parts: self.step_parts,
            ..Default::default()
        }
    }
}

/// The profiled steps' time by part, each a share of the step's CPU time
/// (the `train_step` ranges; the loading's own work not counted): what
/// `crate::compute` weighs a knob by before giving it a turn. Measured on
/// CPU only: on CUDA the host's time says little of the device's.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq)]
pub struct StepParts {
    /// The optimizer's `step()` (what `fused` and `foreach` act on).
    pub optimizer: f64,
    /// Convolutions, forward and backward (what channels_last acts on).
    pub convolution: f64,
}

impl Measurement {
    /// The steps of one stretch: `steps` as configured (or as widened to an
    /// epoch), before `[bench] window_s` lengthened the window or ended it.
    pub fn stretch_steps(&self) -> Option<u32> {
        if let Some(s) = self.stretch {
            return Some(s);
        }
        let steps = self.steps?;
        Some(steps / self.window_stretches.unwrap_or(1).max(1))
    }

    /// Whether the window ended inside its first stretch: by time, at the
    /// cap, or (the profiled run) with the profiler's steps.
    pub fn ended_in_stretch(&self) -> bool {
        self.window_by_time || self.window_cut || self.profile_only
    }

    /// The steps this run's window was to time at least: the steps it timed,
    /// or its first stretch where it ended inside it. What a window can tell
    /// apart (the batches in flight against the timed steps) is judged on
    /// this: a faster candidate times at least that stretch.
    pub fn planned_steps(&self) -> Option<u32> {
        match self.ended_in_stretch() {
            true => self.stretch_steps().or(self.steps),
            false => self.steps,
        }
    }

    /// The epoch starts this run's window was to hold: those it timed, or
    /// where it ended inside its first stretch, those the whole stretch
    /// holds after the warm-up (an epoch of `batches_per_epoch` batches
    /// restarts at each multiple of it). None for such a run whose epoch
    /// length is unknown. Whether the window sees the workers' restarts is
    /// the agent's question (persistent workers, the restart and window
    /// caps), and a faster candidate times that whole stretch.
    pub fn planned_epoch_starts(&self) -> Option<u32> {
        if !self.ended_in_stretch() {
            return self.epoch_starts_timed;
        }
        let per = self.batches_per_epoch.filter(|b| *b > 0)?;
        let warmup = u64::from(self.warmup_steps?);
        let (lo, hi) = (warmup.max(1), warmup + u64::from(self.stretch_steps()?));
        // Multiples of `per` among the timed batch indices [lo, hi): batch
        // 0 is the first epoch's own start, not a restart.
        if hi <= lo {
            return Some(0);
        }
        u32::try_from((hi - 1) / per - (lo - 1) / per).ok()
    }

    /// A loader knob's value as the harness read it off the training loader.
    pub fn loader_value(&self, knob: LoaderKnob) -> Option<&serde_json::Value> {
        self.loader.get(knob.name())
    }

    pub fn num_workers(&self) -> Option<u64> {
        self.loader_value(LoaderKnob::NumWorkers)
            .and_then(|v| v.as_u64())
    }
    /// Cores other processes kept busy over the timed steps: the machine's
    /// busy time less this job's own loading and training CPU, per second.
    /// Under a launcher the other ranks count as others. The workers' every
    /// thread is the job's own: their queue feeder threads pickle and send
    /// each batch.
    pub fn others_cores(&self) -> Option<f64> {
        let wall = self.wall_s.filter(|&w| w > 0.0)?;
        let own = self.loader_threads_cpu_s.or(self.loader_cpu_s)? + self.main_cpu_s?;
        Some(((self.machine_busy_s? - own) / wall).max(0.0))
    }

    /// Memory one more worker adds: the live workers' PSS (else RSS) over
    /// their number.
    pub fn memory_per_worker(&self) -> Option<f64> {
        let n = self.live_workers.filter(|&n| n > 0)?;
        let total = self.workers_pss_bytes.or(self.workers_rss_bytes)?;
        Some(total as f64 / n as f64)
    }

    /// The cores the job may use: the harness's usable count, else the
    /// host's count (an older harness, contract mode: `None`).
    pub fn job_cores(&self) -> Option<f64> {
        self.usable_cores
            .filter(|c| c.is_finite() && *c > 0.0)
            .or(self.cpu_count.map(f64::from))
    }

    pub fn is_cuda(&self) -> bool {
        self.device
            .as_deref()
            .is_some_and(|d| d.starts_with("cuda"))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// No profiler at all.
    Throughput,
    /// Throughput plus the step alone on one in-memory batch.
    ThroughputWithCeiling,
    /// torch.profiler on; the table is kept.
    Profile,
    /// `ThroughputWithCeiling`, then the profiler's steps after the timed
    /// window, in the same process; the table is kept
    /// ([`Bencher::measure_then_profile`]).
    ThroughputThenProfile,
}

/// The step alone (the ceiling), median over the runs that measured it.
/// Each is a fraction of a second of training steps, so a busy moment on the
/// machine reads it low: the baseline measures it in every throughput run,
/// and one disturbed run does not set the limit.
pub fn median_ceiling(ms: &[Measurement]) -> Option<f64> {
    let c: Vec<f64> = ms
        .iter()
        .filter_map(|m| m.ceiling_sps)
        .filter(|c| c.is_finite() && *c > 0.0)
        .collect();
    (!c.is_empty()).then(|| stats::median(&c))
}

/// A profiled run: its figures and its table.
#[derive(Clone, Debug)]
pub struct Profiled {
    pub measurement: Measurement,
    pub table: String,
    /// Why `table` is empty though the run measured (the profiler failed to
    /// start, stop or tabulate; the instrument's words), if it is.
    pub no_table: Option<String>,
}

/// Why a baseline has no profiler table, from its profiled run: the run
/// failed (crashed, timed out, gave no figure), or it measured and gave no
/// table. `None`: the table is there. The table is an extra for the agent:
/// the baseline goes on with its throughput runs without it, and the run log
/// and the report say this reason.
pub fn table_unavailable(run: &Result<Profiled, BenchError>) -> Option<String> {
    match run {
        Ok(p) if !p.table.trim().is_empty() => None,
        Ok(p) => Some(
            p.no_table
                .clone()
                .unwrap_or_else(|| "the profiled run wrote no table".into()),
        ),
        Err(e) => {
            let first = e.short();
            let first = first
                .trim_end_matches("; last output:")
                .trim_end_matches(':')
                .trim_end();
            Some(format!("the profiled run failed ({first})"))
        }
    }
}

/// Runs measurements of one workspace's project.
#[derive(Clone, Debug)]
pub struct Bencher {
    pub project_root: PathBuf,
    pub python: String,
    pub entry: Option<String>,
    pub command: Option<String>,
    /// Command mode: the user's command, its head resolved (see [`command::resolve`]).
    pub run: Option<Vec<String>>,
    /// Command mode: the workspace file, read again before each run, whose
    /// `[bench] run` a turn may change (a knob the command passes:
    /// [`crate::edit::command_line`]); [`Bencher::command_words`].
    pub run_file: Option<PathBuf>,
    pub steps: u32,
    pub warmup: u32,
    /// The timed window's least length, seconds (0: `steps` only).
    pub window_s: f64,
    pub timeout: Duration,
    /// Where the harness is written (the run folder, or a temp folder for `bench`).
    pub harness_dir: PathBuf,
    /// The launcher's words with `{nproc}` and `{python}` filled in, if any.
    pub launcher: Option<Vec<String>>,
    pub distributed_sampler: bool,
    /// Command mode: how long the command runs, once a run has met its end
    /// (`None`: not known). The instrument warms many workers up longer
    /// than `warmup` and stays within it (see [`command::measure`]).
    /// Shared by the copies of this bencher (a widened window's).
    pub command_length: std::sync::Arc<std::sync::Mutex<Option<command::CommandLength>>>,
    /// Managed mode without a launcher, and command mode where the command
    /// is `python SCRIPT` or `python -m MODULE`: the fork server the runs
    /// start from (off by default; [`Bencher::new`] follows `[bench]
    /// fork_server`).
    pub fork: fork::ForkServer,
    /// The numerics guard's calibration run: torch's intra-op threads pinned
    /// to this count (`TUNELOOP_THREADS`, see the harness's `pin_threads`).
    pub threads: Option<u32>,
    /// A candidate's run: its timed window ends once it has run this many
    /// seconds (`--window-cap-s`, `TUNELOOP_WINDOW_CAP_S`; the harness's
    /// `window_cut`). Set by [`crate::run_loop::measure_pairs`].
    pub window_cap_s: Option<f64>,
    /// `steps` is one whole epoch (`window::whole_epoch_steps`): a window
    /// then holds every position of an epoch and is never ended by time
    /// ([`Bencher::window_slow_s`]).
    pub whole_epoch: bool,
}

impl Bencher {
    pub fn new(ws: &Workspace, harness_dir: &Path) -> std::io::Result<Bencher> {
        let b = &ws.file.bench;
        let bencher = Bencher {
            project_root: std::fs::canonicalize(&ws.project_root)?,
            python: ws.python(),
            entry: b.entry.clone(),
            command: b.command.clone(),
            run: b
                .run
                .as_ref()
                .map(|r| command::resolve(r, &ws.python(), &ws.project_root)),
            run_file: b
                .run
                .as_ref()
                .map(|_| ws.dir.join(crate::config::WORKSPACE_FILE)),
            steps: b.steps,
            warmup: b.warmup_steps,
            window_s: window_s(b.window_s),
            timeout: Duration::from_secs(b.timeout_s.max(1)),
            harness_dir: harness_dir.to_owned(),
            launcher: b
                .launcher
                .as_ref()
                .map(|l| launcher_words(l, b.nproc, &ws.python())),
            distributed_sampler: b.distributed_sampler,
            command_length: Default::default(),
            fork: fork::ForkServer::new(
                fork::enabled(b.fork_server)
                    && (b.entry.is_some() || b.run.is_some())
                    && b.launcher.is_none(),
            ),
            threads: None,
            window_cap_s: None,
            whole_epoch: false,
        };
        if bencher.entry.is_some() || bencher.run.is_some() {
            std::fs::create_dir_all(harness_dir)?;
            for (name, text) in bencher.own_files() {
                std::fs::write(harness_dir.join(name), text)?;
            }
        }
        Ok(bencher)
    }

    /// Files of the project that a contract-mode bench command names (its
    /// script): part of the measurement, never the agent's to change.
    pub fn script_files(&self) -> Vec<String> {
        let Some(cmd) = &self.command else {
            return vec![];
        };
        shell_words::split(cmd)
            .unwrap_or_default()
            .into_iter()
            .filter(|w| !w.starts_with('-') && self.project_root.join(w).is_file())
            .collect()
    }

    /// Where a window still in its first stretch ends by time
    /// (`--window-slow-s`, `TUNELOOP_WINDOW_SLOW_S`):
    /// [`window::SLOW_AFTER`] × `window_s`. None with `window_s` 0 (the
    /// configured steps only) or a whole epoch's steps.
    pub fn window_slow_s(&self) -> Option<f64> {
        (self.window_s > 0.0 && !self.whole_epoch).then_some(window::SLOW_AFTER * self.window_s)
    }

    /// This bencher timing `steps` a stretch: more than configured is an
    /// epoch's batches (`window::whole_epoch_steps`), fewer the command's
    /// batches fitted (`measure::fit_to_command`).
    pub fn with_steps_of(&self, steps: u32) -> Bencher {
        Bencher {
            steps,
            whole_epoch: steps > self.steps,
            ..self.clone()
        }
    }

    pub fn harness_path(&self) -> PathBuf {
        self.harness_dir.join("tuneloop_harness.py")
    }

    /// The files tuneloop writes into `harness_dir` for this mode: the
    /// harness (managed mode), plus the instrumentation (command mode).
    fn own_files(&self) -> Vec<(&'static str, &'static str)> {
        let mut v = vec![];
        if self.entry.is_some() || self.run.is_some() {
            v.push(("tuneloop_harness.py", HARNESS_PY));
        }
        if (self.entry.is_some() && self.command.is_none()) || self.run.is_some() {
            v.push((fork::ZYGOTE_FILE, fork::ZYGOTE_PY));
        }
        if self.run.is_some() {
            v.extend(command::INSTRUMENT_FILES);
        }
        v
    }

    /// Whether the harness on disk is no longer tuneloop's own (managed and
    /// command mode): an agent that reached it could falsify every measurement.
    pub fn harness_changed(&self) -> bool {
        self.own_files().iter().any(|(name, text)| {
            std::fs::read(self.harness_dir.join(name)).ok().as_deref() != Some(text.as_bytes())
        })
    }

    /// Writes tuneloop's own harness back where it was changed.
    pub fn restore_harness(&self) -> std::io::Result<()> {
        for (name, text) in self.own_files() {
            let path = self.harness_dir.join(name);
            if std::fs::read(&path).ok().as_deref() != Some(text.as_bytes()) {
                crate::fsio::write_atomic(&path, text.as_bytes())?;
            }
        }
        Ok(())
    }

    /// Command mode: the command as it stands now: `[bench] run` of the
    /// workspace file as it is on disk (a turn may have changed one of its
    /// words), else as it was when the bencher was made.
    pub fn command_words(&self) -> Option<Vec<String>> {
        let now = self
            .run_file
            .as_ref()
            .and_then(|f| std::fs::read_to_string(f).ok())
            .and_then(|t| crate::edit::command_line::run_words(&t))
            .map(|w| command::resolve(&w, &self.python, &self.project_root));
        now.or_else(|| self.run.clone())
    }

    /// The command line of one measurement.
    pub fn spec(&self, mode: Mode) -> Spec {
        let mut env = BTreeMap::new();
        env.insert("PYTHONUNBUFFERED".into(), "1".into());
        // Not the user's bytecode cache: a stale .pyc must never be measured.
        env.insert("PYTHONDONTWRITEBYTECODE".into(), "1".into());
        // One string-hash seed for every run (unless the user pinned one): a
        // set of labels or file names iterates in the same order each run, so
        // the first batches can reproduce (see `identity`).
        if std::env::var_os("PYTHONHASHSEED").is_none() {
            env.insert("PYTHONHASHSEED".into(), "0".into());
        }
        if let Some(words) = self.command_words() {
            return command::spec(self, &words, mode, env);
        }
        if let Some(n) = self.threads {
            env.insert("TUNELOOP_THREADS".into(), n.to_string());
        }
        if let Some(cmd) = &self.command {
            if mode == Mode::Profile {
                env.insert("TUNELOOP_PROFILE".into(), "1".into());
            }
            return Spec {
                program: "sh".into(),
                args: vec!["-c".into(), cmd.clone()],
                cwd: self.project_root.clone(),
                env,
                env_remove: Vec::new(),
                stdin: None,
                timeout: self.timeout,
                done_marker: None,
                end_at_done: false,
            };
        }
        let mut args = vec![
            self.harness_path().display().to_string(),
            "--project".into(),
            self.project_root.display().to_string(),
            "--entry".into(),
            self.entry.clone().unwrap_or_default(),
            "--steps".into(),
            self.steps.to_string(),
            "--warmup".into(),
            self.warmup.to_string(),
            "--window-s".into(),
            self.window_s.to_string(),
        ];
        if let Some(cap) = self.window_cap_s {
            args.extend(["--window-cap-s".into(), cap.to_string()]);
        }
        if let Some(slow) = self.window_slow_s() {
            args.extend(["--window-slow-s".into(), slow.to_string()]);
        }
        match mode {
            Mode::Throughput => {}
            Mode::ThroughputWithCeiling => args.push("--ceiling".into()),
            Mode::Profile => {
                args.extend(["--mode".into(), "profile".into(), "--table-out".into()]);
                args.push(self.table_path().display().to_string());
            }
            Mode::ThroughputThenProfile => {
                args.extend(["--ceiling".into(), "--profile-after".into()]);
                args.extend([
                    "--table-out".into(),
                    self.table_path().display().to_string(),
                ]);
            }
        }
        if self.distributed_sampler {
            args.push("--distributed-sampler".into());
        }
        let (program, args) = match &self.launcher {
            Some(words) => {
                let mut all = words[1..].to_vec();
                all.extend(args);
                (words[0].clone(), all)
            }
            None => (self.python.clone(), args),
        };
        Spec {
            program,
            args,
            cwd: self.project_root.clone(),
            env,
            env_remove: Vec::new(),
            stdin: None,
            timeout: self.timeout,
            done_marker: Some(RESULT_PREFIX.into()),
            // Ranks under a launcher end after rank 0's line: they get the
            // grace. One process has nothing after its result.
            end_at_done: self.launcher.is_none(),
        }
    }

    pub(crate) fn table_path(&self) -> PathBuf {
        self.harness_dir.join("profile_table.txt")
    }

    /// Where the instrument and the harness say why they wrote no table
    /// (`TUNELOOP_TABLE_OUT` / `--table-out` with `.error` appended).
    pub(crate) fn table_error_path(&self) -> PathBuf {
        let mut p = self.table_path().into_os_string();
        p.push(".error");
        PathBuf::from(p)
    }

    pub async fn measure(
        &self,
        mode: Mode,
        interrupt: &Interrupt,
    ) -> Result<Measurement, BenchError> {
        // The cgroup's memory headroom now, the run's processes gone.
        self.measure_run(mode, interrupt)
            .await
            .map(memory::with_cgroup_headroom)
    }

    async fn measure_run(
        &self,
        mode: Mode,
        interrupt: &Interrupt,
    ) -> Result<Measurement, BenchError> {
        // Whatever touched it, every measurement runs tuneloop's own harness.
        self.restore_harness().map_err(|e| BenchError::Spawn {
            program: "harness".into(),
            message: e.to_string(),
        })?;
        if self.run.is_some() {
            return command::measure(self, mode, interrupt).await;
        }
        let mut spec = self.spec(mode);
        if self.command.is_none() && self.launcher.is_none() {
            spec = self.fork.wrap(spec, &self.harness_dir).await;
        }
        let out = process::run(&spec, interrupt, |_| {})
            .await
            .map_err(|e| BenchError::Spawn {
                program: spec.program.clone(),
                message: e.to_string(),
            })?;
        match out.ending {
            // The harness printed its result but did not exit: the figure stands.
            Ending::TimedOut if self.command.is_none() && out.stdout.contains(RESULT_PREFIX) => {
                return parse_managed(&out.stdout, &out.stderr, &Ending::Exited(0));
            }
            Ending::TimedOut => {
                return Err(BenchError::Timeout {
                    limit_s: self.timeout.as_secs(),
                    tail: tail_n(&out.stdout, &out.stderr, 60),
                })
            }
            Ending::Interrupted => return Err(BenchError::Interrupted),
            _ => {}
        }
        if self.command.is_some() {
            return parse_contract(&out.stdout, &out.stderr, &out.ending);
        }
        let mut m = parse_managed(&out.stdout, &out.stderr, &out.ending)?;
        m.process_s = Some(out.duration.as_secs_f64());
        Ok(m)
    }

    /// Whether the profiler's steps can follow a throughput run's window in
    /// its process: managed mode on one process. A command's profiled run
    /// also finds whether the command holds its steps, before its batches
    /// are known, and ranks profile apart; both keep a profiled run of
    /// their own.
    pub fn profiles_after_window(&self) -> bool {
        self.run.is_none() && self.command.is_none() && self.launcher.is_none()
    }

    /// The baseline's first throughput run (with the ceiling), then the
    /// profiler's steps after its window, in the same process: the run,
    /// and the profiled run's record ([`ProfileAfter::measurement`]) with
    /// the table. Saves the process a profiled run of its own would start
    /// (its start, build() and warm-up). The window is timed with the
    /// profiler off, as every throughput run's is. Only where
    /// [`Bencher::profiles_after_window`] holds (the `Measure` impl asks);
    /// elsewhere the run has no profiler's steps and the record says so.
    pub async fn measure_then_profile(
        &self,
        interrupt: &Interrupt,
    ) -> Result<(Measurement, Profiled), BenchError> {
        let _ = std::fs::remove_file(self.table_path());
        let _ = std::fs::remove_file(self.table_error_path());
        let m = self.measure(Mode::ThroughputThenProfile, interrupt).await?;
        let (table, no_table) = self.read_table();
        let after = m.profile_after.clone().unwrap_or_else(|| ProfileAfter {
            error: Some("the harness took no profiler steps after the window".into()),
            ..Default::default()
        });
        let no_table = no_table.or_else(|| after.error.clone().filter(|_| table.is_empty()));
        let measurement = after.measurement(&m);
        Ok((
            m,
            Profiled {
                measurement,
                table,
                no_table,
            },
        ))
    }

    /// The table the last profiled run wrote, and why there is none when
    /// it wrote its reason instead.
    fn read_table(&self) -> (String, Option<String>) {
        let table = std::fs::read_to_string(self.table_path()).unwrap_or_default();
        let no_table = std::fs::read_to_string(self.table_error_path())
            .ok()
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty() && table.trim().is_empty());
        (table, no_table)
    }

    /// One profiled run: its figures and the profiler table.
    pub async fn profile(&self, interrupt: &Interrupt) -> Result<Profiled, BenchError> {
        if self.command.is_some() {
            let spec = self.spec(Mode::Profile);
            let out =
                process::run(&spec, interrupt, |_| {})
                    .await
                    .map_err(|e| BenchError::Spawn {
                        program: spec.program.clone(),
                        message: e.to_string(),
                    })?;
            if matches!(out.ending, Ending::TimedOut) {
                return Err(BenchError::Timeout {
                    limit_s: self.timeout.as_secs(),
                    tail: tail_n(&out.stdout, &out.stderr, 60),
                });
            }
            let m = parse_contract(&out.stdout, &out.stderr, &out.ending)?;
            return Ok(Profiled {
                measurement: m,
                table: out.stdout,
                no_table: None,
            });
        }
        let _ = std::fs::remove_file(self.table_path());
        let _ = std::fs::remove_file(self.table_error_path());
        let m = self.measure(Mode::Profile, interrupt).await?;
        let (table, no_table) = self.read_table();
        Ok(Profiled {
            measurement: m,
            table,
            no_table,
        })
    }
}

/// Fills a launcher template. `torchrun` not on PATH is looked up next to the
/// interpreter (a virtualenv's bin folder), where pip puts it.
pub fn launcher_words(template: &str, nproc: u32, python: &str) -> Vec<String> {
    let filled = template
        .replace("{nproc}", &nproc.to_string())
        .replace("{python}", python);
    let mut words = shell_words::split(&filled).unwrap_or_default();
    if let Some(first) = words.first_mut() {
        if !first.contains('/') && !on_path(first) {
            if let Some(dir) = Path::new(python).parent() {
                let sibling = dir.join(&*first);
                if sibling.is_file() {
                    *first = sibling.display().to_string();
                }
            }
        }
    }
    words
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
        .unwrap_or(false)
}

fn tail(stdout: &str, stderr: &str) -> String {
    tail_n(stdout, stderr, 15)
}

/// The last `n` lines of the output (a timed-out harness's are its stack dumps).
pub(crate) fn tail_n(stdout: &str, stderr: &str, n: usize) -> String {
    let all: Vec<&str> = stdout.lines().chain(stderr.lines()).collect();
    let start = all.len().saturating_sub(n);
    all[start..]
        .iter()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

pub(crate) fn ending_text(e: &Ending) -> String {
    match e {
        Ending::Exited(c) => c.to_string(),
        Ending::Signalled(s) => format!("signal {s}"),
        Ending::TimedOut => "timeout".into(),
        Ending::Interrupted => "interrupted".into(),
    }
}

/// Reads the harness's `TUNELOOP_RESULT` / `TUNELOOP_ERROR` line.
pub fn parse_managed(
    stdout: &str,
    stderr: &str,
    ending: &Ending,
) -> Result<Measurement, BenchError> {
    for line in stdout.lines().rev() {
        if let Some(js) = line.strip_prefix(ERROR_PREFIX) {
            let v: serde_json::Value = serde_json::from_str(js).unwrap_or_default();
            let kind = v["kind"].as_str().unwrap_or("error").to_string();
            let message = v["message"].as_str().unwrap_or(js).to_string();
            let hint = match kind.as_str() {
                "import" => "\n  hint: check [bench] entry and that the module imports with [project] python",
                "no_build" => "\n  hint: add the function to the module, or fix [bench] entry",
                "bad_return" => "\n  hint: return {\"loader\": ..., \"model\": ..., \"optimizer\": ...} or {\"loader\": ..., \"step\": fn}",
                _ => "",
            };
            return Err(BenchError::User {
                kind,
                message: format!("{message}{hint}"),
            });
        }
        if let Some(js) = line.strip_prefix(RESULT_PREFIX) {
            return serde_json::from_str(js).map_err(|e| BenchError::NoFigure {
                tail: format!("    unreadable result line ({e}): {js}"),
            });
        }
    }
    match ending {
        Ending::Exited(0) => Err(BenchError::NoFigure {
            tail: tail(stdout, stderr),
        }),
        e => Err(BenchError::Crashed {
            code: ending_text(e),
            tail: tail(stdout, stderr),
        }),
    }
}

/// Reads the last `samples/sec: N` line of a contract-mode script.
pub fn parse_contract(
    stdout: &str,
    stderr: &str,
    ending: &Ending,
) -> Result<Measurement, BenchError> {
    if !matches!(ending, Ending::Exited(0)) {
        return Err(BenchError::Crashed {
            code: ending_text(ending),
            tail: tail(stdout, stderr),
        });
    }
    let figure = stdout.lines().rev().find_map(|l| {
        let rest = l.trim().strip_prefix("samples/sec:")?;
        rest.split_whitespace().next()?.parse::<f64>().ok()
    });
    match figure {
        Some(sps) if sps.is_finite() && sps > 0.0 => Ok(Measurement {
            samples_per_sec: sps,
            ..Default::default()
        }),
        _ => Err(BenchError::NoFigure {
            tail: tail(stdout, stderr),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_table_says_why() {
        let profiled = |table: &str, no_table: Option<&str>| -> Result<Profiled, BenchError> {
            Ok(Profiled {
                measurement: Measurement::default(),
                table: table.into(),
                no_table: no_table.map(str::to_string),
            })
        };
        assert_eq!(table_unavailable(&profiled("Name  Self CPU", None)), None);
        assert_eq!(
            table_unavailable(&profiled(
                "\n",
                Some("the command ended inside the profiled steps")
            ))
            .as_deref(),
            Some("the command ended inside the profiled steps")
        );
        assert_eq!(
            table_unavailable(&profiled("", None)).as_deref(),
            Some("the profiled run wrote no table")
        );
        let crashed = Err(BenchError::Crashed {
            code: "signal 11".into(),
            tail: "    Segmentation fault".into(),
        });
        assert_eq!(
            table_unavailable(&crashed).as_deref(),
            Some("the profiled run failed (the bench exited with status signal 11 and printed no figure)")
        );
        let timed_out = Err(BenchError::Timeout {
            limit_s: 300,
            tail: String::new(),
        });
        assert_eq!(
            table_unavailable(&timed_out).as_deref(),
            Some("the profiled run failed (the bench ran past its limit of 300 s and was killed (whole process group))")
        );
    }

    /// A managed-mode bencher of `/project` as the tests below vary it.
    fn plain_bencher() -> Bencher {
        Bencher {
            project_root: PathBuf::from("/project"),
            python: "python3".into(),
            entry: Some("train:build".into()),
            command: None,
            run: None,
            steps: 10,
            warmup: 2,
            window_s: 0.0,
            timeout: Duration::from_secs(60),
            harness_dir: PathBuf::from("/run/harness"),
            launcher: None,
            distributed_sampler: false,
            command_length: Default::default(),
            fork: Default::default(),
            run_file: None,
            threads: None,
            window_cap_s: None,
            whole_epoch: false,
        }
    }

    #[test]
    fn every_run_gets_one_string_hash_seed() {
        let b = Bencher {
            threads: Some(1),
            ..plain_bencher()
        };
        let pinned = std::env::var("PYTHONHASHSEED").ok();
        let env = b.spec(Mode::Throughput).env;
        // A calibration run pins torch's threads.
        assert_eq!(env.get("TUNELOOP_THREADS").map(String::as_str), Some("1"));
        // In command mode too: its measurement builds the command's own spec.
        let cmd = Bencher {
            run: Some(vec!["python".into(), "train.py".into()]),
            ..b.clone()
        };
        let words = cmd.command_words().unwrap();
        let env = command::spec(&cmd, &words, Mode::Throughput, BTreeMap::new()).env;
        assert_eq!(env.get("TUNELOOP_THREADS").map(String::as_str), Some("1"));
        let unpinned = Bencher {
            threads: None,
            ..cmd
        };
        let env = command::spec(&unpinned, &words, Mode::Throughput, BTreeMap::new()).env;
        assert!(!env.contains_key("TUNELOOP_THREADS"));
        let env = b.spec(Mode::Throughput).env;
        match pinned {
            None => assert_eq!(env.get("PYTHONHASHSEED").map(String::as_str), Some("0")),
            // The user's own seed is inherited, not overridden.
            Some(_) => assert!(!env.contains_key("PYTHONHASHSEED")),
        }
    }

    #[test]
    fn a_capped_bencher_passes_its_window_cap_to_the_harness_and_the_instrument() {
        let b = Bencher {
            window_s: 1.0,
            ..plain_bencher()
        };
        let cap_of = |args: &[String]| {
            args.iter()
                .position(|a| a == "--window-cap-s")
                .map(|i| args[i + 1].clone())
        };
        assert_eq!(cap_of(&b.spec(Mode::Throughput).args), None);
        let capped = Bencher {
            window_cap_s: Some(6.5),
            ..b.clone()
        };
        assert_eq!(
            cap_of(&capped.spec(Mode::Throughput).args).as_deref(),
            Some("6.5")
        );
        let cmd = Bencher {
            run: Some(vec!["python".into(), "train.py".into()]),
            ..capped
        };
        let words = cmd.command_words().unwrap();
        let env = command::spec(&cmd, &words, Mode::Throughput, BTreeMap::new()).env;
        assert_eq!(
            env.get("TUNELOOP_WINDOW_CAP_S").map(String::as_str),
            Some("6.5")
        );
    }

    #[test]
    fn a_slow_window_ends_at_twice_window_s_except_over_a_whole_epoch() {
        let slow_of = |b: &Bencher| {
            let args = b.spec(Mode::Throughput).args;
            let arg = args
                .iter()
                .position(|a| a == "--window-slow-s")
                .map(|i| args[i + 1].clone());
            let cmd = Bencher {
                run: Some(vec!["python".into(), "train.py".into()]),
                ..b.clone()
            };
            let words = cmd.command_words().unwrap();
            let env = command::spec(&cmd, &words, Mode::Throughput, BTreeMap::new()).env;
            assert_eq!(
                arg.as_deref(),
                env.get("TUNELOOP_WINDOW_SLOW_S").map(String::as_str)
            );
            arg
        };
        let b = Bencher {
            window_s: 1.5,
            ..plain_bencher()
        };
        assert_eq!(slow_of(&b).as_deref(), Some("3"));
        // `window_s = 0`: the configured steps, whole.
        assert_eq!(slow_of(&plain_bencher()), None);
        // Widened to an epoch (more steps than configured): never ended by
        // time; fitted to a short command (fewer): still ended.
        assert_eq!(slow_of(&b.with_steps_of(25)), None);
        assert_eq!(slow_of(&b.with_steps_of(6)).as_deref(), Some("3"));
    }

    #[test]
    fn a_window_ended_by_time_holds_the_epoch_starts_of_its_whole_stretch() {
        // The demo's baseline: 32 batches an epoch, 5 warm-up steps, a
        // stretch of 40; ended by time after 26, before batch 32.
        let cut = Measurement {
            steps: Some(26),
            window_by_time: true,
            stretch: Some(40),
            warmup_steps: Some(5),
            batches_per_epoch: Some(32),
            epoch_starts_timed: Some(0),
            ..Measurement::default()
        };
        assert_eq!(
            cut.planned_epoch_starts(),
            Some(1),
            "batch 32 is in [5, 45)"
        );
        let long = Measurement {
            batches_per_epoch: Some(8),
            ..cut.clone()
        };
        assert_eq!(long.planned_epoch_starts(), Some(5), "8, 16, 24, 32, 40");
        let none = Measurement {
            batches_per_epoch: Some(100),
            ..cut.clone()
        };
        assert_eq!(none.planned_epoch_starts(), Some(0));
        // Not known for a loader without a length; what was timed otherwise.
        let unknown = Measurement {
            batches_per_epoch: None,
            ..cut.clone()
        };
        assert_eq!(unknown.planned_epoch_starts(), None);
        // The profiled run, ended with the profiler's steps: the same.
        let profiled = Measurement {
            window_by_time: false,
            profile_only: true,
            steps: Some(11),
            ..cut.clone()
        };
        assert_eq!(profiled.planned_epoch_starts(), Some(1));
        assert_eq!(profiled.planned_steps(), Some(40));
        let whole = Measurement {
            window_by_time: false,
            epoch_starts_timed: Some(3),
            ..cut
        };
        assert_eq!(whole.planned_epoch_starts(), Some(3));
    }

    #[test]
    fn a_window_ended_inside_its_stretch_plans_by_the_stretch() {
        let lengthened = Measurement {
            steps: Some(160),
            window_stretches: Some(2),
            ..Measurement::default()
        };
        assert_eq!(lengthened.stretch_steps(), Some(80));
        assert_eq!(lengthened.planned_steps(), Some(160));
        let by_time = Measurement {
            steps: Some(26),
            window_by_time: true,
            stretch: Some(80),
            ..Measurement::default()
        };
        assert_eq!(by_time.stretch_steps(), Some(80));
        assert_eq!(by_time.planned_steps(), Some(80));
        // The harness's JSON names the stretch `stretch_steps`.
        let m: Measurement = serde_json::from_value(serde_json::json!({
            "samples_per_sec": 1.0, "steps": 26, "window_by_time": true, "stretch_steps": 80
        }))
        .unwrap();
        assert_eq!(
            m,
            Measurement {
                samples_per_sec: 1.0,
                ..by_time
            }
        );
    }

    #[test]
    fn the_profile_after_a_window_becomes_the_profiled_runs_record() {
        // A first throughput run as the harness writes it with --profile-after.
        let run: Measurement = serde_json::from_value(serde_json::json!({
            "samples_per_sec": 1300.0, "steps": 120, "stretch_steps": 120,
            "warmup_steps": 30, "batch_size": 16, "wall_s": 1.48, "data_wait_share": 0.66,
            "loader_cpu_s": 2.1, "ceiling_sps": 18000.0, "batches_per_epoch": 512,
            "epoch_starts_timed": 0, "device": "cpu", "fingerprint": "f",
            "losses": [2.3, 2.2], "profiled": false, "step_parts": null,
            "profile_after": {"steps": 10, "samples": 160, "wall_s": 0.137,
                "data_wait_s": 0.058, "train_step_s": 0.056, "samples_per_sec": 1167.9,
                "data_wait_share": 0.51,
                "step_parts": {"optimizer": 0.1, "convolution": 0.0}}
        }))
        .unwrap();
        let after = run.profile_after.as_ref().unwrap();
        let p = after.measurement(&run);
        // The profiler's steps' own rate and split, and the step's parts.
        assert_eq!(
            (p.samples_per_sec, p.steps, p.samples),
            (1167.9, Some(10), Some(160))
        );
        assert_eq!(p.data_wait_share, Some(0.51));
        assert_eq!(p.step_parts.unwrap().optimizer, 0.1);
        // Taken in the run's process, after a window of the steps as given.
        assert!(p.in_first_run && p.profile_only);
        assert_eq!((p.stretch_steps(), p.warmup_steps), (Some(120), Some(30)));
        assert_eq!((p.batches_per_epoch, p.batch_size), (Some(512), Some(16)));
        // Not the window's figures: its CPU, its ceiling, its epoch starts,
        // its first batches (the run itself carries them, once).
        assert_eq!((p.loader_cpu_s, p.ceiling_sps), (None, None));
        assert_eq!(p.epoch_starts_timed, None);
        assert!(p.fingerprint.is_none() && p.losses.is_empty());
        assert!(p.profile_after.is_none());
    }

    #[test]
    fn launcher_templates_are_filled() {
        let w = launcher_words(
            "torchrun --standalone --nproc_per_node {nproc}",
            4,
            "/nowhere/bin/python",
        );
        assert_eq!(w, vec!["torchrun", "--standalone", "--nproc_per_node", "4"]);
        let w = launcher_words("srun -n {nproc} {python}", 2, "/opt/py/bin/python");
        assert_eq!(w, vec!["srun", "-n", "2", "/opt/py/bin/python"]);
    }

    #[test]
    fn contract_reads_the_last_figure() {
        let m = parse_contract(
            "warm\nsamples/sec: 10.5\nsamples/sec: 812.3\n",
            "",
            &Ending::Exited(0),
        )
        .unwrap();
        assert_eq!(m.samples_per_sec, 812.3);
    }

    #[test]
    fn contract_without_figure_is_an_error_with_the_output() {
        let e = parse_contract("hello\n", "Traceback: boom\n", &Ending::Exited(0)).unwrap_err();
        assert!(matches!(e, BenchError::NoFigure { .. }));
        assert!(e.to_string().contains("boom"));
        let e = parse_contract("samples/sec: 5\n", "", &Ending::Exited(1)).unwrap_err();
        assert!(matches!(e, BenchError::Crashed { .. }));
    }

    #[test]
    fn managed_error_line_becomes_a_user_error() {
        let e = parse_managed(
            "TUNELOOP_ERROR {\"kind\": \"no_build\", \"message\": \"module 'train' has no function 'build'\"}\n",
            "",
            &Ending::Exited(3),
        )
        .unwrap_err();
        match e {
            BenchError::User { kind, message } => {
                assert_eq!(kind, "no_build");
                assert!(message.contains("has no function"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn managed_result_is_parsed() {
        let m = parse_managed(
            "noise\nTUNELOOP_RESULT {\"samples_per_sec\": 100.5, \"data_wait_share\": 0.9, \"loader\": {\"num_workers\": 0}}\n",
            "",
            &Ending::Exited(0),
        )
        .unwrap();
        assert_eq!(m.samples_per_sec, 100.5);
        assert_eq!(m.num_workers(), Some(0));
    }

    #[test]
    fn managed_crash_shows_the_tail() {
        let e = parse_managed("", "Segmentation fault\n", &Ending::Signalled(11)).unwrap_err();
        assert!(e.to_string().contains("signal 11"));
        assert!(e.to_string().contains("Segmentation fault"));
    }
}
