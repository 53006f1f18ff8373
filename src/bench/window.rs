//! How many batches a run times: `[bench] steps`, or one whole epoch when
//! epochs are short and the configured steps hold no epoch start.
//!
//! Why: at an epoch's start every worker delivers its first batches at once.
//! A window of timed steps that begins just after that burst and ends before
//! the next epoch is served partly from batches made ready before it: the
//! throughput reads high, the CPU a sample reads low, and the epoch's restart
//! that paid for the burst is never measured. Any run of exactly one epoch's
//! batches holds every position of an epoch once, one epoch start included,
//! so it measures what an epoch really costs. The loop and `tuneloop bench`
//! decide this once, from the first run, and time every later run alike.
//!
//! Also the one exception to "every run times the same window": a
//! candidate's window is cut once it has run [`CUT_AFTER`] times the
//! incumbent's ([`cap_s`]).

use super::Measurement;

/// A whole epoch is timed only while it costs at most this many times the
/// configured steps (the window a user chose to pay for). Past that the
/// builtin agent caps workers to what the timed steps can tell apart. At 2
/// the workloads of `make bench-tuner` (epochs of 256 and 512 batches over
/// 30 to 120 timed steps) keep their windows.
pub const MAX_EPOCH_WINDOW: u32 = 2;

/// The steps a run should time instead of `steps`, when `m` (a run that
/// timed `steps`) says its epochs are short and no epoch start was timed.
pub fn whole_epoch_steps(m: &Measurement, steps: u32) -> Option<u32> {
    let per_epoch = u32::try_from(m.batches_per_epoch?).ok()?;
    let short = per_epoch > steps && per_epoch <= steps.saturating_mul(MAX_EPOCH_WINDOW);
    (m.planned_epoch_starts() == Some(0) && short).then_some(per_epoch)
}

/// The configured steps widened to one epoch, as recorded for the report.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Widened {
    /// `[bench] steps`.
    pub configured: u32,
    /// What each run timed: one epoch's batches.
    pub steps: u32,
}

/// A candidate's timed window ends once it has run this many times the
/// incumbent's longest window (and at least `[bench] window_s`), while its
/// first `steps` are still being timed. That window held at least those
/// steps, so a candidate cut then runs at under 1/4 of that incumbent run's
/// rate, both over the steps it timed and over the window it would have
/// timed (which, past `window_s`, would not have been lengthened): a ratio
/// no rule keeps, whichever of the two it is given. Timing such a run to
/// its end told the rule nothing and cost minutes: bf16 autocast on a CPU
/// without bf16 instructions ran `bench/workloads/compute_bound` at 32
/// samples/s against 2,500, a minute a window (bench/RESULTS.md, "A slow
/// candidate's window cut").
pub const CUT_AFTER: f64 = 4.0;

/// A window whose first stretch of `steps` is not timed by this many times
/// `[bench] window_s` ends at the step under way
/// (`Measurement::window_by_time`): every window is then between `window_s`
/// and twice it, whatever the rate, unless it is one whole epoch. A slow
/// run's `steps` (the baseline without workers: 6 s for 80 batches of
/// `bench/workloads/io_latency`) otherwise timed for seconds past what its
/// figure needs, each such run (bench/RESULTS.md, "Windows by time, both
/// ways"). The harness and the instrumentation are given the product
/// (`Bencher::window_slow_s`).
pub const SLOW_AFTER: f64 = 2.0;

/// The cap on a candidate's window, from the incumbent's runs so far: none
/// before one has a window to go by.
pub fn cap_s(incumbent: &[Measurement]) -> Option<f64> {
    let longest = incumbent
        .iter()
        .filter_map(|m| m.wall_s)
        .filter(|w| w.is_finite() && *w > 0.0)
        .fold(None, |a: Option<f64>, w| Some(a.map_or(w, |a| a.max(w))))?;
    Some(CUT_AFTER * longest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(per_epoch: Option<u64>, starts: Option<u32>) -> Measurement {
        Measurement {
            batches_per_epoch: per_epoch,
            epoch_starts_timed: starts,
            ..Measurement::default()
        }
    }

    #[test]
    fn a_short_epoch_without_a_timed_start_is_timed_whole() {
        // The argparse example: 64 batches an epoch, 40 timed from batch 5.
        assert_eq!(whole_epoch_steps(&run(Some(64), Some(0)), 40), Some(64));
        assert_eq!(whole_epoch_steps(&run(Some(80), Some(0)), 40), Some(80));
    }

    #[test]
    fn the_configured_steps_stay_where_they_already_see_an_epoch_start_or_cannot() {
        // An epoch start is timed already.
        assert_eq!(whole_epoch_steps(&run(Some(32), Some(1)), 40), None);
        // Long epochs: a whole one would cost more than 2 windows.
        assert_eq!(whole_epoch_steps(&run(Some(81), Some(0)), 40), None);
        // No length (an iterable dataset), or a harness that does not say.
        assert_eq!(whole_epoch_steps(&run(None, Some(0)), 40), None);
        assert_eq!(whole_epoch_steps(&run(Some(64), None), 40), None);
        // Not longer than the window.
        assert_eq!(whole_epoch_steps(&run(Some(40), Some(0)), 40), None);
    }
}
