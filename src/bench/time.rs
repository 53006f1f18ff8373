//! Where a run's wall time goes: the seconds its bench runs spent in their
//! timed steps ([`measured_seconds`]), and the estimate of the time a running
//! session has left ([`time_left`]). Pure functions of figures the session
//! and the run folder already hold.

use serde::{Deserialize, Serialize};

use crate::bench::{stats, Measurement};
use crate::event::TimeLeft;

/// Where a run's wall time went (`report.json`'s `time`): the timed steps
/// of its throughput runs against the whole, and each turn's seconds.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct TimeSpent {
    /// The session's wall time, start to report.
    pub wall_s: f64,
    /// The timed steps' wall time of every throughput run summed: the
    /// baseline's, each turn's candidate and incumbent, the final
    /// comparison's. The baseline's profiled run (its steps are profiled,
    /// not measured) and command mode's whole-command rounds are not in it.
    pub measured_s: f64,
    /// `measured_s / wall_s`; absent without a wall time.
    pub measured_share: Option<f64>,
    /// Bench processes run in all (the profiled run and failed runs too).
    pub bench_runs: u32,
    /// The throughput runs whose timed steps `measured_s` sums.
    pub measured_runs: u32,
    /// Each decided turn's seconds, its start to its decision (from the
    /// event log; a turn done again after a resume counts its last try).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<TurnSeconds>,
    /// Around the timed windows of the same runs (managed mode, where the
    /// harness reports its phases): seconds summed by phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub around: Option<Around>,
    /// Command mode: the user's command timed whole, both states' rounds
    /// summed (`whole.json`). Measuring of its own, start and end included
    /// on purpose, so not timed steps; the report says it beside them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whole_s: Option<f64>,
}

/// The phases of a run around its timed window, summed over runs.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Around {
    /// The process's start to the harness's main() and `import torch`
    /// (next to nothing when forked from the fork server).
    pub start_s: f64,
    /// The project's import and its `build()`.
    pub build_s: f64,
    /// The first batch and the rest of the warm-up.
    pub warmup_s: f64,
    /// After the window: the workers' memory and shutdown, the ceiling's
    /// steps.
    pub after_s: f64,
    /// The rest of each process's time as tuneloop timed it, spawn to exit
    /// (to its result line, where a managed run on one process is ended):
    /// the fork server's hand-over, the client's start.
    pub other_s: f64,
    /// The runs these sum.
    pub runs: u32,
}

impl Around {
    /// `runs`' phases summed; `None` when no run reports them.
    pub fn of<'a>(runs: impl IntoIterator<Item = &'a Measurement>) -> Option<Around> {
        let mut a = Around::default();
        for m in runs {
            let Some(p) = &m.phases_s else { continue };
            let get = |k: &str| {
                p.get(k)
                    .copied()
                    .flatten()
                    .filter(|v| v.is_finite())
                    .unwrap_or(0.0)
            };
            let start = get("before_main") + get("import_torch");
            let build = get("build");
            let warmup = get("first_batch") + get("warmup");
            a.start_s += start;
            a.build_s += build;
            a.warmup_s += warmup;
            let after = get("after_window");
            a.after_s += after;
            if let (Some(total), Some(window)) = (m.process_s, m.wall_s) {
                a.other_s += (total - start - build - warmup - window - after).max(0.0);
            }
            a.runs += 1;
        }
        (a.runs > 0).then_some(a)
    }
}

/// One turn's wall time.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq)]
pub struct TurnSeconds {
    pub turn: u32,
    pub s: f64,
}

impl TimeSpent {
    /// The run's time from its wall time, its process count and its
    /// throughput runs (each timed window summed by [`measured_seconds`]).
    pub fn of<'a>(
        wall_s: f64,
        bench_runs: u32,
        runs: impl IntoIterator<Item = &'a Measurement>,
        turns: Vec<TurnSeconds>,
    ) -> TimeSpent {
        let runs: Vec<&Measurement> = runs.into_iter().collect();
        let (measured_s, measured_runs) = measured_seconds(runs.iter().copied());
        TimeSpent {
            around: Around::of(runs.iter().copied()),
            whole_s: None,
            wall_s,
            measured_s,
            measured_share: (wall_s.is_finite() && wall_s > 0.0).then(|| measured_s / wall_s),
            bench_runs,
            measured_runs,
            turns,
        }
    }

    /// With the whole-command rounds' seconds summed (`whole.json`'s
    /// rounds); none left `whole_s` out.
    pub fn with_whole(mut self, rounds: &[crate::bench::whole::Round]) -> TimeSpent {
        let s: f64 = rounds
            .iter()
            .flat_map(|r| [r.baseline_s, r.final_s])
            .filter(|v| v.is_finite() && *v > 0.0)
            .sum();
        self.whole_s = (s > 0.0).then_some(s);
        self
    }

    /// The timed steps and the whole-command rounds together, as a share of
    /// the wall time; `None` without whole-command rounds or a wall time.
    pub fn share_with_whole(&self) -> Option<f64> {
        let whole = self.whole_s?;
        (self.wall_s.is_finite() && self.wall_s > 0.0)
            .then(|| (self.measured_s + whole) / self.wall_s)
    }
}

/// The timed windows of `runs` summed (each run's `wall_s`, its timed steps'
/// wall time), and how many runs had one. Runs without a window (an older
/// record, a failed run) add nothing and are not counted.
pub fn measured_seconds<'a>(runs: impl IntoIterator<Item = &'a Measurement>) -> (f64, u32) {
    runs.into_iter()
        .filter_map(|m| m.wall_s.filter(|w| w.is_finite() && *w >= 0.0))
        .fold((0.0, 0), |(s, n), w| (s + w, n + 1))
}

/// What a session knows at a turn's start that says how long it may go on.
#[derive(Clone, Debug, Default)]
pub struct Pace<'a> {
    /// Turns the stop rule still allows, this one included.
    pub turns_left: u32,
    /// Each bench process's seconds so far, start to end (Python's start,
    /// imports, warm-up and timed steps).
    pub run_s: &'a [f64],
    /// The runs each measured turn took so far (a turn measures in pairs
    /// until the decision rule decides).
    pub turn_runs: &'a [u32],
    /// The agent's seconds in each turn so far.
    pub agent_s: &'a [f64],
    /// The runs of a turn the rule decides at once (`2 × [decision] repeats`):
    /// the typical turn before any turn was measured.
    pub least_turn_runs: u32,
    /// The most runs one turn can take (`2 × [decision] max_repeats`).
    pub most_turn_runs: u32,
    /// The final comparison's runs (best vs baseline, in pairs): at the
    /// least it takes, and at the most (`2 × [decision] final_max_pairs`).
    pub final_runs: u32,
    pub most_final_runs: u32,
    /// Command mode: the whole-command rounds' seconds, all of them.
    pub whole_s: f64,
    /// `[loop] max_wall_s` less the time spent, when a wall limit is set:
    /// no turn starts after it.
    pub wall_left_s: Option<f64>,
}

/// The time left, as an estimate: `about_s` with the turns left at the
/// run's typical runs a turn (the median so far), `at_most_s` with each at
/// the most a turn can take; both at the median seconds a bench run so far,
/// plus the final comparison and the whole-command rounds. The run can
/// stop before its turns are spent, so both lean high. `None` before any
/// bench run was timed (nothing to go on).
pub fn time_left(p: &Pace) -> Option<TimeLeft> {
    let run_s = p
        .run_s
        .iter()
        .copied()
        .filter(|s| s.is_finite() && *s > 0.0);
    let run_s: Vec<f64> = run_s.collect();
    if run_s.is_empty() {
        return None;
    }
    let per_run = stats::median(&run_s);
    let measured: Vec<f64> = p
        .turn_runs
        .iter()
        .filter(|&&r| r > 0)
        .map(|&r| r as f64)
        .collect();
    let typical_runs = if measured.is_empty() {
        p.least_turn_runs as f64
    } else {
        stats::median(&measured)
    };
    let most_runs = (p.most_turn_runs as f64).max(typical_runs);
    let agent: Vec<f64> = p
        .agent_s
        .iter()
        .copied()
        .filter(|s| s.is_finite())
        .collect();
    let (agent_typical, agent_most) = match agent.is_empty() {
        true => (0.0, 0.0),
        false => (
            stats::median(&agent),
            agent.iter().copied().fold(0.0, f64::max),
        ),
    };
    let turns = p.turns_left as f64;
    let turn_most = most_runs * per_run + agent_most;
    // A wall limit stops the turns: the last one starts before it and runs
    // its course.
    let cap = |s: f64| match p.wall_left_s {
        Some(left) => s.min(left.max(0.0) + turn_most),
        None => s,
    };
    let tail = p.final_runs as f64 * per_run + p.whole_s.max(0.0);
    let most_tail = p.most_final_runs.max(p.final_runs) as f64 * per_run + p.whole_s.max(0.0);
    let about = cap(turns * (typical_runs * per_run + agent_typical)) + tail;
    let most = cap(turns * turn_most) + most_tail;
    Some(TimeLeft {
        about_s: about,
        at_most_s: most.max(about),
        turns_left: p.turns_left,
        run_s: per_run,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timed(w: Option<f64>) -> Measurement {
        Measurement {
            wall_s: w,
            ..Default::default()
        }
    }

    #[test]
    fn the_time_spent_is_the_measured_windows_as_a_share_of_the_wall_time() {
        let runs = [timed(Some(3.0)), timed(Some(5.0)), timed(None)];
        let t = TimeSpent::of(40.0, 4, &runs, vec![]);
        assert_eq!((t.measured_s, t.measured_runs, t.bench_runs), (8.0, 2, 4));
        assert_eq!(t.measured_share, Some(0.2));
        assert_eq!(
            TimeSpent::of(f64::NAN, 4, &runs, vec![]).measured_share,
            None
        );
        assert_eq!(TimeSpent::of(0.0, 0, &[], vec![]).measured_share, None);
    }

    #[test]
    fn the_whole_command_rounds_are_counted_beside_the_timed_steps() {
        use crate::bench::whole::Round;
        let runs = [timed(Some(3.0)), timed(Some(5.0))];
        let rounds = [
            Round {
                baseline_s: 10.0,
                final_s: 4.0,
            },
            Round {
                baseline_s: 9.0,
                final_s: 5.0,
            },
        ];
        let t = TimeSpent::of(80.0, 2, &runs, vec![]).with_whole(&rounds);
        assert_eq!(t.whole_s, Some(28.0));
        assert_eq!(
            t.measured_share,
            Some(0.1),
            "the timed steps alone, as before"
        );
        assert_eq!(t.share_with_whole(), Some(0.45));
        let none = TimeSpent::of(80.0, 2, &runs, vec![]).with_whole(&[]);
        assert_eq!((none.whole_s, none.share_with_whole()), (None, None));
    }

    #[test]
    fn around_sums_each_phase_and_leaves_the_rest_to_other() {
        let phased = |window: f64, process: Option<f64>| Measurement {
            wall_s: Some(window),
            process_s: process,
            phases_s: Some(
                [
                    ("before_main", Some(0.25)),
                    ("import_torch", Some(1.5)),
                    ("build", Some(1.0)),
                    ("first_batch", Some(0.5)),
                    ("warmup", Some(0.75)),
                    ("after_window", None),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            ),
            ..Default::default()
        };
        let runs = [phased(1.0, Some(6.0)), phased(2.0, None), timed(Some(1.0))];
        let a = TimeSpent::of(60.0, 3, &runs, vec![]).around.unwrap();
        assert_eq!(a.runs, 2, "the run without phases is not in it");
        assert_eq!(a.start_s, 2.0 * 1.75);
        assert_eq!(a.build_s, 2.0);
        assert_eq!(a.warmup_s, 2.0 * 1.25);
        assert_eq!(a.after_s, 0.0);
        // 6 s timed by tuneloop, of which 1.75 + 1 + 1.25 + 1 (the window)
        // are accounted for; the run tuneloop did not time adds nothing.
        assert_eq!(a.other_s, 1.0);
        assert!(TimeSpent::of(60.0, 1, &[timed(Some(1.0))], vec![])
            .around
            .is_none());
    }

    #[test]
    fn measured_seconds_sum_the_timed_windows_and_count_only_runs_that_had_one() {
        let runs = [
            timed(Some(0.5)),
            timed(Some(1.25)),
            timed(None),
            timed(Some(f64::NAN)),
            timed(Some(2.0)),
        ];
        assert_eq!(measured_seconds(&runs), (3.75, 3));
        assert_eq!(measured_seconds(&[]), (0.0, 0));
    }

    fn pace<'a>(run_s: &'a [f64], turn_runs: &'a [u32]) -> Pace<'a> {
        Pace {
            turns_left: 4,
            run_s,
            turn_runs,
            agent_s: &[],
            least_turn_runs: 4,
            most_turn_runs: 16,
            final_runs: 6,
            most_final_runs: 6,
            whole_s: 0.0,
            wall_left_s: None,
        }
    }

    #[test]
    fn the_estimate_is_the_turns_left_at_the_median_run_and_turn_plus_the_final() {
        // Median run 5 s (one slow outlier), median turn 8 runs.
        let t = time_left(&pace(&[4.0, 5.0, 30.0, 5.0, 6.0], &[6, 8, 12])).unwrap();
        assert_eq!(t.run_s, 5.0);
        assert_eq!(t.turns_left, 4);
        // 4 turns × 8 runs × 5 s + 6 final runs × 5 s.
        assert_eq!(t.about_s, 4.0 * 8.0 * 5.0 + 30.0);
        // At most: every turn to max_repeats (16 runs).
        assert_eq!(t.at_most_s, 4.0 * 16.0 * 5.0 + 30.0);
        // A final that may add pairs up to 10 (20 runs) counts them at most.
        let mut p = pace(&[4.0, 5.0, 30.0, 5.0, 6.0], &[6, 8, 12]);
        p.most_final_runs = 20;
        let t = time_left(&p).unwrap();
        assert_eq!(t.about_s, 4.0 * 8.0 * 5.0 + 30.0);
        assert_eq!(t.at_most_s, 4.0 * 16.0 * 5.0 + 100.0);
    }

    #[test]
    fn before_any_turn_a_turn_is_the_rules_least_and_the_agent_and_whole_rounds_add() {
        let mut p = pace(&[2.0], &[0]);
        p.agent_s = &[10.0, 30.0, 20.0];
        p.whole_s = 60.0;
        let t = time_left(&p).unwrap();
        // Turns that were not measured (refused changes) say nothing of a turn's runs.
        assert_eq!(t.about_s, 4.0 * (4.0 * 2.0 + 20.0) + 6.0 * 2.0 + 60.0);
        assert_eq!(t.at_most_s, 4.0 * (16.0 * 2.0 + 30.0) + 6.0 * 2.0 + 60.0);
    }

    #[test]
    fn a_wall_limit_caps_the_turns_and_no_run_timed_is_no_estimate() {
        let mut p = pace(&[5.0], &[8]);
        p.wall_left_s = Some(10.0);
        let t = time_left(&p).unwrap();
        // The turns stop after 10 s, the last one running its course (80 s at most).
        assert_eq!(t.at_most_s, 10.0 + 80.0 + 30.0);
        assert_eq!(t.about_s, (4.0 * 40.0f64).min(90.0) + 30.0);
        p.turns_left = 0;
        let t = time_left(&p).unwrap();
        assert_eq!(
            (t.about_s, t.at_most_s),
            (30.0, 30.0),
            "only the final left"
        );
        assert_eq!(time_left(&pace(&[], &[])), None);
        assert_eq!(time_left(&pace(&[f64::NAN], &[])), None);
    }
}
