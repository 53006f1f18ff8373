//! Whole sessions without Python: a scripted agent writes one change per
//! turn, a scripted [`Measure`] returns chosen figures for whatever
//! `num_workers` is on disk, and the real loop does the rest (verify, measure
//! interleaved, judge, restore or keep, record, stop). Each test asserts the
//! decision and the figures recorded, so a broken rule fails here.

use std::sync::Mutex;
use std::time::Duration;

use super::*;
use crate::agent::scripted::{ScriptedAgent, ScriptedTurn};
use crate::bench::Profiled;
use crate::measure::Pending;
use crate::turn::Decision;

/// Figures for a run: `(num_workers on disk, how many runs at that count
/// came before, mode)`.
type Figures = dyn Fn(u64, usize, Mode) -> Result<Measurement, BenchError> + Send + Sync;

/// Measures by reading `num_workers=N` from the project's train.py, as a
/// real run would see the files in place.
struct Scripted {
    root: PathBuf,
    figures: Arc<Figures>,
    /// The count measured by each run, in order (shared with its widened copies).
    runs: Arc<Mutex<Vec<u64>>>,
    /// The steps a run times, where the test gives the measure steps.
    steps: Option<u32>,
    /// The training batches the scripted command runs before it ends.
    job_batches: Option<u32>,
}

/// The warm-up every scripted run takes before its timed steps.
const WARMUP: u32 = 5;

impl Scripted {
    fn run(&self, mode: Mode) -> Result<Measurement, BenchError> {
        let text = std::fs::read_to_string(self.root.join("train.py")).unwrap();
        let nw = workers_in(&text);
        let mut runs = self.runs.lock().unwrap();
        let before = runs.iter().filter(|&&n| n == nw).count();
        runs.push(nw);
        drop(runs);
        let Some(steps) = self.steps else {
            return (self.figures)(nw, before, mode);
        };
        if self.job_batches.is_some_and(|j| WARMUP + steps > j) {
            return Err(BenchError::User {
                kind: "too_few_steps".into(),
                message: "the command ended first".into(),
            });
        }
        // As the harness counts them: the epoch starts strictly inside the window.
        let mut m = (self.figures)(nw, before, mode)?;
        m.steps = Some(steps);
        if let Some(per) = m.batches_per_epoch.map(|b| b as u32) {
            let (lo, hi) = (WARMUP, WARMUP + steps);
            m.epoch_starts_timed =
                Some((lo / per + 1..).take_while(|k| k * per < hi).count() as u32);
        }
        Ok(m)
    }
}

impl Measure for Scripted {
    fn measure<'a>(&'a self, mode: Mode, _: &'a Interrupt) -> Pending<'a, Measurement> {
        let r = self.run(mode);
        Box::pin(async move { r })
    }

    fn profile<'a>(&'a self, _: &'a Interrupt) -> Pending<'a, Profiled> {
        let r = self.run(Mode::Profile).map(|measurement| Profiled {
            measurement,
            table: "scripted profile".into(),
            no_table: None,
        });
        Box::pin(async move { r })
    }

    fn steps(&self) -> Option<u32> {
        self.steps
    }

    fn with_steps(&self, steps: u32) -> Option<Arc<dyn Measure>> {
        self.steps.map(|_| -> Arc<dyn Measure> {
            Arc::new(Scripted {
                root: self.root.clone(),
                figures: self.figures.clone(),
                runs: self.runs.clone(),
                steps: Some(steps),
                job_batches: self.job_batches,
            })
        })
    }
}

fn workers_in(text: &str) -> u64 {
    let at = text
        .find("num_workers=")
        .expect("train.py names num_workers")
        + 12;
    text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap()
}

fn train_py(nw: u64) -> String {
    format!(
        "from torch.utils.data import DataLoader\n\n\ndef build():\n    return DataLoader(ds, batch_size=8, num_workers={nw})\n"
    )
}

/// A run's figures: samples/sec, data_wait share and the data fingerprint.
fn m(sps: f64, share: f64, fp: Option<&str>) -> Measurement {
    Measurement {
        samples_per_sec: sps,
        data_wait_share: Some(share),
        cpu_count: Some(2),
        fingerprint: fp.map(str::to_string),
        ..Default::default()
    }
}

/// What a test sets up: the starting count, the agent's counts turn by
/// turn (with a cost each), the policy, and the figures.
struct Setup {
    start: u64,
    turns: Vec<(u64, f64)>,
    iterations: u32,
    policy: Policy,
    /// Move the session's start this far into the past (the time budget).
    aged: Duration,
    /// The measure's `[bench] steps` (none: a measure without steps).
    steps: Option<u32>,
    /// The training batches the command runs (none: as many as asked).
    job_batches: Option<u32>,
    /// The builtin agent proposes instead of the scripted turns.
    builtin: bool,
}

impl Setup {
    fn new(start: u64, turns: &[u64]) -> Setup {
        Setup {
            start,
            turns: turns.iter().map(|&n| (n, 0.0)).collect(),
            iterations: turns.len() as u32,
            policy: Policy::default(),
            aged: Duration::ZERO,
            steps: None,
            job_batches: None,
            builtin: false,
        }
    }
}

/// The outcome of a whole session.
struct Outcome {
    report: RunReport,
    /// The count measured by each run, in order (baseline included).
    runs: Vec<u64>,
    /// train.py's count after the run.
    on_disk: u64,
    dir: PathBuf,
    events: Vec<Event>,
    _tmp: tempfile::TempDir,
}

impl Outcome {
    fn row(&self, turn: u32) -> &TurnRow {
        let r = self
            .report
            .turns
            .iter()
            .find(|r| r.turn == turn)
            .expect("the turn has a row");
        // The report says what decision.json says.
        let folder = TurnFolder {
            turn,
            dir: self.dir.join("turns").join(format!("{turn:02}")),
        };
        assert_eq!(folder.decision().as_ref(), Some(r), "decision.json");
        r
    }

    fn measured(&self, turn: u32) -> usize {
        self.events
            .iter()
            .filter(|e| matches!(e, Event::Measured { turn: t, .. } if *t == turn))
            .count()
    }
}

fn session(
    setup: Setup,
    figures: impl Fn(u64, usize, Mode) -> Result<Measurement, BenchError> + Send + Sync + 'static,
) -> Outcome {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("train.py"), train_py(setup.start)).unwrap();
    std::fs::write(
        d.join("tuneloop.toml"),
        "[project]\nroot = \".\"\neditable = [\"train.py\"]\n\n[bench]\nentry = \"train:build\"\n",
    )
    .unwrap();
    let ws = Workspace::load(d).unwrap();
    let agent = match setup.builtin {
        true => Agent::Builtin(crate::agent::builtin::BuiltinAgent::new(&ws)),
        false => Agent::Scripted(ScriptedAgent {
            turns: setup
                .turns
                .iter()
                .map(|&(nw, cost_usd)| ScriptedTurn {
                    file: "train.py".into(),
                    text: Some(train_py(nw)),
                    cost_usd,
                })
                .collect(),
        }),
    };
    let events = Mutex::new(Vec::new());
    let mut view = |e: &Event| events.lock().unwrap().push(e.clone());
    let mut s = prepare(
        &ws,
        StartOptions {
            policy_path: d.join("policies/default.toml"),
            policy: setup.policy,
            iterations: Some(setup.iterations),
            allow_dirty: true,
            git_commits: false,
        },
        agent,
        Interrupt::new(),
        &mut view,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let scripted = Arc::new(Scripted {
        root: s.root.clone(),
        figures: Arc::new(figures),
        runs: Arc::new(Mutex::new(Vec::new())),
        steps: setup.steps,
        job_batches: setup.job_batches,
    });
    s.bencher = scripted.clone();
    s.started = Instant::now().checked_sub(setup.aged).unwrap();
    let dir = s.run_dir().to_owned();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let report = rt.block_on(s.run()).unwrap_or_else(|(e, _)| panic!("{e}"));
    let runs = scripted.runs.lock().unwrap().clone();
    let on_disk = workers_in(&std::fs::read_to_string(d.join("train.py")).unwrap());
    Outcome {
        report,
        runs,
        on_disk,
        dir,
        events: events.into_inner().unwrap(),
        _tmp: tmp,
    }
}

/// 100 samples/sec at the starting count, `cand` at any other, with a
/// large data_wait share and one fingerprint.
fn two_levels(
    start: u64,
    cand: f64,
) -> impl Fn(u64, usize, Mode) -> Result<Measurement, BenchError> {
    move |nw, _, _| Ok(m(if nw == start { 100.0 } else { cand }, 0.8, Some("fp")))
}

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() < 1e-9)
}

#[test]
fn a_faster_change_is_kept_with_its_figures() {
    let o = session(Setup::new(0, &[2]), two_levels(0, 150.0));
    let r = o.row(1);
    assert_eq!(r.decision, Decision::Kept, "{}", r.reason);
    assert!(r.change.starts_with("num_workers 0 → 2"), "{}", r.change);
    assert!(close(r.before_sps, 100.0) && close(r.after_sps, 150.0));
    assert!(close(r.ratio, 1.5));
    // Decided at the policy's `repeats` pairs: 2 pairs, 4 runs.
    assert_eq!(r.runs, 4);
    assert_eq!(o.measured(1), 4);
    assert_eq!(r.candidate_samples, vec![150.0, 150.0]);
    assert_eq!(r.incumbent_samples, vec![100.0, 100.0]);
    assert!(r.reason.starts_with("faster: ratio 1.500"), "{}", r.reason);
    // Interleaved: baseline (profile + 3), then A B, B A.
    assert_eq!(&o.runs[..8], &[0, 0, 0, 0, 0, 2, 2, 0]);
    // The kept files stay; the final comparison gives the headline.
    assert_eq!(o.on_disk, 2);
    assert!(
        (o.report.speedup - 1.5).abs() < 1e-9,
        "{}",
        o.report.speedup
    );
    let fin = run_folder::FinalBench::read(&o.dir).unwrap();
    assert_eq!(fin.best.len(), 3);
    assert_eq!(o.report.stop_reason, "iteration limit (1) reached");
}

#[test]
fn a_gain_below_min_gain_is_reverted() {
    let o = session(Setup::new(0, &[2]), two_levels(0, 102.0));
    let r = o.row(1);
    assert_eq!(r.decision, Decision::Reverted);
    assert!(close(r.ratio, 1.02));
    assert!(r.ratio_ci.unwrap()[1] < 1.03);
    assert!(
        r.reason.starts_with("faster but under min_gain 3%"),
        "{}",
        r.reason
    );
    assert_eq!(r.runs, 4);
    assert_eq!(o.on_disk, 0, "the incumbent's files are back");
    // Nothing kept: no final comparison.
    assert!(run_folder::FinalBench::read(&o.dir).is_err());
}

#[test]
fn an_open_interval_is_reverted_after_max_repeats_pairs() {
    // The candidate swings 130 / 85: the interval straddles the gain line.
    let swing = |nw: u64, k: usize, _| {
        let sps = match nw {
            0 => 100.0,
            _ if k % 2 == 0 => 130.0,
            _ => 85.0,
        };
        Ok(m(sps, 0.8, Some("fp")))
    };
    // Without the futility looks: every pair up to the cap.
    let mut setup = Setup::new(0, &[2]);
    setup.policy.decision.futility_confidence = 0.0;
    let o = session(setup, swing);
    let r = o.row(1);
    assert_eq!(r.decision, Decision::Reverted, "{}", r.reason);
    let max = Policy::default().decision.max_repeats;
    assert_eq!(r.runs, 2 * max, "every pair was measured");
    let [lo, hi] = r.ratio_ci.unwrap();
    assert!(lo < 1.01 && hi > 1.03, "[{lo}, {hi}]");
    assert!(r.reason.contains("CI"), "{}", r.reason);
    assert_eq!(o.on_disk, 0);
    // With them (the default), a first comparison at this spread stops as
    // soon as the cap could not show it faster, and says so.
    let o = session(Setup::new(0, &[2]), swing);
    let r = o.row(1);
    assert_eq!(r.decision, Decision::Reverted, "{}", r.reason);
    assert!(r.runs < 2 * max, "{} runs", r.runs);
    assert!(
        r.reason
            .contains("more pairs unlikely to show it (at this spread, 8 pairs"),
        "{}",
        r.reason
    );
    assert_eq!(o.on_disk, 0);
}

/// The data check, case by case: the incumbent's and the candidate's
/// fingerprints, and the decision the same 1.5× gain gets.
#[test]
fn the_data_fingerprint_decides_whether_a_faster_change_may_stay() {
    let cases: [(Option<&'static str>, Option<&'static str>, Decision); 4] = [
        (Some("a"), Some("a"), Decision::Kept),
        (Some("a"), Some("b"), Decision::Rejected),
        // A candidate run without a fingerprint cannot show the same data.
        (Some("a"), None, Decision::Rejected),
        // Nothing to compare against: the verdict stands.
        (None, Some("b"), Decision::Kept),
    ];
    for (inc, cand, want) in cases {
        let o = session(Setup::new(0, &[2]), move |nw, _, _| {
            Ok(if nw == 0 {
                m(100.0, 0.8, inc)
            } else {
                m(150.0, 0.8, cand)
            })
        });
        let r = o.row(1);
        assert_eq!(r.decision, want, "{inc:?} vs {cand:?}: {}", r.reason);
        // The figures are recorded whatever the data check says.
        assert!(close(r.ratio, 1.5), "{inc:?} vs {cand:?}");
        if want == Decision::Rejected {
            assert!(
                r.reason.contains("fingerprint differs")
                    && r.reason.contains("`num_workers` must not alter the data"),
                "{}",
                r.reason
            );
            assert_eq!(o.on_disk, 0, "rejected: the incumbent's files are back");
        } else {
            assert_eq!(o.on_disk, 2);
        }
    }
}

#[test]
fn a_failed_candidate_measurement_fails_the_turn_and_restores() {
    let o = session(Setup::new(0, &[2]), |nw, _, _| {
        if nw == 0 {
            Ok(m(100.0, 0.8, Some("fp")))
        } else {
            Err(BenchError::Timeout {
                limit_s: 300,
                tail: "stuck".into(),
            })
        }
    });
    let r = o.row(1);
    assert_eq!(r.decision, Decision::Failed);
    assert!(
        r.reason.starts_with("bench failed (candidate)"),
        "{}",
        r.reason
    );
    // The first pair: incumbent, then the candidate that failed.
    assert_eq!(r.runs, 2);
    assert_eq!(r.ratio, None);
    let err = std::fs::read_to_string(o.dir.join("turns/01/bench_error.txt")).unwrap();
    assert!(err.contains("300"), "{err}");
    assert_eq!(o.on_disk, 0);
}

#[test]
fn fewer_workers_as_fast_are_kept_as_cheaper() {
    // 4 → 2 workers, 1% slower: inside min_gain, so the cheaper one stays.
    let o = session(Setup::new(4, &[2]), two_levels(4, 99.0));
    let r = o.row(1);
    assert_eq!(r.decision, Decision::KeptCheaper, "{}", r.reason);
    assert!(close(r.ratio, 0.99));
    assert_eq!(o.on_disk, 2);
    // The same figures for a step up are not a gain: reverted.
    let o = session(Setup::new(2, &[4]), two_levels(2, 99.0));
    assert_eq!(o.row(1).decision, Decision::Reverted);
    assert_eq!(o.on_disk, 2);
}

// ---------------------------------------------------------------- stop rule

#[test]
fn a_small_baseline_data_wait_stops_before_any_turn() {
    let o = session(Setup::new(0, &[2]), |_, _, _| Ok(m(100.0, 0.05, None)));
    assert!(o.report.turns.is_empty());
    assert_eq!(
        o.report.stop_reason,
        "data_wait is only 5.0% of step time at the baseline: DataLoader tuning cannot help much"
    );
    // Forced, the same baseline gets its turn.
    let mut s = Setup::new(0, &[2]);
    s.policy.loop_.force = true;
    let o = session(s, |_, _, _| Ok(m(100.0, 0.05, None)));
    assert_eq!(o.report.turns.len(), 1);
}

#[test]
fn the_iteration_limit_stops_the_loop() {
    let mut s = Setup::new(0, &[2, 3, 4]);
    s.iterations = 2;
    let o = session(s, |nw, _, _| Ok(m(100.0 + 40.0 * nw as f64, 0.8, None)));
    assert_eq!(o.report.turns.len(), 2);
    assert_eq!(o.row(2).decision, Decision::Kept);
    assert_eq!(o.on_disk, 3);
    assert_eq!(o.report.stop_reason, "iteration limit (2) reached");
}

#[test]
fn turns_not_kept_in_a_row_stop_the_loop() {
    let mut s = Setup::new(0, &[2, 3, 4, 5]);
    s.policy.loop_.max_consecutive_reverts = 2;
    let o = session(s, |nw, _, _| Ok(m(100.0 - nw as f64, 0.8, None)));
    assert_eq!(o.report.turns.len(), 2);
    assert_eq!(o.row(1).decision, Decision::Reverted);
    assert_eq!(o.row(2).decision, Decision::Reverted);
    assert_eq!(o.report.stop_reason, "2 turns in a row not kept");
}

#[test]
fn a_streak_of_reverts_ends_the_climb_not_the_cheaper_neighbours() {
    // The builtin agent climbs 0 → 2 → 4 → 8 (kept) → 16 (not kept: a
    // streak of one). 6 workers are as fast as 8, 5 are not.
    let mut s = Setup::new(0, &[]);
    s.builtin = true;
    s.iterations = 10;
    s.policy.loop_.max_consecutive_reverts = 1;
    let o = session(s, |nw, _, _| {
        let sps = [(0, 100.0), (2, 200.0), (4, 400.0), (5, 500.0)];
        let sps = sps
            .iter()
            .find(|(n, _)| *n == nw)
            .map_or(600.0, |(_, v)| *v);
        Ok(m(sps, 0.8, Some("fp")))
    });
    let changes: Vec<(&str, Decision)> = o
        .report
        .turns
        .iter()
        .map(|r| (r.change.as_str(), r.decision))
        .collect();
    assert_eq!(
        changes[..4],
        [
            ("num_workers 0 → 2", Decision::Kept),
            ("num_workers 2 → 4", Decision::Kept),
            ("num_workers 4 → 8", Decision::Kept),
            ("num_workers 8 → 16", Decision::Reverted),
        ],
        "{changes:?}"
    );
    // Past the streak, only cheaper neighbours, down to the cheapest as fast.
    assert!(changes.len() > 4, "{changes:?}: {}", o.report.stop_reason);
    for (change, _) in &changes[4..] {
        assert!(crate::agent::cheaper::is_cheaper(change), "{changes:?}");
    }
    assert_eq!(o.on_disk, 6, "{changes:?}");
    assert!(
        o.report
            .stop_reason
            .starts_with("1 turn not kept ended the climb, and no cheaper setting is left to try"),
        "{}",
        o.report.stop_reason
    );

    // A streak met among the cheaper neighbours ended no climb: the run
    // ends when they are exhausted, and says so.
    let mut s = Setup::new(0, &[]);
    s.builtin = true;
    s.iterations = 10;
    s.policy.loop_.max_consecutive_reverts = 4;
    let o = session(s, |nw, _, _| {
        let sps = [(0, 100.0), (2, 200.0), (4, 400.0), (8, 600.0), (16, 600.0)];
        let sps = sps
            .iter()
            .find(|(n, _)| *n == nw)
            .map_or(500.0, |(_, v)| *v);
        Ok(m(sps, 0.8, Some("fp")))
    });
    let changes: Vec<&str> = o.report.turns.iter().map(|r| r.change.as_str()).collect();
    assert_eq!(
        changes,
        [
            "num_workers 0 → 2",
            "num_workers 2 → 4",
            "num_workers 4 → 8",
            "num_workers 8 → 16",
            "prefetch_factor (default) → 4",
            "persistent_workers (default) → True",
            "num_workers 8 → 7"
        ],
        "{}",
        o.report.stop_reason
    );
    assert!(
        o.report.stop_reason.starts_with("candidates exhausted"),
        "{}",
        o.report.stop_reason
    );
}

#[test]
fn the_cost_budget_stops_the_loop() {
    let mut s = Setup::new(0, &[2, 3, 4]);
    s.turns = vec![(2, 0.6), (3, 0.6), (4, 0.6)];
    s.policy.loop_.max_total_usd = 1.0;
    let o = session(s, |nw, _, _| Ok(m(100.0 + 40.0 * nw as f64, 0.8, None)));
    assert_eq!(o.report.turns.len(), 2, "stopped once 1.20 USD >= 1.00");
    assert!(
        o.report.stop_reason.starts_with("cost budget"),
        "{}",
        o.report.stop_reason
    );
}

#[test]
fn the_time_budget_stops_the_loop() {
    let mut s = Setup::new(0, &[2]);
    s.policy.loop_.max_wall_s = 60;
    s.aged = Duration::from_secs(61);
    let o = session(s, two_levels(0, 150.0));
    assert!(o.report.turns.is_empty());
    assert_eq!(o.report.stop_reason, "time budget spent (60 s)");
}

#[test]
fn a_kept_change_that_leaves_little_data_wait_stops_the_loop() {
    let o = session(
        {
            let mut s = Setup::new(0, &[2, 3]);
            s.iterations = 5;
            s
        },
        |nw, _, _| {
            Ok(match nw {
                0 => m(100.0, 0.8, None),
                _ => m(150.0, 0.05, None),
            })
        },
    );
    assert_eq!(o.report.turns.len(), 1);
    assert_eq!(o.row(1).decision, Decision::Kept);
    assert!(close(o.row(1).data_wait_share, 0.05));
    assert_eq!(
        o.report.stop_reason,
        "data_wait no longer significant (5.0% of step time)"
    );
}

#[test]
fn an_incumbent_near_the_ceiling_stops_the_loop() {
    // The baseline's ceiling run: the step alone runs at 155 samples/sec.
    // The candidate reaches 150 (97%) with `share` of its step waiting.
    let near = |share: f64| {
        let mut s = Setup::new(0, &[2, 3]);
        s.iterations = 2;
        session(s, move |nw, _, mode| {
            let mut r = match nw {
                0 => m(100.0, 0.8, None),
                _ => m(150.0, share, None),
            };
            if mode == Mode::ThroughputWithCeiling {
                r.ceiling_sps = Some(155.0);
            }
            Ok(r)
        })
    };
    let o = near(0.12);
    assert_eq!(o.report.turns.len(), 1);
    assert_eq!(o.report.stop_reason, "within 3% of the ceiling");
    // 40% of the step still waiting contradicts 97% of the step alone: the
    // ceiling run was disturbed, and the loop goes on.
    let o = near(0.4);
    assert_eq!(o.report.turns.len(), 2);
    assert_eq!(o.report.stop_reason, "iteration limit (2) reached");
}

#[test]
fn the_ceiling_is_the_median_of_the_baselines_runs() {
    // Every baseline throughput run measures the step alone; one read low
    // (a busy moment) does not set the ceiling.
    let o = session(Setup::new(0, &[2]), |nw, before, mode| {
        let mut r = m(if nw == 0 { 100.0 } else { 150.0 }, 0.8, None);
        if nw == 0 && mode == Mode::ThroughputWithCeiling {
            r.ceiling_sps = Some([0.0, 60.0, 200.0, 180.0][before.min(3)]);
        }
        Ok(r)
    });
    assert_eq!(o.report.ceiling_sps, Some(180.0));
    let base = run_folder::BaselineBench::read(&o.dir).unwrap();
    let ceilings: Vec<Option<f64>> = base.runs.iter().map(|m| m.ceiling_sps).collect();
    assert_eq!(ceilings, [Some(60.0), Some(200.0), Some(180.0)]);
}

/// Two levels as [`two_levels`], from a job whose epochs hold 64 batches.
fn short_epochs(
    start: u64,
    cand: f64,
) -> impl Fn(u64, usize, Mode) -> Result<Measurement, BenchError> {
    let levels = two_levels(start, cand);
    move |nw, before, mode| {
        let mut m = levels(nw, before, mode)?;
        m.batches_per_epoch = Some(64);
        Ok(m)
    }
}

fn steps_of(ms: &[Measurement]) -> Vec<Option<u32>> {
    ms.iter().map(|m| m.steps).collect()
}

#[test]
fn short_epochs_are_timed_whole_from_the_first_throughput_run_on() {
    let mut setup = Setup::new(0, &[2]);
    setup.steps = Some(40);
    let o = session(setup, short_epochs(0, 150.0));
    assert!(
        o.events.contains(&Event::WindowWidened {
            configured: 40,
            steps: 64
        }),
        "{:?}",
        o.events
    );
    // The profiled run timed [bench] steps and found no epoch start; every
    // later run timed one epoch, its start included.
    let base = BaselineBench::read(&o.dir).unwrap();
    assert_eq!(base.profiled.as_ref().unwrap().steps, Some(40));
    assert_eq!(base.profiled.as_ref().unwrap().epoch_starts_timed, Some(0));
    assert_eq!(steps_of(&base.runs), vec![Some(64); 3]);
    assert!(base.runs.iter().all(|m| m.epoch_starts_timed == Some(1)));
    let turn = TurnFolder {
        turn: 1,
        dir: o.dir.join("turns").join("01"),
    };
    let bench = turn.bench().unwrap();
    assert!(steps_of(&bench.candidate).iter().all(|s| *s == Some(64)));
    assert!(steps_of(&bench.incumbent).iter().all(|s| *s == Some(64)));
    assert_eq!(o.row(1).decision, Decision::Kept);
    // The report says so, rebuilt from the folder alike.
    let w = Some(Widened {
        configured: 40,
        steps: 64,
    });
    assert_eq!(o.report.window, w);
    let facts = run_report::RunFacts::read(&o.dir).unwrap();
    assert_eq!(run_report::assemble(&o.dir, facts, None).window, w);
    let md = report::render_markdown(&o.report);
    assert!(
        md.contains("**Timed steps:** 64 a run, one whole epoch"),
        "{md}"
    );
}

#[test]
fn a_command_too_short_for_a_whole_epoch_keeps_the_configured_steps() {
    let mut setup = Setup::new(0, &[2]);
    setup.steps = Some(40);
    // 5 + 40 batches fit, 5 + 64 do not.
    setup.job_batches = Some(60);
    let o = session(setup, short_epochs(0, 150.0));
    assert!(o.events.contains(&Event::WindowNarrowed {
        configured: 40,
        steps: 64
    }));
    let base = BaselineBench::read(&o.dir).unwrap();
    // The failed whole-epoch run is not a baseline run; three at 40 are.
    assert_eq!(steps_of(&base.runs), vec![Some(40); 3]);
    assert_eq!(o.report.window, None);
    // The run went on to its turn, measured at the configured steps.
    assert_eq!(o.row(1).decision, Decision::Kept);
    // profile, the failed run, 3 baseline runs, then the turn's.
    assert_eq!(&o.runs[..5], &[0, 0, 0, 0, 0]);
}

#[test]
fn a_measure_with_epochs_already_timed_is_left_as_configured() {
    let mut setup = Setup::new(0, &[2]);
    setup.steps = Some(80);
    let o = session(setup, short_epochs(0, 150.0));
    assert!(!o.events.iter().any(|e| matches!(
        e,
        Event::WindowWidened { .. } | Event::WindowNarrowed { .. }
    )));
    let base = BaselineBench::read(&o.dir).unwrap();
    assert_eq!(steps_of(&base.runs), vec![Some(80); 3]);
    assert!(base.runs.iter().all(|m| m.epoch_starts_timed == Some(1)));
    assert_eq!(o.report.window, None);
}

/// A run whose first batches have the order `order` and the bytes `bytes`
/// (the items and the structure always the same).
fn ordered(sps: f64, order: &str, bytes: &str) -> Measurement {
    Measurement {
        data_identity: Some(crate::bench::identity::DataIdentity {
            batches: 3,
            items: Some("i".into()),
            order: Some(order.into()),
            structure: Some("s".into()),
            bytes: Some(bytes.into()),
        }),
        ..m(sps, 0.8, Some("whole"))
    }
}

/// The baseline's runs, read from its bench.json, decide what a turn
/// compares: an order they disagree on (a seed from the clock) is not held
/// against more workers; one they agree on is, and the rejection names it.
#[test]
fn the_baselines_own_runs_decide_which_parts_a_turn_compares() {
    for clock_seeded in [true, false] {
        let o = session(Setup::new(0, &[2]), move |nw, i, _| {
            let order = if clock_seeded {
                format!("o{i}")
            } else {
                "o".into()
            };
            Ok(match nw {
                // The incumbent's bytes are its own; a worker count
                // changes them (augmentation in workers): never compared.
                0 => ordered(100.0, &order, "b0"),
                _ => ordered(150.0, &format!("{order}-other"), "b2"),
            })
        });
        let r = o.row(1);
        let check = o.report.data_check.as_ref().expect("a data check");
        if clock_seeded {
            assert_eq!(r.decision, Decision::Kept, "{}", r.reason);
            assert_eq!(
                check.not_reproduced,
                vec![crate::bench::identity::Part::Order]
            );
        } else {
            assert_eq!(r.decision, Decision::Rejected, "{}", r.reason);
            assert!(
                r.reason.starts_with("the first batches changed: their order differs (compared: items, order and structure; bytes not compared: a loader setting"),
                "{}",
                r.reason
            );
            assert!(check.not_reproduced.is_empty());
            assert_eq!(o.on_disk, 0, "rejected: the incumbent's files are back");
        }
    }
}

/// The profiled run crashes (as a profiler killed by a signal would); every
/// other run measures as `figures` says.
fn profiled_run_crashes(
    figures: impl Fn(u64, usize, Mode) -> Result<Measurement, BenchError> + Send + Sync + 'static,
) -> impl Fn(u64, usize, Mode) -> Result<Measurement, BenchError> + Send + Sync + 'static {
    move |nw, before, mode| match mode {
        Mode::Profile => Err(BenchError::Crashed {
            code: "signal 11".into(),
            tail: "    Segmentation fault".into(),
        }),
        _ => figures(nw, before, mode),
    }
}

#[test]
fn a_profiled_run_that_crashes_leaves_the_baseline_and_the_turns_going() {
    let o = session(
        Setup::new(0, &[2]),
        profiled_run_crashes(two_levels(0, 150.0)),
    );
    let reason =
        "the profiled run failed (the bench exited with status signal 11 and printed no figure)";
    assert!(
        o.events.contains(&Event::ProfileUnavailable {
            reason: reason.into()
        }),
        "{:?}",
        o.events
    );
    // The baseline: its three throughput runs, no profiled figures, the reason.
    let base = BaselineBench::read(&o.dir).unwrap();
    assert_eq!(base.profiled, None);
    assert_eq!(base.runs.len(), 3);
    assert_eq!(base.profile_unavailable.as_deref(), Some(reason));
    assert_eq!(base.run_count(), 4, "the failed profiled run counts");
    assert!(close(Some(o.report.baseline_sps), 100.0));
    // The agent got no table, and the turn was measured and kept.
    assert_eq!(
        std::fs::read_to_string(o.dir.join("baseline/profile.txt")).unwrap(),
        ""
    );
    assert_eq!(o.row(1).decision, Decision::Kept);
    // The report says why there is no table, rebuilt from the folder alike.
    assert_eq!(o.report.profile_unavailable.as_deref(), Some(reason));
    let facts = run_report::RunFacts::read(&o.dir).unwrap();
    assert_eq!(
        run_report::assemble(&o.dir, facts, None)
            .profile_unavailable
            .as_deref(),
        Some(reason)
    );
    let md = report::render_markdown(&o.report);
    assert!(
        md.contains(&format!(
            "**Profiler:** profiler table unavailable: {reason}"
        )),
        "{md}"
    );
}

#[test]
fn a_profiled_run_with_its_table_leaves_no_reason() {
    let o = session(Setup::new(0, &[2]), two_levels(0, 150.0));
    assert!(!o
        .events
        .iter()
        .any(|e| matches!(e, Event::ProfileUnavailable { .. })));
    let base = BaselineBench::read(&o.dir).unwrap();
    assert!(base.profiled.is_some());
    assert_eq!(base.profile_unavailable, None);
    assert_eq!(o.report.profile_unavailable, None);
    assert!(!report::render_markdown(&o.report).contains("profiler table unavailable"));
}

#[test]
fn without_a_profiled_run_the_first_throughput_run_decides_the_window() {
    let mut setup = Setup::new(0, &[2]);
    setup.steps = Some(40);
    let o = session(setup, profiled_run_crashes(short_epochs(0, 150.0)));
    assert!(
        o.events.contains(&Event::WindowWidened {
            configured: 40,
            steps: 64
        }),
        "{:?}",
        o.events
    );
    // The first throughput run timed the configured steps and was taken
    // again over one whole epoch: three baseline runs at 64.
    let base = BaselineBench::read(&o.dir).unwrap();
    assert_eq!(steps_of(&base.runs), vec![Some(64); 3]);
    // profile (failed), the run at 40, 3 baseline runs, then the turn's.
    assert_eq!(&o.runs[..5], &[0, 0, 0, 0, 0]);
    assert_eq!(o.row(1).decision, Decision::Kept);
}

#[test]
#[should_panic(
    expected = "the baseline could not be measured: too_few_steps: the command ended first"
)]
fn a_profiled_run_that_cannot_measure_the_command_ends_the_baseline_at_once() {
    // The command's own failure fails every run: no throughput run follows.
    session(Setup::new(0, &[2]), |_, _, mode| match mode {
        Mode::Profile => Err(BenchError::User {
            kind: "too_few_steps".into(),
            message: "the command ended first".into(),
        }),
        _ => panic!("a throughput run after the command could not be measured"),
    });
}

/// The pair loop alone over `measure`: a project whose candidate has 2
/// workers and incumbent 0, under the default turn rule of `policy`.
fn pairs_of(
    measure: &dyn Measure,
    root: &Path,
    policy: &Policy,
    on: impl FnMut(PairEvent),
) -> Paired {
    let files = vec!["train.py".to_string()];
    std::fs::write(root.join("train.py"), train_py(2)).unwrap();
    let cand = FileSet::capture(root, &files).unwrap();
    std::fs::write(root.join("train.py"), train_py(0)).unwrap();
    let inc = FileSet::capture(root, &files).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(measure_pairs(
        PairRule::turn(false, policy),
        measure,
        root,
        &cand,
        &inc,
        policy,
        &Interrupt::new(),
        on,
    ))
    .unwrap_or_else(|f| panic!("{}", f.error))
}

/// Each stage of a turn on its own.
mod stages;

/// Pairs that know the machine's load, kept changes measured again, and the
/// final's interval.
mod load;

/// A slow candidate's window cut at a multiple of the incumbent's.
mod window_cap;
