//! The loop's rules as pure functions: what a measured turn decides (keep,
//! revert, reject) from its paired figures, the data check (which parts of
//! the first batches a turn compares, see [`DataCheck`]) and the policy, and
//! when the loop stops. No I/O, no Python: `run_loop` measures
//! and records, these decide, and their unit tests cover every case.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::bench::identity::{self, Part, Reproduced};
use crate::bench::stats::Verdict;
use crate::bench::Measurement;
use crate::config::Policy;
use crate::knob::{Knob, LoaderKnob, DATA_PRESERVING};
use crate::turn::{Decision, TurnRow};

/// Above this share of its ceiling, an incumbent says more about the noise
/// of the ceiling's one run than about the job having reached it.
pub const CREDIBLE_CEILING_SHARE: f64 = 1.10;

/// How much more of the step data_wait may take than the gap to the ceiling
/// leaves room for, before the two figures contradict each other.
const DATA_WAIT_SLACK: f64 = 0.10;

/// The incumbent's share of the step-alone ceiling, when that share can be
/// believed: `None` without a ceiling, and `None` when the ceiling's one run
/// was disturbed — the incumbent far above it, or (a loaded machine slowing
/// the ceiling run) near it while the incumbent's own steps still wait for
/// data: at a share `x` of the step alone, data_wait can take at most about
/// `1 − x` of the step, so 98% of the ceiling with 40% data_wait is a ceiling
/// measured too low, not a job that has reached it.
pub fn credible_ceiling_share(
    incumbent_sps: f64,
    ceiling_sps: Option<f64>,
    data_wait_share: Option<f64>,
) -> Option<f64> {
    let c = ceiling_sps.filter(|c| *c > 0.0)?;
    let x = incumbent_sps / c;
    if x > CREDIBLE_CEILING_SHARE {
        return None;
    }
    match data_wait_share {
        Some(w) if w > (1.0 - x).max(0.0) + DATA_WAIT_SLACK => None,
        _ => Some(x),
    }
}

/// Why a part of the first batches was not compared on a turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    /// A loader setting (`DATA_PRESERVING`): each worker's random
    /// stream comes from its own seed, so a different worker count (or
    /// persistence across epochs) changes what random augmentation in the
    /// workers draws, by design. Items, order and structure still must hold.
    LoaderSetting,
    /// The baseline's own runs disagree on it: it cannot tell a change.
    BaselineDiffers,
    /// This turn's incumbent runs disagree on it.
    IncumbentDiffers,
    /// The incumbent's runs do not carry it (no sampler indices: an
    /// iterable dataset).
    NotRecorded,
}

impl Skip {
    fn why(self) -> &'static str {
        match self {
            Skip::LoaderSetting => {
                "a loader setting changes the workers' random seeds by design (augmentation in workers)"
            }
            Skip::BaselineDiffers => "they differ between the baseline's own runs",
            Skip::IncumbentDiffers => "they differ between the incumbent's own runs",
            Skip::NotRecorded => "not recorded (no sampler indices)",
        }
    }
}

/// Whether the candidate fed the model the same first batches as the
/// incumbent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing to compare (no fingerprints, or no part that reproduces).
    Unknown,
    /// Every candidate run matches the incumbent on every compared part.
    Same,
    /// At least one candidate run differs (or carries nothing to compare).
    Changed,
}

/// A turn's data check: what was compared, what was not and why, and what
/// differed. Only the parts the baseline's own runs (and this turn's
/// incumbent runs) reproduce are compared; a loader setting is checked on
/// items, order and structure, any other change on the bytes too.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataCheck {
    pub outcome: Outcome,
    pub compared: Vec<Part>,
    pub skipped: Vec<(Part, Skip)>,
    /// The compared parts some candidate run differed in; empty with
    /// `Changed` when only the older single fingerprint was compared.
    pub differed: Vec<Part>,
}

impl DataCheck {
    /// Compares each candidate run with the incumbent's first run, on the
    /// parts `knob`'s turn checks that `baseline` (the baseline's runs) and
    /// the turn's own incumbent runs reproduce. Figures without a data
    /// identity (an older harness) fall back to the single fingerprint.
    pub fn of(
        knob: &str,
        baseline: &Reproduced,
        incumbent: &[Measurement],
        candidate: &[Measurement],
    ) -> DataCheck {
        let Some(first) = incumbent.first() else {
            return DataCheck::unknown();
        };
        let Some(inc_id) = first.data_identity.as_ref() else {
            return DataCheck::by_fingerprint(first, candidate);
        };
        let own = Reproduced::of(incumbent);
        let mut check = DataCheck::unknown();
        for p in Part::ALL {
            let skip = if p == Part::Bytes && DATA_PRESERVING.contains(&knob) {
                Some(Skip::LoaderSetting)
            } else if !baseline.allows(p) {
                Some(Skip::BaselineDiffers)
            } else if inc_id.part(p).is_none() {
                Some(Skip::NotRecorded)
            } else if !own.allows(p) {
                Some(Skip::IncumbentDiffers)
            } else {
                None
            };
            match skip {
                Some(why) => check.skipped.push((p, why)),
                None => check.compared.push(p),
            }
        }
        for &p in &check.compared {
            let want = inc_id.part(p);
            if candidate
                .iter()
                .any(|m| m.data_identity.as_ref().and_then(|i| i.part(p)) != want)
            {
                check.differed.push(p);
            }
        }
        check.outcome = match (check.compared.is_empty(), check.differed.is_empty()) {
            (true, _) => Outcome::Unknown,
            (false, true) => Outcome::Same,
            (false, false) => Outcome::Changed,
        };
        check
    }

    fn unknown() -> DataCheck {
        DataCheck {
            outcome: Outcome::Unknown,
            compared: vec![],
            skipped: vec![],
            differed: vec![],
        }
    }

    /// Older figures: the first batches' one fingerprint, compared whole.
    fn by_fingerprint(first: &Measurement, candidate: &[Measurement]) -> DataCheck {
        let mut check = DataCheck::unknown();
        if let Some(fp) = first.fingerprint.as_ref() {
            check.outcome = if candidate.iter().any(|m| m.fingerprint.as_ref() != Some(fp)) {
                Outcome::Changed
            } else {
                Outcome::Same
            };
        }
        check
    }

    pub fn changed(&self) -> bool {
        self.outcome == Outcome::Changed
    }

    /// What differed, in words: "their order differs" ("the fingerprint
    /// differs" for the older single figure).
    pub fn what_differs(&self) -> String {
        match self.differed.as_slice() {
            [] => "the fingerprint differs".into(),
            [one @ (Part::Items | Part::Bytes)] => format!("their {one} differ"),
            [one] => format!("their {one} differs"),
            many => format!("their {} differ", identity::list(many)),
        }
    }

    /// What was compared and why the rest was not: "compared: items, order
    /// and structure; bytes not compared: …". Empty for the older fingerprint.
    pub fn describe(&self) -> String {
        let mut out = Vec::new();
        if !self.compared.is_empty() {
            out.push(format!("compared: {}", identity::list(&self.compared)));
        }
        for why in [
            Skip::LoaderSetting,
            Skip::BaselineDiffers,
            Skip::IncumbentDiffers,
            Skip::NotRecorded,
        ] {
            let parts: Vec<Part> = self
                .skipped
                .iter()
                .filter(|(_, w)| *w == why)
                .map(|(p, _)| *p)
                .collect();
            if !parts.is_empty() {
                out.push(format!(
                    "{} not compared: {}",
                    identity::list(&parts),
                    why.why()
                ));
            }
        }
        out.join("; ")
    }

    /// "their order differs (compared: …; bytes not compared: …)".
    fn differs_with_context(&self) -> String {
        let d = self.describe();
        if d.is_empty() {
            self.what_differs()
        } else {
            format!("{} ({d})", self.what_differs())
        }
    }
}

/// What a run's turns compare, from the baseline's own runs: the report's
/// data-check line (`report.json` `data_check`). A turn compares these
/// parts unless its own incumbent runs disagree on one.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct DataCheckPlan {
    /// The baseline's runs that carried a data identity.
    pub baseline_runs: u32,
    /// Compared on a loader-setting turn (`num_workers`, …): never the bytes.
    pub loader_setting: Vec<Part>,
    /// Compared on any other turn (a preprocessing change).
    pub other: Vec<Part>,
    /// Not compared: they differ between the baseline's own runs.
    pub not_reproduced: Vec<Part>,
    /// Not recorded (no sampler indices: an iterable dataset).
    pub not_recorded: Vec<Part>,
}

impl DataCheckPlan {
    /// `None` when the baseline carried no data identity (contract mode,
    /// an older run folder).
    pub fn of(baseline: &Reproduced) -> Option<DataCheckPlan> {
        if baseline.runs == 0 {
            return None;
        }
        let other: Vec<Part> = baseline.stable.clone();
        Some(DataCheckPlan {
            baseline_runs: baseline.runs,
            loader_setting: other
                .iter()
                .copied()
                .filter(|p| *p != Part::Bytes)
                .collect(),
            other,
            not_reproduced: baseline.unstable.clone(),
            not_recorded: baseline.missing.clone(),
        })
    }
}

/// A measured turn's decision and the reason recorded with it.
#[derive(Clone, Debug, PartialEq)]
pub struct Judgement {
    pub decision: Decision,
    pub reason: String,
}

/// Decides a measured turn. `verdict` and `rule_reason` are the paired
/// rule's (`stats::decide`, `stats::explain`); `knob` is what the turn
/// changed. Data-preserving knobs that changed the data are rejected; a
/// preprocessing change that did is rejected unless the policy allows data
/// changes (then a kept one says so); otherwise the verdict stands. A
/// rejection names the part that differed and what was compared.
pub fn judge(
    knob: &str,
    verdict: Verdict,
    rule_reason: String,
    data: &DataCheck,
    policy: &Policy,
) -> Judgement {
    let data_changed = data.changed();
    // A loader setting or a compute change (threads, autocast, …) never
    // touches the dataset: different first batches mean the change did more
    // than it says.
    let must_keep_data = match Knob::parse(knob) {
        Some(Knob::Loader(k)) => k.is_setting(),
        Some(Knob::Compute(_)) => true,
        None => false,
    };
    if must_keep_data && data_changed {
        return Judgement {
            decision: Decision::Rejected,
            reason: format!(
                "the first batches changed: {}: `{knob}` must not alter the data",
                data.differs_with_context()
            ),
        };
    }
    if LoaderKnob::Preprocessing.is(knob) && data_changed && !policy.loop_.allow_data_change {
        return Judgement {
            decision: Decision::Rejected,
            reason: format!(
                "the preprocessing change altered the first batches: {}; set [loop] allow_data_change = true to allow it",
                data.differs_with_context()
            ),
        };
    }
    if verdict == Verdict::Keep {
        let reason = if data_changed {
            format!(
                "{rule_reason} — DATA CHANGED: the first batches differ ({}) (allowed by loop.allow_data_change)",
                data.what_differs()
            )
        } else {
            rule_reason
        };
        return Judgement {
            decision: Decision::Kept,
            reason,
        };
    }
    Judgement {
        decision: Decision::Reverted,
        reason: rule_reason,
    }
}

/// Why the loop stops before another turn.
#[derive(Clone, Debug, PartialEq)]
pub enum StopReason {
    /// The baseline's data_wait share is below the policy's threshold (and
    /// `loop.force` is off): DataLoader tuning cannot help much.
    LowDataWaitAtBaseline {
        share: f64,
    },
    IterationLimit {
        max: u32,
    },
    NotKeptStreak {
        turns: u32,
    },
    CostBudget {
        spent: f64,
        limit: f64,
    },
    TimeBudget {
        limit_s: u64,
    },
    /// After a kept change, data_wait is no longer a real share of the step.
    DataWaitInsignificant {
        share: f64,
    },
    /// The incumbent is within the policy's share of the step-alone ceiling.
    NearCeiling {
        share: f64,
    },
    /// The loader was settled (`loader`: data_wait small, the ceiling
    /// reached) and every enabled compute change has had its turn or was
    /// passed over (`skipped`: nothing to act on, CUDA only).
    ComputeTried {
        tally: ComputeTally,
        loader: Box<StopReason>,
    },
}

/// The run's compute turns once none is left: "every compute change was
/// tried (1 kept, 3 not kept, 2 not applicable)".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ComputeTally {
    pub kept: u32,
    pub not_kept: u32,
    /// Enabled knobs with nothing to act on (CUDA only on a CPU job, no
    /// convolution for channels_last, ...).
    pub skipped: u32,
}

impl ComputeTally {
    /// The compute turns among `rows`; `None` when there is none.
    pub fn of(rows: &[TurnRow], skipped: usize) -> Option<ComputeTally> {
        let compute: Vec<&TurnRow> = rows
            .iter()
            .filter(|r| crate::edit::compute::knob_of_change(&r.change).is_some())
            .collect();
        let kept = compute.iter().filter(|r| r.decision.is_kept()).count() as u32;
        (!compute.is_empty()).then_some(ComputeTally {
            kept,
            not_kept: compute.len() as u32 - kept,
            skipped: skipped as u32,
        })
    }
}

impl fmt::Display for ComputeTally {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "every compute change was tried ({} kept, {} not kept",
            self.kept, self.not_kept
        )?;
        if self.skipped > 0 {
            write!(f, ", {} not applicable", self.skipped)?;
        }
        f.write_str(")")
    }
}

impl StopReason {
    /// [`StopReason::ComputeTried`] from the decided turns: their compute
    /// turns counted, and the loader's reason to stop; `None` without
    /// compute turns.
    pub fn compute_tried(
        rows: &[TurnRow],
        skipped: usize,
        loader: StopReason,
    ) -> Option<StopReason> {
        Some(StopReason::ComputeTried {
            tally: ComputeTally::of(rows, skipped)?,
            loader: Box::new(loader),
        })
    }
}

/// The words the run log and the report have always used.
impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            StopReason::LowDataWaitAtBaseline { share } => write!(
                f,
                "data_wait is only {:.1}% of step time at the baseline: DataLoader tuning cannot help much",
                share * 100.0
            ),
            StopReason::IterationLimit { max } => write!(f, "iteration limit ({max}) reached"),
            StopReason::NotKeptStreak { turns: 1 } => write!(f, "1 turn not kept"),
            StopReason::NotKeptStreak { turns } => write!(f, "{turns} turns in a row not kept"),
            StopReason::CostBudget { spent, limit } => {
                write!(f, "cost budget spent (${spent:.2} of ${limit:.2})")
            }
            StopReason::TimeBudget { limit_s } => write!(f, "time budget spent ({limit_s} s)"),
            StopReason::DataWaitInsignificant { share } => write!(
                f,
                "data_wait no longer significant ({:.1}% of step time)",
                share * 100.0
            ),
            StopReason::NearCeiling { share } if share < 1.0 => {
                write!(f, "within {:.0}% of the ceiling", (1.0 - share) * 100.0)
            }
            StopReason::NearCeiling { share } => {
                write!(f, "at the ceiling ({:.0}% of it)", share * 100.0)
            }
            StopReason::ComputeTried { tally, ref loader } => match **loader {
                StopReason::LowDataWaitAtBaseline { share }
                | StopReason::DataWaitInsignificant { share } => {
                    write!(f, "{tally}; data_wait {:.1}% of the step", share * 100.0)
                }
                ref other => write!(f, "{tally}; {other}"),
            },
        }
    }
}

/// Where the run stands before the next turn: what the stop rule reads.
#[derive(Clone, Copy, Debug)]
pub struct Progress<'a> {
    pub turns_done: u32,
    pub max_iterations: u32,
    /// The decided turns so far.
    pub rows: &'a [TurnRow],
    pub cost_usd: f64,
    pub elapsed: Duration,
    /// The incumbent's data_wait share and samples/sec.
    pub incumbent_share: Option<f64>,
    pub incumbent_sps: f64,
    pub ceiling_sps: Option<f64>,
    /// The streak of turns not kept ends only the climb: the agent's cheaper
    /// neighbours still come (the builtin agent), so the streak stops nothing.
    pub cheaper_after_streak: bool,
}

/// Before the first turn: stop at once when the baseline's data_wait share
/// is too small to be worth tuning, unless `loop.force`. Returns whether to
/// warn (the share is small) and the stop reason, if any.
pub fn baseline_stop(share: Option<f64>, policy: &Policy) -> (bool, Option<StopReason>) {
    match share {
        Some(share) if share < policy.decision.stop_when_data_wait_below => (
            true,
            (!policy.loop_.force).then_some(StopReason::LowDataWaitAtBaseline { share }),
        ),
        _ => (false, None),
    }
}

/// `max_consecutive_reverts` loader turns in a row not kept, the last ones.
/// Compute turns are passed over: each is an independent one-change test
/// (a thread count, autocast), not a step of the loader's climb, so a run
/// of them reverted ends nothing while others are left to try.
pub fn not_kept_streak(p: &Progress<'_>, policy: &Policy) -> Option<StopReason> {
    let max = policy.loop_.max_consecutive_reverts;
    let streak = p
        .rows
        .iter()
        .rev()
        .filter(|r| crate::edit::compute::knob_of_change(&r.change).is_none())
        .take_while(|r| !r.decision.is_kept())
        .count() as u32;
    (max > 0 && streak >= max).then_some(StopReason::NotKeptStreak { turns: streak })
}

/// The stop rule, checked before each turn, in this order: the iteration
/// limit, the streak of turns not kept, the cost and time budgets, data_wait
/// no longer significant (after a turn), and closeness to the ceiling.
pub fn stop_rule(p: &Progress<'_>, policy: &Policy) -> Option<StopReason> {
    let l = &policy.loop_;
    let d = &policy.decision;
    if p.turns_done >= p.max_iterations {
        return Some(StopReason::IterationLimit {
            max: p.max_iterations,
        });
    }
    if let Some(streak) = not_kept_streak(p, policy).filter(|_| !p.cheaper_after_streak) {
        return Some(streak);
    }
    if l.max_total_usd > 0.0 && p.cost_usd >= l.max_total_usd {
        return Some(StopReason::CostBudget {
            spent: p.cost_usd,
            limit: l.max_total_usd,
        });
    }
    if l.max_wall_s > 0 && p.elapsed.as_secs() >= l.max_wall_s {
        return Some(StopReason::TimeBudget {
            limit_s: l.max_wall_s,
        });
    }
    if p.turns_done > 0 {
        if let Some(share) = p.incumbent_share {
            if share < d.stop_when_data_wait_below {
                return Some(StopReason::DataWaitInsignificant { share });
            }
        }
    }
    // A ceiling run the figures contradict (disturbed) is not a reason to stop.
    if let Some(share) = credible_ceiling_share(p.incumbent_sps, p.ceiling_sps, p.incumbent_share) {
        if share >= d.stop_when_ceiling_share_above {
            return Some(StopReason::NearCeiling { share });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::turn::AgentInfo;

    fn fp(f: Option<&str>) -> Measurement {
        Measurement {
            samples_per_sec: 100.0,
            fingerprint: f.map(str::to_string),
            ..Default::default()
        }
    }

    /// A run whose first batches are, by part, items `i`, order `o`,
    /// structure `s`, bytes `b` (None: not recorded).
    fn id(i: Option<&str>, o: Option<&str>, s: &str, b: &str) -> Measurement {
        Measurement {
            samples_per_sec: 100.0,
            fingerprint: Some(format!("{s}{b}")),
            data_identity: Some(crate::bench::identity::DataIdentity {
                batches: 3,
                items: i.map(str::to_string),
                order: o.map(str::to_string),
                structure: Some(s.into()),
                bytes: Some(b.into()),
            }),
            ..Default::default()
        }
    }

    fn base() -> Measurement {
        id(Some("i"), Some("o"), "s", "b")
    }

    /// A baseline whose runs reproduce every part.
    fn steady() -> Reproduced {
        Reproduced::of(&[base(), base(), base()])
    }

    fn faster(knob: &str, data: &DataCheck) -> Judgement {
        judge(knob, Verdict::Keep, "faster".into(), data, &allow(false))
    }

    #[test]
    fn an_older_fingerprint_is_compared_whole() {
        let none = Reproduced::default();
        let a = || fp(Some("aaa"));
        let b = || fp(Some("bbb"));
        let of = |i: &[Measurement], c: &[Measurement]| DataCheck::of("num_workers", &none, i, c);
        assert_eq!(of(&[a(), a()], &[a(), a()]).outcome, Outcome::Same);
        assert_eq!(of(&[a()], &[a(), b()]).outcome, Outcome::Changed);
        // A candidate run without a fingerprint cannot vouch for its data.
        assert_eq!(of(&[a()], &[a(), fp(None)]).outcome, Outcome::Changed);
        // No incumbent fingerprint (contract mode).
        assert_eq!(of(&[fp(None)], &[b()]).outcome, Outcome::Unknown);
        assert_eq!(of(&[], &[b()]).outcome, Outcome::Unknown);
        let j = faster("num_workers", &of(&[a()], &[b()]));
        assert_eq!(j.decision, Decision::Rejected);
        assert!(j.reason.contains("the fingerprint differs"), "{}", j.reason);
    }

    #[test]
    fn a_worker_count_turn_compares_items_order_and_structure_not_bytes() {
        // Augmentation in workers: the same items in the same order, other
        // bytes (each worker's random stream has its own seed).
        let augmented = id(Some("i"), Some("o"), "s", "other bytes");
        let c = DataCheck::of("num_workers", &steady(), &[base(), base()], &[augmented]);
        assert_eq!(c.outcome, Outcome::Same);
        assert_eq!(c.compared, vec![Part::Items, Part::Order, Part::Structure]);
        assert_eq!(c.skipped, vec![(Part::Bytes, Skip::LoaderSetting)]);
        assert_eq!(faster("num_workers", &c).decision, Decision::Kept);
        assert_eq!(
            c.describe(),
            "compared: items, order and structure; bytes not compared: a loader setting changes the workers' random seeds by design (augmentation in workers)"
        );
    }

    #[test]
    fn an_order_change_on_a_worker_count_turn_is_rejected_and_named() {
        for knob in DATA_PRESERVING {
            let reordered = id(Some("i"), Some("other order"), "s", "b");
            let c = DataCheck::of(knob, &steady(), &[base(), base()], &[base(), reordered]);
            assert_eq!(c.outcome, Outcome::Changed);
            assert_eq!(c.differed, vec![Part::Order]);
            for allowed in [false, true] {
                let j = judge(knob, Verdict::Keep, "faster".into(), &c, &allow(allowed));
                assert_eq!(j.decision, Decision::Rejected, "{knob}");
                assert!(
                    j.reason.starts_with("the first batches changed: their order differs (compared: items, order and structure;"),
                    "{}",
                    j.reason
                );
                assert!(
                    j.reason
                        .contains(&format!("`{knob}` must not alter the data")),
                    "{}",
                    j.reason
                );
            }
        }
        // Other items, other structure: each named.
        let other = id(Some("x"), Some("y"), "other shape", "b");
        let c = DataCheck::of("num_workers", &steady(), &[base()], &[other]);
        assert_eq!(c.differed, vec![Part::Items, Part::Order, Part::Structure]);
        assert!(faster("num_workers", &c)
            .reason
            .contains("their items, order and structure differ"),);
    }

    #[test]
    fn a_part_the_baseline_does_not_reproduce_is_not_compared() {
        // An order drawn from the clock: it differs between the baseline's
        // own runs, and so may differ on the candidate.
        let baseline = Reproduced::of(&[
            id(Some("i1"), Some("o1"), "s", "b1"),
            id(Some("i2"), Some("o2"), "s", "b2"),
        ]);
        let inc = id(Some("i3"), Some("o3"), "s", "b3");
        let cand = id(Some("i4"), Some("o4"), "s", "b4");
        let c = DataCheck::of(
            "num_workers",
            &baseline,
            std::slice::from_ref(&inc),
            &[cand],
        );
        assert_eq!(c.outcome, Outcome::Same);
        assert_eq!(c.compared, vec![Part::Structure]);
        assert!(c.skipped.contains(&(Part::Order, Skip::BaselineDiffers)));
        assert_eq!(
            c.describe(),
            "compared: structure; bytes not compared: a loader setting changes the workers' random seeds by design (augmentation in workers); items and order not compared: they differ between the baseline's own runs"
        );
        // The structure still binds.
        let reshaped = id(Some("i4"), Some("o4"), "other shape", "b4");
        let c = DataCheck::of("num_workers", &baseline, &[inc], &[reshaped]);
        assert_eq!(c.differed, vec![Part::Structure]);
        assert_eq!(faster("num_workers", &c).decision, Decision::Rejected);
    }

    #[test]
    fn bytes_that_do_not_reproduce_are_not_held_against_a_preprocessing_change() {
        let baseline = Reproduced::of(&[
            id(Some("i"), Some("o"), "s", "b1"),
            id(Some("i"), Some("o"), "s", "b2"),
        ]);
        let c = DataCheck::of(
            "preprocessing",
            &baseline,
            &[base()],
            &[id(Some("i"), Some("o"), "s", "b9")],
        );
        assert_eq!(c.outcome, Outcome::Same);
        assert_eq!(c.skipped, vec![(Part::Bytes, Skip::BaselineDiffers)]);
        assert_eq!(faster("preprocessing", &c).decision, Decision::Kept);
        // Nor when this turn's own incumbent runs disagree on them.
        let c = DataCheck::of(
            "preprocessing",
            &steady(),
            &[base(), id(Some("i"), Some("o"), "s", "b2")],
            &[id(Some("i"), Some("o"), "s", "b9")],
        );
        assert_eq!(c.skipped, vec![(Part::Bytes, Skip::IncumbentDiffers)]);
        assert_eq!(c.outcome, Outcome::Same);
    }

    #[test]
    fn a_preprocessing_change_to_bytes_that_reproduce_is_rejected() {
        let c = DataCheck::of(
            "preprocessing",
            &steady(),
            &[base(), base()],
            &[id(Some("i"), Some("o"), "s", "b9")],
        );
        assert_eq!(c.compared, Part::ALL.to_vec());
        assert_eq!(c.differed, vec![Part::Bytes]);
        let j = faster("preprocessing", &c);
        assert_eq!(j.decision, Decision::Rejected);
        assert!(
            j.reason.starts_with("the preprocessing change altered the first batches: their bytes differ (compared: items, order, structure and bytes)"),
            "{}",
            j.reason
        );
        assert!(
            j.reason.contains("allow_data_change = true"),
            "{}",
            j.reason
        );
    }

    #[test]
    fn a_deliberate_data_change_on_a_worker_count_turn_is_caught() {
        // A worker count that also drops a batch's items (a sampler sharded
        // by worker, an item skipped): the items and order change though
        // the structure holds.
        let dropped = id(Some("fewer"), Some("fewer"), "s", "b");
        let c = DataCheck::of("num_workers", &steady(), &[base(), base()], &[dropped]);
        assert_eq!(faster("num_workers", &c).decision, Decision::Rejected);
        // A candidate run without an identity cannot vouch for its data.
        let c = DataCheck::of("num_workers", &steady(), &[base()], &[fp(Some("sb"))]);
        assert_eq!(c.outcome, Outcome::Changed);
        assert_eq!(faster("num_workers", &c).decision, Decision::Rejected);
    }

    #[test]
    fn a_compute_change_that_alters_the_data_is_rejected() {
        // Threads or autocast never touch the dataset: bytes that reproduce
        // and then differ mean the edit did more than its one line.
        let c = DataCheck::of(
            "channels_last",
            &steady(),
            &[base(), base()],
            &[id(Some("i"), Some("o"), "s", "b9")],
        );
        assert_eq!(c.differed, vec![Part::Bytes]);
        let j = faster("channels_last", &c);
        assert_eq!(j.decision, Decision::Rejected);
        assert!(
            j.reason.contains("`channels_last` must not alter the data"),
            "{}",
            j.reason
        );
        // The same data: the verdict stands.
        let c = DataCheck::of("num_threads", &steady(), &[base()], &[base()]);
        assert_eq!(faster("num_threads", &c).decision, Decision::Kept);
    }

    #[test]
    fn without_indices_items_and_order_are_not_recorded() {
        // An iterable dataset: no sampler indices.
        let it = || id(None, None, "s", "b");
        let c = DataCheck::of(
            "num_workers",
            &Reproduced::of(&[it(), it()]),
            &[it()],
            &[it()],
        );
        assert_eq!(c.compared, vec![Part::Structure]);
        assert!(c.skipped.contains(&(Part::Items, Skip::NotRecorded)));
        assert_eq!(c.outcome, Outcome::Same);
        // Nothing left to compare: unknown, and the verdict stands.
        let c = DataCheck::of(
            "num_workers",
            &Reproduced::of(&[it(), id(None, None, "s2", "b")]),
            &[it()],
            &[id(None, None, "s3", "b")],
        );
        assert_eq!(c.outcome, Outcome::Unknown);
        assert_eq!(faster("num_workers", &c).decision, Decision::Kept);
    }

    fn allow(yes: bool) -> Policy {
        let mut p = Policy::default();
        p.loop_.allow_data_change = yes;
        p
    }

    fn check(outcome: Outcome) -> DataCheck {
        DataCheck {
            outcome,
            compared: vec![Part::Bytes],
            skipped: vec![],
            differed: if outcome == Outcome::Changed {
                vec![Part::Bytes]
            } else {
                vec![]
            },
        }
    }

    #[test]
    fn a_data_preserving_knob_that_changed_the_data_is_rejected_even_if_faster() {
        for knob in DATA_PRESERVING {
            for allowed in [false, true] {
                let j = judge(
                    knob,
                    Verdict::Keep,
                    "faster".into(),
                    &check(Outcome::Changed),
                    &allow(allowed),
                );
                assert_eq!(j.decision, Decision::Rejected, "{knob}");
                assert!(j.reason.contains(knob), "{}", j.reason);
                assert!(j.reason.contains("their bytes differ"), "{}", j.reason);
            }
            for data in [Outcome::Same, Outcome::Unknown] {
                let j = judge(
                    knob,
                    Verdict::Keep,
                    "faster".into(),
                    &check(data),
                    &allow(false),
                );
                assert_eq!(j.decision, Decision::Kept, "{knob} {data:?}");
                assert_eq!(j.reason, "faster");
            }
        }
    }

    #[test]
    fn a_preprocessing_change_that_changed_the_data_needs_the_policys_leave() {
        let j = judge(
            "preprocessing",
            Verdict::Keep,
            "faster".into(),
            &check(Outcome::Changed),
            &allow(false),
        );
        assert_eq!(j.decision, Decision::Rejected);
        assert!(
            j.reason.contains("allow_data_change = true"),
            "{}",
            j.reason
        );
        let j = judge(
            "preprocessing",
            Verdict::Keep,
            "faster".into(),
            &check(Outcome::Changed),
            &allow(true),
        );
        assert_eq!(j.decision, Decision::Kept);
        assert!(
            j.reason.starts_with("faster — DATA CHANGED"),
            "{}",
            j.reason
        );
        // Allowed but not faster: reverted, with the rule's reason.
        let j = judge(
            "preprocessing",
            Verdict::Revert,
            "not faster".into(),
            &check(Outcome::Changed),
            &allow(true),
        );
        assert_eq!(
            j,
            Judgement {
                decision: Decision::Reverted,
                reason: "not faster".into()
            }
        );
        let j = judge(
            "preprocessing",
            Verdict::Keep,
            "faster".into(),
            &check(Outcome::Same),
            &allow(false),
        );
        assert_eq!(j.decision, Decision::Kept);
        assert_eq!(j.reason, "faster");
    }

    #[test]
    fn without_a_data_problem_the_paired_verdict_stands() {
        for data in [Outcome::Same, Outcome::Unknown] {
            for (v, want) in [
                (Verdict::Keep, Decision::Kept),
                (Verdict::Revert, Decision::Reverted),
                (Verdict::Undecided, Decision::Reverted),
            ] {
                let j = judge("num_workers", v, "rule".into(), &check(data), &allow(false));
                assert_eq!(j.decision, want, "{v:?} {data:?}");
                assert_eq!(j.reason, "rule");
            }
        }
    }

    fn row(decision: Decision) -> TurnRow {
        TurnRow {
            turn: 1,
            change: String::new(),
            file: None,
            before_sps: None,
            after_sps: None,
            ratio: None,
            ratio_ci: None,
            runs: 0,
            decision,
            reason: String::new(),
            agent: AgentInfo::default(),
            candidate_samples: vec![],
            incumbent_samples: vec![],
            data_wait_share: None,
            confirmation: None,
        }
    }

    fn changed(decision: Decision, change: &str) -> TurnRow {
        TurnRow {
            change: change.into(),
            ..row(decision)
        }
    }

    #[test]
    fn compute_turns_neither_make_nor_break_the_loaders_streak() {
        let p = policy();
        let threads = "num_threads: torch.set_num_threads 1 → 2 at train.py:5";
        let autocast = "autocast: model.forward under torch.autocast at train.py:9";
        let fused = "fused_optimizer: fused=True at train.py:11";
        // Three compute turns reverted in a row: no streak, others may follow.
        let compute = vec![
            changed(Decision::Reverted, threads),
            changed(Decision::Rejected, autocast),
            changed(Decision::Reverted, fused),
        ];
        assert_eq!(not_kept_streak(&progress(&compute), &p), None);
        assert_eq!(stop_rule(&progress(&compute), &p), None);
        // The loader's turns count across them.
        let mixed = vec![
            changed(Decision::Reverted, "num_workers 0 → 2"),
            changed(Decision::Kept, threads),
            changed(Decision::Reverted, "pin_memory False → True"),
            changed(Decision::Reverted, fused),
            changed(Decision::Reverted, "prefetch_factor 2 → 4"),
        ];
        assert_eq!(
            not_kept_streak(&progress(&mixed), &p),
            Some(StopReason::NotKeptStreak { turns: 3 })
        );
        // Every compute change tried, the loader settled: the reason says so.
        let rows = vec![
            changed(Decision::Reverted, "num_workers 0 → 2"),
            changed(Decision::Kept, threads),
            changed(Decision::Reverted, fused),
            changed(Decision::Rejected, autocast),
        ];
        let s =
            StopReason::compute_tried(&rows, 2, StopReason::DataWaitInsignificant { share: 0.018 })
                .unwrap();
        assert_eq!(
            s.to_string(),
            "every compute change was tried (1 kept, 2 not kept, 2 not applicable); data_wait 1.8% of the step"
        );
        let s =
            StopReason::compute_tried(&rows, 0, StopReason::NearCeiling { share: 0.97 }).unwrap();
        assert_eq!(
            s.to_string(),
            "every compute change was tried (1 kept, 2 not kept); within 3% of the ceiling"
        );
        // Without compute turns there is nothing to say.
        let loader_only = vec![changed(Decision::Reverted, "num_workers 0 → 2")];
        assert_eq!(
            StopReason::compute_tried(&loader_only, 2, StopReason::NearCeiling { share: 0.97 }),
            None
        );
    }

    fn progress(rows: &[TurnRow]) -> Progress<'_> {
        Progress {
            turns_done: rows.len() as u32,
            max_iterations: 10,
            rows,
            cost_usd: 0.0,
            elapsed: Duration::from_secs(1),
            incumbent_share: Some(0.5),
            incumbent_sps: 100.0,
            ceiling_sps: None,
            cheaper_after_streak: false,
        }
    }

    fn policy() -> Policy {
        let mut p = Policy::default();
        p.loop_.max_consecutive_reverts = 3;
        p.loop_.max_total_usd = 1.0;
        p.loop_.max_wall_s = 600;
        p.decision.stop_when_data_wait_below = 0.05;
        p.decision.stop_when_ceiling_share_above = 0.9;
        p
    }

    #[test]
    fn the_stop_rule_names_each_reason() {
        let p = policy();
        let none: Vec<TurnRow> = vec![];
        assert_eq!(stop_rule(&progress(&none), &p), None);

        let mut g = progress(&none);
        g.turns_done = 10;
        assert_eq!(
            stop_rule(&g, &p),
            Some(StopReason::IterationLimit { max: 10 })
        );
        assert_eq!(
            stop_rule(&g, &p).unwrap().to_string(),
            "iteration limit (10) reached"
        );

        let rows = vec![
            row(Decision::Kept),
            row(Decision::Reverted),
            row(Decision::Rejected),
            row(Decision::Failed),
        ];
        let s = stop_rule(&progress(&rows), &p).unwrap();
        assert_eq!(s, StopReason::NotKeptStreak { turns: 3 });
        assert_eq!(s.to_string(), "3 turns in a row not kept");
        // A kept turn ends the streak.
        let rows2 = vec![row(Decision::Reverted), row(Decision::Kept)];
        assert_eq!(stop_rule(&progress(&rows2), &p), None);
        // Where cheaper neighbours follow, the streak stops nothing, but the
        // rules after it still do.
        let mut g = progress(&rows);
        g.cheaper_after_streak = true;
        assert_eq!(
            not_kept_streak(&g, &p),
            Some(StopReason::NotKeptStreak { turns: 3 })
        );
        assert_eq!(stop_rule(&g, &p), None);
        g.elapsed = Duration::from_secs(600);
        assert_eq!(
            stop_rule(&g, &p).unwrap().to_string(),
            "time budget spent (600 s)"
        );

        let mut g = progress(&none);
        g.cost_usd = 1.25;
        let s = stop_rule(&g, &p).unwrap();
        assert_eq!(s.to_string(), "cost budget spent ($1.25 of $1.00)");

        let mut g = progress(&none);
        g.elapsed = Duration::from_secs(600);
        assert_eq!(
            stop_rule(&g, &p).unwrap().to_string(),
            "time budget spent (600 s)"
        );

        // data_wait small: only after a turn (the baseline has its own rule).
        let mut g = progress(&none);
        g.incumbent_share = Some(0.02);
        assert_eq!(stop_rule(&g, &p), None);
        let one = vec![row(Decision::Kept)];
        let mut g = progress(&one);
        g.incumbent_share = Some(0.02);
        assert_eq!(
            stop_rule(&g, &p).unwrap().to_string(),
            "data_wait no longer significant (2.0% of step time)"
        );
    }

    #[test]
    fn the_ceiling_stops_the_loop_only_when_the_share_is_credible() {
        let p = policy();
        let none: Vec<TurnRow> = vec![];
        let at = |sps: f64, ceiling: Option<f64>| {
            let mut g = progress(&none);
            g.incumbent_sps = sps;
            g.ceiling_sps = ceiling;
            g.incumbent_share = Some(0.06);
            stop_rule(&g, &p)
        };
        assert_eq!(at(80.0, Some(100.0)), None);
        assert_eq!(
            at(95.0, Some(100.0)).unwrap().to_string(),
            "within 5% of the ceiling"
        );
        assert_eq!(
            at(105.0, Some(100.0)).unwrap().to_string(),
            "at the ceiling (105% of it)"
        );
        // Far above the ceiling: the ceiling run was disturbed.
        assert_eq!(at(150.0, Some(100.0)), None);
        assert_eq!(at(95.0, Some(0.0)), None);
        assert_eq!(at(95.0, None), None);
        // Near the ceiling while 42% of the step still waits for data: the
        // ceiling run was slowed (a loaded machine), the job has not reached it.
        let mut g = progress(&none);
        g.incumbent_sps = 98.0;
        g.ceiling_sps = Some(100.0);
        g.incumbent_share = Some(0.42);
        assert_eq!(stop_rule(&g, &p), None);
        g.incumbent_share = None;
        assert!(
            stop_rule(&g, &p).is_some(),
            "no data_wait figure: the ceiling stands"
        );
    }

    #[test]
    fn a_ceiling_share_is_believed_only_where_data_wait_leaves_room_for_it() {
        assert_eq!(
            credible_ceiling_share(50.0, Some(100.0), Some(0.5)),
            Some(0.5)
        );
        assert_eq!(
            credible_ceiling_share(95.0, Some(100.0), Some(0.1)),
            Some(0.95)
        );
        assert_eq!(credible_ceiling_share(95.0, Some(100.0), Some(0.2)), None);
        assert_eq!(credible_ceiling_share(95.0, Some(100.0), None), Some(0.95));
        assert_eq!(credible_ceiling_share(120.0, Some(100.0), None), None);
        assert_eq!(credible_ceiling_share(95.0, None, Some(0.0)), None);
    }

    #[test]
    fn a_small_baseline_data_wait_warns_and_stops_unless_forced() {
        let mut p = policy();
        let (warn, stop) = baseline_stop(Some(0.03), &p);
        assert!(warn);
        assert_eq!(
            stop.unwrap().to_string(),
            "data_wait is only 3.0% of step time at the baseline: DataLoader tuning cannot help much"
        );
        p.loop_.force = true;
        assert_eq!(baseline_stop(Some(0.03), &p), (true, None));
        assert_eq!(baseline_stop(Some(0.5), &p), (false, None));
        assert_eq!(baseline_stop(None, &p), (false, None));
    }
}
