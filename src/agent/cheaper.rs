//! The cheapest setting that is as fast: which changes cost less than the
//! incumbent, and the cheaper neighbours worth a turn once the climb is over.
//!
//! The climb keeps what is faster; the fastest setting seen is often not the
//! cheapest that is as fast (16 workers where 10 give the same samples/sec
//! cost memory and CPU on a shared node). A cheaper change is judged by the
//! equivalence rule (`stats::decide_cheaper`: no more than `min_gain` slower),
//! not by the keep rule; the run loop asks [`is_cheaper`] which rule applies.
//! Pure: the one-line change descriptions of the history are all it reads.

use crate::turn::{Decision, TurnRow};

/// One change, read back from its one-line form ("num_workers 16 → 8").
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    pub knob: String,
    pub from: String,
    pub to: String,
}

impl Change {
    pub fn parse(line: &str) -> Option<Change> {
        let (head, to) = line.split_once('→')?;
        let (knob, from) = head.trim().split_once(' ')?;
        Some(Change {
            knob: knob.to_string(),
            from: from.trim().to_string(),
            to: to.trim().to_string(),
        })
    }
}

/// A cheaper setting to try.
#[derive(Clone, Debug, PartialEq)]
pub struct Neighbour {
    pub knob: &'static str,
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
    match c.knob.as_str() {
        "num_workers" => matches!((workers(&c.from), workers(&c.to)), (Some(a), Some(b)) if b < a),
        "prefetch_factor" => {
            matches!((prefetch(&c.from), prefetch(&c.to)), (Some(a), Some(b)) if b < a)
        }
        "persistent_workers" | "pin_memory" => truthy(&c.from) && !truthy(&c.to),
        _ => false,
    }
}

/// The cheaper neighbours of the incumbent not tried yet, cheapest saving
/// first: fewer workers (halfway back to the count the last step up started
/// from: 2 → 16 kept gives 9, never under `min_workers`, the cores the job
/// may use: below them fewer workers take parallelism, not just waiting
/// processes), then a kept `persistent_workers` or `prefetch_factor`
/// dropped. The worker count is bisected: a cheaper count that measured
/// slower becomes the floor (16 → 9 reverted gives 12 next), until the
/// step would save less than a quarter of the workers. `current` reads a knob's value in the incumbent's DataLoader
/// call ("(default)" when it is not written).
pub fn neighbours(
    history: &[TurnRow],
    current: impl Fn(&str) -> String,
    min_workers: u64,
) -> Vec<Neighbour> {
    let changes: Vec<(Change, Decision)> = history
        .iter()
        .filter_map(|r| Some((Change::parse(&r.change)?, r.decision)))
        .collect();
    let tried = |knob: &str, to: &str| changes.iter().any(|(c, _)| c.knob == knob && c.to == to);
    let mut out = Vec::new();

    let now = workers(&current("num_workers"));
    // The last step up that was kept (not a cheaper one): where it started.
    let step_up = changes.iter().rev().find(|(c, d)| {
        *d == Decision::Kept
            && c.knob == "num_workers"
            && matches!((workers(&c.from), workers(&c.to)), (Some(a), Some(b)) if b > a)
    });
    if let (Some(n), Some((c, _))) = (now, step_up) {
        // The highest cheaper count already found slower than kept ones.
        let too_slow = changes
            .iter()
            .filter(|(c, d)| c.knob == "num_workers" && *d == Decision::Reverted)
            .filter_map(|(c, _)| Some((workers(&c.from)?, workers(&c.to)?)))
            .filter(|(a, b)| b < a && *b < n)
            .map(|(_, b)| b)
            .max();
        if let Some(from) = workers(&c.from) {
            let floor = too_slow.map_or(from, |t| t.max(from));
            let mid = ((floor + n) / 2).max(min_workers);
            let worth = (n - mid.min(n)) >= (n / 4).max(1);
            if mid > floor && mid < n && worth && !tried("num_workers", &mid.to_string()) {
                let toward = match too_slow.filter(|t| *t >= from) {
                    Some(t) => format!("halfway to {t}, which measured slower"),
                    None => format!("halfway back to {from}"),
                };
                out.push(Neighbour {
                    knob: "num_workers",
                    value: Some(mid.to_string()),
                    why: format!(
                        "cheaper neighbour: {mid} workers instead of {n} ({toward}), kept if no more than min_gain slower"
                    ),
                });
            }
        }
    }
    for knob in ["persistent_workers", "prefetch_factor"] {
        let kept = changes
            .iter()
            .any(|(c, d)| *d == Decision::Kept && c.knob == knob);
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
    }

    #[test]
    fn the_neighbours_go_halfway_back_then_drop_kept_extras() {
        let h = vec![
            row(1, "num_workers (default) → 2", Decision::Kept),
            row(2, "persistent_workers (default) → True", Decision::Kept),
            row(3, "num_workers 2 → 16", Decision::Kept),
            row(4, "prefetch_factor (default) → 4", Decision::Reverted),
        ];
        let cur = |k: &str| match k {
            "num_workers" => "16".to_string(),
            "persistent_workers" => "True".to_string(),
            _ => "(default)".to_string(),
        };
        let n = neighbours(&h, cur, 2);
        let got: Vec<(&str, Option<&str>)> =
            n.iter().map(|n| (n.knob, n.value.as_deref())).collect();
        assert_eq!(
            got,
            vec![("num_workers", Some("9")), ("persistent_workers", None)]
        );
        // Tried already (kept or not): not again; 9 kept gives 5 next time.
        let mut h2 = h.clone();
        h2.push(row(5, "num_workers 16 → 9", Decision::KeptCheaper));
        h2.push(row(
            6,
            "persistent_workers True → (default)",
            Decision::Reverted,
        ));
        let cur9 = |k: &str| match k {
            "num_workers" => "9".to_string(),
            "persistent_workers" => "True".to_string(),
            _ => "(default)".to_string(),
        };
        // The last step up started at 2: halfway from 9 is 5.
        let n = neighbours(&h2, cur9, 2);
        assert_eq!(n.len(), 1, "{n:?}");
        assert_eq!(n[0].value.as_deref(), Some("5"));
        // Never under the cores the job may use: 2 → 16 on 8 cores gives 9,
        // on 12 cores 12, on 16 cores none.
        assert_eq!(neighbours(&h, cur, 12)[0].value.as_deref(), Some("12"));
        assert_eq!(neighbours(&h, cur, 16)[0].knob, "persistent_workers");
        // One step up from none to the core count: 2 → 1 on one core, not on two.
        let h3 = vec![row(1, "num_workers (default) → 2", Decision::Kept)];
        let two = |k: &str| {
            if k == "num_workers" {
                "2".to_string()
            } else {
                "(default)".to_string()
            }
        };
        assert_eq!(neighbours(&h3, two, 1)[0].value.as_deref(), Some("1"));
        assert!(neighbours(&h3, two, 2).is_empty());
        // Nothing kept: no neighbours.
        assert!(neighbours(&[], |_| "(default)".into(), 1).is_empty());
    }

    #[test]
    fn a_cheaper_count_found_slower_becomes_the_floor_of_the_next() {
        let mut h = vec![
            row(1, "num_workers (default) → 2", Decision::Kept),
            row(2, "num_workers 2 → 16", Decision::Kept),
            row(3, "num_workers 16 → 9", Decision::Reverted),
        ];
        let at = |n: &'static str| {
            move |k: &str| {
                if k == "num_workers" {
                    n.to_string()
                } else {
                    "(default)".to_string()
                }
            }
        };
        let n = neighbours(&h, at("16"), 2);
        assert_eq!(n[0].value.as_deref(), Some("12"), "{n:?}");
        assert!(
            n[0].why.contains("halfway to 9, which measured slower"),
            "{}",
            n[0].why
        );
        // 12 as fast: from 12 the next would save 2 of 12 workers, under a
        // quarter: the bisection ends.
        h.push(row(4, "num_workers 16 → 12", Decision::KeptCheaper));
        assert!(neighbours(&h, at("12"), 2).is_empty());
        // 12 slower too: 14 would save 2 of 16: over as well.
        h.pop();
        h.push(row(4, "num_workers 16 → 12", Decision::Reverted));
        assert!(neighbours(&h, at("16"), 2).is_empty());
        // A slower try above the count now does not count (another branch).
        let h = vec![
            row(1, "num_workers (default) → 2", Decision::Kept),
            row(2, "num_workers 2 → 32", Decision::Kept),
            row(3, "num_workers 32 → 17", Decision::KeptCheaper),
            row(4, "num_workers 17 → 9", Decision::Reverted),
        ];
        assert_eq!(neighbours(&h, at("17"), 2)[0].value.as_deref(), Some("13"));
    }
}
