//! The compute side of the loop: when the loader is settled (or data_wait
//! was small from the start), the same one-change procedure on the step.
//! This module owns which compute knobs are still to try and the [`Plan`]
//! of each one's change (which knob, what value, written where: the text
//! itself is [`crate::edit::compute`]'s), and what the report says about the
//! knobs never tried. The policy's `[compute]` table is
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

use crate::bench::Measurement;
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

/// The enabled compute knobs not tried yet that can act on the incumbent's
/// device (cudnn.benchmark and TF32 need CUDA).
pub fn pending(policy: &Policy, rows: &[TurnRow], incumbent: &Measurement) -> Vec<ComputeKnob> {
    let done = tried(rows);
    policy
        .compute
        .enabled()
        .into_iter()
        .filter(|k| !done.contains(k))
        .filter(|k| !k.cuda_only() || on_cuda(incumbent))
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
/// `preferred` is the entry's module or the command's script.
pub fn plan(
    policy: &Policy,
    history: &[TurnRow],
    incumbent: &Measurement,
    root: &Path,
    editable: &[String],
    preferred: Option<&str>,
) -> Plan {
    let pending = pending(policy, history, incumbent);
    let mut plan = Plan::default();
    if pending.is_empty() {
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
    for knob in pending {
        let made = worth_trying(knob, &src).and_then(|()| match knob {
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
/// Claude Code), else `ended` (the run stopped first, e.g. "iteration limit
/// 10; raise [loop] max_iterations").
pub fn not_tried(
    policy: &Policy,
    rows: &[TurnRow],
    incumbent: &Measurement,
    plan: Option<&Plan>,
    ended: &str,
) -> Vec<NotTried> {
    let done = tried(rows);
    let device = incumbent.device.as_deref().unwrap_or("cpu");
    policy
        .compute
        .enabled()
        .into_iter()
        .filter(|k| !done.contains(k))
        .map(|k| {
            let skipped = plan.and_then(|p| p.skipped.iter().find(|(s, _)| *s == k));
            let why = if k.cuda_only() && !on_cuda(incumbent) {
                format!("CUDA only, and the job ran on {device}")
            } else if let Some((_, why)) = skipped {
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
        let plan = plan(&p, &[], &cpu, d.path(), &editable, None);
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
        let none = super::plan(&p, &[], &cpu, d.path(), &[], None);
        assert!(none
            .skipped
            .iter()
            .all(|(_, why)| *why == PassedOver::NoScript));
        assert_eq!(
            none.skipped[0].1.to_string(),
            "no editable script imports torch or builds an optimizer ([project] editable)"
        );
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
