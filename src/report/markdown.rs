//! `report.md`: headline, the before/after table of every turn, and the kept
//! changes as one diff. Labels follow `RunReport::language`.

use std::fmt::Write as _;

use super::labels::{labels, Labels};
use super::model::{RunReport, TurnRow};
use super::text::{self, md_cell, md_inline};

/// Renders the run as GitHub-flavoured Markdown.
pub fn render_markdown(r: &RunReport) -> String {
    let l = labels(r);
    let mut out = String::new();
    headline(&mut out, r, l);
    out.push('\n');
    table(&mut out, r, l);
    out.push('\n');
    costs_table(&mut out, r, l);
    kept_changes(&mut out, r, l);
    out
}

fn headline(out: &mut String, r: &RunReport, l: &Labels) {
    let _ = writeln!(out, "# {} — {}\n", l.title, md_inline(&r.run_id));
    let _ = writeln!(
        out,
        "{}: {} · {}: {} · {}: {}\n",
        l.project,
        md_inline(&r.project),
        l.agent,
        md_inline(&r.agent),
        l.started,
        md_inline(&r.started_at),
    );
    for (label, value) in headline_items(r, l) {
        let _ = writeln!(out, "- **{label}:** {value}");
    }
    if r.interrupted {
        let _ = writeln!(out, "- **{}** — {}", l.interrupted, l.interrupted_note);
    }
}

/// The headline as (label, plain-text value) pairs, shared with the HTML page.
pub(crate) fn headline_items(r: &RunReport, l: &Labels) -> Vec<(&'static str, String)> {
    let mut items = Vec::new();
    items.push((
        l.throughput,
        format!(
            "{} → {} samples/sec ({} → {})",
            text::sps(Some(r.baseline_sps)),
            text::sps(Some(r.final_sps)),
            l.baseline,
            l.final_,
        ),
    ));
    let mut speedup = if r.speedup.is_finite() {
        format!("×{:.2}", r.speedup)
    } else {
        text::DASH.to_string()
    };
    if let Some(ci) = r.speedup_ci {
        let _ = write!(speedup, " ({} {})", l.ci, text::interval(Some(ci), 2));
    }
    items.push((l.speedup, speedup));
    if let Some(why) = r
        .final_interval
        .as_ref()
        .and_then(|f| f.describe(r.language == "ja"))
    {
        items.push((l.interval, md_inline(&why)));
    }
    if let Some(y) = &r.numerics_yardstick {
        items.push((
            l.numerics_yardstick,
            md_inline(
                &l.numerics_yardstick_text
                    .replace("{y}", &y.describe())
                    .replace("{k}", &crate::numerics::YARDSTICK_FACTOR.to_string()),
            ),
        ));
    }
    if let Some(c) = &r.run_command {
        items.push((l.run_from_now_on, md_inline(c)));
    }
    if let Some(w) = &r.whole_command {
        items.push((l.whole_command, md_inline(&w.describe(r.language == "ja"))));
    }
    if let Some(m) = r.machine_load.as_ref().filter(|m| m.busy()) {
        items.push((l.machine_load, md_inline(&m.describe(r.language == "ja"))));
    }
    if r.ceiling_sps.is_some_and(f64::is_finite) {
        let mut ceiling = format!("{} samples/sec", text::sps(r.ceiling_sps));
        if let Some(share) = text::share_of_ceiling(r) {
            let past = text::past_limit(l, share);
            let mut share = l.of_ceiling.replace("{pct}", &text::percent(Some(share)));
            if let Some(past) = past {
                share.push_str("; ");
                share.push_str(past);
            }
            let _ = write!(ceiling, " ({share})");
        }
        items.push((l.ceiling, ceiling));
    }
    if let Some(m) = &r.measured_loader {
        items.push((l.measured_loader, md_inline(m)));
    }
    if let Some(w) = &r.window {
        items.push((
            l.timed_steps,
            l.timed_steps_epoch
                .replace("{steps}", &w.steps.to_string())
                .replace("{configured}", &w.configured.to_string()),
        ));
    }
    if !r.knob_sources.is_empty() {
        items.push((l.knob_sources, md_inline(&r.knob_sources.join("; "))));
    }
    if !r.not_editable_knobs.is_empty() {
        let lines: Vec<String> = r
            .not_editable_knobs
            .iter()
            .map(|n| format!("{}. {}", n.why, n.fix))
            .collect();
        items.push((l.not_editable, md_inline(&lines.join("; "))));
    }
    if let Some(d) = &r.data_check {
        items.push((l.data_check, text::data_check(d, l)));
    }
    if let Some(lim) = &r.limits {
        items.extend(text::limits(lim, l));
    }
    if let Some(d) = &r.data_path {
        items.push((l.data_path, text::data_path(d, r.final_sps, l)));
    }
    if r.baseline_data_wait_share.is_some() || r.final_data_wait_share.is_some() {
        items.push((
            l.data_wait_share,
            format!(
                "{} → {} ({} → {})",
                text::percent(r.baseline_data_wait_share),
                text::percent(r.final_data_wait_share),
                l.baseline,
                l.final_,
            ),
        ));
    }
    items.extend(super::costs::headline_item(r, l));
    items.push((l.agent_cost, text::usd(r.total_cost_usd)));
    // More than one agent (hybrid): who made which turn, and the price of a point.
    items.extend(super::agents::headline_item(r));
    items.push((l.agent_time, text::duration_ms(r.agent_time_ms)));
    items.push((l.bench_runs, r.bench_runs.to_string()));
    items.push((l.wall_time, text::duration_s(r.wall_s)));
    // Runs that carry no timed window (a contract figure alone, a
    // hand-made folder) have nothing to say here.
    if let Some(t) = r.time.as_ref().filter(|t| t.measured_runs > 0) {
        items.push((l.measuring, text::measuring(t, l)));
    }
    items.push((l.stop_reason, md_inline(&r.stop_reason)));
    if let Some(reason) = &r.profile_unavailable {
        items.push((
            l.profiler,
            md_inline(&l.profile_unavailable.replace("{reason}", reason)),
        ));
    }
    if !r.compute_not_tried.is_empty() {
        items.push((
            l.compute_not_tried,
            md_inline(&crate::compute::describe_not_tried(&r.compute_not_tried)),
        ));
    }
    items
}

/// The cells of one table row, unescaped, shared with the HTML page:
/// turn, change, before, after, ratio, CI, runs, decision, reason. An empty
/// text cell is a dash.
pub(crate) fn row_cells(t: &TurnRow, l: &Labels) -> [String; 9] {
    let or_dash = |s: &str| {
        if s.trim().is_empty() {
            text::DASH.to_string()
        } else {
            s.to_string()
        }
    };
    [
        t.turn.to_string(),
        or_dash(&t.change),
        text::sps(t.before_sps),
        text::sps(t.after_sps),
        text::ratio(t.ratio),
        text::interval(t.ratio_ci, 3),
        t.runs.to_string(),
        l.decision(t.decision).to_string(),
        or_dash(&t.reason),
    ]
}

pub(crate) fn columns(l: &Labels) -> [&'static str; 9] {
    [
        l.col_turn,
        l.col_change,
        l.col_before,
        l.col_after,
        l.col_ratio,
        l.col_ci,
        l.col_runs,
        l.col_decision,
        l.col_reason,
    ]
}

fn table(out: &mut String, r: &RunReport, l: &Labels) {
    let _ = writeln!(out, "## {}\n", l.turns);
    let _ = writeln!(out, "| {} |", columns(l).join(" | "));
    // Numbers right-aligned; text left-aligned.
    out.push_str("|---:|---|---:|---:|---:|---|---:|---|---|\n");
    for t in &r.turns {
        let cells = row_cells(t, l).map(|c| md_cell(&c));
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    if r.turns.is_empty() {
        let _ = writeln!(out, "\n_{}_", l.no_turns);
    }
}

/// Each state's memory and CPU (nothing without figures).
fn costs_table(out: &mut String, r: &RunReport, l: &Labels) {
    let rows = super::costs::rows(r, l);
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(out, "## {}\n\n{}\n", l.costs, l.costs_note);
    let _ = writeln!(out, "| {} |", super::costs::columns(l).join(" | "));
    let align: Vec<&str> = super::costs::NUMERIC
        .iter()
        .map(|&n| if n { "---:" } else { "---" })
        .collect();
    let _ = writeln!(out, "|{}|", align.join("|"));
    for row in rows {
        let cells = row.cells.map(|c| md_cell(&c));
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    out.push('\n');
}

fn kept_changes(out: &mut String, r: &RunReport, l: &Labels) {
    let _ = writeln!(out, "## {}\n", l.kept_changes);
    if r.kept_diff.trim().is_empty() {
        let _ = writeln!(out, "{}", l.none);
        return;
    }
    let fence = text::fence_for(&r.kept_diff);
    let _ = writeln!(out, "{fence}diff");
    out.push_str(&r.kept_diff);
    if !r.kept_diff.ends_with('\n') {
        out.push('\n');
    }
    let _ = writeln!(out, "{fence}");
}
