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
    (m.epoch_starts_timed == Some(0) && short).then_some(per_epoch)
}

/// The configured steps widened to one epoch, as recorded for the report.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Widened {
    /// `[bench] steps`.
    pub configured: u32,
    /// What each run timed: one epoch's batches.
    pub steps: u32,
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
