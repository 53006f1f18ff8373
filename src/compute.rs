//! The compute side of the loop: when the loader is settled (or data_wait
//! was small from the start), the same one-change procedure on the step.
//! This module owns which compute knobs are still to try, whether any can
//! move the limit that binds ([`gate`]: not while the loader binds) and
//! whether each one's part of the step can ([`part_can_win`]), the
//! [`Plan`] of each one's change (which knob, what value, written where: the
//! text itself is [`crate::edit::compute`]'s), and what the report says
//! about the knobs never tried. The policy's `[compute]` table is
//! [`crate::config::ComputePolicy`]; the builtin agent's compute turn and
//! when the loader counts as settled are [`crate::agent::compute_turn`]; the
//! numerics guard is [`crate::numerics`].
//!
//! On by default: every knob but `compile` (each run would pay its
//! compilation, so it is opt-in). `[compute] knobs = []` turns the compute
//! side off, and the loop tunes the loader only (and stops with advice on
//! a compute-bound baseline), as it did before this table existed.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::bench::{Measurement, StepParts};
use crate::config::Policy;
use crate::edit::compute as text;
use crate::knob::{ComputeKnob, Numerics};
use crate::turn::TurnRow;

/// What verification accepts as a turn's knob: `[loop] knobs` and `[compute] knobs`.
pub fn allowed_knobs(policy: &Policy) -> Vec<String> {
    policy
        .loop_
        .knobs
        .iter()
        .chain(policy.compute.knobs.iter())
        .cloned()
        .collect()
}

/// What an agent's prompt says about the compute side: empty when
/// `allowed` (the loader's knobs and the compute ones) names no compute
/// knob; else one more rule line, with each allowed change's one form.
pub fn prompt_rule(allowed: &[String], ja: bool) -> String {
    let knobs: Vec<ComputeKnob> = ComputeKnob::ALL
        .into_iter()
        .filter(|k| allowed.iter().any(|a| a == k.name()))
        .collect();
    if knobs.is_empty() {
        return String::new();
    }
    let form = |k: ComputeKnob| {
        match k {
        ComputeKnob::NumThreads => "`torch.set_num_threads(n)` after the imports (or the argument of the script's own call)",
        ComputeKnob::ChannelsLast => "`model = model.to(memory_format=torch.channels_last)` just before the optimizer is built",
        ComputeKnob::ForeachOptimizer => "`foreach=True` on the optimizer's call",
        ComputeKnob::FusedOptimizer => "`fused=True` on the optimizer's call (SGD, Adam, AdamW, Adagrad)",
        ComputeKnob::CudnnBenchmark => "`torch.backends.cudnn.benchmark = True` after the imports (CUDA)",
        ComputeKnob::Tf32 => "`torch.backends.cuda.matmul.allow_tf32 = True` after the imports (CUDA)",
        ComputeKnob::Autocast => "the forward and loss lines indented under `with torch.autocast(device_type=..., dtype=torch.bfloat16):`, nothing else changed",
        ComputeKnob::Compile => "`model = torch.compile(model)` just before the optimizer is built",
    }
    };
    let list: Vec<String> = knobs
        .iter()
        .map(|k| format!("  - `{}`: {}", k.name(), form(*k)))
        .collect();
    let (preserving, changing): (Vec<ComputeKnob>, Vec<ComputeKnob>) = knobs
        .iter()
        .partition(|k| k.numerics() == Numerics::Preserving);
    let names = |v: &[ComputeKnob]| {
        let n: Vec<&str> = v.iter().map(|k| k.name()).collect();
        if n.is_empty() {
            "none".to_string()
        } else {
            n.join(", ")
        }
    };
    if ja {
        format!(
            "\n- または、data_wait が小さいとき・DataLoader が決まった後は、計算側の変更1つ(1か所1行、下の形のどれか)。同じく計測し、最初の5ステップの loss を照合する: 数値を変えない変更 ({}) は incumbent と一致、数値を変える変更 ({}) はポリシーの許容幅以内(baseline 比)。外れたら却下:\n{}",
            names(&preserving),
            names(&changing),
            list.join("\n")
        )
    } else {
        format!(
            "\n- or, when data_wait is small or the loader is settled, ONE compute-side change, one line at one place, in one of these forms. It is measured the same way, and the losses of its first 5 training steps are checked: numerics-preserving changes ({}) must match the incumbent's, numerics-changing ones ({}) must stay within the policy's tolerance of the baseline's; otherwise it is rejected:\n{}",
            names(&preserving),
            names(&changing),
            list.join("\n")
        )
    }
}

/// The compute knobs the history has turns for (whatever they decided).
pub fn tried(rows: &[TurnRow]) -> Vec<ComputeKnob> {
    rows.iter()
        .filter_map(|r| text::knob_of_change(&r.change))
        .collect()
}

fn on_cuda(m: &Measurement) -> bool {
    m.device.as_deref().is_some_and(|d| d.starts_with("cuda"))
}

/// Why a compute knob cannot pay on the device the job runs on.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum DeviceLacks {
    /// cuDNN's autotuner and TF32 do nothing on a CPU.
    #[error("CUDA only, and the job ran on {device}")]
    CudaOnly { device: String },
    /// bf16 autocast on a CPU without bf16 arithmetic converts each matmul's
    /// operands to and from float32: slower than float32 on every workload
    /// measured (×0.01–0.11 where the step binds, ×0.79–0.94 where the
    /// loader does), where a CPU with AMX gained ×1.4–2.0 (bench/RESULTS.md,
    /// "A CPU without bf16").
    #[error("the CPU has no bf16 arithmetic (AVX512-BF16, AMX or Arm BF16), so bf16 autocast would convert every matmul to and from float32 and run slower")]
    NoCpuBf16,
}

/// Why `knob` cannot pay on the incumbent's device, or `None`. A CPU whose
/// bf16 support is unknown (an older torch) keeps autocast: its turn is
/// measured like any other.
pub fn device_lacks(knob: ComputeKnob, incumbent: &Measurement) -> Option<DeviceLacks> {
    let cuda = on_cuda(incumbent);
    match knob {
        k if k.cuda_only() && !cuda => Some(DeviceLacks::CudaOnly {
            device: incumbent.device.clone().unwrap_or_else(|| "cpu".into()),
        }),
        ComputeKnob::Autocast if !cuda && incumbent.cpu_bf16 == Some(false) => {
            Some(DeviceLacks::NoCpuBf16)
        }
        _ => None,
    }
}

/// The enabled compute knobs not tried yet that can pay on the incumbent's
/// device ([`device_lacks`]).
pub fn pending(policy: &Policy, rows: &[TurnRow], incumbent: &Measurement) -> Vec<ComputeKnob> {
    let done = tried(rows);
    policy
        .compute
        .enabled()
        .into_iter()
        .filter(|k| !done.contains(k))
        .filter(|k| device_lacks(*k, incumbent).is_none())
        .collect()
}

/// The intra-op threads the step should have: the cores the job may use
/// less those its loader's workers keep busy (their CPU seconds over the
/// wall time), at least one.
pub fn thread_target(m: &Measurement) -> Option<u32> {
    let cores = m.usable_cores.or(m.cpu_count.map(f64::from))?;
    let workers = m.num_workers().unwrap_or(0);
    let busy = match (workers, m.loader_cpu_s, m.wall_s) {
        (w, Some(cpu), Some(wall)) if w > 0 && wall > 0.0 => cpu / wall,
        _ => 0.0,
    };
    Some(((cores - busy).round() as i64).clamp(1, cores.round().max(1.0) as i64) as u32)
}

/// At or above this share of the step, data_wait says the loader binds: the
/// step waits for data more than it works, so a faster step only waits
/// longer. Half, not the loop's own `stop_when_data_wait_below` (10%): below
/// half the step is still most of each iteration, and the wait comes as
/// stalls (an epoch's empty start, a slow item) between which the step's
/// time is the iteration's, so a faster step shows there. The compute-bound
/// jobs the compute side was built for sit at a few percent; the demo's
/// settled loader sits at 78–85% (its three compute turns, ×0.99 to ×1.04,
/// all reverted, bench/RESULTS.md).
pub const LOADER_BINDS_FROM: f64 = 0.5;

/// The most of the step's time, or of its CPU, one compute change is taken
/// to remove. A bound that errs high, so the gate closes only where even
/// that could not reach `min_gain`: bf16 autocast at best about doubles a
/// matmul-bound step, and the optimizer knobs remove only the optimizer's
/// per-parameter loop.
const STEP_CUT_AT_MOST: f64 = 0.5;

/// The share of its cores the job must keep busy for the CPU to be what its
/// workers wait for. Below it cores stand idle, and the CPU a faster step
/// frees feeds no worker. The slack is the CPU clock's coarse ticks over a
/// short window and each epoch's restart, when cores idle by design.
const CORES_BUSY_FROM: f64 = 0.9;

/// The incumbent's figures that say whether a compute change can move the
/// limit that binds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StepFigures {
    /// data_wait as a share of the step (`None`: not measured).
    pub data_wait_share: Option<f64>,
    /// The loader's workers; 0 (or unknown): the loading runs in the
    /// training process, between its steps.
    pub workers: Option<u64>,
    /// The step's own CPU (the training process's, less receiving the
    /// batches) as a share of the CPU a sample costs, loading included.
    pub step_cpu_share: Option<f64>,
    /// The job's own CPU over the timed steps as a share of the cores it may
    /// use (other processes' load is left out: it is the machine's, not the
    /// job's).
    pub cores_busy: Option<f64>,
}

impl StepFigures {
    pub fn of(m: &Measurement) -> StepFigures {
        let loader = m.loader_threads_cpu_s.or(m.loader_cpu_s);
        let step_cpu_share = (|| {
            let main = m.main_cpu_s?;
            // On CUDA one host thread drives the step: at most its time
            // (crate::bench::limits::step_cpu_s says why).
            let mut own = (main - m.fetch_cpu_s.unwrap_or(0.0)).max(0.0);
            if let Some(step) = m.train_step_s.filter(|s| *s > 0.0 && on_cuda(m)) {
                own = own.min(step);
            }
            let total = loader? + crate::bench::limits::step_cpu_s(m)?;
            (total > 0.0).then(|| (own / total).min(1.0))
        })();
        let cores_busy = (|| {
            let wall = m.wall_s.filter(|w| *w > 0.0)?;
            let cores = m.job_cores()?;
            Some((loader? + m.main_cpu_s?) / wall / cores)
        })();
        StepFigures {
            data_wait_share: m.data_wait_share,
            workers: m.num_workers(),
            step_cpu_share,
            cores_busy,
        }
    }
}

/// Why no compute change can move the limit that binds; its text is what
/// the report's "Compute changes not tried" says.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum LoaderBinds {
    /// Workers, and no CPU figures to show the exception.
    #[error("the loader binds: data_wait {:.0}% of the step, a faster step would only wait longer", .share * 100.0)]
    Waits { share: f64 },
    #[error("the loader binds: data_wait {:.0}% of the step, a faster step would only wait longer, and the CPU it frees would feed no worker (the job kept {:.0}% of its cores busy)", .share * 100.0, .busy * 100.0)]
    CoresIdle { share: f64, busy: f64 },
    #[error("the loader binds: data_wait {:.0}% of the step, a faster step would only wait longer, and its own CPU is {:.0}% of a sample's: half of it given to the workers would move what the cores can feed by under the {:.0}% a change must gain", .share * 100.0, .step_cpu * 100.0, .min_gain * 100.0)]
    StepCpuSmall {
        share: f64,
        step_cpu: f64,
        min_gain: f64,
    },
    #[error("the loader binds: data_wait {:.0}% of the step, loading in the training process, and halving the step's {:.0}% would save under the {:.0}% a change must gain", .share * 100.0, (1.0 - .share) * 100.0, .min_gain * 100.0)]
    StepShareSmall { share: f64, min_gain: f64 },
}

/// Whether a compute change can move the limit that binds, from the
/// incumbent's figures; `min_gain` is what a change must gain to be kept.
///
/// - data_wait unknown, or under [`LOADER_BINDS_FROM`] of the step: yes,
///   the step is at least half of the time.
/// - The loading in the training process (no workers): the step's time adds
///   to the loading's, so yes when [`STEP_CUT_AT_MOST`] of the step's share
///   can win `min_gain`.
/// - Workers: the step's time hides behind the wait. A faster step can only
///   free CPU for the workers, which helps only when the job keeps its cores
///   busy ([`CORES_BUSY_FROM`]) and the step's CPU is a share of a sample's
///   large enough that removing [`STEP_CUT_AT_MOST`] of it wins `min_gain`.
///   Without those figures: no.
///
/// Whether the step-alone ceiling binds does not enter: with data_wait at
/// half of the step or more the loader is what stands between the incumbent
/// and any limit, and a higher ceiling it does not reach changes nothing.
pub fn gate(f: &StepFigures, min_gain: f64) -> Result<(), LoaderBinds> {
    let Some(share) = f.data_wait_share.filter(|s| *s >= LOADER_BINDS_FROM) else {
        return Ok(());
    };
    // What a change must remove of the time (or of the CPU) that binds to
    // gain `min_gain`: 1 / (1 − x) ≥ 1 + min_gain.
    let need = min_gain / (1.0 + min_gain);
    if f.workers.unwrap_or(0) == 0 {
        return match STEP_CUT_AT_MOST * (1.0 - share) >= need {
            true => Ok(()),
            false => Err(LoaderBinds::StepShareSmall { share, min_gain }),
        };
    }
    let (Some(busy), Some(step_cpu)) = (f.cores_busy, f.step_cpu_share) else {
        return Err(LoaderBinds::Waits { share });
    };
    if busy < CORES_BUSY_FROM {
        return Err(LoaderBinds::CoresIdle { share, busy });
    }
    if STEP_CUT_AT_MOST * step_cpu < need {
        return Err(LoaderBinds::StepCpuSmall {
            share,
            step_cpu,
            min_gain,
        });
    }
    Ok(())
}

/// How much of what binds the step is: the most any compute change can
/// remove, from the incumbent's figures. Its time's share of each iteration
/// (1 − data_wait) while the step binds or the loading runs in the training
/// process; with workers that bind, its CPU's share of a sample's (what the
/// cores can feed is what binds: see [`gate`]).
fn step_reach(f: &StepFigures) -> f64 {
    match f.data_wait_share {
        Some(share) if share >= LOADER_BINDS_FROM && f.workers.unwrap_or(0) > 0 => {
            f.step_cpu_share.unwrap_or(1.0)
        }
        Some(share) => (1.0 - share).clamp(0.0, 1.0),
        None => 1.0,
    }
}

/// The part of the step a knob acts on, and its share of the step in the
/// profiled run: the optimizer's step for `fused` and `foreach`,
/// convolutions for channels_last. `None`: the knob acts on the whole step
/// (threads, autocast, compile), or on CUDA only.
fn knob_part(knob: ComputeKnob, parts: &StepParts) -> Option<(&'static str, f64)> {
    match knob {
        ComputeKnob::FusedOptimizer | ComputeKnob::ForeachOptimizer => {
            Some(("the optimizer's step", parts.optimizer))
        }
        ComputeKnob::ChannelsLast => Some(("convolutions", parts.convolution)),
        _ => None,
    }
}

/// Whether `knob` can win `min_gain` though it acts on one part of the
/// step: even removing all of that part (a bound that errs high: a fused
/// optimizer still reads and writes every parameter) must take
/// `min_gain / (1 + min_gain)` of what binds. `parts`: the baseline's
/// profiled run; without it (CUDA, no profile) every knob passes.
pub fn part_can_win(
    knob: ComputeKnob,
    parts: Option<&StepParts>,
    f: &StepFigures,
    min_gain: f64,
) -> Result<(), PartSmall> {
    let Some((part, share)) = parts.and_then(|p| knob_part(knob, p)) else {
        return Ok(());
    };
    let reach = step_reach(f);
    let need = min_gain / (1.0 + min_gain);
    match share * reach >= need {
        true => Ok(()),
        false => Err(PartSmall {
            part,
            share,
            reach,
            min_gain,
        }),
    }
}

/// A knob whose part of the step is too small to win a change's gain
/// ([`part_can_win`]); its text is what the report's "Compute changes not
/// tried" says.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{part} took {:.1}% of the step under the profiler, and the step is {:.0}% of what binds: removing all of it would gain under the {:.0}% a change must gain", .share * 100.0, .reach * 100.0, .min_gain * 100.0)]
pub struct PartSmall {
    pub part: &'static str,
    pub share: f64,
    pub reach: f64,
    pub min_gain: f64,
}

/// [`gate`] on the incumbent's measurement, with the policy's `min_gain`.
pub fn gate_for(policy: &Policy, incumbent: &Measurement) -> Result<(), LoaderBinds> {
    gate(&StepFigures::of(incumbent), policy.decision.min_gain)
}

/// [`part_can_win`] for `knob` on the incumbent, with the policy's `min_gain`:
/// why its part of the step is too small, or `None`.
pub fn part_small(
    policy: &Policy,
    incumbent: &Measurement,
    parts: Option<&StepParts>,
    knob: ComputeKnob,
) -> Option<PartSmall> {
    let f = StepFigures::of(incumbent);
    part_can_win(knob, parts, &f, policy.decision.min_gain).err()
}

/// The [`pending`] knobs that can move the limit that binds: none while the
/// loader binds ([`gate`]), and none whose part of the step is too small
/// ([`part_can_win`]). What Claude Code is offered, and what keeps its
/// compute side open.
pub fn pending_worth(
    policy: &Policy,
    rows: &[TurnRow],
    incumbent: &Measurement,
    parts: Option<&StepParts>,
) -> Vec<ComputeKnob> {
    if gate_for(policy, incumbent).is_err() {
        return Vec::new();
    }
    pending(policy, rows, incumbent)
        .into_iter()
        .filter(|k| part_small(policy, incumbent, parts, *k).is_none())
        .collect()
}

/// What an agent may change now: [`allowed_knobs`], less the compute knobs
/// that cannot move the limit that binds: all of them while the loader
/// binds ([`gate`]), each that cannot pay on the job's device
/// ([`device_lacks`]), and each whose part of the step is too small
/// ([`part_can_win`]).
pub fn offered_knobs(
    policy: &Policy,
    incumbent: &Measurement,
    parts: Option<&StepParts>,
) -> Vec<String> {
    if gate_for(policy, incumbent).is_err() {
        return policy.loop_.knobs.clone();
    }
    allowed_knobs(policy)
        .into_iter()
        .filter(|name| match ComputeKnob::parse(name) {
            Some(k) => {
                device_lacks(k, incumbent).is_none()
                    && part_small(policy, incumbent, parts, k).is_none()
            }
            None => true,
        })
        .collect()
}

/// Why the builtin agent passes over a compute knob; its text is what the
/// agent's summary and the report say.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PassedOver {
    #[error("no editable script imports torch or builds an optimizer ([project] editable)")]
    NoScript,
    #[error("no 2-d convolution in the script")]
    NoConvolution,
    #[error("the cores the job may use are unknown")]
    CoresUnknown,
    #[error("torch's default already uses the {cores} cores")]
    DefaultUsesCores { cores: u32 },
    #[error("foreach is the default on CUDA")]
    ForeachDefaultOnCuda,
    /// No compute change can move the limit that binds ([`gate`]).
    #[error(transparent)]
    LoaderBinds(LoaderBinds),
    /// The part of the step the knob acts on is too small ([`part_can_win`]).
    #[error(transparent)]
    PartSmall(PartSmall),
    /// The script has no place the change can be written (the editor's words).
    #[error(transparent)]
    NoPlace(#[from] text::ComputeRefusal),
}

/// Whether a model-level change has something to act on in `src`:
/// channels_last only pays for convolutions.
fn worth_trying(knob: ComputeKnob, src: &str) -> Result<(), PassedOver> {
    match knob {
        ComputeKnob::ChannelsLast
            if !["Conv2d", "conv2d", "torchvision.models", "resnet", "ResNet"]
                .iter()
                .any(|w| src.contains(w)) =>
        {
            Err(PassedOver::NoConvolution)
        }
        _ => Ok(()),
    }
}

/// What the builtin agent can do on the compute side now: each pending
/// knob (see [`pending`]) either has a findable place in the script (its
/// new text is ready) or is passed over, with why ("no 2-d convolution in
/// the script"). The loop reads it to know whether compute turns are left,
/// and the report to say, once, why a knob was never tried.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// The script the changes go into, relative to the project root.
    pub file: Option<String>,
    /// Its text now.
    pub src: String,
    /// The knobs that can be written, in the order they are tried, each with
    /// the script's new text.
    pub ready: Vec<(ComputeKnob, String)>,
    /// The knobs passed over, with why.
    pub skipped: Vec<(ComputeKnob, PassedOver)>,
}

/// The builtin agent's [`Plan`] for the project as it is on disk.
/// `preferred` is the entry's module or the command's script; `parts` the
/// baseline's profiled step by part ([`part_can_win`]).
pub fn plan(
    policy: &Policy,
    history: &[TurnRow],
    incumbent: &Measurement,
    parts: Option<&StepParts>,
    root: &Path,
    editable: &[String],
    preferred: Option<&str>,
) -> Plan {
    let pending = pending(policy, history, incumbent);
    let mut plan = Plan::default();
    if pending.is_empty() {
        return plan;
    }
    if let Err(why) = gate_for(policy, incumbent) {
        plan.skipped = pending
            .into_iter()
            .map(|k| (k, PassedOver::LoaderBinds(why.clone())))
            .collect();
        return plan;
    }
    let found = script(root, editable, preferred)
        .and_then(|f| std::fs::read_to_string(root.join(&f)).ok().map(|s| (f, s)));
    let Some((file, src)) = found else {
        plan.skipped = pending
            .into_iter()
            .map(|k| (k, PassedOver::NoScript))
            .collect();
        return plan;
    };
    let cuda = on_cuda(incumbent);
    let device = if cuda { "cuda" } else { "cpu" };
    let threads = thread_target(incumbent);
    let figures = StepFigures::of(incumbent);
    let min_gain = policy.decision.min_gain;
    for knob in pending {
        let made = worth_trying(knob, &src)
            .and_then(|()| {
                part_can_win(knob, parts, &figures, min_gain).map_err(PassedOver::PartSmall)
            })
            .and_then(|()| match knob {
                ComputeKnob::NumThreads => {
                    let want = threads.ok_or(PassedOver::CoresUnknown)?;
                    let now = text::threads_call(&src)
                        .map_err(PassedOver::NoPlace)?
                        .map(|(_, n)| n);
                    // Unset, torch takes about the cores: worth a turn only below them.
                    let cores = incumbent.usable_cores.unwrap_or(f64::from(want)).round() as u32;
                    if now.is_none() && want >= cores {
                        return Err(PassedOver::DefaultUsesCores { cores });
                    }
                    text::apply(knob, &src, want, device).map_err(PassedOver::NoPlace)
                }
                // foreach is already the default on CUDA.
                ComputeKnob::ForeachOptimizer if cuda => Err(PassedOver::ForeachDefaultOnCuda),
                _ => text::apply(knob, &src, 1, device).map_err(PassedOver::NoPlace),
            });
        match made {
            Ok(new_src) => plan.ready.push((knob, new_src)),
            Err(why) => plan.skipped.push((knob, why)),
        }
    }
    plan.file = Some(file);
    plan.src = src;
    plan
}

/// An enabled compute knob the run ended without trying, and why.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct NotTried {
    pub knob: String,
    pub why: String,
}

/// The enabled compute knobs with no turn, each with why: CUDA-only on
/// another device, passed over by the builtin agent (`plan`, absent for
/// Claude Code), the loader binding ([`gate`]), its part of the step too
/// small ([`part_can_win`] on `parts`), else `ended` (the run stopped
/// first, e.g. "iteration limit 10; raise [loop] max_iterations").
pub fn not_tried(
    policy: &Policy,
    rows: &[TurnRow],
    incumbent: &Measurement,
    parts: Option<&StepParts>,
    plan: Option<&Plan>,
    ended: &str,
) -> Vec<NotTried> {
    let done = tried(rows);
    let binds = gate_for(policy, incumbent).err();
    policy
        .compute
        .enabled()
        .into_iter()
        .filter(|k| !done.contains(k))
        .map(|k| {
            let skipped = plan.and_then(|p| p.skipped.iter().find(|(s, _)| *s == k));
            let why = if let Some(why) = device_lacks(k, incumbent) {
                why.to_string()
            } else if let Some((_, why)) = skipped {
                why.to_string()
            } else if let Some(why) = &binds {
                why.to_string()
            } else if let Some(why) = part_small(policy, incumbent, parts, k) {
                why.to_string()
            } else {
                ended.to_string()
            };
            NotTried {
                knob: k.name().to_string(),
                why,
            }
        })
        .collect()
}

/// One line for the report: the knobs grouped by why, e.g. "autocast
/// (iteration limit 10; raise [loop] max_iterations); cudnn_benchmark, tf32
/// (CUDA only, and the job ran on cpu)".
pub fn describe_not_tried(list: &[NotTried]) -> String {
    let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
    for n in list {
        match groups.iter_mut().find(|(w, _)| *w == n.why) {
            Some((_, knobs)) => knobs.push(&n.knob),
            None => groups.push((&n.why, vec![&n.knob])),
        }
    }
    groups
        .iter()
        .map(|(why, knobs)| format!("{} ({why})", knobs.join(", ")))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The script the compute changes go into: the preferred one when it has
/// an optimizer or imports torch, else the first editable one that does.
fn script(root: &Path, editable: &[String], preferred: Option<&str>) -> Option<String> {
    let fits = |f: &str| {
        std::fs::read_to_string(root.join(f)).ok().is_some_and(|s| {
            text::optimizer_call(&s).is_some() || text::after_imports(&s).is_some()
        })
    };
    preferred
        .filter(|f| fits(f))
        .map(str::to_string)
        .or_else(|| {
            editable
                .iter()
                .filter(|f| f.ends_with(".py"))
                .find(|f| fits(f))
                .cloned()
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ComputePolicy;
    use crate::turn::{AgentInfo, Decision};

    fn policy(knobs: &[&str]) -> Policy {
        let mut p = Policy::default();
        p.compute.knobs = knobs.iter().map(|s| s.to_string()).collect();
        p
    }

    fn row(change: &str) -> TurnRow {
        TurnRow {
            turn: 1,
            change: change.into(),
            file: None,
            before_sps: None,
            after_sps: None,
            ratio: None,
            ratio_ci: None,
            runs: 0,
            decision: Decision::Reverted,
            reason: String::new(),
            agent: AgentInfo::default(),
            candidate_samples: vec![],
            incumbent_samples: vec![],
            data_wait_share: None,
            confirmation: None,
        }
    }

    #[test]
    fn pending_knobs_follow_the_policy_the_history_and_the_device() {
        let p = policy(&["compile", "num_threads", "cudnn_benchmark", "channels_last"]);
        let cpu = Measurement {
            device: Some("cpu".into()),
            ..Default::default()
        };
        assert_eq!(
            pending(&p, &[], &cpu),
            [
                ComputeKnob::NumThreads,
                ComputeKnob::ChannelsLast,
                ComputeKnob::Compile
            ]
        );
        let rows = [
            row("num_workers 0 → 2"),
            row("num_threads: torch.set_num_threads 1 → 2 at train.py:3"),
        ];
        assert_eq!(
            pending(&p, &rows, &cpu),
            [ComputeKnob::ChannelsLast, ComputeKnob::Compile]
        );
        let gpu = Measurement {
            device: Some("cuda:0".into()),
            ..Default::default()
        };
        assert!(pending(&p, &rows, &gpu).contains(&ComputeKnob::CudnnBenchmark));
        assert!(pending(&policy(&[]), &[], &cpu).is_empty());
        assert_eq!(allowed_knobs(&p).len(), 4 + 4);
    }

    #[test]
    fn by_default_every_compute_knob_but_compile_is_tried_and_a_table_without_knobs_keeps_them() {
        let cpu = Measurement {
            device: Some("cpu".into()),
            ..Default::default()
        };
        let gpu = Measurement {
            device: Some("cuda:0".into()),
            ..Default::default()
        };
        let p = Policy::default();
        let all_but_compile: Vec<ComputeKnob> = ComputeKnob::ALL
            .into_iter()
            .filter(|k| *k != ComputeKnob::Compile)
            .collect();
        assert_eq!(pending(&p, &[], &gpu), all_but_compile);
        // On a CPU the CUDA-only ones wait for a GPU.
        assert_eq!(
            pending(&p, &[], &cpu),
            [
                ComputeKnob::NumThreads,
                ComputeKnob::ChannelsLast,
                ComputeKnob::ForeachOptimizer,
                ComputeKnob::FusedOptimizer,
                ComputeKnob::Autocast
            ]
        );
        // A policy file whose [compute] table sets only a tolerance keeps
        // the default knobs; `knobs = []` turns the compute side off.
        let (tol, _) = Policy::parse(
            "[compute]\nloss_rtol = 0.05\n",
            std::path::Path::new("p.toml"),
        )
        .unwrap();
        assert_eq!(tol.compute.enabled(), all_but_compile);
        let (off, _) =
            Policy::parse("[compute]\nknobs = []\n", std::path::Path::new("p.toml")).unwrap();
        assert!(pending(&off, &[], &gpu).is_empty());
    }

    #[test]
    fn a_knob_with_nothing_to_act_on_is_passed_over_with_why() {
        let d = tempfile::tempdir().unwrap();
        let script = "import torch\nmodel = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n";
        std::fs::write(d.path().join("train.py"), script).unwrap();
        let p = policy(&["num_threads", "channels_last"]);
        let cpu = Measurement {
            device: Some("cpu".into()),
            ..Default::default()
        };
        let editable = ["train.py".to_string()];
        let plan = plan(&p, &[], &cpu, None, d.path(), &editable, None);
        assert_eq!(plan.file.as_deref(), Some("train.py"));
        assert_eq!(
            plan.skipped,
            [
                (ComputeKnob::NumThreads, PassedOver::CoresUnknown),
                (ComputeKnob::ChannelsLast, PassedOver::NoConvolution)
            ]
        );
        assert_eq!(
            plan.skipped[1].1.to_string(),
            "no 2-d convolution in the script"
        );
        let none = super::plan(&p, &[], &cpu, None, d.path(), &[], None);
        assert!(none
            .skipped
            .iter()
            .all(|(_, why)| *why == PassedOver::NoScript));
        assert_eq!(
            none.skipped[0].1.to_string(),
            "no editable script imports torch or builds an optimizer ([project] editable)"
        );
    }

    /// The demo's settled incumbent as `tuneloop bench` measured it on the
    /// 2-core box (examples/slow_loader at 21 persistent workers, one run).
    fn demo_settled() -> Measurement {
        let mut m = Measurement {
            samples_per_sec: 5331.4,
            wall_s: Some(0.240),
            train_step_s: Some(0.0401),
            data_wait_share: Some(0.833),
            device: Some("cpu".into()),
            cpu_count: Some(2),
            usable_cores: Some(2.0),
            loader_cpu_s: Some(0.116),
            loader_threads_cpu_s: Some(0.147),
            main_cpu_s: Some(0.0607),
            fetch_cpu_s: Some(0.0254),
            ..Default::default()
        };
        m.loader.insert("num_workers".into(), 21.into());
        m
    }

    #[test]
    fn a_data_bound_incumbent_with_idle_cores_gets_no_compute_change() {
        let m = demo_settled();
        let f = StepFigures::of(&m);
        assert_eq!(f.workers, Some(21));
        // (0.147 + 0.0607) / 0.240 / 2 cores; (0.0607 − 0.0254) / (0.147 + 0.0607).
        assert!((f.cores_busy.unwrap() - 0.433).abs() < 0.01, "{f:?}");
        assert!((f.step_cpu_share.unwrap() - 0.170).abs() < 0.01, "{f:?}");
        let why = gate(&f, 0.03).unwrap_err();
        assert!(matches!(why, LoaderBinds::CoresIdle { .. }), "{why:?}");
        assert_eq!(
            why.to_string(),
            "the loader binds: data_wait 83% of the step, a faster step would only wait longer, and the CPU it frees would feed no worker (the job kept 43% of its cores busy)"
        );
        // The same with its cores busy: the step's 17% of the CPU, half of
        // it freed, could move what the cores feed by 9%: worth a turn.
        let busy = StepFigures {
            cores_busy: Some(0.95),
            ..f
        };
        assert_eq!(gate(&busy, 0.03), Ok(()));
        // ... unless the step's CPU is too small a share to win min_gain.
        let small = StepFigures {
            step_cpu_share: Some(0.04),
            ..busy
        };
        assert_eq!(
            gate(&small, 0.03).unwrap_err().to_string(),
            "the loader binds: data_wait 83% of the step, a faster step would only wait longer, and its own CPU is 4% of a sample's: half of it given to the workers would move what the cores can feed by under the 3% a change must gain"
        );
        // Workers and no CPU figures: nothing shows the exception.
        let blind = StepFigures {
            data_wait_share: Some(0.82),
            workers: Some(4),
            ..Default::default()
        };
        assert_eq!(
            gate(&blind, 0.03).unwrap_err().to_string(),
            "the loader binds: data_wait 82% of the step, a faster step would only wait longer"
        );
    }

    #[test]
    fn a_step_at_least_half_the_time_or_unmeasured_keeps_the_compute_side_open() {
        let f = |share: Option<f64>| StepFigures {
            data_wait_share: share,
            workers: Some(8),
            cores_busy: Some(0.3),
            step_cpu_share: Some(0.01),
        };
        assert_eq!(gate(&f(None), 0.03), Ok(()));
        assert_eq!(gate(&f(Some(0.02)), 0.03), Ok(()));
        assert_eq!(gate(&f(Some(0.49)), 0.03), Ok(()));
        // The threshold is where the step stops being the larger part.
        assert!(gate(&f(Some(LOADER_BINDS_FROM)), 0.03).is_err());
    }

    #[test]
    fn loading_in_the_training_process_adds_its_time_to_the_steps() {
        // No workers (a num_workers no turn can edit): 78% data_wait leaves
        // the step 22% of the time, and halving it would win 12%.
        let serial = |share: f64, workers: Option<u64>| StepFigures {
            data_wait_share: Some(share),
            workers,
            ..Default::default()
        };
        assert_eq!(gate(&serial(0.78, Some(0)), 0.03), Ok(()));
        assert_eq!(gate(&serial(0.78, None), 0.03), Ok(()));
        // At 97% the step's 3%, halved, saves 1.5%: under min_gain.
        assert_eq!(
            gate(&serial(0.97, Some(0)), 0.03).unwrap_err().to_string(),
            "the loader binds: data_wait 97% of the step, loading in the training process, and halving the step's 3% would save under the 3% a change must gain"
        );
        // A smaller min_gain lets it through.
        assert_eq!(gate(&serial(0.97, Some(0)), 0.01), Ok(()));
    }

    #[test]
    fn the_plan_the_prompt_and_the_report_hold_compute_back_while_the_loader_binds() {
        let d = tempfile::tempdir().unwrap();
        let script = "import torch\nmodel = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n";
        std::fs::write(d.path().join("train.py"), script).unwrap();
        let p = policy(&["foreach_optimizer", "autocast", "tf32"]);
        let editable = ["train.py".to_string()];
        let bound = demo_settled();
        let plan = plan(&p, &[], &bound, None, d.path(), &editable, None);
        assert!(plan.ready.is_empty(), "{:?}", plan.ready);
        assert_eq!(
            plan.skipped.iter().map(|(k, _)| *k).collect::<Vec<_>>(),
            [ComputeKnob::ForeachOptimizer, ComputeKnob::Autocast]
        );
        let why = gate_for(&p, &bound).unwrap_err().to_string();
        let listed = not_tried(&p, &[], &bound, None, Some(&plan), "the run ended");
        assert_eq!(
            describe_not_tried(&listed),
            format!(
                "foreach_optimizer, autocast ({why}); tf32 (CUDA only, and the job ran on cpu)"
            )
        );
        // Claude Code (no plan) is told the same, and offered none of them.
        assert_eq!(
            not_tried(&p, &[], &bound, None, None, "the run ended"),
            listed
        );
        assert_eq!(offered_knobs(&p, &bound, None), p.loop_.knobs);
        // The step is most of the time: the plan writes them, the prompt offers them.
        let free = Measurement {
            data_wait_share: Some(0.3),
            ..bound
        };
        let plan = super::plan(&p, &[], &free, None, d.path(), &editable, None);
        assert_eq!(plan.ready.len(), 2, "{:?}", plan.skipped);
        // ... and not TF32, which does nothing on this CPU job.
        let mut want = allowed_knobs(&p);
        want.retain(|k| k != "tf32");
        assert_eq!(offered_knobs(&p, &free, None), want);
    }

    #[test]
    fn bf16_autocast_is_passed_over_on_a_cpu_without_bf16_arithmetic_only() {
        let d = tempfile::tempdir().unwrap();
        let script = "import torch\nmodel = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\nloss = model(x).sum()\n";
        std::fs::write(d.path().join("train.py"), script).unwrap();
        let p = policy(&["foreach_optimizer", "autocast"]);
        let editable = ["train.py".to_string()];
        let on = |device: &str, bf16: Option<bool>| Measurement {
            data_wait_share: Some(0.05),
            device: Some(device.into()),
            cpu_bf16: bf16,
            ..Default::default()
        };
        let without = on("cpu", Some(false));
        assert_eq!(pending(&p, &[], &without), [ComputeKnob::ForeachOptimizer]);
        let plan = plan(&p, &[], &without, None, d.path(), &editable, None);
        assert_eq!(plan.ready.len(), 1, "{:?}", plan.skipped);
        assert_eq!(plan.ready[0].0, ComputeKnob::ForeachOptimizer);
        // The report says why, with the builtin agent's plan and without
        // one (Claude Code), who is not offered it either.
        let listed = not_tried(&p, &[], &without, None, Some(&plan), "ended");
        assert_eq!(listed, not_tried(&p, &[], &without, None, None, "ended"));
        assert_eq!(
            describe_not_tried(&listed),
            format!(
                "foreach_optimizer (ended); autocast ({})",
                DeviceLacks::NoCpuBf16
            )
        );
        assert!(!offered_knobs(&p, &without, None).contains(&"autocast".to_string()));
        // With bf16 arithmetic, where the harness could not tell, and on
        // CUDA (whose flag says nothing of the GPU) autocast gets its turn.
        for m in [
            on("cpu", Some(true)),
            on("cpu", None),
            on("cuda:0", Some(false)),
        ] {
            assert_eq!(
                pending(&p, &[], &m),
                [ComputeKnob::ForeachOptimizer, ComputeKnob::Autocast],
                "{m:?}"
            );
            assert!(offered_knobs(&p, &m, None).contains(&"autocast".to_string()));
        }
    }

    #[test]
    fn a_knob_whose_part_of_the_step_cannot_win_the_gain_is_passed_over_with_why() {
        let d = tempfile::tempdir().unwrap();
        let script = "import torch\nmodel = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3))\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n";
        std::fs::write(d.path().join("train.py"), script).unwrap();
        let p = policy(&[
            "channels_last",
            "foreach_optimizer",
            "fused_optimizer",
            "autocast",
        ]);
        let editable = ["train.py".to_string()];
        // The step binds (data_wait 5%): it is 95% of what binds.
        let bound = Measurement {
            data_wait_share: Some(0.05),
            device: Some("cpu".into()),
            ..Default::default()
        };
        // The optimizer's step 2% of the step, no convolution in it: even
        // removed whole they win 1.9% and 0%, under min_gain's 3%.
        let small = StepParts {
            optimizer: 0.02,
            convolution: 0.0,
        };
        let plan = plan(&p, &[], &bound, Some(&small), d.path(), &editable, None);
        let ready: Vec<_> = plan.ready.iter().map(|(k, _)| *k).collect();
        assert_eq!(ready, [ComputeKnob::Autocast]);
        let skipped: Vec<_> = plan.skipped.iter().map(|(k, _)| *k).collect();
        assert_eq!(
            skipped,
            [
                ComputeKnob::ChannelsLast,
                ComputeKnob::ForeachOptimizer,
                ComputeKnob::FusedOptimizer
            ]
        );
        assert_eq!(
            plan.skipped[1].1.to_string(),
            "the optimizer's step took 2.0% of the step under the profiler, and the step is 95% of what binds: removing all of it would gain under the 3% a change must gain"
        );
        // The report says the same, with the builtin agent's plan and
        // without one (Claude Code), who is not offered them either.
        let with_plan = not_tried(&p, &[], &bound, Some(&small), Some(&plan), "ended");
        let without = not_tried(&p, &[], &bound, Some(&small), None, "ended");
        assert_eq!(with_plan, without);
        assert!(
            describe_not_tried(&with_plan).starts_with(
                "channels_last (convolutions took 0.0% of the step under the profiler"
            ),
            "{with_plan:?}"
        );
        let offered = offered_knobs(&p, &bound, Some(&small));
        assert!(offered.contains(&"autocast".to_string()));
        assert!(!offered
            .iter()
            .any(|k| k.ends_with("_optimizer") || k == "channels_last"));
        assert_eq!(
            pending_worth(&p, &[], &bound, Some(&small)),
            [ComputeKnob::Autocast]
        );
        // A heavier optimizer (AdamW's, a quarter of the step) and real
        // convolutions: each gets its turn.
        let large = StepParts {
            optimizer: 0.25,
            convolution: 0.4,
        };
        let plan = super::plan(&p, &[], &bound, Some(&large), d.path(), &editable, None);
        assert_eq!(plan.ready.len(), 4, "{:?}", plan.skipped);
        assert_eq!(offered_knobs(&p, &bound, Some(&large)), allowed_knobs(&p));
        // No profile (CUDA, or the profiled run failed): nothing is passed over.
        let plan = super::plan(&p, &[], &bound, None, d.path(), &editable, None);
        assert_eq!(plan.ready.len(), 4, "{:?}", plan.skipped);
    }

    #[test]
    fn with_workers_binding_a_part_counts_by_the_steps_share_of_a_samples_cpu() {
        // already_tuned (bench/workloads): 6 workers keep 2 cores busy, the
        // step's own CPU 13% of a sample's; its optimizer's step 14.5% of
        // the step is 1.9% of what the cores feed.
        let f = StepFigures {
            data_wait_share: Some(0.72),
            workers: Some(6),
            step_cpu_share: Some(0.13),
            cores_busy: Some(0.97),
        };
        assert_eq!(gate(&f, 0.03), Ok(()));
        let parts = StepParts {
            optimizer: 0.145,
            convolution: 0.0,
        };
        let why = part_can_win(ComputeKnob::FusedOptimizer, Some(&parts), &f, 0.03).unwrap_err();
        assert!((why.reach - 0.13).abs() < 1e-9, "{why:?}");
        assert!(
            why.to_string().contains("the step is 13% of what binds"),
            "{why}"
        );
        // A step with more of the CPU (half a sample's) lets it through.
        let heavy = StepFigures {
            step_cpu_share: Some(0.5),
            ..f
        };
        assert_eq!(
            part_can_win(ComputeKnob::FusedOptimizer, Some(&parts), &heavy, 0.03),
            Ok(())
        );
        // Knobs that act on the whole step are never weighed by a part.
        for k in [
            ComputeKnob::Autocast,
            ComputeKnob::NumThreads,
            ComputeKnob::Compile,
        ] {
            assert_eq!(part_can_win(k, Some(&parts), &f, 0.03), Ok(()));
        }
    }

    #[test]
    fn threads_take_the_cores_the_workers_leave() {
        let mut m = Measurement {
            usable_cores: Some(8.0),
            ..Default::default()
        };
        assert_eq!(thread_target(&m), Some(8));
        m.loader.insert("num_workers".into(), 4.into());
        m.loader_cpu_s = Some(6.0);
        m.wall_s = Some(2.0);
        assert_eq!(thread_target(&m), Some(5));
        m.loader_cpu_s = Some(40.0);
        assert_eq!(thread_target(&m), Some(1));
        assert_eq!(thread_target(&Measurement::default()), None);
    }

    #[test]
    fn the_prompt_names_each_allowed_compute_change_and_nothing_without_them() {
        let loader = vec!["num_workers".to_string()];
        assert_eq!(prompt_rule(&loader, false), "");
        let mut all = loader.clone();
        all.extend(["autocast".to_string(), "channels_last".to_string()]);
        let en = prompt_rule(&all, false);
        assert!(en.starts_with("\n- or, when data_wait is small"), "{en}");
        assert!(
            en.contains("numerics-preserving changes (channels_last)"),
            "{en}"
        );
        assert!(en.contains("numerics-changing ones (autocast)"), "{en}");
        assert!(
            en.contains("  - `autocast`: the forward and loss lines indented under"),
            "{en}"
        );
        assert!(!en.contains("`compile`"), "{en}");
        assert!(prompt_rule(&all, true).contains("計算側の変更1つ"));
    }

    #[test]
    fn unknown_knobs_and_bad_tolerances_are_named() {
        let mut c = ComputePolicy {
            knobs: vec!["amp".into()],
            ..Default::default()
        };
        let (key, msg) = c.check().unwrap_err();
        assert_eq!(key, "compute.knobs");
        assert!(msg.contains("`amp`") && msg.contains("autocast"), "{msg}");
        c.knobs = vec!["autocast".into()];
        assert!(c.check().is_ok());
        c.loss_rtol = -1.0;
        assert_eq!(c.check().unwrap_err().0, "compute.loss_rtol");
    }
}
