//! prefetch_factor: doubled (to 4 at least, 16 at most), once, when the
//! wait comes as stalls and workers are running. Not when the CPU or the
//! training process is the limit, when an epoch's batches are all requested
//! at its start, when the step waits steadily, nor past what the timed steps
//! (or the command's batches) can tell apart.

use super::{window_steps, LoaderState, Proposal};
use crate::agent::evidence;
use crate::knob::LoaderKnob;

/// A deeper prefetch, when it can help.
pub(super) fn proposal(s: &LoaderState<'_>) -> Option<Proposal> {
    if s.nw == 0 {
        return None;
    }
    // Prefetching more cannot create CPU, nor speed up the training
    // process: not when either is the limit.
    let saturated = s.model.is_some_and(|m| m.saturated());
    let cur: u64 = s
        .current(LoaderKnob::PrefetchFactor)
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    // Nor when an epoch is so short that its batches are all requested at
    // its start already: the wait left is the epoch's first batch.
    let short_epochs = evidence::short_epochs(
        s.incumbent.batches_per_epoch,
        s.incumbent.epoch_starts_timed,
        s.incumbent.steps,
        s.nw,
        cur,
    );
    // Nor when the step waits steadily: then the workers' rate is the
    // limit, and a deeper queue does not raise it. Prefetching absorbs
    // stalls (most steps wait little, a few wait long).
    let steady = evidence::WaitShape::of(s.incumbent).is_some_and(|w| w.steady());
    let next = (cur * 2).max(4);
    // Nor past what the timed steps can tell apart (as for the workers,
    // `window_cap`): with num_workers × prefetch_factor batches past the
    // timed steps, all of them can be ready before those steps begin.
    let beyond_window = window_steps(s.incumbent).is_some_and(|steps| s.nw * next > steps);
    // Nor past the command's batches: the deeper first round must fit
    // before the timed steps.
    let beyond_fit = s
        .incumbent
        .command_batches
        .zip(s.incumbent.planned_steps())
        .is_some_and(|(b, steps)| {
            crate::bench::command::warmup_that_fits(b, u64::from(steps))
                .is_none_or(|r| s.nw * next > r)
        });
    if s.allows(LoaderKnob::PrefetchFactor)
        && s.share >= s.decision.stop_when_data_wait_below
        && !saturated
        && !short_epochs
        && !steady
        && !beyond_window
        && !beyond_fit
        && !s.tried.iter().any(|t| t.is(LoaderKnob::PrefetchFactor))
        && next <= 16
    {
        return Some(Proposal {
            knob: LoaderKnob::PrefetchFactor,
            value: next.to_string(),
            why: "workers run ahead by more batches".into(),
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::tests::{meas, row, site};
    use super::*;
    use crate::bench::Measurement;
    use crate::config::DecisionPolicy;
    use crate::knob::LoaderKnob;
    use crate::turn::{Decision, TurnRow};

    fn propose(m: &Measurement, src: &str, history: &[TurnRow]) -> Option<Proposal> {
        let (s, d) = (site(src), DecisionPolicy::default());
        let knobs = [LoaderKnob::PrefetchFactor];
        proposal(&LoaderState::of(m, &s, history, &knobs, &d))
    }

    #[test]
    fn a_deeper_prefetch_once_with_workers_and_a_large_wait() {
        let src = "DataLoader(ds, num_workers=2)\n";
        let p = propose(&meas(2, 0.5, false), src, &[]).unwrap();
        assert_eq!(
            (p.knob, p.value.as_str()),
            (LoaderKnob::PrefetchFactor, "4")
        );
        // From 4 it doubles; past 16 never.
        let deep = "DataLoader(ds, num_workers=2, prefetch_factor=4)\n";
        assert_eq!(propose(&meas(2, 0.5, false), deep, &[]).unwrap().value, "8");
        let deepest = "DataLoader(ds, num_workers=2, prefetch_factor=16)\n";
        assert_eq!(propose(&meas(2, 0.5, false), deepest, &[]), None);
        // No workers, a small wait, or tried already: nothing.
        assert_eq!(propose(&meas(0, 0.5, false), "DataLoader(ds)\n", &[]), None);
        assert_eq!(propose(&meas(2, 0.01, false), src, &[]), None);
        let h = [row(1, "prefetch_factor (default) → 4", Decision::Reverted)];
        assert_eq!(propose(&meas(2, 0.5, false), src, &h), None);
    }

    #[test]
    fn not_past_what_the_timed_steps_can_tell_apart() {
        let src = "DataLoader(ds, num_workers=4)\n";
        // 4 workers × 4 batches = 16 ready before 10 timed steps without
        // an epoch start among them.
        let m = Measurement {
            steps: Some(10),
            epoch_starts_timed: Some(0),
            ..meas(4, 0.5, false)
        };
        assert_eq!(propose(&m, src, &[]), None);
        // With an epoch start timed, the steps tell them apart.
        let m = Measurement {
            epoch_starts_timed: Some(1),
            ..m
        };
        assert!(propose(&m, src, &[]).is_some());
    }
}
