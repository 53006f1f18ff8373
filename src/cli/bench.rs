//! `tuneloop bench`: the project measured as it is (throughput runs, the
//! ceiling and limits, an optional profile), or an A/A calibration (`--aa`).

use std::path::Path;

use anyhow::anyhow;
use serde_json::json;

use super::load::{load_policy, load_workspace};
use super::{config_err, BenchArgs, Failure};
use crate::bench::command::Fitted;
use crate::bench::{stats, window, Bencher, Measurement, Mode};
use crate::config::{Policy, Workspace};
use crate::error::{exit, BenchError};
use crate::process::Interrupt;
use crate::run_loop;
use crate::store::FileSet;

pub(super) async fn bench(
    cwd: &Path,
    a: BenchArgs,
    interrupt: &Interrupt,
) -> std::result::Result<i32, Failure> {
    let ws = load_workspace(cwd)?;
    let (_, policy) = load_policy(&ws, a.policy.as_deref())?;
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
    let baseline_fail = |e: BenchError| {
        if matches!(e, crate::error::BenchError::Interrupted) {
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
    };
    // A command shorter than warm-up + `[bench] steps`: once a run has met
    // its end, every run times the steps its batches leave, as in `start`
    // (`measure::fit_to_command`). The bencher below is the fitted one then.
    let mut bencher = configured.clone();
    let mut fitted: Option<Fitted> = None;
    let fit = |b: &Bencher, fitted: &mut Option<Fitted>| {
        let f = crate::measure::fit_to_command(b).filter(|_| fitted.is_none())?;
        eprintln!("{}", f.describe());
        *fitted = Some(f);
        Some(Bencher {
            steps: f.steps,
            ..b.clone()
        })
    };
    // Short epochs (see `bench::window`): decided once, from the first run;
    // the A/A calibration times what the loop's decisions time.
    let words = &crate::words::ENGLISH.view;
    let say = |text: &str, steps: u32, configured: u32| {
        eprintln!(
            "{}",
            text.replace("{steps}", &steps.to_string())
                .replace("{configured}", &configured.to_string())
        );
    };
    let widen = |bencher: &Bencher, first: &Measurement| {
        let steps = window::whole_epoch_steps(first, bencher.steps)?;
        say(words.window_widened, steps, bencher.steps);
        Some(Bencher {
            steps,
            ..bencher.clone()
        })
    };
    if a.aa {
        let pairs = a.repeats.unwrap_or(8).max(2);
        let root = std::fs::canonicalize(&ws.project_root).map_err(config_err)?;
        let files = FileSet::capture(&root, &ws.file.project.editable).map_err(config_err)?;
        eprintln!("first run, to see what each run times…");
        let mut first = bencher.measure(Mode::Throughput, interrupt).await;
        if matches!(&first, Err(e) if e.is_too_few_steps()) {
            if let Some(b) = fit(&bencher, &mut fitted) {
                bencher = b;
                first = bencher.measure(Mode::Throughput, interrupt).await;
            }
        }
        let first = first.map_err(baseline_fail)?;
        let mut wide = widen(&bencher, &first);
        eprintln!(
            "A/A calibration: the project against itself, {pairs} interleaved pairs ({} runs)",
            pairs * 2
        );
        let p = loop {
            let b = wide.as_ref().unwrap_or(&bencher);
            let p =
                run_loop::calibrate(b, &root, &files, policy, pairs, interrupt, |role, k, v| {
                    eprintln!("  pair {k} {role:<9} {v:>10.1} samples/sec");
                })
                .await;
            match p {
                Err(f) if f.error.is_too_few_steps() && f.runs <= 1 && wide.is_some() => {
                    if let Some(w) = wide.take() {
                        say(words.window_narrowed, w.steps, bencher.steps);
                    }
                }
                p => break p.map_err(|f| baseline_fail(f.error))?,
            }
        };
        let timed_steps = wide.as_ref().map(|w| w.steps).unwrap_or(bencher.steps);
        let cal = Calibration::from_ratios(&p.ratio.ratios, policy.decision.confidence);
        if a.json {
            let mut v = serde_json::to_value(&cal).unwrap_or_default();
            v["timed_steps"] = json!(timed_steps);
            v["fitted_to_command"] = json!(fitted);
            println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        } else {
            print_fitted(fitted, &bencher);
            print_timed_steps(timed_steps, bencher.steps);
            println!(
                "A/A ratios: {}",
                cal.ratios
                    .iter()
                    .map(|r| format!("{r:.3}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            );
            println!(
                "median {:.3}, min {:.3}, max {:.3}, sd of ln(ratio) {:.4}",
                cal.median, cal.min, cal.max, cal.sd_log
            );
            println!(
                "{:.0}% interval of the mean ratio: [{:.3}, {:.3}]",
                policy.decision.confidence * 100.0,
                cal.ci[0],
                cal.ci[1]
            );
            println!(
                "suggested noise_threshold: {:.3} (policy has {:.3})",
                cal.suggested_noise_threshold, policy.decision.noise_threshold
            );
        }
        return Ok(exit::OK);
    }
    let mut profiled = None;
    let mut profile_unavailable = None;
    if a.profile {
        eprintln!("profiled run…");
        // As in a baseline: a profiled run that crashed, timed out or gave
        // no table is said, and the throughput runs go on.
        let mut run = bencher.profile(interrupt).await;
        if matches!(&run, Err(e) if e.is_too_few_steps()) {
            if let Some(b) = fit(&bencher, &mut fitted) {
                bencher = b;
                run = bencher.profile(interrupt).await;
            }
        }
        let run = match run {
            Err(e) if matches!(e, BenchError::Interrupted) || e.fails_every_run() => {
                return Err(baseline_fail(e))
            }
            run => run,
        };
        profile_unavailable = crate::bench::table_unavailable(&run);
        if let Err(e) = &run {
            eprintln!("{e}");
        }
        match &profile_unavailable {
            Some(reason) if !a.json => println!("profiler table unavailable: {reason}"),
            None if !a.json => {
                if let Ok(p) = &run {
                    println!("{}", p.table);
                }
            }
            _ => {}
        }
        profiled = run.ok();
    }
    let n = a.repeats.unwrap_or(policy.decision.baseline_runs).max(1);
    let mut ms = Vec::new();
    let mut wide = profiled
        .as_ref()
        .and_then(|p| widen(&bencher, &p.measurement));
    let mut decided = profiled.is_some();
    // A run done again (over a widened or narrowed window) says so: two lines
    // both reading "run 1 of 3" looked like a stutter.
    let mut tried = None;
    while ms.len() < n as usize {
        let i = ms.len();
        let again = if tried == Some(i) { " again" } else { "" };
        tried = Some(i);
        eprintln!("throughput run {} of {n}{again}…", i + 1);
        let b = wide.as_ref().unwrap_or(&bencher);
        match b.measure(Mode::ThroughputWithCeiling, interrupt).await {
            Ok(m) if !decided => {
                decided = true;
                // Widened: this run timed the configured steps, so it is done again.
                wide = widen(&bencher, &m);
                if wide.is_none() {
                    ms.push(m);
                }
            }
            Ok(m) => ms.push(m),
            Err(e) if e.is_too_few_steps() && i == 0 && wide.is_some() => {
                if let Some(w) = wide.take() {
                    say(words.window_narrowed, w.steps, bencher.steps);
                }
            }
            // The command met its end before the figure: the run again
            // within its batches.
            Err(e) if e.is_too_few_steps() && wide.is_none() => match fit(&bencher, &mut fitted) {
                Some(b) => bencher = b,
                None => return Err(baseline_fail(e)),
            },
            Err(e) => return Err(baseline_fail(e)),
        }
    }
    let timed_steps = wide.as_ref().map(|w| w.steps).unwrap_or(bencher.steps);
    let s: Vec<f64> = ms.iter().map(|m| m.samples_per_sec).collect();
    let med = stats::median(&s);
    let share = {
        let v: Vec<f64> = ms.iter().filter_map(|m| m.data_wait_share).collect();
        (!v.is_empty()).then(|| stats::median(&v))
    };
    let ceiling = crate::bench::median_ceiling(&ms);
    let limits = crate::bench::limits::ThroughputLimits::of(ceiling, &ms, med);
    let ci = if s.len() >= 2 {
        let c = stats::log_t_interval(
            &s.iter().map(|x| x / med).collect::<Vec<_>>(),
            policy.decision.confidence,
        );
        Some([c[0] * med, c[1] * med])
    } else {
        None
    };
    if a.json {
        let v = json!({
            "samples_per_sec": med, "samples": s, "ci": ci, "data_wait_share": share,
            "ceiling_sps": ceiling, "limits": limits, "timed_steps": timed_steps, "runs": ms, "profile_table": profiled.map(|p| p.table).filter(|t| !t.trim().is_empty()),
            "profile_unavailable": profile_unavailable,
            "fitted_to_command": fitted,
        });
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        return Ok(exit::OK);
    }
    println!(
        "samples/sec: {med:.1} (median of {n}; runs: {})",
        s.iter()
            .map(|x| format!("{x:.1}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if let Some([lo, hi]) = ci {
        println!(
            "{:.0}% interval: [{lo:.1}, {hi:.1}]",
            policy.decision.confidence * 100.0
        );
    }
    print_fitted(fitted, &bencher);
    print_timed_steps(timed_steps, bencher.steps);
    if let Some(w) = ms.iter().filter_map(|m| m.warmup_steps).max() {
        if w > bencher.warmup {
            println!(
                "warm-up: {w} steps, not the {} of [bench] warmup_steps: a worker's first batches cost more, so each worker serves a few before the timing starts",
                bencher.warmup
            );
        }
    }
    if let (Some(m), Some(sh)) = (ms.last(), share) {
        let dw = ms.iter().filter_map(|m| m.data_wait_s).sum::<f64>() / n as f64;
        let ts = ms.iter().filter_map(|m| m.train_step_s).sum::<f64>() / n as f64;
        println!(
            "data_wait: {:.1}% of step time ({dw:.3} s), train_step: {ts:.3} s per run",
            sh * 100.0
        );
        println!(
            "device: {}, torch {}, {} CPUs{}, num_workers={}",
            m.device.as_deref().unwrap_or("?"),
            m.torch_version.as_deref().unwrap_or("?"),
            m.cpu_count.unwrap_or(0),
            crate::bench::limits::usable_cores_note(m),
            m.num_workers().map(|n| n.to_string()).unwrap_or("?".into())
        );
        for line in crate::bench::command::describe_loaders(m) {
            println!("{line}");
        }
        if let Some(line) = crate::bench::identity::Reproduced::of(&ms).describe() {
            println!("{line}");
        }
        if let (Some(n), Some(per)) = (m.live_workers.filter(|&n| n > 0), m.memory_per_worker()) {
            println!(
                "workers: {n} alive, {:.0} MB each (PSS: what one more adds){}",
                per / 1e6,
                m.mem_available_bytes
                    .map(|f| format!(", {:.1} GB free on the machine", f as f64 / 1e9))
                    .unwrap_or_default()
            );
        }
        if sh < policy.decision.stop_when_data_wait_below {
            println!(
                "data_wait is small: DataLoader tuning cannot help much. Compute-side candidates:"
            );
            for c in run_loop::compute_side_advice() {
                println!("  - {c}");
            }
        }
    }
    if let Some(c) = ceiling {
        println!(
            "ceiling (step alone, one batch in memory): {c:.1} samples/sec; now at {:.1}% of it",
            med / c * 100.0
        );
    }
    if let (Some(s), Some(r)) = (limits.step_limit_sps, limits.receive_s_per_sample) {
        println!(
            "with receiving each batch from the workers ({:.0} µs a sample in the training process, serial with the step): {s:.1} samples/sec; now at {:.1}% of it",
            r * 1e6,
            med / s * 100.0
        );
        if let Some(b) = limits.step_slowed() {
            println!("  beside the workers the step itself ran at {b:.1} samples/sec: they share its cores");
        }
    }
    if let (Some(c), Some(cores), Some(cost)) = (
        limits.cpu_limit_sps,
        limits.usable_cores,
        limits.cpu_s_per_sample,
    ) {
        println!(
            "CPU limit (what {} can feed at {:.0} µs of CPU per sample): {c:.1} samples/sec; now at {:.1}% of it",
            crate::bench::limits::cores_text(cores, limits.cores_limited_by.as_deref()),
            cost * 1e6,
            med / c * 100.0
        );
        if let Some(o) = limits.others_cores.filter(|o| *o >= 0.05) {
            println!(
                "  other processes kept {o:.1} cores busy meanwhile: the rest feeds about {:.1} samples/sec",
                ((cores - o).max(0.0)) / cost
            );
        }
    }
    if let (Some(e), Some(r)) = (limits.epoch_limit_sps, &limits.epoch_restarts) {
        println!(
            "with the epochs' restarts ({}): {e:.1} samples/sec; now at {:.1}% of it",
            r.text(),
            med / e * 100.0
        );
    }
    if let Some((b, _)) = limits.lower() {
        println!(
            "binding limit: {}",
            match b {
                crate::bench::limits::Binding::StepAlone if limits.step_limit_sps.is_some() =>
                    "the step alone with receiving its batches (the training process's own serial work; more loader speed cannot pass it)",
                crate::bench::limits::Binding::StepAlone =>
                    "the step alone (more loader speed cannot pass it)",
                crate::bench::limits::Binding::Cpu =>
                    "the CPU (what the cores can feed; no loader setting passes it)",
                crate::bench::limits::Binding::EpochRestarts =>
                    "the CPU with the epochs' restarts (every epoch starts with an empty pipeline: the cores idle until its first batch)",
            }
        );
    }
    Ok(exit::OK)
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

// The A/A figures are pure statistics: they live (and are tested) in bench::stats.
pub use crate::bench::stats::Calibration;
