//! The stages of one turn, in the order [`Session::turn`] calls them:
//! snapshot → propose → verify → measure → decide (with the numerics guard)
//! → record (with the git commit). Each stage takes what it needs and
//! returns a small typed result; the ones that touch the project or the run
//! folder are `Session` methods, the rules (verify, decide, numerics) are
//! free functions over plain values. A turn that ends before it is measured
//! ends through [`Session::unmeasured`], which puts the incumbent back and
//! records the row.

use std::path::PathBuf;

use super::{
    measure_pairs, median_share, pair_event, send, test_stall, wait_for_quiet, AtPath, LoopError,
    PairEvent, PairRule,
};
use super::{PairFailure, Paired, Session};
use crate::agent::{AgentReport, TurnContext};
use crate::bench::limits::ThroughputLimits;
use crate::bench::stats;
use crate::config::Policy;
use crate::error::BenchError;
use crate::event::Event;
use crate::judge::{self, DataCheck};
use crate::measure::Measure;
use crate::run_folder::{AgentRecord, BaselineBench, TurnFolder};
use crate::store::FileSet;
use crate::turn::{Decision, TurnRow};
use crate::verify::{self, ProjectSnapshot};

/// A turn's start: its folder, and the project as it was before the agent ran.
pub(super) struct TurnStart {
    pub turn: u32,
    pub dir: PathBuf,
    pub snapshot: ProjectSnapshot,
    /// What the snapshot leaves out (the run folders, the command's outputs).
    pub skip: Vec<PathBuf>,
}

/// What the agent left on disk.
pub(super) struct Changes {
    /// The editable files as the agent left them.
    pub after: FileSet,
    /// Other project files that changed (none may).
    pub others: Vec<String>,
    /// The managed harness was modified (it lives in the run folder, out of
    /// the snapshot's reach).
    pub harness_touched: bool,
}

/// Why a turn ends without a measurement: its decision and the row's words.
#[derive(Debug, PartialEq)]
pub(super) struct Refusal {
    pub decision: Decision,
    pub change: String,
    pub reason: String,
}

impl Refusal {
    fn into_row(self, mut row: TurnRow) -> TurnRow {
        row.decision = self.decision;
        row.change = self.change;
        row.reason = self.reason;
        row
    }
}

/// The one change a turn measures.
#[derive(Debug, PartialEq)]
pub(super) struct OneChange {
    pub file: String,
    pub knob: String,
    pub change: String,
}

impl<'a> Session<'a> {
    /// One turn. Returns a stop reason when the agent has nothing left.
    pub(super) async fn turn(&mut self, turn: u32) -> Result<Option<String>, LoopError> {
        let start = self.snapshot(turn)?;
        let rep = self.propose(&start).await?;
        let changed = self.changes(&start)?;
        if rep.interrupted {
            self.undo(&start.snapshot)?;
            return Err(LoopError::Interrupted);
        }
        if rep.exhausted {
            self.undo(&start.snapshot)?;
            let _ = std::fs::remove_dir_all(&start.dir);
            return Ok(Some(self.exhausted_reason(rep.stop_note)));
        }
        let row = self.open_row(&start, &rep, &changed.after)?;
        if let Some(refusal) = agent_failure(&rep) {
            self.unmeasured(&start, refusal.into_row(row))?;
            let failure = rep.failure.unwrap_or_default();
            return Ok(rep
                .fatal
                .then(|| format!("the agent cannot work: {failure}")));
        }
        let one = match verify_change(
            &self.incumbent_files,
            &changed,
            &*self.bencher,
            &self.policy,
        ) {
            Ok(one) => one,
            Err(refusal) => return self.unmeasured(&start, refusal.into_row(row)).map(|_| None),
        };
        let row = TurnRow {
            change: one.change,
            file: Some(one.file),
            ..row
        };
        let paired = match self.measure(&start, &row.change, &changed.after).await? {
            Ok(paired) => paired,
            Err(failed) => return self.measure_failed(&start, row, failed).map(|_| None),
        };
        if matches!(
            crate::knob::Knob::parse(&one.knob),
            Some(crate::knob::Knob::Compute(_))
        ) {
            self.calibrate_once(turn).await?;
        }
        self.phase("deciding", Some(turn), "");
        let row = decide(row, &one.knob, &paired, &self.baseline_bench, &self.policy);
        let row = numerics_guard(row, &one.knob, &paired, &self.baseline_bench, &self.policy);
        let (row, paired) = match confirm_because(&row, &one.knob, &paired, &self.policy) {
            Some(why) => {
                let (row, again) = self.confirm(&start, row, why, &changed.after).await?;
                (
                    row,
                    Paired {
                        again: again.map(Box::new),
                        ..paired
                    },
                )
            }
            None => (row, paired),
        };
        let change = row.change.clone();
        if self.record(&start, row, &paired, changed.after)? {
            self.commit(turn, &change);
        }
        Ok(None)
    }

    /// Snapshot: the turn's folder, the incumbent saved and the project
    /// snapshot taken, before the agent runs.
    pub(super) fn snapshot(&mut self, turn: u32) -> Result<TurnStart, LoopError> {
        let time_left = self.time_left(turn);
        self.emit(Event::TurnStarted { turn, time_left });
        let dir = self.store.turn_dir(turn);
        std::fs::create_dir_all(&dir).at("cannot create", &dir)?;
        let saved = self.store.dir.join("incumbent");
        self.incumbent_files
            .save(&saved)
            .at("cannot save the incumbent files to", &saved)?;
        let skip = self.snapshot_skip();
        let snapshot = ProjectSnapshot::capture(&self.root, &skip)
            .at("cannot snapshot the project folder", &self.root)?;
        let saved = self.store.dir.join("snapshot");
        snapshot
            .save(&saved)
            .at("cannot save the project snapshot to", &saved)?;
        Ok(TurnStart {
            turn,
            dir,
            snapshot,
            skip,
        })
    }

    /// Propose: the agent's call, its tools shown as they run, and its
    /// record (agent.json, prompt.md) written.
    pub(super) async fn propose(&mut self, start: &TurnStart) -> Result<AgentReport, LoopError> {
        let (turn, tdir) = (start.turn, &start.dir);
        self.phase("agent", Some(turn), self.agent.name());
        test_stall("agent");
        let view = &mut self.view;
        let store = &mut self.store;
        let mut on_tool = |tool: &str, input: &str| {
            let ev = Event::AgentTool {
                turn,
                tool: tool.into(),
                input: input.into(),
            };
            send(store, &mut **view, &ev);
        };
        let ctx = TurnContext {
            turn,
            max_iterations: self.max_iterations,
            ws: self.ws,
            policy: &self.policy,
            project_root: &self.root,
            incumbent: &self.incumbent,
            incumbent_sps: self.incumbent_sps,
            ceiling_sps: self.ceiling,
            history: &self.rows,
            profile_table: &self.profile_table,
            step_parts: self.baseline_bench.step_parts(),
            turn_dir: tdir.clone(),
            interrupt: &self.interrupt,
            only_cheaper: self.streak.is_some(),
        };
        let rep = self.agent.propose(&ctx, &mut on_tool).await;
        self.cost += rep.info.cost_usd.unwrap_or(0.0);
        self.agent_ms += rep.info.duration_ms;
        TurnFolder {
            turn,
            dir: tdir.clone(),
        }
        .write_agent(&AgentRecord {
            info: rep.info.clone(),
            failure: rep.failure.clone(),
            summary: rep.summary.clone(),
            exhausted: rep.exhausted,
        })
        .at("cannot write", &tdir.join("agent.json"))?;
        if !tdir.join("prompt.md").exists() {
            std::fs::write(
                tdir.join("prompt.md"),
                format!("(builtin agent: no prompt)\n\n{}\n", rep.summary),
            )
            .at("cannot write", &tdir.join("prompt.md"))?;
        }
        self.emit(Event::AgentFinished {
            turn,
            info: rep.info.clone(),
            ok: rep.failure.is_none(),
            summary: rep.failure.clone().unwrap_or_else(|| rep.summary.clone()),
        });
        Ok(rep)
    }

    /// What the agent changed: the editable files, any other file, the harness.
    pub(super) fn changes(&self, start: &TurnStart) -> Result<Changes, LoopError> {
        let after = FileSet::capture(&self.root, &self.editable)
            .unwrap_or_else(|_| FileSet(Default::default()));
        let now = ProjectSnapshot::capture(&self.root, &start.skip)
            .at("cannot snapshot the project folder", &self.root)?;
        Ok(Changes {
            after,
            others: start.snapshot.changes(&now, &self.editable),
            harness_touched: self.bencher.harness_changed(),
        })
    }

    /// Puts the project back as the turn found it: the harness, the other
    /// files, the incumbent's editable files.
    pub(super) fn undo(&mut self, snapshot: &ProjectSnapshot) -> Result<(), LoopError> {
        self.bencher
            .restore_harness()
            .at("cannot restore the bench harness in", &self.store.dir)?;
        let lost = snapshot.restore_others(&self.editable);
        self.incumbent_files
            .apply(&self.root)
            .at("cannot put the incumbent's files back in", &self.root)?;
        if !lost.is_empty() {
            // Through emit, so the run log has it too.
            self.emit(Event::Warning {
                message: format!("could not restore: {}", lost.join(", ")),
            });
        }
        Ok(())
    }

    /// The stop reason when the agent has nothing left: how far the
    /// incumbent is from what can be reached at all, and the compute side's
    /// turns (as a stop on a settled loader says them).
    pub(super) fn exhausted_reason(&self, stop_note: Option<String>) -> String {
        let limits = ThroughputLimits::of(
            self.ceiling,
            std::slice::from_ref(&self.incumbent),
            self.incumbent_sps,
        );
        let compute = self
            .compute_tally()
            .map(|t| format!("; {t}"))
            .unwrap_or_default();
        match &self.streak {
            Some(streak) => format!(
                "{streak} ended the climb, and no cheaper setting is left to try{compute}{}",
                limits.stop_note()
            ),
            None => stop_note.map_or_else(
                || format!("candidates exhausted{compute}{}", limits.stop_note()),
                |note| format!("{note}{compute}"),
            ),
        }
    }

    /// The turn's diff.patch, and its row as far as the agent's call tells it.
    pub(super) fn open_row(
        &self,
        start: &TurnStart,
        rep: &AgentReport,
        after: &FileSet,
    ) -> Result<TurnRow, LoopError> {
        let diff = self.diff(&self.incumbent_files, after);
        let path = start.dir.join("diff.patch");
        std::fs::write(&path, &diff).at("cannot write", &path)?;
        Ok(TurnRow {
            turn: start.turn,
            change: String::new(),
            file: None,
            before_sps: Some(self.incumbent_sps),
            after_sps: None,
            ratio: None,
            ratio_ci: None,
            runs: 0,
            decision: Decision::Failed,
            reason: String::new(),
            agent: rep.info.clone(),
            candidate_samples: vec![],
            incumbent_samples: vec![],
            data_wait_share: None,
            confirmation: None,
        })
    }

    /// A turn that ends before its change is measured: the incumbent back,
    /// the row recorded.
    pub(super) fn unmeasured(&mut self, start: &TurnStart, row: TurnRow) -> Result<(), LoopError> {
        self.undo(&start.snapshot)?;
        self.finish_turn(row, &start.dir, None)
    }

    /// Measure: the candidate saved (if this turn is kept and the machine
    /// dies, resume finds the kept files there), then candidate and
    /// incumbent interleaved. A cheaper change (fewer workers, a setting
    /// dropped) is measured by the equivalence rule. Counts the runs either way.
    pub(super) async fn measure(
        &mut self,
        start: &TurnStart,
        change: &str,
        after: &FileSet,
    ) -> Result<Result<Paired, PairFailure>, LoopError> {
        let (turn, tdir) = (start.turn, &start.dir);
        after.save(&tdir.join("candidate")).at(
            "cannot save the candidate files to",
            &tdir.join("candidate"),
        )?;
        test_stall("measure");
        self.phase("measuring", Some(turn), format!("{change} vs incumbent"));
        let (root, inc) = (self.root.clone(), self.incumbent_files.clone());
        let bencher = self.bencher.clone();
        let policy = self.policy.clone();
        let interrupt = self.interrupt.clone();
        let (store, view) = (&mut self.store, &mut self.view);
        // Each run's seconds, end to end: the pace of the time-left estimate.
        let (mut clock, mut secs) = (std::time::Instant::now(), Vec::new());
        let rule = PairRule::first(crate::agent::cheaper::is_cheaper(change), &policy);
        let res = measure_pairs(
            rule,
            &*bencher,
            &root,
            after,
            &inc,
            &policy,
            &interrupt,
            |e| {
                if matches!(e, PairEvent::Ran { .. }) {
                    secs.push(clock.elapsed().as_secs_f64());
                    clock = std::time::Instant::now();
                }
                if let Some(ev) = pair_event(Some(turn), e) {
                    send(store, &mut **view, &ev);
                }
            },
        )
        .await;
        self.run_secs.extend(secs);
        self.bench_runs += match &res {
            Ok(p) => p.runs(),
            Err(f) => f.runs,
        };
        Ok(res)
    }

    /// Confirm: a kept change measured again against the incumbent, after
    /// waiting for the machine to quiet down, in fresh interleaved pairs
    /// under the same rule. Held, the row says so; not held, the change is
    /// reverted with both comparisons in its reason. A comparison that
    /// cannot finish leaves the first decision standing, with a warning.
    pub(super) async fn confirm(
        &mut self,
        start: &TurnStart,
        mut row: TurnRow,
        why: &'static str,
        after: &FileSet,
    ) -> Result<(TurnRow, Option<Paired>), LoopError> {
        let turn = start.turn;
        self.phase(
            "measuring",
            Some(turn),
            format!("{}: measured again ({why})", row.change),
        );
        let (root, inc) = (self.root.clone(), self.incumbent_files.clone());
        let (bencher, policy) = (self.bencher.clone(), self.policy.clone());
        let interrupt = self.interrupt.clone();
        let (store, view) = (&mut self.store, &mut self.view);
        let mut on = |e| {
            if let Some(ev) = pair_event(Some(turn), e) {
                send(store, &mut **view, &ev);
            }
        };
        let waited = wait_for_quiet(&*bencher, &policy, &interrupt, &mut on).await;
        let rule = PairRule::turn(crate::agent::cheaper::is_cheaper(&row.change), &policy);
        let res = measure_pairs(rule, &*bencher, &root, after, &inc, &policy, &interrupt, on).await;
        let c = match res {
            Ok(c) => c,
            Err(f) if matches!(f.error, BenchError::Interrupted) => {
                return Err(LoopError::Interrupted)
            }
            Err(f) => {
                self.bench_runs += f.runs;
                row.runs += f.runs;
                self.emit(Event::Warning {
                    message: format!(
                        "turn {turn}: measuring the kept change again failed ({}); the first comparison stands",
                        f.error.short()
                    ),
                });
                return Ok((row, None));
            }
        };
        self.bench_runs += c.runs();
        row.runs += c.runs();
        let confirmed = stats::confirmed(c.verdict, &c.ratio, &policy.decision);
        // No quiet stretch to be had: the second comparison ran beside load
        // as well, so only a refutation reverts (`stats::refuted`).
        let under_load = c.used_runs_saw_load();
        let stands = !confirmed && under_load && !stats::refuted(&c.ratio, &policy.decision);
        let held = confirmed || stands;
        // Held without the rule keeping it again: open at the cap.
        let open = confirmed && c.verdict != stats::Verdict::Keep;
        let first = row.ratio.unwrap_or(f64::NAN);
        let again = format!(
            "×{:.2} [{:.2}, {:.2}] in {} pairs{}",
            c.ratio.median,
            c.ratio.ci[0],
            c.ratio.ci[1],
            c.ratio.pairs(),
            if waited > 0.0 {
                format!(", after waiting {waited:.0} s for the machine")
            } else {
                String::new()
            }
        );
        if held {
            let how = if stands {
                format!(
                    "beside load as well: not refuted (its median reaches {:.2} and more pairs could still show it), so it stays unconfirmed",
                    1.0 + policy.decision.min_gain
                )
            } else if open {
                format!(
                    "held (open at the cap; its {:.0}% interval lies above {:.2})",
                    stats::CONFIRM_AT_CAP_CONFIDENCE * 100.0,
                    1.0 + policy.decision.noise_threshold
                )
            } else {
                "held".into()
            };
            row.reason = format!("{}; measured again ({why}): {again}, {how}", row.reason);
        } else {
            row.decision = Decision::Reverted;
            row.reason = format!(
                "not confirmed: kept at ×{first:.2} ({why}), measured again {again}: reverted (first: {})",
                row.reason
            );
        }
        row.confirmation = Some(Box::new(crate::turn::Confirmation {
            why: why.into(),
            ratio: c.ratio.median,
            ci: c.ratio.ci,
            pairs: c.ratio.pairs() as u32,
            held,
            first_ratio: first,
            under_load,
        }));
        Ok((row, Some(c)))
    }

    /// A measurement that failed: the incumbent back, and the turn failed
    /// with the bench's words (bench_error.txt holds them whole). Ctrl-C
    /// ends the run instead.
    pub(super) fn measure_failed(
        &mut self,
        start: &TurnStart,
        mut row: TurnRow,
        f: PairFailure,
    ) -> Result<(), LoopError> {
        self.undo(&start.snapshot)?;
        if matches!(f.error, BenchError::Interrupted) {
            return Err(LoopError::Interrupted);
        }
        // A candidate that did not fit the command's batches: the agent's
        // next count stays within them.
        if f.error.is_too_few_steps() {
            if let Some(n) = self.bencher.command_batches() {
                self.incumbent.command_batches = Some(n);
            }
        }
        row.runs = f.runs;
        row.reason = format!("bench failed ({}): {}", f.role, f.error.short());
        let path = start.dir.join("bench_error.txt");
        std::fs::write(&path, f.error.to_string()).at("cannot write", &path)?;
        self.finish_turn(row, &start.dir, None)
    }

    /// Record: a kept change becomes the incumbent (in place, and its
    /// measurement the incumbent's), any other is undone; decision.json is
    /// the turn's commit point, and incumbent/ follows it. Whether it was kept.
    pub(super) fn record(
        &mut self,
        start: &TurnStart,
        row: TurnRow,
        paired: &Paired,
        after: FileSet,
    ) -> Result<bool, LoopError> {
        let kept = row.decision.is_kept();
        if kept {
            self.incumbent_files = after;
            self.incumbent_files
                .apply(&self.root)
                .at("cannot put the kept files in", &self.root)?;
            self.incumbent_sps = row.after_sps.unwrap_or(self.incumbent_sps);
            let mut m = paired.candidate.last().cloned().unwrap_or_default();
            m.data_wait_share = row.data_wait_share;
            self.incumbent = m;
        } else {
            self.undo(&start.snapshot)?;
        }
        self.finish_turn(row, &start.dir, Some(paired))?;
        if kept {
            let saved = self.store.dir.join("incumbent");
            self.incumbent_files
                .save(&saved)
                .at("cannot save the incumbent files to", &saved)?;
        }
        Ok(kept)
    }

    /// `--git-commits`: the kept change as a commit on the run's branch; a
    /// failed commit is a warning, never the run's end.
    pub(super) fn commit(&mut self, turn: u32, change: &str) {
        let Some(branch) = self.git_branch.clone() else {
            return;
        };
        let msg = format!("tuneloop {} turn {turn}: {change}", self.store.id);
        if let Err(e) = crate::git::commit_kept(&self.root, &self.incumbent_files, &branch, &msg) {
            self.emit(Event::Warning {
                message: format!("git commit on {branch} failed: {e}"),
            });
        }
    }
}

/// The agent's call failed: the turn fails with its words.
pub(super) fn agent_failure(rep: &AgentReport) -> Option<Refusal> {
    rep.failure.as_ref().map(|f| Refusal {
        decision: Decision::Failed,
        change: "(agent failed)".into(),
        reason: format!("agent: {f}"),
    })
}

/// Verify: the agent's files hold exactly one allowed change, and neither
/// the managed harness nor a script the measurement runs was touched.
pub(super) fn verify_change(
    incumbent: &FileSet,
    changed: &Changes,
    bencher: &dyn Measure,
    policy: &Policy,
) -> Result<OneChange, Refusal> {
    let mut verdict = verify::check_turn(
        incumbent,
        &changed.after,
        &changed.others,
        &crate::compute::allowed_knobs(policy),
    );
    if changed.harness_touched {
        verdict = verify::Verdict::Rejected {
            reason: "the measurement harness was modified (it is restored before every run)".into(),
            change: "harness edit".into(),
        };
    } else if let Some(script) = bencher
        .script_files()
        .iter()
        .find(|f| changed.others.contains(f))
    {
        verdict = verify::Verdict::Rejected {
            reason: format!(
                "the bench script {script} was modified; it is part of the measurement"
            ),
            change: format!("edit of {script}"),
        };
    }
    match verdict {
        verify::Verdict::NoChange => Err(Refusal {
            decision: Decision::NoChange,
            change: "(no change proposed)".into(),
            reason: "the agent changed no file".into(),
        }),
        verify::Verdict::Rejected { reason, change } => Err(Refusal {
            decision: Decision::Rejected,
            change,
            reason,
        }),
        verify::Verdict::OneChange {
            file, knob, change, ..
        } => Ok(OneChange { file, knob, change }),
    }
}

/// Decide: the row's figures from the paired runs, and the judge's
/// decision: the paired verdict, unless the data changed. A cheaper setting
/// is judged by the equivalence rule, and kept as cheaper.
pub(super) fn decide(
    mut row: TurnRow,
    knob: &str,
    paired: &Paired,
    baseline: &BaselineBench,
    policy: &Policy,
) -> TurnRow {
    row.runs = paired.runs();
    row.ratio = Some(paired.ratio.median);
    row.ratio_ci = Some(paired.ratio.ci);
    row.before_sps = Some(stats::median(&paired.inc_sps()));
    row.after_sps = Some(stats::median(&paired.cand_sps()));
    row.candidate_samples = paired.cand_sps();
    row.incumbent_samples = paired.inc_sps();
    row.data_wait_share = median_share(&paired.candidate);
    let cheaper = crate::agent::cheaper::is_cheaper(&row.change);
    let mut explanation = if cheaper {
        stats::explain_cheaper(&paired.ratio, paired.verdict, &policy.decision)
    } else {
        stats::explain(&paired.ratio, paired.verdict, &policy.decision)
    };
    let d = &policy.decision;
    if paired.ratio.pairs() > d.max_repeats as usize {
        explanation.push_str(&format!(
            " in {} pairs (its runs saw load, and it was still open at {} pointing up: [decision] max_repeats_beside_load)",
            paired.ratio.pairs(),
            d.max_repeats
        ));
    }
    let cut = paired.candidate.iter().filter(|m| m.window_cut).count();
    if cut > 0 {
        explanation.push_str(&format!(
            "; {cut} of the candidate's {} runs cut at {}× the incumbent's window (under a quarter of its rate)",
            paired.candidate.len(),
            crate::bench::window::CUT_AFTER
        ));
    }
    let j = judge::judge(
        knob,
        paired.verdict,
        explanation,
        &DataCheck::of(
            knob,
            &baseline.reproduced(),
            &paired.incumbent,
            &paired.candidate,
        ),
        policy,
    );
    row.decision = match j.decision {
        Decision::Kept if cheaper => Decision::KeptCheaper,
        d => d,
    };
    row.reason = j.reason;
    row
}

/// Why a kept change is measured again before it stays, if it is: its pairs
/// saw load from other processes (a load that comes and goes favours one run
/// of a pair; `[decision] confirm_kept`), or it is a compute change (its
/// effects are small beside what load does to them; `confirm_compute`).
pub(super) fn confirm_because(
    row: &TurnRow,
    knob: &str,
    paired: &Paired,
    policy: &Policy,
) -> Option<&'static str> {
    if !row.decision.is_kept() {
        return None;
    }
    let d = &policy.decision;
    if d.confirm_kept && paired.saw_load() {
        Some("kept while other processes took cores")
    } else if d.confirm_compute
        && matches!(
            crate::knob::Knob::parse(knob),
            Some(crate::knob::Knob::Compute(_))
        )
    {
        Some("a compute change")
    } else {
        None
    }
}

/// The numerics guard: a compute change's losses against the reference's
/// ([`crate::numerics`]). Passed, its summary joins the reason; failed, the
/// change is rejected whatever its speed. A loader change passes as it is.
pub(super) fn numerics_guard(
    mut row: TurnRow,
    knob: &str,
    paired: &Paired,
    baseline: &BaselineBench,
    policy: &Policy,
) -> TurnRow {
    let Some(crate::knob::Knob::Compute(k)) = crate::knob::Knob::parse(knob) else {
        return row;
    };
    let check = crate::numerics::check_with(
        k,
        &paired.incumbent,
        &baseline.runs,
        &paired.candidate,
        &policy.compute,
        baseline.yardstick().as_ref(),
    );
    row.reason = if check.ok {
        format!("{}; {}", row.reason, check.summary)
    } else {
        row.decision = Decision::Rejected;
        format!("{} (measured: {})", check.summary, row.reason)
    };
    row
}
