//! num_workers: the climb. It starts at the cores the job may use (fewer
//! when the command's batches fit fewer), then takes the count the
//! incumbent's figures say keeps up with the step ([`LoaderModel`]), within
//! the caps ([`super::worker_cap`], and below a count that did not fit the
//! command), while data_wait is large or the figures promise a gain; without
//! figures it doubles while the last step paid. A step reverted but pointing
//! up leads to the next count before the climb ends.

use super::{
    epoch_cap, fit_cap, memory_cap, unfit_cap, window_cap, worker_cap, LoaderState, Proposal,
    CLIMB_WHILE_DATA_WAIT_ABOVE,
};
use crate::agent::evidence::WORKER_HEADROOM;
use crate::bench::stats;
use crate::knob::LoaderKnob;
use crate::turn::Decision;

/// The next worker count, when the climb goes on.
pub(super) fn proposal(s: &LoaderState<'_>) -> Option<Proposal> {
    let (cpus, stop_when_data_wait_below) = (s.cpus, s.decision.stop_when_data_wait_below);
    let worth_climbing = s.share >= CLIMB_WHILE_DATA_WAIT_ABOVE.max(stop_when_data_wait_below)
        || (s.share >= stop_when_data_wait_below && s.model.is_some_and(|m| !m.saturated()));
    if !s.allows(LoaderKnob::NumWorkers) || !worth_climbing {
        return None;
    }
    let last = s.tried.iter().rev().find(|t| t.is(LoaderKnob::NumWorkers));
    // A step reverted with its median past 1 + min_gain but its interval
    // open is evidence of direction, not a wall: the next count is tried
    // before the climb ends (a noisy box can need more pairs than allowed).
    let pointing_up = last.and_then(|t| {
        let (r, ci) = t.ratio?;
        let to: u64 = t.to.parse().ok()?;
        (t.decision == Decision::Reverted && to > s.nw && stats::pointing_up(r, ci, s.decision))
            .then_some((to, r, ci))
    });
    // A count that did not fit the command's batches bounds the climb;
    // the largest count that fits is tried next (`fit_cap`).
    let climbing =
        last.is_none_or(|t| t.decision == Decision::Kept || t.did_not_fit) || pointing_up.is_some();
    let cap =
        worker_cap(s.cpus, s.nw, s.incumbent, s.model).min(unfit_cap(&s.tried, s.nw, s.incumbent));
    if let Some((to, r, ci)) = pointing_up {
        let next = (to * 2).min(cap);
        if next > to && !s.was_tried(LoaderKnob::NumWorkers, &next.to_string()) {
            return Some(Proposal {
                    knob: LoaderKnob::NumWorkers,
                    value: next.to_string(),
                    why: format!(
                        "num_workers {to} measured ×{r:.2} with its {:.0}% interval [{:.2}, {:.2}] open: not proven, but pointing up, so the next count before giving up",
                        s.decision.confidence * 100.0,
                        ci[0],
                        ci[1]
                    ),
                });
        }
    }
    // One worker only overlaps loading with the step; two is the first real gain.
    let next = match (s.nw, s.model) {
            // The command's batches fit fewer: the most that fit.
            (0, _) if (1..s.cpus.max(2)).contains(&cap) && s.incumbent.command_batches.is_some() => {
                Some((
                    cap,
                    format!(
                        "data_wait is {:.0}% of the step; the command runs {} training batches, so no more than {cap} worker(s) fit their first batches before the {} timed steps (a longer run in [bench] run measures more)",
                        s.share * 100.0,
                        s.incumbent.command_batches.unwrap_or(0),
                        s.incumbent.steps.unwrap_or(0)
                    ),
                ))
            }
            (0, _) => Some((
                s.cpus.max(2),
                format!(
                    "data_wait is {:.0}% of the step; start at the core count ({cpus}{})",
                    s.share * 100.0,
                    match s.incumbent.cores_limited_by.as_deref() {
                        Some("affinity") => format!(
                            ", the affinity mask's, of {} on the host",
                            s.incumbent.cpu_count.unwrap_or(0)
                        ),
                        Some("cgroup_quota") => format!(
                            ", the cgroup CPU quota's, of {} on the host",
                            s.incumbent.cpu_count.unwrap_or(0)
                        ),
                        _ => String::new(),
                    }
                ),
            )),
            (_, Some(m)) if m.saturated() => None,
            (_, Some(m)) => {
                let wanted = m.workers_needed();
                let need = wanted.min(cap);
                // The count now was itself chosen with that headroom (or is
                // the core count): wanting less than the headroom more is the
                // estimate moving within its own margin, a close call that
                // costs many runs to settle and is seldom kept.
                (need as f64 >= s.nw as f64 * WORKER_HEADROOM).then(|| {
                    let by_memory = memory_cap(s.nw, s.incumbent).filter(|(c, _)| *c == cap);
                    // Cut short by memory: say how many would keep up.
                    let keep_up = if by_memory.is_some() { wanted } else { need };
                    let mut why = format!(
                        "data_wait is {:.0}%: a worker takes {:.0} ms per batch and the step could take {:.1} ms, so about {keep_up} workers keep up (up to ×{:.1})",
                        s.share * 100.0,
                        m.batch_latency_s * 1e3,
                        m.best_step_s() * 1e3,
                        m.predicted_gain()
                    );
                    if need > (s.cpus * 8).clamp(8, 64) {
                        why.push_str(&format!(
                            "; past 8 per core: items wait, the cores could feed a faster step, and at {:.0} MB a worker memory allows it",
                            s.incumbent.memory_per_worker().unwrap_or(0.0) / 1e6
                        ));
                        if let Some((_, free)) = by_memory.filter(|_| wanted <= need) {
                            why.push_str(&format!(" ({})", free.describe()));
                        }
                    }
                    // Which memory figure stopped the count short of what keeps up.
                    if let Some((_, free)) = by_memory.filter(|_| wanted > need) {
                        why.push_str(&format!(
                            "; memory bounds it at {cap}, at {:.0} MB a worker: {}",
                            s.incumbent.memory_per_worker().unwrap_or(0.0) / 1e6,
                            free.describe()
                        ));
                    } else if wanted > need && epoch_cap(s.nw, s.incumbent) == Some(cap) {
                        why.push_str(&format!(
                            "; an epoch holds {cap} batches, so a worker past {cap} would have none to fetch"
                        ));
                    } else if wanted > need && fit_cap(s.nw, s.incumbent) == Some(cap) {
                        why.push_str(&format!(
                            "; the command runs {} training batches, so past {cap} workers their first batches and the {} timed steps do not fit (a longer run in [bench] run measures more)",
                            s.incumbent.command_batches.unwrap_or(0),
                            s.incumbent.steps.unwrap_or(0)
                        ));
                    } else if wanted > need && window_cap(s.nw, s.incumbent) == Some(cap) {
                        why.push_str(&format!(
                            "; past {cap} workers the {} timed steps could all be served from batches made ready before them (raise [bench] steps to measure more)",
                            s.incumbent.steps.unwrap_or(0)
                        ));
                    }
                    (need, why)
                })
            }
            (_, None) => Some((
                s.nw * 2,
                format!(
                    "data_wait still {:.0}% and the last step up paid",
                    s.share * 100.0
                ),
            )),
        };
    if let Some((next, why)) = next {
        if climbing && next <= cap && !s.was_tried(LoaderKnob::NumWorkers, &next.to_string()) {
            return Some(Proposal {
                knob: LoaderKnob::NumWorkers,
                value: next.to_string(),
                why,
            });
        }
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
    use crate::turn::TurnRow;

    fn propose(m: &Measurement, src: &str, history: &[TurnRow]) -> Option<Proposal> {
        let (s, d) = (site(src), DecisionPolicy::default());
        let knobs = [LoaderKnob::NumWorkers];
        proposal(&LoaderState::of(m, &s, history, &knobs, &d))
    }

    #[test]
    fn the_climb_starts_at_the_core_count_and_doubles_while_kept() {
        let p = propose(&meas(0, 0.8, false), "DataLoader(ds)\n", &[]).unwrap();
        assert_eq!((p.knob, p.value.as_str()), (LoaderKnob::NumWorkers, "2"));
        assert!(p.why.contains("start at the core count (2)"), "{}", p.why);
        // Without the loader's figures: twice the count after a kept step.
        let h = [row(1, "num_workers (default) → 2", Decision::Kept)];
        let src = "DataLoader(ds, num_workers=2)\n";
        assert_eq!(propose(&meas(2, 0.8, false), src, &h).unwrap().value, "4");
    }

    #[test]
    fn a_revert_a_small_wait_or_a_policy_without_the_knob_ends_it() {
        let src = "DataLoader(ds, num_workers=2)\n";
        let h = [
            row(1, "num_workers (default) → 2", Decision::Kept),
            row(2, "num_workers 2 → 4", Decision::Reverted),
        ];
        assert_eq!(propose(&meas(2, 0.8, false), src, &h), None);
        assert_eq!(propose(&meas(2, 0.05, false), src, &[]), None);
        let (m, s, d) = (meas(0, 0.8, false), site(src), DecisionPolicy::default());
        let knobs = [LoaderKnob::PinMemory];
        assert_eq!(proposal(&LoaderState::of(&m, &s, &[], &knobs, &d)), None);
    }

    #[test]
    fn a_revert_pointing_up_leads_to_the_next_count() {
        let src = "DataLoader(ds, num_workers=2)\n";
        let mut up = row(2, "num_workers 2 → 4", Decision::Reverted);
        up.ratio = Some(1.2);
        up.ratio_ci = Some([0.95, 1.5]);
        let h = [row(1, "num_workers (default) → 2", Decision::Kept), up];
        let m = Measurement {
            cpu_count: Some(8),
            ..meas(2, 0.8, false)
        };
        let p = propose(&m, src, &h).unwrap();
        assert_eq!(p.value, "8");
        assert!(p.why.contains("pointing up"), "{}", p.why);
    }
}
