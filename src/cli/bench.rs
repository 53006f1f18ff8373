//! `tuneloop bench`: the project measured as it is (throughput runs, the
//! ceiling and limits, an optional profile), or an A/A calibration (`--aa`).
//! While it runs it says what it does through the events and the terminal
//! view of `start` (stderr); the figures are printed to stdout at the end.

use std::path::Path;

use anyhow::anyhow;
use serde_json::json;

use super::load::{load_policy, load_workspace};
use super::view::View;
use super::{config_err, BenchArgs, Failure};
use crate::bench::command::Fitted;
use crate::bench::{stats, window, Bencher, Measurement, Mode, Profiled};
use crate::config::{Policy, Workspace};
use crate::error::{exit, BenchError};
use crate::event::Event;
use crate::process::Interrupt;
use crate::run_loop;
use crate::store::FileSet;

pub(super) async fn bench(
    cwd: &Path,
    a: BenchArgs,
    interrupt: &Interrupt,
) -> std::result::Result<i32, Failure> {
    let ws = load_workspace(cwd)?;
    let policy = load_policy(&ws, a.policy.as_deref())?.policy;
    super::load::announce_workspace(&ws, interrupt).await;
    let tmp = std::env::temp_dir().join(format!("tuneloop-bench-{}", std::process::id()));
    let bencher = Bencher::new(&ws, &tmp).map_err(config_err)?;
    let out = bench_inner(&ws, &bencher, &policy, &a, interrupt).await;
    let _ = std::fs::remove_dir_all(&tmp);
    out
}

async fn bench_inner(
    ws: &Workspace,
    configured: &Bencher,
    policy: &Policy,
    a: &BenchArgs,
    interrupt: &Interrupt,
) -> std::result::Result<i32, Failure> {
    // Progress goes through the events and the terminal view `start` uses
    // (stderr); the figures go to stdout once the view is gone.
    let mut view = View::new(&policy.agent.language);
    let mut show = |e: &Event| view.show(e);
    let mut runs = Runs {
        bencher: configured.clone(),
        fitted: None,
        emit: &mut show,
    };
    if a.aa {
        let pairs = a.repeats.unwrap_or(8).max(2);
        let done = runs.calibration(ws, policy, pairs, interrupt).await;
        let (bencher, fitted) = (runs.bencher, runs.fitted);
        drop(view);
        let (cal, timed_steps) = done?;
        if a.json {
            let mut v = serde_json::to_value(&cal).unwrap_or_default();
            v["timed_steps"] = json!(timed_steps);
            v["fitted_to_command"] = json!(fitted);
            println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        } else {
            print_fitted(fitted, &bencher);
            print_timed_steps(timed_steps, bencher.steps);
            for line in calibration_lines(&cal, policy) {
                println!("{line}");
            }
        }
        return Ok(exit::OK);
    }
    let done = runs.throughput(a, policy, interrupt).await;
    let (bencher, fitted) = (runs.bencher, runs.fitted);
    drop(view);
    let t = done?;
    let f = Figures::of(&t.runs, policy);
    if a.json {
        let v = json!({
            "samples_per_sec": f.median, "samples": f.samples, "ci": f.ci, "data_wait_share": f.share,
            "ceiling_sps": f.ceiling, "limits": f.limits, "timed_steps": t.timed_steps, "runs": t.runs, "profile_table": t.profiled.map(|p| p.table).filter(|t| !t.trim().is_empty()),
            "profile_unavailable": t.profile_unavailable,
            "fitted_to_command": fitted,
        });
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        return Ok(exit::OK);
    }
    match (&t.profile_unavailable, &t.profiled) {
        (Some(reason), _) => println!("profiler table unavailable: {reason}"),
        (None, Some(p)) => println!("{}", p.table),
        (None, None) => {}
    }
    println!(
        "samples/sec: {:.1} (median of {}; runs: {})",
        f.median,
        t.runs.len(),
        f.samples
            .iter()
            .map(|x| format!("{x:.1}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if let Some([lo, hi]) = f.ci {
        println!(
            "{:.0}% interval: [{lo:.1}, {hi:.1}]",
            policy.decision.confidence * 100.0
        );
    }
    print_fitted(fitted, &bencher);
    print_timed_steps(t.timed_steps, bencher.steps);
    if let Some(line) = window_line(&t.runs, bencher.window_s) {
        println!("{line}");
    }
    if let Some(line) = crate::bench::fork::start_line(&t.runs, &bencher.fork) {
        println!("{line}");
    }
    for line in machine_lines(&t.runs, &f, &bencher, policy) {
        println!("{line}");
    }
    for line in limit_lines(&f) {
        println!("{line}");
    }
    println!("{NEXT}");
    Ok(exit::OK)
}

/// What a measured project does next, printed last as `init` prints its own.
const NEXT: &str =
    "next: `tuneloop start` to tune: one setting a turn, kept only when measured faster";

/// A bench failure as the command's exit: Ctrl-C, or the baseline's code.
fn baseline_fail(e: BenchError) -> Failure {
    if matches!(e, BenchError::Interrupted) {
        Failure {
            code: exit::INTERRUPTED,
            error: anyhow!("interrupted"),
        }
    } else {
        Failure {
            code: exit::BASELINE,
            error: anyhow!("the bench failed: {e}"),
        }
    }
}

/// The bench as it times runs now, and what it says while it runs.
struct Runs<'e> {
    /// The measure as configured, or fitted to the command's length.
    bencher: Bencher,
    /// A command shorter than warm-up + `[bench] steps`: once a run has met
    /// its end, every run times the steps its batches leave, as in `start`
    /// (`measure::fit_to_command`).
    fitted: Option<Fitted>,
    emit: &'e mut (dyn FnMut(&Event) + Send),
}

/// The throughput runs and what came with them.
struct Throughput {
    runs: Vec<Measurement>,
    /// The steps each run timed (one whole epoch when short epochs widened them).
    timed_steps: u32,
    profiled: Option<Profiled>,
    profile_unavailable: Option<String>,
}

impl Runs<'_> {
    fn say(&mut self, detail: impl Into<String>) {
        (self.emit)(&Event::Phase {
            phase: "bench".into(),
            turn: None,
            detail: detail.into(),
        });
    }

    /// Fits the runs to the command's length, once; whether they were.
    fn fit(&mut self) -> bool {
        if self.fitted.is_some() {
            return false;
        }
        let Some(f) = crate::measure::fit_to_command(&self.bencher) else {
            return false;
        };
        self.say(f.describe());
        self.fitted = Some(f);
        self.bencher = self.bencher.with_steps_of(f.steps);
        true
    }

    /// Short epochs (see `bench::window`): decided once, from the first
    /// run; the measure timing one whole epoch, when it should.
    fn widen(&mut self, first: &Measurement) -> Option<Bencher> {
        let configured = self.bencher.steps;
        let steps = window::whole_epoch_steps(first, configured)?;
        (self.emit)(&Event::WindowWidened { configured, steps });
        Some(self.bencher.with_steps_of(steps))
    }

    /// The command ended before a whole epoch after the warm-up: back to
    /// the configured steps.
    fn narrow(&mut self, wide: &mut Option<Bencher>) {
        if let Some(w) = wide.take() {
            (self.emit)(&Event::WindowNarrowed {
                configured: self.bencher.steps,
                steps: w.steps,
            });
        }
    }

    /// `--aa`: the project against itself, `pairs` interleaved pairs, after a
    /// first run that says what each run times (the calibration times what
    /// the loop's decisions time). The figures and the steps timed.
    async fn calibration(
        &mut self,
        ws: &Workspace,
        policy: &Policy,
        pairs: u32,
        interrupt: &Interrupt,
    ) -> std::result::Result<(Calibration, u32), Failure> {
        let root = std::fs::canonicalize(&ws.project_root).map_err(config_err)?;
        let files = FileSet::capture(&root, &ws.file.project.editable).map_err(config_err)?;
        self.say("first run, to see what each run times…");
        let mut first = self.bencher.measure(Mode::Throughput, interrupt).await;
        if matches!(&first, Err(e) if e.is_too_few_steps()) && self.fit() {
            first = self.bencher.measure(Mode::Throughput, interrupt).await;
        }
        let first = first.map_err(baseline_fail)?;
        let mut wide = self.widen(&first);
        self.say(format!(
            "A/A calibration: the project against itself, {pairs} interleaved pairs ({} runs)",
            pairs * 2
        ));
        let p = loop {
            let b = wide.as_ref().unwrap_or(&self.bencher).clone();
            let emit = &mut self.emit;
            let p =
                run_loop::calibrate(&b, &root, &files, policy, pairs, interrupt, |role, k, v| {
                    emit(&Event::CalibrationRun {
                        role: role.into(),
                        pair: k,
                        samples_per_sec: v,
                    })
                })
                .await;
            match p {
                Err(f) if f.error.is_too_few_steps() && f.runs <= 1 && wide.is_some() => {
                    self.narrow(&mut wide)
                }
                p => break p.map_err(|f| baseline_fail(f.error))?,
            }
        };
        let timed_steps = wide.as_ref().map_or(self.bencher.steps, |w| w.steps);
        let cal = Calibration::from_ratios(&p.ratio.ratios, policy.decision.confidence);
        Ok((cal, timed_steps))
    }

    /// `--profile`: one profiled run. As in a baseline, a profiled run that
    /// crashed, timed out or gave no table is said (why the table is
    /// missing), and the throughput runs go on.
    async fn profiled(
        &mut self,
        interrupt: &Interrupt,
    ) -> std::result::Result<(Option<Profiled>, Option<String>), Failure> {
        self.say("profiled run…");
        let mut run = self.bencher.profile(interrupt).await;
        if matches!(&run, Err(e) if e.is_too_few_steps()) && self.fit() {
            run = self.bencher.profile(interrupt).await;
        }
        let run = match run {
            Err(e) if matches!(e, BenchError::Interrupted) || e.fails_every_run() => {
                return Err(baseline_fail(e))
            }
            run => run,
        };
        let unavailable = crate::bench::table_unavailable(&run);
        if let Err(e) = &run {
            (self.emit)(&Event::Warning {
                message: e.to_string(),
            });
        }
        Ok((run.ok(), unavailable))
    }

    /// The throughput runs (`--repeats`, else the policy's baseline runs),
    /// after the profiled run when asked: the first decides the window, and
    /// a run done again over a widened or narrowed window says so.
    async fn throughput(
        &mut self,
        a: &BenchArgs,
        policy: &Policy,
        interrupt: &Interrupt,
    ) -> std::result::Result<Throughput, Failure> {
        let (profiled, profile_unavailable) = match a.profile {
            true => self.profiled(interrupt).await?,
            false => (None, None),
        };
        let n = a.repeats.unwrap_or(policy.decision.baseline_runs).max(1);
        let mut ms = Vec::new();
        let mut wide = profiled.as_ref().and_then(|p| self.widen(&p.measurement));
        let mut decided = profiled.is_some();
        // Two lines both reading "run 1 of 3" looked like a stutter.
        let mut tried = None;
        while ms.len() < n as usize {
            let i = ms.len();
            let again = if tried == Some(i) { " again" } else { "" };
            tried = Some(i);
            self.say(format!("throughput run {} of {n}{again}…", i + 1));
            let b = wide.as_ref().unwrap_or(&self.bencher);
            match b.measure(Mode::ThroughputWithCeiling, interrupt).await {
                Ok(m) if !decided => {
                    decided = true;
                    // Widened: this run timed the configured steps, so it is done again.
                    wide = self.widen(&m);
                    if wide.is_none() {
                        ms.push(m);
                    }
                }
                Ok(m) => ms.push(m),
                Err(e) if e.is_too_few_steps() && i == 0 && wide.is_some() => {
                    self.narrow(&mut wide)
                }
                // The command met its end before the figure: the run again
                // within its batches.
                Err(e) if e.is_too_few_steps() && wide.is_none() => {
                    if !self.fit() {
                        return Err(baseline_fail(e));
                    }
                }
                Err(e) => return Err(baseline_fail(e)),
            }
        }
        Ok(Throughput {
            timed_steps: wide.as_ref().map_or(self.bencher.steps, |w| w.steps),
            runs: ms,
            profiled,
            profile_unavailable,
        })
    }
}

/// The throughput runs' figures.
struct Figures {
    samples: Vec<f64>,
    median: f64,
    /// The interval of the median at the policy's confidence (two runs or more).
    ci: Option<[f64; 2]>,
    share: Option<f64>,
    ceiling: Option<f64>,
    limits: crate::bench::limits::ThroughputLimits,
}

impl Figures {
    fn of(ms: &[Measurement], policy: &Policy) -> Figures {
        let s: Vec<f64> = ms.iter().map(|m| m.samples_per_sec).collect();
        let med = stats::median(&s);
        let share = {
            let v: Vec<f64> = ms.iter().filter_map(|m| m.data_wait_share).collect();
            (!v.is_empty()).then(|| stats::median(&v))
        };
        let ceiling = crate::bench::median_ceiling(ms);
        let ci = (s.len() >= 2).then(|| {
            let c = stats::log_t_interval(
                &s.iter().map(|x| x / med).collect::<Vec<_>>(),
                policy.decision.confidence,
            );
            [c[0] * med, c[1] * med]
        });
        Figures {
            limits: crate::bench::limits::ThroughputLimits::of(ceiling, ms, med),
            samples: s,
            median: med,
            ci,
            share,
            ceiling,
        }
    }
}

/// The A/A figures, and the noise threshold they suggest.
fn calibration_lines(cal: &Calibration, policy: &Policy) -> Vec<String> {
    vec![
        format!(
            "A/A ratios: {}",
            cal.ratios
                .iter()
                .map(|r| format!("{r:.3}"))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        format!(
            "median {:.3}, min {:.3}, max {:.3}, sd of ln(ratio) {:.4}",
            cal.median, cal.min, cal.max, cal.sd_log
        ),
        format!(
            "{:.0}% interval of the mean ratio: [{:.3}, {:.3}]",
            policy.decision.confidence * 100.0,
            cal.ci[0],
            cal.ci[1]
        ),
        format!(
            "suggested noise_threshold: {:.3} (policy has {:.3})",
            cal.suggested_noise_threshold, policy.decision.noise_threshold
        ),
    ]
}

/// The warm-up the runs took, and the last run's machine, loaders, data
/// and workers, with the compute-side advice when data_wait is small.
fn machine_lines(
    ms: &[Measurement],
    f: &Figures,
    bencher: &Bencher,
    policy: &Policy,
) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(w) = ms.iter().filter_map(|m| m.warmup_steps).max() {
        if w > bencher.warmup {
            out.push(format!(
                "warm-up: {w} steps, not the {} of [bench] warmup_steps: a worker's first batches cost more, so each worker serves a few before the timing starts",
                bencher.warmup
            ));
        }
    }
    let (Some(m), Some(sh)) = (ms.last(), f.share) else {
        return out;
    };
    let n = ms.len() as f64;
    let dw = ms.iter().filter_map(|m| m.data_wait_s).sum::<f64>() / n;
    let ts = ms.iter().filter_map(|m| m.train_step_s).sum::<f64>() / n;
    out.push(format!(
        "data_wait: {:.1}% of step time ({dw:.3} s), train_step: {ts:.3} s per run",
        sh * 100.0
    ));
    out.push(format!(
        "device: {}, torch {}, {} CPUs{}, num_workers={}",
        m.device.as_deref().unwrap_or("?"),
        m.torch_version.as_deref().unwrap_or("?"),
        m.cpu_count.unwrap_or(0),
        crate::bench::limits::usable_cores_note(m),
        m.num_workers().map(|n| n.to_string()).unwrap_or("?".into())
    ));
    out.extend(crate::bench::command::describe_loaders(m));
    out.extend(crate::bench::identity::Reproduced::of(ms).describe());
    if let (Some(n), Some(per)) = (m.live_workers.filter(|&n| n > 0), m.memory_per_worker()) {
        out.push(format!(
            "workers: {n} alive, {:.0} MB each (PSS: what one more adds){}",
            per / 1e6,
            m.mem_available_bytes
                .map(|f| format!(", {:.1} GB free on the machine", f as f64 / 1e9))
                .unwrap_or_default()
        ));
    }
    if sh < policy.decision.stop_when_data_wait_below {
        out.push(
            "data_wait is small: DataLoader tuning cannot help much. Compute-side candidates:"
                .into(),
        );
        out.extend(
            run_loop::compute_side_advice()
                .into_iter()
                .map(|c| format!("  - {c}")),
        );
    }
    out
}

/// How far the median is from each limit on throughput, and which binds.
fn limit_lines(f: &Figures) -> Vec<String> {
    use crate::bench::limits::Binding;
    let (med, limits) = (f.median, &f.limits);
    let mut out = Vec::new();
    if let Some(c) = f.ceiling {
        out.push(format!(
            "ceiling (step alone, one batch in memory): {c:.1} samples/sec; now at {:.1}% of it",
            med / c * 100.0
        ));
    }
    if let (Some(s), Some(r)) = (limits.step_limit_sps, limits.receive_s_per_sample) {
        out.push(format!(
            "with receiving each batch from the workers ({:.0} µs a sample in the training process, serial with the step): {s:.1} samples/sec; now at {:.1}% of it",
            r * 1e6,
            med / s * 100.0
        ));
        if let Some(b) = limits.step_slowed() {
            out.push(format!(
                "  beside the workers the step itself ran at {b:.1} samples/sec: they share its cores"
            ));
        }
    }
    if let (Some(c), Some(cores), Some(cost)) = (
        limits.cpu_limit_sps,
        limits.usable_cores,
        limits.cpu_s_per_sample,
    ) {
        out.push(format!(
            "CPU limit (what {} can feed at {:.0} µs of CPU per sample): {c:.1} samples/sec; now at {:.1}% of it",
            crate::bench::limits::cores_text(cores, limits.cores_limited_by.as_deref()),
            cost * 1e6,
            med / c * 100.0
        ));
        if let Some(o) = limits.others_cores.filter(|o| *o >= 0.05) {
            out.push(format!(
                "  other processes kept {o:.1} cores busy meanwhile: the rest feeds about {:.1} samples/sec",
                ((cores - o).max(0.0)) / cost
            ));
        }
    }
    if let (Some(e), Some(r)) = (limits.epoch_limit_sps, &limits.epoch_restarts) {
        out.push(format!(
            "with the epochs' restarts ({}): {e:.1} samples/sec; now at {:.1}% of it",
            r.text(),
            med / e * 100.0
        ));
    }
    if let Some((b, _)) = limits.lower() {
        out.push(format!(
            "binding limit: {}",
            match b {
                Binding::StepAlone if limits.step_limit_sps.is_some() =>
                    "the step alone with receiving its batches (the training process's own serial work; more loader speed cannot pass it)",
                Binding::StepAlone => "the step alone (more loader speed cannot pass it)",
                Binding::Cpu => "the CPU (what the cores can feed; no loader setting passes it)",
                Binding::EpochRestarts =>
                    "the CPU with the epochs' restarts (every epoch starts with an empty pipeline: the cores idle until its first batch)",
            }
        ));
    }
    out
}

/// The line saying the runs were cut to the command's length, and the
/// flag that gives longer runs.
fn print_fitted(fitted: Option<Fitted>, bencher: &Bencher) {
    if let Some(f) = fitted {
        // The hint names the command's batches and the flag that runs longer.
        let why = bencher
            .length_hint()
            .unwrap_or_else(|| format!("the command has {} training batches", f.batches));
        println!(
            "measured {} steps a run, not the {} of [bench] steps: {why}",
            f.steps, f.configured
        );
    }
}

/// The "timed steps" line, when short epochs widened the runs past `[bench] steps`.
fn print_timed_steps(timed: u32, configured: u32) {
    if timed != configured {
        let l = &crate::words::ENGLISH.report;
        println!(
            "{}: {}",
            l.timed_steps.to_lowercase(),
            l.timed_steps_epoch
                .replace("{steps}", &timed.to_string())
                .replace("{configured}", &configured.to_string())
        );
    }
}

/// How long the runs' timed windows were, when `[bench] window_s`
/// lengthened any of them past its steps or ended any inside them.
fn window_line(runs: &[Measurement], window_s: f64) -> Option<String> {
    let lengthened = runs.iter().any(|m| m.window_stretches.unwrap_or(1) > 1);
    let by_time = runs.iter().filter(|m| m.window_by_time).count();
    if !lengthened && by_time == 0 {
        return None;
    }
    let steps: Vec<f64> = runs.iter().filter_map(|m| m.steps).map(f64::from).collect();
    let walls: Vec<f64> = runs.iter().filter_map(|m| m.wall_s).collect();
    let how = match (lengthened, by_time) {
        (true, 0) => "lengthened by whole stretches of [bench] steps".to_string(),
        (false, n) => format!(
            "{n} of {} ended before [bench] steps, at {} × [bench] window_s",
            runs.len(),
            crate::bench::window::SLOW_AFTER
        ),
        (true, n) => format!(
            "lengthened by whole stretches of [bench] steps, {n} of {} ended before them at {} × [bench] window_s",
            runs.len(),
            crate::bench::window::SLOW_AFTER
        ),
    };
    Some(format!(
        "timed window: {:.0} steps, {:.2} s a run (median), {how}; [bench] window_s = {window_s} s",
        crate::bench::stats::median(&steps),
        crate::bench::stats::median(&walls),
    ))
}

// The A/A figures are pure statistics: they live (and are tested) in bench::stats.
pub use crate::bench::stats::Calibration;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_line_shows_only_a_lengthened_window() {
        let plain = Measurement {
            steps: Some(40),
            wall_s: Some(0.2),
            ..Measurement::default()
        };
        assert_eq!(window_line(&[plain.clone(), plain.clone()], 1.0), None);
        let long = Measurement {
            steps: Some(240),
            window_stretches: Some(6),
            wall_s: Some(1.1),
            ..Measurement::default()
        };
        assert_eq!(
            window_line(&[long.clone(), long.clone(), plain.clone()], 1.0).unwrap(),
            "timed window: 240 steps, 1.10 s a run (median), lengthened by whole stretches of [bench] steps; [bench] window_s = 1 s"
        );
        // A slow run's window ended by time, in its first stretch.
        let slow = Measurement {
            steps: Some(26),
            window_by_time: true,
            wall_s: Some(2.0),
            ..Measurement::default()
        };
        assert_eq!(
            window_line(&[slow.clone(), slow.clone(), plain], 1.0).unwrap(),
            "timed window: 26 steps, 2.00 s a run (median), 2 of 3 ended before [bench] steps, at 2 × [bench] window_s; [bench] window_s = 1 s"
        );
        assert!(window_line(&[long, slow], 1.0)
            .unwrap()
            .contains("lengthened by whole stretches of [bench] steps, 1 of 2 ended before them at 2 × [bench] window_s"));
    }

    fn run(sps: f64, share: f64, ceiling: Option<f64>) -> Measurement {
        Measurement {
            samples_per_sec: sps,
            data_wait_share: Some(share),
            data_wait_s: Some(share),
            train_step_s: Some(1.0 - share),
            ceiling_sps: ceiling,
            cpu_count: Some(4),
            device: Some("cpu".into()),
            torch_version: Some("2.13".into()),
            ..Default::default()
        }
    }

    #[test]
    fn the_figures_are_the_median_its_interval_and_the_ceiling() {
        let policy = Policy::default();
        let ms = [
            run(90.0, 0.4, Some(200.0)),
            run(100.0, 0.5, Some(300.0)),
            run(110.0, 0.6, None),
        ];
        let f = Figures::of(&ms, &policy);
        assert_eq!(f.samples, vec![90.0, 100.0, 110.0]);
        assert_eq!(f.median, 100.0);
        assert_eq!(f.share, Some(0.5));
        assert_eq!(
            f.ceiling,
            Some(250.0),
            "the median of the runs that had one"
        );
        let [lo, hi] = f.ci.expect("three runs give an interval");
        assert!(lo < 100.0 && hi > 100.0, "{lo} {hi}");
        // One run: no interval.
        assert_eq!(Figures::of(&ms[..1], &policy).ci, None);
        // The ceiling is the binding limit here, and the lines say so.
        let lines = limit_lines(&f);
        assert_eq!(
            lines[0],
            "ceiling (step alone, one batch in memory): 250.0 samples/sec; now at 40.0% of it"
        );
        assert_eq!(
            lines.last().unwrap(),
            "binding limit: the step alone (more loader speed cannot pass it)"
        );
    }

    #[test]
    fn a_small_data_wait_lists_the_compute_side_candidates() {
        let policy = Policy::default();
        let small = policy.decision.stop_when_data_wait_below / 2.0;
        let ms = [run(100.0, small, None)];
        let f = Figures::of(&ms, &policy);
        let bencher_warmup = |w| Bencher {
            warmup: w,
            ..test_bencher()
        };
        let lines = machine_lines(&ms, &f, &bencher_warmup(5), &policy);
        assert!(lines[0].starts_with("data_wait: "), "{lines:?}");
        assert!(
            lines[1].starts_with("device: cpu, torch 2.13, 4 CPUs"),
            "{lines:?}"
        );
        let at = lines
            .iter()
            .position(|l| l.starts_with("data_wait is small"))
            .expect("the advice");
        assert_eq!(lines.len() - at - 1, run_loop::compute_side_advice().len());
        assert!(lines[at + 1].starts_with("  - "));
        // A large share: no advice.
        let ms = [run(100.0, 0.8, None)];
        let f = Figures::of(&ms, &policy);
        let lines = machine_lines(&ms, &f, &bencher_warmup(5), &policy);
        assert!(!lines.iter().any(|l| l.starts_with("data_wait is small")));
        // Runs that warmed up longer than configured say why.
        let ms = [Measurement {
            warmup_steps: Some(16),
            ..run(100.0, 0.8, None)
        }];
        let lines = machine_lines(&ms, &f, &bencher_warmup(2), &policy);
        assert!(
            lines[0].starts_with("warm-up: 16 steps, not the 2 of [bench] warmup_steps"),
            "{lines:?}"
        );
    }

    #[test]
    fn the_calibration_lines_give_the_ratios_and_the_suggested_threshold() {
        let policy = Policy::default();
        let cal = Calibration::from_ratios(&[1.0, 1.02, 0.98, 1.01], policy.decision.confidence);
        let lines = calibration_lines(&cal, &policy);
        assert_eq!(lines[0], "A/A ratios: 1.000 1.020 0.980 1.010");
        assert!(
            lines[1].starts_with("median 1.005, min 0.980, max 1.020"),
            "{}",
            lines[1]
        );
        assert!(
            lines[2].contains("interval of the mean ratio: ["),
            "{}",
            lines[2]
        );
        assert!(
            lines[3].starts_with("suggested noise_threshold: ")
                && lines[3].ends_with(&format!(
                    "(policy has {:.3})",
                    policy.decision.noise_threshold
                )),
            "{}",
            lines[3]
        );
    }

    /// A bencher for the figures' lines (never run).
    fn test_bencher() -> Bencher {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("train.py"), "").unwrap();
        std::fs::write(
            d.path().join("tuneloop.toml"),
            "[project]\nroot = \".\"\neditable = [\"train.py\"]\n\n[bench]\nentry = \"train:build\"\n",
        )
        .unwrap();
        let ws = Workspace::load(d.path()).unwrap();
        Bencher::new(&ws, &d.path().join("harness")).unwrap()
    }
}
