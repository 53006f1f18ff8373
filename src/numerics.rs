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

use crate::bench::Measurement;
use crate::config::ComputePolicy;
use crate::knob::{ComputeKnob, Numerics};

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
    let mut worst: (f64, usize, Option<f64>, Option<f64>) = (0.0, 0, None, None);
    let mut steps = 0;
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
            if d > worst.0 || (d.is_infinite() && worst.0.is_finite()) || worst.1 == 0 {
                worst = (d, i + 1, *c, *r);
            }
        }
    }
    let (d, step, c, r) = worst;
    if d > tol {
        let (c, _) = fail(format!(
            "loss at step {step}: {} vs {} ({against}), {} apart, over the {} tolerance ([compute] {key}) for `{knob}`",
            show(c),
            show(r),
            if d.is_finite() { pct(d) } else { "infinitely".into() },
            pct(tol),
        ));
        return (c, true);
    }
    pass(format!(
        "losses: {steps} of {} steps within {} of {against} (tolerance {})",
        first.len(),
        pct(d),
        pct(tol)
    ))
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
}
