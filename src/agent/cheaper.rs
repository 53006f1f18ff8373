//! The cheapest setting that is as fast: which changes cost less than the
//! incumbent, and the cheaper neighbours worth a turn once the climb is over.
//!
//! The climb keeps what is faster; the fastest setting seen is often not the
//! cheapest that is as fast (16 workers where 10 give the same samples/sec
//! cost memory and CPU on a shared node). A cheaper change is judged by the
//! equivalence rule (`stats::decide_cheaper`: no more than `min_gain` slower),
//! not by the keep rule; the run loop asks [`is_cheaper`] which rule applies.
//! Pure: the one-line change descriptions of the history are all it reads.

use super::evidence::WORKER_HEADROOM;
use crate::knob::LoaderKnob;
use crate::turn::{Decision, TurnRow};

/// One change, read back from its one-line form ("num_workers 16 → 8").
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    pub knob: String,
    pub from: String,
    pub to: String,
}

impl Change {
    /// A change made at its source ends with where, after the value:
    /// "num_workers 0 → 4 (--workers default, train.py:12)" is 0 → 4.
    pub fn parse(line: &str) -> Option<Change> {
        let (head, to) = line.split_once('→')?;
        let (knob, from) = head.trim().split_once(' ')?;
        let to = to.trim();
        Some(Change {
            knob: knob.to_string(),
            from: from.trim().to_string(),
            to: to.split_once(" (").map_or(to, |(v, _)| v).to_string(),
        })
    }

    /// The loader knob changed, if the line names one.
    pub fn loader_knob(&self) -> Option<LoaderKnob> {
        LoaderKnob::parse(&self.knob)
    }
}

/// A cheaper setting to try.
#[derive(Clone, Debug, PartialEq)]
pub struct Neighbour {
    pub knob: LoaderKnob,
    /// The value to write; `None` drops the argument (back to the default).
    pub value: Option<String>,
    pub why: String,
}

/// num_workers' value as a count; "(default)" is 0.
fn workers(v: &str) -> Option<u64> {
    if v == "(default)" {
        Some(0)
    } else {
        v.parse().ok()
    }
}

/// prefetch_factor's value; "(default)" is PyTorch's 2.
fn prefetch(v: &str) -> Option<u64> {
    if v == "(default)" {
        Some(2)
    } else {
        v.parse().ok()
    }
}

fn truthy(v: &str) -> bool {
    v == "True"
}

/// Whether a change makes the loader cheaper to run: fewer workers, fewer
/// batches prefetched, workers no longer kept alive, memory no longer pinned.
pub fn is_cheaper(change: &str) -> bool {
    let Some(c) = Change::parse(change) else {
        return false;
    };
    match c.loader_knob() {
        Some(LoaderKnob::NumWorkers) => {
            matches!((workers(&c.from), workers(&c.to)), (Some(a), Some(b)) if b < a)
        }
        Some(LoaderKnob::PrefetchFactor) => {
            matches!((prefetch(&c.from), prefetch(&c.to)), (Some(a), Some(b)) if b < a)
        }
        Some(LoaderKnob::PersistentWorkers | LoaderKnob::PinMemory) => {
            truthy(&c.from) && !truthy(&c.to)
        }
        Some(LoaderKnob::Preprocessing) | None => false,
    }
}

/// The cheaper neighbours of the incumbent not tried yet, cheapest saving
/// first: fewer workers, then a kept `persistent_workers` or `prefetch_factor`
/// dropped. The worker count is searched between a floor and the count now,
/// never under `min_workers` (the cores the job may use: below them fewer
/// workers take parallelism, not just waiting processes):
/// - first a quarter fewer (16 → 13, 13 → 11): the headroom the climb sizes
///   its counts with ([`WORKER_HEADROOM`]), which is what a cheaper count
///   would give back;
/// - then halfway to the floor (16 → 9 reverted gives 12 next), until the step
///   would save less than a quarter of the workers.
///
/// The floor is the highest of: the count the last step up started from, a
/// cheaper count that measured slower, and the fewest workers that the step
/// up's own figures say could come within `min_gain` of the top. `from` workers
/// gave 1/r of it, and workers scale at most linearly from there (more of them
/// contend for the same cores): 2 → 13 at ×4.24 needs at least
/// 2 · 4.24 · (1 − min_gain) = 8.2, so 9 or more. From no workers, the
/// training process loaded each sample itself, in series with its step: of
/// the 1/before seconds a sample took, 1/before − `step_s` was loading, and
/// a worker loads no faster, so n workers need n ≥ (1/before − step_s) ·
/// after · (1 − min_gain). `step_s` is the incumbent's step per sample, no
/// shorter than the step was without workers (they share its cores), so
/// the bound errs low. `current` reads a knob's value in the incumbent's
/// DataLoader call ("(default)" when it is not written).
pub fn neighbours(
    history: &[TurnRow],
    current: impl Fn(LoaderKnob) -> String,
    min_workers: u64,
    min_gain: f64,
    step_s: Option<f64>,
) -> Vec<Neighbour> {
    let changes: Vec<(Change, &TurnRow)> = history
        .iter()
        .filter_map(|r| Some((Change::parse(&r.change)?, r)))
        .collect();
    let tried =
        |knob: LoaderKnob, to: &str| changes.iter().any(|(c, _)| knob.is(&c.knob) && c.to == to);
    let workers_change = |c: &Change| LoaderKnob::NumWorkers.is(&c.knob);
    let mut out = Vec::new();

    let now = workers(&current(LoaderKnob::NumWorkers));
    // The last step up that was kept (not a cheaper one): where it started.
    let step_up = changes.iter().rev().find(|(c, r)| {
        r.decision == Decision::Kept
            && workers_change(c)
            && matches!((workers(&c.from), workers(&c.to)), (Some(a), Some(b)) if b > a)
    });
    if let (Some(n), Some((c, row))) = (now, step_up) {
        // The highest cheaper count already found slower than kept ones.
        let too_slow = changes
            .iter()
            .filter(|(c, r)| workers_change(c) && r.decision == Decision::Reverted)
            .filter_map(|(c, _)| Some((workers(&c.from)?, workers(&c.to)?)))
            .filter(|(a, b)| b < a && *b < n)
            .map(|(_, b)| b)
            .max();
        let cheaper_tried = changes
            .iter()
            .any(|(c, r)| workers_change(c) && is_cheaper(&r.change));
        if let Some(from) = workers(&c.from) {
            // Below this many, the step up's own figures say no count can be as fast.
            // From no workers: the time a sample took to load, and the rate after.
            let loading_s = match (from, row.before_sps, row.after_sps, step_s) {
                (0, Some(b), Some(a), Some(s)) if b > 0.0 => Some((1.0 / b - s, a)),
                _ => None,
            }
            .filter(|(l, _)| l.is_finite() && *l > 0.0);
            let by_ratio = match loading_s {
                Some((l, a)) => Some((l * a * (1.0 - min_gain)).ceil() as u64),
                None => row
                    .ratio
                    .filter(|r| from > 0 && r.is_finite() && *r > 0.0)
                    .map(|r| (from as f64 * r * (1.0 - min_gain)).ceil() as u64),
            };
            let floor = from
                .max(too_slow.unwrap_or(0))
                .max(by_ratio.map_or(0, |b| b.saturating_sub(1)));
            let quarter_fewer = (n as f64 / WORKER_HEADROOM).ceil() as u64;
            let halfway = (floor + n) / 2;
            let worth_halving = (n - halfway.min(n)) >= (n / 4).max(1);
            let pick = [
                (!cheaper_tried).then_some((quarter_fewer, true)),
                worth_halving.then_some((halfway, false)),
            ]
            .into_iter()
            .flatten()
            .map(|(m, first)| (m.max(min_workers), first))
            .find(|(m, _)| *m > floor && *m < n && !tried(LoaderKnob::NumWorkers, &m.to_string()));
            if let Some((mid, first)) = pick {
                let toward = if first {
                    "a quarter fewer: the headroom the climb sizes its counts with".to_string()
                } else if let Some((l, a)) =
                    loading_s.filter(|_| by_ratio.is_some_and(|b| b > too_slow.unwrap_or(0) + 1))
                {
                    format!(
                        "halfway to {floor}: without workers a sample took {:.2} ms, {:.2} ms of it loading, so fewer than {} cannot come within min_gain of {}'s {a:.0} samples/sec",
                        1e3 / row.before_sps.unwrap_or(f64::NAN),
                        l * 1e3,
                        floor + 1,
                        c.to,
                    )
                } else if by_ratio.is_some_and(|b| b > from.max(too_slow.unwrap_or(0)) + 1) {
                    format!(
                            "halfway to {floor}: {from} workers measured 1/{:.2} of {}, so fewer than {} cannot come within min_gain",
                            row.ratio.unwrap_or(0.0),
                            c.to,
                            floor + 1
                        )
                } else {
                    match too_slow.filter(|t| *t >= from) {
                        Some(t) => format!("halfway to {t}, which measured slower"),
                        None => format!("halfway back to {from}"),
                    }
                };
                out.push(Neighbour {
                        knob: LoaderKnob::NumWorkers,
                        value: Some(mid.to_string()),
                        why: format!(
                            "cheaper neighbour: {mid} workers instead of {n} ({toward}), kept if no more than min_gain slower"
                        ),
                    });
            }
        }
    }
    for knob in [LoaderKnob::PersistentWorkers, LoaderKnob::PrefetchFactor] {
        let kept = changes
            .iter()
            .any(|(c, r)| r.decision == Decision::Kept && knob.is(&c.knob));
        let value = current(knob);
        if kept && value != "(default)" && !tried(knob, "(default)") {
            out.push(Neighbour {
                knob,
                value: None,
                why: format!(
                    "cheaper neighbour: drop {knob}={value} kept earlier, if it no longer pays (kept if no more than min_gain slower)"
                ),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::turn::AgentInfo;

    fn row(turn: u32, change: &str, d: Decision) -> TurnRow {
        TurnRow {
            turn,
            change: change.into(),
            file: None,
            before_sps: None,
            after_sps: None,
            ratio: None,
            ratio_ci: None,
            runs: 0,
            decision: d,
            reason: String::new(),
            agent: AgentInfo::default(),
            candidate_samples: vec![],
            incumbent_samples: vec![],
            data_wait_share: None,
            confirmation: None,
        }
    }

    #[test]
    fn cheaper_changes_are_told_from_the_others() {
        assert!(is_cheaper("num_workers 16 → 9"));
        assert!(is_cheaper("num_workers 2 → (default)"));
        assert!(!is_cheaper("num_workers 2 → 16"));
        assert!(!is_cheaper("num_workers (default) → 2"));
        assert!(is_cheaper("prefetch_factor 4 → (default)"));
        assert!(!is_cheaper("prefetch_factor (default) → 4"));
        assert!(is_cheaper("persistent_workers True → (default)"));
        assert!(is_cheaper("pin_memory True → False"));
        assert!(!is_cheaper("persistent_workers (default) → True"));
        assert!(!is_cheaper("preprocessing train.py:12"));
        assert!(!is_cheaper("(no change proposed)"));
        // Changes made at their source (command mode) name where, after the value.
        assert!(is_cheaper(
            "num_workers 25 → 20 (--workers default, train.py:38)"
        ));
        assert!(!is_cheaper(
            "num_workers 12 → 25 (--workers default, train.py:38)"
        ));
        assert!(is_cheaper(
            "num_workers 2 → (default) (--workers default, train.py:38)"
        ));
        assert_eq!(
            Change::parse("num_workers (default) → 2 (--workers default, train.py:38)"),
            Some(Change {
                knob: "num_workers".into(),
                from: "(default)".into(),
                to: "2".into()
            })
        );
    }

    fn at(n: &'static str) -> impl Fn(LoaderKnob) -> String {
        move |k: LoaderKnob| {
            if k == LoaderKnob::NumWorkers {
                n.to_string()
            } else {
                "(default)".to_string()
            }
        }
    }

    fn with_ratio(mut r: TurnRow, ratio: f64) -> TurnRow {
        r.ratio = Some(ratio);
        r
    }

    #[test]
    fn a_quarter_fewer_first_then_halfway_back_then_drop_kept_extras() {
        let h = vec![
            row(1, "num_workers (default) → 2", Decision::Kept),
            row(2, "persistent_workers (default) → True", Decision::Kept),
            row(3, "num_workers 2 → 16", Decision::Kept),
            row(4, "prefetch_factor (default) → 4", Decision::Reverted),
        ];
        let cur = |k: LoaderKnob| match k.name() {
            "num_workers" => "16".to_string(),
            "persistent_workers" => "True".to_string(),
            _ => "(default)".to_string(),
        };
        let n = neighbours(&h, cur, 2, 0.03, None);
        let got: Vec<(&str, Option<&str>)> = n
            .iter()
            .map(|n| (n.knob.name(), n.value.as_deref()))
            .collect();
        assert_eq!(
            got,
            vec![("num_workers", Some("13")), ("persistent_workers", None)]
        );
        assert!(n[0].why.contains("a quarter fewer"), "{}", n[0].why);
        // Tried already (kept or not): not again; 13 kept gives 7 next
        // (halfway back to 2, where the step up started).
        let mut h2 = h.clone();
        h2.push(row(5, "num_workers 16 → 13", Decision::KeptCheaper));
        h2.push(row(
            6,
            "persistent_workers True → (default)",
            Decision::Reverted,
        ));
        let cur13 = |k: LoaderKnob| match k.name() {
            "num_workers" => "13".to_string(),
            "persistent_workers" => "True".to_string(),
            _ => "(default)".to_string(),
        };
        let n = neighbours(&h2, cur13, 2, 0.03, None);
        assert_eq!(n.len(), 1, "{n:?}");
        assert_eq!(n[0].value.as_deref(), Some("7"));
        assert!(n[0].why.contains("halfway back to 2"), "{}", n[0].why);
        // Never under the cores the job may use: 2 → 16 on 14 cores gives
        // 14, on 16 cores none.
        assert_eq!(
            neighbours(&h, cur, 14, 0.03, None)[0].value.as_deref(),
            Some("14")
        );
        assert_eq!(
            neighbours(&h, cur, 16, 0.03, None)[0].knob.name(),
            "persistent_workers"
        );
        // One step up from none to the core count: 2 → 1 on one core (a
        // quarter fewer rounds back to 2: halfway), not on two.
        let h3 = vec![row(1, "num_workers (default) → 2", Decision::Kept)];
        assert_eq!(
            neighbours(&h3, at("2"), 1, 0.03, None)[0].value.as_deref(),
            Some("1")
        );
        assert!(neighbours(&h3, at("2"), 2, 0.03, None).is_empty());
        // Nothing kept: no neighbours.
        assert!(neighbours(&[], |_: LoaderKnob| "(default)".into(), 1, 0.03, None).is_empty());
    }

    #[test]
    fn changes_made_at_their_source_are_searched_alike() {
        // The argparse example's history (command mode): each change names
        // the flag it was made at. 12 → 25 kept at ×1.38 allows 17 and up.
        let at_flag = "(--workers default, train.py:38)";
        let h = vec![
            row(1, &format!("num_workers 0 → 2 {at_flag}"), Decision::Kept),
            row(3, &format!("num_workers 2 → 12 {at_flag}"), Decision::Kept),
            row(4, "persistent_workers (default) → True", Decision::Kept),
            with_ratio(
                row(5, &format!("num_workers 12 → 25 {at_flag}"), Decision::Kept),
                1.38,
            ),
            row(
                6,
                &format!("num_workers 25 → 60 {at_flag}"),
                Decision::Reverted,
            ),
        ];
        let cur = |k: LoaderKnob| match k.name() {
            "num_workers" => "25".to_string(),
            "persistent_workers" => "True".to_string(),
            _ => "(default)".to_string(),
        };
        let n = neighbours(&h, cur, 2, 0.03, None);
        assert_eq!(n[0].value.as_deref(), Some("20"), "{n:?}");
        // 20 tried and kept as cheaper: the next is judged from there.
        let mut h2 = h.clone();
        h2.push(row(
            7,
            &format!("num_workers 25 → 20 {at_flag}"),
            Decision::KeptCheaper,
        ));
        let cur20 = |k: LoaderKnob| match k.name() {
            "num_workers" => "20".to_string(),
            "persistent_workers" => "True".to_string(),
            _ => "(default)".to_string(),
        };
        let n = neighbours(&h2, cur20, 2, 0.03, None);
        assert!(n.iter().all(|n| n.value.as_deref() != Some("20")), "{n:?}");
    }

    #[test]
    fn a_cheaper_count_found_slower_becomes_the_floor_of_the_next() {
        let mut h = vec![
            row(1, "num_workers (default) → 2", Decision::Kept),
            row(2, "num_workers 2 → 16", Decision::Kept),
            row(3, "num_workers 16 → 13", Decision::Reverted),
        ];
        // 13 slower: 14 would save 2 of 16, under a quarter: the search ends.
        assert!(neighbours(&h, at("16"), 2, 0.03, None).is_empty());
        // 9 slower (another agent's try): halfway between, 12.
        h.pop();
        h.push(row(3, "num_workers 16 → 9", Decision::Reverted));
        let n = neighbours(&h, at("16"), 2, 0.03, None);
        assert_eq!(n[0].value.as_deref(), Some("12"), "{n:?}");
        assert!(
            n[0].why.contains("halfway to 9, which measured slower"),
            "{}",
            n[0].why
        );
        // 12 as fast: from 12 the next would save 2 of 12 workers, under a
        // quarter: the search ends.
        h.push(row(4, "num_workers 16 → 12", Decision::KeptCheaper));
        assert!(neighbours(&h, at("12"), 2, 0.03, None).is_empty());
        // A slower try above the count now does not count (another branch).
        let h = vec![
            row(1, "num_workers (default) → 2", Decision::Kept),
            row(2, "num_workers 2 → 32", Decision::Kept),
            row(3, "num_workers 32 → 17", Decision::KeptCheaper),
            row(4, "num_workers 17 → 9", Decision::Reverted),
        ];
        assert_eq!(
            neighbours(&h, at("17"), 2, 0.03, None)[0].value.as_deref(),
            Some("13")
        );
    }

    #[test]
    fn the_step_ups_own_ratio_bounds_the_search_from_below() {
        // io_latency as measured: 2 → 13 kept at ×4.24. Two workers scaled
        // linearly reach 13's rate within min_gain only from 8.2 workers on.
        let h = vec![
            row(1, "num_workers (default) → 2", Decision::Kept),
            with_ratio(row(2, "num_workers 2 → 13", Decision::Kept), 4.24),
        ];
        let n = neighbours(&h, at("13"), 2, 0.03, None);
        assert_eq!(n[0].value.as_deref(), Some("11"), "{n:?}");
        // 11 as fast: halfway to 8 (the bound's floor), not back to 2.
        let mut kept = h.clone();
        kept.push(row(3, "num_workers 13 → 11", Decision::KeptCheaper));
        let n = neighbours(&kept, at("11"), 2, 0.03, None);
        assert_eq!(n[0].value.as_deref(), Some("9"), "{n:?}");
        assert!(
            n[0].why
                .contains("fewer than 9 cannot come within min_gain"),
            "{}",
            n[0].why
        );
        // 9 slower: 10 would save 1 of 11, under a quarter: the search ends.
        kept.push(row(4, "num_workers 11 → 9", Decision::Reverted));
        assert!(neighbours(&kept, at("11"), 2, 0.03, None).is_empty());
        // 11 slower: 12 would save 1 of 13: the search ends after one try.
        let mut slower = h.clone();
        slower.push(row(3, "num_workers 13 → 11", Decision::Reverted));
        assert!(neighbours(&slower, at("13"), 2, 0.03, None).is_empty());
        // A step that gained about what its workers promise (2 → 16 at ×7.9)
        // leaves no cheaper count the bound allows: 2 · 7.9 · 0.97 = 15.3.
        let linear = vec![
            row(1, "num_workers (default) → 2", Decision::Kept),
            with_ratio(row(2, "num_workers 2 → 16", Decision::Kept), 7.9),
        ];
        assert!(neighbours(&linear, at("16"), 2, 0.03, None).is_empty());
        // Without workers before the step (0 → 2) the ratio bounds nothing.
        let from_none = vec![with_ratio(
            row(1, "num_workers (default) → 8", Decision::Kept),
            1.5,
        )];
        assert_eq!(
            neighbours(&from_none, at("8"), 2, 0.03, None)[0]
                .value
                .as_deref(),
            Some("7")
        );
    }

    #[test]
    fn a_step_up_from_no_workers_bounds_the_search_by_the_time_a_sample_took_to_load() {
        // io_latency on the slow box: 0 → 13 kept (425 → 4206 samples/sec),
        // 13 → 11 kept as cheaper, the step 0.175 ms a sample now. Without
        // workers a sample took 2.35 ms, 2.18 of it loading: within 3% of
        // 4206 samples/sec needs 2.18 ms × 4206 × 0.97 = 8.9 workers.
        let mut up = with_ratio(row(1, "num_workers (default) → 13", Decision::Kept), 9.893);
        up.before_sps = Some(425.1);
        up.after_sps = Some(4205.9);
        let h = vec![up, row(2, "num_workers 13 → 11", Decision::KeptCheaper)];
        let n = neighbours(&h, at("11"), 2, 0.03, Some(0.175e-3));
        assert_eq!(n[0].value.as_deref(), Some("9"), "{n:?}");
        assert!(
            n[0].why.contains("without workers a sample took 2.35 ms, 2.18 ms of it loading, so fewer than 9 cannot come within min_gain of 13's 4206 samples/sec"),
            "{}",
            n[0].why
        );
        // 9 slower: 10 would save 1 of 11, under a quarter: the search ends.
        let mut slower = h.clone();
        slower.push(row(3, "num_workers 11 → 9", Decision::Reverted));
        assert!(neighbours(&slower, at("11"), 2, 0.03, Some(0.175e-3)).is_empty());
        // Without the step's time the jump bounds nothing: halfway to none, 5.
        let n = neighbours(&h, at("11"), 2, 0.03, None);
        assert_eq!(n[0].value.as_deref(), Some("5"), "{n:?}");
        // A step as long as a sample took leaves no loading time to bound by.
        let n = neighbours(&h, at("11"), 2, 0.03, Some(1.0 / 425.1));
        assert_eq!(n[0].value.as_deref(), Some("5"), "{n:?}");
    }
}
