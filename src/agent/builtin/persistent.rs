//! persistent_workers=True: keeps the workers alive across epochs. Tried
//! before more workers when the measurement saw epochs restart them (their
//! start-up then counts against every later count), else after the prefetch
//! rule, unless the measurement saw no epoch begin (it could not tell a
//! difference). Reverted at a few workers, it is tried once more after the
//! count has doubled.

use super::{LoaderState, Proposal, Tried};

/// Before the climb: workers that start again every epoch are kept first.
pub(super) fn before_workers(s: &LoaderState<'_>) -> Option<Proposal> {
    let restarts = s.incumbent.epoch_starts_timed.is_some_and(|n| n > 0);
    (s.nw > 0 && restarts).then(|| proposal(s)).flatten()
}

/// After the prefetch rule: unless no epoch began during the measurement.
pub(super) fn after_prefetch(s: &LoaderState<'_>) -> Option<Proposal> {
    let saw_no_epoch = s.incumbent.epoch_starts_timed == Some(0);
    (s.nw > 0 && !saw_no_epoch).then(|| proposal(s)).flatten()
}

/// persistent_workers=True, when the policy allows it, it is not set, and it
/// was not tried (or is worth trying again).
fn proposal(s: &LoaderState<'_>) -> Option<Proposal> {
    let cur = s.current("persistent_workers");
    (s.allows("persistent_workers")
        && cur.as_deref() != Some("True")
        && (!s.was_tried("persistent_workers", "True") || worth_again(&s.tried, s.nw)))
    .then(|| Proposal {
        knob: "persistent_workers",
        value: "True".into(),
        why: match s.incumbent.epoch_starts_timed {
            Some(1) => "an epoch began during the measurement, starting the workers again".into(),
            Some(n) if n > 0 => {
                format!("{n} epochs began during the measurement, each starting the workers again")
            }
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
        .rposition(|t| t.knob == "persistent_workers" && !t.decision.is_kept())
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
    let workers = |t: &&Tried| t.knob == "num_workers";
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
