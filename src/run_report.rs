//! The one place a [`RunReport`] is assembled. Its inputs are the run
//! folder's typed records ([`RunFacts`]): read back from disk for a run that
//! ended without a report (`tuneloop report`, `show`, `runs`), or held in
//! memory by the live session, which adds what only it knows
//! ([`LiveFigures`]: the stop reason as it happened, the wall clock, every
//! bench run including failed ones, the agent cost of turns that left no row).
//! Both paths go through [`assemble`], so a report written at the end of a
//! run and one rebuilt after a crash say the same things the same way.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::bench::cost::{StateCost, StateCosts, TurnCost};
use crate::bench::stats;
use crate::bench::Measurement;
use crate::report::{self, RunReport, TurnRow};
use crate::run_folder::{
    self, BaselineBench, FinalBench, RunFolderError, RunRecord, RunState, TurnFolder,
};
use crate::store::{self, FileSet};

/// What the run folder says about a run, typed: the figures a report is made of.
#[derive(Clone, Debug, Default)]
pub struct RunFacts {
    pub run_id: String,
    pub project: String,
    pub agent: String,
    pub language: String,
    pub started_at: String,
    /// `None` when run.json is missing or torn.
    pub state: Option<RunState>,
    pub baseline: BaselineBench,
    /// The decided turns, in order.
    pub turns: Vec<TurnRow>,
    /// Baseline → best, one unified diff.
    pub kept_diff: String,
    /// Command mode: the best state's command, when it differs from the
    /// baseline's (a kept change to an argument of `[bench] run`).
    pub run_command: Option<String>,
    /// The final best-vs-baseline measurement, when it was done.
    pub final_bench: Option<FinalBench>,
    /// The incumbent's measurement (the last kept candidate's, else the
    /// baseline's), for the report's "measured loader" line.
    pub incumbent: Option<Measurement>,
    /// The final state's own runs (the last kept candidate's, else the
    /// baseline's): what its cores can feed.
    pub final_runs: Vec<Measurement>,
}

/// What only a live session knows at the end of its run.
#[derive(Clone, Debug)]
pub struct LiveFigures {
    pub stop_reason: String,
    pub interrupted: bool,
    pub wall_s: f64,
    pub bench_runs: u32,
    pub total_cost_usd: f64,
    pub agent_time_ms: u64,
    /// Command mode: where the measured loader's knobs are set, as the
    /// project's files say now (a rebuilt report has none).
    pub knob_sources: Vec<String>,
    /// The enabled compute knobs the run ended without trying, and why (a
    /// rebuilt report has none: only the session knows why it passed one over).
    pub compute_not_tried: Vec<crate::compute::NotTried>,
    /// The measured loader's knobs no turn could change, when data_wait
    /// stayed large (a rebuilt report has none).
    pub not_editable_knobs: Vec<crate::edit::knobs::NotEditable>,
}

impl RunFacts {
    /// Reads a run folder: `run.json`, `baseline/bench.json`, each decided
    /// turn's `decision.json`, `final.json` when present, and the saved files
    /// for the kept diff. Fails only when the baseline was not measured.
    pub fn read(dir: &Path) -> Result<RunFacts, RunFolderError> {
        let run = RunRecord::read(dir).ok();
        let baseline = BaselineBench::read(dir)?;
        let decided = run_folder::decided_turns(dir);
        let last_kept = decided.iter().rev().find(|(_, r)| r.decision.is_kept());
        let editable: Vec<String> = run.as_ref().map(|r| r.editable.clone()).unwrap_or_default();
        let kept_diff = kept_diff(
            dir,
            &editable,
            last_kept.map(|(t, _)| t.candidate_dir()),
            &decided,
        );
        let run_command = run_command(dir, &editable, last_kept.map(|(t, _)| t.candidate_dir()));
        let final_runs = unmeasured_final_runs(last_kept.map(|(t, _)| t), &baseline);
        let incumbent = if last_kept.is_some() {
            final_runs.last().cloned()
        } else {
            baseline.runs.first().cloned()
        };
        let str_of =
            |f: fn(&RunRecord) -> &String| run.as_ref().map(f).cloned().unwrap_or_default();
        Ok(RunFacts {
            run_id: run
                .as_ref()
                .map(|r| r.run_id.clone())
                .filter(|id| !id.is_empty())
                .unwrap_or_else(|| {
                    dir.file_name()
                        .unwrap_or_default()
                        .to_string_lossy()
                        .into_owned()
                }),
            project: str_of(|r| &r.project_root),
            agent: str_of(|r| &r.agent),
            language: run
                .as_ref()
                .map_or_else(|| "en".to_string(), |r| r.policy.agent.language.clone()),
            started_at: str_of(|r| &r.started_at),
            state: run.as_ref().map(|r| r.state),
            baseline,
            turns: decided.into_iter().map(|(_, r)| r).collect(),
            kept_diff,
            run_command,
            final_bench: FinalBench::read(dir).ok(),
            incumbent,
            final_runs,
        })
    }
}

/// The report of the run in `dir` from its facts; `live` when the session
/// that ran it is assembling it, `None` when it is rebuilt from the folder
/// (then it is marked interrupted, its stop reason and wall time come from
/// the event log, and its bench runs are counted from the files).
pub fn assemble(dir: &Path, facts: RunFacts, live: Option<LiveFigures>) -> RunReport {
    let base_runs = &facts.baseline.runs;
    let baseline_samples: Vec<f64> = base_runs.iter().map(|m| m.samples_per_sec).collect();
    let shares: Vec<f64> = base_runs.iter().filter_map(|m| m.data_wait_share).collect();
    let baseline_share = (!shares.is_empty()).then(|| stats::median(&shares));
    let ceiling = crate::bench::median_ceiling(base_runs);
    let baseline_sps = if baseline_samples.is_empty() {
        f64::NAN
    } else {
        stats::median(&baseline_samples)
    };
    let last_kept = facts.turns.iter().rev().find(|r| r.decision.is_kept());
    let mut final_sps = last_kept.and_then(|r| r.after_sps).unwrap_or(baseline_sps);
    let final_share = match last_kept {
        Some(r) => r.data_wait_share,
        None => baseline_share,
    };
    let mut speedup = final_sps / baseline_sps;
    let mut speedup_ci = None;
    let mut final_interval = None;
    let mut final_runs = facts.final_runs.clone();
    let mut counted_runs =
        facts.baseline.run_count() + facts.turns.iter().map(|r| r.runs).sum::<u32>();
    if let Some(f) = &facts.final_bench {
        let best: Vec<f64> = f.best.iter().map(|m| m.samples_per_sec).collect();
        if let (Some(m), false) = (f.median, best.is_empty()) {
            speedup = m;
            final_sps = stats::median(&best);
            speedup_ci = f.ci;
            let base: Vec<f64> = f.baseline.iter().map(|m| m.samples_per_sec).collect();
            final_interval = f.ci.and_then(|ci| {
                stats::FinalInterval::of(
                    &best,
                    &base,
                    &f.ratios,
                    ci,
                    f.spread_bound,
                    f.set_aside.clone(),
                )
                .map(|iv| {
                    let starts = |runs: &[Measurement]| -> Vec<(f64, Option<u32>)> {
                        runs.iter()
                            .map(|m| (m.samples_per_sec, m.epoch_starts_timed))
                            .collect()
                    };
                    iv.with_epoch_starts(&starts(&f.best), &starts(&f.baseline))
                })
            });
            final_runs = f.best.clone();
            counted_runs += (best.len() + f.baseline.len() + 2 * f.set_aside.len()) as u32;
        }
    }
    let events = store::read_events(dir).unwrap_or_default();
    let live = live.unwrap_or_else(|| {
        LiveFigures {
            stop_reason: stop_reason_from_log(&events, facts.state),
            // Rebuilt: the session that ran it did not finish its report,
            // unless the folder says it ran to its stop rule.
            interrupted: facts.state != Some(RunState::Finished),
            wall_s: wall_seconds(&events),
            bench_runs: counted_runs,
            total_cost_usd: crate::turn::total_cost_usd(&facts.turns),
            agent_time_ms: facts.turns.iter().map(|r| r.agent.duration_ms).sum(),
            knob_sources: Vec::new(),
            compute_not_tried: Vec::new(),
            not_editable_knobs: Vec::new(),
        }
    });
    let costs =
        Some(state_costs(dir, base_runs, &facts.turns, &final_runs)).filter(|c| c.has_figures());
    let machine_load = machine_load(dir, base_runs, &facts.turns, &final_runs);
    let time = time_spent(dir, &facts, &live, &events);
    // The final's limits: the Binding line's, and the stop line's figure too
    // (the loop stopped on one run of the incumbent; one figure per report).
    let limits = crate::bench::limits::ThroughputLimits::of(
        ceiling.filter(|_| step_alone_stands(&facts.turns)),
        &final_runs,
        final_sps,
    );
    let stop_reason = limits.restate_stop_note(&live.stop_reason);
    RunReport {
        schema_version: report::SCHEMA_VERSION,
        run_id: facts.run_id,
        project: facts.project,
        agent: facts.agent,
        language: facts.language,
        started_at: facts.started_at,
        baseline_sps,
        baseline_samples,
        baseline_data_wait_share: baseline_share,
        final_sps,
        final_data_wait_share: final_share,
        speedup,
        speedup_ci,
        final_interval,
        numerics_yardstick: facts.baseline.yardstick(),
        ceiling_sps: ceiling,
        final_share_of_ceiling: ceiling.filter(|c| *c > 0.0).map(|c| final_sps / c),
        stop_reason,
        interrupted: live.interrupted,
        total_cost_usd: live.total_cost_usd,
        agent_time_ms: live.agent_time_ms,
        wall_s: live.wall_s,
        bench_runs: live.bench_runs,
        turns: facts.turns,
        kept_diff: facts.kept_diff,
        run_command: facts.run_command,
        data_path: crate::probe::read_probe(dir),
        knob_sources: live.knob_sources,
        compute_not_tried: live.compute_not_tried,
        not_editable_knobs: live.not_editable_knobs,
        window: facts.baseline.widened(),
        measured_loader: facts
            .incumbent
            .as_ref()
            .and_then(crate::bench::command::loader_summary),
        limits: Some(limits).filter(|l| l.cpu_limit_sps.is_some()), // else the ceiling line says it all
        costs,
        data_check: crate::judge::DataCheckPlan::of(&facts.baseline.reproduced()),
        profile_unavailable: facts.baseline.profile_unavailable.clone(),
        whole_command: crate::bench::whole::WholeCommand::read(dir),
        machine_load,
        time: Some(time),
    }
}

/// Where the wall time went: the timed steps of every throughput run the
/// folder holds (the baseline's, each decided turn's candidate and
/// incumbent from its `bench.json`, the final comparison's when it was
/// done) against the session's wall time, and each turn's seconds from the
/// event log.
fn time_spent(
    dir: &Path,
    facts: &RunFacts,
    live: &LiveFigures,
    events: &[Value],
) -> crate::bench::time::TimeSpent {
    let folders = run_folder::turn_folders(dir);
    let turn_runs: Vec<Measurement> = facts
        .turns
        .iter()
        .filter_map(|r| folders.iter().find(|t| t.turn == r.turn)?.bench().ok())
        .flat_map(|b| b.all_runs())
        .collect();
    // The final comparison counts as the report counts it: when it decided.
    let final_runs: Vec<&Measurement> = match &facts.final_bench {
        Some(f) if f.median.is_some() && !f.best.is_empty() => f
            .best
            .iter()
            .chain(&f.baseline)
            .chain(&f.set_aside_runs)
            .collect(),
        _ => Vec::new(),
    };
    let runs = (facts.baseline.runs.iter().chain(&turn_runs)).chain(final_runs);
    let whole = crate::bench::whole::WholeCommand::read(dir);
    crate::bench::time::TimeSpent::of(live.wall_s, live.bench_runs, runs, turn_seconds(events))
        .with_whole(whole.as_ref().map_or(&[], |w| &w.rounds[..]))
}

/// How busy the machine was: every measured run (the baseline's, each
/// measured turn's candidate and incumbent, the final comparison's), and
/// which turns were decided while other processes took cores.
fn machine_load(
    dir: &Path,
    baseline: &[Measurement],
    turns: &[TurnRow],
    final_runs: &[Measurement],
) -> Option<crate::bench::load::MachineLoad> {
    use crate::bench::load::{MachineLoad, TurnRuns};
    let folders = run_folder::turn_folders(dir);
    let runs: Vec<(u32, bool, Vec<Measurement>)> = turns
        .iter()
        .filter_map(|r| {
            let b = folders.iter().find(|t| t.turn == r.turn)?.bench().ok()?;
            Some((
                r.turn,
                r.decision.is_kept(),
                [b.candidate, b.incumbent].concat(),
            ))
        })
        .collect();
    let turn_runs: Vec<TurnRuns> = runs
        .iter()
        .map(|(turn, kept, runs)| TurnRuns {
            turn: *turn,
            kept: *kept,
            runs,
        })
        .collect();
    MachineLoad::of(baseline, &turn_runs, final_runs)
}

/// The final state's runs before a final comparison measures it (or when
/// none does): the last kept turn's candidate runs, else the baseline's
/// throughput runs. The live session and a rebuilt report both take them
/// from here, so the report's final row is the median of the same runs
/// whichever wrote it.
pub fn unmeasured_final_runs(
    last_kept: Option<&TurnFolder>,
    baseline: &BaselineBench,
) -> Vec<Measurement> {
    match last_kept {
        Some(t) => t.bench().map(|b| b.candidate).unwrap_or_default(),
        None => baseline.runs.clone(),
    }
}

/// Each state's cost: the baseline's runs, every measured turn's candidate
/// runs (its `turns/NN/bench.json`, written before its decision, so the
/// live session and a rebuild read the same files), and the final state's.
fn state_costs(
    dir: &Path,
    baseline: &[Measurement],
    turns: &[TurnRow],
    final_runs: &[Measurement],
) -> StateCosts {
    let folders = run_folder::turn_folders(dir);
    StateCosts {
        baseline: StateCost::of(baseline),
        turns: turns
            .iter()
            .filter_map(|r| {
                let folder = folders.iter().find(|t| t.turn == r.turn)?;
                let cost = StateCost::of(&folder.bench().ok()?.candidate)?;
                Some(TurnCost { turn: r.turn, cost })
            })
            .collect(),
        final_: StateCost::of(final_runs),
    }
}

/// Whether the baseline's step-alone figure still bounds the final: not once
/// a compute change was kept (the step itself got faster; a final at 270%
/// of the old step is no share of a limit), so the limits leave it out.
fn step_alone_stands(turns: &[TurnRow]) -> bool {
    !turns
        .iter()
        .any(|r| r.decision.is_kept() && crate::edit::compute::knob_of_change(&r.change).is_some())
}

/// A rebuilt report's stop reason: the log's last `stopped` event, else what
/// the run's state says.
fn stop_reason_from_log(events: &[Value], state: Option<RunState>) -> String {
    events
        .iter()
        .rev()
        .find(|e| e["event"] == "stopped")
        .and_then(|e| e["reason"].as_str())
        .map(str::to_string)
        .unwrap_or_else(|| match state {
            Some(RunState::Running) => {
                "not finished: killed, or still running (no report written yet)".to_string()
            }
            Some(s) => format!("not finished ({s}; no report written)"),
            None => "not finished (no report written)".to_string(),
        })
}

/// Each decided turn's seconds: its last `turn_started` to its
/// `turn_decided`, by their time stamps (a turn done again after a resume
/// counts its last try; one without a decision is left out).
fn turn_seconds(events: &[Value]) -> Vec<crate::bench::time::TurnSeconds> {
    let ts = |e: &Value| {
        e["ts"]
            .as_str()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
    };
    let mut started = std::collections::BTreeMap::new();
    let mut out = Vec::new();
    for e in events {
        match e["event"].as_str() {
            Some("turn_started") => {
                if let (Some(n), Some(t)) = (e["turn"].as_u64(), ts(e)) {
                    started.insert(n, t);
                }
            }
            Some("turn_decided") => {
                let n = e["row"]["turn"].as_u64();
                if let (Some(n), Some(t)) = (n, ts(e)) {
                    if let Some(a) = started.remove(&n) {
                        out.retain(|x: &crate::bench::time::TurnSeconds| x.turn as u64 != n);
                        out.push(crate::bench::time::TurnSeconds {
                            turn: n as u32,
                            s: (t - a).num_milliseconds().max(0) as f64 / 1000.0,
                        });
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// Seconds from the first event to the last, by their time stamps.
fn wall_seconds(events: &[Value]) -> f64 {
    let ts = |e: Option<&Value>| {
        e.and_then(|e| e["ts"].as_str())
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
    };
    match (ts(events.first()), ts(events.last())) {
        (Some(a), Some(b)) => (b - a).num_milliseconds().max(0) as f64 / 1000.0,
        _ => f64::NAN,
    }
}

/// Baseline → best as one diff: the saved baseline files against the last
/// kept turn's candidate files; without them, the kept turns' own diffs.
fn kept_diff(
    dir: &Path,
    editable: &[String],
    last_kept_candidate: Option<PathBuf>,
    decided: &[(TurnFolder, TurnRow)],
) -> String {
    let Some(kept_candidate) = last_kept_candidate else {
        return String::new();
    };
    let base = FileSet::load(&dir.join("baseline").join("files"), editable);
    let best = FileSet::load(&kept_candidate, editable);
    if let (Ok(a), Ok(b), false) = (&base, &best, editable.is_empty()) {
        return diff_files(editable, a, b);
    }
    decided
        .iter()
        .filter(|(_, r)| r.decision.is_kept())
        .filter_map(|(t, _)| std::fs::read_to_string(t.dir.join("diff.patch")).ok())
        .collect()
}

/// The best state's `[bench] run` as one shell line, when a kept turn
/// changed it (the workspace file is among the run's files).
fn run_command(
    dir: &Path,
    editable: &[String],
    last_kept_candidate: Option<PathBuf>,
) -> Option<String> {
    let file = crate::edit::command_line::RUN_FILE.to_string();
    if !editable.contains(&file) {
        return None;
    }
    let files = [file];
    let best = FileSet::load(&last_kept_candidate?, &files).ok()?;
    let base = FileSet::load(&dir.join("baseline").join("files"), &files).ok()?;
    changed_command(&base, &best)
}

/// The command of `best` as one shell line, when its `[bench] run` differs
/// from `base`'s (both file sets carrying the workspace file).
pub fn changed_command(base: &FileSet, best: &FileSet) -> Option<String> {
    let file = crate::edit::command_line::RUN_FILE;
    let words = |s: &FileSet| {
        s.0.contains_key(file)
            .then(|| crate::edit::command_line::run_words(&s.text(file)))
            .flatten()
    };
    let best_words = words(best)?;
    (words(base)? != best_words).then(|| shell_words::join(&best_words))
}

/// One unified diff of the editable files, `a` → `b`.
pub fn diff_files(editable: &[String], a: &FileSet, b: &FileSet) -> String {
    editable
        .iter()
        .map(|f| crate::edit::unified_diff(f, &a.text(f), &b.text(f)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::AgentInfo;
    use crate::report::Decision;

    fn m(sps: f64, share: f64) -> Measurement {
        Measurement {
            samples_per_sec: sps,
            data_wait_share: Some(share),
            ..Default::default()
        }
    }

    fn row(turn: u32, decision: Decision, after: f64, runs: u32, cost: f64) -> TurnRow {
        TurnRow {
            turn,
            change: format!("change {turn}"),
            file: Some("train.py".into()),
            before_sps: Some(100.0),
            after_sps: Some(after),
            ratio: Some(after / 100.0),
            ratio_ci: Some([0.9, 1.1]),
            runs,
            decision,
            reason: "r".into(),
            agent: AgentInfo {
                backend: "builtin".into(),
                num_turns: None,
                cost_usd: Some(cost),
                exit_code: None,
                duration_ms: 1000,
            },
            candidate_samples: vec![after],
            incumbent_samples: vec![100.0],
            data_wait_share: Some(0.1 * turn as f64),
            confirmation: None,
        }
    }

    #[test]
    fn a_kept_compute_change_retires_the_baselines_step_alone_limit() {
        let named = |change: &str, d| TurnRow {
            change: change.into(),
            ..row(1, d, 150.0, 4, 0.0)
        };
        let loader = named("num_workers 0 → 2", Decision::Kept);
        let compute_kept = named(
            "foreach_optimizer: foreach=True on torch.optim.SGD",
            Decision::Kept,
        );
        let compute_reverted = named(
            "fused_optimizer: fused=True on torch.optim.SGD",
            Decision::Reverted,
        );
        assert!(step_alone_stands(&[
            loader.clone(),
            compute_reverted.clone()
        ]));
        assert!(!step_alone_stands(&[
            loader,
            compute_kept,
            compute_reverted
        ]));
    }

    /// A run folder killed after its final measurement: baseline, a kept
    /// turn, a reverted one, final.json, no report; written with the same
    /// typed writers the loop uses.
    fn killed_run(dir: &Path) {
        let mut store = store::RunStore::open(dir).unwrap();
        store
            .append(&crate::event::Event::TurnStarted {
                turn: 1,
                time_left: None,
            })
            .unwrap();
        BaselineBench {
            profiled: Some(m(90.0, 0.8)),
            runs: vec![m(100.0, 0.7), m(102.0, 0.8), m(98.0, 0.9)],
            ..Default::default()
        }
        .write(dir)
        .unwrap();
        FileSet(
            [("train.py".to_string(), b"workers = 0\n".to_vec())]
                .into_iter()
                .collect(),
        )
        .save(&dir.join("baseline/files"))
        .unwrap();
        for (r, cand) in [
            (row(1, Decision::Kept, 150.0, 6, 0.5), Some("workers = 4\n")),
            (row(2, Decision::Reverted, 140.0, 4, 0.25), None),
        ] {
            let t = TurnFolder {
                turn: r.turn,
                dir: dir.join(format!("turns/{:02}", r.turn)),
            };
            if let Some(c) = cand {
                FileSet(
                    [("train.py".to_string(), c.as_bytes().to_vec())]
                        .into_iter()
                        .collect(),
                )
                .save(&t.candidate_dir())
                .unwrap();
            }
            t.write_decision(&r).unwrap();
        }
        // Turn 3 was killed before its decision: not part of the report.
        std::fs::create_dir_all(dir.join("turns/03")).unwrap();
        FinalBench {
            best: vec![m(151.0, 0.2), m(149.0, 0.2), m(150.0, 0.2)],
            baseline: vec![m(100.0, 0.7), m(100.0, 0.7), m(100.0, 0.7)],
            ratios: vec![1.5, 1.5, 1.5],
            median: Some(1.5),
            ci: Some([1.45, 1.55]),
            ..Default::default()
        }
        .write(dir)
        .unwrap();
        let mut rec: RunRecord = serde_json::from_value(serde_json::json!({
            "run_id": "r1", "state": "running", "project_root": "/p", "agent": "builtin",
            "editable": ["train.py"], "started_at": "2025-01-01T12:00:00+00:00",
        }))
        .unwrap();
        rec.policy.agent.language = "ja".into();
        rec.write(dir).unwrap();
    }

    #[test]
    fn a_rebuilt_report_takes_every_figure_from_the_folder() {
        let d = tempfile::tempdir().unwrap();
        killed_run(d.path());
        let facts = RunFacts::read(d.path()).unwrap();
        let r = assemble(d.path(), facts, None);
        assert_eq!(r.run_id, "r1");
        assert_eq!(r.language, "ja");
        assert_eq!(r.baseline_samples, vec![100.0, 102.0, 98.0]);
        assert_eq!(r.baseline_sps, 100.0);
        assert_eq!(r.baseline_data_wait_share, Some(0.8));
        assert_eq!(r.turns.len(), 2, "the undecided turn 3 is left out");
        // final.json overrides the last kept turn's figure.
        assert_eq!(r.speedup, 1.5);
        assert_eq!(r.speedup_ci, Some([1.45, 1.55]));
        assert_eq!(r.final_sps, 150.0);
        // The last kept turn's share, not the reverted turn's.
        assert_eq!(r.final_data_wait_share, Some(0.1));
        // profiled + 3 baseline + 6 + 4 turn runs + 6 final runs.
        assert_eq!(r.bench_runs, 1 + 3 + 6 + 4 + 6);
        assert_eq!(r.total_cost_usd, 0.75);
        assert!(r.interrupted);
        assert!(r.stop_reason.contains("killed"), "{}", r.stop_reason);
        assert!(r.kept_diff.contains("+workers = 4"), "{}", r.kept_diff);
    }

    #[test]
    fn a_finished_run_rebuilt_is_not_called_interrupted_and_costs_print_unsigned() {
        let d = tempfile::tempdir().unwrap();
        killed_run(d.path());
        let mut rec = RunRecord::read(d.path()).unwrap();
        rec.state = RunState::Finished;
        rec.write(d.path()).unwrap();
        let mut facts = RunFacts::read(d.path()).unwrap();
        for t in &mut facts.turns {
            t.agent.cost_usd = None;
        }
        let r = assemble(d.path(), facts, None);
        assert!(!r.interrupted);
        // A float sum of nothing is -0.0, which prints as "$-0.00".
        assert_eq!(format!("{:.2}", r.total_cost_usd), "0.00");
    }

    #[test]
    fn the_live_session_and_a_rebuild_differ_only_in_what_the_session_knows() {
        let d = tempfile::tempdir().unwrap();
        killed_run(d.path());
        let facts = RunFacts::read(d.path()).unwrap();
        let rebuilt = assemble(d.path(), facts.clone(), None);
        let live = LiveFigures {
            stop_reason: "iteration limit (2) reached".into(),
            interrupted: false,
            wall_s: 12.5,
            bench_runs: 99,
            total_cost_usd: 2.0,
            agent_time_ms: 7,
            knob_sources: vec![],
            compute_not_tried: vec![],
            not_editable_knobs: vec![],
        };
        let written = assemble(d.path(), facts, Some(live.clone()));
        assert_eq!(written.stop_reason, live.stop_reason);
        assert!(!written.interrupted);
        assert_eq!(
            (written.wall_s, written.bench_runs, written.total_cost_usd),
            (12.5, 99, 2.0)
        );
        let same = RunReport {
            stop_reason: rebuilt.stop_reason.clone(),
            interrupted: rebuilt.interrupted,
            wall_s: rebuilt.wall_s,
            bench_runs: rebuilt.bench_runs,
            total_cost_usd: rebuilt.total_cost_usd,
            agent_time_ms: rebuilt.agent_time_ms,
            // Its wall time and process count are the session's.
            time: rebuilt.time.clone(),
            ..written
        };
        // NaN wall time (one event) compares unequal: compare the JSON.
        assert_eq!(
            report::render_json(&same),
            report::render_json(&rebuilt),
            "every other field is assembled the same way"
        );
    }

    #[test]
    fn without_a_final_measurement_the_speedup_is_the_last_kept_turns() {
        let d = tempfile::tempdir().unwrap();
        killed_run(d.path());
        std::fs::remove_file(FinalBench::path(d.path())).unwrap();
        let r = assemble(d.path(), RunFacts::read(d.path()).unwrap(), None);
        assert_eq!(r.final_sps, 150.0);
        assert_eq!(r.speedup, 1.5);
        assert_eq!(r.speedup_ci, None);
        assert_eq!(r.bench_runs, 1 + 3 + 6 + 4);
        std::fs::remove_file(BaselineBench::path(d.path())).unwrap();
        assert!(RunFacts::read(d.path()).unwrap_err().is_missing());
    }

    /// A run with `nw` workers of `pss` bytes between them, and `cpu` CPU
    /// seconds (loading + training) over 10 s of timed steps.
    fn costly(sps: f64, nw: u64, pss: u64, cpu: f64) -> Measurement {
        let mut m = m(sps, 0.1);
        m.loader.insert("num_workers".into(), nw.into());
        m.live_workers = Some(nw);
        m.workers_pss_bytes = (nw > 0).then_some(pss);
        m.loader_cpu_s = Some(cpu / 2.0);
        m.main_cpu_s = Some(cpu / 2.0);
        m.wall_s = Some(10.0);
        m.usable_cores = Some(2.0);
        m
    }

    #[test]
    fn each_states_memory_and_cpu_come_from_its_median_run_in_the_folder() {
        let d = tempfile::tempdir().unwrap();
        killed_run(d.path());
        BaselineBench {
            profiled: None,
            runs: vec![
                costly(100.0, 0, 0, 9.0),
                costly(102.0, 0, 0, 7.0),
                costly(98.0, 0, 0, 5.0),
            ],
            ..Default::default()
        }
        .write(d.path())
        .unwrap();
        // Turn 1 (kept, 4 workers) and turn 2 (reverted, 8) were measured.
        for (turn, runs) in [
            (
                1,
                vec![
                    costly(149.0, 4, 1, 1.0),
                    costly(150.0, 4, 400_000_000, 14.0),
                ],
            ),
            (2, vec![costly(140.0, 8, 800_000_000, 18.0)]),
        ] {
            let t = TurnFolder {
                turn,
                dir: d.path().join(format!("turns/{turn:02}")),
            };
            t.write_bench(&run_folder::TurnBench {
                candidate: runs,
                incumbent: vec![costly(100.0, 0, 0, 9.0)],
                ratios: vec![],
                median: None,
                ci: None,
                verdict: None,
                ..Default::default()
            })
            .unwrap();
        }
        let mut f = FinalBench::read(d.path()).unwrap();
        f.best = vec![
            costly(151.0, 4, 420_000_000, 16.0),
            costly(149.0, 4, 410_000_000, 15.0),
            costly(150.0, 4, 415_000_000, 15.5),
        ];
        f.write(d.path()).unwrap();
        let r = assemble(d.path(), RunFacts::read(d.path()).unwrap(), None);
        let c = r.costs.expect("figures were measured");
        let base = c.baseline.clone().unwrap();
        // The median baseline run (100/s) is the one at 9 CPU seconds.
        assert_eq!(
            (base.samples_per_sec, base.num_workers, base.cpu_cores),
            (100.0, Some(0), Some(0.9))
        );
        assert_eq!(base.workers_memory_bytes, Some(0));
        // Two runs: the lower middle one (149/s).
        let t1 = c.turn(1).unwrap();
        assert_eq!((t1.runs, t1.samples_per_sec), (2, 149.0));
        assert_eq!(c.turn(2).unwrap().workers_memory_bytes, Some(800_000_000));
        assert_eq!(c.turns.len(), 2);
        // The final comparison's runs of the final state, not the kept turn's.
        let fin = c.final_.unwrap();
        assert_eq!(
            (fin.samples_per_sec, fin.workers_memory_bytes, fin.cpu_cores),
            (150.0, Some(415_000_000), Some(1.55))
        );
        // Shown in report.md: the headline's before/after and the table.
        let mut facts = RunFacts::read(d.path()).unwrap();
        facts.language = "en".into();
        let md = report::render_markdown(&assemble(d.path(), facts, None));
        assert!(
            md.contains(
                "workers 0 → 4 · workers' memory 0 MB → 415 MB (PSS) · CPU 0.90 → 1.55 cores"
            ),
            "{md}"
        );
        assert!(
            md.contains("| turn 2 | change 2 | reverted | 140.0 | 8 | 800 MB (PSS) |"),
            "{md}"
        );
    }

    #[test]
    fn measured_seconds_sum_every_throughput_runs_window_and_turns_take_their_log_times() {
        let d = tempfile::tempdir().unwrap();
        killed_run(d.path());
        let w = |sps: f64, wall: f64| Measurement {
            wall_s: Some(wall),
            ..m(sps, 0.5)
        };
        // The profiled run's window is profiled, not measured: not summed.
        BaselineBench {
            profiled: Some(w(90.0, 100.0)),
            runs: vec![w(100.0, 1.0), w(102.0, 1.0), w(98.0, 1.0)],
            ..Default::default()
        }
        .write(d.path())
        .unwrap();
        let t = TurnFolder {
            turn: 1,
            dir: d.path().join("turns/01"),
        };
        t.write_bench(&run_folder::TurnBench {
            candidate: vec![w(150.0, 2.0), w(150.0, 2.0)],
            incumbent: vec![w(100.0, 3.0), w(100.0, 3.0)],
            ratios: vec![],
            median: None,
            ci: None,
            verdict: None,
            ..Default::default()
        })
        .unwrap();
        let mut f = FinalBench::read(d.path()).unwrap();
        f.best = vec![w(151.0, 0.5), w(149.0, 0.5), w(150.0, 0.5)];
        f.baseline = vec![w(100.0, 0.25), w(100.0, 0.25), Measurement::default()];
        f.write(d.path()).unwrap();
        let log = [
            ("turn_started", 1, "2025-01-01T12:00:10+00:00"),
            ("turn_decided", 1, "2025-01-01T12:00:52.5+00:00"),
            ("turn_started", 2, "2025-01-01T12:00:53+00:00"),
            ("turn_decided", 2, "2025-01-01T12:01:03+00:00"),
        ];
        let mut text = String::from(r#"{"event":"run_started","ts":"2025-01-01T12:00:00+00:00"}"#);
        for (ev, turn, ts) in log {
            let line = match ev {
                "turn_started" => serde_json::json!({"event": ev, "turn": turn, "ts": ts}),
                _ => serde_json::json!({"event": ev, "row": {"turn": turn}, "ts": ts}),
            };
            text.push('\n');
            text.push_str(&line.to_string());
        }
        std::fs::write(d.path().join("events.jsonl"), text + "\n").unwrap();
        let r = assemble(d.path(), RunFacts::read(d.path()).unwrap(), None);
        let time = r.time.clone().expect("every report has its time");
        // 3 × 1 s baseline + 2 × 2 + 2 × 3 turn 1 (turn 2 has no bench.json)
        // + 3 × 0.5 + 2 × 0.25 final (a run without a window adds nothing).
        assert_eq!(time.measured_s, 3.0 + 4.0 + 6.0 + 1.5 + 0.5);
        assert_eq!(time.measured_runs, 3 + 4 + 5);
        assert_eq!(time.wall_s, 63.0, "first event to last");
        assert_eq!(time.bench_runs, r.bench_runs);
        assert_eq!(time.measured_share, Some(15.0 / 63.0));
        assert!(time.measured_s > 0.0 && time.measured_s < time.wall_s);
        let turns: Vec<(u32, f64)> = time.turns.iter().map(|t| (t.turn, t.s)).collect();
        assert_eq!(turns, vec![(1, 42.5), (2, 10.0)]);
        let json: Value = serde_json::from_str(&report::render_json(&r)).unwrap();
        assert_eq!(json["time"]["measured_s"], 15.0);
        assert_eq!(json["time"]["turns"][0]["s"], 42.5);
        let mut facts = RunFacts::read(d.path()).unwrap();
        facts.language = "en".into();
        let md = report::render_markdown(&assemble(d.path(), facts, None));
        assert!(
            md.contains(
                "- **Measuring:** 15.0s of 1m 03s (24%): the timed steps of 12 throughput runs"
            ),
            "{md}"
        );
    }

    #[test]
    fn a_run_without_cost_figures_has_no_costs() {
        let d = tempfile::tempdir().unwrap();
        killed_run(d.path());
        let mut facts = RunFacts::read(d.path()).unwrap();
        facts.language = "en".into();
        let r = assemble(d.path(), facts, None);
        assert_eq!(r.costs, None);
        assert!(!report::render_markdown(&r).contains("Memory and CPU"));
    }
}
