//! The text of `tuneloop runs` and `tuneloop show RUN TURN`, made from what
//! [`crate::review`] read: pure renderers (the snapshot tests in
//! `tests/review.rs` pin their bytes), beside the terminal view of a live run.

use std::fmt::Write as _;

use crate::bench::stats;
use crate::report;
use crate::review::{RunSummary, TurnFiles};
use crate::run_folder::TurnBench;
use crate::turn::{Decision, TurnRow};
use crate::words::ReviewWords as Words;

fn words(language: &str) -> &'static Words {
    &crate::words::for_language(language).review
}

/// Columns a character takes on a terminal: 2 for East Asian wide ones.
pub fn char_width(c: char) -> usize {
    let u = c as u32;
    let wide = matches!(u,
        0x1100..=0x115F | 0x2E80..=0x303E | 0x3041..=0x33FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF
        | 0xA000..=0xA4CF | 0xAC00..=0xD7A3 | 0xF900..=0xFAFF | 0xFE30..=0xFE4F | 0xFF00..=0xFF60
        | 0xFFE0..=0xFFE6 | 0x20000..=0x3FFFD);
    if wide {
        2
    } else {
        1
    }
}

/// Terminal columns of a string.
pub fn display_width(s: &str) -> usize {
    s.chars().map(char_width).sum()
}

/// Rows of cells as aligned text: two spaces between columns, the columns
/// marked in `right` right-aligned, no trailing spaces.
fn aligned(rows: &[Vec<String>], right: &[bool]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| display_width(s))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (c, cell) in r.iter().enumerate() {
            let pad = " ".repeat(widths[c] - display_width(cell));
            if c > 0 {
                line.push_str("  ");
            }
            if right.get(c).copied().unwrap_or(false) {
                line.push_str(&pad);
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.push_str(&pad);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// `2026-11-30T19:58:38.84+00:00` → `2026-11-30 19:58`.
fn short_date(s: &str) -> String {
    match chrono::DateTime::parse_from_rfc3339(s) {
        Ok(t) => t.format("%Y-%m-%d %H:%M").to_string(),
        Err(_) => s.chars().take(16).collect(),
    }
}

/// `tuneloop runs` as an aligned table, with a header.
pub fn render_runs(runs: &[RunSummary], language: &str) -> String {
    let w = words(language);
    if runs.is_empty() {
        return format!("{}\n", w.no_runs);
    }
    let dash = || "—".to_string();
    let mut rows = vec![[
        w.id,
        w.date,
        w.project,
        w.agent,
        w.turns,
        w.speedup,
        w.state,
        w.stop_reason,
    ]
    .map(str::to_string)
    .to_vec()];
    for r in runs {
        rows.push(vec![
            r.id.clone(),
            short_date(&r.date),
            if r.project.is_empty() {
                dash()
            } else {
                r.project.clone()
            },
            if r.agent.is_empty() {
                dash()
            } else {
                r.agent.clone()
            },
            r.turns.map_or_else(dash, |n| n.to_string()),
            r.speedup.map_or_else(dash, |s| format!("×{s:.2}")),
            // killed, running and interrupted say it already; restored (or
            // failed) after an interruption says it in brackets.
            if r.interrupted && !matches!(r.state.as_str(), "interrupted" | "killed" | "running") {
                format!("{} ({})", r.state, w.interrupted)
            } else {
                r.state.clone()
            },
            r.stop_reason.as_deref().map(one_line).unwrap_or_else(dash),
        ]);
    }
    aligned(
        &rows,
        &[false, false, false, false, true, true, false, false],
    )
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

// ---------------------------------------------------------------- show

/// How `show` paints: `diff_line(line)` colours one diff line, `bold`
/// a heading. Plain functions so the renderer stays pure.
pub struct Paint {
    pub diff_line: fn(&str, bool) -> String,
    pub color: bool,
}

impl Paint {
    fn bold(&self, s: &str) -> String {
        if self.color {
            format!("\x1b[1m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
    fn decision(&self, d: Decision, s: &str) -> String {
        if !self.color {
            return s.to_string();
        }
        let code = match d {
            Decision::Kept | Decision::KeptCheaper => "32;1",
            Decision::Reverted => "33",
            Decision::NoChange => "2",
            _ => "31",
        };
        format!("\x1b[{code}m{s}\x1b[0m")
    }
}

/// `tuneloop show RUN TURN`: the prompt, the agent's summary and tool
/// calls, the diff, the measurements pair by pair, and the decision.
pub fn render_turn(t: &TurnFiles, paint: &Paint) -> String {
    let w = words(&t.language);
    let l = report::labels_for(&t.language);
    // "99% CI" when the run's policy is known.
    let ci_label = match t.confidence {
        Some(c) => format!("{}% {}", (c * 1000.0).round() / 10.0, l.ci),
        None => l.ci.to_string(),
    };
    let mut out = String::new();
    let head = |out: &mut String, title: &str| {
        let _ = writeln!(out, "\n{}", paint.bold(&format!("== {title} ==")));
    };
    // Title: run, turn, change, decision.
    let mut title = format!("{} {} · {} {}/{}", w.run, t.run_id, w.turn, t.turn, t.of);
    if let Some(d) = &t.decision {
        let _ = write!(
            title,
            " · {} · {}",
            one_line(&d.change),
            paint.decision(d.decision, l.decision(d.decision))
        );
    }
    let _ = writeln!(out, "{}", paint.bold(&title));

    head(&mut out, w.prompt);
    match &t.prompt {
        Some(p) => push_block(&mut out, p),
        None => push_block(&mut out, w.none),
    }

    head(&mut out, w.agent_section);
    match &t.agent {
        Some(a) => {
            let info = &a.info;
            let mut facts = vec![info.backend.clone()];
            if let Some(c) = info.exit_code {
                facts.push(format!("{} {c}", w.exit));
            }
            facts.push(format!(
                "{} {:.1}s",
                w.time,
                info.duration_ms as f64 / 1000.0
            ));
            if let Some(c) = info.cost_usd {
                facts.push(format!("{} ${c:.4}", w.cost));
            }
            if let Some(n) = info.num_turns {
                facts.push(format!("{} {n}", w.agent_turns));
            }
            let _ = writeln!(out, "{}", facts.join(" · "));
            if !a.summary.trim().is_empty() {
                let _ = writeln!(out, "{}: {}", w.summary, a.summary.trim_end());
            }
            if let Some(f) = &a.failure {
                let _ = writeln!(out, "{}: {}", w.failure, f.trim_end());
            }
        }
        // No agent.json (killed before the agent returned).
        None => {
            let _ = writeln!(out, "?");
        }
    }
    if t.tool_calls.is_empty() {
        let _ = writeln!(out, "{}: {}", w.tool_calls, w.none);
    } else {
        let _ = writeln!(out, "{} ({}):", w.tool_calls, t.tool_calls.len());
        let rows: Vec<Vec<String>> = t
            .tool_calls
            .iter()
            .enumerate()
            .map(|(i, c)| vec![format!("  {}.", i + 1), c.tool.clone(), c.input.clone()])
            .collect();
        out.push_str(&aligned(&rows, &[true, false, false]));
    }

    head(&mut out, w.diff);
    match t.diff.as_deref().filter(|d| !d.trim().is_empty()) {
        Some(d) => {
            for line in d.lines() {
                let _ = writeln!(out, "{}", (paint.diff_line)(line, paint.color));
            }
        }
        None => {
            let _ = writeln!(out, "{}", w.none);
        }
    }

    head(&mut out, w.measurements);
    match &t.bench {
        Some(b) => {
            measurements(&mut out, b, t.decision.as_ref(), w, &ci_label);
            // Each side's workers, memory and CPU (its median run).
            for (side, runs) in [(w.incumbent, &b.incumbent), (w.candidate, &b.candidate)] {
                if let Some(c) = crate::bench::cost::StateCost::of(runs).filter(|c| c.has_figures())
                {
                    let summary = report::costs::summary(&c, l);
                    let _ = writeln!(out, "{} ({side}): {summary}", l.memory_cpu);
                }
            }
        }
        None => {
            let _ = writeln!(out, "{}", w.none);
        }
    }
    if let Some(e) = &t.bench_error {
        let _ = writeln!(out, "{}:", w.bench_error);
        push_block(&mut out, e);
    }

    head(&mut out, w.decision);
    match &t.decision {
        Some(d) => {
            let _ = writeln!(
                out,
                "{} — {} ({} {})",
                paint.decision(d.decision, l.decision(d.decision)),
                one_line(&d.reason),
                d.runs,
                w.runs
            );
            let _ = writeln!(
                out,
                "samples/sec {} → {} · {} {} · {} {}",
                fmt_sps(d.before_sps),
                fmt_sps(d.after_sps),
                w.ratio,
                d.ratio.map_or("—".into(), |r| format!("{r:.3}")),
                ci_label,
                d.ratio_ci
                    .map_or("—".into(), |[a, b]| format!("[{a:.3}, {b:.3}]")),
            );
        }
        None => {
            let _ = writeln!(out, "{}", w.none);
        }
    }
    out
}

fn fmt_sps(x: Option<f64>) -> String {
    x.filter(|v| v.is_finite())
        .map_or("—".into(), |v| format!("{v:.1}"))
}

fn push_block(out: &mut String, text: &str) {
    out.push_str(text.trim_end_matches('\n'));
    out.push('\n');
}

/// The pair-by-pair table of bench.json: each pair's incumbent and candidate
/// samples/sec and their ratio, then the medians and the interval.
fn measurements(out: &mut String, b: &TurnBench, d: Option<&TurnRow>, w: &Words, ci_label: &str) {
    let sps = |ms: &[crate::bench::Measurement]| -> Vec<Option<f64>> {
        ms.iter().map(|m| Some(m.samples_per_sec)).collect()
    };
    let (cand, inc) = (sps(&b.candidate), sps(&b.incumbent));
    let ratios: Vec<Option<f64>> = b.ratios.iter().copied().map(Some).collect();
    let n = cand.len().max(inc.len());
    let f = |x: Option<&Option<f64>>| {
        x.copied()
            .flatten()
            .map_or("—".into(), |v| format!("{v:.1}"))
    };
    let mut rows = vec![vec![
        w.pair.to_string(),
        w.incumbent.to_string(),
        w.candidate.to_string(),
        w.ratio.to_string(),
    ]];
    for i in 0..n {
        rows.push(vec![
            (i + 1).to_string(),
            f(inc.get(i)),
            f(cand.get(i)),
            ratios
                .get(i)
                .copied()
                .flatten()
                .map_or("—".into(), |r| format!("{r:.3}")),
        ]);
    }
    let med = |v: &[Option<f64>]| {
        let v: Vec<f64> = v.iter().flatten().copied().collect();
        (!v.is_empty()).then(|| stats::median(&v))
    };
    rows.push(vec![
        w.median.to_string(),
        fmt_sps(d.and_then(|d| d.before_sps).or(med(&inc))),
        fmt_sps(d.and_then(|d| d.after_sps).or(med(&cand))),
        b.median.map_or("—".into(), |r| format!("{r:.3}")),
    ]);
    out.push_str(&aligned(&rows, &[false, true, true, true]));
    if let Some([lo, hi]) = b.ci {
        // The verdict as bench.json spells it (keep, revert, undecided).
        let verdict = b
            .verdict
            .and_then(|v| serde_json::to_value(v).ok())
            .and_then(|v| v.as_str().map(str::to_string))
            .map(|v| format!(" → {v}"))
            .unwrap_or_default();
        let _ = writeln!(out, "{ci_label} [{lo:.3}, {hi:.3}]{verdict}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_pads_wide_characters_and_right_aligns() {
        let rows = vec![
            vec!["ターン".to_string(), "1".to_string()],
            vec!["ab".to_string(), "123".to_string()],
        ];
        assert_eq!(aligned(&rows, &[false, true]), "ターン    1\nab      123\n");
    }

    #[test]
    fn dates_are_shortened() {
        assert_eq!(
            short_date("2026-11-30T19:58:38.841856611+00:00"),
            "2026-11-30 19:58"
        );
        assert_eq!(short_date("yesterday"), "yesterday");
    }
}
