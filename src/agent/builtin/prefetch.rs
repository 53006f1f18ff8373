//! prefetch_factor: doubled (to 4 at least, 16 at most), once, when the
//! wait comes as stalls and workers are running. Not when the CPU or the
//! training process is the limit, when an epoch's batches are all requested
//! at its start, when the step waits steadily, nor past what the timed steps
//! (or the command's batches) can tell apart.

use super::{window_steps, LoaderState, Proposal};
use crate::agent::evidence;

/// A deeper prefetch, when it can help.
pub(super) fn proposal(s: &LoaderState<'_>) -> Option<Proposal> {
    if s.nw == 0 {
        return None;
    }
    // Prefetching more cannot create CPU, nor speed up the training
    // process: not when either is the limit.
    let saturated = s.model.is_some_and(|m| m.saturated());
    let cur: u64 = s
        .current("prefetch_factor")
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
        .zip(s.incumbent.steps)
        .is_some_and(|(b, steps)| {
            crate::bench::command::warmup_that_fits(b, u64::from(steps))
                .is_none_or(|r| s.nw * next > r)
        });
    if s.allows("prefetch_factor")
        && s.share >= s.decision.stop_when_data_wait_below
        && !saturated
        && !short_epochs
        && !steady
        && !beyond_window
        && !beyond_fit
        && !s.tried.iter().any(|t| t.knob == "prefetch_factor")
        && next <= 16
    {
        return Some(Proposal {
            knob: "prefetch_factor",
            value: next.to_string(),
            why: "workers run ahead by more batches".into(),
        });
    }
    None
}
