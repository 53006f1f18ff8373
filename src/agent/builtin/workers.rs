//! num_workers: the climb. From 0 workers it jumps to the count the
//! baseline's own figures predict (without workers, data_wait is one batch's
//! loading latency: [`jump`]), else starts at the cores the job may use
//! (fewer when the command's batches fit fewer); from there it takes the count the
//! incumbent's figures say keeps up with the step ([`LoaderModel`]), within
//! the caps ([`super::worker_cap`], and below a count that did not fit the
//! command), while data_wait is large or the figures promise a gain; without
//! figures it doubles while the last step paid. A step reverted but pointing
//! up leads to the next count before the climb ends; a jump not kept leads
//! to the core count once ([`after_a_jump`]), so a wrong prediction does not
//! lose the easy gain.

use super::{
    epoch_cap, fit_cap, memory_cap, unfit_cap, window_cap, worker_cap, LoaderState, Proposal,
    Tried, CLIMB_WHILE_DATA_WAIT_ABOVE,
};
use crate::agent::evidence::{LoaderModel, WORKER_HEADROOM};
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
    if let Some(p) = after_a_jump(s, last, cap) {
        return Some(p);
    }
    let jumped = match (s.nw, s.model) {
        (0, Some(m)) => jump(s, &m, cap),
        _ => None,
    };
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
                        s.incumbent.planned_steps().unwrap_or(0)
                    ),
                ))
            }
            // The baseline's figures predict a count well past the cores.
            (0, _) if jumped.is_some() => jumped,
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
                    if wanted > need {
                        why.push_str(&cut_short(s, cap, by_memory));
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

/// The first count from 0 workers, when the baseline's own figures predict
/// one clearly past the core count. Without workers the training process
/// loads each batch inside `next()`: data_wait per step is one batch's
/// loading latency (its waits included) and its CPU there the loading's, so
/// the model ([`LoaderModel::of`] at 0 workers) reads the latency and what
/// the cores can feed from the baseline itself. The count is the later
/// climb's (latency over the fastest step, with [`WORKER_HEADROOM`]), within
/// the same caps. The fastest step is the larger of the training step and
/// what the cores can feed, so a loader the CPU saturates gets no more than
/// the cores can feed. It jumps only when the workers that keep up, before
/// the headroom, are the headroom past the core count: a short latency or a
/// CPU-bound loader (its cores saturate near the core count) starts at the
/// core count, as the climb does without figures.
///
/// What the baseline cannot show is the workers' start: where epochs begin
/// within the measurement, workers not kept alive start again every epoch,
/// and a count near the epoch's batches pays a start for every batch or two
/// (16 workers on a 16-batch epoch measured ×1.0 against none on a loaded
/// 2-core box). There the jump asks for no more than each worker fetching
/// two prefetch rounds an epoch ([`restart_cap`]); `persistent_workers`,
/// tried next at a count with workers, removes the restarts and the climb
/// goes on from the figures measured with them.
fn jump(s: &LoaderState<'_>, m: &LoaderModel, cap: u64) -> Option<(u64, String)> {
    let start = s.cpus.max(2);
    let keep_up = m.batch_latency_s / m.best_step_s();
    let wanted = m.workers_needed();
    let restarts = restart_cap(s.incumbent).map(|c| c.max(start));
    let need = wanted.min(cap).min(restarts.unwrap_or(u64::MAX));
    if m.saturated()
        || keep_up < start as f64 * WORKER_HEADROOM
        || (need as f64) < start as f64 * WORKER_HEADROOM
    {
        return None;
    }
    let mut why = format!(
        "data_wait is {:.0}% at 0 workers: a batch takes {:.0} ms to load and the step could take {:.1} ms{}, so about {wanted} workers keep up (up to ×{:.1})",
        s.share * 100.0,
        m.batch_latency_s * 1e3,
        m.best_step_s() * 1e3,
        if m.cpu_bound() {
            format!(", what {:.1} free cores can feed", m.cores_free)
        } else {
            String::new()
        },
        m.predicted_gain()
    );
    if let Some(r) = restarts.filter(|r| wanted > need && *r == need && *r < cap) {
        why.push_str(&format!(
            "; workers start again every epoch here, and an epoch holds {} batches: at most {r}, each fetching two prefetch rounds an epoch, until persistent_workers keeps them alive",
            s.incumbent.batches_per_epoch.unwrap_or(0)
        ));
    } else if wanted > need {
        let cut = cut_short(s, cap, None);
        if cut.is_empty() {
            // No workers yet, so no measured memory per worker: the
            // normal cap of 8 per core holds until a count with workers.
            why.push_str(&format!(
                "; at most {cap} until a measurement with workers shows their memory"
            ));
        } else {
            why.push_str(&cut);
        }
    }
    Some((need, why))
}

/// The most workers worth starting again every epoch: an epoch's batches
/// over two prefetch rounds, when the measurement saw epochs begin (none
/// when it did not, or an epoch's length is unknown).
fn restart_cap(m: &crate::bench::Measurement) -> Option<u64> {
    let batches = m.batches_per_epoch.filter(|b| *b > 0)?;
    m.planned_epoch_starts()
        .is_some_and(|n| n > 0)
        .then(|| batches / (2 * super::prefetch_of(m)))
}

/// After a jump from 0 workers that was not kept — reverted (slower, or
/// not shown faster), or failed other than for the command's length — the
/// core count, once, before the climb ends: the prediction can miss what the
/// baseline could not show (the workers' start-up each epoch, sending the
/// batches), and the easy gain of a few workers should not be lost with it.
fn after_a_jump(s: &LoaderState<'_>, last: Option<&Tried>, cap: u64) -> Option<Proposal> {
    let start = s.cpus.max(2);
    let t = last?;
    let to: u64 = t.to.parse().ok()?;
    let from_none = matches!(t.from.as_str(), "(default)" | "0");
    let not_kept =
        t.decision == Decision::Reverted || (t.decision == Decision::Failed && !t.did_not_fit);
    if s.nw != 0
        || !from_none
        || !not_kept
        || to <= start
        || start > cap
        || s.was_tried(LoaderKnob::NumWorkers, &start.to_string())
    {
        return None;
    }
    let verdict = match t.ratio {
        Some((r, ci)) => format!("×{r:.2}, interval [{:.2}, {:.2}]", ci[0], ci[1]),
        None => "its measurement failed".into(),
    };
    Some(Proposal {
        knob: LoaderKnob::NumWorkers,
        value: start.to_string(),
        why: format!(
            "the jump to {to} workers was not kept ({verdict}): the core count ({start}) before the climb ends"
        ),
    })
}

/// Which cap stopped the count short of what keeps up, for the reason
/// text: memory (when `by_memory` is that cap), an epoch's batches, the
/// command's batches, the timed window; empty when none of these.
fn cut_short(
    s: &LoaderState<'_>,
    cap: u64,
    by_memory: Option<(u64, crate::bench::memory::FreeMemory)>,
) -> String {
    if let Some((_, free)) = by_memory {
        format!(
            "; memory bounds it at {cap}, at {:.0} MB a worker: {}",
            s.incumbent.memory_per_worker().unwrap_or(0.0) / 1e6,
            free.describe()
        )
    } else if epoch_cap(s.nw, s.incumbent) == Some(cap) {
        format!("; an epoch holds {cap} batches, so a worker past {cap} would have none to fetch")
    } else if fit_cap(s.nw, s.incumbent) == Some(cap) {
        format!(
            "; the command runs {} training batches, so past {cap} workers their first batches and the {} timed steps do not fit (a longer run in [bench] run measures more)",
            s.incumbent.command_batches.unwrap_or(0),
            s.incumbent.planned_steps().unwrap_or(0)
        )
    } else if window_cap(s.nw, s.incumbent) == Some(cap) {
        format!(
            "; past {cap} workers the {} timed steps could all be served from batches made ready before them (raise [bench] steps to measure more)",
            s.incumbent.planned_steps().unwrap_or(0)
        )
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{figures, meas, row, site};
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

    /// The demo's baseline: 0 workers, 68 ms of data_wait a step (a batch's
    /// loading), 0.8 ms of training, 7 ms of loading CPU: on 2 cores the
    /// step cannot beat 3.9 ms, so 68 / 3.9 × 1.25 → 22 workers keep up.
    fn demo_baseline() -> Measurement {
        figures(0, 68.0, 0.8, 7.0, 0.8, 0.0)
    }

    #[test]
    fn the_first_count_is_what_the_baselines_figures_predict() {
        let p = propose(&demo_baseline(), "DataLoader(ds)\n", &[]).unwrap();
        // 22 wanted; 8 per core on 2 cores, with no worker's memory measured yet.
        assert_eq!((p.knob, p.value.as_str()), (LoaderKnob::NumWorkers, "16"));
        for part in [
            "data_wait is 99% at 0 workers",
            "a batch takes 68 ms to load and the step could take 3.9 ms, what 2.0 free cores can feed",
            "so about 22 workers keep up",
            "at most 16 until a measurement with workers shows their memory",
        ] {
            assert!(p.why.contains(part), "{part}: {}", p.why);
        }
        // More cores and a step the training sets: the predicted count itself,
        // 30 ms / 2 ms × 1.25 → 19 of 64.
        let mut m = figures(0, 30.0, 2.0, 1.0, 2.0, 0.0);
        m.cpu_count = Some(8);
        let p = propose(&m, "DataLoader(ds)\n", &[]).unwrap();
        assert_eq!(p.value, "19", "{}", p.why);
        assert!(p.why.contains("so about 19 workers keep up"), "{}", p.why);
        assert!(!p.why.contains("free cores can feed"), "{}", p.why);
    }

    #[test]
    fn the_jump_keeps_every_cap_of_the_climb() {
        let src = "DataLoader(ds)\n";
        // An epoch of 12 batches.
        let mut m = demo_baseline();
        m.batches_per_epoch = Some(12);
        let p = propose(&m, src, &[]).unwrap();
        assert_eq!(p.value, "12", "{}", p.why);
        assert!(p.why.contains("an epoch holds 12 batches"), "{}", p.why);
        // 20 timed steps without an epoch start: past 10 workers (at
        // prefetch 2) they could all be served from the first burst.
        let mut m = demo_baseline();
        m.steps = Some(20);
        let p = propose(&m, src, &[]).unwrap();
        assert_eq!(p.value, "10", "{}", p.why);
        assert!(p.why.contains("the 20 timed steps could all"), "{}", p.why);
        // A command of 70 training batches and 40 timed steps: the first
        // rounds of 14 workers fit its 29 batches of warm-up.
        let mut m = figures(0, 80.0, 5.0, 1.0, 5.0, 0.0);
        m.steps = Some(40);
        m.command_batches = Some(70);
        let p = propose(&m, src, &[]).unwrap();
        assert_eq!(p.value, "14", "{}", p.why);
        assert!(
            p.why.contains("the command runs 70 training batches"),
            "{}",
            p.why
        );
        // A count that did not fit the command bounds the jump too.
        let mut failed = row(1, "num_workers (default) → 14", Decision::Failed);
        failed.reason = "bench failed (candidate): too_few_steps: …".into();
        let p = propose(&m, src, &[failed]).unwrap();
        assert_eq!(p.value, "13", "{}", p.why);
    }

    #[test]
    fn workers_started_every_epoch_bound_the_jump() {
        let src = "DataLoader(ds)\n";
        // An epoch began within the measurement: each of 16 batches would
        // pay a worker's start at 16 workers. Two prefetch rounds each: 4.
        let mut m = demo_baseline();
        m.epoch_starts_timed = Some(1);
        m.batches_per_epoch = Some(16);
        let p = propose(&m, src, &[]).unwrap();
        assert_eq!(p.value, "4", "{}", p.why);
        assert!(
            p.why.contains(
                "workers start again every epoch here, and an epoch holds 16 batches: at most 4"
            ),
            "{}",
            p.why
        );
        // The demo's 32-batch epochs: 8. A deeper prefetch leaves fewer.
        m.batches_per_epoch = Some(32);
        assert_eq!(propose(&m, src, &[]).unwrap().value, "8");
        m.loader.insert("prefetch_factor".into(), 4.into());
        assert_eq!(propose(&m, src, &[]).unwrap().value, "4");
        // Epochs of 8 batches leave no jump: the core count.
        m.batches_per_epoch = Some(8);
        let p = propose(&m, src, &[]).unwrap();
        assert_eq!(p.value, "2", "{}", p.why);
        assert!(p.why.contains("start at the core count"), "{}", p.why);
        // No epoch began within the measurement: the epoch's batches alone bound it.
        m.epoch_starts_timed = Some(0);
        m.batches_per_epoch = Some(12);
        assert_eq!(propose(&m, src, &[]).unwrap().value, "12");
        // The demo's baseline ended by time at batch 31, before its epoch's
        // restart at 32: its whole stretch (batches 5-44) holds that
        // restart, and a faster run times it, so the bound is still 8.
        let mut cut = demo_baseline();
        cut.epoch_starts_timed = Some(0);
        cut.batches_per_epoch = Some(32);
        cut.steps = Some(26);
        cut.window_by_time = true;
        cut.stretch = Some(40);
        cut.warmup_steps = Some(5);
        assert_eq!(propose(&cut, src, &[]).unwrap().value, "8");
    }

    #[test]
    fn without_a_prediction_past_the_cores_the_climb_starts_at_the_core_count() {
        let src = "DataLoader(ds)\n";
        let core_count = |m: &Measurement| {
            let p = propose(m, src, &[]).unwrap();
            assert_eq!(p.value, "2", "{}", p.why);
            assert!(p.why.contains("start at the core count (2)"), "{}", p.why);
        };
        // No loader figures (contract mode, an older harness).
        core_count(&meas(0, 0.8, false));
        // A short loading latency: 3 ms against a 2 ms step, 1.5 workers keep up.
        core_count(&figures(0, 3.0, 2.0, 0.5, 2.0, 0.0));
        // Loading that is CPU: 12 ms of it a batch and 2 ms of training on
        // 2 cores, 7 ms a step at best: the cores saturate near their count.
        core_count(&figures(0, 12.0, 2.0, 12.0, 2.0, 0.0));
    }

    #[test]
    fn a_jump_not_kept_leads_to_the_core_count_once() {
        let (src, m) = ("DataLoader(ds)\n", demo_baseline());
        let mut jump = row(1, "num_workers (default) → 16", Decision::Reverted);
        jump.ratio = Some(0.92);
        jump.ratio_ci = Some([0.81, 1.04]);
        let p = propose(&m, src, std::slice::from_ref(&jump)).unwrap();
        assert_eq!(p.value, "2", "{}", p.why);
        assert!(
            p.why
                .contains("the jump to 16 workers was not kept (×0.92, interval [0.81, 1.04])"),
            "{}",
            p.why
        );
        // Once: the core count reverted too ends the climb.
        let h = [
            jump.clone(),
            row(2, "num_workers (default) → 2", Decision::Reverted),
        ];
        assert_eq!(propose(&m, src, &h), None);
        // A jump that failed (16 workers crashed) also leads to the core count;
        // one that did not fit the command leads to the most that fit instead.
        let mut crashed = row(1, "num_workers (default) → 16", Decision::Failed);
        crashed.reason = "bench failed (candidate): crashed (signal 7)".into();
        let p = propose(&m, src, &[crashed]).unwrap();
        assert_eq!(p.value, "2", "{}", p.why);
        assert!(p.why.contains("its measurement failed"), "{}", p.why);
        // A jump under the cap that points up tries twice the count first,
        // and the core count after that one is not kept either.
        let mut up = row(1, "num_workers (default) → 8", Decision::Reverted);
        up.ratio = Some(1.3);
        up.ratio_ci = Some([0.95, 1.8]);
        let p = propose(&m, src, std::slice::from_ref(&up)).unwrap();
        assert_eq!(p.value, "16", "{}", p.why);
        assert!(p.why.contains("pointing up"), "{}", p.why);
        let h = [up, row(2, "num_workers (default) → 16", Decision::Reverted)];
        assert_eq!(propose(&m, src, &h).unwrap().value, "2");
        // A kept jump climbs on from the figures at 16 as before; a count
        // reverted from there ends the climb (the fallback is for a jump).
        let s16 = "DataLoader(ds, num_workers=16)\n";
        let h = [
            row(1, "num_workers (default) → 16", Decision::Kept),
            row(2, "num_workers 16 → 32", Decision::Reverted),
        ];
        assert_eq!(
            propose(&figures(16, 30.0, 5.0, 2.0, 5.5, 0.0), s16, &h),
            None
        );
    }
}
