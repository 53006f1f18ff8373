//! Which agent made which turn, what each cost, and the cost per point of
//! speed-up: the line a run with more than one agent (`hybrid`) adds to the
//! headline, and the `agents` / `cost_per_point_usd` keys it adds to
//! `report.json`. Computed from the turns alone; a single-agent run's report
//! is unchanged.
//!
//! A point is one percentage point of speed-up: ×1.25 is 25 points. The run's
//! cost per point divides the summed cost by the headline speedup's points
//! (best vs baseline, measured at the end); an agent's divides its own cost by
//! the points of its kept turns' ratios multiplied together.

use serde::Serialize;

use super::labels::labels;
use super::model::{Decision, RunReport};
use super::text;

/// One agent's part of a run.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct AgentShare {
    pub backend: String,
    /// The turns it made, in order.
    pub turns: Vec<u32>,
    pub cost_usd: f64,
    pub kept: u32,
    /// Its kept turns' ratios multiplied together (1.0 when none was kept).
    pub kept_gain: f64,
    /// `cost_usd` per point of `kept_gain`; `None` when it gained nothing.
    pub cost_per_point_usd: Option<f64>,
}

/// Points of speed-up of a factor: ×1.25 → 25.
fn points(gain: f64) -> f64 {
    (gain - 1.0) * 100.0
}

fn per_point(cost: f64, gain: f64) -> Option<f64> {
    (gain.is_finite() && gain > 1.0).then(|| cost / points(gain))
}

/// Whether the report speaks of agents: a hybrid run, or turns by more than one.
pub fn shown(r: &RunReport) -> bool {
    r.agent == "hybrid" || shares(r).len() > 1
}

/// Each agent's turns, cost and gain, in the order they first took a turn.
pub fn shares(r: &RunReport) -> Vec<AgentShare> {
    let mut out: Vec<AgentShare> = Vec::new();
    for t in &r.turns {
        let backend = if t.agent.backend.is_empty() {
            r.agent.clone()
        } else {
            t.agent.backend.clone()
        };
        let i = match out.iter().position(|s| s.backend == backend) {
            Some(i) => i,
            None => {
                out.push(AgentShare {
                    backend,
                    turns: vec![],
                    cost_usd: 0.0,
                    kept: 0,
                    kept_gain: 1.0,
                    cost_per_point_usd: None,
                });
                out.len() - 1
            }
        };
        let s = &mut out[i];
        s.turns.push(t.turn);
        s.cost_usd += t.agent.cost_usd.unwrap_or(0.0);
        if t.decision == Decision::Kept {
            s.kept += 1;
            s.kept_gain *= t.ratio.unwrap_or(1.0);
        }
    }
    for s in &mut out {
        s.cost_per_point_usd = per_point(s.cost_usd, s.kept_gain);
    }
    out
}

/// The run's cost per point of its headline speed-up.
pub fn cost_per_point(r: &RunReport) -> Option<f64> {
    per_point(r.total_cost_usd, r.speedup)
}

/// Turn numbers as ranges: `1–3, 5`.
fn ranges(turns: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < turns.len() {
        let mut j = i;
        while j + 1 < turns.len() && turns[j + 1] == turns[j] + 1 {
            j += 1;
        }
        parts.push(if j > i {
            format!("{}–{}", turns[i], turns[j])
        } else {
            turns[i].to_string()
        });
        i = j + 1;
    }
    parts.join(", ")
}

/// The headline's line: its label and plain-text value, `None` for a
/// single-agent run.
pub fn headline_item(r: &RunReport) -> Option<(&'static str, String)> {
    if !shown(r) {
        return None;
    }
    let ja = labels(r).lang == "ja";
    let mut parts: Vec<String> = shares(r)
        .iter()
        .map(|s| {
            let kept = match (s.kept, ja) {
                (0, false) => "nothing kept".to_string(),
                (0, true) => "採用なし".to_string(),
                (k, false) => format!("{k} kept, ×{:.2}", s.kept_gain),
                (k, true) => format!("採用 {k}、×{:.2}", s.kept_gain),
            };
            let per = match (s.cost_per_point_usd, ja) {
                (Some(c), false) => format!(", {} per point", text::usd(c)),
                (Some(c), true) => format!("、1ポイントあたり {}", text::usd(c)),
                _ => String::new(),
            };
            if ja {
                format!(
                    "{} ターン {}({}、{}{per})",
                    s.backend,
                    ranges(&s.turns),
                    text::usd(s.cost_usd),
                    kept
                )
            } else {
                format!(
                    "{} turns {} ({}, {kept}{per})",
                    s.backend,
                    ranges(&s.turns),
                    text::usd(s.cost_usd)
                )
            }
        })
        .collect();
    if parts.is_empty() {
        parts.push(if ja { "ターンなし" } else { "no turns" }.to_string());
    }
    let total = match (cost_per_point(r), ja) {
        (Some(c), false) => format!("{} per point of speed-up", text::usd(c)),
        (Some(c), true) => format!("高速化1ポイントあたり {}", text::usd(c)),
        (None, false) => "no speed-up to price".to_string(),
        (None, true) => "高速化なし".to_string(),
    };
    parts.push(total);
    Some((
        if ja { "エージェント" } else { "Agents" },
        parts.join(" · "),
    ))
}

/// The keys a multi-agent run adds to `report.json`.
pub fn json_fields(r: &RunReport) -> Option<serde_json::Value> {
    shown(r).then(|| {
        serde_json::json!({
            "agents": shares(r),
            "cost_per_point_usd": cost_per_point(r),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{AgentInfo, TurnRow};

    fn row(turn: u32, backend: &str, cost: Option<f64>, d: Decision, ratio: f64) -> TurnRow {
        TurnRow {
            turn,
            change: "x".into(),
            file: None,
            before_sps: None,
            after_sps: None,
            ratio: Some(ratio),
            ratio_ci: None,
            runs: 4,
            decision: d,
            reason: String::new(),
            agent: AgentInfo {
                backend: backend.into(),
                cost_usd: cost,
                ..Default::default()
            },
            candidate_samples: vec![],
            incumbent_samples: vec![],
            data_wait_share: None,
            confirmation: None,
        }
    }

    fn report(agent: &str, turns: Vec<TurnRow>, speedup: f64) -> RunReport {
        let total = crate::turn::total_cost_usd(&turns);
        RunReport {
            schema_version: 1,
            run_id: "r".into(),
            project: "p".into(),
            agent: agent.into(),
            language: "en".into(),
            started_at: String::new(),
            baseline_sps: 100.0,
            baseline_samples: vec![],
            baseline_data_wait_share: None,
            final_sps: 100.0 * speedup,
            final_data_wait_share: None,
            speedup,
            speedup_ci: None,
            final_interval: None,
            numerics_yardstick: None,
            ceiling_sps: None,
            final_share_of_ceiling: None,
            stop_reason: String::new(),
            interrupted: false,
            total_cost_usd: total,
            agent_time_ms: 0,
            wall_s: 0.0,
            bench_runs: 0,
            turns,
            kept_diff: String::new(),
            data_path: None,
            measured_loader: None,
            knob_sources: Vec::new(),
            not_editable_knobs: Vec::new(),
            window: None,
            limits: None,
            costs: None,
            data_check: None,
            profile_unavailable: None,
            run_command: None,
            whole_command: None,
            machine_load: None,
            time: None,
            compute_not_tried: vec![],
        }
    }

    #[test]
    fn a_hybrid_run_says_who_made_each_turn_and_what_a_point_cost() {
        let r = report(
            "hybrid",
            vec![
                row(1, "builtin", None, Decision::Kept, 2.0),
                row(2, "builtin", None, Decision::Reverted, 0.99),
                row(3, "claude", Some(0.30), Decision::Kept, 1.2),
                row(4, "claude", Some(0.10), Decision::NoChange, 1.0),
            ],
            2.5,
        );
        let s = shares(&r);
        assert_eq!(s.len(), 2);
        assert_eq!(
            (s[0].backend.as_str(), s[0].turns.clone()),
            ("builtin", vec![1, 2])
        );
        assert_eq!(
            (s[1].backend.as_str(), s[1].turns.clone()),
            ("claude", vec![3, 4])
        );
        assert_eq!(s[0].cost_per_point_usd, Some(0.0));
        assert!((s[1].cost_usd - 0.4).abs() < 1e-12);
        // ×1.2 is 20 points for $0.40: $0.02 a point.
        assert!((s[1].cost_per_point_usd.unwrap() - 0.02).abs() < 1e-12);
        // The run: ×2.5 is 150 points for $0.40.
        assert!((cost_per_point(&r).unwrap() - 0.4 / 150.0).abs() < 1e-12);
        let (label, line) = headline_item(&r).unwrap();
        assert_eq!(label, "Agents");
        assert_eq!(
            line,
            "builtin turns 1–2 ($0.00, 1 kept, ×2.00, $0.00 per point) · claude turns 3–4 ($0.40, 1 kept, ×1.20, $0.02 per point) · $0.0027 per point of speed-up"
        );
        let mut ja = r.clone();
        ja.language = "ja".into();
        let (label, line) = headline_item(&ja).unwrap();
        assert_eq!(label, "エージェント");
        assert!(
            line.contains("claude ターン 3–4($0.40、採用 1、×1.20、1ポイントあたり $0.02)"),
            "{line}"
        );
        let j = json_fields(&r).unwrap();
        assert_eq!(j["agents"][1]["turns"], serde_json::json!([3, 4]));
        assert_eq!(j["agents"][0]["backend"], "builtin");
    }

    #[test]
    fn a_single_agent_run_adds_nothing_and_no_gain_has_no_price() {
        let r = report(
            "builtin",
            vec![row(1, "builtin", None, Decision::Kept, 1.5)],
            1.5,
        );
        assert_eq!(headline_item(&r), None);
        assert_eq!(json_fields(&r), None);
        let r = report(
            "claude",
            vec![row(1, "claude", Some(0.2), Decision::Reverted, 0.9)],
            1.0,
        );
        assert_eq!(cost_per_point(&r), None);
        assert_eq!(shares(&r)[0].cost_per_point_usd, None);
        assert_eq!(ranges(&[1, 2, 3, 5, 7, 8]), "1–3, 5, 7–8");
    }
}
