//! The terminal view of a run. It only listens to events, and writes to
//! stderr so that stdout stays for `run: <folder>` and the final table.
//!
//! Two modes:
//! - live, when stderr is a terminal (and `TERM` is not `dumb`): the lasting
//!   lines (baseline, the agent's summary, each turn's decision, warnings,
//!   the stop, the final measurement) scroll up, and one status line under
//!   them is redrawn in place — turn, phase (baseline, agent, measuring pair
//!   k of n, deciding, final), elapsed time, the incumbent's samples/sec and
//!   the agent's last tool call. A ticker redraws it every second so the clock
//!   moves while a bench runs.
//! - plain, anywhere else (CI, pipes, files): one line per event, stable
//!   wording that scripts and tests can grep.
//!
//! Colour only on a terminal and never with `NO_COLOR`. Words follow the
//! policy's `language` (English or Japanese); what the loop itself says
//! (reasons, details, advice) is shown as it comes.

use std::io::{IsTerminal, Write};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::review_view::char_width;
use crate::event::{Event, TimeLeft};
use crate::report::{labels_for, Labels};
use crate::turn::Decision;
use crate::words::ViewWords as Words;

/// Colour on stderr: a terminal, and no `NO_COLOR`.
pub fn use_color() -> bool {
    no_color_unset() && std::io::stderr().is_terminal()
}

/// Colour on stdout (for `show`): a terminal, and no `NO_COLOR`.
pub fn use_color_stdout() -> bool {
    no_color_unset() && std::io::stdout().is_terminal()
}

fn no_color_unset() -> bool {
    // https://no-color.org: set to anything but empty means no colour.
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Whether stderr can take a status line redrawn in place.
pub fn live_terminal() -> bool {
    std::io::stderr().is_terminal() && std::env::var("TERM").map_or(true, |t| t != "dumb")
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

fn fill(template: &str, vars: &[(&str, &str)]) -> String {
    let mut s = template.to_string();
    for (k, v) in vars {
        s = s.replace(&format!("{{{k}}}"), v);
    }
    s
}

/// What the status line shows; updated by events, drawn by [`Inner::draw`].
#[derive(Default)]
struct Status {
    /// Drawn at all: from the first event to the report (or the stop of a
    /// failed run), so nothing is left under the final output.
    active: bool,
    turn: Option<u32>,
    phase: String,
    detail: String,
    /// Measurements of this turn so far.
    runs_done: u32,
    /// The pairs a comparison may take now, where load raised the cap
    /// (`Event::PairsAdded`); `None`: the view's `max_pairs`.
    pairs_cap: Option<u32>,
    last_measure: Option<(String, f64)>,
    last_tool: Option<String>,
    /// The time-left estimate of the turn's start, and when it came: the
    /// status line counts it down until the next turn's.
    time_left: Option<(TimeLeft, Instant)>,
}

struct Inner {
    out: Box<dyn Write + Send>,
    live: bool,
    color: bool,
    ja: bool,
    words: &'static Words,
    labels: &'static Labels,
    started: Instant,
    incumbent_sps: Option<f64>,
    /// `decision.max_repeats`: the most pairs one turn can take.
    max_pairs: Option<u32>,
    status: Status,
    /// A status line is on the screen (the cursor is at its end).
    status_shown: bool,
    /// Terminal columns; `None` asks the terminal each time.
    width: Option<usize>,
}

/// The terminal view; see the module docs. Feed it every event with [`View::show`].
pub struct View {
    inner: Arc<Mutex<Inner>>,
    ticker: Option<(Sender<()>, JoinHandle<()>)>,
}

impl View {
    /// The view on stderr: live on a terminal, plain lines elsewhere.
    pub fn new(language: &str) -> View {
        let live = live_terminal();
        View::with_output(
            language,
            Box::new(std::io::stderr()),
            live,
            use_color(),
            None,
            live,
        )
    }

    /// A view writing to `out`. `width` fixes the status line's width (tests);
    /// `tick` starts the once-a-second redraw of the status line.
    pub fn with_output(
        language: &str,
        out: Box<dyn Write + Send>,
        live: bool,
        color: bool,
        width: Option<usize>,
        tick: bool,
    ) -> View {
        let ja = labels_for(language).lang == "ja";
        let inner = Arc::new(Mutex::new(Inner {
            out,
            live,
            color,
            ja,
            words: &crate::words::for_language(language).view,
            labels: labels_for(language),
            started: Instant::now(),
            incumbent_sps: None,
            max_pairs: None,
            status: Status::default(),
            status_shown: false,
            width,
        }));
        let ticker = (live && tick).then(|| {
            let (tx, rx) = mpsc::channel::<()>();
            let shared = Arc::clone(&inner);
            let handle = std::thread::spawn(move || loop {
                match rx.recv_timeout(Duration::from_secs(1)) {
                    Err(RecvTimeoutError::Timeout) => {
                        if let Ok(mut i) = shared.lock() {
                            if i.status.active {
                                i.draw();
                            }
                        }
                    }
                    _ => return,
                }
            });
            (tx, handle)
        });
        View { inner, ticker }
    }

    /// The most pairs one turn can take (the policy's `decision.max_repeats`),
    /// for "pair k of n".
    pub fn with_max_pairs(self, n: u32) -> View {
        if let Ok(mut i) = self.inner.lock() {
            i.max_pairs = Some(n);
        }
        self
    }

    pub fn show(&mut self, ev: &Event) {
        if let Ok(mut i) = self.inner.lock() {
            i.show(ev);
        }
    }
}

impl Drop for View {
    fn drop(&mut self) {
        if let Some((tx, handle)) = self.ticker.take() {
            drop(tx);
            let _ = handle.join();
        }
        if let Ok(mut i) = self.inner.lock() {
            i.clear_status();
            let _ = i.out.flush();
        }
    }
}

impl Inner {
    fn paint(&self, code: &str, s: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }

    fn stamp(&self) -> String {
        let t = self.started.elapsed().as_secs();
        format!("[{:02}:{:02}]", t / 60, t % 60)
    }

    fn turn_prefix(&self, n: u32) -> String {
        format!("{} {n}:", self.words.turn)
    }

    /// The pairs the comparison under way may take: the view's `max_pairs`,
    /// or the cap load raised it to.
    fn pairs_total(&self) -> Option<u32> {
        self.status.pairs_cap.or(self.max_pairs)
    }

    fn pair_of(&self, k: u32, total: Option<u32>) -> String {
        let total = total.map_or("?".to_string(), |n| n.to_string());
        fill(
            self.words.pair_of,
            &[("k", &k.to_string()), ("total", &total)],
        )
    }

    fn phase_word(&self, phase: &str) -> String {
        let w = self.words;
        match phase {
            "baseline" => w.phase_baseline,
            "agent" => w.phase_agent,
            "measuring" => w.phase_measuring,
            "deciding" => w.phase_deciding,
            "final" => w.phase_final,
            other => other,
        }
        .to_string()
    }

    fn show(&mut self, ev: &Event) {
        self.update_status(ev);
        let lasting = self.line(ev);
        if self.live {
            if let Some(line) = lasting {
                self.clear_status();
                let stamp = self.stamp();
                let _ = writeln!(self.out, "{} {line}", self.paint("2", &stamp));
            }
            if self.status.active {
                self.draw();
            } else {
                self.clear_status();
            }
        } else {
            let line = match lasting {
                Some(l) => Some(l),
                None => self.plain_only_line(ev),
            };
            if let Some(line) = line {
                let _ = writeln!(self.out, "{} {line}", self.stamp());
            }
        }
        let _ = self.out.flush();
    }

    fn update_status(&mut self, ev: &Event) {
        let st = &mut self.status;
        match ev {
            Event::RunStarted { .. } | Event::RunResumed { .. } => st.active = true,
            Event::Phase {
                phase,
                turn,
                detail,
            } => {
                st.active = true;
                if st.phase != *phase || st.turn != *turn {
                    st.last_measure = None;
                }
                st.phase = phase.clone();
                st.turn = *turn;
                st.detail = detail.clone();
                if phase == "measuring" {
                    st.runs_done = 0;
                    st.pairs_cap = None;
                }
                if phase != "agent" {
                    st.last_tool = None;
                }
            }
            Event::TurnStarted { turn, time_left } => {
                st.time_left = time_left.map(|t| (t, Instant::now()));
                st.turn = Some(*turn);
                st.phase.clear();
                st.detail.clear();
                st.runs_done = 0;
                st.pairs_cap = None;
                st.last_tool = None;
                st.last_measure = None;
            }
            Event::PairsAdded { up_to, .. } => st.pairs_cap = Some(*up_to),
            Event::AgentTool { tool, input, .. } => {
                st.last_tool = Some(if input.is_empty() {
                    tool.clone()
                } else {
                    format!("{tool} {input}")
                });
            }
            Event::Measured {
                role,
                samples_per_sec,
                ..
            }
            | Event::CalibrationRun {
                role,
                samples_per_sec,
                ..
            } => {
                st.runs_done += 1;
                st.last_measure = Some((role.clone(), *samples_per_sec));
            }
            Event::BaselineMeasured { median_sps, .. } => self.incumbent_sps = Some(*median_sps),
            Event::TurnDecided { row } if row.decision.is_kept() => {
                self.incumbent_sps = row.after_sps.or(self.incumbent_sps);
            }
            // A failed run's Stopped is its last word; a finished run goes on
            // to the final measurement (a Phase brings the line back).
            Event::Stopped { .. } | Event::ReportWritten { .. } => {
                st.active = false;
                // It counted turns that will not come.
                st.time_left = None;
            }
            _ => {}
        }
    }

    /// The lasting line of an event, in both modes; `None` for the events
    /// that only move the status line on a terminal.
    fn line(&self, ev: &Event) -> Option<String> {
        let w = self.words;
        Some(match ev {
            Event::RunStarted { run_id, agent, .. } => {
                fill(w.run_started, &[("id", run_id), ("agent", agent)])
            }
            Event::RunResumed {
                run_id,
                completed_turns,
            } => fill(
                w.run_resumed,
                &[("id", run_id), ("n", &completed_turns.to_string())],
            ),
            Event::BaselineMeasured {
                median_sps,
                data_wait_share,
                ceiling_sps,
                cpu_count,
                device,
                ..
            } => fill(
                w.baseline_line,
                &[
                    ("sps", &format!("{median_sps:.1}")),
                    (
                        "dw",
                        &data_wait_share
                            .map(|s| format!("{:.0}%", s * 100.0))
                            .unwrap_or("—".into()),
                    ),
                    (
                        "ceil",
                        &ceiling_sps.map(|c| format!("{c:.0}")).unwrap_or("—".into()),
                    ),
                    (
                        "cpus",
                        &fill(w.cpus, &[("n", &cpu_count.unwrap_or(0).to_string())]),
                    ),
                    ("dev", device.as_deref().unwrap_or("?")),
                ],
            ),
            Event::WindowWidened { configured, steps } => fill(
                w.window_widened,
                &[
                    ("steps", &steps.to_string()),
                    ("configured", &configured.to_string()),
                ],
            ),
            Event::WindowNarrowed { configured, steps } => fill(
                w.window_narrowed,
                &[
                    ("steps", &steps.to_string()),
                    ("configured", &configured.to_string()),
                ],
            ),
            Event::ProfileUnavailable { reason } => {
                self.paint("33", &fill(w.profile_unavailable, &[("reason", reason)]))
            }
            Event::LowDataWait { share, advice } => fill(
                w.low_data_wait,
                &[
                    ("pct", &format!("{:.1}", share * 100.0)),
                    ("list", &advice.join("; ")),
                ],
            ),
            Event::AgentFinished {
                turn,
                ok,
                summary,
                info,
            } => {
                let state = if *ok {
                    w.agent_done.to_string()
                } else {
                    self.paint("31", w.agent_failed)
                };
                format!(
                    "{} {}",
                    self.turn_prefix(*turn),
                    fill(
                        w.agent_line,
                        &[
                            ("state", &state),
                            ("secs", &format!("{:.1}", info.duration_ms as f64 / 1000.0)),
                            (
                                "cost",
                                &info
                                    .cost_usd
                                    .map(|c| format!(", ${c:.4}"))
                                    .unwrap_or_default()
                            ),
                            ("summary", summary),
                        ],
                    )
                )
            }
            Event::TurnDecided { row } => {
                // English keeps the report.json words (`no_change`), as before.
                let label = if self.ja {
                    self.labels.decision(row.decision)
                } else {
                    row.decision.as_str()
                };
                let d = match row.decision {
                    Decision::Kept | Decision::KeptCheaper => self.paint("32;1", label),
                    Decision::Reverted => self.paint("33", label),
                    Decision::NoChange => self.paint("2", label),
                    _ => self.paint("31", label),
                };
                format!(
                    "{} {} — {d} ({}, {} {})",
                    self.turn_prefix(row.turn),
                    row.change,
                    row.reason,
                    row.runs,
                    w.runs
                )
            }
            Event::Stopped { reason } => fill(w.stopped, &[("reason", reason)]),
            Event::FinalMeasured { speedup, ci, .. } => fill(
                w.final_line,
                &[
                    ("x", &format!("{speedup:.2}")),
                    ("lo", &format!("{:.2}", ci[0])),
                    ("hi", &format!("{:.2}", ci[1])),
                ],
            ),
            Event::Warning { message } => self.paint("33", &format!("{}{message}", w.warning)),
            Event::MachineBusy {
                others,
                cores,
                limit_s,
                ..
            } => self.paint(
                "33",
                &fill(
                    w.machine_busy,
                    &[
                        ("others", &format!("{others:.1}")),
                        ("cores", &format!("{cores:.0}")),
                        ("limit", &limit_s.to_string()),
                    ],
                ),
            ),
            Event::MachineWaited {
                waited_s, quiet, ..
            } => fill(
                if *quiet {
                    w.machine_quiet
                } else {
                    w.machine_still_busy
                },
                &[("secs", &format!("{waited_s:.0}"))],
            ),
            Event::PairSetAside {
                pair,
                candidate_others,
                incumbent_others,
                ..
            } => {
                let c = |o: &Option<f64>| o.map_or("?".into(), |o| format!("{o:.1}"));
                fill(
                    w.pair_set_aside,
                    &[
                        ("k", &pair.to_string()),
                        ("c", &c(candidate_others)),
                        ("i", &c(incumbent_others)),
                    ],
                )
            }
            Event::PairsAdded {
                pairs,
                up_to,
                median,
                ..
            } => fill(
                w.pairs_added,
                &[
                    ("k", &pairs.to_string()),
                    ("x", &format!("{median:.2}")),
                    ("total", &up_to.to_string()),
                ],
            ),
            Event::ReportWritten { path } => fill(w.report, &[("path", path)]),
            Event::Phase { .. }
            | Event::TurnStarted { .. }
            | Event::AgentTool { .. }
            | Event::Measured { .. }
            | Event::CalibrationRun { .. } => return None,
        })
    }

    /// The plain mode's line for the events a terminal shows on the status line.
    fn plain_only_line(&self, ev: &Event) -> Option<String> {
        let w = self.words;
        Some(match ev {
            Event::Phase {
                phase,
                turn,
                detail,
            } => {
                let phase = self.phase_word(phase);
                // A phase without detail ("deciding") ends at its word.
                match turn {
                    Some(n) => format!("{} {phase} {detail}", self.turn_prefix(*n))
                        .trim_end()
                        .to_string(),
                    None if detail.is_empty() => phase,
                    None => format!("{phase}: {detail}"),
                }
            }
            Event::TurnStarted { turn, time_left } => {
                let mut line = format!(
                    "{} {} {}",
                    self.turn_prefix(*turn),
                    w.incumbent,
                    self.incumbent_sps
                        .map(|s| format!("{s:.1} samples/sec"))
                        .unwrap_or_default()
                );
                if let Some(t) = time_left {
                    line.push_str(&format!(" · {}", self.time_left_text(t, 0.0)));
                }
                line
            }
            Event::AgentTool { turn, tool, input } => {
                format!("{}   tool {tool} {input}", self.turn_prefix(*turn))
            }
            Event::Measured {
                turn,
                role,
                pair,
                samples_per_sec,
            } => format!(
                "{}   {} {role:<9} {samples_per_sec:>9.1} samples/sec",
                self.turn_prefix(*turn),
                self.pair_of(*pair, self.pairs_total())
            ),
            Event::CalibrationRun {
                role,
                pair,
                samples_per_sec,
            } => format!(
                "  {} {role:<9} {samples_per_sec:>10.1} samples/sec",
                self.pair_of(*pair, self.max_pairs)
            ),
            _ => return None,
        })
    }

    /// The status line's text, before fitting it to the terminal: turn ·
    /// phase · pair k of n (or the phase's detail) · elapsed · incumbent ·
    /// the agent's last tool call (or the last measurement). Longest last,
    /// so a narrow terminal cuts what matters least.
    fn status_text(&self) -> String {
        let w = self.words;
        let st = &self.status;
        let mut parts: Vec<String> = Vec::new();
        if let Some(t) = st
            .turn
            .filter(|_| st.phase != "final" && st.phase != "baseline")
        {
            parts.push(format!("{} {t}", w.turn));
        }
        if !st.phase.is_empty() {
            parts.push(self.phase_word(&st.phase));
        }
        let mut tail = None;
        match st.phase.as_str() {
            "measuring" => {
                let total = self.pairs_total();
                let k = (st.runs_done / 2 + 1).min(total.unwrap_or(u32::MAX));
                parts.push(self.pair_of(k, total));
                if let Some((role, v)) = &st.last_measure {
                    let role = if role == "incumbent" {
                        w.incumbent
                    } else {
                        role.as_str()
                    };
                    tail = Some(format!("{}: {role} {v:.1}", w.last));
                }
            }
            "agent" => {
                tail = st
                    .last_tool
                    .clone()
                    .or_else(|| (!st.detail.is_empty()).then(|| st.detail.clone()))
            }
            "deciding" => {}
            _ => {
                if !st.detail.is_empty() {
                    parts.push(st.detail.clone());
                }
            }
        }
        let t = self.started.elapsed().as_secs();
        parts.push(format!("{:02}:{:02}", t / 60, t % 60));
        if let Some((left, since)) = &st.time_left {
            parts.push(self.time_left_text(left, since.elapsed().as_secs_f64()));
        }
        if let Some(s) = self.incumbent_sps {
            parts.push(format!("{} {s:.1} samples/sec", w.incumbent));
        }
        parts.extend(tail);
        parts.join(" · ")
    }

    /// The estimate as words, `spent` seconds after it was made: "estimate:
    /// about 4 min left, at most 7 min". About rounds to the minute, at most
    /// rounds up; under a minute is "< 1 min".
    fn time_left_text(&self, t: &TimeLeft, spent: f64) -> String {
        let unit = if self.ja { "分" } else { "min" };
        let minutes = |s: f64, up: bool| {
            let s = (s - spent).max(0.0);
            if s < 60.0 {
                format!("< 1 {unit}")
            } else {
                let m = if up {
                    (s / 60.0).ceil()
                } else {
                    (s / 60.0).round()
                };
                format!("{m:.0} {unit}")
            }
        };
        fill(
            self.words.time_left,
            &[
                ("about", &minutes(t.about_s, false)),
                ("most", &minutes(t.at_most_s, true)),
            ],
        )
    }

    fn draw(&mut self) {
        let width = self.width.or_else(terminal_width).unwrap_or(100).max(20);
        // One column short of the edge: a full line would wrap on some terminals.
        let text = fit(&self.status_text(), width - 1);
        let text = self.paint("36", &text);
        let _ = write!(self.out, "\r\x1b[2K{text}");
        let _ = self.out.flush();
        self.status_shown = true;
    }

    fn clear_status(&mut self) {
        if self.live && self.status_shown {
            let _ = write!(self.out, "\r\x1b[2K");
            self.status_shown = false;
        }
    }
}

/// `s` on one line, cut to `width` terminal columns (an ellipsis marks a cut).
fn fit(s: &str, width: usize) -> String {
    let one: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let total: usize = one.chars().map(char_width).sum();
    if total <= width {
        return one;
    }
    let mut out = String::new();
    let mut used = 0;
    for c in one.chars() {
        let cw = char_width(c);
        if used + cw + 1 > width {
            break;
        }
        out.push(c);
        used += cw;
    }
    out.push('…');
    out
}

/// The terminal's width in columns, from stderr.
fn terminal_width() -> Option<usize> {
    // SAFETY: TIOCGWINSZ fills a plain struct; a failure leaves it zeroed.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::ioctl(libc::STDERR_FILENO, libc::TIOCGWINSZ, &mut ws) } == 0;
    if ok && ws.ws_col > 0 {
        return Some(ws.ws_col as usize);
    }
    std::env::var("COLUMNS").ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::review_view::display_width;
    use crate::turn::{AgentInfo, TurnRow};

    /// A writer the test can read back.
    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);

    impl Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Buf {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    fn row(decision: Decision) -> TurnRow {
        TurnRow {
            turn: 1,
            change: "num_workers (default) → 2".into(),
            file: Some("train.py".into()),
            before_sps: Some(400.0),
            after_sps: Some(800.0),
            ratio: Some(2.0),
            ratio_ci: Some([1.9, 2.1]),
            runs: 4,
            decision,
            reason: "faster".into(),
            agent: AgentInfo::default(),
            candidate_samples: vec![],
            incumbent_samples: vec![],
            data_wait_share: None,
            confirmation: None,
        }
    }

    /// One turn of a run, as the loop emits it.
    fn a_turn() -> Vec<Event> {
        let phase = |p: &str, t: Option<u32>, d: &str| Event::Phase {
            phase: p.into(),
            turn: t,
            detail: d.into(),
        };
        let measured = |role: &str, pair: u32, v: f64| Event::Measured {
            turn: 1,
            role: role.into(),
            pair,
            samples_per_sec: v,
        };
        vec![
            Event::RunStarted {
                run_id: "r1".into(),
                project: "/p".into(),
                agent: "claude".into(),
                policy: "p.toml".into(),
                world_size: 1,
            },
            phase("baseline", None, "throughput run 1 of 3"),
            Event::BaselineMeasured {
                samples: vec![400.0],
                median_sps: 400.0,
                data_wait_share: Some(0.9),
                ceiling_sps: Some(5000.0),
                cpu_count: Some(2),
                device: Some("cpu".into()),
                torch_version: None,
            },
            Event::TurnStarted {
                turn: 1,
                time_left: None,
            },
            phase("agent", Some(1), "claude"),
            Event::AgentTool {
                turn: 1,
                tool: "Edit".into(),
                input: "train.py: `a` → `b`".into(),
            },
            Event::AgentFinished {
                turn: 1,
                info: AgentInfo::default(),
                ok: true,
                summary: "set num_workers=2".into(),
            },
            phase(
                "measuring",
                Some(1),
                "num_workers (default) → 2 vs incumbent",
            ),
            measured("incumbent", 1, 401.0),
            measured("candidate", 1, 799.0),
            measured("candidate", 2, 801.0),
            phase("deciding", Some(1), ""),
            Event::TurnDecided {
                row: row(Decision::Kept),
            },
            Event::Stopped {
                reason: "iteration limit (1) reached".into(),
            },
            phase("final", None, "best vs baseline, 3 interleaved pairs"),
            Event::ReportWritten {
                path: "runs/r1/report.md".into(),
            },
        ]
    }

    fn run(language: &str, live: bool, color: bool, events: &[Event]) -> String {
        let buf = Buf::default();
        let mut v = View::with_output(
            language,
            Box::new(buf.clone()),
            live,
            color,
            Some(60),
            false,
        )
        .with_max_pairs(4);
        for ev in events {
            v.show(ev);
        }
        drop(v);
        buf.text()
    }

    #[test]
    fn plain_mode_is_one_stable_line_per_event() {
        let out = run("en", false, false, &a_turn());
        assert!(!out.contains('\x1b') && !out.contains('\r'), "{out:?}");
        for want in [
            "run r1 started, agent claude",
            "baseline: throughput run 1 of 3",
            "baseline 400.0 samples/sec, data_wait 90%, ceiling 5000, 2 CPUs, cpu",
            "turn 1: incumbent 400.0 samples/sec",
            "turn 1: agent claude",
            "turn 1:   tool Edit train.py: `a` → `b`",
            "turn 1: agent done in 0.0 s: set num_workers=2",
            "turn 1:   pair 2 of 4 candidate     801.0 samples/sec",
            "turn 1: num_workers (default) → 2 — kept (faster, 4 runs)",
            "stopped: iteration limit (1) reached",
            "report: runs/r1/report.md",
        ] {
            assert!(out.contains(want), "missing {want:?} in\n{out}");
        }
        assert_eq!(out.lines().count(), a_turn().len());
        assert!(out.lines().all(|l| l.starts_with("[00:00] ")), "{out}");
        // A phase without detail ends at its word, no trailing blank.
        assert!(out.contains("turn 1: deciding\n"), "{out}");
        assert!(out.lines().all(|l| l == l.trim_end()), "{out:?}");
    }

    #[test]
    fn the_time_left_estimate_shows_at_each_turn_start_until_the_stop() {
        let with_estimate = |about_s: f64, at_most_s: f64| {
            let mut events = a_turn();
            for ev in &mut events {
                if let Event::TurnStarted { time_left, .. } = ev {
                    *time_left = Some(TimeLeft {
                        about_s,
                        at_most_s,
                        turns_left: 5,
                        run_s: 4.2,
                    });
                }
            }
            events
        };
        let events = with_estimate(250.0, 421.0);
        let out = run("en", false, false, &events);
        // About rounds to the minute, at most rounds up.
        assert!(
            out.contains(
                "turn 1: incumbent 400.0 samples/sec · estimate: about 4 min left, at most 8 min"
            ),
            "{out}"
        );
        let out = run("ja", false, false, &with_estimate(20.0, 61.0));
        assert!(
            out.contains("見積もり: 残り約 < 1 分（長くても 2 分）"),
            "{out}"
        );
        // On a terminal the status line carries it through the turn, and
        // drops it at the stop (it counted turns that will not come).
        let buf = Buf::default();
        let mut v = View::with_output("en", Box::new(buf.clone()), true, false, Some(200), false)
            .with_max_pairs(4);
        let mut status_after = Vec::new();
        for ev in &events {
            v.show(ev);
            let t = buf.text();
            status_after.push(t.rsplit("\r\x1b[2K").next().unwrap_or_default().to_string());
        }
        let estimate = "00:00 · estimate: about 4 min left, at most 8 min";
        assert!(status_after[8].contains(estimate), "{:?}", status_after[8]);
        assert!(
            !status_after[14].contains("estimate"),
            "{:?}",
            status_after[14]
        );
        assert!(status_after[14].contains("final"), "{:?}", status_after[14]);
    }

    #[test]
    fn pairs_added_beside_load_say_so_and_raise_the_pair_count() {
        let measured = |pair: u32| Event::Measured {
            turn: 1,
            role: "candidate".into(),
            pair,
            samples_per_sec: 500.0,
        };
        let events = [
            Event::Phase {
                phase: "measuring".into(),
                turn: Some(1),
                detail: "num_workers 0 → 2 vs incumbent".into(),
            },
            measured(4),
            Event::PairsAdded {
                turn: Some(1),
                pairs: 4,
                up_to: 8,
                median: 1.234,
            },
            measured(5),
        ];
        let out = run("en", false, false, &events);
        assert!(
            out.contains("still open after 4 pairs, its median at ×1.23: measuring up to 8 pairs"),
            "{out}"
        );
        // Before: pair 4 of the view's 4; after: of the raised cap.
        assert!(
            out.contains("pair 4 of 4") && out.contains("pair 5 of 8"),
            "{out}"
        );
        // On a terminal the status line counts to the raised cap too.
        let buf = Buf::default();
        let mut v = View::with_output("en", Box::new(buf.clone()), true, false, Some(200), false)
            .with_max_pairs(4);
        for ev in &events {
            v.show(ev);
        }
        let status = buf.text();
        let last = status.rsplit("\r\x1b[2K").next().unwrap_or_default();
        assert!(last.contains("of 8"), "{last:?}");
    }

    #[test]
    fn plain_mode_keeps_the_low_data_wait_advice() {
        let ev = Event::LowDataWait {
            share: 0.02,
            advice: crate::run_loop::compute_side_advice(),
        };
        let out = run("en", false, false, &[ev]);
        assert!(
            out.contains("zero_grad(set_to_none=True)") && out.contains("cudnn.benchmark"),
            "{out}"
        );
        assert!(out.contains("data_wait is only 2.0% of step time"), "{out}");
    }

    #[test]
    fn the_bench_speaks_through_phases_and_calibration_runs() {
        let events = [
            Event::Phase {
                phase: "bench".into(),
                turn: None,
                detail: "throughput run 1 of 2…".into(),
            },
            Event::CalibrationRun {
                role: "incumbent".into(),
                pair: 3,
                samples_per_sec: 123.45,
            },
        ];
        let out = run("en", false, false, &events);
        assert_eq!(
            out,
            "[00:00] bench: throughput run 1 of 2…\n[00:00]   pair 3 of 4 incumbent      123.5 samples/sec\n"
        );
        // On a terminal they move the status line, and leave no lasting line.
        let out = run("en", true, false, &events);
        assert!(out.contains("bench · throughput run 1 of 2…"), "{out:?}");
        assert!(!out.contains("[00:00]"), "{out:?}");
    }

    #[test]
    fn plain_mode_says_why_the_profiler_table_is_missing() {
        let ev = Event::ProfileUnavailable {
            reason: "the profiled run failed (signal 11)".into(),
        };
        let out = run("en", false, false, &[ev]);
        assert!(
            out.contains("profiler table unavailable: the profiled run failed (signal 11); the baseline goes on"),
            "{out}"
        );
    }

    #[test]
    fn live_mode_redraws_one_status_line_under_the_lasting_lines() {
        let events = a_turn();
        let buf = Buf::default();
        let mut v = View::with_output("en", Box::new(buf.clone()), true, false, Some(100), false)
            .with_max_pairs(4);
        // The status line follows each phase of the turn.
        let mut status_after = Vec::new();
        for ev in &events {
            v.show(ev);
            let t = buf.text();
            let last = t.rsplit("\r\x1b[2K").next().unwrap_or_default().to_string();
            status_after.push(last);
        }
        let at = |i: usize| status_after[i].clone();
        assert!(
            at(1).contains("baseline · throughput run 1 of 3"),
            "{:?}",
            at(1)
        );
        assert!(
            at(5).starts_with(
                "turn 1 · agent · 00:00 · incumbent 400.0 samples/sec · Edit train.py"
            ),
            "{:?}",
            at(5)
        );
        // After the incumbent's run of pair 1, pair 1 is still going.
        assert!(at(8).starts_with("turn 1 · measuring · pair 1 of 4 · 00:00 · incumbent 400.0 samples/sec · last: incumbent 401.0"), "{:?}", at(8));
        assert!(at(9).contains("pair 2 of 4"), "{:?}", at(9));
        assert!(at(11).contains("turn 1 · deciding"), "{:?}", at(11));
        // The kept turn moves the incumbent; the line fits the 60 columns.
        assert!(
            at(14).contains("final") && at(14).contains("incumbent 800.0"),
            "{:?}",
            at(14)
        );
        for s in &status_after {
            assert!(display_width(s) < 100, "{s:?}");
        }
        drop(v);
        let out = buf.text();
        // Lasting lines are printed on a cleared line, and nothing is left after the report.
        assert!(
            out.contains(
                "\r\x1b[2K[00:00] turn 1: num_workers (default) → 2 — kept (faster, 4 runs)\n"
            ),
            "{out:?}"
        );
        assert!(out.ends_with("report: runs/r1/report.md\n"), "{out:?}");
        // Tool calls and measurements stay on the status line.
        assert!(
            !out.contains("tool Edit") && !out.contains("samples/sec\n[00:00] turn 1:   pair"),
            "{out:?}"
        );
        assert!(!out.contains("\x1b[3"), "colour without asking: {out:?}");
    }

    #[test]
    fn colour_only_when_asked() {
        let out = run("en", true, true, &a_turn());
        assert!(out.contains("\x1b[32;1mkept\x1b[0m"), "{out:?}");
        let out = run("en", false, false, &a_turn());
        assert!(!out.contains("\x1b["), "{out:?}");
    }

    #[test]
    fn japanese_words_follow_the_policy_language() {
        let out = run("ja", false, false, &a_turn());
        assert!(
            out.contains("ターン 1: num_workers (default) → 2 — 採用 (faster, 4 回実行)"),
            "{out}"
        );
        assert!(out.contains("ターン 1:   ペア 2/4 candidate"), "{out}");
        assert!(out.contains("ベースライン 400.0 samples/sec"), "{out}");
        assert!(out.contains("停止: iteration limit (1) reached"), "{out}");
        let live = run("ja", true, false, &a_turn()[..10]);
        assert!(live.contains("ターン 1 · 測定中 · ペア 1/4"), "{live:?}");
    }

    #[test]
    fn a_failed_run_leaves_no_status_line_behind() {
        let mut events = a_turn()[..8].to_vec();
        events.push(Event::Stopped {
            reason: "interrupted".into(),
        });
        let out = run("en", true, false, &events);
        assert!(out.ends_with("stopped: interrupted\n"), "{out:?}");
    }

    #[test]
    fn fit_cuts_by_terminal_columns() {
        assert_eq!(fit("abcdef", 10), "abcdef");
        assert_eq!(fit("abcdef", 4), "abc…");
        assert_eq!(fit("ターン一二三", 7), "ターン…");
        assert_eq!(fit("a\nb", 10), "a b");
    }
}
