//! The report's memory and CPU of each state: the headline's baseline →
//! final line, and the table of every state (baseline, each measured turn's
//! candidate, final) shared by `report.md` and `report.html`. Reads only
//! [`RunReport::costs`]; the figures are made in [`crate::bench::cost`].

use crate::bench::cost::{bytes_text, StateCost};

use super::labels::Labels;
use super::model::RunReport;
use super::text::{self, DASH};

/// The headline's "workers 0 → 6 · workers' memory 0 MB → 930 MB (PSS) ·
/// CPU 0.98 → 1.93 cores (baseline → final)"; `None` without both states.
pub(crate) fn headline_item(r: &RunReport, l: &Labels) -> Option<(&'static str, String)> {
    let costs = r.costs.as_ref()?;
    let (a, b) = (costs.baseline.as_ref()?, costs.final_.as_ref()?);
    let mut parts = Vec::new();
    if a.num_workers.is_some() || b.num_workers.is_some() {
        parts.push(format!("{} {} → {}", l.col_workers, workers(a), workers(b)));
    }
    if a.workers_memory_bytes.is_some() || b.workers_memory_bytes.is_some() {
        parts.push(format!(
            "{} {} → {}",
            l.col_workers_memory,
            memory(a),
            memory(b)
        ));
    }
    if a.cpu_cores.is_some() || b.cpu_cores.is_some() {
        parts.push(format!(
            "{} {} → {} {}",
            l.col_cpu,
            cores(a.cpu_cores),
            cores(b.cpu_cores),
            l.cores_unit
        ));
    }
    (!parts.is_empty()).then(|| {
        (
            l.memory_cpu,
            format!("{} ({} → {})", parts.join(" · "), l.baseline, l.final_),
        )
    })
}

pub(crate) fn columns(l: &Labels) -> [&'static str; 8] {
    [
        l.col_state,
        l.col_change,
        l.col_decision,
        l.col_sps,
        l.col_workers,
        l.col_workers_memory,
        l.col_main_memory,
        l.col_cpu,
    ]
}

/// Which columns hold numbers (right-aligned).
pub(crate) const NUMERIC: [bool; 8] = [false, false, false, true, true, true, true, true];

/// One table row: its class (`baseline`, a decision, `final`) and cells.
pub(crate) struct Row {
    pub class: &'static str,
    pub cells: [String; 8],
}

/// The rows of the table: baseline, each measured turn in order, final.
/// Empty without figures.
pub(crate) fn rows(r: &RunReport, l: &Labels) -> Vec<Row> {
    let Some(costs) = r.costs.as_ref() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if let Some(c) = &costs.baseline {
        out.push(row(
            "baseline",
            l.baseline.into(),
            DASH.into(),
            DASH.into(),
            c,
            l,
        ));
    }
    for t in &costs.turns {
        let turn = r.turns.iter().find(|row| row.turn == t.turn);
        let change = turn
            .map(|row| row.change.trim().to_string())
            .filter(|c| !c.is_empty())
            .unwrap_or_else(|| DASH.into());
        let (class, decision) = match turn {
            Some(row) => (row.decision.as_str(), l.decision(row.decision).to_string()),
            None => ("", DASH.into()),
        };
        let state = l.state_turn.replace("{n}", &t.turn.to_string());
        out.push(row(class, state, change, decision, &t.cost, l));
    }
    if let Some(c) = &costs.final_ {
        out.push(row(
            "final",
            l.final_.into(),
            DASH.into(),
            DASH.into(),
            c,
            l,
        ));
    }
    out
}

fn row(
    class: &'static str,
    state: String,
    change: String,
    decision: String,
    c: &StateCost,
    l: &Labels,
) -> Row {
    let cpu = match (c.cpu_cores, c.usable_cores) {
        (Some(_), Some(u)) => format!(
            "{} / {} {}",
            cores(c.cpu_cores),
            cores(Some(u)),
            l.cores_unit
        ),
        (Some(_), None) => format!("{} {}", cores(c.cpu_cores), l.cores_unit),
        (None, _) => DASH.into(),
    };
    Row {
        class,
        cells: [
            state,
            change,
            decision,
            text::sps(Some(c.samples_per_sec)),
            workers(c),
            memory(c),
            c.main_rss_bytes.map_or_else(|| DASH.into(), bytes_text),
            cpu,
        ],
    }
}

/// One state's figures on one line, for `show --turn`: "workers 4 ·
/// workers' memory 620 MB (PSS) · training process (RSS) 1.10 GB · CPU
/// 1.71 / 2 cores" (the unknown ones left out).
pub(crate) fn summary(c: &StateCost, l: &Labels) -> String {
    let cells = row("", String::new(), String::new(), String::new(), c, l).cells;
    let named = [
        (l.col_workers, &cells[4]),
        (l.col_workers_memory, &cells[5]),
        (l.col_main_memory, &cells[6]),
        (l.col_cpu, &cells[7]),
    ];
    named
        .iter()
        .filter(|(_, v)| v.as_str() != DASH)
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(" · ")
}

fn workers(c: &StateCost) -> String {
    c.num_workers.map_or_else(|| DASH.into(), |n| n.to_string())
}

/// "930 MB (PSS)", "0 MB" without workers, a dash when unknown.
fn memory(c: &StateCost) -> String {
    match (c.workers_memory_bytes, c.workers_memory_kind.as_deref()) {
        (Some(b), Some(kind)) => format!("{} ({})", bytes_text(b), kind.to_ascii_uppercase()),
        (Some(b), None) => bytes_text(b),
        (None, _) => DASH.into(),
    }
}

/// Cores with two decimals; a whole count without them ("2").
fn cores(x: Option<f64>) -> String {
    match x.filter(|v| v.is_finite()) {
        Some(v) if (v - v.round()).abs() < 1e-9 && v >= 1.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.2}"),
        None => DASH.into(),
    }
}
