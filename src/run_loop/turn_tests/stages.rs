//! Each stage of a turn on its own (`run_loop::stages`), on the same
//! scripted [`Measure`] and agent as the whole-session tests: a session is
//! prepared and its baseline measured, then one stage is called and what it
//! wrote, emitted and returned is checked. The rules (verify, decide, the
//! numerics guard) are called on plain values.

use super::*;
use crate::agent::AgentReport;
use crate::bench::stats::PairedRatio;
use crate::knob::{ComputeKnob, LoaderKnob};
use crate::run_loop::stages::{self, Changes, Refusal, TurnStart};

/// A session after its baseline (`start` workers on disk), the scripted
/// agent writing `turns`' counts; `f` runs the stages under test.
fn with_session<R>(
    start: u64,
    turns: &[u64],
    figures: impl Fn(u64, usize, Mode) -> Result<Measurement, BenchError> + Send + Sync + 'static,
    f: impl FnOnce(&mut Session<'_>, &tokio::runtime::Runtime) -> R,
) -> (R, Vec<Event>) {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("train.py"), train_py(start)).unwrap();
    std::fs::write(
        d.join("tuneloop.toml"),
        "[project]\nroot = \".\"\neditable = [\"train.py\"]\n\n[bench]\nentry = \"train:build\"\n",
    )
    .unwrap();
    let ws = Workspace::load(d).unwrap();
    let agent = Agent::Scripted(ScriptedAgent {
        turns: turns
            .iter()
            .map(|&nw| ScriptedTurn {
                file: "train.py".into(),
                text: Some(train_py(nw)),
                cost_usd: 0.25,
            })
            .collect(),
    });
    let events = Mutex::new(Vec::new());
    let mut view = |e: &Event| events.lock().unwrap().push(e.clone());
    let mut s = prepare(
        &ws,
        StartOptions {
            policy_path: d.join("policies/default.toml"),
            policy: Policy::default(),
            iterations: Some(turns.len() as u32),
            allow_dirty: true,
            git_commits: false,
        },
        agent,
        Interrupt::new(),
        &mut view,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    s.bencher = Arc::new(Scripted {
        root: s.root.clone(),
        figures: Arc::new(figures),
        runs: Arc::new(Mutex::new(Vec::new())),
        steps: None,
        job_batches: None,
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(s.baseline()).unwrap_or_else(|e| panic!("{e}"));
    let r = f(&mut s, &rt);
    drop(s);
    (r, events.into_inner().unwrap())
}

fn on_disk(s: &Session<'_>) -> u64 {
    workers_in(&std::fs::read_to_string(s.root.join("train.py")).unwrap())
}

/// Snapshot and propose: the scripted agent's change on disk.
fn proposed(s: &mut Session<'_>, rt: &tokio::runtime::Runtime) -> (TurnStart, AgentReport) {
    let start = s.snapshot(1).unwrap();
    let rep = rt.block_on(s.propose(&start)).unwrap();
    (start, rep)
}

/// A paired comparison as the measure stage returns it.
fn paired(cand: &[Measurement], inc: &[Measurement]) -> Paired {
    let policy = Policy::default();
    let ratio = PairedRatio::new(&sps(cand), &sps(inc), policy.decision.confidence);
    let verdict = stats::decide(&ratio, &policy.decision);
    Paired {
        candidate: cand.to_vec(),
        incumbent: inc.to_vec(),
        ratio,
        verdict,
        set_aside: Vec::new(),
        waited_s: 0.0,
        set_aside_runs: Vec::new(),
        again: None,
    }
}

pub(super) fn blank_row(change: &str) -> TurnRow {
    TurnRow {
        turn: 1,
        change: change.into(),
        file: Some("train.py".into()),
        before_sps: None,
        after_sps: None,
        ratio: None,
        ratio_ci: None,
        runs: 0,
        decision: Decision::Failed,
        reason: String::new(),
        agent: Default::default(),
        candidate_samples: vec![],
        incumbent_samples: vec![],
        data_wait_share: None,
        confirmation: None,
    }
}

// ---------------------------------------------------------------- snapshot

#[test]
fn the_snapshot_stage_saves_the_incumbent_and_the_project_before_the_agent() {
    let (start, events) = with_session(0, &[2], two_levels(0, 150.0), |s, _| {
        let start = s.snapshot(1).unwrap();
        assert!(start.dir.is_dir(), "the turn's folder exists");
        let saved = s.store.dir.join("incumbent").join("train.py");
        assert_eq!(
            std::fs::read_to_string(saved).unwrap(),
            train_py(0),
            "incumbent/ holds the incumbent's files"
        );
        assert!(s.store.dir.join("snapshot").exists());
        // The snapshot sees a file the agent would add later as a change.
        std::fs::write(s.root.join("notes.txt"), "x").unwrap();
        let changed = s.changes(&start).unwrap();
        assert_eq!(changed.others, vec!["notes.txt".to_string()]);
        start.turn
    });
    assert_eq!(start, 1);
    let Some(Event::TurnStarted { turn: 1, time_left }) = events.last() else {
        panic!("the last event is turn 1's start: {:?}", events.last());
    };
    // The baseline's runs were timed: the estimate is there, with every
    // turn of the iteration limit still to come.
    let left = time_left.expect("an estimate once the baseline's runs were timed");
    assert!(left.run_s > 0.0, "{left:?}");
    assert_eq!(left.turns_left, 1, "--iterations 1, none done");
    // One turn at the rule's least (2 × repeats 2) and the final's 6 runs;
    // at most the turn at 2 × max_repeats 8 and the final at 2 ×
    // final_max_pairs 10.
    let runs = |s: f64| (s / left.run_s).round();
    assert_eq!((runs(left.about_s), runs(left.at_most_s)), (10.0, 36.0));
}

// ---------------------------------------------------------------- propose

#[test]
fn the_propose_stage_calls_the_agent_and_records_its_call() {
    let (_, events) = with_session(0, &[2], two_levels(0, 150.0), |s, rt| {
        let (start, rep) = proposed(s, rt);
        assert!(rep.failure.is_none() && !rep.exhausted);
        assert_eq!(on_disk(s), 2, "the agent's change is on disk");
        assert_eq!(s.cost, 0.25, "the call's cost is counted");
        let agent = std::fs::read_to_string(start.dir.join("agent.json")).unwrap();
        assert!(agent.contains("turn 1: wrote train.py"), "{agent}");
        let prompt = std::fs::read_to_string(start.dir.join("prompt.md")).unwrap();
        assert!(prompt.starts_with("(builtin agent: no prompt)"), "{prompt}");
        // Past its script the agent has nothing left.
        let start = s.snapshot(2).unwrap();
        let rep = rt.block_on(s.propose(&start)).unwrap();
        assert!(rep.exhausted);
        assert!(s
            .exhausted_reason(rep.stop_note)
            .starts_with("candidates exhausted"),);
    });
    assert!(events.iter().any(|e| matches!(
        e,
        Event::AgentFinished {
            turn: 1,
            ok: true,
            ..
        }
    )));
}

#[test]
fn a_failed_agent_call_fails_the_turn_with_its_words() {
    let rep = AgentReport {
        failure: Some("not logged in".into()),
        ..Default::default()
    };
    assert_eq!(
        stages::agent_failure(&rep),
        Some(Refusal {
            decision: Decision::Failed,
            change: "(agent failed)".into(),
            reason: "agent: not logged in".into(),
        })
    );
    assert_eq!(stages::agent_failure(&AgentReport::default()), None);
}

#[test]
fn a_streak_that_ended_the_climb_is_the_exhausted_reason() {
    with_session(0, &[], two_levels(0, 150.0), |s, _| {
        assert_eq!(
            s.exhausted_reason(Some("the loader is settled".into())),
            "the loader is settled"
        );
        s.streak = Some("3 turns not kept in a row".into());
        let r = s.exhausted_reason(None);
        assert!(
            r.starts_with(
                "3 turns not kept in a row ended the climb, and no cheaper setting is left to try"
            ),
            "{r}"
        );
    });
}

// ---------------------------------------------------------------- verify

#[test]
fn the_verify_stage_passes_one_loader_change_and_refuses_the_rest() {
    with_session(0, &[2], two_levels(0, 150.0), |s, rt| {
        let (start, _) = proposed(s, rt);
        let changed = s.changes(&start).unwrap();
        let policy = s.policy.clone();
        let one = stages::verify_change(&s.incumbent_files, &changed, &*s.bencher, &policy);
        let one = one.unwrap();
        assert_eq!(one.knob, LoaderKnob::NumWorkers.name());
        assert_eq!(one.file, "train.py");
        assert!(
            one.change.starts_with("num_workers 0 → 2"),
            "{}",
            one.change
        );

        // Nothing changed.
        let same = Changes {
            after: s.incumbent_files.clone(),
            others: vec![],
            harness_touched: false,
        };
        let r = stages::verify_change(&s.incumbent_files, &same, &*s.bencher, &policy);
        assert_eq!(r.unwrap_err().decision, Decision::NoChange);

        // Another project file changed too.
        let other = Changes {
            others: vec!["data.py".into()],
            ..s.changes(&start).unwrap()
        };
        let r = stages::verify_change(&s.incumbent_files, &other, &*s.bencher, &policy);
        let refusal = r.unwrap_err();
        assert_eq!(refusal.decision, Decision::Rejected);
        assert!(refusal.reason.contains("data.py"), "{}", refusal.reason);

        // The harness was touched: rejected whatever the files say.
        let harness = Changes {
            harness_touched: true,
            ..s.changes(&start).unwrap()
        };
        let r = stages::verify_change(&s.incumbent_files, &harness, &*s.bencher, &policy);
        assert_eq!(r.unwrap_err().change, "harness edit");
    });
}

/// The scripted measure, naming `bench.py` as part of the measurement.
struct WithScript(Scripted);

impl Measure for WithScript {
    fn measure<'a>(&'a self, mode: Mode, i: &'a Interrupt) -> Pending<'a, Measurement> {
        self.0.measure(mode, i)
    }
    fn profile<'a>(&'a self, i: &'a Interrupt) -> Pending<'a, Profiled> {
        self.0.profile(i)
    }
    fn script_files(&self) -> Vec<String> {
        vec!["bench.py".into()]
    }
}

#[test]
fn an_edit_of_the_bench_script_is_rejected_as_part_of_the_measurement() {
    with_session(0, &[2], two_levels(0, 150.0), |s, rt| {
        let (start, _) = proposed(s, rt);
        let changed = Changes {
            others: vec!["bench.py".into()],
            ..s.changes(&start).unwrap()
        };
        let measure = WithScript(Scripted {
            root: s.root.clone(),
            figures: Arc::new(two_levels(0, 150.0)),
            runs: Default::default(),
            steps: None,
            job_batches: None,
        });
        let r = stages::verify_change(&s.incumbent_files, &changed, &measure, &s.policy);
        let refusal = r.unwrap_err();
        assert_eq!(refusal.change, "edit of bench.py");
        assert!(refusal.reason.contains("part of the measurement"));
    });
}

#[test]
fn an_unmeasured_turn_puts_the_incumbent_back_and_records_its_row() {
    let (_, events) = with_session(0, &[2], two_levels(0, 150.0), |s, rt| {
        let (start, rep) = proposed(s, rt);
        std::fs::write(s.root.join("notes.txt"), "added by the agent").unwrap();
        let changed = s.changes(&start).unwrap();
        let row = s.open_row(&start, &rep, &changed.after).unwrap();
        let diff = std::fs::read_to_string(start.dir.join("diff.patch")).unwrap();
        assert!(diff.contains("+    return DataLoader(ds, batch_size=8, num_workers=2)"));
        let refusal = Refusal {
            decision: Decision::Rejected,
            change: "two changes".into(),
            reason: "one change a turn".into(),
        };
        let row = TurnRow {
            decision: refusal.decision,
            change: refusal.change,
            reason: refusal.reason,
            ..row
        };
        s.unmeasured(&start, row.clone()).unwrap();
        assert_eq!(on_disk(s), 0, "the incumbent's count is back");
        assert!(!s.root.join("notes.txt").exists(), "the other file is gone");
        let folder = TurnFolder {
            turn: 1,
            dir: start.dir.clone(),
        };
        assert_eq!(folder.decision(), Some(row));
        assert_eq!(s.rows.len(), 1);
    });
    assert!(matches!(events.last(), Some(Event::TurnDecided { .. })));
}

// ---------------------------------------------------------------- measure

#[test]
fn the_measure_stage_runs_candidate_and_incumbent_interleaved() {
    let (_, events) = with_session(0, &[2], two_levels(0, 150.0), |s, rt| {
        let (start, _) = proposed(s, rt);
        let changed = s.changes(&start).unwrap();
        let before = s.bench_runs;
        let p = rt
            .block_on(s.measure(&start, "num_workers 0 → 2", &changed.after))
            .unwrap()
            .unwrap_or_else(|f| panic!("{}", f.error));
        assert_eq!(p.cand_sps(), vec![150.0, 150.0]);
        assert_eq!(p.inc_sps(), vec![100.0, 100.0]);
        assert_eq!(p.verdict, Verdict::Keep);
        assert_eq!(s.bench_runs, before + 4);
        let saved = start.dir.join("candidate").join("train.py");
        assert_eq!(std::fs::read_to_string(saved).unwrap(), train_py(2));
    });
    let measured: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::Measured { turn: 1, role, .. } => Some(role.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        measured,
        ["incumbent", "candidate", "candidate", "incumbent"]
    );
}

#[test]
fn a_failed_measurement_fails_the_turn_and_restores() {
    let figures = |nw: u64, _: usize, _: Mode| match nw {
        0 => Ok(m(100.0, 0.8, Some("fp"))),
        _ => Err(BenchError::User {
            kind: "oom".into(),
            message: "out of memory at 2 workers".into(),
        }),
    };
    with_session(0, &[2], figures, |s, rt| {
        let (start, rep) = proposed(s, rt);
        let changed = s.changes(&start).unwrap();
        let row = s.open_row(&start, &rep, &changed.after).unwrap();
        let before = s.bench_runs;
        let failed = rt
            .block_on(s.measure(&start, "num_workers 0 → 2", &changed.after))
            .unwrap()
            .expect_err("the candidate's run fails");
        assert_eq!((failed.role, failed.runs), ("candidate", 2));
        assert_eq!(s.bench_runs, before + 2, "the failed pair's runs count");
        s.measure_failed(&start, row, failed).unwrap();
        assert_eq!(on_disk(s), 0);
        let r = s.rows.last().unwrap();
        assert_eq!(r.decision, Decision::Failed);
        assert_eq!(r.runs, 2);
        assert!(
            r.reason.starts_with("bench failed (candidate)"),
            "{}",
            r.reason
        );
        let err = std::fs::read_to_string(start.dir.join("bench_error.txt")).unwrap();
        assert!(err.contains("out of memory at 2 workers"), "{err}");
    });
}

#[test]
fn an_interrupted_measurement_ends_the_run_with_the_incumbent_in_place() {
    let figures = |nw: u64, _: usize, _: Mode| match nw {
        0 => Ok(m(100.0, 0.8, Some("fp"))),
        _ => Err(BenchError::Interrupted),
    };
    with_session(0, &[2], figures, |s, rt| {
        let (start, rep) = proposed(s, rt);
        let changed = s.changes(&start).unwrap();
        let row = s.open_row(&start, &rep, &changed.after).unwrap();
        let failed = rt
            .block_on(s.measure(&start, "num_workers 0 → 2", &changed.after))
            .unwrap()
            .expect_err("the candidate's run is interrupted");
        let e = s.measure_failed(&start, row, failed).unwrap_err();
        assert!(matches!(e, LoopError::Interrupted));
        assert_eq!(on_disk(s), 0);
        assert!(
            s.rows.is_empty(),
            "no row: the turn is done again on resume"
        );
    });
}

// ---------------------------------------------------------------- decide

#[test]
fn the_decide_stage_fills_the_figures_and_keeps_a_faster_change() {
    let p = paired(
        &[m(150.0, 0.3, Some("fp")), m(150.0, 0.1, Some("fp"))],
        &[m(100.0, 0.8, Some("fp")), m(100.0, 0.8, Some("fp"))],
    );
    let base = BaselineBench::default();
    let knob = LoaderKnob::NumWorkers.name();
    let row = stages::decide(
        blank_row("num_workers 0 → 2"),
        knob,
        &p,
        &base,
        &Policy::default(),
    );
    assert_eq!(row.decision, Decision::Kept, "{}", row.reason);
    assert_eq!(row.runs, 4);
    assert!(close(row.ratio, 1.5));
    assert!(close(row.before_sps, 100.0) && close(row.after_sps, 150.0));
    assert_eq!(row.candidate_samples, vec![150.0, 150.0]);
    assert!(
        close(row.data_wait_share, 0.2),
        "the candidate's median share"
    );
    assert!(
        row.reason.starts_with("faster: ratio 1.500"),
        "{}",
        row.reason
    );
}

#[test]
fn the_decide_stage_keeps_a_cheaper_change_as_cheaper_and_rejects_changed_data() {
    let base = BaselineBench::default();
    let knob = LoaderKnob::NumWorkers.name();
    let (fast, slow) = (m(150.0, 0.3, Some("a")), m(100.0, 0.8, Some("a")));
    // Fewer workers, faster: kept, as the cheaper setting.
    let p = paired(&[fast.clone(), fast.clone()], &[slow.clone(), slow.clone()]);
    let row = stages::decide(
        blank_row("num_workers 4 → 2"),
        knob,
        &p,
        &base,
        &Policy::default(),
    );
    assert_eq!(row.decision, Decision::KeptCheaper, "{}", row.reason);
    // Faster, but the candidate's first batches differ: the data changed.
    let other = m(150.0, 0.3, Some("b"));
    let p = paired(&[other.clone(), other], &[slow.clone(), slow]);
    let row = stages::decide(
        blank_row("num_workers 0 → 2"),
        knob,
        &p,
        &base,
        &Policy::default(),
    );
    assert_eq!(row.decision, Decision::Rejected, "{}", row.reason);
}

#[test]
fn the_decide_stage_says_how_many_candidate_runs_were_cut() {
    let cut = Measurement {
        window_cut: true,
        ..m(20.0, 0.3, Some("fp"))
    };
    let whole = m(20.0, 0.3, Some("fp"));
    let inc = m(100.0, 0.8, Some("fp"));
    let p = paired(&[cut, whole], &[inc.clone(), inc]);
    let knob = LoaderKnob::NumWorkers.name();
    let row = stages::decide(
        blank_row("num_workers 0 → 2"),
        knob,
        &p,
        &BaselineBench::default(),
        &Policy::default(),
    );
    assert_eq!(row.decision, Decision::Reverted, "{}", row.reason);
    assert!(
        row.reason
            .contains("1 of the candidate's 2 runs cut at 4× the incumbent's window"),
        "{}",
        row.reason
    );
    // No run cut: no such words.
    let p = paired(
        &vec![m(20.0, 0.3, Some("fp")); 2],
        &vec![m(100.0, 0.8, Some("fp")); 2],
    );
    let row = stages::decide(
        blank_row("x"),
        knob,
        &p,
        &BaselineBench::default(),
        &Policy::default(),
    );
    assert!(!row.reason.contains("cut at"), "{}", row.reason);
}

// ---------------------------------------------------------------- numerics guard

fn with_losses(sps: f64, scale: f64) -> Measurement {
    Measurement {
        losses: [2.30, 2.25, 2.20].iter().map(|v| Some(v * scale)).collect(),
        ..m(sps, 0.02, None)
    }
}

#[test]
fn the_numerics_guard_rejects_a_compute_change_whose_losses_moved() {
    let policy = Policy::default();
    let base = BaselineBench {
        runs: vec![with_losses(100.0, 1.0)],
        ..Default::default()
    };
    let kept = TurnRow {
        decision: Decision::Kept,
        reason: "faster".into(),
        ..blank_row("autocast: on")
    };
    let knob = ComputeKnob::Autocast.name();
    // Within the tolerance: kept, and the check's summary joins the reason.
    let p = paired(&[with_losses(150.0, 1.001)], &[with_losses(100.0, 1.0)]);
    let row = stages::numerics_guard(kept.clone(), knob, &p, &base, &policy);
    assert_eq!(row.decision, Decision::Kept);
    assert!(row.reason.starts_with("faster; losses:"), "{}", row.reason);
    // 5% apart: rejected, the measured reason kept in brackets.
    let p = paired(&[with_losses(150.0, 1.05)], &[with_losses(100.0, 1.0)]);
    let row = stages::numerics_guard(kept.clone(), knob, &p, &base, &policy);
    assert_eq!(row.decision, Decision::Rejected);
    assert!(row.reason.ends_with("(measured: faster)"), "{}", row.reason);
    // A loader change has no numerics to guard.
    let row = stages::numerics_guard(
        kept.clone(),
        LoaderKnob::NumWorkers.name(),
        &p,
        &base,
        &policy,
    );
    assert_eq!(row, kept);
}

fn stepped(sps: f64, by: &[f64], threads: Option<u32>) -> Measurement {
    Measurement {
        losses: [6.77, 6.70, 6.60, 6.50, 6.40]
            .iter()
            .zip(by)
            .map(|(v, d)| Some(v * (1.0 + d)))
            .collect(),
        torch_threads: threads,
        ..m(sps, 0.02, None)
    }
}

#[test]
fn the_numerics_guard_holds_later_steps_to_the_baselines_yardstick() {
    let policy = Policy::default();
    let flat = [0.0; 5];
    // Another thread count moved the baseline's losses up to 1% by step 5.
    let base = BaselineBench {
        runs: vec![stepped(100.0, &flat, Some(2))],
        calibration: Some(stepped(90.0, &[0.0, 5e-4, 0.003, 0.008, 0.01], Some(1))),
        ..Default::default()
    };
    let kept = TurnRow {
        decision: Decision::Kept,
        reason: "faster".into(),
        ..blank_row("channels_last: on")
    };
    let knob = ComputeKnob::ChannelsLast.name();
    let inc = stepped(100.0, &flat, Some(2));
    // channels_last on the ImageNet script: step 1 equal, 3.95% by step 5.
    let cl = stepped(130.0, &[0.0, 0.0013, 0.009, 0.02, 0.0395], Some(2));
    let p = paired(&[cl], &[inc]);
    let row = stages::numerics_guard(kept.clone(), knob, &p, &base, &policy);
    assert_eq!(row.decision, Decision::Kept, "{}", row.reason);
    assert!(
        row.reason.contains("later steps within 3.95%"),
        "{}",
        row.reason
    );
    // Without the calibration run the same losses are rejected.
    let plain = BaselineBench {
        calibration: None,
        ..base
    };
    let row = stages::numerics_guard(kept, knob, &p, &plain, &policy);
    assert_eq!(row.decision, Decision::Rejected, "{}", row.reason);
}

// ---------------------------------------------------------------- record and commit

#[test]
fn the_record_stage_makes_a_kept_change_the_incumbent() {
    let (_, events) = with_session(0, &[2], two_levels(0, 150.0), |s, rt| {
        let (start, _) = proposed(s, rt);
        let changed = s.changes(&start).unwrap();
        let p = paired(&[m(150.0, 0.3, Some("fp"))], &[m(100.0, 0.8, Some("fp"))]);
        let row = TurnRow {
            decision: Decision::Kept,
            after_sps: Some(150.0),
            data_wait_share: Some(0.3),
            ..blank_row("num_workers 0 → 2")
        };
        assert!(s.record(&start, row, &p, changed.after).unwrap());
        assert_eq!(on_disk(s), 2);
        assert_eq!(s.incumbent_sps, 150.0);
        assert_eq!(s.incumbent.data_wait_share, Some(0.3));
        let saved = s.store.dir.join("incumbent").join("train.py");
        assert_eq!(std::fs::read_to_string(saved).unwrap(), train_py(2));
        assert!(start.dir.join("bench.json").exists());
        // Without --git-commits a kept change is no commit, and says nothing.
        s.commit(1, "num_workers 0 → 2");
    });
    assert!(matches!(events.last(), Some(Event::TurnDecided { .. })));
}

#[test]
fn the_record_stage_undoes_a_change_not_kept() {
    with_session(0, &[2], two_levels(0, 102.0), |s, rt| {
        let (start, _) = proposed(s, rt);
        let changed = s.changes(&start).unwrap();
        let p = paired(&[m(102.0, 0.8, Some("fp"))], &[m(100.0, 0.8, Some("fp"))]);
        let row = TurnRow {
            decision: Decision::Reverted,
            after_sps: Some(102.0),
            ..blank_row("num_workers 0 → 2")
        };
        assert!(!s.record(&start, row, &p, changed.after).unwrap());
        assert_eq!(on_disk(s), 0);
        assert_eq!(s.incumbent_sps, 100.0, "the baseline's median stays");
        let saved = s.store.dir.join("incumbent").join("train.py");
        assert_eq!(std::fs::read_to_string(saved).unwrap(), train_py(0));
        assert_eq!(s.rows.last().unwrap().decision, Decision::Reverted);
    });
}

#[test]
fn a_failed_git_commit_is_a_warning_not_the_runs_end() {
    let (_, events) = with_session(0, &[], two_levels(0, 150.0), |s, _| {
        // The project is a temporary folder, in no git repository.
        s.git_branch = Some("tuneloop/test".into());
        s.commit(1, "num_workers 0 → 2");
    });
    match events.last() {
        Some(Event::Warning { message }) => {
            assert!(
                message.starts_with("git commit on tuneloop/test failed"),
                "{message}"
            )
        }
        other => panic!("{other:?}"),
    }
}
