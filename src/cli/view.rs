//! The terminal view of a run: one plain line per event, on stderr, so that
//! stdout stays for `run: <folder>` and the final table. Colour only on a
//! terminal and never with `NO_COLOR`.

use std::io::IsTerminal;

use crate::event::Event;
use crate::report::Decision;

pub fn use_color() -> bool {
    std::env::var_os("NO_COLOR").is_none() && std::io::stderr().is_terminal()
}

pub fn diff_line(line: &str, color: bool) -> String {
    if !color {
        return line.to_string();
    }
    if line.starts_with("+++") || line.starts_with("---") {
        format!("\x1b[1m{line}\x1b[0m")
    } else if line.starts_with('+') {
        format!("\x1b[32m{line}\x1b[0m")
    } else if line.starts_with('-') {
        format!("\x1b[31m{line}\x1b[0m")
    } else if line.starts_with("@@") {
        format!("\x1b[36m{line}\x1b[0m")
    } else {
        line.to_string()
    }
}

pub struct View {
    color: bool,
    started: std::time::Instant,
    incumbent_sps: Option<f64>,
}

impl View {
    pub fn new(_language: &str) -> View {
        View { color: use_color(), started: std::time::Instant::now(), incumbent_sps: None }
    }

    fn paint(&self, code: &str, s: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }

    pub fn show(&mut self, ev: &Event) {
        let t = self.started.elapsed().as_secs();
        let stamp = format!("[{:02}:{:02}]", t / 60, t % 60);
        let line = match ev {
            Event::RunStarted { run_id, agent, .. } => format!("run {run_id} started, agent {agent}"),
            Event::RunResumed { run_id, completed_turns } => {
                format!("run {run_id} resumed after {completed_turns} completed turn(s)")
            }
            Event::Phase { phase, turn, detail } => match turn {
                Some(n) => format!("turn {n}: {phase} {detail}"),
                None => format!("{phase}: {detail}"),
            },
            Event::BaselineMeasured { median_sps, data_wait_share, ceiling_sps, cpu_count, device, .. } => {
                self.incumbent_sps = Some(*median_sps);
                format!(
                    "baseline {median_sps:.1} samples/sec, data_wait {}, ceiling {}, {} CPUs, {}",
                    data_wait_share.map(|s| format!("{:.0}%", s * 100.0)).unwrap_or("—".into()),
                    ceiling_sps.map(|c| format!("{c:.0}")).unwrap_or("—".into()),
                    cpu_count.unwrap_or(0),
                    device.as_deref().unwrap_or("?")
                )
            }
            Event::LowDataWait { share, advice } => format!(
                "data_wait is only {:.1}% of step time: DataLoader tuning cannot help much. Compute-side candidates: {}",
                share * 100.0,
                advice.join("; ")
            ),
            Event::TurnStarted { turn } => format!(
                "turn {turn}: incumbent {}",
                self.incumbent_sps.map(|s| format!("{s:.1} samples/sec")).unwrap_or_default()
            ),
            Event::AgentTool { turn, tool, input } => format!("turn {turn}:   tool {tool} {input}"),
            Event::AgentFinished { turn, ok, summary, info } => format!(
                "turn {turn}: agent {} in {:.1} s{}: {summary}",
                if *ok { "done" } else { "failed" },
                info.duration_ms as f64 / 1000.0,
                info.cost_usd.map(|c| format!(", ${c:.4}")).unwrap_or_default()
            ),
            Event::Measured { turn, role, pair, samples_per_sec } => {
                format!("turn {turn}:   pair {pair} {role:<9} {samples_per_sec:>9.1} samples/sec")
            }
            Event::TurnDecided { row } => {
                if row.decision == Decision::Kept {
                    self.incumbent_sps = row.after_sps;
                }
                let d = row.decision.as_str();
                let d = match row.decision {
                    Decision::Kept => self.paint("32;1", d),
                    Decision::Reverted => self.paint("33", d),
                    _ => self.paint("31", d),
                };
                format!("turn {}: {} — {d} ({}, {} runs)", row.turn, row.change, row.reason, row.runs)
            }
            Event::Stopped { reason } => format!("stopped: {reason}"),
            Event::FinalMeasured { speedup, ci, .. } => {
                format!("final: best vs baseline ×{speedup:.2} [{:.2}, {:.2}]", ci[0], ci[1])
            }
            Event::Warning { message } => self.paint("33", &format!("warning: {message}")),
            Event::ReportWritten { path } => format!("report: {path}"),
        };
        eprintln!("{stamp} {line}");
    }
}
