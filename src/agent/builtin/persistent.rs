//! persistent_workers=True: keeps the workers alive across epochs. Tried
//! before more workers when the measurement saw epochs restart them (their
//! start-up then counts against every later count), else after the prefetch
//! rule, unless the measurement saw no epoch begin (it could not tell a
//! difference). Reverted at a few workers, it is tried once more after the
//! count has doubled.

use super::{LoaderState, Proposal, Tried};
use crate::knob::LoaderKnob;

/// Before the climb: workers that start again every epoch are kept first.
pub(super) fn before_workers(s: &LoaderState<'_>) -> Option<Proposal> {
    let restarts = s.incumbent.planned_epoch_starts().is_some_and(|n| n > 0);
    (s.nw > 0 && restarts).then(|| proposal(s)).flatten()
}

/// After the prefetch rule: unless no epoch began during the measurement.
pub(super) fn after_prefetch(s: &LoaderState<'_>) -> Option<Proposal> {
    let saw_no_epoch = s.incumbent.planned_epoch_starts() == Some(0);
    (s.nw > 0 && !saw_no_epoch).then(|| proposal(s)).flatten()
}

/// persistent_workers=True, when the policy allows it, it is not set, and it
/// was not tried (or is worth trying again).
fn proposal(s: &LoaderState<'_>) -> Option<Proposal> {
    let cur = s.current(LoaderKnob::PersistentWorkers);
    (s.allows(LoaderKnob::PersistentWorkers)
        && cur.as_deref() != Some("True")
        && (!s.was_tried(LoaderKnob::PersistentWorkers, "True") || worth_again(&s.tried, s.nw)))
    .then(|| Proposal {
        knob: LoaderKnob::PersistentWorkers,
        value: "True".into(),
        // A window ended inside its stretch counts the starts of the steps
        // a run times (`Measurement::planned_epoch_starts`), not all of
        // them seen.
        why: match (
            s.incumbent.planned_epoch_starts(),
            s.incumbent.ended_in_stretch(),
        ) {
            (Some(1), false) => {
                "an epoch began during the measurement, starting the workers again".into()
            }
            (Some(n), false) if n > 0 => {
                format!("{n} epochs began during the measurement, each starting the workers again")
            }
            (Some(n), true) if n > 0 => format!(
                "the {} steps a run times hold {n} epoch start(s), each starting the workers again",
                s.incumbent.planned_steps().unwrap_or(0)
            ),
            _ => "keep workers alive across epochs instead of restarting them".into(),
        },
    })
}

/// Whether persistent_workers, reverted before, deserves another turn: each
/// epoch starts every worker again, so what keeping them alive saves grows
/// with their number. Once the count has at least doubled since that turn
/// (2 → 16 after a revert at 2, say), the old verdict says little.
pub(super) fn worth_again(tried: &[Tried], nw: u64) -> bool {
    let Some(at) = tried
        .iter()
        .rposition(|t| t.is(LoaderKnob::PersistentWorkers) && !t.decision.is_kept())
    else {
        return false;
    };
    let count = |v: &str| {
        if v == "(default)" {
            Some(0)
        } else {
            v.parse::<u64>().ok()
        }
    };
    let workers = |t: &&Tried| t.is(LoaderKnob::NumWorkers);
    // The count when it was tried: set by the last kept change before it, or
    // else what the first change after it started from.
    let then = match tried[..at]
        .iter()
        .rev()
        .filter(|t| t.decision.is_kept())
        .find(workers)
    {
        Some(t) => count(&t.to),
        None => tried[at + 1..]
            .iter()
            .find(workers)
            .and_then(|t| count(&t.from)),
    };
    then.is_some_and(|w| nw >= 2 * w.max(1))
}

#[cfg(test)]
mod tests {
    use super::super::tests::{meas, row, site};
    use super::*;
    use crate::bench::Measurement;
    use crate::config::DecisionPolicy;
    use crate::knob::LoaderKnob;
    use crate::turn::{Decision, TurnRow};

    const SRC: &str = "DataLoader(ds, num_workers=4)\n";

    fn with_epochs(nw: u64, starts: Option<u32>) -> Measurement {
        Measurement {
            epoch_starts_timed: starts,
            ..meas(nw, 0.5, false)
        }
    }

    fn both(m: &Measurement, history: &[TurnRow]) -> (Option<Proposal>, Option<Proposal>) {
        let (s, d) = (site(SRC), DecisionPolicy::default());
        let knobs = [LoaderKnob::PersistentWorkers];
        let st = LoaderState::of(m, &s, history, &knobs, &d);
        (before_workers(&st), after_prefetch(&st))
    }

    #[test]
    fn epochs_restarting_the_workers_bring_it_before_more_workers() {
        let (before, after) = both(&with_epochs(4, Some(2)), &[]);
        let p = before.expect("before the climb");
        assert_eq!(p.knob, LoaderKnob::PersistentWorkers);
        assert!(p.why.starts_with("2 epochs began"), "{}", p.why);
        assert!(after.is_some());
        // No epoch seen: not before the climb, nor after (no difference to see).
        assert_eq!(both(&with_epochs(4, Some(0)), &[]), (None, None));
        // Not known: only after the prefetch rule.
        let (before, after) = both(&with_epochs(4, None), &[]);
        assert_eq!(before, None);
        assert!(after.unwrap().why.starts_with("keep workers alive"));
        // No workers, nothing to keep.
        assert_eq!(both(&with_epochs(0, Some(2)), &[]), (None, None));
        // A window ended by time before its epoch's restart: the steps a
        // run times hold it, and the words say so, not that it was seen.
        let cut = Measurement {
            steps: Some(10),
            window_by_time: true,
            stretch: Some(40),
            warmup_steps: Some(5),
            batches_per_epoch: Some(32),
            ..with_epochs(4, Some(0))
        };
        let p = both(&cut, &[]).0.expect("before the climb");
        assert_eq!(
            p.why,
            "the 40 steps a run times hold 1 epoch start(s), each starting the workers again"
        );
    }

    #[test]
    fn reverted_at_few_workers_it_comes_again_once_the_count_doubled() {
        let h = vec![
            row(1, "num_workers 0 → 2", Decision::Kept),
            row(2, "persistent_workers (default) → True", Decision::Reverted),
        ];
        assert_eq!(both(&with_epochs(3, Some(1)), &h), (None, None));
        let (before, _) = both(&with_epochs(4, Some(1)), &h);
        assert!(before.is_some(), "4 workers is twice the 2 it was tried at");
        assert!(!worth_again(&super::super::tried(&h), 3));
        assert!(worth_again(&super::super::tried(&h), 4));
    }
}
