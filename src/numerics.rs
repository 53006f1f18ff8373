//! The numerics guard of compute-side turns. Every measured run records the
//! loss of its first training steps (`Measurement::losses`: the scalar passed
//! to `backward`, see the harness and the instrumentation); a compute change
//! is kept only if its runs' losses match a reference run's, step by step:
//!
//! * a numerics-preserving change (threads, channels_last, foreach/fused
//!   optimizer, cudnn.benchmark) against the turn's incumbent runs, within
//!   `[compute] exact_rtol` (float rounding, not a different computation);
//! * a numerics-changing one (autocast, TF32, torch.compile) against the
//!   BASELINE's runs, within `[compute] loss_rtol`: the drift of every kept
//!   numerics-changing change together stays inside the stated tolerance.
//!
//! A numerics-preserving change that moves which elements seeded random
//! draws fall on (channels_last under dropout: the mask is drawn in memory
//! order) cannot be bit-close; when it is not, it is held to `loss_rtol`
//! against the baseline instead, and the reason says so.
//!
//! The check needs reproducible runs: when the reference runs' own losses
//! differ by more than `exact_rtol` (a job that is not seeded), nothing can
//! be compared; a numerics-preserving change passes with that said, a
//! numerics-changing one is rejected. Pure functions; the loop records the
//! outcome in the turn's reason.
//!
//! Calibrated to the script ([`Yardstick`]): at a high learning rate any
//! change of float summation order (a layout, another thread count) moves
//! later steps' losses apart the way training's chaos amplifies them — 0.13%,
//! 0.9%, 4% by step 5 on an ImageNet script whose step-1 losses are equal.
//! So the baseline is run once more with another thread count (a change
//! known to be sound), and how far its losses move step by step is the
//! yardstick: step 1 (same weights, same batch) is held to the tolerance as
//! it is, a later step to the larger of the tolerance and
//! [`YARDSTICK_FACTOR`] times the most the yardstick moved up to that step.

use serde::{Deserialize, Serialize};

use crate::bench::Measurement;
use crate::config::ComputePolicy;
use crate::knob::{ComputeKnob, Numerics};

/// A later step may be this many times as far apart as the yardstick's run
/// was by then: a change's own reordering can start larger than one thread
/// count's, and chaos multiplies whatever it starts from.
pub const YARDSTICK_FACTOR: f64 = 5.0;

/// How far the losses move, step by step, under a change known to be sound:
/// the baseline run again with torch's intra-op threads at another count.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Yardstick {
    /// The calibration run's thread count, and the baseline's.
    pub threads: u32,
    #[serde(default)]
    pub baseline_threads: Option<u32>,
    /// Per step (1-based order): how far apart the two runs' losses are,
    /// relative to the baseline's.
    pub apart: Vec<f64>,
}

impl Yardstick {
    /// From the baseline's first run with losses and the calibration run;
    /// `None` when either recorded none.
    pub fn of(baseline: &[Measurement], calibration: &Measurement) -> Option<Yardstick> {
        let base = baseline.iter().find(|m| !m.losses.is_empty())?;
        if calibration.losses.is_empty() {
            return None;
        }
        Some(Yardstick {
            threads: calibration.torch_threads?,
            baseline_threads: base.torch_threads,
            apart: calibration
                .losses
                .iter()
                .zip(&base.losses)
                .map(|(c, b)| apart(*c, *b))
                .collect(),
        })
    }

    /// The tolerance at `step` (1-based) of a check held to `tol`.
    pub fn tolerance(&self, step: usize, tol: f64) -> f64 {
        if step <= 1 {
            return tol;
        }
        let most = self
            .apart
            .iter()
            .take(step)
            .copied()
            .filter(|d| d.is_finite())
            .fold(0.0, f64::max);
        tol.max(YARDSTICK_FACTOR * most)
    }

    /// "another thread count (2 → 1) moves the losses 0%, 1e-5%, 0.13% at
    /// steps 1–3"
    pub fn describe(&self) -> String {
        let from = self
            .baseline_threads
            .map_or_else(|| "?".to_string(), |t| t.to_string());
        let list: Vec<String> = self.apart.iter().map(|d| pct(*d)).collect();
        format!(
            "another thread count ({from} → {}) moves the losses {} at steps 1–{}",
            self.threads,
            list.join(", "),
            self.apart.len()
        )
    }
}

/// What the guard decided about a turn's losses.
#[derive(Clone, Debug, PartialEq)]
pub struct LossCheck {
    /// The change may stay (if it measured faster).
    pub ok: bool,
    /// One line for the turn's reason: "losses: 5 of 5 steps within 0.01%
    /// of the incumbent's (tolerance 0.1%)", or why it was rejected.
    pub summary: String,
}

/// How far apart two losses are, relative to the reference's; a non-finite
/// loss where the reference is finite is infinitely far.
fn apart(value: Option<f64>, reference: Option<f64>) -> f64 {
    match (value, reference) {
        (Some(v), Some(r)) if v.is_finite() && r.is_finite() => {
            let d = (v - r).abs();
            if d == 0.0 {
                0.0
            } else {
                d / r.abs().max(1e-12)
            }
        }
        (None, None) => 0.0,
        _ => f64::INFINITY,
    }
}

fn pct(x: f64) -> String {
    if x == 0.0 {
        "0%".into()
    } else if x < 1e-6 {
        // Float rounding: its order of magnitude is what to see.
        format!("{:.0e}%", x * 100.0)
    } else if x < 0.001 {
        format!("{:.4}%", x * 100.0)
    } else {
        format!("{:.2}%", x * 100.0)
    }
}

fn show(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.4}"))
        .unwrap_or_else(|| "NaN/inf".into())
}

/// Checks a compute turn's candidate runs. `incumbent` are the turn's
/// incumbent runs, `baseline` the run's baseline runs.
pub fn check(
    knob: ComputeKnob,
    incumbent: &[Measurement],
    baseline: &[Measurement],
    candidate: &[Measurement],
    policy: &ComputePolicy,
) -> LossCheck {
    check_with(knob, incumbent, baseline, candidate, policy, None)
}

/// [`check`] with later steps held to the script's yardstick, when the
/// baseline measured one.
pub fn check_with(
    knob: ComputeKnob,
    incumbent: &[Measurement],
    baseline: &[Measurement],
    candidate: &[Measurement],
    policy: &ComputePolicy,
    yardstick: Option<&Yardstick>,
) -> LossCheck {
    let numerics = knob.numerics();
    let (reference, against, tol, key) = match numerics {
        Numerics::Preserving => (
            incumbent,
            "the incumbent's",
            policy.exact_rtol,
            "exact_rtol",
        ),
        // The baseline's, unless it recorded none (a run folder from before).
        Numerics::Changing if baseline.iter().any(|m| !m.losses.is_empty()) => {
            (baseline, "the baseline's", policy.loss_rtol, "loss_rtol")
        }
        Numerics::Changing => (incumbent, "the incumbent's", policy.loss_rtol, "loss_rtol"),
    };
    let (first_check, over) = compare(
        knob,
        numerics,
        reference,
        against,
        tol,
        key,
        candidate,
        policy.exact_rtol,
        yardstick,
    );
    // The same computation with other random draws (dropout after a layout
    // change): bit-closeness cannot hold, so the change is held to what a
    // numerics-changing one must meet, against the baseline.
    if over
        && numerics == Numerics::Preserving
        && knob.moves_random_draws()
        && baseline.iter().any(|m| !m.losses.is_empty())
    {
        let (again, _) = compare(
            knob,
            Numerics::Changing,
            baseline,
            "the baseline's",
            policy.loss_rtol,
            "loss_rtol",
            candidate,
            policy.exact_rtol,
            yardstick,
        );
        let why = "random draws such as dropout's follow the memory layout, so it is held to [compute] loss_rtol";
        return LossCheck {
            ok: again.ok,
            summary: if again.ok {
                format!(
                    "not bit-close ({}); {why}: {}",
                    first_check.summary, again.summary
                )
            } else {
                format!(
                    "{}; {why}, and fails it too: {}",
                    first_check.summary, again.summary
                )
            },
        };
    }
    first_check
}

/// The candidate runs' losses against the reference runs', step by step;
/// also whether it failed by being over `tol` (not for want of losses).
#[allow(clippy::too_many_arguments)]
fn compare(
    knob: ComputeKnob,
    numerics: Numerics,
    reference: &[Measurement],
    against: &str,
    tol: f64,
    key: &str,
    candidate: &[Measurement],
    exact_rtol: f64,
    yardstick: Option<&Yardstick>,
) -> (LossCheck, bool) {
    let refs: Vec<&Vec<Option<f64>>> = reference
        .iter()
        .map(|m| &m.losses)
        .filter(|l| !l.is_empty())
        .collect();
    let fail = |summary: String| (LossCheck { ok: false, summary }, false);
    let pass = |summary: String| (LossCheck { ok: true, summary }, false);
    let Some(first) = refs.first() else {
        let why = "losses not checked: the reference runs recorded none";
        return match numerics {
            Numerics::Preserving => pass(why.into()),
            Numerics::Changing => fail(format!(
                "{why}, and `{knob}` may change the numerics: rejected"
            )),
        };
    };
    // The reference runs against each other: reproducible?
    let noise = refs
        .iter()
        .skip(1)
        .flat_map(|l| l.iter().zip(first.iter()).map(|(a, b)| apart(*a, *b)))
        .fold(0.0, f64::max);
    if noise > exact_rtol {
        let why = format!(
            "losses not checked: {against} own runs differ by up to {} (is the job seeded?)",
            pct(noise)
        );
        return match numerics {
            Numerics::Preserving => pass(why),
            Numerics::Changing => fail(format!(
                "{why}; `{knob}` may change the numerics and cannot be checked: rejected"
            )),
        };
    }
    let tol_at = |step: usize| yardstick.map_or(tol, |y| y.tolerance(step, tol));
    // The worst step by its distance over its own tolerance.
    let mut worst: (f64, usize, Option<f64>, Option<f64>) = (0.0, 0, None, None);
    let mut worst_share = -1.0;
    let mut steps = 0;
    let (mut step1, mut most) = (0.0f64, 0.0f64);
    for m in candidate {
        if m.losses.is_empty() {
            return fail(format!(
                "a candidate run recorded no losses (against {} steps of {against}): rejected",
                first.len()
            ));
        }
        let n = m.losses.len().min(first.len());
        steps = steps.max(n);
        for (i, (c, r)) in m.losses.iter().zip(first.iter()).enumerate() {
            let d = apart(*c, *r);
            if i == 0 {
                step1 = step1.max(d);
            }
            most = most.max(d);
            let share = if d.is_finite() {
                d / tol_at(i + 1).max(1e-300)
            } else {
                f64::INFINITY
            };
            if share > worst_share {
                worst_share = share;
                worst = (d, i + 1, *c, *r);
            }
        }
    }
    let (d, step, c, r) = worst;
    let step_tol = tol_at(step);
    if d > step_tol {
        let calibrated = match (yardstick, step_tol > tol) {
            (Some(y), true) => format!(
                " (step {step}'s: {}× what {})",
                YARDSTICK_FACTOR,
                y.describe()
            ),
            _ => String::new(),
        };
        let (c, _) = fail(format!(
            "loss at step {step}: {} vs {} ({against}), {} apart, over the {} tolerance ([compute] {key}){calibrated} for `{knob}`",
            show(c),
            show(r),
            if d.is_finite() { pct(d) } else { "infinitely".into() },
            pct(step_tol),
        ));
        return (c, true);
    }
    match yardstick {
        // Later steps were let past the plain tolerance by the yardstick: say so.
        Some(y) if most > tol => pass(format!(
            "losses: step 1 within {} of {against} (tolerance {}); later steps within {}, under {}× what {}",
            pct(step1),
            pct(tol),
            pct(most),
            YARDSTICK_FACTOR,
            y.describe()
        )),
        _ => pass(format!(
            "losses: {steps} of {} steps within {} of {against} (tolerance {})",
            first.len(),
            pct(most),
            pct(tol)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(losses: &[f64]) -> Measurement {
        Measurement {
            samples_per_sec: 100.0,
            losses: losses.iter().map(|v| Some(*v)).collect(),
            ..Default::default()
        }
    }

    fn policy() -> ComputePolicy {
        ComputePolicy {
            exact_rtol: 1e-3,
            loss_rtol: 0.02,
            ..Default::default()
        }
    }

    const BASE: [f64; 5] = [2.301, 2.25, 2.2, 2.1, 2.05];

    #[test]
    fn a_numerics_preserving_change_must_match_the_incumbent_to_rounding() {
        let inc = [run(&BASE), run(&BASE)];
        let same = run(&[2.301, 2.25, 2.2000005, 2.1, 2.05]);
        let c = check(
            ComputeKnob::NumThreads,
            &inc,
            &inc,
            &[same.clone(), same],
            &policy(),
        );
        assert!(c.ok, "{c:?}");
        assert!(
            c.summary
                .starts_with("losses: 5 of 5 steps within 2e-5% of the incumbent's"),
            "{}",
            c.summary
        );
        assert!(c.summary.contains("(tolerance 0.10%)"), "{}", c.summary);
        // 1% off at step 3 is a different computation, not rounding.
        let off = run(&[2.301, 2.25, 2.222, 2.1, 2.05]);
        let c = check(ComputeKnob::FusedOptimizer, &inc, &inc, &[off], &policy());
        assert!(!c.ok);
        assert_eq!(
            c.summary,
            "loss at step 3: 2.2220 vs 2.2000 (the incumbent's), 1.00% apart, over the 0.10% tolerance ([compute] exact_rtol) for `fused_optimizer`"
        );
    }

    #[test]
    fn channels_last_with_other_dropout_masks_is_held_to_the_loss_tolerance() {
        let inc = [run(&BASE), run(&BASE)];
        // Other units dropped: about 1% apart, as on an MNIST-style net.
        let other_masks = run(&[2.301, 2.27, 2.18, 2.12, 2.04]);
        let c = check(
            ComputeKnob::ChannelsLast,
            &inc,
            &inc,
            std::slice::from_ref(&other_masks),
            &policy(),
        );
        assert!(c.ok, "{c:?}");
        assert!(
            c.summary.starts_with("not bit-close (loss at step"),
            "{}",
            c.summary
        );
        assert!(c.summary.contains("dropout"), "{}", c.summary);
        assert!(
            c.summary
                .ends_with("within 0.95% of the baseline's (tolerance 2.00%)"),
            "{}",
            c.summary
        );
        // The same drift on a change that draws nothing at random is a
        // different computation.
        assert!(
            !check(
                ComputeKnob::ForeachOptimizer,
                &inc,
                &inc,
                &[other_masks],
                &policy()
            )
            .ok
        );
        // Further than the loss tolerance: rejected, both figures given.
        let far = run(&[2.301, 2.35, 2.2, 2.1, 2.05]);
        let c = check(ComputeKnob::ChannelsLast, &inc, &inc, &[far], &policy());
        assert!(!c.ok);
        assert!(c.summary.contains("exact_rtol"), "{}", c.summary);
        assert!(c.summary.contains("fails it too"), "{}", c.summary);
        assert!(
            c.summary
                .contains("over the 2.00% tolerance ([compute] loss_rtol)"),
            "{}",
            c.summary
        );
    }

    #[test]
    fn a_numerics_changing_change_stays_within_the_stated_tolerance_of_the_baseline() {
        let base = [run(&BASE)];
        // The incumbent already drifted 1.5% (an earlier kept autocast).
        let drifted: Vec<f64> = BASE.iter().map(|v| v * 1.015).collect();
        let inc = [run(&drifted)];
        // Another 1.5% on top: 3% from the baseline, though 1.5% from the incumbent.
        let more: Vec<f64> = drifted.iter().map(|v| v * 1.015).collect();
        let c = check(ComputeKnob::Compile, &inc, &base, &[run(&more)], &policy());
        assert!(!c.ok, "{c:?}");
        assert!(c.summary.contains("(the baseline's)"), "{}", c.summary);
        assert!(
            c.summary
                .contains("over the 2.00% tolerance ([compute] loss_rtol) for `compile`"),
            "{}",
            c.summary
        );
        let c = check(
            ComputeKnob::Autocast,
            &base,
            &base,
            &[run(&drifted)],
            &policy(),
        );
        assert!(c.ok, "{c:?}");
        assert!(
            c.summary.contains("within 1.50% of the baseline's"),
            "{}",
            c.summary
        );
    }

    #[test]
    fn nan_losses_and_missing_ones_are_rejected() {
        let inc = [run(&BASE)];
        let mut nan = run(&BASE);
        nan.losses[1] = None;
        let c = check(ComputeKnob::Autocast, &inc, &inc, &[nan], &policy());
        assert!(!c.ok);
        assert!(
            c.summary.starts_with("loss at step 2: NaN/inf vs 2.2500"),
            "{}",
            c.summary
        );
        assert!(c.summary.contains("infinitely apart"), "{}", c.summary);
        let c = check(ComputeKnob::NumThreads, &inc, &inc, &[run(&[])], &policy());
        assert!(!c.ok);
        assert!(c.summary.contains("recorded no losses"), "{}", c.summary);
    }

    #[test]
    fn unreproducible_reference_runs_pass_a_preserving_change_and_reject_a_changing_one() {
        let inc = [run(&BASE), run(&[2.4, 2.3, 2.2, 2.1, 2.0])];
        let c = check(
            ComputeKnob::NumThreads,
            &inc,
            &inc,
            &[run(&BASE)],
            &policy(),
        );
        assert!(c.ok);
        assert!(c.summary.contains("is the job seeded?"), "{}", c.summary);
        let c = check(ComputeKnob::Tf32, &inc, &inc, &[run(&BASE)], &policy());
        assert!(!c.ok);
        assert!(
            c.summary.ends_with("cannot be checked: rejected"),
            "{}",
            c.summary
        );
        // No losses at all (a harness from before): preserving passes, changing does not.
        let none = [run(&[])];
        assert!(
            check(
                ComputeKnob::ForeachOptimizer,
                &none,
                &none,
                &[run(&BASE)],
                &policy()
            )
            .ok
        );
        assert!(!check(ComputeKnob::Compile, &none, &none, &[run(&BASE)], &policy()).ok);
    }

    /// The public ImageNet example's shape: step 1 equal, later steps apart
    /// the way training at lr 0.1 amplifies any reordering.
    const IMAGENET: [f64; 5] = [6.7656, 6.70, 6.60, 6.50, 6.40];

    fn moved(base: &[f64], by: &[f64]) -> Measurement {
        run(&base
            .iter()
            .zip(by)
            .map(|(b, d)| b * (1.0 + d))
            .collect::<Vec<_>>())
    }

    fn yardstick() -> Yardstick {
        let mut cal = moved(&IMAGENET, &[0.0, 5e-4, 0.003, 0.008, 0.01]);
        cal.torch_threads = Some(1);
        let mut base = run(&IMAGENET);
        base.torch_threads = Some(2);
        Yardstick::of(&[base], &cal).unwrap()
    }

    #[test]
    fn the_yardstick_is_another_thread_counts_divergence_step_by_step() {
        let y = yardstick();
        assert_eq!((y.threads, y.baseline_threads), (1, Some(2)));
        assert!((y.apart[4] - 0.01).abs() < 1e-9, "{y:?}");
        // Step 1 keeps the tolerance; later ones the larger of it and 5× the
        // most the yardstick moved by then.
        assert_eq!(y.tolerance(1, 1e-3), 1e-3);
        assert!((y.tolerance(3, 1e-3) - 0.015).abs() < 1e-9);
        assert!((y.tolerance(5, 1e-3) - 0.05).abs() < 1e-9);
        assert!(y
            .describe()
            .starts_with("another thread count (2 → 1) moves the losses 0%"));
        // A calibration run without losses (or threads) gives none.
        assert_eq!(Yardstick::of(&[run(&IMAGENET)], &run(&[])), None);
    }

    #[test]
    fn a_layout_change_passes_on_step_one_and_the_scripts_own_divergence() {
        let inc = [run(&IMAGENET), run(&IMAGENET)];
        // channels_last as measured: 0.13%, 0.9% and 3.95% apart by step 5.
        let cl = moved(&IMAGENET, &[0.0, 0.0013, 0.009, 0.02, 0.0395]);
        let plain = check(
            ComputeKnob::ChannelsLast,
            &inc,
            &inc,
            std::slice::from_ref(&cl),
            &policy(),
        );
        assert!(!plain.ok, "{}", plain.summary);
        let y = yardstick();
        let c = check_with(
            ComputeKnob::ChannelsLast,
            &inc,
            &inc,
            &[cl],
            &policy(),
            Some(&y),
        );
        assert!(c.ok, "{}", c.summary);
        assert!(
            c.summary.starts_with("losses: step 1 within 0% of the incumbent's (tolerance 0.10%); later steps within 3.95%, under 5× what another thread count (2 → 1)"),
            "{}",
            c.summary
        );
        // Step 1 differs: same weights, same batch, so no yardstick excuses
        // it (foreach moves no random draw, so no dropout fallback either).
        let off = moved(&IMAGENET, &[0.005, 0.005, 0.009, 0.02, 0.0395]);
        let c = check_with(
            ComputeKnob::ForeachOptimizer,
            &inc,
            &inc,
            &[off],
            &policy(),
            Some(&y),
        );
        assert!(
            !c.ok && c.summary.starts_with("loss at step 1"),
            "{}",
            c.summary
        );
        // A backward pass gone wrong shows at step 2, far past the yardstick.
        let bug = moved(&IMAGENET, &[0.0, 0.03, 0.05, 0.08, 0.1]);
        let c = check_with(
            ComputeKnob::ForeachOptimizer,
            &inc,
            &inc,
            &[bug],
            &policy(),
            Some(&y),
        );
        assert!(!c.ok, "{}", c.summary);
        assert!(
            c.summary
                .contains("(step 2's: 5× what another thread count"),
            "{}",
            c.summary
        );
    }

    #[test]
    fn autocast_is_held_to_precision_at_step_one_and_the_yardstick_later() {
        let base = [run(&IMAGENET)];
        // bf16: step 1 0.7% apart (rounding), step 5 3.95% (chaos).
        let bf16 = moved(&IMAGENET, &[0.007, 0.008, 0.012, 0.025, 0.0395]);
        let plain = check(
            ComputeKnob::Autocast,
            &base,
            &base,
            std::slice::from_ref(&bf16),
            &policy(),
        );
        assert!(!plain.ok, "{}", plain.summary);
        let y = yardstick();
        let c = check_with(
            ComputeKnob::Autocast,
            &base,
            &base,
            &[bf16],
            &policy(),
            Some(&y),
        );
        assert!(c.ok, "{}", c.summary);
        // Over loss_rtol at step 1: beyond what bf16 rounding explains.
        let far = moved(&IMAGENET, &[0.03, 0.02, 0.02, 0.02, 0.02]);
        let c = check_with(
            ComputeKnob::Autocast,
            &base,
            &base,
            &[far],
            &policy(),
            Some(&y),
        );
        assert!(
            !c.ok && c.summary.starts_with("loss at step 1"),
            "{}",
            c.summary
        );
    }
}
