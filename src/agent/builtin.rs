//! The offline agent: deterministic, needs no network and no account, and is
//! the baseline any LLM agent must beat. It follows the article's order —
//! num_workers, pin_memory (CUDA only), prefetch_factor, persistent_workers —
//! and edits the DataLoader call in place through the syntax tree.
//!
//! num_workers climbs from the CPU count the harness reports, doubling while
//! data_wait is still a large share of the step and the last step up was
//! kept: items that wait on storage keep gaining past the core count, CPU-bound
//! ones stop paying at it and the first revert ends the climb. Everything it
//! knows comes from the measurements and the history rows, so a resumed run
//! proposes exactly what the interrupted one would have.

use std::path::Path;

use crate::bench::Measurement;
use crate::config::Workspace;
use crate::edit::{self, CallSite};
use crate::report::{AgentInfo, Decision, TurnRow};

use super::{AgentReport, TurnContext};

/// Climb num_workers only while data_wait is at least this share of the step.
const CLIMB_WHILE_DATA_WAIT_ABOVE: f64 = 0.2;

pub struct BuiltinAgent {
    /// The editable file holding the measured loader (from the entry's module).
    preferred_file: Option<String>,
}

/// One knob setting the agent would write.
#[derive(Clone, Debug, PartialEq)]
pub struct Proposal {
    pub knob: &'static str,
    pub value: String,
    pub why: String,
}

impl BuiltinAgent {
    pub fn new(ws: &Workspace) -> BuiltinAgent {
        let preferred_file = ws.file.bench.entry.as_ref().and_then(|e| {
            let module = e.split(':').next()?;
            let f = format!("{}.py", module.replace('.', "/"));
            ws.file.project.editable.contains(&f).then_some(f)
        });
        BuiltinAgent { preferred_file }
    }

    pub fn propose(&mut self, ctx: &TurnContext<'_>) -> AgentReport {
        let started = std::time::Instant::now();
        let mut report = AgentReport {
            info: AgentInfo { backend: "builtin".into(), ..Default::default() },
            ..Default::default()
        };
        let target = match self.find_site(ctx.project_root, &ctx.ws.file.project.editable) {
            Ok(t) => t,
            Err(e) => {
                report.failure = Some(e);
                return report;
            }
        };
        let (file, src, site) = target;
        let knobs: Vec<&str> = ctx.policy.loop_.knobs.iter().map(|s| s.as_str()).collect();
        let Some(p) = next_proposal(ctx.incumbent, &site, ctx.history, &knobs, ctx.policy.decision.stop_when_data_wait_below)
        else {
            report.exhausted = true;
            report.summary = "no candidates left".into();
            return report;
        };
        match edit::set_kwarg(&src, &site, p.knob, Some(&p.value)) {
            Ok(new_src) => {
                if let Err(e) = crate::store::write_atomic(&ctx.project_root.join(&file), new_src.as_bytes()) {
                    report.failure = Some(format!("cannot write {file}: {e}"));
                } else {
                    report.summary = format!("set {}={} in {file}:{} ({})", p.knob, p.value, site.line, p.why);
                }
            }
            Err(e) => report.failure = Some(format!("cannot edit {file}:{}: {e}", site.line)),
        }
        report.info.exit_code = Some(if report.failure.is_some() { 1 } else { 0 });
        report.info.duration_ms = started.elapsed().as_millis() as u64;
        report
    }

    /// The DataLoader call to tune: the first in the entry's module, else the
    /// first in any editable file.
    fn find_site(&self, root: &Path, editable: &[String]) -> Result<(String, String, CallSite), String> {
        let mut order: Vec<&String> = Vec::new();
        if let Some(p) = &self.preferred_file {
            order.push(p);
        }
        order.extend(editable.iter().filter(|f| Some(*f) != self.preferred_file.as_ref()));
        for f in order {
            if !f.ends_with(".py") {
                continue;
            }
            let src = std::fs::read_to_string(root.join(f)).map_err(|e| format!("cannot read {f}: {e}"))?;
            let sites = edit::scan_source(f, &src).map_err(|e| format!("cannot parse {f}: {e}"))?;
            if let Some(site) = sites.into_iter().next() {
                return Ok((f.clone(), src, site));
            }
        }
        Err("no DataLoader call found in the editable files".into())
    }
}

/// What was tried: (knob, value written, decision), from the history rows'
/// one-line changes ("num_workers 0 → 4").
fn tried(history: &[TurnRow]) -> Vec<(String, String, Decision)> {
    history
        .iter()
        .filter_map(|r| {
            let knob = r.change.split_whitespace().next()?.to_string();
            let value = r.change.rsplit("→ ").next()?.trim().to_string();
            Some((knob, value, r.decision))
        })
        .collect()
}

fn current_value(site: &CallSite, m: &Measurement, knob: &str) -> Option<String> {
    if let Some(v) = m.loader.get(knob) {
        return Some(match v {
            serde_json::Value::Bool(true) => "True".into(),
            serde_json::Value::Bool(false) => "False".into(),
            serde_json::Value::Null => return None,
            other => other.to_string(),
        });
    }
    site.kwargs.get(knob).and_then(|v| v.as_str()).map(|s| s.to_string())
}

/// The next setting to try, or `None` when the candidates are exhausted.
pub fn next_proposal(
    incumbent: &Measurement,
    site: &CallSite,
    history: &[TurnRow],
    knobs: &[&str],
    stop_when_data_wait_below: f64,
) -> Option<Proposal> {
    let tried = tried(history);
    let was_tried = |k: &str, v: &str| tried.iter().any(|(tk, tv, _)| tk == k && tv == v);
    // Ranks share the machine's cores: each rank's loader gets its share.
    let ranks = incumbent.world_size.unwrap_or(1).max(1) as u64;
    let cpus = (incumbent.cpu_count.unwrap_or(1).max(1) as u64 / ranks).max(1);
    let share = incumbent.data_wait_share.unwrap_or(1.0);
    let nw: u64 = current_value(site, incumbent, "num_workers")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);

    if knobs.contains(&"num_workers") && share >= CLIMB_WHILE_DATA_WAIT_ABOVE.max(stop_when_data_wait_below) {
        let last = tried.iter().rev().find(|(k, _, _)| k == "num_workers");
        let climbing = last.is_none_or(|(_, _, d)| *d == Decision::Kept);
        // One worker only overlaps loading with the step; two is the first real gain.
        let next = if nw == 0 { cpus.max(2) } else { nw * 2 };
        let cap = (cpus * 8).clamp(8, 64);
        if climbing && next <= cap && !was_tried("num_workers", &next.to_string()) {
            let why = if nw == 0 {
                format!("data_wait is {:.0}% of the step; start at the core count ({cpus})", share * 100.0)
            } else {
                format!("data_wait still {:.0}% and the last step up paid", share * 100.0)
            };
            return Some(Proposal { knob: "num_workers", value: next.to_string(), why });
        }
    }
    if knobs.contains(&"pin_memory") && incumbent.is_cuda() {
        let cur = current_value(site, incumbent, "pin_memory");
        if cur.as_deref() != Some("True") && !was_tried("pin_memory", "True") {
            return Some(Proposal {
                knob: "pin_memory",
                value: "True".into(),
                why: "CUDA device: copies from pinned memory are faster".into(),
            });
        }
    }
    if nw > 0 {
        if knobs.contains(&"prefetch_factor") && share >= stop_when_data_wait_below {
            let cur: u64 = current_value(site, incumbent, "prefetch_factor").and_then(|v| v.parse().ok()).unwrap_or(2);
            let next = (cur * 2).max(4);
            if !tried.iter().any(|(k, _, _)| k == "prefetch_factor") && next <= 16 {
                return Some(Proposal {
                    knob: "prefetch_factor",
                    value: next.to_string(),
                    why: "workers run ahead by more batches".into(),
                });
            }
        }
        if knobs.contains(&"persistent_workers") {
            let cur = current_value(site, incumbent, "persistent_workers");
            if cur.as_deref() != Some("True") && !was_tried("persistent_workers", "True") {
                return Some(Proposal {
                    knob: "persistent_workers",
                    value: "True".into(),
                    why: "keep workers alive across epochs instead of restarting them".into(),
                });
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(src: &str) -> CallSite {
        edit::scan_source("t.py", src).unwrap().remove(0)
    }

    fn meas(nw: u64, share: f64, cuda: bool) -> Measurement {
        let mut m = Measurement {
            samples_per_sec: 100.0,
            data_wait_share: Some(share),
            cpu_count: Some(2),
            device: Some(if cuda { "cuda:0" } else { "cpu" }.into()),
            ..Default::default()
        };
        m.loader.insert("num_workers".into(), nw.into());
        m
    }

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

    const ALL: [&str; 4] = ["num_workers", "pin_memory", "prefetch_factor", "persistent_workers"];

    #[test]
    fn starts_num_workers_at_the_core_count() {
        let s = site("DataLoader(ds, batch_size=8)\n");
        let p = next_proposal(&meas(0, 0.9, false), &s, &[], &ALL, 0.1).unwrap();
        assert_eq!((p.knob, p.value.as_str()), ("num_workers", "2"));
    }

    #[test]
    fn doubles_while_kept_and_waiting_then_moves_on_after_a_revert() {
        let s = site("DataLoader(ds, num_workers=2)\n");
        let h = vec![row(1, "num_workers (default) → 2", Decision::Kept)];
        let p = next_proposal(&meas(2, 0.6, false), &s, &h, &ALL, 0.1).unwrap();
        assert_eq!(p.value, "4");
        let s4 = site("DataLoader(ds, num_workers=4)\n");
        let h2 = [h.clone(), vec![row(2, "num_workers 4 → 8", Decision::Reverted)]].concat();
        let p = next_proposal(&meas(4, 0.6, false), &s4, &h2, &ALL, 0.1).unwrap();
        assert_eq!(p.knob, "prefetch_factor");
    }

    #[test]
    fn ranks_share_the_cores() {
        let s = site("DataLoader(ds)\n");
        let mut m = meas(0, 0.9, false);
        m.cpu_count = Some(8);
        assert_eq!(next_proposal(&m, &s, &[], &ALL, 0.1).unwrap().value, "8");
        m.world_size = Some(4);
        assert_eq!(next_proposal(&m, &s, &[], &ALL, 0.1).unwrap().value, "2");
    }

    #[test]
    fn pin_memory_only_on_cuda() {
        let s = site("DataLoader(ds, num_workers=2)\n");
        let h = vec![row(1, "num_workers 2 → 4", Decision::Reverted)];
        let cpu = next_proposal(&meas(2, 0.5, false), &s, &h, &ALL, 0.1).unwrap();
        assert_ne!(cpu.knob, "pin_memory");
        let gpu = next_proposal(&meas(2, 0.5, true), &s, &h, &ALL, 0.1).unwrap();
        assert_eq!(gpu.knob, "pin_memory");
    }

    #[test]
    fn exhausts_and_respects_the_policy_knobs() {
        let s = site("DataLoader(ds, num_workers=2, persistent_workers=True)\n");
        let h = vec![
            row(1, "num_workers 2 → 4", Decision::Reverted),
            row(2, "prefetch_factor (default) → 4", Decision::Reverted),
        ];
        assert_eq!(next_proposal(&meas(2, 0.5, false), &s, &h, &ALL, 0.1), None);
        let s0 = site("DataLoader(ds)\n");
        assert_eq!(next_proposal(&meas(0, 0.9, false), &s0, &[], &["pin_memory"], 0.1), None);
    }

    #[test]
    fn little_data_wait_means_no_more_workers() {
        let s = site("DataLoader(ds, num_workers=2)\n");
        let h = vec![row(1, "num_workers 0 → 2", Decision::Kept)];
        let p = next_proposal(&meas(2, 0.05, false), &s, &h, &ALL, 0.1).unwrap();
        assert_eq!(p.knob, "persistent_workers");
    }
}
